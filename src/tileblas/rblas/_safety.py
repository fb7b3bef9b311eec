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
    the one call, so the outputs are the plain call's bits.  axpy (s, d) at unit strides runs in one pass
    where the CPU and the BLAS kernel allow (``FUSED``).  The fingerprints of the arrays the call covers
    whole are gathered from the chunks too.  Calls the executor declines (operands that need converting,
    odd strides, a non-finite scalar) are read apart, as ``"scan"`` reads them.
``"vector"``  Level-2 groups 1 and 2 (gemv ... spmv, trmv ... tpsv): the outputs are vectors, O(n) against
    the call's O(n**2).  The output is copied before the call and read after it; a non-finite value there
    turns the call into a checkpoint with that copy.  The matrix is not read: a non-finite entry of it
    that reaches the result shows in the output, and one that does not (it meets a zero of x that the
    kernel skips) is skipped the same way by the inverse, which reads the same x.
``"rank"``    The rank updates into symmetric, Hermitian or packed storage (syr ... hpr2): A += alpha x y^H
    cannot make a non-finite value, nor lose one that A holds (Inf +- a finite value is that Inf, a NaN
    stays a NaN), when alpha, the vectors and A are all finite and below 2**20, 2**490 and 2**1000 (single:
    2**45, 2**100).  Each of them (x and y contiguous, alpha and the vectors within those bounds) runs in
    the column executor (``_guard.syr`` for syr and spr, ``_guard.rank`` for the others): one axpy per
    term per column of the triangle, as OpenBLAS makes the call (the plain call's bits; the terms of a
    zero x[j] or y[j] skipped only where the plain call skips them, :data:`_COLUMNS`), each column read for
    Inf, NaN or large values just before its axpy calls, in cache; a column with one is copied first and
    kept where it holds a non-finite value after (restored from the copy, the rest by the inverse).
    Rank updates the executor does not take: one native read of A's triangle before the call, nothing
    after.  Otherwise
    ``"scan"``.
``"scan"``    Level 3 (operands O(n**2) against O(n**3) work): every array argument read natively before
    the call (a non-finite value: checkpoint) and the outputs after it (a non-finite value: an overflow;
    the call cannot be reversed and its reverse says so).
``None``     swap (its own exact inverse, Inf and NaN included) and copy (restored by a zero fill).

What it must not touch: the choice of mode (``_registry._decide``), the journal, the arrays' contents
except through the routine's own call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["Guard", "prepare", "nonfinite", "GUARDS"]

#: the guards a Spec may name (see the module docstring)
GUARDS = ("chunks", "vector", "rank", "scan", None)

try:  # the native half; without it every guard is "scan" on NumPy
    from tileblas.rblas import _guard as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a build without the C module
    _native = None

_INTS = (int, np.integer)


@functools.lru_cache(maxsize=None)
def _entry(name: str) -> int:
    """Address of ``name`` in the one-thread instance; the first call tells the executor the drop-in's
    instance (its pool slot and thread setting: the parts of its calls)."""
    from tileblas.kernels import _openblas
    from tileblas.kernels._threadpool import default_threads

    if not _CONFIGURED:
        lib = _openblas.get_library(default_threads())
        get = lib._ctypes.cast(lib._symbol("openblas_get_num_threads"), lib._ctypes.c_void_p).value
        one = _openblas.get_library(1)
        FUSED.update(zip(("s", "d"), _native.configure(-1 if lib.pool_slot is None else int(lib.pool_slot), int(get),
                                                       int(one.fortran("saxpy")), int(one.fortran("daxpy")))))
        _CONFIGURED.append(True)
    return int(_openblas.get_library(1).fortran(name))


_CONFIGURED: list[bool] = []
#: precision -> whether axpy runs in one pass (the kernel of tileblas' OpenBLAS rounds like a fused multiply-add
#: on this CPU: checked against it when the executor is first configured)
FUSED: dict[str, bool] = {}


