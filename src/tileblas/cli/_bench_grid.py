"""The Level-3 grid benchmark: ``tileblas.blas`` against ``scipy.linalg.blas`` over routines, precisions,
sizes, shapes, layouts and trmm/trsm flags, in three modes (``tileblas bench grid``,
``benchmarks/bench_grid.py``).

Modes (``--modes warm,cold,load``; every grid point is timed once per mode, the modes of a point one
after the other)
    ``warm``
        Each point is timed in ``rounds`` interleaved rounds of SciPy, tileblas and SciPy again (the
        control).  Before each implementation's turn the benchmark pauses ``settle`` seconds (the other
        OpenBLAS instance's threads go idle), makes one untimed warm-up call, then times a block of
        back-to-back calls: one call once a call takes ``block_s`` (50 ms) or longer, else as many as
        fill ``block_s`` (sized from the first round, at most ``max_block``; the same rule for every
        implementation).  Small calls take thousands of calls per block: a block of well under a
        millisecond measures the timer and the machine's noise more than the call.  A block ends early
        once it has run ``block_cap_s`` (1 s), its time per call from the calls it made: under load,
        SciPy's calls of order 16-128 ran up to a thousand times slower in a block than the one call
        that sized it (1-8 ms against about 9 us), and a block of thousands of them ran for a minute.
    ``cold``
        Every timed call is the first call after an idle pause (``idle``, 0.2 s), made right after one
        untimed call of the *other* library: tileblas is timed after a SciPy call and the pause, SciPy
        after a tileblas call and the pause, and the control is SciPy after a SciPy call and the pause.
        One timed call per pause, no warm-up, no blocks; the three turns of a round are taken in
        reversed order every other round.
    ``load``
        As ``warm``, while ``load_procs`` busy processes spin beside it (pure-Python arithmetic, a
        separate interpreter each: :class:`~tileblas.cli._bench_modes.BusyNeighbours`).  They are started
        once for the whole grid, paused (blocked on their control pipe, no CPU) while the other modes'
        points run, and always stopped at the end: on success, on an exception, on Ctrl-C; a process
        whose grid died exits on its own (end of its control pipe).

    Every call allocates its own output (``overwrite_*`` off, as SciPy's defaults), so no input is
    changed and every call starts from the same data.  ``ratio`` = SciPy / tileblas (> 1: tileblas
    faster) and ``control`` = SciPy / SciPy-again (the noise of the comparison itself; 1.00 on a quiet
    machine), both from the *best* time per call over the rounds; the median over the rounds is kept
    beside it in the JSON (``samples``, ``median_s``, ``ratio_median``, ``control_median``) and in the
    summary.  The heat map: one file per mode, the ratio on a logarithmic colour scale centred on 1.00
    and stated on its colour bar (an arrow where values go beyond it; every cell prints its value).

Determinism
    After the timing of each point and mode (untimed, after the pool's counters are read), tileblas'
    call and SciPy's are made ``det_calls`` times each (40), interleaved (tileblas then SciPy, SciPy
    then tileblas, ...), with idle gaps of 1-50 ms before every fourth pair
    (:func:`~tileblas.cli._bench_modes.distinct_results`); the distinct results (hashes of the output
    bytes) of each are kept (``det``, ``det_distinct``), and a point with more than one distinct result
    of either library is flagged in the summary, the JSON (``nondeterministic``) and the heat map (*).

Pool counters
    ``pool``: the differences, over the timing of the point, of every integer counter that
    ``tileblas.kernels._pool.stats()`` returns (whatever its keys; none where there is no pool).

Grid
    Routines gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm, trsm in every precision SciPy offers;
    sizes 16..4096 (6144 for dgemm); shapes ``square``, ``k64`` (inner dimension 64: gemm, syrk, syr2k,
    herk, her2k), ``m64`` (gemm with 64 output rows), ``rhs64`` (64 right-hand sides: symm, hemm, trmm,
    trsm); C- and Fortran-ordered inputs; and every side/uplo/trans/diag variant of trmm/trsm at one size
    (``variants_n``, default 1024).  ``quick`` is a subset for a 1-2 minute run.

What it must not touch
    The library's decisions: it only calls the public routines.  NumPy, SciPy, matplotlib and tqdm are
    imported by the functions that use them.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import numbers
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping

from tileblas._progress import Progress
from tileblas._timing import Timings, interleaved
from tileblas.cli import _args
from tileblas.cli._bench_modes import DET_GAPS, BusyNeighbours, det_gaps, distinct_results

__all__ = ["Point", "grid_points", "estimate_seconds", "calibrate_rate", "run_grid", "summarize", "plot_grid",
           "plot_modes", "write_json", "machine_load", "grid_main", "add_grid_arguments", "check_arguments",
           "ROUTINES", "SIZES", "QUICK", "MODES", "noisy", "NOISY_CONTROL"]

ROUTINES = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")
COMPLEX_ONLY = ("hemm", "herk", "her2k")
SIZES = (16, 32, 64, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
SHAPE_NAMES = ("square", "k64", "m64", "rhs64")
SHAPES = {"gemm": ("square", "k64", "m64"), "symm": ("square", "rhs64"), "hemm": ("square", "rhs64"),
          "syrk": ("square", "k64"), "herk": ("square", "k64"), "syr2k": ("square", "k64"),
          "her2k": ("square", "k64"), "trmm": ("square", "rhs64"), "trsm": ("square", "rhs64")}
#: The quick subset: (prefixes, sizes, shapes, orders, variants).
#: Real routines in double precision, the Hermitian ones in complex double.
QUICK = {"prefixes": "dz", "sizes": (64, 256, 1024), "shapes": ("square",), "orders": ("F", "C"),
         "variants_n": 0, "rounds": 3}
#: The timing modes, in the order a point's modes are timed (see the module docstring).
MODES = ("warm", "cold", "load")


@dataclass
class Point:
    routine: str                 # e.g. "dgemm"
    n: int
    shape: str = "square"
    order: str = "F"
    flags: dict = field(default_factory=dict)
    mode: str = "warm"           # one of MODES
    scipy_s: float = math.nan    # best seconds per call over the rounds (ratio, control, heat map)
    tileblas_s: float = math.nan
    control_s: float = math.nan
    block: int = 1
    path: str = ""
    max_rel_diff: float = math.nan
    rounds: int = 0              # interleaved rounds behind the times
    #: seconds per call of every round, per contender ("scipy", "tileblas", "control"): the medians
    samples: dict = field(default_factory=dict)
    #: tileblas' thread pool while the point was timed: the differences of every integer counter of
    #: tileblas.kernels._pool.stats() (whatever keys it has)
    pool: dict = field(default_factory=dict)
    #: the distinct results of the determinism calls: library ("tileblas", "scipy") -> sorted output hashes
    det: dict = field(default_factory=dict)
    det_calls: int = 0           # determinism calls per library behind ``det``

    @property
    def ratio(self) -> float:
        return self.scipy_s / self.tileblas_s

    @property
    def control(self) -> float:
        return self.scipy_s / self.control_s

    def median_s(self, who: str) -> float:
        """Median seconds per call of ``who`` ("scipy", "tileblas", "control") over the rounds."""
        s = self.samples.get(who) or ()
        return float(statistics.median(s)) if s else math.nan

    @property
    def ratio_median(self) -> float:
        return self.median_s("scipy") / self.median_s("tileblas")

    @property
    def control_median(self) -> float:
        return self.median_s("scipy") / self.median_s("control")

    def distinct(self, lib: str) -> int:
        """Distinct results of ``lib``'s determinism calls (0: none made)."""
        return len(self.det.get(lib, ()))

    @property
    def nondeterministic(self) -> bool:
        """More than one distinct result of either library over the determinism calls."""
        return any(len(h) > 1 for h in self.det.values())

    def label(self) -> str:
        fl = "".join(f" {k}={v}" for k, v in self.flags.items())
        return f"{self.routine:6s} n={self.n:<5d} {self.shape:6s} {self.order}{fl}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio"] = self.ratio
        d["control"] = self.control
        d["median_s"] = {k: self.median_s(k) for k in ("scipy", "tileblas", "control")}
        d["ratio_median"] = self.ratio_median
        d["control_median"] = self.control_median
        d["det_distinct"] = {k: self.distinct(k) for k in sorted(self.det)}
        d["nondeterministic"] = self.nondeterministic
        d["flops"] = flops(self)
        return d


