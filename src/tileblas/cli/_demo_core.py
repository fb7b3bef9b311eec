"""Demo section: the GIL-free kernel layer."""

from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np

__all__ = ["section"]


def section(out: Callable[[str], None]) -> None:
    from tileblas.kernels import _openblas
    from tileblas.devices import host_devices

    out("== Kernel layer: native BLAS without the GIL ==")
    lib = _openblas.get_library(1)
    out(f"OpenBLAS {lib.corename()} ({lib.config()}), tile workers: {len(host_devices())}")
    n = 768
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, n))
    cs = [np.zeros((n, n)), np.zeros((n, n))]

    def work(c: np.ndarray) -> None:
        _openblas.gemm(1.0, a, b, 0.0, c)

    work(cs[0])
    best_serial = best_threads = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        work(cs[0])
        work(cs[1])
        best_serial = min(best_serial, time.perf_counter() - t0)
        t0 = time.perf_counter()
        ts = [threading.Thread(target=work, args=(c,)) for c in cs]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        best_threads = min(best_threads, time.perf_counter() - t0)
    err = np.abs(cs[1] - a @ b).max()
    gf = 2 * 2 * n**3 / best_threads / 1e9
    out(f"two dgemm n={n} on single-threaded BLAS: one thread {best_serial*1e3:.0f} ms, two Python threads "
        f"{best_threads*1e3:.0f} ms -> {best_serial/best_threads:.2f}x ({gf:.1f} GFLOP/s), max error {err:.1e}")
