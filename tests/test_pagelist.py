"""A document, not a page: folders of synthetic pages (and of ``tlseg`` outputs) in the window.

The real window and engine, offscreen; pages from :mod:`synthetic` written to the test's own
folder.  Every wait is a ``qtbot.waitUntil`` on the window's state.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import FAST
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from synthetic import make_page

from engine import batch
from engine.evaluate import find_ground_truth
from engine.export import read_outputs, validate_page_xml
from engine.params import Parameters
from tlgui.document import DONE, FAILED, NOT_RUN, cache_complete, scan_document
from tlgui.pagelist import COLUMNS
from tlgui.probe import GapProbe
from tlgui.window import MainWindow
from tlgui.worker import RUN_QUIET

KINDS = ("straight", "skewed", "two_columns")
#: The page whose ground truth is made wrong on purpose (every two lines merged): the worst.
WORST = 1


@pytest.fixture(scope="module")
def pages() -> list[object]:
    return [make_page(kind, seed=k) for k, kind in enumerate(KINDS)]


def write_folder(folder: Path, pages: list[object], truth: bool = False) -> list[Path]:
    """``page0.png`` ... (and with ``truth`` each one's ``page<k>_labels.png`` beside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, page in enumerate(pages):
        path = folder / f"page{k}.png"
        cv2.imwrite(str(path), page.image)
        if truth:
            labels = page.labels if k != WORST else (page.labels + 1) // 2  # lines 1+2, 3+4, ...
            cv2.imwrite(str(folder / f"page{k}_labels.png"), labels.astype(np.uint16))
        paths.append(path)
    return paths


def open_document(qtbot: object, win: MainWindow, specs: list[Path]) -> None:
    win.open_document([str(s) for s in specs])
    qtbot.waitUntil(lambda: len(win.document.pages) > 0 and not win.is_busy(), timeout=30_000)


def run_all(qtbot: object, win: MainWindow) -> GapProbe:
    """Run every page with the GUI-gap probe on (10 ms timer in the GUI thread)."""
    probe = GapProbe(label=win.status_stage.text)
    probe.start()
    probe.started = time.perf_counter()
    win.run_all()
    qtbot.waitUntil(lambda: win.jobs.run_queue is None and not win.is_busy()
                    and all(p.state in (DONE, FAILED) for p in win.document.pages), timeout=120_000)
    probe.stop()
    probe.elapsed_ms = (time.perf_counter() - probe.started) * 1e3
    return probe


def blocked(probe: GapProbe, limit_ms: float = 100.0) -> list[tuple[float, str, float | None, float]]:
    """The GUI thread's gaps over ``limit_ms`` in which it used more than ``limit_ms`` of CPU
    itself (ms, engine stage, ms waited for a CPU, ms of CPU): our handlers and drawing, which
    block the window that long on an idle machine too. The wall-clock gaps also count other
    processes and, under load, our other threads descheduled while they hold the GIL: those
    figures are ``tlgui.probe``'s, measured in docs/history.md, not a test's."""
    return [(gap, label, waited, cpu) for _end, gap, label, waited, cpu in probe.long_gaps
            if gap > limit_ms and cpu > limit_ms]


def row_texts(win: MainWindow) -> list[list[str]]:
    model = win.page_list.table_model
    return [[model.item(r, c).text() for c in range(len(COLUMNS))] for r in range(model.rowCount())]


def test_folder_runs_all_with_ground_truth_and_sorts_worst_first(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    folder = tmp_path / "book"
    write_folder(folder, pages, truth=True)
    open_document(qtbot, window, [folder])
    # Three pages (label maps are ground truth, not pages), none run; the first one shown.
    assert [p.name for p in window.document.pages] == ["page0.png", "page1.png", "page2.png"]
    assert [row[1] for row in row_texts(window)] == [NOT_RUN] * 3
    assert all(p.gt_path and p.gt_path.endswith("_labels.png") for p in window.document.pages)
    assert window.session.path == str(folder / "page0.png")
    probe = run_all(qtbot, window)
    assert not blocked(probe), (blocked(probe), sorted(window.slow_handlers, key=lambda h: -h[2])[:5])
    # The probe really ticked through the run: its ticks span the run (a page may take 0.1 s
    # alone or 5 s under load, so a fixed count of ticks said more about the load than the probe).
    assert len(probe.gaps) > 10 and sum(probe.gaps) > 0.9 * probe.elapsed_ms - 100
    docs = window.document.pages
    assert [p.state for p in docs] == [DONE] * 3
    assert all(p.lines and p.lines > 0 and p.seconds and p.seconds > 0 for p in docs)
    qtbot.waitUntil(lambda: all(p.fm is not None and p.saved for p in window.document.pages), timeout=30_000)
    fms = [p.fm for p in window.document.pages]
    assert fms[WORST] < min(fms[k] for k in range(3) if k != WORST)
    # Each page's result was written to the window's results cache, compact: the labels as a
    # 16-bit PNG and the JSON (with the initial lines and the edits), no .dat nor overlay.
    outdir = window.document.outdir
    assert window.document.cache
    for p in docs:
        assert cache_complete(outdir, p.stem) and not batch.outputs_complete(outdir, p.stem)
        assert sorted(f.name for f in outdir.glob(f"{p.stem}.*")) == [f"{p.stem}.json", f"{p.stem}.labels.png"]
        saved = read_outputs(outdir, p.stem)
        assert len(saved.seg.lines) == p.lines and saved.meta["compact"] and saved.meta["edited"] is False
        assert len(saved.meta["initial_lines"]["lines"]) >= p.lines - 2
    # Run all ends with a summary, FM included once the pages are scored.
    summary = f"Run all: 3 of 3 done, 0 failed, median FM {np.median(fms):.3f} over 3 pages with ground truth"
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == summary, timeout=10_000)
    rows = row_texts(window)
    assert all(row[1] == DONE and int(row[2]) > 0 for row in rows)
    # Sorting by FM puts the worst page first; the next-page key follows the sorted order.
    window.page_list.sortByColumn(COLUMNS.index("FM"), Qt.SortOrder.AscendingOrder)
    order = window.page_list.order()
    assert order[0] == WORST
    assert [fms[i] for i in order] == sorted(fms)
    window.go_to_page(order[0])
    qtbot.waitUntil(lambda: window.session.segmentation is not None and not window.is_busy(), timeout=30_000)
    window.page_list.setFocus()
    QTest.keyClick(window.page_list, Qt.Key.Key_PageDown)  # the window's key, even in the list
    qtbot.waitUntil(lambda: window.session.path == window.document.pages[order[1]].path
                    and window.session.segmentation is not None and not window.is_busy(), timeout=30_000)
    assert window.page_list.order() == order  # a page opened from its saved outputs: still sorted
    QTest.keyClick(window.canvas, Qt.Key.Key_Left, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.session.path == window.document.pages[order[0]].path
                    and not window.is_busy(), timeout=30_000)


def test_unreadable_page_fails_and_the_others_finish(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    folder = tmp_path / "box"
    write_folder(folder, pages[:2])
    (folder / "page1b.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 50)  # sorts between
    open_document(qtbot, window, [folder])
    assert [p.name for p in window.document.pages] == ["page0.png", "page1.png", "page1b.png"]
    run_all(qtbot, window)
    states = [p.state for p in window.document.pages]
    assert states == [DONE, DONE, FAILED]
    bad = window.document.pages[2]
    assert "page1b.png" in bad.error and bad.lines is None
    row = window.page_list.row_of(2)
    state_item = window.page_list.table_model.item(row, COLUMNS.index("state"))
    assert state_item.text() == FAILED and state_item.toolTip() == bad.error
    assert window.statusBar().currentMessage().startswith("Run all: 2 of 3 done, 1 failed")


@pytest.mark.parametrize("layout", ["outputs_only", "beside_images", "images_gone"])
def test_tlseg_outputs_open_without_running(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object], layout: str) -> None:
    images = write_folder(tmp_path / "scans", pages, truth=True)
    outdir = tmp_path / "scans" if layout == "beside_images" else tmp_path / "out"
    summary = batch.run_batch(images, outdir, Parameters().replace(**FAST), jobs=1)
    assert summary.ok == 3
    if layout == "images_gone":
        for image in images:
            image.unlink()
    sent: list[object] = []
    window.jobs.runJob.connect(sent.append)  # every engine job leaves through this signal
    open_document(qtbot, window, [outdir])
    docs = window.document.pages
    assert [p.stem for p in docs] == ["page0", "page1", "page2"]
    assert [p.state for p in docs] == [DONE] * 3
    assert [p.lines for p in docs] == [r.lines for r in summary.results]
    assert all(p.seconds is not None and p.seconds > 0 for p in docs)  # tlseg's timings, read back
    assert window.document.outdir == outdir.resolve()
    qtbot.waitUntil(lambda: window.session.segmentation is not None and not window.is_busy()
                    and window.settled(), timeout=30_000)
    saved = read_outputs(outdir, "page0")
    np.testing.assert_array_equal(window.session.segmentation.labels, saved.seg.labels)
    assert window.canvas.labels_item.image is not None
    assert window.line_table.table_model.rowCount() == len(saved.seg.lines)
    assert window.plots.note.isVisible() and "saved result" in window.plots.note.text()  # empty plots say why
    window.export("page_xml", str(tmp_path / "again.xml"))  # a saved result exports as a run one
    qtbot.waitUntil(lambda: (tmp_path / "again.xml").exists() and not window.is_busy(), timeout=10_000)
    assert validate_page_xml(tmp_path / "again.xml") == [] and not window.banner.error()
    if layout == "images_gone":
        assert docs[0].name == "page0.overlay.png" and docs[0].fm is None
    else:
        assert docs[0].path == str(images[0].resolve())
        # FM of the saved results, scored in the background; the broken truth is the worst.
        qtbot.waitUntil(lambda: all(p.fm is not None for p in window.document.pages), timeout=30_000)
        assert min(window.document.pages, key=lambda p: p.fm).stem == f"page{WORST}"
    window.next_page()
    qtbot.waitUntil(lambda: window.session.path == window.document.pages[1].path
                    and window.session.segmentation is not None and not window.is_busy(), timeout=30_000)
    assert sent == []  # the engine was never asked to run


def test_edits_survive_moving_between_pages(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    folder = tmp_path / "book"
    write_folder(folder, pages[:2])
    open_document(qtbot, window, [folder])
    qtbot.waitUntil(lambda: window.session.prep is not None and not window.is_busy(), timeout=30_000)
    first = window.session.path
    window.editor.delete(0)
    window.editor.move(0, window.edits.segments[0] + [0.0, 4.0])
    edited = window.edits.segments.copy()
    window.next_page()
    qtbot.waitUntil(lambda: window.session.path != first and window.session.prep is not None
                    and not window.is_busy(), timeout=30_000)
    assert not window.edits.edited  # page 2 has its own (prepared) lines
    window.previous_page()
    qtbot.waitUntil(lambda: window.session.path == first and window.session.prep is not None
                    and not window.is_busy(), timeout=30_000)
    assert window.edits.edited
    np.testing.assert_allclose(window.edits.segments, edited, atol=1e-3)
    np.testing.assert_allclose(window.canvas.initial_segments, edited, atol=1e-3)
    assert [r["op"] for r in window.edits.records] == ["delete", "move"]  # what made them, too


def test_scan_finds_pages_truth_and_outputs(tmp_path: Path, pages: list[object]) -> None:
    """Without a window: label maps and tlseg outputs are not pages; ground truth is found
    beside the image (and in pixel_label/); a tlseg report's failures are failed pages."""
    folder = tmp_path / "set"
    write_folder(folder, pages[:1], truth=True)
    (folder / "page0.xml").write_text("<PcGts/>")
    assert find_ground_truth(folder / "page0.png") == folder / "page0.xml"
    (tmp_path / "pixel_label").mkdir()
    cv2.imwrite(str(tmp_path / "pixel_label" / "page9.png"), np.zeros((4, 4), np.uint8))
    assert find_ground_truth(folder / "page9.png") == tmp_path / "pixel_label" / "page9.png"
    assert find_ground_truth(folder / "missing.png") is None
    summary = batch.run_batch([folder / "page0.png", folder / "nope.png"], folder,
                              Parameters().replace(**FAST), jobs=1)
    assert summary.ok == 1 and summary.failed == 1
    found, outdir, warnings = scan_document([str(folder)], tmp_path / "results")
    assert outdir == folder.resolve() and not warnings
    assert [(p.name, p.state) for p in found] == [("page0.png", DONE)]
    assert found[0].gt_path == str(folder / "page0.xml") and found[0].saved
    # Two files, not a folder: their outputs go to a results folder of their own.
    write_folder(tmp_path / "loose", pages[:2])
    specs = [str(tmp_path / "loose" / "page1.png"), str(tmp_path / "loose" / "page0.png")]
    found, outdir, _ = scan_document(specs, tmp_path / "results")
    assert [p.name for p in found] == ["page1.png", "page0.png"]
    assert outdir.parent == tmp_path / "results" and [p.state for p in found] == [NOT_RUN] * 2


def test_command_line_and_drops_open_folders_and_pages(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    """``tlgui FOLDER`` and ``tlgui A B`` open a document, ``tlgui PAGE`` a page (as before)."""
    from tlgui.app import build_parser

    folder = tmp_path / "book"
    paths = write_folder(folder, pages[:2])
    assert build_parser().parse_args([str(folder)]).page == [str(folder)]
    assert build_parser().parse_args(["a.png", "b.png"]).page == ["a.png", "b.png"]
    window.open_paths([str(paths[0])])
    qtbot.waitUntil(lambda: window.session.prep is not None and not window.is_busy(), timeout=30_000)
    assert window.document.pages == []
    assert not window.pages_dock.isVisible()  # one page: the room stays the parameters'
    window.open_paths([str(p) for p in reversed(paths)])
    qtbot.waitUntil(lambda: len(window.document.pages) == 2 and not window.is_busy(), timeout=30_000)
    assert window.pages_dock.isVisible()
    assert [p.name for p in window.document.pages] == ["page1.png", "page0.png"]
    assert window.session.path == str(paths[1])


def test_stop_ends_run_all(qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    """Stop cancels the page being run (back to "not run") and runs no further page."""
    write_folder(tmp_path / "book", pages[:2])
    window.param_panel.set_params(Parameters().replace(max_em_iterations=10_000, kl_tolerance=1e-12,
                                                       mp_tolerance=1e-12))
    open_document(qtbot, window, [tmp_path / "book"])
    window.run_all()
    qtbot.waitUntil(lambda: window.document.pages[0].state == "running"
                    and len(window.session.snapshots) >= 2, timeout=30_000)
    window.stop()
    qtbot.waitUntil(lambda: not window.is_busy(), timeout=5_000)
    qtbot.wait(200)
    assert window.jobs.run_queue is None and window.session.path == window.document.pages[0].path
    assert [p.state for p in window.document.pages] == [NOT_RUN, NOT_RUN]
    assert [row[1] for row in row_texts(window)] == [NOT_RUN, NOT_RUN]


def test_page_list_observes_the_document_and_keeps_its_sort(qtbot: object) -> None:
    """Unknown FMs sort last; a changed page moves to its place; the current page stays."""
    from tlgui.document import Document, PageEntry
    from tlgui.pagelist import PageList

    doc = Document()
    view = PageList(doc)
    qtbot.addWidget(view)
    doc.set_pages([PageEntry("/b/a.png", "a", fm=0.5, state=DONE), PageEntry("/b/b.png", "b"),
                   PageEntry("/b/c.png", "c", fm=0.2, state=DONE)], None)
    assert view.order() == [0, 1, 2]  # document order until a column is chosen
    view.sortByColumn(COLUMNS.index("FM"), Qt.SortOrder.AscendingOrder)
    assert view.order() == [2, 0, 1]
    view.set_current(0)
    doc.update(1, state=FAILED, error="cannot read page '/b/b.png'", fm=0.1)
    assert view.order() == [1, 2, 0]
    assert view.currentIndex().row() == view.row_of(0)
    item = view.table_model.item(view.row_of(1), COLUMNS.index("state"))
    assert item.text() == FAILED and "cannot read" in item.toolTip()
    view.sortByColumn(COLUMNS.index("page"), Qt.SortOrder.DescendingOrder)
    assert view.order() == [2, 1, 0]
    with pytest.raises(TypeError):
        doc.update(0, colour="red")


def test_run_all_goes_on_in_the_background_while_the_user_browses_and_edits(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    """Picking a page does not stop "Run all": the page left runs on in the background, the
    others run quietly in the engine process (no snapshot, no preparation sent back) while
    the user edits a page; a page the user opens while it runs in the background is drawn
    when it finishes; the GUI thread never computes for over 100 ms at a stretch."""
    folder = tmp_path / "book"
    write_folder(folder, pages, truth=True)
    open_document(qtbot, window, [folder])
    qtbot.waitUntil(lambda: window.session.prep is not None and not window.is_busy(), timeout=30_000)
    docs = window.document.pages
    sent: list[object] = []
    window.jobs.runJob.connect(sent.append)
    probe = GapProbe(label=window.status_stage.text)
    probe.start()
    window.run_all()
    assert sent[-1].path == docs[0].path and not sent[-1].quiet  # the shown page, drawn as it runs
    window.go_to_page(2)  # page 0 runs on, in the background
    assert window.jobs.run_queue == [1, 2] and window.jobs.bg_job is sent[-1] and window.job is None
    assert sent[-1].control.mode == RUN_QUIET  # no more snapshots from it
    assert window.buttons["stop"].isEnabled()
    qtbot.waitUntil(lambda: window.jobs.bg_job is not None and window.jobs.bg_job.quiet
                    and window.session.prep is not None and window.session.path == docs[2].path, timeout=30_000)
    assert window.jobs.bg_job.path == docs[1].path and window.document.pages[1].state == "running"
    assert window.document.pages[0].state == DONE  # page 0 finished in the background
    assert window.statusBar().currentMessage() == "Run all: 1 of 3 pages done; running page1.png"
    window.editor.delete(0)  # the user edits page 2 while page 1 runs
    edited = window.edits.segments.copy()
    window.go_to_page(1)  # the page running in the background
    qtbot.waitUntil(lambda: window.jobs.run_queue is None and not window.is_busy()
                    and all(p.state == DONE for p in window.document.pages), timeout=120_000)
    probe.stop()
    assert not blocked(probe), (blocked(probe), sorted(window.slow_handlers, key=lambda h: -h[2])[:5])
    # Page 1 finished in the background while shown: its result is drawn.
    qtbot.waitUntil(lambda: window.session.segmentation is not None and window.settled(), timeout=30_000)
    assert window.session.path == docs[1].path and window.canvas.labels_item.image is not None
    np.testing.assert_array_equal(window.session.segmentation.labels,
                                  read_outputs(window.document.outdir, "page1").seg.labels)
    quiet = [job for job in sent if job.quiet]
    assert sorted(job.path for job in quiet) == [docs[1].path, docs[2].path]
    # Page 2 ran in the background from the user's edited lines (its autosave, read there).
    assert quiet[-1].lines_file == str(window.edits.autosave_path(docs[2].path))
    saved = json.loads(Path(quiet[-1].lines_file).read_text())["initial_lines"]["lines"]
    np.testing.assert_allclose([r["segment"] for r in saved], edited, atol=0.01)
    docs = window.document.pages
    assert all(p.lines and p.seconds and p.saved for p in docs)
    assert [row[1] for row in row_texts(window)] == [DONE] * 3
    qtbot.waitUntil(lambda: all(p.fm is not None for p in window.document.pages), timeout=30_000)
