"""The M-step: weighted regression lines, in the paper's form and a rotation-invariant form.

Paper form (eq. update1): ``a = S_uv / S_uu`` (ordinary least squares of v on u), ``c`` the
mean of ``u``, ``sigma_t`` the spread of the vertical residual ``v - a u - b``.

Rotation-invariant form: the supplement's ``a = 2 S_uv / (S_uu + S_vv)`` is wrong: it returns
``sin 2 beta``, not ``tan beta`` (10 deg: 0.339 instead of 0.176), and its ``R_l`` is not a
rotation (determinant ``1 + a^2``). We use the weighted principal axis,
``beta = atan2(2 S_uv, S_uu - S_vv) / 2``, ``a = tan beta``, with ``sigma_t`` measured
perpendicular to the line and ``c``/``sigma_s`` along it. When a line's points spread more
across than along (``S_vv > S_uu``, e.g. a single tall letter), the principal axis would turn
the line across the text, so the OLS slope is used instead.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .arrays import principal_axis


class LineFit(NamedTuple):
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    sigma_t: np.ndarray
    sigma_s: np.ndarray
    weight: np.ndarray  # total weight per line (L,)


def point_features(uv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features ``(n, 6)`` [1, u, v, u^2, uv, v^2] of points centred on their mean, and that
    mean (centring keeps the second moments accurate in float64 far from the origin)."""
    uv = np.asarray(uv, dtype=np.float64)
    origin = uv.mean(axis=0) if len(uv) else np.zeros(2)
    u, v = (uv - origin).T
    return np.stack([np.ones_like(u), u, v, u * u, u * v, v * v], axis=1), origin


def label_moments(uv: np.ndarray, labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Moments ``(n, 6)`` of the features of :func:`point_features` of the points ``uv (m, 2)``
    of each label ``0..n-1`` (``labels (m,)``; -1: none), and the features' origin: what
    ``weights.T @ features`` gives for 0/1 weights, without the ``(m, n)`` weights (a locked
    file's pieces make ``n`` a few hundred: 0.33 GB on cremma20 10_c71ca)."""
    features, origin = point_features(uv)
    labels = np.asarray(labels)
    has = labels >= 0
    moments = np.stack([np.bincount(labels[has], weights=features[has, j], minlength=n)[:n]
                        for j in range(features.shape[1])], axis=1)
    return moments, origin


def fit_lines(uv: np.ndarray, weights: np.ndarray, rotation_invariant: bool = True,
              sigma_t_floor: float = 1.0, sigma_s_floor: float = 1.0, max_angle: float = 90.0) -> LineFit:
    """Fit L lines to points ``uv (n, 2)`` with weights ``(n, L)`` (posteriors or 0/1).

    Returns per-line ``a, b, c, sigma_t, sigma_s`` (pixels) and the total weight. Lines with
    (almost) no weight get NaN parameters; the caller keeps their previous values.
    ``max_angle``: see :func:`fit_from_moments`."""
    features, origin = point_features(uv)
    moments = np.asarray(weights, dtype=np.float64).T @ features  # (L, 6)
    return fit_from_moments(moments, origin, rotation_invariant, sigma_t_floor, sigma_s_floor, max_angle)


def fit_from_moments(moments: np.ndarray, origin: np.ndarray, rotation_invariant: bool = True,
                     sigma_t_floor: float = 1.0, sigma_s_floor: float = 1.0, max_angle: float = 90.0
                     ) -> LineFit:
    """Lines from weighted moments ``(L, 6)`` of the features of :func:`point_features`.
    ``max_angle`` (degrees, under 90): the steepest a line may run in the frame (u axis);
    a steeper fit is turned to that angle, and its spreads measured about it
    (``Parameters.frame_lines``)."""
    total = moments[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        safe = np.where(total > 1e-9, total, np.nan)
        mu, mv = moments[:, 1] / safe, moments[:, 2] / safe
        suu = moments[:, 3] / safe - mu * mu
        suv = moments[:, 4] / safe - mu * mv
        svv = moments[:, 5] / safe - mv * mv
        suu, svv = np.maximum(suu, 0.0), np.maximum(svv, 0.0)
        ols = np.where(suu > 1e-12, suv / np.where(suu > 1e-12, suu, 1.0), 0.0 * mu)  # NaN: no weight
        if rotation_invariant:
            beta = principal_axis(suu, suv, svv)[0]
            beta = np.where(suu >= svv, beta, np.arctan(ols))
            if max_angle < 90.0:
                limit = np.radians(max_angle)
                beta = np.clip(beta, -limit, limit)
            a = np.tan(beta)
            cos, sin = np.cos(beta), np.sin(beta)
            var_t = svv * cos**2 - 2.0 * suv * sin * cos + suu * sin**2
            var_s = suu * cos**2 + 2.0 * suv * sin * cos + svv * sin**2
            c_local = (mu + a * mv) / np.sqrt(1.0 + a * a)
        else:
            a = ols
            if max_angle < 90.0:
                a = np.clip(a, -np.tan(np.radians(max_angle)), np.tan(np.radians(max_angle)))
            var_t = svv - 2.0 * a * suv + a * a * suu
            var_s = suu
            c_local = mu
        b_local = mv - a * mu
    # Back from the centred origin (u0, v0): v - v0 = a (u - u0) + b'  =>  b = b' + v0 - a u0.
    u0, v0 = origin
    b = b_local + v0 - a * u0
    if rotation_invariant:
        c = c_local + (u0 + a * v0) / np.sqrt(1.0 + a * a)
    else:
        c = c_local + u0
    sigma_t = np.maximum(np.sqrt(np.maximum(var_t, 0.0)), sigma_t_floor)
    sigma_s = np.maximum(np.sqrt(np.maximum(var_s, 0.0)), sigma_s_floor)
    return LineFit(a, b, c, sigma_t, sigma_s, total)


def spread_about(moments: np.ndarray, origin: np.ndarray, a: np.ndarray, b: np.ndarray,
                 rotation_invariant: bool = True, sigma_t_floor: float = 1.0) -> np.ndarray:
    """Spread across each of L fixed lines ``v = a u + b`` ``(L,)`` of the points whose
    weighted moments ``(L, 6)`` (features of :func:`point_features`, centred on ``origin``)
    are given: the root weighted mean square of the residual ``v - a u - b`` (divided by
    ``sqrt(1 + a^2)`` in the rotation-invariant form, i.e. measured perpendicular to the
    line), floored at ``sigma_t_floor``. NaN where a line has no weight.

    The M-step's spread for a line the user locked: its place is given, only how far its
    ink spreads about it is learnt."""
    moments = np.asarray(moments, dtype=np.float64)
    total = moments[:, 0]
    u0, v0 = origin
    # In the centred frame the line reads v' = a u' + b', with b' = b + a u0 - v0.
    b_c = b + a * u0 - v0
    with np.errstate(invalid="ignore", divide="ignore"):
        safe = np.where(total > 1e-9, total, np.nan)
        mean_sq = (moments[:, 5] - 2.0 * a * moments[:, 4] + a * a * moments[:, 3]
                   - 2.0 * b_c * moments[:, 2] + 2.0 * a * b_c * moments[:, 1]
                   + b_c * b_c * moments[:, 0]) / safe
    if rotation_invariant:
        mean_sq = mean_sq / (1.0 + a * a)
    return np.maximum(np.sqrt(np.maximum(mean_sq, 0.0)), sigma_t_floor)
