"""`tileblas tune` for a user: options grouped with help, --quick with a time estimate, results shown
before they are stored, nothing stored from within the control's noise, --dry-run, --reset.  The timing
loop is replaced by fixed timings where a test needs to know what was measured."""

from __future__ import annotations

import argparse
import json
import math
from types import SimpleNamespace

import pytest

from tileblas.cli import build_parser, main
from tileblas.cli import _perf
from tileblas.perf import _pathtune
from tileblas.perf._pathtune import above_noise


def _parsers(parser):
    yield parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for p in a.choices.values():
                yield from _parsers(p)


def test_every_option_of_every_command_has_help():
    bad, words = [], []
    for p in _parsers(build_parser()):
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or not a.option_strings:
                continue
            if not a.help or a.help == argparse.SUPPRESS:
                bad.append(f"{p.prog} {a.option_strings[0]}")
            elif "issue" in a.help.lower():
                words.append(f"{p.prog} {a.option_strings[0]}: {a.help}")
        if p.description and "issue" in p.description.lower():
            words.append(f"{p.prog}: {p.description}")
    assert not bad, f"options without help: {bad}"
    assert not words, f"help that speaks of issues: {words}"


def test_tune_options_are_grouped():
    tune = next(p for p in _parsers(build_parser()) if p.prog.endswith(" tune"))
    groups = {g.title: {a.dest for a in g._group_actions} for g in tune._action_groups}
    assert {"quick", "dry_run", "reset", "paths_only"} <= groups["what to do"]
    assert {"algorithm", "blocks", "max_samples"} <= groups["performance models"]
    assert {"path_sizes", "margin", "split_orders"} <= groups["Level-3 paths"]
    assert {"db", "threads", "locality"} <= groups["where and for what"]


def test_above_noise_takes_off_the_controls_spread():
    assert above_noise(1.08, 1.05) == pytest.approx(1.08 / 1.05)
    assert above_noise(1.08, 1 / 1.05) == pytest.approx(1.08 / 1.05)  # a control either way is noise
    assert above_noise(1.04, 1.05) == 1.0 and above_noise(0.97, 1.05) == 1.0
    assert above_noise(0.8, 1.1) == pytest.approx(0.8 * 1.1)
    assert above_noise(2.0, 1.0) == 2.0
    assert above_noise(float("nan"), 1.0) == 1.0 and above_noise(1.5, 0.0) == 1.0


def _fixed(times):
    """A stand-in for the timing loop: each contender's best seconds from ``times`` (default 1.0)."""
    def interleaved(calls, rounds, **kw):
        return SimpleNamespace(best={k: times.get(k, 1.0) for k in calls})

    return interleaved


def test_a_gain_within_the_noise_is_not_a_setting(monkeypatch):
    # tiles 10% faster, but the baseline timed twice differs by 20%: nothing measured
    monkeypatch.setattr(_pathtune, "interleaved", _fixed({"native": 1.0, "tiled": 1 / 1.1, "control": 1.2}))
    pol = _pathtune.measure_policy((16, 24), (16,), (4,), ("gemm", "trsm"), ("real",), reps=1, settle=0.0,
                                   threads=2)
    assert math.isinf(pol.tile_flops[("gemm", "real")]) and pol.recursion[("trsm", "real")] is None
    assert set(pol.measured["within_noise"]) == {"tile_flops gemm/real", "tile_flops trsm/real", "recursion trsm/real"}
    row = pol.measured["native_vs_tiled"]["gemm/real"][0]
    assert row[3] == pytest.approx(1.1) and row[4] == pytest.approx(1 / 1.2)  # ratio, control


def test_a_gain_beyond_the_noise_is_a_setting(monkeypatch):
    monkeypatch.setattr(_pathtune, "interleaved",
                        _fixed({"native": 1.0, "tiled": 0.5, "recursive": 2.0, "control": 1.01}))
    pol = _pathtune.measure_policy((16, 24), (16,), (4,), ("gemm", "trsm"), ("real",), reps=1, settle=0.0,
                                   threads=2)
    assert pol.tile_flops[("gemm", "real")] == _pathtune._flops("gemm", 16, 16, False)
    assert pol.recursion[("trsm", "real")] == (math.inf, 0.0, 0.0)  # the recursion lost clearly: never
    assert pol.measured["within_noise"] == []


def test_c_path_limits_within_the_noise_are_not_stored(monkeypatch):
    pytest.importorskip("tileblas.blas._fastpath")
    monkeypatch.setattr(_pathtune, "interleaved", _fixed({"pool": 1.0, "one": 0.97, "control": 1.1}))
    limits, rows = _pathtune.measure_one_thread(("trmm",), (16, 24), reps=1, settle=0.0)
    if "note" in rows:
        pytest.skip(rows["note"])  # one thread here: nothing to choose
    assert limits == {} and rows["within_noise"] == ["one_thread trmm"]


def _warm_cold(warm, cold):
    """A stand-in for the timing loop that tells a block of warm calls (``block_s`` set) from one cold call."""
    def interleaved(calls, rounds, **kw):
        return SimpleNamespace(best={k: (warm if kw.get("block_s") else cold)[k] for k in calls})

    return interleaved


