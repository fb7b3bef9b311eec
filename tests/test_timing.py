"""The one timing loop (tileblas._timing.interleaved): turn order, pauses, warm-ups, blocks, stop rules."""

from __future__ import annotations

import time
import types

import pytest

from tileblas import _timing
from tileblas._timing import interleaved, stable


def test_plain_calls_take_turns_with_pause_and_warmup(monkeypatch):
    events: list = []
    monkeypatch.setattr(_timing.time, "sleep", lambda s: events.append(("sleep", s)))

    def call(name):
        return lambda: events.append(name)

    t = interleaved({"a": call("a"), "b": call("b")}, 3, settle=0.2, warmup=1)
    # per turn: pause, one warm-up call, one timed call (no block asked); a then b in every round
    assert events == [("sleep", 0.2), "a", "a", ("sleep", 0.2), "b", "b"] * 3
    assert t.rounds == 3 and set(t.best) == {"a", "b"}
    assert all(len(v) == 3 for v in t.samples.values())
    assert t.best["a"] == min(t.samples["a"]) >= 0.0


def test_alternate_reverses_every_other_round():
    order: list = []
    interleaved({k: (lambda k=k: order.append(k)) for k in "abc"}, 4, alternate=True)
    assert order == list("abc" "cba" "abc" "cba")


def test_fresh_inputs_are_prepared_untimed_and_each_timed_call_gets_its_own():
    prepared, ran = [], []

    def prep():
        i = len(prepared)
        prepared.append(i)
        time.sleep(0.01)  # preparation is not timed
        return lambda: ran.append(i)

    t = interleaved({"x": prep}, 2, fresh=True, warmup=1)
    assert ran == prepared == [0, 1, 2, 3]  # warm-up and timed call, each on a fresh input, per round
    assert t.best["x"] < 0.005


def test_self_timed_calls_report_their_own_seconds_and_prime_runs_first():
    seq = iter([99.0, 99.0, 3.0, 2.0, 4.0])
    t = interleaved({"s": lambda: next(seq)}, 3, self_timed=True, prime=2)
    assert t.samples["s"] == [3.0, 2.0, 4.0] and t.best["s"] == 2.0


def test_block_sized_per_contender_from_its_own_best():
    t = interleaved({"fast": lambda: None, "slow": lambda: time.sleep(0.005)}, 3, block_s=0.02, max_block=20)
    assert t.block["fast"] == 20  # a no-op call is far below 1 ms: capped at max_block
    assert t.block["slow"] < 5  # about 0.02 / 0.005, fewer when the machine is slower


def test_block_from_one_contender_is_shared_and_sized_before_the_first_round():
    calls = {"a": 0, "b": 0}

    def a():
        calls["a"] += 1
        time.sleep(0.002)

    def b():
        calls["b"] += 1

    t = interleaved({"a": a, "b": b}, 2, block_s=0.02, max_block=1000, block_from="a")
    n = t.block["a"]
    assert t.block == {"a": n, "b": n} and 1 <= n <= 10
    assert calls["a"] == 1 + calls["b"]  # one sizing call of a, then the same blocks for both
    # two rounds of n calls each; or, where the machine stalled the sizing call, a first round of fewer
    # than n / 2 calls and the block sized again from it (test_block_from_a_slow_sizing_call_...)
    assert calls["b"] == 2 * n or n + 1 <= calls["b"] < 1.5 * n, (calls, n)


def _clocked_calls(monkeypatch, seconds):
    """Contenders that advance the timing loop's only clock (its perf_counter, patched): contender k's first
    call takes seconds[k][0], every later one seconds[k][1] (binary fractions: exact sums).  The contenders
    and the count of calls of each."""
    now = [0.0]
    monkeypatch.setattr(_timing, "time", types.SimpleNamespace(perf_counter=lambda: now[0], sleep=time.sleep))
    calls = dict.fromkeys(seconds, 0)

    def contender(k):
        def call():
            calls[k] += 1
            now[0] += seconds[k][0] if calls[k] == 1 else seconds[k][1]
        return call

    return {k: contender(k) for k in seconds}, calls


