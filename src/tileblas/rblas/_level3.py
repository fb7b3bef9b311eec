"""Level-3 entries of the rblas table (paper, Table 5).

Design note: gemm/symm/hemm/syrk/herk/syr2k/her2k reverse as C := -(alpha/beta)*P + C/beta with the same
routine (P the product; beta = 0 is checkpointed); trmm and trsm reverse each other with 1/alpha.  The
calls go through ``tileblas.blas``, so they run on the tile runtime like any other Level-3 call.
"""

from __future__ import annotations

from tileblas.rblas._level1 import scalar_impossible, scalar_unsafe
from tileblas.rblas._level2 import triangle_impossible, triangle_unsafe
from tileblas.rblas._registry import Ctx, Out, Spec

__all__ = ["SPECS"]

_P4 = ("s", "d", "c", "z")
_PC = ("c", "z")


def _inner(ctx: Ctx) -> float:
    a = ctx.bound.get("a")
    r = ctx.spec.routine
    if r in ("gemm",):
        return float(a.shape[0] if ctx.get("trans_a") else a.shape[1])
    if r in ("syrk", "herk", "syr2k", "her2k"):
        return float(a.shape[0] if ctx.get("trans") else a.shape[1])
    return float(a.shape[0])  # symm/hemm/trmm/trsm: the square operand


def _l3_cost(ctx: Ctx) -> tuple[float, float]:
    out = ctx.spec.outputs[0].name
    c = ctx.bound.get(out)
    size = float(c.size)
    k = _inner(ctx)
    nbytes = (3.0 * size + float(ctx.bound["a"].size)) * ctx.dtype.itemsize
    return 2.0 * size * k, nbytes


def _beta_inverse(ctx: Ctx) -> list:
    alpha, beta = ctx.get("alpha"), ctx.get("beta")
    if ctx.spec.extra.get("real_beta"):
        beta = complex(beta).real
    if ctx.spec.extra.get("real_alpha"):
        alpha = complex(alpha).real
    return [ctx.call(alpha=-alpha / beta, beta=1.0 / beta, overwrite_c=1)]


def _beta(routine: str, prefixes: tuple[str, ...], params: tuple[str, ...], nreq: int,
          herm: bool = False, real_alpha: bool = False) -> Spec:
    return Spec(routine, 3, prefixes, params, nreq,
                {"beta": 0.0, "trans_a": 0, "trans_b": 0, "trans": 0, "side": 0, "lower": 0,
                 "overwrite_c": 0},
                (Out("c", "overwrite_c", 2),), ("c",), _beta_inverse,
                impossible=lambda ctx: scalar_impossible(ctx.get("beta"), "beta", ctx)
                or scalar_impossible(ctx.get("beta"), "beta", ctx, ctx.get("alpha"), "alpha"),
                unsafe=lambda ctx: scalar_unsafe(ctx.get("beta"), "beta", ctx), cost=_l3_cost,
                hermdiag="full" if herm else None, extra={"real_beta": herm, "real_alpha": real_alpha},
                doc="Reverse: C := -(alpha/beta)*P + C/beta (paper Table 5); beta = 0 is checkpointed. "
                    "c is updated in place only with overwrite_c=1." + (
                        " The routine zeroes the imaginary part of C's diagonal; the reverse restores "
                        "it from a saved copy of that diagonal when it was non-zero." if herm else ""))


def _tri_inverse(ctx: Ctx) -> list:
    partner = "trsm" if ctx.spec.routine == "trmm" else "trmm"
    return [ctx.call(partner, alpha=1.0 / ctx.get("alpha"), overwrite_b=1)]


def _tri_impossible(ctx: Ctx) -> str | None:
    return scalar_impossible(ctx.get("alpha"), "alpha", ctx) or triangle_impossible(ctx, bool(ctx.get("diag")))


def _tri_unsafe(ctx: Ctx) -> str | None:
    return scalar_unsafe(ctx.get("alpha"), "alpha", ctx) or triangle_unsafe(ctx, bool(ctx.get("diag")))


def _tri(routine: str) -> Spec:
    partner = "trsm" if routine == "trmm" else "trmm"
    return Spec(routine, 3, _P4, ("alpha", "a", "b", "side", "lower", "trans_a", "diag", "overwrite_b"), 3,
                {"side": 0, "lower": 0, "trans_a": 0, "diag": 0, "overwrite_b": 0},
                (Out("b", "overwrite_b", 2),), ("b",), _tri_inverse, impossible=_tri_impossible,
                unsafe=_tri_unsafe, cost=_l3_cost, extra={"storage": "full"},
                doc=f"Reverse by {partner} with 1/alpha (paper Table 5); alpha = 0 or a singular triangle "
                    "is checkpointed, and auto checkpoints an ill-conditioned one.  b is updated in place "
                    "only with overwrite_b=1.")


_GEMM = ("alpha", "a", "b", "beta", "c", "trans_a", "trans_b", "overwrite_c")
_SYMM = ("alpha", "a", "b", "beta", "c", "side", "lower", "overwrite_c")
_RK = ("alpha", "a", "beta", "c", "trans", "lower", "overwrite_c")
_R2K = ("alpha", "a", "b", "beta", "c", "trans", "lower", "overwrite_c")

SPECS = [
    _beta("gemm", _P4, _GEMM, 3),
    _beta("symm", _P4, _SYMM, 3),
    _beta("hemm", _PC, _SYMM, 3),
    _beta("syrk", _P4, _RK, 2),
    _beta("herk", _PC, _RK, 2, herm=True, real_alpha=True),
    _beta("syr2k", _P4, _R2K, 3),
    _beta("her2k", _PC, _R2K, 3, herm=True),
    _tri("trmm"),
    _tri("trsm"),
]
