"""The recursive TRMM/TRSM kernels (tileblas.kernels._recursive) against NumPy references.

Every side/uplo/trans/diag variant x the four precisions x awkward sizes x stopping sizes that force
deep recursion, plus layouts (C order, transposed and strided views), alpha edge cases, the plan's
structure (each block of the triangle used once, the paper's split points) and the TRTRI/LAUUM steps.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tileblas.kernels import _openblas
from tileblas.kernels._recursive import (
    Gemm,
    HostBackend,
    Leaf,
    plan,
    recursive_lauum,
    recursive_trmm,
    recursive_trsm,
    recursive_trtri,
    run_panels,
    run_recursive,
    split_point,
)

from _helpers import tol, rand

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
VARIANTS = list(itertools.product("LR", "UL", "NTC", "NU"))


def tri_matrix(rng, k, dtype):
    """Well conditioned triangular operand (also with a unit diagonal): small off-diagonal entries."""
    a = rand(rng, (k, k), dtype) * (0.5 / max(k, 1))
    a[np.diag_indices(k)] += 2.0
    return a


def reference(kind, alpha, a, b, side, uplo, trans, diag):
    t = np.triu(a) if uplo == "U" else np.tril(a)
    t = t.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    if diag == "U":
        np.fill_diagonal(t, 1.0)
    op = {"N": t, "T": t.T, "C": t.conj().T}[trans]
    bb = b.astype(t.dtype)
    if kind == "trmm":
        return alpha * (op @ bb if side == "L" else bb @ op)
    if side == "L":
        return np.linalg.solve(op, alpha * bb)
    return np.linalg.solve(op.T, alpha * bb.T).T


def check(kind, alpha, a, b, side, uplo, trans, diag, **kw):
    want = reference(kind, alpha, a, b.copy(), side, uplo, trans, diag)
    fn = recursive_trmm if kind == "trmm" else recursive_trsm
    fn(alpha, a, b, side, uplo, trans, diag, **kw)
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    np.testing.assert_allclose(b, want, rtol=0, atol=tol(b.dtype) * scale * max(a.shape[0], 1) ** 0.5)


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("side,uplo,trans,diag", VARIANTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_variants_sizes_and_stops(kind, side, uplo, trans, diag, dtype):
    rng = np.random.default_rng(hash((kind, side, uplo, trans, diag, np.dtype(dtype).char)) % 2**32)
    alpha = (0.75 - 0.5j) if np.dtype(dtype).kind == "c" else -1.25
    for k, other, stop in [(1, 3, 1), (2, 1, 1), (3, 4, 1), (17, 5, 2), (64, 3, 8), (100, 7, 3),
                           (33, 6, 16), (65, 2, 64), (70, 9, None)]:
        a = tri_matrix(rng, k, dtype)
        shape = (k, other) if side == "L" else (other, k)
        b = np.asfortranarray(rand(rng, shape, dtype))
        check(kind, alpha, a, b, side, uplo, trans, diag, stop=stop)


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("stop", [1, 7, 8, 9])
@pytest.mark.parametrize("k", [7, 8, 9, 15, 16, 17, 31, 32, 33])
def test_edges_around_stop_and_powers_of_two(kind, stop, k):
    rng = np.random.default_rng(k * 100 + stop)
    for side, uplo, trans in itertools.product("LR", "UL", "NT"):
        a = tri_matrix(rng, k, np.float64)
        b = rand(rng, (k, 4) if side == "L" else (4, k), np.float64)
        check(kind, 0.5, a, b, side, uplo, trans, "N", stop=stop)


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("layout", ["C", "F", "T-view", "strided", "rows-strided", "a-C", "a-strided"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_layouts(kind, layout, dtype):
    rng = np.random.default_rng(7)
    for side, uplo, trans in itertools.product("LR", "UL", "NTC"):
        k, other = 37, 11
        a = tri_matrix(rng, k, dtype)
        shape = (k, other) if side == "L" else (other, k)
        b = rand(rng, shape, dtype)
        if layout == "C":
            b = np.ascontiguousarray(b)
        elif layout == "F":
            b = np.asfortranarray(b)
        elif layout == "T-view":
            b = np.asfortranarray(b.T).T  # C-contiguous view of an F array... a transposed view
        elif layout == "strided":
            big = np.zeros((3 * shape[0], 2 * shape[1]), dtype)
            big[::3, 1::2] = b
            view = big[::3, 1::2]
            want = reference(kind, 0.5, a, view.copy(), side, uplo, trans, "N")
            fn = recursive_trmm if kind == "trmm" else recursive_trsm
            fn(0.5, a, view, side, uplo, trans, "N", stop=5)
            np.testing.assert_allclose(view, want, atol=1e-9)
            mask = np.ones(big.shape, bool)
            mask[::3, 1::2] = False
            assert not big[mask].any()  # nothing outside the view was written
            continue
        elif layout == "rows-strided":
            big = np.asfortranarray(np.zeros((shape[0] + 5, shape[1] * 2), dtype))
            view = big[2:2 + shape[0], ::2]
            view[...] = b
            b = view
        elif layout == "a-C":
            a = np.ascontiguousarray(a)
        elif layout == "a-strided":
            big = np.zeros((2 * k, 2 * k), dtype)
            big[::2, ::2] = a
            a = big[::2, ::2]
        check(kind, 0.5, a, b, side, uplo, trans, "N", stop=5)


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
def test_alpha_zero_zeroes_b_without_reading_a(kind):
    a = np.full((20, 20), np.nan)
    b = np.ones((20, 3))
    (recursive_trmm if kind == "trmm" else recursive_trsm)(0.0, a, b, "L", "U", "N", "N", stop=4)
    assert (b == 0).all()


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
def test_empty_b(kind):
    a = np.eye(0)
    b = np.zeros((0, 5))
    (recursive_trmm if kind == "trmm" else recursive_trsm)(1.0, a, b, "L", "U", "N", "N")
    b = np.zeros((4, 0))
    (recursive_trmm if kind == "trmm" else recursive_trsm)(1.0, np.eye(4), b, "L", "U", "N", "N")


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
def test_explicit_lib_threads_and_panels(kind):
    rng = np.random.default_rng(3)
    a = tri_matrix(rng, 90, np.float64)
    for kw in ({"lib": _openblas.get_library(1)}, {"threads": 1}, {"threads": 2}):
        b = rand(rng, (90, 12), np.float64)
        check(kind, 1.5, a, b, "L", "L", "T", "N", stop=16, **kw)
    b = rand(rng, (90, 12), np.float64)
    want = reference(kind, 1.5, a, b, "L", "U", "N", "N")
    run_panels(kind, 1.5, a, b, "L", "U", "N", "N", 16, 3)
    np.testing.assert_allclose(b, want, atol=1e-10)
    b = rand(rng, (12, 90), np.float64)
    want = reference(kind, 1.5, a, b, "R", "L", "T", "U")
    run_panels(kind, 1.5, a, b, "R", "L", "T", "U", 16, 2)
    np.testing.assert_allclose(b, want, atol=1e-10)


def test_default_stop_by_width(monkeypatch):
    from tileblas.kernels import _recursive

    assert _recursive.default_stop(1) == _recursive.default_stop(255) == _recursive.DEFAULT_STOP == 256
    assert _recursive.default_stop(256) == _recursive.default_stop(10**6) == _recursive.DEFAULT_STOP_WIDE == 512
    seen = []
    real = _recursive.run_recursive
    monkeypatch.setattr(_recursive, "run_recursive", lambda *a: seen.append(a[-1]) or real(*a))
    rng = np.random.default_rng(5)
    a = tri_matrix(rng, 600, np.float64)
    for shape, side, want in (((600, 64), "L", 256), ((600, 300), "L", 512), ((300, 600), "R", 512),
                              ((64, 600), "R", 256)):
        b = rand(rng, shape, np.float64)
        check("trsm", 1.0, a, b, side, "L", "N", "N", lib=_openblas.get_library(1))
        assert seen[-1] == want, (shape, side, seen)


class _KernelLayerOnly:
    """A host backend without ``run_plan``: every operation goes through the kernel layer."""

    def __init__(self, lib):
        self._inner = HostBackend(lib)
        self.gemm, self.trmm, self.trsm = self._inner.gemm, self._inner.trmm, self._inner.trsm
        self.asfortran = self._inner.asfortran


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_direct_native_plan_matches_kernel_layer_bit_for_bit(kind, dtype):
    """HostBackend.run_plan (one native call per operation, offsets instead of views) computes exactly
    what the kernel-layer path computes, for every variant, with C- and F-ordered A and B."""
    rng = np.random.default_rng(11)
    lib = _openblas.get_library(1)
    for (side, uplo, trans, diag), a_order, b_order in itertools.product(VARIANTS, "CF", "CF"):
        k, other = 45, 7
        a = np.array(tri_matrix(rng, k, dtype), order=a_order)
        b = np.array(rand(rng, (k, other) if side == "L" else (other, k), dtype), order=b_order)
        fast, slow = b.copy(order=b_order), b.copy(order=b_order)
        run_recursive(kind, HostBackend(lib), 0.75, a, fast, side, uplo, trans, diag, 8)
        run_recursive(kind, _KernelLayerOnly(lib), 0.75, a, slow, side, uplo, trans, diag, 8)
        assert np.array_equal(fast, slow), (side, uplo, trans, diag, a_order, b_order)
        np.testing.assert_allclose(fast, reference(kind, 0.75, a, b, side, uplo, trans, diag),
                                   rtol=tol(dtype), atol=tol(dtype) * 10)


def test_direct_native_plan_declines_unusable_arrays():
    be = HostBackend(_openblas.get_library(1))
    ops = plan("trsm", 8, "L", "L", "N", 2)
    a = np.eye(8)
    reversed_cols = np.asfortranarray(a)[:, ::-1]  # negative column stride: no BLAS leading dimension
    bf = np.ones((8, 2), order="F")
    assert not be.run_plan("trsm", ops, 1.0, reversed_cols, bf, "L", "L", "N", "N")
    assert (bf == 1).all()
    b = np.ones((8, 2))  # C-ordered: not column-major
    assert not be.run_plan("trsm", ops, 1.0, a, b, "L", "L", "N", "N")
    assert (b == 1).all()  # declined before doing anything
    assert be.run_plan("trsm", ops, 2.0, np.asfortranarray(a), bf, "L", "L", "N", "N")
    np.testing.assert_array_equal(bf, 2.0)  # identity triangle: alpha * b


@pytest.mark.parametrize("n,n1", [(2, 1), (3, 2), (4, 2), (5, 4), (8, 4), (9, 8), (100, 64), (128, 64),
                                  (129, 128), (4096, 2048), (3000, 2048)])
def test_split_point(n, n1):
    assert split_point(n) == n1


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("side,uplo,trans", list(itertools.product("LR", "UL", "NT")))
@pytest.mark.parametrize("n,stop", [(1, 1), (10, 1), (100, 8), (257, 32), (64, 64)])
def test_plan_uses_each_block_of_the_triangle_once(kind, side, uplo, trans, n, stop):
    ops = plan(kind, n, side, uplo, trans, stop)
    seen = np.zeros((n, n), int)
    for op in ops:
        if isinstance(op, Leaf):
            assert 0 < op.hi - op.lo <= stop
            seen[op.lo:op.hi, op.lo:op.hi] += 1
        else:
            assert isinstance(op, Gemm)
            seen[op.r0:op.r1, op.c0:op.c1] += 1
    tri = np.triu(np.ones((n, n), int)) if uplo == "U" else np.tril(np.ones((n, n), int))
    # the leaves' squares also cover the (zero) other triangle inside each diagonal block
    leaf_sq = np.zeros((n, n), int)
    for op in ops:
        if isinstance(op, Leaf):
            leaf_sq[op.lo:op.hi, op.lo:op.hi] = 1
    assert ((seen == 1) | ((seen == 0) & (tri == 0))).all()
    assert (seen[tri == 1] == 1).all()
    assert (seen[(tri == 0) & (leaf_sq == 0)] == 0).all()


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["trmm", "trsm"]), side=st.sampled_from("LR"), uplo=st.sampled_from("UL"),
       trans=st.sampled_from("NTC"), diag=st.sampled_from("NU"), k=st.integers(1, 70),
       other=st.integers(1, 9), stop=st.integers(1, 40), dt=st.sampled_from(DTYPES),
       order=st.sampled_from("CF"))
def test_property_against_numpy(kind, side, uplo, trans, diag, k, other, stop, dt, order):
    rng = np.random.default_rng(k * 1000 + other * 10 + stop)
    a = tri_matrix(rng, k, dt)
    b = np.array(rand(rng, (k, other) if side == "L" else (other, k), dt), order=order)
    check(kind, 2.0, a, b, side, uplo, trans, diag, stop=stop)


@pytest.mark.parametrize("uplo", "UL")
@pytest.mark.parametrize("diag", "NU")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,stop", [(1, 1), (5, 1), (37, 4), (64, 16), (100, 7)])
def test_trtri(uplo, diag, dtype, n, stop):
    rng = np.random.default_rng(n)
    a = np.asfortranarray(tri_matrix(rng, n, dtype))
    other = a.copy()
    w = a.copy(order="F")
    recursive_trtri(w, uplo, diag, stop=stop)
    t = (np.triu if uplo == "U" else np.tril)(a).astype(np.complex128)
    if diag == "U":
        np.fill_diagonal(t, 1)
    want = np.linalg.inv(t)
    part = np.triu if uplo == "U" else np.tril
    got = part(w).astype(np.complex128)
    if diag == "U":
        np.fill_diagonal(got, 1)
    np.testing.assert_allclose(got, want, atol=tol(dtype) * 10)
    strict = np.tril if uplo == "U" else np.triu
    np.testing.assert_array_equal(strict(w, -1 if uplo == "U" else 1), strict(other, -1 if uplo == "U" else 1))


@pytest.mark.parametrize("uplo", "UL")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,stop", [(1, 1), (6, 1), (37, 4), (64, 16), (100, 7)])
def test_lauum(uplo, dtype, n, stop):
    rng = np.random.default_rng(n + 1)
    a = np.asfortranarray(tri_matrix(rng, n, dtype))
    a[np.diag_indices(n)] = a.diagonal().real  # LAPACK's ?lauum reads a real diagonal (Cholesky factors)
    w = a.copy(order="F")
    recursive_lauum(w, uplo, stop=stop)
    t = (np.triu if uplo == "U" else np.tril)(a).astype(np.complex128)
    want = t @ t.conj().T if uplo == "U" else t.conj().T @ t
    part = np.triu if uplo == "U" else np.tril
    np.testing.assert_allclose(part(w), part(want), atol=tol(dtype) * 30)


# ------------------------------------------------------------------ against SciPy's own BLAS routines

@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_scipy_blas_every_variant(kind, dtype):
    """Same result as scipy.linalg.blas ?trmm/?trsm for every side/uplo/trans/diag, around the stop size."""
    import scipy.linalg.blas as sb

    prefix = {np.float32: "s", np.float64: "d", np.complex64: "c", np.complex128: "z"}[dtype]
    fn = getattr(sb, prefix + kind)
    ours = recursive_trmm if kind == "trmm" else recursive_trsm
    rng = np.random.default_rng(11)
    alpha = (0.5 + 0.25j) if np.dtype(dtype).kind == "c" else 0.5
    for (side, uplo, trans, diag), (k, other, stop) in itertools.product(
            VARIANTS, [(15, 3, 8), (16, 5, 8), (17, 2, 8), (33, 4, 16)]):
        a = np.asfortranarray(tri_matrix(rng, k, dtype))
        b = np.asfortranarray(rand(rng, (k, other) if side == "L" else (other, k), dtype))
        want = fn(alpha, a, b.copy(order="F"), side=int(side == "R"), lower=int(uplo == "L"),
                  trans_a="NTC".index(trans), diag=int(diag == "U"))
        ours(alpha, a, b, side, uplo, trans, diag, stop=stop)
        np.testing.assert_allclose(b, want, rtol=0, atol=tol(dtype) * 10 * max(1.0, np.abs(want).max()))


# ------------------------------------------------------------------ the host CPU device's tile kernels


def _spy(monkeypatch, cpu, kind):
    """Record the triangle shape of every recursive call made through the CPU device module."""
    calls = []
    real = getattr(cpu._recursive, "recursive_" + kind)

    def spy(*args, **kwargs):
        calls.append(args[1].shape)
        real(*args, **kwargs)

    monkeypatch.setattr(cpu._recursive, "recursive_" + kind, spy)
    return calls

@pytest.mark.parametrize("kind", ["trmm", "trsm"])
def test_cpu_device_kernel_uses_recursion_above_threshold(kind, monkeypatch, tuned):
    from tileblas.devices import cpu

    calls = _spy(monkeypatch, cpu, kind)
    tuned(recursive_min_order=40, recursive_rhs=(4, 8), recursive_left_prefixes="sdcz")
    rng = np.random.default_rng(5)
    for threads in (2, 1):
        run = cpu.CPUDevice(0, threads).kernel(kind)
        for k, rhs in ((39, 6), (40, 6), (90, 4), (90, 8), (90, 3), (90, 9)):
            a = np.asfortranarray(tri_matrix(rng, k, np.float64))
            b = np.asfortranarray(rand(rng, (rhs, k), np.float64))
            want = reference(kind, 1.5, a, b, "R", "L", "T", "U")
            run(1.5, a, b, side="R", uplo="L", transa="T", diag="U")
            np.testing.assert_allclose(b, want, atol=1e-10)
    # 2 threads: only order >= 40 with 4..8 right-hand sides; 1 thread: never (OpenBLAS's own routine)
    assert calls == [(40, 40), (90, 90), (90, 90)]


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
def test_tile_runtime_with_recursive_tile_kernels(kind, monkeypatch, tuned):
    """A tiled call whose diagonal tiles are above the threshold gives the same result."""
    from tileblas.devices import cpu
    from tileblas.runtime import Runtime

    calls = _spy(monkeypatch, cpu, kind)
    tuned(recursive_min_order=16, recursive_min_threads=1, recursive_rhs=(1, 64), recursive_left_prefixes="sdcz")
    rng = np.random.default_rng(6)
    a = np.asfortranarray(tri_matrix(rng, 100, np.float64))
    b = np.asfortranarray(rand(rng, (100, 30), np.float64))
    want = reference(kind, 0.5, a, b, "L", "U", "N", "N")
    with Runtime(devices=2) as rt:
        getattr(rt, kind)(0.5, a, b, "L", "U", "N", "N", tile_size=48)
        assert rt.last_profile().path == "tiled"
    np.testing.assert_allclose(b, want, atol=1e-10)
    assert sorted(calls) == [(48, 48), (48, 48)]  # the two full diagonal tiles; the 4 x 4 one ran natively
