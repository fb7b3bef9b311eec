"""tileblas' thread pool (tileblas.kernels._pool): OpenBLAS's parallel calls it runs are right, concurrent
callers and a forked child work, claimed parts run whoever is there (the calling thread alone when the
workers sleep, are slow or the slot is busy) and every part exactly once, idle workers spin (and yield,
where asked) and then sleep, the settings (TILEBLAS_POOL_WAIT among them) are checked by name, and
TILEBLAS_POOL=0 gives OpenBLAS's own threads."""

import os
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

from tileblas.kernels import _openblas, _pool
from tileblas.kernels._threadpool import cpu_count

pytestmark = pytest.mark.skipif(not (_pool.supported and _openblas._POOL["enabled"]),
                                reason="tileblas' pool is off (TILEBLAS_POOL=0) or not built here")

EPS = {np.float32: np.finfo(np.float32).eps, np.float64: np.finfo(np.float64).eps,
       np.complex64: np.finfo(np.float32).eps, np.complex128: np.finfo(np.float64).eps}


@pytest.fixture(scope="module")
def lib():
    lib = _openblas.get_library(2)
    if lib.pool_slot is None:
        pytest.skip("this OpenBLAS has no threads callback (before 0.3.27)")
    return lib


@pytest.fixture
def settings():
    """Restores the pool's settings after a test that changes them."""
    saved = _pool.configure()
    yield saved
    _pool.configure(**saved)


def _splits(fastpath):
    """The C path's split ranges in force: none without a pool slot."""
    cfg = fastpath.config()
    return cfg["split"] if cfg["pool_slot"] >= 0 else {}


def _split_calls(fastpath):
    return fastpath.stats()["split_calls"]


def _rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return np.asfortranarray(x.astype(dtype))


def _check(got, ref, bound, what):
    err = np.abs(got.astype(np.complex128) - ref).max()
    assert err <= bound, f"{what}: error {err:.3g} above the bound {bound:.3g}"


