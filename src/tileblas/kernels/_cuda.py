"""CuPy and cuBLAS, loaded on first use: the one CuPy loader of tileblas.

What it owns
    :func:`cupy_module` (CuPy itself) and :func:`cublas_bindings`: CuPy's cuBLAS bindings
    (``cupy_backends.cuda.libs.cublas``) completed from the cuBLAS C library for the Level-3 routines that
    CuPy does not bind.  CuPy 14 binds ``<t>gemm``, ``<t>syrk`` and ``<t>trsm`` but not ``<t>symm``,
    ``<t>hemm``, ``<t>herk``, ``<t>syr2k``, ``<t>her2k`` or ``<t>trmm``; without them the GPU kernels would
    fall back to CuPy compositions (a full triangle copy and an out-of-place product per tile).  The
    completion calls ``cublas<T><routine>_v2`` of the libcublas that CuPy itself loaded (found in the
    process's memory map, else by soname), with the argument order of cuBLAS's C API, which is also the
    order of CuPy's bindings: handle, enums as ints, sizes, host pointers to the scalars, device pointers.
    ctypes releases the GIL during the call.

What it must not touch
    Scheduling, devices or arrays: callers bring handles and pointers.  Nothing here runs at
    ``import tileblas``.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

__all__ = ["cupy_module", "cublas_bindings", "CublasError"]

_H, _I, _P = ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p
#: Argument types of the C routines, after the handle (the cuBLAS v2 API, 32-bit sizes).
_ARGTYPES: dict[str, tuple] = {
    "gemm": (_I, _I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I),
    "symm": (_I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I),
    "syrk": (_I, _I, _I, _I, _P, _P, _I, _P, _P, _I),
    "syr2k": (_I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I),
    "trmm": (_I, _I, _I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _I),
    "trsm": (_I, _I, _I, _I, _I, _I, _P, _P, _I, _P, _I),
}
_ARGTYPES.update(hemm=_ARGTYPES["symm"], herk=_ARGTYPES["syrk"], her2k=_ARGTYPES["syr2k"])
_STATUS = {1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
           8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
           13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
           15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR"}
_LIB: dict[str, Any] = {}
_LIB_LOCK = threading.Lock()


class CublasError(RuntimeError):
    """A cuBLAS routine returned a status other than CUBLAS_STATUS_SUCCESS."""


def cupy_module() -> Any:
    """CuPy, imported on first use."""
    import cupy

    return cupy


def _find_libcublas() -> Any:
    """The libcublas CuPy loaded (same CUDA major as its bindings), else the first soname that loads."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.rsplit(None, 1)[-1]
                if "/libcublas.so" in path:  # not libcublasLt
                    return ctypes.CDLL(path)
    except OSError:
        pass
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise CublasError("cuBLAS C library not found (looked in this process's loaded libraries and for "
                      "libcublas.so.13, .so.12, .so)")


def _library() -> Any:
    with _LIB_LOCK:
        lib = _LIB.get("lib")
        if lib is None:
            lib = _LIB["lib"] = _find_libcublas()
        return lib


def _c_routine(name: str) -> Callable[..., None]:
    """``name`` (e.g. 'dtrmm') as a call of ``cublasDtrmm_v2``; AttributeError for a name not in the table."""
    prefix, routine = name[:1], name[1:]
    if not prefix or prefix not in "sdcz" or routine not in _ARGTYPES:
        raise AttributeError(name)
    symbol = f"cublas{prefix.upper()}{routine}_v2"
    try:
        fn = getattr(_library(), symbol)
    except CublasError as exc:  # no C library: the caller's composition fallback applies
        raise AttributeError(f"{name}: {exc}") from None
    fn.argtypes = (_H,) + _ARGTYPES[routine]
    fn.restype = ctypes.c_int

    def call(handle: int, *args: Any) -> None:
        status = fn(handle, *args)
        if status:
            raise CublasError(f"{symbol} returned {_STATUS.get(status, status)}")

    call.__name__ = name
    call.__doc__ = f"{symbol} from the cuBLAS C library (CuPy has no binding for it)."
    return call


class _Bindings:
    """CuPy's cuBLAS module; routines it lacks come from the C library on first use."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(self._module, name)
        except AttributeError:
            pass
        fn = _c_routine(name)
        self.__dict__[name] = fn
        return fn


def cublas_bindings() -> Any:
    """CuPy's cuBLAS bindings, completed from the C library for the Level-3 routines CuPy lacks."""
    from cupy_backends.cuda.libs import cublas

    return _Bindings(cublas)
