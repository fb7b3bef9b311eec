"""The C small-call path of the Level-3 drop-in routines (tileblas.blas._fastpath).

Every routine, flag and operand layout it handles gives SciPy's result (values within an error bound,
same dtype, shape, Fortran order, same in-place behaviour), and everything it does not handle reaches the
Python path unchanged: errors name the argument, runtimes in force are used, and calls at or above the
path policy's limits are run by the runtime.
"""
from __future__ import annotations

import inspect
import itertools
import sys

import numpy as np
import pytest
import scipy.linalg.blas as sb

import tileblas
import tileblas.blas as tb
from tileblas.blas import _dispatch
from tileblas.blas._level3 import LEVEL3_FAMILIES
from tileblas.policy import _dropin
from tileblas.runtime import _runtime

fp = pytest.importorskip("tileblas.blas._fastpath")

DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
FAMILIES = LEVEL3_FAMILIES


@pytest.fixture(autouse=True)
def _fast_on():
    """The default runtime, the small-call path on (one Python-path call decides it)."""
    _runtime.set_runtime(None)
    tb.dgemm(1.0, [[1.0]], [[1.0]])  # lists: Python path
    assert fp.config()["enabled"]
    yield


def _with(field, items, drop=()):
    """Configure the C path as it is, with ``items`` over its dict ``field`` (keys containing one of
    ``drop`` left out first); the configuration before."""
    saved = fp.config()
    fp.configure({**saved, field: {**{k: v for k, v in saved[field].items() if not any(d in k for d in drop)},
                                   **items}})
    return saved


def _rand(rng, shape, dtype, layout="F"):
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    x = x.astype(dtype)
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "C":
        return np.ascontiguousarray(x)
    big = np.zeros((shape[0] * 2, shape[1] * 2), dtype, order="F")  # strided view
    big[::2, ::2] = x
    return big[::2, ::2]


def _tri(rng, n, dtype, layout):
    a = _rand(rng, (n, n), dtype, "F") + (2 * n) * np.eye(n, dtype=dtype)  # well conditioned
    return _rand_like(a, layout)


def _rand_like(a, layout):
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "C":
        return np.ascontiguousarray(a)
    big = np.zeros((a.shape[0] * 2, a.shape[1] * 2), a.dtype, order="F")
    big[::2, ::2] = a
    return big[::2, ::2]


def _dup(v):
    """A copy with the same layout (Fortran, C, or a strided view)."""
    if not isinstance(v, np.ndarray):
        return v
    if v.flags.f_contiguous or v.flags.c_contiguous:
        return v.copy(order="K")
    return _rand_like(v.copy(), "S")


def _close(got, ref, scale, k, dtype):
    eps = np.finfo(dtype).eps
    bound = 16 * (k + 2) * eps * max(scale, 1e-30)
    err = float(np.max(np.abs(np.asarray(got) - np.asarray(ref)), initial=0.0))
    assert err <= bound, f"error {err:.3g} above bound {bound:.3g}"


def _cases():
    for fam, prefixes in FAMILIES.items():
        for p in prefixes:
            yield fam, p


@pytest.mark.parametrize("fam,p", list(_cases()))
def test_small_path_matches_scipy(fam, p):
    dt = DT[p]
    rng = np.random.default_rng(abs(hash((fam, p))) % 2**32)
    name = p + fam
    small = fp.Level3(fam, p)
    mine, theirs = getattr(tb, name), getattr(sb, name)
    handled = 0
    layouts = ("F", "C", "S")
    for n in (1, 5, 16):
        m, k = n + 2, n + 1
        if fam == "gemm":
            for ta, tbf, la, lb in itertools.product((0, 1, 2), (0, 1, 2), layouts, layouts):
                a = _rand(rng, (k, m) if ta else (m, k), dt, la)
                b = _rand(rng, (n, k) if tbf else (k, n), dt, lb)
                args, kw = (1.5, a, b), dict(trans_a=ta, trans_b=tbf)
                scale = 1.5 * np.max(np.abs(a)) * np.max(np.abs(b)) * k
                handled += _compare(small, mine, theirs, args, kw, scale, k, dt, out_shape=(m, n))
        elif fam in ("symm", "hemm"):
            for sd, lo, la, lb in itertools.product((0, 1), (0, 1), layouts, layouts):
                s = m if sd == 0 else n
                a = _rand(rng, (s, s), dt, la)
                b = _rand(rng, (m, n), dt, lb)
                scale = 1.5 * np.max(np.abs(a)) * np.max(np.abs(b)) * s
                handled += _compare(small, mine, theirs, (1.5, a, b), dict(side=sd, lower=lo), scale, s, dt,
                                    out_shape=(m, n))
        elif fam in ("syrk", "herk", "syr2k", "her2k"):
            two = fam.endswith("2k")
            herm = fam.startswith("her")
            trs = (0, 1, 2) if p in "sd" else ((0, 2) if herm else (0, 1))
            for tr, lo, la, lb in itertools.product(trs, (0, 1), layouts, layouts if two else ("F",)):
                a = _rand(rng, (k, n) if tr else (n, k), dt, la)
                args = (1.5, a) + ((_rand(rng, a.shape, dt, lb),) if two else ())
                scale = 1.5 * np.max(np.abs(a)) ** 2 * k * (3 if two else 1)
                handled += _compare(small, mine, theirs, args, dict(trans=tr, lower=lo), scale, k, dt,
                                    out_shape=(n, n), rank=True)
        else:
            for sd, lo, ta, dg, la, lb in itertools.product((0, 1), (0, 1), (0, 1, 2), (0, 1), layouts, layouts):
                s = m if sd == 0 else n
                a = _tri(rng, s, dt, la)
                b = _rand(rng, (m, n), dt, lb)
                if fam == "trmm":
                    scale = 1.5 * np.max(np.abs(a)) * np.max(np.abs(b)) * s
                else:
                    scale = 1.5 * np.max(np.abs(b)) * 4  # diagonally dominant: |x| <~ |b| / n
                flags = dict(side=sd, lower=lo, trans_a=ta, diag=dg)
                handled += _compare(small, mine, theirs, (1.5, a, b), flags, scale, s, dt,
                                    out_shape=(m, n), out_name="b")
    assert handled > 0


_PARAMS = {
    "gemm": ("alpha", "a", "b", "beta", "c", "trans_a", "trans_b", "overwrite_c"),
    "symm": ("alpha", "a", "b", "beta", "c", "side", "lower", "overwrite_c"),
    "syrk": ("alpha", "a", "beta", "c", "trans", "lower", "overwrite_c"),
    "syr2k": ("alpha", "a", "b", "beta", "c", "trans", "lower", "overwrite_c"),
    "trmm": ("alpha", "a", "b", "side", "lower", "trans_a", "diag", "overwrite_b"),
}
_PARAMS.update(hemm=_PARAMS["symm"], herk=_PARAMS["syrk"], her2k=_PARAMS["syr2k"], trsm=_PARAMS["trmm"])
_DEFAULTS = {"beta": 0.0, "c": None, "trans_a": 0, "trans_b": 0, "overwrite_c": 0, "side": 0, "lower": 0,
             "trans": 0, "diag": 0, "overwrite_b": 0}


def _positional(fam, args, kw):
    names = _PARAMS[fam]
    full = dict(zip(names, args))
    for nm in names[len(args):]:
        full[nm] = kw.get(nm, _DEFAULTS[nm])
    return tuple(full[nm] for nm in names)


def _compare(small, mine, theirs, args, kw, scale, k, dt, out_shape, out_name="c", rank=False):
    """Compare the three ways (C path directly, the public routine, SciPy) on one call, with the output
    given or not, beta 0 or not, overwrite or not.  Returns how many calls the C path handled."""
    fam = mine.__name__[1:]
    handled = 0
    rng = np.random.default_rng(0)
    variants = [dict()]
    if out_name == "c":
        c0 = _rand(rng, out_shape, dt, "F")
        if rank:  # a Hermitian result's diagonal must be real for herk/her2k's beta*c
            c0 = np.asfortranarray(c0 + c0.conj().T) if fam.startswith("her") else c0
        variants += [dict(beta=0.5, c=c0), dict(beta=0.5, c=c0, overwrite_c=1),
                     dict(beta=0.5, c=np.ascontiguousarray(c0), overwrite_c=1)]
    else:
        variants += [dict(overwrite_b=1)]
    for extra in variants:
        kw2 = {**kw, **extra}
        ins = [_dup(v) for v in args]
        cval = kw2.get(out_name) if out_name == "c" else ins[2]
        sc = scale + (0.5 * float(np.max(np.abs(cval))) if out_name == "c" and "c" in extra else 0.0)
        # SciPy on copies
        s_args = [_dup(v) for v in ins]
        s_kw = {kk: _dup(v) for kk, v in kw2.items()}
        ref = theirs(*s_args, **s_kw)
        s_inplace = (ref is s_kw.get(out_name)) if out_name == "c" else (ref is s_args[2])
        # the C path directly
        d_args = [_dup(v) for v in ins]
        d_kw = {kk: _dup(v) for kk, v in kw2.items()}
        got = small(*_positional(fam, d_args, d_kw))
        if got is not NotImplemented:
            handled += 1
            d_out = d_kw.get(out_name) if out_name == "c" else d_args[2]
            assert (got is d_out) == s_inplace
            _check_result(got, ref, sc, k, dt)
        # the public routine
        p_args = [_dup(v) for v in ins]
        p_kw = {kk: _dup(v) for kk, v in kw2.items()}
        res = mine(*p_args, **p_kw)
        p_out = p_kw.get(out_name) if out_name == "c" else p_args[2]
        assert (res is p_out) == s_inplace
        _check_result(res, ref, sc, k, dt)
        if rank and fam.startswith("her"):  # a real diagonal, with SciPy's signs (zero imaginary parts: +0)
            np.testing.assert_array_equal(np.signbit(np.diagonal(res).imag), np.signbit(np.diagonal(ref).imag))
    return handled


