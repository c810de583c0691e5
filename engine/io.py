"""Loading page images into a :class:`~engine.model.Page`: grey uint8 ``(H, W)`` plus a bilevel flag.

Every failure is a :class:`PageLoadError` whose one-line message names the file, so the
command line and the GUI can show it as is.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .model import Page

#: Pages larger than this many pixels are refused (a 600 dpi A3 scan is ~70 megapixels), from
#: the file's header, before anything is decoded.  Pillow itself refuses images over twice its
#: ``Image.MAX_IMAGE_PIXELS`` (~179 megapixels by default) as decompression bombs, also from
#: the header; both refusals say how large the image is.
MAX_PIXELS = 200_000_000
#: File suffixes a page image may be named with (lower case): the raster formats a scan or a
#: photograph comes in, as far as this Pillow opens them (not icons, vector or container
#: formats, nor EPS, which needs Ghostscript).  Folders and glob patterns take these.
PAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".jpe", ".jfif", ".dib", ".gif",
                 ".webp", ".jp2", ".j2k", ".j2c", ".jpc", ".jpf", ".jpx", ".pbm", ".pgm", ".ppm",
                 ".pnm", ".pcx", ".tga", ".qoi", ".avif", ".apng")

# Pillow imports its format plugins on the first open (about 0.1 s); importing them with this
# module makes that a start-up cost, paid once with the other imports, not part of a page's
# time (the benchmark times pages from load to labels written, after the imports).
Image.init()
_OPENS = {ext for ext, fmt in Image.registered_extensions().items() if fmt in Image.OPEN}
#: File suffixes of the page formats load_page reads (lower case), in PAGE_SUFFIXES' order.
IMAGE_SUFFIXES: tuple[str, ...] = tuple(s for s in PAGE_SUFFIXES if s in _OPENS)
#: Formats that may hold several pages (frames): their outputs are named with the page index.
MULTI_PAGE_SUFFIXES = (".tif", ".tiff", ".gif", ".webp", ".apng")

# Pillow refuses images over twice MAX_IMAGE_PIXELS (179 megapixels by default) before
# MAX_PIXELS is reached; our own limit, checked from the header, is the one that applies.
if Image.MAX_IMAGE_PIXELS is not None and Image.MAX_IMAGE_PIXELS < MAX_PIXELS:
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS

_COLOUR_MODES = ("RGB", "RGBA", "RGBX", "RGBa", "CMYK", "YCbCr", "LAB", "HSV", "P", "PA", "LA", "La")


class PageLoadError(ValueError):
    """A page image that cannot be loaded; the message names the file and the reason."""


def _fail(path: str | os.PathLike, reason: str) -> PageLoadError:
    return PageLoadError(f"cannot read page '{os.fspath(path)}': {reason}")


def load_page(path: str | os.PathLike, page_index: int = 0) -> Page:
    """Load one page of an image file as grey levels.

    Parameters
    ----------
    path : str or PathLike
        PNG, JPEG (EXIF orientation applied), TIFF (incl. CCITT G4, 16-bit, multi-page), BMP,
        or anything else Pillow decodes.
    page_index : int
        Frame of a multi-page file (0-based).

    Returns
    -------
    Page
        ``gray`` uint8 ``(H, W)``; ``bilevel`` True when the file holds only black and white,
        up to lossy compression (then ink is ``gray < 128``); ``path`` as given.

    Raises
    ------
    PageLoadError
        Missing, unreadable, empty, non-image, truncated or too large file, or a page index
        out of range.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise _fail(path, "no such file") from None
    except PermissionError:
        raise _fail(path, "permission denied") from None
    except OSError as exc:
        raise _fail(path, exc.strerror or str(exc)) from None
    if p.is_dir():
        raise _fail(path, "is a directory, not an image file")
    if size == 0:
        raise _fail(path, "file is empty")
    try:
        fh = open(p, "rb")  # noqa: SIM115 - closed below, after the full decode
    except PermissionError:
        raise _fail(path, "permission denied") from None
    except OSError as exc:
        raise _fail(path, exc.strerror or str(exc)) from None
    with fh, warnings.catch_warnings():
        # Our own MAX_PIXELS check replaces Pillow's warning threshold (89 Mpx).
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        # Pillow's own complaints about a damaged file ("Corrupt EXIF data" ...) would reach
        # the terminal as two-line Python warnings: the file either loads, or fails below
        # with one line naming it.
        warnings.filterwarnings("ignore", category=UserWarning, module=r"PIL\.")
        try:
            im = Image.open(fh)
        except UnidentifiedImageError:
            raise _fail(path, "not an image file") from None
        except Image.DecompressionBombError as exc:
            raise _fail(path, _bomb_reason(exc)) from None
        except Exception as exc:  # Pillow's plugins raise many types on a damaged header.
            raise _fail(path, f"truncated or corrupt ({exc})") from None
        n_frames = int(getattr(im, "n_frames", 1))
        if not 0 <= page_index < n_frames:
            raise _fail(path, f"page {page_index} does not exist (the file has {n_frames} page(s))")
        try:
            if page_index:
                im.seek(page_index)
            w, h = im.size
            if w * h > MAX_PIXELS:
                raise _fail(path, f"image is too large ({w} x {h} = {w * h / 1e6:.0f} megapixels; "
                                  f"the limit is {MAX_PIXELS // 1_000_000})")
            if w == 0 or h == 0:
                raise _fail(path, "image has no pixels")
            # Force the full decode now so that a truncated file fails here, not later.
            im.load()
        except PageLoadError:
            raise
        except MemoryError:
            raise _fail(path, "not enough memory to decode the image") from None
        except Exception as exc:
            raise _fail(path, f"truncated or corrupt ({exc})") from None
        try:
            im = ImageOps.exif_transpose(im)
        except Exception:  # noqa: BLE001 - a damaged EXIF block must not refuse a good image
            pass
        gray, bilevel = _to_gray(im)
        # A black and white page saved in colour (JPEG) has no colour but the compression's.
        colour = None if bilevel and im.mode in _COLOUR_MODES and im.mode not in ("1", "L") else _colour(im)
    return Page(gray=gray, bilevel=bilevel, path=os.fspath(path), colour=colour)


