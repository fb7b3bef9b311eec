"""The drop-in uses the GPUs by itself (tileblas.blas._dispatch, tileblas.policy._offload): which calls go to a
GPU and why, every way of having none (no CuPy, CUDA without a device or driver, cuBLAS that does not start,
``TILEBLAS_DEVICES=cpu``, a value outside its grammar, a fork child), and what ``tileblas info`` says.

On the strict CuPy stand-in of ``_cupy_standin.py`` named as an H100, so that the GPUs' figures are the H100
preset's (with the stand-in's measured host link) against this machine's CPU workers.  The laziness (no
CuPy import for small calls, nothing looked for at import) is checked in fresh interpreters.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import textwrap
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from _cupy_standin import install

import tileblas.blas as tb
from tileblas.blas import _dispatch
from tileblas.policy import _dropin, _offload

_REAL_CALL_COST = _dispatch._call_cost  # the standin fixture replaces it; its own tests use this one

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(34)
EPS = {np.float32: np.finfo(np.float32).eps, np.float64: np.finfo(np.float64).eps,
       np.complex64: np.finfo(np.float32).eps, np.complex128: np.finfo(np.float64).eps}


def rnd(shape, dt=np.float64):
    x = RNG.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return np.asfortranarray(x.astype(dt))


def _bound(k, a_abs_b_abs, dt):
    """The error bound of a product of inner dimension k: a small multiple of k eps |A||B|."""
    return 4.0 * k * EPS[dt] * float(a_abs_b_abs.max())


@pytest.fixture(autouse=True)
def _fresh_devices():
    """Every test starts from TILEBLAS_DEVICES as the environment has it (the session's: cpu, see
    conftest.py), with no GPU looked for, and leaves it so."""
    _dispatch.set_devices(None)
    _dispatch.release_gpus()
    yield
    _dispatch.set_devices(None)
    _dispatch.release_gpus()


def _named(monkeypatch, sim, name=b"NVIDIA H100 80GB HBM3"):
    props = sim.cp.cuda.runtime.getDeviceProperties
    monkeypatch.setattr(sim.cp.cuda.runtime, "getDeviceProperties", lambda i: {**props(i), "name": name})
    return sim


@pytest.fixture()
def standin(monkeypatch):
    """``standin(name=...)``: one stand-in GPU (named as an H100 by default); the drop-in's GPUs are closed
    while it is still installed."""

    def make(name=b"NVIDIA H100 80GB HBM3"):
        sim = install(monkeypatch, devices=1)
        # the search's timing of the per-call cost reads the stand-in's times, not a GPU's: none here (its
        # own tests below)
        monkeypatch.setattr(_dispatch, "_call_cost", lambda rt: _dispatch.CallCost())
        return _named(monkeypatch, sim, name) if name else sim

    yield make
    _dispatch.release_gpus()


@pytest.fixture()
def h100(standin):
    """One stand-in GPU named as an H100; the drop-in's devices 'auto'."""
    sim = standin()
    _dispatch.set_devices("auto")
    return sim


def _gpu_calls(sim):
    return sum(sim.calls.values())


# ------------------------------------------------------------------------------------------- grammar
@pytest.mark.parametrize("text, host, gpus, named", [
    ("", True, None, False), ("auto", True, None, False), (" AUTO ", True, None, False),
    ("cpu", True, 0, False), ("cpu,gpu", True, None, True), ("gpu, cpu", True, None, True),
    ("cpu,gpu:2", True, 2, True), ("gpu", False, None, True), ("gpu:1", False, 1, True),
])
def test_the_grammar_of_tileblas_devices(text, host, gpus, named):
    s = _offload.parse(text)
    assert (s.host, s.gpus, s.named, s.note) == (host, gpus, named, "")
    assert s.wants_gpus == (gpus != 0) and s.forced == (named and not host)


@pytest.mark.parametrize("text", ["gpu:0", "cpu:4", "cpu:1x2", "gpu:x", "tpu", "cpu,cpu", "gpu,gpu:1", "cpu;gpu"])
def test_a_value_outside_the_grammar_is_refused_naming_it(text):
    with pytest.raises(ValueError, match="expected 'auto'") as exc:
        _offload.parse(text)
    assert repr(text) in str(exc.value)
    with pytest.warns(RuntimeWarning, match="CPU workers only") as rec:
        s = _offload.from_environment({"TILEBLAS_DEVICES": text})
    assert len(rec) == 1 and not s.wants_gpus and s.note
    with pytest.raises(ValueError, match="expected 'auto'"):
        _dispatch.set_devices(text)
    with pytest.raises(TypeError, match="devices must be a str"):
        _offload.parse(3)


def test_crossover_finds_the_smallest_order_of_a_rule():
    for first in (64, 65, 100, 777, 1024, 4097, 65536):
        assert _offload.crossover(lambda n, f=first: n >= f) == first
    assert _offload.crossover(lambda n: False) is None
    assert _offload.gpu_first(1.0, 1.25, 1.25) and not _offload.gpu_first(1.0, 1.2, 1.25)


