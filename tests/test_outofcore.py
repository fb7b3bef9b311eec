"""Operands that live in files: tile reads and writes by pread/pwrite, Runtime(host_memory=...), bad input."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tileblas
from tileblas.devices import _filetiles
from tileblas.devices._filetiles import file_position, read_tile, reserve, write_tile

EPS = np.finfo(np.float64).eps


def _memmap(path, shape, order="F", mode="w+", fill=None, dtype=np.float64):
    m = np.memmap(path, dtype=dtype, mode=mode, shape=shape, order=order)
    if fill is not None:
        m[...] = fill
        m.flush()
    return m


@pytest.mark.parametrize("order", ["F", "C"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_tiles_round_trip_through_the_file(tmp_path, order, dtype):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((37, 29)).astype(dtype)
    m = _memmap(tmp_path / "m", (37, 29), order, fill=data, dtype=dtype)
    for rows, cols in ((slice(3, 20), slice(10, 16)), (slice(0, 37), slice(2, 9)), (slice(36, 37), slice(20, 29))):
        host = m[rows, cols]
        assert file_position(host) is not None
        tile = np.empty(host.shape, dtype=dtype, order="F")
        read_tile(tile, host)
        np.testing.assert_array_equal(tile, data[rows, cols])
        write_tile(host, 2 * tile)
    del m
    back = np.fromfile(tmp_path / "m", dtype=dtype).reshape((37, 29), order=order)
    want = data.copy()
    for rows, cols in ((slice(3, 20), slice(10, 16)), (slice(0, 37), slice(2, 9)), (slice(36, 37), slice(20, 29))):
        want[rows, cols] *= 2
    np.testing.assert_array_equal(back, want)  # written into the file itself


def test_only_file_backed_views_go_to_the_file(tmp_path):
    assert file_position(np.zeros((3, 3))) is None
    m = _memmap(tmp_path / "m", (4, 4), fill=1.0)
    cow = np.memmap(tmp_path / "m", dtype=np.float64, mode="c", shape=(4, 4), order="F")
    assert file_position(cow) is None  # copy-on-write: the map may differ from the file
    name, pos, mode = file_position(m[1:, 2:])
    assert name == str(tmp_path / "m") and pos == (2 * 4 + 1) * 8 and mode == "w+"


def test_a_file_shorter_than_its_array_is_an_error_not_a_crash(tmp_path):
    m = _memmap(tmp_path / "m", (64, 64), fill=1.0)
    os.truncate(tmp_path / "m", 64 * 8 * 10)  # the file lost its tail after the map was made
    tile = np.empty((64, 32), order="F")
    with pytest.raises(OSError, match="shorter than the array"):
        read_tile(tile, m[:, 32:])


def test_reserve_allocates_the_blocks_of_a_sparse_output(tmp_path):
    m = _memmap(tmp_path / "c", (512, 512))  # created sparse by numpy
    before = os.stat(tmp_path / "c").st_blocks
    reserve(m, "c")
    assert os.stat(tmp_path / "c").st_blocks * 512 >= 512 * 512 * 8 > before * 512


def _operands(tmp_path, n, seed=0):
    rng = np.random.default_rng(seed)
    a = _memmap(tmp_path / "a", (n, n), fill=rng.standard_normal((n, n)))
    b = _memmap(tmp_path / "b", (n, n), fill=rng.standard_normal((n, n)))
    c = _memmap(tmp_path / "c", (n, n), fill=0.0)
    return a, b, c


def test_gemm_on_files_under_a_memory_bound(tmp_path):
    n = 1200
    a, b, c = _operands(tmp_path, n)
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:
        rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=200)
        prof = rt.last_profile()
        mem = rt.stats()["memory"]
    assert prof.path == "tiled" and [d.name for d in prof.devices] == ["staged0", "staged1"]
    assert sum(d["heap_capacity"] for d in mem.values()) <= 64 << 20
    ref = np.asarray(a) @ np.asarray(b)
    bound = 4 * n * EPS * (np.abs(np.asarray(a)) @ np.abs(np.asarray(b)))
    c.flush()
    back = np.fromfile(tmp_path / "c", dtype=np.float64).reshape((n, n), order="F")
    assert np.all(np.abs(back - ref) <= bound)


def test_resident_memory_stays_within_the_bound(tmp_path):
    # operands of 3 x 54 MB under a 96 MiB bound: reading them through their maps would add all 162 MB
    # to the resident set; the call adds no more than its tile buffers
    _operands(tmp_path, 2600)
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent (here pytest)
    code = textwrap.dedent(f"""
        import numpy as np, tileblas
        def peak():
            return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
        n = 2600
        a, b, c = (np.memmap("{tmp_path}/" + k, dtype=np.float64, mode="r+", shape=(n, n), order="F")
                   for k in "abc")
        with tileblas.Runtime(2, host_memory=96 << 20) as rt:
            w = np.ones((600, 600), order="F")  # warm-up in memory: imports, OpenBLAS buffers
            rt.run("gemm", 1.0, w, w, 0.0, np.zeros((600, 600), order="F"), tile_size=256)
            del w
            before = peak()
            rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=256)
        print(before, peak())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split())
    assert after - before < 96 << 20


