"""rblas with Level-3 calls on the tile runtime, and with device (non-NumPy) arrays."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import tileblas
import tileblas.blas as tb
import tileblas.rblas as rb
from tileblas.rblas import _registry


@pytest.fixture(autouse=True)
def _clean():
    rb.discard()
    yield
    rb.discard()


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def _problem(n=160, seed=0):
    rng = np.random.default_rng(seed)
    a = np.asfortranarray(1000 + 1000 * rng.random((n, n)))
    b = np.asfortranarray(1000 + 1000 * rng.random((n, n)))
    c = np.asfortranarray(1000 + 1000 * rng.random((n, n)))
    t = np.asfortranarray(np.eye(n) * 2 + np.triu(rng.random((n, n))) * 0.01)
    return a, b, c, t


@pytest.mark.parametrize("mode", rb.MODES)
def test_tape_of_level3_calls_on_the_tile_runtime(mode):
    a, b, c, t = _problem()
    x = np.ones(160)
    y = np.arange(160.0)
    c0, y0 = c.copy(), y.copy()
    with tileblas.Runtime(devices=2, tile_size=48) as rt:
        with rb.Tape(mode=mode) as outer:
            rb.fdgemm(1.5, a, b, 0.75, c, overwrite_c=1)
            assert rt.last_profile().path in ("tiled", "split-k") and rt.last_profile().tasks > 1
            with rb.Tape() as inner:
                rb.fdsyrk(1e-3, a, 0.5, c, overwrite_c=1)
                rb.fdaxpy(x, y, a=2.0)
                rb.fdtrmm(0.5, t, c, overwrite_b=1)
                assert rt.last_profile().path == "tiled"
            assert len(inner) == 3 and len(outer) == 4
        assert outer.undo() == 4
    if mode in ("checkpoint", "exact"):
        assert np.array_equal(_bits(c), _bits(c0)) and np.array_equal(_bits(y), _bits(y0))
    else:
        # |alpha*A@B| / |beta*C| ~ 5e5 on this data: inverse computation keeps ~1e-16 * 5e5 * n relative
        np.testing.assert_allclose(c, c0, rtol=1e-7)
        np.testing.assert_allclose(y, y0, rtol=1e-14)
    assert rb.pending() == []


def test_exact_level3_refuses_a_differently_configured_runtime():
    a, b, c, _ = _problem(seed=1)
    c0 = c.copy()
    with tileblas.Runtime(devices=2, tile_size=48):
        rb.fdgemm(1.5, a, b, 0.75, c, overwrite_c=1, mode="exact")
        assert rb.last_decision().mode == "exact"
    after = c.copy()
    with pytest.raises(rb.ArgumentMismatchError, match="tile runtime"):
        rb.rdgemm(1.5, a, b, 0.75, c, overwrite_c=1)  # default runtime: other tiles, other bits
    assert np.array_equal(_bits(c), _bits(after)) and len(rb.pending()) == 1  # nothing touched
    with tileblas.Runtime(devices=2, tile_size=48):
        rb.rdgemm(1.5, a, b, 0.75, c, overwrite_c=1)
    assert np.array_equal(_bits(c), _bits(c0))


# ------------------------------------------------------------------------------- device arrays
class DevArray:
    """A stand-in device array: not a NumPy array, CuPy-like surface (.get(), .data.ptr, flags)."""

    def __init__(self, a):
        self._a = a

    dtype = property(lambda self: self._a.dtype)
    shape = property(lambda self: self._a.shape)
    strides = property(lambda self: self._a.strides)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    flags = property(lambda self: self._a.flags)
    data = property(lambda self: types.SimpleNamespace(ptr=self._a.__array_interface__["data"][0]))

    def copy(self):
        return DevArray(self._a.copy(order="K"))

    def get(self):
        return self._a.copy()

    def diagonal(self):
        return DevArray(self._a.diagonal())

    def __getitem__(self, idx):
        idx = tuple(i._a if isinstance(i, DevArray) else i for i in idx) if isinstance(idx, tuple) else idx
        return DevArray(np.asarray(self._a[idx]))

    def __setitem__(self, idx, v):
        self._a[idx] = v._a if isinstance(v, DevArray) else v

    def __array__(self, *a, **k):  # what a CuPy array refuses; the engine must not need it
        raise TypeError("implicit conversion of a device array to NumPy")


DevArray.__module__ = "fakedev"


class DeviceBlas:
    """A tileblas.blas for DevArrays: unwraps, computes on the host, hands the same device arrays back."""

    def __getattr__(self, name):
        fn = getattr(tb, name)

        def call(*args, **kw):
            wrapped = {id(v._a): v for v in (*args, *kw.values()) if isinstance(v, DevArray)}
            un = lambda v: v._a if isinstance(v, DevArray) else v  # noqa: E731
            ret = fn(*map(un, args), **{k: un(v) for k, v in kw.items()})
            rets = ret if isinstance(ret, tuple) else (ret,)
            out = tuple(wrapped.get(id(r), DevArray(r) if isinstance(r, np.ndarray) else r) for r in rets)
            return out if isinstance(ret, tuple) else out[0]

        return call


@pytest.fixture
def dev(monkeypatch):
    mod = types.ModuleType("fakedev")
    mod.asarray = lambda v: DevArray(np.asarray(v))
    monkeypatch.setitem(sys.modules, "fakedev", mod)
    monkeypatch.setattr(_registry, "_blas_namespace", lambda: DeviceBlas())
    return DevArray


@pytest.mark.parametrize("mode", rb.MODES)
def test_device_arrays_round_trip(dev, mode):
    rng = np.random.default_rng(2)
    x = dev(1000 + 1000 * rng.random(300))
    y = dev(1000 + 1000 * rng.random(300))
    a = dev(np.asfortranarray(rng.random((300, 300))))
    t = dev(np.asfortranarray(np.eye(300) * 2 + np.triu(rng.random((300, 300))) * 0.01))
    c = dev(np.asfortranarray(rng.random((300, 300))))
    y0, c0 = y.get(), c.get()
    with rb.Tape(mode=mode) as tape:
        assert rb.fdaxpy(x, y, a=1.5) is y
        rb.fdgemv(2.0, a, x, 0.5, y, overwrite_y=1)
        rb.fdtrmv(t, y, overwrite_x=1)
        rb.fdgemm(1.0, a, a, 0.5, c, overwrite_c=1)
    ds = tape.decisions
    assert all(d.mode != "none" for d in ds)
    if mode == "exact":  # residual encoding works on host arrays only: checkpoint, and say so
        assert all(d.mode == "checkpoint" and "host" in d.reason for d in ds)
    if mode == "compute":
        assert all(d.mode == "compute" and d.extra_bytes == 0 for d in ds)
    tape.undo()
    if mode in ("checkpoint", "exact"):
        assert np.array_equal(y.get(), y0) and np.array_equal(c.get(), c0)
    else:
        # Error bounds of the inverse computations, elementwise (n = 300, eps of float64): undoing
        # y <- 2 A x + 0.5 y solves y = (y2 - 2 A x) / 0.5, whose rounding error is bounded by a small
        # multiple of n eps (2 |A||x| + 0.5 |y|) / 0.5, on top of the trmv and axpy inverses (triangle
        # with diagonal 2: well conditioned); likewise C = (C2 - A A) / 0.5.
        n, eps = 300, np.finfo(np.float64).eps
        ah, xh = np.abs(a.get()), np.abs(x.get())
        ybound = 8 * n * eps * (2 * ah @ xh + 0.5 * np.abs(y0) + 1.5 * xh) / 0.5
        cbound = 8 * n * eps * (ah @ ah + 0.5 * np.abs(c0)) / 0.5
        assert np.all(np.abs(y.get() - y0) <= ybound)
        assert np.all(np.abs(c.get() - c0) <= cbound)


def test_device_arrays_misuse_and_auto(dev):
    rng = np.random.default_rng(3)
    x, y = dev(rng.random(100)), dev(rng.random(100))
    rb.fdaxpy(x, y, a=2.0, mode="compute")
    x[0] = 7.0
    with pytest.raises(rb.ModifiedError, match="'x'"):
        rb.rdaxpy(x, y, a=2.0)
    rb.discard()
    sing = dev(np.asfortranarray(np.triu(rng.random((50, 50)) + np.eye(50))))
    sing[(3, 3)] = 0.0
    v = dev(rng.random(50))
    v0 = v.get()
    rb.fdtrmv(sing, v, overwrite_x=1, mode="auto")
    assert rb.last_decision().mode == "checkpoint" and "singular" in rb.last_decision().reason
    rb.rdtrmv(sing, v, overwrite_x=1)
    assert np.array_equal(v.get(), v0)
    with pytest.raises(rb.AlreadyReversedError):
        rb.rdtrmv(sing, v, overwrite_x=1)
    with pytest.raises(rb.NotForwardedError):
        rb.rdaxpy(v, v)