def _wait_for(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def test_the_multithreaded_instances_run_their_parallel_calls_on_the_pool(lib, settings):
    assert lib.pool_slot is not None
    assert _openblas.get_library(1).pool_slot is None  # one thread: no parallel calls
    rng = np.random.default_rng(1)
    n = 300
    a, b = _rand(rng, (n, n), np.float64), _rand(rng, (n, n), np.float64)
    c = np.zeros((n, n), order="F")
    before = _pool.stats()
    _openblas.gemm(1.0, a, b, 0.0, c, lib=lib)
    after = _pool.stats()
    assert after["calls"] >= before["calls"] + 1
    assert after["jobs"] >= before["jobs"] + 2
    assert after["workers"] >= 1
    _check(c, a.astype(np.float64) @ b, 4 * n * EPS[np.float64] * (np.abs(a) @ np.abs(b)).max(), "dgemm")
    info = _openblas.pool_info()
    assert info["enabled"] and info["instances"] >= 1 and info["stats"]["calls"] >= after["calls"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_every_level3_kernel_is_right_on_the_pool(lib, settings, dtype):
    rng = np.random.default_rng(2)
    n, m = 257, 190  # odd sizes: uneven splits among the jobs
    eps = EPS[dtype]
    a, b = _rand(rng, (n, n), dtype), _rand(rng, (n, m), dtype)
    a128, b128 = a.astype(np.complex128), b.astype(np.complex128)
    before = _pool.stats()["calls"]
    # gemm
    c = np.zeros((n, m), dtype, order="F")
    _openblas.gemm(1.0, a, b, 0.0, c, lib=lib)
    _check(c, a128 @ b128, 4 * n * eps * (np.abs(a128) @ np.abs(b128)).max(), "gemm")
    # symm (and hemm in complex): A's upper triangle
    for name, fn, full in [("symm", _openblas.symm, np.triu(a128) + np.triu(a128, 1).T)] + (
            [("hemm", _openblas.hemm, np.triu(a128, 1) + np.triu(a128, 1).conj().T
              + np.diag(np.diag(a128).real))] if np.issubdtype(dtype, np.complexfloating) else []):
        c = np.zeros((n, m), dtype, order="F")
        fn(1.0, a, b, 0.0, c, side="L", uplo="U", lib=lib)
        _check(c, full @ b128, 4 * n * eps * (np.abs(full) @ np.abs(b128)).max(), name)
    # syrk / syr2k (upper triangle of C)
    c = np.zeros((n, n), dtype, order="F")
    _openblas.syrk(1.0, b, 0.0, c, uplo="U", trans="N", lib=lib)
    ref = b128 @ b128.T
    _check(np.triu(c), np.triu(ref), 4 * m * eps * (np.abs(b128) @ np.abs(b128).T).max(), "syrk")
    c = np.zeros((n, n), dtype, order="F")
    b2 = _rand(rng, (n, m), dtype)
    _openblas.syr2k(1.0, b, b2, 0.0, c, uplo="U", trans="N", lib=lib)
    b2c = b2.astype(np.complex128)
    ref = b128 @ b2c.T + b2c @ b128.T
    _check(np.triu(c), np.triu(ref), 8 * m * eps * (np.abs(b128) @ np.abs(b2c).T).max(), "syr2k")
    # trmm / trsm with a well-conditioned upper triangle
    t = np.asfortranarray(np.triu(a) + (4 * n * np.eye(n)).astype(dtype))
    t128 = np.triu(t.astype(np.complex128))
    x = b.copy(order="F")
    _openblas.trmm(1.0, t, x, side="L", uplo="U", transa="N", diag="N", lib=lib)
    _check(x, t128 @ b128, 4 * n * eps * (np.abs(t128) @ np.abs(b128)).max(), "trmm")
    x = b.copy(order="F")
    _openblas.trsm(1.0, t, x, side="L", uplo="U", transa="N", diag="N", lib=lib)
    _check(t128 @ x.astype(np.complex128), b128, 8 * n * eps * (np.abs(t128) @ np.abs(x)).max(), "trsm")
    assert _pool.stats()["calls"] > before  # the pool ran (some of) them


def test_concurrent_callers_on_one_instance_get_right_results(lib, settings):
    rng = np.random.default_rng(3)
    n = 200
    pairs = [(_rand(rng, (n, n), np.float64), _rand(rng, (n, n), np.float64)) for _ in range(4)]
    errors: list[str] = []

    def work(k):
        a, b = pairs[k]
        ref = a @ b
        bound = 4 * n * EPS[np.float64] * (np.abs(a) @ np.abs(b)).max()
        for _ in range(25):
            c = np.zeros((n, n), order="F")
            _openblas.gemm(1.0, a, b, 0.0, c, lib=lib)
            err = np.abs(c - ref).max()
            if err > bound:
                errors.append(f"caller {k}: error {err:.3g} above {bound:.3g}")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    assert not errors, errors


def test_idle_workers_spin_then_sleep(lib, settings):
    rng = np.random.default_rng(4)
    n = 300
    a, b = _rand(rng, (n, n), np.float64), _rand(rng, (n, n), np.float64)
    c = np.zeros((n, n), order="F")
    _pool.configure(spin_ns=30_000_000, yield_ns=0)  # 30 ms
    before = _pool.stats()
    _openblas.gemm(1.0, a, b, 0.0, c, lib=lib)
    assert _pool.stats()["calls"] > before["calls"]
    assert _wait_for(lambda: _pool.stats()["sleeps"] > before["sleeps"], timeout=2.0)  # asleep after the spin
    assert _wait_for(lambda: _pool.stats()["spinning"] == 0, timeout=2.0)


def test_idle_workers_asked_to_wait_longer_yield_then_sleep(lib, settings):
    """With a yielding wait after the spin (TILEBLAS_POOL_WAIT), an idle worker stays awake through it, then
    sleeps."""
    _pool.configure(spin_ns=0, yield_ns=0)

    # every worker asleep, its sleep counted: one that has stopped spinning counts its sleep a moment later
    # (a CI run once read the counter in between), so the counter must also stand still for 50 ms
    def settled():
        st = _pool.stats()
        time.sleep(0.05)
        return st["spinning"] == 0 and _pool.stats()["sleeps"] == st["sleeps"]

    assert _wait_for(settled, timeout=2.0)
    _pool.configure(spin_ns=0, yield_ns=400_000_000)  # 0.4 s
    before = _pool.stats()
    _pool.run_parts(lib.pool_slot, 4, spin_ns=20_000)
    time.sleep(0.1)
    mid = _pool.stats()
    assert mid["spinning"] >= 1 and mid["sleeps"] == before["sleeps"]  # awake 0.1 s after the work
    assert _wait_for(lambda: _pool.stats()["sleeps"] > before["sleeps"], timeout=3.0)  # asleep after it
    assert _wait_for(lambda: _pool.stats()["spinning"] == 0, timeout=2.0)


def test_the_wait_setting_reads_durations_and_refuses_the_rest():
    spin = _openblas.WAIT_SPIN_NS
    assert _openblas.parse_wait("200us") == (200_000, 0)
    assert _openblas.parse_wait("50us") == (50_000, 0)
    assert _openblas.parse_wait("0s") == (0, 0)
    assert _openblas.parse_wait("5ms") == (spin, 5_000_000 - spin)
    assert _openblas.parse_wait(" 0.1S ") == (spin, 100_000_000 - spin)
    for bad in ("", "5", "fast", "-1ms", "nanms", "2min", "61s", "inf s"):
        with pytest.raises(ValueError, match=r"TILEBLAS_POOL_WAIT=.*expected a duration"):
            _openblas.parse_wait(bad)


def _run_with(code, **env):
    """``code`` run by a fresh interpreter with these environment variables set; it must succeed."""
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out


@pytest.mark.skipif(not _pool.supported, reason="no pool in this build")
def test_the_wait_comes_from_the_environment():
    code = ("import warnings; warnings.simplefilter('always')\n"
            "from tileblas.kernels import _openblas, _pool\n"
            "print(_pool.configure()['spin_ns'], _pool.configure()['yield_ns'], _openblas.pool_info()['notes'])\n"
            "from tileblas.cli._core import _print_pool; _print_pool(_openblas.pool_info())")
    out = _run_with(code, TILEBLAS_POOL_WAIT="20ms")
    assert out.stdout.split()[:2] == ["200000", "19800000"]
    assert "spin 200 us, yield 19.8 ms, then sleep" in out.stdout  # as tileblas info says it
    out = _run_with(code, TILEBLAS_POOL_WAIT="soon")
    machine = _openblas.machine_waits(cpu_count())  # the wait for this machine, kept
    assert out.stdout.split()[:2] == [str(machine.get("spin_ns", 200000)), str(machine.get("yield_ns", 0))]
    assert "TILEBLAS_POOL_WAIT='soon'" in out.stderr and "RuntimeWarning" in out.stderr
    assert "TILEBLAS_POOL_WAIT='soon'" in out.stdout  # the note tileblas info shows


def test_the_pools_wait_is_its_own_only_at_the_thread_counts_it_was_measured_at():
    """machine_waits: at the core counts the pool's wait was measured at, its own (nothing changed); at
    any other, OpenBLAS's threads' (0.1 s, yielding; no watcher)."""
    spin = _openblas.WAIT_SPIN_NS
    assert _openblas.POOL_MEASURED_CORES == {2}
    assert _openblas.machine_waits(2) == {}
    for cores in (1, 3, 4, 16, 64):
        if cores not in _openblas.POOL_MEASURED_CORES:
            assert _openblas.machine_waits(cores) == {"spin_ns": spin, "yield_ns": 100_000_000 - spin, "watch_ns": 0}


@pytest.mark.skipif(not (_pool.supported and hasattr(os, "sched_setaffinity")), reason="no pool or no affinity")
def test_a_process_on_cores_never_measured_keeps_openblas_threads_and_the_environment_still_wins():
    """A process that may use one core (a count the pool was not measured at): OpenBLAS's own threads run
    the parallel calls, said in tileblas info's line; TILEBLAS_POOL=1 turns the pool on, and its workers
    then wait as OpenBLAS's do (no watcher), said in the notes; TILEBLAS_POOL_WAIT and TILEBLAS_POOL_WATCH
    still set them; a TILEBLAS_POOL not understood is one warning naming it, and the machine's default."""
    code = ("import os, warnings; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
            "warnings.simplefilter('always')\n"
            "from tileblas.kernels import _openblas, _pool\n"
            "i = _openblas.get_library(2); p = _openblas.pool_info()\n"
            "c = _pool.configure(); print(c['spin_ns'], c['yield_ns'], c['watch_ns'], p['enabled'], i.pool_slot, "
            "p['note'], p['notes'])")
    spin = _openblas.WAIT_SPIN_NS
    out = _run_with(code)
    assert out.stdout.split()[3:5] == ["False", "None"]
    assert "OpenBLAS's own threads, by default here" in out.stdout and "measured on 2 cores, not 1" in out.stdout
    assert "TILEBLAS_POOL=1 turns it on" in out.stdout
    out = _run_with(code, TILEBLAS_POOL="1")
    assert out.stdout.split()[:5] == [str(spin), str(100_000_000 - spin), "0", "True", "0"]
    assert "wait as OpenBLAS's do" in out.stdout and "measured on 2 cores, not 1" in out.stdout
    out = _run_with(code, TILEBLAS_POOL="1", TILEBLAS_POOL_WAIT="200us", TILEBLAS_POOL_WATCH="100ms")
    assert out.stdout.split()[:4] == ["200000", "0", "100000000", "True"]
    out = _run_with(code, TILEBLAS_POOL="sometimes")
    assert out.stdout.split()[3] == "False"
    assert "TILEBLAS_POOL='sometimes' not understood" in out.stderr and "RuntimeWarning" in out.stderr
    assert "TILEBLAS_POOL='sometimes' not understood" in out.stdout


def test_the_thread_timeout_setting_reads_exponents_and_refuses_the_rest():
    assert _openblas.parse_thread_timeout("4") == 4 and _openblas.parse_thread_timeout(" 30 ") == 30
    for bad in ("3", "31", "-4", "0x10", "4.5", "", "soon"):
        with pytest.raises(ValueError, match=r"TILEBLAS_THREAD_TIMEOUT=.*an integer from 4 to 30"):
            _openblas.parse_thread_timeout(bad)


#: After one parallel dgemm on a two-thread instance with OpenBLAS's own threads, the CPU time the process
#: spends while its only other thread, the calling one, sleeps 0.15 s: the instance's server thread
#: spinning before it sleeps.
_SPIN_AFTER_CALL = """
import time, warnings
warnings.simplefilter('always')
import numpy as np
from tileblas.kernels import _openblas
lib = _openblas.get_library(2)
assert lib.pool_slot is None
a = np.asfortranarray(np.random.default_rng(0).random((512, 512)))
c = np.zeros((512, 512), order='F')
for _ in range(3):
    _openblas.gemm(1.0, a, a, 0.0, c, lib=lib)
t0 = time.process_time()
time.sleep(0.15)
print(time.process_time() - t0, _openblas.pool_info()['notes'])
from tileblas.cli._core import _print_pool
_print_pool(_openblas.pool_info())
"""


def test_the_thread_timeout_makes_openblas_threads_of_tileblas_instances_sleep_after_a_call():
    """TILEBLAS_THREAD_TIMEOUT=4 with OpenBLAS's own threads (TILEBLAS_POOL=0): the server thread of
    tileblas' instance sleeps as soon as the call ends (no CPU time while the caller sleeps), said in the
    notes tileblas info shows (with the pool off too); without it, it spins as OpenBLAS's default has it (about 0.1 s: the control,
    that the measurement sees a spinning thread); a value not understood is one warning naming it, and
    OpenBLAS's setting."""
    short = _run_with(_SPIN_AFTER_CALL, TILEBLAS_POOL="0", TILEBLAS_THREAD_TIMEOUT="4")
    default = _run_with(_SPIN_AFTER_CALL, TILEBLAS_POOL="0", TILEBLAS_THREAD_TIMEOUT="")
    cpu_short, cpu_default = float(short.stdout.split()[0]), float(default.stdout.split()[0])
    assert cpu_short < 0.01 < 0.02 < cpu_default, (cpu_short, cpu_default)
    assert "spin 2**4 cycles after a call (TILEBLAS_THREAD_TIMEOUT)" in short.stdout
    assert "\n             OpenBLAS's threads of tileblas' instances spin 2**4 cycles" in short.stdout  # tileblas info
    assert "TILEBLAS_THREAD_TIMEOUT" not in default.stdout
    bad = _run_with(_SPIN_AFTER_CALL, TILEBLAS_POOL="0", TILEBLAS_THREAD_TIMEOUT="fast")
    assert "TILEBLAS_THREAD_TIMEOUT='fast' not understood" in bad.stderr and "RuntimeWarning" in bad.stderr
    assert "TILEBLAS_THREAD_TIMEOUT='fast' not understood" in bad.stdout and float(bad.stdout.split()[0]) > 0.02


def test_the_pool_is_the_default_only_at_the_core_counts_it_was_measured_at():
    assert _openblas.machine_pool(2)
    for cores in (1, 3, 4, 16, 64):
        assert _openblas.machine_pool(cores) == (cores in _openblas.POOL_MEASURED_CORES)


def test_the_watch_setting_reads_durations_and_refuses_the_rest():
    assert _openblas.parse_watch("100ms") == 100_000_000
    assert _openblas.parse_watch("0") == _openblas.parse_watch("0s") == 0
    assert _openblas.parse_watch("50us") == 50_000
    for bad in ("", "5", "never", "-1ms", "2min"):
        with pytest.raises(ValueError, match=r"TILEBLAS_POOL_WATCH=.*expected a duration"):
            _openblas.parse_watch(bad)


def test_the_watch_comes_from_the_environment():
    code = ("import warnings; warnings.simplefilter('always')\n"
            "from tileblas.kernels import _openblas, _pool\n"
            "print(_pool.configure()['watch_ns'], _openblas.pool_info()['notes'])\n"
            "from tileblas.cli._core import _print_pool; _print_pool(_openblas.pool_info())")
    out = _run_with(code, TILEBLAS_POOL_WATCH="0")
    assert out.stdout.split()[0] == "0" and "then sleep until told of work" in out.stdout
    out = _run_with(code, TILEBLAS_POOL_WATCH="later")
    assert int(out.stdout.split()[0]) == _openblas.machine_waits(cpu_count()).get("watch_ns", 100_000_000)
    assert "TILEBLAS_POOL_WATCH='later'" in out.stderr and "TILEBLAS_POOL_WATCH='later'" in out.stdout


def _threads_named(name):
    """The ids of this process's threads of that name (/proc)."""
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    out.append(int(tid))
        except OSError:
            pass
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watcher is Linux's (SCHED_IDLE)")
def test_a_sleeping_workers_watcher_wakes_it_in_the_idle_class(lib, settings):
    """Each worker has a watcher of the idle scheduling class.  While the worker sleeps, the watcher looks
    for work posted to it and wakes it, so that the calling thread only posts the work (left); the parts
    still each run once; a watch of 0 leaves every wake to the calling thread."""
    slot = lib.pool_slot
    watchers = _threads_named("tileblas-watch")
    assert len(watchers) >= lib.threads - 1
    assert all(os.sched_getscheduler(t) == os.SCHED_IDLE for t in watchers)
    _pool.configure(spin_ns=0, yield_ns=0, watch_ns=1_000_000_000)  # asleep at once, watched for 1 s
    before = _pool.stats()
    for _ in range(40):
        time.sleep(0.002)
        got = _pool.run_parts(slot, 4, spin_ns=50_000)
        assert [i for i, _ in got] == list(range(4))
    mid = _pool.stats()
    assert mid["watch_wakes"] > before["watch_wakes"] and mid["left"] > before["left"]
    assert sum(w for _ in range(3) for _, w in _pool.run_parts(slot, 4, spin_ns=2_000_000)) > 0
    _pool.configure(watch_ns=0)
    assert _wait_for(lambda: not any(_pool_watching()), timeout=3.0)
    mid = _pool.stats()
    for _ in range(20):
        time.sleep(0.002)
        _pool.run_parts(slot, 4, spin_ns=50_000)
    after = _pool.stats()
    assert after["left"] == mid["left"] and after["wakes"] > mid["wakes"]


@pytest.mark.skipif(not (sys.platform.startswith("linux") and len(os.sched_getaffinity(0)) > 1),
                    reason="the watcher is Linux's (SCHED_IDLE); a CPU mask is only narrowed with two CPUs")
def test_a_watcher_keeps_the_process_cpu_mask_while_it_watches(lib, settings):
    """A watcher is never pinned off the calling thread's CPU: pinned, it held the other CPU of two while
    it watched, another library's spinning OpenBLAS thread moved to the calling thread's CPU and slept
    there, and that library's next call woke it behind its calling thread
    (docs/developer/drop-in-internals.md, "tileblas' pool": the watcher).  Watched for 1 s after parts on
    the workers, each watcher that looks has the mask its thread was made with (the process's)."""
    slot = lib.pool_slot
    mask = os.sched_getaffinity(0)
    _pool.configure(spin_ns=0, yield_ns=0, watch_ns=1_000_000_000)  # asleep at once, watched for 1 s
    for _ in range(5):
        _pool.run_parts(slot, 4, spin_ns=50_000)
        time.sleep(0.002)
    assert _wait_for(lambda: any(_pool_watching()), timeout=3.0)
    watchers = _threads_named("tileblas-watch")
    assert watchers and all(os.sched_getaffinity(t) == mask for t in watchers)


@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="CPU masks: Linux, two CPUs at least")
def test_a_calling_thread_lends_its_cpu_to_a_late_worker_and_the_worker_gets_its_mask_back(lib, settings):
    """A calling thread that goes to sleep waiting for a worker's part (after spin_ns) moves that worker
    onto its own CPU, which it leaves idle: a late worker may share its CPU with other work
    (docs/developer/drop-in-internals.md, "tileblas' pool": lending the CPU).  Forced: each worker waits
    2 ms before it claims a part, the parts run 10 ms, so the calling thread, done first, waits for the
    worker's part (unless a busy machine kept the worker off a CPU until the calling thread took both
    parts: such calls are not counted).  A call whose calling thread slept waiting for the worker's part
    lent its CPU once.  The calling thread stays on one CPU; a thread beside it looks at the workers'
    masks meanwhile: a running worker had that CPU alone (lent), and after the calls, asleep, it has the
    process's mask without that CPU (sleep_off), not that CPU alone (never given back).  The parts are the
    same two, whichever thread ran them."""
    slot = lib.pool_slot
    mask = os.sched_getaffinity(0)
    cpu = min(mask)
    seen, stop = set(), threading.Event()

    def look():  # running workers whose mask is the calling thread's CPU alone
        while not stop.is_set():
            for t in _threads_named("tileblas-pool"):
                try:
                    if _state(t) == "R" and os.sched_getaffinity(t) == {cpu}:
                        seen.add(t)
                except OSError:
                    pass
            time.sleep(0.0005)

    _pool.configure(worker_delay_ns=2_000_000, watch_ns=0)
    waited = lent = 0
    looker = threading.Thread(target=look)
    os.sched_setaffinity(0, {cpu})  # this thread only (the main thread's id is the process's)
    try:
        looker.start()
        for _ in range(20):
            before = _pool.stats()
            got = _pool.run_parts(slot, 2, spin_ns=10_000_000)
            after = _pool.stats()
            assert sorted(i for i, _ in got) == [0, 1]
            if {who for _, who in got} == {0, 1} and after["waits_asleep"] > before["waits_asleep"]:
                waited += 1
                lent += after["lent"] - before["lent"]
                if waited == 3:
                    break
        stop.set()
        looker.join()
        assert _wait_for(lambda: all(_state(t) == "S" for t in seen), timeout=3.0)
        masks = [os.sched_getaffinity(t) for t in seen]
    finally:
        stop.set()
        os.sched_setaffinity(0, mask)
        _pool.configure(worker_delay_ns=0)
    assert waited >= 1 and lent == waited
    assert seen and all(m == mask - {cpu} for m in masks), (seen, masks, cpu)


@pytest.mark.skipif(not (_pool.supported and sys.platform.startswith("linux")), reason="no pool, or not Linux")
def test_a_lent_worker_reads_whether_no_cpu_idles():
    """machine_crowded, what a lent worker reads before it leaves the CPU it was lent: readable here (0 or
    1, not -1), and 1 once more busy processes run than the machine has CPUs online."""
    assert _pool.machine_crowded() in (0, 1)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range((os.cpu_count() or 1) + 1)]
    try:
        seen = [_pool.machine_crowded()]
        deadline = time.monotonic() + 20
        while seen[-1] != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
            seen.append(_pool.machine_crowded())
        assert seen[-1] == 1, seen
    finally:
        for p in busy:
            p.kill()
            p.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="CPU masks: Linux, two CPUs at least")
