"""The tile runtime on a Dask cluster: each worker a device, tiles resident on workers as Dask futures.

``tileblas.Runtime(devices=client_or_address)`` returns a :class:`ClusterRuntime`.  Every Level-3 call
goes through the same planner as on one machine (check -> trivial -> small -> partition into one task per
output tile), and this module's *cluster executor* runs the planner's tasks on the workers.

What it owns
    * Placement (BLASX's demand-driven scheduling with locality priority, over Dask workers): each worker
      has a reservation station of ``reservation_slots`` tasks in flight; when a slot frees, the worker
      takes the ready task whose tiles it holds the most bytes of (ties: critical path first, then plan
      order).  A task is submitted to Dask with ``workers=[that worker]`` and ``allow_other_workers=True``
      so that Dask may still run it elsewhere when the worker goes away.
    * Tile residency (the levels of the tile cache, seen from the client): a tile the client sends is
      scattered once to the worker that first needs it, and kept there in a content-addressed store
      (SHA-256 of the tile's bytes, its shape and dtype) with an LRU byte budget.  A later call that passes
      an array with the same tile contents (the result of an earlier call, a copy of an input, the same
      input again) uses the resident tile and sends nothing; a changed tile has another digest and is sent
      again.  Output tiles of a call stay resident too (their digest is taken when they arrive).  Workers
      fetch tiles they lack from each other through Dask (the peer level); the client's memory is the
      host.  :class:`DistributedMatrix` handles keep a whole matrix on the workers between calls without
      bringing it back to the client at all.
    * Versioned tiles: tiles on workers are immutable; a task returns the new version of its output tile,
      and later tasks of the call bind to the version current when they are submitted (tasks are
      submitted in an order that respects the planner's dependencies, so read-after-write and
      write-after-read hazards of in-place TRSM/TRMM resolve themselves).
    * Recovery: when a worker dies, Dask reruns the tasks it was running and recomputes lost results
      from their lineage.  Tiles that were scattered from the client cannot be recomputed by Dask; the
      futures that needed them are cancelled, and the executor sends those tiles again (from the client's
      array, or a handle's host copy) and resubmits the cancelled tasks, in submission order, on the
      workers still alive.  Workers that join are used from the next placement decision on.
    * Accounting: tiles and bytes sent to the workers and brought back, store hits, tasks resubmitted.

What it must not touch
    Networking, serialisation and data movement between workers (Dask does all of it, with its own comms,
    security and serialisers; nothing is deserialised here outside Dask's mechanisms), and the shared
    scheduler of the host runtime (a cluster runtime has no local worker threads).

Calls on one ClusterRuntime are serialised (each call already spreads over the whole cluster).

The asynchronous API on a cluster
    ``policy="demand"`` (a ClusterRuntime as the current runtime): every Level-3 call is split into tile
    tasks over all workers by this module, with residency, peer fetches and recovery as above.
    ``policy="cost"`` with ``Executor(devices=[d for d in rt.devices if d.alive])``: one backend per
    worker; each call runs whole, as one Dask task, on the worker where it is estimated to finish first
    (:meth:`tileblas.devices.dask.DaskWorkerDevice.kernel`; each worker's measured round trip,
    ``call_latency_s``, is part of its estimates, so host backends and workers mix by estimate).  A handle's copy stays on its worker across
    calls; a handle needed on another worker moves through the client (the handles' residency model
    knows the host and devices, not peers), and a call whose worker dies fails with DeviceError instead
    of being recovered.  Level-1/2 calls need a host backend (add ``host_devices()`` to the list).
"""

from __future__ import annotations

import hashlib
import itertools
import queue
import threading
import time
import weakref
import uuid
import warnings
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from tileblas._tuning import Tuning, get_tuning
from tileblas.runtime import _planner as P
from tileblas.runtime._planner import Tile
from tileblas.runtime._runtime import Runtime

__all__ = ["ClusterRuntime", "DistributedMatrix", "is_cluster_spec", "local_cluster", "cluster_tile_size",
           "CLUSTER_TILE_CANDIDATES"]

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


