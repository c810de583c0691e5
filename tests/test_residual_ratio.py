"""Residual blobs are told from the page's own rows (``Parameters.t_r_typical``), and the blob
raster may average the ink along the text (``Parameters.raster_along_mean``).

A row's ink ratio in the blob raster follows the pen's width against the writing's height:
a thin-pen letter's rows sat at the paper's t_r (0.08) itself (cremma 01R_P1S7P178_007:
0.071-0.103), and fell under it by turns as the raster's cells moved (scaled by 1.5: 12
initial lines or 8 as W_cc went 234 or 256 px)."""

from __future__ import annotations

import cv2
import numpy as np

from engine import pipeline
from engine.initial_lines import TYPICAL_MIN_BLOBS, _filtered_blobs, _region_raster, line_blobs, residual_ratio
from engine.model import ComponentStats
from engine.params import Parameters

STATS = ComponentStats(h_cc=8.0, w_cc=4.0, n_components=100)


def _rows(n_rows: int, ink: float, pitch: int = 16, band: int = 6, width: int = 80) -> np.ndarray:
    """A region's blob raster (1 cell per pixel both ways): ``n_rows`` bands of ink fraction ``ink``."""
    raster = np.zeros((n_rows * pitch + 16, width), np.float32)
    for i in range(n_rows):
        y = 8 + i * pitch
        raster[y:y + band, 6:width - 6] = ink
    return raster


def _page_ratio(params: Parameters, *rasters: np.ndarray) -> float:
    """The page's residual ratio over regions whose blob rasters are ``rasters``."""
    return residual_ratio([(r, _filtered_blobs(r, STATS, params, 1.0, 1.0)) for r in rasters], params)


def _n_blobs(raster: np.ndarray, params: Parameters, t_r: float) -> int:
    return len(np.unique(line_blobs(raster, STATS, params, 1.0, 1.0, t_r))) - 1


def test_thin_pen_rows_are_rows_not_residue():
    params = Parameters()
    raster = _rows(6, 0.07)
    t_r = _page_ratio(params, raster)
    assert t_r < params.t_r
    assert _n_blobs(raster, params, t_r) == 6
    # The paper's one ratio for every page drops every row of the thin pen.
    paper = params.replace(t_r_typical=0.0)
    assert _page_ratio(paper, raster) == paper.t_r
    assert _n_blobs(raster, paper, paper.t_r) == 0


def test_the_typical_ratio_is_the_pages_not_the_regions():
    params = Parameters()
    text, grain = _rows(6, 0.3), _rows(4, 0.03)
    page = _page_ratio(params, text, grain)
    assert page == params.t_r  # half the text rows' ratio is above t_r: t_r stands
    assert _n_blobs(grain, params, page) == 0
    assert _n_blobs(text, params, page) == 6
    # Read over the grain's region alone, its own blobs would pass for rows.
    alone = _page_ratio(params, grain)
    assert _n_blobs(grain, params, alone) == 4


def test_too_few_blobs_say_nothing_typical():
    params = Parameters()
    few = _rows(TYPICAL_MIN_BLOBS - 1, 0.07)
    assert _page_ratio(params, few) == params.t_r
    enough = _rows(TYPICAL_MIN_BLOBS, 0.07)
    assert _page_ratio(params, enough) < params.t_r


def _thin_pen_page(rows: int = 8, pitch: int = 64, height: int = 24, step: int = 14, seed: int = 0) -> np.ndarray:
    """Rows of zigzag "words" drawn with a 1 px pen, ``step`` px between strokes: a thin hand
    whose rows hold little ink for their height."""
    rng = np.random.default_rng(seed)
    image = np.full((rows * pitch + 120, 1000), 255, np.uint8)
    for i in range(rows):
        base = 60 + i * pitch + height
        x = 60
        while x < 900:
            length = int(rng.integers(80, 180))
            xs = np.arange(x, min(x + length, 940), step)
            ys = base - height * (np.arange(len(xs)) % 2) - rng.integers(0, 4, len(xs))
            cv2.polylines(image, [np.stack([xs, ys], 1).astype(np.int32).reshape(-1, 1, 2)], False, 0, 1)
            x += length + int(rng.integers(25, 45))
    return image


def test_a_thin_pen_page_keeps_every_row():
    image = _thin_pen_page()
    assert len(pipeline.prepare(image).initial_lines) == 8
    # With the paper's t_r alone most rows are residual.
    assert len(pipeline.prepare(image, Parameters().replace(t_r_typical=0.0)).initial_lines) < 6


def test_cells_along_the_text_average_the_ink():
    # Strokes 1 px wide every 12 px; cells 12 px long along the text (scale_u 1/12).
    small = np.zeros((40, 240), np.float32)
    shifted = np.zeros_like(small)
    small[10:30, 0::12] = 1.0
    shifted[10:30, 5::12] = 1.0
    bbox = (0, 0, 240, 40)
    mean_a, _ = _region_raster(small, 0.0, bbox, 1.0, 1.0 / 12, along_mean=True)
    mean_b, _ = _region_raster(shifted, 0.0, bbox, 1.0, 1.0 / 12, along_mean=True)
    inner = (slice(12, 28), slice(2, -2))
    assert np.allclose(mean_a[inner], 1.0 / 12, atol=0.01)
    assert np.allclose(mean_a[inner], mean_b[inner], atol=0.01)
    # A cell read at its centre sees a stroke or none, by where the strokes fall.
    point_a, _ = _region_raster(small, 0.0, bbox, 1.0, 1.0 / 12, along_mean=False)
    point_b, _ = _region_raster(shifted, 0.0, bbox, 1.0, 1.0 / 12, along_mean=False)
    assert np.abs(point_a[inner] - point_b[inner]).max() > 0.5