def _dims(p: Point) -> tuple[int, int, int]:
    """(rows of the output, columns of the output, inner dimension / triangle order)."""
    n = p.n
    if p.shape == "k64":
        return (n, n, 64)
    if p.shape == "m64":
        return (64, n, n)
    if p.shape == "rhs64":
        side = p.flags.get("side", 0)
        return (n, 64, n) if side == 0 else (64, n, n)
    return (n, n, n)


def flops(p: Point) -> float:
    """Real flops of the point's call (complex counted 4x)."""
    m, n, k = _dims(p)
    fam = p.routine[1:]
    f = {"gemm": 2.0 * m * n * k, "symm": 2.0 * m * n * k, "hemm": 2.0 * m * n * k,
         "syrk": 1.0 * n * (n + 1) * k, "herk": 1.0 * n * (n + 1) * k,
         "syr2k": 2.0 * n * (n + 1) * k, "her2k": 2.0 * n * (n + 1) * k}.get(fam, 1.0 * m * n * k)
    return f * (4.0 if p.routine[0] in "cz" else 1.0)


def grid_points(quick: bool = False, sizes: Iterable[int] | None = None, prefixes: str = "sdcz",
                routines: Iterable[str] = ROUTINES, orders: Iterable[str] = ("F", "C"),
                shapes: Iterable[str] | None = None, variants_n: int = 1024, max_n: int | None = None,
                modes: Iterable[str] = ("warm",)) -> list[Point]:
    """The points of the grid (or of the quick subset), cheapest first within each routine; each point once
    per mode of ``modes``, the modes of a point one after the other."""
    if quick:
        prefixes = "".join(c for c in prefixes if c in QUICK["prefixes"]) or QUICK["prefixes"]
        sizes = sizes or QUICK["sizes"]
        shapes = shapes or QUICK["shapes"]
        orders = QUICK["orders"] if tuple(orders) == ("F", "C") else orders
        variants_n = QUICK["variants_n"]
    routines = list(routines)
    for r in routines:
        if r not in ROUTINES:
            raise ValueError(f"routines must be among {ROUTINES}; got {r!r}")
    for c in prefixes:
        if c not in "sdcz":
            raise ValueError(f"prefixes must be letters of 'sdcz'; got {prefixes!r}")
    orders = list(orders)
    for o in orders:
        if o not in ("C", "F"):
            raise ValueError(f"orders must be 'C' and/or 'F'; got {o!r}")
    modes = list(dict.fromkeys(modes))
    for m in modes:
        if m not in MODES:
            raise ValueError(f"modes must be among {','.join(MODES)}; got {m!r}")
    pts: list[Point] = []
    for fam in routines:
        for pre in prefixes:
            if fam in COMPLEX_ONLY and pre in "sd":
                continue
            ns = list(sizes or SIZES)
            if sizes is None and fam == "gemm" and pre == "d":
                ns.append(6144)
            for shape in SHAPES[fam]:
                if shapes is not None and shape not in shapes:
                    continue
                if quick and pre == "z" and fam not in COMPLEX_ONLY and "d" in prefixes:
                    continue
                for n in ns:
                    if max_n is not None and n > max_n:
                        continue
                    if shape != "square" and n < 64:
                        continue
                    for o in orders:
                        pts.extend(Point(pre + fam, n, shape, o, mode=m) for m in modes)
            if fam in ("trmm", "trsm") and variants_n and pre in prefixes:
                trans = (0, 1, 2) if pre in "cz" else (0, 1)
                for side, lower, ta, diag in itertools.product((0, 1), (0, 1), trans, (0, 1)):
                    if (side, lower, ta, diag) == (0, 0, 0, 0):
                        continue  # the default flags are in the size sweep
                    pts.extend(Point(pre + fam, variants_n, "square", "F",
                                     {"side": side, "lower": lower, "trans_a": ta, "diag": diag}, mode=m)
                               for m in modes)
    return pts


