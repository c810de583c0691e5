"""A steep frame needs evidence (issue 26, ``steep_evidence``): one row of large slanted cursive
whose H_cc came out at a third of its letters' height (poilus AN_0121-2: a perforated edge)
scored best across its downstrokes and took their angle (-45 to -70 deg) with
``steep_regions`` alone. With the evidence test, a region takes a steep angle only where its
line contrast there is several times the range's (or its rows show a period), and the words
keep the page's direction; side notes at 45 deg keep theirs (tests/test_moc_blocks.py)."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from synthetic import SyntheticPage, perforated_card_page

from engine.initial_lines import steep_supported
from engine.model import ComponentStats
from engine.params import Parameters
from engine.pipeline import prepare


@cache
def _page(seed: int) -> SyntheticPage:
    return perforated_card_page(seed)


def _text_region_angles(seed: int, params: Parameters) -> tuple[float, list[float]]:
    """H_cc and the frame angles (degrees) of the regions whose samples are mostly on words."""
    page = _page(seed)
    prep = prepare(page.image, params)
    xy = np.round(prep.samples).astype(int)
    on_text = page.labels[xy[:, 1], xy[:, 0]] > 0
    angles = []
    for region in prep.regions:
        members = prep.sample_region == region.index
        if on_text[members].mean() > 0.5:
            angles.append(math.degrees(region.phi))
    return prep.stats.h_cc, angles


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_words_keep_the_page_direction(seed: int) -> None:
    h_cc, angles = _text_region_angles(seed, Parameters(steep_evidence=3.0))
    assert h_cc < 14.0, h_cc  # the holes set H_cc: the case the mechanism is for
    assert angles and all(abs(a) <= 40.0 for a in angles), angles


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_without_evidence_words_take_their_downstrokes_angle(seed: int) -> None:
    """The page is a real test: with the mechanism off, some word's region goes steep."""
    _, angles = _text_region_angles(seed, Parameters(steep_evidence=0.0))
    assert any(abs(a) > 40.0 for a in angles), angles


def test_steep_supported_reads_contrast_or_rows() -> None:
    angles = np.arange(-90.0, 90.0, 2.5)
    inside = np.abs(angles) <= 40.0
    scores = np.full(len(angles), 0.05)
    scores[angles == -60.0] = 0.12  # 2.4 x the range's best 20 deg or more away
    stats = ComponentStats(h_cc=10.0, w_cc=10.0, n_components=1)
    assert not steep_supported(angles, scores, inside, -60.0, 0.12, None, stats, 3.0)
    assert steep_supported(angles, scores, inside, -60.0, 0.12, None, stats, 2.0)
    # Rows at -60 deg, 40 px apart (6 rows of 200 px): a period across the text there.
    rng = np.random.default_rng(0)
    u = rng.uniform(0, 200, 1200)
    v = np.repeat(np.arange(6) * 40.0, 200) + rng.normal(0, 3.0, 1200)
    th = math.radians(-60.0)
    pts = np.stack([u * math.cos(th) - v * math.sin(th), u * math.sin(th) + v * math.cos(th)], axis=1)
    assert steep_supported(angles, scores, inside, -60.0, 0.12, pts, stats, 3.0)
    # One row: no period.
    assert not steep_supported(angles, scores, inside, -60.0, 0.12, pts[:200], stats, 3.0)


def test_frame_lines_turns_a_steep_fit_to_the_limit() -> None:
    """``frame_lines`` (off by default): a blob whose samples run at 45 deg to its frame gets a
    line at 20 deg (SPLIT_ANGLE), not 45; free, the principal axis."""
    from engine.initial_lines import STEEP_SPLIT_ANGLE
    from engine.regression import fit_lines

    t = np.linspace(0.0, 100.0, 50)
    uv = np.stack([t, t], axis=1)
    free = fit_lines(uv, np.ones((50, 1)))
    framed = fit_lines(uv, np.ones((50, 1)), max_angle=STEEP_SPLIT_ANGLE)
    assert math.degrees(math.atan(free.a[0])) == pytest.approx(45.0)
    assert math.degrees(math.atan(framed.a[0])) == pytest.approx(20.0)
    assert not Parameters().frame_lines and Parameters(frame_lines=True).frame_lines


def _steep_rows(deg: float = -60.0, n_rows: int = 5, size: int = 400, h_cc: float = 8.0) -> np.ndarray:
    """A region's ink raster (scale 1 at H_cc 8): ``n_rows`` rows of words at ``deg``, 3 H_cc
    apart."""
    import cv2

    ink = np.zeros((size, size), np.uint8)
    th = math.radians(deg)
    along, across = np.array([math.cos(th), math.sin(th)]), np.array([-math.sin(th), math.cos(th)])
    centre = np.array([size / 2.0, size / 2.0])
    for r in range(n_rows):
        row = centre + (r - (n_rows - 1) / 2.0) * 3.0 * h_cc * across
        for s in np.arange(-150.0, 150.0, 40.0):  # words of 28 px, gaps of 12
            p, q = (tuple(int(round(c)) for c in row + t * along) for t in (s, s + 28.0))
            cv2.line(ink, p, q, 1, int(h_cc))
    return ink.astype(np.float32)


def test_steep_rows_are_read_from_the_ink_not_the_draw() -> None:
    """``steep_period="ink"``: the row period that supports a steep angle is read from every
    pixel of the region's ink, so it does not depend on which samples were drawn. Five rows of
    words at -60 deg, the contrast test out of reach (steep_evidence 100): the ink shows their
    period and the region takes -60 deg whatever the samples; read from samples that all lie
    on one row (a sparse draw), there is no period and the region keeps the page's direction."""
    from engine.initial_lines import best_orientation

    ink = _steep_rows()
    stats = ComponentStats(h_cc=8.0, w_cc=8.0, n_components=40)
    th = math.radians(-60.0)
    one_row = np.array([[200.0 + t * math.cos(th), 200.0 + t * math.sin(th)] for t in np.linspace(-140, 140, 60)])

    def frame(period: str, points: np.ndarray | None) -> float:
        params = Parameters(steep_evidence=100.0, steep_period=period)
        return math.degrees(best_orientation(ink, (0, 0, 400, 400), stats, params, None, points, 0.0))

    for points in (None, one_row):
        assert frame("ink", points) == pytest.approx(-60.0, abs=1.5)
    assert abs(frame("samples", one_row)) <= 10.0 + 1e-9  # the page's direction (0 deg)
    assert Parameters().steep_period == "ink"


def test_steep_supported_reads_the_ink_profile() -> None:
    """A profile across the text with rows 24 cells apart over five rows is evidence; one row is
    not, whatever the samples show."""
    angles = np.arange(-90.0, 90.0, 2.5)
    inside = np.abs(angles) <= 40.0
    scores = np.full(len(angles), 0.05)
    stats = ComponentStats(h_cc=8.0, w_cc=8.0, n_components=1)
    x = np.arange(130.0)
    rows = np.exp(-0.5 * ((x[:, None] - (15.0 + 24.0 * np.arange(5))) / 3.0) ** 2).sum(axis=1)
    one = np.exp(-0.5 * ((x - 60.0) / 3.0) ** 2)
    assert steep_supported(angles, scores, inside, -60.0, 0.06, None, stats, 3.0, rows, 8.0)
    assert not steep_supported(angles, scores, inside, -60.0, 0.06, None, stats, 3.0, one, 8.0)
