"""Stage 1 on pages as archives scan them: the same writing inside a dark noisy surround, with
ruled lines across it, with a coloured stamp over it, and beside a second page as a spread
must give the clean page's text height (within 10 %) and its FM (within 0.03).

Ground truth is the clean page's: pixels of the rules, stamp and surround are not scored
(as with polygon ground truth, where only ink inside a line's polygon counts), but every line
the method makes on them counts in M.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image
from synthetic import make_page

from engine.evaluate import polygon_truth_on_ink
from engine.ink import find_page_area
from engine.io import load_page
from engine.metric import contest_metric
from engine.params import Parameters
from engine.pipeline import segment

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "resources" / "sample" / "170025120000003_0074.jpg"


def dark_surround(rgb: np.ndarray, gt: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The page on a dark, noisy scanner bed (a margin a fifth of the page wide)."""
    h, w = gt.shape
    m = max(h, w) // 5
    rng = np.random.default_rng(seed)
    out = rng.normal(45, 20, (h + 2 * m, w + 2 * m, 1)).clip(0, 255).astype(np.uint8).repeat(3, axis=2)
    out[m:m + h, m:m + w] = rgb
    return out, np.pad(gt, m)


def ruled(rgb: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Blue-grey rules under every line's writing, across the paper (not on the scanner bed
    around it), and a red margin rule."""
    out = rgb.copy()
    h, w = gt.shape
    paper = find_page_area(rgb[:, :, 1])
    rows = [np.nonzero(gt == k)[0] for k in range(1, int(gt.max()) + 1)]
    pen = max(2, h // 400)
    for r in rows:
        if len(r):
            # The writing sits on the rule: below most of its ink, crossed by the descenders.
            y = int(np.percentile(r, 90))
            cv2.line(out, (0, y), (w - 1, y), (110, 120, 150), pen)
    x = int(np.percentile(np.flatnonzero(paper.any(axis=0)), 8))
    cv2.line(out, (x, 0), (x, h - 1), (200, 60, 60), pen)
    out[~paper] = rgb[~paper]
    return out, gt


def dashed(rgb: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A printed form's dashed rules between the lines (dashes a third of a line's pitch
    long, one thin pen wide, a rule every half pitch): hundreds of flat strokes, more than
    the writing's components (poilus AN_0187-0, where they made H_cc 3 px)."""
    out = rgb.copy()
    h, w = gt.shape
    centres = [np.median(np.nonzero(gt == k)[0]) for k in range(1, int(gt.max()) + 1)]
    pitch = float(np.median(np.diff(sorted(centres))))
    dash, pen = max(6, int(pitch / 3)), max(2, h // 600)
    for y in np.arange(centres[0] - pitch / 2, h, pitch / 2):
        if np.any(np.abs(np.asarray(centres) - y) < pitch / 4):
            continue  # not across the writing itself
        for x in range(0, w - dash, 2 * dash):
            cv2.line(out, (x, int(y)), (x + dash, int(y)), (30, 30, 30), pen)
    return out, gt


def framed(rgb: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A frame drawn round the writing by hand: a wavy closed loop, straight for stretches
    and bending between them, that touches the first and last lines' words (poilus
    AN_0228-1, AN_0187-0)."""
    out = rgb.copy()
    ys, xs = np.nonzero(gt)
    y0, y1 = np.percentile(ys, [0.5, 99.5])
    x0, x1 = np.percentile(xs, [0.5, 99.5])
    cy, cx, ry, rx = (y0 + y1) / 2, (x0 + x1) / 2, (y1 - y0) / 2 + 2, (x1 - x0) / 2 + 12
    t = np.linspace(0, 2 * np.pi, 720)
    # A superellipse (straight sides, round corners) with a slow wobble of the hand.
    wob = 1 + 0.015 * np.sin(7 * t)
    px = cx + rx * wob * np.sign(np.cos(t)) * np.abs(np.cos(t)) ** 0.3
    py = cy + ry * wob * np.sign(np.sin(t)) * np.abs(np.sin(t)) ** 0.3
    pts = np.stack([px, py], axis=1).round().astype(np.int32)
    cv2.polylines(out, [pts], True, (25, 25, 25), max(2, gt.shape[0] // 350))
    return out, gt


def blurred(rgb: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A soft scan: every stroke's edge blurred into the paper over a pixel or two, with the
    truth every pixel darker than the split between ink and paper taken inside the lines
    (as polygon ground truth is read: engine.evaluate.polygon_truth_on_ink)."""
    out = cv2.GaussianBlur(rgb, (0, 0), 1.2)
    gray = out[:, :, 0]
    inside = cv2.dilate((gt > 0).astype(np.uint8), np.ones((9, 9), np.uint8)) > 0
    t, _ = cv2.threshold(gray[inside].reshape(-1, 1), 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    labels = cv2.dilate(gt.astype(np.uint16), np.ones((5, 5), np.uint8)).astype(np.int32)
    return out, np.where(gray <= t, labels, 0)


def stamped(rgb: np.ndarray, gt: np.ndarray, h_text: float) -> tuple[np.ndarray, np.ndarray]:
    """A violet round stamp with lettering, over the writing of the page's middle lines."""
    out = rgb.copy()
    h, w = gt.shape
    ys, xs = np.nonzero(gt)
    cy, cx = int(np.median(ys)), int(np.percentile(xs, 70))
    r = int(2.5 * h_text)
    violet = (120, 40, 170)
    pen = max(2, int(h_text / 10))
    cv2.circle(out, (cx, cy), r, violet, pen)
    cv2.circle(out, (cx, cy), int(r * 0.75), violet, max(1, pen // 2))
    for i in range(12):  # lettering round the ring
        a = i * np.pi / 6
        p = (int(cx + 0.87 * r * np.cos(a)), int(cy + 0.87 * r * np.sin(a)))
        cv2.circle(out, p, max(2, int(h_text / 6)), violet, max(1, pen // 2))
    cv2.putText(out, "1916", (cx - r // 2, cy + r // 6), cv2.FONT_HERSHEY_SIMPLEX, r / 90, violet, pen)
    return out, gt


def spread(rgb: np.ndarray, gt: np.ndarray, other: np.ndarray, other_gt: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """Two pages side by side, a dark gutter between them, on a dark surround."""
    h = max(gt.shape[0], other_gt.shape[0])
    gutter = max(8, gt.shape[1] // 40)
    def fit(a: np.ndarray, fill: int) -> np.ndarray:
        pad = [(0, h - a.shape[0]), (0, 0)] + ([(0, 0)] if a.ndim == 3 else [])
        return np.pad(a, pad, constant_values=fill)
    dark = np.full((h, gutter, 3), 35, np.uint8)
    img = np.concatenate([fit(rgb, 40), dark, fit(other, 40)], axis=1)
    labels = np.concatenate([fit(gt, 0), np.zeros((h, gutter), np.int32),
                             np.where(fit(other_gt, 0) > 0, fit(other_gt, 0) + gt.max(), 0)], axis=1)
    return dark_surround(img, labels)


def scanned(variant: str, rgb: np.ndarray, gt: np.ndarray, h_text: float,
            other: np.ndarray | None = None, other_gt: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """The page (colour ``(H, W, 3)``) and its truth as scanned badly: ``variant`` names one
    of the functions above (``spread`` needs the ``other`` page)."""
    if variant == "stamp":
        return stamped(rgb, gt, h_text)
    if variant == "spread":
        return spread(rgb, gt, other, other_gt)
    return {"surround": dark_surround, "ruled": ruled, "dashed": dashed, "framed": framed,
            "blurred": blurred}[variant](rgb, gt)


def run(tmp_path: Path, name: str, rgb: np.ndarray, gt: np.ndarray) -> tuple[float, float]:
    """Segment the page written as a colour PNG; returns (H_cc, FM on the truth's ink). Stamped
    pages are told apart by colour, which is a switch (off by default: see Parameters)."""
    path = tmp_path / f"{name}.png"
    Image.fromarray(rgb).save(path)
    prep, _, seg = segment(path, Parameters(colour_non_text=name == "stamp"))
    return prep.stats.h_cc, contest_metric(gt, seg.labels, gt > 0, 0.95).fm


@pytest.fixture(scope="module")
def synthetic() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    page, other = make_page("straight", 0), make_page("straight", 1)
    def rgb(p):
        return np.repeat(p.image[:, :, None], 3, axis=2)
    return rgb(page), page.labels, rgb(other), other.labels


def test_page_area_excludes_a_dark_surround_and_keeps_a_plain_page(synthetic) -> None:
    rgb, gt, _, _ = synthetic
    gray = rgb[:, :, 0]
    assert find_page_area(gray).all()  # nothing around the paper: the whole image
    framed, framed_gt = dark_surround(rgb, gt)
    area = find_page_area(framed[:, :, 0])
    m = (framed.shape[0] - gt.shape[0]) // 2
    inner = np.zeros(area.shape, bool)
    inner[m:m + gt.shape[0], m:m + gt.shape[1]] = True
    # The page's pixels are inside (but a few at its very edge), the surround outside.
    assert area[inner].mean() > 0.97
    assert area[~inner].mean() < 0.03
    assert np.all(area[framed_gt > 0])


#: Known failures on the sample page (full size; clean: H_cc 38 px, FM 0.930), kept visible.
#: Ruled (H_cc 29 px, FM 0.40): the 9 px rules lie over the bottom of the x-height letters;
#: stripping a rule also cuts the strokes that run along it, so cursive words fall apart into
#: letters and H_cc drops towards the x-height, and the rule's pieces that the local
#: threshold broke off beside dark writing stay ink. Dashed (H_cc 28 px, FM 0.29): solid bars
#: no longer set the text height (engine.components.solid_bars), but the dashes stay ink and
#: make lines of their own. Mechanisms tried for both, with their cost on poilus-dev:
#: docs/history.md (2026-11-25, evening).
RULED = pytest.param("ruled", marks=pytest.mark.xfail(strict=True, reason="H_cc drops on ruled pages"))
DASHED = pytest.param("dashed", marks=pytest.mark.xfail(strict=True, reason="dashed rules stay ink"))


@pytest.mark.parametrize("variant", ["surround", "ruled", "dashed", "framed", "blurred", "stamp", "spread"])
def test_synthetic_page_scanned_badly_segments_like_the_clean_one(tmp_path, synthetic, variant) -> None:
    rgb, gt, other, other_gt = synthetic
    h0, fm0 = run(tmp_path, "clean", rgb, gt)
    assert fm0 >= 0.9  # the clean page itself is segmented well
    img, truth = scanned(variant, rgb, gt, h0, other, other_gt)
    h1, fm1 = run(tmp_path, variant, img, truth)
    assert abs(h1 - h0) <= 0.1 * h0, (variant, h0, h1)
    assert fm1 >= fm0 - 0.03, (variant, fm0, fm1)


@pytest.fixture(scope="module")
def sample_clean(tmp_path_factory) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The bundled sample page at full size (at half size its strokes are a pixel or two
    wide and FM at T_a 0.95 measures little but rounding: 0.14 on the clean page), its truth
    (the polygons on the page's Otsu ink), and the clean page's H_cc and FM."""
    page = load_page(SAMPLE)
    gt, _ = polygon_truth_on_ink(SAMPLE.with_suffix(".xml"), SAMPLE)
    rgb = np.repeat(page.gray[:, :, None], 3, axis=2)
    h0, fm0 = run(tmp_path_factory.mktemp("clean"), "clean", rgb, gt)
    assert fm0 >= 0.85  # the clean page itself is segmented well
    return rgb, gt, h0, fm0


@pytest.mark.skipif(not SAMPLE.is_file(), reason="the bundled sample page is missing")
@pytest.mark.parametrize("variant", ["surround", RULED, DASHED, "stamp", "spread"])
def test_sample_page_scanned_badly_segments_like_the_clean_one(tmp_path, sample_clean, variant) -> None:
    """The spread is the sample page beside a copy of itself (both pages scored)."""
    rgb, gt, h0, fm0 = sample_clean
    img, truth = scanned(variant, rgb, gt, h0, rgb, gt)
    h1, fm1 = run(tmp_path, variant, img, truth)
    assert abs(h1 - h0) <= 0.1 * h0, (variant, h0, h1)
    assert fm1 >= fm0 - 0.03, (variant, fm0, fm1)


def test_the_json_output_says_what_stage_1_found(tmp_path, synthetic) -> None:
    """The text scale, the page area (share and outline) and the non-text pixels are written
    with each page's results, so a user can check them without the window."""
    import json

    from engine.cli import main

    rgb, gt, _, _ = synthetic
    img, _ = dark_surround(rgb, gt)
    path = tmp_path / "framed.png"
    Image.fromarray(img).save(path)
    assert main(["segment", str(path), "-o", str(tmp_path / "out"), "-j", "1", "-q"]) == 0
    found = json.loads((tmp_path / "out" / "framed.json").read_text())["preparation"]
    h0, _ = run(tmp_path, "clean", rgb, gt)
    assert found["h_cc"] == h0
    m = (img.shape[0] - gt.shape[0]) // 2
    share = gt.size / (img.shape[0] * img.shape[1])
    assert abs(found["page_area"]["fraction"] - share) < 0.02
    (outline,) = found["page_area"]["outlines"]
    xs, ys = np.asarray(outline)[:, 0], np.asarray(outline)[:, 1]
    assert abs(xs.min() - m) <= 4 and abs(ys.min() - m) <= 4
    assert abs(xs.max() - (m + gt.shape[1])) <= 4 and abs(ys.max() - (m + gt.shape[0])) <= 4
    assert found["non_text_pixels"] > 0  # the surround's dark pixels
