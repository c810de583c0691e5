"""The data model behind the window: plain Python objects that know nothing of Qt.

The window observes them (napari-style): a model method changes its state and then calls its
observers with an event name; widgets subscribe and redraw.  Keeping the snapshot history
here, and not in widgets, lets the slider replay any computed state exactly and lets tests
drive the model without a window.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.model import LineSet, Preparation, Segmentation, Snapshot

Observer = Callable[..., None]


class Observable:
    """Minimal observer pattern: ``subscribe(event, fn)`` then ``_notify(event, *args)``."""

    def __init__(self) -> None:
        self._observers: dict[str, list[Observer]] = {}

    def subscribe(self, event: str, fn: Observer) -> None:
        self._observers.setdefault(event, []).append(fn)

    def _notify(self, event: str, *args: Any) -> None:
        for fn in list(self._observers.get(event, ())):
            fn(*args)


@dataclass(frozen=True)
class Metrics:
    """Ground-truth comparison of the final labels (from :func:`engine.metric.contest_metric`)."""

    score: Any                      # the engine's score object (n, m, o2o, dr, ra, fm, ...)
    matched_result: np.ndarray      # bool (M,): result line k+1 matched one-to-one
    gt_path: str


class Session(Observable):
    """One page and everything computed on it.

    Events: ``page`` (a page was opened), ``prepared``, ``snapshot`` (one appended),
    ``current`` (the displayed snapshot changed), ``finished``, ``cleared`` (history dropped),
    ``stage`` (text), ``metrics``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.path: str | None = None
        #: The page being opened (loaded off the GUI thread), None when none is.
        self.loading: str | None = None
        self.prep: Preparation | None = None
        self.snapshots: list[Snapshot] = []
        self.segmentation: Segmentation | None = None
        self.label_overlay: list[np.ndarray] | None = None  # RGBA pyramid of the final labels
        self.metrics: Metrics | None = None
        self.current: int = -1
        self.stage: str = "idle"
        # Parameters the preparation was built with and that the EM run used.
        self.run_params: Any = None

    # --- page and preparation -------------------------------------------------------------
    def open(self, path: str) -> None:
        self.path = path
        self.prep = None
        self._drop_history()
        self._notify("page", path)

    def set_prepared(self, prep: Preparation, keep_result: bool = False) -> None:
        """The page's preparation; the run is forgotten unless ``keep_result`` (a saved or
        background result shown before the page was prepared to be edited)."""
        self.prep = prep
        if not keep_result:
            self._drop_history()
        self._notify("prepared", prep)

    def set_stage(self, stage: str) -> None:
        self.stage = stage
        self._notify("stage", stage)

    # --- snapshots ------------------------------------------------------------------------
    def add_snapshot(self, snap: Snapshot, follow: bool = True) -> None:
        """Append ``snap``; move the displayed state to it when ``follow`` (slider at the end)."""
        self.snapshots.append(snap)
        self._notify("snapshot", len(self.snapshots) - 1)
        if follow:
            self.set_current(len(self.snapshots) - 1)

    def set_current(self, index: int) -> None:
        index = int(np.clip(index, -1, len(self.snapshots) - 1))
        if index != self.current:
            self.current = index
            self._notify("current", index)

    def current_snapshot(self) -> Snapshot | None:
        return self.snapshots[self.current] if 0 <= self.current < len(self.snapshots) else None

    def at_end(self) -> bool:
        return self.current == len(self.snapshots) - 1

    def set_finished(self, seg: Segmentation, label_overlay: list[np.ndarray]) -> None:
        self.segmentation = seg
        self.label_overlay = label_overlay
        self.metrics = None
        self._notify("finished", seg)

    def set_metrics(self, metrics: Metrics | None) -> None:
        self.metrics = metrics
        self._notify("metrics", metrics)

    def clear_run(self) -> None:
        """Forget the EM run (snapshots, result), keep the preparation."""
        self._drop_history()

    def _drop_history(self) -> None:
        self.snapshots = []
        self.segmentation = None
        self.label_overlay = None
        self.metrics = None
        self.current = -1
        self._notify("cleared")

    # --- series for the plots ------------------------------------------------------------
    def series(self) -> dict[str, np.ndarray]:
        """Per-snapshot x position and the plotted quantities, one entry per snapshot."""
        snaps = self.snapshots
        return {
            "x": np.array([snapshot_x(s) for s in snaps], dtype=float),
            "kl": np.array([s.kl for s in snaps], dtype=float),
            "lines": np.array([len(s.lines) for s in snaps], dtype=float),
            "theta": np.array([s.theta for s in snaps], dtype=float).reshape(-1, 3),
            "loglik": np.array([s.log_likelihood for s in snaps], dtype=float),
        }


