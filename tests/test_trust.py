"""Trustworthy batches (issue 25), one section per numbered item of the issue:

1. resume checks what it skips (page, parameters, source, whole files) and clears a killed
   run's temporary files;
2. ``tlseg evaluate`` refuses what it cannot score;
3. no worker outlives the batch, whatever the signal or the inherited dispositions;
4. a memory budget: pages estimated over it are refused before loading, and the pages run at
   once fit it together;
5. a page time limit, and parameter combinations that cannot finish refused;
6. one-line errors (dask address, non-UTF-8 names, full disk naming the output);
7. every page format in folders, collision-free output names;
8. warnings for results on what may not be a page of text.

The engine is :func:`test_batch.fake_segment` (fast, deterministic) except where the subject
is the engine's own output (section 8).
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_batch import fake_segment, no_temp_files, outputs, read_report, write_page
from test_robustness import png_header_only

from engine import batch, export
from engine.batch import check_outputs, run_batch, unique_stems
from engine.cli import main
from engine.params import MAX_TOTAL_SWEEPS, ParameterError, Parameters

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch the CLI starts uses the double instead of the pipeline."""
    monkeypatch.setattr(batch, "run_batch", functools.partial(batch.run_batch, segment_fn=fake_segment))


def tlseg(capsys: pytest.CaptureFixture, *argv: str | Path) -> tuple[int, str, str]:
    """``tlseg ARGV`` in this process -> (exit code, stdout, stderr); never a traceback."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("tlseg: error:")]


def slow_segment(page, params, progress=None):
    """fake_segment, but a page named ``hang`` sleeps a minute (a runaway page) and every page
    notes its start and end in ``$TLSEG_TEST_LOG`` (which pages ran at the same time)."""
    log = os.environ.get("TLSEG_TEST_LOG")
    name = Path(page.path).name
    if log:
        with open(log, "a") as fh:
            fh.write(f"start {name} {time.monotonic()}\n")
    if "hang" in name:
        time.sleep(60)
    if "slow" in name:
        time.sleep(0.5)
    result = fake_segment(page, params, progress)
    if log:
        with open(log, "a") as fh:
            fh.write(f"end {name} {time.monotonic()}\n")
    return result


# --- 1. resume by content ---------------------------------------------------------------------------


def test_resume_redoes_pages_after_a_parameter_change(capsys, tmp_path, fake_engine) -> None:
    """Rerun with other parameters (issue: '--preset paper --set sample_ratio=0.5' skipped
    every page): every page is redone, with the reason, and its JSON has the new parameters."""
    pages = [write_page(tmp_path / "in" / f"p{i}.png") for i in range(2)]
    out = tmp_path / "out"
    assert tlseg(capsys, "segment", tmp_path / "in", "-o", out, "-j", "1")[0] == 0
    code, _, err = tlseg(capsys, "segment", tmp_path / "in", "-o", out, "-j", "1")
    assert code == 0 and "0 ok, 2 skipped" in err
    code, _, err = tlseg(capsys, "segment", tmp_path / "in", "-o", out, "-j", "1", "--set", "sample_ratio=0.5")
    assert code == 0, err
    assert "2 to redo (2 parameters)" in err and "2 ok, 0 skipped" in err and "2 redone" in err
    assert "redo p0.png: parameters changed (sample_ratio)" in err
    code, _, err = tlseg(capsys, "segment", tmp_path / "in", "-o", out, "-j", "1", "--preset", "paper",
                         "--set", "sample_ratio=0.5")
    assert code == 0 and "2 redone (2 parameters)" in err, err
    assert "redo p1.png: parameters changed (preset default -> paper; " in err
    for page in pages:
        meta = json.loads((out / f"{page.stem}.json").read_text())
        assert meta["parameters"]["sample_ratio"] == 0.5 and meta["preset"] == "paper"
    assert [r["redone"] for r in read_report(out / "tlseg-report.jsonl")][0].startswith("parameters changed")
    code, _, err = tlseg(capsys, "segment", tmp_path / "in", "-o", out, "-j", "1", "--preset", "paper",
                         "--set", "sample_ratio=0.5")
    assert code == 0 and "0 ok, 2 skipped" in err


@pytest.mark.parametrize("damage", ["truncated_dat", "empty_labels", "garbage_page_xml", "garbage_json",
                                    "json_without_record", "missing_alto", "overlay_of_another_size",
                                    "labels_end_overwritten"])
def test_damaged_outputs_are_redone(tmp_path, damage) -> None:
    """An output that does not read back whole (issue: a truncated .dat, an empty labels.png,
    a garbage page.xml counted as done) makes its page run again; the others are skipped."""
    pages = [write_page(tmp_path / f"p{i}.png", n_lines=2 + i) for i in range(2)]
    out = tmp_path / "out"
    run_batch(pages, out, Parameters(), jobs=1, segment_fn=fake_segment)
    if damage == "truncated_dat":
        data = (out / "p0.dat").read_bytes()
        (out / "p0.dat").write_bytes(data[: len(data) // 2])
    elif damage == "empty_labels":
        (out / "p0.labels.png").write_bytes(b"")
    elif damage == "garbage_page_xml":  # same size: only its bytes tell
        size = (out / "p0.page.xml").stat().st_size
        (out / "p0.page.xml").write_bytes(b"x" * size)
    elif damage == "garbage_json":
        (out / "p0.json").write_text('{"lines": ')
    elif damage == "json_without_record":
        meta = json.loads((out / "p0.json").read_text())
        del meta["record"]
        (out / "p0.json").write_text(json.dumps(meta))
    elif damage == "missing_alto":
        (out / "p0.alto.xml").unlink()
    elif damage == "labels_end_overwritten":  # same size: only the PNG's end chunk tells
        data = bytearray((out / "p0.labels.png").read_bytes())
        data[-12:] = bytes(12)
        (out / "p0.labels.png").write_bytes(bytes(data))
    elif damage == "overlay_of_another_size":
        (out / "p1.overlay.png").replace(out / "p0.overlay.png")
        run_batch(pages[1:], out, Parameters(), jobs=1, segment_fn=fake_segment)
    check = check_outputs(out, "p0", pages[0], Parameters())
    assert not check.done and check.reason
    summary = run_batch(pages, out, Parameters(), jobs=1, segment_fn=fake_segment)
    assert (summary.ok, summary.skipped) == (1, 1), summary.results
    assert sum(summary.redone.values()) == 1
    assert check_outputs(out, "p0", pages[0], Parameters()).done
    assert json.loads((out / "p0.json").read_text())["n_lines"] == 2


def test_a_changed_source_is_redone_and_a_touched_copy_is_not(tmp_path) -> None:
    pages = [write_page(tmp_path / f"p{i}.png", n_lines=2) for i in range(2)]
    out = tmp_path / "out"
    run_batch(pages, out, Parameters(), jobs=1, segment_fn=fake_segment)
    write_page(pages[0], n_lines=5)  # another page under the same name
    data = pages[1].read_bytes()
    pages[1].unlink()
    pages[1].write_bytes(data)  # the same bytes, a new file (new mtime)
    os.utime(pages[1], (time.time() + 10, time.time() + 10))
    summary = run_batch(pages, out, Parameters(), jobs=1, segment_fn=fake_segment)
    assert (summary.ok, summary.skipped, summary.redone) == (1, 1, {"source": 1})
    assert json.loads((out / "p0.json").read_text())["n_lines"] == 5


def test_another_tool_version_redoes_the_pages(tmp_path, monkeypatch) -> None:
    page = write_page(tmp_path / "p.png")
    run_batch([page], tmp_path / "out", Parameters(), jobs=1, segment_fn=fake_segment)
    monkeypatch.setattr(export, "tool_version", lambda: "tlseg 99.0")
    summary = run_batch([page], tmp_path / "out", Parameters(), jobs=1, segment_fn=fake_segment)
    assert (summary.ok, summary.redone) == (1, {"tool": 1})


def test_stale_temp_files_of_dead_writers_are_removed(tmp_path) -> None:
    """Temporary files whose writer is gone are removed on the next run into the folder; a
    live writer's (this process) and a recent old-style one are left alone."""
    out = tmp_path / "out"
    out.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = out / f".p0.dat.{export._HOST_TAG}-{gone.pid}-0123abcd.tmp.dat"
    live = out / f".p1.dat.{export._HOST_TAG}-{os.getpid()}-0123abcd.tmp.dat"
    old = out / ".p2.labels.png.89abcdef.tmp.png"
    recent = out / ".p3.labels.png.fedcba98.tmp.png"
    for p in (stale, live, old, recent):
        p.write_bytes(b"\0" * 1000)
    os.utime(old, (time.time() - 2 * export.OLD_TEMP_AGE,) * 2)
    summary = run_batch([write_page(tmp_path / "p.png")], out, Parameters(), jobs=1, segment_fn=fake_segment)
    assert (summary.stale_files, summary.stale_bytes) == (2, 2000)
    assert not stale.exists() and not old.exists() and live.exists() and recent.exists()