def test_with_gpus_possible_the_c_path_asks_from_the_floor_and_keeps_its_limits():
    """Where GPUs may take calls the C path's configuration differs in one field: a call it would run from
    the GPU floor on asks the GPU policy (gpu_ask); its limits, split ranges and one-thread limits stay,
    so a call kept on the CPU runs as it runs without GPUs."""
    for threads in (1, 2, 4):
        cpu, gpu = _dropin.config(threads), _dropin.config(threads, gpu=True)
        assert cpu.gpu_ask > 1e300 and gpu.gpu_ask == gpu.gpu_min_flops == _dropin.SHIPPED.gpu_min_flops
        assert {k: v for k, v in gpu.c_fields().items() if k != "gpu_ask"} == \
            {k: v for k, v in cpu.c_fields().items() if k != "gpu_ask"}
    two = _dropin.config(2)
    assert two.split["dgemm"][1] > two.gpu_min_flops  # calls the C path splits lie above the floor
    assert "gpu_ask" in two.c_fields()
    assert "gpu_min_flops" not in two.c_fields() and "gpu_margin" not in two.c_fields()


# ------------------------------------------------------------------------------------------- the choice
def test_small_calls_stay_on_the_cpu_and_look_for_no_gpu(h100):
    for n in (8, 64, 512, 790):
        a, b = rnd((n, n)), rnd((n, n))
        c = tb.dgemm(1.0, a, b)
        assert np.abs(c - a @ b).max() <= _bound(n, np.abs(a) @ np.abs(b), np.float64)
    tb.zgemm(1.0, rnd((400, 400), np.complex128), rnd((400, 400), np.complex128))
    tb.dsyrk(1.0, rnd((990, 990)))  # 9.7e8 flops, split on two threads
    tb.dtrsm(1.0, np.asfortranarray(np.tril(rnd((990, 990))) + 990 * np.eye(990)), rnd((990, 990)))  # 9.7e8
    assert _gpu_calls(h100) == 0 and _dispatch.gpu_runtime(search=False) is None
    rep = _dispatch.gpu_report(search=False)
    assert rep["gpus"] == [] and "search=False" in rep["note"]


@pytest.mark.parametrize("routine, n, dt", [("dgemm", 1100, np.float64), ("zgemm", 700, np.complex128),
                                            ("dsyrk", 1760, np.float64), ("dtrsm", 1600, np.float64),
                                            ("sgemm", 1100, np.float32)])
def test_a_large_call_goes_to_the_gpu_with_the_h100_model_and_is_right(h100, routine, n, dt):
    a = rnd((n, n), dt)
    if routine.endswith("gemm"):
        b = rnd((n, n), dt)
        c = getattr(tb, routine)(1.0, a, b)
        ref, scale, k = a @ b, np.abs(a) @ np.abs(b), n
    elif routine == "dsyrk":
        c = tb.dsyrk(1.0, a, lower=1)
        ref, scale, k = np.tril(a @ a.T), np.abs(a) @ np.abs(a).T, n
        c = np.tril(c)
    else:
        t = np.asfortranarray(np.tril(a) + n * np.eye(n))
        b = rnd((n, n), dt)
        c = tb.dtrsm(1.0, t, b, lower=1)
        ref, scale, k = b, np.abs(t) @ np.abs(c), n  # the residual t x - b against |t||x|
        c = t @ c
    grt = _dispatch.gpu_runtime(search=False)
    assert grt is not None and grt.stats()["calls"] == 1, "the call did not run on the GPUs' runtime"
    assert h100.calls.get(routine, 0) >= 1
    assert np.abs(c - ref).max() <= _bound(k, scale, dt)


def test_the_crossover_info_shows_is_where_calls_change_sides(h100):
    """The smallest order gpu_report gives for dgemm and zgemm goes to the GPU, one less does not (the
    path is a function of the call); the same call again takes the same path."""
    rep = _dispatch.gpu_report()
    assert [g["name"] for g in rep["gpus"]] == ["gpu0"] and rep["gpus"][0]["model"].startswith("H100")
    assert set(rep["crossover"]) == {p + f for f in ("gemm", "symm", "syrk", "syr2k", "trmm", "trsm") for p in "sdcz"}
    for routine, dt in (("dgemm", np.float64), ("zgemm", np.complex128)):
        n = rep["crossover"][routine]
        assert n is not None and 2 * n ** 3 * (4 if dt == np.complex128 else 1) >= rep["min_flops"]
        for m, goes in ((n - 1, False), (n, True), (n, True)):
            before = h100.calls.get(routine, 0)
            tb.__dict__[routine](1.0, rnd((m, m), dt), rnd((m, m), dt))
            assert (h100.calls.get(routine, 0) > before) == goes, (routine, m)


