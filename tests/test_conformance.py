"""Property-based conformance of :mod:`tileblas.blas` against :mod:`scipy.linalg.blas`.

Every Level 1/2/3 routine that both modules export is called with the same randomly drawn arguments on
both sides: precision (the routine's own, and operands of other dtypes), flags (trans/side/lower/diag/
overwrite_*), sizes (0, 1, odd sizes, sizes around the tile sizes and the runtime's small-call
crossover), C and Fortran order, strided and negative-stride views, an output aliased with an input,
read-only operands, scalars of several Python/NumPy types, and now and then an invalid argument.  The
Level-3 routines also run on runtimes with small tile sizes, so that the tiled path is exercised at
sizes that stay cheap.

Each example is built twice from the same recipe (same values, same layouts), once per library, and the
two calls must agree on:

* error or not: where SciPy raises, tileblas raises ValueError or TypeError; where an argument was drawn
  invalid and SciPy computes anyway, tileblas may instead raise ValueError/TypeError (the deliberate
  differences listed in the docstrings of tileblas.blas._level1/_blas2/_blas3);
* values, within a small multiple of ``K * eps * S``, where ``K`` is the accumulation length and ``S`` a
  bound on the magnitude of the summed terms (``|alpha| max|A| max|B| + |beta| max|C|`` style; for
  solves ``max|X| max|A|`` on well-conditioned triangles);
* type, dtype, shape and memory order of what is returned;
* in-place behaviour: a returned array is the caller's object exactly when SciPy's is, and shares memory
  with an input exactly when SciPy's does (tileblas copies a read-only *view* that SciPy would write:
  a documented difference);
* inputs that SciPy leaves unchanged are unchanged, inputs SciPy writes hold the same values.

An aliased output (``c`` that *is* ``a``) is given to SciPy as an independent copy with the same values
and layout, since BLAS itself gives garbage when its output overlaps an input; tileblas must give the
mathematically correct result.

Example counts: the ``tileblas-default`` hypothesis profile keeps the run near a minute on two cores;
``TILEBLAS_HYPOTHESIS_PROFILE=thorough`` runs ten times as many.  ``pytest --hypothesis-show-statistics``
prints per-test counts; the module also prints its total at the end.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import scipy.linalg.blas as sblas
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tileblas
import tileblas.blas as tblas
from tileblas.runtime import _runtime as _rt_mod

_EXAMPLES = 50  # per routine; the thorough profile runs ten times as many
# The default profile is derandomized (the same examples on every run, so CI is reproducible); the
# thorough profile explores new random examples on each run (TILEBLAS_HYPOTHESIS_PROFILE=thorough).
settings.register_profile("tileblas-default", max_examples=_EXAMPLES, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=10 * _EXAMPLES, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_PROFILE = settings.get_profile(os.environ.get("TILEBLAS_HYPOTHESIS_PROFILE", "tileblas-default"))

_SKIP = {"get_blas_funcs", "find_best_blas_type"}
ROUTINES = [n for n in tblas.__all__ if hasattr(sblas, n) and n not in _SKIP and callable(getattr(sblas, n))]

SIZES = (1, 2, 3, 7, 16, 31, 64, 65, 127, 129, 191, 193, 256, 257)
_DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}

_COUNT = {"examples": 0, "sp_raised": 0, "tb_only_raised": 0, "compared": 0}


def _family(name: str) -> tuple[str, np.dtype]:
    """(family, dtype of the routine) from a SciPy BLAS name."""
    special = {"scnrm2": ("nrm2", "c"), "dznrm2": ("nrm2", "z"), "scasum": ("asum", "c"),
               "dzasum": ("asum", "z"), "csrot": ("rot", "c"), "zdrot": ("rot", "z"),
               "csscal": ("sscal", "c"), "zdscal": ("sscal", "z"), "isamax": ("amax", "s"),
               "idamax": ("amax", "d"), "icamax": ("amax", "c"), "izamax": ("amax", "z")}
    if name in special:
        fam, p = special[name]
    else:
        fam, p = name[1:], name[0]
    return fam, np.dtype(_DT[p])


# --------------------------------------------------------------------------------------------- recipes
class Arr:
    """Recipe of one array argument: logical shape, dtype, layout, read-only flag, value transform."""

    def __init__(self, shape, dtype, layout="F", readonly=False, fill=None):
        self.shape, self.dtype, self.layout, self.readonly, self.fill = tuple(shape), np.dtype(dtype), \
            layout, readonly, fill

    def make(self, rng: np.random.Generator) -> np.ndarray:
        if self.dtype.kind in "iu":
            v = rng.integers(-3, 4, self.shape).astype(self.dtype)
        else:
            v = rng.standard_normal(self.shape)
            if self.dtype.kind == "c":
                v = v + 1j * rng.standard_normal(self.shape)
            if self.fill is not None:
                v = self.fill(v)
            v = v.astype(self.dtype)
        out = _layout(v, self.layout)
        if self.readonly:
            out.setflags(write=False)
        return out

    def __repr__(self):
        ro = ",ro" if self.readonly else ""
        return f"Arr({self.shape},{self.dtype},{self.layout}{ro})"


class Alias:
    """The argument is the very object given for argument ``target`` (for SciPy: a fresh copy of it)."""

    def __init__(self, target: str):
        self.target = target

    def __repr__(self):
        return f"Alias({self.target})"


def _layout(v: np.ndarray, layout: str) -> np.ndarray:
    if v.ndim == 1:
        n = v.shape[0]
        if layout == "step":
            base = np.zeros(2 * n, v.dtype)
            base[::2] = v
            return base[::2]
        if layout == "rev":
            return v[::-1].copy()[::-1]
        if layout == "revstep":
            base = np.zeros(2 * n, v.dtype)
            base[::-2] = v
            return base[::-2]
        return v.copy()
    m, n = v.shape
    if layout == "C":
        return np.ascontiguousarray(v)
    if layout == "ld":  # column-major with a leading dimension larger than the row count
        base = np.zeros((m + 3, n), v.dtype, order="F")
        base[:m] = v
        return base[:m]
    if layout == "step":
        base = np.zeros((2 * m, 2 * n), v.dtype, order="F")
        base[::2, ::2] = v
        return base[::2, ::2]
    if layout == "rev":
        return np.asfortranarray(v[::-1])[::-1]
    return np.asfortranarray(v)


def _solve_fill_dense(v):
    """Well-conditioned triangle: off-diagonal entries scaled by 1/n, diagonal moved away from 0."""
    n = v.shape[0]
    v = v / max(n, 1)
    d = np.arange(n)
    v[d, d] = (1.5 + np.abs(v[d, d])) * np.where(np.real(v[d, d]) < 0, -1, 1)
    return v


def _solve_fill_band(k, lower):
    def fill(v):
        v = v / max(k + 1, 1)
        r = 0 if lower else k
        v[r] = (1.5 + np.abs(v[r])) * np.where(np.real(v[r]) < 0, -1, 1)
        return v
    return fill


def _solve_fill_packed(n, lower):
    def fill(v):
        v = v / max(n, 1)
        j = np.arange(n)
        idx = j * n - j * (j - 1) // 2 if lower else j * (j + 1) // 2 + j
        v[idx] = (1.5 + np.abs(v[idx])) * np.where(np.real(v[idx]) < 0, -1, 1)
        return v
    return fill


class Draw:
    """Helpers that draw one routine's arguments from a hypothesis ``data`` object."""

    def __init__(self, data, dt: np.dtype, big: bool = True):
        self.data, self.dt, self.big = data, dt, big
        self.dubious: list[str] = []  # invalid arguments drawn on purpose

    def __call__(self, strategy, label=None):
        return self.data.draw(strategy, label=label)

    def size(self, label, big=True):
        small = st.integers(0, 8)
        if big and self.big:
            return self(st.one_of(small, small, st.sampled_from(SIZES)), label)
        return self(st.one_of(small, st.sampled_from((16, 17, 31, 33))), label)

    def bad(self, label, choices):
        """None (usually), or which argument to make invalid."""
        if self(st.integers(0, 9), label + "?") == 0:
            c = self(st.sampled_from(choices), label)
            self.dubious.append(c)
            return c
        return None

    def flag(self, label, values, bad_values=(3, -1)):
        if self(st.integers(0, 15), label + "?") == 0:
            self.dubious.append(label)
            return self(st.sampled_from(bad_values), label)
        return self(st.sampled_from(values), label)

    def dtype_of(self, label, out=False):
        dt = self.dt
        if self(st.integers(0, 7), label + ".dt?") != 0:
            return dt
        others = [np.float32, np.float64, np.complex64, np.complex128, np.int64]
        return np.dtype(self(st.sampled_from(others), label + ".dt"))

    def arr(self, label, shape, out=False, fill=None, dtype=None):
        ndim = len(shape)
        layouts = ["F"] * 4 + (["step", "rev", "revstep"] if ndim == 1 else ["C", "C", "ld", "step", "rev"])
        if ndim == 1:
            layouts[1] = "C"
        layout = self(st.sampled_from(layouts), label + ".layout")
        ro = self(st.integers(0, 9), label + ".ro") == 0
        dt = dtype if dtype is not None else self.dtype_of(label, out)
        if fill is not None and dt.kind in "iu":
            dt = self.dt
        return Arr(shape, dt, layout, ro, fill)

    def scalar(self, label, real=False, nonzero=False):
        vals = [1.0, -1.0, 0.5, 2.5, -1.25] + ([] if nonzero else [0.0])
        v = self(st.sampled_from(vals), label)
        if self.dt.kind == "c" and not real:
            v = complex(v, self(st.sampled_from([0.0, 0.5, -2.0]), label + ".im"))
        kind = self(st.sampled_from(["py", "py", "py", "int", "np32", "np64", "0d", "list", "cplx"]),
                    label + ".type")
        if kind == "int" and float(np.real(v)) == int(np.real(v)) and np.imag(v) == 0:
            return int(np.real(v))
        if kind == "np32":
            return np.complex64(v) if isinstance(v, complex) else np.float32(v)
        if kind == "np64":
            return np.complex128(v) if isinstance(v, complex) else np.float64(v)
        if kind == "0d":
            return np.array(v)
        if kind == "list":
            return [v]
        if kind == "cplx" and not isinstance(v, complex) and self.dt.kind != "c" and not real:
            return complex(v, 0.75)  # a real routine keeps the real part
        return v

    def ow(self, label):
        return self(st.sampled_from([0, 1, 1, True, False]), label)

    def vec(self, label, n, out=False, inc_choices=(1, 1, 1, 2, -1, -2, 3), off=True):
        """(recipe, n, offset, increment) of a strided vector holding ``n`` elements."""
        inc = self(st.sampled_from(inc_choices), label + ".inc")
        o = self(st.sampled_from([0, 0, 0, 1, 2]), label + ".off") if off else 0
        extra = self(st.sampled_from([0, 0, 1, 2]), label + ".extra")
        length = o + (max(n, 1) - 1) * abs(inc) + 1 + extra
        return self.arr(label, (length,), out=out), o, inc


