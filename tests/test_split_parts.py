"""A part the orientation split set apart whose frame found no evidence for its angle goes
back to the block it was split from (``engine.blocks.merge_parallel_blocks``,
``split_parts``). On a skewed scan (poilus AN_0001-0 turned by 3 degrees) the stamp, the
margin notes and the first words of three rows, 588 samples, were kept apart; the frame
search gave them the page's direction (``Region.page_direction``, 0 deg beside the text's
-3.75), such blocks joined no neighbour, and their lines crossed the rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from synthetic import narrow_column_page, side_note_page

from engine.blocks import merge_parallel_blocks
from engine.graph import delaunay_edges
from engine.model import Region
from engine.params import Parameters
from engine.pipeline import prepare
from engine.regions import KEEP_RATIO, component_axes, find_regions, keep_distinct_parts

MIN_SAMPLES = Parameters().min_region_samples


def _two_blocks(n0: int = 300, n1: int = 120) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's block ``(n0 + n1,)`` and MRF edges inside each block ``(E, 2)``."""
    region = np.r_[np.zeros(n0, np.int32), np.ones(n1, np.int32)]
    edges = np.r_[np.c_[np.arange(n0 - 1), np.arange(1, n0)],
                  np.c_[np.arange(n0, n0 + n1 - 1), np.arange(n0 + 1, n0 + n1)]]
    return region, edges


def _regions(phi0: float, phi1: float, direction0: bool, direction1: bool, n0: int = 300,
             n1: int = 120) -> tuple[Region, Region]:
    return (Region(0, math.radians(phi0), (0, 0, 1, 1), n0, direction0),
            Region(1, math.radians(phi1), (0, 0, 1, 1), n1, direction1))


def test_a_split_part_framed_at_the_page_direction_goes_back() -> None:
    region, edges = _two_blocks()
    regions = _regions(-3.75, 0.0, False, True)
    joined = merge_parallel_blocks(region, edges, regions, 15.0, split_parts={1: 0})
    assert joined is not None and (joined == 0).all()
    assert (region[300:] == 1).all()  # the caller's array is not changed
    # Without the record of the split it stays apart: page-direction blocks join nothing.
    assert merge_parallel_blocks(region, edges, regions, 15.0) is None
    assert merge_parallel_blocks(region, edges, regions, 15.0, split_parts={}) is None


def test_a_split_part_stays_apart_when_its_frame_is_far_or_has_evidence() -> None:
    region, edges = _two_blocks()
    split = {1: 0}
    # Frames farther apart than max_gap (the text steep, the part at the page's direction).
    assert merge_parallel_blocks(region, edges, _regions(-30.0, 0.0, False, True), 15.0,
                                 split_parts=split) is None
    # Both at the page's direction: neither frame says where the text runs.
    assert merge_parallel_blocks(region, edges, _regions(0.0, 0.0, True, True), 15.0,
                                 split_parts=split) is None
    # The part's frame is its own estimate (not the page's direction): its angle stood.
    assert merge_parallel_blocks(region, edges, _regions(-3.75, 0.0, False, False), 15.0,
                                 split_parts=split) is None
    # Angles are read modulo 180: -89 and +89 deg are 2 deg apart.
    joined = merge_parallel_blocks(region, edges, _regions(-89.0, 89.0, False, True), 15.0,
                                   split_parts=split)
    assert joined is not None and (joined == 0).all()


