"""Core subcommands: ``tileblas info`` and ``tileblas demo``."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any

__all__ = ["register", "info"]


def info() -> dict[str, Any]:
    """What tileblas found on this machine: devices, BLAS library, threads, GPUs."""
    import numpy as np

    import tileblas
    from tileblas import _kernels
    from tileblas.devices import cpu_count

    lib = _kernels.get_library(1)
    try:
        from importlib.metadata import version

        ob_version = version("scipy-openblas32")
    except Exception:  # pragma: no cover - metadata missing
        ob_version = "unknown"
    gpus: list[str] = []
    gpu_note = "CuPy not installed"
    try:
        import importlib.util

        if importlib.util.find_spec("cupy") is not None:
            import cupy  # type: ignore[import-not-found]

            n = cupy.cuda.runtime.getDeviceCount()
            gpus = [cupy.cuda.runtime.getDeviceProperties(i)["name"].decode() for i in range(n)]
            gpu_note = f"{n} CUDA device(s)"
    except Exception as exc:  # no driver, no device
        gpu_note = f"CuPy present, no usable GPU ({type(exc).__name__})"
    return {
        "tileblas": tileblas.__version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu_cores": cpu_count(),
        "blas": {
            "library": "OpenBLAS (scipy-openblas32 wheel, owned by tileblas)",
            "version": ob_version,
            "config": lib.config(),
            "core": lib.corename(),
            "path": lib.path,
            "threads_per_tile_worker": lib.num_threads(),
        },
        "devices": [d.describe() for d in __import__("tileblas.devices", fromlist=["host_devices"]).host_devices()],
        "gpu": {"available": bool(gpus), "devices": gpus, "note": gpu_note},
    }


def _cmd_info(args: argparse.Namespace) -> int:
    data = info()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"tileblas {data['tileblas']}  (Python {data['python']}, NumPy {data['numpy']})")
    print(f"platform     {data['platform']}")
    print(f"cpu cores    {data['cpu_cores']}")
    b = data["blas"]
    print(f"BLAS         {b['library']} {b['version']}")
    print(f"             {b['config']}")
    print(f"             core {b['core']}, {b['threads_per_tile_worker']} thread(s) per tile worker")
    print("devices      " + ", ".join(f"{d['name']} ({d['kind']})" for d in data["devices"]))
    g = data["gpu"]
    print("GPU          " + (", ".join(g["devices"]) if g["available"] else f"none ({g['note']})"))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from tileblas._demo import run_demo

    return run_demo(only=args.only)


def register(sub: Any) -> None:
    p = sub.add_parser("info", help="devices, BLAS library and version, thread settings, GPU availability")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("demo", help="a short tour that runs real work through each capability")
    p.add_argument("--only", default=None, help="run only the sections whose module name contains this")
    p.set_defaults(func=_cmd_demo)
