"""tileblas.Matrix: operators against NumPy, lazy views, NumPy operands on either side."""

from __future__ import annotations

import numpy as np
import pytest

import tileblas
from tileblas import asyncapi as aa
from tileblas.devices import host_devices


@pytest.fixture(scope="module")
def ex():
    e = aa.Executor(host_devices(2))
    yield e
    e.close()


def M(x, ex):
    return tileblas.Matrix(x, executor=ex)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex64, np.complex128])
def test_operators_match_numpy(ex, dt):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 4)).astype(dt)
    b = rng.standard_normal((4, 6)).astype(dt)
    if np.dtype(dt).kind == "c":
        a = a + 1j * rng.standard_normal((5, 4)).astype(dt)
    A, B = M(a, ex), M(b, ex)
    rt = 1e-4 if np.dtype(dt).itemsize <= 8 and dt != np.complex128 else 1e-12
    c = A @ B
    assert isinstance(c, tileblas.Matrix) and c.shape == (5, 6) and c.dtype == np.dtype(dt)
    np.testing.assert_allclose(np.asarray(c), a @ b, rtol=rt, atol=rt)
    np.testing.assert_allclose((2 * A.T).T.get(), 2 * a, rtol=rt)
    np.testing.assert_allclose((A.H @ A).get(), a.conj().T @ a, rtol=rt, atol=rt * 10)
    np.testing.assert_allclose((A.T @ A).get(), a.T @ a, rtol=rt, atol=rt * 10)
    np.testing.assert_allclose((A @ A.H).get(), a @ a.conj().T, rtol=rt, atol=rt * 10)
    np.testing.assert_allclose((A + A).get(), 2 * a, rtol=rt)
    np.testing.assert_allclose((A - 3 * A).get(), -2 * a, rtol=rt)
    np.testing.assert_allclose((A.T - A.H).get(), a.T - a.conj().T, rtol=rt, atol=rt)
    np.testing.assert_allclose((-A).get(), -a)
    np.testing.assert_allclose((A / 2).get(), a / 2, rtol=rt)
    np.testing.assert_allclose(A.read().result(10), a)


def test_numpy_on_either_side(ex):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    A = M(a, ex)
    for got, ref in [(A @ b, a @ b), (b @ A, b @ a), (A + b, a + b), (b + A, b + a), (b - A, a * 0 + b - a),
                     (A - b, a - b), (b @ A.T, b @ a.T), (np.float32(2) * A, 2 * a)]:
        assert isinstance(got, tileblas.Matrix)
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)
    # mixed precision promotes like NumPy
    c = A @ b.astype(np.float32)
    assert c.dtype == np.float64
    f = M(a.astype(np.float32), ex) @ M(b.astype(np.complex64), ex)
    assert f.dtype == np.complex64
    np.testing.assert_allclose(f.get(), a @ b, rtol=1e-5)
    # vectors: gemv and dot
    x = rng.standard_normal(3)
    np.testing.assert_allclose((A @ x).get(), a @ x, rtol=1e-12)
    np.testing.assert_allclose((x @ A).get(), x @ a, rtol=1e-12)
    np.testing.assert_allclose((x @ A.T).get(), x @ a.T, rtol=1e-12)
    assert M(x, ex) @ M(x, ex) == pytest.approx(x @ x)
    with pytest.raises(ValueError, match="do not match"):
        A @ np.ones((4, 2))
    with pytest.raises(TypeError):
        A * np.ones((3, 3))  # element-wise products are not offered
    with pytest.raises(TypeError):
        A @ "x"


def test_views_are_lazy_flags(ex):
    a = np.arange(6.0).reshape(2, 3)
    A = M(a, ex)
    assert A.T.handle is A.handle and (2 * A.T).handle is A.handle  # no copy, no call
    n_before = ex.stats()["submitted"]
    C = (2 * A.T) @ A
    assert ex.stats()["submitted"] == n_before + 1  # exactly one call: a GEMM with transa and alpha
    np.testing.assert_allclose(C.get(), 2 * a.T @ a)
    assert A.T.shape == (3, 2) and A.T.T.shape == (2, 3)


def test_outputs_lazily_allocated_and_async(ex):
    a = np.ones((50, 50))
    A = M(a, ex)
    C = A @ A
    assert C.handle._host is None or C.done()  # nothing allocated before the call writes it
    fut = C.read()
    np.testing.assert_allclose(fut.result(10), a @ a)
    assert C.done() and "Matrix" in repr(C)
    with C:
        pass
    with pytest.raises(ValueError, match="deleted"):
        C.get()


def test_default_executor_and_lazy_names():
    assert tileblas.Matrix is aa.Matrix and tileblas.MatrixHandle is aa.MatrixHandle
    m = tileblas.Matrix([[1, 2], [3, 4]])
    assert m.dtype == np.float64
    np.testing.assert_allclose((m @ m).get(), np.array([[7.0, 10], [15, 22]]))
    with pytest.raises(TypeError, match="dtype"):
        tileblas.Matrix(np.zeros(2, dtype="U1"))
