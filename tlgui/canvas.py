"""The page canvas: one pan/zoom view of the page with the method's state drawn over it.

Every layer is created once and then only updated, shown or hidden.  Layers that are hidden
are not updated at all; they are marked stale and refreshed when shown, so a run costs only
what is visible.  Costs that scale with the page (50 k samples, 150 k edges, 20 Mpx images)
are kept vectorised: one dots item recoloured through a palette index and rasterised with
NumPy, one graph item that strokes only a bounded number of the edges in view, images
downsampled with OpenCV (the items are in :mod:`tlgui.items`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QColor, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem

from engine.model import LineSet, Preparation, Snapshot

from .geometry import EdgeSegments, PrepGeometry, ink_pyramid, prep_geometry
from .items import (
    LINE_COLOURS,
    DotsItem,
    FastImageItem,
    GraphEdgesItem,
    LinesItem,
    bend_shapes,
    distance_to_segments,
    line_colour,
    polygons_path,
    premultiplied_argb,
    segments_path,
)

pg.setConfigOptions(imageAxisOrder="row-major", antialias=False)

__all__ = ["LAYERS", "LAYER_DEFAULTS", "LAYER_TITLES", "LINE_COLOURS", "POSTERIOR_MODES", "POSTERIOR_PALETTE",
           "DotsItem", "Layer", "PageCanvas", "distance_to_segments", "line_colour", "posterior_colour_index",
           "premultiplied_argb"]

N_LEVELS = 64
POSTERIOR_MODES = ("argmax", "selected", "entropy")

LAYERS = ("page", "pagearea", "labels", "ink", "nontext", "regions", "blocks", "graph", "samples", "posterior",
          "initial", "filled", "lines", "merges", "mismatch", "truth")
#: Layer -> (shown at start, opacity at start).
LAYER_DEFAULTS: dict[str, tuple[bool, float]] = {
    "page": (True, 1.0), "pagearea": (True, 0.9), "labels": (True, 0.55), "ink": (False, 0.6),
    "nontext": (False, 0.7), "regions": (True, 0.8), "blocks": (True, 0.9),
    "graph": (False, 0.5), "samples": (False, 0.8), "posterior": (True, 0.9),
    "initial": (True, 0.9), "filled": (True, 0.9), "lines": (True, 0.8), "merges": (True, 0.9), "mismatch": (True, 0.8),
    "truth": (True, 0.9),
}
LAYER_TITLES = {
    "page": "Page", "pagearea": "Page area", "labels": "Final labels", "ink": "Ink mask",
    "nontext": "Non-text ink", "regions": "Text regions", "blocks": "Blocks: angle, row pitch",
    "graph": "Delaunay graph", "samples": "Samples", "posterior": "Posterior",
    "initial": "Initial lines", "filled": "Rows filled (row_fill)", "lines": "Lines + σt bands",
    "merges": "Merged fragments",
    "mismatch": "GT: unmatched result lines", "truth": "GT: line outlines",
}



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
        #: The page's own geometry, and the MRF edges ``(E, 2)`` of the current run when
        #: given lines led its regions away from the page's (None: the page's own edges).
        self.page_geometry: PrepGeometry | None = None
        self.run_edges: np.ndarray | None = None
        self.snapshot: Snapshot | None = None
        self.shown_lines: LineSet | None = None
        self.shown_bends: dict = {}
        self.selected = -1
        self.posterior_mode = "argmax"
        self.initial_segments = np.zeros((0, 2, 2))
        self.initial_locked = np.zeros(0, dtype=bool)
        self.initial_anchored = np.zeros(0, dtype=bool)
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
        # Each block's (region's) text direction as an arrow through its centre, labelled with
        # its angle and the row pitch of its initial lines (engine.blocks.block_summary).
        self.block_item = pg.PlotCurveItem(pen=pg.mkPen("#ffd000", width=3))
        self._add("blocks", self.block_item, 11)
        self.block_text_group = pg.ItemGroup()
        self._add("blocks", self.block_text_group, 11)
        self.block_texts: list[pg.TextItem] = []
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
        # Locked lines (EM keeps them where the user put them): solid, thicker, magenta.
        self.initial_locked_item = pg.PlotCurveItem(pen=pg.mkPen("#ff4081", width=3))
        self._add("initial", self.initial_locked_item, 7)
        # Anchored lines (another tool's file gave them; EM keeps each on its row): solid cyan.
        self.initial_anchored_item = pg.PlotCurveItem(pen=pg.mkPen("#00e5ff", width=2))
        self._add("initial", self.initial_anchored_item, 7)
        # Lines stage 6 added for rows of a block's period that no blob reached
        # (engine.row_fill), drawn over the initial lines they are among.
        self.filled_item = pg.PlotCurveItem(pen=pg.mkPen("#76ff03", width=4, style=Qt.PenStyle.DashDotLine))
        self._add("filled", self.filled_item, 7.5)
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
        # The ground truth's lines as outlines: green where a result line matched one-to-one,
        # red where none did (white before the page is scored).
        self.truth_items = {}
        for key, colour in (("matched", "#00e676"), ("unmatched", "#ff1744"), ("unscored", "#ffffff")):
            item = pg.PlotCurveItem(pen=pg.mkPen(colour, width=2 if key != "matched" else 1))
            self._add("truth", item, 10)
            self.truth_items[key] = item

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
        self.shown_lines = None
        self.selected = -1
        if gray is None:
            self.page_item.clear()
        else:
            self.page_item.set_pyramid(levels or [gray], levels=(0, 255))
            h, w = gray.shape[:2]
            self.view.setRange(xRange=(0, w), yRange=(0, h), padding=0.02)
        for item in (self.labels_item, self.mismatch_item, self.ink_item, self.non_text_item):
            item.clear()
        self.set_truth_outlines(None)
        self.page_area_item.setData([], [])
        self.graph_item.set_edges(EdgeSegments.empty())
        self._different_mask = None
        self._static_edges = None
        self.region_item.setData([], [])
        self.filled_item.setData([], [])
        self.set_blocks((), 0.0)
        self.samples_item.clear()
        self.posterior_item.clear()
        self.set_initial_lines(np.zeros((0, 2, 2)))
        self._clear_lines()
        self.set_merges(())

    def set_prep(self, prep: Preparation, geometry: PrepGeometry | None = None) -> None:
        """The preparation of the shown page: samples, graph, regions, ink.  ``geometry`` is
        computed from ``prep`` when not given (pass it from the worker: it takes ~100 ms)."""
        geometry = geometry or prep_geometry(prep)
        self.prep = prep
        self.geometry = self.page_geometry = geometry
        self.run_edges = None
        self.snapshot = None
        self.shown_lines = None
        if self.page_item.image is None or self.page_item.image.shape != prep.gray.shape:
            self.set_page(prep.gray)
            self.prep = prep
        self._different_mask = None  # the graph layer redraws its static edges from geometry
        self._static_edges = None
        self._draw_regions()
        filled = getattr(prep, "filled_rows", None)
        filled = np.asarray(() if filled is None else filled, float).reshape(-1, 2, 2)
        self.filled_item.setData(filled[..., 0].ravel(), filled[..., 1].ravel(), connect="pairs")
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

    @Slot(object, object)
    def set_run_regions(self, edges: np.ndarray | None, geometry: PrepGeometry | None) -> None:
        """The regions and MRF edges ``(E, 2)`` the current run's EM works on, when the lines
        it started from led them away from the page's own (engine.given_regions;
        ``geometry`` from tlgui.geometry.run_geometry): the region, block and graph layers
        draw them. ``None, None``: the page's own again (a new run, Reset)."""
        page = self.page_geometry
        if self.prep is None or page is None or (geometry is None and self.run_edges is None):
            return
        if geometry is None or edges is None:
            self.geometry, self.run_edges = page, None
        else:
            self.geometry = dataclasses.replace(geometry, ink_pyramid=page.ink_pyramid,
                                                non_text_pyramid=page.non_text_pyramid,
                                                page_segments=page.page_segments)
            self.run_edges = edges
        self._draw_regions()
        self._static_edges = None  # the graph item takes the new edges
        self._different_mask = None
        self._update("graph")

    def _draw_regions(self) -> None:
        """The region outlines and block labels of :attr:`geometry`."""
        segs = self.geometry.region_segments
        self.region_item.setData(segs[..., 0].ravel(), segs[..., 1].ravel(), connect="pairs")
        self.set_blocks(self.geometry.block_labels, 3.0 * float(self.prep.stats.h_cc))

    def set_blocks(self, labels: tuple[tuple[float, float, float, float, str], ...], half: float) -> None:
        """The blocks layer: per block ``(x, y, dx, dy, text)`` (tlgui.geometry.block_labels),
        a segment of ``2 * half`` pixels along its text direction and its label."""
        for text in self.block_texts:
            text.setParentItem(None)
            if text.scene() is not None:
                text.scene().removeItem(text)
        self.block_texts = []
        segs = np.array([[[x - dx * half, y - dy * half], [x + dx * half, y + dy * half]]
                         for x, y, dx, dy, _t in labels], float).reshape(-1, 2, 2)
        self.block_item.setData(segs[..., 0].ravel(), segs[..., 1].ravel(), connect="pairs")
        for x, y, _dx, _dy, label in labels:
            text = pg.TextItem(label, color="#ffd000", fill=pg.mkBrush(0, 0, 0, 160), anchor=(0.5, 1.2))
            text.setParentItem(self.block_text_group)
            text.setPos(x, y)
            self.block_texts.append(text)

    def set_initial_lines(self, segs: np.ndarray, locked: np.ndarray | None = None,
                          anchored: np.ndarray | None = None) -> None:
        """The initial lines as page segments ``(L, 2, 2)``; ``locked`` ``(L,)`` bool: the
        lines EM keeps in place, drawn apart (solid magenta); ``anchored`` ``(L,)`` bool: free
        lines EM keeps on their rows (``LineSet.anchored``), solid cyan; the others dashed cyan."""
        self.initial_segments = np.asarray(segs, dtype=float).reshape(-1, 2, 2)
        s = self.initial_segments
        self.initial_locked = np.zeros(len(s), bool) if locked is None else np.asarray(locked, bool).copy()
        self.initial_anchored = (np.zeros(len(s), bool) if anchored is None
                                 else np.asarray(anchored, bool) & ~self.initial_locked)
        free = s[~self.initial_locked & ~self.initial_anchored]
        fixed, held = s[self.initial_locked], s[self.initial_anchored]
        self.initial_item.setData(free[..., 0].ravel(), free[..., 1].ravel(), connect="pairs")
        self.initial_locked_item.setData(fixed[..., 0].ravel(), fixed[..., 1].ravel(), connect="pairs")
        self.initial_anchored_item.setData(held[..., 0].ravel(), held[..., 1].ravel(), connect="pairs")

    def show_initial_items(self, shown: bool) -> None:
        """Show the initial lines' items (hidden while the editor's handles stand for them)."""
        visible = self.layers["initial"].visible and shown
        for item in self.layers["initial"].items:
            item.setVisible(visible)

    def show_snapshot(self, snap: Snapshot | None, lines: LineSet | None = None,
                      bends: dict | None = None) -> None:
        """Draw the state of one snapshot on every shown layer (stale-mark the others);
        ``lines``: the lines to draw instead of the snapshot's (the final lines, after the
        last snapshot), with ``bends`` the paths of those joined from a file's locked pieces
        (``Segmentation.paths``)."""
        t0 = time.perf_counter()
        self.snapshot = snap
        self.shown_lines = lines if lines is not None else (None if snap is None else snap.lines)
        self.shown_bends = (bends or {}) if lines is not None else {}
        if self.shown_lines is not None and self.selected >= len(self.shown_lines):
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

    def set_truth_outlines(self, outlines: dict[str, np.ndarray] | None) -> None:
        """The ground truth's line outlines as segment pairs ``(S, 2, 2)`` per kind
        ("matched", "unmatched", "unscored"); None: no ground truth."""
        for key, item in self.truth_items.items():
            segs = np.zeros((0, 2, 2)) if outlines is None else outlines.get(key, np.zeros((0, 2, 2)))
            item.setData(segs[..., 0].ravel(), segs[..., 1].ravel(), connect="pairs")

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
        edges = prep.edges if self.run_edges is None else self.run_edges
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
        lines = self.shown_lines
        if lines is None or len(lines) == 0:
            self._clear_lines()
            return
        self.lines_item.set_lines(lines, self.shown_bends)
        self._draw_selected()

    def _draw_selected(self) -> None:
        lines = self.shown_lines
        if lines is None or not (0 <= self.selected < len(lines)):
            self.selected_item.setPath(QPainterPath())
            return
        one = lines.take([self.selected])
        bend = self.shown_bends.get(self.selected)
        if bend is not None and len(bend) >= 2:
            segs, quads = bend_shapes(bend, float(one.sigma_t[0]))
            path = polygons_path(quads)
            path.addPath(segments_path(segs))
        else:
            path = polygons_path(one.band())
            path.addPath(segments_path(one.segments()))
        self.selected_item.setPath(path)

    # --- picking -------------------------------------------------------------------------------
    def current_lines(self) -> LineSet | None:
        return self.shown_lines

    def pixel_size(self) -> float:
        """Page pixels per screen pixel at the current zoom."""
        px = self.view.viewPixelSize()
        return float(max(px[0], px[1], 1e-6))

    def line_at(self, x: float, y: float, tolerance_px: float = 8.0) -> int:
        lines = self.current_lines()
        if lines is None or len(lines) == 0:
            return -1
        d = distance_to_segments(np.array([x, y]), lines.segments())
        for k, bend in self.shown_bends.items():  # a bent line: the nearest of its path's pieces
            if 0 <= k < len(d) and len(bend) >= 2:
                d[k] = distance_to_segments(np.array([x, y]), bend_shapes(bend, 0.0)[0]).min()
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
