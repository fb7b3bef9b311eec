"""Tests of tileblas.perf: sampler, modeler, repository, trace mode, algorithms, predictor, suggest, plots.

No timing is asserted: synthetic timing functions stand in for measurements wherever a value is checked.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading

import numpy as np
import pytest
import scipy.linalg as sla

from tileblas import perf
from tileblas.perf import (
    SYLVESTER_VARIANTS,
    TRINV_VARIANTS,
    Call,
    ModelKey,
    Predictor,
    Repository,
    RepositoryError,
    Sampler,
    Timing,
    build_submodel,
    sylvester,
    trace_sylvester,
    trace_trinv,
    trinv,
    validate,
)
from tileblas.perf._predictor import needed_models
from tileblas.policy._calls import ROUTINES
from tileblas.policy._models import Submodel
from tileblas.policy._variants import _PLANS

KEY = ModelKey("test-machine", "openblas", "0.0", 1, "cpu", "in-cache")


# ---------------------------------------------------------------------------------------------------
# Sampler
# ---------------------------------------------------------------------------------------------------


def test_timing_statistics():
    ns = [3000, 1000, 2000, 5000, 4000]
    t = Timing.from_ns(ns)
    a = np.asarray(ns) * 1e-9
    assert t.min == pytest.approx(a.min()) and t.max == pytest.approx(a.max())
    assert t.mean == pytest.approx(a.mean()) and t.median == pytest.approx(np.median(a))
    assert t.std == pytest.approx(a.std()) and t.reps == 5


def test_time_callable_excludes_first_call_and_prepares_each_time():
    calls, prepared = [], []
    t = perf.time_callable(lambda: calls.append(1), reps=4, prepare=lambda: prepared.append(1))
    assert len(calls) == 5  # one initialisation call + 4 timed
    assert len(prepared) == 5 and t.reps == 4
    assert 0 <= t.min <= t.median <= t.max and t.min <= t.mean <= t.max


@pytest.mark.parametrize("locality", ["in-cache", "out-of-cache"])
@pytest.mark.parametrize("routine,flags,sizes", [
    ("dgemm", "NT", (16, 8, 24)), ("dtrsm", "LLN", (16, 8)), ("dtrsm", "RUT", (16, 8)),
    ("dtrmm", "RLN", (8, 16)), ("dsyrk", "UN", (16, 8)), ("dtrti2", "L", (24,)), ("dtrsyl", "", (16, 8)),
])
def test_sampler_runs_every_routine(locality, routine, flags, sizes):
    s = Sampler(reps=3, locality=locality, ld=64, flush_bytes=1 << 20)
    t = s.sample(routine, tuple(flags), sizes)
    assert t.reps == 3 and 0 < t.min <= t.median <= t.max
    assert s.samples == 3


def test_sampler_restores_overwritten_operands():
    # trsm overwrites B; every repetition must start from the same input, so the final B is one solve
    # whatever the number of repetitions.
    outs = []
    for reps in (1, 4):
        s = Sampler(reps=reps, ld=32, seed=3)
        s.sample("dtrsm", "LLN", (8, 4))
        outs.append(s._buffers["B"][:8, :4].copy())
    np.testing.assert_array_equal(outs[0], outs[1])


def test_sampler_blas_and_functions():
    from tileblas import blas as tb

    s = Sampler(reps=2)
    a = np.asfortranarray(np.random.default_rng(0).standard_normal((16, 16)))
    if hasattr(tb, "dgemm"):
        t = s.sample_blas("dgemm", 1.0, a, a)
    else:  # Level 3 not yet in tileblas.blas: time the kernel layer instead
        from tileblas.kernels import _openblas

        c = np.zeros((16, 16), order="F")
        t = s.sample_function(_openblas.gemm, 1.0, a, a, 0.0, c)
    assert t.reps == 2
    t = s.sample_function(trinv, np.tril(a) + 16 * np.eye(16), 1, 4)
    assert t.reps == 2
    with pytest.raises(ValueError, match="name"):
        s.sample_blas("no_such_routine")


def test_sampler_rejects_bad_arguments():
    s = Sampler(reps=1)
    with pytest.raises(ValueError, match="routine"):
        s.sample("dfoo", (), (1,))
    with pytest.raises(ValueError, match="flags"):
        s.sample("dtrsm", "LX", (4, 4))
    with pytest.raises(ValueError, match="sizes"):
        s.sample("dgemm", "NN", (4, 0, 4))
    with pytest.raises(ValueError, match="locality"):
        Sampler(locality="L9")
    with pytest.raises(ValueError, match="reps"):
        Sampler(reps=0)


# ---------------------------------------------------------------------------------------------------
# Modeler on synthetic timing functions with known pieces
# ---------------------------------------------------------------------------------------------------


def _piecewise_trsm(p):
    """Two cubic pieces in m (jump at m = 512) within dtrsm's L-side basis (degrees (2, 1))."""
    m, n = p
    if m <= 512:
        v = 1e-6 + 2e-12 * m * m * n + 3e-8 * n
    else:
        v = 5e-6 + 3e-12 * m * m * n + 1e-8 * m + 1e-10 * m * n
    return Timing(0.9 * v, v, 1.01 * v, 1.3 * v, 0.05 * v, 3)


