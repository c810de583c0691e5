"""Where ground-truth lines are lost: inside a block framed at their angle, inside a block
framed at another angle, or split between blocks.

    .venv/bin/python bench/frame_losses.py [--data ../shared/data] [--sets moc-train] [--jobs 2]
                                           [--params FILE] [--set NAME=VALUE ...] [--pages]
                                           [--lines CSV]

Segments every page of ``--sets`` (one fresh process per page, as ``bench/run_bench.py``) and
scores it as the benchmark does (the DIVA line evaluator's one-to-one match, threshold
0.75). Each ground-truth line with at least :data:`MIN_SAMPLES` of the page's samples on
it is then put in one class, from the block (stage 5-6 region) that holds most of those
samples:

* ``own angle``: that block holds at least :data:`ONE_BLOCK` of them, and its frame lies
  within :data:`FRAME_TOLERANCE` degrees of the line's own axis (the principal axis of its
  ground-truth pixels): a loss here is the lines inside a rightly framed block;
* ``other angle``: the same block share, but the frame lies further off (a side note inside
  a block of the main text at another angle);
* ``mostly one``: the block holds :data:`MOSTLY_ONE` to :data:`ONE_BLOCK` of them;
* ``split``: less (a row cut between blocks, a line round a corner).

Prints, per set, the ground-truth lines and the correct ones of each class, with
``--pages`` per page, and with ``--lines CSV`` one row per ground-truth line (page, label,
samples, share, its angle, the block's frame, class, correct). What each class needs is
different: better blocks for the last three, better lines within blocks for the first.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.angle_errors import principal_axes  # noqa: E402
from bench.run_bench import LINE_THRESHOLD, add_page_options, pages_of_sets  # noqa: E402
from bench.steering import ground_truth  # noqa: E402
from engine.arrays import angle_difference, angle_gap  # noqa: E402
from engine.initial_io import pixel_axes  # noqa: E402

CLASSES = ("own angle", "other angle", "mostly one", "split")
#: A ground-truth line's samples in one block, at least: the line lies in that block.
ONE_BLOCK = 0.95
#: At least this share but under ONE_BLOCK: mostly in one block.
MOSTLY_ONE = 0.80
#: Degrees between a block's frame and a line's axis within which the block is framed at the
#: line's angle (the orientation split's blocks lie 15 degrees apart or more).
FRAME_TOLERANCE = 20.0
#: Samples a ground-truth line needs to be classed (a mark or a dot is not a line).
MIN_SAMPLES = 10


def line_axes(truth: np.ndarray, labels: np.ndarray) -> dict[int, float]:
    """Direction (degrees, image frame: x right, y down, in [-90, 90)) of the principal axis of
    each ground-truth line's pixels in ``truth`` ``(H, W)``, for the ``labels`` asked (their
    second moments as a label image's lines are read, :func:`engine.initial_io.pixel_axes`)."""
    _, moments, _ = pixel_axes(truth, int(truth.max()))
    deg, _ = principal_axes(moments)
    return {int(k): float(angle_difference(deg[k - 1], 0.0)) for k in labels}


def classify_lines(truth: np.ndarray, sample_xy: np.ndarray, sample_region: np.ndarray,
                   region_deg: np.ndarray) -> list[dict[str, Any]]:
    """One record per ground-truth line of ``truth`` with at least :data:`MIN_SAMPLES` samples
    (``sample_xy`` ``(N, 2)`` [x, y] pixels, their block ``sample_region`` ``(N,)``, each
    block's frame ``region_deg`` in degrees): label, samples, share in its main block, the
    line's axis, the block's frame and its class (:data:`CLASSES`)."""
    h, w = truth.shape
    xy = np.rint(sample_xy).astype(np.int64)
    on = truth[np.clip(xy[:, 1], 0, h - 1), np.clip(xy[:, 0], 0, w - 1)]
    labels, counts = np.unique(on[on > 0], return_counts=True)
    labels = labels[counts >= MIN_SAMPLES]
    axes = line_axes(truth, labels)
    out = []
    for label in labels:
        regions = np.bincount(sample_region[on == label])
        block = int(np.argmax(regions))
        share = float(regions[block] / regions.sum())
        axis = axes[int(label)]
        frame = float(region_deg[block])
        if share >= ONE_BLOCK:
            kind = "own angle" if angle_gap(axis, frame) <= FRAME_TOLERANCE else "other angle"
        else:
            kind = "mostly one" if share >= MOSTLY_ONE else "split"
        out.append({"label": int(label), "samples": int(regions.sum()), "share": round(share, 3),
                    "axis": round(axis, 1), "frame": round(frame, 1), "class": kind})
    return out


def run_page(task: tuple[str, str, str, str]) -> dict[str, Any]:
    """Segment one page and class its ground-truth lines (a worker process)."""
    from engine.metric import _line_matches, _table
    from engine.params import Parameters
    from engine.pipeline import segment

    name, image, gt, params_json = task
    prep, _, seg = segment(image, Parameters.from_json(params_json))
    truth, scored = ground_truth(Path(gt), Path(image), None)
    table = _table(truth, seg.labels, scored)
    chosen, correct = _line_matches(table, LINE_THRESHOLD)
    found = set(table.gt_ids[table.pairs[chosen[correct], 0]].tolist())
    region_deg = np.array([np.degrees(r.phi) for r in prep.regions])
    lines = classify_lines(truth, prep.samples, prep.sample_region, region_deg)
    for rec in lines:
        rec["correct"] = rec["label"] in found
    return {"set": name, "page": Path(image).stem, "lines": lines}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="frame_losses.py", description=__doc__.split("\n\n")[0])
    add_page_options(ap)
    ap.add_argument("--pages", action="store_true", help="also one line per page")
    ap.add_argument("--lines", type=Path, default=None, help="CSV of every classed ground-truth line")
    args = ap.parse_args(argv)
    if (done := pages_of_sets("frame_losses", args, run_page)) is None:
        return 2
    sets, pages = done
    rows = []
    for name in sets:
        total: Counter[str] = Counter()
        right: Counter[str] = Counter()
        for page in (p for p in pages if p["set"] == name):
            n = Counter(rec["class"] for rec in page["lines"])
            ok = Counter(rec["class"] for rec in page["lines"] if rec["correct"])
            total.update(n)
            right.update(ok)
            if args.pages:
                print(f"  {page['page']}: " + ", ".join(f"{k} {ok[k]}/{n[k]}" for k in CLASSES if n[k]))
            rows += [{"set": name, "page": page["page"], **rec} for rec in page["lines"]]
        print(f"{name}: {sum(total.values())} ground-truth lines, correct / lines by class: "
              + ", ".join(f"{k} {right[k]}/{total[k]}" for k in CLASSES))
    if args.lines is not None and rows:
        with args.lines.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"frame_losses: wrote {args.lines}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
