"""The Level-3 grid benchmark: ``tileblas.blas`` against ``scipy.linalg.blas`` over routines, precisions,
sizes, shapes, layouts and trmm/trsm flags (``tileblas bench grid``, ``benchmarks/bench_grid.py``).

Method
    Each grid point is timed in ``rounds`` interleaved rounds of SciPy, tileblas and SciPy again (the
    control).  Before each implementation's turn the benchmark pauses ``settle`` seconds (the other
    OpenBLAS instance's threads go idle), makes one untimed warm-up call, then times a block of
    back-to-back calls: one call once a call takes ``block_s`` (50 ms) or longer, else as many as fill
    ``block_s`` (sized from the first round, at most ``max_block``; the same rule for every
    implementation).  Small calls take thousands of calls per block: a block of well under a millisecond
    measures the timer and the machine's noise more than the call.  Every call allocates its own output (``overwrite_*`` off, as SciPy's defaults), so
    no input is changed and every call starts from the same data.  The best time per call over the
    rounds is kept; ``ratio`` = SciPy / tileblas (> 1: tileblas faster) and ``control`` = SciPy /
    SciPy-again (the noise of the comparison itself; 1.00 on a quiet machine).

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

import itertools
import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from tileblas._progress import Progress
from tileblas._timing import interleaved

__all__ = ["Point", "grid_points", "estimate_seconds", "calibrate_rate", "run_grid", "summarize", "plot_grid",
           "write_json", "machine_load", "grid_main", "add_grid_arguments", "ROUTINES", "SIZES", "QUICK"]

ROUTINES = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")
COMPLEX_ONLY = ("hemm", "herk", "her2k")
SIZES = (16, 32, 64, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
SHAPES = {"gemm": ("square", "k64", "m64"), "symm": ("square", "rhs64"), "hemm": ("square", "rhs64"),
          "syrk": ("square", "k64"), "herk": ("square", "k64"), "syr2k": ("square", "k64"),
          "her2k": ("square", "k64"), "trmm": ("square", "rhs64"), "trsm": ("square", "rhs64")}
#: The quick subset: (prefixes, sizes, shapes, orders, variants).
#: Real routines in double precision, the Hermitian ones in complex double.
QUICK = {"prefixes": "dz", "sizes": (64, 256, 1024), "shapes": ("square",), "orders": ("F", "C"),
         "variants_n": 0, "rounds": 3}


@dataclass
class Point:
    routine: str                 # e.g. "dgemm"
    n: int
    shape: str = "square"
    order: str = "F"
    flags: dict = field(default_factory=dict)
    scipy_s: float = math.nan
    tileblas_s: float = math.nan
    control_s: float = math.nan
    block: int = 1
    path: str = ""
    max_rel_diff: float = math.nan
    rounds: int = 0              # interleaved rounds behind the times (more after a recheck)
    #: tileblas' thread pool while the point was timed (tileblas.kernels._pool.stats(), differences):
    #: calls run alone because the machine was crowded, workers' sleeps, preemptions, polite periods
    pool: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.scipy_s / self.tileblas_s

    @property
    def control(self) -> float:
        return self.scipy_s / self.control_s

    def label(self) -> str:
        fl = "".join(f" {k}={v}" for k, v in self.flags.items())
        return f"{self.routine:6s} n={self.n:<5d} {self.shape:6s} {self.order}{fl}"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio"] = self.ratio
        d["control"] = self.control
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
                shapes: Iterable[str] | None = None, variants_n: int = 1024, max_n: int | None = None) -> list[Point]:
    """The points of the grid (or of the quick subset), cheapest first within each routine."""
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
                        pts.append(Point(pre + fam, n, shape, o))
            if fam in ("trmm", "trsm") and variants_n and pre in prefixes:
                trans = (0, 1, 2) if pre in "cz" else (0, 1)
                for side, lower, ta, diag in itertools.product((0, 1), (0, 1), trans, (0, 1)):
                    if (side, lower, ta, diag) == (0, 0, 0, 0):
                        continue  # the default flags are in the size sweep
                    pts.append(Point(pre + fam, variants_n, "square", "F",
                                     {"side": side, "lower": lower, "trans_a": ta, "diag": diag}))
    return pts


def _rate(pre: str, rate_gflops: float) -> float:
    return rate_gflops * (2.0 if pre in "sc" else 1.0) * 1e9


def estimate_seconds(points: list[Point], rounds: int = 5, settle: float = 0.2, block_s: float = 0.05,
                     rate_gflops: float = 60.0) -> float:
    """Estimated wall time: per point and round, three turns of pause + warm-up call + timed block."""
    total = 0.0
    for p in points:
        t = flops(p) / _rate(p.routine[0], rate_gflops) + 2e-6
        turn = settle + t + max(t, block_s)
        total += rounds * 3 * turn + 3 * t  # + the correctness check
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


#: The counters of tileblas.kernels._pool.stats() a grid point keeps (see Point.pool).
POOL_COUNTERS = ("crowded", "sleeps", "preempted", "contended")


def _pool_counters() -> dict[str, int]:
    """The pool's counters of POOL_COUNTERS now (empty where there is no pool)."""
    try:
        from tileblas.kernels import _pool

        st = _pool.stats()
    except Exception:  # noqa: BLE001 - informative only; a build without the pool has none
        return {}
    return {k: int(st[k]) for k in POOL_COUNTERS if k in st}


