"""Cholesky-based solve and inverse, and the recursive triangular kernels, for users.

What this module owns
    * User-facing validation (one helper, :func:`_matrix`) and the public functions:
      :func:`trmm` / :func:`trsm` (recursive, in place, legacy BLAS semantics, a ``stop`` size),
      :func:`cho_factor` (scipy.linalg-compatible), :func:`potrs` / :func:`cho_solve` (POTRS),
      :func:`trtri`, :func:`potri` and :func:`inv_spd` (POTRI: factor, triangular inverse, product).
    * The numerical-failure exceptions: :class:`NotPositiveDefiniteError` (the failing leading minor is
      its ``minor`` attribute) and :class:`SingularTriangularError`, both :class:`numpy.linalg.LinAlgError`.

What it must not touch
    Kernel internals (tileblas.kernels._recursive builds the recursion, tileblas.kernels._openblas calls BLAS),
    and the devices and runtime: it imports the kernels and the policy only.  Where the caller names no
    ``stop``, the recursion's stopping size and the choice of the recursion over OpenBLAS's own routine
    come from :mod:`tileblas.policy._recursion` (this machine's models and path policy, else the shipped
    measurements) and are passed to the kernels.

Caller's arrays are never left half-written: the Cholesky factorization, the only step that can fail
part-way, always runs on a private copy; ``overwrite_*`` lets the *result* reuse the caller's memory once
the computation has succeeded (the triangular steps check for a zero diagonal before writing anything).
The CPU work uses a private OpenBLAS instance with one thread per core (``threads`` to change it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tileblas import _flags
from tileblas.kernels import _openblas
from tileblas.kernels import _recursive as _rec
from tileblas.kernels._recursive import SingularTriangularError
from tileblas.kernels._threadpool import cpu_count as _cpu_count
from tileblas.policy._recursion import recursion_faster as _recursion_faster
from tileblas.policy._recursion import recursion_stop as _recursion_stop

__all__ = [
    "NotPositiveDefiniteError",
    "SingularTriangularError",
    "trmm",
    "trsm",
    "cho_factor",
    "potrf",
    "potrs",
    "cho_solve",
    "trtri",
    "potri",
    "inv_spd",
    "recursive_trmm",
    "recursive_trsm",
]



def __dir__() -> list[str]:  # the API only (not the modules and helpers imported above)
    return sorted(__all__)

def _free(b: Any, side: str) -> int:
    """Columns of B on its non-triangular side (rows for side 'R'): what the stopping size depends on."""
    return b.shape[1] if side == "L" else b.shape[0]


def recursive_trmm(alpha: Any, a: np.ndarray, b: np.ndarray, side: str = "L", uplo: str = "U",
                   transa: str = "N", diag: str = "N", lib: _openblas.BlasLibrary | None = None,
                   stop: int | None = None, threads: int | None = None) -> None:
    """b := alpha*op(a)@b (side 'L') or alpha*b@op(a) (side 'R') in place, by the recursive algorithm,
    without argument checks.

    The unchecked form of :func:`trmm` for code that has validated its operands already: arrays of one
    dtype (float32, float64, complex64 or complex128) and matching shapes, flags as upper-case letters.

    Parameters
    ----------
    alpha : scalar
        Scale factor.
    a : (k, k) ndarray
        The triangular matrix (k: rows of ``b`` for side 'L', its columns for side 'R').
    b : (m, n) ndarray
        Overwritten with the result.
    side, uplo, transa, diag : str
        One upper-case letter each, as in :func:`trmm`.
    lib : BlasLibrary, optional
        The OpenBLAS instance to call (:func:`tileblas.kernels.get_library`); default: one thread per core.
    stop : int, optional
        Stopping size of the recursion; default: this machine's performance models' value when
        ``tileblas tune`` built them, else the measured default.
    threads : int, optional
        Host cores to use.
    """
    if stop is None:
        stop = _recursion_stop("trmm", side, _free(b, side), b.dtype)
    _rec.recursive_trmm(alpha, _apart(a, b), b, side, uplo, transa, diag, lib=lib, stop=stop, threads=threads)


def recursive_trsm(alpha: Any, a: np.ndarray, b: np.ndarray, side: str = "L", uplo: str = "U",
                   transa: str = "N", diag: str = "N", lib: _openblas.BlasLibrary | None = None,
                   stop: int | None = None, threads: int | None = None) -> None:
    """Solve op(a)@x = alpha*b (side 'L') or x@op(a) = alpha*b (side 'R') for x in place, recursively,
    without argument checks.

    The unchecked form of :func:`trsm` (no zero-diagonal check either); the parameters are those of
    :func:`recursive_trmm`.
    """
    if stop is None:
        stop = _recursion_stop("trsm", side, _free(b, side), b.dtype)
    _rec.recursive_trsm(alpha, _apart(a, b), b, side, uplo, transa, diag, lib=lib, stop=stop, threads=threads)


class NotPositiveDefiniteError(np.linalg.LinAlgError):
    """The matrix is not (numerically) positive definite.

    Attributes
    ----------
    minor : int
        Order of the first leading minor that is not positive definite (1-based, LAPACK's INFO).
    """

    def __init__(self, minor: int) -> None:
        self.minor = int(minor)
        super().__init__(f"the leading minor of order {self.minor} is not positive definite "
                         f"(Cholesky factorization failed at diagonal element {self.minor})")


# ---------------------------------------------------------------------------------------------------
# Validation: one place
# ---------------------------------------------------------------------------------------------------

def _flag(name: str, value: Any) -> str:
    """A letter or the drop-in's integer (:mod:`tileblas._flags`, the rule of every flag outside it)."""
    return _flags.flag(value, name)


def _work_dtype(*dtypes: np.dtype, name: str) -> np.dtype:
    dt = np.result_type(*dtypes)
    if dt.kind in "biu":
        return np.dtype(np.float64)
    if dt == np.float16:
        return np.dtype(np.float32)
    if dt not in _openblas.DTYPES:
        raise TypeError(f"{name} must have a float32, float64, complex64 or complex128 dtype "
                        f"(or an integer/bool dtype); got {dt}")
    return dt


def _matrix(x: Any, name: str, square: bool = False, ndims: tuple[int, ...] = (2,)) -> np.ndarray:
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # ragged lists and the like
            raise TypeError(f"{name} must be array-like; got {type(x).__name__}") from exc
    if arr.ndim not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"{name} must be {want}; got an array of shape {arr.shape}")
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"{name} must be numeric; got dtype {arr.dtype}")
    if square and arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be square; got shape {arr.shape}")
    return arr


