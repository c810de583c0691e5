"""Stage 8: surplus-line removal, merging of fragmented lines, final labelling.

* Lines whose prior (relative to their region) is under ``epsilon``, or that no sample
  chooses, are removed; their samples go to their next most probable line.
* Fragments of one text line (the model is linear, so a curved line ends as collinear
  pieces) are merged when their ends are at most ``merge_gap`` x W_cc apart along the text
  and at most ``merge_offset`` x H_cc apart across it where they meet; overlapping
  duplicates of one line merge by the same rule.
* Final labels (paper 4.2, revised): a connected component goes whole to the one line whose
  core it reaches, is split between lines only where it reaches several cores, and a
  component in the gap between lines follows the nearest placed ink (see final_labels).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import cv2
import numpy as np
from scipy.spatial import cKDTree

from . import row_merge as _row_merge
from .arrays import first_argmax, nonzero_index, sorted_unique
from .initial_lines import concat_lines, order_lines
from .ink import RIM_REACH
from .model import LineSet, Preparation, Segmentation, Snapshot, to_region_frame
from .params import Parameters
from .regression import LineFit, fit_from_moments, label_moments, spread_about
from .unary import interline_space

#: How far across its line (in H_cc) a non-text pixel may lie and still be given to it.
NON_TEXT_REACH = 1.0
#: How far beyond its line's end (in W_cc, a component's typical width) a non-text pixel may
#: lie and still be given to it, when the caller gives no reach (finish passes merge_gap: ink
#: that close to a line's end would have been merged into it as a fragment had it been
#: sampled). A word at the end of a row that touches a frame or a cloud leaves the ink with
#: it, so no sample holds the line's extent out to it (poilus AN_0056-0, AN_0232-0: 14-16 % of
#: the failing lines' writing). poilus-dev FM / line IU at 1, 2, 3, 4 and 6 W_cc: 65.5 / 76.6,
#: 66.3 / 77.0, 66.4 / 77.2, 66.9 / 77.2, 66.9 / 77.2 %; the other four sets unchanged.
NON_TEXT_BEYOND = 4.0


def given_lines(lines: LineSet, params: Parameters) -> np.ndarray:
    """Boolean ``(L,)``: the lines stage 8 never removes nor merges with one another: the
    locked ones and, with ``anchor_keep``, those a file gave (anchored)."""
    return lines.locked | lines.anchored if params.anchor_keep else lines.locked.copy()


def surviving_lines(snapshot: Snapshot, epsilon: float) -> np.ndarray:
    """Boolean ``(L,)``: lines with prior >= epsilon that are some sample's best line."""
    lines = snapshot.lines
    chosen = np.zeros(len(lines), bool)
    best = snapshot.posterior_lines[:, 0]
    chosen[best[best >= 0]] = True
    return (lines.prior >= epsilon) & chosen


def with_posterior_priors(prep: Preparation, snapshot: Snapshot, params: Parameters) -> Snapshot:
    """``snapshot`` with each line's prior the mean of its samples' posteriors (the paper's
    pi_l = mean_v p_v(l), over its region's samples with ``prior_scope`` "region", else over
    the page's), as the M-step would set it."""
    lines = snapshot.lines
    cand, prob = snapshot.posterior_lines, snapshot.posterior_probs
    ok = cand >= 0
    mass = np.bincount(cand[ok], weights=prob[ok], minlength=len(lines))[:len(lines)]
    if params.prior_scope == "region":
        size = np.bincount(prep.sample_region, minlength=len(prep.regions)).astype(np.float64)
        total = size[lines.region]
    else:
        total = np.full(len(lines), float(len(prep.samples)))
    prior = mass / np.maximum(total, 1.0)
    return dataclasses.replace(snapshot, lines=dataclasses.replace(lines, prior=prior))


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
                params: Parameters, record: list | None = None) -> np.ndarray:
    """Root line of every line ``(L,)`` after merging fragments (all lines of one region;
    ``uv`` the region-frame positions of the samples, ``labels`` their line). ``record``: a
    list to which each union is appended as ``(i, j, gap, offset, gap limit, offset limit)``.
    Two locked lines never merge, nor (``anchor_keep``) two given ones (locked or anchored)."""
    n = len(lines)
    root = np.arange(n)
    if n < 2:
        return root
    lo, hi = _extent(uv, labels, n)
    # Junction between each ordered pair (i left of j): the middle of the gap or overlap.
    left_end = np.minimum(hi[:, None], hi[None, :])
    right_start = np.maximum(lo[:, None], lo[None, :])
    gap = right_start - left_end  # > 0: disjoint extents; < 0: overlapping
    with np.errstate(invalid="ignore"):  # a line without samples: inf - inf, never merged
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

    # Issue 24: a locked line is never merged away: a free fragment may join it (the group
    # keeps the locked line's place), two locked lines never share a group; with
    # anchor_keep, two lines a file gave neither.
    given = given_lines(lines, params)
    for k in order:
        a_, b_ = find(int(i[k])), find(int(j[k]))
        if a_ != b_ and not (given[a_] and given[b_]):
            root[max(a_, b_)] = min(a_, b_)
            given[min(a_, b_)] |= given[max(a_, b_)]
            if record is not None:
                record.append((int(i[k]), int(j[k]), float(gap[i[k], j[k]]), float(offset[i[k], j[k]]),
                               params.merge_gap * w_cc, limit))
    return np.array([find(x) for x in range(n)])


#: A split-off row needs at least this many components and this extent along the text (x
#: W_cc): a lone word or a stroke above its line is an ascender, a flourish or an accent.
_SPLIT_MIN_COMPONENTS = 3
_SPLIT_MIN_EXTENT = 1.5
#: ... and at least this share of its line's samples (pieces of loops and strokes below a
#: line are rows of thin components too, but hold a few percent of its ink).
_SPLIT_MIN_SHARE = 0.05
#: ... and its components in a row: their offsets' spread (weighted standard deviation) at
#: most this fraction of the offset needed (AHTE ascenders and marks above a line scatter
#: over 1-4 H_cc).
_SPLIT_SPREAD = 0.5
#: Half-width (x W_cc) of the window along the text whose median row is a component's reference.
_SPLIT_WINDOW = 2.0


def _weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    order = np.argsort(x)
    cum = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cum, 0.5 * cum[-1])])


def _robust_fit(u: np.ndarray, v: np.ndarray, w: np.ndarray, min_du: float) -> tuple[float, float]:
    """``v = a u + b`` through points with weights ``w`` by weighted Theil-Sen: the median of
    the slopes between points at least ``min_du`` apart, then the median intercept. Least
    squares (even reweighted) tilts through two rows of one line; the median keeps the
    majority row's slope."""
    i, j = np.triu_indices(len(u), k=1)
    du = u[j] - u[i]
    far = np.abs(du) >= min_du
    if not far.any():
        return 0.0, _weighted_median(v, w)
    a = _weighted_median((v[j] - v[i])[far] / du[far], (w[i] * w[j])[far])
    return a, _weighted_median(v - a * u, w)


#: A component lies off its line's row when its centre is more than this many H_cc from the
#: line's local row (the row's body is about one text height tall: half of it either side).
_OFF_ROW = 0.5


