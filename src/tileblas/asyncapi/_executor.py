"""The executor: the frontend that turns calls into operations, tracks their dependencies and runs them.

What it owns
    * The dependency graph (one lock, :mod:`._graph`) and the life of every operation:
      pending (waiting for dependencies) -> ready (queued on a backend) -> running -> done / failed /
      cancelled.  An operation becomes ready when its last dependency finishes, and only then does the
      policy choose its backend (late binding: the estimates are as fresh as they can be).
    * Backends: one worker thread with a FIFO queue per device for the "cost" policy (each CPU worker
      with single-threaded BLAS is one backend, as in the paper); for "demand", worker threads that hand
      Level-3 calls to the tile runtime.
    * Error propagation and cancellation: a failure reaches the failing call's future and, as
      :class:`DependencyError`, the future of every call that reads what it should have written (at once,
      without waiting); cancelling a future cancels the calls that read its output and have not started.
      A call that will not run still waits for its own dependencies before it leaves the graph, so the
      order edges (write-after-read, write-after-write) of later calls hold.
    * Light bookkeeping calls (read-back, delete) run inline in the thread that makes them ready.
    * Processes: after fork() the child has none of the parent's worker threads.  A handler registered with
      ``os.register_at_fork`` gives every executor of the child a fresh lock and fresh backend queues,
      finishes every call that was not final at the fork (pending, queued or running: it runs in the
      parent) with :class:`ForkedError` -- at once, so no waiter in the child hangs -- and the next call
      submitted in the child starts new worker threads.  Handles those calls wrote read as after a failed
      call (DependencyError) until something overwrites them; every other handle works as before.
    * No threads to spare: where a worker thread cannot be started (``RuntimeError: can't start new
      thread``, e.g. RLIMIT_NPROC reached), the executor runs every call on the thread that makes it ready
      (as ``synchronous=True``: the future it returns is complete), with one :class:`RuntimeWarning` naming
      the limit; each later submission tries to start the missing threads again, and once they start the
      calls go to them as before.

What it must not touch: kernels' internals, device internals (it uses the Device interface only).
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Iterable

import numpy as np

from tileblas.kernels import _openblas
from tileblas.asyncapi._futures import DONE_NONE, AsyncFuture, DependencyError, ForkedError
from tileblas.asyncapi._graph import CANCELLED, DONE, FAILED, FINISHED, PENDING, READY, RUNNING, Op, forget, link
from tileblas.asyncapi._handles import HOST, MatrixHandle, check_dtype, take_transfers
from tileblas.asyncapi._policies import POLICIES, CostPolicy, DemandPolicy

__all__ = ["Executor", "Backend", "get_executor", "set_executor"]

_perf = time.perf_counter
_RUNNING = concurrent.futures._base.RUNNING
_STOP = object()
#: dtype of the scalar types that :meth:`Executor.empty` is usually given (np.float64, ...)
_DTYPE_OF = {t: np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128, float, complex)}
#: ids of the supported dtypes' objects (NumPy's built-in ones, shared by arrays): checked without NumPy code
_DTYPE_IDS = frozenset(id(dt) for dt in _openblas.DTYPES)


class Backend:
    """A device and the worker thread(s) that run the calls queued for it.

    Attributes used by policies: ``speed`` (flop/s), ``bandwidth`` (bytes/s), ``queued_est`` (s of queued
    work), ``nqueued``, ``running``, ``running_start``, ``running_est``, ``spent`` (s computed so far),
    ``ntasks``.
    """

    def __init__(self, executor: "Executor", device: Any, name: str, threads: int = 1) -> None:
        # weak: the worker threads hold the backend, and must not keep a dropped executor alive
        self._executor = weakref.ref(executor)
        self.device = device
        self.name = name
        self.host_memory = device is None or bool(device.host_memory)
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.speed = 20e9
        self.bandwidth = 10e9
        self.queued_est = 0.0
        self.nqueued = 0
        self.running = 0
        self.running_start = 0.0
        self.running_est = 0.0
        self.spent = 0.0
        self.ntasks = 0
        self.nthreads = threads
        self.threads: list[threading.Thread] = []

    @property
    def executor(self) -> "Executor":
        ex = self._executor()
        if ex is None:  # pragma: no cover - the executor holds its backends
            raise RuntimeError("the executor of this backend was dropped")
        return ex

    def start(self) -> None:
        """Start the worker threads this backend lacks.  RuntimeError where not one of them runs (no thread
        can be started); a backend that has at least one runs its calls on those it has."""
        while len(self.threads) < self.nthreads:
            t = threading.Thread(target=_worker_loop, args=(self._executor, self), daemon=True,
                                 name=f"tileblas-async-{self.name}-{len(self.threads)}")
            try:
                t.start()
            except RuntimeError:
                if self.threads:
                    return
                raise
            self.threads.append(t)

    def stop(self) -> None:
        for _ in self.threads:
            self.queue.put(_STOP)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "speed_gflops": self.speed / 1e9, "tasks": self.ntasks,
                "busy_s": self.spent, "queued": self.nqueued}

    def __repr__(self) -> str:
        return f"<Backend {self.name} {self.speed / 1e9:.1f} GFLOP/s>"


def _worker_loop(ref: "weakref.ref[Executor]", b: Backend) -> None:
    """A backend's worker thread.  Between operations it holds its executor only weakly: a dropped executor
    is collected, and its finalizer stops the threads (queued operations keep the executor alive)."""
    get = b.queue.get
    while True:
        op = get()
        if op is _STOP:
            return
        ex = ref()
        if ex is None:  # pragma: no cover - an operation holds its executor
            return
        ex._run_queued(b, op)
        del ex, op


def _stop_workers(backends: "list[tuple[queue.SimpleQueue, int]]") -> None:
    """Finalizer of a dropped executor: one stop marker per worker thread."""
    for q, n in backends:
        for _ in range(n):
            q.put(_STOP)


#: the executors of this process (for the fork handler)
_EXECUTORS: "weakref.WeakSet[Executor]" = weakref.WeakSet()


def _no_thread_message(error: BaseException) -> str:
    """The warning of an executor that cannot start its worker threads, naming the limit in force."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        limit = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    except (ImportError, AttributeError, OSError, ValueError):  # pragma: no cover - not Linux/BSD
        limit = "unknown"
    return (f"tileblas.asyncapi: no worker thread can be started ({error}; RLIMIT_NPROC, the user's process "
            f"and thread limit, is {limit}): calls run on the calling thread (each future is complete when "
            "the call returns) until a thread can be started")


