"""Where tuning data lives, and the path policy: which way a Level-3 call is computed on a host runtime.

Standard library only, so that the runtime's lookups (and ``import tileblas``) import nothing else and
never touch SQLite.

Files
    :func:`default_path`: the model repository (SQLite; :mod:`tileblas.policy._repository`).
    :func:`policy_path`: the path policy, a small JSON file next to it (``paths.json``), written by
    ``tileblas tune`` and read once per process by :func:`policy` (:func:`reload` re-reads it).

The policy
    A Level-3 call on a runtime whose devices are all host CPU workers (and that names no tile size)
    is computed one of three ways:

    * ``native``: one OpenBLAS call on all the workers' BLAS threads together (what SciPy does);
    * ``recursive`` (trmm/trsm only): the recursive algorithm of :mod:`tileblas.kernels._recursive`, whose
      triangular leaves and GEMMs are native calls on all threads;
    * ``tiled``: tile tasks scheduled over the workers (the BLASX runtime).

    Per routine family (gemm; symm = symm/hemm; syrk = syrk/herk; syr2k = syr2k/her2k; trmm; trsm) and
    precision class (``real``: s/d, ``complex``: c/z) the policy holds

    * ``tile_flops``: calls with at least this many flops (complex counted 4x, as the runtime counts
      them) are tiled; ``inf``: never.
    * for trmm/trsm ``recursion``: ``[min_order, rhs_lo, rhs_hi]``: the recursion is used for a triangle
      of order >= min_order with rhs_lo <= right-hand sides <= rhs_hi, on 2 or more BLAS threads;
      ``None`` in the shipped default, meaning the rule of :mod:`tileblas.policy._recursion`.

    Apart from families and classes, ``rank_gemm`` holds what tune measured for the C small-call path's
    gemm route of real syrk/syr2k (``{'dsyrk': (one_call, split)}`` flops, see
    :data:`tileblas.blas._dispatch.RANK_GEMM_FLOPS`), and ``one_thread`` the flops below which that path
    runs a family's calls on the one-thread instance (``{'trmm': flops}``, see
    :data:`tileblas.blas._dispatch.ONE_THREAD_FLOPS`), and ``split_from`` the flops from which that path
    runs a routine's calls in parts on the thread pool (``{'dgemm': flops}``, ``inf``: never; the upper
    ends stay shipped, see :func:`tileblas.blas._dispatch.split_ranges`); what they do not name keeps its
    shipped value.

    Shipped default (a machine never tuned): never tile on host-only runtimes; the recursion by the
    rule of :mod:`tileblas.policy._recursion`.  On the development machine ``tileblas tune --paths-only``
    found one native call ahead of tiles for dgemm and dtrmm at n = 1024-3072 (docs/runtime.md has the
    figures, dsymm's included);
    SciPy, the bar to hold, makes one native call on all cores.  The tiles run single-threaded OpenBLAS
    (one core's rate times the core count is at best the all-core rate) and add per-task and edge-tile
    costs.  Runtimes with devices that have their own memory, an explicit tile size or ``shared_flops``,
    or deterministic mode keep the tiled path (see :mod:`tileblas.runtime._runtime`).

What it must not touch
    It measures nothing (``tileblas tune`` does, in :mod:`tileblas.cli._perf`) and never raises for a
    missing or damaged policy file: the shipped default applies, and :func:`policy` says why.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["default_path", "policy_path", "PathPolicy", "policy", "reload", "save_policy", "FAMILY",
           "FAMILIES", "CLASSES", "precision_class", "SCHEMA", "RANK_GEMM_ROUTINES", "SPLIT_TUNE", "SPLIT_ROUTINES"]

#: Routine -> routine family of the policy.
FAMILY = {"gemm": "gemm", "symm": "symm", "hemm": "symm", "syrk": "syrk", "herk": "syrk",
          "syr2k": "syr2k", "her2k": "syr2k", "trmm": "trmm", "trsm": "trsm"}
FAMILIES = ("gemm", "symm", "syrk", "syr2k", "trmm", "trsm")
CLASSES = ("real", "complex")
#: Version of the policy file's layout.
SCHEMA = 1
#: The routines of the C path's syrk/syr2k gemm route (``rank_gemm``).
RANK_GEMM_ROUTINES = ("ssyrk", "dsyrk", "ssyr2k", "dsyr2k")
#: The routines ``tileblas tune`` times for the lower end of the C path's split (``split_from``), each with
#: the routines its limit is stored for: one per family and precision class, as the shipped ranges go
#: (the same lower end for s and d, for c and z; symm with hemm, syrk with herk).
SPLIT_TUNE = {"dgemm": ("sgemm", "dgemm"), "zgemm": ("cgemm", "zgemm"), "dsymm": ("ssymm", "dsymm"),
              "zhemm": ("csymm", "zsymm", "chemm", "zhemm"), "dsyrk": ("ssyrk", "dsyrk"),
              "zherk": ("csyrk", "zsyrk", "cherk", "zherk"), "dtrmm": ("strmm", "dtrmm"),
              "ztrmm": ("ctrmm", "ztrmm"), "dtrsm": ("strsm", "dtrsm"), "ztrsm": ("ctrsm", "ztrsm")}
#: The routines the C path may run split (the keys ``split_from`` accepts).
SPLIT_ROUTINES = tuple(r for rs in SPLIT_TUNE.values() for r in rs)


def default_path() -> Path:
    """``$TILEBLAS_MODEL_DB``, else ``$XDG_CACHE_HOME/tileblas/models.sqlite`` (``~/.cache`` by default)."""
    env = os.environ.get("TILEBLAS_MODEL_DB")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "tileblas" / "models.sqlite"


def policy_path() -> Path:
    """``$TILEBLAS_PATHS``, else ``paths.json`` next to the model repository (:func:`default_path`)."""
    env = os.environ.get("TILEBLAS_PATHS")
    if env:
        return Path(env)
    return default_path().with_name("paths.json")


def precision_class(dtype_char: str) -> str:
    """'real' for s/d (float32/float64), 'complex' for c/z."""
    return "complex" if dtype_char in ("c", "z", "F", "D") else "real"


class PathPolicy:
    """The crossovers in force (see the module notes).

    Attributes
    ----------
    tile_flops : dict
        ``{(family, class): flops}``: tile at or above, ``math.inf`` never.
    recursion : dict
        ``{(family, class): (min_order, rhs_lo, rhs_hi) or None}`` for trmm/trsm (None: the constants of
        :mod:`tileblas.devices.cpu`).
    source : str
        ``"shipped default"`` or ``"tuned on <date>"``.
    file : str or None
        The file it was read from.
    note : str
        Why a file was not used (missing, damaged, other schema), else "".
    measured : dict
        What tune measured (kept for ``tileblas info``), possibly empty.
    rank_gemm : dict
        ``{'dsyrk': (one_call, split)}``: the gemm route's limits tune measured (empty: the shipped ones).
    one_thread : dict
        ``{'trmm': flops}``: the one-thread limits tune measured (empty: the shipped ones).
    split_from : dict
        ``{'dgemm': flops}``: the lower ends of the C path's split tune measured (``inf``: never split;
        empty: the shipped ones).
    """

    def __init__(self, tile_flops: dict | None = None, recursion: dict | None = None, source: str = "shipped default",
                 file: str | None = None, note: str = "", measured: dict | None = None, threads: int = 0,
                 rank_gemm: dict | None = None, one_thread: dict | None = None,
                 split_from: dict | None = None) -> None:
        self.tile_flops = {(f, c): math.inf for f in FAMILIES for c in CLASSES}
        self.tile_flops.update(tile_flops or {})
        self.recursion: dict = {(f, c): None for f in ("trmm", "trsm") for c in CLASSES}
        self.recursion.update(recursion or {})
        self.source = source
        self.file = file
        self.note = note
        self.measured = measured or {}
        self.threads = threads
        self.rank_gemm: dict[str, tuple[float, float]] = dict(rank_gemm or {})
        self.one_thread: dict[str, float] = dict(one_thread or {})
        self.split_from: dict[str, float] = dict(split_from or {})
        self._limits: dict[str, float] | None = None

    def tile_limit(self, name: str, dtype_char: str) -> float:
        """Flops from which a call of routine ``name`` in precision ``dtype_char`` is tiled."""
        return self.tile_flops[(FAMILY[name], precision_class(dtype_char))]

    def level3_limits(self) -> dict[str, float]:
        """Per routine, the flops below which no call is tiled in any precision class: the smaller tile
        crossover of the two classes.  ``inf``: never tiled."""
        return {name: min(self.tile_flops[(fam, c)] for c in CLASSES) for name, fam in FAMILY.items()}

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> Any:
            return None if math.isinf(x) else x

        return {
            "schema": SCHEMA,
            "created": time.time(),
            "threads": self.threads,
            "tile_flops": {f"{f}/{c}": num(v) for (f, c), v in self.tile_flops.items()},
            "recursion": {f"{f}/{c}": (None if v is None else [num(x) for x in v])
                          for (f, c), v in self.recursion.items()},
            "measured": self.measured,
            "rank_gemm": {k: list(v) for k, v in self.rank_gemm.items()},
            "one_thread": dict(self.one_thread),
            "split_from": {k: num(v) for k, v in self.split_from.items()},
        }

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly summary (what ``tileblas info`` prints)."""
        return {"source": self.source, "file": self.file, "note": self.note, "threads": self.threads,
                "tile_flops": {f"{f}/{c}": (None if math.isinf(v) else v) for (f, c), v in self.tile_flops.items()},
                "recursion": {f"{f}/{c}": (None if v is None else [None if math.isinf(x) else x for x in v])
                              for (f, c), v in self.recursion.items()},
                "rank_gemm": {k: list(v) for k, v in self.rank_gemm.items()},
                "one_thread": dict(self.one_thread),
                "split_from": {k: (None if math.isinf(v) else v) for k, v in self.split_from.items()}}


