"""Blocked algorithms whose variants the predictor ranks, as traces: triangular inverse and triangular Sylvester.

Design note
    Every algorithm is written once against the :class:`~tileblas.policy._calls.BlasCalls` interface, on
    column-major views.  With a :class:`~tileblas.policy._calls.Tracer` (on
    :func:`~tileblas.policy._calls.phantom` operands that own no memory) it only records its calls, which
    is what the predictor evaluates models over; with an :class:`~tileblas.perf._runner.CallRunner` it
    computes (:func:`tileblas.perf.trinv`, :func:`tileblas.perf.sylvester`, in :mod:`tileblas.perf._algorithms`).

    Triangular inverse ``L := L^-1`` (paper section IV-A): the four variants of the paper, traversing L from
    the top left with block size ``b``; the leaf ``L11 := L11^-1`` is LAPACK's unblocked ``dtrti2``.

    Triangular Sylvester ``L X + X U = C`` (section IV-B), L lower and U upper triangular.  Variants are
    derived from loop invariants rather than written by hand.  With X split into quadrants by the
    traversal along the diagonal, the partitioned matrix expression is

        X_TL = Om(L_TL, U_TL, C_TL)
        X_TR = Om(L_TL, U_BR, C_TR - X_TL U_TR)
        X_BL = Om(L_BR, U_TL, C_BL - L_BL X_TL)
        X_BR = Om(L_BR, U_BR, C_BR - L_BL X_TR - X_BL U_TR)

    A loop invariant keeps X_TL solved and picks a state for each other quadrant: TR in {untouched,
    updated, solved}, BL likewise, and for BR any subset of {- L_BL X_TR (needs TR solved),
    - X_BL U_TR (needs BL solved)}: 4 x 4 = 16 invariants, numbered in that order, so that variant 1 is
    the lazy one and variant 16 the eager one, exactly the updates the paper prints for variants 1 and
    16.  Two of the sixteen (4: TR untouched with BR holding - X_BL U_TR, and 10: BL untouched with BR
    holding - L_BL X_TR) cannot be maintained (the block that moves from BR into TR/BL would carry an
    update the invariant forbids), so 14 variants exist; :data:`SYLVESTER_VARIANTS` lists them.  One
    iteration issues exactly the updates that take the 3x3 repartitioning from the invariant "before"
    to the invariant "after": each update is one ``dgemm`` (adjacent targets merged into one call), each
    solve a recursive call ``Om`` that uses the same variant and ends in ``dtrsyl`` once both sides are
    at most ``b``.  Like the paper's code, the traversal goes along the diagonal and then along the
    remaining dimension.

    :data:`SPECS` describes each family for the predictor (variants, flop count, trace);
    :data:`tileblas.perf.ALGORITHMS` adds to each the runner that executes it for measuring.

What it must not touch
    Kernels and timing; the public functions here validate their inputs, the traced internals do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tileblas.policy._calls import BlasCalls, Call, Tracer, phantom

__all__ = [
    "trace_trinv",
    "trace_sylvester",
    "TRINV_VARIANTS",
    "SYLVESTER_VARIANTS",
    "AlgorithmSpec",
    "SPECS",
    "algorithm_spec",
    "sylvester_invariant",
]

TRINV_VARIANTS = (1, 2, 3, 4)


def _check_block(block: int) -> int:
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block must be a positive integer; got {block!r}")
    return int(block)


def _check_variant(variant: int, allowed: tuple[int, ...]) -> int:
    if isinstance(variant, bool) or not isinstance(variant, (int, np.integer)) or int(variant) not in allowed:
        raise ValueError(f"variant must be one of {list(allowed)}; got {variant!r}")
    return int(variant)


# ---------------------------------------------------------------------------------------------------
# Triangular inverse
# ---------------------------------------------------------------------------------------------------


def _trinv_blocked(blas: BlasCalls, a: np.ndarray, variant: int, b: int) -> None:
    n = a.shape[0]
    for k in range(0, n, b):
        bk = min(b, n - k)
        e = k + bk
        l00 = a[:k, :k]
        l10 = a[k:e, :k]
        l11 = a[k:e, k:e]
        l20 = a[e:, :k]
        l21 = a[e:, k:e]
        l22 = a[e:, e:]
        if variant == 1:
            blas.trmm("R", "L", "N", "N", 1.0, l00, l10)
            blas.trsm("L", "L", "N", "N", -1.0, l11, l10)
        elif variant == 2:
            blas.trsm("L", "L", "N", "N", 1.0, l22, l21)
            blas.trsm("R", "L", "N", "N", -1.0, l11, l21)
        elif variant == 3:
            blas.trsm("R", "L", "N", "N", -1.0, l11, l21)
            blas.gemm("N", "N", 1.0, l21, l10, 1.0, l20)
            blas.trsm("L", "L", "N", "N", 1.0, l11, l10)
        else:
            blas.trsm("L", "L", "N", "N", -1.0, l22, l21)
            blas.gemm("N", "N", -1.0, l21, l10, 1.0, l20)
            blas.trmm("R", "L", "N", "N", 1.0, l00, l10)
        blas.trti2("L", "N", l11)


def trace_trinv(n: int, variant: int = 3, block: int = 96) -> list[Call]:
    """The BLAS calls :func:`tileblas.perf.trinv` makes for an ``n x n`` matrix, without computing anything."""
    variant = _check_variant(variant, TRINV_VARIANTS)
    block = _check_block(block)
    t = Tracer()
    _trinv_blocked(t, phantom(n), variant, block)
    return t.calls


# ---------------------------------------------------------------------------------------------------
# Triangular Sylvester equation, variants derived from loop invariants
# ---------------------------------------------------------------------------------------------------

_BR_SETS = {"": frozenset(), "L": frozenset("L"), "U": frozenset("U"), "LU": frozenset("LU")}


def _all_invariants() -> list[tuple[int, int, str]]:
    out = []
    for tr in (0, 1, 2):
        for bl in (0, 1, 2):
            for br in ("", "L", "U", "LU"):
                if "L" in br and tr != 2 or "U" in br and bl != 2:
                    continue
                out.append((tr, bl, br))
    return out


_INVARIANTS = _all_invariants()  # 16 of them, variant v is _INVARIANTS[v - 1]


def _feasible(inv: tuple[int, int, str]) -> bool:
    tr, bl, br = inv
    # the BR block moving into TR (BL) must not carry an update that TR (BL) may not have yet
    return not ("U" in br and tr == 0) and not ("L" in br and bl == 0)


SYLVESTER_VARIANTS = tuple(v for v, inv in enumerate(_INVARIANTS, 1) if _feasible(inv))


def sylvester_invariant(variant: int) -> dict[str, str]:
    """Human-readable loop invariant of Sylvester ``variant`` (quadrant -> state)."""
    variant = _check_variant(variant, tuple(range(1, 17)))
    tr, bl, br = _INVARIANTS[variant - 1]
    names = ("untouched", "updated", "solved")
    parts = {"L": "-L_BL X_TR", "U": "-X_BL U_TR"}
    return {
        "TL": "solved",
        "TR": names[tr],
        "BL": names[bl],
        "BR": " ".join(parts[c] for c in br) if br else "untouched",
        "valid": str(_feasible((tr, bl, br))),
    }


_SOLVED = "solved"


def _target(inv: tuple[int, int, str], top: set[int], left: set[int], i: int, j: int):
    """State of block (i, j) under the invariant for the partition rows ``top`` / cols ``left``."""
    tr, bl, br = inv
    if i in top and j in left:
        return _SOLVED
    if i in top:  # TR
        if tr == 2:
            return _SOLVED
        return frozenset(("U", k) for k in left) if tr == 1 else frozenset()
    if j in left:  # BL
        if bl == 2:
            return _SOLVED
        return frozenset(("L", k) for k in top) if bl == 1 else frozenset()
    s = set()
    if "L" in br:
        s |= {("L", k) for k in top}
    if "U" in br:
        s |= {("U", k) for k in left}
    return frozenset(s)


def _rectangles(cells: list[tuple[int, int]]) -> list[tuple[range, range]]:
    """Cover a set of 3x3 block cells by few rectangles of contiguous rows x contiguous columns."""
    rows: dict[int, list[int]] = {}
    for i, j in cells:
        rows.setdefault(i, []).append(j)
    runs: list[tuple[int, tuple[int, ...]]] = []
    for i in sorted(rows):
        js = sorted(rows[i])
        start = js[0]
        for a, b in zip(js, js[1:] + [None]):
            if b is None or b != a + 1:
                runs.append((i, tuple(range(start, a + 1))))
                if b is not None:
                    start = b
    out: list[tuple[range, range]] = []
    for i, js in runs:
        if out and out[-1][1] == range(js[0], js[-1] + 1) and out[-1][0].stop == i:
            out[-1] = (range(out[-1][0].start, i + 1), out[-1][1])
        else:
            out.append((range(i, i + 1), range(js[0], js[-1] + 1)))
    return out


def _plan(inv: tuple[int, int, str]) -> list[tuple]:
    """Operations of one iteration: ('gemm', kind, k, rows, cols) and ('solve', i, j), in order."""
    before_t, before_l = {0}, {0}
    after_t, after_l = {0, 1}, {0, 1}
    cells = [(i, j) for i in range(3) for j in range(3)]
    full = {(i, j): frozenset({("L", k) for k in range(i)} | {("U", k) for k in range(j)}) for i, j in cells}
    state = {c: _target(inv, before_t, before_l, *c) for c in cells}
    goal = {c: _target(inv, after_t, after_l, *c) for c in cells}
    ops: list[tuple] = []
    while any(state[c] != goal[c] for c in cells):
        todo: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for c in cells:
            if state[c] == _SOLVED or state[c] == goal[c]:
                continue
            want = full[c] if goal[c] == _SOLVED else goal[c]
            assert state[c] <= want, (inv, c, state[c], want)  # feasibility, checked when built
            for kind, k in sorted(want - state[c]):
                src = (k, c[1]) if kind == "L" else (c[0], k)
                if state[src] == _SOLVED:
                    todo.setdefault((kind, k), []).append(c)
        for (kind, k), targets in sorted(todo.items()):
            for rows, cols in _rectangles(targets):
                ops.append(("gemm", kind, k, rows, cols))
            for c in targets:
                state[c] = state[c] | {(kind, k)}
        solved_now = [c for c in cells if goal[c] == _SOLVED and state[c] != _SOLVED and state[c] == full[c]]
        for c in solved_now:
            ops.append(("solve",) + c)
            state[c] = _SOLVED
        if not todo and not solved_now:  # pragma: no cover - would mean an infeasible invariant
            raise RuntimeError(f"invariant {inv} has no loop body")
    return ops


_PLANS = {v: _plan(_INVARIANTS[v - 1]) for v in SYLVESTER_VARIANTS}


def _sylv_blocked(blas: BlasCalls, l: np.ndarray, u: np.ndarray, x: np.ndarray, plan: list[tuple], b: int) -> None:
    m, n = x.shape
    if m <= b and n <= b:
        blas.trsyl(l, u, x)
        return
    pm = pn = 0
    while pm < m or pn < n:
        bm, bn = min(b, m - pm), min(b, n - pn)
        r = (slice(0, pm), slice(pm, pm + bm), slice(pm + bm, m))
        c = (slice(0, pn), slice(pn, pn + bn), slice(pn + bn, n))
        for op in plan:
            if op[0] == "solve":
                _, i, j = op
                xs = x[r[i], c[j]]
                if xs.size:
                    _sylv_blocked(blas, l[r[i], r[i]], u[c[j], c[j]], xs, plan, b)
                continue
            _, kind, k, rows, cols = op
            rs = slice(r[rows.start].start, r[rows.stop - 1].stop)
            cs = slice(c[cols.start].start, c[cols.stop - 1].stop)
            if kind == "L":
                blas.gemm("N", "N", -1.0, l[rs, r[k]], x[r[k], cs], 1.0, x[rs, cs])
            else:
                blas.gemm("N", "N", -1.0, x[rs, c[k]], u[c[k], cs], 1.0, x[rs, cs])
        pm += bm
        pn += bn


def trace_sylvester(m: int, n: int | None = None, variant: int = 1, block: int = 96) -> list[Call]:
    """The BLAS calls :func:`tileblas.perf.sylvester` makes for ``m x n`` X, without computing anything."""
    n = m if n is None else n
    variant = _check_variant(variant, SYLVESTER_VARIANTS)
    block = _check_block(block)
    t = Tracer()
    _sylv_blocked(t, phantom(m), phantom(n), phantom(m, n), _PLANS[variant], block)
    return t.calls


# ---------------------------------------------------------------------------------------------------
# Registry used by the predictor (tileblas.perf.ALGORITHMS adds the runners)
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlgorithmSpec:
    """A family of algorithm variants the predictor can rank.

    Attributes
    ----------
    name : str
        ``"trinv"`` or ``"sylvester"``.
    variants : tuple of int
        Valid variant numbers.
    flops : callable
        ``flops(n) -> float`` for the square problem of size n.
    trace : callable
        ``trace(n, variant, block) -> list[Call]``.
    """

    name: str
    variants: tuple[int, ...]
    flops: Callable[[int], float]
    trace: Callable[[int, int, int], list[Call]]


SPECS: dict[str, AlgorithmSpec] = {
    "trinv": AlgorithmSpec(
        "trinv", TRINV_VARIANTS, lambda n: 2.0 * (n ** 3 / 6 + n ** 2 / 2 + n / 3),
        lambda n, v, b: trace_trinv(n, v, b),
    ),
    "sylvester": AlgorithmSpec(
        "sylvester", SYLVESTER_VARIANTS, lambda n: 2.0 * float(n ** 3 + n ** 2),
        lambda n, v, b: trace_sylvester(n, n, v, b),
    ),
}


def algorithm_spec(name: str) -> AlgorithmSpec:
    """The :class:`AlgorithmSpec` called ``name``; ValueError naming the choices otherwise."""
    try:
        return SPECS[name]
    except KeyError:
        raise ValueError(f"algorithm must be one of {sorted(SPECS)}; got {name!r}") from None
