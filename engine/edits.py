"""Edits of a page's lines that change only the lines they touch (issue 24).

The window keeps each line as the engine's :class:`~engine.model.LineSet` row; every edit
here returns a new LineSet in which the rows it does not touch are the same rows, bit for
bit, in the same order. A moved or rotated line keeps what the engine knew of it (sigma_t,
sigma_s unless its length changed, prior, region, locked); a new line takes its sigma_t from
its neighbours in its region. :func:`restore_unchanged` then gives back the original row of
every line whose segment is where it was (an edit and its inverse, a rotation by +2 deg and
-2 deg), so that a no-op edit starts EM from exactly the prepared lines: byte-identical labels.

Segments are page coordinates ``(2, 2)`` ``[[x0, y0], [x1, y1]]`` (pixels, y down), as
:meth:`LineSet.segments` gives them (``c +- 2 sigma_s`` along the line). Pure NumPy: the
window calls these in its own process, with the :class:`Preparation` the engine sent it.
"""

from __future__ import annotations

import dataclasses
import weakref

import numpy as np
from scipy.spatial import cKDTree

from .initial_lines import line_floors, order_lines
from .model import LINE_FIELDS, LineSet, Preparation, to_region_frame

#: Samples near a segment's midpoint that vote for its region (as lines_from_segments).
_REGION_VOTERS = 8
#: Slope limit in the region frame: a segment drawn across the text is clamped to 80 deg.
_MAX_SLOPE = 5.67


def region_centres(prep: Preparation) -> dict[int, float]:
    """Each region's centre along its text (mean ``u`` of its samples, region frame): the
    abscissa at which lines are ordered across the text (:func:`engine.initial_lines.order_lines`)."""
    out = {}
    for r in prep.regions:
        uv = to_region_frame(prep.samples[prep.sample_region == r.index], r.phi)
        out[r.index] = float(uv[:, 0].mean()) if len(uv) else 0.0
    return out


def ordered(prep: Preparation, lines: LineSet) -> LineSet:
    """``lines`` in the order EM needs (by region, then across the text at the region's
    centre); the same object when already so ordered (a stable sort: the prepared lines,
    and lines edited without changing their order, come back untouched)."""
    if len(lines) < 2:
        return lines
    order = order_lines(lines, region_centres(prep))
    return lines if np.array_equal(order, np.arange(len(lines))) else lines.take(order)


def _check_segment(segment: np.ndarray) -> np.ndarray:
    seg = np.asarray(segment, dtype=np.float64)
    if seg.shape != (2, 2) or not np.isfinite(seg).all():
        raise ValueError(f"a segment is two finite points [[x0, y0], [x1, y1]], got {np.asarray(segment).tolist()!r}")
    return seg


def _check_index(lines: LineSet, i: int) -> int:
    i = int(i)
    if not 0 <= i < len(lines):
        raise IndexError(f"line {i} does not exist (there are {len(lines)} lines)")
    return i


_TREES: list[tuple[weakref.ref, cKDTree]] = []


def sample_tree(samples: np.ndarray) -> cKDTree:
    """The k-d tree of a preparation's samples ``(N, 2)``, built once per samples array (the
    last few kept): a file's locked lines cut into pieces place hundreds of lines, and a tree
    of 50k samples took 10 ms to build for each (ahte-train book1_page19: 5.8 of 6.6 s)."""
    for ref, tree in _TREES:
        if ref() is samples:
            return tree
    tree = cKDTree(samples)
    _TREES.insert(0, (weakref.ref(samples), tree))
    del _TREES[4:]
    return tree


def region_of(prep: Preparation, point: np.ndarray, current: int | None = None) -> int:
    """The region a line through ``point`` (x, y) belongs to: the one most of the samples
    nearest it are in; ``current`` is kept while any of them is in it (a line moved a little
    stays in its region)."""
    if len(prep.samples) == 0 or not prep.regions:
        if current is not None:
            return int(current)
        raise ValueError("the page has no text region to put a line in")
    k = min(_REGION_VOTERS, len(prep.samples))
    _, idx = sample_tree(prep.samples).query(np.asarray(point, np.float64)[None], k=k)
    votes = prep.sample_region[np.asarray(idx).reshape(-1)]
    if current is not None and np.any(votes == current):
        return int(current)
    return int(np.bincount(votes).argmax())


