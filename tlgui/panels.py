"""Side and bottom panels: layers, parameters, ground truth, convergence plots (the line table is
:mod:`tlgui.linetable`)."""

from __future__ import annotations

import json
from dataclasses import fields
from math import ceil, floor, isfinite, log10
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontMetricsF, QImage, QPixmap
from PySide6.QtWidgets import (
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
    QVBoxLayout,
    QWidget,
)

from engine.params import CHOICES, PREPARATION_FIELDS, PRESETS, ParameterError, Parameters

from .canvas import LAYER_DEFAULTS, LAYER_TITLES, LAYERS, POSTERIOR_MODES

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
        self.scale = ColourScale()
        grid.addWidget(self.scale, len(LAYERS) + 2, 0, 1, 2)
        grid.setRowStretch(len(LAYERS) + 3, 1)  # spare height below the rows, not between them

    def _on_toggled(self, checked: bool) -> None:
        name = self.sender().objectName().removeprefix("layer-")
        self.visibilityChanged.emit(name, checked)

    def _on_slider(self, value: int) -> None:
        name = self.sender().objectName().removeprefix("opacity-")
        self.opacityChanged.emit(name, value / 100.0)

    def _on_mode(self, index: int) -> None:
        self.scale.set_mode(POSTERIOR_MODES[index])
        self.posteriorModeChanged.emit(POSTERIOR_MODES[index])


#: What the posterior's sequential colours mean in each mode: (low end, high end, tooltip).
SCALE_TEXTS = {
    "entropy": ("0 certain", "1 uncertain", "entropy of each sample's posterior over its top lines, "
                "divided by log k (1: spread evenly over the k lines kept)"),
    "selected": ("0", "1", "posterior probability of the selected line at each sample"),
}


class ColourScale(QWidget):
    """The colour bar of the posterior's sequential colouring (entropy, selected line's
    posterior): the palette's levels left to right, with what the two ends mean.  Hidden in
    the arg-max mode, whose colours are the lines'."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from .canvas import _LEVEL0, N_LEVELS, POSTERIOR_PALETTE

        self.levels = np.ascontiguousarray(POSTERIOR_PALETTE[_LEVEL0: _LEVEL0 + N_LEVELS, :3])
        layout = QGridLayout(self)
        layout.setContentsMargins(0, 2, 0, 2)
        layout.setVerticalSpacing(0)
        self.bar = QLabel()
        self.bar.setObjectName("colour-scale")
        self.bar.setFixedHeight(12)
        self.bar.setScaledContents(True)
        image = QImage(self.levels.tobytes(), N_LEVELS, 1, 3 * N_LEVELS, QImage.Format.Format_RGB888)
        self.bar.setPixmap(QPixmap.fromImage(image.copy()))
        self.low, self.high = QLabel(), QLabel()
        self.high.setAlignment(Qt.AlignmentFlag.AlignRight)
        layout.addWidget(self.bar, 0, 0, 1, 2)
        layout.addWidget(self.low, 1, 0)
        layout.addWidget(self.high, 1, 1)
        self.set_mode("argmax")

    def set_mode(self, mode: str) -> None:
        texts = SCALE_TEXTS.get(mode)
        self.setVisible(texts is not None)
        if texts is not None:
            self.low.setText(texts[0])
            self.high.setText(texts[1])
            self.setToolTip(texts[2])


# --------------------------------------------------------------------------------------------- params

#: Significant digits of a float parameter in its field (the value itself keeps all of them).
SHOWN_DIGITS = 4


def format_parameter(value: object, digits: int | None = SHOWN_DIGITS) -> str:
    """A parameter's text in the panel: floats rounded to ``digits`` significant digits and
    still written as floats (``0.3333``, ``40.0``, ``1e-12``); ``digits=None``: exactly, the
    shortest text that reads back as the same number.  A tuple is comma-separated."""
    if isinstance(value, tuple):
        return ", ".join(format_parameter(v, digits) for v in value)
    if isinstance(value, float) and digits is not None and isfinite(value):
        return repr(float(f"{value:.{digits}g}"))
    return str(value)


class ParameterPanel(QScrollArea):
    """Every Parameters field with its default; validates as you type.

    ``changed(params)`` fires with each valid set.  An invalid value shows the engine's
    ParameterError message and keeps the last valid parameters.  Floats are shown rounded
    (:func:`format_parameter`); a field whose text is still the one shown reads back as the
    exact value behind it, so that only an edit changes a parameter.
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
        #: Text fields' (text shown, exact value) as last set by the panel.
        self.shown: dict[str, tuple[str, Any]] = {}
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
                editor = QLineEdit()
                self._show(f.name, editor, value)
                editor.textChanged.connect(self._on_edit)
            editor.setObjectName(f"param-{f.name}")
            editor.setToolTip(f"default: {format_parameter(getattr(defaults, f.name), None)}")
            label = f.name + (" ◆" if f.name in PREPARATION_FIELDS else "")
            self.form.addRow(label, editor)
            self.editors[f.name] = editor
        self.form.addRow(QLabel("◆ needs a new preparation"))

    def _show(self, name: str, editor: QLineEdit, value: object) -> None:
        text = format_parameter(value)
        self.shown[name] = (text, value)
        editor.setText(text)

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {"preset_name": self.preset.currentText()}
        for name, editor in self.editors.items():
            if isinstance(editor, QComboBox):
                out[name] = editor.currentText()
            elif isinstance(editor, QCheckBox):
                out[name] = editor.isChecked()
            elif editor.text() == self.shown[name][0]:
                out[name] = self.shown[name][1]  # untouched: the exact value, not the rounded text
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
                self._show(name, editor, value)
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

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
#: Room a log-axis label needs along the axis, in text heights (widths on a horizontal axis).
LABEL_ROOM = 1.5


