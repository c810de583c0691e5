"""A document: the pages of a folder (or of several files) and what is known of each.

Plain Python, no Qt: the window changes it, the page list observes it (events ``reset`` and
``changed(index)``).  :func:`scan_document` builds one from files and folders (it reads the
disk: run it off the GUI thread), finding each page's ground truth beside its image and the
``tlseg`` outputs already written for it, so that a finished page is shown without running
again.  Folders are searched with their subfolders (as ``tlseg --recursive``).

Results are kept per preset: the default preset's in the output folder itself (where ``tlseg``
writes), another preset's in its ``preset-<name>`` subfolder (:func:`preset_folder`), so a run
under ``paper`` never replaces the default result.  The window's own results folder (under its
settings) is a cache: its entries are compact (labels as a 16-bit PNG, and the JSON), see
:func:`cache_complete`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from engine import batch
from engine.evaluate import find_ground_truth, is_ground_truth_name

from .session import Observable

NOT_RUN, RUNNING, DONE, FAILED = "not run", "running", "done", "failed"
STATES = (NOT_RUN, RUNNING, DONE, FAILED)
#: Image names that are ``tlseg`` outputs, not pages.
OUTPUT_IMAGE_SUFFIXES = (".labels.png", ".overlay.png")


@dataclass(frozen=True)
class PageEntry:
    """One page: its image, output stem, ground truth, state and figures (None = unknown).
    ``saved``: its outputs are in the document's output folder (shown without a run)."""

    path: str
    stem: str
    gt_path: str | None = None
    state: str = NOT_RUN
    lines: int | None = None
    seconds: float | None = None
    fm: float | None = None
    error: str = ""
    saved: bool = False
    #: The parameters of the page's result, as ``preset + changes`` (None: no result).
    preset: str | None = None

    @property
    def name(self) -> str:
        return Path(self.path).name


class Document(Observable):
    """The pages of a document and where their outputs go (``outdir``)."""

    def __init__(self) -> None:
        super().__init__()
        self.pages: list[PageEntry] = []
        self.outdir: Path | None = None
        #: The preset whose results the rows show (their folder: :meth:`results_folder`).
        self.preset = "default"
        #: The outputs go to the window's own cache (compact) rather than a folder of the user's.
        self.cache = False

    def set_pages(self, pages: list[PageEntry], outdir: Path | None, preset: str = "default",
                  cache: bool = False) -> None:
        self.pages = list(pages)
        self.outdir = outdir
        self.preset = preset
        self.cache = cache
        self._notify("reset")

    def results_folder(self, preset: str | None = None) -> Path | None:
        """Where the results of ``preset`` (default: the rows') are kept."""
        return None if self.outdir is None else preset_folder(self.outdir, preset or self.preset)

    def index_of(self, path: str | None) -> int:
        """The index of the page whose image is ``path`` (absolute), -1 if none."""
        if path:
            for i, page in enumerate(self.pages):
                if page.path == path:
                    return i
        return -1

    def update(self, index: int, **changes: Any) -> None:
        """Change some fields of page ``index`` (unknown names raise TypeError)."""
        if not 0 <= index < len(self.pages):
            return
        page = replace(self.pages[index], **changes)
        if page != self.pages[index]:
            self.pages[index] = page
            self._notify("changed", index)


# ---------------------------------------------------------------------------------- scanning
def is_page_image(path: Path) -> bool:
    """An image that is a page: not a ``tlseg`` output and not a ground-truth label map."""
    name = path.name.lower()
    return (batch.is_image(path) and not name.endswith(OUTPUT_IMAGE_SUFFIXES)
            and not is_ground_truth_name(path))


def results_folder(root: Path, specs: list[str]) -> Path:
    """Where the window writes a document's outputs when no folder of outputs was opened:
    one folder per set of inputs under ``root``, so that re-opening shows them again."""
    key = hashlib.sha1("\n".join(sorted(os.path.abspath(s) for s in specs)).encode()).hexdigest()[:12]
    first = Path(os.path.abspath(specs[0])) if specs else Path("pages")
    return root / f"{first.name or 'pages'}-{key}"


