"""Side and bottom panels: layers, line table, parameters, ground truth, convergence plots."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPixmap, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGraphicsItem,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSlider,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from engine.model import LineSet
from engine.params import CHOICES, PREPARATION_FIELDS, PRESETS, ParameterError, Parameters

from .canvas import LAYER_DEFAULTS, LAYER_TITLES, LAYERS, LINE_COLOURS, POSTERIOR_MODES, line_colour
from .session import lines_table

# --------------------------------------------------------------------------------------------- layers


class LayerPanel(QWidget):
    """One row per layer: a check box and an opacity slider; plus the posterior colouring."""

    visibilityChanged = Signal(str, bool)
    opacityChanged = Signal(str, float)
    posteriorModeChanged = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        grid = QGridLayout(self)
        grid.setContentsMargins(4, 4, 4, 4)
        self.checks: dict[str, QCheckBox] = {}
        self.sliders: dict[str, QSlider] = {}
        for row, name in enumerate(LAYERS):
            shown, opacity = LAYER_DEFAULTS[name]
            check = QCheckBox(LAYER_TITLES[name])
            check.setChecked(shown)
            check.setObjectName(f"layer-{name}")
            check.toggled.connect(self._on_toggled)
            slider = QSlider(Qt.Orientation.Horizontal)
            slider.setRange(0, 100)
            slider.setValue(int(round(opacity * 100)))
            slider.setObjectName(f"opacity-{name}")
            slider.setMaximumWidth(90)
            slider.valueChanged.connect(self._on_slider)
            grid.addWidget(check, row, 0)
            grid.addWidget(slider, row, 1)
            self.checks[name] = check
            self.sliders[name] = slider
        self.mode = QComboBox()
        self.mode.addItems(["arg-max line colour", "selected line's posterior", "entropy"])
        self.mode.currentIndexChanged.connect(self._on_mode)
        grid.addWidget(QLabel("Posterior shows"), len(LAYERS), 0)
        grid.addWidget(self.mode, len(LAYERS) + 1, 0, 1, 2)

    def _on_toggled(self, checked: bool) -> None:
        name = self.sender().objectName().removeprefix("layer-")
        self.visibilityChanged.emit(name, checked)

    def _on_slider(self, value: int) -> None:
        name = self.sender().objectName().removeprefix("opacity-")
        self.opacityChanged.emit(name, value / 100.0)

    def _on_mode(self, index: int) -> None:
        self.posteriorModeChanged.emit(POSTERIOR_MODES[index])


# --------------------------------------------------------------------------------------------- lines

COLUMNS = ("id", "region", "a", "b", "c", "σt", "σs", "prior")


def format_cell(col: int, v: float) -> str:
    if col in (0, 1):
        return str(int(v))
    if col == 2:
        return f"{v:+.3f}"
    return f"{v:.3f}" if col == 7 else f"{v:.1f}"


class LineTableModel(QStandardItemModel):
    """The lines of the displayed state.

    A C++ item model on purpose: a Python ``data()`` would be called thousands of times per
    repaint, each call waiting for the GIL while the engine thread computes.
    """

    def __init__(self) -> None:
        super().__init__(0, len(COLUMNS))
        self.setHorizontalHeaderLabels(list(COLUMNS))
        self.values = np.zeros((0, 8))
        self._icons = [_swatch(line_colour(i)) for i in range(len(LINE_COLOURS))]

    def set_lines(self, lines: LineSet | None) -> None:
        values = lines_table(lines) if lines is not None else np.zeros((0, 8))
        if values.shape == self.values.shape and np.array_equal(values, self.values):
            return
        old_rows = len(self.values)
        self.values = values
        if len(values) != old_rows:
            self.setRowCount(len(values))
        align = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        for r, row in enumerate(values):
            for col, v in enumerate(row):
                text = format_cell(col, v)
                item = self.item(r, col)
                if item is None:  # a new row: create its items once, then only change text
                    item = QStandardItem(text)
                    item.setTextAlignment(align)
                    if col == 0:
                        item.setIcon(self._icons[r % len(LINE_COLOURS)])
                    self.setItem(r, col, item)
                elif item.text() != text:
                    item.setText(text)


def _swatch(colour: QColor) -> QIcon:
    pixmap = QPixmap(10, 10)
    pixmap.fill(colour)
    return QIcon(pixmap)


class LineTable(QTableView):
    """Line table; selection goes both ways with the canvas (``lineSelected``)."""

    lineSelected = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table_model = LineTableModel()
        self.setModel(self.table_model)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(18)
        self.horizontalHeader().setDefaultSectionSize(52)
        self.selectionModel().selectionChanged.connect(self._on_selection)
        self._quiet = False

    def set_lines(self, lines: LineSet | None, selected: int) -> None:
        self._quiet = True
        self.table_model.set_lines(lines)
        self.select_line(selected)
        self._quiet = False

    def select_line(self, index: int) -> None:
        self._quiet = True
        if 0 <= index < self.table_model.rowCount():
            self.selectRow(index)
            self.scrollTo(self.table_model.index(index, 0))
        else:
            self.clearSelection()
        self._quiet = False

    def _on_selection(self, *_args: object) -> None:
        if self._quiet:
            return
        rows = self.selectionModel().selectedRows()
        self.lineSelected.emit(rows[0].row() if rows else -1)


# --------------------------------------------------------------------------------------------- params

class ParameterPanel(QScrollArea):
    """Every Parameters field with its default; validates as you type.

    ``changed(params)`` fires with each valid set.  An invalid value shows the engine's
    ParameterError message and keeps the last valid parameters.
    """

    changed = Signal(object)

    def __init__(self, params: Parameters, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        body = QWidget()
        outer = QVBoxLayout(body)
        self.form = QFormLayout()
        # A preset loads all its values into the fields (then each field can be flipped).
        self.preset = QComboBox()
        self.preset.setObjectName("param-preset")
        self.preset.addItems(list(PRESETS))
        self.preset.setCurrentText(params.preset_name)
        self.preset.setToolTip("default: the engine's defaults; paper: every stage as printed "
                               "(tlseg params --diff paper lists the switches)")
        self.preset.currentTextChanged.connect(self.load_preset)
        self.form.addRow("preset", self.preset)
        outer.addLayout(self.form)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setObjectName("param-message")
        outer.addWidget(self.message)
        reset = QPushButton("Reset to defaults")
        reset.clicked.connect(self.reset_defaults)
        outer.addWidget(reset)
        outer.addStretch(1)
        self.setWidget(body)
        self.params = params
        self.prepared_with: Parameters | None = None
        self.editors: dict[str, QWidget] = {}
        defaults = Parameters()
        for f in fields(Parameters):
            if f.name in ("_extra", "preset_name"):  # preset_name: the preset box above
                continue
            value = getattr(params, f.name)
            if f.name in CHOICES:
                editor = QComboBox()
                editor.addItems(list(CHOICES[f.name]))
                editor.setCurrentText(value)
                editor.currentTextChanged.connect(self._on_edit)
            elif isinstance(getattr(defaults, f.name), bool):
                editor = QCheckBox()
                editor.setChecked(value)
                editor.toggled.connect(self._on_edit)
            else:
                editor = QLineEdit(self._format(value))
                editor.textChanged.connect(self._on_edit)
            editor.setObjectName(f"param-{f.name}")
            editor.setToolTip(f"default: {self._format(getattr(defaults, f.name))}")
            label = f.name + (" ◆" if f.name in PREPARATION_FIELDS else "")
            self.form.addRow(label, editor)
            self.editors[f.name] = editor
        self.form.addRow(QLabel("◆ needs a new preparation"))

    @staticmethod
    def _format(value: object) -> str:
        if isinstance(value, tuple):
            return ", ".join(str(v) for v in value)
        return str(value)  # str(float) is the shortest text that reads back as the same number

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"preset_name": self.preset.currentText()}
        for name, editor in self.editors.items():
            if isinstance(editor, QComboBox):
                out[name] = editor.currentText()
            elif isinstance(editor, QCheckBox):
                out[name] = editor.isChecked()
            else:
                text = editor.text().strip()
                if name == "moments":
                    out[name] = [_number(t) for t in text.replace(";", ",").split(",") if t.strip()]
                else:
                    out[name] = _number(text)
        return out

    def _on_edit(self, *_args: object) -> None:
        try:
            params = Parameters.from_dict(self.values())
        except ParameterError as exc:
            self.message.setStyleSheet("color: #e53935;")
            self.message.setText(str(exc))
            return
        except (TypeError, ValueError) as exc:
            self.message.setStyleSheet("color: #e53935;")
            self.message.setText(f"invalid value: {exc}")
            return
        self.params = params
        self.show_status()
        self.changed.emit(params)

    def needs_preparation(self) -> bool:
        """Whether the current parameters differ from the preparation's in a stage 1-6 field."""
        if self.prepared_with is None:
            return False
        return any(getattr(self.params, f) != getattr(self.prepared_with, f) for f in PREPARATION_FIELDS)

    def show_status(self) -> None:
        if self.needs_preparation():
            self.message.setStyleSheet("color: #f9a825;")
            self.message.setText("needs a new preparation (done on Run)")
        else:
            self.message.setStyleSheet("")
            self.message.setText("")

    def set_params(self, params: Parameters) -> None:
        self.preset.blockSignals(True)
        self.preset.setCurrentText(params.preset_name)
        self.preset.blockSignals(False)
        for name, editor in self.editors.items():
            value = getattr(params, name)
            editor.blockSignals(True)
            if isinstance(editor, QComboBox):
                editor.setCurrentText(value)
            elif isinstance(editor, QCheckBox):
                editor.setChecked(value)
            else:
                editor.setText(self._format(value))
            editor.blockSignals(False)
        self._on_edit()

    def reset_defaults(self) -> None:
        self.set_params(Parameters())

    def load_preset(self, name: str) -> None:
        """Load every value of preset ``name`` into the fields."""
        self.set_params(Parameters.preset(name))

    def to_json(self) -> str:
        return json.dumps(self.params.to_dict(), sort_keys=True)


