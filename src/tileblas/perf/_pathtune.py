"""Measuring the path policy's crossovers on this machine (what ``tileblas tune`` stores in ``paths.json``).

Design note
    For each routine family and precision class (real: float64, complex: complex128) this times, in
    interleaved rounds with a pause before each timed block (the other OpenBLAS instance's threads go
    idle) and keeps the best of ``reps``:

    * native vs tiled at square sizes: one OpenBLAS call on all the host cores' threads, and the default
      tile runtime forced to tile (``shared_flops=0``, ``small_flops=0``).  ``tile_flops`` is the flop
      count of the smallest size from which the tiles won (by more than ``margin``) at that size and every
      larger one measured; never (``inf``) otherwise.  The native call's rates at those sizes are kept as
      ``cpu_rates`` (the CPU side of the drop-in's GPU rule).
    * native vs recursion for trmm/trsm, both on all threads, over triangle orders x right-hand sides
      (side L, lower, no transpose): per right-hand-side count the smallest order from which the recursion
      won at every larger order; the rule ``[min_order, rhs_lo, rhs_hi]`` covers the longest run of
      consecutive right-hand-side counts that won somewhere, min_order the largest of their orders.

    * the C small-call path's gemm route of real syrk/syr2k (:func:`measure_rank_gemm`) against the rank-k
      call, both through ``tileblas.blas`` with a new c, square Fortran-ordered operands: as one call
      with tileblas' instances held to one thread, and split on all threads; each round times every
      point once (a busy spell of the machine spoils one round of each point, the best is kept).  Per
      routine and way the limit (:func:`_gain_limit`): the orders up to the one where the summed log gain
      over ``1 + margin`` peaks take the route, the limit lying halfway (in order) past it; 0 where no
      prefix gains.

    * the C small-call path's one-thread limit of each family (:func:`measure_one_thread`): square calls
      through ``tileblas.blas`` on their path above the limit (split, or the pool's instance) against the
      one-thread instance, float64 and complex128 (the Hermitian families: complex128), every point once
      per round; the family's limit (:func:`_gain_limit`) is the smaller of its precisions', for every
      precision of the family.

    * the lower end of the C small-call path's split (:func:`measure_split`): square calls through
      ``tileblas.blas`` (Fortran order; trmm/trsm with b copied, side L on a Fortran-ordered b and side R
      on a C-ordered one) as one call on OpenBLAS's own threads against the call run in parts on the
      pool, one routine per family and precision class (:data:`~tileblas.policy._paths.SPLIT_TUNE`),
      every point once per round.  The one call keeps the orders up to the one where its summed log gain
      over ``1 - margin`` peaks (a tie keeps the one call: the split must gain more than ``margin``); the
      split runs from halfway (in order) past it, from the smallest order measured where it won there
      already, never where it won at no order measured; for trmm/trsm the two sides' ratios are taken
      together (their geometric mean per order: the split pays on both taken together).
      The upper ends (where the parts stop gaining, at orders 500-1600) stay shipped.

    Calls shorter than ``block_s`` are timed as a block of back-to-back calls on fresh outputs (the same
    rule for both sides), as in ``benchmarks/bench_trmm_trsm.py``.

    Cold calls: the three measurements of the C small-call path (gemm route, one-thread limit, split)
    also time, every round, one call of each way (the control too) as the first after ``idle`` seconds
    without calls, when tileblas' workers and OpenBLAS's threads sleep, and keep their medians.  Each
    measurement sets a challenger against the path in force without it (the gemm route against the rank-k
    call, the one thread against the pool's path, the split against the one call on OpenBLAS's threads,
    SciPy's path).  At a point the challenger's gain, warm and cold each beyond its own noise, is its loss
    where it loses in either by more than ``margin``, else the geometric mean of the two
    (:func:`_combined`): a path that wins blocks of calls by waking threads, which a single call after a
    pause pays for, is not chosen on its warm figure, nor one that wins cold calls and loses loops on its
    cold one (the bars of ``tileblas bench grid`` hold warm and cold alike).  ``idle`` 0: warm calls only.

    The control: at every point the baseline is timed a second time as a third contender ("control"),
    and the two baseline times' ratio is that point's noise.  A ratio is taken only for its part beyond
    the noise (:func:`above_noise`: 1.08 with a control of 1.05 counts as 1.03; within it, as 1.0), and a
    setting whose points all lie within their noise is not measured at all: it is left out of the result
    (its shipped value stays in force) and named in the rows' ``within_noise`` list.  Every row ends with
    its control ratio.

What it must not touch
    The runtime's decision code: it only produces a :class:`~tileblas.policy._paths.PathPolicy`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from typing import Any, Callable, Sequence

import numpy as np

from tileblas._dtypes import DTYPE_OF
from tileblas._timing import interleaved
from tileblas.policy._paths import CLASSES, FAMILIES, RANK_GEMM_ROUTINES, SPLIT_TUNE, PathPolicy

__all__ = ["measure_policy", "measure_rank_gemm", "measure_one_thread", "measure_split", "above_noise",
           "one_thread_precisions"]

_DTYPE = {"real": np.float64, "complex": np.complex128}


def _random(rng: np.random.Generator, dtype: Any, *shape: int) -> np.ndarray:
    """A Fortran-ordered standard-normal array of ``dtype`` (complex: both parts drawn)."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asfortranarray(x.astype(dtype))


