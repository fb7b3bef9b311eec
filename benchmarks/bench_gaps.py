"""Loops with the caller's own work between calls: tileblas.blas against scipy.linalg.blas, per pool setting.

What: a user's loop calls a Level-3 routine, then computes something of its own in Python for a while (the
gap) before the next call.  tileblas' idle workers spin 200 µs after their work and then sleep; while they
sleep, an idle-class watcher thread looks for their work for 100 ms and wakes them, so that the calling
thread need not.  SciPy's OpenBLAS threads spin (yielding) for 0.1 s and are still awake.
``TILEBLAS_POOL_WAIT`` keeps tileblas' workers awake longer, ``TILEBLAS_POOL_WATCH`` sets the watch (0:
none).  This benchmark times such loops with SciPy's routine and with tileblas' under each setting of
``--waits``, in one process, interleaved, so that the cost of the wake and what each setting gives are seen
against the same baseline.

How: for each routine and order, and each gap, the contenders take turns (SciPy, tileblas with each
setting, SciPy again as the control; the order reversed every other round), each turn after a 0.25 s
pause: one untimed call, then ``--calls`` timed calls, each followed by the gap, spent busy in Python.  A
sample is the mean time of one call (the gaps are not timed); best of ``--rounds`` rounds, and the median
of rounds beside it.  ratio = SciPy / tileblas (> 1: tileblas' calls are faster), control = SciPy / SciPy
again.  A setting (``WAIT`` or ``WAIT/WATCH``) is set on the pool for its turns only
(``tileblas.kernels._pool.configure``, as the environment variables set it at import).  ``--load N`` runs N
busy processes beside the loops (those of ``tileblas bench grid --modes load``).

Usage::

    python benchmarks/bench_gaps.py [--quick] [--points dgemm:128,zgemm:64,ctrmm:128,dtrsm:256,dsyrk:256,sgemm:512]
        [--gaps 0.5,2,10,50] [--waits 200us/100ms,200us/0,0.1s/0] [--rounds 7] [--calls 15] [--load 0]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

__all__ = ["parse_setting", "measure", "main"]


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _timed_loop(call: Callable[[], Any], calls: int, gap: float, before: Callable[[], Any] | None,
                counters: dict | None = None) -> float:
    """Mean seconds of ``calls`` calls, each followed by ``gap`` seconds of Python work (not timed); the
    pool's counters of the timed calls added into ``counters`` where given."""
    from tileblas.kernels import _pool

    if before is not None:
        before()
    call()  # the first after the pause: every contender's turn starts the same way
    _busy(gap)
    s0 = _pool.stats() if counters is not None else None
    total = 0.0
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        total += time.perf_counter() - t0
        _busy(gap)
    if counters is not None:
        s1 = _pool.stats()
        for k in COUNTERS:
            counters[k] = counters.get(k, 0) + s1.get(k, 0) - s0.get(k, 0)
        counters["timed_calls"] = counters.get("timed_calls", 0) + calls
    return total / calls


#: the pool's counters each wait's loops report (kernels/_pool.c, stats())
COUNTERS = ("sleeps", "wakes", "watch_wakes", "woke", "wake_ns", "tail_ns", "waits_asleep")


def wake_text(c: dict) -> str:
    """A wait's wakes in words: per call, and the workers' mean time from the post to running."""
    calls = max(c.get("timed_calls", 0), 1)
    woke = c.get("woke", 0)
    mean = f"{c['wake_ns'] / woke / 1e3:.1f} us" if woke else "-"
    return (f"{woke / calls:.2f} woke a call (watcher {c.get('watch_wakes', 0) / calls:.2f}), post to running "
            f"{mean}, after its own share the caller waited {c.get('tail_ns', 0) / calls / 1e3:.1f} us a call")


