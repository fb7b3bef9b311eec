"""Reliability of the tile runtime: closing while calls run, workers of dropped runtimes, and planning of
degenerate shapes.  Every wait has a timeout, so a regression fails instead of hanging the suite."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from tileblas.runtime import Runtime, get_runtime, set_runtime

EPS = np.finfo(np.float64).eps
RNG = np.random.default_rng(20261124)
JOIN_S = 60.0  # a generous bound: the calls below take well under a second when nothing hangs


def gemm_bound(a, b):
    """Forward error bound of a computed a @ b in float64: 2 * k * eps * |a| @ |b| (plus a tiny floor)."""
    return 2.0 * a.shape[1] * EPS * (np.abs(a) @ np.abs(b)) + 1e-300


def assert_product(c, a, b, alpha=1.0):
    ref = alpha * (a @ b)
    assert np.all(np.abs(c - ref) <= abs(alpha) * gemm_bound(a, b)), np.abs(c - ref).max()


def follow_up_ok(rt):
    """A tiled call on ``rt`` gives the right product."""
    a = RNG.standard_normal((96, 80))
    b = RNG.standard_normal((80, 72))
    c = np.zeros((96, 72))
    rt.gemm(1.0, a, b, 0.0, c, tile_size=32)
    assert_product(c, a, b)


def call_in_thread(rt, tile=32, n=512):
    """Start ``rt.gemm`` on n x n operands in a thread; returns (thread, result dict, a, c)."""
    a = RNG.standard_normal((n, n))
    c = np.zeros((n, n))
    out: dict = {}

    def work():
        try:
            rt.gemm(1.0, a, a, 0.0, c, tile_size=tile)
            out["ok"] = True
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            out["error"] = exc

    th = threading.Thread(target=work, daemon=True)
    th.start()
    return th, out, a, c


def queued_calls(rt):
    """The calls with tasks waiting in ``rt``'s global queue or reservation stations."""
    sched = rt._sched
    queued = [e for q in list(sched._queues.values()) for e in list(q)]  # one heap per placement
    tasks = [e[1] for e in queued] + [t for st in list(sched._stations) for t in list(st)]
    return {id(t.call) for t in tasks}


def wait_running(rt, finished=lambda: False, timeout=JOIN_S):
    """Wait until a tiled call is in flight on ``rt``'s workers (so that closing now closes under it), or
    ``finished()`` says it is already over."""
    deadline = time.monotonic() + timeout
    while not queued_calls(rt) and not finished():
        assert time.monotonic() < deadline, "the call never reached the workers"
        time.sleep(0.001)


def check_outcome(out, a, c):
    """The call that was in flight when the runtime closed finished, with the right result."""
    assert "ok" in out, out.get("error")
    assert_product(c, a, a)


# ---------------------------------------------------------------------------------------------------
# Closing while calls run
# ---------------------------------------------------------------------------------------------------


def test_close_while_a_call_runs_does_not_hang():
    rt = Runtime(2)
    th, out, a, c = call_in_thread(rt)
    wait_running(rt, lambda: not th.is_alive())
    rt.close()
    th.join(JOIN_S)
    assert not th.is_alive(), "the caller is still blocked after close()"
    check_outcome(out, a, c)
    assert rt.closed
    # later calls are refused with a clear error and leave the output unchanged
    c2 = np.full((64, 64), 7.0)
    with pytest.raises(RuntimeError, match="closed"):
        rt.gemm(1.0, a[:64, :64], a[:64, :64], 0.0, c2, tile_size=32)
    assert np.all(c2 == 7.0)
    assert not [t for t in threading.enumerate() if t.name.startswith("tileblas-cpu") and t.is_alive()
                and any(t is w for w in rt._sched._threads)]
    follow_up_ok(Runtime(2))


def test_with_block_exit_while_another_thread_calls():
    box = {}
    with Runtime(2) as rt:
        th, out, a, c = call_in_thread(rt)
        box.update(th=th, out=out, a=a, c=c)
        wait_running(rt, lambda: not th.is_alive())
    box["th"].join(JOIN_S)
    assert not box["th"].is_alive(), "the caller is still blocked after the with block exited"
    check_outcome(box["out"], box["a"], box["c"])
    with Runtime(2) as fresh:
        follow_up_ok(fresh)


