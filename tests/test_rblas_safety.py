"""Compute mode's non-finite safety at the plain call's cost (tileblas.rblas._safety, _guard.c).

What is tested: every Level-1 routine and ger that the native executor runs gives the plain call's bits
(offsets, strides, negative increments, sizes across chunk and thread-split boundaries); a non-finite value
in one chunk keeps only that chunk's values and restores them exactly; a call whose every chunk holds one
becomes a checkpoint; overflows (Level 1: kept; Level 3: refused at reverse); the guards of Levels 2 and 3
read no more than they say (gemv never reads its matrix for the check, a Level-1 call reads nothing apart).
Timings are `tileblas rblas bench`'s, never asserted here.
"""
from __future__ import annotations

import numpy as np
import pytest

import tileblas.blas as tb
import tileblas.rblas as rb
from tileblas.rblas import _guard, _safety
from tileblas.rblas._modes import ReversalError

DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


@pytest.fixture(autouse=True)
def _clean():
    rb.discard()
    yield
    rb.discard()


def _vec(rng, n, dt):
    v = rng.standard_normal(n)
    if np.dtype(dt).kind == "c":
        v = v + 1j * rng.standard_normal(n)
    return v.astype(dt)


def _bits(a):
    return np.ascontiguousarray(np.asarray(a)).view(np.uint8).tobytes()


def _level1_cases():
    out = []
    for p in "sdcz":
        out.append((p + "axpy", "axpy"))
        out.append((p + "scal", "scal"))
    out += [("srot", "rot"), ("drot", "rot"), ("csrot", "rot"), ("zdrot", "rot"), ("srotm", "rotm"),
            ("drotm", "rotm"), ("csscal", "scal"), ("zdscal", "scal")]
    return out


def _call(name, kind, x, y, n, offx, incx, offy, incy):
    dt = x.dtype
    if kind == "axpy":
        return (x, y), dict(n=n, a=0.7 if dt.kind == "f" else 0.7 - 0.2j, offx=offx, incx=incx, offy=offy,
                            incy=incy), ("y",)
    if kind == "scal":
        kw = dict(n=n, offx=offx, incx=abs(incx))
        if name in ("csscal", "zdscal"):
            kw["overwrite_x"] = 1
            a = 1.3
        else:
            a = 1.3 if dt.kind == "f" else 1.3 + 0.4j
        return (a, x), kw, ("x",)
    kw = dict(n=n, offx=offx, incx=incx, offy=offy, incy=incy, overwrite_x=1, overwrite_y=1)
    if kind == "rot":
        return (x, y, 0.6, 0.8), kw, ("x", "y")
    return (x, y, np.array([-1.0, 0.9, 0.2, -0.3, 1.1], dtype=dt)), kw, ("x", "y")


@pytest.mark.parametrize("name,kind", _level1_cases())
@pytest.mark.parametrize("n,offx,incx,offy,incy", [
    (1, 0, 1, 0, 1), (511, 0, 1, 0, 1), (513, 2, 1, 1, 1), (10_001, 0, 1, 0, 1), (70_001, 0, 1, 0, 1),
    (20_003, 3, 2, 1, -3), (4_099, 0, -1, 2, 1), (200_003, 0, 1, 0, 1)])
def test_the_chunked_forward_gives_the_plain_calls_bits_and_reverses(name, kind, n, offx, incx, offy, incy):
    rng = np.random.default_rng(n + offx)
    dt = DT["z" if name.startswith("zd") else "c" if name in ("csrot", "csscal") else name[0]]
    x = _vec(rng, offx + (n - 1) * abs(incx) + 1 + 2, dt)
    y = _vec(rng, offy + (n - 1) * abs(incy) + 1 + 1, dt)
    args, kw, outs = _call(name, kind, x, y, n, offx, incx, offy, incy)
    copies = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    expect = getattr(tb, name)(*copies, **kw)
    before = [a.copy() for a in args[:2] if isinstance(a, np.ndarray)]
    got = getattr(rb, "f" + name)(*args, mode="compute", **kw)
    d = rb.last_decision()
    assert d.mode == "compute" and d.extra_bytes == 0, d
    for e, g in zip(expect if isinstance(expect, tuple) else (expect,), got if isinstance(got, tuple) else (got,)):
        assert _bits(e) == _bits(g)
    getattr(rb, "r" + name)(*args, **kw)
    rtol = 1e-4 if dt in (np.float32, np.complex64) else 1e-12
    for b, a in zip(before, [a for a in args[:2] if isinstance(a, np.ndarray)]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * 10)


