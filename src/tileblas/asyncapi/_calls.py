"""BLAS calls on handles (Levels 1-3): checked at submission, computed on a backend, returned as futures.

What it owns: the user-facing call functions -- argument checks (one place; ValueError/TypeError naming
the argument and the bad value), the read/write sets for dependency tracking, the flop counts for the
"cost" policy, and the run functions that compute on a backend's device.  Level-3 calls use the device's
kernels (``device.kernel(name)``) or, under the "demand" policy, the tile runtime through
:func:`tileblas.blas._dispatch.level3`; Level-1/2 calls run on host memory through the kernel layer's native
BLAS (``get_library(...).call``), without the GIL.

Every call returns an :class:`AsyncFuture` at once; its result is the output handle (the scalar for
``dot``, ``dotc`` and ``nrm2``).
What it must not touch: the graph and the policies (it only calls ``Executor.submit``).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from tileblas import _flags
from tileblas.kernels import _openblas
from tileblas.asyncapi._futures import AsyncFuture
from tileblas.asyncapi._handles import MatrixHandle

__all__ = [
    "gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm",
    "gemv", "ger", "gerc", "trsv",
    "axpy", "scal", "copy", "dot", "dotc", "nrm2",
]

_TRANS = ("N", "T", "C")


# ----------------------------------------------------------------------------------------- checks
def _as_handle(x: Any, name: str) -> MatrixHandle:
    if not isinstance(x, MatrixHandle):
        raise TypeError(f"{name} must be a MatrixHandle (tileblas.asyncapi.handle(array)); got {type(x).__name__}")
    if x.deleted:
        raise ValueError(f"{name} was deleted; create a new handle")
    return x


def _same_dtype(*pairs: tuple[str, MatrixHandle]) -> np.dtype:
    dt = pairs[0][1].dtype
    for name, h in pairs[1:]:
        if h.dtype != dt:
            raise TypeError(f"{name} has dtype {h.dtype}, but {pairs[0][0]} has dtype {dt}; all operands "
                            "of one call must share a dtype")
    return dt


def _ndim(h: MatrixHandle, name: str, nd: int) -> None:
    if h.ndim != nd:
        raise ValueError(f"{name} must be {nd}-D; got shape {h.shape}")


def _flag(value: Any, name: str, allowed: tuple[str, ...]) -> str:
    """A letter or the drop-in's integer, one of ``allowed`` (:mod:`tileblas._flags`: the one rule)."""
    return _flags.flag(value, name, allowed)


def _scalar(value: Any, name: str, dt: np.dtype, real: bool = False) -> Any:
    if type(value) is float and dt.kind != "c":  # the common case, first
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, complex, np.number)):
        raise TypeError(f"{name} must be a number; got {type(value).__name__}")
    if dt.kind == "c" and not real:
        return complex(value)
    if isinstance(value, (complex, np.complexfloating)):
        if complex(value).imag != 0:
            raise ValueError(f"{name} must be real for this call; got {value!r}")
        value = complex(value).real
    return float(value)


def _matrices(*pairs: tuple[str, Any]) -> np.dtype:
    """Check 2-D live handles of one dtype (the first pair's); the dtype.  Errors as _as_handle/_same_dtype/_ndim."""
    dt = None
    for name, h in pairs:
        if type(h) is not MatrixHandle or h.deleted:
            _as_handle(h, name)
        if dt is None:
            dt = h.dtype
        elif h.dtype != dt:
            _same_dtype(*pairs)
    for name, h in pairs:
        if len(h.shape) != 2:
            _ndim(h, name, 2)
    return dt  # type: ignore[return-value]


