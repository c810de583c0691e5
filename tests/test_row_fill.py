"""Issue 26, failure 1 on poilus AN_0121-2: a row with no initial line (its blob under Otsu's
level or the ink-ratio test) lends its samples to the nearest line, whose band then covers
two rows. ``row_fill`` gives every row of a region's period that no initial line reaches a
line of its own (engine.row_fill). Each test runs the mechanism switched off too and asserts
the failure it fixes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from synthetic import make_page

from engine import row_fill as _row_fill
from engine.metric import contest_metric
from engine.model import to_region_frame
from engine.params import Parameters
from engine.pipeline import finish, prepare, run_em


@pytest.fixture(scope="module")
def rows():
    page = make_page("dense_rows", seed=0)
    return page, prepare(page.image)


def _without_row(prep, k: int):
    """The prepared lines less the ``k``-th line of the largest region (top to bottom)."""
    lines = prep.initial_lines
    region = int(np.bincount(lines.region).argmax())
    own = np.flatnonzero(lines.region == region)
    assert len(own) >= 4, len(own)
    k = k % len(own)
    keep = np.setdiff1d(np.arange(len(lines)), own[k])
    return lines.take(keep), lines.take(own[k:k + 1]), region


def _fill(prep, lines, reach: float):
    return _row_fill.fill_rows(prep.samples, prep.sample_region, lines, prep.regions, prep.row_pitch, reach,
                               prep.stats, prep.params)


def test_a_row_without_a_line_gets_one(rows) -> None:
    """dense_rows (15 rows of small writing in one region): the last row's initial line taken
    away (a signature's short row the filter bank lost), its samples lie a pitch from every
    other line; fill_rows gives them one line,
    on the row (within a tenth of the pitch of the line taken away); with row_fill 0 it adds
    none."""
    page, prep = rows
    assert len(prep.initial_lines) == page.n_lines
    lines, gone, region = _without_row(prep, -1)
    filled, added = _fill(prep, lines, 0.75)
    assert added == 1 and len(filled) == len(prep.initial_lines)
    pitch = prep.row_pitch[region].pitch
    phi = prep.regions[region].phi
    new = np.setdiff1d(np.arange(len(filled)), [int(np.argmin(np.abs(filled.b - b))) for b in lines.b])
    assert len(new) == 1
    centre = to_region_frame(gone.segments(0.0)[:, 0], phi)
    across = filled.take(new).a * centre[:, 0] + filled.take(new).b - centre[:, 1]
    assert abs(float(across[0])) < 0.1 * pitch, (across, pitch)
    assert _fill(prep, lines, 0.0) == (lines, 0)
    # The prepared lines reach every row: nothing to fill.
    assert _fill(prep, prep.initial_lines, 0.75)[1] == 0


def test_em_keeps_each_row_on_its_line(rows) -> None:
    """EM from the lines less the last row's: without a line for that row its neighbour takes
    both rows (FM under 1); with the row filled, one line per row (FM 1.0)."""
    page, prep = rows
    lines, _, _ = _without_row(prep, -1)
    scores = {}
    for reach in (0.0, 0.75):
        start, _ = _fill(prep, lines, reach)
        *_, last = run_em(prep, start)
        seg = finish(prep, last)
        scores[reach] = contest_metric(page.labels, seg.labels, ink=page.labels > 0).fm
    assert scores[0.75] == pytest.approx(1.0), scores
    assert scores[0.0] < 0.9, scores


def test_prepare_fills_rows_only_when_asked() -> None:
    """The field reaches stage 6: on the wide_words page every row already has its line, so
    prepare's lines are the same with and without it (the mechanism is dormant)."""
    page = make_page("wide_words", seed=1)
    on = prepare(page.image, Parameters(row_fill=0.75)).initial_lines
    off = prepare(page.image, dataclasses.replace(Parameters(), row_fill=0.0)).initial_lines
    assert len(on) == len(off) == page.n_lines


def test_only_rows_without_a_line_are_filled() -> None:
    """Made-up rows 100 px apart, lines on the first three, the first turned 8.5 deg off its
    row: its row's ends lie more than half a pitch from every line, but in the row of the
    period that line runs in (a row's ascenders, diacritics or ends: ahte moc_train_18), so
    they are no new row; the fourth row, with no line, is."""
    from engine.model import LineSet

    rng = np.random.default_rng(0)
    pitch = 100.0
    u = rng.uniform(0.0, 1000.0, 800)
    v = np.concatenate([k * pitch + rng.normal(0.0, 5.0, 200) for k in range(4)])
    uv = np.stack([u, v], axis=1)
    n = 3
    lines = LineSet(np.array([0.15, 0.0, 0.0]), np.array([-75.0, pitch, 2 * pitch]), np.full(n, 500.0),
                    np.full(n, 8.0), np.full(n, 250.0), np.full(n, 1 / 3), np.zeros(n, np.int32), np.zeros(n), True)
    far_first = np.abs(v[:200] - (0.15 * u[:200] - 75.0)) / np.sqrt(1 + 0.15**2) > 0.5 * pitch
    assert far_first.sum() >= 60  # the first row's ends: a group of their own without the check
    groups = _row_fill.uncovered_rows(uv, lines, pitch, 0.0, 0.5, 60)
    assert len(groups) == 1 and np.all(np.abs(uv[groups[0], 1] - 3 * pitch) < 50.0), [len(g) for g in groups]


def test_rows_between_lines_are_not_filled() -> None:
    """Made-up rows 100 px apart with lines on the first and the third: the second, between
    them, is left to them (what lies between two text rows with no line of its own is a
    flourish or a rule crossing them, poilus-dev); the fourth, beyond the last line, is
    filled."""
    from engine.model import LineSet

    rng = np.random.default_rng(1)
    pitch = 100.0
    uv = np.stack([rng.uniform(0.0, 1000.0, 800),
                   np.concatenate([k * pitch + rng.normal(0.0, 5.0, 200) for k in range(4)])], axis=1)
    n = 2
    lines = LineSet(np.zeros(n), np.array([0.0, 2 * pitch]), np.full(n, 500.0), np.full(n, 8.0),
                    np.full(n, 250.0), np.full(n, 0.5), np.zeros(n, np.int32), np.zeros(n), True)
    groups = _row_fill.uncovered_rows(uv, lines, pitch, 0.0, 0.75, 60)
    assert len(groups) == 1 and np.all(np.abs(uv[groups[0], 1] - 3 * pitch) < 50.0), [len(g) for g in groups]
