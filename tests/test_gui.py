"""GUI tests (pytest-qt, offscreen) on a small synthetic page written to a temporary folder.

They drive the real window and the real engine in its worker thread; every wait is a
``qtbot.waitUntil`` on the window's own state, never a sleep.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import FAST
from PySide6.QtCore import QPoint, QSettings
from PySide6.QtWidgets import QApplication
from synthetic import make_page

from engine import export as engine_export
from engine.params import Parameters
from tlgui.canvas import POSTERIOR_PALETTE, PageCanvas, posterior_colour_index
from tlgui.edit import merge_segments, rotate_segment, split_segment
from tlgui.geometry import EdgeSegments, segment_rows
from tlgui.items import DotsItem, premultiplied_argb
from tlgui.messages import Failed, Finished, Outputs, Prepared, SnapshotReady, Stage
from tlgui.session import lines_table
from tlgui.settings import app_settings, stale_parameters
from tlgui.window import MainWindow
from tlgui.worker import RUN, RUN_QUIET, EngineProcess, Job, RunControl


@pytest.fixture(scope="module")
def synthetic_page() -> object:
    return make_page("straight", seed=0)


@pytest.fixture
def page_path(tmp_path: Path, synthetic_page: object) -> str:
    path = tmp_path / "page.png"
    cv2.imwrite(str(path), synthetic_page.image)
    return str(path)


def open_and_prepare(qtbot: object, win: MainWindow, path: str) -> None:
    win.open_page(path)
    qtbot.waitUntil(lambda: win.session.prep is not None and not win.is_busy(), timeout=30_000)


def sorted_segments(segs: np.ndarray) -> np.ndarray:
    """Segments in a fixed order (by their mid-points' y, then x): lines read from a file come
    in the order EM needs, not in the order they were edited."""
    mid = segs.mean(axis=1)
    return segs[np.lexsort((mid[:, 0], mid[:, 1]))]


def run_to_end(qtbot: object, win: MainWindow) -> None:
    win.run()
    qtbot.waitUntil(lambda: win.session.segmentation is not None and not win.is_busy() and win.settled(),
                    timeout=60_000)


def test_open_run_to_end(qtbot: object, window: MainWindow, page_path: str, synthetic_page: object) -> None:
    open_and_prepare(qtbot, window, page_path)
    prep = window.session.prep
    assert window.page_gray.shape == synthetic_page.image.shape
    assert len(window.edits.segments) == len(prep.initial_lines) > 0
    assert window.recent_files()[0] == str(Path(page_path).resolve())
    run_to_end(qtbot, window)
    snaps = window.session.snapshots
    assert len(snaps) >= 2 and all(s.sweep is None for s in snaps)  # Run shows EM iterations only
    assert window.session.at_end()
    seg = window.session.segmentation
    assert seg.labels.shape == synthetic_page.image.shape and seg.labels.max() >= 1
    assert window.canvas.labels_item.image is not None
    # At the end of a finished run the table, the canvas and the status show the final lines
    # (the labelling may drop or merge some of the last snapshot's).
    qtbot.waitUntil(window.settled, timeout=2_000)
    assert window.line_table.model().rowCount() == len(seg.lines) == int(seg.labels.max())
    assert window.canvas.current_lines() is seg.lines and window.status.lines.text() == f"{len(seg.lines)} lines"
    assert window.lines_title.text().startswith(f"Final lines ({len(seg.lines)}")
    assert "finished" in window.status_stage.text()
    assert window.slider.maximum() == len(snaps) - 1
    # Clicking a line on the canvas selects its table row, and back.
    seg_xy = seg.lines.segments()[0].mean(axis=0)
    assert window.canvas.line_at(*seg_xy) == 0
    window.select_line(0)
    assert window.line_table.selectionModel().selectedRows()[0].row() == 0
    window.line_table.selectRow(1)
    assert window.canvas.selected == 1


def test_run_pressed_while_preparing(qtbot: object, window: MainWindow, page_path: str) -> None:
    window.open_page(page_path)
    window.run()  # before the page is even loaded: queued until it is prepared
    qtbot.waitUntil(lambda: window.session.segmentation is not None and not window.is_busy(), timeout=60_000)
    assert len(window.session.snapshots) >= 2


def test_graph_layer_draws_bounded_edges_exact_when_zoomed_in(
        qtbot: object, window: MainWindow, page_path: str) -> None:
    open_and_prepare(qtbot, window, page_path)
    canvas = window.canvas
    graph = canvas.graph_item
    geometry = canvas.geometry
    n_edges = len(geometry.edges.segs)
    assert geometry.edges.n_graph == len(window.session.prep.edges)
    assert n_edges > 400
    graph.budget = n_edges // 4  # the page is small: a budget that thinning must honour
    window.layer_panel.checks["graph"].setChecked(True)
    canvas.viewport().repaint()

    def stroked() -> int:
        n = sum(len(lines) for lines in graph.lines)  # one QLineF per stroked edge
        assert n == graph.stroked_segments() == len(graph.drawn_edges())
        for k, lines in enumerate(graph.lines):  # each colour holds exactly its class's edges
            mine = graph.shown[graph.cls[graph.shown] == k]
            np.testing.assert_array_equal(lines.ndarray(), graph.segs[mine])
        return n

    # Full page: a bounded (and non-trivial) sample of the edges is stroked.
    assert graph.budget // 2 < stroked() <= graph.budget
    # Deep zoom: every edge that meets the view is drawn.
    h, w = window.page_gray.shape
    x0, y0 = 0.4 * w, 0.4 * h
    canvas.view.setRange(xRange=(x0, x0 + 0.1 * w), yRange=(y0, y0 + 0.1 * h), padding=0)
    qtbot.wait(20)
    canvas.viewport().repaint()
    view = canvas.view.viewRect()
    samples, prep_edges = window.session.prep.samples, window.session.prep.edges
    segs = geometry.edges.segs
    np.testing.assert_array_equal(segs[: len(prep_edges)].reshape(-1, 2, 2), samples[prep_edges])
    inside = ((segs[:, [0, 2]].max(1) >= view.left()) & (segs[:, [0, 2]].min(1) <= view.right())
              & (segs[:, [1, 3]].max(1) >= view.top()) & (segs[:, [1, 3]].min(1) <= view.bottom()))
    assert 0 < inside.sum() <= graph.budget
    assert set(np.flatnonzero(inside)) <= set(graph.drawn_edges().tolist())
    assert stroked() <= graph.budget
    # Hidden then shown again at full page: thinned again, and opacity follows the layer.
    canvas.view.setRange(xRange=(0, w), yRange=(0, h), padding=0)
    window.layer_panel.checks["graph"].setChecked(False)
    window.layer_panel.checks["graph"].setChecked(True)
    canvas.set_layer_opacity("graph", 0.3)
    canvas.viewport().repaint()
    assert stroked() <= graph.budget and not graph.exact
    assert graph.opacity() == pytest.approx(0.3)


def test_step_sweep_and_scrub(qtbot: object, window: MainWindow, page_path: str) -> None:
    open_and_prepare(qtbot, window, page_path)
    session = window.session
    window.step_em()
    qtbot.waitUntil(lambda: len(session.snapshots) == 1, timeout=30_000)
    qtbot.wait(150)
    assert len(session.snapshots) == 1 and window.job is not None  # paused after one step
    window.step_sweep()
    qtbot.waitUntil(lambda: len(session.snapshots) == 2, timeout=10_000)
    assert session.snapshots[1].sweep is not None
    window.step_em()
    qtbot.waitUntil(lambda: len(session.snapshots) == 3, timeout=10_000)
    assert session.snapshots[2].sweep is None
    assert session.snapshots[2].iteration == session.snapshots[1].iteration
    window.step_em()
    qtbot.waitUntil(lambda: len(session.snapshots) == 4, timeout=10_000)
    qtbot.wait(2 * 33)
    # Scrub back to the first snapshot: the drawn state is exactly that snapshot's.
    window.select_line(0)
    window.layer_panel.checks["graph"].setChecked(True)
    window.slider.setValue(0)
    qtbot.waitUntil(lambda: window.canvas.snapshot is session.snapshots[0], timeout=2_000)
    first = session.snapshots[0]
    canvas = window.canvas
    expected = posterior_colour_index(first, "argmax", 0)
    assert np.array_equal(canvas.posterior_item.index, expected)
    assert np.array_equal(canvas.posterior_item.colours, premultiplied_argb(POSTERIOR_PALETTE)[expected])
    qtbot.waitUntil(window.settled, timeout=2_000)  # table and plots follow a few ticks later
    np.testing.assert_allclose(window.line_table.table_model.values, lines_table(first.lines))
    assert window.plots.markers["kl"].value() == pytest.approx(first.iteration)
    arg = first.posterior_lines[:, 0]
    edges = window.session.prep.edges
    n_different = int((arg[edges[:, 0]] != arg[edges[:, 1]]).sum())
    graph = canvas.graph_item
    assert int((graph.cls[: graph.n_graph] == 1).sum()) == n_different
    assert "1/4" in window.slider_label.text()
    window.reset()
    qtbot.waitUntil(lambda: not window.is_busy() and window.settled(), timeout=2_000)
    assert session.snapshots == [] and window.canvas.snapshot is None
    # Back to the initial lines: the table shows them, as before any run.
    assert window.line_table.table_model.rowCount() == len(session.prep.initial_lines)
    assert window.slider_label.text() == "no run" and window.lines_title.text().startswith("Initial lines")


def test_edit_initial_lines_and_rerun(qtbot: object, window: MainWindow, page_path: str,
                                      tmp_path: Path) -> None:
    open_and_prepare(qtbot, window, page_path)
    run_to_end(qtbot, window)
    before = len(window.session.snapshots[0].lines)
    original = window.edits.segments.copy()
    editor = window.editor
    window.set_edit_mode("select")
    assert len(editor.rois) == len(original)
    # Merge lines 0 and 1, delete the (new) first one, split another: undo/redo round-trips.
    editor.merge(0, 1)
    assert len(window.edits.segments) == len(original) - 1
    editor.delete(0)
    editor.split(0, window.edits.segments[0].mean(axis=0))
    edited = window.edits.segments.copy()
    assert len(edited) == len(original) - 1
    window.undo.undo()
    window.undo.undo()
    window.undo.undo()
    np.testing.assert_allclose(window.edits.segments, original)
    assert not window.edits.edited and window.edits.lines is window.edits.prepared  # the exact rows
    window.undo.redo()
    window.undo.redo()
    window.undo.redo()
    np.testing.assert_allclose(window.edits.segments, edited)
    editor.select(0)
    editor.rotate_selected(2.0)
    editor.move(0, window.edits.segments[0] + [0.0, 3.0])
    edited = window.edits.segments.copy()
    # Autosaved at once, with the edits that made the lines; the JSON save/load round-trips.
    autosave = window.edits.autosave_path()
    assert autosave is not None and autosave.exists()
    saved_data = json.loads(autosave.read_text())
    assert len(saved_data["initial_lines"]["lines"]) == len(edited)
    assert [r["op"] for r in saved_data["edits"]] == ["merge", "delete", "split", "rotate", "move"]
    saved = tmp_path / "edits.json"
    window.save_edits(str(saved))
    window.undo.undo()
    window.load_initial_lines(str(saved))
    qtbot.waitUntil(lambda: not window.is_busy() and window.undo.undoText() == "load initial lines", timeout=10_000)
    np.testing.assert_allclose(sorted_segments(window.edits.segments), sorted_segments(edited), atol=1e-3)
    qtbot.waitUntil(lambda: len(editor.rois) == len(edited), timeout=2_000)
    # Re-run: EM starts from the edited lines.
    run_to_end(qtbot, window)
    first = window.session.snapshots[0]
    assert len(first.lines) == len(edited) != before
    # A page re-opened later gets its edits back from the autosave.
    window.open_page(page_path)
    qtbot.waitUntil(lambda: window.session.prep is not None and not window.is_busy(), timeout=30_000)
    assert window.edits.edited and len(window.edits.segments) == len(edited)


def test_mouse_draw_delete_and_pick(qtbot: object, window: MainWindow, page_path: str) -> None:
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtTest import QTest

    open_and_prepare(qtbot, window, page_path)
    viewport = window.canvas.viewport()

    def at(x: float, y: float) -> object:
        return window.canvas.mapFromScene(window.canvas.view.mapViewToScene(QPointF(x, y)))

    n0 = len(window.edits.segments)
    window.set_edit_mode("add")
    a, b = at(100, 600), at(500, 620)
    QTest.mousePress(viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, a)
    for i in range(1, 11):
        QTest.mouseMove(viewport, a + (b - a) * (i / 10))
    QTest.mouseRelease(viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, b)
    qtbot.waitUntil(lambda: len(window.edits.segments) == n0 + 1, timeout=2_000)
    np.testing.assert_allclose(window.edits.segments[-1], [[100, 600], [500, 620]], atol=3.0)
    window.set_edit_mode("delete")
    QTest.mouseClick(viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at(300, 610))
    qtbot.waitUntil(lambda: len(window.edits.segments) == n0, timeout=2_000)
    window.set_edit_mode("off")
    run_to_end(qtbot, window)
    centre = window.session.current_snapshot().lines.segments()[2].mean(axis=0)
    QTest.mouseClick(viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at(*centre))
    qtbot.waitUntil(lambda: window.canvas.selected == 2, timeout=2_000)
    assert [r.row() for r in window.line_table.selectionModel().selectedRows()] == [2]


def test_drag_line_end_point(qtbot: object, window: MainWindow, page_path: str) -> None:
    """Select mode: dragging an initial line's end handle with the mouse moves that end only;
    undo puts the line back, redo moves it again."""
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtTest import QTest

    open_and_prepare(qtbot, window, page_path)
    window.set_edit_mode("select")
    editor, viewport = window.editor, window.canvas.viewport()
    qtbot.waitUntil(lambda: len(editor.rois) == len(window.edits.segments) > 1, timeout=2_000)
    original = window.edits.segments.copy()
    i = 1
    handle = editor.rois[i].getHandles()[1]
    start = window.canvas.mapFromScene(handle.scenePos())
    x1, y1 = original[i, 1]
    target_xy = (x1 - 120.0, y1 + 25.0)
    target = window.canvas.mapFromScene(window.canvas.view.mapViewToScene(QPointF(*target_xy)))
    QTest.mousePress(viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
    for k in range(1, 11):
        QTest.mouseMove(viewport, start + (target - start) * (k / 10))
        qtbot.wait(15)  # pyqtgraph drops moves closer than 10 ms apart (mouseRateLimit)
    QTest.mouseRelease(viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, target)
    qtbot.waitUntil(lambda: window.undo.count() == 1, timeout=2_000)
    moved = window.edits.segments
    tolerance = 2 * window.canvas.pixel_size()  # a screen pixel or two, in page pixels
    np.testing.assert_allclose(moved[i, 1], target_xy, atol=tolerance)
    np.testing.assert_allclose(moved[i, 0], original[i, 0], atol=1e-3)  # the other end stays
    np.testing.assert_allclose(np.delete(moved, i, axis=0), np.delete(original, i, axis=0))
    np.testing.assert_allclose(window.canvas.initial_segments, moved)
    assert window.edits.edited
    window.undo.undo()
    np.testing.assert_allclose(window.edits.segments, original)
    qtbot.waitUntil(lambda: np.allclose(editor._roi_segments(), original, atol=1e-6), timeout=2_000)
    window.undo.redo()
    np.testing.assert_allclose(window.edits.segments[i, 1], target_xy, atol=tolerance)


def test_geometry_helpers() -> None:
    seg = np.array([[0.0, 0.0], [10.0, 0.0]])
    halves = split_segment(seg, np.array([4.0, 1.0]))
    assert halves.shape == (2, 2, 2) and halves[0, 1, 0] == pytest.approx(4.0)
    np.testing.assert_allclose(rotate_segment(seg, 90.0), [[5, -5], [5, 5]], atol=1e-9)
    merged = merge_segments(seg, np.array([[12.0, 0.0], [20.0, 0.0]]))
    np.testing.assert_allclose(merged, [[0, 0], [20, 0]])
    # The graph layer's edges as prepared in the engine process: rows, boxes, bounds, ranks.
    points = np.array([[0.0, 0.0], [4.0, 1.0], [2.0, 5.0]])
    edges = EdgeSegments.from_rows(segment_rows(points, np.array([[0, 1], [2, 1]])),
                                   segment_rows(points, np.array([[0, 2]])))
    np.testing.assert_array_equal(edges.segs, [[0, 0, 4, 1], [2, 5, 4, 1], [0, 0, 2, 5]])
    assert edges.n_graph == 2 and edges.bounds == (0.0, 0.0, 4.0, 5.0)
    np.testing.assert_array_equal(edges.x_lo, [0, 2, 0])
    np.testing.assert_array_equal(edges.y_hi, [1, 5, 5])
    assert len(set(edges.rank.tolist())) == 3
    np.testing.assert_array_equal(edges.rank, EdgeSegments.from_rows(edges.segs, np.zeros((0, 4))).rank)
    assert len(EdgeSegments.empty().segs) == 0


def test_dots_item_rasterises_each_point_in_its_colour(qtbot: object) -> None:
    """The dots layer paints a size x size square of each point's palette colour at its
    mapped position (also across the device's edge), and nothing anywhere else."""
    from PySide6.QtGui import QImage, QPainter, QTransform

    palette = np.array([[255, 0, 0, 255], [0, 0, 255, 128], [0, 255, 0, 255]], dtype=np.uint8)
    dots = DotsItem(palette, size=3)
    xy = np.array([[2.0, 3.0], [10.2, 5.7], [0.0, 0.0], [19.5, 9.5], [100.0, 100.0]])
    dots.set_points(xy, np.array([0, 1, 2, 0, 1]))
    assert dots.count() == 5 and dots.boundingRect().contains(10.2, 5.7)
    image = QImage(20, 10, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(0)
    painter = QPainter(image)
    painter.setTransform(QTransform.fromScale(2.0, 1.0))  # device x = 2 x
    dots.paint(painter, None, None)
    painter.end()
    ptr = image.constBits()
    got = np.frombuffer(ptr, dtype=np.uint32, count=20 * 10).reshape(10, 20).copy()
    argb = premultiplied_argb(palette)
    want = np.zeros((10, 20), dtype=np.uint32)
    for (x, y), k in zip([(4, 3), (20, 5), (0, 0), (39, 9), (200, 100)], [0, 1, 2, 0, 1], strict=True):
        want[max(0, y - 1): y + 2, max(0, x - 1): x + 2] = argb[k]
    assert np.array_equal(got, want)
    assert argb[1] >> 24 == 128 and (argb[1] & 0xFF) == 128  # premultiplied blue at half alpha
    with pytest.raises(ValueError):
        dots.set_colour_index(np.zeros(3, dtype=int))
    dots.clear()
    assert dots.count() == 0 and dots.boundingRect().isNull()


def test_exports_read_back(qtbot: object, window: MainWindow, page_path: str, tmp_path: Path) -> None:
    open_and_prepare(qtbot, window, page_path)
    run_to_end(qtbot, window)
    seg = window.session.segmentation
    labels = seg.labels
    out = {kind: tmp_path / f"out-{kind}{suffix}" for kind, suffix in
           (("colour_png", ".png"), ("label_png16", ".png"), ("dat", ".dat"), ("page_xml", ".xml"),
            ("alto_xml", ".alto.xml"), ("json", ".json"), ("view_png", ".png"))}
    for kind, path in out.items():
        window.export(kind, str(path))
    qtbot.waitUntil(lambda: not window.is_busy() and all(p.exists() for p in out.values()), timeout=20_000)
    assert not window.banner.text()
    colour = cv2.imread(str(out["colour_png"]), cv2.IMREAD_COLOR)
    assert colour.shape == labels.shape + (3,)
    assert np.array_equal(colour[..., ::-1], engine_export.colour_labels(labels))
    sixteen = cv2.imread(str(out["label_png16"]), cv2.IMREAD_UNCHANGED)
    assert sixteen.dtype == np.uint16 and np.array_equal(sixteen, labels)
    assert np.array_equal(engine_export.read_dat(out["dat"], labels.shape), labels)
    assert engine_export.validate_page_xml(out["page_xml"]) == []
    assert engine_export.validate_alto_xml(out["alto_xml"]) == []
    data = json.loads(out["json"].read_text())
    assert data["parameters"]["max_em_iterations"] == FAST["max_em_iterations"]
    assert len(data["final_lines"]["lines"]) == len(seg.lines)
    view = cv2.imread(str(out["view_png"]))
    assert view is not None and view.shape[0] > 100
    assert not list(tmp_path.glob(".*.tmp*"))  # atomic writes leave no temporaries


def test_ground_truth_scores(qtbot: object, window: MainWindow, page_path: str, synthetic_page: object,
                             tmp_path: Path) -> None:
    gt = tmp_path / "gt.png"
    cv2.imwrite(str(gt), synthetic_page.labels.astype(np.uint8))
    open_and_prepare(qtbot, window, page_path)
    run_to_end(qtbot, window)
    window.load_ground_truth(str(gt))
    qtbot.waitUntil(lambda: window.session.metrics is not None and not window.is_busy(), timeout=20_000)
    score = window.session.metrics.score
    assert 0.0 <= score.fm <= 1.0 and score.n == synthetic_page.n_lines
    assert "FM" in window.gt_panel.label.text()
    assert window.gt_list.count() == len(window.session.segmentation.lines)
    assert len(window.session.metrics.matched_result) == len(window.session.segmentation.lines)


def test_cancel_mid_run(qtbot: object, window: MainWindow, page_path: str) -> None:
    # A run that would go on for a long time: tiny tolerance, many iterations.
    window.param_panel.set_params(Parameters().replace(max_em_iterations=10_000, kl_tolerance=1e-12,
                                                       mp_tolerance=1e-12))
    open_and_prepare(qtbot, window, page_path)
    window.run()
    qtbot.waitUntil(lambda: len(window.session.snapshots) >= 2, timeout=30_000)
    t0 = time.perf_counter()
    window.stop()
    qtbot.waitUntil(lambda: not window.is_busy(), timeout=2_000)
    assert time.perf_counter() - t0 < 1.0
    assert window.session.segmentation is None
    assert window.status_stage.text() == "stopped"
    n = len(window.session.snapshots)
    qtbot.wait(200)
    assert len(window.session.snapshots) == n  # nothing arrives after the stop


def test_stop_during_preparation(qtbot: object, window: MainWindow, tmp_path: Path,
                                 synthetic_page: object) -> None:
    big = tmp_path / "big.png"
    cv2.imwrite(str(big), np.tile(synthetic_page.image, (4, 4)))
    window.open_page(str(big))
    qtbot.waitUntil(lambda: window.status_stage.text().startswith("preparing:"), timeout=30_000)
    t0 = time.perf_counter()
    window.stop()
    qtbot.waitUntil(lambda: not window.is_busy(), timeout=2_000)
    assert time.perf_counter() - t0 < 1.0
    assert window.session.prep is None and window.status_stage.text() == "stopped"
    window.param_panel.set_params(Parameters().replace(**FAST))
    run_to_end(qtbot, window)  # Run prepares again
    assert window.session.prep is not None


def test_engine_crash_is_a_message_and_keeps_edits(qtbot: object, window: MainWindow, page_path: str) -> None:
    # The engine process dies mid-run (killed from outside): a message, the edits stay, and
    # the next run gets a new process (the preparation is sent to it).
    window.param_panel.set_params(Parameters().replace(max_em_iterations=10_000, kl_tolerance=1e-12,
                                                       mp_tolerance=1e-12))
    open_and_prepare(qtbot, window, page_path)
    window.editor.delete(0)
    edited = window.edits.segments.copy()
    window.run()
    qtbot.waitUntil(lambda: len(window.session.snapshots) >= 2, timeout=30_000)
    pid = window.engine_process.pid
    os.kill(pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: not window.is_busy() and bool(window.banner.text()), timeout=10_000)
    assert "engine process ended unexpectedly" in window.banner.text()
    assert window.status_stage.text() == "failed"
    np.testing.assert_allclose(window.edits.segments, edited)
    assert len(json.loads(window.edits.autosave_path().read_text())["initial_lines"]["lines"]) == len(edited)
    window.param_panel.set_params(Parameters().replace(**FAST))
    run_to_end(qtbot, window)  # the window recovers
    assert window.engine_process.pid != pid
    assert len(window.session.snapshots[0].lines) == len(edited)


def test_messages_round_trip_through_a_pipe() -> None:
    """Pickled messages with out-of-band arrays (larger than a pipe's buffer) arrive equal
    and writable; a closed pipe is an EOFError, a message cut short an OSError."""
    import threading
    from multiprocessing.connection import Connection

    from tlgui.messages import recv_message, send_message

    rng = np.random.default_rng(0)
    msg = ("finished", 7, {"labels": rng.integers(0, 99, (700, 500), dtype=np.int32),
                           "rgba": [rng.integers(0, 255, (300, 200, 4), dtype=np.uint8)],
                           "empty": np.zeros((0, 2)), "text": "ok"})
    r, w = os.pipe()
    reader, writer = Connection(r, writable=False), Connection(w, readable=False)
    sender = threading.Thread(target=lambda: [send_message(writer, msg) for _ in range(2)])
    sender.start()
    for _ in range(2):
        got = recv_message(reader)
        assert got[:2] == msg[:2] and got[2]["text"] == "ok"
        for key in ("labels", "empty"):
            np.testing.assert_array_equal(got[2][key], msg[2][key])
            assert got[2][key].dtype == msg[2][key].dtype
        np.testing.assert_array_equal(got[2]["rgba"][0], msg[2]["rgba"][0])
        got[2]["labels"][0, 0] = -1  # writable
    sender.join()
    os.write(w, (12).to_bytes(4, "big") + b"abcde")  # a 12-byte message cut short
    writer.close()
    with pytest.raises(OSError):
        recv_message(reader)
    with pytest.raises(EOFError):
        recv_message(reader)
    reader.close()


def test_task_thread_priority_is_lowered_alone() -> None:
    """The task thread makes itself nicer; the thread that asked keeps its priority."""
    import sys
    import threading

    from tlgui.worker import lower_thread_priority

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    before = nice()
    seen: list[tuple[bool, int]] = []
    thread = threading.Thread(target=lambda: seen.append((lower_thread_priority(3), nice())))
    thread.start()
    thread.join()
    done, theirs = seen[0]
    assert nice() == before
    if sys.platform.startswith("linux"):
        assert done and theirs == min(19, before + 3)


def test_engine_process_failure_and_kill_on_cancel(tmp_path: Path, synthetic_page: object) -> None:
    """Without a window: an engine exception is a message; a cancel inside a stage that cannot
    look (the ink of a 22-megapixel page) kills the process within a fraction of a second."""
    engine = EngineProcess()
    try:
        messages: list[tuple] = []
        job = Job(1, str(tmp_path / "missing.png"), Parameters(), RunControl(), em=False)
        assert engine.run(job, messages.append) == "failed"
        assert isinstance(messages[-1], Failed) and "missing.png" in messages[-1].message
        pid = engine.pid
        big = tmp_path / "big.png"
        cv2.imwrite(str(big), np.tile(synthetic_page.image, (6, 6)))
        control = RunControl()
        cancelled_at: list[float] = []

        def deliver(msg: object) -> None:
            if msg == Stage(2, "preparing: ink"):
                cancelled_at.append(time.perf_counter())
                control.cancel()

        assert engine.run(Job(2, str(big), Parameters(), control, em=False), deliver) == "cancelled"
        assert cancelled_at and time.perf_counter() - cancelled_at[0] < 1.0
        assert engine.pid != pid  # killed, and a fresh process already started
    finally:
        engine.close()
    assert engine.pid is None


def test_corrupt_file_shows_message(qtbot: object, window: MainWindow, tmp_path: Path, page_path: str) -> None:
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 50)
    window.open_page(str(bad))
    qtbot.waitUntil(lambda: bool(window.banner.text()), timeout=10_000)
    assert "Cannot open the page" in window.banner.text()
    assert window.session.path is None
    # The window still works afterwards.
    open_and_prepare(qtbot, window, page_path)
    before = window.edits.lines
    window.load_initial_lines(str(bad))
    qtbot.waitUntil(lambda: not window.is_busy() and "Cannot load initial lines" in window.banner.text(),
                    timeout=10_000)
    assert str(bad) in window.banner.text() and window.edits.lines is before and window.undo.count() == 0


def test_a_message_floats_over_the_canvas_and_moves_nothing(qtbot: object, window: MainWindow) -> None:
    """A message shown or dismissed leaves the canvas and the plots where they were (in the
    layout it moved the page and re-laid every plot's axes); it spans the top of the canvas'
    area, on top, and follows the window's width."""
    qtbot.waitExposed(window)
    widgets = [window.canvas, *window.plots.plots.values()]

    def places() -> list[tuple[tuple[int, int], tuple[int, int]]]:
        return [(w.mapTo(window, QPoint(0, 0)).toTuple(), w.size().toTuple()) for w in widgets]

    before = places()
    window.banner.show_message("The engine failed: " + "a long explanation " * 30)
    qtbot.waitUntil(window.banner.isVisible, timeout=5_000)
    QApplication.processEvents()
    assert places() == before
    central = window.centralWidget()
    strip = window.banner.geometry()
    assert strip.top() == 0 and strip.width() == central.width() and strip.height() > 20
    assert window.banner.label.geometry().height() > window.banner.label.fontMetrics().height()  # wrapped
    middle = strip.center()
    hit = central.childAt(middle)
    assert hit is window.banner or window.banner.isAncestorOf(hit)  # drawn over the canvas
    width = central.width()
    window.resize(window.width() + 300, window.height())
    qtbot.waitUntil(lambda: central.width() > width, timeout=5_000)
    qtbot.waitUntil(lambda: window.banner.width() == central.width(), timeout=5_000)
    moved = places()
    window.banner.hide()
    QApplication.processEvents()
    assert places() == moved and not window.banner.text()


def test_parameters_validate_and_persist(qtbot: object, window: MainWindow, page_path: str) -> None:
    panel = window.param_panel
    panel.editors["sample_ratio"].setText("2")
    assert "sample_ratio" in panel.message.text()
    assert panel.params.sample_ratio == Parameters().sample_ratio  # last valid set kept
    open_and_prepare(qtbot, window, page_path)
    panel.editors["sample_ratio"].setText("0.08")
    assert panel.needs_preparation() and "needs a new preparation" in panel.message.text()
    panel.editors["damping"].setText("0.3")
    assert json.loads(window.settings.value("params/json"))["damping"] == 0.3
    first_prep = window.session.prep
    run_to_end(qtbot, window)
    assert window.session.prep is not first_prep
    assert window.session.prep.params.sample_ratio == 0.08 and not panel.needs_preparation()
    panel.reset_defaults()
    assert panel.params == Parameters()


def test_preset_box_loads_the_paper_and_the_header_names_it(qtbot: object, window: MainWindow,
                                                             page_path: str) -> None:
    """Choosing "paper" loads every value of the preset into the fields; a switch can then be
    flipped alone; the run's header names the preset it ran with."""
    panel = window.param_panel
    panel.preset.setCurrentText("paper")
    assert panel.params == Parameters.preset("paper")
    assert panel.editors["unary_form"].currentText() == "paper"
    assert panel.editors["label_window"].text() == "0"
    panel.editors["update_rule"].setCurrentText("bethe")
    assert [d[0] for d in panel.params.diff(Parameters.preset("paper"))] == ["update_rule"]
    open_and_prepare(qtbot, window, page_path)
    run_to_end(qtbot, window)
    assert window.session.run_params.preset_name == "paper"
    assert "preset paper + update_rule=bethe" in window.lines_title.text()
    panel.reset_defaults()
    assert panel.preset.currentText() == "default" and panel.params == Parameters()


def test_flip_one_switch_reruns_from_the_same_preparation(qtbot: object, window: MainWindow,
                                                          page_path: str) -> None:
    """An EM-only switch (``unary_form``) re-runs EM on the preparation already made, and the
    run's header and parameters carry the switch; a stage 1-6 switch (``orientation_score``,
    marked ◆) prepares the page again first."""
    panel = window.param_panel
    open_and_prepare(qtbot, window, page_path)
    run_to_end(qtbot, window)
    prep = window.session.prep
    first_labels = window.session.segmentation.labels.copy()
    panel.editors["unary_form"].setCurrentText("paper")
    assert not panel.needs_preparation()
    run_to_end(qtbot, window)
    assert window.session.prep is prep  # no new preparation came back
    assert window.session.run_params.unary_form == "paper"
    assert "preset default + unary_form=paper" in window.lines_title.text()
    assert window.session.segmentation.labels.shape == first_labels.shape
    assert "◆" in panel.form.labelForField(panel.editors["orientation_score"]).text()
    panel.editors["orientation_score"].setCurrentText("sharpness")
    assert panel.needs_preparation()
    run_to_end(qtbot, window)
    assert window.session.prep is not prep
    assert window.session.prep.params.orientation_score == "sharpness"
    assert not panel.needs_preparation()


def test_parameters_saved_against_other_defaults_are_not_restored(qtbot: object, tmp_path: Path) -> None:
    from tlgui.settings import defaults_fingerprint

    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "config"))
    settings = app_settings()
    mine = Parameters().replace(damping=0.3, max_em_iterations=7)

    def new_window() -> MainWindow:
        win = MainWindow()
        qtbot.addWidget(win)
        win.show()
        return win

    # Saved by this version (same defaults): restored as they were, no message.
    first = new_window()
    first.param_panel.set_params(mine)
    first.shutdown()
    assert settings.value("params/defaults_fingerprint") == defaults_fingerprint()
    again = new_window()
    assert again.param_panel.params == mine and not again.banner.text()
    again.shutdown()
    # Saved by a version whose kl_tolerance default was 1e-4: the new defaults, and a note.
    old_defaults = json.loads(Parameters().to_json())
    old_defaults["kl_tolerance"] = 1e-4
    saved = json.loads(mine.to_json())
    saved["kl_tolerance"] = 1e-4  # the old default, saved along: not the user's choice
    settings.setValue("params/json", json.dumps(saved))
    settings.setValue("params/defaults_json", json.dumps(old_defaults))
    settings.setValue("params/defaults_fingerprint", "0123456789abcdef")
    settings.sync()
    upgraded = new_window()
    assert upgraded.param_panel.params == Parameters()
    note = upgraded.banner.text()
    assert "kl_tolerance 0.0001 → 0.001" in note
    assert "damping=0.3" in note and "max_em_iterations=7" in note
    assert "kl_tolerance=" not in note  # an old default is not reported as a dropped choice
    assert not upgraded.banner.error()  # a warning, not a failure
    # The next session restores the new defaults silently.
    upgraded.shutdown()
    assert settings.value("params/defaults_fingerprint") == defaults_fingerprint()
    assert Parameters.from_json(settings.value("params/json")) == Parameters()
    last = new_window()
    assert last.param_panel.params == Parameters() and not last.banner.text()
    last.shutdown()
    # Settings of a version that saved no fingerprint: the values that are not today's
    # defaults are dropped and named.
    settings.setValue("params/json", mine.to_json())
    settings.remove("params/defaults_json")
    settings.remove("params/defaults_fingerprint")
    settings.sync()
    legacy = new_window()
    assert legacy.param_panel.params == Parameters()
    assert "damping=0.3" in legacy.banner.text()
    legacy.shutdown()


