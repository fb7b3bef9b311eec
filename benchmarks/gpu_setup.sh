#!/usr/bin/env bash
# The set-up the GPU scripts share (sourced by benchmarks/gpu_suite.sh and benchmarks/gpu_part2.sh): two
# functions, run in the checkout's root with these variables set by the script that sources this file:
#   root  the checkout        src   the src/ tree to build in place (the checkout's, or a copy)
#   py    the interpreter     site  where the wheels of .whl/ are unpacked
#
#   build   every C extension setup.py declares, with its own sources, include dirs and flags, compiled in
#           place (-shared -fPIC -pthread), in parallel; exit 1 naming the ones that failed
#   wheels  the wheels of .whl/ (what the GPU test machine lacks: scipy-openblas32) unpacked into $site,
#           without an index or pip's resolver; nothing to do without .whl/

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
