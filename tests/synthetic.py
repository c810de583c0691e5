"""Deterministic synthetic handwritten pages with exact text-line labels, for end-to-end tests.

Coordinates follow the engine: ``x`` is the column, ``y`` the row (pointing down), in pixels; an
angle ``theta`` (degrees) is the text direction ``(cos theta, sin theta)``, so positive angles turn
clockwise on screen.

Each text line is written in its own frame: ``u`` runs along the text from the line's start and
``v`` across it, down, with the baseline at ``v = 0`` and the x-height band at ``-h <= v <= 0``.
Words are single pen trajectories (centripetal Catmull-Rom splines through per-letter key points)
drawn with ``cv2.polylines``; letters inside a word are connected, words are separated by gaps of
0.5-1 x-height.  Some letters have ascenders (up to ~1.8 h) or descenders (down to ~0.8 h) and
some carry a dot (a separate small component labelled with its line).  Lines are drawn one after
the other into a label canvas with their own number, so each pixel keeps the last line that inked
it; after the final mild blur the labels are re-derived so that ``labels > 0`` is exactly
``image < 128`` (pixels the blur darkened take a neighbouring line's label).

``make_page(kind, seed, scale)`` is a pure function of its arguments (``numpy.random.default_rng``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from scipy import ndimage

KINDS: tuple[str, ...] = ("straight", "skewed", "curved", "touching", "two_columns", "two_orientations")
#: Pages of the failures of issue 26, outside KINDS (their size and line count are their own):
#: "wide_words", rows of large cursive words about 4 H_cc apart, the rows far enough apart
#: that no triangle of 2.5 H_cc joins them; "dense_rows", 15 rows of small writing at a pitch of
#: about 2 H_cc (the kind of page ICDAR 2013's contest is made of).
ROW_KINDS: tuple[str, ...] = ("wide_words", "dense_rows")
#: Page size of the ROW_KINDS at scale 1, pixels (width, height).
_ROW_PAGE = {"wide_words": (1400, 1000), "dense_rows": (900, 700)}
#: H_cc (the engine's area-weighted median component height) of this generator's cursive, in
#: x-heights: 1.9-2.1 on the ROW_KINDS pages (tests/test_row_pitch.py measures it).
HCC_PER_XHEIGHT = 2.0

#: Page size at scale 1, pixels (width, height).
PAGE_W, PAGE_H = 900, 700

# Letter shapes: key points (fraction of the letter width, height in x-heights, negative = up).
_LETTERS: dict[str, list[tuple[float, float]]] = {
    "n": [(0.15, -1.0), (0.35, 0.0), (0.65, -0.95), (0.95, 0.0)],
    "u": [(0.1, -0.95), (0.3, 0.0), (0.7, -1.0), (0.85, 0.0)],
    "e": [(0.45, -0.5), (0.8, -0.85), (0.4, -0.9), (0.2, -0.3), (0.6, 0.0), (0.95, -0.15)],
    "o": [(0.75, -0.95), (0.25, -0.85), (0.15, -0.2), (0.55, 0.0), (0.8, -0.55), (0.7, -0.95),
          (0.95, -0.75)],
    "i": [(0.5, -0.95), (0.6, 0.0), (0.9, -0.15)],
    "l": [(0.55, -1.1), (0.75, -1.8), (0.45, -1.7), (0.4, -0.6), (0.6, 0.0), (0.9, -0.2)],
    "g": [(0.65, -0.95), (0.3, -0.75), (0.35, -0.1), (0.75, -0.85), (0.7, 0.3), (0.55, 0.8),
          (0.3, 0.65), (0.55, 0.15), (0.95, -0.1)],
}
_ASCENDER_TOP = 1  # index of the topmost key point of "l"
_DESCENDER_BOTTOM = 5  # index of the lowest key point of "g"
_BODY = ("n", "u", "e", "o", "i")


@dataclass(frozen=True)
class SyntheticPage:
    """A synthetic page and its ground truth.

    ``image``: uint8 ``(H, W)``, paper ~250, ink ~20-60 (mild noise and blur; ink = ``image < 128``).
    ``labels``: int32 ``(H, W)``, 0 on background, ``k`` in ``1..n_lines`` on every ink pixel of line k.
    ``angles``: per line, the text direction in degrees (x right, y down, positive = clockwise);
    for curved lines the slope of the least-squares line through the baseline.
    """

    image: np.ndarray
    labels: np.ndarray
    n_lines: int
    angles: tuple[float, ...]
    kind: str
    #: Per line, its baseline (``v = 0``) as a polyline ``(20, 2)`` [x, y] along the line.
    baselines: tuple[np.ndarray, ...] = ()


@dataclass
class _Line:
    """One text line: page origin of its baseline start ``(x, y)``, direction (radians), length (px),
    baseline bend ``curve(u) -> v`` (px), paragraph index ``block``, and the positions (local ``u``)
    where ascenders are wanted (to touch the line above) or must not be (to keep clear of it)."""

    origin: tuple[float, float]
    theta: float
    length: float
    curve: Callable[[np.ndarray], np.ndarray] | None = None
    block: int = 0
    forced_ascenders: list[float] = field(default_factory=list)
    avoid_ascenders: list[float] = field(default_factory=list)

    def to_page(self, uv: np.ndarray) -> np.ndarray:
        """Line frame ``(n, 2)`` [u, v] -> page ``(n, 2)`` [x, y]."""
        u, v = uv[:, 0], uv[:, 1]
        if self.curve is not None:
            v = v + self.curve(u)
        c, s = np.cos(self.theta), np.sin(self.theta)
        x = self.origin[0] + u * c - v * s
        y = self.origin[1] + u * s + v * c
        return np.stack([x, y], axis=1)

    def angle_deg(self) -> float:
        """Text direction in degrees, including the mean slope of a curved baseline."""
        if self.curve is None:
            return float(np.degrees(self.theta))
        u = np.linspace(0.0, self.length, 200)
        slope = np.polyfit(u, self.curve(u), 1)[0]
        return float(np.degrees(self.theta + np.arctan(slope)))


@dataclass
class _Style:
    """Writer parameters, pixels: x-height ``h``, pen ``thickness``, ``slant`` (u shift per unit -v)."""

    h: float
    thickness: int
    slant: float
    p_ascender: float = 0.12
    p_descender: float = 0.1
    p_dot: float = 0.5
    #: Range of the blank between words, in x-heights (plus the pen's thickness).
    word_gap: tuple[float, float] = (0.55, 1.0)
    #: Letters written apart (print-like, each its own component; with this many x-heights
    #: between them) instead of joined in one stroke per word; 0 = joined.
    letter_gap: float = 0.0


def _catmull_rom(points: np.ndarray, step: float = 1.0) -> np.ndarray:
    """Centripetal Catmull-Rom spline through ``points`` ``(n, 2)``, sampled about every ``step`` px."""
    if len(points) < 2:
        return points.copy()
    p = np.vstack([2 * points[0] - points[1], points, 2 * points[-1] - points[-2]])
    dt = np.maximum(np.linalg.norm(np.diff(p, axis=0), axis=1), 1e-6) ** 0.5  # knot spacing
    n_seg = len(points) - 1
    counts = np.maximum(2, np.ceil(dt[1:-1] ** 2 / step).astype(int))
    seg = np.repeat(np.arange(n_seg), counts)
    frac = (np.arange(len(seg)) - np.repeat(np.cumsum(counts) - counts, counts) + 1) / counts[seg]
    t0 = np.zeros(len(seg))[:, None]
    t1 = dt[seg][:, None]
    t2 = t1 + dt[seg + 1][:, None]
    t3 = t2 + dt[seg + 2][:, None]
    t = t1 + frac[:, None] * (t2 - t1)
    p0, p1, p2, p3 = p[seg], p[seg + 1], p[seg + 2], p[seg + 3]
    a1 = (t1 - t) / (t1 - t0) * p0 + (t - t0) / (t1 - t0) * p1
    a2 = (t2 - t) / (t2 - t1) * p1 + (t - t1) / (t2 - t1) * p2
    a3 = (t3 - t) / (t3 - t2) * p2 + (t - t2) / (t3 - t2) * p3
    b1 = (t2 - t) / (t2 - t0) * a1 + (t - t0) / (t2 - t0) * a2
    b2 = (t3 - t) / (t3 - t1) * a2 + (t - t1) / (t3 - t1) * a3
    return np.vstack([points[:1], (t2 - t) / (t2 - t1) * b1 + (t - t1) / (t2 - t1) * b2])


def _write_line(rng: np.random.Generator, style: _Style, line: _Line
                ) -> tuple[list[np.ndarray], list[tuple[float, float, float]], list[float]]:
    """Lay out words along ``line`` in its own frame.

    Returns the pen trajectories (list of ``(n, 2)`` [u, v] arrays, px), the dots ``(u, v, radius)``
    and the ``u`` positions of descender bottoms.
    """
    h, slant = style.h, style.slant
    strokes: list[np.ndarray] = []
    dots: list[tuple[float, float, float]] = []
    bottoms: list[float] = []
    forced = sorted(line.forced_ascenders)
    u = float(rng.uniform(0.0, 0.4)) * h
    while True:
        n_letters = int(rng.choice([1, 2, 3, 3, 4, 4, 5, 5, 6, 7]))
        widths = rng.uniform(0.5, 0.8, n_letters) * h
        if u + widths.sum() > line.length:  # shorten the last word to the space left
            widths = widths[: int((line.length - u) / (0.8 * h))]
            if len(widths) == 0:
                break
        size = rng.uniform(0.9, 1.1)
        lift = rng.normal(0.0, 0.06) * h
        word_slant = slant + rng.normal(0.0, 0.04)
        keys = [(u, lift - rng.uniform(0.1, 0.4) * h)]
        x = u + 0.1 * h
        for w in widths:
            first_key = len(keys)
            kind = str(rng.choice(_BODY))
            r = rng.random()
            if r < style.p_ascender:
                kind = "l"
            elif r < style.p_ascender + style.p_descender:
                kind = "g"
            # An ascender wanted here: place its top exactly at the forced u.
            top_dx = _LETTERS["l"][_ASCENDER_TOP][0] * w + word_slant * 1.8 * h * size
            while forced and forced[0] < x + top_dx:
                forced.pop(0)
            if forced and forced[0] - top_dx <= x + 0.8 * w:
                kind = "l"
                x = forced.pop(0) - top_dx
            if kind in "li" and any(abs(x + top_dx - a) < 1.5 * h for a in line.avoid_ascenders):
                kind = "n"
            for j, (fx, fv) in enumerate(_LETTERS[kind]):
                jitter = rng.normal(0.0, 0.05, 2) * h if kind not in "lg" or j not in (1, 5) else (0, 0)
                v = fv * h * size + lift + jitter[1]
                keys.append((x + fx * w - word_slant * v + jitter[0], v))
                if kind == "g" and j == _DESCENDER_BOTTOM:
                    bottoms.append(keys[-1][0])
            if kind == "i" and rng.random() < style.p_dot:
                v = -1.5 * h * size + lift
                dots.append((x + 0.5 * w - word_slant * v, v, rng.uniform(0.08, 0.11) * h))
            if style.letter_gap > 0:
                strokes.append(_catmull_rom(np.asarray(keys[first_key:], dtype=float)))
                x += style.letter_gap * h
            x += w
        keys.append((x + 0.15 * h, lift - rng.uniform(0.0, 0.3) * h))
        if style.letter_gap <= 0:
            strokes.append(_catmull_rom(np.asarray(keys, dtype=float)))
        u = x + 0.15 * h + rng.uniform(*style.word_gap) * h + style.thickness
        if u >= line.length - 0.6 * h:
            break
    return strokes, dots, bottoms


def _draw(canvas: np.ndarray, value: int, line: _Line, strokes: list[np.ndarray],
          dots: list[tuple[float, float, float]], thickness: int) -> None:
    """Rasterise one line into ``canvas`` (uint16, (H, W)) with ``value``, over what is there."""
    shift = 4
    f = float(1 << shift)
    pts = [np.round(line.to_page(s) * f).astype(np.int32) for s in strokes]
    cv2.polylines(canvas, pts, False, value, thickness, cv2.LINE_8, shift)
    for u, v, r in dots:
        (x, y), = line.to_page(np.array([[u, v]]))
        cv2.circle(canvas, (int(round(x * f)), int(round(y * f))), int(round(max(r, 1.2) * f)),
                   value, -1, cv2.LINE_8, shift)


def _extent(lines: list[_Line], h: float) -> tuple[float, float, float, float]:
    """Bounding box ``(x0, y0, x1, y1)`` of the lines' bands (2 h above, 1.2 h below the baseline)."""
    pts = []
    for ln in lines:
        u = np.linspace(0.0, ln.length, 50)
        for v in (-2.0 * h, 1.2 * h):
            pts.append(ln.to_page(np.stack([u, np.full_like(u, v)], axis=1)))
    p = np.vstack(pts)
    return float(p[:, 0].min()), float(p[:, 1].min()), float(p[:, 0].max()), float(p[:, 1].max())


