"""The KL plot's log axis and the parameter panel's number display."""

from __future__ import annotations

import re
from math import log10

import numpy as np
import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage, QPainter

from engine.params import Parameters
from tlgui.panels import DecadeAxis, ParameterPanel, PlotsPanel, format_parameter, log_tick_label

DECADE = re.compile(r"^(1|10|10⁻?[¹²³⁴⁵⁶⁷⁸⁹][⁰¹²³⁴⁵⁶⁷⁸⁹]*)$")


def drawn_labels(axis: DecadeAxis) -> list[tuple[QRectF, str]]:
    """The tick labels the axis draws now, with their rectangles (pyqtgraph's own layout)."""
    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _flags, text in specs[2]] if specs else []


def assert_readable(labels: list[tuple[QRectF, str]]) -> None:
    rects = [rect for rect, _ in labels]
    touching = [(labels[i][1], labels[j][1]) for i in range(len(rects)) for j in range(i + 1, len(rects))
                if rects[i].intersects(rects[j])]
    assert not touching, f"overlapping labels {touching} of {[t for _, t in labels]}"


@pytest.fixture
def plots(qtbot: object) -> PlotsPanel:
    panel = PlotsPanel()
    qtbot.addWidget(panel)
    panel.resize(800, 170)  # about the window's: each plot ~100 px high inside its frame
    panel.show()
    qtbot.waitExposed(panel)
    yield panel
    panel.close_plots()


def show_kl(qtbot: object, plots: PlotsPanel, lo: float, hi: float, n: int = 20) -> DecadeAxis:
    x = np.arange(n, dtype=float)
    kl = np.geomspace(hi, lo, n)
    kl[0] = np.nan  # as the session's series: no change at the first snapshot
    plots.reset_ranges()
    plots.set_series({"x": x, "kl": kl, "lines": x, "theta": np.ones((n, 3)), "loglik": x})
    qtbot.wait(10)
    return plots.plots["kl"].getAxis("left")


@pytest.mark.parametrize("height", [170, 400])
@pytest.mark.parametrize(("lo", "hi"), [(1e-5, 1.0), (1e-3, 1e-2), (1e-4, 3e-4), (0.02, 0.9), (1e-12, 1.0)])
def test_kl_axis_labels_decades_only_never_overlapping(qtbot: object, plots: PlotsPanel, height: int,
                                                       lo: float, hi: float) -> None:
    plots.resize(800, height)
    axis = show_kl(qtbot, plots, lo, hi)
    assert isinstance(axis, DecadeAxis) and axis.logMode
    labels = drawn_labels(axis)
    texts = [t for _, t in labels]
    assert_readable(labels)
    assert all(DECADE.match(t) for t in texts), texts
    assert 2 <= len(texts) <= axis.height() / axis.label_extent(), texts
    # Every decade of the data's range is labelled when there is room for all of them.
    if height == 400 and (lo, hi) == (1e-5, 1.0):
        assert {"10⁻⁵", "10⁻⁴", "10⁻³", "10⁻²", "10⁻¹", "1"} <= set(texts)


@pytest.mark.parametrize(("lo", "hi"), [(1e-3, 1e-2), (0.02, 0.9), (1e-4, 3e-4), (1e-300, 1.0)])
def test_kl_axis_zoomed_by_hand_stays_readable(qtbot: object, plots: PlotsPanel, lo: float, hi: float) -> None:
    # Views the panel never sets itself: pyqtgraph's log ticks labelled 0.002 … 0.009 here.
    axis = show_kl(qtbot, plots, 1e-5, 1.0)
    plots.plots["kl"].setYRange(log10(lo), log10(hi), padding=0)
    qtbot.wait(10)
    labels = drawn_labels(axis)
    assert_readable(labels)
    assert 1 <= len(labels) <= 4, [t for _, t in labels]


def test_log_tick_label() -> None:
    assert [log_tick_label(v) for v in (-5, -1, 0, 1, 2, 12)] == ["10⁻⁵", "10⁻¹", "1", "10", "10²", "10¹²"]
    assert [log_tick_label(n + log10(m)) for n, m in ((-3, 2), (-1, 5), (0, 2), (1, 5))] == [
        "2·10⁻³", "5·10⁻¹", "2", "50"]