def nonfinite(v: Any) -> bool:
    """Whether the array ``v`` holds an Inf or a NaN (host arrays natively, without a temporary array; other
    arrays through their own module's ``isfinite``, where it has one)."""
    if isinstance(v, np.ndarray):
        if v.dtype.kind not in "fc":
            return False
        if _native is not None:
            if not _CONFIGURED:
                _entry("daxpy")
            hit = _native.nonfinite(v)
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
_NONFINITE_AFTER = ("non-finite value in the outputs after the call (an input holds an Inf or a NaN, or the call "
                    "overflowed): the inverse could not restore them; checkpointed")


class Guard:
    """What a compute-mode forward call does for the non-finite safety (see the module docstring): made by
    :func:`prepare` before the call, :meth:`run` makes the call, :meth:`after` says what became of it.

    Attributes
    ----------
    kind : str or None
        The guard in force: ``"chunks"``, ``"vector"``, ``"scan"`` or None.
    checkpoint : str
        Set before the call: the arguments that make it a checkpoint instead (non-finite inputs), else "".
    """

    __slots__ = ("kind", "outs", "bound", "arrays", "checkpoint", "copies", "kept", "lost", "plan", "why", "prints",
                 "syr")

    def __init__(self, kind: str | None, outs: list[str], bound: dict[str, Any],
                 arrays: list[tuple[str, Any]]) -> None:
        self.kind = kind
        self.outs = outs
        self.bound = bound
        self.arrays = arrays
        self.checkpoint = ""
        self.copies: dict[str, Any] = {}
        self.kept: list[tuple[str, tuple, Any]] = []
        self.lost = False
        self.plan: _Plan | None = None
        self.why = ""
        self.prints: dict[str, bytes] = {}  # fingerprints after the call the executor gathered
        self.syr: tuple | None = None  # (_guard.syr or _guard.rank, its arguments, the output, lower) where it runs the call

    @property
    def deferred(self) -> tuple[str, ...]:
        """Arrays whose fingerprint the forward call takes after the call (the executor may gather it; the
        call writes none that is not an output, so before and after are the same)."""
        return self.plan.printed if self.plan is not None else ()

    def _read_rank(self, late: bool = False) -> None:
        """A rank update's read before the call: nothing after it where alpha, the vectors and A are bounded;
        else every array read (a non-finite value: checkpoint) and the outputs after the call.  ``late``: in
        run(), after the mode was chosen (the outputs are copied for the checkpoint here)."""
        if _bounded_update(self.bound, self.outs):
            self.kind = None  # nothing to read after the call: it cannot make a non-finite value
            return
        self.kind = "scan"
        bad = [n for n, v in self.arrays if nonfinite(v)]
        if bad and late:
            self.copies = {o: _copy(self.bound[o]) for o in self.outs}
            self.why = (f"non-finite input ({', '.join(repr(n) for n in bad)}): the inverse could not restore "
                        "the outputs; checkpointed")
        elif bad:
            self.checkpoint = ", ".join(repr(n) for n in bad)

    def run(self, call: Callable[[], Any]) -> Any:
        """Make the call: in the native executor where it takes it, else ``call()`` (tileblas.blas)."""
        if self.syr is not None:
            native, args, a, lower = self.syr
            done = native(*args)
            self.syr = None
            if done is not None:
                kept, lost = done
                self.lost = bool(lost)
                self.kept = [_column(a, lower, j, rows, data) for j, rows, data in kept]
                return a
            self._read_rank(late=True)  # not one it takes: A read before the call, as for the other rank updates
            return call()
        plan = self.plan
        if plan is not None:
            done = _native.guarded(*plan.args)
            if done is not None:
                kept, lost, prints = done
                self.lost = bool(lost)
                for name, pr in zip(plan.printed, prints if plan.m == 0 else prints[2:]):
                    if pr is not None:
                        self.prints[name] = pr
                for first, count, data in kept:
                    self.kept.extend(plan.pieces(first, count, data))
                return plan.ret
            # not one the executor takes (dtype, layout, bounds, a non-finite scalar, ...): read the inputs apart
            self.plan = None
            self.kind = "scan"
            bad = [n for n, v in self.bound.items() if _scalar_nonfinite(v)]
            bad += [n for n, v in self.arrays if nonfinite(v)]
            if bad:
                self.copies = {o: _copy(self.bound[o]) for o in self.outs}
                self.why = (f"non-finite input ({', '.join(repr(n) for n in bad)}): the inverse could not "
                            "restore the outputs; checkpointed")
        return call()

    def after(self) -> tuple[str, Any, str]:
        """After the call: ``("ok", None, "")``; ``("checkpoint", copies, why)`` (every output's values from
        before the call: the call becomes a checkpoint); ``("kept", [(output, index, values), ...], "")``
        (those elements are restored from the values, the others by the inverse); ``("irreversible", None,
        why)``."""
        if self.why:
            return "checkpoint", self.copies, self.why
        if self.kind == "vector":
            if any(nonfinite(self.bound[o]) for o in self.outs):
                return "checkpoint", self.copies, _NONFINITE_AFTER
            return "ok", None, ""
        if self.plan is not None or self.kind == "syr":
            if self.lost:
                return "irreversible", None, ("the values an Inf or a NaN replaced could not be kept (out of "
                                              "memory), so its inverse cannot restore the outputs")
            if not self.kept:
                return "ok", None, ""
            if self.plan is not None and self.plan.covers(self.kept):
                return "checkpoint", self.plan.full(self.bound, self.kept), _NONFINITE_AFTER
            return "kept", self.kept, ""
        if self.kind is not None:  # scan
            over = [o for o in self.outs if nonfinite(self.bound[o])]
            if over:
                return "irreversible", None, (
                    f"the forward call overflowed ({', '.join(repr(o) for o in over)} holds a non-finite value "
                    "after it) in compute mode, so its inverse cannot restore the outputs; use "
                    "mode='checkpoint' for calls near the floating-point range")
        return "ok", None, ""


