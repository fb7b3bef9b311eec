"""Performance-model subcommands: ``tileblas model build|show``, ``tileblas rank trinv|sylvester``, ``tileblas tune``.

``tileblas tune`` also measures the Level-3 path crossovers (:mod:`tileblas.perf._pathtune`) and stores
them in ``paths.json`` (:mod:`tileblas.policy._paths`); ``--paths-only`` does only that.

Design note
    Thin argument parsing over :mod:`tileblas.perf`; every command takes ``--db`` (default
    ``$TILEBLAS_MODEL_DB`` or the user cache directory).  ``rank --measure`` also runs the variants and
    prints whether the measured ranking agrees with the predicted one (pairs whose measured medians
    differ by more than ``--tolerance`` count); that comparison lives here and in the benchmark, never in
    unit tests.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tileblas.cli._args import count, names, number, sizes
from tileblas.policy._paths import CLASSES as _CLASSES
from tileblas.policy._paths import FAMILIES as _FAMILIES

__all__ = ["register", "ranking_agreement"]


_ints = sizes()  # '8:1024:8' (start:stop:step, inclusive), '256,512' or '96' -> a non-empty list of ints >= 1
_pos = count(1)
_nonneg = count(0)


def _missing_action(parser: argparse.ArgumentParser, what: str) -> Any:
    """The command's answer when no action is named: one line (``-h`` lists them)."""
    def answer(args: argparse.Namespace) -> int:
        parser.error(f"name the {what}: {{{','.join(_choices(parser))}}} (tileblas {parser.prog.split()[-1]} -h)")
        return 2

    return answer


def _choices(parser: argparse.ArgumentParser) -> list[str]:
    return [c for a in parser._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices]


#: Seconds the read-only model commands wait for another process's lock on the repository.
_SHOW_TIMEOUT = 2.0


def _repo(args: argparse.Namespace, read_only: bool = False):
    """The repository of ``--db``; ``read_only``: opened to read (never created or written; a short wait
    for another process's lock)."""
    from tileblas.perf import Repository

    if read_only:
        return Repository(args.db, create=False, timeout=_SHOW_TIMEOUT, read_only=True)
    return Repository(args.db)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help="model repository file (default: $TILEBLAS_MODEL_DB or the cache dir)")
    p.add_argument("--threads", type=_pos, default=1, help="BLAS threads the models are for (default 1)")
    p.add_argument("--locality", choices=("in-cache", "out-of-cache"), default="in-cache",
                   help="operands in cache between calls (in-cache, default) or flushed (out-of-cache)")


def ranking_agreement(predicted: dict[int, float], measured: dict[int, float], tolerance: float = 0.05) -> tuple[int, int]:
    """Pairs of variants ordered the same way by prediction and measurement, among the pairs whose measured
    times differ by more than ``tolerance`` (relative).  Returns (agreeing, counted)."""
    vs = sorted(measured)
    agree = counted = 0
    for i, a in enumerate(vs):
        for b in vs[i + 1:]:
            ma, mb = measured[a], measured[b]
            if abs(ma - mb) <= tolerance * min(ma, mb):
                continue
            counted += 1
            agree += (ma < mb) == (predicted[a] < predicted[b])
    return agree, counted


# ---------------------------------------------------------------------------------------------------
def _cmd_build(args: argparse.Namespace) -> int:
    from tileblas.perf import Sampler, build_submodel, current_key
    from tileblas.perf._sampler import leading_dimension
    from tileblas.policy._calls import routine_spec

    spec = routine_spec(args.routine)
    flags = tuple(args.flags.upper()) if args.flags else tuple(v[0] for v in spec.flag_values)
    if len(flags) != len(spec.flag_names) or any(f not in v for f, v in zip(flags, spec.flag_values)):
        raise ValueError(f"--flags for {args.routine} must be {len(spec.flag_names)} letters for {spec.flag_names}"
                         f" from {spec.flag_values}; got {args.flags!r}")
    d = len(spec.size_names)
    lo = args.lo * d if len(args.lo) == 1 else args.lo
    hi = args.hi * d if len(args.hi) == 1 else args.hi
    if len(lo) != d or len(hi) != d:
        raise ValueError(f"--lo/--hi need 1 or {d} values for {spec.size_names}; got {args.lo} and {args.hi}")
    if any(a > b for a, b in zip(lo, hi)):  # an empty domain: no model to build, none to replace
        raise ValueError(f"--lo must not be above --hi for any of {spec.size_names}; got --lo "
                         f"{' '.join(map(str, args.lo))} and --hi {' '.join(map(str, args.hi))}")
    key = current_key(args.threads, args.locality)
    repo = _repo(args)
    sampler = Sampler(threads=args.threads, locality=args.locality, reps=args.reps,
                      ld=leading_dimension(max(hi)))
    sm = build_submodel(args.routine, flags, lambda s: sampler.sample(args.routine, flags, s), lo, hi,
                        args.strategy, args.error_bound, args.min_size, args.direction, args.initial_size,
                        args.validation, progress=not args.no_progress,
                        config={"locality": args.locality, "reps": args.reps, "threads": args.threads},
                        max_samples=args.max_samples, bursts=args.bursts)
    repo.save(key, sm)
    v = sm.validation
    print(f"{args.routine} {''.join(flags) or '-'}: {len(sm.regions)} regions, {sm.points} points, "
          f"{sm.samples} samples, built in {sm.config['build_seconds']:.1f} s")
    if v:
        print(f"validation on {v['points']} fresh points: average relative error {v['avg_rel_error']:.2%}, "
              f"maximum {v['max_rel_error']:.2%}")
    print(f"stored in {repo.path}")
    if args.plot:
        from tileblas.perf._plots import plot_regions

        print("plot:", plot_regions(sm, args.plot, [(p, e) for p, e in v.get("detail", [])]))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    import datetime

    from tileblas.perf import Repository

    try:  # read only (never creates or rewrites a file), a short wait for another process's lock
        repo = Repository(args.db, create=False, timeout=_SHOW_TIMEOUT, read_only=True)
    except FileNotFoundError as exc:
        print(f"{exc}; build models with `tileblas model build ROUTINE` or `tileblas tune`")
        return 0
    rows = [r for r in repo.list() if not args.routine or r["routine"] == args.routine]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"models in {repo.path}: {len(rows)}")
    for r in rows:
        when = datetime.datetime.fromtimestamp(r["created"]).strftime("%Y-%m-%d %H:%M")
        err = "-" if r["avg_error"] is None else f"{r['avg_error']:.1%}/{r['max_error']:.1%}"
        print(f"  {r['routine']:7s} {r['flags'] or '-':4s} threads={r['threads']} {r['locality']:12s} "
              f"samples={r['samples']:6d} err(avg/max)={err:13s} {when}  [{r['library']} {r['version']} on {r['machine']}]")
    return 0


