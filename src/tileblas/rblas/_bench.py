"""``tileblas rblas bench``: the paper's benchmark (section 3.2, figures 2-7 and 11) and the issue's bars.

Design note.  Two parts, both timing only within one run with the baseline measured alongside:

* **sweep** (paper section 3.2): for each routine, size and mode, ``n`` forward calls (each on the output
  of the previous one) then ``n`` reverse calls, over ``r`` trials; values ``a + R*b`` with a = b = 1000.
  Reported per mode: mean forward and reverse time per call (median over trials), extra bytes held after
  the ``n`` forward calls, RMS difference between the original and the restored output (figure 11), and
  the plain ``tileblas.blas`` call time as baseline.
* **bars**: compute-mode forward vs the plain call (best of 5, interleaved) for Level 1 at N=10^7, Level 2
  at N=4096, Level 3 at N=2048; Level-1 round trip compute vs checkpoint; Level-1 RMS at N=10^7; exact mode
  bit-exactness on every pair (paper data and cancelling inputs) and its memory for axpy.

Results go to ``<out>/rblas_bench.json`` and PNG plots (matplotlib, imported lazily, optional).  Routines
that ``tileblas.blas`` does not provide yet are skipped unless ``--fallback-scipy`` is given, in which case
they run on ``scipy.linalg.blas`` and the JSON says so.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import time
from typing import Any, Callable

import numpy as np

__all__ = ["register", "run_bench", "sweep", "bars"]

PAPER_ROUTINES = {1: ["zaxpy", "zscal", "zdrot"], 2: ["zgemv", "zgbmv", "zgeru"], 3: ["zgemm", "zsymm", "ztrmm"]}
SIZES = {
    "quick": {1: [10**3, 10**5, 10**6], 2: [64, 256, 1024], 3: [64, 128, 256]},
    "paper": {1: [10**3, 10**4, 10**5, 10**6, 10**7], 2: [64, 256, 1024, 4096], 3: [64, 128, 256, 512]},
}
SWEEP_MODES = ("checkpoint", "compute", "exact")


class _Namespace:
    """tileblas.blas, optionally completed by scipy.linalg.blas; remembers which names fell back."""

    def __init__(self, fallback: bool) -> None:
        self.fallback = fallback
        self.fell_back: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        tb = importlib.import_module("tileblas.blas")
        f = getattr(tb, name, None)
        if f is not None or not self.fallback:
            return f
        import scipy.linalg.blas as sb

        self.fell_back.add(name)
        return getattr(sb, name, None)


def _split(name: str) -> tuple[str, str]:
    import tileblas.rblas as rb

    spec = rb.SPEC_OF[name]
    return name[: len(name) - len(spec.routine)], spec.routine


def _outputs(name: str, args: tuple, kw: dict) -> list[np.ndarray]:
    import tileblas.rblas as rb
    from tileblas.rblas._registry import bind

    spec = rb.SPEC_OF[name]
    bound = bind(spec, name, args, kw)
    return [bound[o.name] for o in spec.outputs]


def _rms(a: np.ndarray, b: np.ndarray) -> float:
    d = np.asarray(a, dtype=np.complex128) - np.asarray(b, dtype=np.complex128)
    return float(np.sqrt(np.mean(np.abs(d) ** 2))) if d.size else 0.0


def _plain(ns: Any, name: str, args: tuple, kw: dict) -> Callable[[], Any]:
    fn = getattr(ns, name)
    return lambda: fn(*args, **kw)


def sweep(routines: dict[int, list[str]], sizes: dict[int, list[int]], n_calls: int, trials: int,
          modes: tuple[str, ...], ns: Any, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """The paper's experiment; one row per (routine, size, mode) plus a 'plain' row per (routine, size)."""
    import tileblas.rblas as rb
    from tileblas.rblas import _examples

    rows = []
    for level, names in routines.items():
        for name in names:
            if getattr(ns, name) is None:
                log(f"  skip {name}: not in tileblas.blas yet")
                continue
            prefix, routine = _split(name)
            fwd, rev = rb.PAIRS[name]
            for n in sizes[level]:
                rng = np.random.default_rng(n)
                args, kw = _examples.build(routine, prefix, n, rng)
                outs = _outputs(name, args, kw)
                orig = [o.copy(order="K") for o in outs]
                times: dict[str, list[tuple[float, float]]] = {m: [] for m in ("plain", *modes)}
                held: dict[str, int] = {}
                rms: dict[str, float] = {}
                decisions: dict[str, str] = {}
                plain = _plain(ns, name, args, kw)
                for _t in range(trials):
                    for m in ("plain", *modes):
                        for o, v in zip(outs, orig):
                            o[...] = v
                        t0 = time.perf_counter()
                        for _ in range(n_calls):
                            if m == "plain":
                                plain()
                            else:
                                fwd(*args, mode=m, **kw)
                        t1 = time.perf_counter()
                        if m != "plain":
                            held[m] = max(held.get(m, 0), sum(d.extra_bytes for d in rb.pending()))
                            decisions[m] = rb.pending()[-1].mode
                            for _ in range(n_calls):
                                rev(*args, **kw)
                        t2 = time.perf_counter()
                        times[m].append(((t1 - t0) / n_calls, (t2 - t1) / n_calls))
                        if m != "plain":
                            rms[m] = max(rms.get(m, 0.0), max(_rms(o, v) for o, v in zip(outs, orig)))
                for m, ts in times.items():
                    f = float(np.median([t[0] for t in ts]))
                    r = float(np.median([t[1] for t in ts]))
                    row = {"level": level, "routine": name, "n": n, "mode": m, "forward_s": f,
                           "reverse_s": r if m != "plain" else None,
                           "extra_bytes": held.get(m, 0), "rms": rms.get(m), "did": decisions.get(m)}
                    rows.append(row)
                    log(f"  {name:7s} n={n:<9d} {m:10s} fwd {f*1e6:11.1f} us  rev "
                        f"{(r*1e6 if m != 'plain' else float('nan')):11.1f} us  held {held.get(m, 0):>11d} B  "
                        f"rms {rms.get(m, float('nan')):.3g}")
    return rows


