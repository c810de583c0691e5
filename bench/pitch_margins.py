"""The margins of issue 26's row-pitch thresholds on every development page.

    python bench/pitch_margins.py [--sets a,b] [--limit N] [--out CSV]

For each page (default parameters, but the mechanism measured switched off where it would
change what is measured), with its ground truth's line of every sample:

* ``pitch``, ``pitch_hcc``: the page's row pitch (engine.pitch.page_rows) in pixels and H_cc.
* Row join (stage 5, ``row_join`` x the pitch): among the Delaunay edges the 2.5 H_cc cut
  removes between two regions that pass the row tests (same row phase, one end a single row),
  ``join_same_max`` is the longest (along the text, in pitches) whose ends lie on one ground-
  truth line (a word gap the join must bridge), ``join_diff_min`` the shortest whose ends
  lie on two lines (what a join must not bridge). ``row_join`` sits between them on a page
  when ``join_same_max <= row_join < join_diff_min``.
* sigma_t cap (stage 7, ``sigma_t_pitch`` x the region's pitch): EM run without the cap;
  ``sigma_t_p50`` / ``sigma_t_p90`` / ``sigma_t_max``: quantiles of the final lines'
  sigma_t over their region's pitch (lines of regions with a pitch and more than one line).
* Page moments: the fractions of MRF edges joining the same / adjacent / farther lines under
  the starting lines (engine.em.page_moments), against the fixed defaults.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import find_sets  # noqa: E402
from engine import em as _em  # noqa: E402
from engine import pitch as _pitch  # noqa: E402
from engine.evaluate import polygon_label_map  # noqa: E402
from engine.graph import triangle_edges  # noqa: E402
from engine.groundtruth import read_label_map  # noqa: E402
from engine.params import Parameters  # noqa: E402
from engine.pipeline import prepare, run_em  # noqa: E402
from engine.regions import edge_components  # noqa: E402

FIELDS = ("set", "page", "h_cc", "pitch", "pitch_hcc", "join_same_max", "join_diff_min", "join_edges",
          "sigma_t_p50", "sigma_t_p90", "sigma_t_max", "mu0", "mu1", "mu2")


def truth_of_samples(image: Path, gt: Path, shape: tuple[int, int], samples: np.ndarray) -> np.ndarray:
    """Ground-truth line of every sample ``(N,)`` (0 = none)."""
    if gt.suffix.lower() == ".xml":
        labels = polygon_label_map(gt, image, shape)
    else:
        labels = read_label_map(gt, shape)
    xy = np.rint(samples).astype(np.int64)
    return labels[np.clip(xy[:, 1], 0, shape[0] - 1), np.clip(xy[:, 0], 0, shape[1] - 1)]


def join_margins(prep, truth: np.ndarray, params: Parameters) -> tuple[float, float, float, int]:
    """The page's pitch and the row join's margins (see the module's docstring)."""
    from engine.graph import delaunay_edges

    samples = prep.samples
    triangles, delaunay = delaunay_edges(samples)
    limit = params.region_threshold * max(prep.stats.h_cc, 1.0)
    p = samples[triangles]
    sides = np.linalg.norm(p - np.roll(p, -1, axis=1), axis=2)
    kept = triangle_edges(triangles[sides.max(axis=1) <= limit])
    label = edge_components(kept, len(samples))
    # Every candidate, however long: the test's other conditions only.
    found = _pitch.row_join_edges(samples, delaunay, kept, label, prep.stats.h_cc, 1e6)
    if not math.isfinite(found.pitch) or len(found.edges) == 0:
        return found.pitch, math.nan, math.nan, 0
    uv = _pitch.to_region_frame(samples, math.radians(found.angle))
    du = np.abs(uv[found.edges[:, 0], 0] - uv[found.edges[:, 1], 0]) / found.pitch
    a, b = truth[found.edges[:, 0]], truth[found.edges[:, 1]]
    same = (a > 0) & (a == b)
    diff = (a > 0) & (b > 0) & (a != b)
    return (found.pitch, float(du[same].max()) if same.any() else math.nan,
            float(du[diff].min()) if diff.any() else math.nan, int((du <= params.row_join).sum()))


def sigma_ratios(prep, params: Parameters) -> np.ndarray:
    """Final sigma_t over the region's pitch of the lines of EM run without the cap."""
    *_, last = run_em(prep, params=params.replace(sigma_t_pitch=0.0))
    lines = last.lines
    out = []
    for r, rp in enumerate(prep.row_pitch):
        own = lines.region == r
        if own.sum() >= 2 and math.isfinite(rp.pitch):
            out.extend(lines.sigma_t[own] / rp.pitch)
    return np.array(out)


def moments_of(prep, params: Parameters) -> np.ndarray:
    states = _em._region_states(prep, prep.initial_lines, params)
    unaries = _em._unaries(states, prep.initial_lines, params, prep.stats.h_cc)
    for st, u in zip(states, _em._windowed(states, unaries), strict=True):
        if u.shape[0] and u.shape[1]:
            q = np.exp(u - u.max(axis=0))
            st.posterior[:] = q / q.sum(axis=0)
    return _em.page_moments(states, np.full(3, np.nan))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--sets", default="")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--out", default="/tmp/pitch-margins.csv")
    args = ap.parse_args(argv)
    data = Path(args.data)
    if not data.is_dir():
        data = Path("/work/shared/data")
    params = Parameters()
    rows = []
    for name, pages in find_sets(data, [s for s in args.sets.split(",") if s] or None).items():
        for image, gt in pages[:args.limit or None]:
            prep = prepare(str(image), params.replace(row_join=0.0))
            truth = truth_of_samples(image, gt, prep.shape, prep.samples)
            pitch, same_max, diff_min, n_join = join_margins(prep, truth, params)
            ratios = sigma_ratios(prepare(str(image), params), params)
            mu = moments_of(prep, params)
            q = np.quantile(ratios, [0.5, 0.9, 1.0]) if len(ratios) else [math.nan] * 3
            row = {"set": name, "page": image.stem, "h_cc": prep.stats.h_cc, "pitch": pitch,
                   "pitch_hcc": pitch / prep.stats.h_cc, "join_same_max": same_max,
                   "join_diff_min": diff_min, "join_edges": n_join, "sigma_t_p50": q[0],
                   "sigma_t_p90": q[1], "sigma_t_max": q[2], "mu0": mu[0], "mu1": mu[1], "mu2": mu[2]}
            rows.append(row)
            print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                  flush=True)
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
