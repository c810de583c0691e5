"""Stage 2: connected-component statistics ``H_cc`` and ``W_cc``, which scale every size
parameter of the method."""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from .model import ComponentStats

#: A component at least this many times as wide as tall ...
FLAT_ASPECT = 3.0
#: ... that fills at least this share of its box is a solid bar (a rule's dash, a hyphen, an
#: underline), not a letter: a straight bar fills 0.7-1 of its box (less only where its ends
#: are rounded), handwriting's loops and slants leave most of a word's box empty.
SOLID_BAR = 0.6
#: Components taller than this many typical component heights are chains of touching lines
#: (left out of ``H_cc``).
CHAIN_HEIGHTS = 2.5


def solid_bars(widths: np.ndarray, heights: np.ndarray, areas: np.ndarray) -> np.ndarray:
    """Which components (bool ``(n,)``, from their box sizes and pixel counts, pixels) are
    solid bars: ``FLAT_ASPECT`` times as wide as tall and filling ``SOLID_BAR`` of their box
    (a rule's dash, a hyphen, an underline). They say nothing of the writing's size."""
    widths, heights = np.asarray(widths, float), np.asarray(heights, float)
    return (widths >= FLAT_ASPECT * heights) & (np.asarray(areas, float) >= SOLID_BAR * widths * heights)


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """Median of ``values`` where each counts ``weights`` times (both ``(n,)``)."""
    if len(values) == 0:
        return 0.0
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, cum[-1] / 2.0)])


def component_boxes(components: np.ndarray) -> np.ndarray:
    """Bounding boxes ``(n, 4)`` [x0, y0, x1, y1) and areas of components labelled 1..n."""
    n = int(components.max()) if components.size else 0
    boxes = np.zeros((n, 5), np.int64)
    for i, sl in enumerate(ndimage.find_objects(components)):  # C loop; one slice per component
        if sl is not None:
            boxes[i, :4] = (sl[1].start, sl[0].start, sl[1].stop, sl[0].stop)
    boxes[:, 4] = np.bincount(components.ravel(), minlength=n + 1)[1:]
    return boxes


def boxes_from_stats(stats: np.ndarray) -> np.ndarray:
    """:func:`component_boxes` ``(n, 5)`` from OpenCV's component stats ``(n+1, 5)``
    (x, y, w, h, area; row 0 the background)."""
    s = np.asarray(stats, dtype=np.int64)[1:]
    return np.stack([s[:, 0], s[:, 1], s[:, 0] + s[:, 2], s[:, 1] + s[:, 3], s[:, 4]], axis=1)


def component_heights(components: np.ndarray, boxes: np.ndarray | None = None) -> np.ndarray:
    """Height in pixels of each component ``(n + 1,)`` (index 0, the background, is 0).
    ``boxes``: the components' :func:`component_boxes` when already known."""
    boxes = component_boxes(components) if boxes is None else boxes
    return np.concatenate([[0], boxes[:, 3] - boxes[:, 1]]).astype(np.int64)


def component_stats(components: np.ndarray, boxes: np.ndarray | None = None,
                    typical_by_ink: bool = False) -> ComponentStats:
    """Area-weighted median height and width (pixels) of the text components.

    The plain mean is pulled down by dots and noise; the area-weighted median follows the
    words (notes, "Text height"). Page-sized blobs are ignored, and so are solid bars (at
    least ``FLAT_ASPECT`` times as wide as tall, filling ``SOLID_BAR`` of their box: a rule's
    dash, a hyphen, an underline), never letters. ``boxes``: the components'
    :func:`component_boxes` when already known.

    Components taller than ``CHAIN_HEIGHTS`` x the typical one are left out (chains of
    touching lines); the typical height is the plain median of the components' heights, or,
    with ``typical_by_ink``, their area-weighted median (:func:`row_checked_stats`: specks
    and perforation dots that outnumber the words set the plain median)."""
    boxes = component_boxes(components) if boxes is None else boxes
    if len(boxes) == 0:
        return ComponentStats(h_cc=0.0, w_cc=0.0, n_components=0)
    h, w = components.shape
    heights = (boxes[:, 3] - boxes[:, 1]).astype(float)
    widths = (boxes[:, 2] - boxes[:, 0]).astype(float)
    area = boxes[:, 4].astype(float)
    ok = (heights < h / 4) & (widths < w / 2)
    # Dashed and dotted rules of printed forms are hundreds of such strokes: they set the
    # plain median below (poilus AN_0187-0: 3 px on a page whose writing is 35 px tall).
    ok &= ~solid_bars(widths, heights, area)
    if not ok.any():
        ok = np.ones(len(boxes), bool)
    # Chains of touching lines are several text heights tall: leave out components much
    # taller than the typical (plain median) one before weighting by area.
    typical = (weighted_median(heights[ok], area[ok]) if typical_by_ink
               else float(np.median(heights[ok])))
    ok &= heights <= CHAIN_HEIGHTS * typical
    return ComponentStats(h_cc=max(weighted_median(heights[ok], area[ok]), 2.0),
                          w_cc=max(weighted_median(widths[ok], area[ok]), 2.0),
                          n_components=len(boxes))


def row_checked_stats(stats: ComponentStats, components: np.ndarray, boxes: np.ndarray,
                      samples: np.ndarray, max_pitch_hcc: float) -> tuple[ComponentStats, float]:
    """``stats``, or the text size with the chain cut taken from the ink-weighted typical
    height (``component_stats(typical_by_ink=True)``) where the page's rows say that ``stats``
    is not the writing's size: their pitch, measured at that other size
    (:func:`engine.pitch.page_rows` on the ink ``samples``), is more than ``max_pitch_hcc`` x
    ``stats.h_cc``. Returns the stats kept and that pitch (pixels; NaN where the page shows
    no rows, or where the ink-weighted size is not larger).

    Why: ``H_cc``'s chain cut (``CHAIN_HEIGHTS`` x the plain median height) counts
    components, not ink. On a card whose perforated edge and specks outnumber its words five
    to one (poilus AN_0121-2: 115 of 177 components under 16 px) the plain median is 13 px,
    the cut at 32 px leaves out every word (79 % of the ink), and ``H_cc`` comes out 13 px for
    rows 209 px apart: each word a region and a line. Weighting the typical height by ink
    instead would change every page's ``H_cc`` (the Arabic pages' 20 px letter height becomes
    60-70 px, their letter groups), so the page's own rows decide: handwriting's rows lie
    1.2-5.3 ``H_cc`` apart on the 79 dev pages (Arabic the widest), never ten. The card's
    three rows correlate 0.51-0.57 at their pitch, 0.48 turned by 3 degrees at seed 1
    (H_cc 13 px, 27 lines for 3): the rows are read with ``few_rows``."""
    alt = component_stats(components, boxes, typical_by_ink=True)
    if not (alt.h_cc > stats.h_cc) or len(samples) < 8:
        return stats, math.nan
    from .pitch import page_rows  # pitch -> initial_lines -> model; not needed at import

    # A page whose H_cc is that far off is a card or a note of a few rows among specks:
    # its rows' correlation is read for the profile's overlap at the pitch (few_rows).
    pitch = page_rows(samples, alt.h_cc, few_rows=True)[1]
    if math.isfinite(pitch) and pitch > max_pitch_hcc * stats.h_cc:
        return alt, pitch
    return stats, pitch
