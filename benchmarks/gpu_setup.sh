#!/usr/bin/env bash
# The set-up the GPU scripts share (sourced by benchmarks/gpu_suite.sh, benchmarks/gpu_part2.sh and
# benchmarks/host_check.sh): three functions, run in the checkout's root with these variables set by the
# script that sources this file:
#   root  the checkout        src   the src/ tree to build in place (the checkout's, or a copy)
#   py    the interpreter     site  where the wheels of .whl/ are unpacked
#
#   build   every C extension setup.py declares, with its own sources, include dirs and flags, compiled in
#           place (-shared -fPIC -pthread), in parallel; exit 1 naming the ones that failed
#   wheels  the wheels of .whl/ (what the GPU test machine lacks: scipy-openblas32) unpacked into $site,
#           without an index or pip's resolver; nothing to do without .whl/
#   prepared LOG  both, each only once: the build skipped while newer than every C source, the wheels
#           while unpacked
#   setup_step NOTE  prepared as a step with its row in the sourcing script's summary
#   steps_init WIDTH  for a script of timed steps (gpu_part2.sh, host_check.sh): src, site and its summary's
#           header row, and two helpers, row (a line of the summary) and left (seconds of its total left)

# build: every extension setup.py declares, with its own sources, include dirs and flags, in place
build() {
    cd "$root" && SRC=$src "$py" - <<'EOF'
import os, shutil, subprocess, sys, sysconfig, types
from concurrent.futures import ThreadPoolExecutor

# setup.py read with a setuptools of our own (the machine may have none): its extensions as declared
exts = []


class Extension:
    def __init__(self, name, sources, include_dirs=(), extra_compile_args=(), extra_link_args=(), **_):
        self.name, self.sources, self.include_dirs = name, list(sources), list(include_dirs)
        self.extra_compile_args, self.extra_link_args = list(extra_compile_args), list(extra_link_args)


sys.modules["setuptools"] = types.SimpleNamespace(Extension=Extension,
                                                  setup=lambda **kw: exts.extend(kw.get("ext_modules", [])))
sys.argv = ["setup.py"]
exec(compile(open("setup.py").read(), "setup.py", "exec"), {"__name__": "__main__"})
cc = None
for c in (os.environ.get("CC"), *(sysconfig.get_config_var("CC") or "").split()[:1], "cc", "gcc"):
    if c and shutil.which(c):
        cc = c
        break
if cc is None:
    sys.exit("no C compiler found (CC, sysconfig's CC, cc, gcc)")
suffix = sysconfig.get_config_var("EXT_SUFFIX")
src = os.environ["SRC"]

def moved(p):  # a path under src/ in the tree that is built
    return os.path.join(src, os.path.relpath(p, "src")) if p.startswith("src/") else p

def build(ext):
    target = os.path.join(src, *ext.name.split(".")) + suffix
    cmd = [cc, "-shared", "-fPIC", "-pthread", "-I" + sysconfig.get_paths()["include"]]
    cmd += ["-I" + moved(d) for d in ext.include_dirs] + list(ext.extra_compile_args)
    cmd += [moved(s) for s in ext.sources] + list(ext.extra_link_args) + ["-o", target + ".tmp"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 0:  # moved over the old module: a process that has it loaded keeps its copy
        os.replace(target + ".tmp", target)
    elif os.path.exists(target + ".tmp"):
        os.remove(target + ".tmp")
    return ext.name, r.returncode, " ".join(cmd), r.stdout + r.stderr

with ThreadPoolExecutor(len(exts)) as pool:
    results = list(pool.map(build, exts))
for name, rc, cmd, log in results:
    print(f"{'built' if rc == 0 else 'FAILED'} {name}: {cmd}\n{log}", end="")
bad = [name for name, rc, *_ in results if rc]
print(f"{len(results) - len(bad)} of {len(results)} extensions built" + (f"; failed: {', '.join(bad)}" if bad else ""))
sys.exit(1 if bad else 0)
EOF
}

# wheels: what the machine lacks (scipy-openblas32), unpacked without an index or pip's resolver
wheels() {
    if ! ls "$root"/.whl/*.whl > /dev/null 2>&1; then
        echo "no .whl/ in the checkout: using the interpreter's own packages"
        return 0
    fi
    "$py" - "$site" "$root"/.whl/*.whl <<'EOF'
import sys, zipfile
site, wheels = sys.argv[1], sys.argv[2:]
for w in wheels:
    zipfile.ZipFile(w).extractall(site)
    print("unpacked", w.rsplit("/", 1)[-1])
EOF
}

# prepared LOG: the extensions built unless a build newer than every C source and setup.py is there
# (build/gpu-part2.built), the wheels unpacked once into $site, PYTHONPATH set to both; output into LOG;
# the exit status of the build (for benchmarks/gpu_part2.sh and benchmarks/host_check.sh)
prepared() {
    local log=$1 stamp=$root/build/gpu-part2.built rc
    mkdir -p "$root/build"
    if [ -f "$stamp" ] && [ -z "$(find "$root/setup.py" "$src" \( -name '*.c' -o -name '*.h' -o -name setup.py \) -newer "$stamp" 2> /dev/null | head -n 1)" ]; then
        echo "build: up to date (build/gpu-part2.built)" >> "$log"
        rc=0
    else
        timeout -k 5 60 bash -c "$(declare -f build); build" >> "$log" 2>&1
        rc=$?
        (( rc == 0 )) && touch "$stamp"
    fi
    if (( rc == 0 )) && [ ! -f "$site/.unpacked" ]; then
        mkdir -p "$site"
        timeout -k 5 30 bash -c "$(declare -f wheels); wheels" >> "$log" 2>&1 && touch "$site/.unpacked"
    fi
    export PYTHONPATH=$src:$site${PYTHONPATH:+:$PYTHONPATH}
    return $rc
}

# setup_step DRY_NOTE: the set-up as a step of the sourcing script, its row in that script's summary
# (its function row; $dry and $log as it sets them): prepared, or with --dry (dry=1) nothing built and
# PYTHONPATH the checkout's src/ only
setup_step() {
    local t0 rc
    if (( dry )); then
        export PYTHONPATH=$src${PYTHONPATH:+:$PYTHONPATH}
        row setup 0 0 0 "$1"
        return 0
    fi
    t0=$(date +%s)
    prepared "$log"
    rc=$?
    row setup 90 $(( $(date +%s) - t0 )) "$rc" "$( (( rc == 0 )) && echo ok || echo "failed: see log.txt")"
    return $rc
}

# steps_init WIDTH: with root, py, out, summary, total and t_start set by the sourcing script: src and site
# (the checkout's src/ and build/gpu-site) exported with root, py and out; the summary started with its
# header row, each step's name WIDTH wide in it (row); left: the seconds of total left
steps_init() {
    ROW_WIDTH=$1
    src=$root/src
    site=$root/build/gpu-site
    export root src py out site
    : > "$summary"
    row step limit used rc result
}
row() { printf "%-${ROW_WIDTH:-7}s %6s %6s %4s  %s\n" "$@" >> "$summary"; }
left() { echo $(( total - ($(date +%s) - t_start) )); }
