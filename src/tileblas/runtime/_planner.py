"""The planner: one Level-3 BLAS call -> tile tasks with dependencies (BLASX sections III and IV-A).

What it owns
    * Checking a call's arguments once (shapes, dtypes, flags, aliasing), in the kernel layer's argument
      order (:mod:`tileblas.kernels._openblas`).
    * The trivial and small-problem decisions and the default tile size.
    * Partitioning: the output matrix is cut into a grid of T x T tiles (edge tiles smaller), and **one
      task computes one output tile** C_ij, following equations (1a)-(1f) of the paper.  A task is a short
      list of *steps*, each one tile-kernel call (gemm, symm, syrk, ... on tiles), applied in a fixed k
      order, so the result of a tile does not depend on where it runs.
    * Dependencies where the mathematics has them: in-place TRSM (row/column i waits for the rows/columns
      it is solved against) and in-place TRMM (a tile is overwritten only after every task that reads its
      old value has finished).  Everything else is dependency free.
    * Split-k: when C has fewer tiles than the runtime wants tasks (skinny outputs, long k), GEMM and the
      rank-k family split their k loop into chunks computed into workspace tiles, and one reduction task
      per C tile adds the partial products in a fixed order.

What it must not touch
    Threads, devices and timing (the scheduler), or array data (tasks name tiles, they do not hold data).

Tiles are named by :class:`Tile` ``(matrix id, i, j)``; the matrix id (:func:`matrix_id`) is runtime-wide
and stable for the same user array (memory address, shape, strides, dtype) and tile size across calls, so
a Tile is itself the key that locality scores and device tile caches use.  Transposed operands are read tile by tile (section
III-C): the tile ``(k, i)`` of A with a transpose flag handed to the tile kernel, never a copied matrix.
Index arithmetic uses Python integers, so matrices of more than 2**31 elements work; each tile kernel call
sees only tile dimensions and the operand's leading dimension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from tileblas._flags import flag as _flag
from tileblas._tuning import Tuning, get_tuning
from tileblas.kernels._openblas import DTYPES, int_limit

__all__ = [
    "ROUTINES",
    "Tile",
    "Task",
    "Plan",
    "TileGrid",
    "matrix_id",
    "bind_arguments",
    "check_call",
    "flop_count",
    "default_tile_size",
    "plan_call",
    "SMALL_FLOPS",
    "SHARED_FLOPS",
    "TILE_CANDIDATES",
    "MIN_TILE",
    "MAX_TILE",
    "MAX_TILES_PER_DIM",
    "bounded_tile",
    "check_tile_size",
    "check_native_dims",
]

#: Level-3 routines the runtime plans, with the positional parameters and flag defaults of the kernel
#: layer's array-level functions.
ROUTINES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "gemm": (("alpha", "a", "b", "beta", "c"), {"transa": "N", "transb": "N"}),
    "symm": (("alpha", "a", "b", "beta", "c"), {"side": "L", "uplo": "U"}),
    "hemm": (("alpha", "a", "b", "beta", "c"), {"side": "L", "uplo": "U"}),
    "syrk": (("alpha", "a", "beta", "c"), {"uplo": "U", "trans": "N"}),
    "herk": (("alpha", "a", "beta", "c"), {"uplo": "U", "trans": "N"}),
    "syr2k": (("alpha", "a", "b", "beta", "c"), {"uplo": "U", "trans": "N"}),
    "her2k": (("alpha", "a", "b", "beta", "c"), {"uplo": "U", "trans": "N"}),
    "trmm": (("alpha", "a", "b"), {"side": "L", "uplo": "U", "transa": "N", "diag": "N"}),
    "trsm": (("alpha", "a", "b"), {"side": "L", "uplo": "U", "transa": "N", "diag": "N"}),
}

_SHIPPED = Tuning()
#: Shipped defaults, kept under their old names for code that reads them; the values in force are
#: :func:`tileblas.get_tuning`'s (the measurements behind each:
#: docs/measurements/runtime.md, "The tunables and the figures behind their defaults").  Calls below
#: ``small_flops`` run as one native call; on host workers, calls below ``shared_flops`` run as one native
#: call on all the workers' BLAS threads together.
SMALL_FLOPS = _SHIPPED.small_flops
SHARED_FLOPS = _SHIPPED.shared_flops
#: Tile kernels that every device provides (Device.kernel); "axpy" (split-k reduction) is the runtime's.
LEVEL3_KERNELS = frozenset(ROUTINES)
#: The smallest and largest shipped default tile sizes (``tile_candidates``); a plan cuts no dimension into
#: more than MAX_TILES_PER_DIM tiles, growing its tiles instead (``max_tiles_per_dim``).
MIN_TILE = min(_SHIPPED.tile_candidates)
MAX_TILE = max(_SHIPPED.tile_candidates)
MAX_TILES_PER_DIM = _SHIPPED.max_tiles_per_dim
#: Largest dimension one native BLAS call takes (the library uses 32-bit integers).
#: In deterministic mode the partitioning is chosen as if the runtime had this many devices (shipped
#: default of ``deterministic_devices``).
DETERMINISTIC_DEVICES = _SHIPPED.deterministic_devices



class Tile(NamedTuple):
    """A tile: matrix id ``m`` (see :func:`matrix_id`), tile row ``i``, tile column ``j``.  Hashable; it
    is the key locality records and device tile caches use."""

    m: int
    i: int
    j: int


class TileGrid:
    """One operand of a call as a grid of ``tile x tile`` tiles.

    ``id`` is the runtime-wide matrix id that :class:`Tile` names (the same user array seen with the same
    tile size gets the same id in later calls, so locality records and tile caches can recognise it);
    ``rows[i]`` and ``cols[j]`` are the extents of tile row i and tile column j.
    """

    __slots__ = ("array", "tile", "id", "workspace", "rows", "cols", "_views")

    def __init__(self, array: np.ndarray, tile: int, mid: int, workspace: bool = False) -> None:
        self.array = array
        self.tile = tile
        self.id = mid
        self.workspace = workspace
        m, n = array.shape
        self.rows = [min(tile, m - r) for r in range(0, m, tile)]
        self.cols = [min(tile, n - c) for c in range(0, n, tile)]
        self._views: dict = {}

    def view(self, i: int, j: int) -> np.ndarray:
        """The tile (i, j) as a view of the operand (edge tiles are smaller); made once per plan."""
        v = self._views.get((i, j))
        if v is None:
            t = self.tile
            v = self._views[i, j] = self.array[i * t:(i + 1) * t, j * t:(j + 1) * t]
        return v


_IDS: dict = {}
_IDS_LOCK = __import__("threading").Lock()
_NEXT_ID = [0]
_MAX_IDS = 4096


def matrix_id(a: np.ndarray | None, tile: int) -> int:
    """A runtime-wide id for (array memory, shape, strides, dtype, tile size); None: a fresh id."""
    with _IDS_LOCK:
        _NEXT_ID[0] += 1
        fresh = _NEXT_ID[0]
        if a is None:
            return fresh
        key = (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str, tile)
        mid = _IDS.get(key)
        if mid is not None:
            return mid
        if len(_IDS) >= _MAX_IDS:
            _IDS.clear()
        _IDS[key] = fresh
        return fresh


class Task:
    """Compute one output tile.

    Attributes
    ----------
    out : Tile
        The tile the task writes.
    steps : list
        ``(kernel name, args, kwargs)`` tile-kernel calls, in the fixed order they run; ``args`` hold
        :class:`Tile` references where the kernel takes arrays.
    inputs : tuple of Tile
        The tiles the task reads besides its output (the locality score of equation (3) counts them).
    deps : int
        Number of unfinished tasks this one waits for; ``dependents`` are released when it finishes.
    depth : float
        Work (flops) on the longest chain from this task to the end of its call, itself included: the
        remaining critical path, run first.  0 in calls without dependencies.
    label : str
        ``routine[i,j]`` plus a suffix for split-k parts (built on demand).
    """

    __slots__ = ("index", "routine", "suffix", "out", "steps", "flops", "inputs", "deps", "dependents",
                 "depth", "call", "prio")

    def __init__(self, index: int, routine: str, suffix: str, out: Tile, steps: list, flops: float,
                 inputs: tuple) -> None:
        self.index = index
        self.routine = routine
        self.suffix = suffix
        self.out = out
        self.steps = steps
        self.flops = flops
        self.inputs = inputs
        self.deps = 0
        self.dependents: list = []
        self.depth = 0.0
        self.call: Any = None
        self.prio: tuple = ()

    @property
    def label(self) -> str:
        return f"{self.routine}[{self.out.i},{self.out.j}]{self.suffix}"

    def __repr__(self) -> str:
        return f"<Task {self.label} steps={len(self.steps)} deps={self.deps}>"


@dataclass(eq=False)
class Plan:
    """The tasks of one call, and the operands they name (``mats``: matrix id -> TileGrid)."""

    routine: str
    tile: int
    mats: dict
    tasks: list
    path: str = "tiled"
    split: int = 1

    def view(self, t: Tile) -> np.ndarray:
        return self.mats[t.m].view(t.i, t.j)


# ---------------------------------------------------------------------------------------------------
# Check
# ---------------------------------------------------------------------------------------------------


def bind_arguments(name: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Bind a call in the kernel layer's argument order to parameter names (TypeError when it cannot)."""
    if name not in ROUTINES:
        raise ValueError(f"routine must be one of {', '.join(ROUTINES)}; got {name!r}")
    params, flags = ROUTINES[name]
    names = params + tuple(flags)
    if len(args) > len(names):
        raise TypeError(f"{name}() takes at most {len(names)} arguments ({', '.join(names)}); got {len(args)}")
    bound: dict[str, Any] = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")
        if k in bound:
            raise TypeError(f"{name}() got multiple values for argument {k!r}")
        bound[k] = v
    missing = [p for p in params if p not in bound]
    if missing:
        raise TypeError(f"{name}() missing required argument(s): {', '.join(missing)}")
    for k, v in flags.items():
        bound.setdefault(k, v)
    return bound


