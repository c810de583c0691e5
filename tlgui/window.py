"""The main window: page canvas in the middle, layers and parameters on the left, lines and
ground truth on the right, run controls, slider and convergence plots below.

Threading: the engine runs in a process of its own (:mod:`tlgui.engine_process`, so it never
holds this process' GIL), relayed by :class:`~tlgui.worker.EngineWorker` on a QThread; loads,
exports and ground-truth scoring run on a second thread (:class:`~tlgui.worker.TaskWorker`).
Worker signals reach only bound slots of this window (queued, GUI thread).  Snapshots are
appended to the session as they come, but drawn by a 30 Hz timer, and only the displayed
one, so a fast engine never floods the GUI thread.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QIcon, QKeySequence, QUndoStack
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QPushButton,
    QSlider,
    QSplitter,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine import export as engine_export
from engine.io import IMAGE_SUFFIXES, load_page
from engine.params import ParameterError, Parameters

from .canvas import PageCanvas
from .document import DONE, FAILED, NOT_RUN, RUNNING, Document, read_truth, saved_fm, scan_document
from .edit import EDIT_MODES, LineEditor
from .geometry import image_pyramid, label_overlay
from .pagelist import PageList
from .panels import GroundTruthPanel, LayerPanel, LineTable, ParameterPanel, PlotsPanel
from .session import EditModel, Metrics, Session, snapshot_x
from .worker import (
    PAUSE,
    RUN,
    RUN_QUIET,
    STEP_EM,
    STEP_SWEEP,
    EngineProcess,
    EngineWorker,
    Job,
    RunControl,
    TaskWorker,
    WorkerThread,
)

ICONS = Path(__file__).resolve().parent.parent / "resources" / "icons"
MAX_RECENT = 10
SWITCH_INTERVAL_S = 0.0005
DRAW_INTERVAL_MS = 33
#: File-dialog patterns of the pages the engine reads (engine.io.IMAGE_SUFFIXES).
IMAGE_PATTERNS = " ".join(f"*{suffix}" for suffix in IMAGE_SUFFIXES)
PLOT_INTERVAL_S = 0.5  # ~30 Hz: faster than the eye needs, slow enough to leave time for the engine

#: Export kind -> (menu title, file filter, default suffix).
EXPORTS: dict[str, tuple[str, str, str]] = {
    "colour_png": ("Colour label PNG…", "PNG image (*.png)", ".labels-colour.png"),
    "label_png16": ("16-bit label PNG…", "PNG image (*.png)", ".labels16.png"),
    "dat": ("ICDAR .dat…", "ICDAR label map (*.dat)", ".dat"),
    "page_xml": ("PAGE XML…", "PAGE XML (*.xml)", ".xml"),
    "alto_xml": ("ALTO XML…", "ALTO XML (*.xml)", ".alto.xml"),
    "json": ("Lines and parameters (JSON)…", "JSON (*.json)", ".lines.json"),
    "view_png": ("PNG of the current view…", "PNG image (*.png)", ".view.png"),
}


def app_settings() -> QSettings:
    """The application's settings, always an INI file, so that its folder can hold autosaves."""
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "tlgui", "tlgui")


def defaults_fingerprint() -> str:
    """A hash of the shipped default parameters: saved with the user's parameters, so that
    a new version with other defaults can tell that they were chosen against the old ones."""
    return hashlib.sha256(Parameters().to_json().encode("utf-8")).hexdigest()[:16]


