"""Small array helpers shared by the stages."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-D array, ascending: ``np.unique(values)``.

    NumPy 2.4's ``np.unique`` hashes integers before sorting them, 30 times slower than a
    sort and a comparison on the few hundred thousand int64 keys of a page's Delaunay edges
    (139 vs 4 ms)."""
    s = np.sort(np.asarray(values).ravel())
    if len(s) == 0:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def nonzero_index(image: np.ndarray) -> np.ndarray:
    """Flat indices (raster order) of the non-zero pixels of an array, int64 ``(n,)``:
    ``np.flatnonzero(image)``.

    NumPy's scan of a boolean mask is fast; on integer labels it is several times slower than
    comparing with 0 first (11 Mpx, 1 M ink pixels: 9 ms against 34; OpenCV's findNonZero
    and the index arithmetic after it: 15-33 ms)."""
    image = np.asarray(image)
    return np.flatnonzero(image if image.dtype == bool else image != 0)


def first_argmax(rows: Iterable[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``n`` columns, the index of the first of ``rows`` (1-D ``(n,)`` arrays
    without NaNs) holding its largest value, as ``np.argmax(np.stack(rows), axis=0)`` gives,
    and that value; a row at a time, so that the rows are never stacked (they may be made
    one by one) and no pass walks across a stacked array's columns."""
    best = np.zeros(n, np.intp)
    top = None
    for i, row in enumerate(rows):
        if top is None:
            top = np.array(row, copy=True)
            continue
        above = row > top
        best[above] = i
        np.maximum(top, row, out=top)
    return best, top if top is not None else np.full(n, -np.inf)


def angle_difference(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """Signed difference ``a - b`` of orientations (degrees, period 180) in [-90, 90)."""
    return (np.asarray(a, np.float64) - b + 90.0) % 180.0 - 90.0


def angle_gap(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """Difference of orientations (degrees, period 180) in [0, 90]: how far two lines' directions
    are apart, whichever way each one points."""
    return np.abs(angle_difference(a, b))


def principal_axis(sxx: np.ndarray | float, sxy: np.ndarray | float, syy: np.ndarray | float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The principal axes of second central moments (or covariances) ``sxx, sxy, syy`` of
    points ``(x, y)``: the major axis's direction (radians in [-pi/2, pi/2], measured from x
    towards y, so clockwise on a page with y down) and the variances along it and across it
    (``major >= minor``; the eigenvalues of ``[[sxx, sxy], [sxy, syy]]``)."""
    sxx, sxy, syy = (np.asarray(m, np.float64) for m in (sxx, sxy, syy))
    angle = 0.5 * np.arctan2(2.0 * sxy, sxx - syy)
    half_trace = (sxx + syy) / 2.0
    root = np.sqrt(np.maximum(half_trace**2 - (sxx * syy - sxy**2), 0.0))
    return angle, half_trace + root, half_trace - root