def _check_result(got, ref, scale, k, dt):
    assert isinstance(got, np.ndarray) and got.dtype == ref.dtype and got.shape == ref.shape
    assert got.flags.f_contiguous
    _close(got, ref, scale, k, dt)


def test_common_calls_take_the_small_path():
    """The C path really handles the common cases (not only falls back)."""
    rng = np.random.default_rng(1)
    a, b = _rand(rng, (16, 16), np.float64), _rand(rng, (16, 16), np.float64, "C")
    assert fp.Level3("gemm", "d")(1.0, a, b, 0.0, None, 0, 0, 0) is not NotImplemented
    assert fp.Level3("syrk", "z")(1.0, a.astype(complex), 0.0, None, 1, 0, 0) is not NotImplemented
    t = _tri(rng, 16, np.float32, "C")
    assert fp.Level3("trsm", "s")(1.0, t, b.astype(np.float32), 1, 1, 1, 0, 0) is not NotImplemented


def test_the_front_binds_keywords_and_defaults_in_c():
    """A routine with a front binds a call made as users make it (keywords, defaults left out) to its
    parameters in C and runs the small path; what it does not bind goes, as made, to the fallback."""
    calls = []

    def fallback(*args, **kw):
        calls.append((args, kw))
        return "python"

    front = fp.Level3("gemm", "d").front(fallback, _PARAMS["gemm"], (0.0, None, 0, 0, 0))
    rng = np.random.default_rng(2)
    a, b = _rand(rng, (6, 5), np.float64), _rand(rng, (5, 4), np.float64, "C")
    scale = np.max(np.abs(a)) * np.max(np.abs(b)) * 5
    for args, kw, ref in [
        ((1.0, a, b), {}, a @ b),
        ((2.0,), dict(a=a, b=b), 2 * a @ b),
        ((), dict(b=b, a=a, alpha=1.0, beta=0.0), a @ b),
        ((1.0, a, b.T.copy(order="F")), dict(trans_b=1), a @ b),
        ((1.0, a, b, 1.0), dict(c=np.ones((6, 4))), a @ b + 1),
        ((1.0, a, b, 0.0, None, 0, 0, 0), {}, a @ b),
    ]:
        got = front(*args, **kw)
        assert calls == [], kw
        _check_result(got, ref, 2 * scale, 5, np.float64)
    c = np.asfortranarray(np.ones((6, 4)))
    assert front(1.0, a, b, beta=1.0, c=c, overwrite_c=1) is c and calls == []  # in place, by keyword
    _close(c, a @ b + 1, scale, 5, np.float64)
    for args, kw in [
        ((1.0, a), {}),                                   # b missing
        ((1.0, a, b), dict(alpha=2.0)),                   # alpha twice
        ((1.0, a, b), dict(bogus=1)),                     # no such parameter
        ((1.0, a, b, 0.0, None, 0, 0, 0, 0), {}),         # one argument too many
        ((1.0, a, b), dict(trans_a=5)),                   # bound, but a flag the small path declines
        ((1.0, a.tolist(), b), {}),                       # bound, but a list
    ]:
        calls.clear()
        assert front(*args, **kw) == "python"
        assert len(calls) == 1 and len(calls[0][0]) == len(args) and sorted(calls[0][1]) == sorted(kw)
        assert all(x is y for x, y in zip(calls[0][0], args))
        assert all(calls[0][1][key] is kw[key] for key in kw)
    # the routine's own errors, raised by the fallback, name the argument
    with pytest.raises(TypeError, match="bogus"):
        tb.dgemm(1.0, a, b, bogus=1)
    with pytest.raises(TypeError, match="alpha"):
        tb.dgemm(1.0, a, b, alpha=2.0)
    with pytest.raises(TypeError, match="'b'"):
        tb.dgemm(1.0, a)


def test_the_front_is_refused_bad_parameters():
    with pytest.raises(TypeError, match="fallback must be callable"):
        fp.Level3("gemm", "d").front(3, _PARAMS["gemm"], ())
    with pytest.raises(ValueError, match="8 parameter names"):
        fp.Level3("gemm", "d").front(print, ("alpha", "a"), ())
    with pytest.raises(ValueError, match="defaults"):
        fp.Level3("gemm", "d").front(print, _PARAMS["gemm"], tuple(range(9)))
    with pytest.raises(TypeError, match="must be str"):
        fp.Level3("syrk", "d").front(print, (1, 2, 3, 4, 5, 6, 7), ())
    # a bare path (no fallback) binds nothing: keywords or missing arguments are NotImplemented
    a = np.ones((2, 2))
    assert fp.Level3("gemm", "d")(1.0, a, a, beta=0.0) is NotImplemented
    assert fp.Level3("gemm", "d")(1.0, a, a) is NotImplemented


@pytest.mark.parametrize("name", sorted(n for n in tb.__all__ if n[1:] in FAMILIES))
def test_public_level3_routines_look_like_functions(name):
    import pickle

    fn = getattr(tb, name)
    assert fn.__name__ == fn.__qualname__ == name and fn.__module__ == "tileblas.blas"
    assert fn.__doc__ == fn.__wrapped__.__doc__ and name in fn.__doc__
    assert inspect.signature(fn) == inspect.signature(fn.__wrapped__)
    assert list(inspect.signature(fn).parameters) == list(_PARAMS[name[1:]])
    assert pickle.loads(pickle.dumps(fn)) is fn
    assert name in repr(fn)


@pytest.mark.parametrize("args", [
    (1.0, [[1.0]], np.ones((1, 1)), 0.0, None, 0, 0, 0),              # a list: Python converts
    (1.0, np.ones((2, 2), complex), np.ones((2, 2)), 0.0, None, 0, 0, 0),   # complex to real: NumPy warns
    (1.0, np.ones((2, 2), object), np.ones((2, 2)), 0.0, None, 0, 0, 0),    # not a number dtype
    (1.0, np.ones((2, 3)), np.ones((2, 2)), 0.0, None, 0, 0, 0),      # shapes do not fit: Python raises
    (1.0, np.ones((2, 2)), np.ones((2, 2)), 0.0, None, 3, 0, 0),      # flag out of range
    (1.0, np.ones((2, 2)), np.ones((2, 2)), 0.0, None, [1], 0, 0),    # a list flag: Python raises
    (1.0, np.ones((2, 2)), np.ones((2, 2)), 0.0, None, float("nan"), 0, 0),  # not finite: Python raises
    (1.0, np.ones((2, 2)), np.ones((2, 2)), 0.0, None, np.int64(3), 0, 0),  # NumPy int out of range
    ("1", np.ones((2, 2)), np.ones((2, 2)), 0.0, None, 0, 0, 0),      # not a number
    (1.0, np.ones((0, 2)), np.ones((2, 2)), 0.0, None, 0, 0, 0),      # empty
    (1.0, np.ones((2, 2)), np.ones((2, 2)), 0.0, np.ones((3, 3)), 0, 0, 0),  # c of another shape
    (1.0, np.ones(2), np.ones((2, 2)), 0.0, None, 0, 0, 0),           # a column that does not fit
])
def test_unusual_calls_go_to_the_python_path(args):
    assert fp.Level3("gemm", "d")(*args) is NotImplemented


