"""One-off heavy calls off the GUI thread (page loads, exports, ground truth, scoring), and the
timing of the GUI thread's own handlers (what :mod:`tlgui.probe` reports)."""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from .worker import TaskWorker, WorkerThread

#: A GUI-thread handler slower than this is recorded.
SLOW_HANDLER_MS = 20.0


class HandlerTimes:
    """GUI-thread handlers that took long: (end time, name, ms), for the latency probe."""

    def __init__(self) -> None:
        self.slow: list[tuple[float, str, float]] = []

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            end = time.perf_counter()
            ms = (end - t0) * 1e3
            if ms > SLOW_HANDLER_MS:
                self.slow.append((end, name, ms))


class TaskRunner(QObject):
    """Runs callables on the task thread, one at a time; each one's handler runs in the GUI
    thread.  A handler that raises is a bug shown as ``internalError``, never a dead window.
    ``finished`` fires after every task (the window checks whether it is idle)."""

    runTask = Signal(str, object)  # -> TaskWorker.run (queued)
    internalError = Signal(str)
    finished = Signal()

    def __init__(self, times: HandlerTimes) -> None:
        super().__init__()
        self.times = times
        self.thread = WorkerThread(TaskWorker(), "tlgui-tasks")
        self.runTask.connect(self.thread.worker.run)
        self.thread.worker.done.connect(self._on_done)
        self.thread.worker.failed.connect(self._on_failed)
        self._handlers: dict[str, tuple[Callable[[Any], None], Callable[[str], None]]] = {}
        self.pending = 0

    def submit(self, tag: str, fn: Callable[[], Any], on_done: Callable[[Any], None],
               on_error: Callable[[str], None]) -> None:
        """Run ``fn`` on the task thread; ``on_done(result)`` or ``on_error(message)`` runs in
        the GUI thread.  A later task of the same tag replaces the handlers of a pending one."""
        self._handlers[tag] = (on_done, on_error)
        self.pending += 1
        self.runTask.emit(tag, fn)

    @Slot(str, object)
    def _on_done(self, tag: str, result: Any) -> None:
        self.pending -= 1
        handlers = self._handlers.pop(tag, None)
        try:
            if handlers is not None:
                with self.times.timed(f"task {tag}"):
                    handlers[0](result)
        except Exception as exc:  # noqa: BLE001 - a bug shown in the window beats a dead window
            traceback.print_exc()
            self.internalError.emit(f"Internal error after {tag}: {exc}")
        finally:
            self.finished.emit()

    @Slot(str, str)
    def _on_failed(self, tag: str, message: str) -> None:
        self.pending -= 1
        handlers = self._handlers.pop(tag, None)
        try:
            if handlers is not None:
                handlers[1](message)
        finally:
            self.finished.emit()

    def stop(self) -> None:
        for signal in (self.thread.worker.done, self.thread.worker.failed):
            signal.disconnect()
        self.thread.stop()
