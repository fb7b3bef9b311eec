"""The host CPU device: memory space = host memory, kernels = the GIL-free kernel layer.

A CPUDevice runs its kernels on an OpenBLAS instance with a fixed thread count (1 for the usual tile
workers; more for the optional multithreaded CPU worker that takes larger tiles, the BLASX paper's "CPU
computation thread").  Device arrays are host arrays, so moving data costs nothing.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from tileblas.kernels import _openblas
from tileblas.kernels import _recursive
from tileblas.devices._base import Device, register_device_kind
from tileblas.policy import _paths

__all__ = ["CPUDevice", "host_devices", "cpu_count", "recursion_faster"]

_KERNELS = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")

#: When the trmm/trsm kernels run the recursive algorithm (:func:`tileblas.kernels._recursive.recursive_trmm` /
#: ``recursive_trsm``) instead of OpenBLAS's own routine: on a device with at least
#: RECURSIVE_MIN_THREADS BLAS threads, for a triangle of order >= RECURSIVE_MIN_ORDER and a number of
#: right-hand sides (the other dimension of B) within RECURSIVE_RHS.  Measured on 2 cores with the
#: recursion issuing its native calls directly (``benchmarks/bench_trmm_trsm.py --tile-threshold`` and
#: the main benchmark, best of 5-7 interleaved): single-threaded, the recursion was 0.95-1.00x OpenBLAS
#: at orders 512-2048; on 2 threads, with 64 right-hand sides, 1.00/1.05x (trmm/trsm) at order 512,
#: 1.03-1.07/1.03-1.11x at 1024 and 1.11-1.18/1.01-1.12x at 2048; 0.95-1.05x with 256 (parity) and
#: 0.95-0.99x for square blocks up to 2048; 0.85-0.95x with 16.  The tile runtime's default tiles
#: (1-thread workers) therefore keep OpenBLAS's routine.
RECURSIVE_MIN_ORDER = 1024
RECURSIVE_MIN_THREADS = 2
RECURSIVE_RHS = (32, 128)


def cpu_count() -> int:
    """Cores this process may use (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def recursion_faster(order: int, rhs: int, threads: int, kind: str = "trsm", dtype_char: str = "d") -> bool:
    """Whether the recursive ``kind`` (trmm/trsm) measured faster than OpenBLAS's own routine on ``threads``
    BLAS threads for a triangle of ``order`` and ``rhs`` right-hand sides: by the rule ``tileblas tune``
    measured on this machine for the routine and precision class (:func:`tileblas.policy._paths.policy`),
    else by the shipped constants (see RECURSIVE_MIN_ORDER)."""
    if threads < RECURSIVE_MIN_THREADS:
        return False
    rule = _paths.policy().recursion.get((kind, _paths.precision_class(dtype_char)))
    if rule is None:
        return order >= RECURSIVE_MIN_ORDER and RECURSIVE_RHS[0] <= rhs <= RECURSIVE_RHS[1]
    return order >= rule[0] and rule[1] <= rhs <= rule[2]


def _triangular_kernel(native: Callable[..., None], recursive: Callable[..., None],
                       lib: _openblas.BlasLibrary, kind: str) -> Callable[..., None]:
    """trmm/trsm on ``lib``: the recursive algorithm where it measured faster (see RECURSIVE_MIN_ORDER)."""

    def run(alpha: Any, a: np.ndarray, b: np.ndarray, side: str = "L", uplo: str = "U", transa: str = "N",
            diag: str = "N") -> None:
        rhs = b.shape[1] if side == "L" else b.shape[0]
        use = recursion_faster(a.shape[0], rhs, lib.threads, kind, b.dtype.char)
        (recursive if use else native)(alpha, a, b, side, uplo, transa, diag, lib=lib)

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