def log_tick_label(value: float) -> str:
    """The label of the log-axis tick at ``value`` (log10 units): 10⁻³, 1, 10, 2·10⁻⁴, 0.5."""
    exponent = floor(value + 1e-9)
    mantissa = round(10 ** (value - exponent))
    if mantissa == 10:
        exponent, mantissa = exponent + 1, 1
    decade = {0: "1", 1: "10"}.get(exponent, "10" + str(exponent).translate(_SUPERSCRIPT))
    if mantissa == 1:
        return decade
    return str(mantissa * 10**exponent) if exponent in (0, 1) else f"{mantissa}·{decade}"


def nice_step(minimum: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, … that is at least ``minimum``."""
    scale = 1
    while True:
        for m in (1, 2, 5):
            if m * scale >= minimum:
                return m * scale
        scale *= 10


def decade_view(lo: float, hi: float) -> tuple[float, float]:
    """A log view (log10 units) of ``lo``-``hi`` widened to whole decades, the ticks a
    :class:`DecadeAxis` labels, and by a tenth of that either side, room for the end labels."""
    y0, y1 = floor(lo), ceil(hi)
    y1 = max(y1, y0 + 1)
    pad = 0.1 * (y1 - y0)
    return y0 - pad, y1 + pad


class DecadeAxis(pg.AxisItem):
    """A log axis labelled at whole decades only — every one, or every 2nd, 5th, 10th… so that
    no two labels touch — with unlabelled ticks at the other decades and, when they are far
    enough apart, at 2-9 × 10ⁿ.  A view narrower than two labelled decades also labels
    2 and 5 × 10ⁿ when they fit.  (pyqtgraph's own log ticks label every 2-9 × 10ⁿ of a view
    one or two decades high, on top of each other in a plot 100 px high.)  Linear mode is
    pyqtgraph's."""

    def __init__(self, orientation: str, **kwargs: Any) -> None:
        super().__init__(orientation, **kwargs)
        self.setStyle(maxTextLevel=0)  # text on the first level only: the labelled ticks

    def label_extent(self) -> float:
        """A label's size along the axis, in pixels."""
        metrics = QFontMetricsF(self.style["tickFont"] or QFont())
        if self.orientation in ("left", "right"):
            return metrics.height()
        return metrics.horizontalAdvance(log_tick_label(-10.7))

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[tuple[float | None, list[float]]]:
        if not self.logMode:
            return super().tickValues(minVal, maxVal, size)
        lo, hi = sorted((minVal, maxVal))
        if not (isfinite(lo) and isfinite(hi)) or hi <= lo or size <= 0:
            return []
        per_decade = size / (hi - lo)  # pixels
        extent = self.label_extent()
        room = LABEL_ROOM * extent
        # A label must fit inside the axis: pyqtgraph drops one that sticks out of the plot.
        margin = 0.5 * extent / per_decade
        step = nice_step(room / per_decade)
        decades = range(ceil(lo), floor(hi) + 1)
        labelled = [float(n) for n in decades if n % step == 0 and lo + margin <= n <= hi - margin]
        others = [float(n) for n in decades if float(n) not in labelled]
        inside = [n + log10(m) for n in range(floor(lo), ceil(hi)) for m in range(2, 10)]
        inside = [v for v in inside if lo <= v <= hi]
        if len(labelled) < 2 and log10(2) * per_decade >= room:  # 1, 2, 5, 10 do not touch
            labelled = sorted(labelled + [v for v in inside if round(10 ** (v % 1)) in (2, 5)
                                          and lo + margin <= v <= hi - margin])
        minor = [v for v in inside if v not in labelled] if log10(10 / 9) * per_decade >= 3 else []
        return [(float(step), labelled), (1.0, others), (None, minor)]

    def logTickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        shift = log10(scale) if scale > 0 else 0.0
        return [log_tick_label(v + shift) for v in values]


class IntegerAxis(pg.AxisItem):
    """A linear axis of counts: ticks at whole numbers only (pyqtgraph labelled a line count
    44.6, 44.8, ... when it stayed at 45)."""

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, list[float]]]:
        levels = [(spacing, [v for v in values if float(v).is_integer()])
                  for spacing, values in super().tickValues(minVal, maxVal, size) if spacing >= 1]
        levels = [(spacing, values) for spacing, values in levels if values]
        if levels or not (isfinite(minVal) and isfinite(maxVal)):
            return levels
        return [(1.0, [float(v) for v in range(ceil(min(minVal, maxVal)), floor(max(minVal, maxVal)) + 1)])]


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
            axes = {"left": DecadeAxis("left")} if key == "kl" else \
                {"left": IntegerAxis("left")} if key == "lines" else None
            plot = pg.PlotWidget(title=title, axisItems=axes)
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
        #: A message over the plots when they have nothing to show (a saved result).
        self.note = QLabel(self)
        self.note.setObjectName("plots-note")
        self.note.setStyleSheet("color: #eeeeee; background: rgba(0, 0, 0, 170); padding: 6px;")
        self.note.hide()

    def show_note(self, text: str | None) -> None:
        """Show ``text`` over the middle of the plots (None: no message)."""
        if not text:
            self.note.hide()
            return
        self.note.setText(text)
        self.note.adjustSize()
        self._place_note()
        self.note.show()
        self.note.raise_()

    def _place_note(self) -> None:
        self.note.move(max(0, (self.width() - self.note.width()) // 2),
                       max(0, (self.height() - self.note.height()) // 2))

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._place_note()

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
            if key == "kl":
                y0, y1 = decade_view(y0, y1)
        self.ranges[key] = (x0, x1, y0, y1)
        self.plots[key].setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0)

    def reset_ranges(self) -> None:
        """Empty plots with a sensible frame (a log axis on pyqtgraph's default is unreadable)."""
        self.ranges.clear()
        for key, plot in self.plots.items():
            plot.setRange(xRange=(0, 10), yRange=decade_view(-6, 0) if key == "kl" else (0, 1), padding=0)

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

    def show_score(self, score: Any, gt_name: str, n_lines: int | None = None) -> None:
        """The score; ``n_lines``: the result's lines (the line table's rows), named apart when
        some of them hold no scored ink (the metric counts only lines with ink)."""
        extra = ""
        if n_lines is not None and n_lines != score.m:
            extra = f" ({n_lines} lines, {n_lines - score.m} without scored ink)"
        self.label.setText(
            f"<b>{gt_name}</b><br>DR {score.dr:.3f} &nbsp; RA {score.ra:.3f} &nbsp; "
            f"<b>FM {score.fm:.3f}</b><br>{score.o2o} one-to-one of {score.n} GT / {score.m} result lines{extra}")

    def show_text(self, text: str) -> None:
        self.label.setText(text)
