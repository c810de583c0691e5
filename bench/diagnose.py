"""Look at one page the way the method sees it: its ink, regions, lines and the ground truth.

    python bench/diagnose.py PAGE [GT] [-o OUT.png] [--set NAME=VALUE ...] [--height 1400]

Writes a side-by-side PNG (left: the ink mask with the page area's outline and the text
regions' boxes; right: the final labels in colour, the ground-truth polygons' outlines in
black, the regression lines in red) and prints the preparation's figures (page area, H_cc,
line pitch, samples, regions, lines) and, with ground truth, each ground-truth line's best
match score. For the worst pages of a benchmark run: open the PNG, name the cause.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine.cli import parse_set  # noqa: E402
from engine.evaluate import polygon_label_map, polygon_truth_on_ink  # noqa: E402
from engine.export import colour_labels, write_png  # noqa: E402
from engine.groundtruth import read_label_map  # noqa: E402
from engine.metric import contest_metric  # noqa: E402
from engine.params import Parameters  # noqa: E402
from engine.pipeline import segment  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("page")
    ap.add_argument("gt", nargs="?")
    ap.add_argument("-o", "--out", default=None)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--height", type=int, default=1400)
    args = ap.parse_args(argv)
    params = Parameters().replace(**parse_set(args.set))
    prep, snap, seg = segment(args.page, params)
    h, w = prep.shape
    print(f"page {w} x {h}; H_cc {prep.stats.h_cc:.1f} px, W_cc {prep.stats.w_cc:.1f} px; "
          f"samples {len(prep.samples)}, edges {len(prep.edges)}; regions {len(prep.regions)}; "
          f"initial lines {len(prep.initial_lines)}, final lines {len(seg.lines)}")
    for key in ("page_area", "line_pitch", "non_text"):
        if hasattr(prep, key) and getattr(prep, key) is not None:
            value = getattr(prep, key)
            print(f"  {key}: {value if np.ndim(value) < 2 else np.shape(value)}")
    left = np.where(prep.ink, 0, 255).astype(np.uint8)
    left = np.dstack([left] * 3)
    non_text = getattr(prep, "non_text", None)
    if non_text is not None and np.shape(non_text) == (h, w):
        left[non_text] = (255, 150, 0)
    for r in prep.regions:
        x0, y0, x1, y1 = r.bbox
        cv2.rectangle(left, (x0, y0), (x1 - 1, y1 - 1), (0, 120, 255), max(2, h // 600))
    area = getattr(prep, "page_area", None)
    if area is not None and np.shape(area) == (h, w):
        contours, _ = cv2.findContours(area.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        cv2.drawContours(left, contours, -1, (0, 200, 0), max(3, h // 400))
    right = colour_labels(seg.labels)
    right[seg.labels == 0] = (prep.gray[seg.labels == 0] // 2 + 127)[:, None]
    if args.gt:
        if args.gt.lower().endswith(".xml"):
            filled = polygon_label_map(args.gt, args.page, (h, w))
            gt, ink = polygon_truth_on_ink(args.gt, args.page)
            score = contest_metric(gt, seg.labels, gt > 0, 0.95)
            print(f"FM {score.fm:.3f} (N {score.n}, M {score.m}, o2o {score.o2o})")
        else:
            filled = read_label_map(args.gt, (h, w))
        edges = cv2.morphologyEx((filled > 0).astype(np.uint8), cv2.MORPH_GRADIENT,
                                 np.ones((3, 3), np.uint8)) > 0
        edges |= cv2.morphologyEx(filled.astype(np.float32), cv2.MORPH_GRADIENT,
                                  np.ones((3, 3), np.uint8)) > 0
        edges = cv2.dilate(edges.astype(np.uint8), np.ones((max(2, h // 800),) * 2, np.uint8)) > 0
        right[edges] = 0
    for seg_pts in seg.lines.segments():
        p, q = np.rint(seg_pts).astype(int)
        cv2.line(right, tuple(p), tuple(q), (255, 0, 0), max(2, h // 700))
    both = np.concatenate([left, right], axis=1)
    scale = args.height / h
    both = cv2.resize(both, (int(both.shape[1] * scale), args.height), interpolation=cv2.INTER_AREA)
    out = Path(args.out or f"/tmp/diag-{Path(args.page).stem}.png")
    write_png(out, both)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
