"""The Level-3 path policy: every path (one native call on all threads, the trmm/trsm recursion, tiles)
gives SciPy's result for every routine, flag and layout on both sides of each crossover; ``tileblas tune``
stores crossovers that the runtime then follows; ``tileblas info`` shows them."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.linalg.blas as sb

import tileblas
from tileblas import blas
from tileblas.blas import _dispatch
from tileblas.policy import _dropin, _paths
from tileblas.runtime import _runtime

from _helpers import rand

PREFIXES = "sdcz"
SMALL, LARGE = 96, 300  # on either side of the forced crossover below
CROSS = 2.0 * 200**3


def _splits(fp) -> dict:
    """The C path's split ranges in force: none without a pool slot."""
    cfg = fp.config()
    return cfg["split"] if cfg["pool_slot"] >= 0 else {}


def _policy(tile: float = CROSS, recursion: tuple | None = (math.inf, 0.0, 0.0)) -> _paths.PathPolicy:
    tiles = {(f, c): tile for f in _paths.FAMILIES for c in _paths.CLASSES}
    rec = {(f, c): recursion for f in ("trmm", "trsm") for c in _paths.CLASSES}
    return _paths.PathPolicy(tiles, rec, "test", None)


@pytest.fixture
def runtime(monkeypatch):
    """A host-only default runtime with two workers and no single-thread small path, so that the policy
    decides every call."""
    rt = tileblas.Runtime(devices=2, small_flops=0)  # "small" labels calls below small_flops
    prev = _runtime.set_runtime(rt)
    yield rt
    _runtime.set_runtime(prev)
    rt.shutdown()


def _use(monkeypatch, pol):
    monkeypatch.setattr(_paths, "_POLICY", [pol])


def _bound(dt, k, *terms):
    """Error bound of a sum of products of length k: a small multiple of k * eps * sum of |factors|."""
    eps = np.finfo(dt).eps
    return 8.0 * (k + 2) * eps * sum(float(np.prod([np.abs(t).max() for t in term])) for term in terms)


def _layout(x, order):
    return np.ascontiguousarray(x) if order == "C" else np.asfortranarray(x)


def _cases(n):
    """(routine, args, kwargs, bound terms, k) for every routine and flag combination at size n."""
    rng = np.random.default_rng(n)
    for p in PREFIXES:
        dt = np.dtype({"s": "f4", "d": "f8", "c": "c8", "z": "c16"}[p])
        a, b, c = (rand(rng, (n, n), dt) for _ in range(3))
        trans = (0, 1, 2) if dt.kind == "c" else (0, 1)
        for ta, tb in itertools.product(trans, trans):
            yield p + "gemm", (1.5, a, b), dict(beta=0.5, c=c, trans_a=ta, trans_b=tb), [(a, b), (c,)], n
        names = ["symm"] + (["hemm"] if dt.kind == "c" else [])
        for name, side, lower in itertools.product(names, (0, 1), (0, 1)):
            yield p + name, (1.5, a, b), dict(beta=0.5, c=c, side=side, lower=lower), [(a, b), (c,)], n
        for lower, tr in itertools.product((0, 1), (0, 1)):
            yield p + "syrk", (1.5, a), dict(beta=0.5, c=c, trans=tr, lower=lower), [(a, a), (c,)], n
            yield p + "syr2k", (1.5, a, b), dict(beta=0.5, c=c, trans=tr, lower=lower), [(a, b), (c,)], 2 * n
            if dt.kind == "c":
                h = c + c.conj().T
                yield p + "herk", (1.5, a), dict(beta=0.5, c=h, trans=2 * tr, lower=lower), [(a, a), (h,)], n
                yield p + "her2k", (1.5, a, b), dict(beta=0.5, c=h, trans=2 * tr, lower=lower), [(a, b), (h,)], \
                    2 * n
        t = (rand(rng, (n, n), dt) / n + 2.0 * np.eye(n)).astype(dt)  # both triangles well-conditioned
        for side, lower, ta, diag in itertools.product((0, 1), (0, 1), trans, (0, 1)):
            kw = dict(side=side, lower=lower, trans_a=ta, diag=diag)
            yield p + "trmm", (1.5, t, b), kw, [(t, b)], n
            yield p + "trsm", (1.5, t, b), kw, None, n


def _check(name, args, kw, terms, k, order):
    args = tuple(_layout(x, order) if isinstance(x, np.ndarray) else x for x in args)
    kw = {key: (_layout(v, order) if isinstance(v, np.ndarray) else v) for key, v in kw.items()}
    got = getattr(blas, name)(*args, **kw)
    want = getattr(sb, name)(*args, **kw)
    dt = want.dtype
    if terms is None:  # trsm: compare through the residual op(T) X = alpha B (well-conditioned T)
        tol = _bound(dt, k, (args[1], want)) * 20
    else:
        tol = _bound(dt, k, *terms) * 1.5
    err = np.abs(got - want).max()
    assert err <= tol, (name, kw, order, err, tol)


def _run_all(rt, n, want_paths):
    seen = set()
    for name, args, kw, terms, k in _cases(n):
        for order in "CF":
            _check(name, args, kw, terms, k, order)
            path = rt.last_profile().path
            assert path in want_paths[name[1:]], (name, kw, order, path)
            seen.add(path)
    return seen


_NATIVE = dict.fromkeys(["gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"], ("shared",))
_TILED = dict.fromkeys(_NATIVE, ("tiled", "split-k"))


def test_native_below_the_tile_crossover(runtime, monkeypatch):
    _use(monkeypatch, _policy())
    assert _run_all(runtime, SMALL, _NATIVE) == {"shared"}


def test_tiled_at_and_above_the_tile_crossover(runtime, monkeypatch):
    _use(monkeypatch, _policy())
    assert _run_all(runtime, LARGE, _TILED) >= {"tiled"}


def test_recursion_where_the_rule_says_so(runtime, monkeypatch):
    _use(monkeypatch, _policy(recursion=(64.0, 1.0, 1e9)))
    want = dict(_NATIVE, trmm=("recursive",), trsm=("recursive",))
    assert _run_all(runtime, SMALL, want) == {"shared", "recursive"}
    # a rule tuned on the machine holds at any thread count (the shipped one only at those it was measured at)
    from tileblas.policy import _recursion

    assert _recursion.recursion_window("trsm", "d", "L", 16) == (64.0, 1.0, 1e9)
    assert _recursion.recursion_faster(64, 64, 16, "trsm", "d", "L")


