"""Is this a page of text?  Warnings for results that were computed but may mean nothing.

The method finds lines in any ink: pure noise gets dozens of "lines", and a page whose text
was cut away (a page area found wrongly, a scan half blank) gets one or two.  Two measures
of the page itself say when a result deserves a look; neither changes the result.

* :func:`row_continuity`: text sits in rows that run on sideways.  Cut the ink into strips
  along the text and take each strip's ink profile across it: where there are rows, the
  profiles of neighbouring strips rise and fall together (the same rows continue); ink
  scattered at random gives profiles that do not (correlation about 0).  The measure is that
  correlation, for the text direction where it is highest.
* :func:`text_area`: the share of the image covered by the box of the labelled ink.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
from scipy.ndimage import gaussian_filter1d

#: Text directions tried, degrees: coarse, then COARSE_STEP around the best every FINE_STEP.
COARSE_STEP = 9.0
FINE_STEP = 3.0
#: Strips along the text, in text heights (a word or two; longer strips lose rows that
#: wander: 6 text heights gave cremma20 12_dbc9b 0.22).
STRIP = 4.0
#: Bins of the profiles across the text, in text heights.
BIN = 0.5
#: The profiles' slow trend (page edges, blank margins) is taken off first: a Gaussian of
#: this many text heights (rows lie one to three apart).
TREND = 4.0
#: The ends of the ink's extent across the text left out of the profiles (fraction at each end).
TRIM = 0.05
#: Below this correlation the ink has no rows. The 79 dev pages lie at 0.34 and above, grey
#: and binary noise pages at 0.09-0.21 (docs/robustness.md gives the figures).
NOISE_ROW_CONTINUITY = 0.27
#: Rows are judged on results of this many lines or more (one or two lines have no rows to
#: continue; noise gets dozens).
MIN_ROWS = 3
#: Fewer grid cells with ink than this say nothing about rows either way.
MIN_POINTS = 200
#: Below this share of the image, the text found is "tiny against the page": the dev pages'
#: lowest is 0.052 (moc-train moc_train_12, four short lines); a page whose page area was
#: found on a white-painted half, its text outside it, 0.0004.
TINY_TEXT_AREA = 0.01


def ink_density(ink: np.ndarray, max_pixels: int = 1_000_000) -> tuple[np.ndarray, np.ndarray]:
    """The ink on a grid of at most ``max_pixels`` cells of s x s pixels: the cells holding
    ink, as centres ``(n, 2)`` [x, y] (pixels) and weights ``(n,)`` (ink pixels in the cell).
    Summed from s x s strided views: no page-sized temporary."""
    ink = np.asarray(ink, dtype=bool)
    h, w = ink.shape
    step = max(1, math.ceil(math.sqrt(h * w / max_pixels)))
    gh, gw = h // step, w // step
    if gh == 0 or gw == 0:
        step, gh, gw = 1, h, w
    count = np.zeros((gh, gw), np.uint16)
    for i in range(step):
        for j in range(step):
            count += ink[i:gh * step:step, j:gw * step:step]
    ys, xs = np.nonzero(count)
    centres = (np.stack([xs, ys], axis=1).astype(np.float64) + 0.5) * step - 0.5
    # Each cell's point anywhere in the cell (a fixed random draw): on the regular grid, the
    # bins of a turned profile would alias with the rows of cells and give any ink "rows".
    centres += np.random.default_rng(0).uniform(-0.5, 0.5, centres.shape) * step
    return centres, count[ys, xs].astype(np.float64)


def _continuity_at(points: np.ndarray, weight: np.ndarray, h_cc: float, angle: float) -> float:
    """Correlation of neighbouring strips' detrended profiles across direction ``angle``."""
    a = math.radians(angle)
    u = points[:, 0] * math.cos(a) + points[:, 1] * math.sin(a)
    v = -points[:, 0] * math.sin(a) + points[:, 1] * math.cos(a)
    lo, hi = np.quantile(v, (TRIM, 1.0 - TRIM))  # of the cells with ink
    width = BIN * h_cc
    n_bins = int((hi - lo) / width) + 1
    keep = (v >= lo) & (v < lo + n_bins * width)
    u, v, weight = u[keep], v[keep], weight[keep]
    if n_bins < 8 or len(u) < 2:
        return float("nan")
    strip = np.floor((u - u.min()) / (STRIP * h_cc)).astype(np.int64)
    n_strips = int(strip.max()) + 1
    if n_strips < 3:
        return float("nan")
    cell = strip * n_bins + ((v - lo) / width).astype(np.int64)
    m = np.bincount(cell, weights=weight, minlength=n_strips * n_bins).reshape(n_strips, n_bins)
    m -= gaussian_filter1d(m, TREND / BIN, axis=1, mode="nearest")
    num = np.sum(m[:-1] * m[1:], axis=1)
    den = np.sqrt(np.sum(m[:-1] ** 2, axis=1) * np.sum(m[1:] ** 2, axis=1))
    return float(num.sum() / den.sum()) if den.sum() > 0 else float("nan")


