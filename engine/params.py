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
from typing import Any, NamedTuple

UPDATE_RULES = ("bethe", "convex")
REGRESSION_FORMS = ("rotation_invariant", "paper")
UNARY_FORMS = ("plateau", "paper")
LINE_PRIOR_RULES = ("log_ratio", "armijo")
PRIOR_SCOPES = ("region", "page")
ORIENTATION_SCORES = ("contrast", "sharpness")
FINAL_LABELLINGS = ("profile", "paper")
SPLIT_NEAREST = ("never", "locked", "given", "always")
PRESETS = ("default", "paper")
# Choice fields: name -> allowed values.
CHOICES: dict[str, tuple[str, ...]] = {
    "update_rule": UPDATE_RULES, "regression": REGRESSION_FORMS, "unary_form": UNARY_FORMS,
    "line_prior_rule": LINE_PRIOR_RULES, "prior_scope": PRIOR_SCOPES,
    "orientation_score": ORIENTATION_SCORES, "final_labelling": FINAL_LABELLINGS,
    "split_nearest": SPLIT_NEAREST,
    "steep_period": ("ink", "samples"),
    "preset_name": PRESETS,
}


class ParameterError(ValueError):
    """An out-of-range or contradictory parameter; the message names it and its range."""


#: Most message-passing sweeps a page may run (max_em_iterations x mp_max_sweeps): each field
#: inside its range, the product could keep a page busy for years (10000 x 10000 sweeps was
#: in its first EM iteration after 107 s).  The paper preset runs 50 x 100 = 5000, the default
#: 15 x 10; 100000 at 0.01-0.3 s a sweep is hours, which the page time limit ends sooner.
MAX_TOTAL_SWEEPS = 100_000