def test_errors_still_name_the_argument():
    with pytest.raises(ValueError, match="trans_a"):
        tb.dgemm(1.0, np.ones((2, 2)), np.ones((2, 2)), trans_a=3)
    with pytest.raises(ValueError, match="inner dimensions"):
        tb.dgemm(1.0, np.ones((2, 3)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="c has shape"):
        tb.dgemm(1.0, np.ones((2, 2)), np.ones((2, 2)), 1.0, np.ones((3, 3)))


@pytest.mark.parametrize("p", list(DT))
def test_in_place_output_sharing_an_input_is_exact(p):
    """An output written in place that is also an input (c += a @ c): the C path reads the input from a copy
    of its own first, as the Python path does, for every family; the result is exact, not BLAS's aliasing."""
    dt = DT[p]
    rng = np.random.default_rng(2)
    n = 8
    bound = 64 * n * np.finfo(dt).eps

    def check(fam, make, ref_of, out_at):
        for layout in "FC":
            args = make(layout)
            ref = ref_of(*[np.array(x) if isinstance(x, np.ndarray) else x for x in args])
            out = args[out_at]
            got = fp.Level3(fam, p)(*args)
            assert got is out, (fam, layout)
            scale = max(float(np.max(np.abs(x))) for x in args if isinstance(x, np.ndarray)) ** 2 * n
            assert np.max(np.abs(got - ref)) <= bound * scale, (p, fam, layout)

    def mat(layout, sym=False):
        x = _rand(rng, (n, n), dt)
        if sym:
            x = x + x.T
        return _rand_like(x, layout)

    # c = 2 a c + c, c the output and the second operand (c Fortran-ordered: it is written in place)
    def gemm_args(layout):
        c = mat("F")
        return (2.0, mat(layout), c, 1.0, c, 0, 0, 1)
    check("gemm", gemm_args, lambda al, a, b, be, c, *f: al * (a @ b) + be * c, 4)

    def symm_args(layout):
        c = mat("F")
        return (2.0, mat(layout, sym=True), c, 1.0, c, 0, 0, 1)
    check("symm", symm_args, lambda al, a, b, be, c, *f: al * (np.triu(a) + np.triu(a, 1).T) @ b + be * c, 4)

    def syr2k_args(layout):
        c = mat("F")
        return (1.0, c, mat(layout), 1.0, c, 0, 0, 1)

    def syr2k_ref(al, a, b, be, c, *f):
        full = al * (a @ b.T + b @ a.T) + be * c
        return np.triu(full) + np.tril(c, -1)
    check("syr2k", syr2k_args, syr2k_ref, 4)

    def syrk_args(layout):
        c = mat("F")
        return (1.0, c, 1.0, c, 0, 0, 1)
    check("syrk", syrk_args, lambda al, a, be, c, *f: np.triu(al * a @ a.T + be * c) + np.tril(c, -1), 3)

    for fam in ("trmm", "trsm"):
        def tri_args(layout):
            b = mat("F")
            return (1.0, b, b, 0, 0, 0, 0, 1)  # the triangle (upper part of b) is b itself

        def tri_ref(al, a, b, *f, fam=fam):
            t = np.triu(a)
            return al * (t @ b) if fam == "trmm" else np.linalg.solve(t, al * b)
        args = tri_args("F")
        if fam == "trsm":  # a well-conditioned triangle
            args[1][np.diag_indices(n)] += 2 * n
        ref = tri_ref(*[np.array(x) if isinstance(x, np.ndarray) else x for x in args])
        got = fp.Level3(fam, p)(*args)
        assert got is args[2]
        assert np.max(np.abs(got - ref)) <= bound * float(np.max(np.abs(ref))) * n * 4 * n, (p, fam)
    a = _rand(rng, (n, n), dt)
    out = tb.__dict__[p + "gemm"](2.0, a, a, 0.0, a, overwrite_c=1)  # through the public routine as well
    assert out is a


def test_a_runtime_in_force_gets_the_call():
    rng = np.random.default_rng(3)
    a = _rand(rng, (16, 16), np.float64)
    with tileblas.Runtime(2) as rt:
        assert fp.Level3("gemm", "d")(1.0, a, a, 0.0, None, 0, 0, 0) is NotImplemented
        n0 = rt.stats()["calls"] if "calls" in rt.stats() else None
        c = tb.dgemm(1.0, a, a)
        assert rt.last_profile() is not None and rt.last_profile().shape[:2] == (16, 16)
        if n0 is not None:
            assert rt.stats()["calls"] == n0 + 1
    _close(c, a @ a, 16 * np.max(np.abs(a)) ** 2, 16, np.float64)


def test_replaced_default_runtime_turns_the_path_off():
    rng = np.random.default_rng(4)
    a = _rand(rng, (16, 16), np.float64)
    mine = tileblas.Runtime(2)
    prev = _runtime.set_runtime(mine)
    try:
        assert not fp.config()["enabled"]
        tb.dgemm(1.0, a, a)
        assert mine.last_profile() is not None  # the replacement ran it
    finally:
        _runtime.set_runtime(prev)
        mine.close()


def test_calls_at_the_limit_go_to_the_runtime(monkeypatch):
    rng = np.random.default_rng(5)
    a = _rand(rng, (16, 16), np.float64)
    saved = _with("limits", {"gemm": 2.0 * 16 ** 3})  # exactly this call's flops: the runtime's
    try:
        assert fp.Level3("gemm", "d")(1.0, a, a, 0.0, None, 0, 0, 0) is NotImplemented
        a15 = a[:15, :15].copy(order="F")
        assert fp.Level3("gemm", "d")(1.0, a15, a15, 0.0, None, 0, 0, 0) is not NotImplemented
        # both sides of the limit give SciPy's result, in every trmm/trsm variant
        for n, name in itertools.product((15, 16), ("dtrmm", "dtrsm", "ztrsm")):
            fam = name[1:]
            _with("limits", {fam: 16.0 ** 3 * (4 if name[0] == "z" else 1)}, drop=(fam + "/",))
            dt = DT[name[0]]
            for sd, lo, ta, dg in itertools.product((0, 1), (0, 1), (0, 1, 2), (0, 1)):
                t = _tri(rng, n, dt, "C")
                b = _rand(rng, (n, n), dt)
                got = getattr(tb, name)(1.5, t, b, side=sd, lower=lo, trans_a=ta, diag=dg)
                ref = getattr(sb, name)(1.5, t, b, side=sd, lower=lo, trans_a=ta, diag=dg)
                _close(got, ref, 1.5 * 4 * n * np.max(np.abs(b)) * np.max(np.abs(t)), n, dt)
    finally:
        fp.configure(saved)
    assert _dropin.config(2).limits["gemm"] == saved["limits"]["gemm"]


def test_trmm_trsm_limits_are_per_precision_and_side():
    """The recursion (Python path only) is chosen per precision, side and shape: the C path keeps every
    trmm/trsm call outside the recursion's window (order >= min_order with rhs_lo..rhs_hi right-hand
    sides; none for double precision with the triangle on the left, by the shipped rule) and leaves
    exactly the window's calls to the Python path; the flop limits are the tile crossovers."""
    from tileblas._tuning import get_tuning

    t = get_tuning()
    win = _dropin.config(2).windows
    for fam in ("trmm", "trsm"):
        for p in "sdcz":
            for side in "LR":
                expect = (float(t.recursive_min_order), float(t.recursive_rhs[0]), float(t.recursive_rhs[1]))
                if side == "L" and p not in t.recursive_left_prefixes:
                    expect = None
                assert win[f"{p}{fam}/{side}"] == expect
    _dispatch.apply_policy()
    assert fp.config()["windows"] == win
    saved = fp.config()
    rng = np.random.default_rng(8)
    t16 = _tri(rng, 16, np.float32, "F")
    try:
        _with("windows", {"strmm/L": (16.0, 4.0, 8.0), "dtrmm/L": None})
        small = fp.Level3("trmm", "s")
        for order, rhs, inside in [(16, 4, True), (16, 8, True), (20, 6, True), (15, 4, False), (16, 3, False),
                                   (16, 9, False)]:
            a = _tri(rng, order, np.float32, "F")
            b = _rand(rng, (order, rhs), np.float32)
            assert (small(1.0, a, b, 0, 0, 0, 0, 0) is NotImplemented) == inside, (order, rhs)
            got = tb.strmm(1.5, a, b)  # either path: SciPy's result
            _close(got, sb.strmm(1.5, a, b), 1.5 * order * np.max(np.abs(a)) * np.max(np.abs(b)), order, np.float32)
        b = _rand(rng, (4, 16), np.float32)  # side R has its own window (the shipped one: order >= 1024)
        assert small(1.0, t16, b, 1, 0, 0, 0, 0) is not NotImplemented
        assert fp.Level3("trmm", "d")(1.0, t16.astype(np.float64), b.T.astype(np.float64), 0, 0, 0, 0, 0) \
            is not NotImplemented
        _with("limits", {"trmm": 1.0}, drop=("trmm/",))  # a family's flop limit sets every precision and side
        assert all(v == 1.0 for k, v in fp.config()["limits"].items() if k == "trmm" or "trmm/" in k)
        assert fp.Level3("trmm", "d")(1.0, t16.astype(np.float64), b.T.astype(np.float64), 0, 0, 0, 0, 0) \
            is NotImplemented
        _with("limits", {"dtrmm/L": 1e300})  # one precision and side
        assert fp.Level3("trmm", "d")(1.0, t16.astype(np.float64), b.T.astype(np.float64), 0, 0, 0, 0, 0) \
            is not NotImplemented
        before = fp.config()
        with pytest.raises(ValueError, match="unknown Level-3 family"):
            _with("limits", {"dtrmm/X": 1.0})
        for bad in [{"dtrmm/X": None}, {"dtrmm/L": (0.0, 1.0, 2.0)}, {"dtrmm/L": (1.0, 2.0)}, {"dtrmm/L": 5.0}]:
            with pytest.raises(ValueError, match="windows"):
                _with("windows", bad)
        with pytest.raises(TypeError, match="windows"):
            fp.configure({**before, "windows": [("dtrmm/L", None)]})
        assert fp.config() == before  # a refused configuration changes nothing
    finally:
        fp.configure(saved)
    assert fp.config() == saved


def test_bad_module_state_arguments_are_refused():
    """configure refuses, naming the field, a configuration with a key missing or unknown, a family or
    routine it does not know, a value of the wrong type or range; a refused configuration changes nothing
    (it is checked completely first), and configure(config()) changes nothing either."""
    with pytest.raises(ValueError, match="unknown Level-3"):
        fp.Level3("gemv", "d")
    with pytest.raises(ValueError, match="Hermitian"):
        fp.Level3("hemm", "d")
    saved = fp.config()
    fp.configure(saved)
    assert fp.config() == saved
    bad = [({"limits": {**saved["limits"], "gemv": 1.0}}, ValueError, "unknown Level-3 family"),
           ({"limits": [1.0]}, TypeError, "limits"),
           ({"limits": {"gemm": -1.0}}, ValueError, "limits"),
           ({"limits": {"gemm": float("nan")}}, ValueError, "limits"),
           ({"entries": {"dgemv": 1}}, ValueError, "unknown Level-3 routine"),
           ({"one_thread_entries": {"dhemm": 1}}, ValueError, "unknown Level-3 routine"),
           ({"split": {"dgemm": 1.0}}, TypeError, "split"),
           ({"split": {"dgemv": (1.0, 2.0)}}, ValueError, "split"),
           ({"rank_gemm": {"zsyrk": (1.0, 2.0)}}, ValueError, "rank_gemm"),
           ({"enabled": 1}, TypeError, "enabled"),
           ({"contextvar": 3}, TypeError, "contextvar"),
           ({"pool_slot": 10 ** 6, "get_num_threads": 1}, (ValueError, RuntimeError), "pool_slot"),
           ({"pool_slot": 0, "get_num_threads": 0}, ValueError, "get_num_threads"),
           ({"max_parts": 65}, ValueError, "max_parts"),
           ({"max_parts": 1}, ValueError, "max_parts"),
           ({"part_fraction": 0}, ValueError, "part_fraction"),
           ({"herk_copy_k": 6.0}, TypeError, "herk_copy_k"),
           ({"gil_elements": 1.5}, TypeError, "gil_elements"),
           ({"gpu_ask": -1.0}, ValueError, "gpu_ask"),
           ({"gpu_hook": 3}, TypeError, "gpu_hook"),
           ({"nonsense": 1}, ValueError, "unknown key")]
    for change, exc, match in bad:
        with pytest.raises(exc, match=match):
            fp.configure({**saved, **change})
        assert fp.config() == saved, change  # nothing changed
    with pytest.raises(ValueError, match="no 'windows'"):
        fp.configure({k: v for k, v in saved.items() if k != "windows"})
    with pytest.raises(TypeError, match="configure takes a dict"):
        fp.configure([1.0])
    assert fp.config() == saved


def test_the_gpu_question_is_asked_from_gpu_ask_with_the_calls_shape_and_a_failing_hook_keeps_the_call():
    """A call the path would run with at least gpu_ask flops is put to gpu_hook(family, prefix, m, n, k)
    (the shape as the Python path counts it: syrk's m is its n); True leaves it to the Python path
    (decide() says 'gpu'), False runs it in C; a hook that raises is reported as unraisable and the call
    runs in C, right; an alpha of 0 or a call below gpu_ask is never put to it."""
    saved = fp.config()
    if not saved["enabled"]:
        pytest.skip("the C path is off here")
    asked = []
    answer = [True]

    def hook(*args):
        asked.append(args)
        if answer[0] is None:
            raise RuntimeError("broken hook")
        return answer[0]

    rng = np.random.default_rng(9)
    a = np.asfortranarray(rng.standard_normal((40, 24)))
    b = np.asfortranarray(rng.standard_normal((24, 30)))
    try:
        fp.configure({**saved, "gpu_ask": 3e4, "gpu_hook": hook})  # gemm 40x30x24: 5.8e4, syrk 3.9e4
        assert fp.decide(tb.dgemm, 1.0, a, b)["why"] == "gpu" and asked == [("gemm", "d", 40, 30, 24)]
        assert fp.decide(tb.dgemm, 0.0, a, b)["path"] != "python" and len(asked) == 1
        assert fp.decide(tb.dsyrk, 1.0, a)["why"] == "gpu" and asked[-1] == ("syrk", "d", 40, 40, 24)
        assert fp.decide(tb.dgemm, 1.0, np.asfortranarray(a[:20]), b)["path"] != "python"  # 2.9e4: not asked
        assert len(asked) == 2
        answer[0] = False
        assert fp.decide(tb.dgemm, 1.0, a, b)["path"] != "python" and len(asked) == 3
        answer[0] = None
        seen, before = [], sys.unraisablehook
        sys.unraisablehook = lambda u: seen.append(u.exc_value)
        try:
            c = tb.dgemm(1.0, a, b)
        finally:
            sys.unraisablehook = before
        assert len(seen) == 1 and "broken hook" in str(seen[0])
        np.testing.assert_allclose(c, a @ b, rtol=0, atol=4 * 24 * np.finfo(float).eps
                                   * (np.abs(a) @ np.abs(b)).max())
    finally:
        fp.configure(saved)
    assert fp.config() == saved


# ------------------------------------------------------------------------------------------ Level 1/2
def _l12_calls(p, n=7):
    """(name, args, index of an argument written in place or None) of common calls of each routine."""
    rng = np.random.default_rng(6)
    dt = DT[p]
    v = lambda: _rand(rng, (n, 1), dt)[:, 0].copy()  # noqa: E731
    m = lambda order: _rand_like(_rand(rng, (n, n), dt) + n * np.eye(n, dtype=dt), order)  # noqa: E731
    cplx = p in "cz"
    calls = [("axpy", (v(), v()), 1), ("scal", (1.5, v()), 1), ("copy", (v(), v()), 1), ("swap", (v(), v()), 0),
             ("nrm2" if not cplx else {"c": "=scnrm2", "z": "=dznrm2"}[p], (v(),), None),
             ("asum" if not cplx else {"c": "=scasum", "z": "=dzasum"}[p], (v(),), None),
             ("=i" + p + "amax", (v(),), None)]
    calls += [("dot", (v(), v()), None)] if not cplx else [("dotu", (v(), v()), None), ("dotc", (v(), v()), None)]
    for order in "FC":
        calls += [("gemv", (1.5, m(order), v()), None), ("trmv", (m(order), v()), None),
                  ("trsv", (m(order), v()), None)]
        calls += [("symv", (1.5, m(order), v()), None)] if not cplx else [("hemv", (1.5, m(order), v()), None)]
    calls += [("trmv", (m("F"), v(), 0, 1, 1, 2, 1, 1), 1), ("trsv", (m("C"), v(), 1, 0, 1, 1, 0, 0), None)]
    calls += ([("ger", (1.5, v(), v()), None), ("syr2", (1.5, v(), v()), None)] if not cplx
              else [("geru", (1.5, v(), v()), None), ("gerc", (1.5, v(), v()), None), ("her", (1.5, v()), None),
                    ("her2", (1.5, v(), v()), None)])
    calls += [("syr", (1.5, v(), 1), None)]
    rdt = np.float32 if p in "sc" else np.float64
    band = lambda k: np.asfortranarray(np.vstack([_rand(rng, (k, n), dt), n + _rand(rng, (1, n), dt)]))  # noqa: E731
    packed = lambda: _rand(rng, (n * (n + 1) // 2, 1), dt)[:, 0] + 0 * n  # noqa: E731
    tri_packed = packed()
    idx = np.cumsum(np.arange(1, n + 1)) - 1  # diagonal of an upper packed triangle
    tri_packed[idx] += n
    calls += [({"s": "rot", "d": "rot", "c": "=csrot", "z": "=zdrot"}[p], (v(), v(), 0.6, 0.8), None),
              ({"s": "rot", "d": "rot", "c": "=csrot", "z": "=zdrot"}[p], (v(), v(), 0.6, 0.8, None, 0, 1, 0, 1,
                                                                          1, 1), 0),
              ("rotg", (1.5, 2.5), None),
              ("gbmv", (n + 2, n, 1, 1, 1.5, band(2), v()), None), ("gbmv", (n, n, 1, 1, 1.5, band(2), v(), 1, 0,
                                                                          0.0, None, 1, 0, 1), None),
              ("spmv", (n, 1.5, packed(), v()), None), ("spr", (n, 1.5, v(), packed()), None),
              ("tbmv", (1, band(1), v()), None), ("tbsv", (1, band(1), v(), 1, 0, 0, 1, 0, 1), 2),
              ("tpmv", (n, tri_packed, v()), None), ("tpsv", (n, tri_packed, v(), 1, 0, 0, 2, 0), None)]
    if p in "sd":
        calls += [("rotm", (v(), v(), np.array([-1.0, 0.5, 0.1, -0.2, 0.7], rdt)), None),
                  ("rotmg", (1.0, 2.0, 3.0, 4.0), None), ("sbmv", (1, 1.5, band(1), v()), None),
                  ("spr2", (n, 1.5, v(), v(), packed()), None)]
    else:
        calls += [({"c": "=csscal", "z": "=zdscal"}[p], (1.5, v()), None),
                  ({"c": "=csscal", "z": "=zdscal"}[p], (1.5, v(), None, 0, 1, 1), 1),
                  ("hbmv", (1, 1.5, band(1), v()), None), ("hpmv", (n, 1.5, packed(), v()), None),
                  ("hpr", (n, 1.5, v(), packed()), None), ("hpr2", (n, 1.5, v(), v(), packed()), None)]
    out = []
    for nm, args, inplace in calls:
        out.append((nm[1:] if nm.startswith("=") else p + nm, args, inplace))
    return out


@pytest.mark.parametrize("p", list(DT))
def test_level12_small_path_matches_scipy(p):
    import inspect

    dt = DT[p]
    eps = np.finfo(dt).eps
    for name, args, inplace in _l12_calls(p):
        mine, theirs = getattr(tb, name), getattr(sb, name)
        a1 = [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args]
        a2 = [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args]
        got, ref = mine(*a1), theirs(*a2)
        scale = max([float(np.max(np.abs(a))) for a in args if isinstance(a, np.ndarray)]
                    + [abs(a) for a in args if isinstance(a, float)]) ** 2 * 16
        for g, r in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
            assert np.shape(g) == np.shape(r) and np.asarray(g).dtype == np.asarray(r).dtype, name
            assert np.max(np.abs(np.asarray(g) - np.asarray(r)), initial=0) <= 64 * 7 * eps * scale, name
        for x1, x2 in zip(a1, a2):  # same in-place effects
            if isinstance(x1, np.ndarray):
                assert np.max(np.abs(x1 - x2), initial=0) <= 64 * 7 * eps * scale, name
        if inplace is not None:
            r0 = got[0] if isinstance(got, tuple) else got
            assert (r0 is a1[inplace]) == ((ref[0] if isinstance(ref, tuple) else ref) is a2[inplace]), name
        # the C path itself handles the call: given every argument positionally, it returns a result
        params = list(inspect.signature(mine).parameters.values())
        # the same path with a fallback that only says "not handled": NotImplemented means the C path declined
        small = mine.front(lambda *a, **k: NotImplemented, tuple(q.name for q in params), ())
        full = [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args]
        full += [q.default for q in params[len(args):]]
        hermitian_c = name[1:] == "hemv" and not args[1].flags.f_contiguous  # a.T is conj(a): Python path
        assert (small(*full) is NotImplemented) == hermitian_c, name
        assert small(*full[:-1]) is NotImplemented, name  # a call it does not know: the Python path


def _transformed(x, how, p):
    """x (an ndarray) of another dtype ('dtype'), as a strided view ('strided') or byte-swapped ('swapped')."""
    if how == "dtype":
        other = _OTHER[p][0]
        return x.astype(other) if np.dtype(other).kind == "c" else x.real.astype(other)
    if how == "swapped":
        return x.astype(x.dtype.newbyteorder(">"))
    big = np.zeros(tuple(2 * d for d in x.shape), x.dtype, order="F" if x.flags.f_contiguous else "C")
    view = big[(slice(None, None, 2),) * x.ndim]
    view[...] = x
    return view


@pytest.mark.parametrize("p", list(DT))
@pytest.mark.parametrize("how", ["dtype", "strided", "swapped"])
def test_level12_arrays_of_another_dtype_or_strided_stay_in_c(p, how):
    """Level-1/2 arrays of another dtype, strided or byte-swapped: the C path copies them as the Python path
    does (they went to the Python path: dgemv with a float32 x 6x SciPy's time per call at n = 16), with
    SciPy's values, dtype, shape and in-place effects (a copy is returned, the caller's array untouched)."""
    dt = DT[p]
    eps = np.finfo(dt).eps
    for name, args, inplace in _l12_calls(p):
        if not any(isinstance(a, np.ndarray) for a in args):
            continue
        args = tuple(_transformed(a, how, p) if isinstance(a, np.ndarray) else a for a in args)
        mine, theirs = getattr(tb, name), getattr(sb, name)
        def copies():  # the strided views stay strided
            if how == "strided":
                return [_transformed(np.ascontiguousarray(a), how, p) if isinstance(a, np.ndarray) else a
                        for a in args]
            return [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args]

        a1, a2 = copies(), copies()
        keep = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        got, ref = mine(*a1), theirs(*a2)
        scale = max([float(np.max(np.abs(a))) for a in args if isinstance(a, np.ndarray)]
                    + [abs(a) for a in args if isinstance(a, float)]) ** 2 * 16
        bound = 64 * 7 * eps * scale
        for g, r in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
            assert np.shape(g) == np.shape(r) and np.asarray(g).dtype == np.asarray(r).dtype, (name, how)
            assert np.max(np.abs(np.asarray(g) - np.asarray(r)), initial=0) <= bound, (name, how)
        results = got if isinstance(got, tuple) else (got,)
        refs = ref if isinstance(ref, tuple) else (ref,)
        for x1, x2, k in zip(a1, a2, keep):
            if isinstance(x1, np.ndarray):
                assert any(r is x1 for r in results) == any(r is x2 for r in refs), (name, how)
                if not any(r is x1 for r in results):
                    assert np.array_equal(x1, k), (name, how)  # a copy was written, not the caller's array
        params = list(inspect.signature(mine).parameters.values())
        small = mine.front(lambda *a, **k: NotImplemented, tuple(q.name for q in params), ())
        full = copies() + [q.default for q in params[len(args):]]
        assert small(*full) is not NotImplemented, (name, how)


def test_level12_unusual_calls_go_to_the_python_path():
    x = np.arange(1.0, 9.0)
    assert tb.daxpy(x[::2], np.ones(4)).tolist() == sb.daxpy(x[::2], np.ones(4)).tolist()  # strided
    assert tb.ddot(x, x, n=3) == sb.ddot(x, x, n=3)
    assert tb.dnrm2([3.0, 4.0]) == 5.0  # a list
    with pytest.raises(ValueError, match="incx"):
        tb.daxpy(x, x, incx=0)
    ro = np.ones(4)
    ro.flags.writeable = False
    view = ro[:]  # a read-only view: SciPy would write it, tileblas copies (documented)
    out = tb.dscal(2.0, view)
    assert out is not view and np.all(ro == 1.0) and np.all(out == 2.0)


def test_numpy_scalars_take_the_small_path():
    """np.float32 / np.int64 / np.complex64 scalars are plain numbers to the C path (same values as SciPy)."""
    x = np.arange(1.0, 5.0, dtype=np.float32)
    got = tb.saxpy(x, np.ones(4, np.float32), a=np.float32(2))
    assert got.tolist() == sb.saxpy(x, np.ones(4, np.float32), a=np.float32(2)).tolist()
    small = tb.saxpy.front(lambda *a, **k: NotImplemented, tuple(inspect.signature(tb.saxpy).parameters), ())
    assert small(x, np.ones(4, np.float32), None, np.float32(2), 0, 1, 0, 1) is not NotImplemented
    assert small(x, np.ones(4, np.float32), None, np.complex64(2), 0, 1, 0, 1) is NotImplemented  # Python's rule
    z = np.ones(3, np.complex128)
    assert tb.zaxpy(z, z.copy(), a=np.complex64(1 + 1j)).tolist() == sb.zaxpy(z, z.copy(), a=np.complex64(1 + 1j)).tolist()
    assert tb.srotg(np.float32(1), np.float32(2)) == pytest.approx(sb.srotg(np.float32(1), np.float32(2)), rel=1e-6)
    a = np.asfortranarray(np.eye(3))
    assert fp.Level3("gemm", "d")(np.int64(2), a, a, np.float32(0), None, 0, 0, 0) is not NotImplemented


@pytest.mark.parametrize("value", [True, np.True_, np.int64(1), np.uint8(1), np.int32(1), 1.0, 1.7, np.float32(1)])
def test_bool_numpy_and_float_flags_take_the_small_path(value):
    """lower=True, overwrite_b=True, trans=np.int64(1), trans_a=1.0: the C path reads them as int(value), as
    the Python path does (they went to the Python path: 17-37x SciPy's time per Level-3 call at n = 16),
    with the same results."""
    rng = np.random.default_rng(5)
    zero = type(value)(0) if not isinstance(value, np.bool_) else np.False_
    zero = -0.3 if type(value) is float else zero  # truncates toward zero
    for p in "dz":
        dt = DT[p]
        a, b = _rand(rng, (6, 6), dt), _rand(rng, (6, 6), dt)
        t = _tri(rng, 6, dt, "F")
        calls = [("gemm", (1.0, a, b, 0.0, None, value, zero, zero), (1.0, a, b, 0.0, None, 1, 0, 0)),
                 ("symm", (1.0, a, b, 0.0, None, value, value, zero), (1.0, a, b, 0.0, None, 1, 1, 0)),
                 ("syrk", (1.0, a, 0.0, None, value, value, zero), (1.0, a, 0.0, None, 1, 1, 0)),
                 ("trsm", (1.0, t, b, value, value, value, zero, zero), (1.0, t, b, 1, 1, 1, 0, 0)),
                 ("trmm", (1.0, t, b, zero, value, zero, value, zero), (1.0, t, b, 0, 1, 0, 1, 0))]
        for fam, given, ints in calls:
            small = fp.Level3(fam, p)
            got = small(*given)
            assert got is not NotImplemented, (p, fam, value)
            np.testing.assert_array_equal(got, small(*ints), err_msg=f"{p}{fam} {value!r}")
        # overwrite=True writes b in place, as SciPy does for a Fortran-ordered b of the dtype
        mine, theirs = b.copy(order="F"), b.copy(order="F")
        got = tb.__dict__[p + "trsm"](2.0, t, mine, lower=value, overwrite_b=value)
        ref = getattr(sb, p + "trsm")(2.0, t, theirs, lower=1, overwrite_b=1)
        assert got is mine and ref is theirs
        bound = 16 * 6 * np.finfo(dt).eps * np.max(np.abs(ref))
        assert np.max(np.abs(got - ref)) <= bound
    # Level 1/2: increments, offsets and flags the same way
    x = np.arange(1.0, 5.0)
    small = tb.daxpy.front(lambda *a, **k: NotImplemented, tuple(inspect.signature(tb.daxpy).parameters), ())
    assert small(x, np.ones(4), None, 2.0, zero, value, zero, value) is not NotImplemented
    m = _rand(rng, (4, 4), np.float64)
    assert np.allclose(tb.dgemv(1.0, m, x, trans=value), sb.dgemv(1.0, m, x, trans=1), rtol=1e-14, atol=0)


# for each precision, operand dtypes the Python path converts (real or integer to any, complex to complex)
_OTHER = {"s": (np.float64, np.int32), "d": (np.float32, np.int64, np.bool_), "c": (np.float64, np.complex128),
          "z": (np.complex64, np.float32)}


def _as(x, dt, how):
    """x as dtype dt: 'F', 'C', '>' (byte-swapped, Fortran order) or 'u' (unaligned, Fortran order)."""
    if np.dtype(dt).kind == "b":
        y = np.asfortranarray(x.real > 0)
    else:
        y = x.astype(dt) if np.dtype(dt).kind == "c" else x.real.astype(dt)
    if how == "C":
        return np.ascontiguousarray(y)
    if how == ">":
        return np.asfortranarray(y).astype(y.dtype.newbyteorder(">"))
    if how == "u":
        raw = np.zeros(y.nbytes + 1, np.uint8)[1:]
        u = raw.view(y.dtype).reshape(y.shape, order="F")
        u[...] = y
        return u
    return np.asfortranarray(y)


@pytest.mark.parametrize("p", list(DT))
def test_operands_of_another_dtype_or_rank_1_stay_in_c(p):
    """float32 operands to dgemm, int arrays, byte-swapped or unaligned ones, a vector b to trsm: the C path
    converts them as the Python path does (they went to the Python path: 35-60x SciPy's time per call at
    n = 16), with SciPy's values, dtype and shape, and the caller's arrays untouched."""
    dt = DT[p]
    rng = np.random.default_rng(11)
    eps = np.finfo(dt).eps
    n = 6
    for other, how in itertools.product(_OTHER[p], ("F", "C", ">", "u")):
        a, b, c = (_rand(rng, (n, n), dt) for _ in range(3))
        t = _tri(rng, n, dt, "F")
        x = _rand(rng, (n, 1), dt)[:, 0].copy()
        fams = ["gemm", "symm", "syrk", "syr2k", "trmm", "trsm"] + (["hemm", "herk", "her2k"] if p in "cz" else [])
        for fam in fams:
            calls = {"gemm": [(1.5, _as(a, other, how), b, 0.5, _as(c, other, how)), (1.5, a, _as(x, other, how))],
                     "symm": [(1.5, _as(a, other, how), _as(b, other, how), 0.5, c)],
                     "hemm": [(1.5, _as(a, other, how), _as(b, other, how), 0.5, c)],
                     "syrk": [(1.5, _as(a, other, how), 0.5, _as(c, other, how))],
                     "herk": [(1.5, _as(a, other, how), 0.5, _as(c, other, how))],
                     "syr2k": [(1.5, _as(a, other, how), _as(b, other, how))],
                     "her2k": [(1.5, _as(a, other, how), _as(b, other, how))],
                     "trmm": [(1.5, _as(t, other, how), _as(b, other, how)), (1.5, t, _as(x, other, how)), (1.5, t, x)],
                     "trsm": [(1.5, _as(t, other, how), _as(b, other, how)), (1.5, t, _as(x, other, how)), (1.5, t, x)]}
            for args in calls[fam]:
                name = p + fam
                ow = "overwrite_b" if fam in ("trmm", "trsm") else "overwrite_c"
                for overwrite in (0, 1):
                    mine = [v.copy(order="A") if isinstance(v, np.ndarray) else v for v in args]
                    keep = [v.copy(order="A") if isinstance(v, np.ndarray) else v for v in args]
                    theirs = [v.copy(order="A") if isinstance(v, np.ndarray) else v for v in args]
                    got = getattr(tb, name)(*mine, **{ow: overwrite})
                    ref = getattr(sb, name)(*theirs, **{ow: overwrite})
                    assert got.dtype == ref.dtype and got.shape == ref.shape and got.flags.f_contiguous, name
                    scale = max(float(np.max(np.abs(np.asarray(v, dt)))) for v in args if isinstance(v, np.ndarray))
                    assert np.max(np.abs(got - ref)) <= 64 * n * eps * (1.5 * n * scale**2 + scale), (name, other, how)
                    bound = 64 * n * eps * (1.5 * n * scale**2 + scale)
                    for v, w, k0 in zip(mine, theirs, keep):  # the same in-place effects as SciPy's
                        if isinstance(v, np.ndarray):
                            assert (got is v) == (ref is w), (name, other, how, overwrite)
                            if got is v:
                                assert np.max(np.abs(v - w)) <= bound, (name, other, how)
                            else:
                                assert np.array_equal(v, k0), (name, other, how)
    # the C path itself takes them (NotImplemented would mean the Python path ran)
    a = _rand(rng, (n, n), dt)
    small = fp.Level3("gemm", p)
    for other in _OTHER[p]:
        assert small(1.0, _as(a, other, "F"), a, 0.0, None, 0, 0, 0) is not NotImplemented
        assert small(1.0, a, a, 1.0, _as(a, other, "C"), 0, 0, 1) is not NotImplemented
    assert small(1.0, a, a[:, 0].copy(), 0.0, None, 0, 0, 0) is not NotImplemented
    assert fp.Level3("trsm", p)(1.0, _tri(rng, n, dt, "F"), a[:, 0].copy(), 0, 0, 0, 0, 0) is not NotImplemented
    vec = a[:, 0].copy()
    assert fp.Level3("trsm", p)(1.0, _tri(rng, n, dt, "F"), vec, 0, 0, 0, 0, 1) is vec  # in place, a vector
    if p in "sd":  # complex to real: the Python path (NumPy warns that it drops the imaginary part)
        assert small(1.0, a.astype(np.complex128), a, 0.0, None, 0, 0, 0) is NotImplemented
    assert small(1.0, a.astype(object), a, 0.0, None, 0, 0, 0) is NotImplemented
    with pytest.raises(TypeError, match="overwrite_c"):  # a converted c does not hide a bad overwrite_c
        getattr(tb, p + "gemm")(1.0, a, a, 1.0, _as(a, _OTHER[p][0], "F"), overwrite_c="yes")
    # beyond 2^18 elements the Python path converts (a call the C path would leave to the runtime after all
    # is not converted twice)
    big = np.ones((513, 513), _OTHER[p][0])
    assert small(1.0, big, np.ones((513, 2), dt), 0.0, None, 0, 0, 0) is NotImplemented
    assert small(1.0, big[:512, :512], np.ones((512, 2), dt), 0.0, None, 0, 0, 0) is not NotImplemented


def test_arrays_the_c_path_makes_start_on_a_cache_line_and_are_numpys_own():
    """Every array the C path makes (a new c under 1 MiB, a copy of b for trmm/trsm, a converted operand, a
    Level-2 result) starts on a 64-byte boundary (malloc's 16-byte boundary left a small trsm's copy of b 16-48 bytes
    into a line in some processes: ztrsm n = 32 ran 25 % slower there); it owns its data, with NumPy's view
    of it (flags, no base, traced by tracemalloc in NumPy's domain, resizable, freed when dropped), and the
    caller's own new arrays keep NumPy's allocator."""
    import tracemalloc

    from numpy._core.multiarray import get_handler_name

    rng = np.random.default_rng(12)
    made = []
    for p, dt in DT.items():
        a, bc = _rand(rng, (24, 24), dt), _rand(rng, (24, 24), dt, "C")
        t = _tri(rng, 24, dt, "F")
        for _ in range(8):  # fresh allocations land at different places of the heap
            made += [fp.Level3("gemm", p)(1.0, a, bc, 0.0, None, 0, 0, 0),
                     fp.Level3("trsm", p)(1.0, t, bc, 0, 0, 0, 0, 0),  # b copied from C order
                     fp.Level3("trmm", p)(1.0, t, a, 1, 1, 0, 0, 0),  # b copied as it is
                     fp.Level3("syrk", p)(1.0, a, 0.0, None, 1, 0, 0),
                     fp.Level3("gemm", p)(1.0, a.astype(np.float16 if p in "sd" else np.complex64), a, 0.0, None, 0, 0, 0),
                     getattr(tb, p + "gemv")(1.0, a, a[:, 0].copy()),
                     fp.Level3("trsm", p)(1.0, t, a[:, 0].copy(), 0, 0, 0, 0, 0)]  # a vector b: its column
    for r in made:
        assert r is not NotImplemented
        assert r.ctypes.data % 64 == 0, (r.dtype, r.shape)
        assert get_handler_name(r) == "tileblas_aligned64"
        assert r.flags.owndata and r.flags.writeable and r.flags.aligned and r.base is None
    assert get_handler_name(np.empty(3)) == get_handler_name() != "tileblas_aligned64"
    assert get_handler_name(np.zeros((40, 40), order="F")) != "tileblas_aligned64"
    # tracemalloc sees the data as NumPy's (its domain), and sees it go
    a = _rand(rng, (64, 64), np.float64)
    tracemalloc.start()
    try:
        r = fp.Level3("gemm", "d")(1.0, a, a, 0.0, None, 0, 0, 0)
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)])
        assert sum(s.size for s in snap.statistics("filename")) >= r.nbytes
        ref = r.copy()
        r.resize((80, 80), refcheck=False)  # NumPy reallocates it through the handler kept with it
        assert r.ctypes.data % 64 == 0 and get_handler_name(r) == "tileblas_aligned64"
        np.testing.assert_array_equal(r.ravel(order="K")[: ref.size], ref.ravel(order="F"))  # data kept
        before = tracemalloc.get_traced_memory()[0]
        del r
        assert tracemalloc.get_traced_memory()[0] <= before - 80 * 80 * 8
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("prefix", "dz")
def test_a_new_c_of_a_mib_or_more_is_numpys_allocation_and_its_bits_do_not_depend_on_where_it_lies(prefix):
    """A new c of 1 MiB or more comes from NumPy's own allocator (then the heap hands it the blocks NumPy's
    arrays of its size left, as SciPy's results get them, rather than fresh pages), zeros where beta is not
    zero; a Level-3 kernel only writes c or scales it element by element, so the result has the same bits
    wherever c lies: written into a c given at each 8-byte offset of a cache line, as into the new one."""
    from numpy._core.multiarray import get_handler_name

    dt = DT[prefix]
    n = 384 if prefix == "d" else 272  # 1.1-1.2 MiB
    rng = np.random.default_rng(31)
    a, b = _rand(rng, (n, n), dt), _rand(rng, (n, n), dt)
    gemm = fp.Level3("gemm", prefix)
    r = gemm(1.0, a, b, 0.0, None, 0, 0, 0)
    assert r is not NotImplemented and r.nbytes >= 1 << 20
    assert get_handler_name(r) == get_handler_name(np.empty(3)) != "tileblas_aligned64"
    assert r.flags.f_contiguous and r.flags.owndata and r.base is None
    step = np.dtype(dt).itemsize
    for offset in range(0, 64, 8):
        raw = np.empty(n * n * step + 128, np.uint8)
        start = (-raw.ctypes.data) % 64 + offset
        c = raw[start:start + n * n * step].view(dt).reshape((n, n), order="F")
        c[...] = np.nan
        got = gemm(1.0, a, b, 0.0, c, 0, 0, 1)
        assert np.shares_memory(got, c)
        np.testing.assert_array_equal(got, r, err_msg=f"c at {offset} bytes into a cache line")
    z = gemm(1.0, a, b, 0.5, None, 0, 0, 0)  # beta not zero: c starts as zeros
    assert get_handler_name(z) != "tileblas_aligned64"
    bound = 4 * n * np.finfo(dt).eps * (np.abs(a) @ np.abs(b)).max()
    assert np.abs(z - a @ b).max() <= bound


