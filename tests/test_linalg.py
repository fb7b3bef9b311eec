"""tileblas.linalg: Cholesky solve/inverse against scipy.linalg, the public trmm/trsm, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl

from tileblas import linalg

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def tol(dtype):
    return 1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


def spd(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        g = g + 1j * rng.standard_normal((n, n))
    return (g @ g.conj().T / max(n, 1) + np.eye(n)).astype(dtype)


def rand(shape, dtype, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


SIZES = [1, 2, 3, 17, 64, 100, 130]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("n", SIZES)
def test_cho_factor_matches_scipy(dtype, lower, n):
    a = spd(n, dtype)
    c, low = linalg.cho_factor(a, lower=lower)
    cs, _ = sl.cho_factor(a, lower=lower)
    assert low is lower and c.dtype == cs.dtype
    np.testing.assert_allclose(c, cs, atol=tol(dtype) * 10, rtol=tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("nrhs", [None, 1, 5])
def test_potrs_matches_cho_solve(dtype, lower, n, nrhs):
    a = spd(n, dtype)
    cs = sl.cho_factor(a, lower=lower)
    b = rand((n,) if nrhs is None else (n, nrhs), dtype)
    x = linalg.potrs(cs, b, stop=8)
    xs = sl.cho_solve(cs, b)
    assert x.shape == b.shape and x.dtype == xs.dtype
    np.testing.assert_allclose(x, xs, atol=tol(dtype) * 100, rtol=tol(dtype) * 10)
    assert linalg.cho_solve is linalg.potrs


def test_potrs_mixed_dtypes_and_overwrite():
    a = spd(40, np.float64)
    cf = linalg.cho_factor(a)
    b = np.asfortranarray(rand((40, 3), np.float64))
    b0 = b.copy()
    x = linalg.potrs(cf, b)
    assert not np.shares_memory(x, b) and (b == b0).all()
    x2 = linalg.potrs(cf, b, overwrite_b=True)
    assert np.shares_memory(x2, b)
    np.testing.assert_allclose(x2, x)
    xi = linalg.potrs(cf, np.arange(40))  # integers -> float64
    np.testing.assert_allclose(xi, sl.cho_solve(cf, np.arange(40.0)))
    c32 = linalg.cho_factor(a.astype(np.float32))
    x3 = linalg.potrs(c32, b)  # float32 factor, float64 rhs -> float64
    assert x3.dtype == np.float64


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("n,stop", [(1, None), (2, 1), (3, 1), (17, 4), (64, 16), (100, 8), (130, None)])
def test_potri_matches_lapack(dtype, lower, n, stop):
    a = spd(n, dtype)
    cs, _ = sl.cho_factor(a, lower=lower)
    potri = sl.get_lapack_funcs("potri", (cs,))
    want, info = potri(cs, lower=lower)
    assert info == 0
    got = linalg.potri(cs, lower=lower, stop=stop)
    part = np.tril if lower else np.triu
    np.testing.assert_allclose(part(got), part(want), atol=tol(dtype) * 100, rtol=tol(dtype) * 10)
    other = np.triu if lower else np.tril
    k = 1 if lower else -1
    np.testing.assert_array_equal(other(got, k), other(cs, k))  # the other triangle is copied through


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("n", [1, 5, 64, 100])
def test_inv_spd(dtype, lower, n):
    a = spd(n, dtype)
    got = linalg.inv_spd(a, lower=lower, stop=8)
    cs, _ = sl.cho_factor(a, lower=lower)
    want, _ = sl.get_lapack_funcs("potri", (cs,))(cs, lower=lower)
    # scipy reference: potri, then fill the other triangle with the conjugate transpose
    want = np.tril(want) + np.tril(want, -1).conj().T if lower else np.triu(want) + np.triu(want, 1).conj().T
    np.testing.assert_allclose(got, want, atol=tol(dtype) * 100, rtol=tol(dtype) * 10)
    np.testing.assert_allclose(got @ a, np.eye(n), atol=tol(dtype) * 1000)
    np.testing.assert_allclose(got, got.conj().T, atol=0)


def test_inv_spd_overwrite_reuses_memory():
    a = np.asfortranarray(spd(50, np.float64))
    ref = np.linalg.inv(a)
    out = linalg.inv_spd(a.copy(order="F"))
    np.testing.assert_allclose(out, ref, atol=1e-10)
    got = linalg.inv_spd(a, overwrite_a=True)
    assert np.shares_memory(got, a)
    np.testing.assert_allclose(got, ref, atol=1e-10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_trtri(dtype, lower, unit):
    n = 45
    rng = np.random.default_rng(4)
    c = (rng.standard_normal((n, n)) * 0.1).astype(dtype)
    c[np.diag_indices(n)] += 2
    got = linalg.trtri(c, lower=lower, unit_diagonal=unit, stop=4)
    want, info = sl.get_lapack_funcs("trtri", (c,))(c, lower=lower, unitdiag=unit)
    part = np.tril if lower else np.triu
    k = 0 if not unit else (-1 if lower else 1)
    np.testing.assert_allclose(part(got, k), part(want, k), atol=tol(dtype) * 10)


# ------------------------------------------------------------------ failures leave input untouched

@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("lower", [False, True])
def test_not_positive_definite(overwrite, lower):
    a = np.asfortranarray(spd(30, np.float64))
    a[7, 7] = -50.0  # leading minor of order 8 fails
    a0 = a.copy()
    with pytest.raises(linalg.NotPositiveDefiniteError, match="order 8") as ei:
        linalg.cho_factor(a, lower=lower, overwrite_a=overwrite)
    assert ei.value.minor == 8
    assert isinstance(ei.value, np.linalg.LinAlgError)
    np.testing.assert_array_equal(a, a0)
    with pytest.raises(linalg.NotPositiveDefiniteError) as ei:
        linalg.inv_spd(a, lower=lower, overwrite_a=overwrite)
    assert ei.value.minor == 8
    np.testing.assert_array_equal(a, a0)


def test_singular_factor_and_triangle():
    c = np.asfortranarray(np.triu(spd(10, np.float64)))
    c[4, 4] = 0.0
    c0 = c.copy()
    b = np.ones((10, 2), order="F")
    for fn in (lambda: linalg.potri(c, overwrite_c=True), lambda: linalg.trtri(c, overwrite_c=True),
               lambda: linalg.potrs((c, False), b, overwrite_b=True),
               lambda: linalg.trsm(1.0, c, b)):
        with pytest.raises(linalg.SingularTriangularError, match="element 5") as ei:
            fn()
        assert ei.value.index == 5 and isinstance(ei.value, np.linalg.LinAlgError)
        np.testing.assert_array_equal(c, c0)
        np.testing.assert_array_equal(b, 1.0)


# ------------------------------------------------------------------ public trmm / trsm

@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("side,uplo,trans,diag", [("L", "U", "N", "N"), ("R", "L", "C", "U"),
                                                  ("l", "l", "t", "n")])
def test_public_trmm_trsm(kind, side, uplo, trans, diag):
    rng = np.random.default_rng(5)
    k = 50
    a = rng.standard_normal((k, k)) * 0.1 + 2 * np.eye(k)
    b = rng.standard_normal((k, 7) if side.upper() == "L" else (7, k))
    t = np.triu(a) if uplo.upper() == "U" else np.tril(a)
    if diag.upper() == "U":
        np.fill_diagonal(t, 1)
    op = t if trans.upper() == "N" else t.T
    if kind == "trmm":
        want = 2 * (op @ b if side.upper() == "L" else b @ op)
    else:
        want = np.linalg.solve(op, 2 * b) if side.upper() == "L" else np.linalg.solve(op.T, 2 * b.T).T
    out = getattr(linalg, kind)(2.0, a, b, side, uplo, trans, diag, stop=8)
    assert out is b
    np.testing.assert_allclose(b, want, atol=1e-10)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("kw,exc,msg", [
    ({"side": "X"}, ValueError, "side must be one of .*'X'"),
    ({"uplo": "up"}, ValueError, "uplo .*'up'"),
    ({"transa": "H"}, ValueError, "transa .*'H'"),
    ({"diag": 2}, ValueError, "diag .*2"),  # 0 and 1 are the drop-in's forms of 'N' and 'U'
    ({"stop": 0}, ValueError, "stop must be a positive integer; got 0"),
    ({"threads": 0}, ValueError, "threads must be a positive integer; got 0"),
])
def test_trmm_bad_flags(kw, exc, msg):
    a, b = np.eye(4), np.ones((4, 2))
    args = {"side": "L", "uplo": "U", "transa": "N", "diag": "N"}
    stop = kw.pop("stop", None)
    threads = kw.pop("threads", None)
    args.update(kw)
    with pytest.raises(exc, match=msg):
        linalg.trmm(1.0, a, b, args["side"], args["uplo"], args["transa"], args["diag"], stop=stop,
                    threads=threads)
    assert (b == 1).all()


def test_trmm_bad_shapes_and_types():
    with pytest.raises(ValueError, match=r"a must be 4 x 4 .*got a of shape \(3, 3\)"):
        linalg.trmm(1.0, np.eye(3), np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"a must be square; got shape \(4, 3\)"):
        linalg.trsm(1.0, np.ones((4, 3)), np.ones((4, 2)))
    with pytest.raises(TypeError, match="same dtype; got float32 and float64"):
        linalg.trmm(1.0, np.eye(4, dtype=np.float32), np.ones((4, 2)))
    with pytest.raises(TypeError, match="b must be a numpy.ndarray"):
        linalg.trmm(1.0, np.eye(2), [[1.0], [2.0]])
    with pytest.raises(TypeError, match="int64"):
        linalg.trmm(1.0, np.eye(2, dtype=np.int64), np.ones((2, 2), np.int64))
    with pytest.raises(TypeError, match="alpha must be real"):
        linalg.trmm(1j, np.eye(2), np.ones((2, 2)))
    b = np.ones((2, 2))
    b.flags.writeable = False
    with pytest.raises(ValueError, match="b must be writeable"):
        linalg.trmm(1.0, np.eye(2), b)
    with pytest.raises(ValueError, match="b must not contain infs or NaNs"):
        linalg.trsm(1.0, np.eye(2), np.array([[np.nan, 1.0], [1.0, 1.0]]), check_finite=True)


def test_cholesky_bad_input():
    with pytest.raises(ValueError, match=r"a must be square; got shape \(3, 2\)"):
        linalg.cho_factor(np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"a must be 2-D; got an array of shape \(3,\)"):
        linalg.cho_factor(np.ones(3))
    with pytest.raises(ValueError, match="a must not contain infs or NaNs"):
        linalg.cho_factor(np.array([[1.0, np.inf], [np.inf, 1.0]]))
    with pytest.raises(TypeError, match="numeric; got dtype <U1"):
        linalg.inv_spd(np.array([["a"]]))
    cf = linalg.cho_factor(spd(4, np.float64))
    with pytest.raises(ValueError, match=r"b must have 4 rows .*got b of shape \(3, 2\)"):
        linalg.potrs(cf, np.ones((3, 2)))
    with pytest.raises(ValueError, match="b must be 1-D or 2-D"):
        linalg.potrs(cf, np.ones((4, 2, 2)))
    with pytest.raises(TypeError, match="c_and_lower must be a"):
        linalg.potrs(cf[0], np.ones(4))
    with pytest.raises(TypeError, match="longdouble|float128"):
        linalg.cho_factor(np.eye(2, dtype=np.longdouble))
    # empty matrices work like scipy
    c, low = linalg.cho_factor(np.zeros((0, 0)))
    assert c.shape == (0, 0)
    assert linalg.inv_spd(np.zeros((0, 0))).shape == (0, 0)


def test_potrs_kernel_choice(monkeypatch, tuned):
    """recursive=True/False/None give the same solution; None follows the measured rule."""
    from tileblas.kernels import _recursive

    calls = []
    real = _recursive.recursive_trsm

    def spy(*args, **kwargs):
        calls.append(args[2].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(_recursive, "recursive_trsm", spy)
    a = spd(90, np.float64)
    cf = linalg.cho_factor(a, lower=True)
    b = rand((90, 6), np.float64)
    want = sl.cho_solve(cf, b)
    for rec in (True, False, None):
        np.testing.assert_allclose(linalg.potrs(cf, b, recursive=rec, threads=2), want, atol=1e-10)
    assert calls == [(90, 6), (90, 6)]  # only recursive=True: the default keeps OpenBLAS at this size
    tuned(recursive_min_order=64, recursive_rhs=(4, 8), recursive_left_prefixes="sdcz")
    calls.clear()
    np.testing.assert_allclose(linalg.potrs(cf, b, threads=2), want, atol=1e-10)
    np.testing.assert_allclose(linalg.potrs(cf, b, threads=1), want, atol=1e-10)  # 1 thread: OpenBLAS
    np.testing.assert_allclose(linalg.potrs(cf, b, threads=2, stop=16), want, atol=1e-10)
    assert calls == [(90, 6)] * 4
    with pytest.raises(TypeError, match="recursive must be True, False or None; got 'yes'"):
        linalg.potrs(cf, b, recursive="yes")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
def test_potri_default_stops_recurse_above_leaf(dtype, lower, monkeypatch, tuned):
    """With the default stops TRTRI recurses above Tuning.recursion_stop_trtri (small here) and LAUUM above
    Tuning.recursion_stop_lauum; the off-diagonal TRMMs take OpenBLAS's routine for square blocks."""
    tuned(recursion_stop_trtri=24, recursion_stop_lauum=40)
    a = spd(150, dtype)
    cs, _ = sl.cho_factor(a, lower=lower)
    want, info = sl.get_lapack_funcs("potri", (cs,))(cs, lower=lower)
    got = linalg.potri(cs, lower=lower)
    part = np.tril if lower else np.triu
    np.testing.assert_allclose(part(got), part(want), atol=tol(dtype) * 100, rtol=tol(dtype) * 10)


