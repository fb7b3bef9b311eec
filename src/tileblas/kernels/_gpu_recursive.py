"""The recursive TRMM/TRSM on NVIDIA GPUs through CuPy/cuBLAS, and the asynchronous host-data variant.

What this module owns
    * :class:`CupyBackend`: the :class:`tileblas.kernels._recursive.ArrayBackend` for CuPy arrays.  GEMM and the
      leaf TRMM/TRSM call cuBLAS directly (``cupy_backends.cuda.libs.cublas``) on views, reaching
      column-major cuBLAS by transposition flags, as the host kernel layer does (``cupy.cublas.gemm``
      would copy every strided sub-block).  CuPy has no high-level trmm: the leaf calls
      ``cublas<t>trmm`` with C = B (cuBLAS's documented in-place use), from the cuBLAS C library where
      CuPy has no binding for it (CuPy 14 has none; :mod:`tileblas.kernels._cuda`); only if that library
      cannot be found either does the leaf fall back to ``triu``/``tril`` + matmul at leaf size (said once,
      :func:`tileblas.kernels._cuda.note_fallback`).  The calls use CuPy's per-thread cuBLAS handle, bound
      to the backend's stream for the call and given back bound as it was (host_async's streams are
      destroyed when it returns).
    * :func:`gpu_recursive`: the recursion of tileblas.kernels._recursive on device arrays;
      :func:`cublas_native`: cuBLAS's own in-place routine on the whole matrix (the baseline).
    * :func:`host_async` (the paper's Fig. 8): A and B live in host memory.  The recursion's plan says
      which block of A and which column chunk of B each operation reads; a copy stream ships them (via a
      pinned staging buffer) in the order the operations need them, the compute stream waits only for
      the blocks of its next operation, and finished chunks of B go back on a third stream while later
      operations still run.  :func:`host_sync` is the synchronous copy-compute-copy baseline.
    * :func:`async_schedule`: that pipeline as a device-free list of steps (tested on the CPU).

What it must not touch
    CuPy is imported lazily, only here (``import tileblas`` never imports it).  No scheduling policy.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Any, NamedTuple

import numpy as np

from tileblas._dtypes import PREFIX_OF
from tileblas._tuning import Tuning, get_tuning
from tileblas.kernels._openblas import colmajor
from tileblas.kernels._recursive import Leaf, _flip, _norm_trans, _scalar, plan, run_recursive
from tileblas.kernels import _cuda
from tileblas.kernels._cuda import cublas_bindings as _cublas
from tileblas.kernels._cuda import cupy_module as _cupy

__all__ = [
    "CupyBackend",
    "gpu_available",
    "gpu_recursive",
    "gpu_trmm",
    "gpu_trsm",
    "cublas_native",
    "host_sync",
    "host_async",
    "async_schedule",
    "Step",
    "DEFAULT_GPU_STOP",
]

#: Shipped default of the GPU recursion's stopping size (the value in force:
#: ``tileblas.get_tuning().gpu_recursion_stop``).
DEFAULT_GPU_STOP = Tuning().gpu_recursion_stop


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        cp = _cupy()
        return cp.cuda.runtime.getDeviceCount() > 0
    except Exception:  # ImportError, missing driver, ...
        return False


_PREFIX = PREFIX_OF
_OP = {"N": 0, "T": 1, "C": 2}  # CUBLAS_OP_N/T/C
_SWAP_NT = {"N": "T", "T": "N"}


class CupyBackend:
    """CuPy arrays through cuBLAS on ``stream`` (default: CuPy's current stream)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream
        self.cp = _cupy()
        self.cublas = _cublas()

    # -------------------------------------------------------------- helpers
    @contextlib.contextmanager
    def _handle(self) -> Any:
        """CuPy's cuBLAS handle of this thread and device, bound to the backend's stream with host scalars
        for the ``with`` block, then bound to the legacy default stream (never destroyed) with the pointer
        mode it had.

        Not to the stream it had: CuPy binds its handle to the current stream before each of its own calls
        and leaves it there, so the stream found may be one destroyed since (a stream of a closed
        :class:`~tileblas.devices.GPUDevice`, of an earlier ``host_async`` call); binding a handle to it
        fails (``cudaErrorContextIsDestroyed`` from CuPy's capture check) or crashes.  Nor to the current
        stream, which may be a per-call stream about to be destroyed (``host_async``'s)."""
        cb = self.cublas
        h = self.cp.cuda.device.get_cublas_handle()
        stream = self.stream if self.stream is not None else self.cp.cuda.get_current_stream()
        prev_mode = cb.getPointerMode(h)
        cb.setStream(h, stream.ptr)
        cb.setPointerMode(h, cb.CUBLAS_POINTER_MODE_HOST)
        try:
            yield h
        finally:
            cb.setStream(h, 0)
            cb.setPointerMode(h, prev_mode)

    @staticmethod
    def _host_scalar(value: Any, dtype: np.dtype) -> np.ndarray:
        return np.array(value, dtype=dtype)  # kept alive by the caller during the cuBLAS call

    def asfortran(self, x):
        return self.cp.asfortranarray(x)

    def _operand(self, x, trans: str):
        """(array, ld, trans) describing op(x) column-major; copies when no flag can."""
        ld = colmajor(x)
        if ld:
            return x, ld, trans
        ldt = colmajor(x.T)
        if ldt and trans in _SWAP_NT:
            return x.T, ldt, _SWAP_NT[trans]
        f = self.cp.asfortranarray(x)
        return f, max(f.shape[0], 1), trans

    def _on_stream(self) -> Any:
        # copies and elementwise kernels the backend launches go to the same stream as its cuBLAS calls
        return self.stream if self.stream is not None else contextlib.nullcontext()

    # -------------------------------------------------------------- kernels
    def gemm(self, alpha: Any, a: Any, b: Any, beta: Any, c: Any, transa: str, transb: str) -> None:
        with self._on_stream():
            self._gemm(alpha, a, b, beta, c, transa, transb)

    def _gemm(self, alpha, a, b, beta, c, transa, transb) -> None:
        dt = np.dtype(c.dtype)
        transa, transb = _norm_trans(transa, dt), _norm_trans(transb, dt)
        if not colmajor(c) and colmajor(c.T):
            return self._gemm(alpha, b.T, a.T, beta, c.T, transb, transa)
        m, n = c.shape
        k = a.shape[0] if transa != "N" else a.shape[1]
        if m == 0 or n == 0:
            return None
        if k == 0:
            c *= beta
            return None
        cc = c if colmajor(c) else self.cp.asfortranarray(c)
        a_, lda, ta = self._operand(a, transa)
        b_, ldb, tb = self._operand(b, transb)
        al, be = self._host_scalar(alpha, dt), self._host_scalar(beta, dt)
        with self._handle() as h:
            getattr(self.cublas, _PREFIX[dt] + "gemm")(h, _OP[ta], _OP[tb], m, n, k, al.ctypes.data, a_.data.ptr,
                                                        lda, b_.data.ptr, ldb, be.ctypes.data, cc.data.ptr,
                                                        colmajor(cc))
        if cc is not c:
            c[...] = cc
        return None

    def _triangular(self, name, alpha, a, b, side, uplo, transa, diag) -> None:
        dt = np.dtype(b.dtype)
        transa = _norm_trans(transa, dt)
        if not colmajor(b) and colmajor(b.T):
            return self._triangular(name, alpha, a.T, b.T, "R" if side == "L" else "L", _flip(uplo), transa,
                                    diag)
        m, n = b.shape
        if m == 0 or n == 0:
            return None
        bb = b if colmajor(b) else self.cp.asfortranarray(b)
        ld = colmajor(a)
        if ld:
            a_, lda, up, t = a, ld, uplo, transa
        elif colmajor(a.T) and transa in _SWAP_NT:
            a_, lda, up, t = a.T, colmajor(a.T), _flip(uplo), _SWAP_NT[transa]
        else:
            a_ = self.cp.asfortranarray(a)
            lda, up, t = max(a_.shape[0], 1), uplo, transa
        al = self._host_scalar(alpha, dt)
        cb = self.cublas
        args = (cb.CUBLAS_SIDE_LEFT if side == "L" else cb.CUBLAS_SIDE_RIGHT,
                cb.CUBLAS_FILL_MODE_UPPER if up == "U" else cb.CUBLAS_FILL_MODE_LOWER,
                _OP[t], cb.CUBLAS_DIAG_UNIT if diag == "U" else cb.CUBLAS_DIAG_NON_UNIT, m, n, al.ctypes.data,
                a_.data.ptr, lda, bb.data.ptr, colmajor(bb))
        with self._handle() as h:  # the handle first: CuPy has loaded its libcublas by then
            fn = getattr(cb, _PREFIX[dt] + name, None)
            if name == "trsm":
                fn(h, *args)
            elif fn is not None:
                fn(h, *args, bb.data.ptr, colmajor(bb))  # C = B: cuBLAS's in-place TRMM
        if fn is None and name == "trmm":
            _cuda.note_fallback(_PREFIX[dt] + "trmm", "tileblas GPU recursion")
            self._trmm_fallback(alpha, a, bb, side, uplo, transa, diag)
        if bb is not b:
            b[...] = bb
        return None

    def _trmm_fallback(self, alpha, a, b, side, uplo, transa, diag) -> None:
        cp = self.cp
        t = cp.triu(a) if uplo == "U" else cp.tril(a)
        if diag == "U":
            cp.fill_diagonal(t, 1)
        op = {"N": t, "T": t.T, "C": t.conj().T}[transa]
        b[...] = alpha * (op @ b if side == "L" else b @ op)

    def trmm(self, alpha: Any, a: Any, b: Any, side: str, uplo: str, transa: str, diag: str) -> None:
        with self._on_stream():
            self._triangular("trmm", alpha, a, b, side, uplo, transa, diag)

    def trsm(self, alpha: Any, a: Any, b: Any, side: str, uplo: str, transa: str, diag: str) -> None:
        with self._on_stream():
            self._triangular("trsm", alpha, a, b, side, uplo, transa, diag)


def gpu_recursive(kind: str, alpha, a, b, side="L", uplo="U", transa="N", diag="N", stop: int | None = None,
                  stream: Any = None) -> None:
    """The recursive ``kind`` ('trmm' or 'trsm') on CuPy arrays, ``b`` updated in place (inputs trusted)."""
    with stream if stream is not None else contextlib.nullcontext():
        run_recursive(kind, CupyBackend(stream), alpha, a, b, side, uplo, transa, diag,
                      get_tuning().gpu_recursion_stop if stop is None else int(stop))


def gpu_trmm(alpha, a, b, side="L", uplo="U", transa="N", diag="N", stop=None, stream=None) -> None:
    """Recursive in-place TRMM on CuPy arrays (argument order of tileblas.kernels._openblas.trmm)."""
    gpu_recursive("trmm", alpha, a, b, side, uplo, transa, diag, stop, stream)


def gpu_trsm(alpha, a, b, side="L", uplo="U", transa="N", diag="N", stop=None, stream=None) -> None:
    """Recursive in-place TRSM on CuPy arrays (argument order of tileblas.kernels._openblas.trsm)."""
    gpu_recursive("trsm", alpha, a, b, side, uplo, transa, diag, stop, stream)


def cublas_native(kind: str, alpha, a, b, side="L", uplo="U", transa="N", diag="N", stream=None) -> None:
    """cuBLAS's own in-place trmm/trsm on the whole matrix (the baseline)."""
    be = CupyBackend(stream)
    alpha = _scalar(alpha, b.dtype)
    if alpha == 0:
        with be._on_stream():
            b[...] = 0
        return
    (be.trmm if kind == "trmm" else be.trsm)(alpha, a, b, side, uplo, transa, diag)


# ---------------------------------------------------------------------------------------------------
# Host data: synchronous baseline and the asynchronous pipeline
# ---------------------------------------------------------------------------------------------------


def host_sync(kind: str, alpha, a: np.ndarray, b: np.ndarray, side="L", uplo="U", transa="N", diag="N",
              recursive: bool = True, stop: int | None = None) -> None:
    """Copy A and B to the device, compute, copy B back (numpy ``b`` updated in place)."""
    cp = _cupy()
    a_d = cp.asarray(a)
    b_d = cp.asarray(b)
    if recursive:
        gpu_recursive(kind, alpha, a_d, b_d, side, uplo, transa, diag, stop)
    else:
        cublas_native(kind, alpha, a_d, b_d, side, uplo, transa, diag)
    b[...] = cp.asnumpy(b_d)


class Step(NamedTuple):
    """One step of the asynchronous pipeline.

    what: 'put_a' (block key (r0, r1, c0, c1) of A to the device), 'put_b' (column chunk (lo, hi) of B),
    'op' (run ``op`` after the listed puts), 'get_b' (chunk (lo, hi) back to the host, after the op that
    last writes it).
    """

    what: str
    key: tuple
    op: Any = None
    needs: tuple = ()


def async_schedule(ops, n: int) -> list[Step]:
    """The pipeline for a side-'R' plan on n columns: puts in order of first use, gets after last write."""
    leaves = sorted((op.lo, op.hi) for op in ops if type(op) is Leaf)
    starts = [lo for lo, _ in leaves]

    def chunks(lo: int, hi: int) -> list[tuple[int, int]]:
        i = starts.index(lo)
        out = []
        while i < len(leaves) and leaves[i][0] < hi:
            out.append(leaves[i])
            i += 1
        return out

    reads, writes = [], []
    for op in ops:
        if type(op) is Leaf:
            ablk = (op.lo, op.hi, op.lo, op.hi)
            r = w = chunks(op.lo, op.hi)
        else:
            ablk = (op.r0, op.r1, op.c0, op.c1)
            w = chunks(*op.dst)
            r = chunks(*op.src) + w
        reads.append((ablk, r))
        writes.append(w)
    last_write = {}
    for i, w in enumerate(writes):
        for ch in w:
            last_write[ch] = i
    steps: list[Step] = []
    sent_a: set = set()
    sent_b: set = set()
    for i, op in enumerate(ops):
        ablk, r = reads[i]
        needs = []
        if ablk not in sent_a:
            steps.append(Step("put_a", ablk))
            sent_a.add(ablk)
        needs.append(("a", ablk))
        for ch in r:
            if ch not in sent_b:
                steps.append(Step("put_b", ch))
                sent_b.add(ch)
            needs.append(("b", ch))
        steps.append(Step("op", (i,), op, tuple(needs)))
        for ch in writes[i]:
            if last_write[ch] == i:
                steps.append(Step("get_b", ch))
    for ch in leaves:  # chunks no operation writes (cannot happen for a full plan; kept for safety)
        if ch not in last_write:
            if ch not in sent_b:
                steps.append(Step("put_b", ch))
            steps.append(Step("get_b", ch))
    return steps


class _Pinned:
    """A cached page-locked staging buffer (allocating pinned memory is slow; reuse it)."""

    def __init__(self) -> None:
        self._buf: dict[np.dtype, np.ndarray] = {}
        self._lock = threading.Lock()

    def get(self, size: int, dtype: np.dtype) -> np.ndarray:
        import cupyx

        with self._lock:
            buf = self._buf.get(dtype)
            if buf is None or buf.size < size:
                buf = cupyx.empty_pinned((max(size, 1),), dtype=dtype)
                self._buf[dtype] = buf
            return buf


_PINNED = _Pinned()
_ASYNC_LOCK = threading.Lock()  # one pipeline at a time uses the shared staging buffer


def _unpack_after(ev: Any, dst: np.ndarray, src: np.ndarray) -> None:
    ev.synchronize()  # a blocking event: the copy back has landed in the staging
    np.copyto(dst, src)


def host_async(kind: str, alpha, a: np.ndarray, b: np.ndarray, side="L", uplo="U", transa="N", diag="N",
               stop: int | None = None, pack_threads: int | None = None) -> None:
    """Recursive ``kind`` on host arrays with transfers overlapped with the GEMMs (numpy ``b`` in place).

    The problem is first turned into its side-'R' form (B^T := alpha B^T op(A)^T for side 'L') so that
    the chunks of B along the triangular dimension are contiguous column blocks of a Fortran-order
    device array.

    The host side runs beside the copies and kernels too: every block of A and chunk of B is packed into
    the pinned staging by a pool of ``pack_threads`` threads (default: half the cores, 2 to 8;
    :func:`tileblas.kernels._cuda.pack_pool`), all of them submitted in the order the copies need them,
    so the thread that issues the copies only waits for the next one's packing; each finished chunk of B
    is unpacked into ``b`` by the pool as soon as its copy back has landed, while later operations run.
    """
    cp = _cupy()
    dt = np.dtype(b.dtype)
    alpha = _scalar(alpha, dt)
    transa = _norm_trans(transa, dt)
    if b.size == 0:
        return
    if alpha == 0:
        b[...] = 0
        return
    if side == "L":
        a, b, side, uplo = a.T, b.T, "R", _flip(uplo)
    m, n = b.shape
    stop = get_tuning().gpu_recursion_stop if stop is None else int(stop)
    if pack_threads is None:
        import os

        pack_threads = min(max((os.cpu_count() or 2) // 2, 2), 8)
    ops = plan(kind, n, side, uplo, transa, stop)
    steps = async_schedule(ops, n)
    a_keys = [s.key for s in steps if s.what == "put_a"]
    total = sum((k[1] - k[0]) * (k[3] - k[2]) for k in a_keys) + 2 * m * n
    with _ASYNC_LOCK:
        buf = _PINNED.get(total, dt)
        copy_s = cp.cuda.Stream(non_blocking=True)
        comp_s = cp.cuda.Stream(non_blocking=True)
        back_s = cp.cuda.Stream(non_blocking=True)
        backend = CupyBackend(comp_s)
        b_d = cp.empty((m, n), dtype=dt, order="F")
        off = 0
        a_dev, a_stage = {}, {}
        for k in a_keys:
            r, c = k[1] - k[0], k[3] - k[2]
            a_stage[k] = buf[off:off + r * c].reshape((r, c), order="F")
            a_dev[k] = cp.empty((r, c), dtype=dt, order="F")
            off += r * c
        b_in = buf[off:off + m * n].reshape((m, n), order="F")
        off += m * n
        b_out = buf[off:off + m * n].reshape((m, n), order="F")
        events: dict[tuple, Any] = {}
        item = dt.itemsize
        coefs = {"alpha": alpha, "one": 1.0, "minus_one": -1.0}
        pool = _cuda.pack_pool(pack_threads)
        packed: dict[tuple, Any] = {}
        unpacked: list = []
        try:
            for s in steps:  # every packing at once, in the order the copies need them
                if s.what == "put_a":
                    r0, r1, c0, c1 = s.key
                    packed[("a", s.key)] = pool.submit(np.copyto, a_stage[s.key], a[r0:r1, c0:c1])
                elif s.what == "put_b":
                    lo, hi = s.key
                    packed[("b", s.key)] = pool.submit(np.copyto, b_in[:, lo:hi], b[:, lo:hi])
            for s in steps:
                if s.what == "put_a":
                    packed.pop(("a", s.key)).result()
                    dev = a_dev[s.key]
                    dev.data.copy_from_host_async(ctypes.c_void_p(a_stage[s.key].ctypes.data), dev.nbytes, copy_s)
                    ev = cp.cuda.Event(disable_timing=True)
                    ev.record(copy_s)
                    events[("a", s.key)] = ev
                elif s.what == "put_b":
                    lo, hi = s.key
                    packed.pop(("b", s.key)).result()
                    dev = b_d[:, lo:hi]
                    dev.data.copy_from_host_async(ctypes.c_void_p(b_in[:, lo:hi].ctypes.data),
                                                  m * (hi - lo) * item, copy_s)
                    ev = cp.cuda.Event(disable_timing=True)
                    ev.record(copy_s)
                    events[("b", s.key)] = ev
                elif s.what == "op":
                    for need in s.needs:
                        comp_s.wait_event(events[need])
                    op = s.op
                    if type(op) is Leaf:
                        blk = a_dev[(op.lo, op.hi, op.lo, op.hi)]
                        leaf = backend.trmm if kind == "trmm" else backend.trsm
                        leaf(coefs[op.coef], blk, b_d[:, op.lo:op.hi], side, uplo, transa, diag)
                    else:
                        blk = a_dev[(op.r0, op.r1, op.c0, op.c1)]
                        (s0, s1), (d0, d1) = op.src, op.dst
                        backend.gemm(coefs[op.ca], b_d[:, s0:s1], blk, coefs[op.cb], b_d[:, d0:d1], "N", transa)
                else:  # get_b, then its unpacking by the pool once it has landed
                    lo, hi = s.key
                    ev = cp.cuda.Event(disable_timing=True)
                    ev.record(comp_s)
                    back_s.wait_event(ev)
                    b_d[:, lo:hi].data.copy_to_host_async(ctypes.c_void_p(b_out[:, lo:hi].ctypes.data),
                                                          m * (hi - lo) * item, back_s)
                    landed = cp.cuda.Event(block=True, disable_timing=True)
                    landed.record(back_s)
                    unpacked.append(pool.submit(_unpack_after, landed, b[:, lo:hi], b_out[:, lo:hi]))
        finally:
            for f in packed.values():  # an error above: no packing may run on after the call
                f.cancel()
            for f in list(packed.values()) + unpacked:
                if not f.cancelled():
                    f.exception()
            for st in (back_s, comp_s, copy_s):  # blocking events: the host thread sleeps instead of spinning
                done = cp.cuda.Event(block=True, disable_timing=True)
                done.record(st)
                done.synchronize()
        for f in unpacked:
            f.result()
