"""The host CPU device: memory space = host memory, kernels = the GIL-free kernel layer.

A CPUDevice runs its kernels on an OpenBLAS instance with a fixed thread count (1 for the usual tile
workers; more for the optional multithreaded CPU worker that takes larger tiles, the BLASX paper's "CPU
computation thread").  Device arrays are host arrays, so moving data costs nothing.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tileblas.kernels import _openblas
from tileblas.kernels import _recursive
from tileblas.kernels._threadpool import cpu_count
from tileblas.devices._base import Device, register_device_kind
from tileblas.policy._recursion import recursion_faster, recursion_stop

__all__ = ["CPUDevice", "host_devices", "cpu_count", "recursion_faster"]

_KERNELS = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")

# cpu_count lives in tileblas.kernels._threadpool and recursion_faster in tileblas.policy._recursion (the
# decision the runtime reads); both are re-exported here, their old home.


def _triangular_kernel(native: Callable[..., None], recursive: Callable[..., None],
                       lib: _openblas.BlasLibrary, kind: str) -> Callable[..., None]:
    """trmm/trsm on ``lib``: the recursive algorithm where it measured faster
    (:func:`~tileblas.policy._recursion.recursion_faster`), with the stopping size of
    :func:`~tileblas.policy._recursion.recursion_stop`."""

    def run(alpha: Any, a: np.ndarray, b: np.ndarray, side: str = "L", uplo: str = "U", transa: str = "N",
            diag: str = "N") -> None:
        rhs = b.shape[1] if side == "L" else b.shape[0]
        if recursion_faster(a.shape[0], rhs, lib.threads, kind, b.dtype.char, side):
            recursive(alpha, a, b, side, uplo, transa, diag, lib=lib, stop=recursion_stop(kind, side, rhs, b.dtype))
        else:
            native(alpha, a, b, side, uplo, transa, diag, lib=lib)

    return run


def _make_kernel(name: str, lib: _openblas.BlasLibrary) -> Callable[..., None]:
    if name not in _KERNELS:
        raise ValueError(f"unknown kernel {name!r}; CPU kernels: {', '.join(_KERNELS)}")
    fn = getattr(_openblas, name)
    if name in ("trmm", "trsm"):
        run = _triangular_kernel(fn, getattr(_recursive, "recursive_" + name), lib, name)
    else:
        def run(*args: Any, **kwargs: Any) -> None:
            kwargs["lib"] = lib
            fn(*args, **kwargs)

    run.__name__ = name
    return run


class CPUDevice(Device):
    """A host CPU worker.

    Parameters
    ----------
    index : int
        Number used in the device name (``cpu<index>``).
    threads : int
        BLAS threads each kernel call uses.  1 for tile workers; more makes a multithreaded worker.
    """

    kind = "cpu"
    host_memory = True

    def __init__(self, index: int = 0, threads: int = 1) -> None:
        threads = int(threads)
        if threads < 1:
            raise ValueError(f"threads must be >= 1; got {threads}")
        super().__init__(f"cpu{index}" if threads == 1 else f"cpu{index}x{threads}", speed_hint=float(threads))
        self.threads = threads
        self._lib: _openblas.BlasLibrary | None = None
        self._kernels: dict[str, Callable[..., None]] = {}

    @property
    def library(self) -> _openblas.BlasLibrary:
        if self._lib is None:
            self._lib = _openblas.get_library(self.threads)
        return self._lib

    def to_device(self, host: np.ndarray) -> np.ndarray:
        return host

    def to_host(self, dev: np.ndarray, host: np.ndarray) -> None:
        if dev is not host and not np.shares_memory(dev, host):
            host[...] = dev

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype=dtype, order="F")

    def kernel(self, name: str) -> Callable[..., None]:
        try:
            return self._kernels[name]
        except KeyError:
            pass
        run = _make_kernel(name, self.library)
        self._kernels[name] = run
        return run

    def shared_kernel(self, name: str, threads: int) -> Callable[..., None] | None:
        """The kernel on tileblas' OpenBLAS with ``threads`` threads (this worker and the host workers that
        share its cores, computing one call together)."""
        threads = int(threads)
        if threads <= self.threads:
            return self.kernel(name)
        key = f"{name}/{threads}"
        try:
            return self._kernels[key]
        except KeyError:
            pass
        run = _make_kernel(name, _openblas.get_library(threads))
        self._kernels[key] = run
        return run

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["threads"] = self.threads
        return d


def host_devices(workers: int | None = None, threads_per_worker: int = 1) -> list[CPUDevice]:
    """One CPUDevice per core (the default host configuration)."""
    n = cpu_count() if workers is None else int(workers)
    if n < 1:
        raise ValueError(f"workers must be >= 1; got {n}")
    return [CPUDevice(i, threads_per_worker) for i in range(n)]


register_device_kind("cpu", CPUDevice)


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)
