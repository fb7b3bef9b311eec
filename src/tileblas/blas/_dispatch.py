"""Where tileblas.blas sends Level-3 work.

``level3(name, *args, **kwargs)`` takes a routine name (gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm,
trsm) and the arguments of the matching array-level kernel in :mod:`tileblas.kernels._openblas`, already checked
and converted by the caller, and computes in place on the *current runtime*
(:func:`tileblas.runtime.get_runtime`: the innermost ``with tileblas.Runtime(...)`` of this context, else
the process default).  It is the one seam between the drop-in API and the execution engine.

The C small-call path in front of the public routines (``tileblas.blas._fastpath``, where it exists) is
configured here, in one ``configure`` call: what it decides with comes from
:func:`tileblas.policy._dropin.config` (the shipped defaults, what ``tileblas tune`` stored, the thread
setting), what it runs on from the kernels (the OpenBLAS instances' entry points, the pool slot), and
whether it is on from the bookkeeping below.  It decides nothing itself.  The path policy is read and the
C path configured at the import of tileblas.blas (:func:`preload`; where ``TILEBLAS_DEVICES`` is set, at
the first call); ``tileblas tune`` calls :func:`apply_policy` again after storing new crossovers.

The C small-call path stands in for the default runtime tileblas made itself; when that runtime closes or
the default is replaced, the runtime calls :func:`_release`, which this module registers with
:func:`tileblas.runtime._runtime.on_release` before it first turns the path on (the runtime never imports
tileblas.blas).

The GPUs
    Beside the default runtime's CPU workers the drop-in uses the GPUs ``TILEBLAS_DEVICES`` allows (its
    grammar: :mod:`tileblas.policy._offload`; :func:`set_devices` in code).  A call of the default runtime
    at or above the GPU floor (:attr:`~tileblas.policy._dropin.DropInConfig.gpu_min_flops`; the C path
    keeps every call below, and while GPUs may be in use puts each call it would run above to
    :func:`_c_path_asks`, leaving to this path those the GPUs take) goes to the GPUs' runtime where
    :func:`tileblas.policy._offload.gpu_first` says so, from the seconds
    :func:`_gpu_first` predicts for the call on each side.  The GPUs are looked for once per process, by
    the first call at or above the floor (never at import, never for a smaller call, never with
    ``TILEBLAS_DEVICES=cpu``; where CuPy is not installed, not at all): CuPy imported, the devices counted,
    one :class:`~tileblas.devices.gpu.GPUDevice` made per GPU (its tile memory, cuBLAS handles, host
    link), a 64 x 64 dgemm checked on each, and what a call costs there beyond the runtime's prediction
    (:func:`_call_cost`).  The host link and that cost are the machine's figures: measured by the first
    process that uses the GPUs and kept for the processes after (:mod:`tileblas.devices._figures`), so
    that a call takes the same side in every process.  Whatever fails there (no CuPy, no device, a broken
    driver, cuBLAS that does not start, a wrong result) leaves the CPU path, with the reason in
    :func:`gpu_report` (``tileblas info``); a call never raises for it.  A fork child never uses the
    parent's GPUs (CUDA does not survive ``fork()``): it takes the CPU path, or looks for GPUs itself
    where the parent never had.  Calls on a runtime of one's own (``with tileblas.Runtime(...)``,
    ``set_runtime``) go where that runtime sends them.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import threading
import warnings
from typing import Any, NamedTuple

from tileblas.policy import _dropin, _offload

__all__ = ["level3", "gpu_costs", "c_path_again", "apply_policy", "c_config", "fastpath_off", "set_small_path", "set_devices",
           "gpu_runtime", "gpu_report", "release_gpus"]

_APPLIED = [False]

try:  # the compiled small-call path; without it every call takes the Python path
    from tileblas.blas import _fastpath  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a build without the C module
    _fastpath = None

#: The runtime the C small-call path stands in for (None: the path is off).
_FAST: list[Any] = [None]
#: Whether the small-call path may be used at all ($TILEBLAS_SMALL_PATH=0 or :func:`set_small_path` turn
#: it off: every call then takes the Python path and the runtime).
_ALLOWED = [os.environ.get("TILEBLAS_SMALL_PATH", "1").strip() not in ("0", "off", "false", "no")]


def _threads(rt: Any) -> int:
    return int(getattr(rt, "_policy_threads", 0) or 0)


def c_config(rt: Any = None) -> dict[str, Any]:
    """The configuration the C path gets for the runtime ``rt`` it stands in for (None: off): the fields of
    :func:`tileblas.policy._dropin.config` for ``rt``'s thread count, the entry points of tileblas' OpenBLAS
    instance of that count (and of the one-thread instance), its pool slot and ``openblas_get_num_threads``,
    ``enabled`` and the current-runtime variable.  Off, nothing runs in C at Level 3 and the Level-1/2
    limits stay the shipped ones."""
    if rt is None:
        cfg = _dropin.SHIPPED.c_fields()
        cfg.update(enabled=False, contextvar=None, entries={}, one_thread_entries={}, pool_slot=-1,
                   get_num_threads=0, gpu_hook=None)
        return cfg
    from tileblas.kernels import _openblas
    from tileblas.runtime import _runtime

    threads = _threads(rt)
    names = _dropin.routines(*_dropin.FAMILIES)
    lib = _openblas.get_library(threads)
    gpu = _gpu_possible()
    cfg = _dropin.config(threads, gpu=gpu).c_fields()
    cfg.update(enabled=True, contextvar=_runtime._CURRENT, entries={r: lib.fortran(r) for r in names},
               one_thread_entries={}, pool_slot=-1, get_num_threads=0, gpu_hook=_c_path_asks if gpu else None)
    if threads > 1:  # the one-thread instance: below the one-thread limits, and the parts of split calls
        # under an address-space limit it loads only with room for the buffers of those parts, run at once,
        # and for those the other instance's jobs map at its first parallel call (which may come later)
        one = _openblas.get_library(1, callers=2 * threads - 1)
        cfg["one_thread_entries"] = {r: one.fortran(r) for r in names}
        if lib.pool_slot is not None:
            cfg["pool_slot"] = lib.pool_slot
            cfg["get_num_threads"] = lib._ctypes.cast(lib._symbol("openblas_get_num_threads"),
                                                      lib._ctypes.c_void_p).value
    return cfg


def preload() -> None:
    """Configure the C path now, at the import of tileblas.blas, for the default runtime (made here where no
    call made it yet), as SciPy loads its OpenBLAS at import: the first call then costs what the calls after
    it do (loading the one-thread instance and configuring took 3-4 ms of the first call; the first dgemm
    of order 512 ran at half SciPy's rate).  Where an address-space limit leaves no room for the one-thread
    instance, the path stays off, as it would at the first call.  Where ``TILEBLAS_DEVICES`` names GPUs or is
    not understood, nothing is done here: the first call reads that setting and says what is wrong with it,
    never the import (``cpu`` and ``auto`` have nothing to say).  Where
    any call is split, it also starts writing the one-thread instance's buffers that the parts of a split
    call take at once, one a thread (``max_parts`` at most), off this thread (``BlasLibrary.warm_buffers``):
    only here, not where a call configures the path, which would want those buffers at once
    (docs/developer/drop-in-internals.md, "The first calls of a process")."""
    if _fastpath is not None and _ALLOWED[0] and _quiet_setting() and _turn_on():
        from tileblas.kernels import _openblas
        from tileblas.runtime import _runtime

        # the buffers the parts of a split call take at once (one a thread, max_parts at most), written off
        # this thread; none where no call is split (thread counts the limits were not measured at, or no
        # pool slot: split_parts in _fp_decide.c asks for both)
        cfg = _fastpath.config()
        parts = min(_threads(_runtime.get_runtime()), int(cfg["max_parts"]))
        if parts > 1 and cfg["split"] and cfg["pool_slot"] >= 0:
            _openblas.get_library(1).warm_buffers(parts)


def _quiet_setting() -> bool:
    """Whether ``TILEBLAS_DEVICES`` is unset or a value with nothing to say at the import: one understood
    that names no GPU (``cpu``, ``auto``)."""
    text = os.environ.get(_offload.ENV, "").strip()
    if not text:
        return True
    try:
        return not _offload.parse(text).named
    except ValueError:
        return False


def _turn_on() -> bool:
    """Turn the C path on for the current runtime where it may stand in for it (the path policy read first,
    where it was not yet); whether it is on."""
    from tileblas.runtime import _runtime

    rt = _runtime.get_runtime()
    if not _stands_in_for(rt):
        return False
    if not _APPLIED[0]:
        apply_policy()
    _sync_fastpath(rt)
    return _FAST[0] is not None


def _configure(rt: Any) -> dict[str, Any] | None:
    """Hand the C path its configuration for ``rt`` (None: off) in one call; the configuration passed."""
    if _fastpath is None:
        return None
    asks = rt is not None and _gpu_possible()
    cfg = c_config(rt)
    _fastpath.configure(cfg)
    _GPU.c_asks = asks
    return cfg


def apply_policy(reload: bool = False) -> _dropin.DropInConfig:
    """Read the path policy (re-read its file with ``reload``) and hand the C path its configuration again
    (for the runtime it stands in for, else off).  Returns the C path's limits in force for the thread
    count of that runtime (:func:`tileblas.policy._dropin.config`; 1 when off)."""
    from tileblas.policy import _paths

    if reload:
        _paths.reload()
    _APPLIED[0] = True
    _GPU.configs.clear()
    rt = _FAST[0]
    _configure(rt)
    return _dropin.config(_threads(rt) if rt is not None else 1)


def level3(name: str, *args: Any, **kwargs: Any) -> None:
    """Compute the Level-3 routine ``name`` in place on the current runtime (see module docstring)."""
    from tileblas.runtime._runtime import get_runtime

    if not _APPLIED[0]:
        apply_policy()
    rt = get_runtime()
    gpus = _gpu_target(rt, name, args, kwargs) if _GPU.maybe else None
    (rt if gpus is None else gpus).run(name, *args, **kwargs)
    if _FAST[0] is not rt and _ALLOWED[0]:
        _sync_fastpath(rt)


#: The thread handing a call back to the C path (:func:`c_path_again`): a call it hands back once goes on
#: down the Python path
_AGAIN = threading.local()


def c_path_again(routine: Any, converted: bool, args: tuple, kwargs: dict) -> Any:
    """Hand a call that reached a routine's Python implementation back to its C path ``routine`` (the
    public routine object), so that the call takes the path every such call takes: where the C path was
    not on yet (the first call of a process, the first after the default runtime was replaced), it is
    turned on first; where it was on, only a call whose array arguments the caller converted
    (``converted``: lists, other dtypes, byte-swapped or unaligned arrays, made Fortran-ordered arrays of
    the routine's dtype) is handed back, the C path having seen and passed on the others.  The result,
    or NotImplemented where the call goes on down the Python path (no C path, it is not allowed or not
    on for the current runtime, or this thread is already handing a call back)."""
    if _fastpath is None or not _ALLOWED[0] or getattr(_AGAIN, "on", False):
        return NotImplemented
    if _FAST[0] is None:
        if not _turn_on():
            return NotImplemented
    elif not converted:
        return NotImplemented
    _AGAIN.on = True
    try:
        return routine(*args, **kwargs)
    finally:
        _AGAIN.on = False


def set_small_path(enabled: bool) -> bool:
    """Allow (True) or forbid (False) the C small-call path of the Level-3 routines; returns the previous
    setting.  Forbidden, every call goes through the Python path and the current runtime (whose profile
    then records it)."""
    prev = _ALLOWED[0]
    _ALLOWED[0] = bool(enabled)
    if not enabled:
        fastpath_off()
    return prev


def _stands_in_for(rt: Any) -> bool:
    """Whether the C small-call path may stand in for ``rt``: allowed, no runtime of the caller's in force,
    and ``rt`` the open default runtime tileblas made itself, with host threads."""
    from tileblas.runtime import _runtime

    return bool(_ALLOWED[0] and _runtime._CURRENT.get() is None and _runtime._DEFAULT is rt and _threads(rt) > 0
                and not rt.closed and getattr(rt, "_made_default", False))


def _sync_fastpath(rt: Any) -> None:
    """Turn the C small-call path on when ``rt`` is the default runtime tileblas made itself (not one a
    caller made or set: its profile records every call) and takes the path policy's native path (host
    devices only), with the OpenBLAS instance of its thread count; else off."""
    if _fastpath is None:
        return
    if not _stands_in_for(rt):
        fastpath_off()
        return
    from tileblas.runtime import _runtime

    _runtime.on_release(_release)  # off again when rt closes or stops being the default
    try:
        _configure(rt)
    except MemoryError:  # no room to load the one-thread instance (RLIMIT_AS): the call ran; the path stays off
        fastpath_off()
        return
    _FAST[0] = rt


def _release(rt: Any) -> None:
    """The runtime's release hook: the small-call path goes off when the runtime it stands in for closes
    (``rt``), or when the default runtime is replaced (``rt`` None)."""
    if rt is None or _FAST[0] is rt:
        fastpath_off()


def fastpath_off() -> None:
    """Turn the C small-call path off until the next Python-path call decides again (the default runtime
    was replaced or closed)."""
    _FAST[0] = None
    _configure(None)


# ---------------------------------------------------------------------------------------- the GPUs
class _Gpus:
    """The drop-in's GPUs in this process (see the module notes)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.setting: _offload.DeviceSetting | None = None  # read on first need
        self.maybe = True  # False once the setting or a search says no GPU will take a call
        self.searched = False  # the search (once per process) has run
        self.cuda = False  # the search reached CUDA (a fork child cannot use it)
        self.asked: int | None = None  # the GPU count the search was for (None: all)
        self.runtime: Any = None  # the GPUs' Runtime, or None
        self.note = ""  # why no GPU takes calls, or what was found
        self.pid = os.getpid()
        self.c_asks = False  # the C path asks about its calls from the GPU floor on (gpu_ask, gpu_hook)
        self.installed: bool | None = None  # CuPy is installed (looked at once; None: not yet)
        self.configs: dict[int, _dropin.DropInConfig] = {}  # thread count -> its config
        self.choices: dict[tuple, bool] = {}  # (routine, m, n, k, dtype, threads) -> to the GPUs
        self.choices_for: tuple = ()  # what the choices were made with (GPU runtime, config, Tuning)
        self.stale: list = []  # a fork child's inherited GPU runtimes, kept from any teardown
        self.call_cost = CallCost()  # measured at the search (_call_cost)


