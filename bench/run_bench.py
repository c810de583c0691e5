"""Benchmark: segment every page of the development data sets, score them, time them.

    python bench/run_bench.py [--data DIR] [--sets moc-train,cremma20] [--limit N] [--jobs 1]
                              [--params FILE] [--preset NAME] [--moments FILE] [--set NAME=VALUE ...]
                              [--out CSV] [--markdown]

Every page runs in a fresh (spawned) process, which reports the wall-clock seconds from loading
the page to its ``.dat`` labels written (in a temporary folder) and its peak resident memory
(``ru_maxrss``), then scores the labels with :func:`engine.evaluate.evaluate` (scoring is not
timed; the memory peak is read before it). With ``--jobs 1`` (default) pages run one at a time,
so the timings are not disturbed by one another.

Ground truth per set: ``pixel_label/<stem>.png`` when the set has that folder (moc-train,
ahte-train; images in ``images/``), else the ALTO/PAGE XML next to each image (cremma20,
kraken-sample), scored on the ink inside the polygons (Otsu ink of the page, as ``tlseg evaluate``).

Scores: ICDAR contest metric (N, M, o2o, DR, RA, FM at T_a = 0.95, counts summed over pages) and
the ICDAR 2017 line metric (line IU, pixel IU at threshold 0.75). Writes a CSV (one row per page,
then one TOTAL row per set and overall) and prints a table per set (``--markdown``: also as
Markdown, for ``bench/README.md``).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make the engine importable without installing
    sys.path.insert(0, str(REPO))

from engine.io import IMAGE_SUFFIXES  # noqa: E402
from engine.metric import ContestScore, LineScore, combine, combine_lines  # noqa: E402
from engine.params import PRESETS, ParameterError, Parameters, read_moments  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
T_A = 0.95
LINE_THRESHOLD = 0.75
CSV_FIELDS = ("set", "page", "status", "seconds", "cpu_s", "peak_mb", "N", "M", "o2o", "DR", "RA", "FM",
              "line_IU", "line_F1", "pixel_IU", "correct", "missed", "extra", "lines", "em_iterations",
              "samples", "h_cc", "image", "gt", "error")


@dataclass(frozen=True)
class Task:
    """One page to segment: its set, image, ground truth, parameters (JSON) and scratch folder."""

    set: str
    image: str
    gt: str
    params_json: str
    scratch: str


# ----------------------------------------------------------------------------- data


def find_pages(set_dir: Path) -> list[tuple[Path, Path]]:
    """(image, ground truth) pairs of a set, sorted by image path.

    Sets with a ``pixel_label/`` folder pair ``images/<stem>.*`` with ``pixel_label/<stem>.png``;
    the others pair every image (recursively) with the XML of the same stem next to it."""
    pairs: list[tuple[Path, Path]] = []
    labels = set_dir / "pixel_label"
    if labels.is_dir():
        image_dir = set_dir / "images" if (set_dir / "images").is_dir() else set_dir
        for image in sorted(image_dir.iterdir()):
            gt = labels / f"{image.stem}.png"
            if image.suffix.lower() in IMAGE_SUFFIXES and gt.is_file():
                pairs.append((image, gt))
        return pairs
    for image in sorted(set_dir.rglob("*")):
        if image.suffix.lower() not in IMAGE_SUFFIXES or not image.is_file():
            continue
        gt = image.with_suffix(".xml")
        if gt.is_file():
            pairs.append((image, gt))
    return pairs


def find_sets(data: Path, names: list[str] | None) -> dict[str, list[tuple[Path, Path]]]:
    """Pages of every set (sub-folder) of ``data``, or of the ``names`` asked for."""
    available = sorted(p.name for p in data.iterdir() if p.is_dir())
    if names:
        unknown = [n for n in names if n not in available]
        if unknown:
            raise SystemExit(f"run_bench: unknown set(s) {', '.join(unknown)}; "
                             f"{data} has: {', '.join(available)}")
    sets = {}
    for name in names or available:
        pages = find_pages(data / name)
        if pages:
            sets[name] = pages
    return sets


# ----------------------------------------------------------------------------- one page (child)


def run_page(task: Task) -> dict[str, Any]:
    """Segment, time and score one page; runs in a fresh process (see :func:`main`)."""
    row: dict[str, Any] = {"set": task.set, "page": Path(task.image).stem, "image": task.image,
                           "gt": task.gt, "status": "ok", "error": ""}
    dat = Path(task.scratch) / task.set / f"{Path(task.image).stem}.dat"
    try:
        from engine.evaluate import evaluate
        from engine.export import write_dat
        from engine.pipeline import segment

        params = Parameters.from_json(task.params_json)
        dat.parent.mkdir(parents=True, exist_ok=True)
        t0, c0 = time.perf_counter(), time.process_time()
        prep, snap, seg = segment(task.image, params)
        write_dat(dat, seg.labels)
        row["seconds"] = time.perf_counter() - t0
        # CPU seconds of the page's process: shows when a loaded machine inflated the wall-clock.
        row["cpu_s"] = time.process_time() - c0
        # Linux reports ru_maxrss in KiB (macOS in bytes).
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        row["peak_mb"] = rss / (1024 * 1024 if sys.platform == "darwin" else 1024)
        row.update(lines=int(seg.labels.max(initial=0)), em_iterations=int(snap.iteration),
                   samples=int(len(prep.samples)), h_cc=float(prep.stats.h_cc))
        del prep, snap, seg
        report = evaluate([task.gt], [dat], t_a=T_A, line_threshold=LINE_THRESHOLD,
                          image_dir=Path(task.image).parent)
        if not report.pages:
            reason = "; ".join(r for _, r in report.skipped) or "ground truth not paired"
            raise ValueError(f"not scored: {reason}")
        row["contest"] = report.pages[0].contest
        row["line"] = report.pages[0].line
    except Exception as exc:  # a failed page is reported, never stops the benchmark
        row["status"] = "failed"
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc()
        row.update(_score_empty(task, dat))
    finally:
        dat.unlink(missing_ok=True)
    return row


def _score_empty(task: Task, dat: Path) -> dict[str, Any]:
    """Scores of an empty result (no line found) for a page whose segmentation failed, so that
    a failure counts as every ground-truth line missed; {} when even that cannot be scored."""
    try:
        import numpy as np

        from engine.evaluate import evaluate
        from engine.export import write_dat
        from engine.io import load_page

        write_dat(dat, np.zeros(load_page(task.image).gray.shape, np.int32))
        report = evaluate([task.gt], [dat], t_a=T_A, line_threshold=LINE_THRESHOLD,
                          image_dir=Path(task.image).parent)
        if report.pages:
            return {"contest": report.pages[0].contest, "line": report.pages[0].line}
    except Exception:  # the page already failed; its scores stay unknown
        pass
    return {}


# ----------------------------------------------------------------------------- summaries


def _score_fields(contest: ContestScore, line: LineScore) -> dict[str, Any]:
    return {"N": contest.n, "M": contest.m, "o2o": contest.o2o, "DR": contest.dr, "RA": contest.ra,
            "FM": contest.fm, "line_IU": line.line_iu, "line_F1": line.line_f1, "pixel_IU": line.pixel_iu,
            "correct": line.correct, "missed": line.missed, "extra": line.extra}


def summarise(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of some pages: summed contest/line counts, median and max seconds, max peak memory."""
    ok = [r for r in rows if r["status"] == "ok"]
    scored = [r for r in rows if "contest" in r]  # failed pages count as an empty result
    seconds = [r["seconds"] for r in rows if "seconds" in r]
    peaks = [r["peak_mb"] for r in rows if "peak_mb" in r]
    total: dict[str, Any] = {"set": name, "page": "TOTAL", "pages": len(rows), "failed": len(rows) - len(ok),
                             "status": "ok" if len(ok) == len(rows) else f"{len(rows) - len(ok)} failed",
                             "median_s": statistics.median(seconds) if seconds else float("nan"),
                             "max_s": max(seconds) if seconds else float("nan"),
                             "seconds": sum(seconds),
                             "cpu_s": sum(r["cpu_s"] for r in rows if "cpu_s" in r),
                             "peak_mb": max(peaks) if peaks else float("nan")}
    total.update(_score_fields(combine(r["contest"] for r in scored),
                               combine_lines(r["line"] for r in scored)))
    return total