def test_block_from_a_slow_sizing_call_is_sized_again_after_the_first_round(monkeypatch):
    """A stall of the one sizing call (here: the first call takes 1/64 s, later ones 1/1024 s) would leave
    blocks of one or two calls for every round; the first round's block shows it, and the block is sized
    again for all contenders from there.  The calls advance a clock of their own (the loop's only clock),
    so that the sizes follow from the seconds and not from how long a sleep takes on a loaded machine."""
    fns, calls = _clocked_calls(monkeypatch, {"a": (2.0 ** -6, 2.0 ** -10), "b": (2.0 ** -20, 2.0 ** -20)})
    t = interleaved(fns, 3, block_s=2.0 ** -6, max_block=1000, block_from="a")
    n = t.block["a"]
    assert t.block == {"a": 16, "b": 16}  # 1/64 s over 1/1024 s per call, for both contenders
    first = 1  # the sizing call asked for a block of one call
    assert calls == {"a": 1 + first + 2 * n, "b": first + 2 * n}
    assert t.best == {"a": 2.0 ** -10, "b": 2.0 ** -20}


def test_a_block_that_runs_past_its_cap_ends_early_and_its_sample_is_the_time_per_call_it_made(monkeypatch):
    """A block sized from a quick call whose calls then run slowly (here: the sizing call 1/2**20 s, later
    calls 1/16 s, a block of 1000 calls) ends once it has run block_cap_s (1/4 s), its calls read in runs
    of 1, 2, 4: 7 calls, each sample exactly 1/16 s.  The other contender's block, within the cap, makes
    every call it was sized for.  The calls advance the loop's clock (see the test above)."""
    fns, calls = _clocked_calls(monkeypatch, {"s": (2.0 ** -20, 2.0 ** -4), "b": (2.0 ** -20, 2.0 ** -20)})
    t = interleaved(fns, 3, block_s=2.0 ** -6, max_block=1000, block_from="s", block_cap_s=0.25)
    assert t.samples["s"] == [2.0 ** -4] * 3 and t.best["b"] == 2.0 ** -20
    assert t.block == {"s": 7, "b": 1000}  # calls made in the last round: 1 + 2 + 4 past the cap, all of b's
    assert calls == {"s": 1 + 3 * 7, "b": 3 * 1000}


def test_until_stable_extends_rounds_until_every_minimum_repeats():
    a = iter([1.0] * 20)
    b = iter([2.0, 1.5, 1.2, 1.201] + [5.0] * 20)  # the minimum repeats (within 1 %) only in round 4
    t = interleaved({"a": lambda: next(a), "b": lambda: next(b)}, 2, self_timed=True, until_stable=0.01,
                    max_rounds=10)
    assert t.rounds == 4 and t.best == {"a": 1.0, "b": 1.2}
    never = iter([1000 * 0.9 ** k for k in range(100)])  # a new minimum every round
    t = interleaved({"n": lambda: next(never)}, 2, self_timed=True, until_stable=0.01, max_rounds=7)
    assert t.rounds == 7  # never beyond max_rounds
    t = interleaved({"n": lambda: 1.0}, 3, self_timed=True, until_stable=0.01, max_rounds=50)
    assert t.rounds == 3  # never below rounds


def test_time_floor_and_ceiling():
    t = interleaved({"a": lambda: time.sleep(0.004) or 1.0}, 2, self_timed=True, until_stable=0.01,
                    max_rounds=1000, min_seconds=0.05)
    assert 6 <= t.rounds <= 40  # stable at once, but rounds go on to the floor
    vals = iter([1000 * 0.9 ** k for k in range(1000)])
    t = interleaved({"a": lambda: time.sleep(0.004) or float(next(vals))}, 2, self_timed=True,
                    until_stable=0.01, max_rounds=1000, max_seconds=0.05)
    assert 6 <= t.rounds <= 40  # never stable: the ceiling stops it


def test_stable():
    assert stable([1.0, 1.005, 3.0], 0.01) and not stable([1.0, 1.02], 0.01)
    assert not stable([1.0], 0.01) and not stable([], 0.01)


@pytest.mark.parametrize("kw, names", [
    ({"calls": {}, "rounds": 1}, "calls"),
    ({"rounds": 0}, "rounds"),
    ({"rounds": 2.5}, "rounds"),
    ({"rounds": 1, "fresh": True, "self_timed": True}, "self_timed"),
    ({"rounds": 1, "block_from": "zz"}, "'zz'"),
    ({"rounds": 1, "max_block": 0}, "max_block"),
    ({"rounds": 1, "block_cap_s": 0.0}, "block_cap_s"),
])
def test_bad_arguments_are_named(kw, names):
    kw = {"calls": {"a": lambda: None}, **kw}
    with pytest.raises(ValueError, match=names):
        interleaved(**kw)