def _rate(pre: str, rate_gflops: float) -> float:
    return rate_gflops * (2.0 if pre in "sc" else 1.0) * 1e9


def estimate_seconds(points: list[Point], rounds: int = 5, settle: float = 0.2, block_s: float = 0.05,
                     rate_gflops: float = 60.0, idle: float = 0.2, det_calls: int = 0) -> float:
    """Estimated wall time: per point and round, three turns (warm and load: pause + warm-up call + timed
    block; cold: the other library's call + idle pause + one timed call), the correctness check and
    ``det_calls`` determinism calls of each library with their gaps."""
    total = 0.0
    gaps = sum(det_gaps(det_calls))
    for p in points:
        t = flops(p) / _rate(p.routine[0], rate_gflops) + 2e-6
        turn = idle + 2 * t if p.mode == "cold" else settle + t + max(t, block_s)
        total += rounds * 3 * turn + 3 * t + det_calls * 2 * t + gaps
    return total


def calibrate_rate() -> float:
    """GFLOP/s of one 2-thread dgemm of order 1024 on tileblas' OpenBLAS (for the time estimate)."""
    import numpy as np

    from tileblas.kernels import _openblas
    from tileblas.devices import cpu_count

    lib = _openblas.get_library(cpu_count())
    a = np.asfortranarray(np.random.default_rng(0).standard_normal((1024, 1024)))
    c = np.zeros_like(a)
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        _openblas.gemm(1.0, a, a, 0.0, c, lib=lib)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * 1024**3 / best / 1e9


def _operands(p: Point, rng: Any) -> tuple[tuple, dict]:
    import numpy as np

    dt = np.dtype({"s": "f4", "d": "f8", "c": "c8", "z": "c16"}[p.routine[0]])
    fam = p.routine[1:]

    def r(*shape: int) -> Any:
        x = rng.standard_normal(shape)
        if dt.kind == "c":
            x = x + 1j * rng.standard_normal(shape)
        x = x.astype(dt)
        return np.ascontiguousarray(x) if p.order == "C" else np.asfortranarray(x)

    m, n, k = _dims(p)
    kw = dict(p.flags)
    if fam == "gemm":
        return (1.0, r(m, k), r(k, n)), kw
    if fam in ("symm", "hemm"):
        return (1.0, r(k, k), r(m, n)), kw
    if fam in ("syrk", "herk"):
        return (1.0, r(n, k)), kw
    if fam in ("syr2k", "her2k"):
        return (1.0, r(n, k), r(n, k)), kw
    # trmm/trsm: a well-conditioned triangle (both triangles filled, only one is read)
    a = r(k, k) / k + 2.0 * np.eye(k, dtype=dt)
    a = np.ascontiguousarray(a) if p.order == "C" else np.asfortranarray(a)
    side = kw.get("side", 0)
    b = r(k, 64 if p.shape == "rhs64" else k) if side == 0 else r(64 if p.shape == "rhs64" else k, k)
    return (1.0, a, b), kw


def _path_of_last_call() -> str:
    try:
        from tileblas.runtime._runtime import get_runtime

        prof = get_runtime().last_profile()
        return "" if prof is None else prof.path
    except Exception:  # noqa: BLE001 - the path is informative only
        return ""


def _pool_counters() -> dict[str, int]:
    """Every integer counter of ``tileblas.kernels._pool.stats()`` now (empty where there is no pool, and
    whatever keys the pool has: a key it drops is simply absent)."""
    try:
        from tileblas.kernels import _pool

        st = _pool.stats()
        items = list(st.items())
    except Exception:  # noqa: BLE001 - informative only; a build without the pool has none
        return {}
    return {str(k): int(v) for k, v in items
            if isinstance(v, numbers.Integral) and not isinstance(v, bool)}


