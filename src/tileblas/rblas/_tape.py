"""Where the state of a reversible call lives: the per-thread journal, records, fingerprints and Tape.

Design note.  Every forward call ``f<routine>`` pushes one :class:`Record` on the journal of the calling
thread (a LIFO stack): the routine, its bound arguments (references, no copies), what was done (the
:class:`~tileblas.rblas.Decision`), the state the reverse needs (checkpoint copies, the compressed
residual, a saved diagonal) and a cheap fingerprint of every array argument as the forward call left it.
The record is tagged with the innermost active :class:`Tape`, if any.

A reverse call ``r<routine>`` with the same arguments reverses **the most recent forward call not yet
reversed on this thread**; it must match that record (same routine, same arrays by address, shape,
strides and dtype, same scalars) or one of the misuse errors is raised and nothing is changed:
:class:`NotForwardedError`, :class:`AlreadyReversedError`, :class:`OrderError` (a later call is still
live), :class:`ArgumentMismatchError`, :class:`ModifiedError` (fingerprint of an argument changed).

Fingerprints are the bytes of up to ~64 evenly spaced elements of each array argument (every element
below 64; first and last always): O(1) per call.  A modification that touches none of the sampled
elements goes unnoticed; bit-exact (``exact``) restores are additionally verified by a full checksum.

A :class:`Tape` records the forward calls made while it is active; :meth:`Tape.undo` reverses them in
LIFO order.  Tapes nest (an outer tape's undo also undoes what inner tapes recorded); a tape may be undone
only when nothing recorded after its own calls is still live.
"""

from __future__ import annotations

import collections
import functools
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tileblas.rblas._modes import (
    AlreadyReversedError,
    Decision,
    OrderError,
    _check_mode,
)

__all__ = ["Record", "Tape", "journal", "last_decision", "discard", "pending"]

_SAMPLES = 64


def is_array(v: Any) -> bool:
    if isinstance(v, np.ndarray):
        return True
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


@dataclass(eq=False)
class Record:
    """One forward call, as the journal keeps it."""

    routine: str
    spec: Any
    prefix: str
    bound: dict[str, Any]
    key_: Any  # the matching key, or a function computing it (evaluated on first use)
    decision: Decision
    state: dict[str, Any]
    inplace: tuple[str, ...]
    prints: dict[str, bytes]
    tape: "Tape | None" = None
    seq: int = 0
    pre_prints: dict[str, bytes] = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        """What a reverse call must match (see ``identity``); computed on first use, since arrays are
        identified by address, shape, strides and dtype, which an array keeps."""
        if callable(self.key_):
            self.key_ = self.key_()
        return self.key_

    def describe(self) -> str:
        parts = []
        for name, v in self.bound.items():
            if is_array(v):
                parts.append(f"{name}=<{v.dtype} array {tuple(v.shape)}>")
            else:
                parts.append(f"{name}={v!r}")
        return f"f{self.routine}({', '.join(parts)})"

    @property
    def nbytes(self) -> int:
        return self.decision.extra_bytes


class _Journal(threading.local):
    def __init__(self) -> None:
        self.stack: list[Record] = []
        self.reversed: collections.deque = collections.deque(maxlen=256)
        self.tapes: list[Tape] = []
        self.last: Decision | None = None
        self.seq = 0


_journal = _Journal()


def journal() -> _Journal:
    """The calling thread's journal."""
    return _journal


def last_decision() -> Decision | None:
    """The :class:`Decision` of the most recent forward call on this thread (None before any)."""
    return _journal.last


def pending() -> list[Decision]:
    """Decisions of this thread's forward calls not yet reversed, oldest first."""
    return [r.decision for r in _journal.stack]


def discard() -> int:
    """Forget every live record of this thread (commit: the calls can no longer be reversed).

    Returns
    -------
    int
        Number of records dropped.  Active tapes are emptied too.
    """
    n = len(_journal.stack)
    _journal.stack.clear()
    for t in _journal.tapes:
        t._records.clear()
    return n


def active_tape() -> "Tape | None":
    return _journal.tapes[-1] if _journal.tapes else None


def tape_mode() -> str | None:
    for t in reversed(_journal.tapes):
        if t.mode is not None:
            return t.mode
    return None


