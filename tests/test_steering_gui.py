"""Steering in the window (issue 24): edits are the engine's LineSet rows, a no-op edit gives the
unedited labels byte for byte, locked lines stay where the user put them, initial lines load
from files.  The real window and engine (offscreen), on a synthetic page and on the sample page.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from synthetic import make_page

from engine.edits import lines_equal
from tlgui.window import MainWindow

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "resources" / "sample" / "170025120000003_0074.jpg"


@pytest.fixture(scope="module")
def synthetic_page() -> object:
    return make_page("straight", seed=0)


@pytest.fixture(params=["synthetic", "sample"])
def any_page(request: pytest.FixtureRequest, tmp_path: Path, synthetic_page: object) -> str:
    if request.param == "sample":
        return str(SAMPLE)
    path = tmp_path / "page.png"
    cv2.imwrite(str(path), synthetic_page.image)
    return str(path)


@pytest.fixture
def page_path(tmp_path: Path, synthetic_page: object) -> str:
    path = tmp_path / "page.png"
    cv2.imwrite(str(path), synthetic_page.image)
    return str(path)


def open_and_prepare(qtbot: object, win: MainWindow, path: str) -> None:
    win.open_page(path)
    qtbot.waitUntil(lambda: win.session.prep is not None and not win.is_busy(), timeout=60_000)


def run_to_end(qtbot: object, win: MainWindow) -> np.ndarray:
    win.run()
    qtbot.waitUntil(lambda: win.session.segmentation is not None and not win.is_busy() and win.settled(),
                    timeout=120_000)
    return win.session.segmentation.labels.copy()


def test_no_op_edits_give_the_unedited_labels_byte_for_byte(qtbot: object, window: MainWindow,
                                                            any_page: str) -> None:
    """Rotate +2° then −2°, move and move back, add and undo: the lines are the prepared rows
    themselves again (not edited), and a re-run gives the unedited run's labels byte for byte.
    A real edit in between is seen as one (edited), and reaches the engine as rows."""
    open_and_prepare(qtbot, window, any_page)
    unedited = run_to_end(qtbot, window)
    sent: list[object] = []
    window.jobs.runJob.connect(sent.append)
    edits, editor = window.edits, window.editor
    prepared = edits.prepared
    assert edits.lines is prepared and not edits.edited
    window.set_edit_mode("select")
    i = len(prepared) // 2
    editor.select(i)
    editor.rotate_selected(2.0)
    assert edits.edited and not lines_equal(edits.lines, prepared)
    # Only the rotated row changed, and it kept what the engine knew of the line.
    others = np.arange(len(prepared)) != i
    assert lines_equal(edits.lines.take(others), prepared.take(others))
    for name in ("sigma_t", "sigma_s", "prior", "region"):
        assert getattr(edits.lines, name)[i] == getattr(prepared, name)[i], name
    editor.rotate_selected(-2.0)
    assert not edits.edited and edits.lines is prepared
    segment = edits.segments[i].copy()
    editor.move(i, segment + [0.0, 5.0])
    assert edits.edited
    editor.move(i, segment)
    assert not edits.edited and edits.lines is prepared
    mid = segment.mean(axis=0)
    editor.add_segment(np.array([mid + [-60.0, 9.0], mid + [60.0, 9.0]]))
    assert edits.edited and len(edits.lines) == len(prepared) + 1
    window.undo.undo()
    assert not edits.edited and edits.lines is prepared
    window.set_edit_mode("off")
    again = run_to_end(qtbot, window)
    assert sent[-1].lines is None  # the prepared lines: nothing of the user's to send
    assert again.tobytes() == unedited.tobytes()
    # A real edit reaches the engine as the window's rows, bit for bit.
    window.set_edit_mode("select")
    editor.delete(0)
    edited = edits.lines
    run_to_end(qtbot, window)
    assert lines_equal(sent[-1].lines, edited) and len(window.session.snapshots[0].lines) == len(prepared) - 1


def test_moved_and_added_lines_keep_what_the_engine_knew(qtbot: object, window: MainWindow, page_path: str) -> None:
    """A moved line keeps its σt, σs, prior and region; a stretched one gets the σs of its new
    length; a new line gets its σt from its neighbours (not H_cc / 2); undo restores the rows."""
    open_and_prepare(qtbot, window, page_path)
    edits, editor = window.edits, window.editor
    prepared, prep = edits.prepared, window.session.prep
    window.set_edit_mode("select")
    i = 2
    segment = edits.segments[i].copy()
    editor.move(i, segment + [0.0, 4.0])
    row = edits.lines.take([i])
    for name in ("sigma_t", "sigma_s", "prior", "region"):
        assert getattr(row, name)[0] == getattr(prepared, name)[i], name
    np.testing.assert_allclose(edits.segments[i], segment + [0.0, 4.0], atol=1e-6)
    longer = segment.copy()
    longer[1] += (segment[1] - segment[0]) * 0.5
    editor.move(i, longer)
    assert edits.lines.sigma_s[i] == pytest.approx(1.5 * prepared.sigma_s[i], rel=1e-6)
    assert edits.lines.sigma_t[i] == prepared.sigma_t[i]
    # A new line between lines 2 and 3: its σt is their mean, not H_cc / 2.
    between = (prepared.segments()[3] + prepared.segments()[4]) / 2.0
    editor.add_segment(between)
    new = edits.lines.take([len(edits.lines) - 1])
    assert new.sigma_t[0] == pytest.approx(np.mean(prepared.sigma_t[[3, 4]]))
    assert new.sigma_t[0] != pytest.approx(prep.stats.h_cc / 2.0)
    for _ in range(3):
        window.undo.undo()
    assert edits.lines is prepared and not edits.edited


def test_a_locked_line_stays_where_the_user_put_it(qtbot: object, window: MainWindow, page_path: str) -> None:
    """A line moved half a line pitch off its text is locked at once (LOCK_EDITED_LINES, the
    steering study's decision), drawn as locked, and EM keeps it exactly there (its a, b, c);
    unlocked (Ctrl+L), EM moves it; the line table's lock box locks it again."""
    from tlgui.edit import LOCK_EDITED_LINES

    assert LOCK_EDITED_LINES
    open_and_prepare(qtbot, window, page_path)
    edits, editor = window.edits, window.editor
    prepared = edits.prepared
    window.set_edit_mode("select")
    qtbot.waitUntil(window.settled, timeout=2_000)
    assert window.lines_title.text().startswith("Initial lines")
    i = 3
    pitch = float(np.median(np.diff(np.sort(prepared.segments()[:, :, 1].mean(axis=1)))))
    editor.move(i, edits.segments[i] + [0.0, pitch / 2.0])
    moved = edits.lines.take([i])
    assert edits.lines.locked.tolist() == [k == i for k in range(len(edits.lines))]
    assert window.canvas.initial_locked[i] and window.canvas.initial_locked.sum() == 1
    assert "1 locked" in window.lines_title.text() or window.presenter.draw_pending
    # The table shows the initial lines while they are edited; its lock box unlocks and locks.
    from PySide6.QtCore import Qt

    from tlgui.linetable import LOCK_COLUMN

    table = window.line_table.table_model
    qtbot.waitUntil(lambda: table.rowCount() == len(edits.lines) and table.editable
                    and table.item(i, LOCK_COLUMN).checkState() == Qt.CheckState.Checked, timeout=2_000)
    table.item(i, LOCK_COLUMN).setCheckState(Qt.CheckState.Unchecked)
    assert not edits.lines.locked.any()
    qtbot.waitUntil(lambda: not table.locked[i], timeout=2_000)  # the table redrawn
    table.item(i, LOCK_COLUMN).setCheckState(Qt.CheckState.Checked)
    assert edits.lines.locked.tolist() == [k == i for k in range(len(edits.lines))]
    window.set_edit_mode("off")
    run_to_end(qtbot, window)
    last = window.session.snapshots[-1].lines
    kept = np.flatnonzero(last.locked)
    assert len(kept) == 1
    k = int(kept[0])
    assert (last.a[k], last.b[k], last.c[k]) == (moved.a[0], moved.b[0], moved.c[0])
    # Unlocked (Ctrl+L on the selected line), the same line is moved by EM.
    window.set_edit_mode("select")
    editor.select(i)
    window.toggle_lock_selected()
    assert not edits.lines.locked.any()
    window.set_edit_mode("off")
    run_to_end(qtbot, window)
    last = window.session.snapshots[-1].lines
    assert not last.locked.any()
    assert not np.any((last.b == moved.b[0]) & (last.c == moved.c[0]))


def test_initial_lines_load_from_a_runs_json_and_from_page_xml(qtbot: object, window: MainWindow,
                                                               tmp_path: Path) -> None:
    """The lines and parameters JSON of a run records its initial lines and the user's edits;
    loaded back (File ▸ Load initial lines) they are the prepared rows again and a re-run gives
    the same labels; PAGE XML baselines load as one line each, locked on request; a bad file
    changes nothing."""
    open_and_prepare(qtbot, window, str(SAMPLE))
    first = run_to_end(qtbot, window)
    out = tmp_path / "run.json"
    window.export("json", str(out))
    qtbot.waitUntil(lambda: out.exists() and not window.is_busy(), timeout=20_000)
    data = json.loads(out.read_text())
    assert data["edited"] is False and data["edits"] == []
    assert len(data["initial_lines"]["lines"]) == len(window.edits.prepared)
    # Edit, then load the run's own JSON: back to the prepared rows exactly, undoably.
    window.set_edit_mode("select")
    window.editor.delete(0)
    assert window.edits.edited
    window.load_initial_lines(str(out))
    qtbot.waitUntil(lambda: not window.is_busy() and window.undo.undoText() == "load initial lines", timeout=20_000)
    assert window.edits.lines is window.edits.prepared and not window.edits.edited
    window.set_edit_mode("off")
    assert run_to_end(qtbot, window).tobytes() == first.tobytes()
    window.undo.undo()
    assert window.edits.edited  # the deletion is back: loading never loses an edit
    # The sample's PAGE ground truth: one initial line per TextLine, all locked when asked.
    xml = SAMPLE.with_suffix(".xml")
    n_gt = xml.read_text(encoding="utf-8").count("<TextLine") or xml.read_text(encoding="utf-8").count(":TextLine")
    window.load_initial_lines(str(xml), lock=True)
    qtbot.waitUntil(lambda: not window.is_busy() and window.undo.undoText() == "load initial lines", timeout=30_000)
    assert window.edits.lines.text_line_count() == n_gt > 10 and window.edits.lines.locked.all()
    # A file that is no file of lines: one message naming it; the lines stay.
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    before = window.edits.lines
    window.load_initial_lines(str(bad))
    qtbot.waitUntil(lambda: not window.is_busy() and "Cannot load initial lines" in window.banner.text(),
                    timeout=10_000)
    assert "notes.json" in window.banner.text() and window.edits.lines is before


def test_an_older_autosave_of_segments_is_restored(qtbot: object, window: MainWindow, page_path: str) -> None:
    """An autosave written before the window kept rows (page segments only) still brings the
    user's lines back, placed on the page by their segments."""
    open_and_prepare(qtbot, window, page_path)
    segments = window.edits.segments[1:].copy()  # the user had deleted the first line
    path = window.edits.autosave_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"page": page_path, "edited": True, "segments": np.round(segments, 3).tolist()}))
    window.open_page(page_path)
    qtbot.waitUntil(lambda: window.session.prep is not None and not window.is_busy(), timeout=30_000)
    assert window.edits.edited and len(window.edits.lines) == len(segments)
    mid = window.edits.segments.mean(axis=1)
    want = segments.mean(axis=1)
    assert np.abs(mid[np.lexsort(mid.T[::-1])] - want[np.lexsort(want.T[::-1])]).max() < 0.5
    assert "Restored" in window.banner.text()


