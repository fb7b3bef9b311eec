"""Matrix handles: data that asynchronous calls read and write, and where valid copies of it live.

What it owns: :class:`MatrixHandle` -- the host buffer (owned or borrowed), the *residency* of the data
(the set of locations holding a valid copy: the host and/or devices with their own memory), a version
number bumped on every write, and the per-handle dependency state (last writer, readers since) that
:mod:`._graph` reads.  A device with its own memory (``device.host_memory`` false) keeps its copy across
calls; it moves again only after the data changed elsewhere (a write through tileblas on another
location, or :meth:`MatrixHandle.mark_changed` after a direct host write).

Ownership of the host buffer
    ``copy=True`` (default): the handle owns a private copy; the caller's array is never touched again.
    ``copy=False``: the handle *borrows* the caller's array and computes in it.  While any call on the
    handle is in flight the array is made read-only (``flags.writeable = False``) and its original flag
    is restored when the last call finishes, so an accidental write raises instead of racing.  (Views the
    caller made before cannot be locked; do not write through them while calls are in flight.)

What it must not touch: scheduling (the executor) and kernels (the calls).
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from tileblas.kernels import _openblas
from tileblas.asyncapi._futures import DONE_NONE

if TYPE_CHECKING:  # pragma: no cover
    from tileblas.asyncapi._executor import Executor
    from tileblas.asyncapi._futures import AsyncFuture
    from tileblas.asyncapi._graph import Op

__all__ = ["MatrixHandle", "HOST", "take_transfers"]

_clock = time.perf_counter
_allocate_lock = threading.Lock
_tls = threading.local()  # per worker thread: [seconds, bytes] of the copies made by acquire()


def _note_transfer(seconds: float, nbytes: int) -> None:
    acc = getattr(_tls, "acc", None)
    if acc is None:
        acc = _tls.acc = [0.0, 0]
    acc[0] += seconds
    acc[1] += nbytes


def take_transfers() -> tuple[float, int]:
    """(seconds, bytes) of the copies that :meth:`MatrixHandle.acquire` made in this thread since the last
    call; the executor uses it to tell a call's compute time from its data movement."""
    acc = getattr(_tls, "acc", None)
    if acc is None or not acc[1]:
        return 0.0, 0
    out = (acc[0], acc[1])
    acc[0], acc[1] = 0.0, 0
    return out


class _Host:
    """The location 'host memory' in a handle's residency set."""

    name = "host"

    def __repr__(self) -> str:
        return "host"


HOST = _Host()
_ON_HOST = frozenset((HOST,))  # residency sets are immutable: shared, replaced on change
_NOWHERE: frozenset = frozenset()
_CREATE = threading.Lock()  # guards the lazy creation of handles' locks


