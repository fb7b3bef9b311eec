#!/usr/bin/env bash
# Every GPU measurement of tileblas in one command, on a machine with an NVIDIA GPU and CuPy.
#
#   bash benchmarks/gpu_suite.sh [OUTDIR] [BUDGET_MINUTES]
#
# OUTDIR defaults to $OUT, else gpu-results; BUDGET_MINUTES (default 28) bounds the whole run: steps are
# ordered by priority and a step that would start after the budget is skipped (and reported).
# Without internet: put the wheels the machine lacks in .whl/ at the root of the tree; they are installed
# with --no-index into /tmp/tileblas-site.  tileblas needs numpy, scipy and scipy-openblas32 (its own
# OpenBLAS); a machine with CuPy usually lacks only the last, fetched on a machine with internet by
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       -d .whl scipy-openblas32  tileblas itself runs from
# the tree: its two C extensions are compiled in place with the machine's C compiler.  Each step writes a log; JSON and PNG results go to
# OUTDIR, with nvidia-smi's report and a summary (step, exit status, seconds).
set -u -o pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-results}}
budget=$(( ${2:-28} * 60 ))
py=${PYTHON:-python3}
mkdir -p "$out"
t_start=$(date +%s)
export PYTHONUNBUFFERED=1

if ls .whl/*.whl >/dev/null 2>&1; then
    $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/tileblas-site \
        .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/tileblas-site${PYTHONPATH:+:$PYTHONPATH}
fi
# the two C extensions, compiled in place with the machine's compiler (no setuptools, no network)
$py - > "$out/build.log" 2>&1 <<'EOF' || { cat "$out/build.log"; exit 1; }
import subprocess, sysconfig, numpy
inc = [sysconfig.get_paths()["include"], numpy.get_include()]
cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
for src in ("src/tileblas/kernels/_native.c", "src/tileblas/blas/_fastpath.c"):
    out = src[:-2] + sysconfig.get_config_var("EXT_SUFFIX")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", *["-I" + i for i in inc], src, "-o", out], check=True)
    print("built", out)
EOF
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
$py -c "import cupy, tileblas; print('cupy', cupy.__version__, 'tileblas', tileblas.__version__)" | tee "$out/versions.txt"

step() {  # step NAME MAX_SECONDS COMMAND...
    local name=$1 limit=$2 t0 rc left
    shift 2
    left=$(( budget - ($(date +%s) - t_start) ))
    if (( left < 30 )); then
        echo "$name skipped (budget spent)" | tee -a "$out/summary.txt"
        return
    fi
    (( limit > left )) && limit=$left
    echo "== $name (at most ${limit}s)"
    t0=$(date +%s)
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    rc=$?
    tail -n 15 "$out/$name.log"
    echo "$name rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$out/summary.txt"
}

# 1. every GPU test (the rest of the suite runs in CI without a GPU)
step pytest-gpu 300 $py -m pytest -q -m gpu tests --junitxml "$out/pytest-gpu.xml"
# 2, 5, 4, 3, 8. the tile runtime on the GPU: in-core, every routine, GPU + CPU, out-of-core and its trace
step bench-gpu-incore 300 $py benchmarks/bench_gpu.py --parts incore --out "$out/incore"
step bench-gpu-routines 300 $py benchmarks/bench_gpu.py --parts routines --out "$out/routines"
step bench-gpu-hetero 150 $py benchmarks/bench_gpu.py --parts hetero --out "$out/hetero"
step bench-gpu-ooc 400 $py benchmarks/bench_gpu.py --parts ooc,trace --out "$out/ooc"
# 6. KBLAS: recursive trmm/trsm on cuBLAS vs cuBLAS's own; the asynchronous host-data variant
step bench-trmm-trsm 300 $py benchmarks/bench_trmm_trsm.py --gpu --json "$out/trmm_trsm_gpu.json"
# 7. the asynchronous API with GPU + CPU backends vs the GPU alone
step bench-async 200 $py benchmarks/bench_async.py --quick --accel gpu --json "$out/async_gpu.json"

echo "total $(( $(date +%s) - t_start ))s" | tee -a "$out/summary.txt"
