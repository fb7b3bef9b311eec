"""Dask workers as devices: memory space = the worker's memory, kernels = tile tasks run by Dask.

What it owns
    * :class:`DaskWorkerDevice`, the device a Dask worker becomes in a cluster runtime: its name, address,
      thread count and memory limit, and its memory-space operations (``to_device`` scatters a host tile
      to that worker and returns a :class:`distributed.Future`, ``to_host`` gathers it back).
    * The functions that run *on the workers*: :func:`run_tile_task` computes one output tile from its
      input tiles with the native kernel layer (one call per step of the planner's task, in the planner's
      fixed k order), and :func:`tile_nbytes`.  They are module-level so that Dask pickles them by
      reference; every worker needs tileblas installed (``pip install tileblas[distributed]``).

What it must not touch
    Placement and recovery decisions (:mod:`tileblas.runtime._cluster` owns them); networking and
    serialisation (Dask's own comms and serialisers do all of it).

Tiles on a worker are immutable values held by Dask futures: a task never writes into a tile it was given
(Dask may hand the same object to several tasks on one worker); it copies its output tile and returns
the new version.  Dask is imported only when this module is imported, which only the cluster runtime does.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tileblas.devices._base import Device, DeviceError

__all__ = ["DaskWorkerDevice", "run_tile_task", "tile_nbytes", "worker_info"]


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
    The runtime never calls :meth:`kernel`: a Dask worker has no in-place kernels a client thread could
    call, its work is done by tile tasks that Dask runs on it (:func:`run_tile_task`).
    """

    kind = "dask"
    host_memory = False

    def __init__(self, client: Any, address: str, nthreads: int = 1, memory_limit: int = 0, index: int = 0) -> None:
        super().__init__(f"dask{index}", speed_hint=float(max(1, nthreads)))
        self.client = client
        self.address = address
        self.nthreads = int(max(1, nthreads))
        self.memory_limit = int(memory_limit or 0)
        self.alive = True

    # ----------------------------------------------------------------- memory space
    def to_device(self, host: np.ndarray) -> Any:
        """Send a host tile to this worker (Dask scatter); returns the future that holds it there."""
        tile = np.asfortranarray(host)
        if tile is host:
            tile = host.copy(order="F")
        fut = self.client.scatter(tile, workers=[self.address], hash=False, direct=False)
        self.stats.add(bytes_h2d=tile.nbytes)
        return fut

    def to_host(self, dev: Any, host: np.ndarray) -> None:
        """Fetch a tile (a future) from the cluster into the host tile ``host``."""
        val = dev.result() if hasattr(dev, "result") else dev
        host[...] = val
        self.stats.add(bytes_d2h=host.nbytes)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A zero-filled tile made on this worker (nothing is sent but the shape)."""
        return self.client.submit(_zeros, tuple(shape), np.dtype(dtype).str, workers=[self.address],
                                  allow_other_workers=True, pure=False)

    def kernel(self, name: str) -> Callable[..., None]:
        raise DeviceError(f"{self.name} runs tile tasks through Dask (tileblas.runtime._cluster); it has no "
                          f"in-place {name!r} kernel a client thread could call")

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(address=self.address, nthreads=self.nthreads, memory_limit=self.memory_limit, alive=self.alive)
        return d

    def __repr__(self) -> str:
        return f"<DaskWorkerDevice {self.name} {self.address}>"


def worker_info(client: Any) -> dict[str, dict[str, Any]]:
    """Address -> {"nthreads", "memory_limit"} of the workers the scheduler knows now."""
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


def _zeros(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    return np.zeros(shape, dtype=np.dtype(dtype), order="F")


def tile_nbytes(x: Any) -> int:
    """Bytes of a tile (0 for None)."""
    return 0 if x is None else int(getattr(x, "nbytes", 0))


def _axpy(alpha: Any, x: np.ndarray, y: np.ndarray, uplo: str | None = None) -> None:
    """y += alpha*x, on the uplo triangle only when given (the split-k reduction)."""
    if uplo is None:
        if alpha == 1:
            np.add(y, x, out=y)
        else:
            y += alpha * x
        return
    mask = np.triu(np.ones(y.shape, dtype=bool)) if uplo == "U" else np.tril(np.ones(y.shape, dtype=bool))
    y[mask] += alpha * x[mask]


_LOCAL_KERNELS: dict[str, Callable[..., None]] = {}


def _kernel(name: str) -> Callable[..., None]:
    fn = _LOCAL_KERNELS.get(name)
    if fn is None:
        if name == "axpy":
            fn = _axpy
        else:
            from tileblas import _kernels

            lib = _kernels.get_library(1)
            raw = getattr(_kernels, name)

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