def test_layers_toggle_without_recreating(qtbot: object, window: MainWindow, page_path: str) -> None:
    open_and_prepare(qtbot, window, page_path)
    run_to_end(qtbot, window)
    canvas: PageCanvas = window.canvas
    items = {name: list(layer.items) for name, layer in canvas.layers.items()}
    for name, check in window.layer_panel.checks.items():
        check.setChecked(not check.isChecked())
        check.setChecked(True)
        window.layer_panel.sliders[name].setValue(40)
        assert all(item.isVisible() for item in canvas.layers[name].items)
        assert all(item.opacity() == pytest.approx(0.4) for item in canvas.layers[name].items)
    assert {name: list(layer.items) for name, layer in canvas.layers.items()} == items
    assert canvas.samples_item.count() == len(window.session.prep.samples)
    for mode in ("selected", "entropy", "argmax"):
        canvas.set_posterior_mode(mode)
    # Layer switches are remembered for the next session.
    window.layer_panel.checks["graph"].setChecked(False)
    again = MainWindow()
    qtbot.addWidget(again)
    assert not again.layer_panel.checks["graph"].isChecked()
    assert again.layer_panel.sliders["graph"].value() == 40
    assert not again.canvas.layers["graph"].visible
    again.shutdown()


def test_screenshot_command(qtbot: object, tmp_path: Path, page_path: str) -> None:
    from tlgui.app import main

    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "config"))
    out = tmp_path / "shot.png"
    assert main(["--screenshot", str(out), "--size", "1300x800", page_path]) == 0
    image = cv2.imread(str(out))
    assert image.shape[:2] == (800, 1300)


