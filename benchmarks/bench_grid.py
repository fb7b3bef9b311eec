"""The Level-3 grid: tileblas.blas against scipy.linalg.blas over routines, precisions, sizes, shapes and layouts.

    python benchmarks/bench_grid.py --quick              # 1-2 minutes: d and z, sizes 64/256/1024
    python benchmarks/bench_grid.py --estimate-only      # point count and estimated time of the full grid
    python benchmarks/bench_grid.py                      # the full grid (prints its estimate first)
    python benchmarks/bench_grid.py --prefixes d --routines gemm,trmm --sizes 256,2048
    python benchmarks/bench_grid.py --sizes 64 --routines gemm,trmm --prefixes d --modes warm,cold,load

The same as ``tileblas bench grid`` (method and grid: :mod:`tileblas.cli._bench_grid`).  Each point: rounds of
SciPy, tileblas and SciPy again (the control), each after a 0.2 s pause, a call shorter than 50 ms timed
as a block of back-to-back calls; best of 5; ratio = SciPy time / tileblas time.  ``--modes cold`` times
each call alone, after the other library's call and an idle pause; ``--modes load`` beside busy processes;
every point also gets the count of distinct results of 40 identical calls of each library.  Run it on a
quiet machine: the load average is printed before and after.
"""

from __future__ import annotations

import sys

from tileblas.cli._args import OneLineParser
from tileblas.cli._bench_grid import add_grid_arguments, grid_main


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(description=__doc__.splitlines()[0])  # a bad option: one line, exit status 2
    add_grid_arguments(ap)
    try:
        return grid_main(ap.parse_args(argv))
    except ValueError as exc:  # a bad option: one line naming it, exit status 2 (as `tileblas bench grid`)
        print(f"bench_grid.py: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
