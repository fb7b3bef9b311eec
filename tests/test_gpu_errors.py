"""What a GPU spec says on a machine that cannot run it: without CuPy, the extra to install; with CuPy but
no usable device (no driver, a driver too old), CUDA's own error.  ``Runtime``, ``tileblas info`` and
``tileblas trace`` alike; none needs a GPU."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from _cupy_standin import install

from tileblas.runtime import Runtime

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def no_cupy(monkeypatch):
    """CuPy absent (``import cupy`` raises ModuleNotFoundError), whatever this machine has."""
    for name in ("cupy", "cupyx", "cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.libs",
                 "cupy_backends.cuda.libs.cublas"):
        monkeypatch.setitem(sys.modules, name, None)


@pytest.fixture()
def info_gpu_part(monkeypatch):
    """``tileblas info`` with its Level-3 paths section left out (these tests read its GPU part; the paths
    have tests of their own)."""
    from tileblas.cli import _core

    monkeypatch.setattr(_core, "paths_info", lambda: {})
    monkeypatch.setattr(_core, "_print_paths", lambda p: None)


def _extras() -> dict[str, str]:
    """pyproject.toml's optional dependencies that install CuPy: extra -> requirement."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return {m.group(1): m.group(2) for m in re.finditer(r'^([\w-]+)\s*=\s*\["(cupy[^"]*)"\]', section, re.M)}


def test_the_install_hint_names_the_projects_cupy_extras():
    from tileblas.kernels._cuda import INSTALL_HINT

    extras = _extras()
    assert extras.get("gpu", "").startswith("cupy-cuda13x") and extras.get("gpu-cuda12", "").startswith("cupy-cuda12x")
    for extra in extras:
        assert f"'tileblas[{extra}]'" in INSTALL_HINT


@pytest.mark.parametrize("spec", ["gpu:1", "gpu:1,cpu:2", "cpu:2,gpu:1", "gpu:2"])
def test_a_gpu_spec_without_cupy_names_the_extra_to_install(no_cupy, monkeypatch, spec):
    from tileblas.devices import DeviceError, GPUUnavailableError
    from tileblas.devices.cpu import CPUDevice

    closed = []
    monkeypatch.setattr(CPUDevice, "close", lambda self: closed.append(self.name))
    with pytest.raises(GPUUnavailableError) as info:
        Runtime(spec)
    err = info.value
    assert type(err) is not ModuleNotFoundError and isinstance(err, (ImportError, DeviceError))
    assert "pip install 'tileblas[gpu]'" in str(err) and "'tileblas[gpu-cuda12]'" in str(err)
    assert sorted(closed) == (["cpu0", "cpu1"] if spec.startswith("cpu") else [])  # none left open


def test_info_without_cupy_names_the_extra(no_cupy, info_gpu_part, capsys):
    from tileblas.cli import main
    from tileblas.cli._core import info

    g = info()["gpu"]
    assert not g["available"] and "pip install 'tileblas[gpu]'" in g["note"]
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"GPU +none \(.*pip install 'tileblas\[gpu\]'", out)


def test_trace_on_a_gpu_spec_without_cupy_is_a_clear_error(no_cupy, capsys, tmp_path):
    from tileblas.cli import main

    rc = main(["trace", "gemm", "--n", "8", "--devices", "gpu:1", "--no-plot", "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert rc == 2 and "tileblas trace: error:" in err and "pip install 'tileblas[gpu]'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("spec", ["gpu:1x2", "gpu:2x4"])
def test_a_gpu_spec_with_a_thread_count_is_refused_by_name(no_cupy, spec):
    with pytest.raises(ValueError, match=r"threads.*cpu:1x2"):
        Runtime(spec)  # said before CuPy is needed: the spec is wrong on any machine


def test_cupy_without_a_usable_device_says_so(monkeypatch, info_gpu_part, capsys, tmp_path):
    from tileblas.cli import main
    from tileblas.cli._core import info
    from tileblas.devices import GPUUnavailableError

    sim = install(monkeypatch, devices=1)
    sim.state["driver_error"] = "cudaErrorInsufficientDriver: CUDA driver version is insufficient"
    with pytest.raises(GPUUnavailableError, match="CuPy stand-in is installed, but CUDA has no usable GPU") as exc:
        Runtime("gpu:1")
    assert not isinstance(exc.value, ImportError) and "cudaErrorInsufficientDriver" in str(exc.value)
    g = info()["gpu"]
    assert not g["available"] and "cudaErrorInsufficientDriver" in g["note"]
    rc = main(["trace", "gemm", "--n", "8", "--devices", "gpu:1", "--no-plot", "--out", str(tmp_path / "t")])
    assert rc == 2 and "no usable GPU" in capsys.readouterr().err
    sim.state["driver_error"] = None
    sim.devices = 0
    with pytest.raises(GPUUnavailableError, match="sees no GPU"):
        Runtime("gpu:1")


def test_info_with_cupy_lists_the_devices_and_where_the_routines_come_from(monkeypatch, info_gpu_part, capsys):
    from tileblas.cli import main
    from tileblas.cli._core import info

    install(monkeypatch, devices=2)
    g = info()["gpu"]
    assert g["available"] and g["devices"] == ["stand-in", "stand-in"]
    assert "dgemm" in g["cublas"]["cupy_binds"] and g["fallbacks"] == {}
    assert main(["info"]) == 0
    assert re.search(r"GPU +stand-in, stand-in", capsys.readouterr().out)