def test_a_lent_worker_says_its_part_is_done_before_it_gives_the_cpu_back(lib, settings):
    """A worker lent the calling thread's CPU tells the calling thread its part is done while still on
    that CPU, and only then gets its mask back and moves off it: moved first, it waited to tell behind
    whatever ran on its own CPU (another library's spinning thread: a scheduler tick, 4 ms, per call) while
    the lent CPU idled.  The calling thread, told, takes the CPU back itself where the worker has not yet
    (take_back_cpu): a worker left with that CPU alone waited behind the calling thread's next call
    (docs/developer/drop-in-internals.md, "tileblas' pool": lending the CPU).  Forced as in the test above,
    each lent worker holding off its own give-back 0.5 s after it told: a call that lent its CPU returns
    well before that, and the worker, still running (in that wait), no longer has that CPU alone; asleep
    afterwards, it has the process's mask without that CPU (sleep_off)."""
    slot = lib.pool_slot
    mask = os.sched_getaffinity(0)
    cpu = min(mask)
    _pool.configure(worker_delay_ns=2_000_000, watch_ns=0, give_back_delay_ns=500_000_000)
    os.sched_setaffinity(0, {cpu})  # this thread only
    lent_calls = []
    try:
        for _ in range(20):
            before = _pool.stats()
            t0 = time.monotonic()
            got = _pool.run_parts(slot, 2, spin_ns=10_000_000)
            seconds = time.monotonic() - t0
            running = {t: os.sched_getaffinity(t) for t in _threads_named("tileblas-pool") if _state(t) == "R"}
            after = _pool.stats()
            assert sorted(i for i, _ in got) == [0, 1]
            if after["lent"] > before["lent"]:
                lent_calls.append((seconds, running))
                assert _wait_for(lambda: all(_state(t) == "S" for t in running), timeout=5.0)
                if len(lent_calls) == 2:
                    break
    finally:
        os.sched_setaffinity(0, mask)
        _pool.configure(worker_delay_ns=0, give_back_delay_ns=0)
    assert lent_calls, "no call lent its CPU"
    for seconds, running in lent_calls:  # the lent worker still waits to give the CPU back: running
        assert seconds < 0.5 and running and all(m != {cpu} for m in running.values()), lent_calls
    lent = {t for _, running in lent_calls for t in running}
    masks = {t: os.sched_getaffinity(t) for t in lent}
    assert all(m == mask - {cpu} for m in masks.values()), (masks, mask, cpu)


def test_the_wake_counters_time_each_wake_from_its_post(lib, settings):
    """woke counts the workers that woke from sleep to work, wake_ns and wake_max_ns their time from the
    post to running, tail_ns the calling thread's wait after its own parts.  Parts posted to sleeping
    workers: each wake is counted, with a time between 0 and the longest (under a second), and the calling
    thread's waits add up."""
    slot = lib.pool_slot
    _pool.configure(spin_ns=0, yield_ns=0, watch_ns=0)  # asleep at once, woken by the calling thread
    before = _pool.stats()
    for _ in range(10):
        time.sleep(0.002)
        got = _pool.run_parts(slot, 2, spin_ns=5_000_000)
        assert [i for i, _ in got] == [0, 1]
    after = _pool.stats()
    woke = after["woke"] - before["woke"]
    wake_ns = after["wake_ns"] - before["wake_ns"]
    assert woke >= 1 and wake_ns > 0
    assert 0 < wake_ns / woke <= after["wake_max_ns"] < 1_000_000_000
    assert after["tail_ns"] > before["tail_ns"]


