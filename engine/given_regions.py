"""Regions that follow the lines a run starts from (issue 24: a line the user draws, moves or
locks, or another tool's file gives, leads the result).

Stage 5's regions come from the page alone, and EM lets a sample take only the lines of its
own region. A given line is placed in the region holding its midpoint
(:func:`engine.edits.region_of`); where the page's regions cut its text row in two (a block
split, a side note's part, a word gap), the samples of the rest of its row, in another region,
can never take it and go to that region's lines (moc_train_9 under issue 24's run (d), the
ground truth locked: line IU 0.875 -> 0.765 once the row's end became a block of its own).

:func:`follow_given_lines` moves each word (connected component) lying along a given line
(``LineSet.locked`` or ``LineSet.anchored``) into that line's region: for every sample, the
given line it is nearest to across, in units of that line's ``sigma_t``, among the given
lines whose extent (centre +- 2 sigma_s) covers it; a word whose samples mostly lie
within ``Parameters.given_regions`` sigma_t of one given line goes, whole, to that line's
region. The regions keep their indices and frames (a line's coefficients are in its region's
frame, and the lines at another angle keep their own regions); the MRF edges are those of the
preparation where no end moved, and the page's short Delaunay edges (at most
``region_threshold`` x H_cc, stage 5's cut) between a moved sample and its new region. Nothing
changes when no line is given (a default run, the window's no-op round trip): the same
preparation object comes back.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .blocks import covered_across
from .model import LineSet, Preparation, Region
from .params import Parameters
from .regions import region_threshold

#: A word goes to a given line's region when more than this share of its samples lie within
#: reach of that line (and that line is their nearest given line).
WORD_SHARE = 0.5
#: How far beyond a given line's ends (centre +- 2 sigma_s) it reaches along, in W_cc. A
#: file's line spans its row; ``merge_gap`` (4 W_cc, as refine_boundaries reaches) took the
#: words of other rows round a line's end into its region, at every angle (moc_train_10, the
#: ground truth locked: FM 69.0 -> 60.6 %, samples of a 5.6 deg block into a vertical one).
ALONG_REACH = 0.0
#: Samples per slice when measuring distances to the given lines.
_CHUNK = 16384


def nearest_given(prep: Preparation, lines: LineSet, params: Parameters) -> tuple[np.ndarray, np.ndarray]:
    """For every sample: the index (into ``lines``) of the nearest given line whose extent
    covers it, and its distance across that line in units of its sigma_t; ``-1`` and inf
    where no given line's extent covers it."""
    n = len(prep.samples)
    best = np.full(n, np.inf)
    line_of = np.full(n, -1, np.int64)
    given = np.flatnonzero(lines.locked | lines.anchored)
    reach = ALONG_REACH * prep.stats.w_cc
    for r in np.unique(lines.region[given]):
        k = given[lines.region[given] == r]
        own = lines.take(k)
        # In slices of the samples: (samples x lines) arrays of a large page's 100k samples
        # and a region's 60 given lines would take 50 MB each.
        for lo in range(0, n, _CHUNK):
            sl = slice(lo, min(n, lo + _CHUNK))
            across = (covered_across(prep.samples[sl].astype(np.float64), own, float(own.phi[0]), reach)
                      / np.maximum(own.sigma_t, 1e-6))
            j = across.argmin(axis=1)
            d = across[np.arange(len(j)), j]
            closer = d < best[sl]
            best[sl][closer] = d[closer]
            line_of[sl][closer] = k[j[closer]]
    return line_of, best


def follow_given_lines(prep: Preparation, lines: LineSet, params: Parameters | None = None) -> Preparation:
    """``prep`` with its regions following the given lines of ``lines`` (see the module
    docstring); ``prep`` itself when ``params.given_regions`` is 0, no line is locked or
    anchored, or no word moves."""
    params = params or prep.params
    if (params.given_regions <= 0 or len(lines) == 0 or len(prep.regions) < 2 or len(prep.samples) == 0
            or not (lines.locked.any() or lines.anchored.any())):
        return prep
    line_of, dist = nearest_given(prep, lines, params)
    near = dist <= params.given_regions
    comp = prep.sample_component.astype(np.int64)
    n_comp = int(comp.max()) + 1
    n_lines = len(lines)
    # Per word: its samples within reach of each given line; the line most of them are near.
    at = near.nonzero()[0]
    votes = np.bincount(comp[at] * n_lines + line_of[at], minlength=n_comp * n_lines).reshape(n_comp, n_lines)
    size = np.bincount(comp, minlength=n_comp)
    top = votes.argmax(axis=1)
    enough = votes[np.arange(n_comp), top] > WORD_SHARE * np.maximum(size, 1)
    target = np.where(enough, lines.region[top], -1)
    region = prep.sample_region.astype(np.int32)
    to = target[comp]
    moved = (to >= 0) & (to != region)
    if not moved.any():
        return prep
    new_region = np.where(moved, to, region).astype(np.int32)
    edges = _edges(prep, new_region, moved, params)
    regions = _regions(prep, new_region, moved)
    return dataclasses.replace(prep, sample_region=new_region, edges=edges, regions=regions)


def _edges(prep: Preparation, new_region: np.ndarray, moved: np.ndarray, params: Parameters) -> np.ndarray:
    """The MRF edges under ``new_region``: the preparation's where neither end moved, then the
    short Delaunay edges (stage 5's cut) with a moved end inside one new region."""
    old = prep.edges
    keep = ~(moved[old[:, 0]] | moved[old[:, 1]]) if len(old) else np.zeros(0, bool)
    cand = prep.delaunay_edges
    if len(cand):
        cand = cand[moved[cand[:, 0]] | moved[cand[:, 1]]]
        length = np.linalg.norm(prep.samples[cand[:, 0]].astype(np.float64)
                                - prep.samples[cand[:, 1]].astype(np.float64), axis=1)
        cand = cand[(length <= region_threshold(prep.stats, params))
                    & (new_region[cand[:, 0]] == new_region[cand[:, 1]])]
    return np.concatenate([old[keep], cand.astype(old.dtype)]) if len(cand) else old[keep]


def _regions(prep: Preparation, new_region: np.ndarray, moved: np.ndarray) -> tuple[Region, ...]:
    """The regions with their sample counts under ``new_region`` and each box grown over the
    samples it received (frames unchanged)."""
    counts = np.bincount(new_region, minlength=len(prep.regions))
    out = []
    for reg in prep.regions:
        x0, y0, x1, y1 = reg.bbox
        got = prep.samples[moved & (new_region == reg.index)]
        if len(got):
            x0, y0 = min(x0, int(np.floor(got[:, 0].min()))), min(y0, int(np.floor(got[:, 1].min())))
            x1, y1 = max(x1, int(np.floor(got[:, 0].max())) + 1), max(y1, int(np.floor(got[:, 1].max())) + 1)
        out.append(dataclasses.replace(reg, bbox=(x0, y0, x1, y1), n_samples=int(counts[reg.index])))
    return tuple(out)
