"""Device models, the simulated H100 machine, tiles per device kind, the split of a call between
accelerators and host workers, and the static round-robin schedule.

Nothing here asserts a wall-clock time: modeled devices are checked through the intervals they put on
their virtual timelines (computed from the model at issue), and the runtime through its plans, records
and byte counts."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tileblas.devices import CPUDevice, DeviceModel, SimDevice, SimHostDevice, sim_devices, sim_machine
from tileblas.devices.sim import VirtualEvent, placeholder
from tileblas.runtime import Runtime
from tileblas.runtime import _shares

RNG = np.random.default_rng(11)


def rnd(shape, dt=np.float64):
    x = RNG.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return np.asfortranarray(x.astype(dt))


def slow_accelerator(memory=64 << 20, **changes):
    """A model about as fast as one host core, with small tiles: splits happen at test sizes."""
    kw = dict(flops={"d": 3e10, "z": 3e10, "s": 6e10, "c": 6e10}, knee=8.0, tile_candidates=(64, 32),
              memory=memory, step_overhead_s=1e-6)
    kw.update(changes)
    return DeviceModel.h100(**kw)


# ------------------------------------------------------------------------------------------ models


def test_device_model_presets_rates_and_checks():
    h = DeviceModel.h100()
    assert h.peak(np.float64) == h.peak("z") == 55e12 and h.peak(np.float32) == 50e12
    assert h.rate("d", h.knee) == pytest.approx(h.peak("d") / 2)  # half rate at the knee
    assert h.rate("d", 1024) < h.rate("d", 4096) < h.peak("d")
    assert h.kernel_seconds(2 * 4096.0 ** 3, np.float64, 4096) == pytest.approx(
        2 * 4096.0 ** 3 / h.rate("d", 4096))
    assert h.h2d_seconds(25e9) == pytest.approx(1.0 + h.h2d_latency)
    assert h.tile_candidates == (8192, 4096, 2048, 1024) and h.streams == 4
    assert DeviceModel.h100(memory=1 << 30).memory == 1 << 30
    assert h.with_(streams=8).streams == 8 and h.streams == 4
    core = DeviceModel.cpu_core(4e10)
    assert core.peak("d") == 4e10 and core.peak("s") == 8e10 and core.h2d_bandwidth == 0
    assert h.describe()["flops"]["d"] == 55e12
    with pytest.raises(ValueError, match="precision"):
        DeviceModel("x", flops={"d": 1e9})
    with pytest.raises(ValueError, match="streams"):
        DeviceModel.h100(streams=0)
    with pytest.raises(TypeError, match="DeviceModel"):
        SimDevice(0, model="h100")


def test_sim_machine_presets():
    devs = sim_machine("h100")
    assert [d.kind for d in devs] == ["sim"] + ["simcpu"] * 12  # 16 cores less one per stream
    assert devs[0].model.name.startswith("H100") and devs[0].modeled and devs[0].memory_bytes == 72 * 10**9
    two = sim_machine("h100", gpus=2, memory=1 << 30)
    assert [d.name for d in two[:3]] == ["sim0", "sim1", "simcpu0"] and len(two) == 2 + 8
    assert all(d.memory_bytes == 1 << 30 for d in two[:2])
    assert len(sim_machine(gpus=1, cpus=0)) == 1
    with pytest.raises(ValueError, match="machine"):
        sim_machine("tpu")
    with pytest.raises(ValueError, match="at least one"):
        sim_machine(gpus=0, cpus=0)


def test_placeholder_operands_hold_one_element():
    a = placeholder((65536, 65536))
    assert a.shape == (65536, 65536) and a.strides == (0, 0) and a.base.base.size == 1
    assert not np.may_share_memory(a, placeholder((4, 4)))


# ------------------------------------------------------------------------------------------ virtual timeline


def test_modeled_streams_issue_at_once_and_keep_stream_and_engine_order():
    model = DeviceModel.h100(h2d_bandwidth=1e9, d2h_bandwidth=1e9, h2d_latency=0.0, d2h_latency=0.0,
                             flops={"d": 1e9, "z": 1e9, "s": 1e9, "c": 1e9}, knee=1.0)
    dev = SimDevice(0, model=model, kernels="modeled", streams=3)
    host = placeholder((5000, 10))  # 400 kB: 0.4 ms at 1 GB/s... times 250 below
    big = placeholder((5000, 2500))  # 100 MB: 100 ms at 1 GB/s
    a = dev.view(0, (100, 100), np.float64)
    dev.h2d(dev.view(0, big.shape, np.float64), big, 0)  # stream 0: 100 ms of copy in
    dev.launch("gemm", [1.0, a, a, 0.0, a], {}, 0)  # 2 ms of kernel after it
    dev.launch("gemm", [1.0, a, a, 0.0, a], {}, 1)  # stream 1: the compute engine is free now
    dev.h2d(dev.view(0, host.shape, np.float64), host, 2)  # stream 2: the copy engine is busy
    ev = dev.record(0)
    assert isinstance(ev, VirtualEvent) and not ev.query()
    dev.wait(2, ev)
    dev.d2h(a, placeholder((100, 100)), 2)  # after stream 0's work
    (c0, k0), (k1,), (c2, o2) = dev.timeline(0), dev.timeline(1), dev.timeline(2)
    assert c0[0] == "h2d" and k0[0] == k1[0] == "kernel" and c2[0] == "h2d" and o2[0] == "d2h"
    assert k0[1] >= c0[2]  # a stream runs in order
    assert k1[2] <= k0[1]  # another stream's kernel ran in the compute engine's gap before it
    assert c2[1] >= c0[2]  # one copy engine per direction: stream 2's copy waited for stream 0's
    assert o2[1] >= k0[2] == ev.t  # the event wait
    assert c0[2] - c0[1] == pytest.approx(0.1) and k0[2] - k0[1] == pytest.approx(2e-3, rel=1e-3)
    dev.sync(2)
    assert time.perf_counter() >= o2[2] and ev.query()
    assert dev.stats.bytes_h2d == big.nbytes + host.nbytes


def test_modeled_copy_durations_follow_the_model_per_direction_and_time_scale():
    model = DeviceModel.h100(h2d_bandwidth=1e9, d2h_bandwidth=5e8, h2d_latency=1e-4, d2h_latency=2e-4)
    dev = SimDevice(0, model=model, kernels="modeled", time_scale=2.0)
    x = placeholder((1000, 100))
    dev.h2d(dev.view(0, x.shape, np.float64), x, 0)
    dev.d2h(dev.view(0, x.shape, np.float64), x, 1)
    (h,), (d,) = dev.timeline(0), dev.timeline(1)
    assert h[2] - h[1] == pytest.approx(2 * (1e-4 + 8e5 / 1e9))
    assert d[2] - d[1] == pytest.approx(2 * (2e-4 + 8e5 / 5e8))
    assert dev.transfer_seconds(8e5) == pytest.approx(1e-4 + 8e5 / 1e9)
    dev.synchronize()


def test_simulated_host_workers_compute_nothing():
    w = SimHostDevice(0)
    c = np.zeros((8, 8), order="F")
    w.kernel("gemm")(1.0, np.ones((8, 8), order="F"), np.ones((8, 8), order="F"), 0.0, c)
    assert not c.any() and w.host_memory and w.threads == 0
    with pytest.raises(ValueError, match="unknown kernel"):
        w.kernel("gemv")


# ------------------------------------------------------------------------------------------ tiles per kind


def test_accelerators_get_tiles_from_their_model():
    with Runtime([SimDevice.h100()]) as rt:
        t8, t16, t32 = (rt.tile_size_for("gemm", n, n, n) for n in (8192, 16384, 32768))
        assert 2048 <= t8 <= t16 <= t32 and t32 >= 4096  # never the host's 1024 at these sizes
        assert rt.tile_size_for("trsm", 16384, 16384, 16384) >= 2048  # chains too
        assert rt.tile_size_for("syrk", 16384, 16384, 16384) >= 2048
        assert rt.tile_size_for("gemm", 4096, 4096, 4096) >= 1024
    with Runtime([SimDevice.h100(memory=2 << 30)]) as rt:  # three tiles per stream in 3/4 of the memory:
        assert rt.tile_size_for("gemm", 32768, 32768, 32768) == 4096  # 1.5 GiB of 4096 tiles fit,
        assert rt.tile_size_for("gemm", 32768, 32768, 32768, np.complex128) == 2048  # 3 GiB do not
    assert 3 * 4096**2 * 8 * 4 <= _shares.FIT_SHARE * (2 << 30) < 3 * 4096**2 * 16 * 4
    with Runtime([SimDevice.h100(), SimHostDevice(0)]) as rt:  # host workers do not shrink the GPU's tiles
        assert rt.tile_size_for("gemm", 32768, 32768, 32768) == t32
        assert rt._devices_for_partition() == 1


@pytest.mark.parametrize("name", ["gemm", "trmm", "trsm"])
def test_cpu_workers_beside_an_accelerator_do_not_shrink_its_tiles(monkeypatch, name):
    """Host workers (real CPU workers, a simulated GPU and the GPUDevice of the CuPy stand-in with the H100
    model) are not counted by the accelerator's tile rule: a GPU + CPU runtime gets the GPU-alone tile, of
    2048 or more at these sizes, for trmm/trsm too."""
    from _cupy_standin import install

    from tileblas.devices import host_devices
    from tileblas.devices.gpu import GPUDevice

    install(monkeypatch, devices=1, total=8 << 30)
    gpu = GPUDevice(0, memory=4 << 30, streams=2, model=DeviceModel.h100())  # (pages never touched)
    for n in (16384, 32768):
        sim_hosts = [SimHostDevice(i) for i in range(12)]
        for acc, hosts in ((SimDevice.h100(), host_devices(4)), (SimDevice.h100(), sim_hosts), (gpu, host_devices(2))):
            with Runtime([acc]) as rt:
                alone = rt.tile_size_for(name, n, n, n)
            assert alone >= 2048
            with Runtime([acc] + hosts) as rt:
                assert rt._devices_for_partition() == 1
                assert rt.tile_size_for(name, n, n, n) == alone, (name, n, acc.kind)
    gpu.close()


def test_a_modeled_h100_call_moves_each_input_tile_once_in_core():
    n = 8192
    a, b, c = placeholder((n, n)), placeholder((n, n)), placeholder((n, n))
    with Runtime([SimDevice.h100()]) as rt:
        rt.gemm(1.0, a, b, 0.0, c)
        p = rt.last_profile()
    (d,) = p.devices
    assert p.tile_size >= 2048 and d.bytes_h2d == 2 * n * n * 8 and d.bytes_d2h == n * n * 8
    assert d.compute_s > 0


def test_tiles_on_a_device_with_memory_of_its_own_go_in_shells():
    n, ts = 128, 32
    a, b = rnd((n, n)), rnd((n, n))
    c = np.zeros((n, n), order="F")
    with Runtime([SimDevice(0, memory=1 << 20)], sync=True) as rt:
        rt.gemm(1.0, a, b, 0.0, c, tile_size=ts)
        recs = rt._last.args[7]
    order = [(r.task.out.i, r.task.out.j) for r in recs]
    assert order == sorted(order, key=lambda ij: (max(ij), order.index(ij)))
    assert [max(ij) for ij in order] == sorted(max(ij) for ij in order)
    assert np.allclose(c, a @ b)


# ------------------------------------------------------------------------------------------ the split


def _mixed(hosts=2, **model):
    return [SimDevice(0, model=slow_accelerator(**model))] + [CPUDevice(i) for i in range(hosts)]


SPLIT_CASES = [
    ("gemm", dict(transa="N", transb="N")), ("gemm", dict(transa="T", transb="N")),
    ("gemm", dict(transa="N", transb="T")), ("symm", dict(side="L", uplo="U")), ("symm", dict(side="R", uplo="L")),
    ("trmm", dict(side="L", uplo="U", transa="N", diag="N")), ("trmm", dict(side="R", uplo="L", transa="T", diag="U")),
    ("trsm", dict(side="L", uplo="L", transa="N", diag="N")), ("trsm", dict(side="R", uplo="U", transa="T", diag="N")),
]


@pytest.mark.parametrize("name,flags", SPLIT_CASES)
@pytest.mark.parametrize("wide", [False, True])
def test_a_split_call_gives_each_kind_its_part_and_is_right(monkeypatch, name, flags, wide):
    m, n = (96, 200) if wide else (200, 96)
    monkeypatch.setattr(_shares, "_strip", lambda *a, **k: (40, 16))  # 40 lines of the output, tiles of 16
    alpha, beta = 0.7, 0.3
    with Runtime(_mixed(), small_flops=0) as rt:
        if name == "gemm":
            k = 64
            a = rnd((m, k) if flags["transa"] == "N" else (k, m))
            b = rnd((k, n) if flags["transb"] == "N" else (n, k))
            c = rnd((m, n))
            ref = alpha * (a if flags["transa"] == "N" else a.T) @ (b if flags["transb"] == "N" else b.T) + beta * c
            rt.gemm(alpha, a, b, beta, c, **flags)
            got = c
        elif name == "symm":
            o = m if flags["side"] == "L" else n
            a, b, c = rnd((o, o)), rnd((m, n)), rnd((m, n))
            t = np.triu(a) if flags["uplo"] == "U" else np.tril(a)
            s = t + t.T - np.diag(np.diag(a))
            ref = alpha * (s @ b if flags["side"] == "L" else b @ s) + beta * c
            rt.symm(alpha, a, b, beta, c, **flags)
            got = c
        else:
            o = m if flags["side"] == "L" else n
            a = np.asfortranarray(rnd((o, o)) / o + 2 * np.eye(o))
            b = rnd((m, n))
            t = np.triu(a) if flags["uplo"] == "U" else np.tril(a)
            if flags["diag"] == "U":
                t = t - np.diag(np.diag(t)) + np.eye(o)
            op = t if flags["transa"] == "N" else t.T
            if name == "trmm":
                ref = alpha * (op @ b if flags["side"] == "L" else b @ op)
            else:
                ref = alpha * (np.linalg.solve(op, b) if flags["side"] == "L" else np.linalg.solve(op.T, b.T).T)
            getattr(rt, name)(alpha, a, b, **flags)
            got = b
        recs = rt._last.args[7]
    assert np.abs(got - ref).max() <= 1e-10 * max(1.0, np.abs(ref).max())
    on_acc = {r.task.out.m for r in recs if r.device == 0}
    on_host = {r.task.out.m for r in recs if r.device > 0}
    assert on_acc and on_host and not on_acc & on_host  # each part's output tiles stayed with its kind
    assert not any(r.stolen and (r.device == 0) != (r.task.out.m in on_acc) for r in recs)


def test_the_rule_gives_slow_accelerators_a_host_strip_and_fast_ones_none():
    n = 512
    a, b = rnd((n, n)), rnd((n, n))
    bound = {"alpha": 1.0, "a": a, "b": b, "beta": 0.0, "c": np.zeros((n, n), order="F"), "transa": "N",
             "transb": "N"}
    devs = _mixed(hosts=4, memory=1 << 30, flops={"d": 1e10, "z": 1e10, "s": 2e10, "c": 2e10})
    plan = _shares.split_call("gemm", bound, (n, n, n), devs)
    assert set(plan.tiles) == {"accelerators", "host"} and plan.tiles["host"] <= plan.tiles["accelerators"] * 16
    hosts = {i for p in plan.placement if p is not None for i in p if i > 0}
    assert hosts == {1, 2, 3, 4} and plan.placement.count(frozenset({0})) >= 1
    fast = [SimDevice.h100()] + [SimHostDevice(i) for i in range(4)]
    plan = _shares.split_call("gemm", bound, (n, n, n), fast)
    assert set(plan.tiles) == {"accelerators"} and set(plan.placement) == {frozenset({0})}
    bound_k = {"alpha": 1.0, "a": a, "beta": 0.0, "c": np.zeros((n, n), order="F"), "uplo": "U", "trans": "N"}
    plan = _shares.split_call("syrk", bound_k, (n, n, n), devs)  # the rank-k family is not split
    assert set(plan.placement) == {frozenset({0})}


def test_a_split_call_on_the_rule_is_right(monkeypatch):
    n = 384
    a, b = rnd((n, n)), rnd((n, n))
    c = np.zeros((n, n), order="F")
    with Runtime(_mixed(hosts=3, memory=1 << 30, flops={"d": 1e10, "z": 1e10, "s": 2e10, "c": 2e10})) as rt:
        rt.gemm(1.0, a, b, 0.0, c)
        devs = {r.device for r in rt._last.args[7]}
    assert np.allclose(c, a @ b) and 0 in devs and devs - {0}


def test_rank_k_calls_of_a_mixed_runtime_stay_on_the_accelerators():
    n = 256
    a = rnd((n, n))
    c = rnd((n, n))
    ref = np.triu(a @ a.T + c)
    with Runtime(_mixed(memory=1 << 30)) as rt:
        rt.syrk(1.0, a, 1.0, c, uplo="U", trans="N")
        assert {r.device for r in rt._last.args[7]} == {0}
    assert np.allclose(np.triu(c), ref)


def test_a_call_fitting_one_tile_goes_where_the_model_says_it_is_faster():
    n = 1024
    a, b, c = placeholder((n, n)), placeholder((n, n)), placeholder((n, n))
    with Runtime([SimHostDevice(0), SimDevice.h100()]) as rt:  # one H100 tile against a host core
        rt.gemm(1.0, a, b, 0.0, c)
        (rec,) = rt._last.args[7]
        assert rec.device == 1 and rt.last_profile().path == "small"
    assert _shares.small_on_accelerator("gemm", 64, 64, 64, np.float64, [SimHostDevice(0), SimDevice.h100()]) is False


# ------------------------------------------------------------------------------------------ round robin


@pytest.mark.parametrize("sync", [False, True])
def test_round_robin_binds_task_i_to_device_i_mod_devices(sync):
    n, ts = 160, 32
    a, b = rnd((n, n)), rnd((n, n))
    c = np.zeros((n, n), order="F")
    t = np.asfortranarray(rnd((n, n)) / n + 2 * np.eye(n))
    with Runtime(sim_devices(3, memory=1 << 20), schedule="round-robin", memory_policy="on-demand",
                 sync=sync) as rt:
        assert rt.schedule == "round-robin"
        rt.gemm(1.0, a, b, 0.0, c, tile_size=ts)
        recs = rt._last.args[7]
        assert all(r.device == r.task.index % 3 and not r.stolen for r in recs)
        x = b.copy(order="F")
        rt.trsm(1.0, t, x, side="L", uplo="L", tile_size=ts)  # dependencies: bound all the same
        recs = rt._last.args[7]
        assert all(r.device == r.task.index % 3 for r in recs)
        st = rt.stats()["memory"]
    assert np.allclose(c, a @ b) and np.allclose(np.tril(t) @ x, b)
    assert sum(s.get("l1_hits", 0) for s in st.values()) == 0  # on demand: nothing cached


def test_round_robin_volume_against_the_tile_caches():
    n, ts = 192, 32
    a, b = rnd((n, n)), rnd((n, n))
    moved = {}
    for schedule, policy in (("round-robin", "on-demand"), ("demand", "cache")):
        c = np.zeros((n, n), order="F")
        with Runtime(sim_devices(2, memory=1 << 22), schedule=schedule, memory_policy=policy) as rt:
            rt.gemm(1.0, a, b, 0.0, c, tile_size=ts)
            moved[schedule] = sum(d.bytes_moved for d in rt.last_profile().devices)
        assert np.allclose(c, a @ b)
    t = n // ts
    assert moved["round-robin"] == t * t * (2 * t + 1) * ts * ts * 8  # every input tile for every use
    assert moved["demand"] < moved["round-robin"] / 2


def test_schedule_argument_is_checked():
    with pytest.raises(ValueError, match="schedule"):
        Runtime(1, schedule="static")