_SLOW_WRITE_DRIVER = """
import sys, time
sys.path.insert(0, {tests!r})
import test_batch
from engine import cli, export
_png = export.write_png
def slow_png(*a, **k):
    _png(*a, **k)
    time.sleep(60)
export.write_png = slow_png
sys.exit(cli.main(sys.argv[1:] + ["-j", "1"]))
"""


def _run_tlseg_with_fake(argv: list[str], driver: str | None = None, **popen) -> subprocess.Popen:
    code = (driver or _DRIVER).format(tests=str(TESTS))
    return subprocess.Popen([sys.executable, "-c", code, *argv], cwd=ROOT, stderr=subprocess.PIPE,
                            text=True, **popen)


def test_kill_9_mid_write_then_rerun_removes_the_temporary_files(tmp_path) -> None:
    """kill -9 while a page's outputs are being written leaves its temporary files; the next
    run into the folder removes them, says so, and writes the page."""
    page = write_page(tmp_path / "p.png")
    out = tmp_path / "out"
    proc = _run_tlseg_with_fake(["segment", str(page), "-o", str(out)], _SLOW_WRITE_DRIVER)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.is_dir() and not no_temp_files(out)):
        time.sleep(0.05)
    proc.kill()
    proc.communicate(timeout=30)
    assert not no_temp_files(out), "no temporary file to clean up"
    code, err = _fake_cli(["segment", str(page), "-o", str(out), "-j", "1"])
    assert code == 0, err
    assert re.search(r"removed [1-9]\d* temporary file\(s\) \(.*\) left in .* by a killed run", err), err
    assert no_temp_files(out)
    assert all(p.is_file() for p in outputs(out, "p"))