def _cmd_rank(args: argparse.Namespace) -> int:
    from tileblas.perf import Predictor, build_models_for, current_key
    from tileblas.perf._algorithms import get_algorithm
    from tileblas.policy._predictor import MissingModelError

    alg = get_algorithm(args.algorithm)
    variants = args.variants or list(alg.variants)
    bad = [v for v in variants if v not in alg.variants]
    if bad:
        raise ValueError(f"--variants for {args.algorithm} must be among {list(alg.variants)}; got {bad}")
    key = current_key(args.threads, args.locality)
    if args.build:
        repo = _repo(args)
        build_models_for(args.algorithm, args.n, [args.block], repo, key, variants, reps=args.reps,
                         progress=not args.no_progress, min_size=args.min_size, bursts=args.bursts)
    else:  # ranking only reads: no repository is made or written
        try:
            repo = _repo(args, read_only=True)
        except FileNotFoundError as exc:
            raise _NoModels(f"{exc}: no models to rank with; add --build, or build them with "
                            f"`tileblas model build` or `tileblas tune`") from None
    pred = Predictor(repo, key)
    try:
        return _rank(args, alg, variants, pred)
    except MissingModelError as exc:
        raise _NoModels(f"{exc}; or add --build") from None


class _NoModels(ValueError):
    """The models a ranking needs are not stored (one line from :func:`tileblas.cli.main`)."""


def _rank(args: argparse.Namespace, alg: Any, variants: list[int], pred: Any) -> int:
    from tileblas.perf._predictor import measure_algorithm

    series: dict[Any, dict[str, list[float]]] = {}
    total_agree = total_counted = 0
    for n in args.n:
        ranking = pred.rank(args.algorithm, n, args.block, variants)
        print(f"{args.algorithm} n={n} block={args.block}: predicted ranking "
              + " > ".join(str(p.label["variant"]) for p in ranking))
        measured: dict[int, float] = {}
        for p in ranking:
            v = p.label["variant"]
            line = (f"  variant {v:2d}: predicted {p.time['median'] * 1e3:9.3f} ms "
                    f"[{p.time['min'] * 1e3:.3f}, {p.time['max'] * 1e3:.3f}] "
                    f"efficiency {p.efficiency.get('median', 0):.3f}")
            if args.measure:
                t = measure_algorithm(args.algorithm, n, v, args.block, args.reps, args.threads)
                measured[v] = t.median
                line += f"   measured {t.median * 1e3:9.3f} ms"
            print(line)
            s = series.setdefault(f"v{v}", {"x": [], "median": [], "min": [], "max": [], "measured": []})
            s["x"].append(n)
            for st in ("median", "min", "max"):
                s[st].append(p.efficiency.get(st, 0.0))
            if measured.get(v):
                s["measured"].append(alg.flops(n) / measured[v] / (pred.peak_gflops * 1e9))
        if measured:
            agree, counted = ranking_agreement({p.label["variant"]: p.time["median"] for p in ranking}, measured,
                                               args.tolerance)
            total_agree += agree
            total_counted += counted
            print("  measured ranking: " + " > ".join(str(v) for v in sorted(measured, key=measured.get))
                  + f"; agreeing pairs {agree}/{counted} (pairs within {args.tolerance:.0%} not counted)")
    if args.plot:
        from tileblas.perf._plots import plot_vs_size

        for s in series.values():
            if not s["measured"]:
                del s["measured"]
        print("plot:", plot_vs_size(series, args.plot, f"{args.algorithm}, block {args.block}"))
    if args.measure and total_counted:
        print(f"overall: {total_agree}/{total_counted} distinguishable pairs ranked as measured")
    return 0