def test_close_twice_and_from_two_threads():
    rt = Runtime(2)
    callers = [call_in_thread(rt) for _ in range(2)]
    deadline = time.monotonic() + JOIN_S
    while len(queued_calls(rt)) < sum(th.is_alive() for th, *_ in callers) and time.monotonic() < deadline:
        time.sleep(0.001)
    closers = [threading.Thread(target=rt.close, daemon=True) for _ in range(2)]
    for t in closers:
        t.start()
    for t in closers:
        t.join(JOIN_S)
        assert not t.is_alive(), "close() from two threads at once did not return"
    for th, out, a, c in callers:
        th.join(JOIN_S)
        assert not th.is_alive()
        check_outcome(out, a, c)
    rt.close()  # again: harmless
    assert all(not t.is_alive() for t in rt._sched._threads)
    with pytest.raises(RuntimeError, match="closed"):
        follow_up_ok(rt)
    follow_up_ok(Runtime(2))


def test_async_call_survives_closing_the_runtime_it_runs_on():
    from tileblas import asyncapi as aa

    saved = set_runtime(Runtime(2, tile_size=32))
    rt = get_runtime()
    ex = aa.Executor(policy="demand")
    try:
        a = RNG.standard_normal((768, 768))
        ha = ex.handle(a)
        f = aa.gemm(1.0, ha, ha, 0.0, ex.empty((768, 768)))
        wait_running(rt, f.done)
        rt.close()
        assert_product(f.result(timeout=JOIN_S).get(), a, a)
        # the next call runs on a fresh default runtime
        g = aa.gemm(1.0, ha, ha, 0.0, ex.empty((768, 768)))
        assert_product(g.result(timeout=JOIN_S).get(), a, a)
        assert get_runtime() is not rt
    finally:
        try:
            ex.close(timeout=JOIN_S)
        finally:
            old = set_runtime(saved)
            if old is not None and old is not rt:
                old.close()


# ---------------------------------------------------------------------------------------------------
# Workers of dropped runtimes
# ---------------------------------------------------------------------------------------------------


def _wait_threads(limit, timeout=10.0):
    deadline = time.monotonic() + timeout
    while threading.active_count() > limit and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    return threading.active_count()


def test_dropped_runtimes_release_their_workers():
    a = RNG.standard_normal((256, 256))
    c = np.zeros((256, 256))
    gc.collect()
    before = threading.active_count()
    for _ in range(50):
        rt = Runtime(2)
        rt.gemm(1.0, a, a, 0.0, c, tile_size=64)
        assert rt.last_profile().path == "tiled"
        del rt
    gc.collect()
    after = _wait_threads(before + 2)
    assert after <= before + 2, f"{after - before} threads left behind by 50 dropped runtimes"
    assert_product(c, a, a)
    follow_up_ok(Runtime(2))


def test_replaced_default_runtimes_release_their_workers():
    a = RNG.standard_normal((256, 256))
    c = np.zeros((256, 256))
    saved = set_runtime(None)
    try:
        gc.collect()
        before = threading.active_count()
        for _ in range(20):
            set_runtime(Runtime(2))
            get_runtime().gemm(1.0, a, a, 0.0, c, tile_size=64)
        set_runtime(None)
        gc.collect()
        after = _wait_threads(before + 2)
        assert after <= before + 2, f"{after - before} threads left behind by 20 replaced default runtimes"
        assert_product(c, a, a)
    finally:
        set_runtime(saved)
    follow_up_ok(get_runtime())


# ---------------------------------------------------------------------------------------------------
# Degenerate shapes
# ---------------------------------------------------------------------------------------------------


def _ones(shape):
    """A read-only array of ones of any shape on one element of memory (zero strides)."""
    return as_strided(np.ones(1), shape, (0, 0), writeable=False)


def _timed(fn, limit):
    t0 = time.perf_counter()
    fn()
    took = time.perf_counter() - t0
    assert took < limit, f"took {took:.2f} s"
    return took