def _three(c: Any, a: Any, b: Any) -> np.dtype:
    """:func:`_matrices` for ("c", c), ("a", a), ("b", b) (b may be None), with a fast path for good operands."""
    if type(c) is MatrixHandle and type(a) is MatrixHandle and not (c.deleted or a.deleted):
        dt = c.dtype
        if (a.dtype is dt or a.dtype == dt) and len(c.shape) == 2 and len(a.shape) == 2:
            if b is None:
                return dt
            if type(b) is MatrixHandle and not b.deleted and (b.dtype is dt or b.dtype == dt) and len(b.shape) == 2:
                return dt
    if b is None:
        return _matrices(("c", c), ("a", a))
    return _matrices(("c", c), ("a", a), ("b", b))


def _distinct(out: tuple[str, MatrixHandle], *ins: tuple[str, MatrixHandle]) -> None:
    user = out[1]._user
    for name, h in ins:
        if h is out[1]:
            raise ValueError(f"{out[0]} must not be the same handle as {name} (BLAS outputs cannot alias inputs)")
        # two handles borrowing arrays that share memory (copy=False): the call would read what it writes
        if user is not None and h is not None and h._user is not None and np.may_share_memory(user, h._user):
            raise ValueError(f"{out[0]} and {name} borrow arrays that share memory (handles made with copy=False); "
                             "BLAS outputs cannot alias inputs: make one of them with copy=True")


def _flop_factor(dt: np.dtype) -> float:
    """Real flops per counted flop: 4 for complex dtypes (one complex multiply-add is four real ones)."""
    return 4.0 if dt.kind == "c" else 1.0


