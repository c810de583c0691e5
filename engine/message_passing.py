"""The E-step's message passing on the Delaunay MRF (paper Algorithm 2), vectorised.

Each undirected edge ``u = (i, j)`` has two half-edges; column ``out[:, k]`` holds the log message
``m_{v->u}`` from the half-edge's owner ``v`` into its edge. The pairwise table has three
values (same / adjacent / farther line), so the sum over the other end's labels is O(L):

``sum_h' e^{-theta_f(h,h')} m(h') = e^{-theta_2} S + (e^{-theta_0} - e^{-theta_2}) m(h)
                                   + (e^{-theta_1} - e^{-theta_2}) (m(h-1) + m(h+1))``

Label windows: labels are ordered across the text, so a sample's plausible lines are a few
consecutive ones around its best. Each sample keeps a window of ``W`` consecutive labels
starting at its offset ``o_v``; a message into ``v`` from a neighbour ``w`` reads ``w``'s
message shifted by ``o_v - o_w`` (zero outside ``w``'s window). This makes a sweep O(E·W)
instead of O(E·L) (``W = L`` with all offsets 0 is the exact dense computation).

Vertices are updated colour class by colour class (no two neighbours in a class), so one
vectorised pass over the classes equals a sequential sweep.

Two update rules share the code and differ only in the powers of ``p_v`` and ``p_u``:
``convex`` (the paper, ``p_v ∝ (psi_v prod m_in)^{1/(c_v + A_v)}`` and
``p_u ∝ (e^{-theta f} m_i m_j)^{1/c_v}``) and ``bethe`` (belief propagation counting numbers,
power 1, with damping). The notes measured that the literal
convex rule acts as a temperature of about ``1 + A_v`` on the unary and, fed into the M-step,
merges lines; both are kept and selectable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import threads as _threads
from .graph import colour_classes

_TINY = np.float32(1e-30)
THETA_LIMIT = 10.0
# Log messages are kept within MESSAGE_FLOOR nats of their maximum and log posteriors within
# EXP_FLOOR: a label e^-40 times less likely than the best is as good as impossible (the unary
# itself is floored 30 nats down), and exp of float32 below about -87 underflows into a slow
# path (twice the cost of the whole exp at 12 % of such entries); products of two floored
# messages (e^-80) stay normal floats.
MESSAGE_FLOOR = np.float32(-40.0)
EXP_FLOOR = np.float32(-80.0)


@dataclass(frozen=True)
class RegionGraph:
    """Half-edge structure of one region's MRF, sorted by (colour, owner).

    ``owner``/``twin``: ``(2E,)``; ``pair``: ``(E, 2)`` half-edge indices of each edge;
    ``classes``: per colour ``(start, stop, vertices, starts)`` with ``starts`` the offsets
    of each vertex's half-edges inside ``[start, stop)``; ``degree``: ``(n,)``."""

    n: int
    owner: np.ndarray
    twin: np.ndarray
    pair: np.ndarray
    degree: np.ndarray
    classes: tuple
    isolated: np.ndarray


def build_region_graph(n: int, edges: np.ndarray, seed: int = 0) -> RegionGraph:
    """The half-edge structure of ``n`` vertices and undirected ``edges (E, 2)`` (local ids)."""
    e = len(edges)
    owner = np.concatenate([edges[:, 0], edges[:, 1]]).astype(np.int64)
    twin = np.concatenate([np.arange(e) + e, np.arange(e)]).astype(np.int64)
    degree = np.bincount(owner, minlength=n)
    colour = colour_classes(n, edges, seed)
    order = np.lexsort((owner, colour[owner]))
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    owner = owner[order]
    twin = inverse[twin[order]]
    pair = np.stack([inverse[np.arange(e)], inverse[np.arange(e) + e]], axis=1)
    classes = []
    hcol = colour[owner]
    bounds = np.flatnonzero(np.diff(hcol)) + 1
    for start, stop in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(owner)]]), strict=True):
        if stop <= start:
            continue
        own = owner[start:stop]  # sorted: one run of half-edges per vertex
        starts = np.concatenate([[0], np.flatnonzero(own[1:] != own[:-1]) + 1])
        classes.append((int(start), int(stop), own[starts], starts))
    return RegionGraph(n=n, owner=owner, twin=twin, pair=pair, degree=degree, classes=tuple(classes),
                       isolated=np.flatnonzero(degree == 0))


def pairwise_weights(theta: np.ndarray) -> np.ndarray:
    """``exp(-theta_k)`` for k = same, adjacent, farther, shifted for numerical range."""
    t = np.asarray(theta, dtype=np.float64)
    return np.exp(-(t - t.min()))


