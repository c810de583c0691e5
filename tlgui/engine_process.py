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
talking over two pipes wrapped in multiprocessing ``Connection`` objects.  Messages are
pickled with protocol 5 and NumPy arrays travel as out-of-band buffers, each read straight
into a fresh array by ``os.readv`` (see :func:`recv_buffer`), so the reader thread spends its
time in ``readv`` (GIL released), not in copies.

Child -> parent: ``("stage", id, text)``, ``("prepared", id, token, prep, geometry)``,
``("snapshot", id, snap, mode, seq)``, ``("finished", id, seg, overlay)``,
``("failed", id, text)``, ``("done", id, status)``.
Parent -> child: ``("job", spec)``, ``("mode", id, mode, seq)``, ``("cancel", id)``, ``("quit",)``.
"""

from __future__ import annotations

import os
import pickle
import struct
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
from engine.model import Preparation, Snapshot
from engine.params import Parameters

from .geometry import label_overlay, prep_geometry

RUN, PAUSE, STEP_EM, STEP_SWEEP = "run", "pause", "step_em", "step_sweep"
#: Run to the end without sending snapshots (a page the user left runs on in the background).
RUN_QUIET = "run_quiet"
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


# ================================================================ messages
def send_message(conn: Connection, obj: Any) -> None:
    """Pickle ``obj`` (protocol 5) and send it, NumPy buffers out of band (no copies)."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    conn.send_bytes(pickle.dumps((data, [r.nbytes for r in raws]), protocol=5))
    for raw in raws:
        conn.send_bytes(raw)


def recv_message(conn: Connection) -> Any:
    """Receive one :func:`send_message` message; arrays come back writable (views of the
    buffers read by :func:`recv_buffer`)."""
    data, sizes = pickle.loads(recv_buffer(conn))
    buffers = []
    for size in sizes:
        buf = recv_buffer(conn)
        if len(buf) != size:
            raise OSError(f"expected a buffer of {size} bytes, got {len(buf)}")
        buffers.append(buf)
    return pickle.loads(data, buffers=buffers)


def recv_buffer(conn: Connection) -> np.ndarray:
    """One ``Connection.send_bytes`` message as a new uint8 array, read straight into it.

    ``Connection.recv_bytes_into`` holds the GIL for whole-buffer copies: it zero-fills the
    destination (``bytearray(n)``), gathers the chunks in a ``BytesIO`` and copies that over
    at the end, i.e. some 10-20 ms per 40 MB during which the GUI thread cannot run a line of
    Python.  Here the buffer is allocated uninitialised and filled by ``os.readv``, which
    releases the GIL while the kernel copies each chunk."""
    fd = conn.fileno()
    header = np.empty(4, dtype=np.uint8)
    _read_into(fd, memoryview(header), first=True)
    size = int(struct.unpack("!i", header.tobytes())[0])
    if size == -1:  # Connection's header of a message over 2 GiB
        header = np.empty(8, dtype=np.uint8)
        _read_into(fd, memoryview(header))
        size = int(struct.unpack("!Q", header.tobytes())[0])
    buf = np.empty(size, dtype=np.uint8)
    _read_into(fd, memoryview(buf))
    return buf


def _read_into(fd: int, view: memoryview, first: bool = False) -> None:
    """Fill ``view`` from ``fd`` (EOFError if the pipe ends before a message begins)."""
    got, size = 0, len(view)
    while got < size:
        n = os.readv(fd, [view[got:]])
        if n == 0:
            if first and got == 0:
                raise EOFError
            raise OSError("got end of file during message")
        got += n


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
    is prepared; with ``em`` the EM run follows (from ``segments`` when the user edited the
    initial lines) and then the final labelling; with ``outputs`` (folder, stem, extra JSON)
    the engine process then writes the page's ``tlseg`` outputs there
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
    segments: np.ndarray | None = None
    em: bool = True
    outputs: tuple[str, str, dict[str, Any]] | None = None
    quiet: bool = False


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
                self._send(("quit",))
            except OSError:
                pass
            if not _wait(proc, 1.0):
                proc.kill()
                _wait(proc, 2.0)
            self._discard()

    def run(self, job: Job, deliver: Callable[[tuple], None]) -> str:
        """Run ``job`` in the process; hand every message but ``done`` to ``deliver`` (in this
        thread).  Returns "finished", "cancelled" or "failed"."""
        control = job.control
        if control.cancelled():
            return "cancelled"
        self._forget_if_dead()
        self.start()
        with self._lock:
            from_child, proc = self._from_child, self._proc
        mode, seq = control.state()
        spec: dict[str, Any] = {"id": job.id, "path": job.path, "params": job.params, "em": job.em,
                                "segments": job.segments, "mode": mode, "seq": seq, "outputs": job.outputs,
                                "quiet": job.quiet}
        if job.prep is not None:
            if job.prep is self._child_prep:
                spec["prep_token"] = self._child_token
            else:  # a new process, or another preparation: send it
                spec["prep"], spec["prep_token"] = job.prep, job.id
        try:
            self._send(("job", spec))
        except OSError:
            return self._died(job, deliver)
        if "prep" in spec:
            self._child_prep, self._child_token = job.prep, job.id
        sent_seq, deadline = seq, None
        while True:
            if control.cancelled():
                if deadline is None:
                    deadline = time.monotonic() + GRACE_S
                    self._send(("cancel", job.id))
                elif time.monotonic() > deadline:
                    # Inside a call that cannot look: kill it, and start the next process now.
                    self.kill()
                    self.start()
                    return "cancelled"
            else:
                mode, seq = control.state()
                if seq != sent_seq:
                    sent_seq = seq
                    self._send(("mode", job.id, mode, seq))
            try:
                if not from_child.poll(POLL_S):
                    if proc.poll() is not None and not from_child.poll(0):
                        return self._died(job, deliver)
                    continue
                msg = recv_message(from_child)
            except (EOFError, OSError):
                return self._died(job, deliver)
            kind = msg[0]
            if kind == "done":
                return "cancelled" if control.cancelled() else msg[2]
            if kind == "prepared":
                self._child_prep, self._child_token = msg[3], msg[2]
            elif kind == "snapshot":
                control.engine_reports(msg[3], msg[4])
            if not control.cancelled():
                deliver(msg)

    def _died(self, job: Job, deliver: Callable[[tuple], None]) -> str:
        with self._lock:
            code = None
            if self._proc is not None:
                _wait(self._proc, 1.0)
                code = self._proc.returncode
            self._discard()
        if job.control.cancelled():
            return "cancelled"
        deliver(("failed", job.id, f"the engine process ended unexpectedly (exit code {code})"))
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
                if msg[0] == "quit":
                    raise ParentGone
                if msg[0] == "mode" and msg[1] == self.job_id:
                    self.mode, self.seq = msg[2], msg[3]
                elif msg[0] == "cancel" and msg[1] == self.job_id:
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