def _after_fork_in_child() -> None:
    global _DEFAULT_LOCK
    _DEFAULT_LOCK = threading.Lock()  # another thread of the parent may have held it
    for ex in list(_EXECUTORS):
        ex._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Executor:
    """Runs asynchronous BLAS calls on a set of backends.

    Parameters
    ----------
    devices : list of Device, optional
        The backends' devices (default: one single-threaded CPU worker per core,
        :func:`tileblas.devices.host_devices`).  Used by the "cost" policy.
    policy : {"cost", "demand"}
        "cost": every call runs whole on the backend where it is estimated to finish first.
        "demand": Level-3 calls are split by the tile runtime over all its devices.
    calibrate : bool
        "cost" only: measure each backend's speed at start-up.
    workers : int
        "demand" only: threads that submit calls to the runtime concurrently.
    rule : {"eft", "paper"}
        "cost" only: earliest estimated finish (default) or the paper's load criterion (for comparison).
    synchronous : bool
        Run every call inline in the submitting thread, on the backend the policy chose (for debugging
        and for measuring the bookkeeping alone).  Futures still follow the protocol.
    inline_below : float
        "cost" only: a BLAS call estimated to compute in less than this many seconds on the host backend
        the policy picks runs in the thread that makes it ready (usually the caller's, at submission),
        when its operands are valid in host memory: handing it to a worker thread would cost more than
        the call (default 20 microseconds; 0 sends every call to a worker).
    The executor is a context manager; :meth:`close` waits for calls in flight and stops the threads.
    """

    def __init__(self, devices: list | None = None, policy: str = "cost", *, calibrate: bool = True,
                 workers: int = 1, rule: str = "eft", synchronous: bool = False,
                 inline_below: float = 20e-6) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(sorted(POLICIES))}; got {policy!r}")
        workers = int(workers)
        if workers < 1:
            raise ValueError(f"workers must be >= 1; got {workers}")
        self._lock = threading.Lock()
        self.policy_name = policy
        if policy == "cost":
            if devices is None:
                from tileblas.devices import host_devices

                devices = host_devices()
            devices = list(devices)
            if not devices:
                raise ValueError("devices must name at least one device; got an empty list")
            self.policy: Any = CostPolicy(calibrate=calibrate, rule=rule)
            self.backends = [Backend(self, d, d.name) for d in devices]
        else:
            self.policy = DemandPolicy()
            self.backends = [Backend(self, None, "runtime", threads=workers)]
        self.policy.setup(self.backends)
        self._has_host = any(b.host_memory for b in self.backends)
        inline_below = float(inline_below)
        if not inline_below >= 0:
            raise ValueError(f"inline_below must be a non-negative number of seconds; got {inline_below!r}")
        self.inline_below = inline_below if policy == "cost" else 0.0
        self._closed = False
        self._stopped = False
        self._nsubmitted = 0
        self._nlive = 0  # operations not yet final
        self._idle = threading.Condition(self._lock)  # notified when _nlive drops to 0 after close()
        self._live: dict[Op, None] = {}  # operations not yet final, in submission order (for fork)
        self._workers_missing = False  # worker threads to start before the next call (a fork child, none yet)
        self._threadless = False  # no worker thread could be started: every call runs inline
        self.synchronous = bool(synchronous)
        if not self.synchronous:
            self._finalizer = weakref.finalize(
                self, _stop_workers, [(b.queue, b.nthreads) for b in self.backends])
            self._workers_missing = True
            self._restart_workers()
        _EXECUTORS.add(self)

    # ------------------------------------------------------------------ processes
    def _after_fork(self) -> None:
        """In a fork child (module docstring, "Processes"): fresh lock and queues, the calls in flight
        finished with ForkedError, the worker threads started again by the next call."""
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        for b in self.backends:
            b.queue = queue.SimpleQueue()
            b.threads = []
            b.queued_est = b.running_est = 0.0
            b.nqueued = b.running = 0
        if not self.synchronous:
            fin = getattr(self, "_finalizer", None)
            if fin is not None:
                fin.detach()
            self._finalizer = weakref.finalize(
                self, _stop_workers, [(b.queue, b.nthreads) for b in self.backends])
        live, self._live = list(self._live), {}
        for op in live:  # first: none of them is made ready by another's release
            op.state = FAILED
            op.error = ForkedError(
                f"{op.name} was in flight when this process forked: it runs in the parent process, not in this "
                "child; here it never runs and the handles it writes are undefined")
        with self._lock:
            for op in live:
                for h in op.handles():
                    h._lock = None  # made afresh on first use: a thread of the parent may have held it
                fut, err = op.future, op.error
                self._release_locked(op, [], [])
                fut._fail_after_fork(err)
            self._nlive = 0
        self._workers_missing = not self.synchronous and not self._stopped

    def _restart_workers(self) -> None:
        """Start the worker threads the backends lack: at start-up, in a fork child at its first call, and
        at every call while none can be started (then the calls run inline; module docstring)."""
        message = None
        with self._lock:
            if not self._workers_missing or self._stopped:
                return
            try:
                for b in self.backends:
                    b.start()
            except RuntimeError as e:
                if not self._threadless:
                    self._threadless = True
                    message = _no_thread_message(e)
            else:
                self._workers_missing = self._threadless = False
        if message is not None:
            warnings.warn(message, RuntimeWarning, stacklevel=4)

    # ------------------------------------------------------------------ handles
    def handle(self, data: Any, *, copy: bool = True, upload: bool = True) -> MatrixHandle:
        """A handle on the host array ``data`` (1-D or 2-D).

        ``copy=True`` copies it (the handle owns its data); ``copy=False`` borrows it (see
        :class:`MatrixHandle`).  ``upload=False`` declares the content irrelevant (an output): nothing is
        copied or moved before the first write.
        """
        if self._closed:
            self._check_open()
        if type(data) is not np.ndarray and not isinstance(data, np.ndarray):
            if copy is False:
                raise TypeError(f"data must be a numpy.ndarray when copy=False; got {type(data).__name__}")
            data = np.asarray(data)
        shape = data.shape  # a tuple of Python ints
        if len(shape) not in (1, 2):
            raise ValueError(f"data must be 1-D or 2-D; got an array of shape {shape}")
        dt = data.dtype
        if id(dt) not in _DTYPE_IDS and dt not in _openblas.DTYPES:
            dt = check_dtype(dt, "data")  # raises
        return MatrixHandle(self, data, shape, dt, copy is True or bool(copy), upload is True or bool(upload))

    def empty(self, shape: int | tuple[int, ...], dtype: Any = np.float64) -> MatrixHandle:
        """A handle for an output: no data until a call writes it (it reads as zeros before)."""
        if self._closed:
            self._check_open()
        dt = _DTYPE_OF.get(dtype) if type(dtype) is type else None
        if dt is None:
            dt = check_dtype(dtype, "dtype")
        if type(shape) is tuple and len(shape) == 2 and type(shape[0]) is int and type(shape[1]) is int \
                and shape[0] >= 0 and shape[1] >= 0:  # the common case, first
            return MatrixHandle(self, None, shape, dt, True, False)
        shp = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if len(shp) not in (1, 2) or any(int(s) < 0 for s in shp):
            raise ValueError(f"shape must be 1 or 2 non-negative ints; got {shape!r}")
        return MatrixHandle(self, None, tuple(int(s) for s in shp), dt, True, False)

    # ------------------------------------------------------------------ submission
    def submit(self, name: str, run: Callable[[Any], Any], reads: Iterable[MatrixHandle] = (),
               writes: Iterable[MatrixHandle] = (), flops: float = 0.0, *, host_only: bool = False,
               inline: bool = False) -> AsyncFuture:
        """Submit an operation; returns its future at once.

        ``run(device)`` computes it (``device`` is the backend's Device, or None for the host/runtime) and
        returns the future's result.  It may only touch the arrays it gets from ``handle.acquire(device,
        mode)`` of the handles listed in ``reads`` / ``writes`` (an in/out operand goes in both).
        """
        reads = tuple(reads)
        writes = tuple(writes)
        if host_only and not inline and not self._has_host:
            raise RuntimeError(f"no backend can run {name}: it needs host memory and every backend of this "
                               f"executor has its own ({', '.join(b.name for b in self.backends)})")
        for h in reads + writes:
            if h.executor is not self:
                raise ValueError(f"handle {h!r} belongs to another executor")
            if h.deleted:
                raise ValueError(f"handle {h!r} was deleted; create a new handle")
            if h in writes and h.readonly:
                raise ValueError(f"handle {h!r} borrows a read-only array and cannot be written")
        return self._submit(name, run, reads, writes, flops, host_only, inline)

    def _submit_call(self, name: str, run: Callable[[Any], Any], reads: tuple, writes: tuple, flops: float,
                     host_only: bool) -> AsyncFuture:
        """:meth:`submit` for the BLAS call functions, whose handles are already checked alive.

        The common case (a call with every operand on this executor, nothing to wait for) is the hot path
        of every asynchronous call, written out here; anything else goes through :meth:`_submit`."""
        if self._workers_missing:
            self._restart_workers()
        for h in reads:
            if h.executor is not self:
                raise ValueError(f"handle {h!r} belongs to another executor")
        for h in writes:
            if h.readonly or h.executor is not self:
                return self.submit(name, run, reads, writes, flops, host_only=host_only)  # raises the message
        if host_only and not self._has_host:
            return self.submit(name, run, reads, writes, flops, host_only=True)  # raises the message
        fut = AsyncFuture()
        fut._op = op = Op(self, name, run, reads, writes, flops, fut, host_only, False, True)
        with self._lock:
            if self._closed:
                raise RuntimeError("the executor is closed")
            self._nsubmitted += 1
            self._nlive += 1
            self._live[op] = None
            doom, cause, culprit = link(op)
            for h in writes:
                if h._user is not None and h._host is h._user:
                    h._own_view()
            for h in reads + writes:
                h.inflight += 1
                if h.inflight == 1:
                    u = h._user
                    if u is not None and not h.readonly and not h.deleted:  # MatrixHandle._lock_user, inlined
                        try:
                            u.setflags(write=False)
                        except ValueError:  # pragma: no cover - the user's array cannot be locked
                            pass
            chosen = None
            if not doom and op.npending == 0 and not self.synchronous and not self._threadless:
                chosen = b, est = self.policy.choose(op, self.backends, _perf())
                if not b.host_memory or op.flops >= self.inline_below * b.speed:  # not a candidate to run inline
                    op.state = READY
                    op.backend = b
                    op.estimate = est
                    b.queued_est += est
                    b.nqueued += 1
                    b.queue.put(op)
                    return fut
            resolve: list = []
            runnable: list = []
            if doom:
                self._doom_locked(op, doom, cause, culprit, resolve)
                if op.npending == 0:
                    self._finish_doomed_locked(op, resolve, runnable)
            elif op.npending == 0:
                self._make_ready_locked(op, runnable, chosen)
        if resolve or runnable:
            self._after(resolve, runnable)
        return fut

    def _submit(self, name: str, run: Callable[[Any], Any], reads: tuple, writes: tuple, flops: float,
                host_only: bool = False, inline: bool = False, before_link: Callable[[], None] | None = None,
                blas: bool = False) -> AsyncFuture:
        if self._workers_missing:
            self._restart_workers()
        fut = AsyncFuture()
        fut._op = op = Op(self, name, run, reads, writes, flops, fut, host_only, inline, blas)
        resolve: list = []
        runnable: list = []
        with self._lock:
            if self._closed and not inline:  # read-back and delete stay possible after close()
                raise RuntimeError("the executor is closed")
            self._nsubmitted += 1
            self._nlive += 1
            self._live[op] = None
            if before_link is not None:
                before_link()
            doom, cause, culprit = link(op)
            for h in writes:
                if h._user is not None and h._host is h._user and not inline:
                    h._own_view()
            for h in reads:
                h.inflight += 1
                if h.inflight == 1 and h._user is not None:
                    h._lock_user()
            for h in writes:
                h.inflight += 1
                if h.inflight == 1 and h._user is not None:
                    h._lock_user()
            if doom:
                self._doom_locked(op, doom, cause, culprit, resolve)
                if op.npending == 0:
                    self._finish_doomed_locked(op, resolve, runnable)
            elif op.npending == 0:
                self._make_ready_locked(op, runnable)
        if resolve or runnable:
            self._after(resolve, runnable)
        return fut

    # ------------------------------------------------------------------ graph transitions (under lock)
    def _make_ready_locked(self, op: Op, runnable: list, chosen: tuple | None = None) -> None:
        if op.inline:
            op.state = READY
            runnable.append(op)
            return
        b, est = chosen or self.policy.choose(op, self.backends, _perf())
        op.state = READY
        op.backend = b
        if self.synchronous:
            runnable.append(op)
            return
        if self._threadless or (op.blas and b.host_memory and op.flops < self.inline_below * b.speed and
                                all(HOST in h._valid for h in op.reads)):
            op.inline = True  # tiny, or no worker thread: run it here (see inline_below, _restart_workers)
            runnable.append(op)
            return
        op.estimate = est
        b.queued_est += est
        b.nqueued += 1
        b.queue.put(op)

    def _doom_locked(self, op: Op, state: int, cause: BaseException | None, culprit: Op | None,
                     resolve: list) -> None:
        """Mark ``op`` and, transitively, its data dependents as not going to run; resolve their futures."""
        if cause is not None and isinstance(cause, DependencyError) and cause.cause is not None:
            cause = cause.cause
        stack = [op]
        while stack:
            o = stack.pop()
            if o.doom is not None or o.state >= RUNNING:
                continue
            if state == FAILED:
                who = culprit.name if culprit is not None else "a call"
                err: BaseException | None = DependencyError(
                    f"{o.name} did not run: {who} it depends on failed with {type(cause).__name__}: {cause}",
                    cause=cause, op=who)
            else:
                err = None
            o.doom = (state, err if state == FAILED else cause)
            resolve.append((o.future, state, err))
            for d, data in o.dependents:
                if data:
                    stack.append(d)

    def _finish_doomed_locked(self, op: Op, resolve: list, runnable: list) -> None:
        if op.state == READY and op.backend is not None and not self.synchronous and not op.inline:
            # queued: the worker skips it
            b = op.backend
            b.queued_est -= op.estimate
            b.nqueued -= 1
        st, err = op.doom  # type: ignore[misc]
        op.state = st
        op.error = err
        self._release_locked(op, resolve, runnable)

    def _release_locked(self, op: Op, resolve: list, runnable: list) -> None:
        """``op`` is final: unlock its handles and let its dependents advance."""
        for h in op.reads:
            h.inflight -= 1
            if h.inflight == 0 and h._user is not None:
                h._unlock_user()
        for h in op.writes:
            h.inflight -= 1
            if h.inflight == 0 and h._user is not None:
                h._unlock_user()
        self._nlive -= 1
        self._live.pop(op, None)
        if self._nlive == 0 and self._closed:
            self._idle.notify_all()
        deps = op.dependents
        failed = op.state != DONE
        forget(op)
        op.release()
        for d, data in deps:
            if failed and data and d.doom is None and d.state < RUNNING:
                # op failed after d was linked: doom d (and its data dependents) now
                self._doom_locked(d, op.state, op.error, op, resolve)
            d.npending -= 1
            if d.npending == 0 and d.state == PENDING:
                if d.doom is not None:
                    self._finish_doomed_locked(d, resolve, runnable)
                else:
                    self._make_ready_locked(d, runnable)

    def _complete_locked(self, op: Op, result: Any, error: BaseException | None, resolve: list,
                         runnable: list) -> None:
        if error is None:
            op.state = DONE
            resolve.append((op.future, DONE, result))
        else:
            op.state = FAILED
            op.error = error
            resolve.append((op.future, FAILED, error))
        self._release_locked(op, resolve, runnable)

    # ------------------------------------------------------------------ outside the lock
    def _after(self, resolve: list, runnable: list) -> None:
        """Resolve futures and run inline operations (outside the lock: callbacks may submit)."""
        if not resolve and not runnable:
            return
        while True:
            for fut, st, val in resolve:
                if st == DONE:
                    fut.set_result(val)
                elif st == FAILED:
                    fut.set_exception(val)
                else:
                    fut._base_cancel()
                    fut.set_running_or_notify_cancel()  # wakes waiters (wait/as_completed) of a cancelled future
            if not runnable:
                return
            resolve = []
            ops, runnable = runnable, []
            for op in ops:
                with self._lock:
                    if op.state != READY:
                        continue
                    op.state = RUNNING
                op.future._state = _RUNNING  # see _worker
                result, error = self._call(op, op.backend.device if op.backend is not None else None)
                with self._lock:
                    self._complete_locked(op, result, error, resolve, runnable)

    @staticmethod
    def _call(op: Op, device: Any) -> tuple[Any, BaseException | None]:
        try:
            return op.run(device), None
        except BaseException as e:  # noqa: BLE001 - the error belongs to the future
            return None, e

    def _run_queued(self, b: Backend, op: Op) -> None:
        """Run one operation a worker thread took from ``b``'s queue."""
        lock = self._lock
        device = b.device
        observe = self.policy.observe
        with lock:
            if op.state != READY:  # cancelled while queued
                return
            op.state = RUNNING
            b.queued_est -= op.estimate
            b.nqueued -= 1
            b.running += 1
            b.running_start = t0 = _perf()
            b.running_est = op.estimate
        # PENDING -> RUNNING needs no notification, and once op is RUNNING nothing else changes its
        # future's state (cancel() goes through the graph): set_running_or_notify_cancel without the lock
        op.future._state = _RUNNING
        result, error = self._call(op, device)
        dt = _perf() - t0
        moved = take_transfers()
        resolve: list = []
        runnable: list = []
        with lock:
            b.running -= 1
            b.spent += dt
            b.ntasks += 1
            observe(b, op, dt, moved)
            self._complete_locked(op, result, error, resolve, runnable)
        self._after(resolve, runnable)

    # ------------------------------------------------------------------ cancellation, waiting
    def _cancel_op(self, op: Op) -> bool:
        resolve: list = []
        runnable: list = []
        with self._lock:
            if op.state == CANCELLED or (op.doom is not None and op.doom[0] == CANCELLED):
                return True
            if op.state >= RUNNING or op.doom is not None:
                return False
            self._doom_locked(op, CANCELLED, None, None, resolve)
            if op.state == READY:
                self._finish_doomed_locked(op, resolve, runnable)
        self._after(resolve, runnable)
        return True

    def _pending_futures(self, h: MatrixHandle) -> list[AsyncFuture]:
        with self._lock:
            ops = ([h.last_writer] if h.last_writer is not None else []) + list(h.readers or ())
            return [o.future for o in ops if o.state < FINISHED]

    def _wait_handle(self, h: MatrixHandle, timeout: float | None) -> None:
        futs = self._pending_futures(h)
        while futs:
            done, not_done = concurrent.futures.wait(futs, timeout)
            if not_done:
                raise TimeoutError(f"calls on {h!r} did not finish within {timeout} s")
            futs = self._pending_futures(h)  # doomed calls finish after their own dependencies

    def _mark_changed(self, h: MatrixHandle) -> None:
        self._wait_handle(h, None)
        with self._lock:
            with h._mutex():
                h._host_buffer()
                h._valid = frozenset((HOST,))
                h.version += 1
            if h._mems:
                h._tiles_changed()
            h.last_writer = None
            h.readers = None

    def _submit_read(self, h: MatrixHandle) -> AsyncFuture:
        def run(_device: Any) -> np.ndarray:
            arr = h.acquire(None, "r")
            if h._user is not None:
                return h._user
            return arr.copy(order="K")

        return self._submit("read", run, (h,), (), 0.0, host_only=True, inline=True)

    def _submit_delete(self, h: MatrixHandle) -> AsyncFuture:
        """Delete ``h`` once the calls in flight on it finish (:meth:`MatrixHandle.delete` deletes a handle
        with none at once)."""
        def mark() -> None:
            h.deleted = True

        def run(_device: Any) -> None:
            h._free()

        return self._submit("delete", run, (), (h,), 0.0, host_only=True, inline=True, before_link=mark)

    @staticmethod
    def _done_future(value: Any) -> AsyncFuture:
        if value is None:
            return DONE_NONE
        f = AsyncFuture()
        f.set_result(value)
        return f

    # ------------------------------------------------------------------ lifetime
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the executor is closed")

    def stats(self) -> dict[str, Any]:
        """Per-backend counters and the number of calls submitted."""
        with self._lock:
            return {"policy": self.policy_name, "submitted": self._nsubmitted,
                    "backends": [b.describe() for b in self.backends]}

    def close(self, timeout: float | None = None) -> None:
        """Stop accepting calls, wait until every call in flight is final, stop the worker threads.

        After ``close`` new computations raise RuntimeError, but handles stay readable: ``get``, ``read``,
        ``wait``, ``mark_changed`` and ``delete`` still work (they run in the calling thread).  With a
        ``timeout`` that expires, TimeoutError is raised and the workers keep running the calls in
        flight; call ``close`` again to finish.  Called from a call's done-callback (a worker thread),
        it returns at once and the waiting happens in a helper thread.
        """
        with self._lock:
            self._closed = True
            if self._stopped:
                return
        me = threading.current_thread()
        if any(me is t for b in self.backends for t in b.threads):
            threading.Thread(target=self.close, daemon=True, name="tileblas-async-close").start()
            return
        with self._lock:
            if not self._idle.wait_for(lambda: self._nlive == 0, timeout):
                raise TimeoutError(f"calls still in flight after {timeout} s; the executor is closed to new calls")
            if self._stopped:
                return
            self._stopped = True
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin.detach()
        for b in self.backends:
            b.stop()
        for b in self.backends:
            for t in b.threads:
                t.join()

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Executor policy={self.policy_name} backends={[b.name for b in self.backends]}>"


_DEFAULT: Executor | None = None
_DEFAULT_LOCK = threading.Lock()


def get_executor() -> Executor:
    """The process-wide executor that handles and :class:`tileblas.Matrix` use by default."""
    global _DEFAULT
    ex = _DEFAULT
    if ex is not None and not ex._closed:
        return ex
    with _DEFAULT_LOCK:
        if _DEFAULT is None or _DEFAULT._closed:
            _DEFAULT = Executor()
        return _DEFAULT


def set_executor(executor: Executor | None) -> Executor | None:
    """Make ``executor`` the default (None: create a fresh one on next use); returns the previous one."""
    global _DEFAULT
    if executor is not None and not isinstance(executor, Executor):
        raise TypeError(f"executor must be an Executor or None; got {type(executor).__name__}")
    with _DEFAULT_LOCK:
        prev, _DEFAULT = _DEFAULT, executor
    return prev