@pytest.mark.parametrize("name", ["sger", "dger", "cgeru", "cgerc", "zgeru", "zgerc"])
@pytest.mark.parametrize("m,n,incx,incy", [(1, 1, 1, 1), (5, 700, -1, 1), (4096, 37, 1, -1), (300, 300, 1, 1)])
def test_chunked_ger_gives_the_plain_calls_bits(name, m, n, incx, incy):
    rng = np.random.default_rng(m * n)
    dt = DT[name[0]]
    x, y = _vec(rng, m, dt), _vec(rng, n, dt)
    a = np.asfortranarray(_vec(rng, m * n, dt).reshape(m, n))
    expect = getattr(tb, name)(0.5, x, y, incx=incx, incy=incy, a=a.copy(order="F"), overwrite_a=1)
    before = a.copy(order="F")
    got = getattr(rb, "f" + name)(0.5, x, y, incx=incx, incy=incy, a=a, overwrite_a=1, mode="compute")
    assert got is a and rb.last_decision().mode == "compute"
    assert _bits(np.asfortranarray(expect).T) == _bits(np.asfortranarray(got).T)
    getattr(rb, "r" + name)(0.5, x, y, incx=incx, incy=incy, a=a, overwrite_a=1)
    np.testing.assert_allclose(a, before, rtol=1e-3 if dt in (np.float32, np.complex64) else 1e-10, atol=1e-4)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_a_nonfinite_value_in_one_chunk_keeps_that_chunk_only_and_restores_it_exactly(bad):
    rng = np.random.default_rng(3)
    n = 100_000
    x, y = rng.random(n), rng.random(n)
    x[70_000] = bad
    y0 = y.copy()
    rb.fdaxpy(x, y, a=2.0, mode="compute")
    d = rb.last_decision()
    assert d.mode == "compute" and "non-finite" in d.reason, d
    chunk = _guard.sizes()[0]
    assert 0 < d.extra_bytes <= chunk, d  # one chunk's values, not a checkpoint
    assert not np.isfinite(y[70_000])
    rb.rdaxpy(x, y, a=2.0)
    assert _bits(y[70_000]) == _bits(y0[70_000])
    np.testing.assert_allclose(y, y0, rtol=1e-12, atol=1e-14)
    assert not rb.pending()


def test_a_nonfinite_value_in_every_chunk_makes_a_checkpoint():
    x = np.ones(5000)
    y = np.arange(5000.0)
    x[::256] = np.nan
    y0 = y.copy()
    rb.fdaxpy(x, y, a=3.0, mode="compute")
    d = rb.last_decision()
    assert d.mode == "checkpoint" and "non-finite" in d.reason, d
    rb.rdaxpy(x, y, a=3.0)
    assert _bits(y) == _bits(y0)


def test_ger_with_a_nonfinite_x_is_checkpointed_and_restored_exactly():
    rng = np.random.default_rng(5)
    x, y = rng.random(64), rng.random(300)
    x[7] = np.inf
    a = np.asfortranarray(rng.random((64, 300)))
    a0 = a.copy(order="F")
    rb.fdger(1.5, x, y, a=a, overwrite_a=1, mode="compute")
    d = rb.last_decision()
    assert d.mode == "checkpoint" and "non-finite" in d.reason, d
    rb.rdger(1.5, x, y, a=a, overwrite_a=1)
    assert _bits(np.asfortranarray(a).T) == _bits(np.asfortranarray(a0).T)


def test_a_nan_in_rot_keeps_both_outputs_chunks():
    rng = np.random.default_rng(6)
    n = 50_000
    x, y = rng.random(n), rng.random(n)
    y[123] = np.nan
    x0, y0 = x.copy(), y.copy()
    rb.fdrot(x, y, 0.6, 0.8, overwrite_x=1, overwrite_y=1, mode="compute")
    assert rb.last_decision().mode == "compute" and "non-finite" in rb.last_decision().reason
    rb.rdrot(x, y, 0.6, 0.8, overwrite_x=1, overwrite_y=1)
    assert _bits(x[123]) == _bits(x0[123]) and np.isnan(y[123])
    np.testing.assert_allclose(x, x0, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.nan_to_num(y), np.nan_to_num(y0), rtol=1e-12, atol=1e-14)