def _local_rows(u_at: np.ndarray, u: np.ndarray, off: np.ndarray, w: np.ndarray, window: float,
                skip: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A line's local row at each of ``u_at`` ``(q,)``: the weighted median (weights ``w``) of
    the offsets ``off`` across the line of its components at ``u`` ``(m,)`` within ``window``
    along it, and the weight they hold (``skip[i]``: a component index left out for query
    ``i``, -1 none). Returns ``(row, support)``, ``row`` NaN where nothing is near."""
    order = np.argsort(off)
    near = np.abs(u_at[:, None] - u[None, order]) <= window
    if skip is not None:
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        has = skip >= 0
        near[np.flatnonzero(has), rank[skip[has]]] = False
    cum = np.cumsum(np.where(near, w[order][None, :], 0.0), axis=1)
    support = cum[:, -1] if len(order) else np.zeros(len(u_at))
    row = np.full(len(u_at), np.nan)
    ok = support > 0
    if ok.any():
        mid = np.argmax(cum[ok] >= 0.5 * support[ok, None], axis=1)
        row[ok] = off[order][mid]
    return row, support


def _component_centres(uv: np.ndarray, comp: np.ndarray, lab: np.ndarray, big: np.ndarray, n_groups: int
                       ) -> tuple[np.ndarray, ...]:
    """Each (group, component) pair among the samples ``big`` marks: ``(inv, count, g_of,
    c_of, cu, cv, starts)``, ``inv`` each such sample's pair, ``count`` its samples, ``g_of``
    and ``c_of`` its group and component, ``cu``/``cv`` its centre in the region frame
    ``uv``; the pairs are sorted by group, those of group ``g`` at ``starts[g]:starts[g + 1]``."""
    width = int(comp.max()) + 1 if len(comp) else 1
    keys = lab[big].astype(np.int64) * width + comp[big]
    code, inv, count = np.unique(keys, return_inverse=True, return_counts=True)
    g_of, c_of = code // width, code % width
    cu = np.bincount(inv, weights=uv[big, 0]) / count
    cv = np.bincount(inv, weights=uv[big, 1]) / count
    return inv, count, g_of, c_of, cu, cv, np.searchsorted(g_of, np.arange(n_groups + 1))


def split_rows(uv: np.ndarray, comp: np.ndarray, small: np.ndarray, lab: np.ndarray, n_groups: int,
               h_cc: float, w_cc: float, params: Parameters, fixed: np.ndarray | None = None
               ) -> tuple[np.ndarray, int]:
    """Split rows of components off the lines they were merged into; returns the samples'
    new groups ``(n,)`` and the number of groups (``uv`` region-frame sample positions,
    ``comp`` their component, ``small`` whether it is diacritic-sized, ``lab`` their group).

    The filter bank's initial lines are as wide as the main text's height, so a row of
    smaller writing between two lines (an interlinear insertion, a crossed-out word rewritten
    above) starts no line of its own, and EM then fits one line through both rows. Per line,
    the centres of its whole-height components are fitted robustly (the majority row); those
    lying more than ``split_offset`` x H_cc to one side of it, chained along the text with
    gaps under W_cc, become a line of their own when the chain has enough components, length
    and ink, and its components lie in a row (``_SPLIT_MIN_COMPONENTS``, ``_SPLIT_MIN_EXTENT``,
    ``_SPLIT_MIN_SHARE``, ``_SPLIT_SPREAD``). Each component is measured against the
    weighted-median row of the line's components around it (``_SPLIT_WINDOW``), so a line
    that curves or climbs where nothing is written beneath it stays whole. ``fixed``: bool
    ``(n_groups,)``, groups that are a locked line (issue 24: the user said where that row
    is), never split."""
    if params.split_offset <= 0 or n_groups == 0:
        return lab, n_groups
    limit = params.split_offset * h_cc
    lab = lab.copy()
    big = (lab >= 0) & ~small
    inv, count, g_of, _, cu, cv, starts = _component_centres(uv, comp, lab, big, n_groups)
    umin = np.full(len(g_of), np.inf)
    umax = np.full(len(g_of), -np.inf)
    np.minimum.at(umin, inv, uv[big, 0])
    np.maximum.at(umax, inv, uv[big, 0])
    moved = np.zeros(len(g_of), np.int64) - 1  # new group per (group, component), -1 = stays
    n_new = n_groups
    fits = np.full((n_groups, 3), np.nan)  # a, b, weighted centre along the text
    for g in range(n_groups):
        lo, hi = starts[g], starts[g + 1]
        if hi > lo:
            w = count[lo:hi].astype(np.float64)
            fits[g, :2] = _robust_fit(cu[lo:hi], cv[lo:hi], w, 0.5 * w_cc)
            fits[g, 2] = np.average(cu[lo:hi], weights=w)
    for g in range(n_groups):  # lines of one region: a few dozen
        lo, hi = starts[g], starts[g + 1]
        if hi - lo < 2 * _SPLIT_MIN_COMPONENTS or (fixed is not None and fixed[g]):
            continue
        u, v, w = cu[lo:hi], cv[lo:hi], count[lo:hi].astype(np.float64)
        a, b = fits[g, :2]
        limits = (limit, limit)
        if params.split_space > 0:
            # The interline space on each side at this line's centre: a row written between two
            # lines lies far into it, marks and ascenders of the line's own row do not (on
            # Arabic hands H_cc is a letter's height and rows lie 4-5 H_cc apart).
            at_u = fits[g, 2]
            rows = fits[:, 0] * at_u + fits[:, 1] - (a * at_u + b)
            rows[g] = np.nan
            above = -rows[rows < 0]
            below = rows[rows > 0]
            limits = (max(limit, params.split_space * above.min()) if above.size else limit,
                      max(limit, params.split_space * below.min()) if below.size else limit)
        r = v - (a * u + b)
        # Against the weighted-median row within _SPLIT_WINDOW x W_cc along the text: a
        # curved or rising line follows itself, a row above or below the main one stands out
        # (the main row holds most of the ink where the two overlap).
        r = r - _local_rows(u, u, r, w, _SPLIT_WINDOW * w_cc)[0]
        for side in (r < -limits[0], r > limits[1]):
            at = np.flatnonzero(side)
            if len(at) < _SPLIT_MIN_COMPONENTS:
                continue
            at = at[np.argsort(umin[lo + at])]
            reach = np.maximum.accumulate(umax[lo + at])
            breaks = np.flatnonzero(umin[lo + at[1:]] - reach[:-1] > w_cc) + 1
            for run in np.split(at, breaks):
                extent = umax[lo + run].max() - umin[lo + run].min()
                spread = np.sqrt(np.average((r[run] - np.average(r[run], weights=w[run])) ** 2, weights=w[run]))
                if (len(run) >= _SPLIT_MIN_COMPONENTS and extent >= _SPLIT_MIN_EXTENT * w_cc
                        and w[run].sum() >= _SPLIT_MIN_SHARE * w.sum() and spread <= _SPLIT_SPREAD * limit):
                    moved[lo + run] = n_new
                    n_new += 1
    if n_new == n_groups:
        return lab, n_groups
    lab[np.flatnonzero(big)] = np.where(moved[inv] >= 0, moved[inv], lab[big])
    return lab, n_new


def follow_local_rows(uv: np.ndarray, comp: np.ndarray, small: np.ndarray, lab: np.ndarray, n_groups: int,
                      h_cc: float, w_cc: float, fixed: np.ndarray | None = None,
                      strict: np.ndarray | None = None) -> np.ndarray:
    """Move each component that lies off its line's local row to the line whose local row is
    nearest it; returns the samples' new groups ``(n,)`` (``uv`` region-frame sample
    positions, ``comp`` their component, ``small`` whether it is diacritic-sized, ``lab``
    their group, ``n_groups`` groups).

    A straight line cannot follow a row that drifts: the end of a row that sags or climbs
    lies nearer the next row's straight line, and EM gives it to that row (kraken-sample,
    "y acaecer" at the end of the first row; the wavy baselines of Arabic hands). Along a line
    its components' centres show where its row locally is: the weighted median of their
    offsets from the line's robust fit within ``_SPLIT_WINDOW`` W_cc along it. A component
    whose centre lies more than ``_OFF_ROW`` H_cc from its own line's local row, and nearer
    another line's local row, goes to that line. Only a component's share on its owner line
    moves (pieces of a component split between lines are the final labelling's business),
    and only where more ink than its own defines the row it leaves. ``fixed``: ``(n_groups,
    2)``, the ``(a, b)`` of the locked line a group is (NaN: a free group; issue 24): the user
    said where that row is, so a component leaves it only when it lies off the locked line
    itself too, and for a line whose local row is nearer than both (a row estimated from a
    few components is no reason to doubt the user: poilus AD78_0018-0 with the ground
    truth's lines locked, the signature's flourish left its line for the row above, FM 0.73;
    0.87 with both rules). ``strict``: bool ``(n_groups,)``, the fixed groups held by both
    rules (None: all); the others (a file's free lines, ``anchor_place``) by the first alone:
    a line EM refined is a straight estimate, and where its row waves (Arabic hands) the
    neighbour's local row places a component better (issue 24's run (c): ahte-train
    book1_page19 and moc_test_2 lost a line each with the second rule). A component on a
    locked line (strict) moves only to a free line's local row: between two locked lines the
    user placed both rows and the E-step has weighed the component against both."""
    lab = lab.copy()
    big = (lab >= 0) & ~small
    if n_groups < 2 or not big.any():
        return lab
    inv, count, g_of, c_of, cu, cv, starts = _component_centres(uv, comp, lab, big, n_groups)
    w = count.astype(np.float64)
    window = _SPLIT_WINDOW * w_cc
    fits = np.zeros((n_groups, 2))
    off = np.full(len(g_of), np.nan)  # each component's offset from its line's fit
    d_own = np.full(len(g_of), np.nan)
    support = np.zeros(len(g_of))
    fitted = [g for g in range(n_groups) if starts[g + 1] - starts[g] >= 2]
    for g in fitted:  # lines of one region: a few dozen
        lo, hi = starts[g], starts[g + 1]
        fits[g] = _robust_fit(cu[lo:hi], cv[lo:hi], w[lo:hi], 0.5 * w_cc)
        off[lo:hi] = cv[lo:hi] - (fits[g, 0] * cu[lo:hi] + fits[g, 1])
        row, support[lo:hi] = _local_rows(cu[lo:hi], cu[lo:hi], off[lo:hi], w[lo:hi], window, np.arange(hi - lo))
        d_own[lo:hi] = np.abs(off[lo:hi] - row)
    owner = w > 0.5 * np.bincount(c_of, weights=w)[c_of]
    cand = owner & (d_own > _OFF_ROW * h_cc) & (support >= w)
    d_from = d_own
    # The groups held by both rules: the locked lines (strict given groups).
    held = np.zeros(n_groups, bool)
    if fixed is not None and np.isfinite(fixed[:, 0]).any():  # issue 24, see above
        held = np.isfinite(fixed[:, 0]) if strict is None else np.isfinite(fixed[:, 0]) & strict
        a_fix, b_fix = fixed[g_of, 0], fixed[g_of, 1]
        with np.errstate(invalid="ignore"):
            d_locked = np.abs(cv - (a_fix * cu + b_fix))
        cand &= ~(d_locked <= _OFF_ROW * h_cc)  # NaN (a free group) compares False: unaffected
        d_from = np.where(held[g_of], np.fmin(d_own, d_locked), d_own)
    cand = np.flatnonzero(cand)
    if len(cand) == 0:
        return lab
    d_best = d_from[cand].copy()
    best = g_of[cand].copy()
    # Between two locked lines the user placed both rows, and EM's E-step already weighed
    # the component against them: a local row estimated from each one's components does not
    # overrule that (issue 24, run (d), the ground truth's lines locked: on the Arabic pages,
    # whose lines' axes sit high for their tall letters, marks between two rows went to the
    # row above; one-to-one matches ahte-train 430 -> 444, moc-train 683 -> 707, other sets
    # unchanged). A component leaves a locked line for a free line's local row only.
    from_held = held[g_of[cand]]
    for g in fitted:
        lo, hi = starts[g], starts[g + 1]
        row, _ = _local_rows(cu[cand], cu[lo:hi], off[lo:hi], w[lo:hi], window)
        d = np.abs(cv[cand] - (fits[g, 0] * cu[cand] + fits[g, 1]) - row)
        better = (g_of[cand] != g) & (d < d_best)  # NaN (no row there) is never better
        if held[g]:
            better &= ~from_held
        d_best[better], best[better] = d[better], g
    moved = np.flatnonzero(best != g_of[cand])
    if len(moved) == 0:
        return lab
    new_group = g_of.copy()
    new_group[cand[moved]] = best[moved]
    lab[np.flatnonzero(big)] = new_group[inv]
    return lab


#: Across-line profile: histogram of ``z = d_t / sigma_t`` (signed, positive below the line)
#: over [-8, 8] in bins of 0.05, smoothed by a Gaussian of 2 bins; densities are floored at
#: ``_PROFILE_FLOOR`` so that a pixel far from every line still compares its distances.
_PROFILE_EDGES = np.linspace(-8.0, 8.0, 321)
_PROFILE_FLOOR = 1e-4
#: The core of a line: the central 80 % of its profile. A component "reaches" a line when
#: some of its pixels lie in that band (on ../shared/data, without the outer-band rule:
#: 10-90 % matched 334 ahte-train lines, 5-95 % 303; 25-75 % lowered kraken-sample's FM).
_CORE_QUANTILES = (0.1, 0.9)
#: Beyond the outer band (0.1-99.9 % of the profile) a line has next to no ink: there a
#: component that reaches only that line's core yields its pixels to a likelier line
#: (a descender loop hanging into the next line, cut there by kraken-sample's polygons;
#: 0.2-99.8 % cost ahte-train 31 lines, 0.05-99.95 % lost one on kraken-sample).
_OUTER_QUANTILES = (0.001, 0.999)
#: A line counts as reached by a component whose samples disagree when at least this
#: fraction of the component's pixels lie in its core (a stroke tip poking into the
#: neighbouring line's band does not split the component).
_ANCHOR_FRACTION = 0.05


def _line_forms(lines: LineSet) -> np.ndarray:
    """Per line, the page-frame linear forms of its signed across distance and its along
    position ``(6, L)``: ``d_t = f0 x + f1 y + f2`` and ``along - c = f3 x + f4 y + f5``.

    Rotating every pixel into its line's region frame cost a cosine and a sine per pixel and
    candidate line; the forms fold the rotation into six numbers per line."""
    cos, sin = np.cos(lines.phi), np.sin(lines.phi)
    a = lines.a
    norm = np.sqrt(1.0 + a * a)
    # u = x cos + y sin, v = -x sin + y cos; d_t = (v - a u - b) / norm.
    forms = [(-sin - a * cos) / norm, (cos - a * sin) / norm, -lines.b / norm]
    if lines.rotation_invariant:  # along = (u + a v) / norm
        forms += [(cos - a * sin) / norm, (sin + a * cos) / norm, -lines.c]
    else:  # along = u
        forms += [cos, sin, -lines.c]
    return np.array(forms)


def _signed_distance(xy: np.ndarray, lines: LineSet, idx: np.ndarray, forms: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Signed distance ``(n,)`` of points ``(n, 2)`` across line ``idx[i]`` each (positive
    below it, in its region frame) and their distance beyond its ends ``(n,)``; ``forms``:
    :func:`_line_forms` of ``lines`` (computed when None)."""
    f = _line_forms(lines) if forms is None else forms
    x, y = xy[:, 0], xy[:, 1]
    d_t = f[0][idx] * x
    d_t += f[1][idx] * y
    d_t += f[2][idx]
    along = f[3][idx] * x
    along += f[4][idx] * y
    along += f[5][idx]
    beyond = np.abs(along, out=along)
    beyond -= 2.0 * lines.sigma_s[idx]
    np.maximum(beyond, 0.0, out=beyond)
    return d_t, beyond


def line_profile(xy: np.ndarray, line: np.ndarray, lines: LineSet
                 ) -> tuple[np.ndarray, tuple[float, float], tuple[float, float]]:
    """The page's across-line ink profile from points ``xy`` on lines ``line``: log density of
    ``z = d_t / sigma_t`` per bin of ``_PROFILE_EDGES``, the core band and the outer band
    ``(z_lo, z_hi)`` each (see ``_CORE_QUANTILES``, ``_OUTER_QUANTILES``).

    Measured on the ground truth, the profile is asymmetric where the script is (AHTE Arabic:
    5 % of a line's ink is more than 45 px above its fitted centre, 5 % more than 35 px below,
    lines 100 px apart), so the nearest line is the wrong owner of a pixel in the gap."""
    d_t, beyond = _signed_distance(xy, lines, line)
    z = (d_t / lines.sigma_t[line])[beyond == 0]
    hist = np.histogram(z, _PROFILE_EDGES)[0].astype(np.float64)
    if hist.sum() == 0:  # no point within a line's extent: a flat profile (nearest-line-like)
        hist[:] = 1.0
    kernel = np.exp(-0.5 * (np.arange(-6, 7) / 2.0) ** 2)
    hist = np.convolve(hist, kernel / kernel.sum(), mode="same")
    width = _PROFILE_EDGES[1] - _PROFILE_EDGES[0]
    density = hist / hist.sum() / width
    cdf = np.cumsum(density) * width
    bands = []
    for quantiles in (_CORE_QUANTILES, _OUTER_QUANTILES):
        at = np.minimum(np.searchsorted(cdf, quantiles), len(cdf) - 1)
        bands.append((float(_PROFILE_EDGES[at[0]]), float(_PROFILE_EDGES[at[1] + 1])))
    return np.log(density + _PROFILE_FLOOR), bands[0], bands[1]


def _profile_bin(z: np.ndarray) -> np.ndarray:
    """Bin of ``_PROFILE_EDGES`` holding each ``z`` ``(n,)``, clipped to the first and last:
    ``clip(searchsorted(edges, z) - 1, 0, n_bins - 1)``. The edges are uniform, so the bin is
    computed and then corrected by one comparison each way (binary search of a million
    pixels' z: 50 ms; this: 10)."""
    edges = _PROFILE_EDGES
    n_edges = len(edges)
    width = (edges[-1] - edges[0]) / (n_edges - 1)
    i = np.ceil((np.clip(z, edges[0] - width, edges[-1] + width) - edges[0]) / width)
    i = np.clip(i, 0, n_edges).astype(np.intp)  # estimate of searchsorted(edges, z)
    i -= (i > 0) & (edges[np.maximum(i - 1, 0)] >= z)
    i += (i < n_edges) & (edges[np.minimum(i, n_edges - 1)] < z)
    i -= 1
    return np.clip(i, 0, n_edges - 2, out=i)


def _profile_score(xy: np.ndarray, lines: LineSet, idx: np.ndarray, log_density: np.ndarray,
                   forms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Log-likelihood ``(n,)`` of points under line ``idx[i]``'s profile (scaled by its
    sigma_t, Gaussian fall-off beyond its ends) and their ``z`` ``(n,)``."""
    d_t, beyond = _signed_distance(xy, lines, idx, forms)
    sigma = lines.sigma_t[idx]
    z = d_t / sigma
    beyond /= sigma
    beyond *= beyond
    beyond *= -0.5
    beyond -= np.log(lines.sigma_t)[idx]
    beyond += log_density[_profile_bin(z)]
    return beyond, z


def component_candidates(sample_component: np.ndarray, sample_labels: np.ndarray, n_comp: int
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The lines of each component's labelled samples (label -1: none): how many ``(n_comp +
    1,)`` (0 for component 0, the background) and which ``(n_comp + 1, max(1, most))`` int64,
    ascending, padded with -1."""
    has = sample_labels >= 0
    # (component, line) pairs, distinct, sorted: one int64 key each (np.unique(axis=0) sorts
    # rows as records, 56 ms for a page's 48k samples).
    width = int(sample_labels.max()) + 1 if has.any() else 1
    keys = sorted_unique(sample_component[has].astype(np.int64) * width + sample_labels[has])
    pairs = np.stack([keys // width, keys % width], axis=1)
    n_labels = np.bincount(pairs[:, 0], minlength=n_comp + 1)
    n_labels[0] = 0
    # One slot per candidate line.
    cand = np.full((n_comp + 1, max(int(n_labels.max()), 1)), -1, np.int64)
    rank = np.arange(len(pairs)) - np.searchsorted(pairs[:, 0], pairs[:, 0])
    cand[pairs[:, 0], rank] = pairs[:, 1]
    return n_labels, cand


def final_labels(prep: Preparation, lines: LineSet, sample_labels: np.ndarray, split_nearest: str = "never"
                 ) -> np.ndarray:
    """Pixel label map int32 ``(H, W)``: 0 = background, k = line k-1 of ``lines``.

    The paper gives a component whose samples agree their line and splits the others by the
    nearest line. On AHTE that lost 2-9 % of every line (FM 32 % with line IU 89 %): the
    samples of a stroke crossing the gap (alif tops, swashes, dots and short marks between
    two lines) often disagree or all choose the wrong line, and the nearest line is the wrong
    owner where the ink extends further on one side. So, with a profile of where a line's
    ink lies across it (learnt on the page from components whose samples agree):

    * a component that reaches the core of exactly one of its samples' lines goes to it whole
      (ground truth of pixel-labelled sets assigns components whole), but for its pixels
      beyond that line's outer band, which go to the likeliest of its other lines;
    * one that reaches the cores of several is split, each pixel to the most likely of those
      lines under the profile (touching strokes of two lines); by ``split_nearest``
      ("locked": where all those lines are locked; "given": locked or anchored; "always"),
      to the nearest of those lines instead (see Parameters.split_nearest);
    * one that reaches no core (diacritics, dots, stroke pieces in the gap) goes to the line
      of the nearest ink that is placed: the majority, over its pixels, of the line of the
      closest sample on a component not in the gap;
    * a component with no labelled sample goes to the nearest line (from its samples' mean).
    """
    comps = prep.components
    n_comp = int(comps.max()) if comps.size else 0
    if len(lines) == 0 or n_comp == 0:
        return np.zeros(comps.shape, np.int32)
    sc = prep.sample_component
    lab = sample_labels
    has = lab >= 0
    n_labels, cand = component_candidates(sc, lab, n_comp)
    max_c = cand.shape[1]
    single = n_labels == 1
    multi = n_labels > 1
    on_single = has & single[sc]
    source = on_single if on_single.any() else has
    log_density, (z_lo, z_hi), (z_out_lo, z_out_hi) = line_profile(prep.samples[source], lab[source],
                                                                    lines)

    # A component whose samples agree reaches its line's core if any pixel does; a sample in
    # the core settles it, only the others need their pixels looked at.
    _, z_s = _profile_score(prep.samples[on_single], lines, lab[on_single], log_density)
    sure = np.zeros(n_comp + 1, bool)
    sure[sc[on_single][(z_s >= z_lo) & (z_s <= z_hi)]] = True
    look = multi | (single & ~sure)
    # Only ink pixels are ever looked at or labelled: no gather over the whole page.
    # The preparation's ink mask is ``comps > 0``: its scan skips that comparison's page pass.
    ink = nonzero_index(prep.ink if prep.ink.shape == comps.shape else comps)
    ink_comp = comps.ravel()[ink]
    looked = look[ink_comp]
    pix = ink[looked]
    cid = ink_comp[looked]
    xy = np.empty((len(pix), 2))
    xy[:, 1], xy[:, 0] = np.divmod(pix, comps.shape[1])
    forms = _line_forms(lines)
    # Each looked pixel's score under each of its component's candidates, and whether it lies
    # beyond that candidate's outer band: only its valid slots are kept, slot by slot. Pixels
    # are ordered by how many candidates they have, so that slot k's pixels are the first
    # ``n_at[k]`` of that order; pixel i's slot k is entry ``off[k] + rank[i]`` of ``score``.
    # (A dense pixels x slots array, the same for every pixel, took 0.24 GB on cremma20
    # 10_c71ca with a locked file's pieces: 1.73M pixels, 28 slots, mostly -inf.)
    n_cand = n_labels[cid]
    by_slots = np.argsort(-n_cand, kind="stable")  # stable: raster order within a component
    rank = np.empty(len(cid), np.int64)
    rank[by_slots] = np.arange(len(cid))
    n_at = np.cumsum(np.bincount(n_cand, minlength=max_c + 1)[::-1])[::-1][1:]  # (max_c,): nl > k
    off = np.concatenate([[0], np.cumsum(n_at)])
    score = np.empty(int(off[-1]), np.float32)
    outside = np.empty(int(off[-1]), bool)  # beyond the candidate's outer band
    n_core = np.zeros((n_comp + 1, max_c))
    for k in range(max_c):  # a few candidate slots, each vectorised over blocks of pixels
        for lo in range(0, int(n_at[k]), _PIXEL_BLOCK):
            part = by_slots[lo:min(lo + _PIXEL_BLOCK, int(n_at[k]))]
            s_k, z = _profile_score(xy[part], lines, cand[cid[part], k], log_density, forms)
            at = slice(off[k] + lo, off[k] + lo + len(part))
            score[at] = s_k
            outside[at] = (z < z_out_lo) | (z > z_out_hi)
            n_core[:, k] += np.bincount(cid[part], weights=(z >= z_lo) & (z <= z_hi), minlength=n_comp + 1)
    n_core[sure, 0] = 1.0
    n_pix = np.bincount(cid, minlength=n_comp + 1).astype(np.float64)
    need = np.where(multi, _ANCHOR_FRACTION * n_pix, 0.0)
    reached = (cand >= 0) & (n_core > 0) & (n_core >= need[:, None])
    n_reached = reached.sum(axis=1)

    lut = np.zeros(n_comp + 1, np.int32)
    one = n_reached == 1
    lut[one] = cand[one, np.argmax(reached[one], axis=1)] + 1
    orphan = np.flatnonzero(n_labels == 0)
    orphan = orphan[orphan > 0]
    if len(orphan):  # no labelled sample: nearest line from the component's samples' mean
        centre = np.zeros((n_comp + 1, 2))
        count = np.bincount(sc, minlength=n_comp + 1).astype(float)
        centre[:, 0] = np.bincount(sc, weights=prep.samples[:, 0], minlength=n_comp + 1)
        centre[:, 1] = np.bincount(sc, weights=prep.samples[:, 1], minlength=n_comp + 1)
        centre /= np.maximum(count, 1)[:, None]
        lut[orphan] = nearest_line(centre[orphan], lines) + 1
    gap = (n_labels > 0) & (n_reached == 0)
    # Until the gap is resolved (and if nothing is placed to resolve it): the candidate
    # under whose profile the component is most likely.
    in_gap = gap[cid]
    total = np.zeros((n_comp + 1, max_c))  # float even when no pixel is in the gap
    for k in range(max_c):
        part = by_slots[:n_at[k]]
        g = in_gap[part]
        s_k = score[off[k]:off[k + 1]][g]
        total[:, k] = np.bincount(cid[part[g]], weights=np.where(np.isfinite(s_k), s_k, -1e3),
                                  minlength=n_comp + 1)
    total[cand < 0] = -np.inf
    lut[gap] = cand[gap, np.argmax(total[gap], axis=1)] + 1
    labels = np.zeros(comps.shape, np.int32)
    flat = labels.ravel()  # a view: writes through it label the page
    flat[ink] = lut[ink_comp]

    several = n_reached >= 2
    split = several[cid]
    if split_nearest != "never":  # the nearest of the reached lines: the cut midway between them
        nearest = several.copy()
        if split_nearest in ("locked", "given"):
            # Lines put at their rows' centres: by the user (locked) or by a file (anchored,
            # which EM moves only within their rows).
            given = lines.locked | lines.anchored if split_nearest == "given" else lines.locked
            nearest &= np.all(~reached | given[np.maximum(cand, 0)], axis=1)
    split_at = np.flatnonzero(split)
    for lo in range(0, len(split_at), _PIXEL_BLOCK):  # touching strokes of several lines:
        at = split_at[lo:lo + _PIXEL_BLOCK]  # each pixel to its likeliest line
        comp_of = cid[at]
        best = best_reached(reached, comp_of, lambda pt, slot, b, at=at: score[off[slot] + rank[at[b][pt]]],
                            largest=True)
        if split_nearest != "never":
            rows = np.flatnonzero(nearest[comp_of])
            if len(rows):
                pix_r, comp_r = at[rows], comp_of[rows]
                best[rows] = best_reached(
                    reached, comp_r, lambda pt, slot, b, p=pix_r, c=comp_r: _distance(xy[p[b][pt]], lines,
                                                                                      cand[c[b][pt], slot], forms),
                    largest=False)
        flat[pix[at]] = (cand[comp_of, best] + 1).astype(np.int32)

    one_of_several = (one & multi)[cid]
    if one_of_several.any():  # reaches one core: only pixels beyond its outer band may leave
        at = np.flatnonzero(one_of_several)
        own_k = np.argmax(reached[cid[at]], axis=1)
        n_at_pixel, rank_at = n_cand[at], rank[at]
        own = score[off[own_k] + rank_at]

        def other_slot(k: int) -> np.ndarray:
            """Slot k's scores of these pixels; -inf where it is their own or none."""
            has_k = (n_at_pixel > k) & (own_k != k)
            s_k = np.full(len(at), -np.inf, np.float32)
            s_k[has_k] = score[off[k] + rank_at[has_k]]
            return s_k

        # The likeliest of its other slots, the first on ties (as argmax over the slots).
        best, top = first_argmax((other_slot(k) for k in range(max_c)), len(at))
        move = outside[off[own_k] + rank_at] & (top > own)
        at = at[move]
        flat[pix[at]] = (cand[cid[at], best[move]] + 1).astype(np.int32)

    placed = ~gap[sc] & (sc > 0)
    if in_gap.any() and placed.any():
        pts = prep.samples[placed]
        py = np.clip(np.rint(pts[:, 1]).astype(np.int64), 0, comps.shape[0] - 1)
        px = np.clip(np.rint(pts[:, 0]).astype(np.int64), 0, comps.shape[1] - 1)
        pts_line = labels[py, px].astype(np.int64)
        _, nearest = cKDTree(pts).query(xy[in_gap], k=1, workers=2)
        # Majority vote of the component's pixels; ties go to the smaller line index.
        comp_of, line_of = majority(cid[in_gap], pts_line[nearest], len(lines) + 1)
        lut[comp_of] = line_of
        flat[pix[in_gap]] = lut[cid[in_gap]]
    boxes = prep.component_boxes
    if boxes is not None and len(boxes) == n_comp:
        # Pixels of a component whose box lies in its line's outer band cannot leave it.
        inside = _boxes_within_bands(boxes, lut, lines, forms, (z_out_lo, z_out_hi))
        now = flat[ink]
        at = ink[(now != 0) & ~(inside[ink_comp] & (now == lut[ink_comp]))]
    else:
        at = None
    _yield_to_cores(flat, comps.shape[1], lines, forms, (z_lo, z_hi), (z_out_lo, z_out_hi), at)
    return labels


#: Pixels per block of stage 8's passes over pixels (each one's operations are the same whatever
#: the block: the blocks bound the temporaries, a few dozen bytes a pixel, to about 20 MB).
_PIXEL_BLOCK = 1 << 18

#: (point, slot) entries per block of :func:`best_reached`.
_PAIR_BLOCK = 1 << 20


def best_reached(reached: np.ndarray, comp: np.ndarray,
                 value: Callable[[np.ndarray, np.ndarray, slice], np.ndarray], largest: bool) -> np.ndarray:
    """For points of components ``comp`` ``(n,)``, the first candidate slot ``(n,)`` among
    their component's reached ones (``reached`` ``(n_comp + 1, C)``, at least one a row) of
    the largest (``largest``) or smallest value, as ``argmax`` / ``argmin`` over the reached
    slots with the others at -inf / +inf gives (NaN first, as there). ``value(pt, slot, block)``:
    the values of the pairs of points ``block`` (a slice of ``comp``) at ``pt`` (indices into
    the block) and slots ``slot``. Only the pairs of reached slots are looked at, in blocks of
    points: a locked file's pieces give a word's pixels up to 28 slots (cremma20 10_c71ca),
    two to four of them reached, and a dense (pixels x slots) copy took 0.2 GB each."""
    out = np.empty(len(comp), np.intp)
    step = max(1, _PAIR_BLOCK // max(reached.shape[1], 1))
    for start in range(0, len(comp), step):
        block = slice(start, start + step)
        pt, slot = np.nonzero(reached[comp[block]])  # row-major: each point's slots in ascending order
        v = np.asarray(value(pt, slot, block), np.float64)
        if largest:
            v = -v  # the first largest is the first smallest of the negated values
        v[np.isnan(v)] = -np.inf  # argmin and argmax take a NaN first; no value is -inf
        starts = np.flatnonzero(np.r_[True, pt[1:] != pt[:-1]])
        low = np.repeat(np.minimum.reduceat(v, starts), np.diff(np.r_[starts, len(v)]))
        hit = np.flatnonzero(v == low)
        out[block] = slot[hit[np.r_[True, pt[hit[1:]] != pt[hit[:-1]]]]]
    return out


def _boxes_within_bands(boxes: np.ndarray, lut: np.ndarray, lines: LineSet, forms: np.ndarray,
                        outer: tuple[float, float]) -> np.ndarray:
    """Which components ``(C + 1,)`` have their whole box (``boxes`` ``(C, 5)``: x0, y0,
    x1, y1 exclusive, area) within the outer band of line ``lut[c] - 1`` (0: none) and
    within its ends: the across and along distances are linear in a pixel's position, so
    the box's corner pixels bound those of every pixel in it. A margin of 1e-6 keeps the
    test exact against each pixel's own rounding."""
    out = np.zeros(len(boxes) + 1, bool)
    line = lut[1:].astype(np.int64) - 1
    has = line >= 0
    if not has.any():
        return out
    k = line[has]
    b = boxes[has].astype(np.float64)
    xs = np.stack([b[:, 0], b[:, 2] - 1, b[:, 0], b[:, 2] - 1], axis=1)  # (n, 4) corner pixels
    ys = np.stack([b[:, 1], b[:, 1], b[:, 3] - 1, b[:, 3] - 1], axis=1)
    f = forms[:, k]
    z = (f[0][:, None] * xs + f[1][:, None] * ys + f[2][:, None]) / lines.sigma_t[k][:, None]
    along = np.abs(f[3][:, None] * xs + f[4][:, None] * ys + f[5][:, None])
    eps = 1e-6
    ok = ((z >= outer[0] + eps) & (z <= outer[1] - eps)
          & (along <= 2.0 * lines.sigma_s[k][:, None] - eps)).all(axis=1)
    out[1:][has] = ok
    return out


def _yield_to_cores(flat: np.ndarray, width: int, lines: LineSet, forms: np.ndarray,
                    core: tuple[float, float], outer: tuple[float, float],
                    at: np.ndarray | None = None) -> None:
    """Relabel in place the pixels of ``flat`` (a raveled label map ``width`` wide) that lie
    beyond their line's outer band or past its ends, where that line has next to no ink, and
    in the core of their nearest line: they go to it. A component placed whole (a stamp or a
    frame on its own line, an ascender of a word whose samples all agree) can still reach
    into another line's body, and a polygon there counts those pixels to that line (poilus
    AN_0232-0). The rule for split components above moves such pixels only between a
    component's own candidate lines. ``at``: the flat indices of the labelled pixels that
    may lie outside their band (all labelled pixels when None)."""
    if at is None:
        at = np.flatnonzero(flat)
    if len(at) == 0 or len(lines) < 2:
        return
    for lo in range(0, len(at), _PIXEL_BLOCK):  # each pixel on its own: blocks bound the temporaries
        _yield_block(flat, at[lo:lo + _PIXEL_BLOCK], width, lines, forms, core, outer)


def _yield_block(flat: np.ndarray, at: np.ndarray, width: int, lines: LineSet, forms: np.ndarray,
                 core: tuple[float, float], outer: tuple[float, float]) -> None:
    """:func:`_yield_to_cores` on the pixels ``at`` (flat indices, labelled)."""
    own = flat[at].astype(np.int64) - 1
    ys, xs = np.divmod(at, width)
    xy = np.stack([xs, ys], axis=1).astype(np.float64)
    d_t, beyond = _signed_distance(xy, lines, own, forms)
    z = d_t / lines.sigma_t[own]
    away = (z < outer[0]) | (z > outer[1]) | (beyond > 0)
    if not away.any():
        return
    at, own, xy = at[away], own[away], xy[away]
    near = nearest_line(xy, lines)
    d_t, beyond = _signed_distance(xy, lines, near, forms)
    z = d_t / lines.sigma_t[near]
    move = (near != own) & (z >= core[0]) & (z <= core[1]) & (beyond == 0)
    flat[at[move]] = (near[move] + 1).astype(flat.dtype)


def _distance(xy: np.ndarray, lines: LineSet, idx: np.ndarray, forms: np.ndarray | None = None
              ) -> np.ndarray:
    """Distance of points ``(n, 2)`` to line ``idx[i]`` each: across, plus beyond its ends
    (``forms``: see :func:`_signed_distance`)."""
    d_t, beyond = _signed_distance(xy, lines, idx, forms)
    return np.hypot(d_t, beyond)


def nearest_line(xy: np.ndarray, lines: LineSet) -> np.ndarray:
    """Index of the nearest line (across distance plus distance beyond its ends) ``(n,)``."""
    best = np.full(len(xy), np.inf)
    arg = np.zeros(len(xy), np.int64)
    forms = _line_forms(lines)
    for k in range(len(lines)):  # lines, not pixels: a few dozen vectorised passes
        d = _distance(xy, lines, np.full(len(xy), k), forms)
        better = d < best
        best[better], arg[better] = d[better], k
    return arg


def paper_labels(components: np.ndarray, samples: np.ndarray, sample_component: np.ndarray,
                 sample_region: np.ndarray, lines: LineSet, sample_labels: np.ndarray) -> np.ndarray:
    """Pixel label map int32 ``(H, W)`` by the paper's rule (section 4.2; 0 = background,
    k = line k-1): a component whose labelled samples all choose one line goes to it whole;
    one whose samples disagree has each pixel go to the nearest (across distance, plus
    distance beyond the ends) of the lines its samples chose; a component without a labelled
    sample goes to the nearest line of the region of the sample closest to its centroid.
    ``components`` (H, W) int component ids (0 = background), ``samples (N, 2)`` x, y pixels."""
    n_comp = int(components.max()) if components.size else 0
    if len(lines) == 0 or n_comp == 0:
        return np.zeros(components.shape, np.int32)
    n_labels, cand = component_candidates(sample_component, sample_labels, n_comp)
    max_c = cand.shape[1]
    lut = np.zeros(n_comp + 1, np.int32)
    lut[n_labels == 1] = cand[n_labels == 1, 0] + 1
    ink = np.flatnonzero(components.ravel() > 0)
    ink_comp = components.ravel()[ink]
    ys, xs = np.divmod(ink, components.shape[1])
    xy = np.stack([xs, ys], axis=1).astype(np.float64)
    orphan = n_labels == 0
    orphan[0] = False
    if orphan.any() and len(samples):
        count = np.bincount(ink_comp, minlength=n_comp + 1).astype(np.float64)
        centre = np.stack([np.bincount(ink_comp, weights=xy[:, k], minlength=n_comp + 1)
                           for k in range(2)], axis=1) / np.maximum(count, 1.0)[:, None]
        ids = np.flatnonzero(orphan)
        _, near = cKDTree(samples).query(centre[ids], k=1)
        region = sample_region[near]
        for r in np.unique(region):  # regions: a few
            own = np.flatnonzero(lines.region == r)
            at = ids[region == r]
            if len(own):
                lut[at] = own[nearest_line(centre[at], lines.take(own))] + 1
            else:
                lut[at] = nearest_line(centre[at], lines) + 1
    labels = lut[components]
    split = (n_labels > 1)[ink_comp]
    if split.any():  # each pixel to the nearest of the lines its component's samples chose
        cid = ink_comp[split]
        forms = _line_forms(lines)
        dist = np.full((len(cid), max_c), np.inf)
        for k in range(max_c):  # a few candidate slots, each vectorised over pixels
            line = cand[cid, k]
            valid = line >= 0
            dist[valid, k] = _distance(xy[split][valid], lines, line[valid], forms)
        best = cand[cid, np.argmin(dist, axis=1)]
        labels.ravel()[ink[split]] = (best + 1).astype(np.int32)
    return labels.astype(np.int32)


def ink_extents(samples: np.ndarray, sample_labels: np.ndarray, lines: LineSet) -> LineSet:
    """``lines`` with each one's extent along the text set to its own samples': ``c`` and
    ``sigma_s`` such that ``c +- 2 sigma_s`` are its first and last samples along it
    (``samples (N, 2)`` page pixels, ``sample_labels (N,)`` their lines, -1: none). The lines
    a file or the user gave (locked, anchored, or of a file's chain: ``chain >= 0``) and
    lines without samples keep theirs."""
    n = len(lines)
    has = (sample_labels >= 0) & (sample_labels < n)
    k = sample_labels[has].astype(np.int64)
    if len(k) == 0:
        return lines
    f = _line_forms(lines)
    xy = samples[has].astype(np.float64)
    s = f[3][k] * xy[:, 0] + f[4][k] * xy[:, 1] + f[5][k]  # along each line, from its centre c
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    np.minimum.at(lo, k, s)
    np.maximum.at(hi, k, s)
    own = np.isfinite(lo) & ~lines.locked & ~lines.anchored & (lines.chain < 0)
    c, sigma_s = lines.c.copy(), lines.sigma_s.copy()
    c[own] += (lo[own] + hi[own]) / 2.0
    sigma_s[own] = np.maximum((hi[own] - lo[own]) / 4.0, 1e-3)  # the ends are c +- 2 sigma_s
    return dataclasses.replace(lines, c=c, sigma_s=sigma_s)


def finish(prep: Preparation, snapshot: Snapshot, params: Parameters) -> Segmentation:
    """Stage 8 on the state of ``snapshot``: returns the pixel labels and the final lines."""
    merges: list = []
    final, sample_labels = consolidate_lines(prep, snapshot, params, split=True, record=merges)
    # final_labels gives an all-background map when no line survived.
    if params.final_labelling == "paper":
        labels = paper_labels(prep.components, prep.samples, prep.sample_component, prep.sample_region,
                              final, sample_labels)
    else:
        labels = final_labels(prep, final, sample_labels, split_nearest=params.split_nearest)
    if params.label_non_text and len(final):
        if prep.specks is not None and prep.specks.shape == labels.shape:
            owners = prep.speck_owners
            if owners is None or np.count_nonzero(labels) != np.count_nonzero(prep.ink):
                # Not found in advance, or some ink has no line (then the nearest ink need
                # not be labelled): search among the labelled pixels now.
                owners = speck_owners(labels > 0, specks_to_label(prep.specks, prep.faint),
                                      SPECK_REACH * prep.stats.h_cc)
            label_specks(labels, prep.specks, SPECK_REACH * prep.stats.h_cc, owners)
        if prep.non_text is not None or prep.faint is not None:
            label_non_text(labels, prep, final, sample_labels, params.merge_gap)
    paths: dict = {}
    if (final.chain >= 0).any():
        labels, final, sample_labels, merges, paths = join_chains(prep, labels, final, sample_labels, merges)
    if params.extent_from_ink and len(final):
        final = ink_extents(prep.samples, sample_labels, final)
    return Segmentation(labels=labels, lines=final, sample_labels=sample_labels, regions=prep.regions,
                        merges=tuple(merges), paths=paths)


def join_chains(prep: Preparation, labels: np.ndarray, lines: LineSet, sample_labels: np.ndarray,
                merges: list) -> tuple[np.ndarray, LineSet, np.ndarray, list, dict]:
    """The final lines that are pieces of one curved line a file gave (same
    :attr:`LineSet.chain` >= 0) made one line: one label (the first piece's place in the
    order), one row, the straight line through the pieces' ends (the principal axis of
    their end points weighted by length, as the window merges two lines) in the region of
    the longest piece, with their length-weighted sigma_t and summed prior; locked when a
    piece is. ``labels`` ``(H, W)`` 1-based, ``sample_labels`` ``(N,)`` 0-based and the
    merges' line indices are renumbered to match. Also returns each joined line's path (new
    0-based index -> page points ``(P + 1, 2)``: the first piece's start, the middle of each
    two neighbouring pieces' facing ends, the last piece's end), for the exports' baselines."""
    from . import edits  # edits -> initial_lines; postprocess is imported by pipeline first

    n = len(lines)
    target = np.arange(n)
    for ch in np.unique(lines.chain[lines.chain >= 0]):
        pieces = np.flatnonzero(lines.chain == ch)
        target[pieces] = pieces[0]
    if (target == np.arange(n)).all():
        return labels, lines, sample_labels, merges, {}
    heads = np.flatnonzero(target == np.arange(n))
    new_index = np.full(n, -1, np.int64)
    new_index[heads] = np.arange(len(heads))
    new_of_old = new_index[target]
    rows = []
    paths: dict[int, np.ndarray] = {}
    segs = lines.segments()
    for h in heads:
        pieces = np.flatnonzero(target == h)
        if len(pieces) == 1:
            rows.append(lines.take([h]))
            continue
        length = np.hypot(*(segs[pieces, 1] - segs[pieces, 0]).T)
        w = np.maximum(length, 1e-9)
        seg, axis = edits.principal_segment(segs[pieces])
        first, last = segs[pieces[0]].mean(axis=0), segs[pieces[-1]].mean(axis=0)
        if np.dot(axis, last - first) < 0:  # run from the first piece to the last
            seg, axis = seg[::-1], -axis
        ends = segs[pieces].copy()  # each piece's ends, turned to run along the axis, in order
        flip = ((ends[:, 1] - ends[:, 0]) @ axis) < 0
        ends[flip] = ends[flip][:, ::-1]
        ends = ends[np.argsort(ends.mean(axis=1) @ axis)]
        paths[int(new_index[h])] = np.vstack([ends[0, 0], (ends[:-1, 1] + ends[1:, 0]) / 2.0, ends[-1, 1]])
        longest = int(pieces[np.argmax(length)])
        phi = float(lines.phi[longest])
        a, b, c, extent = edits.segment_geometry(seg, phi, lines.rotation_invariant)
        locked = bool(lines.locked[pieces].any())
        rows.append(LineSet(np.array([a]), np.array([b]), np.array([c]),
                            np.array([np.average(lines.sigma_t[pieces], weights=w)]),
                            np.array([edits.given_sigma_s(prep, extent)]), np.array([lines.prior[pieces].sum()]),
                            np.array([lines.region[longest]], np.int32), np.array([phi]),
                            lines.rotation_invariant, np.array([locked]),
                            np.array([bool(lines.anchored[pieces].any()) and not locked]),
                            np.array([lines.chain[h]], np.int32)))
    joined = concat_lines(rows, lines.rotation_invariant)
    lut = np.concatenate([[0], new_of_old + 1]).astype(labels.dtype)
    labels = lut[labels]
    sample_labels = np.where(sample_labels >= 0, new_of_old[np.maximum(sample_labels, 0)], -1)
    merges = [dataclasses.replace(m, line=int(new_of_old[m.line]) if m.line >= 0 else -1) for m in merges]
    return labels, joined, sample_labels, merges, paths


def grow_labels(labels: np.ndarray, into: np.ndarray, steps: int) -> None:
    """Grow the labels ``(H, W)`` in place, one pixel (8-neighbourhood) a step for ``steps``
    steps, into unlabelled pixels of the bool mask ``into``; where two labels meet, the
    larger wins."""
    top = labels.max()
    if not into.any() or top <= 0:
        return
    # The narrowest type that holds every label (OpenCV dilates 8- and 16-bit integers, and
    # floats, which hold integers exactly up to 2^24).
    kind = np.uint8 if top < 2**8 else np.uint16 if top < 2**16 else np.float32
    empty = into & (labels == 0)  # the pixels still to fill
    for _ in range(steps):
        grown = cv2.dilate(labels.astype(kind), np.ones((3, 3), np.uint8))
        fill = grown > 0
        fill &= empty
        if not fill.any():
            break
        np.copyto(labels, grown, where=fill, casting="unsafe")
        np.greater(empty, fill, out=empty)  # empty & ~fill


def label_non_text(labels: np.ndarray, prep: Preparation, lines: LineSet,
                   sample_labels: np.ndarray | None = None, beyond: float = NON_TEXT_BEYOND) -> None:
    """Give the non-text and faint pixels on the page (``prep.non_text``, ``prep.faint``)
    that lie on a line's row to that line, in place in ``labels`` ``(H, W)``: each to the
    nearest of the lines that hold it within their band of ink across them (:func:`ink_bands`;
    ``sample_labels`` ``(N,)``, the samples' lines, widen it to the line's own samples) and
    within ``beyond`` x W_cc past their ends. (The nearest line alone is not enough: a word
    stripped at the start of a row lies beyond its line's end, and the lines above and below,
    whose extents cover it, are nearer but hold it outside their bands; poilus AN_0292-0
    "tient", AN_0232-0.)

    Non-text ink was kept out of sampling so that rules, frames and flourishes would not
    make lines of their own or join rows; but words written over a rule or touching a frame
    or a flourish left with it, and those pixels are the line's writing (the surround
    outside the page area is never labelled)."""
    masks = [m for m in (prep.non_text, prep.faint) if m is not None and m.shape == labels.shape]
    if not masks:
        return
    if prep.faint is not None and prep.faint.shape == labels.shape:
        # A faint pixel touching a labelled stroke is that stroke's rim: it takes the
        # stroke's line (the line nearest across might be the next row's, at a descender).
        grow_labels(labels, prep.faint, RIM_REACH)
    pix = nonzero_index(masks[0] | masks[1] if len(masks) == 2 else masks[0])
    if prep.page_area is not None:
        pix = pix[prep.page_area.ravel()[pix]]
    if len(pix) == 0:
        return
    flat = labels.ravel()
    pix = pix[flat[pix] == 0]
    ys, xs = np.divmod(pix, labels.shape[1])
    xy = np.stack([xs, ys], axis=1).astype(np.float64)
    lo, hi = ink_bands(prep, lines, sample_labels)
    reach = beyond * prep.stats.w_cc
    best = np.full(len(xy), np.inf)
    idx = np.full(len(xy), -1, np.int64)
    forms = _line_forms(lines)
    # Each line's rows of pixels: its band (lo..hi across, within reach of its ends) is a
    # parallelogram on the page, and the pixels (in raster order) of the rows its box spans
    # are one slice; a pixel outside the box is outside the band.
    rows = _band_rows(lines, forms, lo, hi, reach)
    row_start = np.searchsorted(ys, np.arange(labels.shape[0] + 1))
    for k in range(len(lines)):  # lines, not pixels: a few dozen vectorised passes
        y0, y1 = max(int(rows[k, 0]), 0), min(int(rows[k, 1]), labels.shape[0] - 1)
        if y1 < y0:
            continue
        part = slice(row_start[y0], row_start[y1 + 1])
        sub = xy[part]
        d_t, past = _signed_distance(sub, lines, np.full(len(sub), k), forms)
        ok = (d_t >= lo[k]) & (d_t <= hi[k]) & (past <= reach)
        d = np.where(ok, np.hypot(d_t, past), np.inf)
        better = d < best[part]
        at = np.flatnonzero(better) + part.start
        best[at], idx[at] = d[better], k
    near = idx >= 0
    flat[pix[near]] = (idx[near] + 1).astype(np.int32)


def _band_rows(lines: LineSet, forms: np.ndarray, lo: np.ndarray, hi: np.ndarray, reach: float
               ) -> np.ndarray:
    """First and last page row ``(L, 2)`` (int; last < first: none) of each line's band:
    signed across distance in ``lo[k]..hi[k]`` and at most ``reach`` beyond its ends (pixels),
    widened by two pixels against rounding. ``forms``: :func:`_line_forms` of ``lines``."""
    extent = 2.0 * lines.sigma_s + reach
    det = forms[0] * forms[4] - forms[1] * forms[3]
    ok = np.isfinite(det) & (np.abs(det) > 1e-12) & np.isfinite(lo) & np.isfinite(hi) & np.isfinite(extent)
    out = np.zeros((len(lines), 2), np.int64)
    out[:, 1] = np.iinfo(np.int32).max  # every row where the band cannot be bounded
    if not ok.any():
        return out
    ys = []
    for d in (lo, hi):
        for a in (-extent, extent):
            # Solve f0 x + f1 y = d - f2 and f3 x + f4 y = a - f5 for y (Cramer's rule).
            ys.append((forms[0] * (a - forms[5]) - forms[3] * (d - forms[2])) / np.where(ok, det, 1.0))
    ys = np.array(ys)
    out[ok, 0] = np.floor(ys.min(axis=0)[ok]) - 2
    out[ok, 1] = np.ceil(ys.max(axis=0)[ok]) + 2
    return out


#: How far (in H_cc) from the nearest labelled ink a speck may lie and still take its line
#: (a dot above its letter lies within a text height of it). ahte-train one-to-one matches
#: at 0.5 / 1 / 2 H_cc: 325 / 326 / 326 (319 with specks unlabelled); moc-train, cremma20,
#: kraken-sample and poilus-dev the same at each.
SPECK_REACH = 1.0


def label_specks(labels: np.ndarray, specks: np.ndarray, reach: float,
                 owners: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """Give each unlabelled pixel of ``specks`` (bool ``(H, W)``) within ``reach`` pixels of
    labelled ink the line of the nearest labelled pixel, in place in ``labels`` ``(H, W)``.

    Specks are components too small to sample: pieces of a stroke the binarisation broke
    off, small dots, noise. The ground truth counts the first two to the line of the stroke or
    letter they belong to, which is the ink nearest them. ``owners``: :func:`speck_owners`
    of the labelled pixels and these specks when known (it needs no labels)."""
    if owners is None:
        if reach <= 0 or labels.max() <= 0:
            return
        owners = speck_owners(labels > 0, specks & (labels == 0), reach)
    target, source = owners
    flat = labels.ravel()
    flat[target] = flat[source]


def specks_to_label(specks: np.ndarray, faint: np.ndarray | None) -> np.ndarray:
    """The speck pixels :func:`label_specks` labels, bool ``(H, W)``: those of ``specks``
    not also ``faint`` (specks as dark as the page's ink at large are faint pixels too, and
    ``label_non_text`` labels them with the others)."""
    return specks if faint is None else specks & ~faint


def speck_owners(ink: np.ndarray, specks: np.ndarray, reach: float) -> tuple[np.ndarray, np.ndarray]:
    """The pixels of ``specks`` (bool ``(H, W)``) less than ``reach`` pixels from a pixel of
    ``ink`` (bool ``(H, W)``) and, for each, the nearest such ink pixel: two flat index
    arrays ``(n,)`` (pixels of both masks must not overlap). Euclidean distance; of pixels
    equally near, the one the k-d tree meets first."""
    none = np.zeros(0, np.int64)
    target = nonzero_index(specks)
    if reach <= 0 or len(target) == 0:
        return none, none
    r = int(np.ceil(reach))
    height, width = ink.shape
    ty, tx = np.divmod(target, width)
    # Everything below happens in the box of the specks' reach (plus the erosion's pixel):
    # the page around it cannot hold a candidate.
    y0, y1 = max(int(ty.min()) - r - 1, 0), min(int(ty.max()) + r + 2, height)
    x0, x1 = max(int(tx.min()) - r - 1, 0), min(int(tx.max()) + r + 2, width)
    todo = np.zeros((y1 - y0, x1 - x0), np.uint8)
    todo[ty - y0, tx - x0] = 1
    # Only the ink within reach of a speck is a candidate: a dilation of the specks picks it
    # without measuring the distance of every page pixel.
    zone = cv2.dilate(todo, cv2.getStructuringElement(cv2.MORPH_RECT, (2 * r + 1,) * 2))
    # The ink pixel nearest a point outside the ink lies on its edge (a pixel with an 8-
    # neighbour off the ink): only those are candidates, half of the ink or less. (The box's
    # border lies a pixel beyond the zone, or is the page's own, where the erosion counts the
    # outside as ink in both.)
    near_ink = np.ascontiguousarray(ink[y0:y1, x0:x1]).view(np.uint8)
    edge = (zone > 0) & (near_ink > 0) & (cv2.erode(near_ink, np.ones((3, 3), np.uint8)) == 0)
    sy, sx = np.nonzero(edge)
    if len(sy) == 0:
        return none, none
    src_xy = np.stack([sy + y0, sx + x0], axis=1)
    dst_xy = np.stack([ty, tx], axis=1)
    dist, nearest = cKDTree(src_xy).query(dst_xy, k=1, distance_upper_bound=reach, workers=2)
    ok = np.isfinite(dist)
    return target[ok], src_xy[nearest[ok], 0] * width + src_xy[nearest[ok], 1]


#: Percentiles of a line's samples across it that bound its own band of ink (see ink_bands).
#: poilus-dev FM: 0.5..99.5, 1..99 and 2.5..97.5 all 59.8 %, 5..95 59.4 % (57.8 % with
#: +-NON_TEXT_REACH only); the other sets unchanged by each.
BAND_QUANTILES = (1.0, 99.0)
#: Fewest samples of a line for its own band to be estimated.
BAND_MIN_SAMPLES = 20


def ink_bands(prep: Preparation, lines: LineSet, sample_labels: np.ndarray | None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Signed distances across each line ``(L,)`` lo, hi (pixels) within which its row's ink
    lies: at least ``NON_TEXT_REACH`` x H_cc either side, widened to the 1st..99th percentile
    of its own samples' distances. A hand with long descenders (or a line's fit leaning off its
    row at one end) puts writing further than H_cc from the fitted line on one side: on poilus
    AN_0232-0, the word ends touching the cloud at the right of the rows lay 1.1-2.0 H_cc from
    their line, inside its own samples' band (-0.9..1.1 H_cc at the median line)."""
    reach = NON_TEXT_REACH * prep.stats.h_cc
    lo = np.full(len(lines), -reach)
    hi = np.full(len(lines), reach)
    if sample_labels is None or len(sample_labels) != len(prep.samples):
        return lo, hi
    has = sample_labels >= 0
    lab = sample_labels[has]
    d_t, _ = _signed_distance(prep.samples[has], lines, lab)
    order = np.argsort(lab, kind="stable")
    lab, d_t = lab[order], d_t[order]
    starts = np.searchsorted(lab, np.arange(len(lines) + 1))
    for k in range(len(lines)):  # a few dozen lines
        part = d_t[starts[k]:starts[k + 1]]
        if len(part) >= BAND_MIN_SAMPLES:
            q_lo, q_hi = np.percentile(part, BAND_QUANTILES)
            lo[k], hi[k] = min(lo[k], q_lo), max(hi[k], q_hi)
    return lo, hi


def majority(groups: np.ndarray, values: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray]:
    """The most frequent of ``values`` (ints in ``0..n_values-1``) in each group: the groups
    present (sorted) and their value, ties to the smaller value; both ``(G,)``."""
    code, votes = np.unique(np.asarray(groups, np.int64) * n_values + values, return_counts=True)
    group, value = code // n_values, code % n_values
    order = np.lexsort((value, -votes, group))
    group, value = group[order], value[order]
    first = np.r_[True, group[1:] != group[:-1]]
    return group[first], value[first]


def component_owners(labels: np.ndarray, sample_component: np.ndarray) -> np.ndarray:
    """The line most of each component's samples are on, ``(C + 1,)`` indexed by component
    id (-1: no labelled sample); ties go to the smaller line index."""
    owner = np.full(int(sample_component.max(initial=0)) + 1, -1, np.int64)
    has = labels >= 0
    if has.any():
        comp, line = majority(sample_component[has], labels[has], int(labels.max()) + 1)
        owner[comp] = line
    return owner


def _drop_ownerless_lines(snapshot: Snapshot, keep: np.ndarray, labels: np.ndarray,
                          sample_component: np.ndarray, small: np.ndarray, kept: np.ndarray | None = None
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Drop the kept lines that own no component larger than a diacritic: all their samples
    lie on words, clouds, flourishes or rules most of whose samples are on another line (a
    line EM fitted through the loops of a cloud, the tops of a taller row, the ends of
    strokes under a row). Their samples go to the owner of their component, else (when
    that owner is dropped too) to their next best kept line. ``kept`` ``(L,)``: lines never
    dropped (default: the locked ones). Returns ``(keep, labels)``."""
    owner = component_owners(labels, sample_component)
    has = labels >= 0
    owns = has & ~small & (owner[sample_component] == labels)
    ownerless = keep & (np.bincount(labels[owns], minlength=len(keep)) == 0)
    ownerless &= ~(snapshot.lines.locked if kept is None else kept)  # issue 24: never removed
    if not ownerless.any() or not (keep & ~ownerless).any():
        return keep, labels
    keep = keep & ~ownerless
    moved = has & ownerless[np.maximum(labels, 0)]
    to = owner[sample_component]
    to_owner = moved & (to >= 0) & keep[np.maximum(to, 0)]
    labels = np.where(to_owner, to, np.where(moved, reassign(snapshot, keep), labels))
    return keep, labels


def _keeps_given_spread(lines: LineSet, placed_of: np.ndarray) -> np.ndarray:
    """Per group of stage 8 (``placed_of[g]``: its placed line's row in ``lines``, -1 for
    none): whether that line is locked with a spread measured on its own ink
    (``LineSet.sigma_t_measured``), the spread :func:`_keep_placed` then keeps as given."""
    out = np.zeros(len(placed_of), bool)
    placed = placed_of >= 0
    out[placed] = lines.locked[placed_of[placed]] & lines.sigma_t_measured[placed_of[placed]]
    return out


def _keep_placed(fit: LineFit, lines: LineSet, placed_of: np.ndarray, moments: np.ndarray, origin: np.ndarray,
                 rot_inv: bool, floor_t: float) -> LineFit:
    """Issue 24: the refit of stage 8 for the groups whose line keeps its place
    (``placed_of[g]``, its row in ``lines``, -1 for the others: a locked line, and with
    ``anchor_place`` an anchored one): the line's place and extent (a, b, c, sigma_s) as EM
    left it; a locked line's spread across as given when it was measured on the line's own
    ink (``LineSet.sigma_t_measured``: a file's label or polygon), else measured about the
    line (kept when it has no sample), for a locked line never narrower than the spread it
    was given (EM weighed it with that one all along); ``moments`` ``(G, 6)`` and
    ``origin``: every group's, as :func:`engine.regression.label_moments` gives.

    The measured spread alone narrowed some locked lines below the spread the file measured
    on their own ink, and the labelling's profile then gave their outer ink away
    (bench/steering.py run (d), the ground truth's lines locked, FM %: ahte-train 89.7 ->
    90.9, moc-train 74.4 -> 74.8, poilus-dev 89.1 -> 89.4 with the floor). The given spread
    alone did better on a file's lines (ahte-train 92.8, moc-train 76.4) but worse where the
    spread given is a guess: lines drawn along the ground truth's rows in the window take
    their neighbours' sigma_t, and poilus AN_0232-0 fell from 19 to 17 of 19 lines, AD78_0018-0
    from 13 to 12 of 15 (below the default run). So the given spread alone holds where it
    was measured, and the floor where it was guessed."""
    g = np.flatnonzero(placed_of >= 0)
    k = placed_of[g]
    a, b, c, st, ss = (np.array(x, dtype=np.float64) for x in fit[:5])
    moments = moments[g]  # the groups' moments (:func:`engine.regression.label_moments`)
    spread = spread_about(moments, origin, lines.a[k], lines.b[k], rot_inv, floor_t)
    a[g], b[g], c[g], ss[g] = lines.a[k], lines.b[k], lines.c[k], lines.sigma_s[k]
    spread = np.where(lines.locked[k], np.maximum(spread, lines.sigma_t[k]), spread)
    spread = np.where(_keeps_given_spread(lines, placed_of)[g], lines.sigma_t[k], spread)
    st[g] = np.where(moments[:, 0] >= 1.0, spread, lines.sigma_t[k])
    return LineFit(a, b, c, st, ss, fit.weight)


def _group_chains(sub_chain: np.ndarray, group: np.ndarray, placed_of: np.ndarray, chain: np.ndarray,
                  n_groups: int) -> np.ndarray:
    """The ``chain`` ``(n_groups,)`` of each group of stage 8 (:attr:`LineSet.chain`): its
    placed line's (a locked or anchored line a file gave), else the one all its lines share
    (-1 when they differ, and for the rows :func:`split_rows` split off)."""
    out = np.full(n_groups, -1, np.int32)
    for g in range(min(int(group.max(initial=-1)) + 1, n_groups)):
        mine = np.unique(sub_chain[group == g])
        if len(mine) == 1:
            out[g] = mine[0]
    placed = placed_of >= 0
    out[placed] = chain[placed_of[placed]]
    return out


def consolidate_lines(prep: Preparation, snapshot: Snapshot, params: Parameters, split: bool = False,
                      record: list | None = None) -> tuple[LineSet, np.ndarray]:
    """Stage 8 without the pixel labelling: surplus and diacritic lines removed, fragments
    merged, with ``split`` rows of writing split off their lines (see split_rows), lines
    refitted to their samples. Returns the lines (ordered by region, then across the text)
    and each sample's line ``(N,)`` (-1 = none).

    After EM (``split``) it also drops lines that own no component (see
    :func:`_drop_ownerless_lines`); before EM a line may own nothing yet and still take its
    row in EM (applied there too, poilus AN_0113-0 fell from 10 to 6 matches, AN_0187-0 from
    5 to 3).

    The clean-up of the initial lines before EM does not split: on the initial lines (fitted
    to the filter bank's blobs) it gave EM extra lines to start from, and on AHTE moc_train_2
    EM ended with 6 more lines and 5 fewer matched (the same page split after EM: no change).

    After EM (``split``) with ``row_merge``, lines of different regions that continue each
    other along a row merge too (:mod:`engine.row_merge`). ``record``: a list that receives
    every merge of fragments as a :class:`engine.row_merge.FragmentMerge`."""
    lines = snapshot.lines
    if len(lines) == 0 or len(prep.samples) == 0:
        return LineSet.empty(lines.rotation_invariant), np.full(len(prep.samples), -1, np.int64)
    # Issue 24: a locked line is never removed (surplus, diacritic or ownerless), nor with
    # anchor_keep one a file gave.
    kept = given_lines(lines, params)
    keep = surviving_lines(snapshot, params.epsilon) | kept
    labels = reassign(snapshot, keep)
    # Lines living on diacritics and noise: give their samples to their next best line.
    small = prep.small_samples()
    has = labels >= 0
    n_all = np.bincount(labels[has], minlength=len(lines))
    n_small = np.bincount(labels[has & small], minlength=len(lines))
    residual = n_small > params.diacritic_fraction * np.maximum(n_all, 1)
    residual &= ~kept
    if params.remove_diacritic_lines and residual.any() and (keep & ~residual).any():
        keep &= ~residual
        labels = reassign(snapshot, keep)
    if split and params.remove_ownerless_lines:
        keep, labels = _drop_ownerless_lines(snapshot, keep, labels, prep.sample_component, small, kept)
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
        lab_before = lab
        sub = lines.take(own)
        group = np.arange(len(own))
        joined: list = []
        if params.merge_fragments:
            root = merge_pairs(sub, uv, lab, prep.stats.h_cc, prep.stats.w_cc, params, joined)
            _, group = np.unique(root, return_inverse=True)
            lab = np.where(lab >= 0, group[np.maximum(lab, 0)], -1)
        n_groups = int(group.max()) + 1
        # Issue 24: the groups that are a locked line (it merges with none: a group alone).
        fixed = np.zeros(n_groups, bool)
        fixed[group[sub.locked]] = True
        # A group with a line another tool's file gave (issue 24) stays anchored.
        given = np.zeros(n_groups, bool)
        given[group[sub.anchored & ~sub.locked]] = True
        # The line (its row in ``lines``, -1: none) whose place (a, b, c, sigma_s) and
        # components (follow_local_rows) a group keeps: its locked line and, with anchor_place,
        # its anchored one (a group holds at most one given line; a locked one wins).
        placed_of = np.full(n_groups, -1, np.int64)
        if params.anchor_place:
            anchored = sub.anchored & ~sub.locked
            placed_of[group[anchored]] = own[anchored]
        placed_of[group[sub.locked]] = own[sub.locked]
        if split:
            lab, n_groups = split_rows(uv, prep.sample_component[members], small[members], lab, n_groups,
                                       prep.stats.h_cc, prep.stats.w_cc, params, fixed)
            fixed = np.r_[fixed, np.zeros(n_groups - len(fixed), bool)]
            placed_of = np.r_[placed_of, np.full(n_groups - len(placed_of), -1, np.int64)]
            given = np.r_[given, np.zeros(n_groups - len(given), bool)]
            if params.follow_local_rows:
                placed = placed_of >= 0
                fixed_ab = np.full((n_groups, 2), np.nan)
                fixed_ab[placed] = np.stack([lines.a[placed_of[placed]], lines.b[placed_of[placed]]], axis=1)
                lab = follow_local_rows(uv, prep.sample_component[members], small[members], lab, n_groups,
                                        prep.stats.h_cc, prep.stats.w_cc, fixed_ab, strict=fixed)
        moments, origin = label_moments(uv, lab, n_groups)
        fit = fit_from_moments(moments, origin, rot_inv, floor_t, floor_s)
        if (placed_of >= 0).any():
            fit = _keep_placed(fit, lines, placed_of, moments, origin, rot_inv, floor_t)
        alive = (np.isfinite(fit.a) & (fit.weight >= 1)) | fixed
        chain = _group_chains(sub.chain, group, placed_of, lines.chain, n_groups)
        remap = np.full(n_groups, -1, np.int64)
        remap[alive] = np.arange(int(alive.sum()))
        prior = fit.weight[alive] / max(fit.weight[alive].sum(), 1e-12)
        # A locked line's spread stays the measured one it was given (_keep_placed).
        measured = _keeps_given_spread(lines, placed_of)
        part = LineSet(fit.a[alive], fit.b[alive], fit.c[alive], fit.sigma_t[alive], fit.sigma_s[alive],
                       prior, np.full(int(alive.sum()), r, np.int32), np.full(int(alive.sum()), region.phi),
                       rot_inv, fixed[alive], given[alive] & ~fixed[alive], chain[alive], measured[alive])
        centre = {r: float(uv[:, 0].mean())}
        order = order_lines(part, centre)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        new_parts.append(part.take(order))
        mapped = np.where(lab >= 0, remap[np.maximum(lab, 0)], -1)
        new_labels[members] = np.where(mapped >= 0, rank[np.maximum(mapped, 0)] + offset, -1)
        if record is not None and joined:
            final = np.where(remap >= 0, rank[np.maximum(remap, 0)] + offset, -1)
            record.extend(_row_merge.within_region(sub, prep.samples[members], lab_before, joined, group,
                                                   final, r))
        offset += len(order)
    final_lines = concat_lines(new_parts, rot_inv)
    if split and params.row_merge > 0 and len(final_lines) > 1:
        root, across = _row_merge.merge_across_regions(prep, final_lines, new_labels, params)
        if across:
            ends = _row_merge.line_ends(final_lines, prep.samples.astype(np.float64), new_labels)
            regions_before = final_lines.region
            final_lines, new_labels, new_of_old = _row_merge.apply_roots(prep, final_lines, new_labels, root,
                                                                         params)
            if record is not None:
                record[:] = [dataclasses.replace(m, line=int(new_of_old[m.line]) if m.line >= 0 else -1)
                             for m in record]
                record.extend(_row_merge.across_regions(regions_before, ends, across, new_of_old))
    return final_lines, new_labels
