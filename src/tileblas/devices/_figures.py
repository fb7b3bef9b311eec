"""The figures measured on this machine's GPUs, kept for the processes after it.

What tileblas measures on a GPU the first time it uses it -- its host link (:class:`~tileblas.devices.gpu.
GPUDevice`), its gemm rates where no preset covers its model, and what a drop-in call costs there beyond
the runtime's prediction (:func:`tileblas.blas._dispatch._call_cost`) -- are figures of the machine, not of
the moment.  Measured once per process, they moved with whatever else ran then, and a call near the
crossover could take the GPU in one process and the CPU in the next, with other bits.  So the first process
that measures a figure keeps it in one JSON file, as FFTW keeps its wisdom, and every process after reads
it: the side a drop-in call takes and the tiles the runtime picks are then a function of the call and the
machine.

The file: ``$TILEBLAS_GPU_FIGURES``, else ``gpus.json`` beside the path policy
(:func:`tileblas.policy._paths.policy_path`).  Each figure is kept under a key naming what it depends on:
the GPU (its name, UUID or PCI bus id and memory), the CUDA driver and runtime versions, the host's CPU
model and tileblas' version; a figure of another machine or version is not read, and is measured again.
``tileblas tune --gpus`` measures the figures of this machine's GPUs again and replaces the kept ones;
``tileblas tune --reset`` removes the file.  A file that cannot be read or written costs nothing but a
note (``tileblas info``): the figure is then measured in the process, as before.
"""

from __future__ import annotations

import json
import os
import platform
import threading
from pathlib import Path
from typing import Any, Callable

__all__ = ["figures_path", "device_key", "measured", "forget", "status"]

#: The file's layout version; a file of another is measured over.
SCHEMA = 1

_LOCK = threading.Lock()


class _State:
    def __init__(self) -> None:
        self.path: Path | None = None  # the file the memo was read from
        self.memo: dict[str, Any] | None = None  # its figures (None: not read yet)
        self.note = ""  # why the file could not be read or written, else ""
        self.read: list[str] = []  # the keys this process took from the file
        self.stored: list[str] = []  # the keys it measured and kept


_STATE = _State()


def figures_path() -> Path:
    """``$TILEBLAS_GPU_FIGURES``, else ``gpus.json`` beside the path policy."""
    env = os.environ.get("TILEBLAS_GPU_FIGURES")
    if env:
        return Path(env)
    from tileblas.policy import _paths

    return _paths.policy_path().with_name("gpus.json")


def _host_cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_key(cp: Any, index: int, props: dict | None = None) -> str:
    """What a figure of GPU ``index`` (CuPy module ``cp``; ``props`` its CUDA device properties where the
    caller has them) depends on, as one string: the GPU's name, UUID (else PCI bus id) and memory, the CUDA
    driver and runtime versions, the host's CPU model, tileblas' version."""
    from tileblas._version import __version__
    from tileblas.devices.gpu import _gpu_name

    rt = cp.cuda.runtime
    if props is None:
        props = rt.getDeviceProperties(index)
    name = _gpu_name(props)
    ident = props.get("uuid")
    if isinstance(ident, bytes):
        ident = ident.hex()
    if not ident:
        ident = f"pci {props.get('pciDomainID', 0)}:{props.get('pciBusID', index)}:{props.get('pciDeviceID', 0)}"
    versions = []
    for what in ("driverGetVersion", "runtimeGetVersion"):
        try:
            versions.append(str(getattr(rt, what)()))
        except Exception:  # noqa: BLE001 - a version CuPy cannot tell is left out of the key
            versions.append("?")
    return (f"{name} | {ident} | {props.get('totalGlobalMem', 0)} bytes | driver {versions[0]} | CUDA "
            f"{versions[1]} | host {_host_cpu()} | tileblas {__version__}")


def _load_locked(path: Path) -> dict[str, Any]:
    """The figures in ``path`` ({} where it is missing, damaged or of another layout: a note says which)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _STATE.note = f"{path} could not be read ({type(exc).__name__}: {exc}): measured again"
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("figures"), dict):
        _STATE.note = f"{path} is not a figures file of schema {SCHEMA}: measured again"
        return {}
    return dict(data["figures"])


def _memo() -> dict[str, Any]:
    path = figures_path()
    if _STATE.memo is None or _STATE.path != path:
        _STATE.path, _STATE.note = path, ""
        _STATE.memo = _load_locked(path)
    return _STATE.memo


def _write_locked(path: Path, update: dict[str, Any], drop: tuple[str, ...] = ()) -> None:
    """Merge ``update`` into the file at ``path`` (less the keys ``drop``), under an advisory lock, written
    whole to a temporary file and renamed over it: a reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_file = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 - held to the end
    try:
        try:
            import fcntl

            fcntl.flock(lock_file, fcntl.LOCK_EX)
        except (ImportError, OSError):  # no advisory locks here: a concurrent writer may lose an entry
            pass
        figures = _load_locked(path)
        for k in drop:
            figures.pop(k, None)
        figures.update(update)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"schema": SCHEMA, "figures": figures}, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
        _STATE.memo, _STATE.note = figures, ""
    finally:
        lock_file.close()


def measured(key: str, measure: Callable[[], Any], read: Callable[[Any], Any] = float) -> Any:
    """``read(figure)`` of the figure kept under ``key`` (a JSON value), else of ``measure()``'s, which is
    kept for the processes after (where the file can be written; else only a note).  A kept figure that
    ``read`` refuses (raises, as ``float`` does for a damaged entry) is measured over."""
    with _LOCK:
        got = _memo().get(key)
        if got is not None:
            try:
                value = read(got)
            except Exception:  # noqa: BLE001 - a damaged entry: measured again below
                _STATE.note = f"{figures_path()} held a damaged figure ({key.split(' | ')[0]}): measured again"
            else:
                if key not in _STATE.read:
                    _STATE.read.append(key)
                return value
    value = measure()
    result = read(value)
    with _LOCK:
        path = figures_path()
        try:
            _write_locked(path, {key: value})
            if key not in _STATE.stored:
                _STATE.stored.append(key)
        except OSError as exc:
            _STATE.note = f"{path} could not be written ({type(exc).__name__}: {exc}): the figures are this process's"
            if _STATE.memo is not None:
                _STATE.memo[key] = value
    return result


def forget(match: Callable[[str], bool]) -> list[str]:
    """Remove the kept figures whose key ``match`` accepts (so that they are measured again); returns those
    keys."""
    with _LOCK:
        keys = [k for k in _memo() if match(k)]
        if keys:
            _write_locked(figures_path(), {}, tuple(keys))
        _STATE.read = [k for k in _STATE.read if k not in keys]
        return keys


def status() -> dict[str, Any]:
    """What ``tileblas info`` shows: the file, how many figures it keeps, the keys this process read from it
    and those it measured and kept, and why the file could not be used, where it could not."""
    with _LOCK:
        memo = _memo()
        return {"file": str(figures_path()), "kept": len(memo), "read": list(_STATE.read),
                "stored": list(_STATE.stored), "note": _STATE.note}