def _triangle(rng: np.random.Generator, n: int, dtype: Any) -> np.ndarray:
    """A well-conditioned lower triangle of order ``n`` and of ``dtype``, Fortran-ordered: tril(x) / sqrt(n) + 2 I
    (the scale a Python float, which keeps a single-precision ``dtype``: NumPy's float64 scalar would not)."""
    return np.asfortranarray(np.tril(_random(rng, dtype, n, n)) * (1.0 / math.sqrt(max(n, 1)))
                             + 2.0 * np.eye(n, dtype=dtype))


def _square_args(rng: np.random.Generator, family: str, dtype: Any, n: int) -> tuple:
    """The arguments of a square call of ``family`` through ``tileblas.blas``: alpha 1 and Fortran-ordered
    operands of order ``n`` (trmm/trsm: side L, on a well-conditioned lower triangle)."""
    if family in ("trmm", "trsm"):
        return (1.0, _triangle(rng, n, dtype), _random(rng, dtype, n, n))
    ops = [_random(rng, dtype, n, n) for _ in range(1 if family in ("syrk", "herk") else 2)]
    return (1.0, *ops)


def _operands(family: str, n: int, rhs: int, dtype: Any, rng: np.random.Generator) -> tuple[list, dict, int]:
    """Kernel-layer arguments (output last in the positional list's writable slot) and the output index."""
    def r(*shape: int) -> np.ndarray:
        return _random(rng, dtype, *shape)

    if family == "gemm":
        return [1.0, r(n, n), r(n, n), 0.5, r(n, n)], {}, 4
    if family == "symm":
        a = r(n, n)
        return [1.0, a + a.T, r(n, n), 0.5, r(n, n)], {"side": "L", "uplo": "L"}, 4
    if family == "syrk":
        return [1.0, r(n, n), 0.5, r(n, n)], {"uplo": "L", "trans": "N"}, 3
    if family == "syr2k":
        return [1.0, r(n, n), r(n, n), 0.5, r(n, n)], {"uplo": "L", "trans": "N"}, 4
    return [1.0, _triangle(rng, n, dtype), r(n, rhs)], {"side": "L", "uplo": "L", "transa": "N", "diag": "N"}, 2


def _flops(family: str, n: int, rhs: int, complex_: bool) -> float:
    from tileblas.runtime._planner import flop_count

    if family in ("trmm", "trsm"):
        f = flop_count(family, n, rhs, n)
    else:
        f = flop_count(family, n, n, n)
    return f * (4.0 if complex_ else 1.0)


def _best(fns: dict[str, Callable[[], Callable[[], None]]], reps: int, settle: float) -> dict[str, float]:
    """Best seconds of each contender over ``reps`` interleaved rounds, each on fresh inputs: a pause, one
    untimed warm-up call, then a block of calls lasting about 50 ms (at most 20).  The first contender is
    timed once more as "control" (the noise of the point: :func:`above_noise`)."""
    first = next(iter(fns))
    return interleaved({**fns, "control": fns[first]}, reps, fresh=True, settle=settle, warmup=1, block_s=0.05,
                       max_block=20).best


