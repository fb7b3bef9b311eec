"""64-bit BLAS integers (ILP64): sizes, leading dimensions and increments over 32 bits.

Where scipy-openblas64 is installed (``tileblas[ilp64]``, part of ``[all]``), a call whose integer argument
does not fit 32 bits runs on the ILP64 twin of the same routine, and ``get_blas_funcs(..., ilp64=True)``
hands out routines whose every native call does.  The cheap tests reach 64-bit integers through
increments (one element read at a stride over 2**31); the tests marked ``bigmem`` use operands of more than
2**31 elements (9-17 GB each) and run only with ``TILEBLAS_BIGMEM=1``.
"""

from __future__ import annotations

import gc
import importlib.util
import os

import numpy as np
import pytest

import tileblas.blas as tb
from tileblas.kernels import _native, _openblas, _threadpool

pytestmark = pytest.mark.skipif(not _openblas.has_ilp64(), reason="scipy-openblas64 (tileblas[ilp64]) not installed")

HUGE = 2**31 + 5  # an increment over 32 bits; with n = 1 only element 0 is touched
EPS = {np.float32: np.finfo(np.float32).eps, np.float64: np.finfo(np.float64).eps}


def test_the_flag_follows_the_wheel():
    assert tb.HAS_ILP64 is (importlib.util.find_spec("scipy_openblas64") is not None
                            and os.environ.get("TILEBLAS_ILP64", "1") not in ("0", "false", "no", "off"))
    assert _openblas.int_limit() == 2**63 - 1
    lib = _openblas.get_library(1)
    twin = lib.twin()
    assert twin is not None and twin.ilp64 and twin.threads == 1 and twin.twin() is twin
    assert "ilp64=True" in repr(twin)
    assert twin.config().startswith("OpenBLAS")


CALLS = [  # (routine, args, kwargs, what the 32-bit call of n = 1 element gives)
    ("dscal", (2.0, np.arange(1.0, 6.0)), dict(n=1, incx=HUGE), lambda r: r[0] == 2.0 and r[1] == 2.0),
    ("daxpy", (np.arange(1.0, 6.0), np.ones(5)), dict(n=1, incx=HUGE, incy=HUGE, a=3.0),
     lambda r: list(r) == [4.0, 1.0, 1.0, 1.0, 1.0]),
    ("ddot", (np.arange(2.0, 7.0), np.arange(3.0, 8.0)), dict(n=1, incx=HUGE, incy=-HUGE), lambda r: r == 6.0),
    ("zdotc", (np.array([1 + 2j, 5j]), np.array([3 - 1j, 1.0])), dict(n=1, incx=HUGE, incy=HUGE),
     lambda r: r == np.conj(1 + 2j) * (3 - 1j)),
    ("dnrm2", (np.array([3.0, 4.0, 12.0]),), dict(n=1, incx=HUGE), lambda r: r == 3.0),
    ("sasum", (np.array([-3.0, 4.0], np.float32),), dict(n=1, incx=HUGE), lambda r: r == 3.0),
    ("idamax", (np.array([-3.0, 4.0]),), dict(n=1, incx=HUGE), lambda r: r == 0),
    ("dcopy", (np.arange(1.0, 4.0), np.zeros(3)), dict(n=1, incx=HUGE, incy=HUGE), lambda r: list(r) == [1, 0, 0]),
    ("dgemv", (2.0, np.full((3, 1), 5.0), np.array([7.0, 1.0])), dict(incx=HUGE),
     lambda r: list(r) == [70.0, 70.0, 70.0]),
    ("cgemv", (1.0, np.full((2, 1), 1j, np.complex64), np.array([2.0, 1.0], np.complex64)), dict(incx=HUGE),
     lambda r: list(r) == [2j, 2j]),
    ("dgemv", (1.0, np.array([[1.0, 2.0]]), np.array([3.0, 4.0])), dict(beta=1.0, y=np.array([5.0, 7.0]), incy=HUGE),
     lambda r: list(r) == [16.0, 7.0]),
]


@pytest.mark.parametrize("name,args,kwargs,ok", CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CALLS)])
def test_an_increment_over_32_bits_runs_on_the_ilp64_library(name, args, kwargs, ok):
    before = _native.wide_calls()
    r = getattr(tb, name)(*args, **kwargs)
    assert ok(r), r
    assert _native.wide_calls() == before + 1  # exactly this call moved to the ILP64 twin


