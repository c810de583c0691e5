"""The initial lines a run starts from, as the window keeps them: the engine's ``LineSet`` rows
(no Qt; used in the window's process and in the engine process).

The window's edits go through :mod:`engine.edits`, which changes only the rows an edit touches;
:func:`settle` then gives back every row that is where the preparation had it (so an edit and
its inverse, or an undo, leave exactly the prepared lines and EM gives exactly the unedited
labels).  Lines kept for one preparation are moved onto another one by :func:`fit_to` (a new
preparation after a stage 1-6 parameter changed) and files of lines are read by
:func:`read_lines_file` (the autosave, a saved edits file, a ``tlseg`` JSON, PAGE / ALTO XML,
label maps).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from engine import edits as engine_edits
from engine.initial_io import InitialLinesError, lines_from_page_segments, read_initial_lines
from engine.model import LineSet, Preparation

__all__ = ["InitialLinesError", "edits_json", "fit_to", "is_edited", "read_lines_file", "settle", "start_lines"]


def settle(prepared: LineSet | None, lines: LineSet) -> LineSet:
    """``lines`` with every row that matches a prepared row (segment within 0.01 px, same
    lock) replaced by that row bit for bit; ``prepared`` itself when nothing differs."""
    return lines if prepared is None else engine_edits.restore_unchanged(prepared, lines)


def is_edited(prepared: LineSet | None, lines: LineSet) -> bool:
    """Whether ``lines`` (settled) differ from the prepared lines: what the window calls edited."""
    return prepared is not None and not engine_edits.lines_equal(settle(prepared, lines), prepared)


def same_frames(prep: Preparation, lines: LineSet) -> bool:
    """Whether every row's region exists in ``prep`` with the same frame (so the rows hold)."""
    rot_inv = prep.params.regression == "rotation_invariant"
    return lines.rotation_invariant == rot_inv and all(
        0 <= int(r) < len(prep.regions) and lines.phi[k] == prep.regions[int(r)].phi
        for k, r in enumerate(lines.region))


def fit_to(prep: Preparation, lines: LineSet) -> LineSet:
    """``lines`` on the page of ``prep``: as they are when its regions are theirs, else each
    row's segment placed on this preparation (sigma_t, lock, anchor and chain kept)."""
    if len(lines) == 0 or same_frames(prep, lines):
        return lines
    return lines_from_page_segments(prep, lines.segments(), lines.sigma_t, lines.locked, lines.anchored,
                                    lines.chain, lines.sigma_t_measured)


def read_lines_file(path: str | Path, prep: Preparation, lock: bool = False) -> LineSet:
    """Initial lines from a file, on the page of ``prep``: every format of
    :func:`engine.initial_io.read_initial_lines`, and the window's older edits files (page
    segments only).  Raises :class:`InitialLinesError` naming the file."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            data = None  # read_initial_lines says what is wrong with it
        if isinstance(data, dict) and "segments" in data and "initial_lines" not in data:
            try:
                segments = np.asarray(data["segments"], dtype=float).reshape(-1, 2, 2)
            except (TypeError, ValueError) as exc:
                raise InitialLinesError(f"cannot read initial lines from '{p}': {exc}") from None
            if not np.isfinite(segments).all():
                raise InitialLinesError(f"cannot read initial lines from '{p}': non-finite coordinates")
            lines = lines_from_page_segments(prep, segments, np.full(len(segments), np.nan),
                                             np.full(len(segments), lock))
            return engine_edits.ordered(prep, lines)
    return read_initial_lines(p, prep, lock=lock)


def start_lines(prep: Preparation, lines: LineSet | None, lines_file: str | None) -> LineSet:
    """The lines EM starts from: the window's rows (fitted to ``prep``), else those of
    ``lines_file`` (a background page's autosaved edits), else the prepared ones; settled, so
    that lines equal to the prepared ones are the prepared rows themselves."""
    if lines is not None:
        return settle(prep.initial_lines, fit_to(prep, lines))
    if lines_file is not None:
        return settle(prep.initial_lines, read_lines_file(lines_file, prep))
    return prep.initial_lines


def edits_json(page: str | None, lines: LineSet, edited: bool, records: list[dict[str, Any]],
               shape: tuple[int, int] | None) -> str:
    """The window's edits file (and autosave): the initial lines as ``tlseg`` JSON records
    them (``initial_lines``, read back by :func:`read_lines_file`), the page, its shape, and
    the edits that made them."""
    data = {"page": page, "edited": edited, "initial_lines": lines.to_dict(), "edits": records}
    if shape is not None:
        data["shape"] = [int(shape[0]), int(shape[1])]
    return json.dumps(data, indent=1)
