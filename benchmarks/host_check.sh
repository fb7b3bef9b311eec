#!/usr/bin/env bash
# The drop-in on a many-core host against SciPy (docs/measurements/drop-in.md, "A 16-core host"): the steps
# named, in one command of at most 8 minutes, made for the GPU test machine's host (16 cores, 128 GiB,
# SciPy and NumPy installed, no network).  No GPU is used.
#
#   bash benchmarks/host_check.sh [--dry] STEP[,STEP...] [OUTDIR]     (OUTDIR: default $OUT, else host-results)
#
# Set-up in the checkout, once (as for gpu_suite.sh): .whl/ with the scipy-openblas32 wheel, carried along.
#
#   step      limit  what (each against SciPy in the same run, with its control)
#   setup        90  the C extensions built in place, the wheels of .whl/ unpacked into build/gpu-site
#                    (benchmarks/gpu_setup.sh; skipped when done and up to date); always first
#   gaps        100  bench_gaps.py with the pool on (TILEBLAS_POOL=1): dgemm 128, zgemm 64, dtrsm 256, gaps of
#                    0.5, 2 and 10 ms, 5 rounds; waits: the pool's default for that host, its own with its
#                    watcher, its own without; the wakes a call and their time from the post to running
#   manycore    170  bench_manycore.py (budget 150 s): warm, spinning and cold blocks, orders 256 and 1024,
#                    with the pool's counters a call; as shipped for that host (the pool only on core counts
#                    it was measured at, else OpenBLAS's own threads)
#   pool        170  the same with TILEBLAS_POOL=1 (tileblas' pool runs OpenBLAS's jobs)
#   nopool      170  the same with TILEBLAS_POOL=0 (OpenBLAS's own threads in tileblas' instances)
#   mixed       100  bench_mixed.py: dgemm and dtrsm 128 and 512, partners none, python, numpy, lapack,
#                    scipyblas, 2 rounds; NumPy's np.dot in tileblas' place for gemm (a second OpenBLAS)
#   mixedsleep  100  the same with TILEBLAS_THREAD_TIMEOUT=4 (OpenBLAS's threads of tileblas' instances sleep
#                    as soon as their call ends; SciPy's and NumPy's spin as before)
#   grid        240  tileblas bench grid --quick, warm and cold (d, z for hemm/herk/her2k; 64, 256, 1024; F
#                    and C; 3 rounds; new points stop after 3.2 minutes, the JSON kept point by point)
#   tune        400  tileblas tune --quick --dry-run: the path crossovers and the C path's limits measured
#                    on that host, printed point by point, stored nowhere
#   first        60  bench_first_calls.py: the import and the first dgemm calls (512, 2048) in fresh
#                    interpreters, 5 a library, alternated (on that many threads: OpenBLAS's jobs, no split)
#
# The device minutes of a session (15, the machine's start of 1-2 included), e.g.:
#   bash benchmarks/host_check.sh gaps,manycore,mixed       (build + 370 s of limits: timeout_s 480)
#   bash benchmarks/host_check.sh nopool,grid               (410 s of limits: timeout_s 480)
#   bash benchmarks/host_check.sh tune                      (timeout_s 480)
#   bash benchmarks/host_check.sh first,gaps                (build + 160 s of limits: timeout_s 270)
#   bash benchmarks/host_check.sh mixed,mixedsleep          (build + 200 s of limits: timeout_s 300)
#
# Files in OUTDIR: summary.txt (the steps' limits, seconds, exit statuses, then each step's summary lines),
# log.txt (every step's whole output), and gaps.json, manycore.json, pool.json, nopool.json, mixed.json,
# grid.json from the steps run.  The script exits 0; summary.txt says what failed.
# HOST_CHECK_TOTAL (default 470 s) caps the command: a step gets the smaller of its limit and what is left,
# and one that cannot get 20 s is skipped.
#
# --dry: the flow on any machine in about a minute: no build and no wheels (the checkout's modules as
# they are), each step at a tiny size.
set -u -o pipefail
cd "$(dirname "$0")/.."
root=$PWD
dry=0
if [ "${1:-}" = "--dry" ]; then
    dry=1
    shift
fi
# The steps, each a function run_NAME (its limit in seconds and its command): the one list of them, which
# the step names given are checked against before anything runs.
run_gaps() { TILEBLAS_POOL=1 bench gaps 100 bench_gaps.py "${gaps[@]}"; }
run_manycore() { bench manycore 170 bench_manycore.py "${manycore[@]}"; }
run_pool() { TILEBLAS_POOL=1 bench pool 170 bench_manycore.py "${manycore[@]}"; }
run_nopool() { TILEBLAS_POOL=0 bench nopool 170 bench_manycore.py "${manycore[@]}"; }
run_mixed() { bench mixed 100 bench_mixed.py "${mixed[@]}"; }
run_mixedsleep() { TILEBLAS_THREAD_TIMEOUT=4 bench mixedsleep 100 bench_mixed.py "${mixed[@]}"; }
run_grid() { step grid 240 tail -m tileblas bench grid "${grid[@]}" --modes warm,cold --no-progress --json "$out/grid.json"; }
run_tune() { step tune 400 tail -m tileblas tune "${tune[@]}" --dry-run; }
run_first() { step first 60 '^(scipy|tileblas) +import|^ +n=|^n=' "$root/benchmarks/bench_first_calls.py" "${first[@]}"; }
known=$(declare -F | sed -n 's/^declare -f run_//p' | tr '\n' ' ')
known=${known% }
steps=${1:-}
if [ -z "$steps" ]; then
    echo "usage: bash benchmarks/host_check.sh [--dry] STEP[,STEP...] [OUTDIR]; steps: $known" >&2
    exit 2
