"""Level-2 routines of tileblas.blas against scipy.linalg.blas (the reference) and NumPy.

Every routine x precision x flag combination (trans, lower, diag, increments including negative ones,
offsets, band widths, packed storage, y=None or given, overwrite flags) is called on SciPy's routine
and on ours with identical freshly built arguments in several memory layouts; outputs must agree and
each returned array must be / share memory with exactly the inputs SciPy's is / shares with.  Where
SciPy raises, ours raises ValueError or TypeError.
"""

from __future__ import annotations

import inspect
import itertools
import re
import warnings

import numpy as np
import pytest
import scipy.linalg.blas as sb

import tileblas.blas as tb
from tileblas.blas import _level1
from tileblas.blas import _level2

LEVEL3 = {"gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"}
DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
TOL = {"s": 5e-4, "d": 1e-10, "c": 5e-4, "z": 1e-10}


def level12() -> list[str]:
    out = []
    for n in dir(sb):
        if type(getattr(sb, n)).__name__ == "fortran" and n[1:] not in LEVEL3:
            out.append(n)
    return sorted(out)


def names(*families: str) -> list[str]:
    return [n for n in sorted(_level2.__all__) if n[1:] in families]


def compare(name: str, build, tol: float | None = None):
    """Call scipy's and ours on arguments from ``build()`` (called once for each); compare."""
    args_r, kw_r = build()
    args_o, kw_o = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ref = getattr(sb, name)(*args_r, **kw_r)
        except Exception as exc:
            with pytest.raises((ValueError, TypeError)):
                getattr(tb, name)(*args_o, **kw_o)
            return exc
        out = getattr(tb, name)(*args_o, **kw_o)
    assert isinstance(out, np.ndarray), (name, type(out))
    assert out.dtype == ref.dtype and out.shape == ref.shape, (name, out.dtype, ref.dtype, out.shape, ref.shape)
    assert out.flags.f_contiguous == ref.flags.f_contiguous, (name, "memory order differs")
    tol = TOL[name[0]] if tol is None else tol
    scale = 1 + np.abs(ref).max(initial=0)
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * scale)
    for ir, io in zip(list(args_r) + list(kw_r.values()), list(args_o) + list(kw_o.values())):
        if isinstance(ir, np.ndarray):
            assert (out is io) == (ref is ir), (name, "identity differs")
            assert np.may_share_memory(out, io) == np.may_share_memory(ref, ir), (name, "sharing differs")
    return out


def each(combos, check):
    """Run ``check(*combo)`` for every combo, naming the combo when one fails."""
    for combo in combos:
        try:
            check(*combo)
        except AssertionError as exc:
            raise AssertionError(f"{combo}: {exc}") from exc


def rand(rng, shape, p):
    a = rng.standard_normal(shape)
    if p in "cz":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(DT[p])


def mat(rng, m, n, p, layout):
    """An m x n matrix of precision p in the given memory layout."""
    a = rand(rng, (m, n), p)
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "C":
        return np.ascontiguousarray(a)
    if layout == "Fview":  # column-major with a leading dimension larger than m
        big = np.asfortranarray(rand(rng, (m + 3, n + 1), p))
        big[:m, :n] = a
        return big[:m, :n]
    if layout == "Cview":
        big = np.ascontiguousarray(rand(rng, (m + 1, n + 2), p))
        big[:m, :n] = a
        return big[:m, :n]
    if layout == "strided":  # no unit stride: must be copied
        big = rand(rng, (2 * m, 2 * n), p)
        big[::2, ::2] = a
        return big[::2, ::2]
    if layout == "list":
        return a.tolist()
    if layout == "other":  # another dtype, cast by the wrapper
        return a.astype(np.complex128 if p in "cz" else (np.float32 if p == "d" else np.float64))
    raise AssertionError(layout)


def vec(rng, n, p, kind="contig"):
    v = rand(rng, 2 * n + 2, p)
    if kind == "contig":
        return v[:n].copy()
    if kind == "strided":
        return v[: 2 * n : 2]
    if kind == "list":
        return v[:n].tolist()
    if kind == "other":
        return v[:n].astype(np.complex128 if p in "cz" else np.float32 if p == "d" else np.float64)
    raise AssertionError(kind)


