"""Stage 8's pixel attribution (engine.postprocess.final_labels) on a small drawn page.

Two text lines written like the AHTE Arabic hands: words whose ink sits on and just below
the line with ascenders rising far above it and almost nothing below, so a line's ink
extends much further above its fitted centre than below. Around them, the cases that cost
AHTE its contest FM: a tall stroke of the lower line whose top crosses the midpoint between
the lines, a mark in the gap just above the lower line's ascenders (nearer the upper line's
centre), and a descender of the upper line touching the lower line. Sample labels come from
the symmetric nearest-line rule (what a symmetric unary gives at the line boundary); the
components, samples and profile are the engine's own computations.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from engine.model import ComponentStats, LineSet, Preparation, to_region_frame
from engine.params import Parameters
from engine.postprocess import (
    _PROFILE_EDGES,
    _distance,
    _profile_bin,
    _signed_distance,
    final_labels,
    line_profile,
    nearest_line,
)
from engine.sampling import sample_ink_pixels

UPPER, LOWER = 150, 250  # line centres (rows); the midpoint is row 200
SIGMA_T = 20.0


def _word(ink: np.ndarray, truth: np.ndarray, line: int, centre: int, x0: int, width: int = 60) -> None:
    """A word of line ``line``: a bar on and below the centre, two ascenders rising 45 px and
    an alif rising 75 px."""
    ink[centre:centre + 10, x0:x0 + width] = True
    truth[centre:centre + 10, x0:x0 + width] = line
    for ax, rise in ((x0 + 12, 45), (x0 + 40, 45), (x0 + 52, 75)):
        ink[centre - rise:centre, ax:ax + 4] = True
        truth[centre - rise:centre, ax:ax + 4] = line


def _prep(ink: np.ndarray) -> Preparation:
    """Components and samples of ``ink`` by the engine's own stages 1 and 3."""
    components, n = ndimage.label(ink)
    samples, sample_component = sample_ink_pixels(components, 0.05, seed=3)
    return Preparation(params=Parameters(), gray=np.where(ink, 0, 255).astype(np.uint8), ink=ink,
                       components=components.astype(np.int32),
                       stats=ComponentStats(h_cc=20.0, w_cc=60.0, n_components=n),
                       samples=samples, sample_component=sample_component,
                       delaunay_edges=np.zeros((0, 2), np.int64), edges=np.zeros((0, 2), np.int64),
                       sample_region=np.zeros(len(samples), np.int32), regions=(),
                       initial_lines=LineSet.empty())


@pytest.fixture(scope="module")
def page() -> dict:
    ink = np.zeros((400, 900), bool)
    truth = np.zeros(ink.shape, np.int32)  # 1 = upper line, 2 = lower line
    for x0 in range(20, 820, 80):
        _word(ink, truth, 1, UPPER, x0)
        _word(ink, truth, 2, LOWER, x0)
    # A lower-line alif on its own, rising 75 px: its top 25 px are above the midpoint.
    ink[LOWER - 75:LOWER + 8, 846:852] = True
    truth[LOWER - 75:LOWER + 8, 846:852] = 2
    # A mark (fatha) over the lower line's second word, above its ascender's top, its centre
    # 46 px below the upper line's centre and 54 px above the lower line's.
    ink[LOWER - 58:LOWER - 50, 108:124] = True
    truth[LOWER - 58:LOWER - 50, 108:124] = 2
    # An upper-line descender running down into a lower-line word (word at x 660..720):
    # ground truth splits this component where the lines meet.
    ink[UPPER + 10:LOWER, 700:704] = True
    truth[UPPER + 10:200, 700:704] = 1
    truth[200:LOWER, 700:704] = 2
    lines = LineSet(a=np.zeros(2), b=np.array([UPPER, LOWER], float), c=np.full(2, 450.0),
                    sigma_t=np.full(2, SIGMA_T), sigma_s=np.full(2, 250.0), prior=np.full(2, 0.5),
                    region=np.zeros(2, np.int32), phi=np.zeros(2))
    prep = _prep(ink)
    sample_labels = nearest_line(prep.samples, lines)
    return {"prep": prep, "lines": lines, "labels": sample_labels, "truth": truth,
            "out": final_labels(prep, lines, sample_labels)}


def _nearest_rule(prep: Preparation, lines: LineSet, mask: np.ndarray) -> np.ndarray:
    """Line (1-based) the paper's rule gives each pixel of ``mask``: the nearest line."""
    ys, xs = np.nonzero(mask)
    xy = np.stack([xs, ys], axis=1).astype(float)
    d = np.stack([_distance(xy, lines, np.full(len(xs), k)) for k in range(len(lines))], axis=1)
    return np.argmin(d, axis=1) + 1


