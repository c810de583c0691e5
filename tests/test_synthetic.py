"""The synthetic page generator: deterministic, exactly labelled, and each kind is what it claims."""

from __future__ import annotations

from functools import cache

import cv2
import numpy as np
import pytest
from synthetic import KINDS, SyntheticPage, make_page, save_page

SEEDS = (0, 1)


@cache
def page(kind: str, seed: int = 0, scale: float = 1.0) -> SyntheticPage:
    """Cached ``make_page`` (the pages are immutable in practice; tests must not write to them)."""
    return make_page(kind, seed, scale)


def line_pixels(p: SyntheticPage, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns (px) of line ``k``'s pixels."""
    return np.nonzero(p.labels == k)


def principal_angle(ys: np.ndarray, xs: np.ndarray) -> float:
    """Direction of the major principal axis of the points, degrees in [-90, 90) (y down)."""
    _, vectors = np.linalg.eigh(np.cov(np.stack([xs, ys]).astype(float)))
    vx, vy = vectors[:, 1]
    return float((np.degrees(np.arctan2(vy, vx)) + 90.0) % 180.0 - 90.0)


def angle_diff(a: float, b: float) -> float:
    """|a - b| for undirected angles (modulo 180), degrees."""
    return abs((a - b + 90.0) % 180.0 - 90.0)


def baseline_wave(ys: np.ndarray, xs: np.ndarray, bin_px: int = 30) -> float:
    """Std (px) of a line's per-column-bin median row after removing the linear trend."""
    bins = (xs - xs.min()) // bin_px
    cx, cy = [], []
    for b in np.unique(bins):
        m = bins == b
        if m.sum() > 50:
            cx.append(xs[m].mean())
            cy.append(np.median(ys[m]))
    cx, cy = np.asarray(cx), np.asarray(cy)
    return float(np.std(cy - np.polyval(np.polyfit(cx, cy, 1), cx)))


def multi_line_components(p: SyntheticPage) -> int:
    """Number of 8-connected ink components holding pixels of more than one line."""
    n, cc = cv2.connectedComponents((p.image < 128).astype(np.uint8), connectivity=8)
    ink = p.labels > 0
    m = p.n_lines + 1
    present = np.bincount(cc[ink].astype(np.int64) * m + p.labels[ink], minlength=n * m).reshape(n, m) > 0
    return int(np.count_nonzero(present.sum(axis=1) > 1))


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_generates(kind: str) -> None:
    p = page(kind)
    assert p.kind == kind
    assert p.image.dtype == np.uint8 and p.labels.dtype == np.int32
    assert p.image.shape == p.labels.shape == (700, 900)
    assert 6 <= p.n_lines <= 10
    assert len(p.angles) == p.n_lines
    assert p.image.max() >= 240 and p.image.min() <= 60
    # Ink stays clear of the page border.
    border = np.ones_like(p.labels, bool)
    border[10:-10, 10:-10] = False
    assert not np.any(p.labels[border])


@pytest.mark.parametrize("kind", KINDS)
def test_deterministic(kind: str) -> None:
    a, b = page(kind, 0), make_page(kind, 0)
    assert a is not b
    assert a.image.tobytes() == b.image.tobytes()
    assert a.labels.tobytes() == b.labels.tobytes()
    assert a.angles == b.angles and a.n_lines == b.n_lines
    assert page(kind, 1).image.tobytes() != a.image.tobytes()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", KINDS)
def test_labels_exact(kind: str, seed: int) -> None:
    p = page(kind, seed)
    np.testing.assert_array_equal(p.image < 128, p.labels > 0)
    counts = np.bincount(p.labels.ravel(), minlength=p.n_lines + 1)
    assert len(counts) == p.n_lines + 1
    lines = counts[1:]
    assert lines.min() >= 1000, lines
    assert lines.min() >= 0.1 * lines.max(), lines


def test_scale() -> None:
    p = page("straight", 0, 0.5)
    assert p.image.shape == (350, 450)
    np.testing.assert_array_equal(p.image < 128, p.labels > 0)
    assert set(np.unique(p.labels)) == set(range(p.n_lines + 1))


def test_unknown_kind() -> None:
    with pytest.raises(ValueError):
        make_page("spiral")


@pytest.mark.parametrize("seed", SEEDS)
def test_touching_lines_touch(seed: int) -> None:
    assert multi_line_components(page("touching", seed)) >= 2


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "touching"])
def test_other_kinds_lines_apart(kind: str) -> None:
    for seed in SEEDS:
        assert multi_line_components(page(kind, seed)) == 0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind,tolerance", [("straight", 3.0), ("skewed", 3.0), ("curved", 3.0),
                                            ("touching", 3.0), ("two_orientations", 5.0)])
