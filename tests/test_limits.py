"""Resource limits: no threads to spare (RLIMIT_NPROC) and a bounded address space (RLIMIT_AS).

Each case runs a script in a process of its own, bounded by a timeout.  RLIMIT_NPROC does not bind root
(the kernel exempts it), so where the tests run as root (CI) the script drops to an unprivileged user
(nobody, 65534) *in its own process*, after it has imported what it needs from the interpreter's files:
the interpreter may live where that user cannot read (a home directory of mode 700), and no file or
directory is opened up for the test.  What the script imports later (tileblas, NumPy, the OpenBLAS
wheels) must be readable by that user; where it is not, or the process may not change its user, the test
skips and says why.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap

import pytest

resource = pytest.importorskip("resource")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux resource limits")

#: seconds a script may run before its process group is killed (a hang)
LIMIT = 60.0
#: the unprivileged user the script becomes where it runs as root
NOBODY = 65534


def _run(script: str, *args: str, limit: float = LIMIT, preexec=None, env=None) -> tuple[int, str, str]:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=preexec,
                            env=env)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the script hung (killed after {limit:.0f} s)\nstdout:\n{out}\nstderr:\n{err}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, out, err


# ---------------------------------------------------------------------------------------- RLIMIT_NPROC

#: imports everything tileblas takes from the interpreter's own files on the calls below, and prints
#: those modules' names (the script then imports them before it gives up root)
_STDLIB_USED = """
import os, sys, numpy as np
import tileblas.blas as L, tileblas.rblas as rb
from tileblas import asyncapi as aa
from tileblas.runtime import Runtime
a = np.asfortranarray(np.random.default_rng(0).random((300, 300)))
L.dgemm(1.0, a, a)
with Runtime("cpu:2") as rt:
    rt.gemm(1.0, a, a, 0.0, np.zeros_like(a))
aa.gemm(1.0, aa.handle(a), aa.handle(a), 0.0, aa.empty((300, 300))).result()
x, y = a[:, 0].copy(), a[:, 1].copy()
rb.fdaxpy(x, y, a=2.0, mode="compute"); rb.rdaxpy(x, y, a=2.0)
base = os.path.realpath(sys.base_prefix) + os.sep
print(" ".join(sorted(m for m, mod in list(sys.modules.items())
                      if os.path.realpath(getattr(mod, "__file__", None) or "/").startswith(base))))
"""

_NO_THREADS = """
import importlib, os, resource, sys, threading, warnings
for name in sys.argv[1].split():
    try:
        importlib.import_module(name)
    except Exception:
        pass
import numpy as np
if os.geteuid() == 0:
    try:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    except OSError as e:
        print("SKIP cannot become an unprivileged user:", e)
        sys.exit(0)
hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
resource.setrlimit(resource.RLIMIT_NPROC, (1, hard))  # the soft limit: raised again below
try:
    threading.Thread(target=lambda: None).start()
    print("SKIP RLIMIT_NPROC is not in force for this user")
    sys.exit(0)
except RuntimeError:
    pass
try:
    import tileblas.blas as L
except (ImportError, OSError) as e:  # a file the unprivileged user may not read
    if isinstance(e, ImportError) or isinstance(e, PermissionError) or "Permission denied" in str(e):
        print("SKIP tileblas cannot be imported by an unprivileged user:", e)
        sys.exit(0)
    raise
import tileblas.rblas as rb
from tileblas import asyncapi as aa
from tileblas.kernels import _openblas
from tileblas.runtime import Runtime
rng = np.random.default_rng(0)
n = 1200
a = np.asfortranarray(rng.random((n, n)))
ref = a @ a
tol = 8 * n * np.finfo(float).eps * float(np.abs(a).max()) ** 2 * n
print("dgemm", float(np.abs(L.dgemm(1.0, a, a) - ref).max()) <= tol)
with Runtime("cpu:2") as rt:
    c = np.zeros_like(a)
    rt.gemm(1.0, a, a, 0.0, c)
    print("runtime", float(np.abs(c - ref).max()) <= tol)
def async_threads():
    return sum(t.name.startswith("tileblas-async") for t in threading.enumerate())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    f = aa.gemm(1.0, aa.handle(a), aa.handle(a), 0.0, aa.empty((n, n)))
    print("async done at once", f.done())
    print("async", float(np.abs(f.result(timeout=60).get() - ref).max()) <= tol)
    g = aa.gemm(1.0, aa.handle(a), aa.handle(a), 0.0, aa.empty((n, n)))
    print("async again", g.done(), float(np.abs(g.result(timeout=60).get() - ref).max()) <= tol)
print("async warnings", len([w for w in caught if "RLIMIT_NPROC" in str(w.message)]), async_threads())
for w in caught:
    print("warning:", w.category.__name__, w.message)
resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))  # threads can be started again
f = aa.gemm(1.0, aa.handle(a), aa.handle(a), 0.0, aa.empty((n, n)))
print("async threads", float(np.abs(f.result(timeout=60).get() - ref).max()) <= tol, async_threads() > 0)
resource.setrlimit(resource.RLIMIT_NPROC, (1, hard))
x, y = rng.random(2_000_000), rng.random(2_000_000)
y0 = y.copy()
rb.fdaxpy(x, y, a=2.0, mode="compute")
rb.rdaxpy(x, y, a=2.0)
print("rblas", bool(np.allclose(y, y0, rtol=0, atol=8 * np.finfo(float).eps * 3)))
print("notes", _openblas.pool_info()["notes"])
print("child ok")
""".replace("NOBODY", str(NOBODY))


def test_no_threads_to_spare_as_an_unprivileged_user_runs_every_call_on_the_calling_thread():
    """RLIMIT_NPROC of 1 for the script's user: tileblas' instances and pool get no thread; the drop-in
    dgemm, the Runtime and rblas compute mode still give the right answer; the asynchronous API runs its
    calls on the calling thread (complete futures) with one warning naming RLIMIT_NPROC, and starts its
    worker threads once the limit is raised; no SIGABRT, no KeyboardInterrupt from OpenBLAS, and a note
    that says why the instance runs on one thread."""
    rc, used, err = _run(_STDLIB_USED)
    assert rc == 0, err
    with tempfile.TemporaryDirectory() as home:  # a home the unprivileged user may write
        os.chmod(home, 0o777)
        env = dict(os.environ, HOME=home, XDG_CACHE_HOME=home, XDG_CONFIG_HOME=home)
        rc, out, err = _run(_NO_THREADS, used.strip(), env=env)
    if out.startswith("SKIP"):
        pytest.skip(out.splitlines()[0][5:])
    assert rc == 0, f"rc={rc} ({signal.Signals(-rc).name if rc < 0 else 'exit'})\nstdout:\n{out}\nstderr:\n{err}"
    for what in ("dgemm", "runtime", "rblas"):
        assert f"{what} True" in out, f"{what}: stdout:\n{out}\nstderr:\n{err}"
    # the asynchronous API's executor: the calls on the calling thread, one warning, then its threads
    for line in ("async done at once True", "async True", "async again True True", "async warnings 1 0",
                 "async threads True True"):
        assert line in out, f"{line!r} not in stdout:\n{out}\nstderr:\n{err}"
    assert "RLIMIT_NPROC" in out  # the note of the instance that runs on one thread
    assert "child ok" in out


# ------------------------------------------------------------------------------------------ RLIMIT_AS

#: a 1200x1200 dgemm through SciPy (argv[1] == "scipy") or tileblas; prints "ok" where its result is
#: right (entries of [0, 1): each within 4 n eps of n), or the MemoryError it raised
_DGEMM_1200 = """
import sys, numpy as np
a = np.asfortranarray(np.random.default_rng(0).random((1200, 1200)))
if sys.argv[1] == "scipy":
    from scipy.linalg import blas as B
else:
    from tileblas import blas as B
try:
    c = B.dgemm(1.0, a, a)
except MemoryError as e:
    print("MemoryError:", e)
    sys.exit(0)
rng = np.random.default_rng(1)  # a few entries checked by dot products (a @ a would need room of its own)
err = max(abs(c[i, j] - np.dot(a[i, :], a[:, j])) for i, j in rng.integers(0, 1200, (32, 2)))
print("ok" if err <= 4 * 1200 * np.finfo(float).eps * 1200 else "WRONG", err)
"""


#: appended to _DGEMM_1200: print the process's peak address space (KiB)
_PEAK = """
print([line.split()[1] for line in open("/proc/self/status") if line.startswith("VmPeak")][0])
"""


def _as_env() -> dict[str, str]:
    """The environment of the RLIMIT_AS scripts: without thread settings another test may have left (a
    one-thread SciPy needs less address space than SciPy on the machine's threads: the comparison must be
    at the same, default, settings)."""
    drop = ("OPENBLAS_", "OMP_", "GOTO_", "BLIS_", "MKL_", "TILEBLAS_POOL", "TILEBLAS_THREADS")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def _under_as_limit(lib: str, mib: int) -> tuple[int, str, str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))

    try:
        return _run(_DGEMM_1200, lib, preexec=limit, limit=30.0, env=_as_env())
    except pytest.fail.Exception:  # a hang under the limit (SciPy's OpenBLAS does at some limits)
        return -1, "", "hung"


def _passes(lib: str, mib: int) -> bool:
    rc, out, _ = _under_as_limit(lib, mib)
    return rc == 0 and out.startswith("ok ")


def _scipys_limit(step: int = 8, tries: int = 6) -> int:
    """An RLIMIT_AS (MiB) a little over SciPy's own need: the peak address space of its unlimited run (its
    VmPeak), raised by ``step`` until SciPy's dgemm succeeds under it (a bisection from below would meet
    limits where SciPy's OpenBLAS hangs)."""
    rc, out, err = _run(_DGEMM_1200 + _PEAK, "scipy", limit=60.0, env=_as_env())
    assert rc == 0 and out.startswith("ok "), f"SciPy's unlimited run: rc={rc}\n{out}\n{err}"
    mib = (int(out.split()[-1]) >> 10) + 4
    for _ in range(tries):
        if _passes("scipy", mib):
            return mib
        mib += step
    pytest.skip(f"SciPy's dgemm fails under every limit tried, up to {mib} MiB")


