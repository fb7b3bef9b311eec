"""Device models: what a kind of device does, in numbers.

What it owns
    :class:`DeviceModel`, the figures the runtime reads to size tiles for a device and to split a call
    between device kinds, and the simulated devices run at (:mod:`tileblas.devices.sim`):

    * ``flops``: the rate of large tile kernels per precision (``"s"``, ``"d"``, ``"c"``, ``"z"``), in real
      flop/s (complex kernels count 4 real flops per multiply-add pair, as :func:`kernel_flops` does);
    * ``knee``: the tile edge at which a tile kernel runs at half that rate (:meth:`DeviceModel.rate`:
      ``peak / (1 + (knee / edge)**2)``, the shape the host runtime's ``Tuning.tile_rate_knee`` has);
    * the host link per direction (``h2d_bandwidth``, ``d2h_bandwidth``, ``*_latency``) and to peers
      (``peer_bandwidth``, ``peer_latency``; None: no peer link), for pinned or registered host memory;
    * ``memory`` (bytes for tiles) and ``streams``;
    * ``tile_candidates``: the tile sizes a call may get on this kind (largest first) and
      ``step_overhead_s``: the host's time per tile step (copy issue, kernel launch, events, cache
      bookkeeping: the runtime's Python, not the device), which weighs against small tiles.

    Presets: :meth:`DeviceModel.h100` (one H100 SXM 80 GB behind a PCIe host link, the GPU test
    machine's) and :meth:`DeviceModel.cpu_core` (one host core of that machine).  Their figures are
    *assumptions* from the data sheets, to be replaced by the first measurement (docs/measurements/gpu.md,
    "The simulated H100").

What it must not touch
    Devices themselves and the runtime: a model is data; :mod:`tileblas.runtime._shares` turns it into
    tile sizes and shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

__all__ = ["DeviceModel", "kernel_flops", "kernel_edge"]

_PRECISIONS = ("s", "d", "c", "z")


@dataclass(frozen=True)
class DeviceModel:
    """Figures of one device kind (see the module notes).  Rates in flop/s and bytes/s, times in seconds."""

    name: str
    flops: Mapping[str, float]
    h2d_bandwidth: float = 0.0
    d2h_bandwidth: float = 0.0
    h2d_latency: float = 1e-5
    d2h_latency: float = 1e-5
    peer_bandwidth: float | None = None
    peer_latency: float = 5e-6
    memory: int = 0
    streams: int = 4
    knee: float = 512.0
    tile_candidates: tuple = (8192, 4096, 2048, 1024)
    step_overhead_s: float = 1e-4
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        missing = [p for p in _PRECISIONS if not self.flops.get(p, 0) > 0]
        if missing:
            raise ValueError(f"flops must give a positive rate for each precision s, d, c, z; missing {missing}")
        for nm in ("h2d_bandwidth", "d2h_bandwidth"):
            if getattr(self, nm) < 0:
                raise ValueError(f"{nm} must be >= 0 bytes/s; got {getattr(self, nm)!r}")
        if self.peer_bandwidth is not None and not self.peer_bandwidth > 0:
            raise ValueError(f"peer_bandwidth must be > 0 or None; got {self.peer_bandwidth!r}")
        if self.streams < 1:
            raise ValueError(f"streams must be >= 1; got {self.streams!r}")
        if not self.tile_candidates or any(int(t) < 1 for t in self.tile_candidates):
            raise ValueError(f"tile_candidates must be positive ints; got {self.tile_candidates!r}")
        object.__setattr__(self, "tile_candidates", tuple(sorted({int(t) for t in self.tile_candidates},
                                                                 reverse=True)))
        object.__setattr__(self, "flops", {p: float(self.flops[p]) for p in _PRECISIONS})

    # ------------------------------------------------------------------ derived figures
    def peak(self, dtype: Any) -> float:
        """Large-tile kernel rate (real flop/s) for ``dtype`` (a NumPy dtype or its BLAS prefix)."""
        return self.flops[_prefix(dtype)]

    def rate(self, dtype: Any, edge: float) -> float:
        """Kernel rate for tiles whose smallest dimension is ``edge``."""
        e = max(float(edge), 1.0)
        return self.peak(dtype) / (1.0 + (self.knee / e) ** 2)

    def kernel_seconds(self, flops: float, dtype: Any, edge: float) -> float:
        """Seconds of a tile kernel of ``flops`` real flops whose smallest dimension is ``edge``."""
        return flops / self.rate(dtype, edge)

    def h2d_seconds(self, nbytes: float) -> float:
        return self.h2d_latency + nbytes / self.h2d_bandwidth if self.h2d_bandwidth else 0.0

    def d2h_seconds(self, nbytes: float) -> float:
        return self.d2h_latency + nbytes / self.d2h_bandwidth if self.d2h_bandwidth else 0.0

    def peer_seconds(self, nbytes: float) -> float:
        if self.peer_bandwidth is None:
            return float("inf")
        return self.peer_latency + nbytes / self.peer_bandwidth

    def with_(self, **changes: Any) -> "DeviceModel":
        """A copy with some figures changed (``memory=``, ``streams=``, ...)."""
        return replace(self, **changes)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "flops": dict(self.flops), "h2d_bandwidth": self.h2d_bandwidth,
                "d2h_bandwidth": self.d2h_bandwidth, "h2d_latency": self.h2d_latency,
                "d2h_latency": self.d2h_latency, "peer_bandwidth": self.peer_bandwidth, "memory": self.memory,
                "streams": self.streams, "knee": self.knee, "tile_candidates": list(self.tile_candidates),
                "step_overhead_s": self.step_overhead_s}

    # ------------------------------------------------------------------ presets
    @classmethod
    def h100(cls, memory: int | None = None, streams: int = 4, **changes: Any) -> "DeviceModel":
        """One NVIDIA H100 SXM 80 GB HBM3 behind a PCIe host link (the GPU test machine's).

        Assumed, not measured: cuBLAS dgemm/zgemm 55 TF/s (fp64 tensor cores; peak 67), sgemm/cgemm
        50 TF/s (no TF32; peak 67 on the CUDA cores); half rate at tile edge 512 (so 80 % at 1024, 94 % at
        2048); 25 GB/s per direction to pinned host memory, 10 us a copy; peers over NVLink 150 GB/s;
        tile memory: 72 GB (what a default GPUDevice takes of 80 GB: 80 % of the free memory, less a
        tenth); one tile step costs the runtime 100 us of host time.
        """
        kw: dict[str, Any] = dict(
            name="H100 SXM 80GB (PCIe host link)", flops={"d": 55e12, "z": 55e12, "s": 50e12, "c": 50e12},
            h2d_bandwidth=25e9, d2h_bandwidth=25e9, h2d_latency=10e-6, d2h_latency=10e-6,
            peer_bandwidth=150e9, peer_latency=5e-6, memory=72 * 10**9 if memory is None else int(memory),
            streams=streams, knee=512.0, tile_candidates=(8192, 4096, 2048, 1024), step_overhead_s=1e-4)
        kw.update(changes)
        return cls(**kw)

    @classmethod
    def cpu_core(cls, dgemm: float = 5e10, **changes: Any) -> "DeviceModel":
        """One host core computing in host memory (no link): ``dgemm`` flop/s in double precision, twice
        that in single (AVX-512 or AVX2 FMA); half rate at tile edge 96 (``Tuning.tile_rate_knee``)."""
        kw: dict[str, Any] = dict(name="host core", flops={"d": dgemm, "z": dgemm, "s": 2 * dgemm, "c": 2 * dgemm},
                                  memory=0, streams=1, knee=96.0, tile_candidates=(1024, 512, 384, 256, 192, 128),
                                  step_overhead_s=25e-6)
        kw.update(changes)
        return cls(**kw)


def _prefix(dtype: Any) -> str:
    if isinstance(dtype, str) and dtype in _PRECISIONS:
        return dtype
    return {"f": "s", "d": "d", "F": "c", "D": "z"}[np.dtype(dtype).char]


def kernel_flops(name: str, args: list, kwargs: dict) -> float:
    """Real flops of one tile-kernel call (complex counts 4x), from its arguments' shapes."""
    if name == "gemm":
        c, a = args[4], args[1]
        ta = args[5] if len(args) > 5 else kwargs.get("transa", "N")
        k = a.shape[1] if ta == "N" else a.shape[0]
        f = 2.0 * c.shape[0] * c.shape[1] * k
        dt = c.dtype
    elif name in ("symm", "hemm"):
        c, a = args[4], args[1]
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


def kernel_edge(name: str, args: list, kwargs: dict) -> int:
    """The smallest dimension of a tile-kernel call (what its efficiency depends on)."""
    if name == "axpy":
        y = args[2]
        return max(min(y.shape), 1)
    out = args[{"syrk": 3, "herk": 3, "trmm": 2, "trsm": 2}.get(name, 4)]
    a = args[1]
    return max(min(*out.shape, *a.shape), 1)
