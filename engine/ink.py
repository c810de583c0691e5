"""Stage 1: the ink mask. Sauvola for grey and colour pages, identity for bilevel ones;
connected components far below the text size (specks) are removed."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from .arrays import nonzero_index
from .components import weighted_median
from .model import Page
from .params import Parameters

#: Sauvola's dynamic range of the standard deviation for 8-bit images.
_SAUVOLA_R = 128.0
#: A stroke straight over this many text heights is not handwriting (a rule, a frame's side).
LONG_STROKE = 5.0
#: How far (in text heights) a straight stroke may wander across its direction.
STROKE_WOBBLE = 0.08
#: Chroma distance (CIELAB a*b* units; 8-bit OpenCV scale) from the writing's colour beyond
#: which ink is of another colour: violet or red stamp ink lies 50-70 from black writing,
#: the coloured fringes of black strokes on cream paper 10-20.
OTHER_COLOUR = 30.0
#: The page found must cover at least this fraction of the image, or the whole image is
#: taken: the dev pages' page areas cover 0.78-1.0 of their images (poilus-dev, cremma20,
#: kraken-sample), a two-page spread on a wide surround 0.35 (tests), a dark blob over the
#: image's centre 0.26 (tests).
MIN_PAGE_FRACTION = 0.3
#: A paper-toned region at least this fraction of the central page's size is another page.
SPREAD_PAGE = 0.25
#: A rule's pixel within this many text heights of other ink across the rule is where a
#: letter's stroke crosses it, and stays ink (about a rule's thickness plus its wobble).
RULE_CROSSING = 0.15
#: How far (pixels) a scan blurs a stroke's edge into the paper: 1-3 pixels at 300 dpi.
RIM_REACH = 2
#: A component taller than this many text heights spans two rows of writing (a row's height
#: plus a pitch of about two text heights) or runs across them: rows joined by a cloud or a
#: frame drawn round them, a flourish, a note written up the margin, a signature. Its long
#: straight strokes are stripped like a rule's. Measured on poilus-dev (FM %): none 50.7,
#: 2 -> 53.4, 3 -> 55.9, 5 -> 53.9 (each better than none).
ROW_SPAN = 3.0


def sauvola_threshold(gray: np.ndarray, window: int, k: float = 0.2) -> np.ndarray:
    """Sauvola threshold ``(H, W)`` float32 of a uint8 (or float32) page with an odd
    ``window`` (pixels).

    Box filters on the image and its square (O(1) per pixel whatever the window); every step
    is an OpenCV call (no NumPy temporaries: half the time on a 10-megapixel page)."""
    img = gray if gray.dtype == np.float32 else gray.astype(np.float32)
    mean = cv2.boxFilter(img, cv2.CV_32F, (window, window), borderType=cv2.BORDER_REFLECT)
    sq = cv2.sqrBoxFilter(img, cv2.CV_32F, (window, window), borderType=cv2.BORDER_REFLECT)
    std = cv2.sqrt(cv2.max(cv2.subtract(sq, cv2.multiply(mean, mean)), 0.0))
    # mean (1 + k (std / R - 1)) = mean ((1 - k) + (k / R) std)
    return cv2.multiply(mean, cv2.addWeighted(std, k / _SAUVOLA_R, std, 0.0, 1.0 - k))


#: Sauvola runs on bands of rows of about this many pixels: its float32 images (the page,
#: the means, the squares, the threshold) cost 4 bytes a pixel each, 2.7 GB together at 169
#: megapixels if made for the whole page at once.
SAUVOLA_BAND_PIXELS = 4_000_000


def sauvola_ink(gray: np.ndarray, window: int, k: float = 0.2,
                band_pixels: int = SAUVOLA_BAND_PIXELS) -> np.ndarray:
    """Pixels darker than their Sauvola threshold, bool ``(H, W)``: the same as on the whole
    page at once, computed a band of rows at a time.  Each band is read with ``window // 2 + 1``
    rows more on either side, so that every window lies within it (or meets the page's own
    edge, where the reflection is the same), and the box sums are of whole grey levels, exact
    in float32 (tests/test_trust.py checks the equality)."""
    h, w = gray.shape
    rows = max(window, band_pixels // max(w, 1))
    margin = window // 2 + 1
    out = np.empty((h, w), bool)
    for r0 in range(0, h, rows):
        r1 = min(h, r0 + rows)
        a, b = max(0, r0 - margin), min(h, r1 + margin)
        levels = gray[a:b].astype(np.float32)
        threshold = sauvola_threshold(levels, window, k)
        out[r0:r1] = cv2.compare(levels[r0 - a:r1 - a], threshold[r0 - a:r1 - a], cv2.CMP_LT) > 0
    return out


def stretch_contrast(gray: np.ndarray, area: np.ndarray | None = None) -> np.ndarray:
    """Raise a faint page's contrast to Sauvola's dynamic range: where the darkest 0.5 % of
    the page lie less than R = 128 grey levels below the paper (the median), the grey levels
    are scaled about the paper's so that they lie R below it; other pages are returned as
    they are. Sauvola's fixed R misses pencil on light paper (CREMMA). ``area`` (bool
    ``(H, W)``): the page area the percentiles are taken in.

    The map is continuous in the page's contrast: a page R - 2 levels deep is scaled by
    1.02. (It used to map the paper to 255 and the darkest ink to 0, which doubled the
    contrast of a page 127 levels deep and left one 128 deep alone: poilus-dev pages lie at
    117-197, seven of them below 128, and the sample page beside a second one as a spread
    crossed from 135 to 126.)"""
    values = gray[::4, ::4] if area is None else gray[::4, ::4][area[::4, ::4]]
    if values.size == 0:
        return gray
    lo, paper = np.percentile(values, [0.5, 50.0])
    if paper - lo >= _SAUVOLA_R or paper <= lo:
        return gray
    gain = _SAUVOLA_R / (paper - lo)
    lut = np.clip(paper - (paper - np.arange(256)) * gain, 0, 255).astype(np.uint8)
    return lut[gray]


def otsu_ink(gray: np.ndarray, area: np.ndarray | None = None) -> np.ndarray:
    """Global Otsu binarisation: bool ``(H, W)``, True = ink (dark). ``area`` (bool
    ``(H, W)``): the threshold is Otsu's over these pixels only, and nothing outside is ink."""
    if area is None:
        _, binary = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
        return binary > 0
    values = gray[area]
    if values.size == 0:
        return np.zeros(gray.shape, bool)
    t, _ = cv2.threshold(values.reshape(-1, 1), 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    return (gray <= t) & area


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


def keep_components(labels: np.ndarray, keep: np.ndarray, in_place: bool = False,
                    ink: np.ndarray | None = None) -> np.ndarray:
    """Labels ``(H, W)`` with only the components where ``keep`` ``(n+1,)`` is True,
    renumbered 1..k in their order (``keep[0]``, the background, must be False).
    ``in_place``: relabel ``labels`` itself (int32, C-contiguous) and return it. ``ink``:
    the labels' non-zero flat indices (:func:`engine.arrays.nonzero_index`) when known."""
    relabel = np.zeros(len(keep), np.int32)
    relabel[keep] = np.arange(1, int(keep.sum()) + 1, dtype=np.int32)
    # Relabel the ink pixels only: a table lookup over every pixel of the page costs 3 times
    # more, and writing into a fresh page-sized array first faults in all its memory.
    ink = nonzero_index(labels) if ink is None else ink
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


@dataclass(frozen=True)
class InkResult:
    """Stage 1's products. ``ink`` bool ``(H, W)``; ``labels`` int32 ``(H, W)`` (components
    1..n); ``stats`` ``(n+1, 5)`` (x, y, w, h, area; row 0 the background); ``page_area`` bool
    ``(H, W)``: the page (or pages) found in the image, outside of which nothing is ink;
    ``non_text`` bool ``(H, W)``: dark pixels kept out of the ink as not text (long straight
    strokes of rules, frames and borders; blobs far larger than the text; the surround);
    ``faint`` bool ``(H, W)``: pixels on the page darker than its global (Otsu) split between
    ink and paper that the local binarisation left out (pale strokes, faint rules);
    ``specks`` bool ``(H, W)``: ink of the components too small to sample (``speck_ratio``,
    ``min_speck_area``)."""

    ink: np.ndarray
    labels: np.ndarray
    stats: np.ndarray
    page_area: np.ndarray
    non_text: np.ndarray
    faint: np.ndarray | None = None
    specks: np.ndarray | None = None


def ink_components(page: Page, params: Parameters) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`ink_mask` plus each component's box and area ``(n+1, 5)`` (x, y, w, h, area;
    row 0 the background), read off the labelling pass instead of a second scan of the page."""
    found = find_ink(page, params)
    return found.ink, found.labels, found.stats


def find_ink(page: Page, params: Parameters) -> InkResult:
    """Stage 1 on a page: page area, binarisation, non-text and speck removal (:class:`InkResult`)."""
    gray = page.gray
    area = find_page_area(gray) if params.page_area else np.ones(gray.shape, bool)
    whole = bool(area.all())
    rough = None
    h_text = 0.0
    if page.bilevel:
        ink = gray < 128
    else:
        gray = stretch_contrast(gray, None if whole else area)
        rough = otsu_ink(gray, None if whole else area)
        _, stats = label_components(rough)
        h_text = text_height(stats, gray.shape)
        window = int(round(params.sauvola_window * max(h_text, 8.0))) | 1
        window = max(15, min(window, (min(gray.shape) // 2) * 2 - 1 if min(gray.shape) > 16 else 15))
        ink = sauvola_ink(gray, window, params.sauvola_k)
        # Flat bright paper has std ~ 0, where Sauvola keeps pixels 20 % darker than the local
        # mean; also require them darker than Otsu's global paper level to avoid paper texture.
        if rough.any():
            paper = ~rough if whole else area & ~rough
            paper_level = median_level(gray, paper)
            ink &= gray < paper_level * (1.0 - params.sauvola_k / 2)
    surround = None
    if not whole:
        surround = ink & ~area
        ink &= area
    stamps = None
    colour_step = params.colour_non_text or params.colour_stamps
    if colour_step and page.colour is not None and page.colour.shape[:2] == ink.shape:
        stamps = other_colour_ink(page.colour, ink)
        if not params.colour_non_text:
            stamps = stamp_ink(stamps, max(h_text, 8.0))
        if stamps.any():
            # Where a letter's stroke crosses a coloured rule or a stamp's line, the crossing
            # is the letter's too (as for the long strokes of _strip_long_strokes).
            reach = max(int(round(RULE_CROSSING * max(h_text, 8.0))), 2)
            rest = (ink & ~stamps).view(np.uint8)
            near = cv2.dilate(rest, cv2.getStructuringElement(cv2.MORPH_RECT, (1, 2 * reach + 1)))
            near |= cv2.dilate(rest, cv2.getStructuringElement(cv2.MORPH_RECT, (2 * reach + 1, 1)))
            stamps &= near == 0
            ink &= ~stamps
    labels, stats = label_components(ink)
    # Non-text removal, then speck removal on what is left (relabelling keeps the components'
    # order, so their stats are the kept rows), relabelled in one pass over the page (each
    # relabelling is a gather over every pixel).
    keep = _non_text_keep(stats, gray.shape)
    strokes = None
    if params.strip_strokes:
        dropped = np.flatnonzero(~keep[1:]) + 1
        h_text = max(text_height(stats[np.concatenate([[True], keep[1:]])], gray.shape), 8.0)
        if not page.bilevel:
            # Kept components taller than ROW_SPAN text heights get the same stripping:
            # clouds round pairs of lines and notes up the margin (poilus AN_0090-0) joined
            # the rows and the margin to the text in one region, at the notes' angle. Not on bilevel pages: there
            # (AHTE's binarised Arabic) the tall components are side notes written upwards,
            # whose straight runs are the script's own baseline (1 + 4 lines lost).
            dropped = np.union1d(dropped, np.flatnonzero(keep & spans_rows(stats, h_text)))
        if len(dropped):
            # A component dropped as non-text often carries text: words touching a rule, a
            # frame, a fold or the page's edge. Strip its long straight strokes and give the
            # pieces left the same test, instead of losing every word attached to the stroke.
            strokes, bands = _strip_long_strokes(labels, stats, dropped, h_text)
            if strokes.any():
                ink = ink > strokes  # ink & ~strokes (labels > 0 is the ink)
                labels, stats = label_components(ink)
                keep = _non_text_keep(stats, gray.shape)
                # What is left of a border or band drawn thick (a mourning envelope's black
                # edge, a printed band: poilus AN_0305-1) is no rule to strip but no text
                # either: a piece on such a band stays out, with any word touching it.
                keep[np.unique(labels[bands])] = False
    at = nonzero_index(ink)  # the labels' ink (a bool scan is faster than the labels')
    at_label = labels.ravel()[at]
    non_text = np.zeros(labels.shape, bool)
    non_text.ravel()[at[~keep[at_label]]] = True
    if strokes is not None:
        non_text |= strokes
    if surround is not None:
        non_text |= surround
    if stamps is not None:
        non_text |= stamps
    kept = np.flatnonzero(keep)
    keep[kept] = _speck_keep(np.concatenate([stats[:1], stats[kept]]), params)[1:]
    # The specks are kept as a mask: too small to sample, still the page's ink (a stroke's
    # broken piece, a small dot), so the final labels give them their nearest line's ink.
    is_speck = np.zeros(len(keep), bool)
    is_speck[kept] = ~keep[kept]
    specks = np.zeros(labels.shape, bool)
    specks.ravel()[at[is_speck[at_label]]] = True
    labels = keep_components(labels, keep, in_place=True, ink=at)  # the labelling's own array
    ink = labels > 0
    # The ground truth of a line is all of its dark pixels; the local threshold keeps only the
    # clearly dark ones (sampling wants clean strokes), so the final labels also take these.
    faint = None
    if rough is not None:
        # (rough | rims) & area & ~ink & ~non_text, in place: a & ~b is a > b on bools.
        faint = stroke_rims(page.gray, ink, area > rough)
        faint |= rough
        faint &= area
        np.greater(faint, ink, out=faint)
        np.greater(faint, non_text, out=faint)
    return InkResult(ink=ink, labels=labels, stats=np.concatenate([stats[:1], stats[keep]]),
                     page_area=area, non_text=non_text, faint=faint, specks=specks)


def median_level(gray: np.ndarray, mask: np.ndarray) -> float:
    """``np.median(gray[mask])`` of a uint8 page ``(H, W)`` over a bool ``mask`` (255.0 when
    the mask is empty), from a histogram of the masked pixels: no gather of them."""
    # Counts as integers: OpenCV's float32 counts lose single pixels past 2^24.
    hist = cv2.calcHist([gray], [0], mask.view(np.uint8), [256], [0, 256]).ravel().astype(np.int64)
    if hist.sum() == 0:
        return 255.0
    return _histogram_median(np.arange(256, dtype=np.float64), hist)


def spans_rows(stats: np.ndarray, h_text: float) -> np.ndarray:
    """Which components ``(n+1,)`` (OpenCV ``stats``) are taller than ``ROW_SPAN`` text
    heights ``h_text`` (pixels); entry 0, the background, False."""
    out = stats[:, 3] > ROW_SPAN * h_text
    out[0] = False
    return out


def stroke_rims(gray: np.ndarray, ink: np.ndarray, paper: np.ndarray, reach: int = RIM_REACH
                ) -> np.ndarray:
    """The pale rims of the strokes, bool ``(H, W)``: pixels within ``reach`` pixels of the
    ``ink`` that are darker than the paper by more than its noise (three robust standard
    deviations of the ``paper`` pixels' grey levels). A scan blurs each stroke's edge over a
    pixel or two; a binarisation keeps its dark core, while a line's ground truth (every
    pixel darker than a split taken inside the line's outline) also holds the rim (poilus
    AD78_0018-0: 5 % of the writing, grey 169-174 on paper at 213, where the page's split
    lay at 168)."""
    values = _every_seventh(gray, paper)
    level, spread = _median_and_deviation(values)
    spread *= 1.4826
    near = cv2.dilate(ink.view(np.uint8), cv2.getStructuringElement(cv2.MORPH_RECT, (2 * reach + 1,) * 2))
    return (near > 0) & (gray < level - max(3.0 * spread, 2.0))


def _every_seventh(gray: np.ndarray, mask: np.ndarray, band_pixels: int = 4_000_000) -> np.ndarray:
    """``gray.ravel()[nonzero_index(mask)[::7]]`` (or every 7th pixel when ``mask`` is empty),
    a band of rows at a time: the index of the paper's pixels would cost 8 bytes a pixel of
    paper (1.2 GB at 169 megapixels)."""
    h, w = gray.shape
    rows = max(1, band_pixels // max(w, 1))
    parts = []
    seen = 0  # mask pixels before the band
    for r0 in range(0, h, rows):
        at = nonzero_index(mask[r0:r0 + rows])
        first = (-seen) % 7  # the band's first pixel of a position divisible by 7
        parts.append(gray[r0:r0 + rows].ravel()[at[first::7]])
        seen += len(at)
    if not seen:
        return gray.ravel()[::7]
    return np.concatenate(parts)


def _median_and_deviation(values: np.ndarray) -> tuple[float, float]:
    """``np.median(values)`` and ``np.median(np.abs(values - median))`` of uint8 ``(n,)``
    values (n > 0), from their histogram instead of two sorts."""
    hist = np.bincount(values, minlength=256)
    level = _histogram_median(np.arange(256, dtype=np.float64), hist)
    dev = np.abs(np.arange(256, dtype=np.float64) - level)
    order = np.argsort(dev, kind="stable")
    return level, _histogram_median(dev[order], hist[order])


def _histogram_median(value: np.ndarray, count: np.ndarray) -> float:
    """Median of a sample given as ascending ``value`` ``(k,)`` with ``count`` ``(k,)``
    occurrences each: the mean of the two middle order statistics, as ``np.median``."""
    cum = np.cumsum(count)
    n = int(cum[-1])
    lo = value[int(np.searchsorted(cum, (n - 1) // 2, side="right"))]
    hi = value[int(np.searchsorted(cum, n // 2, side="right"))]
    return float((lo + hi) / 2.0)


def other_colour_ink(colour: np.ndarray, ink: np.ndarray) -> np.ndarray:
    """Ink pixels of another colour than the page's writing, bool ``(H, W)``: stamps, seals,
    coloured rules and marks (violet, blue or red on a page written in black or brown).

    The writing's colour is the median chroma (CIELAB a*, b*) over the ink; a pixel is of
    another colour when its chroma lies more than ``OTHER_COLOUR`` units from it. A page
    written in violet keeps its violet writing (then a black stamp is not told apart)."""
    out = np.zeros(ink.shape, bool)
    idx = nonzero_index(ink)
    if len(idx) < 100:
        return out
    rgb = colour.reshape(-1, 3)[idx].reshape(-1, 1, 3)
    ab = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2LAB)[:, 0, 1:].astype(np.float32) - 128.0
    centre = np.median(ab, axis=0)
    far = np.hypot(ab[:, 0] - centre[0], ab[:, 1] - centre[1]) > OTHER_COLOUR
    out.ravel()[idx[far]] = True
    return out


def stamp_ink(other: np.ndarray, h_text: float) -> np.ndarray:
    """The other-colour ink ``other`` (bool ``(H, W)``, :func:`other_colour_ink`) that forms
    shapes taller than a row and as wide: bool ``(H, W)``.

    Pieces of ink of another colour less than half a text height apart are one shape (a
    stamp's ring, its letters and its date; a printed block of several rows); a shape whose
    box is more than ``ROW_SPAN`` text heights tall and wide runs across rows, as no word does:
    a stamp, a seal, a printed block, a cloud drawn round the text (a narrow one is a rule or a
    thread, left to the long-stroke stripping). A word or a few letters written in a second ink
    within a row (a correction, an added name) is lower and stays text."""
    out = np.zeros(other.shape, bool)
    if not other.any():
        return out
    reach = max(int(round(h_text / 2)), 1)
    joined = cv2.dilate(other.view(np.uint8), cv2.getStructuringElement(cv2.MORPH_RECT,
                                                                        (2 * reach + 1, 2 * reach + 1)))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(joined, connectivity=8)
    # The dilation adds ``reach`` on each side of the ink's own extent. Wide too, across its
    # own direction: a coloured rule or a thread down the page, straight or slanted, is a
    # narrow shape, and what is left of it in the ink is where the writing crosses it (poilus
    # AD78_0084-1, AN_0207-0: letters lost).
    span = ROW_SPAN * h_text
    tall = ((stats[:, cv2.CC_STAT_HEIGHT] - 2 * reach) > span) & ((stats[:, cv2.CC_STAT_WIDTH] - 2 * reach) > span)
    tall[0] = False
    for i in np.flatnonzero(tall):
        x, y, w, h = stats[i, :4]
        ys, xs = np.nonzero(labels[y:y + h, x:x + w] == i)
        (_, _), (a, b), _ = cv2.minAreaRect(np.column_stack([xs, ys]).astype(np.float32))
        tall[i] = min(a, b) - 2 * reach > span
    if not tall.any():
        return out
    out = tall[labels]
    out &= other
    return out


def find_page_area(gray: np.ndarray, max_side: int = 512) -> np.ndarray:
    """The page within the image, bool ``(H, W)``: the paper-toned region around the image's
    centre, with the text on it (holes filled); a dark or grey surround (scanner bed, card,
    book edge, neighbouring page's shadow) falls outside. The whole image when nothing
    around the paper differs from it.

    Works on a copy at most ``max_side`` pixels long, median-filtered so that strokes vanish
    into the paper; the paper's tone is the median of the central half of the image, and the
    split between paper and surround is Otsu's on each pixel's distance to that tone, kept
    above six times the paper's own spread (its median absolute deviation) so that paper
    texture and shading never form a surround."""
    h, w = gray.shape
    f = max(1, int(np.ceil(max(h, w) / max_side)))
    sh, sw = max(1, h // f), max(1, w // f)
    if sh < 8 or sw < 8:
        return np.ones((h, w), bool)
    small = cv2.medianBlur(cv2.resize(gray, (sw, sh), interpolation=cv2.INTER_AREA), 5)
    centre = small[sh // 4: 3 * sh // 4, sw // 4: 3 * sw // 4]
    paper = float(np.median(centre))
    distance = cv2.absdiff(small, np.full_like(small, int(round(paper))))
    split, _ = cv2.threshold(distance, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    spread = float(np.median(cv2.absdiff(centre, np.full_like(centre, int(round(paper))))))
    split = max(split, 6.0 * spread + 8.0)
    near = (distance < split).astype(np.uint8)
    n, lab = cv2.connectedComponents(near, connectivity=4)
    if n <= 1:
        return np.ones((h, w), bool)
    counts = np.bincount(lab[sh // 4: 3 * sh // 4, sw // 4: 3 * sw // 4].ravel(), minlength=n)
    counts[0] = 0
    sizes = np.bincount(lab.ravel(), minlength=n)
    sizes[0] = 0
    # The page is the paper-toned region at the centre; the other pages of a spread are
    # regions of the same tone at least a quarter its size (a reflection or a label on the
    # scanner bed is far smaller).
    main = int(np.argmax(counts))
    pages = sizes >= SPREAD_PAGE * sizes[main]
    pages[0] = False
    region = pages[lab].astype(np.uint8)
    # Fill the holes the text leaves: everything not reachable from the outside.
    padded = np.pad(region, 1)
    cv2.floodFill(padded, None, (0, 0), 2)
    region = (padded[1:-1, 1:-1] != 2).astype(np.uint8)
    if region.all() or region.mean() < MIN_PAGE_FRACTION:
        # Also when what was found is too small to be the page: a dark blob over the image's
        # centre set the "paper" tone.
        return np.ones((h, w), bool)
    return cv2.resize(region, (w, h), interpolation=cv2.INTER_NEAREST) > 0


def stroke_sizes(h_text: float) -> tuple[int, int, int, int]:
    """The pixel sizes :func:`_strip_long_strokes` works with for a text height ``h_text``
    (pixels): a long stroke's length, its wobble across, the thickness of a band, and the
    reach of a crossing letter's stroke."""
    return (max(int(round(LONG_STROKE * h_text)), 15), max(int(round(STROKE_WOBBLE * h_text)), 1),
            max(int(round(0.5 * h_text)), 3), max(int(round(RULE_CROSSING * h_text)), 2))


def _strip_long_strokes(labels: np.ndarray, stats: np.ndarray, components: np.ndarray,
                        h_text: float) -> tuple[np.ndarray, np.ndarray]:
    """Pixels of ``components`` (label values) on long straight near-horizontal or
    near-vertical strokes, bool ``(H, W)``: rules, frame sides, folds, page edges.

    A stroke is long when it runs straight for ``LONG_STROKE`` x the text height: longer
    than any stroke of a handwritten letter or a word's connecting stroke (a t-bar is about
    one text height). The mask is first dilated across the stroke by ``STROKE_WOBBLE`` x
    the text height, so that a hand-drawn or slightly skewed rule still counts as straight.
    Returns those pixels and, apart, the straight runs thicker than half a text height (bands,
    filled blobs), which are not stripped."""
    length, wobble, thick, reach = stroke_sizes(h_text)
    out = np.zeros(labels.shape, bool)
    thick_out = np.zeros(labels.shape, bool)
    for c in components:
        x, y, w, h = (int(v) for v in stats[c, :4])
        if max(w, h) < length:
            continue
        crop = labels[y:y + h, x:x + w] == c
        mask = crop.view(np.uint8)
        lines = np.zeros_like(mask)
        bands = np.zeros_like(mask)
        if w >= length:
            found, band = _row_strokes(mask, length, wobble, thick, reach)
            lines |= found
            bands |= band
        if h >= length:
            # The same on the transposed crop: its rows are the crop's columns.
            found, band = _row_strokes(cv2.transpose(mask), length, wobble, thick, reach)
            lines |= cv2.transpose(found)
            bands |= cv2.transpose(band)
        out[y:y + h, x:x + w] |= crop & (lines > 0)
        thick_out[y:y + h, x:x + w] |= crop & (bands > 0)
    return out, thick_out


def _row_strokes(mask: np.ndarray, length: int, wobble: int, thick: int, reach: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The long straight strokes along the rows of a uint8 0/1 ``mask`` ``(h, w)`` that
    letters do not cross, and the bands among them (see :func:`_strip_long_strokes`), both
    uint8 0/1 ``(h, w)``. Each opening and dilation runs only on the rows that can hold a
    pixel of its result (with the rows its kernel reads): a frame's box is mostly empty."""
    along = cv2.getStructuringElement(cv2.MORPH_RECT, (length, 1))
    across = cv2.getStructuringElement(cv2.MORPH_RECT, (1, 2 * wobble + 1))
    thick_across = cv2.getStructuringElement(cv2.MORPH_RECT, (1, thick))
    found = _open_rows(cv2.dilate(mask, across), along) & mask
    # A stroke is thin: where the straight run is thicker than half a text height it is a
    # filled blob (a seal, a shadow), not a rule.
    found &= ~_on_rows_near(found, thick, lambda m: cv2.morphologyEx(m, cv2.MORPH_OPEN, thick_across))
    # A band: ink that runs unbroken for the whole length, half a text height thick (writing
    # never does: its rows break between letters).
    bands = _on_rows_near(_open_rows(mask, along), thick,
                          lambda m: cv2.morphologyEx(m, cv2.MORPH_OPEN, thick_across))
    # Where a letter's stroke crosses the rule, the rule's pixels are the stroke's too: keep
    # those whose column has other ink both above and below (a descender that crosses a rule
    # stays one stroke). Ink on one side only is a letter sitting on the rule or the rest of
    # a hand-drawn frame where it bends: a one-sided test kept whole frames as ink (poilus
    # AN_0228-1: 13 -> 6 lines matched).
    # One-sided reaches: the kernel's anchor at one end looks the other way.
    cross = np.ones((2 * reach + 1, 1), np.uint8)
    rest = mask & ~found

    def crossed(m: np.ndarray) -> np.ndarray:
        return (cv2.dilate(m, cross, anchor=(0, 2 * reach))
                & cv2.dilate(m, cross, anchor=(0, 0)))

    lines = found & ~_on_rows_near(found, 2 * reach + 1, crossed, rest)
    return lines, bands


def _open_rows(mask: np.ndarray, along: np.ndarray) -> np.ndarray:
    """``cv2.morphologyEx(mask, MORPH_OPEN, along)`` for a one-row kernel ``along`` (1, L)
    with its centre anchor, run only on the rows of ``mask`` (uint8 0/1) with at least
    ``L - L // 2`` ink pixels: fewer cannot fill any window of the erosion, whose part
    inside the image is at least that long (OpenCV counts the outside as ink there)."""
    n = along.shape[1]
    rows = np.flatnonzero(_row_counts(mask) >= n - n // 2)
    out = np.zeros_like(mask)
    if len(rows):
        out[rows] = cv2.morphologyEx(mask[rows], cv2.MORPH_OPEN, along)
    return out


def _row_counts(mask: np.ndarray) -> np.ndarray:
    """Pixels set in each row of a uint8 0/1 ``mask`` ``(h, w)``, int32 ``(h,)`` (OpenCV's
    row sum: 20 times faster than NumPy's count along rows)."""
    return cv2.reduce(mask, 1, cv2.REDUCE_SUM, dtype=cv2.CV_32S).ravel()


def _on_rows_near(where: np.ndarray, reach: int, op, image: np.ndarray | None = None) -> np.ndarray:
    """``op(image)`` (``image`` defaults to ``where``) at the rows within ``reach`` of a row
    of ``where`` that holds a pixel; 0 on the other rows. ``op`` is a morphology whose
    kernel spans at most ``reach`` rows, whose result is 0 beyond ``reach`` rows from the
    pixels of ``where``, and is only read near them: it runs on those rows only (a frame's box
    is mostly empty). Between two groups of rows and before the image's border, the kept
    rows hold ``reach`` rows that are empty in ``where``, which keeps the groups as far
    apart, for the kernel, as on the page. (OpenCV's openings with an even kernel can move a
    pixel one row: their result is taken on every row kept, not only on the rows of
    ``where``.)"""
    image = where if image is None else image
    present = _row_counts(where) > 0
    if not present.any():
        return np.zeros_like(image)
    count = np.concatenate([[0], np.cumsum(present)])
    at = np.arange(len(present))
    near = count[np.minimum(at + reach + 1, len(present))] > count[np.maximum(at - reach, 0)]
    if near.all():
        return op(image)
    rows = np.flatnonzero(near)
    out = np.zeros_like(image)
    out[rows] = op(np.ascontiguousarray(image[rows]))
    return out


def area_outlines(mask: np.ndarray, tolerance: float = 2.0) -> list[np.ndarray]:
    """Outer outlines of the regions of a bool ``(H, W)`` mask (e.g. the page area), each a
    float ``(n, 2)`` polygon of (x, y) pixel corners, simplified to ``tolerance`` pixels."""
    contours, _ = cv2.findContours(mask.view(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    out = []
    for c in contours:
        poly = cv2.approxPolyDP(c, tolerance, True).reshape(-1, 2)
        if len(poly) >= 3:
            out.append(poly.astype(np.float64))
    return out


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
