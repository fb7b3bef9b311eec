"""Reversible BLAS on non-finite values: the inverse of a compute-mode call cannot restore them."""
from __future__ import annotations

import numpy as np
import pytest

import tileblas
import tileblas.rblas as rb
from tileblas.rblas._modes import ReversalError

from _helpers import Boom, FailingDevice

PREFIXES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _case(routine: str, dtype: type, n: int = 6):
    """(forward arguments, keyword arguments, output array) of one call with an Inf in an input."""
    rng = np.random.default_rng(0)
    x = rng.random(n).astype(dtype)
    if routine == "axpy":
        x[0] = np.inf
        return (x, rng.random(n).astype(dtype)), {"a": 2.0}, 1
    if routine == "scal":
        x[0] = np.inf
        return (2.0, x), {}, 1
    a = np.asfortranarray(np.triu(rng.random((n, n)) + np.eye(n)).astype(dtype))
    a[0, n - 1] = np.inf
    if routine == "gemv":
        return (1.0, a, x, 1.0, rng.random(n).astype(dtype)), {"overwrite_y": 1}, 4
    if routine == "trmv":
        return (a, x), {"overwrite_x": 1}, 1
    b = np.asfortranarray(rng.random((n, n)).astype(dtype))
    if routine == "gemm":
        return (1.0, a, b, 1.0, np.asfortranarray(rng.random((n, n)).astype(dtype))), {"overwrite_c": 1}, 4
    if routine == "trmm":
        return (1.0, a, b), {"overwrite_b": 1}, 2
    raise AssertionError(routine)


@pytest.mark.parametrize("prefix", list(PREFIXES))
@pytest.mark.parametrize("routine", ["axpy", "scal", "gemv", "trmv", "gemm", "trmm"])
@pytest.mark.parametrize("mode", ["auto", "compute"])
def test_nonfinite_input_is_checkpointed_and_restored(prefix, routine, mode):
    args, kwargs, out = _case(routine, PREFIXES[prefix])
    before = args[out].copy()
    getattr(rb, f"f{prefix}{routine}")(*args, mode=mode, **kwargs)
    d = rb.last_decision()
    assert d.mode == "checkpoint", d  # auto may checkpoint for other reasons (cost, conditioning)
    if mode == "compute":
        assert "non-finite" in d.reason, d
    getattr(rb, f"r{prefix}{routine}")(*args, **kwargs)
    assert np.array_equal(args[out], before)


def test_nan_scalar_matches_itself():
    x = np.array([1.0, 2.0])
    y = np.array([3.0, 4.0])
    rb.fdaxpy(x, y, a=np.nan, mode="checkpoint")
    rb.rdaxpy(x, y, a=float("nan"))
    assert np.array_equal(y, [3.0, 4.0])


def _failing_runtime():
    """Every kernel call from the 4th on fails (after some tiles were written)."""
    return tileblas.Runtime(devices=[FailingDevice(d, fail_on=range(4, 1 << 30)) for d in (0, 1)], tile_size=8)


def test_failed_forward_gemm_in_checkpoint_mode_gives_c_back():
    rng = np.random.default_rng(1)
    a, b = (np.asfortranarray(rng.random((64, 64))) for _ in range(2))
    c = np.asfortranarray(rng.random((64, 64)))
    before = c.copy()
    with _failing_runtime(), pytest.raises(Boom):
        rb.fdgemm(1.0, a, b, 1.0, c, overwrite_c=1, mode="checkpoint")
    assert np.array_equal(c, before)
    assert not rb.pending()  # a failed call records nothing
    with pytest.raises(rb.NotForwardedError):
        rb.rdgemm(1.0, a, b, 1.0, c, overwrite_c=1)


def test_failed_forward_gemm_in_compute_mode_says_c_may_be_partly_written():
    rng = np.random.default_rng(2)
    a, b = (np.asfortranarray(rng.random((64, 64))) for _ in range(2))
    c = np.asfortranarray(rng.random((64, 64)))
    with _failing_runtime(), pytest.raises(Boom) as info:
        rb.fdgemm(1.0, a, b, 1.0, c, overwrite_c=1, mode="compute")
    assert any("partly written" in n and "'c'" in n for n in getattr(info.value, "__notes__", []))
    assert not rb.pending()