def test_recursion_rule_bounds_are_inclusive_and_per_class(runtime, monkeypatch):
    pol = _policy(tile=math.inf)
    pol.recursion[("trsm", "real")] = (SMALL, SMALL, SMALL)
    _use(monkeypatch, pol)
    rng = np.random.default_rng(0)
    t = np.tril(rand(rng, (SMALL, SMALL), np.float64)) + 4 * np.eye(SMALL)
    for p, cols, want in [("d", SMALL, "recursive"), ("d", SMALL + 1, "shared"), ("z", SMALL, "shared")]:
        dt = np.float64 if p == "d" else np.complex128
        b = rand(rng, (SMALL, cols), np.float64)
        getattr(blas, p + "trsm")(1.0, t.astype(dt), b.astype(dt))
        assert runtime.last_profile().path == want, (dt, cols)
    # never tiled when the crossover is inf, however large
    a = rand(rng, (LARGE, LARGE), np.float64)
    blas.dgemm(1.0, a, a)
    assert runtime.last_profile().path == "shared"


def test_runtimes_outside_the_policy_keep_their_paths(monkeypatch):
    _use(monkeypatch, _policy(tile=math.inf))
    a = np.asfortranarray(rand(np.random.default_rng(1), (LARGE, LARGE), np.float64))
    for kwargs in ({"tile_size": 128}, {"shared_flops": 0}, {"deterministic": True}):
        with tileblas.Runtime(devices=2, **kwargs) as rt:
            c = np.zeros((LARGE, LARGE), order="F")
            rt.gemm(1.0, a, a, 0.0, c)
            assert rt.last_profile().path in ("tiled", "split-k"), kwargs
            assert rt.shared_flops is not None
            assert np.abs(c - a @ a).max() <= _bound(np.float64, LARGE, (a, a))
    with tileblas.Runtime(devices="cpu:1,sim:1") as rt:
        c = np.zeros((LARGE, LARGE), order="F")
        rt.gemm(1.0, a, a, 0.0, c)
        assert rt.last_profile().path != "shared"


def test_a_failed_native_call_leaves_the_runtime_working(runtime, monkeypatch):
    _use(monkeypatch, _policy(tile=math.inf))
    a = np.ones((SMALL, SMALL), order="F")
    with pytest.raises(ValueError):
        runtime.gemm(1.0, a, np.ones((SMALL + 1, SMALL), order="F"), 0.0, np.zeros((SMALL, SMALL), order="F"))
    c = np.zeros((SMALL, SMALL), order="F")
    runtime.gemm(1.0, a, a, 0.0, c)
    assert runtime.last_profile().path == "shared" and np.all(c == SMALL)
    assert runtime.stats()["calls"] >= 1


def test_policy_file_round_trip_and_bad_files(tmp_path, monkeypatch):
    pol = _policy(tile=1e9, recursion=(512.0, 32.0, 128.0))
    pol.tile_flops[("gemm", "complex")] = math.inf
    pol.recursion[("trsm", "complex")] = (math.inf, 0.0, 0.0)
    f = tmp_path / "paths.json"
    _paths.save_policy(pol, f)
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    got = _paths.reload()
    try:
        assert got.source.startswith("tuned on ") and got.file == str(f) and not got.note
        assert got.tile_flops == pol.tile_flops
        assert got.recursion == pol.recursion
        assert got.tile_limit("zgemm"[1:], "z") == math.inf and got.tile_limit("her2k", "c") == 1e9
        for text in ("{not json", json.dumps({"schema": 99}), json.dumps({"schema": 1, "tile_flops": {"x/y": 1}})):
            f.write_text(text)
            bad = _paths.reload()
            assert bad.source == "shipped default" and str(f) in bad.note
            assert all(math.isinf(v) for v in bad.tile_flops.values())
        f.unlink()
        assert "no tuned policy" in _paths.reload().note
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _paths.reload()


def test_the_fast_path_gets_the_policy_limits(monkeypatch):
    """apply_policy hands the C path the policy's limits in one configure call (for the runtime it stands in
    for: here a stand-in of 2 threads), the tile crossovers and the recursion's shapes included."""
    import types

    calls = []

    class Fake:
        @staticmethod
        def configure(cfg):
            calls.append(cfg)

    monkeypatch.setattr(_dispatch, "_fastpath", Fake)
    monkeypatch.setattr(_dispatch, "_FAST", [types.SimpleNamespace(_policy_threads=2)])
    pol = _policy(tile=3e8, recursion=(1024.0, 32.0, 128.0))
    pol.tile_flops[("gemm", "complex")] = 1e8
    _use(monkeypatch, pol)
    got = _dispatch.apply_policy().limits
    assert len(calls) == 1 and calls[0]["limits"] == dict(got) and calls[0]["enabled"]
    assert got["gemm"] == 1e8 and got["syrk"] == 3e8 and got["herk"] == 3e8
    assert got["trsm"] == 3e8 and got["trmm"] == 3e8 and got["ztrsm/L"] == 3e8  # flop limits: tiles only
    # the recursion's shapes, per precision and side, from the tuned rule
    assert calls[0]["windows"] == {f"{p}{f}/{s}": (1024.0, 32.0, 128.0) for f in ("trmm", "trsm") for p in "sdcz"
                                   for s in "LR"}
    _use(monkeypatch, _policy(tile=math.inf, recursion=(math.inf, 0.0, 0.0)))
    assert all(v == sys.float_info.max for v in _dispatch.apply_policy().limits.values())
    assert len(calls) == 2 and calls[-1]["limits"] == {k: sys.float_info.max for k in got}
    assert all(w is None for w in calls[-1]["windows"].values())  # a tuned "never": no call left to the recursion


