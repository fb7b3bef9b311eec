#!/usr/bin/env bash
# GPU measurements, part 2 (docs/measurements/gpu.md): the steps of benchmarks/bench_gpu_part2.py on the GPU
# test machine (one H100, 16 cores, 128 GiB, CuPy 14 / CUDA 13, no network), each step one process under a
# time limit of its own, the steps named in one command of at most 8 minutes.
#
#   bash benchmarks/gpu_part2.sh [--dry] STEP[,STEP...] [OUTDIR]     (OUTDIR: default $OUT, else gpu-results)
#
# Set-up in the checkout, once (as for gpu_suite.sh): .whl/ with the scipy-openblas32 wheel, carried along.
#
#   step    limit  what (each against its baseline in the same run; the simulated H100's prediction beside)
#   incore   145   d/s/zgemm n = 8192-32768, host operands through the runtime vs cupy.matmul (bar 0.95x)
#   ooc      165   dgemm n = 32768 and 16384, operands 1.5x and 3x the tile memory, vs in-core cupy.matmul
#                  (bar 0.90x); bytes moved vs the lower bound; static round robin without caches; cuBLAS-XT
#   hybrid    75   GPU + CPU workers (cores less 4) vs the GPU alone, d/zgemm (bar 1.0x), CPU flop share
#   kblas     85   recursive in-place d/z trmm/trsm n = 4096-16384, 64/512/n right-hand sides, vs cuBLAS;
#                  then d, n = 8192/16384, 64/512 right-hand sides, the recursion stopping at 512 and 2048
#   async     65   Brodtkorb's loop, GPU + CPU workers vs the GPU alone (bar 1.0x)
#   trace     55   Perfetto trace and timeline PNG of one out-of-core dgemm (n = 16384, 3x), the simulated one
#   tiles     75   the in-core gemm at each tile forced: dgemm n = 8192 (1024-4096) and 16384 (2048-8192),
#                  zgemm n = 8192 (2048, 4096), vs cupy.matmul (the first run's tile 4096 at dgemm 8192: 0.69x);
#                  dgemm n = 16384 with operands 3x the tile memory at tile 2048, and with 2 streams
#
# A step's budget is its limit less 15 s (start-up, writing): it skips the cases its predicted cost does not
# fit and stops cleanly (bench_gpu_part2.py's notes).  Before the steps: the C extensions built in place and
# the wheels unpacked into build/gpu-site (benchmarks/gpu_setup.sh; both skipped when done and up to date,
# at most 90 s).  GPU_PART2_TOTAL (default 470 s) caps the command: a step gets the smaller of its limit and
# what is left; a step that cannot get 30 s is skipped.
#
# The device minutes of a session (15, the machine's start of 1-2 included), e.g.:
#   bash benchmarks/gpu_part2.sh incore,ooc                  (build + 310 s of limits: timeout_s 420)
#   bash benchmarks/gpu_part2.sh hybrid,kblas,async,trace    (build kept: 280 s of limits: timeout_s 320)
# (the step budgets hold the predicted cost of every case: docs/measurements/gpu.md, "Sizing")
#
# Files in OUTDIR (6 at most): summary.txt (the steps' limits, seconds used, exit statuses, then every
# measured figure beside its baseline, bar and prediction), log.txt (the build, nvidia-smi, each step's
# output), results.json (bench_gpu_part2.py's), and from the trace step gpu_ooc_trace.json,
# gpu_ooc_timeline.png, sim_ooc_timeline.png.  The script exits 0; summary.txt says what failed.
#
# --dry: the flow on any machine: the CuPy stand-in (tests/_cupy_standin.py) at tiny sizes, no build and
# no wheels (the checkout's modules as they are), GPU_PART2_TOTAL 120 by default.
set -u -o pipefail
cd "$(dirname "$0")/.."
root=$PWD
dry=0
if [ "${1:-}" = "--dry" ]; then
    dry=1
    shift
fi
steps=${1:-}
if [ -z "$steps" ]; then
    echo "usage: bash benchmarks/gpu_part2.sh [--dry] STEP[,STEP...] [OUTDIR]; steps: incore ooc hybrid kblas async trace tiles" >&2
    exit 2
fi
out=${2:-${OUT:-gpu-results}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
if (( dry )); then total=${GPU_PART2_TOTAL:-120}; else total=${GPU_PART2_TOTAL:-470}; fi
t_start=$(date +%s)
summary=$out/summary.txt
log=$out/log.txt
: > "$log"

limit_of() {
    case $1 in
        incore) echo 145 ;; ooc) echo 165 ;; hybrid) echo 75 ;; kblas) echo 85 ;; async) echo 65 ;; trace) echo 55 ;;
        tiles) echo 75 ;;
        *) echo 0 ;;
    esac
}
for s in ${steps//,/ }; do
    if [ "$(limit_of "$s")" = 0 ]; then
        echo "unknown step '$s'; steps: incore ooc hybrid kblas async trace tiles" >&2
        exit 2
    fi
done

. "$root/benchmarks/gpu_setup.sh"
steps_init 7
setup_step "dry: the CuPy stand-in, tiny sizes, no build"
if (( ! dry )); then
    (command -v nvidia-smi > /dev/null && nvidia-smi) >> "$log" 2>&1 || echo "nvidia-smi: not found" >> "$log"
fi

for s in ${steps//,/ }; do
    limit=$(limit_of "$s")
    l=$(left)
    (( limit > l )) && limit=$l
    if (( limit < 30 )); then
        row "$s" "$limit" 0 - "skipped: the command's ${total} s are spent"
        continue
    fi
    budget=$(( limit - 15 ))
    extra=()
    (( dry )) && extra=(--standin)
    echo "== $s (limit ${limit} s, budget ${budget} s)" | tee -a "$log"
    t0=$(date +%s)
    timeout -k 5 "$limit" "$py" "$root/benchmarks/bench_gpu_part2.py" "$s" --out "$out" --budget "$budget" \
        "${extra[@]}" >> "$log" 2>&1
    rc=$?
    case $rc in
        0) result=ok ;;
        124|137) result="timed out after ${limit} s" ;;
        *) result="failed: $(grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-150)" ;;
    esac
    row "$s" "$limit" $(( $(date +%s) - t0 )) "$rc" "$result"
done
printf 'total %s s of %s\n\n' "$(( $(date +%s) - t_start ))" "$total" >> "$summary"
"$py" "$root/benchmarks/bench_gpu_part2.py" --summary "$out" >> "$summary" 2>&1
cat "$summary"
exit 0
