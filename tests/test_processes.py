"""Processes and signals: a Runtime and the asynchronous API across fork(), and SIGINT during their waits.

Each test runs a script in a process of its own (its own session, so that a fork child it leaves behind
goes with it), bounded by a timeout after which the whole process group is killed: a hang fails the test
instead of stalling the suite.  The scripts print what they saw; the tests read it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")

#: seconds a script may run before its process group is killed (a hang)
LIMIT = 60.0

#: prelude of every script: a long tiled call on the Runtime rt (about 5 s on this machine, whatever it is)
_LONG = """
import numpy as np, signal, time
# Python's own SIGINT handler, even where this process was started with SIGINT ignored (a background job of
# a non-interactive shell ignores it, and the ignoring passes to every process it starts)
signal.signal(signal.SIGINT, signal.default_int_handler)
def long_operands(seconds=5.0, rt=None):
    \"\"\"Operands of a gemm that takes about ``seconds`` on ``rt`` (a Runtime; else NumPy's rate).\"\"\"
    m = 1024
    a = np.asfortranarray(np.random.default_rng(0).random((m, m)))
    c = np.zeros((m, m), order="F")
    run = (lambda: rt.gemm(1.0, a, a, 0.0, c)) if rt is not None else (lambda: a @ a)
    run()
    t = time.perf_counter(); run(); rate = 2 * m**3 / max(time.perf_counter() - t, 1e-4)
    n = int(min(6000, max(1500, (seconds * rate / 2) ** (1 / 3))))
    rng = np.random.default_rng(1)
    return (np.asfortranarray(rng.random((n, n))), np.asfortranarray(rng.random((n, n))),
            np.zeros((n, n), order="F"))
"""


def _long(script: str) -> str:
    """``script`` after the prelude that defines ``long_operands``."""
    return _LONG + textwrap.dedent(script)


def _run(script: str, *, interrupt_after: str | None = None, delay: float = 0.5,
         limit: float = LIMIT) -> tuple[int, str, str]:
    """Run ``script`` with this Python; ``interrupt_after``: send SIGINT ``delay`` s after the script
    prints that line.  Returns (exit status, stdout, stderr); a run past ``limit`` is killed and fails."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    out_lines: list[str] = []
    deadline = time.monotonic() + limit
    try:
        if interrupt_after is not None:
            for line in proc.stdout:  # type: ignore[union-attr]
                out_lines.append(line)
                if line.strip() == interrupt_after:
                    time.sleep(delay)
                    proc.send_signal(signal.SIGINT)
                    break
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(proc.args, limit)
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the script hung (killed after {limit:.0f} s)\nstdout:\n{''.join(out_lines) + out}\n"
                    f"stderr:\n{err}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # a fork child left behind
        except ProcessLookupError:
            pass
    return proc.returncode, "".join(out_lines) + out, err


def _child_ok(out: str, err: str, rc: int) -> None:
    assert rc == 0, f"rc={rc}\nstdout:\n{out}\nstderr:\n{err}"
    assert "child ok" in out, f"stdout:\n{out}\nstderr:\n{err}"


# ------------------------------------------------------------------------------------------ fork
def test_a_runtime_used_in_the_parent_works_in_a_fork_child():
    rc, out, err = _run("""
        import os, numpy as np, tileblas
        rt = tileblas.Runtime(devices=2, tile_size=64)
        rng = np.random.default_rng(0)
        a, b = (np.asfortranarray(rng.random((300, 300))) for _ in range(2))
        c = np.zeros((300, 300), order="F")
        rt.gemm(1.0, a, b, 0.0, c)
        assert np.allclose(c, a @ b)
        pid = os.fork()
        if pid == 0:
            c2 = np.zeros((300, 300), order="F")
            rt.gemm(1.0, a, b, 0.0, c2)
            with rt.__class__(devices=2, tile_size=64) as other:  # and a new one
                c3 = np.zeros((300, 300), order="F")
                other.gemm(1.0, a, b, 0.0, c3)
            print("child ok" if np.allclose(c2, a @ b) and np.allclose(c3, a @ b) else "child WRONG", flush=True)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        c[:] = 0
        rt.gemm(1.0, a, b, 0.0, c)  # the parent's runtime still works
        assert np.allclose(c, a @ b) and st == 0, st
        rt.close()
    """)
    _child_ok(out, err, rc)


