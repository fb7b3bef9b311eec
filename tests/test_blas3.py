"""tileblas.blas Level 3 against scipy.linalg.blas: every routine x precision x flag, layouts, overwrite
semantics, conversions and errors.  SciPy is run on the same inputs in the same process."""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest
import scipy.linalg.blas as S

import tileblas.blas as T
from tileblas.blas import _level3
from tileblas.blas import _dispatch

PREFIXES = "sdcz"
DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
TOL = {"s": 2e-4, "d": 1e-11, "c": 2e-4, "z": 1e-11}
LAYOUTS = ["C", "F", "S", "N"]
LEVEL3 = [p + k for k, ps in _level3.LEVEL3_FAMILIES.items() for p in ps]


def rand(rng, shape, prefix):
    x = rng.standard_normal(shape)
    if prefix in "cz":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(DT[prefix])


def layout(x, kind):
    """x in C order, Fortran order, a column-strided view (S) or a view with no unit stride (N)."""
    if kind == "C":
        return np.ascontiguousarray(x)
    if kind == "F":
        return np.asfortranarray(x)
    if kind == "S":
        big = np.zeros((x.shape[0] + 3, x.shape[1] + 2), x.dtype, order="F")
        v = big[2 : 2 + x.shape[0], 1 : 1 + x.shape[1]]
    else:
        big = np.zeros((2 * x.shape[0] + 1, 3 * x.shape[1] + 1), x.dtype)
        v = big[1::2, ::3][: x.shape[0], : x.shape[1]]
    v[...] = x
    return v


def scalars(prefix):
    """(alpha, beta) pairs including 0 and 1; complex ones for complex routines."""
    if prefix in "cz":
        return [(1.0, 0.0), (0.7 - 0.4j, 1.0), (0.0, -0.5 + 0.25j), (1.0 + 0.5j, 0.3 + 0.2j)]
    return [(1.0, 0.0), (0.7, 1.0), (0.0, -0.5), (-1.3, 0.3)]


def check_same(ours, ref, prefix, inputs_c_like=None):
    """Same values (to rounding), dtype, shape and Fortran order as SciPy's result."""
    assert isinstance(ours, np.ndarray)
    assert ours.dtype == ref.dtype == np.dtype(DT[prefix])
    assert ours.shape == ref.shape
    assert ours.flags.f_contiguous
    scale = max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
    np.testing.assert_allclose(ours, ref, rtol=TOL[prefix], atol=TOL[prefix] * scale)


def both(name, *args, **kw):
    """Call tileblas and SciPy on independent copies of the array arguments."""
    def copies():
        return [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args], {
            k: (v.copy(order="K") if isinstance(v, np.ndarray) else v) for k, v in kw.items()
        }

    a1, k1 = copies()
    a2, k2 = copies()
    return getattr(T, name)(*a1, **k1), getattr(S, name)(*a2, **k2)


# ---------------------------------------------------------------------------------------------------
# API surface
# ---------------------------------------------------------------------------------------------------


def test_every_scipy_level3_routine_is_exported():
    scipy_l3 = {n for n in dir(S) if re.fullmatch(r"[sdcz](gemm|symm|hemm|syrk|herk|syr2k|her2k|trmm|trsm)", n)}
    assert scipy_l3 == set(LEVEL3)
    for n in scipy_l3:
        assert n in T.__all__ and callable(getattr(T, n))


@pytest.mark.parametrize("name", LEVEL3)
def test_signature_matches_scipy(name):
    m = re.match(r"\w+ = \w+\((.*)\)", getattr(S, name).__doc__.strip().splitlines()[0])
    scipy_params = [p for p in re.split(r"[,\[\]]+", m.group(1)) if p]
    params = list(inspect.signature(getattr(T, name)).parameters.values())
    assert [p.name for p in params] == scipy_params
    # required: alpha, a (, b); defaults as SciPy documents them
    for p in params:
        doc = getattr(S, name).__doc__
        d = re.search(rf"^{p.name} : input .*?\n\s+Default: (.*)$", doc, re.M)
        if d is None:
            assert p.default is inspect.Parameter.empty or p.name == "c"
        else:
            expected = eval(d.group(1).replace("(0.0, 0.0)", "0j"))
            assert p.default == expected
    assert getattr(T, name).__name__ == name
    assert getattr(T, name).__doc__


