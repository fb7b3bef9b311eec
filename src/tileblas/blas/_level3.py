"""Level-3 routines of :mod:`tileblas.blas`, drop-in for those of :mod:`scipy.linalg.blas`.

What this module owns
    The user-facing Level-3 API: ``?gemm, ?symm, ?hemm, ?syrk, ?herk, ?syr2k, ?her2k, ?trmm, ?trsm`` in
    every precision SciPy offers, with SciPy's (f2py's) argument order, defaults, argument conversion,
    ``overwrite_*`` rule and return values, and the one place where their arguments are checked.

    Every call goes *check -> convert -> compute*: flags and shapes are validated and operands converted
    before the output is touched; then :func:`tileblas.blas._dispatch.level3` computes in place on the kernel
    layer's argument order.  Inputs already of the right dtype are passed in whatever layout they have
    (the kernels reach column-major BLAS by transposition); only the output is made Fortran-ordered,
    because that is what SciPy returns.

SciPy semantics kept (probed against SciPy 1.17)
    * ``c`` / ``b`` are ``intent(in,out,copy)``: with ``overwrite_*=0`` the result is always a fresh
      Fortran-ordered array; with ``overwrite_*=1`` the caller's array is reused exactly when it is
      Fortran-contiguous, aligned and of the routine's dtype in native byte order.
    * Operands of another dtype are cast (complex to real drops the imaginary part with NumPy's
      ``ComplexWarning``); 0-d operands are 1x1, 1-d operands columns, and N-d operands are read as
      f2py reads them (size-1 axes dropped, the rest folded into the last axis, Fortran order).  The
      returned output keeps the shape the caller gave.
    * Scalars: complex ``alpha`` to a real routine keeps the real part; an array gives its first element;
      ``None`` for an optional argument means its default.  ``herk`` uses the real parts of ``alpha`` and
      ``beta``, ``her2k`` the real part of ``beta``.
    * Non-square ``a`` where SciPy accepts it: ``symm``/``hemm`` and ``trmm`` use the leading square
      block, ``syr2k``/``her2k`` the leading rows/columns of ``b``.

Where tileblas deliberately differs (SciPy computes garbage, reads out of bounds or writes read-only
memory there): flag values that BLAS itself rejects (``trans=2`` for ``csyrk``, ``trans=1`` for ``cherk``,
...), leading dimensions BLAS rejects, and operand shapes SciPy would read past, raise ``ValueError``;
a read-only output is never written (it is copied); an output that shares memory with an input gives
the mathematically correct result.  SciPy raises its private ``_fblas.error``; tileblas raises
``ValueError`` (or ``TypeError`` for wrong types), naming the argument and the value.

What it must not touch
    How the work is executed (``_dispatch`` owns that), the kernels' layout algebra.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tileblas._dtypes import DTYPE_OF
from tileblas.blas import _dispatch
from tileblas.blas._common import front, unalias

try:  # the small-call path (compiled); without it every call takes the Python path below
    from tileblas.blas._fastpath import Level3 as _Level3
except ImportError:  # pragma: no cover - a build without the C module
    _Level3 = None

__all__: list[str] = []

_DTYPE = DTYPE_OF
_TRANS = ("N", "T", "C")


# ---------------------------------------------------------------------------------------------------
# Argument conversion (f2py-compatible, with errors that name the argument)
# ---------------------------------------------------------------------------------------------------


def _scalar(x: Any, prefix: str, name: str, routine: str) -> Any:
    """``x`` as the routine's scalar type (Python float or complex), f2py style."""
    cplx = prefix in "cz"
    if isinstance(x, (float, int)):  # includes numpy.float64 and bool
        return complex(x) if cplx else float(x)
    if isinstance(x, complex):  # includes numpy.complex128
        return complex(x) if cplx else x.real
    if x is None or isinstance(x, (str, bytes)):
        raise TypeError(f"{routine}: argument {name} must be a number; got {x!r}")
    try:
        arr = np.asarray(x)
        if arr.size == 0:
            raise ValueError("empty")
        v = arr.reshape(-1)[0]
        if arr.dtype.kind in "USO" and not isinstance(v, (int, float, complex, np.number)):
            raise TypeError("not a number")
        v = complex(v)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{routine}: argument {name} must be a number; got {x!r}") from None
    return v if cplx else v.real


