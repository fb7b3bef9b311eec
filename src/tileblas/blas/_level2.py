"""Level-2 routines of tileblas.blas: a drop-in for the Level-2 part of :mod:`scipy.linalg.blas`.

What this module owns
    gemv, gbmv, symv, hemv, sbmv, hbmv, spmv, hpmv, trmv, tbmv, tpmv, trsv, tbsv, tpsv, ger, geru, gerc,
    syr, her, syr2, her2, spr, hpr, spr2, hpr2, in every precision SciPy exposes (including the
    complex-symmetric cspmv/zspmv, csyr/zsyr, cspr/zspr), with SciPy's names, signatures, defaults,
    return values and ``overwrite_*`` semantics.  One factory per family builds the s/d/c/z routines;
    native addresses are bound at import.

Behaviour found by probing SciPy 1.17 (and reproduced here)
    * ``y`` (gemv, symv, ...) and ``x`` (trmv, trsv, ...) are copied unless ``overwrite_y`` /
      ``overwrite_x`` is true and the array is Fortran-contiguous of the routine's dtype; then the same
      object is returned.  ``y=None`` gives zeros of length ``1 + offy + (rows-1)*|incy|`` (so ``offy``
      and ``incy`` shape the result).  A longer ``y`` is allowed and returned whole.
    * ger/geru/gerc take ``incx``/``incy`` in {1, -1} only; ``a=None`` means zeros; the result is a
      Fortran-ordered ``(len(x), len(y))`` array (``a`` is reused only with ``overwrite_a=1``).
    * syr/her/syr2/her2 default ``n`` to ``(len(x)-1-offx)//|incx| + 1`` (the smaller of x's and y's for
      syr2/her2), require ``0 <= n <=`` that value, and return a Fortran ``(n, n)`` array; her's
      ``alpha`` is documented complex but only its real part reaches BLAS.
    * Packed routines need ``len(ap) >= n*(n+1)/2``; banded routines need ``0 <= k <= a.shape[0]-1``
      (gbmv: ``n == a.shape[1]`` and SciPy's ``m >= kl+ku+1``).
    * ``trans`` in {0, 1, 2} (2 = conjugate transpose), ``lower`` and ``diag`` in {0, 1}.

Deliberate differences (stricter where SciPy would let BLAS read out of bounds or print an error)
    * trsv, tbmv, tbsv, tpmv, tpsv reject ``trans`` outside {0, 1, 2} (SciPy's check there is always
      true and maps any other value to 'T').
    * gbmv also requires ``a.shape[0] >= kl + ku + 1`` (SciPy lets BLAS print an error and returns
      garbage).

Outputs that share memory with inputs
    An output written in place (``y``, ``x`` of the triangular routines, ``a``, ``ap``) that shares memory
    with an input (``x`` a column of ``a``) has the input read from a copy
    (:func:`tileblas.blas._common.unalias`): the result is the one separate operands give, where SciPy's
    depends on BLAS's loop order (dtrmv, upper, ``x = a[:, 2]``: max error 3.4 at order 5).

Layout
    Matrices are read in place when they are column-major with any leading dimension (Fortran order or
    strided views of it); a C-ordered matrix is read as its transpose with the flag flipped (gemv,
    trmv, trsv, and real symv) and copied only where no flag can describe it (conjugate transposes,
    hemv, banded storage).

What it must not touch
    Level-1/3 routines and get_blas_funcs; the kernel layer's shared state.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tileblas.kernels import _native
from tileblas.blas._common import (
    DTYPE,
    REAL_CODE,
    SCALAR_CODE,
    as_flag,
    as_inout,
    as_inout_matrix,
    as_int,
    as_matrix,
    as_real,
    as_scalar,
    as_vector,
    check_inc,
    check_off,
    check_span,
    column_major,
    default_len_rot,
    front,
    small_path,
    unalias,
)
from tileblas.kernels._openblas import get_library
from tileblas.kernels._threadpool import default_threads

_call = _native.call
# The instance on all the cores (as SciPy's OpenBLAS): OpenBLAS itself runs a call on one thread below its
# own size thresholds, so small calls cost the same, and large (memory-bound) ones get every core's
# bandwidth; threadpoolctl's limits reach it like every tileblas instance.
_LIB = get_library(default_threads())
_TRANS = "NTC"


def _fortran(name: str) -> int:
    return _LIB.fortran(name)


def _name(fn: Callable[..., Any], name: str, sig: str, summary: str) -> Callable[..., Any]:
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__module__ = "tileblas.blas"
    fn.__doc__ = (
        f"{summary}\n\nParameters follow :func:`scipy.linalg.blas.{name}` exactly (same positional order, "
        f"keywords and defaults); see its documentation.  Computed by tileblas' own OpenBLAS without "
        f"holding the GIL.\n\nSignature: ``{sig}``\n"
    )
    return fn


# ---------------------------------------------------------------------------------------------------
# shared pieces
# ---------------------------------------------------------------------------------------------------


def _x_in(dt: np.dtype, x: Any, offx: Any, incx: Any, count: int, name: str = "x") -> tuple[np.ndarray, int, int]:
    """A read-only vector that must hold ``count`` elements from ``offx`` at stride ``incx``."""
    xf = as_vector(x, dt, name)
    incx = check_inc(incx, "inc" + name)
    offx = check_off(offx, xf.shape[0], "off" + name, name)
    check_span(count, xf.shape[0], offx, incx, name)
    return xf, offx, incx


def _y_out(
    dt: np.dtype, y: Any, offy: Any, incy: Any, count: int, overwrite: Any, name: str = "y"
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """An ``intent(in,copy,out)`` result vector; ``None`` makes zeros just long enough."""
    incy = check_inc(incy, "inc" + name)
    offy_i = as_int(offy, "off" + name, 0)
    if y is None:
        ly = 1 + offy_i + (count - 1) * abs(incy)
        yr = yf = np.zeros(max(ly, 0), dtype=dt)
    else:
        yr, yf = as_inout(y, dt, name, overwrite)
    offy_i = check_off(offy_i, yf.shape[0], "off" + name, name)
    check_span(count, yf.shape[0], offy_i, incy, name)
    return yr, yf, offy_i, incy


def _square(a: np.ndarray, name: str = "a") -> int:
    m, n = a.shape
    if m != n:
        raise ValueError(f"{name} must be square; got {name} of shape {a.shape}")
    return n


def _packed(dt: np.dtype, ap: Any, n: int, name: str = "ap") -> np.ndarray:
    apf = as_vector(ap, dt, name)
    if apf.shape[0] < n * (n + 1) // 2:
        raise ValueError(f"len({name}) must be >= n*(n+1)/2 = {n * (n + 1) // 2}; got len({name}) = {apf.shape[0]}")
    return apf


def _band(a: np.ndarray, k: int, name: str = "k") -> tuple[np.ndarray, int, int]:
    """Band storage ``a`` (lda x n) for ``k`` off-diagonals: (array, ld, n)."""
    lda = max(a.shape[0], 1)
    if k < 0 or k > lda - 1:
        raise ValueError(f"{name} must satisfy 0 <= {name} <= a.shape[0]-1 = {lda - 1}; got {name}={k}")
    arr, ld = column_major(a)
    return arr, ld, a.shape[1]


def _nonneg(v: Any, name: str) -> int:
    k = as_int(v, name)
    if k < 0:
        raise ValueError(f"{name} must be >= 0; got {name}={k}")
    return k


def _flags3(lower: Any, trans: Any, diag: Any) -> tuple[int, int, int]:
    return as_flag(lower, "lower", (0, 1)), as_flag(trans, "trans", (0, 1, 2)), as_flag(diag, "diag", (0, 1))


# ---------------------------------------------------------------------------------------------------
# matrix-vector products
# ---------------------------------------------------------------------------------------------------


def _make_gemv(p: str) -> Callable[..., Any]:
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(p + "gemv")
    s = SCALAR_CODE[p]
    sig = "vcii" + s + "aiAi" + s + "Ai"
    fast_sig = "vcii" + s + "aiai" + s + "ai"
    real = p in "sd"
    small = small_path("gemv", p, addr)

    def gemv(
        alpha: Any,
        a: Any,
        x: Any,
        beta: Any = 0.0,
        y: Any = None,
        offx: Any = 0,
        incx: Any = 1,
        offy: Any = 0,
        incy: Any = 1,
        trans: Any = 0,
        overwrite_y: Any = 0,
    ) -> np.ndarray:
        if y is None and offx == 0 == offy and incx == 1 == incy and (trans == 0 or trans == 1):
            # fast path: exact-dtype 2-D a in either memory order, contiguous x, fresh y
            try:
                if a.dtype is dt is x.dtype and a.ndim == 2 and ((x.base is None and x.ndim == 1) or x.flags.f_contiguous):
                    m, n = a.shape
                    rows, cols = (n, m) if trans else (m, n)
                    if rows and x.size >= max(cols, 1):
                        fa = a.flags
                        if fa.f_contiguous:
                            M, N, arr, t = m, n, a, ("T" if trans else "N")
                        elif fa.c_contiguous:
                            M, N, arr, t = n, m, a.T, ("N" if trans else "T")
                        else:
                            M = 0
                        if M:
                            out = np.zeros(rows, dtype=dt)
                            _call(addr, fast_sig, t, M, N, alpha, arr, M, x, 1, beta, out, 1)
                            return out
            except (AttributeError, TypeError, OverflowError):  # not arrays, or scalars need conversion: nothing was called
                pass
        alpha = as_scalar(p, alpha, "alpha")
        beta = as_scalar(p, beta, "beta", 0.0)
        A = as_matrix(a, dt, "a")
        trans = as_flag(trans, "trans", (0, 1, 2))
        m, n = A.shape
        rows, cols = (n, m) if trans else (m, n)
        xf, offx, incx = _x_in(dt, x, offx, incx, cols)
        yr, yf, offy, incy = _y_out(dt, y, offy, incy, rows, overwrite_y)
        A, xf = unalias(yf, A, xf)
        t = _TRANS[trans]
        if A.flags.c_contiguous and not A.flags.f_contiguous and (real or trans < 2):
            arr, lda, M, N, t = A.T, max(n, 1), n, m, ("N" if trans else "T")
        else:
            arr, lda = column_major(A)
            M, N = m, n
        _call(addr, sig, t, M, N, alpha, arr, lda, xf, offx * it, incx, beta, yf, offy * it, incy)
        return yr

    return front(small, _name(gemv, p + "gemv",
                              f"y = {p}gemv(alpha, a, x, [beta, y, offx, incx, offy, incy, trans, overwrite_y])",
                              "y <- alpha*op(A)*x + beta*y."))


def _make_gbmv(p: str) -> Callable[..., Any]:
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(p + "gbmv")
    s = SCALAR_CODE[p]
    sig = "vciiii" + s + "aiAi" + s + "Ai"
    small = small_path("gbmv", p, addr)

    def gbmv(
        m: Any,
        n: Any,
        kl: Any,
        ku: Any,
        alpha: Any,
        a: Any,
        x: Any,
        incx: Any = 1,
        offx: Any = 0,
        beta: Any = 0.0,
        y: Any = None,
        incy: Any = 1,
        offy: Any = 0,
        trans: Any = 0,
        overwrite_y: Any = 0,
    ) -> np.ndarray:
        alpha = as_scalar(p, alpha, "alpha")
        beta = as_scalar(p, beta, "beta", 0.0)
        A = as_matrix(a, dt, "a")
        trans = as_flag(trans, "trans", (0, 1, 2))
        kl = _nonneg(kl, "kl")
        ku = _nonneg(ku, "ku")
        m = as_int(m, "m")
        n = as_int(n, "n")
        if m < kl + ku + 1:
            raise ValueError(f"m must be >= kl+ku+1 = {kl + ku + 1} (as SciPy requires); got m={m}")
        if n < 0 or n != A.shape[1]:
            raise ValueError(f"n must equal a.shape[1] = {A.shape[1]}; got n={n}")
        if A.shape[0] < kl + ku + 1:
            raise ValueError(f"a must have at least kl+ku+1 = {kl + ku + 1} rows; got a of shape {A.shape}")
        rows, cols = (n, m) if trans else (m, n)
        xf, offx, incx = _x_in(dt, x, offx, incx, cols)
        yr, yf, offy, incy = _y_out(dt, y, offy, incy, rows, overwrite_y)
        A, xf = unalias(yf, A, xf)
        arr, lda = column_major(A)
        _call(addr, sig, _TRANS[trans], m, n, kl, ku, alpha, arr, lda, xf, offx * it, incx, beta, yf,
              offy * it, incy)
        return yr

    return front(small, _name(
        gbmv,
        p + "gbmv",
        f"yout = {p}gbmv(m, n, kl, ku, alpha, a, x, [incx, offx, beta, y, incy, offy, trans, overwrite_y])",
        "y <- alpha*op(A)*x + beta*y with A banded (kl sub-, ku super-diagonals).",
    ))


def _make_symv(p: str, name: str) -> Callable[..., Any]:
    """symv (s, d) and hemv (c, z)."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    s = SCALAR_CODE[p]
    sig = "vci" + s + "aiAi" + s + "Ai"
    real = p in "sd"
    small = small_path(name[1:], p, addr)

    def symv(
        alpha: Any,
        a: Any,
        x: Any,
        beta: Any = 0.0,
        y: Any = None,
        offx: Any = 0,
        incx: Any = 1,
        offy: Any = 0,
        incy: Any = 1,
        lower: Any = 0,
        overwrite_y: Any = 0,
    ) -> np.ndarray:
        alpha = as_scalar(p, alpha, "alpha")
        beta = as_scalar(p, beta, "beta", 0.0)
        A = as_matrix(a, dt, "a")
        n = _square(A)
        lower = as_flag(lower, "lower", (0, 1))
        xf, offx, incx = _x_in(dt, x, offx, incx, n)
        yr, yf, offy, incy = _y_out(dt, y, offy, incy, n, overwrite_y)
        A, xf = unalias(yf, A, xf)
        if real and A.flags.c_contiguous and not A.flags.f_contiguous:
            arr, lda, uplo = A.T, max(n, 1), ("U" if lower else "L")
        else:
            arr, lda = column_major(A)
            uplo = "L" if lower else "U"
        _call(addr, sig, uplo, n, alpha, arr, lda, xf, offx * it, incx, beta, yf, offy * it, incy)
        return yr

    kind = "symmetric" if real else "Hermitian"
    return front(small, _name(symv, name,
                              f"y = {name}(alpha, a, x, [beta, y, offx, incx, offy, incy, lower, overwrite_y])",
                              f"y <- alpha*A*x + beta*y with A {kind} (one triangle referenced)."))


