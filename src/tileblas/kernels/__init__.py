"""Public face of the kernel layer: native BLAS without the GIL on tileblas' own OpenBLAS.

See :mod:`tileblas.kernels._openblas` for the design.  Typical use::

    from tileblas import kernels
    kernels.gemm(1.0, a, b, 0.0, c)               # c := a @ b, in place, GIL released
    kernels.gemm(1.0, a, b, 0.0, c, lib=kernels.get_library(2))   # on 2 BLAS threads
"""

from tileblas.kernels._openblas import (
    BlasLibrary,
    gemm,
    get_library,
    hemm,
    her2k,
    herk,
    library_path,
    symm,
    syr2k,
    syrk,
    trmm,
    trsm,
)

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