def test_dimension_above_the_blas_integer_fails_fast_and_clearly(lp64):
    k = 2**31
    a, b = _ones((1, k)), _ones((k, 1))
    c = np.full((1, 1), 3.0)
    rt = Runtime(2)
    try:
        t0 = time.perf_counter()
        with pytest.raises(OverflowError, match=r"k \(columns of op\(a\), rows of op\(b\)\) is 2147483648"):
            rt.gemm(1.0, a, b, 0.0, c)
        assert time.perf_counter() - t0 < 1.0
        assert c[0, 0] == 3.0
        follow_up_ok(rt)
    finally:
        rt.close()


def test_long_k_with_small_tiles_plans_a_bounded_number_of_tasks():
    k = 2**26
    a, b = _ones((1, k)), _ones((k, 1))
    c = np.zeros((1, 1))
    rt = Runtime(2)
    try:
        _timed(lambda: rt.gemm(1.0, a, b, 0.0, c, tile_size=32), 5.0)
        assert c[0, 0] == float(k)  # every partial sum is an integer below 2**53: exact
        prof = rt.last_profile()
        assert prof.path in ("tiled", "split-k")
        assert prof.tile_size >= k // 1024
        follow_up_ok(rt)
    finally:
        rt.close()


@pytest.mark.parametrize("m, n", [(1, 1), (1, 5), (5, 1), (3, 2)])
def test_skinny_long_k_matches_numpy(m, n):
    k = 2**20
    a = RNG.standard_normal((m, k))
    b = RNG.standard_normal((k, n))
    rt = Runtime(2)
    try:
        for tile in (None, 8):
            c = np.zeros((m, n))
            _timed(lambda: rt.gemm(1.0, a, b, 0.0, c, tile_size=tile), 5.0)
            assert_product(c, a, b)
        follow_up_ok(rt)
    finally:
        rt.close()


@pytest.mark.parametrize("m, n", [(2**16, 1), (1, 2**16)])
def test_long_m_or_n_with_small_tiles_matches_numpy(m, n):
    k = 3
    a = RNG.standard_normal((m, k))
    b = RNG.standard_normal((k, n))
    rt = Runtime(2)
    try:
        c = np.zeros((m, n))
        _timed(lambda: rt.gemm(1.0, a, b, 0.0, c, tile_size=1), 5.0)
        assert_product(c, a, b)
        assert rt.last_profile().tile_size >= max(m, n) // 1024
        follow_up_ok(rt)
    finally:
        rt.close()


@pytest.mark.parametrize("name, m, n, k", [("gemm", 2**26, 1, 1), ("gemm", 1, 2**26, 3), ("syrk", 2**20, 2**20, 1)])
def test_default_tile_choice_is_bounded_for_many_tiles(name, m, n, k):
    from tileblas.runtime._planner import TILE_CANDIDATES, default_tile_size

    t0 = time.perf_counter()
    tile = default_tile_size(name, m, n, k, 2)
    assert time.perf_counter() - t0 < 0.1  # a few candidates, each a handful of arithmetic
    assert tile == TILE_CANDIDATES[0]  # so many tiles balance at any size: the largest tile wins


def test_dropped_async_executors_release_their_workers():
    import tileblas.asyncapi as aa

    a = RNG.standard_normal((128, 128))
    gc.collect()
    before = threading.active_count()
    for i in range(20):
        ex = aa.Executor(inline_below=0)  # every call goes to a worker thread
        h, c = ex.handle(a), ex.empty((128, 128))
        aa.gemm(1.0, h, h, 0.0, c).result(timeout=60)
        if i == 0:
            assert_product(c.get(timeout=60), a, a)
        pending = aa.gemm(1.0, h, h, 0.0, ex.empty((128, 128)))  # dropped while possibly in flight
        del ex, h, c
    pending.result(timeout=60)  # work in flight keeps its executor until it is done
    del pending
    gc.collect()
    after = _wait_threads(before + 2)
    assert after <= before + 2, f"{after - before} threads left behind by 20 dropped executors"
