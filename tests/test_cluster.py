"""The tile runtime on a real Dask LocalCluster (worker processes on loopback)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

pytest.importorskip("distributed")
pytest.importorskip("dask")

import scipy.linalg.blas as sblas  # noqa: E402

import tileblas  # noqa: E402
from tileblas import blas  # noqa: E402
from tileblas.runtime import get_runtime, set_runtime  # noqa: E402
from tileblas.runtime.cluster import (  # noqa: E402
    ClusterRuntime,
    DistributedMatrix,
    cluster_tile_size,
    is_cluster_spec,
    local_cluster,
)

# every test here is bounded: a hang fails the test instead of stalling CI (pytest-timeout)
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

TILE = 64


@contextlib.contextmanager
def current(r):
    """Make r the default runtime for a block without shutting it down afterwards (``with r:`` would)."""
    prev = set_runtime(r)
    try:
        yield r
    finally:
        set_runtime(prev)


def _hold_port(port):
    """Bind 127.0.0.1:port so that nobody else can (None when it is already taken: busy either way)."""
    import socket

    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        s.listen(1)
    except OSError:
        s.close()
        return None
    return s


def _wait_gone(pids, timeout=20.0):
    """Pids of ``pids`` still alive after waiting up to ``timeout`` seconds for them to exit."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        still = []
        for p in alive:
            try:
                os.kill(p, 0)
                still.append(p)
            except ProcessLookupError:
                pass
            except PermissionError:  # pragma: no cover - someone else's process reused the pid
                pass
        alive = still
        if alive:
            time.sleep(0.1)
    return alive


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client

    held = [_hold_port(p) for p in (8786, 8787)]  # Dask's default ports are busy: nothing may need them
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cl = local_cluster(n_workers=2, threads_per_worker=1, processes=True)
    finally:
        for h in held:
            if h is not None:
                h.close()
    client = Client(cl, set_as_default=False)
    client.wait_for_workers(2, timeout=60)
    pids = set(client.run(os.getpid).values())
    try:
        yield cl, client, [str(w.message) for w in caught]
    finally:
        with contextlib.suppress(Exception):  # workers started since (a nanny's restart) too
            pids |= set(client.run(os.getpid).values())
        client.close()
        cl.close()
    assert not _wait_gone(pids), "worker processes outlived cl.close()"


@pytest.fixture(scope="module")
def rt(cluster):
    r = tileblas.Runtime(devices=cluster[1], tile_size=TILE)
    yield r
    r.shutdown()


def _rand(rng, shape, dtype=np.float64, order="F"):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x, dtype=dtype, order=order)


# --------------------------------------------------------------------------------------------- basics
def test_import_tileblas_imports_no_dask():
    code = "import sys, tileblas, tileblas.blas; import tileblas.runtime; " \
           "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_local_cluster_uses_no_fixed_port_and_only_loopback(cluster):
    cl, client, caught = cluster
    assert not [m for m in caught if "already in use" in m], caught
    http = cl.scheduler.http_server
    assert http.address == "127.0.0.1" and http.port not in (0, 8787)
    assert client.scheduler.address.startswith("tcp://127.0.0.1:")
    assert not client.scheduler.address.endswith(":8786")
    for addr in client.scheduler_info()["workers"]:
        assert addr.startswith("tcp://127.0.0.1:")


def test_cluster_spec_detection():
    assert is_cluster_spec("tcp://127.0.0.1:8786") and is_cluster_spec("tls://h:1") and is_cluster_spec("dask:2")
    assert not is_cluster_spec("cpu:2") and not is_cluster_spec(2) and not is_cluster_spec(None)
    r = tileblas.Runtime("cpu:1")
    try:
        assert type(r) is tileblas.Runtime
    finally:
        r.shutdown()


def test_runtime_from_client_has_a_device_per_worker(rt, cluster):
    assert isinstance(rt, ClusterRuntime) and isinstance(rt, tileblas.Runtime)
    workers = cluster[1].scheduler_info()["workers"]
    assert sorted(d.address for d in rt.devices if d.alive) == sorted(workers)
    for d in rt.devices:
        assert d.kind == "dask" and not d.host_memory
        assert d.address.startswith("tcp://127.0.0.1:")  # loopback
        assert d.memory_limit == workers[d.address]["memory_limit"] > 0


