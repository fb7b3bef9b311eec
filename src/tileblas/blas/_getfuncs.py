"""``get_blas_funcs`` and ``find_best_blas_type`` for :mod:`tileblas.blas`, with SciPy's selection rules.

What this module owns
    Choosing the precision prefix (s, d, c, z) from arrays or a dtype exactly as
    :func:`scipy.linalg.blas.find_best_blas_type` does, and handing out the matching tileblas.blas routine
    with the attributes SciPy's function objects carry (``typecode``, ``prefix``, ``dtype``,
    ``module_name``, ``int_dtype``).  Lookups are memoized on (names, dtype, ilp64, each array's dtype
    character and Fortran flag), as in SciPy.

    Routines are looked up on :mod:`tileblas.blas` by name when asked for, so Level 1/2/3 routines
    written in other modules are found as soon as they exist.  The attributes are set on the routine
    itself (as SciPy does); they depend only on the routine, so this is deterministic.  A routine that
    cannot take attributes is handed out in a thin callable wrapper.

64-bit integers (ILP64), as SciPy exposes them
    :data:`HAS_ILP64` is true where the ILP64 OpenBLAS (scipy-openblas64, ``tileblas[ilp64]``) is
    installed.  Every routine then takes sizes, leading dimensions and increments over 32 bits anyway (the
    kernel layer moves such a call to the ILP64 library); ``ilp64=True`` hands out the routines in a
    wrapper that runs *every* native call of the calling thread on the ILP64 library (``module_name``
    ``'fblas_64'``, ``int_dtype`` int64), as SciPy's ``_fblas_64`` functions do.  Tiles of a Level-3 call
    that the runtime runs on its worker threads stay on the 32-bit library: each tile's sizes fit it.
    Without the ILP64 library ``ilp64=True`` raises RuntimeError as SciPy built without ILP64 does, and
    ``'preferred'`` gives the 32-bit routines.

What it must not touch
    The routines themselves.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Sequence

import numpy as np

from tileblas.kernels import _native
from tileblas.kernels._openblas import has_ilp64

__all__ = ["get_blas_funcs", "find_best_blas_type", "HAS_ILP64"]

#: Whether the ILP64 OpenBLAS is installed (and not turned off by TILEBLAS_ILP64=0), as SciPy's flag.
HAS_ILP64: bool = has_ilp64()

# Score of a dtype character: 1 single real, 2 double real, 3 single complex, 4 double complex; any other
# character scores 5, which selects double precision.
_TYPE_SCORE: dict[str, int] = {x: 1 for x in "?bBhHef"}
_TYPE_SCORE.update({x: 2 for x in "iIlLqQd"})
_TYPE_SCORE.update({"F": 3, "D": 4, "g": 2, "G": 4})

_TYPE_CONV: dict[int, tuple[str, np.dtype]] = {
    1: ("s", np.dtype(np.float32)),
    2: ("d", np.dtype(np.float64)),
    3: ("c", np.dtype(np.complex64)),
    4: ("z", np.dtype(np.complex128)),
}

#: Names SciPy maps to another routine (complex norms, default complex dot and rank-1 update).
_ALIAS = {
    "cnrm2": "scnrm2",
    "znrm2": "dznrm2",
    "cdot": "cdotc",
    "zdot": "zdotc",
    "cger": "cgerc",
    "zger": "zgerc",
    "sdotc": "sdot",
    "sdotu": "sdot",
    "ddotc": "ddot",
    "ddotu": "ddot",
}

_MODULE_NAME = "fblas"  # tileblas routines take SciPy's Fortran-interface arguments
_INT_DTYPE = np.dtype(np.intc)


def _dtype_of(x: Any) -> np.dtype:
    dt = getattr(x, "dtype", None)
    return dt if isinstance(dt, np.dtype) else np.asarray(x).dtype


def _is_fortran(x: Any) -> bool:
    flags = getattr(x, "flags", None)
    return bool(flags["FORTRAN"]) if flags is not None else False


def find_best_blas_type(arrays: Sequence[Any] = (), dtype: Any = None) -> tuple[str, np.dtype, bool]:
    """Find the best-matching BLAS prefix for arrays or a dtype (same rules as SciPy).

    Parameters
    ----------
    arrays : sequence of ndarrays, optional
        The most generic type among them selects the prefix; if not given, ``dtype`` does (float64 when
        both are absent).  A mix of float64 (or integers) and complex64 selects complex128.
    dtype : str or dtype, optional
        Data-type specifier, used only when ``arrays`` is empty.

    Returns
    -------
    prefix : str
        One of 's', 'd', 'c', 'z'.
    dtype : numpy.dtype
        The dtype of that prefix.
    prefer_fortran : bool
        Whether the leading (most generic) array is Fortran-ordered.
    """
    dtype = np.dtype(dtype)
    score = _TYPE_SCORE.get(dtype.char, 5)
    prefer_fortran = False
    if arrays:
        if len(arrays) == 1:
            score = _TYPE_SCORE.get(_dtype_of(arrays[0]).char, 5)
            prefer_fortran = _is_fortran(arrays[0])
        else:
            scores = [_TYPE_SCORE.get(_dtype_of(x).char, 5) for x in arrays]
            score = max(scores)
            lead = scores.index(score)
            if score == 3 and 2 in scores:  # float64 with complex64: complex128 keeps both exact
                score = 4
            prefer_fortran = _is_fortran(arrays[lead])
    prefix, dt = _TYPE_CONV.get(score, ("d", np.dtype(np.float64)))
    return prefix, dt, prefer_fortran


class _BlasFunction:
    """A routine with SciPy's function attributes, for routines that cannot carry attributes."""


    def __init__(self, fn: Callable[..., Any], prefix: str, dtype: np.dtype) -> None:
        self._fn = fn
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", repr(fn))
        self.__doc__ = getattr(fn, "__doc__", None)
        self.typecode = self.prefix = prefix
        self.dtype = dtype
        self.module_name = _MODULE_NAME
        self.int_dtype = _INT_DTYPE

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tileblas function {self.__name__}>"


