"""Stage 7: EM (paper Algorithm 1) as a generator of immutable snapshots.

E-step: learn the pairwise parameters theta_0..2 and the line-probability parameters by
moment matching while passing messages (:mod:`engine.message_passing`); M-step: weighted
regression per line (:mod:`engine.regression`) and line priors ``pi_l = mean_v p_v(l)``
(within the line's region). Stops when the mean KL divergence between successive posteriors
falls under ``kl_tolerance``, when fewer than ``label_tolerance`` of the samples changed their
most probable line, or after ``max_em_iterations``. With ``mp_warm_start`` (default) the
messages, theta_0..2 and theta_l are carried from one EM iteration to the next; without it
every E-step starts as Algorithm 2 prints: theta = 0, m_{v->u} = 1.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from . import message_passing as mp
from .arrays import first_argmax
from .blocks import linked_lines
from .initial_lines import STEEP_SPLIT_ANGLE as FRAME_LINE_ANGLE
from .model import LineSet, Preparation, Snapshot, to_region_frame
from .params import Parameters
from .pitch import sigma_t_cap
from .regression import fit_from_moments, point_features
from .unary import across_offset, interline_space, log_unary_by_line, sample_block


@dataclass
class _Region:
    samples: np.ndarray  # global sample indices (n,)
    uv: np.ndarray  # (n, 2) in the region frame
    lines: np.ndarray  # global line indices (L,), contiguous and ordered across the text
    graph: mp.RegionGraph
    width: int  # label window W (= L without windows)
    offsets: np.ndarray  # (n,) first label of each sample's window
    # Label-major: one row per window position (see message_passing.sweep for why).
    out: np.ndarray  # (W, 2E) float32 log messages, relative to the owner's window
    posterior: np.ndarray  # (W, n) float32
    bias: np.ndarray  # (L,) line-probability parameters theta_l
    power: np.ndarray  # (n,) exponent of p_v
    messages_zero: bool = True  # no sweep yet: moving the (all-zero) messages is a no-op
    theta_edges: np.ndarray | None = None  # edges the theta step reads (None: all)

    def window_labels(self) -> np.ndarray:
        """Region-local label of every window entry ``(W, n)``."""
        return self.offsets[None, :] + np.arange(self.width)[:, None]

    def line_sums(self, values: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Sum over samples of ``posterior x values[:, None]`` per line ``(L,)`` (``weights``
        ``(W, n)``, in the posterior's layout, instead of the posterior)."""
        n_lines = len(self.lines)
        if self.width == 0 or len(self.offsets) == 0:
            return np.zeros(n_lines)
        weights = self.posterior if weights is None else weights
        # Window row j of a sample holds line offset + j: one short bincount per row over the
        # offsets (a bincount over every window entry, with its (W, n) labels, costs 3x more).
        n_offsets = n_lines - self.width + 1
        sums = np.zeros(n_lines)
        for j in range(self.width):
            sums[j:j + n_offsets] += np.bincount(self.offsets, weights=weights[j] * values,
                                                 minlength=n_offsets)
        return sums


# The region graphs of the last preparation seen: merging the initial lines runs EM's first
# step, then EM runs in full, and the GUI re-runs EM many times on one preparation. Keyed by
# the identity of the preparation's arrays, checked through weak references (ids are reused).
_GRAPHS: dict[tuple[int, int, int, int], tuple[weakref.ref, weakref.ref, list]] = {}


def _region_graphs(prep: Preparation, seed: int, edge_sample: int
                   ) -> list[tuple[np.ndarray, mp.RegionGraph, np.ndarray | None]]:
    """Per region: its samples' global indices, its half-edge graph and the edges its theta
    step reads (None: all).

    The theta step matches three moments (fractions of edges joining the same / adjacent /
    farther lines) with means over the edges; a fixed random sample of ``edge_sample`` edges
    (0 = all, Parameters.theta_edge_sample) gives those means to a fraction of a percent (the
    rarest class, ~0.7 % of edges, is seen ~280 times in 40k) at a third of the cost per sweep
    on a page of 140k edges."""
    key = (id(prep.edges), id(prep.sample_region), seed, edge_sample)
    hit = _GRAPHS.get(key)
    if hit is not None and hit[0]() is prep.edges and hit[1]() is prep.sample_region:
        return hit[2]
    result = []
    edge_region = prep.sample_region[prep.edges[:, 0]] if len(prep.edges) else np.zeros(0, np.int32)
    # The same fraction of every region's edges, so that pooling keeps each region's weight.
    fraction = min(1.0, edge_sample / max(len(prep.edges), 1)) if edge_sample > 0 else 1.0
    rng = np.random.default_rng(seed)
    for r in range(len(prep.regions)):
        idx = np.flatnonzero(prep.sample_region == r)
        local = np.full(len(prep.samples), -1, np.int64)
        local[idx] = np.arange(len(idx))
        edges = local[prep.edges[edge_region == r]] if len(prep.edges) else np.zeros((0, 2), np.int64)
        chosen = None
        if fraction < 1.0 and len(edges):
            count = max(1, int(round(fraction * len(edges))))
            chosen = np.sort(rng.choice(len(edges), count, replace=False))
        result.append((idx, mp.build_region_graph(len(idx), edges, seed), chosen))
    _GRAPHS.clear()
    _GRAPHS[key] = (weakref.ref(prep.edges), weakref.ref(prep.sample_region), result)
    return result


