"""Tiles of zarr arrays: operands whose chunks live in a zarr store, read and written region by region.

What it owns
    How a zarr array takes part in a tiled call.  :func:`stand_in` gives, for a 2-D ``zarr.Array``, a
    NumPy array of its shape and dtype over an address range that is reserved but not accessible (no
    memory behind it; a stray access faults at once instead of reading zeros), registered here with the
    zarr array.  The planner, the tile cache and the coherence protocol work on the stand-in as on any
    array (views, identities, byte ranges).  Only the tile copies of devices with memory of their own
    touch operand data, through :func:`tileblas.devices._filetiles.read_tile` / ``write_tile``, which
    ask :func:`region` whether a view belongs to a stand-in and then read or write the zarr array's
    region instead: one zarr read per tile (whole chunks when tiles are chunk-aligned), one write per
    output tile.  Written regions are recorded, so a failed call can say which chunks hold new values.

What it must not touch
    Scheduling and tile placement (the runtime's), and any operand that is not a zarr array.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import threading
from typing import Any

import numpy as np

__all__ = ["is_zarr", "stand_in", "release", "written", "region", "read_region", "write_region",
           "chunk_multiple", "materialize", "written_note", "write_back"]


def is_zarr(obj: Any) -> bool:
    """Whether ``obj`` is a zarr array (checked without importing zarr)."""
    mod = type(obj).__module__ or ""
    return mod.split(".")[0] == "zarr" and hasattr(obj, "chunks") and hasattr(obj, "shape") \
        and hasattr(obj, "dtype")


class _Entry:
    __slots__ = ("zarr", "base", "nbytes", "rows", "cols", "itemsize", "written", "lock")

    def __init__(self, z: Any, base: int, rows: int, cols: int, itemsize: int) -> None:
        self.zarr = z
        self.base = base
        self.rows, self.cols, self.itemsize = rows, cols, itemsize
        self.nbytes = rows * cols * itemsize
        self.written: list[tuple[int, int, int, int]] = []
        self.lock = threading.Lock()


_REG: dict[int, _Entry] = {}
_LOCK = threading.Lock()
_LIBC: list[Any] = []


def _mprotect(addr: int, length: int, prot: int) -> None:
    if not _LIBC:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.mprotect.restype = ctypes.c_int
        _LIBC.append(libc)
    if _LIBC[0].mprotect(ctypes.c_void_p(addr), ctypes.c_size_t(length), prot) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mprotect of a zarr stand-in failed: {err}")


def stand_in(z: Any, name: str) -> np.ndarray:
    """A Fortran-ordered array of ``z``'s shape and dtype that stands for ``z`` in a tiled call (see the
    module docstring); :func:`release` it after the call.

    Raises
    ------
    ValueError
        Where ``z`` (named ``name``) is not 2-D or its dtype is not one BLAS takes.
    """
    if len(z.shape) != 2:
        raise ValueError(f"{name} must be a 2-D zarr array; got shape {tuple(z.shape)}")
    dt = np.dtype(z.dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64), np.dtype(np.complex128)):
        raise ValueError(f"{name} must hold float32, float64, complex64 or complex128; got zarr dtype {dt}")
    rows, cols = (int(d) for d in z.shape)
    nbytes = max(rows * cols * dt.itemsize, 1)
    length = -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
    mm = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | getattr(mmap, "MAP_NORESERVE", 0))
    a = np.frombuffer(mm, dtype=dt, count=rows * cols).reshape((rows, cols), order="F")
    base = a.__array_interface__["data"][0]
    _mprotect(base, length, 0)  # PROT_NONE: no access, no memory
    with _LOCK:
        _REG[base] = _Entry(z, base, rows, cols, dt.itemsize)
    return a


def release(a: np.ndarray) -> None:
    """Forget the stand-in ``a`` (its address range goes back to the system when ``a`` is collected)."""
    with _LOCK:
        _REG.pop(a.__array_interface__["data"][0], None)


def written(a: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The regions ``(r0, r1, c0, c1)`` of the stand-in ``a``'s zarr array written so far."""
    base = a.__array_interface__["data"][0]
    entry = _REG.get(base)
    return [] if entry is None else list(entry.written)