def _state(tid):
    """A thread's state letter (R running or runnable, S asleep, ...), from /proc."""
    with open(f"/proc/self/task/{tid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _pool_watching():
    """Whether each watcher is on a CPU or runnable (state R), from /proc."""
    out = []
    for tid in _threads_named("tileblas-watch"):
        out.append(_state(tid) == "R")
    return out


def test_claimed_parts_each_run_once_by_whoever_is_there(lib, settings):
    slot = lib.pool_slot
    for nparts in (1, 2, 3, 7, 64):
        got = _pool.run_parts(slot, nparts, spin_ns=20_000)
        assert [i for i, _ in got] == list(range(nparts))  # every part, once (each records itself)
    # hot workers take a share of long parts
    _pool.configure(spin_ns=1_000_000_000)
    _pool.run_parts(slot, 2)
    by_worker = sum(w for _ in range(20) for _, w in _pool.run_parts(slot, 4, spin_ns=2_000_000))
    assert by_worker > 0


def test_the_calling_thread_runs_the_parts_the_workers_do_not_take(lib, settings):
    slot = lib.pool_slot
    # workers that wait 50 ms before they claim: the calling thread runs every part of a short batch
    _pool.configure(worker_delay_ns=50_000_000)
    s0 = _pool.stats()
    got = _pool.run_parts(slot, 8, spin_ns=10_000)
    s1 = _pool.stats()
    assert [w for _, w in got] == [0] * 8
    assert s1["caller_parts"] - s0["caller_parts"] == 8 and s1["parts"] - s0["parts"] == 8
    # a slot busy with another call (held here): the calling thread runs them all, at once, alone
    _pool.configure(worker_delay_ns=0)
    _pool.hold(slot, True)
    try:
        out: list = []
        t = threading.Thread(target=lambda: out.append(_pool.run_parts(slot, 5, spin_ns=10_000)))
        t.start()
        t.join(10)
        assert not t.is_alive(), "a batch waited for a busy slot"
    finally:
        _pool.hold(slot, False)
    assert [w for _, w in out[0]] == [0] * 5
    assert _pool.stats()["alone"] > s1["alone"]
    with pytest.raises(ValueError, match=r"slot is 99"):
        _pool.run_parts(99, 2)
    with pytest.raises(ValueError, match=r"nparts is 0"):
        _pool.run_parts(slot, 0)


def test_parts_from_many_threads_at_once_all_run(lib, settings):
    slot = lib.pool_slot
    errors: list = []

    def work():
        for _ in range(200):
            got = _pool.run_parts(slot, 5, spin_ns=2_000)
            if [i for i, _ in got] != list(range(5)):
                errors.append(got)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a batch hung"
    assert not errors, errors[:3]


def test_configure_checks_every_setting_by_name(settings):
    settings = _pool.configure()
    assert set(settings) == {"spin_ns", "yield_ns", "worker_delay_ns", "watch_ns", "give_back_delay_ns"}
    with pytest.raises(ValueError, match=r"spin_ns is -1"):
        _pool.configure(spin_ns=-1)
    with pytest.raises(ValueError, match=r"watch_ns is -3"):
        _pool.configure(watch_ns=-3)
    with pytest.raises(ValueError, match=r"yield_ns is -2"):
        _pool.configure(yield_ns=-2)
    with pytest.raises(TypeError, match=r"worker_delay_ns must be an int .*'soon'"):
        _pool.configure(worker_delay_ns="soon")
    with pytest.raises(TypeError, match=r"spin_ns must be an int .*True"):
        _pool.configure(spin_ns=True)
    with pytest.raises(ValueError, match=r"worker_delay_ns is -5"):
        _pool.configure(spin_ns=7, worker_delay_ns=-5)
    with pytest.raises(ValueError, match=r"give_back_delay_ns is -4"):
        _pool.configure(give_back_delay_ns=-4)
    assert _pool.configure() == settings  # a refused call changes nothing, not even its good values
    with pytest.raises(TypeError):
        _pool.configure(1)  # keywords only
    with pytest.raises(ValueError, match=r"setter is 0"):
        _pool.attach(0, 2)
    with pytest.raises(ValueError, match=r"threads is 0"):
        _pool.attach(1, 0)


def test_one_thread_calls_never_reach_the_workers(lib, settings):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    rng = np.random.default_rng(7)
    n = 300
    a, b = _rand(rng, (n, n), np.float64), _rand(rng, (n, n), np.float64)
    c = np.zeros((n, n), order="F")
    with threadpoolctl.threadpool_limits(1):
        before = _pool.stats()["jobs"]
        _openblas.gemm(1.0, a, b, 0.0, c, lib=lib)
        assert _pool.stats()["jobs"] == before
    _check(c, a @ b, 4 * n * EPS[np.float64] * (np.abs(a) @ np.abs(b)).max(), "dgemm on one thread")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_runs_parallel_calls(lib, settings):
    rng = np.random.default_rng(8)
    n = 300
    a, b = _rand(rng, (n, n), np.float64), _rand(rng, (n, n), np.float64)
    c = np.zeros((n, n), order="F")
    _openblas.gemm(1.0, a, b, 0.0, c, lib=lib)  # workers exist in the parent
    ref = a @ b
    bound = 4 * n * EPS[np.float64] * (np.abs(a) @ np.abs(b)).max()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads running: this test's point
        pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            calls = _pool.stats()["calls"]
            c2 = np.zeros((n, n), order="F")
            _openblas.gemm(1.0, a, b, 0.0, c2, lib=lib)
            code = 0 if (np.abs(c2 - ref).max() <= bound and _pool.stats()["calls"] > calls) else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on a parallel call")
        time.sleep(0.02)
    assert os.waitstatus_to_exitcode(status) == 0


_RESIDENT = """
import ctypes, time
from tileblas.kernels import _openblas, _pool
libc = ctypes.CDLL(None)
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
PAGE = 4096

def resident(lib, count, nbytes):
    # the share of the first nbytes of each of count buffers taken at once that is in memory (mincore
    # reads it, touching nothing); the buffers are given back
    alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int)(lib._internal("blas_memory_alloc"))
    release = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lib._internal("blas_memory_free"))
    bufs = [alloc(0) for _ in range(count)]
    try:
        shares = []
        for b in bufs:
            start = b - b % PAGE
            pages = (b + nbytes - start + PAGE - 1) // PAGE
            vec = ctypes.create_string_buffer(pages)
            assert libc.mincore(start, pages * PAGE, vec) == 0, ctypes.get_errno()
            shares.append(sum(x & 1 for x in vec.raw) / pages)
        return shares
    finally:
        for b in reversed(bufs):
            release(b)

def settled():
    end = time.monotonic() + 30
    while _pool.stats()["warming"] and time.monotonic() < end:
        time.sleep(0.005)
    return _pool.stats()
"""


def test_warm_writes_the_buffers_a_split_calls_parts_take_off_the_calling_thread():
    """warm() takes `count` buffers of an instance at once and writes the first `bytes` of each on a thread of
    its own: afterwards exactly those buffers' pages are in memory (mincore), the next one's are not; once
    per instance; its arguments are checked by name."""
    code = _RESIDENT + (
        "import os, shutil, tempfile\n"
        "tmp = tempfile.mkdtemp()\n"
        "copy = os.path.join(tmp, 'libcopy.so')\n"
        "shutil.copyfile(_openblas.library_path(), copy)\n"
        "lib = _openblas.BlasLibrary(copy, 1)  # an instance of its own: buffers no call has used\n"
        "assert resident(lib, 3, 1 << 20) == [0.0, 0.0, 0.0]\n"
        "before = settled()['warmed']\n"
        "assert lib.warm_buffers(2, 1 << 20)\n"
        "assert not lib.warm_buffers(2, 1 << 20)  # once per instance\n"
        "st = settled()\n"
        "assert st['warming'] == 0 and st['warmed'] == before + 2, st\n"
        "shares = resident(lib, 3, 1 << 20)\n"
        "assert shares[:2] == [1.0, 1.0] and shares[2] == 0.0, shares\n"
        "for args, word in (((0, 1, 1, 0), 'alloc'), ((1, 0, 1, 0), 'release'), ((1, 1, 0, 0), 'count is 0'),\n"
        "                   ((1, 1, 1, -1), 'bytes is -1')):\n"
        "    try:\n"
        "        _pool.warm(*args)\n"
        "    except ValueError as e:\n"
        "        assert word in str(e), e\n"
        "    else:\n"
        "        raise AssertionError(args)\n"
        "shutil.rmtree(tmp)\n"
        "print('ok')\n"
    )
    out = _run_with(code)
    assert out.stdout.strip() == "ok"


def test_a_split_call_ends_a_warm_up_in_progress_and_takes_its_buffers():
    """A split call made while a warm-up runs ends it (the warm-up stops at the page it is on and gives its
    buffers back) before its parts run, and its result is right; a later warm-up runs whole again."""
    code = _RESIDENT + (
        "import os, shutil, tempfile, numpy as np\n"
        "import tileblas.blas as tb\n"
        "from tileblas.blas import _fastpath\n"
        "a = np.asfortranarray(np.random.default_rng(5).random((512, 512)))\n"
        "tb.dgemm(1.0, a, a)\n"
        "if _fastpath.decide(tb.dgemm, 1.0, a, a)['path'] != 'split':\n"
        "    print('skip'); raise SystemExit\n"
        "tmp = tempfile.mkdtemp()\n"
        "libs = []\n"
        "for k in range(2):\n"
        "    copy = os.path.join(tmp, f'libcopy{k}.so')\n"
        "    shutil.copyfile(_openblas.library_path(), copy)\n"
        "    libs.append(_openblas.BlasLibrary(copy, 1))\n"
        "before = settled()['warmed']\n"
        "assert libs[0].warm_buffers(2, 30 << 20)  # 15,000 pages: tens of milliseconds\n"
        "c = tb.dgemm(1.0, a, a)\n"
        "st = settled()\n"
        "assert st['warmed'] - before < 2, st  # ended, not both buffers written whole\n"
        "assert np.abs(c - a @ a).max() <= 4 * 512 * 2.3e-16 * (a @ a).max()\n"
        "assert libs[1].warm_buffers(2, 1 << 20)\n"
        "st = settled()\n"
        "assert st['warmed'] - before >= 2, st\n"
        "shutil.rmtree(tmp)\n"
        "print('ok')\n"
    )
    out = _run_with(code)
    if out.stdout.strip() == "skip":
        pytest.skip("dgemm 512 is not split on this machine")
    assert out.stdout.strip() == "ok"


def test_a_fork_at_once_after_the_import_waits_for_the_warm_up_and_both_sides_compute():
    """fork() right after the import, while the warm-up may still run: fork waits for it (a call in flight),
    and the child and the parent then make split calls with right results and end."""
    code = (
        "import os, numpy as np\n"
        "a = np.asfortranarray(np.random.default_rng(6).random((512, 512)))\n"
        "import tileblas.blas as tb\n"
        "pid = os.fork()\n"
        "c = tb.dgemm(1.0, a, a)\n"
        "ok = np.abs(c - a @ a).max() <= 4 * 512 * 2.3e-16 * (a @ a).max()\n"
        "if pid == 0:\n"
        "    os._exit(0 if ok else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert ok and os.waitstatus_to_exitcode(status) == 0, status\n"
        "print('ok')\n"
    )
    assert _run_with(code).stdout.strip() == "ok"


def test_the_import_warms_the_one_thread_instances_buffers_for_the_split_calls():
    """Importing tileblas.blas with a pool of two or more threads warms as many buffers of the one-thread
    instance (the parts of a split call, one on each thread and max_parts at most, take one each), where the C
    path splits any call; with the pool off, none."""
    code = _RESIDENT + (
        "import tileblas.blas\n"
        "from tileblas.blas import _dispatch\n"
        "from tileblas.runtime import _runtime\n"
        "from tileblas.blas import _fastpath\n"
        "one = _openblas.get_library(1)\n"
        "threads = min(_dispatch._threads(_runtime.get_runtime()), _fastpath.config()['max_parts'])\n"
        "cfg = _fastpath.config()\n"
        "threads *= bool(cfg['split']) and cfg['pool_slot'] >= 0  # no call split: none\n"
        "st = settled()\n"
        "if _pool.supported and _openblas._POOL['enabled'] and threads > 1:\n"
        "    assert st['warmed'] == threads and one._warmed, (st, threads)\n"
        "    assert resident(one, threads, _openblas.WARM_BYTES) == [1.0] * threads\n"
        "else:\n"
        "    assert st.get('warmed', 0) == 0 and not one._warmed, st\n"
        "from tileblas.cli._core import _print_pool\n"
        "_print_pool(_openblas.pool_info())\n"
        "print('ok', threads, st.get('warmed', 0))\n"
    )
    for extra in ({}, {"TILEBLAS_POOL": "0"}):
        out = _run_with(code, **extra)
        words = out.stdout.splitlines()[-1].split()
        assert words[0] == "ok" and (words[2] == "0" or not extra), words
        if not extra:  # tileblas info's pool lines say it
            assert f"{words[2]} buffer(s) written ahead at the import of tileblas.blas" in out.stdout, out.stdout


def test_turned_off_the_instances_keep_openblas_threads():
    code = (
        "import numpy as np\n"
        "from tileblas.kernels import _openblas, _pool\n"
        "lib = _openblas.get_library(2)\n"
        "a = np.asfortranarray(np.random.rand(300, 300)); c = np.zeros((300, 300), order='F')\n"
        "_openblas.gemm(1.0, a, a, 0.0, c, lib=lib)\n"
        "info = _openblas.pool_info()\n"
        "assert lib.pool_slot is None and not info['enabled'] and 'TILEBLAS_POOL=0' in info['note'], info\n"
        "assert _pool.stats()['calls'] == 0\n"
        "assert np.abs(c - a @ a).max() <= 4 * 300 * 2.3e-16 * (np.abs(a) @ np.abs(a)).max()\n"
        "print('ok')\n"
    )
    assert _run_with(code, TILEBLAS_POOL="0").stdout.strip() == "ok"


def test_an_instance_the_pool_cannot_take_runs_on_one_thread():
    code = (
        "import ctypes, numpy as np\n"
        "from tileblas.kernels import _openblas, _pool\n"
        "seen = []\n"
        "setter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda cb: seen.append(cb))\n"
        "addr = ctypes.cast(setter, ctypes.c_void_p).value\n"
        "slots = [_pool.attach(addr, 1) for _ in range(32)]\n"
        "assert slots == list(range(32)) and len(seen) == 32, (slots, len(seen))\n"
        "try:\n"
        "    _pool.attach(addr, 1)\n"
        "except RuntimeError as e:\n"
        "    assert 'all 32 pool slots' in str(e), e\n"
        "else:\n"
        "    raise AssertionError('a 33rd slot')\n"
        "lib = _openblas.get_library(2)\n"
        "assert lib.pool_slot is None and lib.num_threads() == 1, (lib.pool_slot, lib.num_threads())\n"
        "assert 'runs on one thread' in lib.note, lib.note\n"
        "a = np.asfortranarray(np.random.rand(300, 300)); c = np.zeros((300, 300), order='F')\n"
        "_openblas.gemm(1.0, a, a, 0.0, c, lib=lib)\n"
        "assert np.abs(c - a @ a).max() <= 4 * 300 * 2.3e-16 * (np.abs(a) @ np.abs(a)).max()\n"
        "assert _pool.stats()['calls'] == 0\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize("prefix", "sdcz")
def test_symm_and_hemm_run_split_on_the_pool_with_scipys_results(prefix, settings):
    import scipy.linalg.blas as sb

    from tileblas import blas as tb
    from tileblas.blas import _fastpath
    from tileblas.policy import _dropin

    tb.dgemm(1.0, np.ones((4, 4)), np.ones((4, 4)))  # the C path is set up for the default runtime
    split = _splits(_fastpath)
    if not split:
        pytest.skip("no split here (one thread, or the C path is off)")
    lo, hi = _dropin.SHIPPED.split[prefix + "symm"]
    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]
    eps = EPS[dtype]
    rng = np.random.default_rng(10)
    names = ["symm"] + (["hemm"] if prefix in "cz" else [])
    for name in names:
        assert split[prefix + name] == (lo, hi)
        f, g = getattr(tb, prefix + name), getattr(sb, prefix + name)
        # 70: split (2 parts of 35); 12 columns: parts too thin, one call; 8: below the flops
        for s_, other in ((70, 70), (70, 12), (96, 50), (8, 8)):
            for side in (0, 1):
                for lower in (0, 1):
                    for order in "FC":
                        a = _rand(rng, (s_, s_), dtype)
                        shape = (s_, other) if side == 0 else (other, s_)
                        b = np.asarray(_rand(rng, shape, dtype), order=order)
                        a = np.asarray(a, order=order)
                        before = _split_calls(_fastpath)
                        path = _fastpath.decide(f, 1.0, a, b, side=side, lower=lower)
                        got = f(1.0, a, b, side=side, lower=lower)
                        ran = _split_calls(_fastpath) - before
                        assert ran == (path["path"] == "split"), (path, name, s_, other, side, order)
                        ref = g(1.0, a, b, side=side, lower=lower)
                        bound = 4 * s_ * eps * (np.abs(a).max() * np.abs(b).max() * s_)
                        _check(got, ref.astype(np.complex128), bound, f"{prefix}{name} {s_}x{other} {side} {lower} {order}")
                        assert got.dtype == ref.dtype and got.shape == ref.shape
                        parts = other // max(16, s_ // 8)
                        flops = 2.0 * s_ * s_ * other * (4 if prefix in "cz" else 1)
                        # C-ordered: each part copies its piece of b to Fortran order (conjugated for
                        # hemm, which then uses a C-ordered a as conj(a)), and still runs split
                        assert ran == (1 if parts >= 2 and lo <= flops < hi else 0), (
                            name, s_, other, side, lower, order, ran)


@pytest.mark.parametrize("prefix", "sdcz")
def test_gemm_runs_split_on_the_pool_with_scipys_results(prefix, settings):
    import scipy.linalg.blas as sb

    from tileblas import blas as tb
    from tileblas.blas import _fastpath
    from tileblas.policy import _dropin

    tb.dgemm(1.0, np.ones((4, 4)), np.ones((4, 4)))
    split = _splits(_fastpath)
    if not split:
        pytest.skip("no split here (one thread, or the C path is off)")
    lo, hi = _dropin.config(2).split[prefix + "gemm"]
    assert split[prefix + "gemm"] == (lo, hi) and lo == _dropin.SHIPPED.split[prefix + "gemm"][0]
    one = _dropin.config(2).one_thread[prefix + "gemm"]  # below it one call on one thread, never split
    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]
    eps = EPS[dtype]
    rng = np.random.default_rng(11)
    f, g = getattr(tb, prefix + "gemm"), getattr(sb, prefix + "gemm")
    transes = (0, 1, 2) if prefix in "cz" else (0, 1)
    # (m, k, n): split (n = 130 >= 2 x 16), split in complex only (one thread below 2e6 flops in real),
    # too few columns (12), too few flops (8)
    for m, k, n in ((130, 64, 130), (70, 50, 70), (200, 40, 60), (70, 70, 12), (8, 8, 8)):
        for ta in transes:
            for tb_ in transes:
                for order in "FC":
                    a = np.asarray(_rand(rng, (k, m) if ta else (m, k), dtype), order=order)
                    b = np.asarray(_rand(rng, (n, k) if tb_ else (k, n), dtype), order=order)
                    before = _split_calls(_fastpath)
                    path = _fastpath.decide(f, 1.0, a, b, trans_a=ta, trans_b=tb_)
                    got = f(1.0, a, b, trans_a=ta, trans_b=tb_)
                    ran = _split_calls(_fastpath) - before
                    assert ran == (path["path"] == "split"), (path, m, k, n, ta, tb_, order)
                    ref = g(1.0, a, b, trans_a=ta, trans_b=tb_)
                    bound = 4 * k * eps * np.abs(a).max() * np.abs(b).max() * k
                    _check(got, ref.astype(np.complex128), bound, f"{prefix}gemm {m}x{k}x{n} {ta}{tb_} {order}")
                    assert got.dtype == ref.dtype and got.shape == ref.shape
                    copied = order == "C" and 2 in (ta, tb_)  # a conjugate without transpose: copied
                    flops = 2.0 * m * n * k * (4 if prefix in "cz" else 1)
                    parts = n // max(16, m // 8)
                    assert ran == (1 if parts >= 2 and max(lo, one) <= flops < hi and not copied else 0), (
                        m, k, n, ta, tb_, order, ran)


