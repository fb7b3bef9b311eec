"""The Modeler (paper section III): piecewise multivariate polynomial models of a routine's run time.

Design note
    A :class:`~tileblas.policy._models.Submodel` (defined, with :class:`~tileblas.policy._models.Region`
    and the evaluation, in :mod:`tileblas.policy._models`, and re-exported here) models one routine for one
    combination of flag arguments (``diag`` ignored) over a box of its size arguments.  It is a list of
    axis-aligned regions on the lattice of multiples of ``granularity`` (8, as in the paper); each region
    holds one polynomial per statistic (min, median, mean, max, std) in the sizes, with per-size degree
    taken from the routine's operation count (for dtrsm side L: m^2 n -> degrees (2, 1), tensor basis).
    Here they are built from measurements.  Polynomials are fitted by least squares on
    relative residuals (``numpy.linalg.lstsq`` on rows scaled by 1/value), and a region's accuracy is the
    maximum relative error of the median fit over its own samples, as in the paper.

    Two strategies:
      * Model Expansion (``error_bound``, ``direction`` "down" = towards the origin or "up",
        ``initial_size``): take the corner of an uncovered box, fit a region of the initial size there
        (halving it while it is too inaccurate), grow it dimension by dimension in steps of the initial
        size, halving a failing step down to the lattice spacing, while the error bound holds, then cover
        the rest of the box by the disjoint boxes left over and repeat.
      * Adaptive Refinement (``error_bound``, ``min_size``): fit the whole space on a coarse grid; split a
        region into 2^d disjoint children while its error exceeds the bound and it is at least twice
        the minimum size along a dimension.
    Every sample point is measured once and cached, so refinement and expansion reuse measurements.
    :func:`validate` then measures fresh random points that the model never used and records the average
    and maximum relative error of the predicted median.

    Measuring on a shared, noisy machine: points are measured in batches (all new points of a refinement
    level, of an expansion step, or all validation points), in ``bursts`` passes over the batch; each pass
    is one burst of the sampler's repetitions per point, and a point keeps the burst with the smallest
    median (:func:`least_disturbed`).  Interference from other processes comes in episodes longer than
    one burst; two bursts of one point lie a whole pass apart, so rarely both in one episode.  Fitting
    and validation measure alike, and every repetition of every burst counts as a sample.

    What is measured is a callable ``measure(sizes) -> Timing``; the sampler provides it, tests pass a
    synthetic one.

What it must not touch
    Storage (the repository serialises :meth:`Submodel.to_dict`) and timing (the sampler).
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from tileblas._progress import Progress
from tileblas.perf._sampler import STATS, Timing
from tileblas.policy._calls import routine_spec
from tileblas.policy._models import Region, Submodel, _design, _exponents

__all__ = [
    "Region",
    "Submodel",
    "Modeler",
    "validate",
    "build_submodel",
    "STRATEGIES",
    "DIRECTIONS",
    "least_disturbed",
]

STRATEGIES = ("refine", "expand")
DIRECTIONS = ("down", "up")

Box = tuple[tuple[int, ...], tuple[int, ...]]


def least_disturbed(bursts: Sequence[Timing]) -> Timing:
    """The burst with the smallest median: the one least slowed by other processes."""
    return min(bursts, key=lambda t: t.median)


def _measure_bursts(measure: Callable[[tuple[int, ...]], Timing], pts: Sequence[tuple[int, ...]], bursts: int,
                    progress: Progress | None = None) -> tuple[dict[tuple[int, ...], Timing], int]:
    """``bursts`` passes over ``pts`` (one ``measure`` call per point and pass); per point the
    :func:`least_disturbed` burst, and the repetitions taken in all."""
    got: dict[tuple[int, ...], list[Timing]] = {p: [] for p in pts}
    reps = 0
    for r in range(bursts):
        for p in pts:
            t = measure(p)
            got[p].append(t)
            reps += t.reps
            if progress is not None and r == bursts - 1:
                progress.step()
    return {p: least_disturbed(b) for p, b in got.items()}, reps


def _check_pos_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive integer; got {v!r}")
    return int(v)


class Modeler:
    """Builds a :class:`Submodel` from a measure function over a box of sizes.

    Parameters
    ----------
    measure : callable
        ``measure(sizes: tuple[int, ...]) -> Timing`` (e.g. a bound :meth:`Sampler.sample`).
    lo, hi : sequence of int
        Domain bounds per size argument, inclusive (rounded onto the lattice).
    degrees : sequence of int
        Polynomial degree per size.
    granularity : int
        Lattice spacing of sample points (8 in the paper).
    progress : bool
        Show a progress bar while sampling.
    check : bool
        Adaptive Refinement also measures held-out points of each region (its grid's cell centres and the
        geometric midpoint of the first cell per axis) and judges the region on them too (the paper notes
        that the error on the fitted points alone can hide structure).
    bursts : int
        Bursts per point, taken in separate passes over each batch of new points; a point keeps the
        :func:`least_disturbed` one.
    """

    def __init__(self, measure: Callable[[tuple[int, ...]], Timing], lo: Sequence[int], hi: Sequence[int],
                 degrees: Sequence[int], granularity: int = 8, progress: bool = False, check: bool = True,
                 bursts: int = 1) -> None:
        self.measure = measure
        self.check = bool(check)
        self.bursts = _check_pos_int("bursts", bursts)
        self.g = _check_pos_int("granularity", granularity)
        if len(lo) != len(hi) or len(lo) != len(degrees) or not lo:
            raise ValueError(f"lo, hi and degrees must have the same positive length; got {lo!r}, {hi!r}, {degrees!r}")
        g = self.g
        self.lo = tuple(max(g, int(math.ceil(v / g)) * g) for v in lo)
        self.hi = tuple(max(int(v) // g * g, l) for v, l in zip(hi, self.lo))
        self.degrees = tuple(int(d) for d in degrees)
        self.scale = tuple(float(max(h, 1)) for h in self.hi)
        self.exps = _exponents(self.degrees)
        self.cache: dict[tuple[int, ...], Timing] = {}
        self.samples = 0
        self._progress = Progress(None, progress, "sampling", "pt", leave=False)

    # ------------------------------------------------------------------ measuring and fitting
    def _get(self, p: tuple[int, ...]) -> Timing:
        t = self.cache.get(p)
        if t is None:
            self._measure_batch([p])
            t = self.cache[p]
        return t

    def _new_points(self, pts: Iterable[tuple[int, ...]]) -> list[tuple[int, ...]]:
        return list(dict.fromkeys(p for p in pts if p not in self.cache))

    def _measure_batch(self, pts: Iterable[tuple[int, ...]]) -> None:
        """Measure the points not cached yet, in :attr:`bursts` passes over the batch."""
        new = self._new_points(pts)
        if new:
            got, reps = _measure_bursts(self.measure, new, self.bursts, self._progress)
            self.cache.update(got)
            self.samples += reps

    def _axis(self, lo: int, hi: int, count: int) -> list[int]:
        if hi <= lo:
            return [lo]
        raw = np.linspace(lo, hi, max(count, 2))
        pts = sorted({int(round(v / self.g)) * self.g for v in raw} | {lo, hi})
        return [p for p in pts if lo <= p <= hi]

    def _fit(self, box: Box, axes: list[list[int]] | None = None, pts: list[tuple[int, ...]] | None = None) -> Region:
        if pts is None:
            pts = [tuple(p) for p in itertools.product(*axes)]
        self._measure_batch(pts)
        timings = [self._get(p) for p in pts]
        x = np.asarray(pts, dtype=np.float64)
        a = _design(x, self.exps, np.asarray(self.scale))
        coef: dict[str, list[float]] = {}
        err = 0.0
        for s in STATS:
            v = np.asarray([getattr(t, s) for t in timings])
            w = 1.0 / np.where(np.abs(v) > 0, np.abs(v), 1.0) if s != "std" else np.ones_like(v)
            c, *_ = np.linalg.lstsq(a * w[:, None], v * w, rcond=None)
            coef[s] = [float(z) for z in c]
            if s == "median":
                pred = a @ c
                err = float(np.max(np.abs(pred - v) / np.where(v > 0, v, np.inf)))
        return Region(box[0], box[1], coef, err, len(pts))

    def _grid_axes(self, box: Box) -> list[list[int]]:
        return [self._axis(l, h, d + 2) for l, h, d in zip(box[0], box[1], self.degrees)]

    def _check_points(self, axes: list[list[int]]) -> list[tuple[int, ...]]:
        """Held-out accuracy checks (on the lattice, distinct from the grid): the cell centres of the grid,
        plus per axis the geometric midpoint of its first cell.  Run time grows polynomially with the
        sizes, so the sizes at the low end of a wide region, where per-call costs dominate, are where a
        polynomial fitted over the whole region fails first; the geometric midpoint looks there."""
        mids = []
        for ax in axes:
            m = {(a + b) // 2 // self.g * self.g for a, b in zip(ax, ax[1:])}
            if len(ax) > 1:
                m.add(int(round(math.sqrt(ax[0] * ax[1]) / self.g)) * self.g)
            mids.append(sorted(m - set(ax)))
        if any(not m for m in mids):
            return []
        return [tuple(p) for p in itertools.product(*mids)]

    def _rel_error(self, reg: Region, pts: list[tuple[int, ...]]) -> float:
        if not pts:
            return 0.0
        a = _design(np.asarray(pts, dtype=np.float64), self.exps, np.asarray(self.scale))
        pred = a @ np.asarray(reg.coef["median"])
        v = np.asarray([self._get(p).median for p in pts])
        return float(np.max(np.abs(pred - v) / np.where(v > 0, v, np.inf)))

    # ------------------------------------------------------------------ Adaptive Refinement
    def adaptive_refinement(self, error_bound: float = 0.1, min_size: int = 32,
                            max_samples: int | None = None) -> list[Region]:
        """Regions by Adaptive Refinement (paper III-C2), breadth first.

        Each level's new points (grids and held-out checks of all its regions) are measured as one batch.
        With ``max_samples``, the whole domain's first fit is always made; after that a region is only
        refined if measuring its children's new points keeps the total within ``max_samples`` (a part not
        refined keeps its parent's polynomial).
        """
        if not (error_bound > 0):
            raise ValueError(f"error_bound must be positive; got {error_bound!r}")
        min_size = _check_pos_int("min_size", min_size)
        out: list[Region] = []
        level: list[tuple[Box, Region | None]] = [((self.lo, self.hi), None)]
        while level:
            plans = []
            planned = self.samples
            batch: list[tuple[int, ...]] = []
            for box, parent in level:
                axes = self._grid_axes(box)
                grid = [tuple(p) for p in itertools.product(*axes)]
                checks = self._check_points(axes) if self.check else []
                new = self._new_points(grid + checks)
                cost = len(new) * self._reps_per_point()
                if parent is not None and max_samples is not None and planned + cost > max_samples:
                    # over budget: this part of the parent keeps the parent's polynomial
                    out.append(Region(box[0], box[1], parent.coef, parent.error, 0))
                    continue
                batch.extend(new)
                planned += cost
                plans.append((box, grid, checks))
            self._measure_batch(batch)
            nxt: list[tuple[Box, Region | None]] = []
            for box, grid, checks in plans:
                reg = self._fit(box, pts=grid)
                if checks:  # accuracy judged on held-out points too, then the polynomial is refitted on all
                    err = max(reg.error, self._rel_error(reg, checks))
                    reg = self._fit(box, pts=grid + checks)
                    reg.error = max(err, reg.error)
                splittable = [d for d in range(len(box[0])) if box[1][d] - box[0][d] + self.g >= 2 * min_size]
                if reg.error <= error_bound or not splittable:
                    out.append(reg)
                    continue
                halves = []
                for d in range(len(box[0])):
                    l, h = box[0][d], box[1][d]
                    if d in splittable:
                        mid = l + ((h - l) // 2) // self.g * self.g
                        halves.append([(l, mid), (mid + self.g, h)])
                    else:
                        halves.append([(l, h)])
                for combo in itertools.product(*halves):
                    nxt.append(((tuple(c[0] for c in combo), tuple(c[1] for c in combo)), reg))
            level = nxt
        return out

    def _reps_per_point(self) -> float:
        """Samples one new point has cost so far (for planning the sample budget)."""
        return self.samples / len(self.cache) if self.cache else 1.0

    # ------------------------------------------------------------------ Model Expansion
    def model_expansion(self, error_bound: float = 0.1, direction: str = "down",
                        initial_size: int = 128) -> list[Region]:
        """Regions by Model Expansion (paper III-C1)."""
        if not (error_bound > 0):
            raise ValueError(f"error_bound must be positive; got {error_bound!r}")
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
        s = _check_pos_int("initial_size", initial_size)
        s = max(self.g, s // self.g * self.g)
        g = self.g
        up = direction == "up"
        dims = len(self.lo)
        spacing = [max(g, (s // (d + 1)) // g * g) for d in self.degrees]
        def make_box(anchor: tuple[int, ...], ext: Sequence[int], bound: Box) -> Box:
            if up:
                return anchor, tuple(min(a + e, b) for a, e, b in zip(anchor, ext, bound[1]))
            return tuple(max(a - e, b) for a, e, b in zip(anchor, ext, bound[0])), anchor

        def fit(box: Box) -> Region:
            axes = []
            for d in range(dims):
                l, h = box[0][d], box[1][d]
                if up:
                    pts = list(range(l, h + 1, spacing[d]))
                    if pts[-1] != h:
                        pts.append(h)
                else:
                    pts = list(range(h, l - 1, -spacing[d]))[::-1]
                    if pts[0] != l:
                        pts.insert(0, l)
                axes.append(pts)
            return self._fit(box, axes)

        out: list[Region] = []
        boxes: list[Box] = [(self.lo, self.hi)]
        while boxes:
            bound = boxes.pop(0)
            anchor = bound[0] if up else bound[1]
            ext = [s - g] * dims
            reg = fit(make_box(anchor, ext, bound))
            while reg.error > error_bound and max(ext) >= 2 * g:  # shrink a too inaccurate initial region
                ext = [max(g, (e // 2) // g * g) for e in ext]
                reg = fit(make_box(anchor, ext, bound))
            if reg.error <= error_bound:
                active = list(range(dims))
                steps = [s] * dims
                while active:
                    for d in list(active):
                        limit = (bound[1][d] - anchor[d]) if up else (anchor[d] - bound[0][d])
                        step = steps[d]
                        grown = None
                        while step >= g and ext[d] < limit:
                            trial = list(ext)
                            trial[d] = min(ext[d] + step, limit)
                            r = fit(make_box(anchor, trial, bound))
                            if r.error <= error_bound:
                                grown = (trial, r)
                                break
                            step = (step // 2) // g * g
                        if grown is None:
                            active.remove(d)
                        else:
                            ext, reg = grown
                            steps[d] = step
            out.append(reg)
            boxes.extend(_subtract(bound, (reg.lo, reg.hi), g))
        return out

    def close(self) -> None:
        self._progress.close()


def _subtract(outer: Box, inner: Box, g: int) -> list[Box]:
    """Disjoint boxes covering ``outer`` minus ``inner`` (inner lies in outer and touches one corner)."""
    lo, hi = list(outer[0]), list(outer[1])
    out: list[Box] = []
    for d in range(len(lo)):
        if inner[1][d] < hi[d]:
            blo, bhi = list(lo), list(hi)
            blo[d] = inner[1][d] + g
            out.append((tuple(blo), tuple(bhi)))
        if inner[0][d] > lo[d]:
            blo, bhi = list(lo), list(hi)
            bhi[d] = inner[0][d] - g
            out.append((tuple(blo), tuple(bhi)))
        lo[d], hi[d] = inner[0][d], inner[1][d]
    return out


def validate(submodel: Submodel, measure: Callable[[tuple[int, ...]], Timing], points: int = 200,
             exclude: Iterable[tuple[int, ...]] = (), granularity: int = 1, seed: int = 1,
             progress: bool = False, bursts: int = 1) -> dict[str, Any]:
    """Average and maximum relative error of the predicted median on fresh random points.

    Points are drawn uniformly from the domain (on multiples of ``granularity``; :func:`build_submodel`
    uses the model's lattice, as the paper samples multiples of 8), never one of ``exclude`` (the points
    the model was fitted to).  They are measured as the modeler measures: ``bursts`` passes over all of
    them, each point keeping its :func:`least_disturbed` burst.  The result is also stored in
    ``submodel.validation``.
    """
    points = _check_pos_int("points", points)
    bursts = _check_pos_int("bursts", bursts)
    rng = np.random.default_rng(seed)
    used = set(map(tuple, exclude))
    chosen: list[tuple[int, ...]] = []
    tries = 0
    while len(chosen) < points and tries < 100 * points:
        tries += 1
        p = tuple(int(rng.integers(l // granularity, h // granularity + 1)) * granularity
                  for l, h in zip(submodel.lo, submodel.hi))
        p = tuple(max(v, l) for v, l in zip(p, submodel.lo))
        if p in used:
            continue
        used.add(p)
        chosen.append(p)
    bar = Progress(len(chosen), progress, "validating", "pt", leave=False)
    got, samples = _measure_bursts(measure, chosen, bursts, bar)
    bar.close()
    errs = []
    for p in chosen:
        t = got[p]
        pred = submodel.evaluate(p)["median"]
        errs.append(abs(pred - t.median) / t.median if t.median > 0 else 0.0)
    res: dict[str, Any] = {
        "points": len(chosen),
        "samples": samples,
        "avg_rel_error": float(np.mean(errs)) if errs else math.nan,
        "max_rel_error": float(np.max(errs)) if errs else math.nan,
        "detail": [[list(p), float(e)] for p, e in zip(chosen, errs)],
    }
    submodel.validation = res
    return res


def build_submodel(routine: str, flags: Sequence[str], measure: Callable[[tuple[int, ...]], Timing],
                   lo: Sequence[int], hi: Sequence[int], strategy: str = "refine", error_bound: float = 0.1,
                   min_size: int = 32, direction: str = "down", initial_size: int = 128,
                   validation_points: int = 200, granularity: int = 8, progress: bool = False,
                   config: dict[str, Any] | None = None, max_samples: int | None = None,
                   bursts: int = 1) -> Submodel:
    """Build, and validate on fresh points, the model of ``routine`` for one flag combination.

    Parameters
    ----------
    routine : str
        A routine of :data:`~tileblas.perf.ROUTINES`.
    flags : sequence of str
        Flag letters (the submodel's key).
    measure : callable
        ``measure(sizes) -> Timing``.
    lo, hi : sequence of int
        Domain of the size arguments, inclusive.
    strategy : {"refine", "expand"}
        Adaptive Refinement or Model Expansion.
    error_bound : float
        Relative error bound on the median.
    min_size : int
        Minimum region size (refine).
    direction : {"down", "up"}
        Expansion direction (expand): "down" grows towards the origin.
    initial_size : int
        Initial region size (expand).
    validation_points : int
        Fresh points measured for the error report (0 skips validation).
    granularity : int
        Lattice spacing of the sample points.
    progress : bool
        Progress bars while sampling.
    config : dict, optional
        Extra settings recorded in the model (sampler locality, repetitions...).
    max_samples : int, optional
        Sample budget of Adaptive Refinement: once spent, remaining regions are accepted unrefined.
    bursts : int
        Bursts per point (fitting and validation alike), each in its own pass over a batch of points; a
        point keeps the :func:`least_disturbed` burst.  2 on a machine shared with other work.

    Returns
    -------
    Submodel
    """
    spec = routine_spec(routine)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}; got {strategy!r}")
    flags = tuple(flags)
    t0 = time.perf_counter()
    modeler = Modeler(measure, lo, hi, spec.degrees(flags), granularity, progress, bursts=bursts)
    try:
        if strategy == "refine":
            regions = modeler.adaptive_refinement(error_bound, min_size, max_samples)
            opts = {"error_bound": error_bound, "min_size": min_size, "max_samples": max_samples}
        else:
            regions = modeler.model_expansion(error_bound, direction, initial_size)
            opts = {"error_bound": error_bound, "direction": direction, "initial_size": initial_size}
    finally:
        modeler.close()
    sm = Submodel(routine, flags, spec.size_names, modeler.lo, modeler.hi, modeler.degrees, modeler.scale,
                  regions, modeler.samples, len(modeler.cache))
    build_s = time.perf_counter() - t0
    if validation_points:
        validate(sm, measure, validation_points, exclude=modeler.cache.keys(), granularity=granularity,
                 progress=progress, bursts=modeler.bursts)
    sm.config = {"strategy": strategy, **opts, "granularity": granularity, "bursts": modeler.bursts,
                 "build_seconds": build_s,
                 "total_seconds": time.perf_counter() - t0, **(config or {})}
    return sm
