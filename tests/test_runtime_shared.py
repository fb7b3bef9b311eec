"""The shared path: mid-size calls on host workers only run as one call on all their BLAS threads."""

from __future__ import annotations

import numpy as np
import pytest

import tileblas


def _operands(name, n, rng):
    a = rng.standard_normal((n, n))
    if name in ("trmm", "trsm"):
        a = np.tril(a) + n * np.eye(n)
    return np.asfortranarray(a), np.asfortranarray(rng.standard_normal((n, n)))


def _call(rt, name, a, c):
    if name == "gemm":
        rt.gemm(1.0, a, a.T, 0.5, c)
        return None
    if name == "syrk":
        rt.syrk(1.0, a, 0.5, c, uplo="L")
        return None
    getattr(rt, name)(1.5, a, c, side="L", uplo="L")
    return None


def _expected(name, a, c0):
    if name == "gemm":
        return a @ a.T + 0.5 * c0
    if name == "syrk":
        return np.tril(a @ a.T + 0.5 * c0) + np.triu(c0, 1)
    if name == "trmm":
        return 1.5 * np.tril(a) @ c0
    return np.linalg.solve(np.tril(a), 1.5 * c0)


@pytest.mark.parametrize("name", ["gemm", "syrk", "trmm", "trsm"])
def test_mid_size_calls_on_host_workers_take_the_shared_path(name):
    rng = np.random.default_rng(1)
    a, c0 = _operands(name, 600, rng)
    with tileblas.Runtime(devices=2) as rt:
        c = c0.copy(order="F")
        _call(rt, name, a, c)
        prof = rt.last_profile()
        assert prof.path == "shared"
        assert np.allclose(c, _expected(name, a, c0), rtol=1e-10, atol=1e-9)
        assert rt.shared_flops is None  # the path policy decides (tileblas.policy._paths)


def test_shared_kernel_runs_on_the_workers_threads_together():
    dev = tileblas.devices.cpu.CPUDevice(0, threads=1)
    assert dev.shared_kernel("gemm", 1) is dev.kernel("gemm")
    wide = dev.shared_kernel("gemm", 2)
    assert wide is not dev.kernel("gemm") and wide is dev.shared_kernel("gemm", 2)
    a = np.asfortranarray(np.random.default_rng(2).standard_normal((300, 200)))
    c = np.zeros((300, 300), order="F")
    wide(1.0, a, a.T, 0.0, c)
    assert np.allclose(c, a @ a.T)
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        dev.shared_kernel("nope", 2)


@pytest.mark.parametrize("kwargs, devices", [
    ({"shared_flops": 0}, 2),        # turned off
    ({"deterministic": True}, 2),    # off by default in deterministic mode
    ({"shared_flops": 0}, 1),        # one worker, explicit crossover: nothing to share
    ({}, "cpu:1,sim:1"),             # a device with its own memory
])
def test_tiled_where_the_shared_path_does_not_apply(kwargs, devices):
    rng = np.random.default_rng(3)
    a, c0 = _operands("gemm", 600, rng)
    with tileblas.Runtime(devices=devices, **kwargs) as rt:
        c = c0.copy(order="F")
        _call(rt, "gemm", a, c)
        assert rt.last_profile().path in ("tiled", "split-k")
        assert np.allclose(c, _expected("gemm", a, c0))


def test_a_named_tile_size_and_large_calls_stay_tiled():
    rng = np.random.default_rng(4)
    a, c0 = _operands("gemm", 600, rng)
    with tileblas.Runtime(devices=2) as rt:
        c = c0.copy(order="F")
        rt.gemm(1.0, a, a.T, 0.5, c, tile_size=200)
        assert rt.last_profile().path == "tiled"
        assert np.allclose(c, _expected("gemm", a, c0))
    with tileblas.Runtime(devices=2, shared_flops=2.0 * 300**3) as rt:
        c = c0.copy(order="F")
        _call(rt, "gemm", a, c)
        assert rt.last_profile().path == "tiled"
        assert np.allclose(c, _expected("gemm", a, c0))


def test_a_failed_shared_call_leaves_the_runtime_working():
    with tileblas.Runtime(devices=2) as rt:
        a = np.ones((600, 600), order="F")
        with pytest.raises(ValueError):
            rt.gemm(1.0, a, np.ones((500, 600), order="F"), 0.0, np.zeros((600, 600), order="F"))
        c = np.zeros((600, 600), order="F")
        rt.gemm(1.0, a, a, 0.0, c)
        assert rt.last_profile().path == "shared" and np.all(c == 600.0)


@pytest.mark.parametrize("bad", [-1.0, "many", True, float("nan")])
def test_bad_shared_flops_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="shared_flops"):
        tileblas.Runtime(devices=2, shared_flops=bad)
