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

A third table times blocks of calls (``--loops``, routine:order; each block about 20 ms of SciPy's calls, the
same count for both libraries) of SciPy's routine and of tileblas', after the pause alone and right after one
call of SciPy's same routine (its threads then spin): a loop of either library that follows a SciPy call.
Per call, best of the rounds, and the mean of the rounds (what loops pay on average: a call held up for
milliseconds now and then shows there, not in the best); ratio SciPy / tileblas.

    python benchmarks/bench_after.py [--sizes 256,512,1024] [--rounds 11] [--pause 0.3] [--later 0.5]
        [--loops strsm:64,dtrsm:64,ctrsm:128,dtrsm:512] [--json PATH]

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
from tileblas.cli._bench_grid import ROUTINES, Point, _operands  # noqa: E402


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


def measure_loops(routine: str, n: int, rounds: int,
                  pause: float) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Seconds per call of a block of SciPy's and of tileblas' ``routine`` of order n, after the pause alone
    ("pause") and right after one call of SciPy's routine ("scipy"), every pairing one contender of one
    interleaved timing; the block count from SciPy's call after the pause (about 20 ms of them).  The best
    of the rounds and their mean, each as {library: {way: seconds}}."""
    args, _ = _operands(Point(routine, n), np.random.default_rng(n))  # the grid's square F-ordered operands
    fs, ft = getattr(sb, routine), getattr(tb, routine)
    fs(*args), ft(*args)
    t0 = time.perf_counter()
    fs(*args)
    count = max(3, min(20000, int(0.02 / max(time.perf_counter() - t0, 1e-7))))

    def block(f: Callable, after_scipy: bool) -> Callable[[], float]:
        def run() -> float:
            if after_scipy:
                fs(*args)
            t = time.perf_counter()
            for _ in range(count):
                f(*args)
            return (time.perf_counter() - t) / count
        return run

    ways = ("pause", "scipy")
    t = interleaved({f"{lib} after {way}": block(f, way == "scipy") for lib, f in (("scipy", fs), ("tileblas", ft))
                     for way in ways}, rounds, self_timed=True, settle=pause)
    libs = ("scipy", "tileblas")
    return ({lib: {way: min(t.samples[f"{lib} after {way}"]) for way in ways} for lib in libs},
            {lib: {way: statistics.fmean(t.samples[f"{lib} after {way}"]) for way in ways} for lib in libs})


def _loop_points(spec: str) -> list[tuple[str, int]]:
    """``routine:order,...`` as (routine, order) pairs; ValueError naming the bad item."""
    out = []
    for item in (x for x in spec.split(",") if x):
        routine, _, n = item.partition(":")
        if routine[1:] not in ROUTINES or not hasattr(sb, routine) or not n.isdigit() or int(n) < 1:
            raise ValueError(f"--loops: {item!r} is not routine:order of a Level-3 routine (e.g. dtrsm:64)")
        out.append((routine, int(n)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="256,512,1024")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--pause", type=float, default=0.3)
    p.add_argument("--later", type=float, default=0.5, help="second table: seconds before the timed call")
    p.add_argument("--loops", default="strsm:64,dtrsm:64,ctrsm:128,dtrsm:512",
                   help="third table: routine:order points of the blocks of calls ('' for none)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    try:
        loop_points = _loop_points(args.loops)
    except ValueError as e:
        p.error(str(e))
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
    timed = {f"{r}:{n}": measure_loops(r, n, args.rounds, args.pause) for r, n in loop_points}
    loops = {key: best for key, (best, _) in timed.items()}
    loops_mean = {key: mean for key, (_, mean) in timed.items()}
    if loops:
        print(f"\n{'blocks of calls':16s} {'after':8s} {'SciPy':>10s} {'tileblas':>10s} {'ratio':>6s}   "
              f"{'mean of rounds: SciPy':>21s} {'tileblas':>10s} {'ratio':>6s}")
        for key, v in loops.items():
            m = loops_mean[key]
            for way, name in (("pause", "a pause"), ("scipy", "SciPy")):
                s, t, ms, mt = v["scipy"][way], v["tileblas"][way], m["scipy"][way], m["tileblas"][way]
                print(f"{key:16s} {name:8s} {s * 1e6:8.1f} us {t * 1e6:8.1f} us {s / t:5.2f}x   "
                      f"{ms * 1e6:18.1f} us {mt * 1e6:8.1f} us {ms / mt:5.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"right_after": {str(n): v for n, v in res.items()},
                       "later": {str(n): v for n, v in later.items()}, "loops": loops, "loops_mean": loops_mean},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
