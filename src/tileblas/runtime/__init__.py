"""The tile runtime: every Level-3 BLAS call as per-tile tasks, scheduled on demand across devices.

This implements the runtime of the BLASX paper (sections III and IV): the planner turns a call into one
task per output tile (:mod:`._planner`), the scheduler runs them through a global queue, per-device
reservation stations, locality priority and work stealing (:mod:`._scheduler`), and the profile/trace
module shows what happened (:mod:`._trace`).  :class:`Runtime` ties them together (:mod:`._runtime`).

Typical use::

    import tileblas
    with tileblas.Runtime(devices=2) as rt:
        rt.gemm(1.0, a, b, 0.0, c)          # c := a @ b, tile by tile on two CPU workers
        print(rt.last_profile())            # per device: tasks, stolen, busy/idle/overhead, bytes
        rt.trace("gemm.json")               # Chrome/Perfetto trace

On a Dask cluster (``pip install tileblas[distributed]``) the same calls run with each worker as a device
(:mod:`.cluster`)::

    rt = tileblas.Runtime(devices=distributed_client)   # or "tls://scheduler:8786", or "dask:2"
"""

from tileblas.runtime._planner import (
    DETERMINISTIC_DEVICES,
    MAX_TILE,
    MIN_TILE,
    ROUTINES,
    SMALL_FLOPS,
    Plan,
    Task,
    Tile,
    check_call,
    default_tile_size,
    plan_call,
)
from tileblas.runtime._runtime import Runtime, get_runtime, make_devices, set_runtime
from tileblas.runtime.cluster import ClusterRuntime, DistributedMatrix, local_cluster  # Dask imported on use
from tileblas.runtime._locality import LocalityModel, RecentTiles
from tileblas.runtime._scheduler import Scheduler
from tileblas.runtime._trace import CallProfile, DeviceProfile, plot_timeline

__all__ = [
    "Runtime",
    "get_runtime",
    "set_runtime",
    "make_devices",
    "ClusterRuntime",
    "DistributedMatrix",
    "local_cluster",
    "CallProfile",
    "DeviceProfile",
    "plot_timeline",
    "Scheduler",
    "LocalityModel",
    "RecentTiles",
    "Plan",
    "Task",
    "Tile",
    "ROUTINES",
    "check_call",
    "plan_call",
    "default_tile_size",
    "SMALL_FLOPS",
    "MIN_TILE",
    "MAX_TILE",
    "DETERMINISTIC_DEVICES",
]


def __dir__() -> list[str]:  # the API, and the public submodules imported so far
    return sorted({*__all__, *(m for m in ('cluster',) if m in globals())})
