"""Stage 8: surplus-line removal, merging of fragmented lines, final labelling.

* Lines whose prior (relative to their region) is under ``epsilon``, or that no sample
  chooses, are removed; their samples go to their next most probable line.
* Fragments of one text line (the model is linear, so a curved line ends as collinear
  pieces) are merged when their ends are at most ``merge_gap`` x W_cc apart along the text
  and at most ``merge_offset`` x H_cc apart across it where they meet; overlapping
  duplicates of one line merge by the same rule.
* Final labels (paper 4.2): a connected component whose samples all chose one line takes it;
  otherwise each of its pixels goes to the closest of the lines its samples chose.
"""

from __future__ import annotations

import numpy as np

from .initial_lines import concat_lines, order_lines
from .model import LineSet, Preparation, Segmentation, Snapshot, to_region_frame
from .params import Parameters
from .regression import fit_lines
from .unary import interline_space


def surviving_lines(snapshot: Snapshot, epsilon: float) -> np.ndarray:
    """Boolean ``(L,)``: lines with prior >= epsilon that are some sample's best line."""
    lines = snapshot.lines
    chosen = np.zeros(len(lines), bool)
    best = snapshot.posterior_lines[:, 0]
    chosen[best[best >= 0]] = True
    return (lines.prior >= epsilon) & chosen


def reassign(snapshot: Snapshot, keep: np.ndarray) -> np.ndarray:
    """Each sample's most probable kept line ``(N,)`` among its top-k (-1 if none)."""
    cand = snapshot.posterior_lines
    ok = (cand >= 0) & keep[np.maximum(cand, 0)]
    first = np.argmax(ok, axis=1)
    label = cand[np.arange(len(cand)), first]
    return np.where(ok.any(axis=1), label, -1).astype(np.int64)


def _extent(uv: np.ndarray, labels: np.ndarray, n_lines: int) -> tuple[np.ndarray, np.ndarray]:
    lo = np.full(n_lines, np.inf)
    hi = np.full(n_lines, -np.inf)
    m = labels >= 0
    np.minimum.at(lo, labels[m], uv[m, 0])
    np.maximum.at(hi, labels[m], uv[m, 0])
    return lo, hi


def merge_pairs(lines: LineSet, uv: np.ndarray, labels: np.ndarray, h_cc: float, w_cc: float,
                params: Parameters) -> np.ndarray:
    """Root line of every line ``(L,)`` after merging fragments (all lines of one region;
    ``uv`` the region-frame positions of the samples, ``labels`` their line)."""
    n = len(lines)
    root = np.arange(n)
    if n < 2:
        return root
    lo, hi = _extent(uv, labels, n)
    # Junction between each ordered pair (i left of j): the middle of the gap or overlap.
    left_end = np.minimum(hi[:, None], hi[None, :])
    right_start = np.maximum(lo[:, None], lo[None, :])
    gap = right_start - left_end  # > 0: disjoint extents; < 0: overlapping
    junction = (left_end + right_start) / 2.0
    vi = lines.a[:, None] * junction + lines.b[:, None]
    vj = lines.a[None, :] * junction + lines.b[None, :]
    offset = np.abs(vi - vj)
    # The pitch: median interline space of the lines that have a neighbour above or below.
    space = interline_space(lines, default=np.nan, min_gap=0.5 * h_cc)
    pitch = float(np.nanmedian(space)) if np.isfinite(space).any() else 0.0
    limit = max(params.merge_offset * h_cc, params.merge_offset_pitch * pitch)
    ok = (gap <= params.merge_gap * w_cc) & (offset <= limit)
    ok &= np.isfinite(gap) & ~np.eye(n, dtype=bool)
    i, j = np.nonzero(np.triu(ok))
    # Closest pairs first; a union-find over the few candidate pairs.
    order = np.argsort(offset[i, j] + np.maximum(gap[i, j], 0) / max(w_cc, 1.0), kind="stable")

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for k in order:
        a_, b_ = find(int(i[k])), find(int(j[k]))
        if a_ != b_:
            root[max(a_, b_)] = min(a_, b_)
    return np.array([find(x) for x in range(n)])


