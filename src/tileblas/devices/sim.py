"""Simulated discrete devices: a memory space of their own on the host, with real copies.

What it owns
    :class:`SimDevice`, a :class:`~tileblas.devices._discrete.DiscreteDevice` that keeps its tiles in a
    private chunk of host memory (so every tile the runtime uses must really be copied there and back),
    computes with the CPU kernel layer, and can model the link to it:

    * ``bandwidth`` / ``latency``: a copy between host and device holds the device's copy engine for
      ``latency + nbytes / bandwidth`` seconds (at least as long as the real copy took), like a PCIe DMA
      engine; host-to-device and device-to-host have one engine each (full duplex);
    * ``peer_bandwidth`` / ``peer_latency``: the same for device-to-device copies from a peer (they use
      the receiving device's incoming engine);
    * ``memory``: the chunk size, i.e. the cap that makes out-of-core execution testable;
    * tiles of operands that live in files (``numpy.memmap``) are read and written with pread/pwrite
      (:mod:`tileblas.devices._filetiles`), so the process holds only its chunk however large the files;
    * ``streams``: each stream is driven by one runtime worker thread; operations run synchronously in
      that thread, holding the engine they need (incoming copy, outgoing copy or compute), so the copies
      of one stream overlap the kernels of another exactly as on a GPU with copy engines;
    * ``kernels="modeled"``: no arithmetic and no data at all (the chunk is not allocated, copies move
      nothing): a kernel holds the compute engine for ``flops / flop_rate`` seconds.  Communication
      volumes and cache behaviour are those of the real runtime, so large problems can be studied on a
      small machine; results are of course not computed.

What it must not touch
    Cache policy and scheduling (the runtime's), and other devices' memory except through :meth:`d2d`.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

from tileblas.kernels import _openblas
from tileblas.devices._base import register_device_kind
from tileblas.devices._discrete import DONE, DiscreteDevice, Event
from tileblas.devices._filetiles import read_tile, write_tile

__all__ = ["SimDevice", "StagedDevice", "sim_devices", "kernel_flops"]

_KERNELS = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm", "axpy")


def kernel_flops(name: str, args: list, kwargs: dict) -> float:
    """Real flops of one tile-kernel call (complex counts 4x), from its arguments' shapes."""
    if name == "gemm":
        c, a = args[4], args[1]
        ta = args[5] if len(args) > 5 else kwargs.get("transa", "N")
        k = a.shape[1] if ta == "N" else a.shape[0]
        f = 2.0 * c.shape[0] * c.shape[1] * k
        dt = c.dtype
    elif name in ("symm", "hemm"):
        c, a = args[4], args[0 + 1]
        f = 2.0 * c.shape[0] * c.shape[1] * a.shape[0]
        dt = c.dtype
    elif name in ("syrk", "herk", "syr2k", "her2k"):
        c, a = args[-1], args[1]
        k = a.shape[1] if kwargs.get("trans", "N") == "N" else a.shape[0]
        f = (1.0 if name in ("syrk", "herk") else 2.0) * c.shape[0] * (c.shape[0] + 1) * k
        dt = c.dtype
    elif name in ("trmm", "trsm"):
        a, b = args[1], args[2]
        f = 1.0 * b.shape[0] * b.shape[1] * a.shape[0]
        dt = b.dtype
    else:  # axpy
        y = args[2]
        f = 2.0 * y.shape[0] * y.shape[1]
        dt = y.dtype
    return f * (4.0 if np.dtype(dt).kind == "c" else 1.0)


class _Ghost:
    """A device array without data (``kernels='modeled'``): shape, dtype and size only."""

    __slots__ = ("shape", "dtype", "nbytes")

    def __init__(self, shape: tuple[int, int], dtype: Any) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize

    @property
    def T(self) -> "_Ghost":  # noqa: N802 - mirrors ndarray.T
        return _Ghost(self.shape[::-1], self.dtype)


