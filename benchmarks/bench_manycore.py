"""Where the drop-in's time goes on a many-core host: back-to-back (warm) calls against SciPy, with what
tileblas' pool and the scheduler did meanwhile.

The first many-core grid (the GPU test machine's 16-core host;
docs/measurements/drop-in.md, "A 16-core host") found warm calls of order 1024 at 0.51-0.81x SciPy
(dgemm, dsyrk, dtrmm, dtrsm, zgemm) while the same calls cold ran 0.67-2.25x.  At 16 threads every such call is one call on tileblas' OpenBLAS instance,
its jobs on tileblas' pool (SciPy's path), so this measures, per routine and order, in one process:

* ``warm``: the grid's warm mode (``tileblas bench grid``: blocks of back-to-back calls of about 0.05 s,
  each after a 0.2 s pause and one untimed call; SciPy, tileblas and SciPy again as the control,
  interleaved), best and median of the rounds, on the path tuner's square operands;
* per tileblas block, per call: the pool's counters (OpenBLAS parallel calls, sleeps, wakes, calling
  threads that slept waiting for jobs) and the process's voluntary and involuntary context switches and
  minor page faults (a new output faulted in on every call would cost milliseconds at order 1024), SciPy's
  blocks' beside them;
* the same warm blocks with the pool's workers spinning 2 ms instead of 200 us between calls
  (``_pool.configure(spin_ns=...)``), to tell waking from the work itself;
* ``cold``: the grid's cold mode (single calls 0.2 s after the other library's call, both orders over the
  rounds, the control SciPy after SciPy), medians.

    python benchmarks/bench_manycore.py [--routines dgemm,dsyrk,dtrmm,dtrsm,zgemm] [--sizes 256,1024]
        [--rounds 5] [--budget 150] [--json PATH]

Run it once more with ``TILEBLAS_POOL=0`` (OpenBLAS's own threads run tileblas' instance, as SciPy's
run SciPy's): the difference between the two runs is the pool's.

Ratios are SciPy's time over tileblas' (above 1: tileblas faster).  A point whose cost the budget would
not cover is skipped and listed.  On the 2-core machine it runs too (the flow; the figures are that
machine's).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import tileblas.blas as tb  # noqa: E402
from tileblas._dtypes import DTYPE_OF  # noqa: E402
from tileblas.cli._bench_grid import _timed  # noqa: E402
from tileblas.kernels import _pool  # noqa: E402
from tileblas.perf._pathtune import _square_args  # noqa: E402
from tileblas.policy._dropin import FAMILIES  # noqa: E402


def _switches() -> tuple[int, int, int]:
    """The process's voluntary and involuntary context switches and minor page faults so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_nvcsw, r.ru_nivcsw, r.ru_minflt


def _counted(fn: Callable[..., Any], tally: dict[str, float]) -> Callable[..., Any]:
    """``fn``, adding its calls, context switches, page faults and (tileblas) pool counters to ``tally``."""
    def run(*args: Any, **kw: Any) -> Any:
        p0, (v0, i0, f0) = _pool.stats(), _switches()
        out = fn(*args, **kw)
        p1, (v1, i1, f1) = _pool.stats(), _switches()
        tally["calls"] = tally.get("calls", 0) + 1
        tally["voluntary"] = tally.get("voluntary", 0) + v1 - v0
        tally["involuntary"] = tally.get("involuntary", 0) + i1 - i0
        tally["faults"] = tally.get("faults", 0) + f1 - f0
        for k in ("jobs", "sleeps", "wakes", "watch_wakes", "waits_asleep", "woke", "wake_ns", "tail_ns"):
            tally[k] = tally.get(k, 0) + p1[k] - p0[k]
        return out
    return run


def _wake_us(per_call: dict[str, float]) -> str:
    """The workers' mean time from the post to running, where any woke."""
    woke = per_call.get("woke", 0)
    return f"{per_call['wake_ns'] / woke / 1e3:.1f} us" if woke else "-"


def _per_call(tally: dict[str, float]) -> dict[str, float]:
    calls = max(tally.get("calls", 0), 1)
    return {k: round(v / calls, 2) for k, v in tally.items() if k != "calls"}


def _point(routine: str, n: int) -> tuple[Callable, Callable, tuple]:
    """SciPy's and tileblas' ``routine`` and the arguments of a square call of order n (the path
    tuner's)."""
    import scipy.linalg.blas as sb

    args = _square_args(np.random.default_rng(n), routine[1:], DTYPE_OF[routine[0]], n)
    return getattr(sb, routine), getattr(tb, routine), args


