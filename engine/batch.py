"""Segment many pages: in-process, in worker processes, or on a dask cluster.

Every page is independent: a worker loads it, runs :func:`engine.pipeline.segment` and writes
its six outputs with :func:`engine.export.write_outputs` (atomic, all-or-nothing), then hands
back a small :class:`PageResult`.  The parent only collects results, reports progress and
appends one JSON line per page to the report, so a failing or interrupted page never costs
more than itself and a rerun resumes where the last one stopped.

Worker processes are spawned (not forked) with one BLAS thread each; Ctrl-C stops them at
once and, because outputs are renamed into place only when complete, leaves whole pages only.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .export import OUTPUT_SUFFIXES as _WRITTEN
from .io import IMAGE_SUFFIXES
from .params import Parameters

#: Image suffixes picked up from folders and glob patterns (compared case-insensitively).
#: The files written per page, after the stem.
OUTPUT_SUFFIXES: tuple[str, ...] = tuple(_WRITTEN.values())
#: Default report name inside the output folder.
REPORT_NAME = "tlseg-report.jsonl"
#: Environment that keeps each worker's numeric libraries to one thread: with jobs
#: processes already busy, more threads only oversubscribe the cores.
_THREAD_ENV = {name: "1" for name in (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS")}

#: A segment function: (page, params, progress) -> (prep, snapshot, seg), as in the pipeline.
SegmentFn = Callable[..., tuple[Any, Any, Any]]


@dataclass(frozen=True)
class PageTask:
    """Everything a worker needs for one page (picklable)."""

    path: str
    stem: str
    outdir: str
    params: Parameters
    page_index: int = 0
    #: None = :func:`engine.pipeline.segment`; tests pass a module-level double.
    segment_fn: SegmentFn | None = None
    #: Issue 24: a file of initial lines for this page (engine.initial_io), and whether
    #: to lock every line read from it.
    initial_lines: str | None = None
    lock_initial_lines: bool = False


@dataclass(frozen=True)
class PageResult:
    """What came of one page; ``status`` is ``ok``, ``skipped`` or ``failed``."""

    file: str
    stem: str
    status: str
    error: str | None = None
    lines: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=False)


@dataclass
class BatchSummary:
    """Totals of a batch run, plus every page's result in input order."""

    total: int = 0
    ok: int = 0
    skipped: int = 0
    failed: int = 0
    lines: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    report_path: Path | None = None
    results: list[PageResult] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """130 when interrupted, 1 when any page failed, else 0."""
        if self.interrupted:
            return 130
        return 1 if self.failed else 0

    def format(self) -> str:
        text = (f"{self.ok} ok, {self.skipped} skipped, {self.failed} failed of {self.total} page(s); "
                f"{self.lines} lines in {self.seconds:.1f} s")
        if self.interrupted:
            text += " (interrupted)"
        return text


