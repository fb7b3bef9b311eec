"""Level-1 routines of tileblas.blas against scipy.linalg.blas (the reference) and NumPy.

Table-driven: every routine x precision x option combination is called on SciPy's routine and on ours
with identical freshly built arguments; outputs must agree, and every returned array must be the same
object as (and share memory with) exactly the inputs that SciPy's result is / shares with.  Where SciPy
raises, ours must raise ValueError or TypeError.
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
TOL = {"s": 2e-4, "d": 1e-11, "c": 2e-4, "z": 1e-11}


def scipy_routines() -> list[str]:
    return sorted(n for n in dir(sb) if type(getattr(sb, n)).__name__ == "fortran")


def level12() -> list[str]:
    return [n for n in scipy_routines() if not any(n.endswith(s) and len(n) == len(s) + 1 for s in LEVEL3)]


L1_FAMILIES = ("rotg", "rotmg", "rotm", "rot", "swap", "scal", "copy", "axpy", "dot", "dotu", "dotc", "nrm2",
               "asum", "amax")


def is_level1(name: str) -> bool:
    return name in _level1.__all__


# ---------------------------------------------------------------------------------------------------
# comparison machinery
# ---------------------------------------------------------------------------------------------------


def _arrays(obj):
    if isinstance(obj, tuple):
        return list(obj)
    return [obj]


def compare(name: str, build, tol: float | None = None):
    """Call scipy's and ours on arguments from ``build()`` (called once for each); compare."""
    ref_fn = getattr(sb, name)
    our_fn = getattr(tb, name)
    args_r, kw_r = build()
    args_o, kw_o = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ref = ref_fn(*args_r, **kw_r)
        except Exception as exc:  # scipy raises (its own _fblas.error, ValueError, TypeError)
            with pytest.raises((ValueError, TypeError)):
                our_fn(*args_o, **kw_o)
            return exc
        out = our_fn(*args_o, **kw_o)
    refs, outs = _arrays(ref), _arrays(out)
    assert len(refs) == len(outs)
    prefix = name.lstrip("i")[0]
    tol = TOL.get(prefix, 1e-11) if tol is None else tol
    inputs_r = list(args_r) + list(kw_r.values())
    inputs_o = list(args_o) + list(kw_o.values())
    for r, o in zip(refs, outs):
        if isinstance(r, np.ndarray):
            assert isinstance(o, np.ndarray), (name, type(o))
            assert o.dtype == r.dtype, (name, o.dtype, r.dtype)
            assert o.shape == r.shape, (name, o.shape, r.shape)
            np.testing.assert_allclose(o, r, rtol=tol, atol=tol * (1 + np.abs(r).max(initial=0)))
            for ir, io in zip(inputs_r, inputs_o):
                if isinstance(ir, np.ndarray):
                    assert (o is io) == (r is ir), (name, "identity differs")
                    assert np.may_share_memory(o, io) == np.may_share_memory(r, ir), (name, "sharing differs")
        else:
            assert type(o) is type(r) or (isinstance(r, complex) and isinstance(o, complex)), (name, type(o), type(r))
            if isinstance(r, int):
                assert o == r, (name, o, r)
            else:
                np.testing.assert_allclose(o, r, rtol=tol, atol=tol)
    return out


def vec(rng, n, prefix, kind="contig"):
    dt = DT[prefix]
    v = rng.standard_normal(2 * n + 2)
    if prefix in "cz":
        v = v + 1j * rng.standard_normal(2 * n + 2)
    v = v.astype(dt)
    if kind == "contig":
        return v[:n].copy()
    if kind == "strided":
        return v[: 2 * n : 2]
    if kind == "list":
        return v[:n].tolist()
    if kind == "f2d":
        return np.asfortranarray(v[:n].reshape(-1, 1) if n % 2 else v[:n].reshape(2, -1))
    if kind == "c2d":
        return np.ascontiguousarray(v[:n].reshape(-1, 1) if n % 2 else v[:n].reshape(2, -1))
    if kind == "other":  # another dtype (cast by the wrapper)
        return v[:n].astype(np.complex128 if prefix in "cz" else np.float32 if prefix == "d" else np.float64)
    if kind == "int":
        return np.arange(1, n + 1)
    raise AssertionError(kind)


