"""The line table: one row per line of what the window shows (the initial lines while they are
edited, a snapshot's lines, or the final lines), with its lock and ground-truth match."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPixmap, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QTableView, QWidget

from engine.model import LineSet

from .items import LINE_COLOURS, line_colour
from .session import lines_table

COLUMNS = ("id", "region", "a", "b", "c", "σt", "σs", "prior", "of line", "lock", "GT")
PIECE_COLUMN, LOCK_COLUMN, GT_COLUMN = COLUMNS.index("of line"), COLUMNS.index("lock"), COLUMNS.index("GT")


def format_cell(col: int, v: float) -> str:
    if col in (0, 1):
        return str(int(v))
    if col == 2:
        return f"{v:+.3f}"
    return f"{v:.3f}" if col == 7 else f"{v:.1f}"


def _swatch(colour: QColor) -> QIcon:
    pixmap = QPixmap(10, 10)
    pixmap.fill(colour)
    return QIcon(pixmap)


class LineTableModel(QStandardItemModel):
    """The lines shown: numbers, lock (a check box when the lines can be edited) and whether
    the line matched a ground-truth line one-to-one (empty when not scored).

    A C++ item model on purpose: a Python ``data()`` would be called thousands of times per
    repaint, each call waiting for the GIL while the engine thread computes.
    """

    def __init__(self) -> None:
        super().__init__(0, len(COLUMNS))
        self.setHorizontalHeaderLabels(list(COLUMNS))
        self.values = np.zeros((0, 8))
        self.locked = np.zeros(0, dtype=bool)
        self.chain = np.zeros(0, dtype=np.int32)
        self.matched: np.ndarray | None = None
        self.editable = False
        self._icons = [_swatch(line_colour(i)) for i in range(len(LINE_COLOURS))]

    def set_lines(self, lines: LineSet | None, matched: np.ndarray | None = None, editable: bool = False) -> None:
        values = lines_table(lines) if lines is not None else np.zeros((0, 8))
        locked = np.asarray(lines.locked, bool) if lines is not None else np.zeros(0, bool)
        # Which text line a locked file's piece belongs to (LineSet.chain; -1: a line of its own).
        chain = lines.chain if lines is not None else np.zeros(0, np.int32)
        if matched is not None and len(matched) != len(values):
            matched = None
        if (values.shape == self.values.shape and np.array_equal(values, self.values)
                and np.array_equal(locked, self.locked) and np.array_equal(chain, self.chain)
                and editable == self.editable
                and (matched is None) == (self.matched is None)
                and (matched is None or np.array_equal(matched, self.matched))):
            return
        old_rows = len(self.values)
        self.values, self.locked, self.matched, self.editable = values, locked, matched, editable
        self.chain = chain
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
            self._fill_flags(r, bool(locked[r]), None if matched is None else bool(matched[r]))
            piece = self.item(r, PIECE_COLUMN)
            if piece is None:
                piece = QStandardItem()
                piece.setTextAlignment(align)
                self.setItem(r, PIECE_COLUMN, piece)
            text_line = f"{int(chain[r]) + 1}" if chain[r] >= 0 else ""
            if piece.text() != text_line:
                piece.setText(text_line)
                piece.setToolTip(f"the locked file's text line {text_line}: its straight pieces, EM's lines, are "
                                 "joined into one line in the result" if text_line else "")

    def _fill_flags(self, r: int, locked: bool, matched: bool | None) -> None:
        lock = self.item(r, LOCK_COLUMN)
        if lock is None:
            lock = QStandardItem()
            self.setItem(r, LOCK_COLUMN, lock)
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if self.editable:
            flags |= Qt.ItemFlag.ItemIsUserCheckable
        lock.setFlags(flags)
        if self.editable:  # a box to tick; else a mark only
            lock.setCheckState(Qt.CheckState.Checked if locked else Qt.CheckState.Unchecked)
        else:
            lock.setData(None, Qt.ItemDataRole.CheckStateRole)
        lock.setText("" if self.editable else ("✓" if locked else ""))
        gt = self.item(r, GT_COLUMN)
        if gt is None:
            gt = QStandardItem()
            self.setItem(r, GT_COLUMN, gt)
        gt.setText("" if matched is None else ("✓" if matched else "✗"))
        gt.setForeground(QColor("#1b5e20" if matched else "#b71c1c"))


class LineTable(QTableView):
    """Line table; selection goes both ways with the canvas (``lineSelected``); ticking a
    line's lock box (initial lines only) asks for it to be locked (``lockToggled``)."""

    lineSelected = Signal(int)
    lockToggled = Signal(int, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table_model = LineTableModel()
        self.setModel(self.table_model)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(18)
        # Every column in view in the dock's width (no horizontal scrolling to the lock / GT).
        for column, width in enumerate((48, 42, 52, 52, 52, 44, 48, 46, 40, 28)):
            self.setColumnWidth(column, width)
        self.selectionModel().selectionChanged.connect(self._on_selection)
        self.table_model.itemChanged.connect(self._on_item_changed)
        self._quiet = False

    def set_lines(self, lines: LineSet | None, selected: int, matched: np.ndarray | None = None,
                  editable: bool = False) -> None:
        self._quiet = True
        self.table_model.set_lines(lines, matched, editable)
        self.select_line(selected)
        self._quiet = False

    def select_line(self, index: int) -> None:
        quiet, self._quiet = self._quiet, True
        if 0 <= index < self.table_model.rowCount():
            self.selectRow(index)
            self.scrollTo(self.table_model.index(index, 0))
        else:
            self.clearSelection()
        self._quiet = quiet

    def _on_selection(self, *_args: object) -> None:
        if self._quiet:
            return
        rows = self.selectionModel().selectedRows()
        self.lineSelected.emit(rows[0].row() if rows else -1)

    def _on_item_changed(self, item: QStandardItem) -> None:
        if self._quiet or item.column() != LOCK_COLUMN or not self.table_model.editable:
            return
        row = item.row()
        checked = item.checkState() == Qt.CheckState.Checked
        if 0 <= row < len(self.table_model.locked) and checked != bool(self.table_model.locked[row]):
            self.lockToggled.emit(row, checked)