def above_noise(ratio: float, control: float) -> float:
    """``ratio`` with the noise of its point taken off: the part of ``|log ratio|`` beyond
    ``|log control|`` (control: the baseline timed twice, one time over the other), toward 1; exactly 1.0
    where the ratio lies within the noise."""
    if not (ratio > 0 and control > 0) or not (math.isfinite(ratio) and math.isfinite(control)):
        return 1.0
    gain, noise = math.log(ratio), abs(math.log(control))
    return math.exp(math.copysign(max(0.0, abs(gain) - noise), gain))


def _timer(call: Callable[..., None], args: list, kw: dict, out: int) -> Callable[[], Callable[[], None]]:
    def prep() -> Callable[[], None]:
        a = list(args)
        a[out] = args[out].copy(order="F")
        return lambda: call(*a, **kw)

    return prep


def measure_policy(sizes: Sequence[int] = (512, 1024, 2048), orders: Sequence[int] = (512, 1024, 2048),
                   rhs: Sequence[int] = (16, 32, 64, 128, 256), families: Sequence[str] = FAMILIES,
                   classes: Sequence[str] = CLASSES, reps: int = 3, settle: float = 0.2, margin: float = 0.03,
                   threads: int | None = None, progress: Callable[[str], None] | None = None) -> PathPolicy:
    """Measure the crossovers (see the module notes) and return them as a PathPolicy (not saved)."""
    from tileblas.kernels import _openblas
    from tileblas.kernels import _recursive
    from tileblas.kernels._threadpool import cpu_count
    from tileblas.runtime._runtime import Runtime

    for f in families:
        if f not in FAMILIES:
            raise ValueError(f"families must be among {FAMILIES}; got {f!r}")
    for c in classes:
        if c not in CLASSES:
            raise ValueError(f"classes must be among {CLASSES}; got {c!r}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1; got {reps}")
    threads = cpu_count() if threads is None else int(threads)
    lib = _openblas.get_library(threads)
    rng = np.random.default_rng(0)
    tiles: dict = {}
    recursion: dict = {}
    rates: dict = {}
    measured: dict[str, Any] = {"native_vs_tiled": {}, "native_vs_recursive": {}, "reps": reps,
                                "threads": threads, "margin": margin, "within_noise": []}
    say = progress or (lambda s: None)
    tiled_rt = Runtime(shared_flops=0, small_flops=0)
    try:
        for cls in classes:
            dt = _DTYPE[cls]
            for fam in families:
                native = getattr(_openblas, fam)
                wins = []
                heard: list[bool] = []
                rows = []
                for n in sorted(sizes):
                    args, kw, out = _operands(fam, n, n, dt, rng)
                    best = _best({
                        "native": _timer(lambda *a, **k: native(*a, lib=lib, **k), args, kw, out),
                        "tiled": _timer(lambda *a, _f=fam, **k: tiled_rt.run(_f, *a, **k), args, kw, out),
                    }, reps, settle)
                    ratio = best["native"] / best["tiled"]
                    control = best["native"] / best["control"]
                    adj = above_noise(ratio, control)
                    rows.append([n, best["native"], best["tiled"], ratio, control])
                    rates.setdefault((fam, cls), []).append((n, _flops(fam, n, n, cls == "complex") / best["native"]))
                    wins.append((n, adj > 1.0 + margin))
                    heard.append(adj != 1.0)
                    say(f"{fam}/{cls} n={n}: native {best['native'] * 1e3:.3f} ms, tiled {best['tiled'] * 1e3:.3f} ms"
                        f" (tiled {ratio:.2f}x, control {control:.2f}x)")
                cross = math.inf
                for n, won in reversed(wins):  # the smallest size from which tiles won at every larger size
                    if not won:
                        break
                    cross = _flops(fam, n, n, cls == "complex")
                if any(heard):
                    tiles[(fam, cls)] = cross
                else:  # every point within its noise: nothing measured, the shipped value stays
                    measured["within_noise"].append(f"tile_flops {fam}/{cls}")
                measured["native_vs_tiled"][f"{fam}/{cls}"] = rows
                if fam in ("trmm", "trsm") and threads >= 2:
                    rule = _measure_recursion(fam, cls, dt, orders, rhs, reps, settle, margin, lib,
                                              getattr(_recursive, "recursive_" + fam), native, rng, measured, say)
                    if rule is None:
                        measured["within_noise"].append(f"recursion {fam}/{cls}")
                    else:
                        recursion[(fam, cls)] = rule
                elif fam in ("trmm", "trsm"):
                    recursion[(fam, cls)] = (math.inf, 0.0, 0.0)  # the recursion needs 2+ threads
    finally:
        tiled_rt.shutdown()
    when = time.strftime("%Y-%m-%d %H:%M")
    return PathPolicy(tiles, recursion, f"tuned on {when}", None, "", measured, threads, cpu_rates=rates)