KINDS = ("contig", "strided", "list", "f2d", "c2d", "other", "int")
OPTS = [
    {},
    {"incx": 2},
    {"incx": -1},
    {"incx": -2, "offx": 1},
    {"offx": 2},
    {"n": 3},
    {"n": 0},
    {"n": -1},
    {"incy": -1},
    {"incy": 2, "offy": 1},
    {"incx": 3, "incy": -2, "n": 2},
]
BAD_OPTS = [
    ({"incx": 0}, "incx"),
    ({"incy": 0}, "incy"),
    ({"offx": -1}, "offx"),
    ({"offx": 8}, "offx"),
    ({"offy": 8}, "offy"),
    ({"n": 9}, "n"),
    ({"n": 5, "incx": 2}, "n"),
]


def prefixes_of(family: str) -> list[str]:
    return [n for n in level12() if n[1:] == family or n == "i" + n[1] + "amax" and family == "amax"]


def names(*families: str) -> list[str]:
    out = []
    for n in level12():
        base = n[1:]
        if n.startswith("i") and n.endswith("amax"):
            base = "amax"
        elif n in ("csrot", "zdrot"):
            base = "rot"
        elif n in ("csscal", "zdscal"):
            base = "rscal"
        elif n in ("scnrm2", "dznrm2"):
            base = "nrm2"
        elif n in ("scasum", "dzasum"):
            base = "asum"
        if base in families:
            out.append(n)
    return out


def vprefix(name: str) -> str:
    """Precision of the vectors a routine takes."""
    special = {"csrot": "c", "zdrot": "z", "csscal": "c", "zdscal": "z", "scnrm2": "c", "dznrm2": "z",
               "scasum": "c", "dzasum": "z"}
    if name in special:
        return special[name]
    if name.startswith("i") and name.endswith("amax"):
        return name[1]
    return name[0]


# ---------------------------------------------------------------------------------------------------
# namespace and signatures
# ---------------------------------------------------------------------------------------------------


def test_exports_exactly_scipy_level1():
    ours = set(_level1.__all__)
    level1 = set(names("rotg", "rotmg", "rot", "rotm", "swap", "scal", "rscal", "copy", "axpy", "dot", "dotu",
                       "dotc", "nrm2", "asum", "amax"))
    assert ours == level1
    assert not ours & set(_level2.__all__)
    for n in ours:
        assert getattr(tb, n) is getattr(_level1, n)
        assert getattr(tb, n).__name__ == n


def _scipy_params(name: str) -> list[str]:
    first = getattr(sb, name).__doc__.strip().splitlines()[0]
    inside = first[first.index("(") + 1 : first.rindex(")")]
    return [p for p in re.split(r"[\[\],\s]+", inside) if p]


@pytest.mark.parametrize("name", sorted(_level1.__all__))
def test_signature_matches_scipy(name):
    params = list(inspect.signature(getattr(tb, name)).parameters)
    assert params == _scipy_params(name)
    doc = getattr(sb, name).__doc__
    for p, par in inspect.signature(getattr(tb, name)).parameters.items():
        m = re.search(rf"^{p} : input .*\n\s+Default: (.*)$", doc, re.M)
        if m and par.default is not inspect.Parameter.empty and par.default is not None:
            d = m.group(1).strip()
            if d.startswith("("):
                d = complex(*map(float, d.strip("()").split(",")))
            else:
                try:
                    d = float(d)
                except ValueError:
                    continue
            assert par.default == d, (name, p, par.default, d)


# ---------------------------------------------------------------------------------------------------
# routines
# ---------------------------------------------------------------------------------------------------

SIZE = 7


def _build_xy(name, kind_x, kind_y, opts, seed, extra=()):
    p = vprefix(name)

    def build():
        rng = np.random.default_rng(seed)
        x = vec(rng, SIZE, p, kind_x)
        y = vec(rng, SIZE, p, kind_y)
        return (x, y, *extra), dict(opts)

    return build