class CallCost(NamedTuple):
    """What a drop-in call on the GPUs costs beyond the runtime's prediction, measured at the search
    (:func:`_call_cost`): seconds a call, seconds a byte of a new output copied through the pinned staging
    (below ``locked_from`` bytes), and seconds a byte of one page-locked in place (from ``locked_from``
    bytes: the GPUs' ``register_min``; ``inf`` where outputs are never page-locked); ``timed``: what the fit
    was made from, ``(order, best seconds, the runtime's prediction)`` for each order timed."""

    seconds: float = 0.0
    per_byte: float = 0.0
    per_locked_byte: float = 0.0
    locked_from: float = float("inf")
    timed: tuple = ()

    def output_seconds(self, nbytes: float) -> float:
        """The seconds a call with a new output of ``nbytes`` costs beyond the prediction."""
        return self.seconds + nbytes * (self.per_locked_byte if nbytes >= self.locked_from else self.per_byte)


_GPU = _Gpus()


def _setting() -> _offload.DeviceSetting:
    s = _GPU.setting
    if s is None:
        with _GPU.lock:
            s = _GPU.setting
            if s is None:
                s = _GPU.setting = _offload.from_environment()
    return s


def _cupy_installed() -> bool:
    """Whether CuPy can be imported at all (a look at the installed packages, once: CuPy is not imported)."""
    if "cupy" in sys.modules:
        return sys.modules["cupy"] is not None
    if _GPU.installed is None:
        try:
            from importlib.util import find_spec

            _GPU.installed = find_spec("cupy") is not None
        except (ImportError, ValueError):
            _GPU.installed = False
    return _GPU.installed


