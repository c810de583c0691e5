"""Stage 1: the ink mask. Sauvola for grey and colour pages, identity for bilevel ones;
connected components far below the text size (specks) are removed."""

from __future__ import annotations

import cv2
import numpy as np

from .arrays import nonzero_index
from .components import weighted_median
from .model import Page
from .params import Parameters

#: Sauvola's dynamic range of the standard deviation for 8-bit images.
_SAUVOLA_R = 128.0


def sauvola_threshold(gray: np.ndarray, window: int, k: float = 0.2) -> np.ndarray:
    """Sauvola threshold ``(H, W)`` float32 of a uint8 page with an odd ``window`` (pixels).

    Box filters on the image and its square (O(1) per pixel whatever the window); every step
    is an OpenCV call (no NumPy temporaries: half the time on a 10-megapixel page)."""
    img = gray.astype(np.float32)
    mean = cv2.boxFilter(img, cv2.CV_32F, (window, window), borderType=cv2.BORDER_REFLECT)
    sq = cv2.sqrBoxFilter(img, cv2.CV_32F, (window, window), borderType=cv2.BORDER_REFLECT)
    std = cv2.sqrt(cv2.max(cv2.subtract(sq, cv2.multiply(mean, mean)), 0.0))
    # mean (1 + k (std / R - 1)) = mean ((1 - k) + (k / R) std)
    return cv2.multiply(mean, cv2.addWeighted(std, k / _SAUVOLA_R, std, 0.0, 1.0 - k))


def stretch_contrast(gray: np.ndarray) -> np.ndarray:
    """Map the darkest 0.5 % of the page to 0 and the paper (median) to 255 when the page is
    faint: Sauvola's fixed dynamic range (R = 128) misses pencil on light paper (CREMMA)."""
    lo, paper = np.percentile(gray[::4, ::4], [0.5, 50.0])
    if paper - lo >= 128 or paper <= lo:
        return gray
    lut = np.clip((np.arange(256) - lo) * 255.0 / (paper - lo), 0, 255).astype(np.uint8)
    return lut[gray]


def otsu_ink(gray: np.ndarray) -> np.ndarray:
    """Global Otsu binarisation: bool ``(H, W)``, True = ink (dark)."""
    _, binary = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    return binary > 0