def _is_flops(x: Any) -> bool:
    """A flop count of a policy file: a number (not a bool) >= 0."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0


def _parse(data: Any, file: str) -> PathPolicy:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"schema {data.get('schema') if isinstance(data, dict) else None!r}, expected {SCHEMA}")
    tiles: dict = {}
    for key, v in data["tile_flops"].items():
        fam, cls = key.split("/")
        if fam not in FAMILIES or cls not in CLASSES:
            raise ValueError(f"unknown family/class {key!r}")
        tiles[(fam, cls)] = math.inf if v is None else float(v)
    rec: dict = {}
    for key, v in data.get("recursion", {}).items():
        fam, cls = key.split("/")
        if fam not in ("trmm", "trsm") or cls not in CLASSES:
            raise ValueError(f"unknown family/class {key!r}")
        if v is not None:
            v = tuple(math.inf if x is None else float(x) for x in v)
            if len(v) != 3:
                raise ValueError(f"recursion rule {key!r} must be [min_order, rhs_lo, rhs_hi]")
        rec[(fam, cls)] = v
    rank: dict = {}
    for key, v in (data.get("rank_gemm") or {}).items():
        if key not in RANK_GEMM_ROUTINES:
            raise ValueError(f"rank_gemm: unknown routine {key!r} (one of {RANK_GEMM_ROUTINES})")
        if not isinstance(v, list) or len(v) != 2 or not all(_is_flops(x) for x in v):
            raise ValueError(f"rank_gemm {key!r} must be [one_call, split] flops >= 0; got {v!r}")
        rank[key] = (float(v[0]), float(v[1]))
    one: dict = {}
    for key, v in (data.get("one_thread") or {}).items():
        if key not in FAMILY:
            raise ValueError(f"one_thread: unknown family {key!r} (one of {tuple(FAMILY)})")
        if not _is_flops(v):
            raise ValueError(f"one_thread {key!r} must be flops >= 0; got {v!r}")
        one[key] = float(v)
    split: dict = {}
    for key, v in (data.get("split_from") or {}).items():
        if key not in SPLIT_ROUTINES:
            raise ValueError(f"split_from: unknown routine {key!r} (one of {SPLIT_ROUTINES})")
        if v is not None and not _is_flops(v):
            raise ValueError(f"split_from {key!r} must be flops >= 0 or null (never); got {v!r}")
        split[key] = math.inf if v is None else float(v)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(data.get("created", 0))))
    return PathPolicy(tiles, rec, f"tuned on {when}", file, "", data.get("measured") or {},
                      int(data.get("threads", 0)), rank, one, split)


_lock = threading.Lock()
_POLICY: list = [None]


def _load() -> PathPolicy:
    path = policy_path()
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return PathPolicy(note=f"no tuned policy at {path} (run `tileblas tune`)")
    except (OSError, ValueError) as exc:
        return PathPolicy(note=f"{path} unreadable ({type(exc).__name__}: {exc}); shipped default used")
    try:
        return _parse(data, os.fspath(path))
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        return PathPolicy(note=f"{path} not a path policy of this version ({exc}); shipped default used")


def policy() -> PathPolicy:
    """The policy in force: read on first use (a file from ``tileblas tune``, else the shipped default)."""
    p = _POLICY[0]
    if p is None:
        with _lock:
            p = _POLICY[0]
            if p is None:
                p = _POLICY[0] = _load()
    return p


def reload() -> PathPolicy:
    """Forget the policy read so far; the next :func:`policy` re-reads the file."""
    with _lock:
        _POLICY[0] = None
    return policy()


def save_policy(p: PathPolicy, path: str | os.PathLike | None = None) -> Path:
    """Write ``p`` (atomically) to ``path`` (default :func:`policy_path`) and return the path."""
    path = Path(path) if path is not None else policy_path()
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(p.to_json(), f, indent=1)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        why = "a parent path is a file, not a directory" if isinstance(exc, (FileExistsError, NotADirectoryError)) \
            else "no permission to write there" if isinstance(exc, PermissionError) else str(exc)
        raise OSError(exc.errno, f"cannot write the path policy {path}: {why}; pass another path or set "
                                 "TILEBLAS_PATHS") from exc
    return path