def _block(rng: np.random.Generator, n: int, width: float, pitch: float, theta: float, h: float,
           region: tuple[float, float, float, float], align: str = "center",
           last_short: bool = True) -> list[_Line]:
    """A paragraph of ``n`` lines of about ``width`` px, rotated by ``theta`` (radians), placed in
    ``region`` ``(x0, y0, x1, y1)`` (centred, or at its top-left with ``align="top"``)."""
    c, s = np.cos(theta), np.sin(theta)
    lines = []
    for i in range(n):
        indent = rng.uniform(0.0, 0.5) * h + (rng.uniform(1.0, 2.0) * h if i == 0 else 0.0)
        length = width * rng.uniform(0.9, 1.0) - indent
        if last_short and i == n - 1:
            length *= rng.uniform(0.55, 0.8)
        v0 = i * pitch + rng.normal(0.0, 0.04) * h
        lines.append(_Line((indent * c - v0 * s, indent * s + v0 * c), theta, length))
    x0, y0, x1, y1 = _extent(lines, h)
    rx0, ry0, rx1, ry1 = region
    if x1 - x0 > rx1 - rx0 + 1e-6 or y1 - y0 > ry1 - ry0 + 1e-6:
        raise ValueError("block does not fit its region")
    if align == "top":
        dx, dy = rx0 - x0, ry0 - y0
    else:
        dx, dy = (rx0 + rx1 - x0 - x1) / 2, (ry0 + ry1 - y0 - y1) / 2
    for ln in lines:
        ln.origin = (ln.origin[0] + dx, ln.origin[1] + dy)
    return lines


