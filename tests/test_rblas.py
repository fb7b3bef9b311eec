"""Tests of tileblas.rblas: every pair x precision x mode round trip, auto's choices, Tape, misuse."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg.blas as sb

import tileblas.rblas as rb
from tileblas.rblas import _journal, _registry
from test_rblas_helpers import BlasNS, build, snapshot, tol


@pytest.fixture(autouse=True)
def _blas_with_fallback(monkeypatch):
    """tileblas.blas, with scipy.linalg.blas only for names that have not landed yet (tests only)."""
    monkeypatch.setattr(_registry, "_blas_namespace", lambda: BlasNS())
    rb.discard()
    yield
    rb.discard()


CASES = [(s.routine, p) for s in rb.SPECS for p in s.prefixes]


def _restored(before, after, exact, prefix):
    for b, a in zip(before, after):
        if isinstance(b, np.ndarray):
            if exact:
                assert np.array_equal(np.ascontiguousarray(b).view(np.uint8), np.ascontiguousarray(a).view(np.uint8)), (b, a)
            else:
                np.testing.assert_allclose(a, b, rtol=tol(prefix), atol=tol(prefix))


@pytest.mark.parametrize("mode", rb.MODES)
@pytest.mark.parametrize("routine,prefix", CASES)
def test_round_trip(routine, prefix, mode):
    rng = np.random.default_rng(hash((routine, prefix)) % 2**32)
    args, kwargs = build(routine, prefix, rng)
    before = snapshot(args, kwargs)
    # the forward result equals the plain BLAS call on copies
    cargs = [np.array(v, copy=True, order="K") if isinstance(v, np.ndarray) else v for v in args]
    ckw = {k: (np.array(v, copy=True, order="K") if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    expect = getattr(sb, prefix + routine)(*cargs, **ckw)
    fwd, rev = rb.PAIRS[prefix + routine]
    got = fwd(*args, mode=mode, **kwargs)
    dec = rb.last_decision()
    for e, g in zip(expect if isinstance(expect, tuple) else (expect,), got if isinstance(got, tuple) else (got,)):
        np.testing.assert_allclose(g, e, rtol=tol(prefix), atol=tol(prefix))
    assert dec.routine == prefix + routine and dec.requested == mode
    assert dec.mode != "none"  # the builders make every output update in place
    if mode == "checkpoint" or (routine == "copy" and mode != "exact"):
        assert dec.mode == "checkpoint"
    if mode == "compute" and routine != "copy":
        assert dec.mode == "compute" and dec.extra_bytes <= 2 * 6 * 16
    if mode == "exact" and dec.mode == "exact":
        assert dec.extra_bytes < dec.checkpoint_bytes
    ret = rev(*args, **kwargs)
    after = [v for v in (*args, *kwargs.values())]
    _restored(before, after, dec.mode in ("checkpoint", "exact") or routine == "swap", prefix)
    rets = ret if isinstance(ret, tuple) else (ret,)
    spec = rb.SPEC_OF[prefix + routine]
    for r, name in zip(rets, spec.returns):
        bound = _registry.bind(spec, prefix + routine, args, kwargs)
        assert r is bound[name]
    assert rb.pending() == []


# ------------------------------------------------------------------------------------ in-place semantics
def test_noncontiguous_y_nothing_to_undo():
    x = np.arange(5.0)
    buf = np.ones(10)
    y = buf[::2]
    z = rb.fdaxpy(x, y, a=2.0, mode="checkpoint")
    assert not np.shares_memory(z, y) and np.array_equal(y, np.ones(5))
    np.testing.assert_allclose(z, 1 + 2 * x)
    d = rb.last_decision()
    assert d.mode == "none" and d.extra_bytes == 0
    assert rb.rdaxpy(x, y, a=2.0) is y
    assert np.array_equal(buf, np.ones(10))


@pytest.mark.parametrize("case", ["gemv_default", "gemm_c_order", "axpy_float32_y", "gemm_no_c"])
def test_fresh_results_record_none(case):
    rng = np.random.default_rng(1)
    a = np.asfortranarray(rng.random((4, 4)))
    if case == "gemv_default":
        y, x = np.ones(4), np.ones(4)
        out = rb.fdgemv(1.0, a, x, beta=1.0, y=y, mode="checkpoint")  # overwrite_y=0: fresh result
        assert not np.shares_memory(out, y)
        assert rb.last_decision().mode == "none"
        assert rb.rdgemv(1.0, a, x, beta=1.0, y=y) is y
        assert np.array_equal(y, np.ones(4))
        return
    elif case == "gemm_c_order":
        c = np.ascontiguousarray(rng.random((4, 4)))
        c0 = c.copy()
        rb.fdgemm(1.0, a, a, 1.0, c, overwrite_c=1, mode="compute")
        assert rb.last_decision().mode == "none"
        rb.rdgemm(1.0, a, a, 1.0, c, overwrite_c=1)
        assert np.array_equal(c, c0)
        return
    elif case == "axpy_float32_y":
        y, x = np.ones(4, dtype=np.float32), np.ones(4)
        rb.fdaxpy(x, y)
        assert rb.last_decision().mode == "none"
        rb.rdaxpy(x, y)
        assert np.array_equal(y, np.ones(4, np.float32))
        return
    else:
        rb.fdgemm(1.0, a, a)
        assert rb.last_decision().mode == "none"
        assert rb.rdgemm(1.0, a, a) is None
        return


# ------------------------------------------------------------------------------------ auto's choices
def test_auto_zero_alpha_scal_checkpoints():
    x = np.arange(1.0, 5.0)
    rb.fdscal(0.0, x, mode="auto")
    d = rb.last_decision()
    assert d.mode == "checkpoint" and "a = 0" in d.reason
    rb.rdscal(0.0, x)
    assert np.array_equal(x, np.arange(1.0, 5.0))


def test_compute_falls_back_where_impossible():
    x = np.arange(1.0, 5.0)
    rb.fdscal(0.0, x, mode="compute")
    assert rb.last_decision().mode == "checkpoint"
    rb.rdscal(0.0, x)
    assert np.array_equal(x, np.arange(1.0, 5.0))


def test_auto_destructive_copy():
    x, y = np.ones(3), np.arange(3.0)
    rb.fdcopy(x, y, mode="auto")
    d = rb.last_decision()
    assert d.mode == "checkpoint" and "destructive" in d.reason
    rb.rdcopy(x, y)
    assert np.array_equal(y, np.arange(3.0))


@pytest.mark.parametrize("mode", ["compute", "auto", "exact"])
def test_copy_into_zeros_needs_no_checkpoint(mode):
    x, y = np.arange(1.0, 5.0), np.zeros(4)
    rb.fdcopy(x, y, mode=mode)
    d = rb.last_decision()
    assert d.mode == ("exact" if mode == "exact" else "compute") and d.extra_bytes <= 64, d
    rb.rdcopy(x, y)
    assert np.array_equal(y, np.zeros(4)) and not np.signbit(y).any()
    y = -np.zeros(4)  # -0.0 is not restored by zero-filling: checkpoint
    rb.fdcopy(x, y, mode="compute")
    assert rb.last_decision().mode == "checkpoint"
    rb.rdcopy(x, y)
    assert np.signbit(y).all()


def test_auto_zero_and_tiny_beta():
    rng = np.random.default_rng(2)
    a = np.asfortranarray(rng.random((5, 5)))
    c = np.asfortranarray(rng.random((5, 5)))
    rb.fdgemm(1.0, a, a, 0.0, c, overwrite_c=1, mode="auto")
    assert rb.last_decision().mode == "checkpoint" and "beta = 0" in rb.last_decision().reason
    rb.fdgemm(1.0, a, a, 1e-12, c, overwrite_c=1, mode="auto")
    assert rb.last_decision().mode == "checkpoint" and "safe range" in rb.last_decision().reason
    rb.rdgemm(1.0, a, a, 1e-12, c, overwrite_c=1)
    rb.rdgemm(1.0, a, a, 0.0, c, overwrite_c=1)


def test_auto_singular_and_ill_conditioned_triangle():
    rng = np.random.default_rng(3)
    n = 150
    sing = np.asfortranarray(np.triu(rng.random((n, n))))
    sing[5, 5] = 0.0
    x = rng.random(n)
    x0 = x.copy()
    rb.fdtrmv(sing, x, overwrite_x=1, mode="compute")
    assert rb.last_decision().mode == "checkpoint" and "singular" in rb.last_decision().reason
    rb.rdtrmv(sing, x, overwrite_x=1)
    assert np.array_equal(x, x0)
    # a random triangular matrix: trsv would destroy everything; auto must notice (LAPACK dtrcon)
    ill = np.asfortranarray(np.triu(rng.standard_normal((n, n))))
    ill[np.diag_indices(n)] = 1.0 + rng.random(n)  # diag ratio small, condition huge
    rb.fdtrmv(ill, x, overwrite_x=1, mode="auto")
    d = rb.last_decision()
    assert d.mode == "checkpoint" and "ill-conditioned" in d.reason, d
    rb.rdtrmv(ill, x, overwrite_x=1)
    assert np.array_equal(x, x0)
    b = np.asfortranarray(rng.random((n, 3)))
    rb.fdtrmm(1.0, ill, b, overwrite_b=1, mode="auto")
    assert rb.last_decision().mode == "checkpoint"
    rb.rdtrmm(1.0, ill, b, overwrite_b=1)


def test_auto_cost_choice_level1_vs_level3():
    rng = np.random.default_rng(4)
    x, y = rng.random(1000), rng.random(1000)
    rb.fdaxpy(x, y, a=2.0, mode="auto")
    assert rb.last_decision().mode == "compute" and rb.last_decision().estimates
    a = np.asfortranarray(rng.random((64, 64)))
    c = np.asfortranarray(rng.random((64, 64)))
    rb.fdgemm(1.0, a, a, 0.5, c, overwrite_c=1, mode="auto")
    assert rb.last_decision().mode == "checkpoint" and "cheaper" in rb.last_decision().reason
    rb.rdgemm(1.0, a, a, 0.5, c, overwrite_c=1)
    rb.rdaxpy(x, y, a=2.0)


def test_default_mode_context_manager():
    assert rb.get_default_mode() == "auto"
    with rb.set_default_mode("checkpoint"):
        x = np.ones(3)
        rb.fdscal(2.0, x)
        assert rb.last_decision().mode == "checkpoint"
        rb.rdscal(2.0, x)
    assert rb.get_default_mode() == "auto"
    with pytest.raises(ValueError, match="mode must be one of"):
        rb.set_default_mode("fast")
    with pytest.raises(ValueError, match="mode"):
        rb.fdscal(2.0, np.ones(2), mode="bogus")


# ------------------------------------------------------------------------------------ exact
@pytest.mark.parametrize("prefix", ["s", "d", "c", "z"])
def test_exact_axpy_cancellation_bitwise(prefix):
    dt = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]
    rng = np.random.default_rng(5)
    n = 5000
    a = 3.0
    x = (rng.random(n) * 10.0 ** rng.integers(-8, 8, n)).astype(dt)
    y = (-a * x * (1 + 1e-7 * rng.standard_normal(n))).astype(dt)  # y + a*x cancels
    y[::7] = 0.0
    y[::11] *= -0.0
    y0 = y.copy()
    f, r = rb.PAIRS[prefix + "axpy"]
    f(x, y, a=a, mode="exact")
    d = rb.last_decision()
    r(x, y, a=a)
    assert np.array_equal(y.view(np.uint8), y0.view(np.uint8)), d


def test_exact_memory_paper_data():
    rng = np.random.default_rng(6)
    n = 100_000
    for dt in (np.float64, np.float32):
        x = (1000 + 1000 * rng.random(n)).astype(dt)
        y = (1000 + 1000 * rng.random(n)).astype(dt)
        y0 = y.copy()
        f, r = rb.PAIRS[("d" if dt == np.float64 else "s") + "axpy"]
        f(x, y, a=1500.0, mode="exact")
        d = rb.last_decision()
        assert d.mode == "exact" and d.extra_bytes <= 0.5 * d.checkpoint_bytes, d
        r(x, y, a=1500.0)
        assert np.array_equal(y, y0)


def test_exact_falls_back_when_residual_is_large():
    rng = np.random.default_rng(7)
    n = 40
    ill = np.asfortranarray(np.triu(rng.standard_normal((n, n))) + 1e-3 * np.eye(n))
    x = rng.random(n)
    x0 = x.copy()
    rb.fdtrsv(ill, x, overwrite_x=1, mode="exact")
    d = rb.last_decision()
    rb.rdtrsv(ill, x, overwrite_x=1)
    assert np.array_equal(x, x0)
    assert d.mode in ("exact", "checkpoint")
    if d.mode == "checkpoint":
        assert "checkpoint" in d.reason


# ------------------------------------------------------------------------------------ Tape
def test_tape_lifo_and_nesting():
    rng = np.random.default_rng(8)
    x, y = rng.random(50), rng.random(50)
    a = np.asfortranarray(rng.random((50, 50)))
    y0 = y.copy()
    with rb.Tape(mode="checkpoint") as outer:
        rb.fdaxpy(x, y, a=2.0)
        with rb.Tape(mode="compute") as inner:
            rb.fdscal(3.0, y)
            rb.fdgemv(1.0, a, x, 0.5, y, overwrite_y=1)
        assert [d.mode for d in inner.decisions] == ["compute", "compute"]
        rb.fdswap(x, y)
    assert len(outer) == 4 and outer.nbytes == 3 * y.nbytes  # axpy: y; swap: x and y
    with pytest.raises(rb.OrderError):
        inner.undo()  # the swap recorded after it is still live
    assert outer.undo() == 4
    np.testing.assert_allclose(y, y0, rtol=1e-12)
    with pytest.raises(rb.AlreadyReversedError):
        outer.undo()


def test_tape_inner_undo_then_outer():
    x = np.arange(1.0, 4.0)
    with rb.Tape() as outer:
        rb.fdscal(2.0, x)
        with rb.Tape() as inner:
            rb.fdscal(5.0, x, mode="checkpoint")
        assert inner.undo() == 1
        np.testing.assert_array_equal(x, 2 * np.arange(1.0, 4.0))
    assert outer.undo() == 1
    np.testing.assert_allclose(x, np.arange(1.0, 4.0))


def test_tape_rollback_on_error():
    x = np.arange(1.0, 4.0)
    with pytest.raises(RuntimeError):
        with rb.Tape(mode="checkpoint", rollback_on_error=True):
            rb.fdscal(2.0, x)
            raise RuntimeError("boom")
    np.testing.assert_array_equal(x, np.arange(1.0, 4.0))


def test_explicit_reverse_inside_tape():
    x = np.arange(1.0, 4.0)
    with rb.Tape(mode="checkpoint") as t:
        rb.fdscal(2.0, x)
        rb.rdscal(2.0, x)
    assert len(t) == 0 and np.array_equal(x, np.arange(1.0, 4.0))


# ------------------------------------------------------------------------------------ misuse
def test_reverse_never_forwarded():
    with pytest.raises(rb.NotForwardedError, match="no forward call"):
        rb.rdaxpy(np.ones(3), np.ones(3))


def test_reverse_twice():
    x, y = np.ones(3), np.ones(3)
    rb.fdaxpy(x, y)
    rb.rdaxpy(x, y)
    with pytest.raises(rb.AlreadyReversedError):
        rb.rdaxpy(x, y)


def test_reverse_out_of_order():
    x, y1, y2 = np.ones(3), np.ones(3), np.ones(3)
    rb.fdaxpy(x, y1)
    rb.fdaxpy(x, y2)
    with pytest.raises(rb.OrderError, match="LIFO"):
        rb.rdaxpy(x, y1)
    rb.rdaxpy(x, y2)
    rb.rdaxpy(x, y1)
    np.testing.assert_array_equal(y1, np.ones(3))


def test_reverse_with_different_arguments():
    x, y = np.ones(3), np.ones(3)
    rb.fdaxpy(x, y, a=2.0, mode="compute")
    with pytest.raises(rb.ArgumentMismatchError, match="'a'"):
        rb.rdaxpy(x, y, a=3.0)
    with pytest.raises(rb.ArgumentMismatchError, match="'x'"):
        rb.rdaxpy(np.ones(3), y, a=2.0)
    np.testing.assert_array_equal(y, 3 * np.ones(3))  # nothing changed by the failed reverses
    rb.rdaxpy(x, y, a=2.0)
    np.testing.assert_array_equal(y, np.ones(3))


def test_positional_and_keyword_forms_match():
    x, y = np.ones(3), np.ones(3)
    rb.fdaxpy(x, y, 3, 2.0)
    rb.rdaxpy(x=x, y=y, n=3, a=2.0)
    np.testing.assert_array_equal(y, np.ones(3))


def test_output_modified_between_forward_and_reverse():
    x, y = np.ones(3), np.ones(3)
    rb.fdaxpy(x, y, mode="checkpoint")
    y[1] = 42.0
    with pytest.raises(rb.ModifiedError, match="'y'"):
        rb.rdaxpy(x, y)


def test_input_modified_between_forward_and_reverse():
    x, y = np.ones(3), np.ones(3)
    rb.fdaxpy(x, y, mode="compute")
    x[0] = 5.0
    with pytest.raises(rb.ModifiedError, match="'x'"):
        rb.rdaxpy(x, y)


def test_chained_compute_reversals_on_one_output():
    """Two compute-mode calls on the same y: reversing the later one restores y only approximately, and
    the earlier record must accept that restored y (its fingerprint is refreshed), while a real
    modification is still caught."""
    rng = np.random.default_rng(4)
    x, y = rng.random(1000), rng.random(1000)
    y0 = y.copy()
    rb.fdaxpy(x, y, a=0.3, mode="compute")
    assert not _journal.journal().stack[-1].pre_prints  # nothing older to refresh: not fingerprinted before
    rb.fdscal(1 / 3, y, mode="compute")
    assert set(_journal.journal().stack[-1].pre_prints) == {"x"}  # scal's output is named x
    rb.rdscal(1 / 3, y)
    rb.rdaxpy(x, y, a=0.3)
    np.testing.assert_allclose(y, y0, rtol=1e-14, atol=1e-15)
    rb.fdaxpy(x, y, a=0.3, mode="compute")
    rb.fdscal(1 / 3, y, mode="compute")
    rb.rdscal(1 / 3, y)
    y[0] += 1.0
    with pytest.raises(rb.ModifiedError, match="'y'"):
        rb.rdaxpy(x, y, a=0.3)


def test_bad_arguments():
    with pytest.raises(TypeError, match="unexpected keyword"):
        rb.fdaxpy(np.ones(2), np.ones(2), alpha=1.0)
    with pytest.raises(TypeError, match="missing"):
        rb.fdaxpy(np.ones(2))
    assert rb.pending() == []


def test_thread_journals_are_separate():
    import threading

    x, y = np.ones(3), np.ones(3)
    rb.fdaxpy(x, y)
    err = []

    def other():
        try:
            rb.rdaxpy(x, y)
        except rb.NotForwardedError as e:
            err.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert err
    rb.rdaxpy(x, y)


def test_names_and_signatures():
    assert {"fdaxpy", "rdaxpy", "fzgemm", "rzgemm", "fcsscal", "rzdrot", "fsspr2", "rztpsv"} <= set(rb.__all__)
    for name, (f, r) in rb.PAIRS.items():
        assert hasattr(sb, name), name
        assert f.__name__ == "f" + name and r.__name__ == "r" + name


FLAGGED = [(s.routine, p) for s in rb.SPECS for p in s.prefixes if any(o.flag for o in s.outputs)]


@pytest.mark.parametrize("routine,prefix", FLAGGED)
def test_overwrite_flag_off_means_nothing_to_undo(routine, prefix):
    rng = np.random.default_rng(11)
    args, kwargs = build(routine, prefix, rng)
    spec = rb.SPEC_OF[prefix + routine]
    for o in spec.outputs:
        kwargs[o.flag] = 0
    before = snapshot(args, kwargs)
    fwd, rev = rb.PAIRS[prefix + routine]
    fwd(*args, mode="checkpoint", **kwargs)
    assert rb.last_decision().mode == "none"
    _restored(before, [*args, *kwargs.values()], True, prefix)  # nothing was touched
    rev(*args, **kwargs)
    assert rb.pending() == []


def test_list_argument_changed_between_forward_and_reverse():
    x, y = np.arange(1.0, 5.0), np.arange(2.0, 6.0)
    x0, y0 = x.copy(), y.copy()
    param = [-1.0, 1.1, 0.2, 0.3, 0.9]
    rb.fdrotm(x, y, param, overwrite_x=1, overwrite_y=1, mode="compute")
    changed = list(param)
    param[1] = 5.0  # the same list object, mutated: the reverse would compute the wrong inverse
    with pytest.raises(rb.ArgumentMismatchError, match="'param'"):
        rb.rdrotm(x, y, param, overwrite_x=1, overwrite_y=1)
    rb.rdrotm(x, y, changed, overwrite_x=1, overwrite_y=1)
    np.testing.assert_allclose(x, x0, rtol=1e-14)
    np.testing.assert_allclose(y, y0, rtol=1e-14)
