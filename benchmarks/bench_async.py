"""Benchmark of tileblas.asyncapi against the bars of issue 8 (the paper's section 5).

1. The paper's benchmark: ``--count`` computations (default 1000) of dgemm, dsymm and dsyrk on n x n
   matrices (default n = 1000), creating handles, scheduling, waiting and deleting with 10 in flight:

       for i in 1..count: [if 10 in flight: wait for the oldest, delete its handles]
                          create input and output handles; schedule the computation
       wait for the rest, delete

   Configurations, interleaved within each round (best of ``--repeats`` rounds, default 5):
     * direct     -- the same computations called one after the other on single-threaded BLAS
                     (no API: the baseline for the API's overhead)
     * cost-1     -- "cost" policy, one CPU backend (the paper's baseline)
     * cost-2     -- "cost" policy, two CPU backends (bar: >= 1.85x faster than cost-1)
     * demand     -- "demand" policy: every call tiled by the tile runtime over all its devices
   Inputs are borrowed (``copy=False``) from a pool of 11 slots, outputs are ``empty`` handles (no upload),
   as the paper's ``new_matrix`` with the copy flag off.

   The loop also records the scheduling cost per call: the time the calling thread spends creating handles,
   in the BLAS call function, deleting handles and collecting results of finished calls -- everything but
   waiting for the computations (see ``paper_loop``) -- as wall time and as the thread's CPU time.

2. Scheduling cost (bar: <= 50 microseconds per call): ``--tiny`` calls of dgemm on 1 x 1 handles and of
   a no-op operation, 10 in flight is not imposed (all submitted at once):
     * submit  -- time for the calls to return (argument checks, graph, policy, queue), per call
     * e2e     -- until the last future resolved (submit + worker hand-off + completion), per call
     * inline  -- synchronous executor: the whole bookkeeping with the kernel, no threads, per call

3. Heterogeneous backends (the paper's unsolved case), emulated without a GPU: one CPU backend and one
   "slow" backend that computes on the CPU kernels and then sleeps ``--slow - 1`` times as long (a
   backend ``--slow`` times slower that uses no more CPU).  fast alone vs fast + slow with the "eft" rule
   vs fast + slow with the paper's load criterion ("paper" rule).  Bar: fast + slow never slower than
   fast alone.

4. (``--accel gpu|sim``) The paper's loop on an accelerator alone and with CPU workers added ("eft" and
   the paper's rule): a CUDA GPU through CuPy, or a simulated discrete device with modeled kernels (they
   hold the device for flops / ``--accel-rate`` seconds without using a CPU) whose operands really move to
   and from its memory.  Bar: accelerator + CPU never slower than the accelerator alone.

    python benchmarks/bench_async.py --quick          # 100 computations per routine
    python benchmarks/bench_async.py --json out.json  # full run (1000 per routine), figures as JSON
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import deque
from typing import Any, Callable

import numpy as np

from tileblas.kernels import _openblas
from tileblas import asyncapi as aa
from tileblas.devices import CPUDevice, Device


# --------------------------------------------------------------------------------------------- part 1
def submit_one(name: str, a: aa.MatrixHandle, b: aa.MatrixHandle, c: aa.MatrixHandle) -> aa.AsyncFuture:
    if name == "dgemm":
        return aa.gemm(1.0, a, b, 0.0, c)
    if name == "dsymm":
        return aa.symm(1.0, a, b, 0.0, c)
    return aa.syrk(1.0, a, 0.0, c)


def paper_loop(ex: aa.Executor, name: str, pool: list[tuple[np.ndarray, np.ndarray]], count: int,
               inflight: int = 10, sched: list | None = None) -> float:
    """The loop of the paper's section 5; returns its wall time.

    ``sched`` (a list) receives one dict of per-call means in seconds -- what the calling thread spends on
    the API, excluding the computations:

    * ``call``: the BLAS call function alone (argument checks, dependency graph, backend choice, queueing);
    * ``create``: creating the call's handles; ``delete``: deleting them once the call finished;
    * ``result``: ``result()`` of a future that was already done (a future not done yet is *waiting for
      the computation*: that time is excluded, and so is the wake-up inside such a ``result()``);
    * ``caller``: the sum, the scheduling cost of the paper's loop as the caller sees it;
    * ``caller_cpu``: CPU time of the calling thread over the same spans (``time.thread_time``): wall time
      also counts waiting for the GIL and for a core while the backends' BLAS threads compute on every core.
    """
    n = pool[0][0].shape[0]
    window: deque = deque()
    clock = time.perf_counter
    cpu = time.thread_time
    t_create = t_call = t_delete = t_result = c_all = 0.0
    t0 = clock()
    for i in range(count):
        u0 = cpu()
        if len(window) == inflight:
            fut, hs = window.popleft()
            if fut.done():
                r0 = clock()
                fut.result()
                t_result += clock() - r0
            else:
                c_all += cpu() - u0
                fut.result()  # waiting for the computation: not scheduling cost
                u0 = cpu()
            d0 = clock()
            for h in hs:
                h.delete()
            t_delete += clock() - d0
        A, B = pool[i % len(pool)]
        s0 = clock()
        a = ex.handle(A, copy=False)
        b = ex.handle(B, copy=False) if name != "dsyrk" else None
        c = ex.empty((n, n))
        s1 = clock()
        fut = submit_one(name, a, b, c)
        s2 = clock()
        c_all += cpu() - u0
        t_create += s1 - s0
        t_call += s2 - s1
        window.append((fut, [h for h in (a, b, c) if h is not None]))
    while window:
        fut, hs = window.popleft()
        fut.result()
        d0 = clock()
        for h in hs:
            h.delete()
        t_delete += clock() - d0
    wall = clock() - t0
    if sched is not None:
        sched.append({"create": t_create / count, "call": t_call / count, "delete": t_delete / count,
                      "result": t_result / count, "caller": (t_create + t_call + t_delete + t_result) / count,
                      "caller_cpu": c_all / count})
    return wall


def direct_loop(name: str, pool: list[tuple[np.ndarray, np.ndarray]], count: int) -> float:
    lib = _openblas.get_library(1)
    n = pool[0][0].shape[0]
    t0 = time.perf_counter()
    for i in range(count):
        A, B = pool[i % len(pool)]
        c = np.zeros((n, n), order="F")
        if name == "dgemm":
            _openblas.gemm(1.0, A, B, 0.0, c, lib=lib)
        elif name == "dsymm":
            _openblas.symm(1.0, A, B, 0.0, c, lib=lib)
        else:
            _openblas.syrk(1.0, A, 0.0, c, lib=lib)
    return time.perf_counter() - t0


def part1(n: int, count: int, repeats: int, configs: list[str], out: Callable[[str], None]) -> dict[str, Any]:
    from tileblas.devices import host_devices

    rng = np.random.default_rng(0)
    pool = [(np.asfortranarray(rng.standard_normal((n, n))), np.asfortranarray(rng.standard_normal((n, n))))
            for _ in range(11)]
    execs = {
        "cost-1": lambda: aa.Executor(host_devices(1)),
        "cost-2": lambda: aa.Executor(host_devices(2)),
        "demand": lambda: aa.Executor(policy="demand"),
    }
    live = {k: execs[k]() for k in configs if k in execs}
    # correctness check of every configuration once (small count), before timing
    for k, ex in live.items():
        a, b = ex.handle(pool[0][0], copy=False), ex.handle(pool[0][1], copy=False)
        c = ex.empty((n, n))
        aa.gemm(1.0, a, b, 0.0, c).result()
        err = np.abs(c.get() - pool[0][0] @ pool[0][1]).max()
        assert err < 1e-9 * n, (k, err)
    routines = ["dgemm", "dsymm", "dsyrk"]
    best: dict[str, dict[str, float]] = {k: {r: float("inf") for r in routines} for k in configs}
    trials: dict[str, dict[str, list[float]]] = {k: {r: [] for r in routines} for k in configs}
    sched: dict[str, list] = {k: [] for k in configs}
    for rep in range(repeats):
        for r in routines:
            for k in configs:
                if k == "direct":
                    t = direct_loop(r, pool, count)
                else:
                    t = paper_loop(live[k], r, pool, count, sched=sched[k])
                best[k][r] = min(best[k][r], t)
                trials[k][r].append(t)
        out(f"  round {rep + 1}/{repeats}: " + ", ".join(
            f"{k} {sum(trials[k][r][-1] for r in routines):.2f}s" for k in configs))
    for ex in live.values():
        ex.close()
    total = {k: sum(v.values()) for k, v in best.items()}
    res: dict[str, Any] = {"n": n, "count": count, "repeats": repeats, "best_s": best, "total_s": total,
                           "trials_s": trials}
    # per configuration: each figure's best run and mean of runs, in microseconds per call
    res["schedule_us"] = {k: {f: {"best": 1e6 * min(x[f] for x in v), "mean": 1e6 * sum(x[f] for x in v) / len(v)}
                              for f in v[0]}
                          for k, v in sched.items() if v}
    if "cost-1" in total and "cost-2" in total:
        res["speedup_2_vs_1"] = {r: best["cost-1"][r] / best["cost-2"][r] for r in routines}
        res["speedup_2_vs_1"]["all"] = total["cost-1"] / total["cost-2"]
    if "demand" in total and "cost-2" in total:
        res["cost2_vs_demand"] = total["demand"] / total["cost-2"]
    if "direct" in total and "cost-1" in total:
        res["api_overhead_1_backend"] = total["cost-1"] / total["direct"] - 1
    return res


# --------------------------------------------------------------------------------------------- part 2
def part2(tiny: int, repeats: int) -> dict[str, Any]:
    from tileblas.devices import host_devices

    def noop(dev: Any) -> None:
        return None

    res: dict[str, Any] = {"submit_us": float("inf"), "e2e_us": float("inf"), "inline_us": float("inf"),
                           "noop_submit_us": float("inf"), "noop_e2e_us": float("inf"),
                           "one_backend_submit_us": float("inf"), "one_backend_e2e_us": float("inf")}
    with aa.Executor(host_devices(2)) as ex, aa.Executor(host_devices(2), synchronous=True) as sx, \
            aa.Executor(host_devices(1)) as ex1:
        a1, b1 = ex1.handle(np.ones((1, 1))), ex1.handle(np.ones((1, 1)))
        c1s = [ex1.empty((1, 1)) for _ in range(64)]
        a, b = ex.handle(np.ones((1, 1))), ex.handle(np.ones((1, 1)))
        cs = [ex.empty((1, 1)) for _ in range(64)]
        sa, sb = sx.handle(np.ones((1, 1))), sx.handle(np.ones((1, 1)))
        scs = [sx.empty((1, 1)) for _ in range(64)]
        for _ in range(repeats):
            t0 = time.perf_counter()
            futs = [aa.gemm(1.0, a, b, 0.0, cs[i % 64]) for i in range(tiny)]
            t1 = time.perf_counter()
            for f in futs[-64:]:
                f.result()
            t2 = time.perf_counter()
            res["submit_us"] = min(res["submit_us"], (t1 - t0) / tiny * 1e6)
            res["e2e_us"] = min(res["e2e_us"], (t2 - t0) / tiny * 1e6)
            t0 = time.perf_counter()
            futs = [aa.gemm(1.0, a1, b1, 0.0, c1s[i % 64]) for i in range(tiny)]
            t1 = time.perf_counter()
            for f in futs[-64:]:
                f.result()
            t2 = time.perf_counter()
            res["one_backend_submit_us"] = min(res["one_backend_submit_us"], (t1 - t0) / tiny * 1e6)
            res["one_backend_e2e_us"] = min(res["one_backend_e2e_us"], (t2 - t0) / tiny * 1e6)
            t0 = time.perf_counter()
            futs = [ex.submit("noop", noop, (a,), (cs[i % 64],)) for i in range(tiny)]
            t1 = time.perf_counter()
            for f in futs[-64:]:
                f.result()
            t2 = time.perf_counter()
            res["noop_submit_us"] = min(res["noop_submit_us"], (t1 - t0) / tiny * 1e6)
            res["noop_e2e_us"] = min(res["noop_e2e_us"], (t2 - t0) / tiny * 1e6)
            t0 = time.perf_counter()
            for i in range(tiny):
                aa.gemm(1.0, sa, sb, 0.0, scs[i % 64])
            res["inline_us"] = min(res["inline_us"], (time.perf_counter() - t0) / tiny * 1e6)
            del futs
        # the kernel alone, for reference
        lib = _openblas.get_library(1)
        A, B, C = np.ones((1, 1), order="F"), np.ones((1, 1), order="F"), np.zeros((1, 1), order="F")
        t0 = time.perf_counter()
        for _ in range(tiny):
            _openblas.gemm(1.0, A, B, 0.0, C, lib=lib)
        res["kernel_only_us"] = (time.perf_counter() - t0) / tiny * 1e6
    res["calls"] = tiny
    return res


# --------------------------------------------------------------------------------------------- part 3
class SlowDevice(Device):
    """A host-memory backend ``factor`` times slower than a CPU worker: it computes, then sleeps."""

    kind = "slow"
    host_memory = True

    def __init__(self, factor: float) -> None:
        super().__init__(f"slow{factor:g}x", speed_hint=1.0 / factor)
        self.factor = factor
        self.cpu = CPUDevice(90)

    def to_device(self, host: np.ndarray) -> np.ndarray:
        return host

    def to_host(self, dev: np.ndarray, host: np.ndarray) -> None:
        pass

    def empty(self, shape: Any, dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype, order="F")

    def kernel(self, name: str) -> Callable[..., None]:
        k = self.cpu.kernel(name)

        def run(*args: Any, **kw: Any) -> None:
            t0 = time.perf_counter()
            k(*args, **kw)
            time.sleep((time.perf_counter() - t0) * (self.factor - 1))

        return run


def part3(n: int, count: int, repeats: int, slow: float) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    pool = [(np.asfortranarray(rng.standard_normal((n, n))), np.asfortranarray(rng.standard_normal((n, n))))
            for _ in range(11)]
    configs = {
        "fast alone": lambda: aa.Executor([CPUDevice(0)]),
        "fast+slow eft": lambda: aa.Executor([CPUDevice(0), SlowDevice(slow)]),
        "fast+slow paper": lambda: aa.Executor([CPUDevice(0), SlowDevice(slow)], rule="paper"),
    }
    live = {k: f() for k, f in configs.items()}
    best = {k: float("inf") for k in configs}
    for _ in range(repeats):
        for k, ex in live.items():
            best[k] = min(best[k], paper_loop(ex, "dgemm", pool, count))
    share = {}
    for k, ex in live.items():
        s = ex.stats()["backends"]
        share[k] = {b["name"]: b["tasks"] for b in s}
        ex.close()
    return {"n": n, "count": count, "slow_factor": slow, "best_s": best, "tasks_per_backend": share,
            "eft_vs_alone": best["fast alone"] / best["fast+slow eft"],
            "paper_vs_alone": best["fast alone"] / best["fast+slow paper"]}


# --------------------------------------------------------------------------------------------- part 4
def part4(n: int, count: int, repeats: int, cpus: list[int], out: Callable[[str], None], accel: str = "gpu",
          rate: float = 5e11) -> dict[str, Any]:
    """The paper's loop on an accelerator alone and on it plus CPU workers ("eft" and the paper's rule).

    ``accel="gpu"``: the first CUDA GPU (through CuPy).  ``accel="sim"``: a simulated discrete device
    whose kernels are modeled (they hold the device for flops / ``rate`` seconds, compute nothing and use
    no CPU) while every operand really moves to and from its memory: an accelerator ``rate`` flop/s fast
    on a machine without one.  Results are checked only for the GPU.
    """
    from tileblas.devices import host_devices

    check = accel == "gpu"
    if accel == "gpu":
        import importlib.util

        if importlib.util.find_spec("cupy") is None:
            return {"skipped": "CuPy is not installed"}
        from tileblas.devices.gpu import GPUDevice, gpu_count

        if gpu_count() == 0:
            return {"skipped": "no CUDA device"}
        gpu: Any = GPUDevice(0, memory=1 << 28)  # one device object shared by the executors (one at a time)
    else:
        from tileblas.devices import SimDevice

        gpu = SimDevice(0, memory=1 << 20, kernels="modeled", flop_rate=rate)
    rng = np.random.default_rng(2)
    pool = [(np.asfortranarray(rng.standard_normal((n, n))), np.asfortranarray(rng.standard_normal((n, n))))
            for _ in range(11)]
    configs: dict[str, Callable[[], aa.Executor]] = {"accel alone": lambda: aa.Executor([gpu])}
    for c in cpus:
        configs[f"accel+{c}cpu eft"] = lambda c=c: aa.Executor([gpu] + host_devices(c))
        configs[f"accel+{c}cpu paper"] = lambda c=c: aa.Executor([gpu] + host_devices(c), rule="paper")
    live = {k: f() for k, f in configs.items()}
    for k, ex in live.items():  # correctness of every configuration before timing
        for i in range(4 if check else 0):
            a, b = ex.handle(pool[i][0], copy=False), ex.handle(pool[i][1], copy=False)
            c_ = ex.empty((n, n))
            aa.gemm(1.0, a, b, 0.0, c_).result()
            err = np.abs(c_.get() - pool[i][0] @ pool[i][1]).max()
            assert err < 1e-9 * n, (k, err)
            for h in (a, b, c_):
                h.delete()
    routines = ["dgemm", "dsymm", "dsyrk"]
    best = {k: {r: float("inf") for r in routines} for k in configs}
    trials: dict[str, dict[str, list[float]]] = {k: {r: [] for r in routines} for k in configs}
    for rep in range(repeats):
        for r in routines:
            for k, ex in live.items():
                t = paper_loop(ex, r, pool, count)
                best[k][r] = min(best[k][r], t)
                trials[k][r].append(t)
        out(f"  round {rep + 1}/{repeats}: " + ", ".join(
            f"{k} {sum(trials[k][r][-1] for r in routines):.2f}s" for k in configs))
    share = {}
    for k, ex in live.items():
        share[k] = {b["name"]: b["tasks"] for b in ex.stats()["backends"]}
        ex.close()
    total = {k: sum(v.values()) for k, v in best.items()}
    return {"n": n, "count": count, "repeats": repeats, "accel": accel, "device": gpu.describe(), "best_s": best,
            "total_s": total, "trials_s": trials, "tasks_per_backend": share,
            "vs_accel_alone": {k: total["accel alone"] / v for k, v in total.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="100 computations per routine (default 1000)")
    p.add_argument("--count", type=int, default=None, help="computations per routine")
    p.add_argument("--n", type=int, default=1000, help="matrix size (default 1000)")
    p.add_argument("--repeats", type=int, default=5, help="rounds, best of (default 5)")
    p.add_argument("--tiny", type=int, default=20000, help="tiny calls for the scheduling cost")
    p.add_argument("--configs", default="direct,cost-1,cost-2,demand")
    p.add_argument("--slow", type=float, default=4.0, help="slowdown factor of the emulated slow backend")
    p.add_argument("--hetero-n", type=int, default=500)
    p.add_argument("--hetero-count", type=int, default=60)
    p.add_argument("--skip", default="", help="comma-separated parts to skip: 1,2,3")
    p.add_argument("--accel", choices=["gpu", "sim"], default=None,
                   help="also run part 4: an accelerator alone vs with CPU workers (gpu: CUDA through CuPy; "
                        "sim: a simulated device with modeled kernels)")
    p.add_argument("--accel-rate", type=float, default=5e11, help="flop/s of the simulated accelerator")
    p.add_argument("--accel-cpus", default="1", help="CPU workers added to the accelerator in part 4")
    p.add_argument("--accel-count", type=int, default=300, help="computations per routine in part 4")
    p.add_argument("--json", default=None, help="write the figures to this file ('-': stdout)")
    args = p.parse_args(argv)
    count = args.count if args.count is not None else (100 if args.quick else 1000)
    for name in ("count", "n", "repeats", "tiny"):
        v = count if name == "count" else getattr(args, name)
        if v < 1:
            p.error(f"--{name} must be >= 1; got {v}")
    skip = set(filter(None, args.skip.split(",")))
    out = print if args.json != "-" else (lambda s: print(s, file=sys.stderr))
    res: dict[str, Any] = {}
    if "2" not in skip:
        out(f"[2] scheduling cost, {args.tiny} tiny calls, best of {args.repeats}")
        r2 = res["scheduling"] = part2(args.tiny, args.repeats)
        out(f"    dgemm 1x1, 1 backend: submit {r2['one_backend_submit_us']:.1f} us/call, end-to-end "
            f"{r2['one_backend_e2e_us']:.1f} us/call")
        out(f"    dgemm 1x1, 2 backends: submit {r2['submit_us']:.1f} us/call, end-to-end {r2['e2e_us']:.1f} us/call, "
            f"inline (synchronous executor) {r2['inline_us']:.1f} us/call; no-op op: submit "
            f"{r2['noop_submit_us']:.1f}, end-to-end {r2['noop_e2e_us']:.1f}; kernel alone "
            f"{r2['kernel_only_us']:.1f} us.  Bar: <= 50 us per call.")
    if "3" not in skip:
        out(f"[3] heterogeneous backends: fast CPU + {args.slow:g}x slower backend, {args.hetero_count} dgemm "
            f"n={args.hetero_n}, best of {args.repeats}")
        r3 = res["heterogeneous"] = part3(args.hetero_n, args.hetero_count, args.repeats, args.slow)
        for k, v in r3["best_s"].items():
            out(f"    {k:16s} {v:.3f} s  tasks {r3['tasks_per_backend'][k]}")
        out(f"    fast+slow (eft) vs fast alone: {r3['eft_vs_alone']:.2f}x; paper's criterion: "
            f"{r3['paper_vs_alone']:.2f}x.  Bar: eft >= 1.0x (never slower).")
    if "1" not in skip:
        configs = [c for c in args.configs.split(",") if c]
        out(f"[1] paper benchmark: {count} x (dgemm, dsymm, dsyrk), n={args.n}, 10 in flight, "
            f"best of {args.repeats}, configs {configs}")
        r1 = res["paper"] = part1(args.n, count, args.repeats, configs, out)
        for k, v in r1["best_s"].items():
            out(f"    {k:8s} " + "  ".join(f"{r} {t:7.2f}s" for r, t in v.items()) + f"  total {r1['total_s'][k]:.2f}s")
        if "speedup_2_vs_1" in r1:
            s = r1["speedup_2_vs_1"]
            out(f"    2 CPU backends vs 1: dgemm {s['dgemm']:.2f}x, dsymm {s['dsymm']:.2f}x, dsyrk {s['dsyrk']:.2f}x, "
                f"all {s['all']:.2f}x.  Bar: >= 1.85x (paper: 1.92x)")
        if "cost2_vs_demand" in r1:
            out(f"    cost (2 backends) vs demand (tile runtime): {r1['cost2_vs_demand']:.2f}x "
                f"({'cost' if r1['cost2_vs_demand'] >= 1 else 'demand'} faster)")
        for k, v in r1["schedule_us"].items():
            out(f"    scheduling cost per call in this loop, {k} (us, best run / mean of runs): caller total "
                f"{v['caller']['best']:.1f} / {v['caller']['mean']:.1f} wall, {v['caller_cpu']['best']:.1f} / "
                f"{v['caller_cpu']['mean']:.1f} CPU of the calling thread; of which BLAS call function "
                f"{v['call']['best']:.1f} / {v['call']['mean']:.1f}, creating handles {v['create']['best']:.1f} / "
                f"{v['create']['mean']:.1f}, deleting {v['delete']['best']:.1f} / {v['delete']['mean']:.1f}, "
                f"result() of done futures {v['result']['best']:.1f} / {v['result']['mean']:.1f}.  Bar: <= 50 us")
        if "api_overhead_1_backend" in r1:
            out(f"    API overhead with 1 backend vs direct calls: {100 * r1['api_overhead_1_backend']:+.1f}%")
    if args.accel:
        cpus = [int(c) for c in args.accel_cpus.split(",") if c]
        what = "GPU" if args.accel == "gpu" else f"simulated accelerator ({args.accel_rate / 1e9:g} GFLOP/s, modeled)"
        out(f"[4] {what} alone vs with CPU workers {cpus}: {args.accel_count} x (dgemm, dsymm, dsyrk), "
            f"n={args.n}, 10 in flight, best of {args.repeats}")
        r4 = res["accel"] = part4(args.n, args.accel_count, args.repeats, cpus, out, args.accel, args.accel_rate)
        if "skipped" in r4:
            out(f"    skipped: {r4['skipped']}")
        else:
            for k, v in r4["best_s"].items():
                out(f"    {k:18s} " + "  ".join(f"{r} {t:6.2f}s" for r, t in v.items())
                    + f"  total {r4['total_s'][k]:.2f}s  ({r4['vs_accel_alone'][k]:.2f}x vs alone)  tasks "
                    f"{r4['tasks_per_backend'][k]}")
            out("    Bar: accelerator + CPU (eft) never slower than the accelerator alone (>= 1.0x)")
    if args.json:
        text = json.dumps(res, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