def format_table(totals: list[dict[str, Any]], markdown: bool = False) -> str:
    """The per-set and overall summary as plain text or as a Markdown table."""
    cols = ("set", "pages", "N", "M", "o2o", "DR %", "RA %", "FM %", "line IU %", "pixel IU %",
            "median s", "max s", "peak MB")
    cells = []
    for t in totals:
        pages = f"{t['pages']}" + (f" ({t['failed']} failed)" if t["failed"] else "")
        cells.append((t["set"], pages, str(t["N"]), str(t["M"]), str(t["o2o"]),
                      f"{100 * t['DR']:.1f}", f"{100 * t['RA']:.1f}", f"{100 * t['FM']:.1f}",
                      f"{100 * t['line_IU']:.1f}", f"{100 * t['pixel_IU']:.1f}",
                      f"{t['median_s']:.1f}", f"{t['max_s']:.1f}", f"{t['peak_mb']:.0f}"))
    if markdown:
        out = ["| " + " | ".join(cols) + " |",
               "|" + "|".join("---" if i == 0 else "---:" for i in range(len(cols))) + "|"]
        out += ["| " + " | ".join(c) + " |" for c in cells]
        return "\n".join(out)
    widths = [max(len(cols[i]), *(len(c[i]) for c in cells)) for i in range(len(cols))]
    fmt = lambda row: "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                                for i, (v, w) in enumerate(zip(row, widths, strict=True)))
    out = [fmt(cols), "-" * len(fmt(cols))]
    for i, c in enumerate(cells):
        if i == len(cells) - 1 and len(cells) > 1:
            out.append("-" * len(fmt(cols)))
        out.append(fmt(c))
    return "\n".join(out)


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` (dicts with the first row's keys) as a CSV file with a header: the margin
    scripts' tables."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_csv(path: Path, rows: list[dict[str, Any]], totals: list[dict[str, Any]]) -> None:
    """One row per page, then the TOTAL rows (per set and ``ALL``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(CSV_FIELDS[:3]) + ["pages", "median_s", "max_s"] + list(CSV_FIELDS[3:])
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            out = dict(r)
            if "contest" in r:
                out.update(_score_fields(r["contest"], r["line"]))
            writer.writerow({k: _fmt(v) for k, v in out.items()})
        for t in totals:
            writer.writerow({k: _fmt(v) for k, v in t.items()})


#: The libraries whose versions go into a run's environment record.
LIBRARIES = ("numpy", "scipy", "scikit-image", "opencv-python-headless", "pillow", "lxml")


def environment() -> dict[str, Any]:
    """What a run's timings and memory depend on besides the code: the commit, Python and the
    libraries' versions, the CPUs and the load (seconds per page moved by half between two
    sessions of the same code, and OpenCV 5 adds 36 MB per process against 4.14)."""
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "modified": None if status is None else bool(status),
            "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "load_average": list(os.getloadavg()),
            "libraries": {name: version(name) for name in LIBRARIES}}


def _fmt(value: Any) -> Any:
    return f"{value:.4f}" if isinstance(value, float) else value


# ----------------------------------------------------------------------------- parameters


def parse_set(items: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` strings -> dict; values are JSON (numbers, true/false, lists) or strings."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ParameterError(f"--set expects NAME=VALUE, got {item!r}")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        if isinstance(parsed, list):
            parsed = tuple(parsed)
        out[name.strip().replace("-", "_")] = parsed
    return out


