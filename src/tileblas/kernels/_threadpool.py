"""tileblas' OpenBLAS thread counts under threadpoolctl.

tileblas loads its own OpenBLAS (:func:`tileblas.kernels._openblas.get_library`): the single-threaded instance the
tile workers share, and private copies that run one native call on several threads (the shared/native
path of :mod:`tileblas.runtime`).  NumPy's and SciPy's thread settings never reach them.  This module
makes them visible to, and controllable by, threadpoolctl through its documented extension point: a
``LibController`` subclass registered with ``threadpoolctl.register``.

* ``threadpoolctl.threadpool_info()`` lists one entry for tileblas: user_api ``"blas"``, internal_api
  ``"openblas"``, ``num_threads`` (the threads tileblas' native path uses now), ``version`` (of the
  OpenBLAS it loads) and ``openblas_filepath``.  Its ``filepath`` is that of tileblas' native extension,
  the loaded object threadpoolctl finds it by.
* ``with threadpoolctl.threadpool_limits(limits=n):`` (or ``user_api="blas"``) caps every tileblas
  OpenBLAS instance at ``n`` threads, including the copies created inside the block, and the default
  worker count of a Runtime created inside it; leaving the block restores the previous count.  A limit
  never raises an instance above the thread count it was created with.

Registration is lazy (:func:`register`): importing tileblas does not import threadpoolctl (about 25 ms).
It happens when the first multi-threaded instance is created, in ``tileblas info``, or by calling
:func:`register`; where threadpoolctl is absent nothing changes.
"""

from __future__ import annotations

import os
import threading

__all__ = ["register", "registered", "limit", "effective_threads", "default_threads", "status", "cpu_count"]

_LOCK = threading.RLock()
_STATE: dict = {"registered": False, "limit": None}


def cpu_count() -> int:
    """Cores this process may use (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """Threads tileblas' native path uses with no limit in force: the cores this process may use."""
    return cpu_count()


def limit() -> int | None:
    """The thread limit threadpoolctl has put on tileblas now, or None where none is in force."""
    return _STATE["limit"]


def effective_threads(threads: int) -> int:
    """``threads`` capped by the limit in force (never below 1)."""
    lim = _STATE["limit"]
    return max(1, min(int(threads), lim)) if lim is not None else int(threads)


def set_limit(n: int | None) -> None:
    """Cap tileblas' OpenBLAS instances at ``n`` threads (None: lift the cap).

    Applied at once to every loaded instance (each gets ``min(its own count, n)``) and to instances created
    later.  threadpoolctl calls this through the registered controller; ``n`` at or above
    :func:`default_threads` counts as no limit.

    Raises
    ------
    ValueError
        Where ``n`` is not None and not an int >= 1.
    """
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"thread limit must be an int >= 1 or None; got {n!r}")
        if n >= default_threads():
            n = None
    from . import _openblas

    with _LOCK:
        _STATE["limit"] = n
        for lib in list(_openblas._LIBS.values()):
            lib.set_num_threads(effective_threads(lib.threads))


def status() -> dict:
    """Thread counts of tileblas' OpenBLAS instances as they are now.

    Returns
    -------
    dict
        ``limit`` (the limit in force or None), ``native_threads`` (threads of the native path now),
        ``threadpoolctl`` (whether the controller is registered) and ``instances``: per loaded instance,
        ``nominal`` (the count it was created with) and ``num_threads`` (what OpenBLAS reports now).
    """
    from . import _openblas

    return {
        "limit": _STATE["limit"],
        "native_threads": effective_threads(default_threads()),
        "threadpoolctl": _STATE["registered"],
        "instances": [{"nominal": t, "num_threads": lib.num_threads()} for t, lib in sorted(_openblas._LIBS.items())],
    }


def registered() -> bool:
    """Whether the tileblas controller is registered with threadpoolctl."""
    return _STATE["registered"]


def register() -> bool:
    """Register the tileblas controller with threadpoolctl (once; cheap after the first call).

    Returns
    -------
    bool
        True where threadpoolctl is installed and the controller registered, False where it is absent.
    """
    if _STATE["registered"]:
        return True
    with _LOCK:
        if _STATE["registered"]:
            return True
        try:
            import threadpoolctl
        except ImportError:
            return False
        if _STATE["registered"]:  # registered by the import hook while threadpoolctl was imported just now
            return True
        # threadpoolctl finds controllers by the shared objects loaded: make sure tileblas' is.
        from . import _native  # noqa: F401

        threadpoolctl.register(_controller_class(threadpoolctl))
        _STATE["registered"] = True
        return True


def _native_path() -> str:
    from . import _native

    return os.path.realpath(_native.__file__)


def _controller_class(threadpoolctl):
    class TileblasController(threadpoolctl.LibController):
        """threadpoolctl controller for tileblas' OpenBLAS instances (found by tileblas' native extension)."""

        user_api = "blas"
        internal_api = "openblas"
        filename_prefixes = ("_native.",)

        def __init__(self, *, filepath=None, prefix=None, parent=None):
            # Other packages have a ``_native`` extension too: claim only tileblas' own.
            if filepath is None or os.path.realpath(filepath) != _native_path():
                raise OSError(f"{filepath!r} is not tileblas' native extension")
            super().__init__(filepath=filepath, prefix=prefix, parent=parent)

        def _find_affixes(self):
            return "", ""

        def get_num_threads(self):
            return effective_threads(default_threads())

        def set_num_threads(self, num_threads):
            set_limit(int(num_threads))

        def get_version(self):
            from . import _openblas

            try:
                return _openblas.get_library(1).config().split()[1]
            except Exception:
                return None

        def set_additional_attributes(self):
            from . import _openblas

            try:
                self.openblas_filepath = _openblas.library_path()
            except ImportError:
                self.openblas_filepath = None

    return TileblasController


class _RegisterOnImport:
    """A ``sys.meta_path`` finder that registers the controller right after threadpoolctl is imported.

    It only wraps the spec the other finders return for ``threadpoolctl``; every other import passes
    through untouched.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "threadpoolctl" or _STATE["registered"]:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        class _Loader:
            def __getattr__(self, name):
                return getattr(loader, name)

            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                exec_module(module)
                try:
                    register()
                except Exception:  # registration must never break the import of threadpoolctl
                    pass

        spec.loader = _Loader()
        return spec


_HOOK = _RegisterOnImport()


def install() -> None:
    """Register now if threadpoolctl is already imported, else as soon as it is (without importing it)."""
    import sys

    if "threadpoolctl" in sys.modules:
        try:
            register()
        except Exception:
            pass
    elif _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)
