"""Rows that fan out within one block (moc-train's fanned notes): the block's frame is one
angle, and each row's line has to reach its own.

A row within about 4 deg of the frame gets an initial line at its own angle from the frame's
filter bank alone; a row further off got one near the frame, between two rows, and EM does
not turn a line that far (docs/history.md, session 59: a fan of 12 deg lost 3-4 rows of 10,
one of 18 deg 6). The turned banks of ``oriented_blobs`` (5 deg steps) give those rows lines
at their own angle; a turned blob replaces frame blobs only where it is the better line.
"""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import fanned_rows_page

from engine import oriented_blobs
from engine.arrays import angle_gap, principal_axis
from engine.initial_io import pixel_axes
from engine.metric import line_metric
from engine.params import Parameters
from engine.pipeline import segment


def _row_angles(labels: np.ndarray) -> np.ndarray:
    """Direction (degrees) of each labelled row's pixels, by their principal axis."""
    _, moments, _ = pixel_axes(labels, int(labels.max()))
    return np.degrees(principal_axis(*moments.T)[0])


@pytest.mark.parametrize("spread", [6.0, 12.0])
def test_the_rows_run_at_the_angles_the_page_states(spread):
    page = fanned_rows_page(seed=0, spread_deg=spread)
    measured = _row_angles(page.labels)
    assert page.n_lines == len(measured) == 10
    assert np.max(angle_gap(measured, np.array(page.angles))) < 1.0
    assert page.angles[0] == pytest.approx(0.0) and page.angles[-1] == pytest.approx(spread)


def _found(page, params: Parameters) -> tuple[int, int, float]:
    """Correct and found lines, and the largest gap (degrees) between a row's angle and the
    direction of the result line holding most of its pixels."""
    _, _, seg = segment(page.image, params)
    score = line_metric(page.labels, seg.labels, page.labels > 0)
    segments = seg.lines.segments()
    direction = np.degrees(np.arctan2(segments[:, 1, 1] - segments[:, 0, 1],
                                      segments[:, 1, 0] - segments[:, 0, 0]))
    gaps = []
    for row, angle in enumerate(page.angles, start=1):
        held = seg.labels[(page.labels == row) & (seg.labels > 0)]
        gaps.append(float(angle_gap(angle, direction[np.bincount(held).argmax() - 1])))
    return score.correct, score.n_pred, max(gaps)


@pytest.mark.parametrize("oriented_blobs", [0, 3])
def test_a_narrow_fan_gets_a_line_per_row_at_its_angle(oriented_blobs):
    page = fanned_rows_page(seed=0, spread_deg=6.0)
    correct, found, worst = _found(page, Parameters(oriented_blobs=oriented_blobs))
    assert (correct, found) == (10, 10)
    assert worst < 1.0


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("spread", [12.0, 18.0])
def test_a_wide_fan_gets_a_line_per_row_at_its_angle(seed, spread):
    page = fanned_rows_page(seed=seed, spread_deg=spread)
    correct, found, worst = _found(page, Parameters())
    assert (correct, found) == (10, 10)
    assert worst < 1.0


def test_without_the_turned_banks_a_wide_fan_keeps_lines_near_the_frame():
    page = fanned_rows_page(seed=0, spread_deg=12.0)
    correct, found, worst = _found(page, Parameters(oriented_blobs=0))
    assert correct <= 7 and worst > 3.0


def _two_rows_and_a_turned_blob(turned_share: float, freed: list[int]) -> np.ndarray:
    """Samples 0-3 on frame blob 1, 4-7 on frame blob 2 (each with 0.9 of its samples within
    half a text height of its axis); the ``freed`` samples left their frame blob; turned blob
    7 holds samples 2-5, all its inliers, with ``turned_share`` of its samples on its axis.
    Returns each sample's blob after the turned blob had its turn (0: still free)."""
    frame = np.array([1, 1, 1, 1, 2, 2, 2, 2])
    out = frame.copy()
    out[freed] = 0
    share = np.zeros(8)
    share[[1, 2]] = 0.9
    share[7] = turned_share
    blob = np.array([2, 3, 4, 5])
    oriented_blobs.take_freed_samples(out, frame, np.array([7]), [blob], [blob], share)
    return out


def test_a_turned_blob_takes_freed_samples_only_as_the_better_line(monkeypatch):
    freed = [2, 3, 4, 5]
    assert list(_two_rows_and_a_turned_blob(0.95, freed)) == [1, 1, 7, 7, 7, 7, 2, 2]
    # A blob across two rows' ends lies on its axis worse than the rows on theirs.
    assert list(_two_rows_and_a_turned_blob(0.6, freed)) == [1, 1, 0, 0, 0, 0, 2, 2]
    monkeypatch.setattr(oriented_blobs, "BETTER_LINES", False)
    assert list(_two_rows_and_a_turned_blob(0.6, freed)) == [1, 1, 7, 7, 7, 7, 2, 2]


def test_a_turned_blob_needs_most_of_its_inliers_free():
    assert list(_two_rows_and_a_turned_blob(0.95, [2])) == [1, 1, 0, 1, 2, 2, 2, 2]
    assert list(_two_rows_and_a_turned_blob(0.95, [2, 3])) == [1, 1, 7, 7, 2, 2, 2, 2]