@pytest.mark.parametrize("prefix", "sdcz")
def test_trmm_trsm_run_split_on_the_pool_with_scipys_results(prefix, settings):
    """trmm/trsm split into parts of b (columns for side L, rows for side R), each part copying its own
    piece where b is not written in place: every side, triangle, trans, diag, order of a and b (Fortran,
    C, strided), b in place or not, give SciPy's results within the error bound, leave the caller's b as
    it was where not in place, and run split exactly where the parts and the flops allow; the shipped
    ranges are in force, and a call at the lower end of one runs split."""
    import itertools

    import scipy.linalg.blas as sb

    from tileblas import blas as tb
    from tileblas.blas import _fastpath
    from tileblas.policy import _dropin

    tb.dgemm(1.0, np.ones((4, 4)), np.ones((4, 4)))  # the C path is set up for the default runtime
    shipped = _splits(_fastpath)
    if not shipped:
        pytest.skip("no split here (one thread, or the C path is off)")
    cfg0 = _fastpath.config()
    for f in ("trmm", "trsm"):
        assert shipped[prefix + f] == _dropin.SHIPPED.split[prefix + f]
    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]
    eps = EPS[dtype]
    cplx = prefix in "cz"
    rng = np.random.default_rng(13)
    # the shipped lower end (of the split range, and of the calls not on one thread): an order whose flops
    # just reach it runs split (side L, square), one below not
    lo = max(_dropin.SHIPPED.split[prefix + "trsm"][0], _dropin.SHIPPED.one_thread[prefix + "trsm"]) / (4 if cplx else 1)
    n_at = int(np.ceil(lo ** (1 / 3)))
    while n_at ** 3 < lo:
        n_at += 1
    for n, want in ((n_at, 1), (n_at - 1, 0)):
        a = np.asfortranarray(np.triu(_rand(rng, (n, n), dtype)) / n + 2 * np.eye(n, dtype=dtype))
        b = _rand(rng, (n, n), dtype)
        before = _split_calls(_fastpath)
        assert (_fastpath.decide(getattr(tb, prefix + "trsm"), 1.0, a, b)["path"] == "split") == bool(want), (n, lo)
        got = getattr(tb, prefix + "trsm")(1.0, a, b)
        assert _split_calls(_fastpath) - before == want, (n, lo)
        _check(got, getattr(sb, prefix + "trsm")(1.0, a, b).astype(np.complex128), 16 * n * eps * np.abs(b).max(), n)
    wide = dict(shipped, **{prefix + f: (1e3, 1e12) for f in ("trmm", "trsm")})
    alpha = 1.5 - 0.5j if cplx else 1.5
    try:
        _fastpath.configure({**cfg0, "split": wide})
        # below the one-thread limit a trmm runs on one thread, never split
        limit = cfg0["one_thread"][prefix + "trmm"]
        n = max(s_ for s_ in range(32, 200) if s_ ** 3 * (4 if cplx else 1) < limit) if limit > 32 ** 3 * 4 else 0
        if n:
            before = _split_calls(_fastpath)
            getattr(tb, prefix + "trmm")(1.0, np.asfortranarray(np.eye(n, dtype=dtype)), _rand(rng, (n, n), dtype))
            assert _split_calls(_fastpath) == before, (n, limit)
        # no one-thread limit: the split alone decides below
        _fastpath.configure({**cfg0, "split": wide, "one_thread": {}})
        for fam in ("trmm", "trsm"):
            f, g = getattr(tb, prefix + fam), getattr(sb, prefix + fam)
            # order 40, 24 others: 2 parts along b's 40 (side R: rows); 40 x 12: too thin, one call
            for (s_, other), side, lower, ta, diag, oa, ob in itertools.product(
                    ((40, 40), (40, 24), (40, 12)), (0, 1), (0, 1), (0, 1, 2) if cplx else (0, 1), (0, 1), "FC",
                    "FCS"):
                tri = np.tril if lower else np.triu
                a = tri(_rand(rng, (s_, s_), dtype)) / s_ + (1.5 * np.eye(s_, dtype=dtype))  # well conditioned
                a = np.asarray(a, order=oa)
                shape = (s_, other) if side == 0 else (other, s_)
                b = _rand(rng, shape, dtype)
                if ob == "C":
                    b = np.ascontiguousarray(b)
                elif ob == "S":
                    big = np.zeros((shape[0], 2 * shape[1]), dtype, order="F")
                    big[:, ::2] = b
                    b = big[:, ::2]
                what = f"{prefix}{fam} {s_}x{other} side={side} lower={lower} trans={ta} diag={diag} a {oa} b {ob}"
                kw = dict(side=side, lower=lower, trans_a=ta, diag=diag)
                ref = g(alpha, a, b.copy(order="A"), **kw)
                rdt, ref = ref.dtype, ref.astype(np.complex128)
                if fam == "trmm":
                    bound = 8 * s_ * eps * abs(alpha) * 2 * np.abs(b).max()
                else:
                    bound = 16 * s_ * eps * abs(alpha) * max(np.abs(b).max(), np.abs(ref).max())
                len_ = shape[1] if side == 0 else shape[0]
                parts = len_ // 16
                for ow in (0, 1):
                    b_in, b_keep = b.copy(order="A") if ob != "S" else b, b.copy()
                    before = _split_calls(_fastpath)
                    path = _fastpath.decide(f, alpha, a, b_in, overwrite_b=ow, **kw)
                    got = f(alpha, a, b_in, overwrite_b=ow, **kw)
                    ran = _split_calls(_fastpath) - before
                    assert ran == (path["path"] == "split"), (what, ow, path)
                    _check(got, ref, bound, f"{what} overwrite_b={ow}")
                    assert got.dtype == rdt and got.shape == ref.shape and got.flags.f_contiguous, what
                    if ow and ob == "F":
                        assert got is b_in, what  # in place, as SciPy
                    else:
                        np.testing.assert_array_equal(b_in, b_keep)  # the caller's b as it was
                    # a C-ordered a with trans 2 (conjugate, no transpose) is copied first: not split
                    copied = oa == "C" and ta == 2
                    assert ran == (1 if parts >= 2 and not copied else 0), (what, ow, ran)
    finally:
        _fastpath.configure(cfg0)
    assert _fastpath.config() == cfg0


