"""Margins of the row-pitch harmonic test (engine.initial_lines.fundamental_lag) on the dev pages.

    .venv/bin/python bench/harmonic_margins.py [--data DIR] [--seeds 0,1,2] [--out CSV]

Prepares every dev page (stages 1-6) at each seed and records every candidate the test
weighs: a prominent autocorrelation peak at a lag ``k`` under the highest peak ``L`` with
``m = L / k`` (peak positions to a fraction of a lag) near a whole multiple of at least 2.
``k`` is taken when ``|m - round(m)| k`` ("off", in lags) is at most ``1 + 0.05 k`` (the
slack). The margin: the largest off / slack among the candidates taken against the
smallest among those refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import DEFAULT_DATA, find_sets, write_rows  # noqa: E402
from engine import initial_lines as il  # noqa: E402
from engine import pipeline  # noqa: E402
from engine.params import Parameters  # noqa: E402

RECORDS: list[dict] = []


def _recording_fundamental(ac: np.ndarray, lag: int, min_lag: int, record: list | None = None) -> int:
    """:func:`engine.initial_lines.fundamental_lag`, recording every candidate it weighs."""
    weighed: list = []
    chosen = ORIGINAL(ac, lag, min_lag, weighed)
    for lag_, k, multiple, off, slack in weighed:
        RECORDS.append({"lag": lag_, "candidate": k, "multiple": multiple, "off": round(off, 3),
                        "slack": round(slack, 3), "taken": int(chosen) == k})
    return chosen


ORIGINAL = il.fundamental_lag


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    il.fundamental_lag = _recording_fundamental
    rows = []
    for name, pages in find_sets(args.data, None).items():
        for image, _gt in pages:
            for seed in (int(s) for s in args.seeds.split(",")):
                RECORDS.clear()
                pipeline.prepare(image, dataclasses.replace(Parameters(), seed=seed))
                for r in RECORDS:
                    rows.append({"set": name, "page": image.stem, "seed": seed, **r})
    taken = [r["off"] / r["slack"] for r in rows if r["taken"]]
    refused = [r["off"] / r["slack"] for r in rows if not r["taken"]]
    print(f"candidate periods under the highest peak: {len(rows)} ({len(taken)} taken, {len(refused)} refused)")
    print(f"off / slack: largest taken {max(taken, default=float('nan')):.3f}, "
          f"smallest refused {min(refused, default=float('nan')):.3f}")
    for r in rows:
        print(f"  {r['set']}/{r['page']} seed {r['seed']}: highest peak {r['lag']}, candidate {r['candidate']} "
              f"x {r['multiple']}, off {r['off']} (slack {r['slack']}) {'taken' if r['taken'] else 'refused'}")
    if args.out and rows:
        write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
