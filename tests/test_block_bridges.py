"""A small block between two blocks written at different angles joins one of them, never both
(``engine.blocks.merge_parallel_blocks``). Its joins were unions of groups: a block of a few
hundred samples parallel to one block and within 45 deg of the other joined the second as a
small block and the first as a parallel one, and so carried the two large blocks into one
(moc_train_9 at seed 1: blocks at -5.6 and -26.3 deg, 45 correct lines against 54)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.blocks import merge_parallel_blocks
from engine.model import Region

MAX_GAP = 15.0  # engine.regions.SPLIT_ANGLE, as stage 5 passes it
SMALL = 16 * 60  # BLOCK_SAMPLES x min_region_samples
SMALL_GAP = 45.0


def _blocks(sizes: list[int], degrees: list[float], touching: list[tuple[int, int]]):
    """Sample regions, edges and Regions of blocks with ``sizes`` samples framed at
    ``degrees``; each pair of ``touching`` shares one edge."""
    region = np.concatenate([np.full(n, k, np.int32) for k, n in enumerate(sizes)])
    first = np.r_[0, np.cumsum(sizes)[:-1]]
    edges = np.array([[first[a], first[b]] for a, b in touching])
    regions = tuple(Region(k, math.radians(d), (0, 0, 1, 1), n) for k, (n, d) in enumerate(zip(sizes, degrees,
                                                                                                strict=True)))
    return region, edges, regions


def _merge(region, edges, regions):
    # samples None: the small block's frame check is not made (its join is decided on sizes
    # and angles alone, as with small_parts_frame off).
    return merge_parallel_blocks(region, edges, regions, MAX_GAP, SMALL, SMALL_GAP)


def _groups(joined: np.ndarray | None, region: np.ndarray) -> list[set[int]]:
    final = region if joined is None else joined
    return sorted(({int(k) for k in np.unique(region[final == g])} for g in np.unique(final)), key=min)


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2)])
def test_a_small_block_does_not_bridge_two_blocks_at_different_angles(order) -> None:
    # Block 0 at -26.3 deg and block 1 at -5.6 deg (20.7 deg apart: two blocks), both large;
    # block 2, small, at -6 deg, touches both: it joins block 1 (its own angle), and block 0
    # stays apart. The block numbers are permuted: the result must not hang on the order.
    sizes, degrees = [13707, 7731, 434], [-26.3, -5.6, -6.2]
    perm = list(order)
    inv = np.argsort(perm)
    region, edges, regions = _blocks([sizes[k] for k in perm], [degrees[k] for k in perm],
                                     [(int(inv[0]), int(inv[2])), (int(inv[1]), int(inv[2]))])
    groups = _groups(_merge(region, edges, regions), region)
    assert groups == sorted([{int(inv[0])}, {int(inv[1]), int(inv[2])}], key=min)


def test_a_small_block_still_joins_its_one_neighbour() -> None:
    # Alone beside a large block 20 deg off, a small block joins it (as before).
    region, edges, regions = _blocks([13707, 434], [-26.3, -6.2], [(0, 1)])
    assert _groups(_merge(region, edges, regions), region) == [{0, 1}]


def test_parallel_blocks_still_join_through_a_parallel_small_block() -> None:
    # Two large blocks at one angle, touching through a small one at that angle: one block.
    region, edges, regions = _blocks([5000, 4000, 300], [-5.0, -4.0, -6.0], [(0, 2), (1, 2)])
    assert _groups(_merge(region, edges, regions), region) == [{0, 1, 2}]


def test_two_large_blocks_at_different_angles_that_touch_stay_apart() -> None:
    region, edges, regions = _blocks([5000, 4000], [-26.0, -5.0], [(0, 1)])
    assert _merge(region, edges, regions) is None
