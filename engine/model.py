"""The data the pipeline hands from stage to stage: frozen dataclasses of NumPy arrays.

Coordinates: ``x`` is the column and ``y`` the row of the page, in pixels, y pointing down.
Every text region has its own frame, rotated by the region's text angle ``phi`` so that its
text runs along ``u``:  ``u = x cos(phi) + y sin(phi)``, ``v = -x sin(phi) + y cos(phi)``.
Lines are stored in their region's frame, where they are near-horizontal: ``v = a u + b``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .params import Parameters


def to_region_frame(xy: np.ndarray, phi: np.ndarray | float) -> np.ndarray:
    """Page coordinates ``(n, 2)`` [x, y] -> region frame ``(n, 2)`` [u, v]; phi in radians."""
    c, s = np.cos(phi), np.sin(phi)
    x, y = xy[..., 0], xy[..., 1]
    return np.stack([x * c + y * s, -x * s + y * c], axis=-1)


def from_region_frame(uv: np.ndarray, phi: np.ndarray | float) -> np.ndarray:
    """Region frame ``(n, 2)`` [u, v] -> page coordinates ``(n, 2)`` [x, y]; phi in radians."""
    c, s = np.cos(phi), np.sin(phi)
    u, v = uv[..., 0], uv[..., 1]
    return np.stack([u * c - v * s, u * s + v * c], axis=-1)


@dataclass(frozen=True)
class ComponentStats:
    """Size of the page's text: ``h_cc``/``w_cc`` in pixels (area-weighted medians)."""

    h_cc: float
    w_cc: float
    n_components: int


#: The per-line arrays of a :class:`LineSet`, in its constructor's order (``rotation_invariant``
#: sits between ``phi`` and ``locked``).
LINE_FIELDS = ("a", "b", "c", "sigma_t", "sigma_s", "prior", "region", "phi", "locked", "anchored", "chain",
               "sigma_t_measured")
#: Its boolean fields (None in the constructor: all False).
LINE_FLAGS = ("locked", "anchored", "sigma_t_measured")