@pytest.mark.parametrize("name", names("swap", "copy", "axpy", "dot", "dotu", "dotc"))
@pytest.mark.parametrize("opts", OPTS, ids=str)
def test_two_vector_options(name, opts):
    compare(name, _build_xy(name, "contig", "contig", opts, 1))


@pytest.mark.parametrize("name", names("swap", "copy", "axpy", "dot", "dotu", "dotc"))
@pytest.mark.parametrize("kx,ky", list(itertools.product(KINDS, ("contig", "strided", "f2d", "c2d", "list", "other"))))
def test_two_vector_layouts(name, kx, ky):
    compare(name, _build_xy(name, kx, ky, {}, 2))


@pytest.mark.parametrize("name", names("swap", "copy", "axpy", "dot", "dotu", "dotc", "rot", "rotm"))
@pytest.mark.parametrize("opts,arg", BAD_OPTS, ids=str)
def test_two_vector_errors(name, opts, arg):
    extra = ()
    if name.endswith("rotm"):
        extra = ([-1.0, 0.5, 0.2, -0.3, 0.9],)
    elif "rot" in name:
        extra = (0.6, 0.8)
    exc = compare(name, _build_xy(name, "contig", "contig", opts, 3, extra))
    assert isinstance(exc, Exception), "scipy accepted a bad argument"
    args, kw = _build_xy(name, "contig", "contig", opts, 3, extra)()
    with pytest.raises((ValueError, TypeError), match=arg):
        getattr(tb, name)(*args, **kw)


@pytest.mark.parametrize("name", names("axpy", "scal", "rscal"))
@pytest.mark.parametrize("a", [2.5, -1, 0.5 + 2j, None, "3", np.float32(2.0), [1.5, 7.0]])
def test_scalar_conversion(name, a):
    p = vprefix(name)

    def build():
        rng = np.random.default_rng(4)
        x = vec(rng, SIZE, p)
        if name.endswith("axpy"):
            return (x, vec(rng, SIZE, p)), {"a": a}
        return (a, x), {}

    compare(name, build)


@pytest.mark.parametrize("name", names("scal", "rscal"))
@pytest.mark.parametrize("opts", [o for o in OPTS if "incy" not in o and "offy" not in o], ids=str)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ow", [None, 0, 1])
def test_scal(name, opts, kind, ow):
    p = vprefix(name)
    kw = dict(opts)
    if ow is not None:
        if name in ("csscal", "zdscal"):
            kw["overwrite_x"] = ow
        elif ow:
            return

    def build():
        rng = np.random.default_rng(5)
        return (1.7, vec(rng, SIZE, p, kind)), dict(kw)

    compare(name, build)


@pytest.mark.parametrize("name", names("rot", "rotm"))
@pytest.mark.parametrize("opts", OPTS, ids=str)
@pytest.mark.parametrize("ow", [(0, 0), (1, 1), (1, 0)])
@pytest.mark.parametrize("kind", ["contig", "strided", "f2d", "list"])
def test_rot(name, opts, ow, kind):
    if name.endswith("rotm"):
        rng = np.random.default_rng(6)
        flags = [-2.0, -1.0, 0.0, 1.0]
        params = [[f, *rng.standard_normal(4)] for f in flags]
    else:
        params = [(0.6, 0.8), (0.6 + 0.3j, np.float32(-0.8))]
    for par in params:
        extra = (par,) if name.endswith("rotm") else tuple(par)
        kw = dict(opts, overwrite_x=ow[0], overwrite_y=ow[1])
        compare(name, _build_xy(name, kind, kind, kw, 7, extra))


@pytest.mark.parametrize("name", names("nrm2", "asum", "amax"))
@pytest.mark.parametrize("opts", [o for o in OPTS if "incy" not in o and "offy" not in o] + [{"incx": 0}, {"offx": 9}, {"n": 9}], ids=str)
@pytest.mark.parametrize("kind", KINDS)
def test_reductions(name, opts, kind):
    p = vprefix(name)

    def build():
        rng = np.random.default_rng(8)
        return (vec(rng, SIZE, p, kind),), dict(opts)

    compare(name, build)


