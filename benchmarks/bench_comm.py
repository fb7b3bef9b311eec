"""Communication of the tile caches against on-demand transfers, and copy/compute overlap with streams.

Two parts, each on simulated discrete devices (tileblas.devices.SimDevice):

``volume``
    Total communication volume (host->device + device->host + device->device bytes, all devices) of the
    caching runtime (ALRU L1 caches, L2 peer fetch, MESI-X) against the on-demand policy (every tile moved
    in for each use, like cuBLAS-XT), per routine, and the ratio; optionally also with every device
    capped at a quarter of the call's data.  ``--kernels modeled`` runs the real scheduler and caches but
    moves and computes nothing (kernels hold the device for flops/flop_rate seconds), so n=8192 fits on a
    small machine; ``--kernels real`` computes and checks every result against NumPy/SciPy.
``overlap``
    A modeled link (bandwidth, latency) and real kernels: exposed communication (time a device copies
    while none of its kernels runs) as a share of the call's wall time, with 4 streams and with 1
    stream, interleaved in the same run, best of ``--trials``.

Usage::

    python benchmarks/bench_comm.py volume --n 8192 --tile 512 --kernels modeled
    python benchmarks/bench_comm.py volume --n 2048 --tile 128 --kernels real --cap quarter
    python benchmarks/bench_comm.py overlap --n 2048 --tile 256 --bandwidth 1e9
    python benchmarks/bench_comm.py overlap --n 3072 --tile 512 --bandwidth 1e9 --kernels real

With real kernels every simulated device computes on the host's cores, and so do its "copies" (a real
memcpy, then the rest of the modeled link time asleep); on a machine with fewer cores than devices the
copies and the wake-ups after them wait for a core, which a DMA engine never does.  Tiles large enough
that one kernel outlasts the copies it needs (512 on a 1 GB/s link) keep that from showing as exposed
communication; ``--devices`` sets how many devices share the cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from tileblas.devices import sim_devices
from tileblas.runtime import Runtime

ROUTINES = ("gemm", "symm", "trsm", "trmm", "syr2k", "syrk")


def operands(name: str, n: int, real: bool, rng: np.random.Generator) -> dict:
    """Arrays of one call (np.empty when nothing is computed: the pages are never touched)."""
    def mk(tri: bool = False) -> np.ndarray:
        if not real:
            return np.empty((n, n), order="F")
        x = np.asfortranarray(rng.standard_normal((n, n)))
        if tri:
            x /= n
            x[np.diag_indices(n)] += 2.0
        return x

    if name in ("trsm", "trmm"):
        return {"a": mk(tri=True), "b": mk()}
    if name == "syrk":
        return {"a": mk(), "c": mk()}
    return {"a": mk(), "b": mk(), "c": mk()}


def call(rt: Runtime, name: str, ops: dict, tile: int | None) -> None:
    kw = {"tile_size": tile}
    if name == "gemm":
        rt.gemm(1.0, ops["a"], ops["b"], 0.5, ops["c"], **kw)
    elif name == "symm":
        rt.symm(1.0, ops["a"], ops["b"], 0.5, ops["c"], side="L", uplo="U", **kw)
    elif name == "syrk":
        rt.syrk(1.0, ops["a"], 0.5, ops["c"], uplo="U", trans="N", **kw)
    elif name == "syr2k":
        rt.syr2k(1.0, ops["a"], ops["b"], 0.5, ops["c"], uplo="U", trans="N", **kw)
    else:
        getattr(rt, name)(1.0, ops["a"], ops["b"], side="L", uplo="L", transa="N", diag="N", **kw)


def reference(name: str, ops: dict) -> np.ndarray:
    import scipy.linalg as sl

    a = ops["a"]
    if name == "gemm":
        return a @ ops["b"] + 0.5 * ops["c"]
    if name == "symm":
        s = np.triu(a) + np.triu(a, 1).T
        return s @ ops["b"] + 0.5 * ops["c"]
    if name == "syrk":
        return np.triu(a @ a.T + 0.5 * ops["c"]) + np.tril(ops["c"], -1)
    if name == "syr2k":
        b = ops["b"]
        return np.triu(a @ b.T + b @ a.T + 0.5 * ops["c"]) + np.tril(ops["c"], -1)
    if name == "trmm":
        return np.tril(a) @ ops["b"]
    return sl.solve_triangular(a, ops["b"], lower=True)


def out_of(name: str, ops: dict) -> np.ndarray:
    return ops["b"] if name in ("trsm", "trmm") else ops["c"]


def volume(args: argparse.Namespace) -> dict:
    rng = np.random.default_rng(0)
    real = args.kernels == "real"
    rows = []
    for name in args.routines:
        ops = operands(name, args.n, real, rng)
        data = sum(x.nbytes for x in ops.values())
        ref = reference(name, ops) if real else None
        orig = {k: v.copy(order="F") for k, v in ops.items()} if real else None
        row = {"routine": "d" + name, "n": args.n, "data_MB": data / 1e6}
        configs = [("cache", None), ("on-demand", None)]
        if args.cap == "quarter":
            configs += [("cache", data // 4), ("on-demand", data // 4)]
        for policy, cap in configs:
            if real:
                for k in ops:
                    ops[k][...] = orig[k]
            devs = sim_devices(args.devices, memory=cap if cap else args.memory, streams=args.streams,
                               kernels=args.kernels, flop_rate=args.flop_rate,
                               bandwidth=args.bandwidth, latency=args.latency)
            with Runtime(devs, memory_policy=policy) as rt:
                t0 = time.perf_counter()
                call(rt, name, ops, args.tile)
                wall = time.perf_counter() - t0
                p = rt.last_profile()
                mem = rt.stats()["memory"]
            tag = policy + ("@quarter" if cap else "")
            row[tag] = {
                "MB": sum(d.bytes_moved for d in p.devices) / 1e6,
                "h2d_MB": sum(d.bytes_h2d for d in p.devices) / 1e6,
                "d2h_MB": sum(d.bytes_d2h for d in p.devices) / 1e6,
                "d2d_MB": sum(d.bytes_d2d for d in p.devices) / 1e6,
                "per_device_MB": [round(d.bytes_moved / 1e6, 1) for d in p.devices],
                "l1_hits": sum(d.l1_hits for d in p.devices),
                "l2_hits": sum(d.l2_hits for d in p.devices),
                "evictions": sum(c.get("evictions", 0) for c in mem.values()),
                "tile": p.tile_size,
                "wall_s": wall,
            }
            if real:
                out = out_of(name, ops)
                err = float(np.abs(out - ref).max() / max(1.0, np.abs(ref).max()))
                row[tag]["rel_err"] = err
                row[tag]["correct"] = err < 1e-10
        row["ratio"] = row["on-demand"]["MB"] / row["cache"]["MB"]
        if args.cap == "quarter":
            row["ratio@quarter"] = row["on-demand@quarter"]["MB"] / row["cache@quarter"]["MB"]
        rows.append(row)
        line = (f"d{name:<6} n={args.n} tile={row['cache']['tile']}  cache {row['cache']['MB']:9.1f} MB "
                f"(h2d {row['cache']['h2d_MB']:.0f}, d2h {row['cache']['d2h_MB']:.0f}, "
                f"d2d {row['cache']['d2d_MB']:.0f}; "
                f"L1 {row['cache']['l1_hits']}, L2 {row['cache']['l2_hits']})  on-demand "
                f"{row['on-demand']['MB']:9.1f} MB  ratio {row['ratio']:.2f}")
        if args.cap == "quarter":
            q = row["cache@quarter"]
            line += (f" | quarter cap: cache {q['MB']:.1f} MB, evictions {q['evictions']}, ratio "
                     f"{row['ratio@quarter']:.2f}")
            if real:
                line += f", correct={q['correct'] and row['on-demand@quarter']['correct']}"
        if real:
            line += f" | uncapped correct={row['cache']['correct'] and row['on-demand']['correct']}"
        print(line, flush=True)
    mean = float(np.mean([r["ratio"] for r in rows]))
    tot = sum(r["on-demand"]["MB"] for r in rows) / sum(r["cache"]["MB"] for r in rows)
    print(f"mean ratio on-demand/cache: {mean:.2f} (bar: >= 2.9, i.e. cache <= 1/2.9 of on-demand); "
          f"ratio of summed volumes: {tot:.2f}")
    out = {"rows": rows, "mean_ratio": mean, "summed_ratio": tot}
    if args.cap == "quarter":
        mq = float(np.mean([r["ratio@quarter"] for r in rows]))
        print(f"mean ratio with every device capped at a quarter of the data: {mq:.2f}")
        out["mean_ratio_quarter"] = mq
    return out


def overlap(args: argparse.Namespace) -> dict:
    rng = np.random.default_rng(1)
    results = {}
    for name in args.routines:
        ops = operands(name, args.n, args.kernels == "real", rng)
        orig = {k: v.copy(order="F") for k, v in ops.items()}
        best: dict[int, dict] = {}
        runtimes = {s: Runtime(sim_devices(args.devices, streams=s, bandwidth=args.bandwidth, latency=args.latency,
                                           memory=args.memory, kernels=args.kernels, flop_rate=args.flop_rate))
                    for s in (4, 1)}
        try:
            for trial in range(args.trials):
                for s in ((4, 1) if trial % 2 == 0 else (1, 4)):  # interleaved
                    for k in ops:
                        ops[k][...] = orig[k]
                    rt = runtimes[s]
                    call(rt, name, ops, args.tile)
                    p = rt.last_profile()
                    fr = [d.comm_s / p.wall_s for d in p.devices]
                    res = {"wall_s": p.wall_s, "exposed_max": max(fr), "exposed_mean": float(np.mean(fr)),
                           "compute_mean": float(np.mean([d.compute_s / p.wall_s for d in p.devices])),
                           "MB": sum(d.bytes_moved for d in p.devices) / 1e6, "tile": p.tile_size}
                    if s not in best or res["wall_s"] < best[s]["wall_s"]:
                        best[s] = res
        finally:
            for rt in runtimes.values():
                rt.shutdown()
        results[name] = best
        b4, b1 = best[4], best[1]
        print(f"d{name:<6} n={args.n} tile={b4['tile']} {args.devices} devices ({args.kernels} kernels) "
              f"link {args.bandwidth / 1e9:.2f} GB/s: "
              f"4 streams wall {b4['wall_s'] * 1e3:7.1f} ms, exposed comm {100 * b4['exposed_mean']:5.1f}% "
              f"(max device {100 * b4['exposed_max']:5.1f}%), compute {100 * b4['compute_mean']:4.1f}% | "
              f"1 stream wall {b1['wall_s'] * 1e3:7.1f} ms, "
              f"exposed comm {100 * b1['exposed_mean']:5.1f}% (max {100 * b1['exposed_max']:5.1f}%), "
              f"compute {100 * b1['compute_mean']:4.1f}% | "
              f"speed-up {b1['wall_s'] / b4['wall_s']:.2f}x", flush=True)
    for s in (4, 1):
        worst = max(results[r][s]["exposed_max"] for r in results)
        mean = float(np.mean([results[r][s]["exposed_mean"] for r in results]))
        print(f"{s} stream{'s' if s > 1 else ''}: exposed communication mean {100 * mean:.1f}% of wall time, "
              f"worst device {100 * worst:.1f}%" + (" (bar: <= 10% with 4 streams)" if s == 4 else ""))
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=["volume", "overlap"])
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--tile", type=int, default=None, help="tile size (default: the runtime's choice)")
    ap.add_argument("--routines", default=",".join(ROUTINES))
    ap.add_argument("--kernels", choices=["modeled", "real"], default="modeled")
    ap.add_argument("--flop-rate", type=float, default=1e12, help="modeled kernels: flop/s per device")
    ap.add_argument("--bandwidth", type=float, default=None, help="modeled link, bytes/s")
    ap.add_argument("--latency", type=float, default=1e-5, help="modeled per-copy latency, s")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--devices", type=int, default=3, help="number of simulated devices")
    ap.add_argument("--memory", type=int, default=8 << 30, help="device memory when not capped, bytes")
    ap.add_argument("--cap", choices=["none", "quarter"], default="none")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    args.routines = [r.strip() for r in args.routines.split(",") if r.strip()]
    for r in args.routines:
        if r not in ROUTINES:
            ap.error(f"--routines: unknown routine {r!r}; choose from {', '.join(ROUTINES)}")
    if args.part == "overlap" and args.bandwidth is None:
        args.bandwidth = 1e9
    if args.part == "overlap" and "--kernels" not in " ".join(sys.argv):
        args.kernels = "real"
    print(f"# bench_comm {args.part}: {' '.join(sys.argv[1:])}", flush=True)
    res = volume(args) if args.part == "volume" else overlap(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": res}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
