"""GPU devices (tileblas.devices.gpu) in the tile runtime.

Tests marked ``gpu`` need CuPy and a CUDA device and are skipped cleanly otherwise.  The others run the
same GPUDevice code against a stand-in ``cupy`` whose memory is host memory and whose cuBLAS is OpenBLAS
behind cuBLAS's column-major, pointer-based signatures: that checks the argument mapping of every
cuBLAS call (flags, leading dimensions, real scalars of herk/her2k, in-place trmm), heap views, pinned
staging, deferred device-to-host unpacking and the timeline, not CUDA itself.
"""

from __future__ import annotations

import ctypes
import sys
import types

import numpy as np
import pytest
from _cupy_standin import c_library, install
from _helpers import bench_script

from tileblas.kernels import _openblas
from tileblas.devices import CPUDevice
from tileblas.runtime import Runtime

RNG = np.random.default_rng(3)


def rnd(shape, dt):
    x = RNG.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return np.asfortranarray(x.astype(dt))


def check_routines(rt, n=96, tile=32):
    """A call of every Level-3 routine on rt, checked against NumPy."""
    for dt in (np.float64, np.complex128, np.float32):
        tol = 1e-3 if dt == np.float32 else 1e-10
        cplx = np.dtype(dt).kind == "c"
        a, b, c = rnd((n, n), dt), rnd((n, n), dt), rnd((n, n), dt)

        def ok(x, ref, mask=None):
            if mask is not None:
                x, ref = x[mask], ref[mask]
            return np.abs(x - ref).max() <= tol * max(1, np.abs(ref).max())

        c1 = c.copy(order="F")
        rt.gemm(0.5, a, b, 2.0, c1, transa="T", transb="N", tile_size=tile)
        assert ok(c1, 0.5 * a.T @ b + 2.0 * c), dt
        c1 = c.copy(order="F")
        rt.symm(1.5, a, b, 0.5, c1, side="R", uplo="L", tile_size=tile)
        s = np.tril(a) + np.tril(a, -1).T
        assert ok(c1, 1.5 * b @ s + 0.5 * c), dt
        up = np.triu(np.ones((n, n), bool))
        c1 = c.copy(order="F")
        rt.syrk(1.5, a, 0.5, c1, uplo="U", trans="N", tile_size=tile)
        assert ok(c1, 1.5 * a @ a.T + 0.5 * c, up) and np.array_equal(c1[~up], c[~up]), dt
        c1 = c.copy(order="F")
        rt.syr2k(1.5, a, b, 0.5, c1, uplo="U", trans="T", tile_size=tile)
        assert ok(c1, 1.5 * (a.T @ b + b.T @ a) + 0.5 * c, up), dt
        if cplx:
            h = np.asfortranarray(c + c.conj().T)
            c1 = h.copy(order="F")
            rt.herk(1.5, a, 0.5, c1, uplo="U", trans="C", tile_size=tile)
            assert ok(c1, 1.5 * a.conj().T @ a + 0.5 * h, up), dt
            c1 = h.copy(order="F")
            al = 1.0 - 0.5j
            rt.her2k(al, a, b, 0.5, c1, uplo="U", trans="N", tile_size=tile)
            assert ok(c1, al * a @ b.conj().T + np.conj(al) * b @ a.conj().T + 0.5 * h, up), dt
            c1 = c.copy(order="F")
            rt.hemm(1.0, a, b, 0.0, c1, side="L", uplo="U", tile_size=tile)
            hm = np.triu(a, 1) + np.triu(a, 1).conj().T + np.diag(np.diag(a).real)
            assert ok(c1, hm @ b), dt
        t = np.asfortranarray(a / n + 2 * np.eye(n, dtype=dt))
        b1 = b.copy(order="F")
        rt.trmm(0.5, t, b1, side="L", uplo="U", transa="N", diag="N", tile_size=tile)
        assert ok(b1, 0.5 * np.triu(t) @ b), dt
        b1 = b.copy(order="F")
        rt.trsm(2.0, t, b1, side="R", uplo="L", transa="T", diag="U", tile_size=tile)
        lt = np.tril(t, -1) + np.eye(n)
        assert ok(b1 @ lt.T, 2.0 * b), dt


# ------------------------------------------------------------------------------- stand-in CuPy


@pytest.fixture()
def stand_in(monkeypatch):
    """The strict CuPy stand-in of tests/_cupy_standin.py (two devices); the test gets its state."""
    return install(monkeypatch, devices=2)