class SimDevice(DiscreteDevice):
    """A simulated discrete device (see the module notes).

    Parameters
    ----------
    index : int
        Number in the device name (``sim<index>``).
    memory : int
        Bytes of device memory (default 2 GiB; pages are only touched when tiles land there).
    streams : int
        Number of streams (default 4).
    bandwidth : float, optional
        Modeled host link bandwidth, bytes/s (None: copies cost what the real memcpy costs).
    latency : float
        Modeled per-copy latency, seconds.
    peer_bandwidth, peer_latency : float, optional
        Modeled device-to-device link (default: the host link's latency and 1.2x its bandwidth, the
        advantage BLASX measured for GPU peer copies).
    peer : bool
        Whether this device can copy from other simulated devices (L2 tile cache).
    kernels : {"real", "modeled"}
        Compute for real on the CPU, or only model the time (``flop_rate``) and move no data.
    flop_rate : float
        Modeled compute rate in flop/s for ``kernels="modeled"``.
    threads : int
        BLAS threads per kernel for ``kernels="real"``.
    """

    kind = "sim"

    def __init__(self, index: int = 0, memory: int = 2 << 30, streams: int = 4, bandwidth: float | None = None,
                 latency: float = 0.0, peer_bandwidth: float | None = None, peer_latency: float | None = None,
                 peer: bool = True, kernels: str = "real", flop_rate: float = 2e10, threads: int = 1) -> None:
        if kernels not in ("real", "modeled"):
            raise ValueError(f"kernels must be 'real' or 'modeled'; got {kernels!r}")
        for nm, v in (("bandwidth", bandwidth), ("peer_bandwidth", peer_bandwidth)):
            if v is not None and not (isinstance(v, (int, float)) and v > 0):
                raise ValueError(f"{nm} must be a positive number of bytes/s or None; got {v!r}")
        for nm, v in (("latency", latency), ("peer_latency", peer_latency)):
            if v is not None and not (isinstance(v, (int, float)) and v >= 0):
                raise ValueError(f"{nm} must be a non-negative number of seconds; got {v!r}")
        if not (isinstance(flop_rate, (int, float)) and flop_rate > 0):
            raise ValueError(f"flop_rate must be a positive number of flop/s; got {flop_rate!r}")
        threads = int(threads)
        if threads < 1:
            raise ValueError(f"threads must be >= 1; got {threads}")
        super().__init__(f"sim{index}", memory, streams, speed_hint=float(threads))
        self.bandwidth = None if bandwidth is None else float(bandwidth)
        self.latency = float(latency)
        if peer_bandwidth is None and self.bandwidth is not None:
            peer_bandwidth = 1.2 * self.bandwidth
        self.peer_bandwidth = None if peer_bandwidth is None else float(peer_bandwidth)
        self.peer_latency = self.latency if peer_latency is None else float(peer_latency)
        self.peer = bool(peer)
        self.modeled = kernels == "modeled"
        self.flop_rate = float(flop_rate)
        self.threads = threads
        self._chunk: np.ndarray | None = None
        self._chunk_lock = threading.Lock()
        self._engine = {"in": threading.Lock(), "out": threading.Lock(), "compute": threading.Lock()}
        self._kernels: dict[str, Callable[..., None]] = {}

    # ----------------------------------------------------------------- memory
    @property
    def chunk(self) -> np.ndarray:
        """The device's memory (allocated on first use; untouched pages cost nothing)."""
        if self._chunk is None:
            with self._chunk_lock:
                if self._chunk is None:
                    self._chunk = np.empty(self.memory_bytes, dtype=np.uint8)
        return self._chunk

    def view(self, offset: int, shape: tuple[int, int], dtype: Any) -> Any:
        dt = np.dtype(dtype)
        if self.modeled:
            return _Ghost(shape, dt)
        nbytes = int(shape[0]) * int(shape[1]) * dt.itemsize
        if offset < 0 or offset + nbytes > self.memory_bytes:
            raise ValueError(f"offset {offset} + {nbytes} bytes is outside the {self.memory_bytes} bytes of "
                             f"{self.name}")
        raw = self.chunk[offset:offset + nbytes]
        return raw.view(dt).reshape(shape, order="F")

    def owns(self, arr: Any) -> bool:
        """True when ``arr`` lives in this device's memory."""
        if self.modeled:
            return isinstance(arr, _Ghost)
        return self._chunk is not None and isinstance(arr, np.ndarray) and np.shares_memory(arr, self._chunk)

    # ----------------------------------------------------------------- copies
    def _copy(self, engine: str, what: str, stream: int, nbytes: int, bw: float | None, lat: float,
              do: Callable[[], None] | None) -> None:
        clock = time.perf_counter
        with self._engine[engine]:
            t0 = clock()
            if do is not None and not self.modeled:
                do()
            if bw is not None or lat:
                end = t0 + lat + (nbytes / bw if bw else 0.0)
                rest = end - clock()
                if rest > 0:
                    time.sleep(rest)
            t1 = clock()
        self._log(stream, what, t0, t1)

    def h2d(self, dst: Any, host: np.ndarray, stream: int) -> None:
        n = host.size * host.itemsize
        self._copy("in", "h2d", stream, n, self.bandwidth, self.latency, lambda: read_tile(dst, host))
        self.stats.add(bytes_h2d=n)

    def d2h(self, src: Any, host: np.ndarray, stream: int) -> None:
        n = host.size * host.itemsize
        self._copy("out", "d2h", stream, n, self.bandwidth, self.latency, lambda: write_tile(host, src))
        self.stats.add(bytes_d2h=n)

    def d2d(self, dst: Any, peer: DiscreteDevice, src: Any, stream: int) -> None:
        if not self.can_access_peer(peer):
            raise ValueError(f"{self.name} cannot copy from {peer.name}")
        n = int(np.prod(dst.shape)) * np.dtype(dst.dtype).itemsize
        self._copy("in", "d2d", stream, n, self.peer_bandwidth, self.peer_latency, lambda: np.copyto(dst, src))
        self.stats.add(bytes_d2d=n)

    def can_access_peer(self, other: Any) -> bool:
        return (other is not self and isinstance(other, SimDevice) and self.peer and other.peer
                and self.modeled == other.modeled)

    def transfer_seconds(self, nbytes: int, peer: Any = None) -> float:
        if peer is None:
            bw, lat = (self.bandwidth or 12e9), self.latency
        else:
            bw, lat = (self.peer_bandwidth or 1.2 * 12e9), self.peer_latency
        return lat + nbytes / bw

    # ----------------------------------------------------------------- kernels and streams
    def _kernel_fn(self, name: str) -> Callable[..., None]:
        fn = self._kernels.get(name)
        if fn is None:
            if name not in _KERNELS:
                raise ValueError(f"unknown kernel {name!r}; simulated-device kernels: {', '.join(_KERNELS)}")
            if name == "axpy":
                fn = _openblas.split_k_axpy
            else:
                base = getattr(_openblas, name)
                lib = _openblas.get_library(self.threads)

                def fn(*args: Any, _base=base, _lib=lib, **kw: Any) -> None:
                    _base(*args, lib=_lib, **kw)

            self._kernels[name] = fn
        return fn

    def launch(self, name: str, args: list, kwargs: dict, stream: int) -> None:
        clock = time.perf_counter
        if self.modeled:
            if name not in _KERNELS:
                raise ValueError(f"unknown kernel {name!r}; simulated-device kernels: {', '.join(_KERNELS)}")
            secs = kernel_flops(name, args, kwargs) / self.flop_rate
            with self._engine["compute"]:
                t0 = clock()
                time.sleep(secs)
                t1 = clock()
        else:
            fn = self._kernel_fn(name)
            with self._engine["compute"]:
                t0 = clock()
                fn(*args, **kwargs)
                t1 = clock()
        self._log(stream, "kernel", t0, t1)

    def record(self, stream: int) -> Event:
        return DONE  # operations run synchronously in the stream's thread

    def sync(self, stream: int) -> None:
        return None

    # ----------------------------------------------------------------- plain Device interface
    def to_device(self, host: np.ndarray) -> np.ndarray:
        out = np.array(host, order="F", copy=True)
        self.stats.add(bytes_h2d=out.nbytes)
        return out

    def to_host(self, dev: np.ndarray, host: np.ndarray) -> None:
        host[...] = dev
        self.stats.add(bytes_d2h=host.nbytes)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype=dtype, order="F")

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(bandwidth=self.bandwidth, latency=self.latency, peer_bandwidth=self.peer_bandwidth,
                 kernels="modeled" if self.modeled else "real")
        return d


class StagedDevice(SimDevice):
    """A host CPU worker whose tiles live in a bounded buffer of host memory (``memory`` bytes).

    Operands stay where they are, in memory or in files (``numpy.memmap``): the runtime copies each tile a
    task needs into the buffer (from a file with ``pread``), keeps recently used tiles there (the tile
    cache of devices with their own memory), and writes finished output tiles back (to a file with
    ``pwrite``).  This is what ``Runtime(host_memory=...)`` runs on: operands larger than memory, with the
    process's memory bounded by the buffers.  Copies are real and not modeled; ``streams`` (default 2)
    let one stream's reads overlap another's kernels.
    """

    kind = "staged"

    def __init__(self, index: int = 0, memory: int = 1 << 30, streams: int = 2, threads: int = 1) -> None:
        super().__init__(index, memory=memory, streams=streams, threads=threads)
        self.name = f"staged{index}"


def sim_devices(count: int, **kwargs: Any) -> list[SimDevice]:
    """``count`` simulated devices with the same parameters (see :class:`SimDevice`)."""
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"count must be a positive int; got {count!r}")
    return [SimDevice(i, **kwargs) for i in range(int(count))]


register_device_kind("sim", SimDevice)
register_device_kind("staged", StagedDevice)
