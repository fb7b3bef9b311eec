"""Vectors passed as n-d arrays: tileblas reads and writes them in SciPy's (Fortran) element order.

SciPy's f2py wrappers take any array whose size is large enough for a ``dimension(*)`` argument and
use its elements in Fortran order.  tileblas' fast paths (exact dtype, unit strides) must agree with
that for C-ordered, Fortran-ordered and transposed n-d inputs, and for outputs written in place.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg.blas as sb

import tileblas.blas as tb

DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _layouts(dtype):
    """Named n-d arrays of 12 elements (values distinct, so any reordering shows)."""
    base = (np.arange(1, 13) * (1 + 0.5j if np.dtype(dtype).kind == "c" else 1)).astype(dtype)
    return {
        "C 3x4": base.reshape(3, 4).copy(),
        "F 3x4": np.asfortranarray(base.reshape(3, 4)),
        "C 2x3x2": base.reshape(2, 3, 2).copy(),
        "transposed view": base.reshape(4, 3).T,
        "column 12x1": base.reshape(12, 1).copy(),
    }


def _eps_bound(dtype, ref):
    return 32 * np.finfo(dtype).eps * max(1.0, float(np.max(np.abs(ref))))


def _same(got, ref, dtype):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape
    assert np.max(np.abs(got - ref), initial=0.0) <= _eps_bound(dtype, ref)


@pytest.mark.parametrize("p", list(DT))
@pytest.mark.parametrize("layout", list(_layouts(np.float64)))
@pytest.mark.parametrize("trans", [0, 1])
def test_gemv_x_layout(p, layout, trans):
    dt = DT[p]
    x = _layouts(dt)[layout]
    a = np.arange(1, 12 * 5 + 1, dtype=dt).reshape((5, 12) if trans == 0 else (12, 5)) / 7
    for order in ("C", "F"):
        aa = np.asarray(a, order=order)
        _same(getattr(tb, p + "gemv")(1.0, aa, x, trans=trans), getattr(sb, p + "gemv")(1.0, aa, x, trans=trans), dt)
    sq = np.eye(12, dtype=dt)
    _same(getattr(tb, p + "gemv")(1.0, sq, x), getattr(sb, p + "gemv")(1.0, sq, x), dt)


_REDUCTIONS = [(p, r) for p in DT for r in ("nrm2", "asum", "iamax") + (("dot",) if p in "sd" else ("dotu", "dotc"))]


@pytest.mark.parametrize("p,routine", _REDUCTIONS)
@pytest.mark.parametrize("layout", list(_layouts(np.float64)))
def test_reductions_x_layout(p, layout, routine):
    dt = DT[p]
    names = {"nrm2": {"s": "snrm2", "d": "dnrm2", "c": "scnrm2", "z": "dznrm2"},
             "asum": {"s": "sasum", "d": "dasum", "c": "scasum", "z": "dzasum"},
             "iamax": {q: "i" + q + "amax" for q in DT}}
    if routine in ("dot", "dotu", "dotc"):
        name = p + routine
        xs, ys = _layouts(dt)[layout], _layouts(dt)["C 3x4"][::-1].copy()
        _same(getattr(tb, name)(xs, ys), getattr(sb, name)(xs, ys), dt)
        return
    name = names[routine][p]
    x = _layouts(dt)[layout]
    if routine == "iamax":
        x = x.copy(order="K")
        x.flat[3] = 100  # element 3 in C order, not in Fortran order (unless 1-column)
    got, ref = getattr(tb, name)(x), getattr(sb, name)(x)
    if routine == "iamax":
        assert got == ref
    else:
        _same(got, ref, dt)


@pytest.mark.parametrize("p", list(DT))
@pytest.mark.parametrize("layout", list(_layouts(np.float64)))
@pytest.mark.parametrize("routine", ["axpy", "scal", "copy", "swap"])
def test_inplace_vectors_layout(p, layout, routine):
    """Same return value and same in-place effect on every argument as SciPy."""
    dt = DT[p]
    outs = []
    for mod in (tb, sb):
        x = _layouts(dt)[layout].copy(order="K") if layout != "transposed view" else _layouts(dt)[layout]
        y = _layouts(dt)["F 3x4"][:, ::-1].copy(order="F") * 3
        fn = getattr(mod, p + routine)
        if routine == "axpy":
            r = fn(x, y, a=2.0)
        elif routine == "scal":
            r = fn(2.0, x)
        elif routine == "copy":
            r = fn(x, y)
        else:
            r = fn(x, y)
        outs.append([np.array(v) for v in (r if isinstance(r, tuple) else (r,))] + [x.copy(), y.copy()])
    for g, r in zip(*outs):
        _same(g, r, dt)
