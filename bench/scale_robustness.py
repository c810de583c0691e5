"""Does a page scanned at another resolution, or saved as JPEG, segment as well? Each dev page,
and the same page downscaled (and/or re-saved as JPEG), each scored against its own ground truth.

    python bench/scale_robustness.py [--data DIR] [--sets poilus-dev,kraken-sample] [--scale 0.5]
                                     [--jpeg QUALITY] [--limit N] [--jobs 2] [--set NAME=VALUE ...]
                                     [--scaled-set NAME=VALUE ...] [--out CSV]

Other archives scan at other resolutions (150-200 dpi is common; the dev pages are 300-400):
every length the method uses should follow the page's own text height (``H_cc``), so a page
at half the resolution should give the same lines. Per page: the page as stored, then its
stored pixels (EXIF orientation ignored, as the ground truth's coordinates are) resized by
``--scale`` (``cv2.INTER_AREA``, as a scanner's lower setting averages; above 1, as archives
scanning at 600 dpi deliver, ``cv2.INTER_CUBIC``, or nearest neighbour on a two-level page so
that it stays two-level) into a temporary
folder with its ground truth scaled alike (PAGE/ALTO coordinates multiplied and rounded; a
label image resized by nearest neighbour), both run with the same parameters and scored as
``bench/run_bench.py`` scores them (:func:`bench.steering.ground_truth`: polygons on the page's
own Otsu ink; a label image's labelled pixels on the page's Otsu ink at both resolutions,
not every labelled pixel as run_bench scores them, since a resized label image's pixels no
longer fall on the smaller page's ink). Prints FM / line IU % per page and per set, and the lines found, for both.
Not a timing: nothing here is timed.

``--jpeg QUALITY`` saves the second page as a JPEG of that quality (OpenCV, grey) instead of
a PNG: archives deliver binarised scans as JPEG too. With ``--scale 1`` the page keeps its
pixels and its ground truth.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run_bench import DEFAULT_DATA, LINE_THRESHOLD, T_A, find_sets  # noqa: E402
from engine.cli import parse_set  # noqa: E402

_POINTS = re.compile(r'((?:points|POINTS|BASELINE)=)"([^"]*)"')
_BOX = re.compile(r'( (?:HPOS|VPOS|WIDTH|HEIGHT|imageWidth|imageHeight)=)"([\d.]+)"')


def _move_points(text: str, move: Any) -> str:
    """PAGE or ALTO XML ``text`` with every polygon and baseline point ``(x, y)`` replaced by
    ``move(x, y)``, rounded to whole pixels (the file's own separator kept)."""
    def points(m: re.Match) -> str:
        raw = m.group(2)
        nums = [float(v) for v in re.split(r"[ ,]+", raw.strip()) if v]
        sep = "," if "," in raw else " "
        moved = (move(nums[i], nums[i + 1]) for i in range(0, len(nums) - 1, 2))
        return f'{m.group(1)}"{" ".join(f"{round(x)}{sep}{round(y)}" for x, y in moved)}"'

    return _POINTS.sub(points, text)


def rotate_xml(text: str, matrix: Any) -> str:
    """PAGE or ALTO XML ``text`` with every polygon and baseline point moved by the 2 x 3
    affine ``matrix`` (a rotation of the page) and rounded to whole pixels (ALTO boxes, which
    cannot turn, are left as they are: the polygons are what is scored)."""
    return _move_points(text, lambda x, y: (matrix[0][0] * x + matrix[0][1] * y + matrix[0][2],
                                            matrix[1][0] * x + matrix[1][1] * y + matrix[1][2]))


def scale_xml(text: str, scale: float) -> str:
    """PAGE or ALTO XML ``text`` with every coordinate (polygon and baseline points, ALTO
    boxes, the page's size) multiplied by ``scale`` and rounded to whole pixels."""
    text = _move_points(text, lambda x, y: (x * scale, y * scale))
    return _BOX.sub(lambda m: f'{m.group(1)}"{round(float(m.group(2)) * scale)}"', text)


def _segment_and_score(image: Path, gt: Path, params: Any) -> tuple[Any, Any, int, float]:
    from bench.steering import ground_truth
    from engine import groundtruth, pipeline
    from engine.evaluate import _scores, page_ink, scored_pixels

    prep = pipeline.prepare(str(image), params)
    *_, last = pipeline.run_em(prep, prep.initial_lines)
    seg = pipeline.finish(prep, last)
    if gt.suffix.lower() == ".xml":
        truth, scored = ground_truth(gt, image, prep.shape)
    else:
        # A label image labels the ink of the page it was drawn on; resized, its pixels no
        # longer fall on the smaller page's ink. Both resolutions are scored as polygons are:
        # the labelled pixels on the page's own Otsu ink.
        ink = page_ink(image)
        truth = groundtruth.read_label_map(gt, ink.shape)
        scored = scored_pixels(truth, ink, True)
    contest, line = _scores(truth, seg.labels, scored, T_A, LINE_THRESHOLD)
    return contest, line, len(seg.lines), float(prep.stats.h_cc)


def run_page(task: tuple[str, str, str, float, dict[str, Any], dict[str, Any], str]) -> dict[str, Any]:
    """One page at its own resolution and at ``scale``; in a worker process."""
    set_name, image, gt, scale, overrides, scaled_overrides, tmp, jpeg, rotate = task
    import cv2

    from engine.params import Parameters

    params = Parameters().replace(**overrides)
    image, gt = Path(image), Path(gt)
    row: dict[str, Any] = {"set": set_name, "page": image.stem, "scale": scale, "jpeg": jpeg, "rotate": rotate,
                           "error": ""}
    try:
        full = _segment_and_score(image, gt, params)
        stored = cv2.imread(str(image), cv2.IMREAD_GRAYSCALE | cv2.IMREAD_IGNORE_ORIENTATION)
        h, w = stored.shape
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        small_image = Path(tmp) / f"{image.stem}.{'jpg' if jpeg else 'png'}"
        # A black and white page stays black and white when enlarged or turned.
        two_level = not ((stored > 0) & (stored < 255)).any()
        if scale < 1.0:
            pixels = cv2.resize(stored, size, interpolation=cv2.INTER_AREA)
        elif scale > 1.0:
            pixels = cv2.resize(stored, size, interpolation=cv2.INTER_NEAREST if two_level else cv2.INTER_CUBIC)
        else:
            pixels = stored
        matrix = None
        if rotate:
            # Turned about the page's centre, the corners filled white (a scanner's white lid).
            matrix = cv2.getRotationMatrix2D((w / 2.0, h / 2.0), rotate, 1.0)
            pixels = cv2.warpAffine(stored, matrix, (w, h), borderValue=255,
                                    flags=cv2.INTER_NEAREST if two_level else cv2.INTER_LINEAR)
        cv2.imwrite(str(small_image), pixels, [cv2.IMWRITE_JPEG_QUALITY, jpeg] if jpeg else [])
        if rotate and gt.suffix.lower() == ".xml":
            small_gt = Path(tmp) / f"{image.stem}.xml"
            small_gt.write_text(rotate_xml(gt.read_text(encoding="utf-8"), matrix), encoding="utf-8")
        elif rotate:
            small_gt = Path(tmp) / f"{image.stem}.gt.png"
            labels = cv2.imread(str(gt), cv2.IMREAD_UNCHANGED)
            cv2.imwrite(str(small_gt), cv2.warpAffine(labels, matrix, (w, h), flags=cv2.INTER_NEAREST,
                                                      borderValue=0))
        elif scale == 1.0:  # the same pixels: the same ground truth
            small_gt = gt
        elif gt.suffix.lower() == ".xml":
            small_gt = Path(tmp) / f"{image.stem}.xml"
            small_gt.write_text(scale_xml(gt.read_text(encoding="utf-8"), scale), encoding="utf-8")
        else:  # a label image: each pixel's line, resized without mixing labels
            small_gt = Path(tmp) / f"{image.stem}.gt.png"
            labels = cv2.imread(str(gt), cv2.IMREAD_UNCHANGED)
            cv2.imwrite(str(small_gt), cv2.resize(labels, size, interpolation=cv2.INTER_NEAREST))
        small = _segment_and_score(small_image, small_gt, params.replace(**scaled_overrides))
    except Exception as exc:  # noqa: BLE001 - a page that fails is reported, the rest go on
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    for name, (contest, line, n_lines, h_cc) in (("full", full), ("scaled", small)):
        row.update({f"{name}_FM": round(contest.fm, 4), f"{name}_line_IU": round(line.line_iu, 4),
                    f"{name}_lines": n_lines, f"{name}_h_cc": h_cc,
                    f"{name}_contest": contest, f"{name}_line": line})
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", help="comma-separated sets (default: all)")
    ap.add_argument("--scale", type=float, default=0.5,
                    help="resize factor, 0 < scale <= 2 (default 0.5); 1 only with --jpeg or --rotate")
    ap.add_argument("--jpeg", type=int, default=0, metavar="QUALITY",
                    help="save the second page as JPEG of this quality (1-100) instead of PNG")
    ap.add_argument("--rotate", type=float, default=0.0, metavar="DEG",
                    help="turn the second page by DEG degrees (counter-clockwise; with --scale 1), "
                         "its ground truth alike")
    ap.add_argument("--limit", type=int, default=None, help="at most N pages per set")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--set", dest="set_", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--scaled-set", dest="scaled_set", action="append", default=[], metavar="NAME=VALUE",
                    help="a parameter for the scaled page's run only (after --set)")
    ap.add_argument("--out", type=Path, default=None, help="per-page CSV")
    args = ap.parse_args(argv)
    if not 0.0 < args.scale <= 2.0 or (args.scale == 1.0 and not (args.jpeg or args.rotate)):
        ap.error(f"--scale must lie in (0, 2] (1 only with --jpeg or --rotate), got {args.scale}")
    if args.rotate and args.scale != 1.0:
        ap.error("--rotate goes with --scale 1")
    if not 0 <= args.jpeg <= 100:
        ap.error(f"--jpeg must be a quality from 1 to 100, got {args.jpeg}")
    tag = (f"x{args.scale}" + (f" JPEG {args.jpeg}" if args.jpeg else "")
           + (f" turned {args.rotate} deg" if args.rotate else ""))
    from engine.metric import combine, combine_lines

    overrides = parse_set(args.set_)
    scaled_overrides = parse_set(args.scaled_set)
    sets = find_sets(args.data, args.sets.split(",") if args.sets else None)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tlseg-scale-") as tmp, ProcessPoolExecutor(args.jobs) as pool:
        for set_name, pages in sets.items():
            pages = pages[: args.limit] if args.limit else pages
            tasks = [(set_name, str(i), str(g), args.scale, overrides, scaled_overrides, tmp, args.jpeg,
                      args.rotate) for i, g in pages]
            done = []
            for row in pool.map(run_page, tasks):
                rows.append(row)
                if row["error"]:
                    print(f"{set_name} {row['page']}: FAILED {row['error']}", flush=True)
                    continue
                done.append(row)
                print(f"{set_name} {row['page']}: FM / line IU % {100 * row['full_FM']:.1f} / "
                      f"{100 * row['full_line_IU']:.1f} ({row['full_lines']} lines, H_cc {row['full_h_cc']:.0f}) "
                      f"-> {tag}: {100 * row['scaled_FM']:.1f} / {100 * row['scaled_line_IU']:.1f} "
                      f"({row['scaled_lines']} lines, H_cc {row['scaled_h_cc']:.0f})", flush=True)
            if done:
                figures = []
                for name in ("full", "scaled"):
                    contest = combine(r[f"{name}_contest"] for r in done)
                    line = combine_lines(r[f"{name}_line"] for r in done)
                    figures.append(f"{100 * contest.fm:.1f} / {100 * line.line_iu:.1f}")
                print(f"{set_name} ({len(done)} of {len(pages)} pages scored): {figures[0]} -> "
                      f"{tag}: {figures[1]}", flush=True)
    if args.out:
        keys = ["set", "page", "scale", "jpeg", "rotate", "full_FM", "full_line_IU", "full_lines", "full_h_cc",
                "scaled_FM", "scaled_line_IU", "scaled_lines", "scaled_h_cc", "error"]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
