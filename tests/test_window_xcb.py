"""The real window on X11: ``tlgui --screenshot --grab screen`` on the xcb platform under Xvfb.

Qt picks its platform once per process and this session runs offscreen, so the window opens
in a child process under ``xvfb-run``.  Without Xvfb or the xcb libraries the test is skipped,
unless ``TLGUI_REQUIRE_XCB=1``: scripts/test.sh sets it where scripts/setup.sh can install them
(as root), so that there a missing library fails instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "resources" / "sample" / "170025120000003_0074.jpg"
SIZE = (1600, 1000)


def xcb_plugin_missing_libraries() -> list[str]:
    """The shared libraries the xcb platform plugin needs that this machine lacks (ldd)."""
    from PySide6.QtCore import QLibraryInfo

    plugins = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath))
    found = subprocess.run(["ldd", str(plugins / "platforms" / "libqxcb.so")],
                           capture_output=True, text=True, check=False).stdout
    return sorted(set(re.findall(r"^\s*(\S+) => not found", found, re.MULTILINE)))


def skip_or_fail(reason: str) -> None:
    if os.environ.get("TLGUI_REQUIRE_XCB") == "1":
        pytest.fail(reason + " (TLGUI_REQUIRE_XCB=1: scripts/setup.sh --xvfb should have installed it)")
    pytest.skip(reason + "; install with: bash scripts/setup.sh --xvfb as root")


def test_window_opens_on_xcb_and_shows_the_page(tmp_path: Path) -> None:
    xvfb_run = shutil.which("xvfb-run")
    if xvfb_run is None or shutil.which("xauth") is None:
        skip_or_fail("no xvfb-run/xauth (Debian packages xvfb, xauth)")
    missing = xcb_plugin_missing_libraries()
    if missing:
        skip_or_fail(f"the Qt xcb platform plugin lacks {', '.join(missing)}")
    out = tmp_path / "window-xcb.png"
    env = dict(os.environ, QT_QPA_PLATFORM="xcb", XDG_CONFIG_HOME=str(tmp_path / "config"))
    env.pop("DISPLAY", None)
    done = subprocess.run(
        [xvfb_run, "-a", "-s", "-screen 0 1920x1080x24",
         sys.executable, "-m", "tlgui.app", "--screenshot", str(out), "--grab", "screen", "--run",
         "--size", "{}x{}".format(*SIZE), "--timeout", "40", str(SAMPLE)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90, check=False)
    report = f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr[-3000:]}"
    assert done.returncode == 0, report
    assert "platform xcb, grab screen" in done.stdout, report
    image = cv2.imread(str(out))
    assert image is not None, report
    assert image.shape[:2] == (SIZE[1], SIZE[0])
    # Not a blank or uniform frame: the window's chrome and, in the middle, the page.
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 100
    h, w = image.shape[:2]
    middle = cv2.cvtColor(image[h // 4: h // 2, w // 3: 2 * w // 3], cv2.COLOR_BGR2GRAY)
    assert middle.std() > 10 and 60 < np.median(middle) < 230, "no page in the canvas"
