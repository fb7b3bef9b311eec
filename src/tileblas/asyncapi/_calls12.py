"""The rest of Levels 1 and 2 on handles: swap, asum, iamax, rot, rotm, symv, hemv, gbmv, sbmv, hbmv,
spmv, hpmv, trmv, tbmv, tbsv, tpmv, tpsv, geru, syr, her, syr2, her2, spr, hpr, spr2, hpr2.

What it owns: their argument checks (one place per call: ValueError/TypeError naming the argument and the
bad value, raised at submission), read/write sets and flop counts.  They compute on host memory (like every
Level-1/2 call: ``host_only``) through :mod:`tileblas.blas`'s routines of the matching precision, which call
tileblas' single-threaded native BLAS without the GIL, in place when the handle's buffer has the layout BLAS
needs (else on a copy that is written back).  A precision BLAS lacks (symv for complex, her for real, ...)
raises TypeError naming the dtype.  ``rotg`` and ``rotmg`` take scalars only: there is nothing to run
asynchronously on handles.

Every call returns an :class:`~tileblas.asyncapi.AsyncFuture` at once; its result is the output handle (a
tuple ``(x, y)`` for swap, rot and rotm; the scalar for asum; a 0-based int for iamax).
What it must not touch: the graph and the policies (it only submits through the executor).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tileblas.kernels import _openblas
from tileblas.asyncapi._calls import (
    _flop_factor, _distinct, _flag, _as_handle, _lib, _ndim, _same_dtype, _scalar, _submit, _vec_in, _vec_out,
)
from tileblas.asyncapi._futures import AsyncFuture
from tileblas.asyncapi._handles import MatrixHandle

__all__ = [
    "swap", "asum", "iamax", "rot", "rotm",
    "symv", "hemv", "gbmv", "sbmv", "hbmv", "spmv", "hpmv", "trmv", "tbmv", "tbsv", "tpmv", "tpsv",
    "geru", "syr", "her", "syr2", "her2", "spr", "hpr", "spr2", "hpr2",
]

_TRANS = {"N": 0, "T": 1, "C": 2}
#: routines whose names are not prefix + family
_NAMES = {("asum", "c"): "scasum", ("asum", "z"): "dzasum", ("rot", "c"): "csrot", ("rot", "z"): "zdrot",
          ("iamax", "s"): "isamax", ("iamax", "d"): "idamax", ("iamax", "c"): "icamax", ("iamax", "z"): "izamax"}


def _blas() -> Any:
    from tileblas import blas  # imported on first use

    return blas


def _routine(family: str, dt: np.dtype, arg: str) -> tuple[str, Callable[..., Any]]:
    """(BLAS name, tileblas.blas routine) of ``family`` in precision ``dt``; TypeError when BLAS has none."""
    p = _openblas.DTYPES[dt]
    name = _NAMES.get((family, p), p + family)
    fn = getattr(_blas(), name, None)
    if fn is None:
        have = [str(d) for d, q in _openblas.DTYPES.items() if hasattr(_blas(), _NAMES.get((family, q), q + family))]
        raise TypeError(f"{family} exists for dtype {', '.join(have)} only; {arg} has dtype {dt}")
    return name, fn


def _vector(x: Any, name: str) -> MatrixHandle:
    x = _as_handle(x, name)
    _ndim(x, name, 1)
    return x


def _matrix(a: Any, name: str) -> MatrixHandle:
    a = _as_handle(a, name)
    _ndim(a, name, 2)
    return a


def _lower(uplo: Any) -> int:
    return 1 if _flag(uplo, "uplo", ("U", "L")) == "L" else 0


def _int(v: Any, name: str, lo: int = 0) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}; got {v!r}")
    return int(v)


def _put(h_arr: np.ndarray, out: np.ndarray) -> None:
    """Write a routine's result back into the handle's buffer when it computed on a copy."""
    if out is not h_arr:
        h_arr[...] = out


def _packed_n(ap: MatrixHandle, name: str = "ap") -> int:
    """n of a packed triangle of length n(n+1)/2."""
    size = ap.shape[0]
    n = int((np.sqrt(8 * size + 1) - 1) / 2)
    while n * (n + 1) // 2 < size:
        n += 1
    if n * (n + 1) // 2 != size:
        raise ValueError(f"{name} must hold a packed triangle, n*(n+1)/2 elements; got length {size}")
    return n


# ----------------------------------------------------------------------------------------- Level 1
def swap(x: MatrixHandle, y: MatrixHandle) -> AsyncFuture:
    """x <-> y (vectors of one length).  The future's result is ``(x, y)``."""
    x, y = _vector(x, "x"), _vector(y, "y")
    dt = _same_dtype(("y", y), ("x", x))
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape; got x {x.shape}, y {y.shape}")
    _distinct(("y", y), ("x", x))
    name, fn = _routine("swap", dt, "x")

    def run(dev: Any) -> tuple:
        X, Y = x.acquire(dev, "rw"), y.acquire(dev, "rw")
        if x.size:
            xo, yo = fn(X, Y)
            _put(X, xo)
            _put(Y, yo)
        return x, y

    return _submit(name, run, (x, y), (x, y), 2.0 * x.size, host_only=True)


