"""The main window: page canvas in the middle, layers and parameters on the left, lines and
ground truth on the right, run controls, slider and convergence plots below.

The window builds the widgets and wires them to the controllers that do the work:

- :class:`~tlgui.jobs.JobController`: the engine jobs (the shown page's and "Run all"'s), in the
  engine process (:mod:`tlgui.engine_process`, typed messages of :mod:`tlgui.messages`);
- :class:`~tlgui.pages.PageController`: opening pages and documents, moving between pages;
- :class:`~tlgui.editing.EditController`: the initial lines' edits and their undo stack;
- :class:`~tlgui.truth.GroundTruthController`: ground truth and scores;
- :class:`~tlgui.exporting.ExportController`: exports;
- :class:`~tlgui.presenter.SnapshotPresenter`: drawing the displayed snapshot at 30 Hz;
- :class:`~tlgui.tasks.TaskRunner`: loads, exports and scoring on a second thread;
- :class:`~tlgui.settings.WindowSettings`: what is remembered, with its migrations;
- :mod:`tlgui.actions`: the menus and the toolbar, as one table.

Worker signals reach only bound slots (queued, GUI thread).  The data model (session,
document, edits) knows nothing of Qt; the widgets observe it.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QListWidget,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.io import IMAGE_SUFFIXES
from engine.params import Parameters

from .actions import build_actions
from .canvas import PageCanvas
from .document import Document, run_all_summary
from .editing import EditController
from .exporting import ExportController, ExportSource
from .jobs import RUN, STEP_EM, STEP_SWEEP, JobController
from .linetable import LineTable
from .pagelist import PageList
from .pages import PageController
from .panels import GroundTruthPanel, LayerPanel, ParameterPanel, PlotsPanel
from .presenter import SnapshotPresenter
from .session import Metrics, Session
from .settings import WindowSettings, autosave_dir, exports_dir
from .tasks import HandlerTimes, TaskRunner
from .truth import GroundTruthController
from .widgets import Banner, RunControls, StatusFields, scale_text

__all__ = ["MainWindow"]

SWITCH_INTERVAL_S = 0.0005
#: File-dialog patterns of the pages the engine reads (engine.io.IMAGE_SUFFIXES).
IMAGE_PATTERNS = " ".join(f"*{suffix}" for suffix in IMAGE_SUFFIXES)


class MainWindow(QMainWindow):
    """The tlgui window.  ``idle`` fires whenever no engine job or task is left running."""

    idle = Signal()

    def __init__(self) -> None:
        super().__init__()
        # While the engine's reader thread runs, every call from Qt into Python (a slot, an
        # item's paint or boundingRect) waits for the GIL; with the default 5 ms switch
        # interval a repaint made of dozens of such calls stalls for hundreds of ms.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self.setWindowTitle("tlgui — text-line segmentation")
        self.resize(1500, 950)
        self.setAcceptDrops(True)
        self.settings = WindowSettings()
        self.session = Session()
        self.document = Document()
        self.times = HandlerTimes()
        self.slow_handlers = self.times.slow  # GUI-thread handlers that took long (tlgui.probe)
        self.page_gray: np.ndarray | None = None
        self._closed = False
        self._run_all_summary_due = False
        self._build_widgets()
        self._build_controllers()
        self._build_docks()
        self.actions = build_actions(self, self._handlers(), self.edit.undo, self._on_mode_action,
                                     self._on_export_action)
        self.mode_actions, self.export_actions = self.actions.modes, self.actions.exports
        self.run_all_action = self.actions.by_key["run_all"]
        self._rebuild_recent()
        self._wire()
        self._restore()
        self._update_buttons()
        # The ~100 k objects alive now (modules, Qt wrappers, pyqtgraph items) live as long as
        # the window: the collector's full passes over them took 20-70 ms each, at random
        # moments in the GUI thread.  Frozen, they are left out of every pass (``shutdown``
        # gives them back).
        gc.collect()
        gc.freeze()

    # ================================================================ construction
    def _build_widgets(self) -> None:
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        self.canvas = PageCanvas()
        self.canvas.setAcceptDrops(False)  # drops go to the window
        self.controls = RunControls()
        self.buttons, self.slider, self.slider_label = self.controls.buttons, self.controls.slider, self.controls.label
        self.plots = PlotsPanel()
        bottom = QWidget()
        bl = QVBoxLayout(bottom)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(self.controls)
        bl.addWidget(self.plots)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.canvas)
        split.addWidget(bottom)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        split.setSizes([700, 220])
        layout.addWidget(split, 1)
        self.setCentralWidget(central)
        self.banner = Banner(central)  # over the canvas, outside the layout
        self.layer_panel = LayerPanel()
        self.param_panel = ParameterPanel(Parameters())
        self.line_table = LineTable()
        self.lines_title = QLabel("Lines")
        self.gt_panel = GroundTruthPanel()
        self.gt_list = QListWidget()
        self.gt_list.setObjectName("gt-lines")
        self.page_list = PageList(self.document)
        self.status = StatusFields(self.statusBar())
        self.status_stage, self.status_scale = self.status.stage, self.status.scale

    def _build_controllers(self) -> None:
        self.tasks = TaskRunner(self.times)
        self.edit = EditController(self.session, self.canvas, autosave_dir(), self.tasks, self)
        self.edits, self.editor, self.undo = self.edit.model, self.edit.editor, self.edit.undo
        self.jobs = JobController(self.session, self.document, self.times, self._run_params, self._run_inputs,
                                  lambda: self.document.outdir)
        self.engine_process = self.jobs.engine_process
        self.pages = PageController(self.session, self.document, self.jobs, self.tasks)
        self.pages.order = self.page_list.order
        self.truth = GroundTruthController(self.session, self.tasks, self.gt_panel, self.gt_list, self.canvas)
        #: Initial lines to load once the page (path) is prepared: (page, file, lock).
        self._pending_lines: tuple[str | None, str, bool] | None = None
        self.exports = ExportController(self.tasks, self.canvas, self._export_source, self._export_folder, self)
        self.presenter = SnapshotPresenter(self.session, self.edits, self.editor, self.canvas, self.controls,
                                           self.line_table, self.lines_title, self.plots, self.status, self.times,
                                           self._running, self.jobs.elapsed)

    def _build_docks(self) -> None:
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.layer_panel)
        left.addWidget(self.param_panel)
        left.setSizes([300, 500])
        self._dock("Layers · Parameters", "dock-left", left, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.pages_dock = self._dock("Pages", "dock-pages", self.page_list, Qt.DockWidgetArea.LeftDockWidgetArea, 300)
        self.pages_dock.hide()  # shown when a document opens: a single page leaves the room to the parameters
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(2, 2, 2, 2)
        rl.addWidget(self.lines_title)
        rl.addWidget(self.line_table, 3)
        rl.addWidget(self.gt_panel)
        rl.addWidget(self.gt_list, 1)
        self._dock("Lines · Ground truth", "dock-right", right, Qt.DockWidgetArea.RightDockWidgetArea, 470)

    def _dock(self, title: str, name: str, widget: QWidget, area: Qt.DockWidgetArea, width: int = 0) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        if width:
            self.resizeDocks([dock], [width], Qt.Orientation.Horizontal)  # every column in view
        return dock

    def _handlers(self) -> dict[str, Any]:
        """The action table's handlers by name (see :data:`tlgui.actions.ACTIONS`)."""
        edit = self.edit
        return {
            "choose_page": self.choose_page, "choose_folder": self.choose_folder, "choose_files": self.choose_files,
            "choose_ground_truth": self.truth.choose, "choose_save_edits": edit.choose_save,
            "choose_load_lines": edit.choose_load, "close": self.close, "delete_selected": edit.delete_selected,
            "rotate_left": edit.rotate_left, "rotate_right": edit.rotate_right, "revert_edits": edit.revert,
            "toggle_lock_selected": self.toggle_lock_selected,
            "run": self.run, "pause": self.pause, "step_em": self.step_em, "step_sweep": self.step_sweep,
            "stop": self.stop, "reset": self.reset, "run_all": self.run_all, "next_page": self.next_page,
            "previous_page": self.previous_page,
        }

    def _wire(self) -> None:
        for key, slot in (("run", self.run), ("pause", self.pause), ("step", self.step_em),
                          ("sweep", self.step_sweep), ("stop", self.stop), ("reset", self.reset)):
            self.buttons[key].clicked.connect(slot)
        self.layer_panel.visibilityChanged.connect(self._on_layer_visible)
        self.layer_panel.opacityChanged.connect(self._on_layer_opacity)
        self.layer_panel.posteriorModeChanged.connect(self._on_posterior_mode)
        self.param_panel.changed.connect(self._on_params_changed)
        self.page_list.pageActivated.connect(self.pages.go_to_page)
        self.canvas.lineClicked.connect(self._on_line_clicked)
        self.session.subscribe("metrics", self._on_session_metrics)
        for source in (self.edit, self.truth, self.exports):
            source.message.connect(self.banner.show_message)
        self.edit.status.connect(self.statusBar().showMessage)
        self.edit.needsPreparation.connect(self.jobs.prepare)
        self.line_table.lockToggled.connect(self._on_lock_toggled)
        self.exports.written.connect(self._on_exported)
        self.exports.folderChosen.connect(lambda folder: self.settings.set_value("dirs/export", folder))
        self.tasks.internalError.connect(self.banner.show_message)
        self.tasks.finished.connect(self._emit_if_idle)
        jobs = self.jobs
        jobs.stageText.connect(self._set_stage)
        jobs.prepared.connect(self._show_prepared)
        jobs.runStarted.connect(self._on_run_started)
        jobs.runRegions.connect(self.canvas.set_run_regions)
        jobs.finished.connect(self._show_finished)
        jobs.failed.connect(lambda message: self.banner.show_message(f"The engine failed: {message}"))
        jobs.backgroundResult.connect(self._show_background_result)
        jobs.reopenPage.connect(self.pages.show_page)
        jobs.pageWritten.connect(self.pages.score_saved)
        jobs.jobEnded.connect(self._on_job_ended)
        jobs.pageTime.connect(lambda seconds: self.status.elapsed.setText(f"{seconds:6.1f} s"))
        jobs.warning.connect(lambda text: self.banner.show_message(text, "warning"))
        jobs.editingAllowed.connect(self.editor.set_enabled)
        jobs.stateChanged.connect(self._update_buttons)
        jobs.statusMessage.connect(self.statusBar().showMessage)
        jobs.idle.connect(self._emit_if_idle)
        jobs.runAllFinished.connect(self._on_run_all_finished)
        jobs.confirm = self.ask
        pages = self.pages
        pages.stageText.connect(self._set_stage)
        pages.pageOpening.connect(self._on_page_opening)
        pages.pageLoaded.connect(self._show_loaded_page)
        pages.loadFailed.connect(self._on_load_failed)
        pages.documentOpened.connect(self._on_document_opened)
        pages.documentFailed.connect(self._on_document_failed)
        pages.pageChosen.connect(self.page_list.set_current)
        pages.scoringDone.connect(self._on_scoring_done)

    def _restore(self) -> None:
        """Parameters, layers and geometry as the last session left them."""
        params, note = self.settings.restore_params()
        if params is not None:
            self.param_panel.set_params(params)  # saved again (with today's fingerprint) if migrated
        if note:
            self.banner.show_message(note, "warning", sticky=True)
            if params is not None:  # migrated: the note in the status bar too
                self.statusBar().showMessage(note, 20000)
        panel = self.layer_panel
        for name, check in panel.checks.items():
            visible, opacity = self.settings.layer(name)
            if visible is not None:
                check.setChecked(visible)
            if opacity is not None:
                panel.sliders[name].setValue(opacity)
        mode = self.settings.value("layers/posterior_mode")
        if mode is not None and 0 <= int(mode) < panel.mode.count():
            panel.mode.setCurrentIndex(int(mode))
        geometry = self.settings.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)

    # ================================================================ state
    def is_busy(self) -> bool:
        """Whether an engine job or a task (load, export, scoring) is under way."""
        return self.jobs.busy() or self.tasks.pending > 0

    def settled(self) -> bool:
        """Everything drawn: canvas, table and plots show the displayed snapshot."""
        return self.presenter.settled()

    @property
    def job(self) -> Any:
        return self.jobs.job

    def current_index(self) -> int:
        return self.pages.current_index()

    def recent_files(self) -> list[str]:
        return self.settings.recent_files()

    def _run_params(self) -> tuple[Parameters, bool]:
        return self.param_panel.params, self.param_panel.needs_preparation()

    def _run_inputs(self, path: str, shown: bool) -> tuple[Any, str | None, dict[str, Any]]:
        """What a run of page ``path`` starts from (see :class:`JobController`)."""
        if shown:
            return self.edit.lines_for_run(), None, self.edit.summary()
        saved = self.edits.saved_edits(path)
        return None, saved, {"edited": saved is not None, "edits_file": saved}

    def _running(self) -> bool:
        return self.jobs.mode() == RUN

    def ask(self, question: str) -> bool:
        """A yes/no question to the user (a dialog: only for what must not happen unasked)."""
        answer = QMessageBox.question(self, "tlgui", question,
                                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                                      QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def _on_params_changed(self, params: Parameters) -> None:
        self.settings.save_params(params)
        self.pages.use_preset(params.preset_name)  # the page list shows this preset's results

    def _emit_if_idle(self) -> None:
        if not self.is_busy():
            self.idle.emit()

    def _set_stage(self, text: str) -> None:
        self.session.set_stage(text)
        self.status_stage.setText(text)

    def _update_buttons(self) -> None:
        self.controls.set_states(self.session.path is not None, self.jobs.running_em(), self.jobs.mode(),
                                 self.jobs.can_stop(), RUN)

    # ================================================================ opening
    def choose_page(self) -> None:
        start = self.settings.value("dirs/page", "")
        path, _ = QFileDialog.getOpenFileName(self, "Open page", str(start),
                                              f"Images ({IMAGE_PATTERNS} *.webp);;All files (*)")
        if path:
            self.open_page(path)

    def choose_folder(self) -> None:
        start = self.settings.value("dirs/page", "")
        folder = QFileDialog.getExistingDirectory(self, "Open a folder of pages (or of tlseg outputs)", str(start))
        if folder:
            self.open_document([folder])

    def choose_files(self) -> None:
        start = self.settings.value("dirs/page", "")
        paths, _ = QFileDialog.getOpenFileNames(self, "Open pages as a document", str(start),
                                                f"Images ({IMAGE_PATTERNS});;All files (*)")
        if paths:
            self.open_document(paths)

    def open_page(self, path: str, saved: tuple[Path, str] | None = None) -> None:
        self.pages.open_page(path, saved)

    def _on_page_opening(self) -> None:
        if not self.banner.sticky:
            self.banner.hide()

    def open_document(self, specs: list[str]) -> None:
        self.pages.open_document(specs, self.param_panel.params.preset_name)

    def open_paths(self, paths: list[str]) -> None:
        """One page file opens as a page; a folder or several files as a document."""
        if len(paths) == 1 and not Path(paths[0]).is_dir():
            self.open_page(paths[0])
        elif paths:
            self.open_document(paths)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if paths:
            self.open_paths(paths)
            event.acceptProposedAction()

    def _rebuild_recent(self) -> None:
        menu = self.actions.recent_menu
        menu.clear()
        for path in self.recent_files():
            menu.addAction(path).triggered.connect(lambda _checked=False, p=path: self.open_page(p))
        menu.setEnabled(bool(self.recent_files()))

    def _show_loaded_page(self, path: str, page: Any, pyramid: list[np.ndarray], result: Any) -> None:
        """A page was read: show it, with its saved result if it has one, else prepare it."""
        self.page_gray = page.gray
        self.session.open(path)
        self.canvas.set_page(pyramid)
        self.canvas.set_labels(None)
        self.truth.clear(page.gray.shape[:2])
        self.edit.page_opened(path)  # its autosaved edits come back once it is prepared
        self.setWindowTitle(f"tlgui — {Path(path).name}")
        self.settings.add_recent(path)
        self._rebuild_recent()
        self.settings.set_value("dirs/page", str(Path(path).parent))
        h, w = page.gray.shape[:2]
        self._set_stage(f"page {w}×{h}")
        # The status bar is this page's: nothing of the page shown before stays.
        self.status_scale.setText("")
        self.status.elapsed.setText("")
        self.jobs.prep_seconds = 0.0
        index = self.document.index_of(path)
        self.page_list.set_current(index)
        if result is not None:  # saved outputs: shown as they are, the engine is not asked
            seg, overlay, meta = result
            self.session.set_finished(seg, overlay)
            self.canvas.set_labels(overlay)
            self._show_saved_initial_lines(meta)
            iterations = f", {meta['iterations']} EM iterations" if "iterations" in meta else ""
            self._set_stage(f"saved result: {len(seg.lines)} lines{iterations}")
            self.plots.show_note("A saved result: its EM iterations are not kept. Run shows them again.")
            self._update_buttons()
        self.jobs.after_page_shown(result is not None)
        gt = self.document.pages[index].gt_path if index >= 0 else None
        if gt:
            self.truth.load(gt)
        self.jobs.run_all_next()  # "Run all" waited for this page to be shown

    def _show_saved_initial_lines(self, meta: dict[str, Any]) -> None:
        """The scale, time and initial lines a saved result records; the lines are drawn until
        the page is prepared (an edit, Reset or Revert prepares it; then the lines are the
        preparation's or the user's autosaved ones)."""
        from engine.model import LineSet

        found = meta.get("preparation") or {}
        if "h_cc" in found and "w_cc" in found:
            area = (found.get("page_area") or {}).get("fraction")
            self.status_scale.setText(f"H_cc {found['h_cc']:.0f} px · W_cc {found['w_cc']:.0f} px"
                                      + ("" if area is None else f" · page {100 * area:.0f} %"))
        index = self.document.index_of(self.session.path)
        total = self.document.pages[index].seconds if index >= 0 else None  # as the page list says
        total = (meta.get("timings") or {}).get("total") if total is None else total
        if total is not None:
            self.status.elapsed.setText(f"{float(total):6.1f} s")
        try:
            lines = LineSet.from_dict(meta["initial_lines"])
        except (KeyError, TypeError, ValueError):
            return
        self.canvas.set_initial_lines(lines.segments(), lines.locked, lines.anchored)

    def _on_load_failed(self, _path: str, message: str) -> None:
        self._set_stage("no page" if self.session.path is None else self.status_stage.text())
        self.banner.show_message(f"Cannot open the page: {message}")

    def _on_document_opened(self, warnings: list[str]) -> None:
        self.pages_dock.show()
        if warnings:
            self.banner.show_message("; ".join(warnings), "warning")
        if not self.document.pages:
            self._set_stage("no page" if self.session.path is None else self.status_stage.text())

    def _on_document_failed(self, message: str) -> None:
        self._set_stage("no page" if self.session.path is None else f"page {Path(self.session.path).name}")
        self.banner.show_message(message, "warning")

    def _on_run_all_finished(self) -> None:
        self._run_all_summary_due = True
        self._show_run_all_summary()

    def _on_scoring_done(self) -> None:
        if self._run_all_summary_due:
            self._show_run_all_summary()

    def _show_run_all_summary(self) -> None:
        """``Run all: 25 of 25 done, 2 failed, median FM 0.85 (23 pages with ground truth)``, in
        the status bar and the banner; again when the last FM is scored."""
        scoring = self.pages.scoring()
        self._run_all_summary_due = scoring
        text = run_all_summary(self.document.pages, scoring)
        self.statusBar().showMessage(text)
        self.banner.show_message(text, "info")

    # ================================================================ document
    def go_to_page(self, index: int) -> None:
        self.pages.go_to_page(index)

    def next_page(self) -> None:
        self.pages.step_page(1)

    def previous_page(self) -> None:
        self.pages.step_page(-1)

    def run_all(self) -> None:
        self.jobs.run_all()

    def _on_session_metrics(self, metrics: Metrics | None) -> None:
        index = self.document.index_of(self.session.path)
        if index >= 0 and metrics is not None:
            self.document.update(index, fm=float(metrics.score.fm))

    # ================================================================ running
    def run(self) -> None:
        self.jobs.start_em(RUN)

    def pause(self) -> None:
        self.jobs.pause()

    def step_em(self) -> None:
        self.jobs.start_em(STEP_EM)

    def step_sweep(self) -> None:
        self.jobs.start_em(STEP_SWEEP)

    def stop(self) -> None:
        """Cancel the run and "Run all": the engine notices within one message-passing sweep
        or preparation stage, else its process is killed after engine_process.GRACE_S."""
        if self.jobs.stop():
            self._set_stage("stopped")

    def reset(self) -> None:
        """Cancel and forget the run; the page, preparation and edits stay."""
        self.jobs.cancel()
        self.session.clear_run()
        self.canvas.set_labels(None)
        self.canvas.set_mismatch(None)
        self.canvas.show_snapshot(None)
        self.canvas.set_run_regions(None, None)
        self._set_stage("ready" if self.session.prep is not None else "page")
        self.jobs.prepare()  # a page shown from its saved result: its initial lines now

    def _show_prepared(self, prep: Any, geometry: Any) -> None:
        # A result shown before the page was prepared (saved, or run in the background) stays.
        keep = self.session.segmentation is not None and not self.session.snapshots
        self.session.set_prepared(prep, keep_result=keep)
        self.param_panel.prepared_with = prep.params
        self.param_panel.show_status()
        self.canvas.set_prep(prep, geometry)
        self.status_scale.setText(scale_text(prep))
        self.edit.prepared(prep)
        self.truth.forget_if_not(prep.shape)
        if keep:
            self.canvas.set_labels(self.session.label_overlay)
            self.truth.redraw()
        shown = f" (the result shown: {len(self.session.segmentation.lines)} lines)" if keep else ""
        self._set_stage("prepared" + shown)
        pending, self._pending_lines = self._pending_lines, None
        if pending is not None and pending[0] in (None, self.session.path):
            self.edit.load(pending[1], pending[2])  # tlgui PAGE --initial-lines FILE

    def _on_run_started(self) -> None:
        self.canvas.set_labels(None)
        self.canvas.set_mismatch(None)
        self.canvas.set_run_regions(None, None)  # the run's own, if they differ, follow

    def _show_finished(self, seg: Any, rgba: Any) -> None:
        self.canvas.set_labels(rgba)
        self.canvas.set_merges(getattr(seg, "merges", ()))
        self._set_stage(f"finished: {len(seg.lines)} lines")
        self.truth.score()

    def _show_background_result(self, _index: int, seg: Any, rgba: Any) -> None:
        self.canvas.set_labels(rgba)
        self.canvas.set_merges(getattr(seg, "merges", ()))
        self._set_stage(f"finished in the background: {len(seg.lines)} lines")
        if not self.session.snapshots:
            self.plots.show_note("Run in the background: its EM iterations are not kept. Run shows them.")
        self.truth.score()

    def _on_job_ended(self) -> None:
        self.presenter.draw_pending = True

    # ================================================================ selection, layers, editing
    def select_line(self, index: int) -> None:
        self.presenter.select_line(index)

    def _on_line_clicked(self, index: int) -> None:
        if self.editor.mode == "off":
            self.select_line(index)

    def _on_layer_visible(self, name: str, visible: bool) -> None:
        self.settings.save_layer(name, visible=visible)
        self.canvas.set_layer_visible(name, visible)
        if name == "initial":
            self.editor._sync_rois()

    def _on_layer_opacity(self, name: str, opacity: float) -> None:
        self.settings.save_layer(name, opacity=opacity)
        self.canvas.set_layer_opacity(name, opacity)

    def _on_posterior_mode(self, mode: str) -> None:
        self.settings.set_value("layers/posterior_mode", self.layer_panel.mode.currentIndex())
        self.canvas.set_posterior_mode(mode)

    def _on_mode_action(self) -> None:
        self.set_edit_mode(self.sender().data())

    def set_edit_mode(self, mode: str) -> None:
        self.edit.set_mode(mode)
        for m, action in self.mode_actions.items():
            action.setChecked(m == mode)
        self.presenter.refresh()  # the table shows the initial lines while they are edited

    def toggle_lock_selected(self) -> None:
        """Lock (or unlock) the selected initial line: EM keeps it where it is."""
        lines, kind = self.presenter.table_source()
        index = self.editor.selected if kind == "initial" else -1
        if lines is None or not 0 <= index < len(lines):
            self.statusBar().showMessage("Select an initial line first (Edit ▸ Select / move, or its row "
                                         "in the line table while the lines are edited).", 6000)
            return
        self.edit.toggle_lock(index)

    def _on_lock_toggled(self, row: int, _locked: bool) -> None:
        self.edit.toggle_lock(row)

    def save_edits(self, path: str) -> None:
        self.edit.save(path)

    def load_initial_lines(self, path: str, lock: bool = False, when_prepared: bool = False) -> None:
        """File ▸ Load initial lines. ``when_prepared``: the shown page is not prepared yet (it
        was just opened: ``tlgui PAGE --initial-lines FILE``), so load once it is."""
        if when_prepared and self.session.prep is None:
            self._pending_lines = (self.session.path, path, lock)
            return
        self.edit.load(path, lock)

    def revert_edits(self) -> None:
        self.edit.revert()

    # ================================================================ ground truth, export
    def load_ground_truth(self, path: str) -> None:
        self.truth.load(path)

    def _export_source(self) -> ExportSource:
        return ExportSource(self.session.path or "", self.session.run_params or self.param_panel.params,
                            self.session.segmentation, self.session.current_snapshot(),
                            self.edits.lines if self.edits.prepared is not None else None, self.edit.summary())

    def _export_folder(self) -> Path:
        """Where the export dialogs start: the folder last exported to, else the document's
        results folder, else ``~/tlgui-exports``; never the folder of the page itself."""
        page_dir = Path(self.session.path).parent if self.session.path else None
        candidates = [self.settings.value("dirs/export")]
        if not self.document.cache:  # a folder of the user's outputs (the cache is the window's)
            candidates.append(self.document.results_folder())
        for folder in candidates:
            if folder and Path(folder) != page_dir:
                return Path(folder)
        return exports_dir()

    def _on_exported(self, path: str) -> None:
        self.statusBar().showMessage(f"wrote {path}", 5000)

    def _on_export_action(self) -> None:
        self.exports.choose(self.sender().data())

    def export(self, kind: str, path: str) -> None:
        self.exports.export(kind, path)

    # ================================================================ closing
    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop the threads and remove the pyqtgraph items (they must not outlive Qt)."""
        if self._closed:
            return
        self._closed = True
        gc.unfreeze()  # this window's objects may become garbage now
        self.settings.set_value("window/geometry", self.saveGeometry())
        self.settings.save_params(self.param_panel.params)
        self.settings.sync()
        self.presenter.timer.stop()
        self.jobs.shutdown()
        self.tasks.stop()
        self.edit.close()
        self.canvas.close_items()
        self.plots.close_plots()
        self.canvas.close()
