"""Run every tileblas benchmark, one after the other, each with its baseline in the same run.

    python benchmarks/run_all.py              # the full set with each script's defaults (about an hour)
    python benchmarks/run_all.py --quick      # smaller sizes where a script offers them
    python benchmarks/run_all.py --only runtime,trmm_trsm

Each benchmark is a separate process (so BLAS thread settings and imports do not leak between them) and
prints its own table; this script adds a header per benchmark, the wall time, and a summary of exit codes.
The benchmarks time ratios against baselines measured in the same run, so run them on a quiet machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> (arguments for the default run, arguments for --quick)
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "threads": ([], ["--n", "1024", "--trials", "3"]),
    "overhead": ([], ["--repeat", "3"]),
    "first_calls": ([], ["--processes", "2"]),
    "forms": ([], ["--repeat", "3"]),
    "gaps": ([], ["--quick"]),
    "runtime": ([], ["--n", "2048", "--hetero-n", "2048", "--trials", "3"]),
    "trmm_trsm": ([], ["--quick"]),
    "comm": ([], ["--n", "4096", "--trials", "1"]),
    "async": ([], ["--quick"]),
    "rblas": ([], ["--preset", "quick"]),
    "perf": ([], ["--quick"]),
    "cluster": ([], ["--n", "4096", "--trials", "1"]),
    "outofcore": ([], ["--n", "8192", "--budget-gib", "0.5"]),
}
# The GPU benchmarks (bench_gpu.py and the --gpu parts of the others) run through benchmarks/gpu_suite.sh.


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes where a benchmark offers them")
    ap.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    args = ap.parse_args(argv)
    names = list(BENCHMARKS) if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"--only: unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    results = []
    for name in names:
        default, quick = BENCHMARKS[name]
        cmd = [sys.executable, str(HERE / f"bench_{name}.py"), *(quick if args.quick else default)]
        print(f"\n==== {name}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        results.append((name, rc, time.perf_counter() - t0))
    print("\n==== summary")
    for name, rc, dt in results:
        print(f"  {name:<10} {'ok' if rc == 0 else f'exit {rc}':<8} {dt:8.1f} s")
    return 0 if all(rc == 0 for _, rc, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