def _make_sbmv(p: str, name: str) -> Callable[..., Any]:
    """sbmv (s, d) and hbmv (c, z)."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    s = SCALAR_CODE[p]
    sig = "vcii" + s + "aiAi" + s + "Ai"
    small = small_path(name[1:], p, addr)

    def sbmv(
        k: Any,
        alpha: Any,
        a: Any,
        x: Any,
        incx: Any = 1,
        offx: Any = 0,
        beta: Any = 0.0,
        y: Any = None,
        incy: Any = 1,
        offy: Any = 0,
        lower: Any = 0,
        overwrite_y: Any = 0,
    ) -> np.ndarray:
        alpha = as_scalar(p, alpha, "alpha")
        beta = as_scalar(p, beta, "beta", 0.0)
        A = as_matrix(a, dt, "a")
        lower = as_flag(lower, "lower", (0, 1))
        k = as_int(k, "k")
        arr, lda, n = _band(A, k)
        xf, offx, incx = _x_in(dt, x, offx, incx, n)
        yr, yf, offy, incy = _y_out(dt, y, offy, incy, n, overwrite_y)
        A2, xf = unalias(yf, A, xf)
        if A2 is not A:
            arr, lda, n = _band(A2, k)
        _call(addr, sig, "L" if lower else "U", n, k, alpha, arr, lda, xf, offx * it, incx, beta, yf,
              offy * it, incy)
        return yr

    return front(small, _name(sbmv, name,
                              f"yout = {name}(k, alpha, a, x, [incx, offx, beta, y, incy, offy, lower, overwrite_y])",
                              "y <- alpha*A*x + beta*y with A symmetric/Hermitian banded (k off-diagonals)."))


def _make_spmv(p: str, name: str) -> Callable[..., Any]:
    """spmv (s, d, c, z) and hpmv (c, z): packed storage."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    s = SCALAR_CODE[p]
    sig = "vci" + s + "aAi" + s + "Ai"
    small = small_path(name[1:], p, addr)

    def spmv(
        n: Any,
        alpha: Any,
        ap: Any,
        x: Any,
        incx: Any = 1,
        offx: Any = 0,
        beta: Any = 0.0,
        y: Any = None,
        incy: Any = 1,
        offy: Any = 0,
        lower: Any = 0,
        overwrite_y: Any = 0,
    ) -> np.ndarray:
        alpha = as_scalar(p, alpha, "alpha")
        beta = as_scalar(p, beta, "beta", 0.0)
        n = _nonneg(n, "n")
        lower = as_flag(lower, "lower", (0, 1))
        apf = _packed(dt, ap, n)
        xf, offx, incx = _x_in(dt, x, offx, incx, n)
        yr, yf, offy, incy = _y_out(dt, y, offy, incy, n, overwrite_y)
        apf, xf = unalias(yf, apf, xf)
        _call(addr, sig, "L" if lower else "U", n, alpha, apf, xf, offx * it, incx, beta, yf, offy * it, incy)
        return yr

    return front(small, _name(spmv, name,
                              f"yout = {name}(n, alpha, ap, x, [incx, offx, beta, y, incy, offy, lower, overwrite_y])",
                              "y <- alpha*A*x + beta*y with A symmetric/Hermitian in packed storage."))


