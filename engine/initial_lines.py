"""Stage 6: initial lines per region (paper section 4.1).

For each region: a bank of anisotropic Gaussian filters (std ``filter_sigma_across`` x H_cc
across the text, ``filter_sigma_along`` x W_cc along it) over the orientation range; the
orientation whose projection profile is sharpest becomes the region's frame; Otsu on the
filtered image gives blobs; blobs taller than ``t_o`` x H_cc are split (touching or curved
lines), blobs whose ink ratio is under ``t_r`` are dropped (diacritics, noise); a
least-squares line is fitted to the samples of each blob. Lines are ordered across the
text within each region, which is what makes the MRF's labels "ordered".

Filtering a rotated copy of the region with an axis-aligned (separable) Gaussian equals
filtering the page with the oriented kernel, and the region is downscaled so that H_cc is
about ``_TARGET_HCC`` pixels first: the profile's shape, not its resolution, decides.
"""

from __future__ import annotations

import math
from dataclasses import replace

import cv2
import numpy as np
from scipy.spatial import cKDTree

from .arrays import angle_gap
from .components import weighted_median
from .model import ComponentStats, LineSet, Preparation, Region, to_region_frame
from .params import Parameters
from .regression import fit_lines

_TARGET_HCC = 8.0
_ALONG_CELLS = 6.0
# Line pitch over the height of a text line's body: about 2 on Latin and most Arabic hands
# (dev pages: 1.75-2.4); the filter bank is scaled to the larger of H_cc and pitch / this.
PITCH_PER_LINE_HEIGHT = 2.5
# A blob taller than this many line pitches reaches into the next row (rows are a pitch apart,
# and a row's blob much taller than that would have merged with its neighbours'): the blob
# scale is capped so that t_o x it is at most this x the pitch. Tall loops set H_cc to 0.7-0.8
# x the pitch on some poilus hands (AN_0292-0: 74 px for a 91 px pitch) and t_o x H_cc let
# two-row blobs through. Measured (poilus-dev FM / line IU %): none 64.3 / 74.3, 1.0 64.5 / 75.4,
# 1.1 65.2 / 76.0, 1.2 65.3 / 75.9, 1.4 64.0 / 75.1; moc-train +1 to +3 matches, ahte-train,
# cremma20 and kraken-sample unchanged at every value.
BLOB_PITCHES = 1.2
# Autocorrelation a pitch needs to be trusted (regular line spacing); noise pages stay under 0.2.
_MIN_PITCH_CORRELATION = 0.5
# A period shows as a peak standing above a trough before it (half a period between rows); a
# profile without rows decays slowly with only ripples on it. A pitch's peak must rise this
# much above the lowest autocorrelation at smaller lags. On the 79 dev pages ripples rise
# 0.00-0.09 (AN_0292-0's signature region, AN_0056-0, AN_0305-1, moc_train_3 and _4), row
# periods 0.19 and more; 0.15 sits in that gap. poilus-dev gave the same at every value from
# 0.05 to 0.55; elsewhere 0.25 changed one line count (moc_train_4), 0.55 two.
_MIN_PITCH_PROMINENCE = 0.15
# Smallest pitch looked for, in H_cc: dense margin notes are a pitch of one H_cc apart
# (AN_0008-3: 60 px for H_cc 60 px). Below half a text height the rows' own width keeps the
# autocorrelation high without a trough, so there is no peak to take (0.3 gave the same).
_MIN_PITCH_HCC = 0.5


def _members(labels: np.ndarray, member: np.ndarray) -> np.ndarray:
    """``member[labels]`` (bool per pixel) for a table ``member (n+1,)`` with ``member[0]``
    False; a plain comparison when every component is a member (a page of one region), where
    the table lookup is a gather over millions of pixels."""
    if member[1:].all():
        return labels > 0
    return member[labels]


def region_mask(components: np.ndarray, comp_in_region: np.ndarray, bbox: tuple[int, int, int, int],
                scale: float) -> np.ndarray:
    """The region's ink inside ``bbox``, downscaled by ``scale``: float32, fraction of ink."""
    x0, y0, x1, y1 = bbox
    return _downscaled(_members(components[y0:y1, x0:x1], comp_in_region), scale)