def _narrow_column_parts() -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The narrow column beside rows at -25 deg (tests/synthetic.py): its text samples, one
    region, the part of each (1: the column, 0: the rows, from the page's known lines) and H_cc."""
    page, block = narrow_column_page(0)
    prep = prepare(page.image, Parameters())
    xy = np.rint(prep.samples).astype(int)
    line = page.labels[xy[:, 1], xy[:, 0]]
    on = line > 0
    samples, line = prep.samples[on], line[on]
    part = (block[line - 1] == 1).astype(np.int64)
    return samples, np.zeros(len(samples), np.int64), part, prep.stats.h_cc


def test_keep_distinct_parts_records_the_part_each_kept_part_came_from() -> None:
    """The narrow column beside rows at -25 deg (tests/test_mixed_parts.py) is kept apart by
    its line contrast; ``parents`` names the rows' part as the one it was split from."""
    samples, region, part, h_cc = _narrow_column_parts()
    parents: dict[int, int] = {}
    kept = keep_distinct_parts(samples, region, part, {0: h_cc}, MIN_SAMPLES,
                               far_angle=0.0, parents=parents)
    assert np.array_equal(kept, part) and parents == {1: 0}
    # A part folded into the main one is not recorded.
    parents = {}
    folded = keep_distinct_parts(samples, region, np.zeros_like(part), {0: h_cc},
                                 MIN_SAMPLES, far_angle=0.0, parents=parents)
    assert (folded == 0).all() and parents == {}


def test_keep_distinct_parts_records_every_part_it_tests_with_its_ratio_and_decision() -> None:
    """The record (bench/part_margins.py reads it) says what the test saw: the narrow
    column's samples, its angle and the rows' (89 and -25 deg apart by more than SPLIT_ANGLE),
    its contrast ratio under KEEP_RATIO, kept; the same column with its samples turned about
    their centre to run along the rows: ratio 1, folded, and recorded so."""
    samples, region, part, h_cc = _narrow_column_parts()
    record: list = []
    keep_distinct_parts(samples, region, part, {0: h_cc}, MIN_SAMPLES, far_angle=0.0,
                        record=record)
    assert len(record) == 1
    test = record[0]
    assert (test.region, test.part) == (0, 1) and np.array_equal(test.members, np.flatnonzero(part == 1))
    assert abs(test.own_angle) > 80 and -30 < test.main_angle < -20
    assert test.ratio < KEEP_RATIO and test.evidence and test.kept
    # The column turned to run along the rows: its best angle is theirs, the ratio near 1.
    col = samples[part == 1]
    centre = col.mean(axis=0)
    turn = math.radians(test.main_angle - test.own_angle)
    rot = np.array([[math.cos(turn), -math.sin(turn)], [math.sin(turn), math.cos(turn)]])
    turned = samples.copy()
    turned[part == 1] = (col - centre) @ rot.T + centre
    record = []
    out = keep_distinct_parts(turned, region, part, {0: h_cc}, MIN_SAMPLES,
                              far_angle=0.0, record=record)
    assert len(record) == 1 and not record[0].kept and (out == 0).all()
    assert record[0].ratio == pytest.approx(1.0) and abs(record[0].own_angle - record[0].main_angle) <= 2


def test_find_regions_names_the_region_each_kept_part_was_split_from() -> None:
    """The side-note page (a note at 45 deg between two paragraphs, tests/synthetic.py): the
    orientation split keeps the note apart, and ``split_parts`` maps the note's final region
    to the paragraphs' one, as engine.blocks.merge_parallel_blocks reads it."""
    page, block = side_note_page(0, 45.0)
    params = Parameters()
    prep = prepare(page.image, params)
    triangles, _ = delaunay_edges(prep.samples)
    axes = component_axes(prep.samples, prep.sample_component)
    split_parts: dict[int, int] = {}
    region, _ = find_regions(prep.samples, triangles, prep.stats, params, axes, {}, {}, split_parts)
    xy = np.rint(prep.samples).astype(int)
    line = page.labels[xy[:, 1], xy[:, 0]]
    on = line > 0
    kind = block[line[on] - 1]  # 0, 2 paragraphs, 1 the note
    note = int(np.bincount(region[on][kind == 1]).argmax())
    main = int(np.bincount(region[on][kind != 1]).argmax())
    assert note != main and split_parts == {note: main}
    # Without the split (steep_regions and multi_oriented off) nothing is recorded.
    flat = Parameters(steep_regions=False)
    split_parts = {}
    find_regions(prep.samples, triangles, prep.stats, flat, axes, {}, {}, split_parts)
    assert split_parts == {}