#: (dtype, routine) -> BLAS name, e.g. (float64, "gemm") -> "dgemm"
_NAMES3 = {(dt, r): p + r for dt, p in _openblas.DTYPES.items()
           for r in ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")}


#: id of each supported dtype (NumPy's built-in dtype objects, which arrays share) -> (complex?, routine ->
#: BLAS name): the hot path finds them by identity, without running NumPy's dtype hashing and comparison
_BY_ID = {id(dt): (dt.kind == "c", {r: _NAMES3[dt, r] for dt2, r in _NAMES3 if dt2 is dt})
          for dt in _openblas.DTYPES}


def _info(dt: np.dtype) -> tuple[bool, dict[str, str]]:
    i = _BY_ID.get(id(dt))
    if i is None:  # an equal dtype that is another object
        i = (dt.kind == "c", {r: _NAMES3[dt2, r] for dt2, r in _NAMES3 if dt2 == dt})
    return i


def _op_shape(shape: tuple[int, ...], trans: str) -> tuple[int, int]:
    return (shape[1], shape[0]) if trans != "N" else (shape[0], shape[1])


def _level3_kernel(device: Any, name: str, handles: tuple = ()) -> Callable[..., None]:
    """The Level-3 kernel ``name`` on ``device``; None: the current tile runtime, whose devices with their own
    memory keep the tiles of ``handles`` cached across calls (see :meth:`MatrixHandle._keep_in`)."""
    if device is None:
        from tileblas.blas import _dispatch
        from tileblas.runtime import get_runtime

        def run(*args: Any, **kwargs: Any) -> None:
            mem = getattr(get_runtime(), "memory", None)
            if mem is not None:
                for h in handles:
                    h._keep_in(mem)
            _dispatch.level3(name, *args, **kwargs)

        return run
    return device.kernel(name)


def _submit(name: str, run: Callable[[Any], Any], reads: tuple, writes: tuple, flops: float,
            host_only: bool = False) -> AsyncFuture:
    ex = (writes or reads)[0].executor
    return ex._submit_call(name, run, reads, writes, flops, host_only)


# ----------------------------------------------------------------------------------------- Level 3
def gemm(alpha: Any, a: MatrixHandle, b: MatrixHandle, beta: Any, c: MatrixHandle, transa: str = "N",
         transb: str = "N") -> AsyncFuture:
    """c := alpha*op(a)@op(b) + beta*c, asynchronously; op is N (none), T (transpose), C (conjugate transpose).

    Returns a future whose result is ``c``.
    """
    dt = _three(c, a, b)
    cplx, names = _info(dt)
    if transa != "N":
        transa = _flag(transa, "transa", _TRANS)
    if transb != "N":
        transb = _flag(transb, "transb", _TRANS)
    m, k = a.shape if transa == "N" else a.shape[::-1]
    k2, n = b.shape if transb == "N" else b.shape[::-1]
    if k2 != k or c.shape != (m, n):
        raise ValueError(f"shapes do not match: op(a) is {m}x{k}, op(b) is {k2}x{n}, c is {c.shape}")
    if c is a or c is b or (c._user is not None and (a._user is not None or (b is not None and b._user is not None))):
        _distinct(("c", c), ("a", a), ("b", b))
    if type(alpha) is not float or type(beta) is not float or cplx:
        alpha, beta = _scalar(alpha, "alpha", dt), _scalar(beta, "beta", dt)
    mode = "w" if beta == 0 else "rw"
    run = partial(_run_mm, "gemm", a, b, c, alpha, beta, mode, transa, transb)
    reads = (a, b, c) if mode == "rw" else (a, b)
    return c.executor._submit_call(names["gemm"], run, reads, (c,), (8.0 if cplx else 2.0) * m * n * k, False)


def _run_mm(name: str, a: MatrixHandle, b: MatrixHandle, c: MatrixHandle, alpha: Any, beta: Any, mode: str,
            f1: str, f2: str, dev: Any) -> MatrixHandle:
    """The run function of gemm (f1, f2: transa, transb) and symm/hemm (side, uplo) on ``dev``; bound with
    functools.partial (one object per call, where a closure makes a cell per variable)."""
    A, B, C = a.acquire(dev, "r"), b.acquire(dev, "r"), c.acquire(dev, mode)
    _level3_kernel(dev, name, (a, b, c))(alpha, A, B, beta, C, f1, f2)
    return c


def _symm_like(name: str, alpha, a, b, beta, c, side, uplo) -> AsyncFuture:
    dt = _three(c, a, b)
    cplx, names = _info(dt)
    side, uplo = _flag(side, "side", ("L", "R")), _flag(uplo, "uplo", ("U", "L"))
    m, n = c.shape
    ka = m if side == "L" else n
    if a.shape != (ka, ka) or b.shape != (m, n):
        raise ValueError(f"shapes do not match: side={side} with c {c.shape} needs a ({ka}, {ka}) and b {c.shape};"
                         f" got a {a.shape}, b {b.shape}")
    if c is a or c is b or (c._user is not None and (a._user is not None or (b is not None and b._user is not None))):
        _distinct(("c", c), ("a", a), ("b", b))
    if type(alpha) is not float or type(beta) is not float or cplx:
        alpha, beta = _scalar(alpha, "alpha", dt), _scalar(beta, "beta", dt)
    mode = "w" if beta == 0 else "rw"
    run = partial(_run_mm, name, a, b, c, alpha, beta, mode, side, uplo)
    reads = (a, b, c) if mode == "rw" else (a, b)
    return c.executor._submit_call(names[name], run, reads, (c,), (8.0 if cplx else 2.0) * ka * m * n, False)


def symm(alpha: Any, a: MatrixHandle, b: MatrixHandle, beta: Any, c: MatrixHandle, side: str = "L",
         uplo: str = "U") -> AsyncFuture:
    """c := alpha*a@b + beta*c (side L) or alpha*b@a + beta*c (side R), a symmetric (its uplo triangle)."""
    return _symm_like("symm", alpha, a, b, beta, c, side, uplo)


def hemm(alpha: Any, a: MatrixHandle, b: MatrixHandle, beta: Any, c: MatrixHandle, side: str = "L",
         uplo: str = "U") -> AsyncFuture:
    """As :func:`symm` with a Hermitian."""
    return _symm_like("hemm", alpha, a, b, beta, c, side, uplo)


def _rank_k(name: str, alpha, a, b, beta, c, uplo, trans, herm: bool) -> AsyncFuture:
    dt = _three(c, a, b)
    cplx, names = _info(dt)
    uplo = _flag(uplo, "uplo", ("U", "L"))
    if cplx:
        trans = _flag(trans, "trans", ("N", "C") if herm else ("N", "T"))
    else:
        trans = _flag(trans, "trans", _TRANS)
    n, k = _op_shape(a.shape, trans)
    if c.shape != (n, n) or (b is not None and b.shape != a.shape):
        bs = "" if b is None else f", b {b.shape}"
        raise ValueError(f"shapes do not match: op(a) is {n}x{k} so c must be ({n}, {n}); got c {c.shape}{bs}")
    if c is a or c is b or (c._user is not None and (a._user is not None or (b is not None and b._user is not None))):
        _distinct(("c", c), ("a", a), ("b", b))
    if type(alpha) is not float or type(beta) is not float or cplx:
        alpha = _scalar(alpha, "alpha", dt, real=herm and b is None)
        beta = _scalar(beta, "beta", dt, real=herm)
    ins = (a,) if b is None else (a, b)
    run = partial(_run_rank_k, name, a, b, c, alpha, beta, uplo, trans)

    flops = (1.0 if b is None else 2.0) * n * n * k * (4.0 if cplx else 1.0)
    # c is read too: the other triangle is kept and beta scales the updated one
    return c.executor._submit_call(names[name], run, ins + (c,), (c,), flops, False)


def _run_rank_k(name: str, a: MatrixHandle, b: MatrixHandle | None, c: MatrixHandle, alpha: Any, beta: Any,
                uplo: str, trans: str, dev: Any) -> MatrixHandle:
    """The run function of syrk/herk (b None) and syr2k/her2k on ``dev`` (see _run_mm)."""
    C = c.acquire(dev, "rw")
    # flags by keyword: devices that model a kernel's cost read the output as the last positional
    if b is None:
        _level3_kernel(dev, name, (a, c))(alpha, a.acquire(dev, "r"), beta, C, uplo=uplo, trans=trans)
    else:
        A, B = a.acquire(dev, "r"), b.acquire(dev, "r")
        _level3_kernel(dev, name, (a, b, c))(alpha, A, B, beta, C, uplo=uplo, trans=trans)
    return c


def syrk(alpha: Any, a: MatrixHandle, beta: Any, c: MatrixHandle, uplo: str = "U", trans: str = "N") -> AsyncFuture:
    """c := alpha*op(a)@op(a).T + beta*c on the uplo triangle of c."""
    return _rank_k("syrk", alpha, a, None, beta, c, uplo, trans, herm=False)


def herk(alpha: Any, a: MatrixHandle, beta: Any, c: MatrixHandle, uplo: str = "U", trans: str = "N") -> AsyncFuture:
    """c := alpha*op(a)@op(a).H + beta*c on the uplo triangle of c (alpha, beta real)."""
    return _rank_k("herk", alpha, a, None, beta, c, uplo, trans, herm=True)


def syr2k(alpha: Any, a: MatrixHandle, b: MatrixHandle, beta: Any, c: MatrixHandle, uplo: str = "U",
          trans: str = "N") -> AsyncFuture:
    """c := alpha*op(a)@op(b).T + alpha*op(b)@op(a).T + beta*c on the uplo triangle of c."""
    return _rank_k("syr2k", alpha, a, b, beta, c, uplo, trans, herm=False)


def her2k(alpha: Any, a: MatrixHandle, b: MatrixHandle, beta: Any, c: MatrixHandle, uplo: str = "U",
          trans: str = "N") -> AsyncFuture:
    """c := alpha*op(a)@op(b).H + conj(alpha)*op(b)@op(a).H + beta*c (beta real)."""
    return _rank_k("her2k", alpha, a, b, beta, c, uplo, trans, herm=True)


def _triangular(name: str, alpha, a, b, side, uplo, transa, diag) -> AsyncFuture:
    a, b = _as_handle(a, "a"), _as_handle(b, "b")
    dt = _same_dtype(("b", b), ("a", a))
    _ndim(a, "a", 2)
    _ndim(b, "b", 2)
    side, uplo = _flag(side, "side", ("L", "R")), _flag(uplo, "uplo", ("U", "L"))
    transa, diag = _flag(transa, "transa", _TRANS), _flag(diag, "diag", ("N", "U"))
    m, n = b.shape
    ka = m if side == "L" else n
    if a.shape != (ka, ka):
        raise ValueError(f"shapes do not match: side={side} with b {b.shape} needs a ({ka}, {ka}); got a {a.shape}")
    _distinct(("b", b), ("a", a))
    alpha = _scalar(alpha, "alpha", dt)

    def run(dev: Any) -> MatrixHandle:
        A, B = a.acquire(dev, "r"), b.acquire(dev, "rw")
        _level3_kernel(dev, name, (a, b))(alpha, A, B, side, uplo, transa, diag)
        return b

    return _submit(_openblas.prefix_of(dt) + name, run, (a, b), (b,), float(ka) * m * n * _flop_factor(dt))


def trmm(alpha: Any, a: MatrixHandle, b: MatrixHandle, side: str = "L", uplo: str = "U", transa: str = "N",
         diag: str = "N") -> AsyncFuture:
    """b := alpha*op(a)@b (side L) or alpha*b@op(a) (side R), a triangular."""
    return _triangular("trmm", alpha, a, b, side, uplo, transa, diag)


def trsm(alpha: Any, a: MatrixHandle, b: MatrixHandle, side: str = "L", uplo: str = "U", transa: str = "N",
         diag: str = "N") -> AsyncFuture:
    """Solve op(a)@x = alpha*b (side L) or x@op(a) = alpha*b (side R), x overwriting b."""
    return _triangular("trsm", alpha, a, b, side, uplo, transa, diag)


# ----------------------------------------------------------------------------------------- vectors
def _lib(dev: Any) -> _openblas.BlasLibrary:
    lib = getattr(dev, "library", None) if dev is not None else None
    return lib if lib is not None else _openblas.get_library(1)


def _vec_in(x: np.ndarray, order: str = "F") -> tuple[np.ndarray, int]:
    """(array whose data pointer starts the vector, increment) for reading ``x`` as a vector."""
    if x.ndim == 1:
        s = x.strides[0]
        if s > 0 and s % x.itemsize == 0:
            return x, s // x.itemsize
        return np.ascontiguousarray(x), 1
    flat = x.ravel(order=order)  # a view when x is contiguous in that order
    return flat, 1


def _vec_out(y: np.ndarray) -> tuple[np.ndarray, int, str, bool]:
    """(array, increment, element order, must copy back) for writing ``y`` as a vector."""
    if y.ndim == 1:
        s = y.strides[0]
        if s > 0 and s % y.itemsize == 0:
            return y, s // y.itemsize, "F", False
        return np.ascontiguousarray(y), 1, "F", True
    if y.flags.f_contiguous:
        return y.ravel(order="F"), 1, "F", False
    if y.flags.c_contiguous:
        return y.ravel(order="C"), 1, "C", False
    return np.asfortranarray(y).ravel(order="F"), 1, "F", True


def _writeback(y: np.ndarray, yy: np.ndarray, order: str) -> None:
    y[...] = yy.reshape(y.shape, order=order)


def _pair(x: MatrixHandle, y: MatrixHandle) -> np.dtype:
    dt = _same_dtype(("y", y), ("x", x))
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape; got x {x.shape}, y {y.shape}")
    return dt


def axpy(alpha: Any, x: MatrixHandle, y: MatrixHandle) -> AsyncFuture:
    """y := alpha*x + y (vectors, or matrices element-wise)."""
    x, y = _as_handle(x, "x"), _as_handle(y, "y")
    dt = _pair(x, y)
    _distinct(("y", y), ("x", x))
    alpha = _scalar(alpha, "alpha", dt)
    p = _openblas.prefix_of(dt)
    s = _openblas.scalar_code(p)
    size = y.size

    def run(dev: Any) -> MatrixHandle:
        X, Y = x.acquire(dev, "r"), y.acquire(dev, "rw")
        yy, incy, order, back = _vec_out(Y)
        xx, incx = _vec_in(X, order)
        if back:
            yy = yy.copy()
        _lib(dev).call(p + "axpy", "vi" + s + "aiai", size, alpha, xx, incx, yy, incy)
        if back:
            _writeback(Y, yy, order)
        return y

    return _submit(p + "axpy", run, (x, y), (y,), 2.0 * size * _flop_factor(dt), host_only=True)


def scal(alpha: Any, x: MatrixHandle) -> AsyncFuture:
    """x := alpha*x, asynchronously (x a vector or matrix handle); a future whose result is ``x``."""
    x = _as_handle(x, "x")
    dt = x.dtype
    alpha = _scalar(alpha, "alpha", dt)
    p = _openblas.prefix_of(dt)
    s = _openblas.scalar_code(p)
    size = x.size

    def run(dev: Any) -> MatrixHandle:
        X = x.acquire(dev, "rw")
        xx, incx, order, back = _vec_out(X)
        _lib(dev).call(p + "scal", "vi" + s + "ai", size, alpha, xx, incx)
        if back:
            _writeback(X, xx, order)
        return x

    return _submit(p + "scal", run, (x,), (x,), float(size) * _flop_factor(dt), host_only=True)


def copy(x: MatrixHandle, y: MatrixHandle) -> AsyncFuture:
    """y := x (a copy of the vector or matrix), asynchronously; a future whose result is ``y``."""
    x, y = _as_handle(x, "x"), _as_handle(y, "y")
    dt = _pair(x, y)
    _distinct(("y", y), ("x", x))
    p = _openblas.prefix_of(dt)
    size = y.size

    def run(dev: Any) -> MatrixHandle:
        X, Y = x.acquire(dev, "r"), y.acquire(dev, "w")
        yy, incy, order, back = _vec_out(Y)
        xx, incx = _vec_in(X, order)
        _lib(dev).call(p + "copy", "viaiai", size, xx, incx, yy, incy)
        if back:
            _writeback(Y, yy, order)
        return y

    return _submit(p + "copy", run, (x,), (y,), float(size), host_only=True)


def _dot(x: MatrixHandle, y: MatrixHandle, conj: bool) -> AsyncFuture:
    x, y = _as_handle(x, "x"), _as_handle(y, "y")
    dt = _pair(x, y)
    p = _openblas.prefix_of(dt)
    size = x.size

    def run(dev: Any) -> Any:
        X, Y = x.acquire(dev, "r"), y.acquire(dev, "r")
        xx, incx = _vec_in(X, "F")
        yy, incy = _vec_in(Y, "F")
        lib = _lib(dev)
        if size == 0:
            return dt.type(0)
        if dt.kind == "c":
            out = np.zeros(1, dt)
            fn = "cblas_" + p + ("dotc_sub" if conj else "dotu_sub")
            _openblas.call(lib.address(fn), "vIaIaIa", size, xx, incx, yy, incy, out)
            return out[0]
        return dt.type(lib.call(p + "dot", ("f" if p == "s" else "d") + "iaiai", size, xx, incx, yy, incy))

    name = p + ("dotc" if conj and dt.kind == "c" else ("dotu" if dt.kind == "c" else "dot"))
    reads = (x,) if x is y else (x, y)
    return _submit(name, run, reads, (), 2.0 * size * _flop_factor(dt), host_only=True)


def dot(x: MatrixHandle, y: MatrixHandle) -> AsyncFuture:
    """A future of sum(x*y) (no conjugation: dotu for complex)."""
    return _dot(x, y, conj=False)


def dotc(x: MatrixHandle, y: MatrixHandle) -> AsyncFuture:
    """A future of sum(conj(x)*y)."""
    return _dot(x, y, conj=True)


def nrm2(x: MatrixHandle) -> AsyncFuture:
    """A future of the Euclidean (for matrices: Frobenius) norm of x."""
    x = _as_handle(x, "x")
    dt = x.dtype
    p = _openblas.prefix_of(dt)
    name = {"s": "snrm2", "d": "dnrm2", "c": "scnrm2", "z": "dznrm2"}[p]
    ret = "f" if p in "sc" else "d"
    size = x.size
    rdt = np.dtype(np.float32 if p in "sc" else np.float64)

    def run(dev: Any) -> Any:
        X = x.acquire(dev, "r")
        xx, incx = _vec_in(X, "F")
        if size == 0:
            return rdt.type(0)
        return rdt.type(_lib(dev).call(name, ret + "iai", size, xx, incx))

    return _submit(name, run, (x,), (), 2.0 * size * _flop_factor(dt), host_only=True)


# ----------------------------------------------------------------------------------------- Level 2
def _general(a: np.ndarray, trans: str, p: str) -> tuple[np.ndarray, int, str]:
    return _openblas._general_operand(a, trans, p, allow_r=False)


def gemv(alpha: Any, a: MatrixHandle, x: MatrixHandle, beta: Any, y: MatrixHandle, trans: str = "N") -> AsyncFuture:
    """y := alpha*op(a)@x + beta*y."""
    a, x, y = _as_handle(a, "a"), _as_handle(x, "x"), _as_handle(y, "y")
    dt = _same_dtype(("y", y), ("a", a), ("x", x))
    _ndim(a, "a", 2)
    _ndim(x, "x", 1)
    _ndim(y, "y", 1)
    trans = _flag(trans, "trans", _TRANS)
    m, n = _op_shape(a.shape, trans)
    if x.shape != (n,) or y.shape != (m,):
        raise ValueError(f"shapes do not match: op(a) is {m}x{n}, so x must be ({n},) and y ({m},); "
                         f"got x {x.shape}, y {y.shape}")
    _distinct(("y", y), ("a", a), ("x", x))
    alpha, beta = _scalar(alpha, "alpha", dt), _scalar(beta, "beta", dt)
    p = _openblas.prefix_of(dt)
    s = _openblas.scalar_code(p)
    mode = "w" if beta == 0 else "rw"

    def run(dev: Any) -> MatrixHandle:
        A, X, Y = a.acquire(dev, "r"), x.acquire(dev, "r"), y.acquire(dev, mode)
        if m == 0:
            return y
        if n == 0:
            Y[...] = 0 if beta == 0 else Y * beta
            return y
        aa, lda, t = _general(A, trans, p)
        xx, incx = _vec_in(X)
        yy, incy, _, back = _vec_out(Y)
        if beta == 0:
            yy[...] = 0  # BLAS skips reading y when beta is 0, but NaN garbage must not survive
        _lib(dev).call(p + "gemv", "vcii" + s + "aiai" + s + "ai", t, aa.shape[0], aa.shape[1], alpha, aa, lda,
                       xx, incx, beta, yy, incy)
        if back:
            Y[...] = yy
        return y

    reads = (a, x, y) if mode == "rw" else (a, x)
    return _submit(p + "gemv", run, reads, (y,), 2.0 * m * n * _flop_factor(dt), host_only=True)


def _ger(alpha, x, y, a, conj: bool) -> AsyncFuture:
    x, y, a = _as_handle(x, "x"), _as_handle(y, "y"), _as_handle(a, "a")
    dt = _same_dtype(("a", a), ("x", x), ("y", y))
    _ndim(a, "a", 2)
    _ndim(x, "x", 1)
    _ndim(y, "y", 1)
    m, n = a.shape
    if x.shape != (m,) or y.shape != (n,):
        raise ValueError(f"shapes do not match: a is {a.shape}, so x must be ({m},) and y ({n},); "
                         f"got x {x.shape}, y {y.shape}")
    _distinct(("a", a), ("x", x), ("y", y))
    alpha = _scalar(alpha, "alpha", dt)
    p = _openblas.prefix_of(dt)
    s = _openblas.scalar_code(p)
    fn = p + ("ger" if dt.kind != "c" else ("gerc" if conj else "geru"))

    def run(dev: Any) -> MatrixHandle:
        A, X, Y = a.acquire(dev, "rw"), x.acquire(dev, "r"), y.acquire(dev, "r")
        if m == 0 or n == 0:
            return a
        xx, incx = _vec_in(X)
        yy, incy = _vec_in(Y)
        lib = _lib(dev)
        ld = _openblas.colmajor(A)
        if ld:
            lib.call(fn, "vii" + s + "aiaiai", m, n, alpha, xx, incx, yy, incy, A, ld)
        elif _openblas.colmajor(A.T) and not (conj and dt.kind == "c"):
            # a^T := a^T + alpha y x^T
            lib.call(fn, "vii" + s + "aiaiai", n, m, alpha, yy, incy, xx, incx, A.T, _openblas.colmajor(A.T))
        else:
            f = np.asfortranarray(A)
            lib.call(fn, "vii" + s + "aiaiai", m, n, alpha, xx, incx, yy, incy, f, max(m, 1))
            A[...] = f
        return a

    return _submit(fn, run, (a, x, y), (a,), 2.0 * m * n * _flop_factor(dt), host_only=True)


def ger(alpha: Any, x: MatrixHandle, y: MatrixHandle, a: MatrixHandle) -> AsyncFuture:
    """a := alpha*x@y.T + a (geru for complex)."""
    return _ger(alpha, x, y, a, conj=False)


def gerc(alpha: Any, x: MatrixHandle, y: MatrixHandle, a: MatrixHandle) -> AsyncFuture:
    """a := alpha*x@y.H + a."""
    return _ger(alpha, x, y, a, conj=True)


def trsv(a: MatrixHandle, x: MatrixHandle, uplo: str = "U", trans: str = "N", diag: str = "N") -> AsyncFuture:
    """Solve op(a)@z = x for z, overwriting x (a triangular)."""
    a, x = _as_handle(a, "a"), _as_handle(x, "x")
    dt = _same_dtype(("x", x), ("a", a))
    _ndim(a, "a", 2)
    _ndim(x, "x", 1)
    uplo, trans = _flag(uplo, "uplo", ("U", "L")), _flag(trans, "trans", _TRANS)
    diag = _flag(diag, "diag", ("N", "U"))
    n = x.shape[0]
    if a.shape != (n, n):
        raise ValueError(f"shapes do not match: x is ({n},) so a must be ({n}, {n}); got a {a.shape}")
    _distinct(("x", x), ("a", a))
    p = _openblas.prefix_of(dt)
    t0 = "T" if (trans == "C" and dt.kind != "c") else trans

    def run(dev: Any) -> MatrixHandle:
        A, X = a.acquire(dev, "r"), x.acquire(dev, "rw")
        if n == 0:
            return x
        ld = _openblas.colmajor(A)
        if ld:
            aa, up, t = A, uplo, t0
        elif _openblas.colmajor(A.T) and t0 != "C":
            aa, ld, up, t = A.T, _openblas.colmajor(A.T), ("L" if uplo == "U" else "U"), ("T" if t0 == "N" else "N")
        else:
            aa, ld = np.asfortranarray(A), max(n, 1)
            up, t = uplo, t0
        xx, incx, _, back = _vec_out(X)
        _lib(dev).call(p + "trsv", "vccci" + "aiai", up, t, diag, n, aa, ld, xx, incx)
        if back:
            X[...] = xx
        return x

    return _submit(p + "trsv", run, (a, x), (x,), float(n) * n * _flop_factor(dt), host_only=True)
