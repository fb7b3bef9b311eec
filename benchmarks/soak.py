"""Soak test: minutes of mixed random calls from several threads, every result checked.

Four worker threads (``--threads``) draw, call after call, one of these kinds of work:

* ``blas1`` / ``blas2`` / ``blas3``: tileblas.blas routines (default runtime for Level 3);
* ``runtime``: a Level-3 call with a given tile size on one of several shared Runtime objects, which the
  ``churn`` kind closes and replaces now and then -- possibly while another thread is mid-call on it;
* ``churn``: a Runtime created, used once, then closed or just dropped;
* ``fault``: a tiled call on a Runtime whose device kernels raise at random (an injected fault);
* ``async``: asyncapi handles and Matrix operators, futures waited with ``get(timeout=...)``, calls
  cancelled right after submission, and injected failing operations whose dependents must fail;
* ``rblas``: a forward/reverse pair (checkpoint or compute mode); forward checked, reverse must restore.

Every result is compared with a NumPy reference within an error bound (a small multiple of
``k * eps * |alpha| max|A| max|B| + |beta| max|C|``); each error raised is classified as expected (the
injected fault, a cancellation, a call on a Runtime that was closed) or not.  A sampler records the thread
count and the RSS every two seconds; a watchdog dumps every thread's stack and exits with status 3 when a
worker has made no progress for ``--watchdog`` seconds (a hang).

Exit status: 0 when there were no wrong results, no unexpected errors, no hang and no thread growth;
1 otherwise.  A summary is printed and written as JSON (``--json``).

    python benchmarks/soak.py --minutes 30 --json /tmp/soak.json
    python benchmarks/soak.py --seconds 60 --kinds runtime,churn     # only some kinds of work
"""

from __future__ import annotations

import argparse
import concurrent.futures
import faulthandler
import gc
import json
import os
import random
import sys
import threading
import time
import traceback
from collections import defaultdict

import numpy as np

import tileblas
import tileblas.blas as tb
from tileblas import asyncapi as aa
from tileblas import rblas as rb
from tileblas.devices.cpu import CPUDevice


class InjectedFault(RuntimeError):
    """Raised by a device kernel or an asynchronous operation on purpose."""


class FaultyDevice(CPUDevice):
    """A CPU device whose kernels raise :class:`InjectedFault` with probability ``p``."""

    def __init__(self, index: int, p: float, stats: "Stats") -> None:
        super().__init__(index)
        self.p, self.soak_stats = p, stats
        self._rng = random.Random(index)
        self._lk = threading.Lock()

    def kernel(self, name: str):
        inner = super().kernel(name)

        def run(*args, **kw):
            with self._lk:
                fail = self._rng.random() < self.p
            if fail:
                self.soak_stats.fault()
                raise InjectedFault(f"injected fault in {name} on {self.name}")
            return inner(*args, **kw)

        return run


