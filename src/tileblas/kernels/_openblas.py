"""The kernel layer: native BLAS called without holding the GIL, on an OpenBLAS that tileblas owns.

What this module owns
    * Loading OpenBLAS from the ``scipy-openblas32`` wheel.  That library is a separate instance from the
      one inside NumPy and SciPy (its symbols carry the ``scipy_`` prefix), so setting its thread count
      never races the rest of the process.
    * One :class:`BlasLibrary` per thread count.  OpenBLAS keeps its thread count in process-global
      state, so the library for ``threads=k`` (k > 1) is a private copy of the shared object, loaded with
      ``RTLD_LOCAL``: each copy has its own state and its own thread pool.  Single-threaded tile workers
      share the ``threads=1`` instance, which computes in the calling thread and is safe to call from many
      threads at once.
    * The threads of parallel calls.  Where the pool is on (by default only on the core counts it was
      measured at: :func:`machine_pool`; ``TILEBLAS_POOL``), each multi-threaded instance (and its ILP64
      twin) hands the jobs of its parallel calls to :mod:`tileblas.kernels._pool`, whose idle workers yield their core to any
      other thread that wants it (NumPy's or SciPy's OpenBLAS, the user's threads) while they wait for the
      next call: OpenBLAS's own workers would hold it for 0.1 s after every call, and a program that
      alternates tileblas with NumPy or SciPy calls would then run about ten times slower.  The same
      workers run the parts of tileblas' own split calls (tileblas.blas).  Elsewhere the instances keep
      OpenBLAS's own threads.
    * 64-bit sizes (ILP64).  Where the ``scipy-openblas64`` wheel is installed (``tileblas[ilp64]``), each
      instance has an ILP64 twin with the same thread count (symbols ``scipy_<name>64_``), loaded on first
      need.  Calls keep the 32-bit library; one whose integer argument (a size, a leading dimension, an
      increment) does not fit 32 bits is moved by :mod:`tileblas.kernels._native` to the twin of the same
      routine, so every routine takes sizes up to 2**63 - 1 and the common call pays nothing for it.
      :func:`int_limit` is the largest size the argument checks accept; ``TILEBLAS_ILP64=0`` (or
      :func:`set_ilp64`) keeps to 32 bits.
    * Array-level Level-3 kernels (:func:`gemm`, :func:`symm`, ... :func:`trsm`) that accept 2-D arrays in
      C or Fortran order or strided views with one unit stride, and reach column-major BLAS by
      transposition, not by copying, wherever the algebra allows.  Operands that no flag can describe
      (negative or zero strides, a conjugate without a transpose, ...) are copied.

What it must not touch
    Argument checking for users (tileblas.blas does that, once) and scheduling (the runtime).  Every
    function here trusts its caller's shapes and dtypes.

The native calls go through :func:`tileblas.kernels._native.call`, a few hundred nanoseconds per call; ctypes
costs microseconds, which would make tiny Level-1 calls many times slower than SciPy's.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import warnings
from typing import Any

import numpy as np

from tileblas._dtypes import BLAS_INT64_MAX, BLAS_INT_MAX, PREFIX_OF, REAL_CODE, SCALAR_CODE
from tileblas.kernels import _native, _pool

__all__ = [
    "split_k_axpy",
    "BlasLibrary",
    "get_library",
    "pool_info",
    "library_path",
    "has_ilp64",
    "set_ilp64",
    "int_limit",
    "prefix_of",
    "scalar_code",
    "colmajor",
    "gemm",
    "symm",
    "hemm",
    "syrk",
    "herk",
    "syr2k",
    "her2k",
    "trmm",
    "trsm",
    "DTYPES",
]

call = _native.call

#: BLAS precision prefix for each supported dtype (:mod:`tileblas._dtypes`).
DTYPES = PREFIX_OF
_SCALAR_CODE = SCALAR_CODE
_REAL_CODE = REAL_CODE


def prefix_of(dtype: Any) -> str:
    """The BLAS prefix ('s', 'd', 'c', 'z') of a dtype; TypeError for any other dtype."""
    try:
        return DTYPES[np.dtype(dtype)]
    except KeyError:
        raise TypeError(
            f"BLAS works on float32, float64, complex64 and complex128; got dtype {np.dtype(dtype)}"
        ) from None


def scalar_code(prefix: str, real: bool = False) -> str:
    """The _native signature code of a scalar argument of precision ``prefix``."""
    return _REAL_CODE[prefix] if real else _SCALAR_CODE[prefix]


def library_path(package: str = "scipy_openblas32") -> str:
    """Path of the OpenBLAS shared object shipped by the scipy-openblas32 wheel (or ``package``'s), not
    imported."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        wheel = package.replace("_", "-")
        raise ImportError(f"tileblas needs the '{wheel}' package (its own OpenBLAS); pip install {wheel}")
    libdir = os.path.join(list(spec.submodule_search_locations)[0], "lib")
    for name in sorted(os.listdir(libdir)):
        if name.startswith("libscipy_openblas") and (name.endswith(".so") or ".so." in name or name.endswith(".dylib")):
            return os.path.join(libdir, name)
    raise ImportError(f"no OpenBLAS shared object found in {libdir}")


def ilp64_library_path() -> str | None:
    """Path of the ILP64 OpenBLAS of the scipy-openblas64 wheel, or None where it is not installed."""
    try:
        return library_path("scipy_openblas64")
    except ImportError:
        return None


class BlasLibrary:
    """One loaded OpenBLAS instance with a fixed thread count.

    Parameters
    ----------
    path : str
        The shared object to load.
    threads : int
        Threads this instance uses for every call.
    ilp64 : bool
        Whether it is an ILP64 build (64-bit BLAS integers; symbols end in ``64_``).
    """

    PREFIX = "scipy_"

    def __init__(self, path: str, threads: int, ilp64: bool = False) -> None:
        import ctypes

        self.path = path
        self.threads = threads
        self.ilp64 = ilp64
        self._suffix = "64_" if ilp64 else ""
        with _idle_server_threads():
            self._dll = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0) | getattr(os, "RTLD_NOW", 2))
        self._ctypes = ctypes
        self._addr: dict[str, int] = {}
        self._lock = threading.Lock()
        self._twin: BlasLibrary | None = None
        self._internals: dict[str, int] | None = None
        self._warmed = False
        #: this instance's slot in tileblas' thread pool (None: OpenBLAS's own threads, or one thread)
        #: why this instance runs on fewer threads than asked for ('' where it does not)
        self.note = ""
        self.pool_slot: int | None = _attach_pool(self) if threads > 1 else None
        if threads > 1 and self.pool_slot is None and _pool_on():
            # loaded for the pool (no server threads of its own) and the pool could not take it
            self.note = (f"runs on one thread: tileblas' pool could not start {threads - 1} worker thread(s) for "
                         "it (RLIMIT_NPROC?) or has no slot left")
            threads = 1
        self._set_threads(int(threads))

    def _symbol(self, name: str) -> Any:
        return self._dll[self.PREFIX + name + self._suffix]

    def _set_threads(self, threads: int) -> None:
        fn = self._symbol("openblas_set_num_threads")
        fn.argtypes = [self._ctypes.c_int]
        fn(int(threads))
        if self.threads == 1:
            self._release_thread_buffers()

    def _release_thread_buffers(self) -> None:
        """Give back the buffers OpenBLAS keeps for its server threads' jobs, in the one-thread instance.

        Every instance maps one buffer (32 MiB of address space on x86-64) per thread of its thread setting
        when it starts or its setting changes, for the jobs of its parallel calls.  A one-thread instance runs
        no parallel call: its calls take buffers of their own, so that one is address space for nothing,
        which counts against RLIMIT_AS.  OpenBLAS's ``blas_thread_shutdown_`` (what it runs before a fork)
        returns it to the instance's buffer table, where the next call takes it instead of mapping another.
        That function is not exported: its address is read from the library's symbol table, and where the
        table lacks it (a stripped build) the buffer stays.
        """
        offset = self._internal("blas_thread_shutdown_")
        if offset is None:
            return
        fn = self._ctypes.CFUNCTYPE(self._ctypes.c_int)(offset)
        fn()

    def _internal(self, name: str) -> int | None:
        """The address of OpenBLAS's internal function ``name`` (one of ``INTERNALS``), read once for all of
        them from the library's symbol table; None where the table lacks it (a stripped build)."""
        if self._internals is None:
            self._internals = _static_offsets(self.path, INTERNALS,
                                              (self.PREFIX + "openblas_get_config" + self._suffix,
                                               self._symbol_address))
        return self._internals.get(name)

    def warm_buffers(self, count: int, nbytes: int | None = None) -> bool:
        """Start writing the first ``nbytes`` (``WARM_BYTES`` where None) of ``count`` of this instance's
        buffers (a page fault each page, now rather than in the first calls that run on ``count`` threads at
        once), on a thread of the pool's own (:func:`tileblas.kernels._pool.warm`); whether it started.
        Once per instance; not where the pool is off or not built, nor where the symbol table lacks
        OpenBLAS's buffer functions.  A split call or an OpenBLAS parallel call made meanwhile ends it."""
        if self._warmed or not _pool_on():
            return False
        alloc, release = self._internal("blas_memory_alloc"), self._internal("blas_memory_free")
        if alloc is None or release is None:
            return False
        self._warmed = True
        return bool(_pool.warm(alloc, release, int(count), WARM_BYTES if nbytes is None else int(nbytes)))

    def _symbol_address(self, name: str) -> int:
        return self._ctypes.cast(self._dll[name], self._ctypes.c_void_p).value

    def address(self, name: str) -> int:
        """Address of the native entry point ``name`` (without the library's prefix), cached."""
        try:
            return self._addr[name]
        except KeyError:
            pass
        fn = self._symbol(name)
        addr = self._ctypes.cast(fn, self._ctypes.c_void_p).value
        self._addr[name] = addr
        if not self.ilp64:
            _OWNER[addr] = (self, name)
        return addr

    def twin(self) -> BlasLibrary | None:
        """The ILP64 instance with this one's thread count (loaded on first use), or None where there is
        none (no scipy-openblas64, or ILP64 turned off)."""
        if self.ilp64:
            return self
        if not _ILP64["enabled"]:
            return None
        if self._twin is None:
            with self._lock:
                if self._twin is None:
                    path = ilp64_library_path()
                    if path is None:
                        return None
                    twin = _load(path, self.threads, ilp64=True)
                    from . import _threadpool

                    if _threadpool.limit() is not None:
                        twin.set_num_threads(_threadpool.effective_threads(self.threads))
                    self._twin = twin
        return self._twin

    def fortran(self, name: str) -> int:
        """Address of the Fortran-interface routine ``name`` (e.g. 'dgemm')."""
        return self.address(name + "_")

    def call(self, name: str, signature: str, *args: Any) -> Any:
        """Call the Fortran routine ``name`` with the _native ``signature``, without the GIL."""
        return call(self.fortran(name), signature, *args)

    # ------------------------------------------------------------------ information
    def config(self) -> str:
        fn = self._symbol("openblas_get_config")
        fn.restype = self._ctypes.c_char_p
        return fn().decode()

    def corename(self) -> str:
        fn = self._symbol("openblas_get_corename")
        fn.restype = self._ctypes.c_char_p
        return fn().decode()

    def set_num_threads(self, threads: int) -> None:
        """Set the threads OpenBLAS uses now (``threads`` keeps the count the instance was created with); the
        ILP64 twin, where loaded, follows."""
        self._set_threads(threads)
        if self._twin is not None:
            self._twin.set_num_threads(threads)

    def num_threads(self) -> int:
        fn = self._symbol("openblas_get_num_threads")
        fn.restype = self._ctypes.c_int
        return int(fn())

    def __repr__(self) -> str:
        kind = ", ilp64=True" if self.ilp64 else ""
        return f"BlasLibrary(threads={self.threads}{kind}, path={self.path!r})"


