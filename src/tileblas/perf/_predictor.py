"""The Predictor (paper section IV): evaluate stored models over an algorithm's trace.

Design note
    A trace (list of :class:`~tileblas.perf._trace.Call`) is predicted by evaluating, for every call, the
    submodel of its routine and flags at its sizes and summing per statistic: the median sum is the
    prediction, the min and max sums the range.  Efficiency is ``flops / (time * peak)``, with ``peak``
    the GFLOP/s of a large DGEMM on this key measured once (:func:`measure_peak`, stored in the
    repository as property ``peak_gflops``); without it, efficiency is reported relative to 1 GFLOP/s.

    Ranking variants and choosing block sizes only evaluates models; nothing is executed.
    :func:`build_models_for` builds exactly the submodels a set of traces needs (used by ``tileblas tune``).

What it must not touch
    Timing of algorithms (the benchmark and the CLI measure, for comparison only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from tileblas.perf._algorithms import get_algorithm
from tileblas.perf._repository import ModelKey, Repository, current_key
from tileblas.perf._trace import Call, routine_spec

__all__ = [
    "Prediction",
    "Predictor",
    "MissingModelError",
    "measure_peak",
    "build_models_for",
    "needed_models",
    "measure_algorithm",
]


class MissingModelError(LookupError):
    """No stored model for a (routine, flags) that a trace needs."""


@dataclass
class Prediction:
    """Predicted run time of a trace (seconds) and efficiency, as min / median / max (and mean).

    Attributes
    ----------
    time : dict
        ``{"min", "median", "mean", "max"}`` summed over the calls.
    flops : float
        Operation count of the algorithm (0 for a bare trace).
    efficiency : dict
        ``flops / (time * peak)`` per statistic; ``efficiency["min"]`` comes from ``time["max"]``.
    calls : int
        Number of calls evaluated.
    by_routine : dict
        Median time per routine.
    """

    time: dict[str, float]
    flops: float = 0.0
    peak_gflops: float = 1.0
    efficiency: dict[str, float] = field(default_factory=dict)
    calls: int = 0
    by_routine: dict[str, float] = field(default_factory=dict)
    label: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"time": self.time, "flops": self.flops, "peak_gflops": self.peak_gflops,
                "efficiency": self.efficiency, "calls": self.calls, "by_routine": self.by_routine, **self.label}


class Predictor:
    """Predicts traces with the models stored for one :class:`ModelKey`.

    Parameters
    ----------
    repository : Repository, optional
        Default: the repository at :func:`default_path`.
    key : ModelKey, optional
        Default: :func:`current_key` for ``threads`` and ``locality``.
    threads : int
    locality : {"in-cache", "out-of-cache"}
    """

    def __init__(self, repository: Repository | None = None, key: ModelKey | None = None, threads: int = 1,
                 locality: str = "in-cache") -> None:
        self.repository = repository if repository is not None else Repository()
        self.key = key if key is not None else current_key(threads, locality)
        self._models: dict[tuple[str, tuple[str, ...]], Any] = {}
        peak = self.repository.get_property(self.key, "peak_gflops")
        self.peak_gflops = float(peak) if peak else 1.0

    def submodel(self, routine: str, flags: tuple[str, ...]):
        k = (routine, tuple(flags))
        sm = self._models.get(k)
        if sm is None:
            sm = self.repository.load(self.key, routine, flags)
            if sm is None:
                raise MissingModelError(
                    f"no model stored for {routine} flags {''.join(flags) or '-'} under {self.key}; build it with "
                    f"`tileblas model build {routine}` or `tileblas tune`"
                )
            self._models[k] = sm
        return sm

    def predict_calls(self, calls: Iterable[Call], flops: float = 0.0) -> Prediction:
        """Sum the models over ``calls``."""
        tot = {"min": 0.0, "median": 0.0, "mean": 0.0, "max": 0.0}
        by: dict[str, float] = {}
        n = 0
        for c in calls:
            est = self.submodel(c.routine, c.flags).evaluate(c.sizes)
            for s in tot:
                tot[s] += est[s]
            by[c.routine] = by.get(c.routine, 0.0) + est["median"]
            n += 1
        eff = {}
        if flops:
            rate = flops / (self.peak_gflops * 1e9)
            eff = {"min": rate / tot["max"] if tot["max"] else 0.0,
                   "median": rate / tot["median"] if tot["median"] else 0.0,
                   "mean": rate / tot["mean"] if tot["mean"] else 0.0,
                   "max": rate / tot["min"] if tot["min"] else 0.0}
        return Prediction(tot, flops, self.peak_gflops, eff, n, by)

    def predict(self, algorithm: str, n: int, variant: int, block: int) -> Prediction:
        """Predicted time and efficiency of ``algorithm`` (``"trinv"``/``"sylvester"``) on size ``n``."""
        alg = get_algorithm(algorithm)
        p = self.predict_calls(alg.trace(n, variant, block), alg.flops(n))
        p.label = {"algorithm": algorithm, "n": n, "variant": variant, "block": block}
        return p

    def rank(self, algorithm: str, n: int, block: int, variants: Sequence[int] | None = None) -> list[Prediction]:
        """Variants sorted fastest first by predicted median time."""
        alg = get_algorithm(algorithm)
        preds = [self.predict(algorithm, n, v, block) for v in (variants or alg.variants)]
        return sorted(preds, key=lambda p: p.time["median"])

    def best_block(self, algorithm: str, n: int, variant: int, blocks: Iterable[int]) -> tuple[int, list[Prediction]]:
        """The block size with the least predicted median time, and every prediction."""
        preds = [self.predict(algorithm, n, variant, int(b)) for b in blocks]
        if not preds:
            raise ValueError("blocks must not be empty")
        best = min(preds, key=lambda p: p.time["median"])
        return int(best.label["block"]), preds


def needed_models(traces: Iterable[Iterable[Call]]) -> dict[tuple[str, tuple[str, ...]], tuple[list[int], list[int]]]:
    """For each (routine, flags) in ``traces``: the size box (lo, hi) its calls span."""
    out: dict[tuple[str, tuple[str, ...]], tuple[list[int], list[int]]] = {}
    for calls in traces:
        for c in calls:
            k = (c.routine, c.flags)
            if k not in out:
                out[k] = (list(c.sizes), list(c.sizes))
            lo, hi = out[k]
            for i, s in enumerate(c.sizes):
                lo[i] = min(lo[i], s)
                hi[i] = max(hi[i], s)
    return out


def measure_algorithm(algorithm: str, n: int, variant: int, block: int, reps: int = 3, threads: int = 1,
                      seed: int = 0):
    """Measured :class:`~tileblas.perf._sampler.Timing` of one algorithm execution (inputs restored each time)."""
    from tileblas.perf._sampler import time_callable

    alg = get_algorithm(algorithm)
    prepare, run = alg.make_runner(int(n), int(variant), int(block), np.random.default_rng(seed), threads)
    return time_callable(run, reps, prepare)


def measure_peak(threads: int = 1, n: int = 1024, reps: int = 5) -> float:
    """GFLOP/s of an ``n``-cubed DGEMM on tileblas' OpenBLAS with ``threads`` threads (best of ``reps``)."""
    from tileblas.perf._sampler import Sampler

    t = Sampler(threads=threads, reps=reps, ld=n).sample("dgemm", ("N", "N"), (n, n, n))
    return 2.0 * n ** 3 / t.min / 1e9


