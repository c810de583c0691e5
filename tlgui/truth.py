"""A page's ground truth: read off the GUI thread, the final labels scored against it the way
``engine.evaluate`` scores result files (same ink, same scored pixels, so the window's FM is the
batch FM), and the result shown in the ground-truth panel, its list and the canvas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QListWidget, QListWidgetItem, QWidget

from .canvas import PageCanvas
from .document import read_truth
from .geometry import image_pyramid
from .panels import GroundTruthPanel
from .session import Metrics, Session
from .tasks import TaskRunner


def score_labels(gt: np.ndarray, labels: np.ndarray, ink: np.ndarray | None, n_lines: int
                 ) -> tuple[Any, np.ndarray, list[np.ndarray]]:
    """The contest score of ``labels`` against ``gt`` on ``ink``, which of the ``n_lines``
    result lines matched one ground-truth line one-to-one, and the unmatched lines' pixels as
    an RGBA pyramid (red)."""
    from engine.metric import contest_metric

    result = contest_metric(gt, labels, ink=ink)
    matched = np.zeros(n_lines + 1, dtype=bool)
    ids = result.per_gt_match[result.per_gt_match > 0]
    matched[ids[ids <= n_lines]] = True
    bad = np.flatnonzero(~matched[1:]) + 1
    mask = np.isin(labels, bad)
    rgba = np.zeros(mask.shape + (4,), dtype=np.uint8)
    rgba[mask] = (255, 0, 60, 255)
    return result, matched[1:], image_pyramid(rgba)


class GroundTruthController(QObject):
    """Loads the shown page's ground truth and scores each final result against it."""

    message = Signal(str, str)  # text, level ("error", "warning")

    def __init__(self, session: Session, tasks: TaskRunner, panel: GroundTruthPanel, lines: QListWidget,
                 canvas: PageCanvas) -> None:
        super().__init__()
        self.session = session
        self.tasks = tasks
        self.panel = panel
        self.list = lines
        self.canvas = canvas
        self.labels: np.ndarray | None = None
        self.ink: np.ndarray | None = None  # the pixels the ground truth is scored on
        self.path: str | None = None
        self.page_shape: tuple[int, int] | None = None
        panel.loadRequested.connect(self.choose)

    def clear(self, page_shape: tuple[int, int] | None) -> None:
        """A new page (of ``page_shape``): no ground truth yet."""
        self.labels, self.ink, self.path = None, None, None
        self.page_shape = page_shape
        self.canvas.set_mismatch(None)
        self.panel.show_text("no ground truth loaded")
        self.list.clear()

    def forget_if_not(self, shape: tuple[int, int]) -> None:
        """Drop a ground truth that does not fit a preparation of ``shape``."""
        if self.labels is not None and self.labels.shape != shape:
            self.labels = None

    def choose(self) -> None:
        parent = self.panel.window() if isinstance(self.panel.window(), QWidget) else None
        path, _ = QFileDialog.getOpenFileName(
            parent, "Load ground truth", str(Path(self.session.path or "").parent),
            "Ground truth (*.png *.tif *.tiff *.dat *.xml);;All files (*)")
        if path:
            self.load(path)

    def load(self, path: str) -> None:
        """Read a ground truth (label image, .dat, PAGE or ALTO XML) off the GUI thread and
        score the final labels against it, if there are any yet."""
        page_path, shape = self.session.path, self.page_shape
        if shape is None or page_path is None:
            self.message.emit("Open a page before loading its ground truth.", "warning")
            return

        def on_gt(out: tuple[np.ndarray, np.ndarray]) -> None:
            if self.session.path != page_path:
                return  # another page was opened meanwhile
            self.labels, self.ink = out
            self.path = path
            if self.session.segmentation is not None:
                self.score()
            else:
                self.panel.show_text(f"<b>{Path(path).name}</b>: {int(self.labels.max())} lines; "
                                     "scored when the run finishes")

        self.tasks.submit("gt", lambda: read_truth(path, page_path, shape), on_gt,
                          lambda message: self.message.emit(f"Cannot use the ground truth: {message}", "error"))

    def score(self) -> None:
        """Score the session's final labels (off the GUI thread) and show the score."""
        seg, gt, ink, gt_path = self.session.segmentation, self.labels, self.ink, self.path
        if seg is None or gt is None:
            return

        def on_score(out: tuple[Any, np.ndarray, list[np.ndarray]]) -> None:
            result, matched, rgba = out
            if self.session.segmentation is not seg:
                return
            self.session.set_metrics(Metrics(result, matched, gt_path or ""))
            self.panel.show_score(result, Path(gt_path or "").name)
            self.canvas.set_mismatch(rgba)
            self.list.clear()
            for k, ok in enumerate(matched, start=1):
                item = QListWidgetItem(f"result line {k}: {'matched' if ok else 'NOT matched'}")
                if not ok:
                    item.setForeground(Qt.GlobalColor.red)
                self.list.addItem(item)

        self.tasks.submit("score", lambda: score_labels(gt, seg.labels, ink, len(seg.lines)), on_score,
                          lambda message: self.message.emit(f"score failed: {message}", "error"))
