"""The window's side of editing the initial lines: the edit model, the mouse editor on the
canvas and the undo stack together, the edit menu's commands, and edits saved to / loaded
from a file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack
from PySide6.QtWidgets import QFileDialog, QWidget

from engine import export as engine_export

from .canvas import PageCanvas
from .edit import LineEditor, SegmentsCommand
from .session import EditModel, Session


class EditController(QObject):
    """Owns the undo stack, the :class:`EditModel` of the shown page and its :class:`LineEditor`."""

    message = Signal(str, str)  # banner text, level
    status = Signal(str, int)   # status bar text, ms

    def __init__(self, session: Session, canvas: PageCanvas, autosave_dir: Path, parent_widget: QWidget) -> None:
        super().__init__()
        self.session = session
        self.parent_widget = parent_widget
        self.undo = QUndoStack(parent_widget)
        self.model = EditModel(autosave_dir)
        self.editor = LineEditor(canvas, self.model, self.undo)
        self.editor.message.connect(self._on_editor_message)
        self.editor.selectionChanged.connect(self._on_selection)

    # --- the shown page ----------------------------------------------------------------------
    def page_opened(self, path: str) -> bool:
        """A page was opened: its autosaved edits if it has any (True), else none yet."""
        self.undo.clear()
        self.model.page_path = path
        if self.model.restore(path):
            return True
        self.model.reset_to(np.zeros((0, 2, 2)), path)
        return False

    def prepared(self, initial_segments: np.ndarray, canvas: PageCanvas) -> None:
        """The page's preparation came: its initial lines, unless the user's edits stand."""
        if not self.model.edited:
            self.model.reset_to(initial_segments, self.session.path)
        else:
            canvas.set_initial_segments(self.model.segments)

    def segments_for_run(self) -> np.ndarray | None:
        """The initial lines an EM run starts from: the edits, None when there are none."""
        return self.model.segments.copy() if self.model.edited else None

    # --- commands ------------------------------------------------------------------------------
    def set_mode(self, mode: str) -> None:
        self.editor.set_mode(mode)

    def delete_selected(self) -> None:
        self.editor.delete(self.editor.selected)

    def rotate_left(self) -> None:
        self.editor.rotate_selected(-2.0)

    def rotate_right(self) -> None:
        self.editor.rotate_selected(2.0)

    def revert(self) -> None:
        """Drop the edits: back to the preparation's initial lines (undoable)."""
        prep = self.session.prep
        if prep is None:
            return
        self.undo.push(SegmentsCommand(self.model, self.model.segments, prep.initial_lines.segments(),
                                       "revert edits"))
        self.model.edited = False
        self.model.autosave()

    # --- files ---------------------------------------------------------------------------------
    def choose_save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self.parent_widget, "Save edited lines", "", "JSON (*.json)")
        if path:
            self.save(path)

    def save(self, path: str) -> None:
        with engine_export.atomic_path(path) as tmp:
            Path(tmp).write_text(self.model.to_json(), encoding="utf-8")

    def choose_load(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.parent_widget, "Load edited lines", "", "JSON (*.json)")
        if path:
            self.load(path)

    def load(self, path: str) -> None:
        try:
            page, segments, _edited = EditModel.parse(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self.message.emit(f"Cannot load edited lines from {path}: {exc}", "error")
            return
        if page and self.session.path and os.path.abspath(page) != self.session.path:
            self.message.emit(f"These lines were drawn on {page}; applied to the open page anyway.", "warning")
        self.undo.push(SegmentsCommand(self.model, self.model.segments, segments, "load edited lines"))

    # --- feedback ------------------------------------------------------------------------------
    def _on_selection(self, index: int) -> None:
        if 0 <= index < len(self.model.segments):
            (x0, y0), (x1, y1) = self.model.segments[index]
            angle = np.degrees(np.arctan2(y1 - y0, x1 - x0))
            self.status.emit(f"initial line {index}: ({x0:.0f}, {y0:.0f}) – ({x1:.0f}, {y1:.0f}), "
                             f"length {np.hypot(x1 - x0, y1 - y0):.0f} px, angle {angle:+.1f}°", 8000)

    def _on_editor_message(self, text: str) -> None:
        if text:
            self.status.emit(text, 6000)

    def close(self) -> None:
        self.editor.close()
