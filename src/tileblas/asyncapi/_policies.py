"""Scheduling policies: which backend runs a ready call.

What it owns: the "cost" policy of the paper's section 4.1 and the "demand" policy.

"cost" -- push each call to the backend where it is estimated to *finish* first:

    finish(b) = load(b) + task(op, b) + locality(op, b)

* load(b): what the backend still has to do: the rest of its running call (its estimate minus the time it
  has run; half the time it has run when it overran its estimate) plus the estimates of its queued calls.  The paper also added the wall time the backend had
  already spent computing; that term is what made its scheduler slow down when a GPU and a CPU worked
  together (a fast backend that has worked a lot looks "loaded", so work goes to the slow one).  Here
  spent time only calibrates speeds; it is kept as ``rule="paper"`` for comparison.
* task(op, b): the call's floating-point operations divided by the backend's speed, plus a per-call
  overhead (plus the device's ``call_latency_s`` when it states one: a Dask worker's round trip, which
  calibration and measurements then take out of their times).  Speeds come from a start-up calibration
  (a DGEMM on every backend, grown until it takes a millisecond, or 20 call latencies: the paper's
  pre-compilation benchmark done at run time, a few milliseconds per backend) and are refined after
  every call by a moving average of the measured rate; the time a call spent moving its
  operands is taken out of that measurement and refines the backend's bandwidth instead.
  (:func:`tileblas.perf.suggest` answers tile sizes, not rates, so the performance models are not
  consulted here.)
* locality(op, b): the time to move the call's operands that are not valid on b (download from the device
  holding them, upload to b), from the handles' residency and the devices' bandwidths.

Because the choice minimises the estimated finish time, a call is never placed on a backend whose
estimated finish is later than that of the fastest backend -- the fix for the paper's heterogeneous case.

"demand" -- one backend that hands every Level-3 call to the tile runtime (:func:`tileblas.blas._dispatch.level3`),
which splits it into tiles that all devices pull on demand; Level 1/2 calls run on the host.

What it must not touch: the dependency graph (the executor decides *when* a call is ready; a policy only
decides *where* it runs).  Policies are called under the executor's graph lock and must be fast.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from tileblas.asyncapi._executor import Backend
    from tileblas.asyncapi._graph import Op

__all__ = ["CostPolicy", "DemandPolicy", "POLICIES", "calibrate_speed"]

#: host memory bandwidth guess (bytes/s) for devices that do not state one
_DEFAULT_BANDWIDTH = 10e9
#: fixed time per call (s): queue hand-off, Python bookkeeping
_OVERHEAD = 20e-6


def _bandwidth(device: Any) -> float:
    """A device's link bandwidth in bytes/s (its ``bandwidth`` attribute when it states one)."""
    bw = getattr(device, "bandwidth", None)
    return float(bw) if bw else _DEFAULT_BANDWIDTH


def calibrate_speed(device: Any, n: int = 160, repeats: int = 3, target: float = 1e-3, nmax: int = 1024,
                    latency: float = 0.0) -> float:
    """Measured DGEMM rate of ``device`` in flop/s (best of ``repeats``) on n x n matrices.

    The size doubles from ``n`` (up to ``nmax``) until one product takes ``target`` seconds, so that a fast
    device is not measured on a problem dominated by its launch and synchronisation latency: a few
    milliseconds per backend.  ``latency`` (seconds per call that are not computation, e.g. a remote
    worker's round trip) is taken out of the measured time.
    """
    rng = np.random.default_rng(0)
    kern = device.kernel("gemm")
    while True:
        a = np.asfortranarray(rng.standard_normal((n, n)))
        b = np.asfortranarray(rng.standard_normal((n, n)))
        c = np.zeros((n, n), order="F")
        da, db, dc = device.to_device(a), device.to_device(b), device.to_device(c)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            kern(1.0, da, db, 0.0, dc)
            device.synchronize()
            best = min(best, time.perf_counter() - t0)
        if best >= target or 2 * n > nmax:
            compute = best - latency if best > 2 * latency else 0.5 * best
            return 2.0 * n**3 / max(compute, 1e-9)
        n *= 2