def add_page_options(ap: argparse.ArgumentParser) -> None:
    """The options of a bench script that runs every page of some sets: ``--data``,
    ``--sets``, ``--jobs``, ``--params``, ``--set`` (read back by :func:`pages_of_sets`)."""
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default=None, help="comma-separated sets (default: all)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--params", help="parameters JSON file")
    ap.add_argument("--set", dest="set_", action="append", default=[], metavar="NAME=VALUE")


def pages_of_sets(prog: str, args: argparse.Namespace, run_page) -> tuple[dict, list] | None:
    """Run ``run_page((set, image, ground truth, parameters JSON))`` on every page of the sets
    :func:`add_page_options` asked for, a fresh process per page (``--jobs`` at once), in
    order; returns the sets (:func:`find_sets`) and the pages' results, or None after saying
    what is wrong with the data folder or the parameters (:func:`data_and_params`)."""
    params = data_and_params(prog, args.data, args.params, args.set_)
    if params is None:
        return None
    sets = find_sets(args.data, args.sets.split(",") if args.sets else None)
    tasks = [(name, str(image), str(gt), params.to_json()) for name, pages in sets.items() for image, gt in pages]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes=max(1, args.jobs), maxtasksperchild=1) as pool:
        return sets, list(pool.imap(run_page, tasks))


def page_tool(prog: str, doc: str, argv: list[str] | None, run_page, csv_help: str
              ) -> tuple[argparse.Namespace, dict, list] | None:
    """A bench script that runs every page of some sets and may write a CSV: its options
    (:func:`add_page_options` and ``--csv``) read from ``argv``, then the pages run
    (:func:`pages_of_sets`); returns the options, the sets and the pages' results, or None
    after saying what is wrong with the data folder or the parameters."""
    ap = argparse.ArgumentParser(prog=f"{prog}.py", description=doc.split("\n\n")[0])
    add_page_options(ap)
    ap.add_argument("--csv", type=Path, default=None, help=csv_help)
    args = ap.parse_args(argv)
    done = pages_of_sets(prog, args, run_page)
    return None if done is None else (args, *done)


def data_and_params(prog: str, data: Path, params_file: str | None, sets: list[str],
                    preset: str | None = None, moments_file: str | None = None) -> Parameters | None:
    """A bench script's start: the data folder must exist, and the parameters
    (:func:`build_params`) must be valid; None after saying which is wrong on stderr."""
    if not data.is_dir():
        print(f"{prog}: no data folder at {data} (the development data are not part of the "
              "repository; pass --data DIR)", file=sys.stderr)
        return None
    try:
        return build_params(params_file, sets, preset, moments_file)
    except ParameterError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None