# ------------------------------------------------------------------------------------------ bookkeeping
class Stats:
    def __init__(self, nthreads: int) -> None:
        self.lock = threading.Lock()
        self.calls: dict = defaultdict(int)
        self.ok: dict = defaultdict(int)
        self.wrong: dict = defaultdict(int)
        self.errors: dict = defaultdict(lambda: defaultdict(int))  # kind -> "Type (expected|UNEXPECTED)" -> n
        self.examples: list = []  # first unexpected errors / wrong results, with tracebacks
        self.faults = 0
        self.cancelled = 0
        self.progress = [time.monotonic()] * nthreads
        self.current = [""] * nthreads

    def fault(self) -> None:
        with self.lock:
            self.faults += 1

    def record(self, kind: str, outcome: str, detail: str = "") -> None:
        with self.lock:
            self.calls[kind] += 1
            if outcome == "ok":
                self.ok[kind] += 1
            elif outcome == "wrong":
                self.wrong[kind] += 1
                if len(self.examples) < 20:
                    self.examples.append(f"WRONG {kind}: {detail}")

    def error(self, kind: str, e: BaseException, expected: bool) -> None:
        with self.lock:
            self.calls[kind] += 1
            self.errors[kind][f"{type(e).__name__} ({'expected' if expected else 'UNEXPECTED'})"] += 1
            if not expected and len(self.examples) < 20:
                self.examples.append(f"ERROR {kind}: " + "".join(traceback.format_exception(e))[-3000:])


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def rand(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asfortranarray(x.astype(dtype))


def close(got, ref, k: int, scale: float, dtype) -> tuple[bool, str]:
    """|got - ref| <= 8 (k + 2) eps scale, elementwise maximum."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return False, f"shape {got.shape} != {ref.shape}"
    if got.size == 0:
        return True, ""
    err = float(np.max(np.abs(got.astype(np.complex128) - ref)))
    bound = 8.0 * (k + 2) * float(np.finfo(dtype).eps) * scale
    return err <= bound, f"|err| {err:.3g} > bound {bound:.3g}"


def mx(*xs) -> float:
    return float(np.prod([np.max(np.abs(x)) if np.size(x) else 0.0 for x in xs]))


# ------------------------------------------------------------------------------------------------ work
DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
PREFIX = {np.float32: "s", np.float64: "d", np.complex64: "c", np.complex128: "z"}


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stats = Stats(args.threads)
        self.stop = threading.Event()
        self.finished = threading.Event()
        self.pool_lock = threading.Lock()
        self.pool = [tileblas.Runtime(2) for _ in range(3)]
        self.closed_mid_call = 0
        self.faulty = tileblas.Runtime([FaultyDevice(i, args.fault_p, self.stats) for i in range(2)])
        self.executor = aa.Executor(calibrate=False)
        self.samples: list = []

    # ---- helpers
    def check(self, kind, got, ref, k, scale, dtype, what):
        ok, msg = close(got, ref, k, scale, dtype)
        self.stats.record(kind, "ok" if ok else "wrong", f"{what}: {msg}")

    def blas1(self, rng):
        dt = DTYPES[rng.integers(4)]
        p = PREFIX[dt]
        n = int(rng.choice([0, 1, 7, 100, 1000, 5000]))
        x, y = rand(rng, max(n, 1), dt), rand(rng, max(n, 1), dt)
        a = 0.5 if p in "sd" else 0.5 - 0.25j
        op = rng.integers(4)
        if op == 0:
            ref = a * x + y
            got = getattr(tb, p + "axpy")(x, y.copy(), a=a)
            self.check("blas1", got, ref, 1, abs(a) * mx(x) + mx(y), dt, p + "axpy")
        elif op == 1:
            name = p + ("dot" if p in "sd" else "dotc")
            ref = np.vdot(x, y)
            got = getattr(tb, name)(x, y)
            self.check("blas1", got, ref, len(x), len(x) * mx(x, y), dt, name)
        elif op == 2:
            name = {"s": "snrm2", "d": "dnrm2", "c": "scnrm2", "z": "dznrm2"}[p]
            got = getattr(tb, name)(x)
            self.check("blas1", got, np.linalg.norm(x.astype(np.complex128)), len(x), mx(x) * np.sqrt(len(x)), dt, name)
        else:
            got = getattr(tb, p + "scal")(a, x.copy())
            self.check("blas1", got, a * x.astype(np.complex128), 1, abs(a) * mx(x), dt, p + "scal")

    def blas2(self, rng):
        dt = DTYPES[rng.integers(4)]
        p = PREFIX[dt]
        m, n = (int(v) for v in rng.choice([1, 7, 64, 129, 300], 2))
        a = rand(rng, (m, n), dt)
        op = rng.integers(3)
        if op == 0:
            x, y = rand(rng, n, dt), rand(rng, m, dt)
            got = getattr(tb, p + "gemv")(1.5, a, x, beta=0.5, y=y)
            self.check("blas2", got, 1.5 * a.astype(np.complex128) @ x + 0.5 * y, n, 1.5 * n * mx(a, x) + mx(y), dt, p + "gemv")
        elif op == 1:
            x, y = rand(rng, m, dt), rand(rng, n, dt)
            name = p + ("ger" if p in "sd" else "geru")
            got = getattr(tb, name)(2.0, x, y, a=a)
            self.check("blas2", got, a + 2.0 * np.outer(x, y), 1, 2 * mx(x, y) + mx(a), dt, name)
        else:
            t = np.triu(rand(rng, (n, n), dt)) / n
            t[np.diag_indices(n)] = 2.0
            t = np.asfortranarray(t)
            x = rand(rng, n, dt)
            got = getattr(tb, p + "trsv")(t, x)
            self.check("blas2", got, np.linalg.solve(t.astype(np.complex128), x), 4 * n, 2 * mx(got), dt, p + "trsv")

    def l3_case(self, rng, small=False):
        dt = DTYPES[rng.integers(4)]
        m, n, k = (int(v) for v in rng.choice([1, 17, 64, 65, 129, 200] if small else [1, 17, 64, 129, 193, 300], 3))
        a, b, c = rand(rng, (m, k), dt), rand(rng, (k, n), dt), rand(rng, (m, n), dt)
        ref = 1.5 * a.astype(np.complex128) @ b - 0.5 * c
        return dt, a, b, c, ref, k, 1.5 * k * mx(a, b) + 0.5 * mx(c)

    def blas3(self, rng):
        dt, a, b, c, ref, k, scale = self.l3_case(rng)
        p = PREFIX[dt]
        if rng.integers(3) == 0:  # trsm on a well-conditioned triangle
            m = a.shape[0]
            t = np.tril(rand(rng, (m, m), dt)) / m
            t[np.diag_indices(m)] = 2.0
            t = np.asfortranarray(t)
            got = getattr(tb, p + "trsm")(1.0, t, c, lower=1)
            self.check("blas3", got, np.linalg.solve(t.astype(np.complex128), c), 4 * m, 2 * mx(got), dt, p + "trsm")
            return
        got = getattr(tb, p + "gemm")(1.5, a, b, beta=-0.5, c=c)
        self.check("blas3", got, ref, k, scale, dt, p + "gemm")

    def runtime(self, rng):
        dt, a, b, c, ref, k, scale = self.l3_case(rng)
        with self.pool_lock:
            rt = self.pool[rng.integers(len(self.pool))]
        tile = int(rng.choice([16, 32, 64, 128]))
        try:
            rt.gemm(1.5, a, b, -0.5, c, tile_size=tile)
        except RuntimeError as e:
            if "shut down" in str(e) and rt.closed:
                self.stats.error("runtime", e, expected=True)
                return
            raise
        self.check("runtime", c, ref, k, scale, dt, f"Runtime.gemm tile {tile}")

    def churn(self, rng):
        rt = tileblas.Runtime(int(rng.integers(1, 3)), tile_size=int(rng.choice([32, 64])))
        dt, a, b, c, ref, k, scale = self.l3_case(rng, small=True)
        rt.gemm(1.5, a, b, -0.5, c)
        self.check("churn", c, ref, k, scale, dt, "new Runtime gemm")
        what = rng.integers(3)
        if what == 0:
            rt.close()
        elif what == 1:
            del rt  # dropped without close
            gc.collect()
        elif self.args.no_close_in_use:
            rt.close()
        else:  # replace a shared runtime; close the old one, maybe while another thread is mid-call on it
            with self.pool_lock:
                i = int(rng.integers(len(self.pool)))
                old, self.pool[i] = self.pool[i], rt
            old.close()
            self.closed_mid_call += 1

    def fault(self, rng):
        dt, a, b, c, ref, k, scale = self.l3_case(rng, small=True)
        try:
            self.faulty.gemm(1.5, a, b, -0.5, c, tile_size=32)
        except InjectedFault as e:
            self.stats.error("fault", e, expected=True)
            return
        self.check("fault", c, ref, k, scale, dt, "faulty-runtime gemm")

    def async_(self, rng):
        ex = self.executor
        dt, a, b, c, ref, k, scale = self.l3_case(rng, small=True)
        ha, hb, hc = ex.handle(a), ex.handle(b), ex.handle(c)
        what = rng.integers(4)
        if what == 0:  # plain call, wait with a timeout
            aa.gemm(1.5, ha, hb, -0.5, hc)  # the handles' executor runs it
            self.check("async", hc.get(timeout=60), ref, k, scale, dt, "async gemm")
        elif what == 1:  # cancel right after submission
            f = aa.gemm(1.5, ha, hb, -0.5, hc)
            cancelled = f.cancel()
            try:
                f.result(timeout=60)
                got = hc.get(timeout=60)
                self.check("async", got, ref, k, scale, dt, "async gemm (cancel too late)")
            except concurrent.futures.CancelledError as e:
                assert cancelled, "future cancelled although cancel() returned False"
                with self.stats.lock:
                    self.stats.cancelled += 1
                self.stats.error("async", e, expected=True)
                got = hc.get(timeout=60)  # the handle keeps its old value
                self.check("async", got, c, 1, mx(c), dt, "handle after cancelled gemm")
        elif what == 2:  # an injected failing op writes hc; the gemm that reads/writes it must fail too
            def boom(_dev):
                self.stats.fault()
                raise InjectedFault("injected async failure")

            f_bad = ex.submit("inject", boom, (), (hc,))
            f = aa.gemm(1.5, ha, hb, -0.5, hc)
            for fut in (f_bad, f):
                try:
                    fut.result(timeout=60)
                    self.stats.record("async", "wrong", "dependent of a failed op succeeded")
                except (InjectedFault, aa.DependencyError) as e:
                    self.stats.error("async", e, expected=True)
        else:  # Matrix operators
            ma, mb = aa.Matrix(a, executor=ex), aa.Matrix(b, executor=ex)
            got = (ma @ mb).get(timeout=60)
            self.check("async", got, a.astype(np.complex128) @ b, k, k * mx(a, b), dt, "Matrix @")

    def rblas(self, rng):
        dt, a, b, c, ref, k, scale = self.l3_case(rng, small=True)
        p = PREFIX[dt]
        mode = str(rng.choice(["checkpoint", "compute", "auto"]))
        if rng.integers(2) == 0:
            fwd, rev = rb.PAIRS[p + "gemm"]
            c0 = c.copy(order="F")
            got = fwd(1.5, a, b, beta=-0.5, c=c, overwrite_c=1, mode=mode)
            self.check("rblas", got, ref, k, scale, dt, f"f{p}gemm {mode}")
            rev(1.5, a, b, beta=-0.5, c=c, overwrite_c=1)
            # compute mode divides by beta: error bound relative to |alpha A B| / |beta|
            self.check("rblas", c, c0, k, 4 * scale, dt, f"r{p}gemm {mode}")
        else:
            x, y = rand(rng, 500, dt), rand(rng, 500, dt)
            y0 = y.copy()
            fwd, rev = rb.PAIRS[p + "axpy"]
            got = fwd(x, y, a=2.0, mode=mode)
            self.check("rblas", got, 2.0 * x + y0, 1, 2 * mx(x) + mx(y0), dt, f"f{p}axpy {mode}")
            rev(x, y, a=2.0)
            self.check("rblas", y, y0, 2, 4 * mx(x) + mx(y0), dt, f"r{p}axpy {mode}")

    KINDS = ("blas1", "blas2", "blas3", "runtime", "churn", "fault", "async", "rblas")
    WEIGHTS = (3, 3, 3, 3, 1, 2, 3, 2)

    # ---- threads
    def worker(self, i: int) -> None:
        rng = np.random.default_rng([self.args.seed, i])
        fns = [getattr(self, "async_" if k == "async" else k) for k in self.KINDS]
        w = np.array([wt if k in self.args.kinds else 0 for k, wt in zip(self.KINDS, self.WEIGHTS)], float)
        w /= w.sum()
        while not self.stop.is_set():
            j = int(rng.choice(len(fns), p=w))
            self.stats.current[i] = self.KINDS[j]
            try:
                fns[j](rng)
            except Exception as e:  # noqa: BLE001 - classified here
                self.stats.error(self.KINDS[j], e, expected=False)
            self.stats.progress[i] = time.monotonic()

    def sampler(self, t0: float) -> None:
        while not self.stop.wait(2.0):
            self.samples.append((round(time.monotonic() - t0, 1), threading.active_count(), round(rss_mb(), 1)))

    def watchdog(self) -> None:
        while not self.finished.wait(1.0):  # also while the workers finish their last call
            now = time.monotonic()
            for i, t in enumerate(self.stats.progress):
                if now - t > self.args.watchdog:
                    print(f"\nHANG: worker {i} made no progress for {now - t:.0f} s "
                          f"(in a {self.stats.current[i]!r} call); all thread stacks:", file=sys.stderr, flush=True)
                    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                    self.finish(hang=f"worker {i} stuck in {self.stats.current[i]} for {now - t:.0f} s")
                    sys.stderr.flush()
                    os._exit(3)

    def finish(self, hang: str | None = None) -> dict:
        self.finished.set()
        s = self.stats
        samples = self.samples or [(0.0, threading.active_count(), round(rss_mb(), 1))]
        warm = samples[min(len(samples) - 1, 5)]  # after ~10 s: caches and pools warmed up
        with s.lock:
            out = {
                "seconds": round(time.monotonic() - self.t0, 1),
                "threads_workers": self.args.threads,
                "calls": dict(s.calls), "ok": dict(s.ok), "wrong": dict(s.wrong),
                "wrong_total": sum(s.wrong.values()),
                "errors": {k: dict(v) for k, v in s.errors.items()},
                "unexpected_errors": sum(n for v in s.errors.values() for t, n in v.items() if "UNEXPECTED" in t),
                "faults_injected": s.faults, "cancelled": s.cancelled,
                "shared_runtimes_closed_under_use": self.closed_mid_call,
                "options": {k: v for k, v in vars(self.args).items()},
                "threads": {"start": self.threads0, "after_warmup": warm[1], "end": samples[-1][1],
                            "max": max(x[1] for x in samples)},
                "rss_mb": {"start": self.rss0, "after_warmup": warm[2], "end": samples[-1][2],
                           "max": max(x[2] for x in samples)},
                "samples": samples,
                "hang": hang,
                "examples": list(s.examples),
            }
        out["thread_growth"] = out["threads"]["end"] - out["threads"]["after_warmup"]
        out["passed"] = (out["wrong_total"] == 0 and out["unexpected_errors"] == 0 and hang is None
                         and out["thread_growth"] <= 2)
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump(out, f, indent=1)
        self.print_summary(out)
        return out

    @staticmethod
    def print_summary(out: dict) -> None:
        print(f"soak: {out['seconds']} s, {out['threads_workers']} worker threads")
        print(f"{'kind':10s} {'calls':>8s} {'ok':>8s} {'wrong':>6s}  errors")
        for k in Soak.KINDS:
            errs = ", ".join(f"{t}: {n}" for t, n in out["errors"].get(k, {}).items())
            print(f"{k:10s} {out['calls'].get(k, 0):8d} {out['ok'].get(k, 0):8d} {out['wrong'].get(k, 0):6d}  {errs}")
        print(f"faults injected: {out['faults_injected']}, cancelled futures: {out['cancelled']}, "
              f"shared runtimes closed/replaced under use: {out['shared_runtimes_closed_under_use']}")
        print(f"wrong results: {out['wrong_total']}, unexpected errors: {out['unexpected_errors']}, "
              f"hang: {out['hang'] or 'no'}")
        t, r = out["threads"], out["rss_mb"]
        print(f"threads: start {t['start']}, after warm-up {t['after_warmup']}, end {t['end']}, max {t['max']}")
        print(f"RSS MB: start {r['start']}, after warm-up {r['after_warmup']}, end {r['end']}, max {r['max']}")
        for e in out["examples"][:5]:
            print(e)
        print("PASSED" if out["passed"] else "FAILED")

    def run(self) -> dict:
        self.t0 = time.monotonic()
        self.threads0, self.rss0 = threading.active_count(), round(rss_mb(), 1)
        self.stats.progress = [time.monotonic()] * self.args.threads
        helpers = [threading.Thread(target=self.sampler, args=(self.t0,), daemon=True, name="soak-sampler"),
                   threading.Thread(target=self.watchdog, daemon=True, name="soak-watchdog")]
        workers = [threading.Thread(target=self.worker, args=(i,), daemon=True, name=f"soak-worker-{i}")
                   for i in range(self.args.threads)]
        for t in helpers + workers:
            t.start()
        deadline = self.t0 + self.args.seconds
        while time.monotonic() < deadline:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        self.stop.set()
        end = time.monotonic() + self.args.watchdog + 5  # the watchdog fires first on a stuck worker
        for t in workers:
            t.join(max(0.0, end - time.monotonic()))
        stuck = [t.name for t in workers if t.is_alive()]
        if stuck:
            print(f"\nHANG at the end: {stuck} did not finish; all thread stacks:", file=sys.stderr, flush=True)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        with self.pool_lock:
            for rt in self.pool:
                rt.close()
        self.faulty.close()
        self.executor.close(timeout=30)
        gc.collect()
        time.sleep(0.5)
        self.samples.append((round(time.monotonic() - self.t0, 1), threading.active_count(), round(rss_mb(), 1)))
        return self.finish(hang=f"{stuck} did not finish" if stuck else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="duration in minutes (default 30)")
    ap.add_argument("--seconds", type=float, default=None, help="duration in seconds (overrides --minutes)")
    ap.add_argument("--threads", type=int, default=4, help="worker threads (default 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fault-p", type=float, default=0.02, help="probability that a faulty kernel call raises")
    ap.add_argument("--watchdog", type=float, default=60.0, help="seconds without progress that count as a hang")
    ap.add_argument("--json", default=None, help="write the summary here")
    ap.add_argument("--no-close-in-use", action="store_true",
                    help="never close a shared Runtime that other threads may be calling")
    ap.add_argument("--kinds", default=",".join(Soak.KINDS),
                    help=f"comma-separated kinds of work (default all: {','.join(Soak.KINDS)})")
    args = ap.parse_args(argv)
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in args.kinds if k not in Soak.KINDS]
    if bad or not args.kinds:
        ap.error(f"--kinds must name some of {', '.join(Soak.KINDS)}; got {bad or args.kinds}")
    if args.seconds is None:
        args.seconds = args.minutes * 60.0
    if not args.seconds > 0 or args.threads < 1:
        ap.error(f"duration and threads must be positive; got {args.seconds} s, {args.threads} threads")
    out = Soak(args).run()
    sys.stdout.flush()
    return 0 if out["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