def final_labels(prep: Preparation, lines: LineSet, sample_labels: np.ndarray) -> np.ndarray:
    """Pixel label map int32 ``(H, W)``: 0 = background, k = line k-1 of ``lines``."""
    comps = prep.components
    n_comp = int(comps.max()) if comps.size else 0
    out_lut = np.zeros(n_comp + 1, np.int32)
    if len(lines) == 0 or n_comp == 0:
        return np.zeros(comps.shape, np.int32)
    sc = prep.sample_component
    lab = sample_labels
    has = lab >= 0
    pairs = np.unique(np.stack([sc[has], lab[has]], axis=1), axis=0)
    n_labels = np.bincount(pairs[:, 0], minlength=n_comp + 1)
    single = n_labels == 1
    first = np.zeros(n_comp + 1, np.int64)
    first[pairs[::-1, 0]] = pairs[::-1, 1]  # the first (smallest) label of each component
    out_lut[single] = first[single] + 1
    # Components with no labelled sample: nearest line from the component's samples' mean.
    orphan = np.flatnonzero(n_labels == 0)
    orphan = orphan[orphan > 0]
    if len(orphan):
        centre = np.zeros((n_comp + 1, 2))
        count = np.bincount(sc, minlength=n_comp + 1).astype(float)
        centre[:, 0] = np.bincount(sc, weights=prep.samples[:, 0], minlength=n_comp + 1)
        centre[:, 1] = np.bincount(sc, weights=prep.samples[:, 1], minlength=n_comp + 1)
        centre /= np.maximum(count, 1)[:, None]
        nearest = nearest_line(centre[orphan], lines)
        out_lut[orphan] = nearest + 1
    labels = out_lut[comps]
    multi = np.flatnonzero(n_labels > 1)
    if len(multi):
        # Each pixel of a component whose samples disagree goes to the closest of their lines.
        slot = np.zeros(n_comp + 1, np.int64)
        slot[multi] = np.arange(len(multi))
        max_c = int(n_labels[multi].max())
        cand = np.full((len(multi), max_c), -1, np.int64)
        sel = np.isin(pairs[:, 0], multi)
        p_comp, p_line = pairs[sel, 0], pairs[sel, 1]
        starts = np.searchsorted(p_comp, multi)
        rank = np.arange(len(p_comp)) - starts[slot[p_comp]]
        cand[slot[p_comp], rank] = p_line
        is_multi = np.zeros(n_comp + 1, bool)
        is_multi[multi] = True
        ys, xs = np.nonzero(is_multi[comps])
        c_of = cand[slot[comps[ys, xs]]]  # (n_pix, max_c)
        xy = np.stack([xs, ys], axis=1).astype(np.float64)
        best = np.full(len(xs), np.inf)
        best_line = np.zeros(len(xs), np.int64)
        for k in range(max_c):  # a few candidate slots, each vectorised over pixels
            line = c_of[:, k]
            valid = line >= 0
            li = np.maximum(line, 0)
            d = _distance(xy, lines, li)
            better = valid & (d < best)
            best[better] = d[better]
            best_line[better] = line[better]
        labels[ys, xs] = (best_line + 1).astype(np.int32)
    return labels


def _distance(xy: np.ndarray, lines: LineSet, idx: np.ndarray) -> np.ndarray:
    """Distance of points ``(n, 2)`` to line ``idx[i]`` each: across, plus beyond its ends."""
    uv = to_region_frame(xy, lines.phi[idx])
    a, b = lines.a[idx], lines.b[idx]
    norm = np.sqrt(1.0 + a * a)
    d_t = (uv[:, 1] - a * uv[:, 0] - b) / norm
    along = (uv[:, 0] + a * uv[:, 1]) / norm if lines.rotation_invariant else uv[:, 0]
    beyond = np.maximum(np.abs(along - lines.c[idx]) - 2.0 * lines.sigma_s[idx], 0.0)
    return np.hypot(d_t, beyond)


