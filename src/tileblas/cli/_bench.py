"""``tileblas bench blas ROUTINE``: tileblas.blas against scipy.linalg.blas in the same run; ``tileblas bench
grid``: the same over the whole Level-3 grid (:mod:`tileblas.cli._bench_grid`).

What this module owns
    The ``bench`` command group (other capabilities may add targets to it: the parser keeps its
    subparsers in ``parser._tileblas_targets``), the ``blas`` target, per-family argument builders, flop
    and byte counts, and the helpers that set the thread count of the OpenBLAS inside NumPy/SciPy
    (used here and by ``benchmarks/bench_threads.py``).

Method
    Both libraries get the same arguments (Fortran-ordered, so SciPy makes no layout copies), are
    called alternately (tileblas then SciPy, SciPy then tileblas, ...) ``repeat`` times, and the best
    time of each is reported.  Tiny calls are repeated in an inner loop long enough (about 20 ms) to be
    timed.  ``--threads T`` gives SciPy's OpenBLAS T threads and the tile runtime T CPU workers (when the
    runtime is available), so both use the same share of the machine.

What it must not touch
    Everything here is imported only by the ``tileblas`` command: NumPy and SciPy are imported inside
    functions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
from typing import Any, Callable

from tileblas._timing import interleaved
from tileblas.cli._args import count

__all__ = ["register", "bench_blas", "scipy_openblas_threads", "set_scipy_openblas_threads", "FAMILIES"]


# ---------------------------------------------------------------------------------------------------
# The OpenBLAS instances inside NumPy and SciPy (not tileblas' own)
# ---------------------------------------------------------------------------------------------------


def _loaded_openblas() -> list[str]:
    """Paths of the OpenBLAS shared objects NumPy/SciPy have loaded into this process (Linux)."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return []
    paths = sorted(set(re.findall(r"(/\S*(?:numpy|scipy)\.libs/\S*openblas\S*\.so\S*)", maps)))
    return paths


def _setter_getter(path: str) -> tuple[Callable[[int], None], Callable[[], int]] | None:
    import ctypes

    try:
        dll = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LOCAL", 0)
                          | getattr(os, "RTLD_NOW", 2))
    except OSError:
        return None
    for suffix in ("", "64_"):
        for pre in ("scipy_openblas_", "openblas_"):
            try:
                s = dll[f"{pre}set_num_threads{suffix}"]
                g = dll[f"{pre}get_num_threads{suffix}"]
            except AttributeError:
                continue
            s.argtypes = [ctypes.c_int]
            g.restype = ctypes.c_int
            return s, g
    return None


def scipy_openblas_threads() -> dict[str, int]:
    """Thread count of each OpenBLAS loaded by NumPy/SciPy: {library file name: threads}."""
    out = {}
    for p in _loaded_openblas():
        sg = _setter_getter(p)
        if sg is not None:
            out[os.path.basename(p)] = int(sg[1]())
    return out


def _set_one(basename: str, threads: int) -> None:
    for p in _loaded_openblas():
        if os.path.basename(p) == basename:
            sg = _setter_getter(p)
            if sg is not None:
                sg[0](int(threads))


def set_scipy_openblas_threads(threads: int) -> dict[str, int]:
    """Set the thread count of every OpenBLAS loaded by NumPy/SciPy; returns the counts now in effect.

    SciPy must already be imported (its library is found among the loaded objects).  tileblas' own
    OpenBLAS is a separate instance and is not affected.
    """
    for p in _loaded_openblas():
        sg = _setter_getter(p)
        if sg is not None:
            sg[0](int(threads))
    return scipy_openblas_threads()


# ---------------------------------------------------------------------------------------------------
# Argument builders per routine family
# ---------------------------------------------------------------------------------------------------

_PREFIX_RE = re.compile(r"^(i[sdcz]|sc|dz|cs|zd|[sdcz])(.+)$")