def test_undo_after_discard_is_a_clear_no_op():
    x, y = np.ones(3), np.ones(3)
    with rb.Tape() as tape:
        rb.fdaxpy(x, y, a=2.0)
    assert tape.discard() == 1
    assert tape.undo() == 0  # nothing left to reverse; the data keeps the forward call's result
    assert np.array_equal(y, [3.0, 3.0, 3.0])
    with pytest.raises(rb.AlreadyReversedError, match="already undone"):
        tape.undo()
    with pytest.raises(rb.NotForwardedError):
        rb.rdaxpy(x, y, a=2.0)


# -- journals and tapes per asyncio task (issue 37) ------------------------------------------------------


def test_a_tape_records_and_undoes_only_its_own_asyncio_tasks_calls():
    import asyncio

    x = np.ones(8)
    ya, yb = np.zeros(8), np.zeros(8)
    seen = {}

    async def task_a(ev):
        with rb.Tape(mode="compute") as tape:
            ev["a_in"].set()
            await ev["b_in"].wait()  # B's tape is active now, entered after A's
            rb.fdaxpy(x, ya, a=2.0)  # A's call, on A's tape only
            ev["a_called"].set()
            await ev["b_called"].wait()
            seen["a"] = len(tape)
        return tape

    async def task_b(ev):
        await ev["a_in"].wait()
        with rb.Tape(mode="compute") as tape:
            ev["b_in"].set()
            await ev["a_called"].wait()
            rb.fdaxpy(x, yb, a=3.0)
            seen["b"] = len(tape)
        ev["b_called"].set()
        seen["b_undone"] = tape.undo()  # B's own call only: A's stays
        return tape

    async def main():
        ev = {k: asyncio.Event() for k in ("a_in", "b_in", "a_called", "b_called")}
        return await asyncio.gather(task_a(ev), task_b(ev))

    tape_a, _ = asyncio.run(main())
    assert seen == {"a": 1, "b": 1, "b_undone": 1}
    assert np.all(yb == 0.0) and np.all(ya == 2.0)
    assert tape_a.undo() == 1 and np.all(ya == 0.0)  # A's tape, undone outside its task: its own journal


def test_an_asyncio_task_cannot_reverse_another_tasks_call_and_threads_stay_separate():
    import asyncio

    x, y = np.ones(4), np.zeros(4)

    async def forward():
        rb.fdaxpy(x, y, a=2.0)
        return rb.pending()

    async def reverse():
        with pytest.raises(rb.NotForwardedError):
            rb.rdaxpy(x, y, a=2.0)
        return rb.pending()

    async def main():
        done = await asyncio.create_task(forward())
        other = await asyncio.create_task(reverse())
        return done, other

    done, other = asyncio.run(main())
    assert len(done) == 1 and other == []
    assert np.all(y == 2.0)
    # plain threads keep one journal each, as before: a call forwarded here is reversed here
    rb.fdaxpy(x, y, a=1.0)
    assert len(rb.pending()) == 1
    rb.rdaxpy(x, y, a=1.0)
    assert np.all(y == 2.0) and rb.pending() == []


