"""bench/angle_errors.py: each ground-truth line's direction against its result line's and
that line's frame."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from synthetic import make_page, run_on_label_set, save_page

from bench import angle_errors
from bench.steering import ground_truth
from engine.metric import line_metric
from engine.params import Parameters
from engine.pipeline import segment


def test_axis_angle_is_the_direction_on_the_page_y_down():
    rng = np.random.default_rng(0)
    t = rng.uniform(-200, 200, 2000)
    across = rng.normal(0, 5, 2000)
    for deg in (0.0, 30.0, 73.5, 150.0):
        th = math.radians(deg)
        xs = 500 + t * math.cos(th) - across * math.sin(th)
        ys = 400 + t * math.sin(th) + across * math.cos(th)
        angle, elongation = angle_errors.axis_angle(xs, ys)
        assert angle_errors.angle_gap(angle, deg) < 0.5
        assert 0.0 <= angle < 180.0
        assert elongation > 10


def test_angle_gap_is_taken_over_half_a_turn():
    assert angle_errors.angle_gap(179.0, 1.0) == pytest.approx(2.0)
    assert angle_errors.angle_gap(10.0, 100.0) == pytest.approx(90.0)
    assert angle_errors.angle_gap(170.0, 20.0) == pytest.approx(30.0)


@pytest.fixture(scope="module")
def note_page(tmp_path_factory):
    page = make_page("two_orientations", seed=1)
    return page, save_page(page, tmp_path_factory.mktemp("angle_errors"))


def test_directions_are_the_pages_and_a_note_without_its_frame_is_reported(note_page):
    page, (image, labels) = note_page
    rows = angle_errors.line_angles(str(image), str(labels), Parameters().to_json())
    assert [r["gt"] for r in rows] == list(range(1, page.n_lines + 1))
    for r in rows:
        assert angle_errors.angle_gap(r["gt_angle"], page.angles[r["gt"] - 1] % 180.0) < 2.0
        assert r["line_gap"] < angle_errors.OFF and r["frame_gap"] < angle_errors.OFF
    # Without the orientation split the side note gets the paragraph's frame: its lines are
    # off, and so are their frames.
    flat = Parameters().replace(multi_oriented=False, steep_regions=False)
    rows = angle_errors.line_angles(str(image), str(labels), flat.to_json())
    note = [r for r in rows if angle_errors.angle_gap(page.angles[r["gt"] - 1] % 180.0, 0.0) > 45]
    assert note
    cells, off, off_frame = angle_errors.gap_table(rows)
    assert off == off_frame == len(note)
    assert cells[-1][0] == len(note) and cells[-1][1] == 0
    assert all(not r["correct"] and r["frame_gap"] > 45 for r in note)


def test_frame_gap_is_the_regions_frame_not_the_line(tmp_path):
    # A page skewed by 8-15 deg with the frame search held at 0 deg: the frame gap is the
    # page's skew, whatever the lines did inside that frame.
    page = make_page("skewed", seed=1)
    image, labels = save_page(page, tmp_path)
    held = Parameters().replace(orientation_min=0.0, orientation_max=0.0, multi_oriented=False,
                                steep_regions=False)
    rows = angle_errors.line_angles(str(image), str(labels), held.to_json())
    assert len(rows) == page.n_lines
    for r in rows:
        assert r["frame_gap"] == pytest.approx(angle_errors.angle_gap(r["gt_angle"], 0.0), abs=0.2)
        assert abs(r["line_gap"] - r["frame_gap"]) > 1.0


def test_correct_lines_are_the_line_scores(tmp_path):
    # Rows whose strokes touch: some lines match at 0.5 but not at the 0.75 threshold.
    image, labels = save_page(make_page("touching", seed=1), tmp_path)
    rows = angle_errors.line_angles(str(image), str(labels), Parameters().to_json())
    _, _, seg = segment(str(image), Parameters())
    truth, scored = ground_truth(labels, image, seg.labels.shape)
    score = line_metric(truth, seg.labels, scored, angle_errors.LINE_THRESHOLD)
    assert len(rows) == score.n_gt
    assert sum(r["correct"] for r in rows) == score.correct < score.n_gt


def test_a_line_with_no_direction_is_left_out(tmp_path):
    # A square patch of one row's ink labelled as a line of its own: no direction to speak of.
    page = make_page("straight", seed=2)
    labels = page.labels.copy()
    ys, xs = np.nonzero(labels == 2)
    cy, cx = int(np.median(ys)), int(np.median(xs))
    patch = labels[cy - 20:cy + 20, cx - 20:cx + 20]
    patch[patch > 0] = page.n_lines + 1
    assert np.count_nonzero(labels == page.n_lines + 1) >= angle_errors.MIN_PIXELS
    image, truth = save_page(dataclasses.replace(page, labels=labels), tmp_path)
    rows = angle_errors.line_angles(str(image), str(truth), Parameters().to_json())
    assert [r["gt"] for r in rows] == list(range(1, page.n_lines + 1))


def test_gap_table_bins_and_frames():
    nan = float("nan")
    rows = [{"line_gap": g, "frame_gap": f, "correct": c} for g, f, c in
            [(0.0, 0.0, True), (4.9, 6.0, True), (5.0, 1.0, False), (5.0, 5.0, True),
             (19.9, 30.0, False), (45.0, 45.0, False), (nan, nan, False)]]
    cells, off, off_frame = angle_errors.gap_table(rows)
    assert cells == [(2, 2), (2, 1), (1, 0), (0, 0), (2, 0)]
    assert off == 5 and off_frame == 3


def test_main_writes_the_table_and_a_row_per_line(tmp_path, capsys):
    page = make_page("skewed", seed=1)
    status, out_csv = run_on_label_set(angle_errors.main, page, tmp_path)
    assert status == 0
    table = capsys.readouterr().out
    row = next(r.split() for r in table.splitlines() if r.startswith("synth"))
    assert row[1] == str(page.n_lines)
    lines = out_csv.read_text().splitlines()
    assert lines[0] == "set,page,gt,pixels,gt_angle,line_gap,frame_gap,correct"
    assert len(lines) == 1 + page.n_lines
    assert all(abs(float(x.split(",")[4]) - page.angles[0] % 180.0) < 2.0 for x in lines[1:])
