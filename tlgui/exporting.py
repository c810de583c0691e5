"""Exports of the shown page: label images, ICDAR ``.dat``, PAGE / ALTO XML, the lines and
parameters as JSON, a PNG of the view.  Each is written atomically, the heavy ones off the GUI
thread; a failure is a message, never a half file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from engine import export as engine_export
from engine.edits import lines_equal
from engine.model import LineSet, Segmentation, Snapshot
from engine.params import Parameters

from .canvas import PageCanvas
from .tasks import TaskRunner

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


@dataclass(frozen=True)
class ExportSource:
    """What an export is made of (taken in the GUI thread, written in the task thread)."""

    page_path: str
    params: Parameters
    seg: Segmentation | None
    snapshot: Snapshot | None
    #: The initial lines (the user's, or the prepared ones), None before the page is prepared.
    initial_lines: LineSet | None
    #: What the user's edits were (``{"edited": bool, "edits": [...]}``).
    edits: dict[str, Any]


def write_export(kind: str, path: str, src: ExportSource) -> str:
    """Write export ``kind`` of ``src`` to ``path`` (atomically); returns ``path``."""
    seg = src.seg
    if kind == "colour_png":
        engine_export.write_png(path, engine_export.colour_labels(seg.labels))
    elif kind == "label_png16":
        engine_export.write_label_png(path, seg.labels)
    elif kind == "dat":
        engine_export.write_dat(path, seg.labels)
    elif kind == "page_xml":
        engine_export.write_page_xml(path, seg, Path(src.page_path).name, seg.labels.shape, src.params.preset_name)
    elif kind == "alto_xml":
        engine_export.write_alto_xml(path, seg, Path(src.page_path).name, seg.labels.shape)
    elif kind == "json":
        snap = src.snapshot
        started = getattr(seg, "initial_lines", None) if seg is not None else None
        started = src.initial_lines if started is None else started
        data: dict[str, Any] = {
            "page": src.page_path,
            "parameters": src.params.to_dict(),
            "final_lines": seg.lines.to_dict() if seg is not None else None,
            "snapshot": None if snap is None else {
                "iteration": snap.iteration, "sweep": snap.sweep, "lines": snap.lines.to_dict()},
            # The lines the result started from (read back by File > Load initial lines and
            # ``tlseg segment --initial-lines``), and the user's edits.
            "initial_lines": None if started is None else started.to_dict(),
            **src.edits,
        }
        if src.initial_lines is not None and started is not None and not lines_equal(src.initial_lines, started):
            data["edited_initial_lines"] = src.initial_lines.to_dict()  # edited since the run
        if seg is not None:
            data["shape"] = [int(v) for v in seg.labels.shape]
        with engine_export.atomic_path(path) as tmp:
            Path(tmp).write_text(json.dumps(data, indent=1), encoding="utf-8")
    else:
        raise ValueError(f"unknown export {kind!r}")
    return path


class ExportController(QObject):
    """The export menu's dialogs and writes.  ``source()`` gives what to export now."""

    message = Signal(str, str)  # text, level
    written = Signal(str)       # path
    folderChosen = Signal(str)  # the folder the user exported to (the next dialog starts there)

    def __init__(self, tasks: TaskRunner, canvas: PageCanvas, source: Any, default_folder: Any,
                 parent_widget: QWidget) -> None:
        super().__init__()
        self.tasks = tasks
        self.canvas = canvas
        self.source = source
        self.default_folder = default_folder
        self.parent_widget = parent_widget

    def default_path(self, kind: str) -> Path:
        """The file an export dialog proposes: the page's stem and the kind's suffix, in the
        default folder (never the folder of the input page)."""
        stem = Path(self.source().page_path or "page").stem
        return Path(self.default_folder()) / (stem + EXPORTS[kind][2])

    def choose(self, kind: str) -> None:
        title, filt, _suffix = EXPORTS[kind]
        proposed = self.default_path(kind)
        proposed.parent.mkdir(parents=True, exist_ok=True)  # the dialog opens in it
        path, _ = QFileDialog.getSaveFileName(self.parent_widget, title.rstrip("…"), str(proposed), filt)
        if path:
            self.folderChosen.emit(str(Path(path).parent))
            self.export(kind, path)

    def export(self, kind: str, path: str) -> None:
        """Write one export atomically (heavy ones off the GUI thread); errors go to the banner."""
        if kind == "view_png":
            image = self.canvas.grab().toImage()
            with engine_export.atomic_path(path) as tmp:
                if not image.save(str(tmp), "PNG"):
                    self.message.emit(f"Could not write {path}", "error")
                    raise OSError(f"could not write {path}")
            return
        src = self.source()
        if kind != "json" and src.seg is None:
            self.message.emit("Nothing to export yet: run the segmentation to the end first.", "warning")
            return
        self.tasks.submit(f"export {kind}", lambda: write_export(kind, path, src), self.written.emit,
                          lambda message: self.message.emit(f"export {kind} failed: {message}", "error"))
