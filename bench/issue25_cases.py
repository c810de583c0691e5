"""The hostile inputs of issue 25, each run through the real ``tlseg`` as a user would, with
its exit status and what it printed: the table of docs/robustness.md.

    .venv/bin/python bench/issue25_cases.py [--keep DIR] [--markdown]

Pages are generated (tests/synthetic.py) in a temporary folder; the full-disk case mounts a
2 MB tmpfs when run as root on Linux (else it is reported as not run).  A minute or two.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
TLSEG = [str(ROOT / ".venv" / "bin" / "tlseg")]


def page(path: Path, seed: int = 0, scale: float = 0.8, kind: str = "straight") -> Path:
    from synthetic import make_page

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(make_page(kind, seed=seed, scale=scale).image).save(path)
    return path


def run(argv: list[str], cwd: Path, **kw) -> tuple[int, str]:
    proc = subprocess.run(TLSEG + argv, cwd=cwd, capture_output=True, text=True, timeout=600, **kw)
    return proc.returncode, proc.stderr + proc.stdout


def pick(text: str, *needles: str) -> str:
    """The first output line holding any needle (else the last line), shortened."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for needle in needles:
        for ln in lines:
            if needle in ln:
                return ln if len(ln) < 260 else ln[:257] + "..."
    return lines[-1] if lines else ""


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def signal_case(work: Path, sig: int, preexec=None) -> tuple[int, str]:
    folder = work / f"sig{sig}"
    for i in range(6):
        page(folder / "in" / f"p{i}.png", seed=i, scale=1.2)
    out = folder / "out"
    proc = subprocess.Popen(TLSEG + ["segment", "in", "-o", "out", "-j", "2"], cwd=folder, stderr=subprocess.PIPE,
                            text=True, preexec_fn=preexec)
    report = out / "tlseg-report.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (report.exists() and report.read_text().strip()):
        time.sleep(0.1)
    workers = children(proc.pid)
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    time.sleep(5)
    left = [w for w in workers if alive(w)]
    temps = [p.name for p in out.iterdir() if p.name.startswith(".") and ".tmp" in p.name]
    return proc.returncode, (f"{pick(err, 'interrupted', 'error')} | workers alive 5 s later: {len(left)} of "
                             f"{len(workers)}; temporary files: {len(temps)}")


