"""The row pitch: how far apart a region's text rows are, estimated from the page itself.

``H_cc`` (a component's height) is the method's unit, and a poor proxy for the distance
between rows: large letters on widely spaced rows (word gaps of 4 ``H_cc`` that the region
cut takes for block boundaries) and small writing on tight rows (a pitch of 2 ``H_cc``, where
a line's band may spread over its neighbour's row) are the same ``H_cc`` apart for the
method. The pitch is measured where the rows are: the autocorrelation of the samples'
profile across the text direction (:func:`engine.initial_lines.line_pitch`, the blob
scale's estimate) at the region's own text angle, or, for a region of one row, the page's
samples at that angle, else its nearest neighbour's at an angle within ``NEIGHBOUR_ANGLE``
(its neighbours' rows).

Three mechanisms read it (each a field of :class:`engine.params.Parameters`):
``row_join`` (stage 5: a word gap along a row is not a region boundary,
:func:`row_join_edges`), ``sigma_t_pitch`` (stage 7: a line's band may not reach its
neighbour's row, :func:`sigma_t_cap`) and ``row_merge`` (stage 8: fragments of one row in
different regions merge, :mod:`engine.row_merge`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .arrays import angle_gap
from .initial_lines import line_pitch, peak_position
from .model import to_region_frame

#: Bins of the across profile, in H_cc (as engine.regions.text_scale).
_BIN_HCC = 0.25
#: Pitches looked for, in H_cc (from half a text height, as initial_lines._MIN_PITCH_HCC, to
#: twenty: double-spaced large writing is under ten).
_MIN_PITCH_HCC = 0.5
_MAX_PITCH_HCC = 20.0
#: Samples (about) the page's angle and pitch are estimated from.
_MAX_POINTS = 4000


@dataclass(frozen=True)
class RowPitch:
    """A region's row pitch: ``pitch`` (pixels, NaN where its rows show no period), measured
    across the text at ``angle`` (degrees, the region's frame); ``phase``: the across
    position (pixels, region frame ``v``) of a row's centre, modulo the pitch;
    ``correlation``: the profile's autocorrelation at the pitch (1 = perfectly periodic);
    ``source``: "region" (its own rows), "page" (a region of one row: the page's rows at
    its angle), "neighbour" (the nearest region's pitch, the phase at its own centre) or
    "none"."""

    region: int
    angle: float
    pitch: float
    phase: float
    correlation: float
    source: str

    def to_dict(self, h_cc: float) -> dict:
        ok = math.isfinite(self.pitch)
        return {"region": self.region, "angle": round(self.angle, 2),
                "pitch": round(self.pitch, 1) if ok else None,
                "pitch_hcc": round(self.pitch / max(h_cc, 1e-9), 2) if ok else None,
                "phase": round(self.phase, 1) if ok else None,
                "correlation": round(self.correlation, 3) if ok else None, "source": self.source}


def across_pitch(v: np.ndarray, h_cc: float, weights: np.ndarray | None = None,
                 few_rows: bool = False) -> tuple[float, float, float]:
    """Row pitch of points whose across-text positions are ``v`` ``(n,)`` (pixels): the
    period of their profile in bins of ``H_cc / 4`` (:func:`engine.initial_lines.line_pitch`),
    the rows' phase (the circular mean of ``v`` at that period) and the autocorrelation
    there. ``(pitch, phase, correlation)``, NaN each when there is no period. ``few_rows``:
    see :func:`engine.initial_lines.line_pitch`."""
    nan = (math.nan, math.nan, math.nan)
    if len(v) < 8 or h_cc <= 0:
        return nan
    bin_w = _BIN_HCC * h_cc
    lo = float(v.min())
    idx = ((v - lo) / bin_w).astype(np.int64)
    profile = np.bincount(idx, weights=weights).astype(np.float64)
    lag = line_pitch(profile, _MIN_PITCH_HCC / _BIN_HCC, _MAX_PITCH_HCC / _BIN_HCC, few_rows)
    if not math.isfinite(lag):
        return nan
    p = profile - profile.mean()
    ac = np.correlate(p, p, mode="full")[len(p) - 1:]
    corr = float(ac[int(lag)] / ac[0]) if ac[0] > 0 else math.nan
    pitch = peak_position(ac, int(lag)) * bin_w  # to a fraction of a bin
    w = np.ones(len(v)) if weights is None else weights
    angle = 2.0 * np.pi * v / pitch
    phase = float(np.arctan2((w * np.sin(angle)).sum(), (w * np.cos(angle)).sum())) * pitch / (2.0 * np.pi)
    return pitch, phase % pitch, corr


def page_rows(samples: np.ndarray, h_cc: float, few_rows: bool = False) -> tuple[float, float, float, float]:
    """The page's dominant text angle (degrees, the angle whose across profile shows lines
    best, as :func:`engine.regions.text_scale` finds it) and its rows' pitch, phase and
    correlation there (:func:`across_pitch`, ``few_rows`` passed on). NaN pitch where the page
    shows no rows."""
    from .regions import _FINE_ANGLES, contrast_curve  # regions imports this module

    if len(samples) < 8 or h_cc <= 0:
        return 0.0, math.nan, math.nan, math.nan
    pts = samples[::max(1, len(samples) // _MAX_POINTS)].astype(np.float64)
    d = pts - pts.mean(axis=0)
    radius = float(np.sqrt((d**2).sum(axis=1)).max()) + 1.0
    deg = float(_FINE_ANGLES[int(np.argmax(contrast_curve(d, radius, h_cc, _FINE_ANGLES)))])
    v = to_region_frame(samples.astype(np.float64), math.radians(deg))[:, 1]
    return (deg, *across_pitch(v, h_cc, few_rows=few_rows))


def region_pitches(samples: np.ndarray, sample_region: np.ndarray, phis: np.ndarray, h_cc: float
                   ) -> tuple[RowPitch, ...]:
    """The row pitch of every region (``phis (R,)``: the regions' frame angles, radians): of
    its own samples' rows where they show a period, else of the page's samples at its angle
    (a region of one row: its neighbours' rows), else its nearest neighbour's
    (:func:`_from_neighbours`), else none."""
    out = []
    page_cache: dict[float, tuple[float, float, float]] = {}
    for r, phi in enumerate(np.asarray(phis, np.float64)):
        members = sample_region == r
        v = to_region_frame(samples[members].astype(np.float64), phi)[:, 1]
        pitch, phase, corr = across_pitch(v, h_cc)
        source = "region"
        if not math.isfinite(pitch):
            key = round(float(phi), 3)
            if key not in page_cache:
                page_v = to_region_frame(samples.astype(np.float64), phi)[:, 1]
                page_cache[key] = across_pitch(page_v, h_cc)
            pitch, phase, corr = page_cache[key]
            source = "page" if math.isfinite(pitch) else "none"
        out.append(RowPitch(r, math.degrees(float(phi)), pitch, phase, corr, source))
    return _from_neighbours(out, samples, sample_region, np.asarray(phis, np.float64))


#: A region without a period of its own or at its angle takes its nearest neighbour's pitch
#: when their text runs within this many degrees (a row's words agree within a few degrees;
#: a side note at another angle is a block of its own); also the angle within which
#: engine.row_merge takes two fragments for one row's.
NEIGHBOUR_ANGLE = 10.0


def _from_neighbours(pitches: list[RowPitch], samples: np.ndarray, sample_region: np.ndarray,
                     phis: np.ndarray) -> tuple[RowPitch, ...]:
    """Regions with no pitch (``source`` "none") take the pitch of the nearest region (by
    their samples' centres) that has one and whose angle is within ``NEIGHBOUR_ANGLE``: a
    region of one row or a word has no period of its own, and the page's samples at the word's
    own angle (a few degrees off the rows') blur the rows' period over a wide page (poilus
    AN_0348-0: the title's words at -3.1 and 3.1 deg, the body at -0.6). The phase is the
    region's own samples' centre across the text (a row of one row's centre)."""
    has = [p for p in pitches if math.isfinite(p.pitch)]
    if not has or len(has) == len(pitches):
        return tuple(pitches)
    n_regions = len(pitches)
    count = np.maximum(np.bincount(sample_region, minlength=n_regions), 1)
    centre = np.stack([np.bincount(sample_region, samples[:, k], n_regions) / count for k in (0, 1)], axis=1)
    out = list(pitches)
    angles = np.array([q.angle for q in has])
    for r, p in enumerate(pitches):
        members = sample_region == r
        if p.source != "none" or not members.any():
            continue
        turn = angle_gap(angles, p.angle)
        near = [(float(np.hypot(*(centre[q.region] - centre[r]))), q) for q, t in zip(has, turn, strict=True)
                if t <= NEIGHBOUR_ANGLE]
        if not near:
            continue
        q = min(near, key=lambda e: e[0])[1]
        v = to_region_frame(samples[members].astype(np.float64), float(phis[r]))[:, 1]
        out[r] = RowPitch(r, p.angle, q.pitch, float(np.median(v)) % q.pitch, q.correlation, "neighbour")
    return tuple(out)


def sigma_t_cap(pitch: float, fraction: float, floor: float) -> float:
    """Largest sigma_t (pixels) of a line in a region of row ``pitch``: ``fraction`` x pitch
    (never under ``floor``); infinite where there is no pitch or no cap (``fraction`` 0)."""
    if fraction <= 0 or not math.isfinite(pitch):
        return math.inf
    return max(fraction * pitch, floor)


def page_pitch(prep) -> float | None:
    """The page's row pitch (pixels) for a summary: the median of its regions' pitches
    weighted by their samples, over the regions with a pitch; None where none has one."""
    values = [(p.pitch, r.n_samples) for p, r in zip(prep.row_pitch, prep.regions, strict=False)
              if math.isfinite(p.pitch)]
    if not values:
        return None
    pitches, weights = np.array(values, float).T
    order = np.argsort(pitches)
    cum = np.cumsum(weights[order])
    return round(float(pitches[order][np.searchsorted(cum, cum[-1] / 2.0)]), 1)


#: Two samples are on one row when they lie less than this many row pitches apart across the
#: text (a row's ink spans about half a pitch; the next row's is a pitch away).
ROW_PHASE = 0.25
#: A region is (a fragment of) one row when its samples spread less than this many row
#: pitches across the text (standard deviation): one row's ink about 0.1-0.15, two rows' 0.5.
ROW_SPREAD = 0.25


@dataclass(frozen=True)
class RowJoin:
    """What stage 5's row join found: the page's text ``angle`` (degrees) and row ``pitch``
    (pixels, NaN: no joins), and the Delaunay ``edges`` ``(k, 2)`` it kept across word gaps."""

    angle: float
    pitch: float
    edges: np.ndarray


def row_join_edges(samples: np.ndarray, delaunay: np.ndarray, kept: np.ndarray, label: np.ndarray,
                   h_cc: float, max_gap: float) -> RowJoin:
    """Delaunay edges ``(k, 2)`` the region cut removed that run along a text row across a
    word gap, to be kept: a word gap is not a region boundary when the row continues at the
    same pitch phase.

    ``delaunay`` are all the graph's edges, ``kept`` those of the triangles the cut kept,
    ``label`` the samples' regions under the cut. In the frame of the page's text angle
    (:func:`page_rows`), with the page's row pitch P, an edge between two regions is kept
    when its ends lie less than ``ROW_PHASE`` x P apart across the text (the same row), at
    most ``max_gap`` x P apart along it, and both regions are single rows (their samples
    spread less than ``ROW_SPREAD`` x P across the text) whose mean positions across the text
    lie within ``ROW_PHASE`` x P. A block of rows is never joined: two blocks side by side
    (columns, a side note against the main text) stay apart, and so do a block and a row
    fragment beside it: a page number at the end of the first row (cremma 50_df850: 14 -> 11
    matches when a single row could join a block), a crumb that widened the block's box and
    moved its blob scale (poilus AN_0090-0: 9 samples, 24 -> 13 initial lines).

    Large cursive on widely spaced rows has word gaps of 3-4 H_cc, over the cut's 2.5 H_cc:
    each word became a region of its own with a line of its own (poilus wills, 57-64 lines
    for 19 rows)."""
    none = RowJoin(0.0, math.nan, np.zeros((0, 2), np.int32))
    n = len(samples)
    if n < 8 or len(delaunay) == 0 or max_gap <= 0:
        return none
    deg, pitch, _, _ = page_rows(samples, h_cc)
    if not math.isfinite(pitch):
        return RowJoin(deg, pitch, none.edges)
    # Edges are (i < j) pairs; keys sorted here (triangle_edges returns them sorted), so a
    # binary search finds the kept ones (np.isin hashes: 10x slower on 150k edges).
    key_kept = np.sort(kept[:, 0].astype(np.int64) * n + kept[:, 1]) if len(kept) else np.zeros(0, np.int64)
    key_all = delaunay[:, 0].astype(np.int64) * n + delaunay[:, 1]
    if len(key_kept):
        at = np.minimum(np.searchsorted(key_kept, key_all), len(key_kept) - 1)
        removed = key_kept[at] != key_all
    else:
        removed = np.ones(len(key_all), bool)
    cand = delaunay[removed]
    cand = cand[label[cand[:, 0]] != label[cand[:, 1]]]
    if len(cand) == 0:
        return RowJoin(deg, pitch, none.edges)
    uv = to_region_frame(samples.astype(np.float64), math.radians(deg))
    d = np.abs(uv[cand[:, 0]] - uv[cand[:, 1]])
    ok = (d[:, 1] <= ROW_PHASE * pitch) & (d[:, 0] <= max_gap * pitch)
    cand = cand[ok]
    if len(cand) == 0:
        return RowJoin(deg, pitch, none.edges)
    # Each region's spread across the text (a single row or a block of rows).
    n_regions = int(label.max()) + 1
    count = np.maximum(np.bincount(label, minlength=n_regions), 1)
    v = uv[:, 1]
    mean = np.bincount(label, v, n_regions) / count
    spread = np.sqrt(np.maximum(np.bincount(label, v * v, n_regions) / count - mean**2, 0.0))
    single = spread <= ROW_SPREAD * pitch
    la, lb = label[cand[:, 0]], label[cand[:, 1]]
    ok = single[la] & single[lb] & (np.abs(mean[la] - mean[lb]) <= ROW_PHASE * pitch)
    return RowJoin(deg, pitch, cand[ok].astype(np.int32))


def single_rows(samples: np.ndarray, sample_region: np.ndarray, phis: np.ndarray,
                pitches: tuple[RowPitch, ...]) -> np.ndarray:
    """Which regions (bool ``(R,)``) are a single row: their samples spread less than
    ``ROW_SPREAD`` x their row pitch across their text direction (standard deviation)."""
    out = np.zeros(len(phis), bool)
    for r, (phi, rp) in enumerate(zip(phis, pitches, strict=True)):
        v = to_region_frame(samples[sample_region == r].astype(np.float64), float(phi))[:, 1]
        out[r] = len(v) > 0 and math.isfinite(rp.pitch) and float(v.std()) <= ROW_SPREAD * rp.pitch
    return out
