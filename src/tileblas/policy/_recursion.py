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

from tileblas.policy import _paths

__all__ = ["recursion_faster", "recursion_stop", "RECURSIVE_MIN_ORDER", "RECURSIVE_MIN_THREADS", "RECURSIVE_RHS"]

#: When the trmm/trsm kernels run the recursive algorithm (:func:`tileblas.kernels._recursive.recursive_trmm` /
#: ``recursive_trsm``) instead of OpenBLAS's own routine: on a device with at least
#: RECURSIVE_MIN_THREADS BLAS threads, for a triangle of order >= RECURSIVE_MIN_ORDER and a number of
#: right-hand sides (the other dimension of B) within RECURSIVE_RHS.  Measured on 2 cores with the
#: recursion issuing its native calls directly (``benchmarks/bench_trmm_trsm.py --tile-threshold`` and
#: the main benchmark, best of 5-7 interleaved): single-threaded, the recursion was 0.95-1.00x OpenBLAS
#: at orders 512-2048; on 2 threads, with 64 right-hand sides, 1.00/1.05x (trmm/trsm) at order 512,
#: 1.03-1.07/1.03-1.11x at 1024 and 1.11-1.18/1.01-1.12x at 2048; 0.95-1.05x with 256 (parity) and
#: 0.95-0.99x for square blocks up to 2048; 0.85-0.95x with 16.  The tile runtime's default tiles
#: (1-thread workers) therefore keep OpenBLAS's routine.
RECURSIVE_MIN_ORDER = 1024
RECURSIVE_MIN_THREADS = 2
RECURSIVE_RHS = (32, 128)


def recursion_faster(order: int, rhs: int, threads: int, kind: str = "trsm", dtype_char: str = "d") -> bool:
    """Whether the recursive ``kind`` (trmm/trsm) measured faster than OpenBLAS's own routine on ``threads``
    BLAS threads for a triangle of ``order`` and ``rhs`` right-hand sides: by the rule ``tileblas tune``
    measured on this machine for the routine and precision class (:func:`tileblas.policy._paths.policy`),
    else by the shipped constants (see RECURSIVE_MIN_ORDER)."""
    if threads < RECURSIVE_MIN_THREADS:
        return False
    rule = _paths.policy().recursion.get((kind, _paths.precision_class(dtype_char)))
    if rule is None:
        return order >= RECURSIVE_MIN_ORDER and RECURSIVE_RHS[0] <= rhs <= RECURSIVE_RHS[1]
    return order >= rule[0] and rule[1] <= rhs <= rule[2]


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
