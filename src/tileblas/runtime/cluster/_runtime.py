"""ClusterRuntime: the Runtime whose devices are the workers of a Dask cluster.

What it must not touch: placement (:mod:`._executor`), the tile store (:mod:`._store`).
"""

from __future__ import annotations


import threading
import time
import weakref
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from tileblas._tuning import get_tuning
from tileblas.runtime import _planner as P
from tileblas.runtime._runtime import Runtime
from tileblas.runtime.cluster._executor import _CallExecutor, _Lost, _is_loss
from tileblas.runtime.cluster._spec import _distributed, cluster_tile_size, local_cluster, worker_incoming_bytes
from tileblas.runtime.cluster._store import DistributedMatrix, _Ref, _TileStore, _tile_key
__all__ = ["ClusterRuntime"]

def _close_all(owned: list) -> None:
    """Close the clients and clusters a runtime made (best effort: this also runs at interpreter exit)."""
    for obj in owned:
        try:
            obj.close()
        except Exception:  # pragma: no cover - best effort at shutdown
            pass
    owned.clear()


class ClusterRuntime(Runtime):
    """A Runtime whose devices are the workers of a Dask cluster (see the module notes).

    Parameters
    ----------
    devices : distributed.Client, cluster, str
        A connected ``distributed.Client`` (used as is, not closed by :meth:`shutdown`), a cluster object
        (``LocalCluster`` ...; a client is made for it), a scheduler address (``"tcp://host:8786"``,
        ``"tls://host:8786"``), or ``"dask"`` / ``"dask:N"``: a new local cluster of N (default 2)
        single-threaded worker processes on loopback, shut down with the runtime.
    tile_size : int, optional
        Tile size for every call; default per call, :func:`cluster_tile_size` (coarse tiles).
    reservation_slots : int
        Tasks each worker may have in flight (its reservation station); default 2 per worker thread.
    sync, deterministic : bool
        As for :class:`~tileblas.runtime.Runtime` (``sync`` waits for each task before the next).
    small_flops : float, optional
        Calls below this many flops run as one native call on the client (the host), as on one machine,
        when none of their operands is a :class:`DistributedMatrix`.
    security : distributed.security.Security, dict or bool, optional
        Dask's TLS settings, passed to ``distributed.Client`` when this runtime makes the client (an
        address or a cluster object).  A dict is given to ``Security(**dict)``, e.g.
        ``{"tls_ca_file": "ca.pem", "tls_client_cert": "cert.pem", "tls_client_key": "key.pem",
        "require_encryption": True}`` with a ``"tls://..."`` address; ``True`` makes a temporary
        self-signed ``Security.temporary()`` (for ``"dask"`` local clusters, whose workers then speak TLS
        too).  A client you pass already carries its security.  Without TLS, connecting to an address
        that is not loopback warns: Dask's TCP comms are neither encrypted nor authenticated.
    cache_bytes : int, optional
        Budget of the content-addressed store of resident tiles (default: half the workers' memory
        limits, or 4 GiB when they state none).
    worker_wait_s : float
        A call with no worker left waits this long for one to join, then raises RuntimeError.
    client_kwargs : dict, optional
        Extra keyword arguments for ``distributed.Client`` when this runtime makes it.
    progress : bool
        As for :class:`~tileblas.runtime.Runtime`, accepted so that a call written for one runs here; a
        cluster's calls show no bar of their own (Dask's dashboard shows their tasks).

    Notes
    -----
    Every worker needs tileblas (``pip install tileblas[distributed]``) importable: tile tasks run
    :func:`tileblas.devices.dask.run_tile_task` there.
    """

    def __init__(self, devices: Any, *, tile_size: int | None = None, reservation_slots: int | None = None,
                 sync: bool = False, deterministic: bool = False, small_flops: float | None = None,
                 security: Any = None, cache_bytes: int | None = None, worker_wait_s: float = 60.0,
                 client_kwargs: dict | None = None, progress: bool = False) -> None:
        P.check_tile_size(tile_size)
        if reservation_slots is not None and (isinstance(reservation_slots, bool)
                                              or not isinstance(reservation_slots, (int, np.integer))
                                              or reservation_slots < 1):
            raise ValueError(f"reservation_slots must be a positive int or None; got {reservation_slots!r}")
        if cache_bytes is not None and (isinstance(cache_bytes, bool) or not isinstance(cache_bytes, (int, np.integer))
                                        or cache_bytes < 0):
            raise ValueError(f"cache_bytes must be a non-negative int or None; got {cache_bytes!r}")
        if not isinstance(worker_wait_s, (int, float)) or isinstance(worker_wait_s, bool) or worker_wait_s < 0:
            raise ValueError(f"worker_wait_s must be a non-negative number; got {worker_wait_s!r}")
        self._owned: list = []
        # a dropped runtime closes the client and cluster it made (the list is shared with the finalizer,
        # which must not hold the runtime itself)
        self._finalizer = weakref.finalize(self, _close_all, self._owned)
        self._client = self._connect(devices, security, dict(client_kwargs or {}))
        from tileblas.devices.dask import DaskWorkerDevice, worker_info  # noqa: F401

        self._worker_info = worker_info
        self._DeviceCls = DaskWorkerDevice
        self._devices: list = []
        self._by_addr: dict[str, int] = {}
        self._totals: list[dict] = []
        self.tile_size = None if tile_size is None else int(tile_size)
        self.reservation_slots = None if reservation_slots is None else int(reservation_slots)
        self.sync = bool(sync)
        self.deterministic = bool(deterministic)
        self.progress = bool(progress)
        self._small_flops = None if small_flops is None else float(small_flops)
        self.worker_wait_s = float(worker_wait_s)
        self._epoch = time.perf_counter()
        self._lock = threading.Lock()
        self._call_lock = threading.RLock()
        self._history: deque = deque(maxlen=256)
        self._last = None
        self._local = threading.local()
        self._tokens: list = []
        self._calls = 0
        self._failed = 0
        self._closed = False
        self._memory = None  # no host-side tile memory: tiles live on the workers (Runtime.memory is None)
        self._sched = None
        self._counts = dict(tiles_sent=0, bytes_sent=0, tiles_gathered=0, bytes_gathered=0, store_hits=0,
                            resubmitted=0, recoveries=0, tasks=0)
        self._workers_seen: tuple[float, list] = (0.0, [])
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tileblas-digest")
        self._refresh_workers(wait=True)
        if cache_bytes is None:
            lim = sum(d.memory_limit for d in self._devices)
            cache_bytes = lim // 2 if lim else 4 << 30
        self._store = _TileStore(int(cache_bytes))

    # ----------------------------------------------------------------- connection
    def _connect(self, spec: Any, security: Any, client_kwargs: dict) -> Any:
        Client = _distributed().Client

        if isinstance(spec, Client):
            return spec
        sec = self._security(security)
        if sec is not None:
            client_kwargs["security"] = sec
        if isinstance(spec, str):
            s = spec.strip()
            if s == "dask" or s.startswith("dask:"):
                count = s.partition(":")[2] or "2"
                try:
                    nw = int(count)
                except ValueError:
                    raise ValueError(f"devices must look like 'dask' or 'dask:2'; got {spec!r}") from None
                if nw < 1:
                    raise ValueError(f"devices 'dask:N' needs N >= 1; got {spec!r}")
                lkw = {"security": sec} if sec is not None else {}
                cluster = local_cluster(nw, 1, **lkw)
                self._owned.append(cluster)
                client = Client(cluster, set_as_default=False, **client_kwargs)
                self._owned.insert(0, client)
                return client
            host = s.split("://", 1)[1].rsplit(":", 1)[0].strip("[]")
            if s.startswith("tcp://") and sec is None and host not in ("127.0.0.1", "localhost", "::1"):
                warnings.warn(f"connecting to the Dask scheduler at {s} without TLS: Dask's tcp:// comms are "
                              f"neither encrypted nor authenticated; pass security= with a tls:// address",
                              UserWarning, stacklevel=4)
            client = Client(s, set_as_default=False, **client_kwargs)
            self._owned.insert(0, client)
            return client
        if hasattr(spec, "scheduler_address"):
            client = Client(spec, set_as_default=False, **client_kwargs)
            self._owned.insert(0, client)
            return client
        raise TypeError(f"devices must be a distributed.Client, a Dask cluster or a scheduler address; "
                        f"got {type(spec).__name__}")

    @staticmethod
    def _security(security: Any) -> Any:
        if security is None or security is False:
            return None
        from distributed.security import Security

        if security is True:
            return Security.temporary()
        if isinstance(security, Security):
            return security
        if isinstance(security, dict):
            return Security(**security)
        raise TypeError(f"security must be a distributed.security.Security, a dict of its arguments, True or "
                        f"None; got {type(security).__name__}")

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` this runtime talks through."""
        return self._client

    # ----------------------------------------------------------------- devices
    def _refresh_workers(self, wait: bool = False, max_age: float = 0.0) -> list[str]:
        """Addresses of the live workers; new workers become devices, gone ones are marked dead.  Asking
        costs a round trip to the scheduler: with ``max_age`` an answer that recent is reused."""
        cached = self._workers_seen
        if max_age and cached[1] and time.monotonic() - cached[0] < max_age:
            return cached[1]
        deadline = time.monotonic() + (self.worker_wait_s if wait else 0.0)
        while True:
            info = self._worker_info(self._client)
            if info or not wait:
                break
            if time.monotonic() >= deadline:
                raise RuntimeError(f"no Dask worker in the cluster after waiting {self.worker_wait_s:g} s")
            time.sleep(0.1)
        with self._lock:
            for addr, w in info.items():
                if addr not in self._by_addr:
                    dev = self._DeviceCls(self._client, addr, w["nthreads"], w["memory_limit"], len(self._devices))
                    self._by_addr[addr] = len(self._devices)
                    self._devices.append(dev)
                    self._totals.append(dict(tasks=0, stolen=0, busy_s=0.0, overhead_s=0.0, bytes_moved=0,
                                             flops=0.0))
            for d in self._devices:
                d.alive = d.address in info
        alive = [a for a in info]
        self._workers_seen = (time.monotonic(), alive)
        return alive

    @property
    def devices(self) -> list:
        """Every worker seen so far, as DaskWorkerDevice (``alive`` tells which are still there)."""
        return list(self._devices)

    @property
    def workers(self) -> list[str]:
        """Addresses of the workers alive now."""
        return self._refresh_workers()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"<ClusterRuntime {self._client.scheduler.address if self._client.scheduler else '?'} "
                f"workers={len([d for d in self._devices if d.alive])} tile_size={self.tile_size}"
                f"{' closed' if self._closed else ''}>")

    def shutdown(self) -> None:
        """Release the resident tiles; close the client and cluster this runtime made.  Later calls raise
        RuntimeError.  A client that was passed in stays open."""
        if self._closed:
            return
        self._closed = True
        self._store.clear()
        self._pool.shutdown(wait=True)
        self._finalizer()  # closes what this runtime made, once

    close = shutdown

    def clear_cache(self) -> None:
        """Forget every resident tile of the content-addressed store (the workers free them)."""
        self._store.clear()

    def _devices_for_partition(self) -> int:
        return get_tuning().deterministic_devices if self.deterministic else max(1, sum(d.alive for d in self._devices))

    def tile_size_for(self, name: str, m: int, n: int, k: int) -> int:
        if self.tile_size is not None:
            return self.tile_size
        return cluster_tile_size(name, m, n, k, self._devices_for_partition())

    # ----------------------------------------------------------------- handles
    def scatter(self, array: Any, tile_size: int | None = None, keep_host: bool = True) -> DistributedMatrix:
        """Send a 2-D host array to the workers as a :class:`DistributedMatrix`.

        Tiles are spread in blocks of tile rows (worker ``i * workers // tile_rows`` holds tile row i), so
        that a task computing an output tile finds a whole tile row of a left operand on one worker; tiles
        already resident with the same contents are not sent again."""
        self._check_open()
        a = np.asarray(array)
        if a.ndim != 2:
            raise ValueError(f"array must be 2-D; got shape {a.shape}")
        if a.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
            raise TypeError(f"array must have dtype float32, float64, complex64 or complex128; got {a.dtype}")
        t = self._handle_tile(a.shape, tile_size)
        mt, nt = -(-a.shape[0] // t), -(-a.shape[1] // t)
        workers = self._refresh_workers(wait=True)
        refs: dict = {}
        with self._call_lock:
            keys = {}
            for i in range(mt):
                for j in range(nt):
                    keys[(i, j)] = self._pool.submit(_tile_key, a[i * t:(i + 1) * t, j * t:(j + 1) * t])
            todo: dict[str, list] = {}
            for ij, fk in keys.items():
                key = fk.result()
                hit = self._store.get(key)
                src = (a if keep_host else None, ij[0], ij[1], key)
                if hit is not None:
                    self._counts["store_hits"] += 1
                    refs[ij] = _Ref(hit.future, hit.worker, hit.nbytes, root=src)
                else:
                    r = _Ref(None, None, 0, root=src)
                    refs[ij] = r
                    todo.setdefault(workers[ij[0] * len(workers) // mt], []).append((r, a[ij[0] * t:(ij[0] + 1) * t,
                                                                                ij[1] * t:(ij[1] + 1) * t]))
            for w, items in todo.items():
                self._send([r for r, _ in items], [v for _, v in items], w)
        return DistributedMatrix(self, a.shape, a.dtype, t, refs, a if keep_host else None)

    def zeros(self, shape: tuple[int, int], dtype: Any = np.float64, tile_size: int | None = None) -> DistributedMatrix:
        """A :class:`DistributedMatrix` of zeros, made on the workers (nothing is sent)."""
        self._check_open()
        if not (isinstance(shape, tuple) and len(shape) == 2 and all(isinstance(s, (int, np.integer)) and s >= 0
                                                                      for s in shape)):
            raise ValueError(f"shape must be a tuple of two non-negative ints; got {shape!r}")
        dt = np.dtype(dtype)
        if dt not in (np.float32, np.float64, np.complex64, np.complex128):
            raise TypeError(f"dtype must be float32, float64, complex64 or complex128; got {dt}")
        t = self._handle_tile(shape, tile_size)
        return DistributedMatrix(self, shape, dt, t, {})

    def _handle_tile(self, shape: tuple, tile_size: int | None) -> int:
        if tile_size is not None:
            return P.check_tile_size(tile_size)
        m, n = int(shape[0]), int(shape[1])
        return self.tile_size_for("gemm", m, n, max(m, n))

    def _gather_handle(self, h: DistributedMatrix) -> np.ndarray:
        self._check_open()
        out = np.zeros(h.shape, h.dtype, order="F")
        with self._call_lock:
            for _ in range(20):
                items = list(h._tiles.items())
                try:
                    self._gather_into(out, h.tile, [(ij, r) for ij, r in items])
                    return out
                except _Lost:
                    self._refresh_workers(wait=True)
                    for ij, r in items:
                        if r.future is None or r.future.status in ("cancelled", "lost"):
                            self._resend_root(r, h, ij)
        raise RuntimeError("tiles of a DistributedMatrix kept being lost while gathering it")

    def _resend_root(self, r: _Ref, h: DistributedMatrix | None, ij: tuple) -> None:
        if r.root is None or r.root[0] is None:
            raise RuntimeError(f"tile {ij} of {h!r} was lost with a worker and has no host copy to send again")
        src, i, j, _ = r.root
        t = h.tile if h is not None else 0
        workers = self._refresh_workers(wait=True)
        self._send([r], [src[i * t:(i + 1) * t, j * t:(j + 1) * t]], workers[0])

    # ----------------------------------------------------------------- moving tiles
    def _send(self, refs: list[_Ref], views: list[np.ndarray], worker: str) -> str:
        """Scatter host tiles to one worker (one Dask scatter for the batch); when that worker has gone,
        to another one.  Returns the worker that got them."""
        data = [np.asfortranarray(v) if not v.flags.f_contiguous else v for v in views]
        data = [d.copy(order="F") if any(d is v for v in views) else d for d in data]
        for attempt in range(6):
            try:
                futs = self._client.scatter(data, workers=[worker], hash=False, direct=False)
                break
            except Exception:
                if attempt == 5:
                    raise
                time.sleep(0.05 * (attempt + 1))
                alive = self._refresh_workers(wait=True)
                others = [w for w in alive if w != worker]
                worker = others[attempt % len(others)] if others else alive[0]
        for r, f, d in zip(refs, futs, data):
            r.future, r.worker, r.nbytes = f, worker, d.nbytes
        nb = sum(d.nbytes for d in data)
        self._counts["tiles_sent"] += len(data)
        self._counts["bytes_sent"] += nb
        idx = self._by_addr.get(worker)
        if idx is not None:
            self._devices[idx].stats.add(bytes_h2d=nb)
        return worker

    def _gather_into(self, out: np.ndarray, t: int, items: list) -> list:
        """Fetch tiles ((i, j), _Ref) into ``out``; raises _Lost when one is gone."""
        futs = [r.future for _, r in items]
        if any(f is None for f in futs):
            raise _Lost()
        try:
            vals = self._client.gather(futs, errors="raise")
        except Exception as exc:
            if _is_loss(exc) or any(f.status in ("cancelled", "lost") for f in futs):
                raise _Lost() from exc
            raise
        nb = 0
        for ((i, j), _), v in zip(items, vals):
            out[i * t:i * t + v.shape[0], j * t:j * t + v.shape[1]] = v
            nb += v.nbytes
        self._counts["tiles_gathered"] += len(items)
        self._counts["bytes_gathered"] += nb
        return vals

    # ----------------------------------------------------------------- the pipeline
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Runtime has been shut down")

    def run(self, name: str, *args: Any, tile_size: int | None = None, **kwargs: Any) -> None:
        """Compute Level-3 routine ``name`` in place on the cluster (see :meth:`Runtime.run`).  Operands may
        be NumPy arrays (the client's memory) or :class:`DistributedMatrix` handles (the workers')."""
        self._check_open()
        P.check_tile_size(tile_size)
        handles: dict[int, DistributedMatrix] = {}
        args = tuple(self._standin(x, handles) for x in args)
        kwargs = {k: self._standin(v, handles) for k, v in kwargs.items()}
        if handles:
            tiles = {h.tile for h in handles.values()}
            if len(tiles) > 1:
                raise ValueError(f"DistributedMatrix operands must have the same tile size; got {sorted(tiles)}")
            if tile_size is not None and tile_size not in tiles:
                raise ValueError(f"tile_size must be {tiles.pop()} (the operands' tile size); got {tile_size}")
        bound = P.check_call(name, args, kwargs)
        shape, out, flops = P.call_size(name, bound)
        m, n, k = shape
        if m == 0 or n == 0:
            now = time.perf_counter()
            self._record(name, shape, out.dtype, 0, "trivial", flops, [], now, now)
            return
        with self._call_lock:
            if handles and P.is_trivial(name, bound):
                return self._trivial_with_handles(name, bound, handles, shape, flops)
            if P.is_trivial(name, bound):
                return self._host_call(name, bound, shape, flops, "trivial")
            if handles:
                tile = next(iter(handles.values())).tile
            else:
                explicit = tile_size if tile_size is not None else self.tile_size
                tile = int(explicit) if explicit is not None else self.tile_size_for(name, m, n, k)
                tile = P.bounded_tile(m, n, k, tile)
                if (explicit is None and flops < self.small_flops) or max(m, n, k) <= min(tile, 256):
                    return self._host_call(name, bound, shape, flops, "small")
                P.check_tile_calls(name, m, n, k, tile)
                if P.alpha_may_overflow(name, bound):  # one native call: no NaN from inf - inf between tiles
                    return self._host_call(name, bound, shape, flops, "small")
            plan = P.plan_call(name, bound, tile, 0 if self._devices_for_partition() <= 1
                               else 2 * self._devices_for_partition())
            ex = _CallExecutor(self, plan, handles)
            t0 = time.perf_counter()
            try:
                ex.execute()
            except BaseException:
                self._record(name, shape, out.dtype, tile, "cluster", flops, ex.records, t0, time.perf_counter(),
                             failed=True)
                raise
            self._record(name, shape, out.dtype, tile, "cluster" if plan.split == 1 else "cluster split-k", flops,
                         ex.records, t0, time.perf_counter())

    def _standin(self, x: Any, handles: dict) -> Any:
        """A DistributedMatrix becomes a zero-stride array of its shape and dtype that the planner can
        check and partition; the executor maps it back to the handle."""
        if not isinstance(x, DistributedMatrix):
            return x
        if x.runtime is not self:
            raise ValueError(f"{x!r} belongs to another runtime")
        if x._standin is None:
            x._standin = np.lib.stride_tricks.as_strided(np.zeros(1, x.dtype), shape=x.shape, strides=(0, 0))
        handles[id(x._standin)] = x
        return x._standin

    def _host_call(self, name: str, bound: dict, shape: tuple, flops: float, path: str) -> None:
        """One native call on the client (the host), for trivial and small calls on NumPy arrays."""
        from tileblas.kernels import _openblas

        params, flags = P.ROUTINES[name]
        t0 = time.perf_counter()
        ok = False
        try:
            getattr(_openblas, name)(*[bound[p] for p in params], **{f: bound[f] for f in flags})
            ok = True
        finally:
            out = bound["c"] if "c" in bound else bound["b"]
            self._record(name, shape, out.dtype, max(shape), path, flops, [], t0, time.perf_counter(),
                         failed=not ok)

    def _trivial_with_handles(self, name: str, bound: dict, handles: dict, shape: tuple, flops: float) -> None:
        """alpha == 0 or k == 0 with handles: bring the operands to the host, compute, send the result."""
        host = {p: (handles[id(bound[p])].gather() if id(bound[p]) in handles else bound[p])
                for p in ("a", "b", "c") if p in bound}
        outp = "c" if "c" in bound else "b"
        self._host_call(name, dict(bound, **host), shape, flops, "trivial")
        if id(bound[outp]) in handles:
            h = handles[id(bound[outp])]
            new = self.scatter(host[outp], tile_size=h.tile)
            h._tiles, h._host = new._tiles, new._host

    # ----------------------------------------------------------------- accounting
    def stats(self) -> dict[str, Any]:
        """As :meth:`Runtime.stats`, plus ``"cluster"``: tiles and bytes sent to the workers and gathered
        back, store hits (tiles found resident), resubmitted tasks and recoveries, resident store bytes."""
        with self._lock:
            s: dict[str, Any] = {
                "calls": self._calls,
                "failed_calls": self._failed,
                "devices": {d.name: dict(t) for d, t in zip(self._devices, self._totals)},
            }
            c = dict(self._counts)
        c["resident_tiles"] = len(self._store)
        c["resident_bytes"] = self._store.bytes
        s["cluster"] = c
        return s

    def transfer_stats(self) -> dict[str, int]:
        """Bytes the workers fetched from each other (see :func:`worker_incoming_bytes`), summed over the
        workers and per worker."""
        res = worker_incoming_bytes(self._client)
        return {"peer_bytes": sum(res.values()), **{f"peer_bytes[{k}]": v for k, v in res.items()}}