def _gpu_possible() -> bool:
    """GPUs may take calls: the setting allows them and no search has found none (where CuPy is not
    installed, that is settled here without a search)."""
    if not _GPU.maybe:
        return False
    s = _setting()
    if not s.wants_gpus:
        _GPU.maybe = False
        if not _GPU.note:
            _GPU.note = s.describe()
        return False
    if not _GPU.searched and not _cupy_installed():
        from tileblas.kernels import _cuda

        with _GPU.lock:
            _GPU.searched, _GPU.maybe = True, False
            _GPU.note = f"CuPy is not installed: {_cuda.INSTALL_HINT}"
            _say_unusable(s)
        return False
    if _GPU.searched and _GPU.runtime is None:
        _GPU.maybe = False
        return False
    return True


def _say_unusable(s: _offload.DeviceSetting) -> None:
    """One warning where the setting named GPUs that cannot be used."""
    if s.named:
        try:
            warnings.warn(f"tileblas: {s.source}={s.text!r} names GPUs, but {_GPU.note}; the CPU path",
                          RuntimeWarning, stacklevel=4)
        except Exception:  # noqa: BLE001 - warnings made errors: the note (tileblas info) says why
            pass


def _config(threads: int) -> _dropin.DropInConfig:
    """The C path's configuration for ``threads`` threads (kept until the policy is applied again)."""
    got = _GPU.configs.get(threads)
    if got is None:
        got = _GPU.configs[threads] = _dropin.config(threads)
    return got


