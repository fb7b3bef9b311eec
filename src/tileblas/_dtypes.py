"""The one table of BLAS precisions: prefix letters, their dtypes, real counterparts and native scalar codes;
and the largest value of a BLAS integer.

What it must not touch: anything of tileblas (it is the lowest module; everything that maps a prefix to a
dtype, or back, reads it from here).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PREFIXES", "DTYPE_OF", "PREFIX_OF", "REAL_DTYPE_OF", "SCALAR_CODE", "REAL_CODE", "BLAS_INT_MAX", "BLAS_INT64_MAX"]

#: The four BLAS precisions, in BLAS order.
PREFIXES = ("s", "d", "c", "z")
#: dtype of each precision prefix.
DTYPE_OF: dict[str, np.dtype] = {"s": np.dtype(np.float32), "d": np.dtype(np.float64),
                                 "c": np.dtype(np.complex64), "z": np.dtype(np.complex128)}
#: precision prefix of each supported dtype.
PREFIX_OF: dict[np.dtype, str] = {dt: p for p, dt in DTYPE_OF.items()}
#: real dtype that goes with each precision (the type of norms, cosines, Hermitian scalars).
REAL_DTYPE_OF: dict[str, np.dtype] = {"s": DTYPE_OF["s"], "d": DTYPE_OF["d"], "c": DTYPE_OF["s"], "z": DTYPE_OF["d"]}
#: signature code of a scalar of each precision for :func:`tileblas.kernels._native.call`, and of its
#: real counterpart.
SCALAR_CODE: dict[str, str] = {"s": "f", "d": "d", "c": "C", "z": "Z"}
REAL_CODE: dict[str, str] = {"s": "f", "d": "d", "c": "f", "z": "d"}
#: the largest dimension, increment or leading dimension a (32-bit, LP64) BLAS integer holds.
BLAS_INT_MAX = 2**31 - 1
#: the same for a 64-bit (ILP64) BLAS integer (scipy-openblas64).
BLAS_INT64_MAX = 2**63 - 1
