"""The final lines' extent is their own ink's (``Parameters.extent_from_ink``): each line's
ends, ``c +- 2 sigma_s`` (as for a line a file or the user gives), are its first and last
samples along it. From the samples' spread, ``+- 2 sigma_s`` reaches 15 % past a row of even
ink (2 / sqrt 3), and lines were drawn and saved into the next block or the margin."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from synthetic import make_page

from engine.model import to_region_frame
from engine.params import Parameters
from engine.pipeline import segment


@cache
def _run(extent_from_ink: bool, kind: str = "two_columns"):
    page = make_page(kind, seed=0)
    return segment(page.image, Parameters(extent_from_ink=extent_from_ink))


def _own_extent(prep, seg, k: int) -> tuple[float, float]:
    lines = seg.lines
    uv = to_region_frame(prep.samples[seg.sample_labels == k].astype(np.float64), lines.phi[k])
    s = lines.along(uv)[:, k]
    return float(s.min()), float(s.max())


@pytest.mark.parametrize("kind", ["two_columns", "straight"])
def test_final_lines_end_at_their_first_and_last_samples(kind: str) -> None:
    prep, _, seg = _run(True, kind)
    lines = seg.lines
    assert len(lines) >= 4
    for k in range(len(lines)):
        lo, hi = _own_extent(prep, seg, k)
        assert lines.c[k] - 2.0 * lines.sigma_s[k] == pytest.approx(lo, abs=1e-6)
        assert lines.c[k] + 2.0 * lines.sigma_s[k] == pytest.approx(hi, abs=1e-6)


def test_from_the_spread_the_lines_reach_past_their_ink_and_no_pixel_changes() -> None:
    """Off (the paper's sigma_s), most lines' ends lie past their ink, by about the 15 % of an
    even row; on or off, every pixel has the same line."""
    prep, _, seg = _run(False)
    past = []
    for k in range(len(seg.lines)):
        lo, hi = _own_extent(prep, seg, k)
        reach = 4.0 * seg.lines.sigma_s[k]
        past.append((reach - (hi - lo)) / (hi - lo))
    assert np.median(past) > 0.05, past
    _, _, seg_on = _run(True)
    assert np.array_equal(seg.labels, seg_on.labels)
    assert np.array_equal(seg.lines.a, seg_on.lines.a) and np.array_equal(seg.lines.b, seg_on.lines.b)


def test_given_lines_keep_their_extent() -> None:
    """A locked, an anchored and a chained line (a file's or the user's) keep the extent they
    were given; a line of EM's own takes its samples'."""
    from engine.model import LineSet
    from engine.postprocess import ink_extents

    n = 4
    lines = LineSet(np.zeros(n), np.arange(n) * 50.0, np.full(n, 500.0), np.full(n, 5.0), np.full(n, 200.0),
                    np.full(n, 0.25), np.zeros(n, np.int32), np.zeros(n),
                    locked=np.array([False, True, False, False]), anchored=np.array([False, False, True, False]),
                    chain=np.array([-1, -1, -1, 0], np.int32))
    xs = np.linspace(300.0, 600.0, 31)
    samples = np.concatenate([np.stack([xs, np.full(31, 50.0 * k)], axis=1) for k in range(n)])
    labels = np.repeat(np.arange(n), 31)
    out = ink_extents(samples, labels, lines)
    assert out.c[0] == pytest.approx(450.0) and out.sigma_s[0] == pytest.approx(75.0)
    assert np.array_equal(out.c[1:], lines.c[1:]) and np.array_equal(out.sigma_s[1:], lines.sigma_s[1:])
