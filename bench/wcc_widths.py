"""Issue 26: the components that set a page's W_cc, widest last, with their ink weight.

    .venv/bin/python bench/wcc_widths.py IMAGE

Prints H_cc / W_cc as stage 2 finds them (plain and ink-weighted chain cut), then every
component over 150 px of ink kept by the ink-weighted cut, sorted by width, with the
cumulative ink share (W_cc is the width where it crosses 0.5).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import components as C  # noqa: E402
from engine.ink import find_ink  # noqa: E402
from engine.io import load_page  # noqa: E402
from engine.params import Parameters  # noqa: E402


def main() -> int:
    found = find_ink(load_page(sys.argv[1]), Parameters())
    boxes = C.boxes_from_stats(found.stats)
    H, W = found.labels.shape
    print("plain", C.component_stats(found.labels, boxes))
    print("ink", C.component_stats(found.labels, boxes, typical_by_ink=True))
    h = (boxes[:, 3] - boxes[:, 1]).astype(float)
    w = (boxes[:, 2] - boxes[:, 0]).astype(float)
    a = boxes[:, 4].astype(float)
    ok = (h < H / 4) & (w < W / 2) & ~C.solid_bars(w, h, a)
    ok &= h <= C.CHAIN_HEIGHTS * C.weighted_median(h[ok], a[ok])
    idx = np.where(ok)[0]
    order = idx[np.argsort(w[idx], kind="stable")]
    cum = np.cumsum(a[order]) / a[order].sum()
    for i, c in zip(order, cum, strict=True):
        if a[i] > 150:
            print(f"x={boxes[i, 0]:5d} y={boxes[i, 1]:5d} w={w[i]:4.0f} h={h[i]:4.0f} "
                  f"ink={a[i]:6.0f} cum={c:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
