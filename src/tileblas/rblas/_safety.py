"""Compute mode's non-finite safety, at about the cost of the plain call.

Design note.  A compute-mode forward call keeps nothing of the values it overwrites: its reverse computes
them back from the outputs.  An Inf or a NaN that reaches an output (from an input, or from an overflow)
makes that impossible, and the reverse would write NaN over the user's data.  So the forward call must
know, by the time it returns, whether any output holds a non-finite value it did not hold before, and
keep the values it replaced.  Reading every operand once more for that costs as much as a memory-bound
call itself (daxpy at N = 10**7: 6.6-7.5x the plain call; dgemv at N = 4096: 3.0x), so each routine gets
the cheapest guard that is still complete (``Spec.guard``):

``"chunks"``  Level 1 (axpy, scal, rot, rotm) and ger/geru/gerc: outputs as large as the call's work.  The
    call runs in the native executor of :mod:`tileblas.rblas._guard`: in chunks of a few KiB, each one's
    operands read for Inf, NaN or large values (2**1000; single precision 2**100) as they come into cache,
    then computed by the same BLAS routine (the one-thread instance, in parts on tileblas' thread pool as
    the drop-in's instance would run it).  A chunk with such a value is copied first and read again after
    its call, and its copy is kept where an output holds a non-finite value: those elements are restored
    from the copy, every other one by the inverse.  Every element is computed by the same kernel as in
    the one call, so the outputs are the plain call's bits.  Calls the executor does not take (operands
    that need converting, odd strides) take ``"scan"``.
``"vector"``  Level-2 groups 1 and 2 (gemv ... spmv, trmv ... tpsv): the outputs are vectors, O(n) against
    the call's O(n**2).  The output is copied before the call and read after it; a non-finite value there
    turns the call into a checkpoint with that copy.  The matrix is not read: a non-finite entry of it
    that reaches the result shows in the output, and one that does not (it meets a zero of x that the
    kernel skips) is skipped the same way by the inverse, which reads the same x.
``"scan"``    Level 3 (operands O(n**2) against O(n**3) work) and the rank updates into symmetric,
    Hermitian or packed storage: every array argument read natively before the call (a non-finite value:
    checkpoint) and the outputs after it (a non-finite value: an overflow; the call cannot be reversed
    and its reverse says so).
``None``     swap (its own exact inverse, Inf and NaN included) and copy (restored by a zero fill).

What it must not touch: the choice of mode (``_registry._decide``), the journal, the arrays' contents
except through the routine's own call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tileblas.rblas._fingerprint import is_array

__all__ = ["Guard", "prepare", "nonfinite", "GUARDS"]

#: the guards a Spec may name (see the module docstring)
GUARDS = ("chunks", "vector", "scan", None)

try:  # the native half; without it every guard is "scan" on NumPy
    from tileblas.rblas import _guard as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a build without the C module
    _native = None

_INTS = (int, np.integer)
_REALS = (int, float, np.integer, np.floating)
_NUMBERS = (int, float, complex, np.integer, np.floating, np.complexfloating)
#: scalars from this magnitude on make the executor read every chunk again after its call
_LARGE_SCALAR = 2.0 ** 20
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT64_MAX = float(np.finfo(np.float64).max)


@functools.lru_cache(maxsize=1)
def _instances() -> tuple[Any, Any]:
    """(the drop-in's OpenBLAS instance, the one-thread instance)."""
    from tileblas.kernels import _openblas
    from tileblas.kernels._threadpool import default_threads

    return _openblas.get_library(default_threads()), _openblas.get_library(1)


def _pool() -> tuple[int, int]:
    """(pool slot, threads) of the drop-in's instance: the parts a large call is cut into."""
    lib, _ = _instances()
    if lib.pool_slot is None:
        return -1, 1
    return int(lib.pool_slot), max(1, int(lib.num_threads()))


@functools.lru_cache(maxsize=None)
def _entry(name: str) -> int:
    return int(_instances()[1].fortran(name))


def nonfinite(v: Any) -> bool:
    """Whether the array ``v`` holds an Inf or a NaN (host arrays natively, without a temporary array; other
    arrays through their own module's ``isfinite``, where it has one)."""
    if isinstance(v, np.ndarray):
        if v.dtype.kind not in "fc":
            return False
        if _native is not None:
            slot, threads = _pool() if v.nbytes >= (1 << 19) else (-1, 1)
            hit = _native.nonfinite(v, slot, threads)
            if hit is not None:
                return bool(hit)
        return not bool(np.isfinite(v).all())
    kind = getattr(getattr(v, "dtype", None), "kind", "")
    if kind not in ("f", "c"):
        return False
    import importlib

    isfinite = getattr(importlib.import_module(type(v).__module__.split(".")[0]), "isfinite", None)
    return isfinite is not None and not bool(isfinite(v).all())


def _copy(v: Any) -> Any:
    return v.copy(order="K") if isinstance(v, np.ndarray) else v.copy()


def _scalar_nonfinite(v: Any) -> bool:
    if isinstance(v, (float, complex, np.floating, np.complexfloating)):
        c = complex(v)
        return not (np.isfinite(c.real) and np.isfinite(c.imag))
    return False


# --------------------------------------------------------------------------------------------- guards
@dataclass
class Guard:
    """What a compute-mode forward call does for the non-finite safety (see the module docstring).

    Attributes
    ----------
    kind : str or None
        The guard in force: ``"chunks"``, ``"vector"``, ``"scan"`` or None.
    checkpoint : str
        Set before the call: why the call must be checkpointed instead (a non-finite input), else "".
    run : callable or None
        The call as the native executor runs it (``"chunks"``), else None: the ``tileblas.blas`` routine.
    """

    kind: str | None
    outs: list[str]
    bound: dict[str, Any]
    checkpoint: str = ""
    run: Callable[[], Any] | None = None
    copies: dict[str, Any] = field(default_factory=dict)
    kept: list[tuple[str, tuple, Any]] = field(default_factory=list)
    lost: bool = False
    _plan: Any = None

    def after(self) -> tuple[str, Any]:
        """After the call: ``("ok", None)``; ``("checkpoint", copies)`` (every output's values from before
        the call: the call becomes a checkpoint); ``("kept", [(output, index, values), ...])`` (those elements
        are restored from the values, the others by the inverse); ``("irreversible", why)``."""
        if self.kind == "vector":
            if any(nonfinite(self.bound[o]) for o in self.outs):
                return "checkpoint", self.copies
            return "ok", None
        if self.kind == "chunks" and self.run is not None:
            if self.lost:
                return "irreversible", ("the values an Inf or a NaN replaced could not be kept (out of memory), "
                                        "so its inverse cannot restore the outputs")
            if not self.kept:
                return "ok", None
            if self._plan.covers(self.kept):
                return "checkpoint", self._plan.full(self.bound, self.kept)
            return "kept", self.kept
        if self.kind is not None:  # scan (and chunks the executor did not take)
            over = [o for o in self.outs if nonfinite(self.bound[o])]
            if over:
                return "irreversible", (
                    f"the forward call overflowed ({', '.join(repr(o) for o in over)} holds a non-finite value "
                    "after it) in compute mode, so its inverse cannot restore the outputs; use "
                    "mode='checkpoint' for calls near the floating-point range")
        return "ok", None


def prepare(spec: Any, prefix: str, dtype: np.dtype, bound: dict[str, Any], outs: list[str],
            arrays: list[tuple[str, Any]]) -> Guard:
    """The guard of a compute-mode forward call, set up before the call (see the module docstring)."""
    kind = spec.guard
    g = Guard(kind, list(outs), bound)
    if kind is None:
        return g
    bad = [n for n, v in bound.items() if _scalar_nonfinite(v)]
    if bad:
        g.checkpoint = ", ".join(repr(n) for n in bad)
        return g
    if kind == "chunks":
        plan = _plan(spec, prefix, dtype, bound) if _native is not None else None
        if plan is not None:
            g._plan = plan
            g.run = functools.partial(_run_plan, plan, g)
            return g
        g.kind = "scan"
    if g.kind == "vector":
        g.copies = {o: _copy(bound[o]) for o in outs}
        return g
    bad = [n for n, v in arrays if nonfinite(v)]
    if bad:
        g.checkpoint = ", ".join(repr(n) for n in bad)
    return g


# ----------------------------------------------------------------------------- the native executor
@dataclass
class _Plan:
    """One call as the executor runs it: the arguments of ``_guard.guarded`` and where each output's
    elements lie (to restore the chunks it keeps)."""

    args: tuple
    ret: Any
    outs: tuple[tuple[str, int, int], ...]  # (name, offset, increment) per output; ger: (("a", 0, 0),)
    n: int
    m: int
    dtype: np.dtype

    def pieces(self, first: int, count: int, data: bytes) -> list[tuple[str, tuple, np.ndarray]]:
        """(output, index, values before the call) of the outputs of one kept chunk."""
        vals = np.frombuffer(data, dtype=self.dtype).copy()
        if self.m:  # ger: columns first .. first + count of a
            return [("a", (slice(None), slice(first, first + count)), vals.reshape((self.m, count), order="F"))]
        out = []
        for i, (name, off, inc) in enumerate(self.outs):
            s = abs(inc)
            start = off + (first if inc > 0 else self.n - first - count) * s
            out.append((name, (slice(start, start + (count - 1) * s + 1, s),), vals[i * count:(i + 1) * count]))
        return out

    def covers(self, kept: list) -> bool:
        """Whether the kept chunks are all of them (every element the call wrote)."""
        return sum(v.size for _, _, v in kept) == self.n * max(self.m, 1) * len(self.outs)

    def full(self, bound: dict[str, Any], kept: list) -> dict[str, Any]:
        """Every output as it was before the call, from the kept chunks (they cover the elements it wrote)."""
        copies = {name: bound[name].copy(order="K") for name, *_ in self.outs}
        for name, index, vals in kept:
            copies[name][index] = vals
        return copies


def _run_plan(plan: _Plan, g: Guard) -> Any:
    kept, lost = _native.guarded(*plan.args)
    g.lost = bool(lost)
    for first, count, data in kept:
        g.kept.extend(plan.pieces(first, count, data))
    return plan.ret


def _vector(v: Any, dt: np.dtype, write: bool) -> bool:
    """A 1-D array the executor reads in place: contiguous, aligned, of the routine's dtype."""
    if not isinstance(v, np.ndarray) or v.ndim != 1 or v.dtype != dt:
        return False
    f = v.flags
    return bool(f.c_contiguous and f.aligned and (f.writeable or not write))


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, _INTS) and not isinstance(v, (bool, np.bool_)) else None