fi
for s in ${steps//,/ }; do
    if ! declare -F "run_$s" > /dev/null; then
        echo "unknown step '$s'; steps: $known" >&2
        exit 2
    fi
done
out=${2:-${OUT:-host-results}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
# The host's CPU drop-in only: no GPU is looked for (else the first call at or above the GPU floor would
# include the GPU search, docs/guide/gpu.md).
export TILEBLAS_DEVICES=cpu
total=${HOST_CHECK_TOTAL:-470}
t_start=$(date +%s)
summary=$out/summary.txt
log=$out/log.txt
: > "$log"
. "$root/benchmarks/gpu_setup.sh"
steps_init 8
setup_step "dry: tiny sizes, no build"
"$py" -c "import os, tileblas; from tileblas.kernels import _openblas as o; i = o.pool_info()
print('host:', len(os.sched_getaffinity(0)), 'cores; tileblas', tileblas.__version__, '; pool settings', i['settings'], i['notes'])" \
    >> "$summary" 2>&1

if (( dry )); then
    gaps=(--points dgemm:32 --gaps 0.5 --rounds 1 --calls 2 --no-progress)
    manycore=(--routines dgemm --sizes 64 --rounds 1 --budget 5)
    mixed=(--routines dgemm --sizes 32 --partners none,numpy --rounds 1 --iters 3 --settle 0 --no-progress)
    grid=(--sizes 16 --prefixes d --routines gemm --orders F --shapes square --variants-n 0 --rounds 1
          --settle 0 --idle 0.01 --det-calls 2)
    tune=(--quick --families gemm --classes real --path-sizes 64,128 --path-orders 64 --path-rhs 64 --path-reps 1
          --no-rank-gemm --one-thread-orders 16,32 --one-thread-reps 1 --split-orders 32,64 --split-reps 1
          --settle 0 --cold-idle 0.01)
    first=(--sizes 64 --processes 1 --calls 2)
else
    gaps=(--points dgemm:128,zgemm:64,dtrsm:256 --gaps 0.5,2,10 --rounds 5 --no-progress)
    manycore=(--budget 150)
    mixed=(--routines dgemm,dtrsm --sizes 128,512 --partners none,python,numpy,lapack,scipyblas --rounds 2 --no-progress)
    grid=(--quick --minutes 3.2)
    tune=(--quick)
    first=(--processes 5)
fi

# step NAME LIMIT SUMMARY COMMAND...: COMMAND (run by $py) under the smaller of LIMIT and what is left;
# SUMMARY: the lines of its output that go into summary.txt (grep -E pattern), or "tail" for its last 40
step() {
    local name=$1 limit=$2 lines=$3 l t0 rc result
    shift 3
    l=$(left)
    (( limit > l )) && limit=$l
    if (( limit < 20 )); then
        row "$name" "$limit" 0 - "skipped: the command's ${total} s are spent"
        return
    fi
    echo "== $name (limit ${limit} s)" >> "$log"
    t0=$(date +%s)
    timeout -k 5 "$limit" "$py" "$@" > "$out/.$name.txt" 2>&1
    rc=$?
    cat "$out/.$name.txt" >> "$log"
    case $rc in
        0) result=ok ;;
        124|137) result="timed out after ${limit} s" ;;
        *) result="failed: $(grep -v '^\s*$' "$out/.$name.txt" | tail -n 1 | cut -c1-150)" ;;
    esac
    row "$name" "$limit" $(( $(date +%s) - t0 )) "$rc" "$result"
    {
        echo "-- $name"
        if [ "$lines" = tail ]; then
            tail -n 40 "$out/.$name.txt" | cut -c1-400
        else
            # where it did not finish, the points it printed as it went
            (( rc == 0 )) || lines="$lines|^point: "
            grep -E "$lines" "$out/.$name.txt" | cut -c1-400
        fi
    } >> "$out/.tail.txt"
    rm -f "$out/.$name.txt"
}

# bench NAME LIMIT SCRIPT ARGS...: benchmarks/SCRIPT as a step, its JSON into NAME.json, its summary lines
bench() {
    local name=$1 limit=$2 script=$3
    shift 3
    step "$name" "$limit" '^routine|^ +(wait|controls|NumPy)|^ +[0-9.]+ woke|^ +[a-z]+ +\(|^(dgemm|dsyrk|dtrmm|dtrsm|zgemm) ' \
        "$root/benchmarks/$script" "$@" --json "$out/$name.json"
}

for s in ${steps//,/ }; do
    "run_$s"
done
printf 'total %s s of %s\n\n' "$(( $(date +%s) - t_start ))" "$total" >> "$summary"
[ -f "$out/.tail.txt" ] && cat "$out/.tail.txt" >> "$summary" && rm -f "$out/.tail.txt"
cat "$summary"
exit 0
