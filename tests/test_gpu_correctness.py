"""The GPU code's stream order, device contexts, layouts, error recovery and fallbacks, on the strict CuPy
stand-in of ``_cupy_standin.py`` (no GPU needed; the stand-in refuses what CUDA would refuse and reports a
missing stream order as :class:`~_cupy_standin.Hazard`).

The first tests check the stand-in itself: that it finds the bugs the later tests guard against.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings

import numpy as np
import pytest
from _cupy_standin import CudaError, Hazard, LayoutError, c_library, install

RNG = np.random.default_rng(7)


def rnd(shape, dt=np.float64):
    x = RNG.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return np.asfortranarray(x.astype(dt))


@pytest.fixture()
def sim(monkeypatch):
    return install(monkeypatch, devices=2)


def _gemm_on(sim, stream, a, b, c, handle=None):
    """dgemm c = a @ b through the stand-in's CuPy binding, on ``stream`` (CuPy's current stream)."""
    cb = sim.cublas
    h = handle if handle is not None else sim.cp.cuda.device.get_cublas_handle()
    al, be = np.array(1.0), np.array(0.0)
    n = c.shape[0]
    with stream:
        cb.dgemm(h, 0, 0, n, n, n, al.ctypes.data, a.data.ptr, n, b.data.ptr, n, be.ctypes.data, c.data.ptr, n)


# ------------------------------------------------------------------------------- the stand-in


def test_stand_in_finds_a_copy_on_the_null_stream_read_by_another_stream_without_a_wait(sim):
    cp = sim.cp
    st = cp.cuda.Stream(non_blocking=True)
    a = cp.asarray(rnd((8, 8)))  # copied on the legacy null stream
    b = cp.asfortranarray(cp.asarray(rnd((8, 8))))
    c = cp.empty((8, 8), order="F")
    with pytest.raises(Hazard, match="asarray"):
        _gemm_on(sim, st, a, b, c)
    # ordered: an event wait, a blocking stream (implicit order with the null stream), a host sync
    ev = cp.cuda.Event()
    ev.record(cp.cuda.Stream.null)
    st.wait_event(ev)
    _gemm_on(sim, st, a, b, c)
    a2 = cp.asarray(rnd((8, 8)))
    _gemm_on(sim, cp.cuda.Stream(non_blocking=False), a2, b, cp.empty((8, 8), order="F"))
    a3 = cp.asarray(rnd((8, 8)))
    cp.cuda.Stream.null.synchronize()
    _gemm_on(sim, st, a3, b, cp.empty((8, 8), order="F"))


def test_stand_in_finds_a_write_after_read_across_streams(sim):
    cp = sim.cp
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    a, b = cp.asarray(rnd((8, 8))), cp.asarray(rnd((8, 8)))
    c = cp.empty((8, 8), order="F")
    cp.cuda.Device().synchronize()
    _gemm_on(sim, s1, a, b, c)  # reads a on s1
    with pytest.raises(Hazard, match="wrote|read"):
        with s2:
            a[...] = 0  # overwrites a on s2 while s1 may still read it


def test_stand_in_refuses_a_c_ordered_array_where_cublas_reads_column_major(sim):
    cp = sim.cp
    a = cp.asarray(rnd((8, 6)), order="C")
    b, c = cp.asfortranarray(cp.asarray(rnd((6, 8)))), cp.empty((8, 8), order="F")
    cp.cuda.Device().synchronize()
    h = cp.cuda.device.get_cublas_handle()
    al, be = np.array(1.0), np.array(0.0)
    with pytest.raises(LayoutError, match="column-major"):
        sim.cublas.dgemm(h, 0, 0, 8, 8, 6, al.ctypes.data, a.data.ptr, 8, b.data.ptr, 6, be.ctypes.data,
                         c.data.ptr, 8)


def test_stand_in_refuses_events_and_kernels_outside_their_device(sim):
    cp = sim.cp
    with cp.cuda.Device(1):
        st1 = cp.cuda.Stream(non_blocking=True)
    ev = cp.cuda.Event()  # made with device 0 current
    with pytest.raises(CudaError, match="one device"):
        ev.record(st1)
    with pytest.raises(RuntimeError, match="current device"):
        with st1:  # as CuPy: a stream is made current only with its device current
            pass
    with cp.cuda.Device(1):
        a = cp.asfortranarray(cp.asarray(rnd((4, 4))))
        cp.cuda.Device().synchronize()
    h0 = cp.cuda.device.get_cublas_handle()  # device 0's
    sim.cublas.setStream(h0, st1.ptr)
    al = np.array(1.0)
    with pytest.raises(CudaError, match="current"):  # a kernel on a stream of device 1, device 0 current
        c_library(sim, ["dtrmm"]).cublasDtrmm_v2(h0, 0, 0, 0, 0, 4, 4, al.ctypes.data, a.data.ptr, 4,
                                                 a.data.ptr, 4, a.data.ptr, 4)
    with cp.cuda.Device(1):
        h = sim.cublas.create()
    with pytest.raises(CudaError, match="cublasDestroy"):
        sim.cublas.destroy(h)  # with device 0 current


# ------------------------------------------------------------------------------- GPUDevice


def test_plain_interface_orders_copies_and_kernels_on_stream_0(sim):
    """to_device / empty / kernel / to_host (the asynchronous API's calls): a copy on the legacy null stream
    read by a kernel on non-blocking stream 0 without a wait was a race (gpu-review: null-stream race)."""
    from tileblas.devices.gpu import GPUDevice

    d = GPUDevice(0, memory=1 << 22, streams=2)
    x, y = rnd((16, 16)), rnd((16, 16))
    a, b = d.to_device(x), d.to_device(y)
    c = d.empty((16, 16), np.float64)
    d.kernel("gemm")(1.0, a, b, 0.0, c)
    out = np.empty((16, 16), order="F")
    d.to_host(c, out)
    np.testing.assert_allclose(out, x @ y, atol=1e-12)
    d.close()


def test_async_api_on_a_gpu_device(sim):
    """bench_async part 4's check (bench_async.py:351-357) on the stand-in: every result right, no race."""
    from tileblas import asyncapi as aa
    from tileblas.devices.gpu import GPUDevice

    gpu = GPUDevice(0, memory=1 << 24)
    x, y = rnd((48, 48)), rnd((48, 48))
    with aa.Executor([gpu]) as ex:
        for _ in range(3):
            a, b = ex.handle(x, copy=False), ex.handle(y, copy=False)
            c = ex.empty((48, 48))
            aa.gemm(1.0, a, b, 0.0, c).result()
            np.testing.assert_allclose(c.get(), x @ y, atol=1e-10)
    gpu.close()


def test_events_are_made_in_their_device_context(sim):
    """record() made the event with whatever device was current: on GPU 1 its record failed."""
    from tileblas.devices.gpu import GPUDevice

    d0, d1 = GPUDevice(0, memory=1 << 20, streams=2), GPUDevice(1, memory=1 << 20, streams=2)
    ev = d1.record(1)
    d0.wait(0, ev)  # a stream may wait for another device's event
    ev.synchronize()
    assert ev.query()
    d0.close()
    d1.close()


def _tile(d, offset, shape, host=None):
    t = d.view(offset, shape, np.float64)
    if host is not None:
        d.h2d(t, host, 0)
    return t


def test_a_failed_sync_leaves_no_stale_work(sim):
    """A failing synchronisation (or elapsed-time query) left the stream's deferred copies, marks and
    reference behind: later syncs unpacked stale tiles and failed again on the same events."""
    from tileblas.devices.gpu import GPUDevice

    d = GPUDevice(0, memory=1 << 20, streams=1)
    x = rnd((8, 8))
    t = _tile(d, 0, (8, 8), x)
    d.sync(0)
    lost = np.full((8, 8), 7.0, order="F")
    d.d2h(t, lost, 0)
    sim.fail_next_sync(d._streams[0])
    with pytest.raises(CudaError):
        d.sync(0)
    lost[...] = -1.0  # the caller gave up on this copy: a later sync must not write into it
    got = np.empty((8, 8), order="F")
    d.d2h(t, got, 0)
    d.sync(0)
    assert (lost == -1.0).all()
    np.testing.assert_array_equal(got, x)
    # the timeline's events failing: the next sync starts clean
    d.launch("gemm", [1.0, t, t, 0.0, _tile(d, 4096, (8, 8))], {}, 0)
    sim.poison(d._streams[0])
    with pytest.raises(CudaError):
        d.sync(0)
    d.launch("gemm", [1.0, t, t, 0.0, _tile(d, 4096, (8, 8))], {}, 0)
    d.sync(0)
    assert [w for w, *_ in d.timeline(0)][-1:] == ["kernel"]
    d.close()


def test_stream_0_is_safe_to_share_between_threads(sim):
    """The asynchronous API's GPU backend runs kernels on stream 0 while another backend's thread copies a
    handle to the host and synchronises the device: both touch stream 0's marks, reference and deferred
    copies."""
    from tileblas.devices.gpu import GPUDevice

    d = GPUDevice(0, memory=1 << 22, streams=2)
    n = 8
    a, b = d.to_device(rnd((n, n))), d.to_device(rnd((n, n)))
    c = d.empty((n, n), np.float64)
    errors: list = []
    stop = threading.Event()

    def compute():
        try:
            k = d.kernel("gemm")
            for _ in range(300):
                k(1.0, a, b, 0.0, c)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            stop.set()

    def read():
        out = np.empty((n, n), order="F")
        try:
            while not stop.is_set():
                d.to_host(a, out)
                d.synchronize()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        ts = [threading.Thread(target=compute), threading.Thread(target=read), threading.Thread(target=read)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors[0]
    kernels = [iv for iv in d.timeline(0) if iv[0] == "kernel"]
    assert len(kernels) == 300 and all(t0 <= t1 for _, t0, t1 in kernels)
    d.close()


def test_kernel_refuses_a_c_ordered_array_and_reads_views_with_their_leading_dimension(sim):
    """_kernel took lda = shape[0] without looking: a C-ordered array gave a wrong result silently."""
    from tileblas.devices.gpu import GPUDevice

    cp = sim.cp
    d = GPUDevice(0, memory=1 << 20, streams=1)
    x, y = rnd((6, 6)), rnd((6, 6))
    a, b, c = d.to_device(x), d.to_device(y), d.empty((6, 6), np.float64)
    with d.on_stream(0):
        ac = cp.ascontiguousarray(a)
    with pytest.raises(ValueError, match="column-major"):
        d.kernel("gemm")(1.0, ac, b, 0.0, c)
    # a column-major view with a leading dimension larger than its rows is read as such
    big = d.to_device(np.asfortranarray(np.vstack([x, rnd((5, 6))])))
    d.kernel("gemm")(1.0, big[:6], b, 0.0, c)
    out = np.empty((6, 6), order="F")
    d.to_host(c, out)
    np.testing.assert_allclose(out, x @ y, atol=1e-12)
    d.close()


def test_close_synchronizes_the_streams_then_destroys_the_handles_on_the_device(sim):
    from tileblas.devices.gpu import GPUDevice

    before = set(sim.live_handles())
    d = GPUDevice(1, memory=1 << 20, streams=2)
    handles = set(sim.live_handles()) - before
    queues = {s._q().id for s in d._streams}
    d.launch("gemm", [1.0, _tile(d, 0, (4, 4)), _tile(d, 0, (4, 4)), 0.0, _tile(d, 512, (4, 4))], {}, 1)
    n_log = len(sim.log)
    d.close()
    assert not handles & set(sim.live_handles())  # every handle destroyed (not an error swallowed)
    log = sim.log[n_log:]
    first_destroy = min(i for i, e in enumerate(log) if e[0] == "destroy")
    assert queues <= {q for what, q in log[:first_destroy] if what == "sync"}


def test_syncs_block_instead_of_spinning(sim):
    """Stream synchronisations spin on a CPU core; the device waits on blocking events instead."""
    from tileblas.devices.gpu import GPUDevice
    from tileblas.runtime import Runtime

    d = GPUDevice(0, memory=1 << 22, streams=2)
    with Runtime([d]) as rt:
        a, b, c = rnd((64, 64)), rnd((64, 64)), np.zeros((64, 64), order="F")
        rt.gemm(1.0, a, b, 0.0, c, tile_size=32)
    x = d.to_device(a)
    d.kernel("gemm")(1.0, x, x, 0.0, d.empty((64, 64), np.float64))
    d.to_host(x, c)
    d.close()
    assert sim.syncs["spinning"] == 0 and sim.syncs["blocking"] > 0


def test_a_second_device_on_one_gpu_leaves_a_reserve_and_a_failed_allocation_is_retried(monkeypatch):
    from tileblas.devices._base import DeviceError
    from tileblas.devices.gpu import GPUDevice

    total = 1 << 30
    sim = install(monkeypatch, devices=1, total=total)
    d1 = GPUDevice(0, streams=1)
    assert d1.memory_bytes <= 0.8 * total
    free = sim.mem_info(0)[0]
    d2 = GPUDevice(0, streams=1)  # what the first left, less a reserve for cuBLAS and CuPy
    assert d2.memory_bytes <= free - total // 10
    d2.close()
    d1.close()
    sim.state["max_alloc"] = 100 << 20  # the driver refuses what memGetInfo promised (fragmentation)
    d = GPUDevice(0, streams=1)
    assert 64 << 20 <= d.memory_bytes <= 100 << 20
    d.close()
    with pytest.raises(DeviceError, match="memory="):
        GPUDevice(0, memory=200 << 20)  # asked for: no retry with less


def test_timeline_reference_is_taken_before_the_first_wait(sim):
    """The reference event was recorded at the first operation after a sync: after a wait for a late event
    it ran late, and every interval after it was placed too early."""
    from tileblas.devices.gpu import GPUDevice

    d = GPUDevice(0, memory=1 << 20, streams=2)
    t = _tile(d, 0, (4, 4), rnd((4, 4)))
    d.sync(0)
    d.timeline(0)
    sim.delay(d._streams[0], 0.05)  # stream 0 is busy for 50 ms
    ev = d.record(0)
    d.wait(1, ev)
    d.launch("gemm", [1.0, t, t, 0.0, _tile(d, 512, (4, 4))], {}, 1)
    d.sync(1)
    d.sync(0)
    (kernel,) = [iv for iv in d.timeline(1) if iv[0] == "kernel"]
    assert kernel[1] >= ev.ev.t - 1e-3  # (the host clock is read beside the reference, a few us off)
    d.close()


# ------------------------------------------------------------------------------- fallbacks, libcublas


def _unbind(sim, monkeypatch, names):
    from tileblas.kernels import _cuda

    for name in names:
        monkeypatch.delattr(sim.cublas, name)

    def missing():
        raise _cuda.CublasError("cuBLAS C library not found (stand-in)")

    monkeypatch.setattr(_cuda, "_LIB", {})
    monkeypatch.setattr(_cuda, "_find_libcublas", missing)
    monkeypatch.setattr(_cuda, "_FALLBACKS", {})


def test_fallbacks_say_so_once_and_herk_zeroes_the_diagonals_imaginary_part(sim, monkeypatch):
    from tileblas.devices.gpu import GPUDevice, gpu_info
    from tileblas.kernels import _cuda
    from tileblas.runtime import Runtime

    _unbind(sim, monkeypatch, ["zherk", "dtrmm", "dsymm"])
    n = 32
    a = rnd((n, n), np.complex128)
    c0 = rnd((n, n), np.complex128)  # its diagonal has an imaginary part: herk's result has none
    d = GPUDevice(0, memory=1 << 22, streams=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Runtime([d]) as rt:
            for _ in range(2):
                c = c0.copy(order="F")
                rt.herk(1.0, a, 0.5, c, uplo="U", trans="N", tile_size=16)
            t = np.asfortranarray(np.triu(rnd((n, n))) / n + 2 * np.eye(n))
            b = rnd((n, n))
            rt.trmm(1.0, t, b, side="L", uplo="U", tile_size=16)
    ours = [w for w in caught if "CuPy composition" in str(w.message)]
    assert sorted(str(w.message).split(":")[0] for w in ours) == ["gpu0", "gpu0"], [str(w.message) for w in ours]
    assert {"zherk", "dtrmm"} <= set(_cuda.fallbacks())
    assert set(d.describe()["fallbacks"]) == {"zherk", "dtrmm"}
    assert "zherk" in gpu_info()["fallbacks"]
    up = np.triu(np.ones((n, n), bool))
    want = a @ a.conj().T + 0.5 * c0
    np.testing.assert_allclose(c[up], np.where(np.eye(n, dtype=bool), want.real, want)[up], atol=1e-10)
    assert not np.diag(c).imag.any()
    d.close()


def test_cupy_backend_trmm_fallback_says_so(sim, monkeypatch):
    from tileblas.kernels import _cuda
    from tileblas.kernels._gpu_recursive import gpu_recursive

    _unbind(sim, monkeypatch, ["dtrmm"])
    cp = sim.cp
    a, b = cp.asfortranarray(cp.asarray(rnd((20, 20)))), cp.asfortranarray(cp.asarray(rnd((20, 5))))
    with pytest.warns(RuntimeWarning, match="CuPy composition"):
        gpu_recursive("trmm", 1.0, a, b, "L", "U", "N", "N", stop=8)
    assert "dtrmm" in _cuda.fallbacks()


def test_cupy_backend_leaves_cupys_cublas_handle_on_the_default_stream(sim):
    """host_async binds CuPy's per-thread handle to per-call streams that are destroyed on return; the
    handle is left on the legacy default stream, never on a stream that may be gone (CuPy binds it to its
    current stream before each of its own calls anyway)."""
    from tileblas.kernels import _gpu_recursive as g

    cp = sim.cp
    h = cp.cuda.device.get_cublas_handle()
    keep = cp.cuda.Stream(non_blocking=True)
    sim.cublas.setStream(h, keep.ptr)
    a = np.asfortranarray(np.triu(rnd((40, 40))) / 40 + 2 * np.eye(40))
    b = rnd((40, 7))
    g.host_async("trsm", 1.0, a, b.copy(order="F"), "L", "U", "N", "N", stop=8)
    assert sim.handle_stream(h) == 0
    st = cp.cuda.Stream(non_blocking=True)
    a_d, b_d = cp.asfortranarray(cp.asarray(a)), cp.asfortranarray(cp.asarray(b))
    cp.cuda.Device().synchronize()
    sim.cublas.setStream(h, keep.ptr)
    g.gpu_recursive("trmm", 1.0, a_d, b_d, "L", "U", "N", "N", stop=8, stream=st)
    assert sim.handle_stream(h) == 0


def test_the_cublas_handle_is_resolved_before_the_c_symbol(sim, monkeypatch):
    """The C library is looked up once CuPy's handle exists (CuPy has loaded its libcublas by then)."""
    from tileblas.kernels import _cuda
    from tileblas.kernels._gpu_recursive import cublas_native

    order: list = []
    monkeypatch.delattr(sim.cublas, "dtrmm")
    lib = c_library(sim, ["dtrmm"])
    monkeypatch.setattr(_cuda, "_LIB", {})
    monkeypatch.setattr(_cuda, "_find_libcublas", lambda: order.append("library") or lib)
    get = sim.cp.cuda.device.get_cublas_handle
    monkeypatch.setattr(sim.cp.cuda.device, "get_cublas_handle", lambda: order.append("handle") or get())
    cp = sim.cp
    a, b = cp.asfortranarray(cp.asarray(np.eye(4))), cp.asfortranarray(cp.asarray(rnd((4, 2))))
    cp.cuda.Device().synchronize()
    cublas_native("trmm", 1.0, a, b, "L", "U", "N", "N")
    assert order[:2] == ["handle", "library"]


def test_libcublas_is_the_copy_cupys_bindings_are_linked_with():
    """With PyTorch's and CuPy's libcublas both loaded, the first one in the memory map may be the wrong
    one: the library is the one that provides the symbol to CuPy's extension module."""
    from tileblas.kernels import _cuda

    try:
        from numpy._core import _multiarray_umath as ext
    except ImportError:  # NumPy 1
        from numpy.core import _multiarray_umath as ext
    path = _cuda._providing_library(ext.__file__, "memcpy")  # an extension module and a symbol it links
    assert path is not None and path.rsplit("/", 1)[-1].startswith("libc.so")
    assert _cuda._providing_library(ext.__file__, "no_such_symbol_anywhere") is None
    maps = ["7f00-7f01 r-xp 0 08:01 1 /opt/torch/lib/libcublas.so.12",
            "7f02-7f03 r-xp 0 08:01 2 /opt/torch/lib/libcublasLt.so.12",
            "7f04-7f05 r-xp 0 08:01 3 /site/nvidia/cu13/lib/libcublas.so.13"]
    assert _cuda._pick_mapped(maps, 13) == "/site/nvidia/cu13/lib/libcublas.so.13"
    assert _cuda._pick_mapped(maps, 12) == "/opt/torch/lib/libcublas.so.12"
    assert _cuda._pick_mapped(maps[1:2], 13) is None


# ------------------------------------------------------------------------------- needs a GPU: the same on CUDA


@pytest.mark.gpu
def test_gpu_plain_interface_async_api_and_layouts(gpus):
    import cupy as cp

    from tileblas import asyncapi as aa
    from tileblas.devices.gpu import GPUDevice

    d = GPUDevice(0, memory=1 << 26, streams=2)
    x, y = rnd((300, 200)), rnd((200, 100))
    a, b, c = d.to_device(x), d.to_device(y), d.empty((300, 100), np.float64)
    d.kernel("gemm")(1.0, a, b, 0.0, c)
    out = np.empty((300, 100), order="F")
    d.to_host(c, out)
    np.testing.assert_allclose(out, x @ y, atol=1e-10)
    view = np.empty((100, 300)).T  # a host view that is not F-contiguous
    d.to_host(c, view)
    np.testing.assert_allclose(view, x @ y, atol=1e-10)
    with d.on_stream(0):
        ac = cp.ascontiguousarray(a)
    with pytest.raises(ValueError, match="column-major"):
        d.kernel("gemm")(1.0, ac, b, 0.0, c)
    with aa.Executor([d]) as ex:
        for _ in range(3):
            ha, hb, hc = ex.handle(x, copy=False), ex.handle(y, copy=False), ex.empty((300, 100))
            aa.gemm(1.0, ha, hb, 0.0, hc).result()
            np.testing.assert_allclose(hc.get(), x @ y, atol=1e-10)
    if gpus > 1:
        d1 = GPUDevice(1, memory=1 << 24, streams=1)
        ev = d1.record(0)
        d.wait(1, ev)
        ev.synchronize()
        d1.close()
    d.close()
    d.close()


@pytest.mark.gpu
def test_gpu_fallback_compositions_match_cublas(gpus):
    """The CuPy compositions (used where no cuBLAS routine is found) against NumPy, herk's real diagonal."""
    import cupy as cp

    from tileblas.devices.gpu import GPUDevice

    d = GPUDevice(0, memory=1 << 24, streams=1)
    n = 40
    a, c0 = rnd((n, n), np.complex128), rnd((n, n), np.complex128)
    up = np.triu(np.ones((n, n), bool))
    with d.on_stream(0):
        ad, cd = cp.asfortranarray(cp.asarray(a)), cp.asfortranarray(cp.asarray(c0))
        d._fallback("herk", [1.0, ad, 0.5, cd], {"uplo": "U", "trans": "N"})
        got = cp.asnumpy(cd)
    want = a @ a.conj().T + 0.5 * c0
    np.testing.assert_allclose(got[up & ~np.eye(n, dtype=bool)], want[up & ~np.eye(n, dtype=bool)], atol=1e-10)
    np.testing.assert_allclose(np.diag(got), np.diag(want).real, atol=1e-10)
    t = np.triu(rnd((n, n))) / n + 2 * np.eye(n)
    b = rnd((n, 7))
    with d.on_stream(0):
        td, bd = cp.asfortranarray(cp.asarray(t)), cp.asfortranarray(cp.asarray(b))
        d._fallback("trmm", [2.0, td, bd], {"side": "L", "uplo": "U", "transa": "T", "diag": "N"})
        np.testing.assert_allclose(cp.asnumpy(bd), 2.0 * np.triu(t).T @ b, atol=1e-10)
    d.close()


@pytest.mark.gpu
def test_gpu_libcublas_is_cupys_and_has_every_routine(gpus):
    from cupy_backends.cuda.libs import cublas as bindings

    from tileblas.kernels import _cuda

    lib = _cuda._library()
    linked = _cuda._providing_library(bindings.__file__, "cublasCreate_v2")
    if linked is not None:
        assert os.path.realpath(lib._name) == os.path.realpath(linked)
    names = [f"cublas{p.upper()}{r}_v2" for p in "sdcz" for r in _cuda._ARGTYPES if p in "cz" or r[0] != "h"]
    assert [s for s in names if not hasattr(lib, s)] == []


@pytest.mark.gpu
def test_gpu_recursion_gives_cupys_handle_back(gpus):
    import cupy as cp
    from cupy_backends.cuda.libs import cublas

    from tileblas.kernels import _gpu_recursive as g

    # The handle comes back on the legacy default stream (0), never on the stream it had, which may have
    # been destroyed since (CupyBackend._handle); with the pointer mode it had; and CuPy's own calls on
    # its current stream still run on it.
    h = cp.cuda.device.get_cublas_handle()
    keep = cp.cuda.Stream(non_blocking=True)
    cublas.setStream(h, keep.ptr)
    mode = cublas.getPointerMode(h)
    a = np.asfortranarray(np.triu(rnd((300, 300))) / 300 + 2 * np.eye(300))
    b = rnd((300, 20))
    want = np.linalg.solve(np.triu(a), b)
    g.host_async("trsm", 1.0, a, b, "L", "U", "N", "N", stop=64)
    np.testing.assert_allclose(b, want, atol=1e-9)
    assert cublas.getStream(h) == 0
    assert cublas.getPointerMode(h) == mode
    x, y = rnd((64, 64)), rnd((64, 64))
    with keep:
        got = cp.asnumpy(cp.asarray(x) @ cp.asarray(y))
    keep.synchronize()
    np.testing.assert_allclose(got, x @ y, atol=64 * 2 * np.finfo(float).eps * (np.abs(x) @ np.abs(y)).max())


@pytest.mark.gpu
def test_gpu_default_memory_leaves_a_reserve(gpus):
    import cupy as cp

    from tileblas.devices._base import DeviceError
    from tileblas.devices.gpu import GPUDevice

    first = GPUDevice(0, streams=1)
    try:
        with cp.cuda.Device(0):
            free, total = cp.cuda.runtime.memGetInfo()
        assert free >= 0.09 * total
        try:
            second = GPUDevice(0, streams=1)
        except DeviceError as exc:  # too little left: said, not a crash
            assert "memory=" in str(exc)
        else:
            assert second.memory_bytes <= free - 0.1 * total + (1 << 20)
            second.close()
    finally:
        first.close()


# ------------------------------------------------------------------------------- transfers


def test_stand_in_orders_registration_and_2d_copies(sim):
    cp, rt = sim.cp, sim.cp.cuda.runtime
    st = cp.cuda.Stream(non_blocking=True)
    host = rnd((64, 32))
    lo = host.ctypes.data
    rt.hostRegister(lo, host.nbytes, 1)
    with pytest.raises(CudaError, match="AlreadyRegistered"):
        rt.hostRegister(lo + 8, 16, 1)  # any byte of a registered range
    dev = cp.empty((16, 8), order="F")
    rt.memcpy2DAsync(dev.data.ptr, 16 * 8, lo + 8 * (64 * 2 + 4), 64 * 8, 16 * 8, 8, 1, st.ptr)  # host[4:20, 2:10]
    with pytest.raises(Hazard, match="hostUnregister"):
        rt.hostUnregister(lo)  # the copy may still read it
    st.synchronize()
    assert np.array_equal(dev.view(np.ndarray), host[4:20, 2:10])
    with pytest.raises(CudaError, match="Pitch"):
        rt.memcpy2DAsync(dev.data.ptr, 16 * 8, lo, 8, 16 * 8, 8, 1, st.ptr)  # a pitch narrower than a row
    rt.hostUnregister(lo)
    with pytest.raises(CudaError, match="NotRegistered"):
        rt.hostUnregister(lo)
    assert sim.pageable_async == 0
    rt.memcpy2DAsync(dev.data.ptr, 16 * 8, lo, 64 * 8, 16 * 8, 8, 1, st.ptr)  # pageable now: counted
    st.synchronize()
    assert sim.pageable_async == 1 and sim.copies2d == 2


def test_registered_operands_are_copied_in_place_and_unregistered_when_they_die(sim):
    import gc

    from tileblas.devices import _hostmem
    from tileblas.devices.gpu import GPUDevice
    from tileblas.runtime import Runtime

    n = 96
    a, b = rnd((n, n)), np.ascontiguousarray(rnd((n, n)))  # b row-major: its tiles cannot go in place
    c = rnd((n, n))
    ref = 0.5 * a @ b + 2.0 * c
    d = GPUDevice(0, memory=1 << 22, streams=2, register_min=0)
    with Runtime([d]) as rt:
        rt.gemm(0.5, a, b, 2.0, c, tile_size=32)
        assert np.abs(c - ref).max() < 1e-12 * np.abs(ref).max()
        assert len(sim.registered) == 3  # a, b and c, each registered whole, once
        rt.gemm(0.5, a, b, 2.0, c, tile_size=32)  # registered still: no new registration
        assert sum(1 for e in sim.log if e[0] == "register") == 3
    t = d.transfers
    assert t["h2d_direct"] > 0 and t["d2h_direct"] > 0 and t["d2h_packed"] == 0
    assert t["h2d_packed"] == 2 * 9  # b's tiles, each once per call (cached), packed
    assert sim.copies2d == t["h2d_direct"] + t["d2h_direct"] and sim.pageable_async == 0
    assert sim.syncs["spinning"] == 0
    d.close()
    before = len(_hostmem.REGISTRY)
    del a, b, c, rt  # (the runtime's call history refers to the operands)
    gc.collect()
    assert not sim.registered and len(_hostmem.REGISTRY) == before - 3


def test_memory_cuda_will_not_lock_is_packed_on_several_threads(sim, monkeypatch):
    from tileblas.devices.gpu import GPUDevice
    from tileblas.kernels import _cuda
    from tileblas.runtime import Runtime

    sim.state["register_refused"] = True
    monkeypatch.setattr(_cuda, "PACK_SPLIT_BYTES", 4096)  # the 8 KiB tiles here count as large
    parts = []
    real = _cuda.pack

    def spy(dst, src, threads):
        parts.append(real(dst, src, threads))
        return parts[-1]

    monkeypatch.setattr(_cuda, "pack", spy)
    n = 96
    a, b = rnd((n, n)), rnd((n, n))
    c = np.zeros((n, n), order="F")
    d = GPUDevice(0, memory=1 << 22, streams=2, register_min=0, pack_threads=4)
    with Runtime([d]) as rt:
        rt.gemm(1.0, a, b, 0.0, c, tile_size=32)
    d.close()
    assert np.allclose(c, a @ b) and not sim.registered
    assert d.transfers["h2d_direct"] == d.transfers["d2h_direct"] == 0
    assert len(parts) == d.transfers["h2d_packed"] + d.transfers["d2h_packed"] and min(parts) == 4
    with pytest.raises(ValueError, match="host_transfer"):
        GPUDevice(0, host_transfer="pinned")


def test_pack_mode_and_file_maps_never_register(sim, tmp_path):
    from tileblas.devices.gpu import GPUDevice
    from tileblas.runtime import Runtime

    n = 64
    a = np.memmap(tmp_path / "a.f64", dtype=np.float64, mode="w+", shape=(n, n), order="F")
    a[...] = rnd((n, n))
    b = rnd((n, n))
    c = np.zeros((n, n), order="F")
    for mode in ("register", "pack"):
        d = GPUDevice(0, memory=1 << 22, streams=2, register_min=0, host_transfer=mode)
        with Runtime([d]) as rt:
            rt.gemm(1.0, a, b, 0.0, c, tile_size=32)
        d.close()
        assert np.allclose(c, np.asarray(a) @ b)
        assert (len(sim.registered) == 2) == (mode == "register")  # b and c; never the file map a
        if mode == "register":
            from tileblas.devices import _hostmem

            _hostmem.REGISTRY.unregister_all()
    assert d.transfers["h2d_direct"] == 0
