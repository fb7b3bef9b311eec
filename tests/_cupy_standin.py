"""A strict stand-in for CuPy on the CPU, for the tests of tileblas' GPU code (``cupy``, ``cupyx`` and
``cupy_backends.cuda.libs.cublas``), installed with :func:`install`.

What it models, and refuses as CUDA would
    * Memory: device arrays are NumPy arrays of class :class:`DevArray` (``arr.data.ptr`` is a real
      address); pinned host buffers (``cupyx.empty_pinned``) are :class:`PinnedArray`.  Per device, the
      bytes this process holds count against ``memGetInfo``'s free memory.
    * Devices: a current device per thread (``with cp.cuda.Device(i)``).  Streams, events and cuBLAS
      handles belong to the device current when they are made.  Refused (:class:`CudaError`): recording an
      event on a stream of another device; elapsed time between events of two devices or of an event
      without timing; a kernel (a cuBLAS call or an element-wise operation) on a stream whose device is not
      the current one; a cuBLAS call on a handle of another device or bound to a destroyed stream;
      ``cublas.destroy`` with another device current (cublasDestroy synchronises the *current* device).
    * Stream order: every operation is issued on a stream (CuPy's current stream unless one is given) and
      its reads and writes of device and pinned memory are checked against the earlier accesses of other
      streams with vector clocks.  Work is ordered by a stream's own order, an event wait, the legacy null
      stream's implicit synchronisation with *blocking* streams (not with non-blocking ones), and a host
      synchronisation (stream, event, device) that happened before the host issued the work.  A conflicting
      access without such an order raises :class:`Hazard` (a race on a GPU).  Waiting for an event that
      was never recorded is refused too (a no-op on CUDA, always a bug here).
    * Layouts: a cuBLAS binding reads every matrix argument column-major with its leading dimension; the
      array whose ``.data.ptr`` was passed must have exactly that shape and layout (else
      :class:`LayoutError`: on a GPU a C-ordered array would be read transposed, silently).
    * CuPy's own cuBLAS bindings bind the handle to CuPy's current stream at every call (CuPy's
      ``_setStream``); routines taken from the C library (tests pass :func:`c_library`) use the stream the
      handle is bound to.
    * Time: each stream has a clock (host ``perf_counter`` seconds) at which its last operation ends;
      events take the time their stream reaches them; :meth:`Sim.delay` holds a stream busy.
    * Host registration (``runtime.hostRegister`` / ``hostUnregister``): a registered range of host memory
      is page-locked memory to the copies (its accesses are ordered like pinned buffers'); registering a
      byte of a registered range again is refused (712, cudaErrorHostMemoryAlreadyRegistered), so is
      unregistering what is not registered (713); unregistering a range that a copy issued on a stream
      may still read or write (no host synchronisation since) raises :class:`Hazard`.
      ``state["register_refused"]`` makes every registration fail (801, cudaErrorNotSupported).
    * 2-D copies (``runtime.memcpy2DAsync``): ``height`` rows of ``width`` bytes, each at its pitch, on a
      stream, ordered like the other copies; a pitch narrower than the width is refused; the device side
      must lie in device memory; a host side in pageable memory is counted (``sim.pageable_async``: CUDA
      would stage it through a buffer of its own, synchronously).
    * Faults: :meth:`Sim.fail_next_sync`, :meth:`Sim.poison` (elapsed time of a stream's events fails),
      ``max_alloc`` (an allocation over it fails with OutOfMemoryError), ``driver_error``.
    * Counters: cuBLAS calls by routine (``sim.calls``), spinning and blocking host synchronisations,
      2-D copies (``sim.copies2d``).

What it does not model
    CUDA itself: every operation runs at once on the host (cuBLAS through OpenBLAS), so a missing order is
    found by the clocks, not by a wrong number.  Host threads are taken to be ordered with each other.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import sys
import threading
import time
import types
import weakref
from typing import Any

import numpy as np

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # NumPy < 2
    byte_bounds = np.byte_bounds

from tileblas.kernels import _openblas

__all__ = ["Hazard", "CudaError", "LayoutError", "Sim", "install", "c_library", "DevArray", "PinnedArray"]


class Hazard(AssertionError):
    """Two accesses of the same memory on different streams with no order between them."""


class CudaError(RuntimeError):
    """What CUDA or cuBLAS would return as an error (``status`` as CUDA's)."""

    def __init__(self, status: int, msg: str) -> None:
        super().__init__(msg)
        self.status = status


class LayoutError(ValueError):
    """A cuBLAS argument whose array is not the column-major matrix cuBLAS reads at its pointer."""


_SIM: "Sim | None" = None


def _sim() -> "Sim":
    assert _SIM is not None, "the CuPy stand-in is not installed"
    return _SIM


# ------------------------------------------------------------------------------------------ queues


class _Queue:
    """A stream (or the host): what it knows has finished (vector clock) and when it is free (clock)."""

    def __init__(self, sim: "Sim", name: str, device: int | None, blocking: bool, null: bool = False) -> None:
        self.id = next(sim._ids)
        self.name = name
        self.device = device
        self.blocking = blocking
        self.null = null
        self.vc: dict[int, int] = {}
        self.clock = 0.0
        self.ptr = 0
        sim._queues[self.id] = self


def _merge(into: dict, other: dict) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


# ------------------------------------------------------------------------------------------ arrays


def _root(x: np.ndarray) -> np.ndarray:
    while isinstance(x.base, np.ndarray):
        x = x.base
    return x


def _plain(x: Any) -> Any:
    if isinstance(x, _Tracked):
        return x.view(np.ndarray)
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _tracked_in(obj: Any, out: list) -> list:
    if isinstance(obj, _Tracked):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            _tracked_in(v, out)
    elif isinstance(obj, dict):
        for v in obj.values():
            _tracked_in(v, out)
    return out


_IN_PLACE = {np.copyto, np.fill_diagonal, np.place, np.putmask, np.put}


class _Tracked(np.ndarray):
    """Memory whose accesses the stand-in checks: element-wise work, item assignment and NumPy functions
    are issued on a stream (device arrays) or on the host (pinned arrays)."""

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kw):
        sim = _sim()
        outs = tuple(out) if out is not None else ()
        reads = _tracked_in(list(inputs), [])
        result = getattr(ufunc, method)(*_plain(inputs), **({"out": _plain(outs)} if outs else {}), **kw)
        device = any(isinstance(x, DevArray) for x in reads + list(outs))
        if outs:
            sim._op(device, reads=reads, writes=[o for o in outs if isinstance(o, _Tracked)], what=f"ufunc {ufunc.__name__}")
            return out[0] if len(outs) == 1 else out
        return sim._result(result, device, reads, f"ufunc {ufunc.__name__}")

    def __array_function__(self, func, types_, args, kwargs):
        sim = _sim()
        written = [args[0]] if func in _IN_PLACE and isinstance(args[0], _Tracked) else []
        reads = [x for x in _tracked_in([args, kwargs], []) if not any(x is w for w in written)]
        result = func(*_plain(args), **_plain(kwargs))
        device = any(isinstance(x, DevArray) for x in reads + written)
        if func in _IN_PLACE:
            sim._op(device, reads=reads, writes=written, what=func.__name__)
            return result
        return sim._result(result, device, reads, func.__name__)

    def __setitem__(self, key, value):
        sim = _sim()
        plain = self.view(np.ndarray)
        target = plain[key]
        target = target if isinstance(target, np.ndarray) and np.may_share_memory(target, plain) else plain
        reads = _tracked_in([value], [])
        np.ndarray.__setitem__(plain, key, _plain(value))
        sim._op(isinstance(self, DevArray) or any(isinstance(x, DevArray) for x in reads), reads=reads,
                writes=[target], what="setitem")

    def copy(self, order="C"):
        res = np.ndarray.copy(self.view(np.ndarray), order=order)
        return _sim()._result(res, isinstance(self, DevArray), [self], "copy")

    def astype(self, dtype, order="K", copy=True, **kw):
        res = self.view(np.ndarray).astype(dtype, order=order, copy=True, **kw)
        return _sim()._result(res, isinstance(self, DevArray), [self], "astype")


