"""Issue 24: edits that change only what they touch, initial lines from files, locked lines.

Synthetic pages (tests/synthetic.py) with exact labels, and the bundled sample page."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import pytest
from synthetic import make_page

from engine import cli, edits, initial_io, pipeline
from engine.export import write_dat
from engine.initial_io import InitialLinesError, read_initial_lines
from engine.metric import contest_metric
from engine.model import LineSet, Region, to_region_frame
from engine.params import Parameters
from engine.regression import point_features, spread_about

SAMPLE = Path(__file__).resolve().parents[1] / "resources" / "sample" / "170025120000003_0074.jpg"


@pytest.fixture(scope="module")
def page():
    return make_page("straight", seed=0)


@pytest.fixture(scope="module")
def prep(page):
    return pipeline.prepare(page.image, Parameters())


@pytest.fixture(scope="module")
def prep_whole(page):
    """The page prepared with given lines never cut into pieces (``given_pieces`` 0): the
    rules below are about whole lines (tests/test_given_pieces.py covers the pieces)."""
    return pipeline.prepare(page.image, Parameters(given_pieces=0))


@pytest.fixture(scope="module")
def label_file(page, tmp_path_factory):
    path = tmp_path_factory.mktemp("gt") / "gt.png"
    cv2.imwrite(str(path), page.labels.astype(np.uint16))
    return path


def labels_from(prep, lines):
    *_, last = pipeline.run_em(prep, lines)
    return pipeline.finish(prep, last)


@pytest.fixture(scope="module")
def unedited(prep):
    return labels_from(prep, prep.initial_lines).labels


def rotated(seg, deg):
    t = np.deg2rad(deg)
    rot = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
    centre = seg.mean(axis=0)
    return (seg - centre) @ rot.T + centre


def noop_edits(prep, lines):
    """Rotate every line +2 and -2 deg, move one 10 px and back, add a line and undo it."""
    for i in range(len(lines)):
        lines = edits.move_line(prep, lines, i, rotated(lines.segments()[i], 2.0))
        lines = edits.move_line(prep, lines, i, rotated(lines.segments()[i], -2.0))
    seg = lines.segments()[1]
    lines = edits.move_line(prep, lines, 1, seg + [0.0, 10.0])
    lines = edits.move_line(prep, lines, 1, lines.segments()[1] - [0.0, 10.0])
    before_add = lines
    lines = edits.add_line(prep, lines, seg + [0.0, prep.stats.h_cc])
    assert len(lines) == len(before_add) + 1
    return edits.delete_lines(lines, len(lines) - 1)  # the undo of the add


# ----------------------------------------------------------------------------- LineSet.locked


def test_lineset_locked_defaults_and_round_trips():
    z = np.zeros(3)
    lines = LineSet(z, np.array([1.0, 2.0, 3.0]), z, z + 1, z + 1, z + 1 / 3, np.zeros(3, np.int32), z)
    assert lines.locked.dtype == bool and not lines.locked.any()
    with pytest.raises(ValueError):
        lines.locked[0] = True  # read-only like every field
    locked = edits.set_locked(lines, [1], True)
    assert locked.locked.tolist() == [False, True, False] and not lines.locked.any()
    assert locked.take([2, 1]).locked.tolist() == [False, True]
    back = LineSet.from_dict(locked.to_dict())
    assert edits.lines_equal(back, locked)
    old = locked.to_dict()
    for row in old["lines"]:
        del row["locked"]  # a JSON written before issue 24
    assert not LineSet.from_dict(old).locked.any()


def test_spread_about_a_fixed_line_matches_the_direct_computation():
    rng = np.random.default_rng(3)
    uv = rng.normal([500.0, 200.0], [80.0, 6.0], (400, 2))
    w = rng.uniform(0, 1, (400, 2))
    a, b = np.array([0.05, -0.1]), np.array([180.0, 260.0])
    features, origin = point_features(uv)
    got = spread_about(w.T @ features, origin, a, b, True, 0.0)
    resid = (uv[:, 1:2] - a * uv[:, :1] - b) / np.sqrt(1 + a * a)
    expected = np.sqrt((w * resid**2).sum(axis=0) / w.sum(axis=0))
    np.testing.assert_allclose(got, expected, rtol=1e-9)


# ----------------------------------------------------------------------------- edits


def test_move_line_changes_only_that_line(prep):
    lines = edits.set_locked(prep.initial_lines, [2], True)
    seg = lines.segments()[2] + [3.0, -4.0]
    moved = edits.move_line(prep, lines, 2, seg)
    np.testing.assert_allclose(moved.segments()[2], seg, atol=1e-9)
    for name in ("sigma_t", "sigma_s", "prior", "region", "phi", "locked"):
        assert getattr(moved, name)[2] == getattr(lines, name)[2], name
    others = np.arange(len(lines)) != 2
    assert edits.lines_equal(moved.take(others), lines.take(others))
    stretched = edits.move_line(prep, lines, 2, np.array([seg[0], seg[1] + (seg[1] - seg[0]) * 0.5]))
    assert stretched.sigma_s[2] == pytest.approx(1.5 * lines.sigma_s[2])


def _with_region_under_line(prep, k, phi):
    """``prep`` with the samples within H_cc of initial line ``k`` given to a new region of
    frame angle ``phi`` (radians), as the block boundaries give a block's edge words to a
    neighbouring block (moc_train_5, poilus AN_0207-0)."""
    seg = prep.initial_lines.segments()[k]
    d = seg[1] - seg[0]
    t = np.clip(((prep.samples - seg[0]) @ d) / (d @ d), 0.0, 1.0)
    near = np.linalg.norm(prep.samples - (seg[0] + t[:, None] * d), axis=1) < prep.stats.h_cc
    assert near.sum() > 20
    sample_region = prep.sample_region.copy()
    sample_region[near] = len(prep.regions)
    other = Region(index=len(prep.regions), phi=float(phi), bbox=prep.regions[0].bbox,
                   n_samples=int(near.sum()))
    return dataclasses.replace(prep, regions=(*prep.regions, other), sample_region=sample_region)


def test_a_nudged_line_keeps_its_frame_when_its_ink_lies_in_a_steep_region(prep):
    """Rotated +2 and -2 degrees, a line whose samples lie in a region at 88 degrees keeps its
    own region and frame (read in the steep frame its slope was clipped and it jumped 592 px on
    moc_train_5), so the round trip gives back the original lines; dragged onto a region at its
    own angle, a line does join it."""
    lines = prep.initial_lines
    own_phi = float(prep.regions[int(lines.region[2])].phi)
    steep = _with_region_under_line(prep, 2, own_phi + np.deg2rad(88.0))
    there = edits.move_line(steep, lines, 2, rotated(lines.segments()[2], 2.0))
    assert there.region[2] == lines.region[2]
    back = edits.move_line(steep, there, 2, rotated(there.segments()[2], -2.0))
    assert edits.lines_equal(edits.restore_unchanged(lines, back), lines)
    flat = _with_region_under_line(prep, 2, own_phi + np.deg2rad(3.0))
    joined = edits.move_line(flat, lines, 2, lines.segments()[2] + [0.0, 1.0])
    assert joined.region[2] == len(prep.regions)
    np.testing.assert_allclose(joined.segments()[2], lines.segments()[2] + [0.0, 1.0], atol=1e-6)


def test_add_line_takes_sigma_t_from_its_neighbours(prep):
    lines = prep.initial_lines
    floor = prep.params.sigma_t_floor * prep.stats.h_cc
    st = floor + 1.0 + np.arange(len(lines))
    lines = LineSet(lines.a, lines.b, lines.c, st, lines.sigma_s, lines.prior, lines.region, lines.phi)
    segs = lines.segments()
    between = (segs[3] + segs[4]) / 2.0
    added = edits.add_line(prep, lines, between, locked=True)
    assert len(added) == len(lines) + 1 and added.locked[-1] and not added.locked[:-1].any()
    assert added.sigma_t[-1] == pytest.approx((st[3] + st[4]) / 2.0)
    assert edits.lines_equal(added.take(np.arange(len(lines))), lines)
    # EM takes the appended line in its place across the text.
    first = next(iter(pipeline.run_em(prep, added)))
    assert len(first.lines) == len(added) and np.all(np.diff(first.lines.b) > 0)


def test_a_drawn_or_moved_line_keeps_the_length_the_user_gave(prep):
    """A line drawn over a word or two (shorter than four W_cc) runs as far as it was drawn:
    not stretched to the M-step's sigma_s floor of one W_cc either side of its middle."""
    lines = prep.initial_lines
    floor = prep.params.sigma_s_floor * prep.stats.w_cc
    mid = lines.segments()[1].mean(axis=0)
    short = np.array([mid - [0.75 * floor, 0.0], mid + [0.75 * floor, 0.0]])  # 1.5 W_cc
    added = edits.add_line(prep, lines, short)
    moved = edits.move_line(prep, lines, 1, short)
    for got in (added.segments()[-1], moved.segments()[1]):
        assert np.allclose(got, short, atol=0.5), (got, short)