def preset_folder(outdir: Path, preset: str) -> Path:
    """The folder of a preset's results: ``outdir`` for the default, else ``preset-<name>`` in it."""
    return outdir if preset == "default" else outdir / f"preset-{preset}"


#: The files of a compact cache entry (labels as a 16-bit PNG, and the JSON).
COMPACT_SUFFIXES = (".labels.png", ".json")


def cache_complete(folder: Path, stem: str) -> bool:
    """Whether ``stem``'s result is complete in ``folder``: ``tlseg``'s six outputs, or the
    window's compact cache entry (its JSON says ``"compact": true``)."""
    if batch.outputs_complete(folder, stem):
        return True
    if not all((folder / f"{stem}{suffix}").is_file() for suffix in COMPACT_SUFFIXES):
        return False
    try:
        return bool(json.loads((folder / f"{stem}.json").read_text(encoding="utf-8")).get("compact"))
    except (OSError, ValueError, AttributeError):
        return False


def params_summary(meta: dict[str, Any]) -> str | None:
    """``preset + changes`` of the parameters a saved result records (None if it does not)."""
    from engine.params import ParameterError, Parameters

    data = meta.get("parameters")
    if not isinstance(data, dict):
        return None
    try:
        return Parameters.from_dict(data).preset_summary()
    except (ParameterError, TypeError, ValueError):
        return None


def _saved_entry(outdir: Path, stem: str, path: str, gt: Path | None) -> PageEntry:
    """A page whose outputs are complete in ``outdir``: done, with its line count and time."""
    meta = json.loads((outdir / f"{stem}.json").read_text(encoding="utf-8"))
    seconds = (meta.get("timings") or {}).get("total")
    return PageEntry(path, stem, None if gt is None else str(gt), DONE, int(meta.get("n_lines", 0)),
                     None if seconds is None else float(seconds), saved=True,
                     preset=params_summary(meta) or "default")


def _failures(outdir: Path) -> dict[str, str]:
    """Stem -> error of the pages a ``tlseg`` run in ``outdir`` reported failed."""
    report = outdir / batch.REPORT_NAME
    out: dict[str, str] = {}
    if report.is_file():
        for line in report.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if row.get("status") == "failed":
                out[str(row.get("stem"))] = str(row.get("error") or "failed")
    return out


def _output_stems(folder: Path) -> list[str]:
    return sorted(p.name[: -len(".json")] for p in folder.glob("*.json")
                  if cache_complete(folder, p.name[: -len(".json")]))


def scan_document(specs: list[str], results_root: Path, preset: str = "default"
                  ) -> tuple[list[PageEntry], Path, list[str]]:
    """The pages of ``specs`` (files and folders, with their subfolders), the output folder
    and warnings.

    Page images are those :func:`engine.batch.discover_pages` finds, less ``tlseg`` outputs
    and label maps.  A single folder holding ``tlseg`` outputs is its own output folder: its
    finished pages are done (even those whose image is elsewhere or gone: then the page is
    the overlay), the ones its report lists as failed are failed.  Otherwise the outputs go
    to :func:`results_folder`.  Output stems are ``tlseg``'s (:func:`engine.batch.unique_stems`).
    A page is done when its result under ``preset`` is saved (:func:`preset_folder`).
    """
    found, warnings = batch.discover_pages(specs, recursive=True)
    images = [Path(os.path.abspath(p)) for p in found if not p.is_dir() and is_page_image(p)
              and not _inside_outputs(p)]
    folder = Path(specs[0]) if len(specs) == 1 and Path(specs[0]).is_dir() else None
    saved = _output_stems(folder) if folder is not None else []
    outdir = folder.resolve() if saved else results_folder(results_root, specs)
    presets = preset_folder(outdir, preset)
    failures = _failures(presets) if presets.is_dir() else {}
    pages: list[PageEntry] = []
    stems = batch.unique_stems(images)
    for image, stem in zip(images, stems, strict=True):
        gt = find_ground_truth(image)
        if cache_complete(presets, stem):
            pages.append(_saved_entry(presets, stem, str(image), gt))
        else:
            pages.append(PageEntry(str(image), stem, None if gt is None else str(gt),
                                   FAILED if stem in failures else NOT_RUN, error=failures.get(stem, "")))
    known = set(stems)
    if preset != "default":
        saved = []  # pages known only by their outputs are the default preset's
    for stem in saved:  # outputs whose page image is not in the folder
        if stem in known:
            continue
        meta = json.loads((outdir / f"{stem}.json").read_text(encoding="utf-8"))
        if not is_page_image(Path(str(meta.get("image") or f"{stem}.png"))):
            continue  # a label map segmented as if it were a page (tlseg on a folder of both)
        image = next((Path(c) for c in (meta.get("source"), outdir / str(meta.get("image") or ""))
                      if c and Path(c).is_file() and is_page_image(Path(c))), None)
        if image is None:
            warnings.append(f"{stem}: page image not found, showing its overlay")
        page = str(image) if image is not None else str(outdir / f"{stem}.overlay.png")
        pages.append(_saved_entry(outdir, stem, page, None if image is None else find_ground_truth(image)))
    if not pages:
        warnings.append("no pages in " + ", ".join(specs))
    return pages, outdir, warnings


