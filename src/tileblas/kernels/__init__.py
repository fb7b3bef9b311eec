"""Public face of the kernel layer: native BLAS without the GIL on tileblas' own OpenBLAS.

See :mod:`tileblas.kernels._openblas` for the design.  Typical use::

    from tileblas import kernels
    kernels.gemm(1.0, a, b, 0.0, c)               # c := a @ b, in place, GIL released
    kernels.gemm(1.0, a, b, 0.0, c, lib=kernels.get_library(2))   # on 2 BLAS threads
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "BlasLibrary",
    "get_library",
    "library_path",
    "gemm",
    "symm",
    "hemm",
    "syrk",
    "herk",
    "syr2k",
    "her2k",
    "trmm",
    "trsm",
]


# Resolved on first use: importing this package (as ``import tileblas`` does for the thread controller in
# kernels/_threadpool.py) must not load NumPy or OpenBLAS.
def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module("tileblas.kernels._openblas"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tileblas.kernels' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
