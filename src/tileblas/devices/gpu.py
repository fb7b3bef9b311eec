"""NVIDIA GPUs through CuPy: cuBLAS per tile on streams, pinned host staging, peer copies.

What it owns
    :class:`GPUDevice`, a :class:`~tileblas.devices._discrete.DiscreteDevice`:

    * memory: one ``cupy`` allocation of ``memory`` bytes made when the device is created (the heap of
      BLASX section IV-E lives in the runtime and hands out offsets into it, so no tile costs a
      ``cudaMalloc``).  By default 80 % of the free memory, less a reserve of a tenth of the GPU for cuBLAS
      workspaces, CuPy's arrays and a second GPUDevice on the same GPU; a default size the driver refuses is
      retried at three quarters, down to the least tile memory;
    * streams: ``streams`` non-blocking CUDA streams, each with its own cuBLAS handle bound to it (one
      runtime worker thread drives one stream, so a handle is never shared between threads).  Each
      stream's bookkeeping (deferred copies, timing marks) is guarded by a lock of its own, since the plain
      interface below runs on stream 0 from any thread;
    * device context: every CUDA object (stream, event, handle) is made, and every kernel launched, with
      the device current (``with self._cpdev``); events of another device may be waited for;
    * the host waits on blocking events (``Event(block=True)``): a stream synchronisation spins on a CPU
      core that the tile workers beside the GPU need;
    * host -> device (``host_transfer="register"``, the default): the operands of a call (the NumPy arrays
      that own their memory, from ``register_min`` bytes) are page-locked in place once
      (``cudaHostRegister``, :mod:`tileblas.devices._hostmem`), and a tile of them, a column-major
      strided view, is copied by the copy engine straight from where it is (``cudaMemcpy2DAsync``: one
      row of the copy per column of the tile, the host's leading dimension as its pitch): no host thread
      touches the data.  Otherwise (``host_transfer="pack"``, memory CUDA cannot lock, file maps, small or
      row-major tiles) the tile is packed into a page-locked staging slot of the stream, large tiles in
      column blocks on several threads (``pack_threads``), and copied asynchronously; a slot is reused only
      after the event recorded behind its copy has completed (a ring of slots per stream);
    * device -> host: into a registered operand, straight to the host view (``cudaMemcpy2DAsync``); else
      into a staging slot, unpacked (on several threads) into the host view when the stream is
      synchronised (:meth:`sync`), which is when the runtime needs the data;
    * device -> device: ``cudaMemcpyPeerAsync`` on the receiving device's stream; peer access is
      enabled where ``cudaDeviceCanAccessPeer`` says it exists;
    * kernels: ``cublas<t>gemm/symm/hemm/syrk/herk/syr2k/her2k/trmm/trsm`` on contiguous column-major
      tiles, read with their leading dimension (a view of a larger column-major array qualifies; an array
      that is not column-major is refused, as cuBLAS would read it transposed); ``axpy`` (split-k
      reduction) with CuPy element-wise kernels on the stream.  If neither CuPy nor the cuBLAS C library has
      a routine, an equivalent composition of CuPy operations on the same stream is used, said once per
      routine (a RuntimeWarning; ``describe()['fallbacks']`` and ``tileblas info`` list them);
    * plain interface (:meth:`to_device`, :meth:`to_host`, :meth:`empty`, :meth:`kernel`, used by the
      asynchronous API): everything on stream 0, in order (a copy on CUDA's legacy null stream is not
      ordered with a non-blocking stream);
    * timeline: timing events around every operation, converted to the host clock at :meth:`sync`
      (relative to an event recorded when the stream was idle: before the first wait or operation after
      a sync), for the compute / communication profile.  A failed sync drops the stream's deferred work.

What it must not touch
    Scheduling and caching (the runtime's).  CuPy is imported when a GPUDevice is created, never by
    ``import tileblas``.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
import weakref
from typing import Any, Iterator

import numpy as np

from tileblas._dtypes import PREFIX_OF
from tileblas.kernels import _cuda
from tileblas.kernels._cuda import cublas_bindings as _cublas
from tileblas.kernels._openblas import colmajor
from tileblas.devices._base import DeviceError
from tileblas.devices import _figures, _hostmem
from tileblas.devices._discrete import DiscreteDevice, Event
from tileblas.devices._model import DeviceModel

__all__ = ["GPUDevice", "GPUUnavailableError", "CupyMissingError", "gpu_devices", "gpu_count", "gpu_info",
           "usable_count"]

_PREFIX = PREFIX_OF
_REAL = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
_OP = {"N": 0, "T": 1, "C": 2}  # CUBLAS_OP_N / T / C

#: Least tile memory a GPUDevice takes by default (memory=None): below this, say why instead of running.
_MIN_MEMORY = 64 << 20
#: Share of the GPU's memory a default-sized GPUDevice leaves free (cuBLAS workspaces, CuPy's arrays).
_RESERVE_SHARE = 0.1
#: Nominal pinned host -> device rate (PCIe 3 x16), used where the measurement fails.
_HOST_LINK_BYTES_S = 12e9
#: cudaErrorPeerAccessAlreadyEnabled.
_PEER_ALREADY_ENABLED = 704
#: cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost.
_H2D, _D2H = 1, 2
#: How a GPUDevice moves tiles of host operands (see the module notes).
HOST_TRANSFERS = ("register", "pack")


def _gpu_name(props: dict, missing: Any = b"") -> str:
    """The GPU's name in CUDA's device properties ``props`` (``missing`` where they have none), as text."""
    name = props.get("name", missing)
    return name.decode(errors="replace") if isinstance(name, bytes) else str(name)


def _positive(x: Any) -> float:
    """``x`` as a positive finite figure (ValueError else)."""
    v = float(x)
    if not 0.0 < v < float("inf"):
        raise ValueError(f"not a positive finite figure: {x!r}")
    return v


def _free_pools(cp: Any) -> None:
    """Give the blocks CuPy's device and pinned memory pools keep cached back to the driver."""
    for getter in ("get_default_memory_pool", "get_default_pinned_memory_pool"):
        get = getattr(cp, getter, None)
        if get is not None:
            get().free_all_blocks()