def segment_geometry(segment: np.ndarray, phi: float, rotation_invariant: bool
                     ) -> tuple[float, float, float, float]:
    """``(a, b, c, length)`` of the line along ``segment`` (page, ``(2, 2)``) in the frame of
    angle ``phi``: ``v = a u + b``, ``c`` the segment's centre along the line, ``length``
    its extent along the line (pixels; ``4 sigma_s`` spans it)."""
    uv = to_region_frame(np.asarray(segment, np.float64), phi)
    du, dv = uv[1] - uv[0]
    du = du if abs(du) >= 1e-6 else 1e-6
    a = float(np.clip(dv / du, -_MAX_SLOPE, _MAX_SLOPE))
    centre = uv.mean(axis=0)
    b = float(centre[1] - a * centre[0])
    if rotation_invariant:
        c = float((centre[0] + a * centre[1]) / np.sqrt(1.0 + a * a))
        length = float(np.hypot(du, dv))
    else:
        c, length = float(centre[0]), float(abs(du))
    return a, b, c, length


def _row(lines: LineSet, i: int) -> dict:
    return {name: getattr(lines, name)[i] for name in LINE_FIELDS}


def _with_rows(lines: LineSet, rows: list[dict]) -> LineSet:
    # A row without a chain (a new line) is a line of its own (-1), not chain 0.
    cols = {name: np.array([r.get(name, -1 if name == "chain" else False) for r in rows]) if rows
            else np.zeros(0) for name in LINE_FIELDS}
    return LineSet(cols["a"], cols["b"], cols["c"], cols["sigma_t"], cols["sigma_s"], cols["prior"],
                   cols["region"].astype(np.int32), cols["phi"], lines.rotation_invariant,
                   cols["locked"].astype(bool), cols["anchored"].astype(bool), cols["chain"].astype(np.int32),
                   cols["sigma_t_measured"].astype(bool))


def _rows(lines: LineSet) -> list[dict]:
    return [_row(lines, i) for i in range(len(lines))]


def given_sigma_s(prep: Preparation, length: float) -> float:
    """sigma_s (pixels) of a line the user or a file gives ``length`` pixels long: a quarter
    of it (its ends at c +- 2 sigma_s). They say how long the line is: no floor in ``W_cc``
    (the M-step's, for lines fitted to ink), only the sigma_t floor, so that a line of one
    point still has an extent and one over a word or two is not stretched to a ``W_cc``
    either side of its middle."""
    return max(length / 4.0, line_floors(prep.stats, prep.params)[0])


def _placed(prep: Preparation, lines: LineSet, row: dict, segment: np.ndarray, region: int) -> dict:
    """``row`` moved onto ``segment`` in ``region``: a, b, c (and phi) from the segment;
    sigma_s from its length (:func:`given_sigma_s`) unless that is the row's own (4 sigma_s,
    to 0.01 px). Its sigma_t is kept but no longer counts as measured on its ink
    (``LineSet.sigma_t_measured``): that ink was where the line was."""
    phi = float(prep.regions[region].phi) if prep.regions else float(row["phi"])
    a, b, c, length = segment_geometry(segment, phi, lines.rotation_invariant)
    out = dict(row, a=a, b=b, c=c, region=region, phi=phi, sigma_t_measured=False)
    if abs(length - 4.0 * float(row["sigma_s"])) > 0.01:
        out["sigma_s"] = given_sigma_s(prep, length)
    return out


def _angle_off(segment: np.ndarray, phi: float) -> float:
    """Degrees (0-90) between ``segment``'s direction (page, ``(2, 2)``) and a frame's axis at
    angle ``phi`` (radians, the region frame's convention)."""
    u = to_region_frame(np.asarray(segment, np.float64), phi)
    du, dv = u[1] - u[0]
    return float(np.degrees(np.arctan2(abs(dv), abs(du))))


def move_line(prep: Preparation, lines: LineSet, i: int, segment: np.ndarray) -> LineSet:
    """Line ``i`` now runs along ``segment``; it keeps its sigma_t, prior, locked flag, its
    sigma_s unless the segment's length differs from its own ``4 sigma_s`` (then
    ``length / 4``), and its region unless the segment now lies in another (then that
    region's frame). Every other row is untouched, in the same order."""
    i = _check_index(lines, i)
    seg = _check_segment(segment)
    rows = _rows(lines)
    current = int(lines.region[i])
    region = region_of(prep, seg.mean(axis=0), current)
    if region != current and prep.regions:
        # A frame more than 45 degrees off the segment reads it across the text (its slope is
        # clipped, its extent taken along the wrong axis): the line keeps its own frame unless
        # the new one suits it at least as well (a line at a block's edge, whose samples the
        # block boundaries gave to a steep neighbour, is not moved into it by a nudge).
        off_new = _angle_off(seg, float(prep.regions[region].phi))
        if off_new > 45.0 and off_new > _angle_off(seg, float(prep.regions[current].phi)):
            region = current
    rows[i] = _placed(prep, lines, rows[i], seg, region)
    return _with_rows(lines, rows)


