"""The engine jobs of the window: which one runs, what its messages do, and "Run all".

:class:`JobController` owns the job state machine.  At most one job of the user's (``job``:
the shown page's preparation or EM run) and one background page of "Run all" (``bg_job``) are
known at a time; jobs run one after the other in the engine process (:mod:`tlgui.engine_process`,
relayed by :class:`~tlgui.worker.EngineWorker` on its own thread).  A message of a job that is no
longer the active one is dropped, so a late message of a cancelled job never reaches the page.
The controller knows nothing of widgets: it changes the session and the document and says what
happened through signals, which the window connects to the canvas, the banner and the status.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from engine.params import Parameters

from .document import DONE, FAILED, NOT_RUN, RUNNING, Document
from .messages import Done, Failed, Finished, Outputs, Prepared, RunRegions, SnapshotReady, Stage
from .session import Session
from .tasks import HandlerTimes
from .worker import (
    PAUSE,
    RUN,
    RUN_QUIET,
    STEP_EM,
    STEP_SWEEP,
    EngineProcess,
    EngineWorker,
    Job,
    RunControl,
    WorkerThread,
)

__all__ = ["PAUSE", "RUN", "RUN_QUIET", "STEP_EM", "STEP_SWEEP", "JobController"]


class JobController(QObject):
    """Starts, steers and ends the engine jobs of the shown page and of "Run all".

    ``params`` returns the parameters to run with and whether they need a new preparation;
    ``run_inputs(path, shown)`` what a run of a page starts from: the user's lines (the shown
    page's edited rows, else None), a file of lines (a background page's autosaved edits,
    else None) and what the page's outputs record of the edits."""

    runJob = Signal(object)            # -> EngineWorker.run (queued)
    stageText = Signal(str)            # the shown page's job is at this stage
    prepared = Signal(object, object)  # Preparation, PrepGeometry of the shown page
    runStarted = Signal()              # an EM run of the shown page starts: its old result goes
    runRegions = Signal(object, object)  # edges, geometry of the regions the run's EM works on
    finished = Signal(object, object)  # Segmentation, label overlay of the shown page
    failed = Signal(str)               # the shown page's job failed
    backgroundResult = Signal(int, object, object)  # the shown page finished in the background
    reopenPage = Signal(int)           # ... but must be reopened from its outputs
    pageWritten = Signal(int)          # a background page's outputs were written
    jobEnded = Signal()                # the shown page's job ended (whatever its status)
    pageTime = Signal(float)           # seconds the shown page took (preparation and run)
    warning = Signal(str)              # the user asked for what cannot be done now
    runAllFinished = Signal()          # "Run all" ran every page it had to
    editingAllowed = Signal(bool)      # the initial lines may be edited (no job uses them)
    stateChanged = Signal()            # buttons to update
    statusMessage = Signal(str, int)   # text, ms (0: until the next)
    idle = Signal()                    # no job is left running

    def __init__(self, session: Session, document: Document, times: HandlerTimes,
                 params: Callable[[], tuple[Parameters, bool]],
                 run_inputs: Callable[[str, bool], tuple[Any, str | None, dict[str, Any]]],
                 outdir_of: Callable[[], Path | None]) -> None:
        super().__init__()
        self.session = session
        self.document = document
        self.times = times
        self._params = params
        self._run_inputs = run_inputs
        self._outdir = outdir_of
        self.job: Job | None = None
        self._counter = 0
        self.in_flight = 0  # jobs handed to the worker whose Done has not come back
        self.em_after_prep: str | None = None  # Run pressed while the page was being prepared
        self.started = 0.0
        self._failure = ""  # the engine's last failure message (for the page list)
        self.prep_seconds = 0.0  # wall time of the shown page's preparation
        self.page_seconds = 0.0  # wall time of its preparation and last run
        #: Pages "Run all" has still to run (document indices), None when it is not running.
        self.run_queue: list[int] | None = None
        #: The page "Run all" runs in the background, its start, result and failure.
        self.bg_job: Job | None = None
        self._bg_started = 0.0
        self._bg_result: tuple[Any, Any] | None = None
        self._bg_failure = ""
        self.closed = False
        #: Asks the user a yes/no question (the window's dialog; tests answer it themselves).
        self.confirm: Callable[[str], bool] = lambda _question: True
        self.engine_process = EngineProcess()
        self.engine = WorkerThread(EngineWorker(self.engine_process), "tlgui-engine")
        self.runJob.connect(self.engine.worker.run)
        self.engine.worker.message.connect(self._on_message)
        self.engine.worker.done.connect(self._on_done)

    # ================================================================ state
    def busy(self) -> bool:
        return self.job is not None or self.in_flight > 0

    def running_em(self) -> bool:
        return self.job is not None and self.job.em

    def mode(self) -> str | None:
        """The shown page's EM run's mode (None when it has none)."""
        return self.job.control.mode if self.running_em() else None

    def can_stop(self) -> bool:
        return self.job is not None or self.run_queue is not None or self.bg_job is not None

    def elapsed(self) -> float | None:
        return None if self.job is None else time.perf_counter() - self.started

    def current_index(self) -> int:
        """The document index of the page shown or being opened (-1 when not the document's)."""
        return self.document.index_of(self.session.loading or self.session.path)

    def _new_job(self, path: str, params: Parameters, mode: str, **kwargs: Any) -> Job:
        self._counter += 1
        control = RunControl()
        control.set_mode(mode)
        return Job(self._counter, path, params, control, **kwargs)

    def _outputs(self, index: int, params: Parameters, record: dict[str, Any]) -> Outputs | None:
        """Where a document page's run writes its outputs: its preset's results folder (the
        window's cache: compact).  None for a page outside the document."""
        folder = self.document.results_folder(params.preset_name)
        if index < 0 or folder is None:
            return None
        page = self.document.pages[index]
        return Outputs(str(folder), page.stem, {"source": page.path, "parameters": params.to_dict(), **record},
                       compact=self.document.cache)

    def _may_replace(self, index: int, params: Parameters) -> bool:
        """Whether a run of page ``index`` with ``params`` may replace its saved result: yes
        when there is none under this preset or it was made with the same parameters, else
        the user says."""
        if index < 0 or params.preset_name != self.document.preset:
            return True
        page = self.document.pages[index]
        mine = params.preset_summary()
        if not page.saved or page.preset in (None, mine):
            return True
        return self.confirm(f"{page.name} has a saved result made with {page.preset}. Replace it with the "
                            f"result of this run ({mine})?\n\nNo: run without saving it (the saved result "
                            "stays; change the preset to keep both).")

    # ================================================================ the shown page's jobs
    def start(self, em: bool, mode: str) -> None:
        """Prepare the shown page (unless prepared with these parameters), and with ``em`` run
        EM from its initial lines (the user's when edited) and label it."""
        path = self.session.path
        if path is None:
            self.warning.emit("Open a page first (File ▸ Open, drop a file, or a command-line argument).")
            return
        params, needs_preparation = self._params()
        prep = self.session.prep
        if prep is not None and needs_preparation:
            prep = None  # a stage 1-6 parameter changed: prepare again
        index = self.document.index_of(path)
        lines, lines_file, record = self._run_inputs(path, True) if em else (None, None, {})
        # A document's page: the engine writes its outputs, to be shown without a re-run.
        outputs = self._outputs(index, params, record) if em and self._may_replace(index, params) else None
        self.job = self._new_job(path, params, mode, prep=prep, lines=lines, lines_file=lines_file, em=em,
                                 outputs=outputs)
        if self.bg_job is not None:
            self.stageText.emit(f"waiting for the engine (running {Path(self.bg_job.path).name} in the background)")
        if em:
            self.session.clear_run()
            self.session.run_params = params
            self.document.update(index, state=RUNNING, error="", fm=None)
            self.runStarted.emit()
        self.editingAllowed.emit(False)
        self.started = time.perf_counter()
        self._failure = ""
        self.stateChanged.emit()
        self.in_flight += 1
        self.runJob.emit(self.job)

    def prepare(self) -> None:
        """Prepare the shown page if nothing does (a page shown from its saved result, whose
        initial lines the user wants to see or edit)."""
        if self.job is None and self.session.loading is None and self.session.path is not None \
                and self.session.prep is None:
            self.start(em=False, mode=PAUSE)

    def start_em(self, mode: str) -> None:
        if self.job is not None and self.job.em:
            self.job.control.set_mode(mode)
        elif self.session.loading is not None or self.job is not None:
            # The page is being loaded or prepared: run as soon as it is prepared.
            self.em_after_prep = mode
        else:
            self.start(em=True, mode=mode)
        self.stateChanged.emit()

    def after_page_shown(self, saved_result: bool) -> None:
        """A page was opened: prepare it (so that its initial lines can be seen and edited
        before a run), or, when its saved result is shown, start a run asked for meanwhile."""
        if not saved_result:
            self.start(em=False, mode=PAUSE)
            return
        pending, self.em_after_prep = self.em_after_prep, None
        if pending is not None:
            self.start(em=True, mode=pending)

    def pause(self) -> None:
        if self.running_em():
            self.job.control.set_mode(PAUSE)
        self.stateChanged.emit()

    def cancel(self) -> None:
        """Cancel the shown page's job (a page running for "Run all" goes back to its state)."""
        self.em_after_prep = None
        if self.job is not None:
            if self.job.em:
                self._revert_running(self.job.path)
            self.job.control.cancel()
            self.job = None
            self.stateChanged.emit()

    def stop(self) -> bool:
        """Cancel the run and "Run all"; True when a job of the shown page was stopped."""
        self.stop_run_all()
        if self.job is None:
            return False
        self.cancel()
        return True

    def leave_running_page(self) -> None:
        """The user leaves a page that runs while "Run all" is on: a document page running
        (not paused or stepping) runs on as the background page; another is cancelled and
        queued again."""
        if self.job is None or not self.job.em or self.run_queue is None:
            return
        index = self.document.index_of(self.job.path)
        if self.bg_job is None and self.job.outputs is not None and self.job.control.mode == RUN:
            self.bg_job, self._bg_started = self.job, self.started
            self._bg_result, self._bg_failure = None, ""
            self.job.control.set_mode(RUN_QUIET)  # no more snapshots: only its result fills its row
            self.job = None
        elif index >= 0 and index not in self.run_queue:
            self.run_queue.insert(0, index)

    # ================================================================ engine messages
    def _active(self, job_id: int) -> bool:
        return self.job is not None and self.job.id == job_id

    def _is_bg(self, job_id: int) -> bool:
        return self.bg_job is not None and self.bg_job.id == job_id

    @Slot(object)
    def _on_message(self, msg: Stage | Prepared | RunRegions | SnapshotReady | Finished | Failed) -> None:
        if isinstance(msg, Finished) and self._is_bg(msg.job_id):
            self._bg_result = (msg.seg, msg.overlay)
        elif isinstance(msg, Failed) and self._is_bg(msg.job_id):
            self._bg_failure = msg.message
        if not self._active(msg.job_id):
            return
        if isinstance(msg, Stage):
            self.stageText.emit(msg.text)
        elif isinstance(msg, Prepared):
            self.job.prep = msg.prep
            with self.times.timed("prepared"):
                self.prepared.emit(msg.prep, msg.geometry)
        elif isinstance(msg, RunRegions):
            self.runRegions.emit(msg.edges, msg.geometry)
        elif isinstance(msg, SnapshotReady):
            follow = self.session.current < 0 or self.session.at_end()
            self.session.add_snapshot(msg.snap, follow=follow)
            self.stateChanged.emit()  # a step may have ended in the worker (it pauses itself)
        elif isinstance(msg, Finished):
            with self.times.timed("finished"):
                self.session.set_finished(msg.seg, msg.overlay)
                self.finished.emit(msg.seg, msg.overlay)
        elif isinstance(msg, Failed):
            self._failure = msg.message
            self.failed.emit(msg.message)

    @Slot(object)
    def _on_done(self, done: Done) -> None:
        self.in_flight -= 1
        if self._is_bg(done.job_id):
            self._bg_done(done.status)
        if not self._active(done.job_id):
            self.run_all_next()
            if not self.busy():
                self.editingAllowed.emit(True)
                self.idle.emit()
            return
        if done.status == "cancelled":
            self.stageText.emit("stopped")
        elif done.status == "failed":
            self.stageText.emit("failed")
        was_prep_only = not self.job.em
        wrote = self.job.outputs is not None
        run_preset = self.job.params.preset_summary()
        seconds = time.perf_counter() - self.started
        self.job = None
        self.editingAllowed.emit(True)
        self.stateChanged.emit()
        self.jobEnded.emit()
        pending, self.em_after_prep = self.em_after_prep, None
        if was_prep_only and done.status == "finished":
            self.prep_seconds = seconds
            if pending is not None:
                self.start(em=True, mode=pending)
                return
        if done.status == "failed":
            self.page_ended(self.session.path, FAILED, self._failure or "the engine failed")
        elif not was_prep_only:
            self.page_seconds = self.prep_seconds + seconds
            self.pageTime.emit(self.page_seconds)
            self.page_ended(self.session.path, DONE if done.status == "finished" else NOT_RUN, saved=wrote,
                            preset=run_preset)
        self.run_all_next()
        self.idle.emit()

    # ================================================================ the document's rows
    def page_ended(self, path: str | None, state: str, error: str = "", saved: bool = False,
                   preset: str | None = None) -> None:
        """The shown page's run ended (``state`` done, failed, or not run when cancelled):
        update the document (``saved``: the engine wrote the outputs, made with ``preset``)."""
        index = self.document.index_of(path)
        if index >= 0:
            if state == DONE and self.session.segmentation is not None:
                page = self.document.pages[index]
                self.document.update(index, state=DONE, lines=len(self.session.segmentation.lines),
                                     seconds=self.page_seconds, error="", saved=saved or page.saved,
                                     preset=preset if saved or preset is None else f"{preset} (not saved)")
            elif state == FAILED:
                self.document.update(index, state=FAILED, error=error, lines=None, fm=None)
            else:
                self._revert_running(path)
        if self.run_queue is not None:
            self._show_run_all_progress()

    def _revert_running(self, path: str | None) -> None:
        """A page whose run was cancelled is what it was before (done if it has outputs)."""
        index = self.document.index_of(path)
        if index >= 0 and self.document.pages[index].state == RUNNING:
            self.document.update(index, state=DONE if self.document.pages[index].saved else NOT_RUN)

    # ================================================================ Run all
    def run_all(self) -> None:
        """Run every page not done yet, in the background, one at a time in the engine process,
        while the user looks at and edits any page.  The shown page, once prepared and idle,
        runs as a page the user runs (its snapshots drawn); every other page runs quietly
        (:attr:`Job.quiet`) and writes its outputs.  A page the user's own job waits for is
        run before the next background page.  A failed page is marked and the rest go on;
        Stop ends it."""
        self.run_queue = [i for i, p in enumerate(self.document.pages) if p.state not in (DONE, RUNNING)]
        if not self.run_queue:
            self.statusMessage.emit("Every page is done.", 5000)
        self.run_all_next()

    def run_all_next(self) -> None:
        """Start the next page of "Run all" when the engine is free (no job of the user's
        waiting or running, no background page running)."""
        if self.run_queue is None or self.closed:
            return
        if self.bg_job is not None or self.in_flight > 0 or self.session.loading is not None:
            return  # called again when that job is done / the page is shown
        self.run_queue = [i for i in self.run_queue if self.document.pages[i].state not in (DONE, RUNNING)]
        if not self.run_queue:
            self.run_queue = None
            self.stateChanged.emit()
            self.runAllFinished.emit()
            return
        index = self.run_queue.pop(0)
        params, needs_preparation = self._params()
        if index == self.current_index() and self.session.prep is not None and not needs_preparation:
            self.start_em(RUN)  # the shown, prepared page runs as it is, drawn as it goes
            self._show_run_all_progress()
            return
        page = self.document.pages[index]
        lines, lines_file, record = self._run_inputs(page.path, False)
        self.bg_job = self._new_job(page.path, params, RUN, lines=lines, lines_file=lines_file, em=True,
                                    outputs=self._outputs(index, params, record), quiet=True)
        self._bg_started = time.perf_counter()
        self._bg_result, self._bg_failure = None, ""
        self.document.update(index, state=RUNNING, error="", fm=None)
        self.in_flight += 1
        self.runJob.emit(self.bg_job)
        self.stateChanged.emit()
        self._show_run_all_progress()

    def _show_run_all_progress(self) -> None:
        """The status bar: which pages run and how many are done (kept until the next change)."""
        pages = self.document.pages
        running = ", ".join(p.name for p in pages if p.state == RUNNING)
        done = sum(p.state == DONE for p in pages)
        self.statusMessage.emit(f"Run all: {done} of {len(pages)} pages done"
                                + (f"; running {running}" if running else ""), 0)

    def stop_run_all(self) -> None:
        if self.run_queue is not None or self.bg_job is not None:
            self.run_queue = None
            if self.bg_job is not None:
                self.bg_job.control.cancel()
            self.statusMessage.emit("Run all: stopped.", 8000)
            self.stateChanged.emit()

    def _bg_done(self, status: str) -> None:
        """The background page's job ended: its row, and its result drawn if it is shown."""
        job, result = self.bg_job, self._bg_result
        self.bg_job, self._bg_result = None, None
        index = self.document.index_of(job.path)
        if status == "finished" and result is not None and index >= 0:
            seg, rgba = result
            self.document.update(index, state=DONE, lines=len(seg.lines), error="", saved=True,
                                 seconds=time.perf_counter() - self._bg_started,
                                 preset=job.params.preset_summary())
            self.pageWritten.emit(index)
            if index == self.current_index() and not self.running_em():
                self._show_background_result(index, seg, rgba)
        elif status == "failed" and index >= 0:
            self.document.update(index, state=FAILED, error=self._bg_failure or "the engine failed",
                                 lines=None, fm=None)
        else:
            self._revert_running(job.path)
        if self.run_queue is not None:
            self._show_run_all_progress()

    def _show_background_result(self, index: int, seg: Any, rgba: Any) -> None:
        """The shown page finished in the background: draw it (reopened from its outputs if
        the user's preparation of it is still to come, which would clear it)."""
        if self.job is not None or self.session.loading is not None or self.session.path is None:
            self.reopenPage.emit(index)
            return
        with self.times.timed("background result"):
            self.session.set_finished(seg, rgba)
            self.backgroundResult.emit(index, seg, rgba)

    # ================================================================ closing
    def shutdown(self) -> None:
        """Cancel, stop the reader thread and end the engine process."""
        self.closed = True
        self.cancel()
        # Nothing from the worker may reach the window once it is being torn down.
        self.engine.worker.message.disconnect()
        self.engine.worker.done.disconnect()
        self.engine.stop()
        self.engine_process.close()