class _MemPtr:
    """CuPy's MemoryPointer: ``ptr`` (an int that remembers its array) and the asynchronous copies."""

    def __init__(self, arr: "DevArray") -> None:
        _sim()._owner(arr)
        self.ptr = _Ptr(arr.ctypes.data, arr)

    def copy_from_host_async(self, mem, size, stream=None):
        sim = _sim()
        addr = mem.value if hasattr(mem, "value") else int(mem)
        sim._copy(stream, reads=[sim._range_of(addr, size, pinned=True)],
                  writes=[sim._range_of(int(self.ptr), size)], what="copy_from_host_async")
        ctypes.memmove(int(self.ptr), addr, size)

    def copy_to_host_async(self, mem, size, stream=None):
        sim = _sim()
        addr = mem.value if hasattr(mem, "value") else int(mem)
        sim._copy(stream, reads=[sim._range_of(int(self.ptr), size)],
                  writes=[sim._range_of(addr, size, pinned=True)], what="copy_to_host_async")
        ctypes.memmove(addr, int(self.ptr), size)


class _Ptr(int):
    """A device address that remembers the array it was taken from (for the layout check)."""

    def __new__(cls, value: int, array: Any):
        self = super().__new__(cls, value)
        self.array = array
        return self


class DevArray(_Tracked):
    """A device array of the stand-in."""

    @property
    def data(self) -> _MemPtr:
        return _MemPtr(self)

    def get(self, stream=None, order="C", out=None):
        return _sim().asnumpy(self, stream=stream)

    @property
    def device(self) -> Any:
        return _sim().cp.cuda.Device(_sim()._owner(self)[1])


class PinnedArray(_Tracked):
    """Page-locked host memory of the stand-in (host accesses are ordered after the streams' copies)."""


# ------------------------------------------------------------------------------------------ the state


