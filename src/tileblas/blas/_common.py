"""Argument conversion shared by the tileblas.blas wrappers, emulating SciPy's f2py semantics.

What this module owns
    The rules by which ``scipy.linalg.blas`` (f2py wrappers) turn Python arguments into BLAS arguments,
    re-implemented once so that every wrapper in :mod:`tileblas.blas._level1`, :mod:`tileblas.blas._level2` (and the
    Level-3 wrappers) behaves the same way.  Probed against SciPy 1.17:

    * Scalars (``alpha``, ``a``, ``c``, ``s`` ...): ``None`` means the default; a complex given to a real
      argument keeps its real part; a string is parsed by ``float`` (real) but rejected for complex
      arguments; an array or sequence gives its first element.  Integers (``n``, ``incx``, flags) accept
      anything ``int()`` accepts and truncate floats.
    * Arrays are cast to the routine's dtype (a complex array given to a real routine loses its
      imaginary part with NumPy's ``ComplexWarning``), lists and scalars are accepted, vectors of any rank
      are read in Fortran order (``dimension(*)``), rank-2 arguments accept rank 0/1 (read as a column).
    * ``intent(in,out)`` (``y`` of axpy/copy, ``x`` of scal, ``x``/``y`` of swap): a Fortran-contiguous
      array of the right dtype is written in place and returned as the same object; anything else is
      copied (Fortran order) and the copy is returned.  ``intent(in,out,copy)`` with ``overwrite_*``:
      the same, but in place only when ``overwrite_*`` is true.  Like SciPy, an array that owns its
      memory is written even when its ``writeable`` flag is off; a read-only *view* is copied instead
      (SciPy writes it too), because its memory may really be read-only (a mapped file, a bytes object).
    * An output written in place that shares memory with an input (``x`` a column of ``a`` in trmv, ``y``
      one element on from ``x`` in axpy, ``c is a`` in gemm) has that input read from a copy of its own
      (:func:`unalias`), so the result is the one separate operands give: BLAS would read what it has
      already overwritten (SciPy does, and gives another answer where the loop order meets the overlap).
    * Offsets, increments and lengths are checked the way the f2py ``check(...)`` clauses do
      (``0 <= off < len``, ``inc != 0``, ``len - off > (n-1)*|inc|``), raising ValueError naming the
      argument and its value (SciPy raises its own ``_fblas.error``).

What it must not touch
    Computation: the wrappers call native BLAS through :mod:`tileblas.kernels._native`; this module only
    converts and checks.  The per-call fast paths live in the wrappers themselves (a function call here
    would cost more than the whole fast path).
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable

import numpy as np

from tileblas._dtypes import DTYPE_OF, REAL_CODE, REAL_DTYPE_OF, SCALAR_CODE
from tileblas.kernels._openblas import INT32_MAX, INT_LIMIT, colmajor

__all__ = [
    "F32",
    "F64",
    "C64",
    "C128",
    "DTYPE",
    "REAL_DTYPE",
    "SCALAR_CODE",
    "REAL_CODE",
    "as_int",
    "as_real",
    "as_complex",
    "as_scalar",
    "as_flag",
    "as_vector",
    "writable",
    "as_inout",
    "as_matrix",
    "as_inout_matrix",
    "check_inc",
    "check_off",
    "check_span",
    "default_len",
    "default_len_rot",
    "column_major",
    "unalias",
]

#: The precision table (:mod:`tileblas._dtypes`) under the names this layer uses.
DTYPE = DTYPE_OF
REAL_DTYPE = REAL_DTYPE_OF
F32, F64, C64, C128 = (DTYPE_OF[p] for p in "sdcz")

_nd = np.ndarray


# ---------------------------------------------------------------------------------------------------
# scalars
# ---------------------------------------------------------------------------------------------------


def _first(v: Any) -> Any:
    """f2py reads a scalar from an array or sequence as its first element."""
    if isinstance(v, _nd):
        if v.size == 0:
            raise ValueError("empty array")
        return v.reshape(-1)[0].item()
    if isinstance(v, (list, tuple)):
        if not v:
            raise ValueError("empty sequence")
        return _first(v[0])
    return v


def as_int(v: Any, name: str, default: int | None = None) -> int:
    """Convert an integer argument like f2py: ``None`` -> ``default``, floats truncate.

    Raises
    ------
    TypeError
        When ``v`` has no integer value (the message names ``name`` and ``v``).
    """
    if type(v) is int:
        return v
    if v is None and default is not None:
        return default
    try:
        return operator.index(v)
    except TypeError:
        pass
    try:
        w = _first(v)
        if isinstance(w, complex):
            w = w.real
        return int(w)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{name} must be an integer; got {v!r}") from None


def as_real(v: Any, name: str, default: float | None = None) -> float:
    """Convert a real scalar argument like f2py (complex -> real part, str parsed, arrays -> first)."""
    if type(v) is float:
        return v
    if v is None and default is not None:
        return default
    try:
        w = _first(v)
        if isinstance(w, (complex, np.complexfloating)):
            return float(w.real)
        return float(w)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{name} must be a real number; got {v!r}") from None


def as_complex(v: Any, name: str, default: complex | None = None) -> complex:
    """Convert a complex scalar argument like f2py (strings are rejected, arrays -> first element)."""
    if type(v) is complex:
        return v
    if v is None and default is not None:
        return default
    try:
        w = _first(v)
        if isinstance(w, (str, bytes)):
            raise TypeError
        return complex(w)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{name} must be a complex number; got {v!r}") from None


def as_scalar(prefix: str, v: Any, name: str, default: complex | float | None = None) -> Any:
    """Scalar of precision ``prefix`` ('s', 'd': real; 'c', 'z': complex)."""
    if prefix in "sd":
        if type(v) is float:
            return v
        return as_real(v, name, None if default is None else complex(default).real)
    if type(v) is complex:
        return v
    return as_complex(v, name, None if default is None else complex(default))


def as_flag(v: Any, name: str, allowed: tuple[int, ...], default: int = 0) -> int:
    """An integer option (``trans``, ``lower``, ``diag``) that must be one of ``allowed``."""
    k = as_int(v, name, default)
    if k not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; got {name}={k!r}")
    return k


# ---------------------------------------------------------------------------------------------------
# arrays
# ---------------------------------------------------------------------------------------------------


def _cast(obj: Any, dtype: np.dtype, name: str, copy: bool) -> np.ndarray:
    try:
        if isinstance(obj, _nd):
            return obj.astype(dtype, order="F")  # always a copy
        if copy:
            return np.array(obj, dtype=dtype, order="F", copy=True)
        return np.asarray(obj, dtype=dtype, order="F")
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} cannot be converted to a {dtype} array ({exc}); got {_short(obj)}") from None


def _short(obj: Any) -> str:
    if isinstance(obj, _nd):
        return f"array of shape {obj.shape} and dtype {obj.dtype}"
    r = repr(obj)
    return r if len(r) <= 60 else r[:57] + "..."


def _usable(a: np.ndarray, dtype: np.dtype) -> bool:
    """True when ``a`` can be handed to BLAS as it is (dtype, Fortran-contiguous, aligned)."""
    if a.dtype != dtype:
        return False
    f = a.flags
    return f.f_contiguous and f.aligned


def writable(a: np.ndarray) -> bool:
    """True when BLAS may write into ``a``: its writeable flag is on, or it owns its (heap) memory."""
    return a.base is None or a.flags.writeable


def as_vector(obj: Any, dtype: np.dtype, name: str) -> np.ndarray:
    """A read-only ``dimension(*)`` argument: a contiguous 1-D array of ``dtype`` (a view when possible).

    Arrays of any rank are read in Fortran order, as f2py does.
    """
    if isinstance(obj, _nd) and _usable(obj, dtype):
        a = obj
    else:
        a = _cast(obj, dtype, name, copy=False)
        if not a.flags.aligned:
            a = a.copy(order="F")
    if a.ndim != 1:
        a = a.reshape(-1, order="F")
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
    return a


def as_inout(obj: Any, dtype: np.dtype, name: str, overwrite: Any = True) -> tuple[np.ndarray, np.ndarray]:
    """An ``intent(in,out[,copy])`` vector: ``(returned, flat)``.

    ``returned`` is ``obj`` itself when it is a writeable, aligned, Fortran-contiguous array of ``dtype``
    and ``overwrite`` is true; otherwise a Fortran-order copy.  ``flat`` is a 1-D view of ``returned``
    that BLAS writes.
    """
    if overwrite and isinstance(obj, _nd) and _usable(obj, dtype) and writable(obj):
        out = obj
    else:
        out = _cast(obj, dtype, name, copy=True)
        if out.ndim == 0:
            out = out.reshape(1)
    flat = out if out.ndim == 1 else out.reshape(-1, order="F")
    return out, flat


def unalias(out: np.ndarray, *inputs: np.ndarray) -> list[np.ndarray]:
    """``inputs``, each replaced by a copy of its own (same layout) where it may share memory with the
    output ``out`` that BLAS writes in place, so that BLAS never reads what it has already written."""
    may_share = np.may_share_memory
    return [i.copy(order="K") if may_share(out, i) else i for i in inputs]


def small_path(kind: str, prefix: str, address: int) -> Callable[..., Any]:
    """The C small-call path of a Level-1/2 routine (:class:`tileblas.blas._fastpath.Level12`): given every
    argument positionally it computes a common call at once (default n, offsets 0, increments 1, operands
    BLAS takes as they are) or returns NotImplemented, having done nothing.  Without the compiled module,
    a function that always returns NotImplemented."""
    try:
        from tileblas.blas._fastpath import Level12
    except ImportError:  # pragma: no cover - a build without the C module
        return _not_handled
    return Level12(kind, prefix, address)


def _not_handled(*args: Any) -> Any:
    return NotImplemented


def front(small: Callable[..., Any], fn: Callable[..., Any],
          fallback: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """The routine as users get it: the small-call path ``small`` (a bare ``Level12`` from
    :func:`small_path`, or a ``Level3``, of :mod:`tileblas.blas._fastpath`) in front of its Python
    implementation ``fn`` (named and documented).  Called as ``fn`` is -- positionally or by
    keyword -- it binds the arguments in C and computes a common call at once; every other call, and
    every binding it does not do, goes to ``fn`` as made, which converts, checks and raises.
    ``__name__``, ``__doc__``, ``__wrapped__`` (so ``inspect.signature``) are ``fn``'s; pickled by name.
    ``fallback``: what the C path calls instead of ``fn`` (taking ``fn``'s arguments).  Without the
    compiled module, ``fn`` itself."""
    if small is _not_handled:  # pragma: no cover - a build without the C module
        return fn
    code = fn.__code__
    routine = small.front(fallback or fn, code.co_varnames[: code.co_argcount], fn.__defaults__ or ())
    return functools.update_wrapper(routine, fn)


def _too_big(what: str, value: int) -> OverflowError:
    limit = INT_LIMIT[0]
    if limit == INT32_MAX:
        return OverflowError(f"{what} is {value}, above {limit}, the largest value a 32-bit BLAS integer holds "
                             "(with scipy-openblas64 installed, pip install 'tileblas[ilp64]', tileblas takes "
                             "64-bit sizes)")
    return OverflowError(f"{what} is {value}, above {limit}, the largest value a 64-bit BLAS integer holds")


def _as_rank2(a: np.ndarray, name: str) -> np.ndarray:
    if a.ndim == 2:
        if a.shape[0] > INT_LIMIT[0] or a.shape[1] > INT_LIMIT[0]:
            raise _too_big(f"a dimension of {name} (shape {a.shape})", max(a.shape))
        return a
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return _as_rank2(a.reshape(a.shape[0], 1), name)
    if all(d == 1 for d in a.shape[2:]):
        return _as_rank2(a.reshape(a.shape[0], a.shape[1]), name)
    raise ValueError(f"{name} must be a 2-D array; got an array of shape {a.shape}")


def as_matrix(obj: Any, dtype: np.dtype, name: str) -> np.ndarray:
    """A read-only rank-2 argument as a 2-D array of ``dtype`` in whatever layout it has.

    Rank 0 and 1 inputs become ``(1, 1)`` and ``(len, 1)`` (f2py's rule); higher ranks are accepted when
    the extra dimensions have length 1.  Use :func:`column_major` to pass it to BLAS.
    """
    if isinstance(obj, _nd) and obj.dtype == dtype and obj.flags.aligned:
        a = obj
    else:
        a = _cast(obj, dtype, name, copy=False)
        if not a.flags.aligned:
            a = a.copy(order="F")
    return _as_rank2(a, name)


def column_major(a: np.ndarray) -> tuple[np.ndarray, int]:
    """``(array, ld)`` describing the 2-D ``a`` column-major for BLAS (:func:`tileblas.kernels._openblas.colmajor`
    decides); copies only when no stride fits."""
    ld = colmajor(a)
    if ld:
        return a, ld
    return np.asfortranarray(a), max(a.shape[0], 1)


def as_inout_matrix(
    obj: Any, dtype: np.dtype, name: str, overwrite: Any, shape: tuple[int, int]
) -> np.ndarray:
    """An ``intent(in,out,copy)`` rank-2 argument of a fixed ``shape``: ``obj`` itself when
    ``overwrite`` is true and it is a writeable Fortran-contiguous array of ``dtype``, else a copy."""
    if overwrite and isinstance(obj, _nd) and _usable(obj, dtype) and writable(obj) and obj.ndim == 2:
        out = obj
    else:
        out = _cast(obj, dtype, name, copy=True)
        out = _as_rank2(out, name)
        if not out.flags.f_contiguous:
            out = np.asfortranarray(out)
    if out.shape != shape:
        raise ValueError(f"{name} must have shape {shape}; got {name} of shape {out.shape}")
    return out


# ---------------------------------------------------------------------------------------------------
# checks (f2py check clauses)
# ---------------------------------------------------------------------------------------------------


def check_inc(inc: Any, name: str, positive: bool = False) -> int:
    """An increment: nonzero (``positive``: > 0)."""
    k = as_int(inc, name, 1)
    if k == 0 or (positive and k < 0):
        raise ValueError(f"{name} must be {'positive' if positive else 'nonzero'}; got {name}={k}")
    if abs(k) > INT_LIMIT[0]:
        raise _too_big(name, k)
    return k


def check_off(off: Any, length: int, name: str, vec: str) -> int:
    """An offset into a vector of ``length`` elements: ``0 <= off < length``."""
    k = as_int(off, name, 0)
    if k < 0 or k >= length:
        raise ValueError(f"{name} must satisfy 0 <= {name} < len({vec}) = {length}; got {name}={k}")
    return k


def check_span(n: int, length: int, off: int, inc: int, vec: str, what: str = "n") -> None:
    """``n`` elements at stride ``|inc|`` from ``off`` fit in ``length``: ``length - off > (n-1)*|inc|``."""
    if n > INT_LIMIT[0]:
        raise _too_big(f"{what} (elements of {vec})", n)
    if length - off <= (n - 1) * abs(inc):
        raise ValueError(
            f"{vec} is too short for {what}={n} elements at inc={inc} from offset {off}; got len({vec}) = {length}"
        )


def default_len(length: int, off: int, inc: int) -> int:
    """f2py default ``n = (len(x) - offx) / |incx|`` (integer division)."""
    return (length - off) // abs(inc)


def default_len_rot(length: int, off: int, inc: int) -> int:
    """f2py default ``n = (len(x) - 1 - offx) / |incx| + 1`` (rot, syr, her, syr2, her2)."""
    return (length - 1 - off) // abs(inc) + 1