def test_principal_axis_matches_angles(kind: str, tolerance: float, seed: int) -> None:
    p = page(kind, seed)
    for k in range(1, p.n_lines + 1):
        fitted = principal_angle(*line_pixels(p, k))
        assert angle_diff(fitted, p.angles[k - 1]) < tolerance, (k, fitted, p.angles[k - 1])


@pytest.mark.parametrize("seed", SEEDS)
def test_skewed_common_angle(seed: int) -> None:
    angles = np.asarray(page("skewed", seed).angles)
    assert np.all(angles == angles[0])
    assert 8.0 <= abs(angles[0]) <= 15.0


@pytest.mark.parametrize("seed", SEEDS)
def test_curved_lines_bend(seed: int) -> None:
    def wave(p: SyntheticPage) -> float:
        return float(np.median([baseline_wave(*line_pixels(p, k)) for k in range(1, p.n_lines + 1)]))

    curved, straight = page("curved", seed), page("straight", seed)
    assert all(abs(a) < 5.0 for a in curved.angles)
    assert wave(curved) > 1.5 * wave(straight)


@pytest.mark.parametrize("seed", SEEDS)
def test_two_columns_layout(seed: int) -> None:
    p = page("two_columns", seed)
    assert all(a == 0.0 for a in p.angles)
    cols: list[list[tuple[float, int, int]]] = [[], []]
    for k in range(1, p.n_lines + 1):
        ys, xs = line_pixels(p, k)
        side = int(xs.mean() > p.image.shape[1] / 2)
        cols[side].append((float(np.median(ys)), int(xs.min()), int(xs.max())))
    left, right = (sorted(c) for c in cols)
    assert len(left) >= 3 and len(right) >= 3
    gap = min(r[1] for r in right) - max(lf[2] for lf in left)
    assert gap >= 50, gap
    pitch = float(np.median(np.diff([lf[0] for lf in left])))
    # Baselines of the right column fall between those of the left one.
    for y, _, _ in right:
        assert min(abs(y - lf[0]) for lf in left) > 0.1 * pitch


@pytest.mark.parametrize("seed", SEEDS)
def test_two_orientations_layout(seed: int) -> None:
    p = page("two_orientations", seed)
    steep = [k for k, a in enumerate(p.angles, start=1) if abs(a) > 45.0]
    flat = [k for k, a in enumerate(p.angles, start=1) if a == 0.0]
    assert len(steep) >= 3 and len(flat) >= 4 and len(steep) + len(flat) == p.n_lines
    assert all(60.0 <= abs(p.angles[k - 1]) <= 75.0 for k in steep)
    assert len({p.angles[k - 1] for k in steep}) == 1
    # The side note lies wholly to the right of the main block.
    flat_x = max(line_pixels(p, k)[1].max() for k in flat)
    steep_x = min(line_pixels(p, k)[1].min() for k in steep)
    assert steep_x - flat_x >= 30


def test_save_page(tmp_path) -> None:
    p = page("two_columns")
    image_path, labels_path = save_page(p, tmp_path / "out")
    assert image_path.exists() and labels_path.exists()
    np.testing.assert_array_equal(cv2.imread(str(image_path), cv2.IMREAD_UNCHANGED), p.image)
    labels = cv2.imread(str(labels_path), cv2.IMREAD_UNCHANGED)
    assert labels.dtype == np.uint16
    np.testing.assert_array_equal(labels.astype(np.int32), p.labels)