def _inside_outputs(path: Path) -> bool:
    """An image in a preset's results folder (``preset-<name>``): an output, not a page."""
    return any(part.startswith("preset-") for part in path.parent.parts[-1:])


def saved_states(pages: list[PageEntry], outdir: Path, preset: str) -> list[dict[str, Any]]:
    """Each page's row under ``preset``: done with its figures when its result is saved in
    that preset's folder, else not run (what the page list shows after the preset changed)."""
    folder = preset_folder(outdir, preset)
    rows = []
    for page in pages:
        if cache_complete(folder, page.stem):
            entry = _saved_entry(folder, page.stem, page.path, None)
            rows.append({"state": DONE, "lines": entry.lines, "seconds": entry.seconds, "fm": None, "error": "",
                         "saved": True, "preset": entry.preset})
        else:
            rows.append({"state": NOT_RUN, "lines": None, "seconds": None, "fm": None, "error": "", "saved": False,
                         "preset": None})
    return rows


def read_truth(gt_path: str, page_path: str, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A ground truth as ``engine.evaluate`` scores result files: its label map and the pixels
    scored (polygons are rasterised on the page's Otsu ink, threshold taken inside them)."""
    from engine import groundtruth
    from engine.evaluate import is_polygon_file, page_ink, polygon_truth_on_ink, scored_pixels

    if is_polygon_file(Path(gt_path)):
        labels, ink = polygon_truth_on_ink(gt_path, page_path, shape)
        return labels, scored_pixels(labels, ink, True)
    ink = page_ink(page_path)
    labels = groundtruth.read_label_map(gt_path, shape, None)
    return labels, scored_pixels(labels, ink, False)


def saved_fm(outdir: Path, page: PageEntry) -> float | None:
    """FM of a page's saved outputs against its ground truth (read and scored here); None
    when either cannot be read (the page's FM stays unknown; opening it shows why)."""
    from engine.export import read_outputs
    from engine.metric import contest_metric

    try:
        labels = read_outputs(outdir, page.stem).seg.labels
        truth, scored = read_truth(str(page.gt_path), page.path, labels.shape)
    except (OSError, ValueError):
        return None
    return float(contest_metric(truth, labels, ink=scored).fm)


def run_all_summary(pages: list[Any], scoring: bool) -> str:
    """``Run all: 25 of 25 done, 2 failed, median FM 0.851 over 23 pages with ground truth``."""
    done = sum(p.state == DONE for p in pages)
    failed = sum(p.state == FAILED for p in pages)
    fms = [p.fm for p in pages if p.state == DONE and p.fm is not None]
    text = f"Run all: {done} of {len(pages)} done, {failed} failed"
    if fms:
        text += f", median FM {float(np.median(fms)):.3f} over {len(fms)} pages with ground truth"
    if scoring:
        text += " (FM still being scored)"
    return text