@dataclass(frozen=True)
class BatchProgress:
    """One progress event: a finished page (``result`` set) or a stage message of the only
    page (``stage`` set).  ``done`` counts finished pages of ``total`` to run (skipped pages
    are not in either); ``elapsed`` is seconds since the run started."""

    done: int
    total: int
    elapsed: float
    result: PageResult | None = None
    stage: str | None = None

    @property
    def rate(self) -> float:
        """Pages per second so far (0 before the first page)."""
        return self.done / self.elapsed if self.done and self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate (None before the first page)."""
        rate = self.rate
        return (self.total - self.done) / rate if rate > 0 else None


ProgressFn = Callable[[BatchProgress], None]


# --- discovery --------------------------------------------------------------------------


def is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


def _images_in(folder: Path, recursive: bool) -> list[Path]:
    found = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(p for p in found if p.is_file() and is_image(p))


def discover_pages(specs: Iterable[str], recursive: bool = False) -> tuple[list[Path], list[str]]:
    """Expand files, folders and glob patterns into a list of pages, in the order given
    (folders and patterns sorted within).  An existing file is taken whatever its suffix;
    folders and patterns keep only images.  A path that does not exist is kept as a page,
    so that it fails with its own error.  Returns the pages (each once) and one warning
    per folder or pattern that yielded no image."""
    pages: list[Path] = []
    warnings: list[str] = []
    for spec in specs:
        path = Path(spec)
        if path.is_dir():
            found = _images_in(path, recursive)
            if not found:
                warnings.append(f"no images in folder {spec}"
                                + ("" if recursive else " (use --recursive for subfolders)"))
            pages.extend(found)
        elif path.exists() or not glob.has_magic(spec):
            pages.append(path)
        else:
            found = []
            for match in sorted(glob.glob(spec, recursive=recursive)):
                m = Path(match)
                if m.is_dir():
                    found.extend(_images_in(m, recursive))
                elif is_image(m):
                    found.append(m)
            if not found:
                warnings.append(f"no images match {spec}")
            pages.extend(found)
    unique: list[Path] = []
    seen: set[str] = set()
    for p in pages:
        key = os.path.normcase(os.path.abspath(p))
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique, warnings


def unique_stems(pages: Sequence[Path]) -> list[str]:
    """One output stem per page: the file's stem, or when two pages share it (compared
    case-insensitively, for case-insensitive file systems) the parent folder names joined
    in front (``a_page``, then ``x_a_page`` ...) until unique; a numeric suffix is the last
    resort.  Depends only on the paths, so reruns find their earlier outputs."""
    parts = [Path(os.path.abspath(p)).parts[:-1] for p in pages]
    stems = [Path(p).stem for p in pages]
    depth = [0] * len(pages)

    def name(i: int) -> str:
        prefix = parts[i][len(parts[i]) - depth[i]:] if depth[i] else ()
        return "_".join([*(s.strip(os.sep) or "root" for s in prefix), stems[i]])

    for _ in range(max((len(p) for p in parts), default=0) + 1):
        groups: dict[str, list[int]] = {}
        for i in range(len(pages)):
            groups.setdefault(name(i).casefold(), []).append(i)
        clashes = [g for g in groups.values() if len(g) > 1]
        if not clashes:
            break
        grew = False
        for group in clashes:
            for i in group:
                if depth[i] < len(parts[i]):
                    depth[i] += 1
                    grew = True
        if not grew:
            break
    result = [name(i) for i in range(len(pages))]
    counts: dict[str, int] = {}
    for i, s in enumerate(result):
        key = s.casefold()
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > 1:
            result[i] = f"{s}_{counts[key]}"
    return result


#: Files of initial lines looked for in an ``--initial-lines`` folder, by page stem, in this
#: order of preference: tlseg's own result, PAGE, ALTO, any XML, label images, ICDAR .dat.
INITIAL_LINES_SUFFIXES = (".json", ".page.xml", ".alto.xml", ".xml", ".labels.png", ".png", ".tif",
                          ".tiff", ".dat")


def initial_lines_for(spec: str | Path, pages: Sequence[Path], stems: Sequence[str]
                      ) -> tuple[list[str | None], list[str]]:
    """Pair ``--initial-lines SPEC`` with the pages: a file goes with the one page (an error
    with several); a folder gives each page the file named after its output stem, else after
    its image's stem, with the first suffix of :data:`INITIAL_LINES_SUFFIXES` found (a
    folder of earlier tlseg outputs pairs with the same pages). Returns the file per page
    (None: none found) and the problems, one line each."""
    spec = Path(spec)
    if spec.is_file():
        if len(pages) != 1:
            return [None] * len(pages), [f"--initial-lines {spec} is one file but there are {len(pages)} "
                                         "pages: give a folder holding a file per page stem"]
        return [str(spec)], []
    if not spec.is_dir():
        return [None] * len(pages), [f"--initial-lines {spec}: no such file or folder"]
    found: list[str | None] = []
    problems = []
    for page, stem in zip(pages, stems, strict=True):
        hit = next((spec / f"{name}{suffix}" for name in dict.fromkeys((stem, Path(page).stem))
                    for suffix in INITIAL_LINES_SUFFIXES if (spec / f"{name}{suffix}").is_file()), None)
        found.append(None if hit is None else str(hit))
        if hit is None:
            problems.append(f"--initial-lines {spec} holds no file for page {page} (looked for "
                            f"{stem}{{{','.join(INITIAL_LINES_SUFFIXES)}}})")
    return found, problems


def output_paths(outdir: str | Path, stem: str) -> list[Path]:
    return [Path(outdir) / f"{stem}{suffix}" for suffix in OUTPUT_SUFFIXES]


def outputs_complete(outdir: str | Path, stem: str) -> bool:
    """Whether all six outputs of ``stem`` (:data:`OUTPUT_SUFFIXES`) exist (then the page is done)."""
    return all(p.is_file() for p in output_paths(outdir, stem))


# --- one page (runs in a worker) ---------------------------------------------------------


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "this page is bad", reported without a traceback."""
    from .params import ParameterError

    errors: list[type[BaseException]] = [ParameterError, OSError, MemoryError]
    try:
        from .io import PageLoadError
        errors.append(PageLoadError)
    except ImportError:
        pass
    from .initial_io import InitialLinesError
    errors.append(InitialLinesError)
    return tuple(errors)


