"""Blocks: groups of lines written together at one angle (a main text, a side note).

Multi-oriented pages (VML-MOC: Arabic side notes at every angle round a main text) hold
several blocks, and a line must never reach from one block into another. The regions of
stage 5 (Delaunay triangles cut at long sides, then cut where the local text angle changes:
:mod:`engine.regions`) are the blocks' outlines; each region has its own frame angle and its
own row pitch (:mod:`engine.initial_lines`). This module holds what the MRF adds to that:

- **Neighbouring lines are lines the graph links.** The unary's plateau is ``r S_l``, with
  ``S_l`` the distance to the nearest lines above and below (Koo & Cho). A region may hold
  several blocks at one angle that touch only through a third (moc_train_16: a paragraph
  over a column of short lines over another paragraph): the last line of the upper
  paragraph then found its line "below" in the lower paragraph, 2800 px away; ``S_l`` = 1433
  px, a plateau of +-430 px, and at EM's first step it took the samples of the six rows
  above it. Two rows of one block are joined by Delaunay edges (the gap between them is
  under the region threshold); lines of different blocks are not. So a line's neighbours
  are the lines whose samples share an MRF edge with its own samples
  (:func:`linked_lines`), and ``S_l`` is measured to those only
  (``Parameters.linked_neighbours``; the paper: any line above and below).
- **A block's boundary follows its lines.** The cut between blocks written at different
  angles comes from windows of 8 text heights (:func:`engine.regions.orientation_parts`):
  near a junction such a window sees mostly the larger block, and the corner of a side note
  went with the main text, whose last line then bent to reach it (a line across the
  boundary). Once each block has its lines, a word at the boundary goes to the block whose
  lines pass through it (:func:`refine_boundaries`): the lines know the blocks' rows, the
  windows only their angles (``Parameters.block_boundaries``).
- **Block outlines, angles and pitches for the window and the JSON output**
  (:func:`block_summary`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .arrays import angle_gap
from .graph import delaunay_triangles, triangle_edges
from .model import ComponentStats, LineSet, Preparation, Region, to_region_frame
from .params import Parameters
from .regions import edge_components, own_angle, region_threshold
from .unary import across_distance


def linked_lines(edges: np.ndarray, labels: np.ndarray, n_lines: int) -> np.ndarray:
    """``(L, L)`` bool: lines ``l != k`` joined by at least one of the MRF ``edges (E, 2)``
    (sample indices) whose ends are labelled ``l`` and ``k`` (``labels (n,)``, -1 = none)."""
    linked = np.zeros((n_lines, n_lines), bool)
    if len(edges) == 0 or n_lines == 0:
        return linked
    a, b = labels[edges[:, 0]], labels[edges[:, 1]]
    ok = (a >= 0) & (b >= 0) & (a != b)
    linked[a[ok], b[ok]] = True
    linked[b[ok], a[ok]] = True
    return linked


def block_pitch(lines: LineSet, h_cc: float) -> float:
    """Row pitch (pixels) of one block's ``lines``: the median interline space of its lines
    (:func:`engine.unary.interline_space`, fragments of one row closer than half a text
    height left out); NaN for a block of one line."""
    from .unary import interline_space

    if len(lines) < 2:
        return float("nan")
    space = interline_space(lines, default=np.nan, min_gap=0.5 * h_cc)
    return float(np.nanmedian(space)) if np.isfinite(space).any() else float("nan")


def block_summary(prep: Preparation) -> list[dict[str, Any]]:
    """Each region (block) of the preparation, for the JSON output and the window: index,
    frame angle (degrees, the text direction measured clockwise from the x axis, y down),
    row pitch of its initial lines (pixels, None for one line), samples, initial lines,
    bounding box and outline (the convex hull of its samples, (x, y) pixels)."""
    from scipy.spatial import ConvexHull, QhullError

    out = []
    for region in prep.regions:
        pts = prep.samples[prep.sample_region == region.index]
        hull = None
        if len(pts) >= 3:
            try:
                hull = pts[ConvexHull(pts).vertices]
            except QhullError:
                hull = None
        if hull is None:
            x0, y0, x1, y1 = region.bbox
            hull = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], float)
        own = prep.initial_lines.take(np.flatnonzero(prep.initial_lines.region == region.index))
        pitch = block_pitch(own, prep.stats.h_cc)
        out.append({"index": int(region.index), "angle": round(math.degrees(region.phi), 2),
                    "pitch": round(pitch, 1) if np.isfinite(pitch) else None,
                    "samples": int(region.n_samples), "lines": len(own),
                    "bbox": [int(v) for v in region.bbox], "outline": np.round(hull, 1).tolist()})
    return out


#: A boundary word moves to the neighbouring block when that block's lines pass at least
#: this many times closer to it (median distance across its samples' nearest line) than its
#: own block's lines do.
CLOSER = 2.0
#: Rounds of moves (a word that moved makes the next word of its row a boundary word).
_ROUNDS = 8


def kept_edges(samples: np.ndarray, triangles: np.ndarray, stats: ComponentStats, params: Parameters
               ) -> np.ndarray:
    """The Delaunay edges of the triangles stage 5 keeps ``(E, 2)`` (longest side at most
    ``region_threshold`` x H_cc): the edges that join samples of one text mass."""
    if len(triangles) == 0:
        return np.zeros((0, 2), np.int32)
    p = samples[triangles]
    sides = np.linalg.norm(p - np.roll(p, -1, axis=1), axis=2)
    return triangle_edges(triangles[sides.max(axis=1) <= region_threshold(stats, params)])


def covered_across(xy: np.ndarray, lines: LineSet, phi: float, reach: float) -> np.ndarray:
    """Distance ``(n, L)`` (pixels) across each of ``lines`` (one region's, frame angle
    ``phi``) of each point, inf where the line's extent (centre +- 2 sigma_s, plus ``reach``
    along) does not cover it."""
    uv = to_region_frame(xy, phi)
    across = np.abs(across_distance(uv, lines))
    along = np.abs(lines.along(uv) - lines.c)
    across[along > 2.0 * lines.sigma_s + reach] = np.inf
    return across


def _row_distance(xy: np.ndarray, lines: LineSet, phi: float, reach: float) -> np.ndarray:
    """Distance ``(n,)`` across the nearest of ``lines`` (one region's, frame angle ``phi``)
    of each point, among the lines whose extent covers it (:func:`covered_across`); inf where
    none does."""
    if len(lines) == 0:
        return np.full(len(xy), np.inf)
    return covered_across(xy, lines, phi, reach).min(axis=1)


def refine_boundaries(samples: np.ndarray, sample_component: np.ndarray, sample_region: np.ndarray,
                      edges: np.ndarray, small: np.ndarray, lines: LineSet, regions: tuple[Region, ...],
                      stats: ComponentStats, params: Parameters) -> np.ndarray | None:
    """Each sample's region ``(N,)`` after moving boundary words to the block whose lines
    pass through them, or None when nothing moves.

    ``edges`` are the kept Delaunay edges (:func:`kept_edges`): two regions they join are
    blocks that touch. A word (a component taller than a diacritic, ``small`` marks the
    samples of the others) of region A with an edge to region B moves to B when B's lines
    pass ``CLOSER`` times closer to it than A's (the median over its samples of the distance
    across the nearest line whose extent, lengthened by ``merge_gap`` x W_cc, covers the
    sample). The lines are the initial lines fitted before the move: the word was part of
    A's ink, and still B's lines, fitted without it, run through it. Diacritics and dots
    follow the word their samples are joined to most."""
    n_regions = len(regions)
    if n_regions < 2 or len(edges) == 0 or len(lines) == 0:
        return None
    region = sample_region.astype(np.int64).copy()
    reach = params.merge_gap * stats.w_cc
    n_comp = int(sample_component.max()) + 1
    big = ~small
    # Distances to each region's lines, computed once per (region, sample) pair on demand.
    cache: dict[int, np.ndarray] = {}

    def distance(r: int) -> np.ndarray:
        if r not in cache:
            own = lines.take(np.flatnonzero(lines.region == r))
            cache[r] = _row_distance(samples, own, regions[r].phi, reach)
        return cache[r]

    order = np.argsort(sample_component, kind="stable")
    starts = np.searchsorted(sample_component[order], np.arange(n_comp + 1))
    moved_any = False
    for _ in range(_ROUNDS):
        a, b = region[edges[:, 0]], region[edges[:, 1]]
        cross = a != b
        if not cross.any():
            break
        # Candidate moves: (component, target region) for words touching another block.
        ends = np.concatenate([edges[cross], edges[cross][:, ::-1]])
        comp = sample_component[ends[:, 0]]
        target = region[ends[:, 1]]
        keep = big[ends[:, 0]]
        pairs = np.unique(comp[keep].astype(np.int64) * n_regions + target[keep])
        moves: list[tuple[np.ndarray, int]] = []
        for key in pairs:
            c, t = int(key // n_regions), int(key % n_regions)
            members = order[starts[c]:starts[c + 1]]
            own = int(np.bincount(region[members]).argmax())
            if own == t:
                continue
            d_own = float(np.median(distance(own)[members]))
            d_new = float(np.median(distance(t)[members]))
            if np.isfinite(d_new) and d_new * CLOSER < d_own:
                moves.append((members, t))
        if not moves:
            break
        for members, t in moves:
            region[members] = t
        moved_any = True
    if not moved_any:
        return None
    # Diacritics and dots follow the region their samples are joined to most (edges to other
    # components: a dot's own edges would vote for where it already is).
    e = np.concatenate([edges, edges[:, ::-1]])
    e = e[sample_component[e[:, 0]] != sample_component[e[:, 1]]]
    e = e[small[e[:, 0]]]
    if len(e):
        vote = np.zeros((n_comp, n_regions))
        np.add.at(vote, (sample_component[e[:, 0]], region[e[:, 1]]), 1.0)
        joined = vote.sum(axis=1) > 0
        follow = small & joined[sample_component]
        region = np.where(follow, vote.argmax(axis=1)[sample_component], region)
    return region.astype(np.int32)


def merge_parallel_blocks(sample_region: np.ndarray, edges: np.ndarray, regions: tuple[Region, ...],
                          max_gap: float, small: int = 0, small_gap: float = 0.0,
                          samples: np.ndarray | None = None, h_cc: float = 0.0,
                          range_edges: tuple[float, float] = (-90.0, 90.0),
                          mixed: dict[int, int] | None = None, small_frame: bool = True,
                          split_parts: dict[int, int] | None = None) -> np.ndarray | None:
    """Each sample's region ``(N,)`` with touching blocks whose frames lie within ``max_gap``
    degrees of each other joined into one (the largest's number), or None when none do; a
    block of fewer than ``small`` samples also joins a touching block within ``small_gap``
    degrees (a few words' angle is reliable only far from their neighbour's, as
    engine.regions.keep_distinct_parts asks of the parts it keeps: ahte moc_test_1, 409
    samples of two main-text rows framed at 28 deg against the main text's -1 deg).

    A small block's join carries only itself: two groups that each hold ``small`` samples or
    more stay apart when their frames (their largest block's) lie more than ``max_gap`` apart,
    whatever small block touches both; pairs within ``max_gap`` are joined first.

    Touching blocks come from the orientation split (stage 5 cuts a region where its local
    text angle changes by more than ``engine.regions.SPLIT_ANGLE``); a part split off on its
    local angles whose own frame then lands at its neighbour's angle is the same block (ahte
    moc_train_18: a part of the main text whose line ends rise by 20-40 deg split off, and
    its frame search put it back at -1 deg, the main text's: lines cut in two at the seam).
    ``edges``: the kept Delaunay edges (:func:`kept_edges`).

    ``mixed`` (``Parameters.mixed_parts_frame``; engine.regions.find_regions): block -> the
    block it was split from, for blocks kept apart although their line contrast at that
    block's angle was not low enough (a narrow note's part holding the main text's row ends
    too). Each is folded back into that block unless its frame agrees with its own angle (as
    a small block's, below): the filter bank's frame search on the whole part is a second
    estimate of which direction its ink follows. ``small_frame`` (``small_parts_frame``):
    the small blocks' check below is made. Both checks read the blocks' own angles from
    ``samples`` ``(N, 2)`` (None: neither is made); ``mixed`` is empty with
    ``mixed_parts_frame`` off.

    ``split_parts`` (engine.regions.find_regions): block -> the block the orientation split
    cut it from. Such a block whose frame search found no evidence for a steep angle, and so
    gave it the page's direction (``Region.page_direction``), goes back to that block when
    the two frames lie within ``max_gap``: the split set it apart for an angle its ink does
    not show. (Blocks framed at the page's direction join no neighbour otherwise, below.)
    Seen on poilus AN_0001-0 turned by 3 degrees: the stamp, the margin notes and the first
    words of three rows, 588 samples, stood apart at the page's 0 deg beside the text's -3.75
    and their lines crossed the rows' (line IU 0.93 -> 0.72)."""
    n = len(regions)
    if n < 2 or len(edges) == 0:
        return None
    phi = np.degrees([r.phi for r in regions])

    def frame_disagrees(k: int, region: np.ndarray) -> bool:
        """Block ``k``'s frame is not at its own angle (more than max_gap off), or lies at an
        edge of the orientation range (range_edges, degrees: where the search stopped, not
        an estimate that agrees; poilus AN_0187-0: a signature's slanted downstrokes, own
        angle -30 deg, frame at the range's -40 deg)."""
        at_edge = min(abs(phi[k] - range_edges[0]), abs(phi[k] - range_edges[1])) < 1e-6
        own = own_angle(samples[region == k], h_cc)
        return at_edge or angle_gap(own, phi[k]) > max_gap

    region = sample_region
    folded = False
    if mixed and samples is not None:
        # Mixed parts whose frame disagrees go back to the block they were split from, before
        # any pair is looked at (as keep_distinct_parts folded them before).
        region = sample_region.copy()
        for k, main in mixed.items():
            if k < n and main < n and frame_disagrees(int(k), sample_region):
                region[sample_region == k] = main
                folded = True
    if split_parts:
        for k, main in split_parts.items():
            if (k < n and main < n and regions[k].page_direction and not regions[main].page_direction
                    and angle_gap(phi[k], phi[main]) <= max_gap):
                if region is sample_region:
                    region = sample_region.copy()
                region[region == k] = main
                folded = True
    a, b = region[edges[:, 0]], region[edges[:, 1]]
    cross = a != b
    if not cross.any():
        return region.astype(np.int32) if folded else None
    pairs = np.unique(np.sort(np.stack([a[cross], b[cross]], axis=1), axis=1), axis=0)
    n_samples = np.bincount(region, minlength=n)
    size = n_samples.copy()
    root = np.arange(n)

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = int(root[x])
        return x

    joined = folded
    # Parallel pairs first, then the small blocks' joins: a small block touching a block at its
    # own angle and another at an angle it is only near joins the first.
    gaps = angle_gap(phi[pairs[:, 0]], phi[pairs[:, 1]])
    order = np.argsort(gaps > max_gap, kind="stable")
    for (i, j), gap in zip(pairs[order], gaps[order].tolist(), strict=True):  # a few pairs per page
        if regions[i].page_direction or regions[j].page_direction:
            # A frame given for want of evidence (the page's direction) is no sign of being one
            # block with a neighbour at that angle: a gutter's marks between two facing pages
            # joined both pages into one block, and rows across the spread (FM 0.93 -> 0.63).
            continue
        small_join = min(n_samples[i], n_samples[j]) < small and gap <= small_gap
        if small_join and small_frame and samples is not None and gap > max_gap:
            # small_parts_frame: a small block joins its neighbour only when its frame does not
            # come out at its own angle (the angle its line contrast is highest at), i.e. when
            # the two estimates of its direction disagree (ahte moc_test_1: own angle -87 deg,
            # frame 28 deg); a small note whose frame agrees with its own angle stands apart.
            small_join = frame_disagrees(int(i) if n_samples[i] < n_samples[j] else int(j), region)
        if gap <= max_gap or small_join:
            ri, rj = find(int(i)), find(int(j))
            if min(size[ri], size[rj]) >= small and angle_gap(phi[ri], phi[rj]) > max_gap:
                # A small block joins a block, not its group to another group: two groups of a
                # block's worth of samples each (their frames the largest block's) further
                # apart than max_gap stay apart. Joined in turn, a block of 434 samples at
                # -6 deg bridged moc_train_9's blocks at -5.6 and -26.3 deg (7,731 and 13,707
                # samples) at seed 1: 45 correct lines, 54 without the bridge.
                continue
            if ri != rj:
                big, other = (ri, rj) if size[ri] >= size[rj] else (rj, ri)
                root[other] = big
                size[big] += size[other]
                joined = True
    if not joined:
        return None
    return np.array([find(r) for r in range(n)])[region].astype(np.int32)


#: A group of a block's samples stands apart as a block of its own from this many x
#: ``min_region_samples`` samples: the size from which the orientation split tests a part
#: rather than folding it (engine.regions.keep_distinct_parts: fewer are a few words).
APART_SAMPLES = 3


def split_apart_blocks(sample_region: np.ndarray, edges: np.ndarray, samples: np.ndarray, limit: float,
                       min_samples: int) -> np.ndarray | None:
    """Each sample's block ``(N,)`` with every block whose samples lie in groups further than
    ``limit`` pixels apart (no sample of one within ``limit`` of the other's: stage 5's region
    threshold, the distance that makes two text masses two regions) split into those groups,
    or None when none is. ``edges`` ``(E, 2)`` also join samples (a row's words across a word
    gap: :func:`engine.pitch.row_join_edges`). Groups of fewer than ``min_samples`` samples
    stay with their block's largest group.

    Joining touching blocks at one angle (:func:`merge_parallel_blocks`) and moving words at
    a junction (:func:`refine_boundaries`) can leave a block whose parts no longer touch:
    moc-train moc_train_20's notes at the top right and the column of notes below the main
    text, one block at -88.8 deg, whose lines ran from one through the main text's rows to
    the other; moc_train_16's two paragraphs above and below a column, one block at 0 deg."""
    n = len(sample_region)
    if n == 0:
        return None
    n_blocks = int(sample_region.max()) + 1
    given = np.zeros((0, 2), np.int64)
    if len(edges):
        given = edges[sample_region[edges[:, 0]] == sample_region[edges[:, 1]]]
    by_block = np.argsort(sample_region, kind="stable")
    members = np.split(by_block, np.cumsum(np.bincount(sample_region, minlength=n_blocks))[:-1])
    # The edges alone join parts of the groups; where all but a block's largest part hold
    # fewer than min_samples samples, no group can stand apart, and the block's own
    # triangulation (0.4 s on 99k samples) is not needed.
    part = edge_components(given, n)
    pairs = [given]
    for idx in members:
        if len(idx) < 2 * min_samples or len(idx) - np.bincount(part[idx]).max() < min_samples:
            continue
        # Single linkage at ``limit``: the minimum spanning tree is in the Delaunay graph, so
        # its edges up to ``limit`` join exactly the samples that lie within it of each other.
        tri = delaunay_triangles(samples[idx, :2])
        if len(tri) == 0:
            continue
        e = triangle_edges(tri)
        length = np.linalg.norm(samples[idx[e[:, 0]], :2] - samples[idx[e[:, 1]], :2], axis=1)
        pairs.append(idx[e[length <= limit]])
    group = edge_components(np.concatenate(pairs), n) if len(pairs) > 1 else part
    out = sample_region.astype(np.int64)
    next_block = n_blocks
    split = False
    for idx in members:
        if len(idx) == 0:
            continue
        ids, sizes = np.unique(group[idx], return_counts=True)
        apart = ids[(sizes >= min_samples) & (ids != ids[np.argmax(sizes)])]
        for g in apart:
            out[idx[group[idx] == g]] = next_block
            next_block += 1
            split = True
    return out if split else None


def renumber_blocks(sample_region: np.ndarray, refined: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Each sample's block ``refined (N,)`` renumbered 0..R-1 in raster order of the blocks'
    first samples (as stage 5 numbers regions; a block may have lost every sample), with each
    new block's old region ``(R,)`` (the one that held most of its samples) and the new
    blocks whose samples are not exactly their old region's (changed)."""
    _, first, inverse = np.unique(refined, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    new_region = rank[inverse].astype(np.int32)
    n_new = int(new_region.max()) + 1
    n_old = int(sample_region.max()) + 1
    overlap = np.bincount(new_region.astype(np.int64) * n_old + sample_region, minlength=n_new * n_old)
    old_of_new = overlap.reshape(n_new, n_old).argmax(axis=1)
    changed = [k for k in range(n_new)
               if not np.array_equal(new_region == k, sample_region == old_of_new[k])]
    return new_region, old_of_new, changed


def refit_blocks(sample_region: np.ndarray, refined: np.ndarray, lines: LineSet,
                 regions: tuple[Region, ...], fit) -> tuple[np.ndarray, LineSet, tuple[Region, ...]]:
    """After :func:`refine_boundaries`: the regions renumbered (:func:`renumber_blocks`), and the
    initial lines and regions with those of the blocks whose samples changed fitted again by
    ``fit(sample_region, only, phis)`` (:func:`engine.initial_lines.initial_lines` with the
    page's other arguments bound). A changed block keeps its frame angle: a few words at its
    boundary moved, its lines did not turn."""
    new_region, old_of_new, changed = renumber_blocks(sample_region, refined)
    n_new = len(old_of_new)
    phis = {k: regions[int(old_of_new[k])].phi for k in changed}
    new_lines, new_regions = fit(new_region, np.array(changed, np.int64), phis)
    parts, out_regions = [], []
    by_index = {reg.index: reg for reg in new_regions}
    from .initial_lines import concat_lines

    for k in range(n_new):
        if k in by_index:
            parts.append(new_lines.take(np.flatnonzero(new_lines.region == k)))
            out_regions.append(by_index[k])
        else:
            old = int(old_of_new[k])
            own = lines.take(np.flatnonzero(lines.region == old))
            parts.append(LineSet(own.a, own.b, own.c, own.sigma_t, own.sigma_s, own.prior,
                                 np.full(len(own), k, np.int32), own.phi, own.rotation_invariant,
                                 chain=own.chain))
            reg = regions[old]
            out_regions.append(Region(index=k, phi=reg.phi, bbox=reg.bbox, n_samples=reg.n_samples))
    return new_region, concat_lines(parts, lines.rotation_invariant), tuple(out_regions)