def asum(x: MatrixHandle) -> AsyncFuture:
    """A future of ``sum(|Re x_i| + |Im x_i|)`` (a real scalar)."""
    x = _vector(x, "x")
    name, fn = _routine("asum", x.dtype, "x")
    rdt = np.dtype(np.float32 if x.dtype in (np.float32, np.complex64) else np.float64)

    def run(dev: Any) -> Any:
        X = x.acquire(dev, "r")
        return rdt.type(fn(X)) if x.size else rdt.type(0)

    return _submit(name, run, (x,), (), 2.0 * x.size * _flop_factor(x.dtype), host_only=True)


def iamax(x: MatrixHandle) -> AsyncFuture:
    """A future of the 0-based index of the first element of largest ``|Re x_i| + |Im x_i|`` (-1 when empty)."""
    x = _vector(x, "x")
    name, fn = _routine("iamax", x.dtype, "x")

    def run(dev: Any) -> int:
        X = x.acquire(dev, "r")
        return int(fn(X)) if x.size else -1

    return _submit(name, run, (x,), (), 2.0 * x.size, host_only=True)


def _rot_pair(x: Any, y: Any) -> tuple[MatrixHandle, MatrixHandle, np.dtype]:
    x, y = _vector(x, "x"), _vector(y, "y")
    dt = _same_dtype(("y", y), ("x", x))
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape; got x {x.shape}, y {y.shape}")
    _distinct(("y", y), ("x", x))
    return x, y, dt


def rot(x: MatrixHandle, y: MatrixHandle, c: Any, s: Any) -> AsyncFuture:
    """(x, y) <- (c*x + s*y, c*y - s*x), c and s real (csrot/zdrot for complex vectors).  Result ``(x, y)``."""
    x, y, dt = _rot_pair(x, y)
    c, s = _scalar(c, "c", dt, real=True), _scalar(s, "s", dt, real=True)
    name, fn = _routine("rot", dt, "x")

    def run(dev: Any) -> tuple:
        X, Y = x.acquire(dev, "rw"), y.acquire(dev, "rw")
        if x.size:
            xo, yo = fn(X, Y, c, s, overwrite_x=1, overwrite_y=1)
            _put(X, xo)
            _put(Y, yo)
        return x, y

    return _submit(name, run, (x, y), (x, y), 6.0 * x.size * _flop_factor(dt), host_only=True)


def rotm(x: MatrixHandle, y: MatrixHandle, param: Any) -> AsyncFuture:
    """Apply the modified Givens rotation ``param`` (5 numbers, as from rotmg) to (x, y).  Result ``(x, y)``."""
    x, y, dt = _rot_pair(x, y)
    name, fn = _routine("rotm", dt, "x")
    try:
        prm = np.array(param, dtype=dt, copy=True).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"param must be 5 real numbers; got {param!r}") from None
    if prm.shape != (5,):
        raise ValueError(f"param must hold 5 numbers; got {prm.size}")

    def run(dev: Any) -> tuple:
        X, Y = x.acquire(dev, "rw"), y.acquire(dev, "rw")
        if x.size:
            xo, yo = fn(X, Y, prm, overwrite_x=1, overwrite_y=1)
            _put(X, xo)
            _put(Y, yo)
        return x, y

    return _submit(name, run, (x, y), (x, y), 6.0 * x.size, host_only=True)


