"""Stage 3: a seeded random sample of ink pixels that covers every component."""

from __future__ import annotations

import numpy as np

from .arrays import nonzero_index, sorted_unique


def pixel_keys(pixels: np.ndarray, seed: int) -> np.ndarray:
    """A pseudo-random key in [0, 1) for each flat pixel index ``(n,)`` (int), a function of
    the index and ``seed`` alone (SplitMix64's finaliser): a pixel's key does not depend on
    which other pixels are ink."""
    with np.errstate(over="ignore"):
        z = pixels.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15) * np.uint64(seed + 1)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def sample_ink_pixels(components: np.ndarray, ratio: float = 0.05, seed: int = 0,
                      ink: np.ndarray | None = None, by_position: bool = False
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Sample ``ratio`` of the ink pixels uniformly, plus one pixel of every component the
    uniform draw missed. Returns samples float64 ``(N, 2)`` [x, y] in raster order and the
    component label of each ``(N,)``. Same seed -> same samples. ``ink``: the mask
    ``components > 0`` when the caller has it (saves a pass over the page).

    ``by_position``: the draw orders the pixels by :func:`pixel_keys` instead of a random
    permutation of the ink, so that ink added or removed elsewhere on the page (a stamp kept
    out, a rule stripped) leaves every other pixel's chance, and the samples of the rest of
    the page, as they were."""
    flat = components.ravel()
    ink_index = nonzero_index(ink if ink is not None and ink.shape == components.shape else components)
    if len(ink_index) == 0:
        return np.zeros((0, 2)), np.zeros(0, np.int32)
    n_uniform = int(round(ratio * len(ink_index)))
    if by_position:
        keys = pixel_keys(ink_index, seed)
        order = np.argsort(keys, kind="stable")
        # The pixels under the ratio's key, not the first n: their number follows the ink.
        n_uniform = int(np.searchsorted(keys[order], ratio))
    else:
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(ink_index))
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
