"""tileblas.perf: statistical performance models of BLAS calls, and what they are used for.

Implements Peise & Bientinesi, "Performance Modeling for Dense Linear Algebra":

* :class:`Sampler` -- repeated timings of a routine for an argument tuple, in or out of cache (section II);
* :func:`build_submodel` / :class:`Modeler` -- piecewise multivariate polynomial models by Model Expansion
  or Adaptive Refinement, validated on fresh points (section III);
* :class:`Repository` -- the SQLite file the models live in, keyed by machine, library, threads, device
  and locality;
* :class:`Predictor` -- predictions of traced algorithms (:func:`trinv`, :func:`sylvester` and their
  variants), ranking of variants and block-size choice without running them (section IV);
* :func:`suggest` -- the narrow hook through which the runtime reads tuning values (tile size, recursion
  stop size, block size) from stored models; it returns None when no model is stored.

Nothing optional is imported here: matplotlib and tqdm are imported by the functions that use them.
"""

from __future__ import annotations

from tileblas.perf._algorithms import (
    ALGORITHMS,
    SYLVESTER_VARIANTS,
    TRINV_VARIANTS,
    sylvester,
    sylvester_invariant,
    trace_sylvester,
    trace_trinv,
    trinv,
)
from tileblas.perf._modeler import Modeler, Region, Submodel, build_submodel, validate
from tileblas.perf._predictor import (
    MissingModelError,
    Prediction,
    Predictor,
    build_models_for,
    measure_peak,
    suggest,
)
from tileblas.perf._repository import ModelKey, Repository, RepositoryError, current_key, default_path
from tileblas.perf._sampler import Sampler, Timing, time_callable
from tileblas.perf._trace import ROUTINES, Call, Executor, SylvesterError, Tracer

__all__ = [
    "ALGORITHMS",
    "Call",
    "Executor",
    "MissingModelError",
    "ModelKey",
    "Modeler",
    "Prediction",
    "Predictor",
    "ROUTINES",
    "Region",
    "Repository",
    "RepositoryError",
    "SYLVESTER_VARIANTS",
    "Sampler",
    "Submodel",
    "SylvesterError",
    "TRINV_VARIANTS",
    "Timing",
    "Tracer",
    "build_models_for",
    "build_submodel",
    "current_key",
    "default_path",
    "measure_peak",
    "suggest",
    "sylvester",
    "sylvester_invariant",
    "time_callable",
    "trace_sylvester",
    "trace_trinv",
    "trinv",
    "validate",
]