def vlen(count, off=0, inc=1):
    """Length of a vector holding ``count`` elements from ``off`` at ``|inc|``."""
    return off + (max(count, 1) - 1) * abs(inc) + 1


MLAYOUTS = ("F", "C", "Fview", "Cview", "strided", "list", "other")
VKINDS = ("contig", "strided", "list", "other")
VOPTS = [
    {},
    {"incx": 2},
    {"incx": -1},
    {"incx": -2, "offx": 1},
    {"offx": 2},
    {"incy": -1},
    {"incy": 2, "offy": 1},
    {"incx": -3, "incy": -2, "offx": 1, "offy": 2},
]


def scal(p, v):
    return complex(v) if p in "cz" else complex(v).real


# ---------------------------------------------------------------------------------------------------
# namespace and signatures
# ---------------------------------------------------------------------------------------------------


def test_exports_exactly_scipy_level12():
    ours = set(_level1.__all__) | set(_level2.__all__)
    assert ours == set(level12())
    assert set(tb.__all__) >= ours
    for n in _level2.__all__:
        assert getattr(tb, n) is getattr(_level2, n)
        assert getattr(tb, n).__name__ == n


def _scipy_params(name: str) -> list[str]:
    first = getattr(sb, name).__doc__.strip().splitlines()[0]
    inside = first[first.index("(") + 1 : first.rindex(")")]
    return [p for p in re.split(r"[\[\],\s]+", inside) if p]


@pytest.mark.parametrize("name", sorted(_level2.__all__))
def test_signature_matches_scipy(name):
    sig = inspect.signature(getattr(tb, name))
    assert list(sig.parameters) == _scipy_params(name)
    doc = getattr(sb, name).__doc__
    for p, par in sig.parameters.items():
        m = re.search(rf"^{p} : input .*\n\s+Default: (.*)$", doc, re.M)
        if m and par.default is not inspect.Parameter.empty and par.default is not None:
            d = m.group(1).strip()
            try:
                d = complex(*map(float, d.strip("()").split(","))) if d.startswith("(") else float(d)
            except ValueError:
                continue
            assert par.default == d, (name, p, par.default, d)


# ---------------------------------------------------------------------------------------------------
# gemv, symv, hemv
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", names("gemv"))
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_gemv_layouts(name, trans):
    p = name[0]

    def check(layout, shape):
        def build():
            rng = np.random.default_rng(10)
            a = mat(rng, *shape, p, layout)
            cols = shape[0] if trans else shape[1]
            return (scal(p, 1.5 - 0.5j), a, vec(rng, cols, p)), {"trans": trans}

        compare(name, build)

    each(itertools.product(MLAYOUTS, [(4, 3), (3, 5)]), check)


@pytest.mark.parametrize("name", names("gemv", "symv", "hemv"))
@pytest.mark.parametrize("opts", VOPTS, ids=str)
def test_mv_vectors(name, opts):
    each(itertools.product(["none", "contig", "strided", "list"], [0, 1]), lambda y, o: _mv_vectors(name, opts, y, o))


def _mv_vectors(name, opts, y_kind, ow):
    p = name[0]
    n = 4

    def build():
        rng = np.random.default_rng(11)
        a = mat(rng, n, n, p, "F")
        kw = dict(opts, overwrite_y=ow, beta=scal(p, 0.5 + 1j))
        x = vec(rng, vlen(n, opts.get("offx", 0), opts.get("incx", 1)), p)
        if y_kind != "none":
            kw["y"] = vec(rng, vlen(n, opts.get("offy", 0), opts.get("incy", 1)), p, y_kind)
        if name[1:] != "gemv":
            kw["lower"] = ow
        return (scal(p, 2 - 1j), a, x), kw

    compare(name, build)


@pytest.mark.parametrize("name", names("symv", "hemv"))
@pytest.mark.parametrize("lower", [0, 1])
def test_symv_layouts(name, lower):
    p = name[0]

    def check(layout):
        def build():
            rng = np.random.default_rng(12)
            return (scal(p, 0.7 + 0.1j), mat(rng, 5, 5, p, layout), vec(rng, 5, p, "strided")), {"lower": lower}

        compare(name, build)

    each([(m,) for m in MLAYOUTS], check)