def neighbour_sigma_t(prep: Preparation, lines: LineSet, region: int, segment: np.ndarray) -> float:
    """sigma_t for a new line along ``segment`` in ``region``: the mean sigma_t of the lines
    just above and below it there (nearest across its midpoint), else ``H_cc / 2``."""
    own = np.flatnonzero(lines.region == region)
    floor_t = line_floors(prep.stats, prep.params)[0]
    if len(own) == 0:
        return max(prep.stats.h_cc / 2.0, floor_t)
    phi = float(prep.regions[region].phi)
    mid = to_region_frame(np.asarray(segment, np.float64).mean(axis=0), phi)
    across = lines.a[own] * mid[0] + lines.b[own] - mid[1]  # > 0: the line lies below
    near = []
    for side in (across <= 0, across > 0):
        if side.any():
            near.append(own[side][np.argmin(np.abs(across[side]))])
    return max(float(np.mean(lines.sigma_t[near])), floor_t)


def add_line(prep: Preparation, lines: LineSet, segment: np.ndarray, locked: bool = False) -> LineSet:
    """A new line along ``segment``, appended as the last row: its region is the one the
    samples near it are in, sigma_t from its neighbours there (:func:`neighbour_sigma_t`),
    sigma_s from the segment's length, prior the mean of its region's lines' (1 alone)."""
    seg = _check_segment(segment)
    region = region_of(prep, seg.mean(axis=0))
    own = lines.region == region
    prior = float(lines.prior[own].mean()) if own.any() else 1.0
    row = {"a": 0.0, "b": 0.0, "c": 0.0, "sigma_t": neighbour_sigma_t(prep, lines, region, seg),
           "sigma_s": -1.0, "prior": prior, "region": region, "phi": 0.0, "locked": bool(locked)}
    return _with_rows(lines, [*_rows(lines), _placed(prep, lines, row, seg, region)])


def delete_lines(lines: LineSet, index: int | np.ndarray | list[int]) -> LineSet:
    """``lines`` without the rows ``index`` (one index, indices or a boolean mask)."""
    drop = np.zeros(len(lines), bool)
    idx = np.asarray(index)
    if idx.dtype == bool:
        if idx.shape != (len(lines),):
            raise IndexError(f"a mask of {idx.shape} for {len(lines)} lines")
        drop = idx
    else:
        for i in np.atleast_1d(idx):
            drop[_check_index(lines, int(i))] = True
    return lines.take(np.flatnonzero(~drop))


def split_line(prep: Preparation, lines: LineSet, i: int, point: np.ndarray) -> LineSet:
    """Line ``i`` cut in two at ``point`` (x, y; projected on the line): rows ``i`` and
    ``i + 1`` become its two parts, each with its sigma_t, region, locked flag and half its prior."""
    i = _check_index(lines, i)
    seg = lines.take([i]).segments()[0]
    d = seg[1] - seg[0]
    t = float(np.clip(np.dot(np.asarray(point, np.float64) - seg[0], d) / max(np.dot(d, d), 1e-12), 0.0, 1.0))
    if not 0.0 < t < 1.0:
        raise ValueError("the split point lies beyond the line's ends")
    cut = seg[0] + t * d
    rows = _rows(lines)
    # Each part is a line of its own: a piece of a file's curved line (``chain``) cut in two
    # says the text line ends there, so neither part stays joined to the other pieces.
    half = dict(rows[i], prior=float(rows[i]["prior"]) / 2.0, chain=-1)
    region = int(lines.region[i])
    parts = [_placed(prep, lines, dict(half, sigma_s=-1.0), np.array([seg[0], cut]), region),
             _placed(prep, lines, dict(half, sigma_s=-1.0), np.array([cut, seg[1]]), region)]
    return _with_rows(lines, rows[:i] + parts + rows[i + 1:])


