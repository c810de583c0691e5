"""Stage 7 (EM as a generator of snapshots) and stage 8 (post-processing) through the steppable
API of engine.pipeline, and end-to-end accuracy on the synthetic pages."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from synthetic import KINDS, make_page

from engine.metric import contest_metric
from engine.params import Parameters
from engine.pipeline import finish, lines_from_segments, prepare, run_em

#: Small EM budget for the mechanical tests (accuracy is tested end to end below).
FAST = {"max_em_iterations": 6}


@pytest.fixture(scope="module")
def page():
    return make_page("skewed", seed=1, scale=0.6)


@pytest.fixture(scope="module")
def prep(page):
    return prepare(page.image, Parameters(**FAST))


@pytest.fixture(scope="module")
def snapshots(prep):
    return list(run_em(prep))


def assert_every_ink_pixel_labelled(seg, prep) -> None:
    """Every ink pixel has a line; a labelled pixel off the ink is one of the page's faint,
    non-text or speck pixels (engine.postprocess.label_non_text, label_specks), never paper."""
    labelled = seg.labels > 0
    assert np.all(labelled[prep.ink])
    extra = labelled & ~prep.ink
    allowed = np.zeros_like(extra)
    for mask in (prep.faint, prep.non_text, prep.specks):
        if mask is not None:
            allowed |= mask
    assert not np.any(extra & ~allowed)


def _valid_segmentation(prep, seg) -> None:
    assert seg.labels.shape == prep.shape and seg.labels.dtype == np.int32
    assert_every_ink_pixel_labelled(seg, prep)
    assert seg.labels.max() == len(seg.lines) >= 1
    assert set(np.unique(seg.labels[seg.labels > 0])) == set(range(1, len(seg.lines) + 1))


def test_run_em_iterations_in_order(prep, snapshots):
    """run_em yields iteration 0 (unary-only posteriors, sweep None), then 1, 2, ... in order."""
    assert len(prep.initial_lines) >= 2
    its = [s.iteration for s in snapshots]
    assert its == list(range(len(its))) and len(its) >= 2
    assert all(s.sweep is None for s in snapshots)
    assert all(len(s.lines) == len(prep.initial_lines) for s in snapshots)


def test_snapshots_immutable_and_normalised(prep, snapshots):
    """Each snapshot owns its arrays (mutating a later one leaves earlier ones unchanged; the lines
    are read-only); posteriors are top-k sorted, each row sums to <= 1 (+1e-3)."""
    k = prep.params.snapshot_top_k
    first = snapshots[0]
    saved = (first.posterior_lines.copy(), first.posterior_probs.copy(), first.entropy.copy())
    for s in snapshots:
        n = len(prep.samples)
        assert s.posterior_lines.shape == (n, k) and s.posterior_probs.shape == (n, k)
        sums = s.posterior_probs.astype(np.float64).sum(axis=1)
        assert np.all(sums <= 1 + 1e-3) and np.all(sums > 0.5)
        assert np.all(np.diff(s.posterior_probs.astype(np.float32), axis=1) <= 1e-3)
        assert np.all((s.posterior_lines >= -1) & (s.posterior_lines < len(s.lines)))
        for name in ("a", "b", "c", "sigma_t", "sigma_s", "prior"):
            with pytest.raises(ValueError):
                getattr(s.lines, name)[0] = 0.0
    last = snapshots[-1]
    for arr in (last.posterior_lines, last.posterior_probs, last.entropy):
        for other in (first.posterior_lines, first.posterior_probs, first.entropy):
            assert not np.shares_memory(arr, other)
        if arr.flags.writeable:
            arr[...] = 0
    assert np.array_equal(first.posterior_lines, saved[0])
    assert np.array_equal(first.posterior_probs, saved[1])
    assert np.array_equal(first.entropy, saved[2])


def test_per_sweep_snapshots(prep):
    """per_sweep=True adds snapshots with ``sweep`` set (1, 2, ...) before each iteration's final one."""
    snaps = list(run_em(prep, params=prep.params.replace(max_em_iterations=2), per_sweep=True))
    sweeps = [s for s in snaps if s.sweep is not None]
    assert sweeps and all(s.iteration >= 1 for s in sweeps)
    for it in {s.iteration for s in sweeps}:
        own = [s.sweep for s in sweeps if s.iteration == it]
        assert own == list(range(1, len(own) + 1))
    finals = [s.iteration for s in snaps if s.sweep is None]
    assert finals == list(range(len(finals)))


