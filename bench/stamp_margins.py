"""Issue 26: every colour dev page's other-colour shapes against ``engine.ink.stamp_ink``'s
threshold (``colour_stamps``).

    .venv/bin/python bench/stamp_margins.py [--data DIR] [--sets poilus-dev,cremma20]

Per page: each shape of other-colour ink (pieces less than half a text height apart) measured
as its smallest extent (box height, box width, the short side of its rotated box, each less
the joining margin) in text heights of stage 1's first pass; printed: the largest value at or
under ``ROW_SPAN`` (not a stamp), the smallest over it (a stamp), and how many stamps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import ink as I  # noqa: E402
from engine.io import IMAGE_SUFFIXES, load_page  # noqa: E402
from engine.params import Parameters  # noqa: E402


def shape_sizes(other: np.ndarray, h_text: float) -> np.ndarray:
    reach = max(int(round(h_text / 2)), 1)
    joined = cv2.dilate(other.view(np.uint8), np.ones((2 * reach + 1, 2 * reach + 1), np.uint8))
    n, lab, st, _ = cv2.connectedComponentsWithStats(joined, connectivity=8)
    out = []
    for i in range(1, n):
        x, y, w, h = st[i, :4]
        ys, xs = np.nonzero(lab[y:y + h, x:x + w] == i)
        (_, _), (a, b), _ = cv2.minAreaRect(np.column_stack([xs, ys]).astype(np.float32))
        out.append(min(h, w, min(a, b)) - 2 * reach)
    return np.array(out) / h_text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/shared/data")
    ap.add_argument("--sets", default="poilus-dev,cremma20")
    args = ap.parse_args()
    seen: list[np.ndarray] = []
    real = I.stamp_ink

    def spy(other: np.ndarray, h_text: float) -> np.ndarray:
        seen.append(shape_sizes(other, h_text) if other.any() else np.zeros(0))
        return real(other, h_text)

    I.stamp_ink = spy
    for name in args.sets.split(","):
        for path in sorted(p for p in (Path(args.data) / name).rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES):
            page = load_page(path)
            if page.colour is None:
                continue
            seen.clear()
            I.find_ink(page, Parameters(colour_stamps=True))
            r = seen[0] if seen else np.zeros(0)
            below, above = r[r <= I.ROW_SPAN], r[r > I.ROW_SPAN]
            print(f"{name}/{path.stem}: under {below.max() if len(below) else float('nan'):.2f}, "
                  f"over {above.min() if len(above) else float('nan'):.2f}, stamps {len(above)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