# ---------------------------------------------------------------------------------------------------
# Values against SciPy over every flag and layout
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("ta", [0, 1, 2])
@pytest.mark.parametrize("tb", [0, 1, 2])
@pytest.mark.parametrize("lay", LAYOUTS)
def test_gemm(prefix, ta, tb, lay):
    rng = np.random.default_rng(ta * 3 + tb)
    m, n, k = 5, 3, 4
    a = layout(rand(rng, (k, m) if ta else (m, k), prefix), lay)
    b = layout(rand(rng, (n, k) if tb else (k, n), prefix), "F" if lay == "C" else "C")
    c = layout(rand(rng, (m, n), prefix), lay)
    name = prefix + "gemm"
    for alpha, beta in scalars(prefix):
        ours, ref = both(name, alpha, a, b, beta, c, trans_a=ta, trans_b=tb)
        check_same(ours, ref, prefix)
    ours, ref = both(name, 1.5, a, b, trans_a=ta, trans_b=tb)  # no c: zeros
    check_same(ours, ref, prefix)
    # and the mathematics itself
    op = {0: lambda x: x, 1: lambda x: x.T, 2: lambda x: x.conj().T}
    alpha, beta = scalars(prefix)[-1]
    want = alpha * op[ta](a) @ op[tb](b) + beta * c
    check_same(T.__dict__[name](alpha, a, b, beta, c, ta, tb), want.astype(DT[prefix]), prefix)


@pytest.mark.parametrize("name", [p + "symm" for p in PREFIXES] + ["chemm", "zhemm"])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("lay", LAYOUTS)
def test_symm_hemm(name, side, lower, lay):
    prefix = name[0]
    rng = np.random.default_rng(side * 2 + lower)
    m, n = 5, 3
    s = n if side else m
    a = layout(rand(rng, (s, s), prefix), lay)  # not symmetric: only one triangle may be read
    b = layout(rand(rng, (m, n), prefix), "F" if lay == "C" else lay)
    c = layout(rand(rng, (m, n), prefix), lay)
    for alpha, beta in scalars(prefix):
        ours, ref = both(name, alpha, a, b, beta, c, side=side, lower=lower)
        check_same(ours, ref, prefix)
    ours, ref = both(name, 2.0, a, b, side=side, lower=lower)
    check_same(ours, ref, prefix)


def _rank_trans(name):
    prefix, kind = name[0], name[1:]
    if prefix in "sd":
        return [0, 1, 2]
    return [0, 2] if kind.startswith("he") else [0, 1]


@pytest.mark.parametrize(
    "name,trans",
    [(p + k, t) for k in ("syrk", "syr2k") for p in PREFIXES for t in _rank_trans(p + k)]
    + [(p + k, t) for k in ("herk", "her2k") for p in "cz" for t in _rank_trans(p + k)],
)
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("lay", LAYOUTS)
def test_rank_k(name, trans, lower, lay):
    prefix = name[0]
    rng = np.random.default_rng(trans * 2 + lower)
    n, k = 4, 6
    shape = (k, n) if trans else (n, k)
    a = layout(rand(rng, shape, prefix), lay)
    b = layout(rand(rng, shape, prefix), "C" if lay == "F" else lay)
    c = layout(rand(rng, (n, n), prefix), lay)
    two = "2k" in name
    for alpha, beta in scalars(prefix):
        args = (alpha, a, b, beta, c) if two else (alpha, a, beta, c)
        ours, ref = both(name, *args, trans=trans, lower=lower)
        check_same(ours, ref, prefix)
    args = (0.5, a, b) if two else (0.5, a)
    ours, ref = both(name, *args, trans=trans, lower=lower)
    check_same(ours, ref, prefix)


def _triangle(rng, s, prefix, diag):
    a = rand(rng, (s, s), prefix)
    if diag:
        return a * (0.3 / s)  # unit triangular: keep the off-diagonal small, solves stay accurate
    return a * (0.3 / s) + np.eye(s, dtype=a.dtype) * 2


