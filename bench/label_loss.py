"""Where the final labelling loses a line with the ground truth's lines locked (issue 24, item 4).

    python bench/label_loss.py PAGE GT [--cache DIR] [--set NAME=VALUE ...] [--free] [--lines]
                               [--crop DIR] [--alt] [--dump FILE.jsonl]

Runs ``bench/steering.py``'s variant (d) on one page (the ground truth's lines as initial
lines, locked; ``--free``: unlocked, variant (c)), then, for every ground-truth line whose
best MatchScore is under 0.95, counts the pixels it lacks (its scored ink labelled with
another line, or with none) and the extra ones (scored ink of its partner line that is not
its own), by kind:

* ``noink``: scored pixels the engine's ink does not hold (Otsu vs the engine's binarisation);
* ``speck`` / ``nontext``: pixels of the specks / of the non-text or faint mask (labelled
  after stage 8's component rules, by ``label_specks`` / ``label_non_text``);
* components, by the class ``final_labels`` gave them: ``whole`` (reached one core, samples
  agree), ``one`` (reached one core, samples disagree), ``split`` (reached several cores),
  ``gap`` (reached none), ``orphan`` (no labelled sample); each ``/gtsplit`` when the ground
  truth itself splits that component between lines.

Also prints two ceilings on the same ink: each engine component whole to its ground-truth
majority line (``comp oracle``), and every engine pixel to its ground-truth line
(``pixel oracle``). ``--cache DIR`` keeps the preparation and the last snapshot (pickled), so
that changes to stage 8 are measured without re-running EM (the cache holds the engine's
preparation: clear it when stages 1-7 change). ``--crop DIR``: the three worst failed lines'
boxes (green: right, red: lacking, blue: extra, grey: other lines; the partner line in
magenta). ``--alt``: how many pixels of the split, gap and "one" components other rules would
get right (nearest sample of the component, nearest line, the profile over every sample line,
nearest placed ink pixel). ``--dump``: the split components' minority shares, as JSON lines.
Used for issue 24, item 4 (docs/history.md, 2026-11-27, "touching strokes between locked lines").
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.steering import ground_truth  # noqa: E402
from engine.cli import parse_set  # noqa: E402
from engine.metric import contest_metric  # noqa: E402
from engine.params import Parameters  # noqa: E402


def component_classes(prep, lines, sample_labels) -> np.ndarray:
    """Per component ``(C + 1,)``: 0 none, 1 whole, 2 one (of several), 3 split, 4 gap,
    5 orphan: the branch of ``postprocess.final_labels`` it takes (recomputed)."""
    from engine import postprocess as pp

    comps = prep.components
    n_comp = int(comps.max())
    sc, lab = prep.sample_component, sample_labels
    has = lab >= 0
    n_labels, cand = pp.component_candidates(sc, lab, n_comp)
    max_c = cand.shape[1]
    single, multi = n_labels == 1, n_labels > 1
    on_single = has & single[sc]
    source = on_single if on_single.any() else has
    log_density, (z_lo, z_hi), _ = pp.line_profile(prep.samples[source], lab[source], lines)
    ink = np.flatnonzero(comps.ravel() > 0)
    cid = comps.ravel()[ink]
    ys, xs = np.divmod(ink, comps.shape[1])
    xy = np.stack([xs, ys], axis=1).astype(np.float64)
    n_core = np.zeros((n_comp + 1, max_c))
    for k in range(max_c):
        line = cand[cid, k]
        valid = line >= 0
        _, z = pp._profile_score(xy[valid], lines, line[valid], log_density)
        n_core[:, k] = np.bincount(cid[valid], weights=(z >= z_lo) & (z <= z_hi), minlength=n_comp + 1)
    n_pix = np.bincount(cid, minlength=n_comp + 1).astype(np.float64)
    need = np.where(multi, pp._ANCHOR_FRACTION * n_pix, 0.0)
    reached = ((cand >= 0) & (n_core > 0) & (n_core >= need[:, None])).sum(axis=1)
    out = np.zeros(n_comp + 1, np.int64)
    out[(reached == 1) & single] = 1
    out[(reached == 1) & multi] = 2
    out[reached >= 2] = 3
    out[(n_labels > 0) & (reached == 0)] = 4
    out[n_labels == 0] = 5
    out[0] = 0
    return out


CLASS = ("none", "whole", "one", "split", "gap", "orphan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("page")
    ap.add_argument("gt")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--free", action="store_true")
    ap.add_argument("--crop", type=Path, default=None, help="write the worst failed lines' crops here")
    ap.add_argument("--dump", default=None)
    ap.add_argument("--alt", action="store_true")
    ap.add_argument("--lines", action="store_true", help="print every failed line's breakdown")
    args = ap.parse_args(argv)
    from engine import initial_io, pipeline

    params = Parameters().replace(**parse_set(args.set))
    cache = None
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
        cache = args.cache / f"{Path(args.page).stem}{'-free' if args.free else ''}.pkl"
    if cache is not None and cache.exists():
        prep, snap = pickle.loads(cache.read_bytes())
    else:
        prep = pipeline.prepare(args.page, Parameters())
        start = initial_io.read_initial_lines(args.gt, prep, lock=not args.free)
        prep = pipeline.for_lines(prep, start)
        *_, snap = pipeline.run_em(prep, start)
        if cache is not None:
            cache.write_bytes(pickle.dumps((prep, snap)))
    seg = pipeline.finish(prep, snap, params)
    pred = seg.labels
    truth, scored = ground_truth(Path(args.gt), Path(args.page), prep.shape)
    score = contest_metric(truth, pred, scored, 0.95)
    comps = prep.components
    # Ceilings on the engine's ink.
    on = scored & (truth > 0)
    gl = truth.ravel()
    cm = comps.ravel()
    ink_on = (cm > 0) & on.ravel()
    maj = np.zeros(int(comps.max()) + 1, np.int64)
    if ink_on.any():
        code, votes = np.unique(cm[ink_on] * (int(truth.max()) + 1) + gl[ink_on], return_counts=True)
        c, g = code // (int(truth.max()) + 1), code % (int(truth.max()) + 1)
        order = np.lexsort((-votes, c))
        c, g = c[order], g[order]
        first = np.r_[True, c[1:] != c[:-1]]
        maj[c[first]] = g[first]
    oracle_c = np.where(pred > 0, maj[comps], 0)
    oracle_c = np.where((comps == 0) & (pred > 0), truth, oracle_c)
    oracle_p = np.where(pred > 0, truth, 0)
    s_c = contest_metric(truth, oracle_c, scored, 0.95)
    s_p = contest_metric(truth, oracle_p, scored, 0.95)
    print(f"{Path(args.page).stem}: FM {score.fm:.3f} (N {score.n}, M {score.m}, o2o {score.o2o}); "
          f"comp oracle {s_c.fm:.3f} ({s_c.o2o}); pixel oracle {s_p.fm:.3f} ({s_p.o2o})")
    # Per GT line: best partner and score.
    n_g, n_p = int(truth.max()) + 1, int(pred.max()) + 1
    conf = np.zeros((n_g, n_p), np.int64)
    np.add.at(conf, (truth[scored], pred[scored]), 1)
    gsize = conf.sum(axis=1)
    psize = conf.sum(axis=0)
    inter = conf.copy()
    inter[:, 0] = 0
    union = gsize[:, None] + psize[None, :] - inter
    ms = inter / np.maximum(union, 1)
    best = ms.argmax(axis=1)
    bscore = ms[np.arange(n_g), best]
    classes = component_classes(prep, seg.lines, seg.sample_labels)
    ncomp_g = np.zeros(int(comps.max()) + 1, np.int64)
    cg = np.unique(np.stack([cm[ink_on], gl[ink_on]]), axis=1)
    np.add.at(ncomp_g, cg[0], 1)
    speck = prep.specks if prep.specks is not None else np.zeros(prep.shape, bool)
    nontext = np.zeros(prep.shape, bool)
    for m in (prep.non_text, prep.faint):
        if m is not None and m.shape == prep.shape:
            nontext |= m

    def kinds(mask: np.ndarray) -> dict[str, int]:
        out: dict[str, int] = {"gt0": int((mask & (truth == 0)).sum())}
        mask = mask & (truth > 0)
        c = comps[mask]
        out["noink"] = int(((c == 0) & ~speck[mask] & ~nontext[mask]).sum())
        out["speck"] = int(((c == 0) & speck[mask] & ~nontext[mask]).sum())
        out["nontext"] = int(((c == 0) & nontext[mask]).sum())
        for k in range(1, 6):
            sel = (c > 0) & (classes[c] == k)
            gs = ncomp_g[c] > 1
            out[CLASS[k]] = int((sel & ~gs).sum())
            out[CLASS[k] + "/gtsplit"] = int((sel & gs).sum())
        return out

    # Per class: pixels right now, and right had each component gone whole to its majority label.
    want = np.where(truth > 0, best[truth], 0)
    m = scored & (truth > 0) & (comps > 0)
    c_m, p_m, w_m = comps[m], pred[m], want[m]
    n_c = int(comps.max()) + 1
    code, votes = np.unique(c_m.astype(np.int64) * n_p + p_m, return_counts=True)
    cc, pp_ = code // n_p, code % n_p
    order = np.lexsort((-votes, cc))
    cc, pp_ = cc[order], pp_[order]
    first = np.r_[True, cc[1:] != cc[:-1]]
    whole = np.zeros(n_c, np.int64)
    whole[cc[first]] = pp_[first]
    gs_m = ncomp_g[c_m] > 1
    parts = []
    for k in range(1, 6):
        for gsv, tag in ((False, ""), (True, "/gtsplit")):
            sel = (classes[c_m] == k) & (gs_m == gsv)
            if sel.any():
                parts.append(f"{CLASS[k]}{tag} {int(sel.sum())}: now {int((p_m[sel] == w_m[sel]).sum())}, "
                             f"whole {int((whole[c_m[sel]] == w_m[sel]).sum())}")
    print("  right pixels by class: " + "; ".join(parts))
    if args.alt:
        from scipy.spatial import cKDTree
        sl = seg.sample_labels
        # pred label id of sample line k is k + 1
        ys_, xs_ = np.nonzero(m)
        cls_m = classes[c_m]
        res = []
        for k, name in ((3, "split"), (4, "gap"), (2, "one")):
            sel = np.flatnonzero(cls_m == k)
            if not len(sel):
                continue
            right_now = int((p_m[sel] == w_m[sel]).sum())
            # nearest sample of the same component, its EM line
            hits = 0
            for c in np.unique(c_m[sel]):
                at = sel[c_m[sel] == c]
                own = np.flatnonzero((prep.sample_component == c) & (sl >= 0))
                if not len(own):
                    continue
                _, nn = cKDTree(prep.samples[own]).query(np.stack([xs_[at], ys_[at]], 1), k=1)
                hits += int(((sl[own][nn] + 1) == w_m[at]).sum())
            res.append(f"{name} {len(sel)}: now {right_now}, nearest own sample {hits}")
        print("  alt: " + "; ".join(res))
        import cv2

        from engine import postprocess as pp
        gapc = classes == 4
        placed = (pred > 0) & (comps > 0) & ~gapc[comps]
        src = (~placed).astype(np.uint8)
        _, lab_idx = cv2.distanceTransformWithLabels(src, cv2.DIST_L2, 5, labelType=cv2.DIST_LABEL_PIXEL)
        # map each label index to the label of its zero pixel
        zy, zx = np.nonzero(src == 0)
        lut_ = np.zeros(lab_idx.max() + 1, np.int64)
        lut_[lab_idx[zy, zx]] = pred[zy, zx]
        near_lab = lut_[lab_idx]
        dist = cv2.distanceTransform(src, cv2.DIST_L2, 5)
        sel = np.flatnonzero(cls_m == 4)
        cs = c_m[sel]
        g1 = near_lab[ys_[sel], xs_[sel]]
        # per component majority of g1 / of nearest single pixel
        maj_g1 = np.zeros(n_c, np.int64)
        cc_, vv = np.unique(cs * n_p + g1, return_counts=True)
        ccc, pv = cc_ // n_p, cc_ % n_p
        o = np.lexsort((-vv, ccc))
        ccc, pv = ccc[o], pv[o]
        f = np.r_[True, ccc[1:] != ccc[:-1]]
        maj_g1[ccc[f]] = pv[f]
        d_ = dist[ys_[sel], xs_[sel]]
        o = np.lexsort((d_, cs))
        f = np.r_[True, cs[o][1:] != cs[o][:-1]]
        single = np.zeros(n_c, np.int64)
        single[cs[o][f]] = g1[o][f]
        # profile over all lines
        lines_ = seg.lines
        has_ = seg.sample_labels >= 0
        logd, _, _ = pp.line_profile(prep.samples[has_], seg.sample_labels[has_], lines_)
        xy_ = np.stack([xs_[sel], ys_[sel]], 1).astype(float)
        tot = np.zeros((n_c, len(lines_)))
        for k in range(len(lines_)):
            sc_, _ = pp._profile_score(xy_, lines_, np.full(len(sel), k), logd)
            tot[:, k] = np.bincount(cs, weights=sc_, minlength=n_c)
        prof = tot.argmax(axis=1) + 1
        w = w_m[sel]
        sel3 = np.flatnonzero(cls_m == 3)
        if len(sel3):
            xy3 = np.stack([xs_[sel3], ys_[sel3]], 1).astype(float)
            c3 = c_m[sel3]
            # candidates: the lines of the component's samples
            okk = (prep.sample_component > 0) & (sl >= 0)
            code = np.unique(prep.sample_component[okk].astype(np.int64) * (len(lines_) + 1) + sl[okk])
            cc3, ll3 = code // (len(lines_) + 1), code % (len(lines_) + 1)
            dbest = np.full(len(sel3), np.inf)
            dl = np.zeros(len(sel3), np.int64)
            pbest = np.full(len(sel3), -np.inf)
            pl = np.zeros(len(sel3), np.int64)
            mbest = np.full(len(sel3), np.inf)
            ml = np.zeros(len(sel3), np.int64)
            for k in range(len(lines_)):
                comps_k = cc3[ll3 == k]
                on = np.isin(c3, comps_k)
                if not on.any():
                    continue
                idx = np.full(int(on.sum()), k)
                d = pp._distance(xy3[on], lines_, idx)
                sc_, z_ = pp._profile_score(xy3[on], lines_, idx, logd)
                dt, _ = pp._signed_distance(xy3[on], lines_, idx)
                a = np.flatnonzero(on)
                b = d < dbest[a]
                dbest[a[b]], dl[a[b]] = d[b], k + 1
                b = sc_ > pbest[a]
                pbest[a[b]], pl[a[b]] = sc_[b], k + 1
                zz = np.abs(dt) / lines_.sigma_t[k]
                b = zz < mbest[a]
                mbest[a[b]], ml[a[b]] = zz[b], k + 1
            w3 = w_m[sel3]
            print(f"  split alt: now {int((p_m[sel3] == w3).sum())}, nearest line {int((dl == w3).sum())}, "
                  f"profile {int((pl == w3).sum())}, |z| {int((ml == w3).sum())} of {len(sel3)}")
        print(f"  gap alt: now {int((p_m[sel] == w).sum())}, nearest pixel per-pixel {int((g1 == w).sum())}, "
              f"nearest pixel majority {int((maj_g1[cs] == w).sum())}, single nearest {int((single[cs] == w).sum())}, "
              f"profile all lines {int((prof[cs] == w).sum())} of {len(sel)}")
    if args.dump:
        import json
        rows = []
        for c in np.flatnonzero(classes == 3):
            sel = c_m == c
            if not sel.any():
                continue
            pv, wv = p_m[sel], w_m[sel]
            maj_p = np.bincount(pv).max() / len(pv)
            maj_w = np.bincount(wv).max() / len(wv)
            rows.append([int(c), int(sel.sum()), float(1 - maj_p), float(1 - maj_w), bool(ncomp_g[c] > 1),
                         int((pv == wv).sum()), int((whole[c] == wv).sum())])
        with open(args.dump, "a") as fh:
            fh.write(json.dumps({"page": Path(args.page).stem, "split": rows}) + "\n")
    tot_lack: dict[str, int] = {}
    tot_extra: dict[str, int] = {}
    failed = [g for g in range(1, n_g) if gsize[g] > 0 and bscore[g] < 0.95]
    for g in failed:
        p = best[g]
        lack = scored & (truth == g) & (pred != p)
        extra = scored & (pred == p) & (truth != g)
        kl, ke = kinds(lack), kinds(extra)
        for k, v in kl.items():
            tot_lack[k] = tot_lack.get(k, 0) + v
        for k, v in ke.items():
            tot_extra[k] = tot_extra.get(k, 0) + v
        need = int(np.ceil(gsize[g] + psize[p] - inter[g, p] - inter[g, p] / 0.95)) if p else 0
        if args.lines:
            fmt = lambda d: " ".join(f"{k}={v}" for k, v in d.items() if v)  # noqa: E731
            print(f"  GT {g} ({gsize[g]} px) -> {p}: {bscore[g]:.3f}, over by ~{need} px; "
                  f"lacks {int(lack.sum())} [{fmt(kl)}]; extra {int(extra.sum())} [{fmt(ke)}]")
    if args.crop and failed:
        import cv2

        from engine.export import write_png
        args.crop.mkdir(parents=True, exist_ok=True)
        for g in sorted(failed, key=lambda g: bscore[g])[:3]:
            p = best[g]
            ys, xs = np.nonzero((truth == g) | (pred == p))
            y0, y1, x0, x1 = max(ys.min() - 40, 0), ys.max() + 40, max(xs.min() - 40, 0), xs.max() + 40
            img = np.dstack([prep.gray[y0:y1, x0:x1] // 3 + 170] * 3).astype(np.uint8)
            t, q, s_ = truth[y0:y1, x0:x1], pred[y0:y1, x0:x1], scored[y0:y1, x0:x1]
            img[s_ & (t == g) & (q == p)] = (60, 160, 60)
            img[s_ & (t != g) & (q != p) & (q > 0)] = (150, 150, 150)
            img[s_ & (t == g) & (q != p)] = (230, 0, 0)
            img[s_ & (t != g) & (q == p)] = (0, 0, 230)
            for k, seg_pts in enumerate(seg.lines.segments()):
                a, b = np.rint(seg_pts - [x0, y0]).astype(int)
                cv2.line(img, tuple(a), tuple(b), (255, 0, 255) if k + 1 == p else (255, 160, 0), 1)
            write_png(args.crop / f"{Path(args.page).stem}-gt{g}.png", img)
    fmt = lambda d: " ".join(f"{k}={v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]) if v)  # noqa: E731
    print(f"  failed {len(failed)}: lacks [{fmt(tot_lack)}]")
    print(f"  failed {len(failed)}: extra [{fmt(tot_extra)}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