@pytest.mark.parametrize("recursive", [True, False])
@pytest.mark.parametrize("lower", [False, True])
def test_potrs_c_ordered_rhs_kept_in_order(recursive, lower):
    """A C-ordered b is solved without a transposing copy; overwrite_b solves in its memory."""
    a = spd(70, np.complex128)
    cf = linalg.cho_factor(a, lower=lower)
    b = np.ascontiguousarray(rand((70, 9), np.complex128))
    b0 = b.copy()
    want = sl.cho_solve(cf, b)
    x = linalg.potrs(cf, b, recursive=recursive, stop=8 if recursive else None)
    assert x.flags.c_contiguous and not np.shares_memory(x, b) and (b == b0).all()
    np.testing.assert_allclose(x, want, atol=1e-10)
    x2 = linalg.potrs(cf, b, overwrite_b=True, recursive=recursive)
    assert np.shares_memory(x2, b)
    np.testing.assert_allclose(b, want, atol=1e-10)
    x3 = linalg.potrs(cf, b0.astype(np.complex64), overwrite_b=True)  # other dtype: a private copy
    np.testing.assert_allclose(x3, want, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("order", ["C", "F"])
def test_cholesky_reads_one_triangle_in_either_order(dtype, lower, order):
    """C-ordered input is factored/inverted in its own layout; only the ``lower``/upper triangle is
    read (junk in the other one), as scipy.linalg does."""
    n = 45
    a = spd(n, dtype)
    junk = rand((n, n), dtype, seed=7) * 100
    mixed = np.tril(a) + np.triu(junk, 1) if lower else np.triu(a) + np.tril(junk, -1)
    m = np.array(mixed, order=order)
    c, low = linalg.cho_factor(m, lower=lower)
    cs, _ = sl.cho_factor(np.array(mixed, order=order), lower=lower)
    assert c.flags[f"{order}_CONTIGUOUS"]
    np.testing.assert_allclose(c, cs, atol=tol(dtype) * 10, rtol=tol(dtype))  # other triangle: m's
    want, _ = sl.get_lapack_funcs("potri", (cs,))(cs, lower=lower)
    part = np.tril if lower else np.triu
    for overwrite in (False, True):
        cc = c.copy(order="K")
        got = linalg.potri(cc, lower=lower, overwrite_c=overwrite)
        assert np.shares_memory(got, cc) == overwrite and got.flags[f"{order}_CONTIGUOUS"]
        np.testing.assert_allclose(part(got), part(want), atol=tol(dtype) * 100, rtol=tol(dtype) * 10)
    inv = linalg.inv_spd(m, lower=lower)
    np.testing.assert_allclose(inv @ a, np.eye(n), atol=tol(dtype) * 1000)
    bad = np.array(mixed, order=order)
    bad[3, 3] = -1.0
    with pytest.raises(linalg.NotPositiveDefiniteError) as err:
        linalg.cho_factor(bad, lower=lower)
    assert err.value.minor == 4
    keep = np.array(mixed, order=order)
    got = linalg.cho_factor(keep, lower=lower, overwrite_a=True)[0]
    assert np.shares_memory(got, keep)
    np.testing.assert_allclose(keep, cs, atol=tol(dtype) * 10, rtol=tol(dtype))
