"""The tile runtime's bars: Level-3 speed against OpenBLAS, per-task overhead, heterogeneous devices.

Every figure is measured in the same run as its baseline, interleaved (the order alternates from trial to
trial), ``--trials`` times (default 5); the best time of each contender is kept.

``level3``
    For each routine (default gemm, syrk, syr2k, symm, trmm, trsm; real double, n x n, default n=4096):
    the tile runtime with default settings (``tileblas.Runtime()``: one single-threaded CPU worker per
    core; on host workers the path policy of :mod:`tileblas.policy._paths` picks one native call on all
    cores unless ``tileblas tune`` measured tiles faster; the variant ``shared=0`` forces the tiled path,
    tile size chosen per call) against OpenBLAS's own routine using every core (the kernel layer's
    ``get_library(cores)``, a private OpenBLAS instance running ``cores`` threads).  ``--variants`` adds
    runtime configurations, e.g. ``t=512`` (a tile size) or ``dev=cpu:1x2;t=1024`` (a device spec).  Ratio
    = baseline time / runtime time (>= 1: the runtime is faster).  Inputs are restored before every timed
    call (outside the timing); the last trial's outputs are compared.
``overhead``
    Many tiny tiles: dgemm m = n = 1024, k = 16 with tile size 16 (4096 tasks of one 16x16x16 tile-GEMM
    each).  Baseline: the very same tile-kernel calls made one after another in a plain loop in one
    thread.  Overhead per task = (runtime wall time - loop time) / tasks, for the default runtime and a
    one-worker runtime; planning, queueing, picking, finishing and profiling are all inside it.
``hetero``
    Two CPU workers, one of them slowed 3x (after each kernel call it sleeps twice the time the kernel
    took, so it delivers a third of its rate).  dgemm n x n with the default tile size.  The ideal split
    is measured in the same trial: T_ideal = 1 / (1/T_fast + 1/T_slow), where T_fast and T_slow are each
    worker alone on the whole problem with the same tile size.  Also reported: the ideal from the rates
    the two workers reached inside the mixed run (flops / busy time).
``crossover``
    Small square dgemm: the tile runtime (tiled path forced by a tile size) against one native
    single-threaded call, to place :data:`tileblas.runtime.SMALL_FLOPS`.

Usage::

    python benchmarks/bench_runtime.py                       # every bar, best of 5
    python benchmarks/bench_runtime.py --only level3 --routines gemm,trsm --n 4096
    python benchmarks/bench_runtime.py --only level3 --variants "t=512" "t=768" "dev=cpu:1x2"
    python benchmarks/bench_runtime.py --only level3 --variants "shared=0"   # the tiled path, default tiles
    python benchmarks/bench_runtime.py --only overhead,hetero
    python benchmarks/bench_runtime.py --only crossover
    python benchmarks/bench_runtime.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

import numpy as np

BARS = {"level3": None, "overhead": 25e-6, "hetero": 0.15}
LEVEL3_BAR = {"gemm": 0.95, "syrk": 0.90, "syr2k": 0.90, "symm": 0.90, "trmm": 0.90, "trsm": 0.90}
ROUTINES = ("gemm", "syrk", "syr2k", "symm", "trmm", "trsm")


def _parse_variant(spec: str) -> dict[str, Any]:
    """``"t=512"``, ``"dev=cpu:1x2;t=1024"`` -> Runtime keyword arguments."""
    kw: dict[str, Any] = {}
    for part in spec.split(";"):
        key, _, val = part.partition("=")
        key = key.strip()
        if key == "t":
            kw["tile_size"] = int(val)
        elif key == "dev":
            kw["devices"] = int(val) if val.isdigit() else val
        elif key == "shared":  # an explicit crossover: "shared=0" tiles every call with the default tile size
            kw["shared_flops"] = float(val)
        else:
            raise ValueError(f"variant items must be t=<tile>, dev=<device spec> or shared=<flops>; got {part!r}")
    return kw


def _interleaved(contenders: dict[str, Callable[[], Callable[[], None]]], trials: int) -> dict[str, float]:
    """Best seconds of each contender; ``contenders[name]()`` prepares inputs and returns the timed call.
    The order of contenders is reversed every other trial."""
    best = {k: float("inf") for k in contenders}
    names = list(contenders)
    for trial in range(trials):
        for name in (names if trial % 2 == 0 else names[::-1]):
            run = contenders[name]()
            t0 = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


# ---------------------------------------------------------------------------------------------------
# Level-3 against OpenBLAS with every core
# ---------------------------------------------------------------------------------------------------


def _level3_args(routine: str, a: np.ndarray, b: np.ndarray, tri: np.ndarray, out: np.ndarray) -> tuple:
    """Kernel-layer arguments; ``out`` is the array updated in place."""
    if routine == "gemm":
        return (1.0, a, b, 0.5, out)
    if routine == "symm":
        return (1.0, a, b, 0.5, out, "L", "U")
    if routine == "syrk":
        return (1.0, a, 0.5, out, "U", "N")
    if routine == "syr2k":
        return (1.0, a, b, 0.5, out, "U", "N")
    if routine in ("trmm", "trsm"):
        return (1.0, tri, out, "L", "L", "N", "N")
    raise ValueError(f"routine must be one of {', '.join(ROUTINES)}; got {routine!r}")


def bench_level3(routines: list[str], n: int, trials: int, variants: list[str], cores: int) -> list[dict]:
    from tileblas.kernels import _openblas
    from tileblas.runtime import Runtime
    from tileblas.runtime._planner import flop_count

    lib = _openblas.get_library(cores)
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((n, n)))
    b = np.asfortranarray(rng.standard_normal((n, n)))
    tri = np.asfortranarray(np.tril(rng.standard_normal((n, n))) / np.sqrt(n) + 2.0 * np.eye(n))
    out0 = np.asfortranarray(rng.standard_normal((n, n)))
    rts = {"tileblas": Runtime()}
    for v in variants:
        rts[f"tileblas[{v}]"] = Runtime(**_parse_variant(v))
    keys = ["openblas"] + list(rts)
    outs = {key: np.empty_like(out0, order="F") for key in keys}
    rows = []
    try:
        # warm-up outside the timing: libraries load, worker threads start
        w = np.asfortranarray(rng.standard_normal((512, 512)))
        _openblas.gemm(1.0, w, w, 0.0, np.zeros((512, 512), order="F"), lib=lib)
        for rt in rts.values():
            rt.gemm(1.0, w, w, 0.0, np.zeros((512, 512), order="F"))
        for routine in routines:
            def prep(key: str, routine: str = routine) -> Callable[[], None]:
                o = outs[key]
                np.copyto(o, out0)
                args = _level3_args(routine, a, b, tri, o)
                if key == "openblas":
                    fn = getattr(_openblas, routine)
                    return lambda: fn(*args, lib=lib)
                rt = rts[key]
                return lambda: rt.run(routine, *args)

            best = _interleaved({key: (lambda key=key: prep(key)) for key in keys}, trials)
            flops = flop_count(routine, n, n, n)
            ref = outs["openblas"]  # the last trial's outputs
            scale = max(1.0, float(np.abs(ref).max()))
            for key, rt in rts.items():
                prof = rt.last_profile()
                rows.append({
                    "bar": "level3", "routine": "d" + routine, "n": n, "contender": key, "trials": trials,
                    "baseline": f"OpenBLAS d{routine}, {lib.threads} threads (kernel layer get_library({cores}))",
                    "baseline_s": best["openblas"], "tileblas_s": best[key],
                    "baseline_gflops": flops / best["openblas"] / 1e9, "tileblas_gflops": flops / best[key] / 1e9,
                    "ratio": best["openblas"] / best[key], "target": LEVEL3_BAR.get(routine),
                    "tile_size": prof.tile_size, "path": prof.path, "tasks": prof.tasks,
                    "devices": [d.name for d in rt.devices],
                    "max_rel_diff": float(np.abs(outs[key] - ref).max() / scale),
                })
    finally:
        for rt in rts.values():
            rt.shutdown()
    return rows


# ---------------------------------------------------------------------------------------------------
# Per-task overhead
# ---------------------------------------------------------------------------------------------------


def bench_overhead(trials: int, n: int = 1024, k: int = 16, tile: int = 16) -> list[dict]:
    from tileblas.devices import CPUDevice
    from tileblas.runtime import Runtime

    rng = np.random.default_rng(1)
    a = np.asfortranarray(rng.standard_normal((n, k)))
    b = np.asfortranarray(rng.standard_normal((k, n)))
    c = np.zeros((n, n), order="F")
    nt = -(-n // tile)
    tasks = nt * nt
    gemm = CPUDevice(0).kernel("gemm")
    views = [(a[i * tile:(i + 1) * tile], b[:, j * tile:(j + 1) * tile], c[i * tile:(i + 1) * tile, j * tile:(j + 1) * tile])
             for j in range(nt) for i in range(nt)]

    def loop() -> None:
        for x, y, z in views:
            gemm(1.0, x, y, 0.0, z, "N", "N")

    rts = {"runtime (default devices)": Runtime(), "runtime (1 worker)": Runtime(devices=1)}
    rows = []
    try:
        contenders: dict[str, Callable[[], Callable[[], None]]] = {"direct loop": lambda: loop}
        for name, rt in rts.items():
            contenders[name] = (lambda rt=rt: (lambda: rt.gemm(1.0, a, b, 0.0, c, tile_size=tile)))
        for prep in contenders.values():
            prep()()
        best = _interleaved(contenders, trials)
        for name, rt in rts.items():
            rt.gemm(1.0, a, b, 0.0, c, tile_size=tile)
            prof = rt.last_profile()
            assert prof.tasks == tasks, (prof.tasks, tasks)
            assert np.allclose(c, a @ b)
            per = (best[name] - best["direct loop"]) / tasks
            rows.append({
                "bar": "overhead", "contender": name, "devices": len(rt.devices), "trials": trials,
                "problem": f"dgemm {n}x{n}x{k}, tile {tile}", "tasks": tasks,
                "baseline": "the same tile-kernel calls in a plain loop, one thread",
                "baseline_s": best["direct loop"], "runtime_s": best[name],
                "tasks_per_s": tasks / best[name], "wall_per_task_us": best[name] / tasks * 1e6,
                "overhead_per_task_us": per * 1e6, "target_us": BARS["overhead"] * 1e6,
                "scheduler_overhead_per_task_us": sum(d.overhead_s for d in prof.devices) / tasks * 1e6,
            })
    finally:
        for rt in rts.values():
            rt.shutdown()
    return rows


# ---------------------------------------------------------------------------------------------------
# Heterogeneous devices
# ---------------------------------------------------------------------------------------------------


def _slowed_device(index: int, factor: float) -> Any:
    """A CPU worker whose every kernel call is followed by a sleep of (factor - 1) x the call's time."""
    from tileblas.devices import CPUDevice

    class SlowedCPU(CPUDevice):
        def __init__(self) -> None:
            super().__init__(index)
            self.name = f"cpu{index}-slow{factor:g}x"

        def kernel(self, name: str) -> Callable[..., None]:
            inner = super().kernel(name)
            clock, sleep = time.perf_counter, time.sleep

            def run(*args: Any, **kw: Any) -> None:
                t0 = clock()
                inner(*args, **kw)
                target = t0 + factor * (clock() - t0)
                sleep(max(0.0, target - clock()))

            return run

    return SlowedCPU()


