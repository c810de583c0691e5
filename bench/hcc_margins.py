"""Issue 26: every dev page's H_cc against its rows, for ``Parameters.max_pitch_hcc``.

    .venv/bin/python bench/hcc_margins.py [--data DIR] [--sets a,b] [--out CSV]

Per page: H_cc and W_cc as stage 2 finds them (chain cut at 2.5 x the plain median
component height), the plain median, the share of the ink the chain cut leaves out, the
ink-weighted alternative (``component_stats(typical_by_ink=True)``), the page's row pitch
measured at that size (``engine.pitch.page_rows``), pitch / H_cc (the check's quantity) and
the H_cc / W_cc kept with the check at the default. Sorted by pitch / H_cc at the end.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from run_bench import DEFAULT_DATA, find_sets, write_rows  # noqa: E402

from engine import components as C  # noqa: E402
from engine import sampling  # noqa: E402
from engine.ink import find_ink  # noqa: E402
from engine.io import load_page  # noqa: E402
from engine.params import Parameters  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default="")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    params = Parameters()
    sets = find_sets(args.data, [s for s in args.sets.split(",") if s] or None)
    rows = []
    for name, pages in sets.items():
        for image, _gt in pages:
            page = load_page(image)
            found = find_ink(page, params)
            boxes = C.boxes_from_stats(found.stats)
            stats = C.component_stats(found.labels, boxes)
            alt = C.component_stats(found.labels, boxes, typical_by_ink=True)
            h = (boxes[:, 3] - boxes[:, 1]).astype(float)
            w = (boxes[:, 2] - boxes[:, 0]).astype(float)
            area = boxes[:, 4].astype(float)
            H, W = found.labels.shape
            ok = (h < H / 4) & (w < W / 2) & ~C.solid_bars(w, h, area)
            typical = float(np.median(h[ok])) if ok.any() else math.nan
            cut = ok & (h > C.CHAIN_HEIGHTS * typical)
            samples, _ = sampling.sample_ink_pixels(found.labels, params.sample_ratio, params.seed, found.ink)
            kept, pitch = C.row_checked_stats(stats, found.labels, boxes, samples, params.max_pitch_hcc)
            row = {"set": name, "page": image.stem, "h_cc": stats.h_cc, "w_cc": stats.w_cc,
                   "plain_median": typical, "ink_cut": round(float(area[cut].sum() / max(area[ok].sum(), 1)), 3),
                   "h_cc_ink": alt.h_cc, "w_cc_ink": alt.w_cc, "pitch_px": round(pitch, 1),
                   "pitch_hcc": round(pitch / stats.h_cc, 2) if math.isfinite(pitch) else math.nan,
                   "h_cc_kept": kept.h_cc, "w_cc_kept": kept.w_cc}
            rows.append(row)
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    finite = sorted((r for r in rows if math.isfinite(r["pitch_hcc"])), key=lambda r: r["pitch_hcc"])
    print(f"pitch / H_cc: {len(finite)} of {len(rows)} pages show rows; highest:")
    for r in finite[-4:]:
        print(f"  {r['set']} {r['page']}: {r['pitch_hcc']} (threshold {params.max_pitch_hcc})")
    if args.out:
        write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