class _ILP64Function(_BlasFunction):
    """A routine whose every native call in the calling thread runs on the ILP64 library."""

    def __init__(self, fn: Callable[..., Any], prefix: str, dtype: np.dtype) -> None:
        super().__init__(fn, prefix, dtype)
        self.module_name = "fblas_64"
        self.int_dtype = np.dtype(np.int64)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        was = _native.force64(True)
        declined = _decline(True)
        try:
            return self._fn(*args, **kwargs)
        finally:
            _decline(declined)
            _native.force64(was)

    def __repr__(self) -> str:
        return f"<tileblas ILP64 function {self.__name__}>"


def _decline(flag: bool) -> bool:
    """Keep this thread's calls off the C small-call paths (they call 32-bit entry points) while set."""
    try:
        from tileblas.blas import _fastpath  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - a build without the C module
        return False
    return bool(_fastpath.decline(flag))


def _routine(func_name: str, prefix: str, dtype: np.dtype) -> Callable[..., Any]:
    blas = importlib.import_module("tileblas.blas")
    fn = getattr(blas, func_name, None) if func_name in getattr(blas, "__all__", ()) else None
    if fn is None or not callable(fn):
        raise ValueError(f"BLAS function {func_name} could not be found in tileblas.blas")
    try:
        fn.module_name = _MODULE_NAME
        fn.typecode = prefix
        fn.dtype = dtype
        fn.int_dtype = _INT_DTYPE
        fn.prefix = prefix
    except (AttributeError, TypeError):
        return _BlasFunction(fn, prefix, dtype)
    return fn


#: The ILP64 function of each routine name (one object per routine, so aliases are the same object).
_WIDE: dict[str, _ILP64Function] = {}


