"""Level-1 entries of the rblas table (paper, Table 1, plus rot/rotm): copy, swap, scal, axpy, rot, rotm.

Design note: each entry restates the scipy.linalg.blas signature and gives the inverse as
``tileblas.blas`` calls with changed scalars; the helpers here (scalar safety) are shared by Levels 2-3.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from tileblas.rblas._modes import get_policy
from tileblas.rblas._registry import Ctx, Out, Spec

__all__ = ["SPECS", "scalar_impossible", "scalar_unsafe"]

_L1 = ("n", "offx", "incx", "offy", "incy")


#: the largest finite number of each real precision (by dtype character)
_LARGEST = {"f": float(np.finfo(np.float32).max), "d": float(np.finfo(np.float64).max)}


def scalar_impossible(value: Any, name: str, ctx: Ctx | None = None, numerator: Any = 1.0,
                      numerator_name: str = "1") -> str | None:
    """Reason why dividing by ``value`` is impossible (zero or non-finite, or ``numerator / value`` -- 1 by
    default -- overflows in the routine's precision: the inverse would write Inf), else None."""
    v = complex(value)
    if v == 0:
        return f"{name} = 0 destroys the overwritten values"
    if not (math.isfinite(v.real) and math.isfinite(v.imag)):
        return f"{name} = {value!r} is not finite"
    big = _LARGEST.get(ctx.real.char, sys.float_info.max) if ctx is not None else sys.float_info.max
    if abs(complex(numerator)) >= big * abs(v):  # |numerator / value| would not be a finite number
        return f"{numerator_name}/{name} overflows ({name} = {value!r}): the inverse would write Inf"
    return None


def scalar_unsafe(value: Any, name: str, ctx: Ctx) -> str | None:
    """Reason why dividing by ``value`` risks overflow/underflow or heavy rounding, else None."""
    lo, hi = get_policy().scalar_bounds(ctx.real)
    a = abs(complex(value))
    if a < lo or a > hi:
        return f"|{name}| = {a:.3g} is outside the safe range [{lo:.3g}, {hi:.3g}]"
    return None


def _n1(ctx: Ctx) -> float:
    outs = [ctx.bound.get(o.name) for o in ctx.spec.outputs]
    return float(sum(getattr(v, "size", 0) for v in outs))


def _l1_cost(ctx: Ctx) -> tuple[float, float]:
    n = _n1(ctx)
    return 2.0 * n, 3.0 * n * ctx.dtype.itemsize


def _all_plus_zero(v: Any) -> bool:
    if not isinstance(v, np.ndarray):
        return False
    r = v.view(v.real.dtype) if v.dtype.kind == "c" else v
    return not r.view(np.uint64 if r.itemsize == 8 else np.uint32).any()


def _copy_impossible(ctx: Ctx) -> str | None:
    if _all_plus_zero(ctx.bound["y"]):
        return None
    return "destructive routine: y's old values are not a function of the new ones (y was not all zero)"


def _zero_fill(ctx: Ctx) -> None:
    ctx.bound["y"][...] = 0


def _copy_inverse(ctx: Ctx) -> list:
    return [_zero_fill]


def _scal_inverse(ctx: Ctx) -> list:
    return [ctx.call(a=1.0 / ctx.get("a"))]


def _axpy_inverse(ctx: Ctx) -> list:
    return [ctx.call(a=-ctx.get("a"))]


def _rot_det(ctx: Ctx) -> float:
    c, s = ctx.get("c"), ctx.get("s")
    return float(c) * float(c) + float(s) * float(s)


def _rot_inverse(ctx: Ctx) -> list:
    d = _rot_det(ctx)
    return [ctx.call(c=float(ctx.get("c")) / d, s=-float(ctx.get("s")) / d, overwrite_x=1, overwrite_y=1)]


def rotm_matrix(param: Any) -> np.ndarray:
    """The 2x2 matrix H of a rotm ``param`` array (flag, h11, h21, h12, h22)."""
    p = np.asarray(param, dtype=np.float64).ravel()
    flag = p[0]
    if flag == -2:
        return np.eye(2)
    if flag == -1:
        return np.array([[p[1], p[3]], [p[2], p[4]]])
    if flag == 0:
        return np.array([[1.0, p[3]], [p[2], 1.0]])
    if flag == 1:
        return np.array([[p[1], 1.0], [-1.0, p[4]]])
    raise ValueError(f"param[0] (flag) must be -2, -1, 0 or 1; got {flag!r}")


def _rotm_inverse(ctx: Ctx) -> list:
    h = np.linalg.inv(rotm_matrix(ctx.get("param")))
    p = np.asarray(ctx.get("param"))
    inv = np.array([-1.0, h[0, 0], h[1, 0], h[0, 1], h[1, 1]], dtype=p.dtype if p.dtype.kind == "f" else ctx.dtype)
    return [ctx.call(param=inv, overwrite_x=1, overwrite_y=1)]


def _rotm_impossible(ctx: Ctx) -> str | None:
    det = float(np.linalg.det(rotm_matrix(ctx.get("param"))))
    return "the rotation matrix H is singular" if det == 0 or not np.isfinite(det) else None


def _rotm_unsafe(ctx: Ctx) -> str | None:
    h = rotm_matrix(ctx.get("param"))
    c = np.linalg.cond(h)
    if c > get_policy().cond_limit(ctx.real):
        return f"the rotation matrix H is ill-conditioned (cond {c:.2e})"
    return None


_P4 = ("s", "d", "c", "z")

SPECS = [
    Spec("copy", 1, _P4, ("x", "y", *_L1), 2, {"offx": 0, "incx": 1, "offy": 0, "incy": 1},
         (Out("y"),), ("y",), _copy_inverse, impossible=_copy_impossible, cost=_l1_cost, guard=None,
         doc="Destructive: y's old values are checkpointed (the paper's choice 1), except when y held "
             "only (+0) zeros: then the reverse zero-fills y and nothing is kept (the paper's choice 2)."),
    Spec("swap", 1, _P4, ("x", "y", *_L1), 2, {"offx": 0, "incx": 1, "offy": 0, "incy": 1},
         (Out("x"), Out("y")), ("x", "y"), lambda ctx: [ctx.call()], cost=_l1_cost, guard=None,
         doc="Self-inverse: the reverse swaps again (exact in compute mode)."),
    Spec("scal", 1, _P4, ("a", "x", "n", "offx", "incx"), 2, {"offx": 0, "incx": 1},
         (Out("x"),), ("x",), _scal_inverse,
         impossible=lambda ctx: scalar_impossible(ctx.get("a"), "a", ctx),
         unsafe=lambda ctx: scalar_unsafe(ctx.get("a"), "a", ctx), cost=_l1_cost, guard="chunks",
         doc="Reverse scales by 1/a (paper: bounded scale, a = 0 is checkpointed)."),
    Spec("scal", 1, ("cs", "zd"), ("a", "x", "n", "offx", "incx", "overwrite_x"), 2,
         {"offx": 0, "incx": 1, "overwrite_x": 0},
         (Out("x", "overwrite_x"),), ("x",), lambda ctx: [ctx.call(a=1.0 / ctx.get("a"), overwrite_x=1)],
         impossible=lambda ctx: scalar_impossible(ctx.get("a"), "a", ctx),
         unsafe=lambda ctx: scalar_unsafe(ctx.get("a"), "a", ctx), cost=_l1_cost, guard="chunks",
         doc="Real scale of a complex vector; in place only with overwrite_x=1 (scipy's default copies)."),
    Spec("axpy", 1, _P4, ("x", "y", "n", "a", "offx", "incx", "offy", "incy"), 2,
         {"a": 1.0, "offx": 0, "incx": 1, "offy": 0, "incy": 1},
         (Out("y"),), ("y",), _axpy_inverse, cost=_l1_cost, guard="chunks",
         doc="Reverse: y -= a*x (constructive, no condition)."),
    Spec("rot", 1, ("s", "d", "cs", "zd"),
         ("x", "y", "c", "s", "n", "offx", "incx", "offy", "incy", "overwrite_x", "overwrite_y"), 4,
         {"offx": 0, "incx": 1, "offy": 0, "incy": 1, "overwrite_x": 0, "overwrite_y": 0},
         (Out("x", "overwrite_x"), Out("y", "overwrite_y")), ("x", "y"), _rot_inverse,
         impossible=lambda ctx: "c**2 + s**2 = 0" if _rot_det(ctx) == 0 else None,
         unsafe=lambda ctx: scalar_unsafe(_rot_det(ctx), "c**2+s**2", ctx), cost=_l1_cost, guard="chunks",
         doc="Reverse applies the inverse rotation (c, -s)/(c**2+s**2); in place only with overwrite_x=1,"
             " overwrite_y=1 (scipy's defaults copy)."),
    Spec("rotm", 1, ("s", "d"),
         ("x", "y", "param", "n", "offx", "incx", "offy", "incy", "overwrite_x", "overwrite_y"), 3,
         {"offx": 0, "incx": 1, "offy": 0, "incy": 1, "overwrite_x": 0, "overwrite_y": 0},
         (Out("x", "overwrite_x"), Out("y", "overwrite_y")), ("x", "y"), _rotm_inverse,
         impossible=_rotm_impossible, unsafe=_rotm_unsafe, cost=_l1_cost, guard="chunks",
         doc="Reverse applies the inverse of H as a flag -1 param."),
]