def _downscaled(member: np.ndarray, scale: float) -> np.ndarray:
    """A bool mask as float32, downscaled by ``scale`` (area average: fraction of ink)."""
    crop = member.astype(np.float32)
    if scale < 1.0:
        h, w = member.shape
        return cv2.resize(crop, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
    return crop


def _region_raster(small: np.ndarray, phi: float, bbox: tuple[int, int, int, int], scale: float,
                   scale_u: float | None = None, along_mean: bool = False) -> tuple[np.ndarray, tuple[float, float]]:
    """The region's ink ``small`` (from :func:`region_mask`) resampled into its frame rotated
    by ``phi`` at ``scale`` cells per pixel across the text and ``scale_u`` along it (the
    long filter along the text needs no fine cells). Returns the raster and the frame
    origin (u0, v0): cell (row, col) covers frame point (u0 + col/scale_u, v0 + row/scale).

    ``along_mean`` (Parameters.raster_along_mean): a cell along the text is the mean of the
    ink over its own length, not the ink at its centre: ``small`` has ``scale`` cells per
    pixel both ways, often ten or more times ``scale_u``, and a point sample reads one
    column in ten and misses the words between. Which column it read decided the lines:
    cremma 01R_P1S7P178_007 scaled by 1.5 gave 12 initial lines at W_cc 234 px and 8 at 256
    (16 or 17 cells along the page, each 128 px long against ``small``'s 11 px)."""
    scale_u = scale if scale_u is None else scale_u
    x0, y0, x1, y1 = bbox
    sx = small.shape[1] / (x1 - x0)
    sy = small.shape[0] / (y1 - y0)
    corners = np.array([[x0, y0], [x1, y0], [x0, y1], [x1, y1]], float)
    uv = to_region_frame(corners, phi)
    u0, v0 = uv.min(axis=0)
    width = int(math.ceil((uv[:, 0].max() - u0) * scale_u)) + 1
    height = int(math.ceil((uv[:, 1].max() - v0) * scale)) + 1
    # Sub-cells along the text: k per cell, each about as long as a cell of ``small``.
    k = max(1, int(round(scale / scale_u))) if along_mean else 1
    fine_u = scale_u * k
    # Destination sub-cell -> page point -> source cell, as one affine map (WARP_INVERSE_MAP);
    # sub-cell j of cell col lies at u = u0 + col/scale_u + (j - (k - 1)/2)/fine_u, so that
    # the mean of a cell's k sub-cells is centred where the cell is.
    # page x = u c - (v0 + row/sv) s ; page y = u s + (v0 + row/sv) c
    c, s = math.cos(phi), math.sin(phi)
    ua = u0 - 0.5 * (k - 1) / fine_u
    m = np.array([
        [sx * c / fine_u, -sx * s / scale, sx * (ua * c - v0 * s - x0)],
        [sy * s / fine_u, sy * c / scale, sy * (ua * s + v0 * c - y0)],
    ])
    raster = cv2.warpAffine(small, m, (width * k, height), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                            borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    if k > 1:
        raster = raster.reshape(height, width, k).mean(axis=2, dtype=np.float32)
    return raster, (float(u0), float(v0))


def along_scale(stats: ComponentStats, params: Parameters, scale: float) -> float:
    """Cells per pixel along the text: coarse enough that the along-text filter spans about
    ``_ALONG_CELLS`` cells (a Gaussian of hundreds of cells is slow and no more precise)."""
    return min(scale, _ALONG_CELLS / max(params.filter_sigma_along * stats.w_cc, 1e-9))


def kernel_cells(size: float) -> int:
    """An odd kernel size in cells for a filter ``size`` cells long (the paper's W or H at the
    raster's scale): the nearest odd whole number, at least 1; 0 for ``size`` 0 (OpenCV's own
    size, ``round(8 sigma + 1) | 1`` cells for a float image)."""
    if size <= 0:
        return 0
    return max(1, int(round(size)) | 1)


def bank_kernels(stats: ComponentStats, params: Parameters, scale: float, scale_u: float) -> tuple[int, int]:
    """The bank's kernel size across and along the text in raster cells (``scale``/``scale_u``
    cells per pixel): ``filter_size_across`` x H_cc and ``filter_size_along`` x W_cc
    (:func:`kernel_cells`; 0 = OpenCV's size for the sigma)."""
    return (kernel_cells(params.filter_size_across * stats.h_cc * scale),
            kernel_cells(params.filter_size_along * stats.w_cc * scale_u))


def _smooth(raster: np.ndarray, sigma_across: float, sigma_along: float, size_across: int = 0,
            size_along: int = 0) -> np.ndarray:
    """The bank's anisotropic Gaussian on a raster in the region frame (rows across the text);
    ``size_*``: kernel size in cells (odd; 0 = OpenCV's size for the sigma)."""
    return cv2.GaussianBlur(raster, (size_along, size_across), sigmaX=max(sigma_along, 0.3),
                            sigmaY=max(sigma_across, 0.3), borderType=cv2.BORDER_CONSTANT)


def profile_sharpness(filtered: np.ndarray) -> float:
    """Sharpness of the projection profile across the text (rows): ``sum P^2 / (sum P)^2``,
    high when the ink concentrates in few rows (lines) with gaps between them. Unlike the
    profile's variance it ignores the empty rows and corners that rotation adds."""
    profile = filtered.sum(axis=1, dtype=np.float64)
    total = profile.sum()
    return float((profile**2).sum() / (total * total)) if total > 0 else 0.0


def ink_cells(small: np.ndarray, bbox: tuple[int, int, int, int], block: int = 1, axis: int = 1
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Page coordinates ``x, y`` and ink amount ``w`` ``(k,)`` of the non-empty cells of the
    region's ink ``small`` (from :func:`region_mask`), with ``block`` cells along x (``axis``
    1) or y (``axis`` 0) merged into one (the orientation score does not need them finer than
    its filter along the text; see :func:`merged_cells` for which way to merge)."""
    x0, y0, x1, y1 = bbox
    h, w = small.shape
    sx, sy = w / (x1 - x0), h / (y1 - y0)
    if block > 1 and axis == 1:
        small = cv2.resize(small, (max(1, -(-w // block)), h), interpolation=cv2.INTER_AREA)
    elif block > 1:
        small = cv2.resize(small, (w, max(1, -(-h // block))), interpolation=cv2.INTER_AREA)
    ys, xs = np.nonzero(small)
    weight = small[ys, xs].astype(np.float64)
    # Cell j of ``small`` stands for page x = x0 + j / sx (as _region_raster's warp reads it); a
    # merged cell for the middle of the cells it holds.
    ratio_x, ratio_y = w / small.shape[1], h / small.shape[0]
    x = x0 + ((xs + 0.5) * ratio_x - 0.5) / sx
    y = y0 + ((ys + 0.5) * ratio_y - 0.5) / sy
    return x, y, weight


#: Merged cells may spread the ink across the text by at most this many cells (the bank's
#: Gaussian across is H_cc / 3 = 2.7 cells: a smear of 3 cells widens it by 6 %).
_MAX_SMEAR_CELLS = 3.0


def merged_cells(small: np.ndarray, bbox: tuple[int, int, int, int], deg: float, max_block: int,
                 cache: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`ink_cells` for the orientation score at ``deg`` degrees: merged along the page
    axis nearer the text direction (x up to 45 deg, y beyond), in blocks (powers of two, at
    most ``max_block``) no longer than moves the ink ``_MAX_SMEAR_CELLS`` across the text.
    Merging along x whatever the angle put a block's ink at one point across a vertical
    text: at +-90 deg the profile became a comb of the blocks' period and scored as lines
    (kraken-sample: contrast 0.38 at -90 deg against 0.002 unmerged and 0.12 at its true
    0 deg), and at 30-60 deg it blurred the lines' profile across. ``cache`` keeps the sets
    built for one region."""
    th = math.radians(deg)
    axis = 1 if abs(math.cos(th)) >= abs(math.sin(th)) else 0
    spread = abs(math.sin(th)) if axis == 1 else abs(math.cos(th))
    block = max_block if spread * max_block <= _MAX_SMEAR_CELLS else max(1, int(_MAX_SMEAR_CELLS / spread))
    block = 1 << (int(block).bit_length() - 1)  # a power of two: few distinct sets per region
    key = (axis, min(block, max_block))
    if key not in cache:
        cache[key] = ink_cells(small, bbox, key[1], axis)
    return cache[key]


def across_profile(cells: tuple[np.ndarray, np.ndarray, np.ndarray], phi: float,
                   bbox: tuple[int, int, int, int], scale: float, scale_u: float, sigma_along: float,
                   size_along: int = 0) -> np.ndarray:
    """Row sums of the region raster (:func:`_region_raster` at ``scale``/``scale_u``) after
    the Gaussian of ``sigma_along`` cells along its rows, from the ink ``cells``
    (:func:`ink_cells`) without resampling or filtering the region: the filter keeps a cell's
    ink but for the part of its kernel past the raster's ends, which is the kernel's tail
    mass beyond them (this loss matters for small regions); each cell's ink is then split
    linearly between the two rows its centre falls between. ``size_along``: the kernel's size
    in cells (0 = OpenCV's for the sigma). ``(rows,)``."""
    x0, y0, x1, y1 = bbox
    c, s = math.cos(phi), math.sin(phi)
    corners = np.array([[x0, y0], [x1, y0], [x0, y1], [x1, y1]], float)
    cu, cv = corners[:, 0] * c + corners[:, 1] * s, corners[:, 1] * c - corners[:, 0] * s
    u0, v0 = cu.min(), cv.min()
    width = int(math.ceil((cu.max() - u0) * scale_u)) + 1
    height = int(math.ceil((cv.max() - v0) * scale)) + 1
    x, y, weight = cells
    if len(x) == 0:
        return np.zeros(height)
    # The kernel OpenCV builds for a float32 image, and its cumulative mass at offsets -R-1..R.
    sigma = max(sigma_along, 0.3)
    ksize = size_along if size_along > 0 else int(round(sigma * 8 + 1)) | 1
    kernel = cv2.getGaussianKernel(ksize, sigma, cv2.CV_32F).ravel().astype(np.float64)
    radius = ksize // 2
    # Cumulative kernel mass at offsets -R-1..R, tabulated at 1/16 cell for lookups.
    mass = np.interp(np.arange(-16 * (radius + 1), 16 * radius + 1) / 16.0,
                     np.arange(-radius - 1, radius + 1, dtype=np.float64),
                     np.concatenate([[0.0], np.cumsum(kernel)]))
    col = (x * c + y * s - u0) * scale_u

    def tail(offset: np.ndarray) -> np.ndarray:
        at = np.rint((offset + radius + 1) * 16.0)
        np.maximum(at, 0, out=at)  # clip to the table (np.clip's checks cost more than this)
        np.minimum(at, len(mass) - 1, out=at)
        return mass[at.astype(np.int64)]

    kept = tail(width - 1 - col) - tail(-col - 1)
    pos = (y * c - x * s - v0) * scale
    row = pos.astype(np.int64)  # pos >= 0: truncation is the floor
    frac = pos - row
    w = weight * kept
    upper = w * frac
    n = max(height, int(row.max()) + 2)
    return np.bincount(row, w - upper, minlength=n) + np.bincount(row + 1, upper, minlength=n)


def across_blur(profile: np.ndarray, sigma_across: float, size_across: int = 0) -> np.ndarray:
    """A row profile ``(h,)`` under the bank's Gaussian across the text (``size_across``: its
    kernel in rows, 0 = OpenCV's), float64 ``(h,)``: the row sums of the 2-D filtered raster
    are the 1-D filtered row sums of the raster filtered along the rows."""
    column = np.asarray(profile, np.float32)[:, None]
    return cv2.GaussianBlur(column, (1, size_across), sigmaX=0.3, sigmaY=max(sigma_across, 0.3),
                            borderType=cv2.BORDER_CONSTANT).astype(np.float64)[:, 0]


def line_contrast(profile: np.ndarray, sigma_across: float, sigma_block: float, size_across: int = 0) -> float:
    """Orientation score of a row profile ``(h,)`` across the text: the fraction of the energy
    of the profile (after the bank's Gaussian of ``sigma_across`` rows) that lies above the
    scale ``sigma_block`` (rows, about one text height): ``sum (P_s - P_b)^2 / sum P_s^2`` with
    ``P_b`` the profile under a Gaussian of ``sigma_block``.

    Why not :func:`profile_sharpness` (``sum P^2 / (sum P)^2``): that is about one over the
    number of rows the ink spans, so it also rewards the angle at which the *block* is
    narrowest. A block taller than wide (side notes of short lines, moc-train) scored best
    across its lines: moc_train_11, lines at -25 deg, got -40 deg (the range's end) or -90 deg
    (full range). The envelope of the block lives at scales above a text height and the
    lines' alternation of ink and gap at the line pitch, so the high-pass fraction keeps
    the lines and drops the block's shape (on moc-train with the full range, the share of
    ground-truth-line samples in a region more than 10 deg off went 0.51 -> 0.26)."""
    sigma_block = max(sigma_block, 0.3)
    pad = int(4 * sigma_block) + 2  # room for the wide Gaussian's tails
    column = np.zeros((len(profile) + 2 * pad, 1), np.float32)
    column[pad:pad + len(profile), 0] = profile
    smoothed = cv2.GaussianBlur(column, (0, size_across), sigmaX=0.3, sigmaY=max(sigma_across, 0.3),
                                borderType=cv2.BORDER_CONSTANT).astype(np.float64)
    block = cv2.GaussianBlur(column, (0, 0), sigmaX=0.3, sigmaY=sigma_block,
                             borderType=cv2.BORDER_CONSTANT).astype(np.float64)
    energy = float((smoothed * smoothed).sum())
    return float(((smoothed - block) ** 2).sum()) / energy if energy > 0 else 0.0


def best_orientation(small: np.ndarray, bbox: tuple[int, int, int, int], stats: ComponentStats,
                     params: Parameters, around: float | None = None, points: np.ndarray | None = None,
                     page_deg: float | None = None, report: dict | None = None) -> float:
    """The text angle (radians) in the orientation range whose filtered profile shows lines
    best (:func:`line_contrast`); with ``around`` (degrees: the direction of a block of words
    written across the main text, engine.regions.across_blocks), the best within
    ``AROUND_BLOCK`` degrees of it.

    With ``steep_regions`` (or ``multi_oriented``) every angle of the half-turn is scored and
    the best wins (side notes run at any angle). Earlier versions also asked for blobs longer
    along the text there (:func:`blob_elongation`), because Latin pages scored higher at -90
    deg (kraken-sample: 0.38 against 0.13 at its true 0 deg). That score was an artefact:
    the ink cells were merged along x at every angle, so at +-90 deg each merged cell put its
    ink at one point across the text, a comb of the merge's period; merged along the text
    (:func:`merged_cells`), kraken-sample scores 0.002 at -90 deg. The elongation test
    kept blocks of short, densely packed steep lines at 0 deg (moc_train_13, moc_train_9: a
    horizontal filter joins their columns into long blobs; contrast 0.065 at -88 deg against
    0.014 at 0 deg).

    With ``steep_evidence`` > 0 and the page's direction known (``page_deg``, the direction
    of its long words, :func:`page_angle`), a steep angle (outside the range) that scores
    best must also be supported by the region's ink (:func:`steep_supported`, with
    ``points`` the region's samples); otherwise the region keeps the page's direction: the
    best within ``AROUND_BLOCK`` of ``page_deg``. Without a page direction (bilevel pages)
    there is no better angle to give the region, and the steep one stands.

    The score needs only the row sums of the filtered raster: they are computed from the
    ink cells directly (:func:`across_profile`), at a fraction of the cost of resampling and
    filtering the region at every angle."""
    lo, hi = params.orientation_range
    steep = params.steep_regions and not params.multi_oriented
    angles = np.arange(-90.0, 90.0, params.orientation_step) if steep else np.arange(
        lo, hi + 1e-9, params.orientation_step)
    if params.multi_oriented and hi - lo >= 180 - params.orientation_step:
        angles = angles[angles < 90.0]  # -90 and 90 are the same orientation
    scale = min(1.0, _TARGET_HCC / max(stats.h_cc, 1.0))
    scale_u = along_scale(stats, params, scale)
    sig_across = params.filter_sigma_across * stats.h_cc * scale
    sig_along = params.filter_sigma_along * stats.w_cc * scale_u
    size_across, size_along = bank_kernels(stats, params, scale, scale_u)
    # Cells merged along the text in blocks no longer than a raster cell along it.
    max_block = max(1, int(scale / scale_u))
    cache: dict = {}

    def ink_profile(deg: float) -> np.ndarray:
        cells = merged_cells(small, bbox, deg, max_block, cache)
        return across_profile(cells, math.radians(deg), bbox, scale, scale_u, sig_along, size_along)

    def score(deg: float) -> float:
        profile = ink_profile(deg)
        if params.orientation_score == "sharpness":
            # The projection profile of the filtered image: blurred across as well.
            return profile_sharpness(across_blur(profile, sig_across, size_across)[:, None])
        return line_contrast(profile, sig_across, stats.h_cc * scale, size_across)

    if around is not None and (steep or params.multi_oriented):
        # A note's lines up a margin show lines too weakly to decide alone (poilus AN_0008-3:
        # contrast 0.035 at -90 deg, 0.037 at -56 deg); its words' direction narrows the search.
        angles = np.arange(-90.0, 90.0, params.orientation_step)
        angles = angles[angle_gap(angles, around) <= AROUND_BLOCK + 1e-9]
        lo, hi, steep = -90.0, 90.0, False
    scores = np.array([score(deg) for deg in angles])
    inside = (angles >= lo - 1e-9) & (angles <= hi + 1e-9)
    best = float(angles[inside][int(np.argmax(scores[inside]))]) if inside.any() else float(
        angles[int(np.argmax(scores))])
    if steep and (~inside).any():
        k = int(np.argmax(np.where(inside, -np.inf, scores)))
        if scores[k] > scores[angles == best][0]:
            steep_deg, steep_score = float(angles[k]), float(scores[k])
            if params.steep_evidence > 0 and page_deg is not None:
                # The evidence is read at the candidate's own angle to a fraction of a step: a
                # long row skewed by a degree smears its profile's period (moc_train_20: no
                # period at -90 deg, 70 px at -88.8 deg).
                fine = steep_deg + np.linspace(-params.orientation_step, params.orientation_step, 9)
                fine_scores = [score(deg) for deg in fine]
                steep_deg = float(fine[int(np.argmax(fine_scores))])
                steep_score = float(max(fine_scores))
            if params.steep_evidence <= 0 or page_deg is None or steep_supported(
                    angles, scores, inside, steep_deg, steep_score, points, stats, params.steep_evidence,
                    ink_profile(steep_deg) if params.steep_period == "ink" else None, stats.h_cc * scale):
                best = float(angles[k])
                lo, hi = -90.0, 90.0
            else:
                # No evidence for the steep angle: the region keeps the page's, as a block of
                # words keeps to its words' direction (``around``). A word of one row shows no
                # rows at any angle, and its best in the range may be the edge of its
                # downstrokes' peak (AN_0121-2's "mort": 0.074 at -40 deg and at 0 deg).
                if report is not None:
                    report["page_direction"] = True
                near = angle_gap(angles, page_deg) <= AROUND_BLOCK + 1e-9
                if not near.any():
                    near = angle_gap(angles, page_deg) <= angle_gap(angles, page_deg).min() + 1e-9
                best = float(angles[near][int(np.argmax(scores[near]))])
                lo, hi = (-90.0, 90.0) if not inside[near].all() else (lo, hi)
    # A finer look around the best angle: skew matters to a fraction of a degree on long lines.
    step = params.orientation_step
    fine = np.clip(best + np.linspace(-step, step, 9), lo, hi)
    best = float(fine[int(np.argmax([score(deg) for deg in fine]))])
    return math.radians(best)


#: How far (degrees) the frame of a block of words across the main text may turn from its
#: words' direction (best_orientation's ``around``): half of STEEP_SPLIT_ANGLE.
AROUND_BLOCK = 10.0

#: Angles closer than this (degrees) are one orientation of the text for
#: :func:`steep_supported` and :func:`best_orientation`, and a line keeps within it of its
#: frame (``frame_lines``). engine.regions.SPLIT_ANGLE was the same 20 until it went to 15
#: (regions imports this module).
STEEP_SPLIT_ANGLE = 20.0
#: A row period is evidence for an angle when the region spans at least this many periods
#: across the text there (a period needs two rows).
STEEP_MIN_ROWS = 2.0


def steep_supported(angles: np.ndarray, scores: np.ndarray, inside: np.ndarray, deg: float,
                    score: float, points: np.ndarray | None, stats: ComponentStats, ratio: float,
                    rows: np.ndarray | None = None, cells_per_hcc: float = 1.0) -> bool:
    """Whether a region's ink supports the steep angle ``deg`` (degrees, outside the range,
    where its line contrast is ``score``; ``scores`` the contrast at every one of ``angles``,
    ``inside`` the range's angles): its contrast there is at least ``ratio`` times the best at
    the range's angles
    ``STEEP_SPLIT_ANGLE`` or more away (the text at another orientation than the range
    allows shows its rows there and nowhere near the range), or its rows show a period
    across the text at that angle, over at least ``STEEP_MIN_ROWS`` periods: read from
    ``rows``, the region's ink profile across the text at that angle (cells of
    ``1 / cells_per_hcc`` H_cc, :func:`across_profile`; ``Parameters.steep_period`` "ink"),
    else from its samples ``points (n, 2)`` (:func:`engine.pitch.across_pitch`).

    What it rejects: one row of large slanted cursive whose H_cc is a third of its letters'
    height (poilus AN_0121-2, H_cc 13 px from the card's perforated edge). The row's profile
    at its own angle is one bump several H_cc tall, which the contrast (energy above the
    scale of H_cc) mostly drops, while across the slanted downstrokes, 1-2 H_cc apart, the
    profile is a comb: contrast 1.2-1.5x the range's best, no row period. Side notes at
    their own angle score 3.3-20x (moc-train, 22 regions without a period) or show rows."""
    far = inside & (angle_gap(angles, deg) >= STEEP_SPLIT_ANGLE)
    reference = float(scores[far].max()) if far.any() else 0.0
    if score >= ratio * reference:
        return True
    if rows is not None:
        # The region's ink profile across the text at that angle (``rows``, cells of
        # 1 / cells_per_hcc H_cc): every pixel of its components, not the samples drawn from
        # them, so that the answer does not change with the draw.
        lag = line_pitch(rows, _MIN_PITCH_HCC * cells_per_hcc, 20.0 * cells_per_hcc)
        inked = np.flatnonzero(rows > 1e-9 * max(float(rows.max()), 1e-300))
        return bool(math.isfinite(lag) and len(inked) and inked[-1] - inked[0] + 1 >= STEEP_MIN_ROWS * lag)
    if points is None or len(points) < 8:
        return False
    from .pitch import across_pitch  # pitch imports this module

    v = to_region_frame(np.asarray(points, np.float64), math.radians(deg))[:, 1]
    pitch, _, _ = across_pitch(v, stats.h_cc)
    return bool(math.isfinite(pitch) and np.ptp(v) >= STEEP_MIN_ROWS * pitch)


def page_angle(sample_axis: np.ndarray | None) -> float | None:
    """The page's text direction (degrees): the direction its long words are written in, the
    sample-weighted mode of ``sample_axis`` (:func:`engine.regions.component_axes`: cursive
    words are long along their row, whatever H_cc says); None without long words. Bilevel
    pages get no axes (the letter groups of binarised Arabic have no reliable direction,
    engine.pipeline), and neither does a page with fewer than 8 samples on long words."""
    from .regions import _axis_mode  # regions imports this module

    if sample_axis is None:
        return None
    axes = sample_axis[np.isfinite(sample_axis)]
    return _axis_mode(axes) if len(axes) >= 8 else None


def blob_elongation(small: np.ndarray, bbox: tuple[int, int, int, int], stats: ComponentStats,
                    params: Parameters, deg: float) -> float:
    """How long along the text the region's blobs are in the frame at ``deg`` degrees: the
    ink-weighted mean of log(width / height) of the blobs of the bank's filtered raster above
    Otsu's level (width along the text, pixels). Text lines make long blobs at their own
    angle; at 90 deg from it the long filter joins letters of several lines into short ones."""
    scale = min(1.0, _TARGET_HCC / max(stats.h_cc, 1.0))
    scale_u = blob_scale_u(stats, scale)
    raster, _ = _region_raster(small, math.radians(deg), bbox, scale, scale_u, params.raster_along_mean)
    found = _filtered_blobs(raster, stats, params, scale, scale_u)
    if found is None:
        return -math.inf
    _, n, labels, cc_stats = found
    ink = np.bincount(labels.ravel(), raster.ravel(), minlength=n)[1:]
    if n <= 1 or ink.sum() <= 0:
        return -math.inf
    width = np.maximum(cc_stats[1:, cv2.CC_STAT_WIDTH] / scale_u, 1.0)
    height = np.maximum(cc_stats[1:, cv2.CC_STAT_HEIGHT] / scale, 1.0)
    return float((ink * np.log(width / height)).sum() / ink.sum())


def line_pitch(profile: np.ndarray, min_lag: float, max_lag: float, few_rows: bool = False) -> float:
    """The period of a row profile ``(h,)`` across the text (in rows): the highest local
    maximum of its autocorrelation between ``min_lag`` and ``max_lag`` that stands
    ``_MIN_PITCH_PROMINENCE`` above the autocorrelation's lowest value at smaller lags, or
    the period it is a multiple of (:func:`fundamental_lag`); NaN when there is none or it
    is too weak to show regular lines.

    ``few_rows``: the peak's correlation is trusted for the part of the profile that
    overlaps itself at that lag (x ``h / (h - lag)``, at most x 2): a profile of n rows
    correlates at most (n - 1) / n at its pitch, so a card of three rows cannot show more
    than 0.67 however regular (poilus AN_0121-2 turned by 3 degrees: 0.48 at seed 1)."""
    p = np.asarray(profile, np.float64) - np.mean(profile)
    n = len(p)
    lo, hi = max(int(min_lag), 1), min(int(max_lag), n - 2)
    if hi - lo < 3 or not np.any(p):
        return float("nan")
    f = np.fft.rfft(p, 2 * n)
    ac = np.fft.irfft(f * np.conj(f))[:n]
    ac = ac / ac[0]
    seg = ac[lo:hi + 1]
    peaks = np.flatnonzero((seg[1:-1] > seg[:-2]) & (seg[1:-1] >= seg[2:])) + 1
    trough = np.minimum.accumulate(ac)[lo + peaks - 1]  # lowest value before each peak
    peaks = peaks[seg[peaks] - trough >= _MIN_PITCH_PROMINENCE]
    if len(peaks) == 0:
        return float("nan")
    best = peaks[np.argmax(seg[peaks])]
    lag = lo + int(best)
    overlap = n / max(n - lag, 0.5 * n) if few_rows else 1.0
    if seg[best] * overlap < _MIN_PITCH_CORRELATION:
        return float("nan")
    return float(fundamental_lag(ac, lag, lo))


def fundamental_lag(ac: np.ndarray, lag: int, min_lag: int, record: list | None = None) -> int:
    """The row period under the autocorrelation ``ac`` (normalised) whose highest prominent
    peak is at ``lag``: the smallest lag with a prominent peak (rising
    ``_MIN_PITCH_PROMINENCE`` above the trough before it) of which ``lag`` is a multiple.
    Rows grouped in pairs or threes (clouds drawn round two rows, poilus AN_0090-0) raise the
    second or third harmonic above the first; a profile with no peak at a fraction of ``lag``
    has no shorter period. (Also where the blob filters are scaled to the pitch,
    :func:`line_height`: AN_0090-0 at seed 1 correlated 0.60 at 18 cells and 0.65 at 56, the
    filters scaled to 56 joined rows by threes, 10 initial lines for 25 rows, FM 0.07.)
    ``record``: a list that receives each candidate weighed, as ``(lag, k, multiple, off,
    slack)`` (lags; taken when off <= slack), for bench/harmonic_margins.py."""
    peaks = np.flatnonzero((ac[1:-1] > ac[:-2]) & (ac[1:-1] >= ac[2:])) + 1
    peaks = peaks[(peaks >= max(min_lag, 1)) & (peaks < lag)]
    trough = np.minimum.accumulate(ac)[peaks - 1]
    # Peaks to a fraction of a lag: a whole-lag peak is up to half a lag off, and that error
    # times the multiple exceeds the slack (AN_0090-0: peaks at 18 and 56, 18.49 and 55.56).
    at = peak_position(ac, lag)
    for k in peaks[ac[peaks] - trough >= _MIN_PITCH_PROMINENCE]:  # smallest first
        m = at / peak_position(ac, int(k))
        if round(m) < 2:
            continue
        off, slack = abs(m - round(m)) * k, 1.0 + 0.05 * k
        if record is not None:
            record.append((int(lag), int(k), int(round(m)), float(off), float(slack)))
        if off <= slack:
            return int(k)
    return lag


def peak_position(ac: np.ndarray, k: int) -> float:
    """The position of the peak of ``ac`` at whole lag ``k``, from the parabola through it and
    its neighbours; ``k`` where that has no maximum."""
    if not 0 < k < len(ac) - 1:
        return float(k)
    den = ac[k - 1] - 2.0 * ac[k] + ac[k + 1]
    return float(k + 0.5 * (ac[k - 1] - ac[k + 1]) / den) if den < 0 else float(k)


def line_height(raster: np.ndarray, stats: ComponentStats, scale: float, t_o: float) -> float:
    """Height (pixels) the blob filters and the overlap test are scaled to: ``H_cc``, or
    pitch / 2.5 where the region's lines are regularly spaced much further apart than its
    components are tall (Arabic hands broken into letter groups: H_cc 20 px for lines 100 px
    apart), and at most ``BLOB_PITCHES`` x pitch / ``t_o`` (tall loops: H_cc near the pitch)."""
    h = stats.h_cc * scale
    pitch = line_pitch(raster.sum(axis=1), _MIN_PITCH_HCC * h, 20.0 * h) / scale
    if not np.isfinite(pitch):
        return stats.h_cc
    return min(max(stats.h_cc, pitch / PITCH_PER_LINE_HEIGHT), BLOB_PITCHES * pitch / t_o)


def _otsu(values: np.ndarray) -> float:
    hist, edges = np.histogram(values, bins=256)
    centres = (edges[:-1] + edges[1:]) / 2
    w0 = np.cumsum(hist)
    w1 = w0[-1] - w0
    m0 = np.cumsum(hist * centres)
    mean0 = m0 / np.maximum(w0, 1)
    mean1 = (m0[-1] - m0) / np.maximum(w1, 1)
    between = w0 * w1 * (mean0 - mean1) ** 2
    return float(centres[int(np.argmax(between))])


def blob_scale_u(stats: ComponentStats, scale: float) -> float:
    """Cells per pixel along the text of the blob raster: finer than the orientation search's
    (:func:`along_scale`), since fragments of one line are told apart by gaps of about one word."""
    return min(scale, 2.0 / max(stats.w_cc, 1.0))


def _filtered_blobs(raster: np.ndarray, stats: ComponentStats, params: Parameters, scale: float,
                    scale_u: float) -> tuple[np.ndarray, int, np.ndarray, np.ndarray] | None:
    """The bank's filtered raster and its blobs above the blob threshold: (filtered, count
    with the background, labels, OpenCV stats); None when the raster is empty."""
    filtered = _smooth(raster, params.filter_sigma_across * stats.h_cc * scale,
                       params.filter_sigma_along * stats.w_cc * scale_u,
                       *bank_kernels(stats, params, scale, scale_u))
    positive = filtered[filtered > 1e-6]
    if positive.size == 0:
        return None
    # Below Otsu's level (blob_threshold < 1): short lines (a few words) respond weaker than
    # full ones and fell under Otsu itself; lines that merge at the lower level are cut at
    # their valleys (line_blobs).
    binary = (filtered > params.blob_threshold * _otsu(positive)).astype(np.uint8)
    n, labels, cc_stats, _ = cv2.connectedComponentsWithStats(binary, connectivity=4, ltype=cv2.CV_32S)
    return filtered, n, labels, cc_stats


def line_blobs(raster: np.ndarray, stats: ComponentStats, params: Parameters, scale: float,
               scale_u: float | None = None, t_r: float | None = None) -> np.ndarray:
    """Blob label per raster cell (int32, 0 = none) after Otsu (and the lower levels of
    ``weak_line_level`` for short lines), overlap splitting and residual-blob removal;
    ``scale``/``scale_u``: cells per pixel across/along the text."""
    return line_blobs_and_response(raster, stats, params, scale, scale_u, t_r)[0]


def line_blobs_and_response(raster: np.ndarray, stats: ComponentStats, params: Parameters, scale: float,
                            scale_u: float | None = None, t_r: float | None = None,
                            found: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`line_blobs` and the bank's filtered raster it thresholded (float32, the raster's
    shape; zeros for an empty raster). ``t_r``: the ink ratio under which a blob is residual
    (default ``params.t_r``; the page's, :func:`residual_ratio`); ``found``: the raster's
    :func:`_filtered_blobs` when already made."""
    scale_u = scale if scale_u is None else scale_u
    if found is None:
        found = _filtered_blobs(raster, stats, params, scale, scale_u)
    if found is None:
        return np.zeros(raster.shape, np.int32), np.zeros(raster.shape, np.float32)
    if found[1] <= 1:
        return np.zeros(raster.shape, np.int32), found[0]
    filtered, n, labels, cc_stats = found
    t_r = params.t_r if t_r is None else t_r
    keep = _dense(raster, labels, cc_stats, n, t_r)
    blob = np.zeros(raster.shape, np.int32)
    next_id = _cut_blobs(blob, filtered, labels, cc_stats, np.flatnonzero(keep), stats, params, scale, 1)
    if params.weak_line_level > 0:
        # Short lines (the last words of a paragraph, a one-word line) respond to the long
        # filter far weaker than full ones and stay under Otsu's level, yet stand apart from
        # their neighbours (cremma 01R_P1S7P178_006, "enfants.": peak 0.82 x the level,
        # valleys 0.21 and 0.40 either side). Going down from the level in tenths, a blob
        # that holds no blob found higher up is a line of its own, found where it first shows.
        level = params.blob_threshold * _otsu(filtered[filtered > 1e-6])
        for frac in np.arange(0.9, params.weak_line_level - 1e-9, -0.1):
            weak = (filtered > frac * level).astype(np.uint8)
            n_w, labels_w, stats_w, _ = cv2.connectedComponentsWithStats(weak, connectivity=4, ltype=cv2.CV_32S)
            holds = np.zeros(n_w, bool)
            holds[np.unique(labels_w[blob > 0])] = True
            keep_w = _dense(raster, labels_w, stats_w, n_w, t_r) & ~holds
            next_id = _cut_blobs(blob, filtered, labels_w, stats_w, np.flatnonzero(keep_w), stats, params,
                                 scale, next_id)
    return blob.astype(np.int32), filtered


def _ink_ratios(raster: np.ndarray, labels: np.ndarray, cc_stats: np.ndarray, n: int) -> np.ndarray:
    """Mean ink fraction of each of the ``n`` blobs of ``labels`` (background first)."""
    ink_sum = np.bincount(labels.ravel(), weights=raster.ravel(), minlength=n)
    return ink_sum / np.maximum(cc_stats[:, cv2.CC_STAT_AREA], 1)


#: A page's typical ink ratio is read from this many blobs or more (fewer may all be residual).
TYPICAL_MIN_BLOBS = 3


def residual_ratio(blobs: list[tuple[np.ndarray, tuple | None]], params: Parameters) -> float:
    """The ink ratio under which a blob is residual on a page whose regions' blob rasters
    and their blobs at Otsu's level are ``blobs`` (raster, its :func:`_filtered_blobs`):
    ``t_r``, or ``t_r_typical`` x the page's typical ratio where that is lower
    (the area-weighted median over the blobs of every region at Otsu's level; with
    ``TYPICAL_MIN_BLOBS`` or more). A row's ink ratio follows the pen's width against the
    writing's height (dev pages: 0.08 on a thin-pen letter, 0.42 on binarised Arabic), and
    a residual blob (a filter's tail between rows, a speck's halo, a book edge's grain) is one
    far under the page's rows, not under one ratio for every hand. Read over the page, not
    the region: a region of an edge's grain is all residual blobs of one ratio."""
    if params.t_r_typical <= 0:
        return params.t_r
    ratios, areas = [], []
    for raster, found in blobs:
        if found is None or found[1] <= 1:
            continue
        _, n, labels, cc_stats = found
        ratios.append(_ink_ratios(raster, labels, cc_stats, n)[1:])
        areas.append(cc_stats[1:, cv2.CC_STAT_AREA].astype(np.float64))
    if not ratios or sum(len(r) for r in ratios) < TYPICAL_MIN_BLOBS:
        return params.t_r
    median = weighted_median(np.concatenate(ratios), np.concatenate(areas))
    return min(params.t_r, params.t_r_typical * median)


def _dense(raster: np.ndarray, labels: np.ndarray, cc_stats: np.ndarray, n: int, t_r: float) -> np.ndarray:
    """Blobs (bool ``(n,)``, background False) whose mean ink fraction is at least ``t_r``;
    the others are residual."""
    keep = _ink_ratios(raster, labels, cc_stats, n) >= t_r
    keep[0] = False
    return keep


def _cut_blobs(blob: np.ndarray, filtered: np.ndarray, labels: np.ndarray, cc_stats: np.ndarray,
               chosen: np.ndarray, stats: ComponentStats, params: Parameters, scale: float,
               next_id: int) -> int:
    """Write the ``chosen`` blobs of ``labels`` into ``blob`` from id ``next_id`` on, each cut
    into lines where it is too tall for one; returns the next free id."""
    # Overlap detection: a blob taller than t_o x H_cc holds several lines (touching or
    # crowded lines merge under the long filter). Cut it at the valleys of its own row
    # profile; where the profile has none, cut into ceil(height / (t_o H_cc)) equal bands.
    t_o = params.t_o * stats.h_cc * scale
    for i in chosen:  # blobs: a few dozen per region
        x, y, w, h = cc_stats[i, :4]
        inside = labels[y:y + h, x:x + w] == i
        # Only blobs taller than t_o are cut (paper): looking for valleys in every blob taller
        # than H_cc cut Arabic lines (tall alifs, dense diacritics) in two (ahte book1: 86
        # initial lines for 27).
        cuts = np.zeros(0)
        if h > t_o and params.overlap_valleys:
            cuts = profile_valleys((filtered[y:y + h, x:x + w] * inside).sum(axis=1), 0.5 * stats.h_cc * scale)
        if len(cuts) == 0 and h > t_o:
            n_parts = int(np.ceil(h / max(t_o, 1e-9)))
            cuts = (np.arange(1, n_parts) * h) / n_parts
        piece = np.searchsorted(np.asarray(cuts, float), np.arange(h) + 0.5)[:, None]
        blob[y:y + h, x:x + w][inside] = (next_id + np.broadcast_to(piece, inside.shape))[inside]
        next_id += len(cuts) + 1
    return next_id


def profile_valleys(profile: np.ndarray, min_separation: float, depth: float = 0.8) -> np.ndarray:
    """Rows (float) of the significant minima of a row profile ``(h,)``: lower than ``depth``
    x the smaller of the highest points on either side, at least ``min_separation`` apart."""
    h = len(profile)
    if h < 3:
        return np.zeros(0)
    is_min = np.flatnonzero((profile[1:-1] <= profile[:-2]) & (profile[1:-1] < profile[2:])) + 1
    if len(is_min) == 0:
        return np.zeros(0)
    left_max = np.maximum.accumulate(profile)[is_min]
    right_max = np.maximum.accumulate(profile[::-1])[::-1][is_min]
    deep = profile[is_min] < depth * np.minimum(left_max, right_max)
    cand = is_min[deep]
    kept: list[int] = []
    for m in cand[np.argsort(profile[cand], kind="stable")]:  # deepest first; few candidates
        if all(abs(m - k) >= min_separation for k in kept):
            kept.append(int(m))
    return np.sort(np.array(kept, float))


def line_floors(stats: ComponentStats, params: Parameters) -> tuple[float, float]:
    """The variance floors (pixels): sigma_t >= sigma_t_floor x H_cc, sigma_s >= sigma_s_floor x W_cc."""
    return params.sigma_t_floor * stats.h_cc, params.sigma_s_floor * stats.w_cc


def order_lines(lines: LineSet, region_centre_u: dict[int, float]) -> np.ndarray:
    """Permutation putting lines in region order, then across the text (top to bottom in the
    region frame, evaluated at the region's centre)."""
    centre = np.array([region_centre_u.get(int(r), 0.0) for r in lines.region])
    across = lines.a * centre + lines.b
    return np.lexsort((across, lines.region))


def _region_ink(components: np.ndarray, comp_in_region: np.ndarray, xy: np.ndarray, stats: ComponentStats,
                scale: float) -> tuple[tuple[int, int, int, int], np.ndarray]:
    """Region box ``(x0, y0, x1, y1)`` in pixels (its samples' box ``xy (n, 2)`` widened to the
    full extent of its components, ``comp_in_region (C + 1,)``, within 4 H_cc / W_cc of it)
    and the region's ink in that box as :func:`region_mask` gives it."""
    x0, y0 = np.floor(xy.min(axis=0)).astype(int)
    x1, y1 = np.floor(xy.max(axis=0)).astype(int) + 1
    oy, ox = max(0, y0 - int(stats.h_cc * 4)), max(0, x0 - int(stats.w_cc * 4))
    member = _members(components[oy:y1 + int(stats.h_cc * 4), ox:x1 + int(stats.w_cc * 4)], comp_in_region)
    rows, cols = np.flatnonzero(member.any(axis=1)), np.flatnonzero(member.any(axis=0))
    if len(cols):
        x0, x1 = min(x0, ox + cols[0]), max(x1, ox + cols[-1] + 1)
        y0, y1 = min(y0, oy + rows[0]), max(y1, oy + rows[-1] + 1)
    bbox = int(x0), int(y0), int(x1), int(y1)
    # The box lies inside the window (the samples' box is): its ink is a crop of the window's.
    return bbox, _downscaled(member[y0 - oy:y1 - oy, x0 - ox:x1 - ox], scale)


def _component_regions(components: np.ndarray, sample_component: np.ndarray,
                       sample_region: np.ndarray) -> np.ndarray:
    """Each component's region ``(C + 1,)`` (-1: none, e.g. the background 0): the region of
    (one of) its samples; every component has one."""
    comp_region = np.full(int(components.max()) + 1, -1, np.int32)
    comp_region[sample_component] = sample_region
    return comp_region


def _region_frame(components: np.ndarray, comp_region: np.ndarray, r: int, xy: np.ndarray, stats: ComponentStats,
                  params: Parameters, scale: float, page_deg: float | None,
                  block_angles: dict[int, float] | None = None, phi: float | None = None
                  ) -> tuple[Region, np.ndarray]:
    """Region ``r`` (its samples ``xy (n, 2)``; ``comp_region`` from :func:`_component_regions`)
    with its box and frame angle, and its ink raster (:func:`_region_ink`); the frame is
    searched (:func:`best_orientation`) unless ``phi`` (radians) is given."""
    comp_in_region = comp_region == r
    comp_in_region[0] = False
    bbox, ink = _region_ink(components, comp_in_region, xy, stats, scale)
    report: dict = {}
    if phi is None:
        phi = best_orientation(ink, bbox, stats, params, None if block_angles is None else block_angles.get(r),
                               xy, page_deg, report)
    return Region(index=r, phi=phi, bbox=bbox, n_samples=len(xy),
                  page_direction=bool(report.get("page_direction", False))), ink


def region_frames(components: np.ndarray, samples: np.ndarray, sample_component: np.ndarray,
                  sample_region: np.ndarray, stats: ComponentStats, params: Parameters,
                  block_angles: dict[int, float] | None = None,
                  sample_axis: np.ndarray | None = None) -> tuple[tuple[Region, ...], dict[int, np.ndarray]]:
    """Every region with its frame angle and box, before any line is fitted: what
    engine.blocks.merge_parallel_blocks reads, so that blocks it joins have their lines
    fitted once, in the joined block (:func:`initial_lines` with their angles as ``phis``);
    and each region's ink raster (:func:`region_mask`), by region, for :func:`initial_lines`'s
    ``known``. Arguments as :func:`initial_lines`'s."""
    if len(samples) == 0:
        return (), {}
    comp_region = _component_regions(components, sample_component, sample_region)
    scale = min(1.0, _TARGET_HCC / max(stats.h_cc, 1.0))
    page_deg = page_angle(sample_axis) if params.steep_evidence > 0 and params.steep_regions else None
    regions, inks = [], {}
    for r in range(int(sample_region.max()) + 1):  # a few regions
        region, inks[r] = _region_frame(components, comp_region, r, samples[sample_region == r], stats, params,
                                        scale, page_deg, block_angles)
        regions.append(region)
    return tuple(regions), inks


def initial_lines(components: np.ndarray, samples: np.ndarray, sample_component: np.ndarray,
                  sample_region: np.ndarray, stats: ComponentStats, params: Parameters,
                  small: np.ndarray | None = None, only: np.ndarray | None = None,
                  phis: dict[int, float] | None = None, block_angles: dict[int, float] | None = None,
                  sample_axis: np.ndarray | None = None,
                  known: dict[int, tuple[Region, np.ndarray]] | None = None,
                  ) -> tuple[LineSet, tuple[Region, ...]]:
    """Initial lines of every region and the regions (with their frame angle and box).
    ``small (N,)`` marks samples on diacritic-sized components: blobs made mostly of them
    are residual and get no line. ``only``: the regions to fit (default all; the lines and
    regions returned are theirs); ``phis``: known frame angles (radians) by region, not
    searched again (:func:`region_frames`; engine.blocks.refine_boundaries moves a few words
    between blocks); ``block_angles``: by region, the direction (degrees) of its words when
    it is a block of words across the main text (engine.regions.find_regions), which its
    frame keeps to; ``sample_axis``: each sample's long word's direction
    (engine.regions.component_axes), for the page's direction that a region with no evidence
    for a steep angle keeps (``steep_evidence``, :func:`page_angle`); ``known``: by region,
    the region (box, frame) and its ink raster when already made (:func:`region_frames`, for
    a region whose samples did not change since)."""
    if small is None:
        small = np.zeros(len(samples), bool)
    rot_inv = params.regression == "rotation_invariant"
    if len(samples) == 0:
        return LineSet.empty(rot_inv), ()
    comp_region = _component_regions(components, sample_component, sample_region)
    floor_t, floor_s = line_floors(stats, params)
    scale = min(1.0, _TARGET_HCC / max(stats.h_cc, 1.0))
    parts: list[LineSet] = []
    regions: list[Region] = []
    centres: dict[int, float] = {}
    # The page's direction, which a region with no evidence for a steep angle keeps.
    page_deg = page_angle(sample_axis) if params.steep_evidence > 0 and params.steep_regions else None
    todo = range(int(sample_region.max()) + 1) if only is None else [int(r) for r in only]
    scale_u = blob_scale_u(stats, scale)
    framed = []
    for r in todo:  # loop over regions (a few), not samples
        members = sample_region == r
        xy = samples[members]
        if known is not None and r in known:
            region, region_ink = known[r]
        else:
            region, region_ink = _region_frame(components, comp_region, r, xy, stats, params, scale, page_deg,
                                               block_angles, None if phis is None else phis.get(r))
        regions.append(region)
        raster, origin = _region_raster(region_ink, region.phi, region.bbox, scale, scale_u,
                                        params.raster_along_mean)
        blob_stats = (replace(stats, h_cc=line_height(raster, stats, scale, params.t_o))
                      if params.pitch_line_height else stats)
        found = _filtered_blobs(raster, blob_stats, params, scale, scale_u)
        framed.append((r, members, xy, region, region_ink, raster, origin, blob_stats, found))
    # Residual blobs are told from the rows of the whole page (of the regions fitted here).
    t_r = residual_ratio([(f[5], f[8]) for f in framed], params)
    for r, members, xy, region, region_ink, raster, (u0, v0), blob_stats, found in framed:
        bbox, phi = region.bbox, region.phi
        blobs, response = line_blobs_and_response(raster, blob_stats, params, scale, scale_u, t_r, found)
        uv = to_region_frame(xy, phi)
        centres[r] = float(uv[:, 0].mean())
        col = np.clip(np.round((uv[:, 0] - u0) * scale_u).astype(int), 0, blobs.shape[1] - 1)
        row = np.clip(np.round((uv[:, 1] - v0) * scale).astype(int), 0, blobs.shape[0] - 1)
        blob_of_sample = blobs[row, col]
        if params.oriented_blobs > 0:
            # Each sample takes the blob of the filter angle that responds most at it
            # (engine.oriented_blobs): blocks at close angles in one region.
            from .oriented_blobs import oriented_blob_of_samples

            blob_of_sample = oriented_blob_of_samples(region_ink, bbox, phi, xy, blob_stats, params, scale,
                                                      scale_u, t_r, (blobs, response, (u0, v0)))
        ids, counts = np.unique(blob_of_sample[blob_of_sample > 0], return_counts=True)
        n_small = np.bincount(blob_of_sample[small[members]], minlength=int(blob_of_sample.max()) + 1)[ids]
        residual = params.remove_diacritic_lines & (n_small > params.diacritic_fraction * counts)
        ids = ids[(counts >= 3) & ~residual]
        if len(ids) == 0:
            weights = np.ones((len(uv), 1))
        else:
            weights = (blob_of_sample[:, None] == ids[None, :]).astype(np.float64)
        # frame_lines: a blob is a piece of a row at the frame's angle; its line runs within
        # SPLIT_ANGLE of it (a steeper direction is another block's: stage 5 cuts there).
        fit = fit_lines(uv, weights, rot_inv, floor_t, floor_s,
                        STEEP_SPLIT_ANGLE if params.frame_lines else 90.0)
        n_lines = len(fit.a)
        prior = fit.weight / max(fit.weight.sum(), 1e-12)
        parts.append(LineSet(fit.a, fit.b, fit.c, fit.sigma_t, fit.sigma_s, prior,
                             np.full(n_lines, r, np.int32), np.full(n_lines, phi), rot_inv))
    lines = concat_lines(parts, rot_inv)
    return lines.take(order_lines(lines, centres)), tuple(regions)


def concat_lines(parts: list[LineSet], rotation_invariant: bool) -> LineSet:
    """One LineSet holding the lines of ``parts`` in order."""
    if not parts:
        return LineSet.empty(rotation_invariant)
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])
    return LineSet(cat("a"), cat("b"), cat("c"), cat("sigma_t"), cat("sigma_s"), cat("prior"),
                   cat("region"), cat("phi"), rotation_invariant, cat("locked"), cat("anchored"), cat("chain"),
                   cat("sigma_t_measured"))


def lines_from_segments(prep: Preparation, segments: np.ndarray,
                        sigma_t: np.ndarray | None = None) -> LineSet:
    """Lines from page-coordinate segments ``(L, 2, 2)``; see :func:`engine.pipeline.lines_from_segments`."""
    rot_inv = prep.params.regression == "rotation_invariant"
    segments = np.asarray(segments, dtype=np.float64).reshape(-1, 2, 2)
    if len(segments) == 0 or len(prep.samples) == 0:
        return LineSet.empty(rot_inv)
    mid = segments.mean(axis=1)
    # The region holding most of the samples nearest the segment's midpoint.
    k = min(8, len(prep.samples))
    _, idx = cKDTree(prep.samples).query(mid, k=k)
    idx = np.asarray(idx).reshape(len(mid), k)
    near_regions = prep.sample_region[idx]
    region = np.array([np.bincount(row).argmax() for row in near_regions], np.int32)
    phi = np.array([prep.regions[r].phi for r in region])
    uv = to_region_frame(segments, phi[:, None])  # (L, 2, 2)
    du = uv[:, 1, 0] - uv[:, 0, 0]
    dv = uv[:, 1, 1] - uv[:, 0, 1]
    # Keep the slope finite: a segment drawn across the text is clamped to 80 degrees.
    du = np.where(np.abs(du) < 1e-6, 1e-6, du)
    a = np.clip(dv / du, -5.67, 5.67)
    centre = uv.mean(axis=1)
    b = centre[:, 1] - a * centre[:, 0]
    length = np.hypot(du, dv)
    floor_t, floor_s = line_floors(prep.stats, prep.params)
    if rot_inv:
        c = (centre[:, 0] + a * centre[:, 1]) / np.sqrt(1.0 + a * a)
    else:
        c = centre[:, 0]
        length = np.abs(du)
    sigma_s = np.maximum(length / 4.0, floor_s)  # segments() spans c +- 2 sigma_s
    if sigma_t is None:
        sigma_t = np.full(len(a), max(prep.stats.h_cc / 2.0, floor_t))
    counts = np.bincount(region, minlength=len(prep.regions)).astype(float)
    prior = 1.0 / counts[region]
    lines = LineSet(a, b, c, np.asarray(sigma_t, float), sigma_s, prior, region, phi, rot_inv)
    centres = {r.index: float(to_region_frame(prep.samples[prep.sample_region == r.index], r.phi)[:, 0].mean())
               for r in prep.regions}
    return lines.take(order_lines(lines, centres))
