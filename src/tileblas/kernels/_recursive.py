"""Recursive in-place TRMM and TRSM cast into large GEMMs (Charara, Ltaief, Keyes, Euro-Par 2016, sec. 4).

What this module owns
    * The recursion itself, written once against a tiny *array backend* (:class:`ArrayBackend`: a
      ``gemm``, a leaf ``trmm``/``trsm``, ``asfortran``), so the same code runs on NumPy arrays through
      the GIL-free kernel layer (:class:`HostBackend`) and on CuPy arrays through cuBLAS
      (:mod:`tileblas.kernels._gpu_recursive`).
    * The recursion is first turned into a *plan*: a list of operations on index ranges (:func:`plan`).
      Executing the plan in order is the recursive algorithm; the asynchronous GPU variant reads the same
      plan to know which sub-blocks each operation needs, so it can ship them ahead of the compute.
    * :func:`recursive_trmm` / :func:`recursive_trsm`: drop-in replacements for
      :func:`tileblas.kernels._openblas.trmm` / :func:`~tileblas.kernels._openblas.trsm` (same argument order, in place,
      legacy BLAS semantics).  Like the kernel layer they trust their inputs; :mod:`tileblas.linalg`
      validates user input.
    * The recursive triangular inverse (TRTRI) and triangular product (LAUUM) used by POTRI.

What it must not touch
    User-input validation (tileblas.linalg), scheduling (the runtime), optional imports, and every layer
    above the kernels: the stopping size (from this machine's performance models where ``tileblas tune``
    built them) and the choice of the recursion over OpenBLAS's own routine are decided by the callers
    (:mod:`tileblas.devices.cpu`, :mod:`tileblas.linalg`, through :mod:`tileblas.policy._recursion`) and
    passed in; without them the measured defaults here apply.

The recursion (for the triangular dimension n, the rows of B for side 'L', the columns for side 'R'):
split n = n1 + n2 with n1 the largest power of two strictly below n (n/2 when n is a power of two),
partition A into the diagonal blocks A11 (n1 x n1), A22 (n2 x n2) and the stored off-diagonal block
(A12 for uplo 'U', A21 for uplo 'L').  With op(A) "effectively upper" when uplo='U' and trans='N' or
uplo='L' and trans in 'TC', and X = op(A) block-wise, the eight variants are (B1, B2 the halves of B):

    TRMM  L upper: B1 = a X11 B1;  B1 += a X12 B2;  B2 = a X22 B2
          L lower: B2 = a X22 B2;  B2 += a X21 B1;  B1 = a X11 B1
          R upper: B2 = a B2 X22;  B2 += a B1 X12;  B1 = a B1 X11
          R lower: B1 = a B1 X11;  B1 += a B2 X21;  B2 = a B2 X22
    TRSM  L upper: B2 = X22 \\ a B2;  B1 = a B1 - X12 B2;  B1 = X11 \\ B1
          L lower: B1 = X11 \\ a B1;  B2 = a B2 - X21 B1;  B2 = X22 \\ B2
          R upper: B1 = a B1 / X11;  B2 = a B2 - B1 X12;  B2 = B2 / X22
          R lower: B2 = a B2 / X22;  B1 = a B1 - B2 X21;  B1 = B1 / X11

Each GEMM reads a half of B that the next recursive call has not yet overwritten (TRMM) or that the
previous call has already finished (TRSM): that is the dependency order.  Below the stopping size the
native trmm/trsm runs.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import numpy as np

from tileblas._tuning import Tuning, get_tuning
from tileblas.kernels import _openblas
from tileblas.kernels._openblas import colmajor
from tileblas.kernels._native import call as _native_call
from tileblas.kernels._threadpool import cpu_count

__all__ = [
    "ArrayBackend",
    "HostBackend",
    "Leaf",
    "Gemm",
    "plan",
    "split_point",
    "execute",
    "normalize",
    "run_recursive",
    "run_panels",
    "recursive_trmm",
    "recursive_trsm",
    "recursive_trtri",
    "recursive_lauum",
    "DEFAULT_STOP",
    "DEFAULT_STOP_WIDE",
    "WIDE_RHS",
    "default_stop",
    "DEFAULT_STOP_TRTRI",
    "DEFAULT_STOP_LAUUM",
    "PANEL_RHS_MAX",
    "SingularTriangularError",
]

_SHIPPED = Tuning()

#: Shipped defaults of the recursion's stopping sizes, kept under their old names; the values in force are
#: :func:`tileblas.get_tuning`'s (``recursion_stop``, ``recursion_stop_wide``, ``wide_rhs``,
#: ``recursion_stop_trtri``, ``recursion_stop_lauum``, ``panel_rhs_max``; the measurements behind them:
#: docs/measurements/recursive.md, "The tunables and the figures behind their defaults").
DEFAULT_STOP = _SHIPPED.recursion_stop
DEFAULT_STOP_WIDE = _SHIPPED.recursion_stop_wide
WIDE_RHS = _SHIPPED.wide_rhs
DEFAULT_STOP_TRTRI = _SHIPPED.recursion_stop_trtri
DEFAULT_STOP_LAUUM = _SHIPPED.recursion_stop_lauum
PANEL_RHS_MAX = _SHIPPED.panel_rhs_max


def default_stop(free: int) -> int:
    """The default stopping size for ``free`` columns on B's non-triangular side (the :class:`Tuning` in
    force: ``recursion_stop`` below ``wide_rhs`` columns, ``recursion_stop_wide`` from there on)."""
    t = get_tuning()
    return t.recursion_stop_wide if free >= t.wide_rhs else t.recursion_stop


class SingularTriangularError(np.linalg.LinAlgError):
    """A triangular matrix has an exactly zero diagonal element (``index`` is 1-based)."""

    def __init__(self, index: int, what: str = "triangular matrix") -> None:
        self.index = int(index)
        super().__init__(f"the {what} is singular: diagonal element {self.index} is exactly zero")


# ---------------------------------------------------------------------------------------------------
# Array backends
# ---------------------------------------------------------------------------------------------------


class ArrayBackend(Protocol):
    """What the recursion needs from a device: Level-3 kernels on 2-D views, in place.

    A backend may also offer ``run_plan(kind, ops, alpha, a, b, side, uplo, trans, diag) -> bool``, to
    run a whole plan its own faster way (:meth:`HostBackend.run_plan` issues the native calls directly,
    from ``tileblas.kernels._native``, without a view or a kernel-layer check per operation); returning False
    leaves the plan to :func:`execute`'s loop over ``gemm``/``trmm``/``trsm``.
    """

    def gemm(self, alpha: Any, a: Any, b: Any, beta: Any, c: Any, transa: str, transb: str) -> None: ...

    def trmm(self, alpha: Any, a: Any, b: Any, side: str, uplo: str, transa: str, diag: str) -> None: ...

    def trsm(self, alpha: Any, a: Any, b: Any, side: str, uplo: str, transa: str, diag: str) -> None: ...

    def asfortran(self, x: Any) -> Any: ...


class HostBackend:
    """NumPy arrays through :mod:`tileblas.kernels._openblas` on one OpenBLAS instance (GIL released)."""

    def __init__(self, lib: _openblas.BlasLibrary | None = None) -> None:
        self.lib = lib or _openblas.get_library(1)

    def gemm(self, alpha: Any, a: np.ndarray, b: np.ndarray, beta: Any, c: np.ndarray, transa: str,
             transb: str) -> None:
        _openblas.gemm(alpha, a, b, beta, c, transa, transb, lib=self.lib)

    def trmm(self, alpha: Any, a: np.ndarray, b: np.ndarray, side: str, uplo: str, transa: str,
             diag: str) -> None:
        _openblas.trmm(alpha, a, b, side, uplo, transa, diag, lib=self.lib)

    def trsm(self, alpha: Any, a: np.ndarray, b: np.ndarray, side: str, uplo: str, transa: str,
             diag: str) -> None:
        _openblas.trsm(alpha, a, b, side, uplo, transa, diag, lib=self.lib)

    def asfortran(self, x: np.ndarray) -> np.ndarray:
        return np.asfortranarray(x)

    def run_plan(self, kind: str, ops: Sequence[Leaf | Gemm], alpha: Any, a: np.ndarray, b: np.ndarray,
                 side: str, uplo: str, trans: str, diag: str) -> bool:
        """Run a whole plan as direct native calls (no per-operation slicing or argument checks).

        ``b`` must be column-major, ``a`` too (:func:`normalize` flips a row-major triangle).
        Returns False, having done nothing, when the arrays do not qualify; :func:`execute` then runs
        the plan through the kernel layer.  Each native call costs well under a microsecond of Python,
        against several for a kernel-layer call: 1-2 % of a 1024 x 256 solve.
        """
        lda, ldb = colmajor(a), colmajor(b)
        if not lda or not ldb or a.dtype != b.dtype:
            return False
        prefix = _openblas.DTYPES[b.dtype]
        isz = b.itemsize
        s = _openblas._SCALAR_CODE[prefix]  # noqa: SLF001 - the kernel layer's own table
        leaf = self.lib.fortran(prefix + kind)
        gemm = self.lib.fortran(prefix + "gemm")
        coefs = _coefs(alpha)
        leaf_sig = "vccccii" + s + "AiAi"
        gemm_sig = "vcciii" + s + "AiAi" + s + "Ai"
        rows, cols = b.shape
        left = side == "L"
        call = _native_call
        for op in ops:
            if type(op) is Leaf:
                lo, hi = op.lo, op.hi
                m, n, boff = (hi - lo, cols, lo * isz) if left else (rows, hi - lo, lo * ldb * isz)
                call(leaf, leaf_sig, side, uplo, trans, diag, m, n, coefs[op.coef],
                     a, (lo + lo * lda) * isz, lda, b, boff, ldb)
            else:
                (s0, s1), (d0, d1) = op.src, op.dst
                aoff = (op.r0 + op.c0 * lda) * isz
                if left:
                    call(gemm, gemm_sig, trans, "N", d1 - d0, cols, s1 - s0, coefs[op.ca],
                         a, aoff, lda, b, s0 * isz, ldb, coefs[op.cb], b, d0 * isz, ldb)
                else:
                    call(gemm, gemm_sig, "N", trans, rows, d1 - d0, s1 - s0, coefs[op.ca],
                         b, s0 * ldb * isz, ldb, a, aoff, lda, coefs[op.cb], b, d0 * ldb * isz, ldb)
        return True

    def __repr__(self) -> str:
        return f"HostBackend(threads={self.lib.threads})"


# ---------------------------------------------------------------------------------------------------
# The plan: the recursion as a list of operations on index ranges of the triangular dimension
# ---------------------------------------------------------------------------------------------------


class Leaf(NamedTuple):
    """Native trmm/trsm on the diagonal block [lo:hi, lo:hi] and B's slice lo:hi; coefficient 'alpha'
    or 'one'."""

    lo: int
    hi: int
    coef: str


class Gemm(NamedTuple):
    """B[dst] := ca * (op(A[r0:r1, c0:c1]) B[src] or B[src] op(A[...])) + cb * B[dst].

    ``ca`` is 'alpha' or 'minus_one', ``cb`` is 'one' or 'alpha'.  ``src``/``dst`` are ranges of the
    triangular dimension of B (rows for side 'L', columns for side 'R').
    """

    r0: int
    r1: int
    c0: int
    c1: int
    src: tuple[int, int]
    dst: tuple[int, int]
    ca: str
    cb: str


def split_point(n: int) -> int:
    """n1 of the paper's split: n/2 for a power of two, else the largest power of two below n."""
    if n < 2:
        raise ValueError(f"cannot split a dimension of size {n}")
    p = 1 << (n.bit_length() - 1)
    return n // 2 if p == n else p


