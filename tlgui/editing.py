"""The window's side of editing the initial lines: the edit model, the mouse editor on the
canvas and the undo stack together, the edit menu's commands, and lines saved to / loaded
from a file (File ▸ Load initial lines: the window's edits, a ``tlseg`` JSON, PAGE / ALTO XML,
a label map)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack
from PySide6.QtWidgets import QFileDialog, QWidget

from engine import export as engine_export
from engine.model import LineSet, Preparation

from .canvas import PageCanvas
from .edit import LineEditor, LinesCommand
from .session import EditModel, Session, line_count
from .steering import InitialLinesError, read_lines_file
from .tasks import TaskRunner

#: What File ▸ Load initial lines reads.
INITIAL_LINES_FILTER = ("Initial lines (*.json *.xml *.png *.tif *.tiff *.dat);;tlseg or tlgui JSON (*.json);;"
                        "PAGE or ALTO XML (*.xml);;Label image or .dat (*.png *.tif *.tiff *.dat);;All files (*)")


class EditController(QObject):
    """Owns the undo stack, the :class:`EditModel` of the shown page and its :class:`LineEditor`."""

    message = Signal(str, str)  # banner text, level
    status = Signal(str, int)   # status bar text, ms
    needsPreparation = Signal()  # an edit was asked for on a page not prepared (a saved result)

    def __init__(self, session: Session, canvas: PageCanvas, autosave_dir: Path, tasks: TaskRunner,
                 parent_widget: QWidget) -> None:
        super().__init__()
        self.session = session
        self.tasks = tasks
        self.parent_widget = parent_widget
        self.undo = QUndoStack(parent_widget)
        self.model = EditModel(autosave_dir)
        self.editor = LineEditor(canvas, self.model, self.push)
        self.editor.message.connect(self._on_editor_message)
        self.editor.selectionChanged.connect(self._on_selection)
        self._commands: list[LinesCommand] = []  # the stack's commands, to record the applied ones
        self._restore: str | None = None  # autosaved edits to apply once the page is prepared
        self._clearing = False
        self.undo.indexChanged.connect(self._on_index_changed)

    # --- the undo stack ------------------------------------------------------------------------
    def push(self, command: LinesCommand) -> None:
        """Apply an edit as one undoable command (the redo tail is dropped, as the stack does)."""
        self._commands = self._commands[: self.undo.index()] + [command]
        self.undo.push(command)

    def _on_index_changed(self, index: int) -> None:
        if self._clearing:
            return  # the page is being left: its autosave keeps its edits
        self.model.records = [c.record for c in self._commands[:index]]
        self.model.autosave()

    def _clear_stack(self) -> None:
        self._clearing = True
        try:
            self.undo.clear()
        finally:
            self._clearing = False
        self._commands = []
        self.model.records = []

    # --- the shown page ----------------------------------------------------------------------
    def page_opened(self, path: str) -> None:
        """A page was opened: no lines until it is prepared; its autosaved edits then."""
        self._clear_stack()
        self.model.clear(path)
        self._restore = self.model.saved_edits(path)

    def prepared(self, prep: Preparation) -> None:
        """The page's preparation came: its initial lines, unless the user's edits stand (they
        are moved onto the new preparation, each row kept where its regions are the same)."""
        restore, self._restore = self._restore, None
        if restore is not None:
            try:
                lines = read_lines_file(restore, prep)
            except InitialLinesError as exc:
                self.message.emit(f"The autosaved edits of this page could not be restored: {exc}", "warning")
                self.model.set_prepared(prep)
                return
            self.model.set_prepared(prep, lines)
            self.model.records = self._saved_records(restore)
            if self.model.edited:
                self.message.emit(f"Restored the edited initial lines of this page ({line_count(lines)}; "
                                  "Edit ▸ Revert to the prepared lines drops them).", "info")
        else:
            self.model.set_prepared(prep, self.model.lines if self.model.edited else None)

    @staticmethod
    def _saved_records(path: str) -> list[dict[str, Any]]:
        """The edits an autosave records (they made the restored lines)."""
        import json

        try:
            records = json.loads(Path(path).read_text(encoding="utf-8")).get("edits", [])
        except (OSError, ValueError, AttributeError):
            return []
        return records if isinstance(records, list) else []

    def lines_for_run(self) -> LineSet | None:
        """The initial lines an EM run starts from: the user's, None when they are the prepared ones."""
        return self.model.lines if self.model.edited else None

    # --- commands ------------------------------------------------------------------------------
    def set_mode(self, mode: str) -> None:
        self.editor.set_mode(mode)
        if mode != "off" and self.model.prep is None and self.session.path is not None:
            self.needsPreparation.emit()

    def delete_selected(self) -> None:
        self.editor.delete(self.editor.selected)

    def rotate_left(self) -> None:
        self.editor.rotate_selected(-2.0)

    def rotate_right(self) -> None:
        self.editor.rotate_selected(2.0)

    def toggle_lock(self, index: int) -> None:
        self.editor.toggle_lock(index)

    def revert(self) -> None:
        """Drop the edits: back to the preparation's initial lines (undoable)."""
        if self.model.prepared is None:
            if self.session.path is not None:
                self.needsPreparation.emit()
            return
        if self.model.edited:
            self.push(LinesCommand(self.model, self.model.lines, self.model.prepared, "revert edits", {"op": "revert"}))

    # --- files ---------------------------------------------------------------------------------
    def choose_save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self.parent_widget, "Save edited lines", "", "JSON (*.json)")
        if path:
            self.save(path)

    def save(self, path: str) -> None:
        """The lines as ``tlseg`` JSON records them (read back by Load initial lines, and by
        ``tlseg segment --initial-lines``), with the edits that made them."""
        with engine_export.atomic_path(path) as tmp:
            Path(tmp).write_text(self.model.to_json(), encoding="utf-8")

    def choose_load(self) -> None:
        start = str(Path(self.session.path).parent) if self.session.path else ""
        path, _ = QFileDialog.getOpenFileName(self.parent_widget, "Load initial lines", start, INITIAL_LINES_FILTER)
        if path:
            self.load(path)

    def load(self, path: str, lock: bool = False) -> None:
        """Initial lines from ``path`` (read off the GUI thread) replace the current ones, as
        one undoable edit; a file that cannot be read is one message and changes nothing."""
        prep = self.model.prep
        if prep is None:
            self.message.emit("Cannot load initial lines before the page is prepared (it is being "
                              "prepared now: try again in a moment).", "warning")
            if self.session.path is not None:
                self.needsPreparation.emit()
            return
        page = self.session.path

        def on_read(lines: LineSet) -> None:
            if self.model.prep is not prep or self.session.path != page:
                self.message.emit(f"Initial lines from {path} not applied: the page changed meanwhile.", "warning")
                return
            self.push(LinesCommand(self.model, self.model.lines, lines, "load initial lines",
                                   {"op": "load", "file": os.path.abspath(path), "lock": lock}))
            self.status.emit(f"Initial lines from {Path(path).name}: {line_count(lines)}", 6000)

        self.tasks.submit(f"initial lines {path}", lambda: read_lines_file(path, prep, lock=lock), on_read,
                          lambda message: self.message.emit(f"Cannot load initial lines: {message}", "error"))

    # --- feedback ------------------------------------------------------------------------------
    def _on_selection(self, index: int) -> None:
        if 0 <= index < len(self.model.segments):
            (x0, y0), (x1, y1) = self.model.segments[index]
            angle = np.degrees(np.arctan2(y1 - y0, x1 - x0))
            lines = self.model.lines
            # Anchored: a free line read from another tool's file, kept on its row by EM.
            locked = " · locked" if lines.locked[index] else " · anchored" if lines.anchored[index] else ""
            # Measured: the spread a file's label or polygon gave, which a locked line keeps.
            origin = " measured on its ink" if lines.sigma_t_measured[index] else ""
            self.status.emit(f"initial line {index}: ({x0:.0f}, {y0:.0f}) – ({x1:.0f}, {y1:.0f}), "
                             f"length {np.hypot(x1 - x0, y1 - y0):.0f} px, angle {angle:+.1f}°, "
                             f"σt {lines.sigma_t[index]:.1f} px{origin}{locked}", 8000)

    def _on_editor_message(self, text: str) -> None:
        if text:
            self.status.emit(text, 6000)

    def summary(self) -> dict[str, Any]:
        """What the files a run writes record of the edits: the edits and whether any stand."""
        return {"edited": self.model.edited, "edits": list(self.model.records)}

    def close(self) -> None:
        self.editor.close()