def _search() -> None:
    """Look for the GPUs the setting allows, once (the caller holds the lock): a Runtime over them, each
    checked with a 64 x 64 dgemm, or the reason there is none."""
    import numpy as np

    from tileblas.devices import gpu as _gpu  # (imports no CuPy)
    from tileblas.runtime._runtime import Runtime

    s = _setting()
    _GPU.searched = True
    _GPU.asked = s.gpus
    rt = None
    try:
        n = _gpu.usable_count()
        _GPU.cuda = True
        want = n if s.gpus is None else min(s.gpus, n)
        if s.gpus is not None and s.gpus > n:
            _GPU.note = f"{s.source} names {s.gpus} GPU(s), CUDA sees {n}"
        rt = Runtime(devices=f"gpu:{want}")
        a = np.asfortranarray(np.arange(1.0, 4097.0).reshape(64, 64) / 4096.0)
        ref = a @ a
        bound = 64 * 4 * np.finfo(np.float64).eps * float((np.abs(a) @ np.abs(a)).max())
        for d in rt.devices:
            x = d.to_device(a)
            y = d.empty((64, 64), np.float64)
            d.kernel("gemm")(1.0, x, x, 0.0, y)
            c = np.empty((64, 64), order="F")
            d.to_host(y, c)
            err = float(np.abs(c - ref).max())
            if not err <= bound:
                raise RuntimeError(f"a 64 x 64 dgemm on {d.name} was off by {err:.3g} (at most {bound:.3g} "
                                   "expected): its cuBLAS gives wrong results")
            d.model  # noqa: B018 - the figures the choice reads (measured here where there is no preset)
        _GPU.call_cost = _kept_call_cost(rt)
    except Exception as exc:  # noqa: BLE001 - no CuPy, no device, a broken driver or cuBLAS: the CPU path
        _GPU.cuda = sys.modules.get("cupy") is not None  # CuPy imported: CUDA may have been reached
        if rt is not None:
            try:
                rt.close()
            except Exception:  # noqa: BLE001 - what could not start may not close either
                pass
        _GPU.runtime, _GPU.maybe = None, False
        _GPU.note = str(exc) if isinstance(exc, _gpu.GPUUnavailableError) \
            else f"the GPU did not start ({type(exc).__name__}: {exc})"
        _say_unusable(s)
        return
    _GPU.runtime = rt
    names = ", ".join(f"{d.name} ({d.model.name}, host link {d.model.h2d_bandwidth / 1e9:.3g} GB/s)" for d in rt.devices)
    _GPU.note = (_GPU.note + "; " if _GPU.note else "") + f"in use: {names}"
    if _GPU.note.startswith(f"{s.source} names"):
        _say_unusable(s)
    atexit.register(_close_at_exit, rt, os.getpid())


