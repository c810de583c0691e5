"""The ``tlseg`` command line: exit codes, one-line errors, discovery, resume, interruption.

Most tests swap the engine for :func:`test_batch.fake_segment` (fast and deterministic; the
subject is the command line); the ``real`` tests run the real pipeline on synthetic pages.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_batch import (
    deterministic_bytes,
    fake_segment,
    no_temp_files,
    outputs,
    read_report,
    synthetic_pages,
    write_page,
)

from engine import batch
from engine.cli import build_params, build_parser, main, parse_set
from engine.export import validate_alto_xml
from engine.params import ParameterError, Parameters

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch the CLI starts uses the double instead of the pipeline."""
    monkeypatch.setattr(batch, "run_batch", functools.partial(batch.run_batch, segment_fn=fake_segment))


def run(capsys: pytest.CaptureFixture, *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if "error" in ln]
    assert "Traceback" not in err
    assert lines, err
    return lines[0]


# --- usage and parameters -------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "needle"), [
    ([], "COMMAND"),
    (["frobnicate"], "frobnicate"),
    (["segment", "x.png"], "-o/--outdir"),
    (["segment", "x.png", "-o", "o", "--ratio", "abc"], "--ratio"),
    (["segment", "x.png", "-o", "o", "--update-rule", "gibbs"], "--update-rule"),
    (["segment", "x.png", "-o", "o", "--ratio", "2"], "sample_ratio"),
    (["segment", "x.png", "-o", "o", "--seed", "-3"], "seed"),
    (["segment", "x.png", "-o", "o", "--set", "t_r=1.5"], "t_r"),
    (["segment", "x.png", "-o", "o", "--set", "bogus=1"], "bogus"),
    (["segment", "x.png", "-o", "o", "--set", "noequals"], "NAME=VALUE"),
    (["segment", "x.png", "-o", "o", "--set", "moments=[0.5,0.5]"], "moments"),
    (["segment", "x.png", "-o", "o", "--params", "/nonexistent/p.json"], "/nonexistent/p.json"),
    (["segment", "x.png", "-o", "o", "-j", "0"], "--jobs"),
    (["params", "--set", "orientation_min=50"], "orientation_min"),
])
def test_usage_and_parameter_errors_exit_2(capsys, tmp_path, monkeypatch, argv, needle) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert needle in one_error_line(err)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_no_pages_found_is_a_usage_error(capsys, tmp_path) -> None:
    code, _, err = run(capsys, "segment", tmp_path / "*.png", "-o", tmp_path / "out")
    assert code == 2
    assert "no images match" in err and "no pages" in err


def test_params_prints_full_editable_json(capsys, tmp_path) -> None:
    code, out, _ = run(capsys, "params")
    assert code == 0
    assert Parameters.from_json(out) == Parameters()
    f = tmp_path / "p.json"
    f.write_text(Parameters(seed=9).to_json())
    code, out, _ = run(capsys, "params", "--params", f, "--set", "update_rule=convex", "--set", "r=0.2")
    assert code == 0
    assert Parameters.from_json(out) == Parameters(seed=9, update_rule="convex", r=0.2)


def test_build_params_precedence(tmp_path) -> None:
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"seed": 1, "sample_ratio": 0.2}))
    args = build_parser().parse_args(["segment", "x", "-o", "o", "--params", str(f), "--seed", "5",
                                      "--multi-oriented", "--set", "seed=6",
                                      "--set", "moments=[0.9,0.08,0.02]"])
    p = build_params(args)
    assert (p.seed, p.sample_ratio, p.multi_oriented, p.moments) == (6, 0.2, True, (0.9, 0.08, 0.02))
    assert parse_set(["merge-gap=3", "merge_fragments=false"]) == {"merge_gap": 3, "merge_fragments": False}
    with pytest.raises(ParameterError, match="NAME=VALUE"):
        parse_set(["=3"])


