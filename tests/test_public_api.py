"""The public API as a user meets it: every public module's ``dir()`` is its ``__all__``; every public
callable has a real signature (``*args``/``**kwargs`` only where tools/api_table.py says why) and a
docstring that describes it, not a pointer into a private module; docs/api_table.md is what the code gives;
the command answers ``python -m tileblas`` and ``--version``."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("api_table", ROOT / "tools" / "api_table.py")
api_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(api_table)
api_table._MODULES.update(api_table.public_modules())

MODULES = api_table.public_modules()
#: a private module named in a docstring: tileblas.x._y (a reader cannot use it, or find it in the reference)
PRIVATE = re.compile(r"tileblas(?:\.[a-z]\w*)*\._[a-z]\w*")


def test_the_walk_finds_the_public_modules():
    for m in ("tileblas", "tileblas.blas", "tileblas.runtime", "tileblas.linalg", "tileblas.asyncapi",
              "tileblas.devices", "tileblas.perf", "tileblas.rblas", "tileblas.kernels"):
        assert m in MODULES
    assert not [m for m in MODULES if any(p.startswith("_") for p in m.split(".")[1:])]


@pytest.mark.parametrize("modname", MODULES)
def test_dir_is_the_api(modname):
    mod = importlib.import_module(modname)
    assert hasattr(mod, "__all__"), f"{modname} has no __all__"
    everything = set(mod.__all__)
    assert len(everything) == len(mod.__all__), f"{modname}.__all__ names something twice"
    for name in everything:
        assert hasattr(mod, name), f"{modname}.__all__ names {name!r}, which it lacks"
    shown = {n for n in dir(mod) if not n.startswith("_")}
    extra = shown - everything - api_table.public_submodules(mod)
    assert not extra, f"dir({modname}) shows names outside its API: {sorted(extra)}"
    missing = {n for n in everything if not n.startswith("_")} - shown
    assert not missing, f"dir({modname}) hides {sorted(missing)}"


def test_top_level_namespace():
    import tileblas

    assert {"Runtime", "get_runtime", "set_runtime", "Tuning", "Matrix", "blas", "linalg", "asyncapi",
            "__version__"} <= set(tileblas.__all__)
    for junk in ("Any", "annotations", "importlib", "np", "cpu_count"):
        assert junk not in dir(tileblas)
    import tileblas.linalg as L

    for junk in ("Any", "annotations", "np", "cpu_count", "recursion_stop"):
        assert junk not in dir(L)


ROWS = list(api_table.callables())


def test_every_public_callable_has_a_signature_and_variadics_have_a_reason():
    variadic, nosig = [], []
    for qual, kind, obj in ROWS:
        if kind == "exception":
            continue
        sig = api_table.signature(obj)
        if sig is None:
            nosig.append(qual)
        elif api_table.form(sig) == "variadic":
            variadic.append(qual)
    assert not nosig, f"no signature: {nosig}"
    unexplained = sorted(set(variadic) - set(api_table.VARIADIC))
    assert not unexplained, f"*args/**kwargs without a reason in tools/api_table.py VARIADIC: {unexplained}"
    stale = sorted(set(api_table.VARIADIC) - set(variadic))
    assert not stale, f"VARIADIC names callables that are not variadic (or not public) now: {stale}"


def test_runtime_signatures_are_real():
    import tileblas

    sig = inspect.signature(tileblas.Runtime)
    assert list(sig.parameters)[0] == "devices"
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in list(sig.parameters.values())[1:])
    assert {"tile_size", "reservation_slots", "sync", "deterministic", "host_memory"} <= set(sig.parameters)
    from tileblas.runtime import ClusterRuntime

    assert "security" in inspect.signature(ClusterRuntime).parameters
    from tileblas.runtime._planner import ROUTINES

    for name, (params, flags) in ROUTINES.items():
        # the methods' parameters are the planner's declaration of the routine, then tile_size
        got = inspect.signature(getattr(tileblas.Runtime, name)).parameters
        assert list(got) == ["self", *params, *flags, "tile_size"], name
        assert {f: got[f].default for f in flags} == flags, name
        doc = inspect.getdoc(getattr(tileblas.Runtime, name))
        assert "Parameters" in doc and all(f"{p} :" in doc for p in (*params, *flags, "tile_size")), name


def test_every_public_callable_has_its_own_docstring():
    bad, private = [], []
    for qual, kind, obj in ROWS:
        doc = inspect.getdoc(obj) or ""
        if kind != "method" and len(doc.strip()) < 20:
            bad.append(qual)
        if kind in ("function", "class") and PRIVATE.search(doc):
            private.append(f"{qual}: {PRIVATE.search(doc).group(0)}")
    assert not bad, f"public callables without a docstring: {bad}"
    assert not private, "docstrings that point into private modules:\n" + "\n".join(private)


def test_the_api_table_is_up_to_date():
    text = api_table.render()
    assert api_table.TABLE.read_text() == text, "docs/api_table.md differs from the code: python tools/api_table.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, env=env)


def test_python_m_tileblas_and_version():
    import tileblas

    r = _run("-m", "tileblas", "--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"tileblas {tileblas.__version__}"
    r = _run("-m", "tileblas", "--help")
    assert r.returncode == 0 and "usage: tileblas" in r.stdout


def test_demo_only_with_an_unknown_name_lists_the_sections():
    r = _run("-m", "tileblas", "demo", "--only", "foo")
    assert r.returncode == 2
    assert "'foo'" in r.stderr and "sections:" in r.stderr and "blas" in r.stderr


def test_a_missing_compiled_module_is_one_clear_import_error(tmp_path):
    import shutil

    import tileblas

    pkg = tmp_path / "tileblas"
    shutil.copytree(pathlib.Path(tileblas.__file__).parent, pkg,
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", "from tileblas import blas"], capture_output=True, text=True,
                       timeout=120, env=env, cwd=tmp_path)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: tileblas.kernels._native is not built")
    assert "pip install -e ." in last and "tileblas.blas._fastpath" in last