# ------------------------------------------------------------------------------------------- builders
# A builder returns (positional args, keyword args, K, terms, kind): terms are tuples of argument names
# (or "@out" for the result) whose max-abs values multiply into one term of the magnitude bound S.

def _l1_pair(D, fam, dt):
    n = D.size("n")
    x, offx, incx = D.vec("x", n)
    y, offy, incy = D.vec("y", n)
    kw: dict = {}
    if D(st.booleans(), "n.given"):
        kw["n"] = n
    if offx or D(st.booleans(), "offx.given"):
        kw["offx"] = offx
    if incx != 1:
        kw["incx"] = incx
    if offy:
        kw["offy"] = offy
    if incy != 1:
        kw["incy"] = incy
    if D(st.integers(0, 5), "alias") == 0 and fam in ("axpy", "copy", "swap", "rot", "rotm", "dot", "dotu", "dotc"):
        y = Alias("@0")
        for key in ("offy", "incy"):
            kw.pop(key, None)
        if offx:
            kw["offy"] = offx
        if incx != 1:
            kw["incy"] = incx
    b = D.bad("bad", ["n_big", "n_neg", "offx", "incx0", "offy", "incy0"])
    if b == "n_big":
        kw["n"] = n + 3 + D(st.integers(0, 4), "nb")
    elif b == "n_neg":
        kw["n"] = -D(st.integers(1, 3), "nn")
    elif b == "offx":
        kw["offx"] = D(st.sampled_from([-1, 10**4]), "ob")
    elif b == "incx0":
        kw["incx"] = 0
    elif b == "offy":
        kw["offy"] = D(st.sampled_from([-1, 10**4]), "ob")
    elif b == "incy0":
        kw["incy"] = 0
    return x, y, kw, n


