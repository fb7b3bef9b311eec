"""Level-1 routines of tileblas.blas: a drop-in for the Level-1 part of :mod:`scipy.linalg.blas`.

What this module owns
    rotg, rotmg, rot (incl. csrot, zdrot), rotm, swap, scal (incl. csscal, zdscal), copy, axpy, dot,
    dotu, dotc, nrm2 (incl. scnrm2, dznrm2), asum (incl. scasum, dzasum) and i?amax, in every precision
    SciPy exposes, with SciPy's names, signatures, defaults, return types and in-place semantics.  Each
    routine is built by a factory per family (``_make_axpy('d')`` ...), so one body serves the four
    precisions; the native address and signature string are bound into the closure at import.

Behaviour found by probing SciPy 1.17 (and reproduced here)
    * ``n`` defaults to ``(len(x) - offx) // |incx|`` (``(len(x) - 1 - offx) // |incx| + 1`` for rot);
      ``0 <= offx < len(x)`` is required even when ``n`` is 0 (so empty vectors raise); ``incx != 0``;
      ``len(x) - offx > (n - 1) * |incx|`` (same for y).  ``n <= 0`` is allowed and does nothing
      (``dot``/``nrm2``/``asum`` give 0, ``i?amax`` gives -1).
    * nrm2 requires ``incx > 0``.  Negative increments elsewhere follow reference BLAS from the offset:
      element ``i`` is ``x[offx + (n - 1 - i) * |incx|]``; ``scal``, ``asum`` and ``i?amax`` do nothing
      (0, -1) for ``incx < 0``, as BLAS does.
    * swap, scal, copy and axpy write their in/out vector in place when it is a Fortran-contiguous
      array of the routine's dtype and return that same object; otherwise they return a converted copy.
      rot, rotm, csscal and zdscal copy unless ``overwrite_x`` / ``overwrite_y`` is true.
    * dot, nrm2 and asum return Python ``float`` (``complex`` for dotu/dotc), i?amax a 0-based ``int``,
      rotg a tuple of Python scalars (complex ``c`` for crotg/zrotg), rotmg a 5-element array.
    * Complex ``c``/``s``/``a`` given to real arguments keep their real part.

Fast path
    For the common call (exact ``numpy.ndarray`` operands of the right dtype, unit stride, default
    ``n``/offsets/increments) each routine checks a handful of attributes with identity tests and calls
    the native routine directly: ``daxpy`` on 16 elements costs about 1.5x SciPy's call.  Anything else
    takes the general path through :mod:`tileblas.blas._common`.

What it must not touch
    Level-2/3 routines and get_blas_funcs (other modules); the kernel layer's shared state.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tileblas.kernels import _native
from tileblas.blas._common import (
    DTYPE,
    REAL_CODE,
    REAL_DTYPE,
    SCALAR_CODE,
    as_inout,
    as_int,
    as_real,
    as_scalar,
    as_vector,
    check_inc,
    check_off,
    check_span,
    default_len,
    default_len_rot,
    front,
    small_path,
    unalias,
)
from tileblas.kernels._openblas import get_library
from tileblas.kernels._threadpool import default_threads

_call = _native.call
_nd = np.ndarray
_may_share = np.may_share_memory
# The instance on all the cores (as SciPy's OpenBLAS): OpenBLAS itself runs a call on one thread below its
# own size thresholds, so small calls cost the same, and large (memory-bound) ones get every core's
# bandwidth; threadpoolctl's limits reach it like every tileblas instance.
_LIB = get_library(default_threads())

_REAL_PREFIXES = ("s", "d")
_ALL_PREFIXES = ("s", "d", "c", "z")


def _writable_f(a: np.ndarray) -> bool:
    """Second-tier fast-path test: BLAS may write ``a`` in place as a flat Fortran-order vector."""
    f = a.flags
    return f.f_contiguous and (f.writeable or a.base is None)


def _fortran(name: str) -> int:
    return _LIB.fortran(name)


def _name(fn: Callable[..., Any], name: str, doc: str) -> Callable[..., Any]:
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__module__ = "tileblas.blas"
    fn.__doc__ = doc
    return fn


_VEC_DOC = """
Parameters follow :func:`scipy.linalg.blas.{name}` exactly (same positional order, keywords and
defaults); see its documentation.  Computed by tileblas' own OpenBLAS without holding the GIL.