@pytest.mark.parametrize("strategy,direction", [("refine", "down"), ("expand", "down"), ("expand", "up")])
def test_modeler_recovers_known_piecewise_polynomial(strategy, direction):
    sm = build_submodel("dtrsm", "LLN", _piecewise_trsm, (8, 8), (1024, 1024), strategy=strategy,
                        error_bound=1e-6, min_size=32, direction=direction, initial_size=128,
                        validation_points=60)
    assert sm.samples == 3 * sm.points and sm.points > 0
    assert sm.validation["points"] == 60
    assert sm.validation["avg_rel_error"] < 1e-9 and sm.validation["max_rel_error"] < 1e-9
    # no region straddles the jump, and every statistic is recovered
    assert all(r.hi[0] <= 512 or r.lo[0] > 512 for r in sm.regions)
    for p in [(8, 8), (100, 1000), (512, 7 * 8), (520, 64), (1024, 1024)]:
        est, ref = sm.evaluate(p), _piecewise_trsm(p)
        for s in ("min", "median", "mean", "max"):
            assert est[s] == pytest.approx(getattr(ref, s), rel=1e-9)


def test_modeler_single_polynomial_needs_one_region():
    f = lambda p: Timing(*(1e-10 * p[0] * p[1] * p[2] + 1e-6,) * 4, 0.0, 2)  # noqa: E731
    sm = build_submodel("dgemm", "NN", f, (8, 8, 8), (256, 256, 256), error_bound=0.01, validation_points=20)
    assert len(sm.regions) == 1
    assert sm.validation["max_rel_error"] < 1e-9


def test_validation_points_are_fresh():
    seen = []

    def f(p):
        seen.append(p)
        return _piecewise_trsm(p)

    sm = build_submodel("dtrsm", "LLN", f, (8, 8), (256, 256), error_bound=1e-6, validation_points=0)
    used = set(seen)
    seen.clear()
    res = validate(sm, f, 30, exclude=used, granularity=8)
    assert res["points"] == 30 and not (set(seen) & used) and len(set(seen)) == 30


def test_modeler_refinement_stops_at_min_size_and_rejects_bad_options():
    rng = np.random.default_rng(0)
    noisy = lambda p: Timing(*(float(rng.uniform(1, 2)),) * 4, 0.0, 1)  # noqa: E731  unmodelable noise
    sm = build_submodel("dtrsm", "LLN", noisy, (8, 8), (256, 256), error_bound=1e-3, min_size=64,
                        validation_points=0)
    assert all(max(h - l + 8 for l, h in zip(r.lo, r.hi)) >= 32 for r in sm.regions)
    assert all(min(h - l + 8 for l, h in zip(r.lo, r.hi)) < 128 for r in sm.regions)
    with pytest.raises(ValueError, match="strategy"):
        build_submodel("dtrsm", "LLN", noisy, (8, 8), (64, 64), strategy="magic")
    with pytest.raises(ValueError, match="direction"):
        build_submodel("dtrsm", "LLN", noisy, (8, 8), (64, 64), strategy="expand", direction="left")
    with pytest.raises(ValueError, match="error_bound"):
        build_submodel("dtrsm", "LLN", noisy, (8, 8), (64, 64), error_bound=0)


def test_refinement_sample_budget():
    rng = np.random.default_rng(1)
    noisy = lambda p: Timing(*(float(rng.uniform(1, 2)),) * 4, 0.0, 2)  # noqa: E731
    sm = build_submodel("dgemm", "NN", noisy, (8, 8, 8), (512, 512, 512), error_bound=1e-3, min_size=16,
                        validation_points=0, max_samples=300)
    per_region = 2 * (4 ** 3 + 3 ** 3)  # grid + check points of one region, 2 reps each
    assert 300 - per_region <= sm.samples <= 300  # refined while the budget allows, never beyond it
    assert len(sm.regions) >= 8