@pytest.mark.parametrize("name", ["dsyrk", "ssyr2k", "zherk", "cher2k"])
def test_a_new_c_has_its_other_triangle_zeroed(name):
    """With c None and beta zero the C path allocates c uninitialised and zeroes only the triangle BLAS does
    not write: that triangle is exactly zero, at sizes run as one call and as strips, for both triangles."""
    dt = DT[name[0]]
    rng = np.random.default_rng(8)
    for n, k, order in ((16, 16, "F"), (300, 64, "F"), (300, 64, "C")):
        a = _rand(rng, (n, k), dt, order)
        args = (1.0, a, _rand(rng, (n, k), dt, order)) if name.endswith("2k") else (1.0, a)
        for lower in (0, 1):
            for _ in range(3):  # fresh allocations may reuse memory that held nonzeros
                got = getattr(tb, name)(*args, lower=lower)
                other = np.triu(got, 1) if lower else np.tril(got, -1)
                assert not other.any(), (name, n, order, lower)
            ref = getattr(sb, name)(*args, lower=lower)
            scale = 2 * k * float(np.max(np.abs(a))) ** 2 * (3 if name.endswith("2k") else 1)
            assert np.max(np.abs(got - ref)) <= 64 * k * np.finfo(dt).eps * scale, (name, n, order, lower)


