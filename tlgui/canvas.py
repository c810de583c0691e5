"""The page canvas: one pan/zoom view of the page with the method's state drawn over it.

Every layer is created once and then only updated, shown or hidden.  Layers that are hidden
are not updated at all; they are marked stale and refreshed when shown, so a run costs only
what is visible.  Costs that scale with the page (50 k samples, 150 k edges, 20 Mpx images)
are kept vectorised: one dots item recoloured through a palette index and rasterised with
NumPy, one graph item that
strokes only a bounded number of the edges in view, images downsampled with OpenCV.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import cv2
import numpy as np
import pyqtgraph as pg
from pyqtgraph import functions as fn
from pyqtgraph import functions_qimage
from pyqtgraph.Qt.internals import PrimitiveArray
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QBrush, QColor, QImage, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem

from engine.model import LineSet, Preparation, Snapshot

from .geometry import EdgeSegments, PrepGeometry, ink_pyramid, prep_geometry

pg.setConfigOptions(imageAxisOrder="row-major", antialias=False)

#: Colours of lines and of their arg-max samples (tab20-like, readable on paper).
LINE_COLOURS = np.array([
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (23, 190, 207), (188, 189, 34), (127, 127, 127),
    (174, 199, 232), (255, 187, 120), (152, 223, 138), (255, 152, 150), (197, 176, 213),
    (196, 156, 148), (247, 182, 210), (158, 218, 229), (219, 219, 141), (57, 59, 121),
], dtype=np.uint8)
N_LEVELS = 64
POSTERIOR_MODES = ("argmax", "selected", "entropy")

LAYERS = ("page", "pagearea", "labels", "ink", "nontext", "regions", "graph", "samples", "posterior",
          "initial", "lines", "merges", "mismatch")
#: Layer -> (shown at start, opacity at start).
LAYER_DEFAULTS: dict[str, tuple[bool, float]] = {
    "page": (True, 1.0), "pagearea": (True, 0.9), "labels": (True, 0.55), "ink": (False, 0.6),
    "nontext": (False, 0.7), "regions": (True, 0.8),
    "graph": (False, 0.5), "samples": (False, 0.8), "posterior": (True, 0.9),
    "initial": (True, 0.9), "lines": (True, 0.8), "merges": (True, 0.9), "mismatch": (True, 0.8),
}
LAYER_TITLES = {
    "page": "Page", "pagearea": "Page area", "labels": "Final labels", "ink": "Ink mask",
    "nontext": "Non-text ink", "regions": "Text regions",
    "graph": "Delaunay graph", "samples": "Samples", "posterior": "Posterior",
    "initial": "Initial lines", "lines": "Lines + σt bands", "merges": "Merged fragments",
    "mismatch": "GT: unmatched lines",
}


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


def _posterior_palette() -> np.ndarray:
    """Palette entries: line colours, 'no line' grey, then N_LEVELS of a sequential map."""
    lines = np.column_stack([LINE_COLOURS, np.full(len(LINE_COLOURS), 255)])
    none = np.array([[150, 150, 150, 160]])
    cmap = pg.colormap.get("viridis")
    levels = cmap.getLookupTable(0.0, 1.0, N_LEVELS, alpha=True)
    return np.vstack([lines, none, levels]).astype(np.uint8)


POSTERIOR_PALETTE = _posterior_palette()
_NONE_INDEX = len(LINE_COLOURS)
_LEVEL0 = len(LINE_COLOURS) + 1


def posterior_colour_index(snap: Snapshot, mode: str, selected: int) -> np.ndarray:
    """Palette index per sample for a posterior colouring mode (vectorised)."""
    if mode == "argmax":
        arg = snap.posterior_lines[:, 0]
        return np.where(arg >= 0, arg % len(LINE_COLOURS), _NONE_INDEX).astype(np.intp)
    if mode == "selected":
        if selected < 0:
            return np.full(len(snap.entropy), _LEVEL0, dtype=np.intp)
        value = snap.posterior_of(selected)
    elif mode == "entropy":
        k = max(2, snap.posterior_lines.shape[1])
        value = snap.entropy / np.log(k)  # top-k entropy is at most log k
    else:
        raise ValueError(f"unknown posterior mode {mode!r}")
    level = np.clip(np.rint(np.nan_to_num(value) * (N_LEVELS - 1)), 0, N_LEVELS - 1)
    return (_LEVEL0 + level).astype(np.intp)


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


def distance_to_segments(p: np.ndarray, segs: np.ndarray) -> np.ndarray:
    """Euclidean distance from point ``p`` (2,) to each segment ``(L, 2, 2)``."""
    a, b = segs[:, 0], segs[:, 1]
    ab = b - a
    t = np.clip(((p - a) * ab).sum(1) / np.maximum((ab * ab).sum(1), 1e-12), 0.0, 1.0)
    return np.hypot(*(a + ab * t[:, None] - p).T)


class LinesItem(pg.GraphicsObject):
    """Every regression line and its sigma_t band, in the line's colour, as ONE item.

    One Python ``paint`` per repaint instead of one item per colour: while the engine thread
    runs, each call from Qt into Python waits for the GIL, so fewer items mean fewer waits.
    """

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[tuple[QPainterPath, QPainterPath]] = []
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

    def set_lines(self, lines: LineSet | None) -> None:
        self.prepareGeometryChange()
        self.paths = []
        self.rect = QRectF()
        if lines is not None and len(lines):
            bands = lines.band()
            segs = lines.segments()
            colour = np.arange(len(lines)) % len(LINE_COLOURS)
            for k in range(len(LINE_COLOURS)):
                mine = colour == k
                band, centre = polygons_path(bands[mine]), segments_path(segs[mine])
                self.paths.append((band, centre))
                self.rect = self.rect.united(band.boundingRect()).united(centre.boundingRect())
        self.update()

    def boundingRect(self) -> QRectF:
        return self.rect

    def paint(self, painter: object, *_args: object) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        for (band, _centre), brush in zip(self.paths, self.brushes, strict=False):
            painter.fillPath(band, brush)
        for (_band, centre), pen in zip(self.paths, self.pens, strict=False):
            painter.strokePath(centre, pen)


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


@dataclass
class Layer:
    """Graphics items drawn together, with their toggle state and a stale flag."""

    name: str
    items: list = field(default_factory=list)
    visible: bool = True
    opacity: float = 1.0
    stale: bool = False
    refresh: Callable[[], None] | None = None

    def apply(self) -> None:
        for item in self.items:
            item.setVisible(self.visible)
            item.setOpacity(self.opacity)


class PageCanvas(pg.GraphicsLayoutWidget):
    """The page view.  Signals: ``lineClicked(index)`` (-1 = empty place) and
    ``pageClicked(x, y, modifiers)`` (a click in page coordinates, for the editor)."""

    lineClicked = Signal(int)
    pageClicked = Signal(float, float, object)

    def __init__(self, parent: object = None) -> None:
        super().__init__(parent=parent)
        self.setBackground("#202020")
        self.view: pg.ViewBox = self.addViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.prep: Preparation | None = None
        self.geometry: PrepGeometry | None = None
        self.snapshot: Snapshot | None = None
        self.selected = -1
        self.posterior_mode = "argmax"
        self.initial_segments = np.zeros((0, 2, 2))
        self.redraw_ms: list[float] = []  # time spent in show_snapshot, for the report
        self.layers: dict[str, Layer] = {}
        self._build_layers()
        self.scene().sigMouseClicked.connect(self._on_click)

    # --- construction ----------------------------------------------------------------------
    def _add(self, name: str, item: object, z: float) -> None:
        item.setZValue(z)
        self.view.addItem(item)
        self.layers[name].items.append(item)

    def _build_layers(self) -> None:
        for name in LAYERS:
            shown, opacity = LAYER_DEFAULTS[name]
            self.layers[name] = Layer(name, visible=shown, opacity=opacity)
        self.page_item = FastImageItem(autoDownsample=True)
        self._add("page", self.page_item, 0)
        self.labels_item = FastImageItem(autoDownsample=True)
        self._add("labels", self.labels_item, 1)
        self.ink_item = FastImageItem(autoDownsample=True)
        ramp = np.zeros((256, 4), dtype=np.uint8)
        ramp[:, 0], ramp[:, 1], ramp[:, 2] = 230, 40, 40
        ramp[:, 3] = np.arange(256)  # downsampled ink fades instead of disappearing
        self.ink_item.setLookupTable(ramp)
        self._add("ink", self.ink_item, 2)
        # Rules, frames, stamps and the surround kept out of the ink: orange, like the ink red.
        self.non_text_item = FastImageItem(autoDownsample=True)
        ramp = np.zeros((256, 4), dtype=np.uint8)
        ramp[:, 0], ramp[:, 1], ramp[:, 2] = 255, 150, 0
        ramp[:, 3] = np.arange(256)
        self.non_text_item.setLookupTable(ramp)
        self._add("nontext", self.non_text_item, 2)
        self.page_area_item = pg.PlotCurveItem(pen=pg.mkPen("#00c853", width=3))
        self._add("pagearea", self.page_area_item, 3)
        self.region_item = pg.PlotCurveItem(pen=pg.mkPen("#ffd000", width=2, style=Qt.PenStyle.DashLine))
        self._add("regions", self.region_item, 3)
        # The graph (~150 k edges) strokes only the edges in view, thinned to a bound when
        # zoomed out: no pixmap cache to refill at every zoom step.
        self.graph_item = GraphEdgesItem()
        self._add("graph", self.graph_item, 4)
        # Items that rarely change keep a device pixmap: a snapshot redraw repaints the whole
        # view, and re-blitting 50 k samples costs tens of ms.  (Qt limits a device cache to
        # the exposed area, so zooming in stays cheap.)
        self._cache_items = [self.region_item]
        self.samples_item = DotsItem(np.array([[0, 160, 255, 255]]), size=3)
        self._add("samples", self.samples_item, 5)
        self._cache_items.append(self.samples_item)
        self.posterior_item = DotsItem(POSTERIOR_PALETTE, size=3)
        self._add("posterior", self.posterior_item, 6)
        self.initial_item = pg.PlotCurveItem(pen=pg.mkPen("#00e5ff", width=2, style=Qt.PenStyle.DashLine))
        self._add("initial", self.initial_item, 7)
        self.lines_item = LinesItem()
        self._add("lines", self.lines_item, 8)
        self.selected_item = QGraphicsPathItem()
        pen = QPen(QColor("#ffff00"), 3)
        pen.setCosmetic(True)
        self.selected_item.setPen(pen)
        self.selected_item.setZValue(20)
        self.view.addItem(self.selected_item)
        # Fragments merged into one line in stage 8 (engine.row_merge): each fragment's
        # extent, and a dotted link across the gap between them.
        self.merges_item = pg.PlotCurveItem(pen=pg.mkPen("#ff00c8", width=3))
        self._add("merges", self.merges_item, 8.5)
        self.merge_links_item = pg.PlotCurveItem(pen=pg.mkPen("#ff00c8", width=2, style=Qt.PenStyle.DotLine))
        self._add("merges", self.merge_links_item, 8.5)
        self.mismatch_item = FastImageItem(autoDownsample=True)
        self._add("mismatch", self.mismatch_item, 9)

        for item in self._cache_items:
            item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self._different_mask: np.ndarray | None = None
        self._static_edges: Preparation | None = None
        # The graph layer's arrays are built in idle turns after a preparation (hidden or not),
        # so that switching the layer on only colours and strokes the edges.
        self._warm_timer = QTimer(self)
        self._warm_timer.setSingleShot(True)
        self._warm_timer.setInterval(0)
        self._warm_timer.timeout.connect(self._warm_graph)
        self.layers["graph"].refresh = self._draw_graph
        self.layers["samples"].refresh = self._draw_samples
        self.layers["posterior"].refresh = self._draw_posterior
        self.layers["lines"].refresh = self._draw_lines
        self.layers["ink"].refresh = self._draw_ink
        self.layers["nontext"].refresh = self._draw_non_text
        for layer in self.layers.values():
            layer.apply()

    # --- layer switches ----------------------------------------------------------------------
    def set_layer_visible(self, name: str, visible: bool) -> None:
        layer = self.layers[name]
        layer.visible = visible
        if visible and layer.stale and layer.refresh is not None:
            layer.stale = False
            layer.refresh()
        layer.apply()

    def set_layer_opacity(self, name: str, opacity: float) -> None:
        self.layers[name].opacity = opacity
        self.layers[name].apply()

    def _update(self, name: str) -> None:
        """Redraw a layer now if it is shown, else remember that it is stale."""
        layer = self.layers[name]
        if layer.visible and layer.refresh is not None:
            layer.stale = False
            layer.refresh()
        else:
            layer.stale = True

    # --- data in -----------------------------------------------------------------------------
    def set_page(self, gray: np.ndarray | list[np.ndarray] | None) -> None:
        """Show a new page (an image or its :func:`image_pyramid`) and forget everything
        drawn over the previous one."""
        levels = gray if isinstance(gray, list) else None
        gray = levels[0] if levels else gray
        self.prep = None
        self.snapshot = None
        self.selected = -1
        if gray is None:
            self.page_item.clear()
        else:
            self.page_item.set_pyramid(levels or [gray], levels=(0, 255))
            h, w = gray.shape[:2]
            self.view.setRange(xRange=(0, w), yRange=(0, h), padding=0.02)
        for item in (self.labels_item, self.mismatch_item, self.ink_item, self.non_text_item):
            item.clear()
        self.page_area_item.setData([], [])
        self.graph_item.set_edges(EdgeSegments.empty())
        self._different_mask = None
        self._static_edges = None
        self.region_item.setData([], [])
        self.samples_item.clear()
        self.posterior_item.clear()
        self.set_initial_segments(np.zeros((0, 2, 2)))
        self._clear_lines()
        self.set_merges(())

    def set_prep(self, prep: Preparation, geometry: PrepGeometry | None = None) -> None:
        """The preparation of the shown page: samples, graph, regions, ink.  ``geometry`` is
        computed from ``prep`` when not given (pass it from the worker: it takes ~100 ms)."""
        geometry = geometry or prep_geometry(prep)
        self.prep = prep
        self.geometry = geometry
        self.snapshot = None
        if self.page_item.image is None or self.page_item.image.shape != prep.gray.shape:
            self.set_page(prep.gray)
            self.prep = prep
        self._different_mask = None  # the graph layer redraws its static edges from geometry
        self._static_edges = None
        segs = geometry.region_segments
        self.region_item.setData(segs[..., 0].ravel(), segs[..., 1].ravel(), connect="pairs")
        page = geometry.page_segments if geometry.page_segments is not None else np.zeros((0, 2, 2))
        self.page_area_item.setData(page[..., 0].ravel(), page[..., 1].ravel(), connect="pairs")
        self.posterior_item.set_points(prep.samples, np.full(len(prep.samples), _NONE_INDEX, dtype=np.intp))
        self._clear_lines()
        self.labels_item.clear()
        self.mismatch_item.clear()
        self.set_merges(())
        for name in ("samples", "graph", "ink", "nontext", "posterior"):
            self._update(name)
        self._warm_timer.start()

    def set_initial_segments(self, segs: np.ndarray) -> None:
        self.initial_segments = np.asarray(segs, dtype=float).reshape(-1, 2, 2)
        s = self.initial_segments
        self.initial_item.setData(s[..., 0].ravel(), s[..., 1].ravel(), connect="pairs")

    def show_snapshot(self, snap: Snapshot | None) -> None:
        """Draw the state of one snapshot on every shown layer (stale-mark the others)."""
        t0 = time.perf_counter()
        self.snapshot = snap
        if snap is not None and self.selected >= len(snap.lines):
            self.selected = -1
        for name in ("posterior", "graph", "lines"):
            self._update(name)
        self.redraw_ms.append((time.perf_counter() - t0) * 1e3)

    def set_labels(self, rgba: np.ndarray | list[np.ndarray] | None) -> None:
        """The final labels' colour overlay: an RGBA image or its :func:`image_pyramid`."""
        if rgba is None:
            self.labels_item.clear()
        else:
            self.labels_item.set_pyramid(rgba if isinstance(rgba, list) else [rgba], levels=None)

    def set_merges(self, merges: object) -> None:
        """Show the merges of fragments of a result (``Segmentation.merges``): each fragment's
        extent, and the link between the nearest ends of the two fragments."""
        parts, links = [], []
        for m in merges or ():
            a, b = np.asarray(m.fragments[0], float), np.asarray(m.fragments[1], float)
            parts += [a, b]
            d = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2)
            i, j = np.unravel_index(int(np.argmin(d)), d.shape)
            links.append(np.stack([a[i], b[j]]))
        for item, segs in ((self.merges_item, parts), (self.merge_links_item, links)):
            if segs:
                arr = np.asarray(segs, float)
                item.setData(arr[..., 0].ravel(), arr[..., 1].ravel(), connect="pairs")
            else:
                item.setData([], [])

    def set_mismatch(self, rgba: np.ndarray | list[np.ndarray] | None) -> None:
        if rgba is None:
            self.mismatch_item.clear()
        else:
            self.mismatch_item.set_pyramid(rgba if isinstance(rgba, list) else [rgba], levels=None)

    def set_posterior_mode(self, mode: str) -> None:
        if mode not in POSTERIOR_MODES:
            raise ValueError(f"unknown posterior mode {mode!r}")
        self.posterior_mode = mode
        self._update("posterior")

    def set_selected(self, index: int) -> None:
        self.selected = index
        self._draw_selected()
        if self.posterior_mode == "selected":
            self._update("posterior")

    # --- layer painters ------------------------------------------------------------------------
    def _draw_ink(self) -> None:
        if self.prep is None:
            self.ink_item.clear()
            return
        # uint8 0/255 with an alpha ramp lookup table: downsampled strokes stay visible.
        pyramid = self.geometry.ink_pyramid if self.geometry is not None else None
        if pyramid is None or pyramid[0].shape != self.prep.ink.shape:
            pyramid = ink_pyramid(self.prep.ink)
        self.ink_item.set_pyramid(pyramid, levels=None)

    def _draw_non_text(self) -> None:
        pyramid = self.geometry.non_text_pyramid if self.geometry is not None else None
        if self.prep is None or pyramid is None:
            self.non_text_item.clear()
            return
        self.non_text_item.set_pyramid(pyramid, levels=None)

    def _draw_samples(self) -> None:
        if self.prep is None:
            self.samples_item.clear()
            return
        self.samples_item.set_points(self.prep.samples)

    def _draw_posterior(self) -> None:
        snap, prep = self.snapshot, self.prep
        if prep is None or self.posterior_item.count() != len(prep.samples):
            return
        if snap is None or len(snap.entropy) != len(prep.samples):
            index = np.full(len(prep.samples), _NONE_INDEX, dtype=np.intp)
        else:
            index = posterior_colour_index(snap, self.posterior_mode, self.selected)
        self.posterior_item.set_colour_index(index)

    def _draw_graph(self) -> None:
        """Edges coloured by whether their ends share a line (arg-max) at this snapshot.

        The edges' coordinates are given to the graph item once per preparation; per snapshot
        only their classes change (and only when some edge changed class)."""
        prep, snap = self.prep, self.snapshot
        if prep is None:
            self.graph_item.set_edges(EdgeSegments.empty())
            return
        self._set_static_edges()
        edges = prep.edges
        if snap is None or len(snap.entropy) != len(prep.samples):
            different = np.zeros(len(edges), dtype=bool)
        else:
            arg = snap.posterior_lines[:, 0]
            different = arg[edges[:, 0]] != arg[edges[:, 1]]
        if self._different_mask is not None and np.array_equal(different, self._different_mask):
            return  # no edge changed class: keep the drawing
        self._different_mask = different
        self.graph_item.set_different(different)

    def _set_static_edges(self) -> None:
        """Give the graph item the preparation's edges, once per preparation."""
        if self._static_edges is not self.prep and self.prep is not None and self.geometry is not None:
            self._static_edges = self.prep
            self._different_mask = None
            self.graph_item.set_edges(self.geometry.edges)

    @Slot()
    def _warm_graph(self) -> None:
        """One idle step of readying the graph layer: its edges, then (next turn) the edges to
        draw at the current view; nothing is drawn while the layer is hidden."""
        if self.prep is None or self.geometry is None:
            return
        if self._static_edges is not self.prep:
            self._set_static_edges()
            self._warm_timer.start()
        elif not self.graph_item.has_selection():
            self.graph_item.update_cull(force=True)

    def _clear_lines(self) -> None:
        self.lines_item.set_lines(None)
        self.selected_item.setPath(QPainterPath())

    def _draw_lines(self) -> None:
        snap = self.snapshot
        if snap is None or len(snap.lines) == 0:
            self._clear_lines()
            return
        self.lines_item.set_lines(snap.lines)
        self._draw_selected()

    def _draw_selected(self) -> None:
        snap = self.snapshot
        if snap is None or not (0 <= self.selected < len(snap.lines)):
            self.selected_item.setPath(QPainterPath())
            return
        one = snap.lines.take([self.selected])
        path = polygons_path(one.band())
        path.addPath(segments_path(one.segments()))
        self.selected_item.setPath(path)

    # --- picking -------------------------------------------------------------------------------
    def current_lines(self) -> LineSet | None:
        return None if self.snapshot is None else self.snapshot.lines

    def pixel_size(self) -> float:
        """Page pixels per screen pixel at the current zoom."""
        px = self.view.viewPixelSize()
        return float(max(px[0], px[1], 1e-6))

    def line_at(self, x: float, y: float, tolerance_px: float = 8.0) -> int:
        lines = self.current_lines()
        if lines is None or len(lines) == 0:
            return -1
        d = distance_to_segments(np.array([x, y]), lines.segments())
        # Inside a band counts as a hit too: sigma_t is the line's own width.
        d = d - lines.sigma_t
        best = int(np.argmin(d))
        return best if d[best] <= tolerance_px * self.pixel_size() else -1

    def _on_click(self, event: object) -> None:
        if event.button() != Qt.MouseButton.LeftButton or event.isAccepted():
            return
        pos: QPointF = self.view.mapSceneToView(event.scenePos())
        self.pageClicked.emit(float(pos.x()), float(pos.y()), event.modifiers())
        self.lineClicked.emit(self.line_at(pos.x(), pos.y()))

    def close_items(self) -> None:
        """Remove every item before the widget goes (pyqtgraph items outliving it crash)."""
        for layer in self.layers.values():
            for item in layer.items:
                self.view.removeItem(item)
            layer.items.clear()
        self.view.removeItem(self.selected_item)
