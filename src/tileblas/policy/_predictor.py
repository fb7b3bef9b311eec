"""The Predictor (paper section IV): evaluate stored models over an algorithm's trace.

Design note
    A trace (list of :class:`~tileblas.policy._calls.Call`) is predicted by evaluating, for every call, the
    submodel of its routine and flags at its sizes and summing per statistic: the median sum is the
    prediction, the min and max sums the range.  Efficiency is ``flops / (time * peak)``, with ``peak``
    the GFLOP/s of a large DGEMM on this key measured once (:func:`tileblas.perf.measure_peak`, stored in
    the repository as property ``peak_gflops``); without it, efficiency is reported relative to 1 GFLOP/s.

    Ranking variants and choosing block sizes only evaluates models; nothing is executed.  Building the
    models a set of traces needs, and measuring algorithms, is the measuring side's
    (:mod:`tileblas.perf._predictor`).

What it must not touch
    Timing of algorithms, sampling and model building.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from tileblas.policy._calls import Call
from tileblas.policy._repository import ModelKey, Repository, current_key
from tileblas.policy._variants import algorithm_spec

__all__ = [
    "Prediction",
    "Predictor",
    "MissingModelError",
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
        Default: the repository at :func:`~tileblas.perf.default_path`.
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
        alg = algorithm_spec(algorithm)
        p = self.predict_calls(alg.trace(n, variant, block), alg.flops(n))
        p.label = {"algorithm": algorithm, "n": n, "variant": variant, "block": block}
        return p

    def rank(self, algorithm: str, n: int, block: int, variants: Sequence[int] | None = None) -> list[Prediction]:
        """Variants sorted fastest first by predicted median time."""
        alg = algorithm_spec(algorithm)
        preds = [self.predict(algorithm, n, v, block) for v in (variants or alg.variants)]
        return sorted(preds, key=lambda p: p.time["median"])

    def best_block(self, algorithm: str, n: int, variant: int, blocks: Iterable[int]) -> tuple[int, list[Prediction]]:
        """The block size with the least predicted median time, and every prediction."""
        preds = [self.predict(algorithm, n, variant, int(b)) for b in blocks]
        if not preds:
            raise ValueError("blocks must not be empty")
        best = min(preds, key=lambda p: p.time["median"])
        return int(best.label["block"]), preds