def test_profile_is_asymmetric(page: dict) -> None:
    """The page's profile puts its core band further above the line than below it."""
    prep, lab = page["prep"], page["labels"]
    _, (z_lo, z_hi), (out_lo, out_hi) = line_profile(prep.samples, lab, page["lines"])
    assert z_lo < -1.0 and 0.0 < z_hi < 1.0
    assert -z_lo > 2 * z_hi
    assert out_lo < z_lo and out_hi > z_hi


def test_tall_stroke_stays_whole_on_its_line(page: dict) -> None:
    prep, out, truth = page["prep"], page["out"], page["truth"]
    alif = prep.components == prep.components[LOWER - 70, 848]
    # Its samples disagree and the nearest line takes its top: the old rule split it.
    assert len(np.unique(page["labels"][prep.sample_component == prep.components[LOWER - 70, 848]])) == 2
    assert (_nearest_rule(prep, page["lines"], alif) == 1).sum() > 100
    assert np.all(out[alif] == truth[alif])


def test_mark_in_the_gap_follows_the_ink_below_it(page: dict) -> None:
    prep, out = page["prep"], page["out"]
    mark = prep.components == prep.components[LOWER - 54, 115]
    k = prep.components[LOWER - 54, 115]
    # Every sample of the mark chose the upper line, which is also the nearest line.
    assert np.all(page["labels"][prep.sample_component == k] == 0)
    assert np.all(_nearest_rule(prep, page["lines"], mark) == 1)
    assert np.all(out[mark] == 2)


def test_touching_strokes_are_split_between_the_lines(page: dict) -> None:
    prep, out, truth = page["prep"], page["out"], page["truth"]
    joined = prep.components == prep.components[UPPER + 30, 701]
    # The component reaches both lines' cores: each line keeps its own word.
    assert np.all(out[joined & (truth == 1) & (np.arange(400)[:, None] < UPPER + 10)] == 1)
    assert np.all(out[joined & (np.arange(400)[:, None] >= LOWER - 10)] == 2)
    assert (out[joined] == truth[joined]).mean() > 0.95


def test_every_ink_pixel_is_labelled_and_words_are_right(page: dict) -> None:
    prep, out, truth = page["prep"], page["out"], page["truth"]
    ink = prep.components > 0
    assert np.all(out[ink] > 0) and np.all(out[~ink] == 0)
    assert (out[ink] == truth[ink]).mean() > 0.99


def test_no_lines_gives_background(page: dict) -> None:
    prep = page["prep"]
    out = final_labels(prep, LineSet.empty(), np.full(len(prep.samples), -1))
    assert out.shape == prep.components.shape and not out.any()


def test_unlabelled_component_goes_to_the_nearest_line(page: dict) -> None:
    """A component none of whose samples has a line (an orphan) takes the nearest line."""
    prep, lines = page["prep"], page["lines"]
    labels = page["labels"].copy()
    k = prep.components[UPPER + 5, 30]  # the first upper-line word
    labels[prep.sample_component == k] = -1
    out = final_labels(prep, lines, labels)
    assert np.all(out[prep.components == k] == 1)


def test_components_that_all_reach_their_line_need_no_pixel_pass() -> None:
    """One word on one line: every sample is in the line's core, nothing else to decide."""
    ink = np.zeros((60, 120), bool)
    ink[25:35, 10:110] = True
    line = LineSet(a=np.zeros(1), b=np.array([30.0]), c=np.array([60.0]), sigma_t=np.array([5.0]),
                   sigma_s=np.array([30.0]), prior=np.ones(1), region=np.zeros(1, np.int32),
                   phi=np.zeros(1))
    prep = _prep(ink)
    out = final_labels(prep, line, np.zeros(len(prep.samples), np.int64))
    assert np.array_equal(out, ink.astype(np.int32))


def test_profile_bin_equals_binary_search() -> None:
    """The computed profile bin equals the binary search's, on the bin edges themselves, their
    floating-point neighbours, far outside the profile and at random."""
    edges = _PROFILE_EDGES
    rng = np.random.default_rng(0)
    z = np.concatenate([rng.normal(0.0, 5.0, 20_000), edges, np.nextafter(edges, np.inf),
                        np.nextafter(edges, -np.inf), [-1e300, 1e300, -np.inf, np.inf, 0.0]])
    expected = np.clip(np.searchsorted(edges, z) - 1, 0, len(edges) - 2)
    np.testing.assert_array_equal(_profile_bin(z), expected)


