"""Writing results: ICDAR ``.dat``, 16-bit label PNG, colour overlays, PAGE XML 2019, ALTO 4.4
and JSON.

Every write is atomic: data goes to a temporary file in the target's directory which is then
renamed over the target, so a crash or a full disk never leaves a half-written file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import errno
import hashlib
import io as _stdio
import json
import os
import re
import secrets
import shutil
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from lxml import etree
from PIL import Image

from .model import LineSet, Segmentation, from_region_frame, to_region_frame

PAGE_NS = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"
RESOURCES = Path(__file__).resolve().parents[1] / "resources"
PAGE_XSD = RESOURCES / "pagecontent-2019-07-15.xsd"
ALTO_NS = "http://www.loc.gov/standards/alto/ns-v4#"
ALTO_XSD = RESOURCES / "alto-4-4.xsd"
ALTO_SCHEMA_URL = "http://www.loc.gov/standards/alto/v4/alto-4-4.xsd"
_XSI = "http://www.w3.org/2001/XMLSchema-instance"

# ----------------------------------------------------------------------------- atomic writes


#: A short tag of this machine in temporary names, so that a later run on the same machine
#: can tell a dead writer's leftovers (its process is gone) from a live one's.
_HOST_TAG = hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]
#: ``.<name>.<host>-<pid>-<random>.tmp<suffix>``: what :func:`_temp_name` makes.
_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-[0-9a-f]{8}\.tmp(?:\.[^.]*)?$")
#: Temporary names of tlseg before the host and process were in them: ``.<name>.<random>.tmp<suffix>``.
_OLD_TEMP_RE = re.compile(r"^\..+\.[0-9a-f]{8}\.tmp(?:\.[^.]*)?$")
#: An old-style temporary file (no writer named) this old is a dead run's (a page's outputs
#: are renamed within seconds of being written).
OLD_TEMP_AGE = 3600.0


def _temp_name(path: Path) -> Path:
    # Same directory (so os.replace is a rename on one file system), hidden, and keeping the
    # suffix so that writers choosing the format by extension still work.  The machine and
    # process in the name let the next run into the folder remove a killed run's leftovers
    # (remove_stale_temp_files) without touching a running writer's.
    return path.with_name(f".{path.name}.{_HOST_TAG}-{os.getpid()}-{secrets.token_hex(4)}.tmp{path.suffix}")


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True


def stale_temp_files(folder: str | os.PathLike) -> list[Path]:
    """Temporary files in ``folder`` that no running writer owns: written on this machine by a
    process that is gone (a run killed by ``kill -9``, a power cut), or in the old naming
    without a writer and older than :data:`OLD_TEMP_AGE`.  Files of writers on other machines
    (a shared folder under dask) are never listed."""
    out: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return out
    now = time.time()
    for entry in entries:
        if not entry.name.startswith(".") or ".tmp" not in entry.name:
            continue
        m = _TEMP_RE.match(entry.name)
        if m is not None:
            if m.group("host") == _HOST_TAG and not _process_alive(int(m.group("pid"))):
                out.append(Path(entry.path))
        elif _OLD_TEMP_RE.match(entry.name):
            with contextlib.suppress(OSError):
                if now - entry.stat().st_mtime > OLD_TEMP_AGE:
                    out.append(Path(entry.path))
    return sorted(out)


def remove_stale_temp_files(folder: str | os.PathLike) -> tuple[int, int]:
    """Delete :func:`stale_temp_files` of ``folder``; returns (files removed, bytes freed)."""
    n = size = 0
    for path in stale_temp_files(folder):
        with contextlib.suppress(OSError):
            nbytes = path.stat().st_size
            path.unlink()
            n += 1
            size += nbytes
    return n, size


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it is renamed to ``path``, on an
    exception it is removed and the exception propagates."""
    target = Path(path)
    tmp = _temp_name(target)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, then rename)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


# ----------------------------------------------------------------------------- label maps