def test_a_staged_runtime_used_in_the_parent_works_in_a_fork_child():
    rc, out, err = _run("""
        import os, numpy as np, tileblas
        rt = tileblas.Runtime(devices=2, host_memory=64 << 20, tile_size=64)  # tile memory, copies, streams
        rng = np.random.default_rng(0)
        a = np.asfortranarray(rng.random((300, 300)))
        c = np.zeros((300, 300), order="F")
        rt.gemm(1.0, a, a, 0.0, c)
        pid = os.fork()
        if pid == 0:
            c2 = np.zeros((300, 300), order="F")
            rt.gemm(1.0, a, a, 0.0, c2)
            print("child ok" if np.allclose(c2, a @ a) else "child WRONG", flush=True)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        assert st == 0 and np.allclose(c, a @ a)
        rt.close()
    """)
    _child_ok(out, err, rc)


def test_a_runtime_and_the_default_runtime_work_in_multiprocessing_fork_workers():
    rc, out, err = _run("""
        import multiprocessing as mp, numpy as np, tileblas, tileblas.blas as tb
        rt = tileblas.Runtime(devices=2, tile_size=64)
        rng = np.random.default_rng(0)
        A = np.asfortranarray(rng.random((256, 256)))
        c = np.zeros((256, 256), order="F")
        rt.gemm(1.0, A, A, 0.0, c)
        tileblas.set_runtime(tileblas.Runtime(devices=2, tile_size=64))  # the default: the drop-in's
        tb.dgemm(1.0, A, A)

        def work(k):
            c = np.zeros((256, 256), order="F")
            rt.gemm(float(k), A, A, 0.0, c)
            d = tb.dgemm(float(k), A, A)
            return bool(np.allclose(c, k * (A @ A)) and np.allclose(d, k * (A @ A))
                        and tileblas.get_runtime().last_profile().path == "tiled")

        with mp.get_context("fork").Pool(2) as pool:
            res = pool.map(work, range(1, 7))
        print("child ok" if all(res) else f"child WRONG {res}", flush=True)
    """)
    _child_ok(out, err, rc)


def test_fork_while_a_runtime_call_is_in_flight_gives_the_child_a_clean_runtime():
    rc, out, err = _run(_long("""
        import os, threading, tileblas
        rt = tileblas.Runtime(devices=2, tile_size=128)
        a, b, c = long_operands(3.0, rt)
        done = []
        t = threading.Thread(target=lambda: (rt.gemm(1.0, a, b, 0.0, c), done.append(1)))
        t.start()
        time.sleep(0.5)  # the call is in flight in the workers
        pid = os.fork()
        if pid == 0:
            s = np.asfortranarray(a[:300, :300])
            c2 = np.zeros((300, 300), order="F")
            rt.gemm(1.0, s, s, 0.0, c2)
            print("child ok" if np.allclose(c2, s @ s) else "child WRONG", flush=True)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        t.join()
        assert done and st == 0, (done, st)
        assert np.allclose(c[:50, :50], a[:50] @ b[:, :50])  # the parent's call finished
    """))
    _child_ok(out, err, rc)