def _split(routine: str) -> tuple[str, str]:
    """(prefix, family): 'dgemm' -> ('d', 'gemm'), 'dznrm2' -> ('dz', 'nrm2'), 'izamax' -> ('iz', 'amax')."""
    m = _PREFIX_RE.match(routine)
    if not m:
        raise ValueError(f"unknown BLAS routine {routine!r}")
    prefix, family = m.groups()
    for fam in FAMILIES:  # 'dzasum' = 'dz' + 'asum', 'zdscal' = 'zd' + 'scal', but 'dsyrk' = 'd' + 'syrk'
        if routine.endswith(fam) and len(routine) - len(fam) in (1, 2):
            return routine[: len(routine) - len(fam)], fam
    return prefix, family


def _dtype_of_prefix(prefix: str) -> Any:
    from tileblas._dtypes import DTYPE_OF

    # 'd' -> d; 'id' (idamax) -> d; 'sc'/'dz' (scnrm2, dzasum) -> c/z data; 'cs'/'zd' (csscal) -> c/z data
    data = {"sc": "c", "dz": "z", "cs": "c", "zd": "z"}.get(prefix, prefix[-1])
    return DTYPE_OF[data]


def _rand(rng: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    import numpy as np

    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asfortranarray(x.astype(dtype))


def _triangle(rng: Any, n: int, dtype: Any) -> Any:
    import numpy as np

    a = _rand(rng, (n, n), dtype) * (1.0 / math.sqrt(max(n, 1)))
    a += np.eye(n, dtype=dtype) * 4
    return np.asfortranarray(a)


# family -> (level, builder(n, dtype, rng) -> (args, kwargs), work(n) -> flops or bytes-per-itemsize)
# For Level 3 work is the flop count of a real routine (complex routines do 4x); for Level 1/2 it is the
# number of elements read or written (bytes = elements x itemsize).


def _l3_builders() -> dict[str, tuple[Callable, Callable]]:
    def gemm(n, dt, rng):
        return (1.0, _rand(rng, (n, n), dt), _rand(rng, (n, n), dt), 0.5, _rand(rng, (n, n), dt)), {}

    def symm(n, dt, rng):
        return (1.0, _rand(rng, (n, n), dt), _rand(rng, (n, n), dt), 0.5, _rand(rng, (n, n), dt)), {}

    def syrk(n, dt, rng):
        return (1.0, _rand(rng, (n, n), dt), 0.5, _rand(rng, (n, n), dt)), {}

    def syr2k(n, dt, rng):
        return (1.0, _rand(rng, (n, n), dt), _rand(rng, (n, n), dt), 0.5, _rand(rng, (n, n), dt)), {}

    def trmm(n, dt, rng):
        return (1.0, _triangle(rng, n, dt), _rand(rng, (n, n), dt)), {}

    return {
        "gemm": (gemm, lambda n: 2.0 * n**3),
        "symm": (symm, lambda n: 2.0 * n**3),
        "hemm": (symm, lambda n: 2.0 * n**3),
        "syrk": (syrk, lambda n: float(n) * n * (n + 1)),
        "herk": (syrk, lambda n: float(n) * n * (n + 1)),
        "syr2k": (syr2k, lambda n: 2.0 * n * n * n + n * n),
        "her2k": (syr2k, lambda n: 2.0 * n * n * n + n * n),
        "trmm": (trmm, lambda n: float(n) ** 3),
        "trsm": (trmm, lambda n: float(n) ** 3),
    }


def _l12_builders() -> dict[str, tuple[Callable, Callable]]:
    def vec(k):
        def build(n, dt, rng):
            return tuple(_rand(rng, (n,), dt) for _ in range(k)), {}
        return build

    def axpy(n, dt, rng):
        return (_rand(rng, (n,), dt), _rand(rng, (n,), dt)), {"a": 1e-3}

    def scal(n, dt, rng):
        return (-1.0, _rand(rng, (n,), dt)), {}  # flips sign: no underflow, no alpha==1 shortcut

    def gemv(n, dt, rng):
        return (1.0, _rand(rng, (n, n), dt), _rand(rng, (n,), dt)), {}

    def ger(n, dt, rng):
        return (1e-3, _rand(rng, (n,), dt), _rand(rng, (n,), dt)), {"a": _rand(rng, (n, n), dt)}

    def trmv(n, dt, rng):
        return (_triangle(rng, n, dt), _rand(rng, (n,), dt)), {}

    return {
        "axpy": (axpy, lambda n: 3.0 * n),
        "dot": (vec(2), lambda n: 2.0 * n),
        "dotc": (vec(2), lambda n: 2.0 * n),
        "dotu": (vec(2), lambda n: 2.0 * n),
        "nrm2": (vec(1), lambda n: 1.0 * n),
        "asum": (vec(1), lambda n: 1.0 * n),
        "amax": (vec(1), lambda n: 1.0 * n),
        "scal": (scal, lambda n: 2.0 * n),
        "copy": (vec(2), lambda n: 2.0 * n),
        "swap": (vec(2), lambda n: 4.0 * n),
        "gemv": (gemv, lambda n: float(n) * n + 2 * n),
        "ger": (ger, lambda n: 2.0 * n * n + 2 * n),
        "geru": (ger, lambda n: 2.0 * n * n + 2 * n),
        "gerc": (ger, lambda n: 2.0 * n * n + 2 * n),
        "symv": (gemv, lambda n: float(n) * n + 2 * n),
        "hemv": (gemv, lambda n: float(n) * n + 2 * n),
        "trmv": (trmv, lambda n: float(n) * n / 2 + 2 * n),
        "trsv": (trmv, lambda n: float(n) * n / 2 + 2 * n),
    }


LEVEL3 = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")
LEVEL2 = ("gemv", "ger", "geru", "gerc", "symv", "hemv", "trmv", "trsv")
#: Routine families the benchmark can build arguments for.
FAMILIES = LEVEL3 + LEVEL2 + ("axpy", "dot", "dotc", "dotu", "nrm2", "asum", "amax", "scal", "copy", "swap")
DEFAULT_N = {3: 1024, 2: 2048, 1: 1_000_000}


def _level(family: str) -> int:
    return 3 if family in LEVEL3 else (2 if family in LEVEL2 else 1)


# ---------------------------------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------------------------------


def _tileblas_context(threads: int, level: int) -> tuple[Any, str]:
    """Context in which tileblas.blas runs with ``threads`` CPU workers, and a description of it."""
    if level != 3:
        return contextlib.nullcontext(), "kernel layer, tileblas' single-threaded OpenBLAS"
    try:
        from tileblas.runtime import Runtime  # type: ignore[attr-defined]

        rt = Runtime(devices=threads)
    except (ImportError, AttributeError, TypeError):
        return contextlib.nullcontext(), "kernel layer, tileblas' single-threaded OpenBLAS"
    return rt, f"tile runtime, {threads} single-threaded CPU worker(s)"


def _max_rel_diff(x: Any, y: Any) -> float:
    import numpy as np

    if isinstance(x, tuple):
        return max(_max_rel_diff(a, b) for a, b in zip(x, y))
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind in "iu":
        return float(np.max(np.abs(x.astype(np.int64) - y.astype(np.int64)))) if x.size else 0.0
    scale = float(np.max(np.abs(y))) if y.size else 0.0
    return float(np.max(np.abs(x - y)) / scale) if scale else float(np.max(np.abs(x - y)) if x.size else 0.0)


def _copy_args(args: tuple, kw: dict) -> tuple[tuple, dict]:
    import numpy as np

    def c(v):
        return v.copy(order="K") if isinstance(v, np.ndarray) else v

    return tuple(c(a) for a in args), {k: c(v) for k, v in kw.items()}


def _time_pair(f_t: Callable, f_s: Callable, args: tuple, kw: dict, repeat: int) -> tuple[float, dict, int]:
    """(max relative difference, best seconds per call of each, inner loop count), interleaved."""
    # correctness on fresh copies (in-place routines mutate their arguments)
    a1, k1 = _copy_args(args, kw)
    a2, k2 = _copy_args(args, kw)
    diff = _max_rel_diff(f_t(*a1, **k1), f_s(*a2, **k2))

    # ABBA rounds; each timed sample a block of calls lasting ~20 ms, sized from one SciPy call
    timed = interleaved({"tileblas": lambda: f_t(*args, **kw), "scipy": lambda: f_s(*args, **kw)}, repeat,
                        alternate=True, block_s=0.02, max_block=100_000, block_from="scipy")
    return diff, timed.best, timed.block["scipy"]


def bench_blas(routine: str, n: int | None = None, repeat: int = 5, threads: int | None = None) -> dict[str, Any]:
    """Time ``tileblas.blas.ROUTINE`` against ``scipy.linalg.blas.ROUTINE`` in this process.

    Parameters
    ----------
    routine : str
        Full routine name as in scipy.linalg.blas, e.g. ``'dgemm'``, ``'zherk'``, ``'daxpy'``.
    n : int, optional
        Problem size: matrix order for Level 2/3, vector length for Level 1 (defaults 1024, 2048, 10**6).
    repeat : int
        Alternating timed runs per library; the best is reported.
    threads : int, optional
        Threads for SciPy's OpenBLAS and CPU workers for the tile runtime (default: all cores).

    Returns
    -------
    dict
        Times, rates (GFLOP/s for Level 3, GB/s otherwise), the speed ratio and the largest relative
        difference between the two results.
    """
    import numpy as np
    import scipy.linalg.blas as sblas

    import tileblas.blas as tblas
    from tileblas.devices import cpu_count

    if not isinstance(routine, str) or not routine:
        raise ValueError(f"routine must be a BLAS routine name such as 'dgemm'; got {routine!r}")
    if routine not in getattr(sblas, "__all__", ()) and not (
        hasattr(sblas, routine) and _PREFIX_RE.match(routine)
    ):
        raise ValueError(f"unknown BLAS routine {routine!r}: scipy.linalg.blas has no routine of that name")
    if routine not in tblas.__all__:
        raise ValueError(f"routine {routine!r} is not (yet) provided by tileblas.blas")
    prefix, family = _split(routine)
    if family not in FAMILIES:
        raise ValueError(
            f"routine {routine!r}: no argument builder for the '{family}' family; supported families: "
            + ", ".join(FAMILIES)
        )
    level = _level(family)
    if n is None:
        n = DEFAULT_N[level]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"--n must be a positive integer; got {n!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"--repeat must be a positive integer; got {repeat!r}")
    if threads is None:
        threads = cpu_count()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"--threads must be a positive integer; got {threads!r}")

    dtype = _dtype_of_prefix(prefix)
    builders = _l3_builders() if level == 3 else _l12_builders()
    build, work = builders[family]
    rng = np.random.default_rng(0)
    args, kw = build(n, dtype, rng)
    f_t, f_s = getattr(tblas, routine), getattr(sblas, routine)
    before = scipy_openblas_threads()
    scipy_threads = set_scipy_openblas_threads(threads)
    ctx, mode = _tileblas_context(threads, level)
    try:
        with ctx:
            diff, best, inner = _time_pair(f_t, f_s, args, kw, repeat)
    finally:  # leave SciPy's thread count as it was
        for name, t in before.items():
            _set_one(name, t)

    cplx = dtype.kind == "c"
    result: dict[str, Any] = {
        "routine": routine,
        "level": level,
        "n": n,
        "dtype": str(dtype),
        "repeat": repeat,
        "inner_loop": inner,
        "threads": threads,
        "tileblas_mode": mode,
        "scipy_openblas_threads": scipy_threads,
        "max_rel_diff": diff,
    }
    for lib in ("tileblas", "scipy"):
        entry: dict[str, float] = {"best_s": best[lib]}
        if level == 3:
            entry["gflops"] = work(n) * (4 if cplx else 1) / best[lib] / 1e9
        else:
            entry["gbytes_per_s"] = work(n) * dtype.itemsize / best[lib] / 1e9
        result[lib] = entry
    result["speedup_vs_scipy"] = best["scipy"] / best["tileblas"]
    return result


