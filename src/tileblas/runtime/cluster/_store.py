"""Tiles on the workers: references to resident tiles, the content-addressed tile store (the levels of
the tile cache, seen from the client), and :class:`DistributedMatrix` handles.

What it must not touch: placement and recovery (:mod:`._executor`).
"""

from __future__ import annotations


import hashlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from tileblas.runtime.cluster._runtime import ClusterRuntime

__all__ = ["DistributedMatrix"]

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


