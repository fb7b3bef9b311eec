"""The scheduler: demand-driven execution of tile tasks on devices (BLASX section IV-C).

Policy
    * **Global task queue.**  Ready tasks (all dependencies finished) wait in one priority queue ordered
      by (call number, longest chain of dependents first, task number): earlier calls first, and within a
      call the critical path of in-place TRSM/TRMM first.
    * **Reservation stations.**  Each device has a station of ``slots`` tasks (default 4).  Its worker
      thread refills the station from the global queue *on demand*, only when it is about to run something,
      so a faster device simply comes back more often and takes more tasks: there is no static split.
    * **Locality priority (equation 3).**  From its station a device runs the task with the highest score
      ``sum over the task's input tiles of f(tile)``, f = 2 for a tile the device holds (L1), 1 for a tile
      a peer holds that it could fetch cheaply (L2), 0 otherwise; ties go to the global priority.  Tasks
      on dependency chains (in-place TRSM/TRMM) go by their remaining critical path (``Task.depth``, in
      flops) before the score: taking a short-chain task for its locality while a long chain waits leaves
      a device idle at the end of the call.  The
      score comes from a :class:`LocalityModel`.  Host devices use :class:`RecentTiles`, a bounded record
      of the tiles each device touched recently (a stand-in for the CPU caches); devices with tile caches
      plug their real cache state in through the same interface.
    * **Work stealing.**  A device whose station is empty while the global queue is empty takes the task
      it scores best from the fullest other station.
    * **Placement.**  A plan may say which devices may run which of its tasks (``plan.placement``: one
      frozenset of device indices per task, None for any; the runtime's split of a call between device
      kinds, :mod:`tileblas.runtime._shares`).  Ready tasks then wait in one queue per such set; a device
      refills its station from the queues it may serve, the tasks reserved for a set it belongs to before
      those anyone may run (of the same call), and steals only what it may run.
    * **Tile order on devices with their own memory.**  There, tasks of equal depth go by the shell of
      their output tile (``max(i, j)``, then the task number): the square of output tiles grows from the
      corner, so the first tasks share their input rows and columns and the link brings in a row of A and
      a column of B for each new shell instead of a row of A per task.
    * **Static round robin** (``schedule="round-robin"``, cuBLAS-XT's way; the baseline of the
      out-of-core measurement): task i of a call is bound to device ``i mod devices`` (of the devices its
      placement allows), in the plan's order; no locality choice, no stealing.
    * **Synchronous mode.**  Every task runs inline in the calling thread, in queue order, devices taken
      in turn: the same plan, the same kernels, no threads (for debugging and planner tests).

State (all guarded by one condition variable ``_cv``)
    ``_queues`` (heaps of ready tasks, one per placement: None for tasks any device may run),
    ``_stations`` (one list per device), per-call counters in :class:`CallState`.  Task execution happens outside the lock; the GIL is released inside the kernels.

Failure
    An exception in a task marks its call failed: the call's queued and reserved tasks are dropped,
    tasks still running finish, and then the caller gets the exception (with the worker's traceback and
    a note naming the task and device).  Workers never die from a task's exception, so the runtime keeps
    serving.  The output of a failed call is undefined (tiles may hold old, new or partial values).

Interrupts
    A caller waiting for its call takes signals (SIGINT: KeyboardInterrupt within a quarter second at
    most; the wait is on an Event, which a signal interrupts).  Then its call is cancelled as a failed call
    is: queued and reserved tasks are dropped, the tasks running now (one tile each) finish, and only then
    does the exception leave :meth:`Scheduler.run`, with a note that the output is undefined.  Nothing
    writes the output after that, and the workers are free for the next call.

Processes
    After fork() the child has none of the parent's threads.  A handler registered with
    ``os.register_at_fork`` (and, for a fork that skipped it, a pid check in :meth:`Scheduler.run`) gives
    every scheduler of the child a fresh lock and an empty queue and stations, forgets the parent's calls
    in flight (their callers are threads of the parent; nothing in the child waits for them, and their
    outputs in the child are undefined), makes the devices' statistics locks afresh, and lets the next
    call start new workers.

Life cycle
    Workers start with the first threaded call.  :meth:`Scheduler.shutdown` refuses new calls and lets the
    workers finish every call already submitted before they exit (``ThreadPoolExecutor.shutdown`` semantics:
    no caller is left waiting on a call nobody will run).  The workers reference the scheduler, never the
    Runtime, so a Runtime dropped without being closed is collected and its finalizer
    (:meth:`Scheduler.release`) lets the workers go.

What it must not touch
    Partitioning (the planner) and any device-kind-specific code: devices are reached only through
    :class:`tileblas.devices.Device` (``kernel``, ``to_device``, ``to_host``, ``stats``).
"""

