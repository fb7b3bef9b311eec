"""Operations and the dependency graph between them.

What it owns: :class:`Op` (one asynchronous call: its run function, the handles it reads and writes, its
state and its dependents) and :func:`link`, which adds an operation to the graph.  Dependencies are
derived per handle, as in a superscalar processor's register renaming without the renaming:

* read-after-write (RAW): a reader waits for the handle's last writer -- a *data* edge;
* write-after-read (WAR): a writer waits for every reader since the last write -- an *order* edge;
* write-after-write (WAW): a writer waits for the last writer -- an *order* edge.

Failure and cancellation travel along data edges only (a call that overwrites a handle does not need the
value a failed call should have left there); order edges only delay.  A failure also reaches calls
submitted later that read what the failed call should have written (until something overwrites it); a
cancellation reaches the dependents that exist when it happens, and a cancelled call is otherwise as if it
had never been submitted (later readers see the value from before it).  All functions here run under the
executor's graph lock.
What it must not touch: backends, policies and devices (the executor owns those).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from tileblas.asyncapi._futures import AsyncFuture
    from tileblas.asyncapi._handles import MatrixHandle

__all__ = ["Op", "link", "forget", "PENDING", "READY", "RUNNING", "DONE", "FAILED", "CANCELLED", "FINISHED"]

PENDING, READY, RUNNING, DONE, FAILED, CANCELLED = range(6)
FINISHED = DONE  # states >= FINISHED are final


class Op:
    """One asynchronous call in the dependency graph.

    Attributes
    ----------
    name : str
        Routine name ("dgemm", "read", ...), for messages.
    run : callable
        ``run(device)`` computes the call on a backend's device (``None``: on the host through the tile
        runtime) and returns the future's result.
    reads, writes : tuple of MatrixHandle
        Handles the call reads and writes (an in/out operand is in both).
    flops : float
        Real floating-point operations, for the "cost" policy's estimates.
    host_only : bool
        True when the call can only run where the host memory is (Level 1/2 and bookkeeping).
    inline : bool
        True for light bookkeeping calls (read-back, delete) that run in whatever thread makes them ready,
        and for BLAS calls too small to hand to a worker (set when they become ready).
    blas : bool
        True for the BLAS call functions' operations (candidates for running inline when tiny).
    """

    __slots__ = ("executor", "name", "run", "reads", "writes", "flops", "host_only", "inline", "future",
                 "state", "npending", "dependents", "backend", "estimate", "error", "doom", "blas")

    def __init__(self, executor: Any, name: str, run: Callable[[Any], Any],
                 reads: tuple[MatrixHandle, ...], writes: tuple[MatrixHandle, ...], flops: float,
                 future: "AsyncFuture", host_only: bool = False, inline: bool = False, blas: bool = False) -> None:
        self.executor = executor
        self.name = name
        self.run = run
        self.reads = reads
        self.writes = writes
        self.flops = flops
        self.host_only = host_only
        self.inline = inline
        self.future = future
        self.state = PENDING
        self.npending = 0
        self.dependents: list[tuple[Op, bool]] | tuple = ()  # a list once an operation waits for this one
        self.backend: Any = None
        self.estimate = 0.0
        self.error: BaseException | None = None
        # (final state, error) once the op is known not to run (a data dependency failed or it was
        # cancelled); it stays in the graph until its own dependencies finish so that order edges hold.
        self.doom: tuple[int, BaseException | None] | None = None
        self.blas = blas

    def handles(self) -> tuple:
        return self.reads + self.writes

    def release(self) -> None:
        """Drop references that keep data alive once the call is final."""
        self.run = None  # type: ignore[assignment]
        self.dependents = ()
        self.reads = self.writes = ()
        # the op keeps its future, the final future no longer needs its op (cancel() of a final future is
        # the base class's): no reference cycle, so a finished call is freed by reference counting, without
        # waiting for the cyclic garbage collector
        self.future._op = None

    def __repr__(self) -> str:
        states = ("pending", "ready", "running", "done", "failed", "cancelled")
        return f"<Op {self.name} {states[self.state]}>"


def link(op: Op) -> tuple[int, BaseException | None, Op | None]:
    """Add ``op`` to the graph.

    Returns (doom state, cause, culprit): doom state is 0 when ``op`` may run, FAILED or CANCELLED when
    it reads data that a failed or cancelled operation should have produced (cause: that error).
    ``op.npending`` counts the unfinished operations it waits for, whether it will run or not, and the
    op becomes the handles' last writer / one of their readers.
    """
    writes = op.writes
    for h in op.reads:
        if h.last_writer is not None:
            break
    else:
        for h in writes:
            if h.last_writer is not None or h.readers:
                break
        else:  # the common case of fresh handles: nothing to wait for, no dependency to record
            _track(op, writes)
            return _MAY_RUN
    deps: dict[Op, bool] = {}
    for h in op.reads:
        w = h.last_writer
        if w is not None:
            deps[w] = True
    for h in writes:
        w = h.last_writer
        if w is not None and w not in deps:
            deps[w] = False
        for r in h.readers or ():
            if r is not op and r not in deps:
                deps[r] = False
    doom, cause, culprit = 0, None, None
    for dep, data in deps.items():
        st = dep.state
        if data and not doom:
            if st == FAILED:
                doom, cause, culprit = st, dep.error, dep
            elif dep.doom is not None and dep.doom[0] == FAILED:
                doom, cause, culprit = FAILED, dep.doom[1], dep
        if st >= FINISHED:
            continue
        if dep.dependents:
            dep.dependents.append((op, data))
        else:
            dep.dependents = [(op, data)]
        op.npending += 1
    _track(op, writes)
    return doom, cause, culprit


_MAY_RUN = (0, None, None)


def _track(op: Op, writes: tuple) -> None:
    """Update per-handle state: readers since the last write (an ordered set, made on first use), and the
    last writer."""
    for h in op.reads:
        if h not in writes:
            r = h.readers
            if r is None:
                h.readers = {op: None}
            else:
                r[op] = None  # removed again when op is final (see forget)
    for h in writes:
        h.last_writer = op
        if h.readers:
            h.readers = None


def forget(op: Op) -> None:
    """Remove a final ``op`` from the reader sets of its handles (so finished calls are not kept alive)."""
    for h in op.reads:
        r = h.readers
        if r:
            r.pop(op, None)