def _check_labels(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"labels must be a 2-D (H, W) array, got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer) and labels.dtype != bool:
        raise ValueError(f"labels must be integers, got {labels.dtype}")
    return labels


def write_dat(path: str | os.PathLike, labels: np.ndarray) -> None:
    """ICDAR ``.dat``: every pixel's label as little-endian int32, row-major, no header."""
    labels = _check_labels(labels)
    data = np.ascontiguousarray(labels, dtype="<i4")
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        # Not ndarray.tofile: on a full disk it says "N requested and M written", no errno.
        fh.write(memoryview(data).cast("B"))


def read_dat(path: str | os.PathLike, shape: tuple[int, int]) -> np.ndarray:
    """Read an ICDAR ``.dat`` label map of ``shape`` (H, W) -> int32 ``(H, W)``.

    Raises ValueError naming the file when its size is not ``H * W * 4`` bytes.
    """
    h, w = (int(s) for s in shape)
    size = os.path.getsize(path)
    if size != h * w * 4:
        raise ValueError(f"'{os.fspath(path)}' holds {size} bytes, but a {h} x {w} page needs "
                         f"{h * w * 4} (4 bytes per pixel): wrong page size or not a .dat file")
    return np.fromfile(path, dtype="<i4").reshape(h, w).astype(np.int32)


def write_label_png(path: str | os.PathLike, labels: np.ndarray) -> None:
    """Label map as a 16-bit grey PNG (value = line id, 0 = background); at most 65535 lines."""
    labels = _check_labels(labels)
    if labels.size and (labels.min() < 0 or labels.max() > 65535):
        raise ValueError(f"a 16-bit label PNG holds labels 0..65535, got {labels.min()}..{labels.max()}")
    ok, buf = cv2.imencode(".png", labels.astype(np.uint16))
    if not ok:
        raise OSError(f"could not encode '{os.fspath(path)}' as PNG")
    atomic_write_bytes(path, buf.tobytes())


def label_colours(n: int) -> np.ndarray:
    """RGB colours ``(n + 1, 3)`` uint8 for labels 0..n: 0 is white, label k has hue
    ``k * 0.618...`` (golden ratio) so that neighbouring labels differ strongly."""
    k = np.arange(1, n + 1, dtype=np.float64)
    hue = (k * 0.6180339887498949) % 1.0
    # Alternate saturation/value a little so that hues that come close stay apart.
    sat = np.where(k % 2 == 0, 0.95, 0.75)
    val = np.where(k % 3 == 0, 0.70, 0.90)
    i = np.floor(hue * 6.0).astype(int) % 6
    f = hue * 6.0 - np.floor(hue * 6.0)
    p, q, t = val * (1 - sat), val * (1 - f * sat), val * (1 - (1 - f) * sat)
    r = np.choose(i, [val, q, p, p, t, val])
    g = np.choose(i, [t, val, val, q, p, p])
    b = np.choose(i, [p, p, t, val, val, q])
    rgb = np.stack([r, g, b], axis=-1)
    rgb = np.vstack([[[1.0, 1.0, 1.0]], rgb])
    return np.rint(rgb * 255.0).astype(np.uint8)


def colour_labels(labels: np.ndarray) -> np.ndarray:
    """Label map ``(H, W)`` -> RGB ``(H, W, 3)`` uint8: background white, a fixed colour per label."""
    labels = _check_labels(labels).astype(np.int64)
    labels = np.where(labels < 0, 0, labels)
    lut = label_colours(int(labels.max()) if labels.size else 0)
    return lut[labels]


def _clip_segment(p: np.ndarray, q: np.ndarray, w: float, h: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Liang-Barsky: the part of segment p-q inside [0, w] x [0, h], or None."""
    d = q - p
    t0, t1 = 0.0, 1.0
    for pk, qk in ((-d[0], p[0]), (d[0], w - p[0]), (-d[1], p[1]), (d[1], h - p[1])):
        if pk == 0:
            if qk < 0:
                return None
            continue
        t = qk / pk
        if pk < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return None
    return p + t0 * d, p + t1 * d


def render_overlay(gray: np.ndarray, labels: np.ndarray, lines: LineSet | None = None,
                   paths: Mapping[int, np.ndarray] | None = None) -> np.ndarray:
    """The page ``(H, W)`` uint8 with each labelled pixel in its line's colour and each
    regression line drawn over it -> RGB ``(H, W, 3)`` uint8. ``paths``: 0-based line index ->
    page points ``(P, 2)``, drawn instead of that line's straight segment (a line joined from
    a given line's pieces, :attr:`Segmentation.paths`).

    Unlabelled pixels keep their grey level, lightened so that the colours stand out.
    """
    gray = np.asarray(gray)
    labels = _check_labels(labels)
    if gray.shape != labels.shape:
        raise ValueError(f"page {gray.shape} and labels {labels.shape} differ in shape")
    n = max(int(labels.max()) if labels.size else 0, len(lines) if lines is not None else 0)
    lut = label_colours(n)
    paper = (255 - (255 - gray.astype(np.uint16)) * 3 // 5).astype(np.uint8)
    out = np.repeat(paper[..., None], 3, axis=2)
    mask = labels > 0
    out[mask] = lut[labels[mask]]
    if lines is not None and len(lines):
        h, w = gray.shape
        thick = max(1, round(min(h, w) / 600))
        segs = lines.segments()
        for k in range(len(lines)):
            path = (paths or {}).get(k)
            pieces = (zip(path[:-1], path[1:], strict=True) if path is not None and len(path) >= 2
                      else [(segs[k, 0], segs[k, 1])])
            # A darker shade of the line's colour, so the line reads over its own ink.
            colour = tuple(int(c) for c in (lut[k + 1].astype(np.int32) * 3 // 5))
            for p, q in pieces:
                if not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
                    continue
                clipped = _clip_segment(p, q, w - 1.0, h - 1.0)
                if clipped is None:
                    continue
                a, b = (tuple(int(round(c)) for c in pt) for pt in clipped)
                cv2.line(out, a, b, colour, thick, cv2.LINE_AA)
    return out


def write_png(path: str | os.PathLike, rgb: np.ndarray) -> None:
    """An RGB ``(H, W, 3)`` or grey ``(H, W)`` uint8 image as PNG."""
    rgb = np.asarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim not in (2, 3):
        raise ValueError(f"write_png needs uint8 (H, W) or (H, W, 3), got {rgb.dtype} {rgb.shape}")
    with atomic_path(path) as tmp:
        Image.fromarray(np.ascontiguousarray(rgb)).save(tmp, format="PNG")


# ----------------------------------------------------------------------------- PAGE XML


def xml_text(name: str | os.PathLike) -> str:
    """A file name as XML text: a name that is not UTF-8 on disk (Python holds its bytes as
    surrogates, which XML cannot carry) gets U+FFFD for each such byte."""
    text = os.fspath(name)
    if isinstance(text, bytes):
        return text.decode("utf-8", "replace")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "replace")
    return text


def _points(xy: np.ndarray) -> str:
    return " ".join(f"{int(x)},{int(y)}" for x, y in xy)


def _dedupe(xy: np.ndarray) -> np.ndarray:
    """Drop consecutive repeated points (incl. last == first)."""
    if len(xy) < 2:
        return xy
    keep = np.ones(len(xy), bool)
    keep[1:] = np.any(xy[1:] != xy[:-1], axis=1)
    xy = xy[keep]
    if len(xy) > 1 and np.all(xy[-1] == xy[0]):
        xy = xy[:-1]
    return xy


def _box(x0: int, y0: int, x1: int, y1: int, w: int, h: int) -> np.ndarray:
    """Box polygon covering pixels x0..x1, y0..y1, at least 1 pixel wide, inside the page."""
    if x1 <= x0:
        x0, x1 = (x0 - 1, x0) if x0 > 0 else (x0, min(x0 + 1, w - 1))
    if y1 <= y0:
        y0, y1 = (y0 - 1, y0) if y0 > 0 else (y0, min(y0 + 1, h - 1))
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.int64)


def line_polygon(xs: np.ndarray, ys: np.ndarray, phi: float, shape: tuple[int, int],
                 max_bins: int = 100) -> np.ndarray:
    """Outline of one line's pixels: int ``(n, 2)`` [x, y] polygon, simple, inside the page.

    In the line's region frame (angle ``phi``, radians) the pixels are cut into bins along the
    text; the polygon follows the top of every bin left to right and the bottom right to left,
    one vertex per bin centre. Both chains are monotone along the text and the top is above
    the bottom at every vertex, so the polygon cannot cross itself.
    """
    h, w = shape
    xs = np.asarray(xs, dtype=np.float64)
    ys = np.asarray(ys, dtype=np.float64)
    uv = to_region_frame(np.stack([xs, ys], axis=-1), phi)
    u, v = uv[:, 0], uv[:, 1]
    u0, u1 = float(u.min()), float(u.max())
    extent = u1 - u0 + 1.0
    n_bins = int(np.clip(extent / 8.0, 1, max_bins))
    width = extent / n_bins
    b = np.minimum(((u - u0) / width).astype(np.int64), n_bins - 1)
    top = np.full(n_bins, np.inf)
    bottom = np.full(n_bins, -np.inf)
    np.minimum.at(top, b, v)
    np.maximum.at(bottom, b, v)
    used = np.isfinite(top)
    centres = u0 - 0.5 + (np.arange(n_bins) + 0.5) * width
    cu, ct, cb = centres[used], top[used] - 1.0, bottom[used] + 1.0
    # End points at the ink's ends so that the first and last half-bins are covered.
    cu = np.concatenate([[u0 - 1.0], cu, [u1 + 1.0]])
    ct = np.concatenate([[ct[0]], ct, [ct[-1]]])
    cb = np.concatenate([[cb[0]], cb, [cb[-1]]])
    ring = np.concatenate([np.stack([cu, ct], -1), np.stack([cu, cb], -1)[::-1]])
    xy = from_region_frame(ring, phi)
    xy = np.rint(xy).astype(np.int64)
    xy[:, 0] = np.clip(xy[:, 0], 0, w - 1)
    xy[:, 1] = np.clip(xy[:, 1], 0, h - 1)
    xy = _dedupe(xy)
    if len(np.unique(xy, axis=0)) < 3 or _area(xy) == 0:
        return _box(int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()), w, h)
    return xy


def _area(xy: np.ndarray) -> float:
    x, y = xy[:, 0].astype(np.float64), xy[:, 1].astype(np.float64)
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def line_baseline(xs: np.ndarray, ys: np.ndarray, lines: LineSet, k: int, shape: tuple[int, int],
                  n_points: int = 2, path: np.ndarray | None = None) -> np.ndarray:
    """Baseline of line ``k`` (0-based row of ``lines``): int ``(n_points, 2)`` [x, y].

    Points on the regression line over the extent of the line's pixels along it, moved down
    across the text by ``sigma_t`` (the line's spread, pixels), clipped to the page. With a
    ``path`` (page points ``(P, 2)``, :attr:`Segmentation.paths`), that path's points, each
    moved by ``sigma_t`` across the path where it lies, to the same side.
    """
    h, w = shape
    a, b, phi, st = float(lines.a[k]), float(lines.b[k]), float(lines.phi[k]), float(lines.sigma_t[k])
    if path is not None and len(path) >= 2:
        pts = np.asarray(path, np.float64)
        tangent = np.gradient(pts, axis=0)
        tangent /= np.maximum(np.hypot(*tangent.T), 1e-12)[:, None]
        normal = np.stack([-tangent[:, 1], tangent[:, 0]], axis=1)
        down = from_region_frame(np.array([-a, 1.0]) / np.hypot(1.0, a), phi)  # the line's "down"
        normal[normal @ down < 0] *= -1.0
        xy = np.rint(pts + st * normal)
        xy[:, 0] = np.clip(xy[:, 0], 0, w - 1)
        xy[:, 1] = np.clip(xy[:, 1], 0, h - 1)
        return xy.astype(np.int64)
    uv = to_region_frame(np.stack([np.asarray(xs, float), np.asarray(ys, float)], -1), phi)
    norm = np.hypot(1.0, a)
    direction = np.array([1.0, a]) / norm
    normal = np.array([-a, 1.0]) / norm
    t = (uv[:, 0] + a * (uv[:, 1] - b)) / norm  # position along the line of each pixel's foot
    ts = np.linspace(t.min(), t.max(), max(2, n_points))
    pts = np.array([0.0, b]) + ts[:, None] * direction + st * normal
    xy = np.rint(from_region_frame(pts, phi))
    xy[:, 0] = np.clip(xy[:, 0], 0, w - 1)
    xy[:, 1] = np.clip(xy[:, 1], 0, h - 1)
    return xy.astype(np.int64)


def _line_pixels(labels: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """label -> (xs, ys) of its pixels, for every label > 0, in one pass (sort by label)."""
    flat = labels.ravel()
    idx = np.flatnonzero(flat > 0)
    if idx.size == 0:
        return {}
    lab = flat[idx]
    order = np.argsort(lab, kind="stable")
    idx, lab = idx[order], lab[order]
    cuts = np.flatnonzero(np.diff(lab)) + 1
    out = {}
    w = labels.shape[1]
    for chunk_idx, chunk_lab in zip(np.split(idx, cuts), np.split(lab, cuts), strict=True):
        out[int(chunk_lab[0])] = (chunk_idx % w, chunk_idx // w)
    return out


@dataclass(frozen=True)
class LineShape:
    """One exported line: its label ``k`` (1-based, XML id ``l{k}``), outline ``polygon`` and
    ``baseline``, int ``(n, 2)`` [x, y] page pixels (see :func:`line_polygon`, :func:`line_baseline`)."""

    label: int
    polygon: np.ndarray
    baseline: np.ndarray


@dataclass(frozen=True)
class RegionShape:
    """One exported region: its index (XML id ``r{index}``), ``hull`` (convex hull of its
    lines' outlines, int ``(n, 2)`` [x, y] pixels) and its lines in reading order."""

    index: int
    hull: np.ndarray
    lines: tuple[LineShape, ...]


def page_shapes(seg: Segmentation, image_shape: tuple[int, int]) -> list[RegionShape]:
    """The geometry every XML export writes: regions holding lines in the order of
    ``seg.regions`` (then any region only referenced by lines), each with one :class:`LineShape`
    per label with pixels, in label order. Lines without pixels are left out.

    Raises ValueError when the labels do not match ``image_shape`` (H, W) or name a line that
    ``seg.lines`` does not have.
    """
    h, w = (int(s) for s in image_shape)
    labels = np.asarray(seg.labels)
    if labels.shape != (h, w):
        raise ValueError(f"labels {labels.shape} do not match the image shape {(h, w)}")
    lines = seg.lines
    pixels = _line_pixels(labels)
    by_region: dict[int, list[int]] = {}
    for k in sorted(pixels):
        if not 1 <= k <= len(lines):
            raise ValueError(f"label {k} has no line (the segmentation has {len(lines)} lines)")
        by_region.setdefault(int(lines.region[k - 1]), []).append(k)
    # Regions in the segmentation's order, then any referenced by lines but not listed.
    order = [r.index for r in seg.regions if r.index in by_region]
    order += sorted(set(by_region) - set(order))
    out = []
    for r in order:
        shapes = []
        for k in by_region[r]:
            xs, ys = pixels[k]
            shapes.append(LineShape(k, line_polygon(xs, ys, float(lines.phi[k - 1]), (h, w)),
                                    line_baseline(xs, ys, lines, k - 1, (h, w),
                                                  path=getattr(seg, "paths", {}).get(k - 1))))
        allpts = np.concatenate([s.polygon for s in shapes]).astype(np.int32)
        hull = cv2.convexHull(allpts.reshape(-1, 1, 2)).reshape(-1, 2).astype(np.int64)
        if len(hull) < 3:
            x0, y0 = allpts.min(axis=0)
            x1, y1 = allpts.max(axis=0)
            hull = _box(int(x0), int(y0), int(x1), int(y1), w, h)
        out.append(RegionShape(r, hull, tuple(shapes)))
    return out


def write_page_xml(path: str | os.PathLike, seg: Segmentation, image_filename: str,
                   image_shape: tuple[int, int], preset: str | None = None) -> None:
    """PAGE XML 2019-07-15 of a segmentation: one TextRegion per region holding lines, one
    TextLine ``l{k}`` per label k with pixels (Coords outline and Baseline), reading order
    of the regions as in ``seg.regions``. Valid against the official schema. ``preset``: the
    parameter preset's name, recorded in the metadata's Comments."""
    h, w = (int(s) for s in image_shape)
    regions = page_shapes(seg, (h, w))
    now = _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()
    nsmap = {None: PAGE_NS, "xsi": _XSI}
    root = etree.Element(f"{{{PAGE_NS}}}PcGts", nsmap=nsmap)
    root.set(f"{{{_XSI}}}schemaLocation", f"{PAGE_NS} {PAGE_NS}/pagecontent.xsd")
    meta = etree.SubElement(root, f"{{{PAGE_NS}}}Metadata")
    etree.SubElement(meta, f"{{{PAGE_NS}}}Creator").text = "tlgui"
    etree.SubElement(meta, f"{{{PAGE_NS}}}Created").text = now
    etree.SubElement(meta, f"{{{PAGE_NS}}}LastChange").text = now
    if preset:
        etree.SubElement(meta, f"{{{PAGE_NS}}}Comments").text = f"tlgui parameter preset: {preset}"
    page = etree.SubElement(root, f"{{{PAGE_NS}}}Page", imageFilename=xml_text(image_filename),
                            imageWidth=str(w), imageHeight=str(h))
    if regions:
        ro = etree.SubElement(page, f"{{{PAGE_NS}}}ReadingOrder")
        group = etree.SubElement(ro, f"{{{PAGE_NS}}}OrderedGroup", id="ro_regions")
        for i, reg in enumerate(regions):
            etree.SubElement(group, f"{{{PAGE_NS}}}RegionRefIndexed", index=str(i), regionRef=f"r{reg.index}")
    for reg in regions:
        region = etree.SubElement(page, f"{{{PAGE_NS}}}TextRegion", id=f"r{reg.index}", type="paragraph")
        etree.SubElement(region, f"{{{PAGE_NS}}}Coords", points=_points(reg.hull))
        for line in reg.lines:
            tl = etree.SubElement(region, f"{{{PAGE_NS}}}TextLine", id=f"l{line.label}")
            etree.SubElement(tl, f"{{{PAGE_NS}}}Coords", points=_points(line.polygon))
            etree.SubElement(tl, f"{{{PAGE_NS}}}Baseline", points=_points(line.baseline))
    data = etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)
    atomic_write_bytes(path, data)


class _LocalSchemas(etree.Resolver):
    """Resolve the schemas an XSD imports (e.g. ALTO's ``xlink.xsd``, by any URL or relative
    path) to the copies in ``resources/``, so that validation never needs the network."""

    def resolve(self, system_url: str | None, public_id: str | None, context: object) -> Any:
        name = (system_url or "").replace("\\", "/").rsplit("/", 1)[-1]
        local = RESOURCES / name
        if name.endswith(".xsd") and local.is_file():
            return self.resolve_filename(str(local), context)
        return None


@lru_cache(maxsize=2)
def _schema(xsd: Path) -> etree.XMLSchema:
    parser = etree.XMLParser(no_network=True, resolve_entities=False)
    parser.resolvers.add(_LocalSchemas())
    return etree.XMLSchema(etree.parse(str(xsd), parser))


def _validate(path: str | os.PathLike, xsd: Path) -> list[str]:
    """Errors of an XML file against ``xsd`` ("line N: message"; empty list when valid)."""
    try:
        # From bytes: lxml cannot take a name that is not UTF-8 on disk (not even a file object's).
        with open(path, "rb") as fh:
            doc = etree.parse(_stdio.BytesIO(fh.read()), etree.XMLParser(resolve_entities=False, no_network=True,
                                                  huge_tree=True))
    except (etree.XMLSyntaxError, OSError) as exc:
        return [f"{os.fspath(path)}: not well-formed XML: {exc}"]
    schema = _schema(xsd)
    if schema.validate(doc):
        return []
    return [f"line {e.line}: {e.message}" for e in schema.error_log]


def validate_page_xml(path: str | os.PathLike) -> list[str]:
    """Errors of a PAGE XML file against the 2019-07-15 schema (empty list when valid)."""
    return _validate(path, PAGE_XSD)


# ----------------------------------------------------------------------------- ALTO XML


def _bbox(xy: np.ndarray) -> dict[str, str]:
    """ALTO ``HPOS/VPOS/WIDTH/HEIGHT`` (pixels) of the box spanned by the vertices ``xy``:
    the box polygon ``(HPOS, VPOS)..(HPOS + WIDTH, VPOS + HEIGHT)`` has the same corners."""
    x0, y0 = (int(v) for v in xy.min(axis=0))
    x1, y1 = (int(v) for v in xy.max(axis=0))
    return {"HPOS": str(x0), "VPOS": str(y0), "WIDTH": str(x1 - x0), "HEIGHT": str(y1 - y0)}


def write_alto_xml(path: str | os.PathLike, seg: Segmentation, image_filename: str,
                   image_shape: tuple[int, int]) -> None:
    """ALTO 4.4 XML of a segmentation, coordinates in pixels: a PrintSpace around all lines,
    one TextBlock ``r{i}`` per region holding lines (reading order as in ``seg.regions``), one
    TextLine ``l{k}`` per label k with pixels: its box, ``BASELINE`` and ``Shape/Polygon`` (the
    same outline and baseline as PAGE XML, :func:`page_shapes`) and one empty ``String`` (the
    schema needs one; there is no text). Valid against the official schema; no timestamp, so
    the same segmentation gives the same bytes."""
    h, w = (int(s) for s in image_shape)
    regions = page_shapes(seg, (h, w))
    q = f"{{{ALTO_NS}}}"
    root = etree.Element(f"{q}alto", nsmap={None: ALTO_NS, "xsi": _XSI}, SCHEMAVERSION="4.4")
    root.set(f"{{{_XSI}}}schemaLocation", f"{ALTO_NS} {ALTO_SCHEMA_URL}")
    desc = etree.SubElement(root, f"{q}Description")
    etree.SubElement(desc, f"{q}MeasurementUnit").text = "pixel"
    source = etree.SubElement(desc, f"{q}sourceImageInformation")
    etree.SubElement(source, f"{q}fileName").text = xml_text(image_filename)
    step = etree.SubElement(desc, f"{q}Processing", ID="proc1")
    etree.SubElement(step, f"{q}processingCategory").text = "contentGeneration"
    software = etree.SubElement(step, f"{q}processingSoftware")
    etree.SubElement(software, f"{q}softwareName").text = "tlgui"
    layout = etree.SubElement(root, f"{q}Layout")
    page = etree.SubElement(layout, f"{q}Page", ID="p1", PHYSICAL_IMG_NR="1", WIDTH=str(w), HEIGHT=str(h),
                            PROCESSING="proc1")
    if regions:
        space_box = _bbox(np.concatenate([reg.hull for reg in regions]))
    else:
        space_box = {"HPOS": "0", "VPOS": "0", "WIDTH": str(w), "HEIGHT": str(h)}
    space = etree.SubElement(page, f"{q}PrintSpace", ID="ps1", **space_box)
    for reg in regions:
        block = etree.SubElement(space, f"{q}TextBlock", ID=f"r{reg.index}", **_bbox(reg.hull))
        etree.SubElement(etree.SubElement(block, f"{q}Shape"), f"{q}Polygon", POINTS=_points(reg.hull))
        for line in reg.lines:
            box = _bbox(line.polygon)
            tl = etree.SubElement(block, f"{q}TextLine", ID=f"l{line.label}", **box,
                                  BASELINE=_points(line.baseline))
            etree.SubElement(etree.SubElement(tl, f"{q}Shape"), f"{q}Polygon", POINTS=_points(line.polygon))
            etree.SubElement(tl, f"{q}String", CONTENT="", **box)
    data = etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)
    atomic_write_bytes(path, data)


def validate_alto_xml(path: str | os.PathLike) -> list[str]:
    """Errors of an ALTO XML file against the ALTO 4.4 schema (empty list when valid); the
    schema's xlink import is read from ``resources/``, never from the network."""
    return _validate(path, ALTO_XSD)


# ----------------------------------------------------------------------------- all outputs


#: What :func:`write_outputs` writes: kind -> suffix of ``<stem><suffix>``.
OUTPUT_SUFFIXES: dict[str, str] = {"dat": ".dat", "labels": ".labels.png", "overlay": ".overlay.png",
                                   "page": ".page.xml", "alto": ".alto.xml", "json": ".json"}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (Path, os.PathLike)):
        return os.fspath(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


class OutputWriteError(OSError):
    """An output that could not be written (full disk, no permission...); the message names
    the output file, not its temporary name, and says that nothing of the page was kept."""


def tool_version() -> str:
    """What wrote the outputs, as recorded with them: ``tlseg <version>``."""
    from . import __version__

    return f"tlseg {__version__}"


def file_sha256(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def source_identity(path: str | os.PathLike) -> dict[str, Any]:
    """What identifies a page's source file: absolute path, size, modification time (ns) and
    SHA-256 of its bytes."""
    st = os.stat(path)
    return {"path": os.path.abspath(path), "size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
            "sha256": file_sha256(path)}


def initial_lines_identity(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a run started EM from (``--initial-lines``): the file's SHA-256 and whether its
    lines were locked; None when the run started from its own initial lines."""
    given = meta.get("initial_lines_file")
    if not isinstance(given, Mapping) or not given.get("path"):
        return None
    digest = None
    with contextlib.suppress(OSError):
        digest = file_sha256(given["path"])
    return {"sha256": digest, "locked": bool(given.get("locked"))}


def parameters_fingerprint(parameters: Mapping[str, Any]) -> str:
    """SHA-256 (16 hex digits) of a parameter set's canonical JSON (sorted keys)."""
    text = json.dumps(dict(parameters), sort_keys=True, default=_json_default, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


#: Outputs whose bytes are hashed in the record (small); the others are checked by size and
#: structure when a run resumes (engine.batch.check_outputs), which costs no full read.
HASHED_OUTPUTS = ("page", "alto")


def _output_entry(kind: str, path: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"size": int(path.stat().st_size)}
    if kind in HASHED_OUTPUTS:
        entry["sha256"] = file_sha256(path)
    return entry


def output_record(meta: Mapping[str, Any], outputs: Mapping[str, Path]) -> dict[str, Any]:
    """The record written with a page's outputs (``"record"`` in its JSON): what made them
    (source file identity, page index, preset, parameter fingerprint, tool) and what they are
    (size of each, SHA-256 of the XML files), so that a later run can tell whether they are
    still this page's, made the same way, and whole."""
    source = meta.get("source")
    identity = None
    if source:
        with contextlib.suppress(OSError):
            identity = source_identity(source)
    parameters = meta.get("parameters")
    return {"tool": tool_version(), "source": identity, "page_index": int(meta.get("page_index") or 0),
            "preset": meta.get("preset"), "initial_lines": initial_lines_identity(meta),
            "parameters": parameters_fingerprint(parameters) if isinstance(parameters, Mapping) else None,
            "outputs": {kind: _output_entry(kind, path) for kind, path in outputs.items()}}


def _write_error(exc: OSError, target: Path, stem: str) -> OutputWriteError:
    reason = exc.strerror or str(exc) or type(exc).__name__
    text = f"cannot write {target}: {reason}"
    if exc.errno == errno.ENOSPC:
        with contextlib.suppress(OSError):
            text += f" ({shutil.disk_usage(target.parent).free / 1e6:.1f} MB free)"
    text += f"; nothing of '{stem}' was kept"
    err = OutputWriteError(exc.errno or errno.EIO, " ".join(text.split()))
    err.filename = None
    return err


def write_outputs(outdir: str | os.PathLike, stem: str, gray: np.ndarray, seg: Segmentation,
                  image_filename: str, extra: Mapping[str, Any] | None = None) -> list[Path]:
    """Write ``<stem>.dat``, ``.labels.png``, ``.overlay.png``, ``.page.xml``, ``.alto.xml`` and
    ``.json`` into ``outdir`` (created if needed), all or nothing: every file is written under a
    temporary name first and the six are renamed only when all succeeded, the JSON last. The
    JSON holds ``extra``, the lines and :func:`output_record`. Returns the six paths in the order
    of :data:`OUTPUT_SUFFIXES`. A failed write raises :class:`OutputWriteError` naming the
    output."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    labels = np.asarray(seg.labels)
    h, w = labels.shape
    meta = dict(extra or {})
    meta.update({"lines": seg.lines.to_dict(), "n_lines": len(seg.lines), "image": str(image_filename),
                 "shape": [int(h), int(w)],
                 # The paths of lines joined from a given line's pieces (1-based line number).
                 "paths": {str(k + 1): np.round(np.asarray(p, float), 2).tolist()
                           for k, p in sorted(getattr(seg, "paths", {}).items())},
                 # Which fragments were merged into which line, and why (engine.row_merge).
                 "merges": [m.to_dict() for m in getattr(seg, "merges", ())]})
    targets = {kind: out / f"{stem}{suffix}" for kind, suffix in OUTPUT_SUFFIXES.items()}
    temps = {kind: _temp_name(p) for kind, p in targets.items()}
    done: list[Path] = []
    current = "dat"
    try:
        write_dat(temps["dat"], labels)
        current = "labels"
        write_label_png(temps["labels"], labels)
        current = "overlay"
        write_png(temps["overlay"], render_overlay(gray, labels, seg.lines, getattr(seg, "paths", None)))
        current = "page"
        write_page_xml(temps["page"], seg, image_filename, (h, w), meta.get("preset"))
        current = "alto"
        write_alto_xml(temps["alto"], seg, image_filename, (h, w))
        current = "json"
        meta["record"] = output_record(meta, {k: temps[k] for k in targets if k != "json"})
        text = json.dumps(meta, indent=2, default=_json_default, allow_nan=True)
        atomic_write_bytes(temps["json"], text.encode("utf-8"))
        for kind, target in targets.items():
            current = kind
            os.replace(temps[kind], target)
            done.append(target)
    except BaseException as exc:
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        # A rename failed half-way: take back the files already renamed, so that the set
        # on disk is never a mix of this run's and nothing.
        for target in done:
            with contextlib.suppress(OSError):
                target.unlink()
        if isinstance(exc, OSError) and not isinstance(exc, OutputWriteError):
            raise _write_error(exc, targets[current], stem) from None
        raise
    return list(targets.values())


@dataclasses.dataclass(frozen=True)
class SavedResult:
    """A page's outputs read back (:func:`read_outputs`): the segmentation (``sample_labels``
    empty, regions as recorded by the lines only), the JSON metadata and the page image it
    came from when that file still exists (else None)."""

    seg: Segmentation
    meta: dict[str, Any]
    image: Path | None


def read_outputs(outdir: str | os.PathLike, stem: str) -> SavedResult:
    """Read back what :func:`write_outputs` wrote for ``stem``: the labels from ``.dat`` (with
    the page shape of the JSON) or, without it, from ``.labels.png``; the lines and the
    metadata from ``.json``.  Raises OSError / ValueError naming the file when it cannot."""
    out = Path(outdir)
    meta_path = out / f"{stem}.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"'{meta_path}' is not JSON: {exc}") from None
    if not isinstance(meta, dict) or "lines" not in meta:
        raise ValueError(f"'{meta_path}' is not a tlseg result (no 'lines')")
    dat, png = out / f"{stem}.dat", out / f"{stem}.labels.png"
    if dat.is_file() and "shape" in meta:
        labels = read_dat(dat, tuple(meta["shape"]))
    elif png.is_file():
        labels = cv2.imread(str(png), cv2.IMREAD_UNCHANGED)
        if labels is None or labels.ndim != 2:
            raise ValueError(f"'{png}' is not a grey label image")
        labels = labels.astype(np.int32)
    else:
        raise OSError(f"no labels for '{stem}' in {out} (neither {dat.name} nor {png.name})")
    paths = {int(k) - 1: np.asarray(p, np.float64).reshape(-1, 2)
             for k, p in (meta.get("paths") or {}).items()}
    seg = Segmentation(labels=labels, lines=LineSet.from_dict(meta["lines"]),
                       sample_labels=np.zeros(0, np.int32), regions=(), paths=paths)
    image = None
    for candidate in (meta.get("source"), out / str(meta.get("image") or "")):
        if candidate and Path(candidate).is_file():
            image = Path(candidate)
            break
    return SavedResult(seg, meta, image)
