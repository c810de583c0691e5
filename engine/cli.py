"""``tlseg``: the command line of the engine.

    tlseg segment PAGE... -o OUTDIR [options]   segment pages (files, folders, glob patterns)
    tlseg evaluate --gt GT... --pred PRED...    score predictions against ground truth
    tlseg params [--params FILE]                print the full parameter set as JSON
    tlseg learn-moments GT...                   learn the pairwise moments from ground truth

Exit codes: 0 success, 1 some page/file failed, 2 usage or parameter error, 128 + the signal
when interrupted (130 Ctrl-C/SIGINT, 143 SIGTERM, 129 SIGHUP).
Expected errors are one line on stderr naming the file, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import importlib.util
import json
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .params import PAPER, PRESETS, REGRESSION_FORMS, UPDATE_RULES, ParameterError, Parameters, read_moments

PROG = "tlseg"
#: Default time limit of one page, seconds (the dev pages take 1-40 s).
DEFAULT_PAGE_TIMEOUT = 600.0


class UsageError(Exception):
    """A bad command line or parameter: exit code 2."""


def _err(msg: str) -> None:
    print(f"{PROG}: error: {msg}", file=sys.stderr)


def _warn(msg: str) -> None:
    print(f"{PROG}: warning: {msg}", file=sys.stderr)


# --- parameters ----------------------------------------------------------------------------


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` strings -> overrides; VALUE is JSON (``0.1``, ``true``, ``[0.9,0.08,0.02]``)
    or else taken as a plain string (``update_rule=convex``)."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise ParameterError(f"--set expects NAME=VALUE, got {item!r}")
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError:
            out[name] = raw
    return out


def load_params_file(path: str) -> Parameters:
    """``--params FILE``: every error names the file (and the parameter, when one is bad)."""
    try:
        return Parameters.load(path)
    except UnicodeDecodeError:
        raise ParameterError(f"parameters file {path} is not UTF-8 JSON text") from None
    except ParameterError as exc:
        if str(path) in str(exc):
            raise
        raise ParameterError(f"in parameters file {path}: {exc}") from None


def build_params(args: argparse.Namespace) -> Parameters:
    """Parameters from ``--preset NAME`` or ``--params FILE``, then the named options, then ``--set``."""
    preset = getattr(args, "preset", None)
    if preset and getattr(args, "params", None):
        raise UsageError("--preset and --params are exclusive (a parameters file holds every value)")
    if getattr(args, "params", None):
        params = load_params_file(args.params)
    else:
        params = Parameters.preset(preset) if preset else Parameters()
    changes: dict[str, Any] = {}
    for option, name in (("seed", "seed"), ("ratio", "sample_ratio"), ("update_rule", "update_rule"),
                         ("regression", "regression")):
        value = getattr(args, option, None)
        if value is not None:
            changes[name] = value
    if getattr(args, "multi_oriented", False):
        changes["multi_oriented"] = True
    if getattr(args, "moments", None):
        changes["moments"] = read_moments(args.moments)
    changes.update(parse_set(getattr(args, "set", None) or []))
    return params.replace(**changes) if changes else params


# --- progress ----------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressPrinter:
    """Formats batch progress events as lines on stderr."""

    def __init__(self, quiet: bool, single_name: str | None = None) -> None:
        self.quiet = quiet
        self.single_name = single_name

    def __call__(self, event: Any) -> None:
        result = event.result
        if result is not None and result.status == "failed":
            _err(result.error)  # errors show even with --quiet
        if result is not None:
            for text in result.warnings:
                _warn(f"{result.file}: {text}")  # as errors: a result to check
        if self.quiet:
            return
        if event.stage is not None:
            print(f"  {self.single_name or 'page'}: {event.stage} ({event.elapsed:.1f} s)",
                  file=sys.stderr, flush=True)
            return
        if result is None:
            return
        what = f"{result.lines} lines, {result.seconds:.1f} s" if result.ok else "FAILED"
        line = f"[{event.done}/{event.total}] {Path(result.file).name}: {what}"
        if event.total > 1:
            line += f" | {event.rate * 60:.1f} pages/min"
            if event.eta is not None and event.done < event.total:
                line += f", ETA {_duration(event.eta)}"
        print(line, file=sys.stderr, flush=True)


# --- subcommands ---------------------------------------------------------------------------


_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str, option: str) -> int:
    """``2G``, ``1500M``, ``512MiB``, ``4GB`` -> bytes (units of 1024); ValueError otherwise."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if m is None:
        raise UsageError(f"{option} expects a size such as 2G or 1500M, got {text!r}")
    size = int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])
    if size < 64 * 2**20:
        raise UsageError(f"{option} {text} is below 64 MB: too little to segment a page (units: K, M, G)")
    return size