# ---------------------------------------------------------------------------------------------------
# triangular products and solves
# ---------------------------------------------------------------------------------------------------


def _make_trmv(p: str, name: str) -> Callable[..., Any]:
    """trmv and trsv (full storage)."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    sig = "vccciaiAi"
    real = p in "sd"

    def run(a: Any, x: Any, offx: Any, incx: Any, lower: Any, trans: Any, diag: Any, overwrite_x: Any) -> np.ndarray:
        A = as_matrix(a, dt, "a")
        n = _square(A)
        lower, trans, diag = _flags3(lower, trans, diag)
        xr, xf = as_inout(x, dt, "x", overwrite_x)
        incx = check_inc(incx, "incx")
        offx = check_off(offx, xf.shape[0], "offx", "x")
        check_span(n, xf.shape[0], offx, incx, "x")
        (A,) = unalias(xf, A)  # x a column of a: BLAS would read a column it has written
        if A.flags.c_contiguous and not A.flags.f_contiguous and (real or trans < 2):
            arr, lda = A.T, max(n, 1)
            uplo, t = ("U" if lower else "L"), ("N" if trans else "T")
        else:
            arr, lda = column_major(A)
            uplo, t = ("L" if lower else "U"), _TRANS[trans]
        _call(addr, sig, uplo, t, "U" if diag else "N", n, arr, lda, xf, offx * it, incx)
        return xr

    small = small_path(name[1:], p, addr)

    if name.endswith("trmv"):

        def trmv(a: Any, x: Any, offx: Any = 0, incx: Any = 1, lower: Any = 0, trans: Any = 0, diag: Any = 0,
                 overwrite_x: Any = 0) -> np.ndarray:
            return run(a, x, offx, incx, lower, trans, diag, overwrite_x)

        return front(small, _name(trmv, name, f"x = {name}(a, x, [offx, incx, lower, trans, diag, overwrite_x])",
                                  "x <- op(A)*x with A triangular."))

    def trsv(a: Any, x: Any, incx: Any = 1, offx: Any = 0, lower: Any = 0, trans: Any = 0, diag: Any = 0,
             overwrite_x: Any = 0) -> np.ndarray:
        return run(a, x, offx, incx, lower, trans, diag, overwrite_x)

    return front(small, _name(trsv, name, f"xout = {name}(a, x, [incx, offx, lower, trans, diag, overwrite_x])",
                              "Solve op(A)*xout = x with A triangular (no singularity test, as in BLAS)."))


def _make_tbmv(p: str, name: str) -> Callable[..., Any]:
    """tbmv and tbsv (banded triangular)."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    sig = "vcccii" + "aiAi"
    small = small_path(name[1:], p, addr)

    def tbmv(k: Any, a: Any, x: Any, incx: Any = 1, offx: Any = 0, lower: Any = 0, trans: Any = 0, diag: Any = 0,
             overwrite_x: Any = 0) -> np.ndarray:
        A = as_matrix(a, dt, "a")
        lower, trans, diag = _flags3(lower, trans, diag)
        k = as_int(k, "k")
        arr, lda, n = _band(A, k)
        xr, xf = as_inout(x, dt, "x", overwrite_x)
        incx = check_inc(incx, "incx")
        offx = check_off(offx, xf.shape[0], "offx", "x")
        check_span(n, xf.shape[0], offx, incx, "x")
        (A2,) = unalias(xf, A)
        if A2 is not A:
            arr, lda, n = _band(A2, k)
        _call(addr, sig, "L" if lower else "U", _TRANS[trans], "U" if diag else "N", n, k, arr, lda, xf,
              offx * it, incx)
        return xr

    what = "xout <- op(A)*x" if name.endswith("tbmv") else "Solve op(A)*xout = x"
    return front(small, _name(tbmv, name, f"xout = {name}(k, a, x, [incx, offx, lower, trans, diag, overwrite_x])",
                              f"{what} with A triangular banded (k off-diagonals)."))