def b_l1(D, fam, dt):
    if fam == "rotg":
        a, b = D.scalar("a"), D.scalar("b")
        return [a, b], {}, 1, [("@out",), ("a",), ("b",)], "rotg"
    if fam == "rotmg":
        d1 = D(st.sampled_from([0.5, 1.0, 2.0, 4096.0 ** 2, 1e-8]), "d1")
        d2 = D(st.sampled_from([0.5, 1.0, 3.0, -1.0, 1e-8]), "d2")
        x1, y1 = D.scalar("x1", real=True), D.scalar("y1", real=True)
        return [d1, d2, x1, y1], {}, 4, [("@out",)], "rotmg"
    if fam in ("nrm2", "asum", "amax"):
        n = D.size("n")
        x, offx, incx = D.vec("x", n)
        kw: dict = {}
        if D(st.booleans(), "n.given"):
            kw["n"] = n
        if offx:
            kw["offx"] = offx
        if incx != 1:
            kw["incx"] = incx
        b = D.bad("bad", ["n_big", "offx", "incx0", "n_neg"])
        if b == "n_big":
            kw["n"] = n + 5
        elif b == "offx":
            kw["offx"] = -1
        elif b == "incx0":
            kw["incx"] = 0
        elif b == "n_neg":
            kw["n"] = -1
        return [x], kw, max(n, 1), [("x",)], fam
    if fam in ("scal", "sscal"):
        n = D.size("n")
        x, offx, incx = D.vec("x", n, out=True)
        a = D.scalar("a", real=(fam == "sscal"))
        kw = {}
        if D(st.booleans(), "n.given"):
            kw["n"] = n
        if offx:
            kw["offx"] = offx
        if incx != 1:
            kw["incx"] = incx
        if fam == "sscal" and D(st.booleans(), "ow?"):
            kw["overwrite_x"] = D.ow("overwrite_x")
        b = D.bad("bad", ["n_big", "incx0"])
        if b == "n_big":
            kw["n"] = n + 5
        elif b == "incx0":
            kw["incx"] = 0
        return [a, x], kw, 1, [("a", "x")], fam
    x, y, kw, n = _l1_pair(D, fam, dt)
    K = max(n, 1)
    if fam == "axpy":
        if D(st.booleans(), "a.given"):
            kw["a"] = D.scalar("alpha")
        return [x, y], kw, 1, [("a", "x"), ("y",), ("x",)], fam
    if fam in ("copy", "swap"):
        return [x, y], kw, 1, [("x",), ("y",)], fam
    if fam in ("dot", "dotu", "dotc"):
        return [x, y], kw, K, [("x", "y")], fam
    if fam == "rot":
        c = D.scalar("c", real=True)
        s = D.scalar("s", real=(dt.name in ("complex64", "complex128")) or dt.kind != "c")
        for o in ("overwrite_x", "overwrite_y"):
            if D(st.booleans(), o + "?"):
                kw[o] = D.ow(o)
        return [x, y, c, s], kw, 2, [("c", "x"), ("s", "y"), ("c", "y"), ("s", "x")], fam
    if fam == "rotm":
        flag = D(st.sampled_from([-2.0, -1.0, 0.0, 1.0]), "flag")
        param = Arr((5,), dt, "F", False, fill=lambda v: np.concatenate([[flag], v[1:]]))
        for o in ("overwrite_x", "overwrite_y"):
            if D(st.booleans(), o + "?"):
                kw[o] = D.ow(o)
        return [x, y, param], kw, 2, [("param", "x"), ("param", "y"), ("x",), ("y",)], fam
    raise AssertionError(fam)