def warm(routine: str, n: int, rounds: int, spin_ns: int | None = None) -> dict[str, Any]:
    """The grid's warm mode (``tileblas bench grid``: blocks of back-to-back calls after a 0.2 s pause and
    one untimed call; SciPy, tileblas, SciPy again as the control), each side's calls counted."""
    f_s, f_t, args = _point(routine, n)
    saved = _pool.configure()["spin_ns"]
    tallies: dict[str, dict[str, float]] = {"scipy": {}, "tileblas": {}}
    try:
        if spin_ns is not None:
            _pool.configure(spin_ns=spin_ns)
        t = _timed("warm", _counted(f_s, tallies["scipy"]), _counted(f_t, tallies["tileblas"]), args, {}, rounds,
                   0.2, 0.05, 10_000, 0.0)
    finally:
        _pool.configure(spin_ns=saved)
    med = {k: statistics.median(v) for k, v in t.samples.items()}
    return {"scipy_s": t.best["scipy"], "tileblas_s": t.best["tileblas"],
            "ratio": t.best["scipy"] / t.best["tileblas"], "ratio_median": med["scipy"] / med["tileblas"],
            "control": t.best["scipy"] / t.best["control"], "block": t.block["scipy"],
            "per_call": {k: _per_call(v) for k, v in tallies.items()}}


def cold(routine: str, n: int, rounds: int, idle: float = 0.2) -> dict[str, Any]:
    """The grid's cold mode: each timed call the first after ``idle`` seconds, following the other
    library's call (both orders over the rounds; the control SciPy after SciPy); medians."""
    f_s, f_t, args = _point(routine, n)
    t = _timed("cold", f_s, f_t, args, {}, rounds, 0.0, 0.0, 1, idle)
    med = {k: statistics.median(v) for k, v in t.samples.items()}
    return {"scipy_s": med["scipy"], "tileblas_s": med["tileblas"], "ratio_median": med["scipy"] / med["tileblas"],
            "control_median": med["scipy"] / med["control"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--routines", default="dgemm,dsyrk,dtrmm,dtrsm,zgemm")
    p.add_argument("--sizes", default="256,1024")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--budget", type=float, default=150.0, help="seconds; points that would not fit are skipped")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1; got {args.rounds}")
    routines = [r.strip() for r in args.routines.split(",") if r.strip()]
    for r in routines:
        if r[1:] not in FAMILIES or r[:1] not in DTYPE_OF or not hasattr(tb, r):
            p.error(f"--routines: {r!r} is not a Level-3 routine of tileblas.blas")
    sizes = [int(s) for s in args.sizes.split(",")]
    t0 = time.perf_counter()
    from tileblas.kernels import _openblas

    pool_on = bool(_openblas.pool_info()["enabled"])
    out: dict[str, Any] = {"cpu_count": os.cpu_count(), "pool": _pool.configure(), "pool_enabled": pool_on,
                           "points": [], "skipped": []}
    print(f"{os.cpu_count()} CPUs; tileblas' pool {'on' if pool_on else 'off (TILEBLAS_POOL=0)'}; ratio = SciPy / tileblas; per call: tileblas' pool counters, context "
          "switches (voluntary/involuntary) and page faults", flush=True)
    spent: dict[str, tuple[int, float]] = {}  # per routine: (n, seconds of its point) last measured
    for n in sizes:
        for r in routines:
            last = spent.get(r)
            pred = 0.0 if last is None else last[1] * (n / last[0]) ** 1.5
            if time.perf_counter() - t0 + pred > args.budget:
                out["skipped"].append(f"{r} {n}")
                continue
            t1 = time.perf_counter()
            row = {"routine": r, "n": n, "warm": warm(r, n, args.rounds),
                   "warm_spin_2ms": warm(r, n, args.rounds, spin_ns=2_000_000), "cold": cold(r, n, args.rounds)}
            out["points"].append(row)
            spent[r] = (n, time.perf_counter() - t1)
            w, w2, c = row["warm"], row["warm_spin_2ms"], row["cold"]
            pc = w["per_call"]["tileblas"]
            print(f"{r:6s} {n:5d}  warm {w['ratio']:.2f}x (median {w['ratio_median']:.2f}x; SciPy "
                  f"{w['scipy_s'] * 1e3:.3f} ms, tileblas {w['tileblas_s'] * 1e3:.3f} ms, block {w['block']}, control "
                  f"{w['control']:.2f})  spin 2 ms {w2['ratio']:.2f}x  cold {c['ratio_median']:.2f}x (control "
                  f"{c['control_median']:.2f})  | tileblas a call: jobs "
                  f"{pc.get('jobs', 0)}, wakes {pc.get('wakes', 0)} (watchers {pc.get('watch_wakes', 0)}), post to "
                  f"running {_wake_us(pc)}, tail {pc.get('tail_ns', 0) / 1e3:.1f} us, sleeps {pc.get('sleeps', 0)}, "
                  f"waits asleep {pc.get('waits_asleep', 0)}, switches {pc.get('voluntary', 0)}/{pc.get('involuntary', 0)}, "
                  f"page faults {pc.get('faults', 0)}; SciPy: switches {w['per_call']['scipy'].get('voluntary', 0)}/"
                  f"{w['per_call']['scipy'].get('involuntary', 0)}, page faults {w['per_call']['scipy'].get('faults', 0)}",
                  flush=True)
    if out["skipped"]:
        print("skipped (budget):", ", ".join(out["skipped"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
