"""Record every run split_rows splits off (split_offset on), with features, and judge it
against the ground truth: good when the run's majority GT line differs from the rest of its
parent line's majority GT line."""
import sys, csv, multiprocessing
from pathlib import Path
import numpy as np
sys.path.insert(0, '/work/main')
from bench.run_bench import find_sets
from bench.steering import ground_truth

RECS = []

def run_page(task):
    name, image, gt, split = task
    import engine.postprocess as pp
    from engine.params import Parameters
    from engine.pipeline import segment
    orig = pp.split_rows
    calls = []
    def wrapped(uv, comp, small, lab, n_groups, h_cc, w_cc, params, fixed=None):
        out, n = orig(uv, comp, small, lab, n_groups, h_cc, w_cc, params, fixed)
        calls.append((uv.copy(), comp.copy(), small.copy(), lab.copy(), n_groups, out.copy(), n, h_cc, w_cc))
        return out, n
    pp.split_rows = wrapped
    prep, _, seg = segment(image, Parameters(split_offset=split))
    pp.split_rows = orig
    truth, scored = ground_truth(Path(gt), Path(image), None)
    comps = prep.components
    # majority GT label per component (over its scored pixels)
    m = (comps > 0) & (truth > 0)
    c = comps[m].astype(np.int64); t = truth[m].astype(np.int64)
    key = c * 100000 + t
    k, cnt = np.unique(key, return_counts=True)
    cc, tt = k // 100000, k % 100000
    order = np.lexsort((-cnt, cc))
    cc, tt, cnt = cc[order], tt[order], cnt[order]
    first = np.r_[True, cc[1:] != cc[:-1]]
    comp_gt = dict(zip(cc[first].tolist(), tt[first].tolist()))
    recs = []
    for uv, comp, small, lab, n0, out, n1, h, w in calls:
        if n1 == n0:
            continue
        sgt = np.array([comp_gt.get(int(x), 0) for x in comp])
        for g in range(n0, n1):
            run = out == g
            parent = np.unique(lab[run])
            parent = int(parent[0])
            rest = (out == parent)
            def maj(mask):
                v = sgt[mask]; v = v[v > 0]
                if len(v) == 0: return 0, 0.0
                vals, cn = np.unique(v, return_counts=True)
                return int(vals[np.argmax(cn)]), float(cn.max() / len(v))
            rg, rs = maj(run); pg, ps = maj(rest)
            gtall = (sgt == rg) if rg > 0 else np.zeros(len(sgt), bool)
            cov_gt = float((gtall & run).sum() / max(gtall.sum(), 1))
            pure_parent = float(((out == parent) & (sgt == pg)).sum() / max((out == parent).sum(), 1))
            # features
            ur = uv[run, 0]; vr = uv[run, 1]
            up = uv[rest & ~small, 0]; vp = uv[rest & ~small, 1]
            lo_u, hi_u = ur.min(), ur.max()
            # stacked coverage: fraction of run's u-extent bins with parent samples
            bins = np.linspace(lo_u, hi_u, 21)
            hb = np.histogram(up, bins=bins)[0]
            cover = float((hb > 0).mean())
            end = float(min(up.max() - hi_u, lo_u - up.min()) / w) if len(up) else -99
            beyond = float(max(hi_u - up.max(), up.min() - lo_u, 0) / w) if len(up) else 99
            off = float((np.median(vr) - np.median(vp)) / h) if len(vp) else 0
            vR = float(np.median(vr))
            band = np.abs(uv[:, 1] - vR) < 0.35 * h
            others = band & ~run
            reach = 1.5 * w
            past_mask = others & (((uv[:, 0] > hi_u) & (uv[:, 0] <= hi_u + reach)) | ((uv[:, 0] < lo_u) & (uv[:, 0] >= lo_u - reach)))
            dens_run = run.sum() / max(hi_u - lo_u, w)
            cont = float(past_mask.sum() / (2 * reach) / max(dens_run, 1e-9))
            recs.append(dict(cont=round(cont, 3), set=name, page=Path(image).stem, good=int(rg != pg and rg > 0),
                             run_gt=rg, run_share=round(rs, 2), parent_gt=pg, n=int(run.sum()),
                             ncomp=len(np.unique(comp[run])), extent=round((hi_u - lo_u) / w, 2),
                             cover=round(cover, 2), end=round(end, 2), beyond=round(beyond, 2),
                             off=round(off, 2), cov_gt=round(cov_gt, 2), pure_parent=round(pure_parent, 2), share=round(run.sum() / max((out == parent).sum() + run.sum(), 1), 3)))
    return recs

if __name__ == '__main__':
    split = float(sys.argv[1]); outp = sys.argv[2]
    sets = find_sets(Path('/work/shared/data'), None)
    tasks = [(n, str(i), str(g), split) for n, pairs in sets.items() for i, g in pairs]
    with multiprocessing.Pool(2) as pool:
        allr = [r for rs in pool.imap_unordered(run_page, tasks) for r in rs]
    with open(outp, 'w', newline='') as f:
        wr = csv.DictWriter(f, fieldnames=list(allr[0].keys())); wr.writeheader(); wr.writerows(allr)
    print(len(allr))
