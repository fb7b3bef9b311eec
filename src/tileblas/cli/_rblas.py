"""``tileblas rblas bench``: the command line of the RBLAS benchmark (:mod:`tileblas.rblas._bench`)."""

from __future__ import annotations

import argparse
from typing import Any

from tileblas.cli._args import count, number
from tileblas.rblas._bench import BAR_PARTS, SIZES, run_bench

__all__ = ["register", "parse_sizes"]


def parse_sizes(items: list[str] | None, single: bool = False) -> dict[int, Any]:
    """``["1=1e3,1e5", "3=64"]`` -> ``{1: [1000, 100000], 3: [64]}`` (``single``: one size per level)."""
    out: dict[int, Any] = {}
    for item in items or []:
        level_s, sep, vals = item.partition("=")
        try:
            level = int(level_s)
            ns = [int(float(v)) for v in vals.split(",") if v.strip()]
        except ValueError:
            level, ns = 0, []
        if not sep or level not in (1, 2, 3) or not ns or min(ns) < 1 or (single and len(ns) != 1):
            raise ValueError(f"size must look like LEVEL=N{'' if single else '[,N...]'} with LEVEL in 1, 2, 3 "
                             f"and N >= 1; got {item!r} instead")
        out[level] = ns[0] if single else ns
    return out


def _cmd(args: argparse.Namespace) -> int:
    run_bench(args.out, args.preset, args.calls, args.trials, args.bar_trials, args.fallback_scipy,
              not args.bars_only, not args.sweep_only, bar_sizes=parse_sizes(args.bar_sizes, single=True),
              sizes=parse_sizes(args.sizes), progress=not args.no_progress, bar_max_trials=args.bar_max_trials,
              bar_parts=tuple(args.bars), bar_seconds=args.bar_seconds, bar_max_seconds=args.bar_max_seconds)
    return 0


def register(subparsers: Any) -> None:
    """Add ``tileblas rblas bench`` to the ``tileblas`` command."""
    p = subparsers.add_parser("rblas", help="reversible BLAS: benchmark of tileblas.rblas")
    p.set_defaults(func=lambda args: p.error("name the subcommand: {bench} (tileblas rblas -h)"))
    sub = p.add_subparsers(dest="rblas_command", metavar="SUBCOMMAND")
    b = sub.add_parser(
        "bench", help="the paper's section 3.2 sweep (figures 2-4, 11) and the overhead bars (compute-mode "
                 "forward against the plain call, round trips, RMS, exact mode); writes JSON and PNG",
        description="Sweep: for each of the paper's routines (zaxpy, zscal, zdrot; zgemv, zgbmv, zgeru; "
                    "zgemm, zsymm, ztrmm) and size, n forward then n reverse calls over r trials, per mode. "
                    "Bars: compute-mode forward vs the plain call, Level-1 round trips, RMS at N=10^7, "
                    "exact mode on every pair.  Sizes: --preset quick (default, about a minute on 2 cores: "
                    f"{SIZES['quick']}) or paper ({SIZES['paper']}, much longer: its Level-1 part alone "
                    "takes about 6 min and Level 3 at N=1000 dominates); override per level with "
                    "--sizes, e.g. --sizes 1=1e3,1e8 3=64 (figure 11 reaches 1e8 for Level 1 and 1e4 for "
                    "Levels 2-3: hours and tens of GB).  --bar-sizes 1=1e6 2=1024 3=512 shrinks the bars "
                    "(their targets are 1e7, 4096, 2048).")
    b.add_argument("--out", default="rblas-bench", help="output folder")
    b.add_argument("--preset", default="quick", choices=sorted(SIZES), help="sweep sizes")
    b.add_argument("--sizes", nargs="+", metavar="LEVEL=N[,N...]",
                   help="override the sweep sizes of a level (e.g. 1=1e3,1e5,1e7 2=64,256)")
    b.add_argument("--bar-sizes", nargs="+", metavar="LEVEL=N",
                   help="override a bar size (defaults 1=1e7 2=4096 3=2048)")
    b.add_argument("--calls", type=count(1), default=10, help="forward (then reverse) calls per trial (paper n)")
    b.add_argument("--trials", type=count(1), default=10, help="trials (paper r)")
    b.add_argument("--bar-trials", type=count(1), default=5, help="best-of trials for the bars (at least)")
    b.add_argument("--bar-max-trials", type=count(1), default=None,
                   help="extend a bar's timing up to this many trials until each side's minimum repeats "
                        "within 1%% (default 100)")
    b.add_argument("--bar-seconds", type=number(0.0), default=2.0,
                   help="time a bar for at least this long (default 2 s)")
    b.add_argument("--bar-max-seconds", type=number(0.0), default=20.0,
                   help="stop extending a bar's timing after this long (default 20 s)")
    b.add_argument("--bars", nargs="+", choices=BAR_PARTS, default=list(BAR_PARTS),
                   help="which bars to run (default all)")
    b.add_argument("--fallback-scipy", action="store_true",
                   help="run routines tileblas.blas lacks on scipy.linalg.blas (reported in the JSON)")
    b.add_argument("--sweep-only", action="store_true", help="run only the sweep (no bars)")
    b.add_argument("--bars-only", action="store_true", help="run only the bars (no sweep)")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.set_defaults(func=_cmd)