def test_the_async_api_used_in_the_parent_works_in_a_fork_child():
    rc, out, err = _run("""
        import os, numpy as np
        from tileblas import asyncapi as aa
        rng = np.random.default_rng(0)
        A = rng.random((200, 200))
        a = aa.handle(A)
        f = aa.gemm(1.0, a, a, 0.0, aa.empty((200, 200)))
        assert np.allclose(f.result().get(), A @ A)
        ex = aa.Executor(calibrate=False)
        g = aa.gemm(2.0, ex.handle(A), ex.handle(A), 0.0, ex.empty((200, 200)))
        assert np.allclose(g.result().get(), 2 * A @ A)
        dem = aa.Executor(policy="demand", workers=2)
        h = aa.gemm(3.0, dem.handle(A), dem.handle(A), 0.0, dem.empty((200, 200)))
        assert np.allclose(h.result().get(), 3 * A @ A)
        pid = os.fork()
        if pid == 0:
            ok = True
            for k, e in ((1.0, None), (2.0, ex), (3.0, dem)):
                kw = {} if e is None else {"executor": e}
                x = aa.handle(A, **kw)
                r = aa.gemm(k, x, x, 0.0, aa.empty((200, 200), **kw)).result(timeout=60).get()
                ok = ok and np.allclose(r, k * A @ A)
                h1 = aa.empty((200, 200), **kw)  # a chain of calls
                aa.gemm(1.0, x, x, 0.0, h1)
                t = aa.gemm(1.0, h1, x, 0.0, aa.empty((200, 200), **kw))
                ok = ok and np.allclose(t.result(timeout=60).get(), A @ A @ A)
            ok = ok and np.allclose(aa.Matrix(A) @ aa.Matrix(A), A @ A)
            ex.close(); dem.close()
            print("child ok" if ok else "child WRONG", flush=True)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        assert st == 0, st
        assert np.allclose(aa.gemm(1.0, a, a, 0.0, aa.empty((200, 200))).result().get(), A @ A)
        ex.close(); dem.close()
    """)
    _child_ok(out, err, rc)


def test_async_calls_in_flight_at_fork_fail_at_once_in_the_child_and_finish_in_the_parent():
    rc, out, err = _run(_long("""
        import os
        from tileblas import asyncapi as aa
        a, b, c = long_operands(3.0)
        ex = aa.Executor(calibrate=False)
        ha, hb, hc = ex.handle(a), ex.handle(b), ex.empty(c.shape)
        f = aa.gemm(1.0, ha, hb, 0.0, hc)           # running at fork
        g = aa.gemm(1.0, hc, hb, 0.0, ex.empty(c.shape))  # waiting for it
        time.sleep(0.5)
        pid = os.fork()
        if pid == 0:
            t0 = time.perf_counter()
            msgs = []
            for fut in (f, g):
                try:
                    fut.result(timeout=30)
                    msgs.append("no error")
                except Exception as e:
                    msgs.append(f"{type(e).__name__}: {e}")
            waited = time.perf_counter() - t0
            x = ex.handle(a[:100, :100])
            r = aa.gemm(1.0, x, x, 0.0, ex.empty((100, 100))).result(timeout=30).get()
            ok = np.allclose(r, a[:100, :100] @ a[:100, :100]) and waited < 1.0 and all("fork" in m for m in msgs)
            print("child ok" if ok else f"child WRONG {waited:.2f} s {msgs}", flush=True)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        assert st == 0, st
        assert np.allclose(f.result().get()[:50, :50], a[:50] @ b[:, :50])  # the parent's calls finish
        g.result()
        ex.close()
    """))
    _child_ok(out, err, rc)


# ------------------------------------------------------------------------------------------ SIGINT
def test_sigint_during_a_long_tiled_call_raises_keyboardinterrupt_promptly_and_the_runtime_goes_on():
    rc, out, err = _run(_long("""
        import signal, tileblas
        rt = tileblas.Runtime(devices=2, tile_size=128)
        a, b, c = long_operands(6.0, rt)
        got = {}
        def on_int(signum, frame):
            got["t"] = time.perf_counter()
            raise KeyboardInterrupt
        signal.signal(signal.SIGINT, on_int)
        print("started", flush=True)
        t0 = time.perf_counter()
        try:
            rt.gemm(1.0, a, b, 0.0, c)
            print("finished before the interrupt", flush=True)
        except KeyboardInterrupt as e:
            late = time.perf_counter() - got["t"]
            print(f"interrupted after {time.perf_counter() - t0:.2f} s, raised {late:.3f} s after the signal",
                  flush=True)
            print("late" if late > 1.0 else "prompt", flush=True)
            notes = getattr(e, "__notes__", [])
            print("cancel-note" if any("cancelled" in n for n in notes) else f"no cancel-note {notes}", flush=True)
            snap = c.copy()
            time.sleep(0.5)
            print("still written" if not np.array_equal(snap, c) else "left alone", flush=True)
        s = np.asfortranarray(a[:400, :400])
        c2 = np.zeros((400, 400), order="F")
        t1 = time.perf_counter()
        rt.gemm(1.0, s, s, 0.0, c2)
        dt = time.perf_counter() - t1
        print("usable" if np.allclose(c2, s @ s) and dt < 2.0 else f"NOT usable ({dt:.2f} s)", flush=True)
    """), interrupt_after="started", delay=1.0)
    assert rc == 0, (out, err)
    for word in ("interrupted", "prompt", "cancel-note", "left alone", "usable"):
        assert f"\n{word}" in "\n" + out, (word, out, err)


