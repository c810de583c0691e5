"""Time the Delaunay-graph layer's repaint in the real window (offscreen).

For each page: open it, prepare it, take one EM step (so edges have same/different-line
colours), then time a synchronous repaint of the canvas with the graph layer switched on at
full-page zoom, after two zoom-ins (x2 each), and back at full page.  The first repaint after
showing the layer and after each zoom step is the one that strokes the edges.  The window
starts with default settings (a throw-away settings folder), whatever the user's are.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/graph_paint.py PAGE [PAGE ...]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _timed_repaint(app: object, canvas: object, action: object = None) -> float:
    t0 = time.perf_counter()
    if action is not None:
        action()
    app.processEvents()
    canvas.viewport().repaint()
    return (time.perf_counter() - t0) * 1e3


def measure(page: str, size: tuple[int, int] = (1600, 1000)) -> dict[str, object]:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from tlgui.app import wait_until
    from tlgui.window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    # Default settings (the graph layer hidden, as shipped), never the user's own.
    settings_dir = tempfile.TemporaryDirectory(prefix="tlgui-bench-")
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, settings_dir.name)
    window = MainWindow()
    window.resize(*size)
    window.show()
    wait_until(lambda: False, 0.5)
    window.open_page(page)
    wait_until(lambda: window.session.prep is not None and not window.is_busy(), 600)
    window.step_em()
    wait_until(lambda: len(window.session.snapshots) >= 1, 600)
    window.stop() if hasattr(window, "stop") else None
    wait_until(lambda: not window.is_busy(), 60)
    wait_until(lambda: False, 0.3)
    canvas = window.canvas
    canvas.show_snapshot(window.session.snapshots[-1])
    canvas.viewport().repaint()
    view = canvas.view
    full = view.viewRange()
    out: dict[str, object] = {"page": os.path.basename(page), "edges": len(window.session.prep.edges)}
    # The same steps with the graph hidden: what the other shown layers cost.
    for k in (1, 2):
        out[f"no_graph_zoom_in_{k}_ms"] = round(_timed_repaint(app, canvas, lambda: view.scaleBy((0.5, 0.5))), 1)
    out["no_graph_back_full_ms"] = round(_timed_repaint(
        app, canvas, lambda: view.setRange(xRange=full[0], yRange=full[1], padding=0)), 1)
    out["show_graph_ms"] = round(_timed_repaint(app, canvas, lambda: canvas.set_layer_visible("graph", True)), 1)
    out["again_ms"] = round(_timed_repaint(app, canvas), 1)
    for k in (1, 2):
        out[f"zoom_in_{k}_ms"] = round(_timed_repaint(app, canvas, lambda: view.scaleBy((0.5, 0.5))), 1)
    out["back_full_ms"] = round(_timed_repaint(
        app, canvas, lambda: view.setRange(xRange=full[0], yRange=full[1], padding=0)), 1)
    snap = window.session.snapshots[-1]
    out["snapshot_redraw_ms"] = round(_timed_repaint(app, canvas, lambda: canvas.show_snapshot(snap)), 1)
    grab = getattr(canvas, "graph_item", None)
    if grab is not None and hasattr(grab, "stroked_segments"):
        out["stroked_segments_full"] = grab.stroked_segments()
    window.shutdown()
    window.close()
    settings_dir.cleanup()
    return out


def main(argv: list[str]) -> int:
    for page in argv:
        print(json.dumps(measure(page)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
