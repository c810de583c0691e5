"""The engine in a process of its own (``python -m tlgui.engine_process``), never in the GUI's.

Why a process and not a thread: NumPy/SciPy calls in the engine hold the GIL for up to tens
of ms each (sorts, ``np.unique``, fancy indexing over the page), and every call from Qt into
Python in the GUI thread (a slot, an item's ``paint``) had to wait for the current one, so a
repaint made of a few such waits blocked the window for over 100 ms.  A process shares no GIL;
it is also what makes Stop immediate: the engine is asked to stop (it looks between
preparation stages and after every message-passing sweep) and, when it is inside a long call
that cannot look (``finish``, a preparation stage), the process is killed after
:data:`GRACE_S` and a fresh one is started.

This module never imports Qt (the child runs it).  The parent side is :class:`EngineProcess`,
driven from one reader thread (``tlgui.worker.EngineWorker``); the child side is
:func:`child_main`.  The child is a fresh interpreter (like multiprocessing's spawn, but it never
re-imports the caller's ``__main__``, and it lowers its priority before importing anything)
talking over two pipes wrapped in multiprocessing ``Connection`` objects, in the typed
messages of :mod:`tlgui.messages`.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from engine import pipeline
from engine.model import LineSet, Preparation, Snapshot
from engine.params import Parameters

from .geometry import label_overlay, prep_geometry, run_geometry
from .messages import (
    PAUSE,
    RUN,
    RUN_QUIET,
    STEP_EM,
    STEP_SWEEP,
    Cancel,
    Done,
    EngineMessage,
    Failed,
    Finished,
    JobSpec,
    ModeChange,
    Outputs,
    Prepared,
    Quit,
    RunRegions,
    SnapshotReady,
    Stage,
    recv_message,
    send_message,
)
from .steering import start_lines

__all__ = ["GRACE_S", "PAUSE", "RUN", "RUN_QUIET", "STEP_EM", "STEP_SWEEP", "EngineProcess", "Job",
           "RunControl", "run_job"]
#: How long a cancelled job may take to notice before its process is killed.
GRACE_S = 0.25
#: How often the reader thread looks at the user's controls while waiting for the engine.
POLL_S = 0.02
#: The engine process runs at a lower priority: on a busy machine the window comes first.
ENGINE_NICE = 5
#: The child's command (``python -c``): lower its priority first, then import this module
#: (NumPy, SciPy, OpenCV, the engine: about a second of CPU, while the window loads a page).
CHILD_BOOT = (f"import os\ntry:\n    os.nice({ENGINE_NICE})\nexcept (AttributeError, OSError):\n    pass\n"
              "import runpy\nrunpy.run_module('tlgui.engine_process', run_name='__main__', alter_sys=True)\n")


class Cancelled(Exception):
    """Raised inside the engine when the user pressed Stop."""


class ParentGone(Exception):
    """The window's end of the pipe closed: the child exits."""


# ================================================================ parent side
class RunControl:
    """What the engine may do next, set from the GUI thread.

    The GUI only sets :attr:`mode` (and ``cancel``); the reader thread forwards the changes to
    the engine process (``seq`` tells them apart) and takes over the mode the engine reports
    after a step (it pauses itself), unless the user changed it again in the meantime."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mode = PAUSE
        self._seq = 0
        self.cancel_event = threading.Event()

    @property
    def mode(self) -> str:
        with self._lock:
            return self._mode

    def set_mode(self, mode: str) -> None:
        with self._lock:
            self._mode = mode
            self._seq += 1

    def state(self) -> tuple[str, int]:
        with self._lock:
            return self._mode, self._seq

    def engine_reports(self, mode: str, seq: int) -> None:
        """The engine's mode after a snapshot; kept only if it had seen the latest change."""
        with self._lock:
            if seq == self._seq:
                self._mode = mode

    def cancel(self) -> None:
        self.cancel_event.set()

    def cancelled(self) -> bool:
        return self.cancel_event.is_set()