# --- 2. evaluate refuses what it cannot score ------------------------------------------------------------

PAGE19 = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"


def _page_xml(lines: str, w: int = 160, h: int = 120) -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<PcGts xmlns="{PAGE19}"><Metadata/>'
            f'<Page imageFilename="p.png" imageWidth="{w}" imageHeight="{h}">'
            f'<TextRegion id="r1"><Coords points="0,0 159,0 159,119 0,119"/>{lines}</TextRegion></Page></PcGts>')


def _line(i: str, x0: int, y0: int, x1: int, y1: int) -> str:
    return f'<TextLine id="{i}"><Coords points="{x0},{y0} {x1},{y0} {x1},{y1} {x0},{y1}"/></TextLine>'


@pytest.fixture
def scored_folder(tmp_path: Path) -> Path:
    """A page of three bars (``pages/p.png``), its result (``pred/p.dat`` by the double) and
    a folder for ground truth."""
    write_page(tmp_path / "pages" / "p.png", n_lines=3)
    run_batch([tmp_path / "pages" / "p.png"], tmp_path / "pred", Parameters(), jobs=1, segment_fn=fake_segment)
    (tmp_path / "gt").mkdir()
    return tmp_path


@pytest.mark.parametrize("kind", ["no_lines", "all_outside", "alto_negative"])
def test_evaluate_refuses_ground_truth_without_a_line_on_the_page(capsys, scored_folder, kind) -> None:
    """GT with no line, or none inside the page: an error naming the file, exit 1, and never a
    score (the issue: N=0, M=0, 100.00 everywhere with a 42-line prediction)."""
    d = scored_folder
    if kind == "no_lines":
        (d / "gt" / "p.xml").write_text(_page_xml(""))
    elif kind == "all_outside":
        (d / "gt" / "p.xml").write_text(_page_xml(_line("a", 200, 10, 300, 20) + _line("b", 10, 130, 100, 140)))
    else:
        (d / "gt" / "p.xml").write_text(
            '<alto xmlns="http://www.loc.gov/standards/alto/ns-v4#"><Layout><Page WIDTH="160" HEIGHT="120">'
            '<PrintSpace><TextBlock><TextLine ID="a" HPOS="-900" VPOS="-50" WIDTH="100" HEIGHT="10"/>'
            '</TextBlock></PrintSpace></Page></Layout></alto>')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code, out, err = tlseg(capsys, "evaluate", "--gt", d / "gt", "--pred", d / "pred" / "p.dat",
                               "--images", d / "pages")
    assert code == 1
    assert "100.00" not in out and "TOTAL" not in out
    assert any("p.xml" in ln and "no line on the page" in ln for ln in err.splitlines()), err
    assert any("no page was scored" in ln for ln in error_lines(err))


def test_evaluate_with_nothing_paired_prints_no_total(capsys, scored_folder) -> None:
    d = scored_folder
    (d / "gt" / "other.xml").write_text(_page_xml(_line("a", 5, 5, 100, 20)))
    code, out, err = tlseg(capsys, "evaluate", "--gt", d / "gt", "--pred", d / "pred" / "p.dat")
    assert code == 1 and "TOTAL" not in out and "100.00" not in out
    assert "no page was scored" in err