def test_a_full_disk_is_found_before_the_output_changes(tmp_path, monkeypatch):
    a, b, c = _operands(tmp_path, 600)
    c[...] = 7.0
    c.flush()

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_filetiles.os, "posix_fallocate", full)
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:
        with pytest.raises(OSError, match=r"c lives in .*could not reserve.*c is untouched"):
            rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=128)
        monkeypatch.undo()
        assert np.all(np.fromfile(tmp_path / "c", dtype=np.float64) == 7.0)
        rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=128)  # the runtime keeps working
    assert np.allclose(np.asarray(c), np.asarray(a) @ np.asarray(b))


def test_a_truncated_input_fails_the_call_and_the_runtime_goes_on(tmp_path):
    a, b, c = _operands(tmp_path, 600)
    os.truncate(tmp_path / "b", 600 * 8 * 100)
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:
        with pytest.raises(OSError, match="shorter than the array"):
            rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=128)
        x = np.asfortranarray(np.eye(300))
        y = np.zeros((300, 300), order="F")
        rt.run("gemm", 1.0, x, x, 0.0, y, tile_size=128)
        assert np.array_equal(y, x)


def test_bad_host_memory_and_outputs(tmp_path):
    for bad in (0, -1, 1 << 10, "2GB", 2.5e9, True):
        with pytest.raises(ValueError, match="host_memory"):
            tileblas.Runtime(host_memory=bad)
    with pytest.raises(ValueError, match="host_memory.*devices must be None or a worker count"):
        tileblas.Runtime("cpu:2", host_memory=1 << 30)
    a, b, _ = _operands(tmp_path, 300)
    ro = np.memmap(tmp_path / "a", dtype=np.float64, mode="r", shape=(300, 300), order="F")
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:
        with pytest.raises(ValueError, match="must be writeable"):
            rt.run("gemm", 1.0, a, b, 0.0, ro, tile_size=128)


def test_long_calls_show_a_progress_bar(tmp_path, monkeypatch, capsys):
    from tileblas import _progress
    from tileblas.runtime import _runtime

    bars = []

    class Recording(_progress.Progress):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            bars.append(self)

    monkeypatch.setattr(_progress, "Progress", Recording)
    monkeypatch.setattr(_runtime._CallProgress, "AFTER_S", 0.0)  # show at once
    a, b, c = _operands(tmp_path, 600)
    with tileblas.Runtime(2, host_memory=64 << 20, progress=True) as rt:
        rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=100)
    assert len(bars) == 1 and bars[0].total == 36 and bars[0].done == 36 and bars[0].desc == "gemm (tiles of 100)"
    assert "gemm (tiles of 100)" in capsys.readouterr().err
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:  # off by default
        rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=100)
    assert len(bars) == 1 and capsys.readouterr().err == ""


def test_devices_with_memory_of_their_own_get_larger_tiles_where_they_fit():
    from tileblas.devices.sim import SimDevice

    with tileblas.Runtime(2, host_memory=2 << 30) as rt:  # 832 MiB of tiles per worker
        assert rt._default_tile("gemm", 24576, 24576, 24576) == 2048  # half the reads of 1024
        assert rt._default_tile("gemm", 4096, 4096, 4096) == 1024  # 2048 would leave 2 tiles per worker
        assert rt._default_tile("trsm", 24576, 24576, 24576) <= 1024  # chains keep the heuristic's tile
    with tileblas.Runtime(2, host_memory=256 << 20) as rt:
        assert rt._default_tile("gemm", 24576, 24576, 24576) == 1024  # three 2048 tiles per stream do not fit
    with tileblas.Runtime([SimDevice(0, memory=64 << 30)]) as rt:
        assert rt._default_tile("gemm", 65536, 65536, 65536) == 4096
    with tileblas.Runtime(2) as rt:  # host workers: the host candidates only
        assert rt._default_tile("gemm", 24576, 24576, 24576) <= 1024


