"""Tile memory of devices with their own memory: device heaps, translate, out-of-core, and the task loop.

This is BLASX section IV-B with the heap of IV-E, for any :class:`~tileblas.devices._discrete.DiscreteDevice`,
built on the caches of :mod:`tileblas.runtime._cache`.

What it owns
    * :class:`TileMemory`: runs a task on a discrete device.  Input tiles are *translated* to device
      arrays: an L1 hit returns the cached block; on a miss the tile is allocated on the device heap
      (evicting ALRU blocks while the heap cannot satisfy the request: out-of-core), and filled from a
      peer that holds it when the device says a peer copy is cheaper than one from the host (L2 hit),
      else from the host.  The output tile is copied in (unless the first step overwrites it), updated by
      the task's steps and copied back.  With ``policy="on-demand"`` nothing is cached: every step moves
      its input tiles in and frees them afterwards (what cuBLAS-XT does), the baseline for communication.
    * Per-task accounting (:class:`TaskMemory`): L1/L2 hits, misses, bytes per direction, and the kernel
      and copy intervals from the device's stream timelines, which the profile turns into compute /
      exposed communication / other time.

When a call returns, the tiles of its matrices are dropped from every cache (unless another call in
flight uses the same matrix): host arrays may change between calls, and a freed array's address may be
reused by another.  A host buffer whose owner tracks its changes (the asynchronous API's handles) can be
*kept* instead (:meth:`TileMemory.keep`): its tiles stay cached across calls and leave only when the owner
invalidates them (the buffer changed outside the runtime) or stops keeping it.

A failed task is recorded the way the scheduler records one (:func:`~tileblas.runtime._scheduler.task_failed`).

What it must not touch
    Device kinds (devices are reached only through the DiscreteDevice interface), scheduling order (the
    scheduler's) and partitioning (the planner's).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Sequence

import numpy as np

from tileblas.devices._base import DeviceError
from tileblas.devices._hostmem import byte_bounds as _byte_bounds
from tileblas.runtime._cache import ALRU, Block, Directory
from tileblas.runtime._memory import DeviceHeap
from tileblas.runtime._planner import Tile
from tileblas.runtime._scheduler import task_failed

__all__ = ["TileMemory", "TaskMemory", "POLICIES"]

#: Tile-memory policies: "cache" (L1 + L2 tile caches, the BLASX runtime) and "on-demand" (every tile
#: moved in for each use and dropped afterwards, like cuBLAS-XT).
POLICIES = ("cache", "on-demand")

#: Kernels whose first step overwrites the output when beta == 0 (so the output need not be copied in).
_BETA_AT = {"gemm": 3, "symm": 3, "hemm": 3}


class TaskMemory:
    """What one task did with device memory (attached to its TaskRecord as ``mem``)."""

    __slots__ = ("l1", "l2", "miss", "h2d", "d2h", "d2d", "evictions", "intervals")

    def __init__(self) -> None:
        self.l1 = self.l2 = self.miss = self.evictions = 0
        self.h2d = self.d2h = self.d2d = 0
        self.intervals: list[tuple[str, float, float]] = []


class _StreamCtx:
    """State of one (device, stream) worker: blocks its issued steps still read."""

    __slots__ = ("device", "stream", "pending", "active", "blocked")

    def __init__(self, device: int, stream: int) -> None:
        self.device = device
        self.stream = stream
        self.pending: list[tuple[Any, list[Block]]] = []
        self.active = False
        self.blocked = False


class TileMemory:
    """Tile caches, coherence and task execution for the runtime's discrete devices.

    Parameters
    ----------
    devices : sequence of Device
        All the runtime's devices (host-memory devices are left alone, except that their writes
        invalidate cached copies).
    policy : {"cache", "on-demand"}
        See :data:`POLICIES`.
    peer : bool
        Allow L2 hits (copies from peer devices).
    wait_timeout : float
        Seconds a stream may wait for device memory to be released before its task fails.
    """

    def __init__(self, devices: Sequence[Any], policy: str = "cache", peer: bool = True,
                 wait_timeout: float = 30.0) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(map(repr, POLICIES))}; got {policy!r}")
        self.devices = list(devices)
        self.policy = policy
        self.caching = policy == "cache"
        self.peer = bool(peer)
        self.wait_timeout = float(wait_timeout)
        nd = len(self.devices)
        self.discrete = [not getattr(dv, "host_memory", True) for dv in self.devices]
        self.heaps: list[DeviceHeap | None] = [
            DeviceHeap(int(dv.memory_bytes), int(getattr(dv, "alignment", 256))) if disc else None
            for dv, disc in zip(self.devices, self.discrete)]
        self.alru: list[ALRU] = [ALRU() for _ in range(nd)]
        self.directory = Directory()
        self._cv = threading.Condition(threading.Lock())
        self._ctx: dict[tuple[int, int], _StreamCtx] = {}
        self._users: Counter = Counter()  # matrix id -> calls in flight using it
        # host buffers whose tiles stay cached between calls (see keep): memory bounds -> keep count, and the
        # matrix ids seen on each (a buffer gets one id per tile size and view)
        self._kept: dict[tuple[int, int], int] = {}
        self._kept_mids: dict[tuple[int, int], set] = {}
        self._admitted = [0] * nd  # bytes the running tasks of each device may hold at once
        self.counters = [Counter() for _ in range(nd)]

    # ----------------------------------------------------------------- calls
    def begin_call(self, plan: Any) -> None:
        with self._cv:
            for mid in plan.mats:
                self._users[mid] += 1
            if self._kept:
                for mid, mat in plan.mats.items():
                    mids = self._kept_mids.get(_byte_bounds(mat.array))
                    if mids is not None:
                        mids.add(mid)
        # the call's host operands (not the planner's workspaces, which live for this call only)
        arrays = [mat.array for mat in plan.mats.values() if not mat.workspace]
        for dev, disc in zip(self.devices, self.discrete):
            if disc:
                dev.prepare_host(arrays)

    def end_call(self, plan: Any) -> None:
        """Drop the cached tiles of the call's matrices that no other call in flight uses (except kept ones)."""
        with self._cv:
            gone = set()
            kept = set().union(*self._kept_mids.values()) if self._kept_mids else ()
            for mid in plan.mats:
                self._users[mid] -= 1
                if self._users[mid] <= 0:
                    del self._users[mid]
                    if mid not in kept:
                        gone.add(mid)
            if gone:
                for key in [k for k in self.directory.keys() if k[0] in gone]:
                    self._invalidate(key)
            self._cv.notify_all()

    def keep(self, array: np.ndarray) -> None:
        """Keep the tiles of host buffer ``array`` (any view of the same memory) cached between calls, until
        :meth:`unkeep`.  The owner promises to call :meth:`invalidate` whenever it changes the buffer other
        than through this runtime, and :meth:`unkeep` before the memory is freed or reused."""
        key = _byte_bounds(array)
        with self._cv:
            self._kept[key] = self._kept.get(key, 0) + 1
            self._kept_mids.setdefault(key, set())

    def invalidate(self, array: np.ndarray) -> None:
        """Drop the cached tiles of host buffer ``array`` (its host memory changed)."""
        key = _byte_bounds(array)
        with self._cv:
            mids = self._kept_mids.get(key)
            if mids:
                self._drop_mids(mids)
                mids.clear()
                self._cv.notify_all()

    def unkeep(self, array: np.ndarray) -> None:
        """Undo one :meth:`keep`; the buffer's tiles are dropped when the last keep is undone."""
        key = _byte_bounds(array)
        with self._cv:
            left = self._kept.get(key, 0) - 1
            if left > 0:
                self._kept[key] = left
                return
            self._kept.pop(key, None)
            mids = self._kept_mids.pop(key, None)
            if mids:
                self._drop_mids({m for m in mids if self._users.get(m, 0) <= 0})
                self._cv.notify_all()

    def _drop_mids(self, mids: set) -> None:
        for key in [k for k in self.directory.keys() if k[0] in mids]:
            self._invalidate(key)

    def flush(self) -> None:
        """Drop every cached tile."""
        with self._cv:
            for key in self.directory.keys():
                self._invalidate(key)
            self._cv.notify_all()

    # ----------------------------------------------------------------- state (lock held by callers)
    def _free_block(self, b: Block) -> None:
        self.heaps[b.device].free(b.offset)

    def _invalidate(self, key: Any) -> None:
        holders = set(self.directory.holders(key))
        for d in holders:
            self.directory.remove(key, d)
        self._drop(key, holders)

    def _drop(self, key: Any, devices: set[int]) -> None:
        """Remove ``key``'s blocks from the ALRUs of ``devices`` (already out of the directory)."""
        for d in devices:
            b = self.alru[d].remove(key)
            if b is None:
                continue
            self.counters[d]["invalidations"] += 1
            if b.readers == 0 and b.filled.is_set():
                self._free_block(b)
            else:
                b.dead = True

    def _release(self, blocks: list[Block]) -> None:
        for b in blocks:
            b.readers -= 1
            if b.readers == 0 and b.dead:
                if b.key is None:  # a private (on-demand or output) buffer
                    self.heaps[b.device].free(b.offset)
                elif b.filled.is_set():
                    self._free_block(b)

    def _reserve(self, d: int, nbytes: int, tm: TaskMemory) -> int | None:
        """Heap offset for nbytes on device d, evicting readers-free ALRU blocks as needed."""
        heap = self.heaps[d]
        alru = self.alru[d]
        while True:
            off = heap.alloc(nbytes)
            if off is not None:
                return off
            victim = alru.dequeue()
            if victim is None:
                return None
            self.directory.remove(victim.key, d)
            self._free_block(victim)
            tm.evictions += 1
            self.counters[d]["evictions"] += 1

    def _stuck(self, d: int) -> bool:
        """Every task running on device d is waiting for memory: nothing will be released."""
        ctxs = [c for (dd, _), c in self._ctx.items() if dd == d and c.active]
        return all(c.blocked for c in ctxs)

    def _drain(self, ctx: _StreamCtx, wait: bool) -> bool:
        """Release the readers of completed steps (all of them after waiting, when ``wait``).  Returns
        True when something was released.  Called without the lock (waiting may block)."""
        if not ctx.pending:
            return False
        if wait:
            for ev, _ in ctx.pending:
                ev.synchronize()
            done, ctx.pending = ctx.pending, []
        else:
            done, keep = [], []
            for p in ctx.pending:
                (done if p[0].query() else keep).append(p)
            if not done:
                return False
            ctx.pending = keep
        with self._cv:
            for _, blocks in done:
                self._release(blocks)
            self._cv.notify_all()
        return True

    def _allocate(self, d: int, nbytes: int, ctx: _StreamCtx, tm: TaskMemory,
                  key: Any = None, shape: tuple = (), dtype: Any = None) -> tuple[Block, bool]:
        """A block on device d: for ``key`` (cached; returns (block, hit)) or private (key None).

        On a hit the block's readers are incremented; a new cached block is inserted with 1 reader and
        its ``filled`` unset (the caller fills it).  Waits for memory when every block is read."""
        if nbytes > self.heaps[d].capacity:
            raise DeviceError(
                f"device {self.devices[d].name}: one tile ({nbytes} bytes) is larger than its whole memory "
                f"({self.heaps[d].capacity} bytes); use a smaller tile_size or give the device more memory")
        waited = stuck_for = 0.0
        while True:
            with self._cv:
                if key is not None:
                    b = self.alru[d].get(key)
                    if b is not None:
                        b.readers += 1
                        return b, True
                off = self._reserve(d, nbytes, tm)
                if off is not None:
                    b = Block(key, d, off, nbytes)
                    if key is not None:
                        self.alru[d].enqueue(b)
                        self.directory.add(key, d)
                    else:
                        b.filled.set()
                    b.readers = 1
                    return b, False
                if not ctx.pending:
                    ctx.blocked = True
                    try:
                        if self._stuck(d) and stuck_for >= 0.5 or waited >= self.wait_timeout:
                            dev = self.devices[d]
                            heap = self.heaps[d]
                            raise DeviceError(
                                f"device {dev.name}: its memory ({heap.capacity} bytes) cannot hold the tiles "
                                f"its {getattr(dev, 'streams', 1)} streams use at once ({heap.used_bytes} bytes "
                                f"in use, {nbytes} more needed); give it more memory, fewer streams or a smaller tile_size")
                        stuck = self._stuck(d)
                        t = time.perf_counter()
                        self._cv.wait(0.05)
                        dt = time.perf_counter() - t
                        waited += dt
                        stuck_for = stuck_for + dt if stuck else 0.0
                    finally:
                        ctx.blocked = False
                    continue
            self._drain(ctx, wait=True)

    def _admit(self, d: int, task: Any, mats: dict) -> int:
        """Wait until the device's memory can hold, besides what its running tasks may hold at once, this
        task's largest step (its output and the inputs of one step).  Keeps streams from deadlocking on
        a small memory: with too little memory for all streams, fewer tasks run at once."""
        def nbytes(t: Any) -> int:
            m = mats[t.m]
            return m.rows[t.i] * m.cols[t.j] * m.array.itemsize

        step = 0
        for _, args, _ in task.steps:
            step = max(step, sum(nbytes(x) for x in args if type(x) is Tile and x != task.out))
        need = nbytes(task.out) + step + 2 * int(getattr(self.devices[d], "alignment", 256)) * 5
        cap = self.heaps[d].capacity
        with self._cv:
            while self._admitted[d] > 0 and self._admitted[d] + need > cap:
                self._cv.wait()
            self._admitted[d] += need
        return need

    def _ctx_of(self, d: int, s: int) -> _StreamCtx:
        c = self._ctx.get((d, s))
        if c is None:
            with self._cv:
                c = self._ctx.setdefault((d, s), _StreamCtx(d, s))
        return c

    # ----------------------------------------------------------------- translate (Algorithm 2)
    def _fetch(self, d: int, key: Any, host: np.ndarray, ctx: _StreamCtx, tm: TaskMemory) -> Block:
        """The device-d block of input tile ``key`` (one more reader), filled from peer or host."""
        dev = self.devices[d]
        s = ctx.stream
        nbytes = host.size * host.itemsize
        if not self.caching:
            b, _ = self._allocate(d, nbytes, ctx, tm)
            b.array = dev.view(b.offset, host.shape, host.dtype)
            b.dead = True  # freed when its reader is released
            dev.h2d(b.array, host, s)
            tm.miss += 1
            tm.h2d += nbytes
            return b
        while True:
            b, hit = self._allocate(d, nbytes, ctx, tm, key)
            if not hit:
                break
            if not b.filled.is_set():
                b.filled.wait()
            if b.error is not None:  # its fill failed: drop our reader and try again
                with self._cv:
                    self._release([b])
                continue
            if b.event is not None:
                dev.wait(s, b.event)
            tm.l1 += 1
            return b
        # miss: choose the source (L2 peer when cheaper than the host)
        src: Block | None = None
        try:
            b.array = dev.view(b.offset, host.shape, host.dtype)
            if self.peer:
                with self._cv:
                    best = dev.transfer_seconds(nbytes, None)
                    for p in self.directory.holders(key):
                        if p == d:
                            continue
                        pb = self.alru[p].peek(key)
                        # only blocks whose own fill has been issued: two devices missing the same tile at
                        # once must not each wait for the other's copy
                        if pb is None or pb.dead or not pb.filled.is_set() or pb.error is not None \
                                or not dev.can_access_peer(self.devices[p]):
                            continue
                        cost = dev.transfer_seconds(nbytes, self.devices[p])
                        if cost < best:
                            best, src = cost, pb
                    if src is not None:
                        src.readers += 1
            if src is not None:
                if src.event is not None:
                    dev.wait(s, src.event)
                dev.d2d(b.array, self.devices[src.device], src.array, s)
                tm.l2 += 1
                tm.d2d += nbytes
            else:
                dev.h2d(b.array, host, s)
                tm.miss += 1
                tm.h2d += nbytes
            b.event = dev.record(s)
        except BaseException as exc:
            b.error = exc
            with self._cv:
                if self.alru[d].peek(key) is b:
                    self.alru[d].remove(key)
                    self.directory.remove(key, d)
                b.dead = True
                b.filled.set()
                if src is not None:
                    self._release([src])
                self._release([b])
                self._cv.notify_all()
            raise
        b.filled.set()
        if src is not None:
            ctx.pending.append((b.event, [src]))
        return b

    # ----------------------------------------------------------------- one task
    def execute(self, task: Any, d: int, stream: int, rec: Any) -> None:
        """Run ``task`` on discrete device d, stream ``stream``; fills ``rec`` like the scheduler does."""
        dev = self.devices[d]
        ctx = self._ctx_of(d, stream)
        plan = task.call.plan
        mats = plan.mats
        tm = TaskMemory()
        rec.mem = tm
        rec.flops = task.flops
        rec.t0 = time.perf_counter()
        out = task.out
        out_blk: Block | None = None
        used: list[Block] = []  # blocks the step being issued holds
        need = self._admit(d, task, mats)
        ctx.active = True
        try:
            out_host = mats[out.m].view(out.i, out.j)
            with self._cv:
                self._drop(out, self.directory.modify(out, d))
            nbytes = out_host.size * out_host.itemsize
            out_blk, _ = self._allocate(d, nbytes, ctx, tm)
            out_dev = out_blk.array = dev.view(out_blk.offset, out_host.shape, out_host.dtype)
            first = task.steps[0]
            bi = _BETA_AT.get(first[0])
            if not (bi is not None and first[1][bi] == 0):
                dev.h2d(out_dev, out_host, stream)
                tm.h2d += nbytes
            for kname, args, kw in task.steps:
                call_args = []
                for x in args:
                    if type(x) is Tile:
                        if x == out:
                            call_args.append(out_dev)
                        else:
                            b = self._fetch(d, x, mats[x.m].view(x.i, x.j), ctx, tm)
                            used.append(b)
                            call_args.append(b.array)
                    else:
                        call_args.append(x)
                dev.launch(kname, call_args, kw, stream)
                ctx.pending.append((dev.record(stream), used))
                used = []
                self._drain(ctx, wait=False)
            dev.d2h(out_dev, out_host, stream)
            tm.d2h += nbytes
            dev.sync(stream)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, never swallowed
            task_failed(task, dev.name, rec, exc)
            try:
                dev.sync(stream)
            except BaseException:  # noqa: BLE001 - the first error is the one reported
                pass
        finally:
            self._drain(ctx, wait=True)
            with self._cv:
                self._release(used)
                if out_blk is not None:
                    out_blk.dead = True
                    self._release([out_blk])
                self.directory.written_back(out)
                ctx.active = False
                self._admitted[d] -= need
                self._cv.notify_all()
        tm.intervals = dev.timeline(stream)
        rec.t1 = time.perf_counter()
        rec.bytes = (tm.h2d, tm.d2h, tm.d2d)
        c = self.counters[d]
        c["l1_hits"] += tm.l1
        c["l2_hits"] += tm.l2
        c["misses"] += tm.miss
        c["tasks"] += 1

    def host_wrote(self, key: Any) -> None:
        """A host-memory device wrote tile ``key``: drop cached copies of its old value."""
        if self.directory.holders(key):
            with self._cv:
                self._invalidate(key)
                self._cv.notify_all()

    # ----------------------------------------------------------------- inspection
    def stats(self) -> dict[str, dict[str, int]]:
        """Per discrete device: L1/L2 hits, misses, evictions, invalidations, tasks, heap use."""
        out = {}
        with self._cv:
            for d, dv in enumerate(self.devices):
                if not self.discrete[d]:
                    continue
                c = dict(self.counters[d])
                heap = self.heaps[d]
                c.update(cached_tiles=len(self.alru[d]), heap_used=heap.used_bytes, heap_capacity=heap.capacity,
                         heap_failures=heap.stats.failures)
                out[dv.name] = c
        return out

    def level(self, d: int, key: Any) -> int:
        """2: device d holds ``key``; 1: a peer it can copy from holds it; 0: only the host."""
        if key in self.alru[d]:
            return 2
        if self.peer:
            dev = self.devices[d]
            for p in self.directory.holders(key):
                if p != d and dev.can_access_peer(self.devices[p]):
                    return 1
        return 0
