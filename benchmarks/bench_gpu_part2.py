"""GPU measurements, part 2: the tile runtime, the recursive TRMM/TRSM and the asynchronous API on one GPU,
each against its baseline measured in the same run, each time beside the simulated H100's prediction of it.

Usage::

    python benchmarks/bench_gpu_part2.py STEP [--out DIR] [--budget S] [--trials N]   # on the GPU machine
    python benchmarks/bench_gpu_part2.py --predict STEP[,STEP...] [--write PATH]      # any machine, no GPU
    python benchmarks/bench_gpu_part2.py STEP --standin                               # no GPU: the flow

``benchmarks/gpu_part2.sh`` runs the steps on the GPU test machine (one process per step, each under a
time limit of its own).  Steps (docs/measurements/gpu.md has the plan, the predictions and the bars):

* ``incore``: dgemm, sgemm, zgemm, n = 8192, 16384, 32768, host operands through the tile runtime on
  the GPU against one ``cupy.matmul`` on device operands (bar >= 0.95x).
* ``ooc``: dgemm with operands 1.5x and 3x the tile memory given to the runtime (``GPUDevice(memory=)``)
  against the in-core ``cupy.matmul`` rate at the same n (bar >= 0.90x); bytes moved against the lower
  bound (every input in and the output out once; 2 m n k / sqrt(S) elements for S elements of tile
  memory); the cuBLAS-XT way: the runtime's static round robin without tile caches, and cuBLAS-XT itself
  (``cublasXtDgemm``, through ctypes, in a child process) where the library has it.
* ``hybrid``: the GPU with CPU workers (the host's cores less one per GPU stream) against the GPU alone
  on the same call (bar >= 1.0x), with the CPU workers' share of the flops.
* ``kblas``: recursive in-place dtrmm, dtrsm, ztrmm, ztrsm on device arrays, n = 4096, 8192, 16384, with
  64, 512 and n right-hand sides, against cuBLAS's own trmm/trsm (benchmarks/bench_trmm_trsm.py's GPU part).
* ``async``: Brodtkorb's loop (dgemm, dsymm, dsyrk, n = 1000) on the GPU alone and with CPU workers
  (benchmarks/bench_async.py's part 4).
* ``trace``: the Perfetto trace and timeline PNG of one out-of-core dgemm, and the simulated H100's
  timeline of the same call.
* ``tiles``: the in-core gemm with each tile forced (dgemm n = 8192 and 16384, zgemm n = 8192), and dgemm
  n = 16384 out of core (operands 3x the tile memory) with tile 2048 and with 2 streams, against one
  ``cupy.matmul`` on device operands: which tile and how many streams the GPU and its link want.

Sizing.  Every step runs its cases in order of priority.  Before a case its cost on the device is
estimated (the predicted seconds of every timed call and warm-up, the baseline's included, plus filling
its host operands at :data:`HOST_FILL_BPS`); a case that does not fit what is left of the step's
``--budget`` is skipped and listed as skipped (a clean stop: the process is never killed mid-case when the
predictions hold).

Predictions.  ``--predict`` runs the exact calls of a step on the simulated H100 machine
(:func:`tileblas.devices.sim.sim_machine`: modeled kernels and link, placeholder operands, the real
runtime's schedule and caches; the host's part at this machine's speed) and writes them to
``bench_gpu_part2_predicted.json`` beside this file; the GPU run reads that file and prints each
prediction beside its measurement.  A case the file lacks is predicted at run time from the device model
alone (:func:`tileblas.runtime._shares.predict_seconds`) and marked ``analytic``.  The recursive
TRMM/TRSM and cuBLAS's own are predicted from the model's rate by tile edge (:func:`predict_recursive`).

Results: ``<out>/results.json`` (the environment: device, driver, CUDA, CuPy; per step the cases with
measured and predicted seconds, the cases skipped, the budget and the seconds used), written after every
case; the trace step adds ``gpu_ooc_trace.json``, ``gpu_ooc_timeline.png`` and ``sim_ooc_timeline.png``.

``--standin``: the same flow at tiny sizes on the CuPy stand-in of tests/_cupy_standin.py (no GPU, no
CUDA), so that a GPU's minutes go to measuring: every number is made and every result checked.

Host waits on the GPU are blocking events (a spinning wait would take a core from the CPU workers).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import time
import traceback
from typing import Any, Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PREDICTED = os.path.join(HERE, "bench_gpu_part2_predicted.json")
STEPS = ("incore", "ooc", "hybrid", "kblas", "async", "trace", "tiles")
#: Seconds each step may use by default (benchmarks/gpu_part2.sh gives each a little more as its limit).
BUDGETS = {"incore": 130, "ooc": 150, "hybrid": 60, "kblas": 70, "async": 50, "trace": 40, "tiles": 60}
#: Bytes a second the host operands are filled at (made on the GPU, copied to pageable host memory,
#: first touch): an assumption of the sizing, not a measurement.
HOST_FILL_BPS = 2e9
#: Host seconds of one cuBLAS call issued from Python (the recursive TRMM/TRSM's prediction).
LAUNCH_S = 1e-5
#: Bars of the issue, per step: the ratio baseline time / tileblas time must reach them.
BARS = {"incore": 0.95, "ooc": 0.90, "hybrid": 1.0, "async": 1.0}
_DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


# ------------------------------------------------------------------------------------------ cases
def plan_step(step: str, tiny: bool = False) -> list[dict]:
    """The cases of ``step`` in order of priority (the exact calls the step times); ``tiny``: the
    stand-in's sizes."""
    if step == "incore":
        sizes = (64, 96) if tiny else (8192, 16384, 32768)
        return [{"id": f"incore/{p}gemm/n={n}", "prefix": p, "n": n} for p in "dsz" for n in sizes]
    if step == "ooc":
        sizes = (96,) if tiny else (32768, 16384)
        out = []
        for n in sizes:
            out.append({"id": f"ooc/dgemm/n={n}/cupy", "n": n, "mode": "cupy"})
            for ratio in (1.5, 3.0):
                out.append({"id": f"ooc/dgemm/n={n}/x{ratio:g}", "n": n, "ratio": ratio, "mode": "cache"})
            out.append({"id": f"ooc/dgemm/n={n}/x3/round-robin", "n": n, "ratio": 3.0, "mode": "round-robin"})
            out.append({"id": f"ooc/dgemm/n={n}/x3/cublasxt", "n": n, "ratio": 3.0, "mode": "cublasxt"})
        return out
    if step == "hybrid":
        cases = [("d", 96), ("z", 64)] if tiny else [("d", 16384), ("d", 32768), ("z", 16384)]
        return [{"id": f"hybrid/{p}gemm/n={n}", "prefix": p, "n": n} for p, n in cases]
    if step == "kblas":
        sizes = (64, 96) if tiny else (4096, 8192, 16384)
        out = []
        for p in "dz":
            for n in sizes:
                for nr in ((16, "square") if tiny else (64, 512, "square")):
                    for kind in ("trmm", "trsm"):
                        r = n if nr == "square" else nr
                        out.append({"id": f"kblas/{p}{kind}/n={n}/nrhs={r}", "prefix": p, "kind": kind, "n": n,
                                    "nrhs": r})
        # then where the recursion stops (the default's 128 lost 0.23-0.87x to Hopper's cuBLAS with 64-512
        # right-hand sides in the first run, and stops of 512 and 2048 gave 0.90-1.01x in the second):
        # double precision, larger leaves; and as many right-hand sides as the order, where the default's
        # leaves beat cuBLAS (trsm 1.06-1.15x from n = 8192), in both precisions
        for n in ((96,) if tiny else (8192, 16384)):
            for r in ((16,) if tiny else (64, 512)):
                for stop in ((32,) if tiny else (512, 2048)):
                    for kind in ("trmm", "trsm"):
                        out.append({"id": f"kblas/d{kind}/n={n}/nrhs={r}/stop={stop}", "prefix": "d", "kind": kind,
                                    "n": n, "nrhs": r, "stop": stop})
        for p in "dz":
            n = 96 if tiny else 8192
            for stop in ((32,) if tiny else (512, 2048)):
                for kind in ("trmm", "trsm"):
                    out.append({"id": f"kblas/{p}{kind}/n={n}/nrhs={n}/stop={stop}", "prefix": p, "kind": kind,
                                "n": n, "nrhs": n, "stop": stop})
        return out
    if step == "async":
        return [{"id": "async/paper-loop", "n": 64 if tiny else 1000, "count": 12 if tiny else 300,
                 "repeats": 1 if tiny else 2}]
    if step == "trace":
        return [{"id": "trace/dgemm/ooc", "n": 96 if tiny else 16384, "ratio": 3.0}]
    if step == "tiles":
        groups = [("d", 96, (16, 32))] if tiny else \
            [("d", 8192, (1024, 2048, 4096)), ("z", 8192, (2048, 4096)), ("d", 16384, (2048, 4096, 8192))]
        out = [{"id": f"tiles/{p}gemm/n={n}/tile={t}", "prefix": p, "n": n, "tile": t}
               for p, n, tiles in groups for t in tiles]
        # out of core, operands 3x the tile memory (the ooc step's 0.83x at n = 16384 moved 1.69x the bound
        # with tile 4096 and 4 streams: 12 of the 16 tiles the memory holds are in flight): a smaller tile,
        # fewer streams
        n = 96 if tiny else 16384
        for t, st in (((16, None), (32, 2)) if tiny else ((2048, None), (4096, 2), (2048, 2))):
            out.append({"id": f"tiles/dgemm/n={n}/x3/tile={t}" + (f"/streams={st}" if st else ""), "prefix": "d",
                        "n": n, "tile": t, "ratio": 3.0, "streams": st})
        return out
    raise ValueError(f"step must be one of {', '.join(STEPS)}; got {step!r}")