def test_stops_at_max_em_iterations(prep):
    """EM stops after max_em_iterations (unless converged before)."""
    snaps = list(run_em(prep, params=prep.params.replace(max_em_iterations=3, kl_tolerance=1e-12)))
    assert snaps[-1].iteration <= 3
    assert snaps[-1].iteration == 3 or snaps[-1].converged


def test_label_tolerance_stops_em(prep):
    """EM stops once fewer than label_tolerance of the samples change their best line: with
    a tolerance of 1 the first iteration converges; with 0 (and a KL tolerance it cannot reach)
    it runs to max_em_iterations."""
    stop_now = list(run_em(prep, params=prep.params.replace(label_tolerance=1.0, max_em_iterations=5)))
    assert stop_now[-1].iteration == 1 and stop_now[-1].converged
    run_on = list(run_em(prep, params=prep.params.replace(label_tolerance=0.0, kl_tolerance=1e-12,
                                                          max_em_iterations=4)))
    assert run_on[-1].iteration == 4 and not run_on[-1].converged


def test_same_seed_same_result(page):
    """Two runs with the same seed and parameters give identical labels."""
    results = []
    for _ in range(2):
        p = prepare(page.image, Parameters(**FAST))
        *_, last = run_em(p)
        results.append(finish(p, last).labels)
    assert np.array_equal(results[0], results[1])


def test_run_em_from_edited_lines(prep, snapshots):
    """Lines rebuilt from the initial lines' own segments give a valid EM run and segmentation;
    starting from fewer lines changes the result."""
    segs = prep.initial_lines.segments(2.0)
    edited = lines_from_segments(prep, segs)
    assert len(edited) == len(prep.initial_lines)
    *_, last = run_em(prep, edited)
    _valid_segmentation(prep, finish(prep, last))
    fewer = prep.initial_lines.take(np.arange(0, len(prep.initial_lines), 2))
    *_, last_fewer = run_em(prep, fewer)
    assert len(last_fewer.lines) == len(fewer) < len(prep.initial_lines)
    reference = finish(prep, snapshots[-1])
    seg_fewer = finish(prep, last_fewer)
    _valid_segmentation(prep, seg_fewer)
    assert not np.array_equal(seg_fewer.labels, reference.labels)


@pytest.fixture(scope="module")
def skewed_full():
    """The skewed synthetic page at full size (6 lines), prepared with the defaults."""
    page = make_page("skewed", seed=0)
    return page, prepare(page.image, Parameters())


@pytest.mark.parametrize("rule", ["bethe", "convex"])
@pytest.mark.parametrize("regression", ["rotation_invariant", "paper"])
def test_update_rules_and_regression_forms(skewed_full, rule, regression):
    """Both E-step rules and both M-step forms run end to end to a valid result, and with the
    paper's M-step (every sample, m_step_trim 0) the rule decides it: with the Bethe rule every
    line is found (FM 1.0 measured, both forms, on lines at a slant); with the printed convex
    rule the lines collapse (measured: 3 lines left of 6, FM 0.0; see tests/test_paper.py).
    With the M-step trimmed (the default) a line no longer follows the samples it takes from
    its neighbours' rows, and the convex rule finds every line too."""
    page, prep = skewed_full
    assert len(prep.initial_lines) == page.n_lines == 6
    for trim in (0.0, prep.params.m_step_trim):
        params = prep.params.replace(update_rule=rule, regression=regression, m_step_trim=trim)
        snaps = list(run_em(prep, params=params))
        assert snaps[-1].lines.rotation_invariant == (regression == "rotation_invariant")
        assert all(np.isfinite(s.log_likelihood) for s in snaps)
        seg = finish(prep, snaps[-1], params)
        _valid_segmentation(prep, seg)
        fm = contest_metric(page.labels, seg.labels, ink=page.labels > 0).fm
        if rule == "bethe" or trim > 0:
            assert fm >= 0.95 and len(seg.lines) == page.n_lines, (rule, trim, fm)
        else:
            assert fm <= 0.5 and len(seg.lines) < page.n_lines, (rule, trim, fm)