def _pool_note(p: Point) -> str:
    """' (N calls alone: crowded)' where the pool ran calls of this point on one thread, else ''."""
    n = p.pool.get("crowded", 0)
    return f" ({n} calls alone: crowded)" if n else ""


def run_grid(points: list[Point], rounds: int = 5, settle: float = 0.2, block_s: float = 0.05,
             max_block: int = 100_000, progress: Callable[[Point], None] | None = None) -> list[Point]:
    """Time every point (in place) and return them."""
    import numpy as np
    import scipy.linalg.blas as sb

    from tileblas import blas as tb

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
        pool0 = _pool_counters()
        # a pause and one warm-up call before each turn; one block size for all three, from SciPy's call
        timed = interleaved({"scipy": lambda: f_s(*args, **kw), "tileblas": lambda: f_t(*args, **kw),
                             "control": lambda: f_s(*args, **kw)}, rounds, settle=settle, warmup=1,
                            block_s=block_s, max_block=max_block, block_from="scipy")
        best, p.block = timed.best, timed.block["scipy"]
        # A point timed again (a recheck) keeps the best of all its rounds: best of 5 + 10 is best of 15.
        p.scipy_s = min(best["scipy"], p.scipy_s) if math.isfinite(p.scipy_s) else best["scipy"]
        p.tileblas_s = min(best["tileblas"], p.tileblas_s) if math.isfinite(p.tileblas_s) else best["tileblas"]
        p.control_s = min(best["control"], p.control_s) if math.isfinite(p.control_s) else best["control"]
        p.rounds += rounds
        pool1 = _pool_counters()
        for key in pool1:
            p.pool[key] = p.pool.get(key, 0) + pool1[key] - pool0.get(key, 0)
        if progress is not None:
            progress(p)
    return points


def summarize(points: list[Point], worst: int = 12, bar: float = 0.97) -> list[str]:
    """Lines: counts against the bar, the worst points, and the points above 1.05x."""
    done = [p for p in points if math.isfinite(p.tileblas_s)]
    if not done:
        return ["no points timed"]
    lines = []
    below = [p for p in done if p.ratio < bar]
    ctrl = sorted(p.control for p in done)
    lines.append(f"{len(done)} points; ratio SciPy/tileblas: min {min(p.ratio for p in done):.2f}, "
                 f"median {sorted(p.ratio for p in done)[len(done) // 2]:.2f}; {len(below)} below {bar:.2f}x; "
                 f"control SciPy/SciPy min {ctrl[0]:.2f}, median {ctrl[len(ctrl) // 2]:.2f}, max {ctrl[-1]:.2f}")
    lines.append(f"worst {min(worst, len(done))} points (ratio, control, tileblas path):")
    for p in sorted(done, key=lambda q: q.ratio)[:worst]:
        lines.append(f"  {p.ratio:5.2f}x  control {p.control:4.2f}  {p.label()}  [{p.path}]  "
                     f"{p.tileblas_s * 1e3:.4g} ms vs {p.scipy_s * 1e3:.4g} ms{_pool_note(p)}")
    above = sorted((p for p in done if p.ratio > 1.05), key=lambda q: -q.ratio)
    lines.append(f"{len(above)} points above 1.05x:")
    for p in above:
        lines.append(f"  {p.ratio:5.2f}x  control {p.control:4.2f}  {p.label()}  [{p.path}]")
    return lines