def _aliasing_cases():
    """(name, make) pairs: make() -> (args, kwargs, the arrays whose memory the call writes)."""
    def daxpy_same():
        x = np.arange(1.0, 7.0)
        return (x, x), {"a": 2.0}, [x]

    def daxpy_views():
        v = np.arange(1.0, 11.0)
        return (v[:6], v[4:]), {"a": 1.5}, [v]

    def dgemm_c_is_a():
        rng = np.random.default_rng(1)
        a = np.asfortranarray(rng.random((5, 5)))
        b = np.asfortranarray(rng.random((5, 5)))
        return (1.0, a, b, 0.5, a), {"overwrite_c": 1}, [a]

    def dgemv_y_in_a():
        rng = np.random.default_rng(2)
        a = np.asfortranarray(rng.random((6, 6)))
        return (1.0, a, rng.random(6), 0.5, a[:, 2]), {"overwrite_y": 1}, [a]

    def dtrmv_x_in_a():
        rng = np.random.default_rng(3)
        a = np.asfortranarray(np.triu(rng.random((5, 5))) + np.eye(5))
        return (a, a[:, 4]), {"overwrite_x": 1}, [a]

    def drot_same():
        x = np.arange(1.0, 9.0)
        return (x, x, 0.6, 0.8), {"overwrite_x": 1, "overwrite_y": 1}, [x]

    def dswap_overlap():
        v = np.arange(1.0, 11.0)
        return (v[:6], v[3:9]), {}, [v]

    def dger_a_holds_x():
        rng = np.random.default_rng(4)
        a = np.asfortranarray(rng.random((6, 6)))
        return (0.5, a[:, 0], rng.random(6)), {"a": a, "overwrite_a": 1}, [a]

    return [("daxpy", daxpy_same), ("daxpy", daxpy_views), ("dgemm", dgemm_c_is_a), ("dgemv", dgemv_y_in_a),
            ("dtrmv", dtrmv_x_in_a), ("drot", drot_same), ("dswap", dswap_overlap), ("dger", dger_a_holds_x)]


@pytest.mark.parametrize("mode", rb.MODES)
@pytest.mark.parametrize("name,make", _aliasing_cases(), ids=lambda v: getattr(v, "__name__", v))
def test_a_forward_call_whose_output_aliases_an_input_is_checkpointed_and_reverses(name, make, mode):
    rb.discard()
    try:
        earlier = np.arange(4.0)
        rb.fdscal(3.0, earlier, mode="compute")  # an older record the aliasing call must not block
        args, kwargs, memory = make()
        before = [m.copy() for m in memory]
        getattr(rb, "f" + name)(*args, mode=mode, **kwargs)
        d = rb.last_decision()
        assert d.mode == "checkpoint", d
        if mode != "checkpoint":
            assert "shares memory with" in d.reason, d
        getattr(rb, "r" + name)(*args, **kwargs)
        for m, b in zip(memory, before):
            assert np.array_equal(m, b)
        rb.rdscal(3.0, earlier)
        assert np.array_equal(earlier, np.arange(4.0)) and not rb.pending()
    finally:
        rb.discard()


@pytest.mark.parametrize("mode", rb.MODES)
def test_numpy_scalar_arguments_are_scalars(mode):
    """np.float64(2.0) has a dtype, a shape and strides, but it is a scalar: every forward call with one
    raised ValueError (fingerprinting it as a 0-d array)."""
    rb.discard()
    rng = np.random.default_rng(5)
    x, y = rng.random(50), rng.random(50)
    y0 = y.copy()
    rb.fdaxpy(x, y, a=np.float64(2.0), mode=mode)
    rb.rdaxpy(x, y, a=np.float64(2.0))
    np.testing.assert_allclose(y, y0, rtol=1e-13)
    a, b = (np.asfortranarray(rng.random((8, 8))) for _ in range(2))
    c = np.asfortranarray(rng.random((8, 8)))
    c0 = c.copy()
    rb.fdgemm(np.float32(1.5), a, b, np.float64(0.5), c, overwrite_c=1, mode=mode)
    rb.rdgemm(np.float32(1.5), a, b, np.float64(0.5), c, overwrite_c=1)
    np.testing.assert_allclose(c, c0, rtol=1e-12)
    z = rng.random(20) + 1j * rng.random(20)
    z0 = z.copy()
    rb.fzscal(np.complex128(0.5 + 0.5j), z, mode=mode)
    rb.rzscal(np.complex128(0.5 + 0.5j), z)
    np.testing.assert_allclose(z, z0, rtol=1e-13)
    assert not rb.pending()
