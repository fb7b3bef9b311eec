"""Host memory for a GPU's copies: operands registered in place, and packing on several threads.

What it owns
    * :class:`HostRegistry` (one per process, :data:`REGISTRY`): host buffers page-locked where they are
      with ``cudaHostRegister`` (CuPy's runtime API), so that a GPU's copy engines read and write the
      tiles of an operand in place, as 2-D strided copies (``cudaMemcpy2DAsync``), and no host thread
      packs them.  A buffer is registered whole: the NumPy array that owns the operand's memory, once, the
      first time a call uses it (when it is at least ``min_bytes``), and stays registered across calls
      while it lives; a weakref finalizer unregisters it when that array is collected (NumPy calls it
      before it frees the memory).  Not registered, and packed instead: memory whose owner is not a NumPy
      array (a ``numpy.memmap``'s file map, another library's buffer), buffers CUDA refuses (a page
      registered already, memory it cannot lock), and any buffer past ``cap`` bytes registered in all
      (default half of the host's memory: page-locked memory cannot be swapped).
    Packing itself (``np.copyto`` of a large tile on several threads) is
    :func:`tileblas.kernels._cuda.pack`, shared with the asynchronous recursion.

What it must not touch
    Streams and copies (the device's), scheduling, the runtime's caches.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

import numpy as np

__all__ = ["HostRegistry", "REGISTRY", "owner_span", "byte_bounds"]

#: cudaHostRegisterPortable: the registration holds for every CUDA context (every GPU) of the process.
HOST_REGISTER_PORTABLE = 1


def owner_span(a: np.ndarray) -> tuple[np.ndarray, int, int] | None:
    """(the NumPy array that owns ``a``'s memory, its first byte, one past its last) when such an array
    exists; None when the memory belongs to something else (a file map, another library)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.base is not None or not root.flags.owndata:
        return None
    lo = root.__array_interface__["data"][0]
    return root, lo, lo + root.nbytes


def byte_bounds(a: np.ndarray) -> tuple[int, int]:
    """(first byte, one past the last byte) of the memory ``a`` spans: the same for every view of a buffer
    that covers all of it (transposes included); (lo, lo) for an empty array."""
    lo = hi = a.__array_interface__["data"][0]
    for n, s in zip(a.shape, a.strides):
        if n == 0:
            return lo, lo
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + a.itemsize


def _host_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not Linux
        return 16 << 30


class HostRegistry:
    """Host buffers page-locked in place (see the module notes).  Thread safe."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = _host_bytes() // 2 if cap is None else int(cap)
        self._lock = threading.Lock()
        self._ranges: dict[int, tuple[int, int, Any]] = {}  # lo -> (lo, hi, finalizer)
        self._refused: dict[int, Any] = {}  # lo -> weakref of the owner CUDA refused
        self.registered_bytes = 0
        self.counts = {"registered": 0, "unregistered": 0, "refused": 0}

    def ensure(self, runtime: Any, a: np.ndarray, min_bytes: int = 0) -> bool:
        """Register the buffer ``a`` lives in, if it qualifies and is not yet; True when it is registered
        (now or before)."""
        span = owner_span(a)
        if span is None:
            return False
        root, lo, hi = span
        with self._lock:
            if lo in self._ranges and self._ranges[lo][1] == hi:
                return True
            refused = self._refused.get(lo)
            if hi - lo < min_bytes or (refused is not None and refused() is root) \
                    or self.registered_bytes + (hi - lo) > self.cap:
                return False
            try:
                runtime.hostRegister(lo, hi - lo, HOST_REGISTER_PORTABLE)
            except Exception:  # noqa: BLE001 - a page registered already, memory CUDA cannot lock: pack instead
                self._refused[lo] = weakref.ref(root)
                self.counts["refused"] += 1
                return False
            fin = weakref.finalize(root, self._forget, runtime, lo)
            fin.atexit = False  # at exit the driver lets go of everything itself
            self._ranges[lo] = (lo, hi, fin)
            self.registered_bytes += hi - lo
            self.counts["registered"] += 1
            return True

    def _forget(self, runtime: Any, lo: int) -> None:
        with self._lock:
            ent = self._ranges.pop(lo, None)
            if ent is None:
                return
            self.registered_bytes -= ent[1] - ent[0]
            self.counts["unregistered"] += 1
        try:
            runtime.hostUnregister(lo)
        except Exception:  # noqa: BLE001 - the buffer is going away; nothing to keep
            pass

    def covers(self, a: np.ndarray) -> bool:
        """True when all of ``a``'s memory lies in one registered buffer."""
        if not self._ranges:
            return False
        lo, hi = byte_bounds(a)
        with self._lock:
            for rlo, rhi, _ in self._ranges.values():
                if rlo <= lo and hi <= rhi:
                    return True
        return False

    def unregister_all(self) -> None:
        """Unregister every buffer (tests; a buffer in use by a copy in flight must not be)."""
        with self._lock:
            fins = [ent[2] for ent in self._ranges.values()]
        for fin in fins:
            fin()

    def __len__(self) -> int:
        return len(self._ranges)


#: The process's registry (registrations are the process's, whichever GPU asked).
REGISTRY = HostRegistry()
