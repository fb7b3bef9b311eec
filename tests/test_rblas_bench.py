"""The rblas benchmark runs end to end on tiny sizes and reports what it measured."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

import tileblas.rblas as rb
from tileblas.cli._rblas import parse_sizes
from tileblas.rblas import _bench, _examples


@pytest.mark.slow  # 4-7 s: the whole command end to end, plots included
def test_bench_tiny(tmp_path, capsys):
    from tileblas import cli

    rc = cli.main(["rblas", "bench", "--out", str(tmp_path), "--calls", "2", "--trials", "1", "--bar-trials", "1", "--bar-max-trials", "1", "--bar-seconds", "0",
                   "--sizes", "1=200", "2=16", "3=16", "--bar-sizes", "1=2000", "2=32", "3=32"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "rblas bench" in err and "100%" in err  # the progress bar
    data = json.load(open(os.path.join(tmp_path, "rblas_bench.json")))
    rows = data["sweep"]
    assert {r["routine"] for r in rows} == {n for names in _bench.PAPER_ROUTINES.values() for n in names}
    for r in rows:
        if r["mode"] in ("checkpoint", "exact"):
            assert r["rms"] == 0.0, r
        if r["mode"] == "compute" and r["level"] == 1:
            assert r["rms"] < 1e-9 * 4000, r
        if r["mode"] == "checkpoint":
            assert r["extra_bytes"] > 0
        if r["mode"] == "compute":
            assert r["extra_bytes"] == 0
    ex = data["bars"]["exact"]
    assert ex["bit_exact"] == ex["round_trips"] and ex["round_trips"] >= len(rb.PAIRS)
    assert ex["axpy_memory"]["daxpy"]["ratio"] <= 0.5
    assert set(data["bars"]["compute_forward_vs_plain"]) == {"daxpy", "dgemv", "dgemm"}
    assert rb.pending() == []
    assert data["sizes"] == {"1": [200], "2": [16], "3": [16]} and data["bars"]["sizes"] == {"1": 2000, "2": 32, "3": 32}
    assert ex["round_trips"] == len(rb.PAIRS) + sum(
        rb.SPEC_OF[n].routine in _examples.ADDITIVE for n in rb.PAIRS)  # cancelling inputs for every additive one
    for name in ("daxpy", "dgemv", "dgemm"):
        row = data["bars"]["compute_forward_vs_plain"][name]
        assert row["ratio"] == row["compute_forward_s"] / row["plain_s"] and len(row["samples_s"]["plain"]) == 1
        assert row["trials"] == 1 and row["bookkeeping"]["forward_outside_routine_s"] > 0
    for row in data["bars"]["level1_round_trip"].values():
        assert 0 <= row["rms_after_10_round_trips"] < 1e-9 * 4000
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    for f in ("rblas_fig2_level1.png", "rblas_fig3_level2.png", "rblas_fig4_level3.png", "rblas_fig11_rms.png"):
        assert os.path.getsize(os.path.join(tmp_path, f)) > 1000


def test_size_options():
    assert parse_sizes(["1=1e3,1e5", "3=64"]) == {1: [1000, 100000], 3: [64]}
    assert parse_sizes(["2=4096"], single=True) == {2: 4096}
    for bad in (["4=10"], ["1="], ["x=1"], ["1=0"], ["1:10"]):
        with pytest.raises(ValueError, match="LEVEL"):
            parse_sizes(bad)
    with pytest.raises(ValueError, match="LEVEL=N"):
        parse_sizes(["1=10,20"], single=True)
    with pytest.raises(ValueError, match="preset"):
        _bench.run_bench(preset="huge")


def test_cancelling_examples_restore_bitwise_in_exact_mode():
    for name in sorted(n for n in rb.PAIRS if rb.SPEC_OF[n].routine in _examples.ADDITIVE):
        spec = rb.SPEC_OF[name]
        prefix = name[: len(name) - len(spec.routine)]
        args, kw = _examples.cancelling(spec.routine, prefix, 40, np.random.default_rng(0))
        outs = [v for v in (*args, *kw.values()) if isinstance(v, np.ndarray)]
        before = [o.copy() for o in outs]
        f, r = rb.PAIRS[name]
        f(*args, mode="exact", **kw)
        r(*args, **kw)
        for o, b in zip(outs, before):
            assert np.array_equal(np.ascontiguousarray(o).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)), name


def test_best_interleaved_extends_until_each_minimum_repeats():
    order = []

    def fake(name, values):
        it = iter(values)

        def run():
            order.append(name)
            return next(it)
        return run

    # a: stable from the start; b: its minimum repeats only in round 4 -> 4 rounds for both
    samples: dict = {}
    best = _bench._best_interleaved({"a": fake("a", [9, 9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
                                     "b": fake("b", [9, 9, 2.0, 1.5, 1.2, 1.201, 5.0, 5.0])}, 2, samples, 6)
    assert best == {"a": 1.0, "b": 1.2}
    assert len(samples["a"]) == len(samples["b"]) == 4
    assert order[4:] == ["a", "b", "b", "a", "a", "b", "b", "a"]  # two warm-up calls each, then ABBA
    # never beyond max_trials, never below trials
    samples = {}
    _bench._best_interleaved({"a": fake("a", [0, 0, 5, 4, 3, 2, 1]), "b": fake("b", [0, 0, 1, 1, 1, 1, 1])},
                             2, samples, 3)
    assert len(samples["a"]) == 3 and samples["a"] == [5, 4, 3]
    samples = {}
    _bench._best_interleaved({"a": fake("a", [0, 0, 1, 1, 1, 1]), "b": fake("b", [0, 0, 1, 1, 1, 1])},
                             3, samples, 10)
    assert len(samples["a"]) == 3
    assert _bench._paired_median_ratio([2.0, 3.0, 4.0], [1.0, 3.0, 1.0]) == 2.0
    # a time floor: rounds go on (stable or not) until min_seconds; a time ceiling stops unstable ones
    samples = {}
    _bench._best_interleaved({"a": lambda: time.sleep(0.004) or 1.0, "b": lambda: 1.0}, 2, samples, 1000,
                             min_seconds=0.05)
    assert 6 <= len(samples["a"]) <= 40
    samples = {}
    vals = iter([1000 * 0.9 ** k for k in range(1000)])  # a new minimum every round: never stable
    _bench._best_interleaved({"a": lambda: time.sleep(0.004) or float(next(vals)), "b": lambda: 1.0}, 2,
                             samples, 1000, max_seconds=0.05)
    assert 6 <= len(samples["a"]) <= 40


def test_bar_parts_and_bookkeeping():
    with pytest.raises(ValueError, match="parts"):
        _bench.bars(_bench._Namespace(False), 1, lambda m: None, parts=("forward", "bogus"))
    with pytest.raises(ValueError, match="bar_parts"):
        _bench.run_bench(bar_parts=())
    with pytest.raises(ValueError, match="bar_seconds"):
        _bench.run_bench(bar_seconds=5.0, bar_max_seconds=1.0)
    out = _bench.bars(_bench._Namespace(False), 1, lambda m: None, {1: 500, 2: 8, 3: 8}, max_trials=1,
                      parts=("forward",), min_seconds=0.0)
    assert set(out) == {"sizes", "trials", "max_trials", "min_seconds", "max_seconds", "parts",
                        "compute_forward_vs_plain"}
    for row in out["compute_forward_vs_plain"].values():
        b = row["bookkeeping"]
        assert b["forward_outside_routine_s"] > 0 and b["plain_outside_routine_s"] >= 0
        assert b["bookkeeping_s"] == b["forward_outside_routine_s"] - b["plain_outside_routine_s"]
    assert rb.pending() == []
