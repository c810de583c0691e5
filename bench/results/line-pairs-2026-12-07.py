"""For every GT line split among result lines (each piece holding >= 60 % of its scored
pixels on that GT line, union would match), the pieces' pairwise geometry; and the same
geometry for neighbouring result lines of different GT lines."""
import sys, csv, multiprocessing, math
from pathlib import Path
import numpy as np
PITCH = {}
sys.path.insert(0, '/work/main')
from bench.run_bench import find_sets
from bench.steering import ground_truth

def geom(i, j, L, samples, slab, comp_h, sc, h_cc, w_cc):
    phi = L.phi[i]
    c, s = math.cos(phi), math.sin(phi)
    def uv(k):
        xy = samples[slab == k]
        return np.c_[xy[:, 0] * c + xy[:, 1] * s, -xy[:, 0] * s + xy[:, 1] * c]
    A, B = uv(i), uv(j)
    if len(A) < 5 or len(B) < 5: return None
    a0, a1 = np.percentile(A[:, 0], [2, 98]); b0, b1 = np.percentile(B[:, 0], [2, 98])
    gap = max(b0 - a1, a0 - b1)
    # offset across at the junction: median v of the nearest 20 % of each piece toward the other
    if b0 >= a1 or (b0 > a0):
        ea = A[A[:, 0] >= np.percentile(A[:, 0], 80)]; eb = B[B[:, 0] <= np.percentile(B[:, 0], 20)]
    else:
        ea = A[A[:, 0] <= np.percentile(A[:, 0], 20)]; eb = B[B[:, 0] >= np.percentile(B[:, 0], 80)]
    off = abs(np.median(ea[:, 1]) - np.median(eb[:, 1]))
    ov = max(0.0, min(a1, b1) - max(a0, b0))
    if ov > 0:  # overlapping along: offset of medians over the overlap
        ma = (A[:, 0] >= max(a0, b0)) & (A[:, 0] <= min(a1, b1)); mb = (B[:, 0] >= max(a0, b0)) & (B[:, 0] <= min(a1, b1))
        if ma.sum() > 3 and mb.sum() > 3:
            off = abs(np.median(A[ma, 1]) - np.median(B[mb, 1]))
    ha = np.median(comp_h[sc[slab == i]]); hb = np.median(comp_h[sc[slab == j]])
    dang = abs(((math.degrees(math.atan(L.a[i]) + L.phi[i]) - math.degrees(math.atan(L.a[j]) + L.phi[j])) + 90) % 180 - 90)
    n_i, n_j = int((slab == i).sum()), int((slab == j).sum())
    return dict(n_ratio=round(n_j / max(n_i, 1), 3), pitch_h=round(PITCH.get(int(L.region[i]), float('nan')) / h_cc, 2), gap_w=round(gap / w_cc, 2), gap_h=round(gap / h_cc, 2), off_h=round(off / h_cc, 2),
                h_i=round(ha / h_cc, 2), h_j=round(hb / h_cc, 2), same_region=int(L.region[i] == L.region[j]),
                dang=round(dang, 1), len_i=round((a1 - a0) / w_cc, 1), len_j=round((b1 - b0) / w_cc, 1),
                sig_i=round(L.sigma_t[i] / h_cc, 2), sig_j=round(L.sigma_t[j] / h_cc, 2))

def run_page(task):
    name, image, gt = task
    from engine.params import Parameters
    from engine.pipeline import segment
    from engine.metric import _table, _line_matches
    prep, _, seg = segment(image, Parameters())
    truth, scored = ground_truth(Path(gt), Path(image), None)
    table = _table(truth, seg.labels, scored)
    chosen, correct = _line_matches(table, 0.75)
    right = table.pairs[chosen[correct]]
    matched_gt = set(table.gt_ids[right[:, 0]].tolist()); matched_pred = set(table.pred_ids[right[:, 1]].tolist())
    # per pred line: majority gt and share
    maj = {}
    for p in table.pred_ids:
        pass
    P = table.pairs; I = table.inter
    pred_major = {}
    for k in range(len(table.pred_ids)):
        sel = P[:, 1] == k
        if not sel.any(): continue
        best = np.argmax(I[sel]); g = P[sel][best, 0]
        pred_major[k] = (g, I[sel][best] / table.pred_size[k])
    global PITCH
    PITCH = {rp.region: rp.pitch for rp in (prep.row_pitch or ())}
    comp_h = prep.component_heights if prep.component_heights is not None else None
    sc = prep.sample_component; slab = seg.sample_labels; L = seg.lines
    h, w = prep.stats.h_cc, prep.stats.w_cc
    recs = []
    # same pairs: pieces of an unmatched GT line
    by_gt = {}
    for k, (g, share) in pred_major.items():
        if share >= 0.6 and table.pred_ids[k] not in matched_pred:
            by_gt.setdefault(g, []).append(k)
    for g, ks in by_gt.items():
        if len(ks) < 2: continue
        for x in range(len(ks)):
            for y in range(x + 1, len(ks)):
                i, j = int(table.pred_ids[ks[x]]) - 1, int(table.pred_ids[ks[y]]) - 1
                r = geom(i, j, L, prep.samples, slab, comp_h, sc, h, w)
                if r: recs.append(dict(set=name, page=Path(image).stem, kind='same', **r))
    # part pairs: a fragment whose majority gt is matched by another result line
    gt_to_pred = {int(table.gt_ids[a]): int(table.pred_ids[b]) for a, b in right}
    for k, (g, share) in pred_major.items():
        pid = int(table.pred_ids[k])
        if pid in matched_pred or share < 0.5: continue
        gid = int(table.gt_ids[g])
        if gid in gt_to_pred:
            i, j = gt_to_pred[gid] - 1, pid - 1
            r = geom(i, j, L, prep.samples, slab, comp_h, sc, h, w)
            if r: recs.append(dict(set=name, page=Path(image).stem, kind='part', **r))
    # different pairs: neighbouring lines whose major gt differ, both fairly pure
    ks = [k for k, (g, s) in pred_major.items() if s >= 0.6]
    for x in range(len(ks)):
        for y in range(x + 1, len(ks)):
            if pred_major[ks[x]][0] == pred_major[ks[y]][0]: continue
            i, j = int(table.pred_ids[ks[x]]) - 1, int(table.pred_ids[ks[y]]) - 1
            r = geom(i, j, L, prep.samples, slab, comp_h, sc, h, w)
            if r and r['gap_w'] < 4 and r['off_h'] < 4:
                recs.append(dict(set=name, page=Path(image).stem, kind='diff', **r))
    return recs

if __name__ == '__main__':
    outp = sys.argv[1]; names = sys.argv[2:] or None
    sets = find_sets(Path('/work/shared/data'), names)
    tasks = [(n, str(i), str(g)) for n, pairs in sets.items() for i, g in pairs]
    with multiprocessing.Pool(2) as pool:
        allr = [r for rs in pool.imap_unordered(run_page, tasks) for r in rs]
    with open(outp, 'w', newline='') as f:
        wr = csv.DictWriter(f, fieldnames=list(allr[0].keys())); wr.writeheader(); wr.writerows(allr)
    print(len(allr))
