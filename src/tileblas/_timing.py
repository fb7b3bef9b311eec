"""Timing calls against each other: :func:`interleaved`, the one timing loop of tileblas.

What it owns
    How tileblas times one implementation against another on a noisy machine, for every command that
    reports a ratio (``tileblas bench``, the Level-3 grid, ``tileblas tune``, the RBLAS benchmark, the
    demo): the contenders take turns within each round (in reversed order every other round if asked, so
    that none always goes first), each turn may start with a pause so that the previous contender's BLAS
    threads go idle and with untimed warm-up calls that wake this contender's; calls shorter than a
    target are timed as a block of back-to-back calls; the best over the rounds is kept, and rounds may
    go on until every contender's minimum repeats.

What it must not touch
    Anything of tileblas (it is a bottom module, like :mod:`tileblas._tuning`): the callers bring the
    calls, their inputs and what a ratio means.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["Timings", "interleaved", "stable"]


@dataclass
class Timings:
    """What :func:`interleaved` measured.

    Attributes
    ----------
    best : dict
        Best seconds per call of each contender.
    samples : dict
        Every timed sample of each contender (seconds per call), in round order: ``samples[k][i]`` of all
        ``k`` come from round ``i``.
    block : dict
        Calls per timed sample of each contender in the last round (fewer than sized where the block
        ran past ``block_cap_s``).
    rounds : int
        Rounds run.
    """

    best: dict[str, float]
    samples: dict[str, list[float]] = field(default_factory=dict)
    block: dict[str, int] = field(default_factory=dict)
    rounds: int = 0


def stable(samples: list[float], tol: float) -> bool:
    """True when the two smallest samples agree within ``tol`` (relative): the minimum repeats."""
    if len(samples) < 2:
        return False
    lo, nxt = sorted(samples)[:2]
    return nxt <= lo * (1.0 + tol)


def interleaved(calls: Mapping[str, Callable[[], Any]], rounds: int, *, fresh: bool = False,
                self_timed: bool = False, settle: float = 0.0, prime: int = 0, warmup: int = 0,
                block_s: float = 0.0, max_block: int = 1, block_from: str | None = None,
                block_cap_s: float = math.inf, alternate: bool = False, until_stable: float | None = None,
                max_rounds: int | None = None, min_seconds: float = 0.0, max_seconds: float = math.inf) -> Timings:
    """Time each of ``calls`` against the others, interleaved, and keep the best.

    Parameters
    ----------
    calls : mapping of str to callable
        The contenders, timed in this order within a round.  Plain: ``calls[k]()`` is the call to time.
        With ``fresh``: ``calls[k]()`` prepares fresh inputs (untimed) and returns the call to time, for
        calls that change their inputs.  With ``self_timed``: ``calls[k]()`` runs the call and returns its
        seconds, so that it can undo its effect untimed afterwards.
    rounds : int
        Rounds at least; every contender takes one turn per round.
    fresh, self_timed : bool
        How ``calls`` are called (see above); at most one of them.
    settle : float
        Seconds of pause before each turn (0: none), so that no BLAS thread pool is still spinning.
    prime : int
        Untimed calls of each contender once, before the first round (caches, page faults, plans).
    warmup : int
        Untimed calls at the start of each turn, after the pause (wakes this contender's BLAS threads).
    block_s, max_block : float, int
        A timed sample is a block of back-to-back calls lasting about ``block_s`` seconds, at most
        ``max_block`` calls; its time per call is the sample.  Default: one call per sample.
    block_from : str, optional
        Size one block for all contenders, from one call of this contender timed before the first
        round (after its pause and warm-up); sized again, for all, after the first round where that
        round's block of this contender asks for a block over twice as long (the one call was slowed
        by the machine).  Default: each contender's block is sized from its own best so far, after
        each turn.
    block_cap_s : float
        Plain calls only: a block ends early once it has run this many seconds, its sample the time per
        call of the calls it made (read in runs of 1, 2, 4, ... calls: no clock between two calls of a
        run).  A block sized from a quick call whose calls then run a thousand times slower (another
        library's threads on a loaded machine) would otherwise run for minutes.  Default: no bound.
    alternate : bool
        Reverse the order of contenders every other round (ABBA).
    until_stable : float, optional
        Past ``rounds`` rounds and ``min_seconds`` of rounds, go on (to ``max_rounds`` rounds or
        ``max_seconds``) until the minimum of every contender repeats within this relative tolerance
        (:func:`stable`).  The rule looks at each contender alone, never at their ratio, and every
        contender runs the same number of rounds.
    max_rounds : int, optional
        Most rounds (default ``rounds``: no extension).
    min_seconds, max_seconds : float
        Time floor and ceiling of the rounds, for ``until_stable``.

    Returns
    -------
    Timings
    """
    if not calls:
        raise ValueError("calls must name at least one contender; got an empty mapping")
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer; got {rounds!r}")
    if fresh and self_timed:
        raise ValueError("fresh and self_timed exclude each other; got both True")
    if block_from is not None and block_from not in calls:
        raise ValueError(f"block_from must name one of the calls {sorted(calls)}; got {block_from!r}")
    if max_block < 1:
        raise ValueError(f"max_block must be at least 1; got {max_block!r}")
    if not block_cap_s > 0:
        raise ValueError(f"block_cap_s must be positive; got {block_cap_s!r}")

    def sized(seconds: float) -> int:
        if block_s <= 0 or seconds >= block_s:
            return 1
        return max(1, min(max_block, int(block_s / max(seconds, 1e-9))))

    def turn(k: str, n: int) -> tuple[float, int]:
        """One turn of contender ``k``: pause, warm-up, ``n`` timed calls (fewer past ``block_cap_s``);
        seconds per call and the calls timed."""
        c = calls[k]
        if fresh:
            warm = [c() for _ in range(warmup)]
            runs = [c() for _ in range(n)]
        if settle:
            time.sleep(settle)
        if fresh:
            for w in warm:
                w()
            t0 = time.perf_counter()
            for r in runs:
                r()
            return (time.perf_counter() - t0) / n, n
        for _ in range(warmup):
            c()
        if self_timed:
            return sum(c() for _ in range(n)) / n, n
        # without a bound, one run of n calls; with one, runs of 1, 2, 4, ... and the clock between runs
        done, run = 0, n if block_cap_s == math.inf else 1
        t0 = time.perf_counter()
        while done < n:
            m = min(run, n - done)
            for _ in range(m):
                c()
            done += m
            if done < n and time.perf_counter() - t0 > block_cap_s:
                break
            run *= 2
        return (time.perf_counter() - t0) / done, done

    for _ in range(prime):
        for k, c in calls.items():
            w = c()
            if fresh:
                w()
    keys = list(calls)
    block = {k: 1 for k in keys}
    if block_from is not None:
        block = dict.fromkeys(keys, sized(turn(block_from, 1)[0]))
    made: dict[str, int] = {}  # calls each contender's last turn made (every contender turns every round)
    got: dict[str, list[float]] = {k: [] for k in keys}
    limit = max(rounds, max_rounds or rounds)
    t = 0
    t0 = time.perf_counter()
    while t < limit:
        for k in (keys if not alternate or t % 2 == 0 else keys[::-1]):
            per_call, made[k] = turn(k, block[k])
            got[k].append(per_call)
            if block_from is None:
                block[k] = sized(min(got[k]))
        if t == 0 and block_from is not None and (again := sized(got[block_from][0])) > 2 * block[block_from]:
            # the one sizing call was slow (a stall of the machine): a block of a few calls would time the
            # waking of threads more than the calls; sized again, for all, from the first round's block
            block = dict.fromkeys(keys, again)
        t += 1
        if t < rounds:
            continue
        if until_stable is None:
            break
        spent = time.perf_counter() - t0
        if spent >= max_seconds or (spent >= min_seconds and all(stable(v, until_stable) for v in got.values())):
            break
    return Timings({k: min(v) for k, v in got.items()}, got, made, t)