def _paths_target(args: argparse.Namespace) -> Any:
    """The path policy file tune writes: ``--paths-file``, else next to ``--db``, else the one read."""
    from pathlib import Path

    from tileblas.policy import _paths

    if args.paths_file:
        return Path(args.paths_file)
    if args.db:
        return Path(args.db).with_name("paths.json")
    return _paths.policy_path()


def _probe_rate() -> float:
    """This machine's dgemm rate on all cores (flops per second), from a short probe (~0.1 s)."""
    import time

    import numpy as np

    from tileblas.kernels import _openblas
    from tileblas.kernels._threadpool import cpu_count

    lib = _openblas.get_library(cpu_count())
    n = 384
    a = np.asfortranarray(np.random.default_rng(0).standard_normal((n, n)))
    c = np.zeros((n, n), order="F")
    _openblas.gemm(1.0, a, a, 0.0, c, lib=lib)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        _openblas.gemm(1.0, a, a, 0.0, c, lib=lib)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / max(best, 1e-9)


def estimate_paths_seconds(args: argparse.Namespace, rate: float) -> float:
    """Seconds the path measurements of ``args`` should take at ``rate`` flops/s: per point and round,
    three contenders (the two ways and the control), each a pause, a warm-up call and a timed block (and
    for the C path's limits a cold call after ``--cold-idle``)."""
    from tileblas.perf._pathtune import _flops
    from tileblas.policy import _paths

    def turn(flops: float, block: float) -> float:
        t = flops / rate
        return args.settle + t + max(block, t)

    total = 0.0
    for cls in args.classes:
        cplx = cls == "complex"
        for fam in args.families:
            total += sum(3 * args.path_reps * turn(_flops(fam, n, n, cplx), 0.05) for n in args.path_sizes)
            if fam in ("trmm", "trsm"):
                total += sum(3 * args.path_reps * turn(_flops(fam, n, r, cplx), 0.05)
                             for n in args.path_orders for r in args.path_rhs)
    # microsecond calls: per round a pause, a warm-up call and a block, and a cold call after the idle pause
    small = lambda reps, count: 3 * reps * count * (args.settle + 0.06 + args.cold_idle)  # noqa: E731
    rank = [r for r in _paths.RANK_GEMM_ROUTINES if r[1:] in args.families and "real" in args.classes]
    if rank and not args.no_rank_gemm:
        total += small(args.rank_gemm_reps, len(rank) * (len(args.rank_gemm_orders) + len(args.rank_gemm_split_orders)))
    if not args.no_one_thread:
        from tileblas.perf._pathtune import one_thread_precisions

        total += small(args.one_thread_reps, sum(len(one_thread_precisions(f)) for f in args.families)
                       * len(args.one_thread_orders))
    split = [r for r in _paths.SPLIT_TUNE if _paths.FAMILY[r[1:]] in args.families
             and _paths.precision_class(r[0]) in args.classes]
    if split and not args.no_split:
        total += small(args.split_reps, sum(2 if r[1:] in ("trmm", "trsm") else 1 for r in split) * len(args.split_orders))
    return total


