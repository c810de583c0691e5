"""Orientation search on multi-oriented pages (moc-train's failure class): a block of short
lines that is taller than wide must get the angle of its lines, not the angle along which the
block itself is narrowest."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine import initial_lines
from engine.params import Parameters
from engine.pipeline import prepare
from tests.synthetic import _block, _render, _Style


def _narrow_block_page(theta_deg: float, seed: int = 0) -> np.ndarray:
    """A page holding one block of 8 short lines (about 10 x-heights long, like a side note)
    written at ``theta_deg``: the block is much taller than its lines are long. The pitch is
    4.5 x-heights, about 1.7 H_cc: a synthetic word is one component, ascenders and descenders
    included (H_cc ~ 2.6 x-heights)."""
    rng = np.random.default_rng(seed)
    h = 20.0
    style = _Style(h=h, thickness=3, slant=0.15)
    lines = _block(rng, 8, 10.0 * h, 4.5 * h, math.radians(theta_deg), h, (60.0, 60.0, 740.0, 840.0),
                   last_short=False)
    image, _ = _render(lines, style, rng, (900, 800), 1.0, touching=False)
    return image


def test_line_contrast_ignores_the_block_envelope() -> None:
    """Lines (ink rows with gaps) score higher than a solid block of the same ink however narrow
    the block; the old sharpness (sum P^2 / (sum P)^2) prefers the narrower solid block."""
    rows = np.arange(400)
    lines = ((rows // 8) % 2 == 0).astype(float)  # 25 lines of 8 rows, gaps of 8 rows
    solid = np.zeros(400)
    solid[150:250] = 2.0  # the same ink in a block a quarter as tall, no gaps
    sigma_across, sigma_block = 1.0, 8.0
    assert initial_lines.line_contrast(lines, sigma_across, sigma_block) > \
        2 * initial_lines.line_contrast(solid, sigma_across, sigma_block)
    assert initial_lines.profile_sharpness(solid[:, None]) > initial_lines.profile_sharpness(lines[:, None])
    assert initial_lines.line_contrast(np.zeros(10), 1.0, 8.0) == 0.0


@pytest.mark.parametrize("theta", [-25.0, 30.0])
def test_narrow_block_gets_its_lines_angle(theta: float) -> None:
    """A tall block of short lines at 25-30 deg gets its lines' angle, within the default range
    and over the full range (the projection sharpness chose the range's end or +-90 deg)."""
    image = _narrow_block_page(theta)
    for params in (Parameters(), Parameters(multi_oriented=True)):
        prep = prepare(image, params)
        main = max(prep.regions, key=lambda r: r.n_samples)
        assert abs(math.degrees(main.phi) - theta) <= 4.0, (params.multi_oriented, math.degrees(main.phi))