def _make_tpmv(p: str, name: str) -> Callable[..., Any]:
    """tpmv and tpsv (packed triangular)."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    sig = "vccciaAi"
    small = small_path(name[1:], p, addr)

    def tpmv(n: Any, ap: Any, x: Any, incx: Any = 1, offx: Any = 0, lower: Any = 0, trans: Any = 0, diag: Any = 0,
             overwrite_x: Any = 0) -> np.ndarray:
        n = _nonneg(n, "n")
        lower, trans, diag = _flags3(lower, trans, diag)
        apf = _packed(dt, ap, n)
        xr, xf = as_inout(x, dt, "x", overwrite_x)
        incx = check_inc(incx, "incx")
        offx = check_off(offx, xf.shape[0], "offx", "x")
        check_span(n, xf.shape[0], offx, incx, "x")
        (apf,) = unalias(xf, apf)
        _call(addr, sig, "L" if lower else "U", _TRANS[trans], "U" if diag else "N", n, apf, xf, offx * it, incx)
        return xr

    what = "xout <- op(A)*x" if name.endswith("tpmv") else "Solve op(A)*xout = x"
    return front(small, _name(tpmv, name, f"xout = {name}(n, ap, x, [incx, offx, lower, trans, diag, overwrite_x])",
                              f"{what} with A triangular in packed storage."))


# ---------------------------------------------------------------------------------------------------
# rank-1 and rank-2 updates
# ---------------------------------------------------------------------------------------------------


def _make_ger(p: str, name: str) -> Callable[..., Any]:
    """ger (s, d), geru and gerc (c, z)."""
    dt = DTYPE[p]
    addr = _fortran(name)
    sig = "vii" + SCALAR_CODE[p] + "aiaiai"
    small = small_path(name[1:], p, addr)

    def ger(alpha: Any, x: Any, y: Any, incx: Any = 1, incy: Any = 1, a: Any = None, overwrite_x: Any = 1,
            overwrite_y: Any = 1, overwrite_a: Any = 0) -> np.ndarray:
        alpha = as_scalar(p, alpha, "alpha")
        xf = as_vector(x, dt, "x")
        yf = as_vector(y, dt, "y")
        incx = as_int(incx, "incx", 1)
        incy = as_int(incy, "incy", 1)
        if incx not in (1, -1):
            raise ValueError(f"incx must be 1 or -1; got incx={incx}")
        if incy not in (1, -1):
            raise ValueError(f"incy must be 1 or -1; got incy={incy}")
        m, n = xf.shape[0], yf.shape[0]
        if a is None:
            A = np.zeros((m, n), dtype=dt, order="F")
        else:
            A = as_inout_matrix(a, dt, "a", overwrite_a, (m, n))
            xf, yf = unalias(A, xf, yf)
        _call(addr, sig, m, n, alpha, xf, incx, yf, incy, A, max(m, 1))
        return A

    op = "y^H" if name.endswith("gerc") else "y^T"
    return front(small, _name(
        ger,
        name,
        f"a = {name}(alpha, x, y, [incx, incy, a, overwrite_x, overwrite_y, overwrite_a])",
        f"a <- alpha*x*{op} + a.",
    ))


def _make_syr(p: str, name: str) -> Callable[..., Any]:
    """syr (s, d, c, z) and her (c, z; real alpha)."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    herm = name[1:] == "her"
    sig = "vci" + (REAL_CODE[p] if herm else SCALAR_CODE[p]) + "Aiai"

    small = small_path(name[1:], p, addr)

    def syr(alpha: Any, x: Any, lower: Any = 0, incx: Any = 1, offx: Any = 0, n: Any = None, a: Any = None,
            overwrite_a: Any = 0) -> np.ndarray:
        alpha = as_real(alpha, "alpha") if herm else as_scalar(p, alpha, "alpha")
        lower = as_flag(lower, "lower", (0, 1))
        xf = as_vector(x, dt, "x")
        incx = check_inc(incx, "incx")
        offx = check_off(offx, xf.shape[0], "offx", "x")
        nmax = default_len_rot(xf.shape[0], offx, incx)
        n = nmax if n is None else as_int(n, "n")
        if n < 0 or n > nmax:
            raise ValueError(f"n must satisfy 0 <= n <= {nmax} (the elements of x from offx at incx); got n={n}")
        if a is None:
            A = np.zeros((n, n), dtype=dt, order="F")
        else:
            A = as_inout_matrix(a, dt, "a", overwrite_a, (n, n))
            (xf,) = unalias(A, xf)
        _call(addr, sig, "L" if lower else "U", n, alpha, xf, offx * it, incx, A, max(n, 1))
        return A

    op = "x^H" if herm else "x^T"
    return front(small, _name(syr, name, f"a = {name}(alpha, x, [lower, incx, offx, n, a, overwrite_a])",
                              f"a <- alpha*x*{op} + a (one triangle updated)."))


