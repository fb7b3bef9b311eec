"""The kernel layer: correctness over layouts and flags, GIL release, private library instances."""

import threading

import numpy as np
import pytest

from tileblas.kernels import _openblas as K

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 1e-4, np.float64: 1e-12, np.complex64: 1e-4, np.complex128: 1e-12}


def rand(rng, shape, dtype, order="C"):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x, dtype=dtype, order=order)


def op(x, t):
    return {"N": x, "T": x.T, "C": x.conj().T}[t]


def layout(x, kind):
    if kind == "C":
        return np.ascontiguousarray(x)
    if kind == "F":
        return np.asfortranarray(x)
    big = np.zeros((x.shape[0] + 3, x.shape[1] + 2), dtype=x.dtype, order="F")
    big[1:-2, 2:] = x
    return big[1:-2, 2:]  # strided view with a leading dimension


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", ["C", "F", "S"])
@pytest.mark.parametrize("ta", ["N", "T", "C"])
@pytest.mark.parametrize("tb", ["N", "T", "C"])
def test_gemm_layouts(dtype, lay, ta, tb):
    rng = np.random.default_rng(1)
    a = layout(rand(rng, (6, 5) if ta == "N" else (5, 6), dtype), lay)
    b = layout(rand(rng, (5, 4) if tb == "N" else (4, 5), dtype), "F" if lay == "C" else "C")
    c = layout(rand(rng, (6, 4), dtype), lay)
    ref = 1.5 * op(a, ta) @ op(b, tb) + 0.5 * c
    a0, b0 = a.copy(), b.copy()
    K.gemm(1.5, a, b, 0.5, c, ta, tb)
    np.testing.assert_allclose(c, ref, rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", ["C", "F", "S"])
@pytest.mark.parametrize("side", ["L", "R"])
@pytest.mark.parametrize("uplo", ["U", "L"])
@pytest.mark.parametrize("trans", ["N", "T", "C"])
@pytest.mark.parametrize("name", ["trmm", "trsm"])
def test_triangular_layouts(dtype, lay, side, uplo, trans, name):
    rng = np.random.default_rng(2)
    m, n = 5, 4
    k = m if side == "L" else n
    a = rand(rng, (k, k), dtype) + 4 * np.eye(k, dtype=dtype)
    tri = np.triu(a) if uplo == "U" else np.tril(a)
    b = layout(rand(rng, (m, n), dtype), lay)
    a = layout(a, "F" if lay == "C" else "C")
    opa = op(tri, trans)
    if name == "trmm":
        ref = 2.0 * (opa @ b if side == "L" else b @ opa)
    else:
        ref = 2.0 * (np.linalg.solve(opa, b) if side == "L" else np.linalg.solve(opa.T, b.T).T)
    getattr(K, name)(2.0, a, b, side, uplo, trans, "N")
    np.testing.assert_allclose(b, ref, rtol=10 * TOL[dtype], atol=10 * TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", ["C", "F"])
@pytest.mark.parametrize("uplo", ["U", "L"])
@pytest.mark.parametrize("trans", ["N", "T", "C"])
@pytest.mark.parametrize("name", ["syrk", "herk", "syr2k", "her2k"])
def test_rank_k_layouts(dtype, lay, uplo, trans, name):
    cplx = np.issubdtype(dtype, np.complexfloating)
    if cplx and ((name.startswith("sy") and trans == "C") or (name.startswith("he") and trans == "T")):
        pytest.skip("flag not defined for this routine")
    rng = np.random.default_rng(3)
    n, k = 5, 3
    a = layout(rand(rng, (n, k) if trans == "N" else (k, n), dtype), lay)
    b = layout(rand(rng, (n, k) if trans == "N" else (k, n), dtype), lay)
    c0 = rand(rng, (n, n), dtype)
    herm = name.startswith("he") and cplx
    if herm:
        c0 = c0 + c0.conj().T
    c = layout(c0, lay)
    tr = "C" if herm else "T"
    alpha = (1.5 + 0.5j) if (cplx and name.endswith("2k")) else 1.5
    oa, ob = op(a, trans), op(b, trans)
    if name.endswith("2k"):
        ref = alpha * oa @ op(ob, tr) + (np.conj(alpha) if herm else alpha) * ob @ op(oa, tr) + 0.5 * c0
        getattr(K, name)(alpha, a, b, 0.5, c, uplo, trans)
    else:
        ref = alpha * oa @ op(oa, tr) + 0.5 * c0
        getattr(K, name)(alpha, a, 0.5, c, uplo, trans)
    mask = np.triu(np.ones((n, n), bool)) if uplo == "U" else np.tril(np.ones((n, n), bool))
    np.testing.assert_allclose(c[mask], ref[mask], rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    np.testing.assert_array_equal(c[~mask], c0[~mask])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lay", ["C", "F"])
@pytest.mark.parametrize("side", ["L", "R"])
@pytest.mark.parametrize("uplo", ["U", "L"])
@pytest.mark.parametrize("name", ["symm", "hemm"])
def test_symm_layouts(dtype, lay, side, uplo, name):
    rng = np.random.default_rng(4)
    m, n = 5, 4
    k = m if side == "L" else n
    a = rand(rng, (k, k), dtype)
    tri = np.triu(a) if uplo == "U" else np.tril(a)
    herm = name == "hemm" and np.issubdtype(dtype, np.complexfloating)
    full = tri + (tri.conj().T if herm else tri.T) - np.diag(np.diag(tri if not herm else tri.real))
    a = layout(a, lay)
    b = layout(rand(rng, (m, n), dtype), lay)
    c = layout(rand(rng, (m, n), dtype), lay)
    ref = 2.0 * (full @ b if side == "L" else b @ full) + 0.5 * c
    getattr(K, name)(2.0, a, b, 0.5, c, side, uplo)
    np.testing.assert_allclose(c, ref, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)


def test_concurrent_calls_on_shared_instance():
    """Threads calling the shared 1-thread instance at once all get correct results."""
    n = 300
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n))
    cs = [np.zeros((n, n)) for _ in range(4)]
    ts = [threading.Thread(target=K.gemm, args=(1.0, a, a, 0.0, c)) for c in cs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ref = a @ a
    for c in cs:
        np.testing.assert_allclose(c, ref, rtol=1e-12, atol=1e-10)


def test_private_library_instances():
    l1 = K.get_library(1)
    l2 = K.get_library(2)
    assert l1 is K.get_library(1)
    assert l1.num_threads() == 1
    assert l2.num_threads() == 2
    assert l1.path != l2.path
    with pytest.raises(ValueError, match="threads"):
        K.get_library(0)


@pytest.mark.parametrize("uplo", [None, "U", "L"])
@pytest.mark.parametrize("shape", [(5, 5), (5, 3), (3, 5)])
@pytest.mark.parametrize("alpha", [1.0, -0.5])
def test_split_k_axpy_updates_only_its_triangle(uplo, shape, alpha):
    """The split-k reduction every host-memory device uses: y += alpha*x on the uplo triangle of the
    (possibly rectangular) tile, diagonal included; the other entries are left as they were."""
    from tileblas.kernels._openblas import split_k_axpy

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(shape), rng.standard_normal(shape)
    want = y.copy()
    ones = np.ones(shape, bool)
    keep = ones if uplo is None else (np.triu(ones) if uplo == "U" else np.tril(ones))
    want[keep] += alpha * x[keep]
    split_k_axpy(alpha, x, y, uplo)
    np.testing.assert_array_equal(y, want)
