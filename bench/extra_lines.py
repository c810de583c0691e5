"""Issue 26: the extra lines of poilus-dev pages, and what ink of theirs lies in the polygons.

    .venv/bin/python bench/extra_lines.py [NAME=VALUE ...] PAGE_ID [PAGE_ID ...]

PAGE_ID as in the file names (``AN_0090-0``). Per page: correct, extra and missed lines
(line threshold 0.75), then each result line that has scored pixels (ink inside a
ground-truth polygon) and is not a correct match: ``line:pixels/nt../fa../sp../ink..``, how
many of those pixels are the engine's non-text, faint, speck and sampled ink.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import metric  # noqa: E402
from engine.evaluate import polygon_truth_on_ink  # noqa: E402
from engine.params import Parameters  # noqa: E402
from engine.pipeline import segment  # noqa: E402

DATA = Path("/work/shared/data/poilus-dev")


def main(argv: list[str]) -> int:
    kw: dict[str, object] = {}
    for a in argv:
        if "=" in a:
            k, v = a.split("=", 1)
            kw[k] = (v == "true") if v in ("true", "false") else float(v) if "." in v else int(v)
    for page in (a for a in argv if "=" not in a):
        img = DATA / f"TestamentsDePoilus_will_{page}.jpg"
        prep, _, seg = segment(img, Parameters(**kw))
        gt, _ = polygon_truth_on_ink(img.with_suffix(".xml"), img)
        pred, scored = seg.labels, gt > 0
        sc = metric.line_metric(gt, pred, scored)
        none = np.zeros(scored.shape, bool)
        nt = prep.non_text if prep.non_text is not None else none
        fa = prep.faint if prep.faint is not None else none
        sp = prep.specks if prep.specks is not None else none
        out = []
        for line in np.unique(pred[scored]):
            if line == 0:
                continue
            m = (pred == line) & scored
            g, c = np.unique(gt[m], return_counts=True)
            best = g[np.argmax(c)]
            if c.max() / m.sum() >= 0.75 and c.max() / (gt == best).sum() >= 0.75:
                continue
            out.append(f"{line}:{m.sum()}/nt{(m & nt).sum()}/fa{(m & fa).sum()}/sp{(m & sp).sum()}"
                       f"/ink{(m & prep.ink).sum()}")
        print(page, "correct", sc.correct, "extra", sc.extra, "missed", sc.missed, " ".join(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
