"""Where tileblas.blas sends Level-3 work.

``level3(name, *args, **kwargs)`` takes a routine name (gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm,
trsm) and the arguments of the matching array-level kernel in :mod:`tileblas.kernels._openblas`, already checked
and converted by the caller, and computes in place on the *current runtime*
(:func:`tileblas.runtime.get_runtime`: the innermost ``with tileblas.Runtime(...)`` of this context, else
the process default).  It is the one seam between the drop-in API and the execution engine.  The runtime
module is imported on the first call, so importing tileblas.blas stays cheap.

The path policy (:mod:`tileblas.policy._paths`: one native call on all threads, the recursion, or tiles) is
read on the first call; :func:`apply_policy` then hands the C fast path in front of the public routines
(``tileblas.blas._fastpath``, where it exists) the flop limits below which it may make the one native call
itself.  ``tileblas tune`` calls :func:`apply_policy` again after storing new crossovers.

The C small-call path stands in for the default runtime tileblas made itself; when that runtime closes or
the default is replaced, the runtime calls :func:`_release`, which this module registers with
:func:`tileblas.runtime._runtime.on_release` before it first turns the path on (the runtime never imports
tileblas.blas).
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

__all__ = ["level3", "apply_policy", "fastpath_limits", "fastpath_off", "fastpath_windows", "one_thread_limits",
           "rank_gemm_limits", "set_small_path", "shipped_split_ranges", "split_ranges",
           "set_split_ranges"]

_APPLIED = [False]


#: Per family, the flops (complex counted 4x) below which the small-call path runs a call on tileblas'
#: one-thread OpenBLAS instance: OpenBLAS splits even tiny trmm calls among its threads (it has no size
#: threshold there), and waking them costs more than they bring.  Measured (C path, one instance against
#: the other, interleaved, 7 rounds, square operands): trmm on one thread 2.2-2.5x faster at order 32 in
#: s/d, 1.1-1.2x at 32 in c/z and at 64 in s/d, even at 96 (s/d), slower from 128 (s/d) and 64 (c/z);
#: trsm and the other families gain nothing (OpenBLAS keeps small calls on one thread itself).
ONE_THREAD_FLOPS = {"trmm": 2.7e5}

#: gemm/symm/hemm calls of the C path with flops in [lo, hi) (complex counted 4x) on several threads run
#: as independent parts (columns of C; rows for symm/hemm side R; each at least an eighth of the order,
#: of m for gemm) on the one-thread instance, at once on tileblas' thread pool (``_fastpath.set_split``):
#: OpenBLAS 0.3.34's own threading gains less from a second thread than two halves do.  Measured on 2
#: cores against SciPy (interleaved, best of 7): zhemm/zsymm n = 64-256 0.93-0.98x with OpenBLAS's
#: threading, 1.05-1.73x split; dsymm/ssymm n = 64-256 1.0-1.3x -> 1.1-2.1x; square gemm n = 64-512
#: 0.96-1.29x -> 1.03-1.95x (zgemm 128 0.96x -> 1.28x); square symm n = 512 about equal either way;
#: with 64 right-hand sides at n = 512 (parts of 32 columns) split lost 0.78-0.94x, hence the eighth.
#: C-ordered symm/hemm inputs run split too: a C-ordered a is used as it lies (hemm through conj(a)) and
#: each part copies its own piece of b to Fortran order; C-ordered n = 64-256 against SciPy: 1.2-3.4x
#: split, 0.94-2.7x with the copies made first and OpenBLAS's threading.  gemm calls with an operand the
#: C path copies (conjugated without a transpose) are not split.
SPLIT_FLOPS = (2.5e5, 3e8)
#: The lower end of that range for cgemm/zgemm: below it a split complex gemm lost to one call (cgemm
#: n = 32 and 40, 2.6e5 and 5.1e5 flops: 0.74x and 0.97x SciPy split, 0.96x and 0.98x not; from 48,
#: 8.8e5 flops, split won: cgemm 1.47x, zgemm 1.27x, against 1.00x and 0.83x not).
SPLIT_COMPLEX_GEMM_LO = 7e5


#: syrk/herk calls of the C path with flops in [lo, hi) (n(n+1)k, complex 4x) on several threads run as
#: strips of the stored triangle, one per thread, each a diagonal block (a rank-k update on the
#: one-thread instance) and the rectangle beside it (one gemm), strips of equal flops, at once on the
#: pool.  Measured against SciPy (interleaved, best of 5, Fortran order unless said): dsyrk n = 128-512
#: 1.0x -> 1.4-3.4x (256 with k = 64: 0.94x -> 3.39x), n = 1024 0.95-0.97x -> 1.01-1.06x; zherk
#: n = 64-256 1.0x -> 1.3-1.6x, 1024 with k = 64 0.95x -> 1.16x; C-ordered zherk 0.92-1.26x -> 1.09-1.82x,
#: csyrk 1.11-1.65x -> 1.17-1.99x; dsyrk n = 64 (2.7e5 flops) about equal either way.  The same split of
#: syr2k/her2k (two gemms per rectangle) lost to OpenBLAS's own threading (zher2k/cher2k n = 64
#: 0.70-0.81x against 1.04-1.11x), so it is not used for them.  Per precision: in single precision
#: the split gained nothing from about 1e7 flops on and lost from about 1e8 (ssyrk/cherk n = 512-768
#: equal either way; cherk 768 with k = 64 0.995x against 1.025x, ssyrk 1536 with k = 64 0.92x against
#: 0.97x, csyrk 1024 with k = 64 0.99x against 1.08x), in double precision it still won at n = 1024
#: (zherk with k = 64 1.16x against 0.95x, dsyrk square 1.005x against 0.95x) and was even at 1536.
RANK_SPLIT_FLOPS = {"s": (5e5, 5e7), "d": (5e5, 5e9), "c": (5e5, 5e7), "z": (5e5, 5e9)}

#: trmm/trsm calls of the C path with flops in [lo, hi) (m n times the order of a, complex 4x) on several
#: threads run as independent parts of b (columns for side L, rows for side R; each at least an eighth
#: of the order, 16 at least) on the one-thread instance, at once on the pool; a b not written in place
#: is copied by each part, its own piece, on the thread that then works on it.  Measured against SciPy
#: with b copied (interleaved, 3-5 rounds, best of each, split against OpenBLAS's own threading in the
#: same process; Fortran order side L, C order side R): from order 64-96 on split won or tied at every
#: point up to 1024 (dtrsm n = 64-128 1.05-1.13x -> 1.23-1.45x, ztrmm/ctrmm 48-128 1.02-1.10x ->
#: 1.27-1.44x, s/d/c/z trsm 192-512 0.99-1.23x -> 1.04-1.26x, 768-1024 1.01-1.08x -> 1.05-1.13x) and
#: was even at 2048 (dtrmm 1.01x against 1.00x, ztrmm 1.05x against 1.09x).  Below, the small calls:
#: side R order 32 split lost (ctrmm 0.50x against 1.83x, dtrsm 0.75x against 1.56x), ctrsm side L 48
#: (4.4e5 flops) 0.93x against 0.98x, strsm 64 (2.6e5) 0.99x against 1.03x, ctrmm side R 64 (1.0e6)
#: 1.05x against 1.25x; trmm below the one-thread limit stays on one thread (strmm 64 split 1.14x
#: against 1.73x).
TRI_SPLIT_FLOPS = {"s": (5e5, 4e9), "d": (5e5, 4e9), "c": (1.5e6, 1.5e10), "z": (1.5e6, 1.5e10)}


#: Real syrk/syr2k calls of the C path with a new c (c None, beta zero) and op(a) = a in Fortran order
#: (trans 0 on a Fortran-ordered a, or trans 1 on a C-ordered one) below these flops (n(n+1)k, twice that
#: for syr2k) run as one gemm over the whole n x n C (two for syr2k), the other triangle zeroed:
#: (limit where that gemm is one call, limit where it runs split in column parts on the pool, as gemm
#: calls of its flops do).  OpenBLAS's gemm has small-matrix kernels, its syrk/syr2k pack and walk the
#: triangle, so at small orders gemm does twice the flops in less time.  Measured on 2 cores against SciPy
#: (interleaved, best of 7; ratio = SciPy time / tileblas time, rank-k call -> gemm route): split,
#: dsyrk n = 16-96 0.96-1.25x -> 1.62-2.11x, 120 1.39x -> 1.63x, 128 1.53-1.68x -> 1.15-1.34x (lost),
#: with k = 64 n = 64-160 1.01-2.10x -> 2.11-2.27x, 192 2.10x -> 1.53x; ssyrk alike (n = 96 1.37x ->
#: 2.13x, 128 1.94x -> 1.65x); dsyr2k n = 16-104 0.97-1.05x -> 1.25-1.53x, 112-128 equal, with k = 64
#: n = 144 1.04x -> 1.36x, 120-129 equal, 176 1.10x -> 0.98x; ssyr2k n = 16-112 1.16-1.38x ->
#: 1.28-1.95x, 120 1.19x -> 1.08x, with k = 64 n = 176 1.25x -> 1.16x.  One call (one thread):
#: dsyrk n = 32-80 0.97-1.02x -> 1.11-1.92x, 96 equal, with k = 64 n = 96 0.97x -> 1.15x, 128 1.01x ->
#: 0.65x; dsyr2k n = 48 1.04x -> 1.22x, 64 equal, 80 1.01x -> 0.89x; ssyrk n = 80 1.26x -> 1.51x, with
#: k = 64 n = 128 1.13x -> 0.90x; ssyr2k n = 64 1.32x -> 1.39x, 80 1.29x -> 1.23x.  Not taken with
#: trans 'T' on the Fortran data (gemm 'T', 'N' is slower: dsyr2k n = 48 0.98x -> 0.76x) nor for a c
#: given (a scratch copy of c cost what gemm saved: dsyrk n = 96 1.32x -> 1.01x).
RANK_GEMM_FLOPS = {"dsyrk": (6e5, 1.8e6), "ssyrk": (6e5, 1.8e6), "dsyr2k": (3e5, 1.8e6), "ssyr2k": (4e5, 2.8e6)}


def one_thread_limits() -> dict[str, float]:
    """Per family, the flops below which the C path runs a call on the one-thread instance: what
    ``tileblas tune`` measured (the path policy's ``one_thread``), else :data:`ONE_THREAD_FLOPS`."""
    from tileblas.policy import _paths

    out = dict(ONE_THREAD_FLOPS)
    out.update(_paths.policy().one_thread)
    return out


def rank_gemm_limits() -> dict[str, tuple[float, float]]:
    """Per real syrk/syr2k routine, the gemm route's limits in force: what ``tileblas tune`` measured (the
    path policy's ``rank_gemm``), else :data:`RANK_GEMM_FLOPS`."""
    from tileblas.policy import _paths

    out = dict(RANK_GEMM_FLOPS)
    out.update(_paths.policy().rank_gemm)
    return out


def shipped_split_ranges() -> dict[str, tuple[float, float]]:
    """Per routine name ('dgemm', 'zherk', ...), the shipped flops [lo, hi) of the C path's calls run split."""
    from tileblas.blas._level3 import LEVEL3_FAMILIES

    out = {p + f: SPLIT_FLOPS for f in ("gemm", "symm", "hemm") for p in LEVEL3_FAMILIES[f]}
    out.update({p + "gemm": (SPLIT_COMPLEX_GEMM_LO, SPLIT_FLOPS[1]) for p in "cz"})
    out.update({p + f: RANK_SPLIT_FLOPS[p] for f in ("syrk", "herk") for p in LEVEL3_FAMILIES[f]})
    out.update({p + f: TRI_SPLIT_FLOPS[p] for f in ("trmm", "trsm") for p in LEVEL3_FAMILIES[f]})
    return out


def split_ranges() -> dict[str, tuple[float, float]]:
    """Per routine name, the flops [lo, hi) of the C path's calls run split, in force: the lower ends
    ``tileblas tune`` measured (the path policy's ``split_from``; never split: an empty range) over the
    shipped ranges of :func:`shipped_split_ranges`, whose upper ends stay."""
    from tileblas.policy import _paths

    out = shipped_split_ranges()
    for name, lo in _paths.policy().split_from.items():
        out[name] = (0.0, 0.0) if math.isinf(lo) else (lo, out[name][1])
    return out


def set_split_ranges(ranges: dict[str, tuple[float, float]]) -> bool:
    """Hand the C path ``ranges`` (``{'dgemm': (lo, hi)}``; routines not named: never split) for the
    runtime it stands in for, on that runtime's OpenBLAS instance and the pool; False (nothing changed)
    where the path is off or cannot split (one thread, no pool)."""
    from tileblas.kernels import _openblas

    rt = _FAST[0]
    threads = int(getattr(rt, "_policy_threads", 0) or 0)
    if rt is None or threads < 2:
        return False
    lib = _openblas.get_library(threads)
    if lib.pool_slot is None:
        return False
    from tileblas.blas import _fastpath  # type: ignore[attr-defined]

    get = lib._ctypes.cast(lib._symbol("openblas_get_num_threads"), lib._ctypes.c_void_p).value
    _fastpath.set_split(lib.pool_slot, get, ranges)
    return True


def fastpath_limits() -> dict[str, float]:
    """Per routine, the flops below which the policy in force does not tile (finite;
    ``sys.float_info.max`` for "never"); for trmm/trsm also per precision and side (keys
    ``'dtrmm/L'``...).  Below them a call is one native call on all threads, except the trmm/trsm shapes
    of :func:`fastpath_windows`."""
    from tileblas._dtypes import DTYPE_OF
    from tileblas.policy import _paths

    pol = _paths.policy()
    out = {k: min(v, sys.float_info.max) for k, v in pol.level3_limits().items()}
    for fam in ("trmm", "trsm"):
        for p in "sdcz":
            for side in "LR":
                out[f"{p}{fam}/{side}"] = min(pol.tile_limit(fam, DTYPE_OF[p].char), sys.float_info.max)
    return out


def fastpath_windows() -> dict[str, tuple[float, float, float] | None]:
    """Per trmm/trsm precision and side (keys ``'dtrmm/L'``...), the shapes the recursion may take:
    ``(min_order, rhs_lo, rhs_hi)`` (:func:`tileblas.policy._recursion.recursion_window`), or None.  The
    C path leaves exactly those calls to the Python path, which alone runs the recursion."""
    from tileblas._dtypes import DTYPE_OF
    from tileblas.policy._recursion import recursion_window

    return {f"{p}{fam}/{side}": recursion_window(fam, DTYPE_OF[p].char, side)
            for fam in ("trmm", "trsm") for p in "sdcz" for side in "LR"}


def apply_policy(reload: bool = False) -> dict[str, float] | None:
    """Read the path policy (re-read its file with ``reload``) and pass its limits to the C fast path.
    Returns the limits passed, or None when there is no fast path module."""
    from tileblas.policy import _paths

    if reload:
        _paths.reload()
    _APPLIED[0] = True
    try:
        from tileblas.blas import _fastpath  # type: ignore[attr-defined]
    except ImportError:
        return None
    setter = getattr(_fastpath, "set_level3_limits", None)
    if setter is None:
        return None
    limits = fastpath_limits()
    setter(limits)
    _fastpath.set_recursion_windows(fastpath_windows())
    if _FAST[0] is not None:  # the C path's other limits (one thread, the gemm route) from the policy too
        _sync_fastpath(_FAST[0])
    return limits


def level3(name: str, *args: Any, **kwargs: Any) -> None:
    """Compute the Level-3 routine ``name`` in place on the current runtime (see module docstring)."""
    from tileblas.runtime._runtime import get_runtime

    if not _APPLIED[0]:
        apply_policy()
    rt = get_runtime()
    rt.run(name, *args, **kwargs)
    if _FAST[0] is not rt and _ALLOWED[0]:
        _sync_fastpath(rt)


#: The runtime the C small-call path stands in for (None: the path is off).
_FAST: list[Any] = [None]
#: Whether the small-call path may be used at all ($TILEBLAS_SMALL_PATH=0 or :func:`set_small_path` turn
#: it off: every call then takes the Python path and the runtime).
_ALLOWED = [os.environ.get("TILEBLAS_SMALL_PATH", "1").strip() not in ("0", "off", "false", "no")]


def set_small_path(enabled: bool) -> bool:
    """Allow (True) or forbid (False) the C small-call path of the Level-3 routines; returns the previous
    setting.  Forbidden, every call goes through the Python path and the current runtime (whose profile
    then records it)."""
    prev = _ALLOWED[0]
    _ALLOWED[0] = bool(enabled)
    if not enabled:
        fastpath_off()
    return prev


def _sync_fastpath(rt: Any) -> None:
    """Turn the C small-call path on when ``rt`` is the default runtime tileblas made itself (not one a
    caller made or set: its profile records every call) and takes the path policy's native path (host
    devices only), with the OpenBLAS instance of its thread count; else off."""
    try:
        from tileblas.blas import _fastpath  # type: ignore[attr-defined]
    except ImportError:
        return
    from tileblas.kernels import _openblas
    from tileblas.runtime import _runtime

    threads = int(getattr(rt, "_policy_threads", 0) or 0)
    ok = (_ALLOWED[0] and _runtime._CURRENT.get() is None and _runtime._DEFAULT is rt and threads > 0 and not rt.closed
          and getattr(rt, "_made_default", False))
    if not ok:
        fastpath_off()
        return
    from tileblas.blas._level3 import LEVEL3_FAMILIES

    _runtime.on_release(_release)  # off again when rt closes or stops being the default
    lib = _openblas.get_library(threads)
    _fastpath.set_level3_library({p + f: lib.fortran(p + f) for f, ps in LEVEL3_FAMILIES.items() for p in ps})
    if hasattr(_fastpath, "set_rank_gemm"):
        _fastpath.set_rank_gemm(rank_gemm_limits())
    if threads > 1:
        one = _openblas.get_library(1)
        # every family's one-thread entry points: below ONE_THREAD_FLOPS, and for the parts of split calls
        _fastpath.set_one_thread(one_thread_limits(), {p + f: one.fortran(p + f) for f, ps in LEVEL3_FAMILIES.items()
                                                       for p in ps})
    else:
        _fastpath.set_one_thread({}, {})
    _FAST[0] = rt
    if not set_split_ranges(split_ranges()):
        _fastpath.set_split(-1, 0, {})
    _fastpath.set_state(True, _runtime._CURRENT)


def _release(rt: Any) -> None:
    """The runtime's release hook: the small-call path goes off when the runtime it stands in for closes
    (``rt``), or when the default runtime is replaced (``rt`` None)."""
    if rt is None or _FAST[0] is rt:
        fastpath_off()


def fastpath_off() -> None:
    """Turn the C small-call path off until the next Python-path call decides again (the default runtime
    was replaced or closed)."""
    _FAST[0] = None
    try:
        from tileblas.blas import _fastpath  # type: ignore[attr-defined]
    except ImportError:
        return
    _fastpath.set_state(False, None)