def build_params(params_file: str | None, sets: list[str], preset: str | None = None,
                 moments_file: str | None = None) -> Parameters:
    """Defaults (or ``--preset NAME``), then ``--params FILE``, then ``--moments FILE``, then
    each ``--set``."""
    params = Parameters.load(params_file) if params_file else Parameters.preset(preset or "default")
    changes = {"moments": read_moments(moments_file)} if moments_file else {}
    changes.update(parse_set(sets))
    return params.replace(**changes) if changes else params


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="run_bench.py", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA,
                    help=f"folder of the data sets (default {DEFAULT_DATA})")
    ap.add_argument("--sets", help="comma-separated sets to run (default: all)")
    ap.add_argument("--limit", type=int, default=None, help="at most N pages per set")
    ap.add_argument("--params", help="parameters JSON file")
    ap.add_argument("--preset", choices=PRESETS, help="start from a preset (e.g. paper: as printed)")
    ap.add_argument("--moments", metavar="FILE",
                    help="pairwise moments from 'tlseg learn-moments --json FILE' (e.g. with --preset paper)")
    ap.add_argument("--set", dest="set_", action="append", default=[], metavar="NAME=VALUE",
                    help="override one parameter (repeatable)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="pages run at once (default 1: honest timings)")
    ap.add_argument("--out", type=Path, default=None,
                    help="CSV file (default bench/results/bench-<date>.csv)")
    ap.add_argument("--markdown", action="store_true", help="also print the summary as Markdown")
    args = ap.parse_args(argv)

    params = data_and_params("run_bench", args.data, args.params, args.set_, args.preset, args.moments)
    if params is None:
        return 2
    sets = find_sets(args.data, [s.strip() for s in args.sets.split(",") if s.strip()] if args.sets else None)
    if not sets:
        print(f"run_bench: no pages found in {args.data}", file=sys.stderr)
        return 2
    if args.limit is not None:
        sets = {name: pages[: args.limit] for name, pages in sets.items()}
    out = args.out or REPO / "bench" / "results" / f"bench-{datetime.date.today().isoformat()}.csv"
    changed = {k: v for k, v in params.to_dict().items() if Parameters().to_dict()[k] != v}
    print(f"run_bench: {sum(map(len, sets.values()))} pages in {', '.join(sets)}; jobs={args.jobs}; "
          f"parameters: {json.dumps(changed) if changed else 'defaults'}", file=sys.stderr)

    env = {"started": environment()}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tlgui-bench-") as scratch:
        tasks = [Task(name, str(image), str(gt), params.to_json(), scratch)
                 for name, pages in sets.items() for image, gt in pages]
        # One fresh process per page: ru_maxrss is that page's peak, and nothing is cached.
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(processes=max(1, args.jobs), maxtasksperchild=1) as pool:
            for row in pool.imap_unordered(run_page, tasks):
                rows.append(row)
                if row["status"] == "ok":
                    c = row["contest"]
                    print(f"  {row['set']}/{row['page']}: {row['seconds']:.1f} s ({row['cpu_s']:.1f} s CPU), "
                          f"{row['peak_mb']:.0f} MB, "
                          f"N={c.n} M={c.m} o2o={c.o2o} FM={100 * c.fm:.1f}%  "
                          f"[{len(rows)}/{len(tasks)}]", file=sys.stderr, flush=True)
                else:
                    print(f"  {row['set']}/{row['page']}: FAILED {row['error']}  [{len(rows)}/{len(tasks)}]",
                          file=sys.stderr, flush=True)
    order = {(t.set, Path(t.image).stem): i for i, t in enumerate(tasks)}
    rows.sort(key=lambda r: order[(r["set"], r["page"])])
    totals = [summarise(name, [r for r in rows if r["set"] == name]) for name in sets]
    totals.append(summarise("ALL", rows))
    write_csv(out, rows, totals)
    env["finished_load_average"] = list(os.getloadavg())
    env_path = out.with_name(out.stem + ".env.json")
    env_path.write_text(json.dumps(env, indent=1) + "\n", encoding="utf-8")
    print(f"contest T_a = {T_A}, line threshold = {LINE_THRESHOLD}; seconds = load to labels written; "
          f"peak MB = max ru_maxrss of a page's process")
    print(format_table(totals))
    if args.markdown:
        print()
        print(format_table(totals, markdown=True))
    failed = [r for r in rows if r["status"] != "ok"]
    for r in failed:
        print(f"failed {r['set']}/{r['page']} (scored as an empty result):\n{r.get('traceback', r['error'])}",
              file=sys.stderr)
    print(f"run_bench: wrote {out} and {env_path.name} (commit, library versions, load)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