def run_job(spec: dict[str, Any], control: ChildControl, emit: Callable[[tuple], None],
            cache: dict[int, Preparation]) -> None:
    """One job in the engine process: prepare (unless given), EM, finish; results to ``emit``."""
    job_id = spec["id"]
    params: Parameters = spec["params"]
    control.check()

    def progress(message: str) -> None:
        control.check()  # Stop during preparation is noticed between its stages
        emit(("stage", job_id, f"preparing: {message}"))

    prep = spec.get("prep")
    if prep is None and "prep_token" in spec:
        prep = cache.get(spec["prep_token"])
        if prep is None:
            raise RuntimeError("the engine process lost the preparation")
    if prep is None:
        emit(("stage", job_id, "preparing"))
        prep = pipeline.prepare(spec["path"], params, progress=progress)
        control.check()
    quiet = bool(spec.get("quiet"))
    if quiet:
        pass  # a background page: the kept preparation stays the shown page's
    elif "prep_token" not in spec:
        cache.clear()
        cache[job_id] = prep
        # What the canvas draws of it is computed here too, not in the GUI.
        emit(("prepared", job_id, job_id, prep, prep_geometry(prep)))
    else:
        cache.clear()
        cache[spec["prep_token"]] = prep
    if not spec["em"]:
        return
    lines = prep.initial_lines
    if spec.get("segments") is not None:
        lines = pipeline.lines_from_segments(prep, spec["segments"])
    emit(("stage", job_id, "EM"))
    started = time.perf_counter()
    gen = pipeline.run_em(prep, lines, params=params, per_sweep=True)
    last: Snapshot | None = None
    try:
        for snap in gen:
            control.check()
            last = snap if snap.sweep is None else last
            if control.after_snapshot(snap) and not quiet:
                emit(("snapshot", job_id, snap, control.mode, control.seq))
            control.wait_while_paused()
    finally:
        gen.close()
    if last is None:
        raise RuntimeError("the EM run produced no snapshot")
    emit(("stage", job_id, "labelling"))
    seg = pipeline.finish(prep, last, params)
    control.check()
    overlay = label_overlay(seg.labels)
    control.check()
    if spec.get("outputs") is not None:
        emit(("stage", job_id, "writing outputs"))
        write_outputs(spec["outputs"], spec["path"], prep, last, seg, time.perf_counter() - started)
    emit(("finished", job_id, seg, overlay))


def write_outputs(outputs: tuple[str, str, dict[str, Any]], path: str, prep: Preparation, last: Snapshot,
                  seg: Any, run_s: float) -> None:
    """A finished page's outputs, as ``tlseg`` writes them, with its times and EM figures."""
    from engine import export

    outdir, stem, extra = outputs
    timings = {k: float(v) for k, v in dict(prep.timings or {}).items()}
    timings["em_and_finish"] = run_s
    timings["total"] = sum(timings.values())
    meta = {**extra, "seed": prep.params.seed, "timings": timings, "iterations": int(last.iteration),
            "converged": bool(last.converged), "preparation": pipeline.preparation_summary(prep)}
    export.write_outputs(outdir, stem, prep.gray, seg, Path(path).name, meta)


def child_main(inbox: Connection, outbox: Connection) -> None:
    """The engine process: run the jobs that arrive until the window goes (its priority was
    lowered before it imported anything: see :data:`CHILD_BOOT`)."""

    def emit(msg: tuple) -> None:
        send_message(outbox, msg)

    cache: dict[int, Preparation] = {}
    while True:
        try:
            msg = recv_message(inbox)
        except (EOFError, OSError):
            return
        if msg[0] == "quit":
            return
        if msg[0] != "job":
            continue  # a late control message of a job that has ended
        spec = msg[1]
        control = ChildControl(inbox, spec["id"], spec["mode"], spec["seq"])
        status = "finished"
        try:
            run_job(spec, control, emit, cache)
        except Cancelled:
            status = "cancelled"
        except ParentGone:
            return
        except Exception as exc:  # noqa: BLE001 - every engine failure becomes a message
            status = "failed"
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            traceback.print_exc()
            try:
                emit(("failed", spec["id"], detail))
            except (OSError, pickle.PicklingError):
                return
        try:
            emit(("done", spec["id"], status))
        except OSError:
            return


if __name__ == "__main__":
    child_main(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