def _pool_differences(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """``after - before`` for the counters both readings have."""
    return {k: after[k] - before[k] for k in after if k in before}


# ---------------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------------


def _timed(mode: str, f_s: Callable, f_t: Callable, args: tuple, kw: dict, rounds: int, settle: float,
           block_s: float, max_block: int, idle: float, block_cap_s: float = math.inf) -> Timings:
    """The point's three contenders timed as ``mode`` says (see the module docstring)."""
    if mode == "cold":
        def after(prep: Callable, timed: Callable) -> Callable[[], Callable[[], Any]]:
            def prepare() -> Callable[[], Any]:
                prep(*args, **kw)  # the other library's call, untimed, before the pause
                return lambda: timed(*args, **kw)
            return prepare

        # fresh: the untimed call, then the pause, then one timed call; ABBA order over the rounds
        return interleaved({"scipy": after(f_t, f_s), "tileblas": after(f_s, f_t), "control": after(f_s, f_s)},
                           rounds, fresh=True, settle=idle, alternate=True)
    # warm and load: a pause and one warm-up call before each turn; one block size for all three, from SciPy's
    return interleaved({"scipy": lambda: f_s(*args, **kw), "tileblas": lambda: f_t(*args, **kw),
                        "control": lambda: f_s(*args, **kw)}, rounds, settle=settle, warmup=1,
                       block_s=block_s, max_block=max_block, block_from="scipy", block_cap_s=block_cap_s)


def _versions() -> dict[str, Any]:
    """What the figures depend on besides the machine: NumPy, SciPy, tileblas, and every BLAS library in
    the process with its version and threads (threadpoolctl's view, where it is installed)."""
    import numpy
    import scipy

    from tileblas._version import __version__

    out: dict[str, Any] = {"numpy": numpy.__version__, "scipy": scipy.__version__, "tileblas": __version__}
    try:
        from threadpoolctl import threadpool_info

        out["blas"] = [{"file": os.path.basename(i.get("filepath", "")), "version": i.get("version"),
                        "threads": i.get("num_threads"), "architecture": i.get("architecture")}
                       for i in threadpool_info() if i.get("user_api") == "blas"]
    except ImportError:
        out["blas"] = "threadpoolctl not installed"
    return out


def run_grid(points: list[Point], rounds: int = 5, settle: float = 0.2, block_s: float = 0.05,
             max_block: int = 100_000, progress: Callable[[Point], None] | None = None, *, idle: float = 0.2,
             det_calls: int = 40, load: BusyNeighbours | None = None, block_cap_s: float = 1.0) -> list[Point]:
    """Time every point (in place) in its mode, count its distinct results, and return the points.

    ``load``: the busy processes of the ``load`` points, started by the caller (they are let run for
    the timing and the determinism calls of each such point, paused after); without it, one busy process
    is started here for the points of mode ``load`` and stopped before returning.
    """
    import numpy as np
    import scipy.linalg.blas as sb

    from tileblas import blas as tb

    for p in points:
        if p.mode not in MODES:
            raise ValueError(f"mode must be among {','.join(MODES)}; got {p.mode!r} ({p.label()})")
    own = BusyNeighbours(1) if load is None and any(p.mode == "load" for p in points) else None
    with own if own is not None else contextlib.nullcontext():
        load = own or load
        rng = np.random.default_rng(0)
        for p in points:
            args, kw = _operands(p, rng)
            f_s = getattr(sb, p.routine)
            f_t = getattr(tb, p.routine)
            want = f_s(*args, **kw)
            try:
                from tileblas.runtime._runtime import get_runtime

                calls0 = get_runtime().stats()["calls"]
            except Exception:  # noqa: BLE001
                calls0 = None
            got = f_t(*args, **kw)
            scale = float(np.abs(want).max()) or 1.0
            p.max_rel_diff = float(np.abs(got - want).max()) / scale
            path = _path_of_last_call()
            try:
                from tileblas.runtime._runtime import get_runtime

                if calls0 is not None and get_runtime().stats()["calls"] == calls0:
                    path = "fast"  # answered in front of the runtime (C fast path)
            except Exception:  # noqa: BLE001
                pass
            p.path = path
            if p.mode == "load":
                load.run()
            try:
                pool0 = _pool_counters()
                timed = _timed(p.mode, f_s, f_t, args, kw, rounds, settle, block_s, max_block, idle, block_cap_s)
                pool1 = _pool_counters()
                # untimed, after the timing and its counters: the same calls again, their distinct results
                det = distinct_results({"tileblas": lambda: f_t(*args, **kw), "scipy": lambda: f_s(*args, **kw)},
                                       det_calls)
            finally:
                if p.mode == "load":
                    load.pause()
            best, p.block = timed.best, timed.block["scipy"]
            # A point timed again keeps the best of all its rounds: best of 5 + 10 is best of 15.
            p.scipy_s = min(best["scipy"], p.scipy_s) if math.isfinite(p.scipy_s) else best["scipy"]
            p.tileblas_s = min(best["tileblas"], p.tileblas_s) if math.isfinite(p.tileblas_s) else best["tileblas"]
            p.control_s = min(best["control"], p.control_s) if math.isfinite(p.control_s) else best["control"]
            for k, v in timed.samples.items():
                p.samples[k] = list(p.samples.get(k, [])) + list(v)
            p.rounds += timed.rounds
            for key, d in _pool_differences(pool0, pool1).items():
                p.pool[key] = p.pool.get(key, 0) + d
            for lib, hashes in det.items():
                p.det[lib] = sorted(set(p.det.get(lib, ())) | set(hashes))
            p.det_calls += det_calls
            if progress is not None:
                progress(p)
    return points


# ---------------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------------

_MODE_NOTE = {"warm": "pause, warm-up call, block of calls",
              "cold": "one call after the other library's call and an idle pause",
              "load": "as warm, busy process(es) beside it"}


def _modes_of(points: Iterable[Point]) -> list[str]:
    present = {p.mode for p in points}
    return [m for m in MODES if m in present]


def _det_note(p: Point) -> str:
    """'  DISTINCT RESULTS tileblas 2, SciPy 1 (40 calls)' for a point with more than one, else ''."""
    if not p.nondeterministic:
        return ""
    return (f"  DISTINCT RESULTS tileblas {p.distinct('tileblas')}, SciPy {p.distinct('scipy')} "
            f"({p.det_calls} calls)")


def summarize(points: list[Point], worst: int = 12, bar: float = 0.97) -> list[str]:
    """Lines, per mode: counts against the bar (best and median of the rounds), the worst points, the
    points above 1.05x; then the determinism calls and the points with more than one distinct result."""
    done = [p for p in points if math.isfinite(p.tileblas_s)]
    if not done:
        return ["no points timed"]
    lines = []
    for mode in _modes_of(done):
        sel = [p for p in done if p.mode == mode]
        below = [p for p in sel if p.ratio < bar]
        ratios = sorted(p.ratio for p in sel)
        ctrl = sorted(p.control for p in sel)
        meds = sorted(p.ratio_median for p in sel if math.isfinite(p.ratio_median))
        lines.append(f"{len(sel)} points, mode {mode} ({_MODE_NOTE[mode]}); ratio SciPy/tileblas, best of rounds: "
                     f"min {ratios[0]:.2f}, median {ratios[len(ratios) // 2]:.2f}; {len(below)} below {bar:.2f}x; "
                     + (f"median of rounds: median {meds[len(meds) // 2]:.2f}; " if meds else "")
                     + f"control SciPy/SciPy min {ctrl[0]:.2f}, median {ctrl[len(ctrl) // 2]:.2f}, max {ctrl[-1]:.2f}")
        lines.append(f"  worst {min(worst, len(sel))} points, mode {mode} (ratio best, ratio median, control, "
                     f"tileblas path):")
        for p in sorted(sel, key=lambda q: q.ratio)[:worst]:
            lines.append(f"    {p.ratio:5.2f}x  median {p.ratio_median:5.2f}x  control {p.control:4.2f}  {p.label()}  "
                         f"[{p.path}]  {p.tileblas_s * 1e3:.4g} ms vs {p.scipy_s * 1e3:.4g} ms{_det_note(p)}")
        above = sorted((p for p in sel if p.ratio > 1.05), key=lambda q: -q.ratio)
        lines.append(f"  {len(above)} points above 1.05x, mode {mode}:")
        for p in above:
            lines.append(f"    {p.ratio:5.2f}x  control {p.control:4.2f}  {p.label()}  [{p.path}]")
    checked = [p for p in done if p.det]
    flagged = [p for p in checked if p.nondeterministic]
    if checked:
        calls = sorted({p.det_calls for p in checked})
        lines.append(f"determinism: {len(checked)} points x modes, {'/'.join(map(str, calls))} identical calls each "
                     f"of tileblas and SciPy; {len(flagged)} with more than one distinct result"
                     + (":" if flagged else ""))
        for p in flagged:
            lines.append(f"    {p.label()}  mode {p.mode}{_det_note(p)}")
    return lines


def _scale(values: list[float]) -> tuple[Any, str, list[float]]:
    """The heat maps' colour scale: logarithmic, centred on 1.00 (white), from 1/s to s where s is the
    largest deviation of ``values`` (as a factor) between 1.3 and 2; a value beyond the scale keeps the end
    colour, and the colour bar then shows an arrow on that side (its cell prints the value).  Returns the
    norm, the colour bar's ``extend`` and its ticks."""
    from matplotlib.colors import LogNorm

    finite = [v for v in values if math.isfinite(v) and v > 0]
    span = min(2.0, max([1.3] + [max(v, 1.0 / v) for v in finite]))
    under = any(v < 1.0 / span for v in finite)
    over = any(v > span for v in finite)
    extend = "both" if under and over else "min" if under else "max" if over else "neither"
    ticks = [span ** (x / 2.0) for x in (-2, -1, 0, 1, 2)]
    return LogNorm(vmin=1.0 / span, vmax=span), extend, ticks


#: A point's control (SciPy / SciPy again) off 1 by more than this factor marks it noisy on the heat map.
NOISY_CONTROL = 1.05


def noisy(p: Point) -> bool:
    """The point's control shows noise: SciPy timed twice differs by more than :data:`NOISY_CONTROL`, or by
    more than the ratio differs from 1 (the ratio then lies within the noise)."""
    c, r = p.control, p.ratio
    if not (math.isfinite(c) and c > 0 and math.isfinite(r) and r > 0):
        return True
    return abs(math.log(c)) > math.log(NOISY_CONTROL) or abs(math.log(c)) >= abs(math.log(r))


def _tick_labels(ticks: list[float], extend: str) -> list[str]:
    """Colour bar tick labels; a clipped end says so (``<=0.77``, ``>=1.30``)."""
    labels = [f"{t:.2f}" for t in ticks]
    if extend in ("min", "both"):
        labels[0] = "\u2264" + labels[0]
    if extend in ("max", "both"):
        labels[-1] = "\u2265" + labels[-1]
    return labels


def plot_grid(points: list[Point], path: str, title: str = "", mode: str | None = None) -> str:
    """Heat map PNG of one mode (``mode``; default: the first mode of ``points``): one panel per
    precision x shape x order, routine x size, colour = SciPy time / tileblas time (best of rounds) on
    the log scale of :func:`_scale` (stated on the colour bar, with an arrow where values go beyond it);
    each cell prints its ratio, '*' marks a point with more than one distinct result, hatching a point
    whose control shows noise (:func:`noisy`).  Sized to stay readable at 800-1000 pixels wide: at most
    three panels a row, 7-9 point type."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    timed = [p for p in points if math.isfinite(p.tileblas_s)]
    if mode is None:
        mode = (_modes_of(timed) or ["warm"])[0]
    timed = [p for p in timed if p.mode == mode]
    main = [p for p in timed if not p.flags]
    panels = sorted({(p.routine[0], p.shape, p.order) for p in main}, key=lambda t: ("sdcz".index(t[0]), t[1], t[2]))
    var = [p for p in timed if p.flags]
    count = len(panels) + (1 if var else 0)
    cols = min(3, max(1, count))
    rows = max(1, -(-count // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols + 1.4, 3.3 * rows + 1.0), squeeze=False,
                             layout="constrained")
    from matplotlib.patches import Polygon

    def hatch(ax: Any, j: float, i: float) -> None:  # a noisy point: its cell's upper right corner hatched
        ax.add_patch(Polygon([(j + 0.5, i - 0.5), (j + 0.05, i - 0.5), (j + 0.5, i - 0.1)], closed=True,
                             facecolor="none", hatch="/////", edgecolor="0.15", linewidth=0.6))
    n_noisy = sum(noisy(p) for p in timed)
    norm, extend, ticks = _scale([p.ratio for p in timed])
    strong = 0.6 * math.log(norm.vmax)
    im = None

    def ink(v: float) -> str:
        return "white" if abs(math.log(v)) > strong else "black"

    for ax, (pre, shape, order) in zip(axes.flat, panels):
        sel = [p for p in main if p.routine[0] == pre and p.shape == shape and p.order == order]
        names = [r for r in ROUTINES if any(p.routine[1:] == r for p in sel)]
        sizes = sorted({p.n for p in sel})
        grid = np.full((len(names), len(sizes)), np.nan)
        for p in sel:
            i, j = names.index(p.routine[1:]), sizes.index(p.n)
            grid[i, j] = p.ratio
            ax.text(j, i, f"{p.ratio:.2f}" + ("*" if p.nondeterministic else ""), ha="center", va="center",
                    fontsize=7 if len(sizes) <= 8 else 6, color=ink(p.ratio))
            if noisy(p):
                hatch(ax, j, i)
        im = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto")
        ax.set_xticks(range(len(sizes)), [str(s) for s in sizes], fontsize=7, rotation=45)
        ax.set_yticks(range(len(names)), [pre + n for n in names], fontsize=8)
        ax.set_xlabel("n, matrix order (shape: " + {"square": "m = n = k", "k64": "k = 64", "m64": "m = 64",
                                                     "rhs64": "64 right-hand sides"}.get(shape, shape) + ")",
                      fontsize=8)
        ax.set_ylabel("routine", fontsize=8)
        ax.set_title(f"{pre} {shape}, {order}-ordered operands, {mode}", fontsize=9)
    if var:
        ax = axes.flat[len(panels)]
        combos = list(dict.fromkeys("".join(str(v) for v in p.flags.values()) for p in var))
        vnames = list(dict.fromkeys(p.routine for p in var))
        grid = np.full((len(vnames), len(combos)), np.nan)
        for p in var:
            i, j = vnames.index(p.routine), combos.index("".join(str(v) for v in p.flags.values()))
            grid[i, j] = p.ratio
            ax.text(j, i, f"{p.ratio:.2f}" + ("*" if p.nondeterministic else ""), ha="center", va="center",
                    rotation=90 if len(combos) > 8 else 0, fontsize=7, color=ink(p.ratio))
            if noisy(p):
                hatch(ax, j, i)
        im = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto")
        ax.set_xticks(range(len(combos)), combos, fontsize=7, rotation=90)
        ax.set_yticks(range(len(vnames)), vnames, fontsize=8)
        ax.set_xlabel("flags: side, lower, trans, diag (0/1, as scipy.linalg.blas)", fontsize=8)
        ax.set_ylabel("routine", fontsize=8)
        ax.set_title(f"trmm/trsm flags, n={var[0].n}, {mode}", fontsize=9)
    for ax in list(axes.flat)[count:]:
        ax.axis("off")
    if im is not None:
        cb = fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, extend=extend)
        cb.minorticks_off()
        cb.set_ticks(ticks, labels=_tick_labels(ticks, extend))
        cb.ax.tick_params(labelsize=8)
        ends = [e for e in _tick_labels(ticks, extend) if e[0] in "\u2264\u2265"]
        clip = f"; clipped: {' and '.join(ends)} (arrow{'s' if len(ends) > 1 else ''})" if ends else ""
        cb.set_label(f"speed-up = SciPy time / tileblas time (best of rounds)\nlog scale "
                     f"{norm.vmin:.2f}-{norm.vmax:.2f}, white 1.00{clip}", fontsize=8)
    fig.suptitle(title or f"tileblas.blas vs scipy.linalg.blas, mode {mode}: {_MODE_NOTE[mode]}\n"
                          "speed-up > 1 (blue): tileblas faster; each cell prints its speed-up; * more than one "
                          f"distinct result\nhatched corner: noisy, the control SciPy/SciPy off 1 by more than "
                          f"{NOISY_CONTROL - 1:.0%} or by more than the speed-up ({n_noisy} of {len(timed)} points)",
                 fontsize=9, wrap=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_modes(points: list[Point], path: str) -> list[str]:
    """One heat map per mode of ``points``: ``path`` itself for a single mode, else ``path`` with
    ``-MODE`` before its extension for each (``grid.png`` -> ``grid-warm.png``, ``grid-cold.png``)."""
    modes = _modes_of(p for p in points if math.isfinite(p.tileblas_s)) or ["warm"]
    if len(modes) == 1:
        return [plot_grid(points, path, mode=modes[0])]
    stem, ext = os.path.splitext(path)
    return [plot_grid(points, f"{stem}-{m}{ext or '.png'}", mode=m) for m in modes]


def write_json(points: list[Point], path: str, meta: dict[str, Any]) -> str:
    """The points (with ratio, control, their medians, the determinism fields and flops) and ``meta`` as
    JSON (written to a temporary file and renamed, so an interrupted run never leaves a half-written file)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"meta": meta, "points": [p.to_json() for p in points]}, f, indent=1)
    os.replace(tmp, path)
    return path


