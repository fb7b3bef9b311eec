"""The files tileblas reads on its own: the path policy (``paths.json``) and the model repository
(``models.sqlite``).  A damaged, hostile or locked file costs one warning (or one line from the CLI)
and the shipped defaults; never a user's call, ``tileblas info``, a stall or unbounded reading (issue 37)."""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tileblas import blas
from tileblas.blas import _dispatch
from tileblas.policy import _paths

GOOD = {
    "schema": 1, "created": 1.7e9, "threads": 4,
    "tile_flops": {"gemm/real": 5e9, "gemm/complex": None, "trmm/real": 1e10},
    "recursion": {"trmm/real": [1024, 16, 256], "trsm/complex": None},
    "measured": {"native_vs_tiled": {"gemm/real": [[1024, 1.02], [2048, 0.98]]}, "reps": 3},
    "rank_gemm": {"dsyrk": [6e5, 1.8e6]}, "one_thread": {"trmm": 8.8e4}, "split_from": {"dgemm": 2e6,
                                                                                        "ztrmm": None},
}


def _level3_calls() -> None:
    """A few Level-3 calls on every path the policy decides (C path, recursion windows, runtime)."""
    rng = np.random.default_rng(0)
    for n in (3, 40, 130):
        a = np.asfortranarray(rng.random((n, n)) + n * np.eye(n))
        blas.dgemm(1.0, a, a)
        blas.dtrmm(1.0, a, a)
        blas.dtrsm(1.0, a, a, side=1)
        blas.dsyrk(1.0, a)
        blas.zherk(1.0, a + 0j)
        blas.ztrsm(1.0, a + 0j, a + 0j)


@pytest.fixture
def policy_file(tmp_path, monkeypatch):
    """A path for ``paths.json`` in force; the shipped policy restored afterwards."""
    f = tmp_path / "paths.json"
    monkeypatch.setenv("TILEBLAS_PATHS", str(f))
    yield f
    monkeypatch.delenv("TILEBLAS_PATHS")
    _dispatch.apply_policy(reload=True)


