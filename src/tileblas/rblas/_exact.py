"""Bit-exact restoration: keep only what rounding destroyed.

Design note.  The ``exact`` mode runs the same inverse computation as ``compute``, but at forward time it
also runs that inverse once on a work copy (``trial``) and compares it with the old values.  Where they
differ, the difference ``d = old - trial`` is, for a well-behaved inverse, a small integer multiple ``q``
of ``spacing(|trial|)`` (the rounding the forward call and the inverse made): for ``y + a*x`` on the
paper's data ``|q| <= 2048``, i.e. 12 bits.  We store ``q`` densely in 8, 12, 16 or 32 bits per real value, or
sparsely (index + value) when most ``q`` are zero, plus the raw old value of every "exception" (``q`` not
an integer, too large, non-finite, signed zeros).  The encoder checks, with the very floating-point
operations the decoder performs (``trial + q*spacing(|trial|)``), that every value comes back bit for bit.
Restoration re-runs the inverse in place (same routine, same arguments, same thread count, so the same
bits as the trial), adds ``q * spacing``, writes the exceptions, and verifies a checksum of the old values.

This module only encodes and decodes host (NumPy) arrays; it owns no BLAS call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tileblas.rblas._modes import RestoreError

__all__ = ["Residual", "encode", "decode_into", "checksum", "real_flat"]

_UINT = {4: np.uint32, 8: np.uint64}


def real_flat(a: np.ndarray) -> np.ndarray:
    """A 1-D real view of a contiguous array (complex as (re, im) pairs); no copy."""
    flat = a.reshape(-1, order="F" if (a.flags.f_contiguous and not a.flags.c_contiguous) else "C")
    if not np.shares_memory(flat, a) and a.size:
        raise ValueError("real_flat needs a contiguous array")
    if flat.dtype.kind == "c":
        flat = flat.view(flat.real.dtype)
    return flat


def checksum(flat: np.ndarray) -> tuple[int, int]:
    """A cheap order-sensitive checksum of the bits of a real 1-D array."""
    u = flat.view(_UINT[flat.dtype.itemsize])
    s1 = int(u.sum(dtype=np.uint64))
    odd = u[1::2]
    s2 = int((odd ^ (odd >> u.dtype.type(3))).sum(dtype=np.uint64)) if u.size > 1 else 0
    return s1, s2


_QMAX = 2**31 - 1
_CHUNK = 1 << 15  # values per block: encode/decode work in L2-sized blocks (even, for dense12)


@dataclass
class Residual:
    """The compressed rounding residual of one output array."""

    kind: str                  # 'dense8', 'dense12', 'dense16', 'dense32', 'sparse'
    size: int                  # number of real values
    data: tuple[np.ndarray, ...]
    exc_idx: np.ndarray
    exc_val: np.ndarray
    check: tuple[int, int]

    @property
    def nbytes(self) -> int:
        return int(sum(d.nbytes for d in self.data) + self.exc_idx.nbytes + self.exc_val.nbytes + 16)

    def q_block(self, s: int, e: int) -> np.ndarray:
        """The integers q of values s..e-1 (0 where an exception sits) (dense kinds)."""
        if self.kind in ("dense8", "dense16", "dense32"):
            return self.data[0][s:e]
        low, high = self.data
        h = high[s // 2: (e + 1) // 2]
        hi = np.empty(2 * h.size, dtype=np.int16)
        hi[0::2] = h & 0x0F
        hi[1::2] = h >> 4
        return ((hi[: e - s] << 8) | low[s:e]) - 2047


def _bits_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    u = _UINT[a.dtype.itemsize]
    return a.view(u) == b.view(u)


def encode(old: np.ndarray, trial: np.ndarray) -> Residual:
    """Encode ``old`` relative to ``trial`` (both real 1-D arrays of one dtype) so that
    :func:`decode_into` turns ``trial`` back into ``old`` bit for bit."""
    n = old.size
    q16 = np.empty(n, dtype=np.int32)
    exc: list[np.ndarray] = []
    with np.errstate(all="ignore"):
        for s in range(0, n, _CHUNK):
            o, t = old[s: s + _CHUNK], trial[s: s + _CHUNK]
            sp = np.spacing(np.abs(t))
            q = o - t
            q /= sp
            np.rint(q, out=q)
            q[~np.isfinite(q)] = 0
            np.clip(q, -_QMAX, _QMAX, out=q)
            back = q * sp
            back += t
            ok = _bits_equal(back, o)
            if not ok.all():
                bad = np.flatnonzero(~ok)
                q[bad] = 0
                exc.append(bad + s)
            q16[s: s + _CHUNK] = q
    idx_dtype = np.int32 if n < 2**31 else np.int64
    exc_idx = np.concatenate(exc).astype(idx_dtype) if exc else np.zeros(0, idx_dtype)
    exc_val = old[exc_idx].copy()
    qmax = int(np.abs(q16).max()) if n else 0
    nnz = int(np.count_nonzero(q16))
    ib = np.dtype(idx_dtype).itemsize
    cands: list[tuple[int, str]] = [(nnz * (ib + (2 if qmax <= 32767 else 4)), "sparse")]
    if qmax <= 127:
        cands.append((n, "dense8"))
    if qmax <= 2047:
        cands.append((n + (n + 1) // 2, "dense12"))
    if qmax <= 32767:
        cands.append((2 * n, "dense16"))
    cands.append((4 * n, "dense32"))
    _, kind = min(cands)
    if kind == "dense8":
        data: tuple[np.ndarray, ...] = (q16.astype(np.int8),)
    elif kind == "dense16":
        data = (q16.astype(np.int16),)
    elif kind == "dense32":
        data = (q16,)
    elif kind == "dense12":
        v = (q16 + 2047).astype(np.uint16)
        low = (v & 0xFF).astype(np.uint8)
        hi = (v >> 8).astype(np.uint8)
        if n & 1:
            hi = np.concatenate([hi, np.zeros(1, np.uint8)])
        data = (low, (hi[0::2] | (hi[1::2] << 4)).astype(np.uint8))
    else:
        idx = np.flatnonzero(q16).astype(idx_dtype)
        data = (idx, q16[idx].astype(np.int16 if qmax <= 32767 else np.int32))
    return Residual(kind, n, data, exc_idx, exc_val, checksum(old))


def decode_into(res: Residual, flat: np.ndarray, name: str = "output") -> None:
    """Turn ``flat`` (holding the trial values, real 1-D view of the output) back into the old values."""
    if flat.size != res.size:
        raise RestoreError(f"exact restore of {name!r}: size {flat.size} differs from {res.size}")
    dt = flat.dtype
    with np.errstate(all="ignore"):
        if res.kind == "sparse":
            idx, val = res.data
            t = flat[idx]
            flat[idx] = val.astype(dt) * np.spacing(np.abs(t)) + t
        else:
            for s in range(0, res.size, _CHUNK):
                t = flat[s: s + _CHUNK]
                back = res.q_block(s, s + t.size).astype(dt)
                back *= np.spacing(np.abs(t))
                t += back
    flat[res.exc_idx] = res.exc_val
    if checksum(flat) != res.check:
        raise RestoreError(
            f"exact restore of {name!r} failed bitwise verification (the inverse computation did not "
            "reproduce the bits of its forward-time trial)")