@pytest.mark.parametrize("name", [p + k for k in ("trmm", "trsm") for p in PREFIXES])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("ta", [0, 1, 2])
@pytest.mark.parametrize("diag", [0, 1])
@pytest.mark.parametrize("lay", LAYOUTS)
def test_triangular(name, side, lower, ta, diag, lay):
    prefix = name[0]
    rng = np.random.default_rng(side + 2 * lower + 4 * ta + 12 * diag)
    m, n = 5, 3
    s = n if side else m
    a = layout(_triangle(rng, s, prefix, diag), lay)
    b = layout(rand(rng, (m, n), prefix), lay)
    for alpha in (1.0, 0.0, scalars(prefix)[1][0]):
        ours, ref = both(name, alpha, a, b, side=side, lower=lower, trans_a=ta, diag=diag)
        check_same(ours, ref, prefix)


def test_trsm_solves():
    rng = np.random.default_rng(5)
    a = np.tril(rng.standard_normal((6, 6))) + 6 * np.eye(6)
    b = rng.standard_normal((6, 2))
    x = T.dtrsm(2.0, a, b, lower=1)
    np.testing.assert_allclose(a @ x, 2.0 * b, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------------
# overwrite_c / overwrite_b: memory sharing identical to SciPy's
# ---------------------------------------------------------------------------------------------------


def _candidates(shape, dtype):
    """Output arrays of every kind SciPy treats differently (name, factory)."""
    m, n = shape

    def f():
        return np.asfortranarray(np.ones(shape, dtype))

    def colslice():
        return np.ones((m, n + 3), dtype, order="F")[:, 1 : 1 + n]

    def rowslice():
        return np.ones((m + 2, n), dtype, order="F")[1 : 1 + m]

    def cord():
        return np.ones(shape, dtype)

    def other_dtype():
        return np.asfortranarray(np.ones(shape, np.float64 if dtype != np.float64 else np.float32))

    def swapped():
        return np.asfortranarray(np.ones(shape, np.dtype(dtype).newbyteorder()))

    def misaligned():
        it = np.dtype(dtype).itemsize
        buf = np.zeros(m * n * it + 1, np.uint8)[1:]
        v = buf.view(dtype).reshape(shape, order="F")
        v[...] = 1
        return v

    def reversed_():
        return np.asfortranarray(np.ones(shape, dtype))[::-1]

    return {"F": f, "colslice": colslice, "rowslice": rowslice, "C": cord, "dtype": other_dtype,
            "swapped": swapped, "misaligned": misaligned, "reversed": reversed_}


def _calls(prefix):
    """(routine, arguments before the output, keyword of the output, overwrite keyword, output shape)."""
    rng = np.random.default_rng(0)
    a = rand(rng, (4, 3), prefix)
    sq = _triangle(rng, 4, prefix, 0)
    calls = [
        (prefix + "gemm", (1.0, a, a.T, 0.5), "c", "overwrite_c", (4, 4)),
        (prefix + "symm", (1.0, sq, a, 0.5), "c", "overwrite_c", (4, 3)),
        (prefix + "syrk", (1.0, a, 0.5), "c", "overwrite_c", (4, 4)),
        (prefix + "syr2k", (1.0, a, a, 0.5), "c", "overwrite_c", (4, 4)),
        (prefix + "trmm", (1.0, sq), "b", "overwrite_b", (4, 3)),
        (prefix + "trsm", (1.0, sq), "b", "overwrite_b", (4, 3)),
    ]
    if prefix in "cz":
        calls += [
            (prefix + "hemm", (1.0, sq, a, 0.5), "c", "overwrite_c", (4, 3)),
            (prefix + "herk", (1.0, a, 0.5), "c", "overwrite_c", (4, 4)),
            (prefix + "her2k", (1.0, a, a, 0.5), "c", "overwrite_c", (4, 4)),
        ]
    return calls


@pytest.mark.parametrize("prefix", PREFIXES)
def test_overwrite_semantics_match_scipy(prefix):
    dtype = DT[prefix]
    for name, args, okw, ow_kw, shape in _calls(prefix):
        for kind, make in _candidates(shape, dtype).items():
            for ow in (0, 1):
                c1, c2 = make(), make()
                before = np.array(c1)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
                    r1 = getattr(T, name)(*args, **{okw: c1, ow_kw: ow})
                    r2 = getattr(S, name)(*args, **{okw: c2, ow_kw: ow})
                label = f"{name} {kind} overwrite={ow}"
                assert np.may_share_memory(r1, c1) == np.may_share_memory(r2, c2), label
                assert (r1 is c1) == (r2 is c2), label
                if ow == 0:
                    assert not np.may_share_memory(r1, c1), label
                if not np.may_share_memory(r1, c1):
                    np.testing.assert_array_equal(c1, before, err_msg=label)  # input untouched
                check_same(np.asarray(r1), np.asarray(r2), prefix)
                assert r1.flags.f_contiguous, label


def test_readonly_output_is_never_written():
    # SciPy writes into a read-only Fortran array with overwrite_c=1; tileblas copies instead.
    a = np.ones((3, 3))
    c = np.asfortranarray(np.ones((3, 3)))
    c.flags.writeable = False
    r = T.dgemm(1.0, a, a, 1.0, c, overwrite_c=1)
    assert not np.may_share_memory(r, c)
    np.testing.assert_array_equal(c, 1.0)
    np.testing.assert_array_equal(r, 4.0)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_output_aliasing_an_input_is_exact(prefix):
    rng = np.random.default_rng(3)
    x = np.asfortranarray(rand(rng, (4, 4), prefix))
    want = x @ x + x
    r = getattr(T, prefix + "gemm")(1.0, x, x, 1.0, x, overwrite_c=1)
    assert r is x
    check_same(r, want, prefix)
    t = np.asfortranarray(np.triu(_triangle(rng, 4, prefix, 0)))
    want = t @ t
    r = getattr(T, prefix + "trmm")(1.0, t, t, overwrite_b=1)
    assert r is t
    check_same(r, want, prefix)


def test_c_order_inputs_reach_the_kernels_uncopied(monkeypatch, request):
    seen = []
    real = _dispatch.level3

    def spy(name, *args, **kw):
        seen.append((name, args))
        return real(name, *args, **kw)

    monkeypatch.setattr(_dispatch, "level3", spy)
    prev = _dispatch.set_small_path(False)  # the Python path's layout handling (the C path's: test_fastpath)
    request.addfinalizer(lambda: _dispatch.set_small_path(prev))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 4))
    b = rng.standard_normal((4, 3))
    T.dgemm(1.0, a, b)
    name, args = seen[-1]
    assert name == "gemm" and args[1] is a and args[2] is b and args[5:] == ("N", "N")
    sq = rng.standard_normal((5, 5))
    tri = sq + 5 * np.eye(5)
    rhs = rng.standard_normal((2, 5))
    T.dtrsm(1.0, tri, rhs, side=1, lower=1, trans_a=2, diag=1)
    name, args = seen[-1]
    assert name == "trsm" and args[1] is tri and args[3:] == ("R", "L", "C", "U")
    assert not np.may_share_memory(args[2], rhs)  # overwrite_b=0: a fresh output
    T.dtrmm(1.0, sq, rng.standard_normal((5, 2)), side=0, lower=1, trans_a=1, diag=1)
    name, args = seen[-1]
    assert name == "trmm" and args[1] is sq and args[3:] == ("L", "L", "T", "U")
    T.zherk(2.0 + 1j, rng.standard_normal((3, 2)) + 0j, 1.0 - 2j, None, 2, 1)
    name, args = seen[-1]
    assert name == "herk" and args[0] == 2.0 and args[2] == 1.0 and args[4:] == ("L", "C")


