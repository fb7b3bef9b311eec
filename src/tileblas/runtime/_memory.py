"""The device heap (BLASX section IV-E): tile allocation without a driver call.

What it owns
    Book-keeping of one large chunk of device memory that the device allocated once.  :class:`DeviceHeap`
    hands out *offsets* into that chunk: first fit over the list of free segments (kept sorted by
    offset), the chosen segment split into the allocated part and the residue; on free, the segment is
    found through a hash table of occupied segments and merged with a free left and/or right neighbour,
    so that the free list never holds two adjacent segments.  The paper's Fig. 6 (meta-data list,
    occupied list, empty list) maps onto ``_free`` (sorted list of (offset, size)) and ``_used`` (offset ->
    size).

What it must not touch
    Device memory itself: the device turns an offset into an array (``Device.view``); the heap never
    sees data, so it is the same for every device kind and is tested on its own.

An allocation that does not fit returns ``None`` (never raises): the tile cache then evicts a tile and
tries again (Algorithm 2, line 5-6).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

__all__ = ["DeviceHeap", "HeapStats"]


@dataclass
class HeapStats:
    """Counters of a heap: allocations, frees, failed allocations, splits and merges done."""

    allocs: int = 0
    frees: int = 0
    failures: int = 0
    splits: int = 0
    merges: int = 0


class DeviceHeap:
    """First-fit allocator over ``[0, capacity)`` with split on allocate and merge on free.

    Parameters
    ----------
    capacity : int
        Bytes of the chunk.
    alignment : int
        Every allocation starts at a multiple of this (and its size is rounded up to it).

    Not thread-safe: the tile cache calls it under its own lock.
    """

    def __init__(self, capacity: int, alignment: int = 256) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise ValueError(f"capacity must be a non-negative int; got {capacity!r}")
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 1 \
                or alignment & (alignment - 1):
            raise ValueError(f"alignment must be a positive power of two; got {alignment!r}")
        self.alignment = alignment
        self.capacity = capacity - capacity % alignment
        self._free: list[tuple[int, int]] = [(0, self.capacity)] if self.capacity else []
        self._used: dict[int, int] = {}
        self.used_bytes = 0
        self.stats = HeapStats()

    def _round(self, nbytes: int) -> int:
        a = self.alignment
        return max(a, -(-nbytes // a) * a)

    def alloc(self, nbytes: int) -> int | None:
        """Offset of a new segment of at least ``nbytes`` bytes, or None when no free segment fits."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"nbytes must be a non-negative int; got {nbytes!r}")
        size = self._round(nbytes)
        for n, (off, seg) in enumerate(self._free):
            if seg >= size:
                if seg == size:
                    del self._free[n]
                else:
                    self._free[n] = (off + size, seg - size)
                    self.stats.splits += 1
                self._used[off] = size
                self.used_bytes += size
                self.stats.allocs += 1
                return off
        self.stats.failures += 1
        return None

    def free(self, offset: int) -> None:
        """Return the segment at ``offset``; merge it with free neighbours."""
        try:
            size = self._used.pop(offset)
        except KeyError:
            raise ValueError(f"offset {offset!r} is not an allocated segment of this heap") from None
        self.used_bytes -= size
        self.stats.frees += 1
        free = self._free
        n = bisect.bisect_left(free, (offset, 0))
        start, end = offset, offset + size
        if n < len(free) and free[n][0] == end:  # right neighbour
            end += free[n][1]
            del free[n]
            self.stats.merges += 1
        if n > 0 and free[n - 1][0] + free[n - 1][1] == start:  # left neighbour
            start = free[n - 1][0]
            del free[n - 1]
            n -= 1
            self.stats.merges += 1
        free.insert(n, (start, end - start))

    def size_of(self, offset: int) -> int:
        """Bytes reserved for the segment at ``offset``."""
        return self._used[offset]

    @property
    def free_bytes(self) -> int:
        return self.capacity - self.used_bytes

    @property
    def largest_free(self) -> int:
        return max((s for _, s in self._free), default=0)

    def free_segments(self) -> list[tuple[int, int]]:
        """The free list, (offset, size) sorted by offset."""
        return list(self._free)

    def used_segments(self) -> list[tuple[int, int]]:
        """The occupied segments, (offset, size) sorted by offset."""
        return sorted(self._used.items())

    def __repr__(self) -> str:
        return (f"<DeviceHeap {self.used_bytes}/{self.capacity} bytes used, {len(self._used)} segments, "
                f"{len(self._free)} free>")