# ---------------------------------------------------------------------------------------------------
# Tile references, the content-addressed store, distributed matrices
# ---------------------------------------------------------------------------------------------------


class _Ref:
    """One version of one tile: the future holding it (None until sent), where it was placed, its size,
    and how to get it again if lost (``root``: (source, i, j, digest key) for tiles that came from the
    client or a handle's host copy; ``task``: the task run that produced it)."""

    __slots__ = ("future", "worker", "nbytes", "root", "task", "zeros")

    def __init__(self, future: Any = None, worker: str | None = None, nbytes: int = 0, root: Any = None,
                 task: Any = None, zeros: bool = False) -> None:
        self.future = future
        self.worker = worker
        self.nbytes = nbytes
        self.root = root
        self.task = task
        self.zeros = zeros


class _TileStore:
    """Content-addressed resident tiles: digest key -> _Ref, least recently used first out."""

    def __init__(self, budget: int) -> None:
        self.budget = int(budget)
        self.bytes = 0
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> _Ref | None:
        with self._lock:
            r = self._d.get(key)
            if r is None:
                return None
            if r.future is None or r.future.status not in ("finished", "pending"):
                self._pop(key)
                return None
            self._d.move_to_end(key)
            return r

    def put(self, key: Any, ref: _Ref) -> None:
        with self._lock:
            if key in self._d:
                self._pop(key)
            self._d[key] = ref
            self.bytes += ref.nbytes
            while self.bytes > self.budget and len(self._d) > 1:
                self._pop(next(iter(self._d)))

    def _pop(self, key: Any) -> None:
        r = self._d.pop(key)
        self.bytes -= r.nbytes

    def discard(self, key: Any) -> None:
        with self._lock:
            if key in self._d:
                self._pop(key)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._d)


