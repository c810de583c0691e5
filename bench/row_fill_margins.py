"""The margins of ``row_fill`` (engine.row_fill) on every development page.

    python bench/row_fill_margins.py [--sets a,b] [--out CSV]

For each page (default parameters, ``row_fill`` and ``merge_initial_lines`` off, so that the
initial lines are the filter bank's, those ``row_fill`` reads), every region with a row
pitch: the samples further than ``reach`` x the pitch across the text from every initial
line of their region, grouped by the row of the period they fall in; a group of at least
``min_region_samples`` in a row no line runs in is a row that ``row_fill`` gives a line
(engine.row_fill.uncovered_rows). Per page and reach (0.35, 0.5, 0.75, 1.0): ``rows`` the
groups, ``samples`` their samples, ``on_gt`` the share of those samples inside a
ground-truth line (a text row the filter bank missed, where a line helps) and ``gt_lines``
the ground-truth lines holding at least half a group's samples. A page whose rows all have
their lines shows 0 rows at every reach. ``letters_on_gt``: at reach 0.75, each row's share of
samples on letter-sized components (engine.row_fill.letter_sized; ``letters_in_row`` fills a
row from 0.10 with the defaults) and, after the slash, its share on ground-truth lines.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.pitch_margins import truth_of_samples  # noqa: E402
from bench.run_bench import find_sets, write_rows  # noqa: E402
from engine.model import to_region_frame  # noqa: E402
from engine.params import Parameters  # noqa: E402
from engine.pipeline import prepare  # noqa: E402
from engine.row_fill import letter_sized, uncovered_rows  # noqa: E402

REACHES = (0.35, 0.5, 0.75, 1.0)
#: The reach (the default row_fill) at which each row's letters are listed.
LETTERS_REACH = 0.75


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="row_fill_margins.py", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--sets", default="")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    params = Parameters(row_fill=0.0, merge_initial_lines=False)
    rows = []
    for set_name, pages in find_sets(args.data, [s for s in args.sets.split(",") if s] or None).items():
        for image, gt in pages:
            prep = prepare(str(image), params)
            truth = truth_of_samples(image, gt, prep.shape, prep.samples)
            lines = prep.initial_lines
            row = {"set": set_name, "page": image.stem, "h_cc": prep.stats.h_cc}
            heights = prep.sample_heights()
            letters: list[str] = []
            for reach in REACHES:
                n_rows = n_samples = n_gt = 0
                gt_lines = []
                for region, rp in zip(prep.regions, prep.row_pitch, strict=True):
                    members = np.flatnonzero(prep.sample_region == region.index)
                    own = lines.take(np.flatnonzero(lines.region == region.index))
                    uv = to_region_frame(prep.samples[members].astype(np.float64), region.phi)
                    for g in uncovered_rows(uv, own, rp.pitch, rp.phase, reach, params.min_region_samples):
                        t = truth[members[g]]
                        if reach == LETTERS_REACH:
                            share = letter_sized(heights[members[g]], prep.stats.h_cc, params).mean()
                            letters.append(f"{share:.2f}/{np.count_nonzero(t) / len(g):.2f}")
                        n_rows += 1
                        n_samples += len(g)
                        n_gt += int(np.count_nonzero(t))
                        ids, counts = np.unique(t[t > 0], return_counts=True)
                        if len(ids) and counts.max() >= 0.5 * len(g):
                            gt_lines.append(int(ids[np.argmax(counts)]))
                key = f"{reach:g}"
                row[f"rows_{key}"] = n_rows
                row[f"samples_{key}"] = n_samples
                row[f"on_gt_{key}"] = round(n_gt / n_samples, 3) if n_samples else ""
                row[f"gt_lines_{key}"] = len(set(gt_lines))
            row["letters_on_gt"] = " ".join(letters)
            rows.append(row)
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.out:
        write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
