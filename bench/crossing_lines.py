"""Issue 26: how often two result lines cross, within one region and across regions.

    .venv/bin/python bench/crossing_lines.py [--data DIR] [--sets a,b] [--jobs N] [--set NAME=VALUE]
                                             [--csv OUT.csv]

Two lines cross when their segments over ``c +- 2 sigma_s`` (:meth:`engine.model.LineSet.segments`,
as the window draws them) meet between a tenth and nine tenths of both: an X, not two lines
that touch at their ends. Prints, per set, the pairs within a region and across regions, and
the pages with the most across regions. (A lead of session 59: "no two lines of a region may
cross; drop the worse one" has only what this counts to act on.)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import page_tool, write_rows  # noqa: E402

#: A meeting point within this fraction of either segment's end is two lines touching.
END_MARGIN = 0.1


def crossing_pairs(segments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs ``(i, j)`` (i < j) of the segments ``(L, 2, 2)`` that cross between
    ``END_MARGIN`` and ``1 - END_MARGIN`` of both."""
    p, r = segments[:, 0], segments[:, 1] - segments[:, 0]
    i, j = np.triu_indices(len(segments), k=1)
    den = r[i, 0] * r[j, 1] - r[i, 1] * r[j, 0]
    d = p[j] - p[i]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (d[:, 0] * r[j, 1] - d[:, 1] * r[j, 0]) / den
        u = (d[:, 0] * r[i, 1] - d[:, 1] * r[i, 0]) / den
    lo, hi = END_MARGIN, 1.0 - END_MARGIN
    hit = (np.abs(den) > 1e-9) & (t > lo) & (t < hi) & (u > lo) & (u < hi)
    return i[hit], j[hit]


def run_page(task: tuple[str, str, str, str]) -> dict[str, Any]:
    from engine.params import Parameters
    from engine.pipeline import segment

    name, image, _gt, params_json = task
    _, _, seg = segment(image, Parameters.from_json(params_json))
    lines = seg.lines
    i, j = crossing_pairs(lines.segments()) if len(lines) > 1 else (np.zeros(0, int), np.zeros(0, int))
    across = lines.region[i] != lines.region[j]
    return {"set": name, "page": Path(image).stem, "lines": len(lines),
            "within": int((~across).sum()), "across": int(across.sum())}


def main(argv: list[str] | None = None) -> int:
    done = page_tool("crossing_lines", __doc__, argv, run_page, "write one row per page to this CSV")
    if done is None:
        return 2
    args, sets, pages = done
    print(f"{'set':<16}{'pages':>6}{'lines':>7}{'within':>8}{'across':>8}   most across")
    for name in sets:
        rows = [p for p in pages if p["set"] == name]
        worst = sorted(rows, key=lambda p: -p["across"])[:3]
        print(f"{name:<16}{len(rows):>6}{sum(p['lines'] for p in rows):>7}"
              f"{sum(p['within'] for p in rows):>8}{sum(p['across'] for p in rows):>8}   "
              + ", ".join(f"{p['page']} {p['across']}" for p in worst if p["across"]))
    if args.csv and pages:
        write_rows(args.csv, pages)
        print(f"crossing_lines: wrote {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
