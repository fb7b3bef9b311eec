"""Errors that say what is wrong: each names the argument, the object or the limit involved."""
from __future__ import annotations

import time

import numpy as np
import pytest

import tileblas
import tileblas.asyncapi as aa
import tileblas.blas as tb
from tileblas.devices import DeviceError
from tileblas.devices.sim import SimDevice

BIG = 2**31


def _zero_stride(shape):
    return np.lib.stride_tricks.as_strided(np.ones(1), shape, (0,) * len(shape))


@pytest.mark.parametrize("call,names", [
    (lambda: tb.dgemv(1.0, _zero_stride((1, BIG)), np.ones(1), trans=1), ["a", "2147483648"]),
    (lambda: tb.dgemm(1.0, _zero_stride((1, BIG)), _zero_stride((BIG, 1))), ["k", "2147483648"]),
    (lambda: tb.daxpy(np.ones(3), np.ones(3), incx=2**32), ["incx", "4294967296"]),
    (lambda: tb.ddot(np.ones(3), np.ones(3), incy=-(2**32)), ["incy"]),
    (lambda: tb.dscal(2.0, np.ones(3), incx=BIG), ["incx"]),
    (lambda: tb.dnrm2(np.ones(3), n=BIG), ["n", "2147483648"]),
    (lambda: tb.dsyrk(1.0, _zero_stride((2, BIG))), ["k", "2147483648"]),
])
def test_32_bit_overflow_names_the_argument(call, names, lp64):
    t = time.perf_counter()
    with pytest.raises(OverflowError) as info:
        call()
    msg = str(info.value)
    assert "2147483647" in msg and all(n in msg for n in names), msg
    assert time.perf_counter() - t < 5  # refused before any copy of the 2^31 elements


def test_handle_get_timeout_says_what_is_still_running():
    a = np.random.default_rng(0).random((1200, 1200))
    h, c = aa.handle(a), aa.handle(np.zeros((1200, 1200)))
    aa.gemm(1.0, h, h, 0.0, c)
    with pytest.raises(TimeoutError) as info:
        c.get(timeout=1e-4)
    msg = str(info.value)
    assert "timeout=0.0001" in msg and "keep running" in msg, msg
    np.testing.assert_allclose(c.get(timeout=120), a @ a, rtol=0, atol=64 * 1200 * np.finfo(float).eps * 1200)
    fut = aa.gemm(1.0, h, h, 0.0, c)
    with pytest.raises(TimeoutError, match="did not finish within timeout"):
        fut.result(timeout=1e-4)
    fut.result(timeout=120)


def test_device_memory_below_one_tile_says_tile_size():
    a = np.random.default_rng(1).random((256, 256))
    with tileblas.Runtime(devices=[SimDevice(0, memory=100_000)], tile_size=128) as rt:
        t = time.perf_counter()
        with pytest.raises(DeviceError, match="one tile .131072 bytes. is larger than its whole memory") as info:
            rt.gemm(1.0, a, a, 0.0, np.zeros((256, 256), order="F"))
        assert "tile_size" in str(info.value) and "fewer streams" not in str(info.value)
        assert time.perf_counter() - t < 1.0  # at once, not after waiting for memory
        c = np.zeros((32, 32), order="F")
        rt.gemm(1.0, a[:32, :32], a[:32, :32], 0.0, c, tile_size=32)  # the runtime still works
        np.testing.assert_allclose(c, a[:32, :32] @ a[:32, :32], rtol=0, atol=64 * 32 * np.finfo(float).eps * 32)


def test_closed_dask_client_is_named():
    distributed = pytest.importorskip("distributed")
    cl = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
    client = distributed.Client(cl, set_as_default=False)
    rt = tileblas.Runtime(devices=client, tile_size=64, worker_wait_s=2.0)
    try:
        a = np.random.default_rng(2).random((128, 128))
        c = np.zeros((128, 128), order="F")
        rt.gemm(1.0, a, a, 0.0, c)
        client.close()
        t = time.perf_counter()
        with pytest.raises(RuntimeError, match="Dask client .* is closed") as info:
            rt.gemm(1.0, a, a, 0.0, c)
        assert "no Dask worker" not in str(info.value)
        assert time.perf_counter() - t < 2.0
    finally:
        rt.shutdown()
        cl.close()
