"""The interface of devices with a memory space of their own (simulated devices, GPUs).

What it owns
    The contract between such a device and the runtime's tile memory (:mod:`tileblas.runtime._tilememory`):

    * one preallocated chunk of ``memory_bytes`` bytes; the runtime's heap hands out offsets and
      :meth:`DiscreteDevice.view` turns an offset into a contiguous column-major device array;
    * ``streams`` in-order queues, named by index ``0 .. streams-1``; every data movement and kernel is
      issued on a stream and may return before it has finished; :meth:`record` returns an event that
      completes when everything issued on the stream so far has; :meth:`wait` makes a stream wait for an
      event (of any device); :meth:`sync` waits for a stream on the host;
    * copies host -> device, device -> host and device -> device (from a peer that
      :meth:`can_access_peer`), with byte counters in :attr:`Device.stats`;
    * an estimate of what a transfer costs (:meth:`transfer_seconds`), so that the tile cache can take a
      tile from a peer only when that is cheaper than from the host;
    * a timeline per stream (kernel and copy intervals on the host's ``time.perf_counter`` clock) from
      which the runtime derives compute / exposed communication / other time (BLASX Fig. 8).

    The scheduler gives every stream of a device its own worker thread, which runs one task at a time on
    that stream and synchronises the stream when the task ends (the synchronisation point of Algorithm 1).

What it must not touch
    Cache policy, coherence and scheduling: those belong to the runtime, which treats every kind alike.
"""

from __future__ import annotations

import abc
from typing import Any, Callable

import numpy as np

from tileblas.devices._base import Device

__all__ = ["DiscreteDevice", "Event", "DONE"]


class Event:
    """Completion marker of work issued on a stream.  The base class is already complete."""

    def query(self) -> bool:
        """True when the work before the event has finished."""
        return True

    def synchronize(self) -> None:
        """Block the calling thread until :meth:`query` is true."""


#: An event that is complete from the start (devices whose streams run synchronously return it).
DONE = Event()


class DiscreteDevice(Device):
    """A device that computes in a memory space of its own.

    Parameters
    ----------
    name : str
        Unique device name.
    memory : int
        Bytes of device memory the runtime may use for tiles (the heap's chunk).
    streams : int
        Number of streams (the paper uses 4).
    speed_hint : float
        Relative throughput guess (1.0 = one CPU core).
    """

    host_memory = False
    #: Heap alignment in bytes.
    alignment = 256

    def __init__(self, name: str, memory: int, streams: int = 4, speed_hint: float = 1.0) -> None:
        if isinstance(memory, bool) or not isinstance(memory, (int, np.integer)) or memory < 0:
            raise ValueError(f"memory must be a non-negative number of bytes; got {memory!r}")
        if isinstance(streams, bool) or not isinstance(streams, (int, np.integer)) or streams < 1:
            raise ValueError(f"streams must be a positive int; got {streams!r}")
        super().__init__(name, speed_hint)
        self.memory_bytes = int(memory)
        self.streams = int(streams)
        self._timelines: list[list[tuple[str, float, float]]] = [[] for _ in range(self.streams)]

    # ----------------------------------------------------------------- memory
    @abc.abstractmethod
    def view(self, offset: int, shape: tuple[int, int], dtype: Any) -> Any:
        """A column-major device array of ``shape`` at byte ``offset`` of the device's chunk."""

    # ----------------------------------------------------------------- streams
    def prepare_host(self, arrays: list) -> None:
        """The host operands of a call about to run (its output included; called once per call before any
        copy): a device may prepare them for its copies (a GPU page-locks them in place).  Default:
        nothing."""

    @abc.abstractmethod
    def h2d(self, dst: Any, host: np.ndarray, stream: int) -> None:
        """Copy the host array (any strides) into the device array ``dst`` on ``stream``."""

    @abc.abstractmethod
    def d2h(self, src: Any, host: np.ndarray, stream: int) -> None:
        """Copy the device array ``src`` into the host array ``host`` on ``stream``.  The host array
        holds the data once the stream has been synchronised."""

    @abc.abstractmethod
    def d2d(self, dst: Any, peer: "DiscreteDevice", src: Any, stream: int) -> None:
        """Copy ``src`` (on ``peer``) into ``dst`` (on this device) on this device's ``stream``."""

    @abc.abstractmethod
    def launch(self, name: str, args: list, kwargs: dict, stream: int) -> None:
        """Run tile kernel ``name`` (argument order of :mod:`tileblas.kernels._openblas`, plus ``axpy``) on
        device arrays, on ``stream``."""

    @abc.abstractmethod
    def record(self, stream: int) -> Event:
        """An event completing when all work issued so far on ``stream`` has."""

    def wait(self, stream: int, event: Event) -> None:
        """Make ``stream`` wait for ``event`` before later work (default: wait on the host)."""
        event.synchronize()

    @abc.abstractmethod
    def sync(self, stream: int) -> None:
        """Wait on the host until all work issued on ``stream`` has finished."""

    def synchronize(self) -> None:
        for s in range(self.streams):
            self.sync(s)

    # ----------------------------------------------------------------- links
    def can_access_peer(self, other: Device) -> bool:
        """True when :meth:`d2d` from ``other`` works."""
        return False

    def transfer_seconds(self, nbytes: int, peer: Device | None = None) -> float:
        """Estimated seconds to bring ``nbytes`` to this device from the host (peer None) or a peer."""
        return 1e-5 + nbytes / 12e9

    # ----------------------------------------------------------------- timeline
    def _log(self, stream: int, what: str, t0: float, t1: float) -> None:
        self._timelines[stream].append((what, t0, t1))

    def timeline(self, stream: int) -> list[tuple[str, float, float]]:
        """Take the (what, t0, t1) intervals recorded on ``stream`` since the last call ("kernel",
        "h2d", "d2h", "d2d"); call it after :meth:`sync`."""
        tl = self._timelines[stream]
        out = tl[:]
        del tl[: len(out)]
        return out

    # ----------------------------------------------------------------- the plain Device interface
    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:  # pragma: no cover - not used by the runtime
        raise NotImplementedError(f"{type(self).__name__} allocates through the runtime's heap (view)")

    def kernel(self, name: str) -> Callable[..., None]:
        """``name`` run synchronously on stream 0 (the runtime itself uses :meth:`launch`)."""

        def run(*args: Any, **kwargs: Any) -> None:
            self.launch(name, list(args), kwargs, 0)
            self.sync(0)

        run.__name__ = name
        return run

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(memory_bytes=self.memory_bytes, streams=self.streams)
        return d

