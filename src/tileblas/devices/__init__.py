"""Devices: where tile tasks run.

A device is an object with a memory space, an in-order queue of work (streams, for devices that have
them) and kernels.  The runtime's scheduler and caches talk to devices only through :class:`Device`;
nothing above this package names a particular device kind.  A new kind is one new module that subclasses
:class:`Device` and calls :func:`register_device_kind`.
"""

from tileblas.devices._base import (
    Device,
    DeviceError,
    create_device,
    device_kinds,
    register_device_kind,
)
from tileblas.devices.cpu import CPUDevice, cpu_count, host_devices
from tileblas.devices._discrete import DiscreteDevice, Event
from tileblas.devices.sim import SimDevice, SimHostDevice, sim_devices, sim_machine
from tileblas.devices._model import DeviceModel
from tileblas.devices.gpu import CupyMissingError, GPUUnavailableError  # (imports no CuPy)


def _gpu(*args, threads=None, **kwargs):
    """Factory of the "gpu" kind: imports CuPy only when a GPU device is created.  A spec's thread count
    ('gpu:1x2') is refused by name: it means BLAS threads of a CPU worker."""
    if threads is not None:
        raise ValueError(f"a GPU device has no BLAS threads to set (x{threads}); the 'xN' of a spec like "
                         "'cpu:1x2' is for CPU workers: name GPUs as 'gpu:N'")
    from tileblas.devices.gpu import GPUDevice

    return GPUDevice(*args, **kwargs)


register_device_kind("gpu", _gpu)

__all__ = [
    "Device",
    "DeviceError",
    "CPUDevice",
    "DiscreteDevice",
    "Event",
    "GPUUnavailableError",
    "CupyMissingError",
    "SimDevice",
    "SimHostDevice",
    "DeviceModel",
    "sim_devices",
    "sim_machine",
    "create_device",
    "device_kinds",
    "register_device_kind",
    "host_devices",
    "cpu_count",
]


def __dir__() -> list[str]:  # the API, and the public submodules imported so far
    return sorted({*__all__, *(m for m in ('cpu', 'dask', 'gpu', 'sim') if m in globals())})
