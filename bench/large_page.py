"""Peak memory of ``tlseg segment`` on a large generated page of handwriting-like text.

    .venv/bin/python bench/large_page.py --size 13000x13000            # 169 Mpx
    .venv/bin/python bench/large_page.py --size 9900x9900 --keep /tmp  # 98 Mpx, keep page and outputs

The page is a grid of synthetic handwritten paragraphs (``tests/synthetic.py``, ``straight``
kind at scale 3: x-height ~35 px, 9 lines per paragraph, 2700 x 2100 px each) on grey paper,
written as an 8-bit PNG.  ``tlseg segment PAGE -o OUT -j 1`` then runs under
``/usr/bin/time -v`` and the script prints its exit status, wall seconds, the peak resident
set ("Maximum resident set size") in MB and that peak per megapixel, and tlseg's last line.
Not part of the test suite (it needs several GB and a minute or more).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def generate(path: Path, width: int, height: int, paper: int = 250) -> int:
    """Write the page; returns the number of text lines on it."""
    from synthetic import make_page

    canvas = np.full((height, width), paper, np.uint8)
    tile_h, tile_w = make_page("straight", seed=0, scale=3.0).image.shape
    margin_y, margin_x = max(0, (height % tile_h) // 2), max(0, (width % tile_w) // 2)
    lines = 0
    seed = 0
    for y in range(margin_y, height - tile_h + 1, tile_h):
        for x in range(margin_x, width - tile_w + 1, tile_w):
            page = make_page("straight", seed=seed, scale=3.0)
            canvas[y:y + tile_h, x:x + tile_w] = np.minimum(canvas[y:y + tile_h, x:x + tile_w], page.image)
            lines += page.n_lines
            seed += 1
    Image.MAX_IMAGE_PIXELS = None  # our own page: no decompression-bomb check on writing it
    Image.fromarray(canvas).save(path, optimize=False)
    return lines


def measure(page: Path, outdir: Path, extra: list[str]) -> dict[str, object]:
    """Run tlseg under /usr/bin/time -v; returns rc, seconds, peak_mb, mb_per_mpx, last line."""
    tlseg = ROOT / ".venv" / "bin" / "tlseg"
    cmd = ["/usr/bin/time", "-v", str(tlseg), "segment", str(page), "-o", str(outdir), "-j", "1",
           "--overwrite", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    err = proc.stderr
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", err).group(1)
    seconds = sum(float(p) * 60 ** i for i, p in enumerate(reversed(wall.split(":"))))
    Image.MAX_IMAGE_PIXELS = None  # our own page: its header only
    with Image.open(page) as im:
        mpx = im.size[0] * im.size[1] / 1e6
    tl_lines = [ln for ln in err.splitlines() if ln.startswith("tlseg")]
    return {"rc": proc.returncode, "seconds": seconds, "peak_mb": peak_kb / 1024, "mpx": mpx,
            "mb_per_mpx": peak_kb / 1024 / mpx, "tlseg": tl_lines[-1] if tl_lines else "",
            "command": " ".join(cmd)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="13000x13000", help="WIDTHxHEIGHT in pixels")
    ap.add_argument("--keep", metavar="DIR", help="write page and outputs here and keep them")
    ap.add_argument("--page", metavar="PNG", help="use this page instead of generating one")
    ap.add_argument("tlseg_args", nargs="*", help="more tlseg segment options (after --)")
    args = ap.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tlseg-large-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        page = Path(args.page) if args.page else work / f"large-{width}x{height}.png"
        if not page.exists():
            n = generate(page, width, height)
            print(f"generated {page}: {width} x {height}, {n} lines, {page.stat().st_size / 1e6:.1f} MB",
                  flush=True)
        result = measure(page, work / "out", args.tlseg_args)
        for key in ("command", "rc", "seconds", "mpx", "peak_mb", "mb_per_mpx", "tlseg"):
            value = result[key]
            print(f"{key}: {value:.1f}" if isinstance(value, float) else f"{key}: {value}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
