"""Walk from the paper as printed to the default, one group of switches per step, on every page.

Each step runs ``run_bench.py --preset paper`` with the switches of every step so far turned to
the default's value, writes ``STEP.csv`` into ``--out``, and the walk's table is printed at the
end (also with ``--table`` alone, from CSVs already written)::

    python bench/paper_walk.py --out bench/results/paper-walk --jobs 2
    python bench/paper_walk.py --out bench/results/paper-walk --table

The order: first the approximations that make a run affordable (stopping rule, label windows),
which leave the printed update rule's collapse as it is; then the update rule that makes the
method work at all; then the model, the initialisation, the labelling and the front end. The
last step's switches are every field in which the default differs from ``paper``: the script
checks this, so a new switch cannot be left out of the walk.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.params import Parameters  # noqa: E402

#: (step name, fields turned to the default's value at this step), cumulative.
STEPS: list[tuple[str, tuple[str, ...]]] = [
    ("paper (as printed)", ()),
    ("+ stopping: 15 iterations, K = 1e-3, label_tolerance, 10 warm-started sweeps",
     ("max_em_iterations", "kl_tolerance", "label_tolerance", "mp_max_sweeps", "mp_warm_start")),
    ("+ speed: label_window 5, theta_edge_sample 40k, candidate_nats 30",
     ("label_window", "theta_edge_sample", "candidate_nats")),
    ("+ update_rule = bethe (damped BP)", ("update_rule",)),
    ("+ moments from the dev ground truth", ("moments",)),
    ("+ unary_form = plateau", ("unary_form",)),
    ("+ prior_in_unary, prior_scope = region", ("prior_in_unary", "prior_scope")),
    ("+ theta_l log-ratio step, line_prior_clip, theta_limit",
     ("line_prior_rule", "line_prior_clip", "theta_limit")),
    ("+ regression = rotation_invariant, sigma floors", ("regression", "sigma_t_floor", "sigma_s_floor")),
    ("+ initial lines: orientation_score, steep_regions, overlap_valleys, pitch_line_height, "
     "weak_line_level, filter sizes",
     ("orientation_score", "steep_regions", "overlap_valleys", "pitch_line_height", "weak_line_level",
      "filter_size_across", "filter_size_along")),
    ("+ min_region_samples, remove_diacritic_lines, remove_ownerless_lines, merge_initial_lines",
     ("min_region_samples", "remove_diacritic_lines", "remove_ownerless_lines", "merge_initial_lines")),
    ("+ blocks: linked_neighbours, block_boundaries", ("linked_neighbours", "block_boundaries")),
    ("+ rows: row_join, row_merge, page_moments", ("row_join", "row_merge", "page_moments")),
    ("+ final_labelling = profile, follow_local_rows", ("final_labelling", "follow_local_rows")),
    ("+ front end: page_area, strip_strokes, label_non_text (= default)",
     ("page_area", "strip_strokes", "label_non_text", "colour_non_text")),
]


def step_overrides(k: int) -> list[str]:
    """``--set NAME=VALUE`` arguments of step ``k``: every field of steps 1..k at the default's value."""
    default = Parameters().to_dict()
    args: list[str] = []
    for _name, fields in STEPS[1:k + 1]:
        for field in fields:
            value = default[field]
            text = "[" + ",".join(repr(v) for v in value) + "]" if isinstance(value, (list, tuple)) else value
            args += ["--set", f"{field}={str(text).lower() if isinstance(value, bool) else text}"]
    return args


def check_covers_every_switch() -> None:
    """The walk must end at the default: every field that differs from ``paper`` is in a step."""
    walked = {f for _n, fields in STEPS for f in fields}
    missing = [name for name, _d, _p in Parameters().diff(Parameters.preset("paper")) if name not in walked]
    if missing:
        raise SystemExit(f"paper_walk: switches not in any step: {missing}")


def totals(path: Path) -> dict[str, dict[str, str]]:
    """The TOTAL rows of one run_bench CSV, by set."""
    with path.open(newline="") as f:
        return {row["set"]: row for row in csv.DictReader(f) if row["page"] == "TOTAL"}


def table(out: Path) -> str:
    """The walk as a Markdown table: FM / line IU % per set and pooled, result lines, seconds."""
    rows = []
    sets: list[str] = []
    for k, (name, _fields) in enumerate(STEPS):
        path = out / f"step{k:02d}.csv"
        if not path.exists():
            continue
        tot = totals(path)
        sets = sets or [s for s in tot if s != "ALL"]
        cells = [f"{100 * float(tot[s]['FM']):.1f} / {100 * float(tot[s]['line_IU']):.1f}" for s in sets + ["ALL"]]
        every = tot["ALL"]
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {every['M']} | {float(every['median_s']):.1f} |")
    head = "| step (cumulative, from `paper`) | " + " | ".join(sets) + " | all | result lines | median s |"
    rule = "|---" * (len(sets) + 4) + "|"
    return "\n".join([head, rule, *rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the steps' CSVs")
    ap.add_argument("--data", default="/work/shared/data")
    ap.add_argument("--sets", default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--steps", default=None, help="comma-separated step numbers (default: all)")
    ap.add_argument("--table", action="store_true", help="only print the table of the CSVs in --out")
    args = ap.parse_args(argv)
    check_covers_every_switch()
    if not args.table:
        args.out.mkdir(parents=True, exist_ok=True)
        wanted = range(len(STEPS)) if args.steps is None else [int(s) for s in args.steps.split(",")]
        for k in wanted:
            cmd = [sys.executable, str(HERE / "run_bench.py"), "--data", args.data, "--preset", "paper",
                   "--jobs", str(args.jobs), "--out", str(args.out / f"step{k:02d}.csv"), *step_overrides(k)]
            if args.sets:
                cmd += ["--sets", args.sets]
            print(f"step {k}: {STEPS[k][0]}", flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    print(table(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