def test_a_1200_dgemm_runs_under_the_address_space_limit_scipys_runs_under():
    """A limit SciPy's dgemm needs on this machine (its peak address space, a few MiB over), then tileblas'
    dgemm must run under it: tileblas' instances reserve no more address space for the call than SciPy's
    (pool workers with small stacks; the one-thread instance, which the call does not need, is left
    unloaded where it does not fit)."""
    pytest.importorskip("scipy")
    limit = _scipys_limit()
    rc, out, err = _under_as_limit("tileblas", limit)
    assert rc == 0 and out.startswith("ok "), f"limit {limit} MiB: rc={rc}\nstdout:\n{out}\nstderr:\n{err}"


def test_an_instance_that_does_not_fit_the_address_space_is_a_memoryerror_and_the_process_goes_on():
    """Under an RLIMIT_AS that leaves no room for another OpenBLAS instance, loading one raises MemoryError
    naming the limit (OpenBLAS itself would end the process); with the limit raised again, it loads."""
    rc, out, err = _run("""
        import resource
        import numpy as np
        from tileblas.kernels import _openblas
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (16 << 20), hard))
        try:
            _openblas.get_library(3)
            print("loaded")
        except MemoryError as e:
            print("MemoryError:", e)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        lib = _openblas.get_library(3)
        a = np.asfortranarray(np.random.default_rng(0).random((300, 300)))
        c = np.zeros_like(a)
        _openblas.gemm(1.0, a, a, 0.0, c, lib=lib)
        print("then", bool(np.allclose(c, a @ a)))
    """)
    assert rc == 0, f"rc={rc}\nstdout:\n{out}\nstderr:\n{err}"
    assert "MemoryError:" in out and "RLIMIT_AS" in out, out
    assert "then True" in out, out


# ------------------------------------------------------------- the async API without worker threads


def test_the_async_executor_runs_calls_on_the_calling_thread_while_no_thread_can_start(monkeypatch):
    """Thread.start raising RuntimeError (what RLIMIT_NPROC gives): the executor starts, each call runs on
    the calling thread and its future is complete when submit returns, one RuntimeWarning names the limit;
    once threads start again, the next call starts the worker threads and runs on them."""
    import threading
    import warnings

    import numpy as np

    from tileblas import asyncapi as aa
    from tileblas.asyncapi import Executor

    real_start = threading.Thread.start
    blocked = [True]

    def start(self):
        if blocked[0] and self.name.startswith("tileblas-async"):
            raise RuntimeError("can't start new thread")
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    rng = np.random.default_rng(3)
    a, b = np.asfortranarray(rng.random((60, 40))), np.asfortranarray(rng.random((40, 50)))
    tol = 4 * 40 * np.finfo(float).eps * 40

    def ours():
        return [t for t in threading.enumerate() if t.name.startswith("tileblas-async") and t.is_alive()]

    before = set(ours())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ex = Executor(calibrate=False, inline_below=0.0)
        try:
            futs = []
            for _ in range(3):
                c = ex.empty((60, 50))
                f = aa.gemm(1.0, ex.handle(a), ex.handle(b), 0.0, c)
                assert f.done()  # ran in this thread, before submit returned
                futs.append(f)
                assert set(ours()) == before
            # a chain: the second call depends on the first's output
            h = ex.handle(a)
            aa.scal(2.0, h)
            g = aa.scal(0.5, h)
            assert g.done()
            for f in futs:
                assert np.abs(f.result().get() - a @ b).max() <= tol
            assert np.array_equal(g.result().get(), a)
            notes = [w for w in caught if issubclass(w.category, RuntimeWarning)]
            assert len(notes) == 1, [str(w.message) for w in caught]
            assert "RLIMIT_NPROC" in str(notes[0].message) and "can't start new thread" in str(notes[0].message)

            blocked[0] = False  # threads can be started again
            c = ex.empty((60, 50))
            f = aa.gemm(1.0, ex.handle(a), ex.handle(b), 0.0, c)
            assert np.abs(f.result(timeout=30).get() - a @ b).max() <= tol
            started = set(ours()) - before
            assert started and all(t.daemon for t in started)
            assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
        finally:
            ex.close()
    assert not any(t.is_alive() for t in started)
