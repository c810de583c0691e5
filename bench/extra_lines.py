"""Issue 26: the extra lines of poilus-dev pages, and what ink of theirs lies in the polygons.

    .venv/bin/python bench/extra_lines.py [NAME=VALUE ...] PAGE_ID [PAGE_ID ...]

PAGE_ID as in the file names (``AN_0090-0``; none: every page of poilus-dev). Per page:
correct, extra and missed lines (line threshold 0.75), then each result line that has scored
pixels (ink inside a ground-truth polygon) and is not a correct match:
``line:pixels/nt../fa../sp../ink../kind``, how many of those pixels are the engine's
non-text, faint, speck and sampled ink, and the line's kind (:func:`extra_kind`). The last
line counts the kinds over the pages.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import metric  # noqa: E402
from engine.evaluate import polygon_truth_on_ink  # noqa: E402
from engine.params import Parameters  # noqa: E402
from engine.pipeline import segment  # noqa: E402

DATA = Path("/work/shared/data/poilus-dev")


#: Fewer scored pixels than this: a stroke reaching into a polygon (a flourish, a stamp).
TINY_PIXELS = 200


def extra_kind(pixels: int, gt_line: int, found: set[int], splitters: int, gt_lines: int) -> str:
    """What an extra result line is, from the ground-truth line most of its scored ``pixels``
    lie on (``gt_line``): "tiny" (fewer than :data:`TINY_PIXELS`), "part" (a piece of a line
    another result line found correctly: ``gt_line`` in ``found``), "split" (``gt_line``
    shared among ``splitters`` > 1 result lines holding a tenth of it each), "merge" (it
    holds several ground-truth lines, ``gt_lines`` > 1), else "other"."""
    if pixels < TINY_PIXELS:
        return "tiny"
    if gt_line in found:
        return "part"
    if splitters > 1:
        return "split"
    return "merge" if gt_lines > 1 else "other"


def main(argv: list[str]) -> int:
    kw: dict[str, object] = {}
    for a in argv:
        if "=" in a:
            k, v = a.split("=", 1)
            kw[k] = (v == "true") if v in ("true", "false") else float(v) if "." in v else int(v)
    pages = [a for a in argv if "=" not in a] or sorted(
        p.stem.removeprefix("TestamentsDePoilus_will_") for p in DATA.glob("*.jpg"))
    kinds: Counter[str] = Counter()
    for page in pages:
        img = DATA / f"TestamentsDePoilus_will_{page}.jpg"
        prep, _, seg = segment(img, Parameters(**kw))
        gt, _ = polygon_truth_on_ink(img.with_suffix(".xml"), img)
        pred, scored = seg.labels, gt > 0
        sc = metric.line_metric(gt, pred, scored)
        none = np.zeros(scored.shape, bool)
        nt = prep.non_text if prep.non_text is not None else none
        fa = prep.faint if prep.faint is not None else none
        sp = prep.specks if prep.specks is not None else none
        table = metric._table(gt, pred, scored)
        chosen, correct = metric._line_matches(table, 0.75)
        right = table.pairs[chosen[correct]]
        found = set(table.gt_ids[right[:, 0]].tolist())
        matched = set(table.pred_ids[right[:, 1]].tolist())
        out = []
        for line in np.unique(pred[scored]):
            if line == 0 or line in matched:
                continue
            m = (pred == line) & scored
            g, c = np.unique(gt[m], return_counts=True)
            best = g[np.argmax(c)]
            on_best = pred[gt == best]
            _, shares = np.unique(on_best[on_best > 0], return_counts=True)
            kind = extra_kind(int(m.sum()), int(best), found, int((shares > 0.1 * on_best.size).sum()), len(g))
            kinds[kind] += 1
            out.append(f"{line}:{m.sum()}/nt{(m & nt).sum()}/fa{(m & fa).sum()}/sp{(m & sp).sum()}"
                       f"/ink{(m & prep.ink).sum()}/{kind}")
        print(page, "correct", sc.correct, "extra", sc.extra, "missed", sc.missed, " ".join(out), flush=True)
    print("kinds", dict(sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
