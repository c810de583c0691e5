"""Steering benchmark (issue 24): does the result follow the lines a user gives?

    python bench/steering.py [--data DIR] [--sets poilus-dev,...] [--limit N] [--jobs 1]
                             [--set NAME=VALUE ...] [--out CSV] [--markdown]

On every dev page, one preparation (stages 1-6), then five runs of EM and stage 8 from it:

* (a) ``default``: the prepared lines;
* (b) ``noop``: the prepared lines through the window's edit representation and back: every
  line rotated by +2 deg and -2 deg about its centre (:func:`engine.edits.move_line`), one
  moved 10 px across and back, one line added and deleted again (undo), then
  :func:`engine.edits.restore_unchanged` (what the window sends); must be byte-identical to (a);
* (c) ``gt``: the ground truth's lines as initial lines (:func:`engine.initial_io.read_initial_lines`
  on the page's ground truth: XML baselines moved to the line's centre / polygon axes, or each
  label's axis of a label image), unlocked;
* (d) ``gt_locked``: the same, locked;
* (e) ``drawn``: the ground truth's lines as a user draws them in the window: each line's
  axis (the free read of (c), one straight segment per text line) added with
  :func:`engine.edits.add_line` to an empty set, locked, its sigma_t its neighbours' (a
  guess: no ink measured, ``LineSet.sigma_t_measured`` False), not cut into pieces.

Scores as ``bench/run_bench.py`` (ICDAR FM at T_a 0.95, line IU at 0.75), per set, pooled over
the four Latin/Arabic-main-text sets (poilus-dev, cremma20, kraken-sample, ahte-train) and over
all; lists the pages where (c), (d) or (e) scores below (a). Not timed (five runs per process).
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import sys
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import (  # noqa: E402
    LINE_THRESHOLD,
    T_A,
    add_page_options,
    data_and_params,
    find_sets,
)
from engine.evaluate import _scores  # noqa: E402
from engine.metric import combine, combine_lines  # noqa: E402
from engine.params import Parameters  # noqa: E402

VARIANTS = ("default", "noop", "gt", "gt_locked", "drawn")
#: The sets whose pooled (d) should reach FM 0.90 / line IU 0.95 (moc-train: FM 0.70 alone).
POOLED = ("poilus-dev", "cremma20", "kraken-sample", "ahte-train")


def noop_round_trip(prep: Any) -> Any:
    """The prepared lines after edits that change nothing, as the window sends them."""
    import numpy as np

    from engine import edits

    original = prep.initial_lines
    lines = original

    def rotated(seg: np.ndarray, deg: float) -> np.ndarray:
        t = np.deg2rad(deg)
        rot = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
        centre = seg.mean(axis=0)
        return (seg - centre) @ rot.T + centre

    for i in range(len(lines)):
        lines = edits.move_line(prep, lines, i, rotated(lines.segments()[i], 2.0))
        lines = edits.move_line(prep, lines, i, rotated(lines.segments()[i], -2.0))
    if len(lines):
        k = len(lines) // 2
        seg = lines.segments()[k]
        lines = edits.move_line(prep, lines, k, seg + [0.0, 10.0])
        lines = edits.move_line(prep, lines, k, lines.segments()[k] - [0.0, 10.0])
        lines = edits.add_line(prep, lines, seg + [0.0, prep.stats.h_cc])
        lines = edits.delete_lines(lines, len(lines) - 1)
    return edits.restore_unchanged(original, lines)


def drawn_lines(prep: Any, given: Any) -> Any:
    """The lines ``given`` as a user draws them in the window: each one's segment added to
    an empty set with :func:`engine.edits.add_line`, locked (as the window locks drawn
    lines), in the order EM needs them."""
    from engine import edits
    from engine.model import LineSet

    lines = LineSet.empty(prep.params.regression == "rotation_invariant")
    for segment in given.segments():
        lines = edits.add_line(prep, lines, segment, locked=True)
    return edits.ordered(prep, lines)


def ground_truth(gt: Path, image: Path, shape: tuple[int, int]) -> tuple[Any, Any]:
    """The ground truth's label map and the pixels scored, read once per page exactly as
    :func:`engine.evaluate.evaluate` reads them for a ``.dat`` result (polygons on the
    page's Otsu ink inside them; label images on the page's ink and every labelled pixel)."""
    from engine import groundtruth
    from engine.evaluate import is_polygon_file, page_ink, polygon_truth_on_ink, scored_pixels

    if is_polygon_file(gt):
        truth, ink = polygon_truth_on_ink(gt, image)
        return truth, scored_pixels(truth, ink, True)
    ink = page_ink(image)
    truth = groundtruth.read_label_map(gt, ink.shape)
    return truth, scored_pixels(truth, ink, False)


def run_page(task: tuple[str, str, str, str]) -> dict[str, Any]:
    """Prepare one page, run the five variants, score each; in a fresh process."""
    set_name, image, gt, params_json = task
    row: dict[str, Any] = {"set": set_name, "page": Path(image).stem, "status": "ok", "error": ""}
    try:
        import numpy as np

        from engine import initial_io, pipeline
        from engine.params import Parameters

        params = Parameters.from_json(params_json)
        prep = pipeline.prepare(image, params)
        starts = {"default": prep.initial_lines, "noop": noop_round_trip(prep)}
        gt_lines = initial_io.read_initial_lines(gt, prep)
        starts["gt"] = gt_lines
        starts["gt_locked"] = initial_io.read_initial_lines(gt, prep, lock=True)
        # The file's rows only (the free read also fills rows the file leaves out).
        starts["drawn"] = drawn_lines(prep, gt_lines.take(np.flatnonzero(gt_lines.anchored)))
        row["gt_read"] = len(gt_lines)
        truth, scored = ground_truth(Path(gt), Path(image), prep.shape)
        labels = {}
        for name in VARIANTS:
            run_prep = pipeline.for_lines(prep, starts[name])  # regions led by given lines
            *_, snap = pipeline.run_em(run_prep, starts[name])
            seg = pipeline.finish(run_prep, snap)
            labels[name] = seg.labels
            row[name] = _scores(truth, seg.labels, scored, T_A, LINE_THRESHOLD)
            row[f"{name}_lines"] = len(seg.lines)
            row[f"{name}_iterations"] = int(snap.iteration)
        row["noop_identical"] = bool(np.array_equal(labels["noop"], labels["default"]))
    except Exception as exc:  # a failed page is reported, never stops the benchmark
        row["status"] = "failed"
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc()
    return row


def totals(rows: list[dict[str, Any]]) -> dict[str, tuple[float, float, int]]:
    """Per variant: pooled FM and line IU over ``rows`` (counts summed) and pages scored."""
    out = {}
    ok = [r for r in rows if r["status"] == "ok"]
    for name in VARIANTS:
        contest = combine(r[name][0] for r in ok)
        line = combine_lines(r[name][1] for r in ok)
        out[name] = (contest.fm, line.line_iu, len(ok))
    return out


def format_table(groups: dict[str, list[dict[str, Any]]], markdown: bool) -> str:
    head = ["set", "pages"] + [f"({k}) {v} FM / line IU %" for k, v in zip("abcde", VARIANTS, strict=True)]
    head += ["(b) = (a)", "(c) >= (a)", "(d) >= (a)", "(e) >= (a)"]
    body = []
    for name, rows in groups.items():
        t = totals(rows)
        ok = [r for r in rows if r["status"] == "ok"]
        same = sum(r["noop_identical"] for r in ok)
        c_ok = sum(r["gt"][0].fm >= r["default"][0].fm for r in ok)
        d_ok = sum(r["gt_locked"][0].fm >= r["default"][0].fm for r in ok)
        e_ok = sum(r["drawn"][0].fm >= r["default"][0].fm for r in ok)
        body.append([name, str(len(rows))] + [f"{100 * t[v][0]:.1f} / {100 * t[v][1]:.1f}" for v in VARIANTS]
                    + [f"{same}/{len(ok)}", f"{c_ok}/{len(ok)}", f"{d_ok}/{len(ok)}", f"{e_ok}/{len(ok)}"])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
        return "\n".join(lines + ["| " + " | ".join(b) + " |" for b in body])
    widths = [max(len(head[i]), *(len(b[i]) for b in body)) for i in range(len(head))]
    fmt = lambda row: "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                                for i, (v, w) in enumerate(zip(row, widths, strict=True)))
    return "\n".join([fmt(head), "-" * len(fmt(head))] + [fmt(b) for b in body])


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = ["set", "page", "status", "gt_read", "noop_identical"]
    for v in VARIANTS:
        fields += [f"{v}_FM", f"{v}_line_IU", f"{v}_o2o", f"{v}_lines", f"{v}_iterations"]
    fields += ["N", "error"]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            out = {k: r.get(k, "") for k in fields}
            for v in VARIANTS:
                if v in r:
                    contest, line = r[v]
                    out.update({f"{v}_FM": f"{contest.fm:.4f}", f"{v}_line_IU": f"{line.line_iu:.4f}",
                                f"{v}_o2o": contest.o2o})
                    out["N"] = contest.n
            writer.writerow(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="steering.py", description=__doc__.split("\n")[0])
    add_page_options(ap)
    ap.add_argument("--limit", type=int, default=None, help="at most N pages per set")
    ap.add_argument("--out", type=Path, default=Path("/tmp/steering.csv"))
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    params = data_and_params("steering", args.data, args.params, args.set_)
    if params is None:
        return 2
    sets = find_sets(args.data, [s.strip() for s in args.sets.split(",") if s.strip()] if args.sets else None)
    if args.limit is not None:
        sets = {name: pages[: args.limit] for name, pages in sets.items()}
    rows: list[dict[str, Any]] = []
    tasks = [(name, str(image), str(gt), params.to_json()) for name, pages in sets.items() for image, gt in pages]
    # One fresh process per page, as run_bench.py: nothing is cached from page to page.
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes=max(1, args.jobs), maxtasksperchild=1) as pool:
        for row in pool.imap_unordered(run_page, tasks):
            rows.append(row)
            if row["status"] == "ok":
                scores = " ".join(f"{v}={100 * row[v][0].fm:.1f}" for v in VARIANTS)
                print(f"  {row['set']}/{row['page']}: {scores} same={row['noop_identical']} "
                      f"[{len(rows)}/{len(tasks)}]", file=sys.stderr, flush=True)
            else:
                print(f"  {row['set']}/{row['page']}: FAILED {row['error']} [{len(rows)}/{len(tasks)}]",
                      file=sys.stderr, flush=True)
    order = {(t[0], Path(t[1]).stem): i for i, t in enumerate(tasks)}
    rows.sort(key=lambda r: order[(r["set"], r["page"])])
    write_csv(args.out, rows)
    groups = {name: [r for r in rows if r["set"] == name] for name in sets}
    pooled = [r for r in rows if r["set"] in POOLED]
    if pooled and len(groups) > 1:
        groups["pooled (4 sets)"] = pooled
    groups["ALL"] = rows
    changed = {k: v for k, v in params.to_dict().items() if Parameters().to_dict()[k] != v}
    print(f"FM at T_a = {T_A}, line IU at {LINE_THRESHOLD}; parameters: "
          f"{json.dumps(changed) if changed else 'defaults'}")
    print(format_table(groups, args.markdown))
    below = [r for r in rows if r["status"] == "ok"
             and min(r["gt"][0].fm, r["gt_locked"][0].fm, r["drawn"][0].fm) < r["default"][0].fm]
    print(f"\npages where (c), (d) or (e) is below (a) by FM ({len(below)}):")
    for r in below:
        print(f"  {r['set']}/{r['page']}: (a) {100 * r['default'][0].fm:.1f}  (c) {100 * r['gt'][0].fm:.1f}  "
              f"(d) {100 * r['gt_locked'][0].fm:.1f}  (e) {100 * r['drawn'][0].fm:.1f}  [N={r['default'][0].n}, "
              f"GT lines read {r['gt_read']}, lines a/c/d/e {r['default_lines']}/{r['gt_lines']}/"
              f"{r['gt_locked_lines']}/{r['drawn_lines']}]")
    failed = [r for r in rows if r["status"] != "ok"]
    for r in failed:
        print(f"failed {r['set']}/{r['page']}:\n{r.get('traceback', r['error'])}", file=sys.stderr)
    print(f"steering: wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
