"""The drop-in's GPUs: which devices its calls may use, and the rule that sends a call to a GPU.

What it owns
    * The one grammar of ``TILEBLAS_DEVICES`` (:func:`parse`; the table of its values is in
      docs/guide/gpu.md, "The drop-in uses the GPUs by itself"; :data:`GRAMMAR` in one line for messages):
      ``auto`` (or unset) the CPU workers and every GPU, ``cpu`` the CPU workers only, ``cpu,gpu[:N]``
      the CPU workers and every GPU (the first N), ``gpu[:N]`` the GPUs for every call from the floor.
      The drop-in reads the variable once per process (``tileblas.blas._dispatch.set_devices`` sets it in
      code); a value outside the grammar is one ``RuntimeWarning`` naming it, and the CPU workers only.
    * The rule (:func:`gpu_first`): a call at or above the GPU floor
      (:attr:`tileblas.policy._dropin.DropInConfig.gpu_min_flops`) goes to the GPUs where their predicted
      seconds (copies over the measured host link, the device's kernel rate, the runtime's per-tile cost;
      :func:`tileblas.runtime._shares.predict_seconds`) times ``gpu_margin`` are at most the CPU path's
      predicted seconds (the rate ``tileblas tune`` timed for the family and precision class at that
      thread count, :meth:`tileblas.policy._dropin.DropInConfig.cpu_rate`; untuned, the host workers'
      rate, :class:`~tileblas.Tuning` ``core_flops`` a thread).  Both
      are functions of the call's shape and precision and of the machine's figures, never of the load
      or a timing taken at the call: the same call takes the same path every time in a process.
    * :func:`crossover`: the smallest order for which a rule holds, for ``tileblas info``.

What it must not touch
    Devices, CuPy and runtimes: the drop-in (:mod:`tileblas.blas._dispatch`) looks for the GPUs, makes
    their runtime and predicts the seconds; this module decides from numbers.  Standard library only.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Callable

__all__ = ["DeviceSetting", "GRAMMAR", "ENV", "parse", "from_environment", "gpu_first", "crossover"]

#: The environment variable.
ENV = "TILEBLAS_DEVICES"
#: The grammar in one line, for messages.
GRAMMAR = "'auto' (the default), 'cpu', 'cpu,gpu', 'cpu,gpu:N', 'gpu' or 'gpu:N' (N a GPU count >= 1)"


@dataclass(frozen=True)
class DeviceSetting:
    """A parsed value of :data:`ENV` (see the module notes).

    Attributes
    ----------
    text : str
        The value as given ("" when unset).
    source : str
        Where it came from: the variable's name, or ``set_devices``.
    host : bool
        The CPU workers take the calls no GPU takes (False: ``gpu``/``gpu:N``, every call at or above the
        floor goes to the GPUs).
    gpus : int or None
        GPUs to use: None every one CuPy sees, 0 none, N the first N.
    named : bool
        GPUs were named explicitly (``gpu``...): when none can be used, a warning says why.
    note : str
        Why the value was refused ("" when taken).
    """

    text: str = ""
    source: str = ENV
    host: bool = True
    gpus: int | None = None
    named: bool = False
    note: str = ""

    @property
    def wants_gpus(self) -> bool:
        """GPUs may take calls (the setting names or allows them)."""
        return self.gpus != 0

    @property
    def forced(self) -> bool:
        """Every call at or above the floor goes to the GPUs (no model asked)."""
        return self.wants_gpus and not self.host

    def describe(self) -> str:
        """One phrase: the value and what it means."""
        shown = repr(self.text) if self.text else "unset"
        if self.note:
            return f"{self.source}={shown} refused ({self.note}): CPU workers only"
        what = ("CPU workers only" if not self.wants_gpus
                else ("every GPU" if self.gpus is None else f"the first {self.gpus} GPU(s)")
                + (" for every call from the GPU floor" if self.forced else " beside the CPU workers, by the model"))
        return f"{self.source}={shown}: {what}"


def parse(text: str, source: str = ENV) -> DeviceSetting:
    """The setting of ``text`` (see the module notes); ValueError naming the value and the grammar."""
    if not isinstance(text, str):
        raise TypeError(f"devices must be a str; got {type(text).__name__}")
    t = "".join(text.split()).lower()
    if t in ("", "auto"):
        return DeviceSetting(text, source)
    host = named = False
    gpus: int | None = None
    seen: set[str] = set()
    for item in t.split(","):
        kind, sep, count = item.partition(":")
        if kind not in ("cpu", "gpu") or kind in seen:
            why = f"{kind!r} named twice" if kind in seen else f"unknown item {item!r}"
            raise ValueError(f"{source}={text!r}: {why}; expected {GRAMMAR}")
        seen.add(kind)
        if kind == "cpu":
            if sep:
                raise ValueError(f"{source}={text!r}: the CPU workers follow the thread setting (threadpoolctl, "
                                 f"OPENBLAS_NUM_THREADS), 'cpu' takes no count; expected {GRAMMAR}")
            host = True
            continue
        named = True
        if sep:
            if not count.isdigit() or int(count) < 1:
                raise ValueError(f"{source}={text!r}: a GPU count must be an int >= 1; got {count!r}; "
                                 f"expected {GRAMMAR}")
            gpus = int(count)
    return DeviceSetting(text, source, host=host, gpus=gpus if named else 0, named=named)


def from_environment(environ: dict | None = None) -> DeviceSetting:
    """The setting of :data:`ENV` in ``environ`` (default ``os.environ``); a value outside the grammar is
    one RuntimeWarning and the CPU workers only."""
    text = (os.environ if environ is None else environ).get(ENV, "")
    try:
        return parse(text)
    except ValueError as exc:
        try:
            warnings.warn(f"tileblas: {exc}; the CPU workers only", RuntimeWarning, stacklevel=3)
        except Exception:  # noqa: BLE001 - warnings made errors (-W error): the note (tileblas info) says why
            pass
        return DeviceSetting(text, ENV, host=True, gpus=0, note=str(exc).split(": ", 1)[-1])


def gpu_first(gpu_seconds: float, cpu_seconds: float, margin: float) -> bool:
    """Whether a call predicted to take ``gpu_seconds`` on the GPUs and ``cpu_seconds`` on the CPU path
    goes to the GPUs: ``gpu_seconds * margin <= cpu_seconds``."""
    return gpu_seconds * margin <= cpu_seconds


def crossover(goes: Callable[[int], bool], lo: int = 64, hi: int = 65536) -> int | None:
    """The smallest order n in [lo, hi] for which ``goes(n)`` holds: a scan of orders a quarter octave
    apart, then a bisection between the last that does not and the first that does (the predicted times
    are smooth there); None when none up to ``hi`` does."""
    grid = sorted({min(int(round(lo * 2 ** (i / 4))), hi) for i in range(200) if lo * 2 ** (i / 4) <= hi * 1.2})
    prev = lo - 1
    for g in grid:
        if goes(g):
            a, b = prev, g  # goes(a) is false (or a < lo), goes(b) true
            while b - a > 1:
                mid = (a + b) // 2
                if goes(mid):
                    b = mid
                else:
                    a = mid
            return b
        prev = g
    return None
