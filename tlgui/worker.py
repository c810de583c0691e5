"""The engine runs in its own process; this thread only waits for it and relays.

``EngineWorker`` is a QObject moved to its own thread (the reader thread).  One job = prepare
(if needed), then iterate ``run_em`` (with per-sweep snapshots, so that sweep stepping and
cancelling are fine-grained), then ``finish``: all of it in the engine process
(:mod:`tlgui.engine_process`), whose typed messages (:mod:`tlgui.messages`) this thread hands
on through two signals.  The GUI steers a
running job through :class:`RunControl`, a plain thread-safe object: the worker's own event
loop is busy while a job runs, so queued slot calls would only arrive after the job ended.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal, Slot

from .engine_process import PAUSE, RUN, RUN_QUIET, STEP_EM, STEP_SWEEP, EngineProcess, Job, RunControl
from .messages import Done, EngineMessage, Failed

__all__ = ["PAUSE", "RUN", "RUN_QUIET", "STEP_EM", "STEP_SWEEP", "EngineProcess", "EngineWorker", "Job", "RunControl",
           "TASK_NICE", "TaskWorker", "WorkerThread", "lower_thread_priority"]


class EngineWorker(QObject):
    """Runs jobs in the engine process; every message leaves through a signal with its own data
    (unpickled from the process: the engine can never touch it again).  ``message`` carries
    :class:`~tlgui.messages.Stage`, ``Prepared``, ``SnapshotReady``, ``Finished`` and ``Failed``;
    ``done`` the job's :class:`~tlgui.messages.Done` (status "finished", "cancelled" or "failed")."""

    message = Signal(object)
    done = Signal(object)

    def __init__(self, process: EngineProcess | None = None) -> None:
        super().__init__()
        self.process = process or EngineProcess()

    @Slot(object)
    def run(self, job: Job) -> None:
        try:
            status = self.process.run(job, self._deliver)
        except Exception as exc:  # noqa: BLE001 - e.g. the process could not be started
            traceback.print_exc()
            self.message.emit(Failed(job.id, "".join(traceback.format_exception_only(type(exc), exc)).strip()))
            status = "failed"
        self.done.emit(Done(job.id, status))

    def _deliver(self, msg: EngineMessage) -> None:
        self.message.emit(msg)


#: How much nicer the task thread is than the window's (Linux): a page decode or an export
#: must not take a CPU from the GUI thread on a busy machine.
TASK_NICE = 5


def lower_thread_priority(increment: int) -> bool:
    """Make the calling thread, and only it, ``increment`` nicer (Linux, where a thread has
    its own nice value; elsewhere nothing).  Returns whether it was done."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + increment))
    except (AttributeError, OSError):
        return False
    return True


class TaskWorker(QObject):
    """Runs one-off heavy calls (page loads, exports, ground truth) off the GUI thread, one at
    a time, at a lower priority than the GUI thread (:data:`TASK_NICE`)."""

    done = Signal(str, object)
    failed = Signal(str, str)

    def __init__(self) -> None:
        super().__init__()
        self._niced = False

    @Slot(str, object)
    def run(self, tag: str, fn: Callable[[], Any]) -> None:
        if not self._niced:  # the first call runs in the task thread: lower its priority
            self._niced = True
            lower_thread_priority(TASK_NICE)
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


