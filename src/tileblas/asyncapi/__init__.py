"""tileblas.asyncapi -- the asynchronous API: matrix handles, futures, backend choice by cost, Matrix.

Implements "An Asynchronous API for Numerical Linear Algebra" (Brodtkorb, 2008) on tileblas' devices and
tile runtime.  Every BLAS call on handles returns a future at once; calls on the same handles are ordered
by their read/write dependencies, independent calls run in parallel on the backends (one per device).

>>> import numpy as np
>>> from tileblas import asyncapi as aa
>>> a = aa.handle(np.random.rand(300, 300)); b = aa.handle(np.random.rand(300, 300))
>>> c = aa.empty((300, 300))
>>> f = aa.gemm(1.0, a, b, 0.0, c)        # returns at once
>>> g = aa.syrk(1.0, c, 0.0, aa.empty((300, 300)))   # waits for f's result, automatically
>>> out = g.result().get()
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tileblas.asyncapi._calls import (
    axpy, copy, dot, dotc, gemm, gemv, ger, gerc, hemm, her2k, herk, nrm2, scal, symm, syr2k, syrk, trmm,
    trsm, trsv,
)
from tileblas.asyncapi._calls12 import (
    asum, gbmv, geru, hbmv, hemv, her, her2, hpmv, hpr, hpr2, iamax, rot, rotm, sbmv, spmv, spr, spr2, swap, symv,
    syr, syr2, tbmv, tbsv, tpmv, tpsv, trmv,
)
from tileblas.asyncapi._executor import Backend, Executor, get_executor, set_executor
from tileblas.asyncapi._futures import AsyncFuture, DependencyError, ForkedError
from tileblas.asyncapi._handles import MatrixHandle
from tileblas.asyncapi._matrix import Matrix
from tileblas.asyncapi._policies import CostPolicy, DemandPolicy

__all__ = [
    "Matrix", "MatrixHandle", "AsyncFuture", "DependencyError", "ForkedError",
    "Executor", "Backend", "CostPolicy", "DemandPolicy", "get_executor", "set_executor", "handle", "empty",
    "gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm",
    "gemv", "ger", "gerc", "trsv", "axpy", "scal", "copy", "dot", "dotc", "nrm2",
    "swap", "asum", "iamax", "rot", "rotm",
    "symv", "hemv", "gbmv", "sbmv", "hbmv", "spmv", "hpmv", "trmv", "tbmv", "tbsv", "tpmv", "tpsv",
    "geru", "syr", "her", "syr2", "her2", "spr", "hpr", "spr2", "hpr2",
]


def handle(data: Any, *, copy: bool = True, upload: bool = True, executor: Executor | None = None) -> MatrixHandle:
    """A handle on a host array on the default (or given) executor; see :meth:`Executor.handle`."""
    return (executor or get_executor()).handle(data, copy=copy, upload=upload)


def empty(shape: Any, dtype: Any = np.float64, *, executor: Executor | None = None) -> MatrixHandle:
    """An output handle (no data until written); see :meth:`Executor.empty`."""
    return (executor or get_executor()).empty(shape, dtype)


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)