def test_format_parameter() -> None:
    assert format_parameter(1 / 3) == "0.3333"
    assert format_parameter(10 / 3) == "3.333"
    assert [format_parameter(v) for v in (40.0, 2.5, 1e-3, 1e-12, 12345.6)] == [
        "40.0", "2.5", "0.001", "1e-12", "12350.0"]
    assert format_parameter(7) == "7" and format_parameter("bethe") == "bethe"
    assert format_parameter((0.9407, 0.0526, 1 / 3)) == "0.9407, 0.0526, 0.3333"
    assert format_parameter(1 / 3, None) == str(1 / 3)


def test_parameter_fields_round_but_keep_the_exact_value(qtbot: object) -> None:
    exact = Parameters().replace(moments=(2 / 3, 0.3, 1 / 30))
    assert exact.filter_sigma_across == 1 / 3
    panel = ParameterPanel(exact)
    qtbot.addWidget(panel)
    field = panel.editors["filter_sigma_across"]
    assert field.text() == "0.3333"
    assert panel.editors["filter_sigma_along"].text() == "3.333"
    assert panel.editors["moments"].text() == "0.6667, 0.3, 0.03333"
    assert "0.3333333333333333" in field.toolTip()
    # Untouched fields read back exactly, also after another field was edited.
    assert Parameters.from_dict(panel.values()) == exact
    panel.editors["damping"].setText("0.3")
    assert panel.params == exact.replace(damping=0.3)
    assert panel.params.filter_sigma_across == 1 / 3 and panel.params.moments == (2 / 3, 0.3, 1 / 30)
    # An edit is taken as typed; set_params shows (and keeps) the new exact values.
    field.setText("0.25")
    assert panel.params.filter_sigma_across == 0.25
    panel.set_params(exact)
    assert field.text() == "0.3333" and panel.params == exact
    field.setText("0.33")
    assert panel.params.filter_sigma_across == 0.33
    field.setText("0.3333")  # typed back to the text shown: the exact value behind it again
    assert panel.params.filter_sigma_across == 1 / 3
    field.setText("0.33333")
    assert panel.params.filter_sigma_across == 0.33333


@pytest.mark.parametrize(("count", "pixels"), [(45, 120), (3, 300), (250, 120)])
def test_line_count_axis_labels_whole_numbers_only(qtbot: object, plots: PlotsPanel, count: int,
                                                   pixels: int) -> None:
    """The line-count plot never labels 44.6 lines (its view of a constant count is ±1 wide)."""
    plots.resize(900, pixels + 60)
    plots.show()
    x = np.arange(4.0)
    series = {"x": x, "kl": np.full(4, 0.1), "lines": np.full(4, float(count)),
              "theta": np.zeros((4, 3)), "loglik": np.zeros(4)}
    plots.set_series(series, marker=1.0)
    qtbot.wait(50)
    texts = [text for _rect, text in drawn_labels(plots.plots["lines"].getAxis("left"))]
    assert texts and all(re.fullmatch(r"-?\d+", t) for t in texts), texts
    assert str(count) in texts or len(texts) >= 2


def test_page_names_lose_what_every_page_shares() -> None:
    from tlgui.pagelist import short_names

    assert short_names(["TestamentsDePoilus_will_AD78_0005-0.jpg", "TestamentsDePoilus_will_AN_0001-0.jpg",
                        "TestamentsDePoilus_will_AD78_0038-1.jpg"]) == ["AD78_0005-0", "AN_0001-0", "AD78_0038-1"]
    assert short_names(["5_d12c2_default.jpg", "12_dbc9b_default.jpg"]) == ["5_d12c2", "12_dbc9b"]
    assert short_names(["page0.png", "page1.png"]) == ["page0", "page1"]  # no separator in "page"
    assert short_names(["a_", "a_b"]) == ["a_", "a_b"]  # one would be empty
    assert short_names(["only_one.png"]) == ["only_one.png"]
