"""The shortcuts that make stages 1 and 8 fast give exactly what the plain computation gives.

Each shortcut skips work that cannot change the result (rows no kernel reaches, components
whose whole box lies in their line's band, pixels outside a line's rows) or gets a result
another way (a histogram's median, the nearest ink found before EM). Each test sets the
shortcut against the plain computation it replaces, written out here, on cases built to
reach its edges: kernels of even length (OpenCV's openings then shift a pixel), runs
touching the image's border, groups of rows closer than a kernel, and on the bundled
sample page, which has rules, faint strokes and specks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import pytest

from engine.ink import (
    _median_and_deviation,
    _on_rows_near,
    _open_rows,
    _row_strokes,
    _strip_long_strokes,
    find_ink,
    label_components,
    median_level,
    stroke_sizes,
)
from engine.io import load_page
from engine.model import LineSet
from engine.params import Parameters
from engine.pipeline import finish, prepare, run_em
from engine.postprocess import (
    _line_forms,
    _signed_distance,
    final_labels,
    grow_labels,
    ink_bands,
    label_non_text,
    speck_owners,
)

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "resources" / "sample" / "170025120000003_0074.jpg"


def _sparse_strokes(shape: tuple[int, int], seed: int) -> np.ndarray:
    """uint8 0/1 ``shape``: long horizontal runs (some touching the left or right border,
    some two rows apart), short ones, and noise; a frame's box is like this."""
    rng = np.random.default_rng(seed)
    m = np.zeros(shape, np.uint8)
    h, w = shape
    for _ in range(12):
        y = int(rng.integers(0, h))
        x0 = int(rng.integers(-w // 4, w))
        m[y:y + int(rng.integers(1, 4)), max(x0, 0):max(x0 + int(rng.integers(5, w)), 0)] = 1
    m[rng.random(shape) < 0.01] = 1
    return m


@pytest.mark.parametrize("length", [14, 15, 40, 41])
def test_row_openings_equal_opencvs_on_the_whole_image(length: int) -> None:
    along = cv2.getStructuringElement(cv2.MORPH_RECT, (length, 1))
    for seed in range(6):
        m = _sparse_strokes((90, 160), seed)
        np.testing.assert_array_equal(_open_rows(m, along), cv2.morphologyEx(m, cv2.MORPH_OPEN, along))


@pytest.mark.parametrize("thick", [3, 4, 9, 10])
def test_openings_across_rows_near_the_pixels_equal_the_whole_images(thick: int) -> None:
    kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (1, thick))

    def op(m: np.ndarray) -> np.ndarray:
        return cv2.morphologyEx(m, cv2.MORPH_OPEN, kernel)

    for seed in range(8):
        m = np.zeros((200, 60), np.uint8)
        rng = np.random.default_rng(seed)
        # Bands of rows (thicker and thinner than the kernel) at the borders and in between,
        # some closer together than the kernel, most of the image empty.
        for y in (0, int(rng.integers(5, 40)), int(rng.integers(60, 120)), 190):
            m[y:y + int(rng.integers(2, 2 * thick)), int(rng.integers(0, 30)):] = 1
        m[rng.random(m.shape) < 0.005] = 1
        np.testing.assert_array_equal(_on_rows_near(m, thick, op), op(m))


def test_crossings_near_a_rules_rows_equal_the_whole_images() -> None:
    reach = 4
    cross = np.ones((2 * reach + 1, 1), np.uint8)

    def crossed(m: np.ndarray) -> np.ndarray:
        return cv2.dilate(m, cross, anchor=(0, 2 * reach)) & cv2.dilate(m, cross, anchor=(0, 0))

    for seed in range(6):
        rng = np.random.default_rng(seed)
        rule = np.zeros((150, 80), np.uint8)
        rule[[0, 40, 43, 149], :] = 1
        rest = (rng.random(rule.shape) < 0.05).astype(np.uint8)
        got = _on_rows_near(rule, 2 * reach + 1, crossed, rest)
        rows = rule.any(axis=1)
        np.testing.assert_array_equal(got[rows], crossed(rest)[rows])


def _plain_strokes(mask: np.ndarray, h_text: float, vertical: bool) -> tuple[np.ndarray, np.ndarray]:
    """The long strokes and bands of a component's crop as first computed: every morphology
    on the whole crop, with vertical kernels for vertical strokes."""
    length, wobble, thick, reach = stroke_sizes(h_text)

    def rect(along: int, across: int) -> np.ndarray:  # a kernel ``along`` the stroke
        return cv2.getStructuringElement(cv2.MORPH_RECT, (across, along) if vertical else (along, across))

    cross = np.ones((1, 2 * reach + 1) if vertical else (2 * reach + 1, 1), np.uint8)
    before, after = ((2 * reach, 0), (0, 0)) if vertical else ((0, 2 * reach), (0, 0))
    found = cv2.morphologyEx(cv2.dilate(mask, rect(1, 2 * wobble + 1)), cv2.MORPH_OPEN, rect(length, 1)) & mask
    found &= ~cv2.morphologyEx(found, cv2.MORPH_OPEN, rect(1, thick))
    bands = cv2.morphologyEx(cv2.morphologyEx(mask, cv2.MORPH_OPEN, rect(length, 1)), cv2.MORPH_OPEN,
                             rect(1, thick))
    rest = mask & ~found
    crossed = cv2.dilate(rest, cross, anchor=before) & cv2.dilate(rest, cross, anchor=after)
    return found & ~crossed, bands


@pytest.mark.parametrize("h_text", [20.0, 21.0])  # even and odd kernels
def test_long_strokes_on_the_rows_that_hold_them_equal_the_plain_computation(h_text: float) -> None:
    # A frame round two rows of "words" (blocks joined by strokes), a rule through the second
    # row with a descender crossing it, a thick band, a vertical rule, a frame touching the
    # image's border: the crops of the components these form, both ways.
    rng = np.random.default_rng(int(h_text))
    ink = np.zeros((420, 700), bool)
    ink[20:24, 20:680] = ink[380:384, 20:680] = True  # frame top and bottom
    ink[20:384, 20:24] = ink[20:384, 676:680] = True  # frame sides
    for row in (90, 200):
        for x0 in range(60, 620, 70):
            ink[row:row + 18, x0:x0 + 40] |= rng.random((18, 40)) < 0.6
            ink[row + 18:row + 30, x0 + 10:x0 + 13] = True
        ink[row + 9:row + 12, 60:660] = True  # a stroke joining the row to the frame's side
    ink[215:218, 24:676] = True  # a rule across the frame
    ink[300:312, 100:500] = True  # a band, 12 px thick
    ink[0:3, 0:700] = ink[0:300, 695:700] = True  # a frame at the image's border
    labels, stats = label_components(ink)
    length, wobble, thick, reach = stroke_sizes(h_text)
    seen = np.zeros(2, int)
    for c in range(1, len(stats)):
        x, y, w, h = (int(v) for v in stats[c, :4])
        mask = (labels[y:y + h, x:x + w] == c).view(np.uint8)
        if w >= length:
            got = _row_strokes(mask, length, wobble, thick, reach)
            want = _plain_strokes(mask, h_text, vertical=False)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            seen += [want[0].any(), want[1].any()]
        if h >= length:
            got = [cv2.transpose(m) for m in _row_strokes(cv2.transpose(mask), length, wobble, thick, reach)]
            want = _plain_strokes(mask, h_text, vertical=True)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            seen += [want[0].any(), want[1].any()]
    assert seen.all()  # strokes and bands were found, not only empty results compared
    stripped, bands = _strip_long_strokes(labels, stats, np.arange(1, len(stats)), h_text)
    assert stripped.any() and bands.any()


def test_histogram_medians_equal_numpys() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 10, 11, 1000):
        values = rng.integers(int(rng.integers(0, 250)), 256, n).astype(np.uint8)
        level = float(np.median(values))
        assert _median_and_deviation(values) == (level, float(np.median(np.abs(values - level))))
        gray = rng.integers(0, 256, (5, n)).astype(np.uint8)
        mask = rng.random(gray.shape) < 0.5
        assert median_level(gray, mask) == (float(np.median(gray[mask])) if mask.any() else 255.0)
    assert median_level(np.zeros((3, 3), np.uint8), np.zeros((3, 3), bool)) == 255.0


