"""What EM adds: stage 8 run on EM's first, second and last snapshot of every page, scored.

    .venv/bin/python bench/em_gain.py [--data DIR] [--sets a,b] [--jobs N] [--set NAME=VALUE]
                                      [--csv OUT.csv]

Snapshot 0 holds the initial lines with each sample's posterior from the unary alone (no
message passing, no M-step); snapshot 1 is after EM's first iteration; the last is the one
the pipeline labels. The same stage 8 (surplus lines, merges, final labels) turns each into
a result, scored as ``bench/run_bench.py`` scores a page (line threshold 0.75): correct
lines, result lines, line IU per set. Where the last column barely moves from the first,
the result is the initial lines' and stage 8's, and better lines must come from there.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import LINE_THRESHOLD, page_tool  # noqa: E402
from bench.steering import ground_truth  # noqa: E402
from engine.metric import combine_lines  # noqa: E402

#: The snapshots scored, by name: EM's start, after one iteration, and its end.
STAGES = ("start", "first", "last")


def score_snapshots(image: str, gt: str, params_json: str) -> dict[str, Any]:
    """One page: its :class:`engine.metric.LineScore` at each of :data:`STAGES`, and the
    number of EM iterations under ``"iterations"``."""
    from engine.metric import line_metric
    from engine.params import Parameters
    from engine.pipeline import finish, prepare, run_em

    params = Parameters.from_json(params_json)
    prep = prepare(image, params)
    snaps = list(run_em(prep))
    truth, scored = ground_truth(Path(gt), Path(image), None)
    out: dict[str, Any] = {"iterations": len(snaps) - 1}
    for stage, snap in zip(STAGES, (snaps[0], snaps[min(1, len(snaps) - 1)], snaps[-1]), strict=True):
        out[stage] = line_metric(truth, finish(prep, snap).labels, scored, LINE_THRESHOLD)
    return out


def run_page(task: tuple[str, str, str, str]) -> dict[str, Any]:
    """A worker's page: the set's name, the page's stem and :func:`score_snapshots`."""
    name, image, gt, params_json = task
    return {"set": name, "page": Path(image).stem, **score_snapshots(image, gt, params_json)}


def main(argv: list[str] | None = None) -> int:
    if (done := page_tool("em_gain", __doc__, argv, run_page, "one row per page")) is None:
        return 2
    args, sets, pages = done
    print("set            GT  " + "  ".join(f"{s:>22}" for s in STAGES) + "   (correct / lines, line IU %)")
    for name in sets:
        mine = [p for p in pages if p["set"] == name]
        totals = [combine_lines(p[s] for p in mine) for s in STAGES]
        cells = [f"{t.correct:>5} / {t.n_pred:>5}  {100 * t.line_iu:5.1f}" for t in totals]
        print(f"{name:<14} {totals[0].n_gt:>4}  " + "  ".join(f"{c:>22}" for c in cells))
    if args.csv is not None and pages:
        with args.csv.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["set", "page", "gt", "iterations"]
                            + [f"{s}_{k}" for s in STAGES for k in ("correct", "lines")])
            for p in pages:
                writer.writerow([p["set"], p["page"], p["last"].n_gt, p["iterations"]]
                                + [v for s in STAGES for v in (p[s].correct, p[s].n_pred)])
        print(f"em_gain: wrote {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