def test_page_xml_lines_load_anchored_and_the_status_bar_says_so(qtbot: object, window: MainWindow) -> None:
    """Another tool's lines loaded free (File ▸ Load initial lines, not locked) are anchored:
    EM keeps each on the row the file put it on; they are drawn apart (solid cyan), and
    selecting one says "anchored" in the status bar, a prepared line does not; loaded locked,
    they are locked, not anchored."""
    open_and_prepare(qtbot, window, str(SAMPLE))
    window.set_edit_mode("select")
    window.editor.select(0)
    assert "anchored" not in window.statusBar().currentMessage()
    assert "measured" not in window.statusBar().currentMessage()  # EM's initial guess
    xml = SAMPLE.with_suffix(".xml")
    window.load_initial_lines(str(xml))
    qtbot.waitUntil(lambda: not window.is_busy() and window.undo.undoText() == "load initial lines", timeout=30_000)
    lines = window.edits.lines
    assert lines.anchored.any() and not lines.locked.any()
    # Drawn apart: the anchored lines solid cyan, the others (the rows the fill added) dashed.
    canvas = window.canvas
    assert canvas.initial_anchored.tolist() == lines.anchored.tolist()
    xs, _ = canvas.initial_anchored_item.getData()
    assert len(xs) == 2 * int(lines.anchored.sum())
    i = int(np.flatnonzero(lines.anchored)[0])
    window.editor.select(i)
    message = window.statusBar().currentMessage()
    assert message.startswith(f"initial line {i}:") and message.endswith("· anchored"), message
    window.load_initial_lines(str(xml), lock=True)
    qtbot.waitUntil(lambda: not window.is_busy() and window.edits.lines.locked.all(), timeout=30_000)
    assert not window.canvas.initial_anchored.any()
    window.editor.select(0)
    assert window.statusBar().currentMessage().endswith("· locked")
    # Their spreads were measured on the ink inside the file's polygons, and the status says so.
    measured = window.edits.lines.sigma_t_measured
    assert measured.any()
    window.editor.select(int(np.flatnonzero(measured)[0]))
    assert "px measured on its ink · locked" in window.statusBar().currentMessage()


