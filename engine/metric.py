"""Scores of a line segmentation against ground truth, both label maps int32 ``(H, W)``.

* :func:`contest_metric`: the ICDAR handwriting segmentation contests' one-to-one match count
  (MatchScore over ink pixels >= T_a) with detection rate, recognition accuracy and F-measure.
* :func:`line_metric`: the ICDAR 2017 (DIVA line evaluator) line IU / line F1 / pixel IU.

Both reduce the page to a sparse contingency table of (GT line, result line) pixel counts over
the ink, computed with one ``np.unique`` over pixel pairs; matching then loops over pairs of
lines, never over pixels. Per-page scores keep counts, so pages combine by summing them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class _Table:
    """Sparse contingency table over the scored (ink) pixels.

    ``gt_ids``/``pred_ids``: line ids with at least one scored pixel; ``gt_size``/``pred_size``:
    their pixel counts; ``pairs`` ``(P, 2)`` indices into gt_ids/pred_ids of every pair that
    shares pixels and ``inter`` ``(P,)`` the shared pixel count.
    """

    gt_ids: np.ndarray
    pred_ids: np.ndarray
    gt_size: np.ndarray
    pred_size: np.ndarray
    pairs: np.ndarray
    inter: np.ndarray


def _table(gt: np.ndarray, pred: np.ndarray, ink: np.ndarray | None) -> _Table:
    gt = np.asarray(gt)
    pred = np.asarray(pred)
    if gt.shape != pred.shape:
        raise ValueError(f"ground truth {gt.shape} and result {pred.shape} differ in shape")
    if ink is None:
        ink = (gt > 0) | (pred > 0)
    else:
        ink = np.asarray(ink, dtype=bool)
        if ink.shape != gt.shape:
            raise ValueError(f"ink mask {ink.shape} and label maps {gt.shape} differ in shape")
    g = np.where(gt[ink] > 0, gt[ink], 0).astype(np.int64)
    r = np.where(pred[ink] > 0, pred[ink], 0).astype(np.int64)
    gt_ids, g_idx = np.unique(g, return_inverse=True)
    pred_ids, r_idx = np.unique(r, return_inverse=True)
    # Index 0 is "no line" when present; shift so that the line ids come first and drop it.
    g_off = 1 if gt_ids.size and gt_ids[0] == 0 else 0
    r_off = 1 if pred_ids.size and pred_ids[0] == 0 else 0
    gt_size = np.bincount(g_idx, minlength=gt_ids.size)[g_off:]
    pred_size = np.bincount(r_idx, minlength=pred_ids.size)[r_off:]
    both = (g_idx >= g_off) & (r_idx >= r_off)
    code = (g_idx[both] - g_off) * max(pred_ids.size - r_off, 1) + (r_idx[both] - r_off)
    codes, inter = np.unique(code, return_counts=True)
    n_r = max(pred_ids.size - r_off, 1)
    pairs = np.stack([codes // n_r, codes % n_r], axis=-1).astype(np.int64)
    return _Table(gt_ids[g_off:], pred_ids[r_off:], gt_size, pred_size, pairs, inter)


def _greedy(score: np.ndarray, pairs: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """One-to-one assignment, best score first, among ``pairs[keep]`` -> indices of chosen pairs."""
    cand = np.flatnonzero(keep)
    # Ties broken by GT then result index, so the result does not depend on sort internals.
    order = cand[np.lexsort((pairs[cand, 1], pairs[cand, 0], -score[cand]))]
    used_g: set[int] = set()
    used_r: set[int] = set()
    chosen = []
    for i in order:
        gi, ri = int(pairs[i, 0]), int(pairs[i, 1])
        if gi in used_g or ri in used_r:
            continue
        used_g.add(gi)
        used_r.add(ri)
        chosen.append(i)
    return np.array(chosen, dtype=np.int64)


# ----------------------------------------------------------------------------- contest metric


@dataclass(frozen=True)
class ContestScore:
    """ICDAR contest score: ``n`` GT lines, ``m`` result lines (each with ink), ``o2o``
    one-to-one matches, ``dr`` = o2o/N, ``ra`` = o2o/M, ``fm`` their harmonic mean.

    ``per_gt_match[g]`` is the result line matched to GT line ``g`` (0 = none; index 0 unused);
    empty for combined scores.
    """

    n: int
    m: int
    o2o: int
    dr: float
    ra: float
    fm: float
    per_gt_match: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64),
                                     compare=False, repr=False)

    @classmethod
    def from_counts(cls, n: int, m: int, o2o: int, per_gt_match: np.ndarray | None = None) -> ContestScore:
        dr = o2o / n if n else 1.0
        ra = o2o / m if m else 1.0
        if n == 0 and m == 0:
            fm = 1.0
        elif dr + ra == 0:
            fm = 0.0
        else:
            fm = 2.0 * dr * ra / (dr + ra)
        pg = np.zeros(0, np.int64) if per_gt_match is None else per_gt_match
        return cls(int(n), int(m), int(o2o), float(dr), float(ra), float(fm), pg)


def contest_metric(gt: np.ndarray, pred: np.ndarray, ink: np.ndarray | None = None,
                   t_a: float = 0.95) -> ContestScore:
    """Contest score of the result ``pred`` against ``gt`` (label maps ``(H, W)``, 0 = none).

    MatchScore(g, r) = |G ∩ R ∩ I| / |(G ∪ R) ∩ I| over the ink ``I`` (bool ``(H, W)``;
    default: pixels labelled in either map). Pairs with MatchScore >= ``t_a`` are one-to-one
    matches; for ``t_a <= 0.5`` a line could pass with two partners, so pairs are taken best
    first and each line is used once (for ``t_a > 0.5`` this changes nothing).
    """
    t = _table(gt, pred, ink)
    gi, ri = t.pairs[:, 0], t.pairs[:, 1]
    union = t.gt_size[gi] + t.pred_size[ri] - t.inter
    score = t.inter / np.maximum(union, 1)
    chosen = _greedy(score, t.pairs, score >= t_a)
    gt_max = int(np.asarray(gt).max(initial=0))
    per_gt = np.zeros(max(gt_max, 0) + 1, np.int64)
    if chosen.size:
        per_gt[t.gt_ids[gi[chosen]]] = t.pred_ids[ri[chosen]]
    return ContestScore.from_counts(t.gt_ids.size, t.pred_ids.size, chosen.size, per_gt)


# ----------------------------------------------------------------------------- ICDAR 2017 line metric


@dataclass(frozen=True)
class LineScore:
    """ICDAR 2017 line evaluation counts; the rates are properties so pages combine by summing.

    ``correct``: matched pairs with pixel precision and recall >= threshold; ``missed``: GT
    lines not correctly matched; ``extra``: result lines not correctly matched; ``tp/fp/fn``:
    ink pixels on the matched partner / on a result line that is not the partner / of a GT
    line not on its partner.
    """

    n_gt: int
    n_pred: int
    correct: int
    missed: int
    extra: int
    tp: int
    fp: int
    fn: int

    @property
    def line_iu(self) -> float:
        d = self.correct + self.missed + self.extra
        return self.correct / d if d else 1.0

    @property
    def line_f1(self) -> float:
        d = 2 * self.correct + self.missed + self.extra
        return 2 * self.correct / d if d else 1.0

    @property
    def pixel_iu(self) -> float:
        d = self.tp + self.fp + self.fn
        return self.tp / d if d else 1.0


def _line_matches(t: _Table, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The DIVA line evaluator's one-to-one match on a table: the chosen pairs (indices into
    ``t.pairs``, best pixel IU first) and whether each is correct (pixel precision and recall
    both >= ``threshold``)."""
    gi, ri = t.pairs[:, 0], t.pairs[:, 1]
    union = t.gt_size[gi] + t.pred_size[ri] - t.inter
    chosen = _greedy(t.inter / np.maximum(union, 1), t.pairs, t.inter > 0)
    inter = t.inter[chosen]
    precision = inter / np.maximum(t.pred_size[ri[chosen]], 1)
    recall = inter / np.maximum(t.gt_size[gi[chosen]], 1)
    return chosen, (precision >= threshold) & (recall >= threshold)