def test_learn_moments_subcommand(capsys, tmp_path) -> None:
    code, out, err = run(capsys, "learn-moments", tmp_path / "gt.png")
    assert code == 1 and "Traceback" not in err
    assert "not available" in err or "gt.png" in one_error_line(err)
    if "not available" in err:
        return
    from synthetic import make_page

    page = make_page("straight", seed=1, scale=0.6)
    Image.fromarray(page.labels.astype(np.uint16)).save(tmp_path / "s.png")
    Image.fromarray(page.image).save(tmp_path / "img.png")
    code, out, err = run(capsys, "learn-moments", tmp_path / "s.png", "--json", tmp_path / "m.json")
    assert code == 0, err
    moments = json.loads(out)["moments"]
    assert Parameters(moments=tuple(moments)).moments == pytest.approx(moments)
    assert "moments" in json.loads((tmp_path / "m.json").read_text())


def test_paper_preset_with_moments_learnt_from_ground_truth(capsys, tmp_path) -> None:
    """The paper's procedure: 'learn-moments --preset paper' counts the edges with the preset's
    sampling and regions (recorded in the output), and '--preset paper --moments FILE' runs with
    what it learnt; '--set' still overrides; a bad moments file is a usage error naming it."""
    from synthetic import make_page

    page = make_page("straight", seed=1, scale=0.6)
    Image.fromarray(page.labels.astype(np.uint16)).save(tmp_path / "s.png")
    code, out, err = run(capsys, "learn-moments", tmp_path / "s.png", "--preset", "paper",
                         "--json", tmp_path / "m.json")
    assert code == 0, err
    learnt = json.loads(out)
    assert learnt["learnt_with"]["preset"] == "paper" and learnt["learnt_with"]["min_region_samples"] == 1
    moments = tuple(json.loads((tmp_path / "m.json").read_text())["moments"])
    assert moments == pytest.approx(learnt["moments"]) and moments != Parameters.preset("paper").moments
    code, out, _ = run(capsys, "params", "--preset", "paper", "--moments", tmp_path / "m.json")
    assert code == 0
    assert Parameters.from_json(out) == Parameters.preset("paper").replace(moments=moments)
    code, out, _ = run(capsys, "params", "--preset", "paper", "--moments", tmp_path / "m.json",
                       "--set", "moments=[0.9,0.08,0.02]")
    assert code == 0 and Parameters.from_json(out).moments == (0.9, 0.08, 0.02)
    (tmp_path / "bad.json").write_text('{"moments": [0.5, 0.5]}')
    for bad in ("bad.json", "missing.json"):
        code, _, err = run(capsys, "params", "--moments", tmp_path / bad)
        assert code == 2 and bad in one_error_line(err)


def test_evaluate_prints_table_and_csv(capsys, tmp_path, fake_engine) -> None:
    from synthetic import make_page

    page = make_page("straight", seed=2, scale=0.6)
    (tmp_path / "img").mkdir()
    Image.fromarray(page.image).save(tmp_path / "img" / "s.png")
    (tmp_path / "gt").mkdir()
    Image.fromarray(page.labels.astype(np.uint16)).save(tmp_path / "gt" / "s.png")
    assert run(capsys, "segment", tmp_path / "img", "-o", tmp_path / "out", "-q")[0] == 0
    code, out, err = run(capsys, "evaluate", "--gt", tmp_path / "gt", "--pred",
                         str(tmp_path / "out" / "*.labels.png"), "--csv", tmp_path / "s.csv")
    assert code == 0, err
    assert "TOTAL" in out and "\ns " in out
    assert (tmp_path / "s.csv").read_text().startswith("page,")
    # PAGE XML predictions need the page images; none beside the ground truth: page skipped.
    code, out, err = run(capsys, "evaluate", "--gt", tmp_path / "gt", "--pred",
                         str(tmp_path / "out" / "*.page.xml"))
    assert code == 1 and "needed for polygon files" in err
    code, out, err = run(capsys, "evaluate", "--gt", tmp_path / "gt", "--pred",
                         str(tmp_path / "out" / "*.page.xml"), "--images", tmp_path / "img")
    assert code == 0 and "TOTAL" in out
    # The exported ALTO XML is ground truth too: scored on the image's ink, the result's own
    # labels agree with it on every line (FM 100%).
    code, out, err = run(capsys, "evaluate", "--gt", str(tmp_path / "out" / "*.alto.xml"), "--pred",
                         str(tmp_path / "out" / "*.dat"), "--images", tmp_path / "img", "--csv", tmp_path / "a.csv")
    assert code == 0, err
    with open(tmp_path / "a.csv", newline="") as fh:
        (row,) = [r for r in csv.DictReader(fh) if r["page"] == "s"]
    assert float(row["FM"]) == 1.0 and int(row["N"]) == int(row["M"]) > 0
    # A whole output folder as the result: the exact .dat is scored, not the ALTO/PAGE polygons
    # (which would need the page image, absent beside the ground truth).
    code, out, err = run(capsys, "evaluate", "--gt", tmp_path / "gt", "--pred", tmp_path / "out")
    assert code == 0 and "TOTAL" in out, err
    code, out, err = run(capsys, "evaluate", "--gt", tmp_path / "nothing*.png", "--pred", tmp_path / "out")
    assert code == 1 and "nothing*.png" in one_error_line(err)
    code, out, err = run(capsys, "evaluate", "--gt", tmp_path / "gt", "--pred", tmp_path / "out",
                         "--ta", "1.5")
    assert code == 2 and "--ta" in one_error_line(err)


