"""Rows of a region's period that no initial line reaches get one (``row_fill``).

The filter bank gives a line to each blob over Otsu's level (and the ink-ratio test); ink in
a row whose blob fell under either (a short signature row, a fold, specks, a card's
perforated edge) has no line of its own, and EM gives each of its samples to the nearest
line of its region, however far: that line's regression follows them, its band (sigma_t)
widens over two or three rows and its slope turns towards them (poilus AN_0121-2: the row
"Pour ma famille"'s line took the blank upper card's specks, sigma_t 433 px, slope 15 deg,
on a row pitch of 210 px). A cap on sigma_t does not help: a sample's posterior is shared
among the lines of its region only, so a sample a thousand pixels from every line still
goes wholly to the nearest one.

With the region's row pitch P and phase (:mod:`engine.pitch`, the samples' own period), a
sample further than ``row_fill`` x P across the text from every line of its region lies
outside every line's row (a row's ink spans about half a pitch about its centre; the next
row's line is a pitch away). Such samples are grouped by the row of the period they fall
in; a row beyond the region's first and last lines (no line runs in it: a line runs in the
row its centre falls in) that holds at least ``min_region_samples`` of them, with letters
among them (:func:`letters_in_row`), gets a line, fitted to them within
``engine.initial_lines.STEEP_SPLIT_ANGLE`` of the frame. Everything after treats it as any
initial line (EM, surplus-line removal, merging).
"""

from __future__ import annotations

import math

import numpy as np

from .components import CHAIN_HEIGHTS
from .initial_lines import STEEP_SPLIT_ANGLE, concat_lines, line_floors, order_lines
from .model import ComponentStats, LineSet, Region, to_region_frame
from .params import Parameters
from .pitch import RowPitch
from .regression import fit_lines
from .unary import across_distance


def uncovered_rows(uv: np.ndarray, lines: LineSet, pitch: float, phase: float, reach: float,
                   min_samples: int) -> list[np.ndarray]:
    """Groups (index arrays into ``uv (n, 2)``, region-frame points) of the samples further
    than ``reach`` x ``pitch`` across the text from every one of ``lines`` (the region's),
    one group per row of the period (centres at ``phase + k pitch``) that holds at least
    ``min_samples`` of them and lies beyond the rows the lines run in (at their centres)."""
    if len(uv) == 0 or len(lines) == 0 or not math.isfinite(pitch) or pitch <= 0 or reach <= 0:
        return []
    d = np.abs(across_distance(uv, lines)).min(axis=1)
    far = np.flatnonzero(d > reach * pitch)
    if len(far) < min_samples:
        return []
    row = np.floor((uv[far, 1] - phase) / pitch + 0.5).astype(np.int64)
    rows, inverse, counts = np.unique(row, return_inverse=True, return_counts=True)
    # A row of the period a line already runs in (at the line's centre) is that line's: the
    # samples left over there are its row's ascenders, descenders, diacritics or ends
    # (ahte moc_train_18: alifs' tops and dots half a pitch above a row's line, 68-117
    # samples a row; filled, each became a line of its own).
    centre = to_region_frame(lines.segments(0.0)[:, 0], float(lines.phi[0]))
    taken = np.floor((centre[:, 1] - phase) / pitch + 0.5).astype(np.int64)
    # Only beyond the region's first and last lines: a row of the period without a line
    # between two lines holds what crosses rows (a flourish, a rule, a stamp; poilus-dev's
    # such rows had 0-13 % of their samples on ground-truth lines), and a line there takes
    # ink from the text rows on both sides (at 0.75, every row: poilus-dev line IU 81.4 ->
    # 80.7 %; beyond the lines only: 82.0 %). A short row the bank loses is a title or a
    # signature, and a card's blank part lies beyond its text (AN_0121-2).
    ok = (counts >= min_samples) & ~np.isin(rows, taken) & ((rows < taken.min()) | (rows > taken.max()))
    return [far[inverse == k] for k in np.flatnonzero(ok)]