def _timeout(args: argparse.Namespace) -> float | None:
    value = args.page_timeout
    if value is None:
        return DEFAULT_PAGE_TIMEOUT
    if not (value >= 0 and value == value and value != float("inf")):
        raise UsageError(f"--page-timeout must be a number of seconds >= 0 (0 = no limit), got {value}")
    return None if value == 0 else float(value)


def cmd_segment(args: argparse.Namespace) -> int:
    from . import batch

    params = build_params(args)
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"-j/--jobs must be at least 1, got {args.jobs}")
    if args.page < 0:
        raise UsageError(f"--page must be 0 or more, got {args.page}")
    if args.dask is not None:
        try:
            args.dask = batch.check_dask_address(args.dask)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    timeout = _timeout(args)
    max_memory = parse_size(args.max_memory, "--max-memory") if args.max_memory else batch.default_max_memory()
    page_memory = parse_size(args.page_memory, "--page-memory") if args.page_memory else batch.DEFAULT_PAGE_MEMORY
    if page_memory > max_memory:
        if args.page_memory:
            raise UsageError(f"--page-memory {args.page_memory} is more than --max-memory "
                             f"({batch.format_bytes(max_memory)})")
        page_memory = max_memory
    pages, warnings = batch.discover_pages(args.pages, recursive=args.recursive)
    for w in warnings:
        _err(w)
    if not pages:
        raise UsageError("no pages to segment")
    outdir = Path(args.outdir)
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"output folder {outdir} is not a folder")
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output folder {outdir}: {exc.strerror}") from None
    stems = batch.unique_stems(pages, args.page)
    initial_lines = None
    if args.initial_lines is not None:  # issue 24: each page's file of initial lines
        initial_lines, problems = batch.initial_lines_for(args.initial_lines, pages, stems)
        if problems:
            raise UsageError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    elif args.lock_initial_lines:
        raise UsageError("--lock-initial-lines needs --initial-lines FILE")
    checks = batch.plan_pages([str(p) for p in pages], stems, outdir, params, args.page, args.overwrite,
                              initial_lines, args.lock_initial_lines)
    todo = sum(1 for c in checks if not c.done)
    causes: dict[str, int] = {}
    for c in checks:
        if not c.done and c.cause:
            causes[c.cause] = causes.get(c.cause, 0) + 1
    printer = ProgressPrinter(args.quiet, pages[0].name if todo == 1 else None)
    if not args.quiet:
        workers = min(args.jobs or os.cpu_count() or 1, max(todo, 1))
        mode = f"dask {args.dask}" if args.dask else f"{workers} worker(s)"
        redo = f", {batch.format_redone(causes).replace(' redone', ' to redo')}" if causes else ""
        print(f"{PROG}: {len(pages)} page(s), {len(pages) - todo} already done{redo}, {mode}, "
              f"memory {batch.format_bytes(max_memory)} -> {outdir}", file=sys.stderr, flush=True)
        for page, check in zip(pages, checks, strict=True):
            if not check.done and check.reason:
                print(f"{PROG}: redo {page.name}: {check.reason}", file=sys.stderr)
    summary = batch.run_batch(pages, outdir, params, jobs=args.jobs, overwrite=args.overwrite,
                              dask_address=args.dask, page_index=args.page, report_path=args.report,
                              progress=printer, stems=stems, checks=checks, page_timeout=timeout,
                              max_memory=max_memory, page_memory=page_memory, initial_lines=initial_lines,
                              lock_initial_lines=args.lock_initial_lines)
    if summary.stale_files and not args.quiet:
        print(f"{PROG}: removed {summary.stale_files} temporary file(s) "
              f"({batch.format_bytes(summary.stale_bytes)}) left in {outdir} by a killed run",
              file=sys.stderr)
    if summary.report_error:
        _err(summary.report_error)
    if summary.interrupted:
        _err(f"interrupted: {summary.format()}; finished pages are kept, rerun to resume")
        return summary.exit_code
    if not args.quiet or summary.failed:
        print(f"{PROG}: {summary.format()}", file=sys.stderr)
        if summary.failed:
            print(f"{PROG}: failures are listed in {summary.report_path}", file=sys.stderr)
    return 1 if summary.failed or warnings or summary.report_error else 0