def principal_segment(segs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The segment ``(2, 2)`` through segments ``(S, 2, 2)`` (page points): along the
    principal axis of their end points, each weighted by its segment's length, over the end
    points' projections; and that axis (unit ``(2,)``, its sign arbitrary)."""
    length = np.hypot(*(segs[:, 1] - segs[:, 0]).T)
    pts = segs.reshape(-1, 2)
    w = np.repeat(np.maximum(length, 1e-9), 2)
    centre = (pts * w[:, None]).sum(axis=0) / w.sum()
    cov = ((pts - centre) * w[:, None]).T @ (pts - centre) / w.sum()
    axis = np.linalg.eigh(cov)[1][:, -1]
    t = (pts - centre) @ axis
    return np.array([centre + t.min() * axis, centre + t.max() * axis]), axis


def merge_lines(prep: Preparation, lines: LineSet, i: int, j: int) -> LineSet:
    """Lines ``i`` and ``j`` made one, at row ``min(i, j)``: the line through both (the
    principal axis of their four end points, weighted by length) over both extents, with the
    length-weighted mean sigma_t, the sum of the priors, the region of the longer, locked when
    either was."""
    i, j = _check_index(lines, i), _check_index(lines, j)
    if i == j:
        raise ValueError("a line cannot be merged with itself")
    segs = lines.take([i, j]).segments()
    length = np.hypot(*(segs[:, 1] - segs[:, 0]).T)
    merged, _ = principal_segment(segs)
    longer = i if length[0] >= length[1] else j
    rows = _rows(lines)
    row = dict(rows[longer], sigma_t=float(np.average(lines.sigma_t[[i, j]], weights=np.maximum(length, 1e-9))),
               prior=float(lines.prior[i] + lines.prior[j]), locked=bool(lines.locked[i] or lines.locked[j]),
               sigma_s=-1.0, chain=int(lines.chain[i]) if lines.chain[i] == lines.chain[j] else -1)
    keep_at, drop = min(i, j), max(i, j)
    rows[keep_at] = _placed(prep, lines, row, merged, int(lines.region[longer]))
    del rows[drop]
    return _with_rows(lines, rows)


def set_locked(lines: LineSet, index: int | np.ndarray | list[int], locked: bool) -> LineSet:
    """``lines`` with the rows ``index`` (indices or a mask) locked or unlocked."""
    flags = lines.locked.copy()
    idx = np.asarray(index)
    if idx.dtype != bool:
        for i in np.atleast_1d(idx):
            _check_index(lines, int(i))
    flags[idx] = bool(locked)
    return dataclasses.replace(lines, locked=flags)


def restore_unchanged(original: LineSet, edited: LineSet, tol_px: float = 0.01) -> LineSet:
    """``edited`` with every row whose segment (both end points within ``tol_px`` pixels)
    and locked flag match a row of ``original`` replaced by that original row, bit for bit
    (each original row used once; the same index first). An edit and its inverse thus give
    back exactly the original lines, and EM from them exactly the original labels."""
    if len(original) == 0 or len(edited) == 0:
        return edited
    seg_o = original.segments().reshape(len(original), 4)
    seg_e = edited.segments().reshape(len(edited), 4)
    close = np.abs(seg_e[:, None, :] - seg_o[None, :, :]).max(axis=2) <= tol_px  # (E, O)
    close &= edited.locked[:, None] == original.locked[None, :]
    close &= edited.anchored[:, None] == original.anchored[None, :]
    used = np.zeros(len(original), bool)
    take = np.full(len(edited), -1, np.int64)
    for e in range(len(edited)):  # rows of one page: a few dozen
        cand = np.flatnonzero(close[e] & ~used)
        if len(cand):
            o = e if e in cand else int(cand[np.argmin(np.abs(seg_e[e] - seg_o[cand]).max(axis=1))])
            take[e], used[o] = o, True
    if not (take >= 0).any():
        return edited
    rows = _rows(edited)
    for e in np.flatnonzero(take >= 0):
        rows[e] = _row(original, int(take[e]))
    out = _with_rows(edited, rows)
    return original if lines_equal(out, original) else out


def lines_equal(a: LineSet, b: LineSet) -> bool:
    """Whether ``a`` and ``b`` hold the same rows, bit for bit, in the same order (and read
    the along-text coordinate the same way)."""
    if len(a) != len(b) or a.rotation_invariant != b.rotation_invariant:
        return False
    # Bytes, not values: -0.0 and 0.0, or two NaNs, are not the same row.
    return all(getattr(a, n).tobytes() == getattr(b, n).tobytes() for n in LINE_FIELDS)


def lock_changed(original: LineSet, lines: LineSet) -> LineSet:
    """``lines`` with every row that is not, bit for bit, a row of ``original`` locked: the
    lines the user drew or moved (after :func:`restore_unchanged`, so an edit undone stays
    an unlocked original row). Issue 24's steering study locks such lines by default: from
    the ground truth's lines, free EM drifts off them, locked they hold."""
    if len(lines) == 0:
        return lines
    known = {tuple(getattr(original, n)[i].tobytes() for n in LINE_FIELDS) for i in range(len(original))}
    changed = np.array([tuple(getattr(lines, n)[i].tobytes() for n in LINE_FIELDS) not in known
                        for i in range(len(lines))])
    if not (changed & ~lines.locked).any():
        return lines
    return set_locked(lines, changed, True)