def plot_grid(points: list[Point], path: str, title: str = "") -> str:
    """Heat map PNG: one panel per precision x shape x order, routine x size, colour = SciPy/tileblas."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    main = [p for p in points if not p.flags and math.isfinite(p.tileblas_s)]
    panels = sorted({(p.routine[0], p.shape, p.order) for p in main}, key=lambda t: ("sdcz".index(t[0]), t[1], t[2]))
    if not panels:
        panels = []
    var = [p for p in points if p.flags and math.isfinite(p.tileblas_s)]
    count = len(panels) + (1 if var else 0)
    cols = min(4, max(1, count))
    rows = max(1, -(-count // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.2 * rows), squeeze=False)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=0.7, vmax=1.3)
    im = None
    for ax, (pre, shape, order) in zip(axes.flat, panels):
        sel = [p for p in main if p.routine[0] == pre and p.shape == shape and p.order == order]
        names = [r for r in ROUTINES if any(p.routine[1:] == r for p in sel)]
        sizes = sorted({p.n for p in sel})
        grid = np.full((len(names), len(sizes)), np.nan)
        for p in sel:
            grid[names.index(p.routine[1:]), sizes.index(p.n)] = p.ratio
        im = ax.imshow(np.clip(grid, 0.7, 1.3), cmap="RdBu", norm=norm, aspect="auto")
        for (i, j), v in np.ndenumerate(grid):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6,
                        color="white" if abs(v - 1.0) > 0.2 else "black")
        ax.set_xticks(range(len(sizes)), [str(s) for s in sizes], fontsize=6, rotation=45)
        ax.set_yticks(range(len(names)), [pre + n for n in names], fontsize=7)
        ax.set_title(f"{pre} {shape} {order}-order", fontsize=8)
    if var:
        ax = axes.flat[len(panels)]
        labels = [f"{p.routine} " + "".join(str(v) for v in p.flags.values()) for p in var]
        vals = np.array([[p.ratio] for p in var])
        im = ax.imshow(np.clip(vals.T, 0.7, 1.3), cmap="RdBu", norm=norm, aspect="auto")
        ax.set_xticks(range(len(labels)), labels, fontsize=4, rotation=90)
        ax.set_yticks([])
        ax.set_title(f"trmm/trsm flags (side,lower,trans,diag), n={var[0].n}", fontsize=8)
    for ax in list(axes.flat)[count:]:
        ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6, label="SciPy time / tileblas time")
    fig.suptitle(title or "tileblas.blas vs scipy.linalg.blas (ratio > 1: tileblas faster)", fontsize=10)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def write_json(points: list[Point], path: str, meta: dict[str, Any]) -> str:
    """The points (with ratio, control and flops) and ``meta`` as JSON (written to a temporary file and
    renamed, so an interrupted run never leaves a half-written file)."""
    import os

    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"meta": meta, "points": [p.to_json() for p in points]}, f, indent=1)
    os.replace(tmp, path)
    return path


def point_key(p: Point) -> tuple:
    """What identifies a grid point (routine, size, shape, layout, flags), independent of its timings."""
    return (p.routine, p.n, p.shape, p.order, tuple(sorted(p.flags.items())))


def read_points(path: str) -> list[Point]:
    """The timed points of a JSON file written by :func:`write_json` (``--resume``)."""
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
        import os

        a, b, c = os.getloadavg()
        return f"load average {a:.2f} {b:.2f} {c:.2f}"
    except OSError:
        return "load average unknown"


def add_grid_arguments(p: Any) -> None:
    """The grid benchmark's command-line options (shared by ``tileblas bench grid`` and the script)."""
    p.add_argument("--quick", action="store_true",
                   help="a ~2 minute subset: d (z for hemm/herk/her2k), sizes 64/256/1024, square, C and F order, 3 rounds")
    p.add_argument("--sizes", default=None, help="comma-separated sizes (default 16..4096, 6144 for dgemm)")
    p.add_argument("--max-n", type=int, default=None, help="leave out sizes above this")
    p.add_argument("--prefixes", default="sdcz", help="precisions, letters of sdcz (default all)")
    p.add_argument("--routines", default=",".join(ROUTINES), help="comma-separated routine families")
    p.add_argument("--orders", default="F,C", help="input layouts: F, C or F,C")
    p.add_argument("--shapes", default=None, help="comma-separated subset of square,k64,m64,rhs64")
    p.add_argument("--variants-n", type=int, default=1024,
                   help="size of the trmm/trsm side/uplo/trans/diag variants (0: none)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds per point (default 5; quick 3)")
    p.add_argument("--recheck-rounds", type=int, default=0,
                   help="time every point below the 0.97x bar again with this many more rounds, keeping the best "
                        "of all its rounds (a noisy machine's slow rounds are not the library's; default 0: off)")
    p.add_argument("--settle", type=float, default=0.2, help="pause in seconds before each timed block")
    p.add_argument("--json", default="bench_grid.json", help="output JSON file")
    p.add_argument("--png", default="bench_grid.png", help="output heat map PNG")
    p.add_argument("--estimate-only", action="store_true", help="print the point count and time estimate, then stop")
    p.add_argument("--resume", action="store_true",
                   help="keep the points already timed in the --json file and time only the others (the file is "
                        "rewritten after every point, so a grid can be measured in several sittings)")
    p.add_argument("--minutes", type=float, default=None,
                   help="stop starting new points after this many minutes (with --resume, go on later)")
    p.add_argument("--no-progress", action="store_true")