@pytest.mark.parametrize("strategy", ["refine", "expand"])
def test_bursts_keep_the_least_disturbed_one(strategy):
    """One of the two bursts of every point is slowed down 3x (interference); with 2 bursts each point, in
    fitting and in validation alike, keeps its undisturbed burst, so the known pieces are recovered exactly."""
    calls = []

    def disturbed(p):
        calls.append(p)
        t = _piecewise_trsm(p)
        if (calls.count(p) + p[0] // 8) % 2:
            return Timing(*(3 * getattr(t, s) for s in ("min", "median", "mean", "max", "std")), t.reps)
        return t

    sm = build_submodel("dtrsm", "LLN", disturbed, (8, 8), (1024, 1024), strategy=strategy, error_bound=1e-6,
                        min_size=32, validation_points=40, bursts=2)
    assert sm.config["bursts"] == 2
    assert sm.samples == 2 * 3 * sm.points  # both bursts of every point count
    assert sm.validation["points"] == 40 and sm.validation["samples"] == 2 * 3 * 40
    assert sm.validation["max_rel_error"] < 1e-9
    assert all(r.hi[0] <= 512 or r.lo[0] > 512 for r in sm.regions)
    # each batch is measured in whole passes: the last 80 calls are the validation points, twice in order
    assert calls[-80:-40] == calls[-40:] and len(set(calls[-40:])) == 40
    with pytest.raises(ValueError, match="bursts"):
        build_submodel("dtrsm", "LLN", disturbed, (8, 8), (64, 64), bursts=0)


def test_least_disturbed_and_single_round_reference():
    fast, slow = Timing(1.0, 2.0, 2.0, 3.0, 0.1, 5), Timing(0.5, 4.0, 4.0, 9.0, 1.0, 5)
    assert perf.least_disturbed([slow, fast]) is fast
    calls = []
    f = lambda p: (calls.append(p), _piecewise_trsm(p))[1]  # noqa: E731
    sm = build_submodel("dtrsm", "LLN", f, (8, 8), (256, 256), error_bound=1e-6, validation_points=10)
    assert sm.config["bursts"] == 1 and len(calls) == sm.points + 10  # one burst per point by default


def test_submodel_serialisation_round_trip():
    sm = build_submodel("dtrsm", "LLN", _piecewise_trsm, (8, 8), (512, 512), error_bound=1e-6, validation_points=5)
    back = Submodel.from_dict(sm.to_dict())
    for p in [(8, 8), (300, 17), (512, 512), (2000, 40)]:
        assert back.evaluate(p) == sm.evaluate(p)


# ---------------------------------------------------------------------------------------------------
# Repository
# ---------------------------------------------------------------------------------------------------


def _small_model(routine="dgemm", flags=("N", "N"), c=1e-10):
    f = lambda p: Timing(*(c * np.prod(p) + 1e-6,) * 4, 0.0, 1)  # noqa: E731
    spec = ROUTINES[routine]
    d = len(spec.size_names)
    return build_submodel(routine, flags, f, (8,) * d, (128,) * d, error_bound=0.01, validation_points=3)


def test_repository_round_trip(tmp_path):
    repo = Repository(tmp_path / "m.sqlite")
    sm = _small_model()
    repo.save(KEY, sm)
    got = repo.load(KEY, "dgemm", ("N", "N"))
    assert got.to_dict() == sm.to_dict()
    assert repo.load(KEY, "dgemm", ("T", "N")) is None
    assert repo.load(ModelKey("other", "openblas", "0.0", 1), "dgemm", "NN") is None
    rows = repo.list()
    assert len(rows) == 1 and rows[0]["routine"] == "dgemm" and rows[0]["flags"] == "NN"
    repo.save(KEY, _small_model(c=2e-10))  # replace
    assert len(repo.list()) == 1
    assert repo.load(KEY, "dgemm", "NN").evaluate((64, 64, 64))["median"] == pytest.approx(2e-10 * 64 ** 3 + 1e-6)
    repo.set_property(KEY, "peak_gflops", 12.5)
    assert repo.get_property(KEY, "peak_gflops") == 12.5
    assert repo.delete(KEY, "dgemm", "NN") and repo.load(KEY, "dgemm", "NN") is None


def test_repository_default_path_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEBLAS_MODEL_DB", str(tmp_path / "env.sqlite"))
    assert perf.default_path() == tmp_path / "env.sqlite"
    monkeypatch.delenv("TILEBLAS_MODEL_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert perf.default_path() == tmp_path / "cache" / "tileblas" / "models.sqlite"


def _writer(path, k):
    repo = Repository(path)
    for i in range(5):
        key = ModelKey(f"m{k}", "openblas", "0.0", 1)
        repo.save(key, _small_model(c=(i + 1) * 1e-10))
        repo.list()


def test_repository_concurrent_writers_threads_and_processes(tmp_path):
    path = tmp_path / "c.sqlite"
    Repository(path)
    ths = [threading.Thread(target=_writer, args=(path, k)) for k in range(4)]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, 10 + k)) for k in range(2)]
    for t in ths + procs:
        t.start()
    for t in ths:
        t.join()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    repo = Repository(path)
    rows = repo.list()
    assert sorted(r["machine"] for r in rows) == sorted(f"m{k}" for k in [0, 1, 2, 3, 10, 11])
    for r in rows:  # each holds its writer's last model, whole
        sm = repo.load(ModelKey(r["machine"], "openblas", "0.0", 1), "dgemm", "NN")
        assert sm.evaluate((64, 64, 64))["median"] == pytest.approx(5e-10 * 64 ** 3 + 1e-6)