def letters_in_row(heights: np.ndarray, h_cc: float, params: Parameters) -> bool:
    """Whether a row holds writing, from the heights (pixels) of the components its samples
    lie on ``(n,)``: no more than ``diacritic_fraction`` of them off letter size, the test
    stage 6 puts to a blob and stage 8 to a line, with both ends of a letter's size. Off
    letter size: under ``diacritic_height`` x H_cc (dots, specks, a dashed rule's dashes a
    pen wide) or over ``CHAIN_HEIGHTS`` x H_cc (flourishes, paraphs, a signature's loops:
    the components ``H_cc`` leaves out as chains). The lines a fill gave a form's empty
    dashed rows took part in the initial lines' merge and cost a written row its line (the
    synthetic page under dashed rules, FM 1.0 -> 0.71); a line on a paraph's loops took a
    row's words (poilus AN_0268-0: a correct line lost, two extra)."""
    if not params.remove_diacritic_lines or len(heights) == 0:
        return True
    letter = letter_sized(heights, h_cc, params)
    return bool(np.count_nonzero(~letter) <= params.diacritic_fraction * len(heights))


def letter_sized(heights: np.ndarray, h_cc: float, params: Parameters) -> np.ndarray:
    """Bool, like ``heights`` (pixels): components of a letter's size, from
    ``diacritic_height`` to ``CHAIN_HEIGHTS`` x H_cc."""
    return (heights >= params.diacritic_height * h_cc) & (heights <= CHAIN_HEIGHTS * h_cc)


def fill_rows(samples: np.ndarray, sample_region: np.ndarray, lines: LineSet, regions: tuple[Region, ...],
              row_pitch: tuple[RowPitch, ...], reach: float, stats: ComponentStats, params: Parameters,
              sample_heights: np.ndarray | None = None) -> tuple[LineSet, LineSet]:
    """``lines`` with a line added for every uncovered row (:func:`uncovered_rows`, at least
    ``params.min_region_samples`` samples) of every region with a row pitch, with the variance
    floors of ``params`` and ``stats``; the lines in region order, then across the text.
    ``sample_heights`` ``(N,)``: the height (pixels) of each sample's component; a row that
    fails :func:`letters_in_row` gets no line (None: no test).
    Returns the lines and, apart, the ones added (an empty LineSet when none is)."""
    none = lines.take(np.zeros(0, np.intp))
    if reach <= 0 or len(lines) == 0 or len(row_pitch) != len(regions):
        return lines, none
    min_samples = params.min_region_samples
    floor_t, floor_s = line_floors(stats, params)
    rot_inv = lines.rotation_invariant
    parts: list[LineSet] = []
    centres: dict[int, float] = {}
    for region, rp in zip(regions, row_pitch, strict=True):
        r = region.index
        members = np.flatnonzero(sample_region == r)
        if len(members) == 0:
            continue
        uv = to_region_frame(samples[members].astype(np.float64), region.phi)
        centres[r] = float(uv[:, 0].mean())
        own = lines.take(np.flatnonzero(lines.region == r))
        groups = uncovered_rows(uv, own, rp.pitch, rp.phase, reach, min_samples)
        if sample_heights is not None:
            groups = [g for g in groups if letters_in_row(sample_heights[members[g]], stats.h_cc, params)]
        if not groups:
            continue
        weights = np.zeros((len(uv), len(groups)))
        for j, g in enumerate(groups):
            weights[g, j] = 1.0
        fit = fit_lines(uv, weights, rot_inv, floor_t, floor_s, STEEP_SPLIT_ANGLE)
        ok = np.isfinite(fit.a)
        n = int(ok.sum())
        if n == 0:
            continue
        prior = fit.weight[ok] / len(uv)
        parts.append(LineSet(fit.a[ok], fit.b[ok], fit.c[ok], fit.sigma_t[ok], fit.sigma_s[ok], prior,
                             np.full(n, r, np.int32), np.full(n, region.phi), rot_inv))
    if not parts:
        return lines, none
    out = concat_lines([lines, *parts], rot_inv)
    return out.take(order_lines(out, centres)), concat_lines(parts, rot_inv)