class Sim:
    """The stand-in's CUDA: devices, queues, the access records and the CuPy modules built on them."""

    def __init__(self, devices: int = 2, total: int = 1 << 30, free: int | None = None) -> None:
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self._ptrs = itertools.count(0x1000)
        self._queues: dict[int, _Queue] = {}
        self.devices = devices
        self.total = total
        self.state = {"free": total if free is None else free, "fail_alloc": False, "max_alloc": None,
                      "driver_error": None}
        self.used = [0] * devices
        self.host = _Queue(self, "host", None, True)
        self.nulls = [_Queue(self, f"null stream of device {d}", d, True, null=True) for d in range(devices)]
        self.blocking: list[weakref.WeakSet] = [weakref.WeakSet() for _ in range(devices)]
        self.streams: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # ptr -> Stream
        self.dead: set[int] = set()
        self.tls = threading.local()
        self.records: dict[int, list] = {}
        self.roots: dict[int, tuple] = {}  # id(root) -> (weakref, lo, hi, device or None for pinned)
        self.handles: dict[int, dict] = {}
        self.calls: dict[str, int] = {}
        self.syncs = {"spinning": 0, "blocking": 0}
        self.log: list[tuple] = []
        self._fail_sync: set[int] = set()
        self._poisoned: dict[int, int] = {}  # queue id -> serial of the last event poisoned on it
        self._serials = itertools.count(1)
        self.peer_enabled: set[tuple[int, int]] = set()
        self.registered: dict[int, tuple[int, int]] = {}  # first byte -> (first, one past the last)
        self.state["register_refused"] = False
        self.copies2d = 0
        self.pageable_async = 0
        self.cp, self.cupyx, self.cublas = self._modules()

    # -------------------------------------------------------------- faults and helpers for tests
    def fail_next_sync(self, stream: Any) -> None:
        """The next host synchronisation with ``stream`` (stream or event) fails once."""
        self._fail_sync.add(self._queue(stream).id)

    def poison(self, stream: Any) -> None:
        """Elapsed time of the events recorded on ``stream`` so far fails from now on."""
        with self.lock:
            self._poisoned[self._queue(stream).id] = next(self._serials)

    def delay(self, stream: Any, seconds: float) -> None:
        """Issue nothing but ``seconds`` of busy time on ``stream``."""
        with self.lock:
            q = self._queue(stream)
            self._issue(q, what="delay", dur=seconds)

    def live_handles(self) -> list[int]:
        return [h for h, d in self.handles.items() if d["alive"]]

    def handle_stream(self, handle: int) -> int:
        return self.handles[handle]["stream"]

    def stream_alive(self, ptr: int) -> bool:
        return ptr == 0 or (self.streams.get(ptr) is not None and ptr not in self.dead)

    # -------------------------------------------------------------- current device and stream
    def current_device(self) -> int:
        stack = getattr(self.tls, "devices", None)
        return stack[-1] if stack else 0

    def _stream_stack(self, device: int) -> list:
        d = getattr(self.tls, "streams", None)
        if d is None:
            d = self.tls.streams = {}
        return d.setdefault(device, [])

    def current_stream(self) -> Any:
        stack = self._stream_stack(self.current_device())
        return stack[-1] if stack else self.cp.cuda.Stream.null

    def _queue(self, stream: Any) -> _Queue:
        """The queue of a stream object, a stream pointer, or None (the current stream)."""
        if stream is None:
            stream = self.current_stream()
        if isinstance(stream, (int, np.integer)):
            ptr = int(stream)
            if ptr == 0:
                return self.nulls[self.current_device()]
            stream = self.streams.get(ptr)
            if ptr in self.dead or stream is None:
                raise CudaError(400, f"cudaErrorInvalidResourceHandle: stream {ptr:#x} was destroyed")
        q = stream._q()
        if q.ptr in self.dead:
            raise CudaError(400, f"cudaErrorInvalidResourceHandle: {q.name} was destroyed")
        return q

    # -------------------------------------------------------------- ordering
    def _issue(self, q: _Queue, reads=(), writes=(), what: str = "", dur: float = 0.0, kernel: bool = False,
               device: int | None = None) -> None:
        with self.lock:
            cur = self.current_device() if device is None else device
            if kernel and q.device != cur:
                raise CudaError(400, f"{what}: launched on {q.name} (device {q.device}) while device {cur} is "
                                     "current (a kernel runs on a stream of the current device)")
            _merge(q.vc, self.host.vc)  # the host issues it after what it has seen finish
            if q.null:
                for s in list(self.blocking[q.device]):
                    _merge(q.vc, s._q().vc)
            elif q.blocking and q.device is not None:
                _merge(q.vc, self.nulls[q.device].vc)
            t = q.vc[q.id] = q.vc.get(q.id, 0) + 1
            for r in reads:
                if r is not None:
                    self._access(q, t, r, False, what)
            for r in writes:
                if r is not None:
                    self._access(q, t, r, True, what)
            q.clock = max(q.clock, time.perf_counter()) + dur

    def _access(self, q: _Queue, t: int, rng: tuple, write: bool, what: str) -> None:
        key, lo, hi = rng
        if hi <= lo:
            return
        keep = []
        for r in self.records.get(key, ()):
            rlo, rhi, rq, rt, rw, rwhat = r
            if rt <= self.host.vc.get(rq, 0):
                continue  # the host saw it finish: everything issued from now on comes after it
            keep.append(r)
            if rq == q.id or not (write or rw) or rhi <= lo or hi <= rlo:
                continue
            if q.vc.get(rq, 0) < rt:
                raise Hazard(f"{what} on {q.name} {'writes' if write else 'reads'} bytes {lo:#x}-{hi:#x} that "
                             f"{rwhat} on {self._queues[rq].name} {'wrote' if rw else 'read'} {rlo:#x}-{rhi:#x}, "
                             "with no event wait or synchronisation between them")
        if q is not self.host:
            keep.append((lo, hi, q.id, t, write, what))
        self.records[key] = keep

    def _host_sees(self, q: _Queue, vc: dict | None = None, kind: str | None = "spinning") -> None:
        """The host learns that ``q`` reached ``vc`` (default: all issued so far): a synchronisation
        (``kind`` "spinning" or "blocking", counted) or a completed query (None)."""
        with self.lock:
            if kind is not None and q.id in self._fail_sync:
                self._fail_sync.discard(q.id)
                raise CudaError(700, f"cudaErrorIllegalAddress: an operation on {q.name} failed")
            if kind is not None:
                self.syncs[kind] += 1
                self.log.append(("sync", q.id))
            _merge(self.host.vc, q.vc if vc is None else vc)

    def _device_sync(self, device: int, kind: str | None = "spinning") -> None:
        with self.lock:
            for q in list(self._queues.values()):
                if q.device == device and q.ptr not in self.dead:
                    self._host_sees(q, kind=kind)

    # -------------------------------------------------------------- memory
    def _register(self, arr: np.ndarray, device: int | None) -> None:
        root = _root(arr)
        key = id(root)
        with self.lock:
            if key in self.roots and self.roots[key][0]() is root:
                return
            lo, hi = byte_bounds(root)
            self.roots[key] = (weakref.ref(root), lo, hi, device)
            if device is not None:
                self.used[device] += hi - lo
        weakref.finalize(root, self._forget, key, device, hi - lo)

    def _forget(self, key: int, device: int | None, nbytes: int) -> None:
        with self.lock:
            self.roots.pop(key, None)
            self.records.pop(key, None)
            if device is not None:
                self.used[device] -= nbytes

    def _owner(self, arr: np.ndarray) -> tuple[int, int | None]:
        root = _root(arr)
        ent = self.roots.get(id(root))
        if ent is None or ent[0]() is not root:
            # a copy NumPy made without the stand-in seeing it (fancy indexing, astype): new memory,
            # no earlier access to order against
            self._register(arr, self.current_device() if isinstance(arr, DevArray) else None)
            ent = self.roots[id(root)]
        return id(root), ent[3]

    def _range(self, arr: np.ndarray) -> tuple:
        key, _ = self._owner(arr)
        lo, hi = byte_bounds(arr)
        return key, lo, hi

    def _range_of(self, addr: int, nbytes: int, pinned: bool = False) -> tuple | None:
        """(owner, lo, hi) of ``nbytes`` at ``addr`` in device memory (or pinned host memory); pageable host
        memory is not tracked (None)."""
        # a copy taken in one step under the lock: another thread may register meanwhile, and a collection
        # while a list of the items is built may run a finaliser (_forget) that changes the dict in this one
        with self.lock:
            roots, registered = self.roots.copy(), self.registered.copy()
        for key, (ref, lo, hi, dev) in roots.items():
            if lo <= addr < hi and ref() is not None:
                if addr + nbytes > hi:
                    raise CudaError(1, f"{nbytes} bytes at {addr:#x} run past the allocation's end")
                if (dev is None) != pinned:
                    raise CudaError(1, f"address {addr:#x} is {'pinned host' if dev is None else 'device'} "
                                       f"memory, passed as {'host' if pinned else 'device'} memory")
                return key, addr, addr + nbytes
        if pinned:
            for lo, hi in registered.values():
                if lo <= addr < hi:
                    if addr + nbytes > hi:
                        raise CudaError(1, f"{nbytes} bytes at {addr:#x} run past the registered range's end")
                    return ("registered", lo), addr, addr + nbytes
            return None
        raise CudaError(1, f"address {addr:#x} is not in device memory")

    def _wrap(self, x: np.ndarray, device: int | None = None) -> "DevArray":
        out = x.view(DevArray)
        self._register(out, self.current_device() if device is None else device)
        return out

    def _result(self, result: Any, device: bool, reads: list, what: str) -> Any:
        """Wrap a NumPy function's result: a view of a tracked array stays a view of it, new memory is
        new device memory written by the operation (device work) or plain host memory."""
        if not isinstance(result, np.ndarray):
            if device:
                self._op(True, reads=reads, writes=[], what=what)
            return result
        root = _root(result)
        ent = self.roots.get(id(root))
        if ent is not None and ent[0]() is root:
            return result.view(DevArray if ent[3] is not None else PinnedArray)
        if not device:
            self._op(False, reads=reads, writes=[], what=what)
            return result
        out = self._wrap(result)
        self._op(True, reads=reads, writes=[out], what=what)
        return out

    def _op(self, device: bool, reads=(), writes=(), what: str = "") -> None:
        r = [self._range(x) for x in reads if isinstance(x, _Tracked)]
        w = [self._range(x) if isinstance(x, _Tracked) else self._range_plain(x) for x in writes]
        if device:
            self._issue(self._queue(None), r, w, what=what, kernel=True)
        else:
            self._issue(self.host, r, w, what=what)

    def _range_plain(self, x: np.ndarray) -> tuple:
        key, _ = self._owner(x)
        lo, hi = byte_bounds(x)
        return key, lo, hi

    def _copy(self, stream: Any, reads, writes, what: str) -> None:
        self._issue(self._queue(stream), reads, writes, what=what)

    def empty(self, shape, dtype=float, order="C") -> DevArray:
        dev = self.current_device()
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        st = self.state
        if st["fail_alloc"] or (st["max_alloc"] is not None and nbytes > st["max_alloc"]) \
                or nbytes > self.mem_info(dev)[0]:
            raise self.cp.cuda.memory.OutOfMemoryError(f"out of memory allocating {nbytes} bytes")
        return self._wrap(np.empty(shape, dtype, order=order), dev)

    def mem_info(self, device: int) -> tuple[int, int]:
        return max(self.state["free"] - self.used[device], 0), self.total

    def asarray(self, x, dtype=None, order=None) -> DevArray:
        if isinstance(x, DevArray):
            if (dtype is None or np.dtype(dtype) == x.dtype) and (order in (None, "K", "A")
                                                                   or (order == "F" and x.flags.f_contiguous)
                                                                   or (order == "C" and x.flags.c_contiguous)):
                return x
            res = np.array(x.view(np.ndarray), dtype=dtype, order=order or "K", copy=True)
            return self._result(res, True, [x], "asarray")
        res = self._wrap(np.array(_plain(x), dtype=dtype, order=order or "K", copy=True))
        self._issue(self._queue(None), writes=[self._range(res)], what="asarray (host -> device)")
        return res

    def asnumpy(self, x, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
        if not isinstance(x, DevArray):
            return np.asarray(x)
        q = self._queue(stream)
        self._issue(q, reads=[self._range(x)], what="asnumpy (device -> host)")
        if blocking:
            self._host_sees(q)
        return np.array(x.view(np.ndarray), order=order, copy=True)

    # -------------------------------------------------------------- the modules
    def _modules(self):  # noqa: C901 - one stand-in, built in one place
        sim = self
        clock = time.perf_counter

        class _NullStream:
            ptr = 0

            def _q(self):
                return sim.nulls[sim.current_device()]

            def synchronize(self):
                sim._host_sees(self._q())

            def wait_event(self, ev):
                Stream.wait_event(self, ev)

            def __enter__(self):
                sim._stream_stack(sim.current_device()).append(self)
                return self

            def __exit__(self, *exc):
                sim._stream_stack(sim.current_device()).pop()
                return False

            def use(self):
                stack = sim._stream_stack(sim.current_device())
                stack[:] = [self]
                return self

        class Stream:
            null = _NullStream()

            def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
                self.device_id = sim.current_device()
                self._queue = _Queue(sim, "", self.device_id, blocking=not non_blocking)
                self.ptr = self._queue.ptr = next(sim._ptrs)
                self._queue.name = f"stream {self.ptr:#x} of device {self.device_id}"
                sim.streams[self.ptr] = self
                if not non_blocking:
                    sim.blocking[self.device_id].add(self)
                weakref.finalize(self, sim.dead.add, self.ptr)  # CuPy destroys the CUDA stream with the object

            def _q(self):
                return self._queue

            def wait_event(self, ev):
                if ev.vc is None:
                    raise Hazard(f"{self._q().name} waits for an event that was never recorded")
                with sim.lock:
                    q = self._q()
                    _merge(q.vc, sim.host.vc)
                    _merge(q.vc, ev.vc)
                    q.clock = max(q.clock, ev.t)

            def synchronize(self):
                sim._host_sees(self._q())

            def record(self, event=None):
                event = event or Event()
                event.record(self)
                return event

            def _check_device(self):
                cur = sim.current_device()
                if self.device_id != cur:  # as CuPy's check_stream_device_match
                    raise RuntimeError(f"The device that the stream is created on ({self.device_id}) does not "
                                       f"match with the current device ({cur})")

            def use(self):
                self._check_device()
                sim._stream_stack(self.device_id)[:] = [self]
                return self

            def __enter__(self):
                self._check_device()
                sim._stream_stack(self.device_id).append(self)
                return self

            def __exit__(self, *exc):
                sim._stream_stack(self.device_id).pop()
                return False

        class Event:
            def __init__(self, block=False, disable_timing=False, interprocess=False):
                self.device = sim.current_device()
                self.block = bool(block)
                self.timing = not disable_timing
                self.vc = None
                self.t = None
                self.q = None

            def record(self, stream=None):
                q = sim._queue(stream)
                if q.device != self.device:
                    raise CudaError(400, f"cudaErrorInvalidResourceHandle: an event of device {self.device} "
                                         f"recorded on {q.name} (event and stream must be on one device)")
                with sim.lock:
                    _merge(q.vc, sim.host.vc)
                    self.vc = dict(q.vc)
                    self.t = max(clock(), q.clock)
                    self.q = q
                    self.serial = next(sim._serials)

            @property
            def done(self):
                if self.vc is not None:
                    sim._host_sees(self.q, self.vc, kind=None)
                return True

            def query(self):
                return self.done

            def synchronize(self):
                if self.vc is not None:
                    sim._host_sees(self.q, self.vc, kind="blocking" if self.block else "spinning")

        def get_elapsed_time(a, b):
            for e in (a, b):
                if e.vc is None:
                    raise CudaError(600, "cudaErrorNotReady: elapsed time of an event never recorded")
                if not e.timing:
                    raise CudaError(400, "cudaErrorInvalidResourceHandle: elapsed time of an event made "
                                         "with disable_timing=True")
                if e.serial <= sim._poisoned.get(e.q.id, 0):
                    raise CudaError(700, "cudaErrorIllegalAddress: elapsed time of a failed stream's event")
            if a.device != b.device:
                raise CudaError(400, "cudaErrorInvalidResourceHandle: elapsed time between events of two "
                                     "devices")
            return (b.t - a.t) * 1e3

        class Device:
            def __init__(self, device=None):
                self.id = sim.current_device() if device is None else int(device)
                if not 0 <= self.id < sim.devices:
                    raise CudaError(101, f"cudaErrorInvalidDevice: {self.id}")

            def __enter__(self):
                stack = getattr(sim.tls, "devices", None)
                if stack is None:
                    stack = sim.tls.devices = []
                stack.append(self.id)
                return self

            def __exit__(self, *exc):
                sim.tls.devices.pop()
                return False

            def use(self):
                stack = getattr(sim.tls, "devices", None)
                if stack is None:
                    stack = sim.tls.devices = []
                stack[:] = [self.id]

            def synchronize(self):
                sim._device_sync(self.id)

        class CUDARuntimeError(RuntimeError):
            def __init__(self, status, msg=""):
                super().__init__(msg or f"CUDA error {status}")
                self.status = status

        def device_count():
            if sim.state["driver_error"] is not None:
                raise CUDARuntimeError(35, sim.state["driver_error"])
            return sim.devices

        def memcpy_peer(dst, dst_dev, src, src_dev, n, stream):
            if (dst_dev, src_dev) not in sim.peer_enabled:
                raise CudaError(217, "cudaErrorPeerAccessNotEnabled")
            sim._copy(stream, reads=[sim._range_of(int(src), n)], writes=[sim._range_of(int(dst), n)],
                      what="memcpyPeerAsync")
            ctypes.memmove(int(dst), int(src), n)

        def host_register(ptr, size, flags):
            lo, hi = int(ptr), int(ptr) + int(size)
            with sim.lock:
                if sim.state["register_refused"]:
                    raise CudaError(801, "cudaErrorNotSupported: cannot page-lock this memory")
                for a, b in sim.registered.values():
                    if lo < b and a < hi:
                        raise CudaError(712, "cudaErrorHostMemoryAlreadyRegistered")
                sim.registered[lo] = (lo, hi)
                sim.log.append(("register", lo, hi))

        def host_unregister(ptr):
            lo = int(ptr)
            with sim.lock:
                if lo not in sim.registered:
                    raise CudaError(713, "cudaErrorHostMemoryNotRegistered")
                for rlo, rhi, rq, rt, rw, rwhat in sim.records.get(("registered", lo), ()):
                    if rt > sim.host.vc.get(rq, 0):
                        raise Hazard(f"hostUnregister of {lo:#x} while {rwhat} on {sim._queues[rq].name} may still "
                                     f"{'write' if rw else 'read'} bytes {rlo:#x}-{rhi:#x} (no synchronisation since)")
                del sim.registered[lo]
                sim.records.pop(("registered", lo), None)
                sim.log.append(("unregister", lo))

        def memcpy_2d(dst, dpitch, src, spitch, width, height, kind, stream):
            dst, src, dpitch, spitch, width, height = (int(x) for x in (dst, src, dpitch, spitch, width, height))
            if width > dpitch or width > spitch:
                raise CudaError(1, f"cudaErrorInvalidPitchValue: width {width} > pitch ({dpitch}, {spitch})")
            if kind not in (1, 2):
                raise CudaError(21, f"cudaErrorInvalidMemcpyDirection: kind {kind}")
            if not height or not width:
                return
            def rows(addr, pitch, pinned):
                """The bytes the copy touches on one side: its whole span checked, one range per row
                (the rows of a strided tile leave other tiles' bytes between them)."""
                span = sim._range_of(addr, pitch * (height - 1) + width, pinned=pinned)
                if span is None or pitch == width:
                    return [span]
                return [(span[0], addr + j * pitch, addr + j * pitch + width) for j in range(height)]

            if kind == 1:
                reads, writes = rows(src, spitch, True), rows(dst, dpitch, False)
                host = reads[0]
            else:
                reads, writes = rows(src, spitch, False), rows(dst, dpitch, True)
                host = writes[0]
            if host is None:
                sim.pageable_async += 1
            sim._copy(stream, reads=reads, writes=writes, what="memcpy2DAsync")
            for j in range(height):
                ctypes.memmove(dst + j * dpitch, src + j * spitch, width)
            sim.copies2d += 1

        def enable_peer(peer):
            key = (sim.current_device(), int(peer))
            if key in sim.peer_enabled:
                raise CUDARuntimeError(704, "cudaErrorPeerAccessAlreadyEnabled")
            sim.peer_enabled.add(key)

        class OutOfMemoryError(MemoryError):
            pass

        class Pool:
            def __init__(self):
                self.freed = 0

            def free_all_blocks(self, stream=None):
                self.freed += 1

        pools = {"device": Pool(), "pinned": Pool()}
        runtime = types.SimpleNamespace(
            CUDARuntimeError=CUDARuntimeError,
            getDeviceCount=device_count,
            deviceSynchronize=lambda: sim._device_sync(sim.current_device()),
            memGetInfo=lambda: sim.mem_info(sim.current_device()),
            deviceCanAccessPeer=lambda a, b: int(a != b),
            deviceEnablePeerAccess=enable_peer,
            memcpyPeerAsync=memcpy_peer,
            hostRegister=host_register,
            hostUnregister=host_unregister,
            memcpy2DAsync=memcpy_2d,
            getDeviceProperties=lambda i: {"name": b"stand-in", "totalGlobalMem": sim.total},
            runtimeGetVersion=lambda: 13000,
            driverGetVersion=lambda: 13000,
        )
        cp = types.ModuleType("cupy")
        cp.__version__ = "stand-in"
        cp.ndarray = DevArray
        cp.empty = sim.empty
        cp.asarray = sim.asarray
        cp.array = lambda x, dtype=None, order="K", copy=True: sim._result(
            np.array(_plain(x), dtype=dtype, order=order, copy=True), True, [x], "array") \
            if isinstance(x, DevArray) else sim.asarray(x, dtype, order)
        cp.asfortranarray = lambda x, dtype=None: sim.asarray(x, dtype, "F")
        cp.ascontiguousarray = lambda x, dtype=None: sim.asarray(x, dtype, "C")
        cp.asnumpy = sim.asnumpy

        def _creator(fn):
            def make(*args, **kw):
                res = sim._wrap(fn(*args, **kw))
                sim._op(True, writes=[res], what=fn.__name__)
                return res
            return make

        for name in ("zeros", "ones", "eye", "arange", "full", "identity"):
            setattr(cp, name, _creator(getattr(np, name)))
        cp.empty_like = lambda x, dtype=None, order="K": sim.empty(x.shape, dtype or x.dtype,
                                                                    "F" if order == "F" else "C")
        cp.get_default_memory_pool = lambda: pools["device"]
        cp.get_default_pinned_memory_pool = lambda: pools["pinned"]
        cp._state, cp._pools, cp._sim = sim.state, pools, sim

        def numpy_attr(name):
            obj = getattr(np, name)
            if callable(obj) and not isinstance(obj, type):
                return lambda *a, **kw: obj(*[sim.asarray(x) if isinstance(x, np.ndarray) and not
                                              isinstance(x, _Tracked) else x for x in a], **kw)
            return obj

        cp.__getattr__ = numpy_attr
        cp.cuda = types.SimpleNamespace(
            Device=Device, Stream=Stream, Event=Event, runtime=runtime, get_elapsed_time=get_elapsed_time,
            memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
            get_current_stream=sim.current_stream,
            device=types.SimpleNamespace(get_cublas_handle=lambda: sim._thread_handle(),
                                         get_device_id=sim.current_device))
        cupyx = types.ModuleType("cupyx")

        def empty_pinned(shape, dtype=float, order="C"):
            out = np.empty(shape, dtype, order=order).view(PinnedArray)
            sim._register(out, None)
            return out

        cupyx.empty_pinned = empty_pinned
        cb = self._cublas_module()
        return cp, cupyx, cb

    # -------------------------------------------------------------- cuBLAS
    def _thread_handle(self) -> int:
        """CuPy's cuBLAS handle of this thread and the current device."""
        d = getattr(self.tls, "handles", None)
        if d is None:
            d = self.tls.handles = {}
        dev = self.current_device()
        if dev not in d:
            d[dev] = self.cublas.create()
        return d[dev]

    def _cublas_module(self):
        sim = self
        cb = types.ModuleType("cupy_backends.cuda.libs.cublas")
        cb.CUBLAS_POINTER_MODE_HOST, cb.CUBLAS_POINTER_MODE_DEVICE = 0, 1
        cb.CUBLAS_SIDE_LEFT, cb.CUBLAS_SIDE_RIGHT = 0, 1
        cb.CUBLAS_FILL_MODE_LOWER, cb.CUBLAS_FILL_MODE_UPPER = 0, 1
        cb.CUBLAS_DIAG_NON_UNIT, cb.CUBLAS_DIAG_UNIT = 0, 1
        hid = itertools.count(1)

        def create():
            h = next(hid)
            sim.handles[h] = {"device": sim.current_device(), "stream": 0, "mode": 0, "alive": True}
            return h

        def handle(h):
            d = sim.handles.get(int(h))
            if d is None or not d["alive"]:
                raise CudaError(1, f"CUBLAS_STATUS_NOT_INITIALIZED: handle {h} was destroyed")
            return d

        def destroy(h):
            d = handle(h)
            cur = sim.current_device()
            if d["device"] != cur:
                raise CudaError(1, f"cublasDestroy of a handle of device {d['device']} with device {cur} current "
                                   "(it synchronises and frees on the current device)")
            sim._device_sync(cur, kind=None)  # cuBLAS's own, implicit
            d["alive"] = False
            sim.log.append(("destroy", int(h)))

        def set_stream(h, ptr):
            d = handle(h)
            if not sim.stream_alive(int(ptr)):  # CuPy's setStream asks cudaStreamIsCapturing(stream) first
                raise CudaError(709, f"cudaErrorContextIsDestroyed: cublasSetStream to stream {int(ptr):#x}, "
                                     "destroyed")
            d["stream"] = int(ptr)

        def set_mode(h, m):
            handle(h)["mode"] = int(m)

        cb.create, cb.destroy = create, destroy
        cb.setStream, cb.getStream = set_stream, lambda h: handle(h)["stream"]
        cb.setPointerMode, cb.getPointerMode = set_mode, lambda h: handle(h)["mode"]

        def run(h, what, reads, writes, current_stream: bool):
            """Check the handle and issue the call on its stream (CuPy's bindings bind it to CuPy's current
            stream first, as CuPy's _setStream does)."""
            d = handle(h)
            cur = sim.current_device()
            if current_stream:
                d["stream"] = int(sim.current_stream().ptr)
            if d["device"] != cur:
                raise CudaError(1, f"{what}: a cuBLAS handle of device {d['device']} used with device {cur} current")
            ptr = d["stream"]
            if not sim.stream_alive(ptr):
                raise CudaError(400, f"{what}: the cuBLAS handle is bound to stream {ptr:#x}, destroyed")
            if d["mode"] != 0:
                raise CudaError(7, f"{what}: pointer mode device (tileblas passes host scalars)")
            sim._issue(sim._queue(ptr) if ptr else sim.nulls[d["device"]], reads, writes, what=what, kernel=True)
            sim.calls[what] = sim.calls.get(what, 0) + 1

        def view(ptr, rows, cols, ld, dt, name):
            dt = np.dtype(dt)
            if rows == 0 or cols == 0:
                return np.zeros((rows, cols), dt), None
            if ld < max(rows, 1):
                raise LayoutError(f"{name}: leading dimension {ld} < rows {rows}")
            arr = getattr(ptr, "array", None)
            if arr is not None:
                ok = arr.ndim == 2 and arr.shape == (rows, cols) and arr.dtype == dt \
                    and (rows <= 1 or arr.strides[0] == dt.itemsize) and (cols <= 1 or arr.strides[1] == ld * dt.itemsize)
                if not ok:
                    raise LayoutError(f"{name}: cuBLAS reads a column-major {rows}x{cols} {dt} matrix with "
                                      f"leading dimension {ld} at this pointer, but the array passed has shape "
                                      f"{arr.shape}, strides {arr.strides}, dtype {arr.dtype}")
            nbytes = (ld * (cols - 1) + rows) * dt.itemsize
            rng = sim._range_of(int(ptr), nbytes)
            buf = (ctypes.c_char * nbytes).from_address(int(ptr))
            return np.ndarray((rows, cols), dt, buffer=buf, strides=(dt.itemsize, ld * dt.itemsize)), rng

        def scalar(ptr, dt):
            dt = np.dtype(dt)
            return np.frombuffer((ctypes.c_char * dt.itemsize).from_address(int(ptr)), dt)[0]

        ops, sides, fills, diags = "NTC", "LR", "LU", "NU"
        dts = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
        rdts = {"c": np.float32, "z": np.float64}
        routines: dict[str, Any] = {}

        for p, dt in dts.items():
            rdt = rdts.get(p, dt)

            def gemm(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc, p=p, dt=dt, _cur=True):
                ra, ca = (m, k) if ta == 0 else (k, m)
                rb, cbb = (k, n) if tb == 0 else (n, k)
                A, ra_ = view(a, ra, ca, lda, dt, "A")
                B, rb_ = view(b, rb, cbb, ldb, dt, "B")
                C, rc_ = view(c, m, n, ldc, dt, "C")
                run(h, p + "gemm", [ra_, rb_, rc_], [rc_], _cur)
                _openblas.gemm(scalar(al, dt), A, B, scalar(be, dt), C, ops[ta], ops[tb])

            def symm(h, side, uplo, m, n, al, a, lda, b, ldb, be, c, ldc, p=p, dt=dt, name="symm", _cur=True):
                ka = m if side == 0 else n
                A, ra_ = view(a, ka, ka, lda, dt, "A")
                B, rb_ = view(b, m, n, ldb, dt, "B")
                C, rc_ = view(c, m, n, ldc, dt, "C")
                run(h, p + name, [ra_, rb_, rc_], [rc_], _cur)
                getattr(_openblas, name)(scalar(al, dt), A, B, scalar(be, dt), C, sides[side], fills[uplo])

            def syrk(h, uplo, t, n, k, al, a, lda, be, c, ldc, p=p, dt=dt, sdt=dt, name="syrk", _cur=True):
                ra, ca = (n, k) if t == 0 else (k, n)
                A, ra_ = view(a, ra, ca, lda, dt, "A")
                C, rc_ = view(c, n, n, ldc, dt, "C")
                run(h, p + name, [ra_, rc_], [rc_], _cur)
                getattr(_openblas, name)(scalar(al, sdt), A, scalar(be, sdt), C, fills[uplo], ops[t])

            def syr2k(h, uplo, t, n, k, al, a, lda, b, ldb, be, c, ldc, p=p, dt=dt, bdt=dt, name="syr2k",
                      _cur=True):
                ra, ca = (n, k) if t == 0 else (k, n)
                A, ra_ = view(a, ra, ca, lda, dt, "A")
                B, rb_ = view(b, ra, ca, ldb, dt, "B")
                C, rc_ = view(c, n, n, ldc, dt, "C")
                run(h, p + name, [ra_, rb_, rc_], [rc_], _cur)
                getattr(_openblas, name)(scalar(al, dt), A, B, scalar(be, bdt), C, fills[uplo], ops[t])

            def trmm(h, side, uplo, t, diag, m, n, al, a, lda, b, ldb, c, ldc, p=p, dt=dt, _cur=True):
                if int(c) != int(b) or ldc != ldb:
                    raise AssertionError("tileblas uses cuBLAS's trmm in place (C = B)")
                ka = m if side == 0 else n
                A, ra_ = view(a, ka, ka, lda, dt, "A")
                B, rb_ = view(b, m, n, ldb, dt, "B")
                run(h, p + "trmm", [ra_, rb_], [rb_], _cur)
                _openblas.trmm(scalar(al, dt), A, B, sides[side], fills[uplo], ops[t], diags[diag])

            def trsm(h, side, uplo, t, diag, m, n, al, a, lda, b, ldb, p=p, dt=dt, _cur=True):
                ka = m if side == 0 else n
                A, ra_ = view(a, ka, ka, lda, dt, "A")
                B, rb_ = view(b, m, n, ldb, dt, "B")
                run(h, p + "trsm", [ra_, rb_], [rb_], _cur)
                _openblas.trsm(scalar(al, dt), A, B, sides[side], fills[uplo], ops[t], diags[diag])

            for nm, fn in (("gemm", gemm), ("symm", symm), ("syrk", syrk), ("syr2k", syr2k), ("trmm", trmm),
                           ("trsm", trsm)):
                routines[p + nm] = fn
            if p in "cz":
                routines[p + "hemm"] = lambda *a, _f=symm, **kw: _f(*a, name="hemm", **kw)
                routines[p + "herk"] = lambda *a, _f=syrk, _r=rdt, **kw: _f(*a, sdt=_r, name="herk", **kw)
                routines[p + "her2k"] = lambda *a, _f=syr2k, _r=rdt, **kw: _f(*a, bdt=_r, name="her2k", **kw)
        for name, fn in routines.items():
            setattr(cb, name, fn)
        cb._routines = routines
        return cb


def c_library(sim: Sim, names) -> Any:
    """A stand-in cuBLAS C library with the symbols ``cublas<T><routine>_v2`` of ``names`` (calls on the
    stream the handle is bound to: no CuPy ``_setStream``)."""
    lib = types.SimpleNamespace()
    for name in names:
        fn = sim.cublas._routines[name]
        setattr(lib, f"cublas{name[0].upper()}{name[1:]}_v2",
                lambda *a, _f=fn: (_f(*a, _cur=False), 0)[1])
    return lib


def install(monkeypatch, devices: int = 2, **kw) -> Sim:
    """Put a new stand-in in ``sys.modules`` for the test (undone by ``monkeypatch``)."""
    global _SIM
    sim = Sim(devices, **kw)
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.cublas = sim.cublas
    mods = {"cupy": sim.cp, "cupyx": sim.cupyx, "cupy_backends": types.ModuleType("cupy_backends"),
            "cupy_backends.cuda": types.ModuleType("cupy_backends.cuda"), "cupy_backends.cuda.libs": libs,
            "cupy_backends.cuda.libs.cublas": sim.cublas}
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(sys.modules[__name__], "_SIM", sim)
    return sim
