"""engine.io: every supported format loads to grey uint8 with the right shape and bilevel flag,
and every broken file gives a PageLoadError naming it."""

from __future__ import annotations

import io
import os
import sys

import numpy as np
import pytest
from PIL import Image

from engine.io import PageLoadError, load_page, page_from_array


def _page_array(h: int = 40, w: int = 60) -> np.ndarray:
    """A grey page: white paper, a dark horizontal stroke, a gradient block (many levels)."""
    a = np.full((h, w), 255, np.uint8)
    a[10:14, 5:50] = 20
    a[25:35, 5:45] = np.linspace(60, 200, 40).astype(np.uint8)[None, :]
    return a


def test_png_grey(tmp_path):
    arr = _page_array()
    Image.fromarray(arr).save(tmp_path / "p.png")
    page = load_page(tmp_path / "p.png")
    assert page.gray.dtype == np.uint8 and page.gray.shape == (40, 60)
    assert np.array_equal(page.gray, arr)
    assert page.bilevel is False
    assert page.path == str(tmp_path / "p.png")


def test_png_rgb_to_grey(tmp_path):
    rgb = np.zeros((20, 30, 3), np.uint8)
    rgb[..., 0] = 255  # pure red
    rgb[:, 15:] = 255  # right half white
    Image.fromarray(rgb).save(tmp_path / "c.png")
    page = load_page(tmp_path / "c.png")
    assert page.gray.shape == (20, 30)
    # ITU-R 601 luma of pure red is 0.299 * 255 = 76.
    assert abs(int(page.gray[0, 0]) - 76) <= 1
    assert page.gray[0, 20] == 255


def test_png_rgba_composited_on_white(tmp_path):
    rgba = np.zeros((10, 10, 4), np.uint8)  # black, fully transparent ...
    rgba[5:, :, 3] = 255  # ... except the bottom half, opaque black
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    page = load_page(tmp_path / "a.png")
    assert np.all(page.gray[:5] == 255)
    assert np.all(page.gray[5:] == 0)


def test_png_palette(tmp_path):
    idx = np.zeros((12, 12), np.uint8)
    idx[3:6] = 1
    idx[8:10] = 2  # a mid grey: a grey page, not a black and white one
    im = Image.fromarray(idx, "P")
    im.putpalette([255, 255, 255, 0, 0, 128, 120, 120, 120] + [0] * 759)
    im.save(tmp_path / "pal.png")
    page = load_page(tmp_path / "pal.png")
    assert page.gray[0, 0] == 255
    assert page.gray[4, 4] < 30  # dark navy
    assert page.gray[4, 4] != 0 and not page.bilevel


def test_jpeg_exif_orientation_rotates(tmp_path):
    arr = np.full((40, 80), 255, np.uint8)
    arr[:, :10] = 0  # dark band on the left of the stored image
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    Image.fromarray(arr).save(tmp_path / "r.jpg", quality=95, exif=exif)
    page = load_page(tmp_path / "r.jpg")
    assert page.gray.shape == (80, 40)
    # The stored left band is at the top after a 90 degree clockwise rotation.
    assert page.gray[:8].mean() < 60 and page.gray[20:].mean() > 200


def test_tiff_g4_bilevel(tmp_path):
    ink = np.zeros((30, 50), bool)
    ink[10:15, 5:45] = True
    Image.fromarray(~ink).convert("1").save(tmp_path / "g4.tif", compression="group4")
    page = load_page(tmp_path / "g4.tif")
    assert page.bilevel is True
    assert set(np.unique(page.gray)) == {0, 255}
    assert np.array_equal(page.gray < 128, ink)


def test_tiff_16bit_scaled_by_max(tmp_path):
    a = np.full((20, 20), 4000, np.uint16)  # 12-bit data in a 16-bit container
    a[5:10] = 1000
    Image.fromarray(a).save(tmp_path / "d16.tif")
    page = load_page(tmp_path / "d16.tif")
    assert page.gray[0, 0] == 255  # the maximum maps to white, not to 4000 >> 8 = 15
    assert abs(int(page.gray[6, 0]) - round(1000 * 255 / 4000)) <= 1


