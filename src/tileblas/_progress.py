"""Progress of long work on stderr: :class:`Progress`, the one progress bar of tileblas.

What it owns
    The bar that model building, the Level-3 grid and the RBLAS benchmark show while they run: tqdm when
    it is installed (imported here, lazily), else a text bar with the elapsed time and an estimate of the
    time left (or, when the amount of work is not known in advance, a counter redrawn at most once a
    second).  Log lines go through :meth:`Progress.write` so that they do not tear the bar.

What it must not touch
    Anything of tileblas (a bottom module, like :mod:`tileblas._timing`).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

__all__ = ["Progress"]


class Progress:
    """A progress bar on stderr.

    Parameters
    ----------
    total : int, optional
        Units of work in all; None when not known in advance (a counter is shown instead of a bar).
    enabled : bool
        False: show nothing (:meth:`write` still logs).
    desc : str
        What is being done, shown before the bar.
    unit : str
        Name of one unit of work.
    log : callable
        Where :meth:`write` sends lines when no tqdm bar is shown (default ``print``).
    leave : bool
        Keep the finished tqdm bar on screen.
    """

    def __init__(self, total: int | None = None, enabled: bool = True, desc: str = "", unit: str = "step",
                 log: Callable[[str], None] = print, leave: bool = True) -> None:
        self.total = None if total is None else max(int(total), 1)
        self.done = 0
        self.enabled = bool(enabled)
        self.desc, self.unit, self.log = desc, unit, log
        self.t0 = time.perf_counter()
        self._drawn = 0.0
        self._tqdm: Any = None
        if self.enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self._tqdm = tqdm(total=self.total, desc=desc or None, unit=unit, leave=leave,
                                  dynamic_ncols=True, smoothing=0.05)

    def step(self, label: str = "", k: int = 1) -> None:
        """``k`` more units done; ``label`` says what the last one was."""
        self.done += k
        if self._tqdm is not None:
            if label:
                self._tqdm.set_postfix_str(label, refresh=False)
            self._tqdm.update(k)
        elif self.enabled:
            self._draw(label)

    def _draw(self, label: str, final: bool = False) -> None:
        now = time.perf_counter()
        el = now - self.t0
        if self.total is None:
            if final or now - self._drawn > 1.0:
                sys.stderr.write(f"\r{self.desc}: {self.done} {self.unit}s {el:6.0f}s")
                sys.stderr.flush()
                self._drawn = now
            return
        frac = min(self.done / self.total, 1.0)
        eta = el / frac - el if frac > 0 else 0.0
        bar = "#" * int(30 * frac)
        sys.stderr.write(f"\r{self.desc} [{bar:<30s}] {self.done}/{self.total} {el:6.0f}s eta {eta:5.0f}s "
                         f"{label[:40]:<40s}")
        sys.stderr.flush()

    def write(self, msg: str) -> None:
        """Log one line without tearing the bar."""
        if self._tqdm is not None:
            self._tqdm.write(msg)
            return
        if self.enabled:
            sys.stderr.write("\r" + " " * 110 + "\r")
        self.log(msg)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        elif self.enabled:
            if self.total is None:
                self._draw("", final=True)
            sys.stderr.write("\n")

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