def test_level1_overflow_in_compute_mode_is_kept_and_restored():
    x = np.array([1e308, 1.0])
    y = np.array([1e308, 2.0])
    rb.fdaxpy(x, y, a=1.0, mode="compute")
    assert np.isinf(y[0])
    assert rb.last_decision().mode == "checkpoint"
    rb.rdaxpy(x, y, a=1.0)
    assert np.array_equal(y, [1e308, 2.0])


def test_large_scalars_are_read_again_after_each_chunk():
    rng = np.random.default_rng(7)
    x, y = rng.random(20_000) * 1e-10, rng.random(20_000)
    x[5] = 1e300
    y0 = y.copy()
    rb.fdaxpy(x, y, a=1e10, mode="compute")  # 1e310: overflows one element of one chunk
    d = rb.last_decision()
    assert d.mode == "compute" and 0 < d.extra_bytes < y.nbytes, d
    rb.rdaxpy(x, y, a=1e10)
    assert y[5] == y0[5]
    np.testing.assert_allclose(y, y0, rtol=1e-6, atol=1e-9)


def test_level3_overflow_in_compute_mode_refuses_to_reverse_and_leaves_data():
    rng = np.random.default_rng(8)
    a, b = (np.asfortranarray(rng.random((16, 16)) + 1.0) for _ in range(2))
    c = np.asfortranarray(rng.random((16, 16)))
    rb.fdgemm(1e308, a, b, 1.0, c, overwrite_c=1, mode="compute")
    after = c.copy()
    assert np.isinf(after).any()
    with pytest.raises(ReversalError, match="overflowed"):
        rb.rdgemm(1e308, a, b, 1.0, c, overwrite_c=1)
    assert np.array_equal(c, after)
    assert not rb.pending()


def test_gemv_and_trmv_read_only_their_vectors_for_the_check(monkeypatch):
    """The matrix of a Level-2 call is never read apart (that would cost as much as the call); nor is the
    triangle's condition estimated in compute mode (only auto weighs it)."""
    from tileblas.rblas import _level2

    seen = []
    real = _safety.nonfinite
    monkeypatch.setattr(_safety, "nonfinite", lambda v: seen.append(v.shape) or real(v))
    monkeypatch.setattr(_level2, "triangle_rcond", lambda *a, **k: pytest.fail("rcond computed in compute mode"))
    rng = np.random.default_rng(9)
    a = np.asfortranarray(np.triu(rng.random((300, 300))) + 300 * np.eye(300))
    x, y = rng.random(300), rng.random(300)
    rb.fdgemv(1.0, a, x, 0.5, y, overwrite_y=1, mode="compute")
    rb.fdtrmv(a, x, overwrite_x=1, mode="compute")
    assert [d.mode for d in rb.pending()] == ["compute", "compute"]
    assert (300, 300) not in seen and seen, seen
    rb.rdtrmv(a, x, overwrite_x=1)
    rb.rdgemv(1.0, a, x, 0.5, y, overwrite_y=1)


def test_the_chunked_forward_reads_nothing_apart(monkeypatch):
    monkeypatch.setattr(_safety, "nonfinite", lambda v: pytest.fail("a Level-1 operand was read apart"))
    x, y = np.ones(100_000), np.ones(100_000)
    rb.fdaxpy(x, y, a=2.0, mode="compute")
    rb.fdscal(2.0, y, mode="compute")
    assert [d.mode for d in rb.pending()] == ["compute", "compute"]


def test_calls_the_executor_does_not_take_still_checkpoint_nonfinite_inputs():
    x = np.ones(40)[::2]  # strided: converted by tileblas.blas, so the executor does not take it
    x[3] = np.inf
    y = np.zeros(20)
    rb.fdaxpy(x, y, a=1.0, mode="compute")
    d = rb.last_decision()
    assert d.mode == "checkpoint" and "non-finite input" in d.reason, d
    rb.rdaxpy(x, y, a=1.0)
    assert np.array_equal(y, np.zeros(20))