def test_a_far_off_ground_truth_point_is_dropped_with_a_warning(capsys, scored_folder) -> None:
    """A GT point at 1e10 (a typo) is dropped from its line with a warning naming the file;
    the page's scores are those without it (the issue: pixel IU 96.5 -> 65.7, silently)."""
    d = scored_folder
    labels = np.fromfile(d / "pred" / "p.dat", "<i4").reshape(120, 160)
    boxes = []
    for k in range(1, labels.max() + 1):
        ys, xs = np.nonzero(labels == k)
        boxes.append((xs.min() - 3, ys.min() - 3, xs.max() + 3, ys.max() + 3))  # ink and paper

    def xml(far: bool) -> str:
        out = ""
        for k, (x0, y0, x1, y1) in enumerate(boxes):
            pts = f"{x0},{y0} {x1},{y0} {x1},{y1} {x0},{y1}" + (" 10000000000,10000000000" if far and k == 1 else "")
            out += f'<TextLine id="l{k}"><Coords points="{pts}"/></TextLine>'
        return _page_xml(out)

    scores = {}
    for far in (False, True):
        (d / "gt" / "p.xml").write_text(xml(far))
        code, out, err = tlseg(capsys, "evaluate", "--gt", d / "gt" / "p.xml", "--pred", d / "pred" / "p.dat",
                               "--images", d / "pages")
        assert code == 0, err
        scores[far] = next(ln for ln in out.splitlines() if ln.startswith("TOTAL")).split()[1:]
        assert ("more than 10 page sizes off" in err and "'l1'" in err) == far
    assert scores[True] == scores[False]


def test_a_result_file_is_not_called_ground_truth(capsys, scored_folder) -> None:
    d = scored_folder
    Image.fromarray(np.zeros((120, 160), np.uint8)).save(d / "gt" / "p.png")
    (d / "pred" / "p.dat").write_bytes(b"\0" * 12)
    code, _, err = tlseg(capsys, "evaluate", "--gt", d / "gt" / "p.png", "--pred", d / "pred" / "p.dat")
    line = next(ln for ln in err.splitlines() if "p.dat" in ln)
    assert "cannot read result" in line and "ground truth" not in line.split("p.dat")[0]


# --- 3. no orphans ---------------------------------------------------------------------------------------

_DRIVER = """
import functools, sys
sys.path.insert(0, {tests!r})
import test_batch
from engine import batch, cli
batch.run_batch = functools.partial(batch.run_batch, segment_fn=test_batch.fake_segment)
sys.exit(cli.main(sys.argv[1:]))
"""


def _fake_cli(argv: list[str], timeout: float = 120) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-c", _DRIVER.format(tests=str(TESTS)), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stderr


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_parallel_batch(tmp_path: Path, **popen) -> tuple[subprocess.Popen, Path, list[int]]:
    """A -j 2 batch of slow pages, once a first page is done and both workers are running:
    (the process, its output folder, its worker processes)."""
    for i in range(8):
        write_page(tmp_path / "in" / f"p{i}_slow.png")
    out = tmp_path / "out"
    proc = _run_tlseg_with_fake(["segment", str(tmp_path / "in"), "-o", str(out), "-j", "2"], **popen)
    report = out / "tlseg-report.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (report.exists() and report.read_text().strip()):
        time.sleep(0.05)
    workers = _children(proc.pid)
    assert proc.poll() is None and len(workers) >= 2, workers
    return proc, out, workers


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _check_interrupted(proc: subprocess.Popen, out: Path, workers: list[int], code: int, name: str) -> None:
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert f"interrupted by {name}" in err and "ok," in err and "Traceback" not in err
    time.sleep(5)
    assert not [w for w in workers if _alive(w)]
    assert no_temp_files(out)
    for p in out.glob("*.json"):
        json.loads(p.read_text())


def test_a_second_sigterm_does_not_stop_a_workers_clean_up(tmp_path: Path, monkeypatch) -> None:
    """A worker stopped mid-write removes its temporary file even when a second SIGTERM comes
    during that clean-up: once one worker of a stopped pool exits, the pool's manager thread
    (concurrent.futures' terminate_broken) sends SIGTERM to the others again. Here the second
    signal is sent from inside the clean-up's unlink."""
    target = tmp_path / "page.json"
    real_unlink = Path.unlink

    def unlink_after_another_sigterm(self: Path, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(batch, "_in_page", True)
    monkeypatch.setattr(batch, "_terminating", False)
    previous = signal.signal(signal.SIGTERM, batch._on_sigterm)
    try:
        with pytest.raises(batch._Terminated):
            with export.atomic_path(target) as tmp:
                tmp.write_text("half a page")
                monkeypatch.setattr(Path, "unlink", unlink_after_another_sigterm)
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5.0)  # the handler raises before this ends
    finally:
        signal.signal(signal.SIGTERM, previous)
        monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_stopping_the_pool_waits_for_its_manager_thread() -> None:
    """An interrupted batch's pool (batch._stop_pool) returns only once the pool's manager
    thread has ended: that thread closes a wake-up pipe which Python 3.11's exit hook writes
    to, and a close between the hook's check and its write ended a SIGTERM-ed batch with an
    EBADF traceback on stderr (seen once in CI in test_sigterm_stops_a_parallel_batch...).
    Without the wait the thread is still alive when _stop_pool returns."""
    pool = batch._make_pool(2)
    futures = [pool.submit(time.sleep, 30) for _ in range(3)]
    deadline = time.monotonic() + 30
    while not any(f.running() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.05)
    manager = pool._executor_manager_thread
    assert manager is not None and manager.is_alive()
    batch._stop_pool(pool)
    assert not manager.is_alive()


