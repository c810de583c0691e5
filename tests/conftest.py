"""Test set-up: Qt runs offscreen, before any QApplication exists; the GUI tests' window."""

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402 - after the environment is set

#: Short runs keep the GUI tests fast; the method itself is tested elsewhere.
FAST = {"max_em_iterations": 8}


@pytest.fixture
def window(qtbot: object, tmp_path: Path) -> object:
    """A shown main window whose settings (parameters, recent files, autosaved edits, saved
    results) go to the test's own folder, with short runs."""
    from PySide6.QtCore import QSettings

    from engine.params import Parameters
    from tlgui.window import MainWindow

    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "config"))
    win = MainWindow()
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    win.param_panel.set_params(Parameters().replace(**FAST))
    yield win
    win.shutdown()
