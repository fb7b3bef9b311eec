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

__all__ = [
    "Device",
    "DeviceError",
    "CPUDevice",
    "create_device",
    "device_kinds",
    "register_device_kind",
    "host_devices",
    "cpu_count",
]
