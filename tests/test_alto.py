"""engine.export's ALTO 4.4 output: validity against the shipped schema (offline), the same
geometry as PAGE XML, one TextBlock per region, atomic writes, validation errors on tampered
files, and a round trip through ``engine.evaluate`` with the ALTO file as ground truth."""

from __future__ import annotations

import os

import numpy as np
import pytest
from lxml import etree
from PIL import Image
from synthetic import make_page
from test_export import H, W, _two_line_segmentation

from engine import export
from engine.evaluate import evaluate
from engine.export import (
    ALTO_NS,
    PAGE_NS,
    validate_alto_xml,
    write_alto_xml,
    write_outputs,
    write_page_xml,
)
from engine.groundtruth import read_label_map
from engine.model import LineSet, Region, Segmentation
from engine.params import Parameters
from engine.pipeline import segment

A = {"a": ALTO_NS}


def _points(text: str) -> np.ndarray:
    return np.array([p.split(",") for p in text.split()], int)


@pytest.mark.parametrize("phi", [0.0, 0.3])
def test_alto_validates_and_has_the_page_xml_geometry(tmp_path, phi):
    _, seg = _two_line_segmentation(phi)
    alto, page = tmp_path / "p.alto.xml", tmp_path / "p.page.xml"
    write_alto_xml(alto, seg, "p.png", (H, W))
    write_page_xml(page, seg, "p.png", (H, W))
    assert validate_alto_xml(alto) == []
    doc = etree.parse(str(alto))
    assert doc.getroot().tag == f"{{{ALTO_NS}}}alto"
    assert doc.findtext("a:Description/a:MeasurementUnit", namespaces=A) == "pixel"
    assert doc.findtext("a:Description/a:sourceImageInformation/a:fileName", namespaces=A) == "p.png"
    pg = doc.find("a:Layout/a:Page", A)
    assert (pg.get("WIDTH"), pg.get("HEIGHT")) == (str(W), str(H))
    assert pg.find("a:PrintSpace", A) is not None
    pdoc = etree.parse(str(page))
    for k in (1, 2):
        tl = doc.find(f".//a:TextLine[@ID='l{k}']", A)
        ptl = pdoc.find(f".//p:TextLine[@id='l{k}']", {"p": PAGE_NS})
        # The same outline and baseline as PAGE XML (one shared computation).
        poly = _points(tl.find("a:Shape/a:Polygon", A).get("POINTS"))
        assert np.array_equal(poly, _points(ptl.find("p:Coords", {"p": PAGE_NS}).get("points")))
        assert np.array_equal(_points(tl.get("BASELINE")),
                              _points(ptl.find("p:Baseline", {"p": PAGE_NS}).get("points")))
        # The box is the outline's: HPOS/VPOS its top-left vertex, WIDTH/HEIGHT its extent.
        box = [int(tl.get(a)) for a in ("HPOS", "VPOS", "WIDTH", "HEIGHT")]
        assert box == [*poly.min(axis=0), *(poly.max(axis=0) - poly.min(axis=0))]
        (string,) = tl.findall("a:String", A)
        assert string.get("CONTENT") == ""
    # Read back, both formats give the same label map; on the ink it is the segmentation's.
    back = read_label_map(alto, (H, W))
    assert np.array_equal(back, read_label_map(page, (H, W)))
    ink = seg.labels > 0
    assert np.mean(back[ink] == seg.labels[ink]) >= 0.9


def test_alto_one_text_block_per_region_in_region_order(tmp_path):
    """Regions listed (1, 0): block r1 (lines 2, 3) comes first, then r0 (line 1); a line
    without pixels (4) is not written."""
    labels = np.zeros((H, W), np.int32)
    labels[10:16, 5:50] = 1
    labels[10:16, 70:115] = 2
    labels[40:46, 70:115] = 3
    n = 4
    lines = LineSet(a=np.zeros(n), b=np.array([13.0, 13.0, 43.0, 50.0]), c=np.full(n, 30.0),
                    sigma_t=np.full(n, 2.0), sigma_s=np.full(n, 10.0), prior=np.full(n, 0.25),
                    region=np.array([0, 1, 1, 1], np.int32), phi=np.zeros(n))
    regions = (Region(1, 0.0, (60, 0, W, H), 10), Region(0, 0.0, (0, 0, 60, H), 10))
    seg = Segmentation(labels, lines, np.zeros(0, np.int32), regions)
    path = tmp_path / "r.alto.xml"
    write_alto_xml(path, seg, "r.png", (H, W))
    assert validate_alto_xml(path) == []
    blocks = etree.parse(str(path)).findall(".//a:PrintSpace/a:TextBlock", A)
    assert [b.get("ID") for b in blocks] == ["r1", "r0"]
    assert [[t.get("ID") for t in b.findall("a:TextLine", A)] for b in blocks] == [["l2", "l3"], ["l1"]]
    for b in blocks:  # each block's box holds its lines' boxes
        bx, by, bw, bh = (int(b.get(a)) for a in ("HPOS", "VPOS", "WIDTH", "HEIGHT"))
        for t in b.findall("a:TextLine", A):
            x, y, w, h = (int(t.get(a)) for a in ("HPOS", "VPOS", "WIDTH", "HEIGHT"))
            assert bx <= x and by <= y and x + w <= bx + bw and y + h <= by + bh
    assert read_label_map(path, (H, W)).max() == 3