def region(a: np.ndarray) -> tuple[_Entry, int, int, int, int, bool] | None:
    """``(entry, r0, r1, c0, c1, transposed)`` when the 2-D view ``a`` lies in a stand-in: it is
    ``z[r0:r1, c0:c1]`` (its transpose when ``transposed``); None for any other array."""
    if not _REG or not isinstance(a, np.ndarray) or a.ndim != 2:
        return None
    addr = a.__array_interface__["data"][0]
    for entry in list(_REG.values()):
        if entry.base <= addr < entry.base + entry.nbytes:
            break
    else:
        return None
    it, rows = entry.itemsize, entry.rows
    first = (addr - entry.base) // it
    r0, c0 = first % rows, first // rows
    s0, s1 = a.shape
    t0, t1 = a.strides
    if (s0 == 1 or t0 == it) and (s1 == 1 or t1 == rows * it) and r0 + s0 <= rows and c0 + s1 <= entry.cols:
        return entry, r0, r0 + s0, c0, c0 + s1, False
    if (s0 == 1 or t0 == rows * it) and (s1 == 1 or t1 == it) and r0 + s1 <= rows and c0 + s0 <= entry.cols:
        return entry, r0, r0 + s1, c0, c0 + s0, True
    raise ValueError(f"a view of shape {a.shape} and strides {a.strides} into a zarr operand is not a tile")


def read_region(tile: np.ndarray, where: tuple) -> None:
    """``tile[...] = `` the zarr region ``where`` (from :func:`region`)."""
    entry, r0, r1, c0, c1, transposed = where
    src = np.asarray(entry.zarr[r0:r1, c0:c1])
    np.copyto(tile, src.T if transposed else src)


def write_region(where: tuple, tile: np.ndarray) -> None:
    """Write ``tile`` into the zarr region ``where`` and record it."""
    entry, r0, r1, c0, c1, transposed = where
    entry.zarr[r0:r1, c0:c1] = np.ascontiguousarray(tile.T if transposed else tile)
    with entry.lock:
        entry.written.append((r0, r1, c0, c1))


def chunk_multiple(zs: list[Any]) -> int:
    """The smallest tile edge that is a whole number of chunks of every zarr array in ``zs`` along both
    dimensions (so that no two tiles share a chunk)."""
    m = 1
    for z in zs:
        for c in z.chunks:
            m = math.lcm(m, int(c))
    return m


def written_note(name: str, regions: list[tuple[int, int, int, int]], shape: tuple[int, int]) -> str:
    """What a failed call left in the zarr output ``name``: the regions it wrote, the rest unchanged."""
    cells = sum((r1 - r0) * (c1 - c0) for r0, r1, c0, c1 in regions)
    shown = ", ".join(f"[{r0}:{r1}, {c0}:{c1}]" for r0, r1, c0, c1 in regions[:8])
    return (f"the zarr output {name} holds new values in {len(regions)} tiles ({cells} of "
            f"{shape[0] * shape[1]} elements: {shown}{' ...' if len(regions) > 8 else ''}), the rest is unchanged")


def write_back(z: Any, a: np.ndarray, name: str) -> None:
    """``z[...] = a`` chunk by chunk; where a write fails, the exception's note names the chunks written."""
    done: list[tuple[int, int, int, int]] = []
    rows, cols = a.shape
    c0s, c1s = (int(c) for c in z.chunks)
    try:
        for j in range(0, cols, c1s):
            for i in range(0, rows, c0s):
                z[i:i + c0s, j:j + c1s] = a[i:i + c0s, j:j + c1s]
                done.append((i, min(i + c0s, rows), j, min(j + c1s, cols)))
    except BaseException as exc:
        if hasattr(exc, "add_note"):
            exc.add_note(f"(tileblas: writing the result back failed; {written_note(name, done, a.shape)})")
        raise


def materialize(z: Any) -> np.ndarray:
    """All of ``z`` in memory, Fortran-ordered."""
    return np.asfortranarray(np.asarray(z[...]))
