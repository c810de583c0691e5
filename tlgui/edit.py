"""Editing the initial lines before a run: select, move, drag end points, rotate, add by
drawing, delete, split, merge, lock.  Every edit computes the new lines with
:mod:`engine.edits` (which changes only the rows it touches) and is one :class:`LinesCommand`
on a QUndoStack that swaps the whole ``LineSet``, so undo/redo restores the exact rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QPainter, QPen, QUndoCommand

from engine import edits as engine_edits
from engine.model import LineSet

from .canvas import PageCanvas
from .items import distance_to_segments
from .session import EditModel

EDIT_MODES = ("off", "select", "add", "split", "merge", "delete")
#: Pens of the selected line and of the other pieces of its text line.
SELECTED_COLOUR, SAME_TEXT_LINE_COLOUR = "#ffff00", "#fff59d"
#: Whether a line the user draws or moves is locked (kept in place through EM) at once.  The
#: study of issue 24 decides it (bench/steering.py on the 79 dev pages, docs/history.md): EM
#: from the ground truth's lines left free drifts off them (pooled FM 70.6 %, below the
#: default run's 71.4 %), locked they hold (80.7 %, line IU 97.6 %).  A line moved back to
#: where the preparation had it is the prepared line again, unlocked as it was prepared.
LOCK_EDITED_LINES = True


def lock_moved(prepared: LineSet | None, lines: LineSet, i: int) -> LineSet:
    """``lines`` after line ``i`` was moved: locked (:data:`LOCK_EDITED_LINES`), unless the
    move put it back where the preparation had it, where it is the prepared row again
    (unlocked, bit for bit): rotating by +2 deg and -2 deg changes nothing."""
    if prepared is not None:
        free = engine_edits.restore_unchanged(prepared, engine_edits.set_locked(lines, [i], False))
        row = tuple(getattr(free, n)[i].tobytes() for n in ("a", "b", "c", "sigma_t", "sigma_s", "prior",
                                                            "region", "phi"))
        if any(row == tuple(getattr(prepared, n)[k].tobytes() for n in ("a", "b", "c", "sigma_t", "sigma_s",
                                                                        "prior", "region", "phi"))
               for k in range(len(prepared))):
            return engine_edits.set_locked(lines, [i], False) if lines.locked[i] else lines
    return engine_edits.set_locked(lines, [i], True)


class LinesCommand(QUndoCommand):
    """Replace the edit model's lines; undo puts the previous rows back, bit for bit.
    ``record`` describes the edit (``{"op": "move", "line": 3, ...}``) for the files that
    record the user's edits."""

    def __init__(self, model: EditModel, old: LineSet, new: LineSet, text: str, record: dict[str, Any]) -> None:
        super().__init__(text)
        self.model = model
        self.old = old
        self.new = new
        self.record = record

    def redo(self) -> None:
        self.model.set_lines(self.new)

    def undo(self) -> None:
        self.model.set_lines(self.old)


# --- pure geometry (tested without a window) --------------------------------------------------

def rotate_segment(seg: np.ndarray, degrees: float) -> np.ndarray:
    """``seg`` (2, 2) rotated about its midpoint; positive turns clockwise on screen (y down)."""
    centre = seg.mean(axis=0)
    t = np.radians(degrees)
    rot = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
    return (seg - centre) @ rot.T + centre


def split_segment(seg: np.ndarray, point: np.ndarray, gap: float = 0.0) -> np.ndarray:
    """Two segments ``(2, 2, 2)``: ``seg`` cut where ``point`` projects on it."""
    a, b = seg
    ab = b - a
    t = float(np.clip(np.dot(point - a, ab) / max(np.dot(ab, ab), 1e-12), 0.05, 0.95))
    length = float(np.hypot(*ab))
    dt = min(gap / max(length, 1e-12) / 2.0, 0.04)
    return np.array([[a, a + ab * (t - dt)], [a + ab * (t + dt), b]])