@pytest.mark.parametrize("case", ["axpy", "axpy-1", "axpy-off", "scal", "rot", "ger", "ger-row", "ger-col"])
@pytest.mark.parametrize("n", [1, 63, 100, 127, 128, 1000, 100_003])
def test_the_fingerprints_the_executor_gathers_are_fingerprint(case, n):
    from tileblas.rblas._fingerprint import fingerprint
    from tileblas.rblas._journal import journal

    rng = np.random.default_rng(n)
    x, y = rng.random(n), rng.random(n)
    if case.startswith("axpy"):
        kw = {"incx": -1} if case == "axpy-1" else {"offx": 1, "n": n - 1} if case == "axpy-off" and n > 1 else {}
        rb.fdaxpy(x, y, a=0.5, mode="compute", **kw)
    elif case == "scal":
        rb.fdscal(0.5, y, mode="compute")
    elif case == "rot":
        rb.fdrot(x, y, 0.6, 0.8, overwrite_x=1, overwrite_y=1, incy=-1, mode="compute")
    else:
        m = {"ger": 7, "ger-row": 1, "ger-col": n}[case]
        nn = 1 if case == "ger-col" else n
        x, y = rng.random(m), rng.random(nn)
        a = np.asfortranarray(rng.random((m, nn)))
        rb.fdger(0.5, x, y, a=a, overwrite_a=1, mode="compute")
    rec = journal().stack[-1]
    assert rec.decision.mode == "compute"
    for name, fp in rec.prints.items():
        assert fp == fingerprint(rec.bound[name]), name


@pytest.mark.parametrize("name", ["dsyr", "dspr", "zher", "zhpr", "dsyr2", "zher2"])
@pytest.mark.parametrize("where", ["x", "a", "overflow"])
def test_rank_updates_checkpoint_nonfinite_values_and_refuse_overflows(name, where):
    from test_rblas_helpers import build

    rng = np.random.default_rng(11)
    routine, prefix = name[1:], name[0]
    args, kwargs = build(routine, prefix, rng)
    spec = rb.SPEC_OF[name]
    from tileblas.rblas._registry import bind

    bound = bind(spec, name, args, kwargs)
    out = spec.outputs[0].name
    if where == "x":
        bound["x"].flat[0] = np.inf
    elif where == "a":
        bound[out].flat[0] = np.nan
    else:
        bound[out].flat[:] = 1.7e308
        for v in ("x", "y"):
            if v in bound:
                bound[v].flat[:] = 1e154
    before = bound[out].copy()
    getattr(rb, "f" + name)(*args, mode="compute", **kwargs)
    d = rb.last_decision()
    if where == "overflow":
        assert not np.isfinite(bound[out]).all()
        with pytest.raises(ReversalError, match="overflowed"):
            getattr(rb, "r" + name)(*args, **kwargs)
        return
    if where == "a":  # the column executor: that column kept, the rest by the inverse
        assert d.mode == "compute" and "kept" in d.reason, d
        getattr(rb, "r" + name)(*args, **kwargs)
        assert np.isnan(bound[out].flat[0])
        # each element a + s1 u (+ s2 v) and back: a few roundings of values up to |a| + 2 |alpha| |x| |y|
        vecs = [np.abs(bound[v]).max() for v in ("x", "y") if v in bound]
        scale = np.nanmax(np.abs(before)) + 2 * abs(complex(bound["alpha"])) * vecs[0] * vecs[-1]
        assert np.allclose(bound[out], before, rtol=0, atol=8 * np.finfo(before.dtype).eps * scale, equal_nan=True)
        return
    assert d.mode == "checkpoint" and "non-finite" in d.reason, d
    getattr(rb, "r" + name)(*args, **kwargs)
    assert _bits(bound[out]) == _bits(before)


