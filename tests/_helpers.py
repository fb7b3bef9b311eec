"""Small helpers shared by the test modules (imported as ``from _helpers import ...``)."""

from __future__ import annotations

import importlib.util
import pathlib
import threading
from types import ModuleType

import numpy as np

from tileblas.devices import CPUDevice


def bench_script(name: str) -> ModuleType:
    """benchmarks/NAME.py loaded as a new module (the scripts are not a package)."""
    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_script", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tol(dtype) -> float:
    """Relative tolerance of a result computed in ``dtype`` against a float64/complex128 reference."""
    return 2e-4 if np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-11


def rand(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Standard normal entries in ``dtype`` (complex: independent real and imaginary parts)."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


class Boom(RuntimeError):
    """The fault a :class:`FailingDevice` injects."""


class FailingDevice(CPUDevice):
    """A CPU device whose kernels raise :class:`Boom` on chosen calls, counted across the device's life
    (``fail_on``: any container of call numbers, e.g. ``{3}`` or ``range(4, 1 << 30)``; reassignable)."""

    def __init__(self, index, fail_on):
        super().__init__(index)
        self.fail_on = fail_on
        self.count = 0
        self._lk = threading.Lock()

    def kernel(self, name):
        inner = super().kernel(name)

        def run(*args, **kw):
            with self._lk:
                self.count += 1
                n = self.count
            if n in self.fail_on:
                raise Boom(f"injected failure {n}")
            inner(*args, **kw)

        return run
