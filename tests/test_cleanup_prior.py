"""The clean-up before EM reads each line's prior from the posterior (``cleanup_posterior_prior``,
issue 26, failure 3). ``merge_initial_lines`` runs stage 8's clean-up on EM's first posterior;
its surplus test dropped every line whose prior is under ``epsilon``, and the prior of an
initial line is its blob's share of its region's ink. A blob of a few samples on a piece of a
margin note (moc_train_5: 7 samples in the blob, 147 samples choosing its line, prior 0.0003)
was dropped, its samples went to their next most probable line, the line of a row 1800 px
along, and that line, refitted, ran across the page. With the mechanism the prior is the mean
of the samples' posteriors (pi_l = mean_v p_v(l), as EM's M-step sets it): a line that a
piece of ink chooses stays."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from synthetic import side_note_page

from engine.params import Parameters
from engine.pipeline import merge_initial_lines, prepare


@pytest.mark.parametrize("seed", [0, 1])
def test_a_line_its_ink_chooses_survives_a_small_blob(seed: int) -> None:
    page, _ = side_note_page(seed, 30.0)
    prep = prepare(page.image, Parameters(merge_initial_lines=False))
    lines = prep.initial_lines
    segs = lines.segments()
    angle = np.degrees(np.arctan2(segs[:, 1, 1] - segs[:, 0, 1], segs[:, 1, 0] - segs[:, 0, 0]))
    note = np.flatnonzero(np.abs(angle - 30.0) <= 5.0)
    assert len(note) >= 3
    k = int(note[len(note) // 2])
    # Its blob a few samples (the share the filter bank's blob gives a piece of a margin note).
    small = dataclasses.replace(lines, prior=np.where(np.arange(len(lines)) == k, 1e-4, lines.prior))
    assert small.prior[k] < prep.params.epsilon
    counts = {}
    for flag in (False, True):
        params = prep.params.replace(merge_initial_lines=True, cleanup_posterior_prior=flag)
        out = merge_initial_lines(dataclasses.replace(prep, initial_lines=small, params=params))
        near = out.segments()
        # The note's line is still there: a line within 3 deg of it, its middle within 5 px.
        mid = segs[k].mean(axis=0)
        d = np.linalg.norm(near.mean(axis=1) - mid, axis=1)
        a = np.degrees(np.arctan2(near[:, 1, 1] - near[:, 0, 1], near[:, 1, 0] - near[:, 0, 0]))
        counts[flag] = int(((d <= 5.0) & (np.abs(a - angle[k]) <= 3.0)).sum())
    assert counts[True] == 1 and counts[False] == 0, counts
