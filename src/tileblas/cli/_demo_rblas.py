"""Demo section: reversible BLAS (tileblas.rblas)."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

__all__ = ["section"]


def section(out: Callable[[str], None]) -> None:
    from tileblas import rblas

    out("== Reversible BLAS: forward/reverse pairs, four modes, Tape ==")
    n = 10**6
    rng = np.random.default_rng(0)
    x = 1000 + 1000 * rng.random(n)
    y = 1000 + 1000 * rng.random(n)
    y0 = y.copy()
    for mode in ("checkpoint", "compute", "auto", "exact"):
        t0 = time.perf_counter()
        rblas.fdaxpy(x, y, a=1.5, mode=mode)
        t1 = time.perf_counter()
        d = rblas.last_decision()
        rblas.rdaxpy(x, y, a=1.5)
        t2 = time.perf_counter()
        rms = float(np.sqrt(np.mean((y - y0) ** 2)))
        out(f"daxpy n={n} {mode:10s} -> {d.mode:10s} fwd {1e3*(t1-t0):6.1f} ms rev {1e3*(t2-t1):6.1f} ms "
            f"held {d.extra_bytes/1e6:5.2f} MB (checkpoint {d.checkpoint_bytes/1e6:.0f} MB) "
            f"{'bit-exact' if np.array_equal(y, y0) else f'rms {rms:.2e}'}")
        y[...] = y0
    out("auto on unsafe cases:")
    v = np.arange(1.0, 6.0)
    rblas.fdscal(0.0, v, mode="auto")
    out(f"  dscal a=0          -> {rblas.last_decision().mode}: {rblas.last_decision().reason}")
    rblas.rdscal(0.0, v)
    m = 150
    tri = np.asfortranarray(np.triu(rng.standard_normal((m, m))))
    tri[np.diag_indices(m)] = 1 + rng.random(m)
    xv = rng.random(m)
    rblas.fdtrmv(tri, xv, overwrite_x=1, mode="auto")
    out(f"  dtrmv random tri.  -> {rblas.last_decision().mode}: {rblas.last_decision().reason}")
    rblas.rdtrmv(tri, xv, overwrite_x=1)
    a = np.asfortranarray(rng.random((200, 200)))
    c = np.asfortranarray(rng.random((200, 200)))
    c0 = c.copy()
    with rblas.Tape(mode="auto") as tape:
        rblas.fdgemm(1.0, a, a, 0.5, c, overwrite_c=1)
        with rblas.Tape(mode="compute"):
            rblas.fdsyrk(2.0, a, 0.25, c, overwrite_c=1)
            rblas.fdtrmm(0.5, np.asfortranarray(np.eye(200) * 2 + np.triu(a) * 0.01), c, overwrite_b=1)
    modes = ", ".join(f"{d.routine}:{d.mode}" for d in tape.decisions)
    out(f"Tape with a nested tape recorded [{modes}], holds {tape.nbytes/1e3:.0f} kB; undo() reversed "
        f"{tape.undo()} calls, max |C - C0| = {np.abs(c - c0).max():.1e}")
    try:
        rblas.rdaxpy(x, y, a=1.5)
    except rblas.ReversalError as e:
        out(f"misuse is refused: {type(e).__name__}: {e}")