def _best_interleaved(fns: dict[str, Callable[[], float]], trials: int) -> dict[str, float]:
    best = {k: float("inf") for k in fns}
    for _ in range(trials):
        for k, f in fns.items():
            best[k] = min(best[k], f())
    return best


def _timed(call: Callable[[], Any], after: Callable[[], Any] | None = None) -> Callable[[], float]:
    def run() -> float:
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        if after is not None:
            after()
        return dt
    return run


def bars(ns: Any, trials: int, log: Callable[[str], None], sizes: dict[int, int] | None = None
         ) -> dict[str, Any]:
    """The issue's bars (see module docstring)."""
    import tileblas.rblas as rb
    from tileblas.rblas import _examples

    sizes = sizes or {1: 10**7, 2: 4096, 3: 2048}
    out: dict[str, Any] = {"sizes": sizes}
    # 1. compute-mode forward vs plain call
    fwd_ratio = {}
    for level, name in ((1, "daxpy"), (2, "dgemv"), (3, "dgemm")):
        if getattr(ns, name) is None:
            log(f"  skip {name}: not in tileblas.blas yet")
            continue
        prefix, routine = _split(name)
        f, r = rb.PAIRS[name]
        args, kw = _examples.build(routine, prefix, sizes[level], np.random.default_rng(level))
        plain = getattr(ns, name)
        # the plain call is undone by the compute inverse (untimed) so both see the same data
        best = _best_interleaved({
            "plain": _timed(lambda: plain(*args, **kw), lambda: _undo_plain(name, args, kw)),
            "compute_forward": _timed(lambda: f(*args, mode="compute", **kw), lambda: r(*args, **kw)),
        }, trials)
        ratio = best["compute_forward"] / best["plain"]
        fwd_ratio[name] = {"n": sizes[level], "plain_s": best["plain"], "compute_forward_s": best["compute_forward"],
                           "ratio": ratio, "bar": 1.05, "pass": ratio <= 1.05}
        log(f"  {name} n={sizes[level]}: plain {best['plain']*1e3:.2f} ms, compute forward "
            f"{best['compute_forward']*1e3:.2f} ms -> {ratio:.3f}x (bar <= 1.05)")
    out["compute_forward_vs_plain"] = fwd_ratio
    # 2. Level-1 round trip compute vs checkpoint, 3. RMS at N=1e7 with the paper's data
    rt = {}
    for name in ("daxpy", "zaxpy", "zscal", "zdrot"):
        if getattr(ns, name) is None:
            continue
        prefix, routine = _split(name)
        f, r = rb.PAIRS[name]
        args, kw = _examples.build(routine, prefix, sizes[1], np.random.default_rng(7))
        outs = _outputs(name, args, kw)
        orig = [o.copy() for o in outs]
        best = _best_interleaved({
            m: _timed(lambda m=m: (f(*args, mode=m, **kw), r(*args, **kw)))
            for m in ("checkpoint", "compute")
        }, trials)
        for o, v in zip(outs, orig):
            o[...] = v
        for _ in range(10):
            f(*args, mode="compute", **kw)
        for _ in range(10):
            r(*args, **kw)
        rms = max(_rms(o, v) for o, v in zip(outs, orig))
        rt[name] = {"n": sizes[1], "checkpoint_round_trip_s": best["checkpoint"],
                    "compute_round_trip_s": best["compute"],
                    "compute_faster": best["compute"] < best["checkpoint"], "rms_after_10_round_trips": rms}
        log(f"  {name} n={sizes[1]}: round trip checkpoint {best['checkpoint']*1e3:.1f} ms, compute "
            f"{best['compute']*1e3:.1f} ms; compute RMS after 10 fwd + 10 rev: {rms:.3g}")
    out["level1_round_trip"] = rt
    # 4. exact: every pair on the paper's data, cancelling inputs, memory for axpy
    out["exact"] = exact_coverage(ns, log, sizes[1])
    return out


