#!/usr/bin/env bash
# Run tileblas' C code under a memory checker while the tests that exercise it run.
#
#   benchmarks/memcheck.sh [asan|valgrind] [test files or pytest options ...]
#
# asan (default): every C file of the package (src/tileblas/*/*.c) is compiled with AddressSanitizer
#   (-fsanitize=address -fsanitize-recover=address -fno-omit-frame-pointer -g) into a temporary copy of
#   the package -- the normal build in src/ is not touched -- and pytest runs against that copy with the
#   ASan runtime preloaded into the stock Python (detect_leaks=0: CPython's own allocations are not ours).
# valgrind: memcheck over the normal build with PYTHONMALLOC=malloc (slow: use it on a few test files).
#
# Default tests: test_kernels, test_blas1, test_blas2, test_blas3 and test_conformance.
# Prints a summary (tests run, error reports) and exits non-zero if any test failed or any error was
# reported.  PYTHON overrides the interpreter (default: the project's .venv).
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
TOOL=asan
if [ $# -gt 0 ] && { [ "$1" = asan ] || [ "$1" = valgrind ]; }; then TOOL=$1; shift; fi
if [ $# -gt 0 ]; then
    TESTS=("$@")
else
    TESTS=(tests/test_kernels.py tests/test_blas1.py tests/test_blas2.py tests/test_blas3.py tests/test_conformance.py)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tileblas-memcheck.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
LOGS=$WORK/logs
mkdir -p "$LOGS"
JUNIT=$WORK/junit.xml
cd "$ROOT" || exit 2

if [ "$TOOL" = asan ]; then
    # A private copy of the package with the sanitized extension modules in it.
    mkdir -p "$WORK/site"
    cp -r src/tileblas "$WORK/site/tileblas"
    find "$WORK/site/tileblas" \( -name '*.so' -o -name '__pycache__' \) -prune -exec rm -rf {} +
    read -r SUFFIX PYINC NPINC < <("$PY" -c 'import sysconfig, numpy
print(sysconfig.get_config_var("EXT_SUFFIX"), sysconfig.get_paths()["include"], numpy.get_include())')
    CC=${CC:-gcc}
    shopt -s nullglob
    CFILES=(src/tileblas/*/*.c)
    if [ ${#CFILES[@]} -eq 0 ]; then echo "memcheck: no C files under src/tileblas" >&2; exit 2; fi
    for c in "${CFILES[@]}"; do
        mod=${c#src/tileblas/}; mod=${mod%.c}
        echo "memcheck: building $c with AddressSanitizer"
        "$CC" -shared -fPIC -O1 -g -fsanitize=address -fsanitize-recover=address -fno-omit-frame-pointer \
            -I"$PYINC" -I"$NPINC" "$c" -o "$WORK/site/tileblas/$mod$SUFFIX" || { echo "memcheck: build failed" >&2; exit 2; }
    done
    LIBASAN=$("$CC" -print-file-name=libasan.so)
    # The copy must be the package that is imported (not the editable install's src/).
    where=$(PYTHONPATH="$WORK/site" LD_PRELOAD="$LIBASAN" ASAN_OPTIONS=detect_leaks=0 \
            "$PY" -c 'import tileblas.kernels._native as m; print(m.__file__)') || exit 2
    case $where in "$WORK"/*) ;; *) echo "memcheck: imported $where, not the sanitized build" >&2; exit 2 ;; esac
    echo "memcheck: running pytest ${TESTS[*]} under AddressSanitizer"
    PYTHONPATH="$WORK/site" LD_PRELOAD="$LIBASAN" \
        ASAN_OPTIONS="detect_leaks=0:halt_on_error=0:log_path=$LOGS/asan:strict_string_checks=1:detect_stack_use_after_return=1" \
        "$PY" -m pytest -q -p no:cacheprovider --junitxml="$JUNIT" "${TESTS[@]}"
    PYTEST_RC=$?
    REPORTS=$(cat "$LOGS"/asan.* 2>/dev/null | grep -c 'ERROR: AddressSanitizer' || true)
else
    command -v valgrind >/dev/null || { echo "memcheck: valgrind is not installed" >&2; exit 2; }
    echo "memcheck: running pytest ${TESTS[*]} under valgrind memcheck"
    PYTHONMALLOC=malloc valgrind --tool=memcheck --error-exitcode=99 --track-origins=no \
        --suppressions=/dev/null --log-file="$LOGS/valgrind.%p" \
        "$PY" -m pytest -q -p no:cacheprovider --junitxml="$JUNIT" "${TESTS[@]}"
    PYTEST_RC=$?
    # Errors whose stack touches tileblas' C code (CPython and NumPy themselves report a few known ones).
    REPORTS=$(cat "$LOGS"/valgrind.* 2>/dev/null | awk '/^==[0-9]+== [A-Z][a-z]+.*(Invalid|uninitialised|Mismatched|overlap)/{e=1; blk=""} e{blk=blk"\n"$0} /^==[0-9]+== $/{if(e && blk ~ /_native|_fastpath/) n++; e=0} END{print n+0}')
fi

read -r NTESTS NFAIL NERR NSKIP < <("$PY" - "$JUNIT" <<'EOF'
import sys, xml.etree.ElementTree as ET
try:
    r = ET.parse(sys.argv[1]).getroot()
    s = r if r.tag == "testsuite" else r.find("testsuite")
    print(s.get("tests"), s.get("failures"), s.get("errors"), s.get("skipped"))
except Exception:
    print("0 0 1 0")
EOF
)
echo
echo "memcheck summary ($TOOL): $NTESTS tests run, $NFAIL failed, $NERR errors, $NSKIP skipped; pytest exit $PYTEST_RC"
echo "memcheck summary ($TOOL): $REPORTS memory error report(s) from tileblas' C code"
if [ "$REPORTS" != 0 ]; then
    echo "---- reports ----"
    cat "$LOGS"/* | head -200
fi
if [ "$REPORTS" != 0 ] || [ "$PYTEST_RC" != 0 ]; then exit 1; fi
exit 0