def test_sigint_during_an_async_wait_raises_keyboardinterrupt_promptly_and_the_executor_goes_on():
    rc, out, err = _run(_long("""
        from tileblas import asyncapi as aa
        a, b, c = long_operands(6.0)
        ex = aa.Executor(calibrate=False)
        f = aa.gemm(1.0, ex.handle(a), ex.handle(b), 0.0, ex.empty(c.shape))
        print("started", flush=True)
        t0 = time.perf_counter()
        try:
            f.result()
            print("finished before the interrupt", flush=True)
        except KeyboardInterrupt:
            print(f"interrupted after {time.perf_counter() - t0:.2f} s", flush=True)
        s = a[:200, :200]
        r = aa.gemm(1.0, ex.handle(s), ex.handle(s), 0.0, ex.empty((200, 200)))
        print("usable" if np.allclose(r.result(timeout=60).get(), s @ s) else "NOT usable", flush=True)
        f.cancel()
        ex.close(timeout=60)
    """), interrupt_after="started", delay=1.0)
    assert rc == 0, (out, err)
    assert "interrupted" in out and "usable" in out, (out, err)
    secs = float(out.split("interrupted after ")[1].split(" s")[0])
    assert secs < 2.5, out  # the interrupt came 1 s after "started"


@pytest.mark.parametrize("where", ["runtime", "async"])
def test_an_uncaught_sigint_during_a_long_call_ends_the_process_promptly(where):
    t0 = time.monotonic()
    call = ("rt.gemm(1.0, a, b, 0.0, c)" if where == "runtime" else
            "aa.gemm(1.0, aa.handle(a), aa.handle(b), 0.0, aa.empty(c.shape)).result()")
    rc, out, err = _run(_long(f"""
        import tileblas
        from tileblas import asyncapi as aa
        rt = tileblas.Runtime(devices=2, tile_size=128)
        a, b, c = long_operands(20.0, rt)
        print("started", flush=True)
        {call}
        print("finished before the interrupt", flush=True)
    """), interrupt_after="started", delay=1.0, limit=60.0)
    assert "KeyboardInterrupt" in err and "finished" not in out, (rc, out, err)
    assert rc != 0
    assert time.monotonic() - t0 < 40.0


def test_rblas_compute_mode_works_in_a_fork_child():
    rc, out, err = _run("""
        import os, numpy as np
        import tileblas.rblas as rb
        rng = np.random.default_rng(0)
        x, y = rng.random(2_000_000), rng.random(2_000_000)
        y0 = y.copy()
        rb.fdaxpy(x, y, a=2.0, mode="compute")  # in parts on the thread pool
        rb.rdaxpy(x, y, a=2.0)
        pid = os.fork()
        if pid == 0:
            with rb.Tape(mode="compute") as tape:
                rb.fdaxpy(x, y, a=3.0)
                rb.fdscal(0.5, y)
            tape.undo()
            print("child ok" if np.allclose(y, y0) else "child WRONG", flush=True)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        assert st == 0 and np.allclose(y, y0)
    """)
    _child_ok(out, err, rc)
