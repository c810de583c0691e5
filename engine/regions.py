"""Stage 5: text regions by removing long-sided Delaunay triangles (Xiao & Yan 2003).

Triangles whose longest side exceeds ``region_threshold`` x H_cc bridge the blank space
between text blocks; the samples still joined by the remaining triangles form a region.
Regions too small to hold a line join their nearest larger region. MRF edges never cross
regions, so each region's labels are its own lines.

With ``multi_oriented``, a region is further cut where its local text angle changes (side
notes at another angle touching the main text): angles of windows on a grid of cells, the
region's dominant angles, cells to the nearest, and a split-off part kept only when its lines
show clearly better at its own angle than at the main part's (:func:`keep_distinct_parts`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import gaussian_filter1d
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from .arrays import angle_gap, principal_axis
from .graph import triangle_edges
from .initial_lines import _TARGET_HCC, PITCH_PER_LINE_HEIGHT, blob_elongation, line_pitch
from .model import ComponentStats
from .params import Parameters
from .pitch import row_join_edges


def region_threshold(stats: ComponentStats, params: Parameters) -> float:
    """Longest triangle side (pixels) allowed inside a region."""
    return params.region_threshold * max(stats.h_cc, 1.0)


def find_regions(samples: np.ndarray, triangles: np.ndarray, stats: ComponentStats,
                 params: Parameters, sample_axis: np.ndarray | None = None,
                 block_angles: dict[int, float] | None = None,
                 mixed_parts: dict[int, int] | None = None,
                 split_parts: dict[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Region index of every sample ``(N,)`` (0..R-1, regions ordered by their top-left
    sample) and the MRF edges ``(E, 2)``: Delaunay edges of kept triangles inside one region.
    ``sample_axis (N,)``: the direction (degrees) of the sample's component where it is a long
    word (:func:`component_axes`), NaN elsewhere; it lets a block of words written across the
    main text (a note up the margin) stand apart (:func:`orientation_parts`). ``block_angles``,
    if given, receives the direction (degrees) of each final region made mostly of such a
    block: its words' direction, which its frame search keeps to (engine.blocks).
    ``mixed_parts``, if given (with ``Parameters.mixed_parts_frame``), receives each final
    region kept apart although its line contrast at the main text's angle is not low enough
    (:func:`keep_distinct_parts`), mapped to the region of the part it was split from:
    engine.blocks.merge_parallel_blocks folds it back unless its frame agrees with its angle.
    ``split_parts``, if given, receives every final region the orientation split kept apart,
    mapped to the region it was split from (engine.blocks.merge_parallel_blocks folds it back
    when its frame search found no evidence for its angle)."""
    n = len(samples)
    if n == 0:
        return np.zeros(0, np.int32), np.zeros((0, 2), np.int32)
    limit = region_threshold(stats, params)
    if len(triangles):
        p = samples[triangles]  # (T, 3, 2)
        sides = np.linalg.norm(p - np.roll(p, -1, axis=1), axis=2)
        kept = triangles[sides.max(axis=1) <= limit]
    else:
        kept = triangles
    edges = triangle_edges(kept)
    label = edge_components(edges, n)
    if params.row_join > 0 and len(triangles):
        # A word gap along a row is not a region boundary (engine.pitch.row_join_edges).
        joins = row_join_edges(samples, triangle_edges(triangles), edges, label, stats.h_cc,
                               params.row_join).edges
        if len(joins):
            edges = np.concatenate([edges, joins])
            label = edge_components(edges, n)
    label = _merge_small(samples, label, params.min_region_samples)
    parents: dict[int, int] = {}  # part kept apart -> the part it was split from
    if (params.multi_oriented or params.steep_regions) and SPLIT_ANGLE > 0:
        # Blocks written at different angles that touch (a side note against the main text)
        # form one region, and one frame angle cannot fit both: cut the region's edges
        # between parts whose local text angles differ, then merge the crumbs back. Only
        # where the orientation search can reach every angle: within the paper's +-40 deg a
        # split-off vertical note still gets a wrong frame (moc-train: the share of samples
        # in regions more than 10 deg off went 0.40 -> 0.385 only, at 0.1-0.3 s a page).
        mixed: dict[int, int] = {}
        part, scale, block_angle = orientation_parts(samples, label, stats, params.min_region_samples,
                                                     edges, sample_axis)
        in_block = np.isfinite(block_angle)
        cut = part[edges[:, 0]] == part[edges[:, 1]]
        split = edge_components(edges[cut], n)
        if split.max() > label.max():
            split = _merge_small(samples, split, params.min_region_samples)
            # A part stands apart on its line contrast (as a steep region's angle is chosen in
            # initial_lines.best_orientation). The blob-elongation test that steep_regions
            # also asked for folded moc_train_3's block at 65 deg back into the main text
            # (short lines, whose blobs are short at their own angle too): moc-train 506 ->
            # 519 correct lines.
            label = keep_distinct_parts(samples, label, split, scale, params.min_region_samples,
                                        None, in_block,
                                        far_angle=0.0 if params.small_parts_frame else _FAR_ANGLE,
                                        mixed=mixed if params.mixed_parts_frame and params.block_boundaries else None,
                                        parents=parents)
    # Renumber regions 0..R-1 in raster order of their first sample (samples are in raster order).
    _, first, inverse = np.unique(label, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    region = rank[inverse].astype(np.int32)
    same = region[edges[:, 0]] == region[edges[:, 1]]
    if mixed_parts is not None and (params.multi_oriented or params.steep_regions) and SPLIT_ANGLE > 0:
        _parts_to_regions(mixed, label, region, mixed_parts)
    if split_parts is not None:  # parents is empty unless the orientation split ran
        _parts_to_regions(parents, label, region, split_parts)
    if block_angles is not None and (params.multi_oriented or params.steep_regions) and SPLIT_ANGLE > 0:
        for r in range(int(region.max()) + 1):
            angles = block_angle[region == r]
            if np.isfinite(angles).mean() > 0.5:
                block_angles[r] = _axis_mode(angles[np.isfinite(angles)])
    return region, edges[same]


def edge_components(edges: np.ndarray, n: int) -> np.ndarray:
    """Component index ``(n,)`` of each of ``n`` points joined by ``edges`` ``(E, 2)``."""
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def _merge_small(samples: np.ndarray, label: np.ndarray, min_samples: int) -> np.ndarray:
    """Regions with fewer than ``min_samples`` samples (a lone diacritic, a speck of a stamp)
    join the region of the nearest sample of a large one."""
    label = label.copy()
    sizes = np.bincount(label)
    big = sizes[label] >= min_samples
    if not big.any():
        label[:] = 0
    elif not big.all():
        tree = cKDTree(samples[big])
        _, nearest = tree.query(samples[~big])
        label[~big] = label[big][nearest]
    return label


#: Parts of a region whose dominant text angles differ by more than this (degrees) become
#: regions of their own (0 = never split); touching blocks whose frames lie closer join
#: (engine.blocks.merge_parallel_blocks). 15, not 20: moc-train's blocks written at 17-21 deg
#: from their neighbour (moc_train_9's main block at -26 deg under a top block at -5.6 deg,
#: 20.7 deg apart at one draw of the samples and under 20 at another; moc_train_15, _16, _17)
#: stood apart or not by the draw. At 15, over three draws (seeds 0, 1, 2), moc-train line IU
#: 46.6 / 42.8 / 46.2 -> 47.9 / 45.6 / 48.5 %, poilus-dev 81.5 / 76.8 / 77.0 -> 81.2 / 76.8 /
#: 76.9, ahte-train, cremma20 and kraken-sample the same on every page at seed 0. Margin: at
#: 15 a part of poilus AD78_0084-1's body 16.2 deg off its frame (a slanted passage by the
#: signature) stands apart (one correct line less), the only page outside moc-train that lost
#: a line at seed 0 (docs/history.md). Lines still keep within
#: engine.initial_lines.STEEP_SPLIT_ANGLE (20) of their frame.
SPLIT_ANGLE = 15.0
# Local text angle: from the samples within _WINDOW x the region's text scale (H_cc, or the
# line pitch / 2.5: text_scale) of the centre of each cell of a grid of _CELL x that scale, at
# _ANGLE_STEP degree steps over the whole half turn. Windows of 4.5 H_cc (cells of 3) gave
# crumbs at +-35 deg on horizontal Arabic pages, where such a window holds about one line.
_CELL = 4.5
_WINDOW = 8.0
_ANGLE_STEP = 5.0
# Samples (at most, about) the angles of a region or a part are estimated from.
_MAX_POINTS = 4000
# Windows per batch of :func:`local_angles` (bounds the memory of one batch to ~10 MB).
_BATCH = 64
# A window needs this many samples to give an angle.
_MIN_WINDOW_SAMPLES = 12


def local_angles(points: np.ndarray, centres: np.ndarray, radius: float, h_cc: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Text angle (degrees, in [-90, 90)) and its strength around each of ``centres (T, 2)``
    from the ``points (n, 2)`` within ``radius``: the angle whose projection profile across
    the text shows lines best (the line contrast of :mod:`engine.initial_lines`: the share of
    the profile's energy above the scale of a text height) and the best contrast minus the
    mean over angles. A round window: a square one's projection is sharper at 0 and 90 deg."""
    out_angle = np.zeros(len(centres))
    out_strength = np.zeros(len(centres))
    members = cKDTree(points).query_ball_point(centres, radius)
    sizes = np.array([len(m) for m in members], np.int64)
    windows = np.flatnonzero(sizes >= _MIN_WINDOW_SAMPLES)
    # Windows in batches: one histogram and one pair of filters per batch, not per window.
    for start in range(0, len(windows), _BATCH):
        batch = windows[start:start + _BATCH]
        idx = np.concatenate([members[t] for t in batch]).astype(np.int64)
        win = np.repeat(np.arange(len(batch)), sizes[batch])
        contrast = contrast_curves(points[idx] - centres[batch][win], win, len(batch), radius, h_cc)
        k = np.argmax(contrast, axis=1)
        out_angle[batch] = ANGLES[k]
        out_strength[batch] = contrast[np.arange(len(batch)), k] - contrast.mean(axis=1)
    return out_angle, out_strength


#: The angles (degrees) of :func:`contrast_curve`.
ANGLES = np.arange(-90.0, 90.0, _ANGLE_STEP)


def contrast_curve(d: np.ndarray, radius: float, h_cc: float, angles: np.ndarray = ANGLES
                   ) -> np.ndarray:
    """Line contrast ``(len(angles),)`` of points ``d (n, 2)`` within ``radius`` of the origin
    at every angle (degrees) of ``angles``; see :func:`contrast_curves`."""
    return contrast_curves(d, np.zeros(len(d), np.int64), 1, radius, h_cc, angles)[0]


def contrast_curves(d: np.ndarray, window: np.ndarray, n_windows: int, radius: float, h_cc: float,
                    angles: np.ndarray = ANGLES) -> np.ndarray:
    """Line contrast ``(n_windows, len(angles))`` of the points ``d (n, 2)`` (relative to their
    window's centre, within ``radius`` of it) of each window (``window (n,)``) at every angle
    (degrees): their projection across the text in bins of H_cc / 4, smoothed by H_cc / 3 (the
    filter bank's width across), minus its smoothing by H_cc (the block's envelope), as a
    fraction of the energy (as :func:`engine.initial_lines.line_contrast`)."""
    th = np.radians(angles)
    bin_w = h_cc / 4.0
    n_bins = int(math.ceil(2 * radius / bin_w)) + 1
    n_angles = len(angles)
    v = np.outer(np.cos(th), d[:, 1]) - np.outer(np.sin(th), d[:, 0])  # (A, n) across the text
    b = np.clip(((v + radius) / bin_w).astype(np.int64), 0, n_bins - 1)
    key = ((window[None, :] * n_angles + np.arange(n_angles)[:, None]) * n_bins + b).ravel()
    hist = np.bincount(key, minlength=n_windows * n_angles * n_bins).astype(np.float32)
    hist = hist.reshape(n_windows, n_angles, n_bins)
    smooth = gaussian_filter1d(hist, 4.0 / 3.0, axis=2, mode="constant")
    block = gaussian_filter1d(hist, 4.0, axis=2, mode="constant")
    energy = (smooth.astype(np.float64) ** 2).sum(axis=2)
    return ((smooth - block).astype(np.float64) ** 2).sum(axis=2) / np.maximum(energy, 1e-12)


def _parts_to_regions(parts: dict[int, int], label: np.ndarray, region: np.ndarray,
                      out: dict[int, int]) -> None:
    """Fill ``out`` with ``parts`` (part label -> the part label it was split from) as final
    region indices: ``label`` and ``region`` ``(N,)`` are each sample's part and region (a
    part kept apart keeps a label of its own, as its main part does)."""
    for p, main in parts.items():
        at_p, at_main = np.flatnonzero(label == p), np.flatnonzero(label == main)
        if len(at_p) and len(at_main):
            out[int(region[at_p[0]])] = int(region[at_main[0]])


@dataclass(frozen=True)
class PartTest:
    """One part :func:`keep_distinct_parts` tested: its ``region`` and ``part`` labels, its
    samples (``members``, indices), the text scale ``h`` (pixels) its contrast was read at,
    its own angle and the main part's (degrees), ``ratio`` its line contrast at the main
    part's angle over its best (kept apart only under ``KEEP_RATIO``, or as a mixed part or a
    block across the main text), whether its size or angle gap gave ``evidence``, and
    whether it was ``kept`` apart."""

    region: int
    part: int
    members: np.ndarray
    h: float
    own_angle: float
    main_angle: float
    ratio: float
    evidence: bool
    kept: bool


def keep_distinct_parts(samples: np.ndarray, region: np.ndarray, part: np.ndarray,
                        scale: dict[int, float], min_samples: int,
                        elongation: tuple[ComponentStats, Parameters] | None = None,
                        in_block: np.ndarray | None = None, far_angle: float | None = None,
                        mixed: dict[int, int] | None = None, parents: dict[int, int] | None = None,
                        record: list[PartTest] | None = None) -> np.ndarray:
    """``part`` with every part that is not its region's largest folded into that largest one
    unless its own text angle fits it clearly better than the largest part's angle: the line
    contrast of the whole part at the largest part's angle under ``KEEP_RATIO`` x its best.
    Local angles are noisy where windows hold about one line (Arabic hands with a line pitch
    of five component heights: crumbs at +-35 deg on a horizontal page); a side note at
    another angle shows no lines at the main text's angle.

    With ``elongation`` (the page's stats and parameters) a part is kept only if, in
    addition, its filtered blobs are longer along the text at its own angle than at the main
    part's (:func:`engine.initial_lines.blob_elongation` on a raster of its samples). The
    contrast alone split a block of an Arabic page's main text (ahte moc_train_18, 992
    samples) that its frame search then put back at the main text's angle: lines cut in two.

    With ``mixed`` (a dict, filled here) a part that passes every test but the contrast ratio
    is kept, and ``mixed[part] = main part``: the split's cells straddle a junction, so a
    narrow note's part also holds the main text's row ends, and their rows raise its contrast
    at the main text's angle (moc_train_9: a column at 89 deg beside a block at -27 deg, ratio
    0.65). Its frame decides (engine.blocks.merge_parallel_blocks, ``mixed_parts_frame``).
    ``parents`` (a dict, filled here): every part kept apart -> the main part it was split from.
    ``record`` (a list, appended to here): a :class:`PartTest` for every part tested."""
    part = part.copy()
    for r in range(int(region.max()) + 1):
        idx = np.flatnonzero(region == r)
        ids, sizes = np.unique(part[idx], return_counts=True)
        if len(ids) < 2:
            continue
        main = ids[np.argmax(sizes)]
        # Parts of fewer than 3 x min_samples samples (a few words) fold without a test: their
        # own angle is not reliable enough to set them apart.
        for p in ids[(sizes < 3 * min_samples) & (ids != main)]:
            part[idx[part[idx] == p]] = main
        tested = (sizes >= 3 * min_samples) | (ids == main)
        ids, sizes = ids[tested], sizes[tested]
        if len(ids) < 2:
            continue
        h_cc = scale[r]
        curves = {p: points_contrast(samples[idx[part[idx] == p]], h_cc) for p in ids}
        main_k = int(np.argmax(curves[main]))
        for p in ids:
            members = idx[part[idx] == p]
            own_k = int(np.argmax(curves[p]))
            gap = angle_gap(_FINE_ANGLES[own_k], _FINE_ANGLES[main_k])
            # A few hundred samples are a few words, whose angle is reliable only when it is
            # far from the main text's (Arabic line ends rise by 20-40 deg: ahte pages).
            # (With Parameters.small_parts_frame, far_angle 0: a small part's angle is checked
            # against its frame instead, engine.blocks.merge_parallel_blocks.)
            evidence = gap >= (_FAR_ANGLE if far_angle is None else far_angle) or sizes[ids == p][0] >= 16 * min_samples
            contrast_says = curves[p][main_k] < KEEP_RATIO * curves[p][own_k]
            distinct = contrast_says and gap > SPLIT_ANGLE and evidence
            if (p != main and mixed is not None and not contrast_says and gap > SPLIT_ANGLE and evidence
                    and sizes[ids == p][0] >= BLOCK_SAMPLES * min_samples):
                # A part as large as a block of several lines (BLOCK_SAMPLES): a few hundred
                # samples that fail the ratio are as likely a few words of the main text
                # (poilus AN_0292-0: a stamp and a word's end, 481 samples, framed at -34
                # deg, took a row's words; ahte moc_test_4: 206 samples at -17 deg).
                distinct = True
                mixed[int(p)] = int(main)
            if (p != main and in_block is not None and gap > SPLIT_ANGLE
                    and in_block[members].mean() > 0.5):
                # Mostly words written across the main text (across_blocks): their own
                # direction is the evidence; a note's lines up a margin are too irregular
                # for the contrast test (AN_0008-3: 0.036 at -90 deg, 0.026 at 0 deg).
                distinct = True
                if mixed is not None:
                    mixed.pop(int(p), None)
            if p != main and distinct and elongation is not None:
                distinct = (sample_elongation(samples[members], *elongation, float(_FINE_ANGLES[own_k]))
                            > sample_elongation(samples[members], *elongation, float(_FINE_ANGLES[main_k])))
            if p != main and record is not None:
                record.append(PartTest(int(r), int(p), members.copy(), float(h_cc),
                                       float(_FINE_ANGLES[own_k]), float(_FINE_ANGLES[main_k]),
                                       float(curves[p][main_k] / max(float(curves[p][own_k]), 1e-300)),
                                       bool(evidence),
                                       bool(distinct)))
            if p != main and not distinct:
                part[members] = main
                if mixed is not None:
                    mixed.pop(int(p), None)
            elif p != main and parents is not None:
                parents[int(p)] = int(main)
    return part


def sample_elongation(points: np.ndarray, stats: ComponentStats, params: Parameters, deg: float
                      ) -> float:
    """:func:`engine.initial_lines.blob_elongation` of the ink the samples ``points (n, 2)``
    stand for: their count per cell of the bank's grid (H_cc / 8) as the ink raster."""
    cell = max(stats.h_cc, 1.0) / _TARGET_HCC
    x0, y0 = np.floor(points.min(axis=0)).astype(int)
    x1, y1 = np.floor(points.max(axis=0)).astype(int) + 1
    nx, ny = max(1, int(math.ceil((x1 - x0) / cell))), max(1, int(math.ceil((y1 - y0) / cell)))
    ix = np.minimum(((points[:, 0] - x0) / cell).astype(np.int64), nx - 1)
    iy = np.minimum(((points[:, 1] - y0) / cell).astype(np.int64), ny - 1)
    raster = np.bincount(iy * nx + ix, minlength=nx * ny).reshape(ny, nx).astype(np.float32)
    return blob_elongation(raster, (int(x0), int(y0), int(x1), int(y1)), stats, params, deg)


# Whole parts hold long lines: at the local search's 5 deg steps their lines smear.
_FINE_ANGLES = np.arange(-90.0, 90.0, 1.0)
#: See :func:`keep_distinct_parts`.
KEEP_RATIO = 0.5
#: Parts smaller than 16 x min_region_samples stand apart only this far (degrees) from the main.
_FAR_ANGLE = 45.0


def orientation_parts(samples: np.ndarray, label: np.ndarray, stats: ComponentStats,
                      min_samples: int, edges: np.ndarray | None = None,
                      sample_axis: np.ndarray | None = None
                      ) -> tuple[np.ndarray, dict[int, float], np.ndarray]:
    """Part index ``(N,)`` of every sample: within a region, samples whose neighbourhood's
    text angle is near one of the region's dominant angles (modes more than ``SPLIT_ANGLE``
    apart, each holding at least ``3 x min_samples`` samples) share a part. Also the text
    scale (:func:`text_scale`) of each region analysed, and the direction (degrees ``(N,)``,
    NaN outside) of the block of words across the main text each sample is in.

    With ``edges`` and ``sample_axis`` (:func:`find_regions`), a block of long words written
    across the region's main direction (:func:`across_blocks`) takes the part of its own
    direction, whatever its cells' windows say: a window of 8 text heights beside a narrow
    note up the margin sees mostly the main text."""
    blocks = (across_blocks(samples, label, edges, sample_axis, stats, min_samples)
              if edges is not None and sample_axis is not None else None)
    sample_block_angle = (np.where(blocks[0] >= 0, blocks[1][np.maximum(blocks[0], 0)], np.nan)
                          if blocks is not None and len(blocks[1]) else np.full(len(samples), np.nan))
    part = np.zeros(len(samples), np.int64)
    scale: dict[int, float] = {}
    next_part = 0
    for r in range(int(label.max()) + 1):
        idx = np.flatnonzero(label == r)
        if len(idx) < 6 * min_samples:
            part[idx] = next_part
            next_part += 1
            continue
        pts = samples[idx].astype(np.float64)
        thin = pts[::max(1, len(pts) // _MAX_POINTS)]
        h = text_scale(thin, max(stats.h_cc, 1.0))
        scale[r] = h
        cell = np.floor((pts - pts.min(axis=0)) / (_CELL * h)).astype(np.int64)
        key = cell[:, 0] * (int(cell[:, 1].max()) + 1) + cell[:, 1]
        cells, cell_of, count = np.unique(key, return_inverse=True, return_counts=True)
        centres = np.zeros((len(cells), 2))
        np.add.at(centres, cell_of, pts)
        centres /= count[:, None]
        # Angles from a thinned set of samples (every k-th, in raster order): a window's
        # angle needs a few hundred points, not the thousands of a dense Arabic page.
        angle, strength = local_angles(thin, centres, _WINDOW * h, h)
        weight = count * strength
        modes = _angle_modes(angle, weight, count, 3 * min_samples)
        block_of = blocks[0][idx] if blocks is not None else np.full(len(idx), -1)
        block_angle = blocks[1] if blocks is not None else np.zeros(0)
        if len(modes) == 0 or (len(modes) < 2 and not (block_of >= 0).any()):
            part[idx] = next_part
            next_part += 1
            continue
        diff = angle_gap(angle[:, None], np.asarray(modes)[None, :])
        cell_part = np.argmin(diff, axis=1)
        # Cells without a clear angle (few samples, flat scores) take their nearest cell's part.
        weak = (strength <= 0) | (diff.min(axis=1) > SPLIT_ANGLE)
        if weak.any() and not weak.all():
            _, nearest = cKDTree(centres[~weak]).query(centres[weak])
            cell_part[weak] = cell_part[~weak][nearest]
        sample_part = cell_part[cell_of]
        n_parts = len(modes)
        for b in np.unique(block_of[block_of >= 0]):
            # A block of words across the main text: the part of the mode along its words,
            # or one of its own when no mode is (its cells' windows saw the main text).
            gaps = angle_gap(np.asarray(modes, float), float(block_angle[b]))
            if len(gaps) and gaps.min() <= SPLIT_ANGLE / 2:
                sample_part[block_of == b] = int(np.argmin(gaps))
            else:
                sample_part[block_of == b] = n_parts
                n_parts += 1
        part[idx] = next_part + sample_part
        next_part += n_parts
    return part, scale, sample_block_angle


#: A component is a long word when its samples spread this many times further along their
#: principal axis than across it (standard deviations).
LONG_WORD = 2.5
#: Fewest samples on a component for its direction to count.
_AXIS_MIN_SAMPLES = 20
#: Words across the main direction: their axis at least this far (degrees) from it.
ACROSS_ANGLE = 60.0
#: A block of words across the main text holds at least this many x min_region_samples
#: samples: as many as a part near the main angle needs to stand apart (keep_distinct_parts).
#: poilus-dev: AN_0008-3's notes up the margin are one block of 7863 samples (12 -> 25
#: matches). The other blocks of at least 3 x 60 samples on poilus-dev, cremma20 and
#: kraken-sample hold 181-2315 samples; at 3 x they cost AN_0023-0, AN_0056-0, AN_0077-0,
#: AN_0090-0 and AN_0113-0 two matches each; at 16 x, five remain (AD78_0066-0, AN_0090-0,
#: AN_0241-0, AN_0292-0, cremma 2_985d7: 974-2315 samples), and only AN_0090-0 (3 lines
#: more) and AN_0292-0 (2 more) change, with the same matches.
BLOCK_SAMPLES = 16


def _sum_3x3(v: np.ndarray) -> np.ndarray:
    """Each cell's sum over its 3 x 3 neighbourhood (``v`` padded by one cell of zeros)."""
    return sum(np.roll(np.roll(v, dy, 0), dx, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1))


def component_axes(samples: np.ndarray, sample_component: np.ndarray) -> np.ndarray:
    """Direction (degrees, in (-90, 90]) of each sample's component ``(N,)`` where the
    component is a long word (:data:`LONG_WORD`, from at least 20 samples), NaN elsewhere:
    the principal axis of its samples. Cursive words are long along the line they are
    written on, whatever the page's layout says."""
    n = int(sample_component.max()) + 1 if len(sample_component) else 1
    count = np.bincount(sample_component, minlength=n).astype(np.float64)
    safe = np.maximum(count, 1.0)
    mx = np.bincount(sample_component, samples[:, 0], n) / safe
    my = np.bincount(sample_component, samples[:, 1], n) / safe
    dx = samples[:, 0] - mx[sample_component]
    dy = samples[:, 1] - my[sample_component]
    sxx = np.bincount(sample_component, dx * dx, n) / safe
    syy = np.bincount(sample_component, dy * dy, n) / safe
    sxy = np.bincount(sample_component, dx * dy, n) / safe
    beta, major, minor = principal_axis(sxx, sxy, syy)
    minor = np.maximum(minor, 1e-9)
    angle = np.degrees(beta)
    long_word = (count >= _AXIS_MIN_SAMPLES) & (major >= LONG_WORD**2 * minor)
    return np.where(long_word, angle, np.nan)[sample_component]


def across_blocks(samples: np.ndarray, label: np.ndarray, edges: np.ndarray, sample_axis: np.ndarray,
                  stats: ComponentStats, min_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Blocks of long words written across their region's main direction: block index per
    sample ``(N,)`` (-1 = none) and each block's direction (degrees).

    A sample is in such a block where, among the long words' samples in its 3 x 3 cells of one
    text height, those at least ``ACROSS_ANGLE`` from the region's main direction (the
    sample-weighted mode of its long words' axes) outnumber those along it; blocks are the
    edge-connected groups of such samples holding at least ``BLOCK_SAMPLES x min_samples``
    samples (several lines of words: a lone tall letter or a capital is a few dozen)."""
    block = np.full(len(samples), -1, np.int64)
    angles: list[float] = []
    has_axis = np.isfinite(sample_axis)
    h = max(stats.h_cc, 1.0)
    across = np.zeros(len(samples), bool)
    for r in range(int(label.max()) + 1):
        idx = np.flatnonzero((label == r) & has_axis)
        if len(idx) < 3 * min_samples:
            continue
        main = _axis_mode(sample_axis[idx])
        members = np.flatnonzero(label == r)
        cell = np.floor((samples[members] - samples[members].min(axis=0)) / h).astype(np.int64)
        at = (cell[:, 1] + 1, cell[:, 0] + 1)  # one cell of zeros round the grid
        gap = angle_gap(sample_axis[members], main)
        votes_across = np.zeros((int(cell[:, 1].max()) + 3, int(cell[:, 0].max()) + 3))
        votes_along = np.zeros_like(votes_across)
        np.add.at(votes_across, at, gap >= ACROSS_ANGLE)
        np.add.at(votes_along, at, gap <= 90.0 - ACROSS_ANGLE)
        across[members] = _sum_3x3(votes_across)[at] > _sum_3x3(votes_along)[at]
    if not across.any():
        return block, np.zeros(0)
    keep = across[edges[:, 0]] & across[edges[:, 1]]
    group = edge_components(edges[keep], len(samples))
    group = np.where(across, group, -1)
    ids, sizes = np.unique(group[group >= 0], return_counts=True)
    for g in ids[sizes >= BLOCK_SAMPLES * min_samples]:
        members = np.flatnonzero(group == g)
        block[members] = len(angles)
        angles.append(_axis_mode(sample_axis[members[has_axis[members]]]))
    return block, np.array(angles)


def _axis_mode(axes: np.ndarray) -> float:
    """The most frequent of directions ``axes`` (degrees, period 180), in steps of
    ``_ANGLE_STEP`` counted with their neighbours either side."""
    n_bins = int(round(180.0 / _ANGLE_STEP))
    bins = np.round((axes + 90.0) / _ANGLE_STEP).astype(np.int64) % n_bins
    hist = np.bincount(bins, minlength=n_bins).astype(float)
    hist = hist + np.roll(hist, 1) + np.roll(hist, -1)
    return float(np.argmax(hist) * _ANGLE_STEP - 90.0)


def points_contrast(points: np.ndarray, h: float) -> np.ndarray:
    """Line contrast of ``points (n, 2)`` (pixels; at most ``_MAX_POINTS`` of them, evenly
    taken) at each of ``_FINE_ANGLES``, at the text scale ``h`` (pixels): a part's curve, whose
    maximum is its own text angle."""
    pts = points[::max(1, len(points) // _MAX_POINTS)].astype(np.float64)
    d = pts - pts.mean(axis=0)
    return contrast_curve(d, float(np.sqrt((d**2).sum(axis=1)).max()) + 1.0, h, _FINE_ANGLES)


def own_angle(points: np.ndarray, h_cc: float) -> float:
    """The angle (degrees, 1 deg steps) at which the line contrast of ``points (n, 2)`` is
    highest, at their :func:`text_scale` (a part's own angle, as :func:`keep_distinct_parts`
    reads it; engine.blocks.merge_parallel_blocks checks a small block's frame against it)."""
    pts = points[::max(1, len(points) // _MAX_POINTS)].astype(np.float64)
    return float(_FINE_ANGLES[int(np.argmax(points_contrast(pts, text_scale(pts, max(h_cc, 1.0)))))])


def text_scale(points: np.ndarray, h_cc: float) -> float:
    """Length (pixels) the local analysis is scaled to: ``H_cc``, or the line pitch / 2.5 where
    the region's lines are regularly spaced much further apart (Arabic hands broken into
    letter groups, as :func:`engine.initial_lines.line_height`): windows of a few ``H_cc``
    there hold about one line, and their angles follow the strokes instead of the lines."""
    d = points - points.mean(axis=0)
    radius = float(np.sqrt((d**2).sum(axis=1)).max()) + 1.0
    k = int(np.argmax(contrast_curve(d, radius, h_cc, _FINE_ANGLES)))
    th = math.radians(float(_FINE_ANGLES[k]))
    v = d[:, 1] * math.cos(th) - d[:, 0] * math.sin(th)
    bin_w = h_cc / 4.0
    profile = np.bincount(((v + radius) / bin_w).astype(np.int64)).astype(float)
    pitch = line_pitch(profile, 1.2 * 4, 20.0 * 4) * bin_w
    return max(h_cc, pitch / PITCH_PER_LINE_HEIGHT) if np.isfinite(pitch) else h_cc


def _angle_modes(angle: np.ndarray, weight: np.ndarray, count: np.ndarray, min_count: int
                 ) -> list[float]:
    """Dominant angles (degrees) of cells with ``angle`` and ``weight``: peaks of the weight
    histogram (smoothed over one step each side, periodic over 180 deg), heaviest first,
    each more than ``SPLIT_ANGLE`` from the ones before and with at least ``min_count``
    samples in cells within half that of it."""
    n_bins = int(round(180.0 / _ANGLE_STEP))
    bins = np.round((angle + 90.0) / _ANGLE_STEP).astype(np.int64) % n_bins
    ok = weight > 0
    hist = np.bincount(bins[ok], weight[ok], minlength=n_bins)
    hist = hist + np.roll(hist, 1) + np.roll(hist, -1)
    centre = np.arange(n_bins) * _ANGLE_STEP - 90.0
    allowed = hist > 0
    modes: list[float] = []
    while allowed.any():
        k = int(np.flatnonzero(allowed)[np.argmax(hist[allowed])])
        mode = float(centre[k])
        if count[ok & (angle_gap(angle, mode) <= SPLIT_ANGLE / 2)].sum() < min_count:
            allowed[k] = False
            continue
        modes.append(mode)
        allowed &= angle_gap(centre, mode) > SPLIT_ANGLE
    return modes


