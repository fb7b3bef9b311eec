"""Where tileblas.blas sends Level-3 work.

``level3(name, *args, **kwargs)`` takes a routine name (gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm,
trsm) and the arguments of the matching array-level kernel in :mod:`tileblas._kernels`, already checked
and converted by the caller, and computes in place.  It is the one seam between the drop-in API and the
execution engine: today it calls the kernel layer directly; the tile runtime replaces the body with a
submission to the current Runtime.
"""

from __future__ import annotations

from typing import Any

from tileblas import _kernels

__all__ = ["level3"]


def level3(name: str, *args: Any, **kwargs: Any) -> None:
    """Compute the Level-3 routine ``name`` in place (see module docstring)."""
    getattr(_kernels, name)(*args, **kwargs)
