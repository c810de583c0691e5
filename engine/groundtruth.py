"""Reading line ground truth (or results) as a label map int32 ``(H, W)``: 0 = no line, 1..n = lines.

Formats, detected from the extension and the content:

* ICDAR ``.dat``: raw little-endian int32 per pixel (the page shape must be given);
* label images (PNG, TIFF, BMP, 8 or 16 bit): value = line id;
* PAGE XML (any ``pagecontent/<date>`` namespace): ``TextLine/Coords@points`` or the old
  ``Coords/Point`` children;
* ALTO v2-v4: ``TextLine/Shape/Polygon@POINTS``, else the ``HPOS/VPOS/WIDTH/HEIGHT`` box.

Polygons are rasterised (clipped at the page edge; a line lying wholly outside the page is
dropped with a warning naming the file); where they overlap the smaller one wins, and with
``ink`` only ink pixels keep a label. Line ids are renumbered 1..n in document (or label value)
order.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from pathlib import Path

import cv2
import numpy as np
from lxml import etree
from PIL import Image, UnidentifiedImageError

from .export import read_dat

_PAGE_NS = re.compile(r"^http://schema\.primaresearch\.org/PAGE/gts/pagecontent/\d{4}-\d{2}-\d{2}$")
_ALTO_NS = re.compile(r"^http://(www\.)?loc\.gov/standards/alto(/ns-v\d+#|/v\d+/?|/?)$")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
XML_SUFFIXES = (".xml", ".page", ".alto")
#: A polygon point this many page sizes (widths, heights) off the page is a wrong coordinate
#: (1e10, a unit mix-up), dropped from its line; nearer points are real lines reaching over
#: the page's edge, cut there.
FAR_OFF = 10


class GroundTruthError(ValueError):
    """Ground truth that cannot be read; the message names the file."""


def _fail(path: str | os.PathLike, reason: str) -> GroundTruthError:
    return GroundTruthError(f"cannot read ground truth '{os.fspath(path)}': {reason}")


def read_label_map(path: str | os.PathLike, shape: tuple[int, int] | None = None,
                   ink: np.ndarray | None = None, what: str = "ground truth") -> np.ndarray:
    """Read a file of lines as a label map.

    Parameters
    ----------
    path : str or PathLike
        ``.dat``, a label image, PAGE XML or ALTO XML.
    shape : (H, W), optional
        Page size in pixels. Needed for ``.dat``; for the other formats it is checked against
        the file's own size when both are known.
    ink : bool ndarray (H, W), optional
        When given, only ink pixels keep a label (the others become 0).
    what : str
        What the file is, for messages ("ground truth", "result").

    Returns
    -------
    ndarray of int32, shape (H, W)
        0 = no line, 1..n = line (document order for XML, label-value order for images).

    Raises
    ------
    GroundTruthError
        Unreadable file, unknown format, or a size that contradicts ``shape``/``ink``.
    """
    try:
        return _read_label_map(path, shape, ink)
    except GroundTruthError as exc:
        if what == "ground truth":
            raise
        raise GroundTruthError(str(exc).replace("cannot read ground truth", f"cannot read {what}", 1)) from None


def _read_label_map(path: str | os.PathLike, shape: tuple[int, int] | None,
                    ink: np.ndarray | None) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise _fail(path, "no such file" if not p.exists() else "not a regular file")
    if shape is None and ink is not None:
        shape = np.shape(ink)
    if shape is not None:
        shape = (int(shape[0]), int(shape[1]))
    if ink is not None and np.shape(ink) != shape:
        raise _fail(path, f"ink mask shape {np.shape(ink)} differs from page shape {shape}")
    suffix = p.suffix.lower()
    if suffix == ".dat":
        if shape is None:
            raise _fail(path, ".dat files have no header: the page shape (H, W) must be given")
        try:
            labels = read_dat(p, shape)
        except ValueError as exc:
            raise _fail(path, str(exc)) from None
    elif suffix in XML_SUFFIXES or _looks_like_xml(p):
        labels = _read_xml(p, shape)
    else:
        labels = _read_label_image(p, shape)
    if ink is not None:
        labels = np.where(np.asarray(ink, dtype=bool), labels, 0)
    return renumber(labels)


def renumber(labels: np.ndarray) -> np.ndarray:
    """Labels ``> 0`` mapped to 1..n keeping their order; everything else to 0 -> int32."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return labels.astype(np.int32)
    lo, hi = int(labels.min()), int(labels.max())
    if hi <= 0:
        return np.zeros(labels.shape, np.int32)
    if lo >= 0 and hi <= 1 << 22:
        # A lookup table avoids sorting every pixel (np.unique) on 20-megapixel pages.
        present = np.bincount(labels.ravel(), minlength=hi + 1) > 0
        present[0] = False
        lut = np.zeros(hi + 1, np.int32)
        lut[present] = np.arange(1, int(present.sum()) + 1, dtype=np.int32)
        return lut[labels]
    values, inverse = np.unique(labels, return_inverse=True)
    new = np.where(values > 0, np.cumsum(values > 0), 0).astype(np.int32)
    return new[inverse.reshape(labels.shape)]


