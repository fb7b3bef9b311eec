"""dgemm on operands that live in files, under a memory budget: tileblas against dask.array and in-core.

Usage::

    python benchmarks/bench_outofcore.py [--n 24576] [--budget-gib 2] [--dir /tmp/tileblas-ooc]
                                         [--methods incore,tileblas,dask] [--chunk 4096] [--json FILE]

A, B and C are ``numpy.memmap`` files of n x n float64 (Fortran order) in ``--dir``; A and B are filled
with random numbers once (kept for later runs of the same n).  Each method runs in its own process, so
that its peak resident set (VmHWM of ``/proc/self/status``) and its I/O counters (``/proc/self/io``: bytes read
through system calls and bytes read from the disk) are its own; before each, the files' pages are
dropped from the page cache (``posix_fadvise(DONTNEED)``), so every method starts from the disk.

* ``incore``: the baseline rate: A and B read into memory, then one OpenBLAS dgemm on all cores (the time
  of the dgemm alone).  Needs 3 n^2 doubles of memory.
* ``tileblas``: ``Runtime(host_memory=budget).run("gemm", 1.0, A, B, 0.0, C)`` on the memmaps; C is
  written tile by tile; the time includes all reading and writing.
* ``dask``: ``da.store(da.from_array(A) @ da.from_array(B), C)`` with chunks of ``--chunk``, on the
  threaded scheduler with one BLAS thread per task (threadpoolctl), the way dask's documentation advises.

* ``tileblas-zarr`` and ``dask-zarr``: the same on zarr arrays (directory stores ``{a,b,c}_<n>.zarr`` with
  chunks of ``--zarr-chunk``, zarr's default compressor), made once from the memmaps: tileblas'
  ``Runtime(host_memory=budget).run("gemm", ...)`` on the zarr arrays themselves, and
  ``da.store(da.from_zarr(A) @ da.from_zarr(B), C)`` (``--methods incore,tileblas-zarr,dask-zarr``).

After the tileblas runs, sampled entries of C are checked against dot products of A's rows and B's columns
read from the files (tolerance from the error bound n * eps * |a||b|).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def _io() -> dict[str, int]:
    out = {}
    with open("/proc/self/io") as fh:
        for line in fh:
            k, v = line.split(":")
            out[k.strip()] = int(v)
    return out


def _peak_rss() -> int:
    """This process's peak resident set in bytes (VmHWM).  Not ``ru_maxrss``: Linux carries that over from
    the parent that forked this process, so a parent with a large resident set inflates it."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM in /proc/self/status")


def _drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _files(d: str, n: int) -> dict[str, str]:
    return {k: os.path.join(d, f"{k}_{n}.f64") for k in ("a", "b", "c")}