def _flag(x: Any, name: str, routine: str, allowed: tuple[int, ...]) -> int:
    """An integer flag (trans, side, lower, diag) checked against ``allowed``; ``None`` means 0."""
    if x is None:
        return 0
    if type(x) is int:
        v = x
    else:
        if isinstance(x, (str, bytes)):
            raise TypeError(f"{routine}: argument {name} must be an integer in {allowed}; got {x!r}")
        try:
            v = int(x)
        except (TypeError, ValueError, OverflowError):
            raise TypeError(f"{routine}: argument {name} must be an integer in {allowed}; got {x!r}") from None
    if v not in allowed:
        raise ValueError(f"{routine}: argument {name} must be one of {allowed}; got {x!r}")
    return v


def _overwrite(x: Any, name: str, routine: str) -> bool:
    if x is None:
        return False
    if type(x) is int:
        return x != 0
    if isinstance(x, (str, bytes)):
        raise TypeError(f"{routine}: argument {name} must be an integer (0 or 1); got {x!r}")
    try:
        return int(x) != 0
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{routine}: argument {name} must be an integer (0 or 1); got {x!r}") from None


def _dims2(shape: tuple[int, ...]) -> tuple[int, int]:
    """The 2-D shape f2py reads an array of ``shape`` as, for a rank-2 argument."""
    nd = len(shape)
    if nd == 2:
        return shape[0], shape[1]
    if nd == 0:
        return 1, 1
    if nd == 1:
        return shape[0], 1
    dims = [1, 1]
    j = 0
    for i in range(nd):
        while j < nd and shape[j] < 2:
            j += 1
        d = shape[j] if j < nd else 1
        j += 1
        if i < 2:
            dims[i] = d
        else:
            dims[1] *= d
    if 0 in shape:
        # an empty N-d array: keep it empty
        if dims[0] * dims[1] != 0:
            dims[1] = 0
    return dims[0], dims[1]


def _as2d(arr: np.ndarray) -> np.ndarray:
    """View (or, for odd N-d layouts, copy) of ``arr`` as the 2-D matrix f2py would see."""
    if arr.ndim == 2:
        return arr
    return np.reshape(arr, _dims2(arr.shape), order="F")