@pytest.mark.parametrize("name", ["ssyrk", "dsyrk", "ssyr2k", "dsyr2k"])
def test_small_real_rank_k_runs_as_gemm_with_scipys_results(name):
    """Real syrk/syr2k with a new c and op(a) = a in Fortran order run as gemm over all of C below
    DropInConfig.rank_gemm, where `tileblas tune` set it (shipped: never; here the limits are set for the
    test: one call below the first limit, split below the second): on both sides of each limit, both
    triangles, square and k = 64, the result is SciPy's within the error bound with the other triangle
    exactly zero; trans 'T' on the data and a c given keep the rank-k call."""
    assert name not in _dropin.SHIPPED.rank_gemm
    one_lim, split_lim = (3e5, 1.8e6) if name.endswith("2k") else (6e5, 1.8e6)
    saved = _with("rank_gemm", {name: (one_lim, split_lim)})
    try:
        _rank_k_as_gemm(name, one_lim, split_lim)
    finally:
        fp.configure(saved)


def _rank_k_as_gemm(name, one_lim, split_lim):
    from threadpoolctl import threadpool_limits

    two = name.endswith("2k")
    dt = DT[name[0]]
    assert fp.config()["rank_gemm"][name] == (one_lim, split_lim)
    for bad, exc in (({"zsyrk": (1.0, 2.0)}, ValueError), ({name: 5.0}, TypeError), ({name: (1.0,)}, TypeError)):
        with pytest.raises(exc, match="rank_gemm"):
            _with("rank_gemm", bad)
        assert fp.config()["rank_gemm"][name] == (one_lim, split_lim)  # a refused setting changes nothing
    rng = np.random.default_rng(31)

    def flops(n, k):
        return (2.0 if two else 1.0) * n * (n + 1) * k

    cases = []
    for lim in (one_lim, split_lim):
        for square in (True, False):
            n = 8
            while flops(n + 1, n + 1 if square else 64) < lim:
                n += 1
            cases += [(n, n if square else 64), (n + 1, n + 1 if square else 64)]
    for limit in (None, 1):
        with threadpool_limits(limit):
            for (n, k), lower in itertools.product(cases, (0, 1)):
                f = flops(n, k)
                for tr, order in ((0, "F"), (1, "C"), (1, "F"), (0, "C")):
                    shape = (n, k) if tr == 0 else (k, n)
                    a = _rand(rng, shape, dt, order)
                    args = (1.5, a, _rand(rng, shape, dt, order)) if two else (1.5, a)
                    before = fp.stats()["rank_gemm_calls"]
                    path = fp.decide(getattr(tb, name), *args, trans=tr, lower=lower)["path"]
                    got = getattr(tb, name)(*args, trans=tr, lower=lower)
                    taken = fp.stats()["rank_gemm_calls"] > before
                    assert taken == (path == "rank_gemm"), (path, name, n, k, tr, order, lower, limit)
                    what = (name, n, k, tr, order, lower, limit)
                    by_gemm = (tr == 0) == (order == "F")  # op(a) = a in Fortran order
                    if not by_gemm or f >= split_lim or (limit == 1 and f >= one_lim):
                        assert not taken, what
                    elif f < one_lim:
                        assert taken, what  # split or not, below the first limit it always runs as gemm
                    ref = getattr(sb, name)(*args, trans=tr, lower=lower)
                    assert got.dtype == dt and got.flags.f_contiguous, what
                    other = np.triu(got, 1) if lower else np.tril(got, -1)
                    assert not other.any(), what
                    scale = 1.5 * k * float(np.max(np.abs(a))) ** 2 * (2 if two else 1)
                    assert np.max(np.abs(got - ref)) <= 8 * k * np.finfo(dt).eps * scale, what
            # a c given: the rank-k call, c's other triangle kept
            n = cases[0][0]
            a = _rand(rng, (n, n), dt)
            args = (1.5, a, _rand(rng, (n, n), dt)) if two else (1.5, a)
            c = _rand(rng, (n, n), dt)
            before = fp.stats()["rank_gemm_calls"]
            got = getattr(tb, name)(*args, beta=0.0, c=c)
            assert fp.stats()["rank_gemm_calls"] == before
            np.testing.assert_array_equal(np.tril(got, -1), np.tril(c, -1))


