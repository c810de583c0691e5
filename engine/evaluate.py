"""Scoring a set of result files against a set of ground-truth files, paired by file stem.

    report = evaluate(["gt/a.xml", "gt/b.xml"], ["out/a.labels.png", "out/b.dat"], image_dir="pages")
    print(report.format_table())
    report.to_csv("scores.csv")

Polygon files (PAGE/ALTO) say which pixels are a line's but not which are ink, so pairs with
a polygon file are scored on the ink of the page image (Otsu threshold), which must be found
in ``image_dir`` under the same stem.
"""

from __future__ import annotations

import csv
import io as _stdio
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from skimage.filters import threshold_otsu

from . import groundtruth as _gt
from .export import atomic_write_bytes
from .io import IMAGE_SUFFIXES, exif_orientation, load_page, orient_like_exif
from .metric import ContestScore, LineScore, combine, combine_lines, contest_metric, line_metric
from .model import Page

#: Suffixes stripped (repeatedly, case-insensitively) from a file name to get its page stem.
KNOWN_SUFFIXES = (".xml", ".dat", ".png", ".tif", ".tiff", ".bmp", ".page", ".labels", ".alto",
                  ".gt", ".pred", ".json")
_LABEL_FILE_SUFFIXES = (".xml", ".dat", ".png", ".tif", ".tiff", ".bmp")


class EvaluationError(ValueError):
    """An evaluation that cannot run as asked (e.g. polygon ground truth without page images)."""


def page_stem(path: str | os.PathLike) -> str:
    """``foo.labels.png`` / ``foo.page.xml`` / ``foo.alto.xml`` / ``foo.dat`` / ``foo.xml`` -> ``foo``."""
    name = Path(path).name
    while True:
        low = name.lower()
        for suffix in KNOWN_SUFFIXES:
            if low.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return name


@dataclass(frozen=True)
class PageScore:
    """One page's scores and the files they come from."""

    stem: str
    gt_path: str
    pred_path: str
    contest: ContestScore
    line: LineScore


