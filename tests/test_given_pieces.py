"""Issue 24: a curved line a file gives, locked, is cut into straight pieces that follow it,
and stage 8 joins the pieces' labels into one line (``Parameters.given_piece`` /
``given_pieces``, ``LineSet.chain``)."""

from __future__ import annotations

from types import SimpleNamespace

import cv2
import numpy as np
import pytest
from synthetic import bent_rows_page, make_page

from engine import edits, pipeline
from engine.initial_io import (
    PIECE_BUDGET,
    cut_ink,
    cut_polyline,
    piece_count,
    pieces_per_line,
    read_initial_lines,
)
from engine.metric import contest_metric
from engine.model import LineSet
from engine.params import Parameters
from engine.postprocess import join_chains


def _fake_prep(h_cc: float = 10.0, n_samples: int = 1000, **fields) -> SimpleNamespace:
    return SimpleNamespace(params=Parameters(**fields), stats=SimpleNamespace(h_cc=h_cc),
                           samples=np.zeros((n_samples, 2)))


@pytest.fixture(scope="module")
def bent():
    return bent_rows_page(seed=0, bend=0.8)


@pytest.fixture(scope="module")
def bent_file(bent, tmp_path_factory):
    path = tmp_path_factory.mktemp("bent") / "gt.png"
    cv2.imwrite(str(path), bent.labels.astype(np.uint16))
    return path


def _run_locked(page, path, **fields):
    prep = pipeline.prepare(page.image, Parameters(**fields))
    lines = read_initial_lines(path, prep, lock=True)
    run = pipeline.for_lines(prep, lines)
    *_, snap = pipeline.run_em(run, lines)
    return lines, pipeline.finish(run, snap)


def test_piece_count_follows_the_length_and_is_capped():
    prep = _fake_prep(10.0, given_piece=2.0, given_pieces=10)
    assert piece_count(25.0, prep) == 1  # shorter than one and a half pieces
    assert piece_count(100.0, prep) == 5  # one per 2 H_cc
    assert piece_count(1000.0, prep) == 10  # at most given_pieces
    assert piece_count(1000.0, _fake_prep(10.0, given_pieces=0)) == 1
    assert piece_count(1000.0, _fake_prep(10.0, given_piece=0.0)) == 1


def test_the_pieces_of_a_page_stay_within_the_budget():
    """EM's unary holds a row per line and a column per sample: a page whose samples x lines
    would pass PIECE_BUDGET gets fewer pieces a line (at least one, the line whole)."""
    small = _fake_prep(10.0, n_samples=45_047)  # moc_train_9, the largest dev page product
    assert pieces_per_line(small, 90) == 10
    big = _fake_prep(10.0, n_samples=400_000)
    assert pieces_per_line(big, 60) == PIECE_BUDGET // (400_000 * 60) == 2
    assert pieces_per_line(_fake_prep(10.0, n_samples=2_000_000), 60) == 1
    assert piece_count(1000.0, big, pieces_per_line(big, 60)) == 2
    x = np.arange(0, 1000, 0.5)
    xy = np.stack([x, 5.0 * np.sin(x / 50.0)], axis=1)
    assert len(cut_ink(xy, big, 2)) == 2 and len(cut_ink(xy, small)) == 10


def test_cut_polyline_cuts_by_arc_length_and_neighbours_share_their_ends():
    prep = _fake_prep(10.0, given_piece=2.0, given_pieces=10)
    bent_line = np.array([[0.0, 0.0], [60.0, 30.0], [120.0, 0.0]])  # arc length 2 x 67.1 px
    pieces = cut_polyline(bent_line, prep)
    assert len(pieces) == 7  # round(134.2 / 20)
    np.testing.assert_allclose(pieces[0][0], bent_line[0])
    np.testing.assert_allclose(pieces[-1][-1], bent_line[-1])
    for p, q in zip(pieces[:-1], pieces[1:], strict=True):
        np.testing.assert_allclose(p[-1], q[0])
    lengths = [np.hypot(*(p[1:] - p[:-1]).T).sum() for p in pieces]
    np.testing.assert_allclose(lengths, lengths[0], rtol=1e-9)
    # The corner lies inside the fourth piece, which keeps it.
    assert any(np.allclose(pt, [60.0, 30.0]) for pt in pieces[3])
    assert len(cut_polyline(bent_line, _fake_prep(10.0, given_pieces=0))) == 1