def merge_segments(s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """One segment spanning both: the two end points farthest apart, left one first."""
    pts = np.concatenate([s1, s2])
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    i, j = np.unravel_index(np.argmax(d), d.shape)
    seg = pts[[i, j]]
    return seg if seg[0, 0] <= seg[1, 0] else seg[::-1]


class DrawCatcher(pg.GraphicsObject):
    """A transparent item over the page that turns a left drag into a new segment (add mode)."""

    def __init__(self, editor: LineEditor) -> None:
        super().__init__()
        self.editor = editor
        self.rect = QRectF()
        self.preview = pg.PlotCurveItem(pen=pg.mkPen("#ff4081", width=2))
        self.start: np.ndarray | None = None

    def set_rect(self, rect: QRectF) -> None:
        self.prepareGeometryChange()
        self.rect = rect

    def boundingRect(self) -> QRectF:
        return self.rect

    def paint(self, painter: QPainter, *_args: object) -> None:
        pass

    def mouseDragEvent(self, ev: object) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            ev.ignore()
            return
        ev.accept()
        p = ev.pos()
        here = np.array([p.x(), p.y()])
        if ev.isStart():
            q = ev.buttonDownPos()
            self.start = np.array([q.x(), q.y()])
        if self.start is None:
            return
        self.preview.setData([self.start[0], here[0]], [self.start[1], here[1]])
        if ev.isFinish():
            self.preview.setData([], [])
            start, self.start = self.start, None
            self.editor.add_segment(np.array([start, here]))


def _segment_record(seg: np.ndarray) -> list[list[float]]:
    return np.round(np.asarray(seg, dtype=float), 2).tolist()


class LineEditor(QObject):
    """Turns mouse gestures on the canvas into commands on the edit model (given to ``push``)."""

    selectionChanged = Signal(int)
    message = Signal(str)

    def __init__(self, canvas: PageCanvas, model: EditModel, push: Any) -> None:
        super().__init__()
        self.canvas = canvas
        self.model = model
        self.push = push
        self.mode = "off"
        self.selected = -1
        self.merge_first = -1
        self.rois: list[pg.LineSegmentROI] = []
        self._drag_old: np.ndarray | None = None
        self.enabled = True  # False while the engine runs: the lines are in use
        self.catcher = DrawCatcher(self)
        self.catcher.setZValue(30)
        self.catcher.setVisible(False)
        canvas.view.addItem(self.catcher)
        canvas.view.addItem(self.catcher.preview)
        self.catcher.preview.setZValue(31)
        model.subscribe("changed", self._on_model_changed)
        canvas.pageClicked.connect(self._on_page_clicked)
        self._rebuild_timer = QTimer(self)
        self._rebuild_timer.setSingleShot(True)
        self._rebuild_timer.setInterval(0)
        self._rebuild_timer.timeout.connect(self._sync_rois)

    # --- mode ------------------------------------------------------------------------------
    def set_mode(self, mode: str) -> None:
        if mode not in EDIT_MODES:
            raise ValueError(f"unknown edit mode {mode!r}")
        self.mode = mode
        self.merge_first = -1
        active = mode != "off" and self.enabled
        self.catcher.setVisible(active and mode == "add")
        if self.canvas.page_item.image is not None:
            h, w = self.canvas.page_item.image.shape[:2]
            self.catcher.set_rect(QRectF(0, 0, w, h))
        self._sync_rois()
        hints = {
            "select": "drag a line to move it, its ends to stretch or turn it; [ ] rotate; Del deletes; "
                      "Ctrl+L locks",
            "add": "drag on the page to draw a new line",
            "split": "click a line where it should be cut",
            "merge": "click two lines to merge them",
            "delete": "click a line to delete it",
        }
        self.message.emit(hints.get(mode, ""))

    def set_enabled(self, enabled: bool) -> None:
        self.enabled = enabled
        self.set_mode(self.mode)

    # --- ROIs ------------------------------------------------------------------------------
    def _on_model_changed(self) -> None:
        self.canvas.set_initial_lines(self.model.segments, self.model.lines.locked, self.model.lines.anchored)
        if self.selected >= len(self.model.segments):
            self.select(-1)
        # Deferred: the change may come from an ROI's own signal, which must not delete it.
        self._rebuild_timer.start()

    def _roi_segments(self) -> np.ndarray:
        out = []
        for roi in self.rois:
            pts = [roi.mapToParent(h.pos()) for h in roi.getHandles()]
            out.append([[pts[0].x(), pts[0].y()], [pts[1].x(), pts[1].y()]])
        return np.array(out, dtype=float).reshape(-1, 2, 2)

    def _sync_rois(self) -> None:
        want = self.mode != "off" and self.enabled
        segs = self.model.segments
        if want and len(self.rois) == len(segs) and np.allclose(self._roi_segments(), segs, atol=1e-6):
            self._style_rois()
            return
        for roi in self.rois:
            self.canvas.view.removeItem(roi)
        self.rois = []
        self.canvas.show_initial_items(not want)
        if not want:
            return
        for i, seg in enumerate(segs):
            roi = pg.LineSegmentROI([QPointF(*seg[0]), QPointF(*seg[1])], movable=True)
            roi.setZValue(25)
            roi.setAcceptedMouseButtons(Qt.MouseButton.LeftButton)
            roi.setProperty("index", i)
            roi.sigClicked.connect(self._on_roi_clicked)
            roi.sigRegionChangeStarted.connect(self._on_drag_start)
            roi.sigRegionChangeFinished.connect(self._on_drag_finish)
            self.canvas.view.addItem(roi)
            self.rois.append(roi)
        self._style_rois()

    def _style_rois(self) -> None:
        locked = self.model.lines.locked
        # The other straight pieces of the selected piece's text line (a locked file's line,
        # LineSet.chain), which the result joins with it.
        chain = self.model.lines.chain
        text_line = int(chain[self.selected]) if 0 <= self.selected < len(chain) else -1
        for i, roi in enumerate(self.rois):
            if i == self.selected:
                colour = SELECTED_COLOUR
            elif text_line >= 0 and i < len(chain) and chain[i] == text_line:
                colour = SAME_TEXT_LINE_COLOUR
            elif i == self.merge_first:
                colour = "#ff9100"
            else:
                colour = "#ff4081" if i < len(locked) and locked[i] else "#00e5ff"
            pen = QPen(pg.mkColor(colour), 3 if i == self.selected else 2)
            pen.setCosmetic(True)
            roi.setPen(pen)

    def _index_of(self, roi: object) -> int:
        try:
            return self.rois.index(roi)
        except ValueError:
            return -1

    def _on_roi_clicked(self, roi: object, _ev: object = None) -> None:
        i = self._index_of(roi)
        if i < 0:
            return
        pos = None
        if _ev is not None and hasattr(_ev, "scenePos"):
            p = self.canvas.view.mapSceneToView(_ev.scenePos())
            pos = np.array([p.x(), p.y()])
        self.act_on(i, pos)

    def _on_drag_start(self, _roi: object) -> None:
        self._drag_old = self.model.segments.copy()

    def _on_drag_finish(self, roi: object) -> None:
        if self._drag_old is None:
            return
        new = self._roi_segments()
        old, self._drag_old = self._drag_old, None
        i = self._index_of(roi)
        if new.shape == old.shape and 0 <= i < len(new) and not np.allclose(new[i], old[i], atol=1e-6):
            self.move(i, new[i])

    # --- clicks ------------------------------------------------------------------------------
    def _on_page_clicked(self, x: float, y: float, _modifiers: object) -> None:
        if self.mode in ("off", "add") or not self.enabled:
            return
        segs = self.model.segments
        if len(segs) == 0:
            return
        d = distance_to_segments(np.array([x, y]), segs)
        i = int(np.argmin(d))
        if d[i] > 10 * self.canvas.pixel_size():
            self.select(-1)
            return
        self.act_on(i, np.array([x, y]))

    def act_on(self, i: int, point: np.ndarray | None) -> None:
        """Apply the current mode's operation to line ``i`` (clicked at ``point``)."""
        segs = self.model.segments
        if self.mode == "delete":
            self.delete(i)
        elif self.mode == "split":
            self.split(i, point if point is not None else segs[i].mean(axis=0))
        elif self.mode == "merge":
            if self.merge_first < 0 or self.merge_first == i:
                self.merge_first = i
                self._style_rois()
                self.message.emit("now click the line to merge it with")
            else:
                first, self.merge_first = self.merge_first, -1
                self.merge(first, i)
        else:
            self.select(i)

    # --- operations (each one undoable command) ---------------------------------------------
    def select(self, i: int) -> None:
        self.selected = i
        self._style_rois()
        self.selectionChanged.emit(i)

    def _apply(self, new: LineSet, text: str, record: dict[str, Any]) -> bool:
        """Push the edit that turns the model's lines into ``new`` (True when pushed)."""
        self.push(LinesCommand(self.model, self.model.lines, new, text, record))
        return True

    def _ready(self) -> bool:
        if self.model.prep is None:
            self.message.emit("the page is being prepared: its lines can be edited once it is")
            return False
        return True

    def add_segment(self, seg: np.ndarray) -> None:
        if np.hypot(*(seg[1] - seg[0])) < 3 * self.canvas.pixel_size() or not self._ready():
            return  # a click, not a drawn line
        seg = seg if seg[0, 0] <= seg[1, 0] else seg[::-1]
        try:
            new = engine_edits.add_line(self.model.prep, self.model.lines, seg, locked=LOCK_EDITED_LINES)
        except ValueError as exc:
            self.message.emit(str(exc))
            return
        self._apply(new, "add line", {"op": "add", "segment": _segment_record(seg), "locked": LOCK_EDITED_LINES})
        self.select(len(self.model.lines) - 1)

    def delete(self, i: int) -> None:
        if 0 <= i < len(self.model.lines):
            self._apply(engine_edits.delete_lines(self.model.lines, i), "delete line",
                        {"op": "delete", "line": int(i), "segment": _segment_record(self.model.segments[i])})
            self.select(-1)

    def split(self, i: int, point: np.ndarray) -> None:
        if not (0 <= i < len(self.model.lines)) or not self._ready():
            return
        seg = self.model.segments[i]
        # The cut lies well inside the line: each part keeps at least 5 % of it.
        cut = split_segment(seg, np.asarray(point, dtype=float))[0, 1]
        self._apply(engine_edits.split_line(self.model.prep, self.model.lines, i, cut), "split line",
                    {"op": "split", "line": int(i), "point": _segment_record(cut)})
        self.select(i)

    def merge(self, i: int, j: int) -> None:
        if i == j or not self._ready():
            return
        self._apply(engine_edits.merge_lines(self.model.prep, self.model.lines, i, j), "merge lines",
                    {"op": "merge", "lines": [int(i), int(j)]})
        self.select(min(i, j))

    def rotate_selected(self, degrees: float) -> None:
        i = self.selected
        if 0 <= i < len(self.model.lines):
            self.move(i, rotate_segment(self.model.segments[i], degrees), f"rotate line {degrees:+g}°",
                      {"op": "rotate", "line": int(i), "degrees": float(degrees)})

    def move(self, i: int, new_segment: np.ndarray, text: str = "move line",
             record: dict[str, Any] | None = None) -> None:
        """Line ``i`` along ``new_segment``: it keeps sigma_t, sigma_s (unless its length
        changed), prior and region (:func:`engine.edits.move_line`)."""
        if not (0 <= i < len(self.model.lines)) or not self._ready():
            return
        new = engine_edits.move_line(self.model.prep, self.model.lines, i, new_segment)
        if LOCK_EDITED_LINES:
            new = lock_moved(self.model.prepared, new, i)
        self._apply(new, text, record or {"op": "move", "line": int(i), "segment": _segment_record(new_segment)})

    def toggle_lock(self, i: int) -> None:
        """Lock line ``i`` (EM keeps it where it is) or unlock it."""
        if 0 <= i < len(self.model.lines):
            locked = not bool(self.model.lines.locked[i])
            self._apply(engine_edits.set_locked(self.model.lines, [i], locked), "lock line" if locked else
                        "unlock line", {"op": "lock" if locked else "unlock", "line": int(i)})

    def close(self) -> None:
        for roi in self.rois:
            self.canvas.view.removeItem(roi)
        self.rois = []
        self.canvas.view.removeItem(self.catcher)
        self.canvas.view.removeItem(self.catcher.preview)