@functools.lru_cache(maxsize=512)
def plan(kind: str, n: int, side: str, uplo: str, trans: str, stop: int) -> tuple[Leaf | Gemm, ...]:
    """The recursive algorithm for ``kind`` ('trmm' or 'trsm') as an ordered tuple of operations.

    Executing the operations in order (see :func:`execute`) is the recursion.  Every stored block of the
    triangle (diagonal leaves and off-diagonal GEMM blocks) is read by exactly one operation.
    """
    if stop < 1:
        raise ValueError(f"stop must be >= 1; got {stop}")
    upper = (uplo == "U") == (trans == "N")
    ops: list[Leaf | Gemm] = []

    def rec(lo: int, hi: int, coef: str) -> None:
        n_ = hi - lo
        if n_ <= stop:
            ops.append(Leaf(lo, hi, coef))
            return
        mid = lo + split_point(n_)
        # stored off-diagonal block of A (global indices)
        off = (lo, mid, mid, hi) if uplo == "U" else (mid, hi, lo, mid)
        one, two = (lo, mid), (mid, hi)
        if kind == "trmm":
            # coef is always 'alpha' in TRMM
            if side == "L":
                first, src, dst = (one, two, one) if upper else (two, one, two)
            else:
                first, src, dst = (two, one, two) if upper else (one, two, one)
            last = two if first == one else one
            rec(*first, coef)
            ops.append(Gemm(*off, src, dst, "alpha", "one"))
            rec(*last, coef)
        else:
            if side == "L":
                first = two if upper else one
            else:
                first = one if upper else two
            last = two if first == one else one
            rec(*first, coef)
            ops.append(Gemm(*off, first, last, "minus_one", coef))
            rec(*last, "one")

    rec(0, n, "alpha")
    return tuple(ops)


