"""Level-2 entries of the rblas table (paper, Tables 2-4) and the triangular condition estimate.

Design note: group 1 (y := alpha*A*x + beta*y) reverses as y := -(alpha/beta)*A*x + (1/beta)*y with the
same routine; group 2 (triangular multiply/solve) reverses by the partner routine (trmv <-> trsv ...);
group 3 (rank updates) reverses with -alpha.  The condition estimate of a triangle calls LAPACK
``xtrcon``/``xtpcon``/``xtbcon`` through the library tileblas owns (tileblas.kernels._openblas).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tileblas.rblas._level1 import scalar_impossible, scalar_unsafe
from tileblas.rblas._modes import get_policy
from tileblas.rblas._registry import Ctx, Out, Spec

__all__ = ["SPECS", "triangle_rcond", "triangle_hazards", "triangle_impossible", "triangle_unsafe"]

_P4 = ("s", "d", "c", "z")
_PC = ("c", "z")
_PR = ("s", "d")


# ----------------------------------------------------------------------------------- triangles
def _diag(ctx: Ctx, storage: str, a: Any) -> np.ndarray:
    lower = bool(ctx.get("lower"))
    if storage == "full":
        d = a.diagonal()
    elif storage == "band":
        k = int(ctx.get("k"))
        d = a[0, :] if lower else a[k, :]
    else:  # packed
        n = int(ctx.get("n"))
        j = np.arange(n)
        d = a[(j * n - j * (j - 1) // 2) if lower else (j * (j + 3) // 2)]
    if not isinstance(d, np.ndarray):
        d = d.get()  # CuPy
    return np.abs(np.asarray(d))


def triangle_rcond(prefix: str, storage: str, a: np.ndarray, lower: bool, unit: bool,
                   n: int, k: int = 0) -> float:
    """Reciprocal 1-norm condition estimate of a triangular matrix via LAPACK xTRCON/xTPCON/xTBCON.

    ``storage`` is 'full' (n x n array), 'band' (scipy's (k+1) x n band layout) or 'packed'.
    """
    from tileblas.kernels import _openblas

    lib = _openblas.get_library(1)
    real = "f" if prefix in ("s", "c") else "d"
    rdt = np.float32 if real == "f" else np.float64
    rcond = np.zeros(1, dtype=rdt)
    info = np.zeros(1, dtype=np.int32)
    uplo = "L" if lower else "U"
    dg = "U" if unit else "N"
    cplx = prefix in ("c", "z")
    if cplx:
        work = np.zeros(2 * max(n, 1), dtype=a.dtype)
        iw = np.zeros(max(n, 1), dtype=rdt)
    else:
        work = np.zeros(3 * max(n, 1), dtype=a.dtype)
        iw = np.zeros(max(n, 1), dtype=np.int32)
    if storage == "full":
        if a.flags.f_contiguous:
            af = a
        elif a.flags.c_contiguous:  # A^T is column-major; its 1-norm condition is A's inf-norm one
            af, uplo = a.T, ("U" if lower else "L")
        else:
            af = np.asfortranarray(a)
        lib.call(prefix + "trcon", "vccci" + "ai" + "a" + "aaa", "1", uplo, dg, n, af,
                 max(af.shape[0], 1), rcond, work, iw, info)
    elif storage == "band":
        ab = np.asfortranarray(a)
        lib.call(prefix + "tbcon", "vcccii" + "ai" + "a" + "aaa", "1", uplo, dg, n, k, ab,
                 max(ab.shape[0], 1), rcond, work, iw, info)
    else:
        ap = np.ascontiguousarray(a)
        lib.call(prefix + "tpcon", "vccci" + "a" + "a" + "aaa", "1", uplo, dg, n, ap, rcond, work, iw,
                 info)
    if info[0] != 0:
        raise ValueError(f"{prefix}tr/tp/tbcon failed with info={int(info[0])}")
    return float(rcond[0])


def _storage_of(spec: Spec) -> str:
    return spec.extra.get("storage", "full")


def _tri_arg(ctx: Ctx) -> Any:
    return ctx.get("a") if _storage_of(ctx.spec) != "packed" else ctx.get("ap")


def _tri_n(ctx: Ctx, a: Any) -> int:
    st = _storage_of(ctx.spec)
    if st == "full":
        return int(a.shape[0])
    if st == "band":
        return int(a.shape[1])
    return int(ctx.get("n"))


def triangle_impossible(ctx: Ctx, unit: bool) -> str | None:
    """Why the triangle of ``ctx`` cannot be inverted (a zero or non-finite diagonal entry), else None: O(n)."""
    if unit:
        return None
    d = _diag(ctx, _storage_of(ctx.spec), _tri_arg(ctx))
    if d.size and (d == 0).any():
        return "the triangular matrix is singular (zero on its diagonal)"
    if d.size and not np.isfinite(d).all():
        return "the triangular matrix has non-finite diagonal entries"
    return None


def triangle_unsafe(ctx: Ctx, unit: bool) -> str | None:
    """Why inverting the triangle of ``ctx`` is numerically unsafe (ill-conditioned), else None: the ratio of
    its diagonal's extremes, then LAPACK's condition estimate (O(n**2); only ``auto`` asks)."""
    a = _tri_arg(ctx)
    d = np.ones(1) if unit else _diag(ctx, _storage_of(ctx.spec), a)
    limit = get_policy().cond_limit(ctx.real)
    ratio = float(d.max() / d.min()) if d.size else 1.0
    if ratio > limit:
        return f"ill-conditioned triangle (max/min |diag| = {ratio:.2e} > {limit:.2e})"
    n = _tri_n(ctx, a)
    if isinstance(a, np.ndarray) and n > 0:
        try:
            rc = triangle_rcond(ctx.prefix, _storage_of(ctx.spec), a, bool(ctx.get("lower")), unit, n,
                                int(ctx.get("k") or 0))
        except (AttributeError, OSError, ValueError):  # pragma: no cover - LAPACK symbol missing
            rc = 1.0 / ratio
        if rc == 0 or 1.0 / rc > limit:
            cond = float("inf") if rc == 0 else 1.0 / rc
            return f"ill-conditioned triangle (LAPACK condition estimate {cond:.2e} > {limit:.2e})"
    return None


def triangle_hazards(ctx: Ctx, unit: bool) -> tuple[str | None, str | None]:
    """(impossible, unsafe) reasons for inverting the triangle of ``ctx`` (None when fine)."""
    impossible = triangle_impossible(ctx, unit)
    return impossible, (None if impossible else triangle_unsafe(ctx, unit))


def _unit(ctx: Ctx) -> bool:
    return bool(ctx.get("diag"))


# ----------------------------------------------------------------------------------- costs
def _mat_elems(ctx: Ctx) -> float:
    for name in ("a", "ap"):
        v = ctx.bound.get(name)
        if hasattr(v, "size"):
            return float(v.size)
    return 0.0


def _l2_cost(ctx: Ctx) -> tuple[float, float]:
    m = _mat_elems(ctx)
    out = sum(float(getattr(ctx.bound.get(o.name), "size", 0)) for o in ctx.spec.outputs)
    return 2.0 * m, (m + 3.0 * out) * ctx.dtype.itemsize


# ----------------------------------------------------------------------------------- inverses
def _group1_inverse(ctx: Ctx) -> list:
    alpha, beta = ctx.get("alpha"), ctx.get("beta")
    return [ctx.call(alpha=-alpha / beta, beta=1.0 / beta, overwrite_y=1)]


def _partner(name: str) -> str:
    return name.replace("mv", "@@").replace("sv", "mv").replace("@@", "sv")


def _group2_inverse(ctx: Ctx) -> list:
    return [ctx.call(_partner(ctx.spec.routine), overwrite_x=1)]


def _group3_inverse(ctx: Ctx) -> list:
    alpha = ctx.get("alpha")
    if ctx.spec.extra.get("real_alpha"):
        alpha = complex(alpha).real
    flag = ctx.spec.outputs[0].flag
    return [ctx.call(alpha=-alpha, **{flag: 1})]


def _group1(routine: str, prefixes: tuple[str, ...], params: tuple[str, ...], nreq: int) -> Spec:
    return Spec(routine, 2, prefixes, params, nreq,
                {"beta": 0.0, "offx": 0, "incx": 1, "offy": 0, "incy": 1, "trans": 0, "lower": 0,
                 "overwrite_y": 0},
                (Out("y", "overwrite_y"),), ("y",), _group1_inverse,
                impossible=lambda ctx: scalar_impossible(ctx.get("beta"), "beta", ctx)
                or scalar_impossible(ctx.get("beta"), "beta", ctx, ctx.get("alpha"), "alpha"),
                unsafe=lambda ctx: scalar_unsafe(ctx.get("beta"), "beta", ctx), cost=_l2_cost, group=1,
                guard="vector",
                doc="Reverse: y := -(alpha/beta)*op(A)*x + y/beta (paper Table 2); beta = 0 is "
                    "checkpointed.  y is updated in place only with overwrite_y=1.")


def _group2(routine: str, params: tuple[str, ...], nreq: int, storage: str) -> Spec:
    return Spec(routine, 2, _P4, params, nreq,
                {"offx": 0, "incx": 1, "lower": 0, "trans": 0, "diag": 0, "overwrite_x": 0},
                (Out("x", "overwrite_x"),), ("x",), _group2_inverse,
                impossible=lambda ctx: triangle_impossible(ctx, _unit(ctx)),
                unsafe=lambda ctx: triangle_unsafe(ctx, _unit(ctx)), cost=_l2_cost, group=2,
                guard="vector",
                extra={"storage": storage},
                doc=f"Reverse by {_partner(routine)} (paper Table 3); a singular triangle is checkpointed, "
                    "and auto checkpoints an ill-conditioned one.  x is updated in place only with "
                    "overwrite_x=1.")


def _group3(routine: str, prefixes: tuple[str, ...], params: tuple[str, ...], nreq: int, out: str,
            herm: str | None = None, real_alpha: bool = False) -> Spec:
    flag = "overwrite_" + out
    # ger/geru/gerc: scipy's overwrite_x/overwrite_y default to 1 (they concern inputs only)
    return Spec(routine, 2, prefixes, params, nreq,
                {"lower": 0, "incx": 1, "offx": 0, "incy": 1, "offy": 0, "overwrite_x": 1, "overwrite_y": 1,
                 flag: 0},
                (Out(out, flag, 2 if out == "a" else 1),), (out,), _group3_inverse, cost=_l2_cost,
                hermdiag=herm, group=3, extra={"real_alpha": real_alpha},
                guard="chunks" if routine in ("ger", "geru", "gerc") else "rank",
                doc="Reverse: the same update with -alpha (paper Table 4)." + (
                    " The routine zeroes the imaginary part of the diagonal; the reverse restores it "
                    "from a saved copy of that diagonal (n values) when it was non-zero." if herm else "")
                + f" {out} is updated in place only with {flag}=1.")


_G1_FULL = ("alpha", "a", "x", "beta", "y", "offx", "incx", "offy", "incy")
_G1_BAND = ("k", "alpha", "a", "x", "incx", "offx", "beta", "y", "incy", "offy", "lower", "overwrite_y")
_G1_PACK = ("n", "alpha", "ap", "x", "incx", "offx", "beta", "y", "incy", "offy", "lower", "overwrite_y")
_TR = ("lower", "trans", "diag", "overwrite_x")

SPECS = [
    _group1("gemv", _P4, (*_G1_FULL, "trans", "overwrite_y"), 3),
    _group1("gbmv", _P4, ("m", "n", "kl", "ku", "alpha", "a", "x", "incx", "offx", "beta", "y", "incy",
                          "offy", "trans", "overwrite_y"), 7),
    _group1("hemv", _PC, (*_G1_FULL, "lower", "overwrite_y"), 3),
    _group1("hbmv", _PC, _G1_BAND, 4),
    _group1("hpmv", _PC, _G1_PACK, 4),
    _group1("symv", _PR, (*_G1_FULL, "lower", "overwrite_y"), 3),
    _group1("sbmv", _PR, _G1_BAND, 4),
    _group1("spmv", _P4, _G1_PACK, 4),
    _group2("trmv", ("a", "x", "offx", "incx", *_TR), 2, "full"),
    _group2("tbmv", ("k", "a", "x", "incx", "offx", *_TR), 3, "band"),
    _group2("tpmv", ("n", "ap", "x", "incx", "offx", *_TR), 3, "packed"),
    _group2("trsv", ("a", "x", "incx", "offx", *_TR), 2, "full"),
    _group2("tbsv", ("k", "a", "x", "incx", "offx", *_TR), 3, "band"),
    _group2("tpsv", ("n", "ap", "x", "incx", "offx", *_TR), 3, "packed"),
    _group3("ger", _PR, ("alpha", "x", "y", "incx", "incy", "a", "overwrite_x", "overwrite_y",
                         "overwrite_a"), 3, "a"),
    _group3("geru", _PC, ("alpha", "x", "y", "incx", "incy", "a", "overwrite_x", "overwrite_y",
                          "overwrite_a"), 3, "a"),
    _group3("gerc", _PC, ("alpha", "x", "y", "incx", "incy", "a", "overwrite_x", "overwrite_y",
                          "overwrite_a"), 3, "a"),
    _group3("her", _PC, ("alpha", "x", "lower", "incx", "offx", "n", "a", "overwrite_a"), 2, "a",
            herm="full", real_alpha=True),
    _group3("hpr", _PC, ("n", "alpha", "x", "ap", "incx", "offx", "lower", "overwrite_ap"), 4, "ap",
            herm="packed", real_alpha=True),
    _group3("her2", _PC, ("alpha", "x", "y", "lower", "incx", "offx", "incy", "offy", "n", "a",
                          "overwrite_a"), 3, "a", herm="full"),
    _group3("hpr2", _PC, ("n", "alpha", "x", "y", "ap", "incx", "offx", "incy", "offy", "lower",
                          "overwrite_ap"), 5, "ap", herm="packed"),
    _group3("syr", _P4, ("alpha", "x", "lower", "incx", "offx", "n", "a", "overwrite_a"), 2, "a"),
    _group3("spr", _P4, ("n", "alpha", "x", "ap", "incx", "offx", "lower", "overwrite_ap"), 4, "ap"),
    _group3("syr2", _PR, ("alpha", "x", "y", "lower", "incx", "offx", "incy", "offy", "n", "a",
                          "overwrite_a"), 3, "a"),
    _group3("spr2", _PR, ("n", "alpha", "x", "y", "ap", "incx", "offx", "incy", "offy", "lower",
                          "overwrite_ap"), 5, "ap"),
]