def _fitting_block(rng: np.random.Generator, n_max: int, n_min: int, width: float, pitch: float,
                   theta: float, h: float, region: tuple[float, float, float, float],
                   align: str = "center") -> list[_Line]:
    """``_block`` with the most lines (n_min..n_max) that fit, shortening lines down to 70 % of ``width``
    if needed (and further if even n_min lines do not fit)."""
    state = rng.bit_generator.state
    tries = [(n, k) for n in range(n_max, n_min - 1, -1) for k in range(5)]
    tries += [(n_min, k) for k in range(5, 12)]
    for n, k in tries:
        rng.bit_generator.state = state
        try:
            return _block(rng, n, width * 0.92**k, pitch, theta, h, region, align)
        except ValueError:
            continue
    raise ValueError("cannot fit the block")


def _mark(lines: list[_Line], block: int) -> list[_Line]:
    """Set the paragraph index of ``lines``; returns them."""
    for ln in lines:
        ln.block = block
    return lines


def _layout(kind: str, rng: np.random.Generator, scale: float) -> tuple[list[_Line], _Style]:
    """Place the lines of a page of ``kind``."""
    page_w, page_h = _ROW_PAGE.get(kind, (PAGE_W, PAGE_H))
    width, height = page_w * scale, page_h * scale
    h = rng.uniform(18.0, 24.0) * scale
    style = _Style(h=h, thickness=max(1, int(round(rng.uniform(2.0, 3.6) * scale))),
                   slant=rng.uniform(0.05, 0.3))
    pitch = rng.uniform(2.5, 3.0) * h
    margin = rng.uniform(40.0, 60.0) * scale
    page = (margin, margin, width - margin, height - margin)
    n = int(rng.integers(6, 11))

    if kind in ("straight", "curved", "touching"):
        if kind == "touching":
            pitch = 2.2 * h
            style.p_descender, style.p_ascender = 0.14, 0.14
        if kind == "curved":
            pitch = rng.uniform(2.8, 3.0) * h
        lines = _fitting_block(rng, n, 6, page[2] - page[0], pitch, 0.0, h, page, align="top")
        if kind == "curved":
            amp = rng.uniform(0.5, 0.8) * h
            freq = rng.uniform(0.8, 1.2)
            phase = rng.uniform(0.0, 2 * np.pi)
            for ln in lines:
                a = amp * rng.uniform(0.9, 1.1)
                ph = phase + rng.normal(0.0, 0.2)
                k = 2 * np.pi * freq / (page[2] - page[0])
                ln.curve = lambda u, a=a, k=k, ph=ph: a * np.sin(k * u + ph)
        return lines, style

    if kind == "skewed":
        theta = np.radians(rng.uniform(8.0, 15.0) * rng.choice([-1.0, 1.0]))
        lines = _fitting_block(rng, n, 6, page[2] - page[0], pitch, theta, h, page)
        return lines, style

    if kind == "two_columns":
        gap = rng.uniform(4.0, 6.0) * h
        col_w = (page[2] - page[0] - gap) / 2
        left = (page[0], page[1], page[0] + col_w, page[3])
        shift = rng.uniform(0.3, 0.7) * pitch
        right = (page[2] - col_w, page[1] + shift, page[2], page[3])
        n_left = int(rng.integers(4, 6))
        n_right = int(rng.integers(4, 6))
        lines = _fitting_block(rng, n_left, 4, col_w, pitch, 0.0, h, left, align="top")
        pitch_r = pitch * rng.uniform(0.97, 1.03)
        lines += _mark(_fitting_block(rng, n_right, 4, col_w, pitch_r, 0.0, h, right, align="top"), 1)
        return lines, style

    if kind == "two_orientations":
        # A horizontal paragraph on the left, a side note of steep lines (60-75 deg) on the right.
        side_w = rng.uniform(0.38, 0.42) * (page[2] - page[0])
        gap = rng.uniform(2.5, 3.5) * h
        main = (page[0], page[1], page[2] - side_w - gap, page[3])
        side = (page[2] - side_w, page[1], page[2], page[3])
        lines = _fitting_block(rng, int(rng.integers(5, 7)), 5, main[2] - main[0], pitch, 0.0, h, main,
                               align="top")
        theta = np.radians(rng.uniform(60.0, 75.0) * rng.choice([-1.0, 1.0]))
        side_pitch = rng.uniform(2.5, 2.8) * h
        lines += _mark(_fitting_block(rng, int(rng.integers(3, 5)), 3, 0.8 * (page[3] - page[1]), side_pitch,
                                      theta, h, side), 1)
        return lines, style

    if kind == "wide_words":
        # Word gaps of 4 H_cc (the blank between words: the gap drawn plus the pen, less the
        # word's lead-in and lead-out strokes), rows 4.5 H_cc apart (a blank of about 3 H_cc
        # between the rows' ink).
        style.word_gap = (4.0 * HCC_PER_XHEIGHT - 0.3, 4.0 * HCC_PER_XHEIGHT - 0.1)
        pitch = 4.5 * HCC_PER_XHEIGHT * h
        lines = _fitting_block(rng, 5, 5, page[2] - page[0], pitch, 0.0, h, page, align="top")
        return lines, style

    if kind == "dense_rows":
        h = rng.uniform(8.5, 10.0) * scale
        style = _Style(h=h, thickness=max(1, int(round(rng.uniform(1.4, 1.8) * scale))),
                       slant=rng.uniform(0.05, 0.3), letter_gap=0.25)
        margin = rng.uniform(30.0, 40.0) * scale
        page = (margin, margin, width - margin, height - margin)
        pitch = 2.4 * h  # letters apart: H_cc is about 1.2 x-heights, so about 2 H_cc
        lines = _fitting_block(rng, 15, 15, page[2] - page[0], pitch, 0.0, h, page, align="top")
        return lines, style

    raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS + ROW_KINDS}")


