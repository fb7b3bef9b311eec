#!/usr/bin/env bash
# The GPU check of tileblas: one command, at most 8 minutes, on a machine with an NVIDIA GPU and CuPy
# (made for the GPU test machine: one H100, 16 cores, 128 GiB, CuPy 14 / CUDA 13, Python 3.12, no network).
#
#   bash benchmarks/gpu_suite.sh [OUTDIR]          (OUTDIR: default $OUT, else gpu-results)
#
# Set-up in the checkout, once (the machine has no scipy-openblas32 and no network; .whl/ is ignored by git
# and must travel with the tree, e.g. the device run's carry=[".whl"]):
#   mkdir -p .whl && cp /work/shared/wheels/scipy_openblas32-*.whl .whl/
#   mkdir -p .git/info && echo /.whl/ >> .git/info/exclude
#
# Steps, each with its own time limit (seconds; all of them together 480 s = 8 min; a step gets at most
# what is left of the whole), each failure recorded and the next step run all the same (the script exits
# 0; the summary says what failed):
#
#   step    limit  what                                                              host memory
#   build     60   the C extensions of setup.py compiled in place (-O2 -pthread)      < 1 GiB
#   wheels    20   the wheels of .whl/ unpacked into a private site dir (no index)    < 1 GiB
#   env       30   versions, the GPUs, nvidia-smi, the libcublas tileblas calls and   < 1 GiB
#                  the one CuPy's bindings call, the cuBLAS _v2 symbols it lacks
#   pytest   110   pytest -m gpu on the GPU test files, then the GPU guide's examples        < 2 GiB
#   tune      90   tileblas tune --paths-only on the host (gemm, syrk, trsm; real and  ~ 2 GiB
#                  complex; n = 1024, 2048, 4096) into a scratch paths.json that the
#                  bench step reads (TILEBLAS_PATHS): the CPU rates the drop-in's GPU
#                  rule weighs (only where a GPU is seen); then tileblas tune --gpus: the
#                  GPUs' figures into a scratch gpus.json (TILEBLAS_GPU_FIGURES)
#   bench    170   benchmarks/bench_gpu.py --parts quick,dropin:                     ~ 14 GiB
#                  quick: dgemm n = 8192 in core and out of core (1 GiB tile memory) vs
#                  cupy.matmul, recursive trmm/trsm vs cuBLAS;
#                  dropin: tileblas.blas dgemm/dsyrk/dtrsm/zgemm n = 1024-16384 choosing
#                  the GPU by itself, vs its CPU and GPU paths, SciPy on the host and
#                  cuBLAS on device-resident operands; the crossover the policy gives and
#                  whether each choice was the faster side (sizes in increasing order until
#                  the step's time is nearly spent: a clean stop, the rest listed as skipped)
#
# Results in OUTDIR (7 files at most): summary.txt (the table above with the seconds used and exit
# statuses), build.txt, env.txt, pytest.txt, bench.txt, bench_gpu.json, extra.tar.gz (the pytest JUnit
# XML).  Where CuPy is missing each step says so and the whole run takes seconds.
#
# TILEBLAS_BUILD_IN=DIR builds and runs from a copy of src/ in DIR instead of in place (the CPU test of
# this script uses it, so that the checkout's own compiled modules stay as they are); GPU_SUITE_N sets the
# benchmark's order (default 8192).
#
# The longer GPU measurements: benchmarks/gpu_part2.sh (steps of its own, each under 8 minutes), or
# these commands (after this script's build and wheels steps):
#   python benchmarks/bench_gpu.py --parts incore,routines,hetero,ooc,trace --ooc-n 32768
#   python benchmarks/bench_trmm_trsm.py --gpu [--stop S] --json trmm_trsm_gpu.json
#   python benchmarks/bench_async.py --quick --accel gpu --json async_gpu.json
set -u -o pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-${OUT:-gpu-results}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
total=480
t_start=$(date +%s)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tileblas-gpu-suite.XXXXXX")
summary=$out/summary.txt
printf '%-7s %6s %6s %4s  %s\n' step limit used rc result > "$summary"

# step NAME LIMIT LOG COMMAND...: run with the smaller of LIMIT and what is left of the whole budget
step() {
    local name=$1 limit=$2 log=$3 t0 rc left result
    shift 3
    left=$(( total - ($(date +%s) - t_start) ))
    if (( left < 10 )); then
        printf '%-7s %6s %6s %4s  %s\n' "$name" "$limit" 0 - "skipped: the 8-minute budget is spent" >> "$summary"
        return
    fi
    (( limit > left )) && limit=$left
    echo "== $name (at most ${limit} s)"
    t0=$(date +%s)
    timeout -k 5 "$limit" bash -c '"$@"' step "$@" >> "$log" 2>&1  # (the steps are exported functions)
    rc=$?
    case $rc in
        0) result=ok ;;
        124|137) result="timed out after ${limit} s" ;;
        *) result="failed: $(grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-160)" ;;
    esac
    printf '%-7s %6s %6s %4s  %s\n' "$name" "$limit" "$(( $(date +%s) - t0 ))" "$rc" "$result" >> "$summary"
    tail -n 5 "$log"
}

src=$root/src
if [ -n "${TILEBLAS_BUILD_IN:-}" ]; then
    mkdir -p "$TILEBLAS_BUILD_IN" && cp -r "$root/src" "$TILEBLAS_BUILD_IN/" && src=$TILEBLAS_BUILD_IN/src
