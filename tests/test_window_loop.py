"""The window's loop as a user meets it (issue 24, item 5): a finished page can be edited at
once, ground truth is drawn as outlines and counted as the line table counts, results are kept
per preset, documents open with their subfolders, the status bar is the shown page's, the
posterior's colours have a scale, exports never default to the pages' folder.  The real window
and engine, offscreen, on synthetic pages.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import FAST
from synthetic import make_page

from engine.params import Parameters
from tlgui.document import DONE, NOT_RUN
from tlgui.window import MainWindow


@pytest.fixture(scope="module")
def pages() -> list[object]:
    # The second page is written larger: its text scale (H_cc) differs from the first's.
    return [make_page("straight", seed=0), make_page("skewed", seed=1, scale=1.5)]


def write(folder: Path, pages: list[object], truth: bool = True) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k, page in enumerate(pages):
        path = folder / f"page{k}.png"
        cv2.imwrite(str(path), page.image)
        if truth:
            cv2.imwrite(str(folder / f"page{k}_labels.png"), page.labels.astype(np.uint16))
        out.append(path)
    return out


def open_document(qtbot: object, win: MainWindow, specs: list[Path]) -> None:
    win.open_document([str(s) for s in specs])
    qtbot.waitUntil(lambda: len(win.document.pages) > 0 and not win.is_busy(), timeout=30_000)


def wait_idle(qtbot: object, win: MainWindow, timeout: int = 60_000) -> None:
    qtbot.waitUntil(lambda: not win.is_busy() and win.settled(), timeout=timeout)


def run_all(qtbot: object, win: MainWindow) -> None:
    win.run_all()
    qtbot.waitUntil(lambda: win.jobs.run_queue is None and not win.is_busy()
                    and all(p.state == DONE for p in win.document.pages), timeout=120_000)


def test_a_finished_page_can_be_edited_at_once(qtbot: object, window: MainWindow, tmp_path: Path,
                                               pages: list[object]) -> None:
    """A page shown from its saved result shows the initial lines it started from; Select /
    move prepares it (the result stays on screen) and its lines can be edited and reverted;
    Reset drops the result and shows the initial lines — no EM step, Stop, Reset first."""
    folder = tmp_path / "book"
    write(folder, pages[:1])
    open_document(qtbot, window, [folder])
    run_all(qtbot, window)
    window.open_document([str(folder)])  # again: the page now comes from its saved result
    qtbot.waitUntil(lambda: window.session.segmentation is not None and not window.is_busy(), timeout=30_000)
    assert window.session.prep is None and window.jobs.job is None
    saved = json.loads((window.document.outdir / "page0.json").read_text())
    n_initial = len(saved["initial_lines"]["lines"])
    assert len(window.canvas.initial_segments) == n_initial > 0  # drawn from the saved result
    result = window.session.segmentation
    window.set_edit_mode("select")
    qtbot.waitUntil(lambda: window.session.prep is not None and not window.is_busy(), timeout=30_000)
    assert window.session.segmentation is result and window.canvas.labels_item.image is not None
    qtbot.waitUntil(lambda: len(window.editor.rois) == len(window.edits.lines) == n_initial, timeout=5_000)
    window.editor.delete(0)
    assert window.edits.edited
    window.revert_edits()
    assert not window.edits.edited and window.edits.lines is window.edits.prepared
    window.set_edit_mode("off")
    window.reset()
    wait_idle(qtbot, window)
    assert window.session.segmentation is None and window.canvas.labels_item.image is None
    assert window.line_table.table_model.rowCount() == n_initial
    assert window.lines_title.text().startswith("Initial lines")


def test_ground_truth_is_drawn_as_outlines_and_counted_as_the_table(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    """Every ground-truth line has an outline (green when a result line matched it one to one,
    red when none did); the line table, the score and the matched list count the same lines."""
    page = pages[0]
    path = write(tmp_path, [page], truth=False)[0]
    gt = tmp_path / "truth.png"
    labels = page.labels.copy()
    labels[labels == 2] = 1  # lines 1 and 2 as one: neither can be matched one to one
    cv2.imwrite(str(gt), labels.astype(np.uint16))
    window.open_page(str(path))
    qtbot.waitUntil(lambda: window.session.prep is not None and not window.is_busy(), timeout=30_000)
    window.load_ground_truth(str(gt))
    qtbot.waitUntil(lambda: not window.is_busy() and window.truth.labels is not None, timeout=10_000)
    unscored = window.canvas.truth_items["unscored"].getData()[0]
    assert unscored is not None and len(unscored) > 0
    window.run()
    qtbot.waitUntil(lambda: window.session.metrics is not None and not window.is_busy() and window.settled(),
                    timeout=60_000)
    score, seg = window.session.metrics.score, window.session.segmentation
    matched_gt = int(np.count_nonzero(score.per_gt_match[1:]))
    assert matched_gt == score.o2o and score.n == page.n_lines - 1
    assert 0 < matched_gt < score.n  # the merged line is not matched
    green = window.canvas.truth_items["matched"].getData()[0]
    red = window.canvas.truth_items["unmatched"].getData()[0]
    assert green is not None and red is not None and len(green) > 0 and len(red) > 0
    assert window.canvas.truth_items["unscored"].getData()[0] is None or \
        len(window.canvas.truth_items["unscored"].getData()[0]) == 0
    # The red outline is the merged line's: every point of it lies on label 1 (dilated).
    red_x, red_y = window.canvas.truth_items["unmatched"].getData()
    ys = np.clip(red_y.astype(int), 0, labels.shape[0] - 1)
    xs = np.clip(red_x.astype(int), 0, labels.shape[1] - 1)
    near = cv2.dilate((labels == 1).astype(np.uint8), np.ones((41, 41), np.uint8)) > 0
    assert near[ys, xs].mean() > 0.95
    rows = window.line_table.table_model.rowCount()
    assert rows == len(seg.lines) == window.gt_list.count()
    assert f"of {score.n} GT / {score.m} result lines" in window.gt_panel.label.text()
    assert rows == score.m or f"({rows} lines" in window.gt_panel.label.text()
    from tlgui.linetable import GT_COLUMN

    marks = [window.line_table.table_model.item(r, GT_COLUMN).text() for r in range(rows)]
    assert marks.count("✓") == score.o2o


def test_results_are_kept_per_preset_and_never_replaced_unasked(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    """A run under ``paper`` goes to the page's paper results, beside the default ones (the
    page list names the preset); a run with other parameters under the same preset asks
    before replacing the saved result, and keeps it when the answer is no."""
    folder = tmp_path / "book"
    write(folder, pages[:1], truth=False)
    open_document(qtbot, window, [folder])
    run_all(qtbot, window)
    outdir = window.document.outdir
    default_json = (outdir / "page0.json").read_bytes()
    from tlgui.pagelist import COLUMNS

    def row() -> list[str]:
        model = window.page_list.table_model
        return [model.item(0, c).text() for c in range(len(COLUMNS))]

    assert row()[COLUMNS.index("preset")] == "default + max_em_iterations=8"
    window.param_panel.preset.setCurrentText("paper")
    window.param_panel.editors["max_em_iterations"].setText(str(FAST["max_em_iterations"]))
    qtbot.waitUntil(lambda: window.document.preset == "paper" and not window.is_busy(), timeout=10_000)
    assert row()[COLUMNS.index("state")] == NOT_RUN  # no paper result of this page yet
    window.run()
    qtbot.waitUntil(lambda: window.document.pages[0].state == DONE and not window.is_busy(), timeout=60_000)
    assert (outdir / "preset-paper" / "page0.json").is_file()
    assert (outdir / "page0.json").read_bytes() == default_json  # the default result is untouched
    assert row()[COLUMNS.index("preset")] == "paper + max_em_iterations=8"
    # Back to the default preset: its result again.
    window.param_panel.set_params(Parameters().replace(**FAST))
    qtbot.waitUntil(lambda: window.document.preset == "default" and not window.is_busy(), timeout=10_000)
    assert row()[COLUMNS.index("preset")] == "default + max_em_iterations=8"
    # Another damping under the default preset: asked; "no" runs without saving.
    questions: list[str] = []
    window.jobs.confirm = lambda question: questions.append(question) is not None and False
    window.param_panel.editors["damping"].setText("0.3")
    window.run()
    qtbot.waitUntil(lambda: window.session.segmentation is not None and not window.is_busy(), timeout=60_000)
    assert len(questions) == 1 and "default + max_em_iterations=8" in questions[0]
    assert (outdir / "page0.json").read_bytes() == default_json
    assert row()[COLUMNS.index("preset")].endswith("(not saved)")


def test_documents_open_with_subfolders_and_a_failed_open_changes_nothing(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    write(tmp_path / "archive" / "box1", pages[:1], truth=False)
    write(tmp_path / "archive" / "box2" / "folder", pages[1:], truth=False)
    open_document(qtbot, window, [tmp_path / "archive"])
    assert [Path(p.path).parent.name for p in window.document.pages] == ["box1", "folder"]
    before = list(window.document.pages)
    (tmp_path / "empty").mkdir()
    for spec in (tmp_path / "empty", tmp_path / "missing"):
        window.open_document([str(spec)])
        qtbot.waitUntil(lambda spec=spec: not window.is_busy() and str(spec) in window.banner.text(),
                        timeout=10_000)
        assert window.document.pages == before and window.session.path == before[0].path


def test_the_status_bar_shows_the_shown_pages_scale_and_time(
        qtbot: object, window: MainWindow, tmp_path: Path, pages: list[object]) -> None:
    folder = tmp_path / "book"
    write(folder, pages, truth=False)
    open_document(qtbot, window, [folder])
    run_all(qtbot, window)
    scales = []
    for index in (0, 1, 0):
        window.go_to_page(index) if window.current_index() != index else None
        qtbot.waitUntil(lambda index=index: window.current_index() == index and window.session.segmentation
                        is not None and not window.is_busy(), timeout=30_000)
        meta = json.loads((window.document.outdir / f"page{index}.json").read_text())
        h_cc = meta["preparation"]["h_cc"]
        assert window.status_scale.text().startswith(f"H_cc {h_cc:.0f} px")
        assert window.status.elapsed.text().strip() == f"{window.document.pages[index].seconds:.1f} s"
        scales.append(h_cc)
    assert scales[0] != scales[1]


def test_the_posterior_colours_have_a_scale(qtbot: object, window: MainWindow) -> None:
    panel = window.layer_panel
    scale = panel.scale
    assert not scale.isVisible()
    panel.mode.setCurrentIndex(2)  # entropy
    assert scale.isVisible() and scale.low.text().startswith("0") and scale.high.text().startswith("1")
    from tlgui.canvas import _LEVEL0, N_LEVELS, POSTERIOR_PALETTE

    image = scale.bar.pixmap().toImage()
    got = np.array([[image.pixelColor(x, 0).red(), image.pixelColor(x, 0).green(), image.pixelColor(x, 0).blue()]
                    for x in (0, N_LEVELS - 1)])
    np.testing.assert_array_equal(got, POSTERIOR_PALETTE[[_LEVEL0, _LEVEL0 + N_LEVELS - 1], :3])
    panel.mode.setCurrentIndex(0)
    assert not scale.isVisible()


def test_exports_never_default_to_the_pages_folder(qtbot: object, window: MainWindow, tmp_path: Path,
                                                   pages: list[object]) -> None:
    path = write(tmp_path / "scans", pages[:1], truth=False)[0]
    window.open_page(str(path))
    qtbot.waitUntil(lambda: window.session.prep is not None and not window.is_busy(), timeout=30_000)
    for kind in ("colour_png", "dat", "page_xml", "json"):
        proposed = window.exports.default_path(kind)
        assert proposed.parent != path.parent and proposed.name.startswith("page0")
    window.exports.folderChosen.emit(str(path.parent))  # the user saved beside the page once
    assert window.exports.default_path("dat").parent != path.parent
    window.exports.folderChosen.emit(str(tmp_path / "out"))
    assert window.exports.default_path("dat").parent == tmp_path / "out"
