"""H_cc as computed against H_cc with the chain cut's typical height counted in stroke widths.

``engine.components.component_stats`` leaves out components taller than ``CHAIN_HEIGHTS`` x
the typical (plain median) component height; the plain median counts small pieces, whose
number does not follow the scan's resolution. This measures, per page, the H_cc the engine
computes and the H_cc when the typical height counts only components at least ``--strokes``
stroke widths tall (stroke width = 2 x ink area / ink boundary length). Not a test and not
timed; docs/history.md (2026-11-29, session 46) has what it showed.

    .venv/bin/python bench/hcc_stroke_cut.py PAGE [PAGE ...] [--strokes 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine import components as C  # noqa: E402
from engine import ink as _ink  # noqa: E402
from engine import io as _io  # noqa: E402
from engine.params import Parameters  # noqa: E402


def stroke_width(ink: np.ndarray) -> float:
    """Mean stroke width (pixels) of a bool ink mask: twice its area over its boundary's length."""
    u8 = ink.view(np.uint8)
    boundary = np.count_nonzero(u8 > cv2.erode(u8, np.ones((3, 3), np.uint8)))
    return 2.0 * np.count_nonzero(ink) / max(boundary, 1)


def h_cc_with_stroke_cut(components: np.ndarray, boxes: np.ndarray, min_height: float) -> float:
    """``component_stats``'s H_cc with the typical height over components >= ``min_height``."""
    h, w = components.shape
    heights = (boxes[:, 3] - boxes[:, 1]).astype(float)
    widths = (boxes[:, 2] - boxes[:, 0]).astype(float)
    area = boxes[:, 4].astype(float)
    ok = (heights < h / 4) & (widths < w / 2) & ~C.solid_bars(widths, heights, area)
    tall = ok & (heights >= min_height)
    typical = float(np.median(heights[tall] if tall.any() else heights[ok]))
    ok &= heights <= C.CHAIN_HEIGHTS * typical
    return C.weighted_median(heights[ok], area[ok])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--strokes", type=float, default=2.0, help="least height in stroke widths")
    args = ap.parse_args(argv)
    params = Parameters()
    for path in args.pages:
        found = _ink.find_ink(_io.load_page(path), params)
        boxes = C.boxes_from_stats(found.stats)
        now = C.component_stats(found.labels, boxes).h_cc
        sw = stroke_width(found.ink)
        cut = h_cc_with_stroke_cut(found.labels, boxes, args.strokes * sw)
        print(json.dumps({"page": Path(path).name, "h_cc": now, "h_cc_stroke_cut": cut,
                          "stroke_width": round(sw, 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
