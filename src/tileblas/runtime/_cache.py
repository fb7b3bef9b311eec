"""The tile caches of devices with their own memory: ALRU (Algorithm 2) and the MESI-X directory (Fig. 3).

BLASX section IV-B: the data structures only.  :mod:`tileblas.runtime._tilememory` allocates their blocks on
the device heaps and runs tasks through them; :mod:`tileblas.runtime._locality` reads them for the
scheduler's priorities.

What it owns
    * :class:`Block`: one tile's segment of device memory.  Each block carries a *reader* count: a task
      increments it when a step of the task is about to use the tile, and the count is decremented only at
      a synchronisation point, when the event recorded after that step's kernel has completed (or when the
      task's stream is synchronised at its end).
    * :class:`ALRU`: one per device, hash map + recency list of the tiles the device holds.  Eviction
      (``dequeue``) walks from the least recently used end and takes the first block whose readers are 0,
      so a tile an asynchronous kernel may still read is never overwritten.
    * :class:`Directory` (MESI-X): which devices hold a tile.  I = no device, E = exactly one, S = several.
      A task that writes a tile puts it in M: every cached copy is invalidated, the device computes into a
      private buffer, writes the tile back to host memory and the tile returns to I, so host memory holds
      the truth whenever no task is writing and, in particular, when a call returns.

What it must not touch
    Device memory, devices and threads: nothing here allocates, copies or locks (the tile memory holds the
    lock around every use).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from typing import Any

__all__ = ["Block", "ALRU", "Directory"]


class Block:
    """One tile's segment of device memory."""

    __slots__ = ("key", "device", "offset", "nbytes", "array", "readers", "event", "filled", "dead", "error")

    def __init__(self, key: Any, device: int, offset: int, nbytes: int, array: Any = None) -> None:
        self.key = key
        self.device = device
        self.offset = offset
        self.nbytes = nbytes
        self.array = array
        self.readers = 0
        self.event: Any = None           # device event: the fill has completed on the device
        self.filled = threading.Event()  # host side: the fill has been issued (event is set)
        self.dead = False                # invalidated while readers > 0: freed when they drop to 0
        self.error: BaseException | None = None

    def __repr__(self) -> str:
        return f"<Block {self.key} dev={self.device} off={self.offset} readers={self.readers}>"


class ALRU:
    """Approximate least-recently-used tile cache of one device (Algorithm 2), without the allocation.

    ``translate`` in the paper = :meth:`get` (hit) or, on a miss, heap allocation with :meth:`dequeue`
    on failure followed by :meth:`enqueue`; :class:`TileMemory` composes them.  The most recently used
    block is at the end of the ordered map.
    """

    def __init__(self) -> None:
        self._map: "OrderedDict[Any, Block]" = OrderedDict()

    def get(self, key: Any) -> Block | None:
        """The block of ``key`` (made most recently used), or None."""
        b = self._map.get(key)
        if b is not None:
            self._map.move_to_end(key)
        return b

    def peek(self, key: Any) -> Block | None:
        return self._map.get(key)

    def enqueue(self, block: Block) -> None:
        """Insert a new block as most recently used, with 0 readers."""
        if block.key in self._map:
            raise ValueError(f"tile {block.key!r} is already cached")
        block.readers = 0
        self._map[block.key] = block

    def dequeue(self) -> Block | None:
        """Remove and return the least recently used block that has no readers (None: every block has
        readers).  Blocks still being filled count as read."""
        for key, b in self._map.items():
            if b.readers == 0 and b.filled.is_set():
                del self._map[key]
                return b
        return None

    def remove(self, key: Any) -> Block | None:
        return self._map.pop(key, None)

    def keys(self) -> list:
        """Keys from least to most recently used."""
        return list(self._map)

    def __contains__(self, key: Any) -> bool:
        return key in self._map

    def __len__(self) -> int:
        return len(self._map)


class Directory:
    """MESI-X states of tiles across the devices' ALRUs (see the module notes).

    ``transitions`` counts (from, to) state changes, so tests and profiles can see the protocol work.
    """

    def __init__(self) -> None:
        self._holders: dict[Any, set[int]] = {}
        self._modified: dict[Any, int] = {}
        self.transitions: Counter = Counter()

    def state(self, key: Any) -> str:
        if key in self._modified:
            return "M"
        n = len(self._holders.get(key, ()))
        return "I" if n == 0 else ("E" if n == 1 else "S")

    def holders(self, key: Any) -> set[int]:
        return self._holders.get(key, set())

    def add(self, key: Any, device: int) -> None:
        """``device`` cached ``key`` (I -> E, E -> S, S -> S)."""
        if key in self._modified:
            raise RuntimeError(f"tile {key!r} is being written (M); it cannot be cached now")
        before = self.state(key)
        self._holders.setdefault(key, set()).add(device)
        self.transitions[(before, self.state(key))] += 1

    def remove(self, key: Any, device: int) -> None:
        """``device`` dropped ``key`` (eviction or invalidation: S -> S, S -> E, E -> I)."""
        h = self._holders.get(key)
        if not h or device not in h:
            return
        before = self.state(key)
        h.discard(device)
        if not h:
            del self._holders[key]
        self.transitions[(before, self.state(key))] += 1

    def modify(self, key: Any, device: int) -> set[int]:
        """``device`` starts writing ``key``: state M.  Returns the devices whose copies must be
        invalidated (the caller drops them; they leave the directory here)."""
        before = self.state(key)
        holders = self._holders.pop(key, set())
        self._modified[key] = device
        self.transitions[(before, "M")] += 1
        return holders

    def written_back(self, key: Any) -> None:
        """The written tile is back in host memory: M -> I (the ephemeral M of MESI-X)."""
        if self._modified.pop(key, None) is not None:
            self.transitions[("M", "I")] += 1

    def keys(self) -> list:
        return list(self._holders)