# ---------------------------------------------------------------------------------------------------
# Conversions SciPy (f2py) performs
# ---------------------------------------------------------------------------------------------------


CONVERSIONS = [
    ("ints", "dgemm", (1, np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4)), {}),
    ("lists", "dgemm", (1, [[1.0, 2.0], [3.0, 4.0]], [[1, 0], [2, 1]]), {}),
    ("f64 to s", "sgemm", (0.1, np.ones((2, 3)) / 3, np.ones((3, 2))), {}),
    ("real to z", "zgemm", (1j, np.ones((2, 3)), np.ones((3, 2))), {}),
    ("c int f32", "dgemm", (1, np.ones((2, 3)), np.ones((3, 4)), 1.0, np.ones((2, 4), np.float32)), {}),
    ("1-d b", "dgemm", (1, np.arange(6.0).reshape(2, 3), np.ones(3)), {}),
    ("scalar a", "dgemm", (1, 2.0, np.ones((1, 3))), {}),
    ("3-d a", "dgemm", (1, np.arange(6.0).reshape(2, 1, 3), np.ones((3, 1))), {}),
    ("3-d a folded", "dgemm", (1, np.arange(6.0).reshape(1, 2, 3), np.ones((3, 2))), {}),
    ("3-d c", "dgemm", (1, np.ones((2, 3)), np.ones((3, 1)), 1.0, np.ones((2, 1, 1))), {}),
    ("1-d c", "dgemm", (1, np.ones((2, 3)), np.ones((3, 1)), 1.0, np.ones(2)), {}),
    ("0-d c", "dgemm", (1, np.ones((1, 3)), np.ones((3, 1)), 1.0, np.array(5.0)), {}),
    ("list c", "dgemm", (1, np.ones((1, 3)), np.ones((3, 1)), 1.0, [[5.0]]), {}),
    ("complex alpha to d", "dgemm", (2 + 1j, np.ones((2, 2)), np.ones((2, 2))), {}),
    ("array alpha", "dgemm", (np.array([2.0, 3.0]), np.ones((2, 2)), np.ones((2, 2))), {}),
    ("np scalar alpha", "sgemm", (np.float32(0.5), np.ones((2, 2)), np.ones((2, 2))), {}),
    ("None beta/c", "dgemm", (1, np.ones((2, 2)), np.ones((2, 2)), None, None), {}),
    ("None flag", "dgemm", (1, np.ones((2, 2)), np.ones((2, 3))), {"trans_a": None}),
    ("bool flag", "dgemm", (1, np.ones((3, 2)), np.ones((3, 3))), {"trans_a": True}),
    ("float flag", "dgemm", (1, np.ones((3, 2)), np.ones((3, 3))), {"trans_a": 1.0}),
    ("np int flag", "dgemm", (1, np.ones((3, 2)), np.ones((3, 3))), {"trans_a": np.int64(2)}),
    ("overwrite 2", "dgemm", (1, np.ones((2, 2)), np.ones((2, 2)), 1.0, np.ones((2, 2), order="F")),
     {"overwrite_c": 2}),
    ("keywords", "dgemm", (), {"alpha": 1.0, "a": np.ones((2, 3)), "b": np.ones((3, 2)), "beta": 0.5,
                               "c": np.ones((2, 2))}),
    ("positional all", "dsyrk", (1.0, np.ones((2, 3)), 0.5, np.ones((3, 3)), 1, 1, 0), {}),
    ("positional trmm", "ztrmm", (1.0, np.eye(3), np.ones((3, 2)), 0, 1, 2, 1, 0), {}),
    ("1-d b trsm", "dtrsm", (1, 2 * np.eye(3), np.ones(3)), {}),
    ("herk complex scalars", "zherk", (1 + 5j, np.ones((3, 4)), 1 + 5j, np.eye(3)), {}),
    ("her2k complex beta", "zher2k", (1 + 1j, np.ones((3, 4)), np.ones((3, 4)), 1 + 5j, np.eye(3)), {}),
    ("symm non-square a", "dsymm", (1, np.arange(12.0).reshape(3, 4), np.ones((4, 2))), {}),
    ("symm side1 non-square a", "dsymm", (1, np.arange(6.0).reshape(3, 2), np.ones((2, 3))), {"side": 1}),
    ("trmm tall a", "dtrmm", (1, np.arange(12.0).reshape(4, 3), np.ones((3, 2))), {}),
    ("trmm bigger a", "dtrmm", (1, np.arange(9.0).reshape(3, 3), np.ones((2, 2))), {}),
    ("trmm side1 tall a", "dtrmm", (1, np.arange(12.0).reshape(4, 3), np.ones((2, 2))), {"side": 1}),
    ("syr2k taller b", "dsyr2k", (1, np.arange(12.0).reshape(3, 4), np.ones((5, 4))), {}),
    ("syr2k wider b", "dsyr2k", (1, np.arange(12.0).reshape(3, 4), np.ones((3, 5))), {"trans": 1}),
    ("empty m", "dgemm", (1, np.zeros((0, 3)), np.ones((3, 4))), {}),
    ("empty k", "dgemm", (1, np.zeros((2, 0)), np.zeros((0, 4)), 2.0, np.ones((2, 4))), {}),
    ("empty k beta0", "zgemm", (1, np.zeros((2, 0)), np.zeros((0, 4)), 0.0, np.full((2, 4), np.nan)), {}),
    ("empty syrk k", "csyrk", (1, np.zeros((3, 0)), 0.5, np.ones((3, 3))), {}),
    ("empty trsm", "strsm", (1, np.zeros((0, 0)), np.ones((0, 2))), {}),
    ("empty trmm b", "dtrmm", (1, np.ones((2, 2)), np.ones((2, 0))), {}),
    ("beta0 ignores nan c", "dgemm", (1, np.ones((2, 2)), np.ones((2, 2)), 0.0, np.full((2, 2), np.nan)), {}),
    ("broadcast a", "dgemm", (1, np.broadcast_to(np.arange(3.0), (2, 3)), np.ones((3, 4))), {}),
    ("np.complex128 alpha to s", "sgemm", (np.complex128(2 + 1j), np.ones((2, 2)), np.ones((2, 2))), {}),
    ("herk imag diag", "cherk", (1.0, np.ones((2, 2)) * (1 + 1j), 1.0, np.eye(2) * (1 + 3j)), {}),
]