def _expand(specs: Sequence[str]) -> list[str]:
    """Glob patterns expanded (sorted) so that quoted patterns work; other specs as given."""
    out: list[str] = []
    for spec in specs:
        if not os.path.exists(spec) and glob.has_magic(spec):
            matches = sorted(glob.glob(spec))
            if not matches:
                raise FileNotFoundError(2, "no files match", spec)
            out.extend(matches)
        else:
            out.append(spec)
    return out


def _warnings_as_lines(caught: Sequence[warnings.WarningMessage]) -> None:
    for w in caught:
        _warn(str(w.message))


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluate import EvaluationError, evaluate

    gt, pred = _expand(args.gt), _expand(args.pred)
    for name, value in (("--ta", args.ta), ("--line-threshold", args.line_threshold)):
        if not 0.0 < value <= 1.0:
            raise UsageError(f"{name} must be in (0, 1], got {value}")
    # The engine warns about unpaired and skipped pages; show them as one-line messages.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            report = evaluate(gt, pred, t_a=args.ta, line_threshold=args.line_threshold,
                              image_dir=args.images)
        except EvaluationError as exc:
            raise UsageError(f"{exc} (--images DIR)") from None
    _warnings_as_lines(caught)
    print(report.format_table())
    if args.csv:
        report.to_csv(args.csv)
        print(f"{PROG}: wrote {args.csv}", file=sys.stderr)
    if not report.pages:
        _err("no page was scored")
        return 1
    return 1 if report.skipped else 0


def format_diff(params: Parameters, other: Parameters) -> str:
    """One line per field that differs: ``name: value -> other's value  # [where the paper
    says it] why the default differs`` (from :data:`engine.params.PAPER`)."""
    rows = []
    for name, mine, theirs in params.diff(other):
        entry = PAPER.get(name)
        note = f"  # [{entry.source}] {entry.why}" if entry else ""
        rows.append(f"{name}: {json.dumps(mine)} -> {json.dumps(theirs)}{note}")
    return "\n".join(rows)


def cmd_params(args: argparse.Namespace) -> int:
    params = build_params(args)
    if args.diff:
        print(format_diff(params, Parameters.preset(args.diff)))
    else:
        print(params.to_json())
    return 0


def cmd_learn_moments(args: argparse.Namespace) -> int:
    try:
        available = importlib.util.find_spec("engine.moments") is not None
    except ImportError:
        available = False
    if not available:
        _err("learn-moments is not available in this version (engine.moments is missing)")
        return 1
    from .moments import learn_moments

    kwargs: dict[str, Any] = {}
    if args.images:
        kwargs["image_dir"] = args.images
    params = build_params(args)
    # The sampling and region settings the moments are counted with (the paper preset's, with
    # --preset paper: its regions are not merged).
    kwargs["params"] = params
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = learn_moments(_expand(args.gt), **kwargs)
    except ValueError as exc:  # MomentsError, GroundTruthError: no usable ground truth
        _err(str(exc))
        return 1
    _warnings_as_lines(caught)
    if not isinstance(result, dict):  # tolerate a bare (mu0, mu1, mu2)
        result = {"moments": [float(m) for m in result]}
    for path, reason in result.get("skipped", []):
        _warn(f"skipped {path}: {reason}")
    result["learnt_with"] = {"preset": params.preset_name,
                             **{k: getattr(params, k) for k in ("sample_ratio", "seed", "region_threshold",
                                                                "min_region_samples")}}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    brief = {k: result[k] for k in ("moments", "counts", "pages", "edges", "learnt_with") if k in result}
    print(json.dumps(brief, indent=2, default=str))
    return 0