@dataclass(frozen=True)
class LineSet:
    """L regression lines, each in its region's frame. All arrays have shape ``(L,)``.

    ``a, b``: the line ``v = a u + b``; ``c``: centre of the segment along the text;
    ``sigma_t``: spread across the line, ``sigma_s``: spread along it (pixels);
    ``prior``: line probability within its region; ``region``: region index;
    ``phi``: the region frame's angle (radians); ``rotation_invariant``: whether the
    along-text coordinate is the projection on the line (True) or ``u`` (paper form);
    ``locked``: bool, a line the user fixed (EM never moves it, stage 8 never removes or
    merges it; None = no line locked); ``anchored``: bool, a line another tool's file gave
    and left free: EM refines it within its row (``Parameters.anchor_reach``; None = none);
    ``chain``: int, the text line a given line is a piece of (lines with the same ``chain`` >= 0
    are straight pieces of one curved line a file gave, :func:`engine.initial_io.read_initial_lines`;
    stage 8 joins their labels into one line); -1: a line of its own (None = all -1);
    ``sigma_t_measured``: bool, the line's ``sigma_t`` was measured on its own ink where it
    lies (a file's label or polygon, :mod:`engine.initial_io`), not guessed (a line drawn in
    the window: its neighbours'; a baseline without a polygon: ``H_cc / 2``); stage 8 labels a
    locked line with a measured spread as given (None = none measured).
    """

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    sigma_t: np.ndarray
    sigma_s: np.ndarray
    prior: np.ndarray
    region: np.ndarray
    phi: np.ndarray
    rotation_invariant: bool = True
    locked: np.ndarray | None = None
    anchored: np.ndarray | None = None
    chain: np.ndarray | None = None
    sigma_t_measured: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.a)
        for flag in LINE_FLAGS:
            if getattr(self, flag) is None:
                object.__setattr__(self, flag, np.zeros(n, bool))
        if self.chain is None:
            object.__setattr__(self, "chain", np.full(n, -1, np.int32))
        for name in LINE_FIELDS:
            arr = np.asarray(getattr(self, name))
            if arr.shape != (n,):
                raise ValueError(f"LineSet.{name} has shape {arr.shape}, expected ({n},)")
            kind = np.int32 if name in ("region", "chain") else bool if name in LINE_FLAGS else np.float64
            arr = arr.astype(kind, copy=True)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def __len__(self) -> int:
        return len(self.a)

    @classmethod
    def empty(cls, rotation_invariant: bool = True) -> LineSet:
        z = np.zeros(0)
        return cls(z, z, z, z, z, z, np.zeros(0, np.int32), z, rotation_invariant)

    def take(self, index: np.ndarray) -> LineSet:
        """The lines at ``index`` (indices or a boolean mask), in that order."""
        return LineSet(self.a[index], self.b[index], self.c[index], self.sigma_t[index],
                       self.sigma_s[index], self.prior[index], self.region[index],
                       self.phi[index], self.rotation_invariant, self.locked[index], self.anchored[index],
                       self.chain[index], self.sigma_t_measured[index])

    def with_rotation_invariant(self, rotation_invariant: bool) -> LineSet:
        """The same lines read with the other along-text coordinate (all fields kept)."""
        if rotation_invariant == self.rotation_invariant:
            return self
        return LineSet(self.a, self.b, self.c, self.sigma_t, self.sigma_s, self.prior, self.region,
                       self.phi, rotation_invariant, self.locked, self.anchored, self.chain,
                       self.sigma_t_measured)

    def along(self, uv: np.ndarray) -> np.ndarray:
        """Along-text coordinate of region-frame points ``(n, 2)`` for every line: ``(n, L)``."""
        u, v = uv[:, :1], uv[:, 1:]
        if self.rotation_invariant:
            return (u + self.a * v) / np.sqrt(1.0 + self.a**2)
        return np.broadcast_to(u, (uv.shape[0], len(self))).copy()

    def text_line_count(self) -> int:
        """How many text lines the rows are: the pieces of one ``chain`` count once, a row of
        no chain (-1) once each."""
        given = self.chain >= 0
        return len(np.unique(self.chain[given])) + int((~given).sum())

    def segments(self, half_length: float = 2.0) -> np.ndarray:
        """Page-coordinate end points ``(L, 2, 2)`` of each line over ``c +- half_length*sigma_s``."""
        s = self.c[:, None] + np.array([-1.0, 1.0]) * half_length * self.sigma_s[:, None]
        if self.rotation_invariant:
            norm = np.sqrt(1.0 + self.a**2)[:, None]
            # Point of the line v = a u + b whose projection on the unit direction is s.
            u = (s * norm - self.a[:, None] * self.b[:, None]) / norm**2
        else:
            u = s
        v = self.a[:, None] * u + self.b[:, None]
        uv = np.stack([u, v], axis=-1)
        return from_region_frame(uv, self.phi[:, None])

    def band(self, half_length: float = 2.0, n: int = 2) -> np.ndarray:
        """Polygon ``(L, 2n+2, 2)`` in page coordinates: the line +- sigma_t over its extent."""
        seg = self.segments(half_length)
        t = np.linspace(0.0, 1.0, n + 1)[None, :, None]
        centre = seg[:, :1] + (seg[:, 1:] - seg[:, :1]) * t  # (L, n+1, 2)
        norm = np.sqrt(1.0 + self.a**2)
        # Unit normal to the line in the region frame, mapped to the page.
        normal_uv = np.stack([-self.a / norm, 1.0 / norm], axis=-1)
        normal = from_region_frame(normal_uv, self.phi)[:, None, :] * self.sigma_t[:, None, None]
        return np.concatenate([centre - normal, (centre + normal)[:, ::-1]], axis=1)

    def to_dict(self) -> dict:
        return {
            "rotation_invariant": self.rotation_invariant,
            "lines": [
                {"a": float(self.a[i]), "b": float(self.b[i]), "c": float(self.c[i]),
                 "sigma_t": float(self.sigma_t[i]), "sigma_s": float(self.sigma_s[i]),
                 "prior": float(self.prior[i]), "region": int(self.region[i]),
                 "phi": float(self.phi[i]), "locked": bool(self.locked[i]),
                 "anchored": bool(self.anchored[i]), "chain": int(self.chain[i]),
                 "sigma_t_measured": bool(self.sigma_t_measured[i]),
                 "segment": self.take([i]).segments()[0].round(2).tolist()}
                for i in range(len(self))
            ],
        }

    @classmethod
    def from_dict(cls, data: dict) -> LineSet:
        rows = data.get("lines", [])
        def col(name: str) -> np.ndarray:
            return np.array([float(r[name]) for r in rows], dtype=np.float64)
        return cls(col("a"), col("b"), col("c"), col("sigma_t"), col("sigma_s"), col("prior"),
                   np.array([int(r["region"]) for r in rows], dtype=np.int32), col("phi"),
                   bool(data.get("rotation_invariant", True)),
                   np.array([bool(r.get("locked", False)) for r in rows], dtype=bool),
                   np.array([bool(r.get("anchored", False)) for r in rows], dtype=bool),
                   np.array([int(r.get("chain", -1)) for r in rows], dtype=np.int32),
                   np.array([bool(r.get("sigma_t_measured", False)) for r in rows], dtype=bool))


