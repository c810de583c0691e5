"""Small widgets of the main window: the message banner, the run controls under the canvas
and the status bar's fields."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSlider, QStatusBar, QStyle, QToolButton, QWidget


def scale_text(prep: Any) -> str:
    """The status bar's scale field: ``H_cc 38 px · W_cc 90 px · row pitch 80 px (2.1 H_cc) · page 78 %``."""
    text = f"H_cc {prep.stats.h_cc:.0f} px · W_cc {prep.stats.w_cc:.0f} px"
    if getattr(prep, "row_pitch", ()):
        from engine.pitch import page_pitch

        pitch = page_pitch(prep)
        if pitch is not None:
            text += f" · row pitch {pitch:.0f} px ({pitch / max(prep.stats.h_cc, 1e-9):.1f} H_cc)"
    area = getattr(prep, "page_area", None)
    if area is not None and area.size:
        text += f" · page {100.0 * np.count_nonzero(area) / area.size:.0f} %"
    return text


class Banner(QWidget):
    """A dismissable message strip over the top of ``host`` (the canvas' area): errors never
    pop up modal dialogs.

    It floats over the host instead of taking a place in its layout: a message shown or hidden
    then never resizes the canvas and the plots below it. In the layout, each message moved
    the page on screen by the strip's height and made every plot lay out its axes again: on a
    Run all, a warning at each page's end and its removal at the next page's start were two
    full repaints of the window (~45 ms each, offscreen) in the GUI thread."""

    def __init__(self, host: QWidget) -> None:
        super().__init__(host)
        host.installEventFilter(self)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.clicked.connect(self.hide)
        layout.addWidget(self.label, 1)
        layout.addWidget(close)
        self.setAutoFillBackground(True)
        self.hide()

    level = "error"
    #: A sticky message (about the session, not the page) stays when another page is opened.
    sticky = False

    def show_message(self, text: str, level: str = "error", sticky: bool = False) -> None:
        colour = {"error": "#b71c1c", "warning": "#8d6e00", "info": "#1b5e20"}[level]
        self.setStyleSheet(f"background: {colour}; color: white;")
        self.label.setText(text)
        self.level, self.sticky = level, sticky
        self._place()
        self.show()
        self.raise_()

    def _place(self) -> None:
        """Across the host's top, as tall as the wrapped message needs."""
        width = self.parentWidget().width()
        height = self.heightForWidth(width) if self.hasHeightForWidth() else -1
        self.setGeometry(0, 0, width, height if height > 0 else self.sizeHint().height())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.parentWidget() and event.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""

    def error(self) -> str:
        """The shown message if it is an error (warnings and notes are not failures)."""
        return self.text() if self.level == "error" else ""


#: The run buttons: key, text, icon, tooltip (the window connects each to its slot).
RUN_BUTTONS = (
    ("run", "Run", QStyle.StandardPixmap.SP_MediaPlay, "Run EM to convergence (F5)"),
    ("pause", "Pause", QStyle.StandardPixmap.SP_MediaPause, "Pause after this snapshot"),
    ("step", "EM step", QStyle.StandardPixmap.SP_MediaSeekForward, "One EM iteration (F6)"),
    ("sweep", "Sweep", QStyle.StandardPixmap.SP_MediaSkipForward, "One message-passing sweep (F7)"),
    ("stop", "Stop", QStyle.StandardPixmap.SP_MediaStop, "Cancel the run (Esc)"),
    ("reset", "Reset", QStyle.StandardPixmap.SP_BrowserReload, "Forget the run, back to the initial lines"),
)


class RunControls(QWidget):
    """Run, pause, step, sweep, stop, reset; the slider over the snapshots and its label."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 2, 4, 2)
        style = self.style()
        self.buttons: dict[str, QPushButton] = {}
        for key, text, icon, tip in RUN_BUTTONS:
            button = QPushButton(style.standardIcon(icon), text)
            button.setToolTip(tip)
            button.setObjectName(f"button-{key}")
            row.addWidget(button)
            self.buttons[key] = button
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName("snapshot-slider")
        self.slider.setRange(0, 0)
        row.addWidget(self.slider, 1)
        self.label = QLabel("no run")
        self.label.setMinimumWidth(190)
        row.addWidget(self.label)

    def set_states(self, has_page: bool, running: bool, mode: str | None, can_stop: bool, run_mode: str) -> None:
        """Enable what can be pressed: ``mode`` is the running job's (None when none runs)."""
        self.buttons["run"].setEnabled(has_page and mode != run_mode)
        self.buttons["pause"].setEnabled(running and mode == run_mode)
        self.buttons["step"].setEnabled(has_page and mode != run_mode)
        self.buttons["sweep"].setEnabled(has_page and mode != run_mode)
        self.buttons["stop"].setEnabled(can_stop)
        self.buttons["reset"].setEnabled(has_page)

    def set_snapshot_count(self, n: int, current: int) -> None:
        """The slider's range and position, without announcing the move."""
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, n - 1))
        self.slider.setValue(max(0, current))
        self.slider.blockSignals(False)


class StatusFields:
    """The status bar's permanent fields: stage, scale, iteration, lines, elapsed time."""

    def __init__(self, bar: QStatusBar) -> None:
        self.stage = QLabel("no page")
        self.iteration = QLabel("")
        self.lines = QLabel("")
        self.elapsed = QLabel("")
        # The page's text scale and page area (stage 1-2): every size of the method hangs on
        # H_cc, so a wrong one (specks, rules) is the first thing to see.
        self.scale = QLabel("")
        self.scale.setToolTip("H_cc, W_cc: the text's height and width (pixels) that scale "
                              "every size parameter; page: the share of the image found "
                              "to be the page (layer 'Page area')")
        for w in (self.stage, self.scale, self.iteration, self.lines, self.elapsed):
            w.setMinimumWidth(110)
            bar.addPermanentWidget(w)
