"""Label windows: a sample's messages cover W consecutive lines around its best one."""

import numpy as np
import pytest
from synthetic import make_page

from engine import message_passing as mp
from engine.metric import contest_metric
from engine.params import Parameters
from engine.pipeline import finish, prepare, run_em


@pytest.mark.parametrize("width", [1, 3, 5])
def test_windowed_pairwise_message_equals_dense_restricted_to_the_window(width: int) -> None:
    """Shifted windows give the dense O(L^2) message (up to a constant) on the receiver's
    window, when the sender's message is zero outside its own window."""
    rng = np.random.default_rng(width)
    n, n_labels = 60, 9
    theta = np.array([0.4, -0.3, 0.9])
    send_off = rng.integers(0, n_labels - width + 1, n)
    recv_off = np.where(rng.random(n) < 0.5, send_off, rng.integers(0, n_labels - width + 1, n))
    window = rng.normal(size=(n, width)).astype(np.float32)
    dense = np.full((n, n_labels), -80.0, np.float32)
    for i in range(n):  # building the reference by hand, row by row
        dense[i, send_off[i]:send_off[i] + width] = window[i]
    reference = mp.pairwise_message_dense(dense.T, theta).T
    got = mp.pairwise_message(window.T.copy(), theta, recv_off - send_off).T
    expected = np.stack([reference[i, recv_off[i]:recv_off[i] + width] for i in range(n)])
    np.testing.assert_allclose(got - got[:, :1], expected - expected[:, :1], atol=1e-4)


def test_edge_class_fractions_with_windows_match_dense() -> None:
    """The same/adjacent/farther fractions of an edge do not depend on how the labels are
    windowed, as long as each window holds the whole message."""
    rng = np.random.default_rng(0)
    n, n_labels, width = 40, 8, 4
    pts = rng.random((n, 2))
    from engine.graph import delaunay_edges
    _, edges = delaunay_edges(pts)
    graph = mp.build_region_graph(n, edges)
    offsets = rng.integers(0, n_labels - width + 1, n)
    out_w = rng.normal(size=(len(graph.owner), width)).astype(np.float32)
    out_w -= out_w.max(axis=1, keepdims=True)
    dense = np.full((len(graph.owner), n_labels), -80.0, np.float32)
    own_off = offsets[graph.owner]
    for h in range(len(graph.owner)):  # reference by hand
        dense[h, own_off[h]:own_off[h] + width] = out_w[h]
    q_dense = mp.edge_class_fractions(dense.T.copy(), graph)  # label-major (L, 2E)
    q_win = mp.edge_class_fractions(out_w.T.copy(), graph, mp.half_edge_shift(graph, offsets))
    np.testing.assert_allclose(q_win, q_dense, atol=1e-5)


def test_windowed_em_segments_like_the_dense_one() -> None:
    """With windows narrower than the number of lines, EM still segments a synthetic page,
    and its result agrees with the exact (all lines) computation."""
    page = make_page("straight", seed=0)
    ink = page.labels > 0
    scores = {}
    for width in (0, 3):
        prep = prepare(page.image, Parameters(label_window=width, max_em_iterations=8))
        *_, last = run_em(prep)
        seg = finish(prep, last)
        scores[width] = contest_metric(page.labels, seg.labels, ink=ink).fm
    assert scores[0] >= 0.95
    assert scores[3] >= 0.95


@pytest.mark.parametrize("width", [1, 3, 5])
def test_normalised_pairwise_message_equals_the_general_one(width: int) -> None:
    """On messages stored as the sweep stores them (column maximum 0, floored), skipping the
    shift by the maximum and reusing the input gives the same message."""
    rng = np.random.default_rng(10 + width)
    n = 80
    theta = np.array([-1.0, 0.5, 3.0])
    log_m = rng.normal(0, 5, (width, n)).astype(np.float32)
    log_m -= log_m.max(axis=0)
    np.maximum(log_m, mp.MESSAGE_FLOOR, out=log_m)
    shift = np.where(rng.random(n) < 0.3, rng.integers(-width, width + 1, n), 0)
    general = mp.pairwise_message(log_m, theta, shift)
    scratch = log_m.copy()
    fast = mp.pairwise_message(scratch, theta, shift, normalised=True, overwrite=True)
    np.testing.assert_allclose(fast, general, atol=1e-6)


def test_two_threaded_sweep_equals_the_sequential_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Colour classes split between two threads give the same messages and posteriors as one
    thread, sweep after sweep (the halves of a class share no edge)."""
    rng = np.random.default_rng(5)
    n, width = 600, 4
    from engine.graph import delaunay_edges
    _, edges = delaunay_edges(rng.random((n, 2)) * 100)
    graph = mp.build_region_graph(n, edges)
    unary = rng.normal(0, 2, (width, n)).astype(np.float32)
    power = np.ones(n, np.float32)
    theta = np.array([-2.0, 0.0, 2.0])
    monkeypatch.setattr(mp, "PARALLEL_MIN_HALF_EDGES", 10)
    results = []
    for threads in (1, 2):
        out = np.zeros((width, 2 * len(edges)), np.float32)
        post = np.full((width, n), 1.0 / width, np.float32)
        changes = [mp.sweep(unary, out, graph, theta, power, 0.5, post, threads=threads) for _ in range(4)]
        results.append((out, post, changes))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-6)  # summed in another order
    assert results[0][2][0] > 0  # the sweeps did move the posteriors