def test_page_area_non_text_and_scale_are_shown(qtbot: object, window: MainWindow, tmp_path: Path,
                                                 synthetic_page: object) -> None:
    """Stage 1's findings are layers and a status field: on a page inside a dark surround the
    page area's outline is drawn round the paper, the surround is non-text ink, and the
    status bar gives the text height."""
    page = synthetic_page.image
    m = 120
    framed = np.full((page.shape[0] + 2 * m, page.shape[1] + 2 * m), 40, np.uint8)
    framed[m:-m, m:-m] = page
    path = tmp_path / "framed.png"
    cv2.imwrite(str(path), framed)
    open_and_prepare(qtbot, window, str(path))
    canvas = window.canvas
    assert {"pagearea", "nontext"} <= set(canvas.layers)
    xs, ys = canvas.page_area_item.getData()
    assert len(xs) >= 8  # at least the four sides, as segment pairs
    assert abs(np.min(xs) - m) <= 6 and abs(np.max(xs) - (m + page.shape[1])) <= 6
    assert abs(np.min(ys) - m) <= 6 and abs(np.max(ys) - (m + page.shape[0])) <= 6
    canvas.set_layer_visible("nontext", True)
    shown = canvas.non_text_item.image
    assert shown is not None and shown.max() == 255  # the surround
    h_cc = window.session.prep.stats.h_cc
    assert window.status_scale.text().startswith(f"H_cc {h_cc:.0f} px")
    assert "page" in window.status_scale.text()