@dataclass(frozen=True)
class Region:
    """A text region: its index, frame angle ``phi`` (radians) and page bounding box."""

    index: int
    phi: float
    bbox: tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive)
    n_samples: int
    #: Its frame is the page's direction, given for want of evidence for the steep angle it
    #: scored best at (``Parameters.steep_evidence``): it says nothing of which block it is part of.
    page_direction: bool = False


@dataclass(frozen=True)
class Preparation:
    """Products of stages 1-6, all inspectable.

    ``gray``: page as uint8 ``(H, W)``; ``ink``: bool ``(H, W)``; ``components``: int32
    ``(H, W)`` label of each ink pixel's connected component (0 = background);
    ``samples``: float64 ``(N, 2)`` [x, y]; ``sample_component``: ``(N,)``;
    ``delaunay_edges``: every unique Delaunay edge ``(E0, 2)``; ``edges``: the MRF edges
    (within regions) ``(E, 2)``; ``sample_region``: ``(N,)``; ``regions``; ``initial_lines``.
    """

    params: Parameters
    gray: np.ndarray
    ink: np.ndarray
    components: np.ndarray
    stats: ComponentStats
    samples: np.ndarray
    sample_component: np.ndarray
    delaunay_edges: np.ndarray
    edges: np.ndarray
    sample_region: np.ndarray
    regions: tuple[Region, ...]
    initial_lines: LineSet
    timings: dict = field(default_factory=dict)
    source: str = ""
    #: Height (pixels) of each component ``(n_components + 1,)``, index 0 unused.
    component_heights: np.ndarray | None = None
    #: Each component's box ``(n_components, 5)``: x0, y0, x1, y1 (exclusive), area in
    #: pixels (:func:`engine.components.component_boxes`); None = not recorded.
    component_boxes: np.ndarray | None = None
    #: The page within the image, bool ``(H, W)`` (engine.ink.find_page_area); None = all.
    page_area: np.ndarray | None = None
    #: Dark pixels kept out of the ink as not text, bool ``(H, W)`` (rules, frames, borders,
    #: blobs far larger than the text, the surround); None = none recorded.
    non_text: np.ndarray | None = None
    #: Pixels darker than the page's global ink/paper split but left out of the ink by the
    #: local binarisation (pale strokes), bool ``(H, W)``; labelled on a line's row only.
    faint: np.ndarray | None = None
    #: Ink of the components too small to sample (specks: a stroke's broken piece, a small
    #: dot, noise), bool ``(H, W)``; labelled with the nearest labelled ink only.
    specks: np.ndarray | None = None
    #: The speck pixels within reach of the ink (``specks`` less ``faint``; reach
    #: ``SPECK_REACH`` x H_cc) and the nearest ink pixel of each, flat indices ``(n,)`` each
    #: (engine.postprocess.speck_owners): found while stages 2-6 run, read by stage 8.
    speck_owners: tuple[np.ndarray, np.ndarray] | None = None
    #: Each region's row pitch (:class:`engine.pitch.RowPitch`, in region order): the
    #: distance between its text rows, measured on its samples (or the page's at its angle).
    row_pitch: tuple = ()
    #: The lines stage 6 added for rows of a region's period that no blob reached
    #: (engine.row_fill), as page segments ``(k, 2, 2)``; None: the fill did not run.
    filled_rows: np.ndarray | None = None

    def sample_heights(self) -> np.ndarray | None:
        """Height (pixels) of each sample's component ``(N,)``; None when not known."""
        if self.component_heights is None:
            return None
        return self.component_heights[self.sample_component]

    def small_samples(self) -> np.ndarray:
        """Boolean ``(N,)``: samples on diacritic-sized components (see Parameters)."""
        heights = self.sample_heights()
        if heights is None or len(self.samples) == 0:
            return np.zeros(len(self.samples), bool)
        return heights < self.params.diacritic_height * self.stats.h_cc

    @property
    def shape(self) -> tuple[int, int]:
        return self.gray.shape[:2]


