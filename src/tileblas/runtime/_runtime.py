"""The Runtime object: devices + scheduler + the per-call pipeline, and the current/default runtime.

Every Level-3 call goes, BLIS style::

    check (planner.check_call)  ->  trivial? (empty, k == 0, alpha == 0: one native call)
      ->  small? (one native call on one device when tiling cannot pay)
      ->  partition (planner.plan_call: tile size, split-k)  ->  schedule (Scheduler.run)  ->  kernels

Policy
    * Tile size is the only knob: per call ``tile_size=``, else the Runtime's ``tile_size``, else
      :func:`~tileblas.runtime._planner.default_tile_size` from the problem and the device count on host
      workers, and on accelerators (devices with memory of their own and a device model: GPUs) the size
      their model predicts fastest (:func:`tileblas.runtime._shares.accelerator_tile`).  A runtime of
      accelerators and host workers splits a call that names no tile size between the two kinds, each in
      tiles of its own size (:func:`tileblas.runtime._shares.split_call`; docs/measurements/gpu.md,
      "Tiles per device kind"), and runs a call that fits one accelerator tile as one accelerator task
      where the model says that is faster than one native call on a host worker.
    * The small-problem path (a single native call in the caller's thread on the first host-memory device)
      is taken when no tile size was named and the call has fewer than ``small_flops`` flops, or when the
      whole problem fits in one tile.
    * The path policy (:mod:`tileblas.policy._paths`): on a runtime whose devices are all host workers, that
      names no tile size and no ``shared_flops`` and is not deterministic (the process default is one),
      every call takes the path measured fastest on this machine for its routine
      family and precision class: one native call on all the workers' BLAS threads together (path
      "shared"; for trmm/trsm the CPU kernel runs the recursion instead where it measured faster: path
      "recursive"), or tiles when the call has at least the policy's ``tile_flops``.  The shipped default
      never tiles there; ``tileblas tune`` measures the crossovers and ``tileblas info`` shows them.  This
      path does no tile-size search and no planning; it keeps a call log (for :meth:`last_profile`) and
      counts the call, without per-device totals.
    * The shared path with an explicit ``shared_flops``: when every device is a host worker (they share the machine's cores and memory), no
      tile size was named and the call has fewer than ``shared_flops`` flops, it runs as one native call
      on all the workers' BLAS threads together (:meth:`Device.shared_kernel`): at that size each
      worker's share is a few small tiles, which one core runs well below its rate.
    * ``deterministic=True``: the partitioning (default tile size, split-k factor) is chosen as if there
      were :data:`~tileblas.runtime._planner.DETERMINISTIC_DEVICES` devices, so that the same inputs give
      bitwise the same result whatever the number of devices and wherever tiles land (every tile is
      always computed with the same k order, and split-k partial products are reduced in a fixed order).
      Without it results are still reproducible for one Runtime configuration.

State
    The current runtime lives in a :class:`contextvars.ContextVar` (``with Runtime() as rt:`` sets it
    for that thread/context); outside any ``with`` block :func:`get_runtime` returns the process default,
    created on first use (one single-threaded CPU worker per core) and replaceable by :func:`set_runtime`.

    Layers above that keep state tied to a runtime (the drop-in's C small-call path, which stands in for
    the default runtime) register a callback with :func:`on_release`; it is called with a runtime when it
    closes and with None when the process default is replaced (:func:`set_runtime`).  The runtime never
    imports them.

What it must not touch
    Device-kind-specific code, and argument conversion of the drop-in API (tileblas.blas does that and
    calls :func:`tileblas.blas._dispatch.level3`).
"""

from __future__ import annotations

import atexit
import contextvars
import inspect
import os
import textwrap
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable, Sequence

import numpy as np

from tileblas._tuning import get_tuning
from tileblas.devices import _zarrtiles
from tileblas.devices._filetiles import reserve
from tileblas.policy import _paths
from tileblas.runtime import _planner as P
from tileblas.runtime import _shares
from tileblas.runtime._scheduler import SCHEDULES, Scheduler, TaskRecord
from tileblas.runtime._trace import CallProfile, build_profile, chrome_trace, plot_timeline, write_trace

__all__ = ["Runtime", "get_runtime", "set_runtime", "make_devices", "on_release"]

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("tileblas_runtime", default=None)
_DEFAULT: "Runtime | None" = None
_DEFAULT_LOCK = threading.Lock()
#: the runtimes of this process, whose locks a fork child makes afresh (their schedulers do the same)
_RUNTIMES: "weakref.WeakSet[Runtime]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """In a fork child, locks another thread of the parent held stay held: make them afresh."""
    global _DEFAULT_LOCK
    _DEFAULT_LOCK = threading.Lock()
    for rt in list(_RUNTIMES):
        rt._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

#: Callbacks of :func:`on_release`, called in registration order.
_RELEASE_HOOKS: list[Callable[["Runtime | None"], None]] = []


def on_release(hook: Callable[["Runtime | None"], None]) -> None:
    """Call ``hook(rt)`` when a runtime ``rt`` closes (before its workers stop), and ``hook(None)`` when the
    process default runtime is replaced by :func:`set_runtime`.  Registering a hook again is harmless."""
    if hook not in _RELEASE_HOOKS:
        _RELEASE_HOOKS.append(hook)


def _released(rt: "Runtime | None") -> None:
    for hook in tuple(_RELEASE_HOOKS):
        hook(rt)


#: What ``Runtime(host_memory=...)`` keeps back from its tile buffers for the interpreter, NumPy and
#: the BLAS threads' own buffers: this much, or a quarter of host_memory if that is less.
_HOST_RESERVE = 384 << 20
_MIN_HOST_MEMORY = 64 << 20


class _CallProgress:
    """The progress bar of one tiled call: tasks done of the plan's, shown once the call has run 2 s."""

    AFTER_S = 2.0

    def __init__(self, plan: Any) -> None:
        self.total = len(plan.tasks)
        self.label = f"{plan.routine} (tiles of {plan.tile})"
        self.t0 = time.perf_counter()
        self.bar: Any = None
        self.shown = 0

    def __call__(self, call: Any) -> None:
        done = self.total - call.remaining
        if self.bar is None:
            if time.perf_counter() - self.t0 < self.AFTER_S:
                return
            from tileblas._progress import Progress

            self.bar = Progress(self.total, True, self.label, "task", leave=False)
        if done > self.shown:
            self.bar.step(k=done - self.shown)
            self.shown = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


