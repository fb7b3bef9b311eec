"""Every asynchronous BLAS call on handles against NumPy, over the four precisions, on both policies."""

from __future__ import annotations

import numpy as np
import pytest

from tileblas import asyncapi as aa
from tileblas.devices import host_devices

from _helpers import tol, rand

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture(scope="module", params=["cost", "cost-queued", "demand"])
def ex(request):
    if request.param == "demand":
        e = aa.Executor(policy="demand")
    else:  # "cost-queued": no call runs inline, every one goes through a worker
        e = aa.Executor(host_devices(2), inline_below=20e-6 if request.param == "cost" else 0.0)
    yield e
    e.close()


def close(x, ref, dt):
    assert np.allclose(x, ref, rtol=tol(dt), atol=tol(dt) * 10), np.abs(x - ref).max()


@pytest.mark.parametrize("dt", DTYPES)
def test_level3(ex, dt):
    rng = np.random.default_rng(1)
    m, n, k = 7, 5, 6
    A, B, C = rand(rng, (m, k), dt), rand(rng, (k, n), dt), rand(rng, (m, n), dt)
    ha, hb, hc = ex.handle(A), ex.handle(B), ex.handle(C)
    f = aa.gemm(2.0, ha, hb, 0.5, hc)
    assert f.result(10) is hc
    close(hc.get(), 2 * A @ B + 0.5 * C, dt)
    # transposed operands (C order input, conjugate transpose)
    hat = ex.handle(np.ascontiguousarray(A.T))
    out = ex.empty((m, n), dt)
    aa.gemm(1.0, hat, hb, 0.0, out, transa="T")
    close(out.get(), A @ B, dt)
    out2 = ex.empty((n, m), dt)
    aa.gemm(1.0, hb, hat, 0.0, out2, transa="C", transb="N")
    close(out2.get(), B.conj().T @ A.T, dt)
    out3 = ex.empty((m, n), dt)
    aa.gemm(1.0, hat, ex.handle(np.ascontiguousarray(B.T)), 0.0, out3, transa="C", transb="C")
    close(out3.get(), np.conj(A) @ np.conj(B), dt)
    # symm / hemm (side L and R)
    S = rand(rng, (m, m), dt)
    S = S + S.T
    H = S + S.conj().T if np.dtype(dt).kind == "c" else S
    hs, hh = ex.handle(np.triu(S)), ex.handle(np.triu(H))
    hbb = ex.handle(C)
    out = ex.empty((m, n), dt)
    aa.symm(1.5, hs, hbb, 0.0, out, side="L", uplo="U")
    close(out.get(), 1.5 * S @ C, dt)
    aa.hemm(1.0, hh, hbb, 0.0, out, side="L", uplo="U")
    close(out.get(), H @ C, dt)
    sr = rand(rng, (n, n), dt)
    sr = sr + sr.T
    aa.symm(1.0, ex.handle(np.tril(sr)), hbb, 0.0, out, side="R", uplo="L")
    close(out.get(), C @ sr, dt)
    # syrk / herk / syr2k / her2k on the upper triangle
    c0 = rand(rng, (m, m), dt)
    hc0 = ex.handle(c0)
    aa.syrk(1.0, ha, 0.5, hc0, uplo="U")
    ref = c0.copy()
    iu = np.triu_indices(m)
    ref[iu] = (A @ A.T + 0.5 * c0)[iu]
    close(hc0.get(), ref, dt)
    hc1 = ex.handle(c0)
    aa.syr2k(1.0, ha, ex.handle(A * 2), 0.0, hc1, uplo="L", trans="N")
    il = np.tril_indices(m)
    ref = c0.copy()
    ref[il] = (A @ (2 * A).T + (2 * A) @ A.T)[il]
    close(hc1.get(), ref, dt)
    if np.dtype(dt).kind == "c":
        hc2 = ex.handle(c0)
        aa.herk(1.0, ha, 0.0, hc2, uplo="U")
        ref = c0.copy()
        ref[iu] = (A @ A.conj().T)[iu]
        close(hc2.get(), ref, dt)
        hc3 = ex.handle(c0)
        aa.her2k(1.0, ha, ex.handle(A * 2), 0.0, hc3, uplo="U")
        ref = c0.copy()
        ref[iu] = (A @ (2 * A).conj().T + (2 * A) @ A.conj().T)[iu]
        close(hc3.get(), ref, dt)
    # trmm / trsm
    T = np.triu(rand(rng, (m, m), dt)) + 4 * np.eye(m, dtype=dt)
    ht = ex.handle(T)
    hb2 = ex.handle(C)
    aa.trmm(1.0, ht, hb2, side="L", uplo="U")
    close(hb2.get(), T @ C, dt)
    aa.trsm(1.0, ht, hb2, side="L", uplo="U")
    close(hb2.get(), C, dt)
    hb3 = ex.handle(C)
    Tn = np.triu(rand(rng, (n, n), dt)) + 4 * np.eye(n, dtype=dt)
    aa.trsm(2.0, ex.handle(Tn), hb3, side="R", uplo="U", transa="T")
    close(hb3.get(), 2 * C @ np.linalg.inv(Tn.T), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_level1_and_2(ex, dt):
    rng = np.random.default_rng(2)
    n, m = 9, 6
    x, y = rand(rng, n, dt), rand(rng, n, dt)
    hx, hy = ex.handle(x), ex.handle(y)
    aa.axpy(2.0, hx, hy)
    close(hy.get(), 2 * x + y, dt)
    aa.scal(3.0, hy)
    close(hy.get(), 3 * (2 * x + y), dt)
    hz = ex.empty(n, dt)
    aa.copy(hx, hz)
    close(hz.get(), x, dt)
    close(aa.dot(hx, hz).result(10), np.sum(x * x), dt)
    close(aa.dotc(hx, hy).result(10), np.vdot(x, 3 * (2 * x + y)), dt)
    assert abs(aa.nrm2(hx).result(10) - np.linalg.norm(x)) < tol(dt) * 10 * np.linalg.norm(x)
    # Level 2
    A = rand(rng, (m, n), dt)
    for order in ("C", "F"):
        ha = ex.handle(np.array(A, order=order))
        hyy = ex.handle(rand(rng, m, dt))
        y0 = hyy.get()
        aa.gemv(1.5, ha, hx, 0.5, hyy)
        close(hyy.get(), 1.5 * A @ x + 0.5 * y0, dt)
        hw = ex.empty(n, dt)
        aa.gemv(1.0, ha, ex.handle(y0), 0.0, hw, trans="C")
        close(hw.get(), A.conj().T @ y0, dt)
        hA = ex.handle(np.array(A, order=order))
        u, v = rand(rng, m, dt), rand(rng, n, dt)
        aa.ger(2.0, ex.handle(u), ex.handle(v), hA)
        close(hA.get(), A + 2 * np.outer(u, v), dt)
        hA2 = ex.handle(np.array(A, order=order))
        aa.gerc(1.0, ex.handle(u), ex.handle(v), hA2)
        close(hA2.get(), A + np.outer(u, v.conj()), dt)
        T = np.array(np.tril(rand(rng, (n, n), dt)) + 4 * np.eye(n, dtype=dt), order=order)
        for trans in ("N", "T", "C"):
            hb = ex.handle(x)
            aa.trsv(ex.handle(T), hb, uplo="L", trans=trans)
            opT = {"N": T, "T": T.T, "C": T.conj().T}[trans]
            close(opT @ hb.get(), x, dt)
    # matrices element-wise through Level 1, strided vectors
    M1, M2 = rand(rng, (4, 3), dt), rand(rng, (4, 3), dt)
    h1, h2 = ex.handle(M1), ex.handle(np.asfortranarray(M2))
    aa.axpy(-1.0, h1, h2)
    close(h2.get(), M2 - M1, dt)
    big = rand(rng, 2 * n, dt)
    hs = ex.handle(big[::2], copy=False)
    close(aa.dot(hs, hx).result(10), np.sum(big[::2] * x), dt)


def test_bad_arguments_name_the_argument(ex):
    a = ex.handle(np.zeros((3, 4)))
    b = ex.handle(np.zeros((5, 2)))
    c = ex.empty((3, 2))
    with pytest.raises(ValueError, match="op\\(a\\) is 3x4"):
        aa.gemm(1.0, a, b, 0.0, c)
    with pytest.raises(ValueError, match="transa"):
        aa.gemm(1.0, a, b, 0.0, c, transa="X")
    with pytest.raises(TypeError, match="b has dtype float32"):
        aa.gemm(1.0, a, ex.handle(np.zeros((4, 2), np.float32)), 0.0, c)
    with pytest.raises(TypeError, match="a must be a MatrixHandle"):
        aa.gemm(1.0, np.zeros((3, 4)), b, 0.0, c)
    with pytest.raises(ValueError, match="c must not be the same handle as a"):
        sq = ex.handle(np.zeros((3, 3)))
        aa.gemm(1.0, sq, sq, 0.0, sq)
    with pytest.raises(TypeError, match="alpha must be a number"):
        aa.scal("2", a)
    with pytest.raises(ValueError, match="beta must be real"):
        aa.herk(1.0, ex.handle(np.zeros((2, 2), complex)), 1j, ex.handle(np.zeros((2, 2), complex)))
    with pytest.raises(TypeError, match="dtype"):
        ex.handle(np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        ex.handle(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="policy"):
        aa.Executor(policy="fastest")


def test_an_output_borrowing_memory_an_input_borrows_is_refused():
    """Two handles made with copy=False on overlapping views: the call would read what it writes (axpy gave
    y[5] = 23 for 19, silently); refused like the same handle twice."""
    from tileblas import asyncapi as aa

    with aa.Executor(calibrate=False) as ex:
        v = np.arange(10.0)
        hx, hy = ex.handle(v[:6], copy=False), ex.handle(v[4:], copy=False)
        with pytest.raises(ValueError, match="borrow arrays that share memory"):
            aa.axpy(2.0, hx, hy)
        with pytest.raises(ValueError, match="borrow arrays that share memory"):
            aa.swap(hx, hy)
        a = np.asfortranarray(np.random.default_rng(0).random((8, 8)))
        ha, hc = ex.handle(a, copy=False), ex.handle(a[:, :4], copy=False)
        with pytest.raises(ValueError, match="borrow arrays that share memory"):
            aa.gemm(1.0, ha, ex.handle(a[:, :4]), 0.0, hc)
        assert np.array_equal(v, np.arange(10.0))  # nothing ran
        # separate memory, or a copy, is fine
        hz = ex.handle(np.arange(6.0), copy=False)
        aa.axpy(2.0, hx, hz).result()
        assert np.array_equal(hz.get(), np.arange(6.0) + 2 * v[:6])


def test_a_borrowed_output_with_an_owned_input_runs():
    from tileblas import asyncapi as aa

    with aa.Executor(calibrate=False) as ex:
        a = np.random.default_rng(1).random((6, 6))
        c = np.zeros((6, 6))
        aa.syrk(1.0, ex.handle(a), 0.0, ex.handle(c, copy=False)).result()
        assert np.allclose(np.triu(c), np.triu(a @ a.T))
        c2 = np.zeros((6, 6))
        aa.syrk(1.0, ex.handle(a, copy=False), 0.0, ex.handle(c2, copy=False)).result()
        assert np.allclose(np.triu(c2), np.triu(a @ a.T))
