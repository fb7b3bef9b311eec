"""The tile runtime on a Dask cluster: each worker a device, tiles resident on workers as Dask futures.

``tileblas.Runtime(devices=client_or_address)`` returns a :class:`ClusterRuntime`.  Every Level-3 call
goes through the same planner as on one machine (check -> trivial -> small -> partition into one task per
output tile), and this module's *cluster executor* runs the planner's tasks on the workers.

What it owns
    * Placement (BLASX's demand-driven scheduling with locality priority, over Dask workers): each worker
      has a reservation station of ``reservation_slots`` tasks in flight; when a slot frees, the worker
      takes the ready task whose tiles it holds the most bytes of (ties: critical path first, then plan
      order).  A task is submitted to Dask with ``workers=[that worker]`` and ``allow_other_workers=True``
      so that Dask may still run it elsewhere when the worker goes away.
    * Tile residency (the levels of the tile cache, seen from the client): a tile the client sends is
      scattered once to the worker that first needs it, and kept there in a content-addressed store
      (SHA-256 of the tile's bytes, its shape and dtype) with an LRU byte budget.  A later call that passes
      an array with the same tile contents (the result of an earlier call, a copy of an input, the same
      input again) uses the resident tile and sends nothing; a changed tile has another digest and is sent
      again.  Output tiles of a call stay resident too (their digest is taken when they arrive).  Workers
      fetch tiles they lack from each other through Dask (the peer level); the client's memory is the
      host.  :class:`DistributedMatrix` handles keep a whole matrix on the workers between calls without
      bringing it back to the client at all.
    * Versioned tiles: tiles on workers are immutable; a task returns the new version of its output tile,
      and later tasks of the call bind to the version current when they are submitted (tasks are
      submitted in an order that respects the planner's dependencies, so read-after-write and
      write-after-read hazards of in-place TRSM/TRMM resolve themselves).
    * Recovery: when a worker dies, Dask reruns the tasks it was running and recomputes lost results
      from their lineage.  Tiles that were scattered from the client cannot be recomputed by Dask; the
      futures that needed them are cancelled, and the executor sends those tiles again (from the client's
      array, or a handle's host copy) and resubmits the cancelled tasks, in submission order, on the
      workers still alive.  Workers that join are used from the next placement decision on.
    * Accounting: tiles and bytes sent to the workers and brought back, store hits, tasks resubmitted.

What it must not touch
    Networking, serialisation and data movement between workers (Dask does all of it, with its own comms,
    security and serialisers; nothing is deserialised here outside Dask's mechanisms), and the shared
    scheduler of the host runtime (a cluster runtime has no local worker threads).

Calls on one ClusterRuntime are serialised (each call already spreads over the whole cluster).

The asynchronous API on a cluster
    ``policy="demand"`` (a ClusterRuntime as the current runtime): every Level-3 call is split into tile
    tasks over all workers by this module, with residency, peer fetches and recovery as above.
    ``policy="cost"`` with ``Executor(devices=[d for d in rt.devices if d.alive])``: one backend per
    worker; each call runs whole, as one Dask task, on the worker where it is estimated to finish first
    (:meth:`tileblas.devices.dask.DaskWorkerDevice.kernel`; each worker's measured round trip,
    ``call_latency_s``, is part of its estimates, so host backends and workers mix by estimate).  A handle's copy stays on its worker across
    calls; a handle needed on another worker moves through the client (the handles' residency model
    knows the host and devices, not peers), and a call whose worker dies fails with DeviceError instead
    of being recovered.  Level-1/2 calls need a host backend (add ``host_devices()`` to the list).
"""

from tileblas.runtime.cluster._runtime import ClusterRuntime
from tileblas.runtime.cluster._spec import (
    CLUSTER_TILE_CANDIDATES,
    clear_transfer_logs,
    cluster_tile_size,
    is_cluster_spec,
    local_cluster,
    worker_incoming_bytes,
)
from tileblas.runtime.cluster._store import DistributedMatrix

__all__ = ["ClusterRuntime", "DistributedMatrix", "is_cluster_spec", "local_cluster", "cluster_tile_size",
           "worker_incoming_bytes", "clear_transfer_logs", "CLUSTER_TILE_CANDIDATES"]


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)
