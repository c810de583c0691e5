"""How responsive the window stays while the engine runs, and how long a snapshot redraw takes.

``GapProbe`` is a 10 ms QTimer in the GUI thread that records the time between its ticks: a
gap much above 10 ms means the GUI thread was blocked that long (by our handlers and
drawing, by another thread of this process holding the GIL, or by the OS running other
processes: the thread's run-queue wait, from Linux's schedstat, tells the last apart).
:func:`measure` opens a page in a real window (with default settings: a throw-away settings
folder, so neither the user's layer switches nor parameters change the figures, and the
user's recent files stay as they were), runs the method to the end with the probe on, then
redraws every computed snapshot with the default layers and with every layer shown and
times it (``show_snapshot`` plus a synchronous repaint).

    python -m tlgui.probe PAGE [PAGE ...]          # JSON per page on stdout
    python -m tlgui.probe --document FOLDER        # "Run all" while browsing: one JSON

:func:`measure_document` opens a folder as a document, starts "Run all" and moves to another
page every few seconds (as a user reviewing the finished pages would) until every page ran.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QTimer

from .app import wait_until


def run_delay_ms() -> float | None:
    """Milliseconds this thread has spent runnable but waiting for a CPU (Linux schedstat),
    or None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


class GapProbe(QObject):
    """Record the gaps between ticks of a ``interval_ms`` timer running in the GUI thread."""

    def __init__(self, interval_ms: int = 10, label: Any = None) -> None:
        super().__init__()
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self.gaps: list[float] = []
        #: Gaps over 50 ms: (end time, ms, label() at the tick before: e.g. the engine stage,
        #: ms of it the GUI thread spent waiting for a CPU (None if unknown), ms of CPU the
        #: GUI thread itself used in it: our handlers and drawing).
        self.long_gaps: list[tuple[float, float, str, float | None, float]] = []
        self.label = label or (lambda: "")
        self._last: float | None = None
        self._last_label = ""
        self._last_delay: float | None = None
        self._last_cpu = 0.0

    def start(self) -> None:
        self.gaps = []
        self._last = time.perf_counter()
        self._last_cpu = time.thread_time()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        delay = run_delay_ms()
        cpu = time.thread_time()
        if self._last is not None:
            gap = (now - self._last) * 1e3
            self.gaps.append(gap)
            if gap > 50.0:
                waited = None if delay is None or self._last_delay is None else delay - self._last_delay
                self.long_gaps.append((now, gap, self._last_label, waited, (cpu - self._last_cpu) * 1e3))
        self._last = now
        self._last_cpu = cpu
        self._last_label = self.label()
        self._last_delay = delay

    def summary(self) -> dict[str, float]:
        g = np.asarray(self.gaps) if self.gaps else np.zeros(1)
        return {"ticks": len(self.gaps), "max_gap_ms": float(g.max()),
                "p99_gap_ms": float(np.percentile(g, 99)), "median_gap_ms": float(np.median(g)),
                "gaps_over_100ms": int((g > 100).sum())}


def _time_paints(window: Any) -> None:
    """Count the canvas' and the plots' paint events as GUI handlers too (they run Python
    paint methods of every visible item, outside the window's own slots)."""
    widgets = [("paint canvas", window.canvas)] + [(f"paint plot {k}", w) for k, w in window.plots.plots.items()]
    for name, widget in widgets:
        original = widget.paintEvent

        def timed(event: Any, _original: Any = original, _name: str = name) -> None:
            with window.times.timed(_name):
                _original(event)

        widget.paintEvent = timed