def _tune_paths(args: argparse.Namespace) -> int:
    """Measure the path policy's crossovers (:mod:`tileblas.perf._pathtune`), show them, store those
    measured above the noise (unless ``--dry-run``)."""
    import math
    import os

    from tileblas.blas import _dispatch
    from tileblas.policy import _paths
    from tileblas.perf._pathtune import measure_one_thread, measure_policy, measure_rank_gemm, measure_split

    target = _paths_target(args)
    say = None if args.no_progress else (lambda line: print("  " + line, flush=True))
    try:
        load = os.getloadavg()[0]
        if load > 0.5:
            print(f"note: load average {load:.2f} while measuring; other work on the cores skews the crossovers "
                  "(settings within the noise the control shows are not stored)")
    except OSError:
        pass
    est = estimate_paths_seconds(args, _probe_rate())
    print(f"path crossovers: about {_duration(est)} on this machine (estimated from a dgemm probe; "
          f"{'--quick ladders' if args.quick else 'full ladders, --quick for a shorter run'})", flush=True)
    print(f"measuring path crossovers: sizes {args.path_sizes}, trmm/trsm orders {args.path_orders} x "
          f"right-hand sides {args.path_rhs}, best of {args.path_reps}, each point with a control (the "
          f"baseline timed twice)")
    pol = measure_policy(args.path_sizes, args.path_orders, args.path_rhs, args.families, args.classes,
                         args.path_reps, args.settle, args.margin, progress=say)
    noise: list[str] = list(pol.measured.get("within_noise", []))
    cold = (f"; cold calls after {args.cold_idle:g} s idle, median of as many, count as much as warm ones"
            if args.cold_idle > 0 else "; warm calls only")
    rank = [r for r in _paths.RANK_GEMM_ROUTINES if r[1:] in args.families and "real" in args.classes]
    if rank and not args.no_rank_gemm:
        print(f"measuring the syrk/syr2k gemm route of the C path: {', '.join(rank)}, orders "
              f"{args.rank_gemm_orders} (one call) and {args.rank_gemm_split_orders} (split), best of "
              f"{args.rank_gemm_reps}{cold}")
        pol.rank_gemm, rows = measure_rank_gemm(rank, args.rank_gemm_orders, args.rank_gemm_split_orders,
                                                args.rank_gemm_reps, args.settle, args.margin, args.cold_idle,
                                                progress=say)
        pol.measured["rank_gemm"] = rows
        noise += rows.get("within_noise", [])
    if not args.no_one_thread:
        print(f"measuring the one-thread limits of the C path: {', '.join(args.families)}, orders "
              f"{args.one_thread_orders}, float64 and complex128, best of {args.one_thread_reps}{cold}")
        pol.one_thread, rows = measure_one_thread(args.families, args.one_thread_orders, args.one_thread_reps,
                                                  args.settle, args.margin, args.cold_idle, progress=say)
        pol.measured["one_thread"] = rows
        noise += rows.get("within_noise", [])
    split = [r for r in _paths.SPLIT_TUNE if _paths.FAMILY[r[1:]] in args.families
             and _paths.precision_class(r[0]) in args.classes]
    if split and not args.no_split:
        print(f"measuring where the C path's split on the pool starts: {', '.join(split)}, orders "
              f"{args.split_orders}, best of {args.split_reps}{cold}")
        lows, rows = measure_split(split, args.split_orders, args.split_reps, args.settle, args.margin,
                                   args.cold_idle, progress=say)
        pol.split_from = {r: lo for name, lo in lows.items() for r in _paths.SPLIT_TUNE[name]}
        pol.measured["split"] = rows
        noise += rows.get("within_noise", [])
    print("measured (stored only where the gain is beyond the control's noise):")
    for (fam, cls), v in sorted(pol.tile_flops.items()):
        if fam not in args.families or cls not in args.classes:
            continue  # not measured: the shipped value
        if f"tile_flops {fam}/{cls}" in noise:
            line = f"  {fam:6s} {cls:8s} tiles: within the noise, shipped value kept"
        else:
            line = f"  {fam:6s} {cls:8s} tiles from {'never' if math.isinf(v) else f'{v:.3g} flops'}"
        rule = pol.recursion.get((fam, cls))
        if f"recursion {fam}/{cls}" in noise:
            line += "; recursion: within the noise, shipped rule kept"
        elif rule is not None:
            line += ("; recursion never" if math.isinf(rule[0]) else
                     f"; recursion from order {rule[0]:.0f} with {rule[1]:.0f}-{rule[2]:.0f} right-hand sides")
        rates = pol.cpu_rates.get((fam, cls))
        if rates:  # kept as measured (no noise test: the GPU rule weighs them against a GPU's prediction)
            line += "; one call " + ", ".join(f"{r / 1e9:.3g} GF/s at {n}" for n, r in rates)
        print(line)
    for fam, lim in sorted(pol.one_thread.items()):
        print(f"  {fam:6s} on the one-thread instance below {lim:.3g} flops" if lim > 0 else
              f"  {fam:6s} never on the one-thread instance (it lost at every order measured)")
    for name, lo in sorted(pol.split_from.items()):
        print(f"  {name:6s} " + ("never split on the pool" if math.isinf(lo) else
                                 f"split on the pool from {lo:.3g} flops (to the shipped upper end)"))
    for name, (one, split_) in sorted(pol.rank_gemm.items()):
        if one > 0 or split_ > 0:
            print(f"  {name:6s} as gemm over all of C below {one:.3g} flops (one call), {split_:.3g} (split)")
        else:
            print(f"  {name:6s} never as gemm (not ahead of the rank-k call at any order measured)")
    for item in noise:
        if not item.startswith(("tile_flops", "recursion")):
            print(f"  {item}: within the noise, shipped value kept")
    if args.dry_run:
        print(f"--dry-run: nothing stored ({target} unchanged)")
        return 0
    path = _paths.save_policy(pol, target)
    print(f"path policy stored in {path} (`tileblas tune --reset` removes it)")
    if path == _paths.policy_path():
        _dispatch.apply_policy(reload=True)
    else:
        print(f"  (not the file this process reads, {_paths.policy_path()}: set TILEBLAS_PATHS={path} to use it)")
    return 0


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _tune_reset(args: argparse.Namespace) -> int:
    """Remove what tune stored (the path policy, the model repository and the GPUs' figures), saying which
    files."""
    from pathlib import Path

    from tileblas.blas import _dispatch
    from tileblas.devices import _figures
    from tileblas.policy import _paths

    db = Path(args.db) if args.db else _paths.default_path()
    gpus = _figures.figures_path()
    files = [_paths_target(args), db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"),
             db.with_name(db.name + "-journal"), gpus, gpus.with_name(gpus.name + ".lock")]
    removed = []
    for f in files:
        try:
            f.unlink()
            removed.append(f)
        except FileNotFoundError:
            pass
    if removed:
        for f in removed:
            print(f"removed {f}")
        print("the shipped defaults are in force for new processes (`tileblas info` shows them)")
    else:
        print(f"nothing stored: no {files[0]} and no {db}")
    _dispatch.apply_policy(reload=True)
    return 0


