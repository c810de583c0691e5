"""Issue 26: the row pitch, and the mechanisms that read it, on the synthetic pages of its
failures (tests/synthetic.py ROW_KINDS): rows split into words (large cursive, word gaps of
4 H_cc, "wide_words") and dense rows mixed (15 rows of small writing at a pitch of 2 H_cc,
"dense_rows"). Each end-to-end test also runs the mechanism switched off and asserts the
failure it fixes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from synthetic import make_page

from engine import em as _em
from engine import pitch as _pitch
from engine.metric import contest_metric
from engine.params import Parameters
from engine.pipeline import finish, preparation_summary, prepare, run_em


def true_pitch(labels: np.ndarray) -> float:
    """Median distance (pixels) between the ink centres of consecutive ground-truth lines."""
    ys, _ = np.nonzero(labels)
    lab = labels[labels > 0]
    centre = np.bincount(lab, ys) / np.maximum(np.bincount(lab), 1)
    return float(np.median(np.diff(np.sort(centre[1:]))))


def segment_fm(page, params: Parameters):
    prep = prepare(page.image, params)
    *_, last = run_em(prep)
    seg = finish(prep, last)
    return prep, last, seg, contest_metric(page.labels, seg.labels, ink=page.labels > 0).fm


@pytest.fixture(scope="module")
def wide():
    return make_page("wide_words", seed=0)


@pytest.fixture(scope="module")
def dense():
    return make_page("dense_rows", seed=0)


# --------------------------------------------------------------------------- the pages


def test_row_pages_are_what_they_claim(wide, dense) -> None:
    """wide_words: word gaps of about 4 H_cc, rows far enough apart that no 2.5 H_cc triangle
    joins them; dense_rows: 15 rows at a pitch of about 2 H_cc."""
    h_cc = {}
    for page, low, high in ((wide, 4.0, 5.2), (dense, 1.8, 2.3)):
        h_cc[page.kind] = prepare(page.image).stats.h_cc
        assert low <= true_pitch(page.labels) / h_cc[page.kind] <= high, (page.kind, h_cc)
    assert dense.n_lines == 15
    # The blanks between consecutive words of each wide_words row, in H_cc.
    for k in range(1, wide.n_lines + 1):
        cols = np.flatnonzero((wide.labels == k).any(axis=0))
        steps = np.diff(cols)
        gaps = steps[steps > 0.5 * h_cc["wide_words"]] / h_cc["wide_words"]
        assert len(gaps) >= 2 and 3.5 <= np.median(gaps) <= 4.5, (k, gaps)


# --------------------------------------------------------------------------- the estimate


def test_pitch_is_measured_on_the_page(wide, dense) -> None:
    """The row pitch of each page, per region and in the JSON summary, within 5 % of the
    ground truth's; a region of one row takes the page's rows at its angle."""
    for page in (wide, dense):
        prep = prepare(page.image)
        truth = true_pitch(page.labels)
        assert len(prep.row_pitch) == len(prep.regions)
        for rp in prep.row_pitch:
            assert rp.pitch == pytest.approx(truth, rel=0.05), (page.kind, rp)
        summary = preparation_summary(prep)
        assert summary["row_pitch_px"] == pytest.approx(truth, rel=0.05)
        assert summary["row_pitch"][0]["pitch_hcc"] == pytest.approx(truth / prep.stats.h_cc, rel=0.06)
    wide_prep = prepare(wide.image)
    assert {rp.source for rp in wide_prep.row_pitch} == {"page"}  # one row per region
    assert {rp.source for rp in prepare(dense.image).row_pitch} == {"region"}


def test_across_pitch_phase_and_no_rows() -> None:
    """Rows every 30 px with centres at 7 (mod 30): pitch 30, phase 7; uniform noise: none."""
    rng = np.random.default_rng(0)
    v = 7.0 + 30.0 * rng.integers(0, 12, 3000) + rng.normal(0.0, 2.5, 3000)
    pitch, phase, corr = _pitch.across_pitch(v, 12.0)
    assert pitch == pytest.approx(30.0, abs=0.5)
    assert min(abs(phase - 7.0), 30.0 - abs(phase - 7.0)) < 1.0
    assert corr > 0.5
    assert math.isnan(_pitch.across_pitch(rng.uniform(0.0, 360.0, 3000), 12.0)[0])


def test_rows_in_pairs_give_the_row_pitch_not_its_double() -> None:
    """Rows every 30 px, every other one twice as heavy (clouds drawn round two rows, long and
    short rows alternating): the autocorrelation's highest peak is at 60 px, the pitch is 30
    (for the blob filters' scale, line_pitch, as for the row pitch, across_pitch)."""
    rng = np.random.default_rng(1)
    row = rng.integers(0, 16, 6000)
    row = np.concatenate([row, row[row % 2 == 0]])  # even rows hold twice the ink
    v = 5.0 + 30.0 * row + rng.normal(0.0, 2.5, len(row))
    from engine.initial_lines import line_pitch

    profile = np.bincount(((v - v.min()) / 3.0).astype(int)).astype(float)
    assert line_pitch(profile, 2, 80) * 3.0 == pytest.approx(30.0, abs=3.0)
    assert _pitch.across_pitch(v, 12.0)[0] == pytest.approx(30.0, abs=0.6)


# --------------------------------------------------------------------------- failure 1


def test_words_of_a_row_stay_one_line(wide) -> None:
    """Word gaps of 4 H_cc on rows 4.5 H_cc apart: with the row join every row is one region
    and one line (FM 1). Without it (the paper's cut), each word is a region with a line of
    its own and no line is found whole."""
    prep, _, seg, fm = segment_fm(wide, Parameters())
    assert len(prep.regions) == wide.n_lines
    assert len(seg.lines) == wide.n_lines
    assert fm >= 0.95
    prep_off, _, seg_off, fm_off = segment_fm(wide, Parameters(row_join=0.0))
    # (The block merge of multi-oriented pages joins some of the word regions again, but
    # not into rows.)
    assert len(prep_off.regions) > wide.n_lines
    assert fm_off < 0.3


def test_row_join_keeps_rows_and_columns_apart() -> None:
    """The join never bridges two rows (the edges it keeps run along the text, within a
    quarter pitch across) and leaves the two columns of the two_columns page apart."""
    page = make_page("two_columns", seed=0)
    prep = prepare(page.image)
    assert len(prep.regions) == 2
    wide = make_page("wide_words", seed=1)
    from engine.graph import delaunay_edges, triangle_edges
    from engine.regions import edge_components

    prep = prepare(wide.image, Parameters(row_join=0.0))
    tri, delaunay = delaunay_edges(prep.samples)
    p = prep.samples[tri]
    sides = np.linalg.norm(p - np.roll(p, -1, axis=1), axis=2)
    kept = triangle_edges(tri[sides.max(axis=1) <= 2.5 * prep.stats.h_cc])
    label = edge_components(kept, len(prep.samples))
    joins = _pitch.row_join_edges(prep.samples, delaunay, kept, label, prep.stats.h_cc, 1.0)
    assert len(joins.edges) > 0
    xy = np.rint(prep.samples).astype(int)
    truth = wide.labels[xy[:, 1], xy[:, 0]]
    a, b = truth[joins.edges[:, 0]], truth[joins.edges[:, 1]]
    assert np.all((a == b) | (a == 0) | (b == 0))


# --------------------------------------------------------------------------- failure 2


@pytest.mark.parametrize("seed", [0, 1])
def test_dense_rows_stay_apart(seed: int) -> None:
    """15 rows of small writing at a pitch of 2 H_cc: every row found whole (the page's own
    moments). With the learnt moments of the development pages (0.94 / 0.05 / 0.01, where a
    third of this page's edges join neighbouring rows) theta_0 runs to its bound, the lines
    widen past half the pitch and share each row's words: FM 0."""
    dense = make_page("dense_rows", seed=seed)
    prep, last, seg, fm = segment_fm(dense, Parameters())
    assert len(seg.lines) == 15 and fm >= 0.95
    pitch = prep.row_pitch[0].pitch
    assert last.lines.sigma_t.max() < 0.3 * pitch
    _, last_off, _, fm_off = segment_fm(dense, Parameters(page_moments=False))
    assert fm_off < 0.3
    assert last_off.lines.sigma_t.max() > 0.5 * pitch


def test_page_moments_follow_the_page(dense) -> None:
    """The moments EM matches are the page's own under its starting lines: on dense_rows about
    a third of the edges join neighbouring rows (the ground truth's 0.33), not the 5 % of the
    development pages; on a page of ordinary spacing, near the development pages' mean, and
    there the learnt moments are kept."""
    from engine.moments import edge_moments

    counts, total = edge_moments(dense.labels)
    truth = counts / total
    prep = prepare(dense.image)
    snap = next(run_em(prep))
    states = _em._region_states(prep, snap.lines, prep.params)
    unaries = _em._windowed(states, _em._unaries(states, snap.lines, prep.params, prep.stats.h_cc))
    for st, u in zip(states, unaries, strict=True):
        p = np.exp(u - u.max(axis=0))
        st.posterior[:] = p / p.sum(axis=0)
    mu = _em.page_moments(states, np.full(3, np.nan))
    assert mu[1] == pytest.approx(truth[1], abs=0.05) and mu[1] > 0.2
    np.testing.assert_array_equal(_em.moments_for_page(mu, np.asarray(prep.params.moments)), mu)
    straight = prepare(make_page("straight", seed=0).image)
    states = _em._region_states(straight, straight.initial_lines, straight.params)
    unaries = _em._windowed(states, _em._unaries(states, straight.initial_lines, straight.params,
                                                  straight.stats.h_cc))
    for st, u in zip(states, unaries, strict=True):
        p = np.exp(u - u.max(axis=0))
        st.posterior[:] = p / p.sum(axis=0)
    learnt = np.asarray(straight.params.moments)
    measured = _em.page_moments(states, np.full(3, np.nan))
    assert measured[1] < 0.15
    np.testing.assert_array_equal(_em.moments_for_page(measured, learnt), learnt)


def test_sigma_t_cap_holds_in_every_m_step(dense) -> None:
    """With the fixed moments (the pull the cap resists), every line's sigma_t after every
    M-step is at most sigma_t_pitch x the region's pitch; without the cap it exceeds half the
    pitch (the issue's 5 -> 15-21 px on a 33 px pitch)."""
    params = Parameters(page_moments=False, sigma_t_pitch=0.25)
    prep = prepare(dense.image, params)
    pitch = prep.row_pitch[0].pitch
    widest = max(s.lines.sigma_t.max() for s in run_em(prep) if s.iteration > 0)
    assert widest <= 0.25 * pitch + 1e-6
    free = max(s.lines.sigma_t.max() for s in run_em(prep, params=params.replace(sigma_t_pitch=0.0))
               if s.iteration > 0)
    assert free > 0.5 * pitch


def test_paper_preset_switches_the_mechanisms_off() -> None:
    p = Parameters.preset("paper")
    assert (p.row_join, p.row_merge, p.sigma_t_pitch, p.page_moments) == (0.0, 0.0, 0.0, False)
    d = Parameters()
    assert d.row_join > 0 and d.row_merge > 0 and d.page_moments


def test_fragments_across_regions_merge_and_are_recorded(tmp_path) -> None:
    """With the region cut as printed (each word a region), stage 8 still merges the lines of
    one row's words that run in the same direction, across their regions, and records each
    merge (the two regions, the fragments' extents, gap and offset within their limits), also
    in the JSON output. Without the merge across regions, every word keeps its line. (Seed 1:
    on seed 0 the one-word regions' frames turn steep and no two lines agree in direction.)"""
    import json

    wide = make_page("wide_words", seed=1)
    from engine.export import write_outputs

    prep, _, seg, _ = segment_fm(wide, Parameters(row_join=0.0))
    _, _, seg_off, _ = segment_fm(wide, Parameters(row_join=0.0, row_merge=0.0))
    across = [m for m in seg.merges if m.regions[0] != m.regions[1]]
    assert len(across) >= 1 and not [m for m in seg_off.merges if m.regions[0] != m.regions[1]]
    assert len(seg.lines) <= len(seg_off.lines) - len(across)
    for m in across:
        assert 0 <= m.line < len(seg.lines)
        assert m.gap <= m.gap_limit and m.offset <= m.offset_limit
        assert len(m.fragments) == 2 and "different regions" in m.why
        # Both fragments lie on the merged line's row: within a text height of it across.
        line = seg.lines.take([m.line])
        from engine.postprocess import _signed_distance
        ends = np.array(m.fragments, float).reshape(-1, 2)
        d_t, _ = _signed_distance(ends, line, np.zeros(len(ends), int))
        assert np.abs(d_t).max() <= prep.stats.h_cc
    write_outputs(tmp_path, "wide", prep.gray, seg, "wide.png", {})
    saved = json.loads((tmp_path / "wide.json").read_text())
    assert len(saved["merges"]) == len(seg.merges)
    assert saved["merges"][0]["why"] == seg.merges[0].why


def _first_row(seed: int):
    """wide_words' first row cut out with a margin: a page of one row of words 4 H_cc apart,
    which shows no row period. Returns the image and its one-line ground truth."""
    wide = make_page("wide_words", seed=seed)
    ys, _ = np.nonzero(wide.labels == 1)
    y0, y1 = max(0, int(ys.min()) - 60), int(ys.max()) + 60
    return wide.image[y0:y1], (wide.labels[y0:y1] == 1).astype(np.int32)


def test_a_page_without_row_period_merges_a_rows_words_by_the_within_region_test() -> None:
    """On a page where no region has a row pitch (one row of words in two regions), row_merge
    has no pitch to judge by; with row_merge_pitchless the two words' lines merge by the
    within-region test (merge_gap x W_cc along, merge_offset x H_cc across), and the merge is
    recorded with that reason. Without it each region keeps its line and the row scores 0."""
    image, truth = _first_row(seed=0)
    results = {}
    for on in (True, False):
        prep = prepare(image, Parameters(row_merge_pitchless=on))
        *_, last = run_em(prep)
        seg = finish(prep, last)
        results[on] = (prep, seg, contest_metric(truth, seg.labels, ink=truth > 0).fm)
    prep, seg, fm = results[True]
    assert len(prep.regions) >= 2 and not any(math.isfinite(rp.pitch) for rp in prep.row_pitch)
    assert len(seg.lines) == 1 and fm == 1.0
    across = [m for m in seg.merges if m.regions[0] != m.regions[1]]
    assert across and all("no row period" in m.why for m in across)
    for m in across:
        assert m.gap_limit == pytest.approx(Parameters().merge_gap * prep.stats.w_cc)
        assert m.offset_limit == pytest.approx(Parameters().merge_offset * prep.stats.h_cc)
        assert m.gap <= m.gap_limit and m.offset <= m.offset_limit
    _, seg_off, fm_off = results[False]
    assert len(seg_off.lines) >= 2 and fm_off == 0.0
    assert not [m for m in seg_off.merges if m.regions[0] != m.regions[1]]


def test_a_page_with_row_period_is_merged_by_its_pitch_alone(wide) -> None:
    """row_merge_pitchless changes nothing where a region has a pitch: wide_words (seed 0, its
    rows' pitch measured) gives the same labels with it on and off."""
    labels = []
    for on in (True, False):
        prep = prepare(wide.image, Parameters(row_merge_pitchless=on, row_join=0.0))
        assert any(math.isfinite(rp.pitch) for rp in prep.row_pitch)
        *_, last = run_em(prep)
        labels.append(finish(prep, last).labels)
    np.testing.assert_array_equal(labels[0], labels[1])


def test_a_region_without_a_period_takes_its_neighbours_pitch() -> None:
    """A block of rows every 30 px across a wide page (region 0, at 0 deg), a word at the
    end of a row whose own fit leans 4 deg (region 1: one row, no period of its own, and the
    page's rows at 4 deg blur over the page's width) and a note at 45 deg (region 2): the
    word takes the block's pitch, with its own centre as the phase; the note keeps none."""
    rng = np.random.default_rng(2)
    rows = rng.integers(0, 12, 6000)
    block = np.stack([rng.uniform(0.0, 2400.0, 6000), 40.0 + 30.0 * rows + rng.normal(0.0, 2.5, 6000)], axis=1)
    word = np.stack([rng.uniform(2500.0, 2620.0, 80), 100.0 + rng.normal(0.0, 2.5, 80)], axis=1)
    t = rng.uniform(0.0, 200.0, 80)
    note = np.stack([2700.0 + t * np.cos(np.pi / 4), 300.0 + t * np.sin(np.pi / 4) + rng.normal(0.0, 2.5, 80)], axis=1)
    samples = np.concatenate([block, word, note])
    region = np.repeat([0, 1, 2], [len(block), len(word), len(note)])
    phis = np.radians([0.0, 4.0, 45.0])
    out = _pitch.region_pitches(samples, region, phis, 12.0)
    assert out[0].source == "region" and out[0].pitch == pytest.approx(30.0, abs=0.6)
    assert out[1].source == "neighbour" and out[1].pitch == out[0].pitch
    v = _pitch.to_region_frame(word, phis[1])[:, 1]
    assert out[1].phase == pytest.approx(float(np.median(v)) % out[0].pitch)
    assert out[2].source == "none" and math.isnan(out[2].pitch)
