"""One object with every setting of the method, validated once, serialisable to JSON.

Size parameters are in units of the page's connected-component height ``H_cc`` or width
``W_cc`` (see :mod:`engine.components`), so that one set of defaults fits every scan
resolution.  Defaults follow section 5.1 of the paper except where ``notes/algorithm.md``
records a measured reason to differ (said next to each field).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

UPDATE_RULES = ("bethe", "convex")
REGRESSION_FORMS = ("rotation_invariant", "paper")


class ParameterError(ValueError):
    """An out-of-range or contradictory parameter; the message names it and its range."""


# name -> (low, high, low_inclusive, high_inclusive) for numeric fields.
_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    "sample_ratio": (0.0, 1.0, False, True),
    "seed": (0, 2**32 - 1, True, True),
    "sauvola_window": (0.5, 20.0, True, True),
    "sauvola_k": (0.0, 1.0, False, True),
    "speck_ratio": (0.0, 1.0, True, True),
    "min_speck_area": (0, 10_000, True, True),
    "region_threshold": (0.5, 100.0, True, True),
    "min_region_samples": (1, 10**9, True, True),
    "filter_sigma_across": (0.01, 10.0, True, True),
    "filter_sigma_along": (0.1, 100.0, True, True),
    "orientation_min": (-90.0, 90.0, True, True),
    "orientation_max": (-90.0, 90.0, True, True),
    "orientation_step": (0.1, 45.0, True, True),
    "t_o": (0.5, 20.0, True, True),
    "t_r": (0.0, 1.0, True, False),
    "r": (0.0, 1.0, True, True),
    "epsilon": (0.0, 0.5, True, False),
    "max_em_iterations": (1, 10_000, True, True),
    "kl_tolerance": (0.0, 1.0, False, True),
    "label_tolerance": (0.0, 1.0, True, True),
    "c_v": (0.0, 1e6, False, True),
    "damping": (0.0, 1.0, True, False),
    "mp_max_sweeps": (1, 10_000, True, True),
    "mp_tolerance": (0.0, 1.0, False, True),
    "sigma_t_floor": (0.01, 10.0, True, True),
    "sigma_s_floor": (0.01, 100.0, True, True),
    "candidate_nats": (1.0, 1e4, True, True),
    "merge_gap": (0.0, 100.0, True, True),
    "merge_offset": (0.0, 10.0, True, True),
    "merge_offset_pitch": (0.0, 0.9, True, True),
    "split_offset": (0.0, 100.0, True, True),
    "snapshot_top_k": (1, 64, True, True),
    "label_window": (0, 10_000, True, True),
    "blob_threshold": (0.05, 2.0, True, True),
    "diacritic_height": (0.0, 5.0, True, True),
    "diacritic_fraction": (0.0, 1.0, False, True),
}


@dataclass(frozen=True)
class Parameters:
    """Every setting of the segmentation, with the paper's defaults.

    Lengths are multiples of ``H_cc`` (height) or ``W_cc`` (width) unless a unit is named.
    """

    # --- stage 1: ink -------------------------------------------------------------------
    #: Sauvola window, in units of H_cc (the notes: 2-3 x text height).
    sauvola_window: float = 2.5
    #: Sauvola's k.
    sauvola_k: float = 0.2
    #: Components smaller than this fraction of the area-weighted median component are specks.
    speck_ratio: float = 0.02
    #: Components of fewer pixels than this are always specks (pixels).
    min_speck_area: int = 4
    #: Find the page (or pages) within the image and never take anything outside for ink:
    #: a dark or grey surround (scanner bed, card, book edge) made thousands of specks that
    #: set H_cc (engine.ink.find_page_area).
    page_area: bool = True
    #: A component dropped as non-text (taller than ten text heights, or a long one touching
    #: the image's edge) first loses its long straight strokes (rules, frame sides, folds) and
    #: what is left is tested again: the words touching the stroke stay ink. Off = the whole
    #: component is dropped, with its words (poilus-dev: 17 % of the scored ink lost).
    strip_strokes: bool = True
    #: On colour pages, ink of another colour than the writing (stamps, seals, coloured
    #: rules) is not text (engine.ink.other_colour_ink). Off by default: on poilus-dev it cost
    #: 197 -> 186 one-to-one matches (annotations and second inks that are text lose their
    #: lines); cremma20 FM 68.5 -> 68.8 %. The stamped test pages need it.
    colour_non_text: bool = False
    # --- stage 3: sampling --------------------------------------------------------------
    #: Fraction of ink pixels sampled (paper: 5 %).
    sample_ratio: float = 0.05
    #: Seed of every random choice; same seed and parameters give the same result.
    seed: int = 0
    # --- stage 5: regions ---------------------------------------------------------------
    #: Triangles whose longest side exceeds this many H_cc separate text regions.
    region_threshold: float = 2.5
    #: Regions with fewer samples join the nearest larger region.
    min_region_samples: int = 60
    # --- stage 6: initial lines ---------------------------------------------------------
    #: Std of the anisotropic Gaussian across the line, in H_cc (paper: 1/3).
    filter_sigma_across: float = 1.0 / 3.0
    #: Std of the anisotropic Gaussian along the line, in W_cc (paper: 10/3).
    filter_sigma_along: float = 10.0 / 3.0
    #: Orientation search range of the filter bank, degrees (paper: -40...40).
    orientation_min: float = -40.0
    orientation_max: float = 40.0
    orientation_step: float = 2.5
    #: Search every orientation (-90...90) per region: for multi-oriented pages.
    multi_oriented: bool = False
    #: Without multi_oriented, a region may still take an angle outside orientation_min...max
    #: (steep or vertical side notes) when its lines show better there on two counts: line
    #: contrast and blobs longer along the text, and not when the range's best already shows
    #: long blobs (engine.initial_lines.best_orientation); a region is also cut where its local
    #: text angle changes (engine.regions). moc-train FM 17.3 -> 23.7 %, line IU 20.4 -> 32.8 %,
    #: pixel IU 31.6 -> 46.9 %; ahte-train, cremma20, kraken-sample unchanged.
    steep_regions: bool = True
    #: Blobs are the filtered response above this fraction of its Otsu level (1 = Otsu).
    blob_threshold: float = 1.0
    #: Blobs taller than t_o x H_cc are split (overlap detection; paper: 2).
    t_o: float = 2.0
    #: Blobs whose ink ratio is under t_r are residual and dropped (paper: 0.08).
    t_r: float = 0.08
    #: Components shorter than diacritic_height x H_cc are diacritics, dots or noise; a blob
    #: (stage 6) or a line (stage 8) whose samples are more than diacritic_fraction on them
    #: is residual (the paper's failure class "extra lines on diacritics"). A line of
    #: separate small letters or digits ("le 27 juin 1916", poilus AD78_0038-1) has most of
    #: its samples on such components: 0.6 dropped it. On all 79 dev pages 0.85 and 0.95 give
    #: the same labels (no line's share lies between them), 0.6 loses lines: poilus FM 49.8 ->
    #: 50.7 %, moc-train 24.9 -> 25.2 %, ahte, cremma and kraken unchanged.
    diacritic_height: float = 0.5
    diacritic_fraction: float = 0.9
    #: Before EM, pass the initial lines through stage 8's clean-up (surplus and diacritic
    #: lines removed, fragments and duplicates of one text line merged, lines refitted) on the
    #: posterior of the unary alone. The paper starts EM from the raw blob lines; duplicates
    #: of one row then drift apart and split it.
    merge_initial_lines: bool = True
    # --- stage 7: EM --------------------------------------------------------------------
    #: Plateau of the flattened Gaussian, as a fraction of the interline space S_l.
    r: float = 0.3
    #: Empirical pairwise moments (same / adjacent / farther line) of Delaunay edges: the mean
    #: over the 54 pages of the development data (resources/moments.json, "moments_page_mean").
    moments: tuple[float, float, float] = (0.9407, 0.0526, 0.0067)
    #: E-step update: "bethe" (BP counting numbers, damped) or "convex" (paper, Algorithm 2).
    update_rule: str = "bethe"
    #: c_v of Algorithm 2 (convex rule only).
    c_v: float = 1.0
    #: Damping of message updates in the log domain (0 = none).
    damping: float = 0.5
    #: Message-passing sweeps per E-step at most, and the mean (over samples) largest change of
    #: a posterior entry that ends them.
    mp_max_sweeps: int = 10
    mp_tolerance: float = 1e-3
    #: Learn the line-probability parameters theta_l by moment matching (paper, "Line probability").
    learn_line_prior: bool = True
    #: M-step form: "rotation_invariant" (principal axis) or "paper" (eq. update1).
    regression: str = "rotation_invariant"
    #: Variance floors: sigma_t >= sigma_t_floor x H_cc, sigma_s >= sigma_s_floor x W_cc.
    sigma_t_floor: float = 0.25
    sigma_s_floor: float = 1.0
    #: Lines whose unary is more than this many nats below a sample's best are pruned.
    candidate_nats: float = 30.0
    #: Each sample considers this many consecutive lines around its best one (labels are
    #: ordered across the text); 0 = every line of its region (exact, O(E·L) per sweep).
    #: On ../shared/data 5 scored as well as 9 or better (all 54 pages: o2o 559 -> 563, line
    #: IU 39.4 -> 40.5 %; moc-train pixel IU 29.1 -> 28.1 %) at about 20 % less CPU.
    label_window: int = 5
    #: Paper: no cap given. Pages still moving after 15 iterations oscillate (MOC, many
    #: regions): on moc-train + ahte-train, 15 instead of 50 gave FM 9.7 vs 9.6 % (moc) and
    #: 32.0 vs 32.0 % (ahte), max seconds per page 26.6 vs 77.3.
    max_em_iterations: int = 15
    #: EM stops when the mean KL divergence between successive posteriors is below this.
    #: The paper's 1e-4 is rarely reached (the KL wanders at 1e-4..1e-3 while theta and the
    #: label windows settle) and more iterations did not help: on 6 dev pages (kraken,
    #: cremma 001/004/006/8_21472, ahte book2_page5) 1e-3 gave 111 one-to-one matches of 127
    #: in 3-5 iterations, 1e-4 gave 106 in 20-50.
    kl_tolerance: float = 1e-3
    #: EM also stops when fewer than this fraction of the samples changed their most probable
    #: line in an iteration: the KL can wander above its tolerance for dozens of iterations
    #: (theta and the label windows keep moving) while the labelling no longer changes.
    label_tolerance: float = 2e-3
    # --- stage 8: post-processing -------------------------------------------------------
    #: Lines whose prior (relative to their region) is below epsilon are removed.
    epsilon: float = 1e-3
    #: Merge collinear fragments whose ends are at most merge_gap x W_cc apart ...
    merge_gap: float = 4.0
    #: ... and whose offset across the text is at most merge_offset x H_cc, or at most
    #: merge_offset_pitch x the region's median interline space (wavy lines, Arabic).
    merge_offset: float = 0.6
    merge_offset_pitch: float = 0.4
    merge_fragments: bool = True
    #: After EM, a row of whole-height components lying more than split_offset x H_cc across
    #: its line's row (interlinear insertions, crossed-out words rewritten above or below:
    #: lines of their own in CREMMA's ground truth) becomes a line of its own; 0 = never.
    #: Off by default: 1.0 on all 54 dev pages (bench/run_bench.py) raised cremma20 FM
    #: 67.0 -> 67.7 %, line IU 61.4 -> 62.1, pixel IU 72.3 -> 74.5 (kraken unchanged), but
    #: split rows of ascenders and marks off Arabic lines (H_cc is a letter's height there):
    #: ahte-train FM 62.6 -> 62.1, moc-train FM 17.3 -> 16.0 (result lines 677 -> 814).
    split_offset: float = 0.0
    #: Give the non-text pixels that lie on a line's row (words written over a rule or
    #: touching a frame, kept out of sampling with it) to that line in the final labels.
    label_non_text: bool = True
    # --- snapshots ----------------------------------------------------------------------
    #: A snapshot keeps each sample's posterior over its top-k lines.
    snapshot_top_k: int = 4
    _extra: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._extra:
            raise ParameterError(f"unknown parameter(s): {', '.join(sorted(self._extra))}")
        for name, (lo, hi, lo_in, hi_in) in _RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ParameterError(f"{name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ParameterError(f"{name} must be finite, got {value!r}")
            ok_lo = value >= lo if lo_in else value > lo
            ok_hi = value <= hi if hi_in else value < hi
            if not (ok_lo and ok_hi):
                lb = "[" if lo_in else "("
                rb = "]" if hi_in else ")"
                raise ParameterError(f"{name} = {value!r} is outside {lb}{lo}, {hi}{rb}")
        for name in ("seed", "min_speck_area", "min_region_samples", "max_em_iterations",
                     "mp_max_sweeps", "snapshot_top_k", "label_window"):
            if int(getattr(self, name)) != getattr(self, name):
                raise ParameterError(f"{name} must be a whole number, got {getattr(self, name)!r}")
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.orientation_min > self.orientation_max:
            raise ParameterError(
                f"orientation_min ({self.orientation_min}) must not exceed "
                f"orientation_max ({self.orientation_max})")
        if self.update_rule not in UPDATE_RULES:
            raise ParameterError(f"update_rule must be one of {UPDATE_RULES}, got {self.update_rule!r}")
        if self.regression not in REGRESSION_FORMS:
            raise ParameterError(
                f"regression must be one of {REGRESSION_FORMS}, got {self.regression!r}")
        for name in ("page_area", "strip_strokes", "colour_non_text", "label_non_text", "multi_oriented",
                     "steep_regions", "merge_fragments", "learn_line_prior", "merge_initial_lines"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(f"{name} must be true or false, got {getattr(self, name)!r}")
        try:
            moments = tuple(float(m) for m in self.moments)
        except (TypeError, ValueError):
            raise ParameterError(f"moments must be three numbers, got {self.moments!r}") from None
        if len(moments) != 3 or any(not (0.0 < m < 1.0) for m in moments):
            raise ParameterError(f"moments must be three numbers in (0, 1), got {self.moments!r}")
        if abs(sum(moments) - 1.0) > 1e-3:
            raise ParameterError(f"moments must sum to 1, got {self.moments!r} (sum {sum(moments):.4f})")
        object.__setattr__(self, "moments", moments)

    # --- convenience ----------------------------------------------------------------------
    @property
    def orientation_range(self) -> tuple[float, float]:
        """The filter bank's orientation range in degrees (full range when multi-oriented)."""
        if self.multi_oriented:
            return (-90.0, 90.0)
        return (self.orientation_min, self.orientation_max)

    def replace(self, **changes: Any) -> Parameters:
        """A copy with some fields changed (validated again)."""
        unknown = set(changes) - {f.name for f in fields(self) if f.name != "_extra"}
        if unknown:
            raise ParameterError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(getattr(self, f.name)) if f.name == "moments" else getattr(self, f.name))
                for f in fields(self) if f.name != "_extra"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Parameters:
        if not isinstance(data, dict):
            raise ParameterError("parameters must be a JSON object")
        known = {f.name for f in fields(cls) if f.name != "_extra"}
        kwargs = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        if "moments" in kwargs and isinstance(kwargs["moments"], list):
            kwargs["moments"] = tuple(kwargs["moments"])
        return cls(**kwargs, _extra=extra)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Parameters:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParameterError(f"parameters are not valid JSON: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | Path) -> Parameters:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ParameterError(f"cannot read parameters file {path}: {exc.strerror}") from None
        return cls.from_json(text)

    def describe(self) -> str:
        """Every parameter on its own line, for logs and ``--help``-like output."""
        return "\n".join(f"{k} = {v!r}" for k, v in self.to_dict().items())


#: Fields whose change needs a new preparation (stages 1-6); the others only re-run EM.
PREPARATION_FIELDS = frozenset({
    "sauvola_window", "sauvola_k", "speck_ratio", "min_speck_area", "page_area", "strip_strokes",
    "colour_non_text", "sample_ratio", "seed",
    "region_threshold", "min_region_samples", "filter_sigma_across", "filter_sigma_along",
    "orientation_min", "orientation_max", "orientation_step", "multi_oriented", "steep_regions", "t_o", "t_r",
    "diacritic_height", "diacritic_fraction", "blob_threshold", "merge_initial_lines",
})