def test_the_model_keeps_a_call_on_the_cpu_where_the_host_is_faster_with_the_cpu_paths_bits(h100, tuned):
    """Where the CPU path is predicted faster (a host of 1e14 flop/s a core) a call above the floor stays
    on the CPU and gives the bits it gives with TILEBLAS_DEVICES=cpu (the C path)."""
    n = 1100
    a, b = rnd((n, n)), rnd((n, n))
    tuned(core_flops=1e14)
    got = tb.dgemm(1.0, a, b)
    assert _dispatch.gpu_runtime(search=False) is not None  # looked for: the call was large enough
    assert h100.calls.get("dgemm", 0) == 1  # the search's check call only
    _dispatch.set_devices("cpu")
    want = tb.dgemm(1.0, a, b)
    assert np.array_equal(got, want)
    assert h100.calls.get("dgemm", 0) == 1


def test_a_choice_is_made_again_when_the_machines_figures_change(h100, tuned):
    """The side of a call is kept per shape and precision for the figures it was made with: a Tuning put in
    force afterwards (a host of 1e14 flop/s a core) is read by the next call."""
    a, b = rnd((1100, 1100)), rnd((1100, 1100))
    tb.dgemm(1.0, a, b)
    tb.dgemm(1.0, a, b)
    assert h100.calls.get("dgemm", 0) == 3  # the check and two calls
    tuned(core_flops=1e14)
    tb.dgemm(1.0, a, b)
    assert h100.calls.get("dgemm", 0) == 3


def test_the_per_call_cost_is_fitted_from_two_timed_orders(monkeypatch):
    """_call_cost: the best of two timed calls at each order, less the prediction, fitted as seconds a call
    plus seconds an output byte (a runtime whose calls take 3 ms + 2 ns a byte of c beyond a prediction
    of 1 ms)."""
    import time

    from tileblas.runtime import _shares

    class Slow:
        calls = 0
        devices = ()

        def tile_size_for(self, name, m, n, k, dtype):
            return 4096

        def run(self, name, alpha, a, b, beta, c):
            Slow.calls += 1
            time.sleep(1e-3 + 3e-3 + 2e-9 * c.nbytes)

    monkeypatch.setattr(_shares, "predict_seconds", lambda *args: 1e-3)
    cost = _dispatch._call_cost(Slow())
    assert Slow.calls == 3 * len(_dispatch.CALL_COST_ORDERS)
    assert 2.5e-3 <= cost.seconds <= 5e-3 and 1.5e-9 <= cost.per_byte <= 3e-9, cost
    # no GPU that page-locks outputs: every output costs the staging's rate
    assert cost.locked_from == math.inf and cost.per_locked_byte == cost.per_byte
    assert cost.output_seconds(1 << 40) == cost.seconds + cost.per_byte * (1 << 40)
    # what the fit was made from: each order's best time (at least the 4 ms + bytes slept) and the prediction
    assert [t[0] for t in cost.timed] == list(_dispatch.CALL_COST_ORDERS)
    for n, best, pred in cost.timed:
        assert pred == 1e-3 and best >= 4e-3 + 2e-9 * 8 * n * n


def test_the_per_call_cost_is_timed_on_calls_that_allocate_no_staging(standin, monkeypatch):
    """_call_cost times the calls of an order made after the GPUs' pinned staging holds their copies: the
    first calls of a size allocate staging slots (each stream's ring, each way), which later calls do not
    pay.  On the stand-in: at each order the calls stop at the second call after the first that allocated
    no slot, and those two are the ones whose best is kept."""
    import time

    from tileblas.runtime import Runtime

    standin()
    monkeypatch.setattr(_dispatch, "_call_cost", _REAL_CALL_COST)
    with Runtime(devices="gpu:1") as rt:
        dev = rt.devices[0]
        calls, run = [], rt.run

        def recorded(name, alpha, a, b, beta, c):
            before = dev.staging_allocations()
            t0 = time.perf_counter()
            run(name, alpha, a, b, beta, c)
            calls.append((a.shape[0], dev.staging_allocations() > before, time.perf_counter() - t0))

        monkeypatch.setattr(rt, "run", recorded)
        cost = _dispatch._call_cost(rt)
    for (n, best, _), order in zip(cost.timed, _dispatch.CALL_COST_ORDERS):
        mine = [c for c in calls if c[0] == order]
        assert mine[0][1]  # the first call of an order allocates its slots
        clean = [c for c in mine[1:] if not c[1]]
        assert len(clean) == 2 and not mine[-1][1] and len(mine) <= _dispatch.CALL_COST_MAX_CALLS, mine
        assert n == order and best <= min(c[2] for c in clean) * 1.0001 + 1e-4


def test_the_per_call_cost_without_clean_calls_takes_the_best_of_all(monkeypatch):
    """A runtime whose every call allocates staging: the calls stop at CALL_COST_MAX_CALLS an order, and the
    best of all but the first is kept."""
    from tileblas.runtime import _shares

    class Growing:
        devices = ()
        calls = 0

        def tile_size_for(self, name, m, n, k, dtype):
            return 4096

        def run(self, name, alpha, a, b, beta, c):
            Growing.calls += 1
            self.dev.count += 1

    class Dev:
        count = 0

        def staging_allocations(self):
            return self.count

    rt = Growing()
    rt.dev = Dev()
    rt.devices = (rt.dev,)
    monkeypatch.setattr(_shares, "predict_seconds", lambda *args: 0.0)
    cost = _dispatch._call_cost(rt)
    assert Growing.calls == _dispatch.CALL_COST_MAX_CALLS * len(_dispatch.CALL_COST_ORDERS)
    assert all(math.isfinite(best) for _, best, _ in cost.timed)