def _undo_plain(name: str, args: tuple, kw: dict) -> None:
    """Undo a plain call (untimed) with the compute inverse, recording nothing, so data stay bounded."""
    import tileblas.rblas as rb
    from tileblas.rblas._registry import DTYPE_OF_PREFIX, Ctx, _run_inverse, bind

    spec = rb.SPEC_OF[name]
    prefix = name[: len(name) - len(spec.routine)]
    _run_inverse(Ctx(spec, prefix, DTYPE_OF_PREFIX[prefix], bind(spec, name, args, kw)))


def exact_coverage(ns: Any, log: Callable[[str], None], n_axpy: int = 10**6) -> dict[str, Any]:
    import tileblas.rblas as rb
    from tileblas.rblas import _examples

    total = exact_ok = fell_back = 0
    failures = []
    for name, (f, r) in rb.PAIRS.items():
        if getattr(ns, name) is None:
            continue
        prefix, routine = _split(name)
        cases = [_examples.build(routine, prefix, 33, np.random.default_rng(total))]
        if routine in ("axpy", "gemv", "gemm", "ger", "geru"):
            cases.append(_examples.cancelling(routine, prefix, 33, np.random.default_rng(total + 1)))
        for args, kw in cases:
            outs = _outputs(name, args, kw)
            orig = [np.array(o, copy=True) for o in outs]
            f(*args, mode="exact", **kw)
            d = rb.last_decision()
            r(*args, **kw)
            total += 1
            if d.mode != "exact":
                fell_back += 1
            if all(np.array_equal(np.ascontiguousarray(o).view(np.uint8), np.ascontiguousarray(v).view(np.uint8))
                   for o, v in zip(outs, orig)):
                exact_ok += 1
            else:
                failures.append(name)
    mem = {}
    for name in ("saxpy", "daxpy", "caxpy", "zaxpy"):
        if getattr(ns, name) is None:
            continue
        f, r = rb.PAIRS[name]
        prefix, routine = _split(name)
        args, kw = _examples.build(routine, prefix, n_axpy, np.random.default_rng(3))
        y = args[1]
        y0 = y.copy()
        f(*args, mode="exact", **kw)
        d = rb.last_decision()
        r(*args, **kw)
        mem[name] = {"n": n_axpy, "exact_bytes": d.extra_bytes, "checkpoint_bytes": d.checkpoint_bytes,
                     "ratio": d.extra_bytes / d.checkpoint_bytes, "bitwise": bool(np.array_equal(y, y0)),
                     "how": d.reason}
        log(f"  exact {name} n={n_axpy}: holds {d.extra_bytes} B vs checkpoint {d.checkpoint_bytes} B "
            f"({100*d.extra_bytes/d.checkpoint_bytes:.1f}%), bitwise {bool(np.array_equal(y, y0))}")
    log(f"  exact round trips bit-exact: {exact_ok}/{total} (of which {fell_back} fell back to checkpoint)")
    return {"round_trips": total, "bit_exact": exact_ok, "fell_back_to_checkpoint": fell_back,
            "failures": failures, "axpy_memory": mem}


