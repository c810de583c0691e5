"""What one straight line per text line can reach (issue 24, item 4: moc-train's curved lines).

    python bench/straight_lines.py [--data ../shared/data] [--sets moc-train,ahte-train] [--out CSV]

The engine models a text line as a straight regression line. With the ground truth's own
lines locked (``bench/steering.py`` (d)) a line's axis is the straight fit through its
pixels (``engine.initial_io``); where the written line curves, that axis leaves its row and
crosses the next one. This script measures the ceiling such axes put on any labelling that
goes by distance, on the ground truth's own ink, per page of the pixel-labelled sets:

* ``nearest``: every scored pixel to the nearest of the ground truth's straight axes
  (across distance, plus distance beyond its ends);
* ``whole``: every connected component of the scored pixels whole to the line most of
  its pixels are nearest to (the engine's labelling assigns components whole where it can);
* ``curved``: the same with each line's curved axis instead (a polyline through the median
  of its pixels every W_cc along it): what a line model that bends would give the same rule.

Both label, and are scored on, the pixels ``tlseg evaluate`` scores a label image on (the
page's ink and every ground-truth pixel): FM at T_a 0.95 and line IU at 0.75, as in
``bench/steering.py``. A page whose ``whole`` FM is low loses its lines to their shape, not
to EM or the labelling's rules.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.evaluate import page_ink, scored_pixels  # noqa: E402
from engine.groundtruth import read_label_map  # noqa: E402
from engine.initial_io import read_initial_lines  # noqa: E402
from engine.metric import combine, combine_lines, contest_metric, line_metric  # noqa: E402
from engine.params import Parameters  # noqa: E402
from engine.pipeline import prepare  # noqa: E402
from engine.postprocess import majority, nearest_line  # noqa: E402

T_A, LINE_THRESHOLD = 0.95, 0.75


def nearest_polyline(gt: np.ndarray, ys: np.ndarray, xs: np.ndarray, step: float) -> np.ndarray:
    """For the pixels ``(ys, xs)``, the ground-truth line (1-based) whose curved axis is nearest:
    each line's axis a polyline through the median across position of its pixels in bins of
    ``step`` pixels along its own straight fit (its principal axis)."""
    best = np.full(len(ys), np.inf, np.float32)
    arg = np.zeros(len(ys), np.int32)
    canvas = np.ones(gt.shape, np.uint8)
    for k in range(1, int(gt.max()) + 1):
        py, px = np.nonzero(gt == k)
        if len(py) < 2:
            continue
        pts = np.stack([px, py], axis=1).astype(np.float64)
        centre = pts.mean(axis=0)
        _, _, vt = np.linalg.svd(pts - centre, full_matrices=False)
        along, across = (pts - centre) @ vt[0], (pts - centre) @ vt[1]
        bins = np.floor((along - along.min()) / max(step, 1.0)).astype(np.int64)
        nodes = []
        for b in np.unique(bins):
            sel = bins == b
            nodes.append(centre + np.median(along[sel]) * vt[0] + np.median(across[sel]) * vt[1])
        canvas[:] = 1
        poly = np.rint(np.array(nodes)).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(canvas, [poly], False, 0, 1)
        if len(nodes) == 1:
            cv2.circle(canvas, tuple(int(v) for v in poly[0, 0]), 0, 0, -1)
        dist = cv2.distanceTransform(canvas, cv2.DIST_L2, 3)[ys, xs]
        better = dist < best
        best[better], arg[better] = dist[better], k
    return arg


def straight_ceiling(image: Path, gt_path: Path) -> dict[str, object]:
    """Score the two distance labellings of ``image`` by its ground truth's straight axes."""
    prep = prepare(str(image), Parameters())
    gt = read_label_map(str(gt_path), prep.shape)
    lines = read_initial_lines(str(gt_path), prep, lock=True)
    # Scored as tlseg evaluate scores a label image: the page's ink and every labelled pixel.
    scored = scored_pixels(gt, page_ink(str(image)), False)
    ys, xs = np.nonzero(scored)
    near = nearest_line(np.stack([xs, ys], axis=1).astype(np.float64), lines) + 1
    by_pixel = np.zeros(gt.shape, np.int32)
    by_pixel[ys, xs] = near
    n_comp, comps = cv2.connectedComponents(scored.astype(np.uint8), connectivity=8)
    comp_idx = comps[ys, xs].astype(np.int64)

    def whole(near_line: np.ndarray) -> np.ndarray:
        comp_of, line_of = majority(comp_idx, near_line.astype(np.int64), len(lines) + 1)
        lut = np.zeros(n_comp, np.int64)
        lut[comp_of] = line_of
        out = np.zeros(gt.shape, np.int32)
        out[ys, xs] = lut[comp_idx]
        return out

    curved = np.zeros(gt.shape, np.int32)
    curved[ys, xs] = nearest_polyline(gt, ys, xs, prep.stats.w_cc)
    row: dict[str, object] = {"page": image.stem, "lines": len(lines)}
    for name, pred in (("nearest", by_pixel), ("whole", whole(near)), ("curved", whole(curved[ys, xs]))):
        cm = contest_metric(gt, pred, scored, T_A)
        lm = line_metric(gt, pred, scored, LINE_THRESHOLD)
        row[f"{name}_FM"], row[f"{name}_line_IU"] = cm.fm, lm.line_iu
        row[f"_{name}"] = (cm, lm)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--sets", default="moc-train,ahte-train")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rows = []
    for name in args.sets.split(","):
        folder = args.data / name
        labels = folder / "pixel_label"
        if not labels.is_dir():
            print(f"{name}: no pixel_label folder under {folder}, skipped", file=sys.stderr)
            continue
        scores = []
        for gt_path in sorted(labels.glob("*.png")):
            images = sorted((folder / "images").glob(gt_path.stem + ".*"))
            if not images:
                print(f"{name}/{gt_path.stem}: no image, skipped", file=sys.stderr)
                continue
            row = straight_ceiling(images[0], gt_path)
            row["set"] = name
            print(f"  {name}/{row['page']}: nearest {row['nearest_FM']:.3f} / {row['nearest_line_IU']:.3f}"
                  f"  whole {row['whole_FM']:.3f} / {row['whole_line_IU']:.3f}"
                  f"  curved {row['curved_FM']:.3f} / {row['curved_line_IU']:.3f}  [{row['lines']} lines]", flush=True)
            scores.append(row)
        for kind in ("nearest", "whole", "curved"):
            cm = combine(r[f"_{kind}"][0] for r in scores)
            lm = combine_lines(r[f"_{kind}"][1] for r in scores)
            print(f"{name} ({len(scores)} pages), {kind}: FM / line IU {100 * cm.fm:.1f} / {100 * lm.line_iu:.1f} %")
        rows += scores
    if args.out and rows:
        fields = ["set", "page", "lines", "nearest_FM", "nearest_line_IU", "whole_FM", "whole_line_IU",
                  "curved_FM", "curved_line_IU"]
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