@pytest.mark.parametrize("label,name,args,kw", CONVERSIONS, ids=[c[0] for c in CONVERSIONS])
def test_conversions_match_scipy(label, name, args, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        ours, ref = both(name, *args, **kw)
    assert type(ours) is type(ref)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    assert ours.flags.f_contiguous
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-6)


def test_complex_to_real_warns_like_scipy():
    a = np.ones((2, 2)) + 1j
    with pytest.warns(np.exceptions.ComplexWarning):
        ref = S.dgemm(1.0, a, a.real)
    with pytest.warns(np.exceptions.ComplexWarning):
        ours = T.dgemm(1.0, a, a.real)
    np.testing.assert_array_equal(ours, ref)


# ---------------------------------------------------------------------------------------------------
# Errors: wherever SciPy raises, tileblas raises ValueError/TypeError naming the argument
# ---------------------------------------------------------------------------------------------------

A23, A33, B34 = np.ones((2, 3)), np.ones((3, 3)), np.ones((3, 4))
ERRORS = [
    ("dgemm", (1, A23, A23), {}, ValueError, r"a\.shape=\(2, 3\).*b\.shape=\(2, 3\)"),
    ("dgemm", (1, A23, B34, 1.0, np.ones((3, 4))), {}, ValueError, r"argument c has shape \(3, 4\)"),
    ("dgemm", (1, np.ones((1, 3)), B34, 1.0, np.ones(4)), {}, ValueError, r"argument c"),
    ("dgemm", (1, A23, B34), {"trans_a": 3}, ValueError, r"trans_a.*3"),
    ("dgemm", (1, A23, B34), {"trans_b": -1}, ValueError, r"trans_b.*-1"),
    ("dgemm", (1, A23, B34), {"trans_a": "T"}, TypeError, r"trans_a.*'T'"),
    ("dgemm", ("x", A23, B34), {}, TypeError, r"alpha.*'x'"),
    ("dgemm", (None, A23, B34), {}, TypeError, r"alpha.*None"),
    ("dgemm", (1, "ab", B34), {}, ValueError, r"argument a"),
    ("dgemm", (1, A23, B34), {"overwrite_c": "x"}, TypeError, r"overwrite_c.*'x'"),
    ("dgemm", (1, A23, B34), {"foo": 1}, TypeError, r"foo"),
    ("dgemm", (1, A23), {}, TypeError, r"b"),
    ("dgemm", (1, A23, B34, 0, None, 0, 0, 0, 0), {}, TypeError, r"argument"),
    ("dgemm", (1, np.ones((2, 3, 2)), np.ones((3, 1))), {}, ValueError, r"a\.shape=\(2, 6\)"),
    ("dsymm", (1, A33, np.ones((3, 2))), {"side": 2}, ValueError, r"side.*2"),
    ("dsymm", (1, A33, np.ones((3, 2))), {"lower": -1}, ValueError, r"lower.*-1"),
    ("zhemm", (1, A33, np.ones((2, 2))), {}, ValueError, r"a\.shape\[1\] must equal b\.shape\[0\]"),
    ("dsymm", (1, A33, np.ones((2, 2))), {"side": 1}, ValueError, r"a\.shape\[0\] must equal b\.shape\[1\]"),
    ("dsyrk", (1, A23, 1.0, np.ones((3, 3))), {}, ValueError, r"argument c has shape \(3, 3\)"),
    ("dsyrk", (1, A23), {"trans": 3}, ValueError, r"trans.*3"),
    ("dsyr2k", (1, A23, np.ones((2, 4))), {}, ValueError, r"same number of columns"),
    ("dsyr2k", (1, A23, np.ones((3, 3))), {"trans": 1}, ValueError, r"same number of rows"),
    ("dtrmm", (1, np.ones((3, 4)), np.ones((3, 2))), {}, ValueError, r"a\.shape=\(3, 4\)"),
    ("dtrmm", (1, np.ones((3, 2)), np.ones((3, 2))), {}, ValueError, r"a\.shape=\(3, 2\)"),
    ("dtrmm", (1, A33, np.ones((3, 2))), {"diag": 2}, ValueError, r"diag.*2"),
    ("dtrsm", (1, np.ones((4, 3)), np.ones((3, 2))), {}, ValueError, r"a\.shape=\(4, 3\)"),
    ("dtrsm", (1, A33, np.ones((2, 2))), {}, ValueError, r"a\.shape=\(3, 3\)"),
    ("ctrsm", (1, A33, np.ones((3, 2))), {"side": 1}, ValueError, r"a\.shape=\(3, 3\)"),
]


