"""The cluster executor: BLASX's demand-driven placement with locality priority over Dask workers,
versioned tiles, and recovery when workers are lost.

What it must not touch: networking and serialisation (Dask's), the host runtime's scheduler.
"""

from __future__ import annotations


import itertools
import queue
import time
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from tileblas.runtime import _planner as P
from tileblas.runtime._planner import Tile
from tileblas.runtime._scheduler import TaskRecord
from tileblas.runtime.cluster._spec import _POLL_S
from tileblas.runtime.cluster._store import _Ref, _tile_key

if TYPE_CHECKING:  # pragma: no cover
    from tileblas.runtime.cluster._runtime import ClusterRuntime
    from tileblas.runtime.cluster._store import DistributedMatrix
__all__: list[str] = []

class _TaskRun:
    __slots__ = ("task", "future", "worker", "refs", "reads_out", "out_ref", "rec", "attempts")

    def __init__(self, task: P.Task) -> None:
        self.task = task
        self.future: Any = None
        self.worker = ""
        self.refs: list[_Ref] = []
        self.reads_out = True
        self.out_ref: _Ref | None = None
        self.rec: TaskRecord | None = None
        self.attempts = 0


def _reads_output(step: tuple) -> bool:
    """Does the first step of a task read the old value of its output tile (beta != 0, or in place)?"""
    name, args, _ = step
    if name in ("gemm", "symm", "hemm"):
        return args[3] != 0
    # syrk/herk/syr2k/her2k on a diagonal tile write one triangle: the other keeps the old values
    return True


class _Lost(Exception):
    """Internal: a tile a call needs was lost with a worker; the executor recovers."""



def _is_loss(exc: BaseException) -> bool:
    """Is this exception Dask telling us data or a worker went away (as opposed to a task's own error)?"""
    import asyncio
    import concurrent.futures as cf

    if isinstance(exc, (asyncio.CancelledError, cf.CancelledError)):
        return True
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"FutureCancelledError", "CancelledError", "CommClosedError", "FutureLost"})


# ---------------------------------------------------------------------------------------------------
# The cluster executor
# ---------------------------------------------------------------------------------------------------