def point_key(p: Point) -> tuple:
    """What identifies a grid point (routine, size, shape, layout, flags, mode), independent of its timings."""
    return (p.routine, p.n, p.shape, p.order, tuple(sorted(p.flags.items())), p.mode)


def read_points(path: str) -> list[Point]:
    """The timed points of a JSON file written by :func:`write_json` (``--resume``; a point of a file
    written before the modes is a ``warm`` point)."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise ValueError(f"{path} is not a grid benchmark JSON file (no 'points' list)")
    names = set(Point.__dataclass_fields__)
    out = []
    for d in data["points"]:
        p = Point(**{k: v for k, v in d.items() if k in names})
        if math.isfinite(p.tileblas_s) and math.isfinite(p.scipy_s) and math.isfinite(p.control_s):
            out.append(p)
    return out


def machine_load() -> str:
    """The 1/5/15-minute load averages, as text."""
    try:
        a, b, c = os.getloadavg()
        return f"load average {a:.2f} {b:.2f} {c:.2f}"
    except OSError:
        return "load average unknown"


def add_grid_arguments(p: Any) -> None:
    """The grid benchmark's command-line options (shared by ``tileblas bench grid`` and the script)."""
    p.add_argument("--quick", action="store_true",
                   help="a ~2 minute subset: d (z for hemm/herk/her2k), sizes 64/256/1024, square, C and F order, 3 rounds")
    p.add_argument("--sizes", type=_args.sizes(1), default=None,
                   help="comma-separated sizes or start:stop:step (default 16..4096, 6144 for dgemm)")
    p.add_argument("--max-n", type=_args.count(1), default=None, help="leave out sizes above this")
    p.add_argument("--prefixes", default="sdcz", help="precisions, letters of sdcz (default all)")
    p.add_argument("--routines", type=_args.names(ROUTINES), default=",".join(ROUTINES),
                   help="comma-separated routine families")
    p.add_argument("--orders", type=_args.names(("F", "C")), default="F,C", help="input layouts: F, C or F,C")
    p.add_argument("--shapes", type=_args.names(SHAPE_NAMES), default=None,
                   help="comma-separated subset of square,k64,m64,rhs64")
    p.add_argument("--variants-n", type=_args.count(0), default=1024,
                   help="size of the trmm/trsm side/uplo/trans/diag variants (0: none)")
    p.add_argument("--mode", "--modes", dest="modes", type=_args.names(MODES), default="warm", metavar="MODES",
                   help="timing modes, comma-separated, each point timed in each: warm (pause, warm-up call, "
                        "block of calls; the default), cold (each timed call the first after --idle seconds, "
                        "right after one call of the other library), load (as warm, --load-procs busy "
                        "processes beside it)")
    p.add_argument("--rounds", type=_args.count(1), default=None,
                   help="interleaved rounds per point and mode (default 5; quick 3); ratio from the best, the "
                        "median kept too")
    p.add_argument("--settle", type=_args.number(0.0), default=0.2,
                   help="pause in seconds before each timed block (warm, load)")
    p.add_argument("--idle", type=_args.number(0.0), default=0.2,
                   help="cold mode: idle pause in seconds before each timed call (default 0.2)")
    p.add_argument("--load-procs", type=_args.count(1), default=1,
                   help="load mode: busy processes beside the timing (default 1)")
    p.add_argument("--det-calls", type=_args.count(2), default=40,
                   help="identical untimed calls of each library per point and mode whose distinct results are "
                        "counted, with idle gaps of 1-50 ms before some (default 40)")
    p.add_argument("--json", default="bench_grid.json", help="output JSON file")
    p.add_argument("--png", default="bench_grid.png",
                   help="output heat map PNG (several modes: one file per mode, NAME-MODE.png)")
    p.add_argument("--estimate-only", action="store_true", help="print the point count and time estimate, then stop")
    p.add_argument("--resume", action="store_true",
                   help="keep the points already timed in the --json file and time only the others (the file is "
                        "rewritten after every point, so a grid can be measured in several sittings)")
    p.add_argument("--minutes", type=_args.number(0.0, strict=True), default=None,
                   help="stop starting new points after this many minutes (with --resume, go on later)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _at_least(name: str, value: Any, low: float, strict: bool = False) -> None:
    if value is None:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and (
        value > low if strict else value >= low)
    if not ok:
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low:g}; got {value!r}")


