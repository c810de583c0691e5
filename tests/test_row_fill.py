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
    assert len(added) == 1 and len(filled) == len(prep.initial_lines)
    pitch = prep.row_pitch[region].pitch
    phi = prep.regions[region].phi
    new = np.setdiff1d(np.arange(len(filled)), [int(np.argmin(np.abs(filled.b - b))) for b in lines.b])
    assert len(new) == 1
    centre = to_region_frame(gone.segments(0.0)[:, 0], phi)
    across = filled.take(new).a * centre[:, 0] + filled.take(new).b - centre[:, 1]
    assert abs(float(across[0])) < 0.1 * pitch, (across, pitch)
    unfilled, none = _fill(prep, lines, 0.0)
    assert unfilled is lines and len(none) == 0
    # The prepared lines reach every row: nothing to fill.
    assert len(_fill(prep, prep.initial_lines, 0.75)[1]) == 0


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


def test_a_row_needs_letters_to_get_a_line(rows) -> None:
    """A row beyond the last line whose samples lie on components of no letter's size gets
    no line: all diacritic-sized (a form's dashed rule, a card's specks: under
    diacritic_height x H_cc) or all chain-sized (a paraph's loops: over CHAIN_HEIGHTS x
    H_cc). With 15 % of its samples on letter-sized components (no more than
    diacritic_fraction off letter size) it gets one; so it does with the test switched off
    (remove_diacritic_lines False) or without heights."""
    from engine.components import CHAIN_HEIGHTS

    page, prep = rows
    lines, gone, region = _without_row(prep, -1)
    members = np.flatnonzero(prep.sample_region == region)
    uv = to_region_frame(prep.samples[members].astype(np.float64), prep.regions[region].phi)
    (row,) = _row_fill.uncovered_rows(uv, lines.take(np.flatnonzero(lines.region == region)),
                                      prep.row_pitch[region].pitch, prep.row_pitch[region].phase, 0.75,
                                      prep.params.min_region_samples)
    h = prep.stats.h_cc
    args = (prep.samples, prep.sample_region, lines, prep.regions, prep.row_pitch, 0.75, prep.stats)

    def added(height_off: float, params=prep.params, share_letters: float = 0.0) -> int:
        heights = prep.sample_heights().astype(float)
        heights[members[row]] = height_off
        heights[members[row][: int(np.ceil(share_letters * len(row)))]] = h  # letter-sized
        return len(_row_fill.fill_rows(*args, params, heights)[1])

    assert added(h) == 1  # letters
    assert added(0.4 * h) == 0 and added(1.05 * CHAIN_HEIGHTS * h) == 0
    assert added(0.4 * h, share_letters=0.15) == 1 and added(3.0 * CHAIN_HEIGHTS * h, share_letters=0.15) == 1
    assert added(0.4 * h, share_letters=0.05) == 0
    assert added(0.4 * h, params=dataclasses.replace(prep.params, remove_diacritic_lines=False)) == 1
    assert len(_row_fill.fill_rows(*args, prep.params, None)[1]) == 1


def test_a_forms_dashed_rules_below_the_text_get_no_line(monkeypatch, tmp_path) -> None:
    """The synthetic page under a form's dashed rules (tests/test_scan_frontend.py): the empty
    dashed rows below the text are rows of the page's period beyond its last line. With
    row_fill on they get no line and every written row keeps its own (FM 1.0); filled, their
    lines took part in the initial lines' merge and a written row lost its line."""
    from PIL import Image
    from test_scan_frontend import dashed

    from engine.pipeline import segment

    page = make_page("straight", 0)
    rgb, truth = dashed(np.repeat(page.image[:, :, None], 3, axis=2), page.labels)
    path = tmp_path / "dashed.png"
    Image.fromarray(rgb).save(path)
    params = Parameters(row_fill=0.75)

    def fm() -> float:
        _, _, seg = segment(path, params)
        return contest_metric(truth, seg.labels, ink=truth > 0).fm

    assert fm() >= 0.97
    monkeypatch.setattr(_row_fill, "letters_in_row", lambda heights, h_cc, params: True)
    assert fm() < 0.9


def test_the_filled_rows_are_recorded_for_the_json_and_the_window(rows, monkeypatch, qtbot) -> None:
    """prepare() keeps the lines the fill added (Preparation.filled_rows, page segments),
    the JSON summary lists them and the window's "filled" layer draws them. The last row's
    blob taken away (as on a card whose lone row falls under Otsu's level): one row filled,
    on that row; with row_fill 0 nothing is recorded."""
    from engine import initial_lines as _initial
    from engine import pipeline
    from tlgui.canvas import PageCanvas

    page, prep = rows
    _, gone, region = _without_row(prep, -1)
    real = _initial.initial_lines

    def lose_last_row(*args, **kwargs):
        found, regions = real(*args, **kwargs)
        centres = found.segments().mean(axis=1)
        d = np.linalg.norm(centres - gone.segments().mean(axis=1), axis=1)
        return found.take(np.flatnonzero(d > d.min())), regions

    monkeypatch.setattr(pipeline._initial, "initial_lines", lose_last_row)
    filled = prepare(page.image, dataclasses.replace(prep.params, row_fill=0.75, merge_initial_lines=False))
    assert filled.filled_rows is not None and filled.filled_rows.shape == (1, 2, 2)
    mid = filled.filled_rows[0].mean(axis=0)
    assert abs(mid[1] - gone.segments()[0].mean(axis=0)[1]) < 0.1 * prep.row_pitch[region].pitch
    assert pipeline.preparation_summary(filled)["filled_rows"] == np.round(filled.filled_rows, 1).tolist()
    off = prepare(page.image, dataclasses.replace(prep.params, row_fill=0.0, merge_initial_lines=False))
    assert off.filled_rows is None and "filled_rows" not in pipeline.preparation_summary(off)

    canvas = PageCanvas()
    qtbot.addWidget(canvas)
    canvas.set_prep(filled)
    x, y = canvas.filled_item.getData()
    assert np.allclose(np.stack([x, y], axis=1).reshape(-1, 2, 2), filled.filled_rows)
    canvas.set_prep(off)
    data = canvas.filled_item.getData()[0]
    assert data is None or len(data) == 0
    canvas.close_items()
    canvas.close()