def test_tune_stores_crossovers_that_the_runtime_follows(tmp_path, monkeypatch, runtime, capsys):
    from tileblas.cli import main

    f = tmp_path / "paths.json"
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    try:
        rc = main(["tune", "--paths-only", "--path-sizes", "32,64", "--path-orders", "64", "--path-rhs", "8,16",
                   "--path-reps", "1", "--settle", "0", "--cold-idle", "0.01", "--families", "gemm,trsm",
                   "--classes", "real", "--no-progress"])
        assert rc in (0, None)
        out = capsys.readouterr().out
        assert f"path policy stored in {f}" in out
        data = json.loads(f.read_text())
        assert [row[0] for row in data["measured"]["native_vs_tiled"]["gemm/real"]] == [32, 64]
        assert len(data["measured"]["native_vs_recursive"]["trsm/real"]) == 2
        pol = _paths.policy()  # tune re-read the file it wrote
        assert pol.source.startswith("tuned on") and pol.file == str(f)
        rows = data["measured"]["native_vs_tiled"]["gemm/real"]
        from tileblas.perf._pathtune import above_noise

        tiled_won = [above_noise(r[3], r[4]) > 1.03 for r in rows]  # ratio, beyond its control's noise
        want = math.inf if not tiled_won[-1] else (2.0 * 32**3 if all(tiled_won) else 2.0 * 64**3)
        assert pol.tile_flops[("gemm", "real")] == want
        # the runtime follows a stored crossover
        pol.tile_flops[("gemm", "real")] = CROSS
        _paths.save_policy(pol, f)
        _dispatch.apply_policy(reload=True)
        rng = np.random.default_rng(2)
        for n, want_path in ((SMALL, "shared"), (LARGE, "tiled")):
            a = rand(rng, (n, n), np.float64)
            blas.dgemm(1.0, a, a)
            assert runtime.last_profile().path in ((want_path, "split-k") if want_path == "tiled" else (want_path,))
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _paths.reload()


def test_a_fresh_process_reads_the_stored_policy(tmp_path):
    f = tmp_path / "paths.json"
    _paths.save_policy(_policy(tile=CROSS), f)
    code = ("import numpy as np, tileblas; from tileblas import blas\n"
            "rt = tileblas.Runtime(devices=2, small_flops=0); tileblas.runtime.set_runtime(rt)\n"
            f"a = np.ones(({LARGE}, {LARGE})); blas.dgemm(1.0, a, a); print(rt.last_profile().path)\n"
            f"a = np.ones(({SMALL}, {SMALL})); blas.dgemm(1.0, a, a); print(rt.last_profile().path)\n")
    env = dict(os.environ, TILEBLAS_PATHS=str(f))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() in (["tiled", "shared"], ["split-k", "shared"])


def test_info_shows_the_crossovers_in_force(tmp_path, monkeypatch, capsys):
    from tileblas.cli import main

    main(["info"])
    out = capsys.readouterr().out
    assert "Level-3 paths" in out and "shipped default" in out
    from tileblas.blas import _dispatch

    assert "real syrk/syr2k into a new c as gemm over all of C: none" in out  # shipped: never (tuned only)
    one = _dropin.SHIPPED.one_thread["dsyrk"]
    assert f"dsyrk below {one:.3g} flops," in out  # the one-thread limits, per routine
    assert "shipped defaults of tileblas.policy._dropin" in out
    assert "docs/measurements/drop-in.md" in out and '"Why each limit: the figures behind' in out
    pol = _policy(tile=123456789.0, recursion=(2048.0, 16.0, 64.0))
    f = tmp_path / "paths.json"
    _paths.save_policy(pol, f)
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    try:
        _paths.reload()
        main(["info"])
        out = capsys.readouterr().out
        assert "tuned on" in out and str(f) in out
        assert "1.235e+08" in out and ">= 2048, 16-64 (tuned)" in out
        main(["info", "--json"])
        data = json.loads(capsys.readouterr().out)["paths"]
        assert data["file"] == str(f) and data["tile_flops"]["syr2k/complex"] == 123456789.0
        assert data["recursion"]["trsm/real"] == [2048.0, 16.0, 64.0]
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _paths.reload()


@pytest.mark.parametrize("kwargs, match", [({"families": ["gemv"]}, "families"), ({"classes": ["half"]}, "classes"),
                                           ({"reps": 0}, "reps")])
def test_measure_policy_refuses_bad_arguments_by_name(kwargs, match):
    from tileblas.perf._pathtune import measure_policy

    with pytest.raises(ValueError, match=match):
        measure_policy(sizes=(16,), **kwargs)


def test_grid_benchmark_points_timing_and_outputs(tmp_path, capsys):
    from tileblas.cli import _bench_grid as G

    full = G.grid_points()
    assert {p.routine for p in full} >= {"dgemm", "zher2k", "strsm", "ctrmm"}
    assert not any(p.routine in ("dhemm", "sherk", "dher2k") for p in full)
    assert max(p.n for p in full if p.routine == "dgemm") == 6144
    assert max(p.n for p in full if p.routine == "sgemm") == 4096
    assert {(p.shape, p.order) for p in full if p.routine == "dgemm"} == {
        (s, o) for s in ("square", "k64", "m64") for o in "CF"}
    variants = [p for p in full if p.routine == "ztrsm" and p.flags]
    assert len(variants) == 2 * 2 * 3 * 2 - 1 and all(p.n == 1024 for p in variants)
    quick = G.grid_points(quick=True)
    assert len(quick) < len(full) / 10
    assert G.estimate_seconds(quick, 3) < G.estimate_seconds(full, 5)
    with pytest.raises(ValueError, match="routines"):
        G.grid_points(routines=["gemv"])
    with pytest.raises(ValueError, match="orders"):
        G.grid_points(orders=["X"])
    pts = G.grid_points(sizes=[16, 64], prefixes="dz", routines=["gemm", "her2k", "trsm"], orders=["C"],
                        variants_n=0)
    G.run_grid(pts, rounds=1, settle=0.0, block_s=0.001, det_calls=2)
    for p in pts:
        assert p.tileblas_s > 0 and p.scipy_s > 0 and p.control_s > 0
        assert p.max_rel_diff <= 1e-12 * max(p.n, 64)
        # the pool's counters while the point was timed: differences of whatever integer counters it has
        assert all(isinstance(v, int) for v in p.pool.values())
    lines = G.summarize(pts)
    assert lines[0].startswith(f"{len(pts)} points") and any("worst" in line for line in lines)
    js = G.write_json(pts, str(tmp_path / "g.json"), {"test": True})
    data = json.load(open(js))
    assert len(data["points"]) == len(pts) and all("ratio" in p and "control" in p for p in data["points"])
    png = G.plot_grid(pts, str(tmp_path / "g.png"))
    assert os.path.getsize(png) > 1000