@pytest.mark.parametrize("prefix", ["s", "d"])
@pytest.mark.parametrize("routine", ["syr", "spr"])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("n", [1, 5, 99, 100, 700])
def test_syr_spr_in_columns_give_the_plain_calls_bits_and_reverse(prefix, routine, lower, n):
    """Real syr and spr run in rblas's column executor (each column's axpy, as OpenBLAS makes the call, its
    part of the triangle read just before): the plain call's bits, and its reverse as the plain call's."""
    rng = np.random.default_rng(n)
    dt = np.float64 if prefix == "d" else np.float32
    x = rng.standard_normal(n).astype(dt)
    x[::4] = 0  # columns OpenBLAS skips
    name = prefix + routine
    if routine == "syr":
        a = np.asfortranarray(rng.standard_normal((n, n)).astype(dt))

        def args(alpha, out):
            return (alpha, x), {"lower": lower, "a": out, "overwrite_a": 1}
    else:
        a = rng.standard_normal(n * (n + 1) // 2).astype(dt)

        def args(alpha, out):
            return (n, alpha, x, out), {"lower": lower, "overwrite_ap": 1}
    _executor_gives_the_plain_calls_bits_and_reverses(name, "syr", a, args, 0.75)


def _executor_gives_the_plain_calls_bits_and_reverses(name, executor, a, call, alpha, reversed_ref=None):
    """The compute-mode forward call of routine ``name`` on ``a`` (``call(alpha, out) -> (args, kwargs)``)
    goes through the column executor ``_guard.<executor>`` and gives the plain call's bits; its reverse
    gives the plain call with -alpha's bits (on the plain result, then ``reversed_ref(ref)``)."""
    ref = a.copy(order="K")
    p, k = call(alpha, ref)
    getattr(tb, name)(*p, **k)
    calls = []
    real = getattr(_guard, executor)
    try:
        setattr(_safety._native, executor, lambda *a_: calls.append(1) or real(*a_))
        p, k = call(alpha, a)
        getattr(rb, "f" + name)(*p, mode="compute", **k)
    finally:
        setattr(_safety._native, executor, real)
    assert calls and rb.last_decision().mode == "compute"
    assert _bits(a) == _bits(ref)
    getattr(rb, "r" + name)(*p, **k)
    p, k = call(-alpha, ref)
    getattr(tb, name)(*p, **k)
    if reversed_ref is not None:
        reversed_ref(ref)
    assert _bits(a) == _bits(ref)  # the inverse is the plain call with -alpha


_RANK_COLUMNS = [(p, r) for r in ("syr2", "spr2") for p in "sd"] + \
    [(p, r) for r in ("her", "hpr", "her2", "hpr2") for p in "cz"]


def _rank_case(prefix, routine, n, lower, rng):
    """(a, call(alpha, out) -> (args, kwargs)) of a rank update in the column executor, with zeros and -0.0
    in x, y and A (a zero x[j] or y[j]: a term the threaded path skips and the others make with a zero
    scalar, which turns a -0.0 of A into +0.0)."""
    dt = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]
    cplx = prefix in "cz"

    def vec():
        v = rng.standard_normal(n) + (1j * rng.standard_normal(n) if cplx else 0)
        v = v.astype(dt)
        v[::3] = 0
        v[1::5] = -0.0
        if cplx:
            v[2::7] = complex(-0.0, 0.0)
            v[4::7] = complex(0.0, -0.0)
        return v

    x, y = vec(), vec()
    full = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if cplx else 0)
    full[rng.random((n, n)) < 0.2] = -0.0
    if cplx:
        full.imag[rng.random((n, n)) < 0.2] = -0.0
    full = np.asfortranarray(full.astype(dt))
    two = routine.endswith("2")
    if routine in ("syr2", "her", "her2"):
        def call(alpha, out):
            return ((alpha, x, y) if two else (alpha, x)), {"lower": lower, "a": out, "overwrite_a": 1}
        return full, call
    ap = np.concatenate([full[j:, j] if lower else full[:j + 1, j] for j in range(n)]).astype(dt)

    def call(alpha, out):
        return ((n, alpha, x, y, out) if two else (n, alpha, x, out)), {"lower": lower, "overwrite_ap": 1}
    return ap, call