# ----------------------------------------------------------------------------------------- Level 2: y := ...
def _mv(family: str, alpha: Any, a: Any, x: Any, beta: Any, y: Any, n_of: Callable[[MatrixHandle], int],
        call: Callable[..., np.ndarray], flops: float | None, a_name: str = "a", a_ndim: int = 2) -> AsyncFuture:
    """y := alpha*A@x + beta*y for a square A of order n_of(a) (symmetric, Hermitian, banded or packed)."""
    a = _as_handle(a, a_name)
    _ndim(a, a_name, a_ndim)
    x, y = _vector(x, "x"), _vector(y, "y")
    dt = _same_dtype(("y", y), (a_name, a), ("x", x))
    name, fn = _routine(family, dt, a_name)
    n = n_of(a)
    if x.shape != (n,) or y.shape != (n,):
        raise ValueError(f"shapes do not match: {a_name} {a.shape} is of order {n}, so x and y must be ({n},); "
                         f"got x {x.shape}, y {y.shape}")
    _distinct(("y", y), (a_name, a), ("x", x))
    alpha = _scalar(alpha, "alpha", dt)
    beta = _scalar(beta, "beta", dt)
    mode = "w" if beta == 0 else "rw"

    def run(dev: Any) -> MatrixHandle:
        A, X, Y = a.acquire(dev, "r"), x.acquire(dev, "r"), y.acquire(dev, mode)
        if n == 0:
            return y
        if beta == 0:
            Y[...] = 0  # BLAS does not read y when beta is 0, but NaN garbage must not survive
        _put(Y, call(fn, alpha, A, X, beta, Y))
        return y

    reads = (a, x, y) if mode == "rw" else (a, x)
    return _submit(name, run, reads, (y,), (2.0 * n * n if flops is None else flops) * _flop_factor(dt), host_only=True)


def _square(a: MatrixHandle, name: str = "a") -> int:
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} must be square; got shape {a.shape}")
    return a.shape[0]


