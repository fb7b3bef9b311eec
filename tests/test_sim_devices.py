"""The runtime on simulated discrete devices: every Level-3 routine with each device capped at a quarter
of the data (out-of-core), both memory policies, peers (L2), coherence at call boundaries, mixed host and
simulated devices, failures, accounting in profiles and traces."""

from __future__ import annotations

import numpy as np
import pytest

from tileblas.devices import CPUDevice, DeviceError, SimDevice, create_device, sim_devices
from tileblas.runtime import Runtime, make_devices
from tileblas.runtime._locality import CacheLocality
from tileblas.runtime._tilememory import TaskMemory, TileMemory
from tileblas.runtime._planner import Tile

RNG = np.random.default_rng(7)
N = 192
TS = 32


def rnd(shape, dt, order="F"):
    x = RNG.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    x = x.astype(dt)
    return np.asfortranarray(x) if order == "F" else np.ascontiguousarray(x)


def tol(dt):
    return 5e-4 if np.dtype(dt) in (np.float32, np.complex64) else 1e-10


def op(x, t):
    return x if t == "N" else (x.T if t == "T" else x.conj().T)


def full(a, uplo, herm):
    t = np.triu(a) if uplo == "U" else np.tril(a)
    o = t - np.diag(np.diag(t))
    d = np.diag(np.diag(a).real) if herm else np.diag(np.diag(a))
    return o + (o.conj().T if herm else o.T) + d


def tri(a, uplo, diag):
    t = np.triu(a) if uplo == "U" else np.tril(a)
    if diag == "U":
        t = t - np.diag(np.diag(t)) + np.eye(a.shape[0], dtype=a.dtype)
    return t


def close(x, ref, dt):
    return np.abs(x - ref).max() <= tol(dt) * max(1.0, np.abs(ref).max())


# (routine, flags, dtype)
CASES = [
    ("gemm", dict(transa="N", transb="N"), np.float64),
    ("gemm", dict(transa="T", transb="C"), np.complex128),
    ("gemm", dict(transa="N", transb="T"), np.float32),
    ("symm", dict(side="L", uplo="U"), np.float64),
    ("symm", dict(side="R", uplo="L"), np.float64),
    ("hemm", dict(side="L", uplo="L"), np.complex128),
    ("syrk", dict(uplo="U", trans="N"), np.float64),
    ("syrk", dict(uplo="L", trans="T"), np.float64),
    ("herk", dict(uplo="U", trans="C"), np.complex128),
    ("syr2k", dict(uplo="L", trans="N"), np.float64),
    ("her2k", dict(uplo="U", trans="N"), np.complex128),
    ("trmm", dict(side="L", uplo="U", transa="N", diag="N"), np.float64),
    ("trmm", dict(side="R", uplo="L", transa="T", diag="U"), np.float64),
    ("trsm", dict(side="L", uplo="L", transa="N", diag="N"), np.float64),
    ("trsm", dict(side="R", uplo="U", transa="T", diag="N"), np.float64),
    ("trsm", dict(side="L", uplo="U", transa="C", diag="U"), np.complex128),
]


