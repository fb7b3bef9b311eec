"""A handle's tiles stay cached on devices with their own memory across calls, under both policies; they move
again only when the data changed (a write outside the device, mark_changed after a direct host write), and
leave the devices when the handle is deleted."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from tileblas import asyncapi as aa
from tileblas.devices import SimDevice
from tileblas.runtime import Runtime, set_runtime


def h2d(devs):
    return sum(d.stats.snapshot()["bytes_h2d"] for d in devs)


@pytest.fixture()
def demand_on_sim():
    """A demand-policy executor whose tile runtime has two simulated discrete devices (16 x 16 tiles)."""
    devs = [SimDevice(0, memory=1 << 20), SimDevice(1, memory=1 << 20)]
    rt = Runtime(devs, tile_size=16)
    prev = set_runtime(rt)
    ex = aa.Executor(policy="demand")
    try:
        yield ex, rt, devs
    finally:
        ex.close()
        set_runtime(prev)
        rt.shutdown()


def cached_tiles(rt):
    return sum(s["cached_tiles"] for s in rt.stats()["memory"].values())


def test_demand_policy_keeps_handle_tiles_between_calls(demand_on_sim):
    ex, rt, devs = demand_on_sim
    rng = np.random.default_rng(5)
    n = 48  # 3 x 3 tiles
    A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    a, b = ex.handle(A), ex.handle(B)
    outs = [ex.empty((n, n)) for _ in range(3)]
    for o in outs:
        aa.gemm(1.0, a, b, 0.0, o).result(30)
    # each input tile moved to each device at most once over three calls; outputs are never moved in
    moved = h2d(devs)
    assert moved <= 2 * (a.nbytes + b.nbytes)
    for o in outs:
        np.testing.assert_allclose(o.get(30), A @ B, rtol=1e-10, atol=1e-10)
    aa.gemm(1.0, a, b, 0.0, outs[0]).result(30)
    assert h2d(devs) == moved  # a fourth call moved nothing: every input tile was still cached

    # the same arrays called without handles (not kept) move again on every call: the baseline
    C = np.zeros((n, n), order="F")
    Af, Bf = np.asfortranarray(A), np.asfortranarray(B)
    rt.gemm(1.0, Af, Bf, 0.0, C)
    m1 = h2d(devs)
    rt.gemm(1.0, Af, Bf, 0.0, C)
    assert h2d(devs) - m1 >= Af.nbytes + Bf.nbytes - 1
    np.testing.assert_allclose(C, A @ B, rtol=1e-10, atol=1e-10)

    # a write through a Level-1 call (on the host) invalidates b's tiles: only b moves again
    aa.scal(2.0, b).result(30)
    m2 = h2d(devs)
    aa.gemm(1.0, a, b, 0.0, outs[1]).result(30)
    assert 0 < h2d(devs) - m2 <= 2 * b.nbytes
    m3 = h2d(devs)
    aa.gemm(1.0, a, b, 0.0, outs[1]).result(30)
    assert h2d(devs) == m3
    np.testing.assert_allclose(outs[1].get(30), 2 * A @ B, rtol=1e-10, atol=1e-10)

    # a result written through the runtime is read back correctly, and reading it later moves its tiles
    aa.gemm(1.0, outs[1], a, 0.0, outs[2]).result(30)
    np.testing.assert_allclose(outs[2].get(30), 2 * A @ B @ A, rtol=1e-9, atol=1e-9)

    # a borrowed buffer written directly and announced with mark_changed moves again, once
    arr = np.asfortranarray(B)
    hb = ex.handle(arr, copy=False)
    aa.gemm(1.0, a, hb, 0.0, outs[0]).result(30)
    m4 = h2d(devs)
    aa.gemm(1.0, a, hb, 0.0, outs[0]).result(30)
    assert h2d(devs) == m4
    arr[...] = 1.0
    hb.mark_changed()
    aa.gemm(1.0, a, hb, 0.0, outs[0]).result(30)
    assert 0 < h2d(devs) - m4 <= 2 * hb.nbytes
    np.testing.assert_allclose(outs[0].get(30), A @ np.ones((n, n)), rtol=1e-10, atol=1e-10)

    # deleting handles drops their tiles from the devices (their memory may be reused by other arrays)
    before = cached_tiles(rt)
    assert before > 0
    for h in (a, b, hb, *outs):
        h.delete().result(30)
    assert cached_tiles(rt) == 0


def test_handle_lost_to_garbage_collection_drops_its_tiles(demand_on_sim):
    ex, rt, devs = demand_on_sim
    n = 32
    a, b, c = ex.handle(np.ones((n, n))), ex.handle(np.ones((n, n))), ex.empty((n, n))
    aa.gemm(1.0, a, b, 0.0, c).result(30)
    assert cached_tiles(rt) > 0
    del a, b, c
    gc.collect()
    assert cached_tiles(rt) == 0


def test_cost_policy_device_copy_reused_until_changed():
    """The "cost" policy: a handle's whole copy on a discrete device is reused by later calls on it."""
    sim = SimDevice(0, memory=1 << 20)
    rng = np.random.default_rng(6)
    n = 32
    A = rng.standard_normal((n, n))
    with aa.Executor([sim], calibrate=False) as ex:
        a, b = ex.handle(A), ex.handle(A)
        outs = [ex.empty((n, n)) for _ in range(4)]
        for o in outs:
            aa.gemm(1.0, a, b, 0.0, o)
        for o in outs:
            o.wait(30)
        assert h2d([sim]) == a.nbytes + b.nbytes
        b._host[...] = 0.5  # a direct write to the host buffer, then announced
        b.mark_changed()
        aa.gemm(1.0, a, b, 0.0, outs[0]).result(30)
        assert h2d([sim]) == a.nbytes + 2 * b.nbytes
        np.testing.assert_allclose(outs[0].get(30), A @ np.full((n, n), 0.5), rtol=1e-10)