def cases(work: Path) -> list[tuple[str, str, int, str]]:
    rows: list[tuple[str, str, int, str]] = []

    def add(item: str, command: str, rc: int, outcome: str) -> None:
        rows.append((item, command, rc, outcome))
        print(f"[{item}] rc {rc}: {outcome}", file=sys.stderr, flush=True)

    # 1. resume
    d = work / "resume"
    frames = [Image.fromarray(np.asarray(Image.open(page(d / f"f{i}.png", seed=i)))) for i in range(2)]
    frames[0].save(d / "multipage.tif", save_all=True, append_images=frames[1:])
    run(["segment", "multipage.tif", "-o", "OUT"], d)
    rc, text = run(["segment", "multipage.tif", "--page", "1", "-o", "OUT"], d)
    add("1", "`tlseg segment multipage.tif --page 1 -o OUT` (page 0 done in OUT)", rc,
        pick(text, " ok, ") + "; outputs " + ", ".join(sorted(p.name for p in (d / "OUT").glob("*.json"))))
    for i in range(3):
        page(d / "in" / f"p{i}.png", seed=10 + i)
    run(["segment", "in", "-o", "OUT2"], d)
    rc, text = run(["segment", "in", "-o", "OUT2", "--preset", "paper", "--set", "sample_ratio=0.5"], d)
    add("1", "`tlseg segment in -o OUT2 --preset paper --set sample_ratio=0.5` (done with the defaults)", rc,
        pick(text, "to redo") + " / " + pick(text, "redone"))
    run(["segment", "in", "-o", "OUT2"], d)
    dat = d / "OUT2" / "p0.dat"
    dat.write_bytes(dat.read_bytes()[:1000])
    (d / "OUT2" / "p1.labels.png").write_bytes(b"")
    xml = d / "OUT2" / "p2.page.xml"
    xml.write_bytes(b"x" * xml.stat().st_size)
    rc, text = run(["segment", "in", "-o", "OUT2"], d)
    add("1", "truncated `p0.dat`, empty `p1.labels.png`, garbage `p2.page.xml` (same size), then "
        "`tlseg segment in -o OUT2`", rc,
        "; ".join(ln.split("tlseg: ")[-1] for ln in text.splitlines() if "redo p" in ln) + " / " + pick(text, " ok, "))
    for p in (d / "in").iterdir():
        shutil.copy(p, d / "in" / f"big_{p.name}")
    proc = subprocess.Popen(TLSEG + ["segment", "in", "-o", "OUT3", "-j", "2"], cwd=d, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any((d / "OUT3").glob(".*.tmp*")):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = len(list((d / "OUT3").glob(".*.tmp*")))
    rc, text = run(["segment", "in", "-o", "OUT3", "-j", "2"], d)
    add("1", "`kill -9` of the whole process group while outputs are written, then the same command", rc,
        f"{left} temporary file(s) left by the kill; rerun: {pick(text, 'removed')} / {pick(text, ' ok, ')}; "
        f"now {len(list((d / 'OUT3').glob('.*.tmp*')))} left")

    # 2. evaluate
    d = work / "evaluate"
    img = page(d / "pages" / "p.png", seed=3)
    run(["segment", str(img), "-o", "pred"], d)
    (d / "gt").mkdir()
    ns = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"
    h, w = np.asarray(Image.open(img)).shape

    def page_xml(lines: str) -> str:
        return (f'<PcGts xmlns="{ns}"><Metadata/><Page imageFilename="p.png" imageWidth="{w}" imageHeight="{h}">'
                f'<TextRegion id="r"><Coords points="0,0 1,0 1,1"/>{lines}</TextRegion></Page></PcGts>')

    gt_cases = {
        "a PAGE file with no lines": page_xml(""),
        "a PAGE file whose every line lies outside the page": page_xml(
            f'<TextLine id="a"><Coords points="{w + 10},5 {w + 90},5 {w + 90},30 {w + 10},30"/></TextLine>'),
        "ALTO with negative coordinates": (
            f'<alto xmlns="http://www.loc.gov/standards/alto/ns-v4#"><Layout><Page WIDTH="{w}" HEIGHT="{h}">'
            '<PrintSpace><TextBlock><TextLine ID="a" HPOS="-900" VPOS="-300" WIDTH="400" HEIGHT="40"/>'
            '</TextBlock></PrintSpace></Page></Layout></alto>'),
    }
    for what, text_xml in gt_cases.items():
        (d / "gt" / "p.xml").write_text(text_xml)
        rc, text = run(["evaluate", "--gt", "gt/p.xml", "--pred", "pred/p.dat", "--images", "pages"], d)
        add("2", f"`tlseg evaluate` with {what} (the result has lines)", rc,
            pick(text, "nothing to score") + " / " + pick(text, "no page was scored")
            + ("; a TOTAL row is printed" if "TOTAL" in text else "; no TOTAL row"))
    (d / "gt" / "p.xml").unlink()
    (d / "gt" / "q.xml").write_text(page_xml('<TextLine id="a"><Coords points="5,5 90,5 90,30 5,30"/></TextLine>'))
    rc, text = run(["evaluate", "--gt", "gt", "--pred", "pred/p.dat"], d)
    add("2", "`tlseg evaluate` with no page paired", rc,
        pick(text, "no page was scored") + ("; a TOTAL row is printed" if "TOTAL" in text else "; no TOTAL row"))
    labels = np.fromfile(d / "pred" / "p.dat", "<i4").reshape(h, w)
    lines = ""
    for k in range(1, int(labels.max()) + 1):
        ys, xs = np.nonzero(labels == k)
        far = " 10000000000,10000000000" if k == 2 else ""
        lines += (f'<TextLine id="l{k}"><Coords points="{xs.min() - 3},{ys.min() - 3} {xs.max() + 3},{ys.min() - 3} '
                  f'{xs.max() + 3},{ys.max() + 3} {xs.min() - 3},{ys.max() + 3}{far}"/></TextLine>')
    (d / "gt" / "q.xml").unlink()
    (d / "gt" / "p.xml").write_text(page_xml(lines))
    rc, text = run(["evaluate", "--gt", "gt/p.xml", "--pred", "pred/p.dat", "--images", "pages"], d)
    total = next((ln for ln in text.splitlines() if ln.startswith("TOTAL")), "")
    add("2", "`tlseg evaluate` with a ground-truth point at 1e10", rc,
        pick(text, "dropped") + f" / TOTAL pixel IU {total.split()[-1] if total else '?'} %")

    # 3. signals
    rc, outcome = signal_case(work, signal.SIGTERM)
    add("3", "SIGTERM to `tlseg segment in -o out -j 2`", rc, outcome)
    rc, outcome = signal_case(work, signal.SIGKILL)
    add("3", "`kill -9` of the main process of `tlseg segment in -o out -j 2`", rc, outcome)
    rc, outcome = signal_case(work, signal.SIGINT, preexec=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    add("3", "SIGINT to a `-j 2` batch started with SIGINT ignored (a background job, nohup)", rc, outcome)

    # 4. memory (the pages' headers only: the refusal comes before loading; peaks measured
    # with bench/large_page.py)
    from test_robustness import png_header_only

    d = work / "memory"
    d.mkdir()
    for w_, h_ in ((13000, 13000), (9900, 9900)):
        (d / f"large-{w_}x{h_}.png").write_bytes(png_header_only(w_, h_))
        rc, text = run(["segment", f"large-{w_}x{h_}.png", "-o", "out"], d)
        add("4", f"a {w_} x {h_} page ({w_ * h_ / 1e6:.0f} Mpx), default memory limits", rc, pick(text, "error"))

    # 5. time
    d = work / "time"
    p = page(d / "p.png", seed=4)
    hang = ["--set", "max_em_iterations=10000", "--set", "kl_tolerance=1e-300", "--set", "mp_max_sweeps=10000",
            "--set", "mp_tolerance=1e-300", "--set", "label_tolerance=1e-300"]
    rc, text = run(["segment", p.name, "-o", "out", *hang], d)
    add("5", "`--set max_em_iterations=10000 --set kl_tolerance=1e-300 --set mp_max_sweeps=10000 --set "
        "mp_tolerance=1e-300 --set label_tolerance=1e-300`", rc, pick(text, "error"))
    rc, text = run(["segment", p.name, "-o", "out", *hang[:2], *hang[4:6]], d)
    add("5", "`--set max_em_iterations=10000 --set mp_max_sweeps=10000`", rc, pick(text, "error"))
    big = page(d / "big.png", seed=4, scale=3.0)
    rc, text = run(["segment", big.name, "-o", "out2", "--page-timeout", "2"], d)
    add("5", "a page that needs more than its time limit (`--page-timeout 2`, a 2700 x 2100 page)", rc,
        pick(text, "error"))

    # 6. messages
    d = work / "messages"
    p = page(d / "p.png", seed=5)
    for address in ("not a url!!", "localhost:abc", "", "tcp://127.0.0.1", "tcp://127.0.0.1:9"):
        rc, text = run(["segment", p.name, "-o", "out", "--dask", address], d)
        n = sum(1 for ln in text.splitlines() if ln.strip())
        add("6", f"`--dask '{address}'`", rc, pick(text, "error") + f" ({n} line(s), "
            + ("a traceback" if "Traceback" in text else "no traceback") + ")")
    name = os.fsdecode(b"caf\xe9.png")
    shutil.copy(p, d / name)
    rc, text = run(["segment", name, "-o", "out_nonutf8"], d)
    add("6", "a page named with Latin-1 bytes (`caf\\xe9.png`)", rc, pick(text, " ok, ", "error"))
    full = work / "full"
    full.mkdir()
    mounted = False
    if os.geteuid() == 0 and sys.platform.startswith("linux"):
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(full)]).returncode == 0
    if mounted:
        try:
            for i in range(2):
                page(d / "in" / f"q{i}.png", seed=20 + i, scale=1.5)
            rc, text = run(["segment", str(d / "in"), "-o", str(full / "out"), "-j", "1"], d)
            left = [q.name for q in (full / "out").iterdir() if q.name.startswith(".")]
            add("6", "a full disk (a 2 MB tmpfs as OUTDIR)", rc, pick(text, "No space", "error") + " / "
                + pick(text, " ok, ") + f"; temporary files left: {len(left)}")
        finally:
            subprocess.run(["umount", str(full)])
    else:
        add("6", "a full disk", -1, "not run (needs root to mount a small tmpfs); see tests/test_trust.py")
    (d / "gt").mkdir()
    Image.fromarray(np.zeros((h, w), np.uint8)).save(d / "gt" / "p.png")
    (d / "p.dat").write_bytes(b"\0" * 12)
    rc, text = run(["evaluate", "--gt", "gt/p.png", "--pred", "p.dat"], d)
    add("6", "`tlseg evaluate` with a bad prediction `.dat`", rc, pick(text, "p.dat"))

    # 7. inputs and names
    d = work / "inputs"
    src = Image.open(page(d / "src" / "s.png", seed=6))
    (d / "mixed").mkdir()
    for suffix in (".gif", ".webp", ".jp2", ".pgm"):
        src.save(d / "mixed" / f"page{suffix}")
    rc, text = run(["segment", "mixed", "-o", "out"], d)
    add("7", "a folder of `.gif`, `.webp`, `.jp2`, `.pgm` pages", rc, pick(text, " ok, "))
    (d / "mixdir").mkdir()
    for n in ("one.png", "one.jpg", "ONE.PNG"):
        src.convert("RGB").save(d / "mixdir" / n)
    rc, text = run(["segment", "mixdir", "-o", "out2"], d)
    add("7", "`one.png`, `one.jpg`, `ONE.PNG` in one folder", rc,
        pick(text, " ok, ") + "; outputs " + ", ".join(sorted(q.stem for q in (d / "out2").glob("*.json"))))

    # 8. non-pages
    d = work / "nonpages"
    d.mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (600, 800), dtype=np.uint8)).save(d / "noise.png")
    from test_trust import _half_painted_page

    Image.fromarray(_half_painted_page()).save(d / "half.png")
    for stem in ("noise", "half"):
        rc, text = run(["segment", f"{stem}.png", "-o", "out"], d)
        add("8", {"noise": "pure noise (`noise.png`)", "half": "a page half painted white (seven lines)"}[stem], rc,
            pick(text, "warning") + " / " + pick(text, " ok, "))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", metavar="DIR", help="work here and keep the files")
    args = ap.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tlseg-issue25-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rows = cases(work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("| item | case | exit | outcome |")
    print("|---|---|---|---|")
    for item, command, rc, outcome in rows:
        print(f"| {item} | {command} | {rc} | {outcome.replace('|', '/')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