@pytest.mark.parametrize("name", names("gemv", "symv", "hemv"))
@pytest.mark.parametrize(
    "kw,arg",
    [({"trans": 3}, "trans"), ({"lower": 2}, "lower"), ({"incx": 0}, "incx"), ({"incy": 0}, "incy"),
     ({"offx": 9}, "offx"), ({"offx": -1}, "offx"), ({"offy": 4, "y": np.zeros(3)}, "offy"), ({"y": np.zeros(2)}, "y"),
     ({"x": np.zeros(2)}, "x"), ({"a": np.zeros((3, 2))}, "a"), ({"offx": 2}, "x")],
    ids=str,
)
def test_mv_errors(name, kw, arg):
    p = name[0]
    if ("trans" in kw) != (name[1:] == "gemv") and ("trans" in kw or "lower" in kw):
        return
    if name[1:] == "gemv" and "a" in kw:
        return  # any shape is valid for gemv

    def build():
        rng = np.random.default_rng(13)
        k = dict(kw)
        a = k.pop("a", mat(rng, 3, 3, p, "F"))
        x = k.pop("x", vec(rng, 3, p))
        return (1.0, a, x), k

    exc = compare(name, build)
    assert isinstance(exc, Exception)
    args, k = build()
    with pytest.raises((ValueError, TypeError), match=arg):
        getattr(tb, name)(*args, **k)


def test_gemv_empty_and_long_y():
    compare("dgemv", lambda: ((1.0, np.ones((3, 0)), np.ones(2)), {}))
    compare("dgemv", lambda: ((1.0, np.ones((0, 3)), np.ones(3)), {}))
    compare("dgemv", lambda: ((1.0, np.ones((3, 3)), np.ones(3)), {"y": np.ones(6), "beta": 1.0}))
    compare("zgemv", lambda: ((1.0, np.ones(3), [1.0]), {}))  # rank-1 a is read as a column


# ---------------------------------------------------------------------------------------------------
# banded and packed products
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", names("gbmv"))
@pytest.mark.parametrize("mnkk", [(5, 4, 1, 2), (4, 6, 2, 1), (3, 3, 0, 0), (6, 5, 3, 1)], ids=str)
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_gbmv(name, mnkk, trans):
    opts = VOPTS[:4] + [{"y": "given"}, {"y": "given", "overwrite_y": 1}]
    each(itertools.product(["F", "C", "Fview", "list"], opts), lambda lay, o: _gbmv(name, mnkk, trans, lay, o))


def _gbmv(name, mnkk, trans, layout, opts):
    p = name[0]
    m, n, kl, ku = mnkk

    def build():
        rng = np.random.default_rng(14)
        a = mat(rng, kl + ku + 1 + (layout == "Fview"), n, p, layout)
        rows, cols = (n, m) if trans else (m, n)
        kw = dict(opts, trans=trans, beta=scal(p, 0.25 - 1j))
        x = vec(rng, vlen(cols, kw.get("offx", 0), kw.get("incx", 1)), p)
        if kw.get("y") == "given":
            kw["y"] = vec(rng, rows, p)
        return (m, n, kl, ku, scal(p, 1.5 + 0.5j), a, x), kw

    compare(name, build)


@pytest.mark.parametrize("name", names("sbmv", "hbmv"))
@pytest.mark.parametrize("k", [0, 1, 3])
@pytest.mark.parametrize("lower", [0, 1])
def test_sbmv(name, k, lower):
    opts = VOPTS[:5] + [{"y": "given"}, {"y": "given", "overwrite_y": 1}]
    each(itertools.product(["F", "C", "Fview", "list"], opts), lambda lay, o: _sbmv(name, k, lower, lay, o))


def _sbmv(name, k, lower, layout, opts):
    p = name[0]
    n = 5

    def build():
        rng = np.random.default_rng(15)
        kw = dict(opts, lower=lower, beta=scal(p, 2.0))
        x = vec(rng, vlen(n, kw.get("offx", 0), kw.get("incx", 1)), p)
        if kw.get("y") == "given":
            kw["y"] = vec(rng, n, p)
        return (k, scal(p, 0.5 - 1j), mat(rng, k + 1 + (layout == "Fview"), n, p, layout), x), kw

    compare(name, build)