def _scalar(v: Any, dt: np.dtype) -> np.ndarray | None:
    """The scalar as the routine takes it (a one-element array of ``dt``), or None where tileblas.blas would
    convert it in a way the executor does not (a complex value for a real routine, a bool, an overflow)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, _REALS if dt.kind == "f" else _NUMBERS):
        return None
    c = complex(v)
    big = _FLOAT32_MAX if dt.itemsize * (2 if dt.kind == "f" else 1) == 8 else _FLOAT64_MAX
    if not (abs(c.real) <= big and abs(c.imag) <= big):  # NaN and Inf fail too
        return None
    return np.array([c.real if dt.kind == "f" else c], dtype=dt)


def _large(*arrays: np.ndarray) -> bool:
    for a in arrays:
        for v in a.tolist():
            if abs(v) >= _LARGE_SCALAR:
                return True
    return False


def _span(length: int, off: Any, inc: Any, n: int | None, rot: bool) -> tuple[int, int, int] | None:
    """(n, off, inc) as tileblas.blas reads them, or None where it would raise or do nothing."""
    off, inc = _int(off), _int(inc)
    if off is None or inc is None or inc == 0 or not 0 <= off < length:
        return None
    if n is None:
        n = (length - 1 - off) // abs(inc) + 1 if rot else (length - off) // abs(inc)
    if n < 1 or n > 2**31 - 1 or length - off <= (n - 1) * abs(inc) or abs(inc) * n > 2**31 - 1:
        return None
    return n, off, inc


def _plan(spec: Any, prefix: str, dt: np.dtype, b: dict[str, Any]) -> _Plan | None:
    """The executor's arguments for this call, or None where it does not take it."""
    routine = spec.routine
    slot, threads = _pool()
    fn = _entry(prefix + routine)
    get = lambda k: b.get(k, spec.defaults.get(k))  # noqa: E731
    if routine == "ger" or routine in ("geru", "gerc"):
        x, y, a = b["x"], b["y"], b.get("a")
        incx, incy = _int(get("incx")), _int(get("incy"))
        alpha = _scalar(b["alpha"], dt)
        if (alpha is None or not _vector(x, dt, False) or not _vector(y, dt, False) or incx not in (1, -1)
                or incy not in (1, -1) or not isinstance(a, np.ndarray)):
            return None
        m, n = x.shape[0], y.shape[0]
        if (m < 1 or n < 1 or a.shape != (m, n) or a.dtype != dt or not a.flags.f_contiguous
                or not a.flags.aligned or not a.flags.writeable or m > 2**31 - 1 or n > 2**31 - 1
                or np.may_share_memory(a, x) or np.may_share_memory(a, y)):
            return None
        args = ("ger", fn, slot, threads, n, x, 0, incx, y, 0, incy, alpha, None, a, m, _large(alpha))
        return _Plan(args, a, (("a", 0, 0),), n, m, dt)
    rot = routine == "rot"
    n_arg = b.get("n")
    if n_arg is not None and _int(n_arg) is None:
        return None
    n_arg = _int(n_arg)
    if routine == "scal":
        x = b["x"]
        a = _scalar(b["a"], np.dtype(dt.char.lower()) if prefix in ("cs", "zd") else dt)
        if a is None or not _vector(x, dt, True):
            return None
        sp = _span(x.shape[0], get("offx"), get("incx"), n_arg, False)
        if sp is None or sp[2] < 0:  # BLAS scales nothing at a negative increment
            return None
        n, offx, incx = sp
        args = ("scal", fn, slot, threads, n, x, offx, incx, None, 0, 1, a, None, None, 0, _large(a))
        return _Plan(args, x, (("x", offx, incx),), n, 0, dt)
    x, y = b["x"], b["y"]
    write_x = routine in ("rot", "rotm")
    if not _vector(x, dt, write_x) or not _vector(y, dt, True) or np.may_share_memory(x, y):
        return None
    sx = _span(x.shape[0], get("offx"), get("incx"), n_arg, rot)
    if sx is None:
        return None
    sy = _span(y.shape[0], get("offy"), get("incy"), sx[0], rot)
    if sy is None:
        return None
    n, offx, incx = sx
    _, offy, incy = sy
    if routine == "axpy":
        a = _scalar(b.get("a", 1.0), dt)
        if a is None:
            return None
        args = ("axpy", fn, slot, threads, n, x, offx, incx, y, offy, incy, a, None, None, 0, _large(a))
        return _Plan(args, y, (("y", offy, incy),), n, 0, dt)
    outs = (("x", offx, incx), ("y", offy, incy))
    real = np.dtype(dt.char.lower())
    if routine == "rot":
        c, s = _scalar(b["c"], real), _scalar(b["s"], real)
        if c is None or s is None:
            return None
        args = ("rot", fn, slot, threads, n, x, offx, incx, y, offy, incy, c, s, None, 0, _large(c, s))
        return _Plan(args, (x, y), outs, n, 0, dt)
    if routine == "rotm":
        p = b["param"]
        if not isinstance(p, np.ndarray) or p.shape != (5,) or p.dtype != dt or not np.isfinite(p).all():
            return None
        p = np.ascontiguousarray(p)
        args = ("rotm", fn, slot, threads, n, x, offx, incx, y, offy, incy, p, None, None, 0, _large(p[1:]))
        return _Plan(args, (x, y), outs, n, 0, dt)
    return None
