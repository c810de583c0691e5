"""Why ground-truth lines are missed: merged with others, or split among result lines.

    .venv/bin/tlseg segment PAGES... -o OUT -j 2
    .venv/bin/python bench/missed_lines.py OUT [--data ../shared/data] [--sets moc-train] [--pages]
                                           [--maps DIR]

Reads each result (``OUT/<stem>.labels.png``) of the dev pages of ``--sets`` and scores it as
``bench/run_bench.py`` does (the DIVA line evaluator's one-to-one match, threshold 0.75,
``engine.metric``'s own).
Every ground-truth line is then one of:

* ``ok``: its partner holds at least 75 % of it and is at least 75 % its pixels;
* ``merged``: one result line holds at least 75 % of it, but that line also holds at least a
  quarter of another ground-truth line (under-segmentation: too few lines, or a line across
  two rows);
* ``merged_other``: one result line holds at least 75 % of it, with no other ground-truth
  line's quarter (the line's extra pixels are ink outside every ground-truth line);
* ``split``: no result line holds 75 % of it (over-segmentation, or lines crossing it).

Prints per set the count and median size (scored pixels) of each kind, and with ``--pages``
per page. With ``--maps DIR``, one PNG per page (``DIR/<stem>.kinds.png``, at most 1400 px
high): each ground-truth line's scored pixels in the colour of its kind (ok green, merged
red, merged_other magenta, split blue), to see where on the page the lines are lost. The
result folder may hold other pages; those of ``--sets`` without a result are
listed as missing and not counted.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import DEFAULT_DATA, LINE_THRESHOLD, find_sets  # noqa: E402
from bench.steering import ground_truth  # noqa: E402
from engine import groundtruth  # noqa: E402
from engine.metric import _line_matches, _table  # noqa: E402

KINDS = ("ok", "merged", "merged_other", "split")
#: BGR colour of each kind in the ``--maps`` images.
KIND_COLOURS = {"ok": (0, 160, 0), "merged": (0, 0, 230), "merged_other": (200, 0, 200), "split": (230, 110, 0)}
#: Height (pixels) the ``--maps`` images are scaled down to.
MAP_HEIGHT = 1400


def classify(truth: np.ndarray, result: np.ndarray, scored: np.ndarray,
             threshold: float = LINE_THRESHOLD) -> list[tuple[str, int, int]]:
    """(kind, scored pixels, label in ``truth``) of each ground-truth line of one page (kinds
    as in the module docstring)."""
    t = _table(truth, result, scored)
    gi, ri = t.pairs[:, 0], t.pairs[:, 1]
    chosen, is_correct = _line_matches(t, threshold)
    correct = {int(g) for g in gi[chosen[is_correct]]}
    # Ground-truth lines of which a result line holds at least a quarter, per result line.
    holds = np.bincount(ri[t.inter >= 0.25 * t.gt_size[gi]], minlength=t.pred_size.size)
    out = []
    for g, size in enumerate(t.gt_size):
        mine = gi == g
        if g in correct:
            kind = "ok"
        elif not mine.any():
            kind = "split"
        else:
            k = int(np.argmax(np.where(mine, t.inter, -1)))
            if t.inter[k] < threshold * size:
                kind = "split"
            else:
                kind = "merged" if holds[ri[k]] >= 2 else "merged_other"
        out.append((kind, int(size), int(t.gt_ids[g])))
    return out


def kind_map(truth: np.ndarray, scored: np.ndarray, kinds: list[tuple[str, int, int]]) -> np.ndarray:
    """BGR image ``(H, W, 3)`` uint8 of one page: white, with each ground-truth line's scored
    pixels in the colour of its kind (``kinds`` as :func:`classify` returns them), scaled
    down to at most :data:`MAP_HEIGHT` rows."""
    colour = np.full((int(truth.max()) + 1, 3), 255, np.uint8)
    for kind, _, label in kinds:
        colour[label] = KIND_COLOURS[kind]
    out = colour[np.where(scored, truth, 0)]
    scale = min(1.0, MAP_HEIGHT / out.shape[0])
    return cv2.resize(out, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) if scale < 1 else out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="folder of tlseg outputs (<stem>.labels.png)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default=None, help="comma-separated sets (default: all)")
    ap.add_argument("--pages", action="store_true", help="also one line per page")
    ap.add_argument("--maps", type=Path, default=None,
                    help="folder for one PNG per page: the ground-truth lines coloured by kind")
    args = ap.parse_args(argv)
    sets = find_sets(args.data, args.sets.split(",") if args.sets else None)
    for name, pages in sets.items():
        kinds: list[tuple[str, int, int]] = []
        missing = []
        for image, gt in pages:
            labels = args.results / f"{image.stem}.labels.png"
            if not labels.exists():
                missing.append(image.stem)
                continue
            truth, scored = ground_truth(gt, image, None)
            result = groundtruth.read_label_map(labels, truth.shape, what="result")
            page = classify(truth, result, scored)
            kinds += page
            if args.maps is not None:
                args.maps.mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(args.maps / f"{image.stem}.kinds.png"), kind_map(truth, scored, page))
            if args.pages:
                c = Counter(k for k, _, _ in page)
                print(f"  {image.stem}: " + ", ".join(f"{k} {c[k]}" for k in KINDS if c[k]))
        if not kinds:
            print(f"{name}: no results in {args.results}")
            continue
        sizes = np.array([s for _, s, _ in kinds])
        parts = []
        for kind in KINDS:
            s = sizes[[k == kind for k, _, _ in kinds]]
            if len(s):
                parts.append(f"{kind} {len(s)} (median {np.median(s):.0f} px)")
        print(f"{name}: {len(kinds)} ground-truth lines of {len(pages) - len(missing)} pages: " + ", ".join(parts))
        if missing:
            print(f"  no result for {len(missing)} page(s): {', '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