#: The name of the drop-in's per-call cost among the figures kept for the machine (tileblas.devices._figures).
CALL_COST_FIGURE = "drop-in call cost"

#: The orders of the dgemm calls :func:`_call_cost` times (fresh outputs, as the drop-in's calls have).
CALL_COST_ORDERS = (512, 2048)

#: At most this many calls per order in :func:`_call_cost` (the GPUs' staging rings take up to about 20 calls
#: of an order to have every slot at its size; counted on the CuPy stand-in: docs/measurements/gpu.md).
CALL_COST_MAX_CALLS = 32


def _call_cost(rt: Any) -> CallCost:
    """What a drop-in call on the GPUs of ``rt`` costs beyond the runtime's prediction, measured once on
    the machine (about half a second; kept: :func:`_kept_call_cost`): the best of two dgemm calls at each
    order of :data:`CALL_COST_ORDERS`, each with a new output as the drop-in's calls have (copied through
    the pinned staging: those outputs are below the GPUs' ``register_min``), less the runtime's prediction
    (:func:`_model_seconds`); the excess fitted as seconds a call plus seconds a byte of the output (both
    at least 0).  The two are the first calls after the first of the order during which no GPU allocated
    a pinned staging slot (``staging_allocations``), so that the fit holds what every call pays and not
    the page-locking of the first calls of a size (at most :data:`CALL_COST_MAX_CALLS` calls; where
    fewer than two are clean, the best of all but the first).  An output of ``register_min`` bytes or
    more is page-locked in place instead, which costs far less a byte than the staging: its cost a byte is
    timed apart (:func:`_locking_cost`).  Why: docs/measurements/gpu.md."""
    import time

    import numpy as np

    def allocations() -> int:
        return sum(d.staging_allocations() for d in rt.devices if hasattr(d, "staging_allocations"))

    excess, sizes, timed = [], [], []
    for n in CALL_COST_ORDERS:
        a = np.asfortranarray(np.random.default_rng(n).random((n, n)))
        pred = _model_seconds("gemm", (n, n, n), np.float64, rt)
        best = any_best = float("inf")
        clean = 0
        for call in range(CALL_COST_MAX_CALLS):  # the first untimed: it loads the kernels
            c = np.empty((n, n), order="F")
            before = allocations()
            t0 = time.perf_counter()
            rt.run("gemm", 1.0, a, a, 0.0, c)
            took = time.perf_counter() - t0
            del c
            if call == 0:
                continue
            any_best = min(any_best, took)
            if allocations() == before:
                best, clean = min(best, took), clean + 1
                if clean == 2:
                    break
        if clean < 2:
            best = any_best  # (the clean calls are among them)
        excess.append(max(best - pred, 0.0))
        sizes.append(8.0 * n * n)
        timed.append((n, best, pred))
    per_byte = max((excess[1] - excess[0]) / (sizes[1] - sizes[0]), 0.0)
    locked_from, per_locked = _locking_cost(rt)
    return CallCost(max(excess[0] - per_byte * sizes[0], 0.0), per_byte,
                    per_byte if per_locked is None else per_locked, locked_from, tuple(timed))


def _kept_call_cost(rt: Any) -> CallCost:
    """:func:`_call_cost` of the GPUs of ``rt`` as an earlier process on this machine measured it, else
    measured now and kept for the processes after (:mod:`tileblas.devices._figures`: the side of a call
    is then the same in every process); measured in this process alone where a GPU cannot be told apart."""
    from tileblas.devices import _figures

    keys = [getattr(d, "figures_key", None) for d in rt.devices]
    if not keys or None in keys:
        return _call_cost(rt)
    return _figures.measured(f"{CALL_COST_FIGURE} | " + " + ".join(keys), lambda: call_cost_dict(_call_cost(rt)),
                             call_cost_from_dict)