def _vec_kw(kw, label, off, inc, pos_off=True):
    if off:
        kw["off" + label] = off
    if inc != 1:
        kw["inc" + label] = inc


def b_l2(D, fam, dt):
    kw: dict = {}
    if fam in ("gemv", "gbmv", "symv", "hemv", "sbmv", "hbmv", "spmv", "hpmv"):
        alpha, beta = D.scalar("alpha"), D.scalar("beta")
        trans = 0
        if fam in ("gemv", "gbmv"):
            m, n = D.size("m"), D.size("n")
            trans = D.flag("trans", (0, 1, 2) if fam == "gemv" else (0, 1, 2))
            if trans:
                kw["trans"] = trans
        else:
            n = D.size("n")
            m = n
        alias = fam in ("gemv", "symv", "hemv") and D(st.integers(0, 5), "alias") == 0
        if alias and fam == "gemv":
            m = n
        lx, ly = (n, m) if trans == 0 else (m, n)
        x, offx, incx = D.vec("x", lx)
        _vec_kw(kw, "x", offx, incx)
        ygiven = D(st.integers(0, 3), "y.given") != 0
        if alias:
            y = Alias("@2")
            _vec_kw(kw, "y", offx, incx)
            ygiven = True
        elif ygiven:
            y, offy, incy = D.vec("y", ly, out=True)
            _vec_kw(kw, "y", offy, incy)
        else:
            y = None
            if D(st.booleans(), "incy.none"):
                kw["incy"] = D(st.sampled_from([1, 2, -1]), "incy")
        if ygiven:
            kw["y"] = y
            kw["beta"] = beta
            if D(st.booleans(), "ow?"):
                kw["overwrite_y"] = D.ow("overwrite_y")
        elif D(st.booleans(), "beta.given"):
            kw["beta"] = beta
        if fam not in ("gemv", "gbmv"):
            lower = D.flag("lower", (0, 1), (2,))
            if lower:
                kw["lower"] = lower
        if fam == "gemv":
            a = D.arr("a", (m, n))
            args = [alpha, a, x]
            K = max(n, m, 1)
        elif fam in ("symv", "hemv"):
            a = D.arr("a", (n, n))
            args = [alpha, a, x]
            K = max(n, 1)
        elif fam == "gbmv":
            kl, ku = D(st.integers(0, 3), "kl"), D(st.integers(0, 3), "ku")
            b = D.bad("bad", ["kl", "rows"])
            rows = kl + ku + 1 if b != "rows" else kl + ku
            if b == "kl":
                kl = -1
            a = D.arr("a", (max(rows, 0), n))
            args = [m, n, kl, ku, alpha, a, x]
            K = kl + ku + 2
        elif fam in ("sbmv", "hbmv"):
            k = D(st.integers(0, 4), "k")
            b = D.bad("bad", ["k"])
            a = D.arr("a", (k + 1, n))
            args = [k + 2 if b else k, alpha, a, x]
            K = 2 * k + 2
        else:
            ap = D.arr("ap", (n * (n + 1) // 2 + D(st.sampled_from([0, 0, 2]), "apx"),))
            b = D.bad("bad", ["n"])
            args = [n + 2 if b else n, alpha, ap, x]
            K = max(n, 1)
        mat = "ap" if fam in ("spmv", "hpmv") else "a"
        return args, kw, K, [("alpha", mat, "x"), ("beta", "y")], "mv"
    if fam in ("trmv", "tbmv", "tpmv", "trsv", "tbsv", "tpsv"):
        n = D.size("n")
        solve = fam.endswith("sv")
        lower = D.flag("lower", (0, 1), (2,))
        trans = D.flag("trans", (0, 1, 2), (3, -1))
        diag = D.flag("diag", (0, 1), (2,))
        x, offx, incx = D.vec("x", n, out=True)
        _vec_kw(kw, "x", offx, incx)
        for k_, v in (("lower", lower), ("trans", trans), ("diag", diag)):
            if v or D(st.booleans(), k_ + ".given"):
                kw[k_] = v
        if D(st.booleans(), "ow?"):
            kw["overwrite_x"] = D.ow("overwrite_x")
        lw = lower in (1,)
        if fam[1] == "r":
            a = D.arr("a", (n, n), fill=_solve_fill_dense if solve else None)
            args = [a, x]
            K = max(n, 1)
            mat = "a"
        elif fam[1] == "b":
            k = D(st.integers(0, 4), "k")
            b = D.bad("bad", ["k"])
            a = D.arr("a", (k + 1, n), fill=_solve_fill_band(k, lw) if solve else None)
            args = [k + 1 if b else k, a, x]
            K = k + 1
            mat = "a"
        else:
            ap = D.arr("ap", (n * (n + 1) // 2,), fill=_solve_fill_packed(n, lw) if solve else None)
            b = D.bad("bad", ["n"])
            args = [n + 1 if b else n, ap, x]
            K = max(n, 1)
            mat = "ap"
        terms = [("@out", mat)] if solve else [(mat, "x")]
        return args, kw, K * (4 if solve else 1), terms, "tv"
    if fam in ("ger", "geru", "gerc"):
        # SciPy's ?ger crashes (segmentation fault) on an empty x or y: see test_ger_with_empty_vector
        m, n = max(D.size("m"), 1), max(D.size("n"), 1)
        alpha = D.scalar("alpha")
        x = D.arr("x", (m,))
        y = D.arr("y", (n,))
        for lbl in ("incx", "incy"):
            inc = D.flag(lbl, (1, 1, -1), (2, 0))
            if inc != 1:
                kw[lbl] = inc
        if D(st.booleans(), "a.given"):
            kw["a"] = D.arr("a", (m, n), out=True)
            if D(st.booleans(), "ow?"):
                kw["overwrite_a"] = D.ow("overwrite_a")
        return [alpha, x, y], kw, 2, [("alpha", "x", "y"), ("a",)], "ger"
    if fam in ("syr", "her", "syr2", "her2"):
        n = D.size("n")
        alpha = D.scalar("alpha", real=(fam == "her"))
        x, offx, incx = D.vec("x", n)
        kw_x = {}
        _vec_kw(kw_x, "x", offx, incx)
        kw.update(kw_x)
        args = [alpha, x]
        terms = [("alpha", "x", "x"), ("a",)]
        if fam in ("syr2", "her2"):
            y, offy, incy = D.vec("y", n)
            _vec_kw(kw, "y", offy, incy)
            args.append(y)
            terms = [("alpha", "x", "y"), ("a",)]
        lower = D.flag("lower", (0, 1), (2,))
        if lower:
            kw["lower"] = lower
        if D(st.booleans(), "n.given") or D.bad("bad", ["n"]):
            kw["n"] = n if not D.dubious else n + 2
        if D(st.booleans(), "a.given"):
            kw["a"] = D.arr("a", (n, n), out=True)
            if D(st.booleans(), "ow?"):
                kw["overwrite_a"] = D.ow("overwrite_a")
        return args, kw, 2, terms, "r"
    if fam in ("spr", "hpr", "spr2", "hpr2"):
        n = D.size("n")
        alpha = D.scalar("alpha", real=(fam == "hpr"))
        # SciPy's cspr/zspr (LAPACK's complex-symmetric spr) read out of bounds for incx < 0: see
        # test_complex_spr_negative_increment
        incs = (1, 1, 2, 3) if fam == "spr" and dt.kind == "c" else (1, 1, 1, 2, -1, -2, 3)
        x, offx, incx = D.vec("x", n, inc_choices=incs)
        _vec_kw(kw, "x", offx, incx)
        args = [n, alpha, x]
        terms = [("alpha", "x", "x"), ("ap",)]
        if fam.endswith("2"):
            y, offy, incy = D.vec("y", n)
            _vec_kw(kw, "y", offy, incy)
            args.append(y)
            terms = [("alpha", "x", "y"), ("ap",)]
        args.append(D.arr("ap", (n * (n + 1) // 2,), out=True))
        lower = D.flag("lower", (0, 1), (2,))
        if lower:
            kw["lower"] = lower
        if D(st.booleans(), "ow?"):
            kw["overwrite_ap"] = D.ow("overwrite_ap")
        if D.bad("bad", ["n"]):
            args[0] = n + 2
        return args, kw, 2, terms, "pr"
    raise AssertionError(fam)


def b_l3(D, fam, dt):
    kw: dict = {}
    cplx = dt.kind == "c"
    alpha = D.scalar("alpha", real=(fam == "herk"))
    beta = D.scalar("beta", real=(fam in ("herk", "her2k")))
    m, n, k = D.size("m"), D.size("n"), D.size("k")
    alias = D(st.integers(0, 5), "alias") == 0
    if fam == "gemm":
        ta = D.flag("trans_a", (0, 1, 2))
        tb = D.flag("trans_b", (0, 1, 2))
        if alias:
            k = n if ta == 0 else m
            if ta != 0:
                m = n = k = m
        a = D.arr("a", (m, k) if ta == 0 else (k, m))
        b = D.arr("b", (k, n) if tb == 0 else (n, k))
        if D.bad("bad", ["k"]):
            b = D.arr("b", (k + 1, n) if tb == 0 else (n, k + 1))
        for lbl, v in (("trans_a", ta), ("trans_b", tb)):
            if v:
                kw[lbl] = v
        args = [alpha, a, b]
        terms, K = [("alpha", "a", "b"), ("beta", "c")], max(k, 1)
        cshape = (m, n)
    elif fam in ("symm", "hemm"):
        side = D.flag("side", (0, 1), (2,))
        lower = D.flag("lower", (0, 1), (2,))
        ka = m if side == 0 else n
        a = D.arr("a", (ka, ka))
        b = D.arr("b", (m, n))
        if side:
            kw["side"] = side
        if lower:
            kw["lower"] = lower
        args = [alpha, a, b]
        terms, K = [("alpha", "a", "b"), ("beta", "c")], max(ka, 1)
        cshape = (m, n)
        if alias:
            kw["c"] = Alias("@2")
    elif fam in ("syrk", "herk", "syr2k", "her2k"):
        tvals = {("syrk", False): (0, 1, 2), ("syrk", True): (0, 1), ("herk", True): (0, 2),
                 ("syr2k", False): (0, 1, 2), ("syr2k", True): (0, 1), ("her2k", True): (0, 2)}[(fam, cplx)]
        trans = D.flag("trans", tvals, tuple({0, 1, 2, 3} - set(tvals)))
        lower = D.flag("lower", (0, 1), (2,))
        if alias and fam in ("syrk", "herk"):
            k = n
        a = D.arr("a", (n, k) if trans == 0 else (k, n))
        args = [alpha, a]
        if fam.endswith("2k"):
            args.append(D.arr("b", (n, k) if trans == 0 else (k, n)))
            terms = [("alpha", "a", "b"), ("beta", "c")]
        else:
            terms = [("alpha", "a", "a"), ("beta", "c")]
        if trans:
            kw["trans"] = trans
        if lower:
            kw["lower"] = lower
        K, cshape = 2 * max(k, 1), (n, n)
        if alias and fam in ("syrk", "herk"):
            kw["c"] = Alias("@1")
    else:  # trmm, trsm
        solve = fam == "trsm"
        side = D.flag("side", (0, 1), (2,))
        lower = D.flag("lower", (0, 1), (2,))
        ta = D.flag("trans_a", (0, 1, 2), (3, -1))
        diag = D.flag("diag", (0, 1), (2,))
        if alias:
            n = m
        ka = m if side == 0 else n
        a = D.arr("a", (ka, ka), fill=_solve_fill_dense if solve else None)
        b = D.arr("b", (m, n), out=True)
        if D.bad("bad", ["b"]):
            b = D.arr("b", (m + 1, n + 1) if side == 0 else (m, n + 1), out=True)
        for lbl, v in (("side", side), ("lower", lower), ("trans_a", ta), ("diag", diag)):
            if v or D(st.booleans(), lbl + ".given"):
                kw[lbl] = v
        if alias:
            b = Alias("@1")
        if D(st.booleans(), "ow?"):
            kw["overwrite_b"] = D.ow("overwrite_b")
        terms = [("alpha", "@out", "a")] if solve else [("alpha", "a", "b")]
        return [alpha, a, b], kw, 4 * max(ka, 1) if solve else max(ka, 1), terms, fam
    if "c" not in kw:
        if alias and fam == "gemm":
            kw["c"] = Alias("@1")
        elif D(st.integers(0, 2), "c.given") != 0:
            kw["c"] = D.arr("c", cshape, out=True)
    if "c" in kw or D(st.booleans(), "beta.given"):
        kw["beta"] = beta
    if "c" in kw and D(st.booleans(), "ow?"):
        kw["overwrite_c"] = D.ow("overwrite_c")
    return args, kw, K, terms, fam


_L1 = {"rotg", "rotmg", "rot", "rotm", "swap", "scal", "sscal", "copy", "axpy", "dot", "dotu", "dotc",
       "nrm2", "asum", "amax"}
_L3 = {"gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"}


# ------------------------------------------------------------------------------------------ execution
_RUNTIMES: dict = {}


def _runtime(tile):
    rt = _RUNTIMES.get(tile)
    if rt is None or rt.closed:
        rt = _RUNTIMES[tile] = tileblas.Runtime(2, tile_size=tile)
    return rt


@pytest.fixture(scope="module", autouse=True)
def _module_teardown(request):
    yield
    for rt in _RUNTIMES.values():
        rt.close()
    _RUNTIMES.clear()
    line = (f"conformance: {_COUNT['examples']} examples over {len(ROUTINES)} routines; "
            f"{_COUNT['compared']} compared, {_COUNT['sp_raised']} raised in SciPy (and tileblas), "
            f"{_COUNT['tb_only_raised']} raised in tileblas only (invalid arguments)")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            print("\n" + line)
    else:  # pragma: no cover
        print(line)


def _materialize(args, kw, seed, for_scipy):
    # for_scipy: aliases become independent copies (Level 3, where tileblas promises the mathematical
    # result); False: the aliased argument is the very same object (tileblas, and SciPy for Level 1/2,
    # where BLAS' own aliasing behaviour is the reference).
    """Arrays from the recipes (the same values for both sides); aliases resolved."""
    names = [f"@{i}" for i in range(len(args))]
    items = list(zip(names, args)) + list(kw.items())
    objs: dict = {}
    specs = {nm: v for nm, v in items}
    for i, (nm, v) in enumerate(items):
        if isinstance(v, Arr):
            objs[nm] = v.make(np.random.default_rng([seed, i]))
    for nm, v in items:
        if isinstance(v, Alias):
            tgt = v.target
            if for_scipy:
                j = [n_ for n_, _ in items].index(tgt)
                objs[nm] = specs[tgt].make(np.random.default_rng([seed, j]))
            else:
                objs[nm] = objs[tgt]
    out_args = [objs.get(nm, v) for nm, v in zip(names, args)]
    out_kw = {k_: objs.get(k_, v) for k_, v in kw.items()}
    return out_args, out_kw, objs


def _positional_names(name):
    """SciPy's positional argument names of routine ``name`` (from the f2py signature line)."""
    sig = getattr(sblas, name).__doc__.split("\n")[0]
    inner = sig[sig.index("(") + 1: sig.rindex(")")]
    req = inner.split("[")[0]
    return [s.strip() for s in req.split(",") if s.strip()]


def _maxabs(v) -> float:
    if v is None:
        return 0.0
    if isinstance(v, (list, tuple)):
        return max((_maxabs(x) for x in v), default=0.0)
    a = np.asarray(v)
    if a.dtype.kind not in "biufc" or a.size == 0:
        return 0.0
    with np.errstate(all="ignore"):
        return float(np.max(np.abs(a.astype(np.complex128))))


def _call(fn, args, kw):
    if _TRACE:
        import sys
        print(f"CALL {type(fn).__name__} {getattr(fn, '__name__', '')} {_describe(args)} {_describe(kw)}", file=sys.stderr, flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kw), None
        except Exception as e:  # noqa: BLE001 - compared below
            return None, e


_TRACE = bool(os.environ.get("TILEBLAS_CONFORMANCE_TRACE"))


def _describe(v):
    if isinstance(v, np.ndarray):
        return f"<{v.dtype} {v.shape} {v.strides} w={v.flags.writeable}>"
    if isinstance(v, dict):
        return {k_: _describe(x) for k_, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_describe(x) for x in v]
    return repr(v)


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _check(name, args, kw, K, terms, seed, tile):
    fam, dt = _family(name)
    sp_args, sp_kw, sp_objs = _materialize(args, kw, seed, fam in _L3)
    tb_args, tb_kw, tb_objs = _materialize(args, kw, seed, False)
    sp_before = {k_: v.copy() for k_, v in sp_objs.items()}
    tb_before = {k_: v.copy() for k_, v in tb_objs.items()}
    if fam in _L3 and any(isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[0] == 0 < v.shape[1]
                          for v in [*sp_args, *sp_kw.values()]):
        D_DUBIOUS[0] = True  # leading dimension 0: BLAS rejects it, SciPy returns c unchanged
    r_sp, e_sp = _call(getattr(sblas, name), sp_args, sp_kw)
    if tile is not None and fam in _L3:
        prev = _rt_mod.set_runtime(_runtime(tile))
        try:
            r_tb, e_tb = _call(getattr(tblas, name), tb_args, tb_kw)
        finally:
            _rt_mod.set_runtime(prev)
    else:
        r_tb, e_tb = _call(getattr(tblas, name), tb_args, tb_kw)
    _COUNT["examples"] += 1
    if e_sp is not None and e_tb is None and fam not in _L1 and "unexpected array size" in str(e_sp) \
            and any(isinstance(v, np.ndarray) and v.size == 0 for v in sp_kw.values()):
        # f2py rejects an explicitly given empty output (c=np.zeros((0, 0))); tileblas returns it.
        _COUNT["sp_raised"] += 1
        return
    if e_sp is not None:
        _COUNT["sp_raised"] += 1
        assert e_tb is not None, f"SciPy raised {e_sp!r}; tileblas returned {r_tb!r}"
        assert isinstance(e_tb, (ValueError, TypeError)), f"SciPy raised {e_sp!r}; tileblas raised {e_tb!r}"
        return
    if e_tb is not None:
        assert isinstance(e_tb, (ValueError, TypeError)), f"tileblas raised {e_tb!r}"
        assert D_DUBIOUS[0], f"SciPy computed {r_sp!r}, tileblas raised {e_tb!r}"
        _COUNT["tb_only_raised"] += 1
        return
    if D_DUBIOUS[0]:
        return  # SciPy accepted an invalid argument: its result is not a reference
    _COUNT["compared"] += 1

    # The magnitude bound: maxabs of named arguments (SciPy's names for positional ones).
    pos = _positional_names(name)
    named = dict(zip(pos, sp_args))
    named.update(sp_kw)
    out_mag = max(_maxabs(r_sp), _maxabs(r_tb))
    S = 0.0
    for t in terms:
        p = 1.0
        for nm in t:
            if nm == "@out":
                p *= out_mag
            elif nm in ("alpha", "a") and nm not in named and fam == "axpy":
                p *= 1.0
            elif nm == "alpha" and nm not in named:
                p *= 1.0
            elif nm == "beta" and nm not in named:
                p *= 0.0
            else:
                p *= _maxabs(named.get(nm))
        S += p
    aliased = any(isinstance(v, Alias) for v in [*args, *kw.values()])
    # Level-2 BLAS with y overlapping x, and rot/rotm with x and y the same memory (both are outputs,
    # written element by element in an order each kernel chooses), give undefined values in both
    # libraries: not compared
    l2_alias = aliased and (fam not in _L1 | _L3 or fam in ("rot", "rotm"))
    if fam in _L1 and any(isinstance(v, Alias) for v in [*args, *kw.values()]):
        S += out_mag  # BLAS' result with an overlapping output is not bounded by the inputs
    eps = float(np.finfo(dt).eps)
    tolerance = 8.0 * (K + 2) * eps * S

    rs, rt = _as_tuple(r_sp), _as_tuple(r_tb)
    assert len(rs) == len(rt), (r_sp, r_tb)
    alias_group = set()
    for k_, v in list(zip([f"@{i}" for i in range(len(args))], args)) + list(kw.items()):
        if isinstance(v, Alias):
            alias_group |= {k_, v.target}
    # SciPy writes read-only arrays given as outputs; tileblas copies a read-only view instead (Level 1/2)
    # and any read-only output (Level 3): the documented differences.
    ro_views = {k_ for k_, v in sp_objs.items() if not v.flags.writeable and (v.base is not None or fam in _L3)}

    for j, (a, b) in enumerate(zip(rs, rt)):
        if isinstance(a, np.ndarray):
            assert isinstance(b, np.ndarray), (j, type(b))
            assert a.dtype == b.dtype, (j, a.dtype, b.dtype)
            assert a.shape == b.shape, (j, a.shape, b.shape)
            assert (a.flags.f_contiguous, a.flags.c_contiguous) == (b.flags.f_contiguous, b.flags.c_contiguous), \
                (j, a.flags, b.flags)
            err = _maxabs(np.asarray(a, np.complex128) - np.asarray(b, np.complex128)) if a.size else 0.0
            assert l2_alias or err <= tolerance, f"result {j}: |diff| {err:.3g} > {tolerance:.3g}"
            is_sp = {k_ for k_, v in sp_objs.items() if a is v}
            is_tb = {k_ for k_, v in tb_objs.items() if b is v}
            if is_sp - ro_views:
                assert is_sp & is_tb, \
                    f"result {j}: SciPy returned input {is_sp}, tileblas {is_tb or 'a new array'}; " \
                    f"{_describe(tb_args)} {_describe(tb_kw)}"
            if is_tb:
                assert is_sp or is_tb & alias_group, \
                    f"result {j}: tileblas returned input {is_tb}, SciPy a new array"
            for k_, v in sp_objs.items():
                sh_sp = np.may_share_memory(a, v)
                sh_tb = np.may_share_memory(b, tb_objs[k_])
                if sh_sp and not sh_tb:
                    assert k_ in ro_views, f"result {j} shares memory with {k_} in SciPy, not in tileblas"
                if sh_tb and not sh_sp:
                    assert k_ in alias_group, f"result {j} shares memory with {k_} in tileblas, not in SciPy"
        else:
            assert not isinstance(b, np.ndarray) and type(a) is type(b), (j, type(a), type(b))
            if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
                assert a == b, (j, a, b)
            else:
                assert abs(complex(a) - complex(b)) <= tolerance, f"result {j}: {a!r} vs {b!r} (tol {tolerance:.3g})"

    for k_, v in sp_objs.items():
        if k_ in alias_group or l2_alias:
            continue
        changed_sp = not np.array_equal(v, sp_before[k_], equal_nan=True)
        changed_tb = not np.array_equal(tb_objs[k_], tb_before[k_], equal_nan=True)
        if not changed_sp:
            assert not changed_tb, f"tileblas wrote input {k_} that SciPy left unchanged"
        elif changed_tb:
            err = _maxabs(np.asarray(v, np.complex128) - np.asarray(tb_objs[k_], np.complex128))
            assert err <= tolerance, f"input {k_} written differently: |diff| {err:.3g} > {tolerance:.3g}"
        else:
            assert k_ in ro_views, f"SciPy wrote input {k_} in place, tileblas did not"


D_DUBIOUS = [False]


def _run_example(name, data):
    fam, dt = _family(name)
    big = fam in _L3 or fam in _L1 or fam in ("gemv", "symv", "hemv", "trmv", "trsv", "ger", "geru", "gerc",
                                              "syr", "her", "syr2", "her2")
    D = Draw(data, dt, big=big)
    builder = b_l1 if fam in _L1 else b_l3 if fam in _L3 else b_l2
    args, kw, K, terms, _ = builder(D, fam, dt)
    tile = D(st.sampled_from([None, None, 32, 64]), "tile") if fam in _L3 else None
    seed = D(st.integers(0, 2**16), "seed")
    D_DUBIOUS[0] = bool(D.dubious)
    _check(name, args, kw, K, terms, seed, tile)


@pytest.mark.parametrize("name", ROUTINES)
@_PROFILE
@given(data=st.data())
def test_conforms_to_scipy(name, data):
    _run_example(name, data)


def test_every_routine_is_covered():
    assert len(ROUTINES) >= 140
    fams = {_family(n)[0] for n in ROUTINES}
    for f in _L1 | _L3 | {"gemv", "gbmv", "tpsv", "hpr2", "gerc"}:
        assert f in fams, f


@pytest.mark.parametrize("name", ["sger", "dger", "cgeru", "zgeru", "cgerc", "zgerc"])
@pytest.mark.parametrize("m,n", [(0, 4), (3, 0), (0, 0)])
def test_ger_with_empty_vector(name, m, n):
    """SciPy's ?ger crashes on an empty vector; tileblas returns the empty (m, n) Fortran array."""
    dt = _family(name)[1]
    r = getattr(tblas, name)(1.0, np.ones(m, dt), np.ones(n, dt))
    assert r.shape == (m, n) and r.dtype == dt and r.flags.f_contiguous


@pytest.mark.parametrize("name", ["cspr", "zspr"])
@pytest.mark.parametrize("incx", [-1, -2])
@pytest.mark.parametrize("lower", [0, 1])
def test_complex_spr_negative_increment(name, incx, lower):
    """SciPy's cspr/zspr read outside x for incx < 0; tileblas follows BLAS (x read backwards)."""
    from _helpers import rand

    dt = _family(name)[1]
    rng = np.random.default_rng(7)
    n = 5
    x = rand(rng, (1 + (n - 1) * abs(incx),), dt)
    ap = rand(rng, (n * (n + 1) // 2,), dt)
    xs = x[::abs(incx)][::-1]
    full = np.outer(xs, xs)
    idx = [(i, j) for j in range(n) for i in (range(j, n) if lower else range(j + 1))]
    ref = ap.astype(np.complex128) + np.array([full[i, j] for i, j in idx])
    got = getattr(tblas, name)(n, 1.0, x, ap, incx=incx, lower=lower)
    bound = 8 * n * np.finfo(dt).eps * (np.abs(x).max() ** 2 + np.abs(ap).max())
    assert np.abs(got - ref).max() <= bound
