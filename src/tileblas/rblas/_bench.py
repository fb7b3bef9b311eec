"""The RBLAS benchmark (run by ``tileblas rblas bench``, :mod:`tileblas.cli._rblas`): the paper's benchmark (section 3.2, figures 2-7 and 11) and the issue's bars.

Design note.  Two parts, both timing only within one run with the baseline measured alongside:

* **sweep** (paper section 3.2): for each routine, size and mode, ``n`` forward calls (each on the output
  of the previous one) then ``n`` reverse calls, over ``r`` trials; values ``a + R*b`` with a = b = 1000.
  Reported per mode: mean forward and reverse time per call (median over trials), extra bytes held after
  the ``n`` forward calls, RMS difference between the original and the restored output (figure 11), and
  the plain ``tileblas.blas`` call time as baseline.
* **bars**: compute-mode forward vs the plain call for Level 1 at N=10^7, Level 2 at N=4096, Level 3 at
  N=2048; Level-1 round trip compute vs checkpoint; Level-1 RMS at N=10^7; exact mode bit-exactness on
  every pair (paper data and cancelling inputs) and its memory for axpy.  Timings: same buffers on both
  sides, two untimed warm-up calls each, then interleaved rounds (ABBA); best of at least 5 rounds and
  2 s, extended (up to 100 rounds or 20 s) until each side's minimum repeats within 1% (a rule that
  never looks at the ratio); the median of the per-round ratios is reported beside it, and so is the
  cost of the forward call's bookkeeping (its time outside the BLAS call, less the plain call's),
  measured apart.

Results go to ``<out>/rblas_bench.json`` and PNG plots (:mod:`tileblas.rblas._plots`; matplotlib, optional):
``rblas_fig2_level1.png``, ``rblas_fig3_level2.png``, ``rblas_fig4_level3.png`` (forward time, reverse time
and extra bytes per mode against N: the paper's figures 2-4, CPU) and ``rblas_fig11_rms.png`` (figure 11).
Figures 5-7 are the paper's GPU runs; the JSON says why they are absent (tileblas.blas computes on host
arrays).  Sizes (:data:`SIZES`): ``--preset quick`` (default, about a minute on 2 cores) or ``paper``
(much longer: its Level-1 part alone took 6 min on 2 cores, Level 3 at N=1000 dominates), overridden
per level with ``--sizes LEVEL=N[,N...]``; the bars' sizes with ``--bar-sizes LEVEL=N``.  A progress
bar (tqdm when installed, else a text bar) goes to stderr unless ``--no-progress``.  Routines that
``tileblas.blas`` does not provide are skipped unless ``--fallback-scipy`` is given, in which case they
run on ``scipy.linalg.blas`` and the JSON says so.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from typing import Any, Callable

import numpy as np

from tileblas._progress import Progress
from tileblas._timing import interleaved
from tileblas.rblas._plots import plot_figures

__all__ = ["run_bench", "sweep", "bars", "exact_coverage"]

PAPER_ROUTINES = {1: ["zaxpy", "zscal", "zdrot"], 2: ["zgemv", "zgbmv", "zgeru"], 3: ["zgemm", "zsymm", "ztrmm"]}
#: sweep sizes.  ``paper``: decades as on the x axes of figures 2-4 and 11 (Level 1 up to the bar's 10^7;
#: Levels 2-3 in half decades up to 10^3.5 and 10^3, where the paper's figure 11 still shows lossless
#: reversal); ``quick``: a subset that runs in a few minutes on 2 cores.
SIZES = {
    "quick": {1: [10**3, 10**4, 10**5, 10**6], 2: [64, 256, 1024], 3: [64, 128, 256]},
    "paper": {1: [10, 10**2, 10**3, 10**4, 10**5, 10**6, 10**7], 2: [10, 32, 100, 316, 1000, 3162],
              3: [10, 32, 100, 316, 1000]},
}
#: what the paper reports about RMS restore errors (section 1.5, section 3.2 and figure 11)
PAPER_RMS = {
    "level1": "zero loss of precision for vector subprograms (section 1.5); 'essentially lossless up to "
              "vector sizes as large as 10^7', negligible at 10^8 (section 3.7, figure 11)",
    "level2": "lossless until square matrix sizes of 10^3.5, negligible loss at 10^4 (section 3.7)",
    "level3": "lossless at 10^3 - 10^3.5, lossy at 10^4 (section 3.7)",
    "reference": "an RMS of e = 0.001 with a = b = 1000 is a relative error of 1e-6 (section 3.2)",
}
SWEEP_MODES = ("checkpoint", "compute", "exact")
#: the bars' sizes (Level 1 N = 10^7, Level 2 N = 4096, Level 3 N = 2048)
BAR_SIZES = {1: 10**7, 2: 4096, 3: 2048}
#: Level-1 routines of the round-trip and RMS bars
RT_ROUTINES = ("daxpy", "zaxpy", "zscal", "zdrot")
EXACT_AXPY = ("saxpy", "daxpy", "caxpy", "zaxpy")
#: the routines of the forward bar, with their level (its size: BAR_SIZES)
FORWARD_ROUTINES = ((1, "daxpy"), (2, "dgemv"), (3, "dgemm"))
#: the routines of the rank-update bar (compute forward vs plain, as the forward bar, at Level 2's size)
RANK_ROUTINES = ((2, "dsyr"), (2, "ssyr"), (2, "dspr"), (2, "dsyr2"), (2, "dspr2"), (2, "zher"), (2, "zhpr"),
                 (2, "zher2"), (2, "zhpr2"), (2, "dger"), (2, "zgeru"), (2, "zgerc"))
#: the bars: compute forward vs plain (forward: Levels 1-3; rank: the rank updates), Level-1 round trips
#: (with the RMS), exact mode
BAR_PARTS = ("forward", "rank", "roundtrip", "exact")
#: the compute-mode forward call against the plain call, at most (issue 37: "<= 1.10x for Level 1/2/3")
FORWARD_BAR = 1.10


class _Namespace:
    """tileblas.blas, optionally completed by scipy.linalg.blas; remembers which names fell back."""

    def __init__(self, fallback: bool) -> None:
        self.fallback = fallback
        self.fell_back: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        # resolved once, then kept as an instance attribute: the forward calls look their routine up on
        # this namespace at every call, and that lookup must cost what it costs on tileblas.blas itself
        tb = importlib.import_module("tileblas.blas")
        f = getattr(tb, name, None)
        if f is None and self.fallback:
            import scipy.linalg.blas as sb

            self.fell_back.add(name)
            f = getattr(sb, name, None)
        self.__dict__[name] = f
        return f


def _split(name: str) -> tuple[str, str]:
    import tileblas.rblas as rb

    spec = rb.SPEC_OF[name]
    return name[: len(name) - len(spec.routine)], spec.routine


def _outputs(name: str, args: tuple, kw: dict) -> list[np.ndarray]:
    import tileblas.rblas as rb
    from tileblas.rblas._registry import bind

    spec = rb.SPEC_OF[name]
    bound = bind(spec, name, args, kw)
    return [bound[o.name] for o in spec.outputs]


def _rms(a: np.ndarray, b: np.ndarray) -> float:
    d = np.asarray(a, dtype=np.complex128) - np.asarray(b, dtype=np.complex128)
    return float(np.sqrt(np.mean(np.abs(d) ** 2))) if d.size else 0.0


def _plain(ns: Any, name: str, args: tuple, kw: dict) -> Callable[[], Any]:
    fn = getattr(ns, name)
    return lambda: fn(*args, **kw)


def sweep(routines: dict[int, list[str]], sizes: dict[int, list[int]], n_calls: int, trials: int,
          modes: tuple[str, ...], ns: Any, log: Callable[[str], None],
          step: Callable[[str], None] = lambda label: None) -> list[dict[str, Any]]:
    """The paper's experiment; one row per (routine, size, mode) plus a 'plain' row per (routine, size).
    ``step`` is called once per (routine, size, trial) (progress)."""
    import tileblas.rblas as rb
    from tileblas.rblas import _examples

    rows = []
    for level, names in routines.items():
        for name in names:
            if getattr(ns, name) is None:
                log(f"  skip {name}: not in tileblas.blas yet")
                for _ in range(len(sizes[level]) * trials):
                    step(f"{name} skipped")
                continue
            prefix, routine = _split(name)
            fwd, rev = rb.PAIRS[name]
            for n in sizes[level]:
                rng = np.random.default_rng(n)
                args, kw = _examples.build(routine, prefix, n, rng)
                outs = _outputs(name, args, kw)
                orig = [o.copy(order="K") for o in outs]
                times: dict[str, list[tuple[float, float]]] = {m: [] for m in ("plain", *modes)}
                held: dict[str, int] = {}
                rms: dict[str, float] = {}
                decisions: dict[str, str] = {}
                plain = _plain(ns, name, args, kw)
                for _t in range(trials):
                    step(f"{name} n={n} trial {_t + 1}/{trials}")
                    for m in ("plain", *modes):
                        for o, v in zip(outs, orig):
                            o[...] = v
                        t0 = time.perf_counter()
                        for _ in range(n_calls):
                            if m == "plain":
                                plain()
                            else:
                                fwd(*args, mode=m, **kw)
                        t1 = time.perf_counter()
                        if m != "plain":
                            held[m] = max(held.get(m, 0), sum(d.extra_bytes for d in rb.pending()))
                            decisions[m] = rb.pending()[-1].mode
                            for _ in range(n_calls):
                                rev(*args, **kw)
                        t2 = time.perf_counter()
                        times[m].append(((t1 - t0) / n_calls, (t2 - t1) / n_calls))
                        if m != "plain":
                            rms[m] = max(rms.get(m, 0.0), max(_rms(o, v) for o, v in zip(outs, orig)))
                for m, ts in times.items():
                    f = float(np.median([t[0] for t in ts]))
                    r = float(np.median([t[1] for t in ts]))
                    row = {"level": level, "routine": name, "n": n, "mode": m, "forward_s": f,
                           "reverse_s": r if m != "plain" else None,
                           "extra_bytes": held.get(m, 0), "rms": rms.get(m), "did": decisions.get(m)}
                    rows.append(row)
                    log(f"  {name:7s} n={n:<9d} {m:10s} fwd {f*1e6:11.1f} us  rev "
                        f"{(r*1e6 if m != 'plain' else float('nan')):11.1f} us  held {held.get(m, 0):>11d} B  "
                        f"rms {rms.get(m, float('nan')):.3g}")
    return rows


def _best_interleaved(fns: dict[str, Callable[[], float]], trials: int,
                      samples: dict[str, list[float]] | None = None, max_trials: int | None = None,
                      tol: float = 0.01, min_seconds: float = 0.0, max_seconds: float = float("inf")
                      ) -> dict[str, float]:
    """Best seconds of each self-timed function (:func:`_timed`): two untimed calls each first, then at
    least ``trials`` ABBA rounds, extended (to ``max_trials`` rounds or ``max_seconds``, past
    ``min_seconds``) until every function's minimum repeats within ``tol``.  ``samples`` (optional)
    receives every timing, in round order.  The loop is :func:`tileblas._timing.interleaved`."""
    timed = interleaved(fns, trials, self_timed=True, prime=2, alternate=True, until_stable=tol,
                        max_rounds=max_trials, min_seconds=min_seconds, max_seconds=max_seconds)
    if samples is not None:
        samples.update(timed.samples)
    return timed.best


def _paired_median_ratio(num: list[float], den: list[float]) -> float:
    """Median over rounds of num[i] / den[i] (the two samples of a round ran back to back)."""
    return float(np.median(np.asarray(num) / np.asarray(den)))


class _Stopwatch:
    """A stand-in for the BLAS namespace: the real routines, each call timed (``last``: its seconds)."""

    def __init__(self, ns: Any) -> None:
        self._ns = ns
        self.last = 0.0

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self._ns, name)

        def routine(*args: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                self.last = time.perf_counter() - t0
        self.__dict__[name] = routine  # built once: later lookups are plain attribute reads
        return routine


class _TimedNative:
    """tileblas.rblas._guard with its executor's calls timed into a :class:`_Stopwatch` (the routine's call
    of a forward call that the executor runs)."""

    def __init__(self, native: Any, sw: _Stopwatch) -> None:
        self._native = native
        self._sw = sw

    def guarded(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._native.guarded(*args)
        finally:
            self._sw.last = time.perf_counter() - t0

    def syr(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._native.syr(*args)
        finally:
            self._sw.last = time.perf_counter() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._native, name)


def _bookkeeping(name: str, ns: Any, args: tuple, kw: dict, rounds: int = 9) -> dict[str, float]:
    """What a compute-mode forward call costs besides its BLAS call, on these very operands: per round,
    the forward call's time minus the time of the routine call inside it, and the same for the plain
    call (its own argument handling), interleaved; medians over ``rounds``.  Each call is followed,
    untimed, by its undo.  Measured in place, because a large call leaves the caches cold for the Python
    code around it, which then costs several times what it costs in a loop of tiny calls."""
    import tileblas.rblas as rb
    from tileblas.rblas import _registry, _safety

    f, r = rb.PAIRS[name]
    sw = _Stopwatch(ns)
    plain = getattr(sw, name)
    old = _registry._blas_namespace
    native = _safety._native
    extra: dict[str, list[float]] = {"plain": [], "compute_forward": []}

    def run_plain() -> None:
        t0 = time.perf_counter()
        plain(*args, **kw)
        extra["plain"].append(time.perf_counter() - t0 - sw.last)
        _undo_plain(name, args, kw)

    def run_forward() -> None:
        _registry._blas_namespace = lambda: sw
        if native is not None:  # the routine's call is the native executor's where it runs it
            _safety._native = _TimedNative(native, sw)
        try:
            t0 = time.perf_counter()
            f(*args, mode="compute", **kw)
            extra["compute_forward"].append(time.perf_counter() - t0 - sw.last)
        finally:
            _registry._blas_namespace = old
            _safety._native = native
        r(*args, **kw)

    for t in range(rounds):
        for run in ((run_plain, run_forward) if t % 2 == 0 else (run_forward, run_plain)):
            run()
    p_s = float(np.median(extra["plain"]))
    f_s = float(np.median(extra["compute_forward"]))
    return {"rounds": rounds, "plain_outside_routine_s": p_s, "forward_outside_routine_s": f_s,
            "bookkeeping_s": f_s - p_s}


def _timed(call: Callable[[], Any], after: Callable[[], Any] | None = None) -> Callable[[], float]:
    def run() -> float:
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        if after is not None:
            after()
        return dt
    return run


def bars(ns: Any, trials: int, log: Callable[[str], None], sizes: dict[int, int] | None = None,
         step: Callable[[str], None] = lambda label: None, max_trials: int | None = None,
         parts: tuple[str, ...] = BAR_PARTS, min_seconds: float = 2.0, max_seconds: float = 20.0
         ) -> dict[str, Any]:
    """The issue's bars (see module docstring); ``step`` is called once per unit of work (progress).
    ``trials``: at least this many interleaved rounds per timing (and ``min_seconds``), extended up to
    ``max_trials`` (default 100) rounds or ``max_seconds`` until each side's minimum is reproducible
    (see :func:`_best_interleaved`).  ``parts``:
    which bars to run (:data:`BAR_PARTS`)."""
    import tileblas.rblas as rb
    from tileblas.rblas import _examples

    bad = [p for p in parts if p not in BAR_PARTS]
    if bad or not parts:
        raise ValueError(f"parts must be a non-empty subset of {BAR_PARTS}; got {parts!r} instead")
    sizes = {**BAR_SIZES, **(sizes or {})}
    max_trials = 100 if max_trials is None else max_trials
    out: dict[str, Any] = {"sizes": sizes, "trials": trials, "max_trials": max(trials, max_trials),
                           "min_seconds": min_seconds, "max_seconds": max_seconds, "parts": list(parts)}
    budget = {"min_seconds": min_seconds, "max_seconds": max_seconds}
    # 1. compute-mode forward vs plain call (the rank updates: the same, apart)
    fwd_ratio: dict[str, Any] = {}
    rank_ratio: dict[str, Any] = {}
    todo = [(lv, nm, fwd_ratio) for lv, nm in FORWARD_ROUTINES if "forward" in parts]
    todo += [(lv, nm, rank_ratio) for lv, nm in RANK_ROUTINES if "rank" in parts]
    for level, name, table in todo:
        step(f"bar: {name} compute forward vs plain")
        if getattr(ns, name) is None:
            log(f"  skip {name}: not in tileblas.blas yet")
            continue
        prefix, routine = _split(name)
        f, r = rb.PAIRS[name]
        args, kw = _examples.build(routine, prefix, sizes[level], np.random.default_rng(level))
        plain = getattr(ns, name)
        # same buffers on both sides: each timed call is followed (untimed) by the compute inverse, so
        # both sides start every call from the same data; rblas's own cost is measured apart, on the same
        # operands (time outside the routine call)
        book = _bookkeeping(name, ns, args, kw, 9 if level < 3 else 3)
        samples: dict[str, list[float]] = {}
        best = _best_interleaved({
            "plain": _timed(lambda: plain(*args, **kw), lambda: _undo_plain(name, args, kw)),
            "compute_forward": _timed(lambda: f(*args, mode="compute", **kw), lambda: r(*args, **kw)),
        }, trials, samples, max_trials, **budget)
        cf, pl = samples["compute_forward"], samples["plain"]
        ratio = best["compute_forward"] / best["plain"]
        row = {"n": sizes[level], "plain_s": best["plain"], "compute_forward_s": best["compute_forward"],
               "ratio": ratio, "bar": FORWARD_BAR, "pass": ratio <= FORWARD_BAR, "trials": len(pl),
               "median_ratio": float(np.median(cf) / np.median(pl)),
               "paired_median_ratio": _paired_median_ratio(cf, pl),
               "bookkeeping": book, "bookkeeping_share": book["bookkeeping_s"] / best["plain"],
               "samples_s": samples}
        table[name] = row
        log(f"  {name} n={sizes[level]}: plain {best['plain']*1e3:.2f} ms, compute forward "
            f"{best['compute_forward']*1e3:.2f} ms -> {ratio:.3f}x (bar <= {FORWARD_BAR:.2f}: "
            f"{'met' if ratio <= FORWARD_BAR else 'NOT met'}; best of {len(pl)} "
            f"interleaved; median of paired ratios {row['paired_median_ratio']:.3f}); bookkeeping "
            f"{book['bookkeeping_s']*1e6:.1f} us = {100 * row['bookkeeping_share']:.2f}% of the call")
    if "forward" in parts:
        out["compute_forward_vs_plain"] = fwd_ratio
    if "rank" in parts:
        out["rank_forward_vs_plain"] = rank_ratio
    # 2. Level-1 round trip compute vs checkpoint, 3. RMS at N=1e7 with the paper's data
    rt = {}
    for name in (RT_ROUTINES if "roundtrip" in parts else ()):
        step(f"bar: {name} round trips")
        if getattr(ns, name) is None:
            continue
        prefix, routine = _split(name)
        f, r = rb.PAIRS[name]
        args, kw = _examples.build(routine, prefix, sizes[1], np.random.default_rng(7))
        outs = _outputs(name, args, kw)
        orig = [o.copy() for o in outs]
        rt_samples: dict[str, list[float]] = {}
        best = _best_interleaved({
            m: _timed(lambda m=m: (f(*args, mode=m, **kw), r(*args, **kw)))
            for m in ("checkpoint", "compute")
        }, trials, rt_samples, max_trials, **budget)
        for o, v in zip(outs, orig):
            o[...] = v
        for _ in range(10):
            f(*args, mode="compute", **kw)
        for _ in range(10):
            r(*args, **kw)
        rms = max(_rms(o, v) for o, v in zip(outs, orig))
        rt[name] = {"n": sizes[1], "checkpoint_round_trip_s": best["checkpoint"],
                    "compute_round_trip_s": best["compute"],
                    "compute_faster": best["compute"] < best["checkpoint"], "trials": len(rt_samples["compute"]),
                    "samples_s": rt_samples, "rms_after_10_round_trips": rms,
                    "paper_relative_error": 2 * rms / (1000.0 + 1000.0)}  # section 3.2: 2e/(a+b)
        log(f"  {name} n={sizes[1]}: round trip checkpoint {best['checkpoint']*1e3:.1f} ms, compute "
            f"{best['compute']*1e3:.1f} ms; compute RMS after 10 fwd + 10 rev: {rms:.3g} (relative "
            f"2e/(a+b) = {rms / 1000.0:.2g})")
    if "roundtrip" in parts:
        out["level1_round_trip"] = rt
    # 4. exact: every pair on the paper's data, cancelling inputs, memory for axpy
    if "exact" in parts:
        out["exact"] = exact_coverage(ns, log, sizes[1], step)
    return out


def _undo_plain(name: str, args: tuple, kw: dict) -> None:
    """Undo a plain call (untimed) with the compute inverse, recording nothing, so data stay bounded."""
    import tileblas.rblas as rb
    from tileblas.rblas._registry import DTYPE_OF_PREFIX, Ctx, _run_inverse, bind

    spec = rb.SPEC_OF[name]
    prefix = name[: len(name) - len(spec.routine)]
    _run_inverse(Ctx(spec, prefix, DTYPE_OF_PREFIX[prefix], bind(spec, name, args, kw)))


def exact_coverage(ns: Any, log: Callable[[str], None], n_axpy: int = 10**6,
                   step: Callable[[str], None] = lambda label: None) -> dict[str, Any]:
    """Exact mode on every pair (paper data, and inputs built to cancel for every additive routine):
    bit-exactness, fallbacks to checkpointing, and the memory held for axpy at ``n_axpy``."""
    import tileblas.rblas as rb
    from tileblas.rblas import _examples

    total = exact_ok = fell_back = 0
    failures = []
    fallbacks: dict[str, str] = {}
    for name, (f, r) in rb.PAIRS.items():
        if getattr(ns, name) is None:
            continue
        prefix, routine = _split(name)
        cases = [_examples.build(routine, prefix, 33, np.random.default_rng(total))]
        if routine in _examples.ADDITIVE:
            cases.append(_examples.cancelling(routine, prefix, 33, np.random.default_rng(total + 1)))
        step(name)
        for args, kw in cases:
            outs = _outputs(name, args, kw)
            orig = [np.array(o, copy=True) for o in outs]
            f(*args, mode="exact", **kw)
            d = rb.last_decision()
            r(*args, **kw)
            total += 1
            if d.mode != "exact":
                fell_back += 1
                fallbacks[name] = d.reason
            if all(np.array_equal(np.ascontiguousarray(o).view(np.uint8), np.ascontiguousarray(v).view(np.uint8))
                   for o, v in zip(outs, orig)):
                exact_ok += 1
            else:
                failures.append(name)
    mem = {}
    for name in EXACT_AXPY:
        if getattr(ns, name) is None:
            continue
        step(f"exact {name} n={n_axpy}")
        f, r = rb.PAIRS[name]
        prefix, routine = _split(name)
        args, kw = _examples.build(routine, prefix, n_axpy, np.random.default_rng(3))
        y = args[1]
        y0 = y.copy()
        f(*args, mode="exact", **kw)
        d = rb.last_decision()
        r(*args, **kw)
        mem[name] = {"n": n_axpy, "exact_bytes": d.extra_bytes, "checkpoint_bytes": d.checkpoint_bytes,
                     "ratio": d.extra_bytes / d.checkpoint_bytes, "bitwise": bool(np.array_equal(y, y0)),
                     "how": d.reason}
        log(f"  exact {name} n={n_axpy}: holds {d.extra_bytes} B vs checkpoint {d.checkpoint_bytes} B "
            f"({100*d.extra_bytes/d.checkpoint_bytes:.1f}%), bitwise {bool(np.array_equal(y, y0))}")
    log(f"  exact round trips bit-exact: {exact_ok}/{total} (of which {fell_back} fell back to checkpoint)")
    return {"round_trips": total, "bit_exact": exact_ok, "fell_back_to_checkpoint": fell_back,
            "fallback_reasons": fallbacks, "failures": failures, "axpy_memory": mem}


def gpu_note() -> str:
    """Why figures 5-7 (CUBLAS) are not produced: the sweep goes through tileblas.blas, which computes on
    host arrays; device arrays need a GPU and a device-array tileblas.blas."""
    try:
        import cupy

        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        count = 0
    if count == 0:
        return "no NVIDIA GPU / CuPy available: figures 5-7 (GPU) not produced"
    return ("a GPU is present, but tileblas.blas computes on host arrays only: figures 5-7 (GPU) not "
            "produced")


def _units(sizes: dict[int, list[int]], trials: int, do_sweep: bool, do_bars: bool,
           parts: tuple[str, ...] = BAR_PARTS) -> int:
    import tileblas.rblas as rb

    n = 0
    if do_sweep:
        n += sum(len(names) * len(sizes.get(level, [])) * trials for level, names in PAPER_ROUTINES.items())
    if do_bars:
        n += (len(FORWARD_ROUTINES) if "forward" in parts else 0) + (len(RT_ROUTINES) if "roundtrip" in parts else 0)
        n += len(RANK_ROUTINES) if "rank" in parts else 0
        n += len(rb.PAIRS) + len(EXACT_AXPY) if "exact" in parts else 0
    return n


def run_bench(outdir: str = "rblas-bench", preset: str = "quick", n_calls: int = 10, trials: int = 10,
              bar_trials: int = 5, fallback_scipy: bool = False, do_sweep: bool = True, do_bars: bool = True,
              bar_sizes: dict[int, int] | None = None, log: Callable[[str], None] = print,
              sizes: dict[int, list[int]] | None = None, progress: bool = False,
              bar_max_trials: int | None = None, bar_parts: tuple[str, ...] = BAR_PARTS,
              bar_seconds: float = 2.0, bar_max_seconds: float = 20.0) -> dict[str, Any]:
    """Run the benchmark and write ``rblas_bench.json`` and the PNG plots into ``outdir``.

    ``sizes`` (level -> list of sizes) overrides the preset's sweep sizes level by level; ``bar_sizes``
    (level -> size) the bars' sizes (default :data:`BAR_SIZES`: 10**7, 4096, 2048).  ``progress`` shows a
    progress bar on stderr.  The bars' timings take the best of at least ``bar_trials`` interleaved
    rounds and ``bar_seconds``, extended up to ``bar_max_trials`` (default 100) rounds or
    ``bar_max_seconds`` until each side's minimum is reproducible within 1%; ``bar_parts`` selects bars
    (:data:`BAR_PARTS`).
    """
    if preset not in SIZES:
        raise ValueError(f"preset must be one of {sorted(SIZES)}; got {preset!r} instead")
    if bar_max_trials is None:
        bar_max_trials = 100
    if not (0 <= bar_seconds <= bar_max_seconds):
        raise ValueError(f"bar_seconds and bar_max_seconds must satisfy 0 <= bar_seconds <= bar_max_seconds; "
                         f"got {bar_seconds!r} and {bar_max_seconds!r} instead")
    for name, val, allowed in (("n_calls", n_calls, 1), ("trials", trials, 1), ("bar_trials", bar_trials, 1),
                               ("bar_max_trials", bar_max_trials, 1)):
        if not isinstance(val, int) or val < allowed:
            raise ValueError(f"{name} must be a positive integer; got {val!r} instead")
    bad = [p for p in bar_parts if p not in BAR_PARTS]
    if bad or not bar_parts:
        raise ValueError(f"bar_parts must be a non-empty subset of {BAR_PARTS}; got {bar_parts!r} instead")
    from tileblas.rblas import _registry

    sweep_sizes = {**SIZES[preset], **(sizes or {})}
    os.makedirs(outdir, exist_ok=True)
    ns = _Namespace(fallback_scipy)
    old = _registry._blas_namespace
    _registry._blas_namespace = lambda: ns
    result: dict[str, Any] = {
        "preset": preset, "sizes": sweep_sizes, "n_calls": n_calls, "trials": trials, "bar_trials": bar_trials,
        "data": "a + R*b, a = b = 1000 (R uniform in [0, 1)); alpha = 1.5, beta = 0.75 (complex: x + x/4 j)",
        "timing": "sweep: mean per call within a trial, median over trials; bars: best of at least "
                  "bar_trials rounds and bar_seconds (up to bar_max_trials rounds or bar_max_seconds, until "
                  "each side's minimum repeats within 1%), "
                  "interleaved ABBA with the baseline, after two untimed warm-up calls each, same buffers",
        "bar_max_trials": bar_max_trials, "bar_seconds": bar_seconds, "bar_max_seconds": bar_max_seconds,
        "figures": {"2-4": "rblas_fig{2,3,4}_level{1,2,3}.png", "11": "rblas_fig11_rms.png",
                    "5-7": gpu_note()},
        "paper_rms_reference": PAPER_RMS}
    bar = Progress(_units(sweep_sizes, trials, do_sweep, do_bars, bar_parts), progress, "rblas bench", "step", log)
    t0 = time.perf_counter()
    try:
        import tileblas.rblas as rb

        rb.discard()
        if do_sweep:
            bar.write(f"== sweep ({preset}): n={n_calls} forward then n reverse calls, r={trials} trials ==")
            result["sweep"] = sweep(PAPER_ROUTINES, sweep_sizes, n_calls, trials, SWEEP_MODES, ns, bar.write,
                                    bar.step)
        if do_bars:
            bar.write(f"== bars (best of {bar_trials} to {max(bar_trials, bar_max_trials)} rounds, at least "
                      f"{bar_seconds:g} s, at most {bar_max_seconds:g} s, interleaved) ==")
            result["bars"] = bars(ns, bar_trials, bar.write, bar_sizes, bar.step, bar_max_trials, bar_parts,
                                  bar_seconds, bar_max_seconds)
    finally:
        _registry._blas_namespace = old
        bar.close()
    result["seconds"] = time.perf_counter() - t0
    result["fell_back_to_scipy"] = sorted(ns.fell_back)
    with open(os.path.join(outdir, "rblas_bench.json"), "w") as fh:
        json.dump(result, fh, indent=1, default=float)
    result["plots"] = (plot_figures(result.get("sweep", []), outdir, log, PAPER_ROUTINES, SWEEP_MODES)
                      if do_sweep else [])
    log(f"wrote {os.path.join(outdir, 'rblas_bench.json')} {' '.join(result['plots'])} "
        f"in {result['seconds']:.1f} s")
    return result
