"""The GPUs' figures kept for the machine (tileblas.devices._figures): what a GPU's first use measures (its
host link, a drop-in call's cost beyond the model) is kept in one file and read by the processes after, so
that a call's side does not move from process to process; another machine's figures are not read; a damaged
or unwritable file is a note, never an error; ``tileblas tune --gpus`` measures them again, ``--reset``
removes them.  On the CuPy stand-in of ``_cupy_standin.py`` (conftest.py gives each test its own file)."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import textwrap
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from _cupy_standin import install

from tileblas.blas import _dispatch
from tileblas.devices import _figures
from tileblas.devices import gpu as _gpu

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_drop_in_gpus():
    _dispatch.release_gpus()
    yield
    _dispatch.release_gpus()


@pytest.fixture()
def counted(monkeypatch):
    """The stand-in GPU with its host-link measurements and the drop-in's call-cost timings counted; the
    call cost is a fixed figure (the stand-in's timings are not a GPU's)."""
    sim = install(monkeypatch, devices=1)
    seen = {"link": 0, "cost": 0}
    measure = _gpu.GPUDevice._measure_host_link

    def link(self, *a, **kw):
        seen["link"] += 1
        return measure(self, *a, **kw)

    def cost(rt):
        seen["cost"] += 1
        return _dispatch.CallCost(3e-3, 2e-10, 5e-11, 64 << 20, ((512, 4e-3, 1e-3), (2048, 2e-2, 9e-3)))

    monkeypatch.setattr(_gpu.GPUDevice, "_measure_host_link", link)
    monkeypatch.setattr(_dispatch, "_call_cost", cost)
    sim.seen = seen
    return sim


def _fresh_process():
    """As a new process finds the file: nothing read yet."""
    _figures._STATE = _figures._State()


def test_a_gpus_figures_are_measured_once_and_read_by_the_processes_after(counted):
    from tileblas.runtime import Runtime

    with Runtime(devices="gpu:1") as rt:
        link = rt.devices[0].host_link_bytes_s
        key = rt.devices[0].figures_key
        first = _dispatch._kept_call_cost(rt)
    assert counted.seen == {"link": 1, "cost": 1}
    kept = json.loads(_figures.figures_path().read_text())
    assert kept["schema"] == _figures.SCHEMA
    assert kept["figures"][f"host link | {key}"] == link
    assert f"{_dispatch.CALL_COST_FIGURE} | {key}" in kept["figures"]
    # the key names the GPU, the CUDA versions, the host and tileblas' version
    assert key.startswith("stand-in | ") and "driver 13000" in key and "| host " in key and "| tileblas " in key
    _fresh_process()
    with Runtime(devices="gpu:1") as rt:
        assert rt.devices[0].host_link_bytes_s == link
        again = _dispatch._kept_call_cost(rt)
    assert counted.seen == {"link": 1, "cost": 1}  # read, not measured
    assert again == first and again.locked_from == 64 << 20 and again.timed[1] == (2048, 2e-2, 9e-3)
    st = _figures.status()
    # the stand-in is no H100: its gemm rates are figures of the machine too
    assert {k.split(" | ")[0] for k in st["read"]} == {"host link", "fp64 gemm", "fp32 gemm",
                                                         _dispatch.CALL_COST_FIGURE}
    assert st["stored"] == [] and st["note"] == ""


def test_the_drop_in_search_keeps_and_then_reads_the_call_cost(counted):
    """The drop-in's search (its first large call) keeps what it measured; a later process's search reads
    it, and its calls take the side the first process's took."""
    import numpy as np

    import tileblas.blas as tb

    _dispatch.set_devices("auto")
    a = np.asfortranarray(np.ones((1200, 1200)))
    tb.dgemm(1.0, a, a)
    assert _dispatch._GPU.call_cost.seconds == 3e-3 and counted.seen["cost"] == 1
    first = dict(_dispatch._GPU.choices)
    _dispatch.release_gpus()
    _fresh_process()
    tb.dgemm(1.0, a, a)
    assert counted.seen == {"link": 1, "cost": 1}
    assert _dispatch._GPU.call_cost.seconds == 3e-3 and _dispatch._GPU.choices == first
    _dispatch.set_devices(None)


