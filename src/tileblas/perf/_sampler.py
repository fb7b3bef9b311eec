"""The Sampler (paper section II): repeated, statistically summarised timings of BLAS calls.

Design note
    :func:`time_callable` is the one timing loop: one untimed initialisation call, then ``reps`` calls
    timed with :func:`time.perf_counter_ns`, each optionally preceded (outside the timed region) by a
    ``prepare`` step that restores overwritten operands and, for the out-of-cache locality, flushes the
    caches by writing a buffer larger than the last-level cache.  It returns a :class:`Timing` with min,
    mean, std, median and max (seconds).

    :class:`Sampler` times a routine of :data:`~tileblas.policy._calls.ROUTINES` for a flag combination and
    a size tuple, through exactly the :class:`~tileblas.perf._runner.CallRunner` methods the algorithms call,
    on views of operand buffers with a fixed leading dimension (the paper fixes it too), so models carry
    the same per-call overhead as an execution.  :meth:`Sampler.sample_blas` times any routine of
    :mod:`tileblas.blas` (the SciPy drop-in) for an argument tuple, and :meth:`Sampler.sample_function`
    any callable, e.g. tileblas' own higher-level routines.  Hardware counters are not sampled.

What it must not touch
    Models and the repository.  Nothing here is asserted about timings; it only measures.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from tileblas.perf._runner import CallRunner
from tileblas.policy._calls import routine_spec

__all__ = ["Timing", "time_callable", "Sampler", "LOCALITIES", "STATS", "DEFAULT_LD", "leading_dimension"]

#: Leading dimension of every operand the sampler times and every algorithm the benchmark runs.  Like the
#: paper (which fixes 2500), models and executions share one leading dimension; it is not a power of two,
#: whose cache-set conflicts would make timings depend on it rather than on the sizes.
DEFAULT_LD = 1032


def leading_dimension(n: int) -> int:
    """The fixed leading dimension for operands of up to ``n`` rows (:data:`DEFAULT_LD`, or ``n + 8``)."""
    return DEFAULT_LD if n <= DEFAULT_LD else int(n) + 8

#: Memory localities the sampler supports (paper section II-B).
LOCALITIES = ("in-cache", "out-of-cache")
#: Statistics every timing and every model carries.
STATS = ("min", "median", "mean", "max", "std")


@dataclass(frozen=True)
class Timing:
    """Statistics of repeated timings, in seconds.

    Attributes
    ----------
    min, median, mean, max, std : float
        Statistics over the timed repetitions (the first, initialising call is excluded).
    reps : int
        Number of timed repetitions (samples).
    """

    min: float
    median: float
    mean: float
    max: float
    std: float
    reps: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_ns(cls, ns: Sequence[int]) -> "Timing":
        a = np.asarray(ns, dtype=np.float64) * 1e-9
        return cls(float(a.min()), float(np.median(a)), float(a.mean()), float(a.max()), float(a.std()), len(a))


def _check_reps(reps: int) -> int:
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 1:
        raise ValueError(f"reps must be a positive integer; got {reps!r}")
    return int(reps)


def time_callable(fn: Callable[[], Any], reps: int = 5, prepare: Callable[[], Any] | None = None) -> Timing:
    """Time ``fn()`` ``reps`` times after one untimed initialising call.

    Parameters
    ----------
    fn : callable
        What to time; called without arguments.
    reps : int
        Timed repetitions.
    prepare : callable, optional
        Called before every call, outside the timed region (restore operands, flush caches).

    Returns
    -------
    Timing
    """
    reps = _check_reps(reps)
    clock = time.perf_counter_ns
    if prepare is not None:
        prepare()
    fn()  # initialisation call: excluded (paper section II-B)
    ns = []
    for _ in range(reps):
        if prepare is not None:
            prepare()
        t0 = clock()
        fn()
        ns.append(clock() - t0)
    return Timing.from_ns(ns)


class Sampler:
    """Times BLAS routines for argument tuples (paper section II-C).

    Parameters
    ----------
    threads : int
        Threads of the tileblas-owned OpenBLAS instance that runs the calls.
    locality : {"in-cache", "out-of-cache"}
        Operands in cache (warmed by the preceding calls) or evicted before every call.
    reps : int
        Timed repetitions per sample point (the first call is excluded).
    ld : int
        Leading dimension of every operand buffer (grown if a size exceeds it); default
        :data:`DEFAULT_LD`.
    flush_bytes : int
        Size of the buffer written to evict the caches for ``out-of-cache``.
    seed : int
        Seed of the operand values.
    """

    def __init__(self, threads: int = 1, locality: str = "in-cache", reps: int = 5, ld: int = DEFAULT_LD,
                 flush_bytes: int = 64 << 20, seed: int = 0) -> None:
        if locality not in LOCALITIES:
            raise ValueError(f"locality must be one of {LOCALITIES}; got {locality!r}")
        if isinstance(ld, bool) or not isinstance(ld, (int, np.integer)) or ld < 1:
            raise ValueError(f"ld must be a positive integer; got {ld!r}")
        self.threads = int(threads)
        self.locality = locality
        self.reps = _check_reps(reps)
        self.ld = int(ld)
        self.flush_bytes = int(flush_bytes)
        self.executor = CallRunner(self.threads)
        self._rng = np.random.default_rng(seed)
        self._buffers: dict[str, np.ndarray] = {}
        self._flush: np.ndarray | None = None
        #: timed repetitions so far (the paper's "samples")
        self.samples = 0

    # ------------------------------------------------------------------ operands
    def _buffer(self, name: str, rows: int, cols: int, kind: str) -> np.ndarray:
        ld = max(self.ld, rows)
        buf = self._buffers.get(name)
        if buf is None or buf.shape[0] < ld or buf.shape[1] < cols:
            size = (ld, max(cols, ld if buf is None else buf.shape[1]))
            buf = np.asfortranarray(self._rng.uniform(-1.0, 1.0, size))
            if kind == "tri":  # well conditioned for both triangles: small off-diagonal, unit-size diagonal
                buf *= 1.0 / size[0]
                d = np.arange(min(size))
                buf[d, d] = 1.0 + self._rng.uniform(0.0, 1.0, len(d))
            self._buffers[name] = buf
        return buf[:rows, :cols]

    def _flush_caches(self) -> None:
        if self._flush is None:
            self._flush = np.zeros(max(1, self.flush_bytes // 8))
        self._flush += 1.0

    def _operands(self, routine: str, flags: tuple[str, ...], sizes: tuple[int, ...]):
        ex = self.executor
        tri = lambda n: self._buffer("T", n, n, "tri")  # noqa: E731
        if routine == "dgemm":
            ta, tb = flags
            m, n, k = sizes
            a = self._buffer("A", m, k, "gen") if ta == "N" else self._buffer("A", k, m, "gen")
            b = self._buffer("B", k, n, "gen") if tb == "N" else self._buffer("B", n, k, "gen")
            c = self._buffer("C", m, n, "gen")
            return (lambda: ex.gemm(ta, tb, 1.0, a, b, 1.0, c)), None
        if routine in ("dtrsm", "dtrmm"):
            side, uplo, ta = flags
            m, n = sizes
            a = tri(m if side == "L" else n)
            b = self._buffer("B", m, n, "gen")
            keep = b.copy(order="F")
            fn = ex.trsm if routine == "dtrsm" else ex.trmm
            return (lambda: fn(side, uplo, ta, "N", 0.5, a, b)), (lambda: b.__setitem__(Ellipsis, keep))
        if routine == "dsyrk":
            uplo, tr = flags
            n, k = sizes
            a = self._buffer("A", n, k, "gen") if tr == "N" else self._buffer("A", k, n, "gen")
            c = self._buffer("C", n, n, "gen")
            return (lambda: ex.syrk(uplo, tr, 1.0, a, 1.0, c)), None
        if routine == "dtrti2":
            (uplo,) = flags
            (n,) = sizes
            a = self._buffer("A", n, n, "tri")
            keep = a.copy(order="F")
            return (lambda: ex.trti2(uplo, "N", a)), (lambda: a.__setitem__(Ellipsis, keep))
        if routine == "dtrsyl":
            m, n = sizes
            lo = np.tril(self._buffer("T", m, m, "tri"))
            up = np.asfortranarray(np.triu(self._buffer("U", n, n, "tri")))
            x = self._buffer("C", m, n, "gen")
            keep = x.copy(order="F")
            lo = np.asfortranarray(lo)
            return (lambda: ex.trsyl(lo, up, x)), (lambda: x.__setitem__(Ellipsis, keep))
        raise ValueError(f"routine {routine!r} has no sampler operands")  # pragma: no cover

    # ------------------------------------------------------------------ public
    def sample(self, routine: str, flags: Sequence[str], sizes: Sequence[int], reps: int | None = None) -> Timing:
        """Time one routine invocation ``routine(flags..., sizes...)``.

        Parameters
        ----------
        routine : str
            A name of :data:`~tileblas.policy._calls.ROUTINES`, e.g. ``"dtrsm"``.
        flags : sequence of str
            One letter per flag argument of the routine, e.g. ``("L", "L", "N")`` for side, uplo, transa.
        sizes : sequence of int
            The size arguments, e.g. ``(m, n)``.
        reps : int, optional
            Override of the sampler's repetitions.

        Returns
        -------
        Timing
        """
        spec = routine_spec(routine)
        flags = tuple(str(f).upper() for f in flags)
        if len(flags) != len(spec.flag_names) or any(f not in v for f, v in zip(flags, spec.flag_values)):
            raise ValueError(
                f"flags for {routine} must be one letter each for {spec.flag_names} from "
                f"{spec.flag_values}; got {flags!r}"
            )
        sizes = tuple(int(s) for s in sizes)
        if len(sizes) != len(spec.size_names) or any(s < 1 for s in sizes):
            raise ValueError(f"sizes for {routine} must be {len(spec.size_names)} positive integers "
                             f"{spec.size_names}; got {sizes!r}")
        fn, restore = self._operands(routine, flags, sizes)
        return self._time(fn, restore, reps)

    def sample_function(self, fn: Callable[..., Any], *args: Any, reps: int | None = None,
                        restore: Callable[[], Any] | None = None, **kwargs: Any) -> Timing:
        """Time ``fn(*args, **kwargs)`` (any tileblas routine) with this sampler's locality and repetitions."""
        if not callable(fn):
            raise TypeError(f"fn must be callable; got {type(fn).__name__}")
        return self._time(lambda: fn(*args, **kwargs), restore, reps)

    def sample_blas(self, name: str, *args: Any, reps: int | None = None, **kwargs: Any) -> Timing:
        """Time ``tileblas.blas.<name>(*args, **kwargs)``, the SciPy-compatible routine, for an argument tuple.

        Raises
        ------
        ValueError
            If :mod:`tileblas.blas` has no routine ``name``.
        """
        from tileblas import blas

        fn = getattr(blas, name, None)
        if fn is None or not callable(fn):
            raise ValueError(f"name must be a routine of tileblas.blas; got {name!r}")
        return self.sample_function(fn, *args, reps=reps, **kwargs)

    def _time(self, fn: Callable[[], Any], restore: Callable[[], Any] | None, reps: int | None) -> Timing:
        reps = self.reps if reps is None else _check_reps(reps)
        flush = self.locality == "out-of-cache"
        if flush and restore is not None:
            def prepare() -> None:
                restore()
                self._flush_caches()
        elif flush:
            prepare = self._flush_caches
        else:
            prepare = restore
        t = time_callable(fn, reps, prepare)
        self.samples += t.reps
        return t