def test_the_canvas_draws_the_regions_the_run_works_on(qtbot: object, window: MainWindow, tmp_path: Path) -> None:
    """Lines loaded locked lead the regions EM runs on (engine.given_regions): during and
    after that run the region, block and graph layers draw the run's regions and MRF edges,
    not the page's own; a new run from the page's own lines, and Reset, draw the page's again.
    The page: synthetic wide_words with the paper's region cut (``row_join`` 0), whose regions
    cut its rows at the word gaps."""
    from conftest import FAST

    from engine import initial_io, pipeline
    from engine.params import Parameters
    from tlgui.geometry import region_outlines

    page = make_page("wide_words", seed=0)
    path, gt = tmp_path / "page.png", tmp_path / "gt.png"
    cv2.imwrite(str(path), page.image)
    cv2.imwrite(str(gt), page.labels.astype(np.uint16))
    # Whole given lines (given_pieces 0): locked pieces sit in their own midpoints' regions.
    params = Parameters().replace(**FAST, row_join=0.0, given_pieces=0)
    window.param_panel.set_params(params)
    open_and_prepare(qtbot, window, str(path))
    window.layer_panel.checks["graph"].setChecked(True)
    prep, canvas = window.session.prep, window.canvas
    own_outlines = canvas.geometry.region_segments.copy()
    assert canvas.run_edges is None
    # What the engine runs on: the page's regions as the given lines lead them.
    followed = pipeline.for_lines(prep, initial_io.read_initial_lines(gt, prep, lock=True), prep.params)
    assert followed is not prep and not np.array_equal(followed.sample_region, prep.sample_region)
    window.load_initial_lines(str(gt), lock=True)
    qtbot.waitUntil(lambda: not window.is_busy() and window.edits.lines.locked.all(), timeout=30_000)
    run_to_end(qtbot, window)
    assert canvas.run_edges is not None and np.array_equal(canvas.run_edges, followed.edges)
    assert np.allclose(canvas.geometry.region_segments, region_outlines(followed))
    assert not np.array_equal(canvas.geometry.region_segments, own_outlines)
    assert canvas.graph_item.edges.n_graph == len(followed.edges)
    assert len(canvas.block_texts) == sum(r.n_samples > 0 for r in followed.regions)
    # Reset: the page's own regions and edges again.
    window.reset()
    assert canvas.run_edges is None and np.array_equal(canvas.geometry.region_segments, own_outlines)
    assert canvas.graph_item.edges.n_graph == len(prep.edges)
    # A run from the page's own lines draws the page's regions, though the last run's differed.
    run_to_end(qtbot, window)
    window.revert_edits()
    qtbot.waitUntil(lambda: not window.is_busy() and not window.edits.edited, timeout=30_000)
    run_to_end(qtbot, window)
    assert canvas.run_edges is None and np.array_equal(canvas.geometry.region_segments, own_outlines)


