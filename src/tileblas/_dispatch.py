"""Where tileblas.blas sends Level-3 work.

``level3(name, *args, **kwargs)`` takes a routine name (gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm,
trsm) and the arguments of the matching array-level kernel in :mod:`tileblas._kernels`, already checked
and converted by the caller, and computes in place on the *current runtime*
(:func:`tileblas.runtime.get_runtime`: the innermost ``with tileblas.Runtime(...)`` of this context, else
the process default).  It is the one seam between the drop-in API and the execution engine.  The runtime
module is imported on the first call, so importing tileblas.blas stays cheap.

The path policy (:mod:`tileblas.perf._paths`: one native call on all threads, the recursion, or tiles) is
read on the first call; :func:`apply_policy` then hands the C fast path in front of the public routines
(``tileblas._fastpath``, where it exists) the flop limits below which it may make the one native call
itself.  ``tileblas tune`` calls :func:`apply_policy` again after storing new crossovers.
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["level3", "apply_policy", "fastpath_limits"]

_APPLIED = [False]


def fastpath_limits() -> dict[str, float]:
    """Per routine, the flops below which the policy in force computes with one native call on all threads
    in every precision (finite; ``sys.float_info.max`` for "always")."""
    from tileblas.devices import cpu
    from tileblas.perf import _paths

    pol = _paths.policy()
    rec = math.inf
    for (fam, _), rule in pol.recursion.items():  # the fewest flops (real count) at which recursion is chosen
        order, rhs = (cpu.RECURSIVE_MIN_ORDER, cpu.RECURSIVE_RHS[0]) if rule is None else (rule[0], rule[1])
        rec = min(rec, float(order) * order * max(rhs, 1))
    return {k: min(v, sys.float_info.max) for k, v in pol.level3_limits(rec).items()}


def apply_policy(reload: bool = False) -> dict[str, float] | None:
    """Read the path policy (re-read its file with ``reload``) and pass its limits to the C fast path.
    Returns the limits passed, or None when there is no fast path module."""
    from tileblas.perf import _paths

    if reload:
        _paths.reload()
    _APPLIED[0] = True
    try:
        from tileblas import _fastpath  # type: ignore[attr-defined]
    except ImportError:
        return None
    setter = getattr(_fastpath, "set_level3_limits", None)
    if setter is None:
        return None
    limits = fastpath_limits()
    setter(limits)
    return limits


def level3(name: str, *args: Any, **kwargs: Any) -> None:
    """Compute the Level-3 routine ``name`` in place on the current runtime (see module docstring)."""
    from tileblas.runtime._runtime import get_runtime

    if not _APPLIED[0]:
        apply_policy()
    get_runtime().run(name, *args, **kwargs)
