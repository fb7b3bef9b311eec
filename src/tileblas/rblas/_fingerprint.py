"""What makes two calls' arguments the same, and what tells that an array changed: identities and fingerprints.

What it owns
    :func:`identity`: the key by which a reverse call is matched with its forward call (arrays by
    address, shape, strides and dtype; scalars by value, a NaN by its bits).  :func:`fingerprint`: the
    bytes of up to ~64 evenly spaced elements of an array (every element below 64; first and last
    always), O(1) per call.  A modification that touches none of the sampled elements goes unnoticed;
    bit-exact (``exact``) restores are additionally verified by a full checksum.  Both work on NumPy and
    on CuPy arrays (a CuPy sample is brought to the host).

What it must not touch
    The journal and the tapes (:mod:`tileblas.rblas._journal`, :mod:`tileblas.rblas._tape`).
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np

__all__ = ["shares_memory", "is_array", "address", "to_host", "identity", "fingerprint"]

_SAMPLES = 64


def is_array(v: Any) -> bool:
    """Whether ``v`` is an array (NumPy's, or a device array with dtype, shape and strides); a NumPy scalar
    (np.float64(2.0), which has all three) is a scalar."""
    if isinstance(v, np.ndarray):
        return True
    if isinstance(v, np.generic):
        return False
    return hasattr(v, "dtype") and hasattr(v, "shape") and hasattr(v, "strides")


def address(a: Any) -> int:
    """Address of the first element of a NumPy or CuPy array."""
    if isinstance(a, np.ndarray):
        return int(a.__array_interface__["data"][0])
    data = getattr(a, "data", None)
    ptr = getattr(data, "ptr", None)
    if ptr is not None:
        return int(ptr)
    return id(a)


def _extent(a: Any) -> tuple[int, int]:
    """[first, last) byte addresses an array's elements lie in."""
    lo = hi = address(a)
    for n, st in zip(a.shape, a.strides):
        if n == 0:
            return lo, lo
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    return lo, hi + a.dtype.itemsize


def shares_memory(a: Any, b: Any) -> bool:
    """Whether two arrays may share memory (their extents overlap; host arrays: NumPy's bounds test)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) or type(a) is not type(b):
        return False  # host and device memory, or two kinds of device array
    if getattr(getattr(a, "data", None), "ptr", None) is None or getattr(getattr(b, "data", None), "ptr", None) is None:
        return a is b  # no address to compare
    if a.size == 0 or b.size == 0:
        return False
    (alo, ahi), (blo, bhi) = _extent(a), _extent(b)
    return alo < bhi and blo < ahi


def to_host(a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    get = getattr(a, "get", None)
    if get is not None:
        return np.asarray(get())
    return np.asarray(a)


def _scalar_part(x: float) -> Any:
    """A float as a matching key: its value, or its bits when it is a NaN (a NaN scalar matches itself)."""
    if x == x:
        return x
    return ("nan", struct.pack("<d", x))


def identity(v: Any) -> tuple:
    """What makes two arguments 'the same' for matching a reverse call with its forward call."""
    if is_array(v):
        return ("array", address(v), v.shape, v.strides, v.dtype)
    if v is None:
        return ("none",)
    if isinstance(v, (bool, int, float, complex, np.number)):
        c = complex(v)
        return ("scalar", _scalar_part(c.real), _scalar_part(c.imag))
    if isinstance(v, str):
        return ("str", v)
    try:
        return ("seq", tuple(np.asarray(v).ravel().tolist()))
    except Exception:  # pragma: no cover - exotic objects
        return ("object", id(v))


@functools.lru_cache(maxsize=64)
def _sample_index(shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    size = int(np.prod(shape))
    flat = np.unique(np.linspace(0, size - 1, _SAMPLES).astype(np.int64))
    return np.unravel_index(flat, shape)


def fingerprint(a: Any) -> bytes:
    """A cheap fingerprint of an array's content: its bytes at up to ~64 evenly spaced elements (all of
    them below 64 elements), first and last included."""
    size = int(a.size)
    if size == 0:
        return b""
    if isinstance(a, np.ndarray):
        if a.ndim == 1:  # vectors (the common case): no flags, no reshape
            step = max(1, size // _SAMPLES)
            return a[::step].tobytes() + a[-1:].tobytes()
        flags = a.flags
        if flags.c_contiguous or flags.f_contiguous:
            flat = a.reshape(-1, order="C" if flags.c_contiguous else "F")
            step = max(1, size // _SAMPLES)
            return flat[::step].tobytes() + flat[-1:].tobytes()
        return np.ascontiguousarray(a[_sample_index(tuple(a.shape))]).tobytes()
    # CuPy and other device arrays: index with device arrays, bring the sample home
    import importlib

    xp = importlib.import_module(type(a).__module__.split(".")[0])
    idx = _sample_index(tuple(a.shape))
    return np.ascontiguousarray(to_host(a[tuple(xp.asarray(i) for i in idx)])).tobytes()
