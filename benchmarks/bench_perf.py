"""Benchmark of tileblas.perf against the bars of issue 6.

1. dtrsm (side, uplo, trans) = (L, L, N), m, n in [8, 1024], error bound 10%: samples used, build time, and
   the average relative error of the median on >= 200 fresh validation points (bars: <= 20,000 samples,
   <= 5% average error, <= 10 minutes).
2. Triangular inverse: predicted ranking of the 4 variants against the measured ranking at n in
   {256, 512, 1024} (pairs whose measured medians differ by more than 5% must agree), and the block
   size predicted best at n = 1000 against the measured efficiencies over the same block sizes (bar: the
   predicted-best block is within 5% of the best measured efficiency).
3. Sylvester: predicted vs measured ranking of the variants at one size (reported, no bar).

Measurements of algorithms are interleaved (one execution of every configuration per round, best-of /
median over rounds), so machine noise hits all configurations alike.  Model sample points and validation
points are measured alike, in --bursts bursts of --reps repetitions per point, each burst in its own pass
over a batch of points; a point keeps its least disturbed burst (smallest median).  Models are stored in a temporary
repository unless --db is given.

    python benchmarks/bench_perf.py --quick      # smaller domains and fewer rounds
    python benchmarks/bench_perf.py --plots out/ # also write the Fig. III.7 / IV.1 / IV.2-like PNGs
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

from tileblas.perf import (
    ALGORITHMS,
    Predictor,
    Repository,
    Sampler,
    build_models_for,
    build_submodel,
    current_key,
)
from tileblas.perf._sampler import leading_dimension


def interleaved(configs, make, rounds):
    """Median and min time per config over ``rounds`` rounds, each running every config once."""
    runners = {c: make(c) for c in configs}
    for prep, run in runners.values():  # warm-up (first call excluded, as in the sampler)
        prep()
        run()
    times = {c: [] for c in configs}
    for _ in range(rounds):
        for c, (prep, run) in runners.items():
            prep()
            t0 = time.perf_counter_ns()
            run()
            times[c].append((time.perf_counter_ns() - t0) * 1e-9)
    return {c: (float(np.median(v)), float(np.min(v))) for c, v in times.items()}


def bench_dtrsm(args, repo, key, out):
    sampler = Sampler(reps=args.reps, ld=leading_dimension(args.hi))
    t0 = time.perf_counter()
    sm = build_submodel("dtrsm", ("L", "L", "N"), lambda s: sampler.sample("dtrsm", ("L", "L", "N"), s),
                        (8, 8), (args.hi, args.hi), "refine", 0.10, args.min_size,
                        validation_points=args.validation, progress=args.progress,
                        config={"locality": "in-cache", "reps": args.reps}, bursts=args.bursts)
    repo.save(key, sm)
    v = sm.validation
    res = {"regions": len(sm.regions), "points": sm.points, "samples": sm.samples,
           "build_seconds": sm.config["build_seconds"], "total_seconds": time.perf_counter() - t0,
           "validation_points": v["points"], "avg_rel_error": v["avg_rel_error"], "max_rel_error": v["max_rel_error"]}
    out(f"[dtrsm LLN] m,n in [8,{args.hi}], eps=10%, s_min={args.min_size}, reps={args.reps} x bursts={args.bursts}: "
        f"{sm.samples} samples "
        f"({sm.points} points, {len(sm.regions)} regions), built in {res['build_seconds']:.0f} s; validation on "
        f"{v['points']} fresh points: avg {v['avg_rel_error']:.2%}, max {v['max_rel_error']:.2%}")
    ok = sm.samples <= 20000 and v["avg_rel_error"] <= 0.05 and res["build_seconds"] <= 600 and v["points"] >= 200
    out(f"  bar (<= 20000 samples, avg <= 5%, <= 600 s, >= 200 points): {'PASS' if ok else 'FAIL'}")
    res["pass"] = ok
    if args.plots:
        from tileblas.perf._plots import plot_regions

        out("  plot: " + plot_regions(sm, os.path.join(args.plots, "dtrsm_regions.png"), v.get("detail", [])))
    return res


def bench_trinv(args, repo, key, out):
    from tileblas.cli._perf import ranking_agreement

    alg = ALGORITHMS["trinv"]
    sizes = args.sizes
    t0 = time.perf_counter()
    build_models_for("trinv", sizes + [args.nblock], [args.block] + args.blocks, repo, key, reps=args.reps,
                     min_size=args.min_size, validation_points=50, progress=args.progress, log=out,
                     bursts=args.bursts)
    out(f"[trinv] models ready after {time.perf_counter() - t0:.0f} s")
    if args.build_only:
        return {"build_seconds": time.perf_counter() - t0}
    pred = Predictor(repo, key)
    res = {"ranking": [], "block": {}}
    rng = np.random.default_rng(0)
    total_agree = total = 0
    series = {}
    for n in sizes:
        ranking = pred.rank("trinv", n, args.block)
        p_time = {p.label["variant"]: p.time["median"] for p in ranking}
        meas = interleaved(list(alg.variants), lambda v: alg.make_runner(n, v, args.block, rng), args.rounds)
        m_time = {v: meas[v][0] for v in alg.variants}
        agree, counted = ranking_agreement(p_time, m_time, 0.05)
        total_agree += agree
        total += counted
        p_order = sorted(p_time, key=p_time.get)
        m_order = sorted(m_time, key=m_time.get)
        out(f"[trinv n={n} b={args.block}] predicted {p_order} measured {m_order}; "
            f"distinguishable pairs (>5%) agreeing {agree}/{counted}")
        for v in alg.variants:
            pp = next(p for p in ranking if p.label["variant"] == v)
            out(f"    variant {v}: predicted {p_time[v] * 1e3:8.2f} ms [{pp.time['min'] * 1e3:.2f}, "
                f"{pp.time['max'] * 1e3:.2f}]  measured median {m_time[v] * 1e3:8.2f} ms")
            s = series.setdefault(f"variant {v}", {"x": [], "median": [], "min": [], "max": [], "measured": []})
            s["x"].append(n)
            for st in ("median", "min", "max"):
                s[st].append(pp.efficiency[st])
            s["measured"].append(alg.flops(n) / m_time[v] / (pred.peak_gflops * 1e9))
        res["ranking"].append({"n": n, "predicted": p_order, "measured": m_order, "agree": agree, "counted": counted,
                               "predicted_ms": {v: p_time[v] * 1e3 for v in p_time},
                               "measured_ms": {v: m_time[v] * 1e3 for v in m_time}})
    res["ranking_pass"] = total_agree == total
    out(f"  bar (every distinguishable pair ranked as measured): {total_agree}/{total} "
        f"{'PASS' if res['ranking_pass'] else 'FAIL'}")
    # block size at n = args.nblock
    n = args.nblock
    bseries = {}
    all_ok = True
    for v in args.block_variants:
        best_b, preds = pred.best_block("trinv", n, v, args.blocks)
        meas = interleaved(args.blocks, lambda b: alg.make_runner(n, v, b, rng), args.rounds)
        eff = {b: alg.flops(n) / meas[b][0] for b in args.blocks}
        best_meas = max(eff, key=eff.get)
        ratio = eff[best_b] / eff[best_meas]
        eff_min = {b: alg.flops(n) / meas[b][1] for b in args.blocks}  # best-of-rounds, reported alongside
        ratio_min = eff_min[best_b] / max(eff_min.values())
        ok = ratio >= 0.95
        all_ok &= ok
        out(f"[trinv n={n} variant {v}] predicted best block {best_b}, measured best {best_meas}; measured "
            f"efficiency (median of {args.rounds}) at predicted block = {ratio:.1%} of best  {'PASS' if ok else 'FAIL'}"
            f"  (best of {args.rounds}: {ratio_min:.1%}, best {max(eff_min, key=eff_min.get)})")
        res["block"][v] = {"predicted_best": best_b, "measured_best": best_meas, "ratio": ratio,
                           "ratio_best_of": ratio_min}
        bseries[f"variant {v}"] = {
            "x": list(args.blocks), "median": [p.efficiency["median"] for p in preds],
            "min": [p.efficiency["min"] for p in preds], "max": [p.efficiency["max"] for p in preds],
            "measured": [eff[b] / (pred.peak_gflops * 1e9) for b in args.blocks]}
    res["block_pass"] = all_ok
    if args.plots:
        from tileblas.perf._plots import plot_vs_block, plot_vs_size

        out("  plot: " + plot_vs_size(series, os.path.join(args.plots, "trinv_vs_n.png"),
                                      f"trinv, block {args.block}: predicted vs measured"))
        out("  plot: " + plot_vs_block(bseries, os.path.join(args.plots, "trinv_vs_block.png"),
                                       f"trinv, n={n}: predicted vs measured"))
    return res


def bench_sylvester(args, repo, key, out):
    from tileblas.cli._perf import ranking_agreement

    alg = ALGORITHMS["sylvester"]
    n, b = args.sylv_n, args.sylv_block
    build_models_for("sylvester", [n], [b], repo, key, reps=args.reps, min_size=args.min_size,
                     validation_points=50, progress=args.progress, log=out, bursts=args.bursts)
    pred = Predictor(repo, key)
    ranking = pred.rank("sylvester", n, b)
    p_time = {p.label["variant"]: p.time["median"] for p in ranking}
    rng = np.random.default_rng(0)
    meas = interleaved(list(alg.variants), lambda v: alg.make_runner(n, v, b, rng), max(3, args.rounds // 2))
    m_time = {v: meas[v][0] for v in alg.variants}
    agree, counted = ranking_agreement(p_time, m_time, 0.05)
    out(f"[sylvester n={n} b={b}] predicted {sorted(p_time, key=p_time.get)}")
    out(f"                      measured  {sorted(m_time, key=m_time.get)}; pairs agreeing {agree}/{counted}")
    for v in sorted(p_time, key=p_time.get):
        out(f"    variant {v:2d}: predicted {p_time[v] * 1e3:8.2f} ms  measured {m_time[v] * 1e3:8.2f} ms")
    return {"n": n, "block": b, "agree": agree, "counted": counted,
            "predicted_ms": {v: p_time[v] * 1e3 for v in p_time}, "measured_ms": {v: m_time[v] * 1e3 for v in m_time}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller problem and fewer rounds")
    ap.add_argument("--db", default=None, help="model repository (default: a temporary file)")
    ap.add_argument("--plots", default=None, help="directory for PNG plots")
    ap.add_argument("--only", choices=("dtrsm", "trinv", "sylvester"), default=None)
    ap.add_argument("--json", default=None, help="write results as JSON here")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per burst (default 5)")
    ap.add_argument("--bursts", type=int, default=2,
                    help="bursts per sample point, each in its own pass; the least disturbed is kept (default 2)")
    ap.add_argument("--build-only", action="store_true",
                    help="trinv: only build the models into --db (run the comparison later from that file)")
    args = ap.parse_args(argv)
    q = args.quick
    args.hi = 512 if q else 1024
    args.min_size = 64 if q else 32
    args.validation = 200
    args.sizes = [256, 512] if q else [256, 512, 1024]
    args.block = 96
    args.nblock = 512 if q else 1000
    args.blocks = list(range(32, 257, 32)) if q else list(range(16, 257, 16))
    args.block_variants = [3] if q else [1, 2, 3, 4]
    args.rounds = 5 if q else 9
    args.sylv_n, args.sylv_block = (192, 48) if q else (384, 96)
    if args.plots:
        os.makedirs(args.plots, exist_ok=True)
    tmp = tempfile.TemporaryDirectory()
    repo = Repository(args.db or os.path.join(tmp.name, "bench.sqlite"))
    key = current_key()
    out = lambda s: print(s, flush=True)  # noqa: E731
    out(f"tileblas.perf benchmark ({'quick' if q else 'full'}) on {key.machine}, {key.library} {key.version}, "
        f"1 thread, in-cache; repository {repo.path}")
    results = {}
    t0 = time.perf_counter()
    if args.only in (None, "dtrsm"):
        results["dtrsm"] = bench_dtrsm(args, repo, key, out)
    if args.only in (None, "trinv"):
        results["trinv"] = bench_trinv(args, repo, key, out)
    if args.only in (None, "sylvester"):
        results["sylvester"] = bench_sylvester(args, repo, key, out)
    out(f"total {time.perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