@pytest.mark.parametrize("prefix", "sdcz")
def test_symm_hemm_with_copied_or_conjugated_operands(prefix, settings):
    """Every order of a, b and c, beta zero or not, c updated in place or not, below, inside and above the
    split's flops: a C-ordered a is used as it lies (hemm through conj(a), b and c conjugated), b is copied
    to Fortran order by each part, and the results are SciPy's within the product's error bound."""
    import itertools

    import scipy.linalg.blas as sb

    from tileblas import blas as tb
    from tileblas.blas import _fastpath

    tb.dgemm(1.0, np.ones((4, 4)), np.ones((4, 4)))  # the C path is set up for the default runtime
    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]
    eps = EPS[dtype]
    rng = np.random.default_rng(11)
    cplx = prefix in "cz"
    alpha, beta = (1.5 - 0.5j, 0.5 + 0.25j) if cplx else (1.5, 0.5)
    split_before = _split_calls(_fastpath)
    for name in ["symm"] + (["hemm"] if cplx else []):
        f, g = getattr(tb, prefix + name), getattr(sb, prefix + name)
        for (s_, other), side, lower, oa, ob in itertools.product(((12, 12), (70, 40), (340, 24)), (0, 1), (0, 1),
                                                                   "CF", "CF"):
            a = np.asarray(_rand(rng, (s_, s_), dtype), order=oa)
            shape = (s_, other) if side == 0 else (other, s_)
            b = np.asarray(_rand(rng, shape, dtype), order=ob)
            what = f"{prefix}{name} {s_}x{other} side={side} lower={lower} a {oa} b {ob}"
            scale = s_ * np.abs(a).max() * np.abs(b).max()
            got, ref = f(alpha, a, b, side=side, lower=lower), g(alpha, a, b, side=side, lower=lower)
            _check(got, ref.astype(np.complex128), 4 * s_ * eps * abs(alpha) * scale, what)
            assert got.flags.f_contiguous and got.dtype == ref.dtype
            for oc, ow in (("F", 0), ("F", 1), ("C", 0), ("C", 1)):
                c = np.asarray(_rand(rng, shape, dtype), order=oc)
                c_in, c_keep = c.copy(order="A"), c.copy()
                got = f(alpha, a, b, beta, c_in, side=side, lower=lower, overwrite_c=ow)
                ref = g(alpha, a, b, beta, c.copy(order="A"), side=side, lower=lower, overwrite_c=ow)
                bound = 4 * s_ * eps * (abs(alpha) * scale + abs(beta) * np.abs(c).max())
                _check(got, ref.astype(np.complex128), bound, f"{what} c {oc} overwrite_c={ow}")
                if ow and oc == "F":
                    assert got is c_in  # updated in place, as SciPy does
                else:
                    np.testing.assert_array_equal(c_in, c_keep)  # the caller's c is left as it was
    assert _split_calls(_fastpath) > split_before  # the 70 x 40 calls ran split


