"""The canvas' graphics items, each drawing many things as ONE item.

While the engine's reader thread runs, every call from Qt into Python (an item's ``paint``,
``boundingRect``) waits for the GIL, so fewer items mean fewer waits: the samples are one
:class:`DotsItem` rasterised with NumPy, the lines and their bands one :class:`LinesItem`, the
Delaunay graph one :class:`GraphEdgesItem` that strokes a bounded number of edges, and page-sized
images in :class:`FastImageItem` items, downsampled from a pyramid with OpenCV.
"""

from __future__ import annotations

import cv2
import numpy as np
import pyqtgraph as pg
from pyqtgraph import functions as fn
from pyqtgraph import functions_qimage
from pyqtgraph.Qt.internals import PrimitiveArray
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QImage, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem

from engine.model import LineSet

from .geometry import EdgeSegments

#: Colours of lines and of their arg-max samples (tab20-like, readable on paper).
LINE_COLOURS = np.array([
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (23, 190, 207), (188, 189, 34), (127, 127, 127),
    (174, 199, 232), (255, 187, 120), (152, 223, 138), (255, 152, 150), (197, 176, 213),
    (196, 156, 148), (247, 182, 210), (158, 218, 229), (219, 219, 141), (57, 59, 121),
], dtype=np.uint8)


def line_colour(i: int) -> QColor:
    r, g, b = LINE_COLOURS[i % len(LINE_COLOURS)]
    return QColor(int(r), int(g), int(b))