def test_cut_ink_gives_runs_in_order_along_the_line():
    prep = _fake_prep(10.0, given_piece=2.0, given_pieces=10)
    x = np.arange(0, 100, 0.5)
    xy = np.stack([x, 5.0 * np.sin(x / 15.0)], axis=1)
    runs = cut_ink(xy, prep)
    assert len(runs) == 5
    assert np.array_equal(np.sort(np.concatenate(runs)), np.arange(len(xy)))
    runs = sorted(runs, key=lambda r: xy[r, 0].mean())  # the axis's sign is arbitrary
    assert all(xy[a, 0].max() < xy[b, 0].min() for a, b in zip(runs[:-1], runs[1:], strict=True))


def test_locked_bent_rows_are_followed_and_each_is_one_line(bent, bent_file):
    lines, seg = _run_locked(bent, bent_file)
    # Cut into pieces, every piece chained to its text line.
    assert len(lines) > bent.n_lines and (lines.chain >= 0).all()
    assert len(np.unique(lines.chain)) == bent.n_lines
    assert contest_metric(bent.labels, seg.labels, ink=bent.labels > 0).fm == 1.0
    assert len(seg.lines) == bent.n_lines == int(seg.labels.max())
    assert seg.lines.locked.all()
    assert set(np.unique(seg.sample_labels[seg.sample_labels >= 0])) == set(range(bent.n_lines))


def test_straight_locked_lines_lose_the_bent_rows(bent, bent_file):
    # The mechanism off: one straight line per row gives the crests to the lines beside them.
    lines, seg = _run_locked(bent, bent_file, given_pieces=0)
    assert len(lines) == bent.n_lines and (lines.chain == -1).all()
    assert contest_metric(bent.labels, seg.labels, ink=bent.labels > 0).fm < 0.5


def test_free_lines_from_a_file_are_not_cut(bent, bent_file):
    prep = pipeline.prepare(bent.image, Parameters())
    lines = read_initial_lines(bent_file, prep)
    assert not lines.locked.any() and (lines.chain == -1).all()
    assert (lines.anchored.sum()) == bent.n_lines


def test_chain_round_trips_and_survives_edits(bent, bent_file):
    prep = pipeline.prepare(bent.image, Parameters())
    lines = read_initial_lines(bent_file, prep, lock=True)
    back = LineSet.from_dict(lines.to_dict())
    np.testing.assert_array_equal(back.chain, lines.chain)
    assert back.chain.dtype == np.int32
    # A line added is a line of its own; a piece cut in two leaves its chain; moving a piece
    # keeps it; deleting a piece leaves the others chained.
    added = edits.add_line(prep, lines, lines.segments()[0] + [0.0, 300.0])
    assert added.chain[-1] == -1 and np.array_equal(added.chain[:-1], lines.chain)
    seg0 = lines.segments()[3]
    cut = edits.split_line(prep, lines, 3, seg0.mean(axis=0))
    assert cut.chain[3] == cut.chain[4] == -1
    moved = edits.move_line(prep, lines, 3, seg0 + [0.0, 2.0])
    assert moved.chain[3] == lines.chain[3]
    same = np.flatnonzero(lines.chain == lines.chain[3])
    merged = edits.merge_lines(prep, lines, int(same[0]), int(same[1]))
    assert merged.chain[min(same[:2])] == lines.chain[3]