@pytest.mark.parametrize("name", names("nrm2", "asum", "amax", "dot", "dotc", "dotu"))
def test_against_numpy(name):
    p = vprefix(name)
    rng = np.random.default_rng(9)
    x = vec(rng, 9, p)
    y = vec(rng, 9, p)
    f = getattr(tb, name)
    tol = TOL[p] * 10
    if "nrm2" in name:
        assert f(x) == pytest.approx(np.linalg.norm(x), rel=tol)
    elif "asum" in name:
        assert f(x) == pytest.approx(np.abs(x.real).sum() + np.abs(x.imag).sum(), rel=tol)
    elif "amax" in name:
        assert f(x) == int(np.argmax(np.abs(x.real) + np.abs(x.imag)))
    elif name.endswith("dotc"):
        assert f(x, y) == pytest.approx(np.vdot(x, y), rel=tol)
    else:
        assert f(x, y) == pytest.approx(np.dot(x, y), rel=tol)


@pytest.mark.parametrize("name", names("rotg"))
@pytest.mark.parametrize("ab", [(3.0, 4.0), (0.0, 2.0), (-1.5, 0.25), (1 + 2j, 3 - 1j), (0, 0)])
def test_rotg(name, ab):
    a, b = ab
    if name[0] in "sd":
        a, b = complex(a).real, complex(b).real
    ref = getattr(sb, name)(a, b)
    out = getattr(tb, name)(a, b)
    assert type(out) is tuple and len(out) == 2
    tol = TOL[name[0]]
    if name[0] in "cz":
        # SciPy returns c as a complex whose imaginary part is uninitialised memory; ours is 0.
        assert type(out[0]) is complex and out[0].imag == 0
        assert out[0].real == pytest.approx(ref[0].real, rel=tol, abs=tol)
        assert out[1] == pytest.approx(ref[1], rel=tol, abs=tol)
    else:
        assert type(out[0]) is float and type(out[1]) is float
        assert out == pytest.approx(ref, rel=tol, abs=tol)


@pytest.mark.parametrize("name", names("rotmg"))
@pytest.mark.parametrize("args", [(1.0, 2.0, 3.0, 4.0), (2.0, 1.0, 4.0, -1.0), (1.0, 1.0, 0.0, 1.0), (1.0, 1.0, 1.0, 0.0)])
def test_rotmg(name, args):
    compare(name, lambda: (args, {}))


def test_rotm_param_length():
    with pytest.raises((ValueError, TypeError), match="param"):
        tb.drotm(np.ones(3), np.ones(3), [1.0, 2.0])


def test_bad_array_types():
    with pytest.raises((ValueError, TypeError), match="x"):
        tb.ddot("abc", np.ones(3))
    with pytest.raises(TypeError):
        tb.daxpy(np.ones(3), np.ones(3), 3, 1.0, 0, 1, 0, 1, 5)
    with pytest.raises(TypeError, match="a"):
        tb.zaxpy(np.ones(3), np.ones(3), a="2")


def test_fast_path_semantics():
    """The fast path must give exactly the general path's semantics."""
    x = np.arange(1.0, 5.0)
    y = np.ones(4)
    assert tb.daxpy(x, y) is y
    np.testing.assert_array_equal(y, x + 1)
    big = np.ones(8)
    view = big[:4]
    assert tb.daxpy(x, view) is view  # contiguous view: in place
    assert big[0] == 2.0
    s = np.ones(8)[::2]
    r = tb.daxpy(x, s)
    assert r is not s and not np.may_share_memory(r, s)
    ro = np.ones(8)[:4]
    ro.flags.writeable = False
    r = tb.daxpy(x, ro)
    assert r is not ro and np.all(ro == 1.0)  # read-only view: copied
    assert tb.ddot(x, x) == 30.0 and type(tb.ddot(x, x)) is float
    assert tb.idamax(x) == 3 and type(tb.idamax(x)) is int
    assert tb.sdot(x.astype(np.float32), x.astype(np.float32)) == 30.0
    # a given as a complex to a real routine keeps its real part (fast path falls back)
    y = np.zeros(4)
    assert tb.daxpy(x, y, a=2 + 5j) is y and y[3] == 8.0