def run_case(rt, name, flags, dt, n=N, tile=TS):
    """Run one call on rt and check it against NumPy; returns the bytes the call's data occupies."""
    cplx = np.dtype(dt).kind == "c"
    alpha = (0.7 - 0.2j) if cplx else 0.7
    beta = (0.3 + 0.1j) if cplx else 0.3
    if name == "gemm":
        a = rnd((n, n), dt, "C" if flags["transa"] != "N" else "F")
        b, c = rnd((n, n), dt), rnd((n, n), dt)
        ref = alpha * op(a, flags["transa"]) @ op(b, flags["transb"]) + beta * c
        rt.gemm(alpha, a, b, beta, c, tile_size=tile, **flags)
        return close(c, ref, dt), (a, b, c)
    if name in ("symm", "hemm"):
        a, b, c = rnd((n, n), dt), rnd((n, n), dt), rnd((n, n), dt)
        s = full(a, flags["uplo"], name == "hemm")
        ref = alpha * (s @ b if flags["side"] == "L" else b @ s) + beta * c
        getattr(rt, name)(alpha, a, b, beta, c, tile_size=tile, **flags)
        return close(c, ref, dt), (a, b, c)
    if name in ("syrk", "herk", "syr2k", "her2k"):
        herm = name[0] == "h"
        if herm:
            beta = 0.3
        if name == "herk":
            alpha = 0.7
        a, b, c = rnd((n, n), dt), rnd((n, n), dt), rnd((n, n), dt)
        if herm:
            c = np.asfortranarray(c + c.conj().T)
        t = "T" if flags["trans"] == "N" and not herm else ("C" if flags["trans"] == "N" else "N")
        oa = a if flags["trans"] == "N" else op(a, flags["trans"])
        ob = b if flags["trans"] == "N" else op(b, flags["trans"])
        h = (lambda x: x.conj().T) if herm else (lambda x: x.T)
        if name in ("syrk", "herk"):
            upd = alpha * oa @ h(oa)
            getattr(rt, name)(alpha, a, beta, c0 := c.copy(order="F"), tile_size=tile, **flags)
            used = (a, c)
        else:
            upd = alpha * oa @ h(ob) + (np.conj(alpha) if herm else alpha) * ob @ h(oa)
            getattr(rt, name)(alpha, a, b, beta, c0 := c.copy(order="F"), tile_size=tile, **flags)
            used = (a, b, c)
        ref = upd + beta * c
        mask = np.triu(np.ones((n, n), bool)) if flags["uplo"] == "U" else np.tril(np.ones((n, n), bool))
        ok = close(c0[mask], ref[mask], dt) and np.array_equal(c0[~mask], c[~mask])  # other triangle untouched
        _ = t
        return ok, used
    # trmm / trsm
    a = rnd((n, n), dt) / n + 2 * np.eye(n, dtype=dt)  # well conditioned with either diag
    a = np.asfortranarray(a)
    b = rnd((n, n), dt)
    t = op(tri(a, flags["uplo"], flags["diag"]), flags["transa"])
    if name == "trmm":
        ref = alpha * (t @ b if flags["side"] == "L" else b @ t)
    else:
        ref = alpha * (np.linalg.solve(t, b) if flags["side"] == "L" else np.linalg.solve(t.T, b.T).T)
    getattr(rt, name)(alpha, a, b, tile_size=tile, **flags)
    return close(b, ref, dt), (a, b)


def data_bytes(name, dt, n=N):
    operands = 2 if name in ("syrk", "herk", "trmm", "trsm") else 3
    return operands * n * n * np.dtype(dt).itemsize


@pytest.mark.parametrize("policy", ["cache", "on-demand"])
def test_every_routine_on_capped_devices(policy):
    """Each device is capped at a quarter of the call's data: results still correct, nothing left behind."""
    totals = {"evictions": 0, "l1_hits": 0, "l2_hits": 0}
    for name, flags, dt in CASES:
        cap = data_bytes(name, dt) // 4
        with Runtime(sim_devices(3, memory=cap), memory_policy=policy) as rt:
            ok, used = run_case(rt, name, flags, dt)
            assert ok, (name, flags, dt)
            assert sum(x.nbytes for x in used) == 4 * cap
            st = rt.stats()["memory"]
            for dname, c in st.items():
                assert c["cached_tiles"] == 0 and c["heap_used"] == 0, (name, dname)  # nothing left behind
                for k in totals:
                    totals[k] += c.get(k, 0)
            assert not rt.memory.directory.keys()
    if policy == "cache":
        assert all(v > 0 for v in totals.values()), totals  # caps forced evictions; L1 and L2 hits happened
    else:
        assert totals["l1_hits"] == totals["l2_hits"] == 0


