"""The drop-in's C small-call path: every limit it decides with, in one place.

What it owns
    :class:`DropInConfig`, one frozen dataclass holding every shipped default of the C path
    (``tileblas.blas._fastpath``): where it leaves a call to the Python path (the path policy's tile
    crossovers and the recursion's shapes), where it runs one call on the one-thread instance, where it
    splits a call in parts on the thread pool and how, where real syrk/syr2k run as gemm, and its smaller
    rules (when a BLAS call releases the GIL, how large an operand it converts itself, when herk/her2k copy
    C-ordered operands), and the GPU floor: below it no call goes to a GPU; a call at or above it, where
    GPUs may take calls, is put to the drop-in's GPU policy (:mod:`tileblas.policy._offload`) by the C path
    (:attr:`DropInConfig.gpu_ask`) or the Python path, whichever would run it.  :func:`config` overlays
    what ``tileblas tune`` stored (read through
    :func:`tileblas.policy._paths.policy`) and fits the defaults to a thread setting: a pure function of
    the shipped values, the tuned file, the :class:`~tileblas.Tuning` in force and the thread count.
    ``tileblas.blas._dispatch`` hands its fields to the C path in one ``configure`` call; the C path's
    ``decide()`` applies them, and ``_fastpath.decide(routine, *args)`` answers for one call.

    Each field says in one line what it is; why each default has its value (the measurements, on a 2-core
    Intel Xeon with OpenBLAS's SkylakeX kernels, tileblas' OpenBLAS 0.3.34 against SciPy 1.17's 0.3.30)
    is in
    docs/measurements/drop-in.md, "Why each limit: the figures behind the small-call path's defaults".
    Flops count complex calls 4x.

What it must not touch
    The C path itself and the drop-in (``blas`` is a layer above), measuring (``perf``), and how the
    policy file is read (:mod:`tileblas.policy._paths`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

__all__ = ["DropInConfig", "MEASURED_THREADS", "SHIPPED", "config", "routines"]

#: The Level-3 families, in the C path's order.
FAMILIES = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")


def routines(*families: str) -> tuple[str, ...]:
    """The routine names of ``families`` ('dgemm', ...): every precision, the Hermitian ones complex only."""
    return tuple(p + f for f in families for p in ("cz" if f.startswith("he") else "sdcz"))


def _frozen(d: Mapping) -> Mapping:
    return MappingProxyType(dict(d))


def _shipped_split() -> Mapping[str, tuple[float, float]]:
    """Per routine, the flops [lo, hi) run split on the pool (the figures:
    docs/measurements/drop-in.md, "Why each limit: the figures behind the small-call path's defaults")."""
    out = {r: (2.5e5, 1e10) for r in routines("gemm", "symm", "hemm")}  # parts of C, to order 1024
    out.update(dict.fromkeys(routines("syrk", "herk"), (5e5, 5e9)))  # strips of the triangle
    out.update({r: (_SHIPPED_ONE_THREAD[r], 3e6) for r in ("csyr2k", "zsyr2k", "cher2k", "zher2k")})  # strips
    out["dsyr2k"] = (1.9e6, 5e8)  # strips, orders 99-630; below, to its one-thread limit, OpenBLAS's choice
    out.update(dict.fromkeys(("sgemm", "dgemm"), (2e6, 1e10)))  # from order 100; orders 65-99 OpenBLAS's choice
    tri = {"s": (0.0, 4e9), "d": (0.0, 4e9), "c": (0.0, 1.5e10), "z": (0.0, 1.5e10)}  # parts of b
    out.update({r: tri[r[0]] for r in routines("trmm", "trsm")})
    return _frozen(out)


#: The thread counts the shipped :attr:`~DropInConfig.one_thread` limits and :attr:`~DropInConfig.split`
#: ranges were measured at (two 2-core machines: docs/measurements/drop-in.md,
#: "Why each limit: the figures behind the small-call path's defaults").  At any
#: other count :func:`config` leaves them out, so that every call takes SciPy's path (one call on the
#: instance of that count, OpenBLAS's own decomposition) unless ``tileblas tune`` measured this machine.
MEASURED_THREADS = frozenset({2})

#: Per routine, the flops below which a call is one call on the one-thread instance, so that no thread is
#: woken.  The figures: docs/measurements/drop-in.md,
#: "Why each limit: the figures behind the small-call path's defaults".
_SHIPPED_ONE_THREAD = {
    "sgemm": 5.3e5, "dgemm": 5.3e5, "cgemm": 5.3e5, "zgemm": 5e5,
    "ssymm": 3e5, "dsymm": 3e5, **dict.fromkeys(("csymm", "zsymm", "chemm", "zhemm"), 2.5e5),
    "ssyrk": 2.5e6, "dsyrk": 2.5e6, "csyrk": 1.2e6, "zsyrk": 1.2e6, "cherk": 1.2e6, "zherk": 1.2e6,
    "ssyr2k": 1.9e6, "dsyr2k": 2.6e5, "csyr2k": 1e6, "zsyr2k": 2.5e5, "cher2k": 5e5, "zher2k": 2.5e5,
    "strmm": 1.4e5, "dtrmm": 5e4, "ctrmm": 1.4e5, "ztrmm": 1.3e5,
    "strsm": 3.2e4, "dtrsm": 3.2e4, "ctrsm": 1.3e5, "ztrsm": 1.3e5,  # below order 32: too few columns for parts
}


@dataclass(frozen=True)
class DropInConfig:
    """Everything the C small-call path decides with (the shipped defaults, :data:`SHIPPED`; the values in
    force for a thread setting, :func:`config`).  The figures behind each default:
    docs/measurements/drop-in.md, "Why each limit: the figures behind the small-call path's defaults".

    Attributes
    ----------
    threads : int
        The thread setting these values are for (tileblas' instance of that many threads).
    limits : mapping
        ``{family or 'dtrmm/L': flops}``: calls with at least these flops take the Python path (the path
        policy's tile crossovers; ``sys.float_info.max``: never); shipped: none set (:func:`config` fills it).
    windows : mapping
        ``{'dtrmm/L': (min_order, rhs_lo, rhs_hi) or None}``: trmm/trsm shapes the recursion may take, left
        to the Python path (:func:`tileblas.policy._recursion.recursion_window`).
    one_thread : mapping
        ``{routine: flops}``: below, one call on the one-thread instance (several threads only).
    split : mapping
        ``{routine: (lo, hi)}``: calls of these flops run in parts on the one-thread instance at once on
        the pool (several threads only; ``(0, 0)``: never).
    rank_gemm : mapping
        ``{'dsyrk': (one_call, split)}``: real syrk/syr2k into a new c with op(a) = a in Fortran order run as
        gemm over all of C below these flops (one call below the first; split below the second).
    gil_flops : float
        Level 3: a call above these flops runs BLAS without the GIL.
    gil_elements : int
        Level 1/2: a call above these elements runs BLAS without the GIL.
    convert_max : int
        The most elements of an operand the C path converts (dtype, rank 1) itself; beyond, the Python path.
    part_fraction, part_min : int
        A part of a split is at least order / part_fraction long, and part_min (a strip of syrk: part_min).
    max_parts : int
        The most parts of a split (at most 64).
    herk_copy_k : (float, float)
        herk/her2k on C-ordered operands copy them to Fortran order from n >= this x k (single, double
        precision; twice that where c is read), else solve the conjugate problem.
    gpu_min_flops : float
        The GPU floor: calls below these flops never go to a GPU (nor, for that, leave the C path).
    gpu_ask : float
        A call the C path would run with at least these flops asks the drop-in's GPU policy first, and
        leaves the C path only where the GPUs take it (kept on the CPU, it runs as it does without GPUs,
        with the same bits); shipped: never (:func:`config` with ``gpu``: :attr:`gpu_min_flops`).
    gpu_margin : float
        A call at or above the GPU floor goes to the GPUs where their predicted time times this is at most the
        CPU path's predicted time (:func:`tileblas.policy._offload.gpu_first`).
    cpu_rates : mapping
        ``{'gemm/real': ((order, flop/s), ...)}``: the CPU path's rates ``tileblas tune`` timed at this
        thread count, per family and precision class (double precision), for that predicted time
        (:meth:`cpu_rate`); shipped: none (the host model's rate, the same for every family).
    """

    threads: int = 1
    limits: Mapping[str, float] = field(default_factory=lambda: _frozen({}), hash=False)
    windows: Mapping[str, Any] = field(default_factory=lambda: _frozen({}), hash=False)
    one_thread: Mapping[str, float] = field(default_factory=lambda: _frozen(_SHIPPED_ONE_THREAD), hash=False)
    split: Mapping[str, tuple[float, float]] = field(default_factory=_shipped_split, hash=False)
    rank_gemm: Mapping[str, tuple[float, float]] = field(default_factory=lambda: _frozen({}), hash=False)
    gil_flops: float = 32768.0
    gil_elements: int = 4096
    convert_max: int = 1 << 18
    part_fraction: int = 8
    part_min: int = 16
    max_parts: int = 64
    herk_copy_k: tuple[float, float] = (6.0, 12.0)
    gpu_min_flops: float = 1e9
    gpu_margin: float = 1.25
    cpu_rates: Mapping[str, tuple] = field(default_factory=lambda: _frozen({}), hash=False)
    gpu_ask: float = sys.float_info.max

    def c_fields(self) -> dict[str, Any]:
        """The fields as the C path's ``configure`` takes them (plain dicts; ``threads`` and the GPU fields,
        which the Python path reads, are not among them)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _PYTHON_ONLY}
        for k, v in out.items():
            if isinstance(v, Mapping):
                out[k] = dict(v)
        return out

    def cpu_rate(self, name: str, dtype_char: str, order: int) -> float | None:
        """The CPU path's measured rate (flop/s, complex flops counted 4x) for routine family ``name``
        ('gemm', 'herk', ...) in the double precision of ``dtype_char``'s class at square order ``order``
        (:func:`tileblas.policy._paths.cpu_rate`), or None where ``tileblas tune`` timed none here."""
        from tileblas.policy import _paths

        points = self.cpu_rates.get(f"{_paths.FAMILY[name]}/{_paths.precision_class(dtype_char)}")
        return None if not points else _paths.cpu_rate(points, order)


#: Fields the Python path reads, not the C path's ``configure``.
_PYTHON_ONLY = frozenset({"threads", "gpu_min_flops", "gpu_margin", "cpu_rates"})


#: The shipped defaults (nothing read: no tuned file, no tile crossovers or recursion shapes).
SHIPPED = DropInConfig()


def config(threads: int, gpu: bool = False) -> DropInConfig:
    """The C path's configuration for tileblas' instance of ``threads`` threads: :data:`SHIPPED` with the
    path policy's tile crossovers and recursion shapes, and what ``tileblas tune`` stored (``rank_gemm``,
    ``one_thread``, the lower ends of ``split``: ``split_from``, ``inf`` never) over the shipped values;
    with fewer than two threads nothing runs on the one-thread instance or split, and at a thread count
    the shipped values were not measured at (:data:`MEASURED_THREADS`) only what ``tileblas tune`` stored
    does (a tuned lower end of ``split`` with the shipped upper end); the CPU rates tune timed, where it
    ran at ``threads`` threads.  With ``gpu`` (GPUs may
    take the drop-in's large calls) a call the C path would run from the GPU floor on asks the GPU policy
    (:attr:`DropInConfig.gpu_ask`); nothing else changes."""
    from tileblas._dtypes import DTYPE_OF
    from tileblas.policy import _paths
    from tileblas.policy._recursion import recursion_window

    threads = int(threads)
    pol = _paths.policy()
    never = sys.float_info.max
    limits = {fam: min(v, never) for fam, v in pol.level3_limits().items()}
    tri = [(fam, p, side) for fam in ("trmm", "trsm") for p in "sdcz" for side in "LR"]
    for fam, p, side in tri:
        limits[f"{p}{fam}/{side}"] = min(pol.tile_limit(fam, DTYPE_OF[p].char), never)
    windows = {f"{p}{fam}/{side}": recursion_window(fam, DTYPE_OF[p].char, side, threads) for fam, p, side in tri}
    rank_gemm = {**SHIPPED.rank_gemm, **pol.rank_gemm}
    one_thread: dict[str, float] = {}
    split: dict[str, tuple[float, float]] = {}
    if threads > 1:
        measured = threads in MEASURED_THREADS
        one_thread = dict(SHIPPED.one_thread) if measured else {}
        for fam, lim in pol.one_thread.items():  # tuned per family
            one_thread.update(dict.fromkeys(routines(fam), lim))
        split = dict(SHIPPED.split) if measured else {}
        for name, lo in pol.split_from.items():
            split[name] = (0.0, 0.0) if math.isinf(lo) else (lo, SHIPPED.split[name][1])
    rates = {f"{f}/{c}": v for (f, c), v in pol.cpu_rates.items()} if pol.threads == threads else {}
    cfg = dataclasses.replace(SHIPPED, threads=threads, limits=_frozen(limits), windows=_frozen(windows),
                              one_thread=_frozen(one_thread), split=_frozen(split), rank_gemm=_frozen(rank_gemm),
                              cpu_rates=_frozen(rates))
    return dataclasses.replace(cfg, gpu_ask=cfg.gpu_min_flops) if gpu else cfg