def parse_setting(spec: str) -> dict:
    """The pool's settings for ``WAIT`` or ``WAIT/WATCH`` (``200us/100ms``, ``0.1s/0``): the wait as
    ``TILEBLAS_POOL_WAIT`` reads it, the watch as ``TILEBLAS_POOL_WATCH`` (the pool's own where left out).
    ValueError naming ``--waits`` where either is not a duration."""
    from tileblas.kernels import _openblas

    wait, _, watch = spec.partition("/")
    spin, yld = _openblas.parse_wait(wait, "--waits")
    conf = {"spin_ns": spin, "yield_ns": yld}
    if watch:
        conf["watch_ns"] = _openblas.parse_watch(watch, "--waits")
    return conf


def measure(routine: str, n: int, gap: float, waits: list[str], *, rounds: int, calls: int) -> dict:
    """One point: SciPy, tileblas under each wait and SciPy again, interleaved; seconds per call."""
    import scipy.linalg.blas as sb

    from tileblas import blas as tb
    from tileblas._dtypes import DTYPE_OF
    from tileblas._timing import interleaved
    from tileblas.kernels import _openblas, _pool
    from tileblas.perf._pathtune import _square_args
    from tileblas.policy._dropin import FAMILIES

    if routine[1:] not in FAMILIES or routine[:1] not in DTYPE_OF or not hasattr(tb, routine):
        raise ValueError(f"routine must be a Level-3 routine ({', '.join(FAMILIES)} with s, d, c or z); "
                         f"got {routine!r}")
    args = _square_args(np.random.default_rng(n), routine[1:], DTYPE_OF[routine[0]], n)
    scipy_fn, tileblas_fn = getattr(sb, routine), getattr(tb, routine)
    saved = _pool.configure()
    settings = {w: parse_setting(w) for w in waits}
    counters: dict[str, dict] = {w: {} for w in waits}
    contenders: dict[str, Callable[[], float]] = {
        "scipy": lambda: _timed_loop(lambda: scipy_fn(*args), calls, gap, None)}
    for w, conf in settings.items():
        contenders[w] = (lambda c=conf, w=w: _timed_loop(lambda: tileblas_fn(*args), calls, gap,
                                                          lambda: _pool.configure(**c), counters[w]))
    contenders["control"] = lambda: _timed_loop(lambda: scipy_fn(*args), calls, gap, None)
    try:
        t = interleaved(contenders, rounds, self_timed=True, settle=0.25, alternate=True)
    finally:
        _pool.configure(**saved)
    med = {k: statistics.median(v) for k, v in t.samples.items()}
    return {"routine": routine, "n": n, "gap_s": gap, "scipy_s": t.best["scipy"],
            "tileblas_s": {w: t.best[w] for w in waits},
            "ratio": {w: t.best["scipy"] / t.best[w] for w in waits},
            "ratio_median": {w: med["scipy"] / med[w] for w in waits},
            "control": t.best["scipy"] / t.best["control"], "counters": counters}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", default="dgemm:128,zgemm:64,ctrmm:128,dtrsm:256,dsyrk:256,sgemm:512",
                    help="routine:order, comma-separated")
    ap.add_argument("--gaps", default="0.5,2,10,50", help="milliseconds of Python work between calls")
    ap.add_argument("--waits", default="200us/100ms,200us/0,0.1s/0",
                    help="pool settings to compare: WAIT or WAIT/WATCH (as TILEBLAS_POOL_WAIT, TILEBLAS_POOL_WATCH)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=15, help="timed calls per turn")
    ap.add_argument("--load", type=int, default=0, help="busy processes beside the loops (0: none)")
    ap.add_argument("--quick", action="store_true", help="dgemm 128 and zgemm 64, gaps 2 and 10 ms, 3 rounds")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.points, args.gaps, args.rounds = "dgemm:128,zgemm:64", "2,10", 3
    from tileblas.kernels import _openblas, _pool

    points = []
    for spec in (p.strip() for p in args.points.split(",") if p.strip()):
        routine, _, n = spec.partition(":")
        if not n.isdigit() or int(n) < 1 or routine[:1] not in ("s", "d", "c", "z"):
            ap.error(f"--points: {spec!r} is not routine:order (such as dgemm:128)")
        points.append((routine, int(n)))
    try:
        gaps = [float(g) / 1e3 for g in args.gaps.split(",") if g.strip()]
    except ValueError:
        ap.error(f"--gaps: {args.gaps!r} is not a list of milliseconds")
    if any(not g >= 0 for g in gaps):
        ap.error(f"--gaps: {args.gaps!r}: each gap must be >= 0 ms")
    waits = [w.strip() for w in args.waits.split(",") if w.strip()]
    for w in waits:
        try:
            parse_setting(w)
        except ValueError as exc:
            ap.error(str(exc))
    if len(set(waits)) != len(waits) or not waits:
        ap.error(f"--waits: {args.waits!r}: name each wait once")
    if args.load < 0:
        ap.error(f"--load must be >= 0; got {args.load}")
    if args.rounds < 1 or args.calls < 1:
        ap.error(f"--rounds and --calls must be >= 1; got {args.rounds} and {args.calls}")
    if not _pool.supported:
        ap.error("this build of tileblas has no thread pool: nothing to compare")

    import contextlib

    from tileblas._progress import Progress
    from tileblas.cli._bench_modes import BusyNeighbours

    todo = [(r, n, g) for r, n in points for g in gaps]
    bar = Progress(len(todo), not args.no_progress, "gap loops", "pt")
    out = []
    with BusyNeighbours(args.load) if args.load else contextlib.nullcontext() as busy:
        if busy is not None:
            busy.run()
        for routine, n, gap in todo:
            pt = measure(routine, n, gap, waits, rounds=args.rounds, calls=args.calls)
            out.append(pt)
            label = f"{routine} {n} gap {gap * 1e3:g} ms " + " ".join(f"{w} {pt['ratio'][w]:.2f}x" for w in waits)
            bar.step(label)
            if args.no_progress:  # each point as it is done: a run cut short keeps what it measured
                print(f"point: {label}", flush=True)
    bar.close()
    if args.load:
        print(f"\nwith {args.load} busy process(es) beside the loops")

    print(f"\n{'routine':7s} {'n':>5s} {'gap ms':>6s} {'SciPy us':>9s} "
          + " ".join(f"{w + ' us':>10s} {'ratio':>6s} {'(med)':>6s}" for w in waits) + f" {'control':>8s}")
    for p in out:
        print(f"{p['routine']:7s} {p['n']:5d} {p['gap_s'] * 1e3:6g} {p['scipy_s'] * 1e6:9.1f} "
              + " ".join(f"{p['tileblas_s'][w] * 1e6:10.1f} {p['ratio'][w]:6.2f} {p['ratio_median'][w]:6.2f}"
                         for w in waits) + f" {p['control']:8.2f}")
    print("\nratio = SciPy's time per call / tileblas' (best of rounds; (med): median of rounds); "
          "control = SciPy / SciPy again")
    ctl = [p["control"] for p in out]
    for w in waits:
        worst = min(out, key=lambda p: p["ratio"][w])
        print(f"  wait {w}: median {statistics.median(p['ratio'][w] for p in out):.2f}, worst "
              f"{worst['ratio'][w]:.2f} ({worst['routine']} n={worst['n']}, gap {worst['gap_s'] * 1e3:g} ms), "
              f"median of rounds worst {min(p['ratio_median'][w] for p in out):.2f}")
        total: dict = {}
        for p in out:
            for k, v in p["counters"][w].items():
                total[k] = total.get(k, 0) + v
        print(f"    {wake_text(total)}")
    print(f"  controls {min(ctl):.2f}-{max(ctl):.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"points": out, "waits": waits, "load": args.load, "pool": _openblas.pool_info()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
