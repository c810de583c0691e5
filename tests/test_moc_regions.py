"""Regions on multi-oriented pages: a side note written at another angle that touches the main
text forms one Delaunay region with it; with ``multi_oriented`` the region is cut where the
local text angle changes, so that each block gets its own frame angle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine import regions
from engine.params import Parameters
from engine.pipeline import prepare
from tests.synthetic import _block, _mark, _render, _Style


def _touching_blocks_page(side_deg: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """A horizontal paragraph and, less than one x-height to its right, a steep side note at
    ``side_deg``; returns the image, the block (1 main, 2 note, 0 paper) of every pixel and
    the x-height."""
    rng = np.random.default_rng(seed)
    h = 16.0
    style = _Style(h=h, thickness=3, slant=0.1)
    main = _block(rng, 6, 520.0, 4.5 * h, 0.0, h, (40.0, 40.0, 580.0, 560.0), align="top")
    note = _mark(_block(rng, 3, 300.0, 4.5 * h, math.radians(side_deg), h, (585.0, 40.0, 945.0, 580.0),
                        align="top"), 1)
    image, labels = _render(main + note, style, rng, (620, 980), 1.0, touching=False)
    block = np.where(labels == 0, 0, np.where(labels <= len(main), 1, 2))
    return image, block, h


@pytest.mark.parametrize("side_deg", [70.0, -65.0])
def test_touching_side_note_gets_its_own_region_and_angle(side_deg: float) -> None:
    image, block, h = _touching_blocks_page(side_deg)
    # The blocks touch: without the split they share one region.
    assert regions.SPLIT_ANGLE > 0
    prep = prepare(image, Parameters(multi_oriented=True))
    s = np.round(prep.samples).astype(int)
    sample_block = block[s[:, 1], s[:, 0]]
    for b, angle in ((1, 0.0), (2, side_deg)):
        on_block = prep.sample_region[sample_block == b]
        r = int(np.bincount(on_block).argmax())
        # Most of the block's samples are in one region, which holds almost nothing else (the
        # cut follows cells of 4.5 H_cc, ~190 px here: ink near the junction may go astray) ...
        assert np.mean(on_block == r) > 0.8, (b, np.bincount(on_block))
        in_region = sample_block[prep.sample_region == r]
        in_region = in_region[in_region > 0]  # the engine's ink is a little wider than the drawn one
        assert np.mean(in_region == b) > 0.9, (b, np.bincount(in_region))
        # ... whose frame follows the block's lines.
        gap = abs((math.degrees(prep.regions[r].phi) - angle + 90.0) % 180.0 - 90.0)
        assert gap <= 5.0, (b, math.degrees(prep.regions[r].phi))


def test_touching_blocks_share_a_region_without_the_split(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page above is a real test of the split: Delaunay regions alone join the blocks, and
    without multi_oriented or steep_regions nothing splits them."""
    image, block, _ = _touching_blocks_page(70.0)
    monkeypatch.setattr(regions, "SPLIT_ANGLE", 0.0)
    assert len(prepare(image, Parameters(multi_oriented=True)).regions) == 1
    monkeypatch.undo()
    assert len(prepare(image, Parameters(steep_regions=False)).regions) == 1