def describe_error(path: str, exc: BaseException) -> str:
    """A one-line message naming the file (once) and the error."""
    if isinstance(exc, OSError) and exc.strerror:
        msg = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    else:
        msg = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, _expected_errors()):
        msg = f"{type(exc).__name__}: {msg}"
    msg = " ".join(msg.split())  # one line
    if path not in msg and Path(path).name not in msg:
        msg = f"{path}: {msg}"
    return msg


def process_page(task: PageTask, progress: Callable[[str], None] | None = None) -> PageResult:
    """Segment one page and write its outputs.  Never raises for a bad page (the error is
    in the result); only KeyboardInterrupt/SystemExit get through."""
    start = time.perf_counter()
    try:
        from . import export, io

        segment_fn = task.segment_fn
        if segment_fn is None:
            from .pipeline import segment as segment_fn
        from .pipeline import preparation_summary as _summary
        say = progress or (lambda _msg: None)
        say("load")
        page = io.load_page(task.path, page_index=task.page_index)
        t_loaded = time.perf_counter()
        marks: dict[str, float] = {}

        def stage(msg: str) -> None:
            # The pipeline announces "labelling" just before stage 8: its time splits EM
            # from finishing without reimplementing segment().
            marks.setdefault(msg, time.perf_counter())
            say(msg)

        if task.initial_lines:
            from functools import partial

            from .initial_io import read_initial_lines
            reader = partial(read_initial_lines, task.initial_lines, lock=task.lock_initial_lines)
            prep, snap, seg = segment_fn(page, task.params, stage, initial_lines=reader)
        else:
            prep, snap, seg = segment_fn(page, task.params, stage)
        t_done = time.perf_counter()
        timings = {k: float(v) for k, v in dict(getattr(prep, "timings", {}) or {}).items()}
        timings["load"] = t_loaded - start
        prepared = sum(v for k, v in timings.items() if k != "load")
        finish_s = t_done - marks["labelling"] if "labelling" in marks else 0.0
        timings["em"] = max(0.0, (t_done - t_loaded) - prepared - finish_s)
        timings["finish"] = finish_s
        timings["total"] = t_done - start
        extra = {
            "source": str(Path(task.path).resolve()),
            "page_index": task.page_index,
            "seed": task.params.seed,
            "preset": task.params.preset_name,
            "parameters": task.params.to_dict(),
            "timings": timings,
            "iterations": int(getattr(snap, "iteration", 0)),
            "converged": bool(getattr(snap, "converged", False)),
            "preparation": _summary(prep),
        }
        started_from = getattr(seg, "initial_lines", None)
        if started_from is not None:  # the lines EM started from: --initial-lines reruns from them
            extra["initial_lines"] = started_from.to_dict()
        if task.initial_lines:
            extra["initial_lines_file"] = {"path": str(Path(task.initial_lines).resolve()),
                                           "locked": task.lock_initial_lines}
        say("writing")
        export.write_outputs(task.outdir, task.stem, prep.gray, seg, Path(task.path).name, extra)
        n_lines = len(seg.lines)
        return PageResult(task.path, task.stem, "ok", None, n_lines, time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - one bad page must never stop the batch
        return PageResult(task.path, task.stem, "failed", describe_error(task.path, exc), 0,
                          time.perf_counter() - start)


class _Terminated(BaseException):
    """Raised in a worker by SIGTERM (the parent stopping the batch) so that write_outputs
    removes its temporary files on the way out."""


_in_page = False


def _on_sigterm(_signum: int, _frame: object) -> None:
    if _in_page:
        raise _Terminated
    os._exit(143)  # idle: nothing to clean up


def _init_worker() -> None:
    """Process-pool worker set-up: one BLAS thread, and leave Ctrl-C to the parent (which
    stops the workers itself) so a terminal interrupt does not print a traceback per worker."""
    os.environ.update(_THREAD_ENV)
    try:  # OpenCV keeps its own thread pool, which the environment does not reach
        import cv2

        cv2.setNumThreads(1)
    except ImportError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)