def _tune_gpus(args: argparse.Namespace) -> int:
    """Measure the figures of this machine's GPUs again (:mod:`tileblas.devices._figures`): those kept for
    them are forgotten, a runtime over all of them measures each GPU's anew and the drop-in's per-call cost
    is timed on it; all are kept in place of the old and shown."""
    from tileblas.blas import _dispatch
    from tileblas.devices import _figures
    from tileblas.devices import gpu as _gpu
    from tileblas.runtime import Runtime

    if args.dry_run:
        print("error: --gpus keeps what it measures (it replaces the figures the first use kept); it does not "
              "take --dry-run (`tileblas info` shows the figures in use)")
        return 2
    try:
        cp = _gpu._cupy()
        n = _gpu.usable_count()
        keys = [_figures.device_key(cp, i) for i in range(n)]
    except Exception as exc:  # noqa: BLE001 - no CuPy, no GPU, a driver error: nothing to measure
        print(f"no GPU to measure: {exc}")
        return 1
    try:
        gone = _figures.forget(lambda k: any(key in k for key in keys))
    except OSError as exc:
        print(f"error: {_figures.figures_path()} cannot be written ({type(exc).__name__}: {exc}); set "
              "TILEBLAS_GPU_FIGURES to a file that can")
        return 1
    print(f"measuring the figures of {n} GPU(s) again ({len(gone)} kept figure(s) replaced; "
          f"file {_figures.figures_path()})", flush=True)
    _dispatch.release_gpus()  # the drop-in's GPUs, if any: found again with the new figures by its next call
    with Runtime(devices=f"gpu:{n}") as rt:
        for d in rt.devices:
            m = d.model
            print(f"  {d.name}: {m.name}, host link {d.host_link_bytes_s / 1e9:.3g} GB/s, gemm "
                  + ", ".join(f"{p} {m.flops[p] / 1e12:.3g} TF/s" for p in "sd" if p in m.flops))
        cost = _dispatch._kept_call_cost(rt)
    print(f"  a drop-in call beyond the model: {cost.seconds * 1e3:.3g} ms + {cost.per_byte * 1e12:.3g} ms per GB "
          "of output" + ("" if cost.locked_from == float("inf") else
                         f" ({cost.per_locked_byte * 1e12:.3g} ms per GB from {cost.locked_from / 2 ** 20:.4g} MiB)")
          + "; from " + ", ".join(f"dgemm {n_} {best * 1e3:.3g} ms (model {pred * 1e3:.3g} ms)"
                                   for n_, best, pred in cost.timed))
    st = _figures.status()
    print(f"kept in {st['file']}" if not st["note"] else f"not kept: {st['note']}")
    return 0 if not st["note"] else 1


#: The ladders of ``tileblas tune``: full, and ``--quick`` (the path crossovers only, on short ladders).
TUNE_LADDERS = {
    "path_sizes": ([512, 1024, 2048, 3072], [256, 512, 1024]),
    "path_orders": ([512, 1024, 2048], [256, 512]),
    "path_rhs": ([16, 32, 64, 128, 256], [32, 128]),
    "path_reps": (3, 2),
    "rank_gemm_orders": ([16, 32, 48, 64, 80, 96, 112, 128], [16, 32, 64, 128]),
    "rank_gemm_split_orders": ([64, 80, 96, 112, 128, 144, 160, 176], [64, 128, 176]),
    "rank_gemm_reps": (5, 3),
    "one_thread_orders": ([16, 24, 32, 48, 64, 80, 96, 128], [16, 32, 64, 128]),
    "one_thread_reps": (5, 3),
    "split_orders": ([24, 32, 48, 64, 80, 96, 128, 160], [32, 64, 128]),
    "split_reps": (5, 3),
    "settle": (0.2, 0.1),
}


def _ladders(args: argparse.Namespace) -> None:
    """Fill the ladder options the command line left out: the full ones, or the --quick ones."""
    for name, (full, quick) in TUNE_LADDERS.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)


def _cmd_tune(args: argparse.Namespace) -> int:
    if args.reset:
        return _tune_reset(args)
    if args.gpus:
        return _tune_gpus(args)
    _ladders(args)
    if args.paths_only or args.quick:
        return _tune_paths(args)
    import os
    import tempfile

    if not args.dry_run:
        rc = _tune_models(args, _repo(args))
    else:  # the models are built and used for the suggestions, then thrown away
        from tileblas.perf import Repository

        with tempfile.TemporaryDirectory(prefix="tileblas-tune-") as scratch:
            print("--dry-run: the models are built in a scratch repository and thrown away")
            rc = _tune_models(args, Repository(os.path.join(scratch, "models.sqlite")))
    if rc or args.no_paths:
        return rc
    return _tune_paths(args)


