"""Stage 5: text regions by removing long-sided Delaunay triangles (Xiao & Yan 2003).

Triangles whose longest side exceeds ``region_threshold`` x H_cc bridge the blank space
between text blocks; the samples still joined by the remaining triangles form a region.
Regions too small to hold a line join their nearest larger region. MRF edges never cross
regions, so each region's labels are its own lines."""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from .graph import triangle_edges
from .model import ComponentStats
from .params import Parameters


def region_threshold(stats: ComponentStats, params: Parameters) -> float:
    """Longest triangle side (pixels) allowed inside a region."""
    return params.region_threshold * max(stats.h_cc, 1.0)


def find_regions(samples: np.ndarray, triangles: np.ndarray, stats: ComponentStats,
                 params: Parameters) -> tuple[np.ndarray, np.ndarray]:
    """Region index of every sample ``(N,)`` (0..R-1, regions ordered by their top-left
    sample) and the MRF edges ``(E, 2)``: Delaunay edges of kept triangles inside one region."""
    n = len(samples)
    if n == 0:
        return np.zeros(0, np.int32), np.zeros((0, 2), np.int32)
    limit = region_threshold(stats, params)
    if len(triangles):
        p = samples[triangles]  # (T, 3, 2)
        sides = np.linalg.norm(p - np.roll(p, -1, axis=1), axis=2)
        kept = triangles[sides.max(axis=1) <= limit]
    else:
        kept = triangles
    edges = triangle_edges(kept)
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    _, label = connected_components(graph, directed=False)
    sizes = np.bincount(label)
    big = sizes[label] >= params.min_region_samples
    if not big.any():
        label[:] = 0
    elif not big.all():
        # Small regions (a lone diacritic, a speck of a stamp) join the nearest large region.
        tree = cKDTree(samples[big])
        _, nearest = tree.query(samples[~big])
        label[~big] = label[big][nearest]
    # Renumber regions 0..R-1 in raster order of their first sample (samples are in raster order).
    _, first, inverse = np.unique(label, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    region = rank[inverse].astype(np.int32)
    same = region[edges[:, 0]] == region[edges[:, 1]]
    return region, edges[same]
