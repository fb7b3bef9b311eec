"""Performance models as stored and evaluated: piecewise multivariate polynomials of a routine's run time.

Design note
    A :class:`Submodel` models one routine for one combination of flag arguments (``diag`` ignored) over a
    box of its size arguments.  It is a list of axis-aligned :class:`Region` s on the lattice of multiples
    of ``granularity`` (8, as in the paper); each region holds one polynomial per statistic (min, median,
    mean, max, std) in the sizes, with per-size degree taken from the routine's operation count (for
    dtrsm side L: m^2 n -> degrees (2, 1), tensor basis).  :meth:`Submodel.evaluate` picks the most
    accurate region containing the sizes (else the nearest one: outside its domain a model
    extrapolates) and evaluates its polynomials.

    The modeler (:mod:`tileblas.perf._modeler`, paper section III) fits them from measurements; the
    repository (:mod:`tileblas.policy._repository`) stores :meth:`Submodel.to_dict` and reads it back
    with :meth:`Submodel.from_dict`.

What it must not touch
    Fitting, timing and storage.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

__all__ = ["Region", "Submodel"]


def _exponents(degrees: Sequence[int]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(d + 1) for d in degrees)))


def _design(points: np.ndarray, exps: list[tuple[int, ...]], scale: np.ndarray) -> np.ndarray:
    x = points / scale
    return np.stack([np.prod(x ** np.asarray(e), axis=1) for e in exps], axis=1)


@dataclass
class Region:
    """One box of the size space (inclusive bounds) with a polynomial per statistic.

    Attributes
    ----------
    lo, hi : tuple of int
        Inclusive bounds per size argument.
    coef : dict
        Statistic name -> coefficients over :attr:`Submodel.exponents` (sizes scaled by ``scale``).
    error : float
        Maximum relative error of the median fit over the region's own samples.
    points : int
        Sample points the region was fitted to.
    """

    lo: tuple[int, ...]
    hi: tuple[int, ...]
    coef: dict[str, list[float]]
    error: float
    points: int

    def contains(self, x: Sequence[int]) -> bool:
        return all(lo <= v <= hi for lo, v, hi in zip(self.lo, x, self.hi))

    def distance(self, x: Sequence[int]) -> float:
        return float(sum(max(lo - v, 0, v - hi) for lo, v, hi in zip(self.lo, x, self.hi)))


@dataclass
class Submodel:
    """Piecewise polynomial model of one routine for one flag combination.

    Attributes
    ----------
    routine : str
    flags : tuple of str
    size_names : tuple of str
    lo, hi : tuple of int
        The modeled domain (inclusive).
    degrees : tuple of int
    scale : tuple of float
        Sizes are divided by these before the polynomial is evaluated.
    regions : list of Region
    samples : int
        Timed repetitions used to build the model (validation excluded).
    points : int
        Distinct sample points used to build the model.
    validation : dict
        ``{"points", "samples", "avg_rel_error", "max_rel_error"}`` measured on fresh points.
    config : dict
        Strategy and its options, sampler settings, build time.
    """

    routine: str
    flags: tuple[str, ...]
    size_names: tuple[str, ...]
    lo: tuple[int, ...]
    hi: tuple[int, ...]
    degrees: tuple[int, ...]
    scale: tuple[float, ...]
    regions: list[Region] = field(default_factory=list)
    samples: int = 0
    points: int = 0
    validation: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def exponents(self) -> list[tuple[int, ...]]:
        return _exponents(self.degrees)

    def region_for(self, sizes: Sequence[int]) -> Region:
        """The region whose polynomial is evaluated at ``sizes`` (the most accurate containing one, else
        the nearest: outside the domain the model extrapolates)."""
        inside = [r for r in self.regions if r.contains(sizes)]
        if inside:
            return min(inside, key=lambda r: r.error)
        return min(self.regions, key=lambda r: (r.distance(sizes), r.error))

    def evaluate(self, sizes: Sequence[int]) -> dict[str, float]:
        """Predicted statistics (seconds) for one size tuple; never negative."""
        if len(sizes) != len(self.size_names):
            raise ValueError(f"sizes must have {len(self.size_names)} entries {self.size_names}; got {tuple(sizes)}")
        r = self.region_for(sizes)
        row = _design(np.asarray([sizes], dtype=np.float64), self.exponents, np.asarray(self.scale))[0]
        out = {s: max(float(row @ np.asarray(c)), 0.0) for s, c in r.coef.items()}
        floor = min((v for v in out.values() if v > 0), default=0.0)
        for s in ("min", "median", "mean", "max"):  # a fit may dip below zero at a corner: keep a sane floor
            if s in out and out[s] <= 0.0:
                out[s] = floor
        return out

    @property
    def avg_error(self) -> float:
        return float(self.validation.get("avg_rel_error", math.nan))

    @property
    def max_error(self) -> float:
        return float(self.validation.get("max_rel_error", math.nan))

    def to_dict(self) -> dict[str, Any]:
        return {
            "routine": self.routine, "flags": list(self.flags), "size_names": list(self.size_names),
            "lo": list(self.lo), "hi": list(self.hi), "degrees": list(self.degrees), "scale": list(self.scale),
            "regions": [
                {"lo": list(r.lo), "hi": list(r.hi), "coef": r.coef, "error": r.error, "points": r.points}
                for r in self.regions
            ],
            "samples": self.samples, "points": self.points, "validation": self.validation, "config": self.config,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Submodel":
        regions = [
            Region(tuple(r["lo"]), tuple(r["hi"]), {k: [float(x) for x in v] for k, v in r["coef"].items()},
                   float(r["error"]), int(r["points"]))
            for r in d["regions"]
        ]
        sm = cls(d["routine"], tuple(d["flags"]), tuple(d["size_names"]), tuple(d["lo"]), tuple(d["hi"]),
                 tuple(d["degrees"]), tuple(float(x) for x in d["scale"]), regions, int(d["samples"]),
                 int(d["points"]), dict(d.get("validation", {})), dict(d.get("config", {})))
        n_terms = len(sm.exponents)
        if not regions or any(len(c) != n_terms for r in regions for c in r.coef.values()):
            raise ValueError("model body is inconsistent: coefficient count does not match the degrees")
        return sm