def test_outputs_page_locked_in_place_cost_what_locking_them_costs(standin):
    """_locking_cost on a GPU that page-locks operands from register_min bytes: a new buffer of that size
    locked and let go (the registry's counts say both happened), its time a byte; a call's output from that
    size is charged that rate, a smaller one the staging's."""
    from tileblas.devices import _hostmem
    from tileblas.runtime import Runtime

    standin()
    with Runtime(devices="gpu:1") as rt:
        dev = rt.devices[0]
        dev.register_min = 2 << 20
        before = dict(_hostmem.REGISTRY.counts)
        locked_from, per_byte = _dispatch._locking_cost(rt)
        counts = _hostmem.REGISTRY.counts
        assert locked_from == 2 << 20 and per_byte is not None and 0 < per_byte < 1e-6
        assert counts["registered"] - before["registered"] == 2 == counts["unregistered"] - before["unregistered"]
        dev.host_transfer = "pack"
        assert _dispatch._locking_cost(rt) == (math.inf, None)
    cost = _dispatch.CallCost(1e-3, 1e-9, 1e-11, 2 << 20)
    assert cost.output_seconds(1 << 20) == pytest.approx(1e-3 + 1e-9 * (1 << 20))
    assert cost.output_seconds(2 << 20) == pytest.approx(1e-3 + 1e-11 * (2 << 20))


def test_the_measured_per_call_cost_moves_the_crossover(h100):
    """A per-call cost measured at the search enters the prediction: with 20 ms a call, dgemm goes to the
    GPU only from a larger order, and a call between the two crossovers stays on the CPU."""
    before = _dispatch.gpu_report()["crossover"]["dgemm"]
    _dispatch._GPU.call_cost = _dispatch.CallCost(0.02)  # as if the search had measured it (a new search: new choices)
    _dispatch._GPU.choices = {}
    rep = _dispatch.gpu_report()
    after = rep["crossover"]["dgemm"]
    assert rep["call_cost"]["seconds"] == 0.02
    assert before is not None and (after is None or after > before), (before, after)
    n = before + 1
    calls = h100.calls.get("dgemm", 0)
    tb.dgemm(1.0, rnd((n, n)), rnd((n, n)))
    assert h100.calls.get("dgemm", 0) == calls


def test_the_cpu_rates_tune_timed_decide_the_cpu_side_per_family(h100, tuned, tmp_path, monkeypatch, capsys):
    """A host of 1e14 flop/s a core keeps every call on the CPU; a tuned policy whose timed dtrsm rate (real
    class) is 1 GF/s at this thread count moves real trsm alone to the GPUs (dgemm and ztrsm keep no
    crossover), a dtrsm call there goes to the GPU, and info names the rates; a policy tuned at another
    thread count is not read for it."""
    from tileblas.cli import main
    from tileblas.policy import _paths

    tuned(core_flops=1e14)
    threads = _dispatch.gpu_report()["cpu_threads"]
    assert _dispatch.gpu_report()["crossover"]["dtrsm"] is None
    f = tmp_path / "paths.json"
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    try:
        for at, moves in ((threads + 1, False), (threads, True)):
            _paths.save_policy(_paths.PathPolicy(threads=at, cpu_rates={("trsm", "real"): [(512, 1e9), (2048, 1e9)]}), f)
            _dispatch.apply_policy(reload=True)
            rep = _dispatch.gpu_report()
            assert (rep["crossover"]["dtrsm"] is not None) == moves, (at, rep["crossover"]["dtrsm"])
            assert (rep["crossover"]["strsm"] is not None) == moves  # single precision: the model's ratio
            assert rep["crossover"]["dgemm"] is None and rep["crossover"]["ztrsm"] is None
            assert bool(rep["cpu_rates"]) == moves
        n = 1600
        t = np.asfortranarray(np.tril(rnd((n, n))) + n * np.eye(n))
        b = rnd((n, n))
        before = h100.calls.get("dtrsm", 0)
        x = tb.dtrsm(1.0, t, b, lower=1)
        assert h100.calls.get("dtrsm", 0) > before
        assert np.abs(t @ x - b).max() <= _bound(n, np.abs(t) @ np.abs(x), np.float64)
        gpu_s, cpu_s = _dispatch.gpu_costs("trsm", (n, n, n), np.float64, None, threads, _dispatch.gpu_runtime())
        assert cpu_s == pytest.approx(n ** 3 / 1e9)  # flop_count of trsm: m^2 n
        main(["info"])
        assert "trsm/real 1 GF/s at 2048" in capsys.readouterr().out
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _dispatch.apply_policy(reload=True)