def _coefs(alpha: Any) -> dict[str, Any]:
    """The plan's coefficient names as scalars of alpha's type (complex for complex dtypes)."""
    one = complex(1.0) if isinstance(alpha, complex) else 1.0
    return {"alpha": alpha, "one": one, "minus_one": -one}


def execute(kind: str, backend: ArrayBackend, ops: Sequence[Leaf | Gemm], alpha: Any, a: Any, b: Any,
            side: str, uplo: str, trans: str, diag: str) -> None:
    """Run a :func:`plan` on arrays ``a`` (triangular) and ``b`` (updated in place) with ``backend``."""
    run_plan = getattr(backend, "run_plan", None)
    if run_plan is not None and run_plan(kind, ops, alpha, a, b, side, uplo, trans, diag):
        return
    coefs = _coefs(alpha)
    leaf = backend.trmm if kind == "trmm" else backend.trsm
    left = side == "L"
    for op in ops:
        if type(op) is Leaf:
            lo, hi = op.lo, op.hi
            leaf(coefs[op.coef], a[lo:hi, lo:hi], b[lo:hi] if left else b[:, lo:hi], side, uplo, trans, diag)
        else:
            blk = a[op.r0:op.r1, op.c0:op.c1]
            (s0, s1), (d0, d1) = op.src, op.dst
            if left:
                backend.gemm(coefs[op.ca], blk, b[s0:s1], coefs[op.cb], b[d0:d1], trans, "N")
            else:
                backend.gemm(coefs[op.ca], b[:, s0:s1], blk, coefs[op.cb], b[:, d0:d1], "N", trans)