def _make_syr2(p: str, name: str) -> Callable[..., Any]:
    """syr2 (s, d) and her2 (c, z)."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    sig = "vci" + SCALAR_CODE[p] + "AiAiai"

    small = small_path(name[1:], p, addr)

    def syr2(alpha: Any, x: Any, y: Any, lower: Any = 0, incx: Any = 1, offx: Any = 0, incy: Any = 1, offy: Any = 0,
             n: Any = None, a: Any = None, overwrite_a: Any = 0) -> np.ndarray:
        alpha = as_scalar(p, alpha, "alpha")
        lower = as_flag(lower, "lower", (0, 1))
        xf = as_vector(x, dt, "x")
        yf = as_vector(y, dt, "y")
        incx = check_inc(incx, "incx")
        incy = check_inc(incy, "incy")
        offx = check_off(offx, xf.shape[0], "offx", "x")
        offy = check_off(offy, yf.shape[0], "offy", "y")
        nx = default_len_rot(xf.shape[0], offx, incx)
        ny = default_len_rot(yf.shape[0], offy, incy)
        n = min(nx, ny) if n is None else as_int(n, "n")
        if n < 0 or n > min(nx, ny):
            raise ValueError(f"n must satisfy 0 <= n <= {min(nx, ny)} (the elements of x and y); got n={n}")
        if a is None:
            A = np.zeros((n, n), dtype=dt, order="F")
        else:
            A = as_inout_matrix(a, dt, "a", overwrite_a, (n, n))
            xf, yf = unalias(A, xf, yf)
        _call(addr, sig, "L" if lower else "U", n, alpha, xf, offx * it, incx, yf, offy * it, incy, A, max(n, 1))
        return A

    op = "H" if name[1:] == "her2" else "T"
    return front(small, _name(
        syr2,
        name,
        f"a = {name}(alpha, x, y, [lower, incx, offx, incy, offy, n, a, overwrite_a])",
        f"a <- alpha*x*y^{op} + conj(alpha)*y*x^{op} + a (one triangle updated).",
    ))


def _make_spr(p: str, name: str) -> Callable[..., Any]:
    """spr (s, d, c, z) and hpr (c, z; real alpha), packed storage."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    herm = name[1:] == "hpr"
    sig = "vci" + (REAL_CODE[p] if herm else SCALAR_CODE[p]) + "Aia"
    small = small_path(name[1:], p, addr)

    def spr(n: Any, alpha: Any, x: Any, ap: Any, incx: Any = 1, offx: Any = 0, lower: Any = 0,
            overwrite_ap: Any = 0) -> np.ndarray:
        n = _nonneg(n, "n")
        alpha = as_real(alpha, "alpha") if herm else as_scalar(p, alpha, "alpha")
        lower = as_flag(lower, "lower", (0, 1))
        xf, offx, incx = _x_in(dt, x, offx, incx, n)
        apr, apf = as_inout(ap, dt, "ap", overwrite_ap)
        if apf.shape[0] < n * (n + 1) // 2:
            raise ValueError(f"len(ap) must be >= n*(n+1)/2 = {n * (n + 1) // 2}; got len(ap) = {apf.shape[0]}")
        (xf,) = unalias(apf, xf)
        _call(addr, sig, "L" if lower else "U", n, alpha, xf, offx * it, incx, apf)
        return apr

    return front(small, _name(spr, name, f"apu = {name}(n, alpha, x, ap, [incx, offx, lower, overwrite_ap])",
                              "ap <- alpha*x*x^T (x^H for hpr) + ap in packed storage."))


