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
    if name in _COMPILED:  # ``from tileblas.kernels import _native``: not imported yet, or never built
        from importlib.util import find_spec

        if find_spec(f"tileblas.kernels.{name}") is None:
            raise ImportError(_not_built(f"tileblas.kernels.{name}"), name=f"tileblas.kernels.{name}")
    raise AttributeError(f"module 'tileblas.kernels' has no attribute {name!r}")


#: The compiled modules of tileblas (setup.py builds them), by the package they live in.
_COMPILED = ("_native", "_pool")
_EXTENSIONS = ("tileblas.kernels._native", "tileblas.kernels._pool", "tileblas.blas._fastpath",
               "tileblas.rblas._guard")


def _not_built(module: str) -> str:
    """One message for a compiled module that is not there: what is missing, where, and how to build it."""
    import os
    from importlib.util import find_spec

    missing = [m for m in _EXTENSIONS if find_spec(m) is None]
    where = os.path.dirname(os.path.dirname(__file__))
    return (f"{module} is not built: tileblas needs its compiled C modules and {where} lacks "
            f"{', '.join(missing) or module}.  Build them in the source tree with `pip install -e .` (or "
            f"`make install`; a C compiler and NumPy's headers are needed), or install a built wheel.")


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)
