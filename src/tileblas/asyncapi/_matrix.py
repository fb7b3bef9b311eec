"""``tileblas.Matrix``: operators over asynchronous handles (the paper's MATLAB class, in Python).

What it owns: the Matrix value type.  A Matrix is a *view* of a handle: (handle, op, scale) where op is
"N", "T" (``.T``) or "C" (``.H``) and scale a scalar from ``*``/unary ``-``.  Views cost nothing; they are
folded into the flags and alpha of the next call (``(2*a.T) @ b`` is one GEMM with transa="T", alpha=2) and
materialised only when something needs the values (``get``, ``+``, ``np.asarray``).  ``@``, ``+`` and
``-`` return at once: the result is a Matrix on a new output handle (allocated when the call first writes
it) whose value is being computed; ``get()`` waits, ``read()`` returns a future, ``done()`` checks.

NumPy arrays work on either side: ``__array_ufunc__ = None`` makes NumPy's binary operators defer to
Matrix's reflected operators, and the array is copied into a handle.
What it must not touch: scheduling (everything goes through the call functions and Executor.submit).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from tileblas.asyncapi import _calls
from tileblas.asyncapi._executor import Executor, get_executor
from tileblas.asyncapi._futures import AsyncFuture
from tileblas.asyncapi._handles import MatrixHandle

__all__ = ["Matrix"]

_FLOATS = (np.float32, np.float64, np.complex64, np.complex128)


def _op_apply(x: np.ndarray, op: str) -> np.ndarray:
    if x.ndim < 2 or op == "N":
        return np.conj(x) if (op == "C" and x.ndim < 2) else x
    return x.T if op == "T" else x.conj().T


class Matrix:
    """An asynchronous matrix (or vector): operators return at once, values are computed in the background.

    Parameters
    ----------
    data : array_like or MatrixHandle
        A 1-D or 2-D array (copied unless ``copy=False``, see :class:`MatrixHandle` for the ownership
        rules) or an existing handle.
    dtype : dtype, optional
        float32, float64, complex64 or complex128 (default: the array's, integers become float64).
    copy : bool
        Copy ``data`` (default) or borrow it.
    executor : Executor, optional
        Where calls run (default: :func:`tileblas.asyncapi.get_executor`).

    Examples
    --------
    >>> import numpy as np, tileblas
    >>> a = tileblas.Matrix(np.eye(3)); b = tileblas.Matrix(np.ones((3, 3)))
    >>> c = 2 * a @ b.T - b          # returns at once
    >>> np.asarray(c)[0, 0]          # waits for the result
    1.0
    """

    __array_ufunc__ = None  # NumPy binary operators return NotImplemented -> our reflected operators
    __array_priority__ = 1000

    def __init__(self, data: Any, dtype: Any = None, *, copy: bool = True, executor: Executor | None = None) -> None:
        if isinstance(data, Matrix):
            self._h, self._op, self._scale = data._h, data._op, data._scale
            return
        if isinstance(data, MatrixHandle):
            if dtype is not None and np.dtype(dtype) != data.dtype:
                raise TypeError(f"dtype {np.dtype(dtype)} does not match the handle's dtype {data.dtype}")
            self._h, self._op, self._scale = data, "N", 1
            return
        ex = executor if executor is not None else get_executor()
        arr = data if isinstance(data, np.ndarray) else np.asarray(data)
        dt = np.dtype(dtype) if dtype is not None else arr.dtype
        if dt.type not in _FLOATS:
            if dtype is None and (dt.kind in "biu"):
                dt = np.dtype(np.float64)
            else:
                raise TypeError(f"dtype must be float32, float64, complex64 or complex128; got {dt}")
        if arr.dtype != dt:
            if not copy:
                raise ValueError(f"copy=False needs an array of dtype {dt}; got {arr.dtype}")
            arr = arr.astype(dt)
        self._h = ex.handle(arr, copy=copy)
        self._op = "N"
        self._scale: Any = 1

    @classmethod
    def _view(cls, h: MatrixHandle, op: str = "N", scale: Any = 1) -> "Matrix":
        m = cls.__new__(cls)
        m._h, m._op, m._scale = h, op, scale
        return m

    @classmethod
    def empty(cls, shape: Any, dtype: Any = np.float64, executor: Executor | None = None) -> "Matrix":
        """A Matrix whose storage is allocated when a call first writes it (reads as zeros before)."""
        ex = executor if executor is not None else get_executor()
        return cls._view(ex.empty(shape, dtype))

    # ------------------------------------------------------------------ attributes
    @property
    def handle(self) -> MatrixHandle:
        """The handle this Matrix views (its op and scale are not applied)."""
        return self._h

    @property
    def dtype(self) -> np.dtype:
        return self._h.dtype

    @property
    def ndim(self) -> int:
        return self._h.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        s = self._h.shape
        return (s[1], s[0]) if (len(s) == 2 and self._op != "N") else s

    @property
    def T(self) -> "Matrix":
        """Transpose (a lazy view: the next GEMM gets a transpose flag, nothing is copied)."""
        if self.ndim < 2:
            return self
        op = {"N": "T", "T": "N", "C": "R"}[self._op]
        if op == "R":  # conj without transpose: no BLAS flag, materialise the conjugate
            return Matrix._view(self._conj_copy(), "N", self._scale)
        return Matrix._view(self._h, op, self._scale)

    @property
    def H(self) -> "Matrix":
        """Conjugate transpose (lazy; for real dtypes the same as ``.T``)."""
        if self.dtype.kind != "c":
            return self.T
        scale = np.conj(self._scale)
        if self.ndim < 2:
            return Matrix._view(self._conj_copy(), "N", scale)
        op = {"N": "C", "C": "N", "T": "R"}[self._op]
        if op == "R":
            return Matrix._view(self._conj_copy(), "N", scale)
        return Matrix._view(self._h, op, scale)

    def _conj_copy(self) -> MatrixHandle:
        """A new handle holding conj(handle) (no transpose), computed asynchronously."""
        src = self._h
        out = src.executor.empty(src.shape, src.dtype)

        def run(dev: Any) -> MatrixHandle:
            np.conjugate(src.acquire(dev, "r"), out=out.acquire(dev, "w"))
            return out

        src.executor.submit("conj", run, (src,), (out,), float(np.prod(src.shape)), host_only=True)
        return out

    # ------------------------------------------------------------------ values
    def _materialize(self, dtype: np.dtype | None = None) -> MatrixHandle:
        """A handle holding exactly this Matrix's value (the handle itself when the view is trivial)."""
        dt = self.dtype if dtype is None else np.dtype(dtype)
        if self._op == "N" and self._scale == 1 and dt == self.dtype:
            return self._h
        src, op, scale = self._h, self._op, self._scale
        out = src.executor.empty(self.shape, dt)
        if dt.kind != "c" and isinstance(scale, complex):
            scale = scale.real

        def run(dev: Any) -> MatrixHandle:
            x = _op_apply(src.acquire(dev, "r"), op)
            o = out.acquire(dev, "w")
            if scale == 1:
                o[...] = x
            else:
                np.multiply(x, scale, out=o, casting="unsafe")
            return out

        src.executor.submit("materialize", run, (src,), (out,), float(np.prod(self.shape)), host_only=True)
        return out

    def read(self) -> AsyncFuture:
        """A future of the value as a host array (asynchronous read-back)."""
        return self._materialize().read()

    def get(self, timeout: float | None = None) -> np.ndarray:
        """Wait for the value and return it as a host array."""
        return self._materialize().get(timeout)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.get()
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def done(self) -> bool:
        """True when no call writing this Matrix's handle is still in flight (never blocks)."""
        w = self._h.last_writer
        return w is None or w.future.done()

    def wait(self, timeout: float | None = None) -> "Matrix":
        """Wait for the calls writing this Matrix; re-raises their error.  Returns self."""
        w = self._h.last_writer
        if w is not None:
            w.future.result(timeout)
        return self

    def delete(self) -> AsyncFuture:
        """Release the underlying handle once its calls finished (other views of it become unusable)."""
        return self._h.delete()

    def __enter__(self) -> "Matrix":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    # ------------------------------------------------------------------ operators
    def _coerce(self, other: Any) -> "Matrix | None":
        if isinstance(other, Matrix):
            return other
        if isinstance(other, (np.ndarray, list, tuple)):
            arr = np.asarray(other)
            dt = np.result_type(arr.dtype, self.dtype)
            if dt.type not in _FLOATS:
                dt = np.dtype(np.float64)
            return Matrix(arr, dtype=dt, executor=self._h.executor)
        return None

    def _common(self, other: "Matrix") -> tuple["Matrix", "Matrix", np.dtype]:
        dt = np.result_type(self.dtype, other.dtype)
        a = self if self.dtype == dt else Matrix._view(self._materialize(dt))
        b = other if other.dtype == dt else Matrix._view(other._materialize(dt))
        return a, b, dt

    def __matmul__(self, other: Any) -> Any:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return _matmul(self, o)

    def __rmatmul__(self, other: Any) -> Any:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return _matmul(o, self)

    def __mul__(self, other: Any) -> "Matrix":
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            if self.dtype.kind != "c" and isinstance(other, complex):
                raise TypeError(f"cannot scale a {self.dtype} Matrix by the complex number {other!r}")
            return Matrix._view(self._h, self._op, self._scale * other)
        return NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> "Matrix":
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return self * (1 / other)
        return NotImplemented

    def __neg__(self) -> "Matrix":
        return Matrix._view(self._h, self._op, -self._scale)

    def __pos__(self) -> "Matrix":
        return self

    def __add__(self, other: Any) -> Any:
        o = self._coerce(other)
        return NotImplemented if o is None else _axpby(self, o, 1)

    def __radd__(self, other: Any) -> Any:
        o = self._coerce(other)
        return NotImplemented if o is None else _axpby(o, self, 1)

    def __sub__(self, other: Any) -> Any:
        o = self._coerce(other)
        return NotImplemented if o is None else _axpby(self, o, -1)

    def __rsub__(self, other: Any) -> Any:
        o = self._coerce(other)
        return NotImplemented if o is None else _axpby(o, self, -1)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        state = "ready" if self.done() else "computing"
        view = "" if self._op == "N" else {"T": ".T", "C": ".H"}[self._op]
        scale = "" if self._scale == 1 else f" scaled by {self._scale}"
        return f"<tileblas.Matrix{view} shape={self.shape} dtype={self.dtype}{scale} {state}>"


def _matmul(a: Matrix, b: Matrix) -> Any:
    a, b, dt = a._common(b)
    alpha = a._scale * b._scale
    if dt.kind != "c" and isinstance(alpha, complex):
        alpha = alpha.real
    ex = a._h.executor
    if a.ndim == 2 and b.ndim == 2:
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match")
        c = ex.empty((a.shape[0], b.shape[1]), dt)
        _calls.gemm(alpha, a._h, b._h, 0.0, c, a._op, b._op)
        return Matrix._view(c)
    if a.ndim == 2 and b.ndim == 1:
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match")
        bh = b._materialize() if b._op != "N" else b._h
        y = ex.empty((a.shape[0],), dt)
        _calls.gemv(alpha, a._h, bh, 0.0, y, a._op)
        return Matrix._view(y)
    if a.ndim == 1 and b.ndim == 2:  # x @ op(B) = op(B)^T x
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match")
        ah = a._materialize() if a._op != "N" else a._h
        flip = {"N": "T", "T": "N", "C": None}[b._op]
        bh, op = (b._h, flip) if flip is not None else (Matrix._view(b._h, "C")._materialize(), "T")
        y = ex.empty((b.shape[1],), dt)
        _calls.gemv(alpha, bh, ah, 0.0, y, op)
        return Matrix._view(y)
    if a.shape != b.shape:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match")
    return _calls.dot(a._materialize(), b._materialize()).result()


def _axpby(a: Matrix, b: Matrix, sign: int) -> Matrix:
    """a + sign*b into a new handle, asynchronously."""
    a, b, dt = a._common(b)
    if a.shape != b.shape:
        raise ValueError(f"shapes {a.shape} and {b.shape} do not match for {'+' if sign > 0 else '-'}")
    ex = a._h.executor
    if a._op == "N" and b._op == "N":  # BLAS: out := sa*A; out += sign*sb*B
        out = ex.empty(a.shape, dt)
        _calls.copy(a._h, out)
        if a._scale != 1:
            _calls.scal(a._scale if dt.kind == "c" else np.real(a._scale), out)
        sb = sign * b._scale
        _calls.axpy(sb if dt.kind == "c" else np.real(sb), b._h, out)
        return Matrix._view(out)
    ha, hb = a._h, b._h
    oa, ob, sa, sb = a._op, b._op, a._scale, sign * b._scale
    out = ex.empty(a.shape, dt)

    def run(dev: Any) -> MatrixHandle:
        A, B = _op_apply(ha.acquire(dev, "r"), oa), _op_apply(hb.acquire(dev, "r"), ob)
        o = out.acquire(dev, "w")
        np.multiply(A, sa, out=o, casting="unsafe")
        o += np.multiply(B, sb) if sb != 1 else B
        return out

    reads = (ha,) if ha is hb else (ha, hb)
    ex.submit("add", run, reads, (out,), 2.0 * float(np.prod(a.shape)), host_only=True)
    return Matrix._view(out)