def _number(text: str) -> int | float | str:
    """Parse a typed number (int when it looks like one); leave other text for the validator."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


# --------------------------------------------------------------------------------------------- plots


class PlotsPanel(QWidget):
    """KL change, line count, θ0 θ1 θ2 and log-likelihood over the run, with a marker at the
    displayed snapshot.  Curves are rebuilt from the session's series (cheap: one point per
    snapshot); the marker moves alone when scrubbing."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.plots: dict[str, pg.PlotWidget] = {}
        self.curves: dict[str, list[pg.PlotDataItem]] = {}
        self.markers: dict[str, pg.InfiniteLine] = {}
        specs = {
            "kl": ("KL change", [("kl", "#4fc3f7")]),
            "lines": ("lines", [("lines", "#aed581")]),
            "theta": ("θ0 θ1 θ2", [("θ0", "#ef5350"), ("θ1", "#ffca28"), ("θ2", "#ab47bc")]),
            "loglik": ("log-likelihood", [("ll", "#90caf9")]),
        }
        for key, (title, curves) in specs.items():
            plot = pg.PlotWidget(title=title)
            plot.setMinimumHeight(120)
            plot.showGrid(x=True, y=True, alpha=0.2)
            plot.setLabel("bottom", "iteration")
            for name in ("left", "bottom"):
                # Axis text is replayed from a QPicture on every repaint (tens of ms while the
                # engine holds the GIL); a device cache redraws it only when the axis changes.
                plot.getAxis(name).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
            if key == "theta":
                plot.addLegend(offset=(-5, 5))
            # No point symbols: each would be one more item to paint while the engine runs.
            self.curves[key] = [plot.plot([], [], pen=pg.mkPen(colour, width=2), name=name)
                                for name, colour in curves]
            marker = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#ffff00", width=1))
            marker.setVisible(False)
            plot.addItem(marker)
            self.plots[key] = plot
            self.markers[key] = marker
            layout.addWidget(plot)
        self.plots["kl"].setLogMode(y=True)
        for plot in self.plots.values():
            plot.disableAutoRange()
        self.ranges: dict[str, tuple[float, float, float, float]] = {}
        self.reset_ranges()

    #: What each plot shows: series name and, for theta, its column.
    SOURCES: dict[str, list[tuple[str, int | None]]] = {
        "kl": [("kl", None)], "lines": [("lines", None)],
        "theta": [("theta", 0), ("theta", 1), ("theta", 2)], "loglik": [("loglik", None)],
    }

    def set_series(self, series: dict[str, np.ndarray], marker: float | None = None) -> None:
        """Every plot at once (see :meth:`update_plot` for one at a time)."""
        for key in self.plots:
            self.update_plot(key, series, marker)

    def update_plot(self, key: str, series: dict[str, np.ndarray], marker: float | None) -> None:
        """New data and marker for one plot.  The window updates the plots on successive
        timer ticks, so that one repaint never has to redraw all four while the engine runs."""
        x = series["x"]
        xs, ys = [], []
        for curve, (name, col) in zip(self.curves[key], self.SOURCES[key], strict=True):
            y = series[name] if col is None else series[name][:, col]
            if key == "kl":
                y = np.maximum(y, 1e-12)  # log axis: no zeros
            ok = np.isfinite(y)  # the first snapshot has no KL change (NaN)
            curve.setData(x[ok], y[ok])
            xs.append(x[ok])
            ys.append(y[ok])
        self._fit_range(key, np.concatenate(xs), np.concatenate(ys))
        self.markers[key].setVisible(marker is not None)
        if marker is not None:
            self.markers[key].setValue(marker)

    def _fit_range(self, key: str, x: np.ndarray, y: np.ndarray) -> None:
        """Widen the view only when the data leaves it, in generous steps.

        Autoranging changed the axes at every update, and a changed axis re-lays out its
        tick text, the slowest part of a plot's repaint while the engine runs.
        """
        if key == "kl":
            y = np.log10(y)  # the view of a log plot is in log10 units
        if len(x) == 0:
            return
        x0, x1, y0, y1 = self.ranges.get(key, (0.0, 0.0, np.inf, -np.inf))
        lo, hi = float(y.min()), float(y.max())
        need_x = x.max() > x1
        need_y = lo < y0 or hi > y1
        if not (need_x or need_y):
            return
        if need_x:
            x1 = float(10 * np.ceil((x.max() + 1) / 10))
        if need_y:
            span = max(hi - lo, 1e-9 if key != "lines" else 2.0)
            y0, y1 = lo - 0.25 * span, hi + 0.25 * span
        self.ranges[key] = (x0, x1, y0, y1)
        self.plots[key].setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0)

    def reset_ranges(self) -> None:
        """Empty plots with a sensible frame (a log axis on pyqtgraph's default is unreadable)."""
        self.ranges.clear()
        for key, plot in self.plots.items():
            plot.setRange(xRange=(0, 10), yRange=(-6, 0) if key == "kl" else (0, 1), padding=0)

    def close_plots(self) -> None:
        for plot in self.plots.values():
            plot.close()


# --------------------------------------------------------------------------------------------- ground truth


class GroundTruthPanel(QWidget):
    """DR / RA / FM of the final labels against a loaded ground truth."""

    loadRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        row = QHBoxLayout()
        button = QPushButton("Load ground truth…")
        button.clicked.connect(self.loadRequested)
        row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)
        self.label = QLabel("no ground truth loaded")
        self.label.setObjectName("gt-score")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.label)

    def show_score(self, score: Any, gt_name: str) -> None:
        self.label.setText(
            f"<b>{gt_name}</b><br>DR {score.dr:.3f} &nbsp; RA {score.ra:.3f} &nbsp; "
            f"<b>FM {score.fm:.3f}</b><br>{score.o2o} one-to-one of {score.n} GT / {score.m} result lines")

    def show_text(self, text: str) -> None:
        self.label.setText(text)
