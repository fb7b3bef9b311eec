"""The executing side of the "BLAS calls" interface: :class:`CallRunner` runs an algorithm's calls on OpenBLAS.

Design note
    Algorithms (:mod:`tileblas.policy._variants`) are written against
    :class:`~tileblas.policy._calls.BlasCalls`; with a :class:`~tileblas.policy._calls.Tracer` they only
    record their calls (what the predictor evaluates), with an :class:`CallRunner` they compute: each call
    runs on tileblas' own OpenBLAS (through :mod:`tileblas.kernels._openblas` and ``BlasLibrary.call`` for
    the LAPACK leaves).  Calls with an empty operand are dropped, as the tracer drops them.  The sampler
    times exactly :class:`CallRunner`'s methods, so models include the same call overhead as an execution.

    The descriptions (:class:`~tileblas.policy._calls.Call`, :data:`~tileblas.policy._calls.ROUTINES`,
    the tracer) live in :mod:`tileblas.policy._calls` and are re-exported here.

What it must not touch
    Scheduling and user-input validation: inputs here are trusted (the public algorithm functions check).
"""

from __future__ import annotations

import numpy as np

from tileblas.policy._calls import (
    ROUTINES,
    BlasCalls,
    Call,
    RoutineSpec,
    Tracer,
    describe_calls,
    phantom,
    routine_spec,
)

__all__ = [
    "Call",
    "RoutineSpec",
    "ROUTINES",
    "BlasCalls",
    "CallRunner",
    "Tracer",
    "phantom",
    "SylvesterError",
    "routine_spec",
    "describe_calls",
]


class SylvesterError(np.linalg.LinAlgError):
    """The Sylvester equation is (numerically) singular: some L[i, i] + U[j, j] is (close to) zero."""


def _empty(*arrays: np.ndarray) -> bool:
    return any(a.size == 0 for a in arrays)


class CallRunner(BlasCalls):
    """Runs every call on a tileblas-owned OpenBLAS instance with ``threads`` threads."""

    def __init__(self, threads: int = 1) -> None:
        from tileblas.kernels import _openblas

        self._k = _openblas
        self.lib = _openblas.get_library(threads)
        self._scale = np.empty(1, dtype=np.float64)
        self._info = np.empty(1, dtype=np.int32)

    def gemm(self, transa, transb, alpha, a, b, beta, c):
        if c.size == 0:
            return
        self._k.gemm(alpha, a, b, beta, c, transa, transb, lib=self.lib)

    def trsm(self, side, uplo, transa, diag, alpha, a, b):
        if b.size == 0:
            return
        self._k.trsm(alpha, a, b, side, uplo, transa, diag, lib=self.lib)

    def trmm(self, side, uplo, transa, diag, alpha, a, b):
        if b.size == 0:
            return
        self._k.trmm(alpha, a, b, side, uplo, transa, diag, lib=self.lib)

    def syrk(self, uplo, trans, alpha, a, beta, c):
        if c.size == 0:
            return
        self._k.syrk(alpha, a, beta, c, uplo, trans, lib=self.lib)

    def trti2(self, uplo, diag, a):
        n = a.shape[0]
        if n == 0:
            return
        ld = self._k.colmajor(a)
        info = self._info
        self.lib.call("dtrti2", "vcciaia", uplo, diag, n, a, ld, info)
        if info[0] > 0:
            raise np.linalg.LinAlgError(
                f"triangular matrix is singular: diagonal element {int(info[0])} is exactly zero"
            )

    def trsyl(self, l, u, x):
        m, n = x.shape
        if m == 0 or n == 0:
            return
        # dtrsyl solves op(A) X + X op(B) = scale*C with A upper (quasi-)triangular: op(A) = A^T, A = l^T.
        at = np.asfortranarray(l.T)
        ld_u = self._k.colmajor(u)
        if not ld_u:
            u = np.asfortranarray(u)
            ld_u = max(1, u.shape[0])
        ldx = self._k.colmajor(x)
        xx = x if ldx else np.asfortranarray(x)
        ldx = ldx or max(1, m)
        scale, info = self._scale, self._info
        self.lib.call("dtrsyl", "vcciiiaiaiaiaa", "T", "N", 1, m, n, at, max(1, m), u, ld_u, xx, ldx,
                      scale, info)
        if info[0] == 1:
            raise SylvesterError("L and -U have common or close eigenvalues: the Sylvester equation is singular")
        if scale[0] != 1.0:
            xx /= scale[0]
        if xx is not x:
            x[...] = xx


#: The former name of :class:`CallRunner`, kept working (``tileblas.asyncapi.Executor`` is unrelated).
Executor = CallRunner