def bench_hetero(trials: int, n: int, factor: float = 3.0) -> list[dict]:
    from tileblas.devices import CPUDevice
    from tileblas.runtime import Runtime

    rng = np.random.default_rng(2)
    a = np.asfortranarray(rng.standard_normal((n, n)))
    b = np.asfortranarray(rng.standard_normal((n, n)))
    c = np.zeros((n, n), order="F")
    mixed = Runtime(devices=[CPUDevice(0), _slowed_device(1, factor)])
    tile = mixed.tile_size_for("gemm", n, n, n)
    fast = Runtime(devices=[CPUDevice(0)], tile_size=tile)
    slow = Runtime(devices=[_slowed_device(1, factor)], tile_size=tile)
    rows = []
    try:
        contenders = {
            "mixed": lambda: (lambda: mixed.gemm(1.0, a, b, 0.0, c)),
            "fast alone": lambda: (lambda: fast.gemm(1.0, a, b, 0.0, c)),
            "slow alone": lambda: (lambda: slow.gemm(1.0, a, b, 0.0, c)),
        }
        mixed.gemm(1.0, a, b, 0.0, c)
        best = {k: float("inf") for k in contenders}
        in_run = 0.0
        profile = None
        names = list(contenders)
        for trial in range(trials):
            for name in (names if trial % 2 == 0 else names[::-1]):
                run = contenders[name]()
                t0 = time.perf_counter()
                run()
                dt = time.perf_counter() - t0
                if name == "mixed" and dt < best[name]:
                    profile = mixed.last_profile()
                    rates = [d.flops / d.busy_s for d in profile.devices if d.busy_s > 0]
                    in_run = dt / (profile.flops / sum(rates))
                best[name] = min(best[name], dt)
        assert np.allclose(c, a @ b)
        ideal = 1.0 / (1.0 / best["fast alone"] + 1.0 / best["slow alone"])
        rows.append({
            "bar": "hetero", "problem": f"dgemm {n}x{n}x{n}, tile {tile}", "slowdown": factor, "trials": trials,
            "baseline": "ideal split from each worker alone, same tile size: 1/(1/T_fast + 1/T_slow)",
            "fast_alone_s": best["fast alone"], "slow_alone_s": best["slow alone"],
            "measured_slowdown": best["slow alone"] / best["fast alone"],
            "ideal_s": ideal, "mixed_s": best["mixed"], "over_ideal": best["mixed"] / ideal - 1.0,
            "over_ideal_in_run_rates": in_run - 1.0, "target": BARS["hetero"],
            "tasks_per_device": {d.name: d.tasks for d in profile.devices},
            "stolen_per_device": {d.name: d.stolen for d in profile.devices},
        })
    finally:
        for rt in (mixed, fast, slow):
            rt.shutdown()
    return rows


