"""A binarised page saved as JPEG is still a black and white page: it loads as bilevel, as the
black and white it was saved from, and segments as the lossless file does. A grey scan stays
grey (engine.io.black_and_white)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from synthetic import make_page

from engine.io import BILEVEL_MID_SHARE, black_and_white, load_page, page_from_array
from engine.params import Parameters
from engine.pipeline import segment

SAMPLE = Path(__file__).resolve().parents[1] / "resources" / "sample" / "170025120000003_0074.jpg"


def _binarised(seed: int = 0) -> np.ndarray:
    """A synthetic page of handwriting, binarised: uint8 (H, W) of 0 (ink) and 255 (paper)."""
    return np.where(make_page("straight", seed=seed).image < 128, np.uint8(0), np.uint8(255))


def _jpeg(tmp_path: Path, gray: np.ndarray, quality: int, name: str = "page.jpg") -> Path:
    path = tmp_path / name
    assert cv2.imwrite(str(path), gray, [cv2.IMWRITE_JPEG_QUALITY, quality])
    return path


@pytest.mark.parametrize("quality", [75, 90])
def test_a_binarised_page_saved_as_jpeg_loads_as_the_black_and_white_it_was(tmp_path, quality):
    binary = _binarised()
    path = _jpeg(tmp_path, binary, quality)
    stored = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    assert np.count_nonzero((stored > 0) & (stored < 255)) > 0  # the compression rang: not two levels
    page = load_page(path)
    assert page.bilevel
    assert np.array_equal(page.gray, binary)  # every pixel back to the level it was saved from
    assert page.colour is None


def test_a_grey_scan_stays_grey(tmp_path):
    assert not load_page(SAMPLE).bilevel
    grey = make_page("straight", seed=1).image  # paper ~250, ink 20-60, blurred edges
    page = load_page(_jpeg(tmp_path, grey, 90))
    assert not page.bilevel
    assert not np.array_equal(np.unique(page.gray), [0, 255])


def test_mid_levels_decide_not_the_compression():
    binary = _binarised()
    ink = binary == 0
    # Turn a share of the ink's pixels mid-grey: under the limit the page is black and white,
    # over it grey.
    rng = np.random.default_rng(0)
    at = np.flatnonzero(ink)
    for share, bilevel in ((0.5 * BILEVEL_MID_SHARE, True), (2.0 * BILEVEL_MID_SHARE, False)):
        g = binary.copy()
        g.ravel()[rng.choice(at, int(share * len(at)), replace=False)] = 100
        out, is_bilevel = black_and_white(g)
        assert is_bilevel is bilevel
        assert np.array_equal(out, binary) if bilevel else np.array_equal(out, g)
    # No paper, or no ink: not a black and white page (a dark card, a blank sheet of grey).
    assert black_and_white(np.full((20, 20), 10, np.uint8))[1] is False
    assert black_and_white(np.full((20, 20), 240, np.uint8))[1] is False


def test_a_binarised_page_saved_as_jpeg_segments_as_the_png(tmp_path):
    binary = _binarised(seed=2)
    png = tmp_path / "page.png"
    assert cv2.imwrite(str(png), binary)
    params = Parameters()
    _, _, lossless = segment(png, params)
    _, _, lossy = segment(_jpeg(tmp_path, binary, 80), params)
    assert len(lossless.lines) >= 3
    assert np.array_equal(lossy.labels, lossless.labels)
    # The same through an array in memory (the window and batch hand pages over as arrays too).
    colour = cv2.cvtColor(cv2.imread(str(tmp_path / "page.jpg")), cv2.COLOR_BGR2RGB)
    assert page_from_array(colour).bilevel
