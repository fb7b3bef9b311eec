"""`tileblas demo` section for tileblas.perf: trace, model, predict and rank the triangular-inverse variants.

Uses a temporary model repository so the user's models are never touched; a few seconds on 2 cores.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Callable

__all__ = ["section"]


def section(out: Callable[[str], None]) -> None:
    from tileblas.perf import Predictor, Repository, build_models_for, current_key, trace_trinv
    from tileblas.perf._predictor import measure_algorithm

    out("== Performance models: sampler -> modeler -> repository -> predictor (Peise & Bientinesi) ==")
    calls = trace_trinv(250, 1, 100)
    out(f"  trace of trinv variant 1, n=250, b=100 (paper IV-A): {len(calls)} calls")
    for c in calls[:4]:
        out(f"    {c.routine}{tuple(c.flags)} sizes={c.sizes}")
    n, b = 256, 64
    with tempfile.TemporaryDirectory() as tmp:
        repo = Repository(os.path.join(tmp, "demo.sqlite"))
        key = current_key()
        t0 = time.perf_counter()
        models = build_models_for("trinv", [n], [b], repo, key, reps=3, min_size=128, validation_points=20,
                                  error_bound=0.15, log=lambda s: None)
        samples = sum(m.samples for m in models)
        errs = [m.avg_error for m in models if m.avg_error == m.avg_error]  # skip NaN: no fresh points left
        avg = f"{sum(errs) / len(errs):.1%}" if errs else "n/a"
        out(f"  built {len(models)} submodels from {samples} samples in {time.perf_counter() - t0:.1f} s "
            f"(mean validation error {avg})")
        pred = Predictor(repo, key)
        ranking = pred.rank("trinv", n, b)
        measured = {p.label["variant"]: measure_algorithm("trinv", n, p.label["variant"], b, reps=3).median
                    for p in ranking}
        for p in ranking:
            v = p.label["variant"]
            out(f"  variant {v}: predicted {p.time['median'] * 1e3:6.2f} ms "
                f"[{p.time['min'] * 1e3:.2f}-{p.time['max'] * 1e3:.2f}]  measured {measured[v] * 1e3:6.2f} ms")
        out("  predicted order: " + " > ".join(str(p.label["variant"]) for p in ranking)
            + "   measured order: " + " > ".join(str(v) for v in sorted(measured, key=measured.get)))
