"""Demo section: the tile runtime on a Dask cluster (a 2-worker LocalCluster on loopback)."""

from __future__ import annotations

import time
import warnings
from typing import Callable

import numpy as np

__all__ = ["section"]


def section(out: Callable[[str], None]) -> None:
    out("== Beyond one machine: the tile runtime on a Dask cluster ==")
    try:
        import dask
        import dask.array as da
        from distributed import Client
    except ImportError as exc:
        out(f"skipped: needs dask and distributed (pip install 'tileblas[distributed]'); {exc}")
        return
    from tileblas.runtime import Runtime
    from tileblas.runtime.cluster import clear_transfer_logs, local_cluster

    n, chunk, trials = 2048, 1024, 2
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((n, n)))
    b = np.asfortranarray(rng.standard_normal((n, n)))
    ref = a @ b
    t0 = time.perf_counter()
    with dask.config.set({"distributed.admin.low-level-log-length": 100_000}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sending large graph")  # da.from_array embeds the chunks
        cluster = local_cluster(n_workers=2, threads_per_worker=1)
        client = Client(cluster, set_as_default=False)
        rt = None
        try:
            client.wait_for_workers(2, timeout=60)
            rt = Runtime(devices=client, tile_size=chunk)
            out(f"LocalCluster of 2 single-threaded worker processes on {client.scheduler.address} "
                f"(started in {time.perf_counter() - t0:.1f} s); devices: "
                + ", ".join(f"{d.name}={d.address}" for d in rt.devices))
            best = {"tileblas": float("inf"), "dask.array": float("inf")}
            moved: dict[str, dict[str, int]] = {}
            errs = {}
            for _ in range(trials):  # interleaved, best of `trials`; tileblas sends A and B again each time
                rt.clear_cache()
                clear_transfer_logs(client)
                s0 = rt.stats()["cluster"]
                c = np.empty((n, n), order="F")
                t = time.perf_counter()
                rt.gemm(1.0, a, b, 0.0, c)
                dt = time.perf_counter() - t
                s1 = rt.stats()["cluster"]
                if dt < best["tileblas"]:
                    best["tileblas"] = dt
                    moved["tileblas"] = {"peer": rt.transfer_stats()["peer_bytes"],
                                         "sent": s1["bytes_sent"] - s0["bytes_sent"],
                                         "back": s1["bytes_gathered"] - s0["bytes_gathered"]}
                errs["tileblas"] = float(np.abs(c - ref).max())
                clear_transfer_logs(client)
                A, B = da.from_array(a, chunks=chunk), da.from_array(b, chunks=chunk)
                t = time.perf_counter()
                d = client.compute(A @ B).result()
                dt = time.perf_counter() - t
                if dt < best["dask.array"]:
                    best["dask.array"] = dt
                    moved["dask.array"] = {"peer": rt.transfer_stats()["peer_bytes"]}
                errs["dask.array"] = float(np.abs(d - ref).max())
                del c, d
            mib = 2.0 ** 20
            gf = 2.0 * n ** 3 / 1e9
            out(f"dgemm n={n}, tile = chunk = {chunk}, client -> client, best of {trials} (interleaved):")
            out(f"  tileblas ClusterRuntime {best['tileblas']:.2f} s ({gf / best['tileblas']:.1f} GFLOP/s), "
                f"max |error| vs NumPy {errs['tileblas']:.1e}; worker<->worker "
                f"{moved['tileblas']['peer'] / mib:.0f} MiB, client->workers {moved['tileblas']['sent'] / mib:.0f}"
                f" MiB, workers->client {moved['tileblas']['back'] / mib:.0f} MiB")
            out(f"  dask.array matmul       {best['dask.array']:.2f} s ({gf / best['dask.array']:.1f} GFLOP/s), "
                f"max |error| vs NumPy {errs['dask.array']:.1e}; worker<->worker "
                f"{moved['dask.array']['peer'] / mib:.0f} MiB")
            out(f"  throughput ratio tileblas / dask.array: {best['dask.array'] / best['tileblas']:.2f}x "
                f"(at this size; `python benchmarks/bench_cluster.py` measures n=8192)")
            ok = errs["tileblas"] <= 1e-9 * np.abs(ref).max()
            s0 = rt.stats()["cluster"]
            c = np.empty((n, n), order="F")
            rt.gemm(1.0, a, b, 0.0, c)  # the same inputs again: their tiles are resident on the workers
            s1 = rt.stats()["cluster"]
            out(f"  the same call again: {s1['bytes_sent'] - s0['bytes_sent']} bytes sent from the client "
                f"({s1['store_hits'] - s0['store_hits']} resident tiles found); result "
                f"{'matches NumPy' if ok and np.allclose(c, ref) else 'DIFFERS FROM NUMPY'}")
            if not ok:
                raise AssertionError(f"cluster dgemm differs from NumPy by {errs['tileblas']:.1e}")
        finally:
            if rt is not None:
                rt.shutdown()
            client.close()
            cluster.close()
    out("cluster shut down; see `tileblas.Runtime(devices=client_or_address)` and benchmarks/bench_cluster.py")