def test_alto_of_an_empty_segmentation_is_valid(tmp_path):
    seg = Segmentation(np.zeros((H, W), np.int32), LineSet.empty(), np.zeros(0, np.int32), ())
    path = tmp_path / "e.alto.xml"
    write_alto_xml(path, seg, "e.png", (H, W))
    assert validate_alto_xml(path) == []
    assert not read_label_map(path).any() and read_label_map(path).shape == (H, W)


@pytest.mark.parametrize(("name", "tamper"), [
    ("no String", lambda t: "\n".join(ln for ln in t.splitlines() if "<String" not in ln)),
    ("no Layout", lambda t: t[:t.index("<Layout>")] + "</alto>\n"),
    ("no Page ID", lambda t: t.replace('ID="p1" ', "")),
    ("bad HPOS", lambda t: t.replace('HPOS="', 'HPOS="x', 1)),
    ("truncated", lambda t: t[:300]),
])
def test_alto_validation_reports_errors(tmp_path, name, tamper):
    _, seg = _two_line_segmentation()
    path = tmp_path / "ok.alto.xml"
    write_alto_xml(path, seg, "ok.png", (H, W))
    text = path.read_text(encoding="utf-8")
    assert validate_alto_xml(path) == []
    bad = tmp_path / "bad.alto.xml"
    bad.write_text(tamper(text), encoding="utf-8")
    assert bad.read_text(encoding="utf-8") != text, name
    assert validate_alto_xml(bad), name


def test_alto_validation_resolves_a_url_import_offline(tmp_path, monkeypatch):
    """An ALTO XSD importing xlink by its loc.gov URL still validates without the network:
    the import is read from resources/xlink.xsd."""
    xsd = export.ALTO_XSD.read_text(encoding="utf-8")
    assert 'schemaLocation="xlink.xsd"' in xsd
    copy = tmp_path / "alto-url.xsd"
    copy.write_text(xsd.replace('schemaLocation="xlink.xsd"',
                                'schemaLocation="http://www.loc.gov/standards/xlink/xlink.xsd"'),
                    encoding="utf-8")
    monkeypatch.setattr(export, "ALTO_XSD", copy)
    _, seg = _two_line_segmentation()
    write_alto_xml(tmp_path / "u.alto.xml", seg, "u.png", (H, W))
    assert validate_alto_xml(tmp_path / "u.alto.xml") == []


def test_alto_write_is_atomic(tmp_path, monkeypatch):
    """A failure while writing leaves the previous file as it was and no temporary behind."""
    _, seg = _two_line_segmentation()
    path = tmp_path / "a.alto.xml"
    path.write_text("previous")

    def broken(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(export.os, "fsync", broken)
    with pytest.raises(OSError, match="disk full"):
        write_alto_xml(path, seg, "a.png", (H, W))
    assert os.listdir(tmp_path) == ["a.alto.xml"] and path.read_text() == "previous"


@pytest.mark.parametrize("kind", ["straight", "skewed"])
def test_alto_round_trip_as_ground_truth(tmp_path, kind):
    """Segment a synthetic page, export, then score the exported ALTO as ground truth against
    the segmentation's own ``.dat`` through engine.evaluate (polygons scored on the image's ink).

    The outline is an approximation of the label map (8-pixel bins along the text, rounded
    vertices, one pixel of margin; where two outlines overlap the smaller wins), so a few ink
    pixels may change line, but far fewer than the 5 % a line needs to lose to miss the
    contest's T_a = 0.95: every line must still be matched one-to-one, FM = 1 (one missed line
    of these 5-9 would give FM <= 0.9), and the pixels must agree to 97.5 % (99 % before the
    final labels took the strokes' pale rims, which reach past the outline's margin: 98.9 %
    on the skewed page; 98 % until components followed their lines' local rows, which on this
    small page, where some lines hold words of two rows, lets two outlines overlap more:
    98.0 %).
    """
    page = make_page(kind, seed=1, scale=0.6)
    Image.fromarray(page.image).save(tmp_path / "pg.png")
    _, _, seg = segment(page.image, Parameters(seed=1))
    written = write_outputs(tmp_path / "out", "pg", page.image, seg, "pg.png")
    alto = tmp_path / "out" / "pg.alto.xml"
    assert alto in written and validate_alto_xml(alto) == []
    n_written = len(etree.parse(str(alto)).findall(".//a:TextLine", A))
    assert n_written == len(np.unique(seg.labels[seg.labels > 0])) >= 5
    assert read_label_map(alto, page.image.shape).max() == n_written
    report = evaluate([alto], [tmp_path / "out" / "pg.dat"], image_dir=tmp_path)
    assert not report.skipped and not report.unpaired
    (score,) = report.pages
    assert score.contest.n == score.contest.m == n_written
    assert score.contest.fm == 1.0
    assert score.line.correct == n_written
    assert score.line.tp / (score.line.tp + score.line.fp + score.line.fn) >= 0.975