def _static_offsets(path: str, names: tuple[str, ...], anchor: tuple[str, Any]) -> dict[str, int]:
    """The addresses of the functions ``names`` of the loaded ELF shared object ``path``, read from its
    static symbol table (``.symtab``): ``anchor`` is (an exported function's name, a function giving its
    address), whose table entry places the library in memory.  Empty where the file is no 64-bit
    little-endian ELF object, has no such table, or the anchor is not a defined function in it; a name that
    is not is left out."""
    import struct

    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:6] != b"\x7fELF\x02\x01":
                return {}
            shoff, = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
            if shentsize != 64 or not 0 < shnum < 4096:
                return {}
            f.seek(shoff)
            sections = [struct.unpack_from("<IIQQQQIIQQ", f.read(64)) for _ in range(shnum)]
            symtab = next((sec for sec in sections if sec[1] == 2), None)  # SHT_SYMTAB
            if symtab is None or symtab[9] != 24 or not 0 <= symtab[6] < shnum:
                return {}
            strtab = sections[symtab[6]]
            if symtab[5] > (64 << 20) or strtab[5] > (64 << 20):
                return {}
            f.seek(symtab[4])
            syms = f.read(symtab[5])
            f.seek(strtab[4])
            strings = f.read(strtab[5])
    except (OSError, struct.error):
        return {}
    table = np.frombuffer(syms, dtype=np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"),
                                                ("shndx", "<u2"), ("value", "<u8"), ("size", "<u8")]),
                          count=len(syms) // 24)

    def value(symbol: str) -> int | None:
        at = strings.find(b"\0" + symbol.encode() + b"\0")
        if at < 0:
            return None
        hit = table[(table["name"] == at + 1) & ((table["info"] & 0xF) == 2) & (table["shndx"] != 0)]
        return int(hit["value"][0]) if len(hit) == 1 else None

    exported = value(anchor[0])
    if exported is None:
        return {}
    try:
        base = anchor[1](anchor[0]) - exported
    except (AttributeError, TypeError):
        return {}
    return {name: base + own for name in names if (own := value(name)) is not None}


