"""`tileblas demo`: a short tour that runs real work through each capability and prints what it measured.

Each capability contributes one section: a function ``section(out) -> None`` that prints with ``out`` and
finishes in a few seconds on a 2-core machine.  Sections are listed in ``SECTIONS`` as
"module:function" and imported only when the demo runs.
"""

from __future__ import annotations

import importlib
import time
import traceback
from typing import Callable

__all__ = ["run_demo", "SECTIONS"]

SECTIONS = (
    "tileblas.cli._demo_core:section",
    "tileblas.cli._demo_blas:section",
    "tileblas.cli._demo_perf:section",
    "tileblas.cli._demo_runtime:section",
    "tileblas.cli._demo_memory:section",
    "tileblas.cli._demo_async:section",
    "tileblas.cli._demo_linalg:section",
    "tileblas.cli._demo_rblas:section",
    "tileblas.cli._demo_cluster:section",
)


def run_demo(out: Callable[[str], None] = print, only: str | None = None) -> int:
    if only and not any(only in spec.split(":")[0] for spec in SECTIONS):
        names = ", ".join(spec.split(":")[0].rsplit("_demo_", 1)[-1] for spec in SECTIONS)
        raise ValueError(f"--only {only!r} names no section of the demo; sections: {names}")
    failures = 0
    for spec in SECTIONS:
        mod, fn = spec.split(":")
        if only and only not in mod:
            continue
        t0 = time.perf_counter()
        try:
            getattr(importlib.import_module(mod), fn)(out)
        except Exception:  # a broken section must not hide the others
            failures += 1
            out(f"[{mod}] FAILED:\n{traceback.format_exc()}")
        out(f"  ({time.perf_counter() - t0:.1f} s)\n")
    return 1 if failures else 0
