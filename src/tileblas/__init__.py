"""tileblas: every device of a machine, and the workers of a cluster, working together on BLAS.

Submodules are imported on first use so that ``import tileblas`` stays fast and imports nothing optional:

* :mod:`tileblas.blas` -- drop-in replacement for :mod:`scipy.linalg.blas`
* :mod:`tileblas.devices` -- the Device interface: host CPU, simulated discrete-memory devices, GPUs,
  Dask workers
* :mod:`tileblas.kernels` -- the GIL-free native BLAS kernel layer
* :mod:`tileblas.runtime` -- the tile runtime (:class:`Runtime`); on a Dask cluster
  :class:`~tileblas.runtime.ClusterRuntime`
* :mod:`tileblas.asyncapi` -- handles, futures and :class:`Matrix` (asynchronous API)
* :mod:`tileblas.linalg` -- recursive TRMM/TRSM, Cholesky solve and inverse
* :mod:`tileblas.rblas` -- reversible BLAS
* :mod:`tileblas.perf` -- performance models, prediction and tuning
* :class:`Tuning`, :func:`get_tuning`, :func:`set_tuning` -- the tunables, in one config object
"""

from __future__ import annotations

import importlib
from typing import Any

from tileblas._version import __version__

_SUBMODULES = {"blas", "devices", "kernels", "runtime", "asyncapi", "linalg", "rblas", "perf", "cli"}

# Public names that live in submodules, resolved lazily: name -> module.
_LAZY: dict[str, str] = {
    "Matrix": "tileblas.asyncapi",
    "MatrixHandle": "tileblas.asyncapi",
    "Runtime": "tileblas.runtime", "get_runtime": "tileblas.runtime", "set_runtime": "tileblas.runtime",
    "Tuning": "tileblas._tuning", "get_tuning": "tileblas._tuning", "set_tuning": "tileblas._tuning",
}

__all__ = ["__version__", *sorted(_SUBMODULES), *sorted(_LAZY)]

# threadpoolctl sees and limits tileblas' OpenBLAS (registered once threadpoolctl is imported; never imports it).
from tileblas.kernels import _threadpool

_threadpool.install()


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"tileblas.{name}")
    mod = _LAZY.get(name)
    if mod is not None:
        return getattr(importlib.import_module(mod), name)
    raise AttributeError(f"module 'tileblas' has no attribute {name!r}")


def __dir__() -> list[str]:  # the API only (not the helpers imported above)
    return sorted(__all__)