def _flops(name: str, n: int, prefix: str, nrhs: int | None = None) -> float:
    f = n * float(n) * (nrhs if nrhs is not None else n) * (1.0 if name in ("trmm", "trsm") else 2.0)
    return f * (4.0 if prefix in "cz" else 1.0)


def _operand_bytes(n: int, prefix: str, count: int = 3) -> int:
    return count * n * n * np.dtype(_DT[prefix]).itemsize


def _tile_memory(n: int, ratio: float, prefix: str = "d") -> int:
    """The tile memory that makes the call's operands ``ratio`` times it."""
    return int(_operand_bytes(n, prefix) / ratio) // 512 * 512


def io_lower_bound(m: int, n: int, k: int, item: int, memory: int) -> dict:
    """Bytes a gemm must move between host and device: every input in and the output out once
    (``compulsory``), and for S elements of fast memory at least 2 m n k / sqrt(S) elements (the leading
    term of the tight I/O bound of Smith et al., 2019)."""
    s = max(memory // item, 1)
    compulsory = (m * k + k * n + m * n) * item
    return {"compulsory": compulsory, "io": 2.0 * m * n * k / math.sqrt(s) * item,
            "bound": max(compulsory, 2.0 * m * n * k / math.sqrt(s) * item)}


# ------------------------------------------------------------------------------------------ sizing
#: Seconds to set up a case's runtime (GPU tile memory, the link measured once, cuBLAS handles, streams).
SETUP_S = 2.0
#: A trial of a short TRMM/TRSM call lasts about this long (bench_trmm_trsm.BLOCK_S).
BLOCK_S = 0.05


def _fill(n: int, prefix: str, count: int = 2) -> float:
    """Seconds to fill ``count`` host operands of order n (:data:`HOST_FILL_BPS`)."""
    return _operand_bytes(n, prefix, count) / HOST_FILL_BPS


def case_cost(step: str, case: dict, pred: dict, trials: int, predict: Callable[[dict], dict] | None = None) -> float:
    """Estimated device seconds of one case from its prediction: every timed call, the warm-up and the
    baseline's included, filling its host operands, and setting up its runtimes.  ``predict(case)`` gives
    the prediction of another case (cuBLAS-XT, which has no model, is sized as twice the round robin)."""
    calls = 1 + trials
    n = case["n"]
    if step in ("incore", "tiles"):
        return calls * (pred["seconds"] + pred["baseline_s"]) + _fill(n, case["prefix"]) + SETUP_S
    if step == "ooc":
        mode = case["mode"]
        if mode == "cublasxt":
            rr = (predict or (lambda c: {}))({"id": case["id"].replace("/cublasxt", "/round-robin"), "n": n,
                                               "ratio": case["ratio"], "mode": "round-robin"}).get("seconds")
            return calls * 2 * (rr or 10.0) + _fill(n, "d", 3) + SETUP_S
        return calls * pred["seconds"] + (_fill(n, "d") if mode == "cupy" else 0.0) + SETUP_S
    if step == "hybrid":
        both = pred.get("gpu_cpu_s") or pred["gpu_s"]
        return calls * (pred["gpu_s"] + both) + _fill(n, case["prefix"]) + 2 * SETUP_S
    if step == "kblas":  # each trial: a warm call and a block of at least BLOCK_S, per implementation
        rec, cub = pred["recursive_s"], 3 * pred["cublas_s"]  # cuBLAS's trmm/trsm below gemm rate
        return trials * (2 * max(BLOCK_S, rec) + 2 * max(BLOCK_S, cub)) + rec + cub + 0.2
    if step == "async":  # three executors, each timed on the loop `repeats` times, and checked
        return 1.5 * case["repeats"] * (pred.get("gpu_s", 2.0) + 2 * pred.get("gpu_cpu_s", 2.0)) + 3 * SETUP_S
    if step == "trace":  # a warm-up, the traced call, its simulated twin
        return 3 * pred["seconds"] + _fill(n, "d") + SETUP_S + 3.0
    raise ValueError(f"step must be one of {', '.join(STEPS)}; got {step!r}")


def step_plan(step: str, trials: int, predictions: dict | None = None, tiny: bool = False) -> list[tuple]:
    """(case, prediction, estimated seconds) of every case of ``step``, in order of priority."""
    preds = load_predictions() if predictions is None else predictions

    def predict(case: dict) -> dict:
        return preds.get(case["id"]) or analytic_prediction(step, case)

    return [(c, predict(c), case_cost(step, c, predict(c), trials, predict)) for c in plan_step(step, tiny)]


# ------------------------------------------------------------------------------------------ predictions
def _h100(memory: int | None = None) -> Any:
    from tileblas.devices import DeviceModel

    return DeviceModel.h100(memory=memory)


def predict_recursive(kind: str, n: int, nrhs: int, prefix: str, stop: int | None = None) -> dict:
    """Predicted seconds of the recursive in-place TRMM/TRSM on the H100 model (every cuBLAS call of the
    recursion's plan at the model's rate for its smallest dimension, plus :data:`LAUNCH_S` a call) and of
    one cuBLAS call on the whole matrix at the model's rate (what cuBLAS would take at gemm speed: its
    trmm/trsm has no model of its own)."""
    from tileblas._tuning import get_tuning
    from tileblas.kernels._recursive import Leaf, plan

    model = _h100()
    dt = _DT[prefix]
    cx = 4.0 if prefix in "cz" else 1.0
    stop = get_tuning().gpu_recursion_stop if stop is None else int(stop)
    secs = 0.0
    for op in plan(kind, n, "L", "L", "T" if kind == "trmm" else "N", stop):
        if isinstance(op, Leaf):
            e = op.hi - op.lo
            fl, edge = cx * e * e * nrhs, min(e, nrhs)
        else:
            r, c = op.r1 - op.r0, op.c1 - op.c0
            fl, edge = cx * 2.0 * r * c * nrhs, min(r, c, nrhs)
        secs += model.kernel_seconds(fl, dt, edge) + LAUNCH_S
    one = model.kernel_seconds(_flops(kind, n, prefix, nrhs), dt, min(n, nrhs)) + LAUNCH_S
    return {"recursive_s": secs, "cublas_s": one, "source": "model"}


def _sim_gemm(n: int, prefix: str, devices: list, schedule: str = "demand", policy: str = "cache",
              trace_png: str | None = None, tile: int | None = None) -> dict:
    """One gemm of order n on simulated ``devices`` with placeholder operands: seconds and what moved."""
    from tileblas.devices.sim import placeholder
    from tileblas.runtime import Runtime

    dt = _DT[prefix]
    a, b, c = (placeholder((n, n), dt) for _ in range(3))
    with Runtime(devices, schedule=schedule, memory_policy=policy) as rt:
        t0 = time.perf_counter()
        rt.gemm(1.0, a, b, 0.0, c, tile_size=tile)
        secs = time.perf_counter() - t0
        prof = rt.last_profile()
        if trace_png:
            try:
                rt.plot(trace_png, last=1, title=f"simulated H100: {prefix}gemm n={n}, "
                        f"{devices[0].memory_bytes / 2**30:.2g} GiB tile memory")
            except ImportError:
                pass
    acc = [d for d in prof.devices if d.name.startswith("sim") and not d.name.startswith("simcpu")]
    total = sum(d.flops for d in prof.devices) or 1.0
    return {"seconds": secs, "tile": prof.tile_size, "bytes_moved": sum(d.bytes_moved for d in prof.devices),
            "host_flop_share": 1.0 - sum(d.flops for d in acc) / total, "source": "sim"}


def predict_case(step: str, case: dict) -> dict:
    """The simulated H100 machine's prediction of one case (see the module notes)."""
    from tileblas.devices import SimDevice
    from tileblas.devices.sim import sim_machine

    model = _h100()
    if step in ("incore", "tiles"):
        p, n = case["prefix"], case["n"]
        mem = _tile_memory(n, case["ratio"], p) if case.get("ratio") else None
        out = _sim_gemm(n, p, [SimDevice.h100(memory=mem, streams=case.get("streams"))], tile=case.get("tile"))
        out["baseline_s"] = model.kernel_seconds(_flops("gemm", n, p), _DT[p], n)
        return out
    if step in ("ooc", "trace"):
        n = case["n"]
        if case.get("mode") == "cupy":
            return {"seconds": model.kernel_seconds(_flops("gemm", n, "d"), np.float64, n), "source": "model"}
        if case.get("mode") == "cublasxt":
            return {"seconds": None, "source": "none (cuBLAS-XT has no model)"}
        mem = _tile_memory(n, case["ratio"])
        rr = case.get("mode") == "round-robin"
        return _sim_gemm(n, "d", [SimDevice.h100(memory=mem)], "round-robin" if rr else "demand",
                         "on-demand" if rr else "cache")
    if step == "hybrid":
        p, n = case["prefix"], case["n"]
        alone = _sim_gemm(n, p, sim_machine("h100", cpus=0))
        both = _sim_gemm(n, p, sim_machine("h100"))
        return {"gpu_s": alone["seconds"], "gpu_cpu_s": both["seconds"], "host_flop_share": both["host_flop_share"],
                "cpu_workers": len(sim_machine("h100")) - 1, "source": "sim"}
    if step == "kblas":
        return predict_recursive(case["kind"], case["n"], case["nrhs"], case["prefix"], case.get("stop"))
    if step == "async":
        return _predict_async(case)
    raise ValueError(f"step must be one of {', '.join(STEPS)}; got {step!r}")


def _bench_module(name: str) -> Any:
    import importlib.util

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _async_pool(n: int) -> list:
    rng = np.random.default_rng(2)
    return [(np.asfortranarray(rng.standard_normal((n, n))), np.asfortranarray(rng.standard_normal((n, n))))
            for _ in range(11)]


def _predict_async(case: dict) -> dict:
    """Brodtkorb's loop on a simulated H100 alone and with simulated CPU workers (the asynchronous API's
    real executor; operands really copied to the simulated device's memory on this host)."""
    import tileblas.asyncapi as aa
    from tileblas.devices import SimDevice, SimHostDevice

    ba = _bench_module("bench_async")
    from tileblas.devices.sim import MACHINES

    pool = _async_pool(case["n"])
    cpus = _cpu_workers(MACHINES["h100"][1])  # the simulated machine's cores, not this host's
    out = {}
    for label, extra in (("gpu_s", 0), ("gpu_cpu_s", cpus)):
        ex = aa.Executor([SimDevice.h100(memory=1 << 28)] + [SimHostDevice(i) for i in range(extra)])
        try:
            out[label] = sum(ba.paper_loop(ex, r, pool, case["count"]) for r in ("dgemm", "dsymm", "dsyrk"))
        finally:
            ex.close()
    out.update(cpu_workers=cpus, source="sim")
    return out


def _cpu_workers(cores: int | None = None, streams: int = 4) -> int:
    """CPU workers beside one GPU: the cores less one per GPU stream (each stream's worker thread)."""
    if cores is None:
        cores = os.cpu_count() or 2
    return max(cores - streams, 1)


def load_predictions(path: str = PREDICTED) -> dict:
    try:
        with open(path) as fh:
            return json.load(fh).get("cases", {})
    except (OSError, ValueError):
        return {}


def analytic_prediction(step: str, case: dict) -> dict:
    """A prediction from the device model alone (no simulation): for cases the predictions file lacks."""
    from tileblas.devices import SimDevice
    from tileblas.runtime import _shares

    model = _h100()
    if step == "kblas":
        return predict_recursive(case["kind"], case["n"], case["nrhs"], case["prefix"], case.get("stop"))
    if step == "async":
        return {"source": "none"}
    p = case.get("prefix", "d")
    n = case["n"]
    dt = _DT[p]
    mem = _tile_memory(n, case["ratio"]) if "ratio" in case else None
    devs = [SimDevice.h100(memory=mem, streams=case.get("streams"))]
    t = case.get("tile") or _shares.accelerator_tile("gemm", n, n, n, dt, devs)
    secs = _shares.predict_seconds("gemm", n, n, n, dt, t, devs)
    base = model.kernel_seconds(_flops("gemm", n, p), dt, n)
    if step == "hybrid":
        return {"gpu_s": secs, "gpu_cpu_s": None, "source": "analytic"}
    if case.get("mode") == "cupy":
        return {"seconds": base, "source": "model"}
    return {"seconds": secs, "baseline_s": base, "tile": t, "source": "analytic"}


def run_predict(steps: list[str], write: str | None, tiny: bool = False) -> dict:
    """Predict every case of ``steps`` on the simulated H100 machine; print them, and write them to
    ``write`` (merged into what it holds)."""
    cases = {}
    t_all = time.perf_counter()
    for step in steps:
        print(f"== {step} (simulated H100: one GPU, {_cpu_workers(16)} CPU workers where the step has them)",
              flush=True)
        for case in plan_step(step, tiny):
            if tiny and step in ("incore", "ooc", "trace", "tiles"):
                pred = analytic_prediction(step, case)  # the tiny sizes fit one H100 tile
            else:
                pred = predict_case(step, case)
            cases[case["id"]] = pred
            print(f"  {case['id']:<36} " + ", ".join(f"{k} {_fmt(v)}" for k, v in pred.items()), flush=True)
    if write:
        old = {}
        if os.path.exists(write):
            with open(write) as fh:
                old = json.load(fh)
        old.setdefault("cases", {}).update(cases)
        import tileblas

        old["made_with"] = {"tileblas": tileblas.__version__, "model": _h100().describe(),
                            "host_cpus": os.cpu_count(), "seconds": time.perf_counter() - t_all,
                            "how": "python benchmarks/bench_gpu_part2.py --predict " + ",".join(steps)}
        with open(write, "w") as fh:
            json.dump(old, fh, indent=1, sort_keys=True, default=float)
        print(f"wrote {write}")
    return cases


def run_sweep() -> list[dict]:
    """The defaults on the simulated H100: dgemm n = 16384 and 32768, in core and with operands 3x the tile
    memory, at the tile the model picks against every candidate, and with 2, 4 and 8 streams."""
    from tileblas.devices import SimDevice

    rows = []
    for n in (16384, 32768):
        for ratio in (None, 3.0):
            mem = None if ratio is None else _tile_memory(n, ratio)
            where = "in core" if ratio is None else f"operands {ratio:g}x the tile memory"
            auto = _sim_gemm(n, "d", [SimDevice.h100(memory=mem)])
            rows.append({"n": n, "where": where, "tile": auto["tile"], "streams": 4, "seconds": auto["seconds"],
                         "bytes_moved": auto["bytes_moved"], "chosen": True})
            for t in (1024, 2048, 4096, 8192):
                dev = SimDevice.h100(memory=mem)
                if t == auto["tile"] or 3 * t * t * 8 * dev.streams > dev.memory_bytes:
                    continue
                got = _sim_gemm(n, "d", [dev], tile=t)
                rows.append({"n": n, "where": where, "tile": t, "streams": 4, "seconds": got["seconds"],
                             "bytes_moved": got["bytes_moved"], "chosen": False})
            for st in (2, 8):
                got = _sim_gemm(n, "d", [SimDevice.h100(memory=mem, streams=st)])
                rows.append({"n": n, "where": where, "tile": got["tile"], "streams": st, "seconds": got["seconds"],
                             "bytes_moved": got["bytes_moved"], "chosen": False})
            for r in (x for x in rows if x["n"] == n and x["where"] == where):
                print(f"  dgemm n={n} {where}: tile {r['tile']}, {r['streams']} streams: {r['seconds']:.3f} s, "
                      f"{r['bytes_moved'] / 2**30:.1f} GiB moved{'  (the default)' if r['chosen'] else ''}",
                      flush=True)
    return rows


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


# ------------------------------------------------------------------------------------------ GPU helpers
class Ctx:
    """What a measuring step needs: CuPy (real or the stand-in), the results, the budget, the trials."""

    def __init__(self, args: argparse.Namespace, step: str, res: dict) -> None:
        self.args, self.step, self.res = args, step, res
        self.tiny = bool(args.standin)
        self.trials = args.trials
        self.t0 = time.perf_counter()
        self.budget = float(args.budget if args.budget is not None else BUDGETS[step])
        import cupy

        self.cp = cupy
        self.predicted = load_predictions(args.predictions)
        self.sim = getattr(cupy, "_sim", None)  # the stand-in's state (its count of host syncs)
        self.timed_spinning = 0  # spinning host syncs inside timed calls (the stand-in counts them)

    def _spins(self) -> int:
        return self.sim.syncs["spinning"] if self.sim is not None else 0

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.t0)

    def prediction(self, case: dict) -> dict:
        got = self.predicted.get(case["id"])
        if got is None:
            got = analytic_prediction(self.step, case)
        return got

    def cost(self, case: dict) -> float:
        return case_cost(self.step, case, self.prediction(case), self.trials, self.prediction)

    def wait(self) -> None:
        """Wait on the host for CuPy's current stream (a blocking event, no spinning)."""
        cp = self.cp
        ev = cp.cuda.Event(block=True, disable_timing=True)
        ev.record(cp.cuda.get_current_stream())
        ev.synchronize()

    def free(self) -> None:
        self.wait()
        self.cp.get_default_memory_pool().free_all_blocks()
        self.cp.get_default_pinned_memory_pool().free_all_blocks()

    def best(self, call: Callable[[], Any], trials: int | None = None) -> float:
        """Best wall time of ``trials`` calls after one warm-up, the GPU waited for before the clock stops."""
        spins = self._spins()
        best = _bench_module("bench_gpu")._best(call, trials or self.trials, self.wait)
        self.timed_spinning += self._spins() - spins
        return best

    def device_matrix(self, n: int, m: int, prefix: str, seed: int) -> Any:
        """An n x m Fortran-ordered random matrix made on the GPU (the stand-in: made on the host)."""
        cp = self.cp
        dt = _DT[prefix]
        if self.tiny:
            rng = np.random.default_rng(seed)
            x = rng.standard_normal((n, m)) + (1j * rng.standard_normal((n, m)) if prefix in "cz" else 0)
            return cp.asfortranarray(cp.asarray(x.astype(dt)))
        rng = cp.random.default_rng(seed)
        real = np.float32 if prefix in "sc" else np.float64
        x = rng.standard_normal((m, n), dtype=real).T  # a Fortran-ordered n x m view
        if prefix in "cz":
            x = x + 1j * rng.standard_normal((m, n), dtype=real).T
            x = cp.asfortranarray(x.astype(dt))
        return x

    def host_matrix(self, n: int, m: int, prefix: str, seed: int, keep_device: bool = False) -> Any:
        d = self.device_matrix(n, m, prefix, seed)
        h = np.empty((n, m), dtype=_DT[prefix], order="F")
        h[...] = self.cp.asnumpy(d, order="F")
        self.wait()
        if keep_device:
            return h, d
        del d
        return h

    def gpu(self, memory: int | None = None, timeline: bool = False, streams: int | None = None) -> Any:
        """GPU 0 for the runtime (``streams``: default 4); on the stand-in with an H100 model of small tiles
        (tiled at tiny sizes)."""
        from tileblas.devices.gpu import GPUDevice

        kw = {"streams": streams} if streams else {}
        if self.tiny:
            from tileblas.devices import DeviceModel

            model = DeviceModel.h100(memory=memory or (64 << 20), tile_candidates=(32, 16), knee=8.0,
                                     step_overhead_s=1e-6, **kw)
            return GPUDevice(0, memory=memory or (64 << 20), timeline=timeline, model=model, **kw)
        return GPUDevice(0, memory=memory, timeline=timeline, **kw)

    def runtime(self, devices: list, **kw: Any) -> Any:
        """A Runtime on ``devices``; on the stand-in every call is tiled (no one-task path for small calls)."""
        from tileblas.runtime import Runtime

        if self.tiny:
            kw.setdefault("small_flops", 0)
        return Runtime(devices, **kw)

    def fits(self, case: dict, cost: float) -> bool:
        """Whether a case of ``cost`` predicted seconds fits what is left; if not, it is recorded skipped."""
        if cost <= self.left():
            return True
        self.step_res["skipped"].append({"id": case["id"], "estimated_s": cost, "left_s": self.left()})
        print(f"  {case['id']}: skipped (estimated {cost:.0f} s, {max(self.left(), 0):.0f} s of the budget left)",
              flush=True)
        return False

    @property
    def step_res(self) -> dict:
        return self.res["steps"][self.step]

    def add(self, row: dict) -> None:
        self.step_res["cases"].append(row)
        save(self.args.out, self.res)


