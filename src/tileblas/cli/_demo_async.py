"""Demo section: the asynchronous API (handles, futures, backend choice by cost, Matrix operators)."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

__all__ = ["section"]


def section(out: Callable[[str], None]) -> None:
    from tileblas import asyncapi as aa
    from tileblas.devices import host_devices

    out("== Asynchronous API: handles, futures, 'cost' scheduling, tileblas.Matrix ==")
    n, calls = 384, 12
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, n))
    times = {}
    for workers in (1, 2):
        with aa.Executor(host_devices(workers)) as ex:
            ha, hb = ex.handle(a), ex.handle(b)
            best = float("inf")
            for _ in range(2):
                t0 = time.perf_counter()
                futs = [aa.gemm(1.0, ha, hb, 0.0, ex.empty((n, n))) for _ in range(calls)]
                res = [f.result() for f in futs]
                best = min(best, time.perf_counter() - t0)
            err = np.abs(res[-1].get() - a @ b).max()
            times[workers] = best
    out(f"{calls} independent dgemm n={n} submitted from one thread: 1 backend {times[1]*1e3:.0f} ms, "
        f"2 backends {times[2]*1e3:.0f} ms -> {times[1]/times[2]:.2f}x (max error {err:.1e})")

    with aa.Executor(host_devices(2)) as ex:
        x = ex.handle(np.ones((1, 1)))
        y = ex.handle(np.zeros((1, 1)))
        k = 3000
        t0 = time.perf_counter()
        for _ in range(k):
            aa.axpy(1.0, x, y)
        t_submit = time.perf_counter() - t0
        total = y.get()[0, 0]
    out(f"{k} dependent tiny axpy calls: {t_submit / k * 1e6:.1f} us per call to submit, result {total:.0f} "
        f"(expected {k})")

    m1 = aa.Matrix(rng.standard_normal((200, 100)))
    m2 = rng.standard_normal((200, 100))
    c = 2 * m1.T @ m2 - m1.T @ m1       # lazy transposes become GEMM flags; returns at once
    fut = c.read()
    ref = 2 * m1.get().T @ m2 - m1.get().T @ m1.get()
    out(f"Matrix: 2*A.T@B - A.T@A with a NumPy array on the right: {c!r}, "
        f"max error {np.abs(fut.result() - ref).max():.1e}")