@dataclass
class EvaluationReport:
    """Per-page and total scores; ``unpaired`` files and ``skipped`` pages (with the reason)."""

    pages: list[PageScore] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    t_a: float = 0.95
    line_threshold: float = 0.75

    @property
    def total_contest(self) -> ContestScore:
        return combine(p.contest for p in self.pages)

    @property
    def total_line(self) -> LineScore:
        return combine_lines(p.line for p in self.pages)

    def rows(self) -> list[dict[str, object]]:
        """One dict per scored page plus a final ``TOTAL`` row over them (none when no page
        was scored: a total of nothing is no score)."""
        items = [(p.stem, p.contest, p.line) for p in self.pages]
        if items:
            items.append(("TOTAL", self.total_contest, self.total_line))
        return [{"page": stem, "N": c.n, "M": c.m, "o2o": c.o2o, "DR": c.dr, "RA": c.ra, "FM": c.fm,
                 "correct": ln.correct, "missed": ln.missed, "extra": ln.extra,
                 "line_IU": ln.line_iu, "line_F1": ln.line_f1, "pixel_IU": ln.pixel_iu}
                for stem, c, ln in items]

    def format_table(self) -> str:
        """A plain-text table: one line per page, the total, then unpaired/skipped files."""
        head = (f"{'page':<28} {'N':>5} {'M':>5} {'o2o':>5} {'DR%':>6} {'RA%':>6} {'FM%':>6}  "
                f"{'lineIU%':>7} {'lineF1%':>7} {'pixIU%':>6}")
        out = [f"contest T_a = {self.t_a}, line threshold = {self.line_threshold}", head,
               "-" * len(head)]
        rows = self.rows()
        for i, r in enumerate(rows):
            if i == len(rows) - 1 and r["page"] == "TOTAL":
                out.append("-" * len(head))
            out.append(f"{str(r['page'])[:28]:<28} {r['N']:>5} {r['M']:>5} {r['o2o']:>5} "
                       f"{100 * r['DR']:>6.2f} {100 * r['RA']:>6.2f} {100 * r['FM']:>6.2f}  "
                       f"{100 * r['line_IU']:>7.2f} {100 * r['line_F1']:>7.2f} {100 * r['pixel_IU']:>6.2f}")
        for path in self.unpaired:
            out.append(f"unpaired: {path}")
        for stem, reason in self.skipped:
            out.append(f"skipped {stem}: {reason}")
        return "\n".join(out)

    def to_csv(self, path: str | os.PathLike) -> None:
        """The rows of :meth:`rows` as CSV (written atomically)."""
        buf = _stdio.StringIO()
        rows = self.rows()
        fields = ["page", "N", "M", "o2o", "DR", "RA", "FM", "correct", "missed", "extra", "line_IU",
                  "line_F1", "pixel_IU"]
        writer = csv.DictWriter(buf, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_bytes(path, buf.getvalue().encode("utf-8"))


def _preference(path: Path) -> tuple[int, str]:
    """Sort key of a folder's files: where a page has several (``tlseg segment`` writes ``.dat``,
    ``.labels.png``, ``.page.xml`` and ``.alto.xml``), the exact label maps come first, then
    PAGE, then ALTO XML; by name within each kind."""
    name = path.name.lower()
    return (2 if name.endswith(".alto.xml") else 1 if is_polygon_file(path) else 0, path.name)


def _expand(paths: Iterable[str | os.PathLike] | str | os.PathLike) -> list[Path]:
    """Files as given; a directory stands for its label/XML files (not recursive), in the
    order of :func:`_preference` (the first file of a page is the one scored)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted((f for f in p.iterdir()
                           if f.is_file() and f.suffix.lower() in _LABEL_FILE_SUFFIXES), key=_preference)
        else:
            out.append(p)
    return out


def _by_stem(paths: list[Path], unpaired: list[str]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for p in paths:
        stem = page_stem(p)
        if stem in found:
            unpaired.append(str(p))
            warnings.warn(f"{p}: a second file for page '{stem}' (using {found[stem]})", stacklevel=3)
        else:
            found[stem] = p
    return found


def find_page_image(folders: list[Path], stem: str, exclude: tuple[Path, ...] = ()) -> Path | None:
    """The page image ``<stem>.<image suffix>`` in the first of ``folders`` that has one
    (never one of ``exclude``: a label image named like its page is not the page)."""
    skip = {p.resolve() for p in exclude}
    for folder in folders:
        for suffix in IMAGE_SUFFIXES:
            for cand in (folder / f"{stem}{suffix}", folder / f"{stem}{suffix.upper()}"):
                if cand.is_file() and cand.resolve() not in skip:
                    return cand
    return None


#: Names of a page's ground truth beside its image (``{stem}`` replaced), in the order tried;
#: then ``pixel_label/<stem>.png`` in the image's folder or the one above (the ICDAR sets).
GROUND_TRUTH_NAMES = ("{stem}.xml", "{stem}.gt.xml", "{stem}.gt.png", "{stem}_labels.png", "{stem}.gt.tif")


def find_ground_truth(image: str | os.PathLike) -> Path | None:
    """The ground truth of a page image sitting beside it (ALTO/PAGE XML of the same stem, a
    label image ``<stem>_labels.png`` / ``<stem>.gt.png``, or ``pixel_label/<stem>.png``),
    or None.  A tlseg output (``<stem>.page.xml``, ``<stem>.labels.png``) is never taken."""
    image = Path(image)
    stem, folder = image.stem, image.parent
    candidates = [folder / name.format(stem=stem) for name in GROUND_TRUTH_NAMES]
    candidates += [folder / "pixel_label" / f"{stem}.png", folder.parent / "pixel_label" / f"{stem}.png"]
    for cand in candidates:
        if cand.is_file() and cand.resolve() != image.resolve():
            return cand
    return None


def is_ground_truth_name(path: str | os.PathLike) -> bool:
    """Whether an image file's name says it is a label map, not a page (``_labels``, ``.gt``)."""
    name = Path(path).name.lower()
    return any(name.endswith(name_.format(stem="").lower()) for name_ in GROUND_TRUTH_NAMES
               if not name_.endswith(".xml")) or Path(path).parent.name == "pixel_label"


def page_ink(path: str | os.PathLike, within: np.ndarray | None = None) -> np.ndarray:
    """Ink of a page image, bool ``(H, W)``: ``gray < 128`` for bilevel pages, else Otsu.

    ``within`` (bool ``(H, W)``): take Otsu's threshold over these pixels only (the ground
    truth's text lines). Over a whole photographed page Otsu separates the paper from what
    surrounds it, not the ink from the paper: on CREMMA 2_985d7 (grey card on white) every
    pixel of the card counted as ink, 2.6 M pixels inside the lines for 0.5 M of writing."""
    return _otsu_ink(load_page(path), within)


def _otsu_ink(page: Page, within: np.ndarray | None) -> np.ndarray:
    if page.bilevel:
        return page.gray < 128
    gray = page.gray
    values = gray
    if within is not None and np.shape(within) == gray.shape and np.any(within):
        values = gray[within]
    if values.min() == values.max():
        return np.zeros(gray.shape, bool)
    return gray <= threshold_otsu(values)


def polygon_label_map(gt_path: str | os.PathLike, image: str | os.PathLike,
                      shape: tuple[int, int]) -> np.ndarray:
    """Polygon ground truth (PAGE/ALTO) rasterised on the page as shown, int32 ``shape``
    (every pixel inside a line's polygon, ink or not)."""
    orientation = exif_orientation(image)
    try:
        return _gt.read_label_map(gt_path, shape)
    except _gt.GroundTruthError:
        if orientation < 5:
            raise
        # Polygons drawn on the stored pixels of a page that EXIF turns by 90 degrees (tools
        # that ignore the tag): rasterise them there, then turn them with the page.
        stored = (shape[1], shape[0])
        return orient_like_exif(_gt.read_label_map(gt_path, stored), orientation)


def polygon_truth_on_ink(gt_path: str | os.PathLike, image: str | os.PathLike,
                         shape: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Polygon ground truth (PAGE/ALTO) as a label map of its ink pixels, and that ink: the
    page's Otsu ink with the threshold taken inside the polygons (:func:`page_ink`)."""
    page = load_page(image)
    shape = page.gray.shape if shape is None else shape
    filled = polygon_label_map(gt_path, image, shape)
    ink = _otsu_ink(page, filled > 0)
    return np.where(ink, filled, 0).astype(np.int32), ink


def is_polygon_file(path: Path) -> bool:
    """PAGE or ALTO XML (polygons, scored on the page's ink), by suffix."""
    return path.suffix.lower() in _gt.XML_SUFFIXES


def scored_pixels(gt: np.ndarray, ink: np.ndarray | None, gt_is_polygon: bool) -> np.ndarray | None:
    """The pixels a page is scored on: ink inside the polygons for polygon ground truth
    (ink outside every polygon has no truth), else the page's ink and every labelled pixel
    (None without a page image: the metric's default, labelled in either map)."""
    if gt_is_polygon:
        return gt > 0
    return None if ink is None else ink | (gt > 0)


class UnscorableError(ValueError):
    """A pair that cannot be scored (ground truth without a line on the page); never a 100."""


def _check_scorable(gt_path: Path, gt: np.ndarray, score_ink: np.ndarray | None) -> None:
    """A score needs ground-truth lines on the page, and pixels of theirs to score."""
    if not np.any(gt > 0):
        raise UnscorableError(f"ground truth {gt_path} has no line on the page (none, or all outside it"
                              + (", or over blank paper" if score_ink is not None else "") + "): nothing to score")
    if score_ink is not None and not np.any(score_ink & (gt > 0)):
        raise UnscorableError(f"ground truth {gt_path}: its lines hold no ink of the page: nothing to score")


def _score_pair(gt_path: Path, pred_path: Path, image: Path | None, t_a: float,
                line_threshold: float) -> tuple[ContestScore, LineScore]:
    gt_poly = is_polygon_file(gt_path)
    if gt_poly and image is not None:
        gt, ink = polygon_truth_on_ink(gt_path, image)
        pred = _gt.read_label_map(pred_path, gt.shape, ink if is_polygon_file(pred_path) else None,
                                  what="result")
        score_ink = scored_pixels(gt, ink, True)
        _check_scorable(gt_path, gt, score_ink)
        return _scores(gt, pred, score_ink, t_a, line_threshold)
    ink = page_ink(image) if image is not None else None
    shape = None if ink is None else ink.shape
    # Read the files that know their size first, so a .dat partner gets its shape.
    first, second = (pred_path, gt_path) if gt_path.suffix.lower() == ".dat" else (gt_path, pred_path)
    maps = {}
    for p in (first, second):
        maps[p] = _gt.read_label_map(p, shape, ink if is_polygon_file(p) else None,
                                     what="ground truth" if p == gt_path else "result")
        shape = maps[p].shape
    gt, pred = maps[gt_path], maps[pred_path]
    score_ink = scored_pixels(gt, ink, gt_poly)
    _check_scorable(gt_path, gt, score_ink)
    return _scores(gt, pred, score_ink, t_a, line_threshold)


def _scores(gt: np.ndarray, pred: np.ndarray, score_ink: np.ndarray | None, t_a: float,
            line_threshold: float) -> tuple[ContestScore, LineScore]:
    return (contest_metric(gt, pred, score_ink, t_a), line_metric(gt, pred, score_ink, line_threshold))


def evaluate(gt_paths: Iterable[str | os.PathLike] | str | os.PathLike,
             pred_paths: Iterable[str | os.PathLike] | str | os.PathLike, t_a: float = 0.95,
             line_threshold: float = 0.75, image_dir: str | os.PathLike | None = None
             ) -> EvaluationReport:
    """Score result files against ground-truth files paired by page stem.

    Parameters
    ----------
    gt_paths, pred_paths : paths (or directories) of ``.dat``, label images, PAGE or ALTO XML.
    t_a : contest acceptance threshold of MatchScore.
    line_threshold : pixel precision/recall a matched line needs to be correct (ICDAR 2017).
    image_dir : folder of the page images (``<stem>.png|jpg|tif...``); required when any file
        is PAGE/ALTO XML, whose polygons are scored on the page's ink only.

    Returns
    -------
    EvaluationReport
        Unpaired files are listed (with a warning), pages that fail to read or cannot be
        scored (ground truth with no line on the page) are skipped with the reason; neither
        stops the evaluation, and the total is over the scored pages only.
    """
    report = EvaluationReport(t_a=t_a, line_threshold=line_threshold)
    gts = _by_stem(_expand(gt_paths), report.unpaired)
    preds = _by_stem(_expand(pred_paths), report.unpaired)
    for stem in sorted(set(gts) ^ set(preds)):
        path = gts.get(stem) or preds[stem]
        report.unpaired.append(str(path))
        warnings.warn(f"{path}: no {'result' if stem in gts else 'ground truth'} file for page "
                      f"'{stem}'", stacklevel=2)
    stems = sorted(set(gts) & set(preds))
    img_dir = None if image_dir is None else Path(image_dir)
    for stem in stems:
        gt_path, pred_path = gts[stem], preds[stem]
        # The page image: in image_dir if given, else next to the ground truth (ALTO and PAGE
        # exports usually sit beside their image).
        folders = ([img_dir] if img_dir is not None else []) + [Path(gt_path).parent]
        image = find_page_image(folders, stem, (Path(gt_path), Path(pred_path)))
        if image is None and (is_polygon_file(gt_path) or is_polygon_file(pred_path)):
            where = " or ".join(str(f) for f in folders)
            reason = f"no page image '{stem}.*' in {where} (needed for polygon files)"
            report.skipped.append((stem, reason))
            warnings.warn(f"page '{stem}' skipped: {reason}", stacklevel=2)
            continue
        try:
            contest, line = _score_pair(gt_path, pred_path, image, t_a, line_threshold)
        except ValueError as exc:  # GroundTruthError, PageLoadError, shape mismatch
            report.skipped.append((stem, str(exc)))
            warnings.warn(f"page '{stem}' skipped: {exc}", stacklevel=2)
            continue
        report.pages.append(PageScore(stem, str(gt_path), str(pred_path), contest, line))
    return report