def prepare(d: str, n: int) -> dict[str, str]:
    os.makedirs(d, exist_ok=True)
    f = _files(d, n)
    nbytes = n * n * 8
    for k, seed in (("a", 1), ("b", 2)):
        if os.path.exists(f[k]) and os.path.getsize(f[k]) == nbytes:
            continue
        m = np.memmap(f[k], dtype=np.float64, mode="w+", shape=(n, n), order="F")
        rng = np.random.default_rng(seed)
        step = max(1, (1 << 26) // n)
        for j in range(0, n, step):
            m[:, j:j + step] = rng.standard_normal((n, min(step, n - j)))
        m.flush()
        del m
    if not (os.path.exists(f["c"]) and os.path.getsize(f["c"]) == nbytes):
        with open(f["c"], "wb") as fh:
            fh.truncate(nbytes)
    return f


def _zarr_paths(d: str, n: int, chunk: int) -> dict[str, str]:
    return {k: os.path.join(d, f"{k}_{n}_{chunk}.zarr") for k in ("a", "b", "c")}


def prepare_zarr(d: str, n: int, chunk: int) -> dict[str, str]:
    """zarr copies of A and B (chunks of ``chunk``, zarr's default compressor) and an empty C, made once."""
    import zarr

    f, z = _files(d, n), _zarr_paths(d, n, chunk)
    for k in ("a", "b"):
        if os.path.exists(os.path.join(z[k], "zarr.json")):
            continue
        src = np.memmap(f[k], dtype=np.float64, mode="r", shape=(n, n), order="F")
        out = zarr.create_array(store=z[k], shape=(n, n), chunks=(chunk, chunk), dtype="f8", overwrite=True)
        for j in range(0, n, chunk):
            out[:, j:j + chunk] = np.asarray(src[:, j:j + chunk])
    zarr.create_array(store=z["c"], shape=(n, n), chunks=(chunk, chunk), dtype="f8", fill_value=0.0,
                      overwrite=True)
    return z


def _dir_files(path: str) -> list[str]:
    return [os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs]


def _memmaps(f: dict[str, str], n: int) -> tuple[np.memmap, np.memmap, np.memmap]:
    """A and B read-only, C read-write, as n x n float64 Fortran-ordered memmaps."""
    return tuple(np.memmap(f[k], dtype=np.float64, mode="r+" if k == "c" else "r", shape=(n, n), order="F")
                 for k in ("a", "b", "c"))


def _tileblas_gemm(a, b, c, budget: int, res: dict) -> None:
    """C = A B on ``Runtime(host_memory=budget)``; time, tile size, bytes moved and tile-cache stats into res."""
    import tileblas

    with tileblas.Runtime(host_memory=budget, progress=True) as rt:
        t0 = time.perf_counter()
        rt.run("gemm", 1.0, a, b, 0.0, c)
        res["seconds"] = time.perf_counter() - t0
        p = rt.last_profile()
        res["tile"] = p.tile_size
        res["bytes_to_tiles"] = int(sum(dv.bytes_moved for dv in p.devices))
        res["cache"] = rt.stats().get("memory", {})


def worker(method: str, d: str, n: int, budget: int, chunk: int, zchunk: int = 2048) -> dict:
    f = _files(d, n)
    io0 = _io()
    res: dict = {"method": method}
    if method == "incore":
        from tileblas.kernels import _openblas
        from tileblas.kernels._threadpool import cpu_count

        a = np.fromfile(f["a"], dtype=np.float64).reshape((n, n), order="F")
        b = np.fromfile(f["b"], dtype=np.float64).reshape((n, n), order="F")
        c = np.zeros((n, n), order="F")
        lib = _openblas.get_library(cpu_count())
        t0 = time.perf_counter()
        _openblas.gemm(1.0, a, b, 0.0, c, lib=lib)
        res["seconds"] = time.perf_counter() - t0
    elif method == "tileblas":
        _tileblas_gemm(*_memmaps(f, n), budget, res)
    elif method == "dask":
        import dask
        import dask.array as da
        from threadpoolctl import threadpool_limits

        a, b, c = _memmaps(f, n)
        with threadpool_limits(1), dask.config.set(scheduler="threads"):
            t0 = time.perf_counter()
            da.store(da.from_array(a, chunks=chunk) @ da.from_array(b, chunks=chunk), c, lock=False)
            c.flush()
            res["seconds"] = time.perf_counter() - t0
    elif method == "tileblas-zarr":
        import zarr

        z = _zarr_paths(d, n, zchunk)
        _tileblas_gemm(zarr.open_array(z["a"], mode="r"), zarr.open_array(z["b"], mode="r"),
                       zarr.open_array(z["c"], mode="r+"), budget, res)
    elif method == "dask-zarr":
        import dask
        import dask.array as da
        import zarr
        from threadpoolctl import threadpool_limits

        z = _zarr_paths(d, n, zchunk)
        c = zarr.open_array(z["c"], mode="r+")
        with threadpool_limits(1), dask.config.set(scheduler="threads"):
            t0 = time.perf_counter()
            da.store(da.from_zarr(z["a"]) @ da.from_zarr(z["b"]), c, lock=False)
            res["seconds"] = time.perf_counter() - t0
    else:
        raise ValueError(f"method must be incore, tileblas, dask, tileblas-zarr or dask-zarr; got {method!r}")
    io1 = _io()
    res["peak_rss_bytes"] = _peak_rss()
    res["read_syscall_bytes"] = io1["rchar"] - io0["rchar"]
    res["read_disk_bytes"] = io1["read_bytes"] - io0["read_bytes"]
    res["written_bytes"] = io1["write_bytes"] - io0["write_bytes"]
    res["gflops"] = 2.0 * n ** 3 / res["seconds"] / 1e9
    return res


def check(d: str, n: int, samples: int = 48, zarr_c: str | None = None) -> float:
    """Largest |C - A B| / (n eps |A||B|) over sampled entries (at most a small constant when correct);
    C from the memmap, or from the zarr array at ``zarr_c``."""
    f = _files(d, n)
    a = np.memmap(f["a"], dtype=np.float64, mode="r", shape=(n, n), order="F")
    b = np.memmap(f["b"], dtype=np.float64, mode="r", shape=(n, n), order="F")
    if zarr_c is not None:
        import zarr

        c = zarr.open_array(zarr_c, mode="r")
    else:
        c = np.memmap(f["c"], dtype=np.float64, mode="r", shape=(n, n), order="F")
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(samples):
        i, j = int(rng.integers(n)), int(rng.integers(n))
        row, col = np.array(a[i, :]), np.array(b[:, j])
        bound = n * np.finfo(np.float64).eps * float(np.abs(row) @ np.abs(col))
        worst = max(worst, abs(float(c[i, j]) - float(row @ col)) / bound)
    return worst


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench_outofcore", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=24576)
    p.add_argument("--budget-gib", type=float, default=2.0)
    p.add_argument("--dir", default="/tmp/tileblas-ooc")
    p.add_argument("--methods", default="incore,tileblas,dask")
    p.add_argument("--chunk", type=int, default=4096, help="dask chunk size")
    p.add_argument("--zarr-chunk", type=int, default=2048, help="chunk edge of the zarr arrays")
    p.add_argument("--json", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    budget = int(args.budget_gib * 2**30)
    if args.worker:
        print(json.dumps(worker(args.worker, args.dir, args.n, budget, args.chunk, args.zarr_chunk)))
        return 0
    t0 = time.perf_counter()
    files = prepare(args.dir, args.n)
    print(f"n = {args.n}: A, B, C {args.n ** 2 * 8 / 2**30:.1f} GiB each in {args.dir} "
          f"(prepared in {time.perf_counter() - t0:.0f} s); budget {args.budget_gib:g} GiB; "
          f"{os.cpu_count()} cores", flush=True)
    methods = args.methods.split(",")
    zpaths = None
    if any(m.endswith("-zarr") for m in methods):
        t0 = time.perf_counter()
        zpaths = prepare_zarr(args.dir, args.n, args.zarr_chunk)
        print(f"zarr copies, chunks {args.zarr_chunk}: prepared in {time.perf_counter() - t0:.0f} s", flush=True)
    results = {"n": args.n, "budget_bytes": budget, "cpu_count": os.cpu_count(), "runs": []}
    for method in methods:
        for path in files.values():
            _drop_cache(path)
        if zpaths is not None:
            if method.endswith("-zarr"):  # each zarr method writes a fresh C
                prepare_zarr(args.dir, args.n, args.zarr_chunk)
            for path in (p for z in zpaths.values() for p in _dir_files(z)):
                _drop_cache(path)
        time.sleep(0.5)
        proc = subprocess.run([sys.executable, __file__, "--worker", method, "--n", str(args.n), "--dir", args.dir,
                               "--budget-gib", str(args.budget_gib), "--chunk", str(args.chunk),
                               "--zarr-chunk", str(args.zarr_chunk)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"  {method}: failed\n{proc.stderr[-3000:]}", flush=True)
            results["runs"].append({"method": method, "error": proc.stderr[-3000:]})
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        if method == "tileblas":
            r["error_vs_bound"] = check(args.dir, args.n)
        elif method == "tileblas-zarr":
            r["error_vs_bound"] = check(args.dir, args.n, zarr_c=zpaths["c"])
        results["runs"].append(r)
        print(f"  {method:8s} {r['seconds']:8.1f} s  {r['gflops']:6.1f} GFLOP/s  peak RSS "
              f"{r['peak_rss_bytes'] / 2**30:5.2f} GiB  read {r['read_syscall_bytes'] / 2**30:6.1f} GiB "
              f"(from disk {r['read_disk_bytes'] / 2**30:5.1f} GiB)  written {r['written_bytes'] / 2**30:5.1f} GiB"
              + (f"  error {r['error_vs_bound']:.3f} x bound" if "error_vs_bound" in r else ""), flush=True)
    by = {r["method"]: r for r in results["runs"] if "seconds" in r}
    if "incore" in by and "tileblas" in by:
        results["tileblas_vs_incore"] = by["tileblas"]["gflops"] / by["incore"]["gflops"]
        print(f"tileblas out-of-core / in-core OpenBLAS rate: {results['tileblas_vs_incore']:.3f}x (bar >= 0.8); "
              f"peak RSS {by['tileblas']['peak_rss_bytes'] / budget:.2f} of the budget")
    if "dask" in by and "tileblas" in by:
        results["tileblas_vs_dask"] = by["dask"]["seconds"] / by["tileblas"]["seconds"]
        print(f"tileblas vs dask.array: {results['tileblas_vs_dask']:.2f}x faster")
    if "incore" in by and "tileblas-zarr" in by:
        results["tileblas_zarr_vs_incore"] = by["tileblas-zarr"]["gflops"] / by["incore"]["gflops"]
        print(f"tileblas on zarr / in-core OpenBLAS rate: {results['tileblas_zarr_vs_incore']:.3f}x; "
              f"peak RSS {by['tileblas-zarr']['peak_rss_bytes'] / budget:.2f} of the budget")
    if "dask-zarr" in by and "tileblas-zarr" in by:
        results["tileblas_zarr_vs_dask_zarr"] = by["dask-zarr"]["seconds"] / by["tileblas-zarr"]["seconds"]
        print(f"tileblas vs dask.array on zarr: {results['tileblas_zarr_vs_dask_zarr']:.2f}x faster")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
