"""What the canvas draws, computed from engine data with NumPy/OpenCV only (no Qt).

These run in the engine process (see :mod:`tlgui.engine_process`) or in worker threads, never
in the GUI thread: image pyramids for the page and overlays, the graph's edges ready to
cull, the region outlines, the colour overlay of the final labels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import cv2
import numpy as np

from engine.model import Preparation


def image_pyramid(image: np.ndarray, min_side: int = 256) -> list[np.ndarray]:
    """``[image, image/2, image/4, ...]`` (area filter) down to ``min_side``; thread-safe, so
    workers build it and the GUI thread only picks a level."""
    levels = [image]
    while min(levels[-1].shape[:2]) >= 2 * min_side:
        h, w = levels[-1].shape[:2]
        levels.append(cv2.resize(levels[-1], (w // 2, h // 2), interpolation=cv2.INTER_AREA))
    return levels


#: A piece of a region (samples joined by its MRF edges) with fewer samples than this is not
#: outlined: one or two samples enclose nothing.
MIN_PIECE_SAMPLES = 3


def _closed(corners: np.ndarray) -> np.ndarray:
    """The sides of the polygon ``corners (k, 2)`` as segment pairs ``(k, 2, 2)``."""
    return np.stack([corners, np.roll(corners, -1, axis=0)], axis=1)


def _box(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return _closed(np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=float))


def _hull_segments(pts: np.ndarray) -> np.ndarray:
    """Convex hull of ``pts (n, 2)`` (n >= 3; their bounding box where they are collinear)
    as segment pairs ``(k, 2, 2)``."""
    from scipy.spatial import ConvexHull, QhullError

    try:
        return _closed(pts[ConvexHull(pts).vertices])
    except QhullError:
        return _box(*pts.min(axis=0), *pts.max(axis=0))


def region_pieces(prep: Preparation) -> np.ndarray:
    """Piece index of every sample ``(N,)``: the samples its region's MRF edges join (edges
    never cross regions, so a piece lies in one region)."""
    from engine.regions import edge_components

    return edge_components(np.asarray(prep.edges, dtype=np.intp).reshape(-1, 2), len(prep.samples))


def region_outlines(prep: Preparation) -> np.ndarray:
    """Outline of each region as segment pairs ``(S, 2, 2)``: the convex hull of each of its
    pieces of at least :data:`MIN_PIECE_SAMPLES` samples (:func:`region_pieces`). A region is
    not always one patch of text: a few words too small to be a region join the nearest
    larger one, however far (engine.regions), and one hull of them all would enclose the blank
    between them and the text of other regions (moc_train_20: a triangle across the page). A
    region with no such piece is outlined by its bounding box."""
    pieces = region_pieces(prep) if len(prep.samples) else np.zeros(0, np.int64)
    segs = []
    for region in prep.regions:
        at = np.flatnonzero(prep.sample_region == region.index)
        at = at[np.argsort(pieces[at], kind="stable")]  # each piece's samples together
        _, counts = np.unique(pieces[at], return_counts=True)
        drawn = [p for p in np.split(at, np.cumsum(counts)[:-1]) if len(p) >= MIN_PIECE_SAMPLES]
        segs.extend(_hull_segments(prep.samples[p].astype(float)) for p in drawn)
        if not drawn:  # degenerate region: its bounding box
            segs.append(_box(*region.bbox))
    return np.concatenate(segs) if segs else np.zeros((0, 2, 2))


@dataclass(frozen=True)
class EdgeSegments:
    """The graph layer's edges, ready to cull and draw: rows ``x0, y0, x1, y1`` of the MRF
    edges (the first ``n_graph``) then of the Delaunay edges cut between regions, each
    edge's bounding box as four contiguous arrays (fast to compare), a fixed pseudo-random
    rank per edge (which edges survive thinning) and the bounds of them all."""

    segs: np.ndarray
    n_graph: int
    x_lo: np.ndarray
    x_hi: np.ndarray
    y_lo: np.ndarray
    y_hi: np.ndarray
    rank: np.ndarray
    bounds: tuple[float, float, float, float]  # x0, y0, x1, y1 (zeros when empty)

    @classmethod
    def from_rows(cls, graph: np.ndarray, cut: np.ndarray) -> EdgeSegments:
        graph = np.asarray(graph, dtype=float).reshape(-1, 4)
        segs = np.concatenate([graph, np.asarray(cut, dtype=float).reshape(-1, 4)])
        x_lo, x_hi = np.minimum(segs[:, 0], segs[:, 2]), np.maximum(segs[:, 0], segs[:, 2])
        y_lo, y_hi = np.minimum(segs[:, 1], segs[:, 3]), np.maximum(segs[:, 1], segs[:, 3])
        # A multiplicative hash of the index: cheaper than a shuffle, the same every time.
        rank = (np.arange(len(segs), dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
        bounds = ((float(x_lo.min()), float(y_lo.min()), float(x_hi.max()), float(y_hi.max()))
                  if len(segs) else (0.0, 0.0, 0.0, 0.0))
        return cls(segs, len(graph), x_lo, x_hi, y_lo, y_hi, rank.astype(np.uint32), bounds)

    @classmethod
    def empty(cls) -> EdgeSegments:
        return cls.from_rows(np.zeros((0, 4)), np.zeros((0, 4)))


def segment_rows(points: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``edges`` (E, 2) between ``points`` (N, 2) as rows ``x0, y0, x1, y1``."""
    return points[np.asarray(edges, dtype=np.intp).reshape(-1, 2)].reshape(-1, 4)