#: Tiles past the host candidates, tried largest first for devices with memory of their own.
_LARGER_TILES = (4096, 2048)


def _replace(args: tuple, kwargs: dict, names: list, by: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with the operands named in ``by`` (positional ones by ``names``) replaced."""
    pos = tuple(by.get(names[i], v) if i < len(names) else v for i, v in enumerate(args))
    return pos, {k: by.get(k, v) for k, v in kwargs.items()}


def _same_store(a: Any, b: Any) -> bool:
    """Whether two zarr arrays are the same array of the same store (opened twice)."""
    try:
        return str(a.store) == str(b.store) and a.path == b.path
    except AttributeError:
        return False


def _check_host_memory(host_memory: Any, devices: Any) -> int:
    if isinstance(host_memory, bool) or not isinstance(host_memory, (int, np.integer)) \
            or host_memory < _MIN_HOST_MEMORY:
        raise ValueError(f"host_memory must be a number of bytes >= {_MIN_HOST_MEMORY}; got {host_memory!r}")
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, (int, np.integer))):
        raise ValueError("host_memory bounds the host's own workers: devices must be None or a worker count; "
                         f"got {devices!r}")
    return int(host_memory)


def _default_workers() -> int:
    """Host workers a runtime gets by default: one per core, capped by a thread limit in force
    (threadpoolctl's, see tileblas.kernels._threadpool)."""
    from tileblas.kernels import _threadpool

    return _threadpool.effective_threads(_threadpool.default_threads())


def _staged_devices(host_memory: int, workers: Any) -> list:
    """Host workers whose tiles live in buffers that share ``host_memory`` (see StagedDevice)."""
    from tileblas.devices.sim import StagedDevice

    n = int(workers) if workers is not None else _default_workers()
    if n < 1:
        raise ValueError(f"devices must be >= 1; got {workers}")
    tiles = host_memory - min(_HOST_RESERVE, host_memory // 4)
    return [StagedDevice(i, memory=tiles // n) for i in range(n)]


def make_devices(spec: Any = None) -> list:
    """Devices from a Runtime ``devices=`` argument.

    ``None``: one single-threaded CPU worker per core (at most the thread limit in force, e.g. inside
    ``threadpoolctl.threadpool_limits(n)``).  An int ``n``: n such workers.  A list of Device
    objects: used as given.  A string of comma-separated items ``KIND[:COUNT][xTHREADS]``, e.g. ``"cpu:2"``
    (two single-threaded workers) or ``"cpu:1,cpu:1x2"`` (one single-threaded worker and one worker running
    2-threaded BLAS); KIND is any registered device kind.
    """
    from tileblas.devices import Device, create_device, host_devices

    if spec is None:
        return list(host_devices(_default_workers()))
    if isinstance(spec, bool):
        raise TypeError(f"devices must be None, an int, a device spec string or a list of Device; got {spec!r}")
    if isinstance(spec, (int, np.integer)):
        if spec < 1:
            raise ValueError(f"devices must be >= 1; got {spec}")
        return list(host_devices(int(spec)))
    if isinstance(spec, str):
        devs: list = []
        counts: dict[str, int] = {}
        try:
            for item in spec.split(","):
                item = item.strip()
                kind, _, rest = item.partition(":")
                count_s, _, threads_s = (rest or "1").partition("x")
                try:
                    count = int(count_s)
                    threads = int(threads_s) if threads_s else None
                except ValueError:
                    raise ValueError(f"devices spec item must look like 'cpu:2' or 'cpu:1x2'; got {item!r}") from None
                if count < 1:
                    raise ValueError(f"devices spec item {item!r} must have a count >= 1")
                for _ in range(count):
                    idx = counts.get(kind, 0)
                    counts[kind] = idx + 1
                    kw = {"threads": threads} if threads else {}
                    devs.append(create_device(kind, idx, **kw))
        except BaseException:
            for d in devs:  # a spec that cannot be made whole leaves nothing open (a GPU's tile memory)
                d.close()
            raise
        return devs
    devs = list(spec)
    if not devs:
        raise ValueError("devices must name at least one device; got an empty list")
    for d in devs:
        if not isinstance(d, Device):
            raise TypeError(f"devices must be Device objects; got {type(d).__name__}")
    names = [d.name for d in devs]
    if len(set(names)) != len(names):
        raise ValueError(f"device names must be unique; got {names}")
    return devs


#: The operands of each routine method of :class:`Runtime` (numpydoc entries, shared by the methods).
_OPERANDS = {
    "gemm": {"a": "Shape (m, k), or (k, m) when ``transa`` transposes", "b": "Shape (k, n), or (n, k) when "
             "``transb`` transposes", "c": "Shape (m, n), updated in place"},
    "symm": {"a": "Shape (k, k), symmetric: only its ``uplo`` triangle is read (k: rows of ``c`` for side "
             "'L', its columns for side 'R')", "b": "Shape (m, n)", "c": "Shape (m, n), updated in place"},
    "syrk": {"a": "Shape (n, k), or (k, n) when ``trans`` transposes", "c": "Shape (n, n): its ``uplo`` "
             "triangle is updated in place, the other is not touched"},
    "syr2k": {"a": "Shape (n, k), or (k, n) when ``trans`` transposes", "b": "The shape of ``a``",
              "c": "Shape (n, n): its ``uplo`` triangle is updated in place, the other is not touched"},
    "trmm": {"a": "Shape (k, k), triangular: only its ``uplo`` triangle is read, and not its diagonal when "
             "``diag`` is 'U' (k: rows of ``b`` for side 'L', its columns for side 'R')",
             "b": "Shape (m, n), updated in place"},
}
_OPERANDS["hemm"] = {**_OPERANDS["symm"], "a": _OPERANDS["symm"]["a"].replace("symmetric", "Hermitian")}
_OPERANDS["herk"], _OPERANDS["her2k"], _OPERANDS["trsm"] = _OPERANDS["syrk"], _OPERANDS["syr2k"], _OPERANDS["trmm"]


def _level3_doc(name: str, summary: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give routine method ``name`` its numpydoc docstring: ``summary`` and the shared entries (operands,
    flags by the rule of :mod:`tileblas._flags`, ``tile_size``, errors)."""
    from tileblas import _flags

    params, flags = P.ROUTINES[name]
    ops = _OPERANDS[name]
    real = {"herk": ("alpha", "beta"), "her2k": ("beta",)}.get(name, ())
    doc = "\n    Parameters\n    ----------\n"
    for p in params:
        if p in ops:
            doc += f"    {p} : ndarray\n" + textwrap.fill(ops[p] + ".", 104, initial_indent=" " * 8,
                                                          subsequent_indent=" " * 8) + "\n"
        else:
            doc += f"    {p} : {'real ' if p in real else ''}scalar\n"
    rank_k = name in ("syrk", "herk", "syr2k", "her2k")
    for f, d in flags.items():
        doc += _flags.param_doc(f, "b" if f == "transb" else "c" if rank_k and f == "uplo" else "a", d)
    doc += """    tile_size : int, optional
        Tile size of this call (default: the runtime's ``tile_size``, else chosen per call).

    Raises
    ------
    ValueError, TypeError
        A bad argument (the message names it and its value).
    RuntimeError
        The runtime has been shut down (the output is left unchanged).
    Exception
        Whatever a tile task raised; the rest of the call is cancelled and the output is undefined.

    Notes
    -----
    The arrays share one dtype (float32, float64, complex64 or complex128) and may have any memory layout;
    the output must be writeable.  The call returns when the output holds the result;
    :meth:`last_profile` says how it ran (one native call, or tiles on which devices).
"""

    def put(fn: Callable[..., None]) -> Callable[..., None]:
        fn.__doc__ = summary + "\n" + doc
        return fn

    return put


class Runtime:
    """A set of devices executing Level-3 BLAS calls as tile tasks (the BLASX runtime).

    Parameters
    ----------
    devices : None, int, str or list of Device
        See :func:`make_devices`.  Default: one single-threaded CPU worker per core.
    tile_size : int, optional
        Tile size for every call (a call's own ``tile_size=`` wins).  Default: chosen per call.
    reservation_slots : int
        Size of each device's reservation station (default 4, as in the paper).
    sync : bool
        Run every task inline in the calling thread (debugging); same plan, same kernels.
    deterministic : bool
        Bitwise-identical results however many devices and wherever tiles land (see module notes).
    small_flops : float, optional
        Calls below this many flops run as one native call; default: the :class:`~tileblas.Tuning` in
        force (``tileblas.get_tuning().small_flops``).
    shared_flops : float, optional
        On host workers only: calls below this many flops run as one native call on all the workers' BLAS
        threads together, larger ones are tiled (0 turns this off).  Default: None, the path policy decides
        per call (see the module notes; the attribute then reads None); 0 in deterministic mode.
    host_memory : int, optional
        Bound the memory the runtime holds to about this many bytes, for operands larger than memory
        (``numpy.memmap`` files): the host's workers (``devices``: None or their count) then keep their
        tiles in buffers sharing ``host_memory`` less a reserve (384 MiB, or a quarter if less), copy each
        tile a task needs in (from a file with ``pread``), cache them, and write finished output tiles
        back (``pwrite``).  Blocks under a file-backed output are reserved on disk before a call writes
        any of it.  Operands may also be 2-D ``zarr`` arrays: tiles are then read from and written to the
        zarr store (the tile size a whole number of the output's chunks, so no two tiles share a chunk;
        a failed call's note names how many output tiles it wrote).  See
        :class:`tileblas.devices.sim.StagedDevice`.
    progress : bool
        Show a progress bar (tqdm when installed, else a text bar; on stderr) for tiled calls still
        running after 2 seconds.  Off by default in library use; the ``tileblas`` command turns it on.
    memory_policy : {"cache", "on-demand"}
        For devices with their own memory: keep tiles in per-device ALRU caches with peer fetch and
        MESI-X coherence ("cache", the BLASX runtime), or move every tile in for each use and drop it
        afterwards ("on-demand", like cuBLAS-XT; the baseline).
    schedule : {"demand", "round-robin"}
        Demand-driven tasks with locality priority and stealing ("demand", the BLASX runtime), or a static
        round robin of the tasks over the devices in plan order, without locality or stealing
        ("round-robin").  ``Runtime(devices, schedule="round-robin", memory_policy="on-demand")`` is
        cuBLAS-XT's way, the baseline of the out-of-core measurement (docs/measurements/gpu.md,
        "Running it").

    Notes
    -----
    A Runtime is a context manager: ``with Runtime(2) as rt:`` makes it the current runtime of that
    thread/context (so ``tileblas.blas`` Level-3 routines run on it) and shuts it down on exit.  Several
    threads may call one Runtime at once; their tasks share the devices.

    If a task raises, the rest of that call is cancelled, the exception reaches the caller with the
    worker's traceback (and a note naming the task and device), and the runtime keeps working.  The
    output array of a failed call is **undefined**: some tiles may hold the new values, others the old or
    partially updated ones.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__signature__ = _constructor_signature(cls)  # a subclass's own __init__, not __new__'s

    def __new__(cls, devices: Any = None, *args: Any, **kwargs: Any) -> "Runtime":
        # A Dask cluster (Client, cluster object, scheduler address, "dask:N") gives a ClusterRuntime
        # (tileblas.runtime.cluster); nothing of Dask is imported otherwise.
        if cls is Runtime and devices is not None and not isinstance(devices, (int, list, tuple)):
            from tileblas.runtime import cluster

            if cluster.is_cluster_spec(devices):
                cls = cluster.ClusterRuntime
        return super().__new__(cls)

    def __init__(self, devices: Any = None, *, tile_size: int | None = None, reservation_slots: int = 4,
                 sync: bool = False, deterministic: bool = False, small_flops: float | None = None,
                 memory_policy: str = "cache", shared_flops: float | None = None,
                 host_memory: int | None = None, progress: bool = False, schedule: str = "demand") -> None:
        P.check_tile_size(tile_size)
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(map(repr, SCHEDULES))}; got {schedule!r}")
        if isinstance(reservation_slots, bool) or not isinstance(reservation_slots, (int, np.integer)) \
                or reservation_slots < 1:
            raise ValueError(f"reservation_slots must be a positive int; got {reservation_slots!r}")
        self.host_memory = None if host_memory is None else _check_host_memory(host_memory, devices)
        self.progress = bool(progress)
        self._devices = make_devices(devices) if host_memory is None else _staged_devices(host_memory, devices)
        # devices this runtime made (from None, a count or a spec string) are its to close; a list of
        # Device objects stays its owner's
        self._owned = [] if devices is not None and not isinstance(devices, (str, int, np.integer)) \
            else list(self._devices)
        self.tile_size = None if tile_size is None else int(tile_size)
        self.reservation_slots = int(reservation_slots)
        self.sync = bool(sync)
        self.deterministic = bool(deterministic)
        if small_flops is not None and (isinstance(small_flops, bool) or not isinstance(
                small_flops, (int, float, np.integer, np.floating)) or not small_flops >= 0):
            raise ValueError(f"small_flops must be a number >= 0 or None; got {small_flops!r}")
        self._small_flops = None if small_flops is None else float(small_flops)
        by_policy = shared_flops is None and not self.deterministic and self.tile_size is None
        if isinstance(shared_flops, bool) or (shared_flops is not None and (not isinstance(
                shared_flops, (int, float, np.integer, np.floating)) or not shared_flops >= 0)):
            raise ValueError(f"shared_flops must be a number >= 0; got {shared_flops!r}")
        # The host workers' BLAS threads together, where every device is one (else the shared path is off).
        threads = [d.threads for d in self._devices if d.host_memory]
        host_only = len(threads) == len(self._devices) and all(threads)
        self._shared_threads = sum(threads) if host_only and len(threads) > 1 else 0
        # Threads of the path policy's native call (0: the policy does not apply to this runtime).
        self._policy_threads = sum(threads) if by_policy and host_only else 0
        # None: the Tuning in force at each call (0 in deterministic mode); no limit under the path policy.
        self._shared_flops = (None if shared_flops is None and not self.deterministic
                              else float(shared_flops or 0.0))
        self._names = [d.name for d in self._devices]
        if memory_policy not in ("cache", "on-demand"):
            raise ValueError(f"memory_policy must be 'cache' or 'on-demand'; got {memory_policy!r}")
        self._memory = None
        locality = None
        if any(not d.host_memory for d in self._devices) or memory_policy != "cache":
            from tileblas.runtime._locality import CacheLocality
            from tileblas.runtime._tilememory import TileMemory

            self._memory = TileMemory(self._devices, memory_policy)
            locality = CacheLocality(self._memory)
        self.memory_policy = memory_policy
        self.schedule = schedule
        # accelerators (memory of their own and a device model) get tiles of their own size; with host
        # workers beside them (and nothing else) a call is split between the two kinds
        self._acc = _shares.accelerators(self._devices)
        self._by_kind = bool(self._acc) and all(d.host_memory or i in self._acc for i, d in enumerate(self._devices))
        self._sched = Scheduler(self._devices, self.reservation_slots, self.sync, locality, self._memory, schedule)
        # A Runtime dropped without close() lets its workers go (they reference the scheduler, not it).
        weakref.finalize(self, self._sched.release)
        self._epoch = time.perf_counter()
        self._lock = threading.Lock()
        self._history: deque[_CallLog] = deque(maxlen=256)
        self._last: _CallLog | None = None
        self._local = threading.local()
        self._tokens: list = []
        self._totals = [dict(tasks=0, stolen=0, busy_s=0.0, overhead_s=0.0, bytes_moved=0, flops=0.0)
                        for _ in self._devices]
        self._calls = 0
        self._failed = 0
        _RUNTIMES.add(self)

    # ----------------------------------------------------------------- properties
    @property
    def devices(self) -> list:
        """The devices, in scheduler order."""
        return list(self._devices)

    @property
    def closed(self) -> bool:
        return self._sched.closed

    def __repr__(self) -> str:
        names = ", ".join(d.name for d in self._devices)
        flags = "".join([" sync" if self.sync else "", " deterministic" if self.deterministic else "",
                         " closed" if self.closed else ""])
        return f"<Runtime [{names}] tile_size={self.tile_size}{flags}>"

    # ----------------------------------------------------------------- life cycle
    def shutdown(self) -> None:
        """Close the runtime and stop its worker threads.

        Calls already running finish (their callers get their results, as with
        ``concurrent.futures.ThreadPoolExecutor.shutdown(wait=True)``) before this returns; calls made
        afterwards raise RuntimeError and leave their output unchanged.  Devices the runtime made itself
        (``devices=None``, a count or a spec string) are closed; devices passed as objects stay open for
        their owner.  Calling it again, or from several threads at once, is harmless.  A Runtime that is
        dropped without being closed releases its workers when it is garbage collected.
        """
        _released(self)
        self._sched.shutdown()
        owned, self._owned = self._owned, []
        for d in owned:
            try:
                d.close()
            except Exception:  # noqa: BLE001 - closing one device must not strand the others
                pass

    close = shutdown

    def __enter__(self) -> "Runtime":
        self._tokens.append(_CURRENT.set(self))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._tokens:
            try:
                _CURRENT.reset(self._tokens.pop())
            except ValueError:  # exited in another context
                _CURRENT.set(None)
        self.shutdown()

    # ----------------------------------------------------------------- decisions
    @property
    def small_flops(self) -> float:
        """Calls below this many flops run as one native call: the value given, else the
        :class:`~tileblas.Tuning` in force (``small_flops``)."""
        return get_tuning().small_flops if self._small_flops is None else self._small_flops

    @property
    def shared_flops(self) -> float | None:
        """On host workers, calls below this many flops run as one native call on all their threads: the
        value given, else the :class:`~tileblas.Tuning` in force; None where the path policy decides."""
        if self._policy_threads:
            return None
        return get_tuning().shared_flops if self._shared_flops is None else self._shared_flops

    def _devices_for_partition(self) -> int:
        """Devices the partitioning counts: :data:`Tuning.deterministic_devices` in deterministic mode, the
        accelerators where tiles are sized per device kind (host workers get a strip of their own, see
        :func:`tileblas.runtime._shares.split_call`), else every device."""
        if self.deterministic:
            return get_tuning().deterministic_devices
        return len(self._acc) if self._by_kind else len(self._devices)

    def tile_size_for(self, name: str, m: int, n: int, k: int, dtype: Any = np.float64) -> int:
        """The tile size a call of routine ``name`` with output m x n and inner dimension k would get
        (on accelerators: the accelerators' part of it; ``dtype`` matters there only)."""
        if self.tile_size is not None:
            return self.tile_size
        return self._default_tile(name, m, n, k, dtype=dtype)

    def _default_tile(self, name: str, m: int, n: int, k: int, flops: float | None = None,
                      dtype: Any = np.float64) -> int:
        """Tile size of a call that names none: from this machine's performance models (one cached lookup,
        :func:`tileblas.perf.suggest`) for a tiled call on host-memory workers outside deterministic mode when
        ``tileblas tune`` has built them, else the heuristic :func:`~tileblas.runtime._planner.default_tile_size`.
        The models predict GEMM-like calls only, so for the dependency chains of TRMM/TRSM the heuristic's
        tile (which accounts for the chains' end) caps the models' answer.  On accelerators: their
        device model's tile (:func:`tileblas.runtime._shares.accelerator_tile`)."""
        if self._by_kind and not self.deterministic:
            return _shares.accelerator_tile(name, m, n, k, dtype, [self._devices[i] for i in self._acc])
        nd = self._devices_for_partition()
        if not self.deterministic and (flops is None or flops >= self.small_flops) \
                and all(d.host_memory for d in self._devices):
            from tileblas.policy._suggest import suggest

            chain = name in P.CHAIN_ROUTINES
            tuning = get_tuning()
            tile = suggest("tile_size", m=m, n=n, k=k, devices=nd, candidates=tuning.tile_candidates,
                           overhead=tuning.task_overhead_s, min_tiles=(8 if chain else 4) * nd)
            if tile:
                return min(tile, P.default_tile_size(name, m, n, k, nd)) if chain else tile
        return self._larger_tile(name, m, n, P.default_tile_size(name, m, n, k, nd), nd)

    def _larger_tile(self, name: str, m: int, n: int, tile: int, nd: int) -> int:
        """On devices with memory of their own, a tile larger than the host candidates where the call is
        large enough: every tile a task reads is copied in, so a task of tile t moves about 2 t k elements
        for 2 t^2 k flops, and larger tiles move less per flop (out of core: half the reads at 2048 as at
        1024).  A larger tile is taken when three of them per stream fit in half of every such device's
        memory (at 16 bytes an element) and the call still has 8 output tiles per device; never for the
        dependency chains of TRMM/TRSM, whose balance the heuristic already weighs."""
        discrete = [d for d in self._devices if not d.host_memory]
        if not discrete or name in P.CHAIN_ROUTINES:
            return tile
        room = min(d.memory_bytes / (2.0 * 3 * d.streams) for d in discrete)
        for t in _LARGER_TILES:
            if t > tile and t * t * 16 <= room and P._output_tiles(name, m, n, t) >= 8 * nd:
                return t
        return tile

    def _split_target(self) -> int:
        nd = self._devices_for_partition()
        return 0 if nd <= 1 else 2 * nd

    # ----------------------------------------------------------------- the pipeline
    def run(self, name: str, *args: Any, tile_size: int | None = None, **kwargs: Any) -> None:
        """Compute Level-3 routine ``name`` in place, with the arguments of :mod:`tileblas.kernels._openblas`.

        Parameters
        ----------
        name : str
            gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm or trsm.
        *args, **kwargs
            The kernel layer's arguments, e.g. ``run("gemm", alpha, a, b, beta, c, transa="T")``.  The
            output (c, or b for trmm/trsm) is updated in place.
        tile_size : int, optional
            Tile size for this call.

        Raises
        ------
        ValueError, TypeError
            Bad arguments (naming the argument).
        RuntimeError
            The runtime has been shut down.
        Exception
            Whatever a tile task raised (the output is then undefined).
        """
        if self.closed:
            raise RuntimeError("this Runtime has been shut down (closed); calls made after close() are "
                               "refused and leave the output unchanged")
        P.check_tile_size(tile_size)
        if any(_zarrtiles.is_zarr(v) for v in (*args, *kwargs.values())):
            return self._run_zarr(name, args, kwargs, tile_size)
        bound = P.check_call(name, args, kwargs)
        shape, out, flops = P.call_size(name, bound)
        m, n, k = shape
        if m == 0 or n == 0:
            self._record(name, shape, out.dtype, 0, "trivial", flops, [], time.perf_counter(), time.perf_counter())
            return
        if P.is_trivial(name, bound):
            return self._direct(name, bound, shape, flops, "trivial")
        if self._policy_threads and tile_size is None and flops < _paths.policy().tile_limit(name, out.dtype.char):
            return self._native(name, bound, shape, flops, out)
        explicit = tile_size if tile_size is not None else self.tile_size
        tile = int(explicit) if explicit is not None else self._default_tile(name, m, n, k, flops, out.dtype)
        tile = P.bounded_tile(m, n, k, tile)
        if (explicit is None and flops < self.small_flops) or max(m, n, k) <= tile:
            return self._direct(name, bound, shape, flops, "small")
        if explicit is None and not self._policy_threads and flops < self.shared_flops and self._shared_threads:
            return self._direct(name, bound, shape, flops, "shared")
        P.check_tile_calls(name, m, n, k, tile)
        if self.host_memory is None and P.alpha_may_overflow(name, bound):  # no NaN from inf - inf between tiles
            return self._direct(name, bound, shape, flops, "shared" if self._shared_threads else "small")
        if self._by_kind and explicit is None and not self.deterministic:
            plan = _shares.split_call(name, bound, shape, self._devices, tile)
        else:
            plan = P.plan_call(name, bound, tile, self._split_target())
        reserve(out, "c" if "c" in bound else "b")  # a file-backed output: no SIGBUS or half-written file
        self._tiled(plan, name, shape, out, tile, flops, lambda: " and the output is undefined")

    # ----------------------------------------------------------------- the routines
    @_level3_doc("gemm", "C := alpha*op(A)@op(B) + beta*C, in place on ``c``.")
    def gemm(self, alpha: Any, a: np.ndarray, b: np.ndarray, beta: Any, c: np.ndarray, transa: str | int = "N",
             transb: str | int = "N", *, tile_size: int | None = None) -> None:
        self.run("gemm", alpha, a, b, beta, c, transa, transb, tile_size=tile_size)

    @_level3_doc("symm", "C := alpha*A@B + beta*C (side 'L') or alpha*B@A + beta*C (side 'R'), A symmetric; "
                         "in place on ``c``.")
    def symm(self, alpha: Any, a: np.ndarray, b: np.ndarray, beta: Any, c: np.ndarray, side: str | int = "L",
             uplo: str | int = "U", *, tile_size: int | None = None) -> None:
        self.run("symm", alpha, a, b, beta, c, side, uplo, tile_size=tile_size)

    @_level3_doc("hemm", "C := alpha*A@B + beta*C (side 'L') or alpha*B@A + beta*C (side 'R'), A Hermitian; "
                         "in place on ``c``.")
    def hemm(self, alpha: Any, a: np.ndarray, b: np.ndarray, beta: Any, c: np.ndarray, side: str | int = "L",
             uplo: str | int = "U", *, tile_size: int | None = None) -> None:
        self.run("hemm", alpha, a, b, beta, c, side, uplo, tile_size=tile_size)

    @_level3_doc("syrk", "C := alpha*op(A)@op(A).T + beta*C on the ``uplo`` triangle of ``c``, in place.")
    def syrk(self, alpha: Any, a: np.ndarray, beta: Any, c: np.ndarray, uplo: str | int = "U",
             trans: str | int = "N", *, tile_size: int | None = None) -> None:
        self.run("syrk", alpha, a, beta, c, uplo, trans, tile_size=tile_size)

    @_level3_doc("herk", "C := alpha*op(A)@op(A).conj().T + beta*C on the ``uplo`` triangle of ``c``, in "
                         "place (alpha and beta real).")
    def herk(self, alpha: Any, a: np.ndarray, beta: Any, c: np.ndarray, uplo: str | int = "U",
             trans: str | int = "N", *, tile_size: int | None = None) -> None:
        self.run("herk", alpha, a, beta, c, uplo, trans, tile_size=tile_size)

    @_level3_doc("syr2k", "C := alpha*(op(A)@op(B).T + op(B)@op(A).T) + beta*C on the ``uplo`` triangle of "
                          "``c``, in place.")
    def syr2k(self, alpha: Any, a: np.ndarray, b: np.ndarray, beta: Any, c: np.ndarray, uplo: str | int = "U",
              trans: str | int = "N", *, tile_size: int | None = None) -> None:
        self.run("syr2k", alpha, a, b, beta, c, uplo, trans, tile_size=tile_size)

    @_level3_doc("her2k", "C := alpha*op(A)@op(B).conj().T + conj(alpha)*op(B)@op(A).conj().T + beta*C on "
                          "the ``uplo`` triangle of ``c``, in place (beta real).")
    def her2k(self, alpha: Any, a: np.ndarray, b: np.ndarray, beta: Any, c: np.ndarray, uplo: str | int = "U",
              trans: str | int = "N", *, tile_size: int | None = None) -> None:
        self.run("her2k", alpha, a, b, beta, c, uplo, trans, tile_size=tile_size)

    @_level3_doc("trmm", "B := alpha*op(A)@B (side 'L') or alpha*B@op(A) (side 'R'), A triangular; in place "
                         "on ``b``.")
    def trmm(self, alpha: Any, a: np.ndarray, b: np.ndarray, side: str | int = "L", uplo: str | int = "U",
             transa: str | int = "N", diag: str | int = "N", *, tile_size: int | None = None) -> None:
        self.run("trmm", alpha, a, b, side, uplo, transa, diag, tile_size=tile_size)

    @_level3_doc("trsm", "Solve op(A)@X = alpha*B (side 'L') or X@op(A) = alpha*B (side 'R') for X, A "
                         "triangular; X overwrites ``b``.")
    def trsm(self, alpha: Any, a: np.ndarray, b: np.ndarray, side: str | int = "L", uplo: str | int = "U",
             transa: str | int = "N", diag: str | int = "N", *, tile_size: int | None = None) -> None:
        self.run("trsm", alpha, a, b, side, uplo, transa, diag, tile_size=tile_size)

    def _tiled(self, plan: Any, name: str, shape: tuple, out: np.ndarray, tile: int, flops: float,
               after: Callable[[], str]) -> None:
        """Run ``plan`` and record it; a failed call's exception gets a note naming the failed task, saying
        the rest was cancelled, then ``after()`` (what became of the output)."""
        call = self._run_plan(plan)
        path = "split-k" if plan.split > 1 else "tiled"
        self._record(name, shape, out.dtype, tile, path, flops, call.records, call.t_start, call.t_end,
                     failed=call.error is not None)
        if call.error is not None:
            exc = call.error
            if hasattr(exc, "add_note"):
                exc.add_note(f"(tileblas: {call.error_note}; the rest of the call was cancelled{after()})")
            raise exc

    def _run_zarr(self, name: str, args: tuple, kwargs: dict, tile_size: int | None) -> None:
        """A call with zarr operands: tiles read from and written to the zarr arrays (whose chunks no two
        tiles share), on devices that copy tiles; a call small enough for memory runs on the operands read
        whole and writes its output back."""
        from tileblas.devices.sim import SimDevice

        names = list(P.ROUTINES[name][0]) if name in P.ROUTINES else []
        zs = {p: v for p, v in (*zip(names, args), *kwargs.items()) if _zarrtiles.is_zarr(v)}
        out_name = "c" if "c" in names else "b"
        if not all(isinstance(d, SimDevice) for d in self._devices):
            raise ValueError(f"zarr operands ({', '.join(zs)}) need a Runtime whose workers copy tiles in and "
                             f"out: Runtime(host_memory=...); this one has "
                             + ", ".join(f"{d.name} ({d.kind})" for d in self._devices))
        z_out = zs.get(out_name)
        if z_out is not None:
            if getattr(z_out, "read_only", False):
                raise ValueError(f"{out_name} is the output and must be writeable; got a zarr array opened "
                                 f"read-only ({z_out!r})")
            for p, v in zs.items():
                if p != out_name and (v is z_out or _same_store(v, z_out)):
                    raise ValueError(f"{out_name} (the output) must not be the same zarr array as {p}")
        stand = {p: _zarrtiles.stand_in(v, p) for p, v in zs.items()}
        try:
            bound = P.check_call(name, *_replace(args, kwargs, names, stand))
            shape, out, flops = P.call_size(name, bound)
            m, n, k = shape
            if m == 0 or n == 0:
                return
            step = _zarrtiles.chunk_multiple([z_out] if z_out is not None else [])
            if tile_size is not None and tile_size % step:
                raise ValueError(f"tile_size must be a multiple of {step} here, so that no two tiles share a "
                                 f"chunk of {out_name} (chunks {tuple(z_out.chunks)}); got tile_size={tile_size}")
            explicit = tile_size if tile_size is not None else self.tile_size
            tile = int(explicit) if explicit is not None and int(explicit) % step == 0 else \
                self._default_tile(name, m, n, k, flops)
            both = _zarrtiles.chunk_multiple(list(zs.values()))
            if both <= max(tile, step):  # chunk-aligned reads of the inputs too, where that costs no size
                step = both
            tile = -(-P.bounded_tile(m, n, k, tile) // step) * step  # up to whole chunks
            in_memory = sum(int(np.prod(v.shape)) for v in zs.values()) * out.dtype.itemsize
            budget = (self.host_memory or min(d.memory for d in self._devices)) // 4
            if P.is_trivial(name, bound) or in_memory <= budget:
                return self._zarr_in_memory(name, args, kwargs, names, zs, out_name, tile_size)
            # no split-k into a zarr output: each output tile is written once, whole
            plan = P.plan_call(name, bound, tile, 0 if z_out is not None else self._split_target())
            self._tiled(plan, name, shape, out, tile, flops, lambda: "" if z_out is None else "; " + (
                _zarrtiles.written_note(out_name, _zarrtiles.written(stand[out_name]), (m, n))))
        finally:
            for a in stand.values():
                _zarrtiles.release(a)

    def _zarr_in_memory(self, name: str, args: tuple, kwargs: dict, names: list, zs: dict, out_name: str,
                        tile_size: int | None) -> None:
        """A zarr call small enough for memory: the operands read whole, the call run as usual, the output
        written back chunk by chunk once the call succeeded (a write that fails names what it wrote)."""
        real = {p: _zarrtiles.materialize(v) for p, v in zs.items()}
        args2, kwargs2 = _replace(args, kwargs, names, real)
        self.run(name, *args2, tile_size=tile_size, **kwargs2)
        if out_name in zs:
            _zarrtiles.write_back(zs[out_name], real[out_name], out_name)

    def _run_plan(self, plan: Any) -> Any:
        """Schedule a plan; tiles of its matrices leave the device caches when it returns (except those of
        host buffers kept with ``self.memory.keep``, whose owner invalidates them when they change)."""
        mem = self._memory
        bar = _CallProgress(plan) if self.progress else None
        try:
            if mem is None:
                return self._sched.run(plan, bar)
            mem.begin_call(plan)
            try:
                return self._sched.run(plan, bar)
            finally:
                mem.end_call(plan)
        finally:
            if bar is not None:
                bar.close()

    def _native(self, name: str, bound: dict[str, Any], shape: tuple, flops: float, out: np.ndarray) -> None:
        """The path policy's native path: one call on all the host workers' BLAS threads together (the CPU
        trmm/trsm kernel runs the recursion where it measured faster; path "small" below ``small_flops``,
        else "shared" or "recursive"); a call log with its one record and a count, no per-device totals.
        Small calls too: OpenBLAS itself runs them on one thread where that pays (the measurement against a
        single-threaded small path: docs/measurements/runtime.md,
        "One native call or tiles, on CPU workers")."""
        P.check_native_dims(name, *shape)
        dev = self._devices[0]
        params, flags = P.ROUTINES[name]
        kernel = dev.shared_kernel(name, self._policy_threads)
        path = "small" if flops < self.small_flops else "shared"
        if name in ("trmm", "trsm"):
            from tileblas.policy._recursion import recursion_faster

            rhs = shape[1] if bound["side"] == "L" else shape[0]
            if recursion_faster(shape[2], rhs, self._policy_threads, name, out.dtype.char, bound["side"]):
                path = "recursive"
        rec = TaskRecord(None, 0, name)
        rec.flops = flops
        t0 = rec.t_found = rec.t0 = time.perf_counter()
        failed = True
        try:
            kernel(*[bound[p] for p in params], **{f: bound[f] for f in flags})
            failed = False
        finally:
            t1 = rec.t1 = rec.t_done = time.perf_counter()
            rec.ok = not failed
            log = _CallLog((name, shape, out.dtype, max(shape), path, flops, self._names, [rec], t0, t1), failed)
            self._local.last = log
            with self._lock:
                self._append_log(log, failed)

    def _direct(self, name: str, bound: dict[str, Any], shape: tuple, flops: float, path: str) -> None:
        """One native call on one device (trivial and small problems)."""
        P.check_native_dims(name, *shape)
        host = [d for d, dev in enumerate(self._devices) if dev.host_memory]
        params, flags = P.ROUTINES[name]
        args = [bound[p] for p in params]
        kw = {f: bound[f] for f in flags}
        out = bound["c"] if "c" in bound else bound["b"]
        on_acc = host and self._by_kind and path == "small" and not self.deterministic \
            and _shares.small_on_accelerator(name, *shape, out.dtype, self._devices)
        if not host or on_acc:  # a device with its own memory: one task with one tile covering the problem
            tile = max(max(shape), 1)
            plan = P.plan_call(name, bound, tile, 0)
            if on_acc:
                plan = _shares.restrict(plan, frozenset(self._acc))
            call = self._run_plan(plan)
            self._record(name, shape, bound.get("c", bound.get("b")).dtype, tile, path, flops, call.records,
                         call.t_start, call.t_end, failed=call.error is not None)
            if call.error is not None:
                raise call.error
            return
        d = host[0]
        dev = self._devices[d]
        kernel = dev.shared_kernel(name, self._shared_threads) if path == "shared" else None
        rec = TaskRecord(None, d, f"{name}[all]")
        rec.flops = flops
        t_start = rec.t_found = rec.t0 = time.perf_counter()
        try:
            (kernel or dev.kernel(name))(*args, **kw)
        except BaseException:
            rec.ok = False
            raise
        finally:
            rec.t1 = rec.t_done = time.perf_counter()
            out = bound["c"] if "c" in bound else bound["b"]
            self._record(name, shape, out.dtype, max(shape), path, flops, [rec], t_start, rec.t1,
                         failed=not rec.ok)

    def _append_log(self, log: _CallLog, failed: bool) -> None:
        """Keep a finished call's log (the caller holds the lock)."""
        self._last = log
        self._history.append(log)
        self._calls += 1
        self._failed += failed

    def _record(self, name: str, shape: tuple, dtype: Any, tile: int, path: str, flops: float, records: list,
                t0: float, t1: float, failed: bool = False) -> None:
        """Account for a finished call: running totals now, the CallProfile only when someone asks."""
        log = _CallLog((name, shape, np.dtype(dtype).name, tile, path, flops,
                        [d.name for d in self._devices], records, t0, t1), failed)
        nd = len(self._devices)
        tasks, stolen, busy, ovh, moved, fl = [0] * nd, [0] * nd, [0.0] * nd, [0.0] * nd, [0] * nd, [0.0] * nd
        for r in records:
            d = r.device
            tasks[d] += 1
            stolen[d] += r.stolen
            busy[d] += r.t1 - r.t0
            ovh[d] += (r.t0 - r.t_found) + (max(r.t_done, r.t1) - r.t1)
            fl[d] += r.flops
            if r.bytes[0] or r.bytes[1] or r.bytes[2]:
                moved[d] += sum(r.bytes)
        self._local.last = log
        with self._lock:
            self._append_log(log, failed)
            for d, tot in enumerate(self._totals):
                tot["tasks"] += tasks[d]
                tot["stolen"] += stolen[d]
                tot["busy_s"] += busy[d]
                tot["overhead_s"] += max(ovh[d], 0.0)
                tot["bytes_moved"] += moved[d]
                tot["flops"] += fl[d]
        for d, dev in enumerate(self._devices):
            if tasks[d]:
                dev.stats.add(tasks=tasks[d], busy_s=busy[d])

    # ----------------------------------------------------------------- seeing what happened
    def last_profile(self) -> CallProfile | None:
        """Profile of the last call made by this thread (or by any thread, if this one made none)."""
        log = getattr(self._local, "last", None) or self._last
        return None if log is None else log.profile()

    def stats(self) -> dict[str, Any]:
        """Totals since the runtime was created: calls, failed calls, and per device tasks, stolen tasks,
        busy and overhead seconds, bytes moved and flops; with devices that have their own memory also
        ``"memory"``: per such device L1/L2 hits, misses, evictions, invalidations and heap use."""
        with self._lock:
            out = {
                "calls": self._calls,
                "failed_calls": self._failed,
                "devices": {d.name: dict(t) for d, t in zip(self._devices, self._totals)},
            }
        if self._memory is not None:
            out["memory"] = self._memory.stats()
        return out

    @property
    def memory(self) -> Any:
        """The tile memory (caches, coherence directory, heaps) of devices with their own memory, or
        None when every device computes in host memory."""
        return self._memory

    def profiles(self, last: int | None = None) -> list[CallProfile]:
        """The most recent call profiles (up to 256 are kept), oldest first."""
        with self._lock:
            h = list(self._history)
        h = h if last is None else h[-last:]
        return [log.profile() for log in h]

    def trace(self, path: str | None = None, last: int | None = None) -> dict[str, Any]:
        """Chrome/Perfetto trace JSON of recent calls (a track per device, a slice per task).

        Parameters
        ----------
        path : str, optional
            Also write the JSON to this file.
        last : int, optional
            Only the ``last`` most recent calls (default: all kept).
        """
        tr = chrome_trace(self.profiles(last), [d.name for d in self._devices], self._epoch)
        if path is not None:
            write_trace(tr, path)
        return tr

    def plot(self, path: str, last: int = 1, title: str | None = None) -> str:
        """Per-device timeline PNG of the ``last`` most recent calls (matplotlib)."""
        profs = self.profiles(last)
        return plot_timeline(profs, [d.name for d in self._devices], path, title)

    def clear_history(self) -> None:
        """Forget the kept call profiles (totals in :meth:`stats` stay)."""
        with self._lock:
            self._history.clear()


class _CallLog:
    """A finished call's raw records; its CallProfile is built on first request."""

    __slots__ = ("args", "failed", "_profile")

    def __init__(self, args: tuple, failed: bool) -> None:
        self.args = args
        self.failed = failed
        self._profile: CallProfile | None = None

    def profile(self) -> CallProfile:
        if self._profile is None:
            args = self.args
            if not isinstance(args[2], str):  # the native path logs the dtype object; its name costs more
                args = args[:2] + (np.dtype(args[2]).name,) + args[3:]
            self._profile = build_profile(*args, failed=self.failed)
        return self._profile


def _constructor_signature(cls: type) -> inspect.Signature:
    """What ``cls(...)`` takes: its ``__init__``'s parameters (``__new__`` only forwards them, so that
    ``Runtime("dask:2")`` can be a :class:`~tileblas.runtime.ClusterRuntime`)."""
    sig = inspect.signature(cls.__init__)
    return sig.replace(parameters=list(sig.parameters.values())[1:], return_annotation=inspect.Signature.empty)


Runtime.__signature__ = _constructor_signature(Runtime)


def get_runtime() -> Runtime:
    """The current runtime: the innermost ``with Runtime(...)`` of this context, else the process
    default (created on first use with one single-threaded CPU worker per core)."""
    global _DEFAULT
    rt = _CURRENT.get()
    if rt is not None and not rt.closed:
        return rt
    d = _DEFAULT
    if d is not None and not d.closed:
        return d
    with _DEFAULT_LOCK:
        if _DEFAULT is None or _DEFAULT.closed:
            _DEFAULT = Runtime()
            # the runtime tileblas made itself: the drop-in's C small-call path may stand in for it
            _DEFAULT._made_default = True
        return _DEFAULT


def set_runtime(rt: Runtime | None) -> Runtime | None:
    """Make ``rt`` the process default runtime (None: create a fresh one on next use); returns the
    previous default.  The previous default is not shut down."""
    global _DEFAULT
    if rt is not None and not isinstance(rt, Runtime):
        raise TypeError(f"rt must be a Runtime or None; got {type(rt).__name__}")
    with _DEFAULT_LOCK:
        prev, _DEFAULT = _DEFAULT, rt
    _released(None)  # e.g. the drop-in's small-call path, which stood in for the previous default
    return prev


@atexit.register
def _shutdown_default() -> None:  # pragma: no cover - interpreter exit
    d = _DEFAULT
    if d is not None:
        d.shutdown()


_ = Sequence