def test_bench_grid_command_prints_its_estimate(capsys):
    from tileblas.cli import main

    assert main(["bench", "grid", "--quick", "--estimate-only"]) in (0, None)
    out = capsys.readouterr().out
    assert "points to time, 3 rounds" in out and "estimated" in out and "min" in out
    with pytest.raises(SystemExit) as exc:  # refused while the command line is read
        main(["bench", "grid", "--shapes", "round", "--estimate-only"])
    rc = exc.value.code
    captured = capsys.readouterr()
    assert rc not in (0, None) and "--shapes" in captured.err + captured.out and "'round'" in captured.err + captured.out


def test_bench_grid_resumes_a_partial_run(tmp_path, capsys):
    """--minutes stops a run between points; --resume keeps the timed points and times only the rest."""
    from tileblas.cli import main

    js = str(tmp_path / "grid.json")
    common = ["bench", "grid", "--sizes", "16,32", "--prefixes", "d", "--routines", "gemm,syrk", "--orders", "F",
              "--shapes", "square", "--variants-n", "0", "--rounds", "1", "--settle", "0", "--no-progress",
              "--json", js, "--png", ""]
    assert main(common + ["--minutes", "1e-9"]) in (0, None)
    out = capsys.readouterr().out
    assert "4 points to time" in out and "stopped after" in out and "4 points left" in out
    assert json.load(open(js))["points"] == []
    assert main(common + ["--resume"]) in (0, None)
    first = json.load(open(js))
    assert len(first["points"]) == 4 and not first["meta"]["partial"]
    assert main(common + ["--resume"]) in (0, None)
    out = capsys.readouterr().out
    assert "4 of 4 points already timed" in out and "0 points to time" in out
    again = json.load(open(js))
    assert [p["tileblas_s"] for p in again["points"]] == [p["tileblas_s"] for p in first["points"]]
    (tmp_path / "bad.json").write_text("[1, 2]")
    rc = main(common[:-4] + ["--json", str(tmp_path / "bad.json"), "--png", "", "--resume"])
    assert rc not in (0, None) and "bad.json is not a grid benchmark JSON file" in capsys.readouterr().err
    assert (tmp_path / "bad.json").read_text() == "[1, 2]"


def test_save_policy_under_a_file_names_the_path(tmp_path):
    from tileblas.policy import _paths

    afile = tmp_path / "afile"
    afile.write_text("")
    target = afile / "paths.json"
    with pytest.raises(OSError, match="cannot write the path policy .*a parent path is a file") as info:
        _paths.save_policy(_paths.PathPolicy(), target)
    assert str(target) in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing left behind


def _assert_refused(f, field, bads):
    """Each of ``bads`` as the policy file's ``field`` leaves the shipped default in force, with a note
    naming the field."""
    for bad in bads:
        data = json.loads(f.read_text())
        data[field] = bad
        f.write_text(json.dumps(data))
        p = _paths.reload()
        assert p.source == "shipped default" and field in p.note, bad


def test_tuned_rank_gemm_limits_reach_the_c_path_and_info(tmp_path, monkeypatch, capsys):
    """A policy file's rank_gemm limits (what tune measured for the syrk/syr2k gemm route) are written and
    read back, handed to the C path in place of the shipped ones for the routines they name, and shown as
    tuned by info; a damaged entry leaves the shipped default in force, with a note naming it."""
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.cli import main

    pol = _policy()
    pol.rank_gemm = {"dsyrk": (1e5, 2e5)}
    f = tmp_path / "paths.json"
    _paths.save_policy(pol, f)
    assert json.loads(f.read_text())["rank_gemm"] == {"dsyrk": [1e5, 2e5]}
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    try:
        _dispatch.apply_policy(reload=True)
        assert _paths.policy().rank_gemm == {"dsyrk": (1e5, 2e5)}
        _runtime.set_runtime(None)
        blas.dgemm(1.0, [[1.0]], [[1.0]])  # the C path set up for the default runtime reads them too
        got = fp.config()["rank_gemm"]
        assert got["dsyrk"] == (1e5, 2e5) and "dsyr2k" not in got  # shipped: never
        main(["info"])
        assert "dsyrk below 1e+05 (2e+05 split) (tuned)" in capsys.readouterr().out
        _assert_refused(f, "rank_gemm", ({"zsyrk": [1.0, 2.0]}, {"dsyrk": [1.0]}, {"dsyrk": [-1.0, 2.0]},
                                         {"dsyrk": "x"}, {"dsyrk": [True, 2.0]}))
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _dispatch.apply_policy(reload=True)
    assert fp.config()["rank_gemm"] == dict(_dropin.config(2).rank_gemm)


def test_measure_rank_gemm_measures_and_restores_the_c_path():
    """measure_rank_gemm times the gemm route against the rank-k call and returns limits (one call <=
    split, each 0 or a flop count of the ladder's range) with its rows, leaving the C path's limits as it
    found them."""
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.perf._pathtune import measure_rank_gemm

    _runtime.set_runtime(None)
    blas.dgemm(1.0, [[1.0]], [[1.0]])
    before = fp.config()
    limits, rows = measure_rank_gemm(("ssyrk",), (16, 24), (64,), reps=1, settle=0.0, idle=0.01)
    assert fp.config() == before
    # every point within the control's noise (a loaded machine) stores nothing, and the rows say so
    noisy = {x.split()[-1] for x in rows.get("within_noise", [])}
    assert set(limits) | noisy == {"ssyrk"} and not set(limits) & noisy
    if "ssyrk" in limits:
        one, split = limits["ssyrk"]
        assert 0.0 <= one <= split <= 65.0 * 64 * 64 + 1
    assert [r[:2] for r in rows["ssyrk"]][:2] == [["one_call", 16], ["one_call", 24]]
    assert all(r[2] > 0 and r[3] > 0 for r in rows["ssyrk"])


@pytest.mark.parametrize("kwargs, match", [({"routines": ("zsyrk",)}, "routines"), ({"reps": 0}, "reps"),
                                           ({"one_orders": ()}, "one_orders"), ({"split_orders": (0,)}, "split_orders")])
