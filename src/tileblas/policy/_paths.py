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
    gemm route of real syrk/syr2k (``{'dsyrk': (one_call, split)}`` flops), ``one_thread`` the flops below
    which that path runs a family's calls on the one-thread instance (``{'trmm': flops}``), and
    ``split_from`` the flops from which that path runs a routine's calls in parts on the thread pool
    (``{'dgemm': flops}``, ``inf``: never; the upper ends stay shipped); what they do not name keeps its
    shipped value.  :class:`tileblas.policy._dropin.DropInConfig` holds the shipped values and puts these
    over them.  ``cpu_rates`` holds the rates (flop/s) of the native calls tune timed, per family and class
    at its square orders (``{'gemm/real': [[512, 9.6e10], [1024, ...]]}``): on a machine with GPUs, the
    CPU side of the drop-in's GPU rule at the thread count tune ran at (:func:`cpu_rate`).

    Shipped default (a machine never tuned): never tile on host-only runtimes; the recursion by the
    rule of :mod:`tileblas.policy._recursion`.  On the development machine ``tileblas tune --paths-only``
    found one native call ahead of tiles for dgemm and dtrmm at n = 1024-3072 (the figures, dsymm's
    included: docs/measurements/runtime.md, "One native call or tiles, on CPU workers");
    SciPy, the bar to hold, makes one native call on all cores.  The tiles run single-threaded OpenBLAS
    (one core's rate times the core count is at best the all-core rate) and add per-task and edge-tile
    costs.  Runtimes with devices that have their own memory, an explicit tile size or ``shared_flops``,
    or deterministic mode keep the tiled path (see :mod:`tileblas.runtime._runtime`).

Reading the file
    The file is trusted for nothing: it is read only when it is a regular file (a FIFO, a device such as
    ``/dev/zero`` or a directory is not opened for reading at all, and is opened non-blocking to check),
    of at most 1 MiB (read no further), UTF-8 JSON nested no deeper than tune writes, and taken only when
    every value is of the kind and range tune writes (flops finite and >= 0, or null where null means
    never; a recursion rule of min_order >= 1 and rhs_lo <= rhs_hi; ``cpu_rates`` at most 64 pairs of
    an order >= 1 and a rate > 0, orders ascending; ``threads`` a count; ``created`` a time).  Anything
    else is the whole file refused: one ``RuntimeWarning`` naming the file, and the
    shipped default.

What it must not touch
    It measures nothing (``tileblas tune`` does, in :mod:`tileblas.cli._perf`) and never raises for a
    missing or damaged policy file: the shipped default applies, :func:`policy` says why (``note``), and
    a file that exists but is not used is one warning.
"""

from __future__ import annotations

import json
import math
import os
import stat
import threading
import time
import warnings
from pathlib import Path
from typing import Any

__all__ = ["default_path", "policy_path", "PathPolicy", "policy", "reload", "save_policy", "FAMILY",
           "FAMILIES", "CLASSES", "precision_class", "SCHEMA", "RANK_GEMM_ROUTINES", "SPLIT_TUNE", "SPLIT_ROUTINES",
           "cpu_rate"]

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
#: (the same lower end for s and d, for c and z; symm with hemm, syrk with herk, syr2k with her2k
#: in complex; of real syr2k only dsyr2k is split).
SPLIT_TUNE = {"dgemm": ("sgemm", "dgemm"), "zgemm": ("cgemm", "zgemm"), "dsymm": ("ssymm", "dsymm"),
              "zhemm": ("csymm", "zsymm", "chemm", "zhemm"), "dsyrk": ("ssyrk", "dsyrk"),
              "zherk": ("csyrk", "zsyrk", "cherk", "zherk"), "zher2k": ("csyr2k", "zsyr2k", "cher2k", "zher2k"),
              "dsyr2k": ("dsyr2k",), "dtrmm": ("strmm", "dtrmm"),
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
    cpu_rates : dict
        ``{(family, class): ((order, flop/s), ...)}``: the native call's rate tune timed at square orders,
        orders ascending (empty: none measured).
    """

    def __init__(self, tile_flops: dict | None = None, recursion: dict | None = None, source: str = "shipped default",
                 file: str | None = None, note: str = "", measured: dict | None = None, threads: int = 0,
                 rank_gemm: dict | None = None, one_thread: dict | None = None,
                 split_from: dict | None = None, cpu_rates: dict | None = None) -> None:
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
        self.cpu_rates: dict[tuple[str, str], tuple[tuple[int, float], ...]] = {
            k: tuple((int(n), float(r)) for n, r in sorted(v)) for k, v in (cpu_rates or {}).items()}
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
            "cpu_rates": {f"{f}/{c}": [list(p) for p in v] for (f, c), v in self.cpu_rates.items()},
        }

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly summary (what ``tileblas info`` prints): the values as :meth:`to_json` writes
        them, with where they came from."""
        data = self.to_json()
        return {"source": self.source, "file": self.file, "note": self.note, "threads": self.threads,
                **{k: data[k] for k in ("tile_flops", "recursion", "rank_gemm", "one_thread", "split_from",
                                        "cpu_rates")}}


def _is_flops(x: Any) -> bool:
    """A flop count of a policy file: a finite number (not a bool) >= 0."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        f = float(x)
    except OverflowError:  # an integer past float's range
        return False
    return math.isfinite(f) and f >= 0