def sample_error(a: np.ndarray, b: np.ndarray, c: np.ndarray, samples: int = 48, seed: int = 1) -> float:
    """Largest error of sampled entries of c = a @ b against a double-precision host dot, relative to
    sum |a_ik| |b_kj| (the scale of its rounding error)."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    for _ in range(samples):
        i, j = int(rng.integers(c.shape[0])), int(rng.integers(c.shape[1]))
        ai, bj = a[i, :].astype(wide), b[:, j].astype(wide)
        scale = float(np.abs(ai) @ np.abs(bj)) or 1.0
        worst = max(worst, abs(complex(c[i, j]) - complex(ai @ bj)) / scale)
    return worst


def _eps(prefix: str) -> float:
    return float(np.finfo(_DT[prefix]).eps)


def _check(ctx: "Ctx", err: float, bound: float, what: str) -> bool:
    """Whether a result's error is within ``bound``.  A wrong result fails the stand-in's flow; on the GPU
    it is recorded (``wrong`` in the step's results) and said loudly, and the step goes on measuring."""
    if err <= bound:
        return True
    msg = f"{what}: WRONG RESULT, error {err:.2e} > {bound:.2e}"
    if ctx.tiny:
        raise AssertionError(msg)
    ctx.step_res.setdefault("wrong", []).append(msg)
    print("  " + msg, flush=True)
    return False


def _gemm_bound(n: int, prefix: str) -> float:
    """The sampled entries' bound: 4 n eps relative to sum |a_ik| |b_kj| (a dot product's rounding error)."""
    return 4 * n * _eps(prefix)


def _report(case: dict, measured: float, predicted: float | None, extra: str = "") -> str:
    vs = f", measured/predicted {measured / predicted:.2f}" if predicted else ""
    pred = f"{predicted:.4g} s" if predicted else "none"
    return f"  {case['id']}: {measured:.4g} s (simulated H100 {pred}{vs}){extra}"


# ------------------------------------------------------------------------------------------ steps
def _gemm_against_matmul(ctx: Ctx, case: dict, base: dict[tuple, float]) -> dict | None:
    """One case: the runtime's gemm on GPU 0 over host operands (``case["tile"]`` forced where the case
    names one; out of core where it names a ``ratio`` of the operands to the tile memory; ``streams``)
    against one ``cupy.matmul`` on device operands (timed once per precision and order, kept in
    ``base``); its result row, or None where it was skipped."""
    cp = ctx.cp
    p, n, tile = case["prefix"], case["n"], case.get("tile")
    pred = ctx.prediction(case)
    if not ctx.fits(case, ctx.cost(case)):
        return None
    free, _ = cp.cuda.runtime.memGetInfo()
    if _operand_bytes(n, p) > 0.9 * free:
        ctx.step_res["skipped"].append({"id": case["id"], "why": "operands > 90% of free GPU memory"})
        return None
    a, ad = ctx.host_matrix(n, n, p, 1, keep_device=True)
    b, bd = ctx.host_matrix(n, n, p, 2, keep_device=True)
    if (p, n) not in base:
        cd = cp.empty((n, n), dtype=_DT[p], order="F")
        base[(p, n)] = ctx.best(lambda: cp.matmul(ad, bd, out=cd))
        cd = None
    ad = bd = None
    ctx.free()
    c = np.zeros((n, n), dtype=_DT[p], order="F")
    ratio = case.get("ratio")
    gpu = ctx.gpu(memory=_tile_memory(n, ratio, p) if ratio else None, streams=case.get("streams"))
    rt = ctx.runtime([gpu])
    try:
        t = ctx.best(lambda: rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=tile))
        prof = rt.last_profile()
    finally:
        rt.shutdown()
        gpu.close()
        ctx.free()
    err = sample_error(a, b, c)
    _check(ctx, err, _gemm_bound(n, p), case["id"])
    fl = _flops("gemm", n, p)
    t_mm = base[(p, n)]
    row = {"id": case["id"], "n": n, "dtype": np.dtype(_DT[p]).name, "tiles_s": t, "cupy_matmul_s": t_mm,
           "ratio": t_mm / t, "bar": BARS["ooc" if ratio else "incore"], "tiles_tflops": fl / t / 1e12,
           "cupy_tflops": fl / t_mm / 1e12,
           "tile": prof.tile_size, "bytes_moved": sum(d.bytes_moved for d in prof.devices), "max_rel_error": err,
           "predicted": pred}
    ctx.add(row)
    print(_report(case, t, pred.get("seconds"), f"; cupy.matmul {t_mm:.4g} s (predicted "
                                                f"{pred['baseline_s']:.4g}) -> {row['ratio']:.3f}x "
                                                f"(bar {row['bar']}), tile {prof.tile_size}, moved "
                                                f"{row['bytes_moved'] / 1e9:.3g} GB, error {err:.1e}"), flush=True)
    return row