def test_another_machines_figures_are_not_read(counted, monkeypatch):
    """A GPU of another name (or memory, driver, host, tileblas version) is another key: measured again,
    both kept."""
    from tileblas.runtime import Runtime

    with Runtime(devices="gpu:1") as rt:
        one = rt.devices[0].figures_key
    props = counted.cp.cuda.runtime.getDeviceProperties
    monkeypatch.setattr(counted.cp.cuda.runtime, "getDeviceProperties", lambda i: {**props(i), "name": b"other"})
    _fresh_process()
    with Runtime(devices="gpu:1") as rt:
        two = rt.devices[0].figures_key
    assert one != two and counted.seen["link"] == 2
    kept = json.loads(_figures.figures_path().read_text())["figures"]
    assert f"host link | {one}" in kept and f"host link | {two}" in kept


def test_a_damaged_file_is_measured_over_with_a_note(counted):
    from tileblas.runtime import Runtime

    path = _figures.figures_path()
    path.write_text("{not json")
    with Runtime(devices="gpu:1") as rt:
        assert 1e9 <= rt.devices[0].host_link_bytes_s <= 1e12
    assert counted.seen["link"] == 1
    assert json.loads(path.read_text())["schema"] == _figures.SCHEMA  # written whole again
    path.write_text(json.dumps({"schema": 99, "figures": {}}))
    _fresh_process()
    assert _figures.status()["note"].endswith(f"is not a figures file of schema {_figures.SCHEMA}: measured again")
    # a damaged entry in a sound file: measured over, the rest read
    with Runtime(devices="gpu:1") as rt:
        key = rt.devices[0].figures_key
        _dispatch._kept_call_cost(rt)
    kept = json.loads(path.read_text())["figures"]
    kept[f"host link | {key}"] = "fast"
    kept[f"{_dispatch.CALL_COST_FIGURE} | {key}"]["seconds"] = -1.0
    path.write_text(json.dumps({"schema": _figures.SCHEMA, "figures": kept}))
    _fresh_process()
    seen = dict(counted.seen)
    with Runtime(devices="gpu:1") as rt:
        assert 1e9 <= rt.devices[0].host_link_bytes_s <= 1e12
        assert _dispatch._kept_call_cost(rt).seconds == 3e-3
    assert counted.seen == {"link": seen["link"] + 1, "cost": seen["cost"] + 1}
    kept = json.loads(path.read_text())["figures"]
    assert isinstance(kept[f"host link | {key}"], float)


def test_a_file_that_cannot_be_written_leaves_the_figures_to_the_process(counted, monkeypatch, tmp_path):
    from tileblas.runtime import Runtime

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TILEBLAS_GPU_FIGURES", str(blocker / "gpus.json"))  # under a file: cannot be made
    with Runtime(devices="gpu:1") as rt:
        link = rt.devices[0].host_link_bytes_s
        assert 1e9 <= link <= 1e12
        assert _dispatch._kept_call_cost(rt).seconds == 3e-3
    st = _figures.status()
    assert "could not be written" in st["note"] and st["stored"] == []
    with Runtime(devices="gpu:1") as rt:  # this process keeps its own figures meanwhile
        assert rt.devices[0].host_link_bytes_s == link
    assert counted.seen == {"link": 1, "cost": 1}


