"""The Device interface and the registry of device kinds.

What it owns: the contract every device kind fulfils (memory space, data movement, kernels, accounting)
and the table from kind names ("cpu", and later "sim", "gpu", "dask") to classes.
What it must not touch: scheduling decisions and cache policy (the runtime owns those).

A device computes on *device arrays* that live in its memory space.  For host devices the memory space is
the host's, so :meth:`Device.to_device` returns the host array itself (zero copy) and
:meth:`Device.to_host` writes nothing.  Devices with their own memory return a handle of their own kind;
the runtime never looks inside it, it only passes it back to the same device's kernels.
"""

from __future__ import annotations

import abc
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["Device", "DeviceError", "DeviceStats", "register_device_kind", "create_device", "device_kinds"]


class DeviceError(RuntimeError):
    """A device failed or was asked for something it cannot do."""


@dataclass
class DeviceStats:
    """Counters a device keeps; the runtime snapshots them around each call."""

    tasks: int = 0
    bytes_h2d: int = 0
    bytes_d2h: int = 0
    bytes_d2d: int = 0
    busy_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **kw: float) -> None:
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)

    def snapshot(self) -> dict[str, float]:
        with self.lock:
            return {
                "tasks": self.tasks,
                "bytes_h2d": self.bytes_h2d,
                "bytes_d2h": self.bytes_d2h,
                "bytes_d2d": self.bytes_d2d,
                "busy_s": self.busy_s,
            }


class Device(abc.ABC):
    """A place where tile tasks run.

    Attributes
    ----------
    kind : str
        Registry name of the device class ("cpu", ...).
    name : str
        Unique, human-readable name ("cpu0", ...).
    host_memory : bool
        True when the device computes directly on host memory (no copies needed).
    speed_hint : float
        Relative throughput guess used before any measurement (1.0 = one CPU core).
    """

    kind: str = "abstract"
    host_memory: bool = True

    def __init__(self, name: str, speed_hint: float = 1.0) -> None:
        self.name = name
        self.speed_hint = float(speed_hint)
        self.stats = DeviceStats()

    # ----------------------------------------------------------------- memory space
    @abc.abstractmethod
    def to_device(self, host: np.ndarray) -> Any:
        """Make ``host`` (a tile of a host matrix) available on the device; returns a device array."""

    @abc.abstractmethod
    def to_host(self, dev: Any, host: np.ndarray) -> None:
        """Write the device array ``dev`` back into the host tile ``host``."""

    @abc.abstractmethod
    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An uninitialised device array."""

    def synchronize(self) -> None:
        """Wait until all work queued on this device has finished (host devices: nothing to wait for)."""

    # ----------------------------------------------------------------- kernels
    @abc.abstractmethod
    def kernel(self, name: str) -> Callable[..., None]:
        """The device's implementation of a Level-3 tile kernel (gemm, symm, hemm, syrk, herk, syr2k,
        her2k, trmm, trsm) with the argument order of :mod:`tileblas.kernels._openblas`, working on device arrays."""

    def shared_kernel(self, name: str, threads: int) -> Callable[..., None] | None:
        """The kernel ``name`` running on ``threads`` cores of this device's memory space at once, for a call
        too small to tile across devices that share those cores (host CPU workers); None where the device
        has no such kernel.  ``threads`` counts the BLAS threads of all the sharing devices together."""
        return None

    #: BLAS threads one kernel call of this device uses (0: not a thread pool of the host).
    threads: int = 0

    def close(self) -> None:
        """Release the device's resources."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "host_memory": self.host_memory}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


_REGISTRY: dict[str, Callable[..., Device]] = {}


def register_device_kind(kind: str, factory: Callable[..., Device]) -> None:
    """Register a device kind so that ``create_device(kind, ...)`` and runtime specs can name it."""
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind must be a non-empty str; got {kind!r}")
    _REGISTRY[kind] = factory


def device_kinds() -> list[str]:
    """Names of the registered device kinds."""
    return sorted(_REGISTRY)


def create_device(kind: str, *args: Any, **kwargs: Any) -> Device:
    """Create a device of a registered kind."""
    try:
        factory = _REGISTRY[kind]
    except KeyError:
        raise ValueError(f"unknown device kind {kind!r}; known kinds: {', '.join(device_kinds())}") from None
    return factory(*args, **kwargs)