def test_split_then_merge_gives_the_line_back(prep):
    lines = prep.initial_lines
    seg = lines.segments()[2]
    split = edits.split_line(prep, lines, 2, seg.mean(axis=0))
    assert len(split) == len(lines) + 1
    assert edits.lines_equal(split.take([0, 1]), lines.take([0, 1]))
    np.testing.assert_allclose(split.segments()[2][0], seg[0], atol=1e-6)
    np.testing.assert_allclose(split.segments()[3][1], seg[1], atol=1e-6)
    merged = edits.merge_lines(prep, split, 2, 3)
    np.testing.assert_allclose(merged.segments()[2], seg, atol=1e-6)
    assert edits.lines_equal(edits.restore_unchanged(lines, merged), lines)


def test_noop_edits_give_identical_labels_on_a_synthetic_page(prep, unedited):
    original = prep.initial_lines
    edited = noop_edits(prep, original)
    # The round trip is not exact in floating point: restore_unchanged is what makes it a no-op.
    assert not edits.lines_equal(edited, original)
    restored = edits.restore_unchanged(original, edited)
    assert edits.lines_equal(restored, original)
    assert np.array_equal(labels_from(prep, restored).labels, unedited)


def test_a_real_edit_is_kept_by_restore_unchanged(prep):
    original = prep.initial_lines
    moved = edits.move_line(prep, original, 2, original.segments()[2] + [0.0, 0.5])
    restored = edits.restore_unchanged(original, moved)
    assert not edits.lines_equal(restored, original)
    assert edits.lines_equal(restored, moved)
    unlocked_twin = edits.set_locked(original, [4], True)  # same segment, other flag: an edit
    assert edits.restore_unchanged(original, unlocked_twin).locked[4]


def test_noop_edits_give_identical_labels_on_the_sample_page():
    prep = pipeline.prepare(SAMPLE, Parameters())
    unedited = labels_from(prep, prep.initial_lines).labels
    restored = edits.restore_unchanged(prep.initial_lines, noop_edits(prep, prep.initial_lines))
    assert edits.lines_equal(restored, prep.initial_lines)
    assert np.array_equal(labels_from(prep, restored).labels, unedited)


def test_lock_changed_locks_drawn_and_moved_lines_only(prep):
    original = prep.initial_lines
    moved = edits.move_line(prep, original, 2, original.segments()[2] + [0.0, 3.0])
    drawn = edits.add_line(prep, moved, original.segments()[4] + [0.0, prep.stats.h_cc / 2])
    locked = edits.lock_changed(original, drawn)
    assert np.flatnonzero(locked.locked).tolist() == [2, len(drawn) - 1]
    # A move undone is the original row again: nothing is locked, the labels stay the same.
    back = edits.restore_unchanged(original, edits.move_line(prep, moved, 2, original.segments()[2]))
    assert edits.lines_equal(edits.lock_changed(original, back), original)


# ----------------------------------------------------------------------------- locked lines


def test_ground_truth_lines_locked_give_fm_one(page, prep, prep_whole, label_file):
    lines = read_initial_lines(label_file, prep_whole, lock=True)
    assert len(lines) == page.n_lines and lines.locked.all()
    # Each label's spread was measured on its own ink (LineSet.sigma_t_measured).
    assert lines.sigma_t_measured.all()
    seg = labels_from(prep_whole, lines)
    assert contest_metric(page.labels, seg.labels, ink=page.labels > 0).fm == 1.0
    # The final lines are the locked ones, where they were put, with the spread across they
    # were given (EM weighed them with it, and it was measured on their ink).
    assert seg.lines.locked.all() and len(seg.lines) == len(lines)
    assert seg.lines.sigma_t_measured.all()
    given = {(a, b, c): st for a, b, c, st in zip(lines.a, lines.b, lines.c, lines.sigma_t, strict=True)}
    for name in ("a", "b", "c", "sigma_s", "sigma_t"):
        np.testing.assert_array_equal(np.sort(getattr(seg.lines, name)), np.sort(getattr(lines, name)))
    # The same lines with their spread a guess (drawn in the window): measured about each
    # line, never narrower than the guess.
    guessed = dataclasses.replace(lines, sigma_t_measured=np.zeros(len(lines), bool))
    seg = labels_from(prep_whole, guessed)
    assert contest_metric(page.labels, seg.labels, ink=page.labels > 0).fm == 1.0
    assert not seg.lines.sigma_t_measured.any()
    floor = np.array([given[k] for k in zip(seg.lines.a, seg.lines.b, seg.lines.c, strict=True)])
    assert (seg.lines.sigma_t >= floor).all() and (seg.lines.sigma_t > floor).any()
    # Cut into pieces (the default), the same: one line per text line, every pixel right.
    pieces = read_initial_lines(label_file, prep, lock=True)
    assert len(pieces) > page.n_lines and pieces.text_line_count() == page.n_lines
    seg = labels_from(prep, pieces)
    assert contest_metric(page.labels, seg.labels, ink=page.labels > 0).fm == 1.0
    assert seg.lines.locked.all() and len(seg.lines) == page.n_lines