def test_a_figure_that_cannot_be_measured_is_nominal_and_not_kept(counted, monkeypatch):
    from tileblas.runtime import Runtime

    def broken(self, *a, **kw):
        raise RuntimeError("no pinned memory")

    monkeypatch.setattr(_gpu.GPUDevice, "_measure_host_link", broken)
    with Runtime(devices="gpu:1") as rt:
        assert rt.devices[0].host_link_bytes_s == _gpu._HOST_LINK_BYTES_S
    path = _figures.figures_path()
    kept = json.loads(path.read_text())["figures"] if path.exists() else {}
    assert not [k for k in kept if k.startswith("host link")]


def _cli(*args):
    from tileblas.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(list(args))
    return rc, out.getvalue()


def test_tune_gpus_measures_them_again_and_reset_removes_them(counted, monkeypatch, tmp_path):
    from tileblas.runtime import Runtime

    monkeypatch.setenv("TILEBLAS_PATHS", str(tmp_path / "paths.json"))
    monkeypatch.setenv("TILEBLAS_MODEL_DB", str(tmp_path / "models.sqlite"))
    with Runtime(devices="gpu:1") as rt:
        key = rt.devices[0].figures_key
        _dispatch._kept_call_cost(rt)
    path = _figures.figures_path()
    path_kept = json.loads(path.read_text())["figures"]
    other = key.replace("stand-in", "another GPU")
    path_kept[f"host link | {other}"] = 1.0  # not this machine's: left alone
    path.write_text(json.dumps({"schema": _figures.SCHEMA, "figures": path_kept}))
    _fresh_process()
    rc, text = _cli("tune", "--gpus")
    assert rc == 0, text
    assert "measuring the figures of 1 GPU(s) again (4 kept figure(s) replaced" in text
    assert "gpu0: " in text and "host link" in text and "dgemm 2048 20 ms (model 9 ms)" in text
    assert f"kept in {path}" in text
    assert counted.seen == {"link": 2, "cost": 2}
    kept = json.loads(path.read_text())["figures"]
    assert kept[f"host link | {other}"] == 1.0 and f"host link | {key}" in kept
    rc, text = _cli("tune", "--gpus", "--dry-run")
    assert rc == 2 and "does not take --dry-run" in text
    rc, text = _cli("tune", "--reset")
    assert rc == 0 and f"removed {path}" in text and not path.exists()


def test_tune_gpus_where_the_file_cannot_be_written_says_so(counted, monkeypatch):
    from tileblas.runtime import Runtime

    path = _figures.figures_path()
    with Runtime(devices="gpu:1"):
        pass
    assert path.exists()

    def refused(*args, **kwargs):  # as a read-only directory answers (root writes into those)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_figures, "_write_locked", refused)
    rc, text = _cli("tune", "--gpus")
    assert rc == 1 and text.startswith(f"error: {path} cannot be written") and "TILEBLAS_GPU_FIGURES" in text


def test_tune_gpus_without_a_gpu_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    rc, text = _cli("tune", "--gpus")
    assert rc == 1 and text.startswith("no GPU to measure: ") and "tileblas[gpu]" in text


def test_two_processes_keeping_figures_at_once_lose_none(tmp_path):
    """The file is rewritten whole under a lock: eight processes each keeping a figure of their own at the
    same moment leave all eight, and a process after reads them without measuring."""
    path = tmp_path / "gpus.json"
    code = textwrap.dedent("""
        import sys, time
        from tileblas.devices import _figures
        time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
        assert _figures.measured("figure " + sys.argv[1], lambda: float(sys.argv[1])) == float(sys.argv[1])
    """)
    env = {**os.environ, "TILEBLAS_GPU_FIGURES": str(path), "PYTHONPATH": str(ROOT / "src")}
    import time

    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i), str(start)], env=env) for i in range(8)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    kept = json.loads(path.read_text())["figures"]
    assert kept == {f"figure {i}": float(i) for i in range(8)}
    read = subprocess.run([sys.executable, "-c", "from tileblas.devices import _figures\n"
                           "print(_figures.measured('figure 5', lambda: 1 / 0))"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert read.returncode == 0 and read.stdout.strip() == "5.0", read.stderr
