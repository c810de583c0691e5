"""Where a label-image ground truth cuts the page's strokes: the engine's components that the
ground truth gives to several lines, and whether its own ink already separates them there.

    .venv/bin/python bench/gt_junctions.py [--data DIR] [--sets ahte-train,moc-train] [--jobs 2]

Per page (pixel-labelled sets only: the ``pixel_label/`` images): the engine's ink pixels the
ground truth leaves unlabelled and the labelled pixels outside the engine's ink; the engine's
components whose ground-truth pixels belong to more than one line (``split``); of those, the
ones that hold more than one connected component (8-connected) of the ground truth's own
labelled pixels (``apart``: the annotators removed the pixels where two lines' strokes touch,
so the ground truth's ink is the page's ink less those junctions); and the ground truth's own
components that hold pixels of several lines (``gt touching``: strokes the ground truth keeps
touching and still splits). Prepared with the default parameters, no EM (stages 1-4 only).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import DEFAULT_DATA, find_pages  # noqa: E402


def page_junctions(task: tuple[str, str, str]) -> dict:
    """One page's counts (see the module's docstring)."""
    set_name, image, gt = task
    import numpy as np
    from scipy import ndimage

    from bench.steering import ground_truth
    from engine import pipeline
    from engine.params import Parameters

    prep = pipeline.prepare(image, Parameters())
    truth, _ = ground_truth(Path(gt), Path(image), prep.shape)
    comps = prep.components
    ink, labelled = comps > 0, truth > 0
    gt_comp, n_gt = ndimage.label(labelled, structure=np.ones((3, 3), bool))

    def distinct(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
        """How many distinct values of ``b`` each value of ``a`` (0..n) meets."""
        pairs = np.unique(np.stack([a, b]), axis=1)
        return np.bincount(pairs[0], minlength=n + 1)

    both = ink & labelled
    n_comp = int(comps.max())
    lines_of = distinct(comps[both], truth[both], n_comp)
    parts_of = distinct(comps[both], gt_comp[both], n_comp)
    split = lines_of[1:] > 1
    apart = split & (parts_of[1:] > 1)
    gt_lines_of = distinct(gt_comp[labelled], truth[labelled], n_gt)
    return {"set": set_name, "page": Path(image).stem, "ink": int(ink.sum()),
            "ink_unlabelled": int((ink & ~labelled).sum()), "labelled_not_ink": int((labelled & ~ink).sum()),
            "components": n_comp, "split": int(split.sum()), "apart": int(apart.sum()),
            "gt_components": int(n_gt), "gt_touching": int((gt_lines_of[1:] > 1).sum())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gt_junctions.py", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default="ahte-train,moc-train")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    tasks = []
    for name in args.sets.split(","):
        set_dir = args.data / name
        if not (set_dir / "pixel_label").is_dir():
            print(f"gt_junctions: {set_dir} has no pixel_label/ folder (label-image sets only)", file=sys.stderr)
            return 2
        tasks += [(name, str(image), str(gt)) for image, gt in find_pages(set_dir)]
    if args.jobs > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(args.jobs, maxtasksperchild=1) as pool:
            rows = pool.map(page_junctions, tasks)
    else:
        rows = [page_junctions(t) for t in tasks]
    keys = ["ink", "ink_unlabelled", "labelled_not_ink", "components", "split", "apart", "gt_components",
            "gt_touching"]
    print("set page " + " ".join(keys))
    totals: dict[str, dict[str, int]] = {}
    for r in rows:
        print(r["set"], r["page"], " ".join(str(r[k]) for k in keys))
        t = totals.setdefault(r["set"], dict.fromkeys(keys, 0))
        for k in keys:
            t[k] += r[k]
    for name, t in totals.items():
        print(name, "TOTAL", " ".join(str(t[k]) for k in keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
