"""CuPy and cuBLAS, loaded on first use: the one CuPy loader of tileblas.

What it owns
    :func:`cupy_module` (CuPy itself) and :func:`cublas_bindings`: CuPy's cuBLAS bindings
    (``cupy_backends.cuda.libs.cublas``) completed from the cuBLAS C library for the Level-3 routines that
    CuPy does not bind.  CuPy 14 binds ``<t>gemm``, ``<t>syrk`` and ``<t>trsm`` but not ``<t>symm``,
    ``<t>hemm``, ``<t>herk``, ``<t>syr2k``, ``<t>her2k`` or ``<t>trmm``; without them the GPU kernels would
    fall back to CuPy compositions (a full triangle copy and an out-of-place product per tile).  The
    completion calls ``cublas<T><routine>_v2`` of the libcublas CuPy's bindings call: the library that
    provides ``cublasCreate_v2`` to CuPy's extension module (``dlsym`` through the module's own handle,
    then ``dladdr``), else the one of CuPy's CUDA major in the process's memory map, else by soname; with
    PyTorch's and CuPy's copies both loaded, the first in the map may be the other one.  The argument order
    is that of cuBLAS's C API, which is also the order of CuPy's bindings: handle, enums as ints, sizes,
    host pointers to the scalars, device pointers.  ctypes releases the GIL during the call.

    Where neither CuPy nor the C library has a routine, the callers run a CuPy composition instead and say
    so once per routine and process (:func:`note_fallback`: a RuntimeWarning, and :func:`fallbacks` for
    ``tileblas info`` and the devices' ``describe()``).  Without CuPy, :func:`cupy_module` raises
    :class:`CupyUnavailable`, whose message names the extra that installs it.

    The host side of copies to and from a GPU: :func:`pack`, ``np.copyto`` of a large tile or block into
    (or out of) page-locked staging in column blocks on a shared pool of threads (:func:`pack_pool`;
    NumPy releases the GIL while it copies), for the GPU devices' staging and the asynchronous recursion.

What it must not touch
    Scheduling, devices or arrays: callers bring handles and pointers.  Nothing here runs at
    ``import tileblas``.
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
from typing import Any, Callable, Iterable

__all__ = ["cupy_module", "cublas_bindings", "cublas_report", "CublasError", "CupyUnavailable", "INSTALL_HINT",
           "note_fallback", "fallbacks", "pack", "pack_pool", "PACK_SPLIT_BYTES"]

#: How to install CuPy for tileblas (the extras of pyproject.toml).
INSTALL_HINT = "pip install 'tileblas[gpu]' (CuPy for CUDA 13), or 'tileblas[gpu-cuda12]' for a CUDA 12 driver"

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
_FALLBACKS: dict[str, str] = {}
_FALLBACK_LOCK = threading.Lock()


class CublasError(RuntimeError):
    """A cuBLAS routine returned a status other than CUBLAS_STATUS_SUCCESS."""


class CupyUnavailable(ImportError):
    """CuPy is not installed, or is installed but does not import (its message says how to install it)."""


def cupy_module() -> Any:
    """CuPy, imported on first use; :class:`CupyUnavailable` (naming the extra to install) without it."""
    try:
        import cupy
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "cupy":
            raise CupyUnavailable(f"CuPy is not installed: {INSTALL_HINT}", name="cupy") from None
        raise CupyUnavailable(f"CuPy is installed but does not import ({type(exc).__name__}: {exc}); reinstall "
                              f"the CuPy that matches the machine's CUDA: {INSTALL_HINT}", name="cupy") from exc
    return cupy


def _cuda_major() -> int | None:
    """CUDA major version of the runtime CuPy was built against (None if unknown)."""
    try:
        return int(cupy_module().cuda.runtime.runtimeGetVersion()) // 1000
    except Exception:  # noqa: BLE001 - unknown: the memory map is taken as it comes
        return None


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p), ("dli_sname", ctypes.c_char_p),
                ("dli_saddr", ctypes.c_void_p)]


def _dladdr() -> Any:
    for lib in (None, "libdl.so.2"):  # glibc >= 2.34 has dladdr in libc itself
        try:
            fn = ctypes.CDLL(lib).dladdr
        except (OSError, AttributeError):
            continue
        fn.argtypes = (ctypes.c_void_p, ctypes.POINTER(_DlInfo))
        fn.restype = ctypes.c_int
        return fn
    return None


def _providing_library(module_file: str | None, symbol: str) -> str | None:
    """Path of the shared library that gives ``symbol`` to the loaded extension module ``module_file``
    (``dlsym`` through the module's own handle searches it and its dependencies, as its calls resolve);
    None when that cannot be told."""
    if not module_file:
        return None
    try:
        ext = ctypes.CDLL(module_file, mode=getattr(os, "RTLD_NOLOAD", 0) | ctypes.RTLD_LOCAL)
        addr = ctypes.cast(getattr(ext, symbol), ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    dladdr = _dladdr()
    info = _DlInfo()
    if not addr or dladdr is None or not dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


def _pick_mapped(lines: Iterable[str], major: int | None) -> str | None:
    """The first libcublas (not libcublasLt) in memory-map lines, of CUDA ``major`` when given."""
    for line in lines:
        path = line.rsplit(None, 1)[-1] if line.strip() else ""
        base = path.rsplit("/", 1)[-1]
        if not base.startswith("libcublas.so"):
            continue
        if major is None or base == f"libcublas.so.{major}" or base.startswith(f"libcublas.so.{major}."):
            return path
    return None


def _find_libcublas() -> Any:
    """The libcublas CuPy's bindings call (see the module notes)."""
    try:
        from cupy_backends.cuda.libs import cublas as module

        path = _providing_library(getattr(module, "__file__", None), "cublasCreate_v2")
        if path and path.rsplit("/", 1)[-1].startswith("libcublas.so"):
            return ctypes.CDLL(path)
    except (ImportError, OSError):
        pass
    major = _cuda_major()
    try:
        with open("/proc/self/maps") as fh:
            path = _pick_mapped(fh, major)
        if path:
            return ctypes.CDLL(path)
    except OSError:
        pass
    names = ([f"libcublas.so.{major}"] if major else ["libcublas.so.13", "libcublas.so.12"]) + ["libcublas.so"]
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise CublasError(f"cuBLAS C library not found (not linked by CuPy's bindings, not in this process's loaded "
                      f"libraries, no {', '.join(names)})")


def _library() -> Any:
    with _LIB_LOCK:
        lib = _LIB.get("lib")
        if lib is None:
            if "error" in _LIB:
                raise CublasError(_LIB["error"])
            try:
                lib = _LIB["lib"] = _find_libcublas()
            except CublasError as exc:
                _LIB["error"] = str(exc)  # looked once: not again for every tile
                raise
        return lib


def note_fallback(routine: str, where: str) -> None:
    """Say once per process that ``routine`` (e.g. 'zherk') runs as a CuPy composition at ``where`` (a
    RuntimeWarning; :func:`fallbacks` keeps the reason)."""
    why = _LIB.get("error") or "the cuBLAS C library lacks it"
    with _FALLBACK_LOCK:
        if routine in _FALLBACKS:
            return
        _FALLBACKS[routine] = why
    warnings.warn(f"{where}: {routine} runs as a CuPy composition (slower, extra memory): CuPy has no binding for "
                  f"it and {why}", RuntimeWarning, stacklevel=3)


def fallbacks() -> dict[str, str]:
    """The routines this process ran as CuPy compositions, and why."""
    with _FALLBACK_LOCK:
        return dict(_FALLBACKS)


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


def cublas_report() -> dict[str, Any]:
    """Where each Level-3 routine comes from (for ``tileblas info``): CuPy's bindings, the cuBLAS C library
    (its path; symbols it lacks), or nowhere (a CuPy composition)."""
    routines = [p + r for p in "sdcz" for r in _ARGTYPES if p in "cz" or r[0] != "h"]
    try:
        from cupy_backends.cuda.libs import cublas
    except ImportError as exc:
        return {"library": None, "note": f"CuPy's cuBLAS bindings do not import: {exc}"}
    bound = [r for r in routines if hasattr(cublas, r)]
    rest = [r for r in routines if r not in bound]
    if not rest:
        return {"library": None, "cupy_binds": bound, "from_library": [], "compositions": []}
    try:
        lib = _library()
    except CublasError as exc:
        return {"library": None, "cupy_binds": bound, "compositions": rest,
                "note": f"{exc}: the routines CuPy does not bind run as CuPy compositions"}
    missing = [r for r in rest if not hasattr(lib, f"cublas{r[0].upper()}{r[1:]}_v2")]
    return {"library": getattr(lib, "_name", str(lib)), "cupy_binds": bound,
            "from_library": [r for r in rest if r not in missing], "compositions": missing}


# ------------------------------------------------------------------------------------------------------
# The host side of copies: packing on several threads
# ------------------------------------------------------------------------------------------------------

_POOL: Any = None
_POOL_LOCK = threading.Lock()
#: Blocks smaller than this are packed by the calling thread alone.
PACK_SPLIT_BYTES = 8 << 20


def pack_pool(threads: int) -> Any:
    """The shared pool of threads that pack (made on first use, with ``threads`` workers)."""
    global _POOL
    import concurrent.futures

    with _POOL_LOCK:
        if _POOL is None:
            _POOL = concurrent.futures.ThreadPoolExecutor(max(1, int(threads)), thread_name_prefix="tileblas-pack")
        return _POOL


def _after_fork_in_child() -> None:
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()  # the parent's pool threads do not exist here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def pack(dst: Any, src: Any, threads: int) -> int:
    """``np.copyto(dst, src)``; a 2-D block of at least :data:`PACK_SPLIT_BYTES` in up to ``threads``
    column blocks at once (the calling thread copies the first).  Returns the number of blocks."""
    import numpy as np

    nbytes = dst.nbytes
    cols = dst.shape[1] if dst.ndim == 2 else 1
    parts = min(int(threads), cols, max(1, nbytes // max(PACK_SPLIT_BYTES // 4, 1))) \
        if nbytes >= PACK_SPLIT_BYTES and dst.ndim == 2 else 1
    if parts <= 1:
        np.copyto(dst, src)
        return 1
    bounds = [cols * p // parts for p in range(parts + 1)]
    pool = pack_pool(threads)
    futs = [pool.submit(np.copyto, dst[:, bounds[p]:bounds[p + 1]], src[:, bounds[p]:bounds[p + 1]])
            for p in range(1, parts)]
    try:
        np.copyto(dst[:, :bounds[1]], src[:, :bounds[1]])
    finally:
        for f in futs:
            f.result()
    return parts