def test_gpu_alone_takes_every_call_from_the_floor(h100, tuned):
    """TILEBLAS_DEVICES=gpu: the model is not asked (a host of 1e14 flop/s a core), calls below the floor
    stay on the CPU all the same."""
    _dispatch.set_devices("gpu")
    tuned(core_flops=1e14)
    tb.dgemm(1.0, rnd((300, 300)), rnd((300, 300)))
    assert _gpu_calls(h100) == 0
    tb.dgemm(1.0, rnd((1100, 1100)), rnd((1100, 1100)))
    assert h100.calls.get("dgemm", 0) == 2  # the check and the call


def test_a_runtime_of_ones_own_decides_for_itself(h100):
    import tileblas

    with tileblas.Runtime(2) as rt:
        tb.dgemm(1.0, rnd((1100, 1100)), rnd((1100, 1100)))
        assert rt.stats()["calls"] == 1
    assert _gpu_calls(h100) == 0 and _dispatch.gpu_runtime(search=False) is None


def test_the_c_path_asks_about_calls_from_the_floor_only_while_gpus_may_take_them(h100):
    from tileblas.blas import _fastpath

    if not hasattr(_fastpath, "configure"):
        pytest.skip("no C path here")
    tb.dgemm(1.0, rnd((32, 32)), rnd((32, 32)))  # the default runtime and the C path in force
    cfg = _dispatch._config(_dispatch._threads(_dispatch._FAST[0]))
    limits = _fastpath.config()["limits"]
    assert _fastpath.config()["gpu_ask"] == cfg.gpu_min_flops
    assert _fastpath.config()["gpu_hook"] is _dispatch._c_path_asks
    _dispatch.set_devices("cpu")
    assert _fastpath.config()["gpu_ask"] > 1e300 and _fastpath.config()["gpu_hook"] is None
    assert _fastpath.config()["limits"] == limits
    _dispatch.set_devices("auto")
    assert _fastpath.config()["gpu_ask"] == cfg.gpu_min_flops
    assert _fastpath.config()["gpu_hook"] is _dispatch._c_path_asks


def test_the_c_path_leaves_a_call_the_gpus_take_and_runs_one_they_leave(h100, tuned):
    """A call the C path would run, above the floor: where the GPUs take it, decide() says 'gpu' and the call
    runs there; where the model keeps it on the CPU (a host of 1e14 flop/s a core), the C path runs it
    on the path it takes with TILEBLAS_DEVICES=cpu; a trivial call (alpha 0) is never put to the GPUs."""
    from tileblas.blas import _fastpath

    if not hasattr(_fastpath, "configure"):
        pytest.skip("no C path here")
    n = 1100
    a, b = rnd((n, n)), rnd((n, n))
    tb.dgemm(1.0, rnd((32, 32)), rnd((32, 32)))
    path = _fastpath.decide(tb.dgemm, 1.0, a, b)
    assert path["path"] == "python" and path["why"] == "gpu"
    before = h100.calls.get("dgemm", 0)
    tb.dgemm(1.0, a, b)
    assert h100.calls.get("dgemm", 0) == before + 1
    assert _fastpath.decide(tb.dgemm, 0.0, a, b)["path"] != "python"
    _dispatch.set_devices("cpu")
    on_cpu = _fastpath.decide(tb.dgemm, 1.0, a, b)
    _dispatch.set_devices("auto")
    tuned(core_flops=1e14)
    kept = _fastpath.decide(tb.dgemm, 1.0, a, b)
    assert kept["path"] == on_cpu["path"] != "python" and kept["parts"] == on_cpu["parts"]
    got = tb.dgemm(1.0, a, b)
    assert h100.calls.get("dgemm", 0) == before + 1
    assert np.abs(got - a @ b).max() <= _bound(n, np.abs(a) @ np.abs(b), np.float64)


def test_a_failing_gpu_policy_keeps_the_c_paths_call_on_the_cpu(h100, monkeypatch):
    """The GPU policy raising inside the C path's question keeps the call on the CPU (no exception)."""
    from tileblas.blas import _fastpath

    if not hasattr(_fastpath, "configure"):
        pytest.skip("no C path here")
    tb.dgemm(1.0, rnd((32, 32)), rnd((32, 32)))

    def broken(*args):
        raise RuntimeError("broken policy")

    monkeypatch.setattr(_dispatch, "_gpu_choice", broken)
    n = 1100
    a, b = rnd((n, n)), rnd((n, n))
    assert _fastpath.decide(tb.dgemm, 1.0, a, b)["path"] != "python"
    c = tb.dgemm(1.0, a, b)
    assert np.abs(c - a @ b).max() <= _bound(n, np.abs(a) @ np.abs(b), np.float64)


# ------------------------------------------------------------------------------------------- fallbacks
def _large_call_on_cpu():
    a, b = rnd((1100, 1100)), rnd((1100, 1100))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        c = tb.dgemm(1.0, a, b)
    assert np.abs(c - a @ b).max() <= _bound(1100, np.abs(a) @ np.abs(b), np.float64)
    assert _dispatch.gpu_runtime(search=False) is None
    return [str(w.message) for w in rec]


