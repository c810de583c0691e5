"""bench/frame_losses.py: a ground-truth line classed by the block that holds its samples."""

from __future__ import annotations

import numpy as np

from bench.frame_losses import classify_lines, line_axes
from engine.arrays import angle_gap


def _page() -> tuple[np.ndarray, np.ndarray]:
    """A 400 x 600 label map with three lines: 1 a horizontal row, 2 a vertical note, 3 a
    row at -30 deg (rising to the right, y down); and samples on every pixel of each, every
    fourth column and row."""
    truth = np.zeros((400, 600), np.int32)
    truth[40:56, 20:420] = 1
    truth[80:380, 500:516] = 2
    xs = np.arange(60, 360)
    ys = (300 - np.tan(np.radians(30)) * (xs - 60)).astype(int)
    for dy in range(-6, 7):
        truth[ys + dy, xs] = 3
    yy, xx = np.nonzero(truth)
    keep = (yy % 4 == 0) & (xx % 4 == 0)
    return truth, np.stack([xx[keep], yy[keep]], axis=1).astype(float)


def test_line_axes_are_the_lines_directions() -> None:
    truth, _ = _page()
    axes = line_axes(truth, np.array([1, 2, 3]))
    assert angle_gap(axes[1], 0.0) < 1.0
    assert angle_gap(axes[2], 90.0) < 1.0
    assert angle_gap(axes[3], -30.0) < 2.0


def test_angle_gap_is_undirected() -> None:
    assert angle_gap(-89.0, 89.0) == 2.0
    assert angle_gap(10.0, -170.0) == 0.0
    assert angle_gap(0.0, 90.0) == 90.0


def test_lines_are_classed_by_their_block_and_its_frame() -> None:
    truth, xy = _page()
    on = truth[xy[:, 1].astype(int), xy[:, 0].astype(int)]
    # Block 0 framed at 0 deg holds the row and the vertical note; the -30 deg row is cut
    # between block 1 (framed at -30 deg) and block 0 at x 200 (about half of it each side).
    region = np.zeros(len(xy), np.int64)
    region[(on == 3) & (xy[:, 0] < 200)] = 1
    records = {r["label"]: r for r in classify_lines(truth, xy, region, np.array([0.0, -30.0]))}
    assert records[1]["class"] == "own angle" and records[1]["share"] == 1.0
    assert records[2]["class"] == "other angle"
    assert records[3]["class"] == "split"
    # The same row with 90 % of its samples in its own block: mostly one.
    region[on == 3] = 1
    three = np.flatnonzero(on == 3)
    region[three[: len(three) // 10]] = 0
    records = {r["label"]: r for r in classify_lines(truth, xy, region, np.array([0.0, -30.0]))}
    assert records[3]["class"] == "mostly one" and 0.8 <= records[3]["share"] < 0.95
    # All of it in its own block: its own angle; in block 0 (0 deg, 30 deg off): another.
    frames = np.array([0.0, -30.0])
    region[on == 3] = 1
    assert {r["label"]: r["class"] for r in classify_lines(truth, xy, region, frames)}[3] == "own angle"
    region[on == 3] = 0
    assert {r["label"]: r["class"] for r in classify_lines(truth, xy, region, frames)}[3] == "other angle"


def test_a_line_with_too_few_samples_is_not_classed() -> None:
    truth, xy = _page()
    on = truth[xy[:, 1].astype(int), xy[:, 0].astype(int)]
    few = np.flatnonzero(on == 2)[:9]
    xy = np.concatenate([xy[on != 2], xy[few]])
    labels = [r["label"] for r in classify_lines(truth, xy, np.zeros(len(xy), np.int64), np.array([0.0]))]
    assert labels == [1, 3]