def nearest_line(xy: np.ndarray, lines: LineSet) -> np.ndarray:
    """Index of the nearest line (across distance plus distance beyond its ends) ``(n,)``."""
    best = np.full(len(xy), np.inf)
    arg = np.zeros(len(xy), np.int64)
    for k in range(len(lines)):  # lines, not pixels: a few dozen vectorised passes
        d = _distance(xy, lines, np.full(len(xy), k))
        better = d < best
        best[better], arg[better] = d[better], k
    return arg


def finish(prep: Preparation, snapshot: Snapshot, params: Parameters) -> Segmentation:
    """Stage 8 on the state of ``snapshot``: returns the pixel labels and the final lines."""
    final, sample_labels = consolidate_lines(prep, snapshot, params)
    # final_labels gives an all-background map when no line survived.
    return Segmentation(labels=final_labels(prep, final, sample_labels), lines=final,
                        sample_labels=sample_labels, regions=prep.regions)


def consolidate_lines(prep: Preparation, snapshot: Snapshot, params: Parameters) -> tuple[LineSet, np.ndarray]:
    """Stage 8 without the pixel labelling: surplus and diacritic lines removed, fragments
    merged, lines refitted to their samples. Returns the lines (ordered by region, then
    across the text) and each sample's line ``(N,)`` (-1 = none)."""
    lines = snapshot.lines
    if len(lines) == 0 or len(prep.samples) == 0:
        return LineSet.empty(lines.rotation_invariant), np.full(len(prep.samples), -1, np.int64)
    keep = surviving_lines(snapshot, params.epsilon)
    labels = reassign(snapshot, keep)
    # Lines living on diacritics and noise: give their samples to their next best line.
    small = prep.small_samples()
    has = labels >= 0
    n_all = np.bincount(labels[has], minlength=len(lines))
    n_small = np.bincount(labels[has & small], minlength=len(lines))
    residual = n_small > params.diacritic_fraction * np.maximum(n_all, 1)
    if residual.any() and (keep & ~residual).any():
        keep &= ~residual
        labels = reassign(snapshot, keep)
    rot_inv = lines.rotation_invariant
    floor_t = params.sigma_t_floor * prep.stats.h_cc
    floor_s = params.sigma_s_floor * prep.stats.w_cc
    new_parts = []
    new_labels = np.full(len(labels), -1, np.int64)
    offset = 0
    for r, region in enumerate(prep.regions):  # regions: a few
        own = np.flatnonzero((lines.region == r) & keep)
        members = np.flatnonzero(prep.sample_region == r)
        if len(own) == 0:
            continue
        uv = to_region_frame(prep.samples[members], region.phi)
        local = np.full(len(lines), -1, np.int64)
        local[own] = np.arange(len(own))
        lab = np.where(labels[members] >= 0, local[np.maximum(labels[members], 0)], -1)
        sub = lines.take(own)
        if params.merge_fragments:
            root = merge_pairs(sub, uv, lab, prep.stats.h_cc, prep.stats.w_cc, params)
            _, group = np.unique(root, return_inverse=True)
            lab = np.where(lab >= 0, group[np.maximum(lab, 0)], -1)
            n_groups = int(group.max()) + 1
        else:
            n_groups = len(own)
        weights = (lab[:, None] == np.arange(n_groups)[None, :]).astype(np.float64)
        fit = fit_lines(uv, weights, rot_inv, floor_t, floor_s)
        alive = np.isfinite(fit.a) & (fit.weight >= 1)
        remap = np.full(n_groups, -1, np.int64)
        remap[alive] = np.arange(int(alive.sum()))
        prior = fit.weight[alive] / max(fit.weight[alive].sum(), 1e-12)
        part = LineSet(fit.a[alive], fit.b[alive], fit.c[alive], fit.sigma_t[alive], fit.sigma_s[alive],
                       prior, np.full(int(alive.sum()), r, np.int32), np.full(int(alive.sum()), region.phi),
                       rot_inv)
        centre = {r: float(uv[:, 0].mean())}
        order = order_lines(part, centre)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        new_parts.append(part.take(order))
        mapped = np.where(lab >= 0, remap[np.maximum(lab, 0)], -1)
        new_labels[members] = np.where(mapped >= 0, rank[np.maximum(mapped, 0)] + offset, -1)
        offset += len(order)
    return concat_lines(new_parts, rot_inv), new_labels
