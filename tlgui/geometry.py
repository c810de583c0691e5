"""What the canvas draws, computed from engine data with NumPy/OpenCV only (no Qt).

These run in the engine process (see :mod:`tlgui.engine_process`) or in worker threads, never
in the GUI thread: image pyramids for the page and overlays, the x/y arrays of the graph's
edges, the region outlines, the colour overlay of the final labels.
"""

from __future__ import annotations

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


def pairs_xy(points: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x and y arrays of ``edges`` (E, 2) between ``points`` (N, 2), for connect='pairs'."""
    ends = points[edges.reshape(-1)]
    return np.ascontiguousarray(ends[:, 0]), np.ascontiguousarray(ends[:, 1])


def region_outlines(prep: Preparation) -> np.ndarray:
    """Convex hull of each region's samples as segment pairs ``(S, 2, 2)``."""
    from scipy.spatial import ConvexHull, QhullError

    segs = []
    for region in prep.regions:
        pts = prep.samples[prep.sample_region == region.index]
        if len(pts) >= 3:
            try:
                hull = pts[ConvexHull(pts).vertices]
            except QhullError:
                hull = None
        else:
            hull = None
        if hull is None:  # degenerate region: its bounding box
            x0, y0, x1, y1 = region.bbox
            hull = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=float)
        segs.append(np.stack([hull, np.roll(hull, -1, axis=0)], axis=1))
    return np.concatenate(segs) if segs else np.zeros((0, 2, 2))


@dataclass(frozen=True)
class PrepGeometry:
    """What the canvas draws of a preparation, computed once in the worker thread (numpy only):
    x/y of every MRF edge and of the Delaunay edges cut between regions (connect='pairs'),
    and the region outlines as segments."""

    edge_xy: tuple[np.ndarray, np.ndarray]
    cut_xy: tuple[np.ndarray, np.ndarray]
    region_segments: np.ndarray
    #: The ink mask as uint8 0/255, as an image pyramid (the ink layer shows it).
    ink_pyramid: list[np.ndarray] | None = None


def prep_geometry(prep: Preparation) -> PrepGeometry:
    cut = _edge_difference(prep.delaunay_edges, prep.edges)
    return PrepGeometry(pairs_xy(prep.samples, prep.edges), pairs_xy(prep.samples, cut), region_outlines(prep),
                        ink_pyramid(prep.ink))


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
