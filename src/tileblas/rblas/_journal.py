"""Where the state of a reversible call lives: the per-thread journal of records.

Design note.  Every forward call ``f<routine>`` pushes one :class:`Record` on the journal of the calling
thread (a LIFO stack): the routine, its bound arguments (references, no copies), what was done (the
:class:`~tileblas.rblas.Decision`), the state the reverse needs (checkpoint copies, the compressed
residual, a saved diagonal) and a fingerprint of every array argument as the forward call left it
(:mod:`tileblas.rblas._fingerprint`).  The record is tagged with the innermost active
:class:`~tileblas.rblas.Tape`, if any.

A reverse call ``r<routine>`` with the same arguments reverses **the most recent forward call not yet
reversed on this thread**; it must match that record (same routine, same arrays by address, shape,
strides and dtype, same scalars) or one of the misuse errors is raised and nothing is changed:
:class:`NotForwardedError`, :class:`AlreadyReversedError`, :class:`OrderError` (a later call is still
live), :class:`ArgumentMismatchError`, :class:`ModifiedError` (fingerprint of an argument changed).
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tileblas.rblas._fingerprint import is_array
from tileblas.rblas._modes import Decision

if TYPE_CHECKING:  # pragma: no cover
    from tileblas.rblas._tape import Tape

__all__ = ["Record", "journal", "last_decision", "discard", "pending", "active_tape", "tape_mode"]


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
