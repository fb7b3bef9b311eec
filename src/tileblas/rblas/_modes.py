"""Modes, the auto policy, decisions and errors of :mod:`tileblas.rblas`.

Design note: this module owns the vocabulary only (mode names, the process default, the cost constants
the ``auto`` mode weighs, the :class:`Decision` record and the exception classes).  It computes nothing
and touches no array; the engine in ``_registry`` reads it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "MODES",
    "AutoPolicy",
    "Decision",
    "ReversalError",
    "NotForwardedError",
    "AlreadyReversedError",
    "OrderError",
    "ArgumentMismatchError",
    "ModifiedError",
    "RestoreError",
    "set_default_mode",
    "get_default_mode",
    "get_policy",
    "set_policy",
]

#: The four modes.  ``checkpoint``: save what the forward call overwrites; ``compute``: inverse computation
#: (falls back to checkpointing only where the inverse does not exist: destructive copy, zero scalar,
#: singular triangle, output aliasing an input); ``auto``: per call, checkpoint where the inverse is
#: impossible or unsafe, else whichever the cost figures say is cheaper; ``exact``: inverse computation
#: plus the compressed rounding residual, restoring bit for bit.
MODES = ("checkpoint", "compute", "auto", "exact")


class ReversalError(ValueError):
    """A reverse call that cannot be matched with its forward call (base class of the misuse errors)."""


class NotForwardedError(ReversalError):
    """The reverse call has no forward call to undo (never run forward, or run on another thread)."""


class AlreadyReversedError(ReversalError):
    """The forward call was already reversed."""


class OrderError(ReversalError):
    """Reversal out of LIFO order: a later forward call has not been reversed yet."""


class ArgumentMismatchError(ReversalError):
    """The reverse call's arguments differ from those of the most recent forward call."""


class ModifiedError(ReversalError):
    """An argument was modified between the forward and the reverse call (fingerprint mismatch)."""


class RestoreError(np.linalg.LinAlgError):
    """A restore that must be bit-exact failed its verification (numerical failure)."""


def _check_mode(mode: Any, name: str = "mode") -> str:
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"{name} must be one of {MODES}; got {mode!r} instead")
    return mode


@dataclass
class AutoPolicy:
    """The figures the ``auto`` mode weighs.

    Parameters
    ----------
    bandwidth : float
        Bytes per second of a memory copy (checkpoint save or restore).
    flop_rate : float
        Floating-point operations per second of the inverse computation (real flops; complex counts 4).
    reverse_weight : float
        Weight of the reverse cost against the forward cost (1.0: every forward call is reversed; 0.0:
        reversal is rare and only forward time counts, which favours inverse computation).
    max_checkpoint_bytes : float
        Checkpoints larger than this are avoided whenever inverse computation is safe.
    max_cond_eps : float
        Double precision: a triangular matrix counts as ill-conditioned when ``cond * eps`` exceeds
        ``max_cond_eps`` (1e-8: cond up to 4.5e7, about 8 digits kept).  Single precision: when ``cond``
        exceeds ``eps ** -0.5`` (about 2900: half the digits kept).
    scalar_exponent : float
        A scalar divided by in the reverse (``beta``, ``alpha`` of scal/trmm) is safe when
        ``eps**scalar_exponent <= |s| <= eps**-scalar_exponent`` (the paper's epsilon and E).
    """

    bandwidth: float = 8e9
    flop_rate: float = 2e10
    reverse_weight: float = 1.0
    max_checkpoint_bytes: float = float("inf")
    max_cond_eps: float = 1e-8
    scalar_exponent: float = 0.5

    def cond_limit(self, dtype: Any) -> float:
        """The largest condition number treated as safe for precision ``dtype``."""
        eps = float(np.finfo(np.dtype(dtype)).eps)
        if eps > 1e-10:  # single precision: keep at least half the digits
            return eps ** -0.5
        return self.max_cond_eps / eps

    def scalar_bounds(self, dtype: Any) -> tuple[float, float]:
        """(epsilon, E): the safe range of ``|scalar|`` for precision ``dtype``."""
        eps = float(np.finfo(np.dtype(dtype)).eps)
        return eps ** self.scalar_exponent, eps ** -self.scalar_exponent


@dataclass
class Decision:
    """What a forward call chose, and why.

    Attributes
    ----------
    routine : str
        The BLAS routine (e.g. ``"daxpy"``).
    requested : str
        The mode asked for (call keyword, Tape, or process default).
    mode : str
        What was done: ``"checkpoint"``, ``"compute"``, ``"exact"``, or ``"none"`` when the forward call
        changed no argument in place (the routine returned a fresh array) and there is nothing to undo.
    reason : str
        Why, in words.
    extra_bytes : int
        Bytes held until the reverse call (checkpoint, residual, saved diagonal).
    checkpoint_bytes : int
        Bytes a checkpoint of the outputs would hold (for comparison).
    estimates : dict
        Cost estimates in seconds that ``auto`` compared (empty otherwise).
    """

    routine: str
    requested: str
    mode: str
    reason: str
    extra_bytes: int = 0
    checkpoint_bytes: int = 0
    estimates: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return (f"{self.routine}: {self.mode} (asked {self.requested}; {self.reason}; holds "
                f"{self.extra_bytes} B, checkpoint would hold {self.checkpoint_bytes} B)")


_state_lock = threading.Lock()
_default = {"mode": "auto", "policy": AutoPolicy()}


class _DefaultMode:
    """Return value of :func:`set_default_mode`: also a context manager that restores the old default."""

    def __init__(self, old: str) -> None:
        self._old = old

    def __enter__(self) -> "_DefaultMode":
        return self

    def __exit__(self, *exc: Any) -> None:
        set_default_mode(self._old)


def set_default_mode(mode: str) -> _DefaultMode:
    """Set the process-wide default mode; usable as a context manager that restores the previous one.

    Parameters
    ----------
    mode : {'checkpoint', 'compute', 'auto', 'exact'}
        The mode used by forward calls that name none, outside any Tape that names one.

    Examples
    --------
    >>> from tileblas import rblas
    >>> with rblas.set_default_mode("checkpoint"):
    ...     pass
    """
    mode = _check_mode(mode)
    with _state_lock:
        old = _default["mode"]
        _default["mode"] = mode
    return _DefaultMode(old)


def get_default_mode() -> str:
    """The process-wide default mode."""
    return _default["mode"]


def get_policy() -> AutoPolicy:
    """The :class:`AutoPolicy` the ``auto`` mode uses."""
    return _default["policy"]


def set_policy(policy: AutoPolicy) -> AutoPolicy:
    """Replace the :class:`AutoPolicy`; returns the previous one."""
    if not isinstance(policy, AutoPolicy):
        raise TypeError(f"policy must be an AutoPolicy; got {type(policy).__name__} instead")
    with _state_lock:
        old = _default["policy"]
        _default["policy"] = policy
    return old