# name -> (low, high, low_inclusive, high_inclusive) for numeric fields.
_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    "sample_ratio": (0.0, 1.0, False, True),
    "seed": (0, 2**32 - 1, True, True),
    "sauvola_window": (0.5, 20.0, True, True),
    "sauvola_k": (0.0, 1.0, False, True),
    "speck_ratio": (0.0, 1.0, True, True),
    "min_speck_area": (0, 10_000, True, True),
    "max_pitch_hcc": (0.0, 100.0, True, True),
    "region_threshold": (0.5, 100.0, True, True),
    "min_region_samples": (1, 10**9, True, True),
    "row_join": (0.0, 20.0, True, True),
    "row_merge": (0.0, 20.0, True, True),
    "filter_sigma_across": (0.01, 10.0, True, True),
    "filter_sigma_along": (0.1, 100.0, True, True),
    "filter_size_across": (0.0, 10.0, True, True),
    "filter_size_along": (0.0, 1000.0, True, True),
    "orientation_min": (-90.0, 90.0, True, True),
    "orientation_max": (-90.0, 90.0, True, True),
    "orientation_step": (0.1, 45.0, True, True),
    "t_o": (0.5, 20.0, True, True),
    "t_r": (0.0, 1.0, True, False),
    "t_r_typical": (0.0, 1.0, True, False),
    "row_fill": (0.0, 10.0, True, True),
    "file_row_fill": (0.0, 10.0, True, True),
    "r": (0.0, 1.0, True, True),
    "epsilon": (0.0, 0.5, True, False),
    "max_em_iterations": (1, 10_000, True, True),
    # Tolerances below 1e-12 are under float64's noise on the quantities compared (means of
    # posteriors): never reached, they only make every run hit its caps.
    "kl_tolerance": (1e-12, 1.0, True, True),
    "label_tolerance": (0.0, 1.0, True, True),
    "c_v": (0.0, 1e6, False, True),
    "damping": (0.0, 1.0, True, False),
    "mp_max_sweeps": (1, 10_000, True, True),
    "mp_tolerance": (1e-12, 1.0, True, True),
    "sigma_t_floor": (0.01, 10.0, True, True),
    "sigma_t_pitch": (0.0, 1.0, True, True),
    "m_step_trim": (0.0, 100.0, True, True),
    "anchor_reach": (0.0, 100.0, True, True),
    "anchor_sigma_t": (0.0, 100.0, True, True),
    "anchor_gap": (0.0, 0.5, True, True),
    "given_piece": (0.0, 1000.0, True, True),
    "given_pieces": (0, 10_000, True, True),
    "given_regions": (0.0, 100.0, True, True),
    "sigma_s_floor": (0.01, 100.0, True, True),
    "candidate_nats": (1.0, 1e4, True, True),
    "merge_gap": (0.0, 100.0, True, True),
    "merge_offset": (0.0, 10.0, True, True),
    "merge_offset_pitch": (0.0, 0.9, True, True),
    "split_offset": (0.0, 100.0, True, True),
    "split_space": (0.0, 1.0, True, True),
    "snapshot_top_k": (1, 64, True, True),
    "label_window": (0, 10_000, True, True),
    # Steps of 5 deg either side of a region's frame: up to 60 deg (a line steeper than that
    # to its frame is another block's, and its slope in the frame runs off to infinity).
    "oriented_blobs": (0, 12, True, True),
    "steep_evidence": (0.0, 100.0, True, True),
    "blob_threshold": (0.05, 2.0, True, True),
    "weak_line_level": (0.0, 1.0, True, False),
    "diacritic_height": (0.0, 5.0, True, True),
    "diacritic_fraction": (0.0, 1.0, False, True),
    "line_prior_step": (0.0, 100.0, False, True),
    "line_prior_clip": (0.0, 1e6, True, True),
    "theta_limit": (0.0, 1e6, True, True),
    "theta_edge_sample": (0, 10**9, True, True),
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
    #: On colour pages, only the other-colour ink that forms shapes taller than a row is not
    #: text (engine.ink.stamp_ink): a stamp's ring or printed block, a seal, a coloured mark
    #: down the margin; a word written in a second ink within a row stays text. Such ink is
    #: kept out of sampling (no initial line, no EM sample) and still labelled at the end,
    #: like every non-text pixel on a line's row (label_non_text). Implied by colour_non_text.
    #: Off: poilus-dev FM 68.7 -> 67.6 % on the default draw (a new draw of the samples);
    #: +1.5, +0.9 and +0.2 points over three seeds with sample_by_position on in both runs
    #: (docs/history.md).
    colour_stamps: bool = False
    # --- stage 2: component statistics ---------------------------------------------------
    #: H_cc checked against the page's rows: where the row pitch (engine.pitch.page_rows,
    #: measured at the ink-weighted text size) is more than max_pitch_hcc x H_cc, H_cc and
    #: W_cc are taken with the chain cut at 2.5 x the ink-weighted typical component height
    #: instead of the plain median's (engine.components.row_checked_stats); 0 = off. Not in
    #: the paper. Dev pages' rows lie 1.2-5.3 H_cc apart (ahte moc_train_18 5.31 the widest);
    #: poilus AN_0121-2, whose perforated edge and specks set H_cc to 13 px, 16.1.
    max_pitch_hcc: float = 10.0
    # --- stage 3: sampling --------------------------------------------------------------
    #: Fraction of ink pixels sampled (paper: 5 %).
    sample_ratio: float = 0.05
    #: Seed of every random choice; same seed and parameters give the same result.
    seed: int = 0
    #: Draw the samples by a key of each pixel's position and the seed (engine.sampling.
    #: pixel_keys) instead of a permutation of the ink: ink removed in one place (a stamp)
    #: leaves the samples elsewhere as they were, so a change's effect is not lost in a new
    #: draw (poilus-dev FM 68.7 / 63.0 / 63.3 % at seeds 0 / 1 / 2). Off: the paper's draw.
    sample_by_position: bool = False
    # --- stage 5: regions ---------------------------------------------------------------
    #: Triangles whose longest side exceeds this many H_cc separate text regions.
    region_threshold: float = 2.5
    #: Regions with fewer samples join the nearest larger region.
    min_region_samples: int = 60
    #: A word gap is not a region boundary when the row continues at the same pitch phase:
    #: Delaunay edges the cut removes between two single-row regions that run along a row
    #: (ends less than a quarter of the page's row pitch apart across the text) and are at
    #: most row_join x the row pitch long are kept (engine.pitch.row_join_edges); 0 = off, the
    #: paper's cut. Not in the paper. The synthetic wide_words pages (word gaps of 4 H_cc, rows
    #: 4.5 H_cc apart) need 0.91-1.0 (every row one region at 1.0, none at 0.9); on the 79 dev
    #: pages no such edge joins two ground-truth lines at any length (docs/history.md), and
    #: 1.0 and 1.5 gave the same scores on poilus-dev and cremma20.
    row_join: float = 1.5
    # --- stage 6: initial lines ---------------------------------------------------------
    #: Std of the anisotropic Gaussian across the line, in H_cc (paper: 1/3).
    filter_sigma_across: float = 1.0 / 3.0
    #: Std of the anisotropic Gaussian along the line, in W_cc (paper: 10/3).
    filter_sigma_along: float = 10.0 / 3.0
    #: Size of the bank's kernel across the line (H_cc) and along it (W_cc); 0 = OpenCV's
    #: own size for the sigma (8 sigma + 1 cells, +-4 sigma). Section 5.1 prints H = 1/3 H_cc
    #: and W = 10 W_cc with the sigmas above: a kernel cut at +-0.5 sigma across and +-1.5
    #: sigma along (engine.initial_lines.kernel_cells). The paper's size gave 16 % more initial
    #: lines (first 4 pages of each dev set: 391 -> 452; ahte book1_page19 28 -> 52) and FM
    #: 75.9 -> 70.6 %, line IU 82.8 -> 78.7 % (ahte-train FM 87.0 -> 72.8 %); docs/paper.md.
    filter_size_across: float = 0.0
    filter_size_along: float = 0.0
    #: Orientation search range of the filter bank, degrees (paper: -40...40).
    orientation_min: float = -40.0
    orientation_max: float = 40.0
    orientation_step: float = 2.5
    #: Score of an orientation of the filter bank: "contrast" (engine.initial_lines.line_contrast,
    #: the filtered profile against its blur at the text height) or "sharpness" (paper: "the
    #: better response on the projection profile", read as sum P^2 / (sum P)^2).
    orientation_score: str = "contrast"
    #: Search every orientation (-90...90) per region: for multi-oriented pages.
    multi_oriented: bool = False
    #: Without multi_oriented, a region may still take an angle outside orientation_min...max
    #: (steep or vertical side notes) when its lines show better there (line contrast over the
    #: half-turn, engine.initial_lines.best_orientation); a region is also cut where its local
    #: text angle changes (engine.regions). moc-train FM 17.3 -> 23.7 %, line IU 20.4 -> 32.8 %,
    #: pixel IU 31.6 -> 46.9 %; ahte-train, cremma20, kraken-sample unchanged (with a second
    #: test, blobs longer along the text, since dropped: issue 26, docs/history.md).
    steep_regions: bool = True
    #: With steep_regions, a region takes an angle outside orientation_min...max only when its
    #: ink supplies evidence for it: its line contrast there is at least this many times the
    #: best it shows at any angle of the range SPLIT_ANGLE (20 deg) or more away, or its
    #: profile across the text has a row period there spanning two rows or more
    #: (steep_period: the profile of its ink or of its samples). Otherwise it keeps the
    #: page's direction (the mode of its long words' axes, engine.regions.component_axes):
    #: the best angle within 10 deg of it (engine.initial_lines.best_orientation). Bilevel
    #: pages have no word axes, hence no direction to fall back on, and are not tested.
    #: Without it, a word of large slanted cursive whose H_cc came out at a third of its
    #: letters' height (poilus AN_0121-2: 13 px from a perforated edge) scored best across its
    #: downstrokes and took their angle: regions at -64, 81, -90, -71, -58, -53 deg on three
    #: horizontal rows. 0 = off (any better score wins). Not in the paper (its range is
    #: -40...40). At 3: poilus-dev FM / line IU 67.0 / 78.6 -> 69.7 / 80.5 %, 445 -> 432
    #: lines; ahte-train, cremma20, kraken-sample, moc-train unchanged (docs/history.md,
    #: 2026-11-27). The contrast ratios of the dev pages' candidates run without a gap
    #: (bench/steep_margins.py): highest rejected 2.99 / 2.89, lowest accepted 3.31 / 3.04 at
    #: seeds 0 / 1.
    steep_evidence: float = 3.0
    #: Where steep_evidence looks for the row period: "ink", the profile across the text of
    #: every pixel of the region's components at that angle (the raster its frame is scored
    #: on, engine.initial_lines.best_orientation); "samples", the profile of the samples drawn
    #: from them (before session 54), which changes with the draw. On the dev pages the two
    #: differ on one candidate at seeds 0 and 1 (bench/steep_margins.py): poilus AD78_0018-0 at
    #: seed 1, 542 samples whose profile showed a period at -48.75 deg (contrast ratio 2.2),
    #: the ink none: one extra line fewer; every other page scores the same.
    steep_period: str = "ink"
    #: A line runs at most SPLIT_ANGLE (20 deg, where stage 5 cuts a region in two blocks)
    #: from its region's frame: a steeper initial fit or M-step regression is turned to that
    #: angle (engine.regression.fit_from_moments). A steeper direction is another block's; a
    #: blob or a line whose samples spread across it (specks, a capital's long stroke, words
    #: of two rows) turned 35-70 deg from its frame (poilus AN_0121-2), across words that no
    #: block's rows at that angle support. Not in the paper (eq. update1 fits each line freely).
    frame_lines: bool = False
    #: After the initial lines, a word at the junction of two touching blocks (regions) goes
    #: to the block whose lines pass at least twice as close to it as its own block's
    #: (engine.blocks.refine_boundaries), and the blocks' lines are fitted again: the cut
    #: between blocks at different angles comes from windows of 8 text heights, and near a
    #: junction it gave a side note's corner to the main text. Not in the paper.
    block_boundaries: bool = True
    #: With block_boundaries: a block whose samples lie in groups further apart than the
    #: region threshold (no sample of one within region_threshold x H_cc of the other), each
    #: of at least 3 x min_region_samples samples, is split into those groups, each a block
    #: with the frame it had (engine.blocks.split_apart_blocks): joining touching blocks at
    #: one angle and moving words at junctions had left blocks in parts that no longer touch,
    #: and their lines ran from one part through another block's rows to the other (moc-train
    #: moc_train_20, moc_train_16). bench/run_bench.py, FM / line IU %, seed 0: moc-train
    #: 32.8 / 48.1 -> 33.4 / 48.2 (289 -> 294 matches), poilus-dev 68.7 / 81.1 either way (286
    #: -> 287), ahte-train, cremma20 and kraken-sample unchanged; seed 1: moc-train 30.6 / 45.6
    #: -> 31.4 / 46.6 (266 -> 272), poilus-dev 67.9 / 79.2 -> 67.3 / 78.7 (281 -> 279:
    #: AD78_0064-0, a page annotated in part), the others unchanged. Not in the paper.
    split_apart_blocks: bool = True
    #: A small part of a region (under 16 x min_region_samples samples) split off at another
    #: text angle stands apart when its line contrast says so (as a large part does) and its
    #: frame then comes out at that angle (within SPLIT_ANGLE, not at the orientation range's
    #: edge); before, it had to lie 45 deg or more from the main text (engine.regions.
    #: keep_distinct_parts, engine.blocks.merge_parallel_blocks). Not in the paper. moc-train
    #: FM / line IU %, seeds 0 / 1 / 2: 31.3 / 44.4, 29.8 / 41.7, 31.9 / 44.9 off; 32.1 / 45.2,
    #: 29.9 / 42.2, 32.3 / 45.9 on; the other sets unchanged (docs/history.md, 2026-11-27, moc-cross).
    small_parts_frame: bool = True
    #: A part split off at another text angle whose line contrast at the main text's angle is
    #: not under KEEP_RATIO x its best (engine.regions.keep_distinct_parts) stands apart when
    #: its frame then comes out at its own angle (within SPLIT_ANGLE, not at the orientation
    #: range's edge; engine.blocks.merge_parallel_blocks), and is folded back otherwise. The
    #: split's cells (4.5 text heights) straddle a junction, so a narrow note's part also holds
    #: the main text's row ends, whose rows raise its contrast at the main text's angle
    #: (moc_train_9: a column at 89 deg beside a block at -27 deg, ratio 0.65). Not in the paper.
    mixed_parts_frame: bool = True
    #: Initial lines at their own angle within a region (engine.oriented_blobs): the region
    #: is also filtered at this many steps of 5 deg either side of its frame; where a turned
    #: filter responds 1.2 times more at a sample, its frame blob runs through the rows of a
    #: block or a row at that angle, and the sample goes to that angle's blob when that blob
    #: is the better line. Rows that fan out within a block (moc_train_16) and blocks at
    #: close angles in one region got lines at the frame's angle, between or across rows.
    #: 0 = off (paper). Line IU %, seeds 0 / 1 / 2, off -> 3 (docs/history.md, session 59):
    #: cremma20 69.2 / 68.9 / 68.9 -> 70.7 / 70.0 / 70.3, moc-train 48.2 / 46.6 / 48.6 ->
    #: 49.6 / 46.4 / 47.6, poilus-dev 81.1 / 78.8 / 77.5 -> 79.8 / 78.9 / 78.6; ahte-train and
    #: kraken-sample unchanged.
    oriented_blobs: int = 3
    #: Blobs are the filtered response above this fraction of its Otsu level (1 = Otsu).
    blob_threshold: float = 1.0
    #: Short lines (a paragraph's last words) respond under the blob level. Going down from it
    #: in tenths to this fraction of it (0.9, 0.8, 0.7), a blob that holds no blob found higher
    #: up is a line of its own; 0 = off (paper). All 79 dev pages, FM % at floors 0.3 / 0.5 /
    #: 0.6 / 0.7 / 0.8 (off): cremma20 72.1 / 72.1 / 72.1 / 72.1 / 71.3 (68.8), poilus-dev
    #: 56.8 / 57.1 / 57.9 / 57.8 / 57.9 (57.6), moc-train 26.0 / 25.6 / 25.5 / 25.8 / 25.5
    #: (25.2); ahte-train and kraken-sample unchanged at every floor.
    weak_line_level: float = 0.7
    #: A row of a region's period (engine.pitch, the samples' own row pitch P) beyond the
    #: region's first and last initial lines, in which no line runs, gets a line fitted to its
    #: samples that lie further than row_fill x P across the text from every line of the
    #: region, when it holds at least min_region_samples of them and letters among them
    #: (engine.row_fill.letters_in_row: no more than diacritic_fraction of its samples on
    #: components under diacritic_height or over CHAIN_HEIGHTS x H_cc): a short row whose blob
    #: fell under Otsu or t_r (a signature), specks, a fold, a card's edge. Without a line of
    #: their own EM gives them to the nearest line, whose band and slope follow them (poilus
    #: AN_0121-2: one line, sigma_t 203 px, over three rows 210 px apart; FM 0 -> 1.00). 0 =
    #: off (paper). At 0.75 against off, FM / line IU % (lines found) over seeds 0, 1, 2:
    #: poilus-dev 67.9 / 81.5 (433), 68.0 / 76.8 (438), 65.3 / 77.6 (442) against 67.8 / 81.4
    #: (429), 66.0 / 76.0 (436), 64.0 / 76.8 (440); moc-train 31.3 / 44.4, 29.8 / 41.7, 31.9 /
    #: 44.9 against 31.5 / 44.5, 29.6 / 41.8, 31.9 / 44.9; ahte-train, cremma20 and
    #: kraken-sample unchanged (docs/history.md, 2026-11-27, "rows filled when they hold
    #: letters"). Without the letters test a form's empty dashed rows below the text got
    #: lines that disturbed the initial lines' merge (tests/test_scan_frontend.py, dashed).
    row_fill: float = 0.75
    #: The same fill (engine.row_fill, reach in row pitches) for lines read from another tool's
    #: file (PAGE, ALTO, label image) when none is locked: rows beyond the file's first and last
    #: lines that it leaves out (a signature, a date, stamps) get a line, else EM gives their
    #: ink to the nearest given line, which leaves its row (engine.initial_io.fill_missing_rows;
    #: issue 24's run (c): pooled FM 68.5 -> 70.6 %). 0 = off (paper).
    file_row_fill: float = 0.75
    #: Blobs taller than t_o x H_cc are split (overlap detection; paper: 2).
    t_o: float = 2.0
    #: Split a tall blob at the valleys of its row profile (equal bands only where it has
    #: none); off = the paper's equal bands of at most t_o x H_cc.
    overlap_valleys: bool = True
    #: Scale the blob filters (and t_o) to the region's line pitch / 2.5 where its lines are
    #: regularly spaced much further apart than its components are tall (Arabic hands broken
    #: into letter groups: H_cc 20 px for lines 100 px apart), and never so large that a blob
    #: 1.2 pitches tall passes for one line (tall loops: initial_lines.BLOB_PITCHES); off =
    #: H_cc, as printed.
    pitch_line_height: bool = True
    #: Blobs whose ink ratio is under t_r are residual and dropped (paper: 0.08).
    t_r: float = 0.08
    #: ...unless it is at least t_r_typical x the page's typical ink ratio (the area-weighted
    #: median over every region's blobs at Otsu's level, from three blobs up;
    #: initial_lines.residual_ratio): the ink ratio of a row follows the pen's width against
    #: the writing's height, and a thin pen's rows sit at t_r itself (cremma
    #: 01R_P1S7P178_007: 0.071-0.103, its rows dropped by turns as the raster's cells moved;
    #: dev pages' typical ratios run 0.08-0.42). Not a gap between values: poilus-dev's blobs
    #: lie at 0.485 and 0.501 of their page's ratio. 0 = t_r alone (paper).
    t_r_typical: float = 0.5
    #: The blob raster's cells along the text hold the mean of the ink over their length
    #: (initial_lines._region_raster); off, the ink at each cell's centre only, which reads
    #: one column in ten or more of the region (the paper does not say how its image is
    #: reduced). Off: on, ahte-train lost 2.4 FM points (the same number of initial lines,
    #: placed otherwise) while the thin-pen letters it was for are held by t_r_typical.
    raster_along_mean: bool = False
    #: Components shorter than diacritic_height x H_cc are diacritics, dots or noise; a blob
    #: (stage 6) or a line (stage 8) whose samples are more than diacritic_fraction on them
    #: is residual (the paper's failure class "extra lines on diacritics"). A line of
    #: separate small letters or digits ("le 27 juin 1916", poilus AD78_0038-1) has most of
    #: its samples on such components: 0.6 dropped it. On all 79 dev pages 0.85 and 0.95 give
    #: the same labels (no line's share lies between them), 0.6 loses lines: poilus FM 49.8 ->
    #: 50.7 %, moc-train 24.9 -> 25.2 %, ahte, cremma and kraken unchanged.
    diacritic_height: float = 0.5
    diacritic_fraction: float = 0.9
    #: Drop blobs (stage 6) and lines (stage 8) living on diacritics (the test above). Not in
    #: the paper, which has only t_r (stage 6) and epsilon (stage 8).
    remove_diacritic_lines: bool = True
    #: After EM, drop lines that own no component larger than a diacritic (every component
    #: they touch has most of its samples on another line): EM lines through a cloud's
    #: loops, the tops of a taller row, stroke ends under a row. Their samples go to their
    #: component's line. No threshold; not in the paper. poilus-dev FM 62.5 -> 64.3 %, line
    #: IU 70.9 -> 74.3 % (18 fewer lines, 2 more matched); moc-train one line fewer (FM 25.8 ->
    #: 25.9 %); ahte-train, cremma20 and kraken-sample unchanged.
    remove_ownerless_lines: bool = True
    #: After EM, a component whose centre lies more than half a text height off its line's
    #: local row (the weighted median of the line's components around it) goes to the line
    #: whose local row is nearest it: the sagging or climbing end of a row, that a straight
    #: line leaves to the next row (engine.postprocess.follow_local_rows). Not in the paper.
    #: One-to-one matches on the 79 dev pages, off -> on: ahte-train 326 -> 362, moc-train
    #: 216 -> 230, kraken-sample 39 -> 40, cremma20 145 -> 146, poilus-dev 284 -> 282 (line
    #: IU 78.2 -> 78.4 %). Moving only to a local row under 0.75 or 0.5 of the own row's
    #: distance: poilus-dev 285 and 279, ahte-train 361 and 353, kraken-sample 40 and 39.
    follow_local_rows: bool = True
    #: Before EM, pass the initial lines through stage 8's clean-up (surplus and diacritic
    #: lines removed, fragments and duplicates of one text line merged, lines refitted) on the
    #: posterior of the unary alone. The paper starts EM from the raw blob lines; duplicates
    #: of one row then drift apart and split it.
    merge_initial_lines: bool = True
    #: In that clean-up, a line's prior (surplus lines: under epsilon) is the mean of its
    #: samples' posteriors (pi_l = mean_v p_v(l), as EM's M-step sets it), not its blob's share
    #: of its region's ink. A blob of a few samples on a piece of a margin note is chosen by
    #: its whole piece (moc_train_5: 7 samples in the blob, 147 choosing its line, prior
    #: 0.0003): dropped, its samples went to their next line, a row 1800 px along, and the
    #: refitted line ran across the page. Not in the paper (whose EM starts from the blobs).
    cleanup_posterior_prior: bool = True
    # --- stage 7: EM --------------------------------------------------------------------
    #: Plateau of the flattened Gaussian, as a fraction of the interline space S_l.
    r: float = 0.3
    #: Form of eq. ff2 beyond the plateau: "plateau" = -max(0, |d| - r S)^2 / 2 sigma^2 (the
    #: Gaussian continues from the plateau's edge, no jump of 0.5 (r S / sigma)^2 nats at it) or
    #: "paper" = -d^2 / 2 sigma^2 (as printed: full distance beyond r S).
    unary_form: str = "plateau"
    #: log pi_l is added to the unary (a mixture weight). The paper has the line probability
    #: only through theta_l (eq. ff3).
    prior_in_unary: bool = True
    #: Empirical pairwise moments (same / adjacent / farther line) of Delaunay edges: the mean
    #: over the 54 pages of the development data (resources/moments.json, "moments_page_mean").
    #: The paper learns them from ICDAR 2013's training set and prints no values; the ``paper``
    #: preset's (0.85, 0.13, 0.02) are a placeholder. Learn them from your own ground truth with
    #: ``tlseg learn-moments GT... --json FILE`` and use them with ``--moments FILE``.
    moments: tuple[float, float, float] = (0.9407, 0.0526, 0.0067)
    #: Match theta to the moments of the page's own graph under its starting lines (the
    #: unary's labels, EM's iteration 0: engine.em.page_moments) instead of ``moments`` when
    #: that graph has more edges between lines than any page ``moments`` were learnt on
    #: (engine.em.moments_for_page): small writing on tight rows. Not in the paper, which
    #: learns them from a training set.
    page_moments: bool = True
    #: E-step update: "bethe" (BP counting numbers, damped) or "convex" (paper, Algorithm 2).
    update_rule: str = "bethe"
    #: c_v of Algorithm 2 (convex rule only).
    c_v: float = 1.0
    #: Damping of message updates in the log domain (0 = none; bethe rule only, the convex
    #: rule is never damped).
    damping: float = 0.5
    #: Message-passing sweeps per E-step at most, and the mean (over samples) largest change of
    #: a posterior entry that ends them.
    mp_max_sweeps: int = 10
    mp_tolerance: float = 1e-3
    #: Carry the pairwise parameters theta_0..2, the line parameters theta_l and the messages
    #: from one E-step to the next (warm start). Off = Algorithm 2 as printed: every E-step
    #: starts from "theta_k = 0, m_{v->u} = 1". Off on the first 4 pages of each dev set: FM
    #: 75.9 -> 75.0 %, line IU 82.8 -> 80.9 % (moc-train 65.1 -> 59.2 %), 55 -> 87 EM
    #: iterations, CPU +28 %; under the paper preset every E-step then runs its 100 sweeps.
    mp_warm_start: bool = True
    #: Learn the line-probability parameters theta_l by moment matching (paper, "Line probability").
    learn_line_prior: bool = True
    #: How theta_l is learned: "log_ratio" (theta_l += line_prior_step x log(mean_v p_v(l) / pi_l),
    #: clipped to +-line_prior_clip; converges in a few sweeps) or "armijo" (paper, Algorithm 2:
    #: a gradient step on the dual with Armijo backtracking, as for theta_0..2).
    line_prior_rule: str = "log_ratio"
    line_prior_step: float = 0.5
    #: Bound on |theta_l| (0 = none).
    line_prior_clip: float = 5.0
    #: pi_l = mean of p_v(l) over the samples of the line's region ("region") or over the
    #: page's N samples ("page", eq. pline). Per region a one-word region keeps its line
    #: under epsilon.
    prior_scope: str = "region"
    #: Bound on |theta_k| of the pairwise term, nats (0 = none): moments the unary makes
    #: unreachable send theta to infinity.
    theta_limit: float = 10.0
    #: The theta step reads the class fractions of a fixed random sample of this many edges
    #: (0 = all edges, as printed): the means are within a fraction of a percent at a third of
    #: the cost per sweep on a page of 140k edges.
    theta_edge_sample: int = 40_000
    #: The interline space S_l of the unary's plateau (r S_l) is measured only to lines that
    #: share an MRF edge with line l (engine.blocks.linked_lines): lines of one block, never
    #: of another block at the same angle that the region joins through a third (moc_train_16:
    #: a paragraph's last line found its "next line" 2800 px below, S_l = 1433 px, and its
    #: plateau took the six rows above it). Not in the paper, which counts any line above and
    #: below (Koo & Cho's interline space).
    linked_neighbours: bool = True
    #: M-step form: "rotation_invariant" (principal axis) or "paper" (eq. update1).
    regression: str = "rotation_invariant"
    #: Variance floors: sigma_t >= sigma_t_floor x H_cc, sigma_s >= sigma_s_floor x W_cc.
    sigma_t_floor: float = 0.25
    sigma_s_floor: float = 1.0
    #: Cap on sigma_t as a fraction of the region's row pitch (engine.pitch; 0 = no cap, the
    #: paper): a line's band may not cover its neighbour's row. Not in the paper. Off by
    #: default: at 0.25 on its own, moc-train lost 15 one-to-one matches (curved side notes
    #: need a wide band; moc_train_8 9 -> 2), ahte-train gained 2, poilus-dev 1.
    sigma_t_pitch: float = 0.0
    #: The M-step fits each line to the samples within m_step_trim x its sigma_t across it
    #: (a trimmed regression; the line priors from all samples): ink far from every line
    #: (clouds drawn round a will, stamps, a margin's note without a line of its own) still
    #: goes to the nearest line, but no longer widens its band and turns it off its row.
    #: 0 = every sample, weighted by its posterior (paper, eq. update1). Issue 24's run (c)
    #: (the ground truth's lines, free), pooled FM / line IU %: 70.6 / 84.9 off, 72.1 / 87.8
    #: at 3, 73.8 / 90.0 at 2.5, 73.5 / 91.3 at 2; the default run, poilus-dev over seeds
    #: 0-2: 65.6 / 78.0 off, 65.9 / 78.1 at 3, 65.8 / 77.0 at 2.5; ahte-train at 2: 68.6 / 93.8
    #: (70.7 / 98.6 off). docs/history.md, 2026-11-27 (morning).
    m_step_trim: float = 3.0
    #: A line another tool's file gave and left free (``LineSet.anchored``: PAGE, ALTO or a
    #: label image, not locked) stays on the row the file put it on: after each M-step its
    #: two ends lie at most anchor_reach x H_cc across from where the file drew them (half a
    #: text height: the row's body), and its sigma_t is at most anchor_sigma_t x H_cc (a
    #: row's own ink, ascenders and descenders included, spreads less; the default run's
    #: lines have a median of 0.26-0.96 H_cc per poilus page). Without it, ink the file does
    #: not annotate (clouds round a will, stamps, notes) widened the band of the nearest given
    #: line until it left its row (poilus AN_0001-0: sigma_t to 3.4 H_cc). 0 = no bound (the
    #: line is free, as EM's own). Issue 24's run (c), pooled FM / line IU % and pages at or
    #: above (a): 72.3 / 87.8 and 60 of 79 free; 74.0 / 90.4 and 62 at (0.5, 0.75); 73.6 /
    #: 90.1 and 61 at (0.5, 0.6); 73.1 / 89.9 and 59 at (0.5, 1.0); 72.4 / 88.3 at (0.5, 0);
    #: 73.3 / 89.1 at (0, 0.75). On EM's own lines the same bounds cost ahte-train 71.6 / 98.8
    #: -> 69.0 / 94.2 (docs/history.md): only given lines are anchored. Not in the paper.
    anchor_reach: float = 0.5
    anchor_sigma_t: float = 0.75
    #: ... and within the file's own line spacing, where H_cc is a poor proxy for it (drafts
    #: whose crossings-out inflate H_cc: cremma20 10_c71ca 137 px for rows ~100 px apart;
    #: insertions half a row above their row): each end moves at most anchor_gap x the across
    #: distance to the nearest other given line that overlaps it along the text, and its
    #: sigma_t is at most twice that (its band ends halfway to the neighbour), so two given
    #: neighbours never share a row. 0 = H_cc's bounds alone. Not in the paper.
    anchor_gap: float = 0.25
    #: An anchored line keeps the extent along the text the file gave it (its ends where the
    #: file put them, seen along the line as refined): a short given line (an insertion, a
    #: margin note, a row's half) that grew along the text took the words of the row beside
    #: it, and lost its own to the line that row is (cremma20 12_dbc9b, moc-train). Off = the
    #: M-step's extent. Not in the paper.
    anchor_extent: bool = True
    #: Stage 8 never removes an anchored line (surplus, diacritic or ownerless) nor merges two
    #: given lines (anchored or locked) into one: the file said there are two lines there.
    #: (A free line of EM's own still merges into a given one.) Not in the paper.
    anchor_keep: bool = True
    #: A locked line a file gives (``--initial-lines FILE --lock-initial-lines``, a PAGE line
    #: marked locked) is cut into straight pieces, one per given_piece x H_cc of its length
    #: and at most given_pieces: a label image's or a polygon's ink cut along its axis, each
    #: run's own line; a PAGE or ALTO baseline cut by arc length, each piece moved to the
    #: middle of its own ink. EM never moves a locked piece, so each holds its part of a row
    #: that bends or waves, and stage 8 joins the pieces' labels into one line
    #: (``LineSet.chain``). One straight line per text line gives a curved row's ends to the
    #: lines beside it: with the ground truth's lines locked (bench/steering.py, run (d)),
    #: moc-train 54.2 / 85.0 -> 72.7 / 97.9 % FM / line IU, ahte-train 75.9 -> 84.6 %
    #: FM (wavy baselines), pooled 81.7 -> 86.6 % FM. Free lines are not cut: free pieces
    #: wander off on their own (ahte-train book1_page19, run (c) with 2 H_cc pieces: FM 0.70
    #: -> 0.26). The cap bounds the cost, which grows with the lines EM carries (book1_page19
    #: locked, EM and stage 8: 27 lines 4.9 s, 1198 uncapped pieces 57 s and 1.2 GB; `tlseg
    #: segment --initial-lines GT --lock-initial-lines`, whole run, pieces off -> on, with EM's
    #: passes in blocks (docs/history.md, session 47): ahte book1_page19 4.4 -> 6.8 s, cremma20
    #: 12_dbc9b 8.4 -> 13.2 s and 0.67 -> 0.90 GB, moc_train_2 4.5 -> 5.4 s). 0 (either) = each
    #: given line one straight line. Not in the paper.
    given_piece: float = 2.0
    given_pieces: int = 10
    #: Stage 8 keeps an anchored line where EM left it (within the file's bounds above) and
    #: only measures its spread about it, as it does a locked line's; off = stage 8 refits it
    #: to the ink labelled to it, like EM's own lines, with no bound: ink the file does not
    #: annotate (a flourish round a will, a stamp) tilted or shifted it after EM and its
    #: neighbour's strokes followed (poilus AN_0023-0 run (c): "mon frere Emile" tilted 3.6
    #: deg and took the capitals of the row below, FM 0.45 -> 0.73 with it). And a component
    #: within half a text height of it stays on it when the local rows move the words that
    #: lie off their row (follow_local_rows; a short line's few words made no row of their
    #: own and went to the long line above: poilus AD78_0064-0 "Adais", FM 0.25 -> 0.50).
    #: Issue 24's run (c), ALL FM / line IU % and pages at or above (a): 62.6 / 85.7 and 71
    #: off, 65.9 / 89.5 and 71 with the place alone, 66.4 / 90.6 and 72 on
    #: (docs/history.md, 2026-11-28). Not in the paper.
    anchor_place: bool = True
    #: A run started from given lines (locked, or anchored: ``LineSet.locked``/``anchored``)
    #: has its regions follow them: a word whose samples mostly lie within given_regions x
    #: sigma_t across a given line (the nearest given line whose extent covers them) goes to
    #: that line's region for EM and stage 8 (engine.given_regions). Stage 5's regions come
    #: from the page alone, and a sample takes only its own region's lines: where they cut a
    #: row in two, the given line got half its row. 0 = off (the regions as prepared). A run
    #: without given lines is unchanged. Not in the paper (no given lines).
    given_regions: float = 2.0
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
    #: Merge collinear fragments whose ends are at most merge_gap x W_cc apart (also how far
    #: beyond a line's end non-text ink on its row is given to it, postprocess.label_non_text) ...
    merge_gap: float = 4.0
    #: ... and whose offset across the text is at most merge_offset x H_cc, or at most
    #: merge_offset_pitch x the region's median interline space (wavy lines, Arabic).
    merge_offset: float = 0.6
    merge_offset_pitch: float = 0.4
    merge_fragments: bool = True
    #: After EM, lines of different regions that run in the same direction (within 10 deg)
    #: merge when they lie at the same row phase (a quarter of the row pitch across) and at
    #: most row_merge x the row pitch apart along the row: a row's words that the region cut
    #: left in regions of their own (engine.row_merge); 0 = off. Not in the paper, which
    #: merges within a region.
    row_merge: float = 1.5
    #: With row_merge: on a page where no region shows a row period (a title page, a card, a
    #: few rows of large writing: 14 of the 79 dev pages), the merge across regions uses the
    #: merge within a region's test instead (merge_gap x W_cc along, merge_offset x H_cc across
    #: where the lines meet; without a pitch no region can be told a single row). poilus-dev
    #: AD78_0064-0: the title's "de Dr" joins "Testament" (9 -> 8 lines, FM 0.31 -> 0.33); the
    #: other 78 dev pages score the same. Seeds 1 / 2: poilus-dev FM 66.9 -> 67.9 / 66.6 ->
    #: 66.9 % (AN_0056-0, no row period at those draws), other sets the same (engine.row_merge,
    #: docs/history.md). Not in the paper.
    row_merge_pitchless: bool = True
    #: After EM, a row of whole-height components lying more than split_offset x H_cc across
    #: its line's row (interlinear insertions, crossed-out words rewritten above or below:
    #: lines of their own in CREMMA's ground truth) becomes a line of its own; 0 = never.
    #: Off by default: 1.0 on all 54 dev pages (bench/run_bench.py) raised cremma20 FM
    #: 67.0 -> 67.7 %, line IU 61.4 -> 62.1, pixel IU 72.3 -> 74.5 (kraken unchanged), but
    #: split rows of ascenders and marks off Arabic lines (H_cc is a letter's height there):
    #: ahte-train FM 62.6 -> 62.1, moc-train FM 17.3 -> 16.0 (result lines 677 -> 814).
    split_offset: float = 0.0
    #: With split_offset on, a row is split off only where it also lies more than split_space
    #: x the line's interline space on that side (the distance at the line's centre to the
    #: nearest line's row; no neighbour: split_offset alone): an insertion lies between two
    #: rows, a row's own marks and ascenders near it. 0 = H_cc alone. Off: with split_offset
    #: 0.7, split_space 0.3 gave ahte-train 70.5 / 98.4 % FM / line IU (0.7 alone 70.2 / 98.3,
    #: off 70.7 / 98.6), cremma20 72.6 / 71.4 (off 74.1 / 69.5), kraken-sample 92.0 / 85.1 (off
    #: 93.0 / 91.1; docs/history.md).
    split_space: float = 0.0
    #: Give the ink kept out of sampling back to the lines in the final labels: non-text
    #: pixels on a line's row (words written over a rule or touching a frame, stripped with
    #: it), the pale rims of the strokes, and specks within one H_cc of labelled ink (a
    #: stroke's broken pieces, small dots: the line of the nearest labelled ink;
    #: ahte-train 319 -> 326 matches, the other sets unchanged).
    label_non_text: bool = True
    #: The final lines' extent along the text is their own ink's: each line's ends (c +- 2
    #: sigma_s, as for a line a file or the user gives) are its first and last labelled
    #: samples along it (engine.postprocess.ink_extents), not the +- 2 sigma_s of the samples'
    #: spread, which for a row of even ink reaches 15 % past the row (2 / sqrt 3): a line was
    #: drawn and saved into the next block or the margin (moc-train moc_train_20: 16.6 % of
    #: its lines' ink extent, 572 px at worst). After the labelling: no pixel changes. Given
    #: lines (locked, anchored, joined from a file's pieces) keep theirs. Off: the M-step's
    #: spread (paper).
    extent_from_ink: bool = True
    #: Final labelling: "profile" (engine.postprocess.final_labels: cores of the lines' ink
    #: profiles) or "paper" (section 4.2: a component whose samples agree goes to that line,
    #: otherwise each pixel to the nearest of its samples' lines; components without a
    #: labelled sample to the nearest line of their region).
    final_labelling: str = "profile"
    #: With final_labelling "profile": a component that reaches the cores of several lines
    #: (strokes of two rows that touch) is split pixel by pixel to the likeliest of those lines
    #: under the page's ink profile ("never"), or to the nearest of them (across distance plus
    #: distance beyond the ends: a cut midway between them) where all of them are locked
    #: ("locked"), where all of them are given (locked, or anchored: a file's lines left free,
    #: which EM moves only within their rows) ("given"), or always ("always"). Between lines
    #: the user put at their rows' centres the profile's cut lies off the middle and takes the
    #: neighbour's ascenders and descenders: with the ground truth's lines locked
    #: (bench/steering.py (d)), never -> locked: poilus-dev FM 83.6 -> 86.4 %, cremma20 76.3 ->
    #: 77.7 %, moc-train 48.1 -> 48.7 %, ahte-train and kraken-sample unchanged (poilus
    #: AD78_0084-1 5 -> 9 of 15 lines). In the default run "always" against "never": poilus-dev
    #: FM 68.7 -> 69.1 % but line IU 81.4 -> 80.8 %, cremma20 74.1 -> 73.6 %; hence "locked"
    #: (the default run has no locked line and is unchanged). "given" over "locked", with the
    #: ground truth's lines left free (bench/steering.py (c)): all 79 dev pages 62.3 / 84.6 ->
    #: 62.6 / 84.8 %, pages at or above the default 68 -> 70 (cremma20 5_d12c2 0.20 -> 0.60,
    #: poilus AN_0001-0 0.92 -> 1.00); (a), (b), (d) unchanged. Not in the paper
    #: (engine.postprocess.final_labels).
    split_nearest: str = "given"
    # --- snapshots ----------------------------------------------------------------------
    #: A snapshot keeps each sample's posterior over its top-k lines.
    snapshot_top_k: int = 4
    #: The preset these values were loaded from (informative: recorded in the exports).
    preset_name: str = "default"
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
                     "mp_max_sweeps", "snapshot_top_k", "label_window", "theta_edge_sample", "oriented_blobs",
                     "given_pieces"):
            if int(getattr(self, name)) != getattr(self, name):
                raise ParameterError(f"{name} must be a whole number, got {getattr(self, name)!r}")
            object.__setattr__(self, name, int(getattr(self, name)))
        sweeps = self.max_em_iterations * self.mp_max_sweeps
        if sweeps > MAX_TOTAL_SWEEPS:
            raise ParameterError(
                f"max_em_iterations x mp_max_sweeps = {self.max_em_iterations} x {self.mp_max_sweeps} = "
                f"{sweeps} message-passing sweeps is more than a page can run (at most "
                f"{MAX_TOTAL_SWEEPS}; the paper preset runs 5000): lower one of them")
        if self.orientation_min > self.orientation_max:
            raise ParameterError(
                f"orientation_min ({self.orientation_min}) must not exceed "
                f"orientation_max ({self.orientation_max})")
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ParameterError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("page_area", "strip_strokes", "colour_non_text", "colour_stamps", "label_non_text",
                     "extent_from_ink",
                     "multi_oriented", "sample_by_position",
                     "steep_regions", "merge_fragments", "learn_line_prior", "merge_initial_lines",
                     "remove_diacritic_lines", "remove_ownerless_lines", "follow_local_rows", "prior_in_unary",
                     "overlap_valleys", "pitch_line_height", "raster_along_mean", "mp_warm_start",
                     "linked_neighbours",
                     "block_boundaries", "split_apart_blocks", "small_parts_frame", "mixed_parts_frame",
                     "cleanup_posterior_prior", "page_moments", "frame_lines", "row_merge_pitchless"):
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

    @classmethod
    def preset(cls, name: str) -> Parameters:
        """The named preset: "default" (this class's defaults) or "paper" (every stage as
        printed, see :data:`PAPER`)."""
        if name == "default":
            return cls()
        if name == "paper":
            return cls(**{k: entry.value for k, entry in PAPER.items()}, preset_name="paper")
        raise ParameterError(f"unknown preset {name!r}; expected one of {PRESETS}")

    def diff(self, other: Parameters) -> list[tuple[str, Any, Any]]:
        """``(name, self's value, other's value)`` of every field that differs (not ``preset_name``)."""
        a, b = self.to_dict(), other.to_dict()
        return [(k, a[k], b[k]) for k in a if k != "preset_name" and a[k] != b[k]]

    def preset_summary(self) -> str:
        """The preset's name and every field changed from it, e.g. ``paper + update_rule=bethe``."""
        changed = self.diff(Parameters.preset(self.preset_name))
        return " + ".join([self.preset_name] + [f"{name}={mine}" for name, mine, _ in changed])

    def describe(self) -> str:
        """Every parameter on its own line, for logs and ``--help``-like output."""
        return "\n".join(f"{k} = {v!r}" for k, v in self.to_dict().items())


