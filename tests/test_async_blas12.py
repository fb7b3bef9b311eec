"""The Level-1/2 calls on handles added to the asynchronous API, against NumPy, in every precision BLAS has."""

from __future__ import annotations

import numpy as np
import pytest

from tileblas import asyncapi as aa
from tileblas.devices import host_devices

from _helpers import tol, rand

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
REAL = DTYPES[:2]
CPLX = DTYPES[2:]


def close(x, ref, dt):
    assert np.allclose(x, ref, rtol=tol(dt), atol=tol(dt) * 10), np.abs(np.asarray(x) - ref).max()


@pytest.fixture(scope="module", params=["inline", "queued", "demand"])
def ex(request):
    # "inline": tiny calls run in the submitting thread; "queued": every call goes through a worker thread;
    # "demand": the tile runtime's policy (Level 1/2 on its host worker threads)
    if request.param == "demand":
        e = aa.Executor(policy="demand")
    else:
        e = aa.Executor(host_devices(2), calibrate=False, inline_below=20e-6 if request.param == "inline" else 0.0)
    yield e
    e.close()


def pack(a, lower):
    """Column-major packed storage of a's lower or upper triangle."""
    n = a.shape[0]
    if lower:
        return np.concatenate([a[j:, j] for j in range(n)])
    return np.concatenate([a[:j + 1, j] for j in range(n)])


def band(a, kl, ku):
    """LAPACK band storage ((kl+ku+1) x n) of a's band."""
    m, n = a.shape
    b = np.zeros((kl + ku + 1, n), a.dtype)
    for j in range(n):
        for i in range(max(0, j - ku), min(m, j + kl + 1)):
            b[ku + i - j, j] = a[i, j]
    return b


def band_part(a, kl, ku):
    m, n = a.shape
    i, j = np.indices((m, n))
    return np.where((i - j <= kl) & (j - i <= ku), a, 0)


@pytest.mark.parametrize("dt", DTYPES)
def test_level1(ex, dt):
    rng = np.random.default_rng(10)
    n = 11
    x, y = rand(rng, n, dt), rand(rng, n, dt)
    hx, hy = ex.handle(x), ex.handle(y)
    assert aa.swap(hx, hy).result(10) == (hx, hy)
    close(hx.get(), y, dt)
    close(hy.get(), x, dt)
    r = aa.asum(hx).result(10)
    close(r, np.sum(np.abs(y.real) + np.abs(y.imag)), dt)
    assert r.dtype == (np.float32 if np.dtype(dt).itemsize in (4, 8) and dt != np.float64 else np.float64)
    assert aa.iamax(hy).result(10) == int(np.argmax(np.abs(x.real) + np.abs(x.imag)))
    c, s = 0.6, 0.8
    aa.rot(hx, hy, c, s).result(10)  # hx holds y, hy holds x
    close(hx.get(), c * y + s * x, dt)
    close(hy.get(), c * x - s * y, dt)
    # strided (borrowed) vectors are computed through a copy and written back
    big = rand(rng, 2 * n, dt)
    view = big[::2]
    hv = ex.handle(view, copy=False)
    hz = ex.handle(x)
    aa.swap(hv, hz).result(10)
    close(big[::2], x, dt)
    assert aa.iamax(ex.empty(0, dt)).result(10) == -1


@pytest.mark.parametrize("dt", REAL)
def test_rotm(ex, dt):
    rng = np.random.default_rng(11)
    n = 7
    x, y = rand(rng, n, dt), rand(rng, n, dt)
    hx, hy = ex.handle(x), ex.handle(y)
    h11, h21, h12, h22 = 1.5, -0.5, 0.25, 2.0
    aa.rotm(hx, hy, [-1.0, h11, h21, h12, h22]).result(10)  # flag -1: the full matrix H
    close(hx.get(), h11 * x + h12 * y, dt)
    close(hy.get(), h21 * x + h22 * y, dt)
    with pytest.raises(ValueError, match="param must hold 5"):
        aa.rotm(hx, hy, [1.0, 2.0])