def _after_fork_in_child() -> None:
    global _CREATE
    _CREATE = threading.Lock()  # another thread of the parent may have held it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class MatrixHandle:
    """A matrix (or vector) that asynchronous BLAS calls work on.

    Create handles with :func:`tileblas.asyncapi.handle` / :func:`tileblas.asyncapi.empty` (or
    :meth:`Executor.handle`).  Every call on a handle returns at once; :meth:`get` waits and returns the
    data, :meth:`read` returns a future of it, :meth:`delete` (or leaving a ``with`` block) releases it.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
    version : int
        Bumped on every write (through tileblas or announced with :meth:`mark_changed`).
    """

    # Handles are made and dropped on every call of a typical loop: slots, and anything that most handles
    # never need (their lock, device copies, readers) is made on first use.
    __slots__ = ("executor", "shape", "dtype", "version", "_lock", "_copies", "_mems",
                 "last_writer", "readers", "inflight", "deleted", "_user", "_host",
                 "readonly", "_valid", "_finalizer", "__weakref__")

    def __init__(self, executor: "Executor", data: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype,
                 copy: bool, upload: bool) -> None:
        self.executor = executor
        self.shape = shape
        self.dtype = dtype
        self.version = 0
        self._lock: Any = None  # see _mutex
        self._copies: dict[Any, Any] | None = None  # device -> its copy (devices with their own memory)
        self._mems: list | None = None  # tile memories of runtimes keeping this buffer's tiles (see _keep_in)
        # dependency state (read and written under the executor's graph lock)
        self.last_writer: Op | None = None
        self.readers: dict[Op, None] | None = None  # calls reading the current value, in flight (ordered set)
        self.inflight = 0
        self.deleted = False
        if data is None:
            self._user: np.ndarray | None = None
            self._host: np.ndarray | None = None
            self.readonly = False
            self._valid: frozenset = _NOWHERE
            return
        if not copy:
            self._user = data
            self.readonly = not data.flags.writeable  # the user's flag, restored after calls in flight
            # computed in through the user's array itself until a call writes it: then through our own view,
            # which keeps its writeable flag while the user's is locked (see _own_view)
            self._host = data
        else:
            self._user = None
            self.readonly = False
            self._host = np.array(data, order="F" if data.ndim == 2 and not data.flags.c_contiguous else "K",
                                  copy=True) if upload else None
        self._valid = _ON_HOST if upload else _NOWHERE

    def _mutex(self) -> Any:
        """The handle's lock, made on first use (no ``__getattr__``: it would slow every attribute access)."""
        lock = self._lock
        if lock is None:
            with _CREATE:
                lock = self._lock
                if lock is None:
                    lock = self._lock = _allocate_lock()
        return lock

    # ------------------------------------------------------------------ properties
    @property
    def size(self) -> int:
        shape = self.shape
        return shape[0] * shape[1] if len(shape) == 2 else math.prod(shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def borrowed(self) -> bool:
        """True when the handle computes in the caller's array (``copy=False``)."""
        return self._user is not None

    def valid_on(self) -> list[str]:
        """Names of the locations holding a valid copy ('host', device names)."""
        return sorted(getattr(loc, "name", str(loc)) for loc in list(self._valid))

    def is_valid_on(self, device: Any) -> bool:
        """True when ``device`` (a Device, or None for the host) holds a valid copy."""
        loc = HOST if device is None or device.host_memory else device
        return loc in self._valid

    def transfer_bytes(self, device: Any) -> tuple[int, int]:
        """(bytes to download to the host, bytes to upload to ``device``) before ``device`` can read."""
        valid = self._valid
        if not valid:
            return 0, 0
        if device is None or device.host_memory:
            return (0 if HOST in valid else self.nbytes), 0
        if device in valid:
            return 0, 0
        return (0 if HOST in valid else self.nbytes), self.nbytes

    # ------------------------------------------------------------------ residency (worker threads)
    def _host_buffer(self) -> np.ndarray:
        if self._host is None:
            self._host = np.zeros(self.shape, self.dtype, order="F")
        return self._host

    def _download_locked(self) -> np.ndarray:
        host = self._host_buffer()
        if HOST not in self._valid and self._valid:
            dev = next(iter(self._valid))
            t0 = _clock()
            dev.to_host(self._copies[dev], host)
            dev.synchronize()
            _note_transfer(_clock() - t0, self.nbytes)
            self._valid = self._valid | _ON_HOST
        return host

    def acquire(self, device: Any, mode: str) -> Any:
        """The array to compute with on ``device`` (None: host), made valid there first.

        ``mode`` is "r" (read), "rw" (read and write) or "w" (write only: the old value is not moved).
        A write leaves ``device`` the only valid location and bumps :attr:`version`.
        """
        if (device is None or device.host_memory) and HOST in self._valid:
            # Fast path, no lock: the host copy is valid.  The graph never runs a writer of this handle
            # concurrently with anything else on it, and concurrent host readers only read.
            if mode != "r":
                if len(self._valid) > 1:
                    self._valid = _ON_HOST
                self.version += 1
                if self._mems:
                    self._tiles_changed()
            return self._host
        with self._mutex():
            if device is None or device.host_memory:
                loc = HOST
                arr = self._host_buffer() if mode == "w" else self._download_locked()
            else:
                loc = device
                if self._copies is None:
                    self._copies = {}
                if loc in self._valid:
                    arr = self._copies[loc]
                elif mode != "w" and self._valid:
                    host = self._download_locked()
                    t0 = _clock()
                    arr = device.to_device(host)
                    _note_transfer(_clock() - t0, self.nbytes)
                    self._copies[loc] = arr
                else:
                    arr = self._copies.get(loc)
                    if arr is None:
                        arr = device.empty(self.shape, self.dtype)
                        self._copies[loc] = arr
            if mode == "r":
                if loc not in self._valid:
                    self._valid = self._valid | {loc}
            else:
                self._valid = _ON_HOST if loc is HOST else frozenset((loc,))
                self.version += 1
                if self._mems:
                    self._tiles_changed()
            return arr

    # ------------------------------------------------------------------ tiles cached by a tile runtime
    def _keep_in(self, mem: Any) -> None:
        """Have the tile memory ``mem`` of the runtime that computes a Level-3 call on this handle keep the host
        buffer's tiles on its devices across calls ("demand" policy with devices that have their own memory).

        The handle knows when its data changes, so it tells ``mem``: a write that does not go through the
        runtime (a Level-1/2 call, a call on another backend) or :meth:`mark_changed` invalidates the tiles;
        deleting the handle (or losing it to garbage collection) drops them.  Writes through the runtime keep
        its caches coherent themselves."""
        mems = self._mems
        if mems is not None and any(m is mem for m in mems):
            return
        with self._mutex():
            mems = self._mems
            if mems is None:
                mems = self._mems = []
            if any(m is mem for m in mems) or self.deleted:
                return
            buf = self._host_buffer()
            mem.keep(buf)
            mems.append(mem)
            if len(mems) == 1:
                self._finalizer = weakref.finalize(self, _unkeep, mems, buf)

    def _tiles_changed(self) -> None:
        """The host buffer changed outside the runtimes that keep its tiles: they drop them."""
        buf = self._host
        for mem in list(self._mems or ()):
            mem.invalidate(buf)

    # ------------------------------------------------------------------ user API
    def _check_alive(self, what: str = "handle") -> None:
        if self.deleted:
            raise ValueError(f"{what} was deleted; create a new handle")

    def read(self) -> "AsyncFuture":
        """Read back asynchronously: a future whose result is a host array with the data.

        The array is a fresh copy for owned handles and the caller's own array for borrowed handles.
        """
        self._check_alive()
        return self.executor._submit_read(self)

    def get(self, timeout: float | None = None) -> np.ndarray:
        """Wait for every call writing this handle, then return its data (see :meth:`read`)."""
        fut = self.read()
        try:
            return fut.result(timeout)
        except TimeoutError:
            if fut.done():
                raise
            raise TimeoutError(
                f"{self!r}: the calls writing it did not finish within timeout={timeout} s; they keep running "
                "(get() again waits more)") from None

    def wait(self, timeout: float | None = None) -> None:
        """Wait until every call submitted so far on this handle has finished (errors are not raised)."""
        self.executor._wait_handle(self, timeout)

    def mark_changed(self) -> None:
        """Announce that the host buffer was written directly (borrowed handles): the host copy becomes the
        only valid one, device copies move again before their next use.  Waits for calls in flight."""
        self._check_alive()
        self.executor._mark_changed(self)

    def delete(self) -> "AsyncFuture":
        """Release the handle once every call on it has finished; returns that release's future.

        Further use of the handle raises ValueError.  A borrowed array gets its writeable flag back.
        """
        if self.deleted:
            return DONE_NONE
        ex = self.executor
        with ex._lock:
            if self.deleted:
                return DONE_NONE
            idle = self.inflight == 0
            if idle:  # no call in flight on it: released now, without an operation
                self.deleted = True
                self.last_writer = None
        if not idle:
            return ex._submit_delete(self)
        self._free(False)  # a borrowed array was unlocked when the last call on it finished
        return DONE_NONE

    def _free(self, unlock: bool = True) -> None:
        if unlock and self._user is not None:
            self._unlock_user()
        if self._mems:
            self._finalizer()  # the runtimes drop the buffer's tiles before the memory is released
        # no call is in flight on a deleted handle: nothing else touches it now
        if self._copies:
            with self._mutex():
                self._copies.clear()
        self._valid = _NOWHERE
        self._host = None
        self._user = None

    def _own_view(self) -> None:
        """Before the first call that writes a borrowed handle (under the graph lock): compute through a view
        of our own, made while the user's array is writeable so that the view stays writeable when it is
        locked."""
        u = self._user
        if u is None or self._host is not u or self.readonly:
            return
        if self.inflight:  # locked by the calls in flight: unlocked for the moment it takes
            try:
                u.setflags(write=True)
                self._host = u.view()
            finally:
                u.setflags(write=False)
        else:
            self._host = u.view()

    # locking of a borrowed buffer while calls are in flight (called under the graph lock)
    def _lock_user(self) -> None:
        if self._user is not None and not self.readonly and not self.deleted:
            try:
                self._user.setflags(write=False)
            except ValueError:  # pragma: no cover - the user's array cannot be locked
                pass

    def _unlock_user(self) -> None:
        if self._user is not None and not self.readonly:
            try:
                self._user.setflags(write=True)
            except ValueError:  # pragma: no cover
                pass

    def __enter__(self) -> "MatrixHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    def __repr__(self) -> str:
        where = ",".join(self.valid_on()) or "nowhere"
        own = "borrowed" if self.borrowed else "owned"
        dead = " deleted" if self.deleted else ""
        return (f"<MatrixHandle {self.shape} {self.dtype} {own} v{self.version} valid on {where}{dead}>")


def _unkeep(mems: list, buf: np.ndarray) -> None:
    for mem in mems:
        mem.unkeep(buf)
    mems.clear()


def check_dtype(dtype: Any, name: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in _openblas.DTYPES:
        raise TypeError(f"{name} must have dtype float32, float64, complex64 or complex128; got {dt}")
    return dt