@pytest.mark.parametrize("rotation_invariant", [False, True])
def test_line_forms_give_the_region_frame_distances(rotation_invariant: bool) -> None:
    """The page-frame forms give the distances computed in each line's tilted region frame."""
    rng = np.random.default_rng(1)
    n_lines = 5
    lines = LineSet(a=rng.normal(0, 0.1, n_lines), b=rng.uniform(0, 300, n_lines), c=rng.uniform(100, 300, n_lines),
                    sigma_t=rng.uniform(5, 20, n_lines), sigma_s=rng.uniform(30, 90, n_lines),
                    prior=np.full(n_lines, 0.2), region=np.arange(n_lines), phi=rng.uniform(-1.5, 1.5, n_lines),
                    rotation_invariant=rotation_invariant)
    xy = rng.uniform(0, 400, (500, 2))
    idx = rng.integers(0, n_lines, len(xy))
    d_t, beyond = _signed_distance(xy, lines, idx)
    uv = to_region_frame(xy, lines.phi[idx])
    a, b = lines.a[idx], lines.b[idx]
    norm = np.sqrt(1.0 + a * a)
    np.testing.assert_allclose(d_t, (uv[:, 1] - a * uv[:, 0] - b) / norm, atol=1e-9)
    along = (uv[:, 0] + a * uv[:, 1]) / norm if rotation_invariant else uv[:, 0]
    np.testing.assert_allclose(beyond, np.maximum(np.abs(along - lines.c[idx]) - 2.0 * lines.sigma_s[idx], 0.0),
                               atol=1e-9)
    assert (beyond > 0).any() and (beyond == 0).any()


def test_ink_placed_whole_yields_what_reaches_into_another_lines_core(monkeypatch) -> None:
    """A stroke whose samples all chose the upper line (placed whole) but which hangs down
    into the lower line's core: its end there, past the upper line's outer band, goes to the
    lower line (a polygon there counts those pixels to it); the rest stays on the upper line.
    The stroke is on the profile too, so the outer band reaches far down: only its end moves."""
    ink = np.zeros((400, 900), bool)
    truth = np.zeros(ink.shape, np.int32)
    for x0 in range(20, 820, 80):
        _word(ink, truth, 1, UPPER, x0)
        _word(ink, truth, 2, LOWER, x0)
    ink[UPPER:LOWER + 5, 870:874] = True  # its own component, right of every word
    lines = LineSet(a=np.zeros(2), b=np.array([UPPER, LOWER], float), c=np.full(2, 450.0),
                    sigma_t=np.full(2, SIGMA_T), sigma_s=np.full(2, 250.0), prior=np.full(2, 0.5),
                    region=np.zeros(2, np.int32), phi=np.zeros(2))
    prep = _prep(ink)
    labels = nearest_line(prep.samples, lines)
    stroke_id = prep.components[UPPER + 20, 871]
    labels[prep.sample_component == stroke_id] = 0
    out = final_labels(prep, lines, labels)
    stroke = prep.components == stroke_id
    rows = np.nonzero(stroke)[0]
    moved = rows[out[stroke] == 2]
    assert len(moved) >= 8
    assert moved.min() > rows[out[stroke] == 1].max()  # the stroke's end, nothing above it
    assert moved.min() > (UPPER + LOWER) / 2 and moved.max() <= LOWER + 0.5 * SIGMA_T
    words = ink & ~stroke
    assert np.all(out[words] == truth[words])
    # Without the rule the stroke stays whole on the upper line.
    monkeypatch.setattr("engine.postprocess._yield_to_cores", lambda *args: None)
    assert np.all(final_labels(prep, lines, labels)[stroke] == 1)