@pytest.mark.parametrize("prefix,routine", _RANK_COLUMNS)
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("n", [1, 7, 49, 50, 99, 100, 101, 700])
def test_rank_updates_in_columns_give_the_plain_calls_bits_and_reverse(prefix, routine, lower, n):
    """syr2, spr2 (s, d) and her, hpr, her2, hpr2 (c, z) run in the column executor (_guard.rank: each
    column's axpy calls as OpenBLAS makes them, its terms of a zero x[j] or y[j] skipped only where the plain
    call skips them, the Hermitian diagonal's imaginary part zeroed): the plain call's bits, signed zeros
    included, and its reverse is the plain call with -alpha, bit for bit."""
    rng = np.random.default_rng(1000 + n)
    a, call = _rank_case(prefix, routine, n, lower, rng)
    alpha = 0.75 - 0.5j if routine in ("her2", "hpr2") else 0.75
    orig = a.copy(order="K")

    def diagonal_back(ref):  # the reverse gives the diagonal's imaginary part back (rblas keeps it)
        if prefix in "cz":
            j = np.arange(n)
            diag = (j, j) if a.ndim == 2 else ((j * n - j * (j - 1) // 2,) if lower else (j * (j + 1) // 2 + j,))
            ref[diag] = ref[diag].real + 1j * orig[diag].imag

    _executor_gives_the_plain_calls_bits_and_reverses(prefix + routine, "rank", a, call, alpha, diagonal_back)


@pytest.mark.parametrize("prefix,routine", _RANK_COLUMNS)
@pytest.mark.parametrize("lower", [0, 1])
def test_rank_updates_in_columns_keep_the_columns_that_hold_inf_or_nan_and_restore_them_exactly(
        prefix, routine, lower):
    """An Inf and a NaN in A (alpha and the vectors within the executor's bounds): the columns holding them
    are kept and the reverse gives back their bits; the others are reversed by the inverse."""
    n = 101
    rng = np.random.default_rng(5)
    a, call = _rank_case(prefix, routine, n, lower, rng)
    packed = a.ndim == 1

    def at(i, j):  # element (i, j) of the triangle (i <= j upper, i >= j lower)
        if not packed:
            return (i, j)
        return (j * n - j * (j - 1) // 2 + i - j,) if lower else (j * (j + 1) // 2 + i,)

    if prefix in "cz":  # a Hermitian A: a real diagonal (the call zeroes its imaginary part)
        for j in range(n):
            a[at(j, j)] = a[at(j, j)].real
    bad = {(5, 40): np.inf, (12, 33): np.nan}
    for (i, j), v in bad.items():
        a[at(j, i) if lower else at(i, j)] = v
    cols = [i if lower else j for (i, j) in bad]
    before = a.copy(order="K")
    alpha = 0.75 - 0.5j if routine in ("her2", "hpr2") else 0.75
    p, k = call(alpha, a)
    name = prefix + routine
    getattr(rb, "f" + name)(*p, mode="compute", **k)
    d = rb.last_decision()
    assert d.mode == "compute" and "kept" in d.reason, d
    getattr(rb, "r" + name)(*p, **k)
    eps = np.finfo(a.dtype).eps
    for j in range(n):
        rows = range(j, n) if lower else range(j + 1)
        got = np.array([a[at(i, j)] for i in rows])
        want = np.array([before[at(i, j)] for i in rows])
        if j in cols:  # the kept columns: bit for bit
            assert _bits(got) == _bits(want), j
        else:  # a + s1 u (+ s2 v) and back: a few roundings of values below |a| + 2 |alpha| |x| |y|
            assert np.allclose(got, want, rtol=0, atol=64 * eps * 20), j


@pytest.mark.parametrize("lower", [0, 1])
def test_syr_in_columns_keeps_the_columns_that_hold_inf_or_nan_and_restores_them_exactly(lower):
    """An Inf, a NaN and a value the update overflows in A (alpha and x within the executor's bounds): only
    the columns holding a non-finite value after the call are kept, and the reverse gives back their bits;
    the other columns are reversed by the inverse."""
    n = 64
    rng = np.random.default_rng(3)
    x = rng.random(n) + 1
    a = np.asfortranarray(rng.random((n, n)))
    edge = 0 if lower else n - 1  # its x only meets its own column of the triangle
    x[edge] = 2.0 ** 480
    a[edge, edge] = np.finfo(np.float64).max  # + 2**979: Inf
    bad = {(5, 40): np.inf, (12, 33): np.nan}
    for (i, j), v in bad.items():
        a[(j, i) if lower else (i, j)] = v
    cols = [edge] + [i if lower else j for (i, j) in bad]
    before = a.copy(order="F")
    rb.fdsyr(2.0 ** 19, x, lower=lower, a=a, overwrite_a=1, mode="compute")
    assert rb.last_decision().mode == "compute"
    assert np.isinf(a[edge, edge])
    rb.rdsyr(2.0 ** 19, x, lower=lower, a=a, overwrite_a=1)
    for j in cols:  # the kept columns: bit for bit
        assert _bits(a[:, j]) == _bits(before[:, j]), j
    rest = np.triu(np.ones((n, n), bool)) if not lower else np.tril(np.ones((n, n), bool))
    rest[:, cols] = False
    assert np.allclose(a[rest], before[rest], rtol=0, atol=64 * np.finfo(np.float64).eps * 2.0 ** 19 * 4)


def test_a_bounded_rank_update_reads_its_matrix_once(monkeypatch):
    calls = []
    real = _guard.nonfinite
    monkeypatch.setattr(_safety, "_native", type("N", (), {
        "nonfinite": staticmethod(lambda v, level=0: calls.append((v.shape, level)) or real(v, level)),
        "__getattr__": lambda self, k: getattr(_guard, k)})())
    rng = np.random.default_rng(12)
    a = np.asfortranarray(rng.random((300, 300)))
    rb.fdsyr(0.5, rng.random(300), a=a, overwrite_a=1, mode="compute")
    assert rb.last_decision().mode == "compute"
    assert not [c for c in calls if c[0] == (300, 300)], calls  # its triangle only, in the call's pass


def test_arguments_the_executor_does_not_take_go_to_tileblas_blas_and_its_errors():
    x, y = np.ones(10), np.ones(10)
    with pytest.raises((ValueError, OverflowError)):
        rb.fdaxpy(x, y, n=2**40, mode="compute")  # too large for any BLAS integer here: tileblas.blas says so
    with pytest.raises(ValueError):
        rb.fdaxpy(x, y, incx=0, mode="compute")
    rb.fdaxpy(x, y, a=np.float64(2.0), mode="compute")  # NumPy scalars
    rb.fdaxpy(x, y, a=True, mode="compute")  # a bool: converted by tileblas.blas
    rb.fdscal(2, y, mode="compute")  # an int
    assert [d.mode for d in rb.pending()] == ["compute"] * 3 and not rb.pending()[0].extra_bytes
    while rb.pending():
        rb.discard()
    z = np.ones(8, dtype=np.complex128)
    rb.fzaxpy(z, z.copy(), a=1 + 2j, mode="compute")
    rb.fzdscal(0.5, z, overwrite_x=1, mode="compute")
    assert [d.mode for d in rb.pending()] == ["compute", "compute"]


@pytest.mark.parametrize("case", ["scal", "gemv-beta", "gemv-alpha", "trmm", "gemm", "rot"])
def test_a_scalar_whose_inverse_overflows_is_checkpointed(case):
    """dscal by 1e-310 in compute mode: its reverse scaled by 1/1e-310 = Inf and wrote Inf over x, silently."""
    rng = np.random.default_rng(13)
    if case == "scal":
        args, kw, out = (1e-310, rng.random(8)), {}, 1
    elif case.startswith("gemv"):
        alpha, beta = (1.0, 1e-310) if case == "gemv-beta" else (1e300, 1e-10)
        args, kw, out = (alpha, np.asfortranarray(rng.random((8, 8))), rng.random(8), beta, rng.random(8)), \
            {"overwrite_y": 1}, 4
    elif case == "trmm":
        args = (1e-310, np.asfortranarray(np.triu(rng.random((8, 8))) + np.eye(8)), np.asfortranarray(rng.random((8, 8))))
        kw, out = {"overwrite_b": 1}, 2
    elif case == "gemm":
        args = (1.0, np.asfortranarray(rng.random((8, 8))), np.asfortranarray(rng.random((8, 8))), 1e-310,
                np.asfortranarray(rng.random((8, 8))))
        kw, out = {"overwrite_c": 1}, 4
    else:
        args, kw, out = (rng.random(8), rng.random(8), 1e-200, 1e-200), {"overwrite_x": 1, "overwrite_y": 1}, 0
    name = {"scal": "dscal", "trmm": "dtrmm", "gemm": "dgemm", "rot": "drot"}.get(case, "dgemv")
    before = [a.copy() for a in args if isinstance(a, np.ndarray)]
    getattr(rb, "f" + name)(*args, mode="compute", **kw)
    d = rb.last_decision()
    assert d.mode == "checkpoint", d
    getattr(rb, "r" + name)(*args, **kw)
    for b, a in zip(before, [a for a in args if isinstance(a, np.ndarray)]):
        assert _bits(a) == _bits(b)