def _render(lines: list[_Line], style: _Style, rng: np.random.Generator, shape: tuple[int, int],
            scale: float, touching: bool) -> tuple[np.ndarray, np.ndarray]:
    """Write and draw every line; return (image uint8, labels int32), both ``shape`` (H, W)."""
    canvas = np.zeros(shape, np.uint16)  # line k's strokes drawn with value k, later lines on top
    bottoms_prev: list[float] = []
    for k, ln in enumerate(lines, start=1):
        if k > 1 and lines[k - 2].block == ln.block:
            # The previous line's descender bottoms, in this line's u (same block: same direction).
            prev = lines[k - 2]
            dx, dy = prev.origin[0] - ln.origin[0], prev.origin[1] - ln.origin[1]
            du = dx * np.cos(ln.theta) + dy * np.sin(ln.theta)
            below = [b + du for b in bottoms_prev]
            if touching:
                ln.forced_ascenders = below
            else:
                ln.avoid_ascenders = below
        strokes, dots, bottoms = _write_line(rng, style, ln)
        bottoms_prev = bottoms
        _draw(canvas, k, ln, strokes, dots, style.thickness)
    labels = canvas.astype(np.int32)
    # Per-line ink darkness (0 = paper, 250), plus noise, then a mild blur.
    tone = np.concatenate([[250.0], rng.uniform(15.0, 50.0, len(lines))]).astype(np.float32)
    noise = rng.standard_normal(shape, dtype=np.float32)
    image = tone[labels] + noise * np.where(labels > 0, np.float32(6.0), np.float32(2.5))
    image = cv2.GaussianBlur(image, (0, 0), 0.6 * scale)
    image = np.clip(np.round(image), 0, 255).astype(np.uint8)
    # Exact labels: ink pixels the blur darkened take a neighbouring drawn pixel's line (the blur is
    # too narrow to darken a pixel with no ink among its 8 neighbours), lightened ones go.
    ink = image < 128
    grown = np.where(labels > 0, labels, ndimage.grey_dilation(labels, size=(3, 3)))
    if np.any(ink & (grown == 0)):  # never expected; nearest drawn pixel as a fallback
        _, (iy, ix) = ndimage.distance_transform_edt(labels == 0, return_indices=True)
        grown = labels[iy, ix]
    labels = np.where(ink, grown, 0).astype(np.int32)
    return image, labels