def _looks_like_xml(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"<")


# ----------------------------------------------------------------------------- label images


def _read_label_image(path: Path, shape: tuple[int, int] | None) -> np.ndarray:
    try:
        with Image.open(path) as im:
            im.load()
            mode = im.mode
            arr = np.asarray(im)
    except UnidentifiedImageError:
        raise _fail(path, "neither XML, .dat nor an image file") from None
    except Exception as exc:
        raise _fail(path, f"truncated or corrupt image ({exc})") from None
    if arr.ndim == 3:
        channels = arr[..., :3] if arr.shape[2] >= 3 else arr[..., :1]
        if np.any(channels != channels[..., :1]):
            raise _fail(path, f"a colour ({mode}) image is not a label map: label images must "
                              "be grey, value = line id")
        arr = channels[..., 0]
    if arr.dtype == bool:
        arr = arr.astype(np.uint8)
    if not np.issubdtype(arr.dtype, np.integer):
        raise _fail(path, f"label image of type {arr.dtype}: labels must be integers")
    if shape is not None and arr.shape != shape:
        raise _fail(path, f"label image is {arr.shape[1]} x {arr.shape[0]} (W x H) but the page is "
                          f"{shape[1]} x {shape[0]}")
    return arr.astype(np.int64)


# ----------------------------------------------------------------------------- XML


def _read_xml(path: Path, shape: tuple[int, int] | None) -> np.ndarray:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    try:
        with open(path, "rb") as fh:  # bytes: lxml cannot take a name that is not UTF-8 on disk
            root = etree.parse(io.BytesIO(fh.read()), parser).getroot()
    except etree.XMLSyntaxError as exc:
        raise _fail(path, f"malformed XML ({exc})") from None
    except OSError as exc:
        raise _fail(path, f"cannot open ({exc})") from None
    qname = etree.QName(root)
    ns, local = qname.namespace or "", qname.localname
    if local == "PcGts" and _PAGE_NS.match(ns):
        polygons, ids, size = _page_polygons(path, root, ns)
    elif local.lower() == "alto" and _ALTO_NS.match(ns):
        polygons, ids, size, scale = _alto_polygons(path, root, ns, shape)
        if scale is not None:
            polygons = [poly * scale for poly in polygons]
    else:
        raise _fail(path, f"unknown XML root <{local}> in namespace '{ns or 'none'}': expected "
                          "PAGE (PcGts) or ALTO")
    if size is not None and shape is not None and size != shape:
        raise _fail(path, f"the XML describes a {size[1]} x {size[0]} (W x H) page but the page is "
                          f"{shape[1]} x {shape[0]}")
    shape = shape or size
    if shape is None:
        raise _fail(path, "the XML gives no page size: pass the page shape (H, W)")
    polygons = _clip_to_page(path, polygons, ids, shape)
    return rasterise(polygons, shape)