def test_measure_rank_gemm_refuses_bad_arguments_by_name(kwargs, match):
    from tileblas.perf._pathtune import measure_rank_gemm

    with pytest.raises(ValueError, match=match):
        measure_rank_gemm(**kwargs)


def test_tune_measures_and_stores_the_rank_gemm_limits(tmp_path, monkeypatch, capsys):
    """`tileblas tune --paths-only` with syrk among the families measures the C path's syrk gemm route
    (s and d) and stores its limits, which the C path then takes."""
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.cli import main

    _runtime.set_runtime(None)
    f = tmp_path / "paths.json"
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    try:
        rc = main(["tune", "--paths-only", "--path-sizes", "32", "--path-reps", "1", "--settle", "0",
                   "--cold-idle", "0.01", "--families", "syrk", "--classes", "real", "--rank-gemm-orders", "16,24",
                   "--rank-gemm-split-orders", "64", "--rank-gemm-reps", "1", "--no-progress"])
        assert rc in (0, None)
        out = capsys.readouterr().out
        data = json.loads(f.read_text())
        rows = data["measured"]["rank_gemm"]
        noisy = {x.split()[-1] for x in rows.get("within_noise", [])}  # within the control's noise: not stored
        assert set(data["rank_gemm"]) | noisy == {"ssyrk", "dsyrk"} and not set(data["rank_gemm"]) & noisy
        assert {"ssyrk", "dsyrk"} <= set(rows)
        assert all(len(r) == 10 for k in ("ssyrk", "dsyrk") for r in rows[k])  # ... ratio, control, cold ones
        if "dsyrk" not in noisy:
            stored = tuple(data["rank_gemm"]["dsyrk"])
            blas.dgemm(1.0, [[1.0]], [[1.0]])
            if stored == (0.0, 0.0):  # not ahead of the rank-k call at any order: the route is never taken
                assert "dsyrk  never as gemm" in out and "dsyrk" not in fp.config()["rank_gemm"]
            else:
                assert "dsyrk  as gemm over all of C below" in out
                assert fp.config()["rank_gemm"]["dsyrk"] == stored
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _dispatch.apply_policy(reload=True)


def test_gain_limit_takes_the_orders_up_to_the_peak_of_the_summed_gain():
    from tileblas.perf._pathtune import _gain_limit

    cube = lambda m: m ** 3  # noqa: E731
    # equal at the tiny orders (one a little behind), ahead from 24 or 32, behind from 48 or 128
    d = [(16, 1.01), (24, 1.01), (32, 2.19), (48, 1.5), (64, 1.23), (80, 1.14), (96, 1.06), (128, 0.91)]
    assert _gain_limit(d, cube, 0.03) == 112 ** 3  # halfway between 96 and 128
    z = [(16, 0.96), (24, 1.38), (32, 1.06), (48, 0.88), (64, 0.72)]
    assert _gain_limit(z, cube, 0.03) == 40 ** 3
    assert _gain_limit([(16, 0.9), (32, 0.95)], cube, 0.03) == 0.0  # never ahead: never taken
    assert _gain_limit([(16, 1.5)], cube, 0.03) == 16 ** 3 + 1  # ahead at the last order: just above it
    assert _gain_limit([(16, 1.02), (32, 1.02)], cube, 0.03) == 0.0  # within the margin is no gain


def test_tuned_one_thread_limit_reaches_the_c_path_and_info(tmp_path, monkeypatch, capsys):
    """A policy file's one_thread limit replaces the shipped DropInConfig.one_thread in the C path and is shown
    as tuned; a damaged entry leaves the shipped default in force, with a note naming it."""
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.cli import main

    pol = _policy()
    pol.one_thread = {"trmm": 1e5}
    f = tmp_path / "paths.json"
    _paths.save_policy(pol, f)
    assert json.loads(f.read_text())["one_thread"] == {"trmm": 1e5}
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    try:
        _runtime.set_runtime(None)
        blas.dgemm(1.0, [[1.0]], [[1.0]])
        _dispatch.apply_policy(reload=True)  # also hands the C path its other limits again
        tuned = {**_dropin.SHIPPED.one_thread, **dict.fromkeys(("strmm", "dtrmm", "ctrmm", "ztrmm"), 1e5)}
        assert dict(_dropin.config(2).one_thread) == tuned  # the family's limit for each of its routines
        multi = bool(_splits(fp))  # several threads: the one-thread instance is in use
        assert fp.config()["one_thread"] == (tuned if multi else {})
        main(["info"])
        out = capsys.readouterr().out
        if multi:
            assert "ztrmm below 1e+05 flops (tuned)" in out
            assert f"dgemm below {_dropin.SHIPPED.one_thread['dgemm']:.3g} flops," in out
        _assert_refused(f, "one_thread", ({"trsv": 1.0}, {"trmm": -1.0}, {"trmm": "x"}, {"trmm": True}))
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _dispatch.apply_policy(reload=True)
    assert _paths.policy().file != str(f)  # the test's file is no longer read
    if _splits(fp):
        assert fp.config()["one_thread"] == dict(_dropin.config(2).one_thread)


def test_tuned_cpu_rates_are_kept_read_back_and_handed_on_at_their_thread_count(tmp_path, monkeypatch):
    """A policy file's cpu_rates (the native call's rates tune timed) are written and read back, reach
    DropInConfig only at the thread count tune ran at, are interpolated in the order's logarithm and held
    at the ends; a damaged entry leaves the shipped default in force, with a note naming it."""
    pol = _policy()
    pol.threads = 2
    pol.cpu_rates = {("trsm", "real"): ((512, 2e10), (2048, 4e10)), ("gemm", "complex"): ((1024, 5e10),)}
    f = tmp_path / "paths.json"
    _paths.save_policy(pol, f)
    assert json.loads(f.read_text())["cpu_rates"] == {"trsm/real": [[512, 2e10], [2048, 4e10]],
                                                      "gemm/complex": [[1024, 5e10]]}
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    try:
        p = _paths.reload()
        assert p.cpu_rates == pol.cpu_rates and p.source.startswith("tuned")
        two, four = _dropin.config(2), _dropin.config(4)
        assert two.cpu_rate("trsm", "d", 1024) == pytest.approx(3e10)  # halfway in log(order)
        assert two.cpu_rate("trmm", "d", 1024) is None  # not timed: the model's rate
        assert two.cpu_rate("trsm", "f", 100) == 2e10 and two.cpu_rate("trsm", "d", 8192) == 4e10
        assert two.cpu_rate("hemm", "D", 4096) is None  # hemm is of the symm family: not timed ...
        assert two.cpu_rate("gemm", "F", 4096) == 5e10  # ... gemm's complex class is (held past 1024)
        assert four.cpu_rates == {} and four.cpu_rate("trsm", "d", 1024) is None
        assert "cpu_rates" not in two.c_fields()
        _assert_refused(f, "cpu_rates", ({"trsv/real": [[1, 1.0]]}, {"trsm/real": []}, {"trsm/real": [[0, 1.0]]},
                                         {"trsm/real": [[512, 0.0]]}, {"trsm/real": [[512, 1.0], [256, 1.0]]},
                                         {"trsm/real": [[512.5, 1.0]]}, {"trsm/real": [[True, 1.0]]},
                                         {"trsm/real": [[512, "x"]]}, {"trsm/real": [[512, 1.0, 2.0]]}))
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _paths.reload()


