"""A page's ground truth: read off the GUI thread, the final labels scored against it the way
``engine.evaluate`` scores result files (same ink, same scored pixels, so the window's FM is the
batch FM), and the result shown in the ground-truth panel, its list and the canvas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QListWidget, QListWidgetItem, QWidget

from .canvas import PageCanvas
from .document import read_truth
from .geometry import image_pyramid
from .panels import GroundTruthPanel
from .session import Metrics, Session
from .tasks import TaskRunner


def label_outlines(labels: np.ndarray, grow: int = 0) -> list[np.ndarray]:
    """Each label ``k = 1..n``'s outer outline as segment pairs ``(S, 2, 2)`` (page x, y),
    at index ``k - 1``; ``grow`` > 0 closes a label's strokes into one shape first (a pixel
    ground truth labels ink, not the line's area)."""
    from scipy import ndimage

    n = int(labels.max()) if labels.size else 0
    out = [np.zeros((0, 2, 2)) for _ in range(n)]
    kernel = None if grow <= 0 else cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1))
    for k, box in enumerate(ndimage.find_objects(labels), start=1):
        if box is None:
            continue
        y0, x0 = max(0, box[0].start - grow), max(0, box[1].start - grow)
        y1, x1 = box[0].stop + grow, box[1].stop + grow
        mask = (labels[y0:y1, x0:x1] == k).astype(np.uint8)
        if kernel is not None:
            mask = cv2.morphologyEx(cv2.copyMakeBorder(mask, grow, grow, grow, grow, cv2.BORDER_CONSTANT, 0),
                                    cv2.MORPH_CLOSE, kernel)[grow:-grow, grow:-grow]
        contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        segs = []
        for contour in contours:
            pts = cv2.approxPolyDP(contour, 1.5, True)[:, 0, :].astype(float) + (x0, y0)
            if len(pts) >= 2:
                segs.append(np.stack([pts, np.roll(pts, -1, axis=0)], axis=1))
        if segs:
            out[k - 1] = np.concatenate(segs)
    return out


def read_truth_and_outlines(gt_path: str, page_path: str, shape: tuple[int, int]
                            ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """:func:`~tlgui.document.read_truth` and each ground-truth line's outline: a polygon
    ground truth's own polygons, a pixel one's strokes closed over a third of a line's height."""
    from engine.evaluate import is_polygon_file, polygon_label_map

    labels, scored = read_truth(gt_path, page_path, shape)
    if is_polygon_file(Path(gt_path)):
        return labels, scored, label_outlines(polygon_label_map(gt_path, page_path, shape))
    from scipy import ndimage

    heights = [b[0].stop - b[0].start for b in ndimage.find_objects(labels) if b is not None]
    grow = int(np.clip(np.median(heights) / 3.0, 1, 40)) if heights else 1
    return labels, scored, label_outlines(labels, grow)


def outline_kinds(outlines: list[np.ndarray], score: Any | None) -> dict[str, np.ndarray]:
    """The outlines split by whether their ground-truth line matched a result line one-to-one
    (``score.per_gt_match``); all "unscored" without a score."""
    empty = np.zeros((0, 2, 2))
    if score is None or len(score.per_gt_match) < len(outlines) + 1:
        return {"unscored": np.concatenate(outlines) if outlines else empty}
    hit = np.asarray(score.per_gt_match[1: len(outlines) + 1]) > 0
    pick = {"matched": [o for o, h in zip(outlines, hit, strict=True) if h],
            "unmatched": [o for o, h in zip(outlines, hit, strict=True) if not h]}
    return {key: np.concatenate(v) if v else empty for key, v in pick.items()}


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
        self.outlines: list[np.ndarray] = []
        self.mismatch: list[np.ndarray] | None = None
        self.page_shape: tuple[int, int] | None = None
        panel.loadRequested.connect(self.choose)

    def clear(self, page_shape: tuple[int, int] | None) -> None:
        """A new page (of ``page_shape``): no ground truth yet."""
        self.labels, self.ink, self.path, self.outlines, self.mismatch = None, None, None, [], None
        self.page_shape = page_shape
        self.canvas.set_mismatch(None)
        self.canvas.set_truth_outlines(None)
        self.panel.show_text("no ground truth loaded")
        self.list.clear()

    def forget_if_not(self, shape: tuple[int, int]) -> None:
        """Drop a ground truth that does not fit a preparation of ``shape``."""
        if self.labels is not None and self.labels.shape != shape:
            self.labels = None

    def redraw(self) -> None:
        """Draw the last score again (the canvas was cleared by a new preparation)."""
        self.canvas.set_mismatch(self.mismatch)
        if self.labels is not None:
            self.canvas.set_truth_outlines(outline_kinds(self.outlines, None if self.session.metrics is None
                                                         else self.session.metrics.score))

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

        def on_gt(out: tuple[np.ndarray, np.ndarray, list[np.ndarray]]) -> None:
            if self.session.path != page_path:
                return  # another page was opened meanwhile
            self.labels, self.ink, self.outlines = out
            self.path = path
            self.canvas.set_truth_outlines(outline_kinds(self.outlines, None))
            if self.session.segmentation is not None:
                self.score()
            else:
                self.panel.show_text(f"<b>{Path(path).name}</b>: {int(self.labels.max())} lines; "
                                     "scored when the run finishes")

        self.tasks.submit("gt", lambda: read_truth_and_outlines(path, page_path, shape), on_gt,
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
            self.panel.show_score(result, Path(gt_path or "").name, len(seg.lines))
            self.mismatch = rgba
            self.canvas.set_mismatch(rgba)
            self.canvas.set_truth_outlines(outline_kinds(self.outlines, result))
            self.list.clear()
            for k, ok in enumerate(matched):  # numbered as the line table: line k is label k + 1
                item = QListWidgetItem(f"result line {k}: {'matched' if ok else 'NOT matched'}")
                if not ok:
                    item.setForeground(Qt.GlobalColor.red)
                self.list.addItem(item)

        self.tasks.submit("score", lambda: score_labels(gt, seg.labels, ink, len(seg.lines)), on_score,
                          lambda message: self.message.emit(f"score failed: {message}", "error"))