def shifted(m: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns of ``m (W, h)`` read at window positions ``j + shift``, ``j + shift - 1`` and
    ``j + shift + 1`` for ``j = 0..W-1`` (zero outside the column): the other end's message at
    the owner's labels ``h``, ``h - 1`` and ``h + 1``."""
    w, _ = m.shape
    shift = np.asarray(shift, dtype=np.int64)
    # Most edges join samples with the same window (same best line): plain slices for them.
    same = m.copy()
    below = np.zeros_like(m)
    below[1:] = m[:-1]
    above = np.zeros_like(m)
    above[:-1] = m[1:]
    moved = np.flatnonzero(shift)
    if len(moved):
        # The moved columns, with a zero row above and below, read by flat indices: row
        # clip(j + shift + d, -1, W) + 1 of each (take_along_axis builds the same indices
        # with more passes).
        k = len(moved)
        padded = np.zeros((w + 2, k), dtype=m.dtype)
        padded[1:-1] = np.take(m, moved, axis=1)
        base = np.arange(w)[:, None] + shift[moved][None, :]
        cols = np.arange(k)
        flat = padded.ravel()
        for out, d in ((same, 0), (below, -1), (above, 1)):
            rows = base + d
            # clip(rows, -1, w): np.clip's own checks cost more than the pass on these arrays.
            np.maximum(rows, -1, out=rows)
            np.minimum(rows, w, out=rows)
            rows += 1
            rows *= k
            rows += cols
            out[:, moved] = np.take(flat, rows)
    return same, below, above


def pairwise_message(log_m: np.ndarray, theta: np.ndarray, shift: np.ndarray | None = None, *,
                     normalised: bool = False, overwrite: bool = False) -> np.ndarray:
    """O(L) pairwise sum ``log sum_h' e^{-theta_f(h,h')} m(h')`` for columns of log messages
    ``(W, h)``; returns ``(W, h)`` float32 (each column defined up to a constant). With label
    windows, ``shift (h,)`` is the receiving window's offset minus the sending one's.
    ``normalised``: every column's maximum is at most 0 and its entries at least
    MESSAGE_FLOOR (as :func:`sweep` stores them), so exp needs no shift; ``overwrite``:
    ``log_m`` may be used as scratch space."""
    e0, e1, e2 = (np.float32(w) for w in pairwise_weights(theta))
    if normalised:
        m = np.exp(log_m, out=log_m if overwrite and log_m.dtype == np.float32 else None)
    else:
        m = log_m - log_m.max(axis=0)
        np.exp(m, out=m)
    total = m.sum(axis=0)
    # Columns whose windows coincide (most edges join samples with the same best line):
    # neighbouring labels are neighbouring rows.
    out = m * (e0 - e2)
    out += e2 * total
    if len(m) > 1:
        near = m * (e1 - e2)
        out[1:] += near[:-1]
        out[:-1] += near[1:]
    moved = np.flatnonzero(shift) if shift is not None else np.zeros(0, np.int64)
    if len(moved):
        sub = np.take(m, moved, axis=1)
        same, below, above = shifted(sub, np.asarray(shift)[moved])
        below += above
        fixed = (e0 - e2) * same
        fixed += e2 * total[moved]
        fixed += (e1 - e2) * below
        out[:, moved] = fixed
    np.maximum(out, _TINY, out=out)
    return np.log(out, out=out)


def pairwise_message_dense(log_m: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The same as :func:`pairwise_message` with the full ``L x L`` table (O(L^2); for tests)."""
    n_labels = log_m.shape[0]
    h = np.arange(n_labels)
    diff = np.abs(h[:, None] - h[None, :])
    table = pairwise_weights(theta)[np.minimum(diff, 2)]
    m = np.exp(log_m - log_m.max(axis=0)).astype(np.float64)
    return np.log(np.maximum(table @ m, 1e-30)).astype(np.float32)


def edge_class_fractions(out: np.ndarray, graph: RegionGraph, shift: np.ndarray | None = None,
                         edges: np.ndarray | None = None) -> np.ndarray:
    """Per edge, the fraction of the product ``m_{i->u} x m_{j->u}`` on same / adjacent /
    farther label pairs ``(E, 3)``: the edge's class marginal at theta = 0. ``out (W, 2E)``;
    ``shift (2E,)``: per half-edge, its owner's window offset minus the other end's (None: no
    windows); ``edges``: indices of the edges wanted (None: all)."""
    pair = graph.pair if edges is None else graph.pair[edges]
    if len(pair) == 0:
        return np.zeros((0, 3))
    # Messages are stored with their maximum at 0 (sweep normalises them), so exp is safe.
    mi = np.exp(np.take(out, pair[:, 0], axis=1))
    mj = np.exp(np.take(out, pair[:, 1], axis=1))
    if shift is None or not np.any(shift):
        same = (mi * mj).sum(axis=0, dtype=np.float64)
        adjacent = ((mi[1:] * mj[:-1]).sum(axis=0, dtype=np.float64)
                    + (mi[:-1] * mj[1:]).sum(axis=0, dtype=np.float64))
    else:
        g0, gm, gp = shifted(mj, shift[pair[:, 0]])
        same = (mi * g0).sum(axis=0, dtype=np.float64)
        gm += gp
        adjacent = (mi * gm).sum(axis=0, dtype=np.float64)
    total = mi.sum(axis=0, dtype=np.float64) * mj.sum(axis=0, dtype=np.float64)
    far = np.maximum(total - same - adjacent, 0.0)
    q = np.stack([same, adjacent, far])  # (3, E): sums over the three classes are row operations
    q /= np.maximum(q.sum(axis=0), 1e-300)
    return q.T


def class_marginals(q: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Edge class marginals ``E_{p_u}[f_k]`` ``(E, 3)`` under theta from fractions ``q``."""
    w = q * pairwise_weights(theta)
    return w / np.maximum(w.sum(axis=1, keepdims=True), 1e-300)


def learn_theta(q: np.ndarray, theta: np.ndarray, moments: np.ndarray,
                step0: float = 8.0, max_halvings: int = 30, limit: float = THETA_LIMIT
                ) -> tuple[np.ndarray, float]:
    """One moment-matching gradient step on theta (K features, K = 3 for the pairwise term)
    with Armijo backtracking on the dual ``g(theta) = mean_u log Z_u(theta) + theta . mu``
    (convex), ``Z_u = sum_k q_uk e^{-theta_k}``, whose gradient is ``mu - E_{p_u}[f]``.
    ``q (E, K)``: each factor's feature distribution at theta = 0. The new theta is centred
    (the dual is shift-invariant when mu sums to 1) and clipped to ``+-limit`` (0 = no clip).
    Returns the new theta and the accepted step length."""
    if len(q) == 0:
        return theta, 0.0
    mu = np.asarray(moments, dtype=np.float64)
    qt = np.ascontiguousarray(np.asarray(q, dtype=np.float64).T)  # (K, E): no slow K-wide rows
    n_features = qt.shape[0]

    def partition(t: np.ndarray) -> np.ndarray:
        w = np.exp(-(t - t.min()))
        z = qt[0] * w[0]
        for k in range(1, n_features):
            z += qt[k] * w[k]
        return np.maximum(z, 1e-300)

    def dual(t: np.ndarray) -> float:
        return float(np.log(partition(t)).mean() - t.min() + t @ mu)

    theta = np.asarray(theta, dtype=np.float64)
    weights = pairwise_weights(theta)
    inv_z = 1.0 / partition(theta)
    expected = np.array([float((qt[k] * inv_z).mean()) * weights[k] for k in range(n_features)])
    grad = mu - expected
    g0 = dual(theta)
    step = step0
    for _ in range(max_halvings):
        candidate = theta - step * grad
        if dual(candidate) <= g0 - 1e-4 * step * float(grad @ grad):
            # Moments the unary makes unreachable would send theta to infinity; a bound of
            # THETA_LIMIT nats (e^20 between classes) changes no reachable fixed point.
            candidate = candidate - candidate.mean()
            return (np.clip(candidate, -limit, limit) if limit > 0 else candidate), step
        step /= 2.0
    return theta, 0.0


def _update_vertices(unary: np.ndarray, out: np.ndarray, graph: RegionGraph, theta: np.ndarray,
                     power: np.ndarray, unit_power: bool, damping: float, posterior: np.ndarray,
                     shift: np.ndarray | None, pair_power: float, start: int, stop: int,
                     verts: np.ndarray, starts: np.ndarray) -> float:
    """Update vertices ``verts`` of one colour class, whose half-edges are ``[start, stop)``
    with ``starts`` each vertex's first (relative to ``start``); see :func:`sweep`. Returns
    the sum over them of the largest change of a posterior entry."""
    # np.take, not out[:, index]: fancy indexing returns a Fortran-ordered array here,
    # on which every reduction over the labels is slow again.
    sub_shift = None if shift is None else shift[start:stop]
    if pair_power == 1.0:
        incoming = pairwise_message(np.take(out, graph.twin[start:stop], axis=1), theta, sub_shift,
                                    normalised=True, overwrite=True)
    else:
        # p_u = (e^{-theta f} m_i m_j)^{1/c_v} (Algorithm 2, last line): the message into v is
        # p_u(h_v) / m_{v->u}(h_v) = m_{v->u}^{1/c_v - 1} sum_h' (e^{-theta f} m_{w->u}(h'))^{1/c_v}.
        other = np.take(out, graph.twin[start:stop], axis=1) * np.float32(pair_power)
        incoming = pairwise_message(other, np.asarray(theta) * pair_power, sub_shift)
        incoming += np.float32(pair_power - 1.0) * out[:, start:stop]
    logp = np.add.reduceat(incoming, starts, axis=1)
    logp += np.take(unary, verts, axis=1)
    if not unit_power:
        logp *= power[verts]
    logp -= logp.max(axis=0)
    np.maximum(logp, EXP_FLOOR, out=logp)
    p = np.exp(logp)
    total = p.sum(axis=0)
    p /= total
    logp -= np.log(total)
    counts = np.diff(np.append(starts, stop - start))
    new = np.repeat(logp, counts, axis=1)
    new -= incoming
    if damping > 0:
        # A message is defined up to a constant, which damping only scales: one
        # normalisation after it does for both.
        new *= 1.0 - damping
        new += damping * out[:, start:stop]
    new -= new.max(axis=0)
    np.maximum(new, MESSAGE_FLOOR, out=new)
    out[:, start:stop] = new
    old = np.take(posterior, verts, axis=1)
    change = float(np.abs(p - old).max(axis=0).sum())
    posterior[:, verts] = p
    return change


#: A colour class with at least this many half-edges is updated by two threads, each on half
#: of its vertices (they share no edge, so the halves are independent and the result is the
#: same). NumPy releases the GIL in the vectorised passes.
PARALLEL_MIN_HALF_EDGES = 20_000

def sweep(unary: np.ndarray, out: np.ndarray, graph: RegionGraph, theta: np.ndarray,
          power: np.ndarray, damping: float, posterior: np.ndarray, shift: np.ndarray | None = None,
          threads: int = 2, pair_power: float = 1.0) -> float:
    """One sequential sweep over the colour classes, in place on ``out (W, 2E)`` and
    ``posterior (W, n)`` (``unary (W, n)``; ``shift``: see :func:`edge_class_fractions`).
    ``power (n,)``: exponent of ``p_v`` (1 for BP, 1/(c_v + A_v) for the paper's rule);
    ``pair_power``: exponent of ``p_u`` (1 for BP, 1/c_v for the paper's rule).
    ``threads``: 1 or 2 (large colour classes split in two halves). Returns the mean over
    samples of the largest change of a sample's posterior entry.

    Arrays are label-major (one row per window position) because every reduction is over
    the few labels of a sample: across rows that is a handful of contiguous vector
    operations, where a reduction along short rows is many times slower in NumPy."""
    change = 0.0
    unit_power = bool(np.all(power == 1))
    args = (unary, out, graph, theta, power, unit_power, damping, posterior, shift, float(pair_power))
    for start, stop, verts, starts in graph.classes:  # a few colour classes, each vectorised
        if threads > 1 and stop - start >= PARALLEL_MIN_HALF_EDGES and len(verts) > 1:
            half = len(verts) // 2
            mid = start + int(starts[half])
            second = _threads.worker("sweep").submit(_update_vertices, *args, mid, stop, verts[half:],
                                                     starts[half:] - starts[half])
            change += _update_vertices(*args, start, mid, verts[:half], starts[:half])
            change += second.result()
        else:
            change += _update_vertices(*args, start, stop, verts, starts)
    if len(graph.isolated):
        u = np.take(unary, graph.isolated, axis=1)
        p = np.exp(u - u.max(axis=0))
        p /= p.sum(axis=0)
        change += float(np.abs(p - posterior[:, graph.isolated]).max(axis=0).sum())
        posterior[:, graph.isolated] = p
    return change / max(graph.n, 1)


def half_edge_shift(graph: RegionGraph, offsets: np.ndarray) -> np.ndarray:
    """Per half-edge, its owner's window offset minus the other end's ``(2E,)``."""
    return (offsets[graph.owner] - offsets[graph.owner[graph.twin]]).astype(np.int64)


def pair_marginals(out: np.ndarray, graph: RegionGraph, theta: np.ndarray) -> np.ndarray:
    """Pair marginals ``p_u(h_i, h_j)`` ``(E, L, L)`` from ``out (L, 2E)`` (dense: for tests on
    small graphs)."""
    n_labels = out.shape[0]
    h = np.arange(n_labels)
    table = pairwise_weights(theta)[np.minimum(np.abs(h[:, None] - h[None, :]), 2)]
    mi = np.exp(out[:, graph.pair[:, 0]].T.astype(np.float64))
    mj = np.exp(out[:, graph.pair[:, 1]].T.astype(np.float64))
    p = mi[:, :, None] * table[None] * mj[:, None, :]
    return p / p.sum(axis=(1, 2), keepdims=True)