def test_join_chains_relabels_pieces_as_one_line():
    z = np.zeros(4)
    lines = LineSet(np.zeros(4), np.array([0.0, 0.0, 50.0, 0.0]), np.array([10.0, 30.0, 10.0, 50.0]),
                    np.full(4, 3.0), np.full(4, 2.5), np.full(4, 0.25), np.zeros(4, np.int32), z,
                    locked=np.ones(4, bool), chain=np.array([7, 7, -1, 7], np.int32))
    labels = np.array([[1, 2, 3, 4, 0]], np.int32)
    samples = np.array([0, 1, 2, 3, -1])
    prep = SimpleNamespace(params=Parameters(), stats=SimpleNamespace(h_cc=6.0, w_cc=12.0))
    out, joined, sample_out, _, paths = join_chains(prep, labels, lines, samples, [])
    np.testing.assert_array_equal(out, [[1, 1, 2, 1, 0]])
    np.testing.assert_array_equal(sample_out, [0, 0, 1, 0, -1])
    assert len(joined) == 2 and joined.chain.tolist() == [7, -1] and joined.locked.all()
    # The joined line runs through its pieces: along v = 0 from 5 to 55.
    seg = joined.segments()[0]
    np.testing.assert_allclose(sorted(seg[:, 0]), [5.0, 55.0], atol=1e-9)
    np.testing.assert_allclose(seg[:, 1], 0.0, atol=1e-9)
    assert joined.prior[0] == pytest.approx(0.75)
    # Its path runs through the pieces in order: 5, the gaps' middles 20 and 40, then 55.
    assert list(paths) == [0]
    np.testing.assert_allclose(paths[0], [[5.0, 0.0], [20.0, 0.0], [40.0, 0.0], [55.0, 0.0]], atol=1e-9)


