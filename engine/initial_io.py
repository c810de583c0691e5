"""Initial lines from a file (issue 24): ``tlseg segment --initial-lines FILE``, the window's
*File > Load initial lines*.

FILE is one of

* tlseg's own JSON (``<stem>.json``): the lines its run started from (``initial_lines``,
  with their ``locked`` flags), else, from an older JSON, its final ``lines``. When the
  lines' regions and frames are this preparation's (the same page, parameters and seed)
  the rows are taken bit for bit, so re-running reproduces that run's labels byte for byte;
  otherwise each row's segment is placed on this page as a new line (its sigma_t kept).
* PAGE XML (``TextLine/Baseline``, ``TextLine/Coords``) or ALTO XML (``TextLine@BASELINE``,
  ``TextLine/Shape/Polygon``, else the line's box): each line's baseline moved to the
  line's centre, or without a baseline its polygon's axis (see :func:`baseline_to_centre`
  and :func:`pixel_axes`). A PAGE ``TextLine`` whose ``custom`` attribute holds
  ``tlseg {locked:true;}`` is locked.
* a label image (8/16-bit grey, value = line id) or ICDAR ``.dat``: each label's axis.

From the last three, unless a line is locked, rows of the page's own period beyond the
file's first and last lines get a line too (:func:`fill_missing_rows`): another tool's file
often annotates the text and not the signature, date or stamps below it.
The lines the last three give, unless locked, are anchored (``LineSet.anchored``): EM
refines each within the row the file put it on and over the extent the file gave it
(``Parameters.anchor_reach``, ``anchor_sigma_t``, ``anchor_gap``, ``anchor_extent``;
:func:`engine.em.keep_anchored`), and stage 8 keeps every one of them (``anchor_keep``)
where EM left it (``anchor_place``).

The engine's line model is the regression line through the middle of a text line's ink
(``v = a u + b`` fitted to the samples, ``sigma_t`` their spread across it), not its
baseline: a baseline lies ``~H_cc / 2`` below that centre, and EM started there, or a line
locked there, would hold the lower half of its row and the upper half of the next's.

Every error is an :class:`InitialLinesError` whose one sentence names the file; nothing is
returned half-read.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from pathlib import Path

import numpy as np
from lxml import etree

from . import edits
from . import row_fill as _row_fill
from .groundtruth import (
    _ALTO_NS,
    _PAGE_NS,
    GroundTruthError,
    _attr_size,
    _parse_points,
    rasterise,
    read_label_map,
)
from .initial_lines import line_floors
from .io import exif_orientation, orient_like_exif
from .model import LineSet, Preparation
from .regression import fit_from_moments

#: Fewest ink pixels of a line for its own axis and spread to be measured from them (and of
#: a label for it to be a line at all).
MIN_LINE_PIXELS = 10
_LOCKED = re.compile(r"tlseg\s*\{[^}]*locked\s*:\s*true", re.IGNORECASE)


class InitialLinesError(ValueError):
    """Initial lines that cannot be read; the message names the file."""


def _fail(path: str | os.PathLike, reason: str) -> InitialLinesError:
    return InitialLinesError(f"cannot read initial lines from '{os.fspath(path)}': {reason}")


def read_initial_lines(path: str | os.PathLike, prep: Preparation, lock: bool = False) -> LineSet:
    """The lines of ``path`` (see the module docstring) on the page of ``prep``, ordered as
    EM needs them; ``lock``: lock every line (else only those the file marks locked).
    Raises :class:`InitialLinesError` on any bad input."""
    p = Path(path)
    if not p.is_file():
        raise _fail(path, "no such file" if not p.exists() else "not a regular file")
    if len(prep.samples) == 0 or not prep.regions:
        raise _fail(path, "the page has no ink to place lines on")
    try:
        with open(p, "rb") as fh:
            head = fh.read(256).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as exc:
        raise _fail(path, exc.strerror or str(exc)) from None
    try:
        from_json = p.suffix.lower() == ".json" or head.startswith((b"{", b"["))
        if from_json:
            lines = _from_json(p, prep)
        elif head.startswith(b"<"):
            lines = _from_xml(p, prep, lock)
        else:
            lines = _from_labels(p, prep, lock)
    except InitialLinesError:
        raise
    except GroundTruthError as exc:
        raise _fail(path, str(exc).split("': ", 1)[-1]) from None
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
        raise _fail(path, f"{type(exc).__name__}: {exc}") from None
    if len(lines) == 0:
        raise _fail(path, "it holds no text line")
    if lock:
        lines = edits.set_locked(lines, np.ones(len(lines), bool), True)
    elif not from_json:
        # Another tool's lines, left free: EM refines them within the rows the file puts them
        # on (Parameters.anchor_reach); the rows filled for ink the file leaves out are EM's own.
        lines = fill_missing_rows(prep, dataclasses.replace(lines, anchored=~lines.locked))
    return edits.ordered(prep, lines)


def fill_missing_rows(prep: Preparation, lines: LineSet) -> LineSet:
    """``lines`` read from another tool's file, with a line for every row of a region's own
    period beyond the first and last of them that they leave out (:func:`engine.row_fill.fill_rows`,
    reach ``file_row_fill``): a signature, a date or a stamp's words that the file does not annotate.
    Without a line of their own EM gives that ink to the nearest given line, which leaves its
    row (poilus AN_0023-0: the last annotated row's line went 1260 px down to the signature in
    one iteration, sigma_t 346 px). Nothing is added when a line is locked (locked, the given
    lines scored higher without the added ones: docs/history.md) or with ``file_row_fill`` 0."""
    params = prep.params
    if params.file_row_fill <= 0 or lines.locked.any():
        return lines
    filled, _ = _row_fill.fill_rows(prep.samples, prep.sample_region, lines, prep.regions, prep.row_pitch,
                                    params.file_row_fill, prep.stats, params, prep.sample_heights())
    return filled


# ----------------------------------------------------------------------------- placing lines


def lines_from_page_segments(prep: Preparation, segments: np.ndarray, sigma_t: np.ndarray,
                             locked: np.ndarray, anchored: np.ndarray | None = None,
                             chain: np.ndarray | None = None, measured: np.ndarray | None = None) -> LineSet:
    """Lines along page segments ``(L, 2, 2)``: each in the region most samples near its
    midpoint are in, with ``sigma_t`` ``(L,)`` (NaN: ``H_cc / 2``), ``sigma_s`` a quarter of
    the segment's length (so :meth:`LineSet.segments` gives the segment back), prior
    ``1 / (lines in its region)``, and ``locked``, ``anchored`` and ``chain`` ``(L,)`` (None:
    none anchored, each line its own); ``measured`` ``(L,)``: whether each ``sigma_t`` was
    measured on the line's own ink (``LineSet.sigma_t_measured``; None: where it is finite).

    ``sigma_s`` has no floor in ``W_cc`` (the M-step's, for lines fitted to ink): the file
    or the user says how long the line is. Floored at ``W_cc``, a short line (a page number,
    an interlinear insertion of a word or two) reached a ``W_cc`` either side of its middle
    at least, and its anchor took those ends as the file's: on cremma20 10_c71ca, whose
    crossings-out make ``W_cc`` 351 px, a 160 px page number took 27k pixels of the two rows
    below it. Only the sigma_t floor (``sigma_t_floor x H_cc``) remains, so that a line of
    one point still has an extent (:func:`engine.edits.given_sigma_s`)."""
    rot_inv = prep.params.regression == "rotation_invariant"
    segments = np.asarray(segments, np.float64).reshape(-1, 2, 2)
    floor_t = line_floors(prep.stats, prep.params)[0]
    rows = {k: [] for k in ("a", "b", "c", "sigma_t", "sigma_s", "region", "phi")}
    sigma_t = np.asarray(sigma_t, np.float64)
    measured = np.isfinite(sigma_t) if measured is None else np.asarray(measured, bool)
    for seg, st in zip(segments, sigma_t, strict=True):
        region = edits.region_of(prep, seg.mean(axis=0))
        phi = float(prep.regions[region].phi)
        a, b, c, length = edits.segment_geometry(seg, phi, rot_inv)
        for k, v in zip(("a", "b", "c", "region", "phi"), (a, b, c, region, phi), strict=True):
            rows[k].append(v)
        rows["sigma_s"].append(edits.given_sigma_s(prep, length))
        rows["sigma_t"].append(max(st if np.isfinite(st) else prep.stats.h_cc / 2.0, floor_t))
    region = np.array(rows["region"], np.int32)
    counts = np.bincount(region, minlength=len(prep.regions)).astype(float)
    return LineSet(np.array(rows["a"]), np.array(rows["b"]), np.array(rows["c"]), np.array(rows["sigma_t"]),
                   np.array(rows["sigma_s"]), 1.0 / counts[region] if len(region) else np.zeros(0), region,
                   np.array(rows["phi"]), rot_inv, np.asarray(locked, bool), anchored, chain, measured)


def pixel_axes(labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each label ``1..n``'s centroid ``(n, 2)`` [x, y], second moments ``(n, 3)`` [Sxx, Sxy,
    Syy] about it (pixels squared) and pixel count ``(n,)`` in ``labels`` ``(H, W)``."""
    flat = labels.ravel()
    idx = np.flatnonzero((flat > 0) & (flat <= n))
    ys, xs = np.divmod(idx, labels.shape[1])
    return point_moments(flat[idx], xs, ys, n)


def point_moments(lab: np.ndarray, xs: np.ndarray, ys: np.ndarray, n: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each group ``1..n``'s centroid ``(n, 2)`` [x, y], second moments ``(n, 3)`` [Sxx, Sxy,
    Syy] about it and point count ``(n,)``, of the points ``xs``, ``ys`` ``(m,)`` whose group
    is ``lab`` ``(m,)`` (int, 1..n). The one moments formula of a file's ink: labels
    (:func:`pixel_axes`) and the pieces a line is cut into (:func:`_ink_pieces`)."""
    lab = np.asarray(lab).astype(np.int64)
    count = np.bincount(lab, minlength=n + 1)[1:].astype(np.float64)
    safe = np.maximum(count, 1.0)

    def mean(w: np.ndarray) -> np.ndarray:
        return np.bincount(lab, weights=w, minlength=n + 1)[1:] / safe

    mx, my = mean(xs.astype(np.float64)), mean(ys.astype(np.float64))
    # Centred second moments (per group, about its own centroid) for accuracy far from 0.
    dx, dy = xs - mx[lab - 1], ys - my[lab - 1]
    return np.stack([mx, my], axis=1), np.stack([mean(dx * dx), mean(dx * dy), mean(dy * dy)], axis=1), count


def ink_lines(prep: Preparation, centre: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The line the M-step fits to each of L pieces of ink given by its centroid ``(L, 2)``
    and second moments ``(L, 3)`` (:func:`pixel_axes`): in the frame of the region the
    samples nearest the centroid are in, :func:`engine.regression.fit_from_moments` (the
    principal axis, or the least-squares slope when the ink spreads more across the text
    than along it: a short line of tall letters). Returns its segment ``(L, 2, 2)`` (over
    ``+- 2 sigma_s``) and ``sigma_t`` ``(L,)``."""
    rot_inv = prep.params.regression == "rotation_invariant"
    segs = np.zeros((len(centre), 2, 2))
    sigma_t = np.zeros(len(centre))
    for k in range(len(centre)):  # lines of one page: a few dozen
        phi = float(prep.regions[edits.region_of(prep, centre[k])].phi)
        c, s = np.cos(phi), np.sin(phi)
        rot = np.array([[c, s], [-s, c]])  # page (x, y) -> region frame (u, v)
        cov = rot @ np.array([[second[k, 0], second[k, 1]], [second[k, 1], second[k, 2]]]) @ rot.T
        origin = rot @ centre[k]
        moments = np.array([[1.0, 0.0, 0.0, cov[0, 0], cov[0, 1], cov[1, 1]]])
        fit = fit_from_moments(moments, origin, rot_inv, 0.0, 0.0)
        line = LineSet(fit.a, fit.b, fit.c, fit.sigma_t, fit.sigma_s, np.ones(1), np.zeros(1, np.int32),
                       np.array([phi]), rot_inv)
        segs[k] = line.segments()[0]
        sigma_t[k] = float(fit.sigma_t[0])
    return segs, sigma_t


#: At most this many (sample, piece) pairs on a page: EM's unary is a float32 array of one
#: row per line and one column per sample, so the pieces a locked file's lines are cut into
#: are capped where the page's samples x lines would pass it (at most 200 MB a copy). The
#: dev pages reach 4.1M samples x lines (moc-train moc_train_9: 45,047 samples, 90 lines),
#: so 10 pieces a line fit every one of them with a margin of 1.2.
PIECE_BUDGET = 50_000_000


def pieces_per_line(prep: Preparation, n_lines: int) -> int:
    """The most pieces each of ``n_lines`` locked given lines may be cut into on the page of
    ``prep``: ``given_pieces``, fewer where ``PIECE_BUDGET`` would be passed (at least 1)."""
    per_line = PIECE_BUDGET // max(len(prep.samples) * max(n_lines, 1), 1)
    return int(max(1, min(prep.params.given_pieces, per_line)))


def piece_count(length: float, prep: Preparation, most: int | None = None) -> int:
    """How many straight pieces a locked given line ``length`` pixels long is cut into: one
    per ``given_piece`` x ``H_cc`` of it, at most ``most`` (None: ``given_pieces``; each
    piece is a line EM carries: the cost grows with their number, see
    :func:`pieces_per_line`); 1 (not cut) with either field 0."""
    p = prep.params
    step = p.given_piece * prep.stats.h_cc
    most = p.given_pieces if most is None else min(most, p.given_pieces)
    if step <= 0 or most < 2:
        return 1
    return int(min(max(round(length / step), 1), most))


def cut_ink(xy: np.ndarray, prep: Preparation, most: int | None = None) -> list[np.ndarray]:
    """A line's ink ``(m, 2)`` [x, y] cut across its principal axis into :func:`piece_count`
    runs of equal length: the indices of each run's pixels (each at least
    ``MIN_LINE_PIXELS``), in order along the axis; one run (all of it) when not cut."""
    pts = np.asarray(xy, np.float64)
    whole = [np.arange(len(pts))]
    if len(pts) < 2 * MIN_LINE_PIXELS:
        return whole
    d = pts - pts.mean(axis=0)
    s = d @ np.linalg.eigh(d.T @ d)[1][:, -1]
    extent = float(s.max() - s.min())
    n = piece_count(extent, prep, most)
    if n < 2:
        return whole
    cut = np.minimum(((s - s.min()) / extent * n).astype(np.int64), n - 1)
    runs = [r for r in (np.flatnonzero(cut == k) for k in range(n)) if len(r) >= MIN_LINE_PIXELS]
    return runs if len(runs) >= 2 else whole


def cut_polyline(points: np.ndarray, prep: Preparation, most: int | None = None) -> list[np.ndarray]:
    """A polyline ``(n, 2)`` cut by arc length into :func:`piece_count` pieces of equal
    length, each a polyline of its own (the cut points interpolated, shared by neighbours)."""
    pts = np.asarray(points, np.float64)
    arc = np.r_[0.0, np.cumsum(np.hypot(*(pts[1:] - pts[:-1]).T))]
    n = piece_count(float(arc[-1]), prep, most)
    if n < 2:
        return [pts]
    at = np.linspace(0.0, arc[-1], n + 1)
    ends = np.stack([np.interp(at, arc, pts[:, 0]), np.interp(at, arc, pts[:, 1])], axis=1)
    return [np.vstack([ends[k], pts[(arc > at[k]) & (arc < at[k + 1])], ends[k + 1]]) for k in range(n)]


def _straight(points: np.ndarray) -> np.ndarray:
    """A polyline ``(n, 2)`` as one segment ``(2, 2)``: the principal axis of its pieces
    (weighted by their length) over the projections of its points."""
    pts = np.asarray(points, np.float64)
    if len(pts) == 2:
        return pts.copy()
    mids = (pts[1:] + pts[:-1]) / 2.0
    w = np.hypot(*(pts[1:] - pts[:-1]).T)
    if w.sum() <= 0:
        return np.array([pts[0], pts[-1]])
    centre = (mids * w[:, None]).sum(axis=0) / w.sum()
    d = pts[1:] - pts[:-1]
    cov = (d * w[:, None]).T @ d / w.sum() + ((mids - centre) * w[:, None]).T @ (mids - centre) / w.sum()
    axis = np.linalg.eigh(cov)[1][:, -1]
    if np.dot(axis, pts[-1] - pts[0]) < 0:
        axis = -axis  # keep the baseline's direction of writing
    t = (pts - centre) @ axis
    return np.array([centre + t.min() * axis, centre + t.max() * axis])


def baseline_to_centre(baseline: np.ndarray, ink_xy: np.ndarray | None, page_ink_xy: np.ndarray,
                       h_cc: float) -> tuple[np.ndarray, float]:
    """A baseline segment ``(2, 2)`` moved across itself to the middle of its line's ink,
    and that ink's spread about the moved line (NaN when not measured).

    * With the line's own ink (``ink_xy`` ``(m, 2)``: the page's ink inside its polygon),
      the offset is the mean signed distance of that ink, within the baseline's extent,
      from the baseline: the line the M-step fits to that ink passes there.
    * Without (no polygon, or too little ink in it), the page's ink ``page_ink_xy`` within
      the baseline's extent and ``H_cc`` of it is looked at on both sides: the side holding
      more is the text's body (above a Latin or Arabic baseline, whichever way the baseline
      runs), and the baseline moves by the median distance of that side's ink (about
      ``H_cc / 2`` for an evenly inked body); with no ink near, by ``H_cc / 2`` upwards on the page."""
    seg = np.asarray(baseline, np.float64)
    d = seg[1] - seg[0]
    length = float(np.hypot(*d))
    if length < 1e-9:
        return seg.copy(), float("nan")
    unit = d / length
    normal = np.array([unit[1], -unit[0]])  # left of the direction of writing
    if normal[1] > 0 or (normal[1] == 0 and normal[0] > 0):
        normal = -normal  # measure "up" on the page: the sign of the offset says which side

    def frame(xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rel = np.asarray(xy, np.float64) - seg[0]
        return rel @ unit, rel @ normal  # along (0..length), across (> 0: up the page)

    if ink_xy is not None and len(ink_xy) >= MIN_LINE_PIXELS:
        along, across = frame(ink_xy)
        inside = (along >= 0) & (along <= length)
        if inside.sum() >= MIN_LINE_PIXELS:
            offset = float(across[inside].mean())
            return seg + offset * normal, float(np.sqrt(np.mean((across[inside] - offset) ** 2)))
    offset = h_cc / 2.0
    if len(page_ink_xy):
        along, across = frame(page_ink_xy)
        near = (along >= 0) & (along <= length) & (np.abs(across) <= h_cc)
        up, down = across[near & (across > 0)], across[near & (across < 0)]
        body = up if len(up) >= len(down) else down
        if len(body) >= MIN_LINE_PIXELS:
            offset = float(np.median(body))
    return seg + offset * normal, float("nan")


# ----------------------------------------------------------------------------- formats


def _from_json(path: Path, prep: Preparation) -> LineSet:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise _fail(path, "not UTF-8 JSON text") from None
    except json.JSONDecodeError as exc:
        raise _fail(path, f"not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("initial_lines", data.get("lines")), dict):
        raise _fail(path, "not a tlseg result (no 'initial_lines' nor 'lines')")
    shape = data.get("shape")
    if shape is not None and [int(v) for v in shape] != list(prep.shape):
        raise _fail(path, f"it describes a {shape[1]} x {shape[0]} (W x H) page but the page is "
                          f"{prep.shape[1]} x {prep.shape[0]}")
    block = data["initial_lines"] if isinstance(data.get("initial_lines"), dict) else data["lines"]
    rows = block.get("lines")
    if not isinstance(rows, list):
        raise _fail(path, "its 'lines' is not a list of lines")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise _fail(path, f"line {i} is not an object")
        missing = [k for k in ("a", "b", "c", "sigma_t", "sigma_s", "prior", "region", "phi") if k not in row]
        if missing:
            raise _fail(path, f"line {i} has no {', '.join(missing)}")
        values = [row[k] for k in ("a", "b", "c", "sigma_t", "sigma_s", "prior", "phi")]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
            raise _fail(path, f"line {i} has a value that is not a finite number")
        if not isinstance(row["region"], int) or isinstance(row["region"], bool) or row["region"] < 0:
            raise _fail(path, f"line {i} has region {row['region']!r}, not an index")
        if row["sigma_t"] <= 0 or row["sigma_s"] <= 0:
            raise _fail(path, f"line {i} has a spread (sigma) that is not positive")
    lines = LineSet.from_dict(block)
    rot_inv = prep.params.regression == "rotation_invariant"
    same_frames = all(int(r) < len(prep.regions) and lines.phi[k] == prep.regions[int(r)].phi
                      for k, r in enumerate(lines.region))
    if same_frames and lines.rotation_invariant == rot_inv:
        return lines  # this page's regions: the rows as they were, bit for bit
    # Another preparation's frames: each line keeps its segment on the page and its spread.
    return lines_from_page_segments(prep, lines.segments(), lines.sigma_t, lines.locked, lines.anchored,
                                    lines.chain, lines.sigma_t_measured)


def _xml_root(path: Path) -> etree._Element:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    try:
        return etree.parse(str(path), parser).getroot()
    except etree.XMLSyntaxError as exc:
        raise _fail(path, f"malformed XML ({exc})") from None


def _page_lines(path: Path, root: etree._Element, ns: str):
    q = f"{{{ns}}}"
    page = root.find(f"{q}Page")
    if page is None:
        raise _fail(path, "PAGE XML without a <Page> element")
    size = _attr_size(path, page, "imageWidth", "imageHeight")
    out = []
    for tl in page.iter(f"{q}TextLine"):
        line_id = tl.get("id", "?")
        polygon = baseline = None
        coords = tl.find(f"{q}Coords")
        if coords is not None:
            polygon = _points(path, coords, q, "points", line_id)
        base = tl.find(f"{q}Baseline")
        if base is not None:
            baseline = _points(path, base, q, "points", line_id)
        out.append((line_id, polygon, baseline, bool(_LOCKED.search(tl.get("custom") or ""))))
    return out, size, None


def _points(path: Path, el: etree._Element, q: str, attr: str, line_id: str) -> np.ndarray | None:
    if el.get(attr):
        pts = _parse_points(path, el.get(attr), line_id)
    else:  # PAGE 2010-2013 style: <Coords><Point x= y=/>...</Coords>
        try:
            pts = np.array([[float(pt.get("x")), float(pt.get("y"))] for pt in el.findall(f"{q}Point")],
                           dtype=np.float64).reshape(-1, 2)
        except (TypeError, ValueError):
            raise _fail(path, f"line {line_id!r}: Point without numeric x/y") from None
    if len(pts) and not np.isfinite(pts).all():
        raise _fail(path, f"line {line_id!r}: coordinates that are not finite numbers")
    return pts if len(pts) else None


def _alto_lines(path: Path, root: etree._Element, ns: str, shape: tuple[int, int]):
    q = f"{{{ns}}}" if ns else ""
    unit_el = root.find(f"{q}Description/{q}MeasurementUnit")
    unit = (unit_el.text or "").strip().lower() if unit_el is not None else "pixel"
    page = root.find(f".//{q}Page")
    size = _attr_size(path, page, "WIDTH", "HEIGHT") if page is not None else None
    scale = None
    if unit != "pixel":
        if size is None:
            raise _fail(path, f"ALTO coordinates in '{unit}' need the Page WIDTH/HEIGHT to convert to pixels")
        scale = np.array([shape[1] / size[1], shape[0] / size[0]])
        size = None
    out = []
    for tl in root.iter(f"{q}TextLine"):
        line_id = tl.get("ID", "?")
        poly = tl.find(f"{q}Shape/{q}Polygon")
        polygon = baseline = None
        if poly is not None and poly.get("POINTS"):
            polygon = _parse_points(path, poly.get("POINTS"), line_id)
        elif all(tl.get(k) is not None for k in ("HPOS", "VPOS", "WIDTH", "HEIGHT")):
            try:
                x, y, w, h = (float(tl.get(k)) for k in ("HPOS", "VPOS", "WIDTH", "HEIGHT"))
            except ValueError:
                raise _fail(path, f"line {line_id!r}: a box that is not numbers") from None
            polygon = np.array([[x, y], [x + w, y], [x + w, y + h], [x, y + h]])
        if tl.get("BASELINE"):
            baseline = _parse_points(path, tl.get("BASELINE"), line_id)
        for pts in (polygon, baseline):
            if pts is not None and not np.isfinite(pts).all():
                raise _fail(path, f"line {line_id!r}: coordinates that are not finite numbers")
        out.append((line_id, polygon, baseline, False))
    return out, size, scale


def _stored_to_shown(prep: Preparation, stored: tuple[int, int]):
    """For a page EXIF turns by 90 degrees (orientation 5-8) whose stored pixels are
    ``stored`` (H, W): the map of stored (x, y) points ``(n, 2)`` onto the page as shown
    (as :func:`engine.io.load_page` turns it); None for any other page. Files drawn by tools
    that ignore the tag hold the stored frame (poilus AD78_0005-0's ground truth)."""
    orientation = exif_orientation(prep.source) if prep.source else 1
    if orientation < 5 or tuple(stored) != (prep.shape[1], prep.shape[0]):
        return None
    hs, ws = stored
    # Where each shown corner's pixel was stored: three corners fix the (affine) map.
    xs = orient_like_exif(np.broadcast_to(np.arange(ws), (hs, ws)), orientation)
    ys = orient_like_exif(np.broadcast_to(np.arange(hs)[:, None], (hs, ws)), orientation)
    h, w = prep.shape
    shown = np.array([[0, 0], [w - 1, 0], [0, h - 1]], np.float64)
    src = np.array([[xs[int(y), int(x)], ys[int(y), int(x)]] for x, y in shown], np.float64)
    affine = np.linalg.solve(np.c_[src, np.ones(3)], shown)  # (3, 2): [x, y, 1] @ affine

    def to_page(points: np.ndarray) -> np.ndarray:
        return np.c_[points, np.ones(len(points))] @ affine

    return to_page


def _from_xml(path: Path, prep: Preparation, lock: bool = False) -> LineSet:
    root = _xml_root(path)
    qname = etree.QName(root)
    ns, local = qname.namespace or "", qname.localname
    if local == "PcGts" and _PAGE_NS.match(ns):
        found, size, scale = _page_lines(path, root, ns)
    elif local.lower() == "alto" and _ALTO_NS.match(ns):
        found, size, scale = _alto_lines(path, root, ns, prep.shape)
    else:
        raise _fail(path, f"unknown XML root <{local}> in namespace '{ns or 'none'}': expected PAGE (PcGts) or ALTO")
    to_page = None
    if size is not None and size != tuple(prep.shape):
        to_page = _stored_to_shown(prep, size)
        if to_page is None:
            raise _fail(path, f"the XML describes a {size[1]} x {size[0]} (W x H) page but the page is "
                              f"{prep.shape[1]} x {prep.shape[0]}")
    h, w = prep.shape
    kept = []
    for line_id, polygon, baseline, locked in found:
        if scale is not None:
            polygon = None if polygon is None else polygon * scale
            baseline = None if baseline is None else baseline * scale
        if to_page is not None:  # drawn on the stored pixels of a page EXIF turns
            polygon = None if polygon is None else to_page(polygon)
            baseline = None if baseline is None else to_page(baseline)
        if baseline is not None and (len(baseline) < 2 or np.ptp(baseline, axis=0).max() < 1.0):
            baseline = None  # a point, not a line: use the polygon
        if polygon is not None and len(polygon) < 3:
            polygon = None
        if baseline is None and polygon is None:
            continue  # no geometry to start a line from
        pts = baseline if baseline is not None else polygon
        if pts[:, 0].max() < 0 or pts[:, 1].max() < 0 or pts[:, 0].min() > w - 1 or pts[:, 1].min() > h - 1:
            continue  # wholly off the page
        kept.append((line_id, polygon, baseline, locked))
    if not kept:
        return LineSet.empty(prep.params.regression == "rotation_invariant")
    # The ink of each line: the page's ink inside its polygon (smaller polygons win overlaps).
    with_polygon = [k for k, item in enumerate(kept) if item[1] is not None]
    areas = rasterise([kept[k][1] for k in with_polygon], prep.shape) if with_polygon else None
    if areas is not None:
        areas[~prep.ink] = 0
    slot = {k: j for j, k in enumerate(with_polygon)}
    own_ink = _label_pixels(areas, len(with_polygon)) if areas is not None else []
    count = [len(xy) for xy in own_ink]
    page_ink = None
    segments, sigma_t, flags, chain = [], [], [], []
    most = pieces_per_line(prep, len(kept))
    for k, (_line_id, polygon, baseline, locked) in enumerate(kept):
        j = slot.get(k)
        found: list[tuple[np.ndarray, float]] = []
        # Locked, a bent line is cut into straight pieces: EM never moves them, so each stays
        # on its part of the row (free pieces wandered off on their own: ahte-train
        # book1_page19 with the ground truth's lines free, FM 0.70 -> 0.26).
        cut = lock or locked
        if baseline is not None:
            own = None
            if j is not None and count[j] >= MIN_LINE_PIXELS:
                own = own_ink[j]
            elif page_ink is None:
                ys, xs = np.nonzero(prep.ink)
                page_ink = np.stack([xs, ys], axis=1)
            # Locked, the baseline in straight pieces along its length, each moved to its own
            # ink's middle: the line follows a bend, and a two-point baseline's row where it
            # waves about the straight line (poilus-dev's ALTO baselines are two points).
            for piece in cut_polyline(baseline, prep, most if cut else 1):
                found.append(baseline_to_centre(_straight(piece), own,
                                                page_ink if page_ink is not None else np.zeros((0, 2)),
                                                prep.stats.h_cc))
        elif count[j] >= MIN_LINE_PIXELS:  # the line through the ink inside the polygon
            c_k, m_k, _ = _ink_pieces([own_ink[j]], prep, most if cut else 1)
            segs, sts = ink_lines(prep, c_k, m_k)
            found.extend(zip(segs, sts, strict=True))
        else:  # a polygon over no ink: the polygon's own axis
            c_p, m_p, n_p = pixel_axes(rasterise([polygon], prep.shape), 1)
            if n_p[0] == 0:
                continue
            found.append((ink_lines(prep, c_p, m_p)[0][0], float("nan")))
        for seg, st in found:
            segments.append(seg)
            sigma_t.append(st)
            flags.append(locked)
            chain.append(k if len(found) > 1 else -1)
    if not segments:
        return LineSet.empty(prep.params.regression == "rotation_invariant")
    return lines_from_page_segments(prep, np.array(segments), np.array(sigma_t), np.array(flags),
                                    chain=np.array(chain, np.int32))


def _label_pixels(labels: np.ndarray, n: int) -> list[np.ndarray]:
    """The pixels ``(m, 2)`` [x, y] of each label ``1..n`` of ``labels`` ``(H, W)``."""
    idx = np.flatnonzero(labels)
    lab = labels.ravel()[idx]
    order = np.argsort(lab, kind="stable")
    idx, lab = idx[order], lab[order]
    ys, xs = np.divmod(idx, labels.shape[1])
    xy = np.stack([xs, ys], axis=1)
    bounds = np.searchsorted(lab, np.arange(1, n + 2))
    return [xy[bounds[k]:bounds[k + 1]] for k in range(n)]


def _from_labels(path: Path, prep: Preparation, lock: bool = False) -> LineSet:
    try:
        labels = read_label_map(path, shape=prep.shape)  # renumbered 1..n, value order
    except GroundTruthError:
        stored = (prep.shape[1], prep.shape[0])
        if _stored_to_shown(prep, stored) is None:
            raise
        # Labels of the stored pixels of a page EXIF turns: turned with the page.
        labels = orient_like_exif(read_label_map(path, shape=stored), exif_orientation(prep.source))
    n = int(labels.max(initial=0))
    if n == 0:
        return LineSet.empty(prep.params.regression == "rotation_invariant")
    # A label of a few pixels is no text line (ahte-train moc_test_7's ground truth holds a
    # one-pixel "line"; locked, it took 5k pixels of the line beside it).
    pixels = [xy for xy in _label_pixels(labels, n) if len(xy) >= MIN_LINE_PIXELS]
    # Locked, a bent line is cut into straight pieces (free ones are EM's to refine).
    centre, second, chain = _ink_pieces(pixels, prep, pieces_per_line(prep, len(pixels)) if lock else 1)
    segs, st = ink_lines(prep, centre, second)
    return lines_from_page_segments(prep, segs, st, np.zeros(len(segs), bool), chain=chain)


def _ink_pieces(pixels: list[np.ndarray], prep: Preparation, most: int | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each line's ink ``(m, 2)`` of ``pixels`` cut into straight pieces (:func:`cut_ink`, at
    most ``most`` a line; 1: not cut): their centroids ``(P, 2)``, second moments ``(P, 3)``
    (:func:`point_moments`) and ``chain`` ``(P,)``: the index of the line a piece is cut
    from, -1 for a line left whole."""
    points, group, chain = [], [], []
    for k, xy in enumerate(pixels):
        runs = cut_ink(xy, prep, most)
        for run in runs:
            points.append(np.asarray(xy[run]).reshape(-1, 2))
            group.append(np.full(len(points[-1]), len(chain) + 1, np.int64))
            chain.append(k if len(runs) > 1 else -1)
    if not chain:
        return np.zeros((0, 2)), np.zeros((0, 3)), np.zeros(0, np.int32)
    xy = np.concatenate(points)
    centres, seconds, _ = point_moments(np.concatenate(group), xy[:, 0], xy[:, 1], len(chain))
    return centres, seconds, np.array(chain, np.int32)
