"""The engine's helper threads: one worker thread per kind of work that overlaps the main
thread's (NumPy, OpenCV and SciPy's k-d tree release the GIL in their passes)."""

from __future__ import annotations

import concurrent.futures
import os

_POOLS: dict[str, concurrent.futures.ThreadPoolExecutor] = {}


def worker(kind: str) -> concurrent.futures.ThreadPoolExecutor:
    """The single-thread pool for ``kind`` (e.g. ``"sweep"``), started on first use. Kinds
    are apart so that work of one kind may wait for another's without deadlock."""
    pool = _POOLS.get(kind)
    if pool is None:
        pool = _POOLS[kind] = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                                   thread_name_prefix=f"tlgui-{kind}")
    return pool


def _forget() -> None:
    # A forked child has the pool objects but not their threads: work submitted there would
    # wait forever.
    _POOLS.clear()


if hasattr(os, "register_at_fork"):  # POSIX only; elsewhere there is no fork
    os.register_at_fork(after_in_child=_forget)
