"""Reversible BLAS: a forward/reverse pair for every BLAS routine with side effects.

For every routine ``<p><routine>`` of :mod:`tileblas.blas` that overwrites an argument (Level 1: copy,
swap, scal, axpy, rot, rotm; Level 2: gemv ... spr2; Level 3: gemm ... trsm; every precision scipy offers,
including csscal/zdscal and csrot/zdrot) this module has ``f<p><routine>`` (forward) and
``r<p><routine>`` (reverse), taking exactly the arguments of the ``tileblas.blas`` routine (the forward
also takes ``mode=``).  Forward then reverse with the same arguments restores every argument the forward
call updated in place.

"Restores" follows scipy's in-place semantics: where the routine updates an argument in place (daxpy's
``y`` when it is a contiguous float64 array; gemv's ``y`` with ``overwrite_y=1``; ...), the reverse call
writes the old values back into that same array.  Where the routine returned a fresh array instead
(non-contiguous or wrong-dtype ``y``, ``overwrite_y=0``), the user's argument was never changed: the
forward call records mode ``"none"`` and the reverse only checks and pops that record.  The reverse
returns the arguments at the positions of the forward call's return values.

Modes (per call ``mode=``, per :class:`Tape`, or :func:`set_default_mode`): ``checkpoint``, ``compute``,
``auto``, ``exact`` -- see :data:`MODES` and :class:`Decision`; :func:`last_decision` tells what a call
chose.  State lives in the journal of the calling thread or asyncio task (a LIFO stack); reverse calls
must come in LIFO order, and misuse raises a :class:`ReversalError` subclass without changing anything.
Compute-mode restores are exact for swap and accurate to a few ulps (times the condition number for the
triangular routines, times ``|alpha*A*x|/|beta*y|`` for the beta-routines) otherwise; checkpoint and exact
restore bit for bit.
"""

from __future__ import annotations

from typing import Any, Callable

from tileblas.rblas import _level1, _level2, _level3
from tileblas.rblas._modes import (
    MODES,
    AlreadyReversedError,
    ArgumentMismatchError,
    AutoPolicy,
    Decision,
    ModifiedError,
    NotForwardedError,
    OrderError,
    RestoreError,
    ReversalError,
    get_default_mode,
    get_policy,
    set_default_mode,
    set_policy,
)
from tileblas.rblas._registry import Spec, make_pair
from tileblas.rblas._journal import discard, last_decision, pending
from tileblas.rblas._tape import Tape

#: every table entry (one per routine and signature variant)
SPECS: tuple[Spec, ...] = (*_level1.SPECS, *_level2.SPECS, *_level3.SPECS)

#: routine name with prefix ('daxpy') -> its table entry
SPEC_OF: dict[str, Spec] = {}

#: routine name with prefix ('daxpy') -> (forward, reverse)
PAIRS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {}

_routines: list[str] = []
for _spec in SPECS:
    for _p in _spec.prefixes:
        SPEC_OF[_p + _spec.routine] = _spec
        _f, _r = make_pair(_spec, _p)
        PAIRS[_p + _spec.routine] = (_f, _r)
        globals()[_f.__name__] = _f
        globals()[_r.__name__] = _r
        _routines += [_f.__name__, _r.__name__]

__all__ = [
    "MODES", "Tape", "Decision", "AutoPolicy", "SPECS", "SPEC_OF", "PAIRS",
    "set_default_mode", "get_default_mode", "get_policy", "set_policy",
    "last_decision", "pending", "discard",
    "ReversalError", "NotForwardedError", "AlreadyReversedError", "OrderError",
    "ArgumentMismatchError", "ModifiedError", "RestoreError",
    *_routines,
]

del _spec, _p, _f, _r


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)