def build_models_for(algorithm: str, sizes: Sequence[int], blocks: Sequence[int], repository: Repository,
                     key: ModelKey, variants: Sequence[int] | None = None, error_bound: float = 0.1,
                     min_size: int = 32, reps: int = 5, validation_points: int = 50, progress: bool = False,
                     rebuild: bool = False, log=print, max_samples: int | None = 20000,
                     bursts: int = 2) -> list[Any]:
    """Build and store every submodel the traces of ``algorithm`` over ``sizes`` x ``blocks`` need.

    Domains are the boxes the calls span, rounded out to multiples of 8 (a stored model that does not cover
    them is rebuilt over the union of both boxes); each submodel gets at most ``max_samples`` samples
    (Adaptive Refinement stops refining then).  Every point is measured in ``bursts`` bursts (see
    :func:`~tileblas.perf._modeler.build_submodel`).  Returns the new submodels.
    """
    from tileblas.perf._modeler import build_submodel
    from tileblas.perf._sampler import Sampler, leading_dimension

    alg = get_algorithm(algorithm)
    traces = [alg.trace(n, v, b) for n in sizes for v in (variants or alg.variants) for b in blocks]
    need = needed_models(traces)
    built = []
    for (routine, flags), (lo, hi) in sorted(need.items()):
        routine_spec(routine)
        lo8 = [max(8, (v // 8) * 8) for v in lo]
        hi8 = [max(l, -(-v // 8) * 8) for v, l in zip(hi, lo8)]
        old = None if rebuild else repository.load(key, routine, flags)
        if old is not None:
            if all(a <= b for a, b in zip(old.lo, lo8)) and all(a >= b for a, b in zip(old.hi, hi8)):
                continue  # the stored model covers every call
            lo8 = [min(a, b) for a, b in zip(old.lo, lo8)]  # grow the stored domain, never shrink it
            hi8 = [max(a, b) for a, b in zip(old.hi, hi8)]
        sampler = Sampler(threads=key.threads, locality=key.locality, reps=reps,
                          ld=leading_dimension(max(hi8)))
        log(f"building {routine} {''.join(flags) or '-'} over {lo8}..{hi8}")
        sm = build_submodel(routine, flags, lambda s, r=routine, f=flags: sampler.sample(r, f, s), lo8, hi8,
                            "refine", error_bound, min_size, validation_points=validation_points, progress=progress,
                            config={"locality": key.locality, "reps": reps, "threads": key.threads},
                            max_samples=max_samples, bursts=bursts)
        repository.save(key, sm)
        log(f"  {sm.samples} samples, {len(sm.regions)} regions, validation avg/max rel. error "
            f"{sm.avg_error:.1%}/{sm.max_error:.1%}")
        built.append(sm)
    if repository.get_property(key, "peak_gflops") is None:
        repository.set_property(key, "peak_gflops", measure_peak(key.threads))
    return built
