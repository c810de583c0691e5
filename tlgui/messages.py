"""What the window and the engine process say to each other: typed messages, and the pipe
that carries them.

Every message is a frozen dataclass defined here (not in :mod:`tlgui.engine_process`, which the
child runs as ``__main__``: classes defined there would not unpickle in the parent).  They are
pickled with protocol 5 and their NumPy arrays travel as out-of-band buffers, each read straight
into a fresh array by ``os.readv`` (see :func:`recv_buffer`), so the reader thread spends its
time in ``readv`` (GIL released), not in copies.  This module never imports Qt.

Parent -> child: :class:`JobSpec`, :class:`ModeChange`, :class:`Cancel`, :class:`Quit`.
Child -> parent: :class:`Stage`, :class:`Prepared`, :class:`RunRegions`, :class:`SnapshotReady`, :class:`Finished`,
:class:`Failed`, then always :class:`Done`.
"""

from __future__ import annotations

import os
import pickle
import struct
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Literal

import numpy as np

from engine.model import LineSet, Preparation, Segmentation, Snapshot
from engine.params import Parameters

RUN, PAUSE, STEP_EM, STEP_SWEEP = "run", "pause", "step_em", "step_sweep"
#: Run to the end without sending snapshots (a page the user left runs on in the background).
RUN_QUIET = "run_quiet"
#: How a job ended.
Status = Literal["finished", "cancelled", "failed"]


# ================================================================ parent -> child
@dataclass(frozen=True)
class Outputs:
    """Where the engine process writes a finished page's outputs: ``folder``/``stem``.*, with
    ``extra`` merged into its JSON; ``compact``: labels only as a compressed PNG (the window's
    results cache) instead of the full ``tlseg`` set."""

    folder: str
    stem: str
    extra: dict[str, Any] = field(default_factory=dict)
    compact: bool = False


@dataclass(frozen=True)
class JobSpec:
    """One job as the engine process receives it (see :class:`tlgui.engine_process.Job`).

    ``prep`` is sent only when the process does not hold it already; ``prep_token`` names the
    preparation it holds (None: prepare the page at ``path``).  EM starts from ``lines``
    (the window's rows, each as the user left it), else from the lines of ``lines_file``
    (a background page's autosaved edits, read once the page is prepared), else from the
    preparation's own (:func:`tlgui.steering.start_lines`)."""

    id: int
    path: str
    params: Parameters
    em: bool
    mode: str
    seq: int
    lines: LineSet | None = None
    lines_file: str | None = None
    outputs: Outputs | None = None
    quiet: bool = False
    prep: Preparation | None = None
    prep_token: int | None = None


@dataclass(frozen=True)
class ModeChange:
    job_id: int
    mode: str
    seq: int


@dataclass(frozen=True)
class Cancel:
    job_id: int


@dataclass(frozen=True)
class Quit:
    pass


# ================================================================ child -> parent
@dataclass(frozen=True)
class Stage:
    """What the engine is doing (``preparing: ink``, ``EM``, ``labelling``...)."""

    job_id: int
    text: str


@dataclass(frozen=True)
class Prepared:
    """A new preparation, the token the process keeps it under, and what the canvas draws of
    it (:class:`tlgui.geometry.PrepGeometry`, computed in the engine process)."""

    job_id: int
    token: int
    prep: Preparation
    geometry: Any


@dataclass(frozen=True)
class RunRegions:
    """The regions and MRF edges a run's EM works on, sent when the lines it starts from led
    them away from the page's own (engine.given_regions): the edges ``(E, 2)`` (sample
    indices) and what the canvas draws of them (:func:`tlgui.geometry.run_geometry`)."""

    job_id: int
    edges: np.ndarray
    geometry: Any


@dataclass(frozen=True)
class SnapshotReady:
    """One EM snapshot, with the engine's control mode after it (it pauses itself after a
    step) and the sequence number of the last mode change it had seen."""

    job_id: int
    snap: Snapshot
    mode: str
    seq: int


@dataclass(frozen=True)
class Finished:
    """The final labels, and their colour overlay as an RGBA image pyramid."""

    job_id: int
    seg: Segmentation
    overlay: list[np.ndarray]


@dataclass(frozen=True)
class Failed:
    job_id: int
    message: str


@dataclass(frozen=True)
class Done:
    """The last message of every job."""

    job_id: int
    status: str


#: The messages the engine process sends while a job runs (all but :class:`Done`).
EngineMessage = Stage | Prepared | RunRegions | SnapshotReady | Finished | Failed


# ================================================================ the pipe
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
