"""Building and measuring for the Predictor: the models a set of traces needs, the peak rate, algorithm timings.

Design note
    The :class:`~tileblas.policy._predictor.Predictor` (paper section IV) evaluates stored models over an
    algorithm's trace; it lives, with :class:`~tileblas.policy._predictor.Prediction` and
    :class:`~tileblas.policy._predictor.MissingModelError`, in :mod:`tileblas.policy._predictor` (re-exported
    here), because the runtime reads models through it.  This module measures: :func:`build_models_for`
    builds exactly the submodels a set of traces needs (used by ``tileblas tune``), :func:`measure_peak`
    the GFLOP/s of a large DGEMM that efficiencies are relative to, :func:`measure_algorithm` one
    algorithm execution (the benchmark and the CLI measure, for comparison only).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from tileblas.perf._algorithms import get_algorithm
from tileblas.policy._calls import Call, routine_spec
from tileblas.policy._predictor import MissingModelError, Prediction, Predictor
from tileblas.policy._repository import ModelKey, Repository

__all__ = [
    "Prediction",
    "Predictor",
    "MissingModelError",
    "measure_peak",
    "build_models_for",
    "needed_models",
    "measure_algorithm",
]


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
    :func:`~tileblas.perf.build_submodel`).  Returns the new submodels.
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
