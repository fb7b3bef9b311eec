"""Simulated discrete devices: a memory space of their own on the host, with real copies or a model.

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
    * ``streams``: each stream is driven by one runtime worker thread; with real kernels operations run
      synchronously in that thread, holding the engine they need (incoming copy, outgoing copy or
      compute), so the copies of one stream overlap the kernels of another exactly as on a GPU with copy
      engines;
    * ``kernels="modeled"``: no arithmetic and no data at all (the chunk is not allocated, copies move
      nothing), and the streams are asynchronous as a GPU's: an operation is issued and returns at once;
      it is given a start and an end on a virtual timeline (the host's ``perf_counter`` clock): after the
      stream's previous operation and the events it waits for, in the first gap of its engine (copy in,
      copy out, compute) long enough to hold it; ``record`` gives an event completing at the stream's end,
      and ``sync`` sleeps until then.  A kernel lasts ``flops / flop_rate`` seconds, or what the device
      model says (``model=``: :class:`~tileblas.devices._model.DeviceModel`, per precision and tile edge;
      copies per direction).  Communication volumes, cache behaviour, the schedule and the overlap are
      those of the real runtime, so large problems on fast devices can be studied on a small machine;
      results are of course not computed.  ``time_scale`` stretches every modeled duration (a slower
      device at the same ratios, for a host too slow to keep up with the modeled one).

    :meth:`SimDevice.h100` is one simulated H100 (:meth:`~tileblas.devices._model.DeviceModel.h100`);
    :class:`SimHostDevice` a host core that sleeps for its modeled kernels (a CPU worker of the simulated
    machine, costing this machine nothing); :func:`sim_machine` a whole machine of them (``"h100"``: GPUs
    and 16 cores, the GPU test machine).

What it must not touch
    Cache policy and scheduling (the runtime's), and other devices' memory except through :meth:`d2d`.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

from tileblas.kernels import _openblas
from tileblas.devices._base import Device, register_device_kind
from tileblas.devices._discrete import DONE, DiscreteDevice, Event
from tileblas.devices._filetiles import read_tile, write_tile
from tileblas.devices._model import DeviceModel, kernel_edge, kernel_flops

__all__ = ["SimDevice", "SimHostDevice", "StagedDevice", "VirtualEvent", "sim_devices", "sim_machine", "placeholder",
           "kernel_flops", "MACHINES"]

_KERNELS = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm", "axpy")


def _sleep_until(t: float) -> None:
    clock = time.perf_counter
    while True:
        rest = t - clock()
        if rest <= 0:
            return
        time.sleep(rest)


class VirtualEvent(Event):
    """An event of a modeled stream: complete at virtual time ``t`` (the host's perf_counter clock)."""

    __slots__ = ("t",)

    def __init__(self, t: float) -> None:
        self.t = t

    def query(self) -> bool:
        return time.perf_counter() >= self.t

    def synchronize(self) -> None:
        _sleep_until(self.t)


class _Engine:
    """The busy intervals of one engine of a modeled device (copy in, copy out or compute), from now on."""

    __slots__ = ("busy",)

    def __init__(self) -> None:
        self.busy: list[tuple[float, float]] = []

    def reserve(self, ready: float, dur: float, now: float) -> float:
        """Start of the first gap from ``ready`` on that holds ``dur`` seconds; the gap is taken."""
        b = self.busy
        gone = 0
        while gone < len(b) and b[gone][1] <= now:
            gone += 1
        if gone:
            del b[:gone]
        t = ready
        for i, (s, e) in enumerate(b):
            if t + dur <= s:
                b.insert(i, (t, t + dur))
                return t
            if e > t:
                t = e
        b.append((t, t + dur))
        return t


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
    memory : int, optional
        Bytes of device memory (default: the model's, else 2 GiB; pages are only touched when tiles land
        there).
    streams : int, optional
        Number of streams (default: the model's, else 4).
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
        Compute for real on the CPU, or only model the time (``flop_rate`` or the model) and move no data.
    flop_rate : float
        Modeled compute rate in flop/s for ``kernels="modeled"`` without a model.
    threads : int
        BLAS threads per kernel for ``kernels="real"``.
    model : DeviceModel, optional
        The device's figures (rates per precision and tile edge, link per direction, peers, memory,
        streams); they replace ``bandwidth``, ``latency``, ``peer_*`` and ``flop_rate``.  The runtime sizes
        the tiles of a device that has a model from the model
        (docs/measurements/gpu.md, "Tiles per device kind").
    time_scale : float
        Multiplies every modeled duration (>= 1 slows the simulated device down at the same ratios).
    """

    kind = "sim"

    def __init__(self, index: int = 0, memory: int | None = None, streams: int | None = None,
                 bandwidth: float | None = None, latency: float = 0.0, peer_bandwidth: float | None = None,
                 peer_latency: float | None = None, peer: bool = True, kernels: str = "real",
                 flop_rate: float = 2e10, threads: int = 1, model: DeviceModel | None = None,
                 time_scale: float = 1.0) -> None:
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
        if model is not None and not isinstance(model, DeviceModel):
            raise TypeError(f"model must be a DeviceModel or None; got {type(model).__name__}")
        if isinstance(time_scale, bool) or not (isinstance(time_scale, (int, float)) and time_scale > 0):
            raise ValueError(f"time_scale must be a positive number; got {time_scale!r}")
        threads = int(threads)
        if threads < 1:
            raise ValueError(f"threads must be >= 1; got {threads}")
        if memory is None:
            memory = model.memory if model is not None and model.memory else 2 << 30
        if streams is None:
            streams = model.streams if model is not None else 4
        super().__init__(f"sim{index}", memory, streams, speed_hint=float(threads))
        self.model = model
        if model is not None:
            bandwidth = model.h2d_bandwidth or None
            latency = model.h2d_latency
            peer_bandwidth, peer_latency = model.peer_bandwidth, model.peer_latency
            peer = peer and model.peer_bandwidth is not None
            flop_rate = model.peak("d")
            self.speed_hint = model.peak("d") / 3e10  # one host core's rate is about 3e10
        self.bandwidth = None if bandwidth is None else float(bandwidth)
        self.latency = float(latency)
        if peer_bandwidth is None and self.bandwidth is not None:
            peer_bandwidth = 1.2 * self.bandwidth
        self.peer_bandwidth = None if peer_bandwidth is None else float(peer_bandwidth)
        self.peer_latency = self.latency if peer_latency is None else float(peer_latency)
        self.peer = bool(peer)
        self.modeled = kernels == "modeled"
        self.flop_rate = float(flop_rate)
        self.time_scale = float(time_scale)
        self.threads = threads
        self._chunk: np.ndarray | None = None
        self._chunk_lock = threading.Lock()
        self._engine = {"in": threading.Lock(), "out": threading.Lock(), "compute": threading.Lock()}
        self._kernels: dict[str, Callable[..., None]] = {}
        # the virtual timeline of modeled streams: when each stream's last operation ends, each engine's
        # busy intervals
        self._vlock = threading.Lock()
        self._vready = [0.0] * self.streams
        self._vengines = {"in": _Engine(), "out": _Engine(), "compute": _Engine()}

    @classmethod
    def h100(cls, index: int = 0, memory: int | None = None, streams: int | None = None, time_scale: float = 1.0,
             **changes: Any) -> "SimDevice":
        """A simulated H100 (:meth:`DeviceModel.h100 <tileblas.devices._model.DeviceModel.h100>`): modeled
        kernels and link; ``memory`` bytes of tile memory (default the model's 72 GB), ``changes`` to
        the model's figures."""
        model = DeviceModel.h100(memory=memory, **({"streams": streams} if streams else {}), **changes)
        return cls(index, model=model, kernels="modeled", time_scale=time_scale)

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

    # ----------------------------------------------------------------- modeled durations
    def _link_seconds(self, what: str, nbytes: int) -> float:
        m = self.model
        if m is not None:
            secs = m.h2d_seconds(nbytes) if what == "h2d" else (
                m.d2h_seconds(nbytes) if what == "d2h" else m.peer_seconds(nbytes))
        elif what == "d2d":
            secs = self.peer_latency + (nbytes / self.peer_bandwidth if self.peer_bandwidth else 0.0)
        else:
            secs = self.latency + (nbytes / self.bandwidth if self.bandwidth else 0.0)
        return secs * self.time_scale

    def _kernel_seconds(self, name: str, args: list, kwargs: dict) -> float:
        flops = kernel_flops(name, args, kwargs)
        m = self.model
        if m is None:
            return flops / self.flop_rate * self.time_scale
        dt = args[2].dtype if name in ("trmm", "trsm", "axpy") else args[-1].dtype if name in (
            "syrk", "herk") else args[4].dtype
        return m.kernel_seconds(flops, dt, kernel_edge(name, args, kwargs)) * self.time_scale

    def _issue(self, engine: str, stream: int, what: str, dur: float) -> None:
        """A modeled operation on ``stream``: placed on the virtual timeline, returns at once."""
        with self._vlock:
            now = time.perf_counter()
            ready = max(now, self._vready[stream])
            start = self._vengines[engine].reserve(ready, dur, now)
            end = self._vready[stream] = start + dur
            self._log(stream, what, start, end)

    # ----------------------------------------------------------------- copies
    def _copy(self, engine: str, what: str, stream: int, nbytes: int, do: Callable[[], None] | None) -> None:
        if self.modeled:
            self._issue(engine, stream, what, self._link_seconds(what, nbytes))
            return
        clock = time.perf_counter
        model_link = self.model is not None or (self.peer_bandwidth if what == "d2d" else self.bandwidth) \
            or (self.peer_latency if what == "d2d" else self.latency)
        with self._engine[engine]:
            t0 = clock()
            if do is not None:
                do()
            if model_link:
                rest = t0 + self._link_seconds(what, nbytes) - clock()
                if rest > 0:
                    time.sleep(rest)
            t1 = clock()
        self._log(stream, what, t0, t1)

    def h2d(self, dst: Any, host: np.ndarray, stream: int) -> None:
        n = host.size * host.itemsize
        self._copy("in", "h2d", stream, n, lambda: read_tile(dst, host))
        self.stats.add(bytes_h2d=n)

    def d2h(self, src: Any, host: np.ndarray, stream: int) -> None:
        n = host.size * host.itemsize
        self._copy("out", "d2h", stream, n, lambda: write_tile(host, src))
        self.stats.add(bytes_d2h=n)

    def d2d(self, dst: Any, peer: DiscreteDevice, src: Any, stream: int) -> None:
        if not self.can_access_peer(peer):
            raise ValueError(f"{self.name} cannot copy from {peer.name}")
        n = int(np.prod(dst.shape)) * np.dtype(dst.dtype).itemsize
        self._copy("in", "d2d", stream, n, lambda: np.copyto(dst, src))
        self.stats.add(bytes_d2d=n)

    def can_access_peer(self, other: Any) -> bool:
        return (other is not self and isinstance(other, SimDevice) and self.peer and other.peer
                and self.modeled == other.modeled)

    def transfer_seconds(self, nbytes: int, peer: Any = None) -> float:
        if self.model is not None:
            return self.model.h2d_seconds(nbytes) if peer is None else self.model.peer_seconds(nbytes)
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
        if self.modeled:
            if name not in _KERNELS:
                raise ValueError(f"unknown kernel {name!r}; simulated-device kernels: {', '.join(_KERNELS)}")
            self._issue("compute", stream, "kernel", self._kernel_seconds(name, args, kwargs))
            return
        clock = time.perf_counter
        fn = self._kernel_fn(name)
        with self._engine["compute"]:
            t0 = clock()
            fn(*args, **kwargs)
            t1 = clock()
        self._log(stream, "kernel", t0, t1)

    def record(self, stream: int) -> Event:
        if self.modeled:
            with self._vlock:
                return VirtualEvent(self._vready[stream])
        return DONE  # operations run synchronously in the stream's thread

    def wait(self, stream: int, event: Event) -> None:
        if self.modeled and isinstance(event, VirtualEvent):
            with self._vlock:
                if event.t > self._vready[stream]:
                    self._vready[stream] = event.t
            return
        event.synchronize()

    def sync(self, stream: int) -> None:
        if self.modeled:
            with self._vlock:
                t = self._vready[stream]
            _sleep_until(t)

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
        if self.model is not None:
            d.update(model=self.model.name, time_scale=self.time_scale)
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


class SimHostDevice(Device):
    """A simulated host CPU worker: computes in host memory (no copies) and, instead of computing, sleeps
    for the time its model gives a tile kernel (:meth:`DeviceModel.cpu_core
    <tileblas.devices.DeviceModel.cpu_core>` by default).  The CPU workers of a simulated machine:
    sixteen of them cost this machine sixteen sleeping threads.  Nothing is computed or written."""

    kind = "simcpu"
    host_memory = True
    threads = 0  # not a thread pool of this host: no shared native path

    def __init__(self, index: int = 0, model: DeviceModel | None = None, time_scale: float = 1.0) -> None:
        if model is not None and not isinstance(model, DeviceModel):
            raise TypeError(f"model must be a DeviceModel or None; got {type(model).__name__}")
        if isinstance(time_scale, bool) or not (isinstance(time_scale, (int, float)) and time_scale > 0):
            raise ValueError(f"time_scale must be a positive number; got {time_scale!r}")
        self.model = model or DeviceModel.cpu_core()
        super().__init__(f"simcpu{index}", speed_hint=self.model.peak("d") / 3e10)
        self.time_scale = float(time_scale)
        self._until = threading.local()  # per worker thread: where its modeled kernels end

    #: A kernel returns early while its thread's modeled work ends less than this far ahead (sleeps of a
    #: few tens of microseconds overshoot by as much): the debt is slept off with the next kernels.
    SLACK_S = 1e-3

    def _sleep(self, secs: float) -> None:
        now = time.perf_counter()
        until = max(getattr(self._until, "t", 0.0), now) + secs
        self._until.t = until
        if until - now > self.SLACK_S:
            _sleep_until(until - self.SLACK_S / 2)

    def to_device(self, host: np.ndarray) -> np.ndarray:
        return host

    def to_host(self, dev: np.ndarray, host: np.ndarray) -> None:
        return None

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype=dtype, order="F")

    def kernel(self, name: str) -> Callable[..., None]:
        if name not in _KERNELS:
            raise ValueError(f"unknown kernel {name!r}; simulated-device kernels: {', '.join(_KERNELS)}")
        model, scale = self.model, self.time_scale

        def run(*args: Any, **kwargs: Any) -> None:
            args = list(args)
            dt = args[2].dtype if name in ("trmm", "trsm", "axpy") else args[-1].dtype if name in (
                "syrk", "herk") else args[4].dtype
            secs = model.kernel_seconds(kernel_flops(name, args, kwargs), dt, kernel_edge(name, args, kwargs))
            self._sleep(secs * scale)

        run.__name__ = name
        return run

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(model=self.model.name, time_scale=self.time_scale)
        return d


def placeholder(shape: tuple[int, int], dtype: Any = np.float64) -> np.ndarray:
    """A host operand of ``shape`` backed by one element (zero strides), for calls on modeled devices
    only (:class:`SimDevice` with ``kernels="modeled"``, :class:`SimHostDevice`), which never read or
    write host data: a 65536 x 65536 call costs this machine no memory.  Each call gives a new element,
    so two placeholders are two matrices to the runtime's tile caches."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype=dtype), shape=tuple(int(x) for x in shape),
                                           strides=(0, 0), writeable=True)


#: Simulated machines: name -> (accelerator preset, CPU cores, what it stands for).
MACHINES: dict[str, tuple[Callable[..., SimDevice], int, str]] = {
    "h100": (SimDevice.h100, 16, "the GPU test machine: H100 SXM 80 GB on PCIe, 16 host cores"),
}


def sim_machine(machine: str = "h100", gpus: int = 1, cpus: int | None = None, memory: int | None = None,
                streams: int | None = None, time_scale: float = 1.0, core: DeviceModel | None = None) -> list:
    """The devices of a simulated machine: ``gpus`` modeled accelerators (``memory`` bytes of tile memory
    each, default the model's) then ``cpus`` simulated CPU workers (default: the machine's cores less one
    per accelerator stream, whose worker thread drives it, as a real run should leave them; 0: none).  ``machine="h100"``: H100s
    and 16 cores."""
    if machine not in MACHINES:
        raise ValueError(f"machine must be one of {', '.join(map(repr, MACHINES))}; got {machine!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, (int, np.integer)) or gpus < 0:
        raise ValueError(f"gpus must be an int >= 0; got {gpus!r}")
    make, cores, _ = MACHINES[machine]
    if cpus is None:  # one core for each accelerator stream's worker thread
        cpus = max(cores - gpus * (streams or DeviceModel.h100().streams), 0)
    if isinstance(cpus, bool) or not isinstance(cpus, (int, np.integer)) or cpus < 0:
        raise ValueError(f"cpus must be an int >= 0; got {cpus!r}")
    if gpus + cpus < 1:
        raise ValueError("a simulated machine needs at least one device (gpus + cpus >= 1)")
    devs: list = [make(i, memory=memory, streams=streams, time_scale=time_scale) for i in range(int(gpus))]
    devs += [SimHostDevice(i, core, time_scale) for i in range(int(cpus))]
    return devs


register_device_kind("sim", SimDevice)
register_device_kind("staged", StagedDevice)
register_device_kind("simcpu", SimHostDevice)


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)
