"""What the grid benchmark's modes and determinism column need besides the timing loop: the busy processes
of its ``load`` mode (:class:`BusyNeighbours`) and the distinct results of identical calls
(:func:`distinct_results`).  Used by :mod:`tileblas.cli._bench_grid`.

What it owns
    The busy process (a separate interpreter spinning on pure-Python arithmetic, switched between
    spinning and blocked through its control pipe, ending at the end of that pipe, so that no process
    outlives the grid that started it, even a grid killed without a chance to stop it), and how a call's
    result is hashed and its distinct results are counted.

What it must not touch
    Anything of tileblas but the calls it is handed; NumPy is imported by the function that hashes.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterable, Mapping

__all__ = ["BusyNeighbours", "distinct_results", "det_gaps", "DET_GAPS"]

#: Idle gaps (seconds) of the determinism calls: before every fourth round of calls, the next of these in turn.
DET_GAPS = (0.002, 0.010, 0.050, 0.001, 0.025)


def det_gaps(calls: int) -> list[float]:
    """The idle gap (seconds) before each of ``calls`` rounds of determinism calls: before every fourth
    round, the next of :data:`DET_GAPS` in turn; none before the others."""
    return [DET_GAPS[(i // 4) % len(DET_GAPS)] if i % 4 == 3 else 0.0 for i in range(calls)]


def _digest(out: Any) -> str:
    """A hash of a call's result: dtype, shape and bytes of every array in it."""
    import hashlib

    import numpy as np

    h = hashlib.blake2b(digest_size=8)
    for a in (out if isinstance(out, tuple) else (out,)):
        a = np.asarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def distinct_results(calls: Mapping[str, Callable[[], Any]], n: int, gaps: Iterable[float] | None = None,
                     sleep: Callable[[float], None] = time.sleep) -> dict[str, list[str]]:
    """Make each of ``calls`` ``n`` times and return the distinct results of each (sorted hashes).

    The calls go in pairs (or rounds of as many as ``calls`` has) in alternating order, ``k1 k2``, ``k2
    k1``, ..., so that a call comes after another library's call, after its own and after an idle gap:
    ``gaps`` gives the seconds to pause before each round (default :func:`det_gaps`: 1-50 ms before every
    fourth round).  Nothing is timed.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    pauses = list(gaps) if gaps is not None else det_gaps(n)
    keys = list(calls)
    seen: dict[str, set[str]] = {k: set() for k in keys}
    for i in range(n):
        if i < len(pauses) and pauses[i] > 0:
            sleep(pauses[i])
        for k in (keys if i % 2 == 0 else keys[::-1]):
            seen[k].add(_digest(calls[k]()))
    return {k: sorted(v) for k, v in seen.items()}


#: The busy process: spins on pure-Python arithmetic while told "run", blocks while told "pause" (answers
#: "ok" to each), ignores Ctrl-C (the grid stops it) and exits at the end of its control pipe: when the grid
#: closes it, and when the grid dies.
_BUSY_CODE = r"""
import os, signal, sys, threading
signal.signal(signal.SIGINT, signal.SIG_IGN)
go = threading.Event()
def control():
    for line in sys.stdin:
        (go.set if line.strip() == "run" else go.clear)()
        sys.stdout.write("ok\n")
        sys.stdout.flush()
    os._exit(0)
threading.Thread(target=control, daemon=True).start()
sys.stdout.write("ready\n")
sys.stdout.flush()
x = 1.0
while True:
    go.wait()
    for _ in range(5000):
        x = (x * 1.0000001 + 0.5) % 1000.0
"""


class BusyNeighbours:
    """``procs`` separate processes, each spinning on pure-Python arithmetic while :meth:`run` is in force.

    A context manager: entering starts them (paused), leaving stops them, whatever ended the block
    (an exception, Ctrl-C).  :meth:`run` and :meth:`pause` switch them all and return once each has
    answered.  ``pids`` names those started (kept after they are stopped).
    """

    def __init__(self, procs: int = 1) -> None:
        if isinstance(procs, bool) or not isinstance(procs, int) or procs < 1:
            raise ValueError(f"procs must be a positive integer; got {procs!r}")
        self.procs = procs
        self._children: list[Any] = []
        self.pids: list[int] = []
        self.running = False

    def start(self) -> "BusyNeighbours":
        import subprocess
        import sys

        try:
            for _ in range(self.procs):
                self._children.append(subprocess.Popen(
                    [sys.executable, "-I", "-c", _BUSY_CODE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True))
                self.pids.append(self._children[-1].pid)
            for c in self._children:
                if c.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"the busy process {c.pid} did not start (exit status {c.poll()})")
        except BaseException:
            self.stop()
            raise
        return self

    def _tell(self, word: str) -> None:
        for c in self._children:
            try:
                c.stdin.write(word + "\n")
                c.stdin.flush()
            except OSError as exc:
                raise RuntimeError(f"the busy process {c.pid} has gone (exit status {c.poll()})") from exc
        for c in self._children:
            if c.stdout.readline().strip() != "ok":
                raise RuntimeError(f"the busy process {c.pid} has gone (exit status {c.poll()})")

    def run(self) -> None:
        """Let them spin (returns once each is spinning)."""
        self._tell("run")
        self.running = True

    def pause(self) -> None:
        """Block them (no CPU) until the next :meth:`run`."""
        self._tell("pause")
        self.running = False

    def stop(self) -> None:
        """End them all (the end of their control pipe; killed if one has not gone within 2 s)."""
        import subprocess

        children, self._children = self._children, []
        self.running = False
        for c in children:
            with contextlib.suppress(OSError):
                c.stdin.close()
        for c in children:
            try:
                c.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait()
            finally:
                with contextlib.suppress(OSError):
                    c.stdout.close()

    def __enter__(self) -> "BusyNeighbours":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