def _region_states(prep: Preparation, lines: LineSet, params: Parameters) -> list[_Region]:
    states = []
    for r, (idx, graph, theta_edges) in enumerate(_region_graphs(prep, params.seed, params.theta_edge_sample)):
        own = np.flatnonzero(lines.region == r)
        n_edges = len(graph.pair)
        if params.update_rule == "convex":
            power = (1.0 / (params.c_v + graph.degree)).astype(np.float32)
        else:
            power = np.ones(len(idx), np.float32)
        n_lines = len(own)
        width = n_lines if params.label_window == 0 else min(n_lines, params.label_window)
        states.append(_Region(
            samples=idx, uv=to_region_frame(prep.samples[idx], prep.regions[r].phi), lines=own,
            graph=graph, width=width, offsets=np.zeros(len(idx), np.int64),
            out=np.zeros((width, 2 * n_edges), np.float32),
            posterior=np.full((width, len(idx)), 1.0 / max(width, 1), np.float32),
            bias=np.zeros(n_lines), power=power, theta_edges=theta_edges))
    return states


def _reindex(arr: np.ndarray, delta: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """Columns of ``arr (W, h)`` moved, in place, to windows starting ``delta`` later; new
    entries = fill. Returns ``arr``."""
    w = arr.shape[0]
    cols = np.flatnonzero(delta)
    pos = np.arange(w)[:, None] + delta[cols][None, :]
    inside = (pos >= 0) & (pos < w)
    moved = np.take_along_axis(np.take(arr, cols, axis=1), np.clip(pos, 0, w - 1), axis=0)
    arr[:, cols] = np.where(inside, moved, fill[cols][None, :])
    return arr


def _set_windows(st: _Region, unary: np.ndarray) -> np.ndarray:
    """Centre each sample's window on its best line under ``unary (L, n)``, carrying the
    messages and posteriors over (warm start). Returns the unary in the windows ``(W, n)``."""
    n_lines = unary.shape[0]
    if st.width < n_lines:
        best = argmax_rows(unary)
        new = np.clip(best - st.width // 2, 0, n_lines - st.width)
        delta = new - st.offsets
        if np.any(delta):
            st.posterior = _reindex(st.posterior, delta, np.zeros(len(delta), np.float32))
            if st.out.size and not st.messages_zero:
                owner_delta = delta[st.graph.owner]
                fill = np.zeros(len(owner_delta), np.float32)
                moved = owner_delta != 0
                fill[moved] = np.take(st.out, np.flatnonzero(moved), axis=1).min(axis=0)
                st.out = _reindex(st.out, owner_delta, fill)
            st.offsets = new
        return np.take_along_axis(unary, st.window_labels(), axis=0)
    return unary


def _check_lines(prep: Preparation, lines: LineSet) -> None:
    if len(lines) and (lines.region.min() < 0 or lines.region.max() >= len(prep.regions)):
        raise ValueError("lines refer to a region the preparation does not have")
    if len(lines) and not np.all(np.diff(lines.region) >= 0):
        raise ValueError("lines must be grouped by region (sorted by region, then across the text)")
    for r in np.unique(lines.region):
        if not np.isclose(lines.phi[lines.region == r], prep.regions[r].phi).all():
            raise ValueError(f"lines of region {r} are not in that region's frame")


def _links(st: _Region, sub: LineSet, params: Parameters, h_cc: float, start: bool) -> np.ndarray | None:
    """Which of a region's lines are neighbours (:func:`engine.blocks.linked_lines`) under
    ``params.linked_neighbours``: from each sample's most probable line, or at the ``start``
    (no posterior yet) from its likeliest line under the unary without plateau and prior
    (the plateau itself is what the links bound)."""
    if not params.linked_neighbours or len(sub) == 0 or len(st.samples) == 0:
        return None
    if start:
        u = log_unary_by_line(st.uv, sub, np.zeros(len(sub)), 0.0, form=params.unary_form, prior=False)
        labels = argmax_rows(u)
    else:
        labels = st.offsets + st.posterior.argmax(axis=0)
    ends = st.graph.owner[st.graph.pair]
    return linked_lines(ends, labels, len(sub))


def _unaries(states: list[_Region], lines: LineSet, params: Parameters, h_cc: float,
             start: bool = False) -> list[np.ndarray]:
    result = []
    for st in states:
        sub = lines.take(st.lines)
        space = interline_space(sub, default=2.0 * h_cc, min_gap=0.5 * h_cc,
                                linked=_links(st, sub, params, h_cc, start))
        u = log_unary_by_line(st.uv, sub, space, params.r, form=params.unary_form,
                              prior=params.prior_in_unary)  # (L, n)
        if u.shape[0] and u.shape[1]:
            # Lines far worse than a sample's best carry no information for it; flooring
            # keeps every log message finite.
            np.maximum(u, u.max(axis=0) - np.float32(params.candidate_nats), out=u)
        result.append(u)
    return result


def argmax_rows(u: np.ndarray) -> np.ndarray:
    """``u.argmax(axis=0)`` of a C-ordered ``(L, n)`` array without NaNs (the first row of
    the largest value), a row at a time: NumPy's argmax walks each column across the rows'
    stride, 2-4 times slower on a locked file's hundreds of pieces (:func:`first_argmax`)."""
    return first_argmax(u, u.shape[1])[0]


def _log_likelihood(unaries: list[np.ndarray]) -> float:
    total, count = 0.0, 0
    for u in unaries:
        if u.shape[1] and u.shape[0]:
            # In blocks of samples that stay in the cache; each sample's sum runs over its
            # lines in the same order as over the whole array, so the value is the same.
            step = sample_block(u.shape[0])
            per_sample = np.empty(u.shape[1], np.float32)
            for start in range(0, u.shape[1], step):
                block = u[:, start:start + step]
                m = block.max(axis=0)
                per_sample[start:start + step] = m + np.log(np.exp(block - m).sum(axis=0))
            total += float(per_sample.sum())
            count += u.shape[1]
    return total / max(count, 1)


def _windowed(states: list[_Region], unaries: list[np.ndarray]) -> list[np.ndarray]:
    return [_set_windows(st, u) if u.shape[0] else u for st, u in zip(states, unaries, strict=True)]


def _snapshot(prep: Preparation, states: list[_Region], lines: LineSet, iteration: int,
              sweep: int | None, theta: np.ndarray, kl: float, ll: float, t0: float, n_sweeps: int,
              converged: bool, top_k: int) -> Snapshot:
    n = len(prep.samples)
    post_lines = np.full((n, top_k), -1, np.int32)
    post_probs = np.zeros((n, top_k), np.float16)
    entropy = np.zeros(n, np.float16)
    for st in states:
        p = st.posterior  # (W, n)
        if p.shape[0] == 0 or p.shape[1] == 0:
            continue
        k = min(top_k, p.shape[0])
        # The k best labels by repeated arg-max down the (few) label rows: a full sort of each
        # sample's short row is many times slower in NumPy. Ties go to the lower label.
        rest = p.copy()
        cols = np.arange(p.shape[1])
        top_lines = np.empty((k, p.shape[1]), np.int32)
        top_probs = np.empty((k, p.shape[1]), np.float32)
        for j in range(k):
            best = rest.argmax(axis=0)
            top_lines[j] = st.lines[st.offsets + best]
            flat = best * p.shape[1] + cols  # (row, column) of each sample's pick in ``rest``
            top_probs[j] = rest.ravel()[flat]
            rest.ravel()[flat] = -1.0
        post_lines[st.samples, :k] = top_lines.T
        post_probs[st.samples, :k] = top_probs.T
        # p log p, with 0 log 0 = 0: p is floored at the smallest normal float first.
        logp = np.log(np.maximum(p, np.finfo(np.float32).tiny))
        logp *= p
        entropy[st.samples] = -logp.sum(axis=0)
    return Snapshot(iteration=iteration, sweep=sweep, lines=lines, posterior_lines=post_lines,
                    posterior_probs=post_probs, entropy=entropy,
                    theta=(float(theta[0]), float(theta[1]), float(theta[2])), kl=float(kl),
                    log_likelihood=float(ll), elapsed=time.perf_counter() - t0, n_sweeps=n_sweeps,
                    converged=converged)


#: Floor of a moment measured on the page (engine.moments.MIN_MOMENT): a class no edge of
#: the page falls in still has a finite theta.
_MIN_PAGE_MOMENT = 1e-4


def page_moments(states: list[_Region], default: np.ndarray) -> np.ndarray:
    """The pairwise moments (fractions of MRF edges joining the same / adjacent / farther
    lines) of the page's own graph under the starting lines: each sample on its most
    probable line of the unary alone (iteration 0). ``default`` where the page has no edge.

    The learnt moments are a mean over the development pages, where about 5 % of the
    Delaunay edges join neighbouring rows. How many do depends on the page: on small
    writing at a pitch of 2 H_cc, sampled at 5 %, a letter holds a few samples and a third
    of the edges cross to the next row (tests/synthetic.py, "dense_rows": 0.67 / 0.33 /
    0.00). Matched to 0.94 / 0.05 / 0.01 instead, theta_0 went to its bound (-10 nats) and
    the pairwise term pulled each row's samples onto its neighbours' lines: sigma_t 5 ->
    15-21 px, every line across two rows."""
    counts = np.zeros(3)
    for st in states:
        if st.posterior.shape[0] == 0 or len(st.graph.pair) == 0:
            continue
        best = st.offsets + st.posterior.argmax(axis=0)
        ends = st.graph.owner[st.graph.pair]  # (E, 2) samples of each edge
        diff = np.minimum(np.abs(best[ends[:, 0]] - best[ends[:, 1]]), 2)
        counts += np.bincount(diff, minlength=3)[:3]
    if counts.sum() <= 0:
        return default
    mu = np.maximum(counts / counts.sum(), _MIN_PAGE_MOMENT)
    return mu / mu.sum()


#: The largest share of a page's MRF edges that join different lines among the pages the
#: default moments were learnt on (resources/moments.json, "per_page": moc_train_14, 0.145;
#: the other 53 pages 0.00-0.103). Measured under the starting lines, the 79 development
#: pages give 0.003-0.128 (moc_train_14 again); the dense_rows synthetic page 0.33.
LEARNT_MAX_APART = 0.145


def moments_for_page(measured: np.ndarray, learnt: np.ndarray) -> np.ndarray:
    """The moments EM matches on a page: the ``learnt`` ones, unless the page's own graph
    under its starting lines (``measured``, :func:`page_moments`) puts more of its edges
    between different lines than any page they were learnt on did (``LEARNT_MAX_APART``):
    such a page (small writing on tight rows, a few samples per letter) is unlike them, and
    its own moments are matched instead. On the development pages the learnt moments scored
    better than each page's own (starting lines put a cloud's two rows on one line, or split
    a side note: moc-train 230 -> 218 one-to-one matches, poilus-dev 283 -> 278, ahte-train
    362 -> 365)."""
    if measured[1] + measured[2] > LEARNT_MAX_APART:
        return measured
    return learnt


def _region_cap(prep: Preparation, st: _Region, params: Parameters, floor_t: float) -> float:
    """Largest sigma_t (pixels) of the lines of the region ``st``: ``sigma_t_pitch`` x its row
    pitch (:mod:`engine.pitch`); infinite without a pitch or a cap."""
    if params.sigma_t_pitch <= 0 or not prep.row_pitch or len(st.lines) < 2:
        return np.inf
    region = int(prep.sample_region[st.samples[0]]) if len(st.samples) else -1
    if not 0 <= region < len(prep.row_pitch):
        return np.inf
    return sigma_t_cap(prep.row_pitch[region].pitch, params.sigma_t_pitch, floor_t)


def _cap_sigma_t(fit, cap: float):
    """``fit`` with every sigma_t at most ``cap`` (pixels). A line whose band spreads over its
    neighbour's row takes that row's samples in the next E-step, and its band widens again:
    on small tight rows (a pitch of 2 H_cc) sigma_t went from 5 to 15-21 px, more than half
    the pitch, and each row's words were shared among neighbouring lines."""
    if not np.isfinite(cap):
        return fit
    return fit._replace(sigma_t=np.minimum(fit.sigma_t, cap))


def _within(st: _Region, lines: LineSet, trim: float) -> np.ndarray:
    """``(W, n)`` float32: 1 where the window entry's line lies within ``trim`` x its sigma_t
    of the sample across the text, else 0. Ink far from every line (a cloud drawn round the
    text, a stamp, a note in the margin that has no line of its own) still goes to the
    nearest line in the E-step; kept out of that line's regression, it no longer widens the
    line's band and turns it off its row (issue 24, run (c): poilus AN_0001-0 from the ground
    truth's 13 lines, sigma_t 0.6 -> 1.6 H_cc in 15 iterations)."""
    g = st.lines[st.window_labels()]  # (W, n) global lines
    d = across_offset(st.uv[None, :, 0], st.uv[None, :, 1], lines.a[g], lines.b[g], lines.rotation_invariant)
    return (np.abs(d) <= trim * lines.sigma_t[g]).astype(np.float32)


@dataclass(frozen=True)
class Anchors:
    """Where a file put each anchored line (``LineSet.anchored``, not locked) at the start of
    EM: ``index`` ``(k,)`` the lines, ``u`` ``(k, 2)`` and ``v`` ``(k, 2)`` the region-frame
    position of their two ends (pixels); ``reach`` ``(k,)`` how far across an end may move and
    ``sigma_t`` ``(k,)`` the largest spread (pixels, inf: no bound); ``extent``: whether a
    line keeps the extent along the text the file gave it."""

    index: np.ndarray
    u: np.ndarray
    v: np.ndarray
    reach: np.ndarray
    sigma_t: np.ndarray
    extent: bool = False


def given_line_gaps(lines: LineSet, index: np.ndarray) -> np.ndarray:
    """Across distance (pixels) from each line of ``index`` ``(k,)`` to the nearest other given
    line (locked or anchored) of its region whose extent along the text overlaps its own,
    measured midway along the overlap; inf where there is none. ``(k,)``"""
    given = np.flatnonzero(lines.anchored | lines.locked)
    out = np.full(len(index), np.inf)
    if len(given) < 2:
        return out
    # Each line's two ends along its region's frame (lines of one region share the frame).
    u = to_region_frame(lines.segments(), lines.phi[:, None])[..., 0]  # (L, 2)
    u_lo, u_hi = u.min(axis=1), u.max(axis=1)
    for n, k in enumerate(index):  # given lines: a few dozen
        others = given[(given != k) & (lines.region[given] == lines.region[k])]
        if len(others) == 0:
            continue
        lo = np.maximum(u_lo[k], u_lo[others])
        hi = np.minimum(u_hi[k], u_hi[others])
        overlap = hi > lo
        if overlap.any():
            mid = (lo + hi)[overlap] / 2.0
            across = (lines.a[others[overlap]] - lines.a[k]) * mid + lines.b[others[overlap]] - lines.b[k]
            out[n] = float(np.abs(across).min())
    return out


def anchors_of(lines: LineSet, h_cc: float, params: Parameters) -> Anchors | None:
    """The anchors of ``lines`` (:class:`Anchors`), None when no line is anchored or
    ``anchor_reach``, ``anchor_sigma_t`` and ``anchor_gap`` are all 0 and ``anchor_extent``
    is off."""
    index = np.flatnonzero(lines.anchored & ~lines.locked)
    if len(index) == 0 or (params.anchor_reach <= 0 and params.anchor_sigma_t <= 0
                           and params.anchor_gap <= 0 and not params.anchor_extent):
        return None
    sub = lines.take(index)
    uv = to_region_frame(sub.segments(), sub.phi[:, None])  # (k, 2 ends, 2)
    reach = np.full(len(index), params.anchor_reach * h_cc if params.anchor_reach > 0 else np.inf)
    # Never under the M-step's own floor: the cap bounds a spread, it does not set one.
    floor = params.sigma_t_floor * h_cc
    cap = np.full(len(index), max(params.anchor_sigma_t * h_cc, floor) if params.anchor_sigma_t > 0 else np.inf)
    if params.anchor_gap > 0:
        # The file's own line spacing, where H_cc is a poor proxy (drafts whose crossings-out
        # inflate it, insertions half a row above their row): each end moves at most this
        # share of the distance to the nearest given neighbour, and the band (+-sigma_t) ends
        # at most twice as far, so two neighbours never share a row.
        gap = given_line_gaps(lines, index)
        reach = np.minimum(reach, params.anchor_gap * gap)
        cap = np.minimum(cap, np.maximum(2.0 * params.anchor_gap * gap, floor))
    return Anchors(index, uv[..., 0], uv[..., 1], reach, cap, params.anchor_extent)


def keep_anchored(a: np.ndarray, b: np.ndarray, sigma_t: np.ndarray, anchors: Anchors | None,
                  c: np.ndarray | None = None, sigma_s: np.ndarray | None = None,
                  rotation_invariant: bool = True) -> None:
    """Bound, in place, the anchored lines of ``a``, ``b``, ``sigma_t`` ``(L,)`` to their
    anchors: each end of the line ``v = a u + b`` is moved across to within ``reach`` of where
    the file put it (the nearest line with both ends so: the bound is per end, the line through
    the two bounded ends), and sigma_t is capped. A line the fit left inside keeps its fit.
    With ``anchors.extent``, ``c`` and ``sigma_s`` ``(L,)`` are set to the extent between the
    file's two ends as seen along the bounded line (``rotation_invariant``: the along
    coordinate is the projection on the line, else ``u``)."""
    if anchors is None:
        return
    k, u = anchors.index, anchors.u
    reach = np.asarray(anchors.reach, dtype=np.float64).reshape(-1, 1)
    off = a[k, None] * u + b[k, None] - anchors.v  # (k, 2) across offsets of the two ends
    if np.isfinite(reach).any():
        end_v = anchors.v + np.clip(off, -reach, reach)
        du = u[:, 1] - u[:, 0]
        moved = np.any(np.abs(off) > reach, axis=1) & (np.abs(du) > 1e-9)
        safe = np.where(moved, du, 1.0)
        a_new = (end_v[:, 1] - end_v[:, 0]) / safe
        a[k[moved]] = a_new[moved]
        b[k[moved]] = (end_v[:, 0] - a_new * u[:, 0])[moved]
    sigma_t[k] = np.minimum(sigma_t[k], anchors.sigma_t)
    if anchors.extent and c is not None and sigma_s is not None:
        # The file says where the line starts and ends: a short line (an insertion above its
        # row, a margin note) that grew along the text took its row's words from the line
        # the row is.
        if rotation_invariant:
            s = (u + a[k, None] * anchors.v) / np.sqrt(1.0 + a[k, None] ** 2)
        else:
            s = u
        lo, hi = s.min(axis=1), s.max(axis=1)
        c[k] = (lo + hi) / 2.0
        sigma_s[k] = np.maximum((hi - lo) / 4.0, 1e-3)  # the ends are c +- 2 sigma_s


def _m_step(prep: Preparation, states: list[_Region], lines: LineSet, params: Parameters,
            anchors: Anchors | None = None) -> LineSet:
    a, b, c = lines.a.copy(), lines.b.copy(), lines.c.copy()
    st_, ss_, prior = lines.sigma_t.copy(), lines.sigma_s.copy(), lines.prior.copy()
    floor_t = params.sigma_t_floor * prep.stats.h_cc
    floor_s = params.sigma_s_floor * prep.stats.w_cc
    rot_inv = params.regression == "rotation_invariant"
    # frame_lines: a line runs within SPLIT_ANGLE of its block's frame (engine.initial_lines).
    max_angle = FRAME_LINE_ANGLE if params.frame_lines else 90.0
    for st in states:
        if len(st.lines) == 0 or len(st.samples) == 0:
            continue
        features, origin = point_features(st.uv)
        # The lines' place and spread from the samples within m_step_trim x sigma_t of them
        # only (0: every sample); their priors from every sample (features[:, 0] is 1).
        weights = st.posterior * _within(st, lines, params.m_step_trim) if params.m_step_trim > 0 else None
        moments = np.stack([st.line_sums(features[:, k], weights) for k in range(features.shape[1])], axis=1)
        mass = moments[:, 0] if weights is None else st.line_sums(features[:, 0])
        fit = fit_from_moments(moments, origin, rot_inv, floor_t, floor_s, max_angle)
        fit = _cap_sigma_t(fit, _region_cap(prep, st, params, floor_t))
        # A line with almost no posterior mass keeps its geometry; its prior says it is gone.
        # (Issue 24's locked lines keep theirs too: they leave ``ok`` here, cap or none.)
        ok = np.isfinite(fit.a) & (fit.weight > 1.0)
        g = st.lines[ok]
        a[g], b[g], c[g], st_[g], ss_[g] = fit.a[ok], fit.b[ok], fit.c[ok], fit.sigma_t[ok], fit.sigma_s[ok]
        # pi_l = mean posterior over the region's samples, or over the page's (eq. pline).
        prior[st.lines] = mass / (len(st.samples) if params.prior_scope == "region" else len(prep.samples))
        # Issue 24: a locked line keeps its place (a, b, c), extent (sigma_s) and spread
        # (sigma_t). (Its spread measured about the fixed line grew with every sample it
        # could not move to, and widened its reach in turn: on poilus AN_0001-0 with the
        # ground truth's lines locked, sigma_t ran to 3-6 H_cc and the last line took the
        # row above it; FM 0.46, 1.0 with sigma_t kept.) It keeps its prior too: with
        # nothing else left to learn, a prior that follows the posterior only shifts the
        # boundary between two locked rows towards the one with less ink, a little more at
        # each iteration (bench/steering.py run (d), the ground truth's lines locked, FM /
        # line IU %: ahte-train 87.3 / 99.8 -> 89.7 / 99.8, cremma20 84.8 / 94.8 -> 84.8 /
        # 99.1, poilus-dev 88.9 -> 89.1, moc-train 75.2 / 97.9 -> 74.4 / 97.7).
        fixed = lines.locked[st.lines]
        if fixed.any():
            g = st.lines[fixed]
            a[g], b[g], c[g] = lines.a[g], lines.b[g], lines.c[g]
            st_[g], ss_[g], prior[g] = lines.sigma_t[g], lines.sigma_s[g], lines.prior[g]
    keep_anchored(a, b, st_, anchors, c, ss_, rot_inv)
    return LineSet(a, b, c, st_, ss_, prior, lines.region, lines.phi, rot_inv, lines.locked, lines.anchored,
                   lines.chain, lines.sigma_t_measured)


def dense_posterior(st: _Region) -> np.ndarray:
    """A region's posteriors over all its lines ``(L, n)`` (zero outside the windows)."""
    dense = np.zeros((len(st.lines), len(st.samples)))
    np.put_along_axis(dense, st.window_labels(), st.posterior, axis=0)
    return dense


def line_prior_step(st: _Region, target: np.ndarray, params: Parameters) -> np.ndarray:
    """The next line-probability parameters theta_l ``(L,)`` of a region, matching the mean
    posterior ``mean_v p_v(l)`` to ``target`` (the line priors pi_l).

    "log_ratio": ``theta_l + line_prior_step x log(mean_v p_v(l) / pi_l)``; "armijo" (paper,
    Algorithm 2): one step of :func:`engine.message_passing.learn_theta` on the features
    ``[h_v = l]``, whose distribution at theta = 0 is ``p_v(l) e^{theta_l}`` normalised, with
    the moments pi_l normalised over the region. Both clipped to ``+-line_prior_clip`` (0 = no clip)."""
    if params.line_prior_rule == "armijo":
        p = dense_posterior(st)
        q = p * np.exp(st.bias - st.bias.max())[:, None]
        q /= np.maximum(q.sum(axis=0, keepdims=True), 1e-300)
        mu = target / max(float(target.sum()), 1e-300)
        bias, _ = mp.learn_theta(q.T, st.bias, mu, limit=params.line_prior_clip)
        return bias
    mean = np.maximum(st.line_sums(np.ones(len(st.samples))) / len(st.samples), 1e-6)
    bias = st.bias + params.line_prior_step * np.log(mean / np.maximum(target, 1e-6))
    clip = params.line_prior_clip
    return np.clip(bias, -clip, clip) if clip > 0 else bias


def _best_lines(states: list[_Region], n: int) -> np.ndarray:
    """Each sample's most probable line (global index) ``(n,)``; -1 where it has none."""
    best = np.full(n, -1, np.int64)
    for st in states:
        if st.posterior.shape[0] and st.posterior.shape[1]:
            best[st.samples] = st.lines[st.offsets + st.posterior.argmax(axis=0)]
    return best


def _kl(states: list[_Region], previous: list[tuple[np.ndarray, np.ndarray]] | None) -> float:
    """Mean over samples of KL(current || previous posterior); ``previous``: per region the
    window offsets and windowed posterior ``(W, n)`` of the last iteration. Labels outside
    the current window carry a posterior of 0 (floored at 1e-12 as both are): their terms,
    1e-12 log(1e-12 / q), are left out."""
    if previous is None:
        return float("inf")
    total, count = 0.0, 0
    for st, (offsets, old) in zip(states, previous, strict=True):
        if st.posterior.size == 0:
            continue
        pos = st.window_labels() - offsets[None, :]
        inside = (pos >= 0) & (pos < old.shape[0])
        q = np.take_along_axis(old, np.clip(pos, 0, old.shape[0] - 1), axis=0)
        q = np.maximum(np.where(inside, q, 0.0), 1e-12, dtype=np.float64)
        p = np.maximum(st.posterior, 1e-12, dtype=np.float64)
        total += float((p * np.log(p / q)).sum())
        count += st.posterior.shape[1]
    return total / max(count, 1)


def run_em(prep: Preparation, lines: LineSet, params: Parameters, per_sweep: bool = False
           ) -> Iterator[Snapshot]:
    """EM from ``lines``; yields iteration 0 (the starting lines, posteriors from the unary
    alone), then one snapshot per EM iteration (and per sweep when ``per_sweep``)."""
    t0 = time.perf_counter()
    rot_inv = params.regression == "rotation_invariant"
    if lines.rotation_invariant != rot_inv:
        lines = lines.with_rotation_invariant(rot_inv)
    _check_lines(prep, lines)
    anchors = anchors_of(lines, prep.stats.h_cc, params)
    states = _region_states(prep, lines, params)
    moments = np.asarray(params.moments, dtype=np.float64)
    theta = np.zeros(3)
    h_cc = prep.stats.h_cc
    unaries = _unaries(states, lines, params, h_cc, start=True)
    ll = _log_likelihood(unaries)
    for st, u in zip(states, _windowed(states, unaries), strict=True):
        if u.shape[0] and u.shape[1]:
            p = np.exp(u - u.max(axis=0))
            st.posterior[:] = p / p.sum(axis=0)
    if params.page_moments:
        moments = moments_for_page(page_moments(states, moments), moments)
    yield _snapshot(prep, states, lines, 0, None, theta, float("nan"), ll, t0, 0,
                    False, params.snapshot_top_k)
    total_sweeps = 0
    # Algorithm 2: p_u carries the exponent 1/c_v under the paper's (convex) rule.
    pair_power = 1.0 / params.c_v if params.update_rule == "convex" else 1.0
    previous_best = _best_lines(states, len(prep.samples))
    for iteration in range(1, params.max_em_iterations + 1):
        previous = [(st.offsets.copy(), st.posterior.copy()) for st in states]
        if not params.mp_warm_start and iteration > 1:
            # Algorithm 2's "Initialize: theta_k = 0, m_{v->u} = 1" at each call (cold start).
            theta = np.zeros(3)
            for st in states:
                st.out[:] = 0.0
                st.messages_zero = True
                st.bias = np.zeros(len(st.lines))
        unaries = _unaries(states, lines, params, h_cc)
        ll = _log_likelihood(unaries)
        unaries = _windowed(states, unaries)
        shifts = [mp.half_edge_shift(st.graph, st.offsets) for st in states]
        for sweep_index in range(1, params.mp_max_sweeps + 1):
            # Theta step (Algorithm 2, first loop): one Armijo step on the pooled edge statistics.
            # Under the convex rule p_u = (e^{-theta f} m_i m_j)^{1/c_v}: its class marginals are
            # those of the messages^{1/c_v} under theta / c_v, the variable the step is taken in.
            q = [mp.edge_class_fractions(st.out if pair_power == 1.0 else st.out * np.float32(pair_power),
                                         st.graph, sh, st.theta_edges)
                 for st, sh in zip(states, shifts, strict=True) if st.out.shape[0]]
            if q:
                scaled, _ = mp.learn_theta(np.concatenate(q), theta * pair_power, moments,
                                           limit=params.theta_limit * pair_power)
                theta = scaled / pair_power
            change = 0.0
            damping = params.damping if params.update_rule == "bethe" else 0.0
            for st, u, sh in zip(states, unaries, shifts, strict=True):
                if u.shape[0] == 0 or u.shape[1] == 0:
                    continue
                bias = st.bias.astype(np.float32)[st.window_labels()]
                change = max(change, mp.sweep(u - bias, st.out, st.graph, theta, st.power, damping,
                                              st.posterior, sh, pair_power=pair_power))
                st.messages_zero = False
                if params.learn_line_prior:
                    # Moment matching of the line-probability features: mean posterior -> prior.
                    st.bias = line_prior_step(st, lines.prior[st.lines], params)
            total_sweeps += 1
            if per_sweep:
                yield _snapshot(prep, states, lines, iteration, sweep_index, theta, float("nan"), ll, t0,
                                total_sweeps, False, params.snapshot_top_k)
            if change < params.mp_tolerance:
                break
        lines = _m_step(prep, states, lines, params, anchors)
        kl = _kl(states, previous)
        best = _best_lines(states, len(prep.samples))
        changed = float(np.mean(best != previous_best)) if len(best) else 0.0
        previous_best = best
        converged = kl < params.kl_tolerance or changed < params.label_tolerance
        yield _snapshot(prep, states, lines, iteration, None, theta, kl, ll, t0, total_sweeps, converged,
                        params.snapshot_top_k)
        if converged:
            return