@pytest.mark.parametrize("dt", DTYPES)
def test_matrix_vector(ex, dt):
    rng = np.random.default_rng(12)
    n = 6
    kind = np.dtype(dt).kind
    A = rand(rng, (n, n), dt)
    S = A + A.T
    H = A + A.conj().T
    x, y0 = rand(rng, n, dt), rand(rng, n, dt)
    sym = H if kind == "c" else S
    for uplo, lower in (("U", False), ("L", True)):
        tri = np.tril(sym) if lower else np.triu(sym)
        for order in ("C", "F"):
            ha = ex.handle(np.array(tri, order=order))
            hy = ex.handle(y0)
            f = (aa.hemv if kind == "c" else aa.symv)(2.0, ha, ex.handle(x), 0.5, hy, uplo=uplo)
            assert f.result(10) is hy
            close(hy.get(), 2 * sym @ x + 0.5 * y0, dt)
        # packed
        hy = ex.handle(y0)
        (aa.hpmv if kind == "c" else aa.spmv)(1.0, ex.handle(pack(sym, lower)), ex.handle(x), 0.0, hy, uplo=uplo)
        close(hy.get(), sym @ x, dt)
        if kind == "c":  # complex symmetric packed (cspmv/zspmv)
            hy = ex.handle(y0)
            aa.spmv(1.0, ex.handle(pack(S, lower)), ex.handle(x), 1.0, hy, uplo=uplo)
            close(hy.get(), S @ x + y0, dt)
        # banded symmetric / Hermitian with k = 2
        k = 2
        bsym = band_part(sym, k, k)
        stor = band(bsym, k, 0)[:, :] if lower else band(bsym, 0, k)
        hy = ex.empty(n, dt)
        (aa.hbmv if kind == "c" else aa.sbmv)(1.0, ex.handle(stor), ex.handle(x), 0.0, hy, k, uplo=uplo)
        close(hy.get(), bsym @ x, dt)
    # general banded, rectangular, every trans, including m < kl+ku+1
    for m, kl, ku in ((8, 1, 2), (2, 1, 2)):
        G = band_part(rand(rng, (m, n), dt), kl, ku)
        hb = ex.handle(band(G, kl, ku))
        for trans, op in (("N", G), ("T", G.T), ("C", G.conj().T)):
            xin = rand(rng, op.shape[1], dt)
            yin = rand(rng, op.shape[0], dt)
            hy = ex.handle(yin)
            aa.gbmv(1.5, hb, ex.handle(xin), -1.0, hy, kl, ku, trans=trans).result(10)
            close(hy.get(), 1.5 * op @ xin - yin, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_triangular_vector(ex, dt):
    rng = np.random.default_rng(13)
    n = 6
    k = 2
    T = rand(rng, (n, n), dt) + 4 * np.eye(n, dtype=dt)
    x = rand(rng, n, dt)
    for uplo in ("U", "L"):
        tri = np.triu(T) if uplo == "U" else np.tril(T)
        tb = band_part(tri, k if uplo == "L" else 0, k if uplo == "U" else 0)
        stor = band(tb, 0, k) if uplo == "U" else band(tb, k, 0)
        for trans in ("N", "T", "C"):
            for diag in ("N", "U"):
                d = tri if diag == "N" else tri - np.diag(np.diag(tri)) + np.eye(n, dtype=dt)
                db = tb if diag == "N" else tb - np.diag(np.diag(tb)) + np.eye(n, dtype=dt)
                op = {"N": d, "T": d.T, "C": d.conj().T}[trans]
                opb = {"N": db, "T": db.T, "C": db.conj().T}[trans]
                for order in ("C", "F"):
                    hx = ex.handle(x)
                    aa.trmv(ex.handle(np.array(tri, order=order)), hx, uplo=uplo, trans=trans, diag=diag)
                    close(hx.get(), op @ x, dt)
                hx = ex.handle(x)
                aa.tpmv(ex.handle(pack(tri, uplo == "L")), hx, uplo=uplo, trans=trans, diag=diag)
                close(hx.get(), op @ x, dt)
                hx = ex.handle(x)
                aa.tpsv(ex.handle(pack(tri, uplo == "L")), hx, uplo=uplo, trans=trans, diag=diag)
                close(op @ hx.get(), x, dt)
                hx = ex.handle(x)
                aa.tbmv(ex.handle(stor), hx, k, uplo=uplo, trans=trans, diag=diag)
                close(hx.get(), opb @ x, dt)
                hx = ex.handle(x)
                aa.tbsv(ex.handle(stor), hx, k, uplo=uplo, trans=trans, diag=diag)
                close(opb @ hx.get(), x, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_rank_updates(ex, dt):
    rng = np.random.default_rng(14)
    n = 5
    kind = np.dtype(dt).kind
    A0 = rand(rng, (n, n), dt)
    x, y = rand(rng, n, dt), rand(rng, n, dt)
    for uplo in ("U", "L"):
        part = np.triu if uplo == "U" else np.tril
        mask = part(np.ones((n, n), bool))
        lower = uplo == "L"

        def check(h, ref, packed=False):
            got = h.get()
            if packed:
                close(got, pack(ref, lower), dt)
            else:
                close(got[mask], ref[mask], dt)

        for order in ("C", "F"):
            h = ex.handle(np.array(A0, order=order))
            aa.syr(2.0, ex.handle(x), h, uplo=uplo).result(10)  # complex: csyr/zsyr (symmetric)
            check(h, A0 + 2 * np.outer(x, x))
        h = ex.handle(pack(A0, lower))
        aa.spr(2.0, ex.handle(x), h, uplo=uplo).result(10)
        check(h, A0 + 2 * np.outer(x, x), packed=True)
        if kind == "c":  # Hermitian updates keep a Hermitian matrix (BLAS zeroes the diagonal's imaginary part)
            Ah = A0 + A0.conj().T
            for order in ("C", "F"):
                h = ex.handle(np.array(Ah, order=order))
                aa.her(0.5, ex.handle(x), h, uplo=uplo).result(10)
                check(h, Ah + 0.5 * np.outer(x, x.conj()))
                h = ex.handle(np.array(Ah, order=order))
                al = 1.0 + 2.0j
                aa.her2(al, ex.handle(x), ex.handle(y), h, uplo=uplo).result(10)
                check(h, Ah + al * np.outer(x, y.conj()) + np.conj(al) * np.outer(y, x.conj()))
            h = ex.handle(pack(Ah, lower))
            aa.hpr(0.5, ex.handle(x), h, uplo=uplo).result(10)
            check(h, Ah + 0.5 * np.outer(x, x.conj()), packed=True)
            h = ex.handle(pack(Ah, lower))
            aa.hpr2(al, ex.handle(x), ex.handle(y), h, uplo=uplo).result(10)
            check(h, Ah + al * np.outer(x, y.conj()) + np.conj(al) * np.outer(y, x.conj()), packed=True)
        else:
            h = ex.handle(A0)
            aa.syr2(1.5, ex.handle(x), ex.handle(y), h, uplo=uplo).result(10)
            check(h, A0 + 1.5 * (np.outer(x, y) + np.outer(y, x)))
            h = ex.handle(pack(A0, lower))
            aa.spr2(1.5, ex.handle(x), ex.handle(y), h, uplo=uplo).result(10)
            check(h, A0 + 1.5 * (np.outer(x, y) + np.outer(y, x)), packed=True)
    h = ex.handle(A0[:, :3].copy())
    aa.geru(2.0, ex.handle(x), ex.handle(y[:3]), h).result(10)
    close(h.get(), A0[:, :3] + 2 * np.outer(x, y[:3]), dt)


def test_missing_precisions_and_bad_arguments(ex):
    c = ex.handle(np.eye(3, dtype=complex))
    cv = ex.handle(np.ones(3, complex))
    r = ex.handle(np.eye(3))
    rv = ex.handle(np.ones(3))
    with pytest.raises(TypeError, match="symv exists for dtype float32, float64 only; a has dtype complex128"):
        aa.symv(1.0, c, cv, 0.0, ex.empty(3, complex))
    with pytest.raises(TypeError, match="her exists for dtype complex64, complex128 only"):
        aa.her(1.0, rv, r)
    with pytest.raises(ValueError, match="alpha must be real"):
        aa.her(1j, cv, c)
    with pytest.raises(ValueError, match="x and y must be \\(3,\\)"):
        aa.symv(1.0, r, ex.handle(np.ones(4)), 0.0, rv)
    with pytest.raises(ValueError, match="uplo"):
        aa.syr(1.0, rv, r, uplo="X")
    with pytest.raises(ValueError, match="packed triangle"):
        aa.tpmv(ex.handle(np.ones(5)), rv)
    with pytest.raises(ValueError, match="k must be an int >= 0"):
        aa.tbmv(r, rv, -1)
    with pytest.raises(ValueError, match="at least k\\+1 = 4 rows"):
        aa.sbmv(1.0, r, rv, 0.0, ex.empty(3), 3)
    with pytest.raises(ValueError, match="x and y must have the same shape"):
        aa.swap(rv, ex.handle(np.ones(4)))
    with pytest.raises(TypeError, match="y has dtype"):
        aa.rot(rv, cv, 1.0, 0.0)
    with pytest.raises(ValueError, match="must not be the same handle"):
        aa.swap(rv, rv)
    with pytest.raises(ValueError, match="trans"):
        aa.gbmv(1.0, r, rv, 0.0, ex.empty(3), 1, 1, trans="Q")
    # the executor keeps working after refused calls
    aa.swap(rv, ex.handle(np.zeros(3))).result(10)
    np.testing.assert_array_equal(rv.get(), np.zeros(3))


def test_dependencies_across_level_2_calls(ex):
    """Sequential-looking Level-2 code on shared handles gives the sequential result."""
    rng = np.random.default_rng(15)
    n = 8
    S = rng.standard_normal((n, n))
    S = S + S.T
    x = rng.standard_normal(n)
    hs, hx, hy = ex.handle(np.triu(S)), ex.handle(x), ex.empty(n)
    for _ in range(5):
        aa.symv(1.0, hs, hx, 0.0, hy)           # y = S x
        aa.syr(0.01, hy, hs)                    # S += 0.01 y y^T (reads y: waits for symv)
        aa.swap(hx, hy)                         # x <-> y
    ref_s, ref_x = S.copy(), x.copy()
    for _ in range(5):
        ref_y = ref_s @ ref_x
        ref_s = ref_s + 0.01 * np.outer(ref_y, ref_y)
        ref_x, ref_y = ref_y, ref_x
    np.testing.assert_allclose(hx.get(), ref_x, rtol=1e-10)
    np.testing.assert_allclose(np.triu(hs.get()), np.triu(ref_s), rtol=1e-10)