@pytest.mark.parametrize("prefix", "sdcz")
def test_rank_k_runs_split_in_strips_with_scipys_results(prefix, settings):
    """syrk/herk and syr2k/her2k (shipped: complex and double, smaller calls) split into strips of the stored
    triangle: every trans, triangle, order of a, b and c, beta zero or not, c in place or not, give SciPy's
    results within the error bound, and the other triangle of c is left as it was."""
    import itertools

    import scipy.linalg.blas as sb

    from tileblas import blas as tb
    from tileblas.blas import _fastpath
    from tileblas.policy import _dropin

    tb.dgemm(1.0, np.ones((4, 4)), np.ones((4, 4)))  # the C path is set up for the default runtime
    shipped = _splits(_fastpath)
    if not shipped:
        pytest.skip("no split here (one thread, or the C path is off)")
    cfg0 = _fastpath.config()
    for f in ("syrk", "herk"):
        if prefix + f in _dropin.config(2).split:
            assert shipped[prefix + f] == _dropin.SHIPPED.split[prefix + f]
            assert shipped[prefix + f] == _dropin.SHIPPED.split[prefix + "syrk"]  # one range per precision
    for f in ("syr2k", "her2k") if prefix in "cz" else ("syr2k",):  # shipped but for ssyr2k
        assert shipped.get(prefix + f) == _dropin.SHIPPED.split.get(prefix + f)
        assert (prefix + f in shipped) == (prefix != "s")
    cplx = prefix in "cz"
    fams = ["syrk", "syr2k"] + (["herk", "her2k"] if cplx else [])
    wide = dict(shipped, **{prefix + f: (1e3, 1e12) for f in fams})
    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]
    eps = EPS[dtype]
    rng = np.random.default_rng(12)
    try:
        # the strips, not the gemm route of small real calls nor one call on one thread
        _fastpath.configure({**cfg0, "split": wide, "rank_gemm": {}, "one_thread": {}})
        for fam in fams:
            herm, two = fam.startswith("her"), fam.endswith("2k")
            f, g = getattr(tb, prefix + fam), getattr(sb, prefix + fam)
            transes = (0, 2) if (cplx and herm) else ((0, 1) if cplx else (0, 1, 2))
            for n, k, tr, lower, oa in itertools.product((40, 97), (3, 50), transes, (0, 1), "CF"):
                shape = (n, k) if tr == 0 else (k, n)
                a = np.asarray(_rand(rng, shape, dtype), order=oa)
                b = np.asarray(_rand(rng, shape, dtype), order=oa)
                alpha = 1.5 if (fam == "herk" or not cplx) else 1.5 - 0.5j
                beta = 0.5 if (herm or not cplx) else 0.5 + 0.25j
                args = (alpha, a, b) if two else (alpha, a)
                c = _rand(rng, (n, n), dtype)
                c = np.asarray(c + c.conj().T, order="C" if lower else "F")
                bound = 8 * k * eps * (abs(alpha) * k * np.abs(a).max() * np.abs(b if two else a).max() * (2 if two else 1)
                                       + abs(beta) * np.abs(c).max())
                what = f"{prefix}{fam} n={n} k={k} trans={tr} lower={lower} a {oa}"
                before = _split_calls(_fastpath)
                assert _fastpath.decide(f, *args, trans=tr, lower=lower)["path"] == "split", what
                got, ref = f(*args, trans=tr, lower=lower), g(*args, trans=tr, lower=lower)
                assert _split_calls(_fastpath) > before, what
                _check(got, ref.astype(np.complex128), bound, what)
                for ow in (0, 1):
                    c_in, c_keep = c.copy(order="A"), c.copy()
                    got = f(*args, beta, c_in, trans=tr, lower=lower, overwrite_c=ow)
                    ref = g(*args, beta, c.copy(order="A"), trans=tr, lower=lower, overwrite_c=ow)
                    _check(got, ref.astype(np.complex128), bound, f"{what} c given, overwrite_c={ow}")
                    other = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
                    np.testing.assert_array_equal(got[other], c_keep[other])  # the other triangle: c's own
                    if herm:
                        assert not np.signbit(np.diagonal(got).imag).any()
    finally:
        _fastpath.configure(cfg0)
    assert _fastpath.config() == cfg0


@pytest.mark.parametrize("prefix", "cz")
def test_herk_her2k_c_ordered_copy_or_conjugate_problem(prefix, settings):
    """C-ordered herk/her2k operands are copied to Fortran order where k is small against n (n >= 6 k in
    single precision, 12 k in double, twice that when beta is not zero), else solved as the conjugate
    problem: both sides of that rule give SciPy's results, leave the other triangle of c alone and keep
    the diagonal's +0 imaginary parts."""
    import itertools

    import scipy.linalg.blas as sb

    from tileblas import blas as tb

    tb.dgemm(1.0, np.ones((4, 4)), np.ones((4, 4)))  # the C path is set up for the default runtime
    dtype = np.complex64 if prefix == "c" else np.complex128
    eps = EPS[dtype]
    rng = np.random.default_rng(21)
    n = 120
    ks = (4, 10, 11, 20, 21, 40) if prefix == "z" else (4, 10, 20, 21, 40, 41)
    for fam, k, tr, lower in itertools.product(("herk", "her2k"), ks, (0, 2), (0, 1)):
        two = fam == "her2k"
        f, g = getattr(tb, prefix + fam), getattr(sb, prefix + fam)
        shape = (n, k) if tr == 0 else (k, n)
        a = np.ascontiguousarray(_rand(rng, shape, dtype))
        b = np.ascontiguousarray(_rand(rng, shape, dtype))
        alpha = 1.5 if fam == "herk" else 1.5 - 0.5j
        args = (alpha, a, b) if two else (alpha, a)
        c = _rand(rng, (n, n), dtype)
        c = np.asfortranarray(c + c.conj().T)
        bound = 8 * k * eps * (abs(alpha) * k * np.abs(a).max() * np.abs(b if two else a).max() * (2 if two else 1)
                               + 0.5 * np.abs(c).max())
        what = f"{prefix}{fam} n={n} k={k} trans={tr} lower={lower}"
        got, ref = f(*args, trans=tr, lower=lower), g(*args, trans=tr, lower=lower)
        _check(got, ref.astype(np.complex128), bound, what)
        assert not np.signbit(np.diagonal(got).imag).any(), what
        c_keep = c.copy()
        got = f(*args, 0.5, c, trans=tr, lower=lower)
        ref = g(*args, 0.5, c.copy(order="F"), trans=tr, lower=lower)
        _check(got, ref.astype(np.complex128), bound, what + " beta 0.5")
        np.testing.assert_array_equal(c, c_keep)  # not overwritten: the caller's c is left as it was
        other = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
        np.testing.assert_array_equal(got[other], c_keep[other])
        assert not np.signbit(np.diagonal(got).imag).any(), what + " beta 0.5"


_DAEMON_AT_EXIT = (
    "import threading, time, numpy as np\n"
    "from tileblas import blas as tb\n"
    "from tileblas.kernels import _openblas\n"
    "a = np.asfortranarray(np.random.rand(1500, 1500))\n"
    "def kernel_layer():\n"
    "    while True:\n"
    "        c = np.zeros((1500, 1500), order='F')\n"
    "        _openblas.gemm(1.0, a, a, 0.0, c, lib=_openblas.get_library(2))\n"
    "def drop_in():\n"
    "    while True:\n"
    "        tb.dgemm(1.0, a, a)\n"
    "threading.Thread(target=kernel_layer, daemon=True).start()\n"
    "threading.Thread(target=drop_in, daemon=True).start()\n"
    "time.sleep(0.3)\n"
)


def test_the_interpreter_exits_cleanly_with_a_daemon_thread_inside_a_call():
    """At exit the libraries' destructors free OpenBLAS's buffers: the exit first waits for calls in
    flight and lets no new one start (a daemon thread inside a parallel dgemm ended the process with
    SIGSEGV in most runs)."""
    codes = []
    for _ in range(6):
        out = subprocess.run([sys.executable, "-c", _DAEMON_AT_EXIT], capture_output=True, text=True, timeout=120)
        codes.append(out.returncode)
    assert codes == [0] * 6, codes