def test_initial_lines_asked_for_before_the_page_is_prepared_load_once_it_is(qtbot: object,
                                                                            window: MainWindow) -> None:
    """``tlgui PAGE --initial-lines FILE --lock-initial-lines`` asks for the lines right after
    opening the page, before its preparation: they load, locked, once the page is prepared."""
    xml = SAMPLE.with_suffix(".xml")
    n_gt = xml.read_text(encoding="utf-8").count("<TextLine") or xml.read_text(encoding="utf-8").count(":TextLine")
    window.open_page(str(SAMPLE))
    assert window.session.prep is None
    window.load_initial_lines(str(xml), lock=True, when_prepared=True)
    qtbot.waitUntil(lambda: window.session.prep is not None and not window.is_busy()
                    and window.undo.undoText() == "load initial lines", timeout=60_000)
    assert window.edits.lines.text_line_count() == n_gt > 10 and window.edits.lines.locked.all()


def test_a_line_joined_from_locked_pieces_is_drawn_along_its_bend(qtbot: object, window: MainWindow,
                                                                  tmp_path: Path) -> None:
    """A label file's bent rows loaded locked: the pieces are the initial lines, the result
    has one line a row, and the canvas draws each along its path (``Segmentation.paths``): a
    click on a path's inner point, far off the straight line through its ends, selects it."""
    from synthetic import bent_rows_page

    page = bent_rows_page(seed=0, bend=0.8)
    path, gt = tmp_path / "bent.png", tmp_path / "gt.png"
    cv2.imwrite(str(path), page.image)
    cv2.imwrite(str(gt), page.labels.astype(np.uint16))
    open_and_prepare(qtbot, window, str(path))
    window.load_initial_lines(str(gt), lock=True)
    qtbot.waitUntil(lambda: not window.is_busy() and window.edits.lines.locked.all(), timeout=30_000)
    assert window.edits.lines.text_line_count() == page.n_lines < len(window.edits.lines)
    # The line table says which text line each piece is part of.
    from tlgui.linetable import PIECE_COLUMN

    model = window.line_table.table_model
    qtbot.waitUntil(lambda: model.rowCount() == len(window.edits.lines), timeout=10_000)
    chain = window.edits.lines.chain
    assert [model.item(r, PIECE_COLUMN).text() for r in range(model.rowCount())] == [
        f"{c + 1}" for c in chain]
    # The window counts text lines, and says they are in pieces.
    count = f"{page.n_lines} lines in {len(window.edits.lines)} pieces"
    assert window.status.lines.text() == count and count in window.lines_title.text()
    # A selected piece shows the other pieces of its text line.
    from tlgui.edit import SAME_TEXT_LINE_COLOUR, SELECTED_COLOUR

    editor = window.editor
    window.set_edit_mode("select")
    assert len(editor.rois) == len(window.edits.lines)
    k = int(np.flatnonzero(chain == chain[len(chain) // 2])[1])
    editor.select(k)
    colours = [roi.pen.color().name() for roi in editor.rois]
    assert colours[k] == SELECTED_COLOUR
    assert [c == SAME_TEXT_LINE_COLOUR for c in colours] == list((chain == chain[k]) & (np.arange(len(chain)) != k))
    window.set_edit_mode("off")
    run_to_end(qtbot, window)
    seg = window.session.segmentation
    assert len(seg.lines) == page.n_lines and set(seg.paths) == set(range(page.n_lines))
    qtbot.waitUntil(lambda: window.status.lines.text() == f"{page.n_lines} lines", timeout=5_000)  # joined
    canvas = window.canvas
    assert canvas.shown_lines is seg.lines and set(canvas.shown_bends) == set(seg.paths)
    far = 0
    for k, bend in seg.paths.items():
        seg_k = seg.lines.segments()[k]
        d = seg_k[1] - seg_k[0]
        offs = np.abs((bend[:, 0] - seg_k[0, 0]) * d[1] - (bend[:, 1] - seg_k[0, 1]) * d[0]) / np.hypot(*d)
        x, y = bend[int(np.argmax(offs))]  # the path's point farthest from the straight line
        if offs.max() > 2 * float(seg.lines.sigma_t[k]) + 10:
            assert canvas.line_at(float(x), float(y), tolerance_px=1.0) == k
            # ... and its band, drawn along the path, holds that point.
            from PySide6.QtCore import QPointF

            band = canvas.lines_item.paths[k % len(canvas.lines_item.paths)][0]
            assert band.contains(QPointF(float(x), float(y)))
            far += 1
    assert far >= page.n_lines // 2
    # An EM snapshot's lines are the pieces: its title says so.
    window.slider.setValue(0)
    qtbot.waitUntil(lambda: window.canvas.snapshot is window.session.snapshots[0], timeout=5_000)
    assert f"({page.n_lines} lines in {len(window.session.snapshots[0].lines)} pieces)" in window.lines_title.text()
