"""Dask workers as devices: memory space = the worker's memory, kernels = tile tasks run by Dask.

What it owns
    * :class:`DaskWorkerDevice`, the device a Dask worker becomes in a cluster runtime: its name, address,
      thread count and memory limit, and its memory-space operations (``to_device`` scatters a host array
      to that worker and returns a :class:`RemoteArray`, ``to_host`` gathers it back).
    * Whole calls on one worker, for the asynchronous API's "cost" policy (one backend per worker,
      ``Executor(devices=cluster_runtime.devices)``): :meth:`DaskWorkerDevice.kernel` returns a kernel
      with the argument order of :mod:`tileblas.kernels._openblas` that works on :class:`RemoteArray` operands.
      It runs the call as one Dask task on that worker and waits for it (so the executor measures the
      call's real duration); the output's RemoteArray then holds the new version.
    * The functions that run *on the workers*: :func:`run_tile_task` computes one output tile from its
      input tiles with the native kernel layer (one call per step of the planner's task, in the planner's
      fixed k order), and :func:`tile_nbytes`.  They are module-level so that Dask pickles them by
      reference; every worker needs tileblas installed (``pip install tileblas[distributed]``).

What it must not touch
    Placement and recovery decisions (:mod:`tileblas.runtime.cluster` owns them); networking and
    serialisation (Dask's own comms and serialisers do all of it).

Tiles on a worker are immutable values held by Dask futures: a task never writes into a tile it was given
(Dask may hand the same object to several tasks on one worker); it copies its output tile and returns
the new version.  Dask is imported only when this module is imported, which only the cluster runtime does.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

from tileblas.devices._base import Device, DeviceError

__all__ = ["DaskWorkerDevice", "RemoteArray", "run_tile_task", "tile_nbytes", "worker_info"]


class RemoteArray:
    """A device array of a :class:`DaskWorkerDevice`: a matrix held on a Dask worker.

    ``future`` is the Dask future of the current version (None: all zeros, nothing on the worker yet);
    a kernel that writes the array replaces it with the future of the new version (values on workers are
    immutable).  ``shape`` and ``dtype`` describe the matrix without fetching it.
    """

    __slots__ = ("device", "future", "shape", "dtype")

    def __init__(self, device: "DaskWorkerDevice", future: Any, shape: tuple[int, ...], dtype: Any) -> None:
        self.device = device
        self.future = future
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"<RemoteArray {self.shape} {self.dtype} on {self.device.name}>"


#: Level-3 kernels whose output is not read when beta == 0 (args[3]): the task starts from zeros.
_BETA_KERNELS = ("gemm", "symm", "hemm")


class DaskWorkerDevice(Device):
    """One Dask worker of a cluster runtime.

    Parameters
    ----------
    client : distributed.Client
        The client the runtime talks to the cluster through.
    address : str
        The worker's address (``tcp://127.0.0.1:40123``, ``tls://...``).
    nthreads : int
        Threads the worker runs tasks on (each task runs single-threaded BLAS).
    memory_limit : int
        Bytes of memory the worker may use (0: no limit known).
    index : int
        Number used in the device name (``dask<index>``).

    Notes
    -----
    The cluster runtime never calls :meth:`kernel`: it submits tile tasks (:func:`run_tile_task`) itself,
    with its own placement and recovery.  :meth:`kernel` serves the asynchronous API's "cost" policy,
    which runs each call whole on one device: one Dask task on this worker.  That path has no recovery
    of its own: when the worker dies, the call fails with :class:`DeviceError` (its future raises).
    """

    kind = "dask"
    host_memory = False
    #: Client <-> worker bandwidth guess in bytes/s (loopback TCP); the "cost" policy refines it.
    bandwidth = 1e9

    def __init__(self, client: Any, address: str, nthreads: int = 1, memory_limit: int = 0, index: int = 0) -> None:
        super().__init__(f"dask{index}", speed_hint=float(max(1, nthreads)))
        self.client = client
        self.address = address
        self.nthreads = int(max(1, nthreads))
        self.memory_limit = int(memory_limit or 0)
        self.alive = True
        self._latency: float | None = None

    # ----------------------------------------------------------------- memory space
    def to_device(self, host: np.ndarray) -> RemoteArray:
        """Send a host array to this worker (one Dask scatter); returns the RemoteArray that holds it."""
        self._check_alive()
        arr = np.asfortranarray(host)
        if arr is host:
            arr = host.copy(order="F")
        try:
            fut = self.client.scatter(arr, workers=[self.address], hash=False, direct=False)
        except Exception as exc:
            self.alive = False
            raise DeviceError(f"{self.name}: could not send {arr.nbytes} bytes to the Dask worker "
                              f"{self.address}: {exc!r}") from exc
        self.stats.add(bytes_h2d=arr.nbytes)
        return RemoteArray(self, fut, arr.shape, arr.dtype)

    def to_host(self, dev: Any, host: np.ndarray) -> None:
        """Fetch a RemoteArray (or a Dask future) from the cluster into the host array ``host``."""
        if isinstance(dev, RemoteArray):
            if dev.future is None:
                host[...] = 0
                return
            dev = dev.future
        val = dev.result() if hasattr(dev, "result") else dev
        host[...] = val
        self.stats.add(bytes_d2h=host.nbytes)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> RemoteArray:
        """A zero-filled array for this worker; nothing is sent or made until a kernel writes it."""
        return RemoteArray(self, None, tuple(shape), dtype)

    def kernel(self, name: str) -> Callable[..., None]:
        """Level-3 kernel ``name`` (gemm ... trsm, argument order of :mod:`tileblas.kernels._openblas`) on
        RemoteArray operands: one Dask task on this worker computes the new version of the output (the
        last array argument); returns when it is done."""
        if name not in _KERNEL_NAMES:
            raise DeviceError(f"{self.name} has no kernel {name!r}; known: {', '.join(_KERNEL_NAMES)}")

        def run(*args: Any, **kw: Any) -> None:
            self._run_call(name, args, kw)

        return run

    def _run_call(self, name: str, args: tuple, kw: dict) -> None:
        self._check_alive()
        pos = [p for p, a in enumerate(args) if isinstance(a, RemoteArray)]
        if not pos:
            raise DeviceError(f"{self.name}.{name}: no RemoteArray operand (use to_device / empty)")
        bad = [args[p] for p in pos if args[p].device is not self]
        if bad:
            raise DeviceError(f"{self.name}.{name}: operand {bad[0]!r} lives on another device")
        out = args[pos[-1]]
        slots = [pos[-1]] + pos[:-1]  # slot 0: the output
        refs = tuple((p, slots.index(p)) for p in pos)
        plain = tuple(None if isinstance(a, RemoteArray) else a for a in args)
        reads_out = not (name in _BETA_KERNELS and args[3] == 0)
        tiles = [out.future if reads_out else None] + [args[p].future for p in pos[:-1]]
        steps = ((name, plain, dict(kw), refs),)
        t0 = time.perf_counter()
        fut = self.client.submit(run_tile_task, steps, 0, out.shape, out.dtype.str, *tiles,
                                 workers=[self.address], allow_other_workers=True, pure=False)
        done = threading.Event()
        fut.add_done_callback(lambda _f: done.set())
        done.wait()
        if fut.status != "finished":
            exc = fut.exception() if fut.status == "error" else None
            if exc is not None and not _is_loss(exc):
                raise exc.with_traceback(fut.traceback())
            self.alive = False
            raise DeviceError(f"{self.name}: the {name} call on the Dask worker {self.address} was lost "
                              f"({fut.status}; the worker or an operand went away)") from exc
        out.future = fut
        self.stats.add(tasks=1, busy_s=time.perf_counter() - t0)

    @property
    def call_latency_s(self) -> float:
        """Seconds a call on this worker costs besides its computation: the round trip of an empty Dask
        task (best of 5, measured once).  The "cost" policy adds it to every estimate for this device
        and takes it out of measured call times."""
        if self._latency is None:
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                fut = self.client.submit(_noop, workers=[self.address], allow_other_workers=True, pure=False)
                done = threading.Event()
                fut.add_done_callback(lambda _f: done.set())
                done.wait()
                best = min(best, time.perf_counter() - t0)
            self._latency = best
        return self._latency

    def _check_alive(self) -> None:
        if not self.alive:
            raise DeviceError(f"{self.name}: the Dask worker {self.address} has gone")

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(address=self.address, nthreads=self.nthreads, memory_limit=self.memory_limit, alive=self.alive)
        return d

    def __repr__(self) -> str:
        return f"<DaskWorkerDevice {self.name} {self.address}>"


_KERNEL_NAMES = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")


def _is_loss(exc: BaseException) -> bool:
    """Is this Dask telling us data or a worker went away (not the task's own error)?"""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"FutureCancelledError", "CancelledError", "CommClosedError", "FutureLost"})


def worker_info(client: Any) -> dict[str, dict[str, Any]]:
    """Address -> {"nthreads", "memory_limit"} of the workers the scheduler knows now."""
    status = getattr(client, "status", None)
    if status in ("closing", "closed"):
        raise RuntimeError(f"the Dask client {client!r} is {status}: this runtime cannot reach its cluster; "
                           "make a Runtime on an open Client")
    info = client.scheduler_info(n_workers=-1) if _takes_n_workers(client) else client.scheduler_info()
    out = {}
    for addr, w in info.get("workers", {}).items():
        out[addr] = {"nthreads": int(w.get("nthreads", 1) or 1), "memory_limit": int(w.get("memory_limit", 0) or 0)}
    return out


_N_WORKERS_ARG: dict[type, bool] = {}


def _takes_n_workers(client: Any) -> bool:
    t = type(client)
    if t not in _N_WORKERS_ARG:
        import inspect

        try:
            _N_WORKERS_ARG[t] = "n_workers" in inspect.signature(client.scheduler_info).parameters
        except (TypeError, ValueError):
            _N_WORKERS_ARG[t] = False
    return _N_WORKERS_ARG[t]


# ---------------------------------------------------------------------------------------------------
# Functions that run on the workers
# ---------------------------------------------------------------------------------------------------


def _noop() -> None:
    return None


def _zeros(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    return np.zeros(shape, dtype=np.dtype(dtype), order="F")


def tile_nbytes(x: Any) -> int:
    """Bytes of a tile (0 for None)."""
    return 0 if x is None else int(getattr(x, "nbytes", 0))


_LOCAL_KERNELS: dict[str, Callable[..., None]] = {}


def _kernel(name: str) -> Callable[..., None]:
    fn = _LOCAL_KERNELS.get(name)
    if fn is None:
        if name == "axpy":
            from tileblas.kernels._openblas import split_k_axpy

            fn = split_k_axpy
        else:
            from tileblas.kernels import _openblas

            lib = _openblas.get_library(1)
            raw = getattr(_openblas, name)

            def fn(*args: Any, _raw: Callable = raw, _lib: Any = lib, **kw: Any) -> None:
                _raw(*args, lib=_lib, **kw)

        _LOCAL_KERNELS[name] = fn
    return fn


def run_tile_task(steps: tuple, out_slot: int, out_shape: tuple[int, int], dtype: str, *tiles: Any) -> np.ndarray:
    """Compute one output tile on a worker and return its new version.

    Parameters
    ----------
    steps : tuple
        ``(kernel name, args, kwargs, refs)`` per step, in the order they run; ``refs`` is a tuple of
        ``(argument position, tile slot)`` pairs: argument ``position`` is ``tiles[slot]``.
    out_slot : int
        Slot of the output tile in ``tiles``.
    out_shape, dtype
        Shape and dtype of the output tile; when ``tiles[out_slot]`` is None (its old value is not read)
        the task starts from zeros.
    *tiles
        The tiles the task reads (Dask passes the values of the futures the client gave).
    """
    old = tiles[out_slot]
    if old is None:
        out = np.zeros(out_shape, dtype=np.dtype(dtype), order="F")
    else:
        out = np.array(old, dtype=np.dtype(dtype), order="F", copy=True)
    arrays = list(tiles)
    arrays[out_slot] = out
    for name, args, kw, refs in steps:
        a = list(args)
        for pos, slot in refs:
            a[pos] = arrays[slot]
        _kernel(name)(*a, **kw)
    return out


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)