def step_tiles(ctx: Ctx) -> None:
    """The in-core gemm at each tile size forced (the runtime's own choice is the incore step's): which
    tile the GPU and its link want."""
    base: dict[tuple, float] = {}
    for case in plan_step("tiles", ctx.tiny):
        _gemm_against_matmul(ctx, case, base)


def step_incore(ctx: Ctx) -> None:
    base: dict[tuple, float] = {}
    for case in plan_step("incore", ctx.tiny):
        _gemm_against_matmul(ctx, case, base)


def _cublasxt_child(n: int, block: int, trials: int) -> dict:
    """cuBLAS-XT's dgemm on host operands (one GPU, pinned-memory mode on), in this process: best time."""
    import cupy

    from tileblas.kernels import _cuda

    lib = _cuda._library()
    for nm in ("cublasXtCreate", "cublasXtDestroy", "cublasXtDeviceSelect", "cublasXtSetBlockDim",
               "cublasXtSetPinningMemMode", "cublasXtDgemm"):
        if not hasattr(lib, nm):
            return {"error": f"{nm} not in {lib._name}"}
    h = ctypes.c_void_p()
    chk = _cuda_status
    chk(lib.cublasXtCreate(ctypes.byref(h)), "cublasXtCreate")
    try:
        dev = (ctypes.c_int * 1)(0)
        chk(lib.cublasXtDeviceSelect(h, ctypes.c_int(1), dev), "cublasXtDeviceSelect")
        chk(lib.cublasXtSetBlockDim(h, ctypes.c_int(block)), "cublasXtSetBlockDim")
        chk(lib.cublasXtSetPinningMemMode(h, ctypes.c_int(1)), "cublasXtSetPinningMemMode")
        rng = cupy.random.default_rng(9)
        a = cupy.asnumpy(rng.standard_normal((n, n)).T, order="F")
        b = cupy.asnumpy(rng.standard_normal((n, n)).T, order="F")
        c = np.zeros((n, n), order="F")
        one, zero = ctypes.c_double(1.0), ctypes.c_double(0.0)
        sz = ctypes.c_size_t
        fn = lib.cublasXtDgemm
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, sz, sz, sz, ctypes.c_void_p, ctypes.c_void_p,
                       sz, ctypes.c_void_p, sz, ctypes.c_void_p, ctypes.c_void_p, sz]

        def call() -> None:
            chk(fn(h, 0, 0, n, n, n, ctypes.byref(one), a.ctypes.data, n, b.ctypes.data, n, ctypes.byref(zero),
                   c.ctypes.data, n), "cublasXtDgemm")  # blocking: returns with C on the host

        best = _bench_module("bench_gpu")._best(call, trials, lambda: None)
        err = sample_error(a, b, c)
        return {"seconds": best, "block": block, "max_rel_error": err, "library": lib._name}
    finally:
        lib.cublasXtDestroy(h)