def _load_warnings() -> tuple[_paths.PathPolicy, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        _dispatch.apply_policy(reload=True)
        pol = _paths.policy()
        _level3_calls()
    return pol, [w for w in got if "paths" in str(w.message) or "policy" in str(w.message)]


def _assert_shipped(pol: _paths.PathPolicy, got: list, f) -> None:
    assert pol.source == "shipped default" and str(f) in pol.note
    assert all(math.isinf(v) for v in pol.tile_flops.values())
    assert len(got) == 1 and str(f) in str(got[0].message) and "shipped default" in str(got[0].message)


def _with(**changes) -> str:
    d = json.loads(json.dumps(GOOD))
    d.update(changes)
    return json.dumps(d)


HOSTILE = {
    "min_order_0": _with(recursion={"trmm/real": [0, 0, 1e9], "trsm/real": [0, 1, 2]}),
    "created_1e20": _with(created=1e20),
    "created_text": _with(created="yesterday"),
    "threads_1e999": json.dumps(GOOD).replace('"threads": 4', '"threads": 1e999'),
    "threads_negative": _with(threads=-2),
    "threads_float": _with(threads=2.5),
    "deeply_nested": '{"schema": 1, "tile_flops": {}, "measured": ' + "[" * 200000 + "]" * 200000 + "}",
    "nested_measured": _with(measured={"a": json.loads("[" * 40 + "]" * 40)}),
    "tile_flops_list": _with(tile_flops=[1, 2]),
    "tile_flops_bool": _with(tile_flops={"gemm/real": True}),
    "tile_flops_negative": _with(tile_flops={"gemm/real": -5}),
    "tile_flops_nan": json.dumps(GOOD).replace("5000000000.0", "NaN"),
    "tile_flops_key": _with(tile_flops={"gemm": 1}),
    "tile_flops_key_int": '{"schema": 1, "tile_flops": {"1/2/3": 1}}',
    "recursion_short": _with(recursion={"trmm/real": [1, 2]}),
    "recursion_text": _with(recursion={"trmm/real": "fast"}),
    "recursion_reversed": _with(recursion={"trmm/real": [64, 300, 20]}),
    "one_thread_inf": json.dumps(GOOD).replace("88000.0", "1e999"),
    "one_thread_list": _with(one_thread=[1]),
    "rank_gemm_huge_int": _with(rank_gemm={"dsyrk": [10 ** 400, 1]}),
    "split_from_text": _with(split_from={"dgemm": "never"}),
    "measured_list": _with(measured=[1, 2, 3]),
    "not_utf8": b"\xff\xfe{}",
    "top_level_list": "[1, 2, 3]",
    "empty": "",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_damaged_or_hostile_policy_costs_one_warning_and_the_shipped_defaults(policy_file, name):
    text = HOSTILE[name]
    if isinstance(text, bytes):
        policy_file.write_bytes(text)
    else:
        policy_file.write_text(text)
    pol, got = _load_warnings()
    _assert_shipped(pol, got, policy_file)


def test_warnings_made_errors_do_not_make_a_damaged_policy_break_calls(policy_file):
    policy_file.write_text(HOSTILE["min_order_0"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _dispatch.apply_policy(reload=True)
        _level3_calls()
    assert str(policy_file) in _paths.policy().note


def test_a_good_policy_file_is_taken_without_a_warning(policy_file):
    policy_file.write_text(json.dumps(GOOD))
    pol, got = _load_warnings()
    assert got == [] and pol.source.startswith("tuned on") and not pol.note
    assert pol.tile_flops[("gemm", "real")] == 5e9 and math.isinf(pol.tile_flops[("gemm", "complex")])
    assert pol.recursion[("trmm", "real")] == (1024.0, 16.0, 256.0) and pol.threads == 4
    assert pol.split_from == {"dgemm": 2e6, "ztrmm": math.inf} and pol.one_thread == {"trmm": 8.8e4}


def test_a_policy_larger_than_a_mebibyte_is_not_read(policy_file, monkeypatch):
    policy_file.write_text(" " * (2 << 20) + json.dumps(GOOD))
    reads = []
    real_read = os.read
    monkeypatch.setattr(_paths.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    pol, got = _load_warnings()
    _assert_shipped(pol, got, policy_file)
    assert sum(reads) <= (1 << 20) + 1 and "MiB" in pol.note


def _limited(code: str, path: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``code`` in a child with ``TILEBLAS_PATHS=path`` under a 3 GB address-space bound."""
    def bound():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    env = dict(os.environ, TILEBLAS_PATHS=path)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=bound)


CHILD = ("import warnings, numpy as np; from tileblas import blas; from tileblas.policy import _paths\n"
         "a = np.ones((64, 64), order='F'); blas.dgemm(1.0, a, a); blas.dtrmm(1.0, a, a)\n"
         "print(_paths.policy().source, '|', _paths.policy().note)\n")


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "directory"])
def test_a_policy_path_that_is_no_regular_file_is_not_read_and_never_blocks(tmp_path, kind):
    if kind == "dev_zero":
        path = "/dev/zero"
        if not os.path.exists(path):
            pytest.skip("no /dev/zero")
    elif kind == "fifo":
        path = str(tmp_path / "paths.json")
        os.mkfifo(path)
    else:
        path = str(tmp_path)
    try:
        r = _limited(CHILD, path, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the first Level-3 call blocked on a {kind} paths.json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("shipped default |") and "not a regular file" in r.stdout
    assert r.stderr.count("Warning") == 1 and path in r.stderr
    info = subprocess.run([sys.executable, "-c", "import sys; from tileblas.cli import main; sys.exit(main(['info']))"],
                          env=dict(os.environ, TILEBLAS_PATHS=path), capture_output=True, text=True, timeout=60)
    assert info.returncode == 0 and "Traceback" not in info.stderr


# -- a fuzz of the file's contents --------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
_keys = st.sampled_from(["schema", "created", "threads", "tile_flops", "recursion", "measured", "rank_gemm",
                         "one_thread", "split_from"])
_inner_keys = st.sampled_from(["gemm/real", "trmm/real", "trsm/complex", "dsyrk", "trmm", "dgemm", "ztrmm",
                               "x/y", "", "gemm/real/x"])


@st.composite
def _documents(draw):
    """A valid policy with a few values (top level or one level down) replaced by arbitrary JSON."""
    d = json.loads(json.dumps(GOOD))
    for _ in range(draw(st.integers(1, 3))):
        key = draw(_keys)
        if draw(st.booleans()) and isinstance(d.get(key), dict):
            d[key][draw(_inner_keys)] = draw(_json)
        else:
            d[key] = draw(_json)
    return d


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_documents())
def test_fuzz_no_policy_file_content_breaks_a_call_or_info(policy_file, doc):
    from tileblas.cli import _core

    policy_file.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them
    pol, got = _load_warnings()
    if pol.note:
        _assert_shipped(pol, got, policy_file)
    else:
        assert got == [] and pol.source.startswith("tuned on")
    json.dumps(_core.info(), default=str)  # what `tileblas info` shows
    pol.describe()


# -- the model repository: locked, empty, foreign -------------------------------------------------------


@pytest.fixture
def locked_repository(tmp_path):
    """A model repository held under an exclusive lock by another process for the test's length."""
    from tileblas.perf import Repository

    path = tmp_path / "models.sqlite"
    Repository(path)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         f"con = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
         "con.execute('PRAGMA locking_mode=EXCLUSIVE'); con.execute('BEGIN EXCLUSIVE')\n"
         "con.execute(\"INSERT INTO meta VALUES ('held', 'by another process')\")\n"
         "print('locked', flush=True); time.sleep(300)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield path
    finally:
        holder.kill()
        holder.wait()


def test_a_locked_model_repository_does_not_stall_a_tiled_call(locked_repository, monkeypatch):
    import time

    import tileblas
    from tileblas.policy import _suggest

    monkeypatch.setenv("TILEBLAS_MODEL_DB", str(locked_repository))
    _suggest.clear_cache()
    try:
        t0 = time.perf_counter()
        assert _suggest.suggest("tile_size", n=2048) is None  # the shipped heuristics apply
        a = np.asfortranarray(np.random.default_rng(1).random((700, 700)))
        c = np.zeros((700, 700), order="F")
        with tileblas.Runtime(2, small_flops=0) as rt:
            rt.run("gemm", 1.0, a, a, 0.0, c)
        took = time.perf_counter() - t0
    finally:
        _suggest.clear_cache()
    assert took < 5.0, f"stalled {took:.1f} s on a locked model repository"
    np.testing.assert_allclose(c, a @ a, rtol=1e-12)


def test_model_show_on_a_locked_repository_prints_one_line(locked_repository, capsys):
    import time

    from tileblas.cli import main

    t0 = time.perf_counter()
    rc = main(["model", "show", "--db", str(locked_repository)])
    took = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert rc == 2 and took < 10 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "locked" in err and str(locked_repository) in err


@pytest.mark.parametrize("content", [b"", b"my notes, not a database\n", "sqlite_other"])
def test_model_show_never_rewrites_a_file_that_is_no_model_repository(tmp_path, capsys, content):
    import sqlite3

    from tileblas.cli import main

    f = tmp_path / "mine.db"
    if content == "sqlite_other":
        con = sqlite3.connect(f)
        con.execute("CREATE TABLE people (name TEXT)")
        con.commit()
        con.close()
    else:
        f.write_bytes(content)
    before = f.read_bytes()
    rc = main(["model", "show", "--db", str(f)])
    out, err = capsys.readouterr()
    assert f.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["mine.db"]
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "not a tileblas model repository" in err
