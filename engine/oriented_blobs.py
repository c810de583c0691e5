"""Stage 6 on multi-oriented pages: initial lines at angles other than the region's frame,
from filter banks turned a few steps either side of it.

The paper filters a region at the one orientation whose projection profile is sharpest, and
every blob (hence every initial line) of the region runs at that angle. A region may hold
text at several close angles: two columns of side notes written side by side at -20 and 0
deg (moc_train_16), a block of short lines above a block at 15 deg more (moc_train_15). Such
blocks touch, or are joined by a few words, and the orientation split of stage 5
(:func:`engine.regions.orientation_parts`, windows of 8 text heights, parts more than
``engine.regions.SPLIT_ANGLE`` apart: 15 deg, 20 until 2026-11-27) separates them only
where their angles differ by more than that, or by the draw of the samples. At the frame's
angle, the long filter along the text then joins the rows of both columns into blobs that
run across them, and EM starts from lines that cross the columns.

Multi-oriented Gaussian filtering (Kurar Barakat et al., the best published result on
VML-MOC) gives each pixel the orientation of the filter that responds most. Here the region
is also filtered at ``oriented_blobs`` steps of ``ANGLE_STEP`` either side of its frame, and
each angle's blobs are found exactly as the frame's (Otsu, weak lines, overlap cuts,
residual blobs). The frame's blobs stay the lines, as in the paper, except at samples where an angle
``FAR_STEPS`` steps or more from the frame responds ``RESPONSE_RATIO`` times more (a frame
blob through the rows of a block at that angle). The samples they free go to the blobs of
those angles that are lines themselves and better lines than the frame blobs they replace,
best first (:func:`oriented_blob_of_samples`). Lines stay in their region's frame (``v = a u
+ b`` with their own slope), which the rotation-invariant M-step fits at any angle.

The same bank follows rows that fan out within one block (a note whose rows spread as they
are written, moc_train_16): the frame is one angle, a row more than about 4 deg off it gets
an initial line near the frame, between two rows, and EM does not turn a line that far.
"""

from __future__ import annotations

import math

import numpy as np

from .arrays import principal_axis
from .model import ComponentStats, to_region_frame
from .params import Parameters

#: Degrees between the filter banks tried either side of a region's frame. At 10 deg a row
#: 5-9 deg off its frame answered neither its frame's filter nor the next one: the rows of a
#: fanned note (moc_train_16; tests/test_fanned_rows.py) kept lines near the frame, between
#: rows. (The initial lines follow a row within about 4 deg of the frame on their own.)
ANGLE_STEP = 5.0
#: A sample leaves its frame blob when another angle's filter responds this many times more
#: at it (the filters of all angles are the same bank, turned, so their responses compare).
RESPONSE_RATIO = 1.2
#: Only angles this many steps from the frame or more take samples. (Two steps of 10 deg,
#: until 2026-12-08: a curved or slanted row answers the frame's neighbours too, and its
#: line was cut in pieces there; a turned blob now replaces frame blobs only where it is the
#: better line, :data:`BETTER_LINES`.)
FAR_STEPS = 1
#: A turned blob takes the samples it frees only when its samples lie on its line at least
#: as well as theirs lie on their frame blobs' lines (the share within half a text height of
#: the blob's principal axis; the mean over the freed samples' frame blobs). A fan's rows at
#: their own angle lie on theirs (0.95-1.0) where the frame's blobs run between two rows
#: (0.2-0.9); a row's rising end and the row above, at one turned angle, do not beat the
#: rows' own blobs (poilus AN_0077-0: 2 rows lost without it). A comparison, not a tuned
#: level: the ratio runs evenly through 1 on the dev pages (docs/history.md, session 59).
BETTER_LINES = True


def _cells(xy: np.ndarray, phi: float, origin: tuple[float, float], shape: tuple[int, int], scale: float,
           scale_u: float) -> tuple[np.ndarray, np.ndarray]:
    """Raster cell (row, col) of each page point ``xy (n, 2)`` in the raster of frame ``phi``
    whose cell (0, 0) is at frame point ``origin`` (:func:`engine.initial_lines._region_raster`)."""
    uv = to_region_frame(xy, phi)
    col = np.clip(np.round((uv[:, 0] - origin[0]) * scale_u).astype(np.int64), 0, shape[1] - 1)
    row = np.clip(np.round((uv[:, 1] - origin[1]) * scale).astype(np.int64), 0, shape[0] - 1)
    return row, col


def take_freed_samples(out: np.ndarray, frame: np.ndarray, order: np.ndarray, members: list[np.ndarray],
                       inliers: list[np.ndarray], share: np.ndarray) -> None:
    """Give the freed samples (``out == 0``; ``out`` ``(n,)`` each sample's blob, changed in
    place) to the turned blobs ``order`` (best first; ``members``/``inliers`` the samples of
    each and those within half a text height of its axis): a blob takes the freed samples it
    holds when most of its inliers are free and, with :data:`BETTER_LINES`, when its share of
    inliers (``share``, per blob id) is at least the mean share of the frame blobs (``frame``
    ``(n,)``, each sample's frame blob) those samples leave."""
    for b, mine, inl in zip(order, members, inliers, strict=True):
        if np.count_nonzero(out[inl] == 0) < 0.5 * len(inl):
            continue
        free = mine[out[mine] == 0]
        if BETTER_LINES and len(free) and share[b] < share[frame[free]].mean():
            continue
        out[free] = b