# ---------------------------------------------------------------------------------------------------
# Small-problem crossover
# ---------------------------------------------------------------------------------------------------


def bench_crossover(trials: int, sizes: list[int]) -> list[dict]:
    from tileblas.kernels import _openblas
    from tileblas.runtime import Runtime

    rows = []
    with Runtime() as rt:
        for n in sizes:
            rng = np.random.default_rng(n)
            a, b = np.asfortranarray(rng.standard_normal((n, n))), np.asfortranarray(rng.standard_normal((n, n)))
            c = np.zeros((n, n), order="F")
            tile = max(32, -(-n // 2))
            reps = max(1, int(2e8 / (2.0 * n**3)))

            def native() -> None:
                for _ in range(reps):
                    _openblas.gemm(1.0, a, b, 0.0, c)

            def tiled() -> None:
                for _ in range(reps):
                    rt.gemm(1.0, a, b, 0.0, c, tile_size=tile)

            best = _interleaved({"native": lambda: native, "tiled": lambda: tiled}, trials)
            rows.append({"bar": "crossover", "n": n, "flops": 2.0 * n**3, "tile_size": tile, "trials": trials,
                         "native_us": best["native"] / reps * 1e6, "tiled_us": best["tiled"] / reps * 1e6,
                         "ratio": best["native"] / best["tiled"]})
    return rows


# ---------------------------------------------------------------------------------------------------


def _print(row: dict) -> None:
    bar = row["bar"]
    if bar == "level3":
        tgt = row["target"]
        ok = "" if tgt is None else ("  PASS" if row["ratio"] >= tgt else "  BELOW BAR") + f" (bar {tgt:.2f}x)"
        diff = f"  max rel diff {row['max_rel_diff']:.1e}"
        print(f"{row['routine']:>7} n={row['n']} {row['contender']:<28} tile={row['tile_size']:<5} "
              f"{row['tileblas_s'] * 1e3:8.0f} ms {row['tileblas_gflops']:6.1f} GF/s | OpenBLAS "
              f"{row['baseline_s'] * 1e3:8.0f} ms {row['baseline_gflops']:6.1f} GF/s | ratio {row['ratio']:.3f}{ok}"
              f"{diff}")
    elif bar == "overhead":
        ok = "PASS" if row["overhead_per_task_us"] <= row["target_us"] else "ABOVE BAR"
        print(f"overhead {row['problem']} ({row['tasks']} tasks) {row['contender']:<27}: "
              f"{row['runtime_s'] * 1e3:7.1f} ms, loop {row['baseline_s'] * 1e3:6.1f} ms -> "
              f"{row['overhead_per_task_us']:5.1f} us/task overhead, {row['tasks_per_s']:8.0f} tasks/s "
              f"(scheduler-measured {row['scheduler_overhead_per_task_us']:.1f} us/task)  {ok} "
              f"(bar {row['target_us']:.0f} us)")
    elif bar == "hetero":
        ok = "PASS" if row["over_ideal"] <= row["target"] else "ABOVE BAR"
        print(f"hetero {row['problem']}, one worker slowed {row['slowdown']:g}x (measured "
              f"{row['measured_slowdown']:.2f}x): fast alone {row['fast_alone_s']:.3f} s, slow alone "
              f"{row['slow_alone_s']:.3f} s -> ideal {row['ideal_s']:.3f} s; mixed {row['mixed_s']:.3f} s = "
              f"{row['over_ideal'] * 100:+.1f}% over ideal ({row['over_ideal_in_run_rates'] * 100:+.1f}% against "
              f"the in-run rates)  {ok} (bar +{row['target'] * 100:.0f}%); tasks {row['tasks_per_device']}, "
              f"stolen {row['stolen_per_device']}")
    elif bar == "crossover":
        print(f"crossover dgemm n={row['n']:<5} ({row['flops']:.2e} flops) native 1 thread {row['native_us']:9.1f} us"
              f" | tiled (t={row['tile_size']}) {row['tiled_us']:9.1f} us | native/tiled {row['ratio']:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="level3,overhead,hetero",
                    help="comma-separated: level3, overhead, hetero, crossover (default: the first three)")
    ap.add_argument("--routines", default=",".join(ROUTINES), help="level3 routines (default: all six)")
    ap.add_argument("--n", type=int, default=4096, help="level3 matrix order (default 4096)")
    ap.add_argument("--hetero-n", type=int, default=4096, help="hetero dgemm order (default 4096)")
    ap.add_argument("--trials", type=int, default=5, help="interleaved trials, best kept (default 5)")
    ap.add_argument("--variants", nargs="*", default=[], help="extra runtime configurations for level3")
    ap.add_argument("--cores", type=int, default=None, help="baseline OpenBLAS threads (default: all cores)")
    ap.add_argument("--crossover-sizes", default="64,96,128,160,192,256,320,384")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)

    from tileblas.devices import cpu_count

    cores = args.cores or cpu_count()
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    for s in only:
        if s not in ("level3", "overhead", "hetero", "crossover"):
            ap.error(f"--only items must be level3, overhead, hetero or crossover; got {s!r}")
    rows: list[dict] = []
    print(f"tileblas runtime benchmark: {cores} cores, best of {args.trials} interleaved trials")
    if "overhead" in only:
        for r in bench_overhead(args.trials):
            _print(r)
            rows.append(r)
    if "hetero" in only:
        for r in bench_hetero(args.trials, args.hetero_n):
            _print(r)
            rows.append(r)
    if "crossover" in only:
        for r in bench_crossover(args.trials, [int(x) for x in args.crossover_sizes.split(",")]):
            _print(r)
            rows.append(r)
    if "level3" in only:
        routines = [r.strip() for r in args.routines.split(",") if r.strip()]
        for r in routines:
            if r not in ROUTINES:
                ap.error(f"--routines items must be among {', '.join(ROUTINES)}; got {r!r}")
        for r in routines:
            for row in bench_level3([r], args.n, args.trials, args.variants, cores):
                _print(row)
                sys.stdout.flush()
                rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
