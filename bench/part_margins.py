"""The margin of ``KEEP_RATIO`` on every development page, and how much of it the draw takes.

    .venv/bin/python bench/part_margins.py [--data DIR] [--sets a,b] [--jobs N] [--set NAME=VALUE]
                                           [--csv OUT.csv]

The orientation split keeps a part of a region apart when its line contrast at the main
part's angle is under ``KEEP_RATIO`` x its best (:func:`engine.regions.keep_distinct_parts`),
read from the part's samples: a few hundred points on a side note. This prepares every page
(stages 1-6), lists every part the test saw (its samples, its own and the main part's angle,
the ratio, whether it was kept) and reads the same ratio again from ``K`` redraws of the
part's ink at the draw's own density (the ink pixels nearer to one of the part's samples
than to any other sample of its region): the 10th, 50th and 90th percentiles, and the ratio
of all that ink. A part whose redraws fall on both sides of ``KEEP_RATIO`` is decided by the
draw, not by the page.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import page_tool, write_rows  # noqa: E402

#: Redraws of each part's ink (``--redraws``).
REDRAWS = 20


def part_ink(components: np.ndarray, samples: np.ndarray, members: np.ndarray,
             within: np.ndarray) -> np.ndarray:
    """Page points ``(n, 2)`` [x, y] of the ink pixels (``components > 0``) in the box of the
    samples ``members`` that are nearer to one of them than to any other of ``within`` (both
    index arrays into ``samples``; ``within`` holds ``members``)."""
    pts = samples[members]
    x0, y0 = np.floor(pts.min(axis=0)).astype(int)
    x1, y1 = np.floor(pts.max(axis=0)).astype(int) + 1
    ys, xs = np.nonzero(components[y0:y1, x0:x1])
    ink = np.stack([xs + x0, ys + y0], axis=1).astype(np.float64)
    if len(ink) == 0:
        return ink
    mine = np.zeros(len(samples), bool)
    mine[members] = True
    _, nearest = cKDTree(samples[within]).query(ink)
    return ink[mine[within[nearest]]]


def ratio_at(points: np.ndarray, h: float, main_angle: float) -> float:
    """Line contrast of ``points`` at ``main_angle`` (degrees) over its best, at scale ``h``."""
    from engine.regions import _FINE_ANGLES, points_contrast

    curve = points_contrast(points, h)
    best = float(curve.max())
    k = int(np.argmin(np.abs(_FINE_ANGLES - main_angle)))
    return float(curve[k]) / best if best > 0 else 1.0


def redraw_ratios(ink: np.ndarray, n: int, h: float, main_angle: float, redraws: int,
                  seed: int = 0) -> np.ndarray:
    """The ratio (:func:`ratio_at`) of ``redraws`` random draws of ``n`` of the ``ink`` points."""
    rng = np.random.default_rng(seed)
    n = min(n, len(ink))
    return np.array([ratio_at(ink[np.sort(rng.choice(len(ink), n, replace=False))], h, main_angle)
                     for _ in range(redraws)])


def run_page(task: tuple[str, str, str, str], redraws: int = REDRAWS) -> list[dict[str, Any]]:
    import engine.regions as regions
    from engine.params import Parameters
    from engine.pipeline import prepare

    name, image, _gt, params_json = task
    params = Parameters.from_json(params_json)
    seen: list[tuple[np.ndarray, np.ndarray, list]] = []
    test = regions.keep_distinct_parts

    def recording(samples, region, *args, **kwargs):
        record: list = []
        seen.append((samples, region, record))
        return test(samples, region, *args, **kwargs, record=record)

    regions.keep_distinct_parts = recording
    try:
        prep = prepare(image, params)
    finally:
        regions.keep_distinct_parts = test
    rows = []
    for samples, region, record in seen:
        for t in record:
            within = np.flatnonzero(region == t.region)
            ink = part_ink(prep.components, samples, t.members, within)
            # No more ink than samples (a part of specks): nothing to redraw.
            again = (np.percentile(redraw_ratios(ink, len(t.members), t.h, t.main_angle, redraws,
                                                 params.seed), (10, 50, 90))
                     if len(ink) > len(t.members) else np.full(3, np.nan))
            rows.append({"set": name, "page": Path(image).stem, "seed": params.seed,
                         "samples": len(t.members), "own": t.own_angle, "main": t.main_angle,
                         "ratio": round(t.ratio, 3), "evidence": t.evidence, "kept": t.kept,
                         "redraw_p10": round(float(again[0]), 3),
                         "redraw_p50": round(float(again[1]), 3),
                         "redraw_p90": round(float(again[2]), 3),
                         "ink_ratio": round(ratio_at(ink, t.h, t.main_angle), 3) if len(ink) else float("nan")})
    return rows


def main(argv: list[str] | None = None) -> int:
    from engine.arrays import angle_gap
    from engine.regions import KEEP_RATIO, SPLIT_ANGLE

    done = page_tool("part_margins", __doc__, argv, run_page, "write one row per part to this CSV")
    if done is None:
        return 2
    args, sets, pages = done
    rows = [r for page in pages for r in page]
    # The ratio decides a part that has the evidence and lies more than SPLIT_ANGLE from the
    # main part (a mixed part or a block across the main text may be kept above it).
    print(f"{'set':<16}{'parts':>6}{'kept':>6}{'decided by the ratio':>22}{'draw decides':>14}"
          f"   nearest ratios under / over KEEP_RATIO ({KEEP_RATIO})")
    for name in sets:
        mine = [r for r in rows if r["set"] == name]
        by_ratio = [r for r in mine if r["evidence"] and angle_gap(r["own"], r["main"]) > SPLIT_ANGLE]
        straddle = [r for r in by_ratio if r["redraw_p10"] < KEEP_RATIO < r["redraw_p90"]]
        under = [r["ratio"] for r in by_ratio if r["ratio"] < KEEP_RATIO]
        over = [r["ratio"] for r in by_ratio if r["ratio"] >= KEEP_RATIO]
        print(f"{name:<16}{len(mine):>6}{sum(r['kept'] for r in mine):>6}{len(by_ratio):>22}"
              f"{len(straddle):>14}   {max(under, default=float('nan')):.3f} / "
              f"{min(over, default=float('nan')):.3f}")
    if args.csv and rows:
        write_rows(args.csv, rows)
        print(f"part_margins: wrote {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
