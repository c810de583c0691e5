"""Property-based tests (hypothesis): invariants of the contest and ICDAR 2017 line metrics,
and write -> read round trips of PAGE XML and ICDAR ``.dat`` on random small label maps.

Known limitation found here: both metrics match lines greedily, best score first, ties broken
by line index.  When two candidate pairs sharing a line have exactly the same score (IU or
MatchScore <= 0.5), which one wins depends on the ids, and so can the line metric's counts
(e.g. GT ``[[1,1,0],[2,2,2]]`` vs result ``[[1,2,1],[2,0,0]]``: tp 2 or 1 depending on which
result line is called 1).  The contest metric at its T_a > 0.5 is unaffected.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from engine.export import read_dat, write_dat, write_label_png, write_page_xml
from engine.groundtruth import read_label_map
from engine.metric import contest_metric, line_metric
from engine.model import LineSet, Region, Segmentation

SETTINGS = settings(max_examples=30, deadline=None)

#: Random label maps: up to 24 x 32 pixels, ids 0 (none) .. 6, mostly background.
label_maps = hnp.arrays(np.int32, st.tuples(st.integers(1, 24), st.integers(1, 32)),
                        elements=st.sampled_from([0, 0, 0, 1, 2, 3, 4, 5, 6]))


@st.composite
def map_pairs(draw):
    """Two label maps of the same shape (ground truth, result) and a permutation of the ids."""
    gt = draw(label_maps)
    pred = draw(hnp.arrays(np.int32, gt.shape, elements=st.integers(0, 6)))
    perm = np.array([0, *draw(st.permutations(range(1, 7)))], np.int32)
    return gt, pred, perm


def _relabel(labels: np.ndarray, perm: np.ndarray, offset: int) -> np.ndarray:
    """Ids permuted (and moved to large, non-contiguous values); 0 stays 0."""
    return np.where(labels > 0, perm[labels] * 1000 + offset, 0)


def _has_ties(gt: np.ndarray, pred: np.ndarray) -> bool:
    """Whether two overlapping (GT, result) pairs that share a line have the same pixel IU:
    then greedy best-first matching may pick either, depending on the order of the ids."""
    ink = (gt > 0) | (pred > 0)
    pairs = {}
    for g in np.unique(gt[gt > 0]):
        for r in np.unique(pred[pred > 0]):
            inter = np.count_nonzero((gt == g) & (pred == r) & ink)
            if inter:
                pairs[(g, r)] = round(inter / np.count_nonzero(((gt == g) | (pred == r)) & ink), 12)
    return any(a != b and (a[0] == b[0] or a[1] == b[1]) and pairs[a] == pairs[b] for a in pairs for b in pairs)


@SETTINGS
@given(map_pairs(), st.sampled_from([0.3, 0.5, 0.9, 0.95, 1.0]))
def test_contest_metric_invariants(pair, t_a) -> None:
    """Self-score is perfect; o2o <= min(N, M); rates in [0, 1]; for the contests' T_a > 0.5
    renaming line ids or swapping the two maps changes no count."""
    gt, pred, perm = pair
    own = contest_metric(gt, gt, t_a=t_a)
    assert own.fm == 1.0 and own.o2o == own.n == own.m
    score = contest_metric(gt, pred, t_a=t_a)
    assert 0 <= score.o2o <= min(score.n, score.m)
    assert all(0.0 <= v <= 1.0 for v in (score.dr, score.ra, score.fm))
    if t_a > 0.5:  # each line has at most one partner above T_a: the matching is unique
        renamed = contest_metric(_relabel(gt, perm, 7), _relabel(pred, perm[::-1].copy(), 3), t_a=t_a)
        assert (renamed.n, renamed.m, renamed.o2o) == (score.n, score.m, score.o2o)
        # MatchScore is symmetric: swapping the roles swaps N and M and keeps the matches.
        swapped = contest_metric(pred, gt, t_a=t_a)
        assert (swapped.n, swapped.m, swapped.o2o) == (score.m, score.n, score.o2o)


@SETTINGS
@given(map_pairs(), st.sampled_from([0.5, 0.75, 1.0]))
def test_line_metric_invariants(pair, threshold) -> None:
    """Self-score gives line IU, line F1 and pixel IU 1; correct <= min(n_gt, n_pred); pixel
    counts add up to the labelled pixels; renaming ids in order changes no count, and any
    renaming changes none unless two candidate pairs tie on IU (greedy matching then follows
    the id order: a known limitation, see the module docstring)."""
    gt, pred, perm = pair
    own = line_metric(gt, gt, threshold=threshold)
    assert own.line_iu == own.line_f1 == own.pixel_iu == 1.0
    assert own.correct == own.n_gt and own.extra == own.missed == 0
    score = line_metric(gt, pred, threshold=threshold)
    assert 0 <= score.correct <= min(score.n_gt, score.n_pred)
    ink = (gt > 0) | (pred > 0)
    assert score.tp + score.fn == np.count_nonzero(gt[ink] > 0)
    assert score.tp + score.fp == np.count_nonzero(pred[ink] > 0)
    in_order = np.arange(7, dtype=np.int32)
    assert line_metric(_relabel(gt, in_order, 1), _relabel(pred, in_order, 5), threshold=threshold) == score
    if not _has_ties(gt, pred):
        renamed = line_metric(_relabel(gt, perm, 1), _relabel(pred, perm[::-1].copy(), 5), threshold=threshold)
        assert renamed == score


@st.composite
def line_pages(draw, blobby: bool):
    """A page with 1-4 horizontal text lines in bands separated by >= 3 blank rows: each line
    a rectangle, or (``blobby``) a row of 'letters' of random sizes and vertical offsets."""
    n = draw(st.integers(1, 4))
    w = draw(st.integers(30, 90))
    heights = [draw(st.integers(3, 10)) for _ in range(n)]
    gaps = [draw(st.integers(3, 8)) for _ in range(n + 1)]
    h = sum(heights) + sum(gaps)
    labels = np.zeros((h, w), np.int32)
    y = gaps[0]
    for k in range(n):
        x0 = draw(st.integers(0, w // 3))
        x1 = draw(st.integers(x0 + 5, w - 1))
        if not blobby:
            labels[y:y + heights[k], x0:x1 + 1] = k + 1
        else:
            x = x0
            while x < x1:
                lw = draw(st.integers(2, 7))
                top = y + draw(st.integers(0, heights[k] // 2))
                bottom = y + heights[k] - draw(st.integers(0, heights[k] // 3))
                labels[top:bottom, x:min(x + lw, x1 + 1)] = k + 1
                x += lw + draw(st.integers(0, 3))
        y += heights[k] + gaps[k + 1]
    return labels


def _segmentation(labels: np.ndarray) -> Segmentation:
    n = int(labels.max())
    ys = [np.nonzero(labels == k)[0] for k in range(1, n + 1)]
    lines = LineSet(a=np.zeros(n), b=np.array([float(y.mean()) for y in ys]), c=np.full(n, labels.shape[1] / 2),
                    sigma_t=np.array([max(float(y.std()), 0.5) for y in ys]), sigma_s=np.full(n, 10.0),
                    prior=np.full(n, 1.0 / n), region=np.zeros(n, np.int32), phi=np.zeros(n))
    h, w = labels.shape
    return Segmentation(labels, lines, np.zeros(0, np.int32), (Region(0, 0.0, (0, 0, w, h), 10),))


@SETTINGS
@given(line_pages(blobby=False))
def test_page_xml_round_trip_rectangular_lines(tmp_path_factory, labels) -> None:
    """Rectangular lines -> write_page_xml -> read_label_map on their own ink: the same map."""
    path = tmp_path_factory.mktemp("page") / "p.page.xml"
    write_page_xml(path, _segmentation(labels), "p.png", labels.shape)
    back = read_label_map(path, ink=labels > 0)
    assert np.array_equal(back, labels)


@SETTINGS
@given(line_pages(blobby=True))
def test_page_xml_round_trip_blobby_lines(tmp_path_factory, labels) -> None:
    """Lines of uneven 'letters' -> PAGE XML -> read back on their ink: each line keeps at
    least 90 % of its pixels, and nothing outside the ink is labelled."""
    path = tmp_path_factory.mktemp("page") / "p.page.xml"
    write_page_xml(path, _segmentation(labels), "p.png", labels.shape)
    back = read_label_map(path, ink=labels > 0)
    assert back.shape == labels.shape and not back[labels == 0].any()
    for k in range(1, int(labels.max()) + 1):
        mine = labels == k
        assert np.count_nonzero(back[mine] == k) >= 0.9 * mine.sum(), k


@SETTINGS
@given(hnp.arrays(np.int32, st.tuples(st.integers(1, 40), st.integers(1, 40)),
                  elements=st.integers(-(2**31), 2**31 - 1)))
def test_dat_round_trip_is_exact(tmp_path_factory, labels) -> None:
    """Any int32 label map -> .dat (4 bytes a pixel) -> the same map."""
    path = tmp_path_factory.mktemp("dat") / "x.dat"
    write_dat(path, labels)
    assert path.stat().st_size == labels.size * 4
    back = read_dat(path, labels.shape)
    assert back.dtype == np.int32 and np.array_equal(back, labels)


@SETTINGS
@given(hnp.arrays(np.int32, st.tuples(st.integers(1, 30), st.integers(1, 30)), elements=st.integers(0, 65535)))
def test_label_png_round_trip_is_exact(tmp_path_factory, labels) -> None:
    """Any label map with ids 0..65535 -> 16-bit PNG -> the same values."""
    from PIL import Image

    path = tmp_path_factory.mktemp("png") / "x.labels.png"
    write_label_png(path, labels)
    with Image.open(path) as im:
        assert np.array_equal(np.asarray(im).astype(np.int64), labels)
