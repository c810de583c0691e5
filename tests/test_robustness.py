"""Robustness to bad input, end to end through ``tlseg``: broken and unusual files, odd page
content, bad parameters and bad ground truth each give valid outputs or one clear line naming
the file (or parameter), never a traceback, a lost page or a partial output.

Loading details (every format, every error reason) are in test_io.py, parameter validation in
test_params.py, the ground-truth readers in test_groundtruth.py; this file covers what those
unit tests do not reach: the real pipeline and the command line on such input.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import warnings
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image
from synthetic import make_page
from test_batch import no_temp_files, outputs, read_report

from engine import io as eio
from engine.cli import main
from engine.export import validate_page_xml
from engine.groundtruth import GroundTruthError, read_label_map
from engine.io import PageLoadError, load_page

ROOT = Path(__file__).resolve().parents[1]
PAGE13 = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2013-07-15"


# --- helpers --------------------------------------------------------------------------------------


def run_out(capsys: pytest.CaptureFixture, *argv: str | Path) -> tuple[int, str, str]:
    """``tlseg ARGV`` in this process -> (exit code, stdout, stderr); never a traceback."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def run(capsys: pytest.CaptureFixture, *argv: str | Path) -> tuple[int, str]:
    """``tlseg ARGV`` in this process -> (exit code, stderr)."""
    code, _, err = run_out(capsys, *argv)
    return code, err


def segment(capsys: pytest.CaptureFixture, *argv: str | Path) -> tuple[int, str]:
    """``tlseg segment ARGV -j 1 -q`` (in-process, so monkeypatches reach the worker)."""
    return run(capsys, "segment", *argv, "-j", "1", "-q")


def error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("tlseg: error:")]


def text_page(scale: float = 0.4, seed: int = 0) -> np.ndarray:
    """A small synthetic handwritten page, uint8 grey."""
    return make_page("straight", seed=seed, scale=scale).image


def check_outputs(outdir: Path, stem: str, shape: tuple[int, int]) -> dict:
    """All five outputs of ``stem`` exist and agree: .dat of H*W int32 equal to the label PNG,
    PAGE XML valid against the schema with one TextLine per label, JSON with the shape.
    Returns the JSON metadata."""
    h, w = shape
    files = outputs(outdir, stem)
    assert all(p.is_file() for p in files), [p.name for p in files if not p.is_file()]
    assert no_temp_files(outdir)
    dat = outdir / f"{stem}.dat"
    assert dat.stat().st_size == h * w * 4
    labels = np.fromfile(dat, dtype="<i4").reshape(h, w)
    png = np.asarray(Image.open(outdir / f"{stem}.labels.png"))
    assert png.shape == (h, w) and np.array_equal(png.astype(np.int64), labels)
    with Image.open(outdir / f"{stem}.overlay.png") as overlay:
        assert overlay.size == (w, h)
    xml = outdir / f"{stem}.page.xml"
    assert validate_page_xml(xml) == []
    meta = json.loads((outdir / f"{stem}.json").read_text(encoding="utf-8"))
    assert meta["shape"] == [h, w]
    n_labels = len(np.unique(labels[labels > 0]))
    assert labels.min() >= 0 and labels.max() <= meta["n_lines"]
    assert xml.read_text(encoding="utf-8").count("<TextLine ") == n_labels
    return meta