def test_measure_one_thread_measures_and_restores_the_c_path():
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.perf._pathtune import measure_one_thread

    _runtime.set_runtime(None)
    blas.dgemm(1.0, [[1.0]], [[1.0]])
    before = fp.config()
    limits, rows = measure_one_thread(orders=(16, 24), reps=1, settle=0.0, idle=0.01)
    assert fp.config() == before
    if not before["one_thread"]:
        assert limits == {} and "note" in rows  # one thread here: nothing to choose
        return
    assert set(limits) <= {"trmm"} and 0.0 <= limits.get("trmm", 0.0) <= 4.0 * 24 ** 3 + 1
    assert ("trmm" in limits) != ("one_thread trmm" in rows.get("within_noise", []))
    assert [r[:2] for r in rows["trmm"]] == [["d", 16], ["d", 24], ["z", 16], ["z", 24]]
    # every family: double and double complex (Hermitian: double complex), the C path restored
    limits, rows = measure_one_thread(("gemm", "syr2k", "herk"), orders=(16, 24), reps=1, settle=0.0, idle=0.01)
    assert fp.config() == before
    assert [r[:2] for r in rows["herk"]] == [["z", 16], ["z", 24]]
    assert [r[:2] for r in rows["gemm"]] == [["d", 16], ["d", 24], ["z", 16], ["z", 24]]
    for fam in ("gemm", "syr2k", "herk"):  # a limit, or within the noise (the shipped one stays)
        assert (fam in limits) != (f"one_thread {fam}" in rows.get("within_noise", [])), fam


@pytest.mark.parametrize("kwargs, match", [({"families": ("trsv",)}, "families"), ({"reps": 0}, "reps"),
                                           ({"orders": ()}, "orders")])
def test_measure_one_thread_refuses_bad_arguments_by_name(kwargs, match):
    from tileblas.perf._pathtune import measure_one_thread

    with pytest.raises(ValueError, match=match):
        measure_one_thread(**kwargs)


def test_tune_measures_and_stores_the_one_thread_limit(tmp_path, monkeypatch, capsys):
    """`tileblas tune --paths-only` with trmm among the families measures the C path's one-thread limit
    and stores it (where the C path runs on several threads)."""
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.cli import main

    _runtime.set_runtime(None)
    blas.dgemm(1.0, [[1.0]], [[1.0]])
    multi = bool(fp.config()["one_thread"])
    f = tmp_path / "paths.json"
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    try:
        rc = main(["tune", "--paths-only", "--path-sizes", "32", "--path-orders", "64", "--path-rhs", "8",
                   "--path-reps", "1", "--settle", "0", "--cold-idle", "0.01", "--families", "trmm", "--classes", "real",
                   "--one-thread-orders", "16,24", "--one-thread-reps", "1", "--no-progress"])
        assert rc in (0, None)
        data = json.loads(f.read_text())
        noisy = "one_thread trmm" in data["measured"].get("one_thread", {}).get("within_noise", [])
        assert set(data["one_thread"]) == ({"trmm"} if multi and not noisy else set())
        if multi and not noisy:
            v = data["one_thread"]["trmm"]
            out = capsys.readouterr().out
            assert ("on the one-thread instance below" if v > 0 else "never on the one-thread instance") in out
            blas.dgemm(1.0, [[1.0]], [[1.0]])
            got = fp.config()["one_thread"]
            for r in ("strmm", "dtrmm", "ctrmm", "ztrmm"):
                assert got.get(r) == (v if v > 0 else None)  # 0: never on one thread
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _dispatch.apply_policy(reload=True)


def test_split_routines_are_the_c_paths_split_ranges():
    """The routines a policy file may name in split_from are exactly those the C path splits, and each
    measured routine stands for routines of its own family group and precision class."""
    assert set(_paths.SPLIT_ROUTINES) == set(_dropin.SHIPPED.split)
    assert len(_paths.SPLIT_ROUTINES) == len(set(_paths.SPLIT_ROUTINES))
    for name, names in _paths.SPLIT_TUNE.items():
        assert name in names
        for r in names:
            assert _paths.FAMILY[r[1:]] == _paths.FAMILY[name[1:]]
            assert (r[0] in "cz") == (name[0] in "cz")


