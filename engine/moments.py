"""Learning the pairwise moments ``(mu0, mu1, mu2)`` of the MRF from line ground truth.

The EM's pairwise potential matches, over the Delaunay edges inside text regions, the share of
edges whose two ends lie on the same line (``mu0``), on neighbouring lines (``mu1``) and on lines
farther apart (``mu2``). These shares are measured here on ground truth, on the graph the engine
itself would build:

1. the ground truth's ink pixels (the label map's labelled pixels) are split into 8-connected
   components, specks are removed as in :func:`engine.ink.remove_specks`, and the rest is sampled
   with :func:`engine.sampling.sample_ink_pixels` (``sample_ratio``, seed);
2. the samples' Delaunay graph (:func:`engine.graph.delaunay_edges`) is cut into text regions
   (:func:`engine.regions.find_regions`, with the components' ``H_cc``);
3. the MRF edges whose both ends carry a line label are classed by ``|l_i - l_j|`` = 0, 1, >= 2,
   where line ids are first **ordered across the text** within each region (ground-truth ids are
   arbitrary): the region's text direction is the main axis of the pooled within-line scatter,
   and lines are ranked by their mean position along its normal.

    python -m engine.moments GT... [--image-dir DIR] [--json OUT]

prints a per-page table and the pooled moments (``learn_moments`` returns them as a dict).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import graph as _graph
from . import groundtruth as _gt
from . import ink as _ink
from . import io as _io
from . import regions as _regions
from . import sampling as _sampling
from .components import component_stats
from .evaluate import find_page_image, is_polygon_file
from .params import Parameters

#: Smallest moment kept: the EM needs every class possible (Parameters wants 0 < mu < 1).
MIN_MOMENT = 1e-4
GT_SUFFIXES = (".png", ".tif", ".tiff", ".bmp", ".xml", ".page", ".alto", ".dat")


class MomentsError(ValueError):
    """Ground truth from which no moments can be learned (no file, no image for polygons...)."""


# ----------------------------------------------------------------------------- one page


def order_lines(samples: np.ndarray, line: np.ndarray, region: np.ndarray) -> np.ndarray:
    """Rank of each sample's line across the text of its region, ``(N,)`` int64 (-1 = no line).

    ``samples`` ``(N, 2)`` [x, y]; ``line`` ``(N,)`` ground-truth ids (0 = none); ``region``
    ``(N,)``. Within a region the text direction is the main eigenvector of the pooled scatter of
    the samples about their own line's mean (robust for tall blocks of short lines, where a PCA of
    all the region's points would follow the column), and lines are ranked by the mean position of
    their samples along the normal; ranks of different regions are offset so they never touch.
    """
    rank = np.full(len(samples), -1, np.int64)
    offset = 0
    for r in np.unique(region):
        idx = np.flatnonzero((region == r) & (line > 0))
        if len(idx) == 0:
            continue
        ids, inv = np.unique(line[idx], return_inverse=True)
        pts = samples[idx]
        counts = np.bincount(inv, minlength=len(ids)).astype(float)
        means = np.stack([np.bincount(inv, pts[:, k], len(ids)) for k in (0, 1)], axis=1) / counts[:, None]
        d = pts - means[inv]
        scatter = d.T @ d
        if not np.isfinite(scatter).all() or np.trace(scatter) <= 0:
            direction = np.array([1.0, 0.0])  # single-pixel lines: assume horizontal text
        else:
            _, vecs = np.linalg.eigh(scatter)
            direction = vecs[:, -1]
        normal = np.array([-direction[1], direction[0]])
        if normal @ (0.1, 1.0) < 0:  # normal points down (or right): ranks follow the page
            normal = -normal
        across = means @ normal
        order = np.argsort(np.argsort(across, kind="stable"), kind="stable")
        rank[idx] = order[inv] + offset
        offset += len(ids) + 2  # a gap of 2: lines of different regions are "far", never adjacent
    return rank


def edge_moments(labels: np.ndarray, params: Parameters | None = None, *,
                 ink: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Counts of same / adjacent / farther-line MRF edges on one page of ground truth.

    Parameters
    ----------
    labels : int ndarray (H, W)
        Line id of every ink pixel (0 = none); ids need not be ordered or contiguous.
    params : Parameters, optional
        ``sample_ratio``, ``seed``, ``speck_ratio``, ``min_speck_area``, ``region_threshold`` and
        ``min_region_samples`` are used.
    ink : bool ndarray (H, W), optional
        Ink to sample; default ``labels > 0`` (the ground truth's own ink). Unlabelled ink takes
        part in the graph but edges touching it are not counted.

    Returns
    -------
    counts : int64 ndarray (3,)
        Edges with ``|l_i - l_j|`` = 0, 1 and >= 2 (line ids ordered across the text).
    n_edges : int
        ``counts.sum()``: MRF edges whose both ends have a line label.
    """
    params = params or Parameters()
    labels = np.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"labels must be a 2-D label map, got shape {labels.shape}")
    mask = labels > 0 if ink is None else np.asarray(ink, dtype=bool)
    if mask.shape != labels.shape:
        raise ValueError(f"ink {mask.shape} and labels {labels.shape} differ in shape")
    counts = np.zeros(3, np.int64)
    if not mask.any():
        return counts, 0
    # As the engine: 8-connected components, specks removed (they would drive H_cc down and cut
    # the page into tiny regions), then H_cc, sampling, Delaunay and regions.
    cc, cc_stats = _ink.label_components(mask)
    _, components = _ink.remove_specks(cc, cc_stats, params)
    stats = component_stats(components)
    samples, _ = _sampling.sample_ink_pixels(components, params.sample_ratio, params.seed)
    triangles, _ = _graph.delaunay_edges(samples)
    sample_region, edges = _regions.find_regions(samples, triangles, stats, params)
    xy = samples.astype(np.int64)
    line = labels[xy[:, 1], xy[:, 0]].astype(np.int64)
    line[line < 0] = 0
    rank = order_lines(samples, line, sample_region)
    if len(edges) == 0:
        return counts, 0
    ri, rj = rank[edges[:, 0]], rank[edges[:, 1]]
    both = (ri >= 0) & (rj >= 0)
    diff = np.minimum(np.abs(ri[both] - rj[both]), 2)
    counts += np.bincount(diff, minlength=3)[:3]
    return counts, int(counts.sum())


