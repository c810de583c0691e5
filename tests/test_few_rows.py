"""A card of three rows among specks keeps its writing's size (``few_rows``).

``H_cc``'s chain cut counts components; where specks outnumber the words (poilus
AN_0121-2, a card with a perforated edge) the plain estimate is a speck's size, and
``engine.components.row_checked_stats`` takes the ink-weighted size instead when the page's
rows lie more than ``max_pitch_hcc`` x ``H_cc`` apart. A profile of n rows correlates at most
(n - 1) / n at its pitch, so three slightly uneven rows fell under the 0.5 trust level
(the card turned by 3 degrees, seed 1: 0.48; H_cc 13 px, 27 lines for 3, FM 0). The rows
are now trusted for the part of the profile that overlaps itself at the pitch."""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from engine import components as C
from engine import pitch as P
from engine.initial_lines import line_pitch
from engine.sampling import sample_ink_pixels


def test_three_rows_show_their_period_with_few_rows() -> None:
    x = np.arange(120)
    rows = sum(np.exp(-0.5 * ((x - (20 + 40 * k)) / 14.0) ** 2) for k in range(3))
    assert math.isnan(line_pitch(rows, 2, 80))  # 0.42 at the pitch: under 0.5
    assert abs(line_pitch(rows, 2, 80, few_rows=True) - 40) <= 2
    # A row and a faint mark 103 bins below it, at the profile's ends: 0.15 at that lag, where
    # 17 of 120 bins overlap. The overlap lifts a peak by at most 2x, so this stays no period.
    edge = np.exp(-0.5 * ((x - 8) / 4.0) ** 2) + 0.3 * np.exp(-0.5 * ((x - 111) / 4.0) ** 2)
    assert math.isnan(line_pitch(edge, 2, 110, few_rows=True))
    # Noise shows no period either way.
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert math.isnan(line_pitch(rng.random(120), 2, 80, few_rows=True))


def _card(jitter: int) -> tuple[np.ndarray, np.ndarray]:
    """Components and ink of a 1600 x 900 card: 400 specks of 3 x 3 px and three rows 210 px
    apart of six 180 x 70 px words, each word up to ``jitter`` px above or below its row."""
    ink = np.zeros((900, 1600), bool)
    rng = np.random.default_rng(0)
    for y, x in zip(rng.integers(5, 892, 400), rng.integers(5, 1592, 400), strict=True):
        ink[y:y + 3, x:x + 3] = True
    yy, xx = np.mgrid[0:70, 0:180]
    word = ((np.sin(xx / 9.0) * 25 + 35 - yy) ** 2 < 60) | ((xx % 30 < 6) & (yy > 10) & (yy < 60))
    for row in range(3):
        for k in range(6):
            x0 = 100 + k * 240
            y0 = 150 + 210 * row + int(rng.integers(-jitter, jitter + 1))
            ink[y0:y0 + 70, x0:x0 + 180] |= word
    return ndimage.label(ink)[0], ink


def test_a_card_of_three_uneven_rows_keeps_its_writing_size() -> None:
    components, ink = _card(40)  # correlation 0.41 at the pitch, 0.62 for the overlap
    boxes = C.component_boxes(components)
    stats = C.component_stats(components, boxes)
    alt = C.component_stats(components, boxes, typical_by_ink=True)
    samples, _ = sample_ink_pixels(components, 0.05, 0, ink, False)
    assert stats.h_cc < 10 and alt.h_cc > 50  # a speck's size against the words'
    assert math.isnan(P.page_rows(samples, alt.h_cc)[1])  # the three rows, read plainly
    kept, pitch = C.row_checked_stats(stats, components, boxes, samples, 10.0)
    assert kept.h_cc == alt.h_cc
    assert abs(pitch - 210) <= 10