@pytest.mark.parametrize("one_warm, chosen", [(1.02, True), (1.1, False)])
def test_c_path_limits_count_cold_calls_as_much_as_warm_ones(monkeypatch, one_warm, chosen):
    """The one thread twice as fast as the pool on the first call after a pause: 2% behind in blocks of
    calls (within the margin), the one-thread limit covers every order measured (the geometric mean of the
    gains, 1.40x); 10% behind, no order (a loss beyond the margin in either keeps the pool's path).  Warm
    calls alone give it no order either way.  The rows carry both."""
    pytest.importorskip("tileblas.blas._fastpath")
    monkeypatch.setattr(_pathtune, "interleaved", _warm_cold({"pool": 1.0, "one": one_warm, "control": 1.0},
                                                             {"pool": 2.0, "one": 1.0, "control": 2.0}))
    limits, rows = _pathtune.measure_one_thread(("trmm",), (16, 24), reps=3, settle=0.0, idle=0.2)
    if "note" in rows:
        pytest.skip(rows["note"])  # one thread here: nothing to choose
    assert limits["trmm"] == (_pathtune._flops("trmm", 24, 24, False) + 1.0 if chosen else 0.0)
    row = rows["trmm"][0]
    assert row[:2] == ["d", 16] and row[4] == pytest.approx(1 / one_warm) and row[6:] == [2.0, 1.0, 2.0, 1.0]
    limits, rows = _pathtune.measure_one_thread(("trmm",), (16, 24), reps=3, settle=0.0, idle=0.0)
    assert limits["trmm"] == 0.0 and all(len(r) == 6 for r in rows["trmm"])  # warm only: the pool everywhere


def test_the_split_must_not_lose_cold_calls(monkeypatch):
    """Parts on the pool 1.8x faster in blocks of calls but 15% slower on the first call after a pause
    keep the one call on OpenBLAS's threads at every order; warm calls alone would split from the first."""
    fp = pytest.importorskip("tileblas.blas._fastpath")
    from tileblas import blas

    blas.dgemm(1.0, [[1.0]], [[1.0]])
    if not _pathtune._splits(fp.config()):
        pytest.skip("one thread here: the C path does not split")
    monkeypatch.setattr(_pathtune, "interleaved", _warm_cold({"one": 1.8, "split": 1.0, "control": 1.8},
                                                             {"one": 1.0, "split": 1.15, "control": 1.0}))
    limits, _ = _pathtune.measure_split(("dgemm",), orders=(24, 48), reps=1, settle=0.0, idle=0.2)
    assert limits == {"dgemm": math.inf}
    limits, _ = _pathtune.measure_split(("dgemm",), orders=(24, 48), reps=1, settle=0.0, idle=0.0)
    assert limits == {"dgemm": 2 * 24 ** 3}


def _tune(tmp_path, monkeypatch, capsys, *extra):
    monkeypatch.setattr(_pathtune, "interleaved", _fixed({"native": 1.0, "tiled": 0.5, "control": 1.0}))
    monkeypatch.setattr(_perf, "_probe_rate", lambda: 1e10)
    f = tmp_path / "paths.json"
    rc = main(["tune", "--paths-only", "--paths-file", str(f), "--path-sizes", "16,24", "--families", "gemm",
               "--classes", "real", "--no-rank-gemm", "--no-one-thread", "--no-split", "--no-progress", *extra])
    return rc, f, capsys.readouterr().out


def test_tune_shows_results_then_stores(tmp_path, monkeypatch, capsys):
    rc, f, out = _tune(tmp_path, monkeypatch, capsys)
    assert rc == 0
    assert out.index("path crossovers: about") < out.index("measuring path crossovers")  # the estimate first
    shown = out.index("gemm   real     tiles from")
    assert shown < out.index(f"path policy stored in {f}")
    assert json.loads(f.read_text())["tile_flops"]["gemm/real"] == _pathtune._flops("gemm", 16, 16, False)


def test_tune_dry_run_stores_nothing(tmp_path, monkeypatch, capsys):
    rc, f, out = _tune(tmp_path, monkeypatch, capsys, "--dry-run")
    assert rc == 0 and not f.exists()
    assert "gemm   real     tiles from" in out and "--dry-run: nothing stored" in out


def test_tune_dry_run_builds_its_models_in_a_scratch_repository(tmp_path, capsys):
    """The models part of a full tune with --dry-run writes nothing to the repository --db names; the
    suggestions it prints come from the models it built."""
    db = tmp_path / "models.sqlite"
    rc = main(["tune", "--dry-run", "--no-paths", "--no-progress", "--db", str(db), "--n", "64", "--blocks",
               "16,32", "--max-tile", "32", "--reps", "1", "--bursts", "1", "--validation", "0",
               "--max-samples", "8", "--min-size", "32"])
    out = capsys.readouterr().out
    assert rc == 0 and not db.exists()
    assert "scratch repository and thrown away" in out and "tile_size(dgemm, n=4096, devices=2) = " in out


def test_tune_reset_removes_what_tune_stored_and_says_which(tmp_path, monkeypatch, capsys):
    paths, db = tmp_path / "paths.json", tmp_path / "models.sqlite"
    paths.write_text("{}")
    db.write_bytes(b"")
    assert main(["tune", "--reset", "--paths-file", str(paths), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert not paths.exists() and not db.exists()
    assert f"removed {paths}" in out and f"removed {db}" in out
    assert main(["tune", "--reset", "--paths-file", str(paths), "--db", str(db)]) == 0
    assert "nothing stored" in capsys.readouterr().out


def test_quick_takes_the_short_ladders_and_an_option_given_wins():
    a = build_parser().parse_args(["tune", "--quick", "--path-reps", "4"])
    _perf._ladders(a)
    assert a.path_sizes == _perf.TUNE_LADDERS["path_sizes"][1] and a.path_reps == 4
    full = build_parser().parse_args(["tune"])
    _perf._ladders(full)
    assert full.path_sizes == _perf.TUNE_LADDERS["path_sizes"][0]
    assert _perf.estimate_paths_seconds(a, 5e10) < _perf.estimate_paths_seconds(full, 5e10) / 4
