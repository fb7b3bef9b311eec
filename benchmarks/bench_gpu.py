"""The tile runtime on an NVIDIA GPU, each part against its baseline in the same run.

Usage::

    python benchmarks/bench_gpu.py [--parts incore,routines,hetero,ooc,trace] [--sizes 8192,16384,32768]
                                   [--routine-n 16384] [--ooc-n 65536] [--trials 3] [--out DIR]
    python benchmarks/bench_gpu.py --parts quick [--quick-n 8192]
    python benchmarks/bench_gpu.py --parts dropin [--dropin-sizes 1024,2048,4096,8192,16384] [--budget S]

``quick`` (not among the default parts; ``benchmarks/gpu_suite.sh`` runs it, a minute on an H100): dgemm
n = ``--quick-n`` on host operands through the tile runtime on GPU 0, in core (default tile memory) and out
of core (``GPUDevice(memory=1 << 30)``), against ``cupy.matmul`` on device operands; the recursive
trmm/trsm on device arrays against cuBLAS's own in-place call; every result against its reference.

Parts, in the order they run (most important first):

* ``incore``: dgemm and sgemm on host-resident operands through the tile runtime on one GPU, against one
  cuBLAS call (``cupy.matmul``) on device-resident operands of the same size (BLASX's in-core peak:
  the tile runtime pays the transfers, cuBLAS does not).
* ``routines``: gemm, symm, syrk, syr2k, trmm, trsm in d and z at ``--routine-n``: the tile runtime on
  host operands against the same cuBLAS routine once on device operands (through
  :meth:`tileblas.devices.gpu.GPUDevice.launch`, the kernel call the tiles use).
* ``hetero``: dgemm with the GPU and the host's cores as CPU workers together, against the GPU alone;
  the CPU workers' share of the flops.
* ``ooc``: dgemm on host operands larger than the GPU's memory (``--ooc-n``, shrunk to fit 80 % of host
  memory), against the in-core cuBLAS rate of the ``incore`` part (or measured here at the largest size
  that fits); sampled entries against a host reference.
* ``trace``: the Perfetto trace (JSON) and timeline PNG of one out-of-core call.

* ``dropin`` (not among the default parts; ``benchmarks/gpu_suite.sh`` runs it after ``quick``): the
  drop-in choosing by itself.  ``tileblas.blas.dgemm``/``dsyrk``/``dtrsm``/``zgemm`` at n = ``--dropin-sizes``
  on host operands: its CPU path (``TILEBLAS_DEVICES=cpu``), its GPU path (``gpu``; the first call on the
  operands, which page-locks them, timed apart), and the call as the
  default setting sends it (which side it took), against SciPy on the host and against the same cuBLAS
  routine once on device-resident operands (through :meth:`~tileblas.devices.gpu.GPUDevice.launch`); the
  crossover the policy reports (``tileblas info``) beside the one measured, and per call whether the side
  taken was the faster one.  Host sides are timed only where they are predicted to take at most
  ``--dropin-cpu-cap`` seconds a run; sizes go in increasing order, all routines at one size before the
  next, and stop cleanly when ``--budget`` (seconds since the start) runs out.  ``--standin``: the same
  flow on the CuPy stand-in of tests/_cupy_standin.py named as an H100 (no GPU; the figures are not a
  GPU's).

Every timing is the best of ``--trials`` after one warm-up call; the GPU is synchronised before the
clock stops.  Results go to ``<out>/bench_gpu.json`` (written after each part) and the trace files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any, Callable

import numpy as np

PARTS = ("incore", "routines", "hetero", "ooc", "trace", "quick", "dropin")
DEFAULT_PARTS = PARTS[:-2]


def _cp() -> Any:
    import cupy

    return cupy


def _sync() -> None:
    _cp().cuda.runtime.deviceSynchronize()


def _free_gpu() -> None:
    cp = _cp()
    _sync()
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


def _best(call: Callable[[], Any], trials: int, wait: Callable[[], Any] | None = None) -> float:
    """Best wall time of ``trials`` calls of ``call`` after one untimed warm-up, ``wait`` (default: the
    device's work done) inside each timed call."""
    wait = _sync if wait is None else wait
    call()
    wait()
    best = float("inf")
    for _ in range(trials):
        t0 = time.perf_counter()
        call()
        wait()
        best = min(best, time.perf_counter() - t0)
    return best


def _host(n: int, m: int, dt: Any, seed: int) -> np.ndarray:
    """An n x m Fortran-ordered random host matrix, filled a block of columns at a time."""
    rng = np.random.default_rng(seed)
    x = np.empty((n, m), dtype=dt, order="F")
    step = max(1, (1 << 27) // max(n, 1))
    for j in range(0, m, step):
        blk = rng.standard_normal((n, min(step, m - j)), dtype=np.float64)
        if np.dtype(dt).kind == "c":
            blk = blk + 1j * rng.standard_normal(blk.shape)
        x[:, j:j + step] = blk
    return x


def _sample_error(a: np.ndarray, b: np.ndarray, c: np.ndarray, samples: int = 64, seed: int = 1) -> float:
    """Largest relative error of sampled entries of c = a @ b against a float64/complex128 host dot."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(samples):
        i, j = int(rng.integers(c.shape[0])), int(rng.integers(c.shape[1]))
        ref = np.dot(a[i, :].astype(np.complex128 if a.dtype.kind == "c" else np.float64),
                     b[:, j].astype(np.complex128 if b.dtype.kind == "c" else np.float64))
        scale = float(np.abs(a[i, :]).astype(np.float64) @ np.abs(b[:, j]).astype(np.float64)) or 1.0
        worst = max(worst, abs(complex(c[i, j]) - complex(ref)) / scale)
    return worst


def _gpu_runtime(extra: str = "", timeline: bool = False) -> Any:
    """A Runtime on GPU 0 (and the devices of spec ``extra``); without timing events unless ``timeline``
    (three CUDA events per copy and kernel: kept for the traced call only)."""
    import tileblas
    from tileblas.devices.gpu import GPUDevice

    devs: list = [GPUDevice(0, timeline=timeline)]
    if extra:
        from tileblas.runtime import make_devices

        devs += make_devices(extra)
    return tileblas.Runtime(devs), devs[0]


def _registrations(grt: Any) -> dict[str, int]:
    """The host registry's counts: operands page-locked in place, let go, refused (none without GPUs)."""
    from tileblas.devices import _hostmem

    return dict(_hostmem.REGISTRY.counts) if grt is not None else {}


def _side_stats(before: dict, after: dict, reg_before: dict, reg_after: dict, calls: int) -> dict[str, Any]:
    """What the GPU side's runtime did over ``calls`` calls: per device, the share of the flops and the
    busy and overhead seconds per call; the host registrations per call."""
    devs = {}
    total = 0.0
    for name, t in after.get("devices", {}).items():
        b = before.get("devices", {}).get(name, {})
        d = {k: (t.get(k, 0) - b.get(k, 0)) for k in ("flops", "tasks", "busy_s", "overhead_s") if k in t}
        devs[name] = d
        total += d.get("flops", 0.0)
    share = {name: round(d.get("flops", 0.0) / total, 4) for name, d in devs.items() if total and d.get("flops")}
    per_call = {name: {k: v / calls for k, v in d.items() if k in ("tasks", "busy_s", "overhead_s")}
                for name, d in devs.items() if d.get("tasks")}
    regs = {k: (reg_after.get(k, 0) - reg_before.get(k, 0)) / calls for k in reg_after}
    return {"flop_share": share, "per_call": per_call, "registrations_per_call": regs}


def _side_text(side: dict) -> str:
    share = ", ".join(f"{k} {v:.0%}" for k, v in sorted(side["flop_share"].items(), key=lambda kv: -kv[1])[:3])
    regs = side["registrations_per_call"].get("registered")
    last = side.get("last_call")
    inner = (f", the runtime's own {last['wall_s'] * 1e3:.1f} ms of the last call ({last['path']}, "
             f"{last['tasks']} task(s), tile {last['tile_size']})") if last else ""
    return f"flops {share or '-'}" + (f", {regs:.1f} registrations a call" if regs is not None else "") + inner


def _best_fresh(call: Callable[[Any], Any], make: Callable[[], Any], trials: int) -> float:
    """Like :func:`_best` for a call that works in place: ``make()`` (untimed) gives each run its operand."""
    call(make())
    _sync()
    best = float("inf")
    for _ in range(trials):
        x = make()
        _sync()
        t0 = time.perf_counter()
        call(x)
        _sync()
        best = min(best, time.perf_counter() - t0)
    return best


def part_quick(args: argparse.Namespace, res: dict) -> None:
    import tileblas
    from tileblas.devices.gpu import GPUDevice
    from tileblas.kernels._gpu_recursive import cublas_native, gpu_recursive

    cp = _cp()
    n = args.quick_n
    a, b = _host(n, n, np.float64, 1), _host(n, n, np.float64, 2)
    ad, bd = cp.asfortranarray(cp.asarray(a)), cp.asfortranarray(cp.asarray(b))
    cd = cp.empty((n, n), dtype=np.float64, order="F")
    t_mm = _best(lambda: cp.matmul(ad, bd, out=cd), args.trials)
    ref = cp.asnumpy(cd)
    ad = bd = cd = None
    _free_gpu()
    scale = float(np.abs(ref).max()) or 1.0
    fl = 2.0 * n ** 3
    rows = []
    for label, memory in (("incore", None), ("ooc_1GiB", 1 << 30)):
        gpu = GPUDevice(0, memory=memory, timeline=False)
        rt = tileblas.Runtime([gpu])
        c = np.zeros((n, n), order="F")
        try:
            t = _best(lambda: rt.run("gemm", 1.0, a, b, 0.0, c), args.trials)
            prof = rt.last_profile()
        finally:
            rt.shutdown()
            gpu.close()
            _free_gpu()
        row = {"what": label, "n": n, "memory": gpu.memory_bytes, "cupy_matmul_s": t_mm, "tiles_s": t,
               "ratio": t_mm / t, "tiles_tflops": fl / t / 1e12, "cupy_tflops": fl / t_mm / 1e12,
               "tile": prof.tile_size, "bytes_moved": sum(d.bytes_moved for d in prof.devices),
               "max_rel_error": float(np.abs(c - ref).max()) / scale}
        rows.append(row)
        print(f"  dgemm n={n} {label}: tiles {row['tiles_tflops']:.1f} TF/s, cupy.matmul {row['cupy_tflops']:.1f} "
              f"TF/s -> {row['ratio']:.3f}x (tile {row['tile']}, {row['bytes_moved'] / 2**30:.1f} GiB moved, "
              f"error {row['max_rel_error']:.1e})", flush=True)
    res["quick_gemm"] = rows
    del ref, c
    t_h = np.tril(_host(n, n, np.float64, 3)) / n
    t_h[np.diag_indices(n)] += 2.0
    A = cp.asfortranarray(cp.asarray(t_h))
    del t_h
    B = cp.asfortranarray(cp.asarray(b))
    Z = cp.tril(A)
    tri = []
    for kind in ("trmm", "trsm"):
        def run(h: Any, M: Any, kind: str = kind) -> None:
            h(kind, 1.0, A, M, "L", "L", "N", "N")

        X, Y = B.copy(order="F"), B.copy(order="F")
        run(gpu_recursive, X)
        run(cublas_native, Y)
        _sync()
        scale = float(cp.abs(Y).max()) or 1.0
        row = {"kind": kind, "n": n, "diff_vs_cublas": float(cp.abs(X - Y).max()) / scale,
               "residual": float(cp.abs(Z @ B - Y if kind == "trmm" else Z @ Y - B).max()) / float(cp.abs(B).max()),
               "recursive_s": _best_fresh(lambda M: run(gpu_recursive, M), lambda: B.copy(order="F"), args.trials),
               "cublas_s": _best_fresh(lambda M: run(cublas_native, M), lambda: B.copy(order="F"), args.trials)}
        row["speedup"] = row["cublas_s"] / row["recursive_s"]
        X = Y = None
        tri.append(row)
        print(f"  {kind} n={n} (side L, lower, N): recursive {row['recursive_s'] * 1e3:.1f} ms, cuBLAS "
              f"{row['cublas_s'] * 1e3:.1f} ms -> {row['speedup']:.2f}x; vs cuBLAS {row['diff_vs_cublas']:.1e}, "
              f"residual {row['residual']:.1e}", flush=True)
    res["quick_trmm_trsm"] = tri
    A = B = Z = None
    _free_gpu()


def part_incore(args: argparse.Namespace, res: dict) -> None:
    cp = _cp()
    rows = []
    for dt in (np.float64, np.float32):
        for n in args.sizes:
            need = 3 * n * n * np.dtype(dt).itemsize
            free, _ = cp.cuda.runtime.memGetInfo()
            if need > 0.9 * free:
                print(f"  incore {np.dtype(dt).name} n={n}: skipped ({need / 2**30:.1f} GiB > 90% of free)")
                continue
            a, b = _host(n, n, dt, 1), _host(n, n, dt, 2)
            ad, bd = cp.asfortranarray(cp.asarray(a)), cp.asfortranarray(cp.asarray(b))
            cd = cp.empty((n, n), dtype=dt, order="F")
            t_cublas = _best(lambda: cp.matmul(ad, bd, out=cd), args.trials)
            ad = bd = cd = None  # give the device operands back before the runtime takes its memory
            _free_gpu()
            c = np.zeros((n, n), dtype=dt, order="F")
            rt, gpu = _gpu_runtime()
            try:
                t_tiles = _best(lambda: rt.run("gemm", 1.0, a, b, 0.0, c), args.trials)
                prof = rt.last_profile()
            finally:
                rt.shutdown()
                gpu.close()
            _free_gpu()
            err = _sample_error(a, b, c)
            fl = 2.0 * n ** 3
            row = {"dtype": np.dtype(dt).name, "n": n, "cublas_s": t_cublas, "tiles_s": t_tiles,
                   "ratio": t_cublas / t_tiles, "cublas_tflops": fl / t_cublas / 1e12,
                   "tiles_tflops": fl / t_tiles / 1e12, "max_rel_error": err, "tile": prof.tile_size,
                   "bytes_moved": sum(d.bytes_moved for d in prof.devices)}
            rows.append(row)
            print(f"  incore {row['dtype']} n={n}: cuBLAS {row['cublas_tflops']:.1f} TF/s, tiles "
                  f"{row['tiles_tflops']:.1f} TF/s -> {row['ratio']:.3f}x (tile {prof.tile_size}, error {err:.1e})")
    res["incore"] = rows


_ROUTINES = ("gemm", "symm", "syrk", "syr2k", "trmm", "trsm")


def _operands(name: str, n: int, dt: Any) -> tuple[list, dict]:
    a, b, c = _host(n, n, dt, 3), _host(n, n, dt, 4), _host(n, n, dt, 5)
    if name in ("trmm", "trsm"):
        a = np.asfortranarray(np.tril(a) / n ** 0.5 + 2.0 * np.eye(n, dtype=dt))  # a Python float keeps dt
        return [1.0, a, b], {"side": "L", "uplo": "L", "transa": "N", "diag": "N"}
    if name == "symm":
        return [1.0, a, b, 0.5, c], {"side": "L", "uplo": "L"}
    if name == "syrk":
        return [1.0, a, 0.5, c], {"uplo": "L", "trans": "N"}
    if name == "syr2k":
        return [1.0, a, b, 0.5, c], {"uplo": "L", "trans": "N"}
    return [1.0, a, b, 0.5, c], {}


def part_routines(args: argparse.Namespace, res: dict) -> None:
    from tileblas.devices.gpu import GPUDevice
    from tileblas.runtime._planner import flop_count

    cp = _cp()
    rows = []
    n = args.routine_n
    for dt in (np.float64, np.complex128):
        for name in _ROUTINES:
            args_h, kw = _operands(name, n, dt)
            out = len(args_h) - 1
            fl = flop_count(name, n, n, n) * (4.0 if np.dtype(dt).kind == "c" else 1.0)
            # baseline: the same cuBLAS routine once, on device operands
            dev = GPUDevice(0, memory=64 << 20, streams=1)
            try:
                # operands made, and the output restored, on the stream the kernel runs on (CuPy's default
                # stream is CUDA's legacy null stream, which the device's non-blocking stream does not wait for)
                with dev.on_stream(0):
                    args_d = [cp.asfortranarray(cp.asarray(x)) if isinstance(x, np.ndarray) else x for x in args_h]
                    keep = args_d[out].copy(order="F")

                def cublas_call() -> None:
                    with dev.on_stream(0):
                        args_d[out][...] = keep  # restore the output (in place routines), counted in both
                    dev.launch(name, args_d, kw, 0)
                    dev.sync(0)

                t_cublas = _best(cublas_call, args.trials)
            finally:
                args_d = keep = None
                dev.close()
            _free_gpu()
            keep_h = args_h[out].copy(order="F")
            rt, gpu = _gpu_runtime()
            try:
                def tiles_call() -> None:
                    np.copyto(args_h[out], keep_h)
                    rt.run(name, *args_h, **kw)

                t_tiles = _best(tiles_call, args.trials)
            finally:
                rt.shutdown()
                gpu.close()
            _free_gpu()
            row = {"routine": ("d" if dt == np.float64 else "z") + name, "n": n, "cublas_s": t_cublas,
                   "tiles_s": t_tiles, "ratio": t_cublas / t_tiles, "cublas_tflops": fl / t_cublas / 1e12}
            rows.append(row)
            print(f"  {row['routine']} n={n}: cuBLAS {t_cublas:.3f} s, tiles {t_tiles:.3f} s -> {row['ratio']:.3f}x")
            res["routines"] = rows


def part_hetero(args: argparse.Namespace, res: dict) -> None:
    n = args.routine_n
    a, b = _host(n, n, np.float64, 6), _host(n, n, np.float64, 7)
    c = np.zeros((n, n), order="F")
    cpus = max(1, (os.cpu_count() or 2) - 2)  # leave cores to the GPU's driver threads
    out = {}
    for label, extra in (("gpu", ""), ("gpu+cpu", f"cpu:{cpus}")):
        rt, gpu = _gpu_runtime(extra)
        try:
            out[label] = _best(lambda: rt.run("gemm", 1.0, a, b, 0.0, c), args.trials)
            prof = rt.last_profile()
            share = {d.name: d.flops for d in prof.devices}
        finally:
            rt.shutdown()
            gpu.close()
        _free_gpu()
        out[label + "_flops_by_device"] = share
    total = sum(out["gpu+cpu_flops_by_device"].values()) or 1.0
    cpu_share = sum(v for k, v in out["gpu+cpu_flops_by_device"].items() if not k.startswith("gpu")) / total
    res["hetero"] = {"n": n, "cpu_workers": cpus, "gpu_s": out["gpu"], "gpu_cpu_s": out["gpu+cpu"],
                     "ratio": out["gpu"] / out["gpu+cpu"], "cpu_flop_share": cpu_share}
    print(f"  hetero dgemm n={n}: GPU alone {out['gpu']:.3f} s, GPU + {cpus} CPU workers {out['gpu+cpu']:.3f} s "
          f"-> {res['hetero']['ratio']:.3f}x, CPU share {cpu_share:.1%}")


_DROPIN = (("dgemm", np.float64), ("dsyrk", np.float64), ("dtrsm", np.float64), ("zgemm", np.complex128))


def _cheap(n: int, dt: Any, seed: int) -> np.ndarray:
    """An n x n Fortran-ordered host matrix u_i + v_j (+ i w_j): filled at memory speed, in place (the
    random fill of :func:`_host` takes seconds a GiB; timings do not depend on the values)."""
    rng = np.random.default_rng(seed)
    x = np.empty((n, n), dtype=dt, order="F")
    v = rng.random(n) + (1j * rng.random(n) if np.dtype(dt).kind == "c" else 0.0)
    np.add(rng.random(n)[:, None], v[None, :], out=x)
    return x


def _dropin_operands(routine: str, n: int, dt: Any) -> tuple[list, dict, Callable[[Any], float]]:
    """The drop-in call's arguments and keywords, and a check of its result: the largest error of sampled
    entries of C (gemm: against |A||B| of those entries; syrk: against n max|A|^2) or of sampled residual
    columns T x - b (trsm: against n max|T| max|x|)."""
    a = _cheap(n, dt, 11)
    rng = np.random.default_rng(12)
    cols = rng.integers(0, n, 8)
    wide = np.complex128 if np.dtype(dt).kind == "c" else np.float64
    if routine.endswith("gemm"):
        b = _cheap(n, dt, 13)

        def check(out: Any, _a: Any = a, _b: Any = b) -> float:
            return _sample_error(_a, _b, out)

        return [1.0, a, b], {}, check
    if routine == "dsyrk":
        def check(out: Any, _a: Any = a) -> float:
            ref = _a @ _a[cols, :].T.astype(wide)  # columns cols of a a^T
            low = np.arange(n)[:, None] >= cols[None, :]  # the lower triangle the call wrote
            return float((np.abs(out[:, cols] - ref) * low).max() / (n * float(np.abs(_a).max()) ** 2))

        return [1.0, a], {"lower": 1}, check
    t = np.asfortranarray(np.tril(a) / n)
    t[np.diag_indices(n)] += 2.0
    b = _cheap(n, dt, 14)

    def check(out: Any, _t: Any = t, _b: Any = b) -> float:
        x = out[:, cols].astype(wide)
        return float(np.abs(_t @ x - _b[:, cols]).max() / (n * float(np.abs(_t).max()) * float(np.abs(x).max())))

    return [1.0, t, b], {"lower": 1}, check


def _scipy(routine: str) -> Callable[..., Any]:
    from scipy.linalg import blas as sb

    return getattr(sb, routine)


def part_dropin(args: argparse.Namespace, res: dict) -> None:
    import tileblas.blas as tb
    from tileblas._timing import interleaved
    from tileblas.blas import _dispatch
    from tileblas.devices.gpu import GPUDevice
    from tileblas.runtime._planner import flop_count

    cp = _cp()
    left = (lambda: args.t0 + args.budget - time.perf_counter()) if args.budget else (lambda: float("inf"))
    out: dict[str, Any] = {"sizes": args.dropin_sizes, "cpu_cap_s": args.dropin_cpu_cap, "rows": [], "skipped": []}
    res["dropin"] = out

    def flops(routine: str, n: int) -> float:
        return flop_count(routine[1:], n, n, n) * (4.0 if routine[0] in "cz" else 1.0)

    # 1. cuBLAS once on device-resident operands, before the drop-in's GPUs take their tile memory
    resident: dict[tuple, float] = {}
    stop = left() * 0.65  # this phase takes at most about a third of the time left, the drop-in the rest
    dev = GPUDevice(0, memory=64 << 20, streams=1, timeline=False)
    try:
        for n in args.dropin_sizes:
            for routine, dt in _DROPIN:
                if left() < max(20.0, stop):
                    out["skipped"].append(f"cuBLAS {routine} n={n}: budget")
                    continue
                host, kw, _ = _dropin_operands(routine, n, dt)
                name = routine[1:]
                with dev.on_stream(0):
                    d = [cp.asfortranarray(cp.asarray(x)) if isinstance(x, np.ndarray) else x for x in host]
                    if name == "gemm":
                        d += [0.0, cp.empty((n, n), dtype=dt, order="F")]
                    elif name == "syrk":
                        d += [0.0, cp.empty((n, n), dtype=dt, order="F")]
                    keep = d[2].copy(order="F") if name == "trsm" else None
                kwd = {"uplo": "L", "trans": "N"} if name == "syrk" else \
                    ({"side": "L", "uplo": "L", "transa": "N", "diag": "N"} if name == "trsm" else {})

                def call(d: list = d, keep: Any = keep, name: str = name, kwd: dict = kwd) -> None:
                    if keep is not None:
                        with dev.on_stream(0):
                            d[2][...] = keep  # trsm works in place: restore b (counted in every run)
                    dev.launch(name, d, kwd, 0)
                    dev.sync(0)

                resident[(routine, n)] = _best(call, args.trials)
                d = keep = None
                _free_gpu()
    finally:
        dev.close()
        _free_gpu()
    # 2. the drop-in: its CPU path, its GPU path, the default choice; SciPy on the host
    _dispatch.set_devices("auto")
    rep = _dispatch.gpu_report()
    out["policy"] = {"setting": rep["setting"], "note": rep["note"], "gpus": rep["gpus"], "min_flops": rep["min_flops"],
                     "margin": rep["margin"], "crossover": {r: rep["crossover"].get(r) for r, _ in _DROPIN},
                     "call_cost": rep.get("call_cost"), "cpu_rates": rep.get("cpu_rates"),
                     "core_flops": rep.get("core_flops"), "figures": rep.get("figures")}
    fig = rep.get("figures") or {}
    print(f"  the GPUs' figures: {len(fig.get('read', []))} read from {fig.get('file')}, "
          f"{len(fig.get('stored', []))} measured here" + (f" ({fig['note']})" if fig.get("note") else ""), flush=True)
    print(f"  policy: {rep['note']}; crossover (square n) "
          + ", ".join(f"{r} {rep['crossover'].get(r)}" for r, _ in _DROPIN), flush=True)
    grt = _dispatch.gpu_runtime(search=False)
    from tileblas.runtime._runtime import get_runtime

    host_rt = get_runtime()
    host_threads = _dispatch._threads(host_rt) or 1
    rate: dict[str, float] = {}  # the host's best measured flop/s per routine so far (to predict the next size)
    spent: dict[str, tuple[int, float]] = {}  # per routine: (n, wall seconds of its whole case) last measured
    try:
        for n in args.dropin_sizes:
            for routine, dt in _DROPIN:
                last = spent.get(routine)
                case_pred = 0.0 if last is None else last[1] * (n / last[0]) ** 3  # the case at the last size
                if left() < 15 + case_pred:
                    out["skipped"].append(f"drop-in {routine} n={n}: budget (case predicted {case_pred:.0f} s)")
                    continue
                t_case = time.perf_counter()
                fl = flops(routine, n)
                host, kw, check = _dropin_operands(routine, n, dt)
                fn = getattr(tb, routine)
                row: dict[str, Any] = {"routine": routine, "n": n, "flops": fl,
                                       "cublas_resident_s": resident.get((routine, n))}
                cpu_pred = fl / rate.get(routine, 5e10 * (os.cpu_count() or 1))
                row["cpu_predicted_s"] = cpu_pred  # this benchmark's budget, not the policy's
                if grt is not None:  # the policy's own predictions for the call (its choice compares them)
                    row["policy_gpu_s"], row["policy_cpu_s"] = _dispatch.gpu_costs(
                        routine[1:], (n, n, n), np.dtype(dt), host_rt.devices[0], host_threads, grt)
                if cpu_pred <= args.dropin_cpu_cap and left() > 15 + 6 * cpu_pred:
                    sp = _scipy(routine)
                    _dispatch.set_devices("cpu")
                    # SciPy and the CPU path alternate, each after a quiet gap: OpenBLAS's threads spin for
                    # a while after a call (about 0.1 s) and would take the other library's cores
                    both = interleaved({"scipy": lambda: sp(*host, **kw), "cpu": lambda: fn(*host, **kw)},
                                       args.trials, settle=0.3, prime=1).best
                    row["scipy_s"], row["cpu_s"] = both["scipy"], both["cpu"]
                    rate[routine] = max(rate.get(routine, 0.0), fl / min(row["scipy_s"], row["cpu_s"]))
                _dispatch.set_devices("gpu")
                before = grt.stats() if grt is not None else {"calls": 0, "devices": {}}
                reg_before = _registrations(grt)
                t0 = time.perf_counter()
                fn(*host, **kw)  # the first call on these operands: page-locking them included
                _sync()
                row["gpu_first_s"] = time.perf_counter() - t0
                row["gpu_s"] = _best(lambda: fn(*host, **kw), args.trials)
                after = grt.stats() if grt is not None else {"calls": 0, "devices": {}}
                on_gpu = after["calls"] > before["calls"]
                row["gpu_side"] = _side_stats(before, after, reg_before, _registrations(grt), args.trials + 2)
                prof = grt.last_profile() if on_gpu else None  # the last timed call, as the runtime saw it
                row["gpu_side"]["last_call"] = prof.to_dict() if prof is not None else None
                row["gpu_error"] = check(fn(*host, **kw)) if on_gpu else None
                if not on_gpu:
                    row["gpu_s"] = row["gpu_first_s"] = None  # below the floor: the GPU path is the CPU path
                _dispatch.set_devices("auto")
                before = grt.stats()["calls"] if grt is not None else 0
                got = fn(*host, **kw)
                row["chosen"] = "gpu" if grt is not None and grt.stats()["calls"] > before else "cpu"
                row["error"] = check(got)
                sides = {k: row.get(k) for k in ("cpu_s", "gpu_s") if row.get(k) is not None}
                if len(sides) == 2:
                    row["faster"] = "gpu" if sides["gpu_s"] < sides["cpu_s"] else "cpu"
                elif row["gpu_s"] is not None and row["gpu_s"] < cpu_pred:
                    row["faster"] = "gpu"  # the CPU path not timed: predicted slower than the GPU's time
                else:
                    row["faster"] = None
                row["right"] = None if row["faster"] is None else row["chosen"] == row["faster"]
                chosen_s = row.get("gpu_s") if row["chosen"] == "gpu" else row.get("cpu_s")
                row["chosen_vs_scipy"] = (row["scipy_s"] / chosen_s) if row.get("scipy_s") and chosen_s else None
                out["rows"].append(row)
                spent[routine] = (n, time.perf_counter() - t_case)

                def ms(x: Any) -> str:
                    return "-" if x is None else f"{x * 1e3:.1f} ms"

                print(f"  {routine} n={n}: SciPy {ms(row.get('scipy_s'))}, CPU path {ms(row.get('cpu_s'))}, "
                      f"GPU path {ms(row['gpu_s'])} (first call {ms(row['gpu_first_s'])}), cuBLAS resident "
                      f"{ms(row['cublas_resident_s'])}; chose "
                      f"{row['chosen']} ({'right' if row['right'] else 'WRONG' if row['right'] is False else '?'}"
                      + (f", {row['chosen_vs_scipy']:.2f}x SciPy" if row["chosen_vs_scipy"] else "")
                      + f"), error {row['error']:.1e}; policy's prediction GPU {ms(row.get('policy_gpu_s'))}, "
                      f"CPU {ms(row.get('policy_cpu_s'))}; GPU side: {_side_text(row['gpu_side'])}", flush=True)
                host = None
        if grt is not None and left() > 5:
            # the search's fit timed again, now that every case has run: is what it measured at the search
            # (the policy's call_cost above) what the same calls take later in the process?
            again = _dispatch.call_cost_dict(_dispatch._call_cost(grt))
            out["call_cost_again"] = again
            print("  the search's per-call cost timed again after the cases: "
                  + ", ".join(f"order {int(n)} {b * 1e3:.1f} ms (model {p * 1e3:.1f} ms)" for n, b, p in again["timed"])
                  + "; at the search: " + ", ".join(f"order {int(n)} {b * 1e3:.1f} ms" for n, b, _ in
                                                      (out["policy"].get("call_cost") or {}).get("timed", [])),
                  flush=True)
    finally:
        _dispatch.set_devices(None)
        _dispatch.release_gpus()
        _free_gpu()
    measured = {}
    for routine, _ in _DROPIN:
        rows = [r for r in out["rows"] if r["routine"] == routine and r["faster"] is not None]
        first = None
        for r in sorted(rows, key=lambda r: -r["n"]):  # the smallest n from which the GPU is faster at every size
            if r["faster"] != "gpu":
                break
            first = r["n"]
        measured[routine] = first
    out["measured_crossover"] = measured
    out["wrong_choices"] = [f"{r['routine']} n={r['n']}" for r in out["rows"] if r["right"] is False]
    print(f"  measured crossover (first size measured from which the GPU path is faster): {measured}; "
          f"wrong choices: {out['wrong_choices'] or 'none'}", flush=True)


def _host_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def part_ooc(args: argparse.Namespace, res: dict, trace_dir: str | None = None) -> None:
    cp = _cp()
    n = args.ooc_n
    while 3 * n * n * 8 > 0.8 * _host_bytes():
        n -= 4096
    _, total = cp.cuda.runtime.memGetInfo()
    print(f"  ooc: n={n}, operands {3 * n * n * 8 / 2**30:.0f} GiB on the host, GPU memory {total / 2**30:.0f} GiB")
    incore = [r for r in res.get("incore", []) if r["dtype"] == "float64"]
    if incore:
        ref = max(incore, key=lambda r: r["n"])
        rate, ref_n = ref["cublas_tflops"], ref["n"]
    else:
        ref_n = 16384
        ad = cp.asfortranarray(cp.asarray(_host(ref_n, ref_n, np.float64, 8)))
        cd = cp.empty_like(ad, order="F")
        rate = 2.0 * ref_n ** 3 / _best(lambda: cp.matmul(ad, ad, out=cd), args.trials) / 1e12
        ad = cd = None
        _free_gpu()
    a, b = _host(n, n, np.float64, 9), _host(n, n, np.float64, 10)
    c = np.zeros((n, n), order="F")
    rt, gpu = _gpu_runtime(timeline=trace_dir is not None)
    try:
        t0 = time.perf_counter()
        rt.run("gemm", 1.0, a, b, 0.0, c)
        t = time.perf_counter() - t0
        prof = rt.last_profile()
        if trace_dir is not None:
            rt.trace(os.path.join(trace_dir, "gpu_ooc_trace.json"), last=1)
            try:
                rt.plot(os.path.join(trace_dir, "gpu_ooc_timeline.png"), last=1,
                        title=f"dgemm n={n}, host operands, one GPU")
            except ImportError:
                pass
    finally:
        rt.shutdown()
        gpu.close()
    _free_gpu()
    err = _sample_error(a, b, c)
    tf = 2.0 * n ** 3 / t / 1e12
    res["ooc"] = {"n": n, "seconds": t, "tflops": tf, "incore_cublas_tflops": rate, "incore_n": ref_n,
                  "ratio": tf / rate, "max_rel_error": err, "tile": prof.tile_size,
                  "bytes_moved": sum(d.bytes_moved for d in prof.devices),
                  "gpu_memory_bytes": total, "timeline": trace_dir is not None}
    print(f"  ooc dgemm n={n}: {t:.1f} s, {tf:.1f} TF/s = {tf / rate:.3f}x of in-core cuBLAS ({rate:.1f} TF/s "
          f"at n={ref_n}); sampled error {err:.1e}")


def _install_standin() -> Any:
    """The CuPy stand-in of tests/_cupy_standin.py in sys.modules, one device named as an H100."""
    import importlib.machinery

    import pytest

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from _cupy_standin import install

    mp = pytest.MonkeyPatch()
    sim = install(mp, devices=1, total=1 << 30)
    props = sim.cp.cuda.runtime.getDeviceProperties
    mp.setattr(sim.cp.cuda.runtime, "getDeviceProperties", lambda i: {**props(i), "name": b"NVIDIA H100 (stand-in)"})
    for name in ("cupy", "cupyx"):  # importlib.util.find_spec("cupy") answers as for an installed CuPy
        sys.modules[name].__spec__ = importlib.machinery.ModuleSpec(name, None)
    return sim


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench_gpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default=",".join(DEFAULT_PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    p.add_argument("--sizes", default="8192,16384,32768", help="incore sizes")
    p.add_argument("--routine-n", type=int, default=16384)
    p.add_argument("--ooc-n", type=int, default=65536)
    p.add_argument("--quick-n", type=int, default=8192)
    p.add_argument("--dropin-sizes", default="1024,2048,4096,8192,16384")
    p.add_argument("--dropin-cpu-cap", type=float, default=1.0, help="time a host side only where a run is "
                   "predicted to take at most this many seconds")
    p.add_argument("--budget", type=float, default=0.0, help="seconds from the start; dropin stops cleanly "
                   "before (0: no limit)")
    p.add_argument("--standin", action="store_true", help="the CuPy stand-in named as an H100 (no GPU)")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-results"))
    args = p.parse_args(argv)
    args.t0 = time.perf_counter()
    args.dropin_sizes = [int(s) for s in args.dropin_sizes.split(",") if s]
    if args.standin:
        _install_standin()
    parts = [s for s in args.parts.split(",") if s]
    bad = [s for s in parts if s not in PARTS]
    if bad:
        p.error(f"--parts must name parts of {PARTS}; got {bad}")
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    os.makedirs(args.out, exist_ok=True)
    import tileblas
    from tileblas.devices.gpu import gpu_info

    path = os.path.join(args.out, "bench_gpu.json")
    res: dict[str, Any] = {"tileblas": tileblas.__version__, "trials": args.trials, "cpu_count": os.cpu_count(),
                           "errors": {}}
    g = gpu_info()
    if not g["available"]:  # no CuPy or no usable GPU: say why, in the results too
        res["errors"]["gpu"] = g["note"]
        print(f"no GPU to measure: {g['note']}", file=sys.stderr)
        with open(path, "w") as fh:
            json.dump(res, fh, indent=1, default=float)
        return 2
    cp = _cp()
    res.update(device=g["devices"][0], cupy=cp.__version__, cublas=g.get("cublas"), standin=bool(args.standin))
    try:
        rt = cp.cuda.runtime
        res.update(cuda_runtime=rt.runtimeGetVersion(), cuda_driver=rt.driverGetVersion())
    except Exception as exc:  # noqa: BLE001 - recorded, not needed
        res["cuda_versions"] = f"not read: {exc}"
    for part in parts:
        print(f"== {part}", flush=True)
        t0 = time.perf_counter()
        try:
            if part == "incore":
                part_incore(args, res)
            elif part == "routines":
                part_routines(args, res)
            elif part == "hetero":
                part_hetero(args, res)
            elif part == "ooc":
                part_ooc(args, res, args.out if "trace" in parts else None)
            elif part == "trace" and "ooc" not in parts:
                part_ooc(args, res, args.out)
            elif part == "quick":
                part_quick(args, res)
            elif part == "dropin":
                part_dropin(args, res)
        except Exception:  # noqa: BLE001 - one part's failure is reported and the others still run
            res["errors"][part] = traceback.format_exc()
            print(res["errors"][part], file=sys.stderr)
            _free_gpu()
        res.setdefault("seconds", {})[part] = time.perf_counter() - t0
        with open(path, "w") as fh:
            json.dump(res, fh, indent=1, default=float)
    print(f"wrote {path}")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