def test_speck_owners_are_the_nearest_ink_within_reach() -> None:
    rng = np.random.default_rng(1)
    ink = rng.random((120, 150)) < 0.02
    specks = (rng.random(ink.shape) < 0.02) & ~ink
    target, source = speck_owners(ink, specks, 9.5)
    ty, tx = np.divmod(target, ink.shape[1])
    sy, sx = np.divmod(source, ink.shape[1])
    iy, ix = np.nonzero(ink)
    py, px = np.nonzero(specks)
    d = np.hypot(py[:, None] - iy[None, :], px[:, None] - ix[None, :]).min(axis=1)
    within = d < 9.5
    np.testing.assert_array_equal(target, (py * ink.shape[1] + px)[within])
    assert ink.ravel()[source].all()
    np.testing.assert_allclose(np.hypot(ty - sy, tx - sx), d[within])


def test_grow_labels_in_every_label_type_equals_the_plain_growth() -> None:
    rng = np.random.default_rng(2)
    for top in (7, 300, 70_000):
        labels = np.where(rng.random((60, 80)) < 0.05, rng.integers(1, top + 1, (60, 80)), 0).astype(np.int32)
        into = rng.random(labels.shape) < 0.4
        want = labels.copy()
        for _ in range(2):  # the plain growth: a float dilation, a fill of the empty pixels
            grown = cv2.dilate(want.astype(np.float32), np.ones((3, 3), np.uint8))
            fill = into & (want == 0) & (grown > 0)
            want[fill] = grown[fill].astype(np.int32)
        got = labels.copy()
        grow_labels(got, into, 2)
        np.testing.assert_array_equal(got, want)