def oriented_blob_of_samples(region_ink: np.ndarray, bbox: tuple[int, int, int, int], phi: float,
                             xy: np.ndarray, stats: ComponentStats, params: Parameters, scale: float,
                             scale_u: float, t_r: float | None = None,
                             frame_blobs: tuple[np.ndarray, np.ndarray, tuple[float, float]] | None = None
                             ) -> np.ndarray:
    """Blob id ``(n,)`` (0 = none; ids are arbitrary positive integers) of each of the
    region's samples ``xy (n, 2)``: its frame blob's, or, where that blob runs across the
    rows of another angle, the blob of that angle that holds it. Angles: ``phi`` and ``params.oriented_blobs`` steps of
    ``ANGLE_STEP`` degrees either side. ``region_ink``, ``bbox``: the region's ink
    (:func:`engine.initial_lines.region_mask`); ``stats``: the blob scale (H_cc or the
    region's line height); ``scale``/``scale_u``: cells per pixel across/along the text;
    ``t_r``: the page's residual ratio (:func:`engine.initial_lines.residual_ratio`; default
    ``params.t_r``), for every angle's blobs; ``frame_blobs``: the frame's blob labels,
    filtered raster and raster origin when already found (stage 6's own blobs, so that the
    frame's blobs here are the lines the region has without the turned banks)."""
    from .initial_lines import _region_raster, line_blobs_and_response

    k = int(params.oriented_blobs)
    deltas = np.arange(-k, k + 1) * ANGLE_STEP
    n = len(xy)
    blob = np.zeros((len(deltas), n), np.int64)
    response = np.zeros((len(deltas), n))
    offset = 0
    for i, delta in enumerate(deltas):
        angle = phi + math.radians(float(delta))
        if delta == 0 and frame_blobs is not None:
            labels, filtered, origin = frame_blobs
            shape = labels.shape
        else:
            raster, origin = _region_raster(region_ink, angle, bbox, scale, scale_u, params.raster_along_mean)
            labels, filtered = line_blobs_and_response(raster, stats, params, scale, scale_u, t_r)
            shape = raster.shape
        row, col = _cells(xy, angle, origin, shape, scale, scale_u)
        b = labels[row, col].astype(np.int64)
        blob[i] = np.where(b > 0, b + offset, 0)
        response[i] = filtered[row, col]
        offset += int(labels.max()) + 1
    frame = blob[k]
    if offset == 0:
        return frame
    # Each blob's line: the principal axis of its samples; its inliers: the samples within
    # half a line height of it (the band one line's body fills).
    ids = blob.ravel()
    pts = np.tile(xy.astype(np.float64), (len(deltas), 1))
    cnt = np.bincount(ids, minlength=offset + 1).astype(np.float64)
    safe = np.maximum(cnt, 1.0)
    mx = np.bincount(ids, pts[:, 0], offset + 1) / safe
    my = np.bincount(ids, pts[:, 1], offset + 1) / safe
    dx, dy = pts[:, 0] - mx[ids], pts[:, 1] - my[ids]
    sxx = np.bincount(ids, dx * dx, offset + 1)
    syy = np.bincount(ids, dy * dy, offset + 1)
    sxy = np.bincount(ids, dx * dy, offset + 1)
    beta = principal_axis(sxx, sxy, syy)[0]
    across = np.abs(dy * np.cos(beta[ids]) - dx * np.sin(beta[ids]))
    inlier = (across <= 0.5 * stats.h_cc) & (ids > 0)
    n_in = np.bincount(ids[inlier], minlength=offset + 1)
    angle_of = np.zeros(offset + 1, np.int64)
    for i in range(len(deltas)):
        angle_of[np.unique(blob[i])] = i
    # A blob's score: its inliers less its outliers (a blob across the rows of a block at
    # another angle has as many of each). The frame's blobs keep their samples, as in the
    # paper, except those where an angle FAR_STEPS steps or more away responds
    # RESPONSE_RATIO times more (Kurar Barakat et al.: the orientation of the strongest
    # response): there a frame blob runs through the rows of a block at that angle. The
    # blobs of those angles that are lines (score > 0), best first, take the freed samples
    # they hold when most of their inliers are free. Samples of no frame blob stay without
    # one (a word at another angle beside a block became a line of its own), and the freed
    # samples no other angle took go back to their frame blob.
    score = 2 * n_in - cnt.astype(np.int64)
    share = n_in / np.maximum(cnt, 1.0)
    out = frame.copy()
    far = np.abs(deltas) >= FAR_STEPS * ANGLE_STEP
    if far.any():
        out[response[far].max(axis=0) > RESPONSE_RATIO * response[k]] = 0
    out[frame == 0] = -1
    order = np.argsort(-score, kind="stable")
    far_blob = np.abs(deltas[angle_of]) >= FAR_STEPS * ANGLE_STEP
    order = order[(order > 0) & far_blob[order] & (n_in[order] >= 3) & (score[order] > 0)]
    by_blob = np.argsort(ids, kind="stable")
    starts = np.searchsorted(ids[by_blob], np.arange(offset + 2))
    inl_sorted = inlier[by_blob]
    sample_of = by_blob % n
    members = [sample_of[starts[b]:starts[b + 1]] for b in order]
    inliers = [m[inl_sorted[starts[b]:starts[b + 1]]] for b, m in zip(order, members, strict=True)]
    take_freed_samples(out, frame, order, members, inliers, share)
    left = out <= 0
    out[left] = frame[left]
    return out