def _already_enabled(exc: BaseException) -> bool:
    """True when a peer-access error says access was enabled already (CuPy's CUDARuntimeError.status)."""
    status = getattr(exc, "status", None)
    if status is not None:
        return int(status) == _PEER_ALREADY_ENABLED
    return "PeerAccessAlreadyEnabled" in repr(exc)


class GPUUnavailableError(DeviceError):
    """No GPU can be used here: CuPy is missing (:class:`CupyMissingError`), or CUDA has no usable device
    (no GPU, no driver, a driver too old for CuPy's CUDA)."""


class CupyMissingError(GPUUnavailableError, ImportError):
    """CuPy is not installed or does not import; the message names the extra that installs it."""


def _cupy() -> Any:
    try:
        return _cuda.cupy_module()
    except _cuda.CupyUnavailable as exc:
        raise CupyMissingError(f"GPU devices need CuPy. {exc}") from None


def _count(cp: Any) -> int:
    """CUDA devices CuPy sees; GPUUnavailableError (with CUDA's error) when there is none to use."""
    try:
        n = int(cp.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - no driver, driver too old, no device: say which
        raise GPUUnavailableError(
            f"CuPy {getattr(cp, '__version__', '?')} is installed, but CUDA has no usable GPU here "
            f"({type(exc).__name__}: {exc}). Check the NVIDIA driver (nvidia-smi); CuPy for CUDA 13 needs a "
            f"CUDA 13 driver ({_cuda.INSTALL_HINT})") from None
    if n < 1:
        raise GPUUnavailableError(f"CuPy {getattr(cp, '__version__', '?')} is installed, but CUDA sees no GPU")
    return n


def usable_count() -> int:
    """CUDA devices CuPy sees; :class:`GPUUnavailableError` saying why there is none to use
    (:class:`CupyMissingError`, naming the extra to install, without CuPy)."""
    return _count(_cupy())


def gpu_count() -> int:
    """CUDA devices CuPy sees (0 without CuPy or a driver)."""
    try:
        return _count(_cupy())
    except GPUUnavailableError:
        return 0


def gpu_info() -> dict[str, Any]:
    """What ``tileblas info`` shows of the GPUs: the devices CuPy sees, or why there are none (how to
    install CuPy, CUDA's error); where each cuBLAS routine comes from; the routines this process ran as
    CuPy compositions."""
    out: dict[str, Any] = {"available": False, "devices": [], "fallbacks": _cuda.fallbacks()}
    try:
        cp = _cupy()
        n = _count(cp)
    except GPUUnavailableError as exc:
        out["note"] = str(exc)
        return out
    names = [_gpu_name(cp.cuda.runtime.getDeviceProperties(i), b"?") for i in range(n)]
    out.update(available=True, devices=names, cupy=cp.__version__, cublas=_cuda.cublas_report(),
               note=f"{n} CUDA device(s), CuPy {cp.__version__}")
    return out


class _NoBinding(Exception):
    """Neither CuPy nor the cuBLAS C library has the routine (the CuPy composition is used)."""


#: GPUDevices of this process that hold tile memory, to name them when a new one finds too little free.
_HOLDERS: "weakref.WeakSet[GPUDevice]" = weakref.WeakSet()


class _CudaEvent(Event):
    __slots__ = ("ev",)

    def __init__(self, ev: Any) -> None:
        self.ev = ev

    def query(self) -> bool:
        return bool(self.ev.done)

    def synchronize(self) -> None:
        self.ev.synchronize()


class _Staging:
    """A ring of page-locked slots for one stream and direction."""

    def __init__(self, cp: Any, slots: int) -> None:
        self.cp = cp
        self.slots: list[Any] = [None] * slots
        self.events: list[Any] = [None] * slots
        self.next = 0
        self.allocated = 0  # slots page-locked so far (a slot's first use, or a larger copy than it held)

    def take(self, nbytes: int) -> tuple[int, np.ndarray]:
        import cupyx

        i = self.next
        self.next = (i + 1) % len(self.slots)
        ev = self.events[i]
        if ev is not None:
            ev.synchronize()  # the copy that last used the slot has finished (a blocking event)
            self.events[i] = None
        buf = self.slots[i]
        if buf is None or buf.nbytes < nbytes:
            buf = self.slots[i] = cupyx.empty_pinned((max(nbytes, 1),), dtype=np.uint8)
            self.allocated += 1
        return i, buf

    def used(self, i: int, ev: Any) -> None:
        self.events[i] = ev


class GPUDevice(DiscreteDevice):
    """One CUDA GPU (see the module notes).

    Parameters
    ----------
    index : int
        CUDA device ordinal.
    memory : int, optional
        Bytes of GPU memory for tiles (default: 80% of the free memory when the device is created, less a
        tenth of the GPU's memory; the rest stays for cuBLAS workspaces and other users; retried smaller if
        the allocation fails).
    streams : int
        CUDA streams (default 4, as in the paper).
    staging_slots : int
        Pinned staging slots per stream and direction.
    timeline : bool
        Record timing events for the compute / communication profile (a few microseconds per operation).
    model : DeviceModel, optional
        The figures the runtime sizes this GPU's tiles from (default: :attr:`model`'s rule).
    host_transfer : {"register", "pack"}
        Copy tiles of host operands in place from page-locked operands ("register": the operands are
        registered the first time a call uses them and stay so while they live), or pack them into
        pinned staging first ("pack").  See the module notes.
    register_min : int
        Operands smaller than this many bytes are packed, not registered (default 64 MiB).
    pack_threads : int, optional
        Threads that pack or unpack a large tile together (default: half the host's cores, 2 to 8).
    """

    kind = "gpu"
    alignment = 512

    def __init__(self, index: int = 0, memory: int | None = None, streams: int = 4, staging_slots: int = 4,
                 timeline: bool = True, model: DeviceModel | None = None, host_transfer: str = "register",
                 register_min: int = 64 << 20, pack_threads: int | None = None) -> None:
        if model is not None and not isinstance(model, DeviceModel):
            raise TypeError(f"model must be a DeviceModel or None; got {type(model).__name__}")
        if host_transfer not in HOST_TRANSFERS:
            raise ValueError(f"host_transfer must be one of {', '.join(map(repr, HOST_TRANSFERS))}; "
                             f"got {host_transfer!r}")
        if isinstance(register_min, bool) or not isinstance(register_min, (int, np.integer)) or register_min < 0:
            raise ValueError(f"register_min must be a number of bytes >= 0; got {register_min!r}")
        if pack_threads is None:
            import os

            pack_threads = min(max((os.cpu_count() or 2) // 2, 2), 8)
        if isinstance(pack_threads, bool) or not isinstance(pack_threads, (int, np.integer)) or pack_threads < 1:
            raise ValueError(f"pack_threads must be a positive int; got {pack_threads!r}")
        self._model = model
        self.host_transfer = host_transfer
        self.register_min = int(register_min)
        self.pack_threads = int(pack_threads)
        self.registry = _hostmem.REGISTRY
        #: tiles copied in place (registered) and through staging (packed), per direction
        self.transfers = {"h2d_direct": 0, "h2d_packed": 0, "d2h_direct": 0, "d2h_packed": 0}
        cp = _cupy()
        n = _count(cp)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < n:
            raise ValueError(f"index must name one of the {n} CUDA devices CuPy sees; got {index!r}")
        self.index = int(index)
        self._cpdev = cp.cuda.Device(self.index)
        self._chunk = None
        self._handles: list = []
        self._streams: list = []
        with self._cpdev:
            # blocks CuPy's pool keeps cached on this device are free memory for us: give them back first
            _free_pools(cp)
            free, total = cp.cuda.runtime.memGetInfo()
            fixed = memory is not None
            if memory is None:
                memory = int(min(free * 0.8, free - total * _RESERVE_SHARE))
                if memory < _MIN_MEMORY:
                    held = [f"{d.name} ({d.memory_bytes} bytes)" for d in list(_HOLDERS)
                            if d.index == self.index and d._chunk is not None]
                    raise DeviceError(f"GPU {self.index} has {free} bytes free of {total} ("
                                      + (f"this process's {', '.join(held)} and " if held else "")
                                      + f"another process or library hold the rest); tileblas needs at least "
                                      f"{_MIN_MEMORY} for tiles, leaving {int(total * _RESERVE_SHARE)}: free GPU "
                                      "memory or pass memory=")
            if isinstance(memory, bool) or not isinstance(memory, (int, np.integer)) or not 0 < memory <= free:
                raise ValueError(f"memory must be a positive number of bytes up to the {free} free on GPU "
                                 f"{self.index}; got {memory!r}")
            super().__init__(f"gpu{self.index}", int(memory), streams, speed_hint=50.0)
            self.cp = cp
            self.cublas = _cublas()
            self._chunk = self._allocate(fixed)
            self._streams = [cp.cuda.Stream(non_blocking=True) for _ in range(self.streams)]
            cb = self.cublas
            for st in self._streams:
                h = cb.create()
                self._handles.append(h)
                cb.setStream(h, st.ptr)
                cb.setPointerMode(h, cb.CUBLAS_POINTER_MODE_HOST)
        _HOLDERS.add(self)
        self._locks = [threading.RLock() for _ in range(self.streams)]
        self._fallbacks: set[str] = set()
        self._in = [_Staging(cp, staging_slots) for _ in range(self.streams)]
        self._out = [_Staging(cp, staging_slots) for _ in range(self.streams)]
        self._deferred: list[list] = [[] for _ in range(self.streams)]  # (event, slot view, host view)
        self._keep: list[list] = [[] for _ in range(self.streams)]  # host scalars alive until sync
        self._timing = bool(timeline)
        self._marks: list[list] = [[] for _ in range(self.streams)]  # (what, start ev, end ev)
        self._ref: list[Any] = [None] * self.streams  # (event, host time) of the stream's idle point
        self._peers: dict[int, bool] = {}
        self._peer_lock = threading.Lock()
        self.props = cp.cuda.runtime.getDeviceProperties(self.index)
        try:
            self.figures_key: str | None = _figures.device_key(cp, self.index, self.props)
        except Exception:  # noqa: BLE001 - a GPU that cannot be told apart: its figures are this process's
            self.figures_key = None
        self.host_link_bytes_s = self._figure("host link", self._measure_host_link, _HOST_LINK_BYTES_S)

    def staging_allocations(self) -> int:
        """How many pinned staging slots this device has allocated so far: each stream's ring, each way,
        allocates a slot at its first use and again for a larger copy than it held, so the first calls of
        each size pay page-locking besides their copies."""
        return sum(r.allocated for r in self._in + self._out)

    def _figure(self, what: str, measure: Any, nominal: float) -> float:
        """The figure ``what`` of this GPU: kept from an earlier process on this machine
        (:mod:`tileblas.devices._figures`), else ``measure()``'s, kept for the processes after; ``nominal``
        where it cannot be measured (not kept)."""
        try:
            if self.figures_key is None:
                return float(measure())
            return _figures.measured(f"{what} | {self.figures_key}", measure, _positive)
        except Exception:  # noqa: BLE001 - a model input only: the nominal figure
            return nominal

    @property
    def model(self) -> DeviceModel:
        """The figures the runtime sizes this GPU's tiles from: the one given, else the preset of its name
        (an H100: :meth:`DeviceModel.h100 <tileblas.devices._model.DeviceModel.h100>`) or, for another GPU,
        fp64 and fp32 gemm rates measured once on this machine (n = 1024, scaled to large tiles by the
        model's knee; kept for the processes after: :mod:`tileblas.devices._figures`); with this device's
        tile memory, streams and host link in both cases."""
        if self._model is None:
            name = str(self.describe().get("gpu", ""))
            link = float(self.host_link_bytes_s)
            common = dict(memory=self.memory_bytes, streams=self.streams, h2d_bandwidth=link, d2h_bandwidth=link)
            if "H100" in name:
                self._model = DeviceModel.h100(**common)
            else:
                base = DeviceModel.h100()
                d, s_ = (self._figure("fp64 gemm", lambda: self._measure_gemm(np.float64), 5e12),
                         self._figure("fp32 gemm", lambda: self._measure_gemm(np.float32), 1e13))
                scale = 1.0 + (base.knee / 1024) ** 2
                self._model = base.with_(name=f"{name or 'GPU'} (measured)", flops={
                    "d": d * scale, "z": d * scale, "s": s_ * scale, "c": s_ * scale}, **common)
        return self._model

    def _measure_gemm(self, dtype: Any, n: int = 1024) -> float:
        """flop/s of one cuBLAS gemm of order n on stream 0 (best of 3 after a warm-up); raises where it
        cannot be measured (:meth:`_figure` then takes a nominal rate)."""
        cp = self.cp
        with self.on_stream(0) as st:
            a = cp.ones((n, n), dtype=dtype, order="F")
            c = cp.empty((n, n), dtype=dtype, order="F")
            best = float("inf")
            for i in range(4):
                t0 = time.perf_counter()
                self._kernel("gemm", [1.0, a, a, 0.0, c], {}, 0)
                self._host_wait(st)
                if i:
                    best = min(best, time.perf_counter() - t0)
        del a, c
        return 2.0 * n ** 3 / max(best, 1e-9)

    def _allocate(self, fixed: bool) -> Any:
        """The tile memory; a default size the driver refuses is retried at 3/4, down to _MIN_MEMORY (the
        free memory CUDA reports may not come in one piece)."""
        cp = self.cp
        oom = getattr(getattr(cp.cuda, "memory", None), "OutOfMemoryError", MemoryError)
        nbytes = self.memory_bytes
        while True:
            try:
                chunk = cp.empty((nbytes,), dtype=cp.uint8)
            except oom as exc:
                smaller = (nbytes * 3 // 4) // self.alignment * self.alignment
                if fixed or smaller < _MIN_MEMORY:
                    tried = f"memory={nbytes}" if fixed else f"from {self.memory_bytes} down to {nbytes}"
                    raise DeviceError(f"GPU {self.index}: could not allocate {tried} bytes for tiles ({exc}); "
                                      "pass a smaller memory=") from None
                _free_pools(cp)
                nbytes = smaller
                continue
            self.memory_bytes = nbytes
            return chunk

    def _host_wait(self, st: Any) -> None:
        """Block the calling thread until ``st`` has done all its work (a blocking event: no spinning)."""
        ev = self.cp.cuda.Event(block=True, disable_timing=True)
        ev.record(st)
        ev.synchronize()

    @contextlib.contextmanager
    def on_stream(self, stream: int = 0) -> Iterator[Any]:
        """Run the CuPy work of the ``with`` block on ``stream`` of this device (device current, stream
        current), in order with the device's own work there; yields the CuPy stream."""
        with self._locks[stream], self._cpdev, self._streams[stream] as st:
            yield st

    def _measure_host_link(self, nbytes: int = 16 << 20) -> float:
        """Bytes per second of a pinned host -> device copy, measured once here (best of 3; before any
        tile lives in the memory it copies into), for :meth:`transfer_seconds`; raises where it cannot be
        measured (:meth:`_figure` then takes 12 GB/s, PCIe 3 x16 pinned)."""
        import cupyx

        n = min(nbytes, self.memory_bytes)
        with self._cpdev:
            src = cupyx.empty_pinned((n,), dtype=np.uint8)
            st = self._streams[0]
            best = float("inf")
            for _ in range(3):
                a, b = self.cp.cuda.Event(), self.cp.cuda.Event(block=True)
                a.record(st)
                self._chunk.data.copy_from_host_async(ctypes.c_void_p(src.ctypes.data), n, st)
                b.record(st)
                b.synchronize()
                best = min(best, self.cp.cuda.get_elapsed_time(a, b) / 1e3)
        rate = n / best if best > 0 else _HOST_LINK_BYTES_S
        return float(min(max(rate, 1e9), 1e12))

    # ----------------------------------------------------------------- memory
    def view(self, offset: int, shape: tuple[int, int], dtype: Any) -> Any:
        if self._chunk is None:
            raise DeviceError(f"{self.name} is closed: its tile memory was given back")
        dt = np.dtype(dtype)
        nbytes = int(shape[0]) * int(shape[1]) * dt.itemsize
        if offset < 0 or offset + nbytes > self.memory_bytes:
            raise ValueError(f"offset {offset} + {nbytes} bytes is outside the {self.memory_bytes} bytes of "
                             f"{self.name}")
        return self._chunk[offset:offset + nbytes].view(dt).reshape(tuple(shape), order="F")

    # ----------------------------------------------------------------- timeline helpers
    def _reference(self, s: int) -> None:
        """Record the stream's reference event (device context, stream lock held) if it has none since the
        last sync: the stream is idle then, so the event's time is the host time read beside it."""
        if self._timing and self._ref[s] is None:
            ev = self.cp.cuda.Event()
            t = time.perf_counter()
            ev.record(self._streams[s])
            self._ref[s] = (ev, t)

    def _begin(self, s: int) -> Any:
        if not self._timing:
            return None
        self._reference(s)
        ev = self.cp.cuda.Event()
        ev.record(self._streams[s])
        return ev

    def _end(self, s: int, what: str, start: Any) -> None:
        if start is None:
            return
        ev = self.cp.cuda.Event()
        ev.record(self._streams[s])
        self._marks[s].append((what, start, ev))

    # ----------------------------------------------------------------- copies
    def prepare_host(self, arrays: list) -> None:
        """Register the host operands of a call that qualify (``host_transfer="register"``), once."""
        if self.host_transfer != "register":
            return
        rt = self.cp.cuda.runtime
        for a in arrays:
            if isinstance(a, np.ndarray) and a.size:
                self.registry.ensure(rt, a, self.register_min)

    def _count(self, what: str) -> None:
        with self.stats.lock:
            self.transfers[what] += 1

    def _direct(self, host: np.ndarray) -> int:
        """The host view's leading dimension in elements when the copy engine can move it in place (a
        column-major view of a registered operand), else 0."""
        if self.host_transfer != "register" or not host.size:
            return 0
        ld = colmajor(host)
        return ld if ld and self.registry.covers(host) else 0

    def _copy2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int,
                stream: int) -> None:
        self.cp.cuda.runtime.memcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, self._streams[stream].ptr)

    def h2d(self, dst: Any, host: np.ndarray, stream: int) -> None:
        cp = self.cp
        n = host.size * host.itemsize
        st = self._streams[stream]
        ld = self._direct(host)
        if ld:
            item = host.itemsize
            with self._locks[stream], self._cpdev:
                t = self._begin(stream)
                self._copy2d(dst.data.ptr, self._ld(dst, "the device tile") * item, host.ctypes.data, ld * item,
                             host.shape[0] * item, host.shape[1], _H2D, stream)
                self._end(stream, "h2d", t)
            self._count("h2d_direct")
            self.stats.add(bytes_h2d=n)
            return
        ring = self._in[stream]
        i, buf = ring.take(n)
        stage = buf[:n].view(host.dtype).reshape(host.shape, order="F")
        _cuda.pack(stage, host, self.pack_threads)  # the strided tile into pinned memory (host side)
        with self._locks[stream], self._cpdev:
            t = self._begin(stream)
            dst.data.copy_from_host_async(ctypes.c_void_p(stage.ctypes.data), n, st)
            self._end(stream, "h2d", t)
            ev = cp.cuda.Event(block=True, disable_timing=True)
            ev.record(st)
        ring.used(i, ev)
        self._count("h2d_packed")
        self.stats.add(bytes_h2d=n)

    def d2h(self, src: Any, host: np.ndarray, stream: int) -> None:
        cp = self.cp
        n = host.size * host.itemsize
        st = self._streams[stream]
        ld = self._direct(host)
        if ld:
            item = host.itemsize
            with self._locks[stream], self._cpdev:
                t = self._begin(stream)
                self._copy2d(host.ctypes.data, ld * item, src.data.ptr, self._ld(src, "the device tile") * item,
                             host.shape[0] * item, host.shape[1], _D2H, stream)
                self._end(stream, "d2h", t)
            self._count("d2h_direct")
            self.stats.add(bytes_d2h=n)
            return
        ring = self._out[stream]
        i, buf = ring.take(n)
        stage = buf[:n].view(host.dtype).reshape(host.shape, order="F")
        with self._locks[stream], self._cpdev:
            t = self._begin(stream)
            src.data.copy_to_host_async(ctypes.c_void_p(stage.ctypes.data), n, st)
            self._end(stream, "d2h", t)
            ev = cp.cuda.Event(block=True, disable_timing=True)
            ev.record(st)
            self._deferred[stream].append((ev, stage, host))
        ring.used(i, ev)
        self._count("d2h_packed")
        self.stats.add(bytes_d2h=n)

    def d2d(self, dst: Any, peer: DiscreteDevice, src: Any, stream: int) -> None:
        if not self.can_access_peer(peer):
            raise ValueError(f"{self.name} cannot copy from {peer.name}")
        n = int(dst.nbytes)
        with self._locks[stream], self._cpdev:
            t = self._begin(stream)
            self.cp.cuda.runtime.memcpyPeerAsync(dst.data.ptr, self.index, src.data.ptr, peer.index, n,
                                                 self._streams[stream].ptr)
            self._end(stream, "d2d", t)
        self.stats.add(bytes_d2d=n)

    def can_access_peer(self, other: Any) -> bool:
        if not isinstance(other, GPUDevice) or other.index == self.index:
            return False
        with self._peer_lock:
            ok = self._peers.get(other.index)
            if ok is None:
                rt = self.cp.cuda.runtime
                ok = bool(rt.deviceCanAccessPeer(self.index, other.index))
                if ok:
                    try:
                        with self._cpdev:
                            rt.deviceEnablePeerAccess(other.index)
                    except Exception as exc:  # already enabled is fine
                        if not _already_enabled(exc):
                            ok = False
                self._peers[other.index] = ok
            return ok

    def transfer_seconds(self, nbytes: int, peer: Any = None) -> float:
        if peer is None:
            return 1e-5 + nbytes / self.host_link_bytes_s
        if not self.can_access_peer(peer):
            return float("inf")
        return 5e-6 + nbytes / 20e9

    # ----------------------------------------------------------------- streams
    def record(self, stream: int) -> Event:
        with self._cpdev:  # an event belongs to the device current when it is made
            ev = self.cp.cuda.Event(block=True, disable_timing=True)
            ev.record(self._streams[stream])
        return _CudaEvent(ev)

    def wait(self, stream: int, event: Event) -> None:
        if isinstance(event, _CudaEvent):
            with self._locks[stream], self._cpdev:
                self._reference(stream)  # before the wait, while the stream is idle
                self._streams[stream].wait_event(event.ev)
        else:
            event.synchronize()

    def sync(self, stream: int) -> None:
        with self._locks[stream]:
            # the stream's pending work is taken first: whatever fails below, none of it is left behind
            deferred, self._deferred[stream] = self._deferred[stream], []
            keep, self._keep[stream] = self._keep[stream], []
            marks, self._marks[stream] = self._marks[stream], []
            ref, self._ref[stream] = self._ref[stream], None
            with self._cpdev:
                self._host_wait(self._streams[stream])
            for _, stage, host in deferred:
                _cuda.pack(host, stage, self.pack_threads)  # unpack device -> host tiles
            del keep
            if marks and ref is not None:
                (ev0, t_ref), el = ref, self.cp.cuda.get_elapsed_time
                for what, a, b in marks:
                    self._log(stream, what, t_ref + el(ev0, a) / 1e3, t_ref + el(ev0, b) / 1e3)

    # ----------------------------------------------------------------- kernels
    def _scal(self, stream: int, value: Any, dtype: Any) -> int:
        a = np.array(value, dtype=dtype)
        self._keep[stream].append(a)  # cuBLAS reads host scalars during the call; keep it anyway
        return a.ctypes.data

    def launch(self, name: str, args: list, kwargs: dict, stream: int) -> None:
        with self._locks[stream], self._cpdev, self._streams[stream]:
            t = self._begin(stream)
            if name == "axpy":
                self._fallback(name, args, kwargs)  # element-wise by design
            else:
                try:
                    self._kernel(name, args, kwargs, stream)
                except _NoBinding as nb:
                    routine = str(nb)
                    self._fallbacks.add(routine)
                    _cuda.note_fallback(routine, self.name)
                    self._fallback(name, args, kwargs)
            self._end(stream, "kernel", t)

    def kernel(self, name: str) -> Any:
        """``name`` run synchronously on stream 0 (launch and sync under the stream's lock: the plain
        interface may be used from several threads)."""

        def run(*args: Any, **kwargs: Any) -> None:
            with self._locks[0]:
                self.launch(name, list(args), kwargs, 0)
                self.sync(0)

        run.__name__ = name
        return run

    def _ld(self, x: Any, what: str) -> int:
        """Leading dimension of device array ``x`` read column-major; ValueError for another layout (cuBLAS
        would read it transposed)."""
        if x.size == 0:
            return max(x.shape[0], 1)
        ld = colmajor(x)
        if not ld:
            raise ValueError(f"{self.name}: cuBLAS reads column-major (Fortran-ordered) arrays; {what} has shape "
                             f"{tuple(x.shape)} and strides {tuple(x.strides)} (cupy.asfortranarray makes one)")
        return ld

    def _kernel(self, name: str, args: list, kw: dict, s: int) -> None:
        cb = self.cublas
        h = self._handles[s]
        ld = self._ld

        def fn(nm: str) -> Any:
            f = getattr(cb, nm, None)
            if f is None:
                raise _NoBinding(nm)
            return f

        out = args[{"syrk": 3, "herk": 3, "trmm": 2, "trsm": 2}.get(name, 4)]
        dt = np.dtype(out.dtype)
        p = _PREFIX[dt]
        cplx = dt.kind == "c"
        lower = {"U": cb.CUBLAS_FILL_MODE_UPPER, "L": cb.CUBLAS_FILL_MODE_LOWER}
        side = {"L": cb.CUBLAS_SIDE_LEFT, "R": cb.CUBLAS_SIDE_RIGHT}
        if name == "gemm":
            alpha, a, b, beta, c = args[:5]
            ta = args[5] if len(args) > 5 else kw.get("transa", "N")
            tb = args[6] if len(args) > 6 else kw.get("transb", "N")
            m, n = c.shape
            k = a.shape[1] if ta == "N" else a.shape[0]
            fn(p + "gemm")(h, _OP[ta], _OP[tb], m, n, k, self._scal(s, alpha, dt), a.data.ptr, ld(a, "a"),
                           b.data.ptr, ld(b, "b"), self._scal(s, beta, dt), c.data.ptr, ld(c, "c"))
        elif name in ("symm", "hemm"):
            alpha, a, b, beta, c = args[:5]
            routine = p + ("hemm" if name == "hemm" and cplx else "symm")
            m, n = c.shape
            fn(routine)(h, side[kw.get("side", "L")], lower[kw.get("uplo", "U")], m, n,
                        self._scal(s, alpha, dt), a.data.ptr, ld(a, "a"), b.data.ptr, ld(b, "b"),
                        self._scal(s, beta, dt), c.data.ptr, ld(c, "c"))
        elif name in ("syrk", "herk"):
            alpha, a, beta, c = args[:4]
            trans = kw.get("trans", "N")
            herm = name == "herk" and cplx
            if not cplx and trans == "C":
                trans = "T"
            n = c.shape[0]
            k = a.shape[1] if trans == "N" else a.shape[0]
            sdt = _REAL[dt] if herm else dt
            fn(p + ("herk" if herm else "syrk"))(
                h, lower[kw.get("uplo", "U")], _OP[trans], n, k, self._scal(s, alpha, sdt), a.data.ptr,
                ld(a, "a"), self._scal(s, beta, sdt), c.data.ptr, ld(c, "c"))
        elif name in ("syr2k", "her2k"):
            alpha, a, b, beta, c = args[:5]
            trans = kw.get("trans", "N")
            herm = name == "her2k" and cplx
            if not cplx and trans == "C":
                trans = "T"
            n = c.shape[0]
            k = a.shape[1] if trans == "N" else a.shape[0]
            fn(p + ("her2k" if herm else "syr2k"))(
                h, lower[kw.get("uplo", "U")], _OP[trans], n, k, self._scal(s, alpha, dt), a.data.ptr,
                ld(a, "a"), b.data.ptr, ld(b, "b"),
                self._scal(s, beta, _REAL[dt] if herm else dt), c.data.ptr, ld(c, "c"))
        elif name in ("trmm", "trsm"):
            alpha, a, b = args[:3]
            m, n = b.shape
            diag = cb.CUBLAS_DIAG_UNIT if kw.get("diag", "N") == "U" else cb.CUBLAS_DIAG_NON_UNIT
            ta = kw.get("transa", "N")
            f = fn(p + name)
            ldb = ld(b, "b")
            common = (h, side[kw.get("side", "L")], lower[kw.get("uplo", "U")], _OP[ta], diag, m, n,
                      self._scal(s, alpha, dt), a.data.ptr, ld(a, "a"), b.data.ptr, ldb)
            if name == "trsm":
                f(*common)
            else:
                f(*common, b.data.ptr, ldb)  # C = B: in place
        else:
            raise ValueError(f"unknown kernel {name!r}")

    def _fallback(self, name: str, args: list, kw: dict) -> None:
        """CuPy compositions on the current stream, for kernels without a cuBLAS binding here."""
        cp = self.cp

        def op(x: Any, t: str) -> Any:
            return x if t == "N" else (x.T if t == "T" else x.conj().T)

        def tri_mask(n: int, uplo: str) -> Any:
            return cp.triu(cp.ones((n, n), dtype=bool)) if uplo == "U" else cp.tril(cp.ones((n, n), dtype=bool))

        if name == "axpy":
            alpha, x, y = args[:3]
            uplo = kw.get("uplo") if len(args) < 4 else args[3]
            if uplo is None:
                y += alpha * x
            else:
                y += alpha * (cp.triu(x) if uplo == "U" else cp.tril(x))
            return
        if name in ("symm", "hemm"):
            alpha, a, b, beta, c = args[:5]
            uplo = kw.get("uplo", "U")
            herm = name == "hemm" and a.dtype.kind == "c"
            t = cp.triu(a) if uplo == "U" else cp.tril(a)
            off = t - cp.diag(cp.diag(t))
            full = off + (off.conj().T if herm else off.T) + cp.diag(cp.diag(a).real if herm else cp.diag(a))
            c[...] = alpha * (full @ b if kw.get("side", "L") == "L" else b @ full) + beta * c
            return
        if name in ("syrk", "herk", "syr2k", "her2k"):
            alpha, a = args[:2]
            two = name in ("syr2k", "her2k")
            b = args[2] if two else None
            beta, c = args[-2], args[-1]
            herm = name[0] == "h" and a.dtype.kind == "c"
            trans = kw.get("trans", "N")
            oa = a if trans == "N" else op(a, trans)
            h = (lambda x: x.conj().T) if herm else (lambda x: x.T)
            if two:
                ob = b if trans == "N" else op(b, trans)
                upd = alpha * oa @ h(ob) + (np.conj(alpha) if herm else alpha) * ob @ h(oa)
            else:
                upd = alpha * oa @ h(oa)
            mask = tri_mask(c.shape[0], kw.get("uplo", "U"))
            c[...] = cp.where(mask, upd + beta * c, c)
            if herm:  # as cuBLAS: the diagonal of a Hermitian update is real
                idx = cp.arange(c.shape[0])
                c[idx, idx] = c[idx, idx].real
            return
        if name == "trmm":
            alpha, a, b = args[:3]
            t = cp.triu(a) if kw.get("uplo", "U") == "U" else cp.tril(a)
            if kw.get("diag", "N") == "U":
                t = t - cp.diag(cp.diag(t)) + cp.eye(a.shape[0], dtype=a.dtype)
            t = op(t, kw.get("transa", "N"))
            b[...] = alpha * (t @ b if kw.get("side", "L") == "L" else b @ t)
            return
        raise DeviceError(f"{self.name}: no cuBLAS binding for {name!r} in this CuPy")

    # ----------------------------------------------------------------- plain Device interface
    # Everything on stream 0: CuPy's current stream would be CUDA's legacy null stream, which a kernel on
    # the non-blocking stream 0 does not wait for.
    def to_device(self, host: np.ndarray) -> Any:
        with self.on_stream(0):
            out = self.cp.asfortranarray(self.cp.asarray(host))
        self.stats.add(bytes_h2d=host.nbytes)
        return out

    def to_host(self, dev: Any, host: np.ndarray) -> None:
        with self.on_stream(0) as st:
            src = dev if dev.flags.f_contiguous else self.cp.asfortranarray(dev)
            direct = host.flags.f_contiguous and host.dtype == src.dtype and host.shape == src.shape
            dst = host if direct else np.empty(src.shape, src.dtype, order="F")
            if src.nbytes:
                src.data.copy_to_host_async(ctypes.c_void_p(dst.ctypes.data), src.nbytes, st)
            self._host_wait(st)
        if not direct:
            host[...] = dst
        self.stats.add(bytes_d2h=host.nbytes)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        with self.on_stream(0):  # CuPy's pool hands out blocks per stream: stream 0's
            return self.cp.empty(shape, dtype=dtype, order="F")

    def close(self) -> None:
        """Wait for the streams, destroy the cuBLAS handles (both in the device's context), drop the tile
        memory and the pinned staging, and give CuPy's cached blocks on this device back to the driver
        (idempotent)."""
        if self._chunk is None and not self._handles:
            return
        with self._cpdev:
            for s, st in enumerate(self._streams):
                with self._locks[s]:
                    try:
                        self._host_wait(st)
                    except Exception:  # noqa: BLE001 - a failed stream must not keep the memory
                        pass
            cb = self.cublas
            for h in self._handles:
                try:
                    cb.destroy(h)
                except Exception:  # noqa: BLE001 - best effort at teardown
                    pass
            self._handles = []
            self._chunk = None
            self._in = self._out = []
            self._deferred = [[] for _ in range(self.streams)]
            self._marks = [[] for _ in range(self.streams)]
            self._keep = [[] for _ in range(self.streams)]
            _free_pools(self.cp)

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(index=self.index, gpu=_gpu_name(self.props), fallbacks=sorted(self._fallbacks),
                 host_transfer=self.host_transfer, transfers=dict(self.transfers))
        return d


def gpu_devices(memory: int | None = None, streams: int = 4) -> list[GPUDevice]:
    """One GPUDevice per CUDA device CuPy sees (empty without CuPy or a GPU)."""
    return [GPUDevice(i, memory=memory, streams=streams) for i in range(gpu_count())]


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)
