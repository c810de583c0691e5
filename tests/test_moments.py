"""engine.moments: pairwise moments learned from synthetic ground truth (no shared data needed)."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import make_page, save_page

from engine.moments import MIN_MOMENT, edge_moments, learn_moments, normalise, order_lines
from engine.params import Parameters


def test_parallel_lines_moments() -> None:
    page = make_page("straight", seed=1)
    counts, n_edges = edge_moments(page.labels)
    assert n_edges == counts.sum() > 1000
    mu = normalise(counts)
    assert abs(sum(mu) - 1.0) < 1e-9
    assert mu[0] == max(mu) and mu[0] > 0.8
    assert 0.01 < mu[1] < 0.2          # neighbouring lines touch through the Delaunay graph
    assert mu[2] < 0.01                # lines two apart almost never do
    Parameters(moments=tuple(mu))      # valid as engine parameters


def test_line_ids_are_ordered_not_taken_as_given() -> None:
    page = make_page("straight", seed=1)
    rng = np.random.default_rng(0)
    perm = np.concatenate([[0], rng.permutation(page.n_lines) + 1])
    shuffled = perm[page.labels]
    assert np.array_equal(edge_moments(shuffled)[0], edge_moments(page.labels)[0])


def test_every_line_alone_in_its_region() -> None:
    page = make_page("straight", seed=2)
    h, w = page.labels.shape
    # Move the lines far apart (a blank band of 300 px between any two): one region each.
    out = np.zeros((h * page.n_lines + 300 * page.n_lines, w), np.int32)
    for k in range(1, page.n_lines + 1):
        ys, xs = np.nonzero(page.labels == k)
        top = ys.min()
        out[ys - top + (k - 1) * 400, xs] = k
    counts, n_edges = edge_moments(out)
    assert n_edges > 0 and counts[1] == counts[2] == 0
    mu = normalise(counts)
    assert mu[1] == pytest.approx(MIN_MOMENT, rel=1e-3) and mu[2] == pytest.approx(MIN_MOMENT, rel=1e-3)
    assert abs(sum(mu) - 1.0) < 1e-9 and mu[0] < 1.0


def test_order_lines_follows_the_text_direction() -> None:
    # Three short vertical-text lines side by side (text runs down): ranked left to right.
    rng = np.random.default_rng(0)
    pts, ids = [], []
    for k, x in zip((7, 3, 5), (10.0, 30.0, 50.0), strict=True):
        y = rng.uniform(0, 200, 50)
        pts.append(np.stack([x + rng.normal(0, 2, 50), y], axis=1))
        ids.append(np.full(50, k))
    rank = order_lines(np.concatenate(pts), np.concatenate(ids), np.zeros(150, np.int64))
    assert [int(rank[i * 50]) for i in range(3)] == [0, 1, 2]


def test_learn_moments_from_files(tmp_path) -> None:
    for i, kind in enumerate(("straight", "curved")):
        _, labels = save_page(make_page(kind, seed=i), tmp_path, stem=f"p{i}")
    result = learn_moments([tmp_path / "p0_labels.png", tmp_path / "p1_labels.png"])
    assert result["pages"] == 2 and len(result["per_page"]) == 2
    assert result["edges"] == sum(p["edges"] for p in result["per_page"])
    assert abs(sum(result["moments"]) - 1.0) < 1e-9 and result["moments"][0] > 0.8
    assert len(result["sources"]) == 2
