"""engine.metric (contest and ICDAR 2017 line scores) on hand-computed examples, and
engine.evaluate's pairing, polygon handling and reports."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image

from engine.evaluate import evaluate, page_ink, page_stem, polygon_truth_on_ink
from engine.export import write_dat, write_label_png, write_page_xml
from engine.metric import ContestScore, LineScore, combine, combine_lines, contest_metric, line_metric
from engine.model import LineSet, Region, Segmentation


def _example() -> tuple[np.ndarray, np.ndarray]:
    """GT: three 10-pixel lines on rows 0, 2, 4. Result: A = line 1 exactly, B = 9 of line 2's
    pixels, C and D = the two halves of line 3, E = a false line on row 6 (5 pixels)."""
    gt = np.zeros((8, 10), np.int32)
    gt[0], gt[2], gt[4] = 1, 2, 3
    pred = np.zeros((8, 10), np.int32)
    pred[0] = 10
    pred[2, :9] = 20
    pred[4, :5] = 30
    pred[4, 5:] = 40
    pred[6, :5] = 50
    return gt, pred


def _random_lines(seed: int = 0, n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lab = np.zeros((12 * n, 80), np.int32)
    for k in range(1, n + 1):
        y = 12 * (k - 1) + 4
        lab[y:y + 5, 5:75][rng.random((5, 70)) < 0.6] = k
    return lab


# ----------------------------------------------------------------------------- contest metric

def test_hand_computed_contest_example():
    gt, pred = _example()
    s = contest_metric(gt, pred)  # T_a = 0.95: only A matches
    assert (s.n, s.m, s.o2o) == (3, 5, 1)
    assert s.dr == pytest.approx(1 / 3) and s.ra == pytest.approx(1 / 5)
    assert s.fm == pytest.approx(0.25)
    s = contest_metric(gt, pred, t_a=0.85)  # B's MatchScore is 9/10
    assert s.o2o == 2 and s.fm == pytest.approx(0.5)
    assert s.per_gt_match.tolist() == [0, 10, 20, 0]
    # At T_a = 0.5, C and D both reach 0.5 with line 3, but it can be matched only once.
    s = contest_metric(gt, pred, t_a=0.5)
    assert s.o2o == 3 and s.per_gt_match[3] in (30, 40)


def test_contest_metric_on_given_ink():
    gt, pred = _example()
    ink = np.zeros(gt.shape, bool)
    ink[:, :5] = True  # only the left half is ink: D has no ink pixel and does not count
    s = contest_metric(gt, pred, ink)
    assert (s.n, s.m, s.o2o) == (3, 4, 3)
    assert s.dr == 1.0 and s.ra == pytest.approx(0.75) and s.fm == pytest.approx(6 / 7)


def test_identical_and_permuted_labels_score_one():
    gt = _random_lines()
    s = contest_metric(gt, gt)
    assert (s.n, s.m, s.o2o, s.fm) == (6, 6, 6, 1.0)
    assert s.per_gt_match.tolist() == list(range(7))
    perm = np.array([0, 4, 6, 1, 3, 5, 2])
    s = contest_metric(gt, perm[gt])
    assert s.fm == 1.0 and s.per_gt_match[1:].tolist() == perm[1:].tolist()


def test_splitting_a_line_costs_exactly_one_match():
    gt = _random_lines(seed=3)
    split = gt.copy()
    half = (gt == 2) & (np.arange(gt.shape[1]) >= 40)[None, :]
    split[half] = 99
    before, after = contest_metric(gt, gt), contest_metric(gt, split)
    assert after.o2o == before.o2o - 1 and after.m == before.m + 1 and after.n == before.n
    assert after.per_gt_match[2] == 0


def test_empty_cases():
    z = np.zeros((4, 4), np.int32)
    s = contest_metric(z, z)
    assert (s.n, s.m, s.o2o, s.dr, s.ra, s.fm) == (0, 0, 0, 1.0, 1.0, 1.0)
    g = z.copy()
    g[1] = 1
    s = contest_metric(g, z)
    assert (s.n, s.m, s.dr, s.ra, s.fm) == (1, 0, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="shape"):
        contest_metric(g, np.zeros((4, 5), np.int32))


def test_combine_sums_counts():
    a = ContestScore.from_counts(10, 12, 9)
    b = ContestScore.from_counts(5, 4, 2)
    c = combine([a, b])
    assert (c.n, c.m, c.o2o) == (15, 16, 11)
    assert c.dr == pytest.approx(11 / 15) and c.ra == pytest.approx(11 / 16)
    assert c.fm == pytest.approx(2 * (11 / 15) * (11 / 16) / (11 / 15 + 11 / 16))


# ----------------------------------------------------------------------------- line metric

def test_hand_computed_line_metric():
    gt, pred = _example()
    s = line_metric(gt, pred)
    # A-1 and B-2 are correct (precision 1, recall >= 0.9); line 3's partner has recall 0.5.
    assert (s.n_gt, s.n_pred, s.correct, s.missed, s.extra) == (3, 5, 2, 1, 3)
    assert s.line_iu == pytest.approx(2 / 6) and s.line_f1 == pytest.approx(4 / 8)
    # TP = 10 + 9 + 5; GT pixels 30, result pixels 34.
    assert (s.tp, s.fn, s.fp) == (24, 6, 10)
    assert s.pixel_iu == pytest.approx(24 / 40)
    # With a threshold of 0.5 the half-line pair is correct too.
    s = line_metric(gt, pred, threshold=0.5)
    assert (s.correct, s.missed, s.extra) == (3, 0, 2)


def test_line_metric_identical_and_combined():
    gt = _random_lines(seed=5)
    s = line_metric(gt, gt)
    assert s.line_iu == 1.0 and s.line_f1 == 1.0 and s.pixel_iu == 1.0 and s.correct == 6
    t = combine_lines([s, LineScore(3, 2, 1, 2, 1, 10, 5, 5)])
    assert (t.n_gt, t.n_pred, t.correct, t.missed, t.extra) == (9, 8, 7, 2, 1)
    assert t.tp == s.tp + 10 and t.fp == 5 and t.fn == 5


def test_metric_is_fast_on_a_large_page():
    import time
    rng = np.random.default_rng(0)
    gt = np.repeat(np.arange(1, 101), 20)[:, None] * (rng.random((2000, 1500)) < 0.1)
    pred = np.roll(gt, 3, axis=0)
    t = time.perf_counter()
    contest_metric(gt, pred)
    line_metric(gt, pred)
    assert time.perf_counter() - t < 5.0  # a per-pixel Python loop would take minutes


# ----------------------------------------------------------------------------- evaluate

def test_page_stem():
    assert page_stem("a/foo.labels.png") == "foo" == page_stem("foo.xml") == page_stem("foo.page.xml")
    assert page_stem("b/foo.dat") == "foo" and page_stem("moc_train_1.png") == "moc_train_1"


def test_evaluate_pairs_by_stem_and_reports(tmp_path):
    gt_dir, out_dir = tmp_path / "gt", tmp_path / "out"
    gt_dir.mkdir()
    out_dir.mkdir()
    gt, pred = _example()
    Image.fromarray(gt.astype(np.uint8)).save(gt_dir / "p1.png")
    write_label_png(out_dir / "p1.labels.png", pred)
    g2 = _random_lines()
    Image.fromarray(g2.astype(np.uint8)).save(gt_dir / "p2.png")
    write_dat(out_dir / "p2.dat", g2)
    Image.fromarray(g2.astype(np.uint8)).save(gt_dir / "lonely.png")
    with pytest.warns(UserWarning, match="lonely"):
        report = evaluate(gt_dir, sorted(out_dir.iterdir()))
    assert [p.stem for p in report.pages] == ["p1", "p2"]
    assert report.unpaired == [str(gt_dir / "lonely.png")]
    p1, p2 = report.pages
    assert (p1.contest.n, p1.contest.m, p1.contest.o2o) == (3, 5, 1)
    assert p2.contest.fm == 1.0 and p2.line.line_iu == 1.0
    total = report.total_contest
    assert (total.n, total.m, total.o2o) == (9, 11, 7)
    table = report.format_table()
    assert "TOTAL" in table and "p1" in table and "unpaired" in table
    report.to_csv(tmp_path / "s.csv")
    rows = list(csv.DictReader(open(tmp_path / "s.csv", encoding="utf-8")))
    assert [r["page"] for r in rows] == ["p1", "p2", "TOTAL"] and rows[2]["o2o"] == "7"


def _write_polygon_case(tmp_path, gray, labels, rows, half_length) -> None:
    """Writes ``gray`` as img/pg.png and a PAGE GT (gt/pg.xml) of horizontal lines at ``rows``
    whose polygons are the boxes of ``labels``; makes the out/ folder."""
    h, w = gray.shape
    n = len(rows)
    lines = LineSet(a=np.zeros(n), b=np.asarray(rows, float), c=np.full(n, w / 2), sigma_t=np.full(n, 2.0),
                    sigma_s=np.full(n, half_length), prior=np.full(n, 1.0 / n), region=np.zeros(n, np.int32),
                    phi=np.zeros(n))
    seg = Segmentation(labels, lines, np.zeros(0, np.int32), (Region(0, 0.0, (0, 0, w, h), 10),))
    for d in ("gt", "img", "out"):
        (tmp_path / d).mkdir()
    write_page_xml(tmp_path / "gt" / "pg.xml", seg, "pg.png", (h, w))
    Image.fromarray(gray).save(tmp_path / "img" / "pg.png")


def _polygon_case(tmp_path):
    """A page image with two ink lines, a PAGE GT with boxes around them (and around paper)."""
    h, w = 40, 60
    gray = np.full((h, w), 250, np.uint8)
    gray[8:12, 5:55] = 20
    gray[25:29, 5:55] = 20
    labels = np.zeros((h, w), np.int32)
    labels[4:16] = 1
    labels[20:34] = 2
    _write_polygon_case(tmp_path, gray, labels, [10.0, 27.0], 12.0)
    return gray, labels


def _score_polygon_case(tmp_path, pred: np.ndarray) -> ContestScore:
    """Contest score of the result ``pred`` (written as out/pg.dat) against gt/pg.xml."""
    write_dat(tmp_path / "out" / "pg.dat", pred)
    report = evaluate([tmp_path / "gt" / "pg.xml"], [tmp_path / "out" / "pg.dat"],
                      image_dir=tmp_path / "img")
    return report.pages[0].contest


def test_evaluate_polygon_gt_scored_on_image_ink(tmp_path):
    gray, labels = _polygon_case(tmp_path)
    ink = gray < 128
    c = _score_polygon_case(tmp_path, np.where(ink, labels, 0))
    assert (c.n, c.m, c.o2o) == (2, 2, 2)
    # Labelling all paper too changes nothing: only ink inside the polygons is scored.
    write_dat(tmp_path / "out" / "pg.dat", labels)
    report = evaluate([tmp_path / "gt" / "pg.xml"], [tmp_path / "out" / "pg.dat"],
                      image_dir=tmp_path / "img")
    assert report.pages[0].contest.fm == 1.0


def test_evaluate_polygon_needs_images(tmp_path):
    gray, labels = _polygon_case(tmp_path)
    write_dat(tmp_path / "out" / "pg.dat", labels)
    # No image folder and no image beside the ground truth: skipped, saying where it looked.
    with pytest.warns(UserWarning, match="needed for polygon files"):
        report = evaluate([tmp_path / "gt" / "pg.xml"], [tmp_path / "out" / "pg.dat"])
    assert report.pages == [] and str(tmp_path / "gt") in report.skipped[0][1]
    # An image folder without this page's image: the page is skipped with the reason.
    with pytest.warns(UserWarning, match="pg"):
        report = evaluate([tmp_path / "gt" / "pg.xml"], [tmp_path / "out" / "pg.dat"],
                          image_dir=tmp_path / "out")
    assert report.pages == [] and report.skipped[0][0] == "pg"


def test_evaluate_polygon_gt_on_a_photographed_card(tmp_path):
    """A grey card photographed on white: Otsu over the whole page would take the card for
    ink (every pixel inside the polygons scored, none of them matched by a result on the
    writing); the threshold is taken inside the polygons, so only the writing is scored."""
    h, w = 120, 160
    gray = np.full((h, w), 250, np.uint8)
    gray[10:110, 10:150] = 150  # the card: most of the page
    gray[30:34, 20:140] = 40
    gray[70:74, 20:140] = 40
    labels = np.zeros((h, w), np.int32)
    labels[22:44, 15:145] = 1
    labels[60:84, 15:145] = 2
    _write_polygon_case(tmp_path, gray, labels, [32.0, 72.0], 35.0)
    assert page_ink(tmp_path / "img" / "pg.png")[50, 50]  # the whole-page threshold: card = ink
    writing = gray < 100
    c = _score_polygon_case(tmp_path, np.where(writing, labels, 0))
    assert (c.n, c.m, c.o2o) == (2, 2, 2)
    gt, ink = polygon_truth_on_ink(tmp_path / "gt" / "pg.xml", tmp_path / "img" / "pg.png")
    assert np.array_equal(ink & (labels > 0), writing & (labels > 0))
    assert np.array_equal(gt, np.where(writing, labels, 0))