def test_caching_moves_less_than_on_demand_and_profiles_show_it():
    a, b = rnd((N, N), np.float64), rnd((N, N), np.float64)
    vols = {}
    for policy in ("cache", "on-demand"):
        c = np.zeros((N, N), order="F")
        with Runtime(sim_devices(3), memory_policy=policy) as rt:
            rt.gemm(1.0, a, b, 0.0, c, tile_size=TS)
            p = rt.last_profile()
            vols[policy] = sum(d.bytes_moved for d in p.devices)
            assert np.allclose(c, a @ b)
            assert all(d.compute_s > 0 and d.compute_s + d.comm_s + d.other_s <= p.wall_s * 1.001 + 1e-9
                       for d in p.devices if d.tasks)
            tr = rt.trace()
            engine = [e for e in tr["traceEvents"] if e.get("cat") == "engine"]
            assert {e["name"] for e in engine} >= {"kernel", "h2d", "d2h"}
            hits = sum(d.l1_hits + d.l2_hits for d in p.devices)
            assert (hits > 0) == (policy == "cache")
            assert "L1 hits" in str(p) and p.to_dict()["devices"][0]["misses"] >= 0
    # On demand, each of the t*t tiles of C reads its row of A and column of B (2t tiles) and writes back
    # once (beta = 0: C is not read).  With the cache each device reads a tile of A or B at most once, so
    # however the scheduler spreads the tasks, at most 3 devices x 2t^2 tiles plus t^2 write-backs move.
    t, tile = N // TS, TS * TS * 8
    assert vols["on-demand"] == t * t * (2 * t + 1) * tile
    assert vols["cache"] <= (3 * 2 * t * t + t * t) * tile < vols["on-demand"]


def test_sync_mode_and_single_stream():
    a, b = rnd((N, N), np.float64), rnd((N, N), np.float64)
    for kw in (dict(sync=True), dict()):
        c = np.zeros((N, N), order="F")
        with Runtime(sim_devices(2, streams=1, memory=1 << 20), **kw) as rt:
            rt.gemm(1.0, a, b, 0.0, c, tile_size=TS)
        assert np.allclose(c, a @ b)


def test_split_k_reduction_on_devices():
    a, b = rnd((64, 1024), np.float64), rnd((1024, 64), np.float64)
    c = rnd((64, 64), np.float64)
    ref = 2.0 * a @ b + 0.5 * c
    with Runtime(sim_devices(3, memory=1 << 20)) as rt:
        rt.gemm(2.0, a, b, 0.5, c, tile_size=32)
        assert rt.last_profile().path == "split-k"
    assert np.allclose(c, ref)


def test_mixed_host_and_simulated_devices_stay_coherent():
    # CPU workers write tiles that simulated devices read (and cache) in the TRSM chains
    devs = [CPUDevice(0), SimDevice(0, memory=1 << 20), SimDevice(1, memory=1 << 20)]
    for name, flags, dt in CASES:
        if name in ("trsm", "trmm", "gemm") and dt == np.float64:
            with Runtime(devs) as rt:
                ok, _ = run_case(rt, name, flags, dt)
            assert ok, (name, flags)


def test_out_of_memory_is_an_error_and_the_runtime_keeps_working():
    a, b = rnd((N, N), np.float64), rnd((N, N), np.float64)
    c = np.zeros((N, N), order="F")
    tile_bytes = 64 * 64 * 8
    with Runtime([SimDevice(0, memory=2 * tile_bytes, streams=1)]) as rt:
        with pytest.raises(DeviceError, match="sim0"):
            rt.gemm(1.0, a, b, 0.0, c, tile_size=64)  # a step needs 3 tiles
        rt.gemm(1.0, a, b, 0.0, c, tile_size=32)  # 3 tiles of 32 fit
        assert np.allclose(c, a @ b)
        assert rt.stats()["memory"]["sim0"]["heap_used"] == 0


def test_modeled_kernels_count_communication_without_data():
    n = 512
    a = np.empty((n, n), order="F")
    c = np.zeros((n, n), order="F")
    with Runtime(sim_devices(3, kernels="modeled", flop_rate=1e12)) as rt:
        rt.gemm(1.0, a, a, 0.0, c, tile_size=128)
        p = rt.last_profile()
    assert not c.any()  # nothing was computed or copied back
    assert sum(d.bytes_h2d + d.bytes_d2d for d in p.devices) >= 2 * 16 * 128 * 128 * 8 / 3
    assert sum(d.bytes_d2h for d in p.devices) == n * n * 8


def test_priority_uses_the_real_cache_state():
    devs = [SimDevice(i, memory=1 << 16) for i in range(3)]
    devs[2].peer = False
    mem = TileMemory(devs)
    loc = CacheLocality(mem)
    host = np.ones((16, 16), order="F")
    k, other = Tile(1, 0, 0), Tile(1, 0, 1)
    assert loc.score(0, [k, other]) == 0
    mem._fetch(0, k, host, mem._ctx_of(0, 0), TaskMemory())
    assert loc.level(0, k) == 2 and loc.level(1, k) == 1 and loc.level(2, k) == 0  # 2: no peer access
    assert loc.score(0, [k, other]) == 2 and loc.score(1, [k, k]) == 2
    off = CacheLocality(TileMemory(devs, policy="on-demand"))
    assert off.score(0, [k]) == 0