def _cuda_status(st: int, what: str) -> None:
    if st != 0:
        raise RuntimeError(f"{what} returned cuBLAS status {st}")


def _cublasxt(ctx: Ctx, n: int, block: int, limit: float) -> dict:
    """cuBLAS-XT in a child process (a fault there cannot take the step down), within ``limit`` seconds."""
    cmd = [sys.executable, os.path.abspath(__file__), "--cublasxt-child", f"{n},{block},{ctx.trials}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=max(limit, 5))
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {limit:.0f} s"}
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit status {r.returncode}"]
    return {"error": tail[0][:300]}


def step_ooc(ctx: Ctx) -> None:

    cp = ctx.cp
    ops: dict[int, tuple] = {}  # the host operands of the current n (and the device ones for cupy.matmul)
    cupy_rate: dict[int, float] = {}
    tile_of: dict[int, int] = {}
    rr_s: dict[int, float] = {}
    for case in plan_step("ooc", ctx.tiny):
        n, mode = case["n"], case["mode"]
        pred = ctx.prediction(case)
        fl = _flops("gemm", n, "d")
        cost = ctx.cost(case)
        if mode == "cublasxt" and n in rr_s:  # no model: sized as twice the round robin measured
            cost = (1 + ctx.trials) * 2 * rr_s[n] + _fill(n, "d", 3) + SETUP_S
        elif mode != "cupy" and n not in ops:  # (cupy.matmul's case was skipped: its operands are still to fill)
            cost += _fill(n, "d")
        if not ctx.fits(case, cost):
            continue
        if n not in ops:
            ops.clear()
            ctx.free()
            if mode == "cupy":
                a, ad = ctx.host_matrix(n, n, "d", 9, keep_device=True)
                b, bd = ctx.host_matrix(n, n, "d", 10, keep_device=True)
            else:
                a, b, ad, bd = ctx.host_matrix(n, n, "d", 9), ctx.host_matrix(n, n, "d", 10), None, None
            ops[n] = (a, b, np.zeros((n, n), order="F"), ad, bd)
        a, b, c, ad, bd = ops[n]
        if mode == "cupy":
            cd = cp.empty((n, n), order="F")
            t = ctx.best(lambda: cp.matmul(ad, bd, out=cd))
            ops[n] = (a, b, c, None, None)
            ad = bd = cd = None
            ctx.free()
            cupy_rate[n] = fl / t
            row = {"id": case["id"], "n": n, "mode": mode, "seconds": t, "tflops": fl / t / 1e12, "predicted": pred}
            ctx.add(row)
            print(_report(case, t, pred.get("seconds"), " (in-core cuBLAS, the rate the bar is against)"),
                  flush=True)
            continue
        mem = _tile_memory(n, case["ratio"])
        if mode == "cublasxt":
            block = tile_of.get(n, 2048)
            got = _cublasxt(ctx, 256 if ctx.tiny else n, 64 if ctx.tiny else block, ctx.left())
            row = {"id": case["id"], "n": n, "mode": mode, **got, "predicted": pred}
            if "seconds" in got and n in cupy_rate:
                row["ratio_vs_incore"] = fl / got["seconds"] / cupy_rate[n]
            ctx.add(row)
            print(f"  {case['id']}: " + (f"{got['seconds']:.3f} s (block {got['block']})" if "seconds" in got
                                         else f"not measured: {got['error']}"), flush=True)
            continue
        rr = mode == "round-robin"
        c[...] = 0
        gpu = ctx.gpu(memory=mem)
        rt = ctx.runtime([gpu], schedule="round-robin" if rr else "demand",
                         memory_policy="on-demand" if rr else "cache")
        try:
            t = ctx.best(lambda: rt.run("gemm", 1.0, a, b, 0.0, c))
            prof = rt.last_profile()
        finally:
            rt.shutdown()
            gpu.close()
            ctx.free()
        err = sample_error(a, b, c)
        _check(ctx, err, _gemm_bound(n, "d"), case["id"])
        moved = sum(d.bytes_moved for d in prof.devices)
        lb = io_lower_bound(n, n, n, 8, mem)
        row = {"id": case["id"], "n": n, "mode": mode, "tile_memory": mem, "operands_over_memory": case["ratio"],
               "seconds": t, "tflops": fl / t / 1e12, "tile": prof.tile_size, "bytes_moved": moved,
               "lower_bound": lb, "moved_over_bound": moved / lb["bound"], "max_rel_error": err, "predicted": pred}
        if n in cupy_rate:
            row["ratio_vs_incore"] = fl / t / cupy_rate[n]
            row["bar"] = BARS["ooc"] if not rr else None
        tile_of[n] = prof.tile_size
        if rr:
            rr_s[n] = t
        ctx.add(row)
        vs = f" -> {row['ratio_vs_incore']:.3f}x of in-core cuBLAS" if "ratio_vs_incore" in row else ""
        print(_report(case, t, pred.get("seconds"), f"{vs}; tile {prof.tile_size}, moved {moved / 2**30:.1f} GiB "
                                                    f"= {row['moved_over_bound']:.2f}x the lower bound"), flush=True)
    ops.clear()


def step_hybrid(ctx: Ctx) -> None:
    from tileblas.devices import host_devices

    cpus = ctx.args.cpus or _cpu_workers()
    for case in plan_step("hybrid", ctx.tiny):
        p, n = case["prefix"], case["n"]
        pred = ctx.prediction(case)
        if not ctx.fits(case, ctx.cost(case)):
            continue
        a, b = ctx.host_matrix(n, n, p, 6), ctx.host_matrix(n, n, p, 7)
        c = np.zeros((n, n), dtype=_DT[p], order="F")
        got = {}
        for label, extra in (("gpu", 0), ("gpu+cpu", cpus)):
            gpu = ctx.gpu()
            rt = ctx.runtime([gpu] + (host_devices(extra) if extra else []))
            try:
                c[...] = 0
                got[label] = ctx.best(lambda: rt.run("gemm", 1.0, a, b, 0.0, c))
                prof = rt.last_profile()
            finally:
                rt.shutdown()
                gpu.close()
                ctx.free()
            err = sample_error(a, b, c)
            _check(ctx, err, _gemm_bound(n, p), f"{case['id']} {label}")
            total = sum(d.flops for d in prof.devices) or 1.0
            got[label + "_cpu_share"] = sum(d.flops for d in prof.devices if not d.name.startswith("gpu")) / total
            got[label + "_tile"] = prof.tile_size
        row = {"id": case["id"], "n": n, "dtype": np.dtype(_DT[p]).name, "cpu_workers": cpus, "gpu_s": got["gpu"],
               "gpu_cpu_s": got["gpu+cpu"], "ratio": got["gpu"] / got["gpu+cpu"], "bar": BARS["hybrid"],
               "cpu_flop_share": got["gpu+cpu_cpu_share"], "tile": got["gpu+cpu_tile"], "predicted": pred}
        ctx.add(row)
        print(_report(case, got["gpu+cpu"], pred.get("gpu_cpu_s"),
                      f"; GPU alone {got['gpu']:.4g} s (predicted {_fmt(pred.get('gpu_s'))}) -> {row['ratio']:.3f}x "
                      f"(bar 1.0), CPU share {row['cpu_flop_share']:.1%} (predicted "
                      f"{_fmt(pred.get('host_flop_share'))})"), flush=True)
        del a, b, c


def step_kblas(ctx: Ctx) -> None:
    bt = _bench_module("bench_trmm_trsm")
    groups: dict[tuple, list[dict]] = {}  # trmm and trsm of one order, right-hand sides and stop: one call
    for case in plan_step("kblas", ctx.tiny):
        groups.setdefault((case["prefix"], case["n"], case["nrhs"], case.get("stop")), []).append(case)
    for (p, n, nr, stop), cases in groups.items():
        preds = [ctx.prediction(c) for c in cases]
        if not ctx.fits({"id": "/".join(c["id"] for c in cases)}, sum(ctx.cost(c) for c in cases)):
            continue
        rows = bt.bench_gpu(n, [nr], ctx.trials, stop=stop, dtype=_DT[p], kinds=tuple(c["kind"] for c in cases),
                            host=False, settle=0.0, quiet=True)
        for case, pred, row in zip(cases, preds, rows):
            row.update(id=case["id"], predicted=pred)
            ctx.add(row)
            t = row["device_seconds"]
            print(_report(case, t["recursive"], pred["recursive_s"],
                          f"; cuBLAS {t['cublas']:.4g} s (at gemm rate {pred['cublas_s']:.4g}) -> "
                          f"{row['speedup_vs_cublas']:.2f}x; vs cuBLAS {row['diff_vs_cublas']:.1e}"), flush=True)
            if case["kind"] == "trmm":  # (a triangular solve's difference also grows with the condition)
                _check(ctx, row["diff_vs_cublas"], 8 * n * _eps(p), f"{case['id']} against cuBLAS")


def step_async(ctx: Ctx) -> None:
    ba = _bench_module("bench_async")
    (case,) = plan_step("async", ctx.tiny)
    pred = ctx.prediction(case)
    cpus = ctx.args.cpus or _cpu_workers()
    if not ctx.fits(case, ctx.cost(case)):
        return
    got = ba.part4(case["n"], case["count"], case["repeats"], [cpus], lambda s: print(s, flush=True), "gpu")
    if "skipped" in got:
        raise RuntimeError(f"bench_async part 4 did not run: {got['skipped']}")
    alone = got["total_s"]["accel alone"]
    eft = got["total_s"][f"accel+{cpus}cpu eft"]
    row = {"id": case["id"], "n": case["n"], "count": case["count"], "cpu_workers": cpus, "gpu_s": alone,
           "gpu_cpu_s": eft, "ratio": alone / eft, "bar": BARS["async"], "part4": got, "predicted": pred}
    ctx.add(row)
    print(_report(case, eft, pred.get("gpu_cpu_s"), f"; GPU alone {alone:.4g} s (predicted "
                                                   f"{_fmt(pred.get('gpu_s'))}) -> {row['ratio']:.3f}x (bar 1.0)"),
          flush=True)


def step_trace(ctx: Ctx) -> None:
    from tileblas.devices import SimDevice

    (case,) = plan_step("trace", ctx.tiny)
    n = case["n"]
    mem = _tile_memory(n, case["ratio"])
    pred = ctx.prediction(case)
    if not ctx.fits(case, ctx.cost(case)):
        return
    a, b = ctx.host_matrix(n, n, "d", 11), ctx.host_matrix(n, n, "d", 12)
    c = np.zeros((n, n), order="F")
    gpu = ctx.gpu(memory=mem, timeline=True)
    rt = ctx.runtime([gpu])
    out = ctx.args.out
    files = {}
    try:
        spins = ctx._spins()
        rt.run("gemm", 1.0, a, b, 0.0, c)  # warm-up (registration of the operands)
        t0 = time.perf_counter()
        rt.run("gemm", 1.0, a, b, 0.0, c)
        t = time.perf_counter() - t0
        ctx.timed_spinning += ctx._spins() - spins
        prof = rt.last_profile()
        files["trace"] = os.path.join(out, "gpu_ooc_trace.json")
        rt.trace(files["trace"], last=1)
        try:
            files["timeline"] = rt.plot(os.path.join(out, "gpu_ooc_timeline.png"), last=1,
                                        title=f"dgemm n={n}, host operands 3x the tile memory, one GPU")
        except ImportError:
            pass
    finally:
        rt.shutdown()
        gpu.close()
        ctx.free()
    err = sample_error(a, b, c)
    _check(ctx, err, _gemm_bound(n, "d"), case["id"])
    sim = {}
    if not ctx.tiny:  # the simulated H100's timeline of the same call (about the predicted time, on the host)
        sim = _sim_gemm(n, "d", [SimDevice.h100(memory=mem)], trace_png=os.path.join(out, "sim_ooc_timeline.png"))
        files["sim_timeline"] = os.path.join(out, "sim_ooc_timeline.png")
    row = {"id": case["id"], "n": n, "tile_memory": mem, "seconds": t, "tile": prof.tile_size,
           "bytes_moved": sum(d.bytes_moved for d in prof.devices), "max_rel_error": err,
           "files": {k: os.path.basename(v) for k, v in files.items()}, "simulated_now": sim, "predicted": pred,
           "profile": prof.to_dict()}
    ctx.add(row)
    print(_report(case, t, pred.get("seconds"), f"; tile {prof.tile_size}; wrote "
                                                f"{', '.join(row['files'].values())}"), flush=True)


STEP_FUNCS: dict[str, Callable[[Ctx], None]] = {"incore": step_incore, "ooc": step_ooc, "hybrid": step_hybrid,
                                                "kblas": step_kblas, "async": step_async, "trace": step_trace,
                                                "tiles": step_tiles}


# ------------------------------------------------------------------------------------------ results
def save(out: str, res: dict) -> None:
    path = os.path.join(out, "results.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(res, fh, indent=1, default=_json_default)
    os.replace(path + ".tmp", path)


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.integer, np.floating)):
        return x.item()
    return str(x)


