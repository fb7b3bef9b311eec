"""The blocked algorithms executed: :func:`trinv` and :func:`sylvester`, and the runners that measure them.

Design note
    The algorithms and their variants are written once, in :mod:`tileblas.policy._variants`, against the
    :class:`~tileblas.policy._calls.BlasCalls` interface: the predictor traces them there.  Here they
    compute, with an :class:`~tileblas.perf._runner.CallRunner` on tileblas' OpenBLAS: the public
    :func:`trinv` and :func:`sylvester` (which validate their inputs), and, per family in
    :data:`ALGORITHMS`, a runner that executes one variant on fixed random inputs with the sampler's
    leading dimension (what the benchmark and ``tileblas predict --measure`` time for comparison).

What it must not touch
    Kernels directly (the executor calls them) and model evaluation (the predictor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tileblas.perf._runner import CallRunner
from tileblas.policy._calls import BlasCalls
from tileblas.policy._variants import (
    _PLANS,
    SPECS,
    SYLVESTER_VARIANTS,
    TRINV_VARIANTS,
    AlgorithmSpec,
    _check_block,
    _check_variant,
    _sylv_blocked,
    _trinv_blocked,
    sylvester_invariant,
    trace_sylvester,
    trace_trinv,
)

__all__ = [
    "trinv",
    "sylvester",
    "trace_trinv",
    "trace_sylvester",
    "TRINV_VARIANTS",
    "SYLVESTER_VARIANTS",
    "Algorithm",
    "ALGORITHMS",
    "get_algorithm",
    "sylvester_invariant",
]


def trinv(l: np.ndarray, variant: int = 3, block: int = 96, *, blas: BlasCalls | None = None) -> np.ndarray:
    """Inverse of a lower triangular matrix by one of the four blocked variants of the paper.

    Parameters
    ----------
    l : (n, n) array_like
        Lower triangular matrix (the strictly upper part is ignored).
    variant : {1, 2, 3, 4}
        Algorithmic variant (paper section IV-A).
    block : int
        Block size ``b``.
    blas : BlasCalls, optional
        Where the calls go; default an :class:`CallRunner` on one thread.

    Returns
    -------
    numpy.ndarray
        ``L^-1`` (lower triangular, Fortran order, float64).

    Raises
    ------
    numpy.linalg.LinAlgError
        If a diagonal element is exactly zero.
    """
    variant = _check_variant(variant, TRINV_VARIANTS)
    block = _check_block(block)
    a = np.asarray(l)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"l must be a square 2-D matrix; got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a):
        raise TypeError(f"l must be real; got dtype {a.dtype}")
    work = np.asfortranarray(np.tril(a), dtype=np.float64)  # a new array: the input is never modified
    zero = np.flatnonzero(np.diagonal(work) == 0)
    if zero.size:
        raise np.linalg.LinAlgError(f"l is singular: diagonal element {int(zero[0]) + 1} is exactly zero")
    _trinv_blocked(blas or CallRunner(), work, variant, block)
    return work


def sylvester(l: np.ndarray, u: np.ndarray, c: np.ndarray, variant: int = 1, block: int = 96, *,
              blas: BlasCalls | None = None) -> np.ndarray:
    """Solve the triangular Sylvester equation ``L X + X U = C`` by a blocked variant.

    Parameters
    ----------
    l : (m, m) array_like
        Lower triangular (strictly upper part ignored).
    u : (n, n) array_like
        Upper triangular (strictly lower part ignored).
    c : (m, n) array_like
        Right-hand side.
    variant : int
        One of :data:`SYLVESTER_VARIANTS` (see the module note for the numbering).
    block : int
        Block size.
    blas : BlasCalls, optional
        Where the calls go; default an :class:`CallRunner` on one thread.

    Returns
    -------
    numpy.ndarray
        X, float64, Fortran order.

    Raises
    ------
    SylvesterError
        If ``L[i, i] + U[j, j]`` vanishes (numerically) for some i, j.
    """
    variant = _check_variant(variant, SYLVESTER_VARIANTS)
    block = _check_block(block)
    arrs = []
    for name, a in (("l", l), ("u", u), ("c", c)):
        a = np.asarray(a)
        if a.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix; got shape {a.shape}")
        if not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a):
            raise TypeError(f"{name} must be real; got dtype {a.dtype}")
        arrs.append(a)
    la, ua, ca = arrs
    if la.shape[0] != la.shape[1] or ua.shape[0] != ua.shape[1]:
        raise ValueError(f"l and u must be square; got shapes {la.shape} and {ua.shape}")
    if ca.shape != (la.shape[0], ua.shape[0]):
        raise ValueError(f"c must have shape {(la.shape[0], ua.shape[0])}; got {ca.shape}")
    lw = np.asfortranarray(np.tril(la), dtype=np.float64)
    uw = np.asfortranarray(np.triu(ua), dtype=np.float64)
    x = np.array(ca, dtype=np.float64, order="F", copy=True)
    _sylv_blocked(blas or CallRunner(), lw, uw, x, _PLANS[variant], block)
    return x


# ---------------------------------------------------------------------------------------------------
# Runners (for measuring) and the registry used by the CLI and the benchmark
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Algorithm(AlgorithmSpec):
    """An :class:`~tileblas.policy._variants.AlgorithmSpec` (name, variants, flops, trace: what the
    predictor ranks) with the runner that executes one variant for measuring.

    Attributes
    ----------
    make_runner : callable
        ``make_runner(n, variant, block, rng, threads=1) -> (prepare, run)``: ``prepare()`` restores fixed
        random inputs, ``run()`` executes once (for measuring).  The operands are views with the
        sampler's fixed leading dimension, as the models were sampled (the paper's protocol).
    """

    make_runner: Callable[..., tuple[Callable[[], None], Callable[[], None]]]


def _padded(n: int) -> np.ndarray:
    """An n x n column-major view with the sampler's fixed leading dimension (as the models were sampled)."""
    from tileblas.perf._sampler import leading_dimension

    return np.zeros((leading_dimension(n), n), order="F")[:n]


def _trinv_runner(n: int, variant: int, block: int, rng: np.random.Generator, threads: int = 1):
    base = np.asfortranarray(np.tril(rng.standard_normal((n, n))) + n * np.eye(n))
    work = _padded(n)
    ex = CallRunner(threads)

    def prepare() -> None:
        work[...] = base

    def run() -> None:
        _trinv_blocked(ex, work, variant, block)

    return prepare, run


def _sylv_runner(n: int, variant: int, block: int, rng: np.random.Generator, threads: int = 1):
    lw, uw, x = _padded(n), _padded(n), _padded(n)
    lw[...] = np.tril(rng.standard_normal((n, n))) + n * np.eye(n)
    uw[...] = np.triu(rng.standard_normal((n, n))) + n * np.eye(n)
    base = np.asfortranarray(rng.standard_normal((n, n)))
    ex = CallRunner(threads)
    plan = _PLANS[variant]

    def prepare() -> None:
        x[...] = base

    def run() -> None:
        _sylv_blocked(ex, lw, uw, x, plan, block)

    return prepare, run


_RUNNERS = {"trinv": _trinv_runner, "sylvester": _sylv_runner}

ALGORITHMS: dict[str, Algorithm] = {
    name: Algorithm(spec.name, spec.variants, spec.flops, spec.trace, _RUNNERS[name]) for name, spec in SPECS.items()
}


def get_algorithm(name: str) -> Algorithm:
    """The :class:`Algorithm` called ``name``; ValueError naming the choices otherwise."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}; got {name!r}") from None