# ---------------------------------------------------------------------------------------------------
# a real full disk: a small filesystem (tmpfs) mounted for the test (root only; skipped elsewhere)
# ---------------------------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A filesystem of 24 MiB mounted at tmp_path/disk for one test."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a small filesystem here: {exc}")
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {r.stderr.strip() or r.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def _free(path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _fill_disk(mnt, leave: int = 0) -> None:
    """Write a filler file until the disk has ``leave`` bytes left, or is full."""
    block = b"\xff" * (1 << 20)
    with open(mnt / "filler", "ab") as fh:
        while _free(mnt) > leave:
            try:
                fh.write(block[:max(4096, min(len(block), _free(mnt) - leave))])
                fh.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break


def test_a_disk_too_small_for_the_output_fails_before_the_file_changes(tmp_path, small_disk):
    n = 1200  # c: 11.5 MB, in a file created sparse on a disk with less room than that left
    a, b, _ = _operands(tmp_path, n)
    c = _memmap(small_disk / "c", (n, n))  # sparse: no blocks yet
    _fill_disk(small_disk, leave=4 << 20)
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:
        with pytest.raises(OSError, match=r"c lives in .*/disk/c: could not reserve its 11520000 bytes on disk "
                                          r"\(No space left on device\); c is untouched"):
            rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=200)
        assert not np.any(np.fromfile(small_disk / "c", dtype=np.float64))  # still all zeros (a hole)
        (small_disk / "filler").unlink()
        rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=200)  # room again: the same call completes
    ref = np.asarray(a) @ np.asarray(b)
    back = np.fromfile(small_disk / "c", dtype=np.float64).reshape((n, n), order="F")
    assert np.all(np.abs(back - ref) <= 4 * n * EPS * (np.abs(np.asarray(a)) @ np.abs(np.asarray(b))))


def test_a_disk_that_fills_up_mid_call_cannot_half_write_the_output(tmp_path, small_disk, monkeypatch):
    n = 1200
    a, b, _ = _operands(tmp_path, n)
    c = _memmap(small_disk / "c", (n, n))
    reserve = _filetiles.reserve

    def reserve_then_fill(out, name):  # the call has reserved c's blocks: now another writer fills the disk
        reserve(out, name)
        _fill_disk(small_disk)

    from tileblas.runtime import _runtime

    monkeypatch.setattr(_runtime, "reserve", reserve_then_fill)
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:
        rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=200)
    assert _free(small_disk) < 200 * 200 * 8  # the disk was full while the tiles were written
    ref = np.asarray(a) @ np.asarray(b)
    back = np.fromfile(small_disk / "c", dtype=np.float64).reshape((n, n), order="F")
    assert np.all(np.abs(back - ref) <= 4 * n * EPS * (np.abs(np.asarray(a)) @ np.abs(np.asarray(b))))


@pytest.mark.parametrize("inputs", ["numpy", "zarr"])  # in memory (c written back at the end), tiled
def test_a_full_disk_under_a_zarr_output_fails_the_call_and_names_the_tiles_written(tmp_path, small_disk, inputs):
    zarr = pytest.importorskip("zarr")
    n = 1200
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((2, n, n))
    za, zb = a, b
    if inputs == "zarr":
        za, zb = (zarr.create_array(store=str(tmp_path / k), shape=(n, n), chunks=(200, 200), dtype="f8")
                  for k in ("a.zarr", "b.zarr"))
        za[...], zb[...] = a, b
    zc = zarr.create_array(store=str(small_disk / "c.zarr"), shape=(n, n), chunks=(200, 200), dtype="f8",
                           fill_value=0.0, compressors=None)
    _fill_disk(small_disk, leave=5 << 20)  # room for about 16 of the 36 tiles of c
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:
        with pytest.raises(OSError) as info:
            rt.run("gemm", 1.0, za, zb, 0.0, zc, tile_size=200)
        assert info.value.errno == errno.ENOSPC
        notes = " ".join(getattr(info.value, "__notes__", []))
        assert "the zarr output c holds new values in" in notes and "the rest is unchanged" in notes, notes
        count = int(notes.split("holds new values in ")[1].split(" tiles")[0])
        (small_disk / "filler").unlink()
        got, ref = zc[...], a @ b
        bound = 4 * n * EPS * (np.abs(a) @ np.abs(b))
        new = 0
        for i in range(0, n, 200):  # each tile holds either its old values (0) or its whole new ones
            for j in range(0, n, 200):
                t = got[i:i + 200, j:j + 200]
                if np.all(t == 0.0):
                    continue
                assert np.all(np.abs(t - ref[i:i + 200, j:j + 200]) <= bound[i:i + 200, j:j + 200])
                new += 1
        assert new == count and 0 < count < 36
        rt.run("gemm", 1.0, za, zb, 0.0, zc, tile_size=200)  # room again: the runtime goes on and completes it
        assert np.all(np.abs(zc[...] - ref) <= bound)


# -- the file of a memmap is the file it maps, whatever its path names now (issue 37) --------------------


