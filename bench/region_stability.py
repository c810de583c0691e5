"""How much a page's regions (stage 5) depend on the draw of the ink samples.

    .venv/bin/python bench/region_stability.py [--data DIR] [--sets a,b] [--seeds 0,1,2] [--jobs 2]

Prepares every page (stages 1-6) once per seed and compares the region partitions of each
pair of draws on the ink: each ink component takes the region most of its samples are in,
the regions of two draws are matched by the ink they share, and the share of the ink (by
component area) outside the matched pairs is the page's mismatch (0: the same regions; the
larger of the two directions). Prints, per page, the regions and initial lines of each draw
and the mismatch of each pair of draws, then the pages whose regions move most. The samples
are drawn at random, so a region cut that compares sample distances with a threshold can
cut a page differently from one draw to the next (docs/history.md, 2026-11-27).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from itertools import combinations
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import DEFAULT_DATA, find_sets  # noqa: E402


def partition_mismatch(a: np.ndarray, b: np.ndarray, weight: np.ndarray) -> float:
    """Share of ``weight`` (per component) outside the best-matched regions of two
    partitions ``a`` and ``b`` (region per component, -1 = none), the larger of matching
    ``a``'s regions to ``b``'s and the reverse; 0 when they are the same partition."""
    ok = (a >= 0) & (b >= 0) & (weight > 0)
    a, b, w = a[ok], b[ok], weight[ok]
    if w.sum() == 0:
        return 0.0
    table = np.zeros((int(a.max()) + 1, int(b.max()) + 1))
    np.add.at(table, (a, b), w)
    return float(max(1.0 - table.max(axis=1).sum() / w.sum(), 1.0 - table.max(axis=0).sum() / w.sum()))


def page_stability(task: tuple[str, str, tuple[int, ...]]) -> dict:
    """Regions, initial lines and pairwise mismatch of one page over the seeds."""
    from engine.params import Parameters
    from engine.pipeline import prepare
    from engine.postprocess import component_owners

    name, image, seeds = task
    parts, n_regions, n_lines, weight = [], [], [], None
    for seed in seeds:
        prep = prepare(image, Parameters(seed=seed))
        # Each ink component's region: the one most of its samples are in (-1: none).
        owner = np.full(int(prep.components.max()) + 1, -1, np.int64)
        found = component_owners(prep.sample_region, prep.sample_component)
        owner[: len(found)] = found
        parts.append(owner)
        n_regions.append(len(prep.regions))
        n_lines.append(len(prep.initial_lines))
        if weight is None:
            weight = np.bincount(prep.components.ravel(), minlength=int(prep.components.max()) + 1).astype(float)
            weight[0] = 0.0
    pairs = {f"{seeds[i]}-{seeds[j]}": partition_mismatch(parts[i], parts[j], weight)
             for i, j in combinations(range(len(seeds)), 2)}
    return {"set": name, "page": Path(image).stem, "regions": n_regions, "lines": n_lines, "mismatch": pairs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="region_stability.py", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", help="comma-separated sets (default: all)")
    ap.add_argument("--seeds", default="0,1,2", help="the draws to compare (default 0,1,2)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--top", type=int, default=10, help="list this many least stable pages (default 10)")
    args = ap.parse_args(argv)
    seeds = tuple(int(s) for s in args.seeds.split(","))
    if len(seeds) < 2:
        print("region_stability: give at least two seeds", file=sys.stderr)
        return 2
    sets = find_sets(args.data, [s.strip() for s in args.sets.split(",")] if args.sets else None)
    tasks = [(name, str(image), seeds) for name, pages in sets.items() for image, _ in pages]
    if not tasks:
        print(f"region_stability: no pages in {args.data}", file=sys.stderr)
        return 2
    rows = []
    with multiprocessing.get_context("spawn").Pool(max(1, args.jobs)) as pool:
        for row in pool.imap(page_stability, tasks):
            rows.append(row)
            shares = " ".join(f"{k}: {100 * v:.1f} %" for k, v in row["mismatch"].items())
            print(f"{row['set']}/{row['page']}: regions {row['regions']}, initial lines {row['lines']}, "
                  f"ink in other regions {shares}", flush=True)
    rows.sort(key=lambda r: -max(r["mismatch"].values()))
    print(f"\nleast stable pages (largest share of ink whose region changes between two of seeds {args.seeds}):")
    for row in rows[: args.top]:
        print(f"  {row['set']}/{row['page']}: {100 * max(row['mismatch'].values()):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