# ---------------------------------------------------------------------------------------------------
# Entry points with the kernel layer's argument order
# ---------------------------------------------------------------------------------------------------


def _flip(uplo: str) -> str:
    return "L" if uplo == "U" else "U"


def _norm_trans(trans: str, dtype: Any) -> str:
    return "T" if trans == "C" and np.dtype(dtype).kind != "c" else trans


def normalize(a: Any, b: Any, side: str, uplo: str, trans: str,
              asfortran: Callable[[Any], Any]) -> tuple[Any, Any, str, str, str, Any]:
    """Describe the problem so that B and A are column-major (ld usable by BLAS) without copying either
    if possible.

    Returns (a, b_work, side, uplo, trans, writeback) where ``writeback`` is the array to copy ``b_work``
    back into afterwards (None when ``b_work`` is a view of the caller's B).  A row-major B is handled by
    the transposed problem: B^T := alpha B^T op(A)^T, i.e. side flips and A.T is triangular in the other
    half with the same operator letter.  A row-major triangle is its column-major transpose in the other
    half with the other operator letter (op(A) = op'(A.T)); only a conjugate transpose stays as it is
    (no BLAS letter conjugates without transposing).
    """
    writeback = None
    if not colmajor(b):
        if colmajor(b.T):
            b = b.T
            a = a.T
            side = "R" if side == "L" else "L"
            uplo = _flip(uplo)
        else:
            writeback = b
            b = asfortran(b)
    if not colmajor(a):
        if not colmajor(a.T):
            a = asfortran(a)
        elif trans != "C":
            a, uplo, trans = a.T, _flip(uplo), "T" if trans == "N" else "N"
    return a, b, side, uplo, trans, writeback