def _shift_across(prep, lines, k, amount):
    """Line k moved ``amount`` pixels across its text (down in its region frame)."""
    seg = lines.segments()[k]
    d = seg[1] - seg[0]
    normal = np.array([-d[1], d[0]]) / np.hypot(*d)
    if normal[1] < 0:
        normal = -normal
    return edits.move_line(prep, lines, k, seg + amount * normal)


@pytest.mark.parametrize("lock", [True, False])
def test_a_locked_line_shifted_by_half_a_pitch_stays_where_the_user_put_it(prep_whole, label_file, lock):
    gt = read_initial_lines(label_file, prep_whole, lock=lock)
    if not lock:  # free as EM's own lines (a file's free lines are anchored: see below)
        gt = dataclasses.replace(gt, anchored=np.zeros(len(gt), bool))
    pitch = float(np.median(np.diff(gt.b)))
    k = len(gt) // 2
    shifted = _shift_across(prep_whole, gt, k, pitch / 2.0)
    seg = labels_from(prep_whole, shifted)
    *_, last = pipeline.run_em(prep_whole, shifted)
    at = np.argmin(np.abs(last.lines.b - shifted.b[k]))
    where = (last.lines.a[at], last.lines.b[at], last.lines.c[at])
    if lock:  # EM and stage 8 leave it exactly there
        assert where == (shifted.a[k], shifted.b[k], shifted.c[k])
        hit = (seg.lines.b == shifted.b[k]) & (seg.lines.a == shifted.a[k]) & seg.lines.locked
        assert hit.sum() == 1
    else:  # free, EM takes it back towards its row (the rule the lock overrides)
        assert abs(last.lines.b[at] - shifted.b[k]) > pitch / 4.0


def test_a_locked_line_keeps_its_prior_through_em(prep_whole, label_file):
    # Issue 24: a locked line's place, spread and prior are the user's; the M-step learns the
    # prior of the free lines only (a prior that follows the posterior moves the boundary
    # between two locked rows towards the one with less ink, iteration after iteration).
    gt = read_initial_lines(label_file, prep_whole, lock=True)
    free = len(gt) // 2
    lines = dataclasses.replace(gt, locked=np.arange(len(gt)) != free)
    snaps = list(pipeline.run_em(prep_whole, lines))
    assert len(snaps) >= 2
    moved = False
    for snap in snaps[1:]:
        got = snap.lines
        for k in np.flatnonzero(lines.locked):
            at = np.flatnonzero((got.a == lines.a[k]) & (got.b == lines.b[k]) & (got.c == lines.c[k]))
            assert len(at) == 1 and got.prior[at[0]] == lines.prior[k]
        moved |= not np.isin(got.prior, lines.prior).all()
    assert moved  # the free line's prior is learnt


@pytest.mark.parametrize("lock", [True, False])
def test_a_locked_line_is_never_removed_nor_merged(prep_whole, label_file, lock):
    gt = read_initial_lines(label_file, prep_whole, lock=lock)
    segs = gt.segments()
    k = 3
    # A duplicate of line k (0.2 H_cc below it) and a line on blank paper below the text.
    blank = segs[-1] + [0.0, 2.5 * float(np.median(np.diff(gt.b)))]
    assert blank[:, 1].max() < prep_whole.shape[0] - 5
    lines = edits.add_line(prep_whole, gt, segs[k] + [0.0, 0.2 * prep_whole.stats.h_cc], locked=lock)
    lines = edits.add_line(prep_whole, lines, blank, locked=lock)
    seg = labels_from(prep_whole, lines)
    if lock:
        assert len(seg.lines) == len(gt) + 2 and seg.lines.locked.all()
        assert np.isin(lines.b[-2:], seg.lines.b).all()
    else:  # EM and stage 8 would merge the duplicate and drop the blank line
        assert len(seg.lines) == len(gt)


@pytest.mark.parametrize("keep", [True, False])
def test_two_lines_a_file_gives_on_one_row_stay_two(page, prep, tmp_path, keep):
    """A file that gives one row as two lines (its left and right halves, as a tool does for
    a row with a wide gap): stage 8 merges collinear fragments, but not two given lines
    (anchor_keep); with anchor_keep off they end as one line."""
    labels = page.labels.copy()
    k = 3
    ys, xs = np.nonzero(labels == k)
    right = (labels == k) & (np.arange(labels.shape[1])[None, :] > np.median(xs))
    labels[right] = page.n_lines + 1
    path = tmp_path / "halves.png"
    cv2.imwrite(str(path), labels.astype(np.uint16))
    params = Parameters().replace(anchor_keep=keep)
    prep_k = pipeline.prepare(page.image, params)
    lines = read_initial_lines(path, prep_k)
    assert len(lines) == page.n_lines + 1 and lines.anchored.all()
    *_, last = pipeline.run_em(prep_k, lines)
    seg = pipeline.finish(prep_k, last)
    assert len(seg.lines) == (page.n_lines + 1 if keep else page.n_lines)
    if keep:  # each half holds its own ink: the left half's pixels and the right half's differ
        left = (page.labels == k) & ~right
        assert np.bincount(seg.labels[left]).argmax() != np.bincount(seg.labels[right]).argmax()

def test_a_free_duplicate_joins_a_locked_line_and_two_locked_lines_never_merge(prep_whole, label_file):
    gt = read_initial_lines(label_file, prep_whole, lock=True)
    k = 3
    twin = gt.segments()[k] + [0.0, 0.2 * prep_whole.stats.h_cc]
    free = labels_from(prep_whole, edits.add_line(prep_whole, gt, twin, locked=False))
    assert len(free.lines) == len(gt) and free.lines.locked.all()
    both = labels_from(prep_whole, edits.add_line(prep_whole, gt, twin, locked=True))
    assert len(both.lines) == len(gt) + 1


# ----------------------------------------------------------------------------- reading files


def _pixel_axes(page):
    """Each line's ink axis: the principal axis of its pixels through their centroid."""
    segs = []
    for k in range(page.n_lines):
        ys, xs = np.nonzero(page.labels == k + 1)
        xy = np.stack([xs, ys], axis=1).astype(float)
        centre = xy.mean(axis=0)
        direction = np.linalg.eigh(np.cov((xy - centre).T))[1][:, -1]
        segs.append([centre - 100 * direction, centre + 100 * direction])
    return np.array(segs)


def _polygon(page, k):
    ys, xs = np.nonzero(page.labels == k + 1)
    hull = cv2.convexHull(np.stack([xs, ys], axis=1).astype(np.int32)).reshape(-1, 2)
    return hull


def _pts(xy, sep=","):
    return " ".join(f"{x:.1f}{sep}{y:.1f}" for x, y in xy)


