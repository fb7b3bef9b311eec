"""Demo section: the tile runtime (BLASX): tile tasks, demand-driven scheduling, profiles and traces."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

__all__ = ["section"]


def section(out: Callable[[str], None]) -> None:
    from tileblas.kernels import _openblas
    from tileblas.runtime import Runtime

    out("== Tile runtime: every Level-3 call as per-tile tasks on all devices ==")
    n = 1536
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((n, n)))
    b = np.asfortranarray(rng.standard_normal((n, n)))
    c = np.zeros((n, n), order="F")
    lib2 = _openblas.get_library(2)
    with Runtime() as rt:
        rt.gemm(1.0, a, b, 0.0, c)  # warm-up: workers start, libraries load
        _openblas.gemm(1.0, a, b, 0.0, c, lib=lib2)
        best_rt = best_ob = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            _openblas.gemm(1.0, a, b, 0.0, c, lib=lib2)
            best_ob = min(best_ob, time.perf_counter() - t0)
            t0 = time.perf_counter()
            rt.gemm(1.0, a, b, 0.0, c)
            best_rt = min(best_rt, time.perf_counter() - t0)
        err = np.abs(c - a @ b).max()
        out(f"dgemm n={n} on {len(rt.devices)} single-threaded workers: {best_rt * 1e3:.0f} ms vs OpenBLAS with "
            f"{lib2.threads} threads {best_ob * 1e3:.0f} ms ({best_ob / best_rt:.2f}x), max error {err:.1e}")
        out(str(rt.last_profile()))
        t = np.asfortranarray(rng.standard_normal((n, n)) / n + 2 * np.eye(n))
        x = b.copy(order="F")
        rt.trsm(1.0, t, x, "L", "L", "N", "N")
        res = np.abs(np.tril(t) @ x - b).max()
        p = rt.last_profile()
        stolen = sum(d.stolen for d in p.devices)
        out(f"dtrsm n={n} (in place, tile rows solved in dependency order): {p.tasks} tasks, tile {p.tile_size}, "
            f"{stolen} stolen, {p.wall_s * 1e3:.0f} ms, residual {res:.1e}")
        tr = rt.trace()
        out(f"rt.trace(): {len(tr['traceEvents'])} Chrome trace events for {len(rt.profiles())} calls "
            f"(open in ui.perfetto.dev); `tileblas trace gemm --n 2048` writes JSON + timeline PNG")