def png_header_only(width: int, height: int, rows: int = 1) -> bytes:
    """A 1-bit PNG claiming ``width x height`` pixels but holding only ``rows`` white rows:
    a huge page in a few hundred bytes (decoding it would fail; opening must refuse it)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\x00" + b"\xff" * ((width + 7) // 8)
    body = zlib.compress(row * rows, 9)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + chunk(b"IDAT", body) + chunk(b"IEND", b""))


# --- files ----------------------------------------------------------------------------------------


def _corrupt(kind: str, good: np.ndarray) -> bytes:
    buf = io.BytesIO()
    if kind == "truncated_png":
        Image.fromarray(good).save(buf, format="PNG")
        return buf.getvalue()[: len(buf.getvalue()) // 2]
    if kind == "truncated_jpeg":
        Image.fromarray(good).save(buf, format="JPEG")
        return buf.getvalue()[: len(buf.getvalue()) // 3]
    if kind == "png_signature_then_garbage":
        return b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    if kind == "tiff_bad_ifd":
        Image.fromarray(good).save(buf, format="TIFF")
        data = bytearray(buf.getvalue())
        data[4:8] = struct.pack("<I", len(data) + 1000)  # first IFD beyond the end of the file
        return bytes(data)
    raise AssertionError(kind)


CORRUPT = ("truncated_png", "truncated_jpeg", "png_signature_then_garbage", "tiff_bad_ifd")


def test_corrupt_files_among_good_pages(capsys, tmp_path) -> None:
    """Truncated and corrupt files through the real pipeline: exit 1, one error line naming
    each bad file (and no stray Pillow warning), no output for it, the good page written
    whole, the report lists all."""
    page = text_page()
    folder = tmp_path / "in"
    folder.mkdir()
    Image.fromarray(page).save(folder / "good.png")
    suffix = {"truncated_jpeg": ".jpg", "tiff_bad_ifd": ".tif"}
    for kind in CORRUPT:
        (folder / f"{kind}{suffix.get(kind, '.png')}").write_bytes(_corrupt(kind, page))
    out = tmp_path / "out"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, err = segment(capsys, folder, "-o", out)
    assert code == 1
    assert not [w for w in caught if "PIL" in w.filename], [str(w.message) for w in caught]
    errors = error_lines(err)
    for kind in CORRUPT:
        assert sum(kind in ln for ln in errors) == 1, (kind, err)
        assert not list(out.glob(f"{kind}.*"))
    check_outputs(out, "good", page.shape)
    report = {r["stem"]: r for r in read_report(out / "tlseg-report.jsonl")}
    assert report["good"]["status"] == "ok"
    assert all(report[k]["status"] == "failed" and k in report[k]["error"] for k in CORRUPT)


def test_unreadable_page_through_segment(capsys, tmp_path, monkeypatch) -> None:
    """A page the user may not read (simulated, so it also runs as root): exit 1 and
    'permission denied' naming the file, nothing written for it."""
    path = tmp_path / "locked.png"
    Image.fromarray(text_page()).save(path)

    def deny(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("engine.io.open", deny, raising=False)
    code, err = segment(capsys, path, "-o", tmp_path / "out")
    assert code == 1
    (line,) = error_lines(err)
    assert "locked.png" in line and "permission denied" in line
    assert not list((tmp_path / "out").glob("locked.*"))


def test_non_ascii_and_space_paths_end_to_end(capsys, tmp_path) -> None:
    """Pages under a folder and with a name holding spaces and non-ASCII letters, written to
    such a folder: outputs are named after the page, and the PAGE XML and JSON carry the name."""
    folder = tmp_path / "dossier été"
    folder.mkdir()
    name = "pàge 1 ü 頁.png"
    page = text_page()
    Image.fromarray(page).save(folder / name)
    out = tmp_path / "sortie résultats"
    code, err = segment(capsys, folder, "-o", out)
    assert code == 0, err
    stem = Path(name).stem
    meta = check_outputs(out, stem, page.shape)
    assert meta["n_lines"] > 0 and meta["image"] == name
    assert f'imageFilename="{name}"' in (out / f"{stem}.page.xml").read_text(encoding="utf-8")
    (record,) = read_report(out / "tlseg-report.jsonl")
    assert record["stem"] == stem and record["status"] == "ok"


def test_multipage_tiff_first_page_by_default_and_page_option(capsys, tmp_path) -> None:
    """A two-page TIFF (a blank page, then a smaller page of text): the first page by default,
    ``--page 1`` the second with its own size, ``--page 2`` a clear error."""
    text = text_page()
    blank = np.full((300, 400), 250, np.uint8)
    Image.fromarray(blank).save(tmp_path / "book.tif", save_all=True, append_images=[Image.fromarray(text)])
    code, err = segment(capsys, tmp_path / "book.tif", "-o", tmp_path / "p0")
    assert code == 0, err
    assert check_outputs(tmp_path / "p0", "book_p0", blank.shape)["n_lines"] == 0
    code, err = segment(capsys, tmp_path / "book.tif", "-o", tmp_path / "p1", "--page", "1")
    assert code == 0, err
    meta = check_outputs(tmp_path / "p1", "book_p1", text.shape)
    assert meta["n_lines"] > 0 and meta["page_index"] == 1
    code, err = segment(capsys, tmp_path / "book.tif", "-o", tmp_path / "p2", "--page", "2")
    assert code == 1
    assert "book.tif" in error_lines(err)[0] and "page 2 does not exist" in err


def _save_variant(kind: str, gray: np.ndarray, path: Path) -> tuple[int, int]:
    """Save ``gray`` as an image of another kind; returns the page shape as displayed."""
    if kind == "rgba_transparent_paper":
        rgba = np.dstack([gray, gray, gray, np.where(gray > 200, 0, 255).astype(np.uint8)])
        Image.fromarray(rgba, "RGBA").save(path)
    elif kind == "palette":
        Image.fromarray(gray).convert("P", palette=Image.Palette.ADAPTIVE, colors=256).save(path)
    elif kind == "grey_16bit":
        Image.fromarray(gray.astype(np.uint16) * 257).save(path)
    elif kind == "rgb_jpeg_exif_rotated":
        # Stored lying on its side, with an EXIF Orientation (6) that stands it up again.
        stored = Image.fromarray(np.ascontiguousarray(np.rot90(gray, 1))).convert("RGB")
        exif = Image.Exif()
        exif[0x0112] = 6
        stored.save(path, quality=95, exif=exif.tobytes())
    else:
        raise AssertionError(kind)
    return gray.shape


@pytest.mark.parametrize(("kind", "suffix"), [
    ("rgba_transparent_paper", ".png"), ("palette", ".png"), ("grey_16bit", ".png"),
    ("rgb_jpeg_exif_rotated", ".jpg"),
])
def test_image_kinds_segment_like_the_grey_page(capsys, tmp_path, kind, suffix) -> None:
    """RGBA (paper transparent), palette, 16-bit and EXIF-rotated colour JPEG pages segment in
    the page's upright shape into the same lines as the plain grey page (JPEG: up to one off)."""
    gray = text_page()
    Image.fromarray(gray).save(tmp_path / "grey.png")
    shape = _save_variant(kind, gray, tmp_path / f"{kind}{suffix}")
    code, err = segment(capsys, tmp_path / "grey.png", tmp_path / f"{kind}{suffix}", "-o", tmp_path / "out")
    assert code == 0, err
    ref = check_outputs(tmp_path / "out", "grey", gray.shape)["n_lines"]
    n = check_outputs(tmp_path / "out", kind, shape)["n_lines"]
    assert ref > 0
    assert abs(n - ref) <= (1 if "jpeg" in kind else 0), (n, ref)