@needs_proc
def test_sigterm_stops_a_parallel_batch_with_a_summary_and_no_orphans(tmp_path) -> None:
    """SIGTERM (a scheduler's cancel, docker stop) is handled like Ctrl-C: exit 143 with the
    summary, whole files only, and no worker alive 5 s later."""
    proc, out, workers = _start_parallel_batch(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _check_interrupted(proc, out, workers, 143, "SIGTERM")
    code, err = _fake_cli(["segment", str(tmp_path / "in"), "-o", str(out), "-j", "2"])
    assert code == 0 and "0 failed of 8" in err


@needs_proc
def test_sigint_stops_a_batch_started_with_sigint_ignored(tmp_path) -> None:
    """Started with SIGINT ignored (a background job of a script, nohup's shell): SIGINT still
    stops the batch and its workers (they inherited the ignored signal and kept writing)."""
    proc, out, workers = _start_parallel_batch(
        tmp_path, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    proc.send_signal(signal.SIGINT)
    _check_interrupted(proc, out, workers, 130, "SIGINT")


@needs_proc
def test_workers_die_with_a_killed_main_process(tmp_path) -> None:
    """kill -9 of the main process: its workers go too (the kernel's parent-death signal, or
    their watchdog), instead of finishing pages for no one and staying at 300 MB each."""
    proc, out, workers = _start_parallel_batch(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)]


@needs_proc
def test_a_worker_leaves_when_its_parent_is_gone_without_prctl(tmp_path, monkeypatch) -> None:
    """The watchdog alone (no PR_SET_PDEATHSIG, as on macOS): a worker whose parent process
    died exits by itself within seconds."""
    code = (f"import os, sys, time; sys.path.insert(0, {str(ROOT)!r}); from engine import batch; "
            "batch._PR_SET_PDEATHSIG = 0; parent = os.getpid(); pid = os.fork()\n"
            "if pid == 0:\n"
            "    batch._init_worker(parent)\n"
            "    time.sleep(60); os._exit(0)\n"
            "print(pid, flush=True); os._exit(0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    child = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.1)
    assert not _alive(child)


# --- 4. memory ------------------------------------------------------------------------------------------


def test_a_page_over_the_page_memory_is_refused_before_loading(capsys, tmp_path, monkeypatch) -> None:
    """A 12000 x 12000 page (a few hundred bytes of PNG header) is estimated over the default
    2 GB a page may use: refused from its header, never decoded, with how to make it fit."""
    from PIL import ImageFile

    path = tmp_path / "huge.png"
    path.write_bytes(png_header_only(12000, 12000))

    def no_decode(self):
        raise AssertionError("decoded a page that should have been refused")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decode)
    code, _, err = tlseg(capsys, "segment", path, "-o", tmp_path / "out", "-j", "1")
    assert code == 1
    (line,) = error_lines(err)
    assert "huge.png" in line and "144 megapixels" in line and "over the 2.0 GB" in line
    assert "scale it down" in line and "--page-memory" in line
    need = batch.estimate_peak(12000, 12000)
    assert batch.memory_refusal(path, 0, need)[1] is None  # fits when allowed its estimate


def test_a_page_with_a_file_of_initial_lines_is_allowed_its_pieces_memory(tmp_path) -> None:
    """Locked given lines are cut into pieces, which EM and stage 8 carry: a page with a file
    of initial lines is estimated with the pieces' allowance, and refused when only that
    makes it pass --page-memory; with pieces off it is not."""
    page = write_page(tmp_path / "p.png")
    lines_file = tmp_path / "p.xml"
    lines_file.write_text("<PcGts/>")  # never read: the page is refused from its header
    one = batch.estimate_peak(160, 120)
    extra = batch.pieces_peak(Parameters())
    assert extra >= 250 * 2**20  # 10_c71ca's pieces added 84 MB (docs/robustness.md)
    assert batch.pieces_peak(Parameters(given_pieces=0)) == 0
    assert batch.memory_refusal(page, 0, one) == (one, None)
    need, refusal = batch.memory_refusal(page, 0, one + extra // 2, extra)
    assert need == one + extra and "initial lines cut into pieces" in refusal and "--page-memory" in refusal
    summary = run_batch([page], tmp_path / "out", Parameters(), jobs=1, segment_fn=fake_segment,
                        page_memory=one + extra // 2, initial_lines=[str(lines_file)], lock_initial_lines=True)
    assert summary.failed == 1 and "initial lines cut into pieces" in summary.results[0].error
    summary = run_batch([page], tmp_path / "out2", Parameters(), jobs=1, segment_fn=fake_segment,
                        page_memory=one + extra // 2)
    assert summary.ok == 1


def _overlaps(log: Path) -> int:
    """Largest number of pages running at once, from slow_segment's log."""
    events = sorted((float(t), 1 if kind == "start" else -1) for kind, _, t in
                    (ln.split() for ln in log.read_text().splitlines()))
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def test_the_memory_budget_bounds_the_pages_running_at_once(tmp_path, monkeypatch) -> None:
    """Two workers, but a budget that holds one page's estimate only: one page at a time."""
    pages = [write_page(tmp_path / f"p{i}_slow.png") for i in range(4)]
    log = tmp_path / "log"
    monkeypatch.setenv("TLSEG_TEST_LOG", str(log))
    one = batch.estimate_peak(160, 120)
    summary = run_batch(pages, tmp_path / "out", Parameters(), jobs=2, segment_fn=slow_segment,
                        max_memory=int(1.5 * one))
    assert summary.ok == 4
    assert _overlaps(log) == 1


def test_sauvola_in_bands_is_the_whole_page_computation() -> None:
    """Stage 1's banded Sauvola (less memory) gives the ink of the whole-page computation,
    bit for bit, whatever the band height and window; the same for the paper's sample."""
    import cv2
    from synthetic import make_page

    from engine import ink as stage1
    from engine.arrays import nonzero_index

    gray = make_page("skewed", seed=4, scale=1.0).image
    gray = cv2.add(gray, np.random.default_rng(0).integers(0, 40, gray.shape, dtype=np.uint8))
    for window in (15, 41, 151):
        levels = gray.astype(np.float32)
        whole = cv2.compare(levels, stage1.sauvola_threshold(levels, window, 0.2), cv2.CMP_LT) > 0
        for band in (20_000, 100_000, 10**9):
            assert np.array_equal(stage1.sauvola_ink(gray, window, 0.2, band_pixels=band), whole), (window, band)
    paper = gray > 128
    for band in (5_000, 77_777):
        assert np.array_equal(stage1._every_seventh(gray, paper, band), gray.ravel()[nonzero_index(paper)[::7]])


# --- 5. time --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_runaway_page_is_ended_by_the_time_limit(tmp_path, jobs) -> None:
    pages = [write_page(tmp_path / "a.png"), write_page(tmp_path / "b_hang.png"), write_page(tmp_path / "c.png")]
    out = tmp_path / "out"
    t0 = time.monotonic()
    summary = run_batch(pages, out, Parameters(), jobs=jobs, segment_fn=slow_segment, page_timeout=1.5)
    assert time.monotonic() - t0 < 30
    by_stem = {r.stem: r for r in summary.results}
    assert by_stem["b_hang"].status == "failed" and "time limit" in by_stem["b_hang"].error
    assert by_stem["a"].ok and by_stem["c"].ok and summary.exit_code == 1
    assert not list(out.glob("b_hang*")) and no_temp_files(out)


def test_parameter_combinations_that_cannot_finish_are_refused(capsys, tmp_path) -> None:
    """Each value inside its range, together beyond any page's time (issue: still in EM
    iteration 1 after 107 s): refused before any page, naming the parameters."""
    page = write_page(tmp_path / "p.png")
    code, _, err = tlseg(capsys, "segment", page, "-o", tmp_path / "out", "--set", "max_em_iterations=10000",
                         "--set", "kl_tolerance=1e-300", "--set", "mp_max_sweeps=10000",
                         "--set", "mp_tolerance=1e-300", "--set", "label_tolerance=1e-300")
    assert code == 2 and "kl_tolerance" in error_lines(err)[0]
    code, _, err = tlseg(capsys, "segment", page, "-o", tmp_path / "out", "--set", "max_em_iterations=10000",
                         "--set", "mp_max_sweeps=10000")
    assert code == 2 and "max_em_iterations x mp_max_sweeps" in error_lines(err)[0]
    with pytest.raises(ParameterError, match="mp_max_sweeps"):
        Parameters(max_em_iterations=MAX_TOTAL_SWEEPS // 20 + 1, mp_max_sweeps=20)
    Parameters(max_em_iterations=MAX_TOTAL_SWEEPS // 20, mp_max_sweeps=20)
    Parameters.preset("paper")  # 50 x 100 sweeps: valid


# --- 6. one-line errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("address", ["not a url!!", "localhost:abc", "", "http://host:8786", "tcp://h:99999",
                                     "tcp://127.0.0.1"])
def test_a_malformed_dask_address_is_one_line(capsys, tmp_path, address, fake_engine) -> None:
    page = write_page(tmp_path / "p.png")
    code, _, err = tlseg(capsys, "segment", page, "-o", tmp_path / "out", "--dask", address)
    assert code == 2
    (line,) = error_lines(err)
    assert "--dask" in line
    assert not (tmp_path / "out" / "p.json").exists()


def test_an_unreachable_dask_scheduler_is_one_line(capsys, tmp_path, fake_engine) -> None:
    pytest.importorskip("dask.distributed")
    page = write_page(tmp_path / "p.png")
    code, _, err = tlseg(capsys, "segment", page, "-o", tmp_path / "out", "--dask", "tcp://127.0.0.1:9")
    assert code == 1
    (line,) = error_lines(err)
    assert "cannot reach the dask scheduler at tcp://127.0.0.1:9" in line


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="file names as bytes")
def test_a_file_name_that_is_not_utf8_is_segmented(capsys, tmp_path) -> None:
    """A page named with Latin-1 bytes (issue: UnicodeEncodeError ... surrogates not allowed)
    is segmented; its PAGE XML names the image with U+FFFD for the byte."""
    from engine.export import validate_page_xml

    name = os.fsdecode(b"caf\xe9.png")
    try:
        write_page(tmp_path / "in" / name)
    except (OSError, UnicodeError):
        pytest.skip("the file system refuses the name")
    code, _, err = tlseg(capsys, "segment", tmp_path / "in", "-o", tmp_path / "out", "-j", "1")
    assert code == 0, err
    stem = os.fsdecode(b"caf\xe9")
    assert validate_page_xml(tmp_path / "out" / f"{stem}.page.xml") == []
    assert 'imageFilename="caf\ufffd.png"' in (tmp_path / "out" / f"{stem}.page.xml").read_text("utf-8")
    assert json.loads((tmp_path / "out" / f"{stem}.json").read_text())["source"].endswith(name)


def test_a_full_disk_names_the_output_and_the_batch_goes_on(capsys, tmp_path, monkeypatch) -> None:
    """No space left while writing a page: one line naming that page's output file (not a
    temporary name), nothing of the page kept, the next page written."""
    [write_page(tmp_path / "in" / f"p{i}.png") for i in range(2)]
    written = export.write_png

    def full(path, rgb):
        if "p0" in Path(path).name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written(path, rgb)

    monkeypatch.setattr(export, "write_png", full)
    monkeypatch.setattr(batch, "run_batch", functools.partial(batch.run_batch, segment_fn=fake_segment))
    out = tmp_path / "out"
    code, _, err = tlseg(capsys, "segment", tmp_path / "in", "-o", out, "-j", "1")
    assert code == 1
    (line,) = error_lines(err)
    assert f"cannot write {out / 'p0.overlay.png'}: No space left on device" in line
    assert "MB free" in line and "nothing of 'p0' was kept" in line and ".tmp" not in line
    assert not list(out.glob("p0*")) and no_temp_files(out)
    assert all(p.is_file() for p in outputs(out, "p1"))


def test_a_report_that_cannot_be_written_does_not_stop_the_pages(capsys, tmp_path, fake_engine) -> None:
    page = write_page(tmp_path / "p.png")
    (tmp_path / "report").mkdir()  # the report path is a folder: it cannot be opened
    code, _, err = tlseg(capsys, "segment", page, "-o", tmp_path / "out", "--report", tmp_path / "report")
    assert code == 1
    assert any("cannot write the report" in ln for ln in error_lines(err))
    assert all(p.is_file() for p in outputs(tmp_path / "out", "p"))


# --- 7. inputs and names -----------------------------------------------------------------------------------


def test_a_folder_takes_every_page_format(capsys, tmp_path, fake_engine) -> None:
    """GIF, WebP, PGM, JPEG 2000 ... pages in a folder are segmented (GIF and WebP were skipped)."""
    im = Image.open(write_page(tmp_path / "src.png"))
    folder = _mkdir(tmp_path / "in")
    names = []
    for suffix in (".gif", ".webp", ".pgm", ".tga", ".jp2", ".JPEG"):
        if suffix.lower() in batch.IMAGE_SUFFIXES:
            names.append(f"page{suffix.strip('.').lower()}{suffix}")
            im.save(folder / names[-1])
    assert {"pagegif.gif", "pagewebp.webp"} <= set(names)
    code, _, err = tlseg(capsys, "segment", tmp_path / "in", "-o", tmp_path / "out", "-j", "1")
    assert code == 0, err
    assert f"{len(names)} ok" in err


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_output_names_never_collide_and_are_documented(capsys, tmp_path, fake_engine) -> None:
    """``one.png``, ``one.jpg``, ``ONE.PNG`` in one folder: ``one``, ``one_jpg``, ``ONE_PNG``
    (the issue: names made of the absolute path, root_tmp_rel_mixdir_one_2)."""
    folder = _mkdir(tmp_path / "mixdir")
    for name in ("one.png", "one.jpg", "ONE.PNG"):
        write_page(folder / name)
    pages = sorted(folder.iterdir())
    stems = dict(zip((p.name for p in pages), unique_stems(pages), strict=True))
    assert stems == {"one.png": "one", "one.jpg": "one_jpg", "ONE.PNG": "ONE_PNG"}
    code, _, err = tlseg(capsys, "segment", folder, "-o", tmp_path / "out", "-j", "1")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").glob("*.json")) == ["ONE_PNG.json", "one.json", "one_jpg.json"]
    # Same stems in different folders: the folder names, not more.
    other = [Path("/d/x/a/p.png"), Path("/d/y/a/p.png"), Path("/d/b/p.jpg"), Path("/d/b/p.png")]
    assert unique_stems(other) == ["x_a_p", "y_a_p", "b_p_jpg", "b_p"]
    docs = (ROOT / "docs" / "usage.md").read_text()
    assert "one_jpg" in docs and "ONE_PNG" in docs


# --- 8. non-pages ----------------------------------------------------------------------------------------


def _half_painted_page() -> np.ndarray:
    """A page of seven lines on grey paper whose left half is painted white, holding a few
    words: the page area is found on the white half, and its one line is all that is found."""
    from synthetic import make_page

    page = make_page("straight", seed=3, scale=1.0).image
    img = np.clip(page.astype(np.int16) - 60, 0, 255).astype(np.uint8)
    h, w = img.shape
    img[:, : w // 2] = 255
    y0 = int(np.nonzero(page[:, w // 2:] < 128)[0].min())
    img[y0 + 200:y0 + 240, 60:200] = page[y0:y0 + 40, w // 2:w // 2 + 140]
    return img


def test_noise_and_a_cut_away_page_are_flagged_and_text_pages_are_not(capsys, tmp_path) -> None:
    """The real engine: pure noise (given lines) and a page whose text was cut away by a page
    area found on a white-painted half (one line where the text has seven) are written with
    warnings in the report, the JSON and on stderr; synthetic pages of text have none."""
    from synthetic import make_page

    folder = _mkdir(tmp_path / "in")
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (600, 800), dtype=np.uint8)).save(folder / "noise.png")
    Image.fromarray(_half_painted_page()).save(folder / "half.png")
    for kind in ("straight", "curved", "two_columns"):
        Image.fromarray(make_page(kind, seed=1, scale=0.6).image).save(folder / f"{kind}.png")
    out = tmp_path / "out"
    code, _, err = tlseg(capsys, "segment", folder, "-o", out, "-j", "1")
    assert code == 0, err
    report = {r["stem"]: r for r in read_report(out / "tlseg-report.jsonl")}
    meta = {stem: json.loads((out / f"{stem}.json").read_text()) for stem in report}
    assert meta["noise"]["n_lines"] >= 3
    assert any("noise" in w for w in meta["noise"]["warnings"])
    assert report["noise"]["warnings"] == meta["noise"]["warnings"]
    assert meta["half"]["n_lines"] <= 2 and any("covers" in w for w in meta["half"]["warnings"])
    for stem in ("straight", "curved", "two_columns"):
        assert meta[stem]["warnings"] == [] and report[stem]["warnings"] == [], (stem, meta[stem]["warnings"])
    assert sum("tlseg: warning:" in ln and "noise.png" in ln for ln in err.splitlines()) == 1
    assert "2 with warnings" in err


def test_row_continuity_tells_rows_from_noise() -> None:
    """The measure itself, on ink masks: every synthetic kind of page above the threshold,
    uniform and clumped noise below it (near 0: profiles of neighbouring strips unrelated)."""
    from synthetic import KINDS, make_page

    from engine import pagecheck

    for kind in KINDS:
        ink = make_page(kind, seed=2, scale=0.8).image < 128
        score, _ = pagecheck.row_continuity(*pagecheck.ink_density(ink), 12.0)
        assert score > pagecheck.NOISE_ROW_CONTINUITY, (kind, score)
    rng = np.random.default_rng(5)
    import cv2

    for ink in (rng.random((700, 900)) < 0.3,
                cv2.dilate((rng.random((700, 900)) < 0.01).view(np.uint8), np.ones((5, 5), np.uint8)) > 0):
        score, _ = pagecheck.row_continuity(*pagecheck.ink_density(ink), 5.0)
        assert abs(score) < pagecheck.NOISE_ROW_CONTINUITY / 2, score