def _replace(path, fill):
    """Rename ``path`` away and put a new file of the same size at its name, filled with ``fill``."""
    os.rename(path, str(path) + ".old")
    new = _memmap(path, (300, 300), fill=fill)
    del new


@pytest.mark.parametrize("how", ["replaced", "unlinked"])
def test_a_memmap_whose_path_now_names_another_file_is_read_and_written_through_its_own_file(tmp_path, how):
    n = 300
    a, b, c = _operands(tmp_path, n)
    want = np.asarray(a) @ np.asarray(b)
    for k in "abc":
        if how == "replaced":
            _replace(tmp_path / k, fill=5.0)
        else:
            os.unlink(tmp_path / k)
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:
        rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=128)
    assert np.allclose(np.asarray(c), want)  # the user's memmap has the result
    if how == "replaced":  # the files now at those names are neither read nor written
        for k in "abc":
            assert np.all(np.fromfile(tmp_path / k, dtype=np.float64) == 5.0)
        np.testing.assert_array_equal(np.fromfile(str(tmp_path / "c") + ".old", dtype=np.float64)
                                      .reshape((n, n), order="F"), np.asarray(c))


@pytest.mark.parametrize("proc", ["map_files", "maps", "none"])  # root opens /proc/self/map_files; others
def test_tile_copies_never_touch_a_file_that_is_not_the_mapped_one(tmp_path, monkeypatch, proc):
    if proc != "map_files":  # not root: the name or Python's descriptor, checked against /proc/self/maps
        monkeypatch.setattr(_filetiles, "_MAP_FILES", "/nonexistent/map_files")
    if proc == "none":  # no /proc: through the map itself
        monkeypatch.setattr(_filetiles, "_MAPS", "/nonexistent/maps")
    m = _memmap(tmp_path / "m", (300, 300), fill=1.0)
    _replace(tmp_path / "m", fill=5.0)
    tile = np.empty((100, 100), order="F")
    read_tile(tile, m[:100, :100])
    assert np.all(tile == 1.0)
    write_tile(m[:100, :100], np.full((100, 100), 2.0, order="F"))
    reserve(m, "m")
    assert np.all(np.fromfile(tmp_path / "m", dtype=np.float64) == 5.0)
    assert np.all(np.asarray(m)[:100, :100] == 2.0) and np.all(np.asarray(m)[100:] == 1.0)
    os.unlink(tmp_path / "m")  # and a file no name leads to any more
    read_tile(tile, m[100:200, :100])
    assert np.all(tile == 1.0)
    write_tile(m[100:200, :100], np.full((100, 100), 3.0, order="F"))
    assert np.all(np.asarray(m)[100:200, :100] == 3.0)


def test_pread_is_kept_when_the_file_is_provably_the_mapped_one(tmp_path, monkeypatch):
    # the identity check must not send ordinary memmaps to their maps (resident memory, SIGBUS)
    monkeypatch.setattr(_filetiles, "_MAP_FILES", "/nonexistent/map_files")
    m = _memmap(tmp_path / "m", (64, 64), fill=1.0)
    os.truncate(tmp_path / "m", 64 * 8 * 10)
    with pytest.raises(OSError, match="shorter than the array"):
        read_tile(np.empty((64, 32), order="F"), m[:, 32:])


def test_an_output_whose_file_was_truncated_is_refused_not_extended(tmp_path):
    """The output's file cut short after the map was made (or while the call runs): the call raises OSError
    naming the file and never writes past its end (pwrite and posix_fallocate would extend it with zeros:
    a call whose output file was truncated half-way reported success with 2.9e6 of 5.8e6 elements zero)."""
    n = 300
    a, b, c = _operands(tmp_path, n)
    os.truncate(tmp_path / "c", n * n * 8 // 3)
    with tileblas.Runtime(2, host_memory=64 << 20) as rt:
        with pytest.raises(OSError, match="truncated"):
            rt.run("gemm", 1.0, a, b, 0.0, c, tile_size=128)
    assert os.path.getsize(tmp_path / "c") == n * n * 8 // 3


def test_tile_writes_past_the_end_of_a_truncated_file_are_refused(tmp_path):
    m = _memmap(tmp_path / "m", (300, 300), fill=1.0)
    os.truncate(tmp_path / "m", 300 * 8 * 100)  # 100 columns left
    write_tile(m[:, :100], np.full((300, 100), 2.0, order="F"))  # within the file
    with pytest.raises(OSError, match="truncated"):
        write_tile(m[:, 200:], np.full((300, 100), 2.0, order="F"))
    assert os.path.getsize(tmp_path / "m") == 300 * 8 * 100
    assert np.all(np.fromfile(tmp_path / "m", dtype=np.float64) == 2.0)
