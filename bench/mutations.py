"""Mutation check of the paper's rules: introduce each realistic mistake into a copy of the
engine, one at a time, run the tests, and report which tests fail (the mistake is *caught*) or
that none does (it *survives*).

    python bench/mutations.py [--only NAME[,NAME...]] [--tests FILE ...] [--first] [--markdown]
    python bench/mutations.py --list

The mistakes are those of issue 27 (each once passed the engine's tests) and a few more on the
switches it added; each is a text patch of the source, which must match exactly once (a patch
that no longer applies is reported as such, so that the list is kept in step with the code).
The repository's files (``git ls-files``, as they are in the working tree) are copied to a
temporary folder; each mutation is applied there and undone after its run, so the working tree
is never touched. The unmutated copy must pass the tests first. Exit code 1 if a mutation
survives or a patch does not apply. ``--first`` stops each run at its first failing test
(faster; names one catcher only). docs/paper.md records the outcome.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The engine tests each mutation is run against (test_paper first: it catches most).
TESTS = ("tests/test_paper.py", "tests/test_engine_em.py", "tests/test_engine_stages.py",
         "tests/test_params.py", "tests/test_final_labels.py")


def drop_paper_entry(name: str) -> Callable[[str], str]:
    """A patch removing field ``name``'s entry from engine.params.PAPER (the preset then keeps
    the default's value for it)."""
    def patch(text: str) -> str:
        start = text.index("\nPAPER: dict[")
        at = text.index(f'\n    "{name}": PaperValue(', start)
        depth, i = 0, text.index("(", at)
        while True:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        end = text.index("\n", i)  # the entry's trailing comma
        return text[:at] + text[end:]
    return patch


@dataclass(frozen=True)
class Mutation:
    name: str
    mistake: str
    path: str
    #: (old, new) text replacements, each matching exactly once, or a function of the text.
    edits: tuple[tuple[str, str], ...] | Callable[[str], str]

    def apply(self, text: str) -> str:
        if callable(self.edits):
            return self.edits(text)
        for old, new in self.edits:
            count = text.count(old)
            if count != 1:
                raise ValueError(f"{self.name}: {old!r} occurs {count} times in {self.path}")
            text = text.replace(old, new)
        return text


