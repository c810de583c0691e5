"""Stage 8: fragments of one text row that lie in different regions merge, and every merge
of fragments is recorded with its reason.

Section 4 of the paper merges "fragmented lines" (the model is linear, so a curved or broken
row ends as collinear pieces) within a region (:func:`engine.postprocess.merge_pairs`). A
row's words can also fall in different regions: the region cut (2.5 H_cc) separates words
further apart than that, and a region of one word gets a line of its own that no merge
within a region reaches. After EM, two lines of different regions merge when they run in the
same direction (``ANGLE_TOLERANCE``) and pass the row join's test
(:func:`engine.pitch.row_join_edges`) as lines: where they meet, they lie less than
``ROW_PHASE`` x the row pitch apart across the text (the same row phase) and at most
``row_merge`` x the pitch apart along it (``row_join``'s limit at stage 5), and both regions
are single rows (a block of rows is never merged with a fragment beside it). The merged line
is refitted to all its samples in the frame of its largest fragment's region. (The test of
the merge within a region, ``merge_gap`` W_cc along and ``merge_offset`` H_cc across, merged a
page number at the end of the first row across regions, cremma 50_df850: 14 -> 12 matches,
and collinear side notes: moc-train 230 -> 224.)

A page where no region shows a row period (a title page, a card, a few rows of large
writing) gives the test no pitch to read; there, with ``row_merge_pitchless``, it is the
merge within a region's (``merge_gap`` x W_cc along, ``merge_offset`` x H_cc across, any two
regions: without a pitch a region's rows cannot be counted). A page number beside a body of
rows, and side notes beside a main text, are on pages whose body has a pitch, where this
does not apply.

Each merge (within a region and across regions) is a :class:`FragmentMerge`: the final line
it made, the fragments' extents on the page, the gap and offset measured and their limits,
so that the window and the JSON output can show which fragments were joined and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .arrays import angle_difference, angle_gap
from .model import LineSet, Preparation, to_region_frame
from .params import Parameters
from .pitch import NEIGHBOUR_ANGLE, ROW_PHASE, page_pitch, single_rows
from .regression import fit_lines

#: Two fragments run in the same direction when their lines' angles on the page differ by
#: less than this (degrees): a side note at another angle is its own block (regions.SPLIT_ANGLE
#: is 20 deg), a row's words agree within a few degrees. The same tolerance lets a region
#: without a row period take its neighbour's (engine.pitch.NEIGHBOUR_ANGLE).
ANGLE_TOLERANCE = NEIGHBOUR_ANGLE


@dataclass(frozen=True)
class FragmentMerge:
    """One merge of two fragments (lines) into one: ``line`` the final line's index (0-based,
    in the segmentation's lines), ``regions`` the two fragments' regions, ``fragments`` their
    page-coordinate extents ``((x0, y0), (x1, y1))`` each, ``gap`` (pixels along the text;
    negative: they overlap) and ``offset`` (pixels across it where they meet) with their
    limits, and ``why`` in words."""

    line: int
    regions: tuple[int, int]
    fragments: tuple[tuple[tuple[float, float], tuple[float, float]], ...]
    gap: float
    offset: float
    gap_limit: float
    offset_limit: float
    why: str

    def to_dict(self) -> dict:
        return {"line": self.line + 1, "regions": list(self.regions),
                "fragments": [[list(map(lambda v: round(float(v), 1), p)) for p in f] for f in self.fragments],
                "gap": round(self.gap, 1), "offset": round(self.offset, 1),
                "gap_limit": round(self.gap_limit, 1), "offset_limit": round(self.offset_limit, 1),
                "why": self.why}


def describe(gap: float, offset: float, gap_limit: float, offset_limit: float, across: bool,
             pitchless: bool = False) -> str:
    where = "in different regions" if across else "in one region"
    basis = " (the page shows no row period: limits in W_cc and H_cc)" if pitchless else ""
    return (f"fragments {where}: {gap:.0f} px apart along the row (at most {gap_limit:.0f}), "
            f"{offset:.0f} px across it where they meet (at most {offset_limit:.0f}){basis}")


def line_ends(lines: LineSet, xy: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each line's end points on the page ``(L, 2, 2)``: the points of the line at its
    samples' first and last positions along it (NaN for a line without samples)."""
    n = len(lines)
    deg = np.radians(np.degrees(lines.phi + np.arctan(lines.a)))
    t = np.stack([np.cos(deg), np.sin(deg)], axis=1)
    centre = lines.segments(0.0)[:, 0]
    lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
    has = labels >= 0
    lab = labels[has]
    along = ((xy[has] - centre[lab]) * t[lab]).sum(axis=1)
    np.minimum.at(lo, lab, along)
    np.maximum.at(hi, lab, along)
    ends = centre[:, None, :] + np.stack([lo, hi], axis=1)[:, :, None] * t[:, None, :]
    ends[~np.isfinite(lo)] = np.nan
    return ends


