"""The unary term: flattened-Gaussian local fitting (eq. ff2) plus the line prior.

``log psi_v(l) = -D(d_t)^2 / (2 sigma_t^2) - d_s^2 / (2 sigma_s^2)
                 - log(2 pi sigma_t sigma_s) [+ log pi_l] - theta_l``

with ``D(d) = max(0, |d| - r S_l)`` (form "plateau", the default: the Gaussian continues from
the plateau's edge) or ``D(d) = |d| if |d| > r S_l else 0`` (form "paper", eq. ff2 as printed,
which jumps by ``(r S_l)^2 / 2 sigma_t^2`` nats at the edge); ``log pi_l`` only with
``prior_in_unary`` (not in the paper, where the line probability enters through theta_l).

``d_t`` is the distance across line ``l`` (vertical in the paper form, perpendicular in the
rotation-invariant form), ``d_s`` the distance along it from its centre ``c``; the plateau of
half-width ``r S_l`` (``S_l`` the interline space, Koo & Cho 2012) keeps ascenders and
descenders on their line; ``theta_l`` is the learned line-probability parameter.
"""

from __future__ import annotations

import numpy as np

from .model import LineSet

_LOG_2PI = float(np.log(2.0 * np.pi))


def across_distance(uv: np.ndarray, lines: LineSet) -> np.ndarray:
    """Signed distance ``(n, L)`` of region-frame points across each line (positive below)."""
    return across_offset(uv[:, 0:1], uv[:, 1:2], lines.a, lines.b, lines.rotation_invariant)


def across_offset(u: np.ndarray, v: np.ndarray, a: np.ndarray, b: np.ndarray, rotation_invariant: bool
                  ) -> np.ndarray:
    """Signed distance of region-frame points ``(u, v)`` across the lines ``v = a u + b``
    (positive below), over the arrays' broadcast shape: across the line, or along ``v``
    in the paper's form."""
    d = v - a * u - b
    if rotation_invariant:
        d = d / np.sqrt(1.0 + a * a)
    return d


def interline_space(lines: LineSet, default: float, min_gap: float = 0.0,
                    linked: np.ndarray | None = None) -> np.ndarray:
    """Interline space ``S_l`` ``(L,)`` of lines of one region: the mean distance, at each
    line's centre, to the nearest line above and below whose extent covers that point.
    Lines closer than ``min_gap`` (fragments of the same row) do not count; with ``linked``
    (``(L, L)`` bool, :func:`engine.blocks.linked_lines`) only the lines linked to it do; a
    line without such neighbours gets ``default``."""
    n = len(lines)
    if n == 0:
        return np.zeros(0)
    centre = lines.segments(0.0)[:, 0]  # (L, 2) page coordinates of each line's centre
    # Work in the (common) region frame of these lines.
    phi = lines.phi[0]
    c, s = np.cos(phi), np.sin(phi)
    uv = np.stack([centre[:, 0] * c + centre[:, 1] * s, -centre[:, 0] * s + centre[:, 1] * c], axis=1)
    gap = across_distance(uv, lines).T  # gap[l, k]: line l's centre relative to line k
    gap = -gap  # k's position relative to l: positive = k below l
    along = lines.along(uv) - lines.c  # (L_points, L_lines): l's centre along line k
    covers = np.abs(along) <= 2.0 * lines.sigma_s[None, :]
    valid = covers & (np.abs(gap) > min_gap) & ~np.eye(n, dtype=bool)
    if linked is not None:
        valid &= linked
    below = np.where(valid & (gap > 0), gap, np.inf).min(axis=1)
    above = np.where(valid & (gap < 0), -gap, np.inf).min(axis=1)
    both = np.isfinite(below) & np.isfinite(above)
    space = np.where(both, (below + above) / 2.0,
                     np.where(np.isfinite(below), below, np.where(np.isfinite(above), above, default)))
    return space


def log_unary(uv: np.ndarray, lines: LineSet, space: np.ndarray, r: float,
              line_bias: np.ndarray | None = None, form: str = "plateau", prior: bool = True) -> np.ndarray:
    """``log psi_v(l)`` for points ``uv (n, 2)`` in the lines' region frame: ``(n, L)`` float32
    (``form``, ``prior``: see the module's docstring)."""
    return log_unary_by_line(uv, lines, space, r, line_bias, form, prior).T


#: Array entries (lines x samples) per block of :func:`log_unary_by_line`: about 4 MB of
#: float32, so that its dozen passes over a block stay in the CPU's cache instead of each
#: streaming the whole (L, n) array through memory (a locked file's 247 pieces x 76k samples:
#: 0.29 -> 0.13 s a call, the same values bit for bit).
UNARY_BLOCK = 1 << 20


def sample_block(n_lines: int) -> int:
    """Samples per block of a ``(n_lines, n)`` pass: :data:`UNARY_BLOCK` entries, at least 256
    samples."""
    return max(256, UNARY_BLOCK // max(n_lines, 1))


def log_unary_by_line(uv: np.ndarray, lines: LineSet, space: np.ndarray, r: float,
                      line_bias: np.ndarray | None = None, form: str = "plateau",
                      prior: bool = True) -> np.ndarray:
    """:func:`log_unary` label-major, ``(L, n)`` float32 C-ordered, as EM's message passing
    stores it. Computed in float32 (a thousandth of a pixel at 4000 px, far below sampling),
    one line per row so that every operation runs over contiguous samples, in blocks of
    samples (:data:`UNARY_BLOCK`); each entry's operations are the same whatever the block."""
    n_lines, n = len(lines), len(uv)
    step = sample_block(n_lines)
    if n <= step:
        return _log_unary_block(uv, lines, space, r, line_bias, form, prior)
    out = np.empty((n_lines, n), np.float32)
    for start in range(0, n, step):
        out[:, start:start + step] = _log_unary_block(uv[start:start + step], lines, space, r, line_bias,
                                                      form, prior)
    return out


def _log_unary_block(uv: np.ndarray, lines: LineSet, space: np.ndarray, r: float,
                     line_bias: np.ndarray | None, form: str, prior: bool) -> np.ndarray:
    u = np.ascontiguousarray(uv[:, 0], dtype=np.float32)[None, :]
    v = np.ascontiguousarray(uv[:, 1], dtype=np.float32)[None, :]
    f32 = np.float32
    a = lines.a.astype(f32)[:, None]
    b = lines.b.astype(f32)[:, None]
    d_t = v - a * u
    d_t -= b
    if lines.rotation_invariant:
        norm = np.sqrt(1.0 + lines.a**2).astype(f32)[:, None]
        d_t /= norm
        d_s = (u + a * v) / norm
    else:
        d_s = np.broadcast_to(u, d_t.shape).copy()
    d_s -= lines.c.astype(f32)[:, None]
    np.abs(d_t, out=d_t)
    plateau = (r * space).astype(f32)[:, None]
    if form == "paper":
        d_t[d_t <= plateau] = 0.0
    else:
        d_t -= plateau
        np.maximum(d_t, 0.0, out=d_t)
    out = d_t
    out *= out
    out *= (-0.5 / lines.sigma_t**2).astype(f32)[:, None]
    d_s *= d_s
    d_s *= (0.5 / lines.sigma_s**2).astype(f32)[:, None]
    out -= d_s
    const = -(_LOG_2PI + np.log(lines.sigma_t * lines.sigma_s))
    if prior:
        const = const + np.log(np.maximum(lines.prior, 1e-12))
    if line_bias is not None:
        const = const - line_bias
    out += const.astype(f32)[:, None]
    return out