def test_without_cupy_the_cpu_path_and_info_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    _dispatch.set_devices("auto")
    assert _large_call_on_cpu() == []  # 'auto': no warning
    assert "pip install 'tileblas[gpu]'" in _dispatch.gpu_report()["note"]
    with pytest.warns(RuntimeWarning, match=r"names GPUs, but CuPy is not installed: pip install 'tileblas\[gpu\]'"):
        _dispatch.set_devices("cpu,gpu")  # named: one warning (here: the C path is configured again)
        assert _large_call_on_cpu() == []


def test_a_driver_error_of_getdevicecount_is_the_cpu_path(standin):
    sim = standin(None)
    sim.state["driver_error"] = "cudaErrorInsufficientDriver"
    _dispatch.set_devices("auto")
    assert _large_call_on_cpu() == []
    note = _dispatch.gpu_report()["note"]
    assert "no usable GPU" in note and "cudaErrorInsufficientDriver" in note and _gpu_calls(sim) == 0


def test_no_device_is_the_cpu_path(monkeypatch, standin):
    sim = standin(None)
    monkeypatch.setattr(sim.cp.cuda.runtime, "getDeviceCount", lambda: 0)
    _dispatch.set_devices("auto")
    assert _large_call_on_cpu() == []
    assert "sees no GPU" in _dispatch.gpu_report()["note"]


def test_cublas_that_does_not_start_is_the_cpu_path_and_nothing_is_left_open(monkeypatch, standin):
    sim = standin()

    def refuse():
        raise RuntimeError("CUBLAS_STATUS_NOT_INITIALIZED")

    monkeypatch.setattr(sim.cublas, "create", refuse)
    _dispatch.set_devices("cpu,gpu:1")
    got = _large_call_on_cpu()
    assert len(got) == 1 and "CUBLAS_STATUS_NOT_INITIALIZED" in got[0]
    assert "did not start" in _dispatch.gpu_report()["note"]
    assert sim.used == [0]  # the tile memory given back


def test_a_gpu_giving_wrong_results_is_the_cpu_path(monkeypatch, standin):
    sim = standin()
    real = sim.cublas.dgemm

    def wrong(h, ta, tb_, m, n, k, al, a, lda, b, ldb, be, c, ldc):
        real(h, ta, tb_, m, n, k, al, a, lda, b, ldb, be, c, ldc)
        np.ctypeslib.as_array((np.ctypeslib.ctypes.c_double * 1).from_address(c))[0] += 1.0

    monkeypatch.setattr(sim.cublas, "dgemm", wrong)
    _dispatch.set_devices("auto")
    assert _large_call_on_cpu() == []
    assert "wrong results" in _dispatch.gpu_report()["note"]


def test_more_gpus_named_than_cuda_sees_uses_those_it_sees_and_says_so(standin):
    sim = standin()
    _dispatch.set_devices("cpu,gpu:3")
    with pytest.warns(RuntimeWarning, match="names 3 GPU"):
        tb.dgemm(1.0, rnd((1100, 1100)), rnd((1100, 1100)))
    assert len(_dispatch.gpu_runtime(search=False).devices) == 1 and sim.calls.get("dgemm", 0) == 2


def test_tileblas_devices_cpu_looks_for_nothing(monkeypatch, standin):
    sim = standin()
    monkeypatch.setenv("TILEBLAS_DEVICES", "cpu")
    _dispatch.set_devices(None)
    assert _large_call_on_cpu() == [] and _gpu_calls(sim) == 0 and _dispatch._GPU.runtime is None
    assert _dispatch.gpu_report()["note"] == "no GPU is looked for" and _gpu_calls(sim) == 0


def test_a_fork_child_takes_the_cpu_path(h100):
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    a, b = rnd((1100, 1100)), rnd((1100, 1100))
    tb.dgemm(1.0, a, b)
    assert _dispatch.gpu_runtime(search=False) is not None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            before = _gpu_calls(h100)
            c = tb.dgemm(1.0, a, b)
            ok = (np.abs(c - a @ b).max() <= _bound(1100, np.abs(a) @ np.abs(b), np.float64)
                  and _gpu_calls(h100) == before and "fork" in _dispatch.gpu_report()["note"])
            os.write(w, b"ok" if ok else b"wrong")
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 16)
    os.waitpid(pid, 0)
    os.close(r)
    assert got == b"ok"
    tb.dgemm(1.0, a, b)  # the parent keeps its GPU
    assert _dispatch.gpu_runtime(search=False).stats()["calls"] == 2


