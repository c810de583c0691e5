"""Stage 8 splits rows of writing off the line EM fitted through them (engine.postprocess.split_rows).

CREMMA's drafts carry interlinear insertions: a row of smaller words written between two
lines, a line of its own in the ground truth, that the filter bank (as wide as the main text)
never starts a line for, so one line ends up with both rows. The pages here are drawn: words
as filled boxes, components and samples from the engine's own labelling and sampling, every
sample on one line as EM leaves them. The split is off by default (Parameters.split_offset);
these tests turn it on at 1.0 x H_cc.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from engine.params import Parameters
from engine.postprocess import split_rows
from engine.sampling import sample_ink_pixels

H_CC, W_CC = 40.0, 100.0
SHAPE = (400, 1800)


def _box(ink: np.ndarray, centre: float, x0: int, width: int, height: int) -> None:
    top = int(round(centre - height / 2))
    ink[top:top + height, x0:x0 + width] = True


def _main_line(ink: np.ndarray, centre=lambda x: 200.0) -> None:
    """Twelve words 40 px high, 90 px wide, 130 px apart, centred on ``centre(x)``."""
    for x0 in range(50, 1600, 130):
        _box(ink, centre(x0 + 45), x0, 90, 40)


def _split(ink: np.ndarray, params: Parameters | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Components of ``ink``, each sample's component and group after split_rows (all samples
    start on group 0), and the number of groups."""
    params = params or Parameters(split_offset=1.0)  # off by default (see Parameters)
    components, _ = ndimage.label(ink)
    samples, comp = sample_ink_pixels(components, 0.05, seed=3)
    heights = np.zeros(components.max() + 1)
    for k, sl in enumerate(ndimage.find_objects(components), start=1):
        heights[k] = sl[0].stop - sl[0].start
    small = heights[comp] < params.diacritic_height * H_CC
    lab = np.zeros(len(samples), np.int64)
    new, n = split_rows(samples.astype(np.float64), comp, small, lab, 1, H_CC, W_CC, params)
    return comp, new, n


def _group_of(comp: np.ndarray, lab: np.ndarray, ink: np.ndarray, row: int, col: int) -> set[int]:
    """The groups of the samples on the component at (row, col)."""
    components, _ = ndimage.label(ink)
    return set(lab[comp == components[row, col]].tolist())


def _line_and_row(row: float, xs: range) -> np.ndarray:
    """The main line with a row of words 80 x 24 px centred on ``row``, starting at ``xs``."""
    ink = np.zeros(SHAPE, bool)
    _main_line(ink)
    for x0 in xs:
        _box(ink, row, x0, 80, 24)
    return ink


def test_an_interlinear_row_becomes_a_line_of_its_own() -> None:
    # Four words 24 px high, 1.45 H_cc above the right half of the line.
    ink = _line_and_row(142.0, range(900, 1400, 110))
    comp, lab, n = _split(ink)
    assert n == 2
    for x0 in range(900, 1400, 110):  # every inserted word on the new line, whole
        assert _group_of(comp, lab, ink, 142, x0 + 40) == {1}
    for x0 in range(50, 1600, 130):  # every word of the main row stays
        assert _group_of(comp, lab, ink, 200, x0 + 45) == {0}


def test_a_row_below_splits_too_and_split_offset_zero_never_splits() -> None:
    ink = _line_and_row(262.0, range(200, 700, 110))
    comp, lab, n = _split(ink)
    assert n == 2 and _group_of(comp, lab, ink, 262, 240) == {1}
    _, lab0, n0 = _split(ink, Parameters(split_offset=0.0))
    assert n0 == 1 and (lab0 == 0).all()


def test_a_line_climbing_where_nothing_is_below_is_not_split() -> None:
    """A line whose second half is written 2 H_cc higher (a hand drifting up, a line end
    climbing above the text) is one row: a word is measured against the row around it, so
    only a row with the line's own writing beneath (or above) it is split off."""
    ink = np.zeros(SHAPE, bool)
    _main_line(ink, centre=lambda x: 300.0 if x < 830 else 220.0)
    _, lab, n = _split(ink)
    assert n == 1 and (lab == 0).all()


def test_a_lone_word_or_thin_strokes_off_the_line_stay() -> None:
    """One word above the line (a correction, a flourish) and a row of thin strokes below it
    (loop ends, a few percent of the line's ink) are not rows of text."""
    ink = np.zeros(SHAPE, bool)
    _main_line(ink)
    _box(ink, 142.0, 600, 200, 24)
    for x0 in range(900, 1400, 110):
        _box(ink, 262.0, x0, 12, 24)
    _, lab, n = _split(ink)
    assert n == 1 and (lab == 0).all()


def test_marks_scattered_above_a_line_are_not_a_row() -> None:
    """Strokes 1.2-3.2 H_cc above the line (AHTE's ascender tops and marks) are not written
    in a row: their offsets spread over 2 H_cc, so the line stays whole."""
    ink = np.zeros(SHAPE, bool)
    _main_line(ink)
    for x0, rise in zip(range(900, 1450, 110), (1.2, 3.0, 1.5, 3.2, 2.0), strict=True):
        _box(ink, 200.0 - rise * H_CC, x0, 60, 24)
    _, lab, n = _split(ink)
    assert n == 1 and (lab == 0).all()


def _two_lines_split(row: float, params: Parameters) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Two lines 5 H_cc apart (rows at 200 and 400 px, as on Arabic pages where H_cc is a
    letter's height), a row of words 24 px high centred on ``row`` under the first; samples
    above 300 px start on group 0, the others on group 1. Returns the components, the
    samples' groups after split_rows, their number and the ink."""
    ink = np.zeros((600, 1800), bool)
    _main_line(ink)
    _main_line(ink, centre=lambda x: 400.0)
    for x0 in range(200, 700, 110):
        _box(ink, row, x0, 80, 24)
    components, _ = ndimage.label(ink)
    samples, comp = sample_ink_pixels(components, 0.05, seed=3)
    heights = np.zeros(components.max() + 1)
    for k, sl in enumerate(ndimage.find_objects(components), start=1):
        heights[k] = sl[0].stop - sl[0].start
    small = heights[comp] < params.diacritic_height * H_CC
    lab = (samples[:, 1] > 300).astype(np.int64)
    new, n = split_rows(samples.astype(np.float64), comp, small, lab, 2, H_CC, W_CC, params)
    return comp, new, n, ink


def test_split_space_keeps_a_row_near_its_line_and_splits_one_between_lines() -> None:
    """With split_space, the limit is also a share of the interline space on that side: a row
    1.0 H_cc under its line, with the next line 5 H_cc away, is the line's own (marks,
    descenders of a hand whose H_cc is a letter's height); by H_cc alone (0.7) it is split.
    A row half-way between the two lines is an insertion under either rule."""
    near, between = 240.0, 280.0
    on = Parameters(split_offset=0.7, split_space=0.3)
    off = Parameters(split_offset=0.7, split_space=0.0)
    comp, lab, n, ink = _two_lines_split(near, on)
    assert n == 2 and _group_of(comp, lab, ink, int(near), 240) == {0}
    comp, lab, n, ink = _two_lines_split(near, off)
    assert n == 3 and _group_of(comp, lab, ink, int(near), 240) == {2}
    for params in (on, off):
        comp, lab, n, ink = _two_lines_split(between, params)
        assert n == 3 and _group_of(comp, lab, ink, int(between), 240) == {2}
        assert _group_of(comp, lab, ink, 200, 95) == {0} and _group_of(comp, lab, ink, 400, 95) == {1}
