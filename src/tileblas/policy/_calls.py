"""The BLAS calls that algorithms make, described and traced: what the predictor evaluates models over.

Design note
    An algorithm (:mod:`tileblas.policy._variants`) never calls a kernel directly; it calls methods of a
    :class:`BlasCalls` object (``gemm``, ``trsm``, ``trmm``, ``trti2``, ``trsyl``), always on
    column-major (Fortran-ordered) views.  :class:`Tracer` records each call as a :class:`Call`
    ``(routine, flags, sizes)`` instead of computing, which is what the predictor (paper section IV)
    evaluates models over; the executing side, :class:`tileblas.perf._runner.CallRunner`, runs each call on
    tileblas' own OpenBLAS.  Calls with an empty operand are dropped by both sides, so a trace lists
    exactly the native calls an execution makes.

    The :data:`ROUTINES` table says, per routine, which arguments are flags (model submodels; ``diag`` is
    ignored, as in the paper) and which are sizes (model parameters), the flop count, and the per-size
    polynomial degree the modeler uses.

What it must not touch
    Kernels, timing, and user-input validation: inputs here are trusted (the public algorithm functions
    check).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

__all__ = [
    "Call",
    "RoutineSpec",
    "ROUTINES",
    "BlasCalls",
    "Tracer",
    "phantom",
    "routine_spec",
    "describe_calls",
]


class Call(NamedTuple):
    """One recorded BLAS/LAPACK invocation: routine name, flag letters, size arguments."""

    routine: str
    flags: tuple[str, ...]
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class RoutineSpec:
    """What the modeler and the sampler need to know about one routine.

    Attributes
    ----------
    name : str
        BLAS/LAPACK name, e.g. ``"dtrsm"``.
    flag_names : tuple of str
        Flag arguments that select a submodel (``diag`` is not among them).
    flag_values : tuple of str
        Allowed letters for each flag.
    size_names : tuple of str
        Size arguments: the model's integer parameters.
    degrees : callable
        ``degrees(flags) -> tuple[int, ...]``: highest power of each size in the operation count.
    flops : callable
        ``flops(flags, sizes) -> float``: floating point operations (a multiply-add counts 2).
    """

    name: str
    flag_names: tuple[str, ...]
    flag_values: tuple[str, ...]
    size_names: tuple[str, ...]
    degrees: Callable[[tuple[str, ...]], tuple[int, ...]]
    flops: Callable[[tuple[str, ...], tuple[int, ...]], float]


def _tri_degrees(flags: tuple[str, ...]) -> tuple[int, ...]:
    return (2, 1) if flags[0] == "L" else (1, 2)


def _tri_flops(flags: tuple[str, ...], sizes: tuple[int, ...]) -> float:
    m, n = sizes
    return float(m * m * n if flags[0] == "L" else m * n * n)


ROUTINES: dict[str, RoutineSpec] = {
    "dgemm": RoutineSpec(
        "dgemm", ("transa", "transb"), ("NT", "NT"), ("m", "n", "k"),
        lambda f: (1, 1, 1), lambda f, s: 2.0 * s[0] * s[1] * s[2],
    ),
    "dtrsm": RoutineSpec(
        "dtrsm", ("side", "uplo", "transa"), ("LR", "LU", "NT"), ("m", "n"), _tri_degrees, _tri_flops
    ),
    "dtrmm": RoutineSpec(
        "dtrmm", ("side", "uplo", "transa"), ("LR", "LU", "NT"), ("m", "n"), _tri_degrees, _tri_flops
    ),
    "dsyrk": RoutineSpec(
        "dsyrk", ("uplo", "trans"), ("LU", "NT"), ("n", "k"), lambda f: (2, 1),
        lambda f, s: float(s[0] * (s[0] + 1) * s[1]),
    ),
    "dtrti2": RoutineSpec(
        "dtrti2", ("uplo",), ("LU",), ("n",), lambda f: (3,), lambda f, s: s[0] ** 3 / 3.0 + s[0] ** 2,
    ),
    "dtrsyl": RoutineSpec(
        "dtrsyl", (), (), ("m", "n"), lambda f: (2, 2),
        lambda f, s: float(s[0] * s[1] * (s[0] + s[1])),
    ),
}


def routine_spec(name: str) -> RoutineSpec:
    """The :class:`RoutineSpec` of ``name``; ValueError naming the known routines otherwise."""
    try:
        return ROUTINES[name]
    except KeyError:
        raise ValueError(f"routine must be one of {sorted(ROUTINES)}; got {name!r}") from None


class BlasCalls:
    """Interface of the calls an algorithm makes.  Operands are column-major 2-D float64 views."""

    def gemm(self, transa: str, transb: str, alpha: float, a: np.ndarray, b: np.ndarray,
             beta: float, c: np.ndarray) -> None:
        """c := alpha*op(a)@op(b) + beta*c."""
        raise NotImplementedError

    def trsm(self, side: str, uplo: str, transa: str, diag: str, alpha: float, a: np.ndarray,
             b: np.ndarray) -> None:
        """b := alpha*op(a)^-1 b (side L) or alpha*b op(a)^-1 (side R)."""
        raise NotImplementedError

    def trmm(self, side: str, uplo: str, transa: str, diag: str, alpha: float, a: np.ndarray,
             b: np.ndarray) -> None:
        """b := alpha*op(a) b (side L) or alpha*b op(a) (side R)."""
        raise NotImplementedError

    def syrk(self, uplo: str, trans: str, alpha: float, a: np.ndarray, beta: float, c: np.ndarray) -> None:
        """c := alpha*a a^T + beta*c (trans N), one triangle."""
        raise NotImplementedError

    def trti2(self, uplo: str, diag: str, a: np.ndarray) -> None:
        """a := a^-1 for a triangular a, unblocked (LAPACK dtrti2)."""
        raise NotImplementedError

    def trsyl(self, l: np.ndarray, u: np.ndarray, x: np.ndarray) -> None:
        """x := X solving l X + X u = x, l lower and u upper triangular (LAPACK dtrsyl)."""
        raise NotImplementedError


class Tracer(BlasCalls):
    """Records each call as a :class:`Call` in :attr:`calls` instead of executing it."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def gemm(self, transa, transb, alpha, a, b, beta, c):
        if c.size == 0:
            return
        k = a.shape[1] if transa == "N" else a.shape[0]
        self.calls.append(Call("dgemm", (transa, transb), (c.shape[0], c.shape[1], k)))

    def trsm(self, side, uplo, transa, diag, alpha, a, b):
        if b.size == 0:
            return
        self.calls.append(Call("dtrsm", (side, uplo, transa), b.shape))

    def trmm(self, side, uplo, transa, diag, alpha, a, b):
        if b.size == 0:
            return
        self.calls.append(Call("dtrmm", (side, uplo, transa), b.shape))

    def syrk(self, uplo, trans, alpha, a, beta, c):
        if c.size == 0:
            return
        k = a.shape[1] if trans == "N" else a.shape[0]
        self.calls.append(Call("dsyrk", (uplo, trans), (c.shape[0], k)))

    def trti2(self, uplo, diag, a):
        if a.shape[0] == 0:
            return
        self.calls.append(Call("dtrti2", (uplo,), (a.shape[0],)))

    def trsyl(self, l, u, x):
        if x.size == 0:
            return
        self.calls.append(Call("dtrsyl", (), tuple(x.shape)))


def phantom(m: int, n: int | None = None) -> np.ndarray:
    """A column-major ``m x n`` array that owns no memory (all entries alias one zero): for tracing.

    Its views have the shapes an algorithm slices; a :class:`Tracer` never reads or writes them.
    """
    n = m if n is None else n
    base = np.zeros(1, dtype=np.float64)
    return np.lib.stride_tricks.as_strided(base, shape=(int(m), int(n)), strides=(0, 0), writeable=False)


def describe_calls(calls: list[Call]) -> dict[tuple[str, tuple[str, ...]], int]:
    """Count calls per (routine, flags): which submodels a trace needs."""
    out: dict[tuple[str, tuple[str, ...]], int] = {}
    for c in calls:
        key = (c.routine, c.flags)
        out[key] = out.get(key, 0) + 1
    return out
