"""GPU recursive TRMM/TRSM (tileblas.kernels._gpu_recursive).

The asynchronous pipeline's schedule is device-free and is checked on the CPU by simulating the device
with NumPy copies.  Everything that needs CuPy and a GPU is marked ``gpu`` and skipped cleanly otherwise.
"""

from __future__ import annotations

import gc
import itertools

import numpy as np
import pytest

from tileblas.kernels._gpu_recursive import async_schedule
from tileblas.kernels._recursive import HostBackend, Leaf, plan

VARIANTS = list(itertools.product("LR", "UL", "NTC", "NU"))


def tri_matrix(rng, k, dtype=np.float64):
    a = rng.standard_normal((k, k)) * (0.5 / k)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((k, k)) * (0.5 / k)
    a[np.diag_indices(k)] += 2.0
    return a.astype(dtype)


def reference(kind, alpha, a, b, side, uplo, trans, diag):
    t = np.triu(a) if uplo == "U" else np.tril(a)
    if diag == "U":
        np.fill_diagonal(t, 1.0)
    op = {"N": t, "T": t.T, "C": t.conj().T}[trans]
    if kind == "trmm":
        return alpha * (op @ b if side == "L" else b @ op)
    return np.linalg.solve(op, alpha * b) if side == "L" else np.linalg.solve(op.T, alpha * b.T).T


def simulate(kind, alpha, a, b, uplo, trans, diag, stop):
    """Run async_schedule's steps for a side-'R' problem with NumPy standing in for the device."""
    m, n = b.shape
    ops = plan(kind, n, "R", uplo, trans, stop)
    steps = async_schedule(ops, n)
    dev_b = np.full((m, n), np.nan, order="F", dtype=b.dtype)
    dev_a, present, gotten = {}, set(), set()
    out = np.full_like(b, np.nan)
    be = HostBackend()
    coefs = {"alpha": alpha, "one": 1.0, "minus_one": -1.0}
    for s in steps:
        if s.what == "put_a":
            r0, r1, c0, c1 = s.key
            assert ("a", s.key) not in present
            dev_a[s.key] = np.asfortranarray(a[r0:r1, c0:c1])
            present.add(("a", s.key))
        elif s.what == "put_b":
            lo, hi = s.key
            assert ("b", s.key) not in present
            dev_b[:, lo:hi] = b[:, lo:hi]
            present.add(("b", s.key))
        elif s.what == "op":
            for need in s.needs:
                assert need in present
            op = s.op
            if isinstance(op, Leaf):
                assert not any(g[0] < op.hi and op.lo < g[1] for g in gotten)
                fn = be.trmm if kind == "trmm" else be.trsm
                fn(coefs[op.coef], dev_a[(op.lo, op.hi, op.lo, op.hi)], dev_b[:, op.lo:op.hi], "R", uplo, trans,
                   diag)
            else:
                d0, d1 = op.dst
                assert not any(g[0] < d1 and d0 < g[1] for g in gotten)  # no write after the chunk left
                be.gemm(coefs[op.ca], dev_b[:, op.src[0]:op.src[1]], dev_a[(op.r0, op.r1, op.c0, op.c1)],
                        coefs[op.cb], dev_b[:, d0:d1], "N", trans)
        else:
            lo, hi = s.key
            out[:, lo:hi] = dev_b[:, lo:hi]
            gotten.add(s.key)
    return out, steps


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("uplo,trans,diag", [v[1:] for v in VARIANTS if v[0] == "R"])
@pytest.mark.parametrize("n,stop", [(1, 1), (7, 2), (64, 8), (100, 16)])
def test_async_schedule_simulated(kind, uplo, trans, diag, n, stop):
    rng = np.random.default_rng(n + stop)
    dtype = np.complex128 if trans == "C" else np.float64
    a = tri_matrix(rng, n, dtype)
    b = rng.standard_normal((5, n)).astype(dtype)
    out, steps = simulate(kind, 0.5, a, b, uplo, trans, diag, stop)
    np.testing.assert_allclose(out, reference(kind, 0.5, a, b, "R", uplo, trans, diag), atol=1e-10)
    # every A block goes over exactly once, and the transfers are interleaved with the compute
    puts = [s for s in steps if s.what == "put_a"]
    assert len(puts) == len({s.key for s in puts})
    if n > stop:
        first_op = next(i for i, s in enumerate(steps) if s.what == "op")
        assert any(s.what.startswith("put") for s in steps[first_op:])


# ------------------------------------------------------------------------------- needs a GPU

