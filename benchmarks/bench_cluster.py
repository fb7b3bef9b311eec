"""DGEMM on a local Dask cluster: tileblas' cluster runtime against dask.array's matmul.

Both run on the same LocalCluster (worker processes on loopback, one thread each, single-threaded BLAS)
with the same chunking (tileblas tile = dask.array chunk), interleaved, best of ``--trials``:

* ``client->client``: the operands start as NumPy arrays on the client and the product ends there.
  tileblas: ``rt.gemm(1, a, b, 0, c)`` with its store of resident tiles emptied first, so A and B are
  sent again; dask: ``(da.from_array(a, chunks) @ da.from_array(b, chunks)).compute()``.
* ``resident``: the operands already live on the workers and the product stays there.  tileblas:
  ``rt.gemm`` on DistributedMatrix handles (``rt.scatter``); dask: matmul of persisted arrays, persisted.

For each run the bytes the workers fetched from each other are read from Dask's own per-worker transfer
logs (the log length is raised for the run so that none is dropped); bytes sent from the client and
gathered back are reported for tileblas from its runtime counters.  Both results are checked against
NumPy's product.

Usage::

    flock -x /tmp/tileblas.lock python benchmarks/bench_cluster.py [--n 8192] [--chunk 2048] [--trials 2]
        [--workers 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from tileblas.runtime.cluster import clear_transfer_logs

__all__ = ["main", "run"]


def _blas_threads() -> Any:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        import os

        return os.environ.get("OPENBLAS_NUM_THREADS", "?")
    return [(i.get("internal_api"), i.get("num_threads")) for i in threadpool_info()]


def _rel_err(x: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def run(n: int, chunk: int, trials: int, workers: int, modes: tuple[str, ...] = ("client", "resident"),
        log: Any = print) -> dict[str, Any]:
    import dask
    import dask.array as da
    from distributed import Client, wait

    import tileblas
    from tileblas.runtime.cluster import local_cluster

    dask.config.set({"distributed.admin.low-level-log-length": 1_000_000})
    import warnings

    warnings.filterwarnings("ignore", message="Sending large graph")  # dask.array embeds the chunks: expected
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((n, n)))
    b = np.asfortranarray(rng.standard_normal((n, n)))
    t = time.perf_counter()
    ref = a @ b
    log(f"reference numpy product on the client: {time.perf_counter() - t:.1f} s")
    flops = 2.0 * n ** 3
    results: dict[str, Any] = {"n": n, "chunk": chunk, "workers": workers, "trials": trials, "runs": []}
    cluster = local_cluster(workers, 1)
    client = Client(cluster)  # the default client: dask.array runs on it
    try:
        rt = tileblas.Runtime(devices=client, tile_size=chunk)
        results["worker_blas_threads"] = client.run(_blas_threads)
        log(f"BLAS threads on the workers: {results['worker_blas_threads']}")
        handles = None

        def tb_client() -> tuple[float, np.ndarray, dict]:
            rt.clear_cache()
            clear_transfer_logs(client)
            s0 = rt.stats()["cluster"]
            c = np.empty((n, n), order="F")
            t0 = time.perf_counter()
            rt.gemm(1.0, a, b, 0.0, c)
            dt = time.perf_counter() - t0
            s1 = rt.stats()["cluster"]
            return dt, c, {"peer_bytes": rt.transfer_stats()["peer_bytes"],
                           "client_to_workers": s1["bytes_sent"] - s0["bytes_sent"],
                           "workers_to_client": s1["bytes_gathered"] - s0["bytes_gathered"]}

        def da_client() -> tuple[float, np.ndarray, dict]:
            clear_transfer_logs(client)
            A = da.from_array(a, chunks=chunk)
            B = da.from_array(b, chunks=chunk)
            t0 = time.perf_counter()
            c = client.compute(A @ B).result()
            dt = time.perf_counter() - t0
            return dt, c, {"peer_bytes": rt.transfer_stats()["peer_bytes"]}

        def tb_resident() -> tuple[float, Any, dict]:
            nonlocal handles
            if handles is None:
                handles = (rt.scatter(a), rt.scatter(b))
            C = rt.zeros((n, n), np.float64)
            clear_transfer_logs(client)
            t0 = time.perf_counter()
            rt.gemm(1.0, handles[0], handles[1], 0.0, C)
            dt = time.perf_counter() - t0
            return dt, C, {"peer_bytes": rt.transfer_stats()["peer_bytes"]}

        dres: dict[str, Any] = {}

        def da_resident() -> tuple[float, Any, dict]:
            if "A" not in dres:
                dres["A"] = client.persist(da.from_array(a, chunks=chunk))
                dres["B"] = client.persist(da.from_array(b, chunks=chunk))
                wait([dres["A"], dres["B"]])
            clear_transfer_logs(client)
            t0 = time.perf_counter()
            C = client.persist(dres["A"] @ dres["B"])
            wait(C)
            dt = time.perf_counter() - t0
            return dt, C, {"peer_bytes": rt.transfer_stats()["peer_bytes"]}

        cases = []
        if "client" in modes:
            cases += [("tileblas", "client->client", tb_client), ("dask.array", "client->client", da_client)]
        if "resident" in modes:
            cases += [("tileblas", "resident", tb_resident), ("dask.array", "resident", da_resident)]
        for trial in range(trials):
            for lib, mode, fn in cases:
                dt, out, info = fn()
                arr = out if isinstance(out, np.ndarray) else (out.gather() if lib == "tileblas"
                                                               else out.compute())
                err = _rel_err(arr, ref)
                del arr, out
                row = {"trial": trial, "lib": lib, "mode": mode, "seconds": dt, "gflops": flops / dt / 1e9,
                       "rel_err": err, **info}
                results["runs"].append(row)
                log(f"trial {trial} {lib:10s} {mode:15s} {dt:7.2f} s {flops / dt / 1e9:6.1f} GFLOP/s "
                    f"rel.err {err:.1e} peer bytes {info['peer_bytes'] / 2**20:8.1f} MiB"
                    + (f" sent {info['client_to_workers'] / 2**20:.1f} MiB back "
                       f"{info['workers_to_client'] / 2**20:.1f} MiB" if "client_to_workers" in info else ""))
        summary = {}
        for mode in {r["mode"] for r in results["runs"]}:
            best = {lib: min(r["seconds"] for r in results["runs"] if r["lib"] == lib and r["mode"] == mode)
                    for lib in ("tileblas", "dask.array")}
            peer = {lib: min(r["peer_bytes"] for r in results["runs"] if r["lib"] == lib and r["mode"] == mode)
                    for lib in ("tileblas", "dask.array")}
            summary[mode] = {"best_s": best, "peer_bytes": peer,
                             "ratio_tileblas_over_dask_throughput": best["dask.array"] / best["tileblas"]}
            log(f"{mode}: best tileblas {best['tileblas']:.2f} s, dask.array {best['dask.array']:.2f} s, "
                f"throughput ratio {best['dask.array'] / best['tileblas']:.2f}x; peer bytes tileblas "
                f"{peer['tileblas'] / 2**20:.0f} MiB, dask.array {peer['dask.array'] / 2**20:.0f} MiB")
        results["summary"] = summary
        rt.shutdown()
    finally:
        client.close()
        cluster.close()
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--chunk", type=int, default=2048, help="tile size = dask.array chunk size")
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--modes", default="client,resident", help="comma-separated: client, resident")
    p.add_argument("--json", action="store_true", help="print the results as JSON at the end")
    ns = p.parse_args(argv)
    for name in ("n", "chunk", "trials", "workers"):
        if getattr(ns, name) < 1:
            p.error(f"--{name} must be >= 1; got {getattr(ns, name)}")
    modes = tuple(m.strip() for m in ns.modes.split(",") if m.strip())
    bad = [m for m in modes if m not in ("client", "resident")]
    if bad or not modes:
        p.error(f"--modes must name client and/or resident; got {ns.modes!r}")
    res = run(ns.n, ns.chunk, ns.trials, ns.workers, modes)
    if ns.json:
        print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