def test_non_text_on_a_lines_rows_equals_the_scan_over_every_line() -> None:
    # Lines at several angles and lengths over a page of scattered non-text pixels: each
    # pixel goes to the nearest line holding it in its band, as when every line is measured
    # against every pixel.
    rng = np.random.default_rng(3)
    h, w = 300, 400
    n = 9
    lines = LineSet(a=rng.uniform(-0.2, 0.2, n), b=np.linspace(20, 280, n), c=rng.uniform(100, 300, n),
                    sigma_t=np.full(n, 8.0), sigma_s=rng.uniform(30, 120, n), prior=np.full(n, 1 / n),
                    region=np.zeros(n, np.int32), phi=rng.uniform(-0.3, 0.3, n))
    mask = rng.random((h, w)) < 0.2
    prep = _FakePrep(non_text=mask, faint=None, page_area=None, stats=_Stats(h_cc=10.0, w_cc=15.0),
                     samples=np.zeros((0, 2)))
    labels = np.zeros((h, w), np.int32)
    label_non_text(labels, prep, lines, None, 1.5)
    lo, hi = ink_bands(prep, lines, None)
    ys, xs = np.nonzero(mask)
    xy = np.stack([xs, ys], axis=1).astype(float)
    best, idx = np.full(len(xy), np.inf), np.full(len(xy), -1)
    forms = _line_forms(lines)
    for k in range(n):
        d_t, past = _signed_distance(xy, lines, np.full(len(xy), k), forms)
        d = np.where((d_t >= lo[k]) & (d_t <= hi[k]) & (past <= 1.5 * 15.0), np.hypot(d_t, past), np.inf)
        better = d < best
        best[better], idx[better] = d[better], k
    want = np.zeros((h, w), np.int32)
    want[ys, xs] = idx + 1
    assert (want > 0).sum() > 1000
    np.testing.assert_array_equal(labels, want)


