"""Tuning, the config object of the tunables: checks, scope, and that the code reads it."""

from __future__ import annotations

import numpy as np
import pytest

import tileblas
from tileblas._tuning import Tuning, get_tuning, set_tuning


def test_public_names_and_shipped_defaults():
    assert tileblas.Tuning is Tuning and tileblas.get_tuning is get_tuning and tileblas.set_tuning is set_tuning
    t = Tuning()
    assert t.tile_candidates == tuple(sorted(t.tile_candidates, reverse=True))
    from tileblas.runtime import _planner as P

    # the old module names are the shipped defaults
    assert P.SMALL_FLOPS == t.small_flops and P.TILE_CANDIDATES == t.tile_candidates
    assert P.MIN_TILE == min(t.tile_candidates) and P.MAX_TILE == max(t.tile_candidates)


@pytest.mark.parametrize("changes, message", [
    ({"small_flops": -1.0}, "Tuning.small_flops must be a number >= 0; got -1.0"),
    ({"small_flops": "many"}, "Tuning.small_flops must be a number >= 0; got 'many'"),
    ({"recursion_stop": 2.5}, "Tuning.recursion_stop must be an int >= 0; got 2.5"),
    ({"recursion_stop": True}, "Tuning.recursion_stop must be an int >= 0; got True"),
    ({"tile_candidates": ()}, "Tuning.tile_candidates must be a non-empty tuple of ints >= 0; got ()"),
    ({"tile_candidates": (256, 0)}, r"Tuning.tile_candidates must hold tile sizes >= 1; got \(256, 0\)"),
    ({"recursive_rhs": (64, 8)}, r"Tuning.recursive_rhs must be \(low, high\) with low <= high; got \(64, 8\)"),
])
def test_bad_values_are_refused_and_nothing_changes(changes, message):
    before = get_tuning()
    with pytest.raises(ValueError, match=message):
        set_tuning(**changes)
    assert get_tuning() is before


def test_unknown_field_and_wrong_type():
    with pytest.raises(TypeError, match="Tuning has no field 'tile'"):
        set_tuning(tile=3)
    with pytest.raises(TypeError, match="tuning must be a tileblas.Tuning or None; got dict"):
        set_tuning({"small_flops": 1.0})


def test_with_block_restores_and_a_call_returns_the_previous():
    before = get_tuning()
    with set_tuning(recursion_stop=64) as t:
        assert get_tuning() is t and t.recursion_stop == 64
        with set_tuning(wide_rhs=8):
            assert get_tuning().recursion_stop == 64 and get_tuning().wide_rhs == 8
        assert get_tuning() is t
    assert get_tuning() is before
    done = set_tuning(Tuning(recursion_stop=32))
    try:
        assert done.previous is before and get_tuning().recursion_stop == 32
        assert get_tuning().wide_rhs == before.wide_rhs  # a whole Tuning replaces every field
    finally:
        set_tuning(before)


def test_the_runtime_and_planner_read_it_at_each_call(tuned):
    from tileblas.kernels import _recursive
    from tileblas.policy import _recursion
    from tileblas.runtime import Runtime, _planner as P

    rng = np.random.default_rng(0)
    n = 150  # 2 * 150**3 flops: below the shipped small_flops (2 * 192**3)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    c = np.zeros((n, n), order="F")
    bound = 2 * n * np.finfo(float).eps * (np.abs(a) @ np.abs(b))  # error bound of a product, elementwise
    with Runtime(devices=2, shared_flops=0.0) as rt:
        rt.gemm(1.0, a, b, 0.0, c)
        assert rt.last_profile().path == "small"
        tuned(small_flops=0.0, tile_candidates=(128,))
        c[:] = 0.0
        rt.gemm(1.0, a, b, 0.0, c)
        prof = rt.last_profile()
        assert prof.path == "tiled" and prof.tile_size == 128
        assert np.all(np.abs(c - a @ b) <= bound)
    assert P.default_tile_size("gemm", 4096, 4096, 4096, 2) == 128
    tuned(recursion_stop=100, recursion_stop_wide=300, wide_rhs=50)
    assert _recursive.default_stop(49) == 100 and _recursive.default_stop(50) == 300
    tuned(recursive_min_order=10, recursive_rhs=(1, 5), recursive_min_threads=2)
    # the shipped precisions for a triangle on the left: single; on the right: all
    assert _recursion.recursion_faster(10, 5, 2, "trsm", "f")
    assert not _recursion.recursion_faster(10, 6, 2, "trsm", "f")
    assert _recursion.recursion_faster(10, 5, 2, "trmm", "F", "L")
    assert not _recursion.recursion_faster(10, 5, 2, "trsm", "d", "L")
    assert not _recursion.recursion_faster(10, 5, 2, "trmm", "D", "L")
    assert _recursion.recursion_faster(10, 5, 2, "trsm", "d", "R")
    assert _recursion.recursion_faster(10, 5, 2, "trmm", "D", "R")
    assert not _recursion.recursion_faster(10, 5, 1, "trsm", "f")
    # a rule set in the Tuning holds at any thread count; the shipped one only at the thread counts it was
    # measured at (2), OpenBLAS's routine elsewhere
    assert _recursion.recursion_faster(10, 5, 16, "trsm", "d", "R")
    assert _recursion.recursion_window("trsm", "d", "R", 16) == (10.0, 1.0, 5.0)
    tuned(recursive_min_order=1024, recursive_rhs=(32, 128))  # the shipped values again
    assert _recursion.recursion_window("trsm", "d", "R", 2) == (1024.0, 32.0, 128.0)
    assert _recursion.recursion_window("trsm", "d", "R", 16) is None
    assert not _recursion.recursion_faster(2048, 64, 16, "trsm", "d", "R")
    assert _recursion.recursion_faster(2048, 64, 2, "trsm", "d", "R")
    tuned(recursive_min_order=10, recursive_rhs=(1, 5))
    tuned(recursive_left_prefixes="sdcz")
    assert _recursion.recursion_faster(10, 5, 2, "trsm", "d", "L")
    with pytest.raises(ValueError, match="recursive_left_prefixes"):
        tuned(recursive_left_prefixes="dx")


def test_info_shows_what_was_changed(tuned, capsys):
    from tileblas.cli import main

    tuned(recursion_stop=96)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "Tuning       changed from the shipped defaults: recursion_stop=96" in out