def _measure_recursion(fam: str, cls: str, dt: Any, orders: Sequence[int], rhs: Sequence[int], reps: int,
                       settle: float, margin: float, lib: Any, recursive: Callable, native: Callable,
                       rng: np.random.Generator, measured: dict, say: Callable[[str], None]) -> tuple | None:
    from tileblas.policy._recursion import recursion_stop

    first: dict[int, float] = {}
    rows = []
    heard: list[bool] = []
    for r in sorted(rhs):
        wins = []
        stop = recursion_stop(fam, "L", r, np.dtype(dt))  # the stop the CPU kernels would use (side L)
        for n in sorted(orders):
            args, kw, out = _operands(fam, n, r, dt, rng)
            best = _best({
                "native": _timer(lambda *a, **k: native(*a, lib=lib, **k), args, kw, out),
                "recursive": _timer(lambda *a, **k: recursive(*a, lib=lib, stop=stop, **k), args, kw, out),
            }, reps, settle)
            ratio = best["native"] / best["recursive"]
            control = best["native"] / best["control"]
            adj = above_noise(ratio, control)
            rows.append([n, r, best["native"], best["recursive"], ratio, control])
            wins.append((n, adj > 1.0 + margin))
            heard.append(adj != 1.0)
            say(f"{fam}/{cls} order={n} rhs={r}: native {best['native'] * 1e3:.3f} ms, recursive "
                f"{best['recursive'] * 1e3:.3f} ms (recursive {ratio:.2f}x, control {control:.2f}x)")
        o = math.inf
        for n, won in reversed(wins):
            if not won:
                break
            o = float(n)
        first[r] = o
    measured["native_vs_recursive"][f"{fam}/{cls}"] = rows
    if not any(heard):
        return None  # every point within its noise: nothing measured
    runs: list[list[int]] = []
    for r in sorted(rhs):
        if math.isfinite(first[r]):
            if runs and runs[-1][-1] == _prev(rhs, r):
                runs[-1].append(r)
            else:
                runs.append([r])
    if not runs:
        return (math.inf, 0.0, 0.0)
    best_run = max(runs, key=len)
    return (max(first[r] for r in best_run), float(best_run[0]), float(best_run[-1]))


def _prev(values: Sequence[int], v: int) -> int | None:
    s = sorted(values)
    i = s.index(v)
    return s[i - 1] if i else None


def _check_ladder(reps: int, **ladders: Sequence[int]) -> None:
    """Refuse, by name, a ladder of orders that is empty or holds an order below 1, and reps below 1."""
    for name, orders in ladders.items():
        if not orders or any(int(n) < 1 for n in orders):
            raise ValueError(f"{name} must be a non-empty list of orders >= 1; got {list(orders)!r}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1; got {reps}")


def _c_path() -> tuple[Any, str]:
    """The C small-call path's module, on for the default runtime; or (None, why not)."""
    from tileblas import blas as tb

    try:
        from tileblas.blas import _fastpath  # type: ignore[attr-defined]
    except ImportError:
        return None, "no C small-call path in this build"
    tb.dgemm(1.0, [[1.0]], [[1.0]])  # a Python-path call: the C path goes on for the default runtime
    if not hasattr(_fastpath, "configure") or not _fastpath.config()["enabled"]:
        return None, "the C small-call path is off here (TILEBLAS_SMALL_PATH=0 or a runtime in force)"
    return _fastpath, ""