def normalise(counts: Sequence[float] | np.ndarray, floor: float = MIN_MOMENT) -> list[float]:
    """Counts -> moments summing to 1, each clipped to at least ``floor`` and renormalised."""
    c = np.asarray(counts, dtype=np.float64)
    total = c.sum()
    mu = c / total if total > 0 else np.array([1.0, 0.0, 0.0])
    mu = np.maximum(mu, floor)
    return [float(m) for m in mu / mu.sum()]


# ----------------------------------------------------------------------------- files


def find_image(gt_path: Path, image_dir: Path | None = None) -> Path | None:
    """The page image of a ground-truth file: ``<stem>.<image suffix>`` in ``image_dir``, next to
    the file, or in a sibling ``images/`` folder (the layout ``set/page_xml`` + ``set/images``)."""
    stem = gt_path.name
    for suffix in (".xml", ".page", ".alto", ".dat", ".png", ".tif", ".tiff", ".bmp"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if stem.lower().endswith(".page"):
        stem = stem[: -len(".page")]
    folders = [image_dir] if image_dir is not None else []
    folders += [gt_path.parent, gt_path.parent.parent / "images"]
    return find_page_image(folders, stem, (gt_path,))


def page_labels(gt_path: Path, image_dir: Path | None, params: Parameters
                ) -> tuple[np.ndarray, np.ndarray | None, str | None]:
    """Ground-truth label map of a page and the ink to sample (None = the labels' own ink).

    Label images are their own ink. Polygons (PAGE/ALTO) label the engine's ink of the page
    image (:func:`engine.ink.ink_mask`), which must be found (see :func:`find_image`); ``.dat``
    needs the image for its shape. Returns (labels, ink, image path or None)."""
    if is_polygon_file(gt_path) or gt_path.suffix.lower() == ".dat":
        image = find_image(gt_path, image_dir)
        if image is None:
            raise MomentsError(f"{gt_path}: no page image with the same stem next to it"
                               + (f" or in {image_dir}" if image_dir else "")
                               + " (polygon and .dat ground truth need the image for the ink)")
        page = _io.load_page(image)
        ink, _ = _ink.ink_mask(page, params)
        labels = _gt.read_label_map(gt_path, ink.shape, ink)
        return labels, None, str(image)
    return _gt.read_label_map(gt_path), None, None


def _expand(paths: Iterable[str | os.PathLike]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in GT_SUFFIXES)
        else:
            out.append(p)
    return out


def learn_moments(paths: Iterable[str | os.PathLike], image_dir: str | os.PathLike | None = None,
                  params: Parameters | None = None,
                  progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Pairwise moments pooled over pages of ground truth.

    Parameters
    ----------
    paths : ground-truth files (label images, PAGE/ALTO XML, ``.dat``) or folders of them.
    image_dir : folder of the page images for polygon/``.dat`` ground truth; by default the image
        is looked for next to the file (same stem) and in a sibling ``images/`` folder.
    params : sampling and region settings (default :class:`Parameters`).
    progress : called with each page's entry of ``per_page`` as it is done.

    Returns
    -------
    dict
        ``moments`` [mu0, mu1, mu2] (pooled edge counts, each >= 1e-4, summing to 1), ``counts``,
        ``pages``, ``edges``, ``per_page`` (path, counts, edges, lines, moments), ``sources``
        (ground-truth and image files) and ``skipped`` ([path, reason] of unreadable pages).
    """
    params = params or Parameters()
    img_dir = None if image_dir is None else Path(image_dir)
    files = _expand(paths)
    if not files:
        raise MomentsError("no ground-truth files given")
    total = np.zeros(3, np.int64)
    per_page: list[dict[str, Any]] = []
    sources: list[str] = []
    skipped: list[list[str]] = []
    for path in files:
        try:
            labels, ink, image = page_labels(path, img_dir, params)
        except (ValueError, OSError) as exc:  # GroundTruthError, PageLoadError, MomentsError
            skipped.append([str(path), str(exc)])
            continue
        counts, n_edges = edge_moments(labels, params, ink=ink)
        total += counts
        entry = {"path": str(path), "image": image, "lines": int(len(np.unique(labels[labels > 0]))),
                 "edges": n_edges, "counts": [int(c) for c in counts], "moments": normalise(counts)}
        per_page.append(entry)
        sources.append(str(path) if image is None else f"{path} (ink of {image})")
        if progress is not None:
            progress(entry)
    if not per_page:
        raise MomentsError("no readable ground truth: "
                           + "; ".join(f"{p}: {reason}" for p, reason in skipped))
    return {"moments": normalise(total), "moments_page_mean": page_mean(per_page),
            "counts": [int(c) for c in total], "pages": len(per_page),
            "edges": int(total.sum()), "per_page": per_page, "sources": sources, "skipped": skipped,
            "params": {"sample_ratio": params.sample_ratio, "seed": params.seed,
                       "region_threshold": params.region_threshold,
                       "min_region_samples": params.min_region_samples}}


def page_mean(per_page: list[dict[str, Any]]) -> list[float]:
    """Moments averaged over pages (each page weighs the same, whatever its edge count)."""
    shares = [np.asarray(p["counts"], float) / p["edges"] for p in per_page if p["edges"]]
    return normalise(np.mean(shares, axis=0)) if shares else normalise([0, 0, 0])


def format_table(result: dict[str, Any]) -> str:
    """A plain-text table of :func:`learn_moments`'s result: one row per page and the total."""
    head = f"{'page':<40} {'lines':>5} {'edges':>8} {'mu0':>7} {'mu1':>7} {'mu2':>7}"
    out = [head, "-" * len(head)]
    for p in result["per_page"]:
        m = p["moments"]
        out.append(f"{Path(p['path']).name[:40]:<40} {p['lines']:>5} {p['edges']:>8} "
                   f"{m[0]:>7.4f} {m[1]:>7.4f} {m[2]:>7.4f}")
    out.append("-" * len(head))
    m = result["moments"]
    out.append(f"{'POOLED (' + str(result['pages']) + ' pages)':<40} {'':>5} {result['edges']:>8} "
               f"{m[0]:>7.4f} {m[1]:>7.4f} {m[2]:>7.4f}")
    if "moments_page_mean" in result:
        m = result["moments_page_mean"]
        out.append(f"{'mean of pages':<40} {'':>5} {'':>8} {m[0]:>7.4f} {m[1]:>7.4f} {m[2]:>7.4f}")
    for path, reason in result.get("skipped", []):
        out.append(f"skipped {path}: {reason}")
    return "\n".join(out)


def discover_sets(data_dir: Path) -> dict[str, list[Path]]:
    """Ground truth of every set (sub-folder) of a data folder: ``pixel_label/*.png`` when the
    set has label maps, else every XML file (ALTO/PAGE next to its image), recursively."""
    sets: dict[str, list[Path]] = {}
    for folder in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        labels = folder / "pixel_label"
        if labels.is_dir():
            files = sorted(labels.glob("*.png"))
        else:
            files = sorted(f for f in folder.rglob("*") if f.suffix.lower() in (".xml", ".page", ".alto"))
        if files:
            sets[folder.name] = files
    return sets


def _readme_sources(data_dir: Path) -> dict[str, str]:
    """Set name -> "source, licence" column of the data folder's README table (if any)."""
    out: dict[str, str] = {}
    readme = data_dir / "README.md"
    if not readme.is_file():
        return out
    for row in readme.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith("/`"):
            out[cells[0].strip("`/")] = cells[-1]
    return out


def learn_defaults(data_dir: Path, params: Parameters, command: str) -> dict[str, Any]:
    """Moments pooled over every set of ``data_dir`` and per set, with provenance (for
    ``resources/moments.json``)."""
    import datetime

    sets = discover_sets(data_dir)
    if not sets:
        raise MomentsError(f"no ground truth found in the sets of {data_dir}")
    per_set: dict[str, Any] = {}
    all_pages: list[dict[str, Any]] = []
    skipped: list[list[str]] = []
    for name, files in sets.items():
        r = learn_moments(files, None, params)
        per_set[name] = {k: r[k] for k in ("moments", "moments_page_mean", "counts", "pages", "edges")}
        all_pages += [dict(p, set=name) for p in r["per_page"]]
        skipped += r["skipped"]
        print(f"{name:<16} pages {r['pages']:>3}  edges {r['edges']:>9}  moments "
              + " ".join(f"{m:.4f}" for m in r["moments"]), file=sys.stderr)
    total = np.sum([p["counts"] for p in all_pages], axis=0)
    sources = _readme_sources(data_dir)
    return {
        "moments": [round(m, 4) for m in normalise(total)],
        "moments_exact": normalise(total),
        "moments_page_mean": page_mean(all_pages),
        "counts": [int(c) for c in total], "pages": len(all_pages), "edges": int(total.sum()),
        "per_set": per_set,
        "date": datetime.date.today().isoformat(),
        "command": command,
        "method": "engine.moments.edge_moments: 5 % samples of the ground truth's ink (label-map "
                  "pixels; polygon GT: engine ink of the page image inside the polygons), Delaunay, "
                  "engine regions, MRF edges with both ends on a line; line ids ordered across the "
                  "text per region; 'moments': counts pooled over pages (each edge weighs the same; "
                  "the dense ahte pages hold 63 % of the edges); 'moments_page_mean': mean of the "
                  "pages' shares (each page weighs the same)",
        "params": {"sample_ratio": params.sample_ratio, "seed": params.seed,
                   "region_threshold": params.region_threshold,
                   "min_region_samples": params.min_region_samples},
        "data": {"folder": str(data_dir),
                 "sets": {name: {"pages": len(files), "ground_truth": sorted({f.parent.name + "/*" + f.suffix
                                                                             for f in files}),
                                 "source": sources.get(name, "")}
                          for name, files in sets.items()}},
        "per_page": [{k: p[k] for k in ("set", "path", "lines", "edges", "counts")} for p in all_pages],
        "skipped": skipped,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engine.moments GT... [--image-dir DIR] [--params FILE] [--json OUT]`` or
    ``python -m engine.moments --sets DATA_DIR --json resources/moments.json``."""
    ap = argparse.ArgumentParser(prog="python -m engine.moments", description=__doc__.split("\n")[0])
    ap.add_argument("gt", nargs="*", help="ground-truth files or folders")
    ap.add_argument("--image-dir", help="folder of the page images (polygon / .dat ground truth)")
    ap.add_argument("--sets", help="a data folder whose sub-folders are sets: learn pooled and per-set "
                                   "moments with provenance (the resources/moments.json defaults)")
    ap.add_argument("--params", help="parameters JSON (sampling and region settings)")
    ap.add_argument("--json", help="also write the result as JSON here")
    args = ap.parse_args(argv)
    if bool(args.gt) == bool(args.sets):
        ap.error("give ground-truth files or --sets DATA_DIR (one of them)")
    params = Parameters.load(args.params) if args.params else Parameters()
    try:
        if args.sets:
            command = "python -m engine.moments " + " ".join(argv if argv is not None else sys.argv[1:])
            result = learn_defaults(Path(args.sets), params, command)
            result["per_page"] = [dict(p, moments=normalise(p["counts"])) for p in result["per_page"]]
            print(format_table(result))
            for name, r in result["per_set"].items():
                print(f"{name:<40} {r['pages']:>5} {r['edges']:>8} "
                      + " ".join(f"{m:>7.4f}" for m in r["moments"]))
            result["per_page"] = [{k: v for k, v in p.items() if k != "moments"} for p in result["per_page"]]
        else:
            result = learn_moments(args.gt, args.image_dir, params)
            print(format_table(result))
    except MomentsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        import json

        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