def _clip_to_page(path: Path, polygons: list[np.ndarray], ids: list[str],
                  shape: tuple[int, int]) -> list[np.ndarray]:
    """Lines as far as they lie on the page, each change said in one warning naming the
    file: a line wholly outside is dropped; a point more than a page's size off the page
    (:data:`FAR_OFF` page sizes: a coordinate typed wrong, 1e10) is dropped from its line, whose
    other points keep their shape; a line reaching over the edge is cut there (rasterise)."""
    h, w = shape
    outside, far_lines, far_points, over = [], [], 0, []
    kept: list[np.ndarray] = []
    for line_id, pts in zip(ids, polygons, strict=True):
        xy = np.asarray(pts, dtype=np.float64)
        far = ((xy[:, 0] < -FAR_OFF * w) | (xy[:, 0] > (FAR_OFF + 1) * w) | (xy[:, 1] < -FAR_OFF * h)
               | (xy[:, 1] > (FAR_OFF + 1) * h) | ~np.isfinite(xy).all(axis=1))
        if far.any():
            far_lines.append(line_id)
            far_points += int(far.sum())
            xy = xy[~far]
        if len(xy) == 0 or not _meets_page(xy, shape):
            outside.append(line_id)
            kept.append(np.zeros((0, 2)))
            continue
        r = np.rint(xy)
        if r[:, 0].min() < 0 or r[:, 1].min() < 0 or r[:, 0].max() > w - 1 or r[:, 1].max() > h - 1:
            over.append(line_id)
        kept.append(xy)

    def shown(items: list[str]) -> str:
        return ", ".join(repr(i) for i in items[:5]) + (" ..." if len(items) > 5 else "")

    if far_lines:
        warnings.warn(f"{path}: {far_points} point(s) of {len(far_lines)} line(s) lie more than {FAR_OFF} "
                      f"page sizes off the {w} x {h} page and are dropped: {shown(far_lines)}", stacklevel=4)
    if outside:
        warnings.warn(f"{path}: {len(outside)} line(s) lie wholly outside the {w} x {h} "
                      f"page and are ignored: {shown(outside)}", stacklevel=4)
    if over:
        warnings.warn(f"{path}: {len(over)} line(s) reach over the edge of the {w} x {h} page and are "
                      f"clipped to it: {shown(over)}", stacklevel=4)
    return kept


def _meets_page(pts: np.ndarray, shape: tuple[int, int]) -> bool:
    """Whether a polygon's bounding box (rounded to pixels) overlaps the page."""
    xy = np.rint(np.asarray(pts, dtype=np.float64))
    return bool(xy[:, 0].max() >= 0 and xy[:, 1].max() >= 0
                and xy[:, 0].min() <= shape[1] - 1 and xy[:, 1].min() <= shape[0] - 1)


def _attr_size(path: Path, el: etree._Element, wname: str, hname: str) -> tuple[int, int] | None:
    w, h = el.get(wname), el.get(hname)
    if w is None or h is None:
        return None
    try:
        size = (int(round(float(h))), int(round(float(w))))
    except ValueError:
        raise _fail(path, f"page size {wname}={w!r} {hname}={h!r} is not a number") from None
    return size if size[0] > 0 and size[1] > 0 else None


def _parse_points(path: Path, text: str, line_id: str) -> np.ndarray:
    """'x,y x,y ...' (PAGE) or 'x y x y ...' / 'x,y x,y' (ALTO) -> float (n, 2)."""
    nums = _NUMBER.findall(text)
    if len(nums) % 2:
        raise _fail(path, f"line {line_id!r}: odd number of coordinates in {text[:60]!r}")
    try:
        return np.array(nums, dtype=np.float64).reshape(-1, 2)
    except ValueError:
        raise _fail(path, f"line {line_id!r}: bad coordinates {text[:60]!r}") from None


def _page_polygons(path: Path, root: etree._Element, ns: str):
    q = f"{{{ns}}}"
    page = root.find(f"{q}Page")
    if page is None:
        raise _fail(path, "PAGE XML without a <Page> element")
    size = _attr_size(path, page, "imageWidth", "imageHeight")
    polygons, ids = [], []
    for tl in page.iter(f"{q}TextLine"):
        coords = tl.find(f"{q}Coords")
        if coords is None:
            continue
        line_id = tl.get("id", "?")
        if coords.get("points"):
            pts = _parse_points(path, coords.get("points"), line_id)
        else:  # PAGE 2010-2013 style: <Coords><Point x= y=/>...</Coords>
            try:
                pts = np.array([[float(pt.get("x")), float(pt.get("y"))]
                                for pt in coords.findall(f"{q}Point")], dtype=np.float64).reshape(-1, 2)
            except (TypeError, ValueError):
                raise _fail(path, f"line {line_id!r}: Point without numeric x/y") from None
        if len(pts):
            polygons.append(pts)
            ids.append(line_id)
    return polygons, ids, size