# ------------------------------------------------------------------------------------------- fresh interpreters
_PROBE = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as rec:
        import numpy as np
        import tileblas.blas as tb
        from tileblas.blas import _fastpath
        out = {"import_warnings": len(rec), "configured_at_import": bool(_fastpath.config()["enabled"])}
        for n in (16, 64, 256, 700):
            tb.dgemm(1.0, np.ones((n, n)), np.ones((n, n)))
        tb.zgemm(1.0, np.ones((300, 300), complex), np.ones((300, 300), complex))
        out["small_cupy"] = "cupy" in sys.modules
        c = tb.dgemm(1.0, np.ones((1100, 1100)), np.ones((1100, 1100)))
        out["large_right"] = bool((c == 1100.0).all())
        out["large_cupy"] = "cupy" in sys.modules
        from tileblas.blas import _dispatch
        out["note"] = _dispatch.gpu_report(search=False)["note"]
        out["warnings"] = [str(w.message) for w in rec]
        # the first call from a floor takes the Python path (and looks for GPUs); once none is found the
        # C path keeps such calls: the same bits either way (asked for by one test: it looks for GPUs again,
        # whatever TILEBLAS_DEVICES says, and its calls are the probe's largest)
        if "--same-bits" in sys.argv:
            rng = np.random.default_rng(5)
            a, b = np.asfortranarray(rng.random((1760, 1760))), np.asfortranarray(rng.random((1760, 1760)))
            t = np.asfortranarray(np.tril(a) + 1760 * np.eye(1760))
            calls = {"dgemm": lambda: tb.dgemm(1.0, a, b), "dsyrk": lambda: tb.dsyrk(1.0, a),
                     "dtrsm": lambda: tb.dtrsm(1.0, t, b, lower=1), "zgemm": lambda: tb.zgemm(1.0, a + 1j * b, b)}
            out["same_bits"] = {}
            for name, call in calls.items():
                _dispatch.set_devices("auto")  # look again: the C path hands calls from the floor to Python
                first = call()
                out["same_bits"][name] = [bool(np.array_equal(first, call())), _dispatch._GPU.searched]
    print(json.dumps(out))
