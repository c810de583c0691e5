"""The page list: one row per page of the :class:`~tlgui.document.Document`, which it observes.

Columns: page, state, lines, seconds, FM, and the preset (with its changes) the page's result
was made with; sortable by each (numbers sort as numbers, unknown
values last), so that sorting by FM puts the worst pages first.  A failed page's error is the
tooltip of its state.  ``pageActivated(index)`` gives the document index of the row the user
picked (clicked, or moved to with the keys), never a row number.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QItemSelectionModel, Qt, Signal, Slot
from PySide6.QtGui import QBrush, QColor, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from .document import DONE, FAILED, RUNNING, STATES, Document, PageEntry

COLUMNS = ("page", "state", "lines", "s", "FM", "preset")
#: Role of the value a column sorts by; the document index sits in column 0 under INDEX_ROLE.
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
INDEX_ROLE = Qt.ItemDataRole.UserRole + 2
STATE_COLOURS = {RUNNING: "#1565c0", DONE: "#1b5e20", FAILED: "#b71c1c"}
_LAST = float("inf")  # unknown numbers sort after every known one
#: Separators at which a name prefix shared by every page is cut.
_SEPARATORS = "_- ."


def short_names(names: list[str]) -> list[str]:
    """What tells the names apart: each without the start and end every name shares, cut at
    separators (``TestamentsDePoilus_will_AD78_0005-0.jpg`` -> ``AD78_0005-0`` beside the
    book's other scans; ``5_d12c2_default.jpg`` -> ``5_d12c2``).  A book's scans often
    share a long start, which left no room in the list for the rest.  One name, or names
    that would become empty, stay whole."""
    if len(names) < 2:
        return list(names)
    prefix = os.path.commonprefix(names)
    start = max(prefix.rfind(c) for c in _SEPARATORS) + 1
    suffix = os.path.commonprefix([n[start:][::-1] for n in names])[::-1]
    cuts = [i for i, c in enumerate(suffix) if c in _SEPARATORS]
    end = len(suffix) - cuts[0] if cuts else 0
    short = [n[start:len(n) - end] for n in names]
    return short if all(short) else list(names)


def cells(page: PageEntry, shown: str | None = None) -> list[tuple[str, object]]:
    """(text, sort value) of each column of a page's row (``shown``: its name's text)."""
    return [
        (shown or page.name, page.name.casefold()),
        (page.state, page.state),
        ("" if page.lines is None else str(page.lines), _LAST if page.lines is None else float(page.lines)),
        ("" if page.seconds is None else f"{page.seconds:.1f}", _LAST if page.seconds is None else page.seconds),
        ("" if page.fm is None else f"{page.fm:.3f}", _LAST if page.fm is None else page.fm),
        (page.preset or "", page.preset or "\uffff"),
    ]


class PageList(QTableView):
    """The document's pages as a sortable table (a C++ item model: no Python ``data()``)."""

    pageActivated = Signal(int)

    def __init__(self, document: Document) -> None:
        super().__init__()
        self.setObjectName("page-list")
        self.document = document
        self.table_model = QStandardItemModel(0, len(COLUMNS))
        self.table_model.setHorizontalHeaderLabels(list(COLUMNS))
        self.table_model.setSortRole(SORT_ROLE)
        self.setModel(self.table_model)
        self.setSortingEnabled(True)
        self.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # document order until asked
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(18)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a name's end tells pages apart
        header = self.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        metrics = self.fontMetrics()
        # Fixed widths that fit each column's longest text ("running", "9999", "99.9", "0.000").
        for col, sample in enumerate(("", max(STATES, key=metrics.horizontalAdvance), "9999", "99.9", "0.000",
                                      "default")):
            if col:
                header.setSectionResizeMode(col, QHeaderView.ResizeMode.Fixed)
                self.setColumnWidth(col, metrics.horizontalAdvance(sample) + 14)
        self._short: list[str] = []  # the shown name of each document page
        self._quiet = False
        self.selectionModel().currentRowChanged.connect(self._on_current)
        document.subscribe("reset", self._on_reset)
        document.subscribe("changed", self._on_changed)

    # --- document -> rows ---------------------------------------------------------------------
    def _on_reset(self) -> None:
        self._quiet = True
        self.table_model.setRowCount(0)
        self._short = short_names([page.name for page in self.document.pages])
        for index, page in enumerate(self.document.pages):
            items = [QStandardItem() for _ in COLUMNS]
            items[0].setData(index, INDEX_ROLE)
            self._fill(items, page, self._short[index])
            self.table_model.appendRow(items)
        self._resort()
        self._quiet = False

    def _on_changed(self, index: int) -> None:
        row = self.row_of(index)
        if row < 0:
            return
        self._fill([self.table_model.item(row, col) for col in range(len(COLUMNS))], self.document.pages[index],
                   self._short[index] if index < len(self._short) else None)
        self._resort()

    def _fill(self, items: list[QStandardItem], page: PageEntry, shown: str | None) -> None:
        for item, (text, key) in zip(items, cells(page, shown), strict=True):
            if item.text() != text:
                item.setText(text)
            item.setData(key, SORT_ROLE)
        state = items[1]
        state.setToolTip(page.error if page.state == FAILED else "")
        colour = STATE_COLOURS.get(page.state)
        state.setForeground(QBrush(QColor(colour)) if colour else QBrush())
        items[0].setToolTip(page.path + (f"\nground truth: {page.gt_path}" if page.gt_path else ""))
        items[5].setToolTip(f"the result shown was made with preset {page.preset}" if page.preset else "")

    def _resort(self) -> None:
        """Keep the user's sort as rows change (the current page stays current)."""
        column = self.horizontalHeader().sortIndicatorSection()
        if 0 <= column < len(COLUMNS):
            quiet, self._quiet = self._quiet, True
            self.table_model.sort(column, self.horizontalHeader().sortIndicatorOrder())
            self._quiet = quiet

    # --- rows <-> document indices ------------------------------------------------------------
    def row_of(self, index: int) -> int:
        """The row showing document page ``index`` (-1 if none)."""
        for row in range(self.table_model.rowCount()):
            if self.table_model.item(row, 0).data(INDEX_ROLE) == index:
                return row
        return -1

    def index_at(self, row: int) -> int:
        item = self.table_model.item(row, 0)
        return -1 if item is None else int(item.data(INDEX_ROLE))

    def order(self) -> list[int]:
        """Document indices in the order shown."""
        return [self.index_at(row) for row in range(self.table_model.rowCount())]

    def set_current(self, index: int) -> None:
        """Show page ``index`` as the current row, without announcing it."""
        row = self.row_of(index)
        self._quiet = True
        if row >= 0:
            self.selectionModel().setCurrentIndex(
                self.table_model.index(row, 0),
                QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
            self.scrollTo(self.table_model.index(row, 0))
        else:
            self.clearSelection()
        self._quiet = False

    @Slot(object, object)
    def _on_current(self, current: object, _previous: object) -> None:
        if self._quiet or not current.isValid():
            return
        self.pageActivated.emit(self.index_at(current.row()))