@pytest.mark.parametrize("name", names("spmv", "hpmv"))
@pytest.mark.parametrize("n", [0, 1, 4])
@pytest.mark.parametrize("lower", [0, 1])
def test_spmv(name, n, lower):
    opts = VOPTS + [{"y": "given"}, {"y": "given", "overwrite_y": 1}]
    each(itertools.product(opts, ["contig", "strided", "list"]), lambda o, k: _spmv(name, n, lower, o, k))


def _spmv(name, n, lower, opts, ap_kind):
    p = name[0]

    def build():
        rng = np.random.default_rng(16)
        kw = dict(opts, lower=lower, beta=scal(p, -1.0))
        x = vec(rng, vlen(n, kw.get("offx", 0), kw.get("incx", 1)), p)
        if kw.get("y") == "given":
            kw["y"] = vec(rng, max(n, 1), p)
        ap = vec(rng, n * (n + 1) // 2 + 1, p, ap_kind)
        return (n, scal(p, 1 + 1j), ap, x), kw

    compare(name, build)


@pytest.mark.parametrize("name", names("sbmv", "hbmv", "spmv", "hpmv", "gbmv"))
def test_banded_packed_errors(name):
    p = name[0]
    rng = np.random.default_rng(17)
    x = vec(rng, 4, p)
    f = getattr(tb, name)
    if name[1:] == "gbmv":
        a = mat(rng, 3, 4, p, "F")
        cases = [((4, 4, -1, 1, 1.0, a, x), "kl"), ((4, 3, 1, 1, 1.0, a, x), "n"), ((2, 4, 1, 1, 1.0, a, x), "m"),
                 ((4, 4, 2, 1, 1.0, a, x), "a")]
    elif name[1:] in ("sbmv", "hbmv"):
        a = mat(rng, 2, 4, p, "F")
        cases = [((2, 1.0, a, x), "k"), ((-1, 1.0, a, x), "k")]
    else:
        cases = [((4, 1.0, vec(rng, 9, p), x), "ap"), ((-1, 1.0, vec(rng, 9, p), x), "n"),
                 ((5, 1.0, vec(rng, 15, p), x), "x")]
    for args, arg in cases:
        if arg != "a":  # SciPy lets BLAS print an error for a too-short band; we raise
            with pytest.raises(Exception):
                getattr(sb, name)(*args)
        with pytest.raises((ValueError, TypeError), match=arg):
            f(*args)


# ---------------------------------------------------------------------------------------------------
# triangular products and solves
# ---------------------------------------------------------------------------------------------------


def tri(rng, n, p, layout):
    """A well-conditioned n x n matrix (strong diagonal) in a layout."""
    a = rand(rng, (n, n), p) * 0.3 + 3 * np.eye(n, dtype=DT[p])
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "C":
        return np.ascontiguousarray(a)
    if layout == "strided":
        big = np.zeros((2 * n, 2 * n), DT[p])
        big[::2, ::2] = a
        return big[::2, ::2]
    if layout == "list":
        return a.tolist()
    raise AssertionError(layout)


FLAGS3 = list(itertools.product([0, 1], [0, 1, 2], [0, 1]))


@pytest.mark.parametrize("name", names("trmv", "trsv"))
@pytest.mark.parametrize("lower,trans,diag", FLAGS3)
def test_trmv_trsv_flags(name, lower, trans, diag):
    p = name[0]

    def check(layout):
        def build():
            rng = np.random.default_rng(18)
            return (tri(rng, 4, p, layout), vec(rng, 4, p)), {"lower": lower, "trans": trans, "diag": diag}

        compare(name, build)

    each([("F",), ("C",), ("strided",), ("list",)], check)


@pytest.mark.parametrize("name", names("trmv", "trsv", "tbmv", "tbsv", "tpmv", "tpsv"))
@pytest.mark.parametrize("opts", [o for o in VOPTS if "incy" not in o and "offy" not in o], ids=str)
def test_triangular_vectors(name, opts):
    each(itertools.product(VKINDS, [0, 1]), lambda k, o: _triangular_vectors(name, opts, k, o))


def _triangular_vectors(name, opts, x_kind, ow):
    p = name[0]
    n = 4
    fam = name[1:]

    def build():
        rng = np.random.default_rng(19)
        x = vec(rng, vlen(n, opts.get("offx", 0), opts.get("incx", 1)), p, x_kind)
        kw = dict(opts, overwrite_x=ow, lower=ow, trans=2 - ow)
        if fam in ("trmv", "trsv"):
            return (tri(rng, n, p, "F"), x), kw
        if fam in ("tbmv", "tbsv"):
            band = rand(rng, (2, n), p) * 0.3
            band[0 if ow else 1] += 3  # diagonal row: 0 for lower, k for upper storage
            return (1, np.asfortranarray(band), x), kw
        return (n, packed_tri(rng, n, p, ow), x), kw

    compare(name, build)


def packed_tri(rng, n, p, lower):
    ap = rand(rng, n * (n + 1) // 2, p) * 0.3
    for j in range(n):
        ap[j * n - j * (j - 1) // 2 if lower else j * (j + 1) // 2 + j] += 3
    return ap


@pytest.mark.parametrize("name", names("tbmv", "tbsv"))
@pytest.mark.parametrize("lower,trans,diag", FLAGS3)
def test_tbmv_tbsv_flags(name, lower, trans, diag):
    p = name[0]
    n = 5

    def check(k, layout):
        def build():
            rng = np.random.default_rng(20)
            band = rand(rng, (k + 1, n), p) * 0.3
            band[0 if lower else k] += 3
            a = {"F": np.asfortranarray, "C": np.ascontiguousarray, "list": lambda b: b.tolist()}[layout](band)
            return (k, a, vec(rng, n, p)), {"lower": lower, "trans": trans, "diag": diag}

        compare(name, build)

    each(itertools.product([0, 1, 3], ["F", "C", "list"]), check)


@pytest.mark.parametrize("name", names("tpmv", "tpsv"))
@pytest.mark.parametrize("lower,trans,diag", FLAGS3)
def test_tpmv_tpsv_flags(name, lower, trans, diag):
    p = name[0]

    def check(n):
        def build():
            rng = np.random.default_rng(21)
            return (n, packed_tri(rng, n, p, lower), vec(rng, max(n, 1), p)), {"lower": lower, "trans": trans,
                                                                               "diag": diag}

        compare(name, build)

    each([(0,), (1,), (5,)], check)


@pytest.mark.parametrize("name", names("trmv", "trsv", "tbmv", "tbsv", "tpmv", "tpsv"))
@pytest.mark.parametrize("kw,arg", [({"trans": 3}, "trans"), ({"lower": 2}, "lower"), ({"diag": 2}, "diag"),
                                    ({"incx": 0}, "incx"), ({"offx": 4}, "offx"), ({"incx": 2}, "x")], ids=str)
def test_triangular_errors(name, kw, arg):
    p = name[0]
    rng = np.random.default_rng(22)
    x = vec(rng, 4, p)
    fam = name[1:]
    if fam in ("trmv", "trsv"):
        args = (tri(rng, 4, p, "F"), x)
    elif fam in ("tbmv", "tbsv"):
        args = (1, np.ones((2, 4), DT[p]), x)
    else:
        args = (4, packed_tri(rng, 4, p, 0), x)
    if not (arg == "trans" and fam != "trmv"):  # SciPy's trans check is vacuous except in trmv
        with pytest.raises(Exception):
            getattr(sb, name)(*args, **kw)
    with pytest.raises((ValueError, TypeError), match=arg):
        getattr(tb, name)(*args, **kw)


def test_triangular_shape_errors():
    with pytest.raises(ValueError, match="a"):
        tb.dtrmv(np.ones((3, 2)), np.ones(3))
    with pytest.raises(ValueError, match="k"):
        tb.dtbsv(2, np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError, match="ap"):
        tb.dtpmv(3, np.ones(5), np.ones(3))
    with pytest.raises(ValueError, match="n"):
        tb.dtpsv(-1, np.ones(5), np.ones(3))


# ---------------------------------------------------------------------------------------------------
# rank-1 and rank-2 updates
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", names("ger", "geru", "gerc"))
@pytest.mark.parametrize("incx,incy", [(1, 1), (-1, 1), (1, -1), (-1, -1)])
def test_ger(name, incx, incy):
    combos = itertools.product(["none", "F", "C", "Fview", "list"], [0, 1], ["contig", "strided", "list"])
    each(combos, lambda a, o, x: _ger(name, incx, incy, a, o, x))


def _ger(name, incx, incy, a_kind, ow, x_kind):
    p = name[0]

    def build():
        rng = np.random.default_rng(23)
        x = vec(rng, 4, p, x_kind)
        y = vec(rng, 3, p)
        kw = {"incx": incx, "incy": incy, "overwrite_a": ow}
        if a_kind != "none":
            kw["a"] = mat(rng, 4, 3, p, a_kind)
        return (scal(p, 1.5 - 2j), x, y), kw

    compare(name, build)


@pytest.mark.parametrize("name", names("ger", "geru", "gerc"))
def test_ger_errors(name):
    p = name[0]
    x, y = np.ones(3, DT[p]), np.ones(2, DT[p])
    for kw, arg in [({"incx": 2}, "incx"), ({"incy": 0}, "incy"), ({"a": np.ones((2, 2), DT[p])}, "a")]:
        with pytest.raises(Exception):
            getattr(sb, name)(1.0, x, y, **kw)
        with pytest.raises((ValueError, TypeError), match=arg):
            getattr(tb, name)(1.0, x, y, **kw)


SYR_OPTS = [{}, {"incx": 2}, {"incx": -1}, {"offx": 1}, {"n": 2}, {"n": 0}, {"incx": -2, "offx": 1, "incy": 2},
            {"incy": -1, "offy": 2}, {"n": 9}, {"incx": 0}, {"offx": 9}, {"n": -1}]


@pytest.mark.parametrize("name", names("syr", "her", "syr2", "her2"))
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("a_kind", ["none", "F", "C", "ow"])
def test_syr_her(name, lower, a_kind):
    each([(o,) for o in SYR_OPTS], lambda o: _syr_her(name, lower, o, a_kind))


def _syr_her(name, lower, opts, a_kind):
    p = name[0]
    two = name[1:] in ("syr2", "her2")
    if not two and ("incy" in opts or "offy" in opts):
        return
    if opts.get("n") == 0 and a_kind != "none":
        return  # SciPy (f2py) rejects a (0, 0) `a`; tileblas accepts it and returns it unchanged

    def build():
        rng = np.random.default_rng(24)
        x = vec(rng, 6, p)
        args = (scal(p, 0.5 + 0.25j), x) + ((vec(rng, 7, p),) if two else ())
        kw = dict(opts, lower=lower)
        if a_kind != "none":
            lx = 6 - kw.get("offx", 0)
            nx = (lx - 1) // abs(kw.get("incx", 1) or 1) + 1
            if two:
                ny = (7 - 1 - kw.get("offy", 0)) // abs(kw.get("incy", 1)) + 1
                nx = min(nx, ny)
            n = kw.get("n", nx)
            n = n if 0 <= n <= 8 else 3
            a = mat(rng, n, n, p, "C" if a_kind == "C" else "F")
            kw["a"] = a
            if a_kind == "ow":
                kw["overwrite_a"] = 1
        return args, kw

    compare(name, build)


@pytest.mark.parametrize("name", names("spr", "hpr", "spr2", "hpr2"))
@pytest.mark.parametrize("n", [0, 1, 4])
@pytest.mark.parametrize("lower", [0, 1])
def test_spr(name, n, lower):
    opts = [{}, {"incx": 2}, {"incx": -1, "offx": 1}, {"incy": -2, "offy": 1}, {"overwrite_ap": 1}]
    each(itertools.product(opts, ["contig", "strided", "list", "other"]), lambda o, k: _spr(name, n, lower, o, k))


def _spr(name, n, lower, opts, ap_kind):
    p = name[0]
    two = name[1:] in ("spr2", "hpr2")
    if not two and ("incy" in opts or "offy" in opts):
        return
    if name in ("cspr", "zspr") and opts.get("incx", 1) < 0:
        return  # SciPy's complex-symmetric spr is wrong for incx < 0; see test_complex_spr_negative_incx

    def build():
        rng = np.random.default_rng(25)
        x = vec(rng, vlen(n, opts.get("offx", 0), opts.get("incx", 1)), p)
        ys = (vec(rng, vlen(n, opts.get("offy", 0), opts.get("incy", 1)), p),) if two else ()
        ap = vec(rng, n * (n + 1) // 2 + 2, p, ap_kind)
        alpha = 0.75 if name[1:] == "hpr" else scal(p, 0.75 - 0.5j)
        return (n, alpha, x, *ys, ap), dict(opts, lower=lower)

    compare(name, build)


@pytest.mark.parametrize("name", names("spr", "hpr", "spr2", "hpr2", "syr", "her", "syr2", "her2"))
def test_update_errors(name):
    p = name[0]
    rng = np.random.default_rng(26)
    x = vec(rng, 3, p)
    fam = name[1:]
    two = fam in ("spr2", "hpr2", "syr2", "her2")
    ys = (vec(rng, 3, p),) if two else ()
    if fam.startswith(("sp", "hp")):
        cases = [((3, 1.0, x, *ys, np.zeros(5, DT[p])), {}, "ap"), ((4, 1.0, x, *ys, np.zeros(10, DT[p])), {}, "x"),
                 ((-1, 1.0, x, *ys, np.zeros(10, DT[p])), {}, "n"), ((3, 1.0, x, *ys, np.zeros(6, DT[p])),
                                                                     {"lower": 3}, "lower")]
    else:
        cases = [((1.0, x, *ys), {"n": 4}, "n"), ((1.0, x, *ys), {"a": np.zeros((2, 2), DT[p])}, "a"),
                 ((1.0, x, *ys), {"incx": 0}, "incx"), ((1.0, x, *ys), {"offx": 3}, "offx")]
    for args, kw, arg in cases:
        with pytest.raises(Exception):
            getattr(sb, name)(*args, **kw)
        with pytest.raises((ValueError, TypeError), match=arg):
            getattr(tb, name)(*args, **kw)


# ---------------------------------------------------------------------------------------------------
# against NumPy
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", "sdcz")
def test_against_numpy(p):
    rng = np.random.default_rng(27)
    tol = TOL[p] * 10
    a = rand(rng, (5, 4), p)
    x4, x5 = rand(rng, 4, p), rand(rng, 5, p)
    np.testing.assert_allclose(tb.__dict__[p + "gemv"](2.0, a, x4), 2 * a @ x4, rtol=tol, atol=tol)
    np.testing.assert_allclose(tb.__dict__[p + "gemv"](1.0, a, x5, trans=2), a.conj().T @ x5, rtol=tol, atol=tol)
    s = rand(rng, (5, 5), p)
    h = s + s.conj().T
    sym = s + s.T
    name = p + ("symv" if p in "sd" else "hemv")
    ref = (sym if p in "sd" else h) @ x5
    np.testing.assert_allclose(tb.__dict__[name](1.0, np.triu(sym if p in "sd" else h), x5), ref, rtol=tol, atol=tol)
    t = np.tril(s) + 5 * np.eye(5)
    np.testing.assert_allclose(tb.__dict__[p + "trsv"](t, t @ x5, lower=1), x5, rtol=tol, atol=tol)
    np.testing.assert_allclose(tb.__dict__[p + "trmv"](t, x5, lower=1, trans=1), t.T @ x5, rtol=tol, atol=tol)
    ger = p + ("ger" if p in "sd" else "gerc")
    np.testing.assert_allclose(tb.__dict__[ger](1.0, x5, x4), np.outer(x5, x4.conj()), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["cspr", "zspr", "chpr", "zhpr"])
@pytest.mark.parametrize("lower", [0, 1])
def test_complex_spr_negative_incx(name, lower):
    """Packed rank-1 updates with incx < 0 against a NumPy reference (x read backwards from offx)."""
    p = name[0]
    rng = np.random.default_rng(28)
    n = 4
    x = rand(rng, 9, p)
    ap = rand(rng, n * (n + 1) // 2, p)
    xe = x[1 : 1 + 2 * n : 2][::-1]  # incx=-2, offx=1
    alpha = 0.5 if name[1:] == "hpr" else scal(p, 0.5 - 0.25j)
    upd = alpha * np.outer(xe, xe.conj() if name[1:] == "hpr" else xe)
    cols = [upd[j:, j] if lower else upd[: j + 1, j] for j in range(n)]
    ref = ap + np.concatenate(cols)
    if name[1:] == "hpr":  # BLAS treats the diagonal of a Hermitian matrix as real
        for j in range(n):
            k = j * n - j * (j - 1) // 2 if lower else j * (j + 1) // 2 + j
            ref[k] = ref[k].real
    out = getattr(tb, name)(n, alpha, x, ap, incx=-2, offx=1, lower=lower)
    np.testing.assert_allclose(out, ref, rtol=TOL[p] * 10, atol=TOL[p] * 10)
