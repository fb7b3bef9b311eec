"""tileblas' OpenBLAS instances under threadpoolctl: listed by threadpool_info, limited by threadpool_limits."""

import os
import time

import numpy as np
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

from tileblas.kernels import _openblas, _threadpool  # noqa: E402
from tileblas.runtime._runtime import make_devices  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc/self/task")


def _task_ticks() -> dict[int, int]:
    """CPU ticks (user + system) of every thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = int(fields[11]) + int(fields[12])
    return out


def _work_split(lib, n=1024, reps=6):
    """(ticks of the calling thread, ticks of all other threads) spent in ``reps`` dgemm calls of order n."""
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((n, n)))
    b = np.asfortranarray(rng.standard_normal((n, n)))
    c = np.zeros((n, n), order="F")
    _openblas.gemm(1.0, a, b, 0.0, c, lib=lib)  # warm the thread pool
    time.sleep(0.3)  # OpenBLAS threads of earlier calls spin for a while before they park: not this call's work
    me = int(open("/proc/thread-self/stat").read().split()[0])
    before = _task_ticks()
    for _ in range(reps):
        _openblas.gemm(1.0, a, b, 0.0, c, lib=lib)
    after = _task_ticks()
    # error bound of a product: n * eps * |A||B|
    bound = 4 * n * np.finfo(float).eps * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(c - a @ b) <= bound)
    mine = after.get(me, 0) - before.get(me, 0)
    others = sum(t - before.get(tid, 0) for tid, t in after.items() if tid != me)
    return mine, others


def test_info_lists_tileblas():
    assert _threadpool.register()
    infos = [i for i in threadpoolctl.threadpool_info() if i.get("openblas_filepath")]
    assert len(infos) == 1
    info = infos[0]
    assert info["user_api"] == "blas" and info["internal_api"] == "openblas"
    assert info["openblas_filepath"] == _openblas.library_path()
    assert info["num_threads"] == _threadpool.default_threads()
    assert info["version"]


@pytest.mark.skipif(_threadpool.default_threads() < 2, reason="needs 2 cores")
def test_limit_one_runs_dgemm_on_one_thread_and_restores():
    lib = _openblas.get_library(2)
    mine, others = _work_split(lib)
    assert others >= 0.2 * (mine + others), (mine, others)  # outside: OpenBLAS' second thread works
    with threadpoolctl.threadpool_limits(limits=1):
        assert lib.num_threads() == 1
        mine, others = _work_split(lib)
        assert others <= 0.05 * (mine + others), (mine, others)
    assert lib.num_threads() == 2
    mine, others = _work_split(lib)
    assert others >= 0.2 * (mine + others), (mine, others)


def test_nested_limits_restore_and_cap_new_instances_and_default_workers():
    lib = _openblas.get_library(2)
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        assert _threadpool.limit() == 1
        fresh = _openblas.get_library(5)  # created inside the block: limited too
        assert fresh.num_threads() == 1
        assert len(make_devices(None)) == 1
        with threadpoolctl.threadpool_limits(limits=_threadpool.default_threads() + 2):
            assert _threadpool.limit() is None
            assert lib.num_threads() == 2 and fresh.num_threads() == 5
        assert _threadpool.limit() == 1 and lib.num_threads() == 1 and fresh.num_threads() == 1
    assert _threadpool.limit() is None
    assert lib.num_threads() == 2 and fresh.num_threads() == 5
    assert len(make_devices(None)) == _threadpool.default_threads()


def test_bad_limit_is_rejected_and_nothing_changes():
    with pytest.raises(ValueError, match="thread limit.*0"):
        _threadpool.set_limit(0)
    assert _threadpool.limit() is None