@dataclass(frozen=True)
class PageHeader:
    """What a page image's header says, read without decoding its pixels."""

    width: int
    height: int
    mode: str
    frames: int

    @property
    def pixels(self) -> int:
        return self.width * self.height

    @property
    def colour(self) -> bool:
        """Whether the decoded page keeps a colour copy (see :func:`load_page`)."""
        return self.mode in _COLOUR_MODES and self.mode not in ("LA", "La")


def read_header(path: str | os.PathLike, page_index: int = 0) -> PageHeader:
    """Size, mode and number of pages of an image file, from its header (nothing decoded);
    :class:`PageLoadError` when the file cannot be opened as an image."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(path) as im:
                frames = int(getattr(im, "n_frames", 1)) if Path(path).suffix.lower() in MULTI_PAGE_SUFFIXES else 1
                if page_index and 0 < page_index < frames:
                    im.seek(page_index)
                w, h = im.size
                mode = im.mode
    except Image.DecompressionBombError as exc:
        raise _fail(path, _bomb_reason(exc)) from None
    except Exception as exc:  # noqa: BLE001 - any failure to read a header
        raise _fail(path, f"cannot read its header ({exc})") from None
    return PageHeader(int(w), int(h), str(mode), frames)


def _colour(im: Image.Image) -> np.ndarray | None:
    """RGB uint8 ``(H, W, 3)`` of a colour image (stamps and rules are told by their colour);
    None for grey and bilevel images."""
    if im.mode not in _COLOUR_MODES or im.mode in ("LA", "La"):
        return None
    try:
        return np.asarray(im.convert("RGB"))
    except Exception:  # noqa: BLE001 - colour is a help, never a reason to refuse a page
        return None


def exif_orientation(path: str | os.PathLike) -> int:
    """The EXIF orientation tag (1-8) of an image file; 1 (as stored) when it has none or the
    file cannot be read."""
    try:
        with Image.open(path) as im:
            value = int(im.getexif().get(0x0112, 1))
    except Exception:  # noqa: BLE001 - no readable tag means the pixels are shown as stored
        return 1
    return value if 1 <= value <= 8 else 1


def orient_like_exif(arr: np.ndarray, orientation: int) -> np.ndarray:
    """An array ``(H, W, ...)`` in the stored pixels' frame turned as :func:`load_page` turns
    the page for EXIF ``orientation`` (Pillow's ``exif_transpose``): e.g. ground truth drawn
    on the stored pixels, mapped onto the page as it is shown."""
    ops = {2: lambda a: a[:, ::-1], 3: lambda a: a[::-1, ::-1], 4: lambda a: a[::-1],
           5: lambda a: a.swapaxes(0, 1), 6: lambda a: np.rot90(a, -1),
           7: lambda a: a.swapaxes(0, 1)[::-1, ::-1], 8: lambda a: np.rot90(a, 1)}
    op = ops.get(int(orientation))
    return arr if op is None else np.ascontiguousarray(op(arr))


def _bomb_reason(exc: Exception) -> str:
    """Pillow's decompression-bomb refusal as 'image is too large (N megapixels; the limit is M)'."""
    sizes = re.findall(r"\((\d+) pixels\)|(\d+) pixels", str(exc))
    numbers = [int(a or b) for a, b in sizes]
    if len(numbers) >= 2:
        return (f"image is too large ({numbers[0] / 1e6:.0f} megapixels; the limit is "
                f"{min(numbers[1], MAX_PIXELS) // 1_000_000})")
    return f"image is too large (Pillow refuses it as a decompression bomb: {exc})"


def _to_gray(im: Image.Image) -> tuple[np.ndarray, bool]:
    """A decoded Pillow image -> (grey uint8 (H, W), bilevel)."""
    mode = im.mode
    if mode == "1":
        arr = np.asarray(im, dtype=bool)
        return np.where(arr, np.uint8(255), np.uint8(0)), True
    if mode.startswith("I") or mode == "F":
        return _high_depth_to_gray(np.asarray(im))
    if mode in _COLOUR_MODES:
        im = _flatten_colour(im)
    elif mode != "L":
        im = im.convert("L")
    return black_and_white(np.array(im, dtype=np.uint8))


def _flatten_colour(im: Image.Image) -> Image.Image:
    """Colour or palette image -> 'L', transparent parts composited on white paper."""
    has_alpha = im.mode in ("RGBA", "RGBa", "LA", "La", "PA") or (
        im.mode == "P" and "transparency" in im.info)
    if has_alpha:
        rgba = im.convert("RGBA")
        paper = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(paper, rgba).convert("L")
    if im.mode in ("CMYK", "YCbCr", "LAB", "HSV", "RGBX"):
        im = im.convert("RGB")
    return im.convert("L")


def _high_depth_to_gray(arr: np.ndarray) -> tuple[np.ndarray, bool]:
    """16/32-bit or float grey -> uint8 scaled by the data's maximum.

    Scanners often store 10-14 bit data in 16-bit containers; dividing by 256 would make
    such pages nearly black, so the scale comes from the largest value present.
    """
    arr = np.asarray(arr)
    if arr.ndim == 3:  # e.g. 16-bit RGB decoded to (H, W, 3)
        arr = arr[..., :3].astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    a = arr.astype(np.float64)
    a[~np.isfinite(a)] = 0.0
    lo = min(float(a.min()), 0.0)
    hi = float(a.max())
    if hi <= lo:
        gray = np.zeros(a.shape, np.uint8)
    else:
        gray = np.rint((a - lo) * (255.0 / (hi - lo))).astype(np.uint8)
    return black_and_white(gray)


#: Grey levels more than 32 from black and from white: neither ink nor paper of a binarised page.
_MID_LEVELS = (32, 224)
#: A page is bilevel when at most this share of its pixels that are not white lie at middle
#: levels. A binarised page saved as JPEG is no longer two-level: the compression rings round
#: every stroke. On the 40 binarised dev pages saved at JPEG quality 95 / 75 / 50 (by OpenCV,
#: then loaded here) the share is at most 0.0 / 0.005 / 0.18; on the 39 grey dev scans
#: (poilus-dev, cremma20, kraken-sample) at least 0.51 (cremma20's clean white letters), the
#: paper of most of them counting too. 0.1 keeps every grey scan grey with a margin of 5 and
#: takes binarised pages at quality 75 and better, with a margin of 20 (at 50, 21 of the 40
#: are taken, the others stay grey as before).
BILEVEL_MID_SHARE = 0.1


def _two_levels(gray: np.ndarray) -> tuple[bool, bool]:
    """Whether an 8-bit page is black and white, and whether exactly so: it holds no level
    other than 0 and 255, or (a binarised page saved lossy) it holds levels near black and
    near white and at most :data:`BILEVEL_MID_SHARE` of its pixels that are not white lie
    between. Without the second test a binarised page saved as JPEG took the grey pages' path
    (local binarisation, the page area on grey levels, blocks of words across the main text),
    and moc-train fell from 41.8 / 48.9 to 35.9 / 39.0 % FM / line IU at quality 90
    (docs/history.md, 2026-11-28)."""
    # OpenCV's histogram: np.bincount takes 0.2 s on a 20-megapixel page.
    g = np.ascontiguousarray(gray, dtype=np.uint8)
    hist = cv2.calcHist([g], [0], None, [256], [0, 256]).ravel()
    if hist[1:255].sum() == 0:
        return True, True
    lo, hi = _MID_LEVELS
    # Black ink on white paper: both there, and few levels between.
    if hist[:lo].sum() == 0 or hist[hi:].sum() == 0:
        return False, False
    return bool(hist[lo:hi].sum() <= BILEVEL_MID_SHARE * hist[:hi].sum()), False


def black_and_white(gray: np.ndarray) -> tuple[np.ndarray, bool]:
    """``gray`` uint8 ``(H, W)`` and whether the page is bilevel (:func:`_two_levels`). A page
    bilevel up to lossy compression comes back as the black and white it was saved from
    (``gray < 128``: 0, else 255), so that every stage sees what it would see of the
    uncompressed file: the page area, found on grey levels, moved by 640 pixels on moc_train_9
    saved at JPEG quality 90, and one region with it."""
    bilevel, exactly = _two_levels(gray)
    if not bilevel or exactly:
        return gray, bilevel
    return np.where(gray < 128, np.uint8(0), np.uint8(255)), True


def page_from_array(arr: np.ndarray) -> Page:
    """A :class:`Page` from an array already in memory.

    Parameters
    ----------
    arr : ndarray
        uint8 grey ``(H, W)``; bool ``(H, W)`` with True = ink (-> 0, paper -> 255);
        RGB(A) uint8 ``(H, W, 3|4)`` (alpha composited on white); other integer or float grey
        arrays are scaled by their maximum.

    Returns
    -------
    Page
        With ``path`` empty.
    """
    arr = np.asarray(arr)
    if arr.ndim not in (2, 3) or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"a page must be a non-empty (H, W) or (H, W, 3|4) array, got shape {arr.shape}")
    if arr.ndim == 3:
        if arr.shape[2] not in (3, 4):
            raise ValueError(f"a colour page must have 3 or 4 channels, got shape {arr.shape}")
        if arr.dtype != np.uint8:
            raise ValueError(f"a colour page must be uint8, got {arr.dtype}")
        im = Image.fromarray(np.ascontiguousarray(arr), "RGBA" if arr.shape[2] == 4 else "RGB")
        gray, bilevel = black_and_white(np.array(_flatten_colour(im), dtype=np.uint8))
        return Page(gray=gray, bilevel=bilevel, colour=None if bilevel else np.array(arr[:, :, :3]))
    if arr.dtype == bool:
        return Page(gray=np.where(arr, np.uint8(0), np.uint8(255)), bilevel=True)
    if arr.dtype == np.uint8:
        gray, bilevel = black_and_white(np.array(arr, dtype=np.uint8))  # own copy: the caller may change theirs
        return Page(gray=gray, bilevel=bilevel)
    if np.issubdtype(arr.dtype, np.floating) and np.nanmax(arr) <= 1.0 and np.nanmin(arr) >= 0.0:
        # Floats in [0, 1] (scikit-image's convention) -> 0..255.
        a = np.nan_to_num(arr.astype(np.float64))
        gray, bilevel = black_and_white(np.rint(a * 255.0).astype(np.uint8))
        return Page(gray=gray, bilevel=bilevel)
    if np.issubdtype(arr.dtype, np.number):
        gray, bilevel = _high_depth_to_gray(arr)
        return Page(gray=gray, bilevel=bilevel)
    raise ValueError(f"cannot make a page from an array of dtype {arr.dtype}")
