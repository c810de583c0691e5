"""Blocks: groups of lines written together at one angle (a main text, a side note).

Multi-oriented pages (VML-MOC: Arabic side notes at every angle round a main text) hold
several blocks, and a line must never reach from one block into another. The regions of
stage 5 (Delaunay triangles cut at long sides, then cut where the local text angle changes:
:mod:`engine.regions`) are the blocks' outlines; each region has its own frame angle and its
own row pitch (:mod:`engine.initial_lines`). This module holds what the MRF adds to that:

- **Neighbouring lines are lines the graph links.** The unary's plateau is ``r S_l``, with
  ``S_l`` the distance to the nearest lines above and below (Koo & Cho). A region may hold
  several blocks at one angle that touch only through a third (moc_train_16: a paragraph
  over a column of short lines over another paragraph): the last line of the upper
  paragraph then found its line "below" in the lower paragraph, 2800 px away; ``S_l`` = 1433
  px, a plateau of +-430 px, and at EM's first step it took the samples of the six rows
  above it. Two rows of one block are joined by Delaunay edges (the gap between them is
  under the region threshold); lines of different blocks are not. So a line's neighbours
  are the lines whose samples share an MRF edge with its own samples
  (:func:`linked_lines`), and ``S_l`` is measured to those only
  (``Parameters.linked_neighbours``; the paper: any line above and below).
- **Block outlines, angles and pitches for the window and the JSON output**
  (:func:`block_summary`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .model import Preparation


def linked_lines(edges: np.ndarray, labels: np.ndarray, n_lines: int) -> np.ndarray:
    """``(L, L)`` bool: lines ``l != k`` joined by at least one of the MRF ``edges (E, 2)``
    (sample indices) whose ends are labelled ``l`` and ``k`` (``labels (n,)``, -1 = none)."""
    linked = np.zeros((n_lines, n_lines), bool)
    if len(edges) == 0 or n_lines == 0:
        return linked
    a, b = labels[edges[:, 0]], labels[edges[:, 1]]
    ok = (a >= 0) & (b >= 0) & (a != b)
    linked[a[ok], b[ok]] = True
    linked[b[ok], a[ok]] = True
    return linked


def block_summary(prep: Preparation) -> list[dict[str, Any]]:
    """Each region (block) of the preparation, for the JSON output and the window: index,
    frame angle (degrees, the text direction measured clockwise from the x axis, y down),
    samples, bounding box and outline (the convex hull of its samples, (x, y) pixels)."""
    from scipy.spatial import ConvexHull, QhullError

    out = []
    for region in prep.regions:
        pts = prep.samples[prep.sample_region == region.index]
        hull = None
        if len(pts) >= 3:
            try:
                hull = pts[ConvexHull(pts).vertices]
            except QhullError:
                hull = None
        if hull is None:
            x0, y0, x1, y1 = region.bbox
            hull = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], float)
        out.append({"index": int(region.index), "angle": round(math.degrees(region.phi), 2),
                    "samples": int(region.n_samples), "bbox": [int(v) for v in region.bbox],
                    "outline": np.round(hull, 1).tolist()})
    return out