def test_page_option_picks_a_frame_of_a_multipage_tiff(capsys, tmp_path, fake_engine) -> None:
    frames = []
    for n in (2, 4):
        write_page(tmp_path / f"f{n}.png", n_lines=n)
        frames.append(Image.open(tmp_path / f"f{n}.png"))
    frames[0].save(tmp_path / "multi.tif", save_all=True, append_images=frames[1:])
    # Page 0 first, then page 1 into the same folder: page 1 is segmented (issue 25: it was
    # "1 already done"), each page's outputs named with its index.
    code, _, err = run(capsys, "segment", tmp_path / "multi.tif", "-o", tmp_path / "out")
    assert code == 0, err
    code, _, err = run(capsys, "segment", tmp_path / "multi.tif", "-o", tmp_path / "out", "--page", "1")
    assert code == 0 and "1 ok, 0 skipped" in err, err
    assert json.loads((tmp_path / "out" / "multi_p0.json").read_text())["n_lines"] == 2
    assert json.loads((tmp_path / "out" / "multi_p1.json").read_text())["n_lines"] == 4
    assert not (tmp_path / "out" / "multi.json").exists()
    code, _, err = run(capsys, "segment", tmp_path / "multi.tif", "-o", tmp_path / "out2", "--page", "5")
    assert code == 1 and "multi.tif" in one_error_line(err)
    assert run(capsys, "segment", tmp_path / "multi.tif", "-o", tmp_path / "o3", "--page", "-1")[0] == 2


# --- bad pages ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "not_an_image", "empty"])
def test_bad_page_exit_1_names_file_and_writes_nothing(capsys, tmp_path, kind, fake_engine) -> None:
    page = tmp_path / f"{kind}.png"
    if kind == "not_an_image":
        page.write_text("hello, I am text")
    elif kind == "empty":
        page.write_bytes(b"")
    code, _, err = run(capsys, "segment", page, "-o", tmp_path / "out")
    assert code == 1
    assert f"{kind}.png" in one_error_line(err)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(kind)]
    (failed,) = read_report(tmp_path / "out" / "tlseg-report.jsonl")
    assert failed["status"] == "failed" and f"{kind}.png" in failed["error"]


def test_planted_bad_file_among_good_ones(capsys, tmp_path, fake_engine) -> None:
    for i in range(3):
        write_page(tmp_path / "in" / f"good{i}.png")
    (tmp_path / "in" / "bad.jpg").write_bytes(b"\xff\xd8\xff garbage")
    code, _, err = run(capsys, "segment", tmp_path / "in", "-o", tmp_path / "out", "-j", "2")
    assert code == 1
    assert "bad.jpg" in one_error_line(err)
    assert "3 ok, 0 skipped, 1 failed" in err
    report = read_report(tmp_path / "out" / "tlseg-report.jsonl")
    assert sorted(r["status"] for r in report) == ["failed", "ok", "ok", "ok"]
    for i in range(3):
        assert all(p.is_file() for p in outputs(tmp_path / "out", f"good{i}"))


# --- discovery, stems, resume ----------------------------------------------------------------------