@dataclasses.dataclass
class _Stats:
    h_cc: float
    w_cc: float


@dataclasses.dataclass
class _FakePrep:
    non_text: np.ndarray
    faint: np.ndarray | None
    page_area: np.ndarray | None
    stats: _Stats
    samples: np.ndarray


@pytest.fixture(scope="module")
def sample_page():
    if not SAMPLE.is_file():
        pytest.skip("the bundled sample page is missing")
    prep = prepare(str(SAMPLE), Parameters())
    *_, snap = run_em(prep)
    return prep, snap


def test_the_sample_page_has_what_the_shortcuts_skip(sample_page) -> None:
    prep, _ = sample_page
    assert prep.speck_owners is not None and len(prep.speck_owners[0]) > 1000
    assert prep.component_boxes is not None and prep.non_text.any() and prep.faint.any()
    # Stage 1 strips long strokes on this page (its margin rule and the page's edge).
    found = find_ink(load_page(SAMPLE), Parameters())
    assert found.non_text.any()


def test_labels_from_the_speck_owners_found_early_equal_the_late_search(sample_page) -> None:
    prep, snap = sample_page
    early = finish(prep, snap).labels
    late = finish(dataclasses.replace(prep, speck_owners=None), snap).labels
    assert (early != 0).sum() > (prep.ink).sum()  # specks and faint pixels took lines too
    np.testing.assert_array_equal(early, late)


def test_final_labels_skipping_components_inside_their_band_equal_the_full_pass(sample_page) -> None:
    from engine.postprocess import consolidate_lines

    prep, snap = sample_page
    lines, sample_labels = consolidate_lines(prep, snap, prep.params, split=True)
    fast = final_labels(prep, lines, sample_labels)
    full = final_labels(dataclasses.replace(prep, component_boxes=None), lines, sample_labels)
    np.testing.assert_array_equal(fast, full)


# --- EM's passes over (lines x samples) arrays, in cache-sized blocks ------------------------

def _many_lines(n_lines: int, seed: int) -> LineSet:
    """``n_lines`` lines over a 3000 x 2000 frame, as a locked file's pieces are: many, short."""
    rng = np.random.default_rng(seed)
    z = np.zeros(n_lines)
    return LineSet(rng.normal(0, 0.02, n_lines), rng.uniform(0, 3000, n_lines), rng.uniform(0, 2000, n_lines),
                   rng.uniform(8, 30, n_lines), rng.uniform(20, 80, n_lines), rng.dirichlet(np.ones(n_lines)),
                   np.zeros(n_lines, np.int32), z, True, np.ones(n_lines, bool), np.zeros(n_lines, bool),
                   np.arange(n_lines, dtype=np.int32))


@pytest.mark.parametrize("form", ["plateau", "paper"])
@pytest.mark.parametrize("rotation_invariant", [True, False])
def test_unary_in_blocks_of_samples_equals_the_whole_array(monkeypatch, form: str, rotation_invariant: bool) -> None:
    from engine import unary

    lines = _many_lines(37, 1).with_rotation_invariant(rotation_invariant)
    uv = np.random.default_rng(2).uniform(0, 3000, (5003, 2))  # not a multiple of any block
    space = np.random.default_rng(3).uniform(40, 120, len(lines))
    bias = np.random.default_rng(4).normal(0, 1, len(lines))
    whole = unary.log_unary_by_line(uv, lines, space, 0.1, bias, form)  # 185k entries: one block
    monkeypatch.setattr(unary, "UNARY_BLOCK", 37 * 300)  # blocks of 300 samples, the last of 203
    blocks = unary.log_unary_by_line(uv, lines, space, 0.1, bias, form)
    assert blocks.shape == (37, 5003) and blocks.dtype == np.float32 and blocks.flags.c_contiguous
    np.testing.assert_array_equal(blocks, whole)


