"""Stage 1, ``colour_stamps``: ink of another colour than the writing is kept out of the
samples only where it forms a shape taller than a row (a stamp); a word written in a second
ink within a row stays ink, and a stamp's pixels on a line's row are still labelled."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import make_page
from test_scan_frontend import stamped

from engine.ink import find_ink, label_components, other_colour_ink, stamp_ink, text_height
from engine.io import page_from_array
from engine.params import Parameters


def stamped_page_with_red_word() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The synthetic page in colour ``(H, W, 3)``, a violet round stamp over its middle
    lines, and the first half of its first line rewritten in red ink (a second ink that is
    text); its truth, and the masks of the red half-line and of the stamp."""
    page = make_page("straight", 0)
    rgb = np.repeat(page.image[:, :, None], 3, axis=2)
    gt = page.labels
    ys, xs = np.nonzero(gt == 1)
    h_text = float(np.percentile(ys, 95) - np.percentile(ys, 5))
    rgb, gt = stamped(rgb, gt, h_text)
    word = (gt == 1) & (np.arange(gt.shape[1])[None, :] < np.median(xs))
    stamp = np.all(rgb == (120, 40, 170), axis=2)
    # The half-line's strokes and their blurred rims in red: red the darker the pixel.
    band = np.zeros(gt.shape, bool)
    band[ys.min() - 3:ys.max() + 4, :int(np.median(xs))] = True
    band &= ~stamp
    dark = (255.0 - rgb[band].astype(np.float64).mean(axis=1))[:, None]
    rgb = rgb.copy()
    rgb[band] = np.rint(255.0 - dark * (0.2, 1.0, 1.0)).astype(np.uint8)
    return rgb, gt, word, stamp


@pytest.fixture(scope="module")
def page_with_stamp_and_red_word():
    rgb, _, word, stamp = stamped_page_with_red_word()
    return page_from_array(rgb), word, stamp


def test_stamp_is_not_text_and_a_red_word_on_a_row_is(page_with_stamp_and_red_word) -> None:
    page, word, stamp = page_with_stamp_and_red_word
    found = find_ink(page, Parameters(colour_stamps=True))
    every = find_ink(page, Parameters(colour_non_text=True))
    # The stamp's ring and lettering: kept out of the ink (non-text), as with every
    # other-colour pixel taken out (but where a stroke of the writing crosses the stamp).
    assert found.non_text[stamp].mean() > 0.5
    assert found.ink[stamp].mean() < 0.5
    assert np.array_equal(found.non_text[stamp], every.non_text[stamp])
    # The red half-line is other-colour ink too, but lies within a row: it stays ink.
    assert found.ink[word].mean() > 0.9
    # colour_non_text takes every other-colour pixel: the red half-line is lost with the stamp.
    assert every.ink[word].mean() < 0.2
    # Off (the default): the stamp is ink like the writing.
    plain = find_ink(page, Parameters())
    assert plain.ink[stamp].mean() > 0.8


def test_stamp_ink_keeps_only_shapes_taller_than_a_row() -> None:
    other = np.zeros((400, 600), bool)
    other[50:70, 50:300] = True          # a word's height: stays
    other[150:350, 400:410] = True       # a ring, 200 px tall and 100 wide: a stamp
    other[150:160, 400:500] = True
    other[150:350, 20:30] = True         # a narrow rule, 200 px tall: not a stamp
    out = stamp_ink(other, 20.0)
    assert not out[50:70, 50:300].any()
    assert out[150:350, 400:410].all() and out[150:160, 400:500].all()
    assert not out[150:350, 20:30].any()
    assert not stamp_ink(np.zeros((10, 10), bool), 20.0).any()


def test_the_writing_colour_is_the_page_s_median() -> None:
    # Mostly blue writing with a grey stamp: the grey is the other colour here.
    rgb = np.full((200, 300, 3), 240, np.uint8)
    rgb[20:60, 20:280] = (40, 60, 200)
    rgb[100:120, 20:100] = (60, 60, 60)
    ink = np.zeros((200, 300), bool)
    ink[20:60, 20:280] = ink[100:120, 20:100] = True
    other = other_colour_ink(rgb, ink)
    assert other[100:120, 20:100].all() and not other[20:60, 20:280].any()
    _, stats = label_components(ink)
    assert text_height(stats, ink.shape) > 0
