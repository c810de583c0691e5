"""Drawing the session's displayed snapshot: the canvas at once, the line table and the plots a
piece at a time.

Snapshots are appended to the session as they come, but drawn by a 30 Hz timer, and only the
displayed one, so a fast engine never floods the GUI thread.  While the engine runs, every call
from Qt into Python waits for the GIL, so a repaint's cost grows with the number of Python items
in it: the slow widgets (table, each plot) are spread over successive ticks, at most every
:data:`PLOT_INTERVAL_S` during a run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from engine.model import LineSet

from .canvas import PageCanvas
from .edit import LineEditor
from .linetable import LineTable
from .panels import PlotsPanel
from .session import EditModel, Session, line_count, snapshot_x
from .tasks import HandlerTimes
from .widgets import RunControls, StatusFields

DRAW_INTERVAL_MS = 33
PLOT_INTERVAL_S = 0.5  # slow widgets during a run: fast enough to follow, leaves time to the engine


class SnapshotPresenter(QObject):
    """Keeps the canvas, slider, line table, plots and status fields on the displayed snapshot,
    and the selected line the same on canvas and table.  ``running()`` says whether an EM run
    is going (the slow widgets are then throttled), ``elapsed()`` the job's seconds.

    The line table shows the initial lines while they are edited (or before any run), the
    final lines once the run finished and the last snapshot is shown (so the table and the
    ground-truth score count the same lines), else the displayed snapshot's lines."""

    def __init__(self, session: Session, edits: EditModel, editor: LineEditor, canvas: PageCanvas,
                 controls: RunControls, table: LineTable, title: object, plots: PlotsPanel, status: StatusFields,
                 times: HandlerTimes, running: Callable[[], bool], elapsed: Callable[[], float | None]) -> None:
        super().__init__()
        self.session = session
        self.edits = edits
        self.editor = editor
        self.canvas = canvas
        self.controls = controls
        self.table = table
        self.title = title
        self.plots = plots
        self.status = status
        self.times = times
        self._running = running
        self._elapsed = elapsed
        self.draw_pending = False
        self.series_pending = False
        self._slow_stale = False  # table and plots lag behind the displayed snapshot
        self._slow_queue: list[Callable[[], None]] = []
        self._last_slow_draw = 0.0
        self.selected = -1
        session.subscribe("current", self._on_current)
        session.subscribe("snapshot", self._on_snapshot)
        session.subscribe("cleared", self._on_cleared)
        session.subscribe("finished", self._on_finished)
        session.subscribe("metrics", self._on_finished)
        edits.subscribe("changed", self.refresh)
        controls.slider.valueChanged.connect(self._on_slider)
        table.lineSelected.connect(self._on_table_selection)
        editor.selectionChanged.connect(self._on_editor_selection)
        self.timer = QTimer(self)
        self.timer.setInterval(DRAW_INTERVAL_MS)
        self.timer.timeout.connect(self._on_tick)
        self.timer.start()

    def settled(self) -> bool:
        """Everything drawn: canvas, table and plots show the displayed snapshot."""
        return not (self.draw_pending or self.series_pending or self._slow_stale or self._slow_queue)

    # --- session events ----------------------------------------------------------------------
    def _on_snapshot(self, _index: int) -> None:
        self.series_pending = True

    def _on_current(self, _index: int) -> None:
        self.draw_pending = True

    def _on_cleared(self) -> None:
        self.plots.show_note(None)
        self.draw_pending = True
        self.series_pending = True
        self.plots.reset_ranges()

    def _on_finished(self, *_args: object) -> None:
        self.draw_pending = True

    def refresh(self) -> None:
        """Redraw what depends on more than the snapshot (the edited lines, the edit mode)."""
        self.draw_pending = True

    def _on_slider(self, value: int) -> None:
        self.session.set_current(value)

    # --- the timer -----------------------------------------------------------------------------
    def _on_tick(self) -> None:
        """At most ~30 times a second: draw the displayed snapshot if it changed."""
        with self.times.timed("draw"):
            self._tick()

    def _tick(self) -> None:
        """Draw the canvas when the displayed snapshot changed; otherwise do one piece of the
        slow work (one plot, or the table)."""
        now = time.perf_counter()
        if self.series_pending:
            self.series_pending = False
            self.controls.set_snapshot_count(len(self.session.snapshots), self.session.current)
        if self.draw_pending:
            self.draw_pending = False
            self.draw_current(slow=False)
            self._slow_stale = True
        elif self._slow_queue:
            job = self._slow_queue.pop(0)
            job()
        elif self._slow_stale:
            if not self._running() or now - self._last_slow_draw >= PLOT_INTERVAL_S:
                self._slow_stale = False
                self._last_slow_draw = now
                self._queue_slow_work()
        elapsed = self._elapsed()
        if elapsed is not None:
            self.status.elapsed.setText(f"{elapsed:6.1f} s")

    def _queue_slow_work(self) -> None:
        series = self.session.series()
        snap = self.session.current_snapshot()
        marker = snapshot_x(snap) if snap is not None else None

        def plot(key: str) -> Callable[[], None]:
            return lambda: self.plots.update_plot(key, series, marker)

        self._slow_queue = [self._draw_table] + [plot(key) for key in self.plots.plots]

    def table_source(self) -> tuple[LineSet | None, str]:
        """What the line table shows: (lines, "initial" | "final" | "snapshot")."""
        snap, seg = self.session.current_snapshot(), self.session.segmentation
        if self.editor.mode != "off" or (snap is None and seg is None):
            return (self.edits.lines if self.edits.prepared is not None else None), "initial"
        if seg is not None and (snap is None or self.session.at_end()):
            return seg.lines, "final"
        return snap.lines, "snapshot"

    def draw_current(self, slow: bool = True) -> None:
        """Draw the session's displayed snapshot: canvas and labels now; the table and the
        plots' marker too when ``slow`` (else at the next slow tick)."""
        snap = self.session.current_snapshot()
        lines, kind = self.table_source()
        final = self.session.segmentation.lines if kind == "final" else None
        drawn = final if final is not None else (None if snap is None else snap.lines)
        if drawn is not None and self.selected >= len(drawn):
            self.selected = -1
        self.canvas.selected = self.selected if kind != "initial" else -1
        bends = getattr(self.session.segmentation, "paths", None) if final is not None else None
        self.canvas.show_snapshot(snap, final, bends)
        if slow:
            self._draw_slow()
        n = len(self.session.snapshots)
        preset = self.session.run_params.preset_summary() if self.session.run_params else "default"
        self.title.setText(self._title(kind, lines, snap, preset))
        self.status.lines.setText("" if lines is None else line_count(lines))
        if snap is None:
            self.controls.label.setText("no run")
            self.status.iteration.setText("")
            return
        sweep = f" · sweep {snap.sweep}" if snap.sweep is not None else ""
        self.controls.label.setText(f"{self.session.current + 1}/{n} · it {snap.iteration}{sweep}")
        self.status.iteration.setText(f"iteration {snap.iteration}{sweep}")

    def _title(self, kind: str, lines: LineSet | None, snap: object, preset: str) -> str:
        if kind == "initial":
            if lines is None:
                return "Lines"
            state = "edited" if self.edits.edited else "as prepared"
            locked = int(lines.locked.sum())
            return f"Initial lines ({line_count(lines)}, {state}" + (f", {locked} locked)" if locked else ")")
        if kind == "final":
            return f"Final lines ({len(lines)}, after labelling) · preset {preset}"
        sweep = f" · sweep {snap.sweep}" if snap.sweep is not None else ""
        pieces = f" ({line_count(lines)})" if lines is not None and lines.text_line_count() < len(lines) else ""
        return f"Lines at iteration {snap.iteration}{sweep}{pieces} · preset {preset}"

    def _draw_slow(self) -> None:
        """Table and plots at once (when the user scrubs or steps, not during a run)."""
        self._slow_stale = False
        self._slow_queue = []
        self._draw_table()
        snap = self.session.current_snapshot()
        self.plots.set_series(self.session.series(), snapshot_x(snap) if snap is not None else None)

    def _draw_table(self) -> None:
        lines, kind = self.table_source()
        metrics = self.session.metrics
        matched = metrics.matched_result if kind == "final" and metrics is not None else None
        selected = self.editor.selected if kind == "initial" else self.selected
        self.table.set_lines(lines, selected, matched, editable=kind == "initial")

    # --- selection -----------------------------------------------------------------------------
    def select_line(self, index: int) -> None:
        self.selected = index
        self.canvas.set_selected(index)
        self.table.select_line(index)

    def _on_table_selection(self, index: int) -> None:
        if self.table_source()[1] == "initial":
            self.editor.select(index)
            return
        self.selected = index
        self.canvas.set_selected(index)

    def _on_editor_selection(self, index: int) -> None:
        if self.table_source()[1] == "initial":
            self.table.select_line(index)