class Tape:
    """Records forward calls; :meth:`undo` reverses them in LIFO order.

    Parameters
    ----------
    mode : {'checkpoint', 'compute', 'auto', 'exact'}, optional
        Mode of the forward calls made while this tape is active (a call's own ``mode=`` wins).
    rollback_on_error : bool, optional
        If True, an exception leaving the ``with`` block undoes everything the tape recorded.

    Examples
    --------
    >>> import numpy as np
    >>> from tileblas import rblas
    >>> x, y = np.ones(4), np.zeros(4)
    >>> with rblas.Tape(mode="compute") as tape:
    ...     _ = rblas.fdaxpy(x, y, a=2.0)
    ...     _ = rblas.fdscal(3.0, y)
    >>> tape.undo()
    2
    >>> y
    array([0., 0., 0., 0.])
    """

    def __init__(self, mode: str | None = None, rollback_on_error: bool = False) -> None:
        self.mode = None if mode is None else _check_mode(mode)
        self.rollback_on_error = bool(rollback_on_error)
        self.parent: Tape | None = None
        self._records: list[Record] = []
        self._owner: int | None = None
        self._undone = False

    # -------------------------------------------------------------------------------- context manager
    def __enter__(self) -> "Tape":
        if self in _journal.tapes:
            raise ValueError("tape is already active (a Tape cannot be entered twice at once)")
        self.parent = active_tape()
        self._owner = threading.get_ident()
        self._undone = False
        _journal.tapes.append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if _journal.tapes and _journal.tapes[-1] is self:
            _journal.tapes.pop()
        elif self in _journal.tapes:  # pragma: no cover - exits out of order
            _journal.tapes.remove(self)
        if exc_type is not None and self.rollback_on_error and self._records:
            self.undo()

    # -------------------------------------------------------------------------------- inspection
    def owns(self, rec: Record) -> bool:
        t = rec.tape
        while t is not None:
            if t is self:
                return True
            t = t.parent
        return False

    def _add(self, rec: Record) -> None:
        t: Tape | None = self
        while t is not None:
            t._records.append(rec)
            t = t.parent

    def _remove(self, rec: Record) -> None:
        t: Tape | None = rec.tape
        while t is not None:
            try:
                t._records.remove(rec)
            except ValueError:
                pass
            t = t.parent

    @property
    def decisions(self) -> list[Decision]:
        """Decisions of the live (not yet undone) calls this tape recorded, oldest first."""
        return [r.decision for r in self._records]

    @property
    def nbytes(self) -> int:
        """Bytes held for the live calls (checkpoints, residuals)."""
        return sum(r.nbytes for r in self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"Tape(mode={self.mode!r}, calls={len(self)}, nbytes={self.nbytes})"

    # -------------------------------------------------------------------------------- undo
    def undo(self) -> int:
        """Reverse every live call this tape recorded, most recent first.

        Returns
        -------
        int
            Number of calls reversed.

        Raises
        ------
        OrderError
            A forward call made after this tape's calls (outside it) is still live: reverse it first.
        AlreadyReversedError
            The tape was undone already and has recorded nothing since.
        """
        from tileblas.rblas._registry import _restore_record

        if self._owner is not None and self._owner != threading.get_ident():
            raise OrderError("a Tape must be undone on the thread that recorded it")
        if not self._records:
            if self._undone:
                raise AlreadyReversedError("tape was already undone")
            self._undone = True
            return 0
        stack = _journal.stack
        first = min(stack.index(r) for r in self._records)
        for r in stack[first:]:
            if not self.owns(r):
                raise OrderError(
                    f"cannot undo the tape: {r.describe()} was recorded after the tape's calls and is "
                    "not reversed yet (LIFO order); reverse it first")
        n = 0
        while len(stack) > first:
            rec = stack[-1]
            _restore_record(rec)
            n += 1
        self._undone = True
        return n

    def discard(self) -> int:
        """Forget this tape's live calls (commit); they can no longer be reversed."""
        n = 0
        for rec in list(self._records):
            if rec in _journal.stack:
                _journal.stack.remove(rec)
            self._remove(rec)
            n += 1
        return n


def _push(rec: Record) -> None:
    _journal.seq += 1
    rec.seq = _journal.seq
    rec.tape = active_tape()
    _journal.stack.append(rec)
    if rec.tape is not None:
        rec.tape._add(rec)
    _journal.last = rec.decision


def _pop(rec: Record) -> None:
    stack = _journal.stack
    if stack and stack[-1] is rec:
        stack.pop()
    else:
        stack.remove(rec)
    if rec.tape is not None:
        rec.tape._remove(rec)
    _journal.reversed.append(rec.key)

