"""Gaps along lines: how far apart, along the text, the two largest parts of a line lie.

    .venv/bin/python bench/line_gaps.py [--sets a,b] [--jobs N] [--side N]

For every development page (default parameters): each ground-truth line's largest gap along
its principal axis between its samples (the samples inside the line), and each result line's
(the samples EM gave it), in H_cc; only gaps with at least ``--side`` samples (default
``min_region_samples``) on both sides count, so that a stray mark beyond a line's end is no
gap. Per result line with a gap over ``--report`` H_cc: the gap, its share of samples on its
majority ground-truth line (purity) and its samples. Per set: the ground-truth gaps'
percentiles. A line whose gap is far wider than any ground-truth line's spans two blocks
(moc-train: a line from a main block across the blank page to a side note).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.pitch_margins import truth_of_samples  # noqa: E402
from bench.run_bench import find_sets  # noqa: E402
from engine import pipeline  # noqa: E402
from engine.params import Parameters  # noqa: E402


def largest_gap(points: np.ndarray, side: int) -> float:
    """Largest gap (pixels) between consecutive ``points (n, 2)`` along their principal axis
    with at least ``side`` points on each side of it; 0 when there are fewer than 2 x side."""
    if len(points) < 2 * side or side < 1:
        return 0.0
    centred = points - points.mean(axis=0)
    _, vectors = np.linalg.eigh(centred.T @ centred)
    along = np.sort(centred @ vectors[:, -1])
    inner = np.diff(along)[side - 1: len(along) - side]
    return float(inner.max()) if len(inner) else 0.0


def page_gaps(job: tuple[str, str, str, int]) -> tuple[str, str, list[float], list[tuple[float, float, int]]]:
    set_name, image, gt, side = job
    prep, _, seg = pipeline.segment(image, Parameters())
    h = prep.stats.h_cc
    truth = truth_of_samples(Path(image), Path(gt), prep.shape, prep.samples)
    truth_gaps = [largest_gap(prep.samples[truth == k], side) / h for k in np.unique(truth[truth > 0])]
    result = []
    labels = seg.sample_labels
    for k in np.unique(labels[labels >= 0]):
        mine = labels == k
        on = truth[mine]
        on = on[on > 0]
        purity = float(np.bincount(on).max() / mine.sum()) if len(on) else 0.0
        result.append((largest_gap(prep.samples[mine], side) / h, purity, int(mine.sum())))
    return set_name, Path(image).stem, truth_gaps, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="line_gaps.py", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--sets", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--side", type=int, default=Parameters().min_region_samples)
    ap.add_argument("--report", type=float, default=6.0, help="list result lines with a gap over this (H_cc)")
    args = ap.parse_args(argv)
    jobs = [(s, str(i), str(g), args.side)
            for s, pages in find_sets(args.data, [s for s in args.sets.split(",") if s] or None).items()
            for i, g in pages]
    per_set: dict[str, list[float]] = {}
    with multiprocessing.Pool(max(1, args.jobs)) as pool:
        for set_name, stem, truth_gaps, result in pool.imap_unordered(page_gaps, jobs):
            per_set.setdefault(set_name, []).extend(truth_gaps)
            wide = [f"{g:.1f} H_cc (purity {p:.2f}, {n} samples)" for g, p, n in result if g > args.report]
            print(f"{set_name}/{stem}: ground truth's widest {max(truth_gaps, default=0.0):.1f} H_cc; "
                  f"result lines over {args.report:g}: {'; '.join(wide) or 'none'}", flush=True)
    for set_name, gaps in sorted(per_set.items()):
        p50, p95, p99, top = np.percentile(gaps, [50, 95, 99, 100]) if gaps else (0.0,) * 4
        print(f"{set_name}: ground-truth gaps p50 {p50:.1f}, p95 {p95:.1f}, p99 {p99:.1f}, max {top:.1f} H_cc")
    return 0


if __name__ == "__main__":
    sys.exit(main())