@dataclass
class Job:
    """One piece of engine work.  ``prep`` is reused when given, else the page at ``path``
    is prepared; with ``em`` the EM run follows (from ``lines`` when the user edited the
    initial lines, or from those of ``lines_file``) and then the final labelling; with
    ``outputs`` the engine process then writes the page's ``tlseg`` outputs
    (:func:`engine.export.write_outputs`: in that process, not in the window's).  A ``quiet``
    job (a page run in the background) sends neither its preparation nor its snapshots, only
    stages and the final result, and leaves the preparation the process keeps for the shown
    page where it is.  Each job
    has its own control, so a late message of a cancelled job can be told apart (``id``)
    and never steers the next one."""

    id: int
    path: str
    params: Parameters
    control: RunControl
    prep: Preparation | None = None
    lines: LineSet | None = None
    em: bool = True
    outputs: Outputs | None = None
    quiet: bool = False
    lines_file: str | None = None

    def spec(self, mode: str, seq: int, prep_token: int | None, send_prep: bool) -> JobSpec:
        """What the engine process is sent (the preparation only when it lacks it)."""
        return JobSpec(self.id, self.path, self.params, self.em, mode, seq, self.lines, self.lines_file,
                       self.outputs, self.quiet, self.prep if send_prep else None, prep_token)


