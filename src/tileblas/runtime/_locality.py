"""Where tiles are, for the scheduler's locality priority (BLASX equation 3).

A device scores a task by ``sum over its input tiles of f(tile)``: 2 for a tile it holds (L1), 1 for a tile a
peer holds that it could fetch cheaply (L2), 0 otherwise.  :class:`LocalityModel` is the interface the
scheduler reads; :class:`RecentTiles` stands in for the core caches of host devices; :class:`CacheLocality`
reads the real tile caches of devices with their own memory.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Sequence

__all__ = ["LocalityModel", "RecentTiles", "CacheLocality"]


class LocalityModel:
    """Where tiles are, as far as the priority of equation (3) is concerned.

    Subclasses (device tile caches) override :meth:`level` and :meth:`touched`.  ``level`` returns 2 for
    a tile resident on the device (L1 hit), 1 for a tile a peer device holds (L2 hit), 0 otherwise.
    """

    def level(self, device: int, key: tuple) -> int:  # pragma: no cover - interface
        return 0

    def touched(self, device: int, keys: Sequence[tuple]) -> None:  # pragma: no cover - interface
        """Called by a device's worker after it ran a task that read ``keys``."""

    def score(self, device: int, keys: Sequence[tuple]) -> int:
        level = self.level
        return sum(level(device, k) for k in keys)


class RecentTiles(LocalityModel):
    """The tiles each device touched most recently (bounded, least recently used dropped first).

    Host devices have no tile cache of their own; a tile read recently is likely still in the core's
    caches, and running the tasks that share it on the same worker keeps that so.  Peers' records are not
    consulted (level 1 does not apply to a shared memory space).
    """

    def __init__(self, devices: int, capacity: int = 64) -> None:
        self.capacity = capacity
        self._recent: list[OrderedDict] = [OrderedDict() for _ in range(devices)]

    def level(self, device: int, key: tuple) -> int:
        return 2 if key in self._recent[device] else 0

    def score(self, device: int, keys: Sequence[tuple]) -> int:
        return 2 * sum(map(self._recent[device].__contains__, keys))

    def touched(self, device: int, keys: Sequence[tuple]) -> None:
        rec = self._recent[device]
        for k in keys:
            rec[k] = None
            rec.move_to_end(k)
        while len(rec) > self.capacity:
            rec.popitem(last=False)


class CacheLocality(LocalityModel):
    """Equation (3) from the tile caches of discrete devices; host devices keep :class:`RecentTiles`."""

    def __init__(self, memory: Any) -> None:
        """``memory``: the runtime's :class:`~tileblas.runtime._tilememory.TileMemory`."""
        self.memory = memory
        self.host = RecentTiles(len(memory.devices))
        self.discrete = memory.discrete

    def level(self, device: int, key: tuple) -> int:
        if not self.discrete[device]:
            return self.host.level(device, key)
        if not self.memory.caching:
            return 0
        return self.memory.level(device, key)

    def score(self, device: int, keys: Sequence[tuple]) -> int:
        if not self.discrete[device]:
            return self.host.score(device, keys)
        if not self.memory.caching:
            return 0
        lv = self.memory.level
        return sum(lv(device, k) for k in keys)

    def touched(self, device: int, keys: Sequence[tuple]) -> None:
        if not self.discrete[device]:
            self.host.touched(device, keys)
