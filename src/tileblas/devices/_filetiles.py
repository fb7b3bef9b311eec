"""Tiles of operands that live in files (``numpy.memmap``): read and written with pread/pwrite.

What it owns
    How a device with its own memory copies a tile of a file-backed host operand: :func:`read_tile` and
    :func:`write_tile` read and write the tile's bytes in the file directly (one ``pread``/``pwrite`` per
    contiguous run: a column of a Fortran-ordered operand, a row of a C-ordered one, the whole tile when
    it spans full columns), instead of touching the operand's memory map.  Pages touched through a map
    count in the process's resident set until it ends; pages read with ``pread`` stay in the kernel's
    page cache only, so the process holds no more than its own tile memory however large the files are.
    A write that fails (a full disk) raises ``OSError`` instead of the SIGBUS a mapped write would get.
    The file read and written is the file the map maps, never whatever its path names now: a map's file
    is opened once, through ``/proc/self/map_files`` where the process may (the mapped file itself, even
    unlinked), else by its name or through the descriptor Python's ``mmap`` keeps, each kept only when
    its device and inode are the map's (``/proc/self/maps``); a file renamed, replaced or unlinked since
    the map was made is then still the one used.  Where no descriptor is provably the map's file, the
    tile is copied through the map itself.
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
import threading
import weakref
from typing import Any

import numpy as np

from tileblas.devices import _zarrtiles

__all__ = ["file_position", "read_tile", "write_tile", "reserve"]

_MAP_FILES = "/proc/self/map_files"
_MAPS = "/proc/self/maps"
_FDS = "/proc/self/fd"
_opened: weakref.WeakKeyDictionary[mmap.mmap, int | None] = weakref.WeakKeyDictionary()  # map -> its file
_opening = threading.Lock()


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


def _map_entry(start: int) -> tuple[str, tuple[int, int]] | None:
    """The address range (as ``/proc/self/maps`` writes it) and the (device, inode) of the file mapped at
    ``start``; None where there is no such file or no ``/proc``."""
    try:
        with open(_MAPS, encoding="ascii", errors="replace") as fh:
            for line in fh:
                f = line.split(maxsplit=5)
                lo, _, hi = f[0].partition("-")
                if int(lo, 16) <= start < int(hi, 16):
                    major, _, minor = f[3].partition(":")
                    ino = int(f[4])
                    return (f[0], (os.makedev(int(major, 16), int(minor, 16)), ino)) if ino else None
    except (OSError, ValueError, IndexError):
        pass
    return None


def _open_if(path: str, flags: int, ident: tuple[int, int] | None) -> int | None:
    """``path`` opened, when it opens and (with ``ident``) its device and inode are ``ident``."""
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        st = None
    if ident is None or (st is not None and (st.st_dev, st.st_ino) == ident):
        return fd
    os.close(fd)
    return None


def _open_mapped(m: np.memmap) -> int | None:
    """A descriptor of the file ``m``'s map maps (kept while the map lives), or None where none can be
    shown to be that file."""
    buf = m._mmap
    with _opening:
        if buf in _opened:
            return _opened[buf]
        flags = (os.O_RDONLY if m.mode == "r" else os.O_RDWR) | os.O_CLOEXEC
        fd = None
        entry = _map_entry(np.frombuffer(buf, dtype=np.uint8).ctypes.data)
        if entry is not None:
            span, ident = entry
            fd = _open_if(f"{_MAP_FILES}/{span}", flags, None)  # the mapped file itself (root, CAP)
            if fd is None and m.filename:
                fd = _open_if(os.fspath(m.filename), flags, ident)  # its name, if it still names it
            if fd is None:  # the descriptor Python's mmap keeps (a file renamed, replaced or unlinked)
                try:
                    names = os.listdir(_FDS)
                except OSError:
                    names = []
                for name in names:
                    fd = _open_if(f"{_FDS}/{name}", flags, ident)
                    if fd is not None:
                        break
        _opened[buf] = fd
        if fd is not None:
            weakref.finalize(buf, os.close, fd)
        return fd


def _where(a: np.ndarray) -> tuple[int, str, int, str] | None:
    """(descriptor of the mapped file, its name for errors, byte position of ``a``'s first element in it,
    memmap mode) for a view into a file-backed map whose file can be opened as itself; else None."""
    where = file_position(a)
    if where is None:
        return None
    fd = _open_mapped(_memmap_of(a))
    return None if fd is None else (fd, *where)


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


def _copy(tile: np.ndarray, a: np.ndarray, where: tuple[int, str, int, str], write: bool) -> bool:
    """Copy between the file region of ``a`` and the Fortran-contiguous ``tile`` of the same shape."""
    if a.ndim != 2 or not tile.flags.f_contiguous:
        return False
    runs = _runs(a)
    if runs is None:
        return False
    order, count, nbytes, stride = runs
    fd, path, pos, _ = where
    end = pos + (count - 1) * stride + nbytes
    if write and os.fstat(fd).st_size < end:  # a write past the end would extend the file, silently
        raise OSError(f"{path}: the file ends before byte {end} of the output (it was truncated after the map "
                      "was made, or while the call ran): the call does not write past its end")
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
    return True


def read_tile(tile: np.ndarray, host: np.ndarray) -> None:
    """``tile[...] = host``, reading a file-backed ``host`` from its file (a zarr operand's view from its
    zarr array, :mod:`tileblas.devices._zarrtiles`)."""
    z = _zarrtiles.region(host)
    if z is not None:
        return _zarrtiles.read_region(tile, z)
    where = _where(host)
    if where is None or not _copy(tile, host, where, write=False):
        np.copyto(tile, host)


def write_tile(host: np.ndarray, tile: np.ndarray) -> None:
    """``host[...] = tile``, writing a file-backed ``host`` into its file (a zarr operand's view into its
    zarr array)."""
    z = _zarrtiles.region(host)
    if z is not None:
        return _zarrtiles.write_region(z, tile)
    where = _where(host)
    if where is None or where[3] == "r" or not _copy(tile, host, where, write=True):
        np.copyto(host, tile)


def reserve(a: np.ndarray, name: str) -> None:
    """Allocate the file blocks under the file-backed output ``a`` (named ``name`` in errors) before a
    call writes to it: a file created sparse (``numpy.memmap`` mode ``'w+'``) has none, and a write into
    a hole fails when the disk is full.  Raises OSError, with ``a`` untouched, when they cannot be had.
    A map whose file cannot be opened as itself (see the module's note) reserves nothing."""
    where = _where(a)
    if where is None:
        return
    fd, path, pos, _ = where
    span = (a.shape[0] - 1) * abs(a.strides[0]) + (a.shape[1] - 1) * abs(a.strides[1]) + a.itemsize \
        if a.ndim == 2 else a.nbytes
    if os.fstat(fd).st_size < pos + span:  # posix_fallocate would extend it with zeros, silently
        raise OSError(f"{name} lives in {path}, which ends before byte {pos + span} of it (the file was "
                      f"truncated after the map was made); {name} is untouched")
    try:
        os.posix_fallocate(fd, pos, span)
    except OSError as exc:
        raise OSError(exc.errno, f"{name} lives in {path}: could not reserve its {span} bytes on disk "
                                 f"({os.strerror(exc.errno)}); {name} is untouched") from None
