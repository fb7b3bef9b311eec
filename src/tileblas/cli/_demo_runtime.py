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

    def timed(rt: Runtime, **kw: object) -> float:
        rt.gemm(1.0, a, b, 0.0, c, **kw)  # warm-up: workers start, libraries load
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            rt.gemm(1.0, a, b, 0.0, c, **kw)
            best = min(best, time.perf_counter() - t0)
        return best

    _openblas.gemm(1.0, a, b, 0.0, c, lib=lib2)
    best_ob = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        _openblas.gemm(1.0, a, b, 0.0, c, lib=lib2)
        best_ob = min(best_ob, time.perf_counter() - t0)
    with Runtime() as rt:
        best_rt = timed(rt)
        p = rt.last_profile()
        workers = len(rt.devices)
        err = np.abs(c - a @ b).max()
        if p.path in ("shared", "small", "recursive"):
            out(f"Runtime() on {workers} CPU workers, dgemm n={n}: path={p.path}, {p.tasks} task -- one native "
                f"OpenBLAS call on all {lib2.threads} threads, not tiles: on CPU-only workers the shipped path "
                "policy (or `tileblas tune`'s crossovers) measured one multi-threaded call as fast or faster than "
                "tiles of single-threaded calls; `tileblas info` shows where tiles start")
        out(f"  {best_rt * 1e3:.0f} ms vs OpenBLAS called directly with {lib2.threads} threads {best_ob * 1e3:.0f} ms "
            f"({best_ob / best_rt:.2f}x), max error {err:.1e}")
        out(str(p))
    tile = 384
    with Runtime(tile_size=tile) as rt:
        best_tiled = timed(rt)
        p = rt.last_profile()
        err = np.abs(c - a @ b).max()
        out(f"Runtime(tile_size={tile}): tiles forced -- path={p.path}, {p.tasks} tile tasks on {len(rt.devices)} "
            f"single-threaded workers, {best_tiled * 1e3:.0f} ms ({best_ob / best_tiled:.2f}x the direct call), "
            f"max error {err:.1e}")
        out(str(p))
        t = np.asfortranarray(rng.standard_normal((n, n)) / n + 2 * np.eye(n))
        x = b.copy(order="F")
        rt.trsm(1.0, t, x, "L", "L", "N", "N")
        res = np.abs(np.tril(t) @ x - b).max()
        p = rt.last_profile()
        stolen = sum(d.stolen for d in p.devices)
        out(f"dtrsm n={n} (in place, tile rows solved in dependency order): path={p.path}, {p.tasks} tasks, "
            f"tile {p.tile_size}, {stolen} stolen, {p.wall_s * 1e3:.0f} ms, residual {res:.1e}")
        tr = rt.trace()
        out(f"rt.trace(): {len(tr['traceEvents'])} Chrome trace events for {len(rt.profiles())} calls "
            f"(open in ui.perfetto.dev); `tileblas trace gemm --n 2048 --tile-size 512` writes JSON + timeline PNG")
    out("Tiles are the default where devices have memory of their own (GPUs, simulated devices, a cluster) and "
        "for operands larger than memory (Runtime(host_memory=...)): see the memory and cluster sections")
