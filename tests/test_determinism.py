"""Same call, same bits: a tileblas.blas Level-3 call gives bit-identical results whatever state the thread
pool is in (workers hot, asleep, slow to start, the pool busy with another thread's call, a busy process
beside it, right after SciPy's calls), in a forked child and in a new process, for every family and
precision, both layouts, and sizes that take each path (one call on the one-thread instance, split parts,
OpenBLAS's own threads, the syrk gemm route); and the tile runtime's calls are bit-identical whichever
worker runs a tile (docs/guide/drop-in.md, "Same call, same bits"; how:
docs/developer/drop-in-internals.md, "Same call, same bits: how")."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.linalg.blas as sb

from tileblas import Runtime
from tileblas import blas as tb
from tileblas.kernels import _openblas, _pool

FAMILIES = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")
PREFIXES = {"gemm": "sdcz", "symm": "sdcz", "hemm": "cz", "syrk": "sdcz", "herk": "cz", "syr2k": "sdcz",
            "her2k": "cz", "trmm": "sdcz", "trsm": "sdcz"}
DTYPE = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
#: orders that take each path on 2 threads: the one-thread instance or one small call (24), parts on the
#: pool (160), OpenBLAS's own threads for the largest (gemm of order 720 is above the split's range)
SIZES = (24, 160)


def _operand(rng, shape, dtype, order):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x.astype(dtype), order=order)


def _case(name: str, n: int, order: str):
    """The arguments of one call of routine ``name`` of order n (a new random set, fixed by the name)."""
    seed = int.from_bytes(hashlib.sha256(f"{name}{n}{order}".encode()).digest()[:4], "little")
    rng = np.random.default_rng(seed)
    dt = DTYPE[name[0]]
    fam = name[1:]
    k = max(8, n // 2)
    if fam == "gemm":
        return (1.5, _operand(rng, (n, k), dt, order), _operand(rng, (k, n), dt, order)), {}
    if fam in ("symm", "hemm"):
        return (1.5, _operand(rng, (n, n), dt, order), _operand(rng, (n, k), dt, order)), {"lower": 1}
    if fam in ("syrk", "herk"):
        return (1.5, _operand(rng, (n, k), dt, order)), {}
    if fam in ("syr2k", "her2k"):
        return (1.5, _operand(rng, (n, k), dt, order), _operand(rng, (n, k), dt, order)), {"lower": 1}
    a = _operand(rng, (n, n), dt, order)
    a = np.asarray(np.tril(a) + n * np.eye(n, dtype=dt), order=order)  # well conditioned
    return (1.5, a, _operand(rng, (n, k), dt, order)), {"lower": 1}


def _cases():
    out = []
    for fam in FAMILIES:
        for p in PREFIXES[fam]:
            for n in SIZES:
                for order in ("F", "C"):
                    out.append((p + fam, n, order))
    out += [("dgemm", 720, "F"), ("zgemm", 400, "C"), ("dsyr2k", 400, "F"), ("zher2k", 300, "F"),
            ("dsyrk", 64, "F"), ("dsyrk", 96, "F"), ("dsyr2k", 64, "F"),  # the gemm route of small real syrk
            ("zher2k", 48, "F"), ("zsyr2k", 48, "C"), ("cher2k", 64, "F"), ("csyr2k", 64, "C")]  # 2k strips
    return out


CASES = _cases()


def _digest(name, n, order):
    args, kwargs = _case(name, n, order)
    return hashlib.sha256(np.ascontiguousarray(getattr(tb, name)(*args, **kwargs)).tobytes()).hexdigest()


def _digests():
    return {c: _digest(*c) for c in CASES}


@pytest.fixture(scope="module")
def reference():
    return _digests()


@pytest.fixture
def settings():
    saved = _pool.configure()
    yield
    _pool.configure(**saved)


def _slot():
    lib = _openblas.get_library(2)
    return lib.pool_slot


def _differ(reference, got):
    return [c for c in reference if reference[c] != got[c]]


def test_the_reference_is_right(reference):
    """The digested results are BLAS's: each within its error bound of SciPy's."""
    for name, n, order in CASES:
        args, kwargs = _case(name, n, order)
        got, ref = getattr(tb, name)(*args, **kwargs), getattr(sb, name)(*args, **kwargs)
        eps = np.finfo(got.dtype).eps
        scale = max(float(np.max(np.abs(ref))), 1.0)
        assert np.max(np.abs(got - ref)) <= 8 * n * eps * scale * 4, (name, n, order)


def test_repeated_calls_with_idle_gaps_give_one_result(reference, settings):
    for gap in (0.0, 0.002, 0.05):
        time.sleep(gap)
        got = _digests()
        assert not _differ(reference, got), gap


def test_hot_and_sleeping_workers_give_the_same_bits(reference, settings):
    _pool.configure(spin_ns=1_000_000_000)  # hot: workers spin between calls
    assert not _differ(reference, _digests())
    for watch in (0, 1_000_000_000):  # asleep: every call wakes them, itself or through their watchers
        _pool.configure(spin_ns=0, yield_ns=0, watch_ns=watch)
        got = {}
        for c in CASES:
            time.sleep(0.001)
            got[c] = _digest(*c)
        assert not _differ(reference, got), watch
    _pool.configure(spin_ns=0, yield_ns=1_000_000_000)  # awake, yielding their CPU (TILEBLAS_POOL_WAIT)
    got = {}
    for c in CASES:
        time.sleep(0.001)
        got[c] = _digest(*c)
    assert not _differ(reference, got)


def test_slow_workers_and_a_busy_pool_give_the_same_bits(reference, settings):
    if _slot() is None:
        pytest.skip("no pool here: every call runs on the calling thread already")
    _pool.configure(worker_delay_ns=2_000_000)  # workers 2 ms late: the calling thread runs most parts
    before = _pool.stats()
    assert not _differ(reference, _digests())
    assert _pool.stats()["caller_parts"] > before["caller_parts"]
    _pool.configure(worker_delay_ns=0)
    # another thread's call holds the pool for a while: meanwhile split calls run every part on the calling
    # thread (an OpenBLAS-threaded call waits for the pool, as it waits for another call's jobs)
    held, release = threading.Event(), threading.Event()

    def holder():
        _pool.hold(_slot(), True)
        held.set()
        release.wait(5.0)
        _pool.hold(_slot(), False)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(10)
    before = _pool.stats()
    try:
        got = {c: _digest(*c) for c in CASES if c[1] <= 160}
    finally:
        release.set()
        t.join(30)
    assert _pool.stats()["alone"] > before["alone"]
    assert not _differ({c: reference[c] for c in got}, got)
    assert not _differ(reference, _digests())


def test_a_busy_machine_and_scipys_threads_give_the_same_bits(reference, settings):
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        assert not _differ(reference, _digests())
    finally:
        burner.kill()
        burner.wait()
    got = {}
    x = np.asfortranarray(np.random.default_rng(0).standard_normal((300, 300)))
    for c in CASES:
        sb.dgemm(1.0, x, x)  # SciPy's threads spin beside the call
        got[c] = _digest(*c)
    assert not _differ(reference, got)


def test_threads_calling_at_once_give_the_same_bits(reference):
    outs = [dict() for _ in range(3)]
    threads = [threading.Thread(target=lambda o=o: o.update(_digests())) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    for o in outs:
        assert not _differ(reference, o)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_gives_the_same_bits(reference):
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads running
        pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(r)
            got = _digests()
            os.write(w, ("\n".join(f"{a}|{b}|{c}|{got[(a, b, c)]}" for a, b, c in CASES)).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    got = {}
    for line in b"".join(chunks).decode().splitlines():
        a, b, c, d = line.split("|")
        got[(a, int(b), c)] = d
    assert set(got) == set(reference)
    assert not _differ(reference, got)


def test_a_new_process_gives_the_same_bits(reference):
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import test_determinism as t\n"
            "for c, d in t._digests().items(): print(c[0], c[1], c[2], d)\n") % os.path.dirname(__file__)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = {}
    for line in out.stdout.splitlines():
        a, b, c, d = line.split()
        got[(a, int(b), c)] = d
    assert set(got) == set(reference)
    assert not _differ(reference, got)


def test_the_first_call_gives_the_bits_of_the_calls_after_it(reference):
    """The first call after the default runtime is made (that of a process, or after it was replaced)
    takes the path of the calls after it."""
    from tileblas.runtime import _runtime

    got = {}
    for c in CASES:
        _runtime.set_runtime(None)  # the next call makes the default runtime, as a process's first does
        got[c] = _digest(*c)
    assert not _differ(reference, got)


def test_the_first_call_of_a_process_gives_the_bits_of_the_calls_after_it():
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import test_determinism as t\n"
            "first = t._digest('dsyr2k', 160, 'F')\n"
            "print(first == t._digest('dsyr2k', 160, 'F'))\n") % os.path.dirname(__file__)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True"]


def test_converted_operands_give_the_bits_of_their_fortran_ordered_copies():
    """Lists, operands of another dtype and byte-swapped ones give the bits of their Fortran-ordered copies
    in the routine's dtype, whether the C path converts them itself (up to its conversion limit) or
    passes them to the Python implementation, which converts them and hands them back."""
    differ = []
    for c in CASES:
        args, kwargs = _case(*c)
        f = getattr(tb, c[0])
        dt = DTYPE[c[0][0]]
        other = {np.float32: np.float64, np.float64: np.float32, np.complex64: np.complex128,
                 np.complex128: np.complex64}[dt]
        forms = {"list": lambda x: x.tolist(), "other dtype": lambda x: x.astype(other),
                 "byte-swapped": lambda x: x.astype(x.dtype.newbyteorder())}
        for form, make in forms.items():
            given = tuple(make(x) if isinstance(x, np.ndarray) else x for x in args)
            copies = tuple(np.asfortranarray(np.asarray(x).astype(dt)) if isinstance(x, (list, np.ndarray)) else x
                           for x in given)
            if not np.array_equal(f(*given, **kwargs), f(*copies, **kwargs)):
                differ.append((*c, form))
    assert not differ


def test_runtime_tiles_give_the_same_bits_whichever_worker_runs_them():
    """On host workers a tiled call's tiles and its split-k reduction order are fixed: the threaded
    scheduler (any worker may take or steal a tile), the synchronous one and a busy machine agree."""
    rng = np.random.default_rng(5)
    a = np.asfortranarray(rng.standard_normal((300, 700)))
    b = np.asfortranarray(rng.standard_normal((700, 200)))

    def run(**kw):
        c = np.zeros((300, 200), order="F")
        with Runtime(devices=2, **kw) as rt:
            rt.gemm(1.0, a, b, 0.0, c, tile_size=64)
            assert rt.last_profile().tasks > 1
        return c.tobytes()

    ref = run(sync=True)
    for _ in range(3):
        assert run() == ref
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert run() == ref
    finally:
        burner.kill()
        burner.wait()
