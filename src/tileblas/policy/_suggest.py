"""``suggest`` (public as ``tileblas.perf.suggest``): the one function through which tileblas reads tuning
values from models.

Design note
    The runtime (default tile size) and the callers of the host recursive TRSM/TRMM (recursion stopping
    size, through :func:`tileblas.policy._recursion.recursion_stop`) ask :func:`suggest`; when it returns
    None they use their own documented heuristics (:func:`tileblas.runtime._planner.default_tile_size` and
    :func:`tileblas.kernels._recursive.default_stop`).  It returns None whenever this machine has no usable
    model: no repository file, no model stored under this machine's key
    (:func:`~tileblas.policy._repository.current_key`), or a damaged / foreign / too new
    file -- silently, because a tuning hint must never break a BLAS call (``tileblas model show`` reports
    what is wrong with a repository).  ``tileblas tune`` builds the models it reads.

    Cost: this module imports only the standard library and :mod:`tileblas._tuning` at import time; the repository, the model classes
    and the predictor are imported on the first lookup for which a repository file exists.  Answers are
    memoised per (repository, question); the repository file's change stamp is re-read at most every
    ``Tuning.model_recheck_s`` seconds (:func:`tileblas.get_tuning`), and a change drops the memo.  A repeated question costs a few dictionary
    lookups (about a microsecond); a new one a few model evaluations (well under a millisecond).
    Recursion-stop questions are bucketed by the next power of two of the free dimension so that a
    stream of different shapes does not keep evaluating models.

What it must not touch
    It never samples, builds or writes models, and never raises for a repository problem.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any, Sequence

from tileblas._tuning import Tuning, get_tuning

__all__ = ["suggest", "clear_cache", "RECHECK_S", "NAMES"]

#: Questions :func:`suggest` answers.
NAMES = ("tile_size", "recursion_stop", "block_size")
#: Shipped default of the seconds between two checks of a repository file for changes (the value in force:
#: ``tileblas.get_tuning().model_recheck_s``).
RECHECK_S = Tuning().model_recheck_s
_MEMO_MAX = 4096

_lock = threading.Lock()
# path -> [time of the last check, stamp, {(threads, locality): Predictor or None}]
_STATE: dict[str, list] = {}
_MEMO: dict[tuple, Any] = {}
_DEFAULT: list = [float("-inf"), ""]  # [time read, default repository path]


def clear_cache() -> None:
    """Forget every memoised answer and repository state (the next question re-reads the file)."""
    with _lock:
        _STATE.clear()
        _MEMO.clear()
        _DEFAULT[0] = float("-inf")


@functools.lru_cache(maxsize=8)
def _default(xdg: str | None, home: str | None) -> str:
    from tileblas.policy._paths import default_path

    return os.fspath(default_path())


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        main = os.stat(path).st_mtime_ns
    except OSError:
        return None
    try:
        wal = os.stat(path + "-wal").st_mtime_ns
    except OSError:
        wal = 0
    return main, wal


def _tile_size(pred: Any, m: int, n: int, k: int, devices: int, candidates: Sequence[int],
               overhead: float, min_tiles: int) -> int | None:
    """Tile edge minimising the predicted makespan ``ceil(tiles / devices) * ceil(k / b) * (t_dgemm + overhead)``
    of a GEMM-like call on ``devices`` single-threaded CPU workers, among the candidates giving at least
    ``min_tiles`` output tiles (the smallest candidate always competes); near ties (2%) go to the larger
    tile."""
    gemm = pred.submodel("dgemm", ("N", "N"))
    top = max(gemm.hi)
    best = None
    for b in sorted({int(c) for c in candidates}):
        if b > top and best is not None:  # beyond the modeled domain: no extrapolation
            continue
        if best is not None and -(-m // b) * -(-n // b) < min_tiles:
            continue
        bm, bn, bk = min(b, m), min(b, n), min(b, k)
        steps = -(-k // b)
        tiles = -(-m // b) * -(-n // b)
        task = steps * (gemm.evaluate((bm, bn, bk))["median"] + overhead)
        makespan = -(-tiles // devices) * task
        if best is None or makespan < best[0] * 0.98 or (makespan <= best[0] * 1.02 and b > best[1]):
            best = (min(makespan, best[0]) if best else makespan, b)
    return None if best is None else int(best[1])


def _recursion_stop(pred: Any, routine: str, n: int, side: str, candidates: Sequence[int]) -> int | None:
    """Largest size up to which one direct triangular call is predicted no slower than one split into two
    halves plus a GEMM (the recursion's step)."""
    tri = pred.submodel(routine, (side, "L", "N"))
    gemm = pred.submodel("dgemm", ("N", "N"))
    t_dim, o_dim = (0, 1) if side == "L" else (1, 0)  # the triangular and the other size argument
    n = min(max(n, 1), tri.hi[o_dim])
    top = tri.hi[t_dim]
    stop = None
    for s in sorted(int(c) for c in candidates):
        if s > top:
            break
        h = s // 2
        sizes = (s, n) if side == "L" else (n, s)
        half = (h, n) if side == "L" else (n, h)
        g = (h, n, h) if side == "L" else (n, h, h)
        direct = tri.evaluate(sizes)["median"]
        split = 2 * tri.evaluate(half)["median"] + gemm.evaluate(g)["median"]
        if direct <= split:
            stop = s
        else:
            break
    return stop if stop is not None else int(min(candidates))


def _predictor(path: str, threads: int, locality: str) -> Any:
    """The Predictor for this machine's key on ``path`` (memoised with the file's stamp), or None."""
    now = time.monotonic()
    st = _STATE.get(path)
    if st is None or now - st[0] > get_tuning().model_recheck_s:
        stamp = _stamp(path)
        if st is None or stamp != st[1]:
            st = [now, stamp, {}]
            for k in [k for k in _MEMO if k[0] == path]:
                _MEMO.pop(k, None)
        st[0] = now
        _STATE[path] = st
    if st[1] is None:  # no file
        return None
    preds = st[2]
    pk = (threads, locality)
    if pk not in preds:
        pred = None
        try:
            from tileblas.policy._predictor import Predictor
            from tileblas.policy._repository import READ_TIMEOUT, Repository, current_key

            # read only, and no long wait for a lock: a call must not stall on another process's work
            pred = Predictor(Repository(path, create=False, timeout=READ_TIMEOUT, read_only=True),
                             current_key(threads, locality))
        except Exception:  # damaged, foreign, locked or too new file, no BLAS library: the heuristic applies
            pred = None
        preds[pk] = pred
    return preds[pk]


def suggest(name: str, **params: Any) -> Any:
    """A tuning value computed from this machine's stored models, or None when there is none.

    The runtime and the callers of the recursive kernels call this (cheaply: answers are memoised); it never samples
    or builds models (``tileblas tune`` does) and never raises for a missing or damaged repository.

    Parameters
    ----------
    name : {"tile_size", "recursion_stop", "block_size"}
        * ``"tile_size"``: tile edge for a GEMM-like call: params ``n`` (and optional ``m``, ``k``, default
          ``n``), ``devices`` (default 1), ``candidates`` (default 64..1024 step 32), ``overhead``
          (seconds of runtime cost per tile task, default 0) and ``min_tiles`` (candidates giving fewer
          output tiles are skipped, default 1).  Minimises the predicted makespan
          ``ceil(tiles / devices) * ceil(k / b) * (t_dgemm(b, b, b) + overhead)`` over the candidates
          within the DGEMM model's domain.
        * ``"recursion_stop"``: size up to which recursive TRSM/TRMM calls the native kernel directly:
          params ``routine`` ("dtrsm" or "dtrmm"), ``n`` (the other dimension, default 512), ``side``
          (default "L"), ``candidates`` (default 16..1024, powers of two).  The largest size at which the
          direct call is predicted no slower than one split into two halves plus a GEMM.
        * ``"block_size"``: params ``algorithm`` ("trinv"/"sylvester"), ``variant``, ``n``, ``blocks``.
    threads, locality, path : optional params
        Which models to read (default 1 thread, in-cache, :func:`~tileblas.perf.default_path`).

    Returns
    -------
    int or None

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`NAMES`.
    """
    if name not in NAMES:
        raise ValueError(f"name must be 'tile_size', 'recursion_stop' or 'block_size'; got {name!r}")
    path = params.pop("path", None)
    now = time.monotonic()
    if path is None:
        if now - _DEFAULT[0] > get_tuning().model_recheck_s:  # the environment is re-read now and then, not on every call
            env = os.environ
            _DEFAULT[1] = env.get("TILEBLAS_MODEL_DB") or _default(env.get("XDG_CACHE_HOME"), env.get("HOME"))
            _DEFAULT[0] = now
        path = _DEFAULT[1]
    else:
        path = os.fspath(path)
    threads = int(params.pop("threads", 1))
    locality = params.pop("locality", "in-cache")
    if name == "recursion_stop":  # bucket the free dimension
        n = max(int(params.get("n", 512)), 1)
        params["n"] = 1 << (n - 1).bit_length()
    try:
        ck = (path, name, threads, locality, tuple(sorted(params.items())))
        hash(ck)
    except TypeError:
        ck = (path, name, threads, locality, repr(sorted(params.items())))
    st = _STATE.get(path)
    if st is not None and now - st[0] <= get_tuning().model_recheck_s and ck in _MEMO:
        return _MEMO[ck]
    with _lock:
        pred = _predictor(path, threads, locality)
        if ck in _MEMO:
            return _MEMO[ck]
        value = None
        if pred is not None:
            try:
                value = _answer(pred, name, params)
            except Exception:  # no model for this question (MissingModelError), or a damaged row
                value = None
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[ck] = value
        return value


def _answer(pred: Any, name: str, params: dict[str, Any]) -> int | None:
    if name == "tile_size":
        n = int(params.get("n", 4096))
        m = int(params.get("m") or n)
        k = int(params.get("k") or n)
        cand = params.get("candidates") or range(64, 1025, 32)
        return _tile_size(pred, m, n, k, max(1, int(params.get("devices", 1))), list(cand),
                          float(params.get("overhead", 0.0)), int(params.get("min_tiles", 1)))
    if name == "recursion_stop":
        cand = params.get("candidates") or (16, 32, 64, 128, 256, 512, 1024)
        return _recursion_stop(pred, params.get("routine", "dtrsm"), int(params.get("n", 512)),
                               params.get("side", "L"), list(cand))
    blocks = params.get("blocks") or range(16, 257, 16)
    value, _ = pred.best_block(params.get("algorithm", "trinv"), int(params["n"]), int(params.get("variant", 3)),
                               blocks)
    return value
