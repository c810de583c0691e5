"""Size of the window's results cache for a folder of pages: the compact entries the window
writes (16-bit label PNG + JSON) against the full ``tlseg`` set it wrote before (``.dat``,
label PNG, overlay PNG, PAGE and ALTO XML, JSON) for the same results.

    python bench/gui_cache_size.py /work/shared/data/poilus-dev [--limit N]

Opens the folder as a document in a real window (offscreen, throw-away settings), runs
"Run all", then measures the cache; the full sets are written from the same results with
:func:`engine.export.write_outputs` into a temporary folder and measured too.  Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def folder_bytes(folder: Path) -> dict[str, int]:
    """Bytes per file kind (the name after the stem) and in total."""
    sizes: dict[str, int] = {}
    for f in folder.iterdir():
        if f.is_file():
            kind = "".join(f.suffixes[-2:]) if f.name.endswith((".labels.png", ".overlay.png", ".page.xml",
                                                                ".alto.xml")) else f.suffix
            sizes[kind] = sizes.get(kind, 0) + f.stat().st_size
    sizes["total"] = sum(sizes.values())
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--limit", type=int, default=0, help="only the first N pages (a copy of them)")
    parser.add_argument("--timeout", type=float, default=7200.0)
    args = parser.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from engine import export
    from engine.io import load_page
    from tlgui.app import wait_until
    from tlgui.document import DONE, FAILED
    from tlgui.window import MainWindow

    work = Path(tempfile.mkdtemp(prefix="tlgui-cache-"))
    folder = Path(args.folder)
    if args.limit:
        images = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".png", ".tif"))[: args.limit]
        folder = work / "pages"
        folder.mkdir()
        for image in images:
            shutil.copy(image, folder / image.name)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(work / "config"))
    window = MainWindow()
    window.resize(1600, 1000)
    window.show()
    window.open_document([str(folder)])
    wait_until(lambda: bool(window.document.pages) and not window.is_busy(), 120)
    t0 = time.perf_counter()
    window.run_all()
    ok = wait_until(lambda: window.jobs.run_queue is None and not window.is_busy()
                    and all(p.state in (DONE, FAILED) for p in window.document.pages), args.timeout)
    wall = time.perf_counter() - t0
    cache = window.document.results_folder()
    pages = list(window.document.pages)
    window.shutdown()
    window.close()
    del app
    compact = folder_bytes(cache)
    full_dir = work / "full"
    for page in pages:
        if page.state != DONE:
            continue
        saved = export.read_outputs(cache, page.stem)
        meta = {k: v for k, v in saved.meta.items() if k not in ("lines", "n_lines", "image", "shape", "compact")}
        export.write_outputs(full_dir, page.stem, load_page(page.path).gray, saved.seg, Path(page.path).name, meta)
    full = folder_bytes(full_dir)
    mb = 1024 * 1024
    print(json.dumps({
        "folder": args.folder, "pages": len(pages), "done": sum(p.state == DONE for p in pages),
        "run_all_s": round(wall, 1), "ok": ok,
        "compact_mb": round(compact["total"] / mb, 1),
        "compact_by_kind_mb": {k: round(v / mb, 1) for k, v in compact.items() if k != "total"},
        "full_mb": round(full["total"] / mb, 1),
        "full_by_kind_mb": {k: round(v / mb, 1) for k, v in full.items() if k != "total"},
    }, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