@pytest.mark.parametrize("shape, value", [((1, 1), 255), ((1, 1), 0), ((1, 7), 0), ((5, 1), 255), ((3, 4), 0)])
def test_tiny_pages_give_valid_empty_outputs(capsys, tmp_path, shape, value) -> None:
    """1 x 1 and other degenerate pages: valid, empty outputs (zero lines), no crash."""
    Image.fromarray(np.full(shape, value, np.uint8)).save(tmp_path / "tiny.png")
    code, err = segment(capsys, tmp_path / "tiny.png", "-o", tmp_path / "out")
    assert code == 0, err
    assert check_outputs(tmp_path / "out", "tiny", shape)["n_lines"] == 0


def test_huge_page_header_refused_before_decoding(capsys, tmp_path) -> None:
    """A PNG claiming 30000 x 30000 pixels (900 megapixels, a few hundred bytes on disk) is
    refused from its header at once, saying how large it is, with nothing written."""
    path = tmp_path / "bomb.png"
    path.write_bytes(png_header_only(30000, 30000))
    assert path.stat().st_size < 2000
    t0 = time.perf_counter()
    code, err = segment(capsys, path, "-o", tmp_path / "out")
    assert time.perf_counter() - t0 < 5
    assert code == 1
    (line,) = error_lines(err)
    assert "bomb.png" in line and "too large" in line and "900 megapixels" in line
    assert not list((tmp_path / "out").glob("bomb.*"))


