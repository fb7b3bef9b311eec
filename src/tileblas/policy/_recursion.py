"""When the host's trmm/trsm take the recursive algorithm, and with which stopping size.

The recursion itself (:mod:`tileblas.kernels._recursive`) decides nothing: its callers -- the CPU device's
trmm/trsm kernels (:mod:`tileblas.devices.cpu`), the runtime's native path (for its call log),
:mod:`tileblas.linalg` and the path tuning -- ask here and pass the answers in.

* :func:`recursion_faster`: whether the recursion measured faster than OpenBLAS's own routine for a
  shape and thread count: by the rule ``tileblas tune`` stored in the path policy
  (:mod:`tileblas.policy._paths`), else by the shipped constants below.
* :func:`recursion_stop`: the stopping size: this machine's performance models' answer for float64 where
  ``tileblas tune`` built them (:func:`tileblas.policy._suggest.suggest`), else the measured default
  :func:`tileblas.kernels._recursive.default_stop`.

What it must not touch
    Measuring (``tileblas tune`` does, in :mod:`tileblas.perf`) and the kernels' work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tileblas._dtypes import PREFIX_OF
from tileblas._tuning import Tuning, get_tuning
from tileblas.policy import _paths

__all__ = ["recursion_faster", "recursion_first_flops", "recursion_stop", "RECURSIVE_MIN_ORDER", "RECURSIVE_MIN_THREADS", "RECURSIVE_RHS"]

#: Shipped defaults of the rule for when the trmm/trsm kernels run the recursion instead of OpenBLAS's
#: own routine, kept under their old names; the values in force are :func:`tileblas.get_tuning`'s
#: (``recursive_min_order``, ``recursive_min_threads``, ``recursive_rhs``; docs/recursive.md has the
#: measurements behind them).
RECURSIVE_MIN_ORDER = Tuning().recursive_min_order
RECURSIVE_MIN_THREADS = Tuning().recursive_min_threads
RECURSIVE_RHS = Tuning().recursive_rhs


def recursion_faster(order: int, rhs: int, threads: int, kind: str = "trsm", dtype_char: str = "d",
                     side: str = "L") -> bool:
    """Whether the recursive ``kind`` (trmm/trsm) measured faster than OpenBLAS's own routine on ``threads``
    BLAS threads for a triangle of ``order`` on ``side`` and ``rhs`` right-hand sides: by the rule
    ``tileblas tune`` measured on this machine for the routine and precision class
    (:func:`tileblas.policy._paths.policy`), else by the :class:`~tileblas.Tuning` in force
    (``recursive_min_order``, ``recursive_rhs``, and ``recursive_left_prefixes`` for a triangle on the
    left); never on fewer than its ``recursive_min_threads`` threads."""
    t = get_tuning()
    if threads < t.recursive_min_threads:
        return False
    rule = _paths.policy().recursion.get((kind, _paths.precision_class(dtype_char)))
    if rule is None:
        if not (order >= t.recursive_min_order and t.recursive_rhs[0] <= rhs <= t.recursive_rhs[1]):
            return False
        return side != "L" or PREFIX_OF[np.dtype(dtype_char)] in t.recursive_left_prefixes
    return order >= rule[0] and rule[1] <= rhs <= rule[2]


def recursion_first_flops(kind: str, dtype_char: str, side: str) -> float:
    """The fewest flops (order**2 * rhs, real count) of a ``kind`` call in precision ``dtype_char`` with
    the triangle on ``side`` for which :func:`recursion_faster` can answer True (on enough threads), by
    the same rule; ``inf`` where it never does.  Below it a call never runs the recursion."""
    t = get_tuning()
    rule = _paths.policy().recursion.get((kind, _paths.precision_class(dtype_char)))
    if rule is not None:
        return float(rule[0]) * rule[0] * max(rule[1], 1)
    if side == "L" and PREFIX_OF[np.dtype(dtype_char)] not in t.recursive_left_prefixes:
        return float("inf")
    return float(t.recursive_min_order) ** 2 * max(t.recursive_rhs[0], 1)


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