def _json_dict(text: object) -> dict[str, Any] | None:
    try:
        data = json.loads(str(text)) if text else None
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def stale_parameters(saved: dict[str, Any], old_defaults: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """What restoring the new defaults over ``saved`` throws away: the saved values that were
    the user's own (they differ from the defaults of their time, or, when those are unknown,
    from today's) as ``name=value``, and the defaults that changed as ``name old → new``
    (``new name = value`` for a parameter added since, ``name removed`` for one gone)."""
    new_defaults = json.loads(Parameters().to_json())
    basis = old_defaults if old_defaults is not None else new_defaults
    dropped = [f"{k}={saved[k]}" for k in sorted(saved) if k in basis and saved[k] != basis[k]
               and saved[k] != new_defaults.get(k)]
    if old_defaults is None:
        return dropped, []
    changed = []
    for k in sorted(set(old_defaults) | set(new_defaults)):
        if k not in old_defaults:
            changed.append(f"new {k} = {new_defaults[k]}")
        elif k not in new_defaults:
            changed.append(f"{k} removed")
        elif old_defaults[k] != new_defaults[k]:
            changed.append(f"{k} {old_defaults[k]} → {new_defaults[k]}")
    return dropped, changed


def autosave_dir() -> Path:
    return Path(app_settings().fileName()).resolve().parent / "tlgui-edits"


def results_dir() -> Path:
    """Where a document's outputs go when the folder opened held none (one folder each)."""
    return Path(app_settings().fileName()).resolve().parent / "tlgui-results"



def scale_text(prep: Any) -> str:
    """The status bar's scale field: ``H_cc 38 px · W_cc 90 px · page 78 %``."""
    text = f"H_cc {prep.stats.h_cc:.0f} px · W_cc {prep.stats.w_cc:.0f} px"
    if getattr(prep, "row_pitch", ()):
        from engine.pitch import page_pitch

        pitch = page_pitch(prep)
        if pitch is not None:
            text += f" · row pitch {pitch:.0f} px ({pitch / max(prep.stats.h_cc, 1e-9):.1f} H_cc)"
    area = getattr(prep, "page_area", None)
    if area is not None and area.size:
        text += f" · page {100.0 * np.count_nonzero(area) / area.size:.0f} %"
    return text

class Banner(QWidget):
    """A dismissable message strip above the canvas: errors never pop up modal dialogs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.clicked.connect(self.hide)
        layout.addWidget(self.label, 1)
        layout.addWidget(close)
        self.setAutoFillBackground(True)
        self.hide()

    level = "error"
    #: A sticky message (about the session, not the page) stays when another page is opened.
    sticky = False

    def show_message(self, text: str, level: str = "error", sticky: bool = False) -> None:
        colour = {"error": "#b71c1c", "warning": "#8d6e00", "info": "#1b5e20"}[level]
        self.setStyleSheet(f"background: {colour}; color: white;")
        self.label.setText(text)
        self.level, self.sticky = level, sticky
        self.show()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""

    def error(self) -> str:
        """The shown message if it is an error (warnings and notes are not failures)."""
        return self.text() if self.level == "error" else ""


class MainWindow(QMainWindow):
    """The tlgui window.  ``idle`` fires whenever no engine job is left running."""

    idle = Signal()
    runJob = Signal(object)          # -> EngineWorker.run (queued)
    runTask = Signal(str, object)    # -> TaskWorker.run (queued)

    def __init__(self) -> None:
        super().__init__()
        # While the engine thread computes, every call from Qt into Python (a slot, an item's
        # paint or boundingRect) waits for the GIL; with the default 5 ms switch interval a
        # repaint made of dozens of such calls stalls for hundreds of ms.  0.5 ms keeps the
        # GUI thread's waits short at a small cost to the engine's throughput.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self.setWindowTitle("tlgui — text-line segmentation")
        self.resize(1500, 950)
        self.setAcceptDrops(True)
        self.settings = app_settings()
        self.session = Session()
        self.edits = EditModel(autosave_dir())
        self.document = Document()
        #: Pages "Run all" has still to run (document indices), None when it is not running.
        self._run_queue: list[int] | None = None
        #: The page "Run all" runs in the background (not the shown one's job), its start
        #: time, result and failure.
        self._bg_job: Job | None = None
        self._bg_started = 0.0
        self._bg_result: tuple[Any, Any] | None = None
        self._bg_failure = ""
        self._failure = ""  # the engine's last failure message (for the page list)
        self._fm_queue: list[int] = []  # saved pages whose FM is still to be scored
        self._fm_scoring = False  # one of them is being scored
        self._prep_seconds = 0.0  # wall time of the shown page's preparation
        self._page_seconds = 0.0  # wall time of its preparation and last run
        self.undo = QUndoStack(self)
        self.page_gray: np.ndarray | None = None
        self.gt_labels: np.ndarray | None = None
        self.gt_ink: np.ndarray | None = None  # the pixels the ground truth is scored on
        self.gt_path: str | None = None
        self.job: Job | None = None
        self._job_counter = 0
        self._jobs_in_flight = 0  # jobs handed to the worker whose "done" has not come back
        self._em_after_prep: str | None = None  # Run pressed while the page was being prepared
        self._job_started = 0.0
        self._draw_pending = False
        self._series_pending = False
        self._slow_stale = False  # table and plots lag behind the displayed snapshot
        self._slow_queue: list[Callable[[], None]] = []
        self._last_slow_draw = 0.0
        self._selected = -1
        self._pending_load: str | None = None
        self._closed = False
        #: GUI-thread handlers that took long: (end time, name, ms), for the latency probe.
        self.slow_handlers: list[tuple[float, str, float]] = []

        self._build_central()
        self._build_docks()
        self._build_actions()
        self._build_status()
        self._restore_params()
        self._restore_layers()
        self._connect_session()
        self._start_threads()

        self.draw_timer = QTimer(self)
        self.draw_timer.setInterval(DRAW_INTERVAL_MS)
        self.draw_timer.timeout.connect(self._on_draw_tick)
        self.draw_timer.start()
        self._update_buttons()
        geometry = self.settings.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        # The ~100 k objects alive now (modules, Qt wrappers, pyqtgraph items) live as long as
        # the window: the collector's full passes over them took 20-70 ms each, at random
        # moments in the GUI thread.  Frozen, they are left out of every pass (``shutdown``
        # gives them back).
        gc.collect()
        gc.freeze()

    # ================================================================ construction
    def _build_central(self) -> None:
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.banner = Banner()
        layout.addWidget(self.banner)
        self.canvas = PageCanvas()
        self.canvas.setAcceptDrops(False)  # drops go to the window
        self.editor = LineEditor(self.canvas, self.edits, self.undo)
        self.editor.message.connect(self._on_editor_message)
        self.editor.selectionChanged.connect(self._on_edit_selection)
        self.canvas.lineClicked.connect(self._on_line_clicked)

        controls = QWidget()
        row = QHBoxLayout(controls)
        row.setContentsMargins(4, 2, 4, 2)
        style = self.style()
        self.buttons: dict[str, QPushButton] = {}
        for key, text, icon, slot, tip in (
            ("run", "Run", QStyle.StandardPixmap.SP_MediaPlay, self.run, "Run EM to convergence (F5)"),
            ("pause", "Pause", QStyle.StandardPixmap.SP_MediaPause, self.pause, "Pause after this snapshot"),
            ("step", "EM step", QStyle.StandardPixmap.SP_MediaSeekForward, self.step_em,
             "One EM iteration (F6)"),
            ("sweep", "Sweep", QStyle.StandardPixmap.SP_MediaSkipForward, self.step_sweep,
             "One message-passing sweep (F7)"),
            ("stop", "Stop", QStyle.StandardPixmap.SP_MediaStop, self.stop, "Cancel the run (Esc)"),
            ("reset", "Reset", QStyle.StandardPixmap.SP_BrowserReload, self.reset,
             "Forget the run, back to the initial lines"),
        ):
            button = QPushButton(style.standardIcon(icon), text)
            button.setToolTip(tip)
            button.clicked.connect(slot)
            button.setObjectName(f"button-{key}")
            row.addWidget(button)
            self.buttons[key] = button
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName("snapshot-slider")
        self.slider.setRange(0, 0)
        self.slider.valueChanged.connect(self._on_slider)
        row.addWidget(self.slider, 1)
        self.slider_label = QLabel("no run")
        self.slider_label.setMinimumWidth(190)
        row.addWidget(self.slider_label)

        self.plots = PlotsPanel()
        bottom = QWidget()
        bl = QVBoxLayout(bottom)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(controls)
        bl.addWidget(self.plots)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.canvas)
        split.addWidget(bottom)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        split.setSizes([700, 220])
        layout.addWidget(split, 1)
        self.setCentralWidget(central)

    def _build_docks(self) -> None:
        self.layer_panel = LayerPanel()
        self.layer_panel.visibilityChanged.connect(self._on_layer_visible)
        self.layer_panel.opacityChanged.connect(self._on_layer_opacity)
        self.layer_panel.posteriorModeChanged.connect(self._on_posterior_mode)
        self.param_panel = ParameterPanel(Parameters())
        self.param_panel.changed.connect(self._on_params_changed)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.layer_panel)
        left.addWidget(self.param_panel)
        left.setSizes([300, 500])
        dock = QDockWidget("Layers · Parameters", self)
        dock.setObjectName("dock-left")
        dock.setWidget(left)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)

        self.line_table = LineTable()
        self.line_table.lineSelected.connect(self._on_table_selection)
        self.lines_title = QLabel("Lines")
        self.gt_panel = GroundTruthPanel()
        self.gt_panel.loadRequested.connect(self.choose_ground_truth)
        self.gt_list = QListWidget()
        self.gt_list.setObjectName("gt-lines")
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(2, 2, 2, 2)
        rl.addWidget(self.lines_title)
        rl.addWidget(self.line_table, 3)
        rl.addWidget(self.gt_panel)
        rl.addWidget(self.gt_list, 1)
        self.page_list = PageList(self.document)
        self.page_list.pageActivated.connect(self.go_to_page)
        dock = QDockWidget("Pages", self)
        dock.setObjectName("dock-pages")
        dock.setWidget(self.page_list)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        self.resizeDocks([dock], [300], Qt.Orientation.Horizontal)  # every column in view
        dock.hide()  # shown when a document opens: a single page leaves the room to the parameters
        self.pages_dock = dock

        dock = QDockWidget("Lines · Ground truth", self)
        dock.setObjectName("dock-right")
        dock.setWidget(right)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        self.resizeDocks([dock], [470], Qt.Orientation.Horizontal)

    def _icon(self, name: str) -> QIcon:
        path = ICONS / f"{name}.svg"
        return QIcon(str(path)) if path.exists() else QIcon()

    def _build_actions(self) -> None:
        menu = self.menuBar()
        toolbar = self.addToolBar("Main")
        toolbar.setObjectName("toolbar-main")
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        style = self.style()

        file_menu = menu.addMenu("&File")
        self.open_action = QAction(style.standardIcon(QStyle.StandardPixmap.SP_DialogOpenButton),
                                   "&Open page…", self)
        self.open_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_action.triggered.connect(self.choose_page)
        file_menu.addAction(self.open_action)
        toolbar.addAction(self.open_action)
        self.open_folder_action = QAction(style.standardIcon(QStyle.StandardPixmap.SP_DirOpenIcon),
                                          "Open &folder…", self)
        self.open_folder_action.setShortcut("Ctrl+Shift+O")
        self.open_folder_action.triggered.connect(self.choose_folder)
        file_menu.addAction(self.open_folder_action)
        toolbar.addAction(self.open_folder_action)
        open_files = QAction("Open &pages as a document…", self)
        open_files.triggered.connect(self.choose_files)
        file_menu.addAction(open_files)
        self.recent_menu = file_menu.addMenu("Open &recent")
        self._rebuild_recent()
        file_menu.addSeparator()
        gt_action = QAction("Load &ground truth…", self)
        gt_action.setShortcut("Ctrl+G")
        gt_action.triggered.connect(self.choose_ground_truth)
        file_menu.addAction(gt_action)
        save_edits = QAction("Save edited lines…", self)
        save_edits.triggered.connect(self.choose_save_edits)
        load_edits = QAction("Load edited lines…", self)
        load_edits.triggered.connect(self.choose_load_edits)
        file_menu.addAction(save_edits)
        file_menu.addAction(load_edits)
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)

        export_menu = menu.addMenu("E&xport")
        self.export_actions: dict[str, QAction] = {}
        for kind, (title, _filter, _suffix) in EXPORTS.items():
            action = QAction(title, self)
            action.setData(kind)
            action.triggered.connect(self._on_export_action)
            export_menu.addAction(action)
            self.export_actions[kind] = action
        export_button = QToolButton()
        export_button.setText("Export")
        export_button.setMenu(export_menu)
        export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        toolbar.addWidget(export_button)
        toolbar.addSeparator()

        edit_menu = menu.addMenu("&Edit")
        self.undo_action = self.undo.createUndoAction(self, "&Undo")
        self.undo_action.setShortcut(QKeySequence.StandardKey.Undo)
        self.undo_action.setIcon(style.standardIcon(QStyle.StandardPixmap.SP_ArrowBack))
        self.redo_action = self.undo.createRedoAction(self, "&Redo")
        self.redo_action.setShortcut(QKeySequence.StandardKey.Redo)
        self.redo_action.setIcon(style.standardIcon(QStyle.StandardPixmap.SP_ArrowForward))
        edit_menu.addAction(self.undo_action)
        edit_menu.addAction(self.redo_action)
        edit_menu.addSeparator()
        self.mode_actions: dict[str, QAction] = {}
        titles = {"off": "View (no editing)", "select": "Select / move", "add": "Add line",
                  "split": "Split line", "merge": "Merge lines", "delete": "Delete line"}
        for i, mode in enumerate(EDIT_MODES):
            action = QAction(self._icon("view" if mode == "off" else mode), titles[mode], self)
            action.setCheckable(True)
            action.setData(mode)
            action.setShortcut(f"Ctrl+{i}")
            action.triggered.connect(self._on_mode_action)
            edit_menu.addAction(action)
            toolbar.addAction(action)
            self.mode_actions[mode] = action
        self.mode_actions["off"].setChecked(True)
        edit_menu.addSeparator()
        for text, shortcut, slot in (
            ("Delete selected line", QKeySequence.StandardKey.Delete, self._delete_selected),
            ("Rotate selected line −2°", "[", self._rotate_left),
            ("Rotate selected line +2°", "]", self._rotate_right),
            ("Revert to the prepared lines", None, self.revert_edits),
        ):
            action = QAction(text, self)
            if shortcut is not None:
                action.setShortcut(shortcut)
            action.triggered.connect(slot)
            edit_menu.addAction(action)
        toolbar.addSeparator()
        toolbar.addAction(self.undo_action)
        toolbar.addAction(self.redo_action)

        run_menu = menu.addMenu("&Run")
        for text, shortcut, slot in (("Run", "F5", self.run), ("Pause", "F8", self.pause),
                                     ("EM step", "F6", self.step_em), ("Sweep step", "F7", self.step_sweep),
                                     ("Stop", "Esc", self.stop), ("Reset", None, self.reset)):
            action = QAction(text, self)
            if shortcut:
                action.setShortcut(shortcut)
            action.triggered.connect(slot)
            run_menu.addAction(action)
        run_menu.addSeparator()
        self.run_all_action = QAction(style.standardIcon(QStyle.StandardPixmap.SP_MediaSeekForward),
                                      "Run &all pages", self)
        self.run_all_action.setShortcut("Ctrl+F5")
        self.run_all_action.triggered.connect(self.run_all)
        run_menu.addAction(self.run_all_action)
        toolbar.addSeparator()
        toolbar.addAction(self.run_all_action)

        go_menu = menu.addMenu("&Go")
        for text, keys, slot in (("Next page", ("PgDown", "Ctrl+Right"), self.next_page),
                                 ("Previous page", ("PgUp", "Ctrl+Left"), self.previous_page)):
            action = QAction(text, self)
            action.setShortcuts([QKeySequence(k) for k in keys])
            action.triggered.connect(slot)
            go_menu.addAction(action)

    def _build_status(self) -> None:
        self.status_stage = QLabel("no page")
        self.status_iter = QLabel("")
        self.status_lines = QLabel("")
        self.status_elapsed = QLabel("")
        # The page's text scale and page area (stage 1-2): every size of the method hangs on
        # H_cc, so a wrong one (specks, rules) is the first thing to see.
        self.status_scale = QLabel("")
        self.status_scale.setToolTip("H_cc, W_cc: the text's height and width (pixels) that scale "
                                     "every size parameter; page: the share of the image found "
                                     "to be the page (layer 'Page area')")
        for w in (self.status_stage, self.status_scale, self.status_iter, self.status_lines,
                  self.status_elapsed):
            w.setMinimumWidth(110)
            self.statusBar().addPermanentWidget(w)

    def _restore_params(self) -> None:
        """The parameters of the last session, unless the shipped defaults changed since they
        were saved: then the new defaults, and a note of which remembered values were dropped
        (an old default saved with the rest must not pass for the user's choice)."""
        text = self.settings.value("params/json")
        if not text:
            return
        try:
            params = Parameters.from_json(str(text))
        except ParameterError as exc:
            self.banner.show_message(f"Saved parameters ignored: {exc}", "warning", sticky=True)
            return
        if self.settings.value("params/defaults_fingerprint") == defaults_fingerprint():
            self.param_panel.set_params(params)
            return
        saved = json.loads(str(text))
        old_defaults = _json_dict(self.settings.value("params/defaults_json"))
        dropped, changed = stale_parameters(saved, old_defaults)
        self.param_panel.set_params(Parameters())  # saved again, with the new fingerprint
        self.settings.setValue("params/dropped_json", str(text))
        parts = ["The default parameters changed since your parameters were saved"
                 + (f" ({', '.join(changed)})" if changed else "") + ": the new defaults are in use."]
        if dropped:
            parts.append(f"Remembered values dropped: {', '.join(dropped)}; re-enter them in the "
                         "Parameters panel if you still want them.")
        message = " ".join(parts)
        self.banner.show_message(message, "warning", sticky=True)
        self.statusBar().showMessage(message, 20000)

    def _connect_session(self) -> None:
        self.session.subscribe("current", self._on_session_current)
        self.session.subscribe("snapshot", self._on_session_snapshot)
        self.session.subscribe("cleared", self._on_session_cleared)
        self.session.subscribe("metrics", self._on_session_metrics)

    def _start_threads(self) -> None:
        self.engine_process = EngineProcess()
        self.engine = WorkerThread(EngineWorker(self.engine_process), "tlgui-engine")
        worker = self.engine.worker
        self.runJob.connect(worker.run)
        worker.stage.connect(self._on_stage)
        worker.prepared.connect(self._on_prepared)
        worker.snapshot.connect(self._on_snapshot)
        worker.finished.connect(self._on_finished)
        worker.failed.connect(self._on_failed)
        worker.done.connect(self._on_done)
        self.tasks = WorkerThread(TaskWorker(), "tlgui-tasks")
        self.runTask.connect(self.tasks.worker.run)
        self.tasks.worker.done.connect(self._on_task_done)
        self.tasks.worker.failed.connect(self._on_task_failed)
        self._task_handlers: dict[str, Callable[[Any], None]] = {}
        self._tasks_pending = 0

    @contextlib.contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        """Time a GUI-thread handler; the slow ones are kept for :mod:`tlgui.probe`."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            end = time.perf_counter()
            ms = (end - t0) * 1e3
            if ms > 20.0:
                self.slow_handlers.append((end, name, ms))

    # ================================================================ pages
    def choose_page(self) -> None:
        start = self.settings.value("dirs/page", "")
        path, _ = QFileDialog.getOpenFileName(
            self, "Open page", str(start),
            f"Images ({IMAGE_PATTERNS} *.webp);;All files (*)")
        if path:
            self.open_page(path)

    def open_page(self, path: str, saved: tuple[Path, str] | None = None) -> None:
        """Load a page (off the GUI thread); the current run, if any, is cancelled.  With
        ``saved`` (output folder, stem) its ``tlseg`` outputs are shown, and nothing runs."""
        path = os.path.abspath(path)
        self._leave_running_page()
        self._cancel_job()
        if not self.banner.sticky:
            self.banner.hide()
        self._set_stage("loading")
        self._pending_load = path
        self.engine_process.start()  # it imports while the page loads

        def load() -> tuple[Any, list[np.ndarray], Any]:
            page = load_page(path)
            result = None
            if saved is not None:
                outputs = engine_export.read_outputs(*saved)
                result = (outputs.seg, label_overlay(outputs.seg.labels), outputs.meta)
            return page, image_pyramid(page.gray), result

        self.submit_task("load", load, self._on_page_loaded)

    def _on_page_loaded(self, loaded: tuple[Any, list[np.ndarray], Any]) -> None:
        with self._timed("page loaded"):
            self._show_loaded_page(*loaded)

    def _show_loaded_page(self, page: Any, pyramid: list[np.ndarray], result: Any = None) -> None:
        path = os.path.abspath(page.path) if page.path else self._pending_load or ""
        if path != self._pending_load:
            return  # a newer open superseded this one
        self._pending_load = None
        self.page_gray = page.gray
        self.gt_labels = None
        self.gt_path = None
        self.undo.clear()
        self.session.open(path)
        self.canvas.set_page(pyramid)
        self.canvas.set_labels(None)
        self.canvas.set_mismatch(None)
        self.gt_panel.show_text("no ground truth loaded")
        self.gt_list.clear()
        self.edits.page_path = path
        restored = self.edits.restore(path)
        if not restored:
            self.edits.reset_to(np.zeros((0, 2, 2)), path)
        else:
            self.banner.show_message(f"Restored {len(self.edits.segments)} edited initial lines of this page "
                                     "(Edit ▸ Revert to the prepared lines to drop them).", "info")
        self.setWindowTitle(f"tlgui — {Path(path).name}")
        self._add_recent(path)
        self.settings.setValue("dirs/page", str(Path(path).parent))
        h, w = page.gray.shape[:2]
        self._set_stage(f"page {w}×{h}")
        self._prep_seconds = 0.0
        index = self.document.index_of(path)
        self.page_list.set_current(index)
        gt = self.document.pages[index].gt_path if index >= 0 else None
        if result is not None:  # saved outputs: shown as they are, the engine is not asked
            seg, overlay, meta = result
            self.session.set_finished(seg, overlay)
            self.canvas.set_labels(overlay)
            iterations = f", {meta['iterations']} EM iterations" if "iterations" in meta else ""
            self._set_stage(f"saved result: {len(seg.lines)} lines{iterations}")
            self.plots.show_note("A saved result: its EM iterations are not kept. Run shows them again.")
            self._update_buttons()
            pending, self._em_after_prep = self._em_after_prep, None
            if pending is not None:
                self._start_job(em=True, mode=pending)
        else:
            # Prepare at once so that the initial lines can be seen and edited before a run.
            self._start_job(em=False, mode=PAUSE)
        if gt:
            self.load_ground_truth(gt)
        self._run_all_next()  # "Run all" waited for this page to be shown

    def _rebuild_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.recent_files():
            action = QAction(path, self)
            action.setData(path)
            action.triggered.connect(self._on_recent)
            self.recent_menu.addAction(action)
        self.recent_menu.setEnabled(bool(self.recent_files()))

    def recent_files(self) -> list[str]:
        value = self.settings.value("recent", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or [])]

    def _add_recent(self, path: str) -> None:
        recent = [path] + [p for p in self.recent_files() if p != path]
        self.settings.setValue("recent", recent[:MAX_RECENT])
        self._rebuild_recent()

    def _on_recent(self) -> None:
        self.open_page(self.sender().data())

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if paths:
            self.open_paths(paths)
            event.acceptProposedAction()

    def open_paths(self, paths: list[str]) -> None:
        """One page file opens as a page; a folder or several files as a document."""
        if len(paths) == 1 and not Path(paths[0]).is_dir():
            self.open_page(paths[0])
        elif paths:
            self.open_document(paths)

    # ================================================================ documents
    def choose_folder(self) -> None:
        start = self.settings.value("dirs/page", "")
        folder = QFileDialog.getExistingDirectory(self, "Open a folder of pages (or of tlseg outputs)", str(start))
        if folder:
            self.open_document([folder])

    def choose_files(self) -> None:
        start = self.settings.value("dirs/page", "")
        paths, _ = QFileDialog.getOpenFileNames(
            self, "Open pages as a document", str(start),
            f"Images ({IMAGE_PATTERNS});;All files (*)")
        if paths:
            self.open_document(paths)

    def open_document(self, specs: list[str]) -> None:
        """Open folders and files as one document (found off the GUI thread); its first page
        is shown.  A folder of ``tlseg`` outputs shows its results without running."""
        self._stop_run_all()
        self._fm_queue = []
        specs = [os.path.abspath(s) for s in specs]
        root = results_dir()
        self._set_stage("opening document")
        self.submit_task("document", lambda: scan_document(specs, root), self._on_document)

    def _on_document(self, scanned: tuple[list[Any], Path, list[str]]) -> None:
        pages, outdir, warnings = scanned
        self.document.set_pages(pages, outdir)
        self.pages_dock.show()
        if warnings:
            self.banner.show_message("; ".join(warnings), "warning")
        if pages:
            self.show_page(0)
        else:
            self._set_stage("no page" if self.session.path is None else self.status_stage.text())
        # FM of the saved results, in the background: one page at a time, so that a page the
        # user opens meanwhile waits for one scoring at most (the task thread runs in order).
        self._fm_queue = [i for i, page in enumerate(pages) if page.saved and page.gt_path]
        self._score_next_saved()

    def _score_saved(self, index: int) -> None:
        """Score page ``index``'s saved outputs against its ground truth, after those queued."""
        self._fm_queue.append(index)
        if not self._fm_scoring:
            self._score_next_saved()

    def _score_next_saved(self) -> None:
        self._fm_scoring = bool(self._fm_queue)
        if not self._fm_queue:
            return
        index = self._fm_queue.pop(0)
        page, outdir = self.document.pages[index], self.document.outdir

        def on_fm(fm: float | None) -> None:
            if fm is not None and self.document.index_of(page.path) == index \
                    and self.document.pages[index].fm is None:
                self.document.update(index, fm=fm)
            self._score_next_saved()

        self.submit_task(f"saved fm {page.path}", lambda: saved_fm(outdir, page), on_fm)

    def current_index(self) -> int:
        """The document index of the page shown (-1 when it is not one of the document's)."""
        return self.document.index_of(self._pending_load or self.session.path)

    def show_page(self, index: int) -> None:
        """Open page ``index`` of the document: its saved outputs if it has them, else the
        page itself (prepared at once, as any opened page)."""
        page = self.document.pages[index]
        saved = (self.document.outdir, page.stem) if page.saved and self.document.outdir else None
        self.open_page(page.path, saved)
        self.page_list.set_current(index)

    @Slot(int)
    def go_to_page(self, index: int) -> None:
        """The user's choice of a page ("Run all" goes on in the background)."""
        if 0 <= index < len(self.document.pages) and index != self.current_index():
            self.show_page(index)

    def _step_page(self, delta: int) -> None:
        order = self.page_list.order()  # the list's order: after a sort by FM, the next worst
        if not order:
            return
        current = self.current_index()
        pos = order.index(current) + delta if current in order else 0
        self.go_to_page(order[max(0, min(len(order) - 1, pos))])

    def next_page(self) -> None:
        self._step_page(1)

    def previous_page(self) -> None:
        self._step_page(-1)

    def run_all(self) -> None:
        """Run every page not done yet, in the background, one at a time in the engine process,
        while the user looks at and edits any page.  The shown page, once prepared and idle,
        runs as a page the user runs (its snapshots drawn); every other page runs quietly
        (:attr:`Job.quiet`) and writes its outputs.  A page the user's own job waits for is
        run before the next background page.  A failed page is marked and the rest go on;
        Stop ends it."""
        self._run_queue = [i for i, p in enumerate(self.document.pages) if p.state not in (DONE, RUNNING)]
        if not self._run_queue:
            self.statusBar().showMessage("Every page is done.", 5000)
        self._run_all_next()

    def _run_all_next(self) -> None:
        """Start the next page of "Run all" when the engine is free (no job of the user's
        waiting or running, no background page running)."""
        if self._run_queue is None or self._closed:
            return
        if self._bg_job is not None or self._jobs_in_flight > 0 or self._pending_load is not None:
            return  # called again when that job is done / the page is shown
        self._run_queue = [i for i in self._run_queue if self.document.pages[i].state not in (DONE, RUNNING)]
        if not self._run_queue:
            self._run_queue = None
            self.statusBar().showMessage("Run all: finished.", 8000)
            self._update_buttons()
            return
        index = self._run_queue.pop(0)
        if index == self.current_index() and self.session.prep is not None \
                and not self.param_panel.needs_preparation():
            self.run()  # the shown, prepared page runs as it is, drawn as it goes
            self._show_run_all_progress()
            return
        page = self.document.pages[index]
        params = self.param_panel.params
        control = RunControl()
        control.set_mode(RUN)
        self._job_counter += 1
        outputs = (str(self.document.outdir), page.stem, {"source": page.path, "parameters": params.to_dict()})
        self._bg_job = Job(self._job_counter, page.path, params, control, None,
                           self.edits.saved_edits(page.path), True, outputs, quiet=True)
        self._bg_started = time.perf_counter()
        self._bg_result, self._bg_failure = None, ""
        self.document.update(index, state=RUNNING, error="", fm=None)
        self._jobs_in_flight += 1
        self.runJob.emit(self._bg_job)
        self._update_buttons()
        self._show_run_all_progress()

    def _leave_running_page(self) -> None:
        """The user leaves a page that runs while "Run all" is on: a document page running
        (not paused or stepping) runs on as the background page; another is cancelled and
        queued again."""
        if self.job is None or not self.job.em or self._run_queue is None:
            return
        index = self.document.index_of(self.job.path)
        if self._bg_job is None and self.job.outputs is not None and self.job.control.mode == RUN:
            self._bg_job, self._bg_started = self.job, self._job_started
            self._bg_result, self._bg_failure = None, ""
            self.job.control.set_mode(RUN_QUIET)  # no more snapshots: only its result fills its row
            self.job = None
        elif index >= 0 and index not in self._run_queue:
            self._run_queue.insert(0, index)

    def _show_run_all_progress(self) -> None:
        """The status bar: which pages run and how many are done (kept until the next change)."""
        pages = self.document.pages
        running = ", ".join(p.name for p in pages if p.state == RUNNING)
        done = sum(p.state == DONE for p in pages)
        self.statusBar().showMessage(f"Run all: {done} of {len(pages)} pages done"
                                     + (f"; running {running}" if running else ""))

    def _stop_run_all(self) -> None:
        if self._run_queue is not None or self._bg_job is not None:
            self._run_queue = None
            if self._bg_job is not None:
                self._bg_job.control.cancel()
            self.statusBar().showMessage("Run all: stopped.", 8000)
            self._update_buttons()

    def _is_bg(self, job_id: int) -> bool:
        return self._bg_job is not None and self._bg_job.id == job_id

    def _bg_done(self, status: str) -> None:
        """The background page's job ended: its row, and its result drawn if it is shown."""
        job, result = self._bg_job, self._bg_result
        self._bg_job, self._bg_result = None, None
        index = self.document.index_of(job.path)
        if status == "finished" and result is not None and index >= 0:
            seg, rgba = result
            self.document.update(index, state=DONE, lines=len(seg.lines), error="", saved=True,
                                 seconds=time.perf_counter() - self._bg_started)
            if self.document.pages[index].gt_path:
                self._score_saved(index)
            if index == self.current_index() and not (self.job is not None and self.job.em):
                self._show_background_result(index, seg, rgba)
        elif status == "failed" and index >= 0:
            self.document.update(index, state=FAILED, error=self._bg_failure or "the engine failed",
                                 lines=None, fm=None)
        else:
            self._revert_running(job.path)
        if self._run_queue is not None:
            self._show_run_all_progress()

    def _show_background_result(self, index: int, seg: Any, rgba: Any) -> None:
        """The shown page finished in the background: draw it (reopened from its outputs if
        the user's preparation of it is still to come, which would clear it)."""
        if self.job is not None or self._pending_load is not None or self.session.path is None:
            self.show_page(index)
            return
        with self._timed("background result"):
            self.session.set_finished(seg, rgba)
            self.canvas.set_labels(rgba)
            self.canvas.set_merges(getattr(seg, "merges", ()))
        self._set_stage(f"finished in the background: {len(seg.lines)} lines")
        if not self.session.snapshots:
            self.plots.show_note("Run in the background: its EM iterations are not kept. Run shows them.")
        if self.gt_labels is not None:
            self._score_ground_truth()

    def _page_ended(self, path: str | None, state: str, error: str = "", saved: bool = False) -> None:
        """The shown page's run ended (``state`` done, failed, or not run when cancelled):
        update the document (``saved``: the engine wrote the outputs)."""
        index = self.document.index_of(path)
        if index >= 0:
            if state == DONE and self.session.segmentation is not None:
                self.document.update(index, state=DONE, lines=len(self.session.segmentation.lines),
                                     seconds=self._page_seconds, error="",
                                     saved=saved or self.document.pages[index].saved)
            elif state == FAILED:
                self.document.update(index, state=FAILED, error=error, lines=None, fm=None)
            else:
                self._revert_running(path)
        if self._run_queue is not None:
            self._show_run_all_progress()
    def _revert_running(self, path: str | None) -> None:
        """A page whose run was cancelled is what it was before (done if it has outputs)."""
        index = self.document.index_of(path)
        if index >= 0 and self.document.pages[index].state == RUNNING:
            self.document.update(index, state=DONE if self.document.pages[index].saved else NOT_RUN)

    def _on_session_metrics(self, metrics: Metrics | None) -> None:
        index = self.document.index_of(self.session.path)
        if index >= 0 and metrics is not None:
            self.document.update(index, fm=float(metrics.score.fm))

    # ================================================================ jobs
    def is_busy(self) -> bool:
        """Whether an engine job or a task (load, export, scoring) is under way."""
        return self.job is not None or self._jobs_in_flight > 0 or self._tasks_pending > 0

    def settled(self) -> bool:
        """Everything drawn: canvas, table and plots show the displayed snapshot."""
        return not (self._draw_pending or self._series_pending or self._slow_stale or self._slow_queue)

    def _start_job(self, em: bool, mode: str) -> None:
        if self.session.path is None:
            self.banner.show_message(
                "Open a page first (File ▸ Open, drop a file, or a command-line argument).", "warning")
            return
        params = self.param_panel.params
        prep = self.session.prep
        if prep is not None and self.param_panel.needs_preparation():
            prep = None  # a stage 1-6 parameter changed: prepare again
        self._job_counter += 1
        control = RunControl()
        control.set_mode(mode)
        segments = self.edits.segments.copy() if (em and self.edits.edited) else None
        index = self.document.index_of(self.session.path)
        outputs = None
        if em and index >= 0 and self.document.outdir is not None:
            # A document's page: the engine writes its outputs, to be shown without a re-run.
            page = self.document.pages[index]
            outputs = (str(self.document.outdir), page.stem, {"source": page.path,
                                                             "parameters": params.to_dict()})
        self.job = Job(self._job_counter, self.session.path, params, control, prep, segments, em, outputs)
        if self._bg_job is not None:
            self._set_stage(f"waiting for the engine (running {Path(self._bg_job.path).name} in the background)")
        if em:
            self.session.clear_run()
            self.session.run_params = params
            self.document.update(index, state=RUNNING, error="", fm=None)
            self.canvas.set_labels(None)
            self.canvas.set_mismatch(None)
        self.editor.set_enabled(False)
        self._job_started = time.perf_counter()
        self._failure = ""
        self._update_buttons()
        self._jobs_in_flight += 1
        self.runJob.emit(self.job)

    def _cancel_job(self) -> None:
        self._em_after_prep = None
        if self.job is not None:
            if self.job.em:
                self._revert_running(self.job.path)
            self.job.control.cancel()
            self.job = None
            self._update_buttons()

    def _active(self, job_id: int) -> bool:
        return self.job is not None and self.job.id == job_id

    def run(self) -> None:
        if self.job is not None and self.job.em:
            self.job.control.set_mode(RUN)
        else:
            self._start_em(RUN)
        self._update_buttons()

    def pause(self) -> None:
        if self.job is not None and self.job.em:
            self.job.control.set_mode(PAUSE)
        self._update_buttons()

    def step_em(self) -> None:
        if self.job is not None and self.job.em:
            self.job.control.set_mode(STEP_EM)
        else:
            self._start_em(STEP_EM)

    def step_sweep(self) -> None:
        if self.job is not None and self.job.em:
            self.job.control.set_mode(STEP_SWEEP)
        else:
            self._start_em(STEP_SWEEP)

    def _start_em(self, mode: str) -> None:
        if self._pending_load is not None or (self.job is not None and not self.job.em):
            # The page is being loaded or prepared: run as soon as it is prepared.
            self._em_after_prep = mode
            return
        self._start_job(em=True, mode=mode)

    def stop(self) -> None:
        """Cancel the run and "Run all": the engine notices within one message-passing sweep
        or preparation stage, else its process is killed after engine_process.GRACE_S."""
        self._stop_run_all()
        if self.job is not None:
            self._cancel_job()
            self._set_stage("stopped")

    def reset(self) -> None:
        """Cancel and forget the run; the page, preparation and edits stay."""
        self._cancel_job()
        self.session.clear_run()
        self.canvas.set_labels(None)
        self.canvas.set_mismatch(None)
        self.canvas.show_snapshot(None)
        self._set_stage("ready" if self.session.prep is not None else "page")

    # ---------------------------------------------------------------- worker slots
    @Slot(int, str)
    def _on_stage(self, job_id: int, text: str) -> None:
        if self._active(job_id):
            self._set_stage(text)

    @Slot(int, object, object)
    def _on_prepared(self, job_id: int, prep: Any, geometry: Any) -> None:
        if self._active(job_id):
            with self._timed("prepared"):
                self._show_prepared(prep, geometry)

    def _show_prepared(self, prep: Any, geometry: Any) -> None:
        self.job.prep = prep
        self.session.set_prepared(prep)
        self.param_panel.prepared_with = prep.params
        self.param_panel.show_status()
        self.canvas.set_prep(prep, geometry)
        self.status_scale.setText(scale_text(prep))
        if not self.edits.edited:
            self.edits.reset_to(prep.initial_lines.segments(), self.session.path)
        else:
            self.canvas.set_initial_segments(self.edits.segments)
        if self.gt_labels is not None and self.gt_labels.shape != prep.shape:
            self.gt_labels = None
        self._set_stage("prepared")

    @Slot(int, object)
    def _on_snapshot(self, job_id: int, snap: Any) -> None:
        if not self._active(job_id):
            return
        follow = self.session.current < 0 or self.session.at_end()
        self.session.add_snapshot(snap, follow=follow)
        self._update_buttons()  # a step may have ended in the worker (it pauses itself)

    @Slot(int, object, object)
    def _on_finished(self, job_id: int, seg: Any, rgba: Any) -> None:
        if self._is_bg(job_id):
            self._bg_result = (seg, rgba)
        if not self._active(job_id):
            return
        with self._timed("finished"):
            self.session.set_finished(seg, rgba)
            self.canvas.set_labels(rgba)
            self.canvas.set_merges(getattr(seg, "merges", ()))
        self._set_stage(f"finished: {len(seg.lines)} lines")
        if self.gt_labels is not None:
            self._score_ground_truth()

    @Slot(int, str)
    def _on_failed(self, job_id: int, message: str) -> None:
        if self._is_bg(job_id):
            self._bg_failure = message
        if self._active(job_id):
            self._failure = message
            self.banner.show_message(f"The engine failed: {message}")

    @Slot(int, str)
    def _on_done(self, job_id: int, status: str) -> None:
        self._jobs_in_flight -= 1
        if self._is_bg(job_id):
            self._bg_done(status)
        if not self._active(job_id):
            self._run_all_next()
            if not self.is_busy():
                self.editor.set_enabled(True)
                self.idle.emit()
            return
        if status == "cancelled":
            self._set_stage("stopped")
        elif status == "failed":
            self._set_stage("failed")
        was_prep_only = not self.job.em
        wrote = self.job.outputs is not None
        seconds = time.perf_counter() - self._job_started
        self.job = None
        self.editor.set_enabled(True)
        self._update_buttons()
        self._draw_pending = True
        pending, self._em_after_prep = self._em_after_prep, None
        if was_prep_only and status == "finished":
            self._prep_seconds = seconds
            if pending is not None:
                self._start_job(em=True, mode=pending)
                return
        if status == "failed":
            self._page_ended(self.session.path, FAILED, self._failure or "the engine failed")
        elif not was_prep_only:
            self._page_seconds = self._prep_seconds + seconds
            self._page_ended(self.session.path, DONE if status == "finished" else NOT_RUN, saved=wrote)
        self._run_all_next()
        self.idle.emit()

    # ================================================================ tasks
    def submit_task(self, tag: str, fn: Callable[[], Any], on_done: Callable[[Any], None]) -> None:
        """Run ``fn`` on the task thread; ``on_done(result)`` runs in the GUI thread."""
        self._task_handlers[tag] = on_done
        self._tasks_pending += 1
        self.runTask.emit(tag, fn)

    @Slot(str, object)
    def _on_task_done(self, tag: str, result: Any) -> None:
        self._tasks_pending -= 1
        handler = self._task_handlers.pop(tag, None)
        try:
            if handler is not None:
                with self._timed(f"task {tag}"):
                    handler(result)
        except Exception as exc:  # noqa: BLE001 - a bug shown in the window beats a dead window
            traceback.print_exc()
            self.banner.show_message(f"Internal error after {tag}: {exc}")
        finally:
            if not self.is_busy():
                self.idle.emit()

    @Slot(str, str)
    def _on_task_failed(self, tag: str, message: str) -> None:
        self._tasks_pending -= 1
        self._task_handlers.pop(tag, None)
        what = {"load": "Cannot open the page", "gt": "Cannot use the ground truth"}.get(tag, f"{tag} failed")
        if tag == "load":
            failed_path, self._pending_load = self._pending_load, None
            self._em_after_prep = None
            self._set_stage("no page" if self.session.path is None else self.status_stage.text())
            self._page_ended(failed_path, FAILED, message)
        self.banner.show_message(f"{what}: {message}")
        if not self.is_busy():
            self.idle.emit()

    # ================================================================ drawing
    def _on_session_snapshot(self, _index: int) -> None:
        self._series_pending = True

    def _on_session_current(self, _index: int) -> None:
        self._draw_pending = True

    def _on_session_cleared(self) -> None:
        self.plots.show_note(None)
        self._draw_pending = True
        self._series_pending = True
        self.plots.reset_ranges()

    def _on_draw_tick(self) -> None:
        """At most ~30 times a second: draw the displayed snapshot if it changed."""
        with self._timed("draw"):
            self._draw_tick()

    def _draw_tick(self) -> None:
        """Draw the canvas when the displayed snapshot changed; otherwise do one piece of the
        slow work (one plot, or the table).  While the engine thread runs, every call from Qt
        into Python waits for the GIL, so a repaint's cost grows with the number of Python
        items in it: spreading the widgets over ticks keeps each repaint, and so each gap,
        small.  During a run the slow widgets follow at most every PLOT_INTERVAL_S."""
        now = time.perf_counter()
        if self._series_pending:
            self._series_pending = False
            n = len(self.session.snapshots)
            self.slider.blockSignals(True)
            self.slider.setRange(0, max(0, n - 1))
            self.slider.setValue(max(0, self.session.current))
            self.slider.blockSignals(False)
        if self._draw_pending:
            self._draw_pending = False
            self.draw_current(slow=False)
            self._slow_stale = True
        elif self._slow_queue:
            job = self._slow_queue.pop(0)
            job()
        elif self._slow_stale:
            running = self.job is not None and self.job.em and self.job.control.mode == RUN
            if not running or now - self._last_slow_draw >= PLOT_INTERVAL_S:
                self._slow_stale = False
                self._last_slow_draw = now
                self._queue_slow_work()
        if self.job is not None:
            self.status_elapsed.setText(f"{time.perf_counter() - self._job_started:6.1f} s")

    def _queue_slow_work(self) -> None:
        series = self.session.series()
        snap = self.session.current_snapshot()
        marker = snapshot_x(snap) if snap is not None else None

        def plot(key: str) -> Callable[[], None]:
            return lambda: self.plots.update_plot(key, series, marker)

        self._slow_queue = [self._draw_table] + [plot(key) for key in self.plots.plots]

    def draw_current(self, slow: bool = True) -> None:
        """Draw the session's displayed snapshot: canvas and labels now; the table and the
        plots' marker too when ``slow`` (else at the next slow tick)."""
        snap = self.session.current_snapshot()
        if snap is not None and self._selected >= len(snap.lines):
            self._selected = -1
        self.canvas.selected = self._selected
        self.canvas.show_snapshot(snap)
        if slow:
            self._draw_slow()
        n = len(self.session.snapshots)
        if snap is None:
            self.slider_label.setText("no run")
            self.lines_title.setText("Lines")
            self.status_iter.setText("")
            self.status_lines.setText("")
            return
        sweep = f" · sweep {snap.sweep}" if snap.sweep is not None else ""
        self.slider_label.setText(f"{self.session.current + 1}/{n} · it {snap.iteration}{sweep}")
        preset = self.session.run_params.preset_summary() if self.session.run_params else "default"
        self.lines_title.setText(f"Lines at iteration {snap.iteration}{sweep} · preset {preset}")
        self.status_iter.setText(f"iteration {snap.iteration}{sweep}")
        self.status_lines.setText(f"{len(snap.lines)} lines")

    def _draw_slow(self) -> None:
        """Table and plots at once (when the user scrubs or steps, not during a run)."""
        self._slow_stale = False
        self._slow_queue = []
        self._draw_table()
        snap = self.session.current_snapshot()
        self.plots.set_series(self.session.series(), snapshot_x(snap) if snap is not None else None)

    def _draw_table(self) -> None:
        snap, seg = self.session.current_snapshot(), self.session.segmentation
        lines = snap.lines if snap is not None else (seg.lines if seg is not None else None)
        self.line_table.set_lines(lines, self._selected)  # a saved result has lines, no snapshot

    def _on_slider(self, value: int) -> None:
        self.session.set_current(value)

    def _set_stage(self, text: str) -> None:
        self.session.set_stage(text)
        self.status_stage.setText(text)

    def _update_buttons(self) -> None:
        running = self.job is not None and self.job.em
        mode = self.job.control.mode if running else None
        has_page = self.session.path is not None
        self.buttons["run"].setEnabled(has_page and mode != RUN)
        self.buttons["pause"].setEnabled(running and mode == RUN)
        self.buttons["step"].setEnabled(has_page and mode != RUN)
        self.buttons["sweep"].setEnabled(has_page and mode != RUN)
        self.buttons["stop"].setEnabled(self.job is not None or self._run_queue is not None
                                        or self._bg_job is not None)
        self.buttons["reset"].setEnabled(has_page)

    # ================================================================ selection and layers
    def select_line(self, index: int) -> None:
        self._selected = index
        self.canvas.set_selected(index)
        self.line_table.select_line(index)

    def _on_line_clicked(self, index: int) -> None:
        if self.editor.mode == "off":
            self.select_line(index)

    def _on_table_selection(self, index: int) -> None:
        self._selected = index
        self.canvas.set_selected(index)

    def _on_edit_selection(self, index: int) -> None:
        if 0 <= index < len(self.edits.segments):
            (x0, y0), (x1, y1) = self.edits.segments[index]
            angle = np.degrees(np.arctan2(y1 - y0, x1 - x0))
            self.statusBar().showMessage(
                f"initial line {index}: ({x0:.0f}, {y0:.0f}) – ({x1:.0f}, {y1:.0f}), "
                f"length {np.hypot(x1 - x0, y1 - y0):.0f} px, angle {angle:+.1f}°", 8000)

    def _on_editor_message(self, text: str) -> None:
        if text:
            self.statusBar().showMessage(text, 6000)

    def _restore_layers(self) -> None:
        """Layer switches and opacities as the user left them (QSettings)."""
        panel = self.layer_panel
        for name, check in panel.checks.items():
            visible = self.settings.value(f"layers/{name}/visible")
            if visible is not None:
                check.setChecked(str(visible).lower() in ("true", "1"))
            opacity = self.settings.value(f"layers/{name}/opacity")
            if opacity is not None:
                panel.sliders[name].setValue(int(opacity))
        mode = self.settings.value("layers/posterior_mode")
        if mode is not None and 0 <= int(mode) < panel.mode.count():
            panel.mode.setCurrentIndex(int(mode))

    def _on_layer_visible(self, name: str, visible: bool) -> None:
        self.settings.setValue(f"layers/{name}/visible", visible)
        self.canvas.set_layer_visible(name, visible)
        if name == "initial":
            self.editor._sync_rois()

    def _on_layer_opacity(self, name: str, opacity: float) -> None:
        self.settings.setValue(f"layers/{name}/opacity", int(round(opacity * 100)))
        self.canvas.set_layer_opacity(name, opacity)

    def _on_posterior_mode(self, mode: str) -> None:
        self.settings.setValue("layers/posterior_mode", self.layer_panel.mode.currentIndex())
        self.canvas.set_posterior_mode(mode)

    # ================================================================ editing
    def _on_mode_action(self) -> None:
        mode = self.sender().data()
        for m, action in self.mode_actions.items():
            action.setChecked(m == mode)
        self.set_edit_mode(mode)

    def set_edit_mode(self, mode: str) -> None:
        self.editor.set_mode(mode)
        for m, action in self.mode_actions.items():
            action.setChecked(m == mode)

    def _delete_selected(self) -> None:
        self.editor.delete(self.editor.selected)

    def _rotate_left(self) -> None:
        self.editor.rotate_selected(-2.0)

    def _rotate_right(self) -> None:
        self.editor.rotate_selected(2.0)

    def revert_edits(self) -> None:
        """Drop the edits: back to the preparation's initial lines (undoable)."""
        prep = self.session.prep
        if prep is None:
            return
        from .edit import SegmentsCommand

        self.undo.push(SegmentsCommand(self.edits, self.edits.segments, prep.initial_lines.segments(),
                                       "revert edits"))
        self.edits.edited = False
        self.edits.autosave()

    def choose_save_edits(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save edited lines", "", "JSON (*.json)")
        if path:
            self.save_edits(path)

    def save_edits(self, path: str) -> None:
        with engine_export.atomic_path(path) as tmp:
            Path(tmp).write_text(self.edits.to_json(), encoding="utf-8")

    def choose_load_edits(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load edited lines", "", "JSON (*.json)")
        if path:
            self.load_edits(path)

    def load_edits(self, path: str) -> None:
        try:
            page, segments, _edited = EditModel.parse(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self.banner.show_message(f"Cannot load edited lines from {path}: {exc}")
            return
        if page and self.session.path and os.path.abspath(page) != self.session.path:
            self.banner.show_message(f"These lines were drawn on {page}; applied to the open page anyway.",
                                     "warning")
        from .edit import SegmentsCommand

        self.undo.push(SegmentsCommand(self.edits, self.edits.segments, segments, "load edited lines"))

    # ================================================================ parameters
    def _on_params_changed(self, params: Parameters) -> None:
        self._save_params(params)

    def _save_params(self, params: Parameters) -> None:
        """The parameters, with the defaults they were chosen against (see _restore_params)."""
        self.settings.setValue("params/json", params.to_json())
        self.settings.setValue("params/defaults_json", Parameters().to_json())
        self.settings.setValue("params/defaults_fingerprint", defaults_fingerprint())

    # ================================================================ ground truth
    def choose_ground_truth(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Load ground truth", str(Path(self.session.path or "").parent),
            "Ground truth (*.png *.tif *.tiff *.dat *.xml);;All files (*)")
        if path:
            self.load_ground_truth(path)

    def load_ground_truth(self, path: str) -> None:
        """Read a ground truth (label image, .dat, PAGE or ALTO XML) off the GUI thread and
        score the final labels against it, the way ``engine.evaluate`` scores result files
        (same ink, same scored pixels), so the window's FM is the batch FM."""
        page_path = self.session.path
        if self.page_gray is None or page_path is None:
            self.banner.show_message("Open a page before loading its ground truth.", "warning")
            return
        shape = self.page_gray.shape[:2]

        def read() -> tuple[np.ndarray, np.ndarray]:
            return read_truth(path, page_path, shape)

        def on_gt(out: tuple[np.ndarray, np.ndarray]) -> None:
            self.gt_labels, self.gt_ink = out
            self.gt_path = path
            if self.session.segmentation is not None:
                self._score_ground_truth()
            else:
                self.gt_panel.show_text(f"<b>{Path(path).name}</b>: {int(self.gt_labels.max())} lines; "
                                        "scored when the run finishes")

        self.submit_task("gt", read, on_gt)

    def _score_ground_truth(self) -> None:
        seg, gt, ink, gt_path = self.session.segmentation, self.gt_labels, self.gt_ink, self.gt_path
        if seg is None or gt is None:
            return

        def score() -> tuple[Any, np.ndarray, list[np.ndarray]]:
            from engine.metric import contest_metric

            result = contest_metric(gt, seg.labels, ink=ink)
            m = len(seg.lines)
            matched = np.zeros(m + 1, dtype=bool)
            ids = result.per_gt_match[result.per_gt_match > 0]
            matched[ids[ids <= m]] = True
            bad = np.flatnonzero(~matched[1:]) + 1
            mask = np.isin(seg.labels, bad)
            rgba = np.zeros(mask.shape + (4,), dtype=np.uint8)
            rgba[mask] = (255, 0, 60, 255)
            return result, matched[1:], image_pyramid(rgba)

        def on_score(out: tuple[Any, np.ndarray, np.ndarray]) -> None:
            result, matched, rgba = out
            if self.session.segmentation is not seg:
                return
            self.session.set_metrics(Metrics(result, matched, gt_path or ""))
            self.gt_panel.show_score(result, Path(gt_path or "").name)
            self.canvas.set_mismatch(rgba)
            self.gt_list.clear()
            for k, ok in enumerate(matched, start=1):
                item = QListWidgetItem(f"result line {k}: {'matched' if ok else 'NOT matched'}")
                if not ok:
                    item.setForeground(Qt.GlobalColor.red)
                self.gt_list.addItem(item)

        self.submit_task("score", score, on_score)

    # ================================================================ export
    def _on_export_action(self) -> None:
        kind = self.sender().data()
        title, filt, suffix = EXPORTS[kind]
        stem = Path(self.session.path or "page").with_suffix("")
        path, _ = QFileDialog.getSaveFileName(self, title.rstrip("…"), str(stem) + suffix, filt)
        if path:
            self.export(kind, path)

    def export(self, kind: str, path: str) -> None:
        """Write one export atomically (heavy ones off the GUI thread); errors go to the banner."""
        if kind == "view_png":
            image = self.canvas.grab().toImage()
            with engine_export.atomic_path(path) as tmp:
                if not image.save(str(tmp), "PNG"):
                    self.banner.show_message(f"Could not write {path}")
                    raise OSError(f"could not write {path}")
            return
        seg = self.session.segmentation
        if kind != "json" and seg is None:
            self.banner.show_message("Nothing to export yet: run the segmentation to the end first.",
                                     "warning")
            return
        params = self.session.run_params or self.param_panel.params
        page_path = self.session.path or ""
        snap = self.session.current_snapshot()
        edits = self.edits.segments.copy() if self.edits.edited else None

        def write() -> str:
            if kind == "colour_png":
                engine_export.write_png(path, engine_export.colour_labels(seg.labels))
            elif kind == "label_png16":
                engine_export.write_label_png(path, seg.labels)
            elif kind == "dat":
                engine_export.write_dat(path, seg.labels)
            elif kind == "page_xml":
                engine_export.write_page_xml(path, seg, Path(page_path).name, seg.labels.shape,
                                             params.preset_name)
            elif kind == "alto_xml":
                engine_export.write_alto_xml(path, seg, Path(page_path).name, seg.labels.shape)
            elif kind == "json":
                data = {
                    "page": page_path,
                    "parameters": params.to_dict(),
                    "final_lines": seg.lines.to_dict() if seg is not None else None,
                    "snapshot": None if snap is None else {
                        "iteration": snap.iteration, "sweep": snap.sweep, "lines": snap.lines.to_dict()},
                    "edited_initial_lines": None if edits is None else np.round(edits, 3).tolist(),
                }
                with engine_export.atomic_path(path) as tmp:
                    Path(tmp).write_text(json.dumps(data, indent=1), encoding="utf-8")
            else:
                raise ValueError(f"unknown export {kind!r}")
            return path

        def on_written(written: str) -> None:
            self.statusBar().showMessage(f"wrote {written}", 5000)

        self.submit_task(f"export {kind}", write, on_written)

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
        self.settings.setValue("window/geometry", self.saveGeometry())
        self._save_params(self.param_panel.params)
        self.settings.sync()
        self.draw_timer.stop()
        self._cancel_job()
        # Nothing from the workers may reach this window once it is being torn down.
        for signal in (self.engine.worker.stage, self.engine.worker.prepared, self.engine.worker.snapshot,
                       self.engine.worker.finished, self.engine.worker.failed, self.engine.worker.done,
                       self.tasks.worker.done, self.tasks.worker.failed):
            signal.disconnect()
        self.engine.stop()
        self.engine_process.close()
        self.tasks.stop()
        self.editor.close()
        self.canvas.close_items()
        self.plots.close_plots()
        self.canvas.close()