def _scalar(alpha: Any, dtype: Any) -> Any:
    if np.dtype(dtype).kind == "c":
        return complex(alpha)
    return float(np.real(alpha))


def run_recursive(kind: str, backend: ArrayBackend, alpha: Any, a: Any, b: Any, side: str, uplo: str,
                  transa: str, diag: str, stop: int) -> None:
    """The recursion on any backend: layout normalization, trivial cases, plan, execute."""
    alpha = _scalar(alpha, b.dtype)
    transa = _norm_trans(transa, b.dtype)
    if b.shape[0] == 0 or b.shape[1] == 0:
        return
    if alpha == 0:
        b[...] = 0  # BLAS semantics: A is not referenced
        return
    a, bw, side, uplo, transa, writeback = normalize(a, b, side, uplo, transa, backend.asfortran)
    n = bw.shape[0] if side == "L" else bw.shape[1]
    ops = plan(kind, n, side, uplo, transa, int(stop))
    execute(kind, backend, ops, alpha, a, bw, side, uplo, transa, diag)
    if writeback is not None:
        writeback[...] = bw


_POOL = None
_POOL_LOCK = threading.Lock()


def _pool(workers: int):
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < workers:  # noqa: SLF001 - our own executor
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tileblas-rec")
        return _POOL


def _host(kind: str, alpha: Any, a: np.ndarray, b: np.ndarray, side: str, uplo: str, transa: str, diag: str,
          lib: _openblas.BlasLibrary | None, stop: int | None, threads: int | None) -> None:
    free = b.shape[1] if side == "L" else b.shape[0]  # the independent (non-triangular) dimension
    stop = default_stop(free) if stop is None else int(stop)
    if lib is not None:
        return run_recursive(kind, HostBackend(lib), alpha, a, b, side, uplo, transa, diag, stop)
    if threads is None:
        threads = cpu_count()
    threads = max(1, int(threads))
    if threads > 1 and 0 < free <= get_tuning().panel_rhs_max and free >= threads:
        return run_panels(kind, alpha, a, b, side, uplo, transa, diag, stop, threads)
    return run_recursive(kind, HostBackend(_openblas.get_library(threads)), alpha, a, b, side, uplo, transa,
                         diag, stop)


