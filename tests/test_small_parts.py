"""Small blocks at their own angle (``small_parts_frame``, issue 26, failure 3): a part of a
region split off at another text angle, under 16 x ``min_region_samples`` samples, used to
stand apart only 45 deg or more from the main text (``engine.regions._FAR_ANGLE``), and a
block that small was joined to a touching block whose frame lay within 45 deg of its own
(``engine.blocks.merge_parallel_blocks``). Side notes at 25-43 deg from the main text were
folded into it (moc-train moc_train_10: 902 samples at 43 deg; _19, _5, _4: 589, 334 and 360
samples at 25-33 deg) and every line of theirs was fitted at the main text's angle. With
``small_parts_frame`` such a part stands apart on its line contrast, as a large one does, and
stays apart when its frame comes out at the angle its line contrast gives (within
``SPLIT_ANGLE``, 15 deg since 2026-11-27) and inside the orientation range, not at its edge."""

from __future__ import annotations

import math

import numpy as np
import pytest
from synthetic import side_note_page

from engine.blocks import merge_parallel_blocks
from engine.metric import contest_metric
from engine.model import Region
from engine.params import Parameters
from engine.pipeline import segment
from engine.regions import own_angle


@pytest.mark.parametrize("seed", [0, 1])
def test_a_small_note_at_30_degrees_keeps_its_own_frame(seed: int) -> None:
    """The side-note page with its note at 30 deg (about a thousand samples): folded into the
    paragraphs' region at 0 deg without the mechanism, a block of its own at 30 deg with it."""
    page, _ = side_note_page(seed, 30.0)
    results = {}
    for flag in (False, True):
        prep, _, seg = segment(page.image, Parameters(small_parts_frame=flag))
        fm = contest_metric(page.labels, seg.labels, page.labels > 0, 0.95).fm
        results[flag] = (fm, [math.degrees(r.phi) for r in prep.regions])
    fm_on, angles_on = results[True]
    fm_off, angles_off = results[False]
    assert any(abs(a - 30.0) <= 3.0 for a in angles_on), angles_on
    assert not any(abs(a - 30.0) <= 10.0 for a in angles_off), angles_off
    assert fm_on >= 0.8 and fm_on > fm_off + 0.15, (fm_on, fm_off)


def _rows(angle_deg: float, n_rows: int, per_row: int, length: float, pitch: float, origin, rng) -> np.ndarray:
    """Points on ``n_rows`` rows at ``angle_deg`` (y down), ``pitch`` apart, from ``origin``."""
    t = math.radians(angle_deg)
    along, across = np.array([math.cos(t), math.sin(t)]), np.array([-math.sin(t), math.cos(t)])
    pts = [np.asarray(origin) + np.outer(rng.uniform(0, length, per_row), along)
           + np.outer(k * pitch + rng.normal(0, 3.0, per_row), across) for k in range(n_rows)]
    return np.concatenate(pts)


def _two_blocks(small_rows_deg: float):
    rng = np.random.default_rng(0)
    h = 20.0
    main = _rows(0.0, 8, 400, 1200.0, 4 * h, (0.0, 0.0), rng)
    small = _rows(small_rows_deg, 5, 100, 400.0, 4 * h, (1400.0, 0.0), rng)
    samples = np.concatenate([main, small])
    region = np.r_[np.zeros(len(main), np.int32), np.ones(len(small), np.int32)]
    edges = np.array([[len(main) - 1, len(main)]])  # the blocks touch
    return samples, region, edges, h


@pytest.mark.parametrize("rows_deg, frame_deg, apart", [
    (30.0, 30.0, True),    # frame at the block's own angle: it stands apart
    (30.0, 40.0, False),   # frame at the orientation range's edge: no agreement, it joins
    (-60.0, 30.0, False),  # its rows run at -60 deg, its frame says 30: it joins
])
def test_a_small_block_joins_unless_its_frame_agrees_with_its_own_angle(rows_deg, frame_deg, apart) -> None:
    samples, region, edges, h = _two_blocks(rows_deg)
    assert abs(((own_angle(samples[region == 1], h) - rows_deg) + 90.0) % 180.0 - 90.0) <= 3.0
    regions = (Region(0, 0.0, (0, 0, 1, 1), int((region == 0).sum())),
               Region(1, math.radians(frame_deg), (0, 0, 1, 1), int((region == 1).sum())))
    small = 16 * 60
    # Without the check (samples None, small_parts_frame off) a small block within 45 deg joins.
    assert merge_parallel_blocks(region, edges, regions, 20.0, small, 45.0) is not None
    joined = merge_parallel_blocks(region, edges, regions, 20.0, small, 45.0, samples, h, (-40.0, 40.0))
    assert (joined is None) == apart