def test_runtime_from_address_and_from_cluster_object(cluster):
    cl, client, _ = cluster
    a = np.arange(300 * 200, dtype=np.float64).reshape(300, 200) / 1e4
    for spec in (client.scheduler.address, cl):  # "tcp://127.0.0.1:port", a LocalCluster
        r = tileblas.Runtime(devices=spec, tile_size=128)
        try:
            assert isinstance(r, ClusterRuntime) and r.client is not client
            assert sorted(d.address for d in r.devices) == sorted(client.scheduler_info()["workers"])
            out = np.zeros((300, 300), order="F")
            r.gemm(1.0, a, a, 0.0, out, transb="T")
            np.testing.assert_allclose(out, a @ a.T, rtol=1e-12)
            assert r.last_profile().path.startswith("cluster")
        finally:
            r.shutdown()
        assert r.client.status == "closed"  # its own client is closed, the cluster stays up
    assert client.status == "running" and len(client.scheduler_info()["workers"]) == 2


def test_cluster_spec_without_distributed_says_what_to_install():
    code = ("import sys; sys.modules['distributed'] = None; import tileblas\n"
            "try:\n    tileblas.Runtime(devices='dask:1')\n"
            "except ImportError as e:\n    print('ImportError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "ImportError:" in out and "tileblas[distributed]" in out


def test_default_tiles_are_coarse():
    assert cluster_tile_size("gemm", 8192, 8192, 8192, 2) == 2048
    assert cluster_tile_size("gemm", 1000, 1000, 1000, 2) == 512
    assert min(cluster_tile_size("trsm", n, n, n, 4) for n in (300, 3000, 30000)) >= 512


def test_bad_arguments(rt):
    a = np.ones((10, 10))
    with pytest.raises(ValueError, match="tile_size"):
        rt.gemm(1.0, a, a, 0.0, np.zeros((10, 10)), tile_size=0)
    with pytest.raises(ValueError, match="c must have shape"):
        rt.gemm(1.0, a, a, 0.0, np.zeros((10, 9)))
    with pytest.raises(TypeError, match="security"):
        ClusterRuntime._security(42)
    with pytest.raises(TypeError, match="devices"):
        ClusterRuntime(devices=object())


# --------------------------------------------------------------------------------------------- Level 3
def _level3_cases(prefix, dt, rng):
    """(name, callable(blas_module) -> result) for every Level-3 routine of the precision."""
    m, n, k = 150, 130, 90
    a = _rand(rng, (m, k), dt)
    b = _rand(rng, (k, n), dt)
    c = _rand(rng, (m, n), dt)
    sq = _rand(rng, (m, m), dt)
    tri = np.triu(sq) + m * np.eye(m, dtype=dt)
    ak = _rand(rng, (m, k), dt)
    bk = _rand(rng, (m, k), dt)
    cc = _rand(rng, (m, m), dt)
    cases = [
        ("gemm", lambda M: getattr(M, prefix + "gemm")(1.5, a, b, 0.5, c)),
        ("gemm_tt", lambda M: getattr(M, prefix + "gemm")(1.0, b, a, 0.0, c.T.copy(), trans_a=1, trans_b=1)),
        ("symm", lambda M: getattr(M, prefix + "symm")(1.0, sq, c, 0.5, c, side=0, lower=1)),
        ("syrk", lambda M: getattr(M, prefix + "syrk")(1.0, ak, 0.5, cc, lower=0)),
        ("syr2k", lambda M: getattr(M, prefix + "syr2k")(1.0, ak, bk, 0.0, cc, trans=0)),
        ("trmm", lambda M: getattr(M, prefix + "trmm")(2.0, tri, c, side=0, lower=0)),
        ("trsm", lambda M: getattr(M, prefix + "trsm")(2.0, tri, c, side=0, lower=0)),
        ("trsm_right", lambda M: getattr(M, prefix + "trsm")(1.0, tri[:n, :n], c, side=1, lower=0, trans_a=1)),
    ]
    if dt in (np.complex64, np.complex128):
        cases += [
            ("hemm", lambda M: getattr(M, prefix + "hemm")(1.0, sq, c, 0.5, c, side=0, lower=0)),
            ("herk", lambda M: getattr(M, prefix + "herk")(1.0, ak, 0.5, cc, lower=1)),
            ("her2k", lambda M: getattr(M, prefix + "her2k")(1.0, ak, bk, 0.0, cc, lower=0)),
        ]
    return cases


@pytest.mark.parametrize("prefix,dt", [("d", np.float64), ("z", np.complex128), ("s", np.float32)])
def test_level3_blas_same_results_as_host(rt, prefix, dt):
    rng = np.random.default_rng(1)
    tol = 2e-4 if dt == np.float32 else 1e-11
    for name, call in _level3_cases(prefix, dt, rng):
        with tileblas.Runtime(2, tile_size=TILE) as host:
            want = call(blas)
        assert host.last_profile().path != "small"
        with current(rt):
            got = call(blas)
        assert rt.last_profile().path.startswith("cluster"), name
        ref = call(sblas)
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=name)
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * scale, err_msg=name)


