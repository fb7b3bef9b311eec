"""100,000 tiny calls: no leak (allocated blocks, live operations, threads stay bounded), no hang (timeouts)."""

from __future__ import annotations

import gc
import threading
import sys

import numpy as np
import pytest

from tileblas import asyncapi as aa
from tileblas.asyncapi._graph import Op
from tileblas.devices import host_devices


def live_ops() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is Op)


@pytest.mark.parametrize("policy", ["cost", "cost-queued", "demand"])
def test_100k_tiny_calls_no_leak_no_hang(policy):
    total = 100_000 if policy != "demand" else 20_000
    batch = 5_000
    if policy == "demand":
        ex = aa.Executor(policy="demand")
    else:  # "cost": tiny calls run inline when ready; "cost-queued": every call through a worker
        ex = aa.Executor(host_devices(2), inline_below=20e-6 if policy == "cost" else 0.0)
    try:
        threads0 = threading.active_count()
        one = ex.handle(np.ones((1, 1)))
        hs = [ex.handle(np.zeros((1, 1))) for _ in range(4)]
        expected = np.zeros(4)

        def run_batch(start):
            futs = []
            for i in range(start, start + batch):
                k = i % 4
                if i % 7 == 0:
                    futs.append(aa.scal(1.0, hs[k]))
                else:
                    futs.append(aa.axpy(1.0, one, hs[k]))
                    expected[k] += 1
                if i % 1000 == 999:  # read-back and throw-away handles on the way
                    t = ex.handle(np.ones(2))
                    futs.append(aa.nrm2(t))
                    t.delete()
            # the last future of each chain finishing means the whole chain did
            for f in futs[-8:]:
                f.result(timeout=60)
            del futs

        run_batch(0)
        gc.collect()
        blocks0 = sys.getallocatedblocks()  # every live Python allocation: a leak makes it grow
        ops0 = live_ops()
        done = batch
        while done < total:
            run_batch(done)
            done += batch
            assert threading.active_count() <= threads0 + 1
        for h in hs:
            h.wait(timeout=60)
        gc.collect()
        grown = sys.getallocatedblocks() - blocks0
        assert grown < 3_000, f"{grown} more allocated blocks after {total} calls"
        assert live_ops() <= ops0 + 50
        got = np.array([h.get(timeout=60)[0, 0] for h in hs])
        np.testing.assert_array_equal(got, expected)
        assert ex.stats()["submitted"] >= total
    finally:
        ex.close()
    assert threading.active_count() <= threads0 - len(ex.backends) + 1
