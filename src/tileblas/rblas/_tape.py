"""Tapes: record the forward calls made while a tape is active, and undo them in LIFO order.

A :class:`Tape` records the forward calls made while it is active; :meth:`Tape.undo` reverses them in
LIFO order.  Tapes nest (an outer tape's undo also undoes what inner tapes recorded); a tape may be undone
only when nothing recorded after its own calls is still live.  The records themselves live in the
journal of the thread or asyncio task that made them (:mod:`tileblas.rblas._journal`): a tape records
the calls of the thread or task that entered it, never those of another task awaiting beside it, and is
undone there (or anywhere once that task has ended).
"""

from __future__ import annotations

from typing import Any

from tileblas.rblas._journal import Record, _Journal, journal
from tileblas.rblas._modes import AlreadyReversedError, Decision, OrderError, _check_mode

__all__ = ["Tape"]


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
        self._journal: _Journal | None = None  # of the thread or task that entered it
        self._undone = False

    # -------------------------------------------------------------------------------- context manager
    def __enter__(self) -> "Tape":
        j = journal()
        if self in j.tapes or (self._journal is not None and self in self._journal.tapes):
            raise ValueError("tape is already active (a Tape cannot be entered twice at once)")
        self.parent = j.tapes[-1] if j.tapes else None
        self._journal = j
        self._undone = False
        j.tapes.append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        tapes = self._journal.tapes if self._journal is not None else []
        if tapes and tapes[-1] is self:
            tapes.pop()
        elif self in tapes:  # pragma: no cover - exits out of order
            tapes.remove(self)
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

        j = self._journal
        if j is not None and j is not journal() and not j.ended():
            raise OrderError("a Tape must be undone in the thread or asyncio task that recorded it "
                             "(or once that task has ended)")
        if not self._records:
            if self._undone:
                raise AlreadyReversedError("tape was already undone")
            self._undone = True
            return 0
        stack = j.stack if j is not None else journal().stack
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
            stack = rec.journal.stack if rec.journal is not None else journal().stack
            if rec in stack:
                stack.remove(rec)
            self._remove(rec)
            n += 1
        return n
