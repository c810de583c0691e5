"""engine.export: atomic writes, .dat / 16-bit PNG round trips, overlays, PAGE XML validity and
its read-back, and write_outputs' all-or-nothing behaviour (ALTO XML itself: test_alto.py)."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from engine import export
from engine.export import (
    atomic_path,
    atomic_write_bytes,
    colour_labels,
    line_polygon,
    read_dat,
    read_outputs,
    render_overlay,
    validate_alto_xml,
    validate_page_xml,
    write_dat,
    write_label_png,
    write_outputs,
    write_page_xml,
)
from engine.groundtruth import read_label_map
from engine.model import LineSet, Region, Segmentation

H, W = 60, 120


def _two_line_segmentation(phi: float = 0.0) -> tuple[np.ndarray, Segmentation]:
    """Two text lines of 'words' (blocks with gaps and an ascender) at rows ~15 and ~40."""
    gray = np.full((H, W), 255, np.uint8)
    labels = np.zeros((H, W), np.int32)
    for k, (y0, y1) in enumerate([(12, 19), (36, 44)], start=1):
        for x0 in range(8, 108, 20):
            labels[y0:y1, x0:x0 + 14] = k
        labels[y0 - 4:y0, 30:32] = k  # ascender
    gray[labels > 0] = 30
    lines = LineSet(a=np.zeros(2), b=np.array([15.0, 40.0]), c=np.array([60.0, 60.0]),
                    sigma_t=np.array([2.0, 2.5]), sigma_s=np.array([25.0, 25.0]),
                    prior=np.array([0.5, 0.5]), region=np.zeros(2, np.int32), phi=np.full(2, phi))
    seg = Segmentation(labels=labels, lines=lines, sample_labels=np.zeros(0, np.int32),
                       regions=(Region(0, phi, (0, 0, W, H), 100),))
    return gray, seg


def _segments_cross(p1, p2, p3, p4) -> bool:
    def orient(a, b, c):
        return np.sign((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))
    return (orient(p1, p2, p3) * orient(p1, p2, p4) < 0) and (orient(p3, p4, p1) * orient(p3, p4, p2) < 0)


def _is_simple(poly: np.ndarray) -> bool:
    """No two non-adjacent edges of the closed polygon properly cross."""
    n = len(poly)
    edges = [(poly[i], poly[(i + 1) % n]) for i in range(n)]
    for i in range(n):
        for j in range(i + 2, n):
            if i == 0 and j == n - 1:
                continue
            if _segments_cross(*edges[i], *edges[j]):
                return False
    return True


# ----------------------------------------------------------------------------- atomic writes

def test_atomic_write_bytes_leaves_only_the_target(tmp_path):
    atomic_write_bytes(tmp_path / "x.bin", b"abc")
    atomic_write_bytes(tmp_path / "x.bin", b"defg")  # replaces
    assert (tmp_path / "x.bin").read_bytes() == b"defg"
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]


def test_atomic_path_removes_temp_on_error(tmp_path):
    (tmp_path / "keep.txt").write_text("old")
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "keep.txt") as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert (tmp_path / "keep.txt").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


# ----------------------------------------------------------------------------- label maps

def test_dat_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 70000, (7, 11)).astype(np.int32)
    write_dat(tmp_path / "a.dat", labels)
    assert (tmp_path / "a.dat").stat().st_size == 7 * 11 * 4
    # Little-endian int32, row-major, no header.
    assert np.array_equal(np.frombuffer((tmp_path / "a.dat").read_bytes(), "<i4"), labels.ravel())
    back = read_dat(tmp_path / "a.dat", (7, 11))
    assert back.dtype == np.int32 and np.array_equal(back, labels)


def test_read_dat_wrong_size_names_file(tmp_path):
    write_dat(tmp_path / "b.dat", np.zeros((4, 4), np.int32))
    with pytest.raises(ValueError, match=r"b\.dat.*64 bytes"):
        read_dat(tmp_path / "b.dat", (5, 4))


def test_label_png_16bit_round_trip(tmp_path):
    labels = np.arange(40 * 30, dtype=np.int32).reshape(40, 30) % 1000  # labels up to 999
    write_label_png(tmp_path / "l.png", labels)
    raw = cv2.imread(str(tmp_path / "l.png"), cv2.IMREAD_UNCHANGED)
    assert raw.dtype == np.uint16 and np.array_equal(raw, labels)
    # Through the ground-truth reader: same partition, ids renumbered 1..n in value order.
    back = read_label_map(tmp_path / "l.png")
    assert np.array_equal(back, labels)
    with pytest.raises(ValueError, match="65535"):
        write_label_png(tmp_path / "big.png", np.full((2, 2), 70000, np.int32))
    assert not (tmp_path / "big.png").exists()


def test_colour_labels():
    labels = np.array([[0, 1, 2], [3, 4, 0]])
    rgb = colour_labels(labels)
    assert rgb.shape == (2, 3, 3) and rgb.dtype == np.uint8
    assert np.all(rgb[0, 0] == 255) and np.all(rgb[1, 2] == 255)
    colours = {tuple(rgb[0, 1]), tuple(rgb[0, 2]), tuple(rgb[1, 0]), tuple(rgb[1, 1])}
    assert len(colours) == 4 and (255, 255, 255) not in colours
    assert np.array_equal(colour_labels(labels), rgb)  # deterministic
    many = colour_labels(np.arange(1, 201).reshape(1, -1))[0]
    assert len({tuple(c) for c in many}) == 200


def test_render_overlay_colours_ink_and_draws_lines():
    gray, seg = _two_line_segmentation()
    plain = render_overlay(gray, seg.labels, None)
    lut = colour_labels(np.array([[1, 2]]))[0]
    assert np.all(plain[seg.labels == 1] == lut[0]) and np.all(plain[seg.labels == 2] == lut[1])
    assert np.all(plain[0, 0] == 255)
    drawn = render_overlay(gray, seg.labels, seg.lines)
    # Line 1 is y = 15 over x = 60 +- 50: its pixels change, far rows do not.
    assert np.any(drawn[15, 20:100] != plain[15, 20:100])
    assert np.array_equal(drawn[55:], plain[55:])


# ----------------------------------------------------------------------------- PAGE XML

@pytest.mark.parametrize("phi", [0.0, 0.3])
def test_line_polygon_simple_and_covers_ink(phi):
    rng = np.random.default_rng(2)
    # A wavy line of ink along direction phi.
    t = rng.uniform(0, 150, 3000)
    off = rng.uniform(-4, 4, 3000) + 3 * np.sin(t / 15)
    xs = np.rint(20 + t * np.cos(phi) - off * np.sin(phi)).astype(int)
    ys = np.rint(30 + t * np.sin(phi) + off * np.cos(phi)).astype(int)
    poly = line_polygon(xs, ys, phi, (200, 200))
    assert len(np.unique(poly, axis=0)) >= 3 and _is_simple(poly)
    mask = np.zeros((200, 200), np.uint8)
    cv2.fillPoly(mask, [poly.reshape(-1, 1, 2).astype(np.int32)], 1)
    assert mask[ys, xs].mean() > 0.95


@pytest.mark.parametrize("phi", [0.0, 0.3])
def test_page_xml_validates_and_reads_back(tmp_path, phi):
    gray, seg = _two_line_segmentation(phi)
    path = tmp_path / "p.page.xml"
    write_page_xml(path, seg, "p.png", (H, W))
    assert validate_page_xml(path) == []
    text = path.read_text(encoding="utf-8")
    assert "pagecontent/2019-07-15" in text and 'id="l1"' in text and 'id="l2"' in text
    assert "<Creator>tlgui</Creator>" in text
    back = read_label_map(path, (H, W), ink=seg.labels > 0)
    ink = seg.labels > 0
    assert np.mean(back[ink] == seg.labels[ink]) >= 0.9


def test_page_xml_baseline_below_line_and_inside_page(tmp_path):
    from lxml import etree
    gray, seg = _two_line_segmentation()
    path = tmp_path / "b.page.xml"
    write_page_xml(path, seg, "b.png", (H, W))
    ns = {"pc": export.PAGE_NS}
    doc = etree.parse(str(path))
    for k, b in ((1, 15.0), (2, 40.0)):
        pts = doc.find(f".//pc:TextLine[@id='l{k}']/pc:Baseline", ns).get("points")
        xy = np.array([p.split(",") for p in pts.split()], int)
        assert np.all((xy[:, 0] >= 0) & (xy[:, 0] < W) & (xy[:, 1] >= 0) & (xy[:, 1] < H))
        # Shifted down by sigma_t from the regression line y = b; spans the line's ink.
        assert np.allclose(xy[:, 1], round(b + seg.lines.sigma_t[k - 1]), atol=1)
        assert xy[:, 0].min() == 8 and xy[:, 0].max() == 101  # ink spans x = 8..101


def test_page_xml_skips_empty_lines_and_validation_reports_errors(tmp_path):
    gray, seg = _two_line_segmentation()
    labels = seg.labels.copy()
    labels[labels == 1] = 0  # line 1 has no pixels
    seg = Segmentation(labels, seg.lines, seg.sample_labels, seg.regions)
    write_page_xml(tmp_path / "s.xml", seg, "s.png", (H, W))
    text = (tmp_path / "s.xml").read_text()
    assert 'id="l1"' not in text and 'id="l2"' in text
    assert validate_page_xml(tmp_path / "s.xml") == []
    (tmp_path / "bad.xml").write_text(text.replace('imageWidth="120"', 'imageWidth="wide"'))
    assert validate_page_xml(tmp_path / "bad.xml")
    (tmp_path / "broken.xml").write_text(text[:200])
    assert validate_page_xml(tmp_path / "broken.xml")


# ----------------------------------------------------------------------------- write_outputs

def test_write_outputs_all_files_no_temps(tmp_path):
    gray, seg = _two_line_segmentation()
    out = tmp_path / "out dir"
    paths = write_outputs(out, "page", gray, seg, "page.png", {"params": {"r": 0.3}, "n": np.int64(3)})
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["page.dat", "page.labels.png", "page.overlay.png", "page.page.xml",
                            "page.alto.xml", "page.json"])
    assert sorted(p.name for p in paths) == names
    meta = json.loads((out / "page.json").read_text())
    assert meta["params"] == {"r": 0.3} and meta["n"] == 3
    assert meta["n_lines"] == 2 and meta["shape"] == [H, W] and meta["image"] == "page.png"
    assert len(meta["lines"]["lines"]) == 2
    assert np.array_equal(read_dat(out / "page.dat", (H, W)), seg.labels)
    assert validate_page_xml(out / "page.page.xml") == []
    assert validate_alto_xml(out / "page.alto.xml") == []


def test_read_outputs_round_trip(tmp_path):
    """What write_outputs wrote reads back: labels from the .dat (shape from the JSON), else
    from the 16-bit PNG; the lines; the metadata; the page image when it still exists."""
    gray, seg = _two_line_segmentation(phi=0.2)
    image = tmp_path / "page.png"
    cv2.imwrite(str(image), gray)
    write_outputs(tmp_path / "out", "page", gray, seg, "page.png", {"source": str(image)})
    back = read_outputs(tmp_path / "out", "page")
    assert np.array_equal(back.seg.labels, seg.labels) and back.seg.labels.dtype == np.int32
    for name in ("a", "b", "c", "sigma_t", "sigma_s", "prior", "region", "phi"):
        np.testing.assert_allclose(getattr(back.seg.lines, name), getattr(seg.lines, name))
    assert back.meta["n_lines"] == 2 and back.image == image
    (tmp_path / "out" / "page.dat").unlink()
    image.unlink()
    back = read_outputs(tmp_path / "out", "page")
    assert np.array_equal(back.seg.labels, seg.labels) and back.image is None
    (tmp_path / "out" / "page.labels.png").unlink()
    with pytest.raises(OSError, match="no labels for 'page'"):
        read_outputs(tmp_path / "out", "page")
    (tmp_path / "out" / "page.json").write_text("{not json")
    with pytest.raises(ValueError, match="page.json"):
        read_outputs(tmp_path / "out", "page")


@pytest.mark.parametrize("writer", ["write_page_xml", "write_alto_xml"])
def test_write_outputs_failure_leaves_nothing(tmp_path, monkeypatch, writer):
    gray, seg = _two_line_segmentation()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(export, writer, broken)
    with pytest.raises(OSError, match="disk full"):
        write_outputs(tmp_path, "page", gray, seg, "page.png", {})
    assert list(tmp_path.iterdir()) == []


def test_write_outputs_rename_failure_takes_back_renamed_files(tmp_path, monkeypatch):
    gray, seg = _two_line_segmentation()
    real_replace = export.os.replace
    calls = []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError("device gone")
        real_replace(src, dst)

    monkeypatch.setattr(export.os, "replace", flaky)
    with pytest.raises(OSError, match="device gone"):
        write_outputs(tmp_path, "page", gray, seg, "page.png", {})
    assert list(tmp_path.iterdir()) == []