""")


def _fresh(tmp_path, devices, same_bits=False):
    """The probe script in a new interpreter, with a CuPy on the path whose import records itself and
    fails (as a CuPy built for another CUDA does); ``same_bits``: with the calls from the GPU floors."""
    pkg = tmp_path / "cupy"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("raise ImportError('libcudart.so.13: cannot open shared object file')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT / "src")]))
    env.pop("TILEBLAS_DEVICES", None)
    if devices is not None:
        env["TILEBLAS_DEVICES"] = devices
    argv = [sys.executable, "-c", _PROBE, *(["--same-bits"] if same_bits else [])]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_small_calls_never_import_cupy_and_a_broken_cupy_is_the_cpu_path(tmp_path):
    out = _fresh(tmp_path, None, same_bits=True)
    assert out["import_warnings"] == 0 and not out["small_cupy"]
    assert out["large_right"] and "does not import" in out["note"] and "libcudart" in out["note"]
    assert out["warnings"] == []
    assert out["same_bits"] == {name: [True, True] for name in ("dgemm", "dsyrk", "dtrsm", "zgemm")}


def test_tileblas_devices_cpu_never_imports_cupy(tmp_path):
    """``cpu`` (and ``auto``) has nothing to say at the import, which configures the C path as unset does."""
    out = _fresh(tmp_path, "cpu")
    assert not out["small_cupy"] and not out["large_cupy"] and out["large_right"] and out["warnings"] == []
    assert out["configured_at_import"]
    assert _fresh(tmp_path, "auto")["configured_at_import"] and _fresh(tmp_path, None)["configured_at_import"]


def test_a_bad_tileblas_devices_is_one_warning_at_the_first_call_not_at_import(tmp_path):
    out = _fresh(tmp_path, "gpu:none")
    assert out["import_warnings"] == 0 and out["large_right"] and not out["large_cupy"]
    assert not out["configured_at_import"]  # the first call reads the setting and says what is wrong
    assert len(out["warnings"]) == 1 and "TILEBLAS_DEVICES='gpu:none'" in out["warnings"][0]
    assert "refused" in out["note"]


# ------------------------------------------------------------------------------------------- info, errors
def _info_text():
    from tileblas.cli import _core

    buf = io.StringIO()
    with redirect_stdout(buf):
        _core._print_dropin_gpu(_core.dropin_gpu_info())
    return buf.getvalue()


def test_info_shows_the_devices_in_force_and_the_crossover(h100):
    text = _info_text()
    assert "gpu0 (H100" in text and "GB/s" in text and "CPU workers (" in text
    n = _dispatch.gpu_report(search=False)["crossover"]["dgemm"]
    assert f"gemm s {_dispatch.gpu_report(search=False)['crossover']['sgemm']}, d {n}," in text
    assert "a call's cost on the GPUs beyond the model: 0 ms + 0 ms per GB" in text
    # the search measured the figures (the stand-in's host link, its call cost) and kept them
    assert "the GPUs' figures (host link, gemm rates, a call's cost): 0 read from " in text
    assert "2 measured by this process and kept there" in text
    _dispatch._GPU.call_cost = _dispatch.CallCost(0.0125, 2e-10)  # as a search would have measured it
    assert "beyond the model: 12.5 ms + 200 ms per GB of output\n" in _info_text()
    _dispatch._GPU.call_cost = _dispatch.CallCost(0.0125, 2e-10, 5e-11, 64 << 20)
    assert ("beyond the model: 12.5 ms + 200 ms per GB of output (50 ms per GB from 64 MiB, page-locked in "
            "place)") in _info_text()


def test_info_says_why_there_is_no_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    _dispatch.set_devices("auto")
    text = _info_text()
    assert text.startswith("drop-in      CPU workers only") and "tileblas[gpu]" in text
    _dispatch.set_devices("cpu")
    assert "no GPU is looked for" in _info_text()


def test_a_gpu_runtime_without_cupy_names_the_extra_to_install(monkeypatch):
    import tileblas
    from tileblas.devices import CupyMissingError

    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(CupyMissingError, match=r"pip install 'tileblas\[gpu\]'") as exc:
        tileblas.Runtime("gpu:1")
    assert isinstance(exc.value, ImportError)


def test_the_device_steps_dropin_part_runs_its_flow_on_the_stand_in(tmp_path):
    """benchmarks/bench_gpu.py --parts dropin (the GPU suite's drop-in measurement) on the stand-in: every
    routine and size measured or skipped by name, the side each call took, the policy's crossover, and
    every result within its error bound.  The times are the stand-in's, not a GPU's."""
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("TILEBLAS_DEVICES", None)
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--parts", "dropin", "--standin",
                        "--dropin-sizes", "600,1100", "--trials", "1", "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads((out / "bench_gpu.json").read_text())
    d = res["dropin"]
    assert res["standin"] and not res["errors"] and d["skipped"] == []
    assert {(row["routine"], row["n"]) for row in d["rows"]} == {(rt, n) for rt in ("dgemm", "dsyrk", "dtrsm", "zgemm")
                                                               for n in (600, 1100)}
    cross = d["policy"]["crossover"]
    for row in d["rows"]:
        assert row["error"] < 1e-13 and row["cublas_resident_s"] > 0 and row["cpu_s"] > 0 and row["scipy_s"] > 0
        goes = cross[row["routine"]] is not None and row["n"] >= cross[row["routine"]]
        assert row["chosen"] == ("gpu" if goes else "cpu"), row
        assert row["gpu_s"] is not None or row["chosen"] == "cpu", row  # below its floor: never the GPU
        assert row["right"] is None or row["right"] == (row["chosen"] == row["faster"])
        # the policy's own predictions, recorded beside the measured times: a call sent to the GPU was
        # predicted to finish sooner there by the margin
        assert row["policy_gpu_s"] > 0 and row["policy_cpu_s"] > 0
        if row["chosen"] == "gpu":
            assert row["policy_gpu_s"] * d["policy"]["margin"] <= row["policy_cpu_s"]
    keys = {"seconds", "seconds_per_byte", "seconds_per_locked_byte", "locked_from_bytes", "timed"}
    assert set(d["policy"]["call_cost"]) == keys
    # what the fit was made from, at the search and timed again after the cases
    for cost in (d["policy"]["call_cost"], d["call_cost_again"]):
        assert set(cost) == keys
        assert [t[0] for t in cost["timed"]] == list(_dispatch.CALL_COST_ORDERS)
        assert all(best > 0 and pred > 0 for _, best, pred in cost["timed"])
    assert "timed again after the cases" in r.stdout
    assert set(d["measured_crossover"]) == {"dgemm", "dsyrk", "dtrsm", "zgemm"}


# ------------------------------------------------------------------------------------------- on a real GPU
@pytest.mark.gpu
def test_gpu_the_drop_in_sends_calls_from_the_crossover_to_the_gpu_and_is_right(cp):
    """On the machine's GPUs: small calls stay, each routine at n = 2048 goes to the GPUs when forced and
    as the crossover tileblas info gives says in the default setting, every result within its bound."""
    _dispatch.set_devices("auto")
    rep = _dispatch.gpu_report()
    assert rep["gpus"], rep["note"]
    grt = _dispatch.gpu_runtime(search=False)
    n = 2048
    for routine, dt in (("dgemm", np.float64), ("zgemm", np.complex128), ("dsyrk", np.float64),
                        ("dtrsm", np.float64)):
        a = rnd((n, n), dt)
        if routine == "dsyrk":
            args, kw = (1.0, a), {"lower": 1}
        elif routine == "dtrsm":
            t = np.asfortranarray(np.tril(a) + n * np.eye(n))
            args, kw = (1.0, t, rnd((n, n), dt)), {"lower": 1}
        else:
            args, kw = (1.0, a, rnd((n, n), dt)), {}
        for setting in ("gpu", "auto"):
            _dispatch.set_devices(setting)
            before = grt.stats()["calls"]
            c = getattr(tb, routine)(*args, **kw)
            went = grt.stats()["calls"] > before
            cross = rep["crossover"][routine]
            assert went == (setting == "gpu" or (cross is not None and n >= cross)), (routine, setting, cross)
            if routine == "dtrsm":
                assert np.abs(t @ c - args[2]).max() <= _bound(n, np.abs(t) @ np.abs(c), dt)
            elif routine == "dsyrk":
                assert np.abs(np.tril(c) - np.tril(a @ a.T)).max() <= _bound(n, np.abs(a) @ np.abs(a).T, dt)
            else:
                assert np.abs(c - args[1] @ args[2]).max() <= _bound(n, np.abs(args[1]) @ np.abs(args[2]), dt)
    before = grt.stats()["calls"]
    tb.dgemm(1.0, rnd((256, 256)), rnd((256, 256)))
    assert grt.stats()["calls"] == before
