"""The margin of ``steep_evidence`` on every development page, at one or more seeds.

    python bench/steep_margins.py [--sets a,b] [--seeds 0,1] [--out CSV]

A region whose line contrast is highest at a steep angle (outside the orientation range)
takes that angle only when its ink supports it (engine.initial_lines.steep_supported): its
contrast there is ``steep_evidence`` times its best in the range, or its samples show a row
period there. This prepares every page (stages 1-6, default parameters) and lists each
candidate the test saw: the page, the seed, the region's samples, the steep angle, the
contrast ratio, whether the samples showed a period, and the decision. The summary gives,
per seed, the highest ratio rejected and the lowest accepted: the threshold has a margin on
the dev pages only where the first lies below the second.

Bilevel pages (ahte-train, moc-train) have no page direction to fall back on and are not
tested: their steep angles stand (they list no candidate).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import find_sets  # noqa: E402
from engine import initial_lines as _initial  # noqa: E402
from engine.arrays import angle_gap  # noqa: E402
from engine.params import Parameters  # noqa: E402
from engine.pipeline import prepare  # noqa: E402

FIELDS = ("set", "page", "seed", "samples", "angle", "ratio", "period", "steep")


def recording(seen: list[dict]):
    """``steep_supported`` that also appends each call's candidate to ``seen``."""
    test = _initial.steep_supported

    def wrapped(angles, scores, inside, deg, score, points, stats, ratio, *rest):
        far = inside & (angle_gap(angles, deg) >= _initial.STEEP_SPLIT_ANGLE)
        reference = float(scores[far].max()) if far.any() else 0.0
        decision = test(angles, scores, inside, deg, score, points, stats, ratio, *rest)
        # The period alone: the same test with a contrast that no ratio accepts.
        period = test(angles, scores, inside, deg, -np.inf, points, stats, ratio, *rest)
        seen.append({"samples": 0 if points is None else len(points), "angle": round(float(deg), 2),
                     "ratio": round(score / reference, 3) if reference > 0 else float("inf"),
                     "period": bool(period), "steep": bool(decision)})
        return decision

    return wrapped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--sets", default="")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--out", default="/tmp/steep-margins.csv")
    args = ap.parse_args(argv)
    data = Path(args.data)
    if not data.is_dir():
        data = Path("/work/shared/data")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    seen: list[dict] = []
    _initial.steep_supported = recording(seen)
    rows = []
    for name, pages in find_sets(data, [s for s in args.sets.split(",") if s] or None).items():
        for image, _gt in pages:
            for seed in seeds:
                seen.clear()
                prepare(str(image), Parameters(seed=seed))
                for cand in seen:
                    row = {"set": name, "page": image.stem, "seed": seed, **cand}
                    rows.append(row)
                    print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        w.writerows(rows)
    threshold = Parameters().steep_evidence
    for seed in seeds:
        mine = [r for r in rows if r["seed"] == seed and not r["period"]]
        rejected = [r["ratio"] for r in mine if not r["steep"]]
        accepted = [r["ratio"] for r in mine if r["steep"]]
        print(f"seed {seed}: {len(mine)} candidates decided by the ratio (threshold {threshold}); "
              f"highest rejected {max(rejected, default=float('nan')):.2f}, "
              f"lowest accepted {min(accepted, default=float('nan')):.2f}; "
              f"{sum(r['period'] for r in rows if r['seed'] == seed)} with a row period")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