def _check_finite(arr: np.ndarray, name: str) -> None:
    if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        raise ValueError(f"{name} must not contain infs or NaNs")


def _lib(threads: int | None) -> _openblas.BlasLibrary:
    if threads is None:
        threads = _cpu_count()
    if not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be a positive integer; got {threads!r}")
    return _openblas.get_library(int(threads))


def _stop(stop: Any) -> int | None:
    if stop is None:
        return None
    if not isinstance(stop, (int, np.integer)) or isinstance(stop, bool) or stop < 1:
        raise ValueError(f"stop must be a positive integer; got {stop!r}")
    return int(stop)


def _tri_stop(stop: Any, kind: str, side: str, b: np.ndarray) -> int:
    """The caller's ``stop`` (validated), else :func:`tileblas.policy._recursion.recursion_stop`."""
    st = _stop(stop)
    return _recursion_stop(kind, side, _free(b, side), b.dtype) if st is None else st


def _zero_diagonal(c: np.ndarray) -> int:
    """1-based index of the first exactly zero diagonal element, or 0."""
    z = np.flatnonzero(np.diagonal(c) == 0)
    return int(z[0]) + 1 if z.size else 0


def _c_ordered(x: np.ndarray) -> bool:
    """Only C-contiguous (then the column-major routines work on x.T with the other triangle)."""
    return x.ndim == 2 and x.flags.c_contiguous and not x.flags.f_contiguous


def _private_same_order(x: np.ndarray, dtype: np.dtype, reuse: bool) -> np.ndarray:
    """Like :func:`_private_fortran`, but a C-ordered x stays C-ordered: a straight copy is several
    times faster than a transposing one for large matrices."""
    if not _c_ordered(x):
        return _private_fortran(x, dtype, reuse)
    if reuse and x.dtype == dtype and x.flags.writeable:
        return x
    return np.array(x, dtype=dtype, order="C")