def _make_spr2(p: str, name: str) -> Callable[..., Any]:
    """spr2 (s, d) and hpr2 (c, z), packed storage."""
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(name)
    sig = "vci" + SCALAR_CODE[p] + "AiAia"
    small = small_path(name[1:], p, addr)

    def spr2(n: Any, alpha: Any, x: Any, y: Any, ap: Any, incx: Any = 1, offx: Any = 0, incy: Any = 1, offy: Any = 0,
             lower: Any = 0, overwrite_ap: Any = 0) -> np.ndarray:
        n = _nonneg(n, "n")
        alpha = as_scalar(p, alpha, "alpha")
        lower = as_flag(lower, "lower", (0, 1))
        xf, offx, incx = _x_in(dt, x, offx, incx, n)
        yf, offy, incy = _x_in(dt, y, offy, incy, n, "y")
        apr, apf = as_inout(ap, dt, "ap", overwrite_ap)
        if apf.shape[0] < n * (n + 1) // 2:
            raise ValueError(f"len(ap) must be >= n*(n+1)/2 = {n * (n + 1) // 2}; got len(ap) = {apf.shape[0]}")
        xf, yf = unalias(apf, xf, yf)
        _call(addr, sig, "L" if lower else "U", n, alpha, xf, offx * it, incx, yf, offy * it, incy, apf)
        return apr

    return front(small, _name(spr2, name,
                              f"apu = {name}(n, alpha, x, y, ap, [incx, offx, incy, offy, lower, overwrite_ap])",
                              "ap <- alpha*x*y^T + alpha*y*x^T + ap (Hermitian form for hpr2) in packed storage."))