def _listed(value: Any) -> list[str]:
    """A comma-separated option as a list, whether argparse's type made it one already or not."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(x).strip() for x in items if str(x).strip()]


def check_arguments(args: Any) -> dict[str, Any]:
    """The grid's options checked before anything runs, whether the command line's types parsed them
    (:mod:`tileblas.cli._args`) or a caller made ``args`` itself: a ValueError naming the option and its
    value for the first bad one; else the values as lists (sizes, routines, orders, shapes, modes) and the
    rounds in force."""
    sizes_ = None
    if args.sizes:
        raw = _listed(args.sizes)
        try:
            sizes_ = [int(x) for x in raw]
        except ValueError:
            sizes_ = None
        if not sizes_ or any(n < 1 for n in sizes_):
            raise ValueError(f"--sizes must be positive integers, comma-separated; got {args.sizes!r}")
    for option, value, allowed in (("--shapes", args.shapes, SHAPE_NAMES), ("--modes", args.modes, MODES),
                                   ("--routines", args.routines, ROUTINES), ("--orders", args.orders, ("F", "C"))):
        for x in _listed(value):
            if x not in allowed:
                raise ValueError(f"{option} must be among {','.join(allowed)}, comma-separated; got {x!r}")
    modes = list(dict.fromkeys(_listed(args.modes))) or ["warm"]
    rounds = args.rounds if args.rounds is not None else (QUICK["rounds"] if args.quick else 5)
    _at_least("--rounds", rounds, 1)
    _at_least("--settle", args.settle, 0)
    _at_least("--idle", args.idle, 0)
    _at_least("--det-calls", args.det_calls, 2)
    _at_least("--load-procs", args.load_procs, 1)
    _at_least("--variants-n", args.variants_n, 0)
    _at_least("--max-n", args.max_n, 1)
    _at_least("--minutes", args.minutes, 0, strict=True)
    return {"sizes": sizes_, "shapes": _listed(args.shapes) or None, "modes": modes, "rounds": rounds,
            "routines": _listed(args.routines), "orders": _listed(args.orders)}


def grid_main(args: Any) -> int:
    """Run the grid as the parsed ``args`` say: estimate, time (with a progress bar; the busy processes of
    the load mode around it all), summarize, write."""
    opts = check_arguments(args)
    rounds, modes = opts["rounds"], opts["modes"]
    points = grid_points(args.quick, opts["sizes"], args.prefixes, opts["routines"], opts["orders"], opts["shapes"],
                         args.variants_n, args.max_n, modes=modes)
    done: dict[tuple, Point] = {}
    if args.resume and args.json and os.path.exists(args.json):
        done = {point_key(p): p for p in read_points(args.json)}
        print(f"resuming: {sum(point_key(p) in done for p in points)} of {len(points)} points already timed "
              f"in {args.json}")
    todo = [p for p in points if point_key(p) not in done]
    rate = calibrate_rate()
    est = estimate_seconds(todo, rounds, args.settle, rate_gflops=rate, idle=args.idle, det_calls=args.det_calls)
    how = {"warm": f"{args.settle:g} s pause", "cold": f"{args.idle:g} s idle",
           "load": f"{args.load_procs} busy process(es)"}
    print(f"{len(todo)} points to time, {rounds} rounds of SciPy / tileblas / SciPy-again (modes "
          f"{', '.join(f'{m}: {how[m]}' for m in modes)}), {args.det_calls} determinism calls; "
          f"estimated {est / 60:.1f} min "
          f"(dgemm at {rate:.0f} GFLOP/s on {os.cpu_count()} cores); {machine_load()}", flush=True)
    if args.estimate_only:
        return 0
    bar = Progress(len(todo), not args.no_progress, "grid", "pt")
    t0 = time.perf_counter()
    meta = {"rounds": rounds, "settle_s": args.settle, "modes": modes, "idle_s": args.idle,
            "load_procs": args.load_procs, "det_calls": args.det_calls, "det_gaps_s": list(DET_GAPS),
            "statistic": "ratio, control and the heat map: best of rounds; median_s, ratio_median, "
                         "control_median: median of rounds",
            "estimate_s": est, "quick": args.quick, "cpu_count": os.cpu_count(), "load_before": machine_load(),
            "versions": _versions()}

    def merged() -> list[Point]:
        return [done.get(point_key(p), p) for p in points
                if point_key(p) in done or math.isfinite(p.tileblas_s)]

    def one(p: Point) -> None:
        if args.json:
            write_json(merged(), args.json, dict(meta, partial=True))
        bar.step(f"{p.routine} {p.n} {p.shape} {p.order} {p.mode} {p.ratio:.2f}x")

    stopped = 0
    common = dict(idle=args.idle, det_calls=args.det_calls)
    # the busy processes: started once for the whole grid, stopped at its end whatever ends it
    needs_load = any(p.mode == "load" for p in todo)
    with (BusyNeighbours(args.load_procs) if needs_load else contextlib.nullcontext()) as load:
        try:
            for i, p in enumerate(todo):
                if args.minutes is not None and time.perf_counter() - t0 > 60.0 * args.minutes:
                    stopped = len(todo) - i
                    break
                run_grid([p], rounds, args.settle, progress=one, load=load, **common)
        finally:
            bar.close()
        points = merged()
    wall = time.perf_counter() - t0
    meta.update(wall_s=wall, load_after=machine_load(), partial=bool(stopped))
    if stopped:
        print(f"stopped after {args.minutes:g} min with {stopped} points left; run again with --resume to go on")
    for line in summarize(points):
        print(line)
    print(f"wall {wall / 60:.1f} min (estimated {est / 60:.1f}); {machine_load()}")
    if args.json:
        print("json:", write_json(points, args.json, meta))
    if args.png:
        print("heat map:", ", ".join(plot_modes(points, args.png)))
    return 0