class EngineProcess:
    """The parent's handle on the engine process: starts it (spawn), runs jobs in it one at a
    time (:meth:`run`, from one thread), kills and replaces it when it does not stop in time
    or dies.  The process keeps the last preparation, so a re-run does not send it back."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # process state and sends
        self._proc: Any = None
        self._to_child: Connection | None = None
        self._from_child: Connection | None = None
        self._child_prep: Preparation | None = None  # our copy of the preparation it holds
        self._child_token = -1

    @property
    def pid(self) -> int | None:
        with self._lock:
            return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the process unless there is one (it imports for a second or so: call this
        early, e.g. when a page is opened).  A process that died is replaced by :meth:`run`."""
        with self._lock:
            if self._proc is not None:
                return
            child_in, to_child = os.pipe()
            from_child, child_out = os.pipe()
            root = str(Path(__file__).resolve().parent.parent)  # where the packages are
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-c", CHILD_BOOT, str(child_in), str(child_out)],
                    pass_fds=(child_in, child_out), stdin=subprocess.DEVNULL, env=env)
            finally:
                os.close(child_in)  # only the child holds these ends: its death is our EOF
                os.close(child_out)
            self._proc = proc
            self._to_child = Connection(to_child, readable=False)
            self._from_child = Connection(from_child, writable=False)

    def _send(self, msg: Any) -> None:
        with self._lock:
            if self._to_child is not None:
                send_message(self._to_child, msg)

    def _discard(self) -> None:
        for conn in (self._to_child, self._from_child):
            if conn is not None:
                conn.close()
        self._proc = self._to_child = self._from_child = None
        self._child_prep = None

    def kill(self) -> None:
        """End the process now (its job is lost) and forget it."""
        with self._lock:
            proc = self._proc
            if proc is not None:
                proc.kill()
                _wait(proc, 2.0)
            self._discard()

    def _forget_if_dead(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is not None:
                self._discard()

    def close(self) -> None:
        """Ask the process to exit, kill it if it does not within a second."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            try:
                self._send(Quit())
            except OSError:
                pass
            if not _wait(proc, 1.0):
                proc.kill()
                _wait(proc, 2.0)
            self._discard()

    def run(self, job: Job, deliver: Callable[[EngineMessage], None]) -> str:
        """Run ``job`` in the process; hand every message but :class:`Done` to ``deliver`` (in
        this thread).  Returns "finished", "cancelled" or "failed"."""
        control = job.control
        if control.cancelled():
            return "cancelled"
        self._forget_if_dead()
        self.start()
        with self._lock:
            from_child, proc = self._from_child, self._proc
        mode, seq = control.state()
        send_prep = job.prep is not None and job.prep is not self._child_prep
        token = None if job.prep is None else (job.id if send_prep else self._child_token)
        try:
            self._send(job.spec(mode, seq, token, send_prep))
        except OSError:
            return self._died(job, deliver)
        if send_prep:  # a new process, or another preparation: it holds this one now
            self._child_prep, self._child_token = job.prep, job.id
        sent_seq, deadline = seq, None
        while True:
            if control.cancelled():
                if deadline is None:
                    deadline = time.monotonic() + GRACE_S
                    self._send(Cancel(job.id))
                elif time.monotonic() > deadline:
                    # Inside a call that cannot look: kill it, and start the next process now.
                    self.kill()
                    self.start()
                    return "cancelled"
            else:
                mode, seq = control.state()
                if seq != sent_seq:
                    sent_seq = seq
                    self._send(ModeChange(job.id, mode, seq))
            try:
                if not from_child.poll(POLL_S):
                    if proc.poll() is not None and not from_child.poll(0):
                        return self._died(job, deliver)
                    continue
                msg = recv_message(from_child)
            except (EOFError, OSError):
                return self._died(job, deliver)
            if isinstance(msg, Done):
                return "cancelled" if control.cancelled() else msg.status
            if isinstance(msg, Prepared):
                self._child_prep, self._child_token = msg.prep, msg.token
            elif isinstance(msg, SnapshotReady):
                control.engine_reports(msg.mode, msg.seq)
            if not control.cancelled():
                deliver(msg)

    def _died(self, job: Job, deliver: Callable[[EngineMessage], None]) -> str:
        with self._lock:
            code = None
            if self._proc is not None:
                _wait(self._proc, 1.0)
                code = self._proc.returncode
            self._discard()
        if job.control.cancelled():
            return "cancelled"
        deliver(Failed(job.id, f"the engine process ended unexpectedly (exit code {code})"))
        return "failed"


def _wait(proc: subprocess.Popen, timeout: float) -> bool:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


# ================================================================ child side
class ChildControl:
    """The engine's view of the user's controls: the messages waiting in its inbox."""

    def __init__(self, inbox: Connection, job_id: int, mode: str, seq: int) -> None:
        self.inbox = inbox
        self.job_id = job_id
        self.mode = mode
        self.seq = seq
        self.cancelled = False

    def poll(self, timeout: float = 0.0) -> None:
        try:
            while self.inbox.poll(timeout):
                timeout = 0.0
                msg = recv_message(self.inbox)
                if isinstance(msg, Quit):
                    raise ParentGone
                if isinstance(msg, ModeChange) and msg.job_id == self.job_id:
                    self.mode, self.seq = msg.mode, msg.seq
                elif isinstance(msg, Cancel) and msg.job_id == self.job_id:
                    self.cancelled = True
        except (EOFError, OSError) as exc:
            raise ParentGone from exc

    def check(self) -> None:
        self.poll()
        if self.cancelled:
            raise Cancelled

    def wait_while_paused(self) -> None:
        """Block while paused; raise :class:`Cancelled` on Stop."""
        self.check()
        while self.mode == PAUSE and not self.cancelled:
            self.poll(0.2)
        self.check()

    def after_snapshot(self, snap: Snapshot) -> bool:
        """Decide whether ``snap`` is shown, and pause after it when a step is complete."""
        if self.mode == RUN_QUIET:
            return False
        if self.mode == STEP_SWEEP:
            self.mode = PAUSE
            return True
        if snap.sweep is not None:
            return False  # running or stepping an EM iteration: sweeps are not shown
        if self.mode == STEP_EM:
            self.mode = PAUSE
        return True


def run_job(spec: JobSpec, control: ChildControl, emit: Callable[[EngineMessage], None],
            cache: dict[int, Preparation]) -> None:
    """One job in the engine process: prepare (unless given), EM, finish; results to ``emit``."""
    job_id = spec.id
    params = spec.params
    control.check()

    def progress(message: str) -> None:
        control.check()  # Stop during preparation is noticed between its stages
        emit(Stage(job_id, f"preparing: {message}"))

    prep = spec.prep
    if prep is None and spec.prep_token is not None:
        prep = cache.get(spec.prep_token)
        if prep is None:
            raise RuntimeError("the engine process lost the preparation")
    if prep is None:
        emit(Stage(job_id, "preparing"))
        prep = pipeline.prepare(spec.path, params, progress=progress)
        control.check()
    if spec.quiet:
        pass  # a background page: the kept preparation stays the shown page's
    elif spec.prep_token is None:
        cache.clear()
        cache[job_id] = prep
        # What the canvas draws of it is computed here too, not in the GUI.
        emit(Prepared(job_id, job_id, prep, prep_geometry(prep)))
    else:
        cache.clear()
        cache[spec.prep_token] = prep
    if not spec.em:
        return
    lines = start_lines(prep, spec.lines, spec.lines_file)
    # Locked or anchored lines lead the regions EM and stage 8 run on (the shown preparation
    # stays the page's own, which the edits refer to; region indices and frames are the same).
    # The canvas draws the regions and edges EM works on.
    followed = pipeline.for_lines(prep, lines, params)
    if followed is not prep and not spec.quiet:
        emit(RunRegions(job_id, followed.edges.copy(), run_geometry(followed)))
    prep = followed
    emit(Stage(job_id, "EM"))
    started = time.perf_counter()
    gen = pipeline.run_em(prep, lines, params=params, per_sweep=True)
    last: Snapshot | None = None
    try:
        for snap in gen:
            control.check()
            last = snap if snap.sweep is None else last
            if control.after_snapshot(snap) and not spec.quiet:
                emit(SnapshotReady(job_id, snap, control.mode, control.seq))
            control.wait_while_paused()
    finally:
        gen.close()
    if last is None:
        raise RuntimeError("the EM run produced no snapshot")
    emit(Stage(job_id, "labelling"))
    seg = dataclasses.replace(pipeline.finish(prep, last, params), initial_lines=lines)
    control.check()
    overlay = label_overlay(seg.labels)
    control.check()
    if spec.outputs is not None:
        emit(Stage(job_id, "writing outputs"))
        write_outputs(spec.outputs, spec.path, prep, lines, last, seg, time.perf_counter() - started)
    emit(Finished(job_id, seg, overlay))


def write_outputs(outputs: Outputs, path: str, prep: Preparation, initial: LineSet, last: Snapshot, seg: Any,
                  run_s: float) -> None:
    """A finished page's outputs, as ``tlseg`` writes them (or the window's compact cache
    entry), with its times, EM figures and the initial lines EM started from (``tlseg
    segment --initial-lines`` reads them back)."""
    from engine import export

    timings = {k: float(v) for k, v in dict(prep.timings or {}).items()}
    timings["em_and_finish"] = run_s
    timings["total"] = sum(timings.values())
    meta = {**outputs.extra, "seed": prep.params.seed, "timings": timings, "iterations": int(last.iteration),
            "converged": bool(last.converged), "preparation": pipeline.preparation_summary(prep),
            "initial_lines": initial.to_dict()}
    if outputs.compact and (seg.labels.size == 0 or int(seg.labels.max()) <= 65535):
        write_compact_outputs(outputs.folder, outputs.stem, seg, Path(path).name, meta)
    else:
        export.write_outputs(outputs.folder, outputs.stem, prep.gray, seg, Path(path).name, meta)


def write_compact_outputs(folder: str, stem: str, seg: Any, image_name: str, meta: dict[str, Any]) -> None:
    """The window's cache entry of a page: ``<stem>.labels.png`` (16-bit, compressed) and
    ``<stem>.json`` (as ``tlseg`` writes it, with ``"compact": true``), each written
    atomically; the JSON, which marks the entry complete, is removed first and written last."""
    import json

    from engine import export

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    h, w = seg.labels.shape
    meta = {**meta, "lines": seg.lines.to_dict(), "n_lines": len(seg.lines), "image": image_name,
            "shape": [int(h), int(w)], "compact": True}
    (out / f"{stem}.json").unlink(missing_ok=True)
    export.write_label_png(out / f"{stem}.labels.png", seg.labels)
    text = json.dumps(meta, indent=2, default=_json_value, allow_nan=True)
    export.atomic_write_bytes(out / f"{stem}.json", text.encode("utf-8"))


def _json_value(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


def child_main(inbox: Connection, outbox: Connection) -> None:
    """The engine process: run the jobs that arrive until the window goes (its priority was
    lowered before it imported anything: see :data:`CHILD_BOOT`)."""

    def emit(msg: EngineMessage | Done) -> None:
        send_message(outbox, msg)

    cache: dict[int, Preparation] = {}
    while True:
        try:
            msg = recv_message(inbox)
        except (EOFError, OSError):
            return
        if isinstance(msg, Quit):
            return
        if not isinstance(msg, JobSpec):
            continue  # a late control message of a job that has ended
        control = ChildControl(inbox, msg.id, msg.mode, msg.seq)
        status = "finished"
        try:
            run_job(msg, control, emit, cache)
        except Cancelled:
            status = "cancelled"
        except ParentGone:
            return
        except Exception as exc:  # noqa: BLE001 - every engine failure becomes a message
            status = "failed"
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            traceback.print_exc()
            try:
                emit(Failed(msg.id, detail))
            except (OSError, pickle.PicklingError):
                return
        try:
            emit(Done(msg.id, status))
        except OSError:
            return


if __name__ == "__main__":
    child_main(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