@dataclass(frozen=True)
class Snapshot:
    """The state after one EM iteration (or one message-passing sweep when ``sweep`` is set).

    ``posterior_lines``/``posterior_probs``: each sample's top-k lines (index into ``lines``,
    -1 = none) and their posterior probabilities, ``(N, k)``; ``entropy``: posterior entropy
    in nats ``(N,)``; ``theta``: (theta_0, theta_1, theta_2); ``kl``: mean KL divergence from
    the previous iteration's posterior; ``log_likelihood``: mean per-sample log-likelihood of
    the samples under the line mixture; ``elapsed``: seconds since EM started.
    """

    iteration: int
    sweep: int | None
    lines: LineSet
    posterior_lines: np.ndarray
    posterior_probs: np.ndarray
    entropy: np.ndarray
    theta: tuple[float, float, float]
    kl: float
    log_likelihood: float
    elapsed: float
    n_sweeps: int = 0
    converged: bool = False
    stage: str = "em"

    def argmax(self) -> np.ndarray:
        """Each sample's most probable line ``(N,)`` (-1 where it has none)."""
        return self.posterior_lines[:, 0].copy()

    def posterior_of(self, line: int) -> np.ndarray:
        """Posterior probability of ``line`` for every sample ``(N,)`` (0 outside top-k)."""
        hit = self.posterior_lines == line
        return np.where(hit, self.posterior_probs, 0.0).sum(axis=1).astype(np.float32)

    @property
    def nbytes(self) -> int:
        return int(self.posterior_lines.nbytes + self.posterior_probs.nbytes + self.entropy.nbytes)


@dataclass(frozen=True)
class Segmentation:
    """The final result: ``labels`` int32 ``(H, W)`` (0 = background, k = line k, 1-based,
    lines numbered in reading order within regions), ``lines`` the final lines (line k is
    ``lines`` row k-1), and ``sample_labels`` ``(N,)`` (0-based line index, -1 = none)."""

    labels: np.ndarray
    lines: LineSet
    sample_labels: np.ndarray
    regions: tuple[Region, ...]
    timings: dict = field(default_factory=dict)
    #: The lines EM started from (the prepared ones, a file's, or the user's edits), with
    #: their locked flags; None = not recorded.
    initial_lines: LineSet | None = None
    #: Every merge of fragments into one line (:class:`engine.row_merge.FragmentMerge`: which
    #: fragments were joined, where, and why), within a region and across regions.
    merges: tuple = ()
    #: The path of each line made of a given line's straight pieces (``LineSet.chain``,
    #: :func:`engine.postprocess.join_chains`): 0-based line index -> page points ``(P, 2)``
    #: [x, y] through the pieces in order along the line. Lines not listed are straight.
    paths: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Page:
    """A loaded page: ``gray`` uint8 ``(H, W)`` (EXIF orientation applied), ``bilevel`` when
    the file is black and white, up to lossy compression (then ink is ``gray < 128``;
    :func:`engine.io.load_page`), the ``path`` it came from,
    and its ``colour`` when it has any."""

    gray: np.ndarray
    bilevel: bool
    path: str = ""
    #: The page's colours, uint8 ``(H, W, 3)`` RGB, for colour images; None for grey ones.
    colour: np.ndarray | None = None