def test_multipage_tiff_selects_page(tmp_path):
    frames = [Image.fromarray(np.full((10, 16), v, np.uint8)) for v in (10, 120, 230)]
    frames[0].save(tmp_path / "m.tif", save_all=True, append_images=frames[1:])
    assert load_page(tmp_path / "m.tif").gray[0, 0] == 10
    assert load_page(tmp_path / "m.tif", page_index=1).gray[0, 0] == 120
    with pytest.raises(PageLoadError, match="page 3 does not exist"):
        load_page(tmp_path / "m.tif", page_index=3)


def test_bmp(tmp_path):
    arr = _page_array()
    Image.fromarray(arr).convert("RGB").save(tmp_path / "b.bmp")
    page = load_page(tmp_path / "b.bmp")
    assert page.gray.shape == (40, 60)
    assert np.abs(page.gray.astype(int) - arr).max() <= 1


def test_two_level_8bit_is_bilevel(tmp_path):
    a = np.full((10, 10), 255, np.uint8)
    a[2:4] = 0
    Image.fromarray(a).save(tmp_path / "two.png")
    assert load_page(tmp_path / "two.png").bilevel is True


def test_non_ascii_path_with_space(tmp_path):
    d = tmp_path / "dossier été"
    d.mkdir()
    Image.fromarray(_page_array()).save(d / "pàge 1.png")
    page = load_page(d / "pàge 1.png")
    assert page.gray.shape == (40, 60)


@pytest.mark.parametrize("content, reason", [
    (b"", "file is empty"),
    (b"hello, this is not a picture at all" * 4, "not an image file"),
])
def test_bad_content_names_file(tmp_path, content, reason):
    path = tmp_path / "bad file.png"
    path.write_bytes(content)
    with pytest.raises(PageLoadError) as err:
        load_page(path)
    assert reason in str(err.value) and "bad file.png" in str(err.value)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_truncated_file(tmp_path, fmt):
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (200, 200), dtype=np.uint8)).save(buf, format=fmt)
    path = tmp_path / f"cut.{fmt.lower()}"
    path.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    with pytest.raises(PageLoadError, match=r"cut\..*truncated or corrupt"):
        load_page(path)


def test_missing_file(tmp_path):
    with pytest.raises(PageLoadError, match="'.*nope.png': no such file"):
        load_page(tmp_path / "nope.png")


@pytest.mark.skipif(sys.platform == "win32" or (hasattr(os, "geteuid") and os.geteuid() == 0),
                    reason="permissions are not enforced for root / on Windows")
def test_permission_denied(tmp_path):
    path = tmp_path / "locked.png"
    Image.fromarray(_page_array()).save(path)
    path.chmod(0)
    try:
        with pytest.raises(PageLoadError, match="permission denied"):
            load_page(path)
    finally:
        path.chmod(0o644)


def test_permission_denied_simulated(tmp_path, monkeypatch):
    # Runs as root too: the open() that load_page uses raises as it would for a locked file.
    path = tmp_path / "locked.png"
    Image.fromarray(_page_array()).save(path)

    def deny(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("engine.io.open", deny, raising=False)
    with pytest.raises(PageLoadError, match="'.*locked.png': permission denied"):
        load_page(path)


def test_too_large_refused(tmp_path, monkeypatch):
    import engine.io as eio
    monkeypatch.setattr(eio, "MAX_PIXELS", 1000)
    Image.fromarray(_page_array()).save(tmp_path / "big.png")  # 2400 pixels
    with pytest.raises(PageLoadError, match="too large"):
        load_page(tmp_path / "big.png")


def test_page_from_array():
    ink = np.zeros((5, 6), bool)
    ink[2, 1:4] = True
    p = page_from_array(ink)
    assert p.bilevel and p.gray[2, 2] == 0 and p.gray[0, 0] == 255
    g = _page_array()
    p = page_from_array(g)
    assert np.array_equal(p.gray, g) and not p.bilevel
    rgb = np.repeat(g[..., None], 3, axis=2)
    assert np.array_equal(page_from_array(rgb).gray, g)
    with pytest.raises(ValueError):
        page_from_array(np.zeros((3, 3, 5), np.uint8))