def redraw_times(window: Any, all_layers: bool = True) -> list[float]:
    """Milliseconds to draw each computed snapshot and repaint the canvas, synchronously.

    With ``all_layers`` every layer is shown first (graph, ink and samples included), and one
    warm-up redraw (which fills those layers' caches once) is not counted."""
    canvas = window.canvas
    if all_layers:
        for name in canvas.layers:
            canvas.set_layer_visible(name, True)
        canvas.viewport().repaint()
    times = []
    for snap in window.session.snapshots:
        t0 = time.perf_counter()
        canvas.show_snapshot(snap)
        canvas.viewport().repaint()  # synchronous paint: the scene's cost is counted too
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _probed_window(size: tuple[int, int]) -> tuple[Any, tempfile.TemporaryDirectory, Any, GapProbe]:
    """A shown main window with its own settings folder, the gap probe on it and its paints
    timed: (the application, kept alive while measuring; the settings folder, cleaned up by
    the caller; the window; the probe). The window's first layout and paint are not measured."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from .window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    settings_dir = tempfile.TemporaryDirectory(prefix="tlgui-probe-")
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, settings_dir.name)
    window = MainWindow()
    window.resize(*size)
    window.show()
    probe = GapProbe(label=window.status_stage.text)
    _time_paints(window)
    wait_until(lambda: False, 0.5)
    return app, settings_dir, window, probe


def measure(page: str, timeout: float = 900.0, size: tuple[int, int] = (1600, 1000)) -> dict[str, Any]:
    """Open ``page`` in a window, run to the end with the gap probe on; report the figures."""
    _app, settings_dir, window, probe = _probed_window(size)
    window.slow_handlers.clear()
    t0 = time.perf_counter()
    window.open_page(page)
    probe.start()  # the probe covers loading and preparation too
    ok = wait_until(lambda: window.session.prep is not None and not window.is_busy()
               or bool(window.banner.error()), timeout)
    t_prep = time.perf_counter() - t0
    if ok and window.session.prep is not None:
        window.run()
        ok = wait_until(lambda: not window.is_busy(), timeout)
    probe.stop()
    wall = time.perf_counter() - t0
    prep = window.session.prep
    redraw_default = redraw_times(window, all_layers=False) if window.session.snapshots else [0.0]
    redraw = redraw_times(window) if window.session.snapshots else [0.0]
    result = {
        "page": page, "ok": ok and not window.banner.error(), "error": window.banner.error(),
        "wall_s": round(wall, 2), "prepare_s": round(t_prep, 2),
        "samples": 0 if prep is None else len(prep.samples),
        "edges": 0 if prep is None else len(prep.edges),
        "snapshots": len(window.session.snapshots),
        **{k: round(v, 1) if isinstance(v, float) else v for k, v in probe.summary().items()},
        "redraw_default_layers_ms_max": round(max(redraw_default), 1),
        "redraw_default_layers_ms_median": round(float(np.median(redraw_default)), 1),
        "redraw_all_layers_ms_max": round(max(redraw), 1),
        "redraw_all_layers_ms_median": round(float(np.median(redraw)), 1),
        "live_redraw_ms_max": round(max(window.canvas.redraw_ms or [0.0]), 1),
    }
    result.update(gap_causes(window, probe))
    window.shutdown()
    window.close()
    settings_dir.cleanup()
    return result


def gap_causes(window: Any, probe: GapProbe) -> dict[str, Any]:
    """The slowest GUI handlers, and which long gaps had one of them in them, which the GUI
    thread spent mostly waiting for a CPU (other processes on a busy machine), and which came
    from elsewhere (e.g. another thread of this process holding the GIL).  Each gap:
    (ms, stage, ms waited for a CPU, ms of CPU the GUI thread used in it)."""
    result: dict[str, Any] = {}
    slow = sorted(window.slow_handlers, key=lambda h: -h[2])[:5]
    result["slowest_gui_handlers_ms"] = [[name, round(ms, 1)] for _end, name, ms in slow]
    ours, cpu, other = [], [], []
    for end, gap, label, waited, cpu_ms in probe.long_gaps:
        mine = [ms for h_end, _n, ms in window.slow_handlers if end - gap / 1e3 <= h_end <= end]
        entry = (round(gap, 1), label, None if waited is None else round(waited, 1), round(cpu_ms, 1))
        if mine and max(mine) > gap / 2:
            ours.append(entry)
        elif waited is not None and waited > gap / 2:
            cpu.append(entry)
        else:
            other.append(entry)
    result["long_gaps_gui_handler"] = sorted(ours, reverse=True)[:8]
    result["long_gaps_waiting_for_cpu"] = sorted(cpu, reverse=True)[:8]
    result["long_gaps_elsewhere"] = sorted(other, reverse=True)[:8]
    return result


def measure_document(folder: str, timeout: float = 1800.0, browse_s: float = 3.0,
                     size: tuple[int, int] = (1600, 1000)) -> dict[str, Any]:
    """Open ``folder`` as a document, "Run all" and go to the next page every ``browse_s``
    seconds until every page ran, with the gap probe on; report the figures.  The outputs
    go to the throw-away settings folder's results (unless ``folder`` holds tlseg outputs)."""
    from .document import DONE, FAILED

    _app, settings_dir, window, probe = _probed_window(size)
    window.open_document([folder])
    ok = wait_until(lambda: bool(window.document.pages) and not window.is_busy(), timeout)
    window.slow_handlers.clear()
    t0 = time.perf_counter()
    probe.start()
    window.run_all()
    moves = 0
    while ok and not all(p.state in (DONE, FAILED) for p in window.document.pages):
        if time.perf_counter() - t0 > timeout:
            ok = False
            break
        wait_until(lambda: False, browse_s)
        order, current = window.page_list.order(), window.current_index()
        window.go_to_page(order[(order.index(current) + 1 if current in order else 0) % len(order)])
        moves += 1
    ok = ok and wait_until(lambda: not window.is_busy(), timeout)
    probe.stop()
    pages = window.document.pages
    result = {"folder": folder, "ok": ok, "pages": len(pages), "page_moves": moves,
              "wall_s": round(time.perf_counter() - t0, 1),
              "states": [p.state for p in pages], "seconds": [p.seconds for p in pages],
              **{k: round(v, 1) if isinstance(v, float) else v for k, v in probe.summary().items()}}
    result.update(gap_causes(window, probe))
    window.shutdown()
    window.close()
    settings_dir.cleanup()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tlgui.probe", description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*")
    parser.add_argument("--document", help="a folder of pages: Run all while browsing")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    if args.document:
        print(json.dumps(measure_document(args.document, args.timeout)), flush=True)
    worst = 0.0
    for page in args.pages:
        result = measure(page, args.timeout)
        worst = max(worst, result["max_gap_ms"])
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
