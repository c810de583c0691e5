"""engine.groundtruth: label images, .dat, PAGE (2013 points / old Point children / 2019) and
ALTO (polygon and box) readers, the overlap rule, ink masking, and errors naming the file."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from engine.export import write_dat
from engine.groundtruth import GroundTruthError, read_label_map, renumber

PAGE13 = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2013-07-15"
PAGE10 = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2010-03-19"
ALTO4 = "http://www.loc.gov/standards/alto/ns-v4#"
ALTO2 = "http://www.loc.gov/standards/alto/ns-v2#"


def _page_xml(ns: str, lines: str, w: int = 40, h: int = 30) -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<PcGts xmlns="{ns}"><Metadata/>'
            f'<Page imageFilename="x.png" imageWidth="{w}" imageHeight="{h}">'
            f'<TextRegion id="r1"><Coords points="0,0 39,0 39,29 0,29"/>{lines}</TextRegion>'
            f'</Page></PcGts>')


def _alto_xml(ns: str, lines: str, w: int = 40, h: int = 30) -> str:
    return (f'<?xml version="1.0"?>\n<alto xmlns="{ns}"><Description><MeasurementUnit>pixel'
            f'</MeasurementUnit></Description><Layout><Page WIDTH="{w}" HEIGHT="{h}" ID="p1">'
            f'<PrintSpace><TextBlock ID="b1">{lines}</TextBlock></PrintSpace></Page></Layout></alto>')


def test_label_png_8bit_and_renumbering(tmp_path):
    a = np.zeros((10, 12), np.uint8)
    a[1:3] = 7
    a[5:7] = 3
    a[8, :4] = 200
    Image.fromarray(a).save(tmp_path / "g.png")
    lab = read_label_map(tmp_path / "g.png")
    assert lab.dtype == np.int32 and lab.shape == (10, 12)
    # Values 3, 7, 200 -> 1, 2, 3 (value order).
    assert np.all(lab[1:3] == 2) and np.all(lab[5:7] == 1) and np.all(lab[8, :4] == 3)
    assert np.all(lab[0] == 0)


def test_label_tiff_16bit(tmp_path):
    a = np.zeros((6, 6), np.uint16)
    a[0] = 300
    a[3] = 40000
    Image.fromarray(a).save(tmp_path / "g.tif")
    lab = read_label_map(tmp_path / "g.tif", (6, 6))
    assert np.all(lab[0] == 1) and np.all(lab[3] == 2) and lab.max() == 2


def test_grey_rgb_label_image_accepted_colour_refused(tmp_path):
    a = np.zeros((5, 5, 3), np.uint8)
    a[2] = 4
    Image.fromarray(a).save(tmp_path / "grey_rgb.png")
    assert np.all(read_label_map(tmp_path / "grey_rgb.png")[2] == 1)
    a[2, :, 0] = 9
    Image.fromarray(a).save(tmp_path / "colour.png")
    with pytest.raises(GroundTruthError, match=r"colour\.png.*colour"):
        read_label_map(tmp_path / "colour.png")


def test_wrong_size_label_image_names_file(tmp_path):
    Image.fromarray(np.zeros((10, 12), np.uint8)).save(tmp_path / "small gt.png")
    with pytest.raises(GroundTruthError, match=r"small gt\.png.*12 x 10"):
        read_label_map(tmp_path / "small gt.png", (20, 12))


def test_dat_needs_shape(tmp_path):
    labels = np.zeros((4, 5), np.int32)
    labels[1] = 9
    write_dat(tmp_path / "r.dat", labels)
    with pytest.raises(GroundTruthError, match=r"r\.dat.*shape"):
        read_label_map(tmp_path / "r.dat")
    assert np.array_equal(read_label_map(tmp_path / "r.dat", (4, 5)), (labels > 0).astype(np.int32))
    with pytest.raises(GroundTruthError, match=r"r\.dat"):
        read_label_map(tmp_path / "r.dat", (5, 5))


def test_page2013_points_document_order_and_clipping(tmp_path):
    lines = ('<TextLine id="a"><Coords points="2,2 20,2 20,6 2,6"/></TextLine>'
             '<TextLine id="b"><Coords points="-5,10 60,10 60,14 -5,14"/></TextLine>')
    (tmp_path / "p.xml").write_text(_page_xml(PAGE13, lines))
    lab = read_label_map(tmp_path / "p.xml", (30, 40))
    assert lab.shape == (30, 40)
    assert np.all(lab[2:7, 2:21] == 1) and lab[2:7].sum() == 5 * 19
    # Points outside the page are clipped: line b covers full rows 10..14.
    assert np.all(lab[10:15] == 2) and np.all(lab[15:] == 0)


def test_page_old_point_children(tmp_path):
    lines = ('<TextLine id="a"><Coords><Point x="1" y="1"/><Point x="8" y="1"/><Point x="8" y="4"/>'
             '<Point x="1" y="4"/></Coords></TextLine>')
    (tmp_path / "old.xml").write_text(_page_xml(PAGE10, lines))
    lab = read_label_map(tmp_path / "old.xml")
    assert lab.sum() == 8 * 4 and np.all(lab[1:5, 1:9] == 1)


def test_overlap_smaller_polygon_wins(tmp_path):
    # A big line polygon and a small interlinear one inside it, the small one first.
    lines = ('<TextLine id="small"><Coords points="10,10 15,10 15,13 10,13"/></TextLine>'
             '<TextLine id="big"><Coords points="0,5 39,5 39,20 0,20"/></TextLine>')
    (tmp_path / "o.xml").write_text(_page_xml(PAGE13, lines))
    lab = read_label_map(tmp_path / "o.xml", (30, 40))
    assert np.all(lab[10:14, 10:16] == 1)  # small keeps its pixels although drawn under big
    assert lab[6, 2] == 2 and lab[19, 30] == 2
    assert np.count_nonzero(lab == 1) == 6 * 4


def test_ink_mask_keeps_only_ink(tmp_path):
    lines = ('<TextLine id="a"><Coords points="0,0 39,0 39,9 0,9"/></TextLine>'
             '<TextLine id="b"><Coords points="0,20 39,20 39,29 0,29"/></TextLine>'
             '<TextLine id="c"><Coords points="0,12 39,12 39,15 0,15"/></TextLine>')
    (tmp_path / "i.xml").write_text(_page_xml(PAGE13, lines))
    ink = np.zeros((30, 40), bool)
    ink[3, 5:10] = True
    ink[25, :] = True
    lab = read_label_map(tmp_path / "i.xml", ink=ink)
    assert np.array_equal(lab > 0, ink)
    # Line c has no ink and disappears; a and b stay 1 and 2.
    assert np.all(lab[3, 5:10] == 1) and np.all(lab[25] == 2) and lab.max() == 2


def test_alto_v4_polygon_and_box(tmp_path):
    lines = ('<TextLine ID="l1" HPOS="0" VPOS="0" WIDTH="39" HEIGHT="29">'
             '<Shape><Polygon POINTS="2 2 20 2 20 6 2 6"/></Shape></TextLine>'
             '<TextLine ID="l2" HPOS="5" VPOS="15" WIDTH="10" HEIGHT="5"/>')
    (tmp_path / "a.xml").write_text(_alto_xml(ALTO4, lines))
    lab = read_label_map(tmp_path / "a.xml", (30, 40))
    assert np.all(lab[2:7, 2:21] == 1) and np.count_nonzero(lab == 1) == 5 * 19
    assert np.all(lab[15:21, 5:16] == 2) and np.count_nonzero(lab == 2) == 6 * 11


def test_alto_v2_overlap(tmp_path):
    lines = ('<TextLine ID="big" HPOS="0" VPOS="0" WIDTH="30" HEIGHT="20"/>'
             '<TextLine ID="small" HPOS="5" VPOS="5" WIDTH="4" HEIGHT="4"/>')
    (tmp_path / "a2.xml").write_text(_alto_xml(ALTO2, lines))
    lab = read_label_map(tmp_path / "a2.xml")
    assert np.all(lab[5:10, 5:10] == 2) and lab[0, 0] == 1


def test_xml_size_mismatch_names_file(tmp_path):
    (tmp_path / "m.xml").write_text(_page_xml(PAGE13, "", w=40, h=30))
    with pytest.raises(GroundTruthError, match=r"m\.xml.*40 x 30"):
        read_label_map(tmp_path / "m.xml", (31, 40))
    (tmp_path / "ma.xml").write_text(_alto_xml(ALTO4, "", w=40, h=30))
    with pytest.raises(GroundTruthError, match=r"ma\.xml"):
        read_label_map(tmp_path / "ma.xml", (30, 41))


def test_malformed_xml_names_file(tmp_path):
    (tmp_path / "bad.xml").write_text("<PcGts><Page>")
    with pytest.raises(GroundTruthError, match=r"bad\.xml.*malformed XML"):
        read_label_map(tmp_path / "bad.xml", (10, 10))


def test_unknown_namespace_names_file(tmp_path):
    (tmp_path / "ns.xml").write_text(_page_xml("http://example.com/not-page", ""))
    with pytest.raises(GroundTruthError, match=r"ns\.xml.*namespace"):
        read_label_map(tmp_path / "ns.xml", (30, 40))
    (tmp_path / "svg.xml").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    with pytest.raises(GroundTruthError, match=r"svg\.xml.*<svg>"):
        read_label_map(tmp_path / "svg.xml", (30, 40))


def test_not_a_label_file(tmp_path):
    (tmp_path / "notes.txt").write_text("just text")
    with pytest.raises(GroundTruthError, match=r"notes\.txt"):
        read_label_map(tmp_path / "notes.txt", (3, 3))
    with pytest.raises(GroundTruthError, match=r"missing\.png.*no such file"):
        read_label_map(tmp_path / "missing.png")


def test_renumber_large_and_negative_values():
    a = np.array([[0, 5_000_000, -3], [7, 7, 5_000_000]])
    assert np.array_equal(renumber(a), [[0, 2, 0], [1, 1, 2]])
