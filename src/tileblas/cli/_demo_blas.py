"""Demo section: tileblas.blas as a drop-in for scipy.linalg.blas (Level 3), and the GIL.

Runs a few Level-3 routines of both libraries on the same inputs (C- and Fortran-ordered), prints the
largest differences, times one DGEMM of each (interleaved, best of 3), times a loop that alternates each
library's DGEMM with NumPy's matrix product (two OpenBLAS pools in one process: tileblas' pool yields the
cores, OpenBLAS's own threads spin), and shows two Python threads calling DGEMM on single-threaded BLAS:
tileblas' kernel layer against SciPy.  A few seconds on 2 cores.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

__all__ = ["section"]


def _rel(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.max(np.abs(x - y)) / max(float(np.max(np.abs(y))), 1e-300))


def _two_threads(fn: Callable[[np.ndarray], Any], cs: list[np.ndarray], trials: int = 3) -> tuple[float, float]:
    best_s = best_t = float("inf")
    for _ in range(trials):
        t0 = time.perf_counter()
        for c in cs:
            fn(c)
        best_s = min(best_s, time.perf_counter() - t0)
        ts = [threading.Thread(target=fn, args=(c,)) for c in cs]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        best_t = min(best_t, time.perf_counter() - t0)
    return best_s, best_t


def section(out: Callable[[str], None]) -> None:
    import scipy.linalg.blas as S

    import tileblas.blas as T
    from tileblas.kernels import _openblas
    from tileblas.cli._bench import scipy_openblas_threads, set_scipy_openblas_threads

    out("== tileblas.blas: drop-in for scipy.linalg.blas (Level 3) ==")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 200))
    b = rng.standard_normal((200, 250))
    z = rng.standard_normal((120, 90)) + 1j * rng.standard_normal((120, 90))
    tri = np.tril(rng.standard_normal((150, 150))) / 15 + 4 * np.eye(150)
    rhs = rng.standard_normal((150, 40)).astype(np.float32)
    cases = [
        ("dgemm(1, a, b)  C-order", lambda m: m.dgemm(1.0, a, b)),
        ("dgemm(1, a.T, b, trans_a=1)", lambda m: m.dgemm(1.0, np.asfortranarray(a).T, b, trans_a=1)),
        ("zherk(1, z, trans=2, lower=1)", lambda m: m.zherk(1.0, z, trans=2, lower=1)),
        ("zgemm(2j, z, z, trans_b=2)", lambda m: m.zgemm(2j, z, z, trans_b=2)),
        ("strsm(1, tri, rhs, lower=1)", lambda m: m.strsm(1.0, tri, rhs, lower=1)),
        ("dsyr2k(0.5, a, a[:, ::-1])", lambda m: m.dsyr2k(0.5, a, a[:, ::-1])),
    ]
    for label, call in cases:
        x, y = call(T), call(S)
        same = x.dtype == y.dtype and x.shape == y.shape and x.flags.f_contiguous == y.flags.f_contiguous
        out(f"  {label:<32} max rel diff {_rel(x, y):.1e}   dtype/shape/order same as SciPy: {same}")
    gemm = T.get_blas_funcs("gemm", (z,))
    out(f"  get_blas_funcs('gemm', (complex array,)) -> {gemm.__name__} (typecode {gemm.typecode!r}, "
        f"dtype {gemm.dtype})")

    n = 1024
    f = np.asfortranarray(rng.standard_normal((n, n)))
    g = np.asfortranarray(rng.standard_normal((n, n)))
    T.dgemm(1.0, f, g)
    S.dgemm(1.0, f, g)
    best = {"tileblas": float("inf"), "scipy": float("inf")}
    for r in range(3):
        for name in (("tileblas", "scipy") if r % 2 == 0 else ("scipy", "tileblas")):
            mod = T if name == "tileblas" else S
            time.sleep(0.2)  # the other library's BLAS threads go idle (see the loop below for when they do not)
            t0 = time.perf_counter()
            mod.dgemm(1.0, f, g)
            best[name] = min(best[name], time.perf_counter() - t0)
    gf = {k: 2 * n**3 / v / 1e9 for k, v in best.items()}
    out(f"  dgemm n={n} (best of 3, interleaved, 0.2 s apart): tileblas.blas {best['tileblas']*1e3:.0f} ms "
        f"({gf['tileblas']:.1f} GFLOP/s), scipy {best['scipy']*1e3:.0f} ms ({gf['scipy']:.1f} GFLOP/s) "
        f"-> tileblas is {best['scipy']/best['tileblas']:.2f}x scipy's speed")

    # A loop that alternates the library's dgemm with NumPy's a @ b (NumPy's own OpenBLAS).
    k = 128
    p, q = np.asfortranarray(f[:k, :k]), np.asfortranarray(g[:k, :k])
    loops = {"tileblas": float("inf"), "scipy": float("inf")}
    stats0 = _openblas.pool_info()["stats"]
    for r in range(2):
        for name in (("tileblas", "scipy") if r % 2 == 0 else ("scipy", "tileblas")):
            mod = T if name == "tileblas" else S
            time.sleep(0.3)  # the previous loop's BLAS threads go idle
            t0 = time.perf_counter()
            for _ in range(20):
                mod.dgemm(1.0, p, q)
                p @ q
            loops[name] = min(loops[name], (time.perf_counter() - t0) / 20)
    info1 = _openblas.pool_info()
    stats1, wait = info1["stats"], info1["settings"]
    waits = f"{_openblas.wait_text(wait)} after their work, then sleep"
    out(f"  loop of dgemm n={k} and NumPy's a @ b (20 iterations, best of 2, interleaved): tileblas.blas "
        f"{loops['tileblas']*1e3:.2f} ms per iteration, scipy {loops['scipy']*1e3:.2f} ms -> "
        f"{loops['scipy']/loops['tileblas']:.1f}x")
    woken = stats1.get("watch_wakes", 0) - stats0.get("watch_wakes", 0)
    out(f"    tileblas' pool meanwhile: {stats1.get('sleeps', 0) - stats0.get('sleeps', 0)} sleep(s) of its "
        f"workers (they {waits}; {woken} woken by their idle-class watchers), "
        f"{stats1.get('caller_parts', 0) - stats0.get('caller_parts', 0)} part(s) of split calls run by the calling "
        "thread; SciPy's and NumPy's OpenBLAS threads spin 0.1 s after each call and take turns on the cores")

    # Two Python threads, single-threaded BLAS on both sides.
    m = 768
    cs = [np.zeros((m, m), order="F"), np.zeros((m, m), order="F")]
    am, bm = f[:m, :m], g[:m, :m]
    lib1 = _openblas.get_library(1)
    before = scipy_openblas_threads()
    set_scipy_openblas_threads(1)
    try:
        ks, kt = _two_threads(lambda c: _openblas.gemm(1.0, am, bm, 0.0, c, "N", "N", lib1), cs)
        ss, st = _two_threads(lambda c: S.dgemm(1.0, am, bm, 0.0, c, overwrite_c=1), cs)
    finally:
        for threads in set(before.values()):
            set_scipy_openblas_threads(threads)
    out(f"  two dgemm n={m}, single-threaded BLAS, one thread vs two Python threads (best of 3):")
    out(f"    tileblas kernel layer {ks*1e3:.0f} -> {kt*1e3:.0f} ms: {ks/kt:.2f}x   "
        f"scipy.linalg.blas {ss*1e3:.0f} -> {st*1e3:.0f} ms: {ss/st:.2f}x (holds the GIL)")