def _cross_line_components(image: np.ndarray, labels: np.ndarray) -> int:
    """Number of 8-connected ink components that carry more than one line label."""
    n, cc = cv2.connectedComponents((image < 128).astype(np.uint8), connectivity=8)
    ink = labels > 0
    m = int(labels.max()) + 1
    present = np.bincount(cc[ink].astype(np.int64) * m + labels[ink], minlength=n * m).reshape(n, m) > 0
    return int((present.sum(axis=1) > 1).sum())


def make_page(kind: str, seed: int = 0, scale: float = 1.0) -> SyntheticPage:
    """Generate a synthetic handwritten page of ``kind`` (one of ``KINDS``).

    The page is about ``900 x 700 * scale`` px (W x H) with 6-10 lines (x-height 18-24 px * scale,
    pen 2-4 px * scale).  Same arguments give byte-identical arrays.
    """
    if kind not in KINDS + ROW_KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS + ROW_KINDS}")
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    page_w, page_h = _ROW_PAGE.get(kind, (PAGE_W, PAGE_H))
    shape = (int(round(page_h * scale)), int(round(page_w * scale)))
    for attempt in range(20):
        rng = np.random.default_rng([seed, attempt, (KINDS + ROW_KINDS).index(kind)])
        lines, style = _layout(kind, rng, scale)
        image, labels = _render(lines, style, rng, shape, scale, touching=kind == "touching")
        present = np.bincount(labels.ravel(), minlength=len(lines) + 1)[1:]
        if present.min() == 0:
            continue
        if kind == "touching" and _cross_line_components(image, labels) < 3:
            continue
        if kind != "touching" and _cross_line_components(image, labels) > 0:
            continue
        angles = tuple(ln.angle_deg() for ln in lines)
        baselines = tuple(ln.to_page(np.stack([np.linspace(0.0, ln.length, 20), np.zeros(20)], axis=1))
                          for ln in lines)
        return SyntheticPage(image=image, labels=labels, n_lines=len(lines), angles=angles, kind=kind,
                             baselines=baselines)
    raise RuntimeError(f"could not generate a valid {kind!r} page for seed {seed}")


