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
  stop size, block size) from stored models; it returns None when this machine has no usable model, and
  the caller then applies its documented heuristic (``Runtime`` -> ``runtime._planner.default_tile_size``,
  recursive TRSM/TRMM -> ``kernels._recursive.default_stop``).  ``tileblas tune`` builds the models it reads.

This package is the measuring side (sampling, fitting, timing algorithms, tuning the path policy, plots).
What the runtime reads -- the stored models and their evaluation (:class:`Submodel`, :class:`Region`), the
repository, the traces of the algorithms' variants, the predictor and :func:`suggest` -- lives in
:mod:`tileblas.policy` (``_models``, ``_repository``, ``_calls``, ``_variants``, ``_predictor``,
``_suggest``), below the runtime, and is re-exported here under the same names.

Attributes are imported on first use (PEP 562), so ``from tileblas.perf import suggest`` loads only the
standard library besides :mod:`tileblas.policy._suggest`; matplotlib and tqdm are imported by the functions
that use them.
"""

from __future__ import annotations

import importlib
from typing import Any

from tileblas.policy._suggest import suggest

# where each public name lives: the measuring side here, the read side in tileblas.policy
_WHERE = {
    "tileblas.perf._algorithms": ("ALGORITHMS", "sylvester", "trinv"),
    "tileblas.perf._modeler": ("Modeler", "build_submodel", "least_disturbed", "validate"),
    "tileblas.perf._predictor": ("build_models_for", "measure_peak"),
    "tileblas.perf._sampler": ("Sampler", "Timing", "time_callable"),
    "tileblas.perf._runner": ("CallRunner", "Executor", "SylvesterError"),
    "tileblas.policy._calls": ("ROUTINES", "Call", "Tracer"),
    "tileblas.policy._models": ("Region", "Submodel"),
    "tileblas.policy._paths": ("default_path",),
    "tileblas.policy._predictor": ("MissingModelError", "Prediction", "Predictor"),
    "tileblas.policy._repository": ("ModelKey", "ReadOnlyRepositoryError", "Repository", "RepositoryError",
                                    "current_key"),
    "tileblas.policy._variants": ("SYLVESTER_VARIANTS", "TRINV_VARIANTS", "sylvester_invariant", "trace_sylvester",
                                  "trace_trinv"),
}
_ATTR = {name: mod for mod, names in _WHERE.items() for name in names}


def __getattr__(name: str) -> Any:
    mod = _ATTR.get(name)
    if mod is None:
        raise AttributeError(f"module 'tileblas.perf' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)


__all__ = [
    "ALGORITHMS",
    "Call",
    "CallRunner",
    "MissingModelError",
    "ModelKey",
    "Modeler",
    "Prediction",
    "Predictor",
    "ROUTINES",
    "Region",
    "Repository",
    "RepositoryError",
    "ReadOnlyRepositoryError",
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
    "least_disturbed",
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
