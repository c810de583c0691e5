"""Issue 24: a run started from given lines has its regions follow them (``given_regions``).

The synthetic wide_words page (word gaps of 4 H_cc, rows 4.5 H_cc apart) with the paper's
region cut (``row_join`` 0) comes out in regions that cut its rows at the word gaps: a given
line sits in the region of its midpoint, and without the mechanism the words of its row in
the other regions go to other lines."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from synthetic import make_page

from engine import given_regions, initial_io, pipeline
from engine.metric import contest_metric
from engine.params import Parameters


@pytest.fixture(scope="module")
def split_page(tmp_path_factory):
    page = make_page("wide_words", seed=0)
    # Whole given lines (given_pieces 0): locked pieces sit in the regions of their own
    # midpoints and need no region to follow them (tests/test_given_pieces.py).
    prep = pipeline.prepare(page.image, Parameters(row_join=0.0, given_pieces=0))
    path = tmp_path_factory.mktemp("gt") / "gt.png"
    cv2.imwrite(str(path), page.labels.astype(np.uint16))
    return page, prep, path


def run(prep, start, params):
    run_prep = pipeline.for_lines(prep, start, params)
    *_, last = pipeline.run_em(run_prep, start, params=params)
    return run_prep, pipeline.finish(run_prep, last, params)


def rows_whole(page, labels):
    """Per ground-truth row: the share of its ink under its most common label, and whether
    that label holds ink of no other row."""
    out = []
    for g in range(1, int(page.labels.max()) + 1):
        row = page.labels == g
        counts = np.bincount(labels[row], minlength=int(labels.max()) + 1)
        best = int(counts.argmax())
        others = np.count_nonzero((labels == best) & (page.labels > 0) & ~row)
        out.append((counts[best] / row.sum(), best > 0 and others == 0))
    return out


def test_the_page_regions_cut_its_rows(split_page):
    page, prep, _ = split_page
    # More regions than rows, and some row's samples in two regions or more.
    assert len(prep.regions) > int(page.labels.max())
    xy = prep.samples.astype(int)
    row_of = page.labels[xy[:, 1], xy[:, 0]]
    split_rows = [g for g in range(1, int(page.labels.max()) + 1)
                  if len(np.unique(prep.sample_region[row_of == g])) > 1]
    assert split_rows


@pytest.mark.parametrize("lock", [True, False])
def test_each_given_line_gets_its_whole_row(split_page, lock):
    page, prep, path = split_page
    start = initial_io.read_initial_lines(path, prep, lock=lock)
    # One line a row (read free, the file's rows are anchored; a row the file leaves out
    # may get a line of EM's own: engine.initial_io.fill_missing_rows).
    given = start.locked if lock else start.anchored
    assert given.sum() == int(page.labels.max())
    params = prep.params
    assert params.given_regions > 0
    run_prep, seg = run(prep, start, params)
    assert run_prep is not prep
    ink = page.labels > 0
    for share, alone in rows_whole(page, seg.labels):
        assert share > 0.99 and alone
    assert contest_metric(page.labels, seg.labels, ink, 0.95).fm == 1.0
    # Switched off: the regions as prepared, and a row's words beyond its region go elsewhere.
    off = params.replace(given_regions=0.0)
    off_prep, off_seg = run(prep, start, off)
    assert off_prep is prep
    assert contest_metric(page.labels, off_seg.labels, ink, 0.95).fm < 1.0
    assert not all(share > 0.99 and alone for share, alone in rows_whole(page, off_seg.labels))


def test_the_moved_words_join_the_given_lines_regions(split_page):
    page, prep, path = split_page
    start = initial_io.read_initial_lines(path, prep, lock=True)
    run_prep = pipeline.for_lines(prep, start)
    xy = prep.samples.astype(int)
    row_of = page.labels[xy[:, 1], xy[:, 0]]
    for k in range(len(start)):
        # The row under line k: the ground-truth label most of the samples near it carry.
        line_of, dist = given_regions.nearest_given(prep, start, prep.params)
        g = np.bincount(row_of[(line_of == k) & (dist < 1.0)]).argmax()
        assert set(np.unique(run_prep.sample_region[row_of == g])) == {int(start.region[k])}
    # Frames and region indices are kept; MRF edges only join samples of one region.
    assert [r.phi for r in run_prep.regions] == [r.phi for r in prep.regions]
    e = run_prep.edges
    assert np.all(run_prep.sample_region[e[:, 0]] == run_prep.sample_region[e[:, 1]])
    assert sum(r.n_samples for r in run_prep.regions) == len(prep.samples)


def test_no_given_line_leaves_the_preparation_alone(split_page):
    _, prep, _ = split_page
    # A default run and the window's no-op round trip start from lines neither locked nor anchored.
    assert pipeline.for_lines(prep, prep.initial_lines) is prep
    assert pipeline.for_lines(prep, None) is prep
    assert Parameters.preset("paper").given_regions == 0.0
