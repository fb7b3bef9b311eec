"""The ``tileblas`` command on bad input: one line naming the option and its value, exit status 2, no
traceback, nothing written; read-only commands write nothing (issue 37).  ``bench grid`` has its own
tests (tests/test_bench_grid_modes.py)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tileblas.cli import _bench, _perf, _rblas, _runtime, main


@pytest.fixture
def home(tmp_path, monkeypatch):
    """Every file tileblas may read or write by default lives under ``tmp_path/home`` (empty)."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("XDG_CACHE_HOME", str(h / "cache"))
    monkeypatch.delenv("TILEBLAS_MODEL_DB", raising=False)
    monkeypatch.delenv("TILEBLAS_PATHS", raising=False)
    monkeypatch.chdir(h)
    return h


def _files(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_refusal(rc, out, err, *words) -> None:
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture
def no_work(monkeypatch):
    """The commands' bodies replaced by a recorder: a refusal must come before any work."""
    ran = []
    for mod, name in ((_perf, "_cmd_build"), (_perf, "_cmd_rank"), (_perf, "_cmd_tune"), (_perf, "_cmd_show"),
                      (_runtime, "_cmd_trace"), (_bench, "_cmd_bench_blas"), (_rblas, "_cmd")):
        monkeypatch.setattr(mod, name, lambda args, _n=name: ran.append(_n) or 0)
    return ran


ISSUE_CASES = [
    (["model", "build", "dgemm", "--lo", "-5"], "--lo", "-5"),
    (["model", "build", "dgemm", "--max-samples", "-3"], "--max-samples", "-3"),
    (["rank", "trinv", "--n", "64:0:64"], "--n", "64:0:64"),
    (["tune", "--path-sizes", "0"], "--path-sizes", "0"),
    (["tune", "--margin", "-1"], "--margin", "-1"),
    (["tune", "--cold-idle", "-1"], "--cold-idle", "-1"),
    (["tune", "--max-tile", "-1"], "--max-tile", "-1"),
    (["trace", "gemm", "--repeat", "0"], "--repeat", "0"),
]


@pytest.mark.parametrize("argv, option, value", ISSUE_CASES, ids=[" ".join(c[0]) for c in ISSUE_CASES])
def test_bad_option_values_of_the_issue_are_one_line_and_exit_2(home, capsys, no_work, argv, option, value):
    rc, out, err = _run(argv, capsys)
    _one_line_refusal(rc, out, err, option, value)
    assert no_work == [] and _files(home) == []


def test_model_build_with_lo_above_hi_refuses_and_keeps_the_stored_model(home, capsys, tmp_path):
    db = tmp_path / "models.sqlite"
    rc, out, err = _run(["model", "build", "dgemm", "--lo", "8", "--hi", "24", "--reps", "1", "--bursts", "1",
                         "--validation", "4", "--max-samples", "30", "--no-progress", "--db", str(db)], capsys)
    assert rc == 0, err
    before = db.read_bytes(), sorted(p.name for p in tmp_path.iterdir())
    rc, out, err = _run(["model", "build", "dgemm", "--lo", "10", "--hi", "5", "--db", str(db), "--no-progress"],
                        capsys)
    _one_line_refusal(rc, out, err, "--lo", "--hi", "10", "5")
    assert (db.read_bytes(), sorted(p.name for p in tmp_path.iterdir())) == before


@pytest.mark.parametrize("algorithm", ["trinv", "sylvester"])
def test_rank_without_stored_models_is_one_line_and_writes_nothing(home, capsys, tmp_path, algorithm):
    rc, out, err = _run(["rank", algorithm, "--n", "64"], capsys)  # the default repository: none there
    _one_line_refusal(rc, out, err, "model")
    db = tmp_path / "empty.sqlite"
    from tileblas.perf import Repository

    Repository(db)
    before = db.read_bytes()
    rc, out, err = _run(["rank", algorithm, "--n", "64", "--db", str(db)], capsys)
    _one_line_refusal(rc, out, err, "no model stored")
    assert db.read_bytes() == before and _files(home) == []


def test_read_only_commands_write_nothing(home, capsys, tmp_path):
    for argv in (["info"], ["info", "--json"], ["model", "show"], ["model", "show", "--json"],
                 ["model", "show", "--db", str(tmp_path / "absent.sqlite")], ["rank", "trinv", "--n", "64"]):
        _run(argv, capsys)
        assert _files(home) == [] and not (tmp_path / "absent.sqlite").exists(), argv


def test_an_action_missing_is_one_line(home, capsys):
    for argv in (["model"], ["rank"], ["bench"], ["rblas"]):
        rc, out, err = _run(argv, capsys)
        _one_line_refusal(rc, out, err, argv[0])


@pytest.mark.cluster
@pytest.mark.timeout(180)
def test_trace_runs_on_a_dask_cluster(home, capsys):
    pytest.importorskip("distributed")
    rc, out, err = _run(["trace", "gemm", "--devices", "dask:2", "--n", "256", "--tile-size", "128", "--no-plot",
                         "--out", str(home / "t")], capsys)
    assert rc == 0, err
    assert (home / "t.json").exists() and "wrote" in out


# -- a fuzz of bad argument combinations ---------------------------------------------------------------

# (command words, {option: [bad values]}): each value is refused while the arguments are read
_BAD_INT = ["-5", "0", "abc", "1.5", "", "1e999", "nan", "99999999999999999999999"]
_BAD_SIZES = ["64:0:64", "0", "-8", "8:64:0", "8:64:-8", "a,b", ",", "64:8", "1:2:3:4", "nan"]
_BAD_FLOAT = ["-1", "nan", "inf", "-inf", "x", ""]
COMMANDS = [
    (["model", "build", "dgemm"], {"--lo": _BAD_INT, "--hi": _BAD_INT, "--max-samples": _BAD_INT,
                                   "--min-size": _BAD_INT, "--reps": _BAD_INT, "--bursts": _BAD_INT,
                                   "--initial-size": _BAD_INT, "--threads": _BAD_INT,
                                   "--error-bound": _BAD_FLOAT + ["0"], "--validation": ["-1", "x"],
                                   "--strategy": ["fast"], "--locality": ["near"]}),
    (["rank", "trinv"], {"--n": _BAD_SIZES, "--block": _BAD_INT, "--variants": _BAD_SIZES, "--reps": _BAD_INT,
                         "--bursts": _BAD_INT, "--min-size": _BAD_INT, "--tolerance": _BAD_FLOAT,
                         "--threads": _BAD_INT}),
    (["rank", "sylvester"], {"--n": _BAD_SIZES, "--block": _BAD_INT}),
    (["tune"], {"--n": _BAD_INT, "--variant": _BAD_INT, "--blocks": _BAD_SIZES, "--max-tile": _BAD_INT + ["4"],
                "--reps": _BAD_INT, "--max-samples": _BAD_INT, "--validation": ["-1"], "--path-sizes": _BAD_SIZES,
                "--path-orders": _BAD_SIZES, "--path-rhs": _BAD_SIZES, "--path-reps": _BAD_INT,
                "--margin": _BAD_FLOAT, "--settle": _BAD_FLOAT, "--families": ["gemm,foo", ",", "x"],
                "--classes": ["real,imaginary", ""], "--rank-gemm-orders": _BAD_SIZES,
                "--rank-gemm-reps": _BAD_INT, "--one-thread-orders": _BAD_SIZES, "--one-thread-reps": _BAD_INT,
                "--split-orders": _BAD_SIZES, "--split-reps": _BAD_INT, "--algorithm": ["qr"]}),
    (["trace", "gemm"], {"--n": _BAD_INT, "--repeat": _BAD_INT, "--tile-size": _BAD_INT, "--dtype": ["q"]}),
    (["bench", "blas", "dgemm"], {"--n": _BAD_INT, "--repeat": _BAD_INT, "--threads": _BAD_INT}),
    (["rblas", "bench"], {"--calls": _BAD_INT, "--trials": _BAD_INT, "--bar-trials": _BAD_INT,
                          "--bar-max-trials": _BAD_INT, "--bar-seconds": _BAD_FLOAT,
                          "--bar-max-seconds": _BAD_FLOAT, "--preset": ["huge"]}),
]
_JUNK = st.sampled_from(["--no-such-option", "extra", "-x", "--", "--n", "=", "--db"])


@st.composite
def _bad_argv(draw):
    words, opts = draw(st.sampled_from(COMMANDS))
    names = draw(st.lists(st.sampled_from(sorted(opts)), min_size=1, max_size=3, unique=True))
    argv = list(words)
    for name in names:
        argv += [name, draw(st.sampled_from(opts[name]))]
    if draw(st.booleans()):
        argv.insert(draw(st.integers(len(words), len(argv))), draw(_JUNK))
    return argv


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=_bad_argv())
def test_fuzz_bad_arguments_are_one_line_exit_2_and_no_work(home, capsys, no_work, argv):
    rc, out, err = _run(argv, capsys)
    _one_line_refusal(rc, out, err)
    assert no_work == [] and _files(home) == []


def test_reading_a_model_repository_leaves_no_file_behind(home, capsys, tmp_path):
    from tileblas.perf import Repository

    db = tmp_path / "repo" / "models.sqlite"
    Repository(db)
    before = sorted(p.name for p in db.parent.iterdir()), db.read_bytes()
    for argv in (["model", "show", "--db", str(db)], ["rank", "trinv", "--n", "64", "--db", str(db)]):
        _run(argv, capsys)
        assert (sorted(p.name for p in db.parent.iterdir()), db.read_bytes()) == before, argv


def test_a_demo_section_that_does_not_exist_is_one_line(home, capsys):
    rc, out, err = _run(["demo", "--only", "zzz"], capsys)
    _one_line_refusal(rc, out, err, "--only", "zzz")