#: The environment variable: whether tileblas' pool runs the parallel calls (``1``), OpenBLAS's own threads
#: do (``0``), or the machine's default (unset, ``auto``: :func:`machine_pool`)
POOL_ENV = "TILEBLAS_POOL"
_POOL: dict[str, Any] = {"enabled": False}


def _pool_on() -> bool:
    """Whether tileblas' pool runs the parallel calls of its instances: turned on, and built here."""
    return bool(_POOL["enabled"] and _pool.supported)


def _setting_refused(key: str, note: str) -> None:
    """A setting from the environment refused: ``note`` kept as ``key`` among the notes ``tileblas info``
    shows (:func:`pool_info`), and said once as a RuntimeWarning."""
    _POOL[key] = note
    try:
        warnings.warn(f"tileblas: {note}", RuntimeWarning, stacklevel=3)
    except Exception:  # noqa: BLE001 - warnings made errors (-W error): the note says why
        pass

#: The environment variable: how long an idle worker of the pool stays awake after its work
WAIT_ENV = "TILEBLAS_POOL_WAIT"
#: The environment variable: how long the idle-class watcher of a sleeping worker looks for its work
WATCH_ENV = "TILEBLAS_POOL_WATCH"
#: the pool's busy spin as built (kernels/_pool.c, "Waiting for work"); a longer wait yields the CPU after it
WAIT_SPIN_NS = int(_pool.configure()["spin_ns"]) if _pool.supported else 0
_WAIT_UNITS = {"us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def _parse_duration(text: str, source: str) -> int:
    """Nanoseconds for a duration such as ``200us``, ``5ms`` or ``0.1s``.  ValueError naming ``source``
    and the value where it is not a number >= 0 (up to 60 s) with one of the units us, ms, s."""
    t = text.strip().lower()
    unit = next((u for u in ("us", "ms", "s") if t.endswith(u)), None)
    try:
        value = float(t[: -len(unit)]) if unit else float("nan")
    except ValueError:
        value = float("nan")
    if not (value >= 0 and value * _WAIT_UNITS[unit or "s"] <= 60e9):
        raise ValueError(f"{source}={text!r}: expected a duration from 0 to 60 s with its unit (us, ms or s), "
                         "such as 200us or 0.1s")
    return int(round(value * _WAIT_UNITS[unit]))


def parse_wait(text: str, source: str = WAIT_ENV) -> tuple[int, int]:
    """``(spin_ns, yield_ns)`` for a wait such as ``200us``, ``5ms`` or ``0.1s``: the worker spins for the
    first 200 µs of it (or all of a shorter wait), then calls ``sched_yield()`` in a loop for the rest, as
    OpenBLAS's threads do for their 0.1 s, then sleeps until told of work.  ValueError naming ``source``
    and the value where it is not a number >= 0 with one of the units us, ms, s."""
    ns = _parse_duration(text, source)
    return min(ns, WAIT_SPIN_NS), max(ns - WAIT_SPIN_NS, 0)


def wait_text(settings: dict) -> str:
    """The pool's wait in words, from its settings (``_pool.configure()``): ``spin 200 us`` or ``spin 200
    us, yield 99.8 ms``."""
    return (f"spin {settings.get('spin_ns', 0) / 1e3:g} us"
            + (f", yield {settings['yield_ns'] / 1e6:g} ms" if settings.get("yield_ns") else ""))


def watch_text(settings: dict) -> str:
    """The pool's watch in words: ``; an idle-class watcher wakes a sleeping worker for 100 ms after it
    slept`` (Linux), or nothing where there is none."""
    ns = settings.get("watch_ns", 0)
    return (f"; an idle-class watcher wakes a sleeping worker for {ns / 1e6:g} ms after it slept"
            if ns and sys.platform.startswith("linux") else "")


def parse_watch(text: str, source: str = WATCH_ENV) -> int:
    """The watch in nanoseconds for a duration such as ``100ms`` or ``0``: how long the idle-class thread
    beside a sleeping worker looks for its work (kernels/_pool.c, "A worker's watcher"); 0: none.
    ValueError naming ``source`` and the value as :func:`parse_wait`'s."""
    return 0 if text.strip() == "0" else _parse_duration(text, source)


#: The core counts the pool and its own wait and watch were measured at (the 2-core VMs: docs/measurements/
#: drop-in.md, "Own work between calls"); the drop-in's limits have their own
#: (:data:`tileblas.policy._dropin.MEASURED_THREADS`).
POOL_MEASURED_CORES = frozenset({2})

#: The wait of OpenBLAS's own threads (its THREAD_TIMEOUT of 2**28 cycles, about 0.1 s, yielding), as
#: :data:`WAIT_ENV` writes it: the pool's default where its own was not measured (:func:`machine_waits`).
OPENBLAS_WAIT = "0.1s"


def machine_waits(cores: int) -> dict[str, int]:
    """The pool's default wait and watch for a process that may use ``cores`` cores: its own (a 200 µs
    spin, then asleep with a watcher for 100 ms: kernels/_pool.c) where ``cores`` is a count they were
    measured at (:data:`POOL_MEASURED_CORES`); elsewhere
    the wait of OpenBLAS's own threads, which SciPy's calls get (0.1 s, yielding; no watcher): on a
    16-core host loops with the caller's own work between calls lost far more with the pool's own wait
    (docs/measurements/drop-in.md, "A 16-core host")."""
    if cores in POOL_MEASURED_CORES:
        return {}
    spin, yld = parse_wait(OPENBLAS_WAIT, "OPENBLAS_WAIT")
    return {"spin_ns": spin, "yield_ns": yld, "watch_ns": 0}


def _measured_at(cores: int) -> str:
    """``measured on 2 cores, not 16``: why a default of the pool does not hold on ``cores`` cores."""
    return f"measured on {' or '.join(str(c) for c in sorted(POOL_MEASURED_CORES))} cores, not {cores}"


def machine_pool(cores: int) -> bool:
    """Whether tileblas' pool runs the parallel calls by default in a process that may use ``cores`` cores:
    only at a core count it was measured at (:data:`POOL_MEASURED_CORES`).  Elsewhere OpenBLAS's own threads
    run them, as they run SciPy's: on a 16-core host the pool lost the first and the cold calls by far, where
    OpenBLAS's own threads in tileblas' instance kept SciPy's pace
    (docs/measurements/drop-in.md, "A 16-core host")."""
    return cores in POOL_MEASURED_CORES


def _pool_from_environment() -> None:
    """Whether the pool runs the parallel calls: :data:`POOL_ENV` where it says ``0`` or ``1`` (or their
    synonyms), else the machine's default (:func:`machine_pool`); a value not understood is one
    RuntimeWarning naming it and the machine's default, noted for ``tileblas info``."""
    from tileblas.kernels._threadpool import default_threads

    text = os.environ.get(POOL_ENV, "").strip().lower()
    cores = default_threads()
    if text in ("0", "false", "no", "off"):
        _POOL["enabled"] = False
        _POOL["off_note"] = f"turned off ({POOL_ENV}=0): OpenBLAS's own threads"
        return
    if text in ("1", "true", "yes", "on"):
        _POOL["enabled"] = True
        return
    _POOL["enabled"] = machine_pool(cores)
    if text not in ("", "auto"):
        _setting_refused("pool_note", f"{POOL_ENV}={os.environ[POOL_ENV]!r} not understood (0, 1 or auto); the "
                         "default for this machine used")
    if not _POOL["enabled"]:
        _POOL["off_note"] = (f"OpenBLAS's own threads, by default here: tileblas' pool was {_measured_at(cores)} "
                             f"({POOL_ENV}=1 turns it on)")


_pool_from_environment()

#: The environment variable: how long the OpenBLAS threads of tileblas' instances spin after a call before
#: they sleep, as OpenBLAS's own ``OPENBLAS_THREAD_TIMEOUT`` (2**N cycles, N from 4 to 30), for tileblas'
#: instances alone, where OpenBLAS's threads run their parallel calls (the pool off)
THREAD_TIMEOUT_ENV = "TILEBLAS_THREAD_TIMEOUT"


def parse_thread_timeout(text: str, source: str = THREAD_TIMEOUT_ENV) -> int:
    """The exponent N of ``text`` (an integer from 4 to 30: OpenBLAS's threads spin 2**N cycles after a
    call); ValueError naming ``source`` and the value otherwise."""
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if not 4 <= value <= 30:
        raise ValueError(f"{source}={text!r} not understood: an integer from 4 to 30 (OpenBLAS's threads spin "
                         "2**N cycles after a call)")
    return value


def _thread_timeout_from_environment() -> str | None:
    """:data:`THREAD_TIMEOUT_ENV` as OpenBLAS reads it (None: unset, OpenBLAS's own setting); a value refused
    is one RuntimeWarning and a note that ``tileblas info`` shows, and OpenBLAS's setting kept."""
    text = os.environ.get(THREAD_TIMEOUT_ENV, "").strip()
    if not text:
        return None
    try:
        return str(parse_thread_timeout(text))
    except ValueError as exc:
        _setting_refused("timeout_note", f"{exc}; OpenBLAS's own setting kept")
        return None


_POOL["thread_timeout"] = _thread_timeout_from_environment()


def _waits_from_environment() -> None:
    """Set the pool's wait and watch for this machine (:func:`machine_waits`), then from :data:`WAIT_ENV`
    and :data:`WATCH_ENV` where they are set; a value refused is one RuntimeWarning, the setting it would
    have replaced kept, and a note that ``tileblas info`` shows."""
    if not _pool_on():
        return
    from tileblas.kernels._threadpool import default_threads

    cores = default_threads()
    machine = machine_waits(cores)
    if machine:
        _pool.configure(**machine)
        _POOL["machine_note"] = (f"by default here the pool's threads wait as OpenBLAS's do ({OPENBLAS_WAIT}, yielding; no "
                                 f"watcher): its own wait was {_measured_at(cores)}")
    for env, parse, setting in ((WAIT_ENV, parse_wait, "wait"), (WATCH_ENV, parse_watch, "watch")):
        text = os.environ.get(env, "").strip()
        if not text:
            continue
        try:
            value = parse(text)
        except ValueError as exc:
            _setting_refused(f"{setting}_note", f"{exc}; the {setting} for this machine kept")
            continue
        if setting == "wait":
            _pool.configure(spin_ns=value[0], yield_ns=value[1])
        else:
            _pool.configure(watch_ns=value)


_waits_from_environment()

#: At the interpreter's exit, before the libraries' destructors free OpenBLAS's buffers: wait (30 s at
#: most) until no BLAS call of tileblas is in flight (a daemon thread's), and let none start again.
atexit.register(_pool.quiesce, 30.0)


#: Held while the environment carries the settings of :func:`_idle_server_threads` (reentrant: loading
#: one instance may load another).
_ENV_LOCK = threading.RLock()


@contextlib.contextmanager
def _idle_server_threads():
    """While an instance loads, where tileblas' pool will run its parallel jobs: OpenBLAS starts none of its
    own server threads (``OPENBLAS_NUM_THREADS=1``; the thread count is set after loading, which starts
    them idle), and those started later sleep at once instead of spinning (``OPENBLAS_THREAD_TIMEOUT=4``:
    2**4 cycles; 2**28, about 0.1 s, by default).  The pool leaves them idle: an idle server thread of the
    two-thread instance was seen spinning through ten dgemm calls of order 2048 (2.2 s of CPU, never
    asleep), which then ran at one core's rate.  And where threads cannot be started (RLIMIT_NPROC),
    OpenBLAS raises SIGINT when its server threads fail at load; started later, a failure is harmless.
    With the pool off OpenBLAS's threads do the work and keep OpenBLAS's settings, but for how long they spin
    after a call where :data:`THREAD_TIMEOUT_ENV` sets it (why: docs/guide/drop-in.md,
    "Mixing tileblas with NumPy and SciPy")."""
    if _pool_on():
        settings = {"OPENBLAS_THREAD_TIMEOUT": "4", "OPENBLAS_NUM_THREADS": "1"}
    elif _POOL.get("thread_timeout") is not None:
        settings = {"OPENBLAS_THREAD_TIMEOUT": _POOL["thread_timeout"]}
    else:
        yield
        return
    with _ENV_LOCK:  # two threads loading instances at once would save each other's values and leave them set
        saved = {k: os.environ.get(k) for k in settings}
        os.environ.update(settings)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _attach_pool(lib: BlasLibrary) -> int | None:
    """Make ``lib`` run the jobs of its parallel calls on :mod:`tileblas.kernels._pool`; its slot there, or
    None where the pool is off (``TILEBLAS_POOL=0``), not built for this platform, the OpenBLAS predates
    the threads callback (0.3.27), or the pool cannot take it (its 32 slots are taken, or threads cannot
    be started)."""
    if not _pool_on():
        return None
    try:
        setter = lib._symbol("openblas_set_threads_callback_function")
    except AttributeError:
        return None
    try:
        return _pool.attach(lib._ctypes.cast(setter, lib._ctypes.c_void_p).value, lib.threads)
    except RuntimeError:  # all slots taken, or no threads to be had
        return None


def _instance(lib: BlasLibrary | None) -> BlasLibrary:
    """The instance a Level-3 kernel call runs on: ``lib``, or the one-thread instance where none is given."""
    return get_library(1) if lib is None else lib


def pool_info() -> dict[str, Any]:
    """How the parallel calls of tileblas' instances get their threads: whether tileblas' pool runs them,
    its settings (nanoseconds) and counters (:mod:`tileblas.kernels._pool`)."""
    with _LIBS_LOCK:
        libs = list(_LIBS.values())
    libs += [lib._twin for lib in libs if lib._twin is not None]
    attached = sum(1 for lib in libs if lib.pool_slot is not None)
    if not _pool.supported:
        why = "not built on this platform: OpenBLAS's own threads"
    elif not _POOL["enabled"]:
        why = _POOL["off_note"]
    else:
        why = ""
    notes = [f"instance of {lib.threads} threads{' (ILP64)' if lib.ilp64 else ''}: {lib.note}" for lib in libs if lib.note]
    if _POOL.get("thread_timeout") is not None and not _pool_on():
        notes.append(f"OpenBLAS's threads of tileblas' instances spin 2**{_POOL['thread_timeout']} cycles after a "
                     f"call ({THREAD_TIMEOUT_ENV})")
    notes += [_POOL[k] for k in ("pool_note", "machine_note", "wait_note", "watch_note", "timeout_note") if _POOL.get(k)]
    return {"enabled": _pool_on(), "note": why, "instances": attached,
            "settings": _pool.configure(), "stats": _pool.stats(), "notes": notes}


_LIBS: dict[int, BlasLibrary] = {}
_LIBS_LOCK = threading.Lock()


#: address space OpenBLAS maps for each thread's buffer (BUFFER_SIZE of its x86-64 and ARM64 builds)
OPENBLAS_BUFFER = 32 << 20
#: address space a worker thread of tileblas' pool reserves (its stack, kernels/_pool.c)
POOL_STACK = 1 << 20
#: OpenBLAS's internal functions tileblas calls (BlasLibrary._internal): the one that gives back its server
#: threads' buffers, and the ones that take and give back a buffer
INTERNALS = ("blas_thread_shutdown_", "blas_memory_alloc", "blas_memory_free")
#: how much of each buffer BlasLibrary.warm_buffers writes: what the parts of the split calls write there
#: (docs/developer/drop-in-internals.md, "The first calls of a process")
WARM_BYTES = 2 << 20


def _check_address_space(path: str, threads: int, callers: int = 1) -> None:
    """MemoryError where an address-space limit (RLIMIT_AS) leaves too little room to load an instance.

    Loading maps the library (about its file's size) and OpenBLAS's buffer for the jobs of its calling
    thread, one for each of ``callers`` threads that call it at once (each call maps its own); a
    ``threads``-thread instance also starts ``threads - 1`` idle OpenBLAS server threads (a default stack
    each) and as many pool workers.  Where OpenBLAS cannot map that buffer it ends the
    process (``exit(1)``, "Memory allocation still failed"), so the room is checked first and its lack
    raised here, where a caller can catch it.  Without a limit (or where /proc is not there) nothing is read.
    """
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return
        stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
        stack = 8 << 20 if stack == resource.RLIM_INFINITY else stack
        with open("/proc/self/statm", "rb") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        size = os.path.getsize(path)
    except (ImportError, OSError, ValueError, IndexError):
        return
    need = size + max(callers, 1) * OPENBLAS_BUFFER + (threads - 1) * (stack + POOL_STACK)
    if used + need > limit:
        raise MemoryError(
            f"tileblas cannot load its OpenBLAS instance of {threads} thread(s): it maps about {need >> 20} MiB "
            f"and the address-space limit (RLIMIT_AS, {limit >> 20} MiB) leaves {max(limit - used, 0) >> 20} MiB")


def _load(path: str, threads: int, ilp64: bool = False, callers: int = 1) -> BlasLibrary:
    """Load ``path`` as an instance of ``threads`` threads: the file itself for one thread, else a private
    copy (dlopen of a different file gives a separate instance with its own state; the copy is removed as
    soon as it is mapped, so nothing is left behind).  ``callers``: see :func:`_check_address_space`."""
    _check_address_space(path, threads, callers)
    if threads == 1:
        return BlasLibrary(path, threads, ilp64)
    tmpdir = tempfile.mkdtemp(prefix="tileblas-openblas-")
    copy = os.path.join(tmpdir, f"libtileblas_openblas{'64' if ilp64 else ''}_t{threads}.so")
    try:
        shutil.copyfile(path, copy)
        return BlasLibrary(copy, threads, ilp64)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# ILP64 twins
# ---------------------------------------------------------------------------------------------------

#: 32-bit entry point address -> (its library, its name), for finding the ILP64 twin.
_OWNER: dict[int, tuple[BlasLibrary, str]] = {}
_ILP64 = {"enabled": os.environ.get("TILEBLAS_ILP64", "1").strip().lower() not in ("0", "false", "no", "off")}
INT32_MAX, INT64_MAX = BLAS_INT_MAX, BLAS_INT64_MAX


def _resolve_twin(address: int) -> int | None:
    """The ILP64 twin of the 32-bit entry point at ``address`` (called by _native on the first call that
    needs it), or None."""
    owner = _OWNER.get(address)
    if owner is None:
        return None
    lib, name = owner
    twin = lib.twin()
    return None if twin is None else twin.address(name)


def has_ilp64() -> bool:
    """Whether calls may use 64-bit BLAS integers: scipy-openblas64 is installed and ILP64 is not turned off."""
    return _ILP64["enabled"] and ilp64_library_path() is not None


def int_limit() -> int:
    """The largest size, leading dimension or increment a call takes: 2**63 - 1 with ILP64, else 2**31 - 1."""
    return INT_LIMIT[0]


def set_ilp64(enabled: bool) -> bool:
    """Allow (True) or forbid (False) the ILP64 twins for calls from now on; returns the previous setting.

    Forbidden, a size over 32 bits raises OverflowError as it would without scipy-openblas64.  Turning it
    on where scipy-openblas64 is not installed changes nothing.
    """
    was = _ILP64["enabled"]
    _ILP64["enabled"] = bool(enabled)
    INT_LIMIT[0] = INT64_MAX if has_ilp64() else INT32_MAX
    _native.set_twin_resolver(_resolve_twin if INT_LIMIT[0] == INT64_MAX else None)
    return was


#: :func:`int_limit` as a one-element list, for the argument checks on the call path (a subscript costs
#: less than a function call there).
INT_LIMIT = [INT32_MAX]
set_ilp64(_ILP64["enabled"])


def get_library(threads: int = 1, callers: int = 1) -> BlasLibrary:
    """The OpenBLAS instance that runs every call on ``threads`` threads (created on first use).

    ``threads=1`` is the instance tile workers share.  Any other count gets a private copy of the library
    so that its thread setting cannot affect the single-threaded workers.  ``callers``: how many threads
    will call it at once, each mapping a buffer of its own; where an address-space limit leaves no room
    for their buffers, loading raises MemoryError (OpenBLAS would end the process in the call).
    """
    threads = int(threads)
    if threads < 1:
        raise ValueError(f"threads must be >= 1; got {threads}")
    lib = _LIBS.get(threads)
    if lib is not None:
        return lib
    with _LIBS_LOCK:
        lib = _LIBS.get(threads)
        if lib is not None:
            return lib
        lib = _load(library_path(), threads, callers=callers)
        _LIBS[threads] = lib
        # A thread limit in force (threadpoolctl's, see tileblas.kernels._threadpool) caps the new instance too.
        from . import _threadpool

        if _threadpool.limit() is not None:
            lib.set_num_threads(_threadpool.effective_threads(threads))
    if threads > 1:
        # Lets threadpoolctl see and limit tileblas' instances (imports threadpoolctl only now).
        _threadpool.register()
    return lib


# ---------------------------------------------------------------------------------------------------
# Memory-layout algebra
# ---------------------------------------------------------------------------------------------------


def colmajor(a: np.ndarray) -> int:
    """Leading dimension of ``a`` read as a column-major matrix using its own data pointer, or 0.

    A 2-D view qualifies when its rows are contiguous in memory (unit stride down a column) and the
    column stride is a positive multiple of the item size no smaller than the number of rows.
    """
    m, n = a.shape
    s0, s1 = a.strides
    it = a.itemsize
    if m > 1 and s0 != it:
        return 0
    if n <= 1:
        return max(m, 1)
    if s1 <= 0 or s1 % it:
        return 0
    ld = s1 // it
    return ld if ld >= max(m, 1) else 0


def _fortran_copy(a: np.ndarray) -> tuple[np.ndarray, int]:
    f = np.asfortranarray(a)
    return f, max(f.shape[0], 1)


# op codes as (transpose, conjugate) bits
_OPS = {"N": (0, 0), "T": (1, 0), "C": (1, 1), "R": (0, 1)}
_OPNAME = {v: k for k, v in _OPS.items()}


def _norm_trans(trans: str, prefix: str) -> str:
    if prefix in "sd":
        return {"C": "T", "R": "N"}.get(trans, trans)
    return trans


def _general_operand(a: np.ndarray, trans: str, prefix: str, allow_r: bool) -> tuple[np.ndarray, int, str]:
    """Describe op(a) as op'(X) with X column-major; copy when no flag can."""
    ld = colmajor(a)
    if ld:
        return a, ld, trans
    ldt = colmajor(a.T)
    if ldt:
        t, c = _OPS[trans]
        new = _norm_trans(_OPNAME[(t ^ 1, c)], prefix)
        if new != "R" or allow_r:
            return a.T, ldt, new
    f, ld = _fortran_copy(a)
    return f, ld, trans


def _plain_operand(a: np.ndarray) -> tuple[np.ndarray, int]:
    ld = colmajor(a)
    if ld:
        return a, ld
    return _fortran_copy(a)


def _flip(uplo: str) -> str:
    return "L" if uplo == "U" else "U"


def _output_needs_transpose(c: np.ndarray) -> bool:
    return not colmajor(c) and bool(colmajor(c.T))


def _writable_colmajor_output(c: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """(array to compute in, ld, copied back?) for an output that must be column-major."""
    ld = colmajor(c)
    if ld:
        return c, ld, False
    f = np.asfortranarray(c)
    return f, max(f.shape[0], 1), True


# ---------------------------------------------------------------------------------------------------
# Level-3 kernels on arrays.  Outputs are updated in place; shapes are the caller's responsibility.
# ---------------------------------------------------------------------------------------------------


def gemm(alpha, a, b, beta, c, transa="N", transb="N", lib: BlasLibrary | None = None) -> None:
    """c := alpha*op(a)@op(b) + beta*c in place.  trans in N, T, C (and R: conjugate, no transpose)."""
    prefix = DTYPES[c.dtype]
    transa = _norm_trans(transa, prefix)
    transb = _norm_trans(transb, prefix)
    if _output_needs_transpose(c):
        # c^T = op(b)^T op(a)^T; with a' = a.T the operator letters are unchanged.
        return gemm(alpha, b.T, a.T, beta, c.T, transb, transa, lib)
    m, n = c.shape
    k = a.shape[0] if _OPS[transa][0] else a.shape[1]
    lib = _instance(lib)
    if m == 0 or n == 0:
        return None
    if k == 0:
        if beta == 0:
            c[...] = 0
        elif beta != 1:
            c *= beta
        return None
    cc, ldc, copied = _writable_colmajor_output(c)
    a_, lda, ta = _general_operand(a, transa, prefix, allow_r=True)
    b_, ldb, tb = _general_operand(b, transb, prefix, allow_r=True)
    s = _SCALAR_CODE[prefix]
    lib.call(prefix + "gemm", "vcciii" + s + "ai" + "ai" + s + "ai",
             ta, tb, m, n, k, alpha, a_, lda, b_, ldb, beta, cc, ldc)
    if copied:
        c[...] = cc
    return None


def _symm_like(name, side, uplo, alpha, a, b, beta, c, lib, hermitian):
    prefix = DTYPES[c.dtype]
    if _output_needs_transpose(c):
        # c^T = b^T a^T: side flips; a.T read from the other triangle is a (symmetric) or
        # conj(a) = a^T (Hermitian), which is exactly what c^T needs.
        return _symm_like(name, "R" if side == "L" else "L", _flip(uplo), alpha, a.T, b.T, beta, c.T,
                          lib, hermitian)
    m, n = c.shape
    lib = _instance(lib)
    if m == 0 or n == 0:
        return None
    cc, ldc, copied = _writable_colmajor_output(c)
    ld = colmajor(a)
    if ld:
        a_, lda, up = a, ld, uplo
    elif colmajor(a.T) and not (hermitian and prefix in "cz"):
        a_, lda, up = a.T, colmajor(a.T), _flip(uplo)
    else:
        a_, lda = _fortran_copy(a)
        up = uplo
    b_, ldb = _plain_operand(b)
    s = _SCALAR_CODE[prefix]
    lib.call(prefix + name, "vccii" + s + "aiai" + s + "ai", side, up, m, n, alpha, a_, lda, b_, ldb, beta, cc, ldc)
    if copied:
        c[...] = cc
    return None


def symm(alpha, a, b, beta, c, side="L", uplo="U", lib=None) -> None:
    """c := alpha*a@b + beta*c (side L) or alpha*b@a + beta*c (side R), a symmetric in its uplo triangle."""
    return _symm_like("symm", side, uplo, alpha, a, b, beta, c, lib, hermitian=False)


def hemm(alpha, a, b, beta, c, side="L", uplo="U", lib=None) -> None:
    """As :func:`symm` with a Hermitian."""
    prefix = DTYPES[c.dtype]
    if prefix in "sd":
        return _symm_like("symm", side, uplo, alpha, a, b, beta, c, lib, hermitian=False)
    return _symm_like("hemm", side, uplo, alpha, a, b, beta, c, lib, hermitian=True)


def _rank_k(name, uplo, trans, alpha, a, b, beta, c, lib, hermitian):
    """syrk/herk (b is None) and syr2k/her2k on arrays, c square and updated in its uplo triangle."""
    prefix = DTYPES[c.dtype]
    herm = hermitian and prefix in "cz"
    if _output_needs_transpose(c):
        if not herm:
            # c is symmetric: c.T holds the same matrix in the other triangle.
            return _rank_k(name, _flip(uplo), trans, alpha, a, b, beta, c.T, lib, hermitian)
        # c.T is conj(c): conj(c) := alpha conj(op(a)op(a)^H) ... = op'(a.T)op'(a.T)^H with N<->C.
        t2 = "C" if trans == "N" else "N"
        alpha2 = alpha if b is None else np.conj(alpha)
        return _rank_k(name, _flip(uplo), t2, alpha2, a.T, None if b is None else b.T, beta, c.T, lib,
                       hermitian)
    n = c.shape[0]
    if n == 0:
        return None
    k = a.shape[0] if trans != "N" else a.shape[1]
    lib = _instance(lib)
    cc, ldc, copied = _writable_colmajor_output(c)

    def operand(x):
        ld = colmajor(x)
        if ld:
            return x, ld, trans
        if colmajor(x.T) and not herm:
            return x.T, colmajor(x.T), "N" if trans != "N" else "T"
        f, ld = _fortran_copy(x)
        return f, ld, trans

    a_, lda, t = operand(a)
    if b is not None:
        b_, ldb, tb = operand(b)
        if tb != t:  # both operands must share one trans flag
            a_, lda = _fortran_copy(a)
            b_, ldb = _fortran_copy(b)
            t = trans
    if k == 0:
        a_, lda = np.zeros((max(n, 1), 1), c.dtype, order="F"), max(n, 1)
        b_, ldb = a_, lda
        t = "N"
        alpha = 0
    s = _SCALAR_CODE[prefix]
    s_beta = _REAL_CODE[prefix] if herm else s
    s_alpha = _REAL_CODE[prefix] if (herm and b is None) else s
    if b is None:
        lib.call(prefix + name, "vccii" + s_alpha + "ai" + s_beta + "ai", uplo, t, n, k, alpha, a_, lda, beta,
                 cc, ldc)
    else:
        lib.call(prefix + name, "vccii" + s_alpha + "aiai" + s_beta + "ai", uplo, t, n, k, alpha, a_, lda, b_,
                 ldb, beta, cc, ldc)
    if copied:
        c[...] = cc
    return None


def syrk(alpha, a, beta, c, uplo="U", trans="N", lib=None) -> None:
    """c := alpha*op(a)@op(a).T + beta*c on the uplo triangle of c."""
    prefix = DTYPES[c.dtype]
    return _rank_k("syrk", uplo, _norm_trans(trans, prefix), alpha, a, None, beta, c, lib, hermitian=False)


def herk(alpha, a, beta, c, uplo="U", trans="N", lib=None) -> None:
    """c := alpha*op(a)@op(a).H + beta*c on the uplo triangle of c; alpha and beta real."""
    prefix = DTYPES[c.dtype]
    if prefix in "sd":
        return syrk(alpha, a, beta, c, uplo, trans, lib)
    return _rank_k("herk", uplo, trans, alpha, a, None, beta, c, lib, hermitian=True)


def syr2k(alpha, a, b, beta, c, uplo="U", trans="N", lib=None) -> None:
    """c := alpha*op(a)@op(b).T + alpha*op(b)@op(a).T + beta*c on the uplo triangle of c."""
    prefix = DTYPES[c.dtype]
    return _rank_k("syr2k", uplo, _norm_trans(trans, prefix), alpha, a, b, beta, c, lib, hermitian=False)


def her2k(alpha, a, b, beta, c, uplo="U", trans="N", lib=None) -> None:
    """c := alpha*op(a)@op(b).H + conj(alpha)*op(b)@op(a).H + beta*c; beta real."""
    prefix = DTYPES[c.dtype]
    if prefix in "sd":
        return syr2k(alpha, a, b, beta, c, uplo, trans, lib)
    return _rank_k("her2k", uplo, trans, alpha, a, b, beta, c, lib, hermitian=True)


def _triangular(name, side, uplo, transa, diag, alpha, a, b, lib):
    prefix = DTYPES[b.dtype]
    transa = _norm_trans(transa, prefix)
    if _output_needs_transpose(b):
        # b^T := alpha b^T op(a)^T: side flips, a.T is triangular in the other half, letters unchanged.
        return _triangular(name, "R" if side == "L" else "L", _flip(uplo), transa, diag, alpha, a.T, b.T, lib)
    m, n = b.shape
    lib = _instance(lib)
    if m == 0 or n == 0:
        return None
    bb, ldb, copied = _writable_colmajor_output(b)
    ld = colmajor(a)
    if ld:
        a_, lda, up, t = a, ld, uplo, transa
    else:
        ldt = colmajor(a.T)
        tbits = _OPS[transa]
        flipped = _OPNAME[(tbits[0] ^ 1, tbits[1])]
        if ldt and flipped != "R":
            a_, lda, up, t = a.T, ldt, _flip(uplo), flipped
        else:
            a_, lda = _fortran_copy(a)
            up, t = uplo, transa
    s = _SCALAR_CODE[prefix]
    lib.call(prefix + name, "vcccci" + "i" + s + "aiai", side, up, t, diag, m, n, alpha, a_, lda, bb, ldb)
    if copied:
        b[...] = bb
    return None


def trmm(alpha, a, b, side="L", uplo="U", transa="N", diag="N", lib=None) -> None:
    """b := alpha*op(a)@b (side L) or alpha*b@op(a) (side R), a triangular; in place."""
    return _triangular("trmm", side, uplo, transa, diag, alpha, a, b, lib)


def trsm(alpha, a, b, side="L", uplo="U", transa="N", diag="N", lib=None) -> None:
    """Solve op(a)@x = alpha*b (side L) or x@op(a) = alpha*b (side R) for x, overwriting b."""
    return _triangular("trsm", side, uplo, transa, diag, alpha, a, b, lib)


def split_k_axpy(alpha: Any, x: np.ndarray, y: np.ndarray, uplo: str | None = None) -> None:
    """y += alpha*x in place, on the ``uplo`` triangle of y only when given (the other entries untouched):
    the split-k reduction of the tile runtime, on host memory, for every device kind that keeps tiles there.
    The triangle is that of the m x n tile (diagonal included), so rectangular tiles work too."""
    if uplo is None:
        if alpha == 1:
            np.add(y, x, out=y)
        else:
            y += alpha * x
        return
    m, n = y.shape
    rows, cols = np.triu_indices(m, 0, n) if uplo == "U" else np.tril_indices(m, 0, n)
    y[rows, cols] += alpha * x[rows, cols]