class FastImageItem(pg.ImageItem):
    """ImageItem whose auto-downsampling uses OpenCV's area filter and an image pyramid.

    pyqtgraph downsamples by a float64 mean (about 150 ms on a 20 Mpx page, in the GUI
    thread); here the closest pyramid level (built off the GUI thread, see
    :meth:`set_pyramid`) is resized with ``cv2.resize`` (linear: the level is less than twice
    too fine), a few ms.  Only the image
    kinds the canvas uses are handled (uint8 grey with or without a lookup table, uint8
    RGBA); anything else falls back to pyqtgraph.
    """

    _pyramid: list[np.ndarray] | None = None
    _pyramid_of: np.ndarray | None = None

    def set_pyramid(self, pyramid: list[np.ndarray], **kwargs: object) -> None:
        """Show ``pyramid[0]``, downsampling from the coarsest level that is fine enough."""
        self.setImage(pyramid[0], autoLevels=False, **kwargs)
        self._pyramid = pyramid
        self._pyramid_of = self.image  # setImage may keep a view, not pyramid[0] itself

    def render(self) -> None:
        image = self.image
        if image is None or image.size == 0 or image.dtype != np.uint8:
            return super().render()
        xds, yds = self._computeDownsampleFactors() if self.autoDownsample else (1, 1)
        if xds is None:
            return None
        if xds > 1 or yds > 1:
            h, w = image.shape[:2]
            pyramid = self._pyramid if self._pyramid and self._pyramid_of is image else [image]
            level = min(int(np.log2(min(xds, yds))), len(pyramid) - 1)
            size = (max(1, w // xds), max(1, h // yds))
            # The pyramid level is area-filtered already and less than 2x too fine: a linear
            # resize finishes it in a few ms (INTER_AREA at a fractional ratio: ~10x slower,
            # 20-50 ms for a page-sized RGBA overlay, in the GUI thread).
            src = pyramid[level]
            fine = src.shape[1] < 2 * size[0] and src.shape[0] < 2 * size[1]
            image = cv2.resize(src, size, interpolation=cv2.INTER_LINEAR if fine else cv2.INTER_AREA)
            self._lastDownsample = (xds, yds)
        lut = self.lut if not callable(self.lut) else None
        qimage = functions_qimage.try_make_qimage(image, levels=self.levels, lut=lut)
        if qimage is None:
            return super().render()
        self._processingBuffer = None
        self._displayBuffer = None
        self.qimage = qimage
        self._renderRequired = False
        self._unrenderable = False
        return None


def premultiplied_argb(palette: np.ndarray) -> np.ndarray:
    """RGBA rows (uint8) as premultiplied ``0xAARRGGBB`` words (QImage's ARGB32_Premultiplied)."""
    rgba = np.asarray(palette, dtype=np.uint32).reshape(-1, 4)
    a = rgba[:, 3]
    r, g, b = ((rgba[:, i] * a + 127) // 255 for i in range(3))
    return (a << 24) | (r << 16) | (g << 8) | b


class DotsItem(pg.GraphicsObject):
    """Many dots of ``size`` screen pixels, each coloured through an index into a fixed
    palette, as ONE item painted by rasterising them with NumPy.

    ``pg.ScatterPlotItem`` makes every point a ``drawPixmapFragments`` fragment (10-30 ms for
    50 k points at every repaint) and replacing its points fills a record array with Python
    objects (about 25 ms); here the points are two float arrays, a recolouring is one palette
    lookup, and a paint maps the points to device pixels, writes each dot's ``size`` x ``size``
    square into a premultiplied ARGB buffer of the part of the device they cover, and draws
    that buffer as one image (a few ms).  Where dots overlap, a later point's centre wins.
    """

    def __init__(self, palette: np.ndarray, size: int = 3) -> None:
        super().__init__()
        self.palette = np.asarray(palette, dtype=np.uint8).reshape(-1, 4)
        self._argb = premultiplied_argb(self.palette)
        self.size = int(size)
        self._buffer = np.zeros(0, dtype=np.uint32)  # reused between paints
        self.clear()

    # --- data ----------------------------------------------------------------------------
    def clear(self) -> None:
        self.set_points(np.zeros((0, 2)))

    def count(self) -> int:
        return len(self.x)

    def set_points(self, xy: np.ndarray, index: np.ndarray | None = None) -> None:
        """Replace every point (``(N, 2)`` x, y), coloured by ``index`` (palette entry 0 if None)."""
        xy = np.asarray(xy, dtype=float).reshape(-1, 2)
        self.prepareGeometryChange()
        self.x = np.ascontiguousarray(xy[:, 0])
        self.y = np.ascontiguousarray(xy[:, 1])
        if len(xy):
            x0, y0, x1, y1 = self.x.min(), self.y.min(), self.x.max(), self.y.max()
            self.rect = QRectF(x0, y0, x1 - x0, y1 - y0)
        else:
            self.rect = QRectF()
        self.set_colour_index(np.zeros(len(xy), dtype=np.intp) if index is None else index)

    def set_colour_index(self, index: np.ndarray) -> None:
        index = np.asarray(index)
        if len(index) != len(self.x):
            raise ValueError(f"{len(index)} colour indices for {len(self.x)} points")
        self.index = index.astype(np.intp, copy=True)
        self.colours = self._argb[self.index]
        self.update()

    # --- QGraphicsItem -----------------------------------------------------------------------
    def boundingRect(self) -> QRectF:
        if len(self.x) == 0:
            return QRectF()
        # The dots are ``size`` screen pixels wide whatever the zoom: pad by that much.
        px, py = self.pixelVectors()
        pad_x = 0.0 if px is None else px.length() * self.size
        pad_y = 0.0 if py is None else py.length() * self.size
        return self.rect.adjusted(-pad_x, -pad_y, pad_x, pad_y)

    def viewTransformChanged(self) -> None:
        self.prepareGeometryChange()  # the pixel padding of the bounding rect changed
        super().viewTransformChanged()

    def raster(self, transform: object, width: int, height: int) -> tuple[int, int, np.ndarray] | None:
        """The dots mapped by ``transform`` and clipped to ``(0, 0, width, height)``:
        ``(x0, y0, argb)`` with ``argb`` (h, w) uint32 premultiplied, or None if none shows."""
        if len(self.x) == 0 or width <= 0 or height <= 0:
            return None
        t = transform
        sx = self.x * t.m11() + self.y * t.m21() + t.dx()
        sy = self.x * t.m12() + self.y * t.m22() + t.dy()
        lo = -(self.size // 2)
        offsets = range(lo, lo + self.size)
        hi = lo + self.size - 1
        with np.errstate(invalid="ignore"):
            ix = np.floor(np.clip(sx, -1e9, 1e9)).astype(np.int64)
            iy = np.floor(np.clip(sy, -1e9, 1e9)).astype(np.int64)
        near = (ix + hi >= 0) & (ix + lo < width) & (iy + hi >= 0) & (iy + lo < height)
        if not near.any():
            return None
        ix, iy, colours = ix[near], iy[near], self.colours[near]
        x0, x1 = max(0, int(ix.min()) + lo), min(width, int(ix.max()) + hi + 1)
        y0, y1 = max(0, int(iy.min()) + lo), min(height, int(iy.max()) + hi + 1)
        w, h = x1 - x0, y1 - y0
        ix -= x0
        iy -= y0
        if len(self._buffer) < w * h:
            self._buffer = np.zeros(w * h, dtype=np.uint32)
        buf = self._buffer[: w * h]
        buf.fill(0)
        inner = (ix + lo >= 0) & (ix + hi < w) & (iy + lo >= 0) & (iy + hi < h)
        base, c_in = iy[inner] * w + ix[inner], colours[inner]
        bx, by, c_out = ix[~inner], iy[~inner], colours[~inner]
        # The centre offset last, so that every point's own pixel shows its colour unless a
        # later point's centre falls on it.
        order = sorted(((oy, ox) for oy in offsets for ox in offsets), key=lambda o: o == (0, 0))
        for oy, ox in order:
            buf[base + (oy * w + ox)] = c_in
            if len(bx):
                xs, ys = bx + ox, by + oy
                ok = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
                buf[ys[ok] * w + xs[ok]] = c_out[ok]
        return x0, y0, buf.reshape(h, w)

    def paint(self, painter: object, *_args: object) -> None:
        device = painter.device()
        if device is None:
            return
        ratio = device.devicePixelRatioF() or 1.0
        width = int(np.ceil(device.width() / ratio))
        height = int(np.ceil(device.height() / ratio))
        out = self.raster(painter.transform(), width, height)
        if out is None:
            return
        x0, y0, argb = out
        image = fn.ndarray_to_qimage(argb, QImage.Format.Format_ARGB32_Premultiplied)
        painter.save()
        painter.resetTransform()
        painter.drawImage(QPointF(x0, y0), image)
        painter.restore()


def polygons_path(polys: np.ndarray) -> QPainterPath:
    """One QPainterPath of many closed polygons ``(P, V, 2)``, built vectorised."""
    if len(polys) == 0:
        return QPainterPath()
    closed = np.concatenate([polys, polys[:, :1]], axis=1)
    connect = np.ones(closed.shape[:2], dtype=np.int32)
    connect[:, -1] = 0
    return fn.arrayToQPath(closed[..., 0].ravel(), closed[..., 1].ravel(), connect=connect.ravel())


def segments_path(segs: np.ndarray) -> QPainterPath:
    if len(segs) == 0:
        return QPainterPath()
    return fn.arrayToQPath(segs[..., 0].ravel(), segs[..., 1].ravel(), connect="pairs")


def bend_shapes(path: np.ndarray, sigma_t: float) -> tuple[np.ndarray, np.ndarray]:
    """A bent line's path ``(P, 2)`` as its segments ``(P - 1, 2, 2)`` and their +- ``sigma_t``
    bands, one quadrilateral ``(P - 1, 4, 2)`` each."""
    pts = np.asarray(path, np.float64)
    segs = np.stack([pts[:-1], pts[1:]], axis=1)
    d = segs[:, 1] - segs[:, 0]
    normal = np.stack([-d[:, 1], d[:, 0]], axis=1) / np.maximum(np.hypot(*d.T), 1e-12)[:, None] * sigma_t
    quads = np.stack([segs[:, 0] - normal, segs[:, 1] - normal, segs[:, 1] + normal, segs[:, 0] + normal], axis=1)
    return segs, quads


def distance_to_segments(p: np.ndarray, segs: np.ndarray) -> np.ndarray:
    """Euclidean distance from point ``p`` (2,) to each segment ``(L, 2, 2)``."""
    a, b = segs[:, 0], segs[:, 1]
    ab = b - a
    t = np.clip(((p - a) * ab).sum(1) / np.maximum((ab * ab).sum(1), 1e-12), 0.0, 1.0)
    return np.hypot(*(a + ab * t[:, None] - p).T)


class LinesItem(pg.GraphicsObject):
    """Every regression line and its sigma_t band, in the line's colour, as ONE item; a locked
    line's centre is drawn again, dashed white, over its colour.

    One Python ``paint`` per repaint instead of one item per colour: while the engine thread
    runs, each call from Qt into Python waits for the GIL, so fewer items mean fewer waits.
    """

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[tuple[QPainterPath, QPainterPath]] = []
        self.locked_path = QPainterPath()
        self.rect = QRectF()
        self.brushes = []
        self.pens = []
        for i in range(len(LINE_COLOURS)):
            colour = line_colour(i)
            fill = QColor(colour)
            fill.setAlpha(70)
            self.brushes.append(QBrush(fill))
            pen = QPen(colour, 2)
            pen.setCosmetic(True)
            self.pens.append(pen)
        self.locked_pen = QPen(QColor("#ffffff"), 2, Qt.PenStyle.DashLine)
        self.locked_pen.setCosmetic(True)

    def set_lines(self, lines: LineSet | None, bends: dict | None = None) -> None:
        """Draw ``lines`` (their centre segments and sigma_t bands); ``bends``: 0-based line
        index -> page points ``(P, 2)``, the path drawn instead of that line's segment (a line
        joined from a file's locked pieces, ``Segmentation.paths``)."""
        self.prepareGeometryChange()
        self.paths = []
        self.locked_path = QPainterPath()
        self.rect = QRectF()
        if lines is not None and len(lines):
            bands = lines.band()
            segs = lines.segments()
            bent = {k: bend_shapes(p, float(lines.sigma_t[k])) for k, p in (bends or {}).items()
                    if 0 <= k < len(lines) and len(p) >= 2}
            straight = np.ones(len(lines), bool)
            straight[list(bent)] = False
            colour = np.arange(len(lines)) % len(LINE_COLOURS)
            for k in range(len(LINE_COLOURS)):
                mine = colour == k
                band, centre = polygons_path(bands[mine & straight]), segments_path(segs[mine & straight])
                for j in np.flatnonzero(mine & ~straight):
                    band.addPath(polygons_path(bent[j][1]))
                    centre.addPath(segments_path(bent[j][0]))
                self.paths.append((band, centre))
                self.rect = self.rect.united(band.boundingRect()).united(centre.boundingRect())
            locked = np.asarray(getattr(lines, "locked", np.zeros(len(lines), bool)), bool)
            if locked.any():
                self.locked_path = segments_path(segs[locked & straight])
                for j in np.flatnonzero(locked & ~straight):
                    self.locked_path.addPath(segments_path(bent[j][0]))
        self.update()

    def boundingRect(self) -> QRectF:
        return self.rect

    def paint(self, painter: object, *_args: object) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        for (band, _centre), brush in zip(self.paths, self.brushes, strict=False):
            painter.fillPath(band, brush)
        for (_band, centre), pen in zip(self.paths, self.pens, strict=False):
            painter.strokePath(centre, pen)
        if not self.locked_path.isEmpty():
            painter.strokePath(self.locked_path, self.locked_pen)


class GraphEdgesItem(pg.GraphicsObject):
    """The Delaunay graph's edges as ONE item that strokes at most ``budget`` segments.

    Edges have a class (0 = both ends on the same line, 1 = on different lines, 2 = cut
    between regions) and are drawn in three 1-px cosmetic pens without antialiasing.  Only the
    edges whose bounding box meets a cull rectangle (the view range grown by ``margin`` on
    each side, recomputed when the view leaves it: hysteresis) are put in the line arrays;
    when more than ``budget`` of them meet it, a fixed random subset of them is drawn (each
    edge has a random rank, the ``budget`` lowest ranks in the rectangle are kept), so zooming
    in draws more of them, stably, and once at most ``budget`` edges meet the view every one
    is drawn.  A recolouring only refills the per-colour ``QLineF`` arrays (``drawLines``).
    """

    COLOURS = ((60, 200, 60), (240, 60, 60), (120, 120, 120))

    def __init__(self, budget: int = 30_000, margin: float = 0.5) -> None:
        super().__init__()
        self.cull_rect: QRectF | None = None
        self._budget = budget
        self.margin = margin
        self.pens = []
        for colour in self.COLOURS:
            pen = QPen(QColor(*colour), 1)
            pen.setCosmetic(True)
            self.pens.append(pen)
        #: Per colour, the stroked edges as a QLineF array (x1, y1, x2, y2 per row).
        self.lines = [PrimitiveArray(QLineF, 4) for _ in self.COLOURS]
        self.set_edges(EdgeSegments.empty())

    @property
    def budget(self) -> int:
        return self._budget

    @budget.setter
    def budget(self, value: int) -> None:
        self._budget = int(value)
        self.cull_rect = None  # select again at the next look at the view

    def has_selection(self) -> bool:
        """Whether the drawn edges were selected for some view (:meth:`update_cull`)."""
        return self.cull_rect is not None

    # --- data ----------------------------------------------------------------------------
    def set_edges(self, edges: EdgeSegments) -> None:
        """The edges to draw (graph edges then cut edges), precomputed off the GUI thread."""
        self.prepareGeometryChange()
        self.edges = edges
        self.n_graph = edges.n_graph
        self.segs = edges.segs
        self.x_lo, self.x_hi, self.y_lo, self.y_hi = edges.x_lo, edges.x_hi, edges.y_lo, edges.y_hi
        self.rank = edges.rank
        self.cls = np.zeros(len(self.segs), dtype=np.int8)
        self.cls[self.n_graph:] = 2
        x0, y0, x1, y1 = edges.bounds
        self.rect = QRectF(x0, y0, x1 - x0, y1 - y0) if len(self.segs) else QRectF()
        self.shown = np.zeros(0, dtype=np.intp)  # indices of the edges in the line arrays
        self.cull_rect = None  # where ``shown`` is valid
        self.exact = True  # every edge meeting cull_rect is in ``shown``
        for lines in self.lines:
            lines.resize(0)
        self.update()

    def set_different(self, different: np.ndarray) -> None:
        """Which graph edges join samples on different lines (bool per graph edge)."""
        self.cls[: self.n_graph] = np.asarray(different, dtype=np.int8)
        self._build_paths()
        self.update()

    def stroked_segments(self) -> int:
        return len(self.shown)

    def drawn_edges(self) -> np.ndarray:
        """Indices (into the rows given to :meth:`set_edges`, cut edges after graph ones) of
        the edges in the line arrays."""
        return self.shown

    # --- culling ---------------------------------------------------------------------------
    def _view_range(self) -> QRectF | None:
        view = self.getViewBox()
        if view is None or not hasattr(view, "viewRect"):
            return None
        return view.viewRect()  # the item sits in the view's data coordinates, untransformed

    def update_cull(self, force: bool = False) -> None:
        """Re-select the drawn edges if the view left the cull rectangle, or zoomed in far
        enough that a thinned selection could be made finer."""
        view = self._view_range()
        if view is None or not view.isValid():
            return
        cull = self.cull_rect
        if not force and cull is not None and cull.contains(view) and (
                self.exact or view.width() * view.height() > cull.width() * cull.height() / 8):
            return
        self._select(view)
        self._build_paths()
        self.update()

    def _meets(self, r: QRectF) -> np.ndarray:
        return ((self.x_hi >= r.left()) & (self.x_lo <= r.right())
                & (self.y_hi >= r.top()) & (self.y_lo <= r.bottom()))

    def _select(self, view: QRectF) -> None:
        mx, my = view.width() * self.margin, view.height() * self.margin
        grown = view.adjusted(-mx, -my, mx, my)
        idx = np.flatnonzero(self._meets(grown))
        if len(idx) > self.budget:
            in_view = np.flatnonzero(self._meets(view))
            if len(in_view) <= self.budget:  # exact for the view itself (no hysteresis margin)
                grown, idx = view, in_view
        self.cull_rect = grown
        self.exact = len(idx) <= self.budget
        if not self.exact:
            keep = np.argpartition(self.rank[idx], self.budget - 1)[: self.budget]
            idx = np.sort(idx[keep])
        self.shown = idx

    def _build_paths(self) -> None:
        """Fill each colour's line array with the shown edges of its class (NumPy writes
        into the QLineF buffer that ``drawLines`` reads: no QPainterPath is built)."""
        shown = self.shown
        cls = self.cls[shown]
        for k, lines in enumerate(self.lines):
            segs = self.segs[shown[cls == k]]
            lines.resize(len(segs))
            if len(segs):
                lines.ndarray()[:] = segs

    # --- QGraphicsItem -----------------------------------------------------------------------
    def viewRangeChanged(self) -> None:
        if self.isVisible():
            self.update_cull()

    def itemChange(self, change: object, value: object) -> object:
        result = super().itemChange(change, value)
        if change == QGraphicsItem.GraphicsItemChange.ItemVisibleHasChanged and value:
            self.update_cull()
        return result

    def boundingRect(self) -> QRectF:
        return self.rect

    def paint(self, painter: object, *_args: object) -> None:
        self.update_cull()  # a view resize, or a range change not yet seen
        painter.setRenderHint(painter.RenderHint.Antialiasing, False)
        for lines, pen in zip(self.lines, self.pens, strict=True):
            if len(lines):
                painter.setPen(pen)
                painter.drawLines(*lines.drawargs())
