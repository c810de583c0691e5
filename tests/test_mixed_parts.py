"""A narrow note's part mixed with the main text's row ends (``mixed_parts_frame``, issue 26,
failure 3). The orientation split reads text angles in windows of 8 text heights on cells of
4.5: beside a narrow column at another angle, the cells that straddle the junction go to the
column's part with the main text's row ends in them, and those rows raise the part's line
contrast at the main text's angle above ``KEEP_RATIO`` x its best (moc_train_9: a column at
89 deg beside rows at -27 deg, ratio 0.65). ``keep_distinct_parts`` then folded the column
into the main text, whose lines ran across it. With ``mixed_parts_frame`` such a part is
kept, and ``merge_parallel_blocks`` folds it back only when its frame (the filter bank's
search on the part) does not come out at its own angle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from synthetic import narrow_column_page

from engine.blocks import merge_parallel_blocks
from engine.model import Region
from engine.params import Parameters
from engine.pipeline import prepare
from engine.regions import _FINE_ANGLES, KEEP_RATIO, keep_distinct_parts, own_angle, points_contrast

MIN_SAMPLES = Parameters().min_region_samples


def _straddled(seed: int):
    """The column page's samples, one region, and the split as the straddling cells make it:
    part 1 the column's samples and the main text's within a cell (4.5 H_cc) of the column."""
    page, block = narrow_column_page(seed)
    prep = prepare(page.image, Parameters())
    xy = np.rint(prep.samples).astype(int)
    line = page.labels[xy[:, 1], xy[:, 0]]
    on = line > 0
    samples, line = prep.samples[on], line[on]
    in_column = block[line - 1] == 1
    h = prep.stats.h_cc
    left = samples[in_column, 0].min()
    part = (in_column | (samples[:, 0] >= left - 4.5 * h)).astype(np.int64)
    return samples, part, h


@pytest.mark.parametrize("seed", [0, 1])
def test_a_column_mixed_with_row_ends_stands_apart_when_its_frame_agrees(seed: int) -> None:
    samples, part, h = _straddled(seed)
    region = np.zeros(len(samples), np.int64)
    curve = points_contrast(samples[part == 1], h)
    main_curve = points_contrast(samples[part == 0], h)
    own, main = int(np.argmax(curve)), int(np.argmax(main_curve))
    assert abs(abs(_FINE_ANGLES[own]) - 90.0) <= 3.0 and abs(_FINE_ANGLES[main] + 25.0) <= 3.0
    # The row ends raise the part's contrast at the main text's angle over KEEP_RATIO.
    assert curve[main] >= KEEP_RATIO * curve[own], curve[main] / curve[own]
    off = keep_distinct_parts(samples, region, part, {0: h}, MIN_SAMPLES, far_angle=0.0)
    assert (off == 0).all()  # folded into the main text: the mechanism's "off"
    mixed: dict[int, int] = {}
    on = keep_distinct_parts(samples, region, part, {0: h}, MIN_SAMPLES, far_angle=0.0, mixed=mixed)
    assert np.array_equal(on, part) and mixed == {1: 0}
    # Its frame decides: at its own angle it stays apart, at another it goes back.
    edges = np.array([[int(np.flatnonzero(part == 0)[0]), int(np.flatnonzero(part == 1)[0])]])
    for frame, apart in ((89.0, True), (30.0, False)):
        regions = (Region(0, math.radians(-25.0), (0, 0, 1, 1), int((part == 0).sum())),
                   Region(1, math.radians(frame), (0, 0, 1, 1), int((part == 1).sum())))
        joined = merge_parallel_blocks(on.astype(np.int32), edges, regions, 20.0, 16 * MIN_SAMPLES, 45.0,
                                       samples, h, Parameters().orientation_range, mixed)
        assert (joined is None) == apart, (frame, joined)
        if not apart:
            assert (joined == 0).all()
    assert abs(((own_angle(samples[part == 1], h) - 89.0) + 90.0) % 180.0 - 90.0) <= 20.0
    # Without the mixed parts (mixed_parts_frame off) nothing is checked: no join of its own.
    regions = (Region(0, math.radians(-25.0), (0, 0, 1, 1), int((part == 0).sum())),
               Region(1, math.radians(30.0), (0, 0, 1, 1), int((part == 1).sum())))
    assert merge_parallel_blocks(on.astype(np.int32), edges, regions, 20.0, 16 * MIN_SAMPLES, 45.0,
                                 samples, h, Parameters().orientation_range) is None