# ---------------------------------------------------------------------------------------------------
# the namespace
# ---------------------------------------------------------------------------------------------------

_ROUTINES: dict[str, Callable[..., Any]] = {}
for _p in "sdcz":
    _ROUTINES[_p + "gemv"] = _make_gemv(_p)
    _ROUTINES[_p + "gbmv"] = _make_gbmv(_p)
    _ROUTINES[_p + "spmv"] = _make_spmv(_p, _p + "spmv")
    _ROUTINES[_p + "syr"] = _make_syr(_p, _p + "syr")
    _ROUTINES[_p + "spr"] = _make_spr(_p, _p + "spr")
    for _f in ("trmv", "trsv"):
        _ROUTINES[_p + _f] = _make_trmv(_p, _p + _f)
    for _f in ("tbmv", "tbsv"):
        _ROUTINES[_p + _f] = _make_tbmv(_p, _p + _f)
    for _f in ("tpmv", "tpsv"):
        _ROUTINES[_p + _f] = _make_tpmv(_p, _p + _f)
for _p in "sd":
    _ROUTINES[_p + "symv"] = _make_symv(_p, _p + "symv")
    _ROUTINES[_p + "sbmv"] = _make_sbmv(_p, _p + "sbmv")
    _ROUTINES[_p + "ger"] = _make_ger(_p, _p + "ger")
    _ROUTINES[_p + "syr2"] = _make_syr2(_p, _p + "syr2")
    _ROUTINES[_p + "spr2"] = _make_spr2(_p, _p + "spr2")
for _p in "cz":
    _ROUTINES[_p + "hemv"] = _make_symv(_p, _p + "hemv")
    _ROUTINES[_p + "hbmv"] = _make_sbmv(_p, _p + "hbmv")
    _ROUTINES[_p + "hpmv"] = _make_spmv(_p, _p + "hpmv")
    _ROUTINES[_p + "geru"] = _make_ger(_p, _p + "geru")
    _ROUTINES[_p + "gerc"] = _make_ger(_p, _p + "gerc")
    _ROUTINES[_p + "her"] = _make_syr(_p, _p + "her")
    _ROUTINES[_p + "her2"] = _make_syr2(_p, _p + "her2")
    _ROUTINES[_p + "hpr"] = _make_spr(_p, _p + "hpr")
    _ROUTINES[_p + "hpr2"] = _make_spr2(_p, _p + "hpr2")

globals().update(_ROUTINES)
__all__ = sorted(_ROUTINES)

del _p, _f
