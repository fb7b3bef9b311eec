"""Tests of the device heap, the ALRU tile cache with reader counts, the MESI-X directory and the tile
memory's allocation-failure path (eviction, waiting, a clear error when nothing can be freed)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tileblas.devices import DeviceError, SimDevice
from tileblas.runtime._cache import ALRU, Block, Directory
from tileblas.runtime._tilememory import TaskMemory, TileMemory
from tileblas.runtime._memory import DeviceHeap
from tileblas.runtime._planner import Tile

# ---------------------------------------------------------------------------------------------------
# heap
# ---------------------------------------------------------------------------------------------------


def test_heap_first_fit_split():
    h = DeviceHeap(1024, alignment=64)
    a = h.alloc(100)  # rounds up to 128
    b = h.alloc(64)
    assert (a, b) == (0, 128)
    assert h.size_of(a) == 128 and h.used_bytes == 192
    assert h.free_segments() == [(192, 832)]
    assert h.stats.splits == 2


def test_heap_merge_left_right_and_both():
    h = DeviceHeap(1024, alignment=64)
    offs = [h.alloc(128) for _ in range(8)]
    assert offs == [128 * i for i in range(8)] and h.free_segments() == []
    h.free(offs[2])
    h.free(offs[4])
    assert h.free_segments() == [(256, 128), (512, 128)]
    h.free(offs[3])  # merges with both neighbours
    assert h.free_segments() == [(256, 384)]
    h.free(offs[1])  # merges with the right neighbour
    assert h.free_segments() == [(128, 512)]
    h.free(offs[5])  # merges with the left neighbour
    assert h.free_segments() == [(128, 640)]
    for o in (offs[0], offs[6], offs[7]):
        h.free(o)
    assert h.free_segments() == [(0, 1024)] and h.used_bytes == 0
    assert h.stats.merges >= 5


def test_heap_first_fit_reuses_first_hole_and_fails_without_raising():
    h = DeviceHeap(1024, alignment=64)
    offs = [h.alloc(256) for _ in range(4)]
    assert h.alloc(64) is None and h.stats.failures == 1
    h.free(offs[1])
    h.free(offs[3])
    assert h.alloc(128) == 256  # the first hole that fits, split
    assert h.alloc(256) == 768  # the remaining 128 of the first hole is too small
    assert h.alloc(192) is None  # fragmentation: 128 free, but not in one piece that fits
    assert h.largest_free == 128


def test_heap_bad_input():
    with pytest.raises(ValueError, match="capacity"):
        DeviceHeap(-1)
    with pytest.raises(ValueError, match="alignment"):
        DeviceHeap(1024, alignment=3)
    h = DeviceHeap(1024)
    with pytest.raises(ValueError, match="nbytes"):
        h.alloc(-5)
    with pytest.raises(ValueError, match="offset 77"):
        h.free(77)


def test_heap_random_alloc_free_consistent():
    rng = np.random.default_rng(1)
    h = DeviceHeap(1 << 16, alignment=256)
    live: dict[int, int] = {}
    for _ in range(2000):
        if live and rng.random() < 0.45:
            off = int(rng.choice(list(live)))
            h.free(off)
            del live[off]
        else:
            n = int(rng.integers(1, 4096))
            off = h.alloc(n)
            if off is not None:
                live[off] = h.size_of(off)
        segs = sorted([(o, s) for o, s in live.items()] + h.free_segments())
        pos = 0
        for o, s in segs:  # used and free segments tile the chunk exactly
            assert o == pos
            pos += s
        assert pos == h.capacity
        free = h.free_segments()
        assert all(free[i][0] + free[i][1] < free[i + 1][0] for i in range(len(free) - 1))  # merged


# ---------------------------------------------------------------------------------------------------
# ALRU
# ---------------------------------------------------------------------------------------------------


def _blk(key):
    b = Block(key, 0, 0, 8)
    b.filled.set()
    return b


def test_alru_evicts_least_recent_without_readers():
    c = ALRU()
    for k in "abcd":
        c.enqueue(_blk(k))
    assert c.keys() == list("abcd")
    c.get("a")  # hit: a becomes most recent
    assert c.keys() == list("bcda")
    c.peek("b").readers = 1  # b is read by an unfinished kernel
    c.peek("c").readers = 2
    v = c.dequeue()
    assert v.key == "d"  # the first block from the LRU end with no readers
    c.peek("b").readers = 0
    assert c.dequeue().key == "b"
    c.peek("a").readers = 1
    assert c.dequeue() is None  # every block is read
    assert len(c) == 2


def test_alru_skips_blocks_being_filled_and_rejects_duplicates():
    c = ALRU()
    b = Block("x", 0, 0, 8)  # filled not set: a copy into it may be in flight
    c.enqueue(b)
    assert c.dequeue() is None
    b.filled.set()
    assert c.dequeue() is b
    c.enqueue(_blk("y"))
    with pytest.raises(ValueError, match="already cached"):
        c.enqueue(_blk("y"))


# ---------------------------------------------------------------------------------------------------
# MESI-X
# ---------------------------------------------------------------------------------------------------


def test_mesi_x_every_transition():
    d = Directory()
    k = ("A", 0, 0)
    assert d.state(k) == "I"
    d.add(k, 0)
    assert d.state(k) == "E"  # I -> E: one cache reads it
    d.add(k, 1)
    assert d.state(k) == "S"  # E -> S: a second cache
    d.add(k, 2)
    assert d.state(k) == "S"  # S -> S
    d.remove(k, 2)
    assert d.state(k) == "S"  # S -> S: one of three evicts
    d.remove(k, 1)
    assert d.state(k) == "E"  # S -> E
    d.remove(k, 0)
    assert d.state(k) == "I"  # E -> I
    d.add(k, 0)
    assert d.modify(k, 1) == {0}  # E -> M: the copy on device 0 must go
    assert d.state(k) == "M"
    with pytest.raises(RuntimeError, match="M"):
        d.add(k, 2)  # nobody caches a tile while it is written
    d.written_back(k)
    assert d.state(k) == "I"  # M -> I: ephemeral M
    d.add(k, 0)
    d.add(k, 2)
    assert d.modify(k, 0) == {0, 2}  # S -> M
    d.written_back(k)
    assert d.modify(k, 0) == set()  # I -> M
    d.written_back(k)
    t = d.transitions
    for tr in [("I", "E"), ("E", "S"), ("S", "S"), ("S", "E"), ("E", "I"), ("E", "M"), ("S", "M"), ("I", "M"),
               ("M", "I")]:
        assert t[tr] >= 1, tr


# ---------------------------------------------------------------------------------------------------
# TileMemory: translate, eviction on allocation failure, waiting, error
# ---------------------------------------------------------------------------------------------------

T = 16  # tile side; 16*16 float64 = 2048 bytes


def _mem(tiles: int, devices: int = 1, **kw):
    devs = [SimDevice(i, memory=tiles * T * T * 8, streams=2, **kw) for i in range(devices)]
    return TileMemory(devs), devs


def _host(n_tiles: int):
    return np.asfortranarray(np.arange(n_tiles * T * T, dtype=np.float64).reshape(T, n_tiles * T))


def test_translate_hit_miss_and_eviction_instead_of_failure():
    mem, (dev,) = _mem(3)
    host = _host(5)
    ctx = mem._ctx_of(0, 0)
    tm = TaskMemory()
    blocks = []
    for j in range(3):
        b = mem._fetch(0, Tile(1, 0, j), host[:, j * T:(j + 1) * T], ctx, tm)
        assert np.array_equal(b.array, host[:, j * T:(j + 1) * T])  # a real copy on the device
        assert dev.owns(b.array)
        blocks.append(b)
    assert tm.miss == 3 and mem.heaps[0].free_bytes == 0
    mem._release(blocks)
    b = mem._fetch(0, Tile(1, 0, 0), host[:, :T], ctx, tm)  # hit, becomes most recent
    assert tm.l1 == 1 and b is blocks[0]
    mem._release([b])
    # heap full: the next tile evicts the least recently used block without readers (tile 1)
    b3 = mem._fetch(0, Tile(1, 0, 3), host[:, 3 * T:4 * T], ctx, tm)
    assert tm.evictions == 1
    assert Tile(1, 0, 1) not in mem.alru[0] and Tile(1, 0, 0) in mem.alru[0]
    assert mem.directory.state(Tile(1, 0, 1)) == "I"
    assert np.array_equal(b3.array, host[:, 3 * T:4 * T])
    # tile 0 is read now: the next miss must evict tile 2, not tile 0
    b0 = mem._fetch(0, Tile(1, 0, 0), host[:, :T], ctx, tm)
    mem._release([b3])
    mem._fetch(0, Tile(1, 0, 4), host[:, 4 * T:], ctx, tm)
    assert Tile(1, 0, 0) in mem.alru[0] and Tile(1, 0, 2) not in mem.alru[0]
    assert b0.readers == 1 and mem.heaps[0].stats.failures >= 2


def test_allocation_waits_for_a_reader_of_another_stream():
    mem, (dev,) = _mem(2)
    host = _host(3)
    c0, c1 = mem._ctx_of(0, 0), mem._ctx_of(0, 1)
    c0.active = c1.active = True
    held = [mem._fetch(0, Tile(1, 0, j), host[:, j * T:(j + 1) * T], c0, TaskMemory()) for j in range(2)]
    got = []

    def other():
        got.append(mem._fetch(0, Tile(1, 0, 2), host[:, 2 * T:], c1, TaskMemory()))

    th = threading.Thread(target=other)
    th.start()
    th.join(0.2)
    assert th.is_alive()  # every block is read: it waits rather than failing
    with mem._cv:
        mem._release(held[:1])
        mem._cv.notify_all()
    th.join(5)
    assert not th.is_alive() and np.array_equal(got[0].array, host[:, 2 * T:])


def test_allocation_that_can_never_succeed_raises_device_error():
    mem, (dev,) = _mem(1)
    host = _host(2)
    ctx = mem._ctx_of(0, 0)
    ctx.active = True
    mem._fetch(0, Tile(1, 0, 0), host[:, :T], ctx, TaskMemory())  # held by this very stream
    with pytest.raises(DeviceError, match="sim0.*memory"):
        mem._fetch(0, Tile(1, 0, 1), host[:, T:], ctx, TaskMemory())


def test_l2_fetch_from_peer_and_invalidation_on_write():
    mem, devs = _mem(4, devices=2)
    host = _host(1)
    k = Tile(1, 0, 0)
    tm0, tm1 = TaskMemory(), TaskMemory()
    b0 = mem._fetch(0, k, host, mem._ctx_of(0, 0), tm0)
    assert tm0.miss == 1 and mem.directory.state(k) == "E"
    assert mem.level(1, k) == 1 and mem.level(0, k) == 2
    b1 = mem._fetch(1, k, host, mem._ctx_of(1, 0), tm1)
    assert tm1.l2 == 1 and tm1.d2d == T * T * 8 and tm1.h2d == 0  # from the peer, not the host
    assert np.array_equal(b1.array, host) and mem.directory.state(k) == "S"
    assert devs[1].stats.bytes_d2d == T * T * 8
    mem._drain(mem._ctx_of(1, 0), wait=True)
    mem._release([b0, b1])
    mem.host_wrote(k)  # a write elsewhere: both copies go
    assert mem.directory.state(k) == "I" and len(mem.alru[0]) == len(mem.alru[1]) == 0
    assert mem.heaps[0].used_bytes == mem.heaps[1].used_bytes == 0


def test_l2_not_used_when_peer_link_is_slower():
    devs = [SimDevice(i, memory=1 << 16, bandwidth=1e10, peer_bandwidth=1e9) for i in range(2)]
    mem = TileMemory(devs)
    host = _host(1)
    k = Tile(1, 0, 0)
    mem._fetch(0, k, host, mem._ctx_of(0, 0), TaskMemory())
    tm = TaskMemory()
    mem._fetch(1, k, host, mem._ctx_of(1, 0), tm)
    assert tm.l2 == 0 and tm.miss == 1


def test_invalidating_a_read_block_frees_it_after_the_reader():
    mem, (dev,) = _mem(2)
    host = _host(1)
    k = Tile(1, 0, 0)
    b = mem._fetch(0, k, host, mem._ctx_of(0, 0), TaskMemory())
    with mem._cv:
        mem._invalidate(k)
    assert b.dead and mem.heaps[0].used_bytes > 0  # still read: not freed yet
    mem._release([b])
    assert mem.heaps[0].used_bytes == 0


def test_on_demand_policy_never_caches():
    devs = [SimDevice(0, memory=1 << 16)]
    mem = TileMemory(devs, policy="on-demand")
    host = _host(1)
    k = Tile(1, 0, 0)
    ctx = mem._ctx_of(0, 0)
    tm = TaskMemory()
    for _ in range(3):
        b = mem._fetch(0, k, host, ctx, tm)
        mem._release([b])
    assert tm.miss == 3 and tm.l1 == 0 and len(mem.alru[0]) == 0 and mem.heaps[0].used_bytes == 0
    with pytest.raises(ValueError, match="policy"):
        TileMemory(devs, policy="lru")