def environment(cp: Any) -> dict:
    """The device, driver, CUDA and CuPy versions, and the host."""
    import platform

    import tileblas

    rt = cp.cuda.runtime
    props = rt.getDeviceProperties(0)
    name = props.get("name", b"?")
    env = {"device": name.decode(errors="replace") if isinstance(name, bytes) else str(name),
           "device_memory": int(props.get("totalGlobalMem", 0) or 0), "cupy": cp.__version__,
           "cuda_runtime": rt.runtimeGetVersion(), "cuda_driver": rt.driverGetVersion(),
           "tileblas": tileblas.__version__, "numpy": np.__version__, "python": platform.python_version(),
           "cpu_count": os.cpu_count(), "host_memory": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,pcie.link.gen.current,"
                            "pcie.link.width.current,clocks.max.sm", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        env["nvidia_smi"] = q.stdout.strip() or q.stderr.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        env["nvidia_smi"] = f"not run: {exc}"
    return env


def _install_standin(mp: Any = None) -> Any:
    """The CuPy stand-in of tests/_cupy_standin.py in sys.modules (one device, 1 GiB), through the
    ``pytest.MonkeyPatch`` ``mp`` (a test's, which undoes it; a new one in a process of its own)."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    import pytest

    from _cupy_standin import install

    import importlib.machinery

    mp = pytest.MonkeyPatch() if mp is None else mp
    sim = install(mp, devices=1, total=1 << 30)
    for name in ("cupy", "cupyx"):  # importlib.util.find_spec("cupy") answers as for an installed CuPy
        mp.setattr(sys.modules[name], "__spec__", importlib.machinery.ModuleSpec(name, None))
    return sim


def run_step(args: argparse.Namespace, step: str) -> int:
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.json")
    res: dict[str, Any] = {"steps": {}}
    if os.path.exists(path):
        with open(path) as fh:
            res = json.load(fh)
    sim = _install_standin() if args.standin else None
    from tileblas.devices.gpu import gpu_info

    g = gpu_info()
    if not g["available"]:
        res.setdefault("errors", {})[step] = g["note"]
        save(args.out, res)
        print(f"no GPU to measure: {g['note']}", file=sys.stderr)
        return 2
    ctx = Ctx(args, step, res)
    res["env"] = environment(ctx.cp)
    if args.standin:
        res["env"]["standin"] = True
    res["steps"][step] = {"budget_s": ctx.budget, "trials": ctx.trials, "cases": [], "skipped": [],
                          "predictions": os.path.basename(args.predictions) if ctx.predicted else "analytic only"}
    print(f"== {step}: {res['env']['device']}, CuPy {res['env']['cupy']}, CUDA runtime "
          f"{res['env']['cuda_runtime']}, driver {res['env']['cuda_driver']}; budget {ctx.budget:.0f} s, best of "
          f"{ctx.trials} after a warm-up", flush=True)
    rc = 0
    try:
        STEP_FUNCS[step](ctx)
    except Exception:  # noqa: BLE001 - recorded with its traceback; the script exits 1
        res["steps"][step]["error"] = traceback.format_exc()
        print(res["steps"][step]["error"], file=sys.stderr, flush=True)
        rc = 1
    res["steps"][step]["seconds"] = time.perf_counter() - ctx.t0
    if sim is not None:  # host syncs on the stand-in: all of them, and the spinning ones inside timed calls
        res["steps"][step]["standin_syncs"] = {**sim.syncs, "timed_spinning": ctx.timed_spinning}
    save(args.out, res)
    print(f"== {step}: {len(res['steps'][step]['cases'])} cases measured, {len(res['steps'][step]['skipped'])} "
          f"skipped, {res['steps'][step]['seconds']:.0f} s of {ctx.budget:.0f}", flush=True)
    return rc


def _measured(row: dict) -> tuple:
    """(tileblas' seconds, the baseline's seconds, its name, the predicted seconds, the predicted baseline)
    of a result row."""
    pr = row.get("predicted", {})
    if "tiles_s" in row:
        return row["tiles_s"], row["cupy_matmul_s"], "cupy.matmul", pr.get("seconds"), pr.get("baseline_s")
    if "gpu_cpu_s" in row:
        return row["gpu_cpu_s"], row["gpu_s"], "GPU alone", pr.get("gpu_cpu_s"), pr.get("gpu_s")
    if "device_seconds" in row:
        t = row["device_seconds"]
        return t["recursive"], t["cublas"], "cuBLAS", pr.get("recursive_s"), pr.get("cublas_s")
    if "seconds" in row:
        base = row["seconds"] * row["ratio_vs_incore"] if row.get("ratio_vs_incore") else None
        return row["seconds"], base, "in-core cupy.matmul" if base else "", pr.get("seconds"), None
    return None, None, "", pr.get("seconds"), None


def summarize(out: str) -> str:
    """The measured figures of ``out``/results.json, each beside its baseline, bar and prediction."""
    path = os.path.join(out, "results.json")
    if not os.path.exists(path):
        return f"no {path}"
    with open(path) as fh:
        res = json.load(fh)
    env = res.get("env", {})
    lines = [f"device {env.get('device')} ({env.get('nvidia_smi', '')}); CuPy {env.get('cupy')}, CUDA runtime "
             f"{env.get('cuda_runtime')}, driver {env.get('cuda_driver')}; tileblas {env.get('tileblas')}, "
             f"{env.get('cpu_count')} CPUs" + (" [STAND-IN, not a GPU]" if env.get("standin") else ""),
             f"{'case':<38} {'tileblas s':>11} {'baseline s':>11} {'ratio':>7} {'bar':>5} {'pred s':>10} "
             f"{'pred base':>10} {'meas/pred':>9}  baseline"]
    for step, sr in res.get("steps", {}).items():
        for row in sr.get("cases", []):
            t, base, what, pt, pb = _measured(row)
            ratio = row.get("ratio", row.get("speedup_vs_cublas", row.get("ratio_vs_incore")))
            lines.append(f"{row['id']:<38} {_num(t):>11} {_num(base):>11} {_num(ratio, '.3f'):>7} "
                         f"{_num(row.get('bar'), '.2f'):>5} {_num(pt):>10} {_num(pb):>10} "
                         f"{_num(t / pt if t and pt else None, '.2f'):>9}  {what}"
                         + (f"  [{row['error']}]" if "error" in row else ""))
        for sk in sr.get("skipped", []):
            lines.append(f"{sk['id'][:38]:<38} skipped: " + (sk.get("why") or f"estimated {sk['estimated_s']:.0f} s, "
                                                              f"{max(sk['left_s'], 0):.0f} s left"))
        for w in sr.get("wrong", []):
            lines.append(w)
        if "error" in sr:
            lines.append(f"{step}: FAILED: {sr['error'].strip().splitlines()[-1]}")
    return "\n".join(lines)


def _num(x: Any, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench_gpu_part2", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", nargs="?", help=f"one of {', '.join(STEPS)}")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-results"))
    p.add_argument("--budget", type=float, default=None, help="seconds the step may use (default: BUDGETS)")
    p.add_argument("--trials", type=int, default=2, help="timed calls after the warm-up, best kept (default 2)")
    p.add_argument("--cpus", type=int, default=None, help="CPU workers beside the GPU (default: cores - 4)")
    p.add_argument("--standin", action="store_true", help="the CuPy stand-in at tiny sizes (no GPU)")
    p.add_argument("--predict", default=None, metavar="STEPS", help="predict these steps' cases (no GPU)")
    p.add_argument("--write", default=None, help="with --predict: merge the predictions into this JSON file")
    p.add_argument("--predictions", default=PREDICTED, help="the predictions file a measuring step reads")
    p.add_argument("--tiny", action="store_true", help="with --predict: the stand-in's sizes")
    p.add_argument("--summary", default=None, metavar="DIR", help="print DIR/results.json as a table and exit")
    p.add_argument("--sweep", action="store_true", help="the defaults (tile, streams) on the simulated H100")
    p.add_argument("--cublasxt-child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.summary:
        print(summarize(args.summary))
        return 0
    if args.sweep:
        run_sweep()
        return 0
    if args.cublasxt_child:
        n, block, trials = (int(x) for x in args.cublasxt_child.split(","))
        print(json.dumps(_cublasxt_child(n, block, trials), default=float))
        return 0
    if args.predict:
        steps = [s for s in args.predict.split(",") if s]
        bad = [s for s in steps if s not in STEPS]
        if bad:
            p.error(f"--predict must name steps of {STEPS}; got {bad}")
        run_predict(steps, args.write, args.tiny)
        return 0
    if args.step not in STEPS:
        p.error(f"step must be one of {', '.join(STEPS)}; got {args.step!r}")
    if args.trials < 1:
        p.error(f"--trials must be >= 1; got {args.trials}")
    if args.standin:
        args.trials = 1
    return run_step(args, args.step)


if __name__ == "__main__":
    sys.exit(main())
