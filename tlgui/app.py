"""``tlgui [PAGE | FOLDER | PAGE PAGE ...]``: the window, on one page or on a document (a
folder of pages or of ``tlseg`` outputs, or several pages).  ``tlgui --screenshot OUT.png
[--run] PAGE``: render it offscreen.

The screenshot mode opens the page, optionally runs the method to the end, saves a PNG of the
whole window and exits; it is how the window is checked without a display.  On a real platform
(``QT_QPA_PLATFORM=xcb``, e.g. under ``xvfb-run``) ``--grab screen`` takes the pixels the window
system shows instead of rendering the widgets: the check that the window really opens there.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtGui import QGuiApplication, QImage
    from PySide6.QtWidgets import QWidget

#: Where ``--screenshot`` takes the window's pixels from (see :func:`grab`).
GRAB_SOURCES = ("widget", "screen")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tlgui", description="Watch and steer the text-line segmentation of a handwritten page.")
    parser.add_argument("page", nargs="*", help="page image to open; a folder or several pages open "
                        "as a document (a page list)")
    parser.add_argument("--screenshot", metavar="OUT.png",
                        help="save the window to this PNG and exit (offscreen unless QT_QPA_PLATFORM is set)")
    parser.add_argument("--grab", choices=GRAB_SOURCES, default="widget",
                        help="with --screenshot: render the widgets (default), or take the window's "
                             "pixels from the screen (needs a real platform such as xcb)")
    parser.add_argument("--run", action="store_true", help="with --screenshot: run to the end first")
    parser.add_argument("--initial-lines", metavar="FILE",
                        help="start from these lines, loaded once the page is prepared (File > Load "
                             "initial lines: a tlseg JSON, PAGE/ALTO XML, label image or .dat)")
    parser.add_argument("--lock-initial-lines", action="store_true",
                        help="with --initial-lines: lock every line read from FILE")
    parser.add_argument("--gt", metavar="FILE",
                        help="ground truth to load (label image, .dat, PAGE/ALTO XML)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="with --screenshot: give up after this many seconds")
    parser.add_argument("--size", default="1600x1000", help="with --screenshot: window size WxH")
    return parser


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Run a real event loop (as ``app.exec`` would) until ``condition()`` or ``timeout`` s."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    deadline = time.monotonic() + timeout
    check = QTimer()
    check.setInterval(20)
    check.timeout.connect(lambda: (condition() or time.monotonic() > deadline) and loop.quit())
    check.start()
    if not condition():
        loop.exec()
    check.stop()
    return bool(condition())


def grab(app: QGuiApplication, window: QWidget, source: str) -> QImage:
    """The window as an image: its widgets rendered (``widget``), or what the screen shows of it
    (``screen``), once it is mapped and its last paint has reached the window system."""
    from PySide6.QtGui import QImage

    if source == "widget":
        return window.grab().toImage()
    handle = window.windowHandle()
    if not wait_until(lambda: handle is not None and handle.isExposed(), 10.0):
        return QImage()  # never shown: nothing to grab
    window.repaint()
    app.sync()
    return window.screen().grabWindow(window.winId()).toImage()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.screenshot:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from .window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("tlgui")
    app.setOrganizationName("tlgui")
    window = MainWindow()
    # Direct connection: the threads are stopped while the event loop is still able to
    # finish, not from a queued call that would never run.
    app.aboutToQuit.connect(window.shutdown, Qt.ConnectionType.DirectConnection)
    if args.screenshot:
        w, h = (int(v) for v in args.size.lower().split("x"))
        window.resize(w, h)
    window.show()
    window.open_paths(args.page)
    if args.initial_lines:
        window.load_initial_lines(args.initial_lines, args.lock_initial_lines, when_prepared=True)
    if not args.screenshot:
        code = app.exec()
        window.shutdown()
        return code
    return screenshot(app, window, args)


def screenshot(app: object, window: object, args: argparse.Namespace) -> int:
    """Open, optionally run, then save the window as a PNG; 1 when something went wrong."""
    ok = True
    if args.page:
        ok = wait_until(lambda: not window.is_busy() and (window.session.prep is not None
                                                          or window.session.segmentation is not None)
                        or bool(window.banner.error()), args.timeout)
        if ok and args.initial_lines and window.session.prep is not None:
            ok = wait_until(lambda: not window.is_busy() and window.undo.undoText() == "load initial lines"
                            or bool(window.banner.error()), args.timeout) and not window.banner.error()
        if ok and args.run and window.session.prep is not None:
            window.run()
            ok = wait_until(lambda: not window.is_busy(), args.timeout)
        if ok and args.gt:
            window.load_ground_truth(args.gt)
            ok = wait_until(lambda: not window.is_busy(), args.timeout)
    wait_until(window.settled, 10.0)  # the draw timer paints the last state
    app.processEvents()
    image = grab(app, window, args.grab)
    out = Path(args.screenshot)
    saved = not image.isNull() and image.save(str(out))
    print(f"{'wrote' if saved else 'could not write'} {out} ({image.width()}×{image.height()}, "
          f"platform {app.platformName()}, grab {args.grab})"
          + ("" if ok else " — timed out or failed: " + (window.banner.error() or "timeout")))
    window.shutdown()
    window.close()
    return 0 if (saved and ok) else 1


if __name__ == "__main__":
    raise SystemExit(main())