def _scalar(name: str, value: Any, dtype: np.dtype, real: bool) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not isinstance(value, (int, float, complex, np.number)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number; got {value!r}")
    if real or dtype.kind == "f":
        if isinstance(value, (complex, np.complexfloating)):
            if complex(value).imag != 0:
                raise ValueError(f"{name} must be real for this routine and dtype; got {value!r}")
            value = complex(value).real
        return float(value)
    return complex(value)


def check_call(name: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Check one call and return its normalised arguments (flags upper case, scalars converted).

    Raises ValueError/TypeError naming the bad argument.  Shapes follow the reference BLAS.
    """
    b = bind_arguments(name, args, kwargs)
    arrays = [p for p in ("a", "b", "c") if p in b]
    for p in arrays:
        x = b[p]
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{p} must be a numpy.ndarray; got {type(x).__name__}")
        if x.ndim != 2:
            raise ValueError(f"{p} must be 2-D; got an array of shape {x.shape}")
    dtype = b[arrays[-1]].dtype
    if dtype not in DTYPES:
        raise TypeError(f"{arrays[-1]} must have dtype float32, float64, complex64 or complex128; got {dtype}")
    for p in arrays:
        if b[p].dtype != dtype:
            raise TypeError(f"{p} must have the dtype of {arrays[-1]} ({dtype}); got {b[p].dtype}")
    for f in ROUTINES[name][1]:  # a letter or the drop-in's integer (tileblas._flags: the one rule)
        b[f] = _flag(b[f], f)
    cplx = dtype.kind == "c"
    if name in ("syrk", "syr2k") and cplx and b["trans"] == "C":
        raise ValueError(f"trans must be 'N' or 'T' for complex {name}; got 'C'")
    if name in ("herk", "her2k") and cplx and b["trans"] == "T":
        raise ValueError(f"trans must be 'N' or 'C' for complex {name}; got 'T'")
    if not cplx:
        for f in ("trans", "transa", "transb"):
            if b.get(f) == "C":
                b[f] = "T"
    herm = name in ("herk", "her2k")
    b["alpha"] = _scalar("alpha", b["alpha"], dtype, real=(name == "herk"))
    if "beta" in b:
        b["beta"] = _scalar("beta", b["beta"], dtype, real=herm)
    out = "c" if "c" in b else "b"
    o = b[out]
    if not o.flags.writeable:
        raise ValueError(f"{out} is the output and must be writeable")
    for p in arrays:
        if p != out and np.may_share_memory(b[p], o):
            raise ValueError(f"{out} (the output) must not share memory with {p}")
    _check_shapes(name, b)
    return b


def _check_shapes(name: str, b: dict[str, Any]) -> None:
    def need(cond: bool, what: str) -> None:
        if not cond:
            shapes = ", ".join(f"{p}{b[p].shape}" for p in ("a", "b", "c") if p in b)
            raise ValueError(f"{what} ({name} with {shapes})")

    if name == "gemm":
        a, bb, c = b["a"], b["b"], b["c"]
        m, ka = a.shape if b["transa"] == "N" else a.shape[::-1]
        kb, n = bb.shape if b["transb"] == "N" else bb.shape[::-1]
        need(ka == kb, f"op(a) has {ka} columns but op(b) has {kb} rows")
        need(c.shape == (m, n), f"c must have shape {(m, n)}; got {c.shape}")
    elif name in ("symm", "hemm"):
        a, bb, c = b["a"], b["b"], b["c"]
        need(a.shape[0] == a.shape[1], f"a must be square; got shape {a.shape}")
        need(bb.shape == c.shape, f"b and c must have the same shape; got {bb.shape} and {c.shape}")
        side_dim = c.shape[0] if b["side"] == "L" else c.shape[1]
        need(a.shape[0] == side_dim, f"a must be {side_dim} x {side_dim} for side={b['side']!r}; got {a.shape}")
    elif name in ("syrk", "herk", "syr2k", "her2k"):
        a, c = b["a"], b["c"]
        need(c.shape[0] == c.shape[1], f"c must be square; got shape {c.shape}")
        n = a.shape[0] if b["trans"] == "N" else a.shape[1]
        need(n == c.shape[0], f"op(a) must have {c.shape[0]} rows; got {n}")
        if "b" in b:
            need(b["b"].shape == a.shape, f"b must have the shape of a {a.shape}; got {b['b'].shape}")
    else:
        a, bb = b["a"], b["b"]
        need(a.shape[0] == a.shape[1], f"a must be square; got shape {a.shape}")
        side_dim = bb.shape[0] if b["side"] == "L" else bb.shape[1]
        need(a.shape[0] == side_dim, f"a must be {side_dim} x {side_dim} for side={b['side']!r}; got {a.shape}")


# ---------------------------------------------------------------------------------------------------
# Sizes
# ---------------------------------------------------------------------------------------------------


def _dims(name: str, b: dict[str, Any]) -> tuple[int, int, int]:
    """(m, n, k) of the call: C (or B) is m x n, k the inner dimension."""
    if name == "gemm":
        m, n = b["c"].shape
        k = b["a"].shape[1] if b["transa"] == "N" else b["a"].shape[0]
        return m, n, k
    if name in ("symm", "hemm"):
        m, n = b["c"].shape
        return m, n, (m if b["side"] == "L" else n)
    if name in ("syrk", "herk", "syr2k", "her2k"):
        n = b["c"].shape[0]
        k = b["a"].shape[1] if b["trans"] == "N" else b["a"].shape[0]
        return n, n, k
    m, n = b["b"].shape
    return m, n, (m if b["side"] == "L" else n)


def flop_count(name: str, m: int, n: int, k: int) -> float:
    """Real floating-point operations of a call (complex counts 4x, applied by the caller)."""
    if name == "gemm":
        return 2.0 * m * n * k
    if name in ("symm", "hemm"):
        return 2.0 * m * n * k
    if name in ("syrk", "herk"):
        return 1.0 * n * (n + 1) * k
    if name in ("syr2k", "her2k"):
        return 2.0 * n * (n + 1) * k
    return 1.0 * m * n * k  # trmm, trsm: k is the triangle's order


def check_tile_size(tile_size: Any) -> int | None:
    """The one check of a ``tile_size`` argument (Runtime, its calls, cluster handles): None or an int >= 1."""
    if tile_size is not None and (isinstance(tile_size, bool) or not isinstance(tile_size, (int, np.integer))
                                  or tile_size < 1):
        raise ValueError(f"tile_size must be a positive int or None; got {tile_size!r}")
    return None if tile_size is None else int(tile_size)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def bounded_tile(m: int, n: int, k: int, tile: int) -> int:
    """``tile``, grown where needed so that no dimension of the call has more than
    ``Tuning.max_tiles_per_dim`` tiles."""
    return max(int(tile), _ceil(max(m, n, k), get_tuning().max_tiles_per_dim))


_DIM_NAMES = {
    "gemm": ("m (rows of c)", "n (columns of c)", "k (columns of op(a), rows of op(b))"),
    "symm": ("m (rows of c)", "n (columns of c)", "the order of a"),
    "syrk": ("n (the order of c)", "n (the order of c)", "k (columns of op(a))"),
    "trmm": ("m (rows of b)", "n (columns of b)", "the order of a"),
}


def check_native_dims(name: str, m: int, n: int, k: int) -> None:
    """Raise OverflowError, before any data is touched, when a call of dimensions (m, n, k) cannot be one
    native BLAS call (a dimension above :func:`tileblas.kernels._openblas.int_limit`: 2**31 - 1, or
    2**63 - 1 where the ILP64 library is installed)."""
    limit = int_limit()
    if max(m, n, k) <= limit:
        return
    family = {"hemm": "symm", "herk": "syrk", "syr2k": "syrk", "her2k": "syrk", "trsm": "trmm"}.get(name, name)
    for label, v in zip(_DIM_NAMES[family], (m, n, k)):
        if v > limit:
            raise OverflowError(f"{name}: {label} is {v}, above {limit}, the largest dimension the BLAS "
                                f"library takes in one call; on a Runtime, tile_size= splits it into tiles")


def _output_tiles(name: str, m: int, n: int, t: int) -> int:
    mt, nt = _ceil(m, t), _ceil(n, t)
    if name in ("syrk", "herk", "syr2k", "her2k"):
        return nt * (nt + 1) // 2
    if name in ("trmm", "trsm"):
        # tasks run in chains along the triangle; independent chains = tiles across the other side
        return mt * nt
    return mt * nt


#: The planner's cost model, shipped defaults (``tile_candidates``, ``task_overhead_s``, ``core_flops``,
#: ``tile_rate_knee``, ``tri_kernel_rel`` of :class:`~tileblas.Tuning`): the tile sizes the default may
#: pick, largest first; the fixed cost of one tile task and one core's DGEMM rate, which say how much of a
#: small tile's time is overhead; the tile edge at which a tile kernel runs at half its large-tile rate;
#: a TRMM/TRSM tile kernel's rate relative to DGEMM's.
TILE_CANDIDATES = _SHIPPED.tile_candidates
TASK_OVERHEAD_S = _SHIPPED.task_overhead_s
CORE_FLOPS = _SHIPPED.core_flops
TILE_RATE_KNEE = _SHIPPED.tile_rate_knee
#: Routines whose tasks form dependency chains (in-place update of B along the triangle).
CHAIN_ROUTINES = ("trmm", "trsm")
TRI_KERNEL_REL = _SHIPPED.tri_kernel_rel


#: With more than this many output tiles per device, greedy list scheduling is taken as balanced.
_BALANCED_TILES = 64


def _balance(works: list, devices: int) -> float:
    """Efficiency of greedy list scheduling of ``works`` on ``devices`` equal devices (1 = perfect)."""
    if devices <= 1 or not works:
        return 1.0
    if len(works) > _BALANCED_TILES * devices:
        return 1.0
    loads = [0.0] * devices
    for w in sorted(works, reverse=True):
        i = loads.index(min(loads))
        loads[i] += w
    return sum(works) / (devices * max(loads))


def _tile_works(name: str, m: int, n: int, k: int, t: int) -> list:
    rows = [min(t, m - i) for i in range(0, m, t)]
    cols = [min(t, n - j) for j in range(0, n, t)]
    if name in ("syrk", "herk", "syr2k", "her2k"):
        return [r * c * k * (0.5 if i == j else 1.0) for j, c in enumerate(cols) for i, r in enumerate(rows)
                if i <= j]
    return [float(r) * c * k for r in rows for c in cols]


def _chain_works(m: int, n: int, k: int, t: int) -> tuple[float, float]:
    """Total work of the TRMM/TRSM tasks and the largest task's, in GEMM-flop time units (the flops of
    the call, as :func:`flop_count` counts them, sum to m*n*k; the diagonal steps weigh
    1 / ``Tuning.tri_kernel_rel`` per flop).

    The triangle runs along the dimension of order k (rows when k == m, else columns); the task of
    triangle block d and cross block x combines the triangle blocks before it (one GEMM step each, 2
    flops per multiply-add) and the diagonal block (one TRMM/TRSM step).  Whether the chain runs up or
    down, the works are the same up to where the one partial block falls."""
    tri, other = (m, n) if k == m else (n, m)
    rel = get_tuning().tri_kernel_rel
    total = largest = 0.0
    before = 0
    for d in range(0, tri, t):
        s = min(t, tri - d)
        w = float(s) * (2.0 * before + s / rel)  # per column of the other side
        total += w * other
        largest = max(largest, w * min(t, other))
        before += s
    return total, largest


def _chain_balance(total: float, largest: float, devices: int) -> float:
    """Expected efficiency of demand-driven scheduling of dependency chains on ``devices`` devices.

    Order is imposed by the chains, so the tasks cannot be sorted largest first as in :func:`_balance`;
    greedy list scheduling ends within ``(1 - 1/devices) * largest`` of the average load
    ``total / devices`` (Graham's bound), which is what this charges.  In TRSM the largest tasks (most
    GEMM steps) are the last of each chain, so coarse tiles leave devices idle at the end (the measurement:
    docs/measurements/runtime.md, "Tiles against one OpenBLAS call")."""
    if devices <= 1 or total <= 0.0:
        return 1.0
    avg = total / devices
    return avg / (avg + (1.0 - 1.0 / devices) * largest)


def _tile_rate(t: int) -> float:
    """Relative kernel rate of tile tasks of edge ``t`` (1 for large tiles); see ``Tuning.tile_rate_knee``."""
    return 1.0 / (1.0 + (get_tuning().tile_rate_knee / t) ** 2)


def default_tile_size(name: str, m: int, n: int, k: int, devices: int) -> int:
    """The tile size a call gets when neither the runtime nor the call names one.

    Among the :class:`~tileblas.Tuning`'s ``tile_candidates``, pick the one with the best predicted efficiency: the balance of the
    output tiles over the devices (greedy list scheduling, which is what demand-driven pulling achieves)
    times the share of each task spent in the kernel rather than in fixed per-task costs.  Candidates
    that give fewer than four tiles per device (eight for the dependency chains of in-place TRSM/TRMM)
    are skipped while a smaller candidate exists; ties go to the larger tile.

    For the chains of TRMM/TRSM the balance is :func:`_chain_balance` of the tasks' real (unequal) work,
    times the share of the work done in the faster GEMM kernel rather than the diagonal TRMM/TRSM kernel
    (``Tuning.tri_kernel_rel``); the kernel rate of smaller tiles (:func:`_tile_rate`) weighs against both:
    at n = 4096 on 2 devices this picks 512 (other routines: 1024).
    """
    devices = max(1, devices)
    tuning = get_tuning()
    candidates = tuning.tile_candidates
    chain = name in CHAIN_ROUTINES
    per_device = 8 if chain else 4
    best_t, best_score = candidates[-1], -1.0
    for t in candidates:
        tiles = _ceil(m, t) * _ceil(n, t) if chain else _output_tiles(name, m, n, t)
        # the works themselves only where _balance looks at them (it takes many tiles as balanced)
        works = None if chain or tiles > _BALANCED_TILES * devices else _tile_works(name, m, n, k, t)
        if tiles < per_device * devices and t != candidates[-1]:
            continue
        task_s = 2.0 * min(t, m) * min(t, n) * min(t, max(k, 1)) / tuning.core_flops
        steps = max(1, -(-k // t))
        eff = task_s * steps / (task_s * steps + tuning.task_overhead_s * (1 + steps))
        if chain:
            total, largest = _chain_works(m, n, k, t)
            mix = float(m) * n * k / total if total > 0.0 else 1.0
            score = _chain_balance(total, largest, devices) * mix * _tile_rate(t) * eff
        else:
            score = (1.0 if works is None else _balance(works, devices)) * eff
        if score > best_score + 0.01:
            best_t, best_score = t, score
    return best_t


# ---------------------------------------------------------------------------------------------------
# Partition
# ---------------------------------------------------------------------------------------------------


class _Builder:
    """Collects tasks of one plan; knows the tile extents for flop estimates."""

    def __init__(self, routine: str, tile: int, dtype: np.dtype) -> None:
        self.routine = routine
        self.tile = tile
        self.mats: dict[int, TileGrid] = {}
        self.tasks: list[Task] = []
        self.cplx = 4.0 if dtype.kind == "c" else 1.0
        self.dtype = dtype

    def add_matrix(self, a: np.ndarray, workspace: bool = False) -> int:
        mid = matrix_id(None if workspace else a, self.tile)
        if mid not in self.mats:
            self.mats[mid] = TileGrid(a, self.tile, mid, workspace)
        return mid

    def task(self, out: Tile, steps: list, suffix: str = "") -> Task:
        inputs: dict = {}  # ordered and de-duplicated in linear time (a task may have ~1000 steps)
        for st in steps:
            for x in st[1]:
                if type(x) is Tile:
                    inputs[x] = None
        inputs.pop(out, None)
        flops = 0.0
        mats = self.mats
        om = mats[out.m]
        rc = om.rows[out.i] * om.cols[out.j]
        for kname, args, kw in steps:
            if kname == "gemm":
                a = args[1]
                am = mats[a.m]
                flops += 2.0 * rc * (am.cols[a.j] if args[5] == "N" else am.rows[a.i])
            elif kname == "axpy":
                flops += 2.0 * rc
            else:
                a = args[1]
                am = mats[a.m]
                if kname in ("symm", "hemm"):
                    flops += 2.0 * rc * am.rows[a.i]
                elif kname in ("trmm", "trsm"):
                    flops += 1.0 * rc * am.rows[a.i]
                else:  # syrk, herk, syr2k, her2k on a diagonal tile: the k extent of the a tile
                    inner = am.cols[a.j] if kw.get("trans", "N") == "N" else am.rows[a.i]
                    flops += (1.0 if kname in ("syrk", "herk") else 2.0) * rc * inner
        t = Task(len(self.tasks), self.routine, suffix, out, steps, flops * self.cplx, tuple(inputs))
        self.tasks.append(t)
        return t

    @staticmethod
    def depend(task: Task, on: Task) -> None:
        on.dependents.append(task)
        task.deps += 1


def plan_call(name: str, b: dict[str, Any], tile: int, split_target: int = 0) -> Plan:
    """Partition a checked call into tile tasks.

    Parameters
    ----------
    name : str
        Routine name (a key of :data:`ROUTINES`).
    b : dict
        Arguments as returned by :func:`check_call`.
    tile : int
        Tile size T.
    split_target : int
        When C has fewer tiles than this, GEMM and the rank-k routines split their k loop so that about
        this many tasks exist (0: never split).
    """
    if tile < 1:
        raise ValueError(f"tile_size must be >= 1; got {tile}")
    out = b["c"] if "c" in b else b["b"]
    bl = _Builder(name, tile, out.dtype)
    fn = _PLANNERS[name]
    split = fn(bl, b, split_target)
    plan = Plan(name, tile, bl.mats, bl.tasks, split=split or 1)
    _set_depths(plan.tasks)
    return plan


def _set_depths(tasks: list[Task]) -> None:
    """Work on the longest chain from each task to the end (scheduling priority: critical path first)."""
    if not any(t.dependents for t in tasks):
        return
    for t in reversed(tasks):  # tasks are created in an order where dependents come later
        t.depth = t.flops + max((d.depth for d in t.dependents), default=0.0)


def _k_chunks(nk: int, ntiles: int, split_target: int) -> list[range]:
    if split_target <= 0 or ntiles >= split_target or nk < 2:
        return [range(nk)]
    s = min(nk, _ceil(split_target, ntiles))
    bounds = [nk * p // s for p in range(s + 1)]
    return [range(bounds[p], bounds[p + 1]) for p in range(s)]


def _split_k_tasks(bl: _Builder, out: np.ndarray, cm: int, cells: list, chunks: list, make_steps, label: str,
                   uplo_of=None) -> None:
    """One task per (C tile, k chunk) and, with more than one chunk, one reduction task per C tile.

    Chunk 0 computes with the call's alpha and beta into C itself; chunk s > 0 computes alpha times its
    partial product into workspace s (beta 0); the reduction adds the workspaces into C in order s = 1, 2,
    ...  ``make_steps(i, j, krange, dest, beta_first)`` builds the steps of one chunk.
    """
    if len(chunks) == 1:
        ks = chunks[0]
        for i, j in cells:
            dest = Tile(cm, i, j)
            bl.task(dest, make_steps(i, j, ks, dest, None))
        return
    ws = []
    for _ in chunks[1:]:
        w = np.zeros(out.shape, out.dtype, order="F")
        ws.append(bl.add_matrix(w, workspace=True))
    for i, j in cells:
        first = bl.task(Tile(cm, i, j), make_steps(i, j, chunks[0], Tile(cm, i, j), None), "k0")
        parts = [first]
        for s, w in enumerate(ws, start=1):
            parts.append(bl.task(Tile(w, i, j), make_steps(i, j, chunks[s], Tile(w, i, j), 0.0), f"k{s}"))
        kw = {} if uplo_of is None or i != j else {"uplo": uplo_of}
        steps = [("axpy", (1.0, Tile(w, i, j), Tile(cm, i, j)), kw) for w in ws]
        red = bl.task(Tile(cm, i, j), steps, "sum")
        for p in parts:
            _Builder.depend(red, p)


def _plan_gemm(bl: _Builder, b: dict, split_target: int) -> int:
    a, bb, c = b["a"], b["b"], b["c"]
    ta, tb = b["transa"], b["transb"]
    alpha, beta = b["alpha"], b["beta"]
    am, bm, cm = bl.add_matrix(a), bl.add_matrix(bb), bl.add_matrix(c)
    T = bl.tile
    mt, nt = _ceil(c.shape[0], T), _ceil(c.shape[1], T)
    k = a.shape[1] if ta == "N" else a.shape[0]
    nk = _ceil(k, T)
    cells = [(i, j) for j in range(nt) for i in range(mt)]
    chunks = _k_chunks(nk, len(cells), split_target)

    # the tiles of op(A) row i and op(B) column j, built once (not once per task)
    a_row = [[Tile(am, i, kk) if ta == "N" else Tile(am, kk, i) for kk in range(nk)] for i in range(mt)]
    b_col = [[Tile(bm, kk, j) if tb == "N" else Tile(bm, j, kk) for kk in range(nk)] for j in range(nt)]
    no_kw: dict = {}

    def steps(i: int, j: int, ks: range, dest: Tile, beta0: Any) -> list:
        ar, bc = a_row[i], b_col[j]
        first = ks[0] if len(ks) else 0
        b1 = beta if beta0 is None else beta0
        return [("gemm", (alpha, ar[kk], bc[kk], b1 if kk == first else 1.0, dest, ta, tb), no_kw) for kk in ks]

    _split_k_tasks(bl, c, cm, cells, chunks, steps, "gemm")
    return len(chunks)


def _plan_symm(bl: _Builder, b: dict, split_target: int) -> int:
    name = bl.routine
    a, bb, c = b["a"], b["b"], b["c"]
    side, uplo = b["side"], b["uplo"]
    alpha, beta = b["alpha"], b["beta"]
    am, bm, cm = bl.add_matrix(a), bl.add_matrix(bb), bl.add_matrix(c)
    T = bl.tile
    mt, nt = _ceil(c.shape[0], T), _ceil(c.shape[1], T)
    herm = name == "hemm" and a.dtype.kind == "c"
    tr = "C" if herm else "T"

    def stored(p: int, q: int) -> bool:
        return p <= q if uplo == "U" else p >= q

    for j in range(nt):
        for i in range(mt):
            steps = []
            nk = mt if side == "L" else nt
            for kk in range(nk):
                be = beta if kk == 0 else 1.0
                if side == "L":  # C_ij += A~_ik B_kj
                    if kk == i:
                        steps.append((name, (alpha, Tile(am, i, i), Tile(bm, i, j), be, Tile(cm, i, j)),
                                      {"side": "L", "uplo": uplo}))
                    elif stored(i, kk):
                        steps.append(("gemm", (alpha, Tile(am, i, kk), Tile(bm, kk, j), be, Tile(cm, i, j), "N", "N"), {}))
                    else:
                        steps.append(("gemm", (alpha, Tile(am, kk, i), Tile(bm, kk, j), be, Tile(cm, i, j), tr, "N"), {}))
                else:  # C_ij += B_ik A~_kj
                    if kk == j:
                        steps.append((name, (alpha, Tile(am, j, j), Tile(bm, i, j), be, Tile(cm, i, j)),
                                      {"side": "R", "uplo": uplo}))
                    elif stored(kk, j):
                        steps.append(("gemm", (alpha, Tile(bm, i, kk), Tile(am, kk, j), be, Tile(cm, i, j), "N", "N"), {}))
                    else:
                        steps.append(("gemm", (alpha, Tile(bm, i, kk), Tile(am, j, kk), be, Tile(cm, i, j), "N", tr), {}))
            bl.task(Tile(cm, i, j), steps)
    return 1


def _plan_rank_k(bl: _Builder, b: dict, split_target: int) -> int:
    name = bl.routine
    a, c = b["a"], b["c"]
    two = name in ("syr2k", "her2k")
    bb = b["b"] if two else None
    uplo, trans = b["uplo"], b["trans"]
    alpha, beta = b["alpha"], b["beta"]
    cplx = c.dtype.kind == "c"
    herm = name in ("herk", "her2k") and cplx
    tr = "C" if herm else "T"
    alpha2 = np.conj(alpha) if (herm and two) else alpha
    am = bl.add_matrix(a)
    bm = bl.add_matrix(bb) if two else None
    cm = bl.add_matrix(c)
    T = bl.tile
    nt = _ceil(c.shape[0], T)
    k = a.shape[1] if trans == "N" else a.shape[0]
    nk = _ceil(k, T)
    cells = [(i, j) for j in range(nt) for i in range(nt) if (i <= j if uplo == "U" else i >= j)]
    chunks = _k_chunks(nk, len(cells), split_target)

    def op(m: int, p: int, kk: int) -> Tile:  # tile (p, kk) of op(x), as stored
        return Tile(m, p, kk) if trans == "N" else Tile(m, kk, p)

    def steps(i: int, j: int, ks: range, dest: Tile, beta0: Any) -> list:
        out = []
        for n_, kk in enumerate(ks):
            be = (beta if beta0 is None else beta0) if n_ == 0 else 1.0
            if i == j:
                args = (alpha, op(am, i, kk)) + ((op(bm, i, kk),) if two else ()) + (be, dest)
                out.append((name, args, {"uplo": uplo, "trans": trans}))
            elif trans == "N":
                out.append(("gemm", (alpha, op(am, i, kk), op(bm if two else am, j, kk), be, dest, "N", tr), {}))
                if two:
                    out.append(("gemm", (alpha2, op(bm, i, kk), op(am, j, kk), 1.0, dest, "N", tr), {}))
            else:
                out.append(("gemm", (alpha, op(am, i, kk), op(bm if two else am, j, kk), be, dest, tr, "N"), {}))
                if two:
                    out.append(("gemm", (alpha2, op(bm, i, kk), op(am, j, kk), 1.0, dest, tr, "N"), {}))
        return out

    _split_k_tasks(bl, c, cm, cells, chunks, steps, name, uplo_of=uplo)
    return len(chunks)


def _plan_triangular(bl: _Builder, b: dict, split_target: int) -> int:
    """TRMM and TRSM in place on B, with the chains of dependencies the in-place update needs."""
    name = bl.routine
    a, bb = b["a"], b["b"]
    side, uplo, transa, diag = b["side"], b["uplo"], b["transa"], b["diag"]
    alpha = b["alpha"]
    am, bm = bl.add_matrix(a), bl.add_matrix(bb)
    T = bl.tile
    mt, nt = _ceil(bb.shape[0], T), _ceil(bb.shape[1], T)
    lower = (uplo == "L") != (transa != "N")  # is op(A) lower triangular?
    flags = {"side": side, "uplo": uplo, "transa": transa, "diag": diag}

    def opa(p: int, q: int) -> Tile:  # tile (p, q) of op(A), as stored
        return Tile(am, p, q) if transa == "N" else Tile(am, q, p)

    # Order of the chain along the triangle (d = index along the triangular dimension) and the k tiles
    # each tile combines.  TRMM: new B_d uses old B_k, so the chain runs so that a tile is overwritten
    # after every reader of its old value.  TRSM: X_d uses final X_k, so the chain runs in solve order.
    nd = mt if side == "L" else nt
    if name == "trmm":
        # left: B_i = sum_k opA_ik B_k over k>=i (upper) / k<=i (lower); right: B_j = sum_k B_k opA_kj
        # over k<=j (upper) / k>=j (lower).
        ascending = (not lower) if side == "L" else lower
        others = (lambda d: range(d + 1, nd)) if ascending else (lambda d: range(0, d))
    else:
        # left: X_i needs k<i (lower) / k>i (upper); right: X_j needs k<j (upper) / k>j (lower).
        ascending = lower if side == "L" else (not lower)
        others = (lambda d: range(0, d)) if ascending else (lambda d: range(d + 1, nd))
    order = list(range(nd)) if ascending else list(range(nd - 1, -1, -1))
    across = nt if side == "L" else mt

    prev: dict[int, Task] = {}
    for d in order:
        for x in range(across):
            i, j = (d, x) if side == "L" else (x, d)
            dest = Tile(bm, i, j)
            steps = []
            ks = list(others(d))
            if name == "trmm":
                steps.append(("trmm", (alpha, Tile(am, d, d), dest), flags))
                for kk in ks:
                    if side == "L":
                        steps.append(("gemm", (alpha, opa(i, kk), Tile(bm, kk, j), 1.0, dest, transa, "N"), {}))
                    else:
                        steps.append(("gemm", (alpha, Tile(bm, i, kk), opa(kk, j), 1.0, dest, "N", transa), {}))
            else:
                for n_, kk in enumerate(ks):
                    be = alpha if n_ == 0 else 1.0
                    if side == "L":
                        steps.append(("gemm", (-1.0, opa(i, kk), Tile(bm, kk, j), be, dest, transa, "N"), {}))
                    else:
                        steps.append(("gemm", (-1.0, Tile(bm, i, kk), opa(kk, j), be, dest, "N", transa), {}))
                steps.append(("trsm", (alpha if not ks else 1.0, Tile(am, d, d), dest), flags))
            t = bl.task(dest, steps)
            if x in prev:
                _Builder.depend(t, prev[x])
            prev[x] = t
    return 1


_PLANNERS = {
    "gemm": _plan_gemm,
    "symm": _plan_symm,
    "hemm": _plan_symm,
    "syrk": _plan_rank_k,
    "herk": _plan_rank_k,
    "syr2k": _plan_rank_k,
    "her2k": _plan_rank_k,
    "trmm": _plan_triangular,
    "trsm": _plan_triangular,
}


def call_dims(name: str, b: dict[str, Any]) -> tuple[int, int, int]:
    """(m, n, k) of a checked call."""
    return _dims(name, b)


def call_size(name: str, bound: dict[str, Any]) -> tuple[tuple[int, int, int], np.ndarray, float]:
    """((m, n, k), the output array, flops) of a checked call (a complex flop counts as 4)."""
    m, n, k = _dims(name, bound)
    out = bound["c"] if "c" in bound else bound["b"]
    return (m, n, k), out, call_flops(name, m, n, k, out.dtype)


def call_flops(name: str, m: int, n: int, k: int, dtype: Any) -> float:
    """Flops of a call of routine family ``name``, shape (m, n, k) and ``dtype`` (a complex flop counts
    as 4)."""
    return flop_count(name, m, n, k) * (4.0 if np.dtype(dtype).kind == "c" else 1.0)


def is_trivial(name: str, b: dict[str, Any]) -> bool:
    """True when the call needs no tiling at all: empty output, k == 0, or alpha == 0."""
    m, n, k = _dims(name, b)
    return m == 0 or n == 0 or k == 0 or b["alpha"] == 0


def tile_calls(name: str, m: int, n: int, k: int, tile: int) -> int:
    """Tile-kernel calls a plan of tile size ``tile`` makes, at most: one per output tile and k tile."""
    return _ceil(m, tile) * _ceil(n, tile) * _ceil(k, tile)


def check_tile_calls(name: str, m: int, n: int, k: int, tile: int) -> None:
    """Refuse (ValueError, before anything is planned or touched) a tile size whose plan would make more
    than ``Tuning.max_tile_calls`` tile-kernel calls, naming the smallest tile size within the limit."""
    limit = get_tuning().max_tile_calls
    calls = tile_calls(name, m, n, k, tile)
    if calls <= limit:
        return
    lo, hi = tile, max(m, n, k)  # the smallest tile within the limit: calls fall as the tile grows
    while lo < hi:
        mid = (lo + hi) // 2
        if tile_calls(name, m, n, k, mid) <= limit:
            hi = mid
        else:
            lo = mid + 1
    raise ValueError(
        f"tile_size={tile} cuts this {m}x{n}x{k} {name} into {calls} tile-kernel calls, more than "
        f"Tuning.max_tile_calls = {limit} (each costs microseconds of scheduling, the whole call far more "
        f"than its work); use tile_size >= {lo}, or None for the runtime's choice")


def _absmax(a: np.ndarray) -> float:
    """An upper bound of max |a| (for complex, max |re| + max |im|), without a temporary of a's size;
    NaN where ``a`` holds NaN."""
    if a.size == 0:
        return 0.0
    parts = (a.real, a.imag) if a.dtype.kind == "c" else (a,)
    return float(sum(max(float(x.max()), -float(x.min())) for x in parts))


def alpha_may_overflow(name: str, b: dict[str, Any]) -> bool:
    """True when, with ``|alpha| > 1``, the products of a tiled plan's steps can overflow: ``|alpha|``
    times the largest possible partial product (``max|op(A)| * max|op(B)| * k``, twice for syr2k/her2k)
    plus ``|beta| * max|C|`` reaches the largest finite value of the dtype.  Tiles apply alpha to each
    partial product and add them (over k tiles, or in a split-k reduction), so two partial products that
    overflow with opposite signs give inf - inf = NaN where the one native call, which scales the whole
    sum once, gives +-inf or a finite value; such a call is better run as that one native call.  trsm
    (alpha scales b before the solve, as natively) and non-finite operands are not concerned."""
    alpha = b["alpha"]
    if name == "trsm" or not abs(alpha) > 1 or not np.isfinite(alpha):
        return False
    m, n, k = _dims(name, b)
    a = b["a"]
    amax = _absmax(a)
    other = amax if name in ("syrk", "herk") else _absmax(b["b"])
    terms = abs(alpha) * amax * other * k * (2.0 if name in ("syr2k", "her2k") else 1.0)
    if "c" in b and b["beta"] != 0:
        terms += abs(b["beta"]) * _absmax(b["c"])
    big = float(np.finfo(a.dtype).max)
    return bool(terms >= big)  # False for NaN data (no bound can be had; the operands decide)


__all__ += ["call_dims", "call_size", "is_trivial", "DETERMINISTIC_DEVICES", "LEVEL3_KERNELS", "tile_calls",
            "check_tile_calls", "alpha_may_overflow"]
