"""Recursive TRMM/TRSM (tileblas) against OpenBLAS's own trmm/trsm, and POTRS/POTRI against scipy.linalg.

Every figure is measured in the same run as its baseline: for each case the implementations are timed
in interleaved order, ``--trials`` times (default 5), and the best time is kept (a trial of a call
shorter than 50 ms is a block of back-to-back calls on fresh inputs; see :func:`_best`).  Rates are GFLOP/s
(TRMM/TRSM: m*m*n flops for an m x m triangle and n right-hand sides, real) and the percentage of the
rate of a DGEMM of the same shape (2*m*m*n flops) on the same 2-thread OpenBLAS, measured in the same
round.  Each comparison also times its baseline a second time under another name ("control"); the
baseline / control ratio is the noise of the comparison in that run (1.00 on a quiet machine).

    python benchmarks/bench_trmm_trsm.py                  # the issue's cases, best of 5
    python benchmarks/bench_trmm_trsm.py --quick          # n in {1024, 2048}, best of 3
    python benchmarks/bench_trmm_trsm.py --sweep-stop     # stopping-size sweep (DEFAULT_STOP)
    python benchmarks/bench_trmm_trsm.py --tile-threshold # CPU tile kernels (RECURSIVE_MIN_ORDER)
    python benchmarks/bench_trmm_trsm.py --json out.json
    python benchmarks/bench_trmm_trsm.py --gpu            # cuBLAS vs recursive on a GPU (needs CuPy)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable

import numpy as np


#: Pause before each trial of each implementation.  OpenBLAS's idle worker threads spin (yielding) for
#: about 2**28 cycles after a call before they sleep; without the pause a call would share the cores with
#: the spinning workers of whichever OpenBLAS instance (tileblas', SciPy's) ran just before it, which
#: penalizes the implementations unevenly in an interleaved comparison.
SETTLE_S = 0.2


#: A trial of a short call is a block of back-to-back calls lasting about this long (at most
#: MAX_BLOCK calls), each on its own fresh input; one call per trial once a call takes longer.
BLOCK_S = 0.05
MAX_BLOCK = 20


def _best(fns: dict[str, Callable[[], Callable[[], None]]], trials: int, settle: float = SETTLE_S) -> dict[str, float]:
    """Best time of each function; ``fns[name]()`` prepares a fresh input and returns the timed call.

    Each trial of each implementation: pause (the previous implementation's BLAS threads go idle), one
    untimed call on its own fresh input (wakes this implementation's BLAS threads), then the timed calls,
    each on another fresh input: one, or for calls shorter than BLOCK_S a block of back-to-back calls
    (sized from the first trial, the same rule for every implementation), so that a millisecond-long call
    is not judged on the single call that follows a pause.  Every implementation is thus timed warm, on
    otherwise idle cores, and the best time over all trials is kept.
    """
    best = {k: float("inf") for k in fns}
    block = {k: 1 for k in fns}
    for _ in range(trials):
        for name, prep in fns.items():
            warm = prep()
            runs = [prep() for _ in range(block[name])]
            if settle:
                time.sleep(settle)
            warm()
            for run in runs:
                t0 = time.perf_counter()
                run()
                best[name] = min(best[name], time.perf_counter() - t0)
            block[name] = max(1, min(MAX_BLOCK, int(BLOCK_S / best[name])))
    return best


def _tri(n: int, rng, dtype=np.float64) -> np.ndarray:
    a = rng.standard_normal((n, n)) / np.sqrt(n)
    a += 2.0 * np.eye(n)
    return np.asfortranarray(np.tril(a).astype(dtype))


def bench_cpu(sizes, rhs_list, trials, stop=None, panels=False, cores=2) -> list[dict]:
    import scipy.linalg.blas as sb

    from tileblas.kernels import _openblas
    from tileblas.kernels._recursive import recursive_trmm, recursive_trsm, run_panels, DEFAULT_STOP

    lib2 = _openblas.get_library(cores)
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        a = _tri(n, rng)
        for nrhs in rhs_list:
            nr = n if nrhs == "square" else int(nrhs)
            b0 = np.asfortranarray(rng.standard_normal((n, nr)))
            c = np.zeros((n, nr), order="F")
            for kind in ("trmm", "trsm"):
                # the paper's figure 3 variants: Left Lower Transpose TRMM, Left Lower NoTrans TRSM
                trans = "T" if kind == "trmm" else "N"
                rec = recursive_trmm if kind == "trmm" else recursive_trsm
                ker = _openblas.trmm if kind == "trmm" else _openblas.trsm
                sfn = sb.dtrmm if kind == "trmm" else sb.dtrsm

                def fresh():
                    return b0.copy(order="F")

                def p_rec():
                    b = fresh()
                    return lambda: rec(1.0, a, b, "L", "L", trans, "N", stop=stop)

                def p_ob():
                    b = fresh()
                    return lambda: ker(1.0, a, b, "L", "L", trans, "N", lib=lib2)

                def p_sp():
                    b = fresh()
                    return lambda: sfn(1.0, a, b, side=0, lower=1, trans_a=int(trans != "N"), diag=0,
                                       overwrite_b=1)

                def p_gemm():
                    return lambda: _openblas.gemm(1.0, a, b0, 0.0, c, "N", "N", lib=lib2)

                # "control": OpenBLAS's routine timed a second time as if it were another implementation;
                # openblas2 / control is the run-to-run noise of the comparison itself (ideally 1.00)
                fns = {"recursive": p_rec, "openblas2": p_ob, "scipy": p_sp, "dgemm": p_gemm, "control": p_ob}
                if panels:
                    def p_pan():
                        b = fresh()
                        return lambda: run_panels(kind, 1.0, a, b, "L", "L", trans, "N",
                                                  stop or DEFAULT_STOP, cores)
                    fns["panels"] = p_pan
                t = _best(fns, trials)
                flops = float(n) * n * nr
                gf = {k: flops / v / 1e9 for k, v in t.items() if k not in ("dgemm", "control")}
                gemm_gf = 2 * flops / t["dgemm"] / 1e9
                row = {"kind": kind, "n": n, "nrhs": nr, "shape": "square" if nrhs == "square" else "rhs",
                       "seconds": t, "gflops": gf, "dgemm_gflops": gemm_gf,
                       "pct_dgemm": {k: 100 * v / gemm_gf for k, v in gf.items()},
                       "speedup_vs_openblas2": t["openblas2"] / t["recursive"],
                       "speedup_vs_scipy": t["scipy"] / t["recursive"],
                       "noise_control": t["openblas2"] / t["control"]}
                if panels:
                    row["panels_vs_openblas2"] = t["openblas2"] / t["panels"]
                rows.append(row)
                extra = f"  panels {gf['panels']:6.1f}" if panels else ""
                print(f"{kind} n={n:5d} nrhs={nr:5d}  rec {gf['recursive']:6.1f} GF/s "
                      f"({row['pct_dgemm']['recursive']:5.1f}% dgemm)  openblas2 {gf['openblas2']:6.1f}  "
                      f"scipy {gf['scipy']:6.1f}  dgemm {gemm_gf:6.1f}  "
                      f"x{row['speedup_vs_openblas2']:.2f} vs openblas2 (control x{row['noise_control']:.2f})"
                      f"{extra}", flush=True)
    return rows


def bench_apps(sizes, trials, order="C") -> list[dict]:
    """POTRS and POTRI against scipy.linalg; ``order``: memory order of the matrix and right-hand sides
    given to both (NumPy's default C order, or Fortran order, which spares SciPy's f2py a transposing
    copy)."""
    import scipy.linalg as sl

    from tileblas import linalg

    rng = np.random.default_rng(1)
    rows = []
    for n in sizes:
        g = rng.standard_normal((n, n))
        spd = np.array(g @ g.T / n + np.eye(n), order=order)
        cf, low = sl.cho_factor(spd)
        for nr in (64, n):
            b0 = np.array(rng.standard_normal((n, nr)), order=order)
            t = _best({
                "tileblas": lambda: (lambda: linalg.potrs((cf, low), b0)),
                "scipy": lambda: (lambda: sl.cho_solve((cf, low), b0)),
                "recursive": lambda: (lambda: linalg.potrs((cf, low), b0, recursive=True)),
                "control": lambda: (lambda: sl.cho_solve((cf, low), b0)),
            }, trials)
            sp = t["scipy"] / t["tileblas"]
            rec = t["scipy"] / t["recursive"]
            ctl = t["scipy"] / t["control"]
            rows.append({"kind": "potrs", "n": n, "nrhs": nr, "order": order, "seconds": t, "speedup_vs_scipy": sp,
                         "recursive_vs_scipy": rec, "noise_control": ctl})
            print(f"potrs n={n:5d} nrhs={nr:5d}  tileblas {t['tileblas']*1e3:8.2f} ms  "
                  f"scipy {t['scipy']*1e3:8.2f} ms  x{sp:.2f}  (always recursive: x{rec:.2f}; "
                  f"control x{ctl:.2f})", flush=True)

        def sp_potri():
            c, lw = sl.cho_factor(spd)
            inv, info = sl.lapack.dpotri(c, lower=lw, overwrite_c=1)
            return inv

        t = _best({
            # the factor is checked for infs/NaNs by both cho_factors; lapack's dpotri does not check
            "tileblas": lambda: (lambda: linalg.potri(linalg.cho_factor(spd)[0], overwrite_c=True,
                                                      check_finite=False)),
            "scipy": lambda: sp_potri,
            # every level recursive: TRTRI and LAUUM (and their TRMMs) split down to 256
            "recursive": lambda: (lambda: linalg.potri(linalg.cho_factor(spd)[0], overwrite_c=True, stop=256,
                                                       check_finite=False)),
            "control": lambda: sp_potri,
        }, trials)
        sp = t["scipy"] / t["tileblas"]
        rec = t["scipy"] / t["recursive"]
        flops = n ** 3  # potrf n^3/3 + trtri n^3/3 + lauum n^3/3
        ctl = t["scipy"] / t["control"]
        rows.append({"kind": "potri", "n": n, "order": order, "seconds": t, "speedup_vs_scipy": sp,
                     "recursive_vs_scipy": rec, "noise_control": ctl,
                     "gflops": {k: flops / v / 1e9 for k, v in t.items()}})
        print(f"potri n={n:5d}  (factor+inverse) tileblas {t['tileblas']*1e3:8.1f} ms  "
              f"scipy {t['scipy']*1e3:8.1f} ms  x{sp:.2f}  (stop 256 everywhere: x{rec:.2f}; control x{ctl:.2f})",
              flush=True)
    return rows


def sweep_stop(sizes, rhs_list, trials, stops=(128, 256, 512, 1024)) -> list[dict]:
    """Recursive TRMM/TRSM (all cores) for several stopping sizes against OpenBLAS's own routine."""
    from tileblas.kernels import _openblas
    from tileblas.kernels._recursive import recursive_trmm, recursive_trsm

    lib = _openblas.get_library(_cores())
    rng = np.random.default_rng(2)
    rows = []
    for n in sizes:
        a = _tri(n, rng)
        for nrhs in rhs_list:
            nr = n if nrhs == "square" else int(nrhs)
            b0 = np.asfortranarray(rng.standard_normal((n, nr)))
            for kind, fn, trans in (("trmm", recursive_trmm, "T"), ("trsm", recursive_trsm, "N")):
                ker = getattr(_openblas, kind)

                def p_native(ker=ker, trans=trans):
                    b = b0.copy(order="F")
                    return lambda: ker(1.0, a, b, "L", "L", trans, "N", lib=lib)

                fns = {"openblas": p_native}
                for s in stops:
                    def prep(s=s, fn=fn, trans=trans):
                        b = b0.copy(order="F")
                        return lambda: fn(1.0, a, b, "L", "L", trans, "N", stop=s)
                    fns[s] = prep
                t = _best(fns, trials)
                ratio = {s: t["openblas"] / t[s] for s in stops}
                rows.append({"kind": kind, "n": n, "nrhs": nr, "seconds": t, "speedup_by_stop": ratio})
                print(f"{kind} n={n} nrhs={nr}  openblas {float(n) * n * nr / t['openblas'] / 1e9:.1f} GF/s  "
                      + "  ".join(f"stop={s}: x{r:.2f}" for s, r in ratio.items()), flush=True)
    return rows


def tile_threshold(sizes, trials) -> list[dict]:
    """The host CPU device's trmm/trsm tile kernels: OpenBLAS's own routine vs the recursion, on 1 and on
    all cores, square blocks (the tile shape) and 64 right-hand sides; gives RECURSIVE_MIN_ORDER."""
    from tileblas.kernels import _openblas
    from tileblas.linalg import recursive_trmm, recursive_trsm  # the stop the CPU kernels use (models or default)

    rng = np.random.default_rng(4)
    rows = []
    for threads in sorted({1, _cores()}):
        lib = _openblas.get_library(threads)
        for n in sizes:
            a = _tri(n, rng)
            for nr in (n, 64):
                b0 = np.asfortranarray(rng.standard_normal((n, nr)))
                for kind, fn, trans in (("trmm", recursive_trmm, "T"), ("trsm", recursive_trsm, "N")):
                    ker = getattr(_openblas, kind)

                    def p_native(ker=ker, trans=trans):
                        b = b0.copy(order="F")
                        return lambda: ker(1.0, a, b, "L", "L", trans, "N", lib=lib)

                    def p_rec(fn=fn, trans=trans):
                        b = b0.copy(order="F")
                        return lambda: fn(1.0, a, b, "L", "L", trans, "N", lib=lib)

                    t = _best({"openblas": p_native, "recursive": p_rec}, trials)
                    r = t["openblas"] / t["recursive"]
                    rows.append({"kind": kind, "threads": threads, "n": n, "nrhs": nr, "seconds": t,
                                 "speedup": r})
                    print(f"tile kernel threads={threads} {kind} n={n} nrhs={nr}: "
                          f"recursive x{r:.2f} vs OpenBLAS",
                          flush=True)
    return rows


def _cores() -> int:
    from tileblas.devices.cpu import cpu_count

    return cpu_count()


#: The triangle of the last bench_gpu call, on the device, reused by the next call of its order.
_GPU_TRIANGLE: dict = {}


def _gpu_normal(cupy, n: int, m: int, dtype, seed: int):
    """An n x m Fortran-ordered matrix of normal random numbers, made on the GPU (CuPy's generator: at
    n = 16384 NumPy's would take seconds of the host)."""
    g = cupy.random.default_rng(seed)
    x = cupy.asarray(g.standard_normal((m, n))).T
    if np.dtype(dtype).kind == "c":
        x = x + 1j * cupy.asarray(g.standard_normal((m, n))).T
    return cupy.asfortranarray(x.astype(dtype))


def bench_gpu(n, nrhs_list, trials, stop=None, dtype=np.float64, kinds=("trmm", "trsm"), host=True,
              settle=SETTLE_S, quiet=False) -> list[dict]:
    """The recursive in-place TRMM/TRSM on device arrays against cuBLAS's own in-place call (and with
    ``host``, the host-data variants: host_async against host_sync with and without the recursion), for
    an n x n lower triangle and each count of right-hand sides; each result against cuBLAS's.

    The host waits for the GPU on blocking events (a spinning wait would take a core from the host's
    other threads); ``settle``: the pause before each trial (for the CPU's BLAS threads; none is needed
    between GPU calls)."""
    try:
        import cupy
    except ImportError:
        sys.exit("--gpu needs CuPy (pip install -e '.[gpu]', or '.[gpu-cuda12]' for CUDA 12) and an NVIDIA GPU; "
                 "CuPy is not installed")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no device")
    except Exception as exc:  # CUDA driver missing or no device
        sys.exit(f"--gpu needs an NVIDIA GPU; CuPy found none ({exc})")
    from tileblas.kernels import _gpu_recursive as g

    def wait():
        ev = cupy.cuda.Event(block=True, disable_timing=True)
        ev.record(cupy.cuda.get_current_stream())
        ev.synchronize()

    dtype = np.dtype(dtype)
    rows = []
    key = (n, dtype.char, id(cupy))
    if _GPU_TRIANGLE.get("key") != key:  # the last triangle is kept for the next call of the same order
        _GPU_TRIANGLE.clear()
        a = _gpu_normal(cupy, n, n, np.float64, 3) / np.sqrt(n)
        a = cupy.asfortranarray((cupy.tril(a) + 2.0 * cupy.eye(n)).astype(dtype))
        _GPU_TRIANGLE.update(key=key, device=a)
    a = _GPU_TRIANGLE["device"]
    a_h = cupy.asnumpy(a, order="F") if host else None
    for nr in nrhs_list:
        b0 = _gpu_normal(cupy, n, nr, dtype, 4 + nr)
        b_h = cupy.asnumpy(b0, order="F") if host else None
        for kind in kinds:
            trans = "T" if kind == "trmm" else "N"

            def timed(fn):
                def prep():
                    b = b0.copy(order="F")
                    wait()

                    def run():
                        fn(b)
                        wait()
                    return run
                return prep

            fns = {
                "recursive": timed(lambda b: g.gpu_recursive(kind, 1.0, a, b, "L", "L", trans, "N", stop=stop)),
                "cublas": timed(lambda b: g.cublas_native(kind, 1.0, a, b, "L", "L", trans, "N")),
            }
            t = _best(fns, trials, settle)
            x, y = b0.copy(order="F"), b0.copy(order="F")
            g.gpu_recursive(kind, 1.0, a, x, "L", "L", trans, "N", stop=stop)
            g.cublas_native(kind, 1.0, a, y, "L", "L", trans, "N")
            wait()
            diff = float(cupy.abs(x - y).max()) / (float(cupy.abs(y).max()) or 1.0)
            x = y = None
            flops = float(n) * n * nr * (4.0 if dtype.kind == "c" else 1.0)
            row = {"kind": kind, "dtype": dtype.name, "n": n, "nrhs": nr, "device_seconds": t,
                   "speedup_vs_cublas": t["cublas"] / t["recursive"], "diff_vs_cublas": diff}
            th = {}
            if host:
                # each run's copy of b is made when it is prepared (the default argument), outside the clock
                th = _best({
                    "async": lambda: (lambda b=b_h.copy(order="F"): g.host_async(kind, 1.0, a_h, b, "L", "L", trans,
                                                                                 "N", stop=stop)),
                    "sync_recursive": lambda: (lambda b=b_h.copy(order="F"): g.host_sync(
                        kind, 1.0, a_h, b, "L", "L", trans, "N", recursive=True, stop=stop)),
                    "sync_cublas": lambda: (lambda b=b_h.copy(order="F"): g.host_sync(
                        kind, 1.0, a_h, b, "L", "L", trans, "N", recursive=False)),
                }, trials, settle)
                row.update(host_seconds=th, async_vs_sync_cublas=th["sync_cublas"] / th["async"])
            row["gflops"] = {k: flops / v / 1e9 for k, v in {**t, **th}.items()}
            rows.append(row)
            if not quiet:
                print(f"GPU {dtype.char}{kind} n={n} nrhs={nr}: recursive x{row['speedup_vs_cublas']:.2f} vs cuBLAS "
                      f"in-place (results differ by {diff:.1e})"
                      + (f"; host-data async x{row['async_vs_sync_cublas']:.2f} vs sync cuBLAS" if host else "")
                      + "  " + "  ".join(f"{k} {v:.0f}" for k, v in row["gflops"].items()) + " GF/s", flush=True)
    return rows


def _bars(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if r["kind"] in ("trmm", "trsm") and "speedup_vs_openblas2" in r:
            if r["shape"] == "square" and r["n"] == 4096:
                bar = 0.95
            elif r["shape"] == "rhs" and r["nrhs"] >= 64:
                bar = 1.0
            else:
                continue
            s = r["speedup_vs_openblas2"]
            out.append(f"{'PASS' if s >= bar else 'MISS'} {r['kind']} n={r['n']} nrhs={r['nrhs']}: "
                       f"x{s:.2f} (bar {bar}; control x{r['noise_control']:.2f})")
        elif r["kind"] in ("potrs", "potri"):
            s = r["speedup_vs_scipy"]
            out.append(f"{'PASS' if s >= 1.0 else 'MISS'} {r['kind']} n={r['n']}"
                       f"{' nrhs=' + str(r['nrhs']) if 'nrhs' in r else ''}: x{s:.2f} vs scipy (bar 1.0; "
                       f"control x{r['noise_control']:.2f})")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="n in {1024, 2048}, 3 trials")
    p.add_argument("--trials", type=int, default=None, help="interleaved trials, best kept (default 5)")
    p.add_argument("--sizes", type=int, nargs="*", default=None)
    p.add_argument("--rhs", nargs="*", default=None, help="right-hand side counts, or 'square'")
    p.add_argument("--stop", type=int, default=None, help="recursion stopping size (default: the tuned one)")
    p.add_argument("--sweep-stop", action="store_true", help="stopping-size sweep (RHS 64, 256, square) and exit")
    p.add_argument("--tile-threshold", action="store_true",
                   help="CPU tile kernels: OpenBLAS vs recursive at n in {512, 1024, 2048}, 1 and all cores")
    p.add_argument("--panels", action="store_true", help="also time the panel-parallel host variant")
    p.add_argument("--no-apps", action="store_true", help="skip POTRS/POTRI")
    p.add_argument("--only-apps", action="store_true", help="only POTRS/POTRI")
    p.add_argument("--order", choices=("C", "F"), default="C",
                   help="memory order of the POTRS/POTRI inputs (default C, NumPy's)")
    p.add_argument("--gpu", action="store_true", help="GPU benchmark (n=8192, square and 512 RHS)")
    p.add_argument("--json", default=None, help="write all rows to this JSON file")
    args = p.parse_args(argv)
    trials = args.trials or (3 if args.quick else 5)
    rows: list[dict] = []
    if args.gpu:
        return _run(args, trials, rows)
    # Every CPU baseline runs on all cores: tileblas' own 2-thread OpenBLAS for trmm/trsm/dgemm and
    # SciPy's OpenBLAS (cho_solve, potrf, potri) set to the same count here and restored afterwards.
    import scipy.linalg  # noqa: F401 - loads SciPy's OpenBLAS so its thread count can be set

    from tileblas.kernels import _openblas
    from tileblas.cli._bench import _set_one, scipy_openblas_threads, set_scipy_openblas_threads
    from tileblas.devices.cpu import cpu_count

    cores = cpu_count()
    before = scipy_openblas_threads()
    now = set_scipy_openblas_threads(cores)
    lib = _openblas.get_library(cores)
    if lib.num_threads() != cores or any(v != cores for v in now.values()):
        sys.exit(f"could not set every OpenBLAS to {cores} threads: tileblas {lib.num_threads()}, SciPy {now}")
    print(f"threads: {cores} cores; tileblas OpenBLAS {lib.num_threads()} ({lib.corename()}); "
          f"SciPy/NumPy OpenBLAS {now} (restored to {before} afterwards)", flush=True)
    try:
        return _run(args, trials, rows, cores)
    finally:
        for name, t in before.items():
            _set_one(name, t)


def _run(args, trials: int, rows: list[dict], cores: int = 2) -> int:
    if args.gpu:
        sizes = args.sizes or [8192]
        rows += bench_gpu(sizes[0], [int(x) if x != "square" else sizes[0] for x in (args.rhs or ["square", 512])],
                          trials, stop=args.stop)
    elif args.sweep_stop:
        rows += sweep_stop(args.sizes or [1024, 2048, 4096], args.rhs or [64, 256, "square"], trials)
    elif args.tile_threshold:
        rows += tile_threshold(args.sizes or [512, 1024, 2048], trials)
    else:
        sizes = args.sizes or ([1024, 2048] if args.quick else [1024, 2048, 4096])
        rhs = args.rhs or ["square", 16, 64, 256]
        if not args.only_apps:
            rows += bench_cpu(sizes, rhs, trials, stop=args.stop, panels=args.panels, cores=cores)
        if not args.no_apps:
            rows += bench_apps(sizes, trials, args.order)
        for line in _bars(rows):
            print(line)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