def _tune_models(args: argparse.Namespace, repo: Any) -> int:
    """The models part of ``tileblas tune``: the algorithm's models and the runtime's (dgemm tiles,
    triangular recursion stops) built into ``repo``, the best variant and block, the suggestions."""
    from tileblas.perf import Predictor, build_models_for, current_key, suggest
    from tileblas.perf._predictor import measure_algorithm

    key = current_key(args.threads, args.locality)
    blocks = args.blocks
    build_models_for(args.algorithm, [args.n], blocks, repo, key, [args.variant] if args.variant else None,
                     reps=args.reps, progress=not args.no_progress, min_size=args.min_size,
                     validation_points=args.validation, max_samples=args.max_samples, bursts=args.bursts)
    # what the runtime asks for: DGEMM tiles and triangular recursion stop sizes
    extra = {("dgemm", ("N", "N")): ([8, 8, 8], [args.max_tile] * 3),
             ("dtrsm", ("L", "L", "N")): ([8, 8], [args.max_tile, args.max_tile]),
             ("dtrmm", ("L", "L", "N")): ([8, 8], [args.max_tile, args.max_tile])}
    from tileblas.perf import Sampler, build_submodel
    from tileblas.perf._sampler import leading_dimension

    for (routine, flags), (lo, hi) in extra.items():
        old = repo.load(key, routine, flags)
        if old is not None:
            if all(h >= x for h, x in zip(old.hi, hi)) and all(lo_ <= max(x, 16) for lo_, x in zip(old.lo, lo)):
                continue  # covered (a lower bound of 16 instead of 8 only costs extrapolation by one step)
            lo = [min(a, b) for a, b in zip(old.lo, lo)]  # grow the stored domain, never shrink it
            hi = [max(a, b) for a, b in zip(old.hi, hi)]
        print(f"building {routine} {''.join(flags)} over {lo}..{hi}")
        sampler = Sampler(threads=args.threads, locality=args.locality, reps=args.reps,
                          ld=leading_dimension(max(hi)))
        sm = build_submodel(routine, flags, lambda s, r=routine, f=flags: sampler.sample(r, f, s), lo, hi,
                            "refine", 0.1, max(args.min_size, 64), validation_points=args.validation,
                            progress=not args.no_progress,
                            config={"locality": args.locality, "reps": args.reps, "threads": args.threads},
                            max_samples=args.max_samples, bursts=args.bursts)
        repo.save(key, sm)
        print(f"  {sm.samples} samples, {len(sm.regions)} regions, validation avg/max rel. error "
              f"{sm.avg_error:.1%}/{sm.max_error:.1%}")
    pred = Predictor(repo, key)
    variants = [args.variant] if args.variant else None
    from tileblas.perf._algorithms import get_algorithm

    best = None
    for v in variants or get_algorithm(args.algorithm).variants:
        b, preds = pred.best_block(args.algorithm, args.n, v, blocks)
        p = min(preds, key=lambda q: q.time["median"])
        print(f"{args.algorithm} variant {v} n={args.n}: best predicted block {b} "
              f"({p.time['median'] * 1e3:.2f} ms, efficiency {p.efficiency['median']:.3f})")
        if best is None or p.time["median"] < best[2]:
            best = (v, b, p.time["median"])
    assert best is not None
    print(f"best: variant {best[0]} with block {best[1]}")
    if args.measure:
        t = measure_algorithm(args.algorithm, args.n, best[0], best[1], args.reps, args.threads)
        print(f"  measured {t.median * 1e3:.2f} ms (predicted {best[2] * 1e3:.2f} ms)")
    db = str(repo.path)
    print("runtime suggestions:")
    print(f"  tile_size(dgemm, n=4096, devices=2) = {suggest('tile_size', n=4096, devices=2, path=db)}")
    print(f"  recursion_stop(dtrsm, n=512) = {suggest('recursion_stop', routine='dtrsm', n=512, path=db)}")
    return 0


# ---------------------------------------------------------------------------------------------------
BURSTS_HELP = ("bursts per sample point, each in its own pass over a batch of points; a point keeps the least "
               "disturbed one (its smallest median)")