def line_metric(gt: np.ndarray, pred: np.ndarray, ink: np.ndarray | None = None,
                threshold: float = 0.75) -> LineScore:
    """ICDAR 2017 line score (DIVA line evaluator) of ``pred`` against ``gt`` over ``ink``.

    Result lines are matched one-to-one to GT lines by descending pixel IU; a matched pair is
    correct when its pixel precision and recall are both >= ``threshold``; a matched but
    incorrect pair counts as one missed and one extra line.
    """
    t = _table(gt, pred, ink)
    chosen, is_correct = _line_matches(t, threshold)
    correct = int(np.count_nonzero(is_correct))
    tp = int(t.inter[chosen].sum())
    n_gt, n_pred = int(t.gt_ids.size), int(t.pred_ids.size)
    return LineScore(n_gt=n_gt, n_pred=n_pred, correct=correct, missed=n_gt - correct,
                     extra=n_pred - correct, tp=tp, fp=int(t.pred_size.sum()) - tp,
                     fn=int(t.gt_size.sum()) - tp)


# ----------------------------------------------------------------------------- combining pages


def combine(scores: Iterable[ContestScore]) -> ContestScore:
    """Several pages' contest scores as one: N, M and o2o summed (as the contests report)."""
    n = m = o2o = 0
    for s in scores:
        n, m, o2o = n + s.n, m + s.m, o2o + s.o2o
    return ContestScore.from_counts(n, m, o2o)


def combine_lines(scores: Iterable[LineScore]) -> LineScore:
    """Several pages' line scores as one, every count summed."""
    total = np.zeros(8, np.int64)
    for s in scores:
        total += [s.n_gt, s.n_pred, s.correct, s.missed, s.extra, s.tp, s.fp, s.fn]
    return LineScore(*(int(v) for v in total))