def _pool_process_page(task: PageTask) -> PageResult:
    """process_page in a pool worker: a SIGTERM mid-page ends the process after cleanup."""
    global _in_page
    _in_page = True
    try:
        return process_page(task)
    except _Terminated:
        os._exit(143)
    finally:
        _in_page = False


# --- the batch ----------------------------------------------------------------------------


class _Reporter:
    """Collects results, appends the JSON-lines report and emits progress events."""

    def __init__(self, report_path: Path | None, total: int, progress: ProgressFn | None) -> None:
        self.report_path = report_path
        self.total = total
        self.progress = progress
        self.start = time.perf_counter()
        self.done = 0
        self._fh = None
        if report_path is not None:
            report_path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(report_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def record(self, result: PageResult, counted: bool = True) -> None:
        if self._fh is not None:
            # Flushed per line so an interrupted run still has a report of what finished.
            self._fh.write(result.to_json() + "\n")
            self._fh.flush()
        if counted:
            self.done += 1
            if self.progress:
                self.progress(BatchProgress(self.done, self.total, self.elapsed(), result=result))

    def stage(self, msg: str) -> None:
        if self.progress:
            self.progress(BatchProgress(self.done, self.total, self.elapsed(), stage=msg))

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def run_batch(pages: Sequence[str | Path], outdir: str | Path, params: Parameters,
              jobs: int | None = None, overwrite: bool = False, dask_address: str | None = None,
              page_index: int = 0, report_path: str | Path | None = None,
              progress: ProgressFn | None = None, segment_fn: SegmentFn | None = None,
              stems: Sequence[str] | None = None, initial_lines: Sequence[str | None] | None = None,
              lock_initial_lines: bool = False) -> BatchSummary:
    """Segment ``pages`` into ``outdir``; see the module docstring.

    ``jobs`` worker processes (default: all cores; 1 = in this process); ``dask_address``
    a scheduler address or ``"local"`` for a local cluster of ``jobs`` processes.  Pages
    whose outputs all exist are skipped unless ``overwrite``.  The report (default
    ``outdir/tlseg-report.jsonl``) gets one JSON object per page.  Ctrl-C cancels what is
    pending, stops the workers and returns with ``interrupted`` set (exit code 130).
    ``initial_lines``: per page, a file of initial lines or None (issue 24; see
    :func:`initial_lines_for`), all locked with ``lock_initial_lines``.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    jobs = max(1, int(jobs or os.cpu_count() or 1))
    paths = [str(p) for p in pages]
    stems = list(stems) if stems is not None else unique_stems([Path(p) for p in paths])
    report = Path(report_path) if report_path is not None else outdir / REPORT_NAME
    summary = BatchSummary(total=len(paths), report_path=report)
    results: dict[int, PageResult] = {}
    todo: list[tuple[int, PageTask]] = []
    for i, (path, stem) in enumerate(zip(paths, stems, strict=True)):
        if not overwrite and outputs_complete(outdir, stem):
            results[i] = PageResult(path, stem, "skipped")
        else:
            todo.append((i, PageTask(path, stem, str(outdir), params, page_index, segment_fn,
                                     None if initial_lines is None else initial_lines[i], lock_initial_lines)))

    reporter = _Reporter(report, len(todo), progress)
    try:
        for i in sorted(results):
            reporter.record(results[i], counted=False)
        if not todo:
            pass  # everything was done already
        elif dask_address:
            summary.interrupted = _run_dask(todo, dask_address, jobs, reporter, results)
        elif jobs == 1 or len(todo) == 1:
            summary.interrupted = _run_serial(todo, reporter, results)
        else:
            summary.interrupted = _run_pool(todo, min(jobs, len(todo)), reporter, results)
    finally:
        reporter.close()

    summary.results = [results[i] for i in sorted(results)]
    for r in summary.results:
        if r.status == "ok":
            summary.ok += 1
            summary.lines += r.lines
        elif r.status == "skipped":
            summary.skipped += 1
        else:
            summary.failed += 1
    summary.seconds = reporter.elapsed()
    return summary


def _run_serial(todo: list[tuple[int, PageTask]], reporter: _Reporter,
                results: dict[int, PageResult]) -> bool:
    # Stage messages only make sense when one page runs at a time and there is one page.
    stage = reporter.stage if len(todo) == 1 else None
    try:
        for i, task in todo:
            results[i] = process_page(task, stage)
            reporter.record(results[i])
    except KeyboardInterrupt:
        return True
    return False


class _ThreadEnv:
    """Sets the one-thread environment while worker processes start (spawned children
    inherit it before importing NumPy, which is when BLAS reads it), then restores it."""

    def __enter__(self) -> None:
        self.saved = {k: os.environ.get(k) for k in _THREAD_ENV}
        os.environ.update(_THREAD_ENV)

    def __exit__(self, *exc: object) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _make_pool(workers: int) -> ProcessPoolExecutor:
    import multiprocessing

    # Not fork: the parent may hold threads (a GUI, dask) and forked BLAS pools can hang.
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel pending pages and stop the workers now instead of waiting for their pages:
    outputs are written atomically, so a killed worker leaves no partial page behind."""
    processes = list(getattr(pool, "_processes", {}).values())  # private, but no public way
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + 3.0  # time to delete temporary files, not to finish pages
    for proc in processes:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()


def _run_pool(todo: list[tuple[int, PageTask]], workers: int, reporter: _Reporter,
              results: dict[int, PageResult]) -> bool:
    """Run pages in a process pool.  A worker that dies (a crash, the OOM killer) breaks the
    whole pool; the pages it took down are rerun one at a time in fresh single-worker pools,
    so only the page that really kills its worker is reported failed."""
    broken: list[tuple[int, PageTask]] = []
    with _ThreadEnv():
        pool = _make_pool(workers)
        try:
            futures: dict[Future, tuple[int, PageTask]] = {pool.submit(_pool_process_page, t): (i, t)
                                                           for i, t in todo}
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    i, task = futures[fut]
                    try:
                        results[i] = fut.result()
                    except BrokenProcessPool:
                        broken.append((i, task))
                        continue
                    except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
                        results[i] = PageResult(task.path, task.stem, "failed",
                                                describe_error(task.path, exc))
                    reporter.record(results[i])
        except KeyboardInterrupt:
            _stop_pool(pool)
            return True
        pool.shutdown(wait=True)
        for i, task in sorted(broken, key=lambda it: it[0]):
            pool = _make_pool(1)
            try:
                results[i] = pool.submit(_pool_process_page, task).result()
            except BrokenProcessPool:
                results[i] = PageResult(task.path, task.stem, "failed",
                                        f"{task.path}: the worker process died (crash or out of memory)")
            except KeyboardInterrupt:
                _stop_pool(pool)
                return True
            pool.shutdown(wait=True)
            reporter.record(results[i])
    return False


def _run_dask(todo: list[tuple[int, PageTask]], address: str, jobs: int, reporter: _Reporter,
              results: dict[int, PageResult]) -> bool:
    """Run pages on a dask.distributed cluster; workers write outputs themselves (a shared
    file system is assumed).  ``address == "local"`` starts a LocalCluster of ``jobs``
    single-threaded processes (dask already gives its workers one BLAS thread)."""
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None
    if address == "local":
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(address)
    futures: dict[Any, tuple[int, PageTask]] = {}
    try:
        for i, task in todo:
            # Workers run elsewhere, with another working directory.
            task = dataclasses.replace(task, path=os.path.abspath(task.path),
                                       outdir=os.path.abspath(task.outdir))
            # pure=False: a rerun with --overwrite must really run again, not hit a cache.
            futures[client.submit(process_page, task, pure=False, key=f"tlseg-{task.stem}-{i}-"
                                  f"{time.time_ns()}")] = (i, task)
        for fut in as_completed(list(futures)):
            i, task = futures[fut]
            try:
                results[i] = fut.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker, a cancelled task
                results[i] = PageResult(task.path, task.stem, "failed", describe_error(task.path, exc))
            reporter.record(results[i])
    except KeyboardInterrupt:
        client.cancel(list(futures))
        return True
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return False