class DistributedMatrix:
    """A matrix whose tiles live on the workers of a cluster runtime (a Dask future per tile).

    Made by :meth:`ClusterRuntime.scatter` (from a host array), :meth:`ClusterRuntime.zeros`, or as the
    output of a call; passed to :meth:`ClusterRuntime.run` (and the routine methods ``rt.gemm(...)``) in
    place of a NumPy array, it is read and written on the workers and nothing goes through the client.
    :meth:`gather` (or ``numpy.asarray(dm)``) brings it back.

    A handle made from a host array keeps a reference to that array as its *recovery copy*: a tile that
    is lost with a worker before any call has rewritten it is sent again from it (so do not modify the
    array while the handle lives; pass ``keep_host=False`` to ``scatter`` to drop it).
    """

    def __init__(self, runtime: "ClusterRuntime", shape: tuple[int, int], dtype: Any, tile: int,
                 tiles: dict, host: np.ndarray | None = None) -> None:
        self.runtime = runtime
        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype = np.dtype(dtype)
        self.tile = int(tile)
        self._tiles: dict[tuple[int, int], _Ref] = tiles
        self._host = host
        self._standin: np.ndarray | None = None

    @property
    def ndim(self) -> int:
        return 2

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.dtype.itemsize

    @property
    def grid(self) -> tuple[int, int]:
        t = self.tile
        return -(-self.shape[0] // t), -(-self.shape[1] // t)

    def futures(self) -> dict[tuple[int, int], Any]:
        """(i, j) -> the Dask future holding tile (i, j)."""
        return {k: r.future for k, r in self._tiles.items()}

    def gather(self) -> np.ndarray:
        """The matrix as a host (Fortran-order) array."""
        return self.runtime._gather_handle(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.gather()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        return f"<DistributedMatrix {self.shape[0]}x{self.shape[1]} {self.dtype} tile={self.tile}>"


# ---------------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------------


class _Record:
    """What happened to one task (the fields the runtime's profiles read)."""

    __slots__ = ("task", "_label", "device", "t_found", "t0", "t1", "t_done", "stolen", "bytes", "score", "ok",
                 "flops")

    def __init__(self, task: Any, device: int, label: str | None = None) -> None:
        self.task = task
        self._label = label
        self.device = device
        self.t_found = self.t0 = self.t1 = self.t_done = 0.0
        self.stolen = False
        self.bytes = (0, 0, 0)
        self.score = 0
        self.ok = True
        self.flops = 0.0

    @property
    def label(self) -> str:
        return self._label if self._label is not None else self.task.label


class _TaskRun:
    __slots__ = ("task", "future", "worker", "refs", "reads_out", "out_ref", "rec", "attempts")

    def __init__(self, task: P.Task) -> None:
        self.task = task
        self.future: Any = None
        self.worker = ""
        self.refs: list[_Ref] = []
        self.reads_out = True
        self.out_ref: _Ref | None = None
        self.rec: _Record | None = None
        self.attempts = 0


def _reads_output(step: tuple) -> bool:
    """Does the first step of a task read the old value of its output tile (beta != 0, or in place)?"""
    name, args, _ = step
    if name in ("gemm", "symm", "hemm"):
        return args[3] != 0
    # syrk/herk/syr2k/her2k on a diagonal tile write one triangle: the other keeps the old values
    return True


def _digest(view: np.ndarray) -> bytes:
    """SHA-256 of a tile's bytes in column-major order (the same for any memory layout of the tile)."""
    h = hashlib.sha256()
    if view.flags.f_contiguous:
        h.update(memoryview(view.T))  # the transpose of an F-contiguous tile is C-contiguous, same bytes
    elif view.strides[0] == view.itemsize:  # columns contiguous (a tile of an F-order matrix)
        for col in view.T:
            h.update(memoryview(col))
    else:
        h.update(memoryview(np.asfortranarray(view).T))
    return h.digest()


def _tile_key(view: np.ndarray) -> tuple:
    return (_digest(view), view.shape, view.dtype.str)


class _Lost(Exception):
    """Internal: a tile a call needs was lost with a worker; the executor recovers."""


# ---------------------------------------------------------------------------------------------------
# The runtime
# ---------------------------------------------------------------------------------------------------


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

    Notes
    -----
    Every worker needs tileblas (``pip install tileblas[distributed]``) importable: tile tasks run
    :func:`tileblas.devices.dask.run_tile_task` there.
    """

    def __init__(self, devices: Any, tile_size: int | None = None, reservation_slots: int | None = None,
                 sync: bool = False, deterministic: bool = False, small_flops: float | None = None, *,
                 security: Any = None, cache_bytes: int | None = None, worker_wait_s: float = 60.0,
                 client_kwargs: dict | None = None) -> None:
        if tile_size is not None and (isinstance(tile_size, bool) or not isinstance(tile_size, (int, np.integer))
                                      or tile_size < 1):
            raise ValueError(f"tile_size must be a positive int or None; got {tile_size!r}")
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
            if isinstance(tile_size, bool) or not isinstance(tile_size, (int, np.integer)) or tile_size < 1:
                raise ValueError(f"tile_size must be a positive int or None; got {tile_size!r}")
            return int(tile_size)
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
        if tile_size is not None and (isinstance(tile_size, bool) or not isinstance(tile_size, (int, np.integer))
                                      or tile_size < 1):
            raise ValueError(f"tile_size must be a positive int or None; got {tile_size!r}")
        handles: dict[int, DistributedMatrix] = {}
        args = tuple(self._standin(x, handles) for x in args)
        kwargs = {k: self._standin(v, handles) for k, v in kwargs.items()}
        if handles:
            tiles = {h.tile for h in handles.values()}
            if len(tiles) > 1:
                raise ValueError(f"DistributedMatrix operands must have the same tile size; got {sorted(tiles)}")
            if tile_size is not None and tile_size not in tiles:
                raise ValueError(f"tile_size must be {tiles.pop()} (the operands' tile size); got {tile_size}")
        b = P.check_call(name, args, kwargs)
        m, n, k = P.call_dims(name, b)
        out = b["c"] if "c" in b else b["b"]
        flops = P.flop_count(name, m, n, k) * (4.0 if out.dtype.kind == "c" else 1.0)
        shape = (m, n, k)
        if m == 0 or n == 0:
            now = time.perf_counter()
            self._record(name, shape, out.dtype, 0, "trivial", flops, [], now, now)
            return
        with self._call_lock:
            if handles and P.is_trivial(name, b):
                return self._trivial_with_handles(name, b, handles, shape, flops)
            if P.is_trivial(name, b):
                return self._host_call(name, b, shape, flops, "trivial")
            if handles:
                tile = next(iter(handles.values())).tile
            else:
                explicit = tile_size if tile_size is not None else self.tile_size
                tile = int(explicit) if explicit is not None else self.tile_size_for(name, m, n, k)
                tile = P.bounded_tile(m, n, k, tile)
                if (explicit is None and flops < self.small_flops) or max(m, n, k) <= min(tile, 256):
                    return self._host_call(name, b, shape, flops, "small")
            plan = P.plan_call(name, b, tile, 0 if self._devices_for_partition() <= 1
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

    def _host_call(self, name: str, b: dict, shape: tuple, flops: float, path: str) -> None:
        """One native call on the client (the host), for trivial and small calls on NumPy arrays."""
        from tileblas.kernels import _openblas

        params, flags = P.ROUTINES[name]
        t0 = time.perf_counter()
        ok = False
        try:
            getattr(_openblas, name)(*[b[p] for p in params], **{f: b[f] for f in flags})
            ok = True
        finally:
            out = b["c"] if "c" in b else b["b"]
            self._record(name, shape, out.dtype, max(shape), path, flops, [], t0, time.perf_counter(),
                         failed=not ok)

    def _trivial_with_handles(self, name: str, b: dict, handles: dict, shape: tuple, flops: float) -> None:
        """alpha == 0 or k == 0 with handles: bring the operands to the host, compute, send the result."""
        host = {p: (handles[id(b[p])].gather() if id(b[p]) in handles else b[p]) for p in ("a", "b", "c") if p in b}
        outp = "c" if "c" in b else "b"
        bb = dict(b, **host)
        self._host_call(name, bb, shape, flops, "trivial")
        if id(b[outp]) in handles:
            h = handles[id(b[outp])]
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


def _is_loss(exc: BaseException) -> bool:
    """Is this exception Dask telling us data or a worker went away (as opposed to a task's own error)?"""
    import asyncio
    import concurrent.futures as cf

    if isinstance(exc, (asyncio.CancelledError, cf.CancelledError)):
        return True
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"FutureCancelledError", "CancelledError", "CommClosedError", "FutureLost"})


# ---------------------------------------------------------------------------------------------------
# The cluster executor
# ---------------------------------------------------------------------------------------------------


class _CallExecutor:
    """Runs one plan's tasks on the workers: demand-driven placement with locality, versioned tiles,
    recovery from lost workers, and the final gather into the client's output array (or handle)."""

    def __init__(self, rt: ClusterRuntime, plan: P.Plan, handles: dict) -> None:
        self.rt = rt
        self.client = rt._client
        self.plan = plan
        self.handles = handles
        self.records: list[_Record] = []
        self.versions: dict[Tile, _Ref] = {}
        self.keys: dict[Tile, Any] = {}
        self.runs: list[_TaskRun] = []
        self.inflight: dict[Any, _TaskRun] = {}
        self.load: dict[str, int] = {}
        self.call_id = uuid.uuid4().hex[:12]
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._seq = itertools.count()
        self.out_mat = None
        for t in plan.tasks:  # the call's output matrix: the first non-workspace output
            mat = plan.mats[t.out.m]
            if not mat.workspace:
                self.out_mat = mat
                break

    # --------------------------------------------------------------- tiles
    def _handle_of(self, mat: P.Matrix) -> DistributedMatrix | None:
        return self.handles.get(id(mat.array))

    def _prepare_digests(self) -> None:
        """Digest every host tile the call reads, in the background pool (hashlib runs without the GIL)."""
        need: set[Tile] = set()
        for t in self.plan.tasks:
            need.update(t.inputs)
            if _reads_output(t.steps[0]) if t.steps else True:
                need.add(t.out)
        futs = {}
        for x in need:
            mat = self.plan.mats[x.m]
            if mat.workspace or self._handle_of(mat) is not None:
                continue
            futs[x] = self.rt._pool.submit(_tile_key, mat.view(x.i, x.j))
        for x, f in futs.items():
            self.keys[x] = f.result()

    def _ref(self, x: Tile) -> _Ref:
        """The current version of tile x (a root reference made on first use)."""
        r = self.versions.get(x)
        if r is not None:
            return r
        mat = self.plan.mats[x.m]
        h = self._handle_of(mat)
        if mat.workspace:
            r = _Ref(zeros=True)
        elif h is not None:
            r = h._tiles.get((x.i, x.j))
            if r is None:  # a tile of a zeros() handle never written
                r = _Ref(zeros=True)
        else:
            key = self.keys.get(x)
            if key is None:
                key = _tile_key(mat.view(x.i, x.j))
                self.keys[x] = key
            hit = self.rt._store.get(key)
            if hit is not None:
                self.rt._counts["store_hits"] += 1
                r = _Ref(hit.future, hit.worker, hit.nbytes, root=(mat.array, x.i, x.j, key))
            else:
                r = _Ref(None, None, 0, root=(mat.array, x.i, x.j, key))
        self.versions[x] = r
        return r

    def _root_view(self, r: _Ref) -> np.ndarray:
        src, i, j, _ = r.root
        t = self.plan.tile
        return src[i * t:(i + 1) * t, j * t:(j + 1) * t]

    # --------------------------------------------------------------- placement
    def _score(self, run_task: P.Task, w: str) -> int:
        """Locality of a task on worker w: bytes of its tiles resident on w minus bytes resident on other
        workers (which w would fetch from its peers).  Tiles still on the client count for neither: they
        are sent once, to wherever the task runs.  With every tile resident this ranks workers exactly as
        "the bytes of the task's tiles that w holds" does."""
        s = 0
        versions = self.versions
        for x in run_task.inputs:
            r = versions.get(x)
            if r is not None and r.worker is not None:
                s += r.nbytes if r.worker == w else -r.nbytes
        r = versions.get(run_task.out)
        if r is not None and r.worker is not None:
            s += r.nbytes if r.worker == w else -r.nbytes
        return s

    def _pick(self, ready: list, w: str) -> int:
        best, best_s = 0, None
        for n_, t in enumerate(ready):
            s = self._score(t, w)
            if best_s is None or s > best_s:
                best, best_s = n_, s
        return best

    # --------------------------------------------------------------- submission
    def _submit(self, tr: _TaskRun, w: str) -> None:
        t = tr.task
        plan = self.plan
        tiles = [t.out] + [x for x in t.inputs if x != t.out]
        if not tr.refs:
            tr.reads_out = _reads_output(t.steps[0]) if t.steps else True
            tr.refs = [self._ref(x) for x in tiles]
        for r in tr.refs:  # a resident tile that went away with a worker: send it again
            if r.task is None and r.future is not None and r.future.status in ("cancelled", "lost"):
                if r.root is not None and r.root[3] is not None:
                    self.rt._store.discard(r.root[3])
                r.future, r.worker = None, None
        missing = [r for n_, r in enumerate(tr.refs) if r.future is None and not r.zeros
                   and (n_ > 0 or tr.reads_out)]
        if missing:
            views = []
            for r in missing:
                if r.root is None or r.root[0] is None:
                    raise RuntimeError("a tile this call needs was lost with a worker and has no host copy")
                views.append(self._root_view(r))
            w = self.rt._send(missing, views, w)
            for r in missing:
                if r.root is not None and r.root[3] is not None:
                    self.rt._store.put(r.root[3], _Ref(r.future, r.worker, r.nbytes, root=r.root))
        slot = {x: n_ for n_, x in enumerate(tiles)}
        steps = []
        for kname, args, kw in t.steps:
            refs = tuple((p, slot[a]) for p, a in enumerate(args) if type(a) is Tile)
            plain = tuple(None if type(a) is Tile else a for a in args)
            steps.append((kname, plain, dict(kw), refs))
        outm = plan.mats[t.out.m]
        shape = (outm.rows[t.out.i], outm.cols[t.out.j])
        targs = []
        for n_, r in enumerate(tr.refs):
            if n_ == 0 and not tr.reads_out:
                targs.append(None)
            else:
                targs.append(None if r.zeros else r.future)
        from tileblas.devices.dask import run_tile_task

        key = f"tileblas-{t.routine}-{t.out.i}-{t.out.j}{t.suffix}-{self.call_id}-{next(self._seq)}"
        rec = _Record(t, self.rt._by_addr.get(w, 0))
        rec.flops = t.flops
        rec.t_found = rec.t0 = time.perf_counter()
        fut = self.client.submit(run_tile_task, tuple(steps), 0, shape, outm.array.dtype.str, *targs, key=key,
                                 workers=[w], allow_other_workers=True, pure=False,
                                 priority=t.depth)
        tr.future, tr.worker, tr.rec = fut, w, rec
        tr.attempts += 1
        nb = shape[0] * shape[1] * outm.array.dtype.itemsize
        if tr.out_ref is None:
            tr.out_ref = _Ref(fut, w, nb, task=tr)
            self.versions[t.out] = tr.out_ref
        else:
            tr.out_ref.future, tr.out_ref.worker = fut, w
        self.inflight[fut] = tr
        fut.add_done_callback(self._done.put)
        self.load[w] = self.load.get(w, 0) + 1
        self.rt._counts["tasks"] += 1

    # --------------------------------------------------------------- the loop
    def execute(self) -> None:
        rt = self.rt
        plan = self.plan
        self._prepare_digests()
        pending = {t.index: t.deps for t in plan.tasks}
        order = sorted(plan.tasks, key=lambda t: (-t.depth, t.index))
        ready: list = [t for t in order if t.deps == 0]
        runs = {t.index: _TaskRun(t) for t in plan.tasks}
        submitted = 0
        total = len(plan.tasks)
        recoveries = 0
        no_worker_since: float | None = None
        while True:
            workers = rt._refresh_workers(wait=not self.inflight and bool(ready), max_age=_POLL_S)
            if not workers:  # tasks in flight but no worker left to run them: wait a while, then give up
                if no_worker_since is None:
                    no_worker_since = time.monotonic()
                elif time.monotonic() - no_worker_since > rt.worker_wait_s:
                    self._cancel_all()
                    raise RuntimeError(f"no Dask worker in the cluster for {rt.worker_wait_s:g} s; the call was "
                                       f"cancelled and its output is unchanged")
                time.sleep(0.1)
                continue
            no_worker_since = None
            for w in list(self.load):
                if w not in workers:
                    self.load.pop(w)
            slots = {w: (rt.reservation_slots or 2 * rt._devices[rt._by_addr[w]].nthreads) for w in workers}
            if rt.sync:
                slots = {w: 1 for w in workers}
                limit_total = 1
            else:
                limit_total = None
            progressed = True
            while ready and progressed:
                progressed = False
                for w in sorted(workers, key=lambda a: self.load.get(a, 0)):
                    if not ready:
                        break
                    if self.load.get(w, 0) >= slots[w]:
                        continue
                    if limit_total is not None and len(self.inflight) >= limit_total:
                        break
                    t = ready.pop(self._pick(ready, w))
                    tr = runs[t.index]
                    self.runs.append(tr)
                    self._submit(tr, w)
                    submitted += 1
                    progressed = True
                    newly = []
                    for d in t.dependents:
                        pending[d.index] -= 1
                        if pending[d.index] == 0:
                            newly.append(d)
                    if newly:
                        ready.extend(newly)
                        ready.sort(key=lambda x: (-x.depth, x.index))
            if not self.inflight:
                if submitted == total and not ready:
                    if self._finish():
                        return
                    recoveries += 1
                    self._recover(recoveries)
                    continue
                continue
            try:
                done = [self._done.get(timeout=_POLL_S)]
            except queue.Empty:
                continue
            while True:
                try:
                    done.append(self._done.get_nowait())
                except queue.Empty:
                    break
            lost = False
            for f in done:
                tr = self.inflight.pop(f, None)
                if tr is None:
                    continue
                self.load[tr.worker] = max(0, self.load.get(tr.worker, 0) - 1)
                st = f.status
                if st == "finished":
                    tr.rec.t1 = tr.rec.t_done = time.perf_counter()
                    self.records.append(tr.rec)
                elif st == "error":
                    exc = f.exception()
                    if _is_loss(exc):
                        lost = True
                        continue
                    self._cancel_all()
                    tb = f.traceback()
                    if hasattr(exc, "add_note"):
                        exc.add_note(f"(tileblas: task {tr.task.label} on Dask worker {tr.worker} failed; the "
                                     f"rest of the call was cancelled and the output is unchanged)")
                    raise exc.with_traceback(tb) if tb is not None else exc
                else:  # cancelled / lost
                    lost = True
            if lost:
                recoveries += 1
                self._recover(recoveries)

    def _cancel_all(self) -> None:
        futs = list(self.inflight)
        self.inflight.clear()
        if futs:
            try:
                self.client.cancel(futs)
            except Exception:  # pragma: no cover
                pass

    def _recover(self, attempt: int) -> None:
        """Send lost host tiles again and resubmit the tasks whose futures were cancelled, in submission
        order, on the workers alive now."""
        if attempt > 50:
            self._cancel_all()
            raise RuntimeError("tileblas: the cluster kept losing this call's tiles; giving up after 50 recoveries")
        self.rt._counts["recoveries"] += 1
        time.sleep(0.05)  # let the scheduler's view of the lost worker settle
        workers = self.rt._refresh_workers(wait=True)
        dead_status = ("cancelled", "lost")
        # roots and store entries whose data is gone
        for tr in self.runs:
            for r in tr.refs:
                if r.task is None and not r.zeros and r.future is not None and r.future.status in dead_status:
                    if r.root is not None and r.root[3] is not None:
                        self.rt._store.discard(r.root[3])
                    r.future, r.worker = None, None
        for tr in self.runs:
            f = tr.future
            if f is None or f.status not in dead_status and not (f.status == "error" and _is_loss(f.exception())):
                continue
            if self.inflight.pop(f, None) is not None and tr.worker in self.load:
                self.load[tr.worker] = max(0, self.load[tr.worker] - 1)
            w = max(workers, key=lambda a: (self._score(tr.task, a), -self.load.get(a, 0)))
            self.rt._counts["resubmitted"] += 1
            self._submit(tr, w)

    def _finish(self) -> bool:
        """Bring the output back (or leave it in its handle); False when something was lost on the way."""
        out = self.out_mat
        if out is None:
            return True
        h = self._handle_of(out)
        items = [((x.i, x.j), r) for x, r in self.versions.items() if x.m == out.id and r.task is not None]
        if h is not None:
            futs = [r.future for _, r in items]
            while any(f.status == "pending" for f in futs):  # recomputing after a loss: wait, fetch nothing
                time.sleep(0.01)
            for f in futs:
                if f.status == "error" and not _is_loss(f.exception()):
                    f.result()  # raises the task's exception with its traceback
            if any(f.status != "finished" for f in futs):
                return False
            for ij, r in items:
                h._tiles[ij] = _Ref(r.future, r.worker, r.nbytes)
            h._host = None if items else h._host
            return True
        try:
            vals = self.rt._gather_into(out.array, out.tile, items)
        except _Lost:
            return False
        # the output tiles stay resident, addressed by their contents
        digests = [self.rt._pool.submit(_tile_key, v) for v in vals]
        for ((i, j), r), fk in zip(items, digests):
            key = fk.result()
            self.rt._store.put(key, _Ref(r.future, r.worker, r.nbytes, root=(out.array, i, j, key)))
        return True