def test_folder_glob_and_recursive_discovery(capsys, tmp_path, fake_engine) -> None:
    write_page(tmp_path / "a" / "p.png")
    write_page(tmp_path / "a" / "deep" / "q.TIF")
    write_page(tmp_path / "b" / "p.png")  # same stem as a/p.png
    write_page(tmp_path / "c" / "r.jpg")
    (tmp_path / "a" / "readme.txt").write_text("not a page")
    out = tmp_path / "out"
    code, _, err = run(capsys, "segment", tmp_path / "a", str(tmp_path / "b") + "/*.png",
                       str(tmp_path / "c" / "*.jpg"), "-o", out, "-j", "1")
    assert code == 0, err
    stems = sorted(r["stem"] for r in read_report(out / "tlseg-report.jsonl"))
    assert stems == ["a_p", "b_p", "r"]
    code, _, err = run(capsys, "segment", tmp_path / "a", "-o", tmp_path / "out2", "--recursive", "-q")
    assert code == 0 and err == ""
    assert sorted(r["stem"] for r in read_report(tmp_path / "out2" / "tlseg-report.jsonl")) == ["p", "q"]


def test_resume_and_overwrite(capsys, tmp_path, fake_engine) -> None:
    pages = [write_page(tmp_path / f"p{i}.png") for i in range(3)]
    out = tmp_path / "out"
    assert run(capsys, "segment", pages[0], "-o", out)[0] == 0
    mtime = (out / "p0.dat").stat().st_mtime_ns
    code, _, err = run(capsys, "segment", *pages, "-o", out, "-j", "1")
    assert code == 0 and "2 ok, 1 skipped, 0 failed" in err
    assert (out / "p0.dat").stat().st_mtime_ns == mtime
    code, _, err = run(capsys, "segment", *pages, "-o", out, "-j", "1", "--overwrite")
    assert code == 0 and "3 ok, 0 skipped" in err
    assert (out / "p0.dat").stat().st_mtime_ns != mtime


def test_progress_and_summary_on_stderr(capsys, tmp_path, fake_engine) -> None:
    pages = [write_page(tmp_path / f"p{i}.png") for i in range(2)]
    code, out, err = run(capsys, "segment", *pages, "-o", tmp_path / "out", "-j", "1")
    assert code == 0 and out == ""
    assert "[1/2] p0.png" in err and "[2/2] p1.png" in err and "pages/min" in err
    assert "2 ok, 0 skipped, 0 failed of 2 page(s)" in err
    code, _, err = run(capsys, "segment", pages[0], "-o", tmp_path / "one")
    assert "p0.png: ink" in err and "p0.png: labelling" in err


def test_report_option_and_params_in_json(capsys, tmp_path, fake_engine) -> None:
    page = write_page(tmp_path / "p.png")
    code, _, _ = run(capsys, "segment", page, "-o", tmp_path / "out", "--report", tmp_path / "r.jsonl",
                     "--seed", "7", "--update-rule", "convex", "--set", "damping=0.2")
    assert code == 0
    assert read_report(tmp_path / "r.jsonl")[0]["status"] == "ok"
    meta = json.loads((tmp_path / "out" / "p.json").read_text())
    assert meta["parameters"]["seed"] == 7 and meta["parameters"]["update_rule"] == "convex"
    assert meta["parameters"]["damping"] == 0.2 and meta["seed"] == 7


def test_preset_paper_in_segment_params_and_diff(capsys, tmp_path, fake_engine) -> None:
    """--preset paper reaches the JSON output (parameters and "preset") and the PAGE metadata;
    'params --preset paper' prints the preset; 'params --diff paper' lists every differing
    switch once, each with its reason."""
    page = write_page(tmp_path / "p.png")
    code, _, _ = run(capsys, "segment", page, "-o", tmp_path / "out", "--preset", "paper")
    assert code == 0
    meta = json.loads((tmp_path / "out" / "p.json").read_text())
    assert meta["preset"] == "paper" and meta["parameters"]["update_rule"] == "convex"
    assert "parameter preset: paper" in (tmp_path / "out" / "p.page.xml").read_text()
    code, out, _ = run(capsys, "params", "--preset", "paper")
    assert code == 0 and Parameters.from_json(out) == Parameters.preset("paper")
    code, out, _ = run(capsys, "params", "--diff", "paper")
    rows = out.strip().splitlines()
    assert code == 0 and len(rows) == len(Parameters().diff(Parameters.preset("paper")))
    assert all("  # " in row for row in rows)
    assert any(row.startswith('unary_form: "plateau" -> "paper"') for row in rows)
    code, _, err = run(capsys, "params", "--preset", "paper", "--params", tmp_path / "x.json")
    assert code == 2 and "exclusive" in err