class CostPolicy:
    """Push each ready call to the backend with the earliest estimated finish (see module docstring).

    Parameters
    ----------
    calibrate : bool
        Measure every backend's speed at start-up (else: ``device.speed_hint`` x 20 GFLOP/s).
    rule : {"eft", "paper"}
        "eft": earliest estimated finish (default).  "paper": the paper's load criterion, which adds the
        time each backend already spent computing.
    """

    name = "cost"

    def __init__(self, calibrate: bool = True, rule: str = "eft") -> None:
        if rule not in ("eft", "paper"):
            raise ValueError(f"rule must be 'eft' or 'paper'; got {rule!r}")
        self.calibrate = calibrate
        self.rule = rule

    def setup(self, backends: list["Backend"]) -> None:
        # With host-memory backends only, no handle ever has a device copy: locality is always 0.
        self.all_host = all(b.host_memory for b in backends)
        for b in backends:
            dev = b.device
            # a device that states a per-call latency (a Dask worker: a round trip) pays it on every call
            lat = float(getattr(dev, "call_latency_s", 0.0) or 0.0)
            b.overhead = _OVERHEAD + lat
            if self.calibrate:
                speed = calibrate_speed(dev, target=max(1e-3, 20 * lat), latency=lat)
            else:
                speed = 20e9 * getattr(dev, "speed_hint", 1.0)
            b.speed = speed
            b.bandwidth = _bandwidth(dev)

    @staticmethod
    def task_estimate(op: "Op", b: "Backend") -> float:
        return getattr(b, "overhead", _OVERHEAD) + op.flops / b.speed

    @staticmethod
    def locality(op: "Op", b: "Backend") -> float:
        if b.host_memory and not op.reads:
            return 0.0
        dev = None if b.host_memory else b.device
        t = 0.0
        for h in op.reads:
            down, up = h.transfer_bytes(dev)
            if down:
                holder = next(iter(h._valid), None)
                t += down / _bandwidth(holder)
            if up:
                t += up / b.bandwidth
        return t

    def choose(self, op: "Op", backends: list["Backend"], now: float) -> tuple["Backend", float]:
        """(backend, task estimate) for ``op``."""
        best = None
        best_score = best_est = 0.0
        paper = self.rule == "paper"
        local = bool(op.reads) and not self.all_host
        for b in backends:
            if op.host_only and not b.host_memory:
                continue
            est = getattr(b, "overhead", _OVERHEAD) + op.flops / b.speed
            if paper:
                avg = b.spent / b.ntasks if b.ntasks >= 3 else est
                load = b.spent + b.nqueued * avg
            else:
                load = b.queued_est
                if b.running:
                    # the running call's rest; one that overran its estimate is expected to need about
                    # half as long again as it has run so far
                    ran = now - b.running_start
                    load += b.running_est - ran if ran < b.running_est else 0.5 * ran + _OVERHEAD
            score = load + est + (self.locality(op, b) if local else 0.0)
            if best is None or score < best_score:
                best, best_score, best_est = b, score, est
        if best is None:
            raise RuntimeError(f"no backend can run {op.name} (it needs host memory)")
        return best, best_est

    @staticmethod
    def observe(b: "Backend", op: "Op", seconds: float, moved: tuple[float, int] = (0.0, 0)) -> None:
        """Refine ``b``'s speed from one measured call (large calls only: small ones measure overhead).

        ``moved`` is (seconds, bytes) of the copies the call made to reach its operands: they are the
        locality term's business, so they are taken out of the compute time and refine the bandwidth.
        """
        xfer_s, xfer_b = moved
        lat = getattr(b, "overhead", _OVERHEAD) - _OVERHEAD
        compute = seconds - xfer_s - lat
        if op.flops >= 2e6 and compute > lat:
            b.speed = 0.7 * b.speed + 0.3 * (op.flops / compute)
        if xfer_b >= 1 << 20 and xfer_s > 0:
            b.bandwidth = 0.7 * b.bandwidth + 0.3 * (xfer_b / xfer_s)


class DemandPolicy:
    """Every call goes to one backend that hands Level-3 work to the tile runtime (see module docstring)."""

    name = "demand"

    def setup(self, backends: list["Backend"]) -> None:
        for b in backends:
            b.speed = 20e9
            b.bandwidth = _DEFAULT_BANDWIDTH

    def choose(self, op: "Op", backends: list["Backend"], now: float) -> tuple["Backend", float]:
        return backends[0], 0.0

    @staticmethod
    def observe(b: "Backend", op: "Op", seconds: float, moved: tuple[float, int] = (0.0, 0)) -> None:
        pass


POLICIES = {"cost": CostPolicy, "demand": DemandPolicy}