# --- parser ----------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so main() owns every exit code."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Handwritten text-line segmentation (Cruz & Ramos Terrades).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def add_param_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--params", metavar="FILE", help="parameters JSON (see 'tlseg params')")
        p.add_argument("--preset", choices=PRESETS,
                       help="start from a preset: 'paper' = every stage as printed (see 'tlseg params --diff paper')")
        p.add_argument("--moments", metavar="FILE",
                       help="pairwise moments from a JSON file ('tlseg learn-moments --json FILE' output, "
                            "or a list of three numbers); e.g. the paper's procedure: --preset paper "
                            "--moments FILE")
        p.add_argument("--set", action="append", metavar="NAME=VALUE", default=[],
                       help="override one parameter; VALUE is JSON or a plain string (repeatable)")

    seg = sub.add_parser("segment", help="segment pages into OUTDIR",
                         description="Segment pages; writes <stem>.dat, .labels.png, .overlay.png, "
                                     ".page.xml, .alto.xml and .json per page into OUTDIR.")
    seg.add_argument("pages", nargs="+", metavar="PAGE", help="image files, folders or glob patterns")
    seg.add_argument("-o", "--outdir", required=True, metavar="OUTDIR", help="output folder")
    add_param_options(seg)
    seg.add_argument("--seed", type=int, help="random seed (same seed, same result)")
    seg.add_argument("--ratio", type=float, help="fraction of ink pixels sampled (sample_ratio)")
    seg.add_argument("--multi-oriented", action="store_true", help="search every text orientation")
    seg.add_argument("--update-rule", choices=UPDATE_RULES)
    seg.add_argument("--regression", choices=REGRESSION_FORMS)
    seg.add_argument("-j", "--jobs", type=int, metavar="N", help="worker processes (default: all cores)")
    seg.add_argument("--recursive", action="store_true", help="look for images in subfolders too")
    seg.add_argument("--overwrite", action="store_true", help="redo pages whose outputs exist")
    seg.add_argument("--page", type=int, default=0, metavar="K", help="page K of multi-page files")
    seg.add_argument("--dask", metavar="ADDRESS", help="dask scheduler address (HOST:PORT, tcp://HOST:PORT), "
                                                       "or 'local'")
    seg.add_argument("--page-timeout", type=float, metavar="SECONDS",
                     help=f"a page running longer fails, saying so (default {DEFAULT_PAGE_TIMEOUT:g}; 0 = none)")
    seg.add_argument("--max-memory", metavar="SIZE",
                     help="memory the pages running at once may use together, e.g. 8G (default: half the RAM)")
    seg.add_argument("--page-memory", metavar="SIZE",
                     help="refuse, before loading, a page estimated to need more (default 2G)")
    seg.add_argument("--report", metavar="FILE", help="JSON-lines report (default OUTDIR/tlseg-report.jsonl)")
    seg.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    seg.add_argument("--initial-lines", metavar="FILE", help="start EM from these lines: tlseg JSON, PAGE/ALTO "
                     "XML (baselines or polygons), a label image or .dat; a folder: one file per page stem")
    seg.add_argument("--lock-initial-lines", action="store_true",
                     help="lock every line read from --initial-lines (EM and stage 8 keep it where it is)")
    seg.set_defaults(func=cmd_segment)

    ev = sub.add_parser("evaluate", help="score predictions against ground truth")
    ev.add_argument("--gt", nargs="+", required=True, metavar="GT", help="ground-truth files")
    ev.add_argument("--pred", nargs="+", required=True, metavar="PRED", help="predicted files")
    ev.add_argument("--images", metavar="DIR", help="folder of the page images")
    ev.add_argument("--ta", type=float, default=0.95, help="match acceptance threshold (default 0.95)")
    ev.add_argument("--line-threshold", type=float, default=0.75, help="line threshold (default 0.75)")
    ev.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    ev.set_defaults(func=cmd_evaluate)

    pa = sub.add_parser("params", help="print the full parameter set as JSON")
    add_param_options(pa)
    pa.add_argument("--diff", choices=PRESETS, metavar="PRESET",
                    help="list the fields that differ from PRESET, each with why the default differs")
    pa.set_defaults(func=cmd_params)

    lm = sub.add_parser("learn-moments", help="learn the pairwise moments from ground truth")
    lm.add_argument("gt", nargs="+", metavar="GT", help="ground-truth files or folders")
    lm.add_argument("--images", metavar="DIR", help="folder of the page images (polygon ground truth)")
    lm.add_argument("--json", metavar="FILE", help="write the full result (per page) as JSON")
    add_param_options(lm)
    lm.set_defaults(func=cmd_learn_moments)
    return parser


def _expected_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError]
    for module, name in (("engine.io", "PageLoadError"), ("engine.groundtruth", "GroundTruthError")):
        try:
            errors.append(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):
            pass
    return tuple(errors)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see the module docstring)."""
    parser = build_parser()
    for stream in (sys.stdout, sys.stderr):
        # File names that are not UTF-8 on disk must print, not raise UnicodeEncodeError.
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")
    try:
        args = parser.parse_args(argv)
        return int(args.func(args))
    except UsageError as exc:
        _err(str(exc))
        return 2
    except ParameterError as exc:
        _err(f"bad parameter: {exc}")
        return 2
    except KeyboardInterrupt as exc:
        _err("interrupted")
        return 128 + int(getattr(exc, "signum", 2))
    except Exception as exc:
        from .batch import SchedulerError

        if isinstance(exc, SchedulerError):
            _err(str(exc))
            return 1
        if not isinstance(exc, _expected_errors()):
            raise
        from .batch import describe_error

        _err(describe_error(getattr(exc, "filename", None) or "", exc).lstrip(": "))
        return 1


if __name__ == "__main__":
    sys.exit(main())