@pytest.mark.parametrize("name,args,kw,exc,match", ERRORS)
def test_errors_where_scipy_raises(name, args, kw, exc, match):
    with pytest.raises(Exception):
        getattr(S, name)(*args, **kw)
    with pytest.raises(exc, match=match):
        getattr(T, name)(*args, **kw)


# SciPy passes these to BLAS, which prints an XERBLA message and leaves c as zeros, or reads past the end
# of b; tileblas refuses them.
REFUSED = [
    ("csyrk", (1, A23), {"trans": 2}, r"trans.*\(0, 1\).*2"),
    ("zsyr2k", (1, A23, A23), {"trans": 2}, r"trans.*\(0, 1\).*2"),
    ("cherk", (1, A23), {"trans": 1}, r"trans.*\(0, 2\).*1"),
    ("zher2k", (1, A23, A23), {"trans": 1}, r"trans.*\(0, 2\).*1"),
    ("dsymm", (1, np.ones((4, 3)), np.ones((3, 2))), {}, r"a\.shape=\(4, 3\)"),
    ("dsymm", (1, np.ones((3, 4)), np.ones((2, 3))), {"side": 1}, r"a\.shape=\(3, 4\)"),
    ("dsyr2k", (1, np.ones((3, 4)), np.ones((2, 4))), {}, r"b\.shape=\(2, 4\)"),
    ("dsyr2k", (1, np.ones((3, 4)), np.ones((3, 2))), {"trans": 1}, r"b\.shape=\(3, 2\)"),
]


@pytest.mark.parametrize("name,args,kw,match", REFUSED)
def test_blas_illegal_arguments_are_refused(name, args, kw, match):
    with pytest.raises(ValueError, match=match):
        getattr(T, name)(*args, **kw)


@pytest.mark.parametrize("name", ["dgemm", "dtrmm"])
def test_failed_call_leaves_output_untouched(name):
    c = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    before = c.copy()
    with pytest.raises(ValueError):
        if name == "dgemm":
            T.dgemm(1.0, np.ones((2, 2)), np.ones((2, 3)), 1.0, c, trans_a=7, overwrite_c=1)
        else:
            T.dtrmm(1.0, np.ones((1, 1)), c, overwrite_b=1)  # a 1x1 cannot hold a triangle of order 2
    np.testing.assert_array_equal(c, before)


def test_scalar_precision_single():
    # alpha is rounded to the routine's precision, as f2py does
    ours, ref = both("sgemm", 1 / 3, np.ones((1, 1)), np.ones((1, 1)))
    assert ours[0, 0] == ref[0, 0]