#: The most a policy file may hold (tune writes a few kB), and the deepest nesting of its JSON (tune: 6).
_MAX_BYTES = 1 << 20
_MAX_DEPTH = 16


def _read(path: Path) -> str:
    """The text of the policy file at ``path``: a regular file of at most :data:`_MAX_BYTES`, read no
    further.  Raises FileNotFoundError when there is none, ValueError for anything else unusable."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block, /dev/zero never end: not opened
        raise ValueError("not a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)  # what was opened (the name may have changed since the check)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > _MAX_BYTES:
            raise ValueError(f"{st.st_size} bytes, more than a path policy's 1 MiB")
        chunks, got = [], 0
        while got <= _MAX_BYTES:
            b = os.read(fd, _MAX_BYTES + 1 - got)
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if got > _MAX_BYTES:
            raise ValueError("more than a path policy's 1 MiB")
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _decode(text: str) -> Any:
    """The JSON document of ``text``, refusing nesting deeper than :data:`_MAX_DEPTH` (NaN and Infinity,
    which tune may write among its measurements, are refused where they would be a limit)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    todo = [(data, 1)]
    while todo:
        v, depth = todo.pop()
        if depth > _MAX_DEPTH:
            raise ValueError(f"JSON nested deeper than {_MAX_DEPTH} levels")
        if isinstance(v, dict):
            todo.extend((w, depth + 1) for w in v.values())
        elif isinstance(v, list):
            todo.extend((w, depth + 1) for w in v)
    return data


def _table(data: dict, name: str, required: bool = False) -> dict:
    """The object ``data[name]`` ({} when absent or null and not ``required``)."""
    v = data[name] if required else data.get(name)
    if v is None and not required:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"{name} must be an object; got {type(v).__name__}")
    return v


def _family_class(key: Any, families: tuple[str, ...]) -> tuple[str, str]:
    fam, _, cls = key.partition("/") if isinstance(key, str) else ("", "", "")
    if fam not in families or cls not in CLASSES:
        raise ValueError(f"unknown family/class {key!r}")
    return fam, cls


def _rule(key: str, v: Any) -> tuple[float, float, float] | None:
    """A recursion rule ``[min_order, rhs_lo, rhs_hi]`` (null: never / no upper end), or null."""
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != 3 or not all(x is None or _is_flops(x) for x in v):
        raise ValueError(f"recursion rule {key!r} must be [min_order, rhs_lo, rhs_hi] of numbers >= 0 or null; "
                         f"got {v!r}")
    lo_order, lo, hi = (math.inf if x is None else float(x) for x in v)
    if lo_order < 1 or math.isinf(lo) or lo > hi:
        raise ValueError(f"recursion rule {key!r} needs min_order >= 1 and rhs_lo <= rhs_hi; got {v!r}")
    return lo_order, lo, hi


def _created(v: Any) -> str:
    """The date of ``created`` (seconds since the epoch; 0 when absent)."""
    if v is None:
        v = 0
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise ValueError(f"created must be a time in seconds; got {v!r}")
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(float(v)))
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"created {v!r} is no time this machine can show") from None