def test_tuned_split_lower_ends_reach_the_c_path_and_info(tmp_path, monkeypatch, capsys):
    """A policy file's split_from (the lower ends of the split tune measured; null: never) replaces the
    shipped lower ends for the routines it names, upper ends kept; calls split exactly from the tuned
    end; info marks them; a damaged entry leaves the shipped default in force, with a note naming it."""
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.cli import main

    pol = _policy()
    pol.split_from = {"sgemm": 3e6, "dgemm": 3e6, "ztrsm": math.inf}
    f = tmp_path / "paths.json"
    _paths.save_policy(pol, f)
    assert json.loads(f.read_text())["split_from"] == {"sgemm": 3e6, "dgemm": 3e6, "ztrsm": None}
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    shipped = dict(_dropin.SHIPPED.split)
    rng = np.random.default_rng(3)
    try:
        _runtime.set_runtime(None)
        blas.dgemm(1.0, [[1.0]], [[1.0]])
        _dispatch.apply_policy(reload=True)
        ranges = dict(_dropin.config(2).split)
        assert ranges["dgemm"] == (3e6, shipped["dgemm"][1]) and ranges["ztrsm"] == (0.0, 0.0)
        assert {k: v for k, v in ranges.items() if k not in ("sgemm", "dgemm", "ztrsm")} == \
            {k: v for k, v in shipped.items() if k not in ("sgemm", "dgemm", "ztrsm")}
        split = _splits(fp)
        if split:  # several threads and a pool: the C path splits
            assert split["dgemm"] == (3e6, shipped["dgemm"][1]) and "ztrsm" not in split
            assert split["zgemm"] == shipped["zgemm"]
            for n, parts in ((112, False), (128, True)):  # 2 n^3 = 2.8e6 (below the tuned end), 4.2e6
                a, b = (np.asfortranarray(rng.standard_normal((n, n))) for _ in range(2))
                before = fp.stats()["split_calls"]
                assert (fp.decide(blas.dgemm, 1.0, a, b)["path"] == "split") is parts, n
                c = blas.dgemm(1.0, a, b)
                assert (fp.stats()["split_calls"] > before) is parts, n
                np.testing.assert_allclose(c, a @ b, rtol=0, atol=4 * n * np.finfo(float).eps
                                           * (np.abs(a) @ np.abs(b)).max())
            n = 128
            a = np.asfortranarray(np.tril(rng.standard_normal((n, n)) + 1j) / n + 2 * np.eye(n))
            b = np.asfortranarray(rng.standard_normal((n, n)) + 0j)
            before = fp.stats()["split_calls"]
            x = blas.ztrsm(1.0, a, b, lower=1)
            assert fp.stats()["split_calls"] == before  # never split
            np.testing.assert_allclose(x, sb.ztrsm(1.0, a, b, lower=1), rtol=1e-12, atol=1e-12)
        main(["info"])
        out = capsys.readouterr().out
        if split:
            assert "sgemm, dgemm 3e+06-1e+10 (lower end tuned)" in out and "ztrsm never (lower end tuned)" in out
        _assert_refused(f, "split_from", ({"ssyr2k": 1.0}, {"dgemm": -1.0}, {"dgemm": "x"}, {"dgemm": True},
                                          {"dgemm": [1.0, 2.0]}))
        assert dict(_dropin.config(2).split) == shipped
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _dispatch.apply_policy(reload=True)
    assert _paths.policy().file != str(f)
    if _splits(fp):
        assert _splits(fp) == {k: v for k, v in _dropin.config(2).split.items() if v[1] > v[0]}


def test_a_thread_count_never_measured_takes_scipys_path_unless_tuned(tmp_path, monkeypatch, capsys):
    """The shipped one-thread limits and split ranges hold at the thread counts they were measured at
    (MEASURED_THREADS): at another count the C path makes every call on the instance of that count (SciPy's
    path) except where a tuned file says otherwise, a tuned split with the shipped upper end."""
    assert _dropin.MEASURED_THREADS == frozenset({2})
    monkeypatch.setenv("TILEBLAS_PATHS", str(tmp_path / "none.json"))  # no tuned file
    try:
        _dispatch.apply_policy(reload=True)
        two, four, sixteen = _dropin.config(2), _dropin.config(4), _dropin.config(16)
        assert dict(two.one_thread) == dict(_dropin.SHIPPED.one_thread) and dict(two.split) == dict(_dropin.SHIPPED.split)
        for cfg in (four, sixteen):
            assert cfg.one_thread == {} and cfg.split == {}
            assert cfg.c_fields()["one_thread"] == {} and cfg.c_fields()["split"] == {}
        from tileblas.cli import main
        from tileblas.kernels import _threadpool

        with monkeypatch.context() as m:  # tileblas info on a 4-core machine says so
            m.setattr(_threadpool, "cpu_count", lambda: 4)
            m.setattr(_threadpool, "effective_threads", lambda n: n)
            main(["info"])
        out = capsys.readouterr().out
        assert "on one thread (tileblas' one-thread instance): none" in out
        assert "4 threads: the shipped one-thread limits and splits were measured with 2 and are not used" in out
        pol = _policy()
        pol.one_thread = {"trsm": 4e4}
        pol.split_from = {"dgemm": 3e6, "ztrsm": math.inf}
        f = tmp_path / "paths.json"
        _paths.save_policy(pol, f)
        monkeypatch.setenv("TILEBLAS_PATHS", str(f))
        _dispatch.apply_policy(reload=True)
        four = _dropin.config(4)
        assert dict(four.one_thread) == dict.fromkeys(_dropin.routines("trsm"), 4e4)
        assert dict(four.split) == {"dgemm": (3e6, _dropin.SHIPPED.split["dgemm"][1]), "ztrsm": (0.0, 0.0)}
        assert _dropin.config(2).split["zgemm"] == _dropin.SHIPPED.split["zgemm"]  # measured count: shipped
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _dispatch.apply_policy(reload=True)


def test_measure_split_measures_and_restores_the_c_path():
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.perf._pathtune import measure_split

    _runtime.set_runtime(None)
    blas.dgemm(1.0, [[1.0]], [[1.0]])
    before = fp.config()
    limits, rows = measure_split(("dgemm", "ztrsm"), orders=(24, 48), reps=1, settle=0.0, idle=0.01)
    assert fp.config() == before
    if not _splits(fp):
        assert limits == {} and "note" in rows  # one thread here: nothing to split
        return
    # each routine measured has a limit, unless every point of it lay within the noise (then the shipped
    # range stays, and the rows say so): on a loaded machine either can happen
    noisy = {w.split()[-1] for w in rows.get("within_noise", [])}
    assert set(limits) | noisy == {"dgemm", "ztrsm"} and not set(limits) & noisy
    assert limits.get("dgemm", math.inf) == math.inf or 2 * 24 ** 3 <= limits["dgemm"] <= 2 * 48 ** 3
    assert limits.get("ztrsm", math.inf) == math.inf or 4 * 24 ** 3 <= limits["ztrsm"] <= 4 * 48 ** 3
    assert [r[:2] for r in rows["dgemm"]] == [["square", 24], ["square", 48]]
    assert [r[:2] for r in rows["ztrsm"]] == [["L", 24], ["L", 48], ["R", 24], ["R", 48]]  # both sides
    assert all(r[2] > 0 and r[3] > 0 and r[4] == pytest.approx(r[2] / r[3]) for r in rows["ztrsm"])


