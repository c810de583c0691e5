"""H_cc checked against the page's rows (issue 26; ``Parameters.max_pitch_hcc``,
``engine.components.row_checked_stats``): specks that outnumber the words must not set the
text size."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import make_page

from engine.params import Parameters
from engine.pipeline import prepare


def _perforated(image: np.ndarray, step: int = 20, size: int = 6, margin: int = 10) -> np.ndarray:
    """``image`` with a ring of ``size``-pixel square dots every ``step`` pixels ``margin``
    pixels inside its edge (a card's perforated edge, poilus AN_0121-2): ten times as many
    components as the page has words, each kept as ink (not a speck: 36 px)."""
    out = image.copy()
    h, w = out.shape
    for x in range(margin, w - margin - size, step):
        out[margin:margin + size, x:x + size] = 0
        out[h - margin - size:h - margin, x:x + size] = 0
    for y in range(margin, h - margin - size, step):
        out[y:y + size, margin:margin + size] = 0
        out[y:y + size, w - margin - size:w - margin] = 0
    return out


@pytest.fixture(scope="module")
def wide():
    return make_page("wide_words", seed=0)


def test_perforation_dots_do_not_set_the_text_height(wide) -> None:
    clean = prepare(wide.image).stats
    image = _perforated(wide.image)
    on = prepare(image, Parameters()).stats
    off = prepare(image, Parameters(max_pitch_hcc=0.0)).stats
    assert on.n_components > 8 * clean.n_components  # the dots outnumber the words
    # Without the check the dots' 6 px is the page's H_cc, and each word a line; with it
    # the text's own size comes back (41 px for the clean page's 43).
    assert off.h_cc < 0.25 * clean.h_cc
    assert on.h_cc == pytest.approx(clean.h_cc, rel=0.15)
    assert on.w_cc == pytest.approx(clean.w_cc, rel=0.15)


@pytest.mark.parametrize("kind", ["straight", "wide_words", "dense_rows"])
def test_clean_pages_keep_their_text_height(kind: str) -> None:
    """Rows 2-4.5 H_cc apart are far inside the check: H_cc and W_cc do not change."""
    page = make_page(kind, seed=0)
    on = prepare(page.image, Parameters()).stats
    off = prepare(page.image, Parameters(max_pitch_hcc=0.0)).stats
    assert (on.h_cc, on.w_cc) == (off.h_cc, off.w_cc)
