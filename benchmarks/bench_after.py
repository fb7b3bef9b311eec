"""One call right after another library's call: SciPy's dgemm and tileblas' dgemm, each timed after a
pause (the baseline), right after NumPy's ``a @ a``, right after SciPy's dgemm and right after tileblas'.

NumPy, SciPy and tileblas each load their own OpenBLAS.  NumPy's and SciPy's threads spin for about 0.1 s
after a call; a call whose threads meet them on a core slows down.  tileblas' pool sleeps 200 us after a
call.  Every timed call comes ``--pause`` seconds after the last call of the round, right after one call of
the library named (none: after the pause alone); medians of ``--rounds``.  The loops of bench_mixed.py time
many such calls in a row; this times one.

A second table times SciPy's and NumPy's calls ``--later`` seconds (0.5) after the pair "that library's
call, then tileblas' right after it" (tileblas' call meets that library's spinning threads), against the
same pause after the library's call alone: whether tileblas' call, done, still changes the other library's
next one.

    python benchmarks/bench_after.py [--sizes 256,512,1024] [--rounds 11] [--pause 0.3] [--later 0.5] [--json PATH]

Figures: docs/measurements/drop-in.md, "One call right after another library's".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Callable

import numpy as np
import scipy.linalg.blas as sb

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import tileblas.blas as tb  # noqa: E402
from tileblas._timing import interleaved  # noqa: E402


def _calls(n: int) -> dict[str, Callable[[], object]]:
    """Each library's product of one Fortran-ordered operand of order n by itself."""
    a = np.asfortranarray(np.random.default_rng(n).random((n, n)))
    return {"numpy": lambda: a @ a, "scipy": lambda: sb.dgemm(1.0, a, a), "tileblas": lambda: tb.dgemm(1.0, a, a)}


def measure(n: int, rounds: int, pause: float) -> dict[str, dict[str, float]]:
    """Median seconds of each library's dgemm of order n right after each other call ("pause": after the
    pause alone), every pairing one contender of the project's interleaved timing (a round times each
    once, each after the pause)."""
    calls = _calls(n)

    def after(before: str, timed: str) -> Callable[[], float]:
        def run() -> float:
            if before != "pause":
                calls[before]()
            t0 = time.perf_counter()
            calls[timed]()
            return time.perf_counter() - t0
        return run

    pairs = {(timed, before): after(before, timed) for timed in ("scipy", "tileblas")
             for before in ("pause", "numpy", "scipy", "tileblas")}
    for _ in range(3):
        for f in calls.values():
            f()
    t = interleaved({f"{k[0]} after {k[1]}": f for k, f in pairs.items()}, rounds, self_timed=True, settle=pause)
    out: dict[str, dict[str, float]] = {}
    for timed, before in pairs:
        out.setdefault(timed, {})[before] = statistics.median(t.samples[f"{timed} after {before}"])
    return out


def measure_later(n: int, rounds: int, pause: float, later: float) -> dict[str, dict[str, float]]:
    """Median seconds of SciPy's dgemm and NumPy's ``a @ a`` of order n ``later`` seconds after that
    library's call ("alone") and after that call with tileblas' dgemm right after it ("then tileblas"),
    every pairing one contender of one interleaved timing."""
    calls = _calls(n)

    def after(lib: str, then_tileblas: bool) -> Callable[[], float]:
        def run() -> float:
            calls[lib]()
            if then_tileblas:
                calls["tileblas"]()
            time.sleep(later)
            t0 = time.perf_counter()
            calls[lib]()
            return time.perf_counter() - t0
        return run

    libs, ways = ("scipy", "numpy"), ("alone", "then tileblas")
    t = interleaved({f"{lib} {way}": after(lib, way == "then tileblas") for lib in libs for way in ways}, rounds,
                    self_timed=True, settle=pause)
    return {lib: {way: statistics.median(t.samples[f"{lib} {way}"]) for way in ways} for lib in libs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="256,512,1024")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--pause", type=float, default=0.3)
    p.add_argument("--later", type=float, default=0.5, help="second table: seconds before the timed call")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1; got {args.rounds}")
    if not args.pause >= 0:
        p.error(f"--pause must be >= 0 seconds; got {args.pause}")
    if not args.later >= 0:
        p.error(f"--later must be >= 0 seconds; got {args.later}")
    res = {}
    print(f"{'timed':9s} {'right after':12s} " + " ".join(f"{'n = ' + s:>10s}" for s in args.sizes.split(",")))
    for n in (int(s) for s in args.sizes.split(",")):
        res[n] = measure(n, args.rounds, args.pause)
    for timed in ("scipy", "tileblas"):
        for before in ("pause", "numpy", "scipy", "tileblas"):
            print(f"{timed:9s} {before:12s} " + " ".join(f"{res[n][timed][before] * 1e3:8.2f} ms" for n in res))
    later = {n: measure_later(n, args.rounds, args.pause, args.later) for n in res}
    print(f"\n{'timed':9s} {f'{args.later:g} s after':24s} " + " ".join(f"{'n = ' + str(n):>10s}" for n in later))
    for lib in ("scipy", "numpy"):
        for way in ("alone", "then tileblas"):
            print(f"{lib:9s} {lib + ' ' + way if way == 'alone' else lib + ', ' + way:24s} "
                  + " ".join(f"{later[n][lib][way] * 1e3:8.2f} ms" for n in later))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"right_after": {str(n): v for n, v in res.items()},
                       "later": {str(n): v for n, v in later.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