def test_touching_strokes_between_locked_lines_are_cut_midway(page: dict) -> None:
    """Parameters.split_nearest: the upper line's sigma_t is twice the lower's (a locked line
    whose spread was measured over ink it took). The profile rule scales each line's
    distances by its own sigma_t, so the wider upper line takes the descender far past the
    midpoint, into the lower line's word; the nearest of the two lines cuts it midway, where
    the ground truth does: always ("always"), between locked lines ("locked"), or between
    given lines, locked or anchored (a file's lines left free: "given")."""
    import dataclasses

    prep, truth = page["prep"], page["truth"]
    free = LineSet(a=np.zeros(2), b=np.array([UPPER, LOWER], float), c=np.full(2, 450.0),
                   sigma_t=np.array([2.0 * SIGMA_T, SIGMA_T]), sigma_s=np.full(2, 250.0),
                   prior=np.full(2, 0.5), region=np.zeros(2, np.int32), phi=np.zeros(2))
    locked = dataclasses.replace(free, locked=np.ones(2, bool))
    anchored = dataclasses.replace(free, anchored=np.ones(2, bool))
    one_anchored = dataclasses.replace(free, anchored=np.array([True, False]))
    joined = prep.components == prep.components[UPPER + 30, 701]
    descender = np.zeros(joined.shape, bool)
    descender[UPPER + 10:LOWER, 700:704] = True
    rows = np.nonzero(descender)[0]
    cut = {}
    runs = {("free", "never"): free, ("free", "locked"): free, ("locked", "never"): locked,
            ("locked", "locked"): locked, ("free", "always"): free, ("locked", "given"): locked,
            ("anchored", "given"): anchored, ("anchored", "locked"): anchored,
            ("one anchored", "given"): one_anchored, ("free", "given"): free}
    for (kind, rule), lines in runs.items():
        out = final_labels(prep, lines, page["labels"], split_nearest=rule)
        # Each line keeps its own word.
        assert np.all(out[joined & (truth == 1) & (np.arange(400)[:, None] < UPPER + 10)] == 1)
        assert np.all(out[joined & (np.arange(400)[:, None] >= LOWER - 10)] == 2)
        cut[kind, rule] = (rows[out[descender] == 1].max(), (out[joined] == truth[joined]).mean())
    midway = (("locked", "locked"), ("free", "always"), ("locked", "given"), ("anchored", "given"))
    for key in midway:
        assert abs(cut[key][0] - 200) <= 1 and cut[key][1] > 0.95, (key, cut[key])
    # The profile's cut lies well below the midpoint (what split_nearest corrects); lines
    # that are not all of the kind the rule names keep it (a free line among the reached).
    for key in set(runs) - set(midway):
        assert cut[key][0] >= 205 and cut[key][1] < cut["locked", "locked"][1] - 0.02, (key, cut[key])


def test_ink_reaching_one_core_gives_its_end_beyond_the_outer_band_to_its_likelier_line() -> None:
    """A lower-line word with a stroke rising to just under the upper line's core: its
    samples are split between the two lines (the nearest line takes the stroke's top), but
    only the lower line's core is reached. The component stays on the lower line but for its
    pixels beyond that line's outer band that the upper line's profile makes likelier: the
    stroke's top, which goes to the upper line (not by the nearest line's core rule, which
    needs a pixel in that core). Checks that each pixel's own-line score is read from its own
    line's slot (the second of the component's two candidates)."""
    ink = np.zeros((400, 900), bool)
    truth = np.zeros(ink.shape, np.int32)
    for x0 in range(20, 820, 80):
        _word(ink, truth, 1, UPPER, x0)
        _word(ink, truth, 2, LOWER, x0)
    lines = LineSet(a=np.zeros(2), b=np.array([UPPER, LOWER], float), c=np.full(2, 450.0),
                    sigma_t=np.full(2, SIGMA_T), sigma_s=np.full(2, 250.0), prior=np.full(2, 0.5),
                    region=np.zeros(2, np.int32), phi=np.zeros(2))
    ink[LOWER:LOWER + 8, 830:870] = True  # the word
    base = _prep(ink)
    _, (_, core_hi), (out_lo, _) = line_profile(base.samples, nearest_line(base.samples, lines), lines)
    top = int(np.ceil(UPPER + core_hi * SIGMA_T)) + 1  # just under the upper line's core
    ink[top:LOWER, 846:850] = True  # the stroke
    prep = _prep(ink)
    labels = nearest_line(prep.samples, lines)
    k = prep.components[LOWER + 4, 848]
    assert set(np.unique(labels[prep.sample_component == k])) == {0, 1}
    out = final_labels(prep, lines, labels)
    stroke = prep.components == k
    rows = np.nonzero(stroke)[0]
    beyond = rows < LOWER + out_lo * SIGMA_T  # past the lower line's outer band, upwards
    moved = rows[out[stroke] == 1]
    assert len(moved) >= 8 and moved.min() == top  # the stroke's top went up
    assert np.all(beyond[out[stroke] == 1])  # and nothing inside the outer band
    assert np.all(out[stroke & (np.arange(400)[:, None] >= LOWER + out_lo * SIGMA_T)] == 2)
    words = ink & ~stroke
    assert np.all(out[words] == truth[words])