def _with(fastpath: Any, saved: dict[str, Any], field: str, name: str, value: Any) -> None:
    """Configure the C path as ``saved`` (its configuration) with ``saved[field][name] = value``."""
    fastpath.configure({**saved, field: {**saved[field], name: value}})


def _splits(cfg: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """The split ranges of a C-path configuration in force: none without a pool slot."""
    return cfg["split"] if cfg["pool_slot"] >= 0 else {}


def _best_over_rounds(points: Sequence[tuple[Any, Callable[[Any], None], tuple, int | None]], ways: dict[str, Any],
                      reps: int, settle: float, say: Callable[[str], None],
                      idle: float = 0.0) -> tuple[dict[Any, dict[str, float]], dict[Any, dict[str, float]]]:
    """``({key: {way: best seconds per call}}, {key: {way: median seconds of a cold call}})`` for the
    points ``(key, setter, (call, args), threads)``, each way of ``ways`` (``{way: value}``) timed as
    ``setter(value)`` (untimed) and then ``call(*args)``.  Every round times every point once (a busy spell
    of the machine spoils one round of each point, not every round of some), ``reps`` rounds; where
    ``threads`` is set, tileblas' instances are held to that many threads meanwhile.  Blocks are sized from
    the first way, which is timed a second time as "control" (the noise of the point: :func:`above_noise`).
    With ``idle`` > 0 every round also times one call of each way (the control too) as the first after
    ``idle`` seconds without calls, its workers asleep; the second dict holds their medians over the rounds
    (empty with ``idle`` 0)."""
    from threadpoolctl import threadpool_limits

    contenders = [*ways, "control"]
    best = {key: dict.fromkeys(contenders, math.inf) for key, *_ in points}
    cold: dict[Any, dict[str, list[float]]] = {key: {k: [] for k in contenders} for key, *_ in points}
    for r in range(reps):
        say(f"round {r + 1} of {reps}: {len(points)} points")
        for key, setter, (call, args), threads in points:
            def way(value: Any, setter: Callable[[Any], None] = setter, call: Any = call,
                    args: tuple = args) -> Callable[[], Callable[[], None]]:
                def prep() -> Callable[[], None]:
                    setter(value)
                    return lambda: call(*args)
                return prep

            first = next(iter(ways))
            values = {**ways, "control": ways[first]}
            turns = {k: way(v) for k, v in values.items()}
            with threadpool_limits(threads) if threads is not None else contextlib.nullcontext():
                got = interleaved(turns, 1, fresh=True, settle=settle, warmup=1, block_s=0.03, max_block=20000,
                                  block_from=first).best
                if idle > 0:  # one call each, the first after the idle pause
                    for k, v in interleaved(turns, 1, fresh=True, settle=idle).best.items():
                        cold[key][k].append(v)
            for k, v in got.items():
                best[key][k] = min(best[key][k], v)
    medians = {key: {k: float(np.median(v)) for k, v in c.items()} for key, c in cold.items()} if idle > 0 else {}
    return best, medians


def _combined(warm: float, cold: float, margin: float) -> float:
    """A challenger's gain over the baseline from its warm and cold gains (each beyond its noise): the
    loss where it loses in either by more than ``margin`` (then the baseline keeps the point), else the
    geometric mean of the two (warm and cold count alike)."""
    low = min(warm, cold)
    return low if low < 1.0 - margin else math.sqrt(warm * cold)


def _gains(best: tuple[dict[Any, dict[str, float]], dict[Any, dict[str, float]]], first: str, second: str,
           slow: tuple[str, str], fast: tuple[str, str], rows: dict[str, Any], say: Callable[[str], None],
           title: str, margin: float, challenger: str = "fast") -> list:
    """The points ``(order, gain)`` of the keys ``(first, second, order)`` of :func:`_best_over_rounds`'
    result, ``slow`` and ``fast`` each (way, name in the progress line): the gain is slow time / fast time
    of the warm calls beyond their noise; where cold calls were timed, that and the same of the cold calls
    taken together by :func:`_combined` for the ``challenger`` way ("fast" or "slow"; the other is the
    baseline, the path in force without the choice).  Each point is also a row ``[second, order, slow s,
    fast s, ratio, control]`` of ``rows[first]`` (with cold calls, followed by ``cold slow s, cold fast s,
    cold ratio, cold control``) and a progress line."""
    warm, cold = best
    pts = []
    for (f, s, n), b in warm.items():
        if f == first and s == second:
            base = next(iter(b))  # the way timed twice
            ratio, control = b[slow[0]] / b[fast[0]], b[base] / b["control"]
            row = [second, n, b[slow[0]], b[fast[0]], ratio, control]
            line = (f"{title} n={n}: {slow[1]} {b[slow[0]] * 1e6:.2f} us, {fast[1]} {b[fast[0]] * 1e6:.2f} us "
                    f"({fast[1]} {ratio:.2f}x, control {control:.2f}x)")
            gain = above_noise(ratio, control)
            c = cold.get((f, s, n))
            if c:
                cratio, ccontrol = c[slow[0]] / c[fast[0]], c[base] / c["control"]
                row += [c[slow[0]], c[fast[0]], cratio, ccontrol]
                line += (f"; cold {slow[1]} {c[slow[0]] * 1e6:.0f} us, {fast[1]} {c[fast[0]] * 1e6:.0f} us "
                         f"({cratio:.2f}x, control {ccontrol:.2f}x)")
                cgain = above_noise(cratio, ccontrol)
                gain = (_combined(gain, cgain, margin) if challenger == "fast"
                        else 1.0 / _combined(1.0 / gain, 1.0 / cgain, margin))
            pts.append((n, gain))
            rows.setdefault(first, []).append(row)
            say(line)
    return pts


def measure_rank_gemm(routines: Sequence[str] = RANK_GEMM_ROUTINES,
                      one_orders: Sequence[int] = (16, 32, 48, 64, 80, 96, 112, 128),
                      split_orders: Sequence[int] = (64, 80, 96, 112, 128, 144, 160, 176), reps: int = 5,
                      settle: float = 0.2, margin: float = 0.03, idle: float = 0.2,
                      progress: Callable[[str], None] | None = None) -> tuple[dict[str, tuple[float, float]], dict]:
    """Measure where the C path's gemm route of real syrk/syr2k beats the rank-k call (see the module
    notes): ``({'dsyrk': (one_call, split)}, rows measured)``.  Needs the C small-call path on the default
    runtime; where it is off (no extension, ``TILEBLAS_SMALL_PATH=0``, a runtime in force) the result is
    empty and the rows say why.  The C path's settings are restored afterwards.  ``idle``: the pause before
    each cold call (0: warm calls only; see the module notes)."""
    from tileblas import blas as tb

    for r in routines:
        if r not in RANK_GEMM_ROUTINES:
            raise ValueError(f"routines must be among {RANK_GEMM_ROUTINES}; got {r!r}")
    _check_ladder(reps, one_orders=one_orders, split_orders=split_orders)
    say = progress or (lambda s: None)
    _fastpath, why = _c_path()
    if _fastpath is None:
        return {}, {"note": why}
    saved = _fastpath.config()
    can_split = any(k.endswith("gemm") for k in _splits(saved))
    modes = ("one_call", "split") if can_split else ("one_call",)
    rng = np.random.default_rng(0)
    points = []
    for name in routines:
        dt = np.float32 if name[0] == "s" else np.float64
        for mode in modes:
            # one_call: the route always, tileblas' instances held to one thread; split: only where split
            route = (1e300, 1e300) if mode == "one_call" else (0.0, 1e300)
            for n in sorted({int(x) for x in (one_orders if mode == "one_call" else split_orders)}):
                ops = [np.asfortranarray(rng.standard_normal((n, n)).astype(dt)) for _ in range(1 + name.endswith("2k"))]

                def setter(by_gemm: bool, name: str = name, route: tuple = route) -> None:
                    _with(_fastpath, saved, "rank_gemm", name, route if by_gemm else (0.0, 0.0))

                points.append(((name, mode, n), setter, (getattr(tb, name), (1.0, *ops)),
                               1 if mode == "one_call" else None))
    try:
        best = _best_over_rounds(points, {"rank_k": False, "gemm": True}, reps, settle, say, idle)
    finally:
        _fastpath.configure(saved)
    limits: dict[str, tuple[float, float]] = {}
    rows: dict[str, Any] = {}
    for name in routines:
        found, heard = [], False
        for mode in modes:
            pts = _gains(best, name, mode, ("rank_k", "rank-k"), ("gemm", "gemm"), rows, say, f"{name} {mode}",
                         margin)
            heard = heard or any(r != 1.0 for _, r in pts)
            found.append(_gain_limit(pts, lambda m: _flops(name[1:], m, m, False), margin))
        if not heard:  # every point within its noise: the shipped limits stay
            rows.setdefault("within_noise", []).append(f"rank_gemm {name}")
            continue
        if len(found) == 1:
            found.append(found[0])  # no split here: the route runs as one call
        limits[name] = (found[0], max(found[0], found[1]))
    return limits, rows


def _gain_limit(points: Sequence[tuple[int, float]], flops: Callable[[float], float], margin: float) -> float:
    """The limit for a choice measured at ascending orders (``(order, time without / time with)``): the
    orders up to the one where the summed log gain over ``1 + margin`` peaks take it.  The flops halfway
    (in order) past that order; just above it when it is the last; 0 where no prefix gains.  A lone noisy
    point at a tiny order (both ways equal there) neither stops the choice nor makes it."""
    best, at, total = 0.0, -1, 0.0
    for i, (_, ratio) in enumerate(points):
        total += math.log(ratio / (1.0 + margin))
        if total > best:
            best, at = total, i
    if at < 0:
        return 0.0
    n = points[at][0]
    nxt = points[at + 1][0] if at + 1 < len(points) else n
    return flops((n + nxt) / 2.0) if nxt > n else flops(n) + 1.0


def one_thread_precisions(family: str) -> tuple[str, ...]:
    """The precisions the one-thread limit of ``family`` is measured in: double and double complex (the
    Hermitian families: double complex)."""
    return ("z",) if family.startswith("he") else ("d", "z")


def measure_one_thread(families: Sequence[str] = ("trmm",), orders: Sequence[int] = (16, 24, 32, 48, 64, 80, 96, 128),
                       reps: int = 5, settle: float = 0.2, margin: float = 0.03, idle: float = 0.2,
                       progress: Callable[[str], None] | None = None) -> tuple[dict[str, float], dict]:
    """Measure per family the flops below which the C path's calls are faster on the one-thread instance
    than on the pool's (see the module notes): ``({'trmm': flops}, rows measured)``, from square calls in
    double and double complex (the Hermitian families: double complex).  Empty where the C path is off or
    runs on one thread anyway; the C path's settings are restored afterwards.  ``idle``: the pause before
    each cold call (0: warm calls only; see the module notes)."""
    from tileblas import blas as tb
    from tileblas.policy._dropin import FAMILIES

    for f in families:
        if f not in FAMILIES:
            raise ValueError(f"families must be among {FAMILIES}; got {f!r}")
    _check_ladder(reps, orders=orders)
    say = progress or (lambda s: None)
    _fastpath, why = _c_path()
    saved = _fastpath.config() if _fastpath is not None else {}
    if not (saved and saved["one_thread_entries"]):  # limits or not (a thread count not measured): one is timed
        return {}, {"note": why or "the C small-call path runs on one thread here: nothing to choose"}
    rng = np.random.default_rng(0)
    points = []
    for fam in families:
        for p in one_thread_precisions(fam):
            dt = DTYPE_OF[p]

            def setter(lim: float, name: str = p + fam) -> None:
                _with(_fastpath, saved, "one_thread", name, lim)

            for n in sorted({int(x) for x in orders}):
                points.append(((fam, p, n), setter, (getattr(tb, p + fam), _square_args(rng, fam, dt, n)), None))
    try:
        best = _best_over_rounds(points, {"pool": 0.0, "one": 1e300}, reps, settle, say, idle)
    finally:
        _fastpath.configure(saved)
    limits: dict[str, float] = {}
    rows: dict[str, Any] = {}
    for fam in families:
        found, heard = [], False
        for p in one_thread_precisions(fam):
            pts = _gains(best, fam, p, ("pool", "pool"), ("one", "one thread"), rows, say, f"{p}{fam}", margin)
            heard = heard or any(r != 1.0 for _, r in pts)
            found.append(_gain_limit(pts, lambda m, p=p: _flops(fam, m, m, p == "z"), margin))
        if not heard:  # every point within its noise: the shipped limit stays
            rows.setdefault("within_noise", []).append(f"one_thread {fam}")
            continue
        limits[fam] = min(found)
    return limits, rows


def measure_split(routines: Sequence[str] = tuple(SPLIT_TUNE),
                  orders: Sequence[int] = (24, 32, 48, 64, 80, 96, 128, 160), reps: int = 5, settle: float = 0.2,
                  margin: float = 0.03, idle: float = 0.2,
                  progress: Callable[[str], None] | None = None) -> tuple[dict[str, float], dict]:
    """Measure per routine of :data:`~tileblas.policy._paths.SPLIT_TUNE` the flops from which the C path's
    calls are faster in parts on the pool than as one call on OpenBLAS's threads (see the module notes):
    ``({'dgemm': flops}, rows measured)``, ``inf`` where the parts won at no order measured.  Empty where
    the C path is off or does not split here (one thread, no pool); its settings are restored afterwards.
    ``idle``: the pause before each cold call (0: warm calls only; see the module notes)."""
    from tileblas import blas as tb

    for r in routines:
        if r not in SPLIT_TUNE:
            raise ValueError(f"routines must be among {tuple(SPLIT_TUNE)}; got {r!r}")
    _check_ladder(reps, orders=orders)
    say = progress or (lambda s: None)
    _fastpath, why = _c_path()
    saved = _fastpath.config() if _fastpath is not None else {}
    if not (saved and saved["pool_slot"] >= 0 and saved["one_thread_entries"]):  # split ranges or not
        if not why:
            from tileblas.kernels import _openblas

            pool = _openblas.pool_info()
            why = ("the C small-call path does not split here: "
                   + ("one thread" if saved["pool_slot"] >= 0 or pool["enabled"]
                      else f"no thread pool ({pool['note']})"))
        return {}, {"note": why}
    rng = np.random.default_rng(0)
    ladder = sorted({int(x) for x in orders})
    points = []
    for name in routines:
        dt, call, tri = DTYPE_OF[name[0]], getattr(tb, name), name[1:] in ("trmm", "trsm")

        def setter(split: bool, name: str = name) -> None:
            _with(_fastpath, saved, "split", name, (0.0, 1e300) if split else (0.0, 0.0))

        for n in ladder:
            if not tri:
                points.append(((name, "square", n), setter, (call, _square_args(rng, name[1:], dt, n)), None))
                continue
            # both sides: L on a Fortran-ordered b (parts of its columns), R on a C-ordered one (rows)
            a = _triangle(rng, n, dt)
            for side, b in (("L", _random(rng, dt, n, n)), ("R", np.ascontiguousarray(_random(rng, dt, n, n)))):
                points.append(((name, side, n), setter,
                               (functools.partial(call, side=int(side == "R"), lower=1), (1.0, a, b)), None))
    try:
        best = _best_over_rounds(points, {"one": False, "split": True}, reps, settle, say, idle)
    finally:
        _fastpath.configure(saved)
    limits: dict[str, float] = {}
    rows: dict[str, Any] = {}
    for name in routines:
        def flops(m: float, name: str = name) -> float:  # of a square call, as the C path counts them
            return _flops(name[1:], m, m, name[0] in "cz")

        shapes = ("L", "R") if name[1:] in ("trmm", "trsm") else ("square",)
        per = [dict(_gains(best, name, sh, ("split", "split"), ("one", "one call"), rows, say, f"{name} {sh}",
                           margin, challenger="slow"))
               for sh in shapes]
        # the shapes together: per order the geometric mean of their ratios (each beyond its noise)
        pts = [(n, math.prod(p[n] for p in per) ** (1.0 / len(per))) for n in ladder]
        if all(r == 1.0 for p in per for r in p.values()):  # every point within its noise: shipped stays
            rows.setdefault("within_noise", []).append(f"split_from {name}")
            continue
        lim = _gain_limit(pts, flops, -margin)  # below it the one call: it keeps ties
        # never where the one call kept every order measured; else not below the smallest order
        limits[name] = math.inf if lim > flops(ladder[-1]) else max(lim, flops(ladder[0]))
    return limits, rows