def test_level12_fronts_bind_keywords_in_c():
    """Level 1/2 routines bind keyword calls in C too; only what they do not bind reaches Python."""
    calls = []

    def record(*args, **kw):
        calls.append(kw)
        return "python"

    x, y = np.arange(1.0, 6.0), np.ones(5)
    a = np.asfortranarray(np.arange(20.0).reshape(5, 4))
    for routine, args, kw, ref in [
        (tb.ddot, (), dict(x=x, y=y), sb.ddot(x, y)),
        (tb.daxpy, (x,), dict(y=y.copy(), a=2.0), sb.daxpy(x, y.copy(), a=2.0)),
        (tb.dgemv, (1.0, a), dict(x=x[:4], trans=0), sb.dgemv(1.0, a, x[:4])),
        (tb.dgemv, (2.0, a, x), dict(trans=1, beta=0.0), sb.dgemv(2.0, a, x, trans=1)),
        (tb.dnrm2, (), dict(x=x), sb.dnrm2(x)),
    ]:
        params = inspect.signature(routine).parameters
        defaults = tuple(q.default for q in params.values() if q.default is not inspect.Parameter.empty)
        probe = routine.front(record, tuple(params), defaults)
        got = probe(*args, **kw)
        assert calls == [], routine
        assert np.allclose(got, ref, rtol=8 * 5 * np.finfo(float).eps, atol=0), routine
    probe = tb.ddot.front(record, tuple(inspect.signature(tb.ddot).parameters), (None, 0, 1, 0, 1))
    assert probe(x, y, nn=2) == "python" and calls == [dict(nn=2)]
    with pytest.raises(TypeError, match="nn"):
        tb.ddot(x, y, nn=2)
    with pytest.raises(TypeError, match="'y'"):
        tb.ddot(x)


