"""Seconds per page of two checkouts of the engine, timed page by page and interleaved.

    python bench/interleaved_timing.py OLD_CHECKOUT NEW_CHECKOUT [--data DIR] [--limit N] [--csv OUT]

This VM's speed drifts by 10-30 % within the hour, so one benchmark table against another
says little about a change. Here every page is segmented four times, A B B A (B A A B on
every other page), each run in a fresh process that imports the engine of its checkout
(``git worktree add /tmp/old COMMIT`` makes one), and each checkout's time for the page is
the mean of its two runs. Prints, per set and over all pages, the median and total wall
seconds and total CPU seconds of each checkout. Timed: loading the page to its ``.dat``
labels written (as ``run_bench.py``), default parameters.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # bench.run_bench, for the pages
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SETS = ("ahte-train", "cremma20", "kraken-sample", "moc-train", "poilus-dev")

#: One timed run, in a fresh interpreter: argv = checkout, page, .dat path.
_RUN = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from engine.export import write_dat
from engine.params import Parameters
from engine.pipeline import segment
wall, cpu = time.perf_counter(), time.process_time()
_, _, seg = segment(sys.argv[2], Parameters())
write_dat(sys.argv[3], seg.labels)
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))
"""


def pages_of(data: Path) -> list[tuple[str, Path]]:
    """(set, image) of every scored page of the sets in ``data``, found as
    ``bench/run_bench.py`` finds them (:func:`bench.run_bench.find_pages`: cremma20's pages
    in its subfolders too, all 79 dev pages; before, the 13 of cremma20 were left out)."""
    from bench.run_bench import find_pages

    return [(name, image) for name in SETS if (data / name).is_dir() for image, _ in find_pages(data / name)]


def time_page(checkout: str, page: Path, scratch: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``checkout``'s engine on ``page``."""
    done = subprocess.run([sys.executable, "-c", _RUN, checkout, str(page), str(scratch / "labels.dat")],
                          capture_output=True, text=True, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return found["wall"], found["cpu"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--limit", type=int, default=0, help="only the first N pages")
    ap.add_argument("--csv", type=Path, help="also write each page's mean wall and CPU seconds here")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"interleaved_timing: no data folder {args.data} (--data DIR)", file=sys.stderr)
        return 2
    pages = pages_of(args.data)[:args.limit or None]
    times: dict[str, dict[Path, list[tuple[float, float]]]] = {args.old: {}, args.new: {}}
    with tempfile.TemporaryDirectory() as scratch:
        for i, (_, page) in enumerate(pages):
            a, b = (args.old, args.new) if i % 2 == 0 else (args.new, args.old)
            for checkout in (a, b, b, a):
                times[checkout].setdefault(page, []).append(time_page(checkout, page, Path(scratch)))
            print(f"  [{i + 1}/{len(pages)}] {page.name}", file=sys.stderr)
    groups = {name: [p for s, p in pages if s == name] for name in SETS}
    groups["ALL"] = [p for _, p in pages]
    for name, group in groups.items():
        if not group:
            continue
        row = [f"{name:14s} {len(group):3d} pages"]
        for checkout in (args.old, args.new):
            wall = [statistics.mean(w for w, _ in times[checkout][p]) for p in group]
            cpu = [statistics.mean(c for _, c in times[checkout][p]) for p in group]
            row.append(f"{checkout}: median {statistics.median(wall):.2f} s, total {sum(wall):.1f} s, "
                       f"CPU {sum(cpu):.1f} s")
        print(" | ".join(row))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["set", "page", "old_wall", "new_wall", "old_cpu", "new_cpu"])
            for name, page in pages:
                mean = [statistics.mean(x[j] for x in times[c][page]) for j in (0, 1) for c in (args.old, args.new)]
                out.writerow([name, page.name, *(f"{m:.3f}" for m in (mean[0], mean[1], mean[2], mean[3]))])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