def test_repository_damaged_file(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(os.urandom(4096))
    with pytest.raises(RepositoryError, match="damaged"):
        Repository(bad)
    # a valid SQLite file that is not ours
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(RepositoryError, match="not a tileblas"):
        Repository(other)


def test_repository_damaged_model_row(tmp_path):
    path = tmp_path / "m.sqlite"
    repo = Repository(path)
    repo.save(KEY, _small_model())
    con = sqlite3.connect(path)
    con.execute("UPDATE models SET body = replace(body, '\"regions\"', '\"regionz\"')")
    con.commit()
    con.close()
    with pytest.raises(RepositoryError, match="damaged"):
        repo.load(KEY, "dgemm", "NN")


def test_repository_newer_schema_version(tmp_path):
    path = tmp_path / "m.sqlite"
    Repository(path)
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(RepositoryError, match="schema version 99"):
        Repository(path)


def _check_read_only(path, sm):
    """A repository this process may only read: loads work, every write names the file and says read-only."""
    repo = Repository(path)
    assert repo.read_only
    assert repo.load(KEY, "dgemm", "NN").to_dict() == sm.to_dict()
    assert len(repo.list()) == 1 and repo.get_property(KEY, "peak_gflops") == 3.0
    for write in (lambda: repo.save(KEY, _small_model(c=2e-10)), lambda: repo.delete(KEY, "dgemm", "NN"),
                  lambda: repo.set_property(KEY, "peak_gflops", 1.0)):
        with pytest.raises(perf.ReadOnlyRepositoryError, match="read-only") as info:
            write()
        assert str(path) in str(info.value) and "damaged" not in str(info.value)
    assert repo.load(KEY, "dgemm", "NN").to_dict() == sm.to_dict()  # nothing half-written


def _filled_repository(path):
    repo = Repository(path)
    sm = _small_model()
    repo.save(KEY, sm)
    repo.set_property(KEY, "peak_gflops", 3.0)
    return path, sm


def test_repository_read_only_file(tmp_path, monkeypatch):
    """SQLite opens the file read-only (as it would without write permission); the permission test itself is
    stubbed because root may write any file."""
    path, sm = _filled_repository(tmp_path / "m.sqlite")
    monkeypatch.setattr("tileblas.policy._repository._writable", lambda p: False)
    _check_read_only(path, sm)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write read-only files")
@pytest.mark.parametrize("what", ["file", "directory"])
def test_repository_read_only_permissions(tmp_path, what):
    d = tmp_path / "repo"
    d.mkdir()
    path, sm = _filled_repository(d / "m.sqlite")
    os.chmod(path, 0o444)
    if what == "directory":
        os.chmod(d, 0o555)
    try:
        _check_read_only(path, sm)
    finally:
        os.chmod(d, 0o755)
        os.chmod(path, 0o644)


def test_repository_path_errors(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(RepositoryError, match="is a file, not a directory") as info:
        Repository(afile / "sub" / "m.sqlite")
    assert str(afile) in str(info.value)
    assert not (tmp_path / "afile" / "sub").exists()
    with pytest.raises(RepositoryError, match="is a directory, not a file"):
        Repository(tmp_path)


# ---------------------------------------------------------------------------------------------------
# Trace mode and algorithms
# ---------------------------------------------------------------------------------------------------


def test_trace_trinv_variant1_matches_paper_example():
    # paper IV-A: variant 1, n = 250, b = 100
    assert trace_trinv(250, 1, 100) == [
        Call("dtrti2", ("L",), (100,)),
        Call("dtrmm", ("R", "L", "N"), (100, 100)), Call("dtrsm", ("L", "L", "N"), (100, 100)),
        Call("dtrti2", ("L",), (100,)),
        Call("dtrmm", ("R", "L", "N"), (50, 200)), Call("dtrsm", ("L", "L", "N"), (50, 200)),
        Call("dtrti2", ("L",), (50,)),
    ]


def test_trace_records_the_calls_execution_makes():
    class Recording(perf.CallRunner):
        def __init__(self):
            super().__init__()
            self.tracer = perf.Tracer()

        def __getattribute__(self, name):
            if name in ("gemm", "trsm", "trmm", "trti2", "trsyl"):
                rec, run = getattr(object.__getattribute__(self, "tracer"), name), object.__getattribute__(self, name)

                def both(*a):
                    rec(*a)
                    return run(*a)
                return both
            return object.__getattribute__(self, name)

    rng = np.random.default_rng(1)
    n = 37
    lmat = np.tril(rng.standard_normal((n, n))) + n * np.eye(n)
    for v in TRINV_VARIANTS:
        ex = Recording()
        trinv(lmat, v, 8, blas=ex)
        assert ex.tracer.calls == trace_trinv(n, v, 8)
    u = np.triu(rng.standard_normal((20, 20))) + 20 * np.eye(20)
    c = rng.standard_normal((n, 20))
    for v in (1, 7, 16):
        ex = Recording()
        sylvester(lmat, u, c, v, 8, blas=ex)
        assert ex.tracer.calls == trace_sylvester(n, 20, v, 8)


def test_sylvester_plans_of_variants_1_and_16_are_the_papers():
    # variant 1: X01 -= X00 U01; X10 -= L10 X00; X01 = Om; X10 = Om; X11 -= X10 U01; X11 -= L10 X01; X11 = Om
    p1 = _PLANS[1]
    assert [op[0] for op in p1] == ["gemm", "gemm", "solve", "solve", "gemm", "gemm", "solve"]
    assert {op[1:3] for op in p1[:2]} == {("U", 0), ("L", 0)}
    assert p1[-1] == ("solve", 1, 1)
    # variant 16: X11 = Om; X12 -= X11 U12; X21 -= L21 X11; X12 = Om; X21 = Om; X22 -= ...; X22 -= ...
    p16 = _PLANS[16]
    assert p16[0] == ("solve", 1, 1)
    assert [op[0] for op in p16] == ["solve", "gemm", "gemm", "solve", "solve", "gemm", "gemm"]
    assert {op[3:] for op in p16[-2:]} == {(range(2, 3), range(2, 3))}
    assert len(SYLVESTER_VARIANTS) == 14 and 4 not in SYLVESTER_VARIANTS and 10 not in SYLVESTER_VARIANTS
    assert perf.sylvester_invariant(4)["valid"] == "False"


@pytest.mark.parametrize("variant", TRINV_VARIANTS)
@pytest.mark.parametrize("n,block", [(1, 4), (13, 4), (40, 16), (40, 40), (65, 100), (64, 7)])
def test_trinv_correct(variant, n, block):
    rng = np.random.default_rng(n)
    lmat = np.tril(rng.standard_normal((n, n))) + n * np.eye(n)
    full = lmat + np.triu(rng.standard_normal((n, n)), 1)  # strictly upper part must be ignored
    x = trinv(full, variant, block)
    ref = sla.solve_triangular(lmat, np.eye(n), lower=True)
    np.testing.assert_allclose(x, ref, rtol=1e-10, atol=1e-12)
    assert np.all(np.triu(x, 1) == 0)


@pytest.mark.parametrize("variant", SYLVESTER_VARIANTS)
@pytest.mark.parametrize("m,n,block", [(1, 1, 4), (12, 5, 4), (33, 47, 8), (40, 40, 16), (20, 30, 64)])
def test_sylvester_correct(variant, m, n, block):
    rng = np.random.default_rng(m * 100 + n)
    lmat = np.tril(rng.standard_normal((m, m))) + m * np.eye(m)
    u = np.triu(rng.standard_normal((n, n))) + n * np.eye(n)
    c = rng.standard_normal((m, n))
    x = sylvester(lmat + np.triu(np.ones((m, m)), 1), u + np.tril(np.ones((n, n)), -1), c, variant, block)
    np.testing.assert_allclose(x, sla.solve_sylvester(lmat, u, c), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(lmat @ x + x @ u, c, atol=1e-9)


def test_runners_use_the_fixed_leading_dimension_and_compute_correctly():
    from tileblas.perf._sampler import DEFAULT_LD, leading_dimension

    assert leading_dimension(100) == DEFAULT_LD == 1032 and leading_dimension(2048) == 2056
    assert Sampler()._buffer("B", 16, 8, "gen").strides == (8, 8 * DEFAULT_LD)
    for name, n, v, b in (("trinv", 70, 2, 16), ("sylvester", 40, 16, 8)):
        alg = perf.ALGORITHMS[name]
        prepare, run = alg.make_runner(n, v, b, np.random.default_rng(3))
        cells = [c.cell_contents for c in run.__closure__ if isinstance(c.cell_contents, np.ndarray)]
        outs = [a for a in cells if a.shape == (n, n) and a.strides == (8, 8 * DEFAULT_LD)]
        assert outs, "the runner's operands are views with the fixed leading dimension"
        for _ in range(2):  # prepare restores the inputs: two runs give the same result
            prepare()
            run()
        if name == "trinv":
            (work,) = outs
            lmat = np.tril(np.random.default_rng(3).standard_normal((n, n))) + n * np.eye(n)
            np.testing.assert_allclose(np.tril(work) @ lmat, np.eye(n), atol=1e-12)


def test_algorithm_input_errors():
    a = np.eye(4)
    with pytest.raises(ValueError, match="variant"):
        trinv(a, 5)
    with pytest.raises(ValueError, match="block"):
        trinv(a, 1, 0)
    with pytest.raises(ValueError, match="square"):
        trinv(np.ones((3, 4)))
    with pytest.raises(TypeError, match="real"):
        trinv(a.astype(complex))
    with pytest.raises(ValueError, match="variant"):
        sylvester(a, a, a, 4)
    with pytest.raises(ValueError, match="c must have shape"):
        sylvester(a, a, np.ones((4, 3)))
    with pytest.raises(np.linalg.LinAlgError):
        trinv(np.diag([1.0, 0.0, 1.0]), 1, 2)
    with pytest.raises(perf.SylvesterError):
        sylvester(np.eye(3), -np.eye(3), np.ones((3, 3)), 1, 2)


# ---------------------------------------------------------------------------------------------------
# Predictor and suggest
# ---------------------------------------------------------------------------------------------------


def _flop_time(routine):
    """Synthetic times: flops at 1 GFLOP/s plus 1 microsecond per call."""
    spec = ROUTINES[routine]

    def f(flags):
        return lambda p: Timing(*(spec.flops(flags, p) * 1e-9 + 1e-6,) * 2, *(spec.flops(flags, p) * 1.1e-9 + 1e-6,) * 2,
                                0.0, 1)
    return f


@pytest.fixture
def synthetic_repo(tmp_path):
    repo = Repository(tmp_path / "s.sqlite")
    need = needed_models(trace_trinv(n, v, b) for n in (64, 128) for v in TRINV_VARIANTS
                         for b in (16, 32))
    need[("dgemm", ("N", "N"))] = ([8, 8, 8], [128, 128, 128])
    need[("dtrsm", ("L", "L", "N"))] = ([8, 8], [128, 512])
    for (routine, flags), (lo, hi) in need.items():
        lo8 = [8] * len(lo)
        hi8 = [max(8, -(-h // 8) * 8) for h in hi]
        sm = build_submodel(routine, flags, _flop_time(routine)(flags), lo8, hi8, error_bound=1e-6,
                            validation_points=0)
        repo.save(KEY, sm)
    repo.set_property(KEY, "peak_gflops", 1.0)
    return repo


def test_predictor_sums_models_over_a_trace(synthetic_repo):
    pred = Predictor(synthetic_repo, KEY)
    calls = trace_trinv(128, 3, 32)
    p = pred.predict_calls(calls)
    expect = sum(ROUTINES[c.routine].flops(c.flags, c.sizes) * 1e-9 + 1e-6 for c in calls)
    assert p.time["median"] == pytest.approx(expect, rel=1e-8)
    assert p.time["max"] == pytest.approx(1.1 * (expect - 1e-6 * len(calls)) + 1e-6 * len(calls), rel=1e-8)
    assert p.time["min"] <= p.time["median"] <= p.time["max"] and p.calls == len(calls)
    assert sum(p.by_routine.values()) == pytest.approx(p.time["median"])
    full = pred.predict("trinv", 128, 3, 32)
    assert full.flops == perf.ALGORITHMS["trinv"].flops(128)
    assert full.efficiency["median"] == pytest.approx(full.flops / 1e9 / full.time["median"])
    assert full.efficiency["min"] <= full.efficiency["median"] <= full.efficiency["max"]
    ranking = pred.rank("trinv", 128, 32)
    assert sorted(p.label["variant"] for p in ranking) == list(TRINV_VARIANTS)
    times = [p.time["median"] for p in ranking]
    assert times == sorted(times)
    best, preds = pred.best_block("trinv", 128, 1, [16, 32])
    assert best in (16, 32) and len(preds) == 2
    assert min(preds, key=lambda q: q.time["median"]).label["block"] == best


def test_predictor_missing_model(synthetic_repo):
    pred = Predictor(synthetic_repo, KEY)
    with pytest.raises(perf.MissingModelError, match="dsyrk"):
        pred.predict_calls([Call("dsyrk", ("U", "N"), (8, 8))])


def _mirror_to_this_machine(repo):
    key = perf.current_key()
    for r in repo.list():
        repo.save(key, repo.load(KEY, r["routine"], r["flags"]))
    return key


def test_suggest_answers_from_models(synthetic_repo, tmp_path, monkeypatch, tuned):
    from tileblas.policy import _suggest

    tuned(model_recheck_s=0.0)  # see repository changes at once
    _suggest.clear_cache()
    db = str(synthetic_repo.path)
    # models are stored under KEY, not this machine's key: nothing to suggest
    assert perf.suggest("tile_size", n=1024, path=db) is None
    assert perf.suggest("tile_size", n=1024, path=str(tmp_path / "missing.sqlite")) is None
    with pytest.raises(ValueError, match="name"):
        perf.suggest("colour")
    _mirror_to_this_machine(synthetic_repo)
    # synthetic dgemm: 2mnk ns + 1 us per call, modeled up to 128; per task overhead 10 us, 2 devices
    t = lambda b: 2e-9 * b ** 3 + 1e-6 + 10e-6  # noqa: E731
    span = {b: -(-(1024 // b) ** 2 // 2) * (1024 // b) * t(b) for b in (32, 64, 128)}
    expect = min(span, key=span.get)
    got = perf.suggest("tile_size", n=1024, devices=2, path=db, candidates=(32, 64, 128, 256), overhead=10e-6)
    assert got == expect == 128  # 256 lies beyond the modeled domain: never chosen
    # at least 2 * 8 tiles for 2 devices: 128 (64 tiles) still qualifies, a 256-row problem needs 64
    assert perf.suggest("tile_size", n=256, devices=2, path=db, candidates=(32, 64, 128), min_tiles=16) == 64
    # synthetic dtrsm: m^2 n ns + 1 us; one split costs m^2 n ns + 3 us: the direct call always wins, up to
    # the modeled triangular size 128
    stop = perf.suggest("recursion_stop", routine="dtrsm", n=300, path=db, candidates=[16, 32, 64, 128, 256])
    assert stop == 128
    assert perf.suggest("recursion_stop", routine="dtrmm", side="L", n=300, path=db) is None  # no LLN dtrmm model
    assert perf.suggest("block_size", algorithm="trinv", variant=1, n=128, blocks=[16, 32], path=db) in (16, 32)


def test_suggest_is_memoised_and_follows_repository_changes(synthetic_repo, monkeypatch, tuned):
    from tileblas.policy import _suggest

    _suggest.clear_cache()
    db = str(synthetic_repo.path)
    key = _mirror_to_this_machine(synthetic_repo)
    calls = []
    real = _suggest._answer
    monkeypatch.setattr(_suggest, "_answer", lambda *a: calls.append(a) or real(*a))
    first = perf.suggest("tile_size", n=512, path=db, candidates=(64, 128))
    for _ in range(100):
        assert perf.suggest("tile_size", n=512, path=db, candidates=(64, 128)) == first
    assert len(calls) == 1 and first in (64, 128)
    # recursion-stop questions are bucketed by the next power of two of the free dimension
    for n in (129, 200, 256):
        perf.suggest("recursion_stop", routine="dtrsm", n=n, path=db)
    assert len(calls) == 2
    # a changed repository is noticed after Tuning.model_recheck_s
    synthetic_repo.delete(key, "dgemm", "NN")
    tuned(model_recheck_s=0.0)
    assert perf.suggest("tile_size", n=512, path=db, candidates=(64, 128)) is None


@pytest.mark.parametrize("content", [b"garbage" * 1000, b""])
def test_suggest_damaged_repository_is_silent(tmp_path, content):
    import warnings

    from tileblas.policy import _suggest

    _suggest.clear_cache()
    bad = tmp_path / "junk.sqlite"
    bad.write_bytes(content)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert perf.suggest("tile_size", n=512, path=str(bad)) is None
        assert perf.suggest("recursion_stop", routine="dtrsm", path=str(bad)) is None
    foreign = tmp_path / "other.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    assert perf.suggest("tile_size", n=512, path=str(foreign)) is None


def test_suggest_import_is_light():
    import subprocess
    import sys

    code = ("import sys, tileblas; from tileblas.perf import suggest; "
            "print(sorted(m for m in sys.modules if m.startswith(('tileblas.perf', 'tileblas.policy'))"
            " or m == 'sqlite3'))")
    env = {**os.environ, "TILEBLAS_MODEL_DB": "/nonexistent/models.sqlite"}
    out = subprocess.run([sys.executable, "-c", code + "; print(suggest('tile_size', n=100))"], env=env,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "['tileblas.perf', 'tileblas.policy', 'tileblas.policy._suggest']" and out[1] == "None"


def test_runtime_and_recursion_read_the_models(synthetic_repo, monkeypatch):
    from tileblas import linalg
    from tileblas.kernels import _openblas
    from tileblas.kernels import _recursive
    from tileblas.policy import _suggest
    from tileblas.runtime import Runtime
    from tileblas.runtime import _planner as P

    _suggest.clear_cache()
    monkeypatch.setenv("TILEBLAS_MODEL_DB", str(synthetic_repo.path))
    stops = []
    real = _recursive.run_recursive
    monkeypatch.setattr(_recursive, "run_recursive", lambda *a: stops.append(a[-1]) or real(*a))
    rng = np.random.default_rng(0)
    a = np.asfortranarray(np.tril(rng.uniform(-1, 1, (300, 300))) / 300 + 2 * np.eye(300))
    b0 = np.asfortranarray(rng.uniform(-1, 1, (300, 40)))
    expect = sla.solve_triangular(a, b0, lower=True)
    with Runtime(devices=2) as r:
        heuristic = P.default_tile_size("gemm", 2048, 2048, 2048, 2)
        assert r.tile_size_for("gemm", 2048, 2048, 2048) == heuristic  # no model for this machine yet
        b = b0.copy(order="F")
        linalg.recursive_trsm(1.0, a, b, "L", "L", "N", "N", lib=_openblas.get_library(1))
        assert stops[-1] == _recursive.DEFAULT_STOP
        _mirror_to_this_machine(synthetic_repo)
        _suggest.clear_cache()
        want = perf.suggest("tile_size", m=2048, n=2048, k=2048, devices=2, candidates=P.TILE_CANDIDATES,
                            overhead=P.TASK_OVERHEAD_S, min_tiles=8)
        assert want is not None and r.tile_size_for("gemm", 2048, 2048, 2048) == want
        c = np.zeros((600, 600))
        r.gemm(1.0, np.ones((600, 300)), np.ones((300, 600)), 0.0, c)
        assert np.all(c == 300.0)
        b = b0.copy(order="F")
        linalg.recursive_trsm(1.0, a, b, "L", "L", "N", "N", lib=_openblas.get_library(1))
        assert stops[-1] == perf.suggest("recursion_stop", routine="dtrsm", side="L", n=40) == 128
        np.testing.assert_allclose(b, expect, rtol=1e-10, atol=1e-12)
        # the kernel itself decides nothing: called directly without a stop it keeps its default
        _recursive.recursive_trsm(1.0, a, b0.copy(order="F"), "L", "L", "N", "N", lib=_openblas.get_library(1))
        assert stops[-1] == _recursive.DEFAULT_STOP
    with Runtime(devices=2, deterministic=True) as r:  # deterministic partitions ignore the models
        assert r.tile_size_for("gemm", 2048, 2048, 2048) == P.default_tile_size(
            "gemm", 2048, 2048, 2048, P.DETERMINISTIC_DEVICES)
    _suggest.clear_cache()


# ---------------------------------------------------------------------------------------------------
# Plots and CLI
# ---------------------------------------------------------------------------------------------------


def test_plots_write_png(tmp_path):
    from tileblas.perf import _plots

    sm = build_submodel("dtrsm", "LLN", _piecewise_trsm, (8, 8), (256, 256), error_bound=1e-3, validation_points=10)
    out = _plots.plot_regions(sm, tmp_path / "r.png", [(p, e) for p, e in sm.validation["detail"]])
    sm1 = build_submodel("dtrti2", "L", lambda p: Timing(*(1e-9 * p[0] ** 3,) * 4, 0.0, 1), (8,), (64,),
                         validation_points=0)
    out1 = _plots.plot_regions(sm1, tmp_path / "r1.png")
    series = {"v1": {"x": [64, 128], "median": [0.5, 0.6], "min": [0.4, 0.5], "max": [0.6, 0.7],
                     "measured": [0.55, 0.58]}}
    out2 = _plots.plot_vs_size(series, tmp_path / "n.png")
    out3 = _plots.plot_vs_block(series, tmp_path / "b.png")
    for o in (out, out1, out2, out3):
        with open(o, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_build_models_for_covers_and_grows_domains(tmp_path):
    repo = Repository(tmp_path / "g.sqlite")
    repo.set_property(KEY, "peak_gflops", 1.0)  # no peak measurement in a unit test
    kw = dict(variants=[3], reps=1, validation_points=0, min_size=64, log=lambda s: None)
    first = perf.build_models_for("trinv", [32], [8], repo, KEY, **kw)
    assert {(m.routine, m.flags) for m in first} == {(r, f) for (r, f) in needed_models(
        [trace_trinv(32, 3, 8)])}
    assert perf.build_models_for("trinv", [32], [8], repo, KEY, **kw) == []  # covered: nothing rebuilt
    grown = {(m.routine, m.flags): m for m in perf.build_models_for("trinv", [64], [8], repo, KEY, **kw)}
    assert ("dgemm", ("N", "N")) in grown and ("dtrti2", ("L",)) not in grown  # trti2 stays 8 x 8
    for m in first:
        g = repo.load(KEY, m.routine, m.flags)
        assert all(a <= b for a, b in zip(g.lo, m.lo)) and all(a >= b for a, b in zip(g.hi, m.hi))
    for (routine, flags), (lo, hi) in needed_models([trace_trinv(64, 3, 8)]).items():
        g = repo.load(KEY, routine, flags)
        assert all(a <= b for a, b in zip(g.lo, lo)) and all(a >= b for a, b in zip(g.hi, hi))
    Predictor(repo, KEY).predict("trinv", 64, 3, 8)  # every call of the trace has a model


def test_cli_end_to_end(tmp_path, monkeypatch, capsys):
    from tileblas.cli import main

    db = tmp_path / "cli.sqlite"
    monkeypatch.setenv("TILEBLAS_MODEL_DB", str(db))
    assert main(["model", "build", "dtrsm", "--flags", "LLN", "--hi", "32", "--reps", "1", "--validation", "3",
                 "--no-progress", "--plot", str(tmp_path / "regions.png")]) == 0
    out = capsys.readouterr().out
    assert "dtrsm LLN" in out and "validation on 3 fresh points" in out
    assert (tmp_path / "regions.png").exists()
    assert main(["model", "show"]) == 0
    assert "dtrsm" in capsys.readouterr().out
    assert main(["rank", "trinv", "--n", "32,48", "--block", "16", "--build", "--measure", "--reps", "1",
                 "--no-progress", "--min-size", "64", "--plot", str(tmp_path / "rank.png")]) == 0
    out = capsys.readouterr().out
    assert "predicted ranking" in out and "measured ranking" in out and (tmp_path / "rank.png").exists()
    assert main(["rank", "sylvester", "--n", "24", "--block", "8", "--variants", "1,16", "--build", "--reps", "1",
                 "--no-progress", "--min-size", "64"]) == 0
    assert "sylvester n=24" in capsys.readouterr().out
    assert main(["tune", "--n", "48", "--blocks", "8,16", "--variant", "3", "--max-tile", "64", "--reps", "1",
                 "--validation", "3", "--no-progress", "--min-size", "64", "--no-paths"]) == 0
    out = capsys.readouterr().out
    assert "best: variant 3 with block" in out and "tile_size" in out
    assert main(["model", "build", "dtrsm", "--flags", "QQ"]) == 2


def test_cli_reports_an_unusable_repository(tmp_path, monkeypatch, capsys):
    from tileblas.cli import main

    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv("TILEBLAS_MODEL_DB", str(afile / "m.sqlite"))
    assert main(["model", "build", "dgemm"]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a directory" in err and str(afile) in err