def test_device_construction_and_bad_arguments():
    assert [d.name for d in make_devices("sim:2")] == ["sim0", "sim1"]
    assert create_device("sim", 5, memory=1024).memory_bytes == 1024
    with pytest.raises(ValueError, match="memory"):
        SimDevice(0, memory=-1)
    with pytest.raises(ValueError, match="streams"):
        SimDevice(0, streams=0)
    with pytest.raises(ValueError, match="kernels"):
        SimDevice(0, kernels="fast")
    with pytest.raises(ValueError, match="bandwidth"):
        SimDevice(0, bandwidth=0)
    with pytest.raises(ValueError, match="count"):
        sim_devices(0)
    with pytest.raises(ValueError, match="memory_policy"):
        Runtime(1, memory_policy="lru")
    d = SimDevice(0, memory=4096)
    with pytest.raises(ValueError, match="outside"):
        d.view(4000, (16, 16), np.float64)
    with pytest.raises(ValueError, match="unknown kernel"):
        d.launch("gemv", [], {}, 0)


def test_concurrent_misses_of_one_tile_do_not_wait_on_each_other():
    # many streams on several devices miss the same tiles at the same moment; a device may take a tile
    # from a peer only once the peer's own copy has been issued (else two fills could wait on each other)
    a, b = rnd((128, 128), np.float64), rnd((128, 128), np.float64)
    with Runtime(sim_devices(3, memory=1 << 20)) as rt:
        for _ in range(15):
            c = np.zeros((128, 128), order="F")
            rt.gemm(1.0, a, b, 0.0, c, tile_size=16)
            assert np.allclose(c, a @ b)


ALL_TRANSITIONS = [("I", "E"), ("E", "S"), ("S", "S"), ("S", "E"), ("E", "I"), ("I", "M"), ("E", "M"), ("S", "M"),
                   ("M", "I")]


@pytest.mark.parametrize("capped", [False, True])
def test_every_coherence_transition_in_a_running_runtime(capped):
    # in-place TRMM: old B tiles are read (and cached, E and S) by the tasks of other rows on several devices
    # before their own task overwrites them (E -> M, S -> M); sync mode makes the placement reproducible
    # (5 tile columns on 3 devices round-robin: a column's chain visits every device)
    n, ts = 160, 32
    a = np.asfortranarray(rnd((n, n), np.float64) / n + 2 * np.eye(n))
    b0 = rnd((n, n), np.float64)
    ref = np.tril(a) @ b0
    cap = 2 * a.nbytes // 4 if capped else 1 << 24
    with Runtime(sim_devices(3, memory=cap), sync=True) as rt:
        b = b0.copy(order="F")
        rt.trmm(1.0, a, b, side="L", uplo="L", transa="N", diag="N", tile_size=ts)
        assert close(b, ref, np.float64)
        tr = rt.memory.directory.transitions
        missing = [t for t in ALL_TRANSITIONS if tr[t] == 0]
        assert not missing, (missing, dict(tr))
        assert tr[("I", "M")] + tr[("E", "M")] + tr[("S", "M")] == tr[("M", "I")] == (n // ts) ** 2  # each written once
        st = rt.stats()["memory"]
        evictions = sum(c.get("evictions", 0) for c in st.values())
        failures = sum(c["heap_failures"] for c in st.values())
        if capped:  # the heap refused allocations, and each refusal was met by evicting a tile, not an error
            assert evictions > 0 and failures >= evictions
        else:
            assert evictions == 0 and failures == 0
        assert not rt.memory.directory.keys() and all(c["heap_used"] == 0 for c in st.values())


def test_demo_section_checks_results_and_reports_volumes():
    from tileblas.cli._demo_memory import section

    lines = []
    section(lines.append)
    text = "\n".join(lines)
    assert text.count("error vs NumPy") == 3  # the section raises when a result is wrong
    ratio = float(text.split("on-demand / cache: ")[1].split("x")[0])
    assert ratio > 1.2, text
    assert "hit rate 0%" in text and "evictions 0" in text  # on-demand: no cache, nothing to evict