def write_page_xml(path, page, baselines=True, polygons=True, locked=()):
    h, w = page.labels.shape
    rows = []
    for k in range(page.n_lines):
        coords = f'<Coords points="{_pts(_polygon(page, k))}"/>' if polygons else ""
        base = f'<Baseline points="{_pts(page.baselines[k])}"/>' if baselines else ""
        custom = ' custom="tlseg {locked:true;}"' if k in locked else ""
        rows.append(f'<TextLine id="l{k}"{custom}>{coords}{base}</TextLine>')
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n'
                    '<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15">'
                    f'<Page imageFilename="p.png" imageWidth="{w}" imageHeight="{h}">'
                    f'<TextRegion id="r0">{"".join(rows)}</TextRegion></Page></PcGts>', encoding="utf-8")
    return path


def write_alto_xml(path, page, baselines=True, polygons=True):
    h, w = page.labels.shape
    rows = []
    for k in range(page.n_lines):
        poly = _polygon(page, k)
        x0, y0 = poly.min(axis=0)
        x1, y1 = poly.max(axis=0)
        shape = f'<Shape><Polygon POINTS="{_pts(poly, " ")}"/></Shape>' if polygons else ""
        base = f' BASELINE="{_pts(page.baselines[k], " ")}"' if baselines else ""
        rows.append(f'<TextLine ID="l{k}" HPOS="{x0}" VPOS="{y0}" WIDTH="{x1 - x0}" HEIGHT="{y1 - y0}"{base}>'
                    f'{shape}</TextLine>')
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<alto xmlns="http://www.loc.gov/standards/alto/ns-v4#">'
                    '<Description><MeasurementUnit>pixel</MeasurementUnit></Description>'
                    f'<Layout><Page WIDTH="{w}" HEIGHT="{h}"><PrintSpace><TextBlock ID="b0">{"".join(rows)}'
                    '</TextBlock></PrintSpace></Page></Layout></alto>', encoding="utf-8")
    return path


def assert_on_the_ink_centres(page, prep, lines, tolerance):
    """One line per ground-truth line, each within ``tolerance`` pixels across (at its ends)
    of the axis of that line's ink, in the ground truth's order down the page."""
    axes = _pixel_axes(page)
    assert len(lines) == page.n_lines
    got = lines.segments()
    order = np.argsort(got.mean(axis=1)[:, 1])
    for axis, seg in zip(axes[np.argsort(axes.mean(axis=1)[:, 1])], got[order], strict=True):
        d = axis[1] - axis[0]
        normal = np.array([-d[1], d[0]]) / np.hypot(*d)
        across = [(p - axis[0]) @ normal for p in seg]
        assert max(np.abs(across)) < tolerance, (across, tolerance)


@pytest.mark.parametrize("kind", ["page_baselines", "page_baselines_only", "page_polygons", "alto_baselines",
                                  "alto_polygons", "label_png", "dat"])
def test_initial_lines_read_from_files(page, prep, tmp_path, kind):
    path = tmp_path / "lines.xml"
    # The baseline gives the direction: the ink's own axis tilts from it by a few tenths of a
    # degree (3 px at the ends of a 700 px line); a polygon's or label's axis is the ink's.
    tolerance = 3.0 if "baselines" in kind else 2.0
    if kind == "page_baselines":
        write_page_xml(path, page)
    elif kind == "page_baselines_only":  # no polygon: moved by the ink above or below it
        write_page_xml(path, page, polygons=False)
        tolerance = 0.2 * page_xheight(page)
    elif kind == "page_polygons":
        write_page_xml(path, page, baselines=False)
    elif kind == "alto_baselines":
        write_alto_xml(path, page)
    elif kind == "alto_polygons":
        write_alto_xml(path, page, baselines=False)
    elif kind == "label_png":  # with a stray one-pixel label, which is no line
        path = tmp_path / "lines.png"
        labels = page.labels.astype(np.uint8)
        labels[5, 5] = page.n_lines + 1
        cv2.imwrite(str(path), labels)
    else:
        path = tmp_path / "lines.dat"
        write_dat(path, page.labels)
    lines = read_initial_lines(path, prep)
    assert not lines.locked.any()
    assert_on_the_ink_centres(page, prep, lines, tolerance)
    # A label's or a polygon's spread is measured on its ink; a bare baseline's is a guess.
    given = lines.sigma_t_measured[lines.anchored]
    assert given.all() if kind != "page_baselines_only" else not given.any()
    if "baselines" in kind:  # the baselines themselves lie too far from the ink's centre
        with pytest.raises(AssertionError):
            straight = np.array([[b[0], b[-1]] for b in page.baselines])
            assert_on_the_ink_centres(page, prep, edits_lines(prep, straight), 2 * tolerance)


def page_xheight(page):
    """The synthetic hand's x-height: the median height of the line's ink above its baseline."""
    return float(np.median([_across(page, k) for k in range(page.n_lines)]))


def _across(page, k):
    ys, xs = np.nonzero(page.labels == k + 1)
    base = page.baselines[k]
    d = base[-1] - base[0]
    normal = np.array([d[1], -d[0]]) / np.hypot(*d)  # up the page
    return float(np.percentile((np.stack([xs, ys], axis=1) - base[0]) @ normal, 75))


def edits_lines(prep, segments):
    return initial_io.lines_from_page_segments(prep, segments, np.full(len(segments), np.nan),
                                               np.zeros(len(segments), bool))


def test_a_short_line_of_tall_ink_reads_along_the_text(page, prep, tmp_path):
    """A label whose ink spreads more across the text than along it (a line of one tall
    letter) is read as the M-step would fit it, along the text, not up its principal axis."""
    labels = page.labels.astype(np.uint8)
    y, x = np.nonzero(labels == 2)
    cx, cy = int(x.mean()), int(y.mean())
    labels[labels == 2] = 0
    labels[cy - 20:cy + 20, cx - 5:cx + 5] = 2  # 10 px wide, 40 px tall
    path = tmp_path / "short.png"
    cv2.imwrite(str(path), labels)
    lines = read_initial_lines(path, prep)
    seg = lines.segments()[np.argmin(np.abs(lines.segments().mean(axis=1) - [cx, cy]).sum(axis=1))]
    d = seg[1] - seg[0]
    assert abs(np.degrees(np.arctan2(d[1], d[0]))) % 180 < 10 or abs(np.degrees(np.arctan2(d[1], d[0]))) > 170


def test_files_drawn_on_the_stored_pixels_of_an_exif_turned_page(page, tmp_path):
    """Tools that ignore EXIF draw on the stored pixels: PAGE points and label images in that
    frame are turned with the page (orientation 6: shown = stored turned clockwise)."""
    from PIL import Image

    h, w = page.labels.shape
    stored = np.ascontiguousarray(np.rot90(page.image, 1))  # (w, h): load_page turns it back
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(stored).save(tmp_path / "turned.jpg", exif=exif, quality=95)
    prep = pipeline.prepare(tmp_path / "turned.jpg", Parameters())
    assert prep.shape == (h, w)

    def to_stored(xy):  # shown (x, y) -> stored (y, w - 1 - x)
        xy = np.asarray(xy, float)
        return np.stack([xy[:, 1], w - 1 - xy[:, 0]], axis=1)

    rows = [f'<TextLine id="l{k}"><Coords points="{_pts(to_stored(_polygon(page, k)))}"/>'
            f'<Baseline points="{_pts(to_stored(page.baselines[k]))}"/></TextLine>' for k in range(page.n_lines)]
    xml = tmp_path / "turned.xml"
    xml.write_text('<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15">'
                   f'<Page imageFilename="turned.jpg" imageWidth="{h}" imageHeight="{w}">'
                   f'<TextRegion id="r0">{"".join(rows)}</TextRegion></Page></PcGts>', encoding="utf-8")
    assert_on_the_ink_centres(page, prep, read_initial_lines(xml, prep), 3.0)
    labels = tmp_path / "turned_labels.png"
    cv2.imwrite(str(labels), np.ascontiguousarray(np.rot90(page.labels.astype(np.uint8), 1)))
    assert_on_the_ink_centres(page, prep, read_initial_lines(labels, prep), 2.0)