def test_a_joined_line_keeps_its_bend_in_the_exports(bent, bent_file, tmp_path):
    """The PAGE baseline, the overlay's line and the JSON of a line joined from pieces follow
    the row's bend; read back, the paths are the same."""
    from engine.export import page_shapes, read_outputs, write_outputs

    _, seg = _run_locked(bent, bent_file)
    assert set(seg.paths) == set(range(bent.n_lines))
    shapes = [ln for region in page_shapes(seg, bent.labels.shape) for ln in region.lines]
    for shape in shapes:
        base = shape.baseline.astype(float)
        assert len(base) > 3
        # Bent: its points stray from the chord through its ends by far more than a pixel.
        d = base[-1] - base[0]
        off = np.abs((base - base[0]) @ np.array([-d[1], d[0]]) / np.hypot(*d))
        assert off.max() > 0.5 * 0.8 * 60.0  # half the rows' amplitude (0.8 x a 60 px pitch)
        # ... and each point lies at its own line's ink there, not at a neighbour's (rows 60 px
        # apart; the baseline lies sigma_t under the ink's middle).
        xs = np.clip(base[:, 0].astype(int), 0, bent.labels.shape[1] - 1)
        for x, y in zip(xs, base[:, 1].astype(int), strict=True):
            rows = np.flatnonzero(seg.labels[:, max(x - 10, 0):x + 10].max(axis=1) == shape.label)
            assert rows.size == 0 or abs(np.median(rows) - y) < 25
    # The overlay draws each path: at a path's inner point, near its line's darker shade
    # (anti-aliased), where the straight segment leaves the page's colours.
    from engine.export import label_colours, render_overlay

    drawn = render_overlay(bent.image, seg.labels, seg.lines, seg.paths)
    straight = render_overlay(bent.image, seg.labels, seg.lines)
    lut = label_colours(len(seg.lines))

    def nearest(image, x, y, shade):
        patch = image[y - 1:y + 2, x - 1:x + 2].reshape(-1, 3).astype(np.int32)
        return np.abs(patch - shade).sum(axis=1).min()

    for k, path in seg.paths.items():
        x, y = np.rint(path[len(path) // 2]).astype(int)
        shade = lut[k + 1].astype(np.int32) * 3 // 5
        assert nearest(drawn, x, y, shade) < 0.5 * nearest(straight, x, y, shade), k
    written = write_outputs(tmp_path, "bent", bent.image, seg, "bent.png")
    back = read_outputs(tmp_path, "bent")
    assert set(back.seg.paths) == set(seg.paths)
    for k, path in seg.paths.items():
        np.testing.assert_allclose(back.seg.paths[k], path, atol=0.01)
    assert [p.name for p in written][-1] == "bent.json"


def test_locked_pieces_in_the_regions_that_cut_a_row_give_one_line_a_row(tmp_path):
    """The wide_words page with the paper's region cut (``row_join`` 0): its regions cut the
    rows at the word gaps. Each locked piece sits in the region of its own midpoint, so every
    word of a row has a piece of its row in its region, and the joined pieces are one line."""
    page = make_page("wide_words", seed=0)
    path = tmp_path / "gt.png"
    cv2.imwrite(str(path), page.labels.astype(np.uint16))
    lines, seg = _run_locked(page, path, row_join=0.0, given_regions=0.0)
    assert len(np.unique(lines.region)) > 1 and (lines.chain >= 0).all()
    assert contest_metric(page.labels, seg.labels, ink=page.labels > 0).fm == 1.0
    assert len(seg.lines) == page.n_lines


def test_reading_a_locked_file_keeps_to_the_budget(bent, bent_file, monkeypatch):
    from engine import initial_io

    prep = pipeline.prepare(bent.image, Parameters())
    monkeypatch.setattr(initial_io, "PIECE_BUDGET", 2 * len(prep.samples) * bent.n_lines)
    lines = read_initial_lines(bent_file, prep, lock=True)
    assert np.bincount(lines.chain).max() == 2 and len(np.unique(lines.chain)) == bent.n_lines


def test_a_joined_line_runs_from_its_first_piece_to_its_last():
    """Pieces given right to left (as an Arabic baseline runs): the joined line's path runs
    that way too, from the first piece's start to the last one's end."""
    z = np.zeros(3)
    lines = LineSet(z, z, np.array([50.0, 30.0, 10.0]), np.full(3, 3.0), np.full(3, 2.5), np.full(3, 1 / 3),
                    np.zeros(3, np.int32), z, locked=np.ones(3, bool), chain=np.full(3, 4, np.int32))
    prep = SimpleNamespace(params=Parameters(), stats=SimpleNamespace(h_cc=6.0, w_cc=12.0))
    labels = np.array([[1, 2, 3]], np.int32)
    _, joined, _, _, paths = join_chains(prep, labels, lines, np.array([0, 1, 2]), [])
    np.testing.assert_allclose(paths[0], [[55.0, 0.0], [40.0, 0.0], [20.0, 0.0], [5.0, 0.0]], atol=1e-9)
    assert len(joined) == 1
    np.testing.assert_allclose(sorted(joined.segments()[0][:, 0]), [5.0, 55.0], atol=1e-9)


def test_the_window_counts_text_lines_not_pieces() -> None:
    """A locked file's 3 text lines in 7 pieces, and a line the user drew (no chain): 4 lines
    in 8 pieces."""
    import dataclasses

    from tlgui.session import line_count

    z = np.zeros(8)
    lines = LineSet(z, np.arange(8) * 40.0, z, z + 5, z + 50, z + 1 / 8, np.zeros(8, np.int32), z, True,
                    np.ones(8, bool), np.zeros(8, bool), np.full(8, -1, np.int32))
    assert line_count(lines) == "8 lines" and line_count(lines.take([0])) == "1 line"
    chained = dataclasses.replace(lines, chain=np.array([0, 0, 0, 1, 1, 2, 2, -1], np.int32))
    assert chained.text_line_count() == 4 and lines.text_line_count() == 8
    assert line_count(chained) == "4 lines in 8 pieces"
    assert line_count(chained.take([0, 1])) == "1 line in 2 pieces"
    # The result joins each chain into one line, which keeps its chain: no pieces left.
    assert line_count(chained.take([0, 3, 5, 7])) == "4 lines"