def _print_result(r: dict[str, Any]) -> None:
    rate = "GFLOP/s" if r["level"] == 3 else "GB/s"
    key = "gflops" if r["level"] == 3 else "gbytes_per_s"
    print(f"{r['routine']}  n={r['n']}  ({r['dtype']}, best of {r['repeat']} alternating runs"
          + (f" of {r['inner_loop']} calls" if r["inner_loop"] > 1 else "") + ")")
    print(f"threads: {r['threads']}; tileblas: {r['tileblas_mode']}; scipy OpenBLAS: "
          + ", ".join(f"{k}={v}" for k, v in r["scipy_openblas_threads"].items()))
    print(f"{'library':<22}{'seconds':>14}{rate:>12}")
    for lib, label in (("tileblas", "tileblas.blas"), ("scipy", "scipy.linalg.blas")):
        e = r[lib]
        print(f"{label:<22}{e['best_s']:>14.6g}{e[key]:>12.2f}")
    print(f"tileblas speed / scipy speed: {r['speedup_vs_scipy']:.2f}x   "
          f"max relative difference: {r['max_rel_diff']:.1e}")


def _cmd_bench_blas(args: argparse.Namespace) -> int:
    r = bench_blas(args.routine, n=args.n, repeat=args.repeat, threads=args.threads)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        _print_result(r)
    return 0


