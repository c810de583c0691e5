"""engine.batch: discovery, stems, resume, failures, interruption, parallel runs and dask.

Where the engine itself is not the subject (resume, atomicity, error handling) a fast
deterministic double, :func:`fake_segment`, stands in for ``engine.pipeline.segment``; it is
module-level so that spawned workers can unpickle it.  Tests named ``test_real_*`` run the
real pipeline on small synthetic pages (scale 0.6); ``test_dask_local_cluster`` starts a real
dask LocalCluster (select them with ``-k real`` / ``-k dask``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from engine import batch
from engine.batch import OUTPUT_SUFFIXES, PageResult, discover_pages, run_batch, unique_stems
from engine.model import ComponentStats, LineSet, Region, Segmentation
from engine.params import Parameters

# --- the double -----------------------------------------------------------------------------


def fake_segment(page, params, progress=None):
    """Labels each horizontal band of ink rows as one line; misbehaves on request by file name:
    ``boom`` raises, ``interrupt`` raises KeyboardInterrupt (unless TLSEG_TEST_NO_INTERRUPT is
    set), ``crash`` kills its process, ``slow`` sleeps."""
    say = progress or (lambda _m: None)
    name = Path(page.path).name
    say("ink")
    if "slow" in name:
        time.sleep(0.4)
    if "boom" in name:
        raise RuntimeError("synthetic engine failure")
    if "interrupt" in name and not os.environ.get("TLSEG_TEST_NO_INTERRUPT"):
        raise KeyboardInterrupt
    if "crash" in name:
        os._exit(3)
    ink = page.gray < 128
    rows = ink.any(axis=1)
    bands, n = ndimage.label(rows)
    labels = np.where(ink, bands[:, None], 0).astype(np.int32)
    h, w = ink.shape
    ys = [np.flatnonzero(bands == k) for k in range(1, n + 1)]
    z = np.zeros(n)
    lines = LineSet(a=z, b=np.array([y.mean() for y in ys]), c=np.full(n, w / 2.0),
                    sigma_t=np.array([max(1.0, len(y) / 2) for y in ys]), sigma_s=np.full(n, w / 4.0),
                    prior=np.full(n, 1.0 / max(n, 1)), region=np.zeros(n, np.int32), phi=z)
    seg = Segmentation(labels=labels, lines=lines, sample_labels=np.zeros(0, np.int32),
                       regions=(Region(0, 0.0, (0, 0, w, h), 0),))
    say("EM iteration 1")
    say("labelling")
    prep = SimpleNamespace(gray=page.gray, timings={"ink": 0.001}, ink=ink, shape=ink.shape,
                           stats=ComponentStats(h_cc=6.0, w_cc=float(w), n_components=n),
                           page_area=None, non_text=None, faint=None, specks=None)
    snap = SimpleNamespace(iteration=1, converged=True)
    return prep, snap, seg


def write_page(path: Path, n_lines: int = 3, seed: int = 0, size: tuple[int, int] = (120, 160)) -> Path:
    """A tiny page of ``n_lines`` dark bars on white paper."""
    rng = np.random.default_rng(seed)
    h, w = size
    img = np.full((h, w), 245, np.uint8)
    pitch = h // (n_lines + 1)
    for k in range(n_lines):
        y = pitch * (k + 1)
        x0 = int(rng.integers(5, 20))
        img[y - 3:y + 3, x0:w - 10] = 30
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img).save(path)
    return path


def outputs(outdir: Path, stem: str) -> list[Path]:
    return [outdir / f"{stem}{s}" for s in OUTPUT_SUFFIXES]


def read_report(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def no_temp_files(outdir: Path) -> bool:
    return not [p for p in outdir.iterdir() if p.name.startswith(".") and ".tmp" in p.name]


# --- discovery and stems ------------------------------------------------------------------------


def test_discover_folder_glob_recursive_and_order(tmp_path: Path) -> None:
    a = write_page(tmp_path / "in" / "b.png")
    b = write_page(tmp_path / "in" / "A.JPG")
    write_page(tmp_path / "in" / "sub" / "c.tif")
    (tmp_path / "in" / "notes.txt").write_text("x")
    flat, warn = discover_pages([str(tmp_path / "in")])
    assert flat == [b, a] and not warn
    deep, _ = discover_pages([str(tmp_path / "in")], recursive=True)
    assert [p.name for p in deep] == ["A.JPG", "b.png", "c.tif"]
    globbed, _ = discover_pages([str(tmp_path / "in" / "*.png")])
    assert globbed == [a]
    rglobbed, _ = discover_pages([str(tmp_path / "**" / "*.tif")], recursive=True)
    assert [p.name for p in rglobbed] == ["c.tif"]
    # A file given twice (folder + explicit) is processed once.
    both, _ = discover_pages([str(a), str(tmp_path / "in")])
    assert both == [a, b]


def test_discover_keeps_missing_files_and_warns_on_empty(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    pages, warn = discover_pages([str(tmp_path / "missing.png"), str(tmp_path / "empty"),
                                  str(tmp_path / "*.png"), str(tmp_path / "notes.txt")])
    assert pages == [tmp_path / "missing.png", tmp_path / "notes.txt"]
    assert len(warn) == 2 and "empty" in warn[0] and "*.png" in warn[1]


def test_unique_stems_are_deterministic() -> None:
    pages = [Path("/d/x/a/p.png"), Path("/d/y/a/p.png"), Path("/d/b/p.jpg"), Path("/d/b/q.png"),
             Path("/d/c/P.png")]
    stems = unique_stems(pages)
    assert stems == ["x_a_p", "y_a_p", "b_p", "q", "c_P"]
    assert len({s.casefold() for s in stems}) == len(stems)
    assert unique_stems(pages) == stems
    assert unique_stems([Path("/d/a.png")]) == ["a"]


# --- runs with the double -------------------------------------------------------------------------


def test_serial_run_writes_outputs_report_and_json(tmp_path: Path) -> None:
    pages = [write_page(tmp_path / "in" / f"p{i}.png", n_lines=i + 2) for i in range(2)]
    events = []
    summary = run_batch(pages, tmp_path / "out", Parameters(seed=4), jobs=1, progress=events.append,
                        segment_fn=fake_segment)
    assert (summary.ok, summary.failed, summary.skipped, summary.lines) == (2, 0, 0, 5)
    assert summary.exit_code == 0
    for stem in ("p0", "p1"):
        assert all(p.is_file() for p in outputs(tmp_path / "out", stem))
    meta = json.loads((tmp_path / "out" / "p1.json").read_text())
    assert meta["seed"] == 4 and meta["parameters"]["seed"] == 4
    assert Parameters.from_dict(meta["parameters"]) == Parameters(seed=4)
    assert meta["iterations"] == 1 and meta["converged"] is True
    assert meta["source"] == str(pages[1].resolve())
    assert {"load", "ink", "em", "finish", "total"} <= set(meta["timings"])
    report = read_report(tmp_path / "out" / "tlseg-report.jsonl")
    assert [r["status"] for r in report] == ["ok", "ok"]
    assert set(report[0]) == {"file", "stem", "status", "error", "lines", "seconds", "redone", "warnings"}
    done = [e for e in events if e.result is not None]
    assert [e.done for e in done] == [1, 2] and done[-1].total == 2


def test_single_page_reports_stages(tmp_path: Path) -> None:
    page = write_page(tmp_path / "one.png")
    events = []
    run_batch([page], tmp_path / "out", Parameters(), jobs=4, progress=events.append,
              segment_fn=fake_segment)
    stages = [e.stage for e in events if e.stage]
    assert stages[:2] == ["load", "ink"] and "labelling" in stages and "writing" in stages


def test_resume_skips_done_pages_and_overwrite_redoes(tmp_path: Path) -> None:
    pages = [write_page(tmp_path / f"p{i}.png") for i in range(3)]
    out = tmp_path / "out"
    run_batch(pages[:2], out, Parameters(), jobs=1, segment_fn=fake_segment)
    before = {p: p.stat().st_mtime_ns for p in outputs(out, "p0")}
    # A page with only some outputs (an interrupted rename) is redone, not skipped.
    (out / "p1.overlay.png").unlink()
    summary = run_batch(pages, out, Parameters(), jobs=1, segment_fn=fake_segment)
    assert (summary.skipped, summary.ok) == (1, 2)
    assert {p: p.stat().st_mtime_ns for p in outputs(out, "p0")} == before
    statuses = {r["stem"]: r["status"] for r in read_report(out / "tlseg-report.jsonl")}
    assert statuses == {"p0": "skipped", "p1": "ok", "p2": "ok"}
    summary = run_batch(pages, out, Parameters(), jobs=1, overwrite=True, segment_fn=fake_segment)
    assert (summary.skipped, summary.ok) == (0, 3)
    assert {p: p.stat().st_mtime_ns for p in outputs(out, "p0")} != before


def test_bad_pages_never_stop_the_batch(tmp_path: Path) -> None:
    good = [write_page(tmp_path / f"good{i}.png") for i in range(2)]
    boom = write_page(tmp_path / "boom.png")
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    report = tmp_path / "rep" / "r.jsonl"
    summary = run_batch([good[0], boom, empty, good[1]], tmp_path / "out", Parameters(), jobs=1,
                        report_path=report, segment_fn=fake_segment)
    assert (summary.ok, summary.failed, summary.exit_code) == (2, 2, 1)
    failed = [r for r in read_report(report) if r["status"] == "failed"]
    assert [r["stem"] for r in failed] == ["boom", "empty"]
    assert "boom.png" in failed[0]["error"] and "RuntimeError" in failed[0]["error"]
    assert "empty.png" in failed[1]["error"] and "empty" in failed[1]["error"]
    assert "\n" not in failed[0]["error"]
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert not [n for n in names if n.startswith(("boom", "empty"))]
    assert all(p.is_file() for g in ("good0", "good1") for p in outputs(tmp_path / "out", g))


def test_parallel_failures_and_a_crashing_worker(tmp_path: Path) -> None:
    """In worker processes too: a raising page and a page that kills its worker are each
    reported failed, every other page is written."""
    pages = [write_page(tmp_path / f"p{i}.png") for i in range(3)]
    pages += [write_page(tmp_path / "boom.png"), write_page(tmp_path / "crash.png")]
    summary = run_batch(pages, tmp_path / "out", Parameters(), jobs=2, segment_fn=fake_segment)
    by_stem = {r.stem: r for r in summary.results}
    assert by_stem["boom"].status == "failed" and "synthetic engine failure" in by_stem["boom"].error
    assert by_stem["crash"].status == "failed" and "died" in by_stem["crash"].error
    assert [by_stem[f"p{i}"].status for i in range(3)] == ["ok"] * 3
    assert summary.exit_code == 1


def test_interrupt_leaves_whole_files_and_rerun_completes(tmp_path: Path, monkeypatch) -> None:
    pages = [write_page(tmp_path / "a.png"), write_page(tmp_path / "b_interrupt.png"),
             write_page(tmp_path / "c.png")]
    out = tmp_path / "out"
    summary = run_batch(pages, out, Parameters(), jobs=1, segment_fn=fake_segment)
    assert summary.interrupted and summary.exit_code == 130
    assert all(p.is_file() for p in outputs(out, "a"))
    assert not [p for p in out.iterdir() if p.name.startswith(("b_", "c."))]
    assert no_temp_files(out)
    assert [r["stem"] for r in read_report(out / "tlseg-report.jsonl")] == ["a"]
    monkeypatch.setenv("TLSEG_TEST_NO_INTERRUPT", "1")
    summary = run_batch(pages, out, Parameters(), jobs=1, segment_fn=fake_segment)
    assert (summary.skipped, summary.ok, summary.interrupted) == (1, 2, False)


def test_parallel_equals_serial_with_double(tmp_path: Path) -> None:
    pages = [write_page(tmp_path / f"p{i}.png", n_lines=2 + i, seed=i) for i in range(4)]
    run_batch(pages, tmp_path / "s", Parameters(), jobs=1, segment_fn=fake_segment)
    run_batch(pages, tmp_path / "p", Parameters(), jobs=2, segment_fn=fake_segment)
    for i in range(4):
        for suffix in (".dat", ".labels.png", ".overlay.png"):
            assert (tmp_path / "s" / f"p{i}{suffix}").read_bytes() == \
                   (tmp_path / "p" / f"p{i}{suffix}").read_bytes()


def test_describe_error_names_file_once() -> None:
    from engine.io import PageLoadError

    msg = batch.describe_error("x/p.png", PageLoadError("cannot read page 'x/p.png': no such file"))
    assert msg == "cannot read page 'x/p.png': no such file"
    assert batch.describe_error("x/p.png", ValueError("bad\nthing")) == "x/p.png: ValueError: bad thing"
    assert PageResult("f", "s", "ok").ok


# --- the real engine ------------------------------------------------------------------------------


def synthetic_pages(folder: Path, n: int, scale: float = 0.6) -> list[Path]:
    from synthetic import KINDS, make_page

    paths = []
    for i in range(n):
        page = make_page(KINDS[i % 2], seed=i, scale=scale)
        paths.append(folder / f"{page.kind}{i}.png")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(page.image).save(paths[-1])
    return paths


def deterministic_bytes(path: Path) -> bytes:
    """A file's bytes, with PAGE XML's Created/LastChange timestamps removed."""
    data = path.read_bytes()
    if path.name.endswith(".page.xml"):
        data = b"\n".join(line for line in data.splitlines()
                          if b"<Created>" not in line and b"<LastChange>" not in line)
    return data


def test_real_serial_equals_parallel(tmp_path: Path) -> None:
    pages = synthetic_pages(tmp_path / "in", 3)
    params = Parameters(seed=11)
    s = run_batch(pages, tmp_path / "s", params, jobs=1)
    p = run_batch(pages, tmp_path / "p", params, jobs=2)
    assert s.ok == p.ok == 3, (s.results, p.results)
    assert s.lines == p.lines > 0
    for page in pages:
        for suffix in (".dat", ".labels.png", ".page.xml", ".alto.xml"):
            a, b = tmp_path / "s" / f"{page.stem}{suffix}", tmp_path / "p" / f"{page.stem}{suffix}"
            assert deterministic_bytes(a) == deterministic_bytes(b), a.name


def test_dask_local_cluster(tmp_path: Path) -> None:
    """dask: a real LocalCluster of 2 worker processes gives the same outputs as a serial run."""
    pytest.importorskip("dask.distributed")
    pages = synthetic_pages(tmp_path / "in", 2)
    bad = tmp_path / "in" / "bad.png"
    bad.write_text("not an image")
    params = Parameters(seed=3)
    summary = run_batch([*pages, bad], tmp_path / "d", params, jobs=2, dask_address="local")
    assert (summary.ok, summary.failed) == (2, 1), summary.results
    report = read_report(tmp_path / "d" / "tlseg-report.jsonl")
    assert sorted(r["status"] for r in report) == ["failed", "ok", "ok"]
    run_batch(pages, tmp_path / "s", params, jobs=1)
    for page in pages:
        for suffix in (".dat", ".labels.png", ".page.xml", ".alto.xml"):
            assert deterministic_bytes(tmp_path / "d" / f"{page.stem}{suffix}") == \
                   deterministic_bytes(tmp_path / "s" / f"{page.stem}{suffix}")