def _locking_cost(rt: Any) -> tuple[float, float | None]:
    """``(locked_from, seconds a byte)``: from how many bytes the GPUs of ``rt`` page-lock a host operand in
    place (their ``register_min``; ``inf`` where they pack every operand), and what page-locking a new
    buffer of that size and letting it go costs a byte, best of two (None where it could not be locked:
    such outputs are packed)."""
    import time

    import numpy as np

    dev = rt.devices[0] if rt.devices else None
    if dev is None or getattr(dev, "host_transfer", None) != "register":
        return float("inf"), None
    nbytes = max(int(dev.register_min), 1 << 20)
    best = float("inf")
    for _ in range(2):
        buf = np.empty(nbytes, np.uint8)
        t0 = time.perf_counter()
        locked = dev.registry.ensure(dev.cp.cuda.runtime, buf, dev.register_min)
        del buf  # its finaliser gives the lock back
        if not locked:
            return float(dev.register_min), None
        best = min(best, time.perf_counter() - t0)
    return float(dev.register_min), best / nbytes


def _close_at_exit(rt: Any, pid: int) -> None:  # pragma: no cover - interpreter exit
    if os.getpid() == pid:
        try:
            rt.close()
        except Exception:  # noqa: BLE001 - at exit, best effort
            pass


def gpu_runtime(search: bool = True) -> Any:
    """The Runtime over the drop-in's GPUs, or None (see the module notes): looked for now, once per
    process, with ``search`` (the setting allowing GPUs), else only what an earlier search found."""
    if _GPU.pid != os.getpid():
        _after_fork_in_child()
    if search and not _GPU.searched and _gpu_possible():
        with _GPU.lock:
            if not _GPU.searched:
                _search()
    return _GPU.runtime if _setting().wants_gpus else None


def _sync_asks() -> None:
    """Hand the C path its configuration again where whether GPUs may take calls (and so whether it asks
    :func:`_c_path_asks` about its calls from the GPU floor on) has changed since."""
    if _GPU.c_asks != _gpu_possible() and _FAST[0] is not None:
        _configure(_FAST[0])