def register(sub: Any) -> None:
    """Add ``tileblas bench`` (if no other plugin did) and its ``blas`` target."""
    bench = sub.choices.get("bench") if hasattr(sub, "choices") else None
    if bench is None:
        bench = sub.add_parser("bench", help="benchmarks against a baseline measured in the same run")
        bench._tileblas_targets = bench.add_subparsers(dest="bench_target", metavar="TARGET")

        def _no_target(args: argparse.Namespace, _p: argparse.ArgumentParser = bench) -> int:
            targets = [c for a in _p._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices]
            _p.error(f"name the target: {{{','.join(targets)}}} (tileblas bench -h)")
            return 2

        bench.set_defaults(func=_no_target)
    targets = bench._tileblas_targets
    p = targets.add_parser(
        "blas",
        help="tileblas.blas.ROUTINE against scipy.linalg.blas.ROUTINE",
        description="Time tileblas.blas.ROUTINE and scipy.linalg.blas.ROUTINE alternately in one process "
        "(best of --repeat) and report seconds, GFLOP/s (Level 3) or GB/s (Level 1/2) and their ratio.",
    )
    p.add_argument("routine", help="routine name as in scipy.linalg.blas, e.g. dgemm, zherk, daxpy, dgemv")
    p.add_argument("--n", type=count(1), default=None,
                   help="matrix order (Level 2/3) or vector length (Level 1); default 1024 / 2048 / 1e6")
    p.add_argument("--repeat", type=count(1), default=5, help="alternating timed runs per library (default 5)")
    p.add_argument("--threads", type=count(1), default=None,
                   help="SciPy's OpenBLAS threads and tile-runtime CPU workers (default: all cores)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_bench_blas)
    from tileblas.cli._bench_grid import add_grid_arguments, grid_main

    g = targets.add_parser(
        "grid",
        help="tileblas.blas against scipy.linalg.blas over every Level-3 routine, precision, size, shape and layout",
        description="The Level-3 grid (see tileblas.cli._bench_grid): interleaved rounds of SciPy, tileblas and "
        "SciPy again after a pause, best of 5 (the median kept too); ratio = SciPy/tileblas, control = "
        "SciPy/SciPy-again. Modes (--modes warm,cold,load): warm as described; cold, each timed call the first "
        "after --idle seconds, right after one call of the other library; load, as warm beside --load-procs "
        "busy processes. Every point and mode also counts the distinct results of --det-calls identical calls "
        "of each library. Writes JSON and a heat-map PNG per mode, prints per mode the worst points and those "
        "above 1.05x, and the points with more than one distinct result.",
    )
    add_grid_arguments(g)
    g.set_defaults(func=grid_main)

