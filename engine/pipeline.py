"""The steppable API: prepare (stages 1-6) -> run_em (stage 7, a generator) -> finish (stage 8).

    prep = prepare("page.jpg", Parameters())
    for snap in run_em(prep):            # one Snapshot per EM iteration
        ...
    seg = finish(prep, snap)             # labels (H, W) int32 and the final lines

``run_em(prep, lines=edited)`` starts from a caller's lines instead of ``prep.initial_lines``;
``lines_from_segments(prep, segments)`` turns page-coordinate segments into such lines. Lines
given locked or anchored lead the regions: run EM and stage 8 on ``for_lines(prep, lines)``
(:mod:`engine.given_regions`; the same preparation when no line is given).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from . import blocks as _blocks
from . import components as _components
from . import edits as _edits
from . import em as _em
from . import given_regions as _given
from . import graph as _graph
from . import initial_lines as _initial
from . import ink as _ink
from . import io as _io
from . import pitch as _pitch
from . import postprocess as _post
from . import regions as _regions
from . import row_fill as _row_fill
from . import sampling as _sampling
from . import threads as _threads
from .model import LineSet, Page, Preparation, Segmentation, Snapshot
from .params import Parameters


class EmptyPageError(ValueError):
    """Raised by nothing: an empty page is a valid page with zero lines (kept for callers)."""


def prepare(page: Page | np.ndarray | str | Path, params: Parameters | None = None,
            progress: Callable[[str], None] | None = None) -> Preparation:
    """Stages 1-6 on a page (a path, a loaded :class:`Page`, or a uint8/bool array).

    ``progress(stage)`` is called before each stage; it may raise (a caller's cancellation),
    and the exception propagates: the preparation is abandoned, nothing is left behind."""
    params = params or Parameters()
    say = progress or (lambda _msg: None)
    timings: dict[str, float] = {}
    t = time.perf_counter()

    def tick(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        timings[name] = now - t
        t = now

    if isinstance(page, (str, Path)):
        say("load")
        page = _io.load_page(page)
    elif isinstance(page, np.ndarray):
        page = _io.page_from_array(page)
    tick("load")
    say("ink")
    found = _ink.find_ink(page, params)
    ink, components, cc_stats = found.ink, found.labels, found.stats
    tick("ink")
    say("components")
    boxes = _components.boxes_from_stats(cc_stats)
    stats = _components.component_stats(components, boxes)
    heights = _components.component_heights(components, boxes)
    tick("components")
    say("sample")
    samples, sample_component = _sampling.sample_ink_pixels(components, params.sample_ratio,
                                                            params.seed, ink, params.sample_by_position)
    tick("sample")
    if params.max_pitch_hcc > 0:
        # H_cc against the page's rows (the samples do not depend on H_cc).
        stats, _ = _components.row_checked_stats(stats, components, boxes, samples, params.max_pitch_hcc)
        tick("row_checked_hcc")
    # Stage 8 gives each speck the line of its nearest ink: which ink that is depends on
    # nothing EM does, so a second core finds it while stages 3-6 run.
    owners = None
    if params.label_non_text and found.specks is not None:
        owners = _threads.worker("prepare").submit(_post.speck_owners, ink,
                                                   _post.specks_to_label(found.specks, found.faint),
                                                   _post.SPECK_REACH * stats.h_cc)
    say("graph")
    triangles, delaunay = _graph.delaunay_edges(samples)
    tick("graph")
    say("regions")
    # Not on bilevel pages: on AHTE's binarised Arabic, alifs and letter groups formed dozens
    # of small blocks across the lines (with blocks of 3 x min_region_samples: ahte-train
    # 319 -> 291 matches, moc-train 211 -> 179; docs/scan-frontend.md).
    # Only the orientation split reads them (steep_regions or multi_oriented).
    axes = (_regions.component_axes(samples, sample_component)
            if len(samples) and not page.bilevel and (params.steep_regions or params.multi_oriented)
            else None)
    block_angles: dict[int, float] = {}
    mixed_parts: dict[int, int] = {}
    split_parts: dict[int, int] = {}
    sample_region, edges = _regions.find_regions(samples, triangles, stats, params, axes, block_angles,
                                                 mixed_parts, split_parts)
    tick("regions")
    say("initial lines")
    sample_heights = heights[sample_component]  # (N,) pixels: stage 6's small marks, the fill's letters
    small = sample_heights < params.diacritic_height * stats.h_cc
    n_regions = int(sample_region.max()) + 1 if len(samples) else 0
    block_boundaries = params.block_boundaries and n_regions > 1
    phis = known = None
    if block_boundaries:
        # Touching blocks whose frames came out at one angle are one block. The frames are
        # searched first and the lines fitted once, in the joined blocks (fitting the parts,
        # then the joined block again, doubled this stage's time on the pages it joins).
        frames, inks = _initial.region_frames(components, samples, sample_component, sample_region, stats,
                                              params, block_angles, axes)
        kept = _blocks.kept_edges(samples, triangles, stats, params)
        joined = _blocks.merge_parallel_blocks(sample_region, kept, frames, _regions.SPLIT_ANGLE,
                                               _regions.BLOCK_SAMPLES * params.min_region_samples,
                                               _regions._FAR_ANGLE, samples, stats.h_cc,
                                               params.orientation_range, mixed_parts, params.small_parts_frame,
                                               split_parts)
        old_of_new, changed = np.arange(n_regions), []
        if joined is not None:
            sample_region, old_of_new, changed = _blocks.renumber_blocks(sample_region, joined)
        # A joined block keeps the frame of the part that held most of its samples; the blocks
        # no join changed keep their frame, box and ink raster.
        phis = {k: frames[int(old_of_new[k])].phi for k in changed}
        known = {k: (dataclasses.replace(frames[int(old)], index=k), inks[int(old)])
                 for k, old in enumerate(old_of_new) if k not in changed}
    lines, regions = _initial.initial_lines(components, samples, sample_component, sample_region,
                                            stats, params, small, phis=phis, block_angles=block_angles,
                                            sample_axis=axes, known=known)
    if block_boundaries:
        def fit(region: np.ndarray, only: np.ndarray, phis: dict[int, float]) -> Any:
            return _initial.initial_lines(components, samples, sample_component, region, stats, params,
                                          small, only, phis)

        # Words at the junction of two blocks go to the block whose lines run through them.
        refined = _blocks.refine_boundaries(samples, sample_component, sample_region, kept, small,
                                            lines, regions, stats, params)
        if refined is not None:
            sample_region, lines, regions = _blocks.refit_blocks(sample_region, refined, lines, regions, fit)
        if params.split_apart_blocks:
            # A block whose parts no longer touch after those joins and moves is two blocks:
            # its lines would run from one through another block's rows to the other. The
            # region graph's edges (row joins across word gaps included) hold a row together.
            apart = _blocks.split_apart_blocks(sample_region, edges, samples, _regions.region_threshold(stats, params),
                                               _blocks.APART_SAMPLES * params.min_region_samples)
            if apart is not None:
                sample_region, lines, regions = _blocks.refit_blocks(sample_region, apart, lines, regions, fit)
        edges = kept[sample_region[kept[:, 0]] == sample_region[kept[:, 1]]]
    tick("initial_lines")
    row_pitch = _pitch.region_pitches(samples, sample_region, np.array([r.phi for r in regions]), stats.h_cc)
    tick("row_pitch")
    filled = None
    if params.row_fill > 0 and len(lines):
        # Rows of a region's period that no initial line reaches get one (engine.row_fill).
        lines, filled = _row_fill.fill_rows(samples, sample_region, lines, regions, row_pitch, params.row_fill,
                                            stats, params, sample_heights)
        tick("row_fill")
    prep = Preparation(params=params, gray=page.gray, ink=ink, components=components,
                       stats=stats, samples=samples, sample_component=sample_component,
                       delaunay_edges=delaunay, edges=edges, sample_region=sample_region,
                       regions=regions, initial_lines=lines, timings=timings, source=page.path,
                       component_heights=heights, component_boxes=boxes, page_area=found.page_area,
                       non_text=found.non_text, faint=found.faint,
                       specks=found.specks, speck_owners=None if owners is None else owners.result(),
                       row_pitch=row_pitch, filled_rows=None if filled is None else filled.segments())
    if params.merge_initial_lines and len(lines):
        say("merge initial lines")
        prep = dataclasses.replace(prep, initial_lines=merge_initial_lines(prep))
        tick("merge_initial_lines")
    return prep


def preparation_summary(prep: Preparation) -> dict[str, Any]:
    """What stage 1-2 found on the page, for the JSON output and the window: the text scale
    (``h_cc``, ``w_cc``, pixels), the page area (its share of the image and its outlines, (x, y)
    pixel polygons), the pixels kept out of the ink as not text, as faint and as specks, and
    the blocks (regions: outline, angle, row pitch; :func:`engine.blocks.block_summary`)."""
    h, w = prep.shape
    out: dict[str, Any] = {"h_cc": float(prep.stats.h_cc), "w_cc": float(prep.stats.w_cc),
                           "ink_pixels": int(np.count_nonzero(prep.ink))}
    area = prep.page_area
    if area is not None and area.shape == (h, w):
        out["page_area"] = {"fraction": round(float(np.count_nonzero(area)) / (h * w), 4),
                            "outlines": [np.round(p, 1).tolist() for p in _ink.area_outlines(area)]}
    if prep.non_text is not None and prep.non_text.shape == (h, w):
        out["non_text_pixels"] = int(np.count_nonzero(prep.non_text))
    if prep.faint is not None and prep.faint.shape == (h, w):
        out["faint_pixels"] = int(np.count_nonzero(prep.faint))
    if prep.specks is not None and prep.specks.shape == (h, w):
        out["speck_pixels"] = int(np.count_nonzero(prep.specks))
    if getattr(prep, "regions", None) is not None and getattr(prep, "samples", None) is not None:
        out["blocks"] = _blocks.block_summary(prep)
    if getattr(prep, "row_pitch", ()):
        # Each region's row pitch (pixels and H_cc, its angle and where it came from), and
        # the page's: the median over the regions' own estimates (sample-weighted).
        out["row_pitch"] = [p.to_dict(prep.stats.h_cc) for p in prep.row_pitch]
        out["row_pitch_px"] = _pitch.page_pitch(prep)
    if getattr(prep, "filled_rows", None) is not None:
        # The lines stage 6 added for rows no blob reached (engine.row_fill), as segments.
        out["filled_rows"] = np.round(prep.filled_rows, 1).tolist()
    return out


def merge_initial_lines(prep: Preparation) -> LineSet:
    """``prep.initial_lines`` after stage 8's clean-up on the posterior of the unary alone
    (EM's iteration 0): one line per text row to start EM from. With
    ``cleanup_posterior_prior`` the surplus test reads each line's prior from that posterior
    (pi_l = mean_v p_v(l), as the M-step sets it), not from its blob's share of the ink."""
    em = _em.run_em(prep, prep.initial_lines, prep.params)
    try:
        first = next(em)
    finally:
        em.close()
    if prep.params.cleanup_posterior_prior:
        # The blob's share of its region's ink is no prior for a line the page's ink chooses
        # (moc_train_5: a line on a margin note's piece, 7 samples in its blob, 147 choosing
        # it, prior 0.0003 < epsilon): dropped, its samples went to the line of a row 1800 px
        # along, whose refit then ran across the page.
        first = _post.with_posterior_priors(prep, first, prep.params)
    lines, _ = _post.consolidate_lines(prep, first, prep.params)
    return lines


def run_em(prep: Preparation, lines: LineSet | None = None, *, params: Parameters | None = None,
           per_sweep: bool = False) -> Iterator[Snapshot]:
    """Stage 7 as a generator of immutable snapshots, one per EM iteration (and one per
    message-passing sweep when ``per_sweep``). ``params`` overrides the EM settings of
    ``prep.params`` (stages 1-6 stay as prepared). Close the generator to stop early."""
    # Edited lines may be in any order (a new line is appended): EM needs them by region,
    # then across the text; the prepared lines already are, and are passed on untouched.
    start = prep.initial_lines if lines is None else _edits.ordered(prep, lines)
    return _em.run_em(prep, start, params or prep.params, per_sweep=per_sweep)


def for_lines(prep: Preparation, lines: LineSet | None, params: Parameters | None = None) -> Preparation:
    """The preparation EM and stage 8 run on when starting from ``lines``: its regions follow
    the given (locked or anchored) lines (``Parameters.given_regions``,
    :func:`engine.given_regions.follow_given_lines`); ``prep`` itself when none is given."""
    if lines is None:
        return prep
    return _given.follow_given_lines(prep, lines, params or prep.params)


def finish(prep: Preparation, snapshot: Snapshot, params: Parameters | None = None) -> Segmentation:
    """Stage 8: surplus-line removal, fragment merging, final labelling of every ink pixel."""
    return _post.finish(prep, snapshot, params or prep.params)


def lines_from_segments(prep: Preparation, segments: np.ndarray,
                        sigma_t: np.ndarray | None = None) -> LineSet:
    """Lines from page-coordinate segments ``(L, 2, 2)`` (e.g. a user's edits): each joins
    the region holding most samples near it; ``sigma_t`` defaults to ``H_cc / 2``."""
    return _initial.lines_from_segments(prep, np.asarray(segments, dtype=np.float64), sigma_t)


def segment(page: Page | np.ndarray | str | Path, params: Parameters | None = None,
            progress: Callable[[str], None] | None = None,
            initial_lines: LineSet | Callable[[Preparation], LineSet] | None = None
            ) -> tuple[Preparation, Snapshot, Segmentation]:
    """The whole method on one page: returns the preparation, the last snapshot and the
    result (whose ``initial_lines`` are the lines EM started from). ``initial_lines``: the
    lines to start from instead of the prepared ones, or a function of the preparation
    giving them (e.g. reading a file: :func:`engine.initial_io.read_initial_lines`). The
    preparation returned is the one EM and stage 8 ran on (:func:`for_lines`)."""
    prep = prepare(page, params, progress)
    say = progress or (lambda _msg: None)
    if callable(initial_lines):
        say("initial lines")
        initial_lines = initial_lines(prep)
    start = prep.initial_lines if initial_lines is None else _edits.ordered(prep, initial_lines)
    prep = for_lines(prep, start)
    snap = None
    for snap in run_em(prep, start):
        say(f"EM iteration {snap.iteration}")
    assert snap is not None  # run_em always yields at least one snapshot
    say("labelling")
    return prep, snap, dataclasses.replace(finish(prep, snap), initial_lines=start)
