"""Steep and vertical regions without ``multi_oriented``: with ``steep_regions`` (the default) a
region may take an angle outside orientation_min...max (moc-train's vertical side notes) when its
lines show better there (line contrast). An earlier rule also asked for blobs longer along the
text (engine.initial_lines.blob_elongation, still tested below), because Latin pages scored
higher at -90 deg; that was an artefact of the ink cells merged along x, fixed in
engine.initial_lines.merged_cells (tests/test_moc_blocks.py)."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from engine import initial_lines
from engine.model import ComponentStats
from engine.params import Parameters
from engine.pipeline import prepare
from tests.synthetic import _block, _render, _Style
from tests.test_moc_regions import _touching_blocks_page

STEEP = Parameters()
FLAT = Parameters(steep_regions=False)


def _block_page(theta_deg: float, n: int = 6, length: float = 20.0, seed: int = 0) -> np.ndarray:
    """A page holding one block of ``n`` lines of about ``length`` x-heights, pitch 4.5
    x-heights, written at ``theta_deg``."""
    rng = np.random.default_rng(seed)
    h = 20.0
    style = _Style(h=h, thickness=3, slant=0.15)
    lines = _block(rng, n, length * h, 4.5 * h, math.radians(theta_deg), h, (40.0, 40.0, 960.0, 960.0),
                   last_short=False)
    image, _ = _render(lines, style, rng, (1000, 1000), 1.0, touching=False)
    return image


def _gap(a: float, b: float) -> float:
    return abs((a - b + 90.0) % 180.0 - 90.0)


def _main_angle(image: np.ndarray, params: Parameters) -> float:
    prep = prepare(image, params)
    return math.degrees(max(prep.regions, key=lambda r: r.n_samples).phi)


@pytest.mark.parametrize(("theta", "length"), [(80.0, 20.0), (90.0, 25.0)])
def test_steep_block_gets_its_angle(theta: float, length: float) -> None:
    """A block of lines at 80-90 deg, far outside the paper's +-40 deg, gets its lines' angle
    by default; without steep_regions, an angle within the range."""
    assert STEEP.steep_regions and STEEP.orientation_range == (-40.0, 40.0)
    image = _block_page(theta, length=length)
    assert _gap(_main_angle(image, STEEP), theta) <= 4.0
    assert abs(_main_angle(image, FLAT)) <= 40.0 + 1e-9


def test_horizontal_block_keeps_its_angle() -> None:
    assert _gap(_main_angle(_block_page(0.0), STEEP), 0.0) <= 3.0


@pytest.mark.parametrize("theta", [0.0, 80.0])
def test_lines_are_longest_at_their_own_angle(theta: float) -> None:
    """blob_elongation is high at the lines' angle and low across it, whichever way the block
    is written."""
    ink = (_block_page(theta) < 128).astype(np.float32)
    ys, xs = np.nonzero(ink)
    bbox = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    stats = ComponentStats(h_cc=50.0, w_cc=60.0, n_components=40)  # about a synthetic word's
    scale = initial_lines._TARGET_HCC / stats.h_cc
    crop = ink[bbox[1]:bbox[3], bbox[0]:bbox[2]]
    small = cv2.resize(crop, (round(crop.shape[1] * scale), round(crop.shape[0] * scale)),
                       interpolation=cv2.INTER_AREA)
    along = initial_lines.blob_elongation(small, bbox, stats, Parameters(), theta)
    across = initial_lines.blob_elongation(small, bbox, stats, Parameters(), theta - 90.0)
    assert along > across + 1.0, (along, across)


def test_touching_side_note_is_split_with_steep_regions() -> None:
    """The region cut of multi_oriented (tests.test_moc_regions) also runs with steep_regions:
    a steep note touching a horizontal paragraph gets a region and an angle of its own."""
    image, block, _ = _touching_blocks_page(70.0)
    assert len(prepare(image, FLAT).regions) == 1
    prep = prepare(image, STEEP)
    s = np.round(prep.samples).astype(int)
    sample_block = block[s[:, 1], s[:, 0]]
    for b, angle in ((1, 0.0), (2, 70.0)):
        on_block = prep.sample_region[sample_block == b]
        r = int(np.bincount(on_block).argmax())
        assert np.mean(on_block == r) > 0.8, (b, np.bincount(on_block))
        assert _gap(math.degrees(prep.regions[r].phi), angle) <= 5.0, (b, math.degrees(prep.regions[r].phi))