def test_a_page_custom_attribute_locks_a_line(page, prep, tmp_path):
    lines = read_initial_lines(write_page_xml(tmp_path / "l.xml", page, locked=(2, 5)), prep)
    # The two locked lines, cut into pieces (given_pieces); the free ones whole.
    assert len(np.unique(lines.chain[lines.locked])) == 2 and (lines.chain[lines.locked] >= 0).all()
    assert (lines.chain[~lines.locked] == -1).all()
    assert read_initial_lines(tmp_path / "l.xml", prep, lock=True).locked.all()


def test_tlseg_json_from_another_preparation_places_the_segments(page, prep, tmp_path):
    other = pipeline.prepare(page.image, Parameters(seed=5, sample_ratio=0.05))
    gt = read_initial_lines(write_page_xml(tmp_path / "l.xml", page), other)
    import json
    (tmp_path / "r.json").write_text(json.dumps({"initial_lines": gt.to_dict(), "shape": list(page.labels.shape)}))
    lines = read_initial_lines(tmp_path / "r.json", prep)
    np.testing.assert_allclose(np.sort(lines.segments(), axis=0), np.sort(gt.segments(), axis=0), atol=1e-6)
    assert lines.anchored.sum() == gt.anchored.sum() > 0  # the file's lines stay anchored
    # Read where the rows cannot be taken as they are (another regression form: each row's
    # segment is placed anew), the lock and the anchor of each line still come with it.
    paper_form = pipeline.prepare(page.image, Parameters(regression="paper"))
    gt = edits.set_locked(gt, [0], True)
    (tmp_path / "r.json").write_text(json.dumps({"initial_lines": gt.to_dict(), "shape": list(page.labels.shape)}))
    placed = read_initial_lines(tmp_path / "r.json", paper_form)
    assert not placed.rotation_invariant
    assert placed.locked.sum() == 1 and placed.anchored.sum() == gt.anchored.sum()


