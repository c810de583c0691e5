"""Stage 1's and stage 8's details for scanned pages, each on a constructed case: which
pixels of a rule are stripped, which components may set the text height, and the pale rims
of the strokes that the final labels take."""

from __future__ import annotations

from types import SimpleNamespace

import cv2
import numpy as np
from scipy import ndimage

from engine.components import component_boxes, component_stats, solid_bars
from engine.ink import _strip_long_strokes, find_ink, label_components, spans_rows, stretch_contrast, stroke_rims
from engine.io import page_from_array
from engine.model import LineSet, Page
from engine.params import Parameters
from engine.pipeline import segment
from engine.postprocess import finish, grow_labels, label_non_text, label_specks

H_TEXT = 30.0


def _rule_with(extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 3-px horizontal rule across a 120 x 400 canvas, plus ``extra`` ink (bool); returns the
    (stripped, labelled) pair for the one component they form."""
    ink = extra.copy()
    ink[60:63, 10:390] = True
    labels, stats = label_components(ink)
    assert labels.max() == 1
    return _strip_long_strokes(labels, stats, np.array([1]), H_TEXT)[0], labels


def _page_of_depth(depth: int) -> np.ndarray:
    """Paper at grey 200 with 2 % of its pixels ``depth`` levels darker (uint8 ``(200, 200)``)."""
    gray = np.full((200, 200), 200, np.uint8)
    gray[::10, ::5] = 200 - depth
    return gray


def test_contrast_is_raised_to_sauvolas_range_continuously() -> None:
    """A faint page's ink is brought to R = 128 levels below its paper, which stays where it
    is; a page already that deep is left alone, and one just under it barely changes (no
    jump between two pages that differ by a level or two)."""
    faint = stretch_contrast(_page_of_depth(40))
    assert faint[1, 1] == 200 and faint[0, 0] == 200 - 128
    assert np.array_equal(stretch_contrast(_page_of_depth(128)), _page_of_depth(128))
    just_under = stretch_contrast(_page_of_depth(126))
    assert just_under[1, 1] == 200 and abs(int(just_under[0, 0]) - (200 - 128)) <= 1


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


def test_spans_rows_is_taller_than_three_text_heights() -> None:
    # OpenCV stats rows (x, y, w, h, area): the background, a cloud round two rows, a word of
    # a note written up the margin, a word, a long flat word.
    stats = np.array([[0, 0, 800, 400, 0], [0, 0, 400, 100, 900], [0, 0, 30, 150, 600],
                      [0, 0, 120, 40, 700], [0, 0, 300, 45, 1500]])
    assert spans_rows(stats, 30.0).tolist() == [False, True, True, False, False]
    assert spans_rows(stats, 40.0).tolist() == [False, False, True, False, False]


def test_a_cloud_round_two_rows_is_stripped_and_its_words_stay() -> None:
    # Two rows of rings 30 px tall, 60 px apart, and a loop drawn round both (120 px tall: four
    # text heights, too short to be dropped as non-text) touching each row's first and last
    # ring: one component. Its long top and bottom runs are stripped, the rings stay ink.
    gray = np.full((400, 1400), 235, np.uint8)  # the loop under 1/1.5 of the width: kept
    for y in (160, 220):
        for i in range(18):
            cv2.ellipse(gray, (60 + i * 45, y), (12, 15), 0, 0, 360, 20, 3)
    cv2.rectangle(gray, (49, 130), (835, 250), 20, 3)
    labels, _ = label_components(gray < 128)
    assert labels.max() == 1 + 2 * 16  # the loop with the 4 rings it touches, and the rest
    found = find_ink(Page(gray=gray, bilevel=False), Parameters())
    assert found.non_text[129:132, 100:800].all() and found.non_text[249:252, 100:800].all()
    rings = np.zeros(gray.shape, bool)
    for y in (160, 220):
        rings[y - 10:y + 10, 100:800] = gray[y - 10:y + 10, 100:800] < 128
    assert found.ink[rings].all()
    assert not found.ink[129:132, 100:800].any()


def test_non_text_pixels_go_to_the_line_on_their_row_up_to_a_word_beyond_its_end() -> None:
    # One line along y = 100, its extent 2 sigma_s = 100 px either side of x = 200; H_cc 30,
    # W_cc 60, reach 4 W_cc = 240 px. Non-text pixels on its row 30 and 200 px past its end (a
    # word touching a frame there) take it; 300 px past it or 45 px across it (the next
    # row's) do not; with a reach of 1 W_cc the one 200 px past it does not either.
    line = LineSet(np.array([0.0]), np.array([100.0]), np.array([200.0]), np.array([8.0]),
                   np.array([50.0]), np.array([1.0]), np.zeros(1, np.int32), np.zeros(1), True)
    non_text = np.zeros((200, 800), bool)
    non_text[98:102, 328:332] = True  # 30 px beyond the end
    non_text[98:102, 498:502] = True  # 200 px beyond
    non_text[98:102, 598:602] = True  # 300 px beyond
    non_text[143:147, 200:204] = True  # 45 px across
    prep = SimpleNamespace(non_text=non_text, faint=None, page_area=None,
                           stats=SimpleNamespace(h_cc=30.0, w_cc=60.0))
    labels = np.zeros((200, 800), np.int32)
    label_non_text(labels, prep, line, beyond=4.0)
    assert (labels[98:102, 328:332] == 1).all() and (labels[98:102, 498:502] == 1).all()
    assert not labels[98:102, 598:602].any() and not labels[143:147, 200:204].any()
    short = np.zeros((200, 800), np.int32)
    label_non_text(short, prep, line, beyond=1.0)
    assert (short[98:102, 328:332] == 1).all() and not short[98:102, 498:502].any()


def test_a_word_past_its_lines_start_goes_to_it_not_to_the_nearer_rows_around() -> None:
    # Line 1 on y = 100 holds x 100..300; lines 0 and 2 (y = 40 and 160) run x 0..600. A word
    # stripped with a frame at x 400 on y = 100 is 60 px from lines 0 and 2, outside their
    # bands (1 H_cc = 20 px), and 100 px past line 1's end: it goes to line 1.
    lines = LineSet(np.zeros(3), np.array([40.0, 100.0, 160.0]), np.array([300.0, 200.0, 300.0]),
                    np.full(3, 6.0), np.array([150.0, 50.0, 150.0]), np.full(3, 1 / 3),
                    np.zeros(3, np.int32), np.zeros(3), True)
    non_text = np.zeros((200, 700), bool)
    non_text[98:102, 398:402] = True
    prep = SimpleNamespace(non_text=non_text, faint=None, page_area=None,
                           stats=SimpleNamespace(h_cc=20.0, w_cc=60.0))
    labels = np.zeros((200, 700), np.int32)
    label_non_text(labels, prep, lines, beyond=4.0)
    assert (labels[98:102, 398:402] == 2).all()


def test_non_text_pixels_within_the_lines_own_band_of_ink_go_to_it() -> None:
    # The same line (y = 100, H_cc 30): its samples reach 50 px below it (long descenders), so
    # a non-text pixel 45 px below it is on its row and takes it; without the samples (a
    # reach of 1 H_cc) it does not; 70 px below, past every sample of the line, it never does.
    line = LineSet(np.array([0.0]), np.array([100.0]), np.array([200.0]), np.array([8.0]),
                   np.array([50.0]), np.array([1.0]), np.zeros(1, np.int32), np.zeros(1), True)
    non_text = np.zeros((200, 500), bool)
    non_text[143:147, 200:204] = True  # 45 px below
    non_text[168:172, 240:244] = True  # 70 px below
    xs = np.linspace(110.0, 290.0, 200)
    ys = 100.0 + np.where(np.arange(200) % 4 == 0, np.linspace(0.0, 50.0, 200), np.linspace(-20.0, 20.0, 200))
    prep = SimpleNamespace(non_text=non_text, faint=None, page_area=None,
                           samples=np.stack([xs, ys], axis=1),
                           stats=SimpleNamespace(h_cc=30.0, w_cc=60.0))
    without = np.zeros((200, 500), np.int32)
    label_non_text(without, prep, line)
    assert not without.any()
    labels = np.zeros((200, 500), np.int32)
    label_non_text(labels, prep, line, np.zeros(200, np.int64))
    assert (labels[143:147, 200:204] == 1).all()
    assert not labels[168:172, 240:244].any()


def test_a_speck_takes_the_line_of_the_nearest_ink_not_of_the_nearest_line() -> None:
    # Line 1's word on rows 40-50 has a descender down to row 95; line 2's word sits on rows
    # 110-120. A speck 3 px right of the descender's tip (row 93) is nearer line 2's body
    # (17 px) than line 1's (43 px) but nearest to line 1's ink: it takes line 1. A speck 4 px
    # above line 2's word takes line 2; one 60 px from any ink stays unlabelled (reach 20 px).
    labels = np.zeros((200, 300), np.int32)
    labels[40:50, 20:200] = 1
    labels[50:96, 100:103] = 1
    labels[110:120, 20:200] = 2
    specks = np.zeros((200, 300), bool)
    specks[92:94, 105:107] = True
    specks[104:106, 60:62] = True
    specks[180:182, 260:262] = True
    label_specks(labels, specks, 20.0)
    assert (labels[92:94, 105:107] == 1).all()
    assert (labels[104:106, 60:62] == 2).all()
    assert not labels[180:182, 260:262].any()
    # Labelled pixels are never relabelled.
    assert (labels[40:50, 20:200] == 1).all() and (labels[110:120, 20:200] == 2).all()


def test_specks_are_kept_out_of_sampling_and_labelled_with_their_strokes_line() -> None:
    # A bilevel synthetic page with 30 dots of 2 x 2 px, 3-4 px from the writing (a stroke's
    # broken pieces), and one in the margin 100 px from any ink. The dots are too small to
    # sample (specks), yet each pixel ends with the line of the labelled ink nearest it; the
    # margin's stays unlabelled; with label_non_text off (the paper) no dot is labelled.
    from synthetic import make_page

    page = make_page("straight", seed=0)
    ink = page.image < 128
    dist = ndimage.distance_transform_edt(~ink)
    ok = (dist >= 3) & (dist <= 4)
    ok = ok[:-1, :-1] & ok[1:, :-1] & ok[:-1, 1:] & ok[1:, 1:]
    spots = np.argwhere(ok)
    dots = spots[np.random.default_rng(0).choice(len(spots), 30, replace=False)]
    dotted = ink.copy()
    for y, x in dots:
        dotted[y:y + 2, x:x + 2] = True
    assert dist[20, 20] > 90
    dotted[20:22, 20:22] = True
    prep, snap, seg = segment(page_from_array(dotted), Parameters())
    assert all(prep.specks[y:y + 2, x:x + 2].all() and not prep.ink[y:y + 2, x:x + 2].any() for y, x in dots)
    # Each dot pixel's line is that of the nearest labelled ink (ties either way).
    at_dots = np.zeros(ink.shape, bool)
    for y, x in dots:
        at_dots[y:y + 2, x:x + 2] = True
    written = np.where(at_dots, 0, seg.labels)
    got = seg.labels[at_dots]
    assert (got > 0).all()
    d_got = np.zeros(len(got))
    for k in np.unique(got):
        d_got[got == k] = ndimage.distance_transform_edt(written != k)[at_dots][got == k]
    assert np.allclose(d_got, ndimage.distance_transform_edt(written == 0)[at_dots])
    assert not seg.labels[20:22, 20:22].any()
    paper = finish(prep, snap, Parameters(label_non_text=False))
    assert not any(paper.labels[y:y + 2, x:x + 2].any() for y, x in dots)
