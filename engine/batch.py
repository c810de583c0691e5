"""Segment many pages: in-process, in worker processes, or on a dask cluster.

Every page is independent: a worker loads it, runs :func:`engine.pipeline.segment` and writes
its six outputs with :func:`engine.export.write_outputs` (atomic, all-or-nothing), then hands
back a small :class:`PageResult`.  The parent only collects results, reports progress and
appends one JSON line per page to the report, so a failing or interrupted page never costs
more than itself and a rerun resumes where the last one stopped.

Worker processes are spawned (not forked) with one BLAS thread each; Ctrl-C, SIGTERM or
SIGHUP stop them at once and, because outputs are renamed into place only when complete,
leave whole pages only; a worker also ends when its parent dies.  A rerun skips a page only
when its outputs are this page's, made the same way, and whole (:func:`check_outputs`); pages
run at once only as far as their estimated peaks fit the memory budget, and each within its
time limit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import math
import os
import re
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .export import OUTPUT_SUFFIXES as _WRITTEN
from .io import IMAGE_SUFFIXES, MULTI_PAGE_SUFFIXES, read_header
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
    #: Seconds the page may run (None = no limit): then it fails with the reason.
    timeout: float | None = None
    #: Why the page runs again although it has outputs (ResumeCheck.reason), for the report.
    redone: str | None = None
    #: Issue 24: a file of initial lines for this page (engine.initial_io), and whether
    #: to lock every line read from it.
    initial_lines: str | None = None
    lock_initial_lines: bool = False


@dataclass(frozen=True)
class PageResult:
    """What came of one page; ``status`` is ``ok``, ``skipped`` or ``failed``.  ``redone``:
    why a page with outputs ran again (they were not this page's, made otherwise, or damaged);
    ``warnings``: what makes a result doubtful although it was written (not a page of text?)."""

    file: str
    stem: str
    status: str
    error: str | None = None
    lines: int = 0
    seconds: float = 0.0
    redone: str | None = None
    warnings: tuple[str, ...] = ()

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
    #: The signal that interrupted the run (SIGINT for Ctrl-C, SIGTERM, SIGHUP).
    signal: int | None = None
    report_path: Path | None = None
    results: list[PageResult] = field(default_factory=list)
    #: Pages whose outputs existed but were redone, by cause (ResumeCheck.cause).
    redone: dict[str, int] = field(default_factory=dict)
    #: Temporary files of killed runs removed from the output folder, and their bytes.
    stale_files: int = 0
    stale_bytes: int = 0
    #: Pages with warnings (their results were written).
    warned: int = 0
    #: The first error writing the report (the batch went on without it).
    report_error: str | None = None

    @property
    def exit_code(self) -> int:
        """128 + the signal when interrupted (130 Ctrl-C, 143 SIGTERM), 1 when any page
        failed, else 0."""
        if self.interrupted:
            return 128 + int(self.signal or signal.SIGINT)
        return 1 if self.failed else 0

    def format(self) -> str:
        text = (f"{self.ok} ok, {self.skipped} skipped, {self.failed} failed of {self.total} page(s); "
                f"{self.lines} lines in {self.seconds:.1f} s")
        if self.redone:
            text += f"; {format_redone(self.redone)}"
        if self.warned:
            text += f"; {self.warned} with warnings"
        if self.interrupted:
            name = signal.Signals(self.signal).name if self.signal else "SIGINT"
            text += f" (interrupted by {name})"
        return text


def format_redone(causes: dict[str, int]) -> str:
    """``3 redone (2 parameters, 1 damaged)``."""
    total = sum(causes.values())
    detail = ", ".join(f"{n} {cause}" for cause, n in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{total} redone ({detail})"


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
    folders and patterns keep only images (:data:`engine.io.IMAGE_SUFFIXES`, any case).  A
    path that does not exist is kept as a page, so that it fails with its own error.  Returns
    the pages (each once) and one warning per folder or pattern that yielded no image."""
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


def page_count(path: str | Path) -> int:
    """Pages in an image file (frames of a TIFF, GIF, WebP); 1 when it has one or cannot be read."""
    if Path(path).suffix.lower() not in MULTI_PAGE_SUFFIXES:
        return 1
    try:
        return read_header(path).frames
    except Exception:  # noqa: BLE001 - an unreadable file fails later with its own message
        return 1


def _suffix_rank(path: Path) -> tuple[int, int, str]:
    """Which of several files of one stem in one folder keeps the plain stem: the usual page
    format first (IMAGE_SUFFIXES' order), a lower-case suffix before the same in capitals."""
    suffix = path.suffix
    low = suffix.lower()
    order = IMAGE_SUFFIXES.index(low) if low in IMAGE_SUFFIXES else len(IMAGE_SUFFIXES)
    return (order, 0 if suffix == low else 1, path.name)


def unique_stems(pages: Sequence[Path], page_index: int = 0,
                 page_counts: Sequence[int] | None = None) -> list[str]:
    """One output stem per page, distinct even on a case-insensitive file system:

    1. the file's stem, plus ``_p<K>`` (K = ``page_index``) when the file holds several pages;
    2. pages of the same stem (compared case-insensitively) in different folders get the
       names of their parent folders in front, as few as tell the folders apart
       (``a/p.png`` -> ``a_p``, ``b/p.png`` -> ``b_p``);
    3. files of the same stem in one folder (``one.png``, ``one.jpg``, ``ONE.PNG``): the one
       with the usual format keeps the stem (``one``: the order of ``IMAGE_SUFFIXES``, lower
       case first), each other gets its suffix (``one_jpg``, ``ONE_PNG``);
    4. a numeric suffix (``_2``, ``_3`` in input order) if names still clash.

    Depends only on the paths (and page counts), so reruns find their earlier outputs.
    ``page_counts`` (pages per file) is read from the files' headers when not given."""
    paths = [Path(p) for p in pages]
    counts = list(page_counts) if page_counts is not None else [page_count(p) for p in paths]
    base = [p.stem + (f"_p{page_index}" if n > 1 else "") for p, n in zip(paths, counts, strict=True)]
    folders = [Path(os.path.abspath(p)).parent for p in paths]
    names = list(base)
    groups: dict[str, list[int]] = {}
    for i, b in enumerate(base):
        groups.setdefault(b.casefold(), []).append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        by_folder: dict[Path, list[int]] = {}
        for i in members:
            by_folder.setdefault(folders[i], []).append(i)
        prefixes = _folder_prefixes(list(by_folder)) if len(by_folder) > 1 else {f: "" for f in by_folder}
        for folder, same in by_folder.items():
            keeper = min(same, key=lambda i: _suffix_rank(paths[i]))
            for i in same:
                name = prefixes[folder] + base[i]
                if i != keeper:
                    name += "_" + paths[i].suffix.lstrip(".")
                names[i] = name
    counts_seen: dict[str, int] = {}
    taken = {n.casefold() for n in names}
    result = []
    for name in names:
        key = name.casefold()
        counts_seen[key] = counts_seen.get(key, 0) + 1
        if counts_seen[key] > 1:
            k = counts_seen[key]
            while f"{name}_{k}".casefold() in taken:
                k += 1
            name = f"{name}_{k}"
            taken.add(name.casefold())
        result.append(name)
    return result


def _folder_prefixes(folders: list[Path]) -> dict[Path, str]:
    """For distinct folders: the fewest trailing folder names, joined by ``_`` with one at the
    end, that tell each from the others (``/d/x/a`` and ``/d/y/a`` -> ``x_a_``, ``y_a_``)."""
    parts = {f: f.parts for f in folders}
    depth = dict.fromkeys(folders, 1)

    def name(f: Path) -> str:
        tail = parts[f][max(0, len(parts[f]) - depth[f]):]
        return "_".join(s.strip(os.sep) or "root" for s in tail)

    for _ in range(max(len(p) for p in parts.values()) + 1):
        groups: dict[str, list[Path]] = {}
        for f in folders:
            groups.setdefault(name(f).casefold(), []).append(f)
        clashes = [g for g in groups.values() if len(g) > 1]
        if not clashes:
            break
        for group in clashes:
            for f in group:
                depth[f] = min(depth[f] + 1, len(parts[f]))
    return {f: name(f) + "_" for f in folders}


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
    """Whether all six outputs of ``stem`` (:data:`OUTPUT_SUFFIXES`) exist (whether they are
    this page's and whole is :func:`check_outputs`' question)."""
    return all(p.is_file() for p in output_paths(outdir, stem))


# --- resume: are a page's outputs this page's, made the same way, and whole? ------------


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"


@dataclass(frozen=True)
class ResumeCheck:
    """Whether a page's outputs can be kept (``done``), and if not, why (``reason``, None for
    a page with no outputs at all) and the kind of reason (``cause``: ``incomplete``,
    ``damaged``, ``no record``, ``tool``, ``source``, ``page``, ``parameters``)."""

    done: bool
    reason: str | None = None
    cause: str | None = None


def _png_whole(path: Path, shape: tuple[int, int] | None) -> bool:
    """A PNG's signature, its IHDR size (when ``shape`` is given) and its closing IEND chunk."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
            fh.seek(-12, os.SEEK_END)
            tail = fh.read(12)
    except OSError:
        return False
    if head[:8] != _PNG_SIGNATURE or head[12:16] != b"IHDR" or tail != _PNG_END:
        return False
    if shape is not None:
        w, h = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        return (h, w) == tuple(shape)
    return True


def _changed_parameters(recorded: Any, params: Parameters) -> list[str]:
    if not isinstance(recorded, dict):
        return []
    now = json.loads(json.dumps(params.to_dict()))
    return sorted(k for k in set(now) | set(recorded) if now.get(k) != recorded.get(k))


def check_outputs(outdir: str | Path, stem: str, source: str | Path, params: Parameters,
                  page_index: int = 0, initial_lines: str | None = None,
                  lock_initial_lines: bool = False) -> ResumeCheck:
    """Whether the outputs of ``stem`` in ``outdir`` can stand for page ``page_index`` of
    ``source`` segmented with ``params``: all six present; the JSON readable, with the record
    :func:`engine.export.output_record` writes; made by this tool version, from a source of
    the same size and bytes (size and mtime, else SHA-256), of the same page, with the same
    parameters, from the same ``--initial-lines`` file (same bytes, same lock) or none; each
    output of its recorded size, the PNGs whole (signature, size, end
    chunk), the XML files of their recorded SHA-256.  No file is read in full except the
    XML outputs (and the source, when its mtime changed)."""
    from . import export

    files = dict(zip(_WRITTEN, output_paths(outdir, stem), strict=True))
    present = {k: p.is_file() for k, p in files.items()}
    if not any(present.values()):
        return ResumeCheck(False)
    if not all(present.values()):
        missing = ", ".join(files[k].name for k, ok in present.items() if not ok)
        return ResumeCheck(False, f"outputs incomplete ({missing} missing)", "incomplete")
    try:
        meta = json.loads(files["json"].read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return ResumeCheck(False, f"{files['json'].name} damaged (not readable JSON)", "damaged")
    record = meta.get("record") if isinstance(meta, dict) else None
    if not isinstance(record, dict):
        return ResumeCheck(False, "no record of what made the outputs (an older tlseg)", "no record")
    if record.get("tool") != export.tool_version():
        return ResumeCheck(False, f"made by {record.get('tool')}, not {export.tool_version()}", "tool")
    if int(record.get("page_index") or 0) != int(page_index):
        return ResumeCheck(False, f"outputs of page {record.get('page_index')}, not page {page_index}", "page")
    if record.get("parameters") != export.parameters_fingerprint(params.to_dict()):
        names = _changed_parameters(meta.get("parameters"), params)
        before = record.get("preset")
        if before != params.preset_name and "preset_name" in names:
            shown = f"preset {before} -> {params.preset_name}; {len(names) - 1} values"
        else:
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return ResumeCheck(False, "parameters changed" + (f" ({shown})" if names else ""), "parameters")
    reason = _source_changed(record.get("source"), source)
    if reason:
        return ResumeCheck(False, reason, "source")
    wanted = None if not initial_lines else export.initial_lines_identity(
        {"initial_lines_file": {"path": initial_lines, "locked": lock_initial_lines}})
    if record.get("initial_lines") != wanted:
        shown = "none" if wanted is None else f"{Path(initial_lines).name}" + (" locked" if lock_initial_lines else "")
        return ResumeCheck(False, f"initial lines changed (now: {shown})", "initial lines")
    outputs = record.get("outputs") or {}
    shape = meta.get("shape")
    shape = (int(shape[0]), int(shape[1])) if isinstance(shape, list) and len(shape) == 2 else None
    for kind, path in files.items():
        if kind == "json":
            continue
        entry = outputs.get(kind)
        if not isinstance(entry, dict):
            return ResumeCheck(False, f"{path.name} not in the record", "damaged")
        size = path.stat().st_size
        if size != entry.get("size"):
            return ResumeCheck(False, f"{path.name} damaged ({size} bytes, {entry.get('size')} written)",
                               "damaged")
        if kind == "dat" and shape is not None and size != 4 * shape[0] * shape[1]:
            return ResumeCheck(False, f"{path.name} damaged (not {shape[1]} x {shape[0]} labels)", "damaged")
        if kind in ("labels", "overlay") and not _png_whole(path, shape):
            return ResumeCheck(False, f"{path.name} damaged (not a whole PNG of the page)", "damaged")
        if "sha256" in entry and export.file_sha256(path) != entry["sha256"]:
            return ResumeCheck(False, f"{path.name} damaged (its bytes changed)", "damaged")
    return ResumeCheck(True)


def _source_changed(recorded: Any, source: str | Path) -> str | None:
    """Why ``source`` is not the file the record names (None when it is the same file, or a
    copy of it: same size and bytes)."""
    from . import export

    if not isinstance(recorded, dict):
        return "source not recorded"
    try:
        st = os.stat(source)
    except OSError:
        return "source not readable"
    if st.st_size != recorded.get("size"):
        return f"source changed ({recorded.get('size')} -> {st.st_size} bytes)"
    if st.st_mtime_ns == recorded.get("mtime_ns") and os.path.abspath(source) == recorded.get("path"):
        return None
    try:
        same = export.file_sha256(source) == recorded.get("sha256")
    except OSError:
        return "source not readable"
    return None if same else "source changed (same size, other bytes)"


# --- memory --------------------------------------------------------------------------------


#: Peak resident memory of one page, in bytes: PEAK_BASE + PEAK_PER_PIXEL per pixel, plus
#: PEAK_PER_COLOUR_PIXEL per pixel on colour pages (their RGB copy, and its decoding).
#: Measured with /usr/bin/time -v on generated grey pages of 98 and 169 megapixels (22.6
#: bytes a pixel with the interpreter) and as ru_maxrss on the 79 dev pages, each under its
#: estimate (docs/robustness.md).
PEAK_BASE = 250 * 2**20
PEAK_PER_PIXEL = 22.0
PEAK_PER_COLOUR_PIXEL = 6.0
#: Default largest peak of one page: pages estimated above it are refused before loading.
DEFAULT_PAGE_MEMORY = 2 * 2**30


#: Peak memory a locked file's pieces may add, per sample-piece pair of
#: ``initial_io.PIECE_BUDGET`` (the most a page gets): EM's unary holds a float32 per pair,
#: and stage 8 a score per pixel and candidate piece (only the candidates a pixel's component
#: has, and its passes over pixels in blocks). Measured (docs/robustness.md, ``/usr/bin/time
#: tlseg segment PAGE --initial-lines GT --lock-initial-lines`` with pieces and with
#: ``given_pieces=0``): cremma20 10_c71ca (109k samples x 220 pieces, 24M pairs) 635 and 717
#: MB (3.5 bytes a pair), 12_dbc9b (18.9M pairs) 600 and 636 MB (1.9), ahte book1_page19
#: (13.0M pairs) and moc_train_9 (40.5M) the same peak both ways. (Before stage 8 kept its
#: scores by candidate and consolidate_lines its fits by label: 10.9 bytes a pair, 1.02 GB on
#: 10_c71ca.) The header does not say the samples, so a page with a file of initial lines is
#: allowed the budget's worth, with a margin of 1.7 on the largest measured: 6 x 50M pairs,
#: 0.28 GB.
PIECES_PEAK_PER_PAIR = 6.0


def pieces_peak(params: Parameters) -> int:
    """Bytes a page's locked given lines may add to its peak once cut into pieces
    (:data:`PIECES_PEAK_PER_PAIR` x ``PIECE_BUDGET``); 0 when pieces are off."""
    from .initial_io import PIECE_BUDGET

    if params.given_pieces <= 1 or params.given_piece <= 0:
        return 0
    return int(PIECES_PEAK_PER_PAIR * PIECE_BUDGET)


def estimate_peak(width: int, height: int, colour: bool = False) -> int:
    """Estimated peak resident memory (bytes) of segmenting one ``width`` x ``height`` page."""
    per_pixel = PEAK_PER_PIXEL + (PEAK_PER_COLOUR_PIXEL if colour else 0.0)
    return int(PEAK_BASE + per_pixel * width * height)


def physical_memory() -> int | None:
    """This machine's RAM in bytes (None when unknown)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def default_max_memory() -> int:
    """Default memory budget of a batch: half of this machine's RAM (8 GB when unknown)."""
    ram = physical_memory()
    return ram // 2 if ram else 8 * 2**30


def format_bytes(n: float) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def memory_refusal(path: str | Path, page_index: int, page_memory: int, pieces: int = 0
                   ) -> tuple[int, str | None]:
    """(estimated peak, None) for a page that fits ``page_memory`` bytes, or (estimate, the
    one-line refusal saying how to make it fit), from the file's header only; ``pieces``:
    bytes its initial lines' pieces may add (:func:`pieces_peak`; 0 without such a file)."""
    try:
        header = read_header(path, page_index)
    except Exception:  # noqa: BLE001 - the page fails with its own error when loaded
        return PEAK_BASE + pieces, None
    need = estimate_peak(header.width, header.height, header.colour) + pieces
    if need <= page_memory:
        return need, None
    per_pixel = PEAK_PER_PIXEL + (PEAK_PER_COLOUR_PIXEL if header.colour else 0.0)
    fits = max(0.0, (page_memory - PEAK_BASE - pieces) / per_pixel)
    scale = (fits / header.pixels) ** 0.5
    msg = (f"{path}: page not loaded: {header.width} x {header.height} ({header.pixels / 1e6:.0f} "
           f"megapixels{' with its initial lines cut into pieces' if pieces else ''}) needs about "
           f"{format_bytes(need)} of memory, over the {format_bytes(page_memory)} "
           f"a page may use: scale it down to {fits / 1e6:.0f} megapixels or less (e.g. to "
           f"{int(scale * 100)} % of its width and height) or allow more with --page-memory "
           f"{math.ceil(need / 2**30 * 10) / 10:g}G")
    return need, msg


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


class PageTimeout(BaseException):
    """A page ran past its time limit.  A BaseException, so that no ``except Exception`` in
    the engine swallows it; write_outputs removes its temporary files on the way out."""


@contextlib.contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Raise PageTimeout in this thread after ``seconds`` (main thread on POSIX only; elsewhere
    the progress callback's deadline check does it, at the next stage or EM iteration)."""
    if (not seconds or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        yield
        return

    def on_alarm(_signum: int, _frame: object) -> None:
        raise PageTimeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


def process_page(task: PageTask, progress: Callable[[str], None] | None = None) -> PageResult:
    """Segment one page and write its outputs.  Never raises for a bad page (the error is
    in the result), nor for a page over its time limit; only KeyboardInterrupt, SystemExit
    and a worker's termination get through."""
    start = time.perf_counter()
    try:
        from . import export, io

        segment_fn = task.segment_fn
        if segment_fn is None:
            from .pipeline import segment as segment_fn
        from .pagecheck import page_warnings
        from .pipeline import preparation_summary as _summary
        # The page's time starts now: a fresh worker's first imports are not the page's.
        deadline = None if not task.timeout else time.monotonic() + task.timeout
        say = progress or (lambda _msg: None)
        marks: dict[str, float] = {}

        def stage(msg: str) -> None:
            # The pipeline announces "labelling" just before stage 8: its time splits EM
            # from finishing without reimplementing segment().
            if deadline is not None and time.monotonic() > deadline:
                raise PageTimeout
            marks.setdefault(msg, time.perf_counter())
            say(msg)

        with _alarm(task.timeout):
            stage("load")
            page = io.load_page(task.path, page_index=task.page_index)
            t_loaded = time.perf_counter()
            if task.initial_lines:
                from functools import partial

                from .initial_io import read_initial_lines
                reader = partial(read_initial_lines, task.initial_lines, lock=task.lock_initial_lines)
                prep, snap, seg = segment_fn(page, task.params, stage, initial_lines=reader)
            else:
                prep, snap, seg = segment_fn(page, task.params, stage)
            del page
            t_done = time.perf_counter()
            timings = {k: float(v) for k, v in dict(getattr(prep, "timings", {}) or {}).items()}
            timings["load"] = t_loaded - start
            prepared = sum(v for k, v in timings.items() if k != "load")
            finish_s = t_done - marks["labelling"] if "labelling" in marks else 0.0
            timings["em"] = max(0.0, (t_done - t_loaded) - prepared - finish_s)
            timings["finish"] = finish_s
            timings["total"] = t_done - start
            warnings = page_warnings(prep.ink, float(prep.stats.h_cc), seg.labels, len(seg.lines))
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
                "warnings": warnings,
            }
            started_from = getattr(seg, "initial_lines", None)
            if started_from is not None:  # the lines EM started from: --initial-lines reruns from them
                extra["initial_lines"] = started_from.to_dict()
            if task.initial_lines:
                extra["initial_lines_file"] = {"path": str(Path(task.initial_lines).resolve()),
                                               "locked": task.lock_initial_lines}
            gray = prep.gray
            # The preparation's page-sized arrays (components, masks) are not needed to write:
            # freed here, they do not add to the writing's peak.
            del prep, snap
            stage("writing")
            export.write_outputs(task.outdir, task.stem, gray, seg, Path(task.path).name, extra)
        n_lines = len(seg.lines)
        return PageResult(task.path, task.stem, "ok", None, n_lines, time.perf_counter() - start,
                          task.redone, tuple(warnings))
    except PageTimeout:
        return PageResult(task.path, task.stem, "failed",
                          f"{task.path}: stopped after {task.timeout:g} s, the page's time limit "
                          "(--page-timeout); nothing was written", 0, time.perf_counter() - start,
                          task.redone)
    except Exception as exc:  # noqa: BLE001 - one bad page must never stop the batch
        return PageResult(task.path, task.stem, "failed", describe_error(task.path, exc), 0,
                          time.perf_counter() - start, task.redone)


class _Terminated(BaseException):
    """Raised in a worker by SIGTERM (the parent stopping the batch, or the worker's parent
    gone) so that write_outputs removes its temporary files on the way out."""


_in_page = False
#: monotonic() when the worker's current page started (None between pages).
_page_started: float | None = None
#: A SIGTERM is being handled: the page is unwinding and removing its temporary files.
_terminating = False


def _on_sigterm(_signum: int, _frame: object) -> None:
    global _terminating
    if _terminating:
        # A second SIGTERM during the clean-up must not interrupt it: once one worker of a
        # stopped pool exits, the pool's manager thread terminates the others again (it
        # takes the pool for broken), and a _Terminated raised inside atomic_path's clean-up
        # left a temporary file behind (CI, test_sigint_stops_a_batch_started_with_sigint_ignored).
        return
    if _in_page:
        _terminating = True
        raise _Terminated
    os._exit(143)  # idle: nothing to clean up


#: prctl(2) option: the signal a process gets when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1
#: Seconds a worker waits for its own SIGTERM clean-up before it exits regardless.
_CLEANUP_GRACE = 10.0
#: Seconds past a page's time limit after which its worker exits regardless (the page is
#: stuck in native code that never returns to Python, where the alarm is delivered).
HARD_TIMEOUT_GRACE = 60.0


def _die_with_parent(parent_pid: int, hard_limit: float | None) -> None:
    """Make this worker exit when its parent dies, by any signal, even SIGKILL: on Linux the
    kernel sends SIGTERM (prctl PR_SET_PDEATHSIG); everywhere a watchdog thread sees the
    parent change (the orphan is re-parented) and sends it.  The watchdog also ends a page
    stuck past ``hard_limit`` seconds."""
    if os.name == "posix" and os.uname().sysname == "Linux":
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(143)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            started = _page_started
            stuck = hard_limit is not None and started is not None and time.monotonic() - started > hard_limit
            if os.getppid() != parent_pid or stuck:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(_CLEANUP_GRACE)
                os._exit(143)

    threading.Thread(target=watch, name="tlseg-watchdog", daemon=True).start()


def _init_worker(parent_pid: int | None = None, hard_limit: float | None = None) -> None:
    """Process-pool worker set-up: one BLAS thread; Ctrl-C left to the parent (which stops
    the workers itself) so a terminal interrupt does not print a traceback per worker;
    SIGTERM (and SIGHUP, unless ignored as under nohup) stop the page and remove its
    temporary files; and the worker dies with its parent."""
    os.environ.update(_THREAD_ENV)
    try:  # OpenCV keeps its own thread pool, which the environment does not reach
        import cv2

        cv2.setNumThreads(1)
    except ImportError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _on_sigterm)
    if parent_pid is not None:
        _die_with_parent(parent_pid, hard_limit)


def _pool_process_page(task: PageTask) -> PageResult:
    """process_page in a pool worker: a SIGTERM mid-page ends the process after cleanup."""
    global _in_page, _page_started
    _in_page = True
    _page_started = time.monotonic()
    try:
        return process_page(task)
    except _Terminated:
        os._exit(143)
    finally:
        _in_page = False
        _page_started = None


# --- the batch ----------------------------------------------------------------------------


class Interrupted(KeyboardInterrupt):
    """The batch was stopped by a signal (``signum``): SIGINT, SIGTERM or SIGHUP."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


#: Signals that stop a batch like Ctrl-C: whole files kept, workers stopped, a summary.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While a batch runs in the main thread: SIGINT, SIGTERM and SIGHUP raise
    :class:`Interrupted`, whatever dispositions the process inherited (a background job of a
    script starts with SIGINT ignored); SIGHUP stays ignored when it was (nohup).  After the
    first, further ones are ignored until the batch has stopped its workers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[int, Any] = {}

    def handler(signum: int, _frame: object) -> None:
        for sig in saved:
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    for sig in STOP_SIGNALS:
        if sig == getattr(signal, "SIGHUP", None) and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        saved[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)


class _Reporter:
    """Collects results, appends the JSON-lines report and emits progress events.  A report
    that cannot be written (full disk) is given up with its error kept; pages go on."""

    def __init__(self, report_path: Path | None, total: int, progress: ProgressFn | None) -> None:
        self.report_path = report_path
        self.total = total
        self.progress = progress
        self.start = time.perf_counter()
        self.done = 0
        self.error: str | None = None
        self._fh = None
        if report_path is not None:
            try:
                report_path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(report_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            except OSError as exc:
                self.error = f"cannot write the report {report_path}: {exc.strerror or exc}"

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def record(self, result: PageResult, counted: bool = True) -> None:
        if self._fh is not None:
            try:
                # Flushed per line so an interrupted run still has a report of what finished.
                self._fh.write(result.to_json() + "\n")
                self._fh.flush()
            except OSError as exc:
                self.error = f"cannot write the report {self.report_path}: {exc.strerror or exc}"
                with contextlib.suppress(OSError):
                    self._fh.close()
                self._fh = None
        if counted:
            self.done += 1
            if self.progress:
                self.progress(BatchProgress(self.done, self.total, self.elapsed(), result=result))

    def stage(self, msg: str) -> None:
        if self.progress:
            self.progress(BatchProgress(self.done, self.total, self.elapsed(), stage=msg))

    def close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
            self._fh = None


def plan_pages(paths: Sequence[str], stems: Sequence[str], outdir: str | Path, params: Parameters,
               page_index: int = 0, overwrite: bool = False,
               initial_lines: Sequence[str | None] | None = None,
               lock_initial_lines: bool = False) -> list[ResumeCheck]:
    """:func:`check_outputs` of every page (all not done with ``overwrite``); ``initial_lines``
    per page as :func:`run_batch` takes them."""
    if overwrite:
        return [ResumeCheck(False) for _ in paths]
    given = list(initial_lines) if initial_lines is not None else [None] * len(paths)
    return [check_outputs(outdir, stem, path, params, page_index, lines, lock_initial_lines)
            for path, stem, lines in zip(paths, stems, given, strict=True)]


def run_batch(pages: Sequence[str | Path], outdir: str | Path, params: Parameters,
              jobs: int | None = None, overwrite: bool = False, dask_address: str | None = None,
              page_index: int = 0, report_path: str | Path | None = None,
              progress: ProgressFn | None = None, segment_fn: SegmentFn | None = None,
              stems: Sequence[str] | None = None, checks: Sequence[ResumeCheck] | None = None,
              page_timeout: float | None = None, max_memory: int | None = None,
              page_memory: int | None = None, initial_lines: Sequence[str | None] | None = None,
              lock_initial_lines: bool = False) -> BatchSummary:
    """Segment ``pages`` into ``outdir``; see the module docstring.

    ``jobs`` worker processes (default: all cores; 1 = in this process); ``dask_address``
    a scheduler address or ``"local"`` for a local cluster of ``jobs`` processes.  A page
    whose outputs pass :func:`check_outputs` (``checks``, computed when not given) is
    skipped unless ``overwrite``; the others run, and those that had outputs count as
    redone (``BatchSummary.redone``).  Temporary files of killed runs are removed first.
    ``page_timeout`` seconds per page (None = none).  ``max_memory`` bytes (default half the
    RAM) bound the estimated peaks of the pages running at once; a page estimated over
    ``page_memory`` (default 2 GB, at most ``max_memory``) is refused before loading.  The
    report (default ``outdir/tlseg-report.jsonl``) gets one JSON object per page.  SIGINT,
    SIGTERM or SIGHUP cancel what is pending, stop the workers and return with
    ``interrupted`` set (exit code 128 + the signal).
    ``initial_lines``: per page, a file of initial lines or None (issue 24; see
    :func:`initial_lines_for`), all locked with ``lock_initial_lines``.
    """
    from .export import remove_stale_temp_files

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    jobs = max(1, int(jobs or os.cpu_count() or 1))
    max_memory = int(max_memory or default_max_memory())
    page_memory = min(int(page_memory or DEFAULT_PAGE_MEMORY), max_memory)
    paths = [str(p) for p in pages]
    stems = list(stems) if stems is not None else unique_stems([Path(p) for p in paths], page_index)
    report = Path(report_path) if report_path is not None else outdir / REPORT_NAME
    summary = BatchSummary(total=len(paths), report_path=report)
    summary.stale_files, summary.stale_bytes = remove_stale_temp_files(outdir)
    if checks is None:
        checks = plan_pages(paths, stems, outdir, params, page_index, overwrite, initial_lines,
                            lock_initial_lines)
    results: dict[int, PageResult] = {}
    todo: list[tuple[int, PageTask]] = []
    refused: list[tuple[int, PageResult]] = []
    estimates: dict[int, int] = {}
    for i, (path, stem, check) in enumerate(zip(paths, stems, checks, strict=True)):
        if check.done:
            results[i] = PageResult(path, stem, "skipped")
            continue
        if check.cause:
            summary.redone[check.cause] = summary.redone.get(check.cause, 0) + 1
        given = initial_lines is not None and initial_lines[i] is not None
        # Any file of initial lines may hold locked lines (--lock-initial-lines, or a file's own
        # mark), which are cut into pieces.
        estimates[i], refusal = memory_refusal(path, page_index, page_memory,
                                               pieces_peak(params) if given else 0)
        if refusal:
            refused.append((i, PageResult(path, stem, "failed", refusal, redone=check.reason)))
            continue
        todo.append((i, PageTask(path, stem, str(outdir), params, page_index, segment_fn, page_timeout,
                                 check.reason, None if initial_lines is None else initial_lines[i],
                                 lock_initial_lines)))

    reporter = _Reporter(report, len(todo) + len(refused), progress)
    try:
        with stop_on_signals():
            for i in sorted(results):
                reporter.record(results[i], counted=False)
            for i, result in refused:
                results[i] = result
                reporter.record(result)
            if not todo:
                pass  # everything was done already
            elif dask_address:
                _run_dask(todo, dask_address, jobs, reporter, results)
            elif jobs == 1 or len(todo) == 1:
                _run_serial(todo, reporter, results)
            else:
                _run_pool(todo, min(jobs, len(todo)), reporter, results, estimates, max_memory, page_timeout)
    except KeyboardInterrupt as exc:
        summary.interrupted = True
        summary.signal = getattr(exc, "signum", int(signal.SIGINT))
    finally:
        reporter.close()

    summary.report_error = reporter.error
    summary.results = [results[i] for i in sorted(results)]
    for r in summary.results:
        if r.status == "ok":
            summary.ok += 1
            summary.lines += r.lines
            summary.warned += bool(r.warnings)
        elif r.status == "skipped":
            summary.skipped += 1
        else:
            summary.failed += 1
    summary.seconds = reporter.elapsed()
    return summary


def _run_serial(todo: list[tuple[int, PageTask]], reporter: _Reporter,
                results: dict[int, PageResult]) -> None:
    # Stage messages only make sense when one page runs at a time and there is one page.
    stage = reporter.stage if len(todo) == 1 else None
    for i, task in todo:
        results[i] = process_page(task, stage)
        reporter.record(results[i])


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


def _make_pool(workers: int, page_timeout: float | None = None) -> ProcessPoolExecutor:
    import multiprocessing

    hard = None if not page_timeout else page_timeout + HARD_TIMEOUT_GRACE
    # Not fork: the parent may hold threads (a GUI, dask) and forked BLAS pools can hang.
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(os.getpid(), hard))


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel pending pages and stop the workers now instead of waiting for their pages:
    outputs are written atomically, so a killed worker leaves no partial page behind."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # private, but no public way
    manager = getattr(pool, "_executor_manager_thread", None)  # shutdown(wait=False) forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        with contextlib.suppress(Exception):
            if proc.is_alive():
                proc.terminate()
    deadline = time.monotonic() + 3.0  # time to delete temporary files, not to finish pages
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1.0)
    # The pool's manager thread closes its wake-up pipe once it sees the workers gone. Python
    # 3.11's exit hook writes to that pipe (concurrent.futures.process._python_exit): if the
    # thread closes it between the hook's check and its write, the interrupted batch ends
    # with a traceback (EBADF) on stderr. Waiting for the thread closes it first.
    if manager is not None:
        with contextlib.suppress(Exception):
            manager.join(timeout=5.0)


def _run_pool(todo: list[tuple[int, PageTask]], workers: int, reporter: _Reporter,
              results: dict[int, PageResult], estimates: dict[int, int] | None = None,
              max_memory: int | None = None, page_timeout: float | None = None) -> None:
    """Run pages in a process pool, in order, as many at once as there are workers and as
    their estimated peaks fit ``max_memory`` together (one page always runs).  A worker that
    dies (a crash, the OOM killer) breaks the whole pool; the pages it took down are rerun
    one at a time in fresh single-worker pools, so only the page that really kills its
    worker is reported failed.  An interruption stops every worker before it propagates."""
    estimates = estimates or {}
    budget = max_memory or default_max_memory()
    queue = deque(todo)
    broken: list[tuple[int, PageTask]] = []
    with _ThreadEnv():
        pool = _make_pool(workers, page_timeout)
        try:
            running: dict[Future, tuple[int, PageTask]] = {}
            used = 0
            while queue or running:
                while queue and len(running) < workers and (
                        not running or used + estimates.get(queue[0][0], 0) <= budget):
                    i, task = queue.popleft()
                    try:
                        fut = pool.submit(_pool_process_page, task)
                    except BrokenProcessPool:
                        queue.appendleft((i, task))
                        break
                    running[fut] = (i, task)
                    used += estimates.get(i, 0)
                if not running:  # the pool broke: a fresh one for the rest
                    pool.shutdown(wait=True)
                    pool = _make_pool(workers, page_timeout)
                    continue
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    i, task = running.pop(fut)
                    used -= estimates.get(i, 0)
                    try:
                        results[i] = fut.result()
                    except BrokenProcessPool:
                        broken.append((i, task))
                        continue
                    except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
                        results[i] = PageResult(task.path, task.stem, "failed",
                                                describe_error(task.path, exc), redone=task.redone)
                    reporter.record(results[i])
        except BaseException:
            _stop_pool(pool)
            raise
        pool.shutdown(wait=True)
        for i, task in sorted(broken, key=lambda it: it[0]):
            pool = _make_pool(1, page_timeout)
            try:
                results[i] = pool.submit(_pool_process_page, task).result()
            except BrokenProcessPool:
                results[i] = PageResult(task.path, task.stem, "failed",
                                        f"{task.path}: the worker process died (crash, out of memory, "
                                        "or stuck past its time limit)", redone=task.redone)
            except BaseException:
                _stop_pool(pool)
                raise
            pool.shutdown(wait=True)
            reporter.record(results[i])


_DASK_SCHEMES = ("tcp", "tls", "ucx", "ws", "wss", "inproc")
_DASK_ADDRESS = re.compile(r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?"
                           r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::(?P<port>[^/]*))?/?$")


def check_dask_address(address: str) -> str:
    """``local`` or a scheduler address (``HOST:PORT``, ``tcp://HOST:PORT``, ``tls://...``),
    else ValueError with a one-line reason."""
    text = address.strip()
    if not text:
        raise ValueError("--dask needs an address: 'local', HOST:PORT or tcp://HOST:PORT")
    if text == "local":
        return text
    m = _DASK_ADDRESS.match(text)
    if m is None:
        raise ValueError(f"--dask {address!r} is not a scheduler address: expected 'local', HOST:PORT "
                         "or tcp://HOST:PORT")
    scheme, port = m.group("scheme"), m.group("port")
    if scheme is not None and scheme.lower() not in _DASK_SCHEMES:
        raise ValueError(f"--dask {address!r}: unknown protocol {scheme!r} (expected one of "
                         f"{', '.join(_DASK_SCHEMES)})")
    if port is None and (scheme or "tcp").lower() != "inproc":
        raise ValueError(f"--dask {address!r}: no port (a scheduler listens on one, by default 8786: "
                         f"{text.rstrip('/')}:8786)")
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"--dask {address!r}: port {port!r} is not a number from 1 to 65535")
    return text


class SchedulerError(RuntimeError):
    """The dask scheduler cannot be reached (the message is one line, naming the address)."""


def _run_dask(todo: list[tuple[int, PageTask]], address: str, jobs: int, reporter: _Reporter,
              results: dict[int, PageResult]) -> None:
    """Run pages on a dask.distributed cluster; workers write outputs themselves (a shared
    file system is assumed).  ``address == "local"`` starts a LocalCluster of ``jobs``
    single-threaded processes (dask already gives its workers one BLAS thread)."""
    from dask.distributed import Client, LocalCluster, as_completed

    address = check_dask_address(address)
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(address, timeout=10)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        if cluster is not None:
            cluster.close()
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise SchedulerError(f"cannot reach the dask scheduler at {address}: {reason}") from None
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
                results[i] = PageResult(task.path, task.stem, "failed", describe_error(task.path, exc),
                                        redone=task.redone)
            reporter.record(results[i])
    except BaseException:
        client.cancel(list(futures))
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
