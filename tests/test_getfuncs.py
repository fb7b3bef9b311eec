"""get_blas_funcs / find_best_blas_type against scipy.linalg.blas: selection rules, attributes, errors."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import scipy.linalg.blas as S

import tileblas.blas as T
from tileblas.blas import _getfuncs

CHARS = [c for c in np.typecodes["All"] if c not in "SUVOMm"] + ["O", "S", "U"]


def arr(char, order="C"):
    shape = (3, 2)
    return np.zeros(shape, dtype=np.dtype(char), order=order)


@pytest.mark.parametrize("char", CHARS)
@pytest.mark.parametrize("order", ["C", "F"])
def test_single_array(char, order):
    a = arr(char, order)
    assert T.find_best_blas_type((a,)) == S.find_best_blas_type((a,))


def test_array_pairs_and_triples():
    chars = ["?", "b", "h", "i", "l", "e", "f", "d", "g", "F", "D", "G", "O"]
    for c1, c2 in itertools.product(chars, repeat=2):
        for o1, o2 in itertools.product("CF", repeat=2):
            arrays = (arr(c1, o1), arr(c2, o2))
            assert T.find_best_blas_type(arrays) == S.find_best_blas_type(arrays), (c1, o1, c2, o2)
    for cs in [("f", "d", "F"), ("F", "d", "f"), ("i", "F", "f"), ("D", "F", "d"), ("e", "e", "e")]:
        arrays = tuple(arr(c, "F") for c in cs)
        assert T.find_best_blas_type(arrays) == S.find_best_blas_type(arrays)


@pytest.mark.parametrize("dtype", [None, "f", "d", "F", "D", np.int8, np.int64, np.float16, np.longdouble,
                                   np.clongdouble, object, "i4", np.bool_])
def test_dtype_only(dtype):
    assert T.find_best_blas_type(dtype=dtype) == S.find_best_blas_type(dtype=dtype)
    assert T.find_best_blas_type((), dtype) == S.find_best_blas_type((), dtype)


def test_arrays_win_over_dtype():
    a = np.ones((2, 2), np.complex64)
    assert T.find_best_blas_type((a,), dtype="d") == S.find_best_blas_type((a,), dtype="d") == (
        "c", np.dtype(np.complex64), False)


def _scipy_name(f):
    """The routine name of a SciPy f2py function object (its repr is '<fortran function dgemm>')."""
    return re.search(r"(\w+)>$", repr(f)).group(1)


L3 = ["gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"]


@pytest.mark.parametrize("name", L3)
@pytest.mark.parametrize("char", ["f", "d", "F", "D", "i", "e", "G"])
def test_level3_lookup_matches_scipy(name, char):
    arrays = (arr(char),)
    try:
        ref = S.get_blas_funcs(name, arrays)
    except ValueError:
        with pytest.raises(ValueError, match=name):
            T.get_blas_funcs(name, arrays)
        return
    f = T.get_blas_funcs(name, arrays)
    assert f is getattr(T, _scipy_name(ref))
    for attr in ("typecode", "prefix", "dtype", "module_name", "int_dtype"):
        assert getattr(f, attr) == getattr(ref, attr), attr


@pytest.mark.parametrize("name", ["axpy", "dot", "dotc", "dotu", "nrm2", "scal", "asum", "amax", "gemv", "ger",
                                  "gerc", "symv", "trmv", "trsv", "copy", "swap", "rotg"])
@pytest.mark.parametrize("dtype", ["f", "d", "F", "D"])
def test_level12_lookup_with_aliases(name, dtype):
    """Level 1/2 routines land in tileblas.blas separately: found when present, ValueError otherwise."""
    try:
        ref = S.get_blas_funcs(name, dtype=dtype)
    except ValueError:
        with pytest.raises(ValueError):
            T.get_blas_funcs(name, dtype=dtype)
        return
    fname = _scipy_name(ref)
    if fname in T.__all__:
        f = T.get_blas_funcs(name, dtype=dtype)
        assert f is getattr(T, fname) or getattr(f, "__wrapped__", None) is getattr(T, fname)
        assert (f.typecode, f.dtype, f.module_name, f.int_dtype) == (
            ref.typecode, ref.dtype, ref.module_name, ref.int_dtype)
    else:
        with pytest.raises(ValueError, match=fname):
            T.get_blas_funcs(name, dtype=dtype)


def test_list_of_names_and_ordering():
    a = np.ones((2, 2), np.float32, order="F")
    fs = T.get_blas_funcs(["gemm", "trsm", "syrk"], (a,))
    assert isinstance(fs, list) and [f.__name__ for f in fs] == ["sgemm", "strsm", "ssyrk"]
    fs2 = T.get_blas_funcs(("gemm", "trsm", "syrk"), (a,))
    assert fs2 == fs
    assert T.get_blas_funcs([], (a,)) == []
    assert T.get_blas_funcs(n for n in ["gemm"]) == [T.dgemm]


def test_mixed_double_and_single_complex_picks_z():
    f = T.get_blas_funcs("gemm", (np.ones(2), np.ones(2, np.complex64)))
    assert f is T.zgemm and f.dtype == np.complex128


def test_memoized():
    _getfuncs._MEMO.clear()
    a = np.ones((3, 3))
    f1 = T.get_blas_funcs("gemm", (a,))
    n = len(_getfuncs._MEMO)
    f2 = T.get_blas_funcs("gemm", (np.ones((4, 4)),))
    assert f1 is f2 and len(_getfuncs._MEMO) == n
    T.get_blas_funcs("gemm", (np.asfortranarray(a),))  # the Fortran flag is part of the key
    assert len(_getfuncs._MEMO) == n + 1
    T.get_blas_funcs("gemm", dtype=[("x", "f8")])  # unhashable dtype spec: works, not memoized
    l1 = T.get_blas_funcs(["gemm", "syrk"])
    l1.append(None)  # the caller's list must not alias the memo
    assert T.get_blas_funcs(["gemm", "syrk"]) == [T.dgemm, T.dsyrk]


def test_returned_routine_computes():
    a = np.arange(6.0).reshape(2, 3)
    gemm = T.get_blas_funcs("gemm", (a,))
    np.testing.assert_allclose(gemm(1.0, a, a.T), a @ a.T)


def test_errors():
    with pytest.raises(ValueError, match="dfoo"):
        T.get_blas_funcs("foo")
    with pytest.raises(ValueError, match="cfoo"):
        T.get_blas_funcs(["gemm", "foo"], dtype="F")
    with pytest.raises(ValueError, match="dhemm"):  # no real Hermitian routine, as in SciPy
        T.get_blas_funcs("hemm")
    with pytest.raises(ValueError):
        S.get_blas_funcs("hemm")
    with pytest.raises(TypeError, match="3"):
        T.get_blas_funcs(3)
    with pytest.raises(TypeError, match="3"):
        T.get_blas_funcs(["gemm", 3])
    with pytest.raises(ValueError, match="ilp64.*'x'"):
        T.get_blas_funcs("gemm", ilp64="x")


def test_ilp64_without_the_ilp64_library_fails_as_scipy_does(lp64):
    with pytest.raises(RuntimeError, match="ILP64.*tileblas\\[ilp64\\]"):
        T.get_blas_funcs("gemm", ilp64=True)
    # 'preferred' without ILP64: the 32-bit routines, as SciPy built without ILP64 gives
    assert T.get_blas_funcs("gemm", ilp64="preferred").int_dtype == np.dtype(np.intc)
    if not S.HAS_ILP64:
        assert T.get_blas_funcs("gemm", ilp64="preferred").int_dtype == S.get_blas_funcs(
            "gemm", ilp64="preferred").int_dtype


def test_not_a_routine_name():
    # names that prefix into non-routines of the module are not handed out
    with pytest.raises(ValueError):
        T.get_blas_funcs("et_blas_funcs", dtype=None)  # "d" + ... is not a routine either way