def label_components(ink: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """8-connected components: labels int32 ``(H, W)`` and stats ``(n+1, 5)`` (x, y, w, h, area)."""
    n, labels, stats, _ = cv2.connectedComponentsWithStats(ink.view(np.uint8), connectivity=8,
                                                          ltype=cv2.CV_32S)
    return labels, stats


def text_height(stats: np.ndarray, shape: tuple[int, int]) -> float:
    """Area-weighted median height (pixels) of the components that can be text.

    Area weighting keeps dots and noise from pulling the estimate down (notes: 16.5 px ->
    40 px on kraken-sample); page-sized blobs (borders, rulers) are ignored."""
    h, w = shape
    s = stats[1:]
    ok = (s[:, 4] >= 4) & (s[:, 3] < h / 4) & (s[:, 2] < w / 2)
    if not ok.any():
        return 0.0
    return weighted_median(s[ok, 3].astype(float), s[ok, 4].astype(float))


def remove_specks(labels: np.ndarray, stats: np.ndarray, params: Parameters
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Drop components smaller than ``speck_ratio`` x the area-weighted median component area
    (and than ``min_speck_area``); relabel the rest 1..n. Returns (ink, labels)."""
    if len(stats) <= 1:
        return labels > 0, labels
    out = keep_components(labels, _speck_keep(stats, params))
    return out > 0, out


def _speck_keep(stats: np.ndarray, params: Parameters) -> np.ndarray:
    """Which components ``(n+1,)`` :func:`remove_specks` keeps (entry 0, the background, False)."""
    area = stats[1:, 4].astype(float)
    if len(area) == 0:
        return np.zeros(1, bool)
    median_area = weighted_median(area, area)
    min_area = max(params.min_speck_area, params.speck_ratio * median_area)
    return np.concatenate([[False], area >= min_area])


def keep_components(labels: np.ndarray, keep: np.ndarray, in_place: bool = False) -> np.ndarray:
    """Labels ``(H, W)`` with only the components where ``keep`` ``(n+1,)`` is True,
    renumbered 1..k in their order (``keep[0]``, the background, must be False).
    ``in_place``: relabel ``labels`` itself (int32, C-contiguous) and return it."""
    relabel = np.zeros(len(keep), np.int32)
    relabel[keep] = np.arange(1, int(keep.sum()) + 1, dtype=np.int32)
    # Relabel the ink pixels only: a table lookup over every pixel of the page costs 3 times
    # more, and writing into a fresh page-sized array first faults in all its memory.
    ink = nonzero_index(labels)
    if in_place and labels.dtype == np.int32 and labels.flags.c_contiguous:
        out = labels
    else:
        out = np.zeros(labels.shape, np.int32)
    out.ravel()[ink] = relabel[labels.ravel()[ink]]
    return out


def ink_mask(page: Page, params: Parameters) -> tuple[np.ndarray, np.ndarray]:
    """Ink mask bool ``(H, W)`` and component labels int32 ``(H, W)`` of a page.

    Grey/colour pages: a first Otsu pass measures the text height, which sets the Sauvola
    window (``sauvola_window`` x H_cc, the notes' 2-3 x text height)."""
    ink, labels, _ = ink_components(page, params)
    return ink, labels


def ink_components(page: Page, params: Parameters) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`ink_mask` plus each component's box and area ``(n+1, 5)`` (x, y, w, h, area;
    row 0 the background), read off the labelling pass instead of a second scan of the page."""
    gray = page.gray
    if page.bilevel:
        ink = gray < 128
    else:
        gray = stretch_contrast(gray)
        rough = otsu_ink(gray)
        _, stats = label_components(rough)
        h_text = text_height(stats, gray.shape)
        window = int(round(params.sauvola_window * max(h_text, 8.0))) | 1
        window = max(15, min(window, (min(gray.shape) // 2) * 2 - 1 if min(gray.shape) > 16 else 15))
        ink = cv2.compare(gray.astype(np.float32), sauvola_threshold(gray, window, params.sauvola_k),
                          cv2.CMP_LT) > 0
        # Flat bright paper has std ~ 0, where Sauvola keeps pixels 20 % darker than the local
        # mean; also require them darker than Otsu's global paper level to avoid paper texture.
        if rough.any():
            paper_level = float(np.median(gray[~rough])) if (~rough).any() else 255.0
            ink &= gray < paper_level * (1.0 - params.sauvola_k / 2)
    labels, stats = label_components(ink)
    # Non-text removal, then speck removal on what is left (relabelling keeps the components'
    # order, so their stats are the kept rows), relabelled in one pass over the page (each
    # relabelling is a gather over every pixel).
    keep = _non_text_keep(stats, gray.shape)
    kept = np.flatnonzero(keep)
    keep[kept] = _speck_keep(np.concatenate([stats[:1], stats[kept]]), params)[1:]
    labels = keep_components(labels, keep, in_place=True)  # the labelling's own array
    return labels > 0, labels, np.concatenate([stats[:1], stats[keep]])


def _non_text_keep(stats: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Which components ``(n+1,)`` can be text (entry 0, the background, False): not page
    borders and scanner edges (touching the image border and over a tenth of the page long),
    not blobs taller than ten text heights (frames, rulers, shadows). Photos of pages
    (CREMMA) carry such dark backgrounds."""
    h, w = shape
    s = stats[1:]
    h_text = text_height(stats, shape)
    touches = (s[:, 0] == 0) | (s[:, 1] == 0) | (s[:, 0] + s[:, 2] >= w) | (s[:, 1] + s[:, 3] >= h)
    border = touches & ((s[:, 2] > w / 10) | (s[:, 3] > h / 10))
    huge = (s[:, 3] > 10 * max(h_text, 4.0)) | (s[:, 3] > h / 3) | (s[:, 2] > w / 1.5)
    return np.concatenate([[False], ~(border | huge)])