def test_argmax_a_row_at_a_time_equals_numpys_with_ties() -> None:
    from engine.em import argmax_rows

    rng = np.random.default_rng(5)
    u = rng.normal(0, 10, (60, 4000)).astype(np.float32)
    # EM floors each sample's lines at its best minus candidate_nats: many ties at the floor,
    # and ties at the top (a sample halfway between two lines).
    np.maximum(u, u.max(axis=0) - 5.0, out=u)
    u[7, :100] = u[3, :100] = u[:, :100].max(axis=0) + 1.0
    np.testing.assert_array_equal(argmax_rows(u), u.argmax(axis=0))
    assert argmax_rows(u[:1]).tolist() == [0] * 4000 and argmax_rows(u[:0]).shape == (4000,)


def test_log_likelihood_in_blocks_equals_the_whole_array(monkeypatch) -> None:
    from engine import em, unary

    rng = np.random.default_rng(6)
    unaries = [rng.normal(-20, 15, (41, 3001)).astype(np.float32), np.zeros((0, 5), np.float32),
               rng.normal(-20, 15, (3, 77)).astype(np.float32)]

    def plain(us: list[np.ndarray]) -> float:
        total = sum(float((u.max(axis=0) + np.log(np.exp(u - u.max(axis=0)).sum(axis=0))).sum())
                    for u in us if u.size)
        return total / sum(u.shape[1] for u in us if u.size)

    monkeypatch.setattr(unary, "UNARY_BLOCK", 41 * 256)  # engine.unary.sample_block
    assert unary.sample_block(41) == 256  # 3001 samples: 12 blocks, the last of 185
    assert em._log_likelihood(unaries) == plain(unaries)


@pytest.mark.parametrize("block", [None, 9 * 128])
@pytest.mark.parametrize("largest", [False, True])
def test_best_of_the_reached_lines_over_their_pairs_equals_the_dense_arg(monkeypatch, block, largest) -> None:
    """Stage 8 cuts a component that reaches several lines' cores at the nearest of them or
    the likeliest under the profile; values are taken only for each pixel's reached lines
    (pairs), not for every slot, in blocks of points (here one, or blocks of 128 points, the
    last of 56)."""
    from engine import postprocess
    from engine.postprocess import _distance, best_reached

    if block is not None:
        monkeypatch.setattr(postprocess, "_PAIR_BLOCK", block)
    lines = _many_lines(40, 7)
    forms = _line_forms(lines)
    rng = np.random.default_rng(8)
    n, slots, n_comp = 3000, 9, 400
    comp = rng.integers(1, n_comp + 1, n)
    reached = rng.random((n_comp + 1, slots)) < 0.35
    reached[np.arange(n_comp + 1), rng.integers(0, slots, n_comp + 1)] = True  # at least one a row
    cand = rng.integers(0, len(lines), (n_comp + 1, slots))
    tie = comp < 60
    cand[:60, 1] = cand[:60, 0]  # the same line in two slots: a tie, the first wins
    reached[:60, :2] = True
    assert tie.any()
    xy = rng.uniform(0, 3000, (n, 2))
    xy[5] = np.nan  # NumPy's argmin and argmax take the first NaN
    on = reached[comp]
    dense = np.full((n, slots), -np.inf if largest else np.inf)
    for k in range(slots):
        d = _distance(xy[on[:, k]], lines, cand[comp[on[:, k]], k], forms)
        dense[on[:, k], k] = -d if largest else d
    expected = np.argmax(dense, axis=1) if largest else np.argmin(dense, axis=1)

    def value(pt, slot, b):
        d = _distance(xy[b][pt], lines, cand[comp[b][pt], slot], forms)
        return -d if largest else d

    np.testing.assert_array_equal(best_reached(reached, comp, value, largest), expected)