def run_panels(kind: str, alpha: Any, a: np.ndarray, b: np.ndarray, side: str, uplo: str, transa: str,
               diag: str, stop: int, threads: int) -> None:
    """Split B along its independent dimension into ``threads`` panels, one recursion per panel, each
    on single-threaded BLAS in its own Python thread (the kernel layer releases the GIL)."""
    free = b.shape[1] if side == "L" else b.shape[0]
    edges = [free * i // threads for i in range(threads + 1)]
    backend = HostBackend(_openblas.get_library(1))
    panels = [(b[:, e0:e1] if side == "L" else b[e0:e1]) for e0, e1 in zip(edges, edges[1:]) if e1 > e0]
    futs = [_pool(threads).submit(run_recursive, kind, backend, alpha, a, p, side, uplo, transa, diag, stop)
            for p in panels[1:]]
    run_recursive(kind, backend, alpha, a, panels[0], side, uplo, transa, diag, stop)
    for f in futs:
        f.result()


def recursive_trmm(alpha: Any, a: np.ndarray, b: np.ndarray, side: str = "L", uplo: str = "U",
                   transa: str = "N", diag: str = "N", lib: _openblas.BlasLibrary | None = None,
                   stop: int | None = None, threads: int | None = None) -> None:
    """b := alpha*op(a)@b (side 'L') or alpha*b@op(a) (side 'R') in place, by the recursive algorithm.

    Same arguments as :func:`tileblas.kernels._openblas.trmm` plus ``stop`` (recursion stopping size, default
    :func:`default_stop`; the callers pass this machine's models' value,
    :func:`tileblas.policy._recursion.recursion_stop`) and ``threads`` (host cores to use when ``lib`` is
    None; default: all).  With ``lib`` given, every kernel
    runs on that OpenBLAS instance.  Inputs are trusted.
    """
    _host("trmm", alpha, a, b, side, uplo, transa, diag, lib, stop, threads)


def recursive_trsm(alpha: Any, a: np.ndarray, b: np.ndarray, side: str = "L", uplo: str = "U",
                   transa: str = "N", diag: str = "N", lib: _openblas.BlasLibrary | None = None,
                   stop: int | None = None, threads: int | None = None) -> None:
    """Solve op(a)@x = alpha*b (side 'L') or x@op(a) = alpha*b (side 'R') for x in place, recursively.

    Arguments as :func:`recursive_trmm`.
    """
    _host("trsm", alpha, a, b, side, uplo, transa, diag, lib, stop, threads)


# ---------------------------------------------------------------------------------------------------
# TRTRI and LAUUM (POTRI's two steps) by the same recursion, on column-major host arrays
# ---------------------------------------------------------------------------------------------------


def _lapack_leaf(lib: _openblas.BlasLibrary, name: str, a: np.ndarray, *flags: str) -> int:
    prefix = _openblas.DTYPES[a.dtype]
    info = np.zeros(1, np.int32)
    n = a.shape[0]
    sig = "v" + "c" * len(flags) + "iaia"
    lib.call(prefix + name, sig, *flags, n, a, colmajor(a), info)
    return int(info[0])


#: ``faster(order, rhs, threads) -> bool``: whether an off-diagonal TRMM of TRTRI/LAUUM (a triangle of
#: ``order``, ``rhs`` right-hand sides, on ``threads`` BLAS threads) takes the recursion rather than
#: OpenBLAS's own dtrmm; the callers pass :func:`tileblas.policy._recursion.recursion_faster`.
RecursionChoice = Callable[[int, int, int], bool]


@dataclass
class _TriConfig:
    lib: _openblas.BlasLibrary
    stop: int
    #: stopping size of the off-diagonal TRMMs' recursion; None: recursion only where ``faster`` says so
    trmm_stop: int | None = None
    #: the choice for the off-diagonal TRMMs when ``trmm_stop`` is None; None: always OpenBLAS's dtrmm
    faster: RecursionChoice | None = None


def _tri_config(lib: _openblas.BlasLibrary | None, stop: int | None, default: int,
                faster: RecursionChoice | None) -> _TriConfig:
    lib = lib or _openblas.get_library(2)
    if stop is None:
        return _TriConfig(lib, default, None, faster)
    return _TriConfig(lib, int(stop), max(int(stop), 1), faster)


def _offdiag_trmm(cfg: _TriConfig, backend: HostBackend, alpha: float, a: np.ndarray, b: np.ndarray,
                  side: str, uplo: str, trans: str, diag: str = "N") -> None:
    """b := alpha op(a) b or alpha b op(a) for TRTRI/LAUUM: the recursion where chosen."""
    stop = cfg.trmm_stop
    if stop is None:
        rhs = b.shape[1] if side == "L" else b.shape[0]
        if cfg.faster is None or not cfg.faster(a.shape[0], rhs, cfg.lib.threads):
            _openblas.trmm(alpha, a, b, side, uplo, trans, diag, lib=cfg.lib)
            return
        stop = default_stop(rhs)
    run_recursive("trmm", backend, alpha, a, b, side, uplo, trans, diag, stop)


def recursive_trtri(a: np.ndarray, uplo: str = "U", diag: str = "N", lib: _openblas.BlasLibrary | None = None,
                    stop: int | None = None, faster: RecursionChoice | None = None) -> None:
    """Invert the uplo triangle of the column-major square ``a`` in place (the other one is untouched).

    inv([[U11, U12], [0, U22]]) = [[V11, -V11 U12 V22], [0, V22]]: invert both diagonal blocks, then
    two TRMMs on the off-diagonal block: recursive ones with ``stop`` given, else recursive where
    ``faster(order, rhs, threads)`` says so (:data:`RecursionChoice`; None: OpenBLAS's dtrmm).  Raises
    :class:`SingularTriangularError` before writing anything when a diagonal element is exactly zero
    (non-unit diagonal).
    """
    n = a.shape[0]
    if not colmajor(a):
        raise ValueError("recursive_trtri needs a column-major array")
    if diag == "N" and n:
        zero = np.flatnonzero(np.diagonal(a) == 0)
        if zero.size:
            raise SingularTriangularError(int(zero[0]) + 1)
    cfg = _tri_config(lib, stop, get_tuning().recursion_stop_trtri, faster)
    backend = HostBackend(cfg.lib)
    _trtri(a, uplo, diag, cfg, backend)


def _trtri(a: np.ndarray, uplo: str, diag: str, cfg: _TriConfig, backend: HostBackend) -> None:
    n = a.shape[0]
    if n <= cfg.stop:
        info = _lapack_leaf(cfg.lib, "trtri", a, uplo, diag)
        if info > 0:  # unreachable after the diagonal check, kept as a guard
            raise SingularTriangularError(info)
        return
    n1 = split_point(n)
    a11, a22 = a[:n1, :n1], a[n1:, n1:]
    _trtri(a11, uplo, diag, cfg, backend)
    _trtri(a22, uplo, diag, cfg, backend)
    if uplo == "U":
        a12 = a[:n1, n1:]
        _offdiag_trmm(cfg, backend, -1.0, a11, a12, "L", "U", "N", diag)   # -V11 U12
        _offdiag_trmm(cfg, backend, 1.0, a22, a12, "R", "U", "N", diag)    # (...) V22
    else:
        a21 = a[n1:, :n1]
        _offdiag_trmm(cfg, backend, -1.0, a22, a21, "L", "L", "N", diag)   # -W22 L21
        _offdiag_trmm(cfg, backend, 1.0, a11, a21, "R", "L", "N", diag)    # (...) W11


def recursive_lauum(a: np.ndarray, uplo: str = "U", lib: _openblas.BlasLibrary | None = None,
                    stop: int | None = None, faster: RecursionChoice | None = None) -> None:
    """U := U U^H (uplo 'U') or L := L^H L (uplo 'L') on the uplo triangle of column-major ``a``.

    [[V11, V12], [0, V22]] -> [[V11 V11^H + V12 V12^H, V12 V22^H], [., V22 V22^H]]: LAUUM(V11), a
    rank-k update of V11 by V12, a TRMM of V12 by V22^H (recursive as in :func:`recursive_trtri`),
    LAUUM(V22), in that order.
    """
    if not colmajor(a):
        raise ValueError("recursive_lauum needs a column-major array")
    cfg = _tri_config(lib, stop, get_tuning().recursion_stop_lauum, faster)
    _lauum(a, uplo, cfg, HostBackend(cfg.lib))


def _lauum(a: np.ndarray, uplo: str, cfg: _TriConfig, backend: HostBackend) -> None:
    n = a.shape[0]
    if n <= cfg.stop:
        _lapack_leaf(cfg.lib, "lauum", a, uplo)
        return
    n1 = split_point(n)
    a11, a22 = a[:n1, :n1], a[n1:, n1:]
    _lauum(a11, uplo, cfg, backend)
    if uplo == "U":
        a12 = a[:n1, n1:]
        _openblas.herk(1.0, a12, 1.0, a11, "U", "N", lib=cfg.lib)
        _offdiag_trmm(cfg, backend, 1.0, a22, a12, "R", "U", "C")
    else:
        a21 = a[n1:, :n1]
        _openblas.herk(1.0, a21, 1.0, a11, "L", "C", lib=cfg.lib)
        _offdiag_trmm(cfg, backend, 1.0, a22, a21, "L", "L", "C")
    _lauum(a22, uplo, cfg, backend)
