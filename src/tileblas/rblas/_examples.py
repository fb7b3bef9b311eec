"""Argument sets for every rblas routine, with the paper's data (values a + R*b, R uniform in [0, 1)).

Design note: used by the benchmark (``tileblas rblas bench``) and the demo; the unit tests build their own
arguments independently.  Every set makes the routine update its outputs in place (contiguous arrays of
the right dtype, ``overwrite_*=1``), so that there is something to reverse.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tileblas.rblas._registry import DTYPE_OF_PREFIX

__all__ = ["build", "cancelling", "ADDITIVE"]

_REAL_SCALARS = {("her", "alpha"), ("hpr", "alpha"), ("herk", "alpha"), ("herk", "beta"),
                 ("her2k", "beta"), ("rot", "c"), ("rot", "s")}


def _vals(rng: np.random.Generator, dt: np.dtype, shape: Any, a: float, b: float) -> np.ndarray:
    v = a + b * rng.random(shape)
    if dt.kind == "c":
        v = v + 1j * (a + b * rng.random(shape))
    return v.astype(dt)


def build(routine: str, prefix: str, n: int, rng: np.random.Generator | None = None,
          a: float = 1000.0, b: float = 1000.0, alpha: float = 1.5, beta: float = 0.75,
          k: int = 2) -> tuple[tuple, dict[str, Any]]:
    """(args, kwargs) for an in-place call of ``prefix + routine`` on size ``n`` with values a + R*b.

    Scalars are ``alpha`` (and ``a`` of axpy/scal) and ``beta``; they are complex (x + x/4 j) in complex
    precision except where BLAS takes a real scalar.  Band routines use ``k`` (sub/super)diagonals.
    """
    rng = rng or np.random.default_rng(0)
    dt = DTYPE_OF_PREFIX[prefix]

    def S(p: str, v: float) -> Any:
        if dt.kind != "c" or (routine, p) in _REAL_SCALARS or prefix in ("cs", "zd"):
            return float(v)
        return complex(v, v / 4)

    def V(m: int) -> np.ndarray:
        return _vals(rng, dt, m, a, b)

    def M(r: int, c: int) -> np.ndarray:
        return np.asfortranarray(_vals(rng, dt, (r, c), a, b))

    x, y = V(n), V(n)
    npk = n * (n + 1) // 2
    if routine in ("copy", "swap"):
        return (x, y), {}
    if routine == "scal":
        return (S("a", alpha), x), ({"overwrite_x": 1} if prefix in ("cs", "zd") else {})
    if routine == "axpy":
        return (x, y), {"a": S("a", alpha)}
    if routine == "rot":
        return (x, y, 0.6, 0.8), {"overwrite_x": 1, "overwrite_y": 1}
    if routine == "rotm":
        return (x, y, np.array([-1.0, 1.1, 0.2, 0.3, 0.9], dtype=dt)), {"overwrite_x": 1, "overwrite_y": 1}
    g1 = {"beta": S("beta", beta), "y": y, "overwrite_y": 1}
    if routine in ("gemv", "symv", "hemv"):
        return (S("alpha", alpha), M(n, n), x), g1
    if routine == "gbmv":
        return (n, n, k, k, S("alpha", alpha), M(2 * k + 1, n), x), g1
    if routine in ("hbmv", "sbmv"):
        return (k, S("alpha", alpha), M(k + 1, n), x), g1
    if routine in ("hpmv", "spmv"):
        return (n, S("alpha", alpha), V(npk), x), g1
    if routine in ("trmv", "trsv"):
        return (M(n, n), x), {"overwrite_x": 1}
    if routine in ("tbmv", "tbsv"):
        return (k, M(k + 1, n), x), {"overwrite_x": 1}
    if routine in ("tpmv", "tpsv"):
        return (n, V(npk), x), {"overwrite_x": 1}
    if routine in ("ger", "geru", "gerc"):
        return (S("alpha", alpha), x, y), {"a": M(n, n), "overwrite_a": 1}
    if routine in ("her", "syr"):
        return (S("alpha", alpha), x), {"a": M(n, n), "overwrite_a": 1}
    if routine in ("her2", "syr2"):
        return (S("alpha", alpha), x, y), {"a": M(n, n), "overwrite_a": 1}
    if routine in ("hpr", "spr"):
        return (n, S("alpha", alpha), x, V(npk)), {"overwrite_ap": 1}
    if routine in ("hpr2", "spr2"):
        return (n, S("alpha", alpha), x, y, V(npk)), {"overwrite_ap": 1}
    l3 = {"beta": S("beta", beta), "c": M(n, n), "overwrite_c": 1}
    if routine in ("gemm", "symm", "hemm", "syr2k", "her2k"):
        return (S("alpha", alpha), M(n, n), M(n, n)), l3
    if routine in ("syrk", "herk"):
        return (S("alpha", alpha), M(n, n)), l3
    if routine in ("trmm", "trsm"):
        return (S("alpha", alpha), M(n, n), M(n, n)), {"overwrite_b": 1}
    raise KeyError(f"no example arguments for {prefix}{routine}")


ADDITIVE = frozenset({"axpy", "gemv", "gbmv", "hemv", "hbmv", "hpmv", "symv", "sbmv", "spmv", "ger", "geru",
                      "gerc", "her", "hpr", "her2", "hpr2", "syr", "spr", "syr2", "spr2", "gemm", "symm",
                      "hemm", "syrk", "herk", "syr2k", "her2k"})


def cancelling(routine: str, prefix: str, n: int, rng: np.random.Generator | None = None
               ) -> tuple[tuple, dict[str, Any]]:
    """Arguments whose update nearly cancels the old output: out := -U/beta * (1 + 1e-9*g) where U is what
    the routine adds (computed by the routine itself on a zero output; beta = 1 where there is none), for
    every additive routine (:data:`ADDITIVE`).  The hardest case for inverse computation: the new values
    keep only a few bits of the old ones."""
    from tileblas.rblas import SPEC_OF
    from tileblas.rblas._registry import bind, lookup

    if routine not in ADDITIVE:
        raise KeyError(f"no cancelling example for {routine} (not an additive update)")
    rng = rng or np.random.default_rng(1)
    args, kw = build(routine, prefix, n, rng, a=1.0, b=1.0)
    name = prefix + routine
    spec = SPEC_OF[name]
    bound = bind(spec, name, args, kw)
    out = spec.outputs[0].name
    probe = dict(bound)
    probe[out] = np.zeros_like(bound[out], order="K")
    u = lookup(name)(**probe)
    beta = bound.get("beta", 1.0) if routine != "axpy" else 1.0
    if spec.extra.get("real_beta"):
        beta = complex(beta).real
    pert = 1 + 1e-9 * rng.standard_normal(u.shape)
    bound[out][...] = (-(u / beta) * pert).astype(bound[out].dtype)
    return args, kw