BAD = {
    "missing": None,
    "malformed.xml": "<PcGts><Page>",
    "other_root.xml": '<?xml version="1.0"?><html><body/></html>',
    "no_lines.xml": ('<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15">'
                     '<Page imageFilename="p.png" imageWidth="900" imageHeight="700"/></PcGts>'),
    "other_size.xml": ('<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15">'
                       '<Page imageFilename="p.png" imageWidth="100" imageHeight="70"><TextRegion id="r">'
                       '<TextLine id="l"><Baseline points="1,1 50,1"/></TextLine></TextRegion></Page></PcGts>'),
    "bad_points.xml": ('<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15">'
                       '<Page imageFilename="p.png" imageWidth="900" imageHeight="700"><TextRegion id="r">'
                       '<TextLine id="l"><Baseline points="1,1 50"/></TextLine></TextRegion></Page></PcGts>'),
    "garbage.json": "{not json",
    "not_tlseg.json": '{"x": 1}',
    "nan.json": '{"initial_lines": {"lines": [{"a": NaN, "b": 1, "c": 1, "sigma_t": 1, "sigma_s": 1, '
                '"prior": 1, "region": 0, "phi": 0}]}}',
    "text.png": "this is not an image",
    "wrong_size.png": "SMALL",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_initial_lines_files_give_one_clear_error(prep, tmp_path, name):
    path = tmp_path / name
    if name == "wrong_size.png":
        cv2.imwrite(str(path), np.ones((10, 10), np.uint8))
    elif BAD[name] is not None:
        path.write_text(BAD[name], encoding="utf-8")
    with pytest.raises(InitialLinesError) as info:
        read_initial_lines(path, prep)
    msg = str(info.value)
    assert str(path) in msg and "\n" not in msg and msg.count("cannot read") == 1


# ----------------------------------------------------------------------------- command line


@pytest.fixture(scope="module")
def page_file(page, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pages")
    cv2.imwrite(str(folder / "syn.png"), page.image)
    return folder / "syn.png"


def test_rerun_from_the_runs_own_json_reproduces_its_dat(page_file, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    assert cli.main(["segment", str(page_file), "-o", str(first), "-q"]) == 0
    import json
    meta = json.loads((first / "syn.json").read_text())
    assert len(meta["initial_lines"]["lines"]) >= 2
    assert cli.main(["segment", str(page_file), "-o", str(second), "-q",
                     "--initial-lines", str(first / "syn.json")]) == 0
    assert (first / "syn.dat").read_bytes() == (second / "syn.dat").read_bytes()
    # A no-op edit in the JSON's lines (rotated and back) still reproduces it.
    prep = pipeline.prepare(str(page_file), Parameters())
    lines = read_initial_lines(first / "syn.json", prep)
    assert edits.lines_equal(lines, prep.initial_lines)


def test_command_line_locks_and_pairs_files(page, page_file, label_file, tmp_path):
    out = tmp_path / "out"
    assert cli.main(["segment", str(page_file), "-o", str(out), "-q", "--initial-lines", str(label_file),
                     "--lock-initial-lines"]) == 0
    import json
    meta = json.loads((out / "syn.json").read_text())
    assert all(row["locked"] for row in meta["initial_lines"]["lines"])
    assert meta["initial_lines_file"]["locked"] is True
    # A file for several pages is a usage error; so is a lock without a file.
    assert cli.main(["segment", str(page_file), str(SAMPLE), "-o", str(tmp_path / "x"),
                     "--initial-lines", str(label_file)]) == 2
    assert cli.main(["segment", str(page_file), "-o", str(tmp_path / "y"), "--lock-initial-lines"]) == 2
    # A folder pairs by stem.
    folder = tmp_path / "lines"
    folder.mkdir()
    (folder / "syn.png").write_bytes(Path(label_file).read_bytes())
    assert cli.main(["segment", str(page_file), "-o", str(tmp_path / "z"), "-q", "--initial-lines", str(folder)]) == 0


def test_a_bad_initial_lines_file_writes_nothing(page_file, tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<PcGts>", encoding="utf-8")
    out = tmp_path / "out"
    assert cli.main(["segment", str(page_file), "-o", str(out), "-q", "--initial-lines", str(bad)]) == 1
    assert sorted(p.name for p in out.iterdir()) == ["tlseg-report.jsonl"]


def test_resume_redoes_a_page_when_its_initial_lines_change(page_file, label_file, tmp_path, capsys):
    """Resume checks what it skips: outputs made from other initial lines (another file, the
    same file locked, or none) are not this run's, and the page is redone."""
    out = tmp_path / "out"
    args = ["segment", str(page_file), "-o", str(out), "-j", "1"]
    assert cli.main(args) == 0
    assert cli.main(args) == 0
    assert "1 already done" in capsys.readouterr().err
    with_lines = [*args, "--initial-lines", str(label_file)]
    assert cli.main(with_lines) == 0
    assert "redo syn.png: initial lines changed" in capsys.readouterr().err
    assert cli.main(with_lines) == 0
    assert "1 already done" in capsys.readouterr().err
    assert cli.main([*with_lines, "--lock-initial-lines"]) == 0
    assert "initial lines changed" in capsys.readouterr().err
    assert cli.main(args) == 0
    assert "initial lines changed (now: none)" in capsys.readouterr().err


def test_rows_a_file_leaves_out_beyond_its_lines_get_a_line(page, prep, tmp_path):
    """Another tool's file that annotates all rows but the last: the last row gets a line of
    its own when the lines are read (else EM gives its ink to the line above, which leaves its
    row); with the lines locked, or with file_row_fill 0, nothing is added."""
    labels = page.labels.copy()
    last = int(np.argmax([np.nonzero(page.labels == k + 1)[0].mean() for k in range(page.n_lines)])) + 1
    labels[labels == last] = 0
    path = tmp_path / "lines.png"
    cv2.imwrite(str(path), labels.astype(np.uint16))
    lines = read_initial_lines(path, prep)
    assert len(lines) == page.n_lines
    # The added line runs through the left-out row's ink.
    ys, xs = np.nonzero(page.labels == last)
    centre = np.array([xs.mean(), ys.mean()])
    seg = lines.segments()
    mid = seg.mean(axis=1)
    assert np.min(np.abs(mid[:, 1] - centre[1])) < 0.25 * prep.stats.h_cc * 2
    assert read_initial_lines(path, prep, lock=True).text_line_count() == page.n_lines - 1
    off = pipeline.prepare(page.image, dataclasses.replace(Parameters(), file_row_fill=0.0))
    assert len(read_initial_lines(path, off)) == page.n_lines - 1
    # EM from the filled lines gets every row; from the file's lines alone the last row's
    # ink joins the line above.
    filled = contest_metric(page.labels, labels_from(prep, lines).labels, ink=page.labels > 0).fm
    alone = contest_metric(page.labels, labels_from(off, read_initial_lines(path, off)).labels,
                           ink=page.labels > 0).fm
    assert filled == 1.0 and alone < 0.9, (filled, alone)


def test_a_file_with_a_locked_line_gets_no_rows_filled(page, prep, tmp_path):
    """The same PAGE file without the last row: its lines are filled to every row when none is
    locked, and left as the file gives them when one is (the user's lines lead)."""
    last = int(np.argmax([np.nonzero(page.labels == k + 1)[0].mean() for k in range(page.n_lines)]))
    assert last == page.n_lines - 1  # the file below leaves out the lowest row
    short = dataclasses.replace(page, n_lines=page.n_lines - 1)
    free = read_initial_lines(write_page_xml(tmp_path / "free.xml", short), prep)
    assert len(free) == page.n_lines
    held = read_initial_lines(write_page_xml(tmp_path / "held.xml", short, locked=(2,)), prep)
    assert held.text_line_count() == page.n_lines - 1 and len(np.unique(held.chain[held.locked])) == 1


def test_ink_no_given_line_holds_does_not_pull_the_lines_off_their_rows(page, tmp_path):
    """Another tool's file that leaves out the last row, with no row added for it: EM gives
    that row's ink to the line above. Fitted to every sample (the paper's M-step) that line
    moves towards the left-out row and its band widens; with the M-step trimmed to
    m_step_trim x sigma_t (the default) it keeps its row and its spread."""
    last = int(np.argmax([np.nonzero(page.labels == k + 1)[0].mean() for k in range(page.n_lines)])) + 1
    labels = page.labels.copy()
    labels[labels == last] = 0
    path = tmp_path / "lines.png"
    cv2.imwrite(str(path), labels.astype(np.uint16))
    moved, spread = {}, {}
    trimmed = Parameters().m_step_trim
    assert trimmed > 0
    for trim in (0.0, trimmed):
        # The file's bounds on its lines off (anchor_*): the trim alone keeps the line.
        prep = pipeline.prepare(page.image, dataclasses.replace(Parameters(), file_row_fill=0.0,
                                                                m_step_trim=trim, anchor_reach=0.0,
                                                                anchor_sigma_t=0.0, anchor_gap=0.0,
                                                                anchor_extent=False))
        lines = read_initial_lines(path, prep)
        assert len(lines) == page.n_lines - 1
        *_, end = pipeline.run_em(prep, lines)
        k = int(np.argmax(lines.b))  # the lowest given line, next to the row left out
        moved[trim] = abs(end.lines.b[k] - lines.b[k]) / prep.stats.h_cc
        spread[trim] = end.lines.sigma_t[k] / prep.stats.h_cc
    assert moved[trimmed] < 0.2 and spread[trimmed] < 0.4, (moved, spread)
    assert moved[0.0] > 0.5 and spread[0.0] > 0.5, (moved, spread)


# ----------------------------------------------------------------------------- anchored lines


def test_lineset_anchored_defaults_round_trips_and_survives_edits(prep):
    lines = prep.initial_lines
    assert lines.anchored.dtype == bool and not lines.anchored.any()
    anchored = dataclasses.replace(lines, anchored=np.arange(len(lines)) % 2 == 0)
    back = LineSet.from_dict(anchored.to_dict())
    assert edits.lines_equal(back, anchored)
    assert anchored.take([1, 0]).anchored.tolist() == [False, True]
    # An edit changes only the line it touches: the others keep their anchors.
    moved = edits.move_line(prep, anchored, 1, anchored.segments()[1] + [0.0, 5.0])
    assert moved.anchored.tolist() == anchored.anchored.tolist()
    assert edits.set_locked(anchored, [0], True).anchored.tolist() == anchored.anchored.tolist()
    # A row with another anchor is not the original row.
    assert not edits.lines_equal(edits.restore_unchanged(lines, anchored), lines)
    old = anchored.to_dict()
    for row in old["lines"]:
        del row["anchored"]  # a JSON written before the anchors
    assert not LineSet.from_dict(old).anchored.any()


def test_a_measured_spread_is_kept_through_json_and_dropped_by_a_move(prep):
    lines = prep.initial_lines
    assert not lines.sigma_t_measured.any()  # EM's initial guesses
    measured = dataclasses.replace(lines, sigma_t_measured=np.ones(len(lines), bool))
    assert edits.lines_equal(LineSet.from_dict(measured.to_dict()), measured)
    old = measured.to_dict()
    for row in old["lines"]:
        del row["sigma_t_measured"]  # a JSON written before the flag
    assert not LineSet.from_dict(old).sigma_t_measured.any()
    # Moved, a line keeps its sigma_t, but that was measured where it was: no longer counts as
    # measured. Moved back, the original row returns (the edit undone changes nothing).
    seg = measured.segments()[1]
    moved = edits.move_line(prep, measured, 1, seg + [0.0, 5.0])
    assert moved.sigma_t[1] == measured.sigma_t[1]
    assert moved.sigma_t_measured.tolist() == [k != 1 for k in range(len(lines))]
    back = edits.restore_unchanged(measured, edits.move_line(prep, moved, 1, seg))
    assert edits.lines_equal(back, measured)
    drawn = edits.add_line(prep, measured, seg + [0.0, 9.0], locked=True)
    assert not drawn.sigma_t_measured[-1] and drawn.sigma_t_measured[:-1].all()


def test_keep_anchored_bounds_each_end_and_the_spread():
    from engine.em import Anchors, keep_anchored

    # One anchored line drawn from u = 0 to u = 100 at v = 50; reach 5 px, spread at most 8 px.
    anchors = Anchors(np.array([0]), np.array([[0.0, 100.0]]), np.array([[50.0, 50.0]]), 5.0, 8.0)
    a, b, st = np.array([0.1]), np.array([48.0]), np.array([20.0])  # v = 48 at u = 0, 58 at u = 100
    keep_anchored(a, b, st, anchors)
    np.testing.assert_allclose([b[0], a[0] * 100 + b[0]], [48.0, 55.0])  # the far end comes back
    assert st[0] == 8.0
    inside_a, inside_b, inside_st = np.array([0.02]), np.array([49.0]), np.array([6.0])
    keep_anchored(inside_a, inside_b, inside_st, anchors)
    assert (inside_a[0], inside_b[0], inside_st[0]) == (0.02, 49.0, 6.0)  # within reach: as fitted



def test_keep_anchored_keeps_the_files_extent_along_the_refined_line():
    from engine.em import Anchors, keep_anchored

    # The file's line runs from u = 100 to u = 300 at v = 50 (u is the along coordinate here).
    ends = (np.array([[100.0, 300.0]]), np.array([[50.0, 50.0]]))
    inf = np.array([np.inf])
    a, b, st = np.array([0.0]), np.array([52.0]), np.array([10.0])
    c, ss = np.array([400.0]), np.array([150.0])  # the fit grew it to 100..700
    keep_anchored(a, b, st, Anchors(np.array([0]), *ends, inf, inf, extent=True), c, ss, rotation_invariant=False)
    np.testing.assert_allclose([c[0] - 2 * ss[0], c[0] + 2 * ss[0]], [100.0, 300.0])
    assert b[0] == 52.0  # across, within reach: as fitted
    c2, ss2 = np.array([400.0]), np.array([150.0])
    keep_anchored(a, b, st, Anchors(np.array([0]), *ends, inf, inf, extent=False), c2, ss2, rotation_invariant=False)
    assert (c2[0], ss2[0]) == (400.0, 150.0)  # without the extent rule: the fit's
    # Rotation-invariant: the file's ends seen along the line (projection on its direction).
    a3, b3 = np.array([0.1]), np.array([40.0])
    c3, ss3 = np.array([0.0]), np.array([1.0])
    keep_anchored(a3, b3, np.array([10.0]), Anchors(np.array([0]), *ends, inf, inf, extent=True), c3, ss3)
    s = (ends[0][0] + 0.1 * ends[1][0]) / np.sqrt(1.01)
    np.testing.assert_allclose([c3[0] - 2 * ss3[0], c3[0] + 2 * ss3[0]], s)


def test_an_anchored_line_keeps_the_extent_the_file_gave_through_em(page, tmp_path):
    """The file gives row 3's left half only (as for an insertion, or a row a tool split):
    EM's M-step would stretch the line over the whole row's ink; with anchor_extent its ends
    stay where the file put them."""
    labels = page.labels.copy()
    k = 3
    ys, xs = np.nonzero(labels == k)
    labels[(labels == k) & (np.arange(labels.shape[1])[None, :] > np.median(xs))] = 0
    path = tmp_path / "half.png"
    cv2.imwrite(str(path), labels.astype(np.uint16))
    right_end = {}
    for extent in (True, False):
        prep = pipeline.prepare(page.image, Parameters().replace(anchor_extent=extent))
        lines = read_initial_lines(path, prep)
        j = int(np.argmin(np.abs(lines.segments()[:, :, 1].mean(axis=1) - ys.mean())))
        assert lines.anchored[j]
        *_, end = pipeline.run_em(prep, lines)
        given = lines.segments()[j][:, 0].max()
        right_end[extent] = (end.lines.segments()[j][:, 0].max() - given) / (xs.max() - xs.min())
    assert abs(right_end[True]) < 0.01 and right_end[False] > 0.2, right_end


def test_a_short_line_keeps_the_length_the_file_gave(page, prep, tmp_path):
    """A file's line shorter than four W_cc (a page number, an insertion of a word) is read
    with the file's length, not stretched to the M-step's floor of one W_cc either side of
    its middle (which its anchor then took for the file's ends, and the line took the
    words that far along)."""
    k = 2
    base = np.asarray(page.baselines[k], float)
    d = (base[-1] - base[0]) / np.linalg.norm(base[-1] - base[0])
    mid = base.mean(axis=0)
    length = 1.5 * prep.stats.w_cc
    floor = prep.params.sigma_s_floor * prep.stats.w_cc
    assert 4.0 * floor > 2.0 * length  # the M-step's floor would double the line at least
    short = np.stack([mid - d * length / 2, mid + d * length / 2])
    h, w = page.labels.shape
    path = tmp_path / "short.xml"
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n'
                    '<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15">'
                    f'<Page imageFilename="p.png" imageWidth="{w}" imageHeight="{h}"><TextRegion id="r0">'
                    f'<TextLine id="l0"><Baseline points="{_pts(short)}"/></TextLine>'
                    '</TextRegion></Page></PcGts>', encoding="utf-8")
    lines = read_initial_lines(path, prep)
    given = lines.segments()[np.argmin(np.abs(lines.segments().mean(axis=1) - mid).sum(axis=1))]
    assert abs(np.linalg.norm(given[1] - given[0]) - length) < 0.05 * length, (given, length)


def test_anchor_gap_bounds_a_given_line_by_its_given_neighbours():
    from engine.em import anchors_of

    # Two anchored lines 80 px apart, overlapping along the text, and a third far away; H_cc 100.
    lines = LineSet(a=np.zeros(3), b=np.array([100.0, 180.0, 900.0]), c=np.array([500.0, 600.0, 500.0]),
                    sigma_t=np.full(3, 10.0), sigma_s=np.full(3, 100.0), prior=np.full(3, 1 / 3),
                    region=np.zeros(3, np.int32), phi=np.zeros(3), anchored=np.ones(3, bool))
    params = Parameters()
    anchors = anchors_of(lines, 100.0, params)
    # The pair: a quarter of their distance each way, the band at most half of it.
    np.testing.assert_allclose(anchors.reach, [20.0, 20.0, 50.0])
    np.testing.assert_allclose(anchors.sigma_t, [40.0, 40.0, 75.0])  # the third: 0.75 H_cc alone
    off = anchors_of(lines, 100.0, params.replace(anchor_gap=0.0))
    np.testing.assert_allclose(off.reach, [50.0, 50.0, 50.0])
    np.testing.assert_allclose(off.sigma_t, [75.0, 75.0, 75.0])

def _file_without_last_row(page, tmp_path):
    last = int(np.argmax([np.nonzero(page.labels == k + 1)[0].mean() for k in range(page.n_lines)])) + 1
    labels = page.labels.copy()
    labels[labels == last] = 0
    path = tmp_path / "lines.png"
    cv2.imwrite(str(path), labels.astype(np.uint16))
    return path


def test_lines_from_another_tools_file_are_anchored_the_rows_filled_are_not(page, prep, tmp_path):
    path = _file_without_last_row(page, tmp_path)
    lines = read_initial_lines(path, prep)
    assert len(lines) == page.n_lines and lines.anchored.sum() == page.n_lines - 1  # the fill's row: free
    locked = read_initial_lines(path, prep, lock=True)
    assert locked.locked.all()
    # A tlseg JSON is read as it was written, anchors included (its run is reproduced).
    json_path = tmp_path / "run.json"
    json_path.write_text(__import__("json").dumps({"shape": list(prep.shape), "initial_lines": lines.to_dict()}))
    again = read_initial_lines(json_path, prep)
    assert edits.lines_equal(again, lines)


def test_an_anchored_line_stays_on_its_row_where_a_free_one_leaves_it(page, tmp_path):
    """The file leaves out the last row and nothing fills it; under the paper's M-step (every
    sample) the line above takes that row's ink, moves towards it and widens. Anchored (the
    default for a file's free lines) it stays within anchor_reach x H_cc of the file's line,
    its spread within anchor_sigma_t x H_cc; with both bounds 0 it leaves its row."""
    path = _file_without_last_row(page, tmp_path)
    defaults = Parameters()
    assert defaults.anchor_reach > 0 and defaults.anchor_sigma_t > 0
    moved, spread = {}, {}
    free = {"anchor_reach": 0.0, "anchor_sigma_t": 0.0, "anchor_gap": 0.0, "anchor_extent": False}
    for name, bounds in (("anchored", {}), ("free", free)):
        params = dataclasses.replace(defaults, file_row_fill=0.0, m_step_trim=0.0, **bounds)
        prep = pipeline.prepare(page.image, params)
        lines = read_initial_lines(path, prep)
        assert lines.anchored.all()
        *_, end = pipeline.run_em(prep, lines)
        k = int(np.argmax(lines.b))  # the lowest given line, next to the row left out
        # How far across the final line lies from the file's at the file line's two ends.
        u, v = to_region_frame(lines.take([k]).segments()[0], lines.phi[k]).T
        fin = end.lines
        moved[name] = np.abs(fin.a[k] * u + fin.b[k] - v).max() / prep.stats.h_cc
        spread[name] = fin.sigma_t[k] / prep.stats.h_cc
    reach, cap = defaults.anchor_reach, defaults.anchor_sigma_t
    assert moved["anchored"] <= reach + 1e-9 and spread["anchored"] <= cap + 1e-9, (moved, spread)
    assert moved["free"] > reach + 0.2, (moved, spread)


def test_the_result_says_which_of_its_lines_a_file_gave(page, prep, tmp_path):
    """Stage 8 refits every line; the lines the file gave come out anchored (the output JSON
    and the window say so), the row the fill added and EM's own lines do not."""
    path = _file_without_last_row(page, tmp_path)
    lines = read_initial_lines(path, prep)
    *_, end = pipeline.run_em(prep, lines)
    seg = pipeline.finish(prep, end)
    assert len(seg.lines) == page.n_lines
    assert seg.lines.anchored.sum() == page.n_lines - 1 and not seg.lines.locked.any()
    # Which one is free: the line through the row the file left out (the lowest).
    assert not seg.lines.anchored[int(np.argmax(seg.lines.segments()[:, :, 1].mean(axis=1)))]
    locked = pipeline.finish(prep, list(pipeline.run_em(prep, read_initial_lines(path, prep, lock=True)))[-1])
    assert locked.lines.locked.all() and len(locked.lines) == page.n_lines - 1  # no row filled
    assert not locked.lines.anchored.any()


@pytest.mark.parametrize("place", [True, False])
def test_stage_8_keeps_an_anchored_line_where_em_left_it(prep, label_file, place):
    """With anchor_place stage 8 keeps an anchored line's place (a, b) as EM left it, as for a
    locked line; without, it refits the line to the ink labelled to it. EM's end is moved
    here: one anchored line 0.3 H_cc above its row, within the file's bounds (anchor_reach
    0.5 H_cc)."""
    params = Parameters().replace(anchor_place=place)
    lines = read_initial_lines(label_file, prep)
    assert lines.anchored.all() and not lines.locked.any()
    *_, end = pipeline.run_em(prep, lines, params=params)
    k = len(end.lines) // 2
    shift = 0.3 * prep.stats.h_cc
    b = end.lines.b.copy()
    b[k] -= shift
    moved = dataclasses.replace(end, lines=dataclasses.replace(end.lines, b=b))
    seg = pipeline.finish(prep, moved, params)
    assert len(seg.lines) == len(lines) and seg.lines.anchored.all()
    mid = moved.lines.segments()[k].mean(axis=0)
    final_mid = seg.lines.segments().mean(axis=1)
    j = int(np.argmin(np.abs(final_mid[:, 1] - mid[1])))
    offset = abs(final_mid[j, 1] - mid[1])  # across, on these near-horizontal rows (pixels)
    if place:
        assert offset < 0.02 * prep.stats.h_cc, offset
    else:
        assert offset > 0.2 * prep.stats.h_cc, offset  # back on its ink


@pytest.mark.parametrize("place", [True, False])
def test_stage_8_holds_the_components_on_an_anchored_line(prep, label_file, place, monkeypatch):
    """With anchor_place the local rows of stage 8 (follow_local_rows) see each anchored line
    as a given row that keeps the components on it (the first rule only: not strict, as a
    locked line is); without, as a free line."""
    from engine import postprocess

    seen = []
    real = postprocess.follow_local_rows

    def spy(uv, comp, small, lab, n_groups, h_cc, w_cc, fixed=None, strict=None):
        seen.append((fixed, strict))
        return real(uv, comp, small, lab, n_groups, h_cc, w_cc, fixed, strict)

    monkeypatch.setattr(postprocess, "follow_local_rows", spy)
    params = Parameters().replace(anchor_place=place)
    lines = read_initial_lines(label_file, prep)
    *_, end = pipeline.run_em(prep, lines, params=params)
    pipeline.finish(prep, end, params)
    assert seen
    held = sum(int(np.isfinite(fixed[:, 0]).sum()) for fixed, _ in seen)  # over the regions
    assert held == (len(lines) if place else 0)
    assert not any(strict.any() for _, strict in seen)  # no line is locked here