def test_quiesce_waits_for_the_calls_in_flight_and_checks_its_argument():
    with pytest.raises(ValueError, match=r"timeout_s is -1"):
        _pool.quiesce(-1)
    code = (
        "import threading, time, numpy as np\n"
        "from tileblas.kernels import _openblas, _pool\n"
        "a = np.asfortranarray(np.random.rand(1200, 1200))\n"
        "c = np.zeros((1200, 1200), order='F')\n"
        "t = threading.Thread(target=_openblas.gemm, args=(1.0, a, a, 0.0, c), kwargs={'lib': _openblas.get_library(2)})\n"
        "t.start()\n"
        "while _pool.in_flight() == 0 and t.is_alive(): time.sleep(0.001)\n"
        "assert _pool.quiesce(60.0) is True\n"
        "assert _pool.in_flight() == 0 and not t.is_alive() or t.join(5) is None\n"
        "assert np.abs(c - a @ a).max() <= 4 * 1200 * 2.3e-16 * (np.abs(a) @ np.abs(a)).max()\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _forks_during_parallel_calls(forks, n, child_n, timeout):
    """A fresh interpreter in which another thread makes parallel gemm calls of order ``n`` on the
    2-thread instance and the main thread forks ``forks`` times, each while that thread is inside a call
    (the pool's in-flight count); each child makes its own parallel call of order ``child_n`` and exits 0
    where its product is right (a child not done in 60 s is killed and counts as bad).  Its output must
    be ``bad 0``."""
    code = (
        "import os, threading, time, warnings, numpy as np\n"
        "from tileblas.kernels import _openblas, _pool\n"
        "lib = _openblas.get_library(2)\n"
        f"a = np.asfortranarray(np.random.rand({n}, {n}))\n"
        "stop = False\n"
        "def work():\n"
        "    while not stop:\n"
        f"        c = np.zeros(({n}, {n}), order='F'); _openblas.gemm(1.0, a, a, 0.0, c, lib=lib)\n"
        "t = threading.Thread(target=work); t.start()\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "bad = 0\n"
        f"for _ in range({forks}):\n"
        "    while _pool.in_flight() == 0: time.sleep(0.0002)\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        f"        b = np.asfortranarray(np.random.rand({child_n}, {child_n})); c = np.zeros(({child_n}, {child_n}), order='F')\n"
        "        _openblas.gemm(1.0, b, b, 0.0, c, lib=lib)\n"
        "        os._exit(0 if np.abs(c - b @ b).max() < 1e-9 else 3)\n"
        "    end = time.monotonic() + 60\n"
        "    while True:\n"
        "        done, status = os.waitpid(pid, os.WNOHANG)\n"
        "        if done: break\n"
        "        if time.monotonic() > end:\n"
        "            os.kill(pid, 9); os.waitpid(pid, 0); status = 9 << 8; break\n"
        "        time.sleep(0.001)\n"
        "    bad += os.waitstatus_to_exitcode(status) != 0\n"
        "stop = True; t.join()\n"
        "print('bad', bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "bad 0", out.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_while_another_thread_is_inside_a_parallel_call():
    """fork() waits for the calls in flight: a child forked while another thread is inside a parallel
    gemm (OpenBLAS holds a lock through it) runs its own parallel calls."""
    _forks_during_parallel_calls(3, 1500, 400, timeout=300)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_sixty_forks_while_another_thread_makes_parallel_calls_all_finish():
    """The pool's fork handlers run before OpenBLAS's (registered again at each attach): with them
    registered only once, before the instance's OpenBLAS registered its own, the parent hung in
    OpenBLAS's handler within 400 forks like these (joining a server thread that never woke); each fork
    here comes while another thread is inside a parallel call, and every child computes its product."""
    _forks_during_parallel_calls(60, 600, 200, timeout=240)


def test_a_split_call_wakes_sleeping_workers_so_they_take_parts(lib, settings):
    """A split call wakes the workers that sleep: a rule that let short calls take only the workers awake
    left them asleep for good in a loop of short calls (no call ever woke one), and every part ran on the
    calling thread.  Whichever thread runs a part, the same bits."""
    from tileblas import blas as tb
    from tileblas.blas import _fastpath

    rng = np.random.default_rng(11)
    small = _rand(rng, (96, 96), np.float64)
    tb.dgemm(1.0, small, small)  # the C path configured
    if _fastpath.decide(tb.dgemm, 1.0, small, small)["path"] != "split":
        pytest.skip("no split here (one thread)")
    _pool.configure(spin_ns=0, yield_ns=0)  # workers sleep right after their work
    ref = tb.dgemm(1.0, small, small)
    s0 = _pool.stats()
    for _ in range(20):
        time.sleep(0.002)
        assert tb.dgemm(1.0, small, small).tobytes() == ref.tobytes()
    s1 = _pool.stats()
    assert s1["wakes"] > s0["wakes"] and s1["unwoken"] == s0["unwoken"]
    assert s1["parts"] - s0["parts"] >= 40


def _pool_threads():
    """The thread ids of the pool's workers (named tileblas-pool)."""
    return _threads_named("tileblas-pool")


def _this_cpu():
    """The CPU the calling thread last ran on (/proc/thread-self/stat, field 39)."""
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="CPU masks: Linux with two CPUs or more")
def test_a_sleeping_worker_keeps_off_the_calling_threads_cpu(lib, settings):
    """A worker about to sleep leaves the CPU of its slot's last calling thread out of its CPU mask, so that
    the kernel wakes it on another CPU rather than queued behind the thread that woke it; awake, it has
    its mask back.  Nothing else of its mask changes."""
    slot, allowed = lib.pool_slot, os.sched_getaffinity(0)
    _pool.configure(spin_ns=0, yield_ns=0)  # workers sleep right after their work
    for _ in range(50):  # a call whose calling thread stayed on one CPU
        cpu = _this_cpu()
        _pool.run_parts(slot, 4, spin_ns=20_000)
        if _this_cpu() == cpu:
            break
    else:
        pytest.skip("the calling thread kept moving between CPUs")
    assert _wait_for(lambda: _pool.stats()["spinning"] == 0, timeout=2.0)
    masks = [os.sched_getaffinity(t) for t in _pool_threads()]
    assert masks and all(m == allowed or (len(allowed - m) == 1 and m < allowed) for m in masks), masks
    assert _wait_for(lambda: sum(os.sched_getaffinity(t) == allowed - {cpu} for t in _pool_threads())
                     >= lib.threads - 1, timeout=2.0)
    # woken and spinning: the whole mask again
    _pool.configure(spin_ns=500_000_000)
    _pool.run_parts(slot, 4, spin_ns=20_000)
    assert _wait_for(lambda: sum(os.sched_getaffinity(t) == allowed for t in _pool_threads()) >= lib.threads - 1,
                     timeout=2.0)
    _pool.configure(spin_ns=0, yield_ns=0)
    assert _wait_for(lambda: _pool.stats()["spinning"] == 0, timeout=3.0)


def test_a_calling_thread_that_waits_long_sleeps_until_told(lib, settings):
    """A calling thread whose parts are done waits for a worker's: it spins spin_ns, then sleeps until the
    worker finishing the last part tells it (its CPU free meanwhile); every part runs once, the worker's
    part on the worker."""
    slot = lib.pool_slot
    _pool.configure(spin_ns=100_000, worker_delay_ns=5_000_000)  # the worker claims its part 5 ms late
    before = _pool.stats()["waits_asleep"]
    got = _pool.run_parts(slot, 2, spin_ns=20_000_000)  # parts of 20 ms: the caller's ends about 5 ms first
    assert sorted(i for i, _ in got) == [0, 1]
    if not any(w for _, w in got):
        pytest.skip("the worker did not start within 20 ms here (a loaded machine): the caller ran both parts")
    assert _pool.stats()["waits_asleep"] > before
    # the pool goes on as before: short batches with the default spin, and a worker that claims at once
    _pool.configure(spin_ns=200_000, worker_delay_ns=0)
    for _ in range(20):
        assert sorted(i for i, _ in _pool.run_parts(slot, 4, spin_ns=50_000)) == [0, 1, 2, 3]


def test_workers_falling_asleep_as_work_comes_never_miss_it():
    """A worker that falls asleep just as a job is posted to it is woken, by the calling thread or its
    watcher: thousands of OpenBLAS parallel calls (whose jobs wait for one another, so a missed wake would
    hang the call), each after a pause around the end of the workers' spin, finish."""
    code = (
        "import random, time, numpy as np\n"
        "from tileblas.kernels import _openblas, _pool\n"
        "lib = _openblas.get_library(2)\n"
        "assert lib.pool_slot is not None\n"
        "rng = random.Random(5)\n"
        "a = np.asfortranarray(np.random.rand(160, 160)); c = np.zeros((160, 160), order='F')\n"
        "before = _pool.stats()['calls']\n"
        "for watch in (0, 1_000_000_000):\n"
        "    _pool.configure(spin_ns=20_000, watch_ns=watch)\n"
        "    for _ in range(1500):\n"
        "        end = time.perf_counter() + rng.uniform(0, 60e-6)\n"
        "        while time.perf_counter() < end: pass\n"
        "        _openblas.gemm(1.0, a, a, 0.0, c, lib=lib)\n"
        "print('calls', _pool.stats()['calls'] - before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) >= 3000  # each call was a parallel one, on the pool