def ilp64_function(func_name: str) -> _ILP64Function:
    """The routine ``func_name`` of tileblas.blas (e.g. ``'dgemm'``, ``'idamax'``) as the function
    ``get_blas_funcs(..., ilp64=True)`` hands out: every native call on the ILP64 library."""
    wide = _WIDE.get(func_name)
    if wide is None:
        # the precision of the operands: icamax -> c, scnrm2 / dzasum (complex operands) -> c / z
        prefix = func_name[1] if func_name[0] == "i" else {"sc": "c", "dz": "z"}.get(func_name[:2], func_name[0])
        dt = _TYPE_CONV[" sdcz".index(prefix)][1]
        fn = _routine(func_name, prefix, dt)
        wide = _WIDE.setdefault(func_name, _ILP64Function(getattr(fn, "_fn", fn), prefix, dt))
    return wide


def _lookup(names: Any, arrays: Sequence[Any], dtype: Any, ilp64: bool = False) -> Any:
    unpack = isinstance(names, str)
    if unpack:
        names = (names,)
    prefix, dt, _ = find_best_blas_type(arrays, dtype)
    funcs = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"names must hold routine names (str) without prefix; got {name!r}")
        func_name = prefix + name
        func_name = _ALIAS.get(func_name, func_name)
        funcs.append(ilp64_function(func_name) if ilp64 else _routine(func_name, prefix, dt))
    return funcs[0] if unpack else funcs


_MEMO: dict[tuple, Any] = {}


def get_blas_funcs(names: Any, arrays: Sequence[Any] = (), dtype: Any = None, ilp64: Any = False) -> Any:
    """Return tileblas.blas routines by name without prefix, chosen for the given arrays or dtype.

    Parameters
    ----------
    names : str or sequence of str
        Routine name(s) without the type prefix, e.g. ``'gemm'`` or ``['axpy', 'nrm2']``.
    arrays : sequence of ndarrays, optional
        Arrays that select the precision (see :func:`find_best_blas_type`); default float64.
    dtype : str or dtype, optional
        Data-type specifier, used only when ``arrays`` is empty.
    ilp64 : {False, True, 'preferred'}, optional
        ``True``: routines whose every native call uses 64-bit BLAS integers (the ILP64 library);
        ``'preferred'``: those where :data:`HAS_ILP64`, else the 32-bit routines.  The 32-bit routines
        take sizes over 32 bits too where the ILP64 library is installed.

    Returns
    -------
    funcs : callable or list of callables
        One routine for a single name, otherwise a list.  Each carries ``typecode`` and ``prefix`` (the
        chosen prefix), ``dtype``, ``module_name`` (``'fblas'``: SciPy's Fortran-style arguments;
        ``'fblas_64'`` for ILP64) and ``int_dtype`` (``numpy.intc``; int64 for ILP64).

    Raises
    ------
    ValueError
        A routine that does not exist for the chosen prefix, or an invalid ``ilp64``.
    RuntimeError
        ``ilp64=True`` where no ILP64 BLAS is available.
    """
    if isinstance(ilp64, str):
        if ilp64 != "preferred":
            raise ValueError(f"Invalid value for 'ilp64': expected False, True or 'preferred'; got {ilp64!r}")
        ilp64 = has_ilp64()
    ilp64 = bool(ilp64)
    if ilp64 and not has_ilp64():
        raise RuntimeError(
            "BLAS ILP64 routine requested (ilp64=True), but no ILP64 BLAS is available: "
            "pip install 'tileblas[ilp64]' (scipy-openblas64), and leave TILEBLAS_ILP64 unset"
        )
    if not isinstance(names, str):
        try:
            names = list(names)
        except TypeError:
            raise TypeError(f"names must be a routine name or a sequence of names; got {names!r}") from None
    try:
        key: tuple | None = (names if isinstance(names, str) else tuple(names), dtype, ilp64)
        for a in arrays:
            key += (_dtype_of(a).char, _is_fortran(a))
        hit = _MEMO.get(key)
    except TypeError:  # unhashable names or dtype: no memo
        key, hit = None, None
    if hit is not None:
        return list(hit) if isinstance(hit, tuple) else hit
    value = _lookup(names, arrays, dtype, ilp64)
    if key is not None:
        _MEMO[key] = tuple(value) if isinstance(value, list) else value
    return value