from __future__ import annotations

import heapq
import os
import threading
import time
import weakref
from typing import Any, Callable, Sequence

from tileblas.kernels._openblas import split_k_axpy
from tileblas.runtime._locality import LocalityModel, RecentTiles
from tileblas.runtime._planner import LEVEL3_KERNELS, Plan, Task, Tile

__all__ = ["Scheduler", "SCHEDULES", "CallState", "LocalityModel", "RecentTiles", "TaskRecord", "host_tile_op", "task_failed"]


# ---------------------------------------------------------------------------------------------------
# Kernels that are not Level-3 BLAS
# ---------------------------------------------------------------------------------------------------


_HOST_OPS: dict[str, Callable[..., None]] = {"axpy": split_k_axpy}


def host_tile_op(name: str) -> Callable[..., None]:
    """The runtime's own implementation of a non-BLAS tile kernel on host memory."""
    return _HOST_OPS[name]


def _resolve_kernel(device: Any, name: str) -> Callable[..., None]:
    """``device.kernel(name)``; for the runtime's own tile ops on host-memory devices, the host version."""
    if name in LEVEL3_KERNELS:
        return device.kernel(name)
    try:
        return device.kernel(name)
    except (ValueError, KeyError, NotImplementedError):
        if getattr(device, "host_memory", False) and name in _HOST_OPS:
            return _HOST_OPS[name]
        raise


# ---------------------------------------------------------------------------------------------------
# Per-call state
# ---------------------------------------------------------------------------------------------------


class TaskRecord:
    """What happened to one task: device, times (perf_counter seconds), stolen or not, bytes moved."""

    __slots__ = ("task", "_label", "device", "t_found", "t0", "t1", "t_done", "stolen", "bytes", "score", "ok",
                 "flops", "mem")

    def __init__(self, task: Task | None, device: int, label: str | None = None) -> None:
        self.task = task
        self._label = label
        self.device = device
        self.t_found = self.t0 = self.t1 = self.t_done = 0.0
        self.stolen = False
        self.bytes = (0, 0, 0)
        self.score = 0
        self.ok = True
        self.flops = 0.0
        self.mem = None  # device-memory accounting (runtime._tilememory.TaskMemory) on discrete devices

    @property
    def label(self) -> str:
        return self._label if self._label is not None else self.task.label


class CallState:
    """Book-keeping of one call in flight: counters, records, error, completion event."""

    def __init__(self, seq: int, plan: Plan) -> None:
        self.seq = seq
        self.plan = plan
        self.remaining = len(plan.tasks)
        self.running = 0
        self.error: BaseException | None = None
        self.error_note = ""
        self.cancelled = False
        self.done = threading.Event()
        self.records: list[TaskRecord] = []
        self.t_start = time.perf_counter()
        self.t_end = 0.0
        #: per task (by index): the frozenset of devices that may run it, or None (any); None for all
        self.keys: list | None = None
        for t in plan.tasks:
            t.call = self
            t.prio = (seq, -t.depth, t.index)


def task_failed(task: Task, device_name: str, rec: TaskRecord, exc: BaseException) -> None:
    """Record that ``task`` raised ``exc`` on a device: the record is marked failed and the call keeps its
    first error, with a note naming the task, routine and device (what the caller sees)."""
    rec.ok = False
    call = task.call
    if call.error is None:
        call.error = exc
        call.error_note = f"in tile task {task.label} of {call.plan.routine} on device {device_name}"


#: Scheduling policies: demand-driven (BLASX) and static round robin (cuBLAS-XT, the baseline).
SCHEDULES = ("demand", "round-robin")

