"""SciPy's own BLAS tests (scipy/linalg/tests/test_blas.py, as installed) run against tileblas.blas, twice.

The file is executed with ``scipy.linalg._fblas`` and ``scipy.linalg.get_blas_funcs`` standing for
tileblas' routines and ``get_blas_funcs`` (no ``_cblas``: tileblas has no CBLAS module), and its test
classes and functions are collected here:

* the 32-bit half: tileblas.blas as it is;
* the ILP64 half (``*_ilp64``): every routine as ``get_blas_funcs(..., ilp64=True)`` hands it out, so
  every native call runs on the ILP64 library (skipped where scipy-openblas64 is not installed).

Left out: ``test_dnrm2_neg_incx``, which calls ``scipy.linalg.blas.dnrm2`` itself and expects SciPy's
f2py error class (tileblas' dnrm2 refuses ``incx < 0`` with ValueError: tests/test_blas1.py).
tileblas raises ValueError where f2py raises its module's ``error``; the stand-in module names ValueError
as that class.
"""

from __future__ import annotations

import pathlib
import types

import pytest
import scipy.linalg

import tileblas.blas as tb
from tileblas.blas import _getfuncs
from tileblas.kernels import _openblas

_SOURCE = pathlib.Path(scipy.linalg.__file__).parent / "tests" / "test_blas.py"
_LEFT_OUT = {"test_dnrm2_neg_incx"}


def _stand_in(ilp64: bool) -> types.ModuleType:
    mod = types.ModuleType("tileblas_fblas_64" if ilp64 else "tileblas_fblas")
    for name in tb.__all__:
        fn = getattr(tb, name)
        if ilp64 and callable(fn) and name not in ("get_blas_funcs", "find_best_blas_type"):
            fn = _getfuncs.ilp64_function(name)
        setattr(mod, name, fn)
    setattr(mod, "__fblas_error", ValueError)
    return mod


def _load(ilp64: bool) -> dict:
    """SciPy's test module executed against tileblas: its namespace."""
    def getter(names, arrays=(), dtype=None, ilp64_arg=False):
        return tb.get_blas_funcs(names, arrays, dtype, ilp64=True if ilp64 else ilp64_arg)

    saved = {k: getattr(scipy.linalg, k, None) for k in ("_fblas", "_cblas", "get_blas_funcs")}
    ns = {"__name__": "scipy_test_blas_on_tileblas" + ("_ilp64" if ilp64 else ""), "__file__": str(_SOURCE)}
    try:
        scipy.linalg._fblas = _stand_in(ilp64)
        scipy.linalg._cblas = None
        scipy.linalg.get_blas_funcs = getter
        exec(compile(_SOURCE.read_text(), str(_SOURCE), "exec"), ns)
    finally:
        for k, v in saved.items():
            setattr(scipy.linalg, k, v)
    return ns


def _collect(ns: dict, suffix: str) -> dict:
    """The test classes (as subclasses named with ``suffix``) and test functions of ``ns``."""
    out = {}
    for name, obj in ns.items():
        if name in _LEFT_OUT or not name.startswith(("Test", "test_")) or not callable(obj):
            continue
        if isinstance(obj, type):
            obj = type(name + suffix, (obj,), {"__module__": __name__})
        out[name + suffix] = obj
    return out


if not _SOURCE.exists():  # pragma: no cover - a SciPy installed without its tests
    pytest.skip(f"SciPy's test_blas.py is not installed ({_SOURCE})", allow_module_level=True)

_PLAIN = _collect(_load(False), "")
_WIDE = _collect(_load(True), "_ilp64") if _openblas.has_ilp64() else {}
globals().update(_PLAIN)
globals().update(_WIDE)


def test_both_halves_were_collected():
    assert len(_PLAIN) >= 10  # SciPy 1.17's test_blas.py: 13 test classes and functions
    assert all(k in globals() for k in _PLAIN)
    if _openblas.has_ilp64():
        assert sorted(_WIDE) == sorted(k + "_ilp64" for k in _PLAIN) and all(k in globals() for k in _WIDE)


@pytest.mark.skipif(not _openblas.has_ilp64(), reason="scipy-openblas64 (tileblas[ilp64]) not installed")
def test_the_ilp64_half_calls_the_ilp64_library():
    import numpy as np

    from tileblas.kernels import _native

    mod = _stand_in(True)
    x = np.arange(1.0, 9.0)
    for call in (lambda: mod.daxpy(x, x.copy()), lambda: mod.icamax(x.astype(np.complex64)),
                 lambda: mod.dgemm(1.0, x.reshape(2, 4), x.reshape(4, 2)), lambda: mod.zher(1.0, x + 1j)):
        before = _native.wide_calls()
        call()
        assert _native.wide_calls() > before