# --- interruption ------------------------------------------------------------------------------------


def test_keyboard_interrupt_exits_130_and_rerun_completes(capsys, tmp_path, fake_engine, monkeypatch) -> None:
    pages = [write_page(tmp_path / "a.png"), write_page(tmp_path / "b_interrupt.png"),
             write_page(tmp_path / "c.png")]
    out = tmp_path / "out"
    code, _, err = run(capsys, "segment", *pages, "-o", out, "-j", "1")
    assert code == 130 and "interrupted" in err and "Traceback" not in err
    assert all(p.is_file() for p in outputs(out, "a")) and no_temp_files(out)
    monkeypatch.setenv("TLSEG_TEST_NO_INTERRUPT", "1")
    code, _, err = run(capsys, "segment", *pages, "-o", out, "-j", "1")
    assert code == 0 and "2 ok, 1 skipped" in err


_DRIVER = """
import functools, sys
sys.path.insert(0, {tests!r})
import test_batch
from engine import batch, cli
batch.run_batch = functools.partial(batch.run_batch, segment_fn=test_batch.fake_segment)
sys.exit(cli.main(sys.argv[1:]))
"""


def test_sigint_to_a_parallel_batch_leaves_whole_files(tmp_path: Path) -> None:
    """A real Ctrl-C (SIGINT to the tlseg process) while two workers are busy: exit 130 quickly,
    no temporary or partial files, and a rerun finishes the rest."""
    pages = [write_page(tmp_path / "in" / f"p{i}_slow.png") for i in range(8)]
    out = tmp_path / "out"
    argv = [sys.executable, "-c", _DRIVER.format(tests=str(TESTS)), "segment", str(tmp_path / "in"),
            "-o", str(out), "-j", "2"]
    proc = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    report = out / "tlseg-report.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (report.exists() and report.read_text().strip()):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - t0 < 10  # the workers are stopped, not waited for
    assert "interrupted" in err and "Traceback" not in err
    assert no_temp_files(out)
    done = [p.stem for p in pages if all(f.is_file() for f in outputs(out, p.stem))]
    assert 1 <= len(done) < len(pages)
    for stem in done:
        json.loads((out / f"{stem}.json").read_text())  # whole, parseable
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"{len(pages) - len(done)} ok, {len(done)} skipped, 0 failed" in proc.stderr


# --- the real engine --------------------------------------------------------------------------------


def test_real_segment_jobs_2_equals_jobs_1(capsys, tmp_path) -> None:
    pages = synthetic_pages(tmp_path / "in", 3)
    code1, _, err1 = run(capsys, "segment", tmp_path / "in", "-o", tmp_path / "j1", "-j", "1", "--seed", "5")
    code2, _, err2 = run(capsys, "segment", tmp_path / "in", "-o", tmp_path / "j2", "-j", "2", "--seed", "5")
    assert code1 == code2 == 0, err1 + err2
    for page in pages:
        meta = json.loads((tmp_path / "j1" / f"{page.stem}.json").read_text())
        assert meta["n_lines"] > 0 and meta["iterations"] >= 1 and meta["seed"] == 5
        assert {"ink", "em", "finish"} <= set(meta["timings"])
        assert validate_alto_xml(tmp_path / "j1" / f"{page.stem}.alto.xml") == []
        for suffix in (".dat", ".labels.png", ".page.xml", ".alto.xml"):
            assert deterministic_bytes(tmp_path / "j1" / f"{page.stem}{suffix}") == \
                   deterministic_bytes(tmp_path / "j2" / f"{page.stem}{suffix}"), (page.stem, suffix)


def test_real_console_script(tmp_path) -> None:
    """The installed ``tlseg`` entry point on one synthetic page, via a subprocess."""
    (page,) = synthetic_pages(tmp_path / "in", 1)
    exe = Path(sys.executable).with_name("tlseg")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "engine.cli"]
    env = dict(os.environ)
    proc = subprocess.run([*cmd, "segment", str(page), "-o", str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "1 ok, 0 skipped, 0 failed" in proc.stderr
    assert all(p.is_file() for p in outputs(tmp_path / "out", page.stem))
