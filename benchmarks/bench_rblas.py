"""Benchmark of tileblas.rblas: the paper's section 3.2 sweep (figures 2-7, 11) and the issue's bars.

Usage::

    python benchmarks/bench_rblas.py [--out DIR] [--preset quick|paper] [--sizes LEVEL=N[,N...] ...]
                                     [--bar-sizes LEVEL=N ...] [--calls 10] [--trials 10] [--bar-trials 5]
                                     [--bar-max-trials 100] [--bar-seconds 2] [--bar-max-seconds 20]
                                     [--bars forward roundtrip exact]
                                     [--fallback-scipy] [--sweep-only|--bars-only] [--no-progress]

Same as ``tileblas rblas bench`` (tileblas.cli._rblas, tileblas.rblas._bench); baseline (the plain tileblas.blas call) measured
in the same run, interleaved, best of at least --bar-trials rounds and --bar-seconds for the bars
(extended up to --bar-max-trials rounds or --bar-max-seconds until each side's minimum repeats within 1%).
"""

from __future__ import annotations

import argparse
import sys

from tileblas.cli._rblas import register

__all__: list[str] = []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_rblas")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["rblas", "bench", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