class _CallExecutor:
    """Runs one plan's tasks on the workers: demand-driven placement with locality, versioned tiles,
    recovery from lost workers, and the final gather into the client's output array (or handle)."""

    def __init__(self, rt: ClusterRuntime, plan: P.Plan, handles: dict) -> None:
        self.rt = rt
        self.client = rt._client
        self.plan = plan
        self.handles = handles
        self.records: list[TaskRecord] = []
        self.versions: dict[Tile, _Ref] = {}
        self.keys: dict[Tile, Any] = {}
        self.runs: list[_TaskRun] = []
        self.inflight: dict[Any, _TaskRun] = {}
        self.load: dict[str, int] = {}
        self.call_id = uuid.uuid4().hex[:12]
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._seq = itertools.count()
        self.out_mat = None
        for t in plan.tasks:  # the call's output matrix: the first non-workspace output
            mat = plan.mats[t.out.m]
            if not mat.workspace:
                self.out_mat = mat
                break

    # --------------------------------------------------------------- tiles
    def _handle_of(self, mat: P.TileGrid) -> DistributedMatrix | None:
        return self.handles.get(id(mat.array))

    def _prepare_digests(self) -> None:
        """Digest every host tile the call reads, in the background pool (hashlib runs without the GIL)."""
        need: set[Tile] = set()
        for t in self.plan.tasks:
            need.update(t.inputs)
            if _reads_output(t.steps[0]) if t.steps else True:
                need.add(t.out)
        futs = {}
        for x in need:
            mat = self.plan.mats[x.m]
            if mat.workspace or self._handle_of(mat) is not None:
                continue
            futs[x] = self.rt._pool.submit(_tile_key, mat.view(x.i, x.j))
        for x, f in futs.items():
            self.keys[x] = f.result()

    def _ref(self, x: Tile) -> _Ref:
        """The current version of tile x (a root reference made on first use)."""
        r = self.versions.get(x)
        if r is not None:
            return r
        mat = self.plan.mats[x.m]
        h = self._handle_of(mat)
        if mat.workspace:
            r = _Ref(zeros=True)
        elif h is not None:
            r = h._tiles.get((x.i, x.j))
            if r is None:  # a tile of a zeros() handle never written
                r = _Ref(zeros=True)
        else:
            key = self.keys.get(x)
            if key is None:
                key = _tile_key(mat.view(x.i, x.j))
                self.keys[x] = key
            hit = self.rt._store.get(key)
            if hit is not None:
                self.rt._counts["store_hits"] += 1
                r = _Ref(hit.future, hit.worker, hit.nbytes, root=(mat.array, x.i, x.j, key))
            else:
                r = _Ref(None, None, 0, root=(mat.array, x.i, x.j, key))
        self.versions[x] = r
        return r

    def _root_view(self, r: _Ref) -> np.ndarray:
        src, i, j, _ = r.root
        t = self.plan.tile
        return src[i * t:(i + 1) * t, j * t:(j + 1) * t]

    # --------------------------------------------------------------- placement
    def _score(self, run_task: P.Task, w: str) -> int:
        """Locality of a task on worker w: bytes of its tiles resident on w minus bytes resident on other
        workers (which w would fetch from its peers).  Tiles still on the client count for neither: they
        are sent once, to wherever the task runs.  With every tile resident this ranks workers exactly as
        "the bytes of the task's tiles that w holds" does."""
        s = 0
        versions = self.versions
        for x in run_task.inputs:
            r = versions.get(x)
            if r is not None and r.worker is not None:
                s += r.nbytes if r.worker == w else -r.nbytes
        r = versions.get(run_task.out)
        if r is not None and r.worker is not None:
            s += r.nbytes if r.worker == w else -r.nbytes
        return s

    def _pick(self, ready: list, w: str) -> int:
        best, best_s = 0, None
        for n_, t in enumerate(ready):
            s = self._score(t, w)
            if best_s is None or s > best_s:
                best, best_s = n_, s
        return best

    # --------------------------------------------------------------- submission
    def _submit(self, tr: _TaskRun, w: str) -> None:
        t = tr.task
        plan = self.plan
        tiles = [t.out] + [x for x in t.inputs if x != t.out]
        if not tr.refs:
            tr.reads_out = _reads_output(t.steps[0]) if t.steps else True
            tr.refs = [self._ref(x) for x in tiles]
        for r in tr.refs:  # a resident tile that went away with a worker: send it again
            if r.task is None and r.future is not None and r.future.status in ("cancelled", "lost"):
                if r.root is not None and r.root[3] is not None:
                    self.rt._store.discard(r.root[3])
                r.future, r.worker = None, None
        missing = [r for n_, r in enumerate(tr.refs) if r.future is None and not r.zeros
                   and (n_ > 0 or tr.reads_out)]
        if missing:
            views = []
            for r in missing:
                if r.root is None or r.root[0] is None:
                    raise RuntimeError("a tile this call needs was lost with a worker and has no host copy")
                views.append(self._root_view(r))
            w = self.rt._send(missing, views, w)
            for r in missing:
                if r.root is not None and r.root[3] is not None:
                    self.rt._store.put(r.root[3], _Ref(r.future, r.worker, r.nbytes, root=r.root))
        slot = {x: n_ for n_, x in enumerate(tiles)}
        steps = []
        for kname, args, kw in t.steps:
            refs = tuple((p, slot[a]) for p, a in enumerate(args) if type(a) is Tile)
            plain = tuple(None if type(a) is Tile else a for a in args)
            steps.append((kname, plain, dict(kw), refs))
        outm = plan.mats[t.out.m]
        shape = (outm.rows[t.out.i], outm.cols[t.out.j])
        targs = []
        for n_, r in enumerate(tr.refs):
            if n_ == 0 and not tr.reads_out:
                targs.append(None)
            else:
                targs.append(None if r.zeros else r.future)
        from tileblas.devices.dask import run_tile_task

        key = f"tileblas-{t.routine}-{t.out.i}-{t.out.j}{t.suffix}-{self.call_id}-{next(self._seq)}"
        rec = TaskRecord(t, self.rt._by_addr.get(w, 0))
        rec.flops = t.flops
        rec.t_found = rec.t0 = time.perf_counter()
        fut = self.client.submit(run_tile_task, tuple(steps), 0, shape, outm.array.dtype.str, *targs, key=key,
                                 workers=[w], allow_other_workers=True, pure=False,
                                 priority=t.depth)
        tr.future, tr.worker, tr.rec = fut, w, rec
        tr.attempts += 1
        nb = shape[0] * shape[1] * outm.array.dtype.itemsize
        if tr.out_ref is None:
            tr.out_ref = _Ref(fut, w, nb, task=tr)
            self.versions[t.out] = tr.out_ref
        else:
            tr.out_ref.future, tr.out_ref.worker = fut, w
        self.inflight[fut] = tr
        fut.add_done_callback(self._done.put)
        self.load[w] = self.load.get(w, 0) + 1
        self.rt._counts["tasks"] += 1

    # --------------------------------------------------------------- the loop
    def execute(self) -> None:
        rt = self.rt
        plan = self.plan
        self._prepare_digests()
        pending = {t.index: t.deps for t in plan.tasks}
        order = sorted(plan.tasks, key=lambda t: (-t.depth, t.index))
        ready: list = [t for t in order if t.deps == 0]
        runs = {t.index: _TaskRun(t) for t in plan.tasks}
        submitted = 0
        total = len(plan.tasks)
        recoveries = 0
        no_worker_since: float | None = None
        while True:
            workers = rt._refresh_workers(wait=not self.inflight and bool(ready), max_age=_POLL_S)
            if not workers:  # tasks in flight but no worker left to run them: wait a while, then give up
                if no_worker_since is None:
                    no_worker_since = time.monotonic()
                elif time.monotonic() - no_worker_since > rt.worker_wait_s:
                    self._cancel_all()
                    raise RuntimeError(f"no Dask worker in the cluster for {rt.worker_wait_s:g} s; the call was "
                                       f"cancelled and its output is unchanged")
                time.sleep(0.1)
                continue
            no_worker_since = None
            for w in list(self.load):
                if w not in workers:
                    self.load.pop(w)
            slots = {w: (rt.reservation_slots or 2 * rt._devices[rt._by_addr[w]].nthreads) for w in workers}
            if rt.sync:
                slots = {w: 1 for w in workers}
                limit_total = 1
            else:
                limit_total = None
            progressed = True
            while ready and progressed:
                progressed = False
                for w in sorted(workers, key=lambda a: self.load.get(a, 0)):
                    if not ready:
                        break
                    if self.load.get(w, 0) >= slots[w]:
                        continue
                    if limit_total is not None and len(self.inflight) >= limit_total:
                        break
                    t = ready.pop(self._pick(ready, w))
                    tr = runs[t.index]
                    self.runs.append(tr)
                    self._submit(tr, w)
                    submitted += 1
                    progressed = True
                    newly = []
                    for d in t.dependents:
                        pending[d.index] -= 1
                        if pending[d.index] == 0:
                            newly.append(d)
                    if newly:
                        ready.extend(newly)
                        ready.sort(key=lambda x: (-x.depth, x.index))
            if not self.inflight:
                if submitted == total and not ready:
                    if self._finish():
                        return
                    recoveries += 1
                    self._recover(recoveries)
                    continue
                continue
            try:
                done = [self._done.get(timeout=_POLL_S)]
            except queue.Empty:
                continue
            while True:
                try:
                    done.append(self._done.get_nowait())
                except queue.Empty:
                    break
            lost = False
            for f in done:
                tr = self.inflight.pop(f, None)
                if tr is None:
                    continue
                self.load[tr.worker] = max(0, self.load.get(tr.worker, 0) - 1)
                st = f.status
                if st == "finished":
                    tr.rec.t1 = tr.rec.t_done = time.perf_counter()
                    self.records.append(tr.rec)
                elif st == "error":
                    exc = f.exception()
                    if _is_loss(exc):
                        lost = True
                        continue
                    self._cancel_all()
                    tb = f.traceback()
                    if hasattr(exc, "add_note"):
                        exc.add_note(f"(tileblas: task {tr.task.label} on Dask worker {tr.worker} failed; the "
                                     f"rest of the call was cancelled and the output is unchanged)")
                    raise exc.with_traceback(tb) if tb is not None else exc
                else:  # cancelled / lost
                    lost = True
            if lost:
                recoveries += 1
                self._recover(recoveries)

    def _cancel_all(self) -> None:
        futs = list(self.inflight)
        self.inflight.clear()
        if futs:
            try:
                self.client.cancel(futs)
            except Exception:  # pragma: no cover
                pass

    def _recover(self, attempt: int) -> None:
        """Send lost host tiles again and resubmit the tasks whose futures were cancelled, in submission
        order, on the workers alive now."""
        if attempt > 50:
            self._cancel_all()
            raise RuntimeError("tileblas: the cluster kept losing this call's tiles; giving up after 50 recoveries")
        self.rt._counts["recoveries"] += 1
        time.sleep(0.05)  # let the scheduler's view of the lost worker settle
        workers = self.rt._refresh_workers(wait=True)
        dead_status = ("cancelled", "lost")
        # roots and store entries whose data is gone
        for tr in self.runs:
            for r in tr.refs:
                if r.task is None and not r.zeros and r.future is not None and r.future.status in dead_status:
                    if r.root is not None and r.root[3] is not None:
                        self.rt._store.discard(r.root[3])
                    r.future, r.worker = None, None
        for tr in self.runs:
            f = tr.future
            if f is None or f.status not in dead_status and not (f.status == "error" and _is_loss(f.exception())):
                continue
            if self.inflight.pop(f, None) is not None and tr.worker in self.load:
                self.load[tr.worker] = max(0, self.load[tr.worker] - 1)
            w = max(workers, key=lambda a: (self._score(tr.task, a), -self.load.get(a, 0)))
            self.rt._counts["resubmitted"] += 1
            self._submit(tr, w)

    def _finish(self) -> bool:
        """Bring the output back (or leave it in its handle); False when something was lost on the way."""
        out = self.out_mat
        if out is None:
            return True
        h = self._handle_of(out)
        items = [((x.i, x.j), r) for x, r in self.versions.items() if x.m == out.id and r.task is not None]
        if h is not None:
            futs = [r.future for _, r in items]
            while any(f.status == "pending" for f in futs):  # recomputing after a loss: wait, fetch nothing
                time.sleep(0.01)
            for f in futs:
                if f.status == "error" and not _is_loss(f.exception()):
                    f.result()  # raises the task's exception with its traceback
            if any(f.status != "finished" for f in futs):
                return False
            for ij, r in items:
                h._tiles[ij] = _Ref(r.future, r.worker, r.nbytes)
            h._host = None if items else h._host
            return True
        try:
            vals = self.rt._gather_into(out.array, out.tile, items)
        except _Lost:
            return False
        # the output tiles stay resident, addressed by their contents
        digests = [self.rt._pool.submit(_tile_key, v) for v in vals]
        for ((i, j), r), fk in zip(items, digests):
            key = fk.result()
            self.rt._store.put(key, _Ref(r.future, r.worker, r.nbytes, root=(out.array, i, j, key)))
        return True