def prepare(spec: Any, prefix: str, dtype: np.dtype, bound: dict[str, Any], outs: list[str],
            arrays: list[tuple[str, Any]]) -> Guard:
    """The guard of a compute-mode forward call, set up before the call (see the module docstring)."""
    kind = spec.guard
    g = Guard(kind, outs, bound, arrays)
    if kind is None:
        return g
    if kind == "chunks":
        plan = _plan(spec, prefix, dtype, bound) if _native is not None else None
        if plan is not None:  # the executor checks the scalars itself (a non-finite one: it declines)
            g.plan = plan
            return g
        g.kind = "scan"
    for v in bound.values():
        if _scalar_nonfinite(v):
            g.checkpoint = ", ".join(repr(n) for n, v in bound.items() if _scalar_nonfinite(v))
            return g
    if g.kind == "vector":
        g.copies = {o: _copy(bound[o]) for o in outs}
        return g
    if g.kind == "rank":
        g.syr = _syr_args(spec, prefix, bound, outs)
        if g.syr is not None:  # alpha and x bounded; A read column by column in the call
            g.kind = "syr"
            return g
        g._read_rank()
        return g
    bad = [n for n, v in arrays if nonfinite(v)]
    if bad:
        g.checkpoint = ", ".join(repr(n) for n in bad)
    return g


def _column(a: np.ndarray, lower: bool, j: int, rows: int, data: bytes) -> tuple[str, tuple, np.ndarray]:
    """(output, index, values before the call) of column ``j`` (its ``rows`` in the triangle) of syr's a or
    spr's packed ap, kept by ``_guard.syr``."""
    vals = np.frombuffer(data, dtype=a.dtype).copy()
    if a.ndim == 2:
        return "a", (slice(j, j + rows) if lower else slice(0, rows), j), vals
    n = rows + j if lower else rows  # lower: rows = n - j; upper: rows = j + 1
    at = j * n - j * (j - 1) // 2 if lower else j * (j + 1) // 2
    return "ap", (slice(at, at + rows),), vals


