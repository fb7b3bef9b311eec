"""Where the state of a reversible call lives: the journal of records of each thread and asyncio task.

Design note.  Every forward call ``f<routine>`` pushes one :class:`Record` on the journal of the calling
thread, or of the calling asyncio task when one runs (a LIFO stack): the routine, its bound arguments (references, no copies), what was done (the
:class:`~tileblas.rblas.Decision`), the state the reverse needs (checkpoint copies, the compressed
residual, a saved diagonal) and a fingerprint of every array argument as the forward call left it
(:mod:`tileblas.rblas._fingerprint`).  The record is tagged with the innermost active
:class:`~tileblas.rblas.Tape`, if any.

A reverse call ``r<routine>`` with the same arguments reverses **the most recent forward call not yet
reversed in this thread or task**; it must match that record (same routine, same arrays by address, shape,
strides and dtype, same scalars) or one of the misuse errors is raised and nothing is changed:
:class:`NotForwardedError`, :class:`AlreadyReversedError`, :class:`OrderError` (a later call is still
live), :class:`ArgumentMismatchError`, :class:`ModifiedError` (fingerprint of an argument changed).

Whose journal.  The journal is held in a context variable and belongs to one thread and one asyncio task
(None outside a task).  Tasks of one event loop share a thread, so a per-thread journal let a task's
tape record, and undo, another task's calls made while it awaited; and a task starts with a copy of its
creator's context, so the variable alone would hand it its creator's journal: :func:`journal` checks the
owner and starts a new journal where the variable's is another thread's or task's.  A task's journal ends
with its context.  Plain threads keep one journal each, as before (a thread's own context persists).
"""

from __future__ import annotations

import collections
import contextvars
import sys
import threading
import weakref
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
    journal: "_Journal | None" = None  # the journal holding it (set when pushed)

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


def _task() -> Any:
    """The running asyncio task, or None (no loop running in this thread, or asyncio never imported)."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return None
    loop = aio.events._get_running_loop()
    return None if loop is None else aio.current_task(loop)


class _Journal:
    """The records of one thread, or of one asyncio task."""

    def __init__(self, thread: int, task: Any) -> None:
        self.stack: list[Record] = []
        self.reversed: collections.deque = collections.deque(maxlen=256)
        self.tapes: list[Tape] = []
        self.last: Decision | None = None
        self.seq = 0
        self.thread = thread
        self.task = None if task is None else weakref.ref(task)

    def owned_by(self, thread: int, task: Any) -> bool:
        mine = None if self.task is None else self.task()
        return self.thread == thread and mine is task

    def ended(self) -> bool:
        """True when the journal's asyncio task has finished: nothing can add to it or reverse it now."""
        if self.task is None:
            return False
        t = self.task()
        return t is None or t.done()


_current: contextvars.ContextVar[_Journal] = contextvars.ContextVar("tileblas_rblas_journal")


def journal() -> _Journal:
    """The journal of the calling thread, or of the calling asyncio task."""
    j = _current.get(None)
    thread, task = threading.get_ident(), _task()
    if j is None or not j.owned_by(thread, task):
        j = _Journal(thread, task)
        _current.set(j)
    return j


def last_decision() -> Decision | None:
    """The :class:`Decision` of the most recent forward call in this thread or asyncio task (None
    before any)."""
    return journal().last


def pending() -> list[Decision]:
    """Decisions of this thread's (or asyncio task's) forward calls not yet reversed, oldest first."""
    return [r.decision for r in journal().stack]


def discard() -> int:
    """Forget every live record of this thread or asyncio task (commit: the calls can no longer be
    reversed).

    Returns
    -------
    int
        Number of records dropped.  Active tapes are emptied too.
    """
    j = journal()
    n = len(j.stack)
    j.stack.clear()
    for t in j.tapes:
        t._records.clear()
    return n


def active_tape() -> "Tape | None":
    tapes = journal().tapes
    return tapes[-1] if tapes else None


def tape_mode() -> str | None:
    for t in reversed(journal().tapes):
        if t.mode is not None:
            return t.mode
    return None


def _push(rec: Record, j: "_Journal | None" = None) -> None:
    """Push ``rec`` on the journal ``j`` (the caller's, found already), else on this thread's or task's."""
    if j is None:
        j = journal()
    j.seq += 1
    rec.seq = j.seq
    rec.tape = j.tapes[-1] if j.tapes else None
    rec.journal = j
    j.stack.append(rec)
    if rec.tape is not None:
        rec.tape._add(rec)
    j.last = rec.decision


def _pop(rec: Record) -> None:
    j = rec.journal if rec.journal is not None else journal()
    stack = j.stack
    if stack and stack[-1] is rec:
        stack.pop()
    else:
        stack.remove(rec)
    if rec.tape is not None:
        rec.tape._remove(rec)
    j.reversed.append(rec.key)