_CLOSED = ("this Runtime has been shut down (closed); calls made after close() are refused and leave the "
           "output unchanged")
_INTERRUPTED = ("tileblas: the call was cancelled when this exception interrupted its wait: tasks not started "
                "were dropped, those running finished; its output is undefined")

#: the schedulers of this process (for the fork handler)
_LIVE: "weakref.WeakSet[Scheduler]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for sched in list(_LIVE):
        sched._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _priority(task: Task) -> tuple:
    return task.prio


# ---------------------------------------------------------------------------------------------------
# The scheduler
# ---------------------------------------------------------------------------------------------------


class Scheduler:
    """Run plans on devices: threaded (one worker per device) or synchronous.

    Parameters
    ----------
    devices : sequence of Device
        Where tasks run.  Nothing here depends on their kind.
    slots : int
        Reservation-station size per device.
    sync : bool
        Run every task inline in the caller's thread.
    locality : LocalityModel, optional
        Source of equation (3)'s tile levels; default :class:`RecentTiles`.
    memory : TileMemory, optional
        Runs the tasks of devices with their own memory (tile caches, coherence); such a device gets one
        worker per stream (``device.streams``), all sharing its reservation station.
    schedule : {"demand", "round-robin"}
        Demand-driven with locality and stealing (BLASX), or static round robin (see the module notes).
    """

    def __init__(self, devices: Sequence[Any], slots: int = 4, sync: bool = False,
                 locality: LocalityModel | None = None, memory: Any = None, schedule: str = "demand") -> None:
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(map(repr, SCHEDULES))}; got {schedule!r}")
        self.schedule = schedule
        self.round_robin = schedule == "round-robin"
        self.devices = list(devices)
        self.slots = int(slots)
        self.sync = bool(sync)
        self.locality = locality or RecentTiles(len(self.devices))
        self.memory = memory  # runtime._tilememory.TileMemory when some device has its own memory
        self._cv = threading.Condition(threading.Lock())
        self._queues: dict[Any, list] = {}
        self._stations: list[list[Task]] = [[] for _ in self.devices]
        self._threads: list[threading.Thread] = []
        self._started = False
        self._closing = False
        self._active = 0  # calls submitted to the workers and not yet done
        self._seq = 0
        self._kernels: list[dict[str, Callable]] = [{} for _ in self.devices]
        self._rr = 0  # next device in synchronous mode
        # devices computing on host memory take the short path (tile views straight to the kernels)
        self._host = [bool(getattr(dev, "host_memory", False)) for dev in self.devices]
        self._pid = os.getpid()
        _LIVE.add(self)

    def _after_fork(self) -> None:
        """In a fork child (see the module docstring, "Processes"): a fresh lock, nothing queued, reserved
        or in flight, no worker (the next call starts them), fresh locks for the devices' statistics."""
        self._pid = os.getpid()
        self._cv = threading.Condition(threading.Lock())
        self._queues = {}
        self._stations = [[] for _ in self.devices]
        self._threads = []
        self._started = False
        self._active = 0
        for dev in self.devices:
            stats = getattr(dev, "stats", None)
            if stats is not None and hasattr(stats, "lock"):
                stats.lock = threading.Lock()
        if self.memory is not None and hasattr(self.memory, "_cv"):
            self.memory._cv = threading.Condition(threading.Lock())

    # ----------------------------------------------------------------- life cycle
    def _start(self) -> None:
        """Start the workers (lock held).  They hold no reference to the Runtime, only to the scheduler."""
        if self._started or self.sync:
            return
        self._started = True
        for d, dev in enumerate(self.devices):
            for s in range(max(1, int(getattr(dev, "streams", 1)))):  # one worker per stream
                th = threading.Thread(target=self._worker, args=(d, s), name=f"tileblas-{dev.name}-{s}", daemon=True)
                th.start()
                self._threads.append(th)

    def shutdown(self, wait: bool = True) -> None:
        """Refuse new calls; the workers finish every call already submitted, then exit.

        Like ``concurrent.futures.ThreadPoolExecutor.shutdown``: a call in flight completes and its
        caller gets its result.  With ``wait`` (default) this returns once the workers have exited (a
        worker thread calling it does not wait for itself).  Safe to call more than once and from several
        threads at once.
        """
        with self._cv:
            self._closing = True
            self._cv.notify_all()
            threads = list(self._threads)
        if wait:
            me = threading.current_thread()
            for th in threads:
                if th is not me:
                    th.join()

    def release(self) -> None:
        """Tell the workers to exit once no call is in flight, without waiting for them.

        The finalizer of a Runtime that was dropped without being closed: it may run in any thread,
        during garbage collection, even one holding the scheduler's lock, so it never blocks on it; a
        worker that sees the flag wakes the others as it leaves.
        """
        self._closing = True
        if self._cv.acquire(blocking=False):
            try:
                self._cv.notify_all()
            finally:
                self._cv.release()

    @property
    def closed(self) -> bool:
        return self._closing

    # ----------------------------------------------------------------- submission
    def run(self, plan: Plan, waiting: Callable[[CallState], None] | None = None) -> CallState:
        """Execute every task of ``plan``; returns its CallState (``error`` set when a task failed).
        ``waiting``, if given, is called with the CallState every quarter second while the caller waits,
        and once at the end (a progress display; not in synchronous mode).  An exception that interrupts
        the wait (KeyboardInterrupt) cancels the call first (module docstring, "Interrupts")."""
        if self._pid != os.getpid():  # a fork child whose fork skipped the handler
            self._after_fork()
        with self._cv:
            if self._closing:
                raise RuntimeError(_CLOSED)
            self._seq += 1
            call = CallState(self._seq, plan)
            self._place(call)
            if plan.tasks and not self.sync:
                # submitted in the same critical section as the check: shutdown() either refused this call
                # or lets the workers finish it
                self._start()
                self._active += 1
                for t in plan.tasks:
                    if t.deps == 0:
                        self._push(t)
                self._cv.notify_all()
        if not plan.tasks:
            call.t_end = time.perf_counter()
            call.done.set()
            return call
        if self.sync:
            self._run_sync(call)
            return call
        try:
            if waiting is None:
                while not call.done.wait(0.25):  # a signal wakes the wait at once; the timeout bounds it anyway
                    pass
                return call
            while not call.done.wait(0.25):
                waiting(call)
            waiting(call)
        except BaseException as exc:
            self._abandon(call)
            if hasattr(exc, "add_note"):
                exc.add_note(_INTERRUPTED)
            raise
        return call

    def _place(self, call: CallState) -> None:
        """The call's task order on devices with their own memory, and which devices may run each task
        (the plan's placement; bound to one device each under round robin)."""
        plan = call.plan
        if self.memory is not None:
            seq = call.seq
            for t in plan.tasks:
                t.prio = (seq, -t.depth, max(t.out.i, t.out.j), t.index)
        keys = getattr(plan, "placement", None)
        if keys is not None and len(keys) != len(plan.tasks):
            raise ValueError(f"plan.placement names {len(keys)} tasks; the plan has {len(plan.tasks)}")
        if self.round_robin:
            every = frozenset(range(len(self.devices)))
            turn: dict[frozenset, int] = {}
            bound = []
            for i in range(len(plan.tasks)):
                allowed = (keys[i] if keys is not None else None) or every
                order = sorted(allowed)
                n = turn.get(allowed, 0)
                turn[allowed] = n + 1
                bound.append(frozenset((order[n % len(order)],)))
            keys = bound
        call.keys = keys

    @staticmethod
    def _key(task: Task) -> Any:
        keys = task.call.keys
        return None if keys is None else keys[task.index]

    def _allowed(self, task: Task, d: int) -> bool:
        key = self._key(task)
        return key is None or d in key

    def _push(self, task: Task) -> None:
        """A ready task into the queue of its placement (lock held)."""
        key = self._key(task)
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = []
        heapq.heappush(q, (task.prio, task))

    def _pop_for(self, d: int) -> Task | None:
        """The next ready task device d may run (lock held): of the earliest call, those reserved for a
        set of devices d belongs to before those any device may run, then by priority."""
        best = best_key = None
        for key, q in self._queues.items():
            if not q or (key is not None and d not in key):
                continue
            p = q[0][0]
            rank = (p[0], 0 if key is not None else 1, p[1:])
            if best is None or rank < best:
                best, best_key = rank, key
        if best is None:
            return None
        q = self._queues[best_key]
        task = heapq.heappop(q)[1]
        if not q:
            del self._queues[best_key]
        return task

    def _abandon(self, call: CallState) -> None:
        """Cancel ``call`` for a caller that stops waiting (an exception in its thread), and wait for its tasks
        that are running (a second interrupt stops this wait: those tasks then finish on their own)."""
        with self._cv:
            if not call.done.is_set():
                if not call.cancelled:
                    self._cancel(call)
                if call.running == 0:
                    call.t_end = time.perf_counter()
                    call.done.set()
                    self._active -= 1
                    if self._closing and not self._active:
                        self._cv.notify_all()
        while not call.done.wait(0.25):
            pass

    def _run_sync(self, call: CallState) -> None:
        ready = [(_priority(t), t) for t in call.plan.tasks if t.deps == 0]
        heapq.heapify(ready)
        while ready and not call.cancelled:
            _, task = heapq.heappop(ready)
            d = self._rr % len(self.devices)
            while not self._allowed(task, d):  # a placement names at least one device
                self._rr += 1
                d = self._rr % len(self.devices)
            self._rr += 1
            rec = TaskRecord(task, d)
            rec.t_found = time.perf_counter()
            call.running += 1
            self._execute(task, d, rec)
            call.running -= 1
            call.remaining -= 1
            for dep in task.dependents:
                dep.deps -= 1
                if dep.deps == 0 and rec.ok:
                    heapq.heappush(ready, (_priority(dep), dep))
            rec.t_done = time.perf_counter()
        call.t_end = time.perf_counter()
        call.done.set()

    # ----------------------------------------------------------------- workers
    def _worker(self, d: int, stream: int = 0) -> None:
        cv = self._cv
        clock = time.perf_counter
        done: Task | None = None
        rec: TaskRecord | None = None
        while True:
            t_found = clock()
            with cv:
                if done is not None:
                    self._finish(done, rec)
                    rec.t_done = t_found = clock()
                    done = None
                while True:
                    picked = self._pick(d)
                    if picked is not None:
                        break
                    if self._closing and not self._active:
                        cv.notify_all()  # the flag may have been set without the lock (release)
                        return
                    cv.wait()
                    t_found = clock()
                task, stolen, score = picked
                task.call.running += 1
            rec = TaskRecord(task, d)
            rec.t_found = t_found
            rec.stolen = stolen
            rec.score = score
            self._execute(task, d, rec, stream)
            done = task

    def _pick(self, d: int) -> tuple[Task, bool, int] | None:
        """Refill station d from the queue, then take its best task, or steal one.  Lock held."""
        station = self._stations[d]
        while len(station) < self.slots:
            t = self._pop_for(d)
            if t is None:
                break
            if not t.call.cancelled:
                station.append(t)
        stolen = False
        if not station:
            if self.round_robin:
                return None
            allowed = self._allowed
            victim = max(range(len(self._stations)),
                         key=lambda v: sum(1 for t in self._stations[v] if allowed(t, d)))
            candidates = [n for n, t in enumerate(self._stations[victim]) if allowed(t, d)]
            if not candidates:
                return None
            station = self._stations[victim]
            stolen = True
        else:
            candidates = range(len(station))
        if self.round_robin:
            best = min(candidates, key=lambda n: station[n].prio)
            return station.pop(best), stolen, 0
        score = self.locality.score
        if len(candidates) == 1:
            best = candidates[0]
            t = station[best]
            best_s = score(d, t.inputs) if t.inputs else 0
        else:
            best, best_key, best_s = 0, None, 0
            for n in candidates:
                t = station[n]
                s = score(d, t.inputs)
                key = (-t.depth, -s, t.prio)
                if best_key is None or key < best_key:
                    best, best_key, best_s = n, key, s
        return station.pop(best), stolen, best_s

    def _finish(self, task: Task, rec: TaskRecord) -> None:
        """Account for a finished task and release its dependents.  Lock held."""
        call = task.call
        call.running -= 1
        call.remaining -= 1
        call.records.append(rec)
        if not rec.ok and not call.cancelled:
            self._cancel(call)
        if not call.cancelled:
            released = False
            for dep in task.dependents:
                dep.deps -= 1
                if dep.deps == 0:
                    self._push(dep)
                    released = True
            if released:
                self._cv.notify_all()
        if call.running == 0 and (call.remaining == 0 or call.cancelled) and not call.done.is_set():
            call.t_end = time.perf_counter()
            call.done.set()
            self._active -= 1
            if self._closing and not self._active:
                self._cv.notify_all()

    def _cancel(self, call: CallState) -> None:
        call.cancelled = True
        for st in self._stations:
            st[:] = [t for t in st if t.call is not call]
        for key, q in list(self._queues.items()):
            q[:] = [e for e in q if e[1].call is not call]
            heapq.heapify(q)
            if not q:
                del self._queues[key]

    # ----------------------------------------------------------------- one task
    def _kernel(self, d: int, name: str) -> Callable[..., None]:
        cache = self._kernels[d]
        fn = cache.get(name)
        if fn is None:
            fn = cache[name] = _resolve_kernel(self.devices[d], name)
        return fn

    def _execute_host(self, task: Task, d: int, rec: TaskRecord) -> None:
        """:meth:`_execute` for a device that computes on host memory: no copies, no byte accounting."""
        mats = task.call.plan.mats
        kernels = self._kernels[d]
        rec.flops = task.flops
        rec.t0 = time.perf_counter()
        try:
            for kname, args, kw in task.steps:
                fn = kernels.get(kname)
                if fn is None:
                    fn = self._kernel(d, kname)
                fn(*[mats[x.m].view(x.i, x.j) if type(x) is Tile else x for x in args], **kw)
            if self.memory is not None:
                self.memory.host_wrote(task.out)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, never swallowed
            task_failed(task, self.devices[d].name, rec, exc)
        rec.t1 = time.perf_counter()
        if task.inputs:
            self.locality.touched(d, task.inputs)

    def _execute(self, task: Task, d: int, rec: TaskRecord, stream: int = 0) -> None:
        """Run one task's steps on device d (outside the lock).  Records failure instead of raising."""
        if self._host[d]:
            self._execute_host(task, d, rec)
        elif self.memory is not None:  # tile caches, coherence, streams
            self.memory.execute(task, d, stream, rec)
        else:
            self._execute_copying(task, d, rec)
        if self.sync:
            task.call.records.append(rec)
            if not rec.ok:
                task.call.cancelled = True

    def _execute_copying(self, task: Task, d: int, rec: TaskRecord) -> None:
        """:meth:`_execute` for a device with its own memory and no tile memory: each task copies its tiles
        in and its output back (the simulated devices of the tests)."""
        dev = self.devices[d]
        plan = task.call.plan
        mats = plan.mats
        kernels = self._kernels[d]
        stats = dev.stats
        b0 = (stats.bytes_h2d, stats.bytes_d2h, stats.bytes_d2d)
        rec.flops = task.flops
        rec.t0 = time.perf_counter()
        try:
            to_device = dev.to_device
            out = task.out
            out_host = mats[out.m].view(out.i, out.j)
            out_dev = to_device(out_host)
            arrays: dict[Tile, Any] = {out: out_dev}
            for kname, args, kw in task.steps:
                fn = kernels.get(kname)
                if fn is None:
                    fn = self._kernel(d, kname)
                call_args = []
                for x in args:
                    if type(x) is Tile:
                        arr = arrays.get(x)
                        if arr is None:
                            arr = arrays[x] = to_device(mats[x.m].view(x.i, x.j))
                        call_args.append(arr)
                    else:
                        call_args.append(x)
                fn(*call_args, **kw)
            dev.to_host(out_dev, out_host)
            if self.memory is not None:
                self.memory.host_wrote(out)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, never swallowed
            task_failed(task, dev.name, rec, exc)
        rec.t1 = time.perf_counter()
        if task.inputs:
            self.locality.touched(d, task.inputs)
        if stats.bytes_h2d != b0[0] or stats.bytes_d2h != b0[1] or stats.bytes_d2d != b0[2]:
            rec.bytes = (stats.bytes_h2d - b0[0], stats.bytes_d2h - b0[1], stats.bytes_d2d - b0[2])