def save_page(page: SyntheticPage, directory: str | Path, stem: str | None = None) -> tuple[Path, Path]:
    """Write ``<stem>.png`` (8-bit grey image) and ``<stem>_labels.png`` (16-bit labels) to ``directory``.

    ``stem`` defaults to the page kind.  Returns ``(image_path, labels_path)``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = stem or page.kind
    image_path = directory / f"{stem}.png"
    labels_path = directory / f"{stem}_labels.png"
    if not cv2.imwrite(str(image_path), page.image):
        raise OSError(f"could not write {image_path}")
    if not cv2.imwrite(str(labels_path), page.labels.astype(np.uint16)):
        raise OSError(f"could not write {labels_path}")
    return image_path, labels_path


def side_note_page(seed: int = 0, theta_deg: float = 45.0) -> tuple[SyntheticPage, np.ndarray]:
    """A multi-oriented page (VML-MOC's layout, issue 26): a horizontal paragraph on top, a
    side note of short lines at ``theta_deg`` below it, another horizontal paragraph under
    the note. Each block nearly touches the next (a corner of the note lies within a text
    height of the paragraphs), so the Delaunay regions join all three, and the two
    paragraphs, at one angle, are joined only through the note. Returns the page and the
    block of every line ``(n_lines,)`` (0 upper paragraph, 1 note, 2 lower paragraph)."""
    rng = np.random.default_rng([seed, 45])
    h = 16.0
    style = _Style(h=h, thickness=3, slant=0.1)
    width, height = 1000, 1200
    pitch = 4.5 * h
    upper = _block(rng, 5, 880.0, pitch, 0.0, h, (60.0, 30.0, 960.0, 400.0), align="top", last_short=False)
    note = _mark(_block(rng, 6, 300.0, pitch, np.radians(theta_deg), h, (250.0, 0.0, 750.0, height),
                        last_short=False), 1)
    lower = _mark(_block(rng, 4, 880.0, pitch, 0.0, h, (60.0, 0.0, 960.0, height), align="top",
                         last_short=False), 2)
    # Stack them: the note's top corner just under the upper paragraph, the lower paragraph
    # just under the note's bottom corner (gaps of about one x-height between ink bands).
    _, _, _, up_bottom = _extent(upper, h)
    _, n_top, _, _ = _extent(note, h)
    for ln in note:
        ln.origin = (ln.origin[0], ln.origin[1] + up_bottom - n_top + 0.5 * h)
    _, _, _, n_bottom = _extent(note, h)
    _, l_top, _, _ = _extent(lower, h)
    for ln in lower:
        ln.origin = (ln.origin[0], ln.origin[1] + n_bottom - l_top + 0.5 * h)
    lines = upper + note + lower
    _, _, _, bottom = _extent(lines, h)
    if bottom > height:
        raise ValueError("side-note page does not fit")
    image, labels = _render(lines, style, rng, (height, width), 1.0, touching=False)
    page = SyntheticPage(image=image, labels=labels, n_lines=len(lines),
                         angles=tuple(ln.angle_deg() for ln in lines), kind="side_note")
    return page, np.array([ln.block for ln in lines])


def close_angle_columns_page(seed: int = 0, theta_deg: float = -15.0, gap: float = 1.0
                             ) -> tuple[SyntheticPage, np.ndarray]:
    """Two columns of short lines side by side (VML-MOC's side notes, moc_train_16): the left
    one horizontal, the right one at ``theta_deg``, their nearest ends about one text height
    apart, so the Delaunay regions join them and their angles are too close for the
    orientation split. Returns the page and the column of every line ``(n_lines,)``."""
    rng = np.random.default_rng([seed, 15])
    h = 16.0
    style = _Style(h=h, thickness=3, slant=0.1)
    width, height = 900, 900
    pitch = 3.0 * h
    left = _mark(_block(rng, 9, 300.0, pitch, 0.0, h, (40.0, 60.0, 440.0, 860.0), last_short=False), 0)
    right = _mark(_block(rng, 9, 300.0, pitch, np.radians(theta_deg), h, (0.0, 60.0, width, 860.0),
                         last_short=False), 1)
    # The right column just right of the left one: a gap of one text height between them.
    _, _, l_right, _ = _extent(left, h)
    r_left, _, _, _ = _extent(right, h)
    for ln in right:
        ln.origin = (ln.origin[0] + l_right - r_left + gap * h, ln.origin[1])
    lines = left + right
    x0, y0, x1, y1 = _extent(lines, h)
    if x1 > width or y1 > height or x0 < 0 or y0 < 0:
        raise ValueError("column page does not fit")
    image, labels = _render(lines, style, rng, (height, width), 1.0, touching=False)
    page = SyntheticPage(image=image, labels=labels, n_lines=len(lines),
                         angles=tuple(ln.angle_deg() for ln in lines), kind="close_columns")
    return page, np.array([ln.block for ln in lines])


def perforated_card_page(seed: int = 0, slant: float = 0.6) -> SyntheticPage:
    """Three rows of large slanted cursive on a card with a perforated edge (poilus AN_0121-2,
    issue 26): x-height 28 px, words 2.5-3.5 x-heights apart (each word a region of its own),
    rows 5 x-heights apart, and round holes 10 px across every 20 px along the four sides. The
    holes outnumber the words' components, so H_cc comes out at the holes' size, about a
    third of the letters' height. The holes are not text (label 0)."""
    rng = np.random.default_rng([seed, 121])
    h = 28.0
    style = _Style(h=h, thickness=4, slant=slant)
    style.word_gap = (2.5, 3.5)
    width, height = 1100, 900
    lines = _block(rng, 3, 800.0, 5.0 * h, 0.0, h, (150.0, 250.0, 1000.0, 800.0), align="top")
    image, labels = _render(lines, style, rng, (height, width), 1.0, touching=False)
    dot = 10
    for x in range(30, width - 30, 2 * dot):
        for y in (20, height - 20):
            cv2.circle(image, (x, y), dot // 2, 30, -1)
    for y in range(30, height - 30, 2 * dot):
        for x in (20, width - 20):
            cv2.circle(image, (x, y), dot // 2, 30, -1)
    return SyntheticPage(image=image, labels=labels, n_lines=len(lines),
                         angles=tuple(ln.angle_deg() for ln in lines), kind="perforated_card")


def narrow_column_page(seed: int = 0, main_deg: float = -25.0, column_deg: float = 90.0,
                       gap: float = 0.5, n_column: int = 3, main_pitch: float = 4.0,
                       column_pitch: float = 2.2) -> tuple[SyntheticPage, np.ndarray]:
    """A block of rows at ``main_deg``, ``main_pitch`` text heights apart, whose row ends line
    up on a vertical edge (each row starts and ends at the same x), with a narrow column of
    ``n_column`` lines at ``column_deg``, ``column_pitch`` text heights apart, beside that
    edge and ``gap`` text heights from it (VML-MOC's moc_train_9: rows at -25 deg, a dense
    column of lines written up the page at their right, a few lines wide, narrower than the
    windows the orientation split reads angles in). Returns the page and the block of every
    line ``(n_lines,)`` (0 rows, 1 column)."""
    rng = np.random.default_rng([seed, 9])
    h = 16.0
    style = _Style(h=h, thickness=3, slant=0.1)
    width, height = 1100, 1500
    pitch = main_pitch * h
    theta = np.radians(main_deg)
    span = 560.0  # the rows' extent along x
    main = []
    for i in range(int(66 / main_pitch)):
        start = rng.uniform(0.0, 0.4) * h
        main.append(_Line((40.0 + start, 330.0 + i * pitch / np.cos(theta)), theta,
                          (span - start - rng.uniform(0.0, 0.4) * h) / np.cos(theta)))
    main = _mark(main, 0)
    column = _mark(_block(rng, n_column, 1100.0, column_pitch * h, np.radians(column_deg), h, (0.0, 0.0, width, height),
                          last_short=False), 1)
    _, m_y0, m_right, m_y1 = _extent(main, h)
    c_x0, c_y0, _, c_y1 = _extent(column, h)
    for ln in column:
        ln.origin = (ln.origin[0] + m_right - c_x0 + gap * h,
                     ln.origin[1] + (m_y0 + m_y1) / 2 - (c_y0 + c_y1) / 2)
    lines = main + column
    x0, y0, x1, y1 = _extent(lines, h)
    if x1 > width or y1 > height or x0 < 0 or y0 < 0:
        raise ValueError(f"column page does not fit: {(x0, y0, x1, y1)}")
    image, labels = _render(lines, style, rng, (height, width), 1.0, touching=False)
    page = SyntheticPage(image=image, labels=labels, n_lines=len(lines),
                         angles=tuple(ln.angle_deg() for ln in lines), kind="narrow_column")
    return page, np.array([ln.block for ln in lines])


def bent_rows_page(seed: int = 0, bend: float = 0.8) -> SyntheticPage:
    """Six parallel rows of cursive, each bent by one sine period across the page whose
    amplitude is ``bend`` x the row pitch (issue 24, the curved rows of moc-train): x-height
    20 px, rows 3 x-heights apart. A straight line through a row lies farther from the row's
    crests and troughs than the neighbouring rows' lines do."""
    rng = np.random.default_rng([seed, 24])
    h = 20.0
    pitch = 3.0 * h
    style = _Style(h=h, thickness=3, slant=0.15)
    width, height = 1000, 800
    lines = _block(rng, 6, 800.0, pitch, 0.0, h, (100.0, 250.0, 900.0, 650.0), align="top")
    k = 2 * np.pi / 800.0
    for ln in lines:
        ln.curve = lambda u, a=bend * pitch, k=k: a * np.sin(k * u)
    image, labels = _render(lines, style, rng, (height, width), 1.0, touching=False)
    return SyntheticPage(image=image, labels=labels, n_lines=len(lines),
                         angles=tuple(ln.angle_deg() for ln in lines), kind="bent_rows")


def fanned_rows_page(seed: int = 0, spread_deg: float = 12.0, n: int = 10) -> SyntheticPage:
    """``n`` straight rows of cursive in one block whose angles fan out from 0 to
    ``spread_deg`` degrees (clockwise, down the block), all starting at one left margin 3
    x-heights apart (the rows of moc-train's fanned notes, moc_train_16, and of notes that
    spread as they are written): x-height 20 px, rows 1000-1100 px long. The rows' angles are
    the page's ``angles``."""
    rng = np.random.default_rng([seed, 26, 12])
    h = 20.0
    style = _Style(h=h, thickness=3, slant=0.15)
    lines = [_Line((100.0, 150.0 + i * 3.0 * h), np.radians(spread_deg * i / max(n - 1, 1)),
                   1100.0 * rng.uniform(0.9, 1.0)) for i in range(n)]
    image, labels = _render(lines, style, rng, (1300, 1400), 1.0, touching=False)
    return SyntheticPage(image=image, labels=labels, n_lines=n,
                         angles=tuple(ln.angle_deg() for ln in lines), kind="fanned_rows")


def save_label_set(page: SyntheticPage, root: str | Path, set_name: str = "synth", stem: str = "p") -> Path:
    """Write ``page`` as the one page of a pixel-labelled set, as the bench scripts read a data
    folder: ``root/set_name/images/<stem>.png`` and ``root/set_name/pixel_label/<stem>.png``
    (16-bit labels). Returns the set's folder."""
    folder = Path(root) / set_name
    for sub, pixels in (("images", page.image), ("pixel_label", page.labels.astype(np.uint16))):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        if not cv2.imwrite(str(folder / sub / f"{stem}.png"), pixels):
            raise OSError(f"could not write {folder / sub / stem}.png")
    return folder


def run_on_label_set(main: Callable[[list[str]], int], page: SyntheticPage, root: str | Path) -> tuple[int, Path]:
    """Run a bench script's ``main`` on ``page`` written as the one page of a set in ``root``
    (:func:`save_label_set`), one page at a time, its CSV beside the set; returns ``main``'s
    status and the CSV's path."""
    save_label_set(page, root)
    out = Path(root) / "out.csv"
    return main(["--data", str(root), "--jobs", "1", "--csv", str(out)]), out
