"""The window's actions as one table: menu, text, shortcut, icon, toolbar, and the name of the
handler each one calls.  :func:`build_actions` makes the menus and the toolbar from it; the
window supplies the handlers by name, so adding a command is one row and one method."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QIcon, QKeySequence, QUndoStack
from PySide6.QtWidgets import QMainWindow, QMenu, QStyle, QToolButton

from .edit import EDIT_MODES
from .exporting import EXPORTS

ICONS = Path(__file__).resolve().parent.parent / "resources" / "icons"
SP = QStyle.StandardPixmap

Shortcut = str | QKeySequence.StandardKey | tuple[str, ...] | None


@dataclass(frozen=True)
class ActionSpec:
    """One command: its menu, text, shortcut(s), handler name, icon and whether the toolbar
    shows it.  ``key`` names the action in :attr:`Actions.by_key`."""

    key: str
    menu: str
    text: str
    handler: str
    shortcut: Shortcut = None
    icon: SP | str | None = None
    toolbar: bool = False
    separator: bool = False  # a separator before it (in its menu and, if shown, the toolbar)


#: Menus in order; "Export" and the edit modes, undo and recent files are built apart.
MENUS = ("&File", "E&xport", "&Edit", "&Run", "&Go")

ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("open", "&File", "&Open page…", "choose_page", QKeySequence.StandardKey.Open,
               SP.SP_DialogOpenButton, toolbar=True),
    ActionSpec("open_folder", "&File", "Open &folder…", "choose_folder", "Ctrl+Shift+O", SP.SP_DirOpenIcon,
               toolbar=True),
    ActionSpec("open_files", "&File", "Open &pages as a document…", "choose_files"),
    ActionSpec("ground_truth", "&File", "Load &ground truth…", "choose_ground_truth", "Ctrl+G", separator=True),
    ActionSpec("save_edits", "&File", "Save edited lines…", "choose_save_edits"),
    ActionSpec("load_lines", "&File", "Load &initial lines…", "choose_load_lines", "Ctrl+I"),
    ActionSpec("quit", "&File", "&Quit", "close", QKeySequence.StandardKey.Quit, separator=True),
    ActionSpec("delete_selected", "&Edit", "Delete selected line", "delete_selected",
               QKeySequence.StandardKey.Delete, separator=True),
    ActionSpec("rotate_left", "&Edit", "Rotate selected line −2°", "rotate_left", "["),
    ActionSpec("rotate_right", "&Edit", "Rotate selected line +2°", "rotate_right", "]"),
    ActionSpec("lock_selected", "&Edit", "Lock / unlock selected line", "toggle_lock_selected", "Ctrl+L"),
    ActionSpec("revert_edits", "&Edit", "Revert to the prepared lines", "revert_edits"),
    ActionSpec("run", "&Run", "Run", "run", "F5"),
    ActionSpec("pause", "&Run", "Pause", "pause", "F8"),
    ActionSpec("step_em", "&Run", "EM step", "step_em", "F6"),
    ActionSpec("step_sweep", "&Run", "Sweep step", "step_sweep", "F7"),
    ActionSpec("stop", "&Run", "Stop", "stop", "Esc"),
    ActionSpec("reset", "&Run", "Reset", "reset"),
    ActionSpec("run_all", "&Run", "Run &all pages", "run_all", "Ctrl+F5", SP.SP_MediaSeekForward, toolbar=True,
               separator=True),
    ActionSpec("next_page", "&Go", "Next page", "next_page", ("PgDown", "Ctrl+Right")),
    ActionSpec("previous_page", "&Go", "Previous page", "previous_page", ("PgUp", "Ctrl+Left")),
)

MODE_TITLES = {"off": "View (no editing)", "select": "Select / move", "add": "Add line",
               "split": "Split line", "merge": "Merge lines", "delete": "Delete line"}


@dataclass
class Actions:
    """What :func:`build_actions` made."""

    by_key: dict[str, QAction] = field(default_factory=dict)
    modes: dict[str, QAction] = field(default_factory=dict)
    exports: dict[str, QAction] = field(default_factory=dict)
    recent_menu: QMenu | None = None
    undo: QAction | None = None
    redo: QAction | None = None


def icon(name: str) -> QIcon:
    path = ICONS / f"{name}.svg"
    return QIcon(str(path)) if path.exists() else QIcon()


def _make(window: QMainWindow, spec: ActionSpec, handler: Callable[[], object]) -> QAction:
    style = window.style()
    if isinstance(spec.icon, SP):
        action = QAction(style.standardIcon(spec.icon), spec.text, window)
    elif isinstance(spec.icon, str):
        action = QAction(icon(spec.icon), spec.text, window)
    else:
        action = QAction(spec.text, window)
    if isinstance(spec.shortcut, tuple):
        action.setShortcuts([QKeySequence(k) for k in spec.shortcut])
    elif spec.shortcut is not None:
        action.setShortcut(spec.shortcut)
    action.triggered.connect(handler)
    return action


def build_actions(window: QMainWindow, handlers: Mapping[str, Callable[..., object]], undo: QUndoStack,
                  on_mode: Callable[[], None], on_export: Callable[[], None]) -> Actions:
    """Menus and the main toolbar of ``window``; ``handlers`` maps each handler name of
    :data:`ACTIONS` to its callable; ``on_mode`` / ``on_export`` get the triggering action's
    data (an edit mode, an export kind) from ``sender()``."""
    out = Actions()
    bar = window.menuBar()
    menus = {title: bar.addMenu(title) for title in MENUS}
    toolbar = window.addToolBar("Main")
    toolbar.setObjectName("toolbar-main")
    toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    style = window.style()

    out.undo = undo.createUndoAction(window, "&Undo")
    out.undo.setShortcut(QKeySequence.StandardKey.Undo)
    out.undo.setIcon(style.standardIcon(SP.SP_ArrowBack))
    out.redo = undo.createRedoAction(window, "&Redo")
    out.redo.setShortcut(QKeySequence.StandardKey.Redo)
    out.redo.setIcon(style.standardIcon(SP.SP_ArrowForward))
    menus["&Edit"].addAction(out.undo)
    menus["&Edit"].addAction(out.redo)
    menus["&Edit"].addSeparator()
    for i, mode in enumerate(EDIT_MODES):
        action = QAction(icon("view" if mode == "off" else mode), MODE_TITLES[mode], window)
        action.setCheckable(True)
        action.setData(mode)
        action.setShortcut(f"Ctrl+{i}")
        action.triggered.connect(on_mode)
        menus["&Edit"].addAction(action)
        out.modes[mode] = action
    out.modes["off"].setChecked(True)

    for kind, (title, _filter, _suffix) in EXPORTS.items():
        action = QAction(title, window)
        action.setData(kind)
        action.triggered.connect(on_export)
        menus["E&xport"].addAction(action)
        out.exports[kind] = action

    for spec in ACTIONS:
        menu = menus[spec.menu]
        if spec.separator:
            menu.addSeparator()
        action = _make(window, spec, handlers[spec.handler])
        menu.addAction(action)
        out.by_key[spec.key] = action
        if spec.key == "open_files":  # the recent files follow the ways to open
            out.recent_menu = menu.addMenu("Open &recent")

    # The toolbar: open, export, edit modes, undo/redo, run all.
    toolbar.addAction(out.by_key["open"])
    toolbar.addAction(out.by_key["open_folder"])
    export_button = QToolButton()
    export_button.setText("Export")
    export_button.setMenu(menus["E&xport"])
    export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    toolbar.addWidget(export_button)
    toolbar.addSeparator()
    for action in out.modes.values():
        toolbar.addAction(action)
    toolbar.addSeparator()
    toolbar.addAction(out.undo)
    toolbar.addAction(out.redo)
    for spec in ACTIONS:
        if spec.toolbar and spec.key not in ("open", "open_folder"):
            toolbar.addSeparator()
            toolbar.addAction(out.by_key[spec.key])
    return out