def test_small_calls_run_on_the_client(cluster):
    r = tileblas.Runtime(devices=cluster[1])  # default tile size and small-problem threshold
    try:
        a = np.ones((20, 20))
        with current(r):
            out = blas.dgemm(1.0, a, a)
        assert r.last_profile().path == "small" and np.allclose(out, 20.0)
        assert r.stats()["cluster"]["tasks"] == 0
    finally:
        r.shutdown()


# --------------------------------------------------------------------------------------------- residency
def test_chain_moves_each_input_from_the_client_at_most_once(rt):
    rng = np.random.default_rng(2)
    n = 200
    a, b, c = _rand(rng, (n, n)), _rand(rng, (n, n)), _rand(rng, (n, n))
    low = np.tril(_rand(rng, (n, n))) + n * np.eye(n)
    rt.clear_cache()
    s0 = rt.stats()["cluster"]
    with current(rt):
        ab = blas.dgemm(1.0, a, b)
        abc = blas.dgemm(1.0, ab, c)
        x = blas.dtrsm(1.0, low, abc, lower=1)
    s1 = rt.stats()["cluster"]
    np.testing.assert_allclose(low @ x, a @ b @ c, rtol=1e-10, atol=1e-9 * np.abs(a @ b @ c).max())
    sent = s1["bytes_sent"] - s0["bytes_sent"]
    # a, b and c are sent once each; of low only the tiles TRSM reads (its lower triangle); ab and abc,
    # the results of the first two calls, are already on the workers and are not sent at all.
    tiles = -(-n // TILE)
    low_tiles_read = tiles * (tiles + 1) // 2
    low_bytes = sum(low[i * TILE:(i + 1) * TILE, j * TILE:(j + 1) * TILE].nbytes
                    for i in range(tiles) for j in range(i + 1))
    assert sent == a.nbytes + b.nbytes + c.nbytes + low_bytes
    assert s1["tiles_sent"] - s0["tiles_sent"] == 3 * tiles * tiles + low_tiles_read
    assert s1["store_hits"] - s0["store_hits"] >= 2 * tiles * tiles  # ab and abc found resident
    # the same chain again sends nothing, and a changed input is sent again (only its changed tile)
    with current(rt):
        blas.dtrsm(1.0, low, blas.dgemm(1.0, blas.dgemm(1.0, a, b), c), lower=1)
    assert rt.stats()["cluster"]["bytes_sent"] == s1["bytes_sent"]
    a2 = a.copy(order="F")
    a2[0, 0] += 1.0
    with current(rt):
        out = blas.dgemm(1.0, a2, b)
    np.testing.assert_allclose(out, a2 @ b, rtol=1e-12, atol=1e-10)
    assert rt.stats()["cluster"]["bytes_sent"] - s1["bytes_sent"] == a2[:TILE, :TILE].nbytes


def test_distributed_matrix_handles_keep_tiles_on_workers(rt):
    rng = np.random.default_rng(3)
    a, b = _rand(rng, (300, 200)), _rand(rng, (200, 250))
    A, B = rt.scatter(a), rt.scatter(b)
    C = rt.zeros((300, 250))
    assert isinstance(A, DistributedMatrix) and A.tile == TILE and len(A.futures()) == 5 * 4
    s0 = rt.stats()["cluster"]
    rt.gemm(2.0, A, B, 0.0, C)
    D = rt.zeros((300, 250))
    rt.gemm(1.0, C, rt.scatter(np.eye(250)), 0.0, D)
    s1 = rt.stats()["cluster"]
    assert s1["bytes_gathered"] == s0["bytes_gathered"]  # nothing came back to the client
    assert s1["bytes_sent"] - s0["bytes_sent"] == np.eye(250).nbytes  # only the identity was sent
    np.testing.assert_allclose(np.asarray(D), 2.0 * a @ b, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(C.gather(), 2.0 * a @ b, rtol=1e-12, atol=1e-10)
    with pytest.raises(ValueError, match="tile size"):
        rt.gemm(1.0, A, rt.scatter(b, tile_size=32), 0.0, rt.zeros((300, 250)))


# --------------------------------------------------------------------------------------------- other APIs
def test_async_api_on_cluster_runtime(rt):
    from tileblas import asyncapi as aa

    rng = np.random.default_rng(4)
    a, b = _rand(rng, (200, 150)), _rand(rng, (150, 180))
    prev = set_runtime(rt)
    ex = aa.Executor(policy="demand")
    try:
        assert get_runtime() is rt
        ha, hb = ex.handle(a), ex.handle(b)
        hc = ex.empty((200, 180))
        f = aa.gemm(1.0, ha, hb, 0.0, hc)
        hd = ex.empty((180, 180))
        g = aa.syrk(1.0, hc, 0.0, hd, trans="T")
        got = g.result().get()
        assert f.done()
        c = a @ b
        np.testing.assert_allclose(np.triu(got), np.triu(c.T @ c), rtol=1e-10, atol=1e-8 * np.abs(c).max() ** 2)
        assert rt.last_profile().path.startswith("cluster")
    finally:
        ex.close()
        set_runtime(prev)


def test_async_cost_policy_runs_whole_calls_on_dask_workers(rt):
    from tileblas import asyncapi as aa
    from tileblas.devices import DeviceError
    from tileblas.devices.dask import RemoteArray

    devs = [d for d in rt.devices if d.alive]
    rng = np.random.default_rng(8)
    n = 240
    a, b = _rand(rng, (n, n)), _rand(rng, (n, n))
    low = np.tril(_rand(rng, (n, n))) + n * np.eye(n)
    with aa.Executor(devs, policy="cost") as ex:  # calibrates each worker with a few remote DGEMMs
        sent0 = sum(d.stats.bytes_h2d for d in devs)
        tasks0 = sum(d.stats.tasks for d in devs)
        assert sorted(b_.name for b_ in ex.backends) == sorted(d.name for d in devs)
        ha, hb, hl = ex.handle(a), ex.handle(b), ex.handle(low)
        hc = ex.empty((n, n))
        f1 = aa.gemm(1.0, ha, hb, 0.0, hc)
        hd = ex.empty((n, n))
        aa.syrk(1.0, hc, 0.0, hd, trans="T")
        aa.trsm(2.0, hl, hc, side="L", uplo="L")
        f1.result()
        got_c, got_d = hc.get(), hd.get()
        assert sum(s["tasks"] for s in ex.stats()["backends"]) >= 3
    c = a @ b
    np.testing.assert_allclose(np.triu(got_d), np.triu(c.T @ c), rtol=1e-10, atol=1e-9 * np.abs(c).max() ** 2)
    np.testing.assert_allclose(low @ got_c, 2.0 * c, rtol=1e-10, atol=1e-9 * np.abs(c).max())
    assert sum(d.stats.tasks for d in devs) - tasks0 >= 3  # the calls ran as Dask tasks on the workers
    # each input was sent once (to the worker that ran the call reading it); c moved to another worker
    # (through the client) at most once, if the policy put the gemm and the syrk/trsm on different ones
    assert sum(d.stats.bytes_h2d for d in devs) - sent0 <= a.nbytes + b.nbytes + low.nbytes + c.nbytes
    # the device interface on its own: a RemoteArray stays on its worker across kernel calls
    d0 = devs[0]
    x = d0.to_device(a)
    y = d0.empty((n, n), np.float64)
    assert isinstance(x, RemoteArray) and y.future is None
    k = d0.kernel("gemm")
    k(1.0, x, x, 0.0, y)
    k(1.0, x, x, 1.0, y)
    out = np.empty((n, n), order="F")
    d0.to_host(y, out)
    np.testing.assert_allclose(out, 2.0 * a @ a, rtol=1e-12, atol=1e-9)
    with pytest.raises(DeviceError, match="kernel 'gemv'"):
        d0.kernel("gemv")


def test_rblas_on_cluster_runtime(rt):
    from tileblas import rblas

    rng = np.random.default_rng(5)
    a, b = _rand(rng, (160, 140)), _rand(rng, (140, 150))
    c0 = _rand(rng, (160, 150))
    tri = np.triu(_rand(rng, (160, 160))) + 160 * np.eye(160)
    with current(rt):
        c = c0.copy(order="F")
        out = rblas.fdgemm(1.0, a, b, 0.5, c, overwrite_c=1, mode="compute")
        np.testing.assert_allclose(out, a @ b + 0.5 * c0, rtol=1e-12, atol=1e-10)
        rblas.rdgemm(1.0, a, b, 0.5, c, overwrite_c=1)
        np.testing.assert_allclose(c, c0, rtol=1e-9, atol=1e-9)
        x = c0.copy(order="F")
        rblas.fdtrmm(1.0, tri, x, overwrite_b=1, mode="compute")
        np.testing.assert_allclose(x, tri @ c0, rtol=1e-12, atol=1e-9)
        rblas.rdtrmm(1.0, tri, x, overwrite_b=1)
        np.testing.assert_allclose(x, c0, rtol=1e-10, atol=1e-10)
    assert rt.last_profile().path.startswith("cluster")


# --------------------------------------------------------------------------------------------- failures
def test_worker_killed_during_a_call_still_gives_the_right_result(rt, cluster):
    client = cluster[1]
    rng = np.random.default_rng(6)
    n = 1536
    a, b, c0 = _rand(rng, (n, n)), _rand(rng, (n, n)), _rand(rng, (n, n))
    want = a @ b - c0
    rt.clear_cache()
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    start = rt.stats()["cluster"]["tasks"]
    killed = threading.Event()

    def killer():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and rt.stats()["cluster"]["tasks"] - start < 12:
            time.sleep(0.002)
        os.kill(pids[victim], signal.SIGKILL)
        killed.set()

    th = threading.Thread(target=killer)
    th.start()
    c = c0.copy(order="F")
    t0 = time.monotonic()
    rt.gemm(1.0, a, b, -1.0, c, tile_size=256)  # 36 tasks of 6 steps
    done_at = time.monotonic()
    th.join()
    assert killed.is_set()
    np.testing.assert_allclose(c, want, rtol=1e-10, atol=1e-9)
    assert done_at - t0 < 60
    st = rt.stats()["cluster"]
    assert st["recoveries"] >= 1 or st["resubmitted"] >= 1 or victim not in client.scheduler_info()["workers"]
    # the runtime keeps working, and the worker the nanny starts in place of the dead one is used
    client.wait_for_workers(2, timeout=30)
    new = [d for d in rt.devices if d.address not in pids]
    deadline = time.monotonic() + 30
    while not new and time.monotonic() < deadline:
        time.sleep(0.1)
        rt.workers  # noqa: B018  (refreshes the device list)
        new = [d for d in rt.devices if d.address not in pids]
    assert new, "the restarted worker did not become a device"
    before = rt.stats()["devices"][new[0].name]["tasks"]
    x = c0.copy(order="F")
    rt.gemm(1.0, a[:512, :512], b[:512, :512], 0.0, x[:512, :512].copy(order="F"), tile_size=128)
    assert rt.stats()["devices"][new[0].name]["tasks"] > before


def test_async_cost_policy_mixes_host_and_dask_workers_by_estimate(rt):
    from tileblas import asyncapi as aa
    from tileblas.devices import host_devices

    devs = [d for d in rt.devices if d.alive]
    assert all(0 < d.call_latency_s < 1.0 for d in devs)  # a Dask round trip, measured
    n = 1000
    a = np.asfortranarray(np.random.default_rng(10).standard_normal((n, n)))
    # calibration takes the round trip out: a worker's single-threaded DGEMM rate is of the order of the
    # host backend's (not the round-trip-bound rate of a tiny product).  On a loaded machine one
    # calibration can meet a round trip longer than the latency measured before it: of three, one must.
    for attempt in range(3):
        ex = aa.Executor(host_devices(1) + devs, policy="cost")
        host_b, dask_b = ex.backends[0], ex.backends[1:]
        speeds = [(b.name, b.speed) for b in ex.backends]
        if all(b.speed > 0.2 * host_b.speed for b in dask_b):
            break
        ex.close()
    else:
        raise AssertionError(f"three calibrations, each round-trip bound: last {speeds}")
    with ex:
        ha = ex.handle(a)
        outs = [ex.empty((n, n)) for _ in range(8)]
        futs = [aa.gemm(1.0, ha, ha, 0.0, o) for o in outs]
        for f in futs:
            f.result(timeout=120)
        ran = {s["name"]: s["tasks"] for s in ex.stats()["backends"]}
        want = a @ a
        for o in outs:
            np.testing.assert_allclose(o.get(), want, rtol=1e-12, atol=1e-9)
    # 8 calls queued at once: the host backend's queue grows until a worker finishes earlier
    assert sum(ran[b.name] for b in dask_b) >= 1 and ran[host_b.name] >= 1, ran


def test_async_cost_policy_call_on_a_killed_worker_raises_device_error(rt, cluster):
    from tileblas import asyncapi as aa
    from tileblas.devices import DeviceError

    client = cluster[1]
    victim = next(d for d in rt.devices if d.alive)
    pid = client.run(os.getpid, workers=[victim.address])[victim.address]
    n = 4000  # ~128 GFLOP: seconds on one core, so the kill lands while the call runs
    a = np.asfortranarray(np.random.default_rng(9).standard_normal((n, n)))
    with aa.Executor([victim], policy="cost", calibrate=False) as ex:
        f = aa.gemm(1.0, ex.handle(a, copy=False), ex.handle(a, copy=False), 0.0, ex.empty((n, n)))
        deadline = time.monotonic() + 60
        while not client.processing(workers=[victim.address]).get(victim.address) and not f.done():
            assert time.monotonic() < deadline, "the call never started on the worker"
            time.sleep(0.01)
        assert not f.done()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(DeviceError, match="was lost"):
            f.result(timeout=60)
        with pytest.raises(DeviceError, match="has gone"):  # the device stays dead, calls fail fast
            aa.gemm(1.0, ex.handle(a[:10, :10]), ex.handle(a[:10, :10]), 0.0, ex.empty((10, 10))).result(30)
    client.wait_for_workers(2, timeout=60)  # the nanny starts a replacement; later tests use it


def test_task_error_reaches_the_caller_and_runtime_survives(rt):
    with pytest.raises(ValueError, match="routine"):
        rt.run("gemv", 1.0, np.ones((9, 9)), np.ones((9, 9)), 0.0, np.ones((9, 9)))
    a = np.ones((200, 200))
    A = rt.scatter(a)
    A._tiles[(1, 1)].future = rt.client.scatter("not a tile")  # a task on a worker will fail on it
    with pytest.raises(Exception) as info:
        rt.gemm(1.0, A, rt.scatter(a), 0.0, rt.zeros((200, 200)))
    assert "Dask worker" in "".join(getattr(info.value, "__notes__", [])) and info.tb is not None
    out = np.zeros((200, 200), order="F")
    rt.gemm(1.0, a, a, 0.0, out)
    assert np.allclose(out, 200.0)


# --------------------------------------------------------------------------------------------- security
def _self_signed(tmp_path):
    """A self-signed certificate and key for 127.0.0.1 made with the openssl command line tool."""
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl command not available to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return str(cert), str(key)


def test_tls_local_cluster_from_spec(tmp_path):
    cert, key = _self_signed(tmp_path)
    security = {"tls_ca_file": cert, "tls_client_cert": cert, "tls_client_key": key,
                "tls_scheduler_cert": cert, "tls_scheduler_key": key, "tls_worker_cert": cert,
                "tls_worker_key": key, "require_encryption": True}
    r = tileblas.Runtime(devices="dask:1", security=security, tile_size=64)
    pids = list(r.client.run(os.getpid).values())
    try:
        assert r.client.scheduler.address.startswith("tls://127.0.0.1:")
        assert [d.address.split(":")[:2] for d in r.devices] == [["tls", "//127.0.0.1"]]
        a = np.arange(200 * 150, dtype=np.float64).reshape(200, 150) / 1e4
        out = np.zeros((200, 200), order="F")
        r.gemm(1.0, a, a, 0.0, out, transb="T")
        np.testing.assert_allclose(out, a @ a.T, rtol=1e-12)
        assert r.last_profile().path.startswith("cluster")
    finally:
        r.shutdown()
    assert r.closed
    assert not _wait_gone(pids), "the runtime's own local cluster left worker processes behind"
    with pytest.raises(RuntimeError, match="shut down"):
        r.gemm(1.0, a, a, 0.0, out, transb="T")


def test_security_dict_becomes_dask_security(tmp_path):
    from distributed.security import Security

    sec = ClusterRuntime._security({"require_encryption": True})
    assert isinstance(sec, Security) and sec.require_encryption


def test_losing_every_worker_raises_instead_of_hanging():
    from distributed import Client

    cl = local_cluster(n_workers=1, threads_per_worker=1)
    client = Client(cl, set_as_default=False)
    r = tileblas.Runtime(devices=client, tile_size=256, worker_wait_s=1.0)
    pids = list(client.run(os.getpid).values())
    try:
        rng = np.random.default_rng(7)
        a = _rand(rng, (1536, 1536))
        start = r.stats()["cluster"]["tasks"]

        def killer():
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and r.stats()["cluster"]["tasks"] - start < 3:
                time.sleep(0.002)
            cl.scale(0)  # the cluster's only worker goes away for good

        th = threading.Thread(target=killer)
        th.start()
        out = np.zeros((1536, 1536), order="F")
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="no Dask worker"):
            r.gemm(1.0, a, a, 0.0, out)
        th.join()
        assert time.monotonic() - t0 < 30
    finally:
        r.shutdown()
        client.close()
        cl.close()
    assert not _wait_gone(pids)


# --------------------------------------------------------------------------------------------- demo
def test_demo_section_skips_cleanly_without_distributed():
    code = ("import sys; sys.modules['distributed'] = None\n"
            "from tileblas.cli._demo_cluster import section\nsection(print)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "skipped: needs dask and distributed" in r.stdout


@pytest.mark.slow
def test_demo_section_runs_on_a_local_cluster():
    lines = []
    from tileblas.cli._demo_cluster import section

    section(lines.append)
    text = "\n".join(lines)
    assert "result matches NumPy" in text and "the same call again: 0 bytes sent" in text, text
    assert "dask.array matmul" in text and "cluster shut down" in text


def test_dropped_runtime_closes_the_cluster_it_made():
    import gc

    r = tileblas.Runtime(devices="dask:1", tile_size=64)
    rng = np.random.default_rng(11)
    a = _rand(rng, (128, 128))
    c = np.zeros((128, 128), order="F")
    r.gemm(1.0, a, a, 0.0, c)
    assert np.all(np.abs(c - a @ a) <= 8 * 128 * np.finfo(float).eps * (np.abs(a) @ np.abs(a)))
    pids = list(r.client.run(os.getpid).values())
    assert pids
    del r
    gc.collect()
    assert not _wait_gone(pids), "a dropped Runtime('dask:1') left its worker processes running"