def _private_fortran(x: np.ndarray, dtype: np.dtype, reuse: bool) -> np.ndarray:
    """x itself when the caller allowed it and it is usable in place, else a column-major copy."""
    if reuse and x.dtype == dtype and x.flags.f_contiguous and x.flags.writeable:
        return x
    return np.array(x, dtype=dtype, order="F")


# ---------------------------------------------------------------------------------------------------
# Recursive TRMM / TRSM with legacy BLAS in-place semantics
# ---------------------------------------------------------------------------------------------------

_TRI_DOC = """
    Parameters
    ----------
    alpha : scalar
        Scale factor (complex only for complex arrays).
    a : (k, k) ndarray
        Triangular matrix; only its ``uplo`` triangle is read (and not its diagonal when ``diag='U'``).
        k is the number of rows of b for side 'L', its columns for side 'R'.
    b : (m, n) ndarray
        Overwritten with the result.  Any memory layout (C or Fortran order, strided views); its dtype
        must be float32, float64, complex64 or complex128 and equal to ``a``'s.
""" + "".join(_flags.param_doc(f, "a", d) for f, d in (("side", "L"), ("uplo", "U"), ("transa", "N"),
                                                          ("diag", "N"))) + """    stop : int, optional
        Stopping size of the recursion: blocks of at most this order go to the native routine.
        Default: this machine's performance models' value for float64 when ``tileblas tune`` built them,
        else a measured value (256, 512 from 256 right-hand sides).
    threads : int, optional
        Host cores to use (default: all).
    check_finite : bool, default False
        Check that ``a`` and ``b`` hold only finite numbers.

    Returns
    -------
    b : ndarray
        The same array, updated in place.
"""


def _tri_args(alpha, a, b, side, uplo, transa, diag, check_finite):
    side, uplo, transa, diag = (_flag("side", side), _flag("uplo", uplo), _flag("transa", transa),
                                _flag("diag", diag))
    if not isinstance(b, np.ndarray):
        raise TypeError(f"b must be a numpy.ndarray (it is updated in place); got {type(b).__name__}")
    b = _matrix(b, "b")
    a = _matrix(a, "a", square=True)
    if b.dtype not in _openblas.DTYPES:
        raise TypeError(f"b must be float32, float64, complex64 or complex128; got dtype {b.dtype}")
    if not b.flags.writeable:
        raise ValueError("b must be writeable (it is updated in place)")
    k = b.shape[0] if side == "L" else b.shape[1]
    if a.shape[0] != k:
        raise ValueError(f"a must be {k} x {k} for b of shape {b.shape} and side {side!r}; "
                         f"got a of shape {a.shape}")
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must have the same dtype; got {a.dtype} and {b.dtype}")
    if not np.isscalar(alpha) and not (isinstance(alpha, np.ndarray) and alpha.ndim == 0):
        raise TypeError(f"alpha must be a scalar; got {type(alpha).__name__}")
    if np.iscomplexobj(alpha) and b.dtype.kind != "c" and np.imag(alpha) != 0:
        raise TypeError(f"alpha must be real for a real dtype ({b.dtype}); got {alpha!r}")
    if check_finite:
        _check_finite(a, "a")
        _check_finite(b, "b")
    return _apart(a, b), b, side, uplo, transa, diag


