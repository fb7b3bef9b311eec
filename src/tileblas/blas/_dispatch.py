"""Where tileblas.blas sends Level-3 work.

``level3(name, *args, **kwargs)`` takes a routine name (gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm,
trsm) and the arguments of the matching array-level kernel in :mod:`tileblas.kernels._openblas`, already checked
and converted by the caller, and computes in place on the *current runtime*
(:func:`tileblas.runtime.get_runtime`: the innermost ``with tileblas.Runtime(...)`` of this context, else
the process default).  It is the one seam between the drop-in API and the execution engine.  The runtime
module is imported on the first call, so importing tileblas.blas stays cheap.

The C small-call path in front of the public routines (``tileblas.blas._fastpath``, where it exists) is
configured here, in one ``configure`` call: what it decides with comes from
:func:`tileblas.policy._dropin.config` (the shipped defaults, what ``tileblas tune`` stored, the thread
setting), what it runs on from the kernels (the OpenBLAS instances' entry points, the pool slot), and
whether it is on from the bookkeeping below.  It decides nothing itself.  The path policy is read on the
first call; ``tileblas tune`` calls :func:`apply_policy` again after storing new crossovers.

The C small-call path stands in for the default runtime tileblas made itself; when that runtime closes or
the default is replaced, the runtime calls :func:`_release`, which this module registers with
:func:`tileblas.runtime._runtime.on_release` before it first turns the path on (the runtime never imports
tileblas.blas).
"""

from __future__ import annotations

import os
from typing import Any

from tileblas.policy import _dropin

__all__ = ["level3", "apply_policy", "c_config", "fastpath_off", "set_small_path"]

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
                   get_num_threads=0)
        return cfg
    from tileblas.kernels import _openblas
    from tileblas.runtime import _runtime

    threads = _threads(rt)
    names = _dropin.routines(*_dropin.FAMILIES)
    lib = _openblas.get_library(threads)
    cfg = _dropin.config(threads).c_fields()
    cfg.update(enabled=True, contextvar=_runtime._CURRENT, entries={r: lib.fortran(r) for r in names},
               one_thread_entries={}, pool_slot=-1, get_num_threads=0)
    if threads > 1:  # the one-thread instance: below the one-thread limits, and the parts of split calls
        one = _openblas.get_library(1)
        cfg["one_thread_entries"] = {r: one.fortran(r) for r in names}
        if lib.pool_slot is not None:
            cfg["pool_slot"] = lib.pool_slot
            cfg["get_num_threads"] = lib._ctypes.cast(lib._symbol("openblas_get_num_threads"),
                                                      lib._ctypes.c_void_p).value
    return cfg


def _configure(rt: Any) -> dict[str, Any] | None:
    """Hand the C path its configuration for ``rt`` (None: off) in one call; the configuration passed."""
    if _fastpath is None:
        return None
    cfg = c_config(rt)
    _fastpath.configure(cfg)
    return cfg


def apply_policy(reload: bool = False) -> _dropin.DropInConfig:
    """Read the path policy (re-read its file with ``reload``) and hand the C path its configuration again
    (for the runtime it stands in for, else off).  Returns the C path's limits in force for the thread
    count of that runtime (:func:`tileblas.policy._dropin.config`; 1 when off)."""
    from tileblas.policy import _paths

    if reload:
        _paths.reload()
    _APPLIED[0] = True
    rt = _FAST[0]
    _configure(rt)
    return _dropin.config(_threads(rt) if rt is not None else 1)


def level3(name: str, *args: Any, **kwargs: Any) -> None:
    """Compute the Level-3 routine ``name`` in place on the current runtime (see module docstring)."""
    from tileblas.runtime._runtime import get_runtime

    if not _APPLIED[0]:
        apply_policy()
    rt = get_runtime()
    rt.run(name, *args, **kwargs)
    if _FAST[0] is not rt and _ALLOWED[0]:
        _sync_fastpath(rt)


def set_small_path(enabled: bool) -> bool:
    """Allow (True) or forbid (False) the C small-call path of the Level-3 routines; returns the previous
    setting.  Forbidden, every call goes through the Python path and the current runtime (whose profile
    then records it)."""
    prev = _ALLOWED[0]
    _ALLOWED[0] = bool(enabled)
    if not enabled:
        fastpath_off()
    return prev


def _sync_fastpath(rt: Any) -> None:
    """Turn the C small-call path on when ``rt`` is the default runtime tileblas made itself (not one a
    caller made or set: its profile records every call) and takes the path policy's native path (host
    devices only), with the OpenBLAS instance of its thread count; else off."""
    if _fastpath is None:
        return
    from tileblas.runtime import _runtime

    ok = (_ALLOWED[0] and _runtime._CURRENT.get() is None and _runtime._DEFAULT is rt and _threads(rt) > 0
          and not rt.closed and getattr(rt, "_made_default", False))
    if not ok:
        fastpath_off()
        return
    _runtime.on_release(_release)  # off again when rt closes or stops being the default
    _configure(rt)
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


_configure(None)  # the Level-1/2 limits in force from the import on; Level 3 off until the first call