def test_measure_split_without_the_pool_says_why():
    """With the pool off (TILEBLAS_POOL=0, or by default on a core count it was not measured at) nothing is
    split, and the note says that the pool is off and how."""
    pytest.importorskip("tileblas.blas._fastpath")
    code = ("from tileblas.perf._pathtune import measure_split\n"
            "print(measure_split(('dgemm',), orders=(24,), reps=1, settle=0.0, idle=0.01))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TILEBLAS_POOL="0"), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "does not split here: no thread pool (turned off (TILEBLAS_POOL=0)" in out.stdout


def test_measure_split_keeps_what_fixed_timings_say(monkeypatch):
    """The timing loop replaced by fixed seconds (the machine's noise out of it): each way is still set on
    the C path and called, and the limits follow the seconds: parts twice as fast at every order give the
    smallest order's flops, parts twice as slow give ``inf``, a gain inside the control's spread gives no
    limit (the shipped range stays)."""
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.perf import _pathtune

    _runtime.set_runtime(None)
    blas.dgemm(1.0, [[1.0]], [[1.0]])
    before = fp.config()
    if not _splits(fp):
        pytest.skip("one thread here: the C path does not split")
    split_s = {"dgemm": 0.5, "ztrsm": 2.0, "zgemm": 1 / 1.04}  # the "one call" way takes 1 s
    seen = []

    def interleaved(calls, rounds, **kw):
        got = {}
        for way, prep in calls.items():
            run = prep()  # the way set on the C path: its routine's split range is the only one changed
            now = fp.config()["split"]  # (a range set empty is left out)
            changed = {r for r in {*now, *before["split"]} if now.get(r) != before["split"].get(r)}
            assert len(changed) == 1
            (routine,) = changed
            assert now.get(routine, (0.0, 0.0)) == ((0.0, 1e300) if way == "split" else (0.0, 0.0))
            run()
            seen.append((routine, way))
            got[way] = split_s[routine] if way == "split" else 1.0
        got["control"] = 1.0 if routine != "zgemm" else 1.05
        return SimpleNamespace(best=got)

    monkeypatch.setattr(_pathtune, "interleaved", interleaved)
    limits, rows = _pathtune.measure_split(("dgemm", "ztrsm", "zgemm"), orders=(24, 48), reps=1, settle=0.0)
    assert fp.config() == before
    assert limits == {"dgemm": 2 * 24 ** 3, "ztrsm": math.inf}
    assert rows["within_noise"] == ["split_from zgemm"]
    points = {"dgemm": 2, "ztrsm": 4, "zgemm": 2}  # orders, times sides
    assert sorted(seen) == sorted((r, w) for r, k in points.items() for w in ("one", "split", "control")
                                  for _ in range(2 * k))  # warm and cold turns
    assert [r[1:5] for r in rows["dgemm"]] == [[24, 0.5, 1.0, 0.5], [48, 0.5, 1.0, 0.5]]  # parts, one call, ratio


@pytest.mark.parametrize("kwargs, match", [({"routines": ("ssyr2k",)}, "routines"), ({"routines": ("sgemm",)}, "routines"),
                                           ({"reps": 0}, "reps"), ({"orders": ()}, "orders"),
                                           ({"orders": (0, 32)}, "orders")])
def test_measure_split_refuses_bad_arguments_by_name(kwargs, match):
    from tileblas.perf._pathtune import measure_split

    with pytest.raises(ValueError, match=match):
        measure_split(**kwargs)


def test_tune_measures_and_stores_where_the_split_starts(tmp_path, monkeypatch, capsys):
    """`tileblas tune --paths-only` measures the lower end of the split for the families and classes
    asked for and stores it for every routine the measured one stands for."""
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas.cli import main

    _runtime.set_runtime(None)
    blas.dgemm(1.0, [[1.0]], [[1.0]])
    multi = bool(_splits(fp))
    f = tmp_path / "paths.json"
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    try:
        rc = main(["tune", "--paths-only", "--path-sizes", "32", "--path-orders", "64", "--path-rhs", "8",
                   "--path-reps", "1", "--settle", "0", "--cold-idle", "0.01", "--families", "gemm", "--classes", "real",
                   "--split-orders", "24,48", "--split-reps", "1", "--no-rank-gemm", "--no-progress"])
        assert rc in (0, None)
        data = json.loads(f.read_text())
        noisy = "split_from dgemm" in data["measured"].get("split", {}).get("within_noise", [])
        assert set(data["split_from"]) == ({"sgemm", "dgemm"} if multi and not noisy else set())
        if multi and not noisy:
            v = data["split_from"]["dgemm"]
            assert data["split_from"]["sgemm"] == v and "split" in data["measured"]
            out = capsys.readouterr().out
            assert "where the C path's split on the pool starts: dgemm" in out
            blas.dgemm(1.0, [[1.0]], [[1.0]])
            if v is None:  # never split
                assert "dgemm" not in _splits(fp)
            else:
                assert _splits(fp)["dgemm"] == (v, _dropin.SHIPPED.split["dgemm"][1])
    finally:
        monkeypatch.delenv("TILEBLAS_PATHS")
        _dispatch.apply_policy(reload=True)


@pytest.mark.parametrize("prefix", list("sdcz"))
def test_the_tuning_operands_have_the_precision_timed(prefix):
    """Every operand tune and the benchmarks time is of the routine's precision: a single-precision call
    given a double-precision triangle would time a conversion of it in every call (NumPy's float64 scalar
    made the triangle float64)."""
    from tileblas._dtypes import DTYPE_OF
    from tileblas.perf._pathtune import _operands, _square_args

    dt = DTYPE_OF[prefix]
    rng = np.random.default_rng(0)
    for fam in ("gemm", "symm", "syrk", "syr2k", "trmm", "trsm"):
        square = [x for x in _square_args(rng, fam, dt, 8) if isinstance(x, np.ndarray)]
        assert square and all(x.dtype == dt and x.flags.f_contiguous for x in square), (fam, square)
        args, _, _ = _operands(fam, 8, 4, dt, rng)
        ops = [x for x in args if isinstance(x, np.ndarray)]
        assert ops and all(x.dtype == dt for x in ops), (fam, [x.dtype for x in ops])
