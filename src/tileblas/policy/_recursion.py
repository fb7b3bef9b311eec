"""When the host's trmm/trsm take the recursive algorithm, and with which stopping size.

The recursion itself (:mod:`tileblas.kernels._recursive`) decides nothing: its callers -- the CPU device's
trmm/trsm kernels (:mod:`tileblas.devices.cpu`), the runtime's native path (for its call log),
:mod:`tileblas.linalg` and the path tuning -- ask here and pass the answers in.

* :func:`recursion_window`: the shapes (order, right-hand sides) for which the recursion measured
  faster than OpenBLAS's own routine, per routine, precision and side: by the rule ``tileblas tune``
  stored in the path policy (:mod:`tileblas.policy._paths`), else by the shipped constants below;
  :func:`recursion_faster` asks it for one shape and thread count.
* :func:`recursion_stop`: the stopping size: this machine's performance models' answer for float64 where
  ``tileblas tune`` built them (:func:`tileblas.policy._suggest.suggest`), else the measured default
  :func:`tileblas.kernels._recursive.default_stop`.

What it must not touch
    Measuring (``tileblas tune`` does, in :mod:`tileblas.perf`) and the kernels' work.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tileblas._dtypes import PREFIX_OF
from tileblas._tuning import Tuning, get_tuning
from tileblas.policy import _paths
from tileblas.policy._dropin import MEASURED_THREADS

__all__ = ["recursion_faster", "recursion_window", "recursion_stop", "RECURSIVE_MIN_ORDER", "RECURSIVE_MIN_THREADS", "RECURSIVE_RHS"]

#: Shipped defaults of the rule for when the trmm/trsm kernels run the recursion instead of OpenBLAS's
#: own routine, kept under their old names; the values in force are :func:`tileblas.get_tuning`'s
#: (``recursive_min_order``, ``recursive_min_threads``, ``recursive_rhs``; the measurements behind them:
#: docs/measurements/recursive.md, "The tunables and the figures behind their defaults").
RECURSIVE_MIN_ORDER = Tuning().recursive_min_order
RECURSIVE_MIN_THREADS = Tuning().recursive_min_threads
RECURSIVE_RHS = Tuning().recursive_rhs


def recursion_window(kind: str, dtype_char: str, side: str,
                     threads: int | None = None) -> tuple[float, float, float] | None:
    """The shapes for which the recursive ``kind`` (trmm/trsm) in precision ``dtype_char`` with the
    triangle on ``side`` measured faster than OpenBLAS's own routine (on enough threads): ``(min_order,
    rhs_lo, rhs_hi)`` -- a triangle of order >= min_order with rhs_lo..rhs_hi right-hand sides -- or None
    where it never does.  By the rule ``tileblas tune`` measured on this machine for the routine and
    precision class (:func:`tileblas.policy._paths.policy`), else by the :class:`~tileblas.Tuning` in
    force (``recursive_min_order``, ``recursive_rhs``, and ``recursive_left_prefixes`` for a triangle on
    the left).  The shipped values of those were measured at two BLAS threads: with ``threads`` given,
    None for any other count than those (:data:`tileblas.policy._dropin.MEASURED_THREADS`), where
    OpenBLAS's routine is SciPy's path, unless the :class:`~tileblas.Tuning` in force sets them."""
    rule = _paths.policy().recursion.get((kind, _paths.precision_class(dtype_char)))
    if rule is not None:
        return None if math.isinf(rule[0]) else (float(rule[0]), float(rule[1]), float(rule[2]))
    t = get_tuning()
    if threads is not None and int(threads) not in MEASURED_THREADS and _shipped_rule(t):
        return None
    if side == "L" and PREFIX_OF[np.dtype(dtype_char)] not in t.recursive_left_prefixes:
        return None
    return (float(t.recursive_min_order), float(t.recursive_rhs[0]), float(t.recursive_rhs[1]))


#: The Tuning fields of the shipped rule, and their shipped values
_RULE_FIELDS = ("recursive_min_order", "recursive_min_threads", "recursive_rhs", "recursive_left_prefixes")
_SHIPPED_RULE = tuple(getattr(Tuning(), f) for f in _RULE_FIELDS)


def _shipped_rule(t: Tuning) -> bool:
    """Whether ``t`` keeps the shipped rule (none of :data:`_RULE_FIELDS` set otherwise)."""
    return tuple(getattr(t, f) for f in _RULE_FIELDS) == _SHIPPED_RULE


def recursion_faster(order: int, rhs: int, threads: int, kind: str = "trsm", dtype_char: str = "d",
                     side: str = "L") -> bool:
    """Whether the recursive ``kind`` (trmm/trsm) measured faster than OpenBLAS's own routine on ``threads``
    BLAS threads for a triangle of ``order`` on ``side`` and ``rhs`` right-hand sides: the shape is in
    :func:`recursion_window` for that thread count, and ``threads`` at least the :class:`~tileblas.Tuning`'s
    ``recursive_min_threads``."""
    if threads < get_tuning().recursive_min_threads:
        return False
    w = recursion_window(kind, dtype_char, side, threads)
    return w is not None and order >= w[0] and w[1] <= rhs <= w[2]


def recursion_stop(kind: str, side: str, free: int, dtype: Any) -> int:
    """Stopping size of the host recursive ``kind`` (trmm/trsm) for B of ``dtype`` with ``free`` columns on
    its non-triangular side (rows for side 'R'): from this machine's models for float64 when
    ``tileblas tune`` built them, else :func:`tileblas.kernels._recursive.default_stop`."""
    from tileblas.kernels import _recursive

    if dtype == np.float64:
        from tileblas.policy._suggest import suggest

        stop = suggest("recursion_stop", routine="d" + kind, side=side, n=free)
        if stop is not None:
            return int(stop)
    return _recursive.default_stop(free)