@pytest.mark.parametrize("name", sorted(n for n in tb.__all__ if type(getattr(tb, n)) is fp.Level12))
def test_public_level12_routines_look_like_functions(name):
    import pickle

    fn = getattr(tb, name)
    assert fn.__name__ == fn.__qualname__ == name and fn.__module__ == "tileblas.blas"
    assert fn.__doc__ == fn.__wrapped__.__doc__ and name in fn.__doc__
    assert inspect.signature(fn) == inspect.signature(fn.__wrapped__)
    assert pickle.loads(pickle.dumps(fn)) is fn
    assert repr(fn) == f"<tileblas.blas routine {name}>"


def test_small_trmm_calls_run_on_the_one_thread_instance():
    """Below DropInConfig.one_thread the C path calls tileblas' one-thread OpenBLAS (OpenBLAS threads even tiny
    trmm calls); both sides of the limit give SciPy's result in every precision."""
    rt = _runtime.get_runtime()
    threads = int(getattr(rt, "_policy_threads", 0) or 0)
    assert fp.config()["one_thread"] == dict(_dropin.config(threads).one_thread)
    assert (fp.config()["one_thread"] != {}) == (threads > 1)  # several threads: the one-thread instance
    rng = np.random.default_rng(11)
    below = 0
    for p, dt in DT.items():
        units, limit = 4 if p in "cz" else 1, _dropin.config(2).one_thread[p + "trmm"]
        for n in (16, 32, 40, 64, 65, 80):
            t = _tri(rng, n, dt, "F")
            b = _rand(rng, (n, n), dt)
            got = getattr(tb, p + "trmm")(1.5, t, b, lower=1, trans_a=1)
            ref = getattr(sb, p + "trmm")(1.5, t, b, lower=1, trans_a=1)
            _close(got, ref, 1.5 * n * np.max(np.abs(t)) * np.max(np.abs(b)), n, dt)
            below += n ** 3 * units < limit
    assert 0 < below < 24  # both sides of the limit were run
    t16, b16 = _tri(rng, 16, np.float64, "F"), _rand(rng, (16, 16), np.float64)
    assert fp.decide(tb.dtrmm, 1.0, t16, b16)["entry"] == ("one_thread" if threads > 1 else "instance")
    try:
        fp.configure({**fp.config(), "one_thread": {"dtrmm": 1e300}, "one_thread_entries": {}})
        assert fp.decide(tb.dtrmm, 1.0, t16, b16)["entry"] == "instance"  # a limit without entry points is no limit
        for bad in ("trmm", "dtrmx", "dherk"):  # routines, not families
            with pytest.raises(ValueError, match="one_thread: unknown Level-3 routine"):
                _with("one_thread", {bad: 1.0})
        with pytest.raises(ValueError, match="unknown Level-3 routine"):
            _with("one_thread_entries", {"qtrmm": 1})
        with pytest.raises(TypeError, match="one_thread must be a dict"):
            fp.configure({**fp.config(), "one_thread": [("dtrmm", 1.0)]})
    finally:
        _dispatch._sync_fastpath(rt)
    assert fp.config()["one_thread"] == dict(_dropin.config(threads).one_thread)