def test_quiet_job_sends_only_its_result_and_keeps_the_shown_pages_preparation(
        tmp_path: Path, page_path: str, synthetic_page: object) -> None:
    """A background page (``Job.quiet``) sends no preparation and no snapshot back, writes
    its outputs, and leaves the preparation the process keeps for the shown page: a run of
    the shown page after it still reuses that preparation (without sending it again)."""
    other = tmp_path / "other.png"
    cv2.imwrite(str(other), make_page("skewed", seed=3).image)
    params = Parameters().replace(max_em_iterations=4)
    engine = EngineProcess()
    try:
        shown: list[object] = []
        assert engine.run(Job(1, page_path, params, RunControl(), em=False), shown.append) == "finished"
        prep = next(m.prep for m in shown if isinstance(m, Prepared))
        quiet: list[object] = []
        control = RunControl()
        control.set_mode(RUN)
        job = Job(2, str(other), params, control, None, None, True, Outputs(str(tmp_path / "out"), "other"), quiet=True)
        assert engine.run(job, quiet.append) == "finished"
        assert {type(m) for m in quiet} == {Stage, Finished}
        assert (tmp_path / "out" / "other.json").exists()
        again: list[object] = []
        control = RunControl()
        control.set_mode(RUN)
        assert engine.run(Job(3, page_path, params, control, prep), again.append) == "finished", again
        assert not any(isinstance(m, Prepared) for m in again) and any(isinstance(m, SnapshotReady) for m in again)
        # A run switched to RUN_QUIET (a page the user left) runs to the end without snapshots.
        left: list[object] = []
        control = RunControl()
        control.set_mode(RUN_QUIET)
        assert engine.run(Job(4, page_path, params, control, prep), left.append) == "finished", left
        assert {type(m) for m in left} == {Stage, Finished}
    finally:
        engine.close()


def test_stale_parameters_name_added_changed_and_removed_defaults() -> None:
    """Restoring over saved parameters after an upgrade: a parameter added since is named as
    new with its value, a changed default as old → new, a removed one as removed; a value the
    user had set (differing from the defaults of its time) is reported as dropped."""
    new = json.loads(Parameters().to_json())
    old = {k: v for k, v in new.items() if k != "weak_line_level"}
    old["t_o"] = 3.0
    old["retired_setting"] = 1
    saved = dict(old, sauvola_k=0.35)
    dropped, changed = stale_parameters(saved, old)
    assert f"new weak_line_level = {new['weak_line_level']}" in changed
    assert f"t_o 3.0 → {new['t_o']}" in changed
    assert "retired_setting removed" in changed
    assert dropped == ["sauvola_k=0.35"]
