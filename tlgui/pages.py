"""Opening pages and documents, moving between a document's pages, scoring saved results.

:class:`PageController` reads pages, folders and saved outputs off the GUI thread (through the
:class:`~tlgui.tasks.TaskRunner`) and says what it found through signals; the window shows it.
A document's pages are those of :func:`~tlgui.document.scan_document`; the page shown is the
session's (``session.path``, or ``session.loading`` while it is read).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Signal, Slot

from engine import export as engine_export
from engine.io import load_page

from .document import Document, PageEntry, saved_fm, saved_states, scan_document
from .geometry import image_pyramid, label_overlay
from .jobs import JobController
from .session import Session
from .settings import results_dir
from .tasks import TaskRunner


class PageController(QObject):
    """Opens pages (one, or a document's) and keeps the FM of a document's saved results."""

    pageLoaded = Signal(str, object, object, object)  # path, Page, image pyramid, saved result or None
    loadFailed = Signal(str, str)                       # path, message
    documentOpened = Signal(list)                       # warnings
    documentFailed = Signal(str)                        # message (the current document stays)
    scoringDone = Signal()                              # no saved result is left to score
    pageOpening = Signal()                              # a page is being opened
    pageChosen = Signal(int)                            # a document page is being opened
    stageText = Signal(str)

    def __init__(self, session: Session, document: Document, jobs: JobController, tasks: TaskRunner) -> None:
        super().__init__()
        self.session = session
        self.document = document
        self.jobs = jobs
        self.tasks = tasks
        self._fm_queue: list[int] = []  # saved pages whose FM is still to be scored
        self._fm_scoring = False  # one of them is being scored
        #: How a page list row's order is read (the page list sets it: sorted by FM, say).
        self.order: Any = lambda: list(range(len(self.document.pages)))

    # ================================================================ one page
    def open_page(self, path: str, saved: tuple[Path, str] | None = None) -> None:
        """Load a page (off the GUI thread); the current run, if any, is cancelled.  With
        ``saved`` (output folder, stem) its ``tlseg`` outputs are shown, and nothing runs."""
        path = os.path.abspath(path)
        self.jobs.leave_running_page()
        self.jobs.cancel()
        self.pageOpening.emit()
        self.stageText.emit("loading")
        self.session.loading = path
        self.jobs.engine_process.start()  # it imports while the page loads

        def load() -> tuple[Any, list[np.ndarray], Any]:
            page = load_page(path)
            result = None
            if saved is not None:
                outputs = engine_export.read_outputs(*saved)
                result = (outputs.seg, label_overlay(outputs.seg.labels), outputs.meta)
            return page, image_pyramid(page.gray), result

        self.tasks.submit("load", load, self._on_loaded, self._on_load_failed)

    def _on_loaded(self, loaded: tuple[Any, list[np.ndarray], Any]) -> None:
        page, pyramid, result = loaded
        path = os.path.abspath(page.path) if page.path else self.session.loading or ""
        if path != self.session.loading:
            return  # a newer open superseded this one
        self.session.loading = None
        with self.jobs.times.timed("page loaded"):
            self.pageLoaded.emit(path, page, pyramid, result)

    def _on_load_failed(self, message: str) -> None:
        failed_path, self.session.loading = self.session.loading, None
        self.jobs.em_after_prep = None
        self.jobs.page_ended(failed_path, "failed", message)
        self.loadFailed.emit(failed_path or "", message)

    # ================================================================ documents
    def open_document(self, specs: list[str], preset: str = "default") -> None:
        """Open folders and files (with their subfolders) as one document (found off the GUI
        thread); its first page is shown.  A folder of ``tlseg`` outputs shows its results
        without running.  When nothing can be opened (no page, an unreadable folder) the
        document open before stays as it was."""
        specs = [os.path.abspath(s) for s in specs]
        root = results_dir()
        self.stageText.emit("opening document")
        self.tasks.submit("document", lambda: scan_document(specs, root, preset),
                          lambda scanned: self._on_document(scanned, root, preset, specs),
                          lambda message: self.documentFailed.emit(f"Cannot open {', '.join(specs)}: {message}"))

    def _on_document(self, scanned: tuple[list[PageEntry], Path, list[str]], root: Path, preset: str,
                     specs: list[str]) -> None:
        pages, outdir, warnings = scanned
        if not pages:
            self.documentFailed.emit(f"No pages in {', '.join(specs)} (nor in its subfolders): "
                                     "the document open before stays as it was.")
            return
        self.jobs.stop_run_all()
        cache = Path(os.path.abspath(outdir)).is_relative_to(os.path.abspath(root))
        self.document.set_pages(pages, outdir, preset, cache)
        self.documentOpened.emit(warnings)
        self.show_page(0)
        # FM of the saved results, in the background: one page at a time, so that a page the
        # user opens meanwhile waits for one scoring at most (the task thread runs in order).
        self._fm_queue = [i for i, page in enumerate(pages) if page.saved and page.gt_path]
        self._score_next_saved()

    def use_preset(self, preset: str) -> None:
        """The rows show the results of ``preset`` (read off the GUI thread): done where that
        preset's result of the page is saved, else not run."""
        if self.document.outdir is None or preset == self.document.preset or self.jobs.run_queue is not None:
            return
        pages, outdir = list(self.document.pages), self.document.outdir

        def on_states(rows: list[dict[str, Any]]) -> None:
            if self.document.outdir != outdir or len(self.document.pages) != len(rows):
                return
            self.document.preset = preset
            self._fm_queue = []
            for index, row in enumerate(rows):
                if self.document.pages[index].state != "running":
                    self.document.update(index, **row)
            self._fm_queue = [i for i, page in enumerate(self.document.pages) if page.saved and page.gt_path]
            self._score_next_saved()

        self.tasks.submit("preset rows", lambda: saved_states(pages, outdir, preset), on_states,
                          lambda _message: None)

    @Slot(int)
    def score_saved(self, index: int) -> None:
        """Score page ``index``'s saved outputs against its ground truth, after those queued."""
        if not self.document.pages[index].gt_path:
            return
        self._fm_queue.append(index)
        if not self._fm_scoring:
            self._score_next_saved()

    def scoring(self) -> bool:
        """Whether saved results are still being scored."""
        return self._fm_scoring

    def _score_next_saved(self) -> None:
        self._fm_scoring = bool(self._fm_queue)
        if not self._fm_queue:
            self.scoringDone.emit()
            return
        index = self._fm_queue.pop(0)
        page, outdir = self.document.pages[index], self.document.results_folder()

        def on_fm(fm: float | None) -> None:
            if fm is not None and self.document.index_of(page.path) == index \
                    and self.document.pages[index].fm is None:
                self.document.update(index, fm=fm)
            self._score_next_saved()

        self.tasks.submit(f"saved fm {page.path}", lambda: saved_fm(outdir, page), on_fm,
                          lambda _message: self._score_next_saved())

    # ================================================================ moving
    def current_index(self) -> int:
        """The document index of the page shown (-1 when it is not one of the document's)."""
        return self.jobs.current_index()

    @Slot(int)
    def show_page(self, index: int) -> None:
        """Open page ``index`` of the document: its saved outputs if it has them, else the
        page itself (prepared at once, as any opened page)."""
        page = self.document.pages[index]
        folder = self.document.results_folder()
        saved = (folder, page.stem) if page.saved and folder is not None else None
        self.open_page(page.path, saved)
        self.pageChosen.emit(index)

    @Slot(int)
    def go_to_page(self, index: int) -> None:
        """The user's choice of a page ("Run all" goes on in the background)."""
        if 0 <= index < len(self.document.pages) and index != self.current_index():
            self.show_page(index)

    def step_page(self, delta: int) -> None:
        order = self.order()  # the list's order: after a sort by FM, the next worst
        if not order:
            return
        current = self.current_index()
        pos = order.index(current) + delta if current in order else 0
        self.go_to_page(order[max(0, min(len(order) - 1, pos))])