@dataclass(frozen=True)
class PrepGeometry:
    """What the canvas draws of a preparation, computed once in the engine process (NumPy
    only): the graph layer's edges (MRF edges and the Delaunay edges cut between regions),
    the region outlines as segments and the ink mask's image pyramid."""

    edges: EdgeSegments
    region_segments: np.ndarray
    #: The ink mask as uint8 0/255, as an image pyramid (the ink layer shows it).
    ink_pyramid: list[np.ndarray] | None = None
    #: The pixels kept out of the ink as not text (rules, frames, stamps, the surround), as
    #: uint8 0/255 pyramid, and the page area's outlines as segment pairs ``(S, 2, 2)``.
    non_text_pyramid: list[np.ndarray] | None = None
    page_segments: np.ndarray | None = None
    #: One annotation per block (region): its samples' centroid ``(x, y)``, the text direction
    #: there as a unit vector ``(dx, dy)`` and a label "angle deg, pitch px"
    #: (engine.blocks.block_summary), for a layer of block angles.
    block_labels: tuple[tuple[float, float, float, float, str], ...] = ()


def prep_geometry(prep: Preparation) -> PrepGeometry:
    non_text = None if prep.non_text is None else ink_pyramid(prep.non_text)
    return dataclasses.replace(run_geometry(prep), ink_pyramid=ink_pyramid(prep.ink), non_text_pyramid=non_text,
                               page_segments=page_outline(prep))


def run_geometry(prep: Preparation) -> PrepGeometry:
    """What the canvas draws of the regions and MRF edges of a run's own preparation
    (engine.pipeline.for_lines): the graph's edges, region outlines and block labels; the ink,
    non-text and page area are the page's (None here: the canvas keeps its own)."""
    cut = _edge_difference(prep.delaunay_edges, prep.edges)
    edges = EdgeSegments.from_rows(segment_rows(prep.samples, prep.edges), segment_rows(prep.samples, cut))
    return PrepGeometry(edges, region_outlines(prep), block_labels=block_labels(prep))


def block_labels(prep: Preparation) -> tuple[tuple[float, float, float, float, str], ...]:
    """``(x, y, dx, dy, text)`` per block: see :attr:`PrepGeometry.block_labels`."""
    import math

    from engine.blocks import block_pitch

    out = []
    for region in prep.regions:
        pts = prep.samples[prep.sample_region == region.index]
        if len(pts) == 0:
            continue
        own = prep.initial_lines.take(np.flatnonzero(prep.initial_lines.region == region.index))
        pitch = block_pitch(own, prep.stats.h_cc)
        text = f"{math.degrees(region.phi):.0f}°" + (f", {pitch:.0f} px" if np.isfinite(pitch) else "")
        cx, cy = pts.mean(axis=0)
        out.append((float(cx), float(cy), math.cos(region.phi), math.sin(region.phi), text))
    return tuple(out)


def page_outline(prep: Preparation) -> np.ndarray:
    """The page area's outlines as segment pairs ``(S, 2, 2)`` (none when the page area is
    the whole image: nothing to show)."""
    from engine.ink import area_outlines

    area = prep.page_area
    if area is None or area.all():
        return np.zeros((0, 2, 2))
    segs = [np.stack([p, np.roll(p, -1, axis=0)], axis=1) for p in area_outlines(area)]
    return np.concatenate(segs) if segs else np.zeros((0, 2, 2))


def ink_pyramid(ink: np.ndarray) -> list[np.ndarray]:
    return image_pyramid(ink.view(np.uint8) * np.uint8(255))


def _edge_difference(all_edges: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Rows of ``all_edges`` not in ``kept`` (both (E, 2), either orientation), vectorised."""
    if len(all_edges) == 0:
        return np.zeros((0, 2), dtype=np.intp)
    a = np.sort(all_edges, axis=1).astype(np.int64)
    k = np.sort(kept, axis=1).astype(np.int64) if len(kept) else np.zeros((0, 2), np.int64)
    n = int(max(a.max(), k.max() if len(k) else 0)) + 1
    return all_edges[~np.isin(a[:, 0] * n + a[:, 1], k[:, 0] * n + k[:, 1])]


def label_overlay(labels: np.ndarray) -> list[np.ndarray]:
    """RGBA overlay of a label map (transparent background) as an image pyramid."""
    from engine.export import colour_labels

    rgb = colour_labels(labels)
    alpha = np.where(labels > 0, 255, 0).astype(np.uint8)
    return image_pyramid(np.ascontiguousarray(np.dstack([rgb, alpha])))