Signature: ``{sig}``
"""


def _doc(name: str, sig: str, summary: str) -> str:
    return summary + "\n" + _VEC_DOC.format(name=name, sig=sig)


# ---------------------------------------------------------------------------------------------------
# shared general path for routines on (x, y)
# ---------------------------------------------------------------------------------------------------


def _pair(
    dt: np.dtype,
    x: Any,
    y: Any,
    n: Any,
    offx: Any,
    incx: Any,
    offy: Any,
    incy: Any,
    x_mode: int,
    y_mode: int,
    rot_default: bool = False,
) -> tuple[Any, np.ndarray, Any, np.ndarray, int, int, int, int, int]:
    """Convert and check the operands of a two-vector routine.

    ``*_mode``: 0 read-only, 1 in place when possible (intent(in,out)), 2 copy (overwrite false),
    3 overwrite requested.  Returns ``(xret, xflat, yret, yflat, n, offx, incx, offy, incy)``.
    """
    if x_mode == 0:
        xr = xf = as_vector(x, dt, "x")
    else:
        xr, xf = as_inout(x, dt, "x", x_mode != 2)
    if y_mode == 0:
        yr = yf = as_vector(y, dt, "y")
    else:
        yr, yf = as_inout(y, dt, "y", y_mode != 2)
    incx = check_inc(incx, "incx")
    incy = check_inc(incy, "incy")
    lx = xf.shape[0]
    ly = yf.shape[0]
    offx = check_off(offx, lx, "offx", "x")
    offy = check_off(offy, ly, "offy", "y")
    if n is None:
        n = default_len_rot(lx, offx, incx) if rot_default else default_len(lx, offx, incx)
    else:
        n = as_int(n, "n")
    check_span(n, lx, offx, incx, "x")
    check_span(n, ly, offy, incy, "y")
    return xr, xf, yr, yf, n, offx, incx, offy, incy


def _single(
    dt: np.dtype, x: Any, n: Any, offx: Any, incx: Any, mode: int, positive: bool = False
) -> tuple[Any, np.ndarray, int, int, int]:
    """Convert and check the operand of a one-vector routine; ``mode`` as in :func:`_pair`."""
    if mode == 0:
        xr = xf = as_vector(x, dt, "x")
    else:
        xr, xf = as_inout(x, dt, "x", mode != 2)
    incx = check_inc(incx, "incx", positive)
    lx = xf.shape[0]
    offx = check_off(offx, lx, "offx", "x")
    n = default_len(lx, offx, incx) if n is None else as_int(n, "n")
    check_span(n, lx, offx, incx, "x")
    return xr, xf, n, offx, incx


# ---------------------------------------------------------------------------------------------------
# rotg, rotmg
# ---------------------------------------------------------------------------------------------------


def _make_rotg(p: str) -> Callable[..., Any]:
    dt = DTYPE[p]
    rdt = REAL_DTYPE[p]
    it = dt.itemsize
    addr = _fortran(p + "rotg")
    real = p in _REAL_PREFIXES
    small = small_path("rotg", p, addr)

    def rotg(a: Any, b: Any) -> tuple[Any, Any]:
        a = as_scalar(p, a, "a")
        b = as_scalar(p, b, "b")
        ab = np.array([a, b], dtype=dt)
        c = np.zeros(1, dtype=rdt)
        s = np.zeros(1, dtype=dt)
        _call(addr, "vAAaa", ab, 0, ab, it, c, s)
        if real:
            return float(c[0]), float(s[0])
        return complex(float(c[0]), 0.0), complex(s[0])

    return front(small, _name(
        rotg,
        p + "rotg",
        _doc(p + "rotg", f"c, s = {p}rotg(a, b)", "Givens rotation parameters."),
    ))


def _make_rotmg(p: str) -> Callable[..., Any]:
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(p + "rotmg")
    small = small_path("rotmg", p, addr)

    def rotmg(d1: Any, d2: Any, x1: Any, y1: Any) -> np.ndarray:
        buf = np.array(
            [as_real(d1, "d1"), as_real(d2, "d2"), as_real(x1, "x1"), as_real(y1, "y1")], dtype=dt
        )
        param = np.zeros(5, dtype=dt)
        _call(addr, "vAAAAa", buf, 0, buf, it, buf, 2 * it, buf, 3 * it, param)
        return param

    return front(small, _name(
        rotmg,
        p + "rotmg",
        _doc(p + "rotmg", f"param = {p}rotmg(d1, d2, x1, y1)", "Modified Givens rotation parameters."),
    ))


# ---------------------------------------------------------------------------------------------------
# rot, rotm
# ---------------------------------------------------------------------------------------------------


def _make_rot(name: str, vp: str) -> Callable[..., Any]:
    dt = DTYPE[vp]
    it = dt.itemsize
    rc = REAL_CODE[vp]
    addr = _fortran(name)
    sig = "viAiAi" + rc + rc
    small = small_path("rot", vp, addr)

    def rot(
        x: Any,
        y: Any,
        c: Any,
        s: Any,
        n: Any = None,
        offx: Any = 0,
        incx: Any = 1,
        offy: Any = 0,
        incy: Any = 1,
        overwrite_x: Any = 0,
        overwrite_y: Any = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        xr, xf, yr, yf, n, offx, incx, offy, incy = _pair(
            dt, x, y, n, offx, incx, offy, incy, 3 if overwrite_x else 2, 3 if overwrite_y else 2, True
        )
        c = as_real(c, "c")
        s = as_real(s, "s")
        _call(addr, sig, n, xf, offx * it, incx, yf, offy * it, incy, c, s)
        return xr, yr

    return front(small, _name(
        rot,
        name,
        _doc(name, f"x, y = {name}(x, y, c, s, [n, offx, incx, offy, incy, overwrite_x, overwrite_y])",
             "Apply a plane rotation to (x, y)."),
    ))


def _make_rotm(p: str) -> Callable[..., Any]:
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(p + "rotm")
    small = small_path("rotm", p, addr)

    def rotm(
        x: Any,
        y: Any,
        param: Any,
        n: Any = None,
        offx: Any = 0,
        incx: Any = 1,
        offy: Any = 0,
        incy: Any = 1,
        overwrite_x: Any = 0,
        overwrite_y: Any = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        pa = as_vector(param, dt, "param")
        if pa.shape[0] != 5:
            raise ValueError(f"param must have 5 elements; got param of length {pa.shape[0]}")
        xr, xf, yr, yf, n, offx, incx, offy, incy = _pair(
            dt, x, y, n, offx, incx, offy, incy, 3 if overwrite_x else 2, 3 if overwrite_y else 2
        )
        _call(addr, "viAiAia", n, xf, offx * it, incx, yf, offy * it, incy, pa)
        return xr, yr

    return front(small, _name(
        rotm,
        p + "rotm",
        _doc(p + "rotm", f"x, y = {p}rotm(x, y, param, [n, offx, incx, offy, incy, overwrite_x, overwrite_y])",
             "Apply a modified Givens rotation to (x, y)."),
    ))


# ---------------------------------------------------------------------------------------------------
# swap, scal, copy, axpy
# ---------------------------------------------------------------------------------------------------


def _make_swap(p: str) -> Callable[..., Any]:
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(p + "swap")
    small = small_path("swap", p, addr)

    def swap(
        x: Any, y: Any, n: Any = None, offx: Any = 0, incx: Any = 1, offy: Any = 0, incy: Any = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        if n is None and offx == 0 == offy and incx == 1 == incy:
            try:
                if x.dtype is dt is y.dtype and (
                    (x.base is None is y.base and x.ndim == 1 == y.ndim) or (_writable_f(x) and _writable_f(y))
                ):
                    k = x.size
                    if y.size >= k > 0:
                        _call(addr, "viaiai", k, x, 1, y, 1)
                        return x, y
            except (AttributeError, TypeError, OverflowError):  # not an ndarray: general path (nothing was called)
                pass
        xr, xf, yr, yf, n, offx, incx, offy, incy = _pair(dt, x, y, n, offx, incx, offy, incy, 1, 1)
        _call(addr, "viAiAi", n, xf, offx * it, incx, yf, offy * it, incy)
        return xr, yr

    return front(small, _name(
        swap, p + "swap",
        _doc(p + "swap", f"x, y = {p}swap(x, y, [n, offx, incx, offy, incy])", "Swap x and y."),
    ))


def _make_scal(p: str) -> Callable[..., Any]:
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(p + "scal")
    sc = SCALAR_CODE[p]
    sig_fast = "vi" + sc + "ai"
    sig = "vi" + sc + "Ai"
    small = small_path("scal", p, addr)

    def scal(a: Any, x: Any, n: Any = None, offx: Any = 0, incx: Any = 1) -> np.ndarray:
        if n is None and offx == 0 and incx == 1:
            try:
                if x.dtype is dt and ((x.base is None and x.ndim == 1) or _writable_f(x)):
                    k = x.size
                    if k:
                        _call(addr, sig_fast, k, a, x, 1)
                        return x
            except (AttributeError, TypeError, OverflowError):  # not an ndarray, a needs conversion, or a size over
                # 32 bits: nothing was called; the general path converts or names the argument
                pass
        a = as_scalar(p, a, "a")
        xr, xf, n, offx, incx = _single(dt, x, n, offx, incx, 1)
        _call(addr, sig, n, a, xf, offx * it, incx)
        return xr

    return front(small, _name(scal, p + "scal", _doc(p + "scal", f"x = {p}scal(a, x, [n, offx, incx])", "x <- a*x.")))


def _make_rscal(name: str, vp: str) -> Callable[..., Any]:
    """csscal / zdscal: complex vector times a real scalar, copy unless overwrite_x."""
    dt = DTYPE[vp]
    it = dt.itemsize
    addr = _fortran(name)
    sig = "vi" + REAL_CODE[vp] + "Ai"
    small = small_path("rscal", vp, addr)

    def rscal(a: Any, x: Any, n: Any = None, offx: Any = 0, incx: Any = 1, overwrite_x: Any = 0) -> np.ndarray:
        a = as_real(a, "a")
        xr, xf, n, offx, incx = _single(dt, x, n, offx, incx, 3 if overwrite_x else 2)
        _call(addr, sig, n, a, xf, offx * it, incx)
        return xr

    return front(small, _name(
        rscal, name, _doc(name, f"x = {name}(a, x, [n, offx, incx, overwrite_x])", "x <- a*x with a real.")
    ))


def _make_copy(p: str) -> Callable[..., Any]:
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(p + "copy")
    small = small_path("copy", p, addr)

    def copy(x: Any, y: Any, n: Any = None, offx: Any = 0, incx: Any = 1, offy: Any = 0, incy: Any = 1) -> np.ndarray:
        if n is None and offx == 0 == offy and incx == 1 == incy:
            try:
                if x.dtype is dt is y.dtype and (
                    (x.base is None is y.base and x.ndim == 1 == y.ndim)
                    or (x.flags.f_contiguous and _writable_f(y))
                ):
                    k = x.size
                    if y.size >= k > 0 and not _may_share(x, y):
                        _call(addr, "viaiai", k, x, 1, y, 1)
                        return y
            except (AttributeError, TypeError, OverflowError):  # not an ndarray: general path (nothing was called)
                pass
        xr, xf, yr, yf, n, offx, incx, offy, incy = _pair(dt, x, y, n, offx, incx, offy, incy, 0, 1)
        (xf,) = unalias(yf, xf)
        _call(addr, "viAiAi", n, xf, offx * it, incx, yf, offy * it, incy)
        return yr

    return front(small, _name(
        copy,
        p + "copy",
        _doc(p + "copy", f"y = {p}copy(x, y, [n, offx, incx, offy, incy])", "y <- x."),
    ))


def _make_axpy(p: str) -> Callable[..., Any]:
    dt = DTYPE[p]
    it = dt.itemsize
    addr = _fortran(p + "axpy")
    sc = SCALAR_CODE[p]
    sig_fast = "vi" + sc + "aiai"
    sig = "vi" + sc + "AiAi"
    small = small_path("axpy", p, addr)

    def axpy(
        x: Any, y: Any, n: Any = None, a: Any = 1.0, offx: Any = 0, incx: Any = 1, offy: Any = 0, incy: Any = 1
    ) -> np.ndarray:
        if n is None and offx == 0 == offy and incx == 1 == incy:
            try:
                if x.dtype is dt is y.dtype and (
                    (x.base is None is y.base and x.ndim == 1 == y.ndim)
                    or (x.flags.f_contiguous and _writable_f(y))
                ):
                    k = x.size
                    if y.size >= k > 0 and not _may_share(x, y):
                        _call(addr, sig_fast, k, a, x, 1, y, 1)
                        return y
            except (AttributeError, TypeError, OverflowError):  # not an ndarray, a needs conversion, or a size over
                # 32 bits: nothing was called; the general path converts or names the argument
                pass
        a = as_scalar(p, a, "a", 1.0)
        xr, xf, yr, yf, n, offx, incx, offy, incy = _pair(dt, x, y, n, offx, incx, offy, incy, 0, 1)
        (xf,) = unalias(yf, xf)
        _call(addr, sig, n, a, xf, offx * it, incx, yf, offy * it, incy)
        return yr

    return front(small, _name(
        axpy, p + "axpy", _doc(p + "axpy", f"z = {p}axpy(x, y, [n, a, offx, incx, offy, incy])", "y <- a*x + y.")
    ))


# ---------------------------------------------------------------------------------------------------
# dot, dotu, dotc, nrm2, asum, iamax
# ---------------------------------------------------------------------------------------------------


def _make_dot(name: str, vp: str) -> Callable[..., Any]:
    dt = DTYPE[vp]
    it = dt.itemsize
    if vp in _REAL_PREFIXES:
        addr = _fortran(name)
        rk = "f" if vp == "s" else "d"
        sig_fast = rk + "iaiai"
        sig = rk + "iAiAi"
        small = small_path("dot", vp, addr)

        def dot(x: Any, y: Any, n: Any = None, offx: Any = 0, incx: Any = 1, offy: Any = 0, incy: Any = 1) -> float:
            if n is None and offx == 0 == offy and incx == 1 == incy:
                try:
                    if x.dtype is dt is y.dtype and (
                        (x.base is None is y.base and x.ndim == 1 == y.ndim)
                        or (x.flags.f_contiguous and y.flags.f_contiguous)
                    ):
                        k = x.size
                        if y.size >= k > 0:
                            return _call(addr, sig_fast, k, x, 1, y, 1)
                except (AttributeError, TypeError, OverflowError):  # not an ndarray: general path (nothing was called)
                    pass
            _, xf, _, yf, n, offx, incx, offy, incy = _pair(dt, x, y, n, offx, incx, offy, incy, 0, 0)
            return _call(addr, sig, n, xf, offx * it, incx, yf, offy * it, incy)

    else:
        caddr = _LIB.address("cblas_" + name + "_sub")
        small = small_path(name[1:], vp, caddr)

        def dot(x: Any, y: Any, n: Any = None, offx: Any = 0, incx: Any = 1, offy: Any = 0, incy: Any = 1) -> complex:
            _, xf, _, yf, n, offx, incx, offy, incy = _pair(dt, x, y, n, offx, incx, offy, incy, 0, 0)
            out = np.zeros(1, dtype=dt)
            _call(caddr, "vIAIAIa", n, xf, offx * it, incx, yf, offy * it, incy, out)
            return complex(out[0])

    return front(small, _name(dot, name, _doc(name, f"xy = {name}(x, y, [n, offx, incx, offy, incy])", "Dot product.")))


def _make_reduce(name: str, vp: str, kind: str) -> Callable[..., Any]:
    """nrm2 / asum (real result) and iamax (0-based index) on one vector."""
    dt = DTYPE[vp]
    it = dt.itemsize
    addr = _fortran(name)
    if kind == "iamax":
        rk = "i"
    else:
        rk = "f" if vp in ("s", "c") else "d"
    sig_fast = rk + "iai"
    sig = rk + "iAi"
    positive = kind == "nrm2"
    index = kind == "iamax"
    small = small_path(kind, vp, addr)

    def reduce(x: Any, n: Any = None, offx: Any = 0, incx: Any = 1) -> Any:
        if n is None and offx == 0 and incx == 1:
            try:
                if x.dtype is dt and ((x.base is None and x.ndim == 1) or x.flags.f_contiguous) and x.size:
                    r = _call(addr, sig_fast, x.size, x, 1)
                    return r - 1 if index else r
            except (AttributeError, TypeError, OverflowError):  # not an ndarray: general path (nothing was called)
                pass
        _, xf, n, offx, incx = _single(dt, x, n, offx, incx, 0, positive)
        r = _call(addr, sig, n, xf, offx * it, incx)
        return r - 1 if index else r

    out = "k" if index else ("n2" if kind == "nrm2" else "s")
    summary = {
        "nrm2": "Euclidean norm of x.",
        "asum": "Sum of ``|Re x_i| + |Im x_i|``.",
        "iamax": "0-based index of the first element of largest ``|Re| + |Im|``.",
    }[kind]
    return front(small, _name(reduce, name, _doc(name, f"{out} = {name}(x, [n, offx, incx])", summary)))


# ---------------------------------------------------------------------------------------------------
# the namespace
# ---------------------------------------------------------------------------------------------------

_ROUTINES: dict[str, Callable[..., Any]] = {}
for _p in _ALL_PREFIXES:
    _ROUTINES[_p + "rotg"] = _make_rotg(_p)
    _ROUTINES[_p + "swap"] = _make_swap(_p)
    _ROUTINES[_p + "scal"] = _make_scal(_p)
    _ROUTINES[_p + "copy"] = _make_copy(_p)
    _ROUTINES[_p + "axpy"] = _make_axpy(_p)
    _ROUTINES["i" + _p + "amax"] = _make_reduce("i" + _p + "amax", _p, "iamax")
for _p in _REAL_PREFIXES:
    _ROUTINES[_p + "rotmg"] = _make_rotmg(_p)
    _ROUTINES[_p + "rotm"] = _make_rotm(_p)
    _ROUTINES[_p + "rot"] = _make_rot(_p + "rot", _p)
    _ROUTINES[_p + "dot"] = _make_dot(_p + "dot", _p)
for _name_, _vp in (("csrot", "c"), ("zdrot", "z")):
    _ROUTINES[_name_] = _make_rot(_name_, _vp)
for _name_, _vp in (("csscal", "c"), ("zdscal", "z")):
    _ROUTINES[_name_] = _make_rscal(_name_, _vp)
for _p in ("c", "z"):
    _ROUTINES[_p + "dotu"] = _make_dot(_p + "dotu", _p)
    _ROUTINES[_p + "dotc"] = _make_dot(_p + "dotc", _p)
for _name_, _vp in (("snrm2", "s"), ("dnrm2", "d"), ("scnrm2", "c"), ("dznrm2", "z")):
    _ROUTINES[_name_] = _make_reduce(_name_, _vp, "nrm2")
for _name_, _vp in (("sasum", "s"), ("dasum", "d"), ("scasum", "c"), ("dzasum", "z")):
    _ROUTINES[_name_] = _make_reduce(_name_, _vp, "asum")

globals().update(_ROUTINES)
__all__ = sorted(_ROUTINES)

del _p, _name_, _vp