def _apart(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``a``, or a copy of it where it may share memory with the output ``out`` (b is a, a view of a, its
    transpose, ...): the call then gives the answer separate operands give, as tileblas.blas does."""
    return np.array(a, order="K", copy=True) if np.may_share_memory(a, out) else a


def trmm(alpha: Any, a: Any, b: np.ndarray, side: str | int = "L", uplo: str | int = "U",
         transa: str | int = "N", diag: str | int = "N", *, stop: int | None = None, threads: int | None = None,
         check_finite: bool = False) -> np.ndarray:
    """Triangular matrix product in place by recursion into GEMMs: b := alpha*op(a)@b or alpha*b@op(a).
    """
    a, b, side, uplo, transa, diag = _tri_args(alpha, a, b, side, uplo, transa, diag, check_finite)
    _rec.recursive_trmm(alpha, a, b, side, uplo, transa, diag, lib=_lib(threads), stop=_tri_stop(stop, "trmm", side, b))
    return b


def trsm(alpha: Any, a: Any, b: np.ndarray, side: str | int = "L", uplo: str | int = "U",
         transa: str | int = "N", diag: str | int = "N", *, stop: int | None = None, threads: int | None = None,
         check_finite: bool = False) -> np.ndarray:
    """Triangular solve in place by recursion into GEMMs: b := alpha*inv(op(a))@b or alpha*b@inv(op(a)).

    Raises :class:`SingularTriangularError` (``b`` untouched) when ``diag='N'`` and a diagonal element of
    ``a`` is exactly zero.
    """
    a, b, side, uplo, transa, diag = _tri_args(alpha, a, b, side, uplo, transa, diag, check_finite)
    if diag == "N" and alpha != 0:
        bad = _zero_diagonal(a)
        if bad:
            raise SingularTriangularError(bad)
    _rec.recursive_trsm(alpha, a, b, side, uplo, transa, diag, lib=_lib(threads), stop=_tri_stop(stop, "trsm", side, b))
    return b


trmm.__doc__ = (trmm.__doc__ or "") + _TRI_DOC
trsm.__doc__ = (trsm.__doc__ or "") + _TRI_DOC


# ---------------------------------------------------------------------------------------------------
# Cholesky: factor, solve, inverse
# ---------------------------------------------------------------------------------------------------


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True,
               *, threads: int | None = None) -> tuple[np.ndarray, bool]:
    """Cholesky factorization, compatible with :func:`scipy.linalg.cho_factor`.

    Parameters
    ----------
    a : (n, n) array_like
        Symmetric (Hermitian) positive definite matrix; only the ``lower``/upper triangle is read.
    lower : bool, default False
        Compute the lower factor L (a = L L^H) instead of the upper U (a = U^H U).
    overwrite_a : bool, default False
        Let the result reuse ``a``'s memory (when ``a`` is contiguous with the working dtype).
        Even then ``a`` is unchanged if the factorization fails.
    check_finite : bool, default True
        Raise ValueError if ``a`` contains infs or NaNs.
    threads : int, optional
        Host cores for LAPACK's potrf (default: all).

    Returns
    -------
    c : (n, n) ndarray
        The factor in its triangle; the other triangle holds ``a``'s original entries.  C-ordered when
        ``a`` is (no transposing copy), else Fortran-ordered.
    lower : bool
        As passed.

    Raises
    ------
    NotPositiveDefiniteError
        With the order of the failing leading minor in ``.minor``.
    """
    a = _matrix(a, "a", square=True)
    dtype = _work_dtype(a.dtype, name="a")
    if check_finite:
        _check_finite(a, "a")
    lower = bool(lower)
    # always private: potrf can fail part-way.  A C-ordered a keeps its order: its memory read
    # column-major is a^T, whose other triangle holds the same entries (transposed), and the factor of
    # a^T in that triangle, read back in C order, is the factor of a (U = L^T).
    c = np.array(a, dtype=dtype, order="C" if _c_ordered(a) else "F")
    flip = _c_ordered(c)
    n = c.shape[0]
    if n:
        info = np.zeros(1, np.int32)
        _lib(threads).call(_openblas.DTYPES[dtype] + "potrf", "vciaia", "L" if lower != flip else "U", n,
                           c.T if flip else c, max(n, 1), info)
        if info[0] > 0:
            raise NotPositiveDefiniteError(int(info[0]))
        if info[0] < 0:  # an argument error is a bug here, not a user error
            raise RuntimeError(f"potrf rejected argument {-int(info[0])}")
    if (overwrite_a and a is not c and a.dtype == dtype and a.flags.writeable
            and (a.flags.f_contiguous or a.flags.c_contiguous)):
        a[...] = c
        return a, lower
    return c, lower


potrf = cho_factor


def _factor_arg(c_and_lower: Any) -> tuple[np.ndarray, bool]:
    try:
        c, lower = c_and_lower
    except (TypeError, ValueError):
        raise TypeError("c_and_lower must be a (c, lower) pair as returned by cho_factor; "
                        f"got {type(c_and_lower).__name__}") from None
    return _matrix(c, "c", square=True), bool(lower)


def potrs(c_and_lower: Any, b: Any, overwrite_b: bool = False, check_finite: bool = True, *,
          stop: int | None = None, threads: int | None = None, recursive: bool | None = None) -> np.ndarray:
    """Solve a x = b given the Cholesky factor of a (POTRS), compatible with :func:`scipy.linalg.cho_solve`.

    Two triangular solves: U^H y = b, U x = y (or L y = b, L^H x = y), each by the recursion where it
    measured faster than OpenBLAS's own dtrsm for that shape and core count (many cores, a large factor
    and few right-hand sides), else by OpenBLAS's dtrsm.

    Parameters
    ----------
    c_and_lower : tuple (c, lower)
        The factor and its triangle, as returned by :func:`cho_factor`.
    b : (n,) or (n, k) array_like
        Right-hand sides.
    overwrite_b : bool, default False
        Solve in ``b``'s memory when it is C- or Fortran-contiguous with the working dtype.
    check_finite : bool, default True
        Raise ValueError if ``c`` or ``b`` contain infs or NaNs.
    stop, threads : int, optional
        Recursion stopping size and host cores (see :func:`trsm`).
    recursive : bool, optional
        True: always the recursive solves; False: always OpenBLAS's dtrsm; None (default): the measured
        choice above, or the recursion when ``stop`` is given.

    Returns
    -------
    x : ndarray
        Same shape as ``b``, and C-ordered when ``b`` is, else Fortran-ordered.

    Raises
    ------
    SingularTriangularError
        When the factor has an exactly zero diagonal element (``b`` untouched).
    """
    c, lower = _factor_arg(c_and_lower)
    b = _matrix(b, "b", ndims=(1, 2))
    n = c.shape[0]
    if b.shape[0] != n:
        raise ValueError(f"b must have {n} rows to match c of shape {c.shape}; got b of shape {b.shape}")
    dtype = _work_dtype(c.dtype, b.dtype, name="c and b")
    if check_finite:
        _check_finite(c, "c")
        _check_finite(b, "b")
    bad = _zero_diagonal(c) if n else 0
    if bad:
        raise SingularTriangularError(bad, "Cholesky factor c")
    cc = c if c.dtype == dtype else c.astype(dtype)
    # A C-ordered b is solved as is (the kernels reach it by transposition): copying it into Fortran
    # order would be a transposing copy, several times slower than a straight one for large b.
    if b.ndim == 2 and b.flags.c_contiguous and not b.flags.f_contiguous:
        reuse = overwrite_b and b.dtype == dtype and b.flags.writeable
        x = b if reuse else np.array(b, dtype=dtype, order="C")
    else:
        x = _private_fortran(b, dtype, overwrite_b)
    x2 = x.reshape(n, -1, order="F") if x.ndim == 1 else x
    cc = _apart(cc, x)  # b (solved in place) is the factor or a view of it
    if recursive is not None and not isinstance(recursive, (bool, np.bool_)):
        raise TypeError(f"recursive must be True, False or None; got {recursive!r}")
    if x2.size:
        lib, st = _lib(threads), _stop(stop)
        if recursive is None:
            recursive = st is not None or _recursion_faster(n, x2.shape[1], lib.threads, "trsm", x2.dtype.char,
                                                           "L")
        if recursive:
            if st is None:
                st = _recursion_stop("trsm", "L", x2.shape[1], x2.dtype)

            def solve(trans: str) -> None:
                _rec.recursive_trsm(1.0, cc, x2, "L", uplo, trans, "N", lib=lib, stop=st)
        else:
            def solve(trans: str) -> None:
                _openblas.trsm(1.0, cc, x2, "L", uplo, trans, "N", lib=lib)
        uplo = "L" if lower else "U"
        for trans in ("NC" if lower else "CN"):
            solve(trans)
    return x


cho_solve = potrs


def trtri(c: Any, lower: bool = False, unit_diagonal: bool = False, overwrite_c: bool = False,
          check_finite: bool = True, *, stop: int | None = None, threads: int | None = None) -> np.ndarray:
    """Inverse of a triangular matrix by recursion into TRMMs (TRTRI).

    Parameters
    ----------
    c : (n, n) array_like
        Triangular matrix in its ``lower``/upper triangle; the other triangle is copied through.
    lower : bool, default False
    unit_diagonal : bool, default False
        Take the diagonal as all ones.
    overwrite_c : bool, default False
        Compute in ``c``'s memory when it is Fortran-contiguous with the working dtype.
    check_finite : bool, default True
    stop, threads : int, optional
        Recursion stopping size and host cores.

    Returns
    -------
    inv : (n, n) ndarray
        The inverse in the ``lower``/upper triangle.

    Raises
    ------
    SingularTriangularError
        An exactly zero diagonal element (index in ``.index``); ``c`` untouched.
    """
    c = _matrix(c, "c", square=True)
    dtype = _work_dtype(c.dtype, name="c")
    if check_finite:
        _check_finite(c, "c")
    if not unit_diagonal and c.shape[0]:
        bad = _zero_diagonal(c)
        if bad:
            raise SingularTriangularError(bad)
    w = _private_fortran(c, dtype, overwrite_c)
    if w.shape[0]:
        _rec.recursive_trtri(w, "L" if lower else "U", "U" if unit_diagonal else "N", lib=_lib(threads),
                             stop=_stop(stop), faster=_recursion_faster)
    return w


def potri(c: Any, lower: bool = False, overwrite_c: bool = False, check_finite: bool = True, *,
          stop: int | None = None, threads: int | None = None) -> np.ndarray:
    """Inverse of a positive definite matrix from its Cholesky factor (POTRI), like LAPACK ?potri.

    inv(a) = inv(U) inv(U)^H for a = U^H U (or inv(L)^H inv(L) for a = L L^H): a recursive triangular
    inverse (:func:`trtri`) then a recursive triangular product (LAUUM), both cast into TRMM/GEMM/SYRK.
    Without ``stop``, each recursion starts only above the order where it measured faster than
    OpenBLAS's own routine.

    Parameters
    ----------
    c : (n, n) array_like
        The factor from :func:`cho_factor` (its ``lower``/upper triangle is read).
    lower : bool, default False
    overwrite_c : bool, default False
        Compute in ``c``'s memory when it is C- or Fortran-contiguous with the working dtype.
    check_finite : bool, default True
    stop, threads : int, optional

    Returns
    -------
    inv : (n, n) ndarray
        The ``lower``/upper triangle of inv(a); the other triangle is copied from ``c``
        (as :func:`scipy.linalg.lapack.dpotri`).  :func:`inv_spd` returns the full matrix.

    Raises
    ------
    SingularTriangularError
        When the factor has an exactly zero diagonal element (``c`` untouched).
    """
    c = _matrix(c, "c", square=True)
    dtype = _work_dtype(c.dtype, name="c")
    if check_finite:
        _check_finite(c, "c")
    bad = _zero_diagonal(c) if c.shape[0] else 0
    if bad:
        raise SingularTriangularError(bad, "Cholesky factor c")
    w = _private_same_order(c, dtype, overwrite_c)
    if w.shape[0]:
        # C-ordered: work on the column-major w.T, whose other triangle holds the factor transposed
        flip = _c_ordered(w)
        wf, uplo = (w.T, "U" if lower else "L") if flip else (w, "L" if lower else "U")
        lib, st = _lib(threads), _stop(stop)
        _rec.recursive_trtri(wf, uplo, "N", lib=lib, stop=st, faster=_recursion_faster)
        _rec.recursive_lauum(wf, uplo, lib=lib, stop=st, faster=_recursion_faster)
    return w


def inv_spd(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True, *,
            stop: int | None = None, threads: int | None = None) -> np.ndarray:
    """Inverse of a symmetric (Hermitian) positive definite matrix through its Cholesky factor.

    Parameters
    ----------
    a : (n, n) array_like
        Only the ``lower``/upper triangle is read.
    lower : bool, default False
        Which triangle to read (and to factor in).
    overwrite_a : bool, default False
        Let the result reuse ``a``'s memory; ``a`` is unchanged if ``a`` is not positive definite.
    check_finite : bool, default True
    stop, threads : int, optional

    Returns
    -------
    inv : (n, n) ndarray
        The full symmetric (Hermitian) inverse.

    Raises
    ------
    NotPositiveDefiniteError
        With the failing leading minor in ``.minor``; ``a`` untouched.
    """
    c, lower = cho_factor(a, lower=lower, overwrite_a=overwrite_a, check_finite=check_finite, threads=threads)
    w = potri(c, lower=lower, overwrite_c=True, check_finite=False, stop=stop, threads=threads)
    n = w.shape[0]
    if n > 1:
        if lower:
            iu = np.triu_indices(n, 1)
            w[iu] = w.T[iu].conj()
        else:
            il = np.tril_indices(n, -1)
            w[il] = w.T[il].conj()
    if w.dtype.kind == "c" and n:
        idx = np.arange(n)
        w[idx, idx] = w[idx, idx].real  # a Hermitian inverse has a real diagonal
    return w