def test_the_common_call_stays_on_the_32_bit_library():
    x = np.arange(1.0, 1001.0)
    a = np.random.default_rng(0).random((64, 64))
    before = _native.wide_calls()
    tb.ddot(x, x, n=1000, incx=1)
    tb.dnrm2(x, offx=3)
    tb.dgemv(1.0, a, x[:64])
    tb.dgemm(1.0, a, a)
    assert _native.wide_calls() == before


def test_sizes_over_64_bits_are_refused_by_name():
    with pytest.raises(OverflowError, match=r"incx is 18446744073709551616, above 9223372036854775807, the "
                                            r"largest value a 64-bit BLAS integer holds"):
        tb.dscal(2.0, np.ones(3), n=1, incx=2**64)


def test_turned_off_the_32_bit_error_comes_back_and_names_the_wheel():
    was = _openblas.set_ilp64(False)
    try:
        assert _openblas.int_limit() == 2**31 - 1 and not _openblas.has_ilp64()
        x = np.arange(1.0, 6.0)
        with pytest.raises(OverflowError, match=r"incx is 2147483653, above 2147483647.*tileblas\[ilp64\]"):
            tb.dscal(2.0, x, n=1, incx=HUGE)
        assert x[0] == 1.0  # nothing was written
        with pytest.raises(RuntimeError, match="ILP64"):
            tb.get_blas_funcs("dot", ilp64=True)
    finally:
        _openblas.set_ilp64(was)
    assert tb.dscal(2.0, np.arange(1.0, 6.0), n=1, incx=HUGE)[0] == 2.0  # and on again


FAMILIES = ["axpy", "dot", "nrm2", "scal", "gemv", "ger", "symv", "trmv", "trsv", "gemm", "symm", "syrk",
            "trmm", "trsm"]


@pytest.mark.parametrize("prefix", "sd")
def test_get_blas_funcs_ilp64_runs_every_call_on_the_ilp64_library(prefix):
    rng = np.random.default_rng(3)
    dt = np.dtype({"s": np.float32, "d": np.float64}[prefix])
    n = 24
    a = rng.random((n, n)).astype(dt) + n * np.eye(n, dtype=dt)
    x, y = rng.random(n).astype(dt), rng.random(n).astype(dt)
    f64 = tb.get_blas_funcs(FAMILIES, dtype=dt, ilp64=True)
    f32 = tb.get_blas_funcs(FAMILIES, dtype=dt)
    assert all(f.module_name == "fblas_64" and f.int_dtype == np.int64 for f in f64)
    assert all(f.module_name == "fblas" and f.int_dtype == np.intc for f in f32)
    assert tb.get_blas_funcs("gemm", dtype=dt, ilp64="preferred").module_name == "fblas_64"
    args = {"axpy": (x, y.copy()), "dot": (x, y), "nrm2": (x,), "scal": (2.0, x.copy()), "gemv": (1.0, a, x),
            "ger": (1.0, x, y, 1, 1, a.copy(order="F")), "symv": (1.0, a, x), "trmv": (a, x), "trsv": (a, x),
            "gemm": (1.0, a, a.T), "symm": (1.0, a, a), "syrk": (1.0, a), "trmm": (1.0, a, a), "trsm": (1.0, a, a)}
    eps = EPS[dt.type]
    for fam, g64, g32 in zip(FAMILIES, f64, f32):
        before = _native.wide_calls()
        r64 = g64(*args[fam])
        assert _native.wide_calls() > before, fam  # ran on the ILP64 library
        mid = _native.wide_calls()
        r32 = g32(*args[fam])
        assert _native.wide_calls() == mid, fam  # the plain routine did not
        tol = 8 * n * eps * max(1.0, float(np.max(np.abs(r32))))
        np.testing.assert_allclose(r64, r32, rtol=0, atol=tol, err_msg=fam)


def test_the_ilp64_library_follows_the_thread_limit():
    lib = _openblas.get_library(2)
    twin = lib.twin()
    assert twin is not None and twin.threads == 2
    try:
        _threadpool.set_limit(1)
        assert twin.num_threads() == 1 and lib.num_threads() == 1
    finally:
        _threadpool.set_limit(None)
    assert twin.num_threads() == lib.num_threads() == 2


