"""Stage 3: a seeded random sample of ink pixels that covers every component."""

from __future__ import annotations

import numpy as np

from .arrays import nonzero_index, sorted_unique


def sample_ink_pixels(components: np.ndarray, ratio: float = 0.05, seed: int = 0,
                      ink: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sample ``ratio`` of the ink pixels uniformly, plus one pixel of every component the
    uniform draw missed. Returns samples float64 ``(N, 2)`` [x, y] in raster order and the
    component label of each ``(N,)``. Same seed -> same samples. ``ink``: the mask
    ``components > 0`` when the caller has it (saves a pass over the page)."""
    flat = components.ravel()
    ink_index = nonzero_index(ink if ink is not None and ink.shape == components.shape else components)
    if len(ink_index) == 0:
        return np.zeros((0, 2)), np.zeros(0, np.int32)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(ink_index))
    n_uniform = int(round(ratio * len(ink_index)))
    # The first occurrence of each component in a random order is a uniform pick within it
    # (found with minimum.at: O(n), where np.unique sorts the million ink pixels).
    labels = flat[ink_index[order]]
    first = np.full(int(labels.max()) + 1, len(labels), np.int64)
    np.minimum.at(first, labels, np.arange(len(labels)))
    first = first[first < len(labels)]
    chosen = sorted_unique(np.concatenate([order[:n_uniform], order[first]]))
    pixels = ink_index[chosen]  # sorted: raster order, so results do not depend on the draw order
    width = components.shape[1]
    samples = np.stack([pixels % width, pixels // width], axis=1).astype(np.float64)
    return samples, flat[pixels].astype(np.int32)
