"""Level-3 calls on zarr arrays: tiles read from and written to the zarr stores under a memory bound."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tileblas

zarr = pytest.importorskip("zarr")

EPS = np.finfo(np.float64).eps


def _z(path, a, chunks):
    z = zarr.create_array(store=str(path), shape=a.shape, chunks=chunks, dtype=a.dtype, overwrite=True)
    z[...] = a
    return z


def _bound(n, x, y):
    return 4 * n * EPS * (np.abs(x) @ np.abs(y))


@pytest.fixture
def rt():
    with tileblas.Runtime(2, host_memory=64 << 20) as r:
        yield r


def test_gemm_with_every_operand_in_zarr_runs_tiled_and_chunk_aligned(tmp_path, rt):
    n = 1200
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((3, n, n))
    za, zb, zc = _z(tmp_path / "a", a, (200, 200)), _z(tmp_path / "b", b, (200, 200)), _z(tmp_path / "c", c, (100, 200))
    rt.run("gemm", 1.5, za, zb, 0.5, zc, transa="T")
    prof = rt.last_profile()
    assert prof.path in ("tiled", "split-k") and prof.tile_size % 200 == 0  # whole chunks of every operand
    assert [d.name for d in prof.devices] == ["staged0", "staged1"]
    ref = 1.5 * a.T @ b + 0.5 * c
    assert np.all(np.abs(zc[...] - ref) <= _bound(n, 1.5 * np.abs(a.T), np.abs(b)) + EPS * np.abs(c))
    assert sum(d["heap_capacity"] for d in rt.stats()["memory"].values()) <= 64 << 20


def test_zarr_and_numpy_operands_mix_in_one_call(tmp_path, rt):
    n = 1000
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, n, n))
    za = _z(tmp_path / "a", a, (250, 250))
    c = np.zeros((n, n), order="F")
    rt.run("gemm", 1.0, za, b, 0.0, c, tile_size=250)
    assert np.all(np.abs(c - a @ b) <= _bound(n, a, b))
    zc = _z(tmp_path / "c", np.zeros((n, n)), (250, 250))
    rt.run("syrk", 1.0, a, 0.0, zc, uplo="L", tile_size=500)
    got = zc[...]
    assert np.all(np.abs(np.tril(got) - np.tril(a @ a.T)) <= np.tril(_bound(n, a, a.T)))
    assert np.all(np.triu(got, 1) == 0)  # the other triangle is not written


def test_triangular_solve_in_place_on_a_zarr_right_hand_side(tmp_path, rt):
    n, r = 900, 700
    rng = np.random.default_rng(2)
    t = np.triu(rng.standard_normal((n, n))) + n * np.eye(n)
    b = rng.standard_normal((n, r))
    zt, zb = _z(tmp_path / "t", t, (300, 300)), _z(tmp_path / "b", b, (300, 100))
    rt.run("trsm", 2.0, zt, zb, side="L", uplo="U", tile_size=300)
    x = zb[...]
    resid = np.abs(t @ x - 2.0 * b)
    assert np.all(resid <= 8 * n * EPS * (np.abs(t) @ np.abs(x) + 2.0 * np.abs(b)))


def test_a_small_call_reads_its_zarr_operands_whole(tmp_path, rt):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 96, 96))
    za, zb = _z(tmp_path / "a", a, (32, 32)), _z(tmp_path / "b", b, (32, 32))
    zc = _z(tmp_path / "c", np.ones((96, 96)), (32, 32))
    rt.run("gemm", 1.0, za, zb, 2.0, zc)
    assert np.all(np.abs(zc[...] - (a @ b + 2.0)) <= _bound(96, a, b) + 4 * EPS)


def test_bad_zarr_operands_are_refused_by_name(tmp_path, rt):
    n = 1200
    a = np.ones((n, n))
    za = _z(tmp_path / "a", a, (200, 200))
    zc = _z(tmp_path / "c", a, (300, 300))
    with pytest.raises(ValueError, match=r"tile_size must be a multiple of 300 here, so that no two tiles share a "
                                         r"chunk of c \(chunks \(300, 300\)\); got tile_size=200"):
        rt.run("gemm", 1.0, za, za, 0.0, zc, tile_size=200)
    ro = zarr.open_array(str(tmp_path / "c"), mode="r")
    with pytest.raises(ValueError, match="c is the output and must be writeable; got a zarr array opened read-only"):
        rt.run("gemm", 1.0, za, za, 0.0, ro)
    with pytest.raises(ValueError, match=r"c \(the output\) must not be the same zarr array as a"):
        rt.run("gemm", 1.0, zc, za, 0.0, zc)
    again = zarr.open_array(str(tmp_path / "c"), mode="r+")
    with pytest.raises(ValueError, match=r"c \(the output\) must not be the same zarr array as b"):
        rt.run("gemm", 1.0, za, again, 0.0, zc)
    z3 = zarr.create_array(store=str(tmp_path / "z3"), shape=(4, 4, 4), chunks=(2, 2, 2), dtype="f8")
    with pytest.raises(ValueError, match=r"a must be a 2-D zarr array; got shape \(4, 4, 4\)"):
        rt.run("gemm", 1.0, z3, za, 0.0, zc)
    zi = zarr.create_array(store=str(tmp_path / "zi"), shape=(n, n), chunks=(300, 300), dtype="i4")
    with pytest.raises(ValueError, match="b must hold float32, float64, complex64 or complex128; got zarr dtype int32"):
        rt.run("gemm", 1.0, za, zi, 0.0, zc)
    with tileblas.Runtime(2) as plain:
        with pytest.raises(ValueError, match=r"zarr operands \(a, c\) need a Runtime whose workers copy tiles.*"
                                             r"host_memory=.*cpu0 \(cpu\)"):
            plain.run("gemm", 1.0, za, a, 0.0, zc)
    assert np.all(zc[...] == 1.0)  # nothing above wrote c
    c = np.zeros((n, n), order="F")
    rt.run("gemm", 1.0, za, a, 0.0, c)  # the runtime still works
    assert np.all(c == n)


def test_a_chunk_that_cannot_be_read_fails_the_call_and_names_what_was_written(tmp_path, rt):
    n = 1200
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, n, n))
    za, zb = _z(tmp_path / "a", a, (200, 200)), _z(tmp_path / "b", b, (200, 200))
    zc = _z(tmp_path / "c", np.full((n, n), 7.0), (200, 200))
    chunk = tmp_path / "b" / "c" / "5" / "5"  # the last chunk of b: read by the last column of tiles
    assert chunk.exists()
    chunk.write_bytes(b"not a chunk")
    with pytest.raises(Exception) as info:
        rt.run("gemm", 1.0, za, zb, 0.0, zc, tile_size=200)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "the zarr output c holds new values in" in notes and "the rest is unchanged" in notes, notes
    count = int(notes.split("holds new values in ")[1].split(" tiles")[0])
    got, ref, bound = zc[...], a @ b, _bound(n, a, b)
    new = 0
    for i in range(0, n, 200):
        for j in range(0, n, 200):
            t = got[i:i + 200, j:j + 200]
            if np.all(t == 7.0):
                continue  # untouched
            assert np.all(np.abs(t - ref[i:i + 200, j:j + 200]) <= bound[i:i + 200, j:j + 200])  # whole, new
            new += 1
    assert new == count
    assert np.all(got[:, 1000:] == 7.0)  # the tiles that needed the bad chunk were never written
    c = np.zeros((n, n), order="F")
    rt.run("gemm", 1.0, za, a, 0.0, c)  # the runtime goes on
    assert np.all(np.abs(c - a @ a) <= _bound(n, a, a))
    assert os.path.exists(tmp_path / "c" / "zarr.json")