def test_max_pixels_checked_before_decoding(tmp_path, monkeypatch) -> None:
    """engine.io's own size limit refuses a page from the header: the pixel data is never
    decoded (decoding is made to fail here), and the message gives size and limit."""
    from PIL import ImageFile

    monkeypatch.setattr(eio, "MAX_PIXELS", 1_000_000)
    path = tmp_path / "big.png"
    path.write_bytes(png_header_only(2000, 1500))

    def no_decode(self):
        raise AssertionError("decoded a page that should have been refused")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decode)
    with pytest.raises(PageLoadError, match=r"big\.png.*too large \(2000 x 1500 = 3 megapixels; the limit is 1\)"):
        load_page(path)


_BIG_W, _BIG_H = 10000, 14000


def _write_big_page(path: Path) -> int:
    """A 10000 x 14000 bilevel page (140 megapixels) of three lines of 'words'; returns the
    number of lines."""
    ink = np.zeros((_BIG_H, _BIG_W), bool)
    for y in (3000, 3400, 3800):
        for x in range(1500, 8500, 700):
            ink[y:y + 120, x:x + 520] = True
    Image.fromarray(~ink).save(path)  # mode "1": white paper, black ink; ~100 KB on disk
    return 3


@pytest.mark.skipif(sys.platform == "win32", reason="peak memory is read with the resource module")
def test_10000_by_14000_page_segments_within_memory_bound(tmp_path) -> None:
    """A real 10000 x 14000 (140 megapixel) bilevel page is under the size limit, so it is
    segmented, end to end, within 4 GB of memory (measured: ~2.4 GB, ~20 s; its estimate,
    3.3 GB, is over the default --page-memory of 2G, which is raised): valid outputs, a .dat
    of 560 MB, its three lines found."""
    import resource

    page = tmp_path / "big.png"
    n_lines = _write_big_page(page)
    assert page.stat().st_size < 2_000_000
    with warnings.catch_warnings():  # the header only: under engine.io's limit, so not refused
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        with Image.open(page) as im:
            assert im.size[0] * im.size[1] <= eio.MAX_PIXELS
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        proc = subprocess.run([sys.executable, "-m", "engine.cli", "segment", str(page), "-o", str(out), "-q",
                               "--page-memory", "4G"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # kilobytes on Linux
        assert proc.returncode == 0, proc.stderr
        if sys.platform.startswith("linux"):
            assert peak_kb < 4 * 1024 * 1024, f"peak memory {peak_kb / 1024:.0f} MB"
        assert (out / "big.dat").stat().st_size == _BIG_W * _BIG_H * 4
        assert validate_page_xml(out / "big.page.xml") == []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(out / "big.labels.png") as im:
                assert im.size == (_BIG_W, _BIG_H)
        meta = json.loads((out / "big.json").read_text())
        assert meta["shape"] == [_BIG_H, _BIG_W] and meta["n_lines"] == n_lines
    finally:
        shutil.rmtree(out, ignore_errors=True)  # 560 MB of .dat: do not keep it in pytest's tmp


# --- content ------------------------------------------------------------------------------------


def _content(kind: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    text = text_page()
    h, w = text.shape
    if kind == "blank":
        return np.full((h, w), 250, np.uint8)
    if kind == "all_black":
        return np.zeros((h, w), np.uint8)
    if kind == "single_word":
        ys, xs = np.nonzero(text < 128)
        y0, x0 = ys.min(), xs.min()
        page = np.full((h, w), 250, np.uint8)
        page[y0:y0 + 30, x0:x0 + 45] = text[y0:y0 + 30, x0:x0 + 45]
        return page
    if kind == "grey_noise":
        return rng.integers(0, 256, (200, 260), dtype=np.uint8)
    if kind == "salt_noise":
        page = np.full((h, w), 250, np.uint8)
        page[rng.random((h, w)) < 0.03] = 0
        return page
    if kind == "one_huge_blob":
        page = np.full((h, w), 250, np.uint8)
        cv2.ellipse(page, (w // 2, h // 2), (w // 3, h // 4), 0, 0, 360, 20, -1)
        return page
    if kind == "lines_joined_into_one_component":
        page = text.copy()
        ys, xs = np.nonzero(text < 128)
        for x in (int(np.percentile(xs, 30)), int(np.percentile(xs, 70))):
            cv2.line(page, (x, int(ys.min())), (x, int(ys.max())), 20, 3)
        return page
    raise AssertionError(kind)


@pytest.mark.parametrize(("kind", "lines"), [
    ("blank", (0, 0)), ("all_black", (0, 0)), ("single_word", (1, 1)), ("grey_noise", (0, 10**6)),
    ("salt_noise", (0, 10**6)), ("one_huge_blob", (0, 1)),
])
def test_odd_content_gives_valid_outputs(capsys, tmp_path, kind, lines) -> None:
    """Blank, black, one word, noise, one huge component: ``segment`` writes all five outputs,
    consistent and schema-valid, with a sensible number of lines."""
    page = _content(kind)
    Image.fromarray(page).save(tmp_path / f"{kind}.png")
    code, err = segment(capsys, tmp_path / f"{kind}.png", "-o", tmp_path / "out")
    assert code == 0, err
    n = check_outputs(tmp_path / "out", kind, page.shape)["n_lines"]
    assert lines[0] <= n <= lines[1], n


def test_joined_lines_component_still_splits_into_lines(capsys, tmp_path) -> None:
    """Text lines joined by two vertical strokes into one connected component: its pixels are
    spread over several lines, not all given to one; the outputs are valid."""
    page = _content("lines_joined_into_one_component")
    assert cv2.connectedComponents((page < 128).view(np.uint8) * 1)[0] - 1 < \
        cv2.connectedComponents((text_page() < 128).view(np.uint8) * 1)[0] - 1
    Image.fromarray(page).save(tmp_path / "joined.png")
    assert segment(capsys, tmp_path / "joined.png", "-o", tmp_path / "out")[0] == 0
    assert check_outputs(tmp_path / "out", "joined", page.shape)["n_lines"] >= 2
    labels = np.fromfile(tmp_path / "out" / "joined.dat", dtype="<i4").reshape(page.shape)
    counts = np.bincount(labels[labels > 0])
    assert (counts > 0).sum() >= 2 and counts.max() < 0.8 * counts.sum()


# --- parameters ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "needles"), [
    ('{"sample_ratio": 3}', ["p.json", "sample_ratio", "outside (0.0, 1.0]"]),
    ('{"orientation_min": 40, "orientation_max": -40}', ["p.json", "orientation_min", "orientation_max"]),
    ('{"sample_ratio": ', ["p.json", "not valid JSON"]),
    ("[0.1, 0.2]", ["p.json", "JSON object"]),
    (b"\xff\xfe\x00{", ["p.json", "UTF-8"]),
    ('{"no_such_parameter": 1, "seed": 1}', ["p.json", "no_such_parameter"]),
])
def test_bad_parameters_file_names_file_and_parameter(capsys, tmp_path, content, needles) -> None:
    """``--params FILE`` with an out-of-range, contradictory, malformed or non-text file:
    exit 2, one error line naming the file (and the parameter and its range), no outputs."""
    f = tmp_path / "p.json"
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    Image.fromarray(text_page()).save(tmp_path / "page.png")
    code, err = run(capsys, "segment", tmp_path / "page.png", "-o", tmp_path / "out", "--params", f)
    assert code == 2
    (line,) = error_lines(err)
    assert all(n in line for n in needles), line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("sets", "needles"), [
    (["orientation_min=30", "orientation_max=-30"], ["orientation_min", "orientation_max"]),
    (["sample_ratio=NaN"], ["sample_ratio", "finite"]),
    (["seed=1e30"], ["seed", "[0, 4294967295]"]),
    (["damping=-0.5"], ["damping", "outside"]),
    (["max_em_iterations=[3]"], ["max_em_iterations"]),
])
def test_bad_set_values_name_parameter_and_range(capsys, tmp_path, sets, needles) -> None:
    """``--set`` values that are contradictory, not finite, out of range or of the wrong type:
    exit 2 before any page is read, one line naming the parameter (and its range)."""
    argv = [a for s in sets for a in ("--set", s)]
    code, err = run(capsys, "segment", tmp_path / "missing.png", "-o", tmp_path / "out", *argv)
    assert code == 2
    (line,) = error_lines(err)
    assert all(n in line for n in needles), line
    assert not (tmp_path / "out").exists()


# --- ground truth ----------------------------------------------------------------------------------


def _page_xml(lines: str, w: int = 40, h: int = 30) -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<PcGts xmlns="{PAGE13}"><Metadata/>'
            f'<Page imageFilename="x.png" imageWidth="{w}" imageHeight="{h}">'
            f'<TextRegion id="r1"><Coords points="0,0 39,0 39,29 0,29"/>{lines}</TextRegion></Page></PcGts>')


def test_polygon_wholly_outside_the_page_is_dropped_with_a_warning(tmp_path) -> None:
    """A PAGE line lying entirely off the page gives a warning naming the file and the line and
    labels nothing (it used to become a phantom line along the page edge)."""
    lines = ('<TextLine id="in"><Coords points="2,2 20,2 20,6 2,6"/></TextLine>'
             '<TextLine id="off"><Coords points="100,5 120,5 120,9 100,9"/></TextLine>'
             '<TextLine id="above"><Coords points="5,-20 30,-20 30,-8 5,-8"/></TextLine>')
    (tmp_path / "gt.xml").write_text(_page_xml(lines))
    with pytest.warns(UserWarning, match=r"gt\.xml: 2 line\(s\) lie wholly outside the 40 x 30 page.*'off'"):
        lab = read_label_map(tmp_path / "gt.xml", (30, 40))
    assert lab.max() == 1 and np.count_nonzero(lab) == 5 * 19
    assert not lab[:, 39].any() and not lab[0].any()


def test_polygon_partly_outside_keeps_its_shape_inside(tmp_path) -> None:
    """A slanted polygon reaching far beyond the page is cut at the edge, not squashed: inside,
    its pixels are those of the same polygon drawn on a larger canvas (up to OpenCV's edge
    rounding where it clips; squashing the corner onto the edge used to lose a third)."""
    pts = np.array([[0, 0], [100, 0], [0, 29]])
    (tmp_path / "tri.xml").write_text(_page_xml(
        '<TextLine id="t"><Coords points="' + " ".join(f"{x},{y}" for x, y in pts) + '"/></TextLine>'))
    lab = read_label_map(tmp_path / "tri.xml", (30, 40))
    big = np.zeros((30, 101), np.uint8)
    cv2.fillPoly(big, [pts.astype(np.int32).reshape(-1, 1, 2)], 1)
    inside = big[:, :40].astype(np.int32)
    assert np.count_nonzero(lab != inside) <= 0.02 * inside.sum()


def test_evaluate_with_bad_ground_truth_files(capsys, tmp_path) -> None:
    """``tlseg evaluate`` over one good page and ground truth that is malformed XML, in a
    foreign namespace, or a label image of the wrong size for its page image: each bad page is
    skipped with a warning naming its ground-truth file, the good page is scored, exit 1."""
    gt, pred, images = tmp_path / "gt", tmp_path / "pred", tmp_path / "images"
    for d in (gt, pred, images):
        d.mkdir()
    labels = np.zeros((30, 40), np.uint8)
    labels[5:9, 3:30] = 1
    labels[15:19, 3:30] = 2
    for stem in ("good", "malformed", "foreign", "small"):
        Image.fromarray(labels).save(pred / f"{stem}.png")
        Image.fromarray(np.where(labels > 0, 0, 255).astype(np.uint8)).save(images / f"{stem}.png")
    Image.fromarray(labels).save(gt / "good.png")
    (gt / "malformed.xml").write_text("<PcGts><Page>")
    (gt / "foreign.xml").write_text(_page_xml("").replace(PAGE13, "http://example.com/not-page"))
    Image.fromarray(labels[:20]).save(gt / "small.png")
    code, out, err = run_out(capsys, "evaluate", "--gt", *sorted(gt.iterdir()), "--pred", *sorted(pred.iterdir()),
                             "--images", images)
    assert code == 1
    for name, reason in (("malformed.xml", "malformed XML"), ("foreign.xml", "namespace"),
                         ("small.png", "40 x 20")):
        assert any(str(gt / name) in ln and reason in ln for ln in err.splitlines()), (name, err)
    (good,) = [ln for ln in out.splitlines() if ln.split() and ln.split()[0] == "good"]
    assert good.split()[1:4] == ["2", "2", "2"] and "100.00" in good, out
    with pytest.raises(GroundTruthError, match=r"small\.png"):
        read_label_map(gt / "small.png", (30, 40))