#: routine -> (its precisions, the output, whether it has y, the n from which the plain call on several threads
#: skips the terms of a zero x[j] or y[j]; below it, as on one thread, it makes them with a zero scalar):
#: the rank updates the column executor runs (``_guard.syr``: syr, spr; ``_guard.rank``: the others).  The
#: n are those of tileblas' OpenBLAS (syr2: interface/syr2.c's loop below 100, spr2: below 50; the Hermitian
#: ones: below 100, found by comparing bits), checked by tests/test_rblas_safety.py
#: (test_rank_updates_in_columns_give_the_plain_calls_bits_and_reverse).
_COLUMNS = {"syr": ("sd", "a", False, 0), "spr": ("sd", "ap", False, 0),
            "syr2": ("sd", "a", True, 100), "spr2": ("sd", "ap", True, 50),
            "her": ("cz", "a", False, 100), "hpr": ("cz", "ap", False, 100),
            "her2": ("cz", "a", True, 100), "hpr2": ("cz", "ap", True, 100)}


def _syr_args(spec: Any, prefix: str, bound: dict[str, Any], outs: list[str]) -> tuple | None:
    """(``_guard.syr`` or ``_guard.rank``, its arguments, the output, lower) for a rank update the column
    executor runs (:data:`_COLUMNS`; in place, x and y contiguous from their first element, alpha and the
    vectors bounded as :func:`_bounded_update` asks), else None: that executor reads A's triangle column by
    column just before each column's axpy calls, in the call's one pass over it."""
    entry = _COLUMNS.get(spec.routine)
    if entry is None or prefix not in entry[0] or _native is None:
        return None
    _, out, has_y, small = entry
    d = spec.defaults
    a, x, y, alpha = bound.get(out), bound.get("x"), bound.get("y"), bound.get("alpha")
    if not (isinstance(a, np.ndarray) and isinstance(x, np.ndarray) and x.ndim == 1):
        return None
    if has_y and not (isinstance(y, np.ndarray) and y.ndim == 1 and y.shape == x.shape):
        return None
    n = x.shape[0]
    if outs != [out] or not bound.get("overwrite_" + out, d.get("overwrite_" + out, 0)):
        return None
    for v in ("x", "y") if has_y else ("x",):
        if bound.get("inc" + v, d.get("inc" + v, 1)) != 1 or bound.get("off" + v, d.get("off" + v, 0)) != 0:
            return None
    if bound.get("n") not in (None, n) or a.shape != ((n, n) if out == "a" else (n * (n + 1) // 2,)):
        return None
    kinds = (float, int, np.floating, np.integer) + ((complex, np.complexfloating) if has_y and prefix in "cz" else ())
    if not isinstance(alpha, kinds) or isinstance(alpha, bool):
        return None
    if abs(complex(alpha)) >= 2.0 ** 20 or _native.nonfinite(x, 2) is not False:
        return None
    if has_y and _native.nonfinite(y, 2) is not False:
        return None
    lower = bool(bound.get("lower", d.get("lower", 0)))
    fn = _entry(prefix + "axpy")
    if spec.routine in ("syr", "spr"):
        return _native.syr, (fn, float(alpha), x, a, lower), a, lower
    return _native.rank, (fn, complex(alpha), x, y if has_y else None, a, lower, small), a, lower


def _bounded_update(bound: dict[str, Any], outs: list[str]) -> bool:
    """Whether a rank update A += alpha x y^H (+ its symmetric twin) cannot make a non-finite value nor lose
    one: alpha below 2**20, x and y below 2**490 (single: 2**45) and A below 2**1000 (2**100) in magnitude,
    all finite (one native read of A, the vectors' is O(n)); then a non-finite value of A stays what it was
    through the call and its inverse, and no sum overflows."""
    if _native is None or abs(complex(bound["alpha"])) >= 2.0 ** 20:
        return False
    for name in ("x", "y"):
        v = bound.get(name)
        if v is not None and (not isinstance(v, np.ndarray) or _native.nonfinite(v, 2) is not False):
            return False
    for o in outs:
        v = bound[o]
        if not isinstance(v, np.ndarray):
            return False
        # full storage: only the triangle the call reads and writes
        hit = _native.triangle(v, bool(bound.get("lower", 0)), 1) if v.ndim == 2 else None
        if hit is None:
            hit = _native.nonfinite(v, 1)
        if hit is not False:
            return False
    return True


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
    printed: tuple[str, ...] = ("x", "y")  # the arrays whose prints the executor gathers, in its order

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


def _int(v: Any) -> int | None:
    """An integer argument as a BLAS integer (32 bits: the executor's), else None (tileblas.blas reads it)."""
    if isinstance(v, _INTS) and not isinstance(v, (bool, np.bool_)) and -_INT_MAX <= v <= _INT_MAX:
        return int(v)
    return None


_INT_MAX = 2**31 - 1


def _plan(spec: Any, prefix: str, dt: np.dtype, b: dict[str, Any]) -> _Plan | None:
    """The call as the executor takes it, or None where it does not (see ``_guard.guarded``: the arrays are
    checked there; here the integer arguments as tileblas.blas reads them)."""
    routine = spec.routine
    d = spec.defaults
    x = b["x"]
    if type(x) is not np.ndarray and not isinstance(x, np.ndarray):
        return None
    if routine in ("ger", "geru", "gerc"):
        y, a = b["y"], b.get("a")
        if not isinstance(y, np.ndarray) or not isinstance(a, np.ndarray) or x.ndim != 1 or y.ndim != 1:
            return None
        incx, incy = _int(b.get("incx", 1)), _int(b.get("incy", 1))
        m, n = x.shape[0], y.shape[0]
        args = ("ger", _entry(prefix + routine), dt.num, n, x, 0, incx or 0, y, 0, incy or 0, b["alpha"], None,
                a, m, False)
        return _Plan(args, a, (("a", 0, 0),), n, m, dt, ("a",))
    if x.ndim != 1:
        return None
    offx, incx = _int(b.get("offx", d.get("offx", 0))), _int(b.get("incx", d.get("incx", 1)))
    n = b.get("n")
    if offx is None or not incx or (n is not None and _int(n) is None):
        return None
    if routine == "scal":
        if n is None:
            n = (x.shape[0] - offx) // abs(incx)
        if not 0 < n <= _INT_MAX:
            return None
        args = ("scal", _entry(prefix + routine), dt.num, int(n), x, offx, incx, None, 0, 1, b["a"], None, None, 0,
                prefix in ("cs", "zd"))
        return _Plan(args, x, (("x", offx, incx),), int(n), 0, dt, ("x",))
    y = b["y"]
    offy, incy = _int(b.get("offy", d.get("offy", 0))), _int(b.get("incy", d.get("incy", 1)))
    if not isinstance(y, np.ndarray) or offy is None or not incy:
        return None
    if n is None:
        n = (x.shape[0] - 1 - offx) // abs(incx) + 1 if routine == "rot" else (x.shape[0] - offx) // abs(incx)
    n = int(n)
    if not 0 < n <= _INT_MAX:
        return None
    fn = _entry(prefix + routine)
    if routine == "axpy":
        args = ("axpy", fn, dt.num, n, x, offx, incx, y, offy, incy, b.get("a", 1.0), None, None, 0, False)
        return _Plan(args, y, (("y", offy, incy),), n, 0, dt)
    outs = (("x", offx, incx), ("y", offy, incy))
    if routine == "rot":
        args = ("rot", fn, dt.num, n, x, offx, incx, y, offy, incy, b["c"], b["s"], None, 0, True)
    else:
        args = ("rotm", fn, dt.num, n, x, offx, incx, y, offy, incy, b["param"], None, None, 0, False)
    return _Plan(args, (x, y), outs, n, 0, dt)
