"""One rule for flags outside the drop-in (tileblas._flags): the Runtime's routine methods, the asynchronous
API and tileblas.linalg take a BLAS letter or the drop-in's integer/bool, and give the same bits for both;
anything else is a ValueError naming the argument and the value."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg as sl

import tileblas
from tileblas import _flags
from tileblas import asyncapi as aa
from tileblas import linalg

# every form of each value: letter, lower-case letter, Python int, bool (where it has one), NumPy integer
FORMS = {
    "side": {"L": ["L", "l", 0, False, np.int64(0)], "R": ["R", "r", 1, True, np.int32(1)]},
    "uplo": {"U": ["U", "u", 0, False, np.int8(0)], "L": ["L", "l", 1, True, np.bool_(True)]},
    "trans": {"N": ["N", "n", 0, False, np.uint8(0)], "T": ["T", "t", 1, True, np.int64(1)],
              "C": ["C", "c", 2, np.int64(2)]},
    "diag": {"N": ["N", "n", 0, False], "U": ["U", "u", 1, True]},
}
BAD = {"side": ["X", "left", 2, -1, 0.0, None, b"L", "LR"], "uplo": ["X", "upper", 2, 1.0, None, ""],
       "trans": ["X", 3, -1, 1.5, None, "NT"], "diag": ["X", 2, None, "unit"]}
EPS = {np.float32: np.finfo(np.float32).eps, np.float64: np.finfo(np.float64).eps,
       np.complex64: np.finfo(np.float32).eps, np.complex128: np.finfo(np.float64).eps}


def _forms(kind):
    return [(letter, v) for letter, vs in FORMS[kind].items() for v in vs]


@pytest.mark.parametrize("kind", list(FORMS))
def test_every_form_gives_its_letter(kind):
    for name in ([kind] if kind != "trans" else ["trans", "transa", "transb"]):
        for letter, v in _forms(kind):
            assert _flags.flag(v, name) == letter, (name, v)


@pytest.mark.parametrize("kind", list(FORMS))
def test_anything_else_is_a_value_error_naming_argument_and_value(kind):
    for v in BAD[kind]:
        with pytest.raises(ValueError) as e:
            _flags.flag(v, kind)
        assert f"{kind}={v!r}" in str(e.value) and f"{kind} must be one of" in str(e.value)


def test_a_letter_outside_the_calls_subset_is_refused():
    assert _flags.flag(2, "trans", ("N", "C")) == "C"
    with pytest.raises(ValueError, match=r"trans must be one of 'N' or 0 \(no transpose\), 'C' or 2 .*got trans=1"):
        _flags.flag(1, "trans", ("N", "C"))


def _tri(rng, n, dt, lower):
    a = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)) if np.dtype(dt).kind == "c" \
        else rng.standard_normal((n, n))
    a = (np.tril(a) if lower else np.triu(a)) / np.sqrt(n) + 4 * np.eye(n)
    return a.astype(dt)


def _reference_trsm(a, b, side, uplo, trans, diag):
    op = {"N": a, "T": a.T, "C": a.conj().T}[trans]
    if diag == "U":
        op = op - np.diag(np.diag(op)) + np.eye(len(op), dtype=a.dtype)
    op = np.tril(op) if (uplo == "L") == (trans == "N") else np.triu(op)
    return np.linalg.solve(op, b) if side == "L" else np.linalg.solve(op.T, b.T).T


@pytest.fixture(scope="module")
def rt():
    with tileblas.Runtime(2, tile_size=16) as r:  # tiles: the flags travel into the plan
        yield r


# one case per flag value combination of trsm, each letter tried in every form of its flags
CASES = list(itertools.product("LR", "UL", "NTC", "NU"))


@pytest.mark.parametrize("dt", [np.float64, np.complex64])
@pytest.mark.parametrize("side,uplo,trans,diag", CASES)
def test_runtime_trsm_every_form(rt, dt, side, uplo, trans, diag):
    rng = np.random.default_rng(5)
    m, n = 40, 24
    k = m if side == "L" else n
    a = _tri(rng, k, dt, uplo == "L")
    b0 = rng.standard_normal((m, n)).astype(dt)
    ref = _reference_trsm(a.astype(np.complex128), b0.astype(np.complex128), side, uplo, trans, diag)
    results = []
    forms = list(zip(*(FORMS[f][v] for f, v in (("side", side), ("uplo", uplo), ("trans", trans),
                                                  ("diag", diag)))))  # the i-th form of each flag together
    for fs in forms:
        b = b0.copy()
        rt.trsm(0.5, a, b, *fs)
        results.append(b)
        b = b0.copy()
        rt.trsm(0.5, a, b, side=fs[0], uplo=fs[1], transa=fs[2], diag=fs[3])
        results.append(b)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])  # the same call whichever form named it
    # a small multiple of k * eps * cond: a is diagonally dominant (|diag| 4, off-diagonal ~ 1/sqrt(k))
    err = np.abs(results[0] - 0.5 * ref).max() / max(np.abs(ref).max(), 1.0)
    assert err < 50 * k * EPS[dt], err


@pytest.mark.parametrize("ta,tb", list(itertools.product("NTC", "NTC")))
def test_runtime_gemm_trans_forms(rt, ta, tb):
    rng = np.random.default_rng(2)
    dt = np.complex128
    m, n, k = 33, 21, 17
    a = rng.standard_normal((m, k) if ta == "N" else (k, m)) + 1j * rng.standard_normal((m, k) if ta == "N" else (k, m))
    b = rng.standard_normal((k, n) if tb == "N" else (n, k)) + 1j * rng.standard_normal((k, n) if tb == "N" else (n, k))
    op = {"N": lambda x: x, "T": lambda x: x.T, "C": lambda x: x.conj().T}
    ref = op[ta](a) @ op[tb](b)
    outs = []
    for fa, fb in zip(FORMS["trans"][ta], FORMS["trans"][tb]):
        c = np.zeros((m, n), dt)
        rt.gemm(1.0, a, b, 0.0, c, fa, fb)
        outs.append(c)
    for c in outs[1:]:
        np.testing.assert_array_equal(c, outs[0])
    assert np.abs(outs[0] - ref).max() <= 10 * k * EPS[dt] * np.abs(a).max() * np.abs(b).max() * 2


@pytest.mark.parametrize("name", ["symm", "syrk", "herk"])
def test_runtime_other_routines_take_both_forms(rt, name):
    rng = np.random.default_rng(3)
    n = 30
    dt = np.complex128 if name == "herk" else np.float64
    a = rng.standard_normal((n, n)).astype(dt)
    b = rng.standard_normal((n, n)).astype(dt)
    outs = []
    for lower in (True, 1, "L", "l"):
        c = np.zeros((n, n), dt)
        if name == "symm":
            rt.symm(1.0, a, b, 0.0, c, side=1, uplo=lower)
            ref = b @ (np.tril(a) + np.tril(a, -1).T)
        elif name == "syrk":
            rt.syrk(1.0, a, 0.0, c, lower, 1)
            ref = np.tril(a.T @ a)
            c = np.tril(c)
        else:
            rt.herk(1.0, a, 0.0, c, uplo=lower, trans=2)
            ref = np.tril(a.conj().T @ a)
            c = np.tril(c)
        outs.append(c)
    for c in outs[1:]:
        np.testing.assert_array_equal(c, outs[0])
    assert np.abs(outs[0] - ref).max() <= 10 * n * np.finfo(np.float64).eps * np.abs(a).max() * max(np.abs(a).max(), np.abs(b).max()) * 2


@pytest.mark.parametrize("flag,value", [(f, v) for f in ("side", "uplo", "transa", "diag")
                                        for v in BAD["trans" if f == "transa" else f]])
def test_runtime_refuses_other_values_by_name(rt, flag, value):
    a = np.eye(4)
    b = np.ones((4, 3))
    with pytest.raises(ValueError, match=f"{flag} must be one of"):
        rt.trsm(1.0, a, b, **{flag: value})
    np.testing.assert_array_equal(b, 1.0)


@pytest.mark.parametrize("side,uplo,trans,diag", [("L", "L", "N", "N"), ("R", "U", "T", "U"),
                                                  ("L", "U", "C", "N"), ("R", "L", "N", "U")])
def test_linalg_trsm_and_trmm_every_form(side, uplo, trans, diag):
    rng = np.random.default_rng(7)
    m, n = 20, 12
    k = m if side == "L" else n
    a = _tri(rng, k, np.float64, uplo == "L")
    b0 = rng.standard_normal((m, n))
    ref = _reference_trsm(a, b0, side, uplo, trans, diag)
    outs = []
    for fs in zip(*(FORMS[f][v] for f, v in (("side", side), ("uplo", uplo), ("trans", trans), ("diag", diag)))):
        b = b0.copy()
        linalg.trsm(1.0, a, b, *fs)
        outs.append(b)
        b = ref.copy()
        linalg.trmm(1.0, a, b, side=fs[0], uplo=fs[1], transa=fs[2], diag=fs[3])  # back to b0
        np.testing.assert_allclose(b, b0, atol=50 * k * np.finfo(np.float64).eps * np.abs(b0).max())
    for b in outs[1:]:
        np.testing.assert_array_equal(b, outs[0])
    assert np.abs(outs[0] - ref).max() <= 50 * k * np.finfo(np.float64).eps * np.abs(ref).max()
    with pytest.raises(ValueError, match="uplo must be one of .*got uplo='X'"):
        linalg.trsm(1.0, a, b0.copy(), uplo="X")


def test_linalg_cho_factor_keeps_scipys_lower():
    # the Cholesky functions take SciPy's own ``lower`` bool, as scipy.linalg does
    rng = np.random.default_rng(1)
    x = rng.standard_normal((10, 10))
    a = x @ x.T + 10 * np.eye(10)
    c, low = linalg.cho_factor(a, lower=True)
    assert low is True
    np.testing.assert_allclose(np.tril(c), sl.cholesky(a, lower=True), atol=1e-12)


@pytest.mark.parametrize("side,uplo,trans,diag", [("L", "L", "T", "N"), ("R", "U", "C", "U")])
def test_async_trsm_and_gemm_every_form(side, uplo, trans, diag):
    rng = np.random.default_rng(9)
    m, n = 16, 10
    k = m if side == "L" else n
    a = _tri(rng, k, np.complex128, uplo == "L")
    b0 = rng.standard_normal((m, n)).astype(np.complex128)
    ref = _reference_trsm(a, b0, side, uplo, trans, diag)
    outs = []
    with aa.Executor(policy="demand") as ex:
        ha = ex.handle(a)
        for fs in zip(*(FORMS[f][v] for f, v in (("side", side), ("uplo", uplo), ("trans", trans), ("diag", diag)))):
            hb = ex.handle(b0.copy())
            aa.trsm(1.0, ha, hb, *fs).result(30)
            outs.append(hb.get())
        for t in FORMS["trans"]["C"]:
            hc = ex.empty((k, k), np.complex128)
            aa.gemm(1.0, ha, ha, 0.0, hc, transa=t).result(30)
            np.testing.assert_allclose(hc.get(), a.conj().T @ a, atol=10 * k * np.finfo(float).eps * 25)
        with pytest.raises(ValueError, match="diag must be one of .*got diag=2"):
            aa.trsm(1.0, ha, ex.handle(b0.copy()), diag=2)
    for b in outs[1:]:
        np.testing.assert_array_equal(b, outs[0])
    assert np.abs(outs[0] - ref).max() <= 50 * k * np.finfo(np.float64).eps * np.abs(ref).max()
