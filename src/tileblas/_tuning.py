"""The tunables of tileblas in one config object: :class:`Tuning`.

What it owns
    Every number the library decides with and a user may want to change: flop limits of the small and
    shared paths, the tile sizes the planner may pick and its cost model, when the trmm/trsm kernels run
    the recursion and where the recursion stops, how often stored models are re-read, the cluster's tile
    sizes.  One immutable :class:`Tuning` is in force for the process (:func:`get_tuning`); change it with
    :func:`set_tuning` (a call that returns the previous one, or a ``with`` block that restores it).
    The path policy's crossovers, measured by ``tileblas tune``, live in :mod:`tileblas.policy`; these are
    the shipped defaults beside them, used where nothing was measured.

What it must not touch
    Anything of tileblas: it is the lowest module of the package.  The figures behind each default are in
    the docs with the benchmark that measures them, not here:
    docs/measurements/runtime.md, "The tunables and the figures behind their defaults", and
    docs/measurements/recursive.md, "The tunables and the figures behind their defaults".
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["Tuning", "get_tuning", "set_tuning"]


@dataclass(frozen=True)
class Tuning:
    """Tunables of the runtime, the recursion and the model lookups.

    Attributes
    ----------
    small_flops : float
        Level-3 calls below this many flops run as one native call on one device: tiling cannot pay
        (``benchmarks/bench_runtime.py --crossover`` measures it).
    shared_flops : float
        On host workers only, calls below this many flops run as one native call on all the workers' BLAS
        threads together (the default of ``Runtime(shared_flops=...)``).
    tile_candidates : tuple of int
        Tile sizes the default may pick (tried largest first).
    max_tiles_per_dim : int
        A plan cuts no dimension into more tiles than this (it grows its tiles instead).
    max_tile_calls : int
        A call whose tile size would make more tile-kernel calls than this (about 5-10 us of overhead
        each) is refused at once, naming the smallest tile size that stays within it.
    deterministic_devices : int
        In deterministic mode the partitioning is chosen as if the runtime had this many devices.
    task_overhead_s : float
        The planner's cost model: fixed cost of one tile task, seconds.
    core_flops : float
        The planner's cost model: one core's DGEMM rate, flop/s.
    tile_rate_knee : float
        The planner's cost model: tile edge at which a tile kernel runs at half its large-tile rate.
    tri_kernel_rel : float
        The planner's cost model: a TRMM/TRSM tile kernel's rate relative to DGEMM's on the same tile.
    recursive_min_order, recursive_min_threads : int
        The trmm/trsm kernels run the recursion instead of OpenBLAS's routine on a device with at least
        ``recursive_min_threads`` BLAS threads, for a triangle of at least ``recursive_min_order``...
    recursive_rhs : tuple of (int, int)
        ... and a number of right-hand sides within these bounds (unless ``tileblas tune`` measured a rule).
    recursive_left_prefixes : str
        ... with the triangle on the left (side 'L'), only for these precisions; with the triangle on the
        right the rule above holds for all four.
    recursion_stop, recursion_stop_wide, wide_rhs : int
        Where the host TRMM/TRSM recursion stops when no model suggests a size: ``recursion_stop`` for B
        with fewer than ``wide_rhs`` columns on its non-triangular side, ``recursion_stop_wide`` from there.
    recursion_stop_trtri, recursion_stop_lauum : int
        Leaf sizes of the recursive TRTRI and LAUUM (below them LAPACK's routine runs).
    panel_rhs_max : int
        With at most this many right-hand sides the host recursion splits B into one panel per core, each
        on single-threaded BLAS in its own thread (0: off).
    gpu_recursion_stop : int
        Where the GPU recursion stops.
    model_recheck_s : float
        Seconds between two checks of a model repository file for changes.
    cluster_tile_candidates : tuple of int
        Tile sizes the default may pick on a Dask cluster (kept smallest first: the largest that still
        gives every worker enough tiles wins).
    """

    small_flops: float = 2.0 * 192**3
    shared_flops: float = 2.0 * 1280**3
    tile_candidates: tuple = (1024, 768, 512, 384, 256, 192, 128)
    max_tiles_per_dim: int = 1024
    max_tile_calls: int = 1 << 20
    deterministic_devices: int = 4
    task_overhead_s: float = 25e-6
    core_flops: float = 3.0e10
    tile_rate_knee: float = 96.0
    tri_kernel_rel: float = 0.8
    recursive_min_order: int = 1024
    recursive_min_threads: int = 2
    recursive_rhs: tuple = (32, 128)
    recursive_left_prefixes: str = "sc"
    recursion_stop: int = 256
    recursion_stop_wide: int = 512
    wide_rhs: int = 256
    recursion_stop_trtri: int = 512
    recursion_stop_lauum: int = 4096
    panel_rhs_max: int = 0
    gpu_recursion_stop: int = 128
    model_recheck_s: float = 2.0
    cluster_tile_candidates: tuple = (512, 1024, 2048, 4096)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            default = f.default
            if isinstance(default, tuple):
                if (not isinstance(value, (tuple, list)) or not value
                        or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value)):
                    raise ValueError(f"Tuning.{f.name} must be a non-empty tuple of ints >= 0; got {value!r}")
                object.__setattr__(self, f.name, tuple(int(v) for v in value))
            elif isinstance(default, str):
                if not isinstance(value, str):
                    raise ValueError(f"Tuning.{f.name} must be a str; got {value!r}")
            elif isinstance(default, int):
                if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 0:
                    raise ValueError(f"Tuning.{f.name} must be an int >= 0; got {value!r}")
                object.__setattr__(self, f.name, int(value))
            else:
                try:
                    ok = not isinstance(value, bool) and float(value) >= 0.0
                except (TypeError, ValueError):
                    ok = False
                if not ok:
                    raise ValueError(f"Tuning.{f.name} must be a number >= 0; got {value!r}")
                object.__setattr__(self, f.name, float(value))
        for name, largest_first in (("tile_candidates", True), ("cluster_tile_candidates", False)):
            value = getattr(self, name)
            if min(value) < 1:
                raise ValueError(f"Tuning.{name} must hold tile sizes >= 1; got {value!r}")
            object.__setattr__(self, name, tuple(sorted(set(value), reverse=largest_first)))
        if not isinstance(self.recursive_left_prefixes, str) or set(self.recursive_left_prefixes) - set("sdcz"):
            raise ValueError(f"Tuning.recursive_left_prefixes must be letters of 'sdcz'; "
                             f"got {self.recursive_left_prefixes!r}")
        if len(self.recursive_rhs) != 2 or self.recursive_rhs[0] > self.recursive_rhs[1]:
            raise ValueError(f"Tuning.recursive_rhs must be (low, high) with low <= high; got {self.recursive_rhs!r}")

    def replace(self, **changes: Any) -> "Tuning":
        """A copy with ``changes`` (field names as keywords), checked like the constructor."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(f"Tuning has no field {unknown[0]!r}; fields: {', '.join(sorted(names))}")
        return dataclasses.replace(self, **changes)


_LOCK = threading.Lock()
_CURRENT = [Tuning()]


def get_tuning() -> Tuning:
    """The :class:`Tuning` in force for the process."""
    return _CURRENT[0]


class set_tuning:
    """Put a :class:`Tuning` in force: ``tuning`` itself, or the one in force with ``changes``.

    A call changes it for the process and returns an object whose ``previous`` is the one it replaced;
    used as ``with set_tuning(min_tile=256): ...`` the previous one is restored when the block ends.

    >>> import tileblas
    >>> with tileblas.set_tuning(tile_candidates=(512, 256)):   # runtimes made here tile by 512 or 256
    ...     pass
    """

    def __init__(self, tuning: Tuning | None = None, **changes: Any) -> None:
        if tuning is not None and not isinstance(tuning, Tuning):
            raise TypeError(f"tuning must be a tileblas.Tuning or None; got {type(tuning).__name__}")
        with _LOCK:
            base = tuning if tuning is not None else _CURRENT[0]
            new = base.replace(**changes) if changes else base
            self.previous = _CURRENT[0]
            self.tuning = new
            _CURRENT[0] = new

    def __enter__(self) -> Tuning:
        return self.tuning

    def __exit__(self, *exc: Any) -> None:
        with _LOCK:
            _CURRENT[0] = self.previous

    def __repr__(self) -> str:
        return f"set_tuning({self.tuning!r})"
