"""The engine runs in its own process; this thread only waits for it and relays.

``EngineWorker`` is a QObject moved to its own thread (the reader thread).  One job = prepare
(if needed), then iterate ``run_em`` (with per-sweep snapshots, so that sweep stepping and
cancelling are fine-grained), then ``finish``: all of it in the engine process
(:mod:`tlgui.engine_process`), whose messages this thread turns into signals.  The GUI steers a
running job through :class:`RunControl`, a plain thread-safe object: the worker's own event
loop is busy while a job runs, so queued slot calls would only arrive after the job ended.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal, Slot

from .engine_process import PAUSE, RUN, STEP_EM, STEP_SWEEP, EngineProcess, Job, RunControl

__all__ = ["PAUSE", "RUN", "STEP_EM", "STEP_SWEEP", "EngineProcess", "EngineWorker", "Job", "RunControl",
           "TaskWorker", "WorkerThread"]


class EngineWorker(QObject):
    """Runs jobs in the engine process; every result leaves through a signal with its own data
    (unpickled from the process: the engine can never touch it again)."""

    stage = Signal(int, str)
    prepared = Signal(int, object, object)  # Preparation, PrepGeometry
    snapshot = Signal(int, object)        # Snapshot
    finished = Signal(int, object, object)  # Segmentation, RGBA label overlay pyramid
    failed = Signal(int, str)
    done = Signal(int, str)               # "finished" | "cancelled" | "failed"

    def __init__(self, process: EngineProcess | None = None) -> None:
        super().__init__()
        self.process = process or EngineProcess()

    @Slot(object)
    def run(self, job: Job) -> None:
        try:
            status = self.process.run(job, self._deliver)
        except Exception as exc:  # noqa: BLE001 - e.g. the process could not be started
            traceback.print_exc()
            self.failed.emit(job.id, "".join(traceback.format_exception_only(type(exc), exc)).strip())
            status = "failed"
        self.done.emit(job.id, status)

    def _deliver(self, msg: tuple) -> None:
        kind, job_id = msg[0], msg[1]
        if kind == "stage":
            self.stage.emit(job_id, msg[2])
        elif kind == "prepared":
            self.prepared.emit(job_id, msg[3], msg[4])
        elif kind == "snapshot":
            self.snapshot.emit(job_id, msg[2])
        elif kind == "finished":
            self.finished.emit(job_id, msg[2], msg[3])
        elif kind == "failed":
            self.failed.emit(job_id, msg[2])


class TaskWorker(QObject):
    """Runs one-off heavy calls (exports, ground truth) off the GUI thread, one at a time."""

    done = Signal(str, object)
    failed = Signal(str, str)

    @Slot(str, object)
    def run(self, tag: str, fn: Callable[[], Any]) -> None:
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - reported to the user, never a crash
            self.failed.emit(tag, "".join(traceback.format_exception_only(type(exc), exc)).strip())
            return
        self.done.emit(tag, result)


class WorkerThread:
    """A QThread owning one worker object; ``stop()`` ends it even if the worker is busy."""

    def __init__(self, worker: QObject, name: str) -> None:
        self.thread = QThread()
        self.thread.setObjectName(name)
        self.worker = worker
        worker.moveToThread(self.thread)
        self.thread.finished.connect(worker.deleteLater)
        self.thread.start()

    def stop(self, timeout_ms: int = 5000) -> bool:
        # QThread.quit is thread-safe: called directly, not through a queued signal, so it
        # works even while the GUI's event loop is shutting down.
        self.thread.quit()
        ok = self.thread.wait(timeout_ms)
        return bool(ok)