fi
site=$scratch/site
export root src py out scratch site total t_start

# 1. build and 2. wheels: benchmarks/gpu_setup.sh (shared with gpu_part2.sh)
. "$root/benchmarks/gpu_setup.sh"
export -f build
step build 60 "$out/build.txt" build

export -f wheels
step wheels 20 "$out/build.txt" wheels
export PYTHONPATH=$src:$site${PYTHONPATH:+:$PYTHONPATH}

# 3. env: versions, GPUs, which libcublas (tileblas' and CuPy's bindings'), the _v2 symbols it lacks
env_report() {
    (command -v nvidia-smi > /dev/null && nvidia-smi) || echo "nvidia-smi: not found"
    "$py" - <<'EOF'
import json, sys
print("python", sys.version.split()[0])
import numpy
print("numpy", numpy.__version__)
import tileblas
from tileblas.kernels import _openblas
print("tileblas", tileblas.__version__, "from", tileblas.__file__)
print("OpenBLAS", _openblas.get_library(1).config())
from tileblas.devices.gpu import gpu_info
g = gpu_info()
print(json.dumps(g, indent=1, default=str))
if not g["available"]:
    sys.exit(f"no GPU: {g['note']}")
import cupy
from cupy_backends.cuda.libs import cublas as bindings
from tileblas.kernels import _cuda
rt = cupy.cuda.runtime
print("cupy", cupy.__version__, "CUDA runtime", rt.runtimeGetVersion(), "driver", rt.driverGetVersion())
print("CuPy's cuBLAS bindings:", bindings.__file__)
print("libcublas giving them cublasCreate_v2:", _cuda._providing_library(bindings.__file__, "cublasCreate_v2"))
lib = _cuda._library()
print("libcublas tileblas calls:", lib._name)
print("libcublas in the memory map:", sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcublas" in l}))
names = [f"cublas{p.upper()}{r}_v2" for p in "sdcz" for r in _cuda._ARGTYPES if p in "cz" or r[0] != "h"]
missing = [n for n in names if not hasattr(lib, n)]
print(f"_v2 symbols of the {len(names)} Level-3 routines missing from it:", missing)
sys.exit(1 if missing else 0)
EOF
}
export -f env_report
step env 30 "$out/env.txt" env_report

# 4. the GPU tests, by file name (the other test files need what this machine lacks), then the GPU guide's
# examples (doctests, skipped on machines without a GPU)
gpu_tests() {
    local opts=() rc=0
    "$py" -c "import pytest_timeout" 2> /dev/null && opts+=(--timeout 120)
    cd "$root" && "$py" -m pytest -q -m gpu -p no:cacheprovider "${opts[@]}" --junitxml "$scratch/pytest-gpu.xml" \
        tests/test_gpu_*.py || rc=$?
    "$py" -m pytest -q -p no:cacheprovider "${opts[@]}" --junitxml "$scratch/pytest-guide.xml" \
        "tests/test_docs.py::test_guide_examples_run[gpu]" || rc=$?
    return $rc
}
export -f gpu_tests
step pytest 110 "$out/pytest.txt" gpu_tests

# 5. the CPU rates the drop-in's GPU rule weighs against the GPUs' predicted time, timed on this host by
# tileblas tune into a scratch policy file, and the GPUs' figures (host link, gemm rates, a drop-in call's
# cost) by tileblas tune --gpus into a scratch figures file; the bench step reads both (what a user who
# tuned has)
export TILEBLAS_PATHS=$scratch/paths.json
export TILEBLAS_GPU_FIGURES=$scratch/gpus.json
tune_rates() {
    "$py" -c "import sys; from tileblas.devices.gpu import gpu_count
sys.exit(0 if gpu_count() else 'no GPU: the CPU rates are weighed against a GPU only; not timed')" || return 1
    cd "$root" && "$py" -m tileblas tune --paths-only --families gemm,syrk,trsm --classes real,complex \
        --path-sizes 1024,2048,4096 --path-orders 1024 --path-rhs 64 --path-reps 2 --settle 0.1 \
        --no-rank-gemm --no-one-thread --no-split --no-progress || return 1
    "$py" -m tileblas tune --gpus
}
export -f tune_rates
step tune 90 "$out/bench.txt" tune_rates

# 6. the quick benchmark and the drop-in's choice (bench_gpu.py's parts "quick" and "dropin"), within what is
# left of the step (the step's limit: 170 s or what is left of the whole, less 10 s to write the results)
bench() {
    local left=$(( total - ($(date +%s) - t_start) - 10 ))
    (( left > 160 )) && left=160
    cd "$root" && "$py" benchmarks/bench_gpu.py --parts quick,dropin --quick-n "${GPU_SUITE_N:-8192}" --trials 2 \
        --budget "$left" --out "$out"
}
export -f bench
step bench 170 "$out/bench.txt" bench

# results: anything beyond the seven files goes into extra.tar.gz
tar -czf "$out/extra.tar.gz" -C "$scratch" $(cd "$scratch" && ls -d pytest-gpu.xml pytest-guide.xml 2> /dev/null) \
    --files-from /dev/null
printf 'total %s s of %s\n' "$(( $(date +%s) - t_start ))" "$total" >> "$summary"
cat "$summary"
rm -rf "$scratch"
exit 0
