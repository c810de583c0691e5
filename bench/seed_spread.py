"""How much the draw of the ink samples moves the benchmark: several ``run_bench.py`` CSVs of
the same code, one per ``seed``, side by side.

    .venv/bin/python bench/run_bench.py --jobs 2 --set seed=1 --out bench/results/X-seed1.csv
    .venv/bin/python bench/seed_spread.py X-seed0.csv X-seed1.csv X-seed2.csv [--pages 10] [--markdown]

Prints, per set, FM / line IU % of each CSV, their mean and range (max - min), then the
pages whose correct lines (line IU's matches at 0.75) vary most between the CSVs. A change
judged on one seed is judged against this spread (docs/history.md). Every CSV must hold the
same pages; a page that failed in any CSV is named and left out of the page list.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path


def read_run(path: Path) -> tuple[dict[str, dict[str, str]], dict[tuple[str, str], dict[str, str]]]:
    """A run_bench CSV: its TOTAL rows by set (``ALL`` included) and its page rows by
    ``(set, page)``."""
    totals: dict[str, dict[str, str]] = {}
    pages: dict[tuple[str, str], dict[str, str]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["page"] == "TOTAL":
                totals[row["set"]] = row
            else:
                pages[(row["set"], row["page"])] = row
    if not totals:
        raise ValueError(f"{path}: no TOTAL rows (not a run_bench.py CSV?)")
    return totals, pages


def set_spread(runs: list[dict[str, dict[str, str]]]) -> list[dict[str, object]]:
    """Per set (in the first run's order): each run's FM and line IU (percent), their means
    and ranges."""
    out = []
    for name in runs[0]:
        if any(name not in r for r in runs):
            raise ValueError(f"set {name!r} is not in every CSV")
        fm = [100.0 * float(r[name]["FM"]) for r in runs]
        iu = [100.0 * float(r[name]["line_IU"]) for r in runs]
        out.append({"set": name, "fm": fm, "iu": iu,
                    "fm_mean": statistics.fmean(fm), "iu_mean": statistics.fmean(iu),
                    "fm_range": max(fm) - min(fm), "iu_range": max(iu) - min(iu)})
    return out


def page_spread(runs: list[dict[tuple[str, str], dict[str, str]]]
                ) -> tuple[list[tuple[str, str, list[int]]], list[str]]:
    """Pages ordered by how much their correct-line count varies between runs (largest
    range first): ``(set, page, counts)``; and the pages left out (missing or failed in a run)."""
    keys = list(runs[0])
    out, left_out = [], []
    for key in keys:
        rows = [r.get(key) for r in runs]
        if any(row is None or row["status"] != "ok" for row in rows):
            left_out.append(f"{key[0]}/{key[1]}")
            continue
        out.append((key[0], key[1], [int(row["correct"]) for row in rows]))  # type: ignore[index]
    out.sort(key=lambda t: (-(max(t[2]) - min(t[2])), t[0], t[1]))
    return out, left_out


def format_sets(spread: list[dict[str, object]], labels: list[str], markdown: bool) -> str:
    head = ["set"] + [f"{lab} FM / line IU %" for lab in labels] + ["mean", "range"]
    rows = [[str(s["set"])]
            + [f"{f:.1f} / {i:.1f}" for f, i in zip(s["fm"], s["iu"], strict=True)]  # type: ignore[arg-type]
            + [f"{s['fm_mean']:.1f} / {s['iu_mean']:.1f}", f"{s['fm_range']:.1f} / {s['iu_range']:.1f}"]
            for s in spread]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(head[k]), *(len(r[k]) for r in rows)) for k in range(len(head))]
    cells = (zip(r, widths, strict=True) for r in [head] + rows)
    return "\n".join("  ".join(v.ljust(w) if k == 0 else v.rjust(w) for k, (v, w) in enumerate(row)) for row in cells)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="seed_spread.py", description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+", type=Path, help="run_bench.py CSVs of the same code, one per seed")
    ap.add_argument("--pages", type=int, default=10, help="list this many most variable pages (default 10)")
    ap.add_argument("--markdown", action="store_true", help="the set table as Markdown")
    args = ap.parse_args(argv)
    if len(args.csv) < 2:
        print("seed_spread: give at least two CSVs", file=sys.stderr)
        return 2
    try:
        runs = [read_run(p) for p in args.csv]
        spread = set_spread([t for t, _ in runs])
    except (OSError, KeyError, ValueError) as exc:
        print(f"seed_spread: {exc}", file=sys.stderr)
        return 2
    print(format_sets(spread, [p.stem for p in args.csv], args.markdown))
    pages, left_out = page_spread([p for _, p in runs])
    print()
    print(f"pages whose correct lines vary most ({', '.join(p.stem for p in args.csv)}):")
    for name, page, counts in pages[: args.pages]:
        if max(counts) == min(counts):
            break
        print(f"  {name}/{page}: {' / '.join(map(str, counts))}")
    if left_out:
        print(f"left out (missing or failed in a CSV): {', '.join(left_out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