def row_continuity(points: np.ndarray, weight: np.ndarray, h_cc: float) -> tuple[float, float]:
    """(correlation, text direction in degrees) of the ink's rows: ink points ``(n, 2)``
    [x, y] of ``weight`` ``(n,)`` (:func:`ink_density`) cut into strips STRIP text heights
    long along the text, each strip's profile across it in bins of BIN text heights (its
    ends TRIM and its TREND taken off), and the correlation of neighbouring strips' profiles
    (pooled), at the direction where it is highest.  About 0 for ink with no rows; NaN with
    too few points or a page too small."""
    p = np.asarray(points, dtype=np.float64)
    wt = np.asarray(weight, dtype=np.float64)
    h_cc = max(float(h_cc), 2.0) if np.isfinite(h_cc) else 2.0
    if len(p) < MIN_POINTS:
        return float("nan"), float("nan")
    best, best_angle = -np.inf, float("nan")
    for angle in np.arange(-90.0, 90.0, COARSE_STEP):
        score = _continuity_at(p, wt, h_cc, angle)
        if score > best:
            best, best_angle = score, float(angle)
    if not np.isfinite(best):
        return float("nan"), float("nan")
    for angle in best_angle + np.arange(-COARSE_STEP + FINE_STEP, COARSE_STEP, FINE_STEP):
        score = _continuity_at(p, wt, h_cc, float(angle))
        if score > best:
            best, best_angle = score, float(angle)
    return float(best), best_angle


def text_area(labels: np.ndarray) -> float:
    """Share of the image ``(H, W)`` covered by the bounding box of the pixels labelled > 0."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return 0.0
    mask = (labels > 0).view(np.uint8)
    if not mask.any():
        return 0.0
    _, _, w, h = cv2.boundingRect(mask)
    return float(w * h) / float(labels.size)


def page_warnings(ink: np.ndarray, h_cc: float, labels: np.ndarray, n_lines: int) -> list[str]:
    """One-line warnings about a segmentation whose page may not be a page of text: ink with
    no rows (noise) that was given lines, or text found in a tiny part of the image.
    ``ink`` bool ``(H, W)``; ``h_cc`` the text height (pixels); ``labels`` the final labels
    of ``n_lines`` lines."""
    out: list[str] = []
    if n_lines == 0:
        return out
    score = row_continuity(*ink_density(ink), h_cc)[0] if n_lines >= MIN_ROWS else float("nan")
    if np.isfinite(score) and score < NOISE_ROW_CONTINUITY:
        out.append(f"the ink looks like noise, not rows of text (row continuity {score:.2f}; text pages "
                   f"have {NOISE_ROW_CONTINUITY:g} and more): its {n_lines} line(s) may mean nothing")
    share = text_area(labels)
    if share < TINY_TEXT_AREA:
        out.append(f"the text found covers {100 * share:.2f} % of the image (a page area found "
                   f"wrongly, text cut away?): check its {n_lines} line(s)")
    return out
