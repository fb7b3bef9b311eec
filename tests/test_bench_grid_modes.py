"""``tileblas bench grid``'s modes (warm, cold, load), its determinism column, its pool counters and its
refusals of bad options.  No timing is asserted: the grids are tiny (one routine, n = 16, one round)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from _helpers import bench_script
from tileblas.cli import _bench_grid as G
from tileblas.cli import _bench_modes as M
from tileblas.cli import main

TINY = ["bench", "grid", "--sizes", "16", "--routines", "gemm", "--prefixes", "d", "--orders", "F",
        "--variants-n", "0", "--rounds", "1", "--settle", "0", "--idle", "0.001", "--det-calls", "4",
        "--no-progress"]


def _gone(pid: int) -> bool:
    """The process has ended (a zombie nobody reaped counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _cpu_ticks(pid: int) -> int:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.fixture
def started(monkeypatch):
    """The BusyNeighbours the grid starts in this test (recorded at start)."""
    made = []
    real = M.BusyNeighbours.start

    def start(self):
        made.append(self)
        return real(self)

    monkeypatch.setattr(M.BusyNeighbours, "start", start)
    return made


@pytest.mark.parametrize("mode", G.MODES)
def test_each_mode_runs_end_to_end_and_writes_mode_and_determinism(mode, tmp_path, capsys, started):
    js, png = tmp_path / "g.json", tmp_path / "g.png"
    assert main(TINY + ["--modes", mode, "--json", str(js), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert f"mode {mode}" in out and "determinism: 1 points x modes, 4 identical calls" in out
    assert "crowded" not in out
    data = json.loads(js.read_text())
    assert data["meta"]["modes"] == [mode] and data["meta"]["det_calls"] == 4 and not data["meta"]["partial"]
    import scipy

    versions = data["meta"]["versions"]  # what the figures depend on besides the machine
    assert versions["scipy"] == scipy.__version__ and versions["numpy"] == np.__version__
    assert any(b["version"] for b in versions["blas"]), versions
    (p,) = data["points"]
    assert p["mode"] == mode and p["routine"] == "dgemm" and p["n"] == 16 and p["det_calls"] == 4
    assert p["det_distinct"] == {"scipy": 1, "tileblas": 1} and p["nondeterministic"] is False
    assert all(len(h) == 1 for h in p["det"].values())
    assert set(p["samples"]) == {"scipy", "tileblas", "control"} and all(len(v) == 1 for v in p["samples"].values())
    assert p["median_s"]["tileblas"] > 0 and p["ratio_median"] > 0 and p["ratio"] > 0
    assert all(isinstance(v, int) for v in p["pool"].values())
    if mode == "cold":
        assert p["block"] == 1  # one timed call per pause
    assert png.stat().st_size > 1000
    assert len(started) == (1 if mode == "load" else 0)
    assert all(_gone(pid) for b in started for pid in b.pids)


def test_several_modes_in_one_run_one_heat_map_each(tmp_path, capsys, started):
    js, png = tmp_path / "g.json", tmp_path / "g.png"
    assert main(TINY + ["--modes", "warm,cold,load", "--load-procs", "2", "--json", str(js), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert all(f"mode {m}" in out for m in G.MODES)
    data = json.loads(js.read_text())
    assert [p["mode"] for p in data["points"]] == list(G.MODES)
    assert all((tmp_path / f"g-{m}.png").stat().st_size > 1000 for m in G.MODES) and not png.exists()
    (b,) = started
    assert len(b.pids) == 2 and all(_gone(pid) for pid in b.pids)
    # --resume knows the points by mode too: nothing left to time
    assert main(TINY + ["--modes", "warm,cold,load", "--json", str(js), "--png", "", "--resume"]) == 0
    assert "3 of 3 points already timed" in capsys.readouterr().out


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_load_processes_are_gone_after_an_exception(error, tmp_path, monkeypatch, started):
    seen = []
    real = G.distinct_results

    def broken(calls, n, *a, **k):
        (b,) = started
        if not b.running:  # the warm point: the busy processes wait
            return real(calls, n, *a, **k)
        seen.extend(b.pids)
        assert not any(_gone(pid) for pid in b.pids)
        raise error("stop here")

    monkeypatch.setattr(G, "distinct_results", broken)
    with pytest.raises(error, match="stop here"):
        main(TINY + ["--modes", "warm,load", "--load-procs", "2", "--json", str(tmp_path / "g.json"), "--png", ""])
    assert len(seen) == 2 and all(_gone(pid) for pid in seen)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
def test_busy_neighbours_spin_only_while_running_and_never_outlive_their_grid():
    with M.BusyNeighbours(1) as b:
        (pid,) = b.pids
        b.run()
        t0 = _cpu_ticks(pid)
        deadline = time.monotonic() + 10.0
        while _cpu_ticks(pid) == t0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _cpu_ticks(pid) > t0, "the busy process never ran"
        b.pause()
    assert _gone(pid)
    # a grid killed outright (no chance to stop anything): its busy process ends on its own
    code = ("import os, signal; from tileblas.cli._bench_modes import BusyNeighbours as B\n"
            "b = B(1).start(); b.run(); print(b.pids[0], flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    orphan = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 10.0
    while not _gone(orphan) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _gone(orphan):
        os.kill(orphan, signal.SIGKILL)
        pytest.fail(f"the busy process {orphan} outlived its grid")


def test_distinct_results_counts_real_outputs():
    import scipy.linalg.blas as sb

    from tileblas import blas as tb

    rng = np.random.default_rng(1)
    a, b = np.asfortranarray(rng.standard_normal((33, 17))), np.asfortranarray(rng.standard_normal((17, 9)))
    calls = iter(range(10**6))

    def flaky():
        """dgemm whose last bit flips on every other call."""
        c = sb.dgemm(1.0, a, b)
        if next(calls) % 2:
            c.view(np.uint64)[-1, -1] ^= 1
        return c

    got = M.distinct_results({"flaky": flaky, "scipy": lambda: sb.dgemm(1.0, a, b),
                              "tileblas": lambda: tb.dgemm(1.0, a, b)}, 6)
    assert {k: len(v) for k, v in got.items()} == {"flaky": 2, "scipy": 1, "tileblas": 1}
    assert got["scipy"][0] in got["flaky"]
    # the idle gaps: 1-50 ms before every fourth round, none before the others
    gaps = M.det_gaps(40)
    assert sum(g > 0 for g in gaps) == 10 and 0 < min(g for g in gaps if g) and max(gaps) <= 0.05
    paused = []
    M.distinct_results({"x": lambda: np.zeros(2)}, 8, sleep=paused.append)
    assert paused == [g for g in M.det_gaps(8) if g]
    with pytest.raises(ValueError, match="n must be"):
        M.distinct_results({"x": lambda: 0}, 0)


def test_a_point_with_two_results_is_flagged():
    p = G.Point("dgemm", 16, mode="cold", scipy_s=1.0, tileblas_s=1.0, control_s=1.0, det_calls=40,
                det={"tileblas": ["a", "b"], "scipy": ["a"]}, samples={"scipy": [1.0], "tileblas": [1.0],
                                                                      "control": [1.0]})
    text = "\n".join(G.summarize([p]))
    assert "1 with more than one distinct result" in text and "DISTINCT RESULTS tileblas 2, SciPy 1" in text
    d = p.to_json()
    assert d["nondeterministic"] is True and d["det_distinct"] == {"scipy": 1, "tileblas": 2}


def test_cold_mode_times_one_call_after_the_other_librarys_call_and_the_pause(monkeypatch):
    import tileblas._timing as T

    events = []
    monkeypatch.setattr(T.time, "sleep", lambda s: events.append("|"))
    timed = G._timed("cold", lambda: events.append("s"), lambda: events.append("t"), (), {}, 2, settle=0.0,
                     block_s=0.05, max_block=100, idle=0.2)
    # round 1: scipy, tileblas, control; round 2 reversed; each: untimed call, pause, one timed call
    assert "".join(events) == "t|s" "s|t" "s|s" + "s|s" "s|t" "t|s"
    assert timed.block == {"scipy": 1, "tileblas": 1, "control": 1} and timed.rounds == 2


def test_pool_counters_are_read_defensively(monkeypatch):
    from tileblas.kernels import _pool

    readings = iter([{"calls": 3, "crowded": 1, "note": "x", "flag": True, "jobs": np.int64(2)},
                     {"calls": 7, "jobs": 2, "new": 5}])
    monkeypatch.setattr(_pool, "stats", lambda: next(readings))
    before, after = G._pool_counters(), G._pool_counters()
    assert before == {"calls": 3, "crowded": 1, "jobs": 2}
    assert G._pool_differences(before, after) == {"calls": 4, "jobs": 0}

    def broken():
        raise RuntimeError("no pool")

    monkeypatch.setattr(_pool, "stats", broken)
    assert G._pool_counters() == {}
    monkeypatch.setattr(_pool, "stats", lambda: None)
    assert G._pool_counters() == {}
    p = G.Point("dgemm", 16, pool={"crowded": 3}, scipy_s=1.0, tileblas_s=2.0, control_s=1.0)
    assert "crowded" not in "\n".join(G.summarize([p]))


BAD = [("--sizes", "-5"), ("--sizes", "16,x"), ("--rounds", "0"), ("--idle", "-1"), ("--idle", "nan"),
       ("--det-calls", "0"), ("--load-procs", "-1"), ("--modes", "hot"), ("--mode", "warm,hot"),
       ("--settle", "-1"), ("--minutes", "0"), ("--routines", "gemv")]


def _run(call, argv) -> int:
    try:
        return call(argv)
    except SystemExit as exc:  # refused while the command line is read
        return exc.code


@pytest.mark.parametrize("option, value", BAD)
def test_bad_options_exit_2_with_one_line_naming_them(option, value, capsys, started):
    rc = _run(main, ["bench", "grid", option, value, "--estimate-only"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert option in err and repr(value) in err, err
    assert not started


@pytest.mark.parametrize("option, value", [("idle", -1.0), ("det_calls", 0), ("load_procs", -1), ("modes", "hot"),
                                           ("sizes", "-5"), ("rounds", 0)])
def test_bad_values_made_by_a_caller_are_refused_by_name(option, value, capsys):
    """grid_main with an ``args`` its caller made (no command-line types): the same refusals, by name."""
    import argparse

    ap = argparse.ArgumentParser()
    G.add_grid_arguments(ap)
    args = ap.parse_args(["--estimate-only"])
    setattr(args, option, value)
    with pytest.raises(ValueError, match=f"--{option.replace('_', '-')}.*{value!r}".replace("(", r"\(")):
        G.grid_main(args)
    assert "points to time" not in capsys.readouterr().out


def test_the_grid_script_refuses_bad_options_the_same_way(capsys):
    script = bench_script("bench_grid")
    assert _run(script.main, ["--load-procs", "-1", "--estimate-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--load-procs" in err and "'-1'" in err


def test_the_mixed_loops_time_numpys_product_in_tileblas_place_for_gemm_only():
    """benchmarks/bench_mixed.py: for gemm a loop with NumPy's np.dot in tileblas' place (a second
    OpenBLAS), timed with the others; none for the other routines."""
    script = bench_script("bench_mixed")
    pt = script.measure("dgemm", 24, "scipyblas", rounds=1, iters=3, settle=0.0)
    assert pt["numpy"] > 0 and pt["ratio"] > 0 and pt["control"] > 0
    assert script.measure("dtrsm", 24, "none", rounds=1, iters=3, settle=0.0)["numpy"] is None


def test_the_mixed_loops_heat_map_states_its_scale_and_marks_noisy_points(tmp_path):
    """benchmarks/bench_mixed.py's heat map: the grid's colour scale (clipped beyond 0.5-2.0, said on the
    colour bar) and its noise rule (a hatched corner where the control is off 1 by more than 5 % or by
    more than the speed-up)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure
    from matplotlib.patches import Polygon

    script = bench_script("bench_mixed")
    points = [{"routine": "dgemm", "n": n, "partner": part, "ratio": r, "control": c}
              for n, part, r, c in [(64, "none", 1.02, 0.99), (64, "numpy", 37.0, 1.01),
                                    (128, "none", 0.45, 0.93), (128, "numpy", 1.01, 1.02)]]
    saved = {}
    real_savefig = matplotlib.figure.Figure.savefig

    def keep(fig, *a, **k):
        saved["fig"] = fig
        return real_savefig(fig, *a, **k)

    out = tmp_path / "mixed.png"
    try:
        matplotlib.figure.Figure.savefig = keep
        script._plot(points, str(out), ["none", "numpy"])
    finally:
        matplotlib.figure.Figure.savefig = real_savefig
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = saved["fig"]
    ax, bar = fig.axes[0], fig.axes[1]
    hatched = [p for p in ax.patches if isinstance(p, Polygon) and p.get_hatch()]
    assert len(hatched) == 2  # noisy: control 0.93 (off by 7 %), control 1.02 against a speed-up of 1.01
    labels = [t.get_text() for t in bar.get_yticklabels()]
    assert labels[0].startswith("\u2264") and labels[-1].startswith("\u2265")  # clipped both ways, said so
    assert "clipped" in bar.get_ylabel() and ax.get_xlabel() and ax.get_ylabel()


def test_bench_gaps_times_each_wait_against_scipy_and_puts_the_pool_back(capsys):
    """benchmarks/bench_gaps.py: SciPy, tileblas under each wait and the control, one point; the pool's
    settings as they were afterwards; a bad wait is refused by name."""
    from tileblas.kernels import _pool

    if not _pool.supported:
        pytest.skip("no pool in this build")
    script = bench_script("bench_gaps")
    saved = _pool.configure()
    waits = ["200us", "5ms", "200us/0"]
    pt = script.measure("dgemm", 32, 0.0005, waits, rounds=1, calls=2)
    assert _pool.configure() == saved
    assert set(pt["ratio"]) == set(waits) and pt["scipy_s"] > 0 and pt["control"] > 0
    for w in waits:
        assert pt["tileblas_s"][w] > 0 and pt["ratio"][w] == pytest.approx(pt["scipy_s"] / pt["tileblas_s"][w])
        c = pt["counters"][w]  # the pool's counters of that wait's timed calls, and the words for them
        assert c["timed_calls"] == 2 and set(script.COUNTERS) <= set(c) and min(c.values()) >= 0
        assert "woke a call" in script.wake_text(c)
    assert script.parse_setting("0.1s/0")["watch_ns"] == 0 and "watch_ns" not in script.parse_setting("5ms")
    for bad in ("soon", "200us/later"):
        with pytest.raises(SystemExit):
            script.main(["--waits", bad])
        assert "--waits=" in capsys.readouterr().err


def test_bench_first_calls_times_both_libraries_in_fresh_interpreters(capsys):
    """benchmarks/bench_first_calls.py: one fresh interpreter per library and process, its import and each
    dgemm call timed; the JSON keeps every call of every process (the flow, not the figures)."""
    mod = bench_script("bench_first_calls")
    assert mod.main(["--sizes", "32,48", "--calls", "2", "--processes", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sizes"] == [32, 48] and out["calls"] == 2
    for lib in ("scipy", "tileblas"):
        runs = out["runs"][lib]
        assert len(runs) == 2
        for r in runs:
            assert 0 < r["import_s"] < 60
            assert sorted(r["gflops"]) == ["32", "48"]
            assert all(len(v) == 2 and min(v) > 0 for v in r["gflops"].values())


@pytest.mark.parametrize("argv", [["--sizes", "x"], ["--sizes", "0"], ["--calls", "1"], ["--processes", "0"]])
def test_bench_first_calls_refuses_bad_options(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        bench_script("bench_first_calls").main(argv)
    assert exc.value.code == 2 and argv[0] in capsys.readouterr().err


def test_bench_manycore_measures_warm_blocks_counters_and_cold_calls(tmp_path, capsys):
    """benchmarks/bench_manycore.py (run on a many-core host when one is lent): one point, its warm blocks
    with the pool's counters, context switches and page faults a call, the 2 ms spin variant and cold
    calls, in its JSON; the pool's spin as it was afterwards; a routine outside Level 3 refused by name."""
    from tileblas.kernels import _pool

    script = bench_script("bench_manycore")
    saved = _pool.configure()
    js = tmp_path / "mc.json"
    assert script.main(["--routines", "dgemm", "--sizes", "48", "--rounds", "1", "--json", str(js)]) == 0
    assert _pool.configure() == saved
    data = json.loads(js.read_text())
    (pt,) = data["points"]
    assert pt["routine"] == "dgemm" and pt["n"] == 48 and data["cpu_count"] == os.cpu_count()
    for key in ("warm", "warm_spin_2ms"):
        w = pt[key]
        assert w["scipy_s"] > 0 and w["tileblas_s"] > 0 and w["ratio"] == pytest.approx(w["scipy_s"] / w["tileblas_s"])
        assert {"voluntary", "involuntary", "faults", "jobs", "wakes"} <= set(w["per_call"]["tileblas"])
        assert w["control"] > 0
    assert pt["cold"]["scipy_s"] > 0 and pt["cold"]["tileblas_s"] > 0 and pt["cold"]["control_median"] > 0
    assert re.search(r"dgemm\s+48\s+warm", capsys.readouterr().out)
    with pytest.raises(SystemExit):
        script.main(["--routines", "dgemv"])


def test_bench_after_times_each_library_right_after_each_other(tmp_path):
    """benchmarks/bench_after.py: SciPy's and tileblas' dgemm after a pause and right after NumPy's, SciPy's
    and tileblas' calls, one order, in its JSON; SciPy's and NumPy's calls a pause after their own call
    alone and after it with tileblas' right after; blocks of calls of one routine after a pause and after
    SciPy's call, best and mean of the rounds; a negative pause or later, and a --loops item that is not routine:order, refused."""
    script = bench_script("bench_after")
    js = tmp_path / "after.json"
    assert script.main(["--sizes", "32", "--rounds", "1", "--pause", "0", "--later", "0.01", "--loops", "dtrsm:16",
                        "--json", str(js)]) == 0
    data = json.loads(js.read_text())
    loops, means = data["loops"]["dtrsm:16"], data["loops_mean"]["dtrsm:16"]
    assert set(loops) == set(means) == {"scipy", "tileblas"}
    for lib, timed in loops.items():
        assert set(timed) == set(means[lib]) == {"pause", "scipy"} and all(v > 0 for v in timed.values())
        assert all(means[lib][way] >= best for way, best in timed.items())  # a mean is never below the best
    got = data["right_after"]["32"]
    assert set(got) == {"scipy", "tileblas"}
    for timed in got.values():
        assert set(timed) == {"pause", "numpy", "scipy", "tileblas"} and all(v > 0 for v in timed.values())
    later = data["later"]["32"]
    assert set(later) == {"scipy", "numpy"}
    for timed in later.values():
        assert set(timed) == {"alone", "then tileblas"} and all(v > 0 for v in timed.values())
    for bad in (["--pause", "-1"], ["--later", "-1"], ["--loops", "dgemv:16"], ["--loops", "dtrsm:x"]):
        with pytest.raises(SystemExit):
            script.main(bad)