def _plots(rows: list[dict[str, Any]], outdir: str, log: Callable[[str], None]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("  matplotlib not installed: no plots")
        return []
    files = []
    for level in sorted({r["level"] for r in rows}):
        names = sorted({r["routine"] for r in rows if r["level"] == level})
        fig, axes = plt.subplots(2, len(names), figsize=(4.5 * len(names), 7), squeeze=False)
        for j, name in enumerate(names):
            for i, key in enumerate(("forward_s", "reverse_s")):
                ax = axes[i][j]
                for mode in sorted({r["mode"] for r in rows if r["routine"] == name}):
                    pts = [(r["n"], r[key]) for r in rows if r["routine"] == name and r["mode"] == mode
                           and r[key] is not None]
                    if pts:
                        ax.loglog(*zip(*pts), marker="o", label=mode)
                ax.set_title(f"{name} {'forward' if i == 0 else 'reverse'}")
                ax.set_xlabel("N")
                ax.set_ylabel("s per call")
                ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(outdir, f"rblas_level{level}_times.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files.append(path)
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in sorted({r["routine"] for r in rows}):
        pts = [(r["n"], max(r["rms"], 1e-30)) for r in rows if r["routine"] == name and r["mode"] == "compute"
               and r["rms"] is not None]
        if pts:
            ax.loglog(*zip(*pts), marker="o", label=name)
    ax.set_title("compute mode: RMS restore error (figure 11)")
    ax.set_xlabel("N")
    ax.legend(fontsize=7)
    path = os.path.join(outdir, "rblas_rms.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(path)
    return files


def run_bench(outdir: str = "rblas-bench", preset: str = "quick", n_calls: int = 10, trials: int = 10,
              bar_trials: int = 5, fallback_scipy: bool = False, do_sweep: bool = True, do_bars: bool = True,
              bar_sizes: dict[int, int] | None = None, log: Callable[[str], None] = print,
              sizes: dict[int, list[int]] | None = None) -> dict[str, Any]:
    """Run the benchmark and write ``rblas_bench.json`` (and PNG plots) into ``outdir``.

    ``sizes`` (level -> sizes) overrides the preset's sweep sizes; ``bar_sizes`` (level -> size) the
    bars' sizes (default 10**7, 4096, 2048).
    """
    if preset not in SIZES:
        raise ValueError(f"preset must be one of {sorted(SIZES)}; got {preset!r} instead")
    from tileblas.rblas import _registry

    os.makedirs(outdir, exist_ok=True)
    ns = _Namespace(fallback_scipy)
    old = _registry._blas_namespace
    _registry._blas_namespace = lambda: ns
    result: dict[str, Any] = {"preset": preset, "n_calls": n_calls, "trials": trials, "bar_trials": bar_trials,
                              "data": "a + R*b, a = b = 1000; alpha = 1.5, beta = 0.75"}
    try:
        import tileblas.rblas as rb

        rb.discard()
        if do_sweep:
            log(f"== sweep ({preset}): n={n_calls} forward then n reverse calls, r={trials} trials ==")
            result["sweep"] = sweep(PAPER_ROUTINES, sizes or SIZES[preset], n_calls, trials, SWEEP_MODES, ns,
                                    log)
        if do_bars:
            log(f"== bars (best of {bar_trials}, interleaved) ==")
            result["bars"] = bars(ns, bar_trials, log, bar_sizes)
    finally:
        _registry._blas_namespace = old
    result["fell_back_to_scipy"] = sorted(ns.fell_back)
    with open(os.path.join(outdir, "rblas_bench.json"), "w") as fh:
        json.dump(result, fh, indent=1, default=float)
    result["plots"] = _plots(result.get("sweep", []), outdir, log) if do_sweep else []
    log(f"wrote {os.path.join(outdir, 'rblas_bench.json')} {' '.join(result['plots'])}")
    return result


def _cmd(args: argparse.Namespace) -> int:
    run_bench(args.out, args.preset, args.calls, args.trials, args.bar_trials, args.fallback_scipy,
              not args.bars_only, not args.sweep_only)
    return 0


def register(subparsers: Any) -> None:
    """Add ``tileblas rblas bench`` to the ``tileblas`` command."""
    p = subparsers.add_parser("rblas", help="reversible BLAS")
    sub = p.add_subparsers(dest="rblas_command", metavar="SUBCOMMAND")
    b = sub.add_parser("bench", help="paper section 3.2 sweep and the issue's bars; writes JSON and PNG")
    b.add_argument("--out", default="rblas-bench", help="output folder")
    b.add_argument("--preset", default="quick", choices=sorted(SIZES), help="size sweep")
    b.add_argument("--calls", type=int, default=10, help="forward (then reverse) calls per trial (paper n)")
    b.add_argument("--trials", type=int, default=10, help="trials (paper r)")
    b.add_argument("--bar-trials", type=int, default=5, help="best-of trials for the bars")
    b.add_argument("--fallback-scipy", action="store_true",
                   help="run routines tileblas.blas lacks on scipy.linalg.blas (reported in the JSON)")
    b.add_argument("--sweep-only", action="store_true")
    b.add_argument("--bars-only", action="store_true")
    b.set_defaults(func=_cmd)
