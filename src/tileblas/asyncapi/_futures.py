"""Futures of asynchronous calls.

What it owns: :class:`AsyncFuture`, a :class:`concurrent.futures.Future` (so ``concurrent.futures.wait``
and ``as_completed`` accept it) that is also awaitable in asyncio and whose ``cancel`` reaches the
scheduler, which cancels the operation and every dependent that has not started.
What it must not touch: scheduling state (it asks its executor through one method, ``_cancel_op``).
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Generator

__all__ = ["AsyncFuture", "DependencyError"]


class DependencyError(RuntimeError):
    """An operation did not run because an operation it reads from failed.

    The original exception is ``__cause__`` (and ``cause``); ``op`` names the failed operation.
    """

    def __init__(self, message: str, cause: BaseException | None = None, op: str = "") -> None:
        super().__init__(message)
        self.cause = cause
        self.op = op
        self.__cause__ = cause


class AsyncFuture(concurrent.futures.Future):
    """The future of one asynchronous call.

    Follows :class:`concurrent.futures.Future` (``result``, ``exception``, ``done``, ``running``,
    ``cancel``, ``cancelled``, ``add_done_callback``) and adds ``ready()`` (a non-blocking readiness check,
    the same as ``done()``) and ``await`` support.  ``cancel()`` succeeds while the call has not started and
    then cancels every call that depends on it and has not started either.
    """



    def ready(self) -> bool:
        """True once the call finished (successfully, with an error, or cancelled); never blocks."""
        return self.done()

    def cancel(self) -> bool:
        op = getattr(self, "_op", None)
        if op is None:
            return super().cancel()
        return op.executor._cancel_op(op)

    def _base_cancel(self) -> bool:
        return concurrent.futures.Future.cancel(self)

    def __await__(self) -> Generator[Any, None, Any]:
        import asyncio  # imported on first await only: asyncio is slow to import

        return asyncio.wrap_future(self).__await__()

    def __repr__(self) -> str:
        op = getattr(self, "_op", None)
        name = f" {op.name}" if op is not None else ""
        return f"<AsyncFuture{name} state={self._state.lower()}>"