def pair_geometry(ends: np.ndarray, deg: np.ndarray, i: np.ndarray, j: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Gap along the text (pixels; negative: overlap) and offset across it at the junction
    (the middle of the gap or overlap) of the lines ``i`` and ``j`` (end points ``ends``,
    directions ``deg`` on the page), in the frame of their mean direction."""
    mean = np.radians(deg[i] + angle_difference(deg[j], deg[i]) / 2.0)
    c, s = np.cos(mean)[:, None], np.sin(mean)[:, None]
    ua, va = ends[i, :, 0] * c + ends[i, :, 1] * s, -ends[i, :, 0] * s + ends[i, :, 1] * c
    ub, vb = ends[j, :, 0] * c + ends[j, :, 1] * s, -ends[j, :, 0] * s + ends[j, :, 1] * c
    left_end = np.minimum(ua.max(axis=1), ub.max(axis=1))
    right_start = np.maximum(ua.min(axis=1), ub.min(axis=1))
    junction = (left_end + right_start) / 2.0

    def across(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        du = u[:, 1] - u[:, 0]
        du = np.where(np.abs(du) > 1e-9, du, 1e-9)
        return v[:, 0] + (v[:, 1] - v[:, 0]) * (junction - u[:, 0]) / du

    return right_start - left_end, np.abs(across(ua, va) - across(ub, vb))


def merge_across_regions(prep: Preparation, lines: LineSet, labels: np.ndarray, params: Parameters
                         ) -> tuple[np.ndarray, list[tuple[int, int, float, float, float, float, bool]]]:
    """Which lines of different regions continue each other along one row (see the module's
    docstring): the root line of every line ``(L,)`` (the heaviest fragment of its group) and
    each merge ``(kept, absorbed, gap, offset, gap limit, offset limit, pitchless)``
    (``pitchless``: judged by the within-region limits on a page without a row period).
    ``lines`` ordered by region, ``labels`` ``(N,)`` each sample's line (-1 none)."""
    n = len(lines)
    root = np.arange(n)
    if n < 2 or len(np.unique(lines.region)) < 2:
        return root, []
    w_cc = prep.stats.w_cc
    deg = np.degrees(lines.phi + np.arctan(lines.a))
    ends = line_ends(lines, prep.samples.astype(np.float64), labels)
    alive = np.isfinite(ends[:, 0, 0])
    pitch = np.array([prep.row_pitch[r].pitch if r < len(prep.row_pitch) else math.nan
                      for r in lines.region], float)
    measured = len(prep.row_pitch) == len(prep.regions)
    # No region with a row period: the within-region test stands in for the pitch's, and no
    # region can be told a single row (row_merge_pitchless).
    pitchless = params.row_merge_pitchless and measured and page_pitch(prep) is None
    i, j = np.triu_indices(n, k=1)
    turn = angle_gap(deg[i], deg[j])
    pick = (lines.region[i] != lines.region[j]) & alive[i] & alive[j] & (turn <= ANGLE_TOLERANCE)
    if not pitchless:
        # Only fragments of single rows (as the row join: a block of rows and a fragment
        # beside it stay apart, a page number at the end of the first row).
        single = single_rows(prep.samples, prep.sample_region, np.array([r.phi for r in prep.regions]),
                             prep.row_pitch) if measured else np.zeros(len(prep.regions), bool)
        pick &= single[lines.region[i]] & single[lines.region[j]]
    # Issue 24: a locked line is never merged (nor refitted to a fragment of another region);
    # with anchor_keep, two lines a file gave neither.
    pick &= ~lines.locked[i] & ~lines.locked[j]
    if params.anchor_keep:
        pick &= ~(lines.anchored[i] & lines.anchored[j])
    i, j = i[pick], j[pick]
    if len(i) == 0:
        return root, []
    gap, offset = pair_geometry(ends, deg, i, j)
    # The row join's test (engine.pitch.row_join_edges) on the lines: the same row phase
    # (ROW_PHASE x the row pitch across) and a word gap (row_join x the pitch along); no
    # merge where neither region has a pitch, unless no region of the page has one.
    if pitchless:
        offset_limit = np.full(len(i), params.merge_offset * prep.stats.h_cc)
        gap_limit = np.full(len(i), params.merge_gap * w_cc)
    else:
        row = np.fmin(pitch[i], pitch[j])
        offset_limit = ROW_PHASE * row
        gap_limit = params.row_merge * row
    ok = (gap <= gap_limit) & (offset <= offset_limit) & np.isfinite(offset_limit) & np.isfinite(offset)
    if not ok.any():
        return root, []
    # Closest pairs first, a union-find over the few candidates (as merge_pairs).
    cand = np.flatnonzero(ok)
    cand = cand[np.argsort(offset[cand] + np.maximum(gap[cand], 0) / max(w_cc, 1.0), kind="stable")]
    weight = np.bincount(labels[labels >= 0], minlength=n).astype(np.int64)

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    merges = []
    for k in cand:
        ra, rb = find(int(i[k])), find(int(j[k]))
        if ra == rb:
            continue
        keep, gone = (ra, rb) if weight[ra] >= weight[rb] else (rb, ra)
        root[gone] = keep
        weight[keep] += weight[gone]
        merges.append((keep, gone, float(gap[k]), float(offset[k]), float(gap_limit[k]),
                       float(offset_limit[k]), bool(pitchless)))
    return np.array([find(x) for x in range(n)]), merges


def apply_roots(prep: Preparation, lines: LineSet, labels: np.ndarray, root: np.ndarray,
                params: Parameters) -> tuple[LineSet, np.ndarray, np.ndarray]:
    """The lines after merging each into its ``root``: merged groups refitted to all their
    samples in the root's region frame, the lines ordered by region then across the text
    (as stage 8 orders them), the samples' new lines ``(N,)``, and each old line's new
    index ``(L,)``."""
    from .initial_lines import order_lines

    a, b, cc = lines.a.copy(), lines.b.copy(), lines.c.copy()
    st, ss = lines.sigma_t.copy(), lines.sigma_s.copy()
    prior = lines.prior.copy()
    floor_t = params.sigma_t_floor * prep.stats.h_cc
    floor_s = params.sigma_s_floor * prep.stats.w_cc
    labels = np.where(labels >= 0, root[np.maximum(labels, 0)], -1)
    for r in np.unique(root[root != np.arange(len(root))]):
        members = np.flatnonzero(labels == r)
        uv = to_region_frame(prep.samples[members].astype(np.float64), lines.phi[r])
        fit = fit_lines(uv, np.ones((len(members), 1)), lines.rotation_invariant, floor_t, floor_s)
        if np.isfinite(fit.a[0]):
            a[r], b[r], cc[r], st[r], ss[r] = fit.a[0], fit.b[0], fit.c[0], fit.sigma_t[0], fit.sigma_s[0]
        prior[r] = prior[root == r].sum()
    merged = LineSet(a, b, cc, st, ss, prior, lines.region, lines.phi, lines.rotation_invariant,
                     lines.locked, lines.anchored, lines.chain, lines.sigma_t_measured)
    keep = np.flatnonzero(root == np.arange(len(root)))
    centres = {}
    for reg in np.unique(lines.region[keep]):
        uv = to_region_frame(prep.samples[prep.sample_region == reg].astype(np.float64), prep.regions[reg].phi)
        centres[int(reg)] = float(uv[:, 0].mean()) if len(uv) else 0.0
    sub = merged.take(keep)
    order = order_lines(sub, centres)
    new_index = np.full(len(root), -1, np.int64)
    new_index[keep[order]] = np.arange(len(order))
    new_of_old = new_index[root]
    return sub.take(order), np.where(labels >= 0, new_of_old[np.maximum(labels, 0)], -1), new_of_old


def _ends_tuple(e: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    return ((float(e[0, 0]), float(e[0, 1])), (float(e[1, 0]), float(e[1, 1])))


def within_region(lines: LineSet, xy: np.ndarray, labels: np.ndarray, joined: list, group: np.ndarray,
                  final: np.ndarray, region: int) -> list[FragmentMerge]:
    """The merges of one region's stage-8 merge (:func:`engine.postprocess.merge_pairs`'s
    record ``joined``) as :class:`FragmentMerge`: ``lines`` the region's lines before the merge,
    ``xy``/``labels`` its samples and their line, ``group`` each line's merged group, ``final``
    each group's final line (-1: none survived)."""
    ends = line_ends(lines, xy.astype(np.float64), labels)
    out = []
    for i, j, gap, offset, gap_limit, offset_limit in joined:
        line = int(final[group[i]]) if group[i] < len(final) else -1
        out.append(FragmentMerge(line, (region, region), (_ends_tuple(ends[i]), _ends_tuple(ends[j])), gap,
                                 offset, gap_limit, offset_limit,
                                 describe(gap, offset, gap_limit, offset_limit, across=False)))
    return out


def across_regions(region: np.ndarray, ends: np.ndarray, merges: list, new_of_old: np.ndarray
                   ) -> list[FragmentMerge]:
    """:func:`merge_across_regions`'s merges as :class:`FragmentMerge` (``region`` and
    ``ends`` of the lines before the merge, ``new_of_old`` their final index)."""
    return [FragmentMerge(int(new_of_old[keep]), (int(region[keep]), int(region[gone])),
                          (_ends_tuple(ends[keep]), _ends_tuple(ends[gone])), gap, offset, gap_limit,
                          offset_limit, describe(gap, offset, gap_limit, offset_limit, across=True,
                                                 pitchless=pitchless))
            for keep, gone, gap, offset, gap_limit, offset_limit, pitchless in merges]