def _alto_polygons(path: Path, root: etree._Element, ns: str, shape: tuple[int, int] | None):
    q = f"{{{ns}}}" if ns else ""
    unit_el = root.find(f"{q}Description/{q}MeasurementUnit")
    unit = (unit_el.text or "").strip().lower() if unit_el is not None else "pixel"
    page = root.find(f".//{q}Page")
    size = _attr_size(path, page, "WIDTH", "HEIGHT") if page is not None else None
    scale = None
    if unit != "pixel":
        # mm10 / inch1200 coordinates: scale to pixels via the page's size in the same unit.
        if size is None or shape is None:
            raise _fail(path, f"ALTO coordinates in '{unit}' need the Page WIDTH/HEIGHT and the page "
                              "shape to convert to pixels")
        scale = np.array([shape[1] / size[1], shape[0] / size[0]])
        size = None  # not pixels, so not comparable with the page shape
    polygons, ids = [], []
    for tl in root.iter(f"{q}TextLine"):
        line_id = tl.get("ID", "?")
        poly = tl.find(f"{q}Shape/{q}Polygon")
        if poly is not None and poly.get("POINTS"):
            pts = _parse_points(path, poly.get("POINTS"), line_id)
        else:
            try:
                x, y = float(tl.get("HPOS")), float(tl.get("VPOS"))
                w, h = float(tl.get("WIDTH")), float(tl.get("HEIGHT"))
            except (TypeError, ValueError):
                continue  # a line without geometry cannot be scored
            pts = np.array([[x, y], [x + w, y], [x + w, y + h], [x, y + h]])
        if len(pts):
            polygons.append(pts)
            ids.append(line_id)
    return polygons, ids, size, scale


def rasterise(polygons: list[np.ndarray], shape: tuple[int, int]) -> np.ndarray:
    """Polygons (each float ``(n, 2)`` [x, y], page pixels) -> int32 ``(H, W)`` label map with
    polygon i labelled i+1. Polygons are cut at the page edge (the part inside keeps its
    shape; a polygon wholly outside labels nothing); where polygons overlap the one covering
    fewer pixels wins (a small interlinear line inside a big one keeps its pixels)."""
    h, w = shape
    labels = np.zeros((h, w), np.int32)
    pieces = []
    # Far-away points are pulled in to keep OpenCV's fixed-point arithmetic in range; only
    # coordinates millions of pixels off the page can change what falls inside.
    far = float(1 << 22)
    for i, pts in enumerate(polygons):
        if len(pts) == 0:
            continue
        xy = np.rint(np.asarray(pts, dtype=np.float64))
        xy = np.clip(xy, -far, far).astype(np.int64)
        x0, y0 = np.maximum(xy.min(axis=0), 0)
        x1, y1 = np.minimum(xy.max(axis=0), [w - 1, h - 1])
        if x1 < x0 or y1 < y0:
            continue  # wholly outside the page
        # Rasterise in the polygon's box on the page: a full-page mask per line would cost
        # H*W each. fillPoly clips the polygon to the mask, so the inside keeps its shape.
        mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
        cv2.fillPoly(mask, [(xy - [x0, y0]).astype(np.int32).reshape(-1, 1, 2)], 1)
        pieces.append((int(mask.sum()), i, x0, y0, mask.astype(bool)))
    # Largest first, so that smaller polygons are painted over them.
    for _, i, x0, y0, mask in sorted(pieces, key=lambda t: (-t[0], t[1])):
        view = labels[y0:y0 + mask.shape[0], x0:x0 + mask.shape[1]]
        view[mask] = i + 1
    return labels