def symv(alpha: Any, a: MatrixHandle, x: MatrixHandle, beta: Any, y: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """y := alpha*a@x + beta*y, a symmetric (its uplo triangle is read); real dtypes."""
    lower = _lower(uplo)
    return _mv("symv", alpha, a, x, beta, y, _square,
               lambda f, al, A, X, be, Y: f(al, A, X, beta=be, y=Y, lower=lower, overwrite_y=1), None)


def hemv(alpha: Any, a: MatrixHandle, x: MatrixHandle, beta: Any, y: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """y := alpha*a@x + beta*y, a Hermitian (its uplo triangle is read); complex dtypes."""
    lower = _lower(uplo)
    return _mv("hemv", alpha, a, x, beta, y, _square,
               lambda f, al, A, X, be, Y: f(al, A, X, beta=be, y=Y, lower=lower, overwrite_y=1), None)


def _banded_order(k: int, what: str) -> Callable[[MatrixHandle], int]:
    def order(a: MatrixHandle) -> int:
        if a.shape[0] < k + 1:
            raise ValueError(f"a must have at least k+1 = {k + 1} rows ({what} band storage); got shape {a.shape}")
        return a.shape[1]

    return order


def sbmv(alpha: Any, a: MatrixHandle, x: MatrixHandle, beta: Any, y: MatrixHandle, k: int,
         uplo: str = "U") -> AsyncFuture:
    """y := alpha*A@x + beta*y, A symmetric banded with k off-diagonals, in LAPACK band storage ``a``
    ((k+1, n): the upper band for uplo U, the lower for L); real dtypes."""
    k, lower = _int(k, "k"), _lower(uplo)
    return _mv("sbmv", alpha, a, x, beta, y, _banded_order(k, "symmetric"),
               lambda f, al, A, X, be, Y: f(k, al, A, X, beta=be, y=Y, lower=lower, overwrite_y=1), None)


def hbmv(alpha: Any, a: MatrixHandle, x: MatrixHandle, beta: Any, y: MatrixHandle, k: int,
         uplo: str = "U") -> AsyncFuture:
    """As :func:`sbmv` with A Hermitian banded; complex dtypes."""
    k, lower = _int(k, "k"), _lower(uplo)
    return _mv("hbmv", alpha, a, x, beta, y, _banded_order(k, "Hermitian"),
               lambda f, al, A, X, be, Y: f(k, al, A, X, beta=be, y=Y, lower=lower, overwrite_y=1), None)


def spmv(alpha: Any, ap: MatrixHandle, x: MatrixHandle, beta: Any, y: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """y := alpha*A@x + beta*y, A symmetric in packed storage ``ap`` (its uplo triangle by columns)."""
    lower = _lower(uplo)
    return _mv("spmv", alpha, ap, x, beta, y, _packed_n,
               lambda f, al, A, X, be, Y: f(X.shape[0], al, A, X, beta=be, y=Y, lower=lower, overwrite_y=1),
               None, "ap", 1)


def hpmv(alpha: Any, ap: MatrixHandle, x: MatrixHandle, beta: Any, y: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """As :func:`spmv` with A Hermitian; complex dtypes."""
    lower = _lower(uplo)
    return _mv("hpmv", alpha, ap, x, beta, y, _packed_n,
               lambda f, al, A, X, be, Y: f(X.shape[0], al, A, X, beta=be, y=Y, lower=lower, overwrite_y=1),
               None, "ap", 1)


def gbmv(alpha: Any, a: MatrixHandle, x: MatrixHandle, beta: Any, y: MatrixHandle, kl: int, ku: int,
         trans: str = "N") -> AsyncFuture:
    """y := alpha*op(A)@x + beta*y, A (m x n) banded with kl sub- and ku super-diagonals in LAPACK band
    storage ``a`` ((kl+ku+1, n)); m is len(y) for trans N, len(x) otherwise."""
    a = _matrix(a, "a")
    x, y = _vector(x, "x"), _vector(y, "y")
    dt = _same_dtype(("y", y), ("a", a), ("x", x))
    name, fn = _routine("gbmv", dt, "a")
    kl, ku = _int(kl, "kl"), _int(ku, "ku")
    t = _TRANS[_flag(trans, "trans", ("N", "T", "C"))]
    n = a.shape[1]
    m = y.shape[0] if t == 0 else x.shape[0]
    if a.shape[0] < kl + ku + 1:
        raise ValueError(f"a must have at least kl+ku+1 = {kl + ku + 1} rows (band storage); got shape {a.shape}")
    if (x.shape[0] if t == 0 else y.shape[0]) != n:
        raise ValueError(f"shapes do not match: a {a.shape} stores {n} columns, so "
                         f"{'x' if t == 0 else 'y'} must have length {n}; got x {x.shape}, y {y.shape}")
    _distinct(("y", y), ("a", a), ("x", x))
    alpha, beta = _scalar(alpha, "alpha", dt), _scalar(beta, "beta", dt)
    mode = "w" if beta == 0 else "rw"
    rows = m if t == 0 else n
    sc = _openblas.scalar_code(_openblas.DTYPES[dt])

    def run(dev: Any) -> MatrixHandle:
        A, X, Y = a.acquire(dev, "r"), x.acquire(dev, "r"), y.acquire(dev, mode)
        if rows == 0:
            return y
        if beta == 0:
            Y[...] = 0
        if m == 0 or n == 0:
            return y
        # the native routine directly: tileblas.blas.?gbmv keeps SciPy's extra requirement m >= kl+ku+1
        ld = _openblas.colmajor(A)
        if not ld:
            A, ld = np.asfortranarray(A), max(A.shape[0], 1)
        xx, incx = _vec_in(X)
        yy, incy, _, back = _vec_out(Y)
        _lib(dev).call(name, "vciiii" + sc + "aiai" + sc + "ai", "NTC"[t], m, n, kl, ku, alpha, A, ld, xx, incx,
                       beta, yy, incy)
        if back:
            Y[...] = yy
        return y

    reads = (a, x, y) if mode == "rw" else (a, x)
    return _submit(name, run, reads, (y,), 2.0 * n * (kl + ku + 1) * _flop_factor(dt), host_only=True)


# ----------------------------------------------------------------------------------------- Level 2: x := ...
def _tv(family: str, a: Any, x: Any, uplo: Any, trans: Any, diag: Any, n_of: Callable[[MatrixHandle], int],
        call: Callable[..., np.ndarray], a_name: str = "a", a_ndim: int = 2) -> AsyncFuture:
    """x := op(A)@x or x := op(A)^-1 @ x for a triangular A (full, banded or packed)."""
    a = _as_handle(a, a_name)
    _ndim(a, a_name, a_ndim)
    x = _vector(x, "x")
    dt = _same_dtype(("x", x), (a_name, a))
    name, fn = _routine(family, dt, a_name)
    lower = _lower(uplo)
    t = _TRANS[_flag(trans, "trans", ("N", "T", "C"))]
    d = 1 if _flag(diag, "diag", ("N", "U")) == "U" else 0
    n = n_of(a)
    if x.shape != (n,):
        raise ValueError(f"shapes do not match: {a_name} {a.shape} is of order {n}, so x must be ({n},); "
                         f"got x {x.shape}")
    _distinct(("x", x), (a_name, a))

    def run(dev: Any) -> MatrixHandle:
        A, X = a.acquire(dev, "r"), x.acquire(dev, "rw")
        if n:
            _put(X, call(fn, A, X, lower, t, d))
        return x

    return _submit(name, run, (a, x), (x,), float(n) * n * _flop_factor(dt), host_only=True)


def trmv(a: MatrixHandle, x: MatrixHandle, uplo: str = "U", trans: str = "N", diag: str = "N") -> AsyncFuture:
    """x := op(a)@x, a triangular."""
    return _tv("trmv", a, x, uplo, trans, diag, _square,
               lambda f, A, X, lo, t, d: f(A, X, lower=lo, trans=t, diag=d, overwrite_x=1))


def tbmv(a: MatrixHandle, x: MatrixHandle, k: int, uplo: str = "U", trans: str = "N", diag: str = "N") -> AsyncFuture:
    """x := op(A)@x, A triangular banded with k off-diagonals in band storage ``a`` ((k+1, n))."""
    k = _int(k, "k")
    return _tv("tbmv", a, x, uplo, trans, diag, _banded_order(k, "triangular"),
               lambda f, A, X, lo, t, d: f(k, A, X, lower=lo, trans=t, diag=d, overwrite_x=1))


def tbsv(a: MatrixHandle, x: MatrixHandle, k: int, uplo: str = "U", trans: str = "N", diag: str = "N") -> AsyncFuture:
    """Solve op(A)@z = x for z, overwriting x; A triangular banded (as :func:`tbmv`)."""
    k = _int(k, "k")
    return _tv("tbsv", a, x, uplo, trans, diag, _banded_order(k, "triangular"),
               lambda f, A, X, lo, t, d: f(k, A, X, lower=lo, trans=t, diag=d, overwrite_x=1))


def tpmv(ap: MatrixHandle, x: MatrixHandle, uplo: str = "U", trans: str = "N", diag: str = "N") -> AsyncFuture:
    """x := op(A)@x, A triangular in packed storage ``ap``."""
    return _tv("tpmv", ap, x, uplo, trans, diag, _packed_n,
               lambda f, A, X, lo, t, d: f(X.shape[0], A, X, lower=lo, trans=t, diag=d, overwrite_x=1), "ap", 1)


def tpsv(ap: MatrixHandle, x: MatrixHandle, uplo: str = "U", trans: str = "N", diag: str = "N") -> AsyncFuture:
    """Solve op(A)@z = x for z, overwriting x; A triangular in packed storage ``ap``."""
    return _tv("tpsv", ap, x, uplo, trans, diag, _packed_n,
               lambda f, A, X, lo, t, d: f(X.shape[0], A, X, lower=lo, trans=t, diag=d, overwrite_x=1), "ap", 1)


# ----------------------------------------------------------------------------------------- Level 2: a := ...
def geru(alpha: Any, x: MatrixHandle, y: MatrixHandle, a: MatrixHandle) -> AsyncFuture:
    """a := alpha*x@y.T + a (the same as :func:`~tileblas.asyncapi.ger`, named as BLAS names it for complex)."""
    from tileblas.asyncapi._calls import ger

    return ger(alpha, x, y, a)


def _rank(family: str, alpha: Any, x: Any, y: Any, a: Any, uplo: Any, packed: bool, real_alpha: bool) -> AsyncFuture:
    """a := a + (rank-1 or rank-2 update of one triangle), a full (n x n) or packed."""
    a_name = "ap" if packed else "a"
    a = _as_handle(a, a_name)
    _ndim(a, a_name, 1 if packed else 2)
    x = _vector(x, "x")
    ys = () if y is None else (_vector(y, "y"),)
    dt = _same_dtype((a_name, a), ("x", x), *(("y", h) for h in ys))
    name, fn = _routine(family, dt, a_name)
    lower = _lower(uplo)
    n = _packed_n(a) if packed else _square(a)
    if x.shape != (n,) or any(h.shape != (n,) for h in ys):
        yshape = f", y {ys[0].shape}" if ys else ""
        raise ValueError(f"shapes do not match: {a_name} {a.shape} is of order {n}, so the vectors must be "
                         f"({n},); got x {x.shape}{yshape}")
    _distinct((a_name, a), ("x", x), *(("y", h) for h in ys))
    alpha = _scalar(alpha, "alpha", dt, real=real_alpha)

    def run(dev: Any) -> MatrixHandle:
        A = a.acquire(dev, "rw")
        X = x.acquire(dev, "r")
        if n == 0:
            return a
        vecs = (X,) + tuple(h.acquire(dev, "r") for h in ys)
        if packed:
            out = fn(n, alpha, *vecs, A, lower=lower, overwrite_ap=1)
        else:
            out = fn(alpha, *vecs, lower=lower, a=A, overwrite_a=1)
        _put(A, out)
        return a

    flops = (2.0 if ys else 1.0) * n * (n + 1) * _flop_factor(dt)
    return _submit(name, run, (a, x) + ys, (a,), flops, host_only=True)


def syr(alpha: Any, x: MatrixHandle, a: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """a := alpha*x@x.T + a on the uplo triangle of a (complex: symmetric, not Hermitian)."""
    return _rank("syr", alpha, x, None, a, uplo, packed=False, real_alpha=False)


def her(alpha: Any, x: MatrixHandle, a: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """a := alpha*x@x.H + a on the uplo triangle of a (alpha real); complex dtypes."""
    return _rank("her", alpha, x, None, a, uplo, packed=False, real_alpha=True)


def syr2(alpha: Any, x: MatrixHandle, y: MatrixHandle, a: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """a := alpha*x@y.T + alpha*y@x.T + a on the uplo triangle of a; real dtypes."""
    return _rank("syr2", alpha, x, y, a, uplo, packed=False, real_alpha=False)


def her2(alpha: Any, x: MatrixHandle, y: MatrixHandle, a: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """a := alpha*x@y.H + conj(alpha)*y@x.H + a on the uplo triangle of a; complex dtypes."""
    return _rank("her2", alpha, x, y, a, uplo, packed=False, real_alpha=False)


def spr(alpha: Any, x: MatrixHandle, ap: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """ap := alpha*x@x.T + ap, ap a packed triangle (complex: symmetric)."""
    return _rank("spr", alpha, x, None, ap, uplo, packed=True, real_alpha=False)


def hpr(alpha: Any, x: MatrixHandle, ap: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """ap := alpha*x@x.H + ap, ap a packed Hermitian triangle (alpha real); complex dtypes."""
    return _rank("hpr", alpha, x, None, ap, uplo, packed=True, real_alpha=True)


def spr2(alpha: Any, x: MatrixHandle, y: MatrixHandle, ap: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """ap := alpha*x@y.T + alpha*y@x.T + ap, ap a packed triangle; real dtypes."""
    return _rank("spr2", alpha, x, y, ap, uplo, packed=True, real_alpha=False)


def hpr2(alpha: Any, x: MatrixHandle, y: MatrixHandle, ap: MatrixHandle, uplo: str = "U") -> AsyncFuture:
    """ap := alpha*x@y.H + conj(alpha)*y@x.H + ap, ap a packed Hermitian triangle; complex dtypes."""
    return _rank("hpr2", alpha, x, y, ap, uplo, packed=True, real_alpha=False)
