"""Stage 4: the Delaunay graph of the samples."""

from __future__ import annotations

import cv2
import numpy as np
from scipy.spatial import Delaunay, QhullError

from .arrays import sorted_unique


def delaunay_triangles(samples: np.ndarray) -> np.ndarray:
    """Delaunay triangles ``(T, 3)`` int32 of points ``(N, 2)``; empty when degenerate.

    Points on the pixel grid (the samples) go through OpenCV's incremental Delaunay, about
    four times faster than Qhull here (85 vs 350 ms at 48k samples); other points, and any
    input OpenCV's path cannot map back exactly, go through Qhull. Where four points are
    cocircular the two give different, equally valid, triangulations."""
    pts = np.asarray(samples, dtype=np.float64)
    if len(pts) < 3:
        return np.zeros((0, 3), np.int32)
    if _on_pixel_grid(pts):
        tri = _grid_delaunay(pts)
        if tri is not None:
            return tri
    try:
        return Delaunay(pts).simplices.astype(np.int32)
    except QhullError:  # all points collinear: no triangle, no graph
        return np.zeros((0, 3), np.int32)


# Integer coordinates up to this size are exact in float32, OpenCV's point type.
_GRID_LIMIT = 1 << 22
# The outer triangle OpenCV's subdivision starts from is built on its rectangle; with a
# rectangle only as big as the points, triangles near the convex hull whose circumcircle
# reaches that outer triangle are lost. A margin of 100 extents keeps every hull triangle.
_GRID_MARGIN = 100


def _on_pixel_grid(pts: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(pts)) and np.all(pts == np.round(pts))
                and np.abs(pts).max() < _GRID_LIMIT)


def _grid_delaunay(pts: np.ndarray) -> np.ndarray | None:
    """Delaunay triangles of distinct integer points by OpenCV, as indices into ``pts``;
    None when the points are not distinct (the caller falls back to Qhull)."""
    lo = pts.min(axis=0)
    local = (pts - lo).astype(np.int64)
    width = int(local[:, 0].max()) + 1
    keys = local[:, 1] * width + local[:, 0]
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if np.any(sorted_keys[1:] == sorted_keys[:-1]):
        return None
    extent = int(local.max()) + 1
    margin = _GRID_MARGIN * extent
    subdiv = cv2.Subdiv2D((-margin, -margin, extent + 2 * margin, extent + 2 * margin))
    # OpenCV locates each new point by walking from the last one inserted: in Z order the
    # walks are short (86 -> 52 ms at 48k samples, against raster order's jump back across
    # the page at every row).
    subdiv.insert(local[np.argsort(z_order(local), kind="stable")].astype(np.float32))
    # Triangles with a virtual (outer) vertex are left out; none at all comes back as ().
    corners = np.asarray(subdiv.getTriangleList(), np.float32).reshape(-1, 3, 2)
    if len(corners) == 0:
        return np.zeros((0, 3), np.int32)
    xy = np.rint(corners).astype(np.int64)
    inside = np.all((xy >= 0) & (xy < [width, int(local[:, 1].max()) + 1]), axis=(1, 2))
    tk = xy[..., 1] * width + xy[..., 0]
    pos = np.clip(np.searchsorted(sorted_keys, tk), 0, len(sorted_keys) - 1)
    found = inside & np.all(sorted_keys[pos] == tk, axis=1)
    tri = order[pos[found]]
    # Collinear runs can leave zero-area triangles; they are no triangle at all.
    p = pts[tri]
    area = ((p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1])
            - (p[:, 1, 1] - p[:, 0, 1]) * (p[:, 2, 0] - p[:, 0, 0]))
    return tri[area != 0].astype(np.int32)


def z_order(xy: np.ndarray) -> np.ndarray:
    """Morton code ``(n,)`` int64 of points ``(n, 2)`` (their integer parts, relative to their
    minimum, below 2**31): the bits of x and y interleaved; nearby points get nearby codes."""
    code = np.zeros(len(xy), np.int64)
    if len(xy) == 0:
        return code
    xy = np.asarray(xy)
    xy = (xy - xy.min(axis=0)).astype(np.int64)
    x, y = xy[:, 0], xy[:, 1]
    for bit in range(max(int(xy.max()).bit_length(), 1)):
        code |= ((x >> bit) & 1) << (2 * bit)
        code |= ((y >> bit) & 1) << (2 * bit + 1)
    return code


def triangle_edges(triangles: np.ndarray) -> np.ndarray:
    """Unique undirected edges ``(E, 2)`` int32, ``i < j``, sorted, of triangles ``(T, 3)``."""
    if len(triangles) == 0:
        return np.zeros((0, 2), np.int32)
    pairs = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]).astype(np.int64)
    pairs.sort(axis=1)
    # Unique on one int64 key per edge: np.unique(axis=0) sorts rows as void records, several
    # times slower, and holds the GIL long enough to stall the GUI thread (0.3-0.6 s).
    n = int(pairs.max()) + 1
    keys = sorted_unique(pairs[:, 0] * n + pairs[:, 1])
    return np.stack([keys // n, keys % n], axis=1).astype(np.int32)


def delaunay_edges(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Triangles ``(T, 3)`` and unique edges ``(E, 2)`` of the samples' Delaunay graph."""
    tri = delaunay_triangles(samples)
    return tri, triangle_edges(tri)


def colour_classes(n_vertices: int, edges: np.ndarray, seed: int = 0) -> np.ndarray:
    """A proper vertex colouring ``(N,)`` int32: no edge joins two vertices of one colour.

    Vectorised Jones-Plassmann rounds: each round colours the uncoloured vertices whose
    random priority beats every uncoloured neighbour (an independent set). Updating one
    colour class at a time in a vectorised sweep equals a sequential sweep."""
    colour = np.full(n_vertices, -1, np.int32)
    if len(edges) == 0:
        colour[:] = 0
        return colour
    priority = np.random.default_rng(seed).permutation(n_vertices)
    i, j = edges[:, 0], edges[:, 1]
    # An edge's loser (its end of lower priority) is fixed; an edge stops mattering once
    # either end is coloured, and such edges are dropped when they are half of those kept.
    loser = np.where(priority[i] < priority[j], i, j)
    round_ = 0
    while True:
        open_ = colour < 0
        if not open_.any():
            return colour
        live = open_[i] & open_[j]
        if 2 * np.count_nonzero(live) < len(live):
            i, j, loser = i[live], j[live], loser[live]
            live = np.ones(len(i), bool)
        beaten = np.zeros(n_vertices, bool)
        beaten[loser[live]] = True
        colour[open_ & ~beaten] = round_
        round_ += 1
