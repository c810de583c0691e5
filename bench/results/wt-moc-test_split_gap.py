"""Lines split at a blank gap along them (``split_gap``, engine.em.split_gapped_lines;
issue 26, failure 3): on moc_train_5 lines of the top block's region took the side notes down
the left margin and the short rows beside the right column, 46-48 H_cc apart across the
blank page, and the M-step fitted each through both."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from engine import em
from engine.model import ComponentStats, LineSet
from engine.params import Parameters

H = 20.0


def _state(uv: np.ndarray, best: np.ndarray, n_lines: int) -> em._Region:
    """An EM region state of ``uv (n, 2)`` with every line in each sample's window, each
    sample's posterior all on line ``best[i]`` (no graph: the split reads none)."""
    n = len(uv)
    posterior = np.zeros((n_lines, n), np.float32)
    posterior[best, np.arange(n)] = 1.0
    return em._Region(samples=np.arange(n), uv=uv, lines=np.arange(n_lines), graph=None, width=n_lines,
                      offsets=np.zeros(n, np.int64), out=np.zeros((n_lines, 0), np.float32),
                      posterior=posterior, bias=np.zeros(n_lines), power=np.ones(n))


def _case(far: float):
    """Line 0: a row of 600 samples over u 0..600 at v = 100 and 120 samples ``far`` H_cc
    beyond its end at v = 140 (another block's row); line 1: a row at v = 300 with no gap."""
    rng = np.random.default_rng(0)
    end = 600.0 + far * H
    row = np.stack([rng.uniform(0, 600, 600), 100 + rng.normal(0, 4, 600)], axis=1)
    other_block = np.stack([rng.uniform(end, end + 150, 120), 140 + rng.normal(0, 4, 120)], axis=1)
    second = np.stack([rng.uniform(0, 600, 300), 300 + rng.normal(0, 4, 300)], axis=1)
    uv = np.concatenate([row, other_block, second])
    best = np.r_[np.zeros(720, np.int64), np.ones(300, np.int64)]
    lines = LineSet(np.array([0.05, 0.0]), np.array([90.0, 300.0]), np.array([500.0, 300.0]), np.full(2, 15.0),
                    np.full(2, 400.0), np.array([0.7, 0.3]), np.zeros(2, np.int32), np.zeros(2), True)
    prep = SimpleNamespace(stats=ComponentStats(h_cc=H, w_cc=H, n_components=10), samples=uv,
                           sample_region=np.zeros(len(uv), np.int32), regions=(SimpleNamespace(index=0, phi=0.0),))
    return prep, _state(uv, best, 2), lines


def test_a_line_across_a_blank_gap_is_split_into_its_two_runs() -> None:
    prep, st, lines = _case(40.0)
    params = Parameters(split_gap=17.0, min_region_samples=60)
    split = em.split_gapped_lines(prep, [st], lines, params)
    assert split is not None and len(split) == 3
    seg = split.segments()  # (3, 2, 2) page points; the frame is the page (phi 0)
    # Each run has its own line on its own row, within its own extent; line 1 is untouched.
    on_row = [k for k in range(3) if abs(split.b[k] - 100.0) < 5.0 and abs(split.a[k]) < 0.01]
    far = [k for k in range(3) if abs(split.b[k] + split.a[k] * 1500.0 - 140.0) < 5.0 and split.c[k] > 1300.0]
    assert len(on_row) == 1 and len(far) == 1, split
    assert seg[on_row[0]][:, 0].max() < 750.0 and seg[far[0]][:, 0].min() > 1300.0
    assert any(abs(split.b[k] - 300.0) < 1e-9 and split.sigma_s[k] == 400.0 for k in range(3))
    assert np.isclose(split.prior.sum(), 1.0)
    # In EM's order: across the text (v at the region's centre) within the region.
    centre = prep.samples[:, 0].mean()
    assert np.all(np.diff(split.a * centre + split.b) >= 0)


def test_no_split_when_off_or_the_gap_is_a_word_gap() -> None:
    prep, st, lines = _case(40.0)
    assert em.split_gapped_lines(prep, [st], lines, Parameters(split_gap=0.0, min_region_samples=60)) is None
    prep, st, lines = _case(8.9)  # the widest gap along a ground-truth line on the dev pages (poilus)
    assert em.split_gapped_lines(prep, [st], lines, Parameters(split_gap=17.0, min_region_samples=60)) is None


def test_a_few_marks_beyond_a_lines_end_are_no_run() -> None:
    """A run needs min_region_samples samples: a stray mark far along is no second line."""
    prep, st, lines = _case(40.0)
    assert em.split_gapped_lines(prep, [st], lines, Parameters(split_gap=17.0, min_region_samples=200)) is None