MUTATIONS: tuple[Mutation, ...] = (
    Mutation("cv_exponent", "Algorithm 2's pairwise exponent c_v written instead of 1/c_v", "engine/em.py",
             (("pair_power = 1.0 / params.c_v if params.update_rule",
               "pair_power = params.c_v if params.update_rule"),)),
    Mutation("theta_l_sign", "the line-prior term theta_l added to the unary with the wrong sign", "engine/em.py",
             (("mp.sweep(u - bias, st.out", "mp.sweep(u + bias, st.out"),)),
    Mutation("default_moments", "EM uses the default's moments whatever the preset says", "engine/em.py",
             (("moments = np.asarray(params.moments, dtype=np.float64)",
               "moments = np.asarray(Parameters().moments, dtype=np.float64)"),)),
    Mutation("convex_damped", "the convex rule damped like the Bethe rule", "engine/em.py",
             (('damping = params.damping if params.update_rule == "bethe" else 0.0', "damping = params.damping"),)),
    Mutation("armijo_unnormalised_mu", "the Armijo step for theta_l fed an unnormalised mu per region",
             "engine/em.py",
             (("mu = target / max(float(target.sum()), 1e-300)", "mu = target"),)),
    Mutation("merge_gap_in_h_cc", "the fragment-merge gap measured in H_cc instead of W_cc", "engine/postprocess.py",
             (("ok = (gap <= params.merge_gap * w_cc)", "ok = (gap <= params.merge_gap * h_cc)"),)),
    Mutation("finish_swapped", "finish() runs the profile labelling under final_labelling='paper' and the "
                               "paper's under the default", "engine/postprocess.py",
             (('    if params.final_labelling == "paper":\n        labels = paper_labels(',
               '    if params.final_labelling == "profile":\n        labels = paper_labels('),)),
    Mutation("preset_drops_regression", "'regression' dropped from the paper preset", "engine/params.py",
             drop_paper_entry("regression")),
    Mutation("preset_drops_prior_in_unary", "'prior_in_unary' dropped from the paper preset", "engine/params.py",
             drop_paper_entry("prior_in_unary")),
    Mutation("preset_drops_theta_edge_sample", "'theta_edge_sample' dropped from the paper preset",
             "engine/params.py", drop_paper_entry("theta_edge_sample")),
    Mutation("drop_pair_power_term", "p_u's m^(1/c_v - 1) term dropped from the message into v",
             "engine/message_passing.py",
             (("        incoming += np.float32(pair_power - 1.0) * out[:, start:stop]\n", ""),)),
    Mutation("moments_swapped", "the adjacent and farther moments swapped in theta learning", "engine/em.py",
             (("moments = np.asarray(params.moments, dtype=np.float64)",
               "moments = np.asarray(params.moments, dtype=np.float64)[[0, 2, 1]]"),)),
    Mutation("prior_not_per_region", "pi_l not divided by N per region (the page's N under prior_scope "
                                     "'region')", "engine/em.py",
             (('prior[st.lines] = moments[:, 0] / (len(st.samples) if params.prior_scope == "region"',
               'prior[st.lines] = moments[:, 0] / (len(prep.samples) if params.prior_scope == "region"'),)),
    Mutation("kl_swapped", "KL divergence with its arguments swapped", "engine/em.py",
             (("total += float((p * np.log(p / q)).sum())", "total += float((q * np.log(q / p)).sum())"),)),
    Mutation("paper_labels_no_split", "the paper's labelling without its pixel split (a component whose "
                                      "samples disagree goes whole to one of their lines)",
             "engine/postprocess.py",
             (("lut[n_labels == 1] = cand[n_labels == 1, 0] + 1", "lut[n_labels >= 1] = cand[n_labels >= 1, 0] + 1"),
              ("    if split.any():  # each pixel", "    if False:  # each pixel"))),
    # Issue 27's part A: the switches it named.
    Mutation("preset_drops_remove_diacritic_lines", "'remove_diacritic_lines' dropped from the paper preset",
             "engine/params.py", drop_paper_entry("remove_diacritic_lines")),
    Mutation("preset_drops_moments", "'moments' dropped from the paper preset", "engine/params.py",
             drop_paper_entry("moments")),
    Mutation("preset_drops_filter_size", "'filter_size_along' dropped from the paper preset", "engine/params.py",
             drop_paper_entry("filter_size_along")),
    Mutation("preset_drops_mp_warm_start", "'mp_warm_start' dropped from the paper preset", "engine/params.py",
             drop_paper_entry("mp_warm_start")),
    Mutation("kernel_size_ignored", "the bank's blobs filtered with OpenCV's kernel whatever filter_size_*",
             "engine/initial_lines.py",
             (("                       *bank_kernels(stats, params, scale, scale_u))", "                       )"),)),
    Mutation("sharpness_unblurred", "the sharpness score on the profile not blurred across (as before issue 27)",
             "engine/initial_lines.py",
             (("return profile_sharpness(across_blur(profile, sig_across, size_across)[:, None])",
               "return profile_sharpness(profile[:, None])"),)),
    Mutation("warm_start_ignored", "theta and the messages carried across E-steps whatever mp_warm_start",
             "engine/em.py",
             (("if not params.mp_warm_start and iteration > 1:", "if False:"),)),
    Mutation("theta_step_without_1_over_cv", "the theta step on e^(-theta f) m_i m_j instead of p_u's power "
                                             "1/c_v", "engine/em.py",
             (("st.out if pair_power == 1.0 else st.out * np.float32(pair_power)", "st.out"),
              ("theta * pair_power, moments,", "theta, moments,"),
              ("limit=params.theta_limit * pair_power)", "limit=params.theta_limit)"),
              ("theta = scaled / pair_power", "theta = scaled"))),
    Mutation("vertex_power_ignores_cv", "p_v's exponent 1/(1 + A_v) whatever c_v", "engine/em.py",
             (("power = (1.0 / (params.c_v + graph.degree))", "power = (1.0 / (1.0 + graph.degree))"),)),
)


