"""Stage 1's and stage 8's details for scanned pages, each on a constructed case: which
pixels of a rule are stripped, which components may set the text height, and the pale rims
of the strokes that the final labels take."""

from __future__ import annotations

import cv2
import numpy as np

from engine.components import component_boxes, component_stats, solid_bars
from engine.ink import _strip_long_strokes, label_components, stroke_rims
from engine.postprocess import grow_labels

H_TEXT = 30.0


def _rule_with(extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 3-px horizontal rule across a 120 x 400 canvas, plus ``extra`` ink (bool); returns the
    (stripped, labelled) pair for the one component they form."""
    ink = extra.copy()
    ink[60:63, 10:390] = True
    labels, stats = label_components(ink)
    assert labels.max() == 1
    return _strip_long_strokes(labels, stats, np.array([1]), H_TEXT)[0], labels


def test_a_stroke_crossing_a_rule_keeps_its_pixels_on_the_rule() -> None:
    extra = np.zeros((120, 400), bool)
    extra[40:85, 200:203] = True  # a descender through the rule: ink above and below it
    stripped, labels = _rule_with(extra)
    assert not stripped[60:63, 200:203].any()  # the crossing stays the letter's
    assert stripped[60:63, 20:190].all() and stripped[60:63, 215:380].all()  # the rest goes


def test_ink_on_one_side_of_a_rule_does_not_keep_the_rule() -> None:
    # A letter sitting on the rule, and a frame's side bending away from a straight run: ink
    # touching one side only. Both used to keep the rule under them (a one-sided test), which
    # kept hand-drawn frames as ink and made lines of them (poilus AN_0228-1).
    extra = np.zeros((120, 400), bool)
    extra[35:60, 100:104] = True  # above only
    extra[63:100, 300:304] = True  # below only
    stripped, _ = _rule_with(extra)
    assert stripped[60:63, 100:104].all() and stripped[60:63, 300:304].all()
    # The letters themselves stay, but for the rows the rule's allowed wobble (2 px) takes.
    assert not stripped[35:58, 100:104].any() and not stripped[65:100, 300:304].any()


def test_a_thick_band_is_not_stripped_but_reported() -> None:
    ink = np.zeros((120, 400), bool)
    ink[60:63, 10:390] = True  # the 3-px rule of _rule_with
    ink[80:100, 10:390] = True  # a band 20 px thick (two thirds of a text height)
    ink[63:80, 200:203] = True  # joined to the rule
    labels, stats = label_components(ink)
    assert labels.max() == 1
    thin, bands = _strip_long_strokes(labels, stats, np.array([1]), H_TEXT)
    assert bands[80:100, 20:380].all() and not thin[80:100].any()
    assert thin[60:63, 20:190].all() and not bands[60:63].any()


def test_solid_bars_are_told_from_letters() -> None:
    # (width, height, area): a rule's dash, a hyphen, a dot, a letter, a flat word, a slanted line
    w = np.array([30, 12, 4, 20, 90, 60])
    h = np.array([3, 3, 4, 25, 24, 20])
    area = np.array([90, 33, 14, 140, 700, 120])
    assert solid_bars(w, h, area).tolist() == [True, True, False, False, False, False]


def test_dashes_of_a_printed_rule_do_not_set_the_text_height() -> None:
    # 40 letter-like rings 30 px tall, and 400 dashes (3 x 24 px) of dotted form rules: the
    # dashes outnumber the letters ten to one, as on poilus AN_0187-0 (H_cc 3 px before).
    img = np.zeros((1200, 1600), np.uint8)
    for i in range(40):
        cv2.ellipse(img, (40 + (i % 20) * 75, 60 + (i // 20) * 120), (12, 15), 0, 0, 360, 1, 3)
    rings, _ = label_components(img > 0)
    for i in range(400):
        y, x = 300 + (i // 40) * 60, 20 + (i % 40) * 38
        img[y:y + 3, x:x + 24] = 1
    labels, _ = label_components(img > 0)
    assert labels.max() == 440
    h_letters = component_stats(rings, component_boxes(rings)).h_cc
    assert h_letters > 30
    assert component_stats(labels, component_boxes(labels)).h_cc == h_letters


def test_stroke_rims_are_the_pale_edges_next_to_the_ink() -> None:
    rng = np.random.default_rng(0)
    gray = np.clip(rng.normal(210, 2, (100, 200)), 0, 255).astype(np.uint8)
    cv2.line(gray, (20, 50), (180, 50), 60, 5)
    gray = cv2.GaussianBlur(gray, (0, 0), 1.0)
    ink = gray < 120  # the dark core a binarisation keeps
    paper = gray > 200
    rims = stroke_rims(gray, ink, paper)
    edge = (gray < 190) & ~ink  # the blurred edge, clearly darker than the paper
    assert rims[edge].mean() > 0.95
    far = np.ones_like(ink)
    far[30:71, :] = False
    assert not rims[far].any()  # paper away from the strokes, noise or not


def test_grow_labels_fills_the_rims_from_the_adjacent_stroke() -> None:
    labels = np.zeros((20, 40), np.int32)
    labels[5:8, 5:15] = 1
    labels[12:15, 25:35] = 2
    into = np.zeros((20, 40), bool)
    into[3:10, 3:17] = True  # rim round line 1
    into[10:17, 23:37] = True  # rim round line 2
    into[0, 39] = True  # out of reach
    grow_labels(labels, into, 2)
    assert (labels[3:10, 3:17] == 1).all() and (labels[10:17, 23:37] == 2).all()
    assert labels[0, 39] == 0
