"""Work the tile runtime refuses or bounds, and overflow (issue 37): a tile size that would make a plan of
millions of tile calls is refused at once; an alpha that overflows gives what the one native call gives,
never NaN from inf - inf between the partial products of tiles or a split-k reduction."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.linalg.blas as sb

import tileblas
from tileblas.runtime import _planner as P


@pytest.fixture(scope="module")
def rt():
    r = tileblas.Runtime(2)
    yield r
    r.close()


@pytest.mark.parametrize("n", [200, 400])
def test_a_tile_size_that_makes_the_plan_absurd_is_refused_at_once(rt, n):
    a = np.asfortranarray(np.random.default_rng(0).random((n, n)))
    c = np.full((n, n), 7.0, order="F")
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"tile_size=1 .*tile-kernel calls.*tile_size >= \d+"):
        rt.gemm(1.0, a, a, 0.0, c, tile_size=1)
    assert time.perf_counter() - t0 < 1.0
    assert np.all(c == 7.0)  # untouched
    rt.gemm(1.0, a, a, 0.0, c, tile_size=64)  # the runtime goes on
    np.testing.assert_allclose(c, a @ a, rtol=1e-12)


def test_the_smallest_tile_the_refusal_names_is_taken(rt):
    n = 300
    a = np.asfortranarray(np.random.default_rng(1).random((n, n)))
    with pytest.raises(ValueError) as info:
        rt.gemm(1.0, a, a, 0.0, np.zeros((n, n), order="F"), tile_size=2)
    least = int(str(info.value).rsplit("tile_size >= ", 1)[1].split()[0].rstrip(",;)"))
    assert P.tile_calls("gemm", n, n, n, least) <= tileblas.get_tuning().max_tile_calls
    c = np.zeros((n, n), order="F")
    rt.gemm(1.0, a, a, 0.0, c, tile_size=least)
    np.testing.assert_allclose(c, a @ a, rtol=1e-12)


def test_small_tiles_on_small_problems_and_bounded_long_dimensions_still_run(rt):
    a = np.asfortranarray(np.random.default_rng(2).random((12, 12)))
    c = np.zeros((12, 12), order="F")
    rt.gemm(1.0, a, a, 0.0, c, tile_size=1)  # 1728 tile calls: allowed
    np.testing.assert_allclose(c, a @ a, rtol=1e-12)


def _close_to_native(got: np.ndarray, ref: np.ndarray) -> None:
    """Where the native call gives NaN, so may tiles; elsewhere no NaN, the same infinities (with their
    signs, where the native result is infinite), and finite values close to the native ones (where the
    native value is finite and not within rounding of overflowing)."""
    big = np.finfo(ref.dtype).max
    assert not np.any(np.isnan(got) & ~np.isnan(ref)), f"{np.sum(np.isnan(got) & ~np.isnan(ref))} NaN"
    parts = (lambda x: (x.real, x.imag)) if np.iscomplexobj(ref) else (lambda x: (x,))
    for g, r in zip(parts(got), parts(ref)):
        inf = np.isinf(r)
        assert np.array_equal(g[inf], r[inf])
        fin = np.isfinite(r) & (np.abs(r) < big / 2)
        np.testing.assert_allclose(g[fin], r[fin], rtol=1e-6, atol=0)


CASES = [  # (routine, m, n, k, tile): square, and a skinny output with a long k (split-k)
    ("gemm", 300, 300, 300, 64), ("gemm", 64, 64, 4096, 64), ("symm", 256, 256, 256, 64),
    ("syrk", 256, 256, 512, 64), ("syr2k", 128, 128, 1024, 64), ("trmm", 256, 256, 256, 64),
]


@pytest.mark.parametrize("alpha", [1e308, -1e308, 2e307])
@pytest.mark.parametrize("routine, m, n, k, tile", CASES)
@pytest.mark.parametrize("p", ["d", "z"])
def test_an_overflowing_alpha_gives_what_one_native_call_gives(rt, routine, m, n, k, tile, alpha, p):
    rng = np.random.default_rng(3)
    dt = np.dtype("f8" if p == "d" else "c16")

    def r(*shape):
        x = rng.standard_normal(shape)
        return np.asfortranarray(x + 1j * rng.standard_normal(shape) if dt.kind == "c" else x).astype(dt)

    c0 = r(m, n)
    if routine == "gemm":
        a, b = r(m, k), r(k, n)
        ref = getattr(sb, p + "gemm")(alpha, a, b, 1.0, c0.copy(order="F"))
        got = c0.copy(order="F")
        rt.gemm(alpha, a, b, 1.0, got, tile_size=tile)
    elif routine == "symm":
        a, b = r(m, m), r(m, n)
        ref = getattr(sb, p + "symm")(alpha, a, b, 1.0, c0.copy(order="F"))
        got = c0.copy(order="F")
        rt.symm(alpha, a, b, 1.0, got, tile_size=tile)
    elif routine in ("syrk", "syr2k"):
        a, b = r(n, k), r(n, k)
        extra = (b,) if routine == "syr2k" else ()
        ref = np.triu(getattr(sb, p + routine)(alpha, a, *extra, beta=1.0, c=c0.copy(order="F")))
        got = c0.copy(order="F")
        getattr(rt, routine)(alpha, a, *extra, 1.0, got, tile_size=tile)
        got = np.triu(got)
    else:  # trmm
        a, b = r(m, m), r(m, n)
        ref = getattr(sb, p + "trmm")(alpha, a, b.copy(order="F"))
        got = b.copy(order="F")
        rt.trmm(alpha, a, got, tile_size=tile)
    assert rt.last_profile().path not in ("tiled", "split-k") or not np.any(np.isnan(got))
    _close_to_native(got, ref)


def test_an_ordinary_alpha_still_runs_on_tiles(rt):
    a = np.asfortranarray(np.random.default_rng(4).random((300, 300)))
    c = np.zeros((300, 300), order="F")
    rt.gemm(2.0, a, a, 0.0, c, tile_size=64)
    assert rt.last_profile().path in ("tiled", "split-k")
    np.testing.assert_allclose(c, 2.0 * (a @ a), rtol=1e-12)