@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("side,uplo,trans,diag", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_gpu_recursive_variants(cp, kind, side, uplo, trans, diag, dtype):
    from tileblas.kernels._gpu_recursive import gpu_recursive

    rng = np.random.default_rng(1)
    tol = 2e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9
    for k, other, stop in [(1, 3, 1), (17, 5, 4), (100, 7, 16), (130, 4, None)]:
        a = tri_matrix(rng, k, dtype)
        b = rng.standard_normal((k, other) if side == "L" else (other, k)).astype(dtype)
        want = reference(kind, 1.5, a, b, side, uplo, trans, diag)
        for order in "FC":
            b_d = cp.array(b, order=order)
            gpu_recursive(kind, 1.5, cp.asarray(a), b_d, side, uplo, trans, diag, stop=stop)
            np.testing.assert_allclose(cp.asnumpy(b_d), want, atol=tol * max(1, np.abs(want).max()))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["trmm", "trsm"])
def test_gpu_strided_views_and_native(cp, kind):
    from tileblas.kernels._gpu_recursive import cublas_native, gpu_recursive

    rng = np.random.default_rng(2)
    a = tri_matrix(rng, 70)
    b = rng.standard_normal((70, 9))
    want = reference(kind, 2.0, a, b, "L", "L", "T", "N")
    big = cp.zeros((140, 18))
    view = big[::2, 1::2]  # 70 x 9, both strides 2
    view[...] = cp.asarray(b)
    gpu_recursive(kind, 2.0, cp.asarray(a), view, "L", "L", "T", "N", stop=8)
    np.testing.assert_allclose(cp.asnumpy(view), want, atol=1e-9)
    assert float(cp.abs(big[:, ::2]).max()) == 0.0
    b_d = cp.asarray(b, order="F")
    cublas_native(kind, 2.0, cp.asarray(a), b_d, "L", "L", "T", "N")
    np.testing.assert_allclose(cp.asnumpy(b_d), want, atol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("side,uplo,trans", [("L", "U", "N"), ("L", "L", "T"), ("R", "U", "T"), ("R", "L", "N")])
def test_host_async_and_sync(cp, kind, side, uplo, trans):
    from tileblas.kernels._gpu_recursive import host_async, host_sync

    rng = np.random.default_rng(3)
    a = tri_matrix(rng, 300)
    b = rng.standard_normal((300, 40) if side == "L" else (40, 300))
    want = reference(kind, 0.5, a, b, side, uplo, trans, "N")
    for fn, kw in ((host_async, {"stop": 32}), (host_sync, {"recursive": True}), (host_sync, {"recursive": False})):
        bb = np.asfortranarray(b.copy())
        fn(kind, 0.5, a, bb, side, uplo, trans, "N", **kw)
        np.testing.assert_allclose(bb, want, atol=1e-9)
    bc = np.ascontiguousarray(b.copy())
    host_async(kind, 0.5, a, bc, side, uplo, trans, "N", stop=64)
    np.testing.assert_allclose(bc, want, atol=1e-9)


# ------------------------------------------------------------------------------- without a GPU:
# the CuPy backend against a stand-in "cupy" whose cuBLAS is OpenBLAS behind the same column-major,
# pointer-based API.  This checks the flag algebra, leading dimensions, pointers of views, the in-place
# C = B trmm call and the asynchronous pipeline's copies, not CUDA itself (the gpu-marked tests do).


@pytest.fixture()
def stand_in(monkeypatch):
    """The strict CuPy stand-in of tests/_cupy_standin.py (one device), with a fresh pinned staging cache."""
    from _cupy_standin import install

    from tileblas.kernels import _gpu_recursive

    sim = install(monkeypatch, devices=1)
    monkeypatch.setattr(_gpu_recursive, "_PINNED", _gpu_recursive._Pinned())
    return sim


@pytest.fixture()
def fake_cp(stand_in):
    return stand_in.cp


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
@pytest.mark.parametrize("side,uplo,trans,diag", VARIANTS)
def test_cupy_backend_with_stand_in_cublas(fake_cp, kind, side, uplo, trans, diag):
    from tileblas.kernels._gpu_recursive import cublas_native, gpu_recursive, host_async, host_sync

    rng = np.random.default_rng(11)
    for dtype in (np.float64, np.complex64):
        tol = 2e-4 if dtype == np.complex64 else 1e-10
        for k, other, stop in [(1, 2, 1), (37, 5, 4), (64, 3, 16)]:
            a = tri_matrix(rng, k, dtype)
            b = rng.standard_normal((k, other) if side == "L" else (other, k)).astype(dtype)
            want = reference(kind, 1.5, a, b, side, uplo, trans, diag)
            for order in "FC":
                for a_d in (fake_cp.asarray(a, order="F"), fake_cp.asarray(a, order="C")):
                    b_d = fake_cp.asarray(b, order=order)
                    gpu_recursive(kind, 1.5, a_d, b_d, side, uplo, trans, diag, stop=stop)
                    np.testing.assert_allclose(np.asarray(b_d), want, atol=tol)
            big = fake_cp.zeros((2 * b.shape[0], 2 * b.shape[1]), dtype=dtype)
            view = big[::2, 1::2]
            view[...] = b
            gpu_recursive(kind, 1.5, fake_cp.asarray(a), view, side, uplo, trans, diag, stop=stop)
            np.testing.assert_allclose(np.asarray(view), want, atol=tol)
            assert not np.asarray(big)[:, ::2].any()
            b_d = fake_cp.asarray(b, order="F")
            cublas_native(kind, 1.5, fake_cp.asarray(a), b_d, side, uplo, trans, diag)
            np.testing.assert_allclose(np.asarray(b_d), want, atol=tol)
            for order in "FC":
                bh = np.array(b, order=order)
                host_async(kind, 1.5, a, bh, side, uplo, trans, diag, stop=stop)
                np.testing.assert_allclose(bh, want, atol=tol)
            bh = np.array(b, order="F")
            host_sync(kind, 1.5, a, bh, side, uplo, trans, diag, recursive=True, stop=stop)
            np.testing.assert_allclose(bh, want, atol=tol)


def test_cupys_handle_left_on_a_destroyed_stream(fake_cp):
    """CuPy binds its cuBLAS handle to the current stream at each of its calls and leaves it there; when
    that stream is destroyed (a closed device's, an earlier host_async's), the recursion still runs and
    leaves the handle on the default stream (the first GPU run failed here with cudaErrorContextIsDestroyed)."""
    from tileblas.kernels._gpu_recursive import gpu_recursive

    rng = np.random.default_rng(3)
    a = tri_matrix(rng, 40)
    b = rng.standard_normal((40, 3))
    want = reference("trsm", 1.0, a, b, "L", "L", "N", "N")
    from cupy_backends.cuda.libs import cublas as cb

    h = fake_cp.cuda.device.get_cublas_handle()
    st = fake_cp.cuda.Stream(non_blocking=True)
    with st:
        cb.setStream(h, fake_cp.cuda.get_current_stream().ptr)  # what CuPy's own calls do (its _setStream)
    gone = cb.getStream(h)
    assert gone == st.ptr
    del st
    gc.collect()
    with pytest.raises(Exception, match="destroyed"):
        cb.setStream(h, gone)  # what restoring the handle's stream did
    b_d = fake_cp.asarray(b, order="F")
    gpu_recursive("trsm", 1.0, fake_cp.asarray(a), b_d, "L", "L", "N", "N", stop=8)
    np.testing.assert_allclose(np.asarray(b_d), want, atol=1e-10)
    assert cb.getStream(h) == 0  # the legacy default stream, never destroyed


def test_host_async_packs_and_unpacks_on_the_pool(stand_in, monkeypatch):
    """host_async's packing of A's blocks and B's chunks, and the unpacking of B's chunks, run on the pack
    pool, in the order the copies need them, each unpacking after its copy back has landed (the stand-in
    refuses a host read of staging that a copy may still write)."""
    from tileblas.kernels import _cuda
    from tileblas.kernels._gpu_recursive import async_schedule, host_async, plan

    pool = _cuda.pack_pool(3)
    submitted = []

    class Spy:
        def submit(self, fn, *args, **kw):
            submitted.append(getattr(fn, "__name__", repr(fn)))
            return pool.submit(fn, *args, **kw)

    monkeypatch.setattr(_cuda, "pack_pool", lambda threads: Spy())
    rng = np.random.default_rng(5)
    n, rhs, stop = 64, 5, 8
    a = tri_matrix(rng, n, np.float64)
    b = rng.standard_normal((n, rhs))
    want = reference("trsm", 1.5, a, b, "L", "L", "N", "N")
    bh = np.array(b, order="F")
    host_async("trsm", 1.5, a, bh, "L", "L", "N", "N", stop=stop, pack_threads=3)
    np.testing.assert_allclose(bh, want, atol=1e-10)
    steps = async_schedule(plan("trsm", n, "R", "U", "N", stop), n)
    puts = sum(s.what in ("put_a", "put_b") for s in steps)
    gets = sum(s.what == "get_b" for s in steps)
    assert submitted == ["copyto"] * puts + ["_unpack_after"] * gets