# ------------------------------------------------------------------------- configuration and decide()
def test_dropin_config_is_the_shipped_values_over_the_tuned_file_for_a_thread_setting():
    """tileblas.policy._dropin: the shipped defaults in one frozen DropInConfig; config(threads) a function
    of them, the policy file and the thread setting alone (same arguments, equal results); below two
    threads nothing runs on the one-thread instance or split; the C path in force holds config(threads)'s
    fields for its runtime's thread count."""
    import dataclasses

    shipped = _dropin.SHIPPED
    with pytest.raises(dataclasses.FrozenInstanceError):
        shipped.gil_flops = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        shipped.split["dgemm"] = (0.0, 0.0)  # type: ignore[index]
    assert set(shipped.split) == set(_dropin.routines("gemm", "symm", "hemm", "syrk", "herk", "trmm", "trsm")) | {
        "dsyr2k", "csyr2k", "zsyr2k", "cher2k", "zher2k"}
    assert set(_dropin.routines(*_dropin.FAMILIES)) == {p + f for f, ps in LEVEL3_FAMILIES.items() for p in ps}
    one, two = _dropin.config(1), _dropin.config(2)
    assert _dropin.config(2) == two and one.threads == 1 and two.threads == 2
    assert dict(one.split) == {} and dict(one.one_thread) == {}
    assert dict(two.split) == dict(shipped.split) and dict(two.one_thread) == dict(shipped.one_thread)
    assert dict(one.rank_gemm) == dict(two.rank_gemm) == dict(shipped.rank_gemm)
    assert set(two.limits) == set(_dropin.FAMILIES) | {f"{p}{f}/{s}" for f in ("trmm", "trsm") for p in "sdcz"
                                                       for s in "LR"}
    rt = _runtime.get_runtime()
    threads = int(getattr(rt, "_policy_threads", 0) or 0)
    got, want = fp.config(), _dropin.config(threads, gpu=_dispatch._gpu_possible()).c_fields()  # floors: GPUs
    splits = got["split"] if got["pool_slot"] >= 0 else {}
    for field in ("limits", "windows", "one_thread", "rank_gemm", "gil_flops", "gil_elements", "convert_max",
                  "part_fraction", "part_min", "max_parts", "herk_copy_k"):
        if field == "one_thread":
            assert got[field] == {k: v for k, v in want[field].items() if v > 0}, field
        else:
            assert got[field] == want[field], field
    if splits:
        assert splits == {k: v for k, v in want["split"].items() if v[1] > v[0]}


def test_decide_names_the_path_and_agrees_with_what_runs():
    """_fastpath.decide(routine, *args, **kwargs) runs the call's stages up to decide(): the path it names
    is the one the call takes (split calls counted, gemm-route calls counted), the Python path says why,
    and it writes nothing."""
    rng = np.random.default_rng(41)
    a16, b16 = _rand(rng, (16, 16), np.float64), _rand(rng, (16, 16), np.float64)
    keep = b16.copy()
    d = fp.decide(tb.dgemm, 1.0, a16, b16, beta=0.5, c=b16, overwrite_c=1)
    assert d["path"] in ("instance", "one_thread") and d["flops"] == 2.0 * 16 ** 3 and d["why"] is None
    np.testing.assert_array_equal(b16, keep)  # nothing written
    assert fp.decide(tb.dgemm, 1.0, [[1.0]], a16)["why"] == "arguments"
    assert fp.decide(tb.dgemm, 1.0, a16)["why"] == "binding"  # b missing: the Python path raises
    assert fp.decide(tb.dgemm, 1.0, a16, b16, nonsense=1)["why"] == "binding"
    with pytest.raises(TypeError, match="Level-3 routine"):
        fp.decide(tb.daxpy, a16[:, 0], b16[:, 0])
    # the tile crossover and the recursion's shapes: the Python path
    saved = _with("limits", {"gemm": 2.0 * 16 ** 3})
    try:
        assert fp.decide(tb.dgemm, 1.0, a16, b16)["why"] == "tiles"
        _with("windows", {"dtrmm/L": (16.0, 1.0, 64.0)})
        assert fp.decide(tb.dtrmm, 1.0, _tri(rng, 16, np.float64, "F"), b16)["why"] == "recursion"
    finally:
        fp.configure(saved)
    with tileblas.Runtime(1):
        assert fp.decide(tb.dgemm, 1.0, a16, b16)["why"] == "runtime"
    prev = fp.decline(True)
    try:
        assert fp.decide(tb.dgemm, 1.0, a16, b16)["why"] == "declined"
    finally:
        fp.decline(prev)
    # a conjugate without transpose of a C-ordered a is copied; an operand of another dtype is converted first
    z = _rand(rng, (16, 16), np.complex128, "C")
    assert fp.decide(tb.zgemm, 1.0, z, z, trans_a=2)["copied"] == ("a",)
    assert fp.decide(tb.dgemm, 1.0, a16.astype(np.float32), b16)["path"] in ("instance", "one_thread")
    # the syrk gemm route, as counted
    for name in ("dsyrk", "ssyrk"):
        x = _rand(rng, (24, 24), DT[name[0]])
        before = fp.stats()["rank_gemm_calls"]
        path = fp.decide(getattr(tb, name), 1.0, x)["path"]
        getattr(tb, name)(1.0, x)
        assert (path == "rank_gemm") == (fp.stats()["rank_gemm_calls"] > before), name


@pytest.mark.parametrize("p", "cz")
def test_herk_copies_c_ordered_operands_by_decides_rule(p):
    """herk/her2k on C-ordered operands: copied to Fortran order from n >= herk_copy_k x k (single, double
    precision), twice that where c is read, else solved as the conjugate problem on them as they lie: the
    rule of the configuration, as decide() reports it."""
    rng = np.random.default_rng(42)
    ratio = fp.config()["herk_copy_k"][0 if p == "c" else 1]
    n = 120
    for k in range(2, 60):
        a = _rand(rng, (n, k), DT[p], "C")
        c = _rand(rng, (n, n), DT[p])
        for name, args in (("herk", (1.0, a)), ("her2k", (1.0, a, a))):
            routine = getattr(tb, p + name)
            assert (fp.decide(routine, *args)["copied"] != ()) == (ratio * k <= n), (name, k)
            got = fp.decide(routine, *args, beta=0.5, c=c)
            assert (got["copied"] != ()) == (ratio * k <= 2 * n), (name, k)
            assert got["conjugate"] == (got["copied"] == ())
            assert fp.decide(routine, *args, beta=0.0, c=c)["conjugate"] == (not ratio * k <= n)  # c not read