def snapshot_x(snap: Snapshot) -> float:
    """Where a snapshot sits on the iteration axis: sweeps fall between their iterations."""
    if snap.sweep is None:
        return float(snap.iteration)
    # A sweep belongs to the iteration in progress; place it in (iteration-1, iteration).
    return snap.iteration - 1 + min(0.95, 0.05 * (snap.sweep + 1))


class EditModel(Observable):
    """The shown page's initial lines, each the engine's ``LineSet`` row.

    ``prepared`` are the preparation's lines, ``lines`` the current ones: every change goes
    through :meth:`set_lines` (what the undo commands call), which gives back the prepared row
    of every line that is where the preparation had it (:func:`tlgui.steering.settle`), so
    ``edited`` is computed from the lines, not from having touched them.  Every change is
    written to an autosave file at once (with the edits that made it, ``records``), so a
    crashed engine, a re-run or a new preparation never loses them.  Event: ``changed``.
    """

    def __init__(self, autosave_dir: Path | None = None) -> None:
        super().__init__()
        self.prep: Preparation | None = None
        self.prepared: LineSet | None = None
        self.lines = LineSet.empty()
        self.edited = False
        self.page_path: str | None = None
        self.autosave_dir = autosave_dir
        #: The edits applied since the preparation (what the undo stack holds up to its index).
        self.records: list[dict[str, Any]] = []
        self._segments: np.ndarray | None = None

    @property
    def segments(self) -> np.ndarray:
        """The lines as page segments ``(L, 2, 2)`` (their ``c +- 2 sigma_s`` extent)."""
        if self._segments is None:
            self._segments = self.lines.segments().reshape(-1, 2, 2) if len(self.lines) else np.zeros((0, 2, 2))
        return self._segments

    def clear(self, page_path: str | None) -> None:
        """A page is opened: no lines until it is prepared."""
        self.prep, self.prepared, self.page_path, self.records = None, None, page_path, []
        self._set(LineSet.empty())

    def set_prepared(self, prep: Preparation, lines: LineSet | None = None) -> None:
        """The page's preparation: its lines, or ``lines`` (the user's, fitted to it)."""
        from .steering import fit_to, settle

        self.prep, self.prepared = prep, prep.initial_lines
        self._set(prep.initial_lines if lines is None else settle(self.prepared, fit_to(prep, lines)))

    def set_lines(self, lines: LineSet) -> None:
        """Replace the lines (an edit, an undo or a redo), then autosave."""
        from .steering import settle

        self._set(settle(self.prepared, lines))
        self.autosave()

    def _set(self, lines: LineSet) -> None:
        from engine.edits import lines_equal

        self.lines = lines
        self._segments = None
        self.edited = self.prepared is not None and not lines_equal(lines, self.prepared)
        self._notify("changed")

    # --- files -----------------------------------------------------------------------------
    def to_json(self) -> str:
        from .steering import edits_json

        shape = None if self.prep is None else self.prep.shape
        return edits_json(self.page_path, self.lines, self.edited, self.records, shape)

    def autosave_path(self, page_path: str | None = None) -> Path | None:
        page_path = page_path or self.page_path
        if self.autosave_dir is None or not page_path:
            return None
        key = hashlib.sha1(os.path.abspath(page_path).encode()).hexdigest()[:16]
        return self.autosave_dir / f"{Path(page_path).stem}-{key}.json"

    def autosave(self) -> None:
        path = self.autosave_path()
        if path is None or self.prepared is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        os.replace(tmp, path)  # atomic: a crash mid-write leaves the previous autosave

    def saved_edits(self, page_path: str) -> str | None:
        """The autosave file of ``page_path`` when it holds edited lines, else None."""
        path = self.autosave_path(page_path)
        if path is None or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return str(path) if isinstance(data, dict) and data.get("edited", True) else None


def line_count(lines: LineSet) -> str:
    """How many lines ``lines`` holds, as the window says it: "12 lines", or "3 lines in 30
    pieces" when a locked file's text lines are cut into straight pieces (``LineSet.chain``:
    a text line per chain, and one per line of no chain, a piece of its own)."""
    text = lines.text_line_count()
    out = f"{text} line" + ("" if text == 1 else "s")
    # The joined result keeps each line's chain: pieces only where a chain has several rows.
    return out + f" in {len(lines)} pieces" if text < len(lines) else out


def lines_table(lines: LineSet) -> np.ndarray:
    """The numbers shown per line: id, region, a, b, c, sigma_t, sigma_s, prior ``(L, 8)``."""
    return np.column_stack([np.arange(len(lines)), lines.region, lines.a, lines.b, lines.c,
                            lines.sigma_t, lines.sigma_s, lines.prior]) if len(lines) else \
        np.zeros((0, 8))