def register(subparsers: Any) -> None:
    model = subparsers.add_parser("model", help="build and inspect BLAS performance models")
    msub = model.add_subparsers(dest="model_command", metavar="ACTION")
    b = msub.add_parser("build", help="sample a routine and store its piecewise polynomial model")
    b.add_argument("routine", help="dgemm, dtrsm, dtrmm, dsyrk, dtrti2 or dtrsyl")
    b.add_argument("--flags", default=None, help="flag letters, e.g. LLN for dtrsm side,uplo,transa (diag ignored)")
    b.add_argument("--lo", type=_pos, nargs="+", default=[8], help="lower bound(s) of the size arguments")
    b.add_argument("--hi", type=_pos, nargs="+", default=[1024], help="upper bound(s) of the size arguments")
    b.add_argument("--strategy", choices=("refine", "expand"), default="refine",
                   help="split the domain until each region fits (refine, default) or grow regions from one end "
                        "(expand)")
    b.add_argument("--error-bound", type=number(0.0, strict=True), default=0.1,
                   help="largest relative error a region's polynomial may have (default 0.1)")
    b.add_argument("--min-size", type=_pos, default=32, help="minimum region size (refine)")
    b.add_argument("--direction", choices=("down", "up"), default="down", help="expansion direction (expand)")
    b.add_argument("--initial-size", type=_pos, default=128, help="initial region size (expand)")
    b.add_argument("--reps", type=_pos, default=5, help="timed repetitions per point (first call excluded)")
    b.add_argument("--bursts", type=_pos, default=2, help=BURSTS_HELP)
    b.add_argument("--validation", type=_nonneg, default=200, help="fresh validation points")
    b.add_argument("--max-samples", type=_pos, default=None,
                   help="sample budget (refine): once spent, the remaining regions are accepted as they are")
    b.add_argument("--plot", default=None, help="write a PNG of the regions coloured by error")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_common(b)
    b.set_defaults(func=_cmd_build)
    s = msub.add_parser("show", help="list stored models")
    s.add_argument("routine", nargs="?", default=None, help="only this routine's models (default all)")
    s.add_argument("--db", default=None, help="model repository file (default: $TILEBLAS_MODEL_DB or the cache dir)")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=_cmd_show)
    model.set_defaults(func=_missing_action(model, "action"))

    rank = subparsers.add_parser("rank", help="rank algorithm variants by their predicted time")
    rsub = rank.add_subparsers(dest="rank_command", metavar="ALGORITHM")
    for name in ("trinv", "sylvester"):
        r = rsub.add_parser(name, help=f"rank the {name} variants")
        r.add_argument("--n", type=_ints, default=[256, 512], help="matrix sizes, e.g. 256,512 or 64:1024:64")
        r.add_argument("--block", type=_pos, default=96, help="block size of the variants (default 96)")
        r.add_argument("--variants", type=_ints, default=None, help="variants to rank, e.g. 1,3 (default all)")
        r.add_argument("--measure", action="store_true", help="also run the variants and compare rankings")
        r.add_argument("--build", action="store_true", help="build missing models first")
        r.add_argument("--reps", type=_pos, default=3, help="timed repetitions per point (default 3)")
        r.add_argument("--bursts", type=_pos, default=2, help=BURSTS_HELP)
        r.add_argument("--min-size", type=_pos, default=32, help="smallest region of a model built (default 32)")
        r.add_argument("--tolerance", type=number(0.0), default=0.05,
                       help="measured times closer than this (relative) are not counted as ordered (default 0.05)")
        r.add_argument("--plot", default=None, help="write a PNG of each variant's efficiency against n")
        r.add_argument("--no-progress", action="store_true", help="no progress bar")
        _add_common(r)
        r.set_defaults(func=_cmd_rank, algorithm=name)
    rank.set_defaults(func=_missing_action(rank, "algorithm"))

    t = subparsers.add_parser(
        "tune", help="measure this machine and store what the runtime and the drop-in then use",
        description="Measure this machine: the Level-3 path crossovers (one native call, tiles, the trmm/trsm "
                    "recursion, the C path's limits), stored in paths.json, and the performance models of an "
                    "algorithm and of the runtime's tiles. Every point is timed with a control (the baseline "
                    "twice); a setting whose gain lies within that noise is not stored. The results are "
                    "printed before they are stored; --dry-run stores nothing, --reset removes what was stored.")
    w = t.add_argument_group("what to do")
    w.add_argument("--quick", action="store_true",
                   help="the path crossovers only, on short ladders (about a tenth of the full run's time; the "
                        "time estimate is printed before it starts)")
    w.add_argument("--paths-only", action="store_true", help="measure only the path crossovers (no models)")
    w.add_argument("--no-paths", action="store_true", help="build only the models")
    w.add_argument("--gpus", action="store_true",
                   help="measure the figures of this machine's GPUs again (host link, gemm rates where no preset "
                        "covers the model, a drop-in call's cost beyond the model) and keep them in gpus.json in "
                        "place of those the first use kept; nothing else")
    w.add_argument("--dry-run", action="store_true", help="measure and show the results, store nothing")
    w.add_argument("--reset", action="store_true",
                   help="remove the stored path policy, model repository and GPU figures (naming each file) and return to "
                        "the shipped defaults; measures nothing")
    w.add_argument("--no-progress", action="store_true", help="no progress lines or bars")
    m = t.add_argument_group("performance models", "the models of an algorithm's block sizes and of the "
                             "runtime's DGEMM tiles and TRSM/TRMM recursion (not with --quick or --paths-only)")
    m.add_argument("--algorithm", choices=("trinv", "sylvester"), default="trinv",
                   help="the algorithm whose variants and block sizes are modeled (default trinv)")
    m.add_argument("--variant", type=_pos, default=None, help="only this variant of the algorithm (default all)")
    m.add_argument("--n", type=_pos, default=1000, help="matrix order the block size is chosen for (default 1000)")
    m.add_argument("--blocks", type=_ints, default=list(range(16, 257, 16)),
                   help="block sizes to choose from (default 16:256:16)")
    m.add_argument("--max-tile", type=count(8), default=512,
                   help="largest DGEMM tile / TRSM size modeled for the runtime (at least 8, the models' lower end)")
    m.add_argument("--reps", type=_pos, default=5, help="timed repetitions per sample point (default 5)")
    m.add_argument("--bursts", type=_pos, default=2, help=BURSTS_HELP)
    m.add_argument("--min-size", type=_pos, default=32, help="smallest region of a model's domain (default 32)")
    m.add_argument("--validation", type=_nonneg, default=50,
                   help="fresh points each model is checked on after fitting (default 50)")
    m.add_argument("--max-samples", type=_pos, default=20000, help="sample budget per model (default 20000)")
    m.add_argument("--measure", action="store_true", help="run the chosen configuration once and print its time")
    g = t.add_argument_group("Level-3 paths", "crossovers between one native call on all threads, tiles and "
                             "the trmm/trsm recursion, and the C path's limits, stored in paths.json (see "
                             "`tileblas info`); ladders default to the full ones, or the --quick ones")
    g.add_argument("--paths-file", default=None,
                   help="where to store them (default: $TILEBLAS_PATHS, or paths.json next to the repository)")

    def ladder(name: str) -> str:
        full, quick = TUNE_LADDERS[name]
        show = lambda v: ",".join(map(str, v)) if isinstance(v, list) else f"{v:g}"  # noqa: E731
        return f"(default {show(full)}; --quick {show(quick)})"

    g.add_argument("--path-sizes", type=_ints, default=None,
                   help=f"square sizes timed as one native call against tiles {ladder('path_sizes')}")
    g.add_argument("--path-orders", type=_ints, default=None,
                   help=f"trmm/trsm triangle orders for native against recursion {ladder('path_orders')}")
    g.add_argument("--path-rhs", type=_ints, default=None,
                   help=f"trmm/trsm right-hand-side counts for native against recursion {ladder('path_rhs')}")
    g.add_argument("--path-reps", type=_pos, default=None,
                   help=f"interleaved rounds per point, best kept {ladder('path_reps')}")
    g.add_argument("--families", type=names(_FAMILIES), default=list(_FAMILIES),
                   help=f"routine families to measure (default all: {','.join(_FAMILIES)})")
    g.add_argument("--classes", type=names(_CLASSES), default=list(_CLASSES),
                   help="precision classes to measure (real: float64, complex: complex128; default both)")
    g.add_argument("--settle", type=number(0.0), default=None,
                   help=f"pause in seconds before each timed block {ladder('settle')}")
    g.add_argument("--cold-idle", type=number(0.0), default=0.2,
                   help="the C path's limits are chosen on warm and cold calls alike: each round also times "
                        "each way once as the first call after this many seconds without calls (default 0.2; "
                        "0: warm calls only)")
    g.add_argument("--margin", type=number(0.0), default=0.03,
                   help="a path must win by more than this, beyond the control's noise, to be chosen (default 0.03)")
    g.add_argument("--rank-gemm-orders", type=_ints, default=None,
                   help=f"square orders for the syrk/syr2k gemm route as one call {ladder('rank_gemm_orders')}")
    g.add_argument("--rank-gemm-split-orders", type=_ints, default=None,
                   help=f"square orders for the syrk/syr2k gemm route split on the pool "
                        f"{ladder('rank_gemm_split_orders')}")
    g.add_argument("--rank-gemm-reps", type=_pos, default=None,
                   help=f"interleaved rounds per gemm-route point {ladder('rank_gemm_reps')}")
    g.add_argument("--no-rank-gemm", action="store_true",
                   help="do not measure the syrk/syr2k gemm route (its shipped limits stay in force)")
    g.add_argument("--one-thread-orders", type=_ints, default=None,
                   help=f"square orders for the one-thread instance against the pool {ladder('one_thread_orders')}")
    g.add_argument("--one-thread-reps", type=_pos, default=None,
                   help=f"interleaved rounds per one-thread point {ladder('one_thread_reps')}")
    g.add_argument("--no-one-thread", action="store_true",
                   help="do not measure the one-thread limits (their shipped values stay in force)")
    g.add_argument("--split-orders", type=_ints, default=None,
                   help=f"square orders for the C path's calls in parts on the pool against one call "
                        f"{ladder('split_orders')}")
    g.add_argument("--split-reps", type=_pos, default=None, help=f"interleaved rounds per split point {ladder('split_reps')}")
    g.add_argument("--no-split", action="store_true",
                   help="do not measure where the split starts (its shipped ranges stay in force)")
    c = t.add_argument_group("where and for what")
    _add_common(c)
    t.set_defaults(func=_cmd_tune)