def grid_main(args: Any) -> int:
    """Run the grid as the parsed ``args`` say: estimate, time (with a progress bar), summarize, write."""
    import os

    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else None
    shapes = args.shapes.split(",") if args.shapes else None
    for sh in shapes or ():
        if sh not in ("square", "k64", "m64", "rhs64"):
            raise ValueError(f"--shapes must be among square,k64,m64,rhs64; got {sh!r}")
    rounds = args.rounds if args.rounds is not None else (QUICK["rounds"] if args.quick else 5)
    if rounds < 1:
        raise ValueError(f"--rounds must be >= 1; got {rounds}")
    points = grid_points(args.quick, sizes, args.prefixes, [r for r in args.routines.split(",") if r],
                         [o for o in args.orders.split(",") if o], shapes, args.variants_n, args.max_n)
    done: dict[tuple, Point] = {}
    if args.resume and args.json and os.path.exists(args.json):
        done = {point_key(p): p for p in read_points(args.json)}
        print(f"resuming: {sum(point_key(p) in done for p in points)} of {len(points)} points already timed "
              f"in {args.json}")
    if args.minutes is not None and args.minutes <= 0:
        raise ValueError(f"--minutes must be > 0; got {args.minutes}")
    todo = [p for p in points if point_key(p) not in done]
    rate = calibrate_rate()
    est = estimate_seconds(todo, rounds, args.settle, rate_gflops=rate)
    print(f"{len(todo)} points to time, {rounds} rounds of SciPy / tileblas / SciPy-again, {args.settle:g} s pause; "
          f"estimated {est / 60:.1f} min (dgemm at {rate:.0f} GFLOP/s on {os.cpu_count()} cores); "
          f"{machine_load()}", flush=True)
    if args.estimate_only:
        return 0
    bar = Progress(len(todo), not args.no_progress, "grid", "pt")
    t0 = time.perf_counter()
    meta = {"rounds": rounds, "settle_s": args.settle, "estimate_s": est, "quick": args.quick,
            "cpu_count": os.cpu_count(), "load_before": machine_load()}

    def merged() -> list[Point]:
        return [done.get(point_key(p), p) for p in points
                if point_key(p) in done or math.isfinite(p.tileblas_s)]

    def one(p: Point) -> None:
        if args.json:
            write_json(merged(), args.json, dict(meta, partial=True))
        bar.step(f"{p.routine} {p.n} {p.shape} {p.order} {p.ratio:.2f}x")

    stopped = 0
    try:
        for i, p in enumerate(todo):
            if args.minutes is not None and time.perf_counter() - t0 > 60.0 * args.minutes:
                stopped = len(todo) - i
                break
            run_grid([p], rounds, args.settle, progress=one)
    finally:
        bar.close()
    points = merged()
    if args.recheck_rounds < 0:
        raise ValueError(f"--recheck-rounds must be >= 0; got {args.recheck_rounds}")
    if args.recheck_rounds and not stopped:
        low = sorted((p for p in points if p.ratio < 0.97), key=lambda q: q.ratio)
        print(f"recheck: {len(low)} points below 0.97x, {args.recheck_rounds} more rounds each", flush=True)
        for p in low:
            before = p.ratio
            run_grid([p], args.recheck_rounds, args.settle)
            print(f"  {before:5.2f}x -> {p.ratio:5.2f}x  control {p.control:4.2f}  {p.label()}{_pool_note(p)}",
                  flush=True)
            if args.json:
                write_json(points, args.json, dict(meta, partial=True))
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
        print("heat map:", plot_grid(points, args.png))
    return 0
