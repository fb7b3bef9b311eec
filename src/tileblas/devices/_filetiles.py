"""Tiles of operands that live in files (``numpy.memmap``): read and written with pread/pwrite.

What it owns
    How a device with its own memory copies a tile of a file-backed host operand: :func:`read_tile` and
    :func:`write_tile` read and write the tile's bytes in the file directly (one ``pread``/``pwrite`` per
    contiguous run: a column of a Fortran-ordered operand, a row of a C-ordered one, the whole tile when
    it spans full columns), instead of touching the operand's memory map.  Pages touched through a map
    count in the process's resident set until it ends; pages read with ``pread`` stay in the kernel's
    page cache only, so the process holds no more than its own tile memory however large the files are.
    A write that fails (a full disk) raises ``OSError`` instead of the SIGBUS a mapped write would get.
    :func:`reserve` allocates the file blocks under an output before a call writes any of it, so a call
    that cannot finish for lack of disk space fails before it changes the file.

What it must not touch
    Anything that is not a tile copy: scheduling, caching and the tiles' placement are the runtime's.
    Operands that are not file-backed, or whose memory map was opened copy-on-write (mode ``'c'``, whose
    content may differ from the file) are left to ordinary memory copies (:func:`file_position` says
    None).
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np

from tileblas.devices import _zarrtiles

__all__ = ["file_position", "read_tile", "write_tile", "reserve"]


def _memmap_of(a: np.ndarray) -> np.memmap | None:
    m: Any = a
    while m is not None:
        if isinstance(m, np.memmap) and getattr(m, "_mmap", None) is not None:
            return m
        m = getattr(m, "base", None)
    return None


def file_position(a: Any) -> tuple[str, int, str] | None:
    """(file name, byte position in the file of ``a``'s first element, memmap mode) when ``a`` is a view
    into a ``numpy.memmap`` opened read-only, read-write or write (not copy-on-write); else None."""
    if not isinstance(a, np.ndarray) or a.size == 0:
        return None
    m = _memmap_of(a)
    if m is None or m.mode not in ("r", "r+", "w+") or not m.filename:
        return None
    start = np.frombuffer(m._mmap, dtype=np.uint8).ctypes.data  # address of the map's first byte
    map_offset = m.offset - m.offset % mmap.ALLOCATIONGRANULARITY  # file position of that byte
    return os.fspath(m.filename), int(a.ctypes.data - start + map_offset), m.mode


def _runs(a: np.ndarray) -> tuple[str, int, int, int] | None:
    """How the bytes of 2-D ``a`` lie in its file: ('F' or 'C', runs, bytes per run, stride between runs);
    None for any other layout."""
    it = a.itemsize
    rows, cols = a.shape
    s0, s1 = a.strides
    if rows == 1 or s0 == it:
        return "F", cols, rows * it, s1
    if cols == 1 or s1 == it:
        return "C", rows, cols * it, s0
    return None


def _io(fd: int, buf: memoryview, pos: int, write: bool, path: str) -> None:
    done = 0
    n = len(buf)
    while done < n:
        k = (os.pwrite(fd, buf[done:], pos + done) if write else os.preadv(fd, [buf[done:]], pos + done))
        if k <= 0:
            raise OSError(f"{path}: {'wrote' if write else 'read'} {done} of {n} bytes at position {pos} "
                          f"({'no space' if write else 'the file ends there: it is shorter than the array'})")
        done += k


def _copy(tile: np.ndarray, a: np.ndarray, where: tuple[str, int, str], write: bool) -> bool:
    """Copy between the file region of ``a`` and the Fortran-contiguous ``tile`` of the same shape."""
    if a.ndim != 2 or not tile.flags.f_contiguous:
        return False
    runs = _runs(a)
    if runs is None:
        return False
    order, count, nbytes, stride = runs
    path, pos, _ = where
    fd = os.open(path, os.O_RDWR if write else os.O_RDONLY)
    try:
        if order == "F" and (count == 1 or stride == nbytes):  # one contiguous run
            _io(fd, memoryview(tile.reshape(-1, order="F")).cast("B"), pos, write, path)
        elif order == "F":
            for j in range(count):
                _io(fd, memoryview(tile[:, j]).cast("B"), pos + j * stride, write, path)
        else:  # C-ordered in the file: go through a C-ordered buffer
            buf = np.empty(a.shape, dtype=a.dtype, order="C")
            if write:
                np.copyto(buf, tile)
            for i in range(count):
                _io(fd, memoryview(buf[i]).cast("B"), pos + i * stride, write, path)
            if not write:
                np.copyto(tile, buf)
    finally:
        os.close(fd)
    return True


def read_tile(tile: np.ndarray, host: np.ndarray) -> None:
    """``tile[...] = host``, reading a file-backed ``host`` from its file (a zarr operand's view from its
    zarr array, :mod:`tileblas.devices._zarrtiles`)."""
    z = _zarrtiles.region(host)
    if z is not None:
        return _zarrtiles.read_region(tile, z)
    where = file_position(host)
    if where is None or not _copy(tile, host, where, write=False):
        np.copyto(tile, host)


def write_tile(host: np.ndarray, tile: np.ndarray) -> None:
    """``host[...] = tile``, writing a file-backed ``host`` into its file (a zarr operand's view into its
    zarr array)."""
    z = _zarrtiles.region(host)
    if z is not None:
        return _zarrtiles.write_region(z, tile)
    where = file_position(host)
    if where is None or where[2] == "r" or not _copy(tile, host, where, write=True):
        np.copyto(host, tile)


def reserve(a: np.ndarray, name: str) -> None:
    """Allocate the file blocks under the file-backed output ``a`` (named ``name`` in errors) before a
    call writes to it: a file created sparse (``numpy.memmap`` mode ``'w+'``) has none, and a write into
    a hole fails when the disk is full.  Raises OSError, with ``a`` untouched, when they cannot be had."""
    where = file_position(a)
    if where is None:
        return
    path, pos, _ = where
    span = (a.shape[0] - 1) * abs(a.strides[0]) + (a.shape[1] - 1) * abs(a.strides[1]) + a.itemsize \
        if a.ndim == 2 else a.nbytes
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, pos, span)
    except OSError as exc:
        raise OSError(exc.errno, f"{name} lives in {path}: could not reserve its {span} bytes on disk "
                                 f"({os.strerror(exc.errno)}); {name} is untouched") from None
    finally:
        os.close(fd)
