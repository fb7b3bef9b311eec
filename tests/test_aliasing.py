"""Outputs that share memory with inputs, in every public entry point of tileblas.blas (issue 37).

Each case lays every array argument of one call over one flat buffer (views at offsets: a column of
``a`` as ``x``, ``c`` one column on from ``a``, ``y`` two elements on from ``x``, the same view twice) and
runs the call on a copy of the buffer in tileblas and in SciPy.  The mathematical answer is the call on
separate copies of every operand (inputs read before the output is written).  tileblas must give it in
every case: where SciPy gives it too (dtrmv with ``x`` a column of ``a``), and where SciPy does not
(BLAS reading an input it has already overwritten: dsyr2k with ``c is a is b``, daxpy with ``y`` one
element on from ``x``).  Results and SciPy's, where they differ from the mathematical answer, are
reported by the test ids, not asserted.

Not covered: outputs that overlap each other (swap, rot, rotm with ``x`` and ``y`` overlapping have no
mathematical answer: two results for the same memory); ``x is y`` in swap is covered (nothing changes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.linalg.blas as sp

import tileblas.blas as tb

PRECISIONS = "sdcz"
DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


class M:
    """A matrix view of the buffer: ``rows x cols`` from element ``off``, in ``order``."""

    def __init__(self, off: int, rows: int, cols: int, order: str = "F") -> None:
        self.off, self.rows, self.cols, self.order = off, rows, cols, order

    def view(self, buf: np.ndarray) -> np.ndarray:
        return buf[self.off: self.off + self.rows * self.cols].reshape((self.rows, self.cols), order=self.order)


class V:
    """A vector view of the buffer: ``n`` elements from ``off`` at ``step``."""

    def __init__(self, off: int, n: int, step: int = 1) -> None:
        self.off, self.n, self.step = off, n, step

    def view(self, buf: np.ndarray) -> np.ndarray:
        return buf[self.off: self.off + (self.n - 1) * self.step + 1: self.step]


class Whole:
    """The whole buffer (offsets and increments given as arguments)."""

    def view(self, buf: np.ndarray) -> np.ndarray:
        return buf


def _cases() -> list[tuple[str, str, tuple[Any, ...], dict[str, Any], Any]]:
    """(routine without prefix, case id, positional arguments, keywords, the triangle to make
    well-conditioned for solves (an M) or None)."""
    out: list[tuple[str, str, tuple[Any, ...], dict[str, Any], Any]] = []

    def add(name, cid, args, kw=None, tri=None):
        out.append((name, cid, args, kw or {}, tri))

    for n in (5, 40):
        nn = n * n
        a, a_c = M(0, n, n), M(0, n, n, "C")
        col0, col1, col2 = V(0, n), V(n, n), V(2 * n, n)
        free = V(2 * nn, n)  # shares nothing with a
        np_ = n * (n + 1) // 2
        ap = V(0, np_)
        # Level 1: y overlapping x
        for name in ("axpy", "copy"):
            extra = {"a": 0.5} if name == "axpy" else {}
            add(name, f"y_is_x-{n}", (V(0, n), V(0, n)), extra)
            add(name, f"y_one_on-{n}", (V(0, n), V(1, n)), extra)
            add(name, f"x_one_on-{n}", (V(1, n), V(0, n)), extra)
            add(name, f"offsets_into_one-{n}", (Whole(), Whole()), {**extra, "n": n, "offx": 0, "offy": 1})
            add(name, f"offsets_back-{n}", (Whole(), Whole()), {**extra, "n": n, "offx": 2, "offy": 0})
        add("swap", f"x_is_y-{n}", (V(0, n), V(0, n)))
        # Level 2: matrix-vector products, y overlapping a or x
        for name in ("gemv", "symv", "hemv"):
            for order, mat in (("F", a), ("C", a_c)):
                add(name, f"y_col_of_a-{order}-{n}", (1.5, mat, free), {"beta": 0.5, "y": col0, "overwrite_y": 1})
                add(name, f"x_is_y_col_of_a-{order}-{n}", (1.5, mat, col1), {"beta": 0.5, "y": col1, "overwrite_y": 1})
                add(name, f"y_one_on_from_x-{order}-{n}", (1.5, mat, V(2 * nn, n)),
                    {"beta": 0.5, "y": V(2 * nn + 1, n), "overwrite_y": 1})
            if name == "gemv":
                add(name, f"trans_y_col_of_a-{n}", (1.5, a, free), {"beta": 0.5, "y": col2, "overwrite_y": 1,
                                                                   "trans": 1})
        for name, k in (("gbmv", 1), ("sbmv", 1), ("hbmv", 1)):
            band = M(0, 3 if name == "gbmv" else 2, n)
            head = (n, n, 1, 1) if name == "gbmv" else (1,)
            add(name, f"y_in_a-{n}", (*head, 1.5, band, free), {"beta": 0.5, "y": V(1, n), "overwrite_y": 1})
            add(name, f"x_is_y-{n}", (*head, 1.5, band, V(3 * n, n)), {"beta": 0.5, "y": V(3 * n, n),
                                                                         "overwrite_y": 1})
        for name in ("spmv", "hpmv"):
            add(name, f"y_in_ap-{n}", (n, 1.5, ap, free), {"beta": 0.5, "y": V(2, n), "overwrite_y": 1})
            add(name, f"x_in_ap_y_on-{n}", (n, 1.5, ap, V(1, n)), {"beta": 0.5, "y": V(3, n), "overwrite_y": 1})
        # triangular products and solves: x overlapping a
        for name in ("trmv", "trsv"):
            tri = a if name == "trsv" else None
            for lower in (0, 1):
                for trans in (0, 1, 2):
                    add(name, f"x_col0-lo{lower}-t{trans}-{n}", (a, col0),
                        {"lower": lower, "trans": trans, "overwrite_x": 1}, tri)
                    add(name, f"x_col2-lo{lower}-t{trans}-{n}", (a, col2),
                        {"lower": lower, "trans": trans, "overwrite_x": 1}, tri)
                add(name, f"C_x_row1-lo{lower}-{n}", (a_c, V(n, n)), {"lower": lower, "overwrite_x": 1},
                    M(0, n, n, "C") if name == "trsv" else None)
        for name in ("tbmv", "tbsv"):
            for lower in (0, 1):
                band = M(0, 2, n)
                add(name, f"x_in_a-lo{lower}-{n}", (1, band, V(1, n)), {"lower": lower, "overwrite_x": 1},
                    ("band", band, lower) if name == "tbsv" else None)
        for name in ("tpmv", "tpsv"):
            for lower in (0, 1):
                add(name, f"x_in_ap-lo{lower}-{n}", (n, ap, V(1, n)), {"lower": lower, "overwrite_x": 1},
                    ("packed", ap, lower, n) if name == "tpsv" else None)
        # rank-1 and rank-2 updates: a overlapping x, y
        for name in ("ger", "geru", "gerc"):
            add(name, f"x_y_cols_of_a-{n}", (1.5, col0, col1), {"a": a, "overwrite_a": 1})
            add(name, f"y_row_of_a-{n}", (1.5, free, V(0, n, n)), {"a": a, "overwrite_a": 1})
        for name in ("syr", "her"):
            for lower in (0, 1):
                add(name, f"x_col_of_a-lo{lower}-{n}", (1.5, col1), {"a": a, "overwrite_a": 1, "lower": lower})
        for name in ("syr2", "her2"):
            for lower in (0, 1):
                add(name, f"x_y_cols_of_a-lo{lower}-{n}", (1.5, col0, col2),
                    {"a": a, "overwrite_a": 1, "lower": lower})
        for name in ("spr", "hpr"):
            add(name, f"x_in_ap-{n}", (n, 1.5, V(2, n), ap), {"overwrite_ap": 1})
        for name in ("spr2", "hpr2"):
            add(name, f"x_y_in_ap-{n}", (n, 1.5, V(2, n), V(4, n), ap), {"overwrite_ap": 1})
        # Level 3: c (b of trmm/trsm) overlapping a, b
        shifted = M(n, n, n)  # one column on from a
        for name in ("gemm", "symm", "hemm", "syr2k", "her2k"):
            add(name, f"c_is_a_is_b-{n}", (1.5, a, a), {"beta": 0.5, "c": a, "overwrite_c": 1})
            add(name, f"c_one_column_on-{n}", (1.5, a, M(3 * nn, n, n)), {"beta": 0.5, "c": shifted,
                                                                          "overwrite_c": 1})
            add(name, f"c_is_b-{n}", (1.5, M(3 * nn, n, n), a), {"beta": 0.5, "c": a, "overwrite_c": 1})
        for name in ("syrk", "herk"):
            add(name, f"c_is_a-{n}", (1.5, a), {"beta": 0.5, "c": a, "overwrite_c": 1})
            add(name, f"c_one_column_on-{n}", (1.5, a), {"beta": 0.5, "c": shifted, "overwrite_c": 1})
        for name in ("trmm", "trsm"):
            tri = a if name == "trsm" else None
            for side in (0, 1):
                add(name, f"b_is_a-side{side}-{n}", (1.5, a, a), {"overwrite_b": 1, "side": side}, tri)
                add(name, f"b_one_column_on-side{side}-{n}", (1.5, a, shifted), {"overwrite_b": 1, "side": side},
                    tri)
    # Level 3 past the small sizes (the split on the pool, the drop-in's dispatch), with flags
    n = 300
    a, shifted = M(0, n, n), M(n, n, n)
    for trans in (0, 1, 2):
        add("gemm", f"c_one_column_on-t{trans}-{n}", (1.5, a, a),
            {"beta": 0.5, "c": shifted, "overwrite_c": 1, "trans_a": trans, "trans_b": 1})
    for name in ("syrk", "syr2k", "herk", "her2k"):
        add(name, f"c_is_a-t1-{n}", (1.5, a) if name.endswith("rk") and "2" not in name else (1.5, a, a),
            {"beta": 0.5, "c": a, "overwrite_c": 1, "trans": 1 if name.startswith("sy") else 2})
    for name in ("symm", "hemm"):
        add(name, f"c_is_b-{n}", (1.5, M(n * n + n, n, n), a), {"beta": 0.5, "c": a, "overwrite_c": 1,
                                                                 "side": 1})
    for name in ("trmm", "trsm"):
        for trans in (0, 1, 2):
            add(name, f"b_one_column_on-t{trans}-{n}", (1.5, a, shifted),
                {"overwrite_b": 1, "trans_a": trans, "lower": 1}, a if name == "trsm" else None)
    return out


_REAL_ONLY = {"symv", "sbmv", "ger", "syr2", "spr2"}
_COMPLEX_ONLY = {"hemv", "hbmv", "hpmv", "geru", "gerc", "her", "her2", "hpr", "hpr2", "hemm", "herk", "her2k"}


def _params() -> list[Any]:
    ps = []
    for name, cid, args, kw, tri in _cases():
        for p in PRECISIONS:
            if (name in _REAL_ONLY and p in "cz") or (name in _COMPLEX_ONLY and p in "sd"):
                continue
            ps.append(pytest.param(p + name, args, kw, tri, id=f"{p}{name}-{cid}"))
    return ps


def _buffer(dt: Any, tri: Any, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    size = 3 * 300 * 300
    buf = rng.uniform(-1, 1, size)
    if np.dtype(dt).kind == "c":
        buf = buf + 1j * rng.uniform(-1, 1, size)
    buf = buf.astype(dt)
    if tri is not None:  # a well-conditioned triangle for the solves: a heavy diagonal
        if isinstance(tri, M):
            np.fill_diagonal(tri.view(buf), 4.0 + tri.rows / 4)
        elif tri[0] == "band":
            band, lower = tri[1], tri[2]
            tri[1].view(buf)[0 if lower else 1, :] = 4.0
        else:  # packed
            _, ap, lower, n = tri
            v = ap.view(buf)
            for j in range(n):  # the diagonal's positions in packed storage
                v[j * (2 * n - j + 1) // 2 if lower else j * (j + 3) // 2] = 4.0
    return buf


def _bind(args: tuple[Any, ...], kw: dict[str, Any], buf: np.ndarray) -> tuple[list[Any], dict[str, Any]]:
    def one(v: Any) -> Any:
        return v.view(buf) if isinstance(v, (M, V, Whole)) else v
    return [one(v) for v in args], {k: one(v) for k, v in kw.items()}


def _separate(args: list[Any], kw: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    def one(v: Any) -> Any:
        return np.array(v, order="K", copy=True) if isinstance(v, np.ndarray) else v
    return [one(v) for v in args], {k: one(v) for k, v in kw.items()}


def _close(got: np.ndarray, want: np.ndarray, p: str) -> bool:
    tol = 2e-3 if p in "sc" else 1e-10
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= tol * (1 + np.abs(want))))


@pytest.mark.parametrize("routine, args, kw, tri", _params())
def test_an_output_sharing_memory_with_an_input_gives_the_mathematical_answer(routine, args, kw, tri):
    p = routine[0]
    buf = _buffer(DT[p], tri)
    rargs, rkw = _separate(*_bind(args, kw, buf.copy()))
    want = getattr(sp, routine)(*rargs, **rkw)  # every operand its own copy
    sb = buf.copy()
    sargs, skw = _bind(args, kw, sb)
    got_sp = getattr(sp, routine)(*sargs, **skw)
    tbuf = buf.copy()
    targs, tkw = _bind(args, kw, tbuf)
    got = getattr(tb, routine)(*targs, **tkw)
    if isinstance(want, tuple):  # swap
        assert all(_close(g, w, p) for g, w in zip(got, want))
        return
    assert _close(got, want, p), (
        f"{routine}: tileblas differs from the answer on separate operands by "
        f"{np.max(np.abs(np.asarray(got) - want)):.3g} (SciPy: "
        f"{'the same answer' if _close(got_sp, want, p) else 'differs too'})")
    # the output is where SciPy puts it: in the buffer (in place) or a new array
    assert np.shares_memory(got, tbuf) == np.shares_memory(got_sp, sb)


def test_dtrmv_with_x_a_column_of_a_as_in_the_issue():
    rng = np.random.default_rng(1)
    a = np.asfortranarray(rng.standard_normal((5, 5)))
    for j in range(5):
        want = np.triu(a) @ a[:, j]
        for blas in (sp, tb):
            aa = a.copy(order="F")
            x = aa[:, j]
            out = blas.dtrmv(aa, x, overwrite_x=1)
            assert np.shares_memory(out, aa)  # written in place
            np.testing.assert_allclose(out, want, rtol=1e-14, atol=1e-14)


# ------------------------------------------------------------------------------------- tileblas.linalg

@pytest.mark.parametrize("fn", ["trmm", "trsm", "recursive_trmm", "recursive_trsm"])
@pytest.mark.parametrize("view", ["a", "a.T", "a[:, :40]"])
def test_linalg_triangular_calls_whose_b_shares_memory_with_a_give_the_separate_answer(fn, view):
    """b (written in place) the triangle itself, its transpose or some of its columns: the answer the
    separate operands give (the transpose gave a relative error of 1.1, silently)."""
    import tileblas.linalg as tl

    rng = np.random.default_rng(2)
    n = 200
    a = np.asfortranarray(np.triu(rng.random((n, n))) + n * np.eye(n))
    b = {"a": a, "a.T": a.T, "a[:, :40]": a[:, :40]}[view]
    ta, tb_ = np.triu(a), b.copy()
    want = ta @ tb_ if fn.endswith("trmm") else np.linalg.solve(ta, tb_)
    getattr(tl, fn)(1.0, a, b)
    assert np.abs(b - want).max() <= 8 * n * np.finfo(float).eps * np.abs(ta).max() * np.abs(tb_).max() * (
        1 if fn.endswith("trmm") else np.linalg.cond(ta))


def test_potrs_with_b_the_factor_gives_the_separate_answer():
    """cho_solve((c, lower), c, overwrite_b=True): the solve read the factor it was overwriting (relative
    error 1e5, silently)."""
    import scipy.linalg as sl

    import tileblas.linalg as tl

    rng = np.random.default_rng(3)
    n = 150
    m = rng.random((n, n))
    c = np.asfortranarray(np.linalg.cholesky(n * np.eye(n) + m @ m.T).T)
    want = sl.cho_solve((c.copy(order="F"), False), c.copy(order="F"))
    x = tl.potrs((c, False), c, overwrite_b=True)
    np.testing.assert_allclose(x, want, rtol=1e-10, atol=1e-12)
