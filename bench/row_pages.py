"""Write the synthetic pages of issue 26's failures, with ground truth the window can score.

    .venv/bin/python bench/row_pages.py OUTDIR [--seed 0]
    .venv/bin/tlgui --gt OUTDIR/dense_rows_gt.png OUTDIR/dense_rows.png

Writes ``wide_words.png`` (rows of large cursive with word gaps of about 4 H_cc: failure 1,
rows split into words) and ``dense_rows.png`` (15 rows of small writing at a pitch of about
2 H_cc: failure 2, dense rows mixed) from ``tests/synthetic.py``, each with ``<kind>_gt.png``,
a 16-bit label image.

The generator's labels mark the strokes it drew; the image blurs them, and ``tlseg evaluate``
and the window score a label-image ground truth on the page's Otsu ink *and* the labelled
pixels. On ``dense_rows`` (small letters) a fifth of that ink lies just outside the labels,
counts for no line, and sinks every match below T_a = 0.95 even when each row is found whole
(FM 0 for labels that score 1.0 on the generator's own ink). The ground truth written here
gives each ink pixel the label of the nearest labelled stroke pixel, so the scores in the
window and on the command line are those the tests compute.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
from scipy import ndimage as ndi

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from synthetic import ROW_KINDS, make_page, save_page  # noqa: E402

from engine.evaluate import page_ink  # noqa: E402


def labels_on_page_ink(labels: np.ndarray, image_path: Path) -> np.ndarray:
    """Labels ``(h, w)`` spread to every Otsu ink pixel of the image: each takes the label of
    its nearest labelled pixel (uint16, 0 off the ink)."""
    ink = page_ink(image_path) | (labels > 0)
    rows, cols = ndi.distance_transform_edt(labels == 0, return_distances=False, return_indices=True)
    return np.where(ink, labels[rows, cols], 0).astype(np.uint16)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="row_pages.py", description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="folder to write the pages into")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for kind in ROW_KINDS:
        page = make_page(kind, seed=args.seed)
        image_path, labels_path = save_page(page, args.out)
        labels_path.unlink()
        gt = labels_on_page_ink(page.labels, image_path)
        gt_path = args.out / f"{kind}_gt.png"
        if not cv2.imwrite(str(gt_path), gt):
            raise OSError(f"could not write {gt_path}")
        print(f"{image_path}  {gt_path}  ({int(page.labels.max())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
