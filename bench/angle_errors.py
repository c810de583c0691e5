"""How far each ground-truth line's direction lies from its result line's, and from that
line's block frame, with whether the line was found.

    .venv/bin/python bench/angle_errors.py [--data DIR] [--sets a,b] [--jobs N] [--set NAME=VALUE]
                                           [--csv OUT.csv]

For every ground-truth line of at least ``MIN_PIXELS`` scored pixels that is elongated (its
pixels spread ``MIN_ELONGATION`` times further along their principal axis than across it;
a lone word or mark has no direction to speak of): its direction (the principal axis of its
scored pixels, degrees in [0, 180), x right, y down, clockwise positive, as the engine's
frames), the result line holding most of those pixels, and the gaps (degrees, 0-90) from
that line's direction and from its region's frame angle. Scored as ``bench/run_bench.py``
scores a page (line threshold 0.75). Prints, per set, the lines and the correct ones in bins
of the gap, and how many of the lines 5 degrees or more off sit in a frame 5 degrees or
more off too: a frame that is off is the block's orientation's fault, a frame that is right
with its line off is the line's (a curved or fanned row a straight line cannot follow).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import LINE_THRESHOLD, page_tool  # noqa: E402
from bench.steering import ground_truth  # noqa: E402
from engine.arrays import angle_gap, principal_axis  # noqa: E402
from engine.initial_io import pixel_axes, point_moments  # noqa: E402

#: Ground-truth lines with fewer scored pixels are left out.
MIN_PIXELS = 50
#: ... and so are those whose pixels spread less than this many times further along their
#: principal axis than across it (standard deviations).
MIN_ELONGATION = 3.0
#: The gap bins (degrees) of the table: [0, 5), [5, 10), [10, 20), [20, 45), [45, 90].
BINS = (0.0, 5.0, 10.0, 20.0, 45.0)
#: A gap at least this large (degrees) counts as off, for lines and for frames.
OFF = 5.0


def principal_axes(moments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Direction (degrees in [0, 180), x right, y down) of the principal axis of each set of
    second moments ``(n, 3)`` [Sxx, Sxy, Syy] (:func:`engine.initial_io.point_moments`) and its
    elongation ``(n,)`` (standard deviation along over across)."""
    beta, major, minor = principal_axis(*np.asarray(moments, np.float64).T)
    return np.degrees(beta) % 180.0, np.sqrt(major / np.maximum(minor, 1e-12))


def axis_angle(xs: np.ndarray, ys: np.ndarray) -> tuple[float, float]:
    """:func:`principal_axes` of the points ``(xs, ys)`` ``(n,)``: their direction and elongation."""
    _, moments, _ = point_moments(np.ones(len(xs), np.int64), np.asarray(xs), np.asarray(ys), 1)
    angle, elongation = principal_axes(moments)
    return float(angle[0]), float(elongation[0])


def line_angles(image: str, gt: str, params_json: str) -> list[dict[str, Any]]:
    """One page: a row per elongated ground-truth line (see the module's docstring) with its
    ``gt`` id, ``pixels``, ``gt_angle``, ``line_gap`` and ``frame_gap`` (degrees; NaN when no
    result line holds its pixels) and ``correct`` (matched at the line threshold)."""
    from engine import metric
    from engine.params import Parameters
    from engine.pipeline import segment

    params = Parameters.from_json(params_json)
    _, _, seg = segment(image, params)
    truth, scored = ground_truth(Path(gt), Path(image), seg.labels.shape)
    table = metric._table(truth, seg.labels, scored)
    chosen, correct = metric._line_matches(table, LINE_THRESHOLD)
    found = set(table.gt_ids[table.pairs[chosen[correct], 0]].tolist())
    segments = seg.lines.segments()
    direction = np.degrees(np.arctan2(segments[:, 1, 1] - segments[:, 0, 1],
                                      segments[:, 1, 0] - segments[:, 0, 0])) % 180.0
    frame = np.degrees(seg.lines.phi) % 180.0
    # Each ground-truth line's scored pixels, as a label image's lines are read.
    _, moments, pixels = pixel_axes(np.where(scored, truth, 0), int(truth.max()))
    gt_angle, elongation = principal_axes(moments)
    rows = []
    for gi, g in enumerate(table.gt_ids):
        if pixels[g - 1] < MIN_PIXELS or elongation[g - 1] < MIN_ELONGATION:
            continue
        angle = float(gt_angle[g - 1])
        mine = np.flatnonzero(table.pairs[:, 0] == gi)
        line_gap = frame_gap = float("nan")
        if len(mine):
            k = int(table.pred_ids[table.pairs[mine[np.argmax(table.inter[mine])], 1]]) - 1
            line_gap, frame_gap = float(angle_gap(angle, direction[k])), float(angle_gap(angle, frame[k]))
        rows.append({"gt": int(g), "pixels": int(pixels[g - 1]), "gt_angle": round(angle, 1),
                     "line_gap": round(line_gap, 1), "frame_gap": round(frame_gap, 1),
                     "correct": int(g) in found})
    return rows


def run_page(task: tuple[str, str, str, str]) -> dict[str, Any]:
    """A worker's page: the set's name, the page's stem and :func:`line_angles`."""
    name, image, gt, params_json = task
    return {"set": name, "page": Path(image).stem, "lines": line_angles(image, gt, params_json)}


def gap_table(lines: list[dict[str, Any]]) -> tuple[list[tuple[int, int]], int, int]:
    """Per bin of :data:`BINS`, the lines and the correct ones (a line no result line holds
    counts in the last bin); then the lines :data:`OFF` or more off and, of them, those whose
    frame is that far off too."""
    cells = [[0, 0] for _ in BINS]
    off = off_frame = 0
    for row in lines:
        gap = row["line_gap"] if np.isfinite(row["line_gap"]) else 90.0
        b = int(np.searchsorted(BINS, gap, side="right")) - 1
        cells[b][0] += 1
        cells[b][1] += int(row["correct"])
        if gap >= OFF:
            off += 1
            off_frame += int(np.isfinite(row["frame_gap"]) and row["frame_gap"] >= OFF)
    return [(n, c) for n, c in cells], off, off_frame


def main(argv: list[str] | None = None) -> int:
    if (done := page_tool("angle_errors", __doc__, argv, run_page, "one row per ground-truth line")) is None:
        return 2
    args, sets, pages = done
    labels = [f"{lo:g}-{hi:g}" for lo, hi in zip(BINS, BINS[1:] + (90.0,), strict=True)]
    print("set            lines  " + "  ".join(f"{lab + ' deg':>12}" for lab in labels)
          + f"   >= {OFF:g} deg: lines, frame off too   (lines / correct per bin)")
    for name in sets:
        lines = [row for p in pages if p["set"] == name for row in p["lines"]]
        cells, off, off_frame = gap_table(lines)
        print(f"{name:<14} {len(lines):>5}  " + "  ".join(f"{n:>5} / {c:<4}" for n, c in cells)
              + f"   {off:>5}, {off_frame:>5}")
    if args.csv is not None and pages:
        with args.csv.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["set", "page", "gt", "pixels", "gt_angle", "line_gap", "frame_gap", "correct"])
            for p in pages:
                for row in p["lines"]:
                    writer.writerow([p["set"], p["page"], row["gt"], row["pixels"], row["gt_angle"],
                                     row["line_gap"], row["frame_gap"], int(row["correct"])])
        print(f"angle_errors: wrote {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
