"""The engine runs here, in a worker QThread, never in the GUI thread.

``EngineWorker`` is a QObject moved to its own thread.  One job = prepare (if needed), then
iterate ``run_em`` (with per-sweep snapshots, so that sweep stepping and cancelling are
fine-grained), then ``finish``.  The GUI steers a running job through :class:`RunControl`, a
plain thread-safe object (a condition variable and an event): the worker's own event loop is
busy while a job runs, so queued slot calls would only arrive after the job ended.
"""

from __future__ import annotations

import dataclasses
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine import pipeline
from engine.model import LineSet, Preparation, Snapshot
from engine.params import Parameters

from .canvas import image_pyramid, prep_geometry

RUN, PAUSE, STEP_EM, STEP_SWEEP = "run", "pause", "step_em", "step_sweep"


class Cancelled(Exception):
    """Raised inside the worker when the user pressed Stop."""


class RunControl:
    """What the worker may do next; set from the GUI thread, read from the worker thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._mode = PAUSE
        self.cancel_event = threading.Event()

    @property
    def mode(self) -> str:
        with self._cond:
            return self._mode

    def set_mode(self, mode: str) -> None:
        with self._cond:
            self._mode = mode
            self._cond.notify_all()

    def cancel(self) -> None:
        self.cancel_event.set()
        with self._cond:
            self._cond.notify_all()

    def check(self) -> None:
        if self.cancel_event.is_set():
            raise Cancelled

    def wait_while_paused(self) -> None:
        """Block the worker (not the GUI) while paused; raise :class:`Cancelled` on Stop."""
        with self._cond:
            while self._mode == PAUSE and not self.cancel_event.is_set():
                self._cond.wait(0.2)
        self.check()

    def after_snapshot(self, snap: Snapshot) -> bool:
        """Decide whether ``snap`` is shown, and pause after it when a step is complete."""
        with self._cond:
            if self._mode == STEP_SWEEP:
                self._mode = PAUSE
                return True
            if snap.sweep is not None:
                return False  # running or stepping an EM iteration: sweeps are not shown
            if self._mode == STEP_EM:
                self._mode = PAUSE
            return True


@dataclass
class Job:
    """One piece of engine work.  ``prep`` is reused when given, else the page at ``path``
    is prepared; with ``em`` the EM run follows (from ``segments`` when the user edited the
    initial lines) and then the final labelling.  Each job has its own control, so a late
    signal of a cancelled job can be told apart (``id``) and never steers the next one."""

    id: int
    path: str
    params: Parameters
    control: RunControl
    prep: Preparation | None = None
    segments: np.ndarray | None = None
    em: bool = True


def copy_snapshot(snap: Snapshot) -> Snapshot:
    """A snapshot whose arrays the engine can never touch again (the GUI keeps it)."""
    return dataclasses.replace(snap, posterior_lines=np.array(snap.posterior_lines, copy=True),
                               posterior_probs=np.array(snap.posterior_probs, copy=True),
                               entropy=np.array(snap.entropy, copy=True))


def label_overlay(labels: np.ndarray) -> list[np.ndarray]:
    """RGBA overlay of a label map (transparent background) as an image pyramid, built here,
    off the GUI thread."""
    from engine.export import colour_labels
    rgb = colour_labels(labels)
    alpha = np.where(labels > 0, 255, 0).astype(np.uint8)
    return image_pyramid(np.ascontiguousarray(np.dstack([rgb, alpha])))


class EngineWorker(QObject):
    """Runs jobs in its thread; every result leaves through a signal with its own data."""

    stage = Signal(int, str)
    prepared = Signal(int, object, object)  # Preparation, PrepGeometry
    snapshot = Signal(int, object)        # Snapshot (copied)
    finished = Signal(int, object, object)  # Segmentation, RGBA label overlay pyramid
    failed = Signal(int, str)
    done = Signal(int, str)               # "finished" | "cancelled" | "failed"

    @Slot(object)
    def run(self, job: Job) -> None:
        status = "finished"
        try:
            self._run(job)
        except Cancelled:
            status = "cancelled"
        except Exception as exc:  # noqa: BLE001 - every engine failure becomes a message
            status = "failed"
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self.failed.emit(job.id, detail)
            traceback.print_exc()
        self.done.emit(job.id, status)

    def _run(self, job: Job) -> None:
        control = job.control
        control.check()  # cancelled while queued behind another job

        def progress(message: str) -> None:
            control.check()  # Stop during preparation takes effect between its stages
            self.stage.emit(job.id, f"preparing: {message}")

        prep = job.prep
        if prep is None:
            self.stage.emit(job.id, "preparing")
            prep = pipeline.prepare(job.path, job.params, progress=progress)
            control.check()
            # What the canvas draws of it is computed here too, not in the GUI thread.
            self.prepared.emit(job.id, prep, prep_geometry(prep))
        if not job.em:
            return
        lines: LineSet = prep.initial_lines
        if job.segments is not None:
            lines = pipeline.lines_from_segments(prep, job.segments)
        self.stage.emit(job.id, "EM")
        gen = pipeline.run_em(prep, lines, params=job.params, per_sweep=True)
        last: Snapshot | None = None
        try:
            for snap in gen:
                control.check()
                last = snap if snap.sweep is None else last
                if control.after_snapshot(snap):
                    self.snapshot.emit(job.id, copy_snapshot(snap))
                control.wait_while_paused()
        finally:
            gen.close()
        if last is None:
            raise RuntimeError("the EM run produced no snapshot")
        self.stage.emit(job.id, "labelling")
        seg = pipeline.finish(prep, last, job.params)
        control.check()
        self.finished.emit(job.id, seg, label_overlay(seg.labels))


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


