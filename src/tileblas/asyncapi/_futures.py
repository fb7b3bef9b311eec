"""Futures of asynchronous calls.

What it owns: :class:`AsyncFuture`, a :class:`concurrent.futures.Future` (so ``concurrent.futures.wait``
and ``as_completed`` accept it) that is also awaitable in asyncio and whose ``cancel`` reaches the
scheduler, which cancels the operation and every dependent that has not started.
What it must not touch: scheduling state (it asks its executor through one method, ``_cancel_op``).
"""

from __future__ import annotations

import _thread
import concurrent.futures
import os
import threading
from collections import deque
from typing import Any, Generator

__all__ = ["AsyncFuture", "DependencyError", "ForkedError", "DONE_NONE"]


class DependencyError(RuntimeError):
    """An operation did not run because an operation it reads from failed.

    The original exception is ``__cause__`` (and ``cause``); ``op`` names the failed operation.
    """

    def __init__(self, message: str, cause: BaseException | None = None, op: str = "") -> None:
        super().__init__(message)
        self.cause = cause
        self.op = op
        self.__cause__ = cause


class ForkedError(RuntimeError):
    """In a fork child: the call was in flight when the process forked.  It runs in the parent; in the child
    it never runs, its outputs are undefined, and the calls that read them fail with DependencyError."""


_base = concurrent.futures._base
_PENDING, _FINISHED = _base.PENDING, _base.FINISHED
_DONE_STATES = (_base.CANCELLED, _base.CANCELLED_AND_NOTIFIED, _base.FINISHED)
_CREATE = _thread.allocate_lock()  # guards the lazy creation of futures' conditions


def _after_fork_in_child() -> None:
    global _CREATE
    _CREATE = _thread.allocate_lock()  # another thread of the parent may have held it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Condition(threading.Condition):
    """A :class:`threading.Condition` on a fresh RLock, built without the generic constructor's probing of
    the lock (one per future: futures are made on every call's hot path)."""

    def __init__(self) -> None:  # noqa: D107 - see class docstring
        lock = _thread.RLock()
        self._lock = lock
        self.acquire = lock.acquire
        self.release = lock.release
        self._release_save = lock._release_save
        self._acquire_restore = lock._acquire_restore
        self._is_owned = lock._is_owned
        self._waiters = deque()


# The fast constructor below sets exactly the attributes Future.__init__ sets; anything else uses the base.
_FAST_INIT = sorted(vars(concurrent.futures.Future())) == sorted(
    ["_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks"]) and \
    sorted(vars(threading.Condition())) == sorted(vars(_Condition()))


class AsyncFuture(concurrent.futures.Future):
    """The future of one asynchronous call.

    Follows :class:`concurrent.futures.Future` (``result``, ``exception``, ``done``, ``running``,
    ``cancel``, ``cancelled``, ``add_done_callback``) and adds ``ready()`` (a non-blocking readiness check,
    the same as ``done()``) and ``await`` support.  ``cancel()`` succeeds while the call has not started and
    then cancels every call that depends on it and has not started either.
    """

    if _FAST_INIT:
        # Most futures are resolved before anyone waits on them or adds a callback: their condition variable
        # is made on first use only (under a global lock, so that a waiter making it and a setter finding
        # none cannot miss each other), and done()/result() of a finished future need no lock.
        # A new future is empty: its state and result are the class's defaults until set, and its condition
        # variable and lists of waiters and callbacks are made on first use (a call's future is made on every
        # call's hot path).  Properties, not __getattr__: that would slow every attribute access.
        _state = _PENDING
        _result = None
        _exception = None
        _cond = None

        def __init__(self) -> None:  # noqa: D107 - concurrent.futures.Future's, everything made on first use
            pass

        @property
        def _condition(self) -> "_Condition":
            c = self._cond
            if c is None:
                with _CREATE:
                    c = self._cond
                    if c is None:
                        c = self._cond = _Condition()
            return c

        @property
        def _waiters(self) -> list:
            return self.__dict__.setdefault("_waiters_", [])  # atomic: two threads get the same list

        @property
        def _done_callbacks(self) -> list:
            return self.__dict__.setdefault("_done_callbacks_", [])

        def done(self) -> bool:
            return self._state in _DONE_STATES

        def result(self, timeout: float | None = None) -> Any:
            if self._state == _FINISHED and self._exception is None:
                return self._result
            return self._wait_result(timeout)

        def set_result(self, result: Any) -> None:
            with _CREATE:
                if self._cond is None and self._state not in _DONE_STATES:
                    # no condition: nobody waits and no callback was added (both make it first)
                    self._result = result
                    self._state = _FINISHED
                    return
            super().set_result(result)

        def set_exception(self, exception: BaseException | None) -> None:
            with _CREATE:
                if self._cond is None and self._state not in _DONE_STATES:
                    self._exception = exception
                    self._state = _FINISHED
                    return
            super().set_exception(exception)

    else:  # pragma: no cover - a Python whose Future has other fields

        def result(self, timeout: float | None = None) -> Any:
            return self._wait_result(timeout)

    def _wait_result(self, timeout: float | None) -> Any:
        try:
            return concurrent.futures.Future.result(self, timeout)
        except TimeoutError as exc:
            if str(exc) or self.done():
                raise  # the call's own TimeoutError
            raise TimeoutError(self._timeout_message(timeout)) from None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            return super().exception(timeout)
        except TimeoutError as exc:
            if str(exc):
                raise
            raise TimeoutError(self._timeout_message(timeout)) from None

    def _timeout_message(self, timeout: float | None) -> str:
        return (f"{self!r} did not finish within timeout={timeout} s; the call keeps running: wait again, "
                "or cancel() it (possible until it starts)")

    def ready(self) -> bool:
        """True once the call finished (successfully, with an error, or cancelled); never blocks."""
        return self.done()

    def cancel(self) -> bool:
        op = getattr(self, "_op", None)
        if op is None:
            return super().cancel()
        return op.executor._cancel_op(op)

    def _fail_after_fork(self, exc: BaseException) -> None:
        """In a fork child: finish this future with ``exc`` (unless it is final), on a fresh condition (a thread
        of the parent may have held the old one), without the waiters and callbacks of the parent's threads."""
        if self._state in _DONE_STATES:
            return
        if _FAST_INIT:
            self._cond = None
            self.__dict__.pop("_waiters_", None)
            self.__dict__.pop("_done_callbacks_", None)
        else:  # pragma: no cover - a Python whose Future has other fields
            self._condition = threading.Condition()
            self._waiters = []
            self._done_callbacks = []
        self._exception = exc
        self._state = _FINISHED

    def _base_cancel(self) -> bool:
        return concurrent.futures.Future.cancel(self)

    def __await__(self) -> Generator[Any, None, Any]:
        import asyncio  # imported on first await only: asyncio is slow to import

        return asyncio.wrap_future(self).__await__()

    def __repr__(self) -> str:
        op = getattr(self, "_op", None)
        name = f" {op.name}" if op is not None else ""
        return f"<AsyncFuture{name} state={self._state.lower()}>"


#: The future of work that was already done with result None (e.g. deleting a handle with no call in flight):
#: one shared, finished future; a finished future cannot change, so sharing it is safe.
DONE_NONE = AsyncFuture()
DONE_NONE.set_result(None)