def test_snapshot_memory(prep, snapshots):
    """A snapshot costs < 100 bytes per sample (about 26 with top-4), so 50 snapshots of a
    100 000-sample page (a large page at 5 %) stay under 500 MB."""
    per_sample = snapshots[-1].nbytes / len(prep.samples)
    assert per_sample < 100, per_sample
    assert 50 * per_sample * 100_000 < 500e6


# --------------------------------------------------------------------------- post-processing


def test_blank_page_has_no_lines():
    """A blank page: no sample, one snapshot, zero lines and an all-zero label map."""
    blank = np.full((120, 160), 255, np.uint8)
    p = prepare(blank, Parameters())
    assert len(p.samples) == 0 and len(p.initial_lines) == 0
    snaps = list(run_em(p))
    seg = finish(p, snaps[-1])
    assert len(seg.lines) == 0
    assert seg.labels.shape == (120, 160) and not seg.labels.any()


def test_every_ink_pixel_labelled(prep, snapshots):
    """The final labels cover exactly the ink: labels > 0 <=> prep.ink, labels in 1..L."""
    _valid_segmentation(prep, finish(prep, snapshots[-1]))


# --------------------------------------------------------------------------- end to end

#: FM measured (seed 0, scale 1, default parameters) where it is under 0.95.
# Known failures, measured; strict=False so that a fix shows up as XPASS.
_FAILING = {
    "touching": "FM 0.0 measured: glyph bands (2.6 x-heights) wider than the pitch (2.2); H_cc 75 px "
                "from touching chains, 3 initial lines",
}


@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.xfail(strict=False, reason=_FAILING[k]))
                                  if k in _FAILING else k for k in KINDS])
def test_end_to_end_fm(kind):
    """Segmenting a synthetic page reaches contest FM >= 0.95 against its exact labels
    ('two_orientations' with multi_oriented=True); every ink pixel gets a line."""
    page = make_page(kind, seed=0)
    params = Parameters(multi_oriented=kind == "two_orientations")
    p = prepare(page.image, params)
    *_, last = run_em(p)
    seg = finish(p, last)
    assert_every_ink_pixel_labelled(seg, p)
    score = contest_metric(page.labels, seg.labels, ink=page.labels > 0)
    assert score.fm >= 0.95, f"{kind}: FM {score.fm:.3f}"


def test_theta_from_an_edge_sample_matches_all_edges():
    """The theta step reads a fixed random sample of the edges on large pages. With the sample
    cut to a fifth of a synthetic page's edges: the sample's mean class fractions (what theta
    is matched on) are within 4 standard errors of every edge's, and EM labels the page as
    well as with every edge. (Theta itself is no test: on 2k edges the rarest class is a dozen
    edges, and 6 EM iterations amplify that noise to 0.1-0.4 nats.)"""
    from engine import em
    from engine import message_passing as mp

    page = make_page("straight", seed=3)
    ink = page.labels > 0
    results = {}
    for cap in (0, None):
        prep = prepare(page.image, Parameters(max_em_iterations=6))
        prep = dataclasses.replace(prep, params=prep.params.replace(
            theta_edge_sample=cap if cap is not None else len(prep.edges) // 5))
        em._GRAPHS.clear()
        *_, last = run_em(prep)
        results[cap] = contest_metric(page.labels, finish(prep, last).labels, ink=ink).fm
    assert results[None] == results[0]

    states = em._region_states(prep, prep.initial_lines, prep.params)
    sampled = sum(len(st.theta_edges) for st in states if st.theta_edges is not None)
    assert 0 < sampled <= len(prep.edges) // 5 + len(states)
    unaries = em._windowed(states, em._unaries(states, prep.initial_lines, prep.params, prep.stats.h_cc))
    q_all, q_sample = [], []
    for st, u in zip(states, unaries, strict=True):
        shift = mp.half_edge_shift(st.graph, st.offsets)
        for _ in range(5):
            mp.sweep(u, st.out, st.graph, np.array([-2.0, 0.0, 2.0]), st.power, 0.5, st.posterior, shift)
        q_all.append(mp.edge_class_fractions(st.out, st.graph, shift))
        q_sample.append(mp.edge_class_fractions(st.out, st.graph, shift, st.theta_edges))
    q_all, q_sample = np.concatenate(q_all), np.concatenate(q_sample)
    error = q_all.std(axis=0) / np.sqrt(len(q_sample))
    assert np.all(np.abs(q_sample.mean(axis=0) - q_all.mean(axis=0)) <= 4 * error + 1e-12)