def _gpu_target(rt: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """The GPUs' runtime for this call of the default runtime, or None: the CPU path (module notes)."""
    from tileblas.runtime import _runtime

    if not getattr(rt, "_made_default", False) or _runtime._CURRENT.get() is not None:
        return None
    if not _gpu_possible():
        _sync_asks()
        return None
    from tileblas.runtime import _planner as P

    bound = P.bind_arguments(name, args, kwargs)
    if P.is_trivial(name, bound):
        return None
    shape, out, _ = P.call_size(name, bound)
    return _gpu_choice(rt, name, shape, out.dtype)


def _c_path_asks(name: str, prefix: str, m: int, n: int, k: int) -> bool:
    """The C path's question about a call it would run, of routine family ``name``, precision ``prefix``
    and shape (m, n, k) (as :func:`tileblas.runtime._planner.call_size` gives it), from the GPU floor on
    while GPUs may take calls: whether the GPUs take it (it then leaves the call to the Python path,
    whose :func:`_gpu_target` gives the same answer).  Never raises: a failure keeps the call on the CPU."""
    try:
        from tileblas._dtypes import DTYPE_OF

        rt = _FAST[0]
        if rt is None or not _gpu_possible():
            return False
        return _gpu_choice(rt, name, (m, n, k), DTYPE_OF[prefix]) is not None
    except Exception:  # noqa: BLE001 - the GPU policy failing keeps the call where it is
        return False


def _gpu_choice(rt: Any, name: str, shape: tuple, dtype: Any) -> Any:
    """The GPUs' runtime for a call (not trivial) of the default runtime ``rt``, routine family ``name``,
    shape (m, n, k) and ``dtype``, or None: at or above the GPU floor, where the GPUs are found and
    :func:`_gpu_first` prefers them (or the setting forces them); a choice made once per shape, precision
    and thread count."""
    import numpy as np

    from tileblas.runtime import _planner as P

    threads = _threads(rt)
    if threads < 1:
        return None
    dt = np.dtype(dtype)
    cfg = _config(threads)
    if P.call_flops(name, *shape, dt) < cfg.gpu_min_flops:
        return None
    grt = gpu_runtime()
    _sync_asks()
    if grt is None:
        return None
    if _setting().forced:
        return grt
    from tileblas._tuning import get_tuning

    made_with = (grt, cfg, get_tuning())
    if len(_GPU.choices_for) != 3 or any(a is not b for a, b in zip(_GPU.choices_for, made_with)) \
            or len(_GPU.choices) > 4096:
        _GPU.choices, _GPU.choices_for = {}, made_with
    key = (name, *shape, dt.char, threads)
    goes = _GPU.choices.get(key)
    if goes is None:  # a function of the call's shape and precision and of made_with: computed once
        goes = _GPU.choices[key] = _gpu_first(name, shape, dt, rt.devices[0], threads, grt, cfg)
    return grt if goes else None


def _model_seconds(name: str, shape: tuple, dtype: Any, grt: Any) -> float:
    """The seconds the GPUs' runtime ``grt`` predicts for a call of routine ``name``, shape (m, n, k) and
    ``dtype`` in the tiles it would take (one tile covering a call that fits one)."""
    from tileblas.runtime import _planner as P
    from tileblas.runtime import _shares

    m, n, k = shape
    tile = P.bounded_tile(m, n, k, grt.tile_size_for(name, m, n, k, dtype))
    if max(m, n, k) <= tile:
        tile = max(m, n, k, 1)  # one task, one tile covering the call
    return _shares.predict_seconds(name, m, n, k, dtype, tile, grt.devices)


def gpu_costs(name: str, shape: tuple, dtype: Any, host: Any, threads: int, grt: Any,
              cfg: _dropin.DropInConfig | None = None) -> tuple[float, float]:
    """The predicted seconds ``(gpu_s, cpu_s)`` of a call of routine ``name``, shape (m, n, k) and
    ``dtype``: on the GPUs of ``grt`` (in the tiles their runtime would take, plus the per-call cost
    measured at the search: :func:`_call_cost`) and on the CPU path of ``threads`` threads of ``host``'s
    kind: at the rate ``tileblas tune`` timed for the routine's family and precision class at that thread
    count (``cfg``'s :meth:`~tileblas.policy._dropin.DropInConfig.cpu_rate`, ``cfg`` by default the one in
    force for ``threads``), else at the host model's rate (:class:`~tileblas.Tuning` ``core_flops`` a
    thread, the same for every family); single precision at the model's ratio to double."""
    import numpy as np

    from tileblas._dtypes import DTYPE_OF
    from tileblas.runtime import _planner as P
    from tileblas.runtime import _shares

    m, n, k = shape
    dt = np.dtype(dtype)
    gpu_s = _model_seconds(name, shape, dt, grt) + _GPU.call_cost.output_seconds(m * n * dt.itemsize)
    flops = P.call_flops(name, m, n, k, dt)
    order = max(min(m, n, k), 1)
    model = _shares.host_model(host)
    measured = (cfg if cfg is not None else _config(threads)).cpu_rate(name, dt.char, order)
    if measured is None:
        rate = threads * model.rate(dt, order)
    else:
        rate = measured * model.rate(dt, order) / model.rate(DTYPE_OF["z" if dt.kind == "c" else "d"], order)
    return gpu_s, flops / rate


def _gpu_first(name: str, shape: tuple, dtype: Any, host: Any, threads: int, grt: Any,
               cfg: _dropin.DropInConfig) -> bool:
    """Whether a call of routine ``name``, shape (m, n, k) and ``dtype`` goes to the GPUs of ``grt``
    rather than the CPU path of ``threads`` threads of ``host``'s kind: their predicted seconds
    (:func:`gpu_costs`) by :func:`tileblas.policy._offload.gpu_first`."""
    return _offload.gpu_first(*gpu_costs(name, shape, dtype, host, threads, grt, cfg), cfg.gpu_margin)


def set_devices(devices: str | None) -> _offload.DeviceSetting:
    """Set the drop-in's devices as ``TILEBLAS_DEVICES`` does (its grammar: :mod:`tileblas.policy._offload`;
    None: read the variable again); returns the setting it replaced (None: not read yet).  GPUs already
    found are kept where the new setting asks for as many (or none: they wait unused); else they are closed
    and looked for again by the next large call.  ValueError for a value outside the grammar."""
    new = _offload.from_environment() if devices is None else _offload.parse(devices, "set_devices")
    with _GPU.lock:
        prev, _GPU.setting = _GPU.setting, new
        _GPU.installed = None
        if _GPU.searched and new.wants_gpus and new.gpus != _GPU.asked:
            _release_locked()
        _GPU.maybe = True
        if not (_GPU.searched and _GPU.runtime is not None):
            _GPU.note = ""
        if _GPU.searched and _GPU.runtime is None and new.wants_gpus:
            _GPU.searched = False  # a GPU-less answer is for the setting it was given: look again
    if _FAST[0] is not None:
        _configure(_FAST[0])
    return prev


def _release_locked() -> None:
    rt, _GPU.runtime = _GPU.runtime, None
    _GPU.searched = False
    _GPU.note = ""
    _GPU.maybe = True
    _GPU.call_cost = CallCost()
    if rt is not None:
        rt.close()


def release_gpus() -> None:
    """Close the drop-in's GPUs (their tile memory goes back to CUDA); the next large call looks for them
    again."""
    with _GPU.lock:
        _release_locked()
    if _FAST[0] is not None:
        _configure(_FAST[0])


def _after_fork_in_child() -> None:
    """A fork child: the parent's GPUs are not the child's (CUDA does not survive fork()); where the parent
    reached CUDA the child takes the CPU path, else it looks for GPUs itself."""
    _GPU.lock = threading.RLock()
    if _GPU.pid == os.getpid():
        return
    _GPU.pid = os.getpid()
    if _GPU.runtime is not None:
        _GPU.stale.append(_GPU.runtime)  # never closed here: its CUDA objects are the parent's
        _GPU.runtime = None
    if _GPU.cuda:
        _GPU.searched, _GPU.maybe = True, False
        _GPU.note = "a fork child of a process that used CUDA (CUDA does not survive fork()): the CPU path"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def call_cost_dict(cost: CallCost) -> dict[str, Any]:
    """``cost`` as :func:`gpu_report` gives it (``timed``: order, best seconds, the runtime's prediction)."""
    return {"seconds": cost.seconds, "seconds_per_byte": cost.per_byte,
            "seconds_per_locked_byte": cost.per_locked_byte, "locked_from_bytes": cost.locked_from,
            "timed": [list(t) for t in cost.timed]}


def _figures_status() -> dict[str, Any]:
    from tileblas.devices import _figures

    try:
        return _figures.status()
    except Exception as exc:  # noqa: BLE001 - a report: what went wrong, not a raise
        return {"file": "?", "kept": 0, "read": [], "stored": [], "note": f"{type(exc).__name__}: {exc}"}


def call_cost_from_dict(d: dict[str, Any]) -> CallCost:
    """The :class:`CallCost` :func:`call_cost_dict` gave ``d`` for (as kept in the figures file); ValueError
    (or KeyError, TypeError) for a damaged one."""
    cost = CallCost(float(d["seconds"]), float(d["seconds_per_byte"]), float(d["seconds_per_locked_byte"]),
                    float(d["locked_from_bytes"]), tuple((int(t[0]), float(t[1]), float(t[2])) for t in d.get("timed", ())))
    if not all(v >= 0.0 for v in cost[:4]) or not all(math.isfinite(v) for v in cost[:3]):
        raise ValueError(f"not a call cost: {d!r}")
    return cost


def gpu_report(search: bool = True) -> dict[str, Any]:
    """What ``tileblas info`` shows of the drop-in's devices: the setting, the devices in force, why no GPU
    takes calls where none does, and per routine and precision the smallest order n of a square call
    that goes to the GPUs (from the model; None: none up to 65536).  ``search`` looks for the GPUs now
    where no call has."""
    from tileblas._tuning import get_tuning
    from tileblas.runtime._runtime import get_runtime

    rt = get_runtime()
    threads = _threads(rt) or 1
    s = _setting()
    grt = gpu_runtime(search) if _gpu_possible() or _GPU.searched else None
    cfg = _config(threads)
    out: dict[str, Any] = {"setting": s.describe(), "cpu_threads": threads, "gpus": [], "note": _GPU.note,
                           "min_flops": cfg.gpu_min_flops, "margin": cfg.gpu_margin, "crossover": {},
                           "call_cost": call_cost_dict(_GPU.call_cost), "figures": _figures_status(),
                           "cpu_rates": {k: [list(p) for p in v] for k, v in cfg.cpu_rates.items()},
                           "core_flops": get_tuning().core_flops}
    if not s.wants_gpus:
        out["note"] = "refused: no GPU is looked for" if s.note else "no GPU is looked for"
    if grt is None or not _setting().wants_gpus:
        if not out["note"]:
            out["note"] = "no call has been large enough to look for GPUs (search=False)"
        return out
    out["gpus"] = [{"name": d.name, "model": d.model.name, "host_link": d.model.h2d_bandwidth,
                    "flops": dict(d.model.flops)} for d in grt.devices]
    import numpy as np

    from tileblas._dtypes import DTYPE_OF
    from tileblas.runtime import _planner as P

    for fam in ("gemm", "symm", "syrk", "syr2k", "trmm", "trsm"):
        for p in "sdcz":
            dt = np.dtype(DTYPE_OF[p])

            def goes(n: int, fam: str = fam, dt: Any = dt) -> bool:
                if P.call_flops(fam, n, n, n, dt) < cfg.gpu_min_flops:
                    return False
                return s.forced or _gpu_first(fam, (n, n, n), dt, rt.devices[0], threads, grt, cfg)

            out["crossover"][p + fam] = _offload.crossover(goes)
    return out


_configure(None)  # the Level-1/2 limits in force from the import on; Level 3 off until the first call