def _cast(x: Any, dtype: np.dtype, name: str, routine: str) -> np.ndarray:
    try:
        arr = np.asarray(x)
        if arr.dtype != dtype or not arr.flags.aligned:
            arr = arr.astype(dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise type(exc)(
            f"{routine}: argument {name} could not be converted to a {dtype} array: {exc}"
        ) from None
    return arr


def _matrix(x: Any, dtype: np.dtype, name: str, routine: str) -> np.ndarray:
    """A read-only operand as a 2-D array of ``dtype``, in any layout (no copy when already right)."""
    if type(x) is np.ndarray and x.dtype == dtype and x.ndim == 2 and x.flags.aligned:
        return x
    return _as2d(_cast(x, dtype, name, routine))


def _output(
    x: Any,
    dtype: np.dtype,
    overwrite: bool,
    name: str,
    routine: str,
    dims: tuple[int, int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The array to return and its 2-D Fortran-ordered view to compute in (intent(in,out,copy)).

    ``dims``, when given, is the shape the routine requires; ``x=None`` then means zeros of that shape.
    The caller's array is reused only if ``overwrite`` and it is already Fortran-contiguous, aligned,
    writeable and of ``dtype``; otherwise the result is a fresh copy.  Nothing is written here.
    """
    if x is None:
        if dims is None:
            raise TypeError(f"{routine}: argument {name} must be an array; got None")
        out = np.zeros(dims, dtype, order="F")
        return out, out
    if isinstance(x, np.ndarray):
        shape = x.shape
    else:
        x = _cast(x, dtype, name, routine)
        shape = x.shape
    got = _dims2(shape)
    if dims is not None and got != dims:
        raise ValueError(
            f"{routine}: argument {name} has shape {shape}; expected {dims} from the other operands"
        )
    if (
        overwrite
        and x.dtype == dtype
        and x.flags.f_contiguous
        and x.flags.aligned
        and x.flags.writeable
    ):
        out = x
    else:
        src = x if x.dtype == dtype else _cast(x, dtype, name, routine)
        out = np.array(src, dtype=dtype, order="F", copy=True)
    work = out if out.ndim == 2 else out.reshape(got, order="F")
    return out, work


# ---------------------------------------------------------------------------------------------------
# Routine factories: one per family, closed over the precision prefix
# ---------------------------------------------------------------------------------------------------


def _front(kind: str, prefix: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Routine ``prefix + kind`` as users get it: its C small-call path (:mod:`tileblas.blas._fastpath`)
    in front of its Python implementation ``fn`` (:func:`tileblas.blas._common.front`).  Without the
    compiled module, ``fn`` itself.

    A call the C path passes on reaches ``fn`` through ``again``: its array arguments that are not yet
    arrays of the routine's dtype (lists, other dtypes, byte-swapped or unaligned arrays) are converted
    to Fortran-ordered arrays of its dtype, as the C path converts those it takes, and the call is handed
    back to the C path (:func:`tileblas.blas._dispatch.c_path_again`), so that it takes the path, and gives
    the bits, of the same call made with the converted arrays; a first call made before the C path was
    configured takes the path of the calls after it."""
    if _Level3 is None:  # pragma: no cover - a build without the C module
        return fn
    routine = prefix + kind
    dtype = _DTYPE[prefix]
    names = fn.__code__.co_varnames[: fn.__code__.co_argcount]
    arrays = [(i, x) for i, x in enumerate(names) if x in ("a", "b", "c")]

    def again(*args: Any, **kwargs: Any) -> Any:
        if len(args) > len(names) or getattr(_dispatch._AGAIN, "on", False):
            return fn(*args, **kwargs)
        args, converted = list(args), False
        for i, name in arrays:
            held = (args, i) if i < len(args) else (kwargs, name) if name in kwargs else None
            x = held[0][held[1]] if held is not None else None
            if x is None or (type(x) is np.ndarray and x.dtype == dtype and x.flags.aligned):
                continue
            try:  # in Fortran order, as the C path converts the arrays it takes (_fp_arrays.c, cast_copy)
                held[0][held[1]] = np.asfortranarray(_cast(x, dtype, name, routine))  # type: ignore[index]
            except (TypeError, ValueError, OverflowError):
                return fn(*args, **kwargs)  # fn raises, naming the argument
            converted = True
        got = _dispatch.c_path_again(globals()[routine], converted, tuple(args), kwargs)
        return fn(*args, **kwargs) if got is NotImplemented else got

    return front(_Level3(kind, prefix), fn, again)


def _make_gemm(prefix: str) -> Callable[..., np.ndarray]:
    dtype = _DTYPE[prefix]
    routine = prefix + "gemm"

    def gemm(alpha, a, b, beta=0.0, c=None, trans_a=0, trans_b=0, overwrite_c=0):
        ta = _flag(trans_a, "trans_a", routine, (0, 1, 2))
        tb = _flag(trans_b, "trans_b", routine, (0, 1, 2))
        al = _scalar(alpha, prefix, "alpha", routine)
        be = 0.0 if beta is None else _scalar(beta, prefix, "beta", routine)
        a = _matrix(a, dtype, "a", routine)
        b = _matrix(b, dtype, "b", routine)
        m, k = (a.shape[1], a.shape[0]) if ta else a.shape
        kb, n = (b.shape[1], b.shape[0]) if tb else b.shape
        if kb != k:
            raise ValueError(
                f"{routine}: op(a) is {m}x{k} (a.shape={a.shape}, trans_a={ta}) but op(b) is {kb}x{n} "
                f"(b.shape={b.shape}, trans_b={tb}): inner dimensions differ"
            )
        ow = _overwrite(overwrite_c, "overwrite_c", routine)
        out, work = _output(c, dtype, ow, "c", routine, (m, n))
        if out is c:
            a, b = unalias(work, a, b)
        _dispatch.level3("gemm", al, a, b, be, work, _TRANS[ta], _TRANS[tb])
        return out

    return gemm


def _make_symm(prefix: str, herm: bool) -> Callable[..., np.ndarray]:
    dtype = _DTYPE[prefix]
    kind = "hemm" if herm else "symm"
    routine = prefix + kind

    def symm(alpha, a, b, beta=0.0, c=None, side=0, lower=0, overwrite_c=0):
        sd = _flag(side, "side", routine, (0, 1))
        lo = _flag(lower, "lower", routine, (0, 1))
        al = _scalar(alpha, prefix, "alpha", routine)
        be = 0.0 if beta is None else _scalar(beta, prefix, "beta", routine)
        a = _matrix(a, dtype, "a", routine)
        b = _matrix(b, dtype, "b", routine)
        (lda, ka), (ldb, kb) = a.shape, b.shape
        if sd == 0:
            # c (m x n) = a (m x m) @ b (m x n), m = rows of a (SciPy: columns of a == rows of b)
            m, n = lda, kb
            if ka != ldb:
                raise ValueError(
                    f"{routine}: with side=0 a.shape[1] must equal b.shape[0]; got a.shape={a.shape}, "
                    f"b.shape={b.shape}"
                )
            if ka < m:
                raise ValueError(
                    f"{routine}: with side=0 a must have at least as many columns as rows; got "
                    f"a.shape={a.shape}"
                )
            if a.shape != (m, m) or b.shape[0] != m:
                a, b = a[:m, :m], b[:m, :]
        else:
            # c (m x n) = b (m x n) @ a (n x n), n = columns of a (SciPy: rows of a == columns of b)
            m, n = ldb, ka
            if kb != lda:
                raise ValueError(
                    f"{routine}: with side=1 a.shape[0] must equal b.shape[1]; got a.shape={a.shape}, "
                    f"b.shape={b.shape}"
                )
            if lda < n:
                raise ValueError(
                    f"{routine}: with side=1 a must have at least as many rows as columns; got "
                    f"a.shape={a.shape}"
                )
            if a.shape != (n, n) or b.shape[1] != n:
                a, b = a[:n, :n], b[:, :n]
        ow = _overwrite(overwrite_c, "overwrite_c", routine)
        out, work = _output(c, dtype, ow, "c", routine, (m, n))
        if out is c:
            a, b = unalias(work, a, b)
        _dispatch.level3(kind, al, a, b, be, work, "R" if sd else "L", "L" if lo else "U")
        return out

    return symm


def _rank_trans(prefix: str, herm: bool) -> tuple[int, ...]:
    """trans values BLAS accepts: all three for real, N/T for complex symmetric, N/C for Hermitian."""
    if prefix in "sd":
        return (0, 1, 2)
    return (0, 2) if herm else (0, 1)


def _rank_letter(t: int, prefix: str) -> str:
    if t == 0:
        return "N"
    return "C" if (t == 2 and prefix in "cz") else "T"


def _make_syrk(prefix: str, herm: bool) -> Callable[..., np.ndarray]:
    dtype = _DTYPE[prefix]
    kind = "herk" if herm else "syrk"
    routine = prefix + kind
    allowed = _rank_trans(prefix, herm)

    def syrk(alpha, a, beta=0.0, c=None, trans=0, lower=0, overwrite_c=0):
        tr = _trans_checked(trans, routine, allowed)
        lo = _flag(lower, "lower", routine, (0, 1))
        al = _scalar(alpha, prefix, "alpha", routine)
        be = 0.0 if beta is None else _scalar(beta, prefix, "beta", routine)
        if herm:  # BLAS ?herk reads real alpha and beta
            al, be = float(np.real(al)), float(np.real(be))
        a = _matrix(a, dtype, "a", routine)
        n = a.shape[1] if tr else a.shape[0]
        ow = _overwrite(overwrite_c, "overwrite_c", routine)
        out, work = _output(c, dtype, ow, "c", routine, (n, n))
        if out is c:
            (a,) = unalias(work, a)
        _dispatch.level3(kind, al, a, be, work, "L" if lo else "U", _rank_letter(tr, prefix))
        return out

    return syrk


def _make_syr2k(prefix: str, herm: bool) -> Callable[..., np.ndarray]:
    dtype = _DTYPE[prefix]
    kind = "her2k" if herm else "syr2k"
    routine = prefix + kind
    allowed = _rank_trans(prefix, herm)

    def syr2k(alpha, a, b, beta=0.0, c=None, trans=0, lower=0, overwrite_c=0):
        tr = _trans_checked(trans, routine, allowed)
        lo = _flag(lower, "lower", routine, (0, 1))
        al = _scalar(alpha, prefix, "alpha", routine)
        be = 0.0 if beta is None else _scalar(beta, prefix, "beta", routine)
        if herm:  # BLAS ?her2k reads a real beta
            be = float(np.real(be))
        a = _matrix(a, dtype, "a", routine)
        b = _matrix(b, dtype, "b", routine)
        if tr == 0:
            # c (n x n) from a, b of n x k; SciPy checks the k's and reads the leading n rows of b
            n, k = a.shape
            if b.shape[1] != k:
                raise ValueError(
                    f"{routine}: with trans=0 a and b must have the same number of columns; got "
                    f"a.shape={a.shape}, b.shape={b.shape}"
                )
            if b.shape[0] < n:
                raise ValueError(
                    f"{routine}: with trans=0 b needs at least a.shape[0]={n} rows; got b.shape={b.shape}"
                )
            if b.shape[0] != n:
                b = b[:n, :]
        else:
            k, n = a.shape
            if b.shape[0] != k:
                raise ValueError(
                    f"{routine}: with trans={tr} a and b must have the same number of rows; got "
                    f"a.shape={a.shape}, b.shape={b.shape}"
                )
            if b.shape[1] < n:
                raise ValueError(
                    f"{routine}: with trans={tr} b needs at least a.shape[1]={n} columns; got "
                    f"b.shape={b.shape}"
                )
            if b.shape[1] != n:
                b = b[:, :n]
        ow = _overwrite(overwrite_c, "overwrite_c", routine)
        out, work = _output(c, dtype, ow, "c", routine, (n, n))
        if out is c:
            a, b = unalias(work, a, b)
        _dispatch.level3(kind, al, a, b, be, work, "L" if lo else "U", _rank_letter(tr, prefix))
        return out

    return syr2k


def _trans_checked(trans: Any, routine: str, allowed: tuple[int, ...]) -> int:
    t = _flag(trans, "trans", routine, (0, 1, 2))
    if t not in allowed:
        raise ValueError(
            f"{routine}: argument trans must be one of {allowed} for this routine "
            f"(BLAS rejects {_TRANS[t]!r}); got {trans!r}"
        )
    return t


def _make_triangular(prefix: str, solve: bool) -> Callable[..., np.ndarray]:
    dtype = _DTYPE[prefix]
    kind = "trsm" if solve else "trmm"
    routine = prefix + kind

    def tr(alpha, a, b, side=0, lower=0, trans_a=0, diag=0, overwrite_b=0):
        sd = _flag(side, "side", routine, (0, 1))
        lo = _flag(lower, "lower", routine, (0, 1))
        ta = _flag(trans_a, "trans_a", routine, (0, 1, 2))
        dg = _flag(diag, "diag", routine, (0, 1))
        al = _scalar(alpha, prefix, "alpha", routine)
        a = _matrix(a, dtype, "a", routine)
        if b is None:
            raise TypeError(f"{routine}: argument b must be an array; got None")
        bshape = b.shape if isinstance(b, np.ndarray) else np.shape(b)
        m, n = _dims2(bshape)
        s = n if sd else m
        if solve:
            if a.shape[0] != a.shape[1] or a.shape[0] != s:
                raise ValueError(
                    f"{routine}: a must be square of order {s} (b.shape={tuple(bshape)}, side={sd}); "
                    f"got a.shape={a.shape}"
                )
        else:
            # SciPy accepts a with at least s columns and at least as many rows as columns, and uses
            # its leading s x s block.
            if not (s <= a.shape[1] <= a.shape[0]):
                raise ValueError(
                    f"{routine}: a must hold a triangle of order {s} (b.shape={tuple(bshape)}, side={sd}) "
                    f"with a.shape[0] >= a.shape[1] >= {s}; got a.shape={a.shape}"
                )
            if a.shape != (s, s):
                a = a[:s, :s]
        ow = _overwrite(overwrite_b, "overwrite_b", routine)
        out, work = _output(b, dtype, ow, "b", routine)
        if out is b:
            (a,) = unalias(work, a)
        _dispatch.level3(
            kind, al, a, work, "R" if sd else "L", "L" if lo else "U", _TRANS[ta], "U" if dg else "N"
        )
        return out

    return tr


# ---------------------------------------------------------------------------------------------------
# Docstrings: shared parameter descriptions written once
# ---------------------------------------------------------------------------------------------------

_P = {
    "alpha": "alpha : {scalar}\n    Scalar multiplier of the product.",
    "beta": "beta : {scalar}, optional\n    Scalar multiplier of ``c`` (default 0; then ``c`` is not read).",
    "c": "c : array_like, optional\n    Input/output matrix of shape {cshape} (default: zeros).",
    "overwrite_c": (
        "overwrite_c : int, optional\n    If nonzero and ``c`` is a Fortran-contiguous {dtype} array, ``c`` is "
        "updated in place and returned;\n    otherwise the result is a new array (default 0)."
    ),
    "overwrite_b": (
        "overwrite_b : int, optional\n    If nonzero and ``b`` is a Fortran-contiguous {dtype} array, ``b`` is "
        "overwritten with the result\n    and returned; otherwise the result is a new array (default 0)."
    ),
    "trans_a": "trans_a : int, optional\n    op(a) is a (0, default), a.T (1) or a.conj().T (2).",
    "trans_b": "trans_b : int, optional\n    op(b) is b (0, default), b.T (1) or b.conj().T (2).",
    "side": "side : int, optional\n    0 (default): a multiplies from the left; 1: from the right.",
    "lower": "lower : int, optional\n    0 (default): use the upper triangle of {tri}; 1: the lower triangle.",
    "diag": "diag : int, optional\n    0 (default): a's diagonal is used; 1: a is unit triangular.",
    "trans": "trans : int, optional\n    {trans}",
}

_SUMMARY = {
    "gemm": ("c = alpha*op(a)@op(b) + beta*c", ["alpha", "a", "b", "beta", "c", "trans_a", "trans_b", "overwrite_c"]),
    "symm": ("c = alpha*a@b + beta*c (side=0) or alpha*b@a + beta*c (side=1), a symmetric",
             ["alpha", "a", "b", "beta", "c", "side", "lower", "overwrite_c"]),
    "hemm": ("c = alpha*a@b + beta*c (side=0) or alpha*b@a + beta*c (side=1), a Hermitian",
             ["alpha", "a", "b", "beta", "c", "side", "lower", "overwrite_c"]),
    "syrk": ("c = alpha*op(a)@op(a).T + beta*c on one triangle of c",
             ["alpha", "a", "beta", "c", "trans", "lower", "overwrite_c"]),
    "herk": ("c = alpha*op(a)@op(a).conj().T + beta*c on one triangle of c (alpha, beta real)",
             ["alpha", "a", "beta", "c", "trans", "lower", "overwrite_c"]),
    "syr2k": ("c = alpha*(op(a)@op(b).T + op(b)@op(a).T) + beta*c on one triangle of c",
              ["alpha", "a", "b", "beta", "c", "trans", "lower", "overwrite_c"]),
    "her2k": ("c = alpha*op(a)@op(b).H + conj(alpha)*op(b)@op(a).H + beta*c on one triangle (beta real)",
              ["alpha", "a", "b", "beta", "c", "trans", "lower", "overwrite_c"]),
    "trmm": ("b = alpha*op(a)@b (side=0) or alpha*b@op(a) (side=1), a triangular",
             ["alpha", "a", "b", "side", "lower", "trans_a", "diag", "overwrite_b"]),
    "trsm": ("solve op(a)@x = alpha*b (side=0) or x@op(a) = alpha*b (side=1), a triangular",
             ["alpha", "a", "b", "side", "lower", "trans_a", "diag", "overwrite_b"]),
}

_OPERAND = {
    "gemm": {"a": "a : array_like\n    2-D matrix; op(a) is m x k.", "b": "b : array_like\n    2-D matrix; op(b) is k x n."},
    "symm": {"a": "a : array_like\n    Symmetric matrix (only the triangle named by ``lower`` is read).",
             "b": "b : array_like\n    m x n matrix."},
    "syrk": {"a": "a : array_like\n    n x k matrix (trans=0) or k x n matrix (otherwise)."},
    "syr2k": {"a": "a : array_like\n    n x k matrix (trans=0) or k x n matrix (otherwise).",
              "b": "b : array_like\n    Same shape as ``a``."},
    "trmm": {"a": "a : array_like\n    Triangular matrix (only the triangle named by ``lower`` is read).",
             "b": "b : array_like\n    m x n matrix, input and output."},
}
_OPERAND["hemm"] = {**_OPERAND["symm"], "a": "a : array_like\n    Hermitian matrix (only the triangle named by "
                    "``lower`` is read; its diagonal's imaginary part is ignored)."}
_OPERAND["herk"] = _OPERAND["syrk"]
_OPERAND["her2k"] = _OPERAND["syr2k"]
_OPERAND["trsm"] = {**_OPERAND["trmm"], "b": "b : array_like\n    m x n right-hand sides, input and output."}


def _docstring(prefix: str, kind: str) -> str:
    summary, params = _SUMMARY[kind]
    dtype = _DTYPE[prefix]
    scalar = "complex" if prefix in "cz" else "float"
    if kind in ("herk",):
        scalar = "float"
    trans = {
        "s": "op(a) is a (0, default) or a.T (1 or 2).",
        "d": "op(a) is a (0, default) or a.T (1 or 2).",
    }.get(prefix, "op(a) is a (0, default) or a.conj().T (2)." if kind in ("herk", "her2k")
          else "op(a) is a (0, default) or a.T (1).")
    tri = "c" if kind in ("syrk", "herk", "syr2k", "her2k") else "a"
    cshape = "(n, n)" if tri == "c" else "(m, n)"
    out = "x" if kind == "trsm" else ("b" if kind == "trmm" else "c")
    lines = [f"{summary}.", "", f"Drop-in for ``scipy.linalg.blas.{prefix}{kind}`` ({dtype}).", "",
             "Parameters", "----------"]
    for p in params:
        if p in ("a", "b"):
            lines.append(_OPERAND[kind][p])
        else:
            lines.append(_P[p].format(scalar=scalar, cshape=cshape, dtype=dtype, tri=tri, trans=trans))
    lines += ["", "Returns", "-------", f"{out} : ndarray",
              f"    The result, a Fortran-ordered {dtype} array.", "", "Raises", "------",
              "ValueError", "    Flags out of range or operand shapes that do not fit together.",
              "TypeError", "    Arguments that cannot be converted to numbers or arrays."]
    return "\n".join(lines)


_FACTORIES: dict[str, tuple[str, Callable[[str], Callable[..., np.ndarray]]]] = {
    "gemm": ("sdcz", _make_gemm),
    "symm": ("sdcz", lambda p: _make_symm(p, False)),
    "hemm": ("cz", lambda p: _make_symm(p, True)),
    "syrk": ("sdcz", lambda p: _make_syrk(p, False)),
    "herk": ("cz", lambda p: _make_syrk(p, True)),
    "syr2k": ("sdcz", lambda p: _make_syr2k(p, False)),
    "her2k": ("cz", lambda p: _make_syr2k(p, True)),
    "trmm": ("sdcz", lambda p: _make_triangular(p, False)),
    "trsm": ("sdcz", lambda p: _make_triangular(p, True)),
}


def _build() -> None:
    for kind, (prefixes, factory) in _FACTORIES.items():
        for p in prefixes:
            fn = factory(p)
            name = p + kind
            fn.__name__ = fn.__qualname__ = name
            fn.__module__ = "tileblas.blas"
            fn.__doc__ = _docstring(p, kind)
            if p in "cz":  # complex default beta, as SciPy documents it
                d = list(fn.__defaults__ or ())
                if kind not in ("trmm", "trsm") and d:
                    d[0] = 0j
                    fn.__defaults__ = tuple(d)
            globals()[name] = _front(kind, p, fn)
            __all__.append(name)
    __all__.sort()


_build()

#: Level-3 routine families, each with the precisions it exists in.
LEVEL3_FAMILIES = {k: v[0] for k, v in _FACTORIES.items()}