def _parse(data: Any, file: str) -> PathPolicy:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"schema {data.get('schema') if isinstance(data, dict) else None!r}, expected {SCHEMA}")
    tiles: dict = {}
    for key, v in _table(data, "tile_flops", required=True).items():
        if v is not None and not _is_flops(v):
            raise ValueError(f"tile_flops {key!r} must be flops >= 0 or null (never); got {v!r}")
        tiles[_family_class(key, FAMILIES)] = math.inf if v is None else float(v)
    rec: dict = {}
    for key, v in _table(data, "recursion").items():
        rec[_family_class(key, ("trmm", "trsm"))] = _rule(key, v)
    threads = data.get("threads", 0)
    if not isinstance(threads, int) or isinstance(threads, bool) or not 0 <= threads <= 1 << 20:
        raise ValueError(f"threads must be a thread count; got {threads!r}")
    when = _created(data.get("created", 0))
    measured = _table(data, "measured")
    rank: dict = {}
    for key, v in _table(data, "rank_gemm").items():
        if key not in RANK_GEMM_ROUTINES:
            raise ValueError(f"rank_gemm: unknown routine {key!r} (one of {RANK_GEMM_ROUTINES})")
        if not isinstance(v, list) or len(v) != 2 or not all(_is_flops(x) for x in v):
            raise ValueError(f"rank_gemm {key!r} must be [one_call, split] flops >= 0; got {v!r}")
        rank[key] = (float(v[0]), float(v[1]))
    one: dict = {}
    for key, v in _table(data, "one_thread").items():
        if key not in FAMILY:
            raise ValueError(f"one_thread: unknown family {key!r} (one of {tuple(FAMILY)})")
        if not _is_flops(v):
            raise ValueError(f"one_thread {key!r} must be flops >= 0; got {v!r}")
        one[key] = float(v)
    split: dict = {}
    for key, v in _table(data, "split_from").items():
        if key not in SPLIT_ROUTINES:
            raise ValueError(f"split_from: unknown routine {key!r} (one of {SPLIT_ROUTINES})")
        if v is not None and not _is_flops(v):
            raise ValueError(f"split_from {key!r} must be flops >= 0 or null (never); got {v!r}")
        split[key] = math.inf if v is None else float(v)
    rates: dict = {}
    for key, v in _table(data, "cpu_rates").items():
        rates[_family_class(key, FAMILIES)] = _rates(key, v)
    return PathPolicy(tiles, rec, f"tuned on {when}", file, "", measured, threads, rank, one, split, rates)


def _rates(key: str, v: Any) -> tuple[tuple[int, float], ...]:
    """A ``cpu_rates`` entry: a non-empty list of ``[order, flop/s]``, orders ascending integers >= 1,
    rates finite and > 0."""
    ok = isinstance(v, list) and 0 < len(v) <= 64 and all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and not isinstance(p[0], bool)
        and p[0] >= 1 and _is_flops(p[1]) and p[1] > 0 for p in v)
    if not ok or any(a[0] >= b[0] for a, b in zip(v, v[1:])):
        raise ValueError(f"cpu_rates {key!r} must be [[order, flop/s], ...] with orders >= 1 ascending and "
                         f"rates > 0; got {v!r}")
    return tuple((int(n), float(r)) for n, r in v)


def cpu_rate(points: tuple[tuple[int, float], ...], order: int) -> float:
    """The rate of ``points`` (a ``cpu_rates`` entry) at ``order``: linear in the order's logarithm between
    the measured orders, the nearest measured rate outside them."""
    if order <= points[0][0]:
        return points[0][1]
    for (n0, r0), (n1, r1) in zip(points, points[1:]):
        if order <= n1:
            w = math.log(order / n0) / math.log(n1 / n0)
            return r0 + w * (r1 - r0)
    return points[-1][1]


_lock = threading.Lock()
_POLICY: list = [None]


def _load() -> PathPolicy:
    path = policy_path()
    try:
        data = _decode(_read(path))
    except FileNotFoundError:
        return PathPolicy(note=f"no tuned policy at {path} (run `tileblas tune`)")
    except (OSError, ValueError) as exc:
        return _refused(f"{path} unreadable ({type(exc).__name__}: {exc}); shipped default used")
    try:
        return _parse(data, os.fspath(path))
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        return _refused(f"{path} not a path policy of this version ({exc}); shipped default used")


def _refused(note: str) -> PathPolicy:
    """The shipped default, for a policy file that exists but is not used: one warning saying so."""
    try:
        warnings.warn(f"tileblas: the path policy {note}", RuntimeWarning, stacklevel=4)
    except Exception:  # warnings made errors (-W error): the call goes on; the note (tileblas info) says why
        pass
    return PathPolicy(note=note)


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