def test_gpu_device_with_stand_in_cupy(stand_in):
    from tileblas.devices.gpu import GPUDevice, gpu_count

    assert gpu_count() == 2
    devs = [GPUDevice(0, memory=96 * 96 * 16 * 3 // 4), GPUDevice(1, memory=96 * 96 * 16 * 3 // 4)]
    with Runtime(devs) as rt:
        check_routines(rt)
        st = rt.stats()["memory"]
        p = rt.last_profile()
    assert sum(c.get("evictions", 0) for c in st.values()) > 0  # capped: out of core
    assert sum(c.get("l2_hits", 0) for c in st.values()) > 0  # peer copies
    for name in ("dgemm", "dsymm", "dsyrk", "dsyr2k", "dtrmm", "dtrsm", "zherk", "zher2k", "zhemm", "sgemm"):
        assert stand_in.calls.get(name, 0) > 0, name  # every routine went through its cuBLAS call
    assert any(d.compute_s > 0 for d in p.devices)


def test_gpu_device_beside_cpu_workers_with_stand_in(stand_in):
    from tileblas.devices.gpu import GPUDevice

    with Runtime([GPUDevice(0, memory=1 << 20, streams=2), CPUDevice(0)]) as rt:
        check_routines(rt, n=64)
        p = rt.last_profile()
    assert p.devices[1].tasks > 0 or p.devices[0].tasks > 0


def test_gpu_device_arguments_with_stand_in(stand_in):
    from tileblas.devices.gpu import GPUDevice

    with pytest.raises(ValueError, match="index"):
        GPUDevice(5)
    with pytest.raises(ValueError, match="memory"):
        GPUDevice(0, memory=1 << 40)
    d = GPUDevice(0, memory=1 << 16)
    with pytest.raises(ValueError, match="outside"):
        d.view(1 << 16, (4, 4), np.float64)
    assert not d.can_access_peer(d)
    d.close()


def test_gpu_device_close_gives_memory_back_with_stand_in(stand_in):
    from tileblas.devices._base import DeviceError
    from tileblas.devices.gpu import GPUDevice

    cp = sys.modules["cupy"]
    d = GPUDevice(0, memory=1 << 20, streams=2)
    assert 1e9 <= d.host_link_bytes_s <= 1e12  # measured (clamped to a plausible range)
    assert d.transfer_seconds(1 << 20) == pytest.approx(1e-5 + (1 << 20) / d.host_link_bytes_s)
    with Runtime([d]) as rt:
        check_routines(rt, n=64)
    assert d._chunk is not None  # a device passed as an object stays open for its owner
    freed = cp._pools["device"].freed, cp._pools["pinned"].freed
    d.close()
    assert d._chunk is None and d._handles == []
    assert cp._pools["device"].freed > freed[0] and cp._pools["pinned"].freed > freed[1]
    with pytest.raises(DeviceError, match="closed"):
        d.view(0, (4, 4), np.float64)
    d.close()  # twice is fine
    cp._state["free"] = 256 << 20  # keep the default tile memory of a spec-made device small
    rt = Runtime("gpu:1")
    (own,) = rt.devices
    rt.shutdown()  # a device the runtime made from a spec is the runtime's to close
    assert own._chunk is None


def test_gpu_device_memory_errors_name_the_cause_with_stand_in(stand_in):
    from tileblas.devices._base import DeviceError
    from tileblas.devices.gpu import GPUDevice

    cp = sys.modules["cupy"]
    cp._state["free"] = 10 << 20  # another library holds the rest
    with pytest.raises(DeviceError, match="10485760 bytes free"):
        GPUDevice(0)
    cp._state["free"] = 1 << 30
    cp._state["fail_alloc"] = True
    with pytest.raises(DeviceError, match="memory=1048576"):
        GPUDevice(0, memory=1 << 20)


def test_peer_access_already_enabled_is_read_from_the_status():
    from tileblas.devices.gpu import _already_enabled

    class CUDARuntimeError(RuntimeError):
        def __init__(self, status, msg):
            super().__init__(msg)
            self.status = status

    assert _already_enabled(CUDARuntimeError(704, "cudaErrorPeerAccessAlreadyEnabled"))
    # another error whose text happens to contain 704 is a failure, not "already enabled"
    assert not _already_enabled(CUDARuntimeError(1, "invalid value 704"))
    assert _already_enabled(RuntimeError("cudaErrorPeerAccessAlreadyEnabled: peer access is already enabled"))


def test_routines_cupy_does_not_bind_come_from_the_c_library(stand_in, monkeypatch):
    from tileblas.devices.gpu import GPUDevice
    from tileblas.kernels import _cuda

    # CuPy 14 binds gemm, syrk and trsm only: take the others away from the stand-in's bindings
    cb = sys.modules["cupy_backends.cuda.libs.cublas"]
    gone = [p + r for p in "sdcz" for r in ("symm", "syr2k", "trmm")] + \
        [p + r for p in "cz" for r in ("hemm", "herk", "her2k")]
    monkeypatch.setitem(_cuda._LIB, "lib", c_library(stand_in, gone))
    for name in gone:
        monkeypatch.delattr(cb, name)
    with Runtime([GPUDevice(0, memory=1 << 22, streams=2)]) as rt:
        check_routines(rt, n=64)
    for name in ("dsymm", "dsyr2k", "dtrmm", "zhemm", "zherk", "zher2k", "ztrmm", "strmm", "ssymm"):
        assert stand_in.calls.get(name, 0) > 0, name  # ran as the cuBLAS routine, not a CuPy composition


def test_c_library_routines_check_their_status(monkeypatch):
    from tileblas.kernels import _cuda

    seen = []

    def dtrmm(*args):
        seen.append(args)
        return 7

    monkeypatch.setitem(_cuda._LIB, "lib", types.SimpleNamespace(cublasDtrmm_v2=dtrmm))
    b = _cuda._Bindings(types.SimpleNamespace(dgemm="cupy's own"))
    assert b.dgemm == "cupy's own"  # what CuPy binds is CuPy's
    with pytest.raises(_cuda.CublasError, match="cublasDtrmm_v2 returned CUBLAS_STATUS_INVALID_VALUE"):
        b.dtrmm(1, 0, 1, 0, 0, 4, 4, 10, 20, 4, 30, 4, 30, 4)
    assert seen[0][0] == 1 and len(seen[0]) == 14 and dtrmm.argtypes[0] is ctypes.c_void_p
    with pytest.raises(AttributeError):
        b.dpotrf  # not a Level-3 routine of the table
    # no C library at all: an AttributeError, so that callers fall back to CuPy compositions
    monkeypatch.setattr(_cuda, "_LIB", {})

    def missing():
        raise _cuda.CublasError("cuBLAS C library not found")

    monkeypatch.setattr(_cuda, "_find_libcublas", missing)
    with pytest.raises(AttributeError, match="not found"):
        _cuda._Bindings(types.SimpleNamespace()).zherk


def test_gpu_benchmark_runs_every_part_on_the_stand_in(stand_in, tmp_path):
    import json

    bench = bench_script("bench_gpu")
    sys.modules["cupy"]._state["free"] = 256 << 20  # small default tile memories
    rc = bench.main(["--sizes", "64", "--routine-n", "48", "--ooc-n", "96", "--trials", "1", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "bench_gpu.json").read_text())
    assert rc == 0 and res["errors"] == {}
    assert {r["dtype"] for r in res["incore"]} == {"float64", "float32"}
    assert all(r["max_rel_error"] < 1e-5 for r in res["incore"]) and res["ooc"]["max_rel_error"] < 1e-12
    assert len(res["routines"]) == 12 and all(r["ratio"] > 0 for r in res["routines"])
    assert 0.0 <= res["hetero"]["cpu_flop_share"] <= 1.0
    assert (tmp_path / "gpu_ooc_trace.json").stat().st_size > 100


def test_gpu_benchmark_quick_part_on_the_stand_in(monkeypatch, tmp_path):
    """bench_gpu.py --parts quick (gpu_suite.sh's benchmark) on the stand-in: every number made, every
    result checked against its reference."""
    import json

    install(monkeypatch, devices=1, total=4 << 30)  # room for the 1 GiB out-of-core tile memory
    bench = bench_script("bench_gpu")
    rc = bench.main(["--parts", "quick", "--quick-n", "96", "--trials", "1", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "bench_gpu.json").read_text())
    assert rc == 0 and res["errors"] == {}
    assert [r["what"] for r in res["quick_gemm"]] == ["incore", "ooc_1GiB"]
    assert all(r["max_rel_error"] < 1e-12 and r["ratio"] > 0 for r in res["quick_gemm"])
    assert res["quick_gemm"][1]["memory"] == 1 << 30
    assert [r["kind"] for r in res["quick_trmm_trsm"]] == ["trmm", "trsm"]
    assert all(r["diff_vs_cublas"] < 1e-12 and r["residual"] < 1e-12 for r in res["quick_trmm_trsm"])


def test_import_does_not_load_cupy():
    import subprocess

    code = "import sys, tileblas, tileblas.devices, tileblas.runtime; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------- needs a GPU


@pytest.mark.gpu
def test_gpu_every_routine_out_of_core(gpus):
    from tileblas.devices.gpu import GPUDevice

    devs = [GPUDevice(i, memory=96 * 96 * 16 * 3 // 4) for i in range(gpus)]
    with Runtime(devs) as rt:
        check_routines(rt)
        st = rt.stats()["memory"]
    assert sum(c.get("evictions", 0) for c in st.values()) > 0


@pytest.mark.gpu
def test_gpu_with_cpu_workers_and_both_policies(gpus):
    from tileblas.devices.gpu import GPUDevice

    for policy in ("cache", "on-demand"):
        with Runtime([GPUDevice(0, memory=64 << 20), CPUDevice(0)], memory_policy=policy) as rt:
            check_routines(rt, n=256, tile=64)
