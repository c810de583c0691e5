"""Look at one page the way the method sees it: its ink, regions, lines and the ground truth.

    python bench/diagnose.py PAGE [GT] [-o OUT.png] [--set NAME=VALUE ...] [--height 1400]
                             [--initial-lines FILE [--lock]]

Writes a side-by-side PNG (left: the ink mask with the page area's outline and the text
regions' boxes; right: the final labels in colour, the ground-truth polygons' outlines in
black, the regression lines in red) and prints the preparation's figures (page area, H_cc,
line pitch, samples, regions, lines) and, with ground truth, each ground-truth line's best
match score. For the worst pages of a benchmark run: open the PNG, name the cause.

``--initial-lines FILE [--lock]`` starts EM from a file's lines (``--initial-lines GT --lock``:
the ground truth's lines locked, as ``bench/steering.py`` (d)); with ground truth it then
also says where the wrong ink is: on components the ground truth splits between lines, on
diacritic-sized ones, on others; and on components whose samples EM gave to another line
than the ground truth's, or that stage 8 moved; and, of the components the ground truth keeps
on one line, how much stage 8 split between lines and how much lies on components none of
whose samples EM put on the ground truth's line.
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


def where_the_wrong_ink_is(prep, seg, gt: np.ndarray, scored: np.ndarray) -> None:
    """Print each ground-truth line's best match and where the ink labelled with another
    line than its ground truth's lies (pixels)."""
    pred = seg.labels
    on = scored & (gt > 0)
    conf = np.zeros((int(gt.max()) + 1, int(pred.max()) + 1), np.int64)
    np.add.at(conf, (gt[on], pred[on]), 1)
    best = conf[1:].argmax(axis=1)
    wrong = on & (pred != best[np.maximum(gt, 1) - 1])
    comps = prep.components
    c = comps[wrong]
    gt_lines_of = np.zeros(int(comps.max()) + 1, np.int64)
    pairs = np.unique(np.stack([comps[on & (comps > 0)], gt[on & (comps > 0)]]), axis=1)
    np.add.at(gt_lines_of, pairs[0], 1)
    small = prep.component_heights < prep.params.diacritic_height * prep.stats.h_cc
    xy = np.rint(prep.samples).astype(int)
    s_gt = gt[xy[:, 1], xy[:, 0]]
    line_of_pred = np.full(int(pred.max()) + 2, -1)
    line_of_pred[best] = np.arange(1, len(best) + 1)
    s_right = (seg.sample_labels >= 0) & (line_of_pred[np.maximum(seg.sample_labels, 0) + 1] == s_gt)
    n = np.bincount(prep.sample_component, minlength=len(gt_lines_of))
    right = np.bincount(prep.sample_component, weights=s_right, minlength=len(gt_lines_of)) / np.maximum(n, 1)
    print(f"wrong ink: {int(wrong.sum())} of {int(on.sum())} pixels; not the engine's ink {int((c == 0).sum())}, "
          f"unlabelled {int((pred[wrong] == 0).sum())}; on components the ground truth splits "
          f"{int(((c > 0) & (gt_lines_of[c] > 1)).sum())}, diacritic-sized {int(((c > 0) & small[c]).sum())}; "
          f"samples on another line (EM) {int(((c > 0) & (n[c] > 0) & (right[c] < 0.5)).sum())}, "
          f"samples right, pixels moved (stage 8) {int(((c > 0) & (right[c] >= 0.5)).sum())}")
    # The same wrong ink by what stage 8 did with its component, where the ground truth keeps
    # the component on one line: split it between lines (a stroke reaching into another
    # line's core), or gave it whole to a line none of its samples was on in the ground
    # truth's terms (EM put every sample on another line: marks between two rows).
    n_comp = len(gt_lines_of)
    on_c = on & (comps > 0)
    cp, gp, pp = comps[on_c], gt[on_c], pred[on_c]
    pairs = np.unique(np.stack([cp, pp]), axis=1)
    pred_lines_of = np.bincount(pairs[0], minlength=n_comp)
    gt_line_of = np.zeros(n_comp, np.int64)
    gt_line_of[cp] = gp  # one ground-truth line where gt_lines_of == 1
    s_gt_line = line_of_pred[np.maximum(seg.sample_labels, 0) + 1]
    s_gt_line[seg.sample_labels < 0] = -1
    has_gt_line = np.zeros(n_comp, bool)
    hit = s_gt_line == gt_line_of[prep.sample_component]
    has_gt_line[prep.sample_component[hit]] = True
    whole = (c > 0) & (gt_lines_of[c] == 1)
    print(f"  on components the ground truth keeps on one line: {int(whole.sum())}; of it split between "
          f"lines by stage 8 {int((whole & (pred_lines_of[c] > 1)).sum())}, on components none of whose "
          f"samples EM put on the ground truth's line {int((whole & (n[c] > 0) & ~has_gt_line[c]).sum())}")
    inter = conf[np.arange(1, len(best) + 1), best]
    size = conf[1:].sum(axis=1) + np.array([(pred[scored] == b).sum() for b in best]) - inter
    scores = inter / np.maximum(size, 1)
    print("lines under 0.95: " + ", ".join(f"{k + 1} ({scores[k]:.3f})" for k in np.flatnonzero(scores < 0.95)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("page")
    ap.add_argument("gt", nargs="?")
    ap.add_argument("-o", "--out", default=None)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--height", type=int, default=1400)
    ap.add_argument("--initial-lines", metavar="FILE", help="start EM from these lines (engine.initial_io)")
    ap.add_argument("--lock", action="store_true", help="lock the lines of --initial-lines")
    args = ap.parse_args(argv)
    params = Parameters().replace(**parse_set(args.set))
    start = None
    if args.initial_lines:
        from functools import partial

        from engine.initial_io import read_initial_lines
        start = partial(read_initial_lines, args.initial_lines, lock=args.lock)
    prep, snap, seg = segment(args.page, params, initial_lines=start)
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
            scored = gt > 0
        else:
            filled = read_label_map(args.gt, (h, w))
            gt, scored = filled, (filled > 0) | prep.ink
        score = contest_metric(gt, seg.labels, scored, 0.95)
        print(f"FM {score.fm:.3f} (N {score.n}, M {score.m}, o2o {score.o2o})")
        where_the_wrong_ink_is(prep, seg, gt, scored)
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
