"""The window's region outlines (tlgui.geometry.region_outlines): one convex hull per piece of
a region (samples its MRF edges join), never one hull across the blank between pieces. No Qt:
the outlines are computed in the engine process."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import FAST
from synthetic import side_note_page

from engine.params import Parameters
from engine.pipeline import prepare
from tlgui.geometry import region_outlines, region_pieces


@pytest.fixture(scope="module")
def prep():
    page, _ = side_note_page(0)
    return prepare(page.image, Parameters().replace(**FAST))


def _piece_at(prep, pieces: np.ndarray) -> dict[tuple[float, float], int]:
    return {(float(x), float(y)): int(p) for (x, y), p in zip(prep.samples, pieces, strict=True)}


def test_each_region_is_outlined_by_hulls_of_its_own_samples(prep) -> None:
    assert len(prep.regions) >= 2
    segs = region_outlines(prep)
    where = {(float(x), float(y)): int(r) for (x, y), r in zip(prep.samples, prep.sample_region, strict=True)}
    # Every corner is a sample, and every side joins two samples of one region.
    ends = [(where.get(tuple(map(float, s[0]))), where.get(tuple(map(float, s[1])))) for s in segs]
    assert all(a is not None and a == b for a, b in ends)
    assert {a for a, _ in ends} == {r.index for r in prep.regions if r.n_samples >= 3}


def test_a_region_of_two_far_pieces_gets_two_hulls(prep) -> None:
    """Two regions relabelled as one (as engine.regions joins a few words too small to be a
    region to the nearest larger one): each keeps its own hull; a hull of both would join
    samples of the two pieces across the blank between them."""
    sizes = np.bincount(prep.sample_region)
    a, b = np.argsort(sizes)[::-1][:2]
    joined = dataclasses.replace(prep, sample_region=np.where(prep.sample_region == b, a, prep.sample_region)
                                 .astype(prep.sample_region.dtype))
    pieces = region_pieces(joined)
    piece_at = _piece_at(joined, pieces)
    segs = region_outlines(joined)
    in_a = [s for s in segs if joined.sample_region[np.all(joined.samples == s[0], axis=1)].tolist() == [a]]
    sides = [(piece_at[tuple(map(float, s[0]))], piece_at[tuple(map(float, s[1]))]) for s in in_a]
    assert all(p == q for p, q in sides)  # no side runs from one piece to another
    big_a = np.bincount(pieces[prep.sample_region == a]).argmax()
    big_b = np.bincount(pieces[prep.sample_region == b]).argmax()
    assert {big_a, big_b} <= {p for p, _ in sides}  # both pieces are outlined


def test_pieces_follow_the_mrf_edges(prep) -> None:
    pieces = region_pieces(prep)
    assert np.array_equal(pieces[prep.edges[:, 0]], pieces[prep.edges[:, 1]])
    # A piece lies in one region: the MRF edges never cross regions.
    for p in np.unique(pieces):
        assert len(np.unique(prep.sample_region[pieces == p])) == 1
