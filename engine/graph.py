"""Stage 4: the Delaunay graph of the samples."""

from __future__ import annotations

import numpy as np
from scipy.spatial import Delaunay, QhullError


def delaunay_triangles(samples: np.ndarray) -> np.ndarray:
    """Delaunay triangles ``(T, 3)`` int32 of points ``(N, 2)``; empty when degenerate."""
    if len(samples) < 3:
        return np.zeros((0, 3), np.int32)
    try:
        return Delaunay(samples).simplices.astype(np.int32)
    except QhullError:  # all points collinear: no triangle, no graph
        return np.zeros((0, 3), np.int32)


def triangle_edges(triangles: np.ndarray) -> np.ndarray:
    """Unique undirected edges ``(E, 2)`` int32, ``i < j``, sorted, of triangles ``(T, 3)``."""
    if len(triangles) == 0:
        return np.zeros((0, 2), np.int32)
    pairs = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]).astype(np.int64)
    pairs.sort(axis=1)
    # Unique on one int64 key per edge: np.unique(axis=0) sorts rows as void records, several
    # times slower, and holds the GIL long enough to stall the GUI thread (0.3-0.6 s).
    n = int(pairs.max()) + 1
    keys = np.unique(pairs[:, 0] * n + pairs[:, 1])
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
    round_ = 0
    while True:
        open_ = colour < 0
        if not open_.any():
            return colour
        live = open_[i] & open_[j]
        beaten = np.zeros(n_vertices, bool)
        lose_i = live & (priority[i] < priority[j])
        lose_j = live & (priority[j] < priority[i])
        beaten[i[lose_i]] = True
        beaten[j[lose_j]] = True
        colour[open_ & ~beaten] = round_
        round_ += 1