def copy_repo(dest: Path) -> None:
    """The tracked files as they are in the working tree."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    for name in files.decode().split("\0"):
        if not name:
            continue
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def run_tests(root: Path, tests: list[str], first: bool) -> tuple[int, list[str], str]:
    """pytest on ``tests`` in ``root`` (its engine imported first); returns (exit code, failing
    test ids, the summary line)."""
    env = dict(os.environ, PYTHONPATH=str(root), QT_QPA_PLATFORM="offscreen")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "--no-header", *tests]
    if first:
        cmd.append("-x")
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    failed = [m.group(1) for m in re.finditer(r"^FAILED (\S+)", proc.stdout, re.M)]
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()[-300:]
    return proc.returncode, failed, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mutations.py", description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated mutation names")
    ap.add_argument("--tests", nargs="+", default=list(TESTS), help="test files (default: the engine tests)")
    ap.add_argument("--first", action="store_true", help="stop each run at its first failing test")
    ap.add_argument("--markdown", action="store_true", help="print the outcome as a Markdown table")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = ap.parse_args(argv)
    chosen = list(MUTATIONS)
    if args.only:
        names = {n.strip() for n in args.only.split(",")}
        unknown = names - {m.name for m in MUTATIONS}
        if unknown:
            ap.error(f"unknown mutation(s): {', '.join(sorted(unknown))}")
        chosen = [m for m in MUTATIONS if m.name in names]
    if args.list:
        for m in chosen:
            print(f"{m.name:<38} {m.path:<26} {m.mistake}")
        return 0
    rows: list[tuple[Mutation, str, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="tlgui-mutations-") as tmp:
        root = Path(tmp)
        copy_repo(root)
        t0 = time.perf_counter()
        code, failed, summary = run_tests(root, args.tests, first=False)
        print(f"unmutated: {summary} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        if code != 0:
            print(f"mutations: the unmutated copy fails {failed}; fix that first", file=sys.stderr)
            return 2
        for m in chosen:
            target = root / m.path
            original = target.read_text(encoding="utf-8")
            try:
                mutated = m.apply(original)
            except ValueError as exc:
                rows.append((m, "patch does not apply", [str(exc)]))
                print(f"{m.name}: PATCH DOES NOT APPLY ({exc})", file=sys.stderr, flush=True)
                continue
            if mutated == original:
                rows.append((m, "patch does not apply", ["no change"]))
                continue
            target.write_text(mutated, encoding="utf-8")
            try:
                t0 = time.perf_counter()
                code, failed, summary = run_tests(root, args.tests, args.first)
            finally:
                target.write_text(original, encoding="utf-8")
            outcome = "caught" if failed else ("error" if code not in (0, 1) else "SURVIVES")
            if code not in (0, 1) and not failed:
                failed = [summary]
            rows.append((m, outcome, failed))
            print(f"{m.name}: {outcome} ({len(failed)} failing, {time.perf_counter() - t0:.0f} s) "
                  + ", ".join(failed[:4]) + (" ..." if len(failed) > 4 else ""), file=sys.stderr, flush=True)
    if args.markdown:
        print("| mistake | mutation | outcome | failing tests |")
        print("|---|---|---|---|")
        for m, outcome, failed in rows:
            short = ", ".join(f"`{f.split('/')[-1]}`" for f in failed[:6]) + (
                f" and {len(failed) - 6} more" if len(failed) > 6 else "")
            print(f"| {m.mistake} | `{m.name}` | {outcome} | {short} |")
    else:
        for m, outcome, failed in rows:
            print(f"{m.name:<38} {outcome:<10} {len(failed):>3} failing: " + ", ".join(failed))
    return 0 if all(outcome == "caught" for _m, outcome, _f in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