# ---------------------------------------------------------------------------------------------------
# operands of more than 2**31 elements (run with TILEBLAS_BIGMEM=1; 9-17 GB of memory each)
# ---------------------------------------------------------------------------------------------------

def _available_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) for line in f}
        return info["MemAvailable"] / 2**20
    except (OSError, KeyError, ValueError):
        return 0.0


def _bigmem(gib: float):
    return pytest.mark.skipif(os.environ.get("TILEBLAS_BIGMEM") != "1" or _available_gib() < gib,
                              reason=f"needs TILEBLAS_BIGMEM=1 and {gib:.0f} GiB of free memory")


def _fill(shape, dtype, seed):
    """A large array filled block by block (values in [-1, 1))."""
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    rng = np.random.default_rng(seed)
    step = 1 << 26
    for i in range(0, flat.size, step):
        flat[i:i + step] = rng.random(min(step, flat.size - i), dtype=np.float32 if dtype == np.float32
                                      else np.float64) * 2 - 1
    return out


@pytest.mark.bigmem
@_bigmem(18.5)
def test_dgemv_with_more_than_2_31_elements_in_a():
    n = 46341  # n * n = 2,147,488,281 > 2**31
    a = _fill((n, n), np.float64, 1)
    assert a.size > 2**31
    x = np.random.default_rng(2).random(n) - 0.5
    y = tb.dgemv(1.0, a, x)
    ref = np.concatenate([a[i:i + 4096] @ x for i in range(0, n, 4096)])  # blocked NumPy reference
    tol = 4 * n * EPS[np.float64] * (np.abs(a[:64]).max() * np.abs(x).sum())
    assert np.max(np.abs(y - ref)) <= tol
    f = tb.get_blas_funcs("gemv", (a,), ilp64=True)
    before = _native.wide_calls()
    yt = f(1.0, a, x, trans=1)  # the same operand through the ILP64 library, transposed
    assert _native.wide_calls() == before + 1
    reft = np.concatenate([a[:, j:j + 4096].T @ x for j in range(0, n, 4096)])
    assert np.max(np.abs(yt - reft)) <= tol
    del a
    gc.collect()


@pytest.mark.bigmem
@_bigmem(18.5)
def test_sgemv_and_sgemm_with_a_dimension_over_2_31():
    """k = 2**31 + 64: the dimension itself needs a 64-bit BLAS integer (a 32-bit one would read k mod
    2**32 = 64 elements).  x is +1 / -1 in periods of 128 (every strided or blocked partial sum a BLAS
    kernel forms stays below 128 in magnitude, so float32 sums it exactly) and 2 on the last 64 elements:
    a . x = 128 exactly; the first 64 elements alone give 64."""
    k = 2**31 + 64
    a = np.ones((1, k), np.float32)
    x = np.empty(k, np.float32)
    period = np.where(np.arange(128) < 64, 1.0, -1.0).astype(np.float32)
    step = 128 << 19
    for i in range(0, 2**31, step):
        x[i:i + step].reshape(-1, 128)[:] = period
    x[2**31:] = 2.0
    ref = sum(float(np.dot(a[0, i:i + step].astype(np.float64), x[i:i + step].astype(np.float64)))
              for i in range(0, k, step))  # blocked NumPy reference, in float64
    assert ref == 128.0
    before = _native.wide_calls()
    y = tb.sgemv(1.0, a, x)
    c = tb.sgemm(1.0, a, x.reshape(k, 1))
    assert _native.wide_calls() >= before + 1
    # exact: every partial sum is an integer below 2**24 (tolerance 0 follows from the error bound)
    assert float(y[0]) == ref and float(c[0, 0]) == ref, (float(y[0]), float(c[0, 0]))
    del a, x
    gc.collect()


@pytest.mark.bigmem
@_bigmem(11)
def test_sgemm_with_a_50000_square_operand():
    n, r = 50000, 64  # a: 2.5e9 elements, 10 GB in float32
    a = _fill((n, n), np.float32, 5)
    b = np.random.default_rng(6).random((n, r), dtype=np.float32) - 0.5
    c = tb.sgemm(1.0, a, b)
    rows = np.random.default_rng(7).choice(n, 256, replace=False)
    ref = a[rows].astype(np.float64) @ b.astype(np.float64)
    tol = 2 * n * EPS[np.float32] * (np.abs(a[rows]).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert np.all(np.abs(c[rows] - ref) <= tol)
    del a
    gc.collect()