def read_moments(path: str | Path) -> tuple[float, float, float]:
    """The pairwise moments ``(mu0, mu1, mu2)`` in a JSON file: the output of ``tlseg
    learn-moments`` (its ``--json`` file or what it prints), ``resources/moments.json``, or a
    bare list of three numbers. Checked as :class:`Parameters` checks ``moments``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ParameterError(f"cannot read moments file {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ParameterError(f"moments file {path} is not JSON: {exc}") from None
    values = data.get("moments") if isinstance(data, dict) else data
    try:
        return Parameters(moments=values).moments
    except ParameterError as exc:
        raise ParameterError(f"moments file {path}: {exc}") from None


#: Fields whose change needs a new preparation (stages 1-6); the others only re-run EM.
PREPARATION_FIELDS = frozenset({
    "sauvola_window", "sauvola_k", "speck_ratio", "min_speck_area", "page_area", "strip_strokes",
    "colour_non_text", "colour_stamps", "max_pitch_hcc", "sample_ratio", "seed", "sample_by_position",
    "region_threshold", "min_region_samples", "row_join", "filter_sigma_across", "filter_sigma_along",
    "filter_size_across", "filter_size_along",
    "orientation_min", "orientation_max", "orientation_step", "multi_oriented", "steep_regions", "t_o", "t_r",
    "t_r_typical", "raster_along_mean",
    "diacritic_height", "diacritic_fraction", "blob_threshold", "weak_line_level", "row_fill", "merge_initial_lines",
    "orientation_score", "remove_diacritic_lines", "overlap_valleys", "pitch_line_height",
    # EM's first step (merge_initial_lines) reads it.
    "linked_neighbours", "block_boundaries", "split_apart_blocks", "small_parts_frame", "mixed_parts_frame",
    "cleanup_posterior_prior", "oriented_blobs",
    "steep_evidence", "steep_period", "frame_lines",
})


class PaperValue(NamedTuple):
    """A field's value in the paper as printed: the value, where the paper says it (section,
    equation or algorithm; "absent" for a step the paper does not have), and why the default
    differs (measured, or what follows from the method)."""

    value: Any
    source: str
    why: str


#: The paper as printed: field -> PaperValue. Every field whose default differs from the paper
#: is here (tests/test_paper.py holds the hand-written table of every field that checks it).
#: Walking from ``paper`` to the default one field at a time is the ablation of docs/paper.md.
PAPER: dict[str, PaperValue] = {
    "page_area": PaperValue(False, "absent (no page-area step)",
                            "a dark scanner surround made thousands of specks that set H_cc."),
    "strip_strokes": PaperValue(False, "absent (no rule or frame removal)",
                                "words touching a rule or frame were dropped with it."),
    "colour_non_text": PaperValue(False, "absent (no colour step)", "off by default too."),
    "colour_stamps": PaperValue(False, "absent (no colour step)", "off by default too."),
    "max_pitch_hcc": PaperValue(0.0, "§4.1: H_cc, the mean connected component height (no check)",
                                "perforation dots and specks that outnumber a card's words set H_cc to "
                                "13 px for rows 209 px apart (poilus AN_0121-2): a word a line."),
    "extent_from_ink": PaperValue(False, "eq. update1 (sigma_s, the samples' spread along the line)",
                                  "a line's c +- 2 sigma_s reaches 15 % past an evenly written "
                                  "row: lines were drawn and saved into the next block."),
    "label_non_text": PaperValue(False, "absent (§4.2 labels the sampled components only)",
                                 "words over a rule and specks, kept out of sampling, are given back "
                                 "to their line."),
    "row_join": PaperValue(0.0, "§4.1: regions cut where triangles grow long (Xiao & Yan)",
                           "the cut at a fixed multiple of H_cc made each word of widely spaced large "
                           "cursive a region of its own, with a line of its own."),
    "min_region_samples": PaperValue(1, "§4.1 text regions (no merging of small regions)",
                                     "a region of a few samples is too small to fit a line to; it joins "
                                     "the nearest larger one."),
    "steep_regions": PaperValue(False, "§5.1: alpha in [-40, 40] deg",
                                "moc-train side notes run at 60-70 deg."),
    "orientation_score": PaperValue("sharpness", "§4.1 blob estimation: \"better response on the "
                                                 "projection profile\"",
                                    "sum P^2 / (sum P)^2 also rewards the angle at which a block is "
                                    "narrowest (moc_train_11: lines at -25 deg got -40 deg)."),
    "filter_size_across": PaperValue(1.0 / 3.0, "§5.1: filter size H = 1/3 H_cc",
                                     "a kernel as tall as its sigma is nearly a box across the line: 16 % "
                                     "more initial lines, FM -5.3 points on 17 dev pages (OpenCV's "
                                     "+-4 sigma kernel is the Gaussian the sigma describes)."),
    "filter_size_along": PaperValue(10.0, "§5.1: filter size W = 10 W_cc",
                                    "as filter_size_across: the kernel cut at +-1.5 sigma along."),
    "overlap_valleys": PaperValue(False, "§4.1 overlapping detection: blobs divided by t_o",
                                  "equal bands cut lines where two touch off-centre; the profile's "
                                  "valleys find the gap."),
    "t_r_typical": PaperValue(0.0, "§5.1: t_r = 0.08, one ratio for every page",
                              "a thin pen's rows sit at t_r itself (cremma 01R_P1S7P178_007: "
                              "0.071-0.103) and fell under it by turns."),
    "raster_along_mean": PaperValue(False, "§4.1: the filter bank on the image (its reduction not said)",
                                    "a cell read at its centre saw one column in ten or more of the "
                                    "region: 12 or 8 lines on one letter as the cells moved."),
    "pitch_line_height": PaperValue(False, "§5.1: filter and t_o in units of H_cc",
                                    "on Arabic hands H_cc is a letter group's height, far below the "
                                    "line's."),
    "row_fill": PaperValue(0.0, "absent (§4.1: a line per blob)",
                           "a short row the filter bank lost (a signature, a card's lone row) lent "
                           "its ink to the nearest line, which left its own row."),
    "file_row_fill": PaperValue(0.0, "absent (initial lines are the blobs' only)",
                                "lines read from another tool's file that leave out rows beyond "
                                "them: the nearest given line left its row for their ink."),
    "weak_line_level": PaperValue(0.0, "§4.1: Otsu on the filtered image",
                                  "a paragraph's last words respond under Otsu's level and got no "
                                  "initial line; the line above was fitted through both rows."),
    "remove_diacritic_lines": PaperValue(False, "absent (§4.1 has t_r, §4.2 epsilon)",
                                         "blobs and lines living on dots and diacritics made extra "
                                         "lines."),
    "remove_ownerless_lines": PaperValue(False, "absent (§4.2: epsilon only)",
                                         "EM lines through a cloud's loops or a taller row's tops own "
                                         "no word and split their row."),
    "follow_local_rows": PaperValue(False, "absent (§4.2 final labelling)",
                                    "a straight line leaves the sagging end of a row to the next row."),
    "merge_initial_lines": PaperValue(False, "absent (§4.1: EM starts from the blob lines)",
                                      "duplicates of one row drifted apart in EM and split it."),
    "unary_form": PaperValue("paper", "eq. ff2",
                             "as printed, eq. ff2 jumps by 0.5 (r S / sigma_t)^2 nats at the plateau's "
                             "edge."),
    "prior_in_unary": PaperValue(False, "eq. ff3 (pi_l enters through theta_l only)",
                                 "the default weighs each line by pi_l in the unary, as in a mixture."),
    "page_moments": PaperValue(False, "after eq. ff1: moments learnt from a training set",
                               "the moments of a training set pulled each row of small tight writing "
                               "onto its neighbours' lines (a third of the edges join rows there)."),
    "moments": PaperValue((0.85, 0.13, 0.02),
                          "after eq. ff1 and §5.1: learnt from ICDAR 2013's training set; the values "
                          "are NOT printed (these are a placeholder quoted elsewhere, of unknown origin; "
                          "'tlseg learn-moments' runs the paper's procedure on your ground truth, "
                          "'--moments FILE' uses its result)",
                          "measured on the dev ground truth (resources/moments.json): the placeholder "
                          "does not fit real pages."),
    "update_rule": PaperValue("convex", "Algorithm 2 (p_v exponent 1/(c_v + A_v))",
                              "the printed convex rule tempers the unary by 1 + A_v and EM merges lines "
                              "(the collapse recorded in tests/test_paper.py)."),
    "mp_max_sweeps": PaperValue(100, "Algorithm 2: \"while not converged\" (no cap given)",
                                "10 warm-started sweeps per EM iteration bound the cost."),
    "mp_warm_start": PaperValue(False, "Algorithm 2: \"Initialize: theta_k = 0, m_{v->u} = 1\" at "
                                       "each call",
                                "theta and the messages of the last E-step are a better start: cold, "
                                "FM -0.9 and line IU -1.9 points, 28 % more CPU on 17 dev pages."),
    "line_prior_rule": PaperValue("armijo", "Algorithm 2, theta update with Armijo step (on ff3)",
                                  "the Armijo step on theta_l is slow to match pi_l; the log-ratio step "
                                  "converges in a few sweeps."),
    "line_prior_clip": PaperValue(0.0, "Algorithm 2 (no bound on theta)",
                                  "bounds theta_l so that a line with no mass cannot push it to "
                                  "infinity."),
    "prior_scope": PaperValue("page", "eq. pline: pi_l = (1/N) sum_v p_v",
                              "per region, a one-word region keeps its line under epsilon."),
    "theta_limit": PaperValue(0.0, "Algorithm 2 (no bound on theta)",
                              "moments the unary cannot reach send theta to infinity."),
    "theta_edge_sample": PaperValue(0, "Algorithm 2: sum over all u",
                                    "a fixed sample of 40k edges gives the moments to a fraction of a "
                                    "percent at a third of the cost."),
    "steep_evidence": PaperValue(0.0, "absent (§5.1: alpha in [-40, 40] deg, no steep angle to test)",
                                 "one row of large slanted cursive with H_cc a third of its letters' "
                                 "height scored best across its downstrokes (-50 to -90 deg)."),
    "oriented_blobs": PaperValue(0, "§4.1: the bank's orientation whose projection profile is sharpest, "
                                    "one per region",
                                 "rows that fan out within a block, and blocks at close angles in one "
                                 "region, got lines at the frame's angle, between or across their rows."),
    "block_boundaries": PaperValue(False, "absent (§4.1: regions only)",
                                   "a side note's corner stayed with the main text, whose line bent "
                                   "across the boundary to reach it."),
    "split_apart_blocks": PaperValue(False, "absent (§4.1: regions only)",
                                     "two blocks of notes at one angle with the main text between them "
                                     "were one block, and its lines crossed the main text's rows."),
    "small_parts_frame": PaperValue(False, "absent (§4.1: regions only)",
                                    "side notes of a few hundred samples at 25-43 deg from the main text "
                                    "were folded into it, their lines fitted at its angle."),
    "cleanup_posterior_prior": PaperValue(False, "absent (§4.1: EM starts from the blob lines)",
                                          "a margin note's line, its blob's share under epsilon, was dropped "
                                          "and its samples refitted a row 1800 px along into a line across the page."),
    "mixed_parts_frame": PaperValue(False, "absent (§4.1: regions only)",
                                    "a narrow note's part also held the main text's row ends, and its "
                                    "contrast at the main text's angle folded it back into the main text."),
    "linked_neighbours": PaperValue(False, "§4.1 unary: S_l the interline space to the lines above and "
                                           "below (Koo & Cho)",
                                    "a line's interline space counted a line of another block beyond a "
                                    "blank gap, and its plateau swallowed the rows beside it."),
    "regression": PaperValue("paper", "eq. update1",
                             "eq. update1 fits y on x; pages and regions at an angle need the principal "
                             "axis."),
    "sigma_t_floor": PaperValue(0.01, "eq. update1 (no floor; 0.01 is the smallest allowed)",
                                "variance floors keep a line fitted to one word from collapsing."),
    "sigma_s_floor": PaperValue(0.01, "eq. update1 (no floor; 0.01 is the smallest allowed)",
                                "as sigma_t_floor."),
    "row_merge": PaperValue(0.0, "§4.2 merges fragments within a region only",
                            "a row's words in regions of their own kept a line each."),
    "row_merge_pitchless": PaperValue(False, "§4.2 merges fragments within a region only",
                                      "on a page without a row period a title's words in regions "
                                      "of their own kept a line each."),
    "sigma_t_pitch": PaperValue(0.0, "eq. update1 (no cap on sigma_t)",
                                "off in the default too: no cap separates a correct line's band from a "
                                "dense row's on the dev pages."),
    "m_step_trim": PaperValue(0.0, "eq. update1 (every sample, weighted by its posterior)",
                              "ink no line holds (clouds, stamps, a margin's note) pulled the "
                              "nearest line off its row; lines given from a file most."),
    "anchor_reach": PaperValue(0.0, "absent (EM starts from the blobs' lines only)",
                               "lines given from a file and left free left their rows for ink "
                               "the file does not annotate."),
    "anchor_sigma_t": PaperValue(0.0, "absent (EM starts from the blobs' lines only)",
                                 "a given line's band widened over ink the file does not "
                                 "annotate until the line left its row."),
    "anchor_gap": PaperValue(0.0, "absent (EM starts from the blobs' lines only)",
                             "given lines closer than H_cc suggests (insertions, drafts with a "
                             "large H_cc) shared their rows."),
    "anchor_extent": PaperValue(False, "absent (EM starts from the blobs' lines only)",
                                "a short given line grew along the text over the row beside it."),
    "given_piece": PaperValue(0.0, "absent (EM starts from the blobs' lines only)",
                              "a curved line given by a file was one straight line, and its "
                              "row's ends went to the lines beside it."),
    "given_pieces": PaperValue(0, "absent (EM starts from the blobs' lines only)",
                               "a curved line given by a file was one straight line, and its "
                               "row's ends went to the lines beside it."),
    "anchor_keep": PaperValue(False, "absent (EM starts from the blobs' lines only)",
                              "stage 8 removed or merged lines the file gave (insertions, rows "
                              "EM left with little ink)."),
    "anchor_place": PaperValue(False, "absent (EM starts from the blobs' lines only)",
                               "stage 8's refit moved a given line off the place EM kept it in, "
                               "towards ink the file does not annotate."),
    "given_regions": PaperValue(0.0, "absent (EM starts from the blobs' lines only)",
                                "a given line got only the samples of its row within the region holding "
                                "its midpoint; the rest of its row, in another region, went to other lines."),
    "candidate_nats": PaperValue(1e4, "Algorithm 2 (every line; 1e4 nats: no floor in practice)",
                                 "lines 30 nats below a sample's best carry no information; the floor "
                                 "keeps messages finite."),
    "label_window": PaperValue(0, "Algorithm 2: sum over every label h_v",
                               "each sample sees 5 consecutive lines around its best: a sweep costs "
                               "O(E W), not O(E L); 5 scored as well as 9 at 20 % less CPU."),
    "max_em_iterations": PaperValue(50, "§5.1: maximum number of iterations 50",
                                    "pages still moving after 15 iterations oscillate; 50 cost 3x the "
                                    "time for the same FM."),
    "kl_tolerance": PaperValue(1e-4, "§5.1: KLD criterion K = 1e-4",
                               "the KL wanders at 1e-4..1e-3 while theta settles; 1e-3 stopped earlier "
                               "with more matches."),
    "label_tolerance": PaperValue(0.0, "§5.1 (the KL criterion only)",
                                  "EM also stops when almost no sample changes its line."),
    "split_nearest": PaperValue("never", "absent (the profile labelling is not the paper's; §4.2 has no "
                                         "locked lines)",
                                "touching strokes of two rows that the user's locked lines hold are cut "
                                "midway between them."),
    "final_labelling": PaperValue("paper", "§4.2 final labeling",
                                  "the paper's rule lost 2-9 % of every AHTE line (strokes crossing the "
                                  "gap)."),
}
