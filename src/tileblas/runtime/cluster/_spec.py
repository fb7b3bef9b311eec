"""Cluster specs and tile sizes: what counts as a Dask cluster, a local one for tests and demos, the
default tile size on a cluster, and the workers' transfer logs.

What it must not touch: Dask itself at import time (it is imported on first use).
"""

from __future__ import annotations


from typing import Any

from tileblas._tuning import Tuning, get_tuning
__all__ = ["is_cluster_spec", "local_cluster", "cluster_tile_size", "worker_incoming_bytes",
           "clear_transfer_logs", "CLUSTER_TILE_CANDIDATES"]

#: Shipped default of the tile sizes on a cluster (the value in force:
#: ``tileblas.get_tuning().cluster_tile_candidates``): a remote task costs about a millisecond of scheduling
#: and communication, so tiles are coarser than on one machine.
CLUSTER_TILE_CANDIDATES = Tuning().cluster_tile_candidates
#: Wanted output tiles per worker before a larger tile is taken (load balance; dependency chains of
#: in-place TRSM/TRMM want more).
_TILES_PER_WORKER = 4
_POLL_S = 0.5
_SCHEMES = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")


def _distributed() -> Any:
    """The ``distributed`` package, or ImportError saying how to install it."""
    try:
        import distributed
    except ImportError as exc:
        raise ImportError("running tileblas on a Dask cluster needs dask and distributed: "
                          "pip install 'tileblas[distributed]'") from exc
    return distributed


def is_cluster_spec(spec: Any) -> bool:
    """True when a Runtime ``devices=`` argument names a Dask cluster: a ``distributed.Client``, a
    cluster object with a ``scheduler_address`` (LocalCluster, ...), a scheduler address such as
    ``"tcp://10.0.0.5:8786"`` or ``"tls://..."``, or ``"dask"`` / ``"dask:N"`` (a new N-worker local
    cluster on loopback).  Never imports Dask."""
    if isinstance(spec, str):
        s = spec.strip()
        return s.startswith(_SCHEMES) or s == "dask" or s.startswith("dask:")
    mod = (type(spec).__module__ or "").split(".")[0]
    return mod in ("distributed", "dask_jobqueue", "dask_kubernetes") or hasattr(spec, "scheduler_address")


def local_cluster(n_workers: int = 2, threads_per_worker: int = 1, **kwargs: Any) -> Any:
    """A ``distributed.LocalCluster`` of worker *processes* listening on loopback only (127.0.0.1; the
    scheduler's HTTP endpoints too, on a free port).  Extra keyword arguments go to LocalCluster
    (``memory_limit=``, ``security=``...)."""
    LocalCluster = _distributed().LocalCluster
    kw: dict[str, Any] = dict(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                              host="127.0.0.1", dashboard_address="127.0.0.1:0")
    kw.update(kwargs)
    return LocalCluster(**kw)


def cluster_tile_size(name: str, m: int, n: int, k: int, workers: int) -> int:
    """Default tile size of a call on ``workers`` Dask workers: the largest candidate that still gives
    every worker :data:`_TILES_PER_WORKER` output tiles (twice that for in-place TRMM/TRSM chains)."""
    per = _TILES_PER_WORKER * (2 if name in ("trmm", "trsm") else 1)
    want = per * max(1, workers)
    candidates = get_tuning().cluster_tile_candidates
    best = candidates[0]
    for t in candidates:
        tiles = -(-m // t) * -(-n // t)
        if name in ("syrk", "herk", "syr2k", "her2k"):
            nt = -(-n // t)
            tiles = nt * (nt + 1) // 2
        if tiles >= want:
            best = t
    return best


def worker_incoming_bytes(client: Any) -> dict[str, int]:
    """Bytes each worker of ``client``'s cluster fetched from the other workers, from Dask's per-worker
    incoming transfer logs (which keep the most recent ``distributed.admin.low-level-log-length``
    transfers); see :func:`clear_transfer_logs`."""
    def incoming(dask_worker: Any) -> int:
        return int(sum(e.get("total", 0) for e in dask_worker.transfer_incoming_log))

    return {k: int(v) for k, v in client.run(incoming).items()}


def clear_transfer_logs(client: Any) -> None:
    """Empty every worker's incoming transfer log, so :func:`worker_incoming_bytes` counts from now on."""
    def clear(dask_worker: Any) -> None:
        dask_worker.transfer_incoming_log.clear()

    client.run(clear)


