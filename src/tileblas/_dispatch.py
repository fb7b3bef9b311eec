"""Where tileblas.blas sends Level-3 work.

``level3(name, *args, **kwargs)`` takes a routine name (gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm,
trsm) and the arguments of the matching array-level kernel in :mod:`tileblas._kernels`, already checked
and converted by the caller, and computes in place on the *current runtime*
(:func:`tileblas.runtime.get_runtime`: the innermost ``with tileblas.Runtime(...)`` of this context, else
the process default).  It is the one seam between the drop-in API and the execution engine.  The runtime
module is imported on the first call, so importing tileblas.blas stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["level3"]


def level3(name: str, *args: Any, **kwargs: Any) -> None:
    """Compute the Level-3 routine ``name`` in place on the current runtime (see module docstring)."""
    from tileblas.runtime._runtime import get_runtime

    get_runtime().run(name, *args, **kwargs)
