"""Small helpers shared by the test modules (imported as ``from _helpers import ...``)."""

from __future__ import annotations

import numpy as np


def tol(dtype) -> float:
    """Relative tolerance of a result computed in ``dtype`` against a float64/complex128 reference."""
    return 2e-4 if np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-11


def rand(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Standard normal entries in ``dtype`` (complex: independent real and imaginary parts)."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)
