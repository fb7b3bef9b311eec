"""The rblas benchmark runs end to end on tiny sizes and reports what it measured."""

from __future__ import annotations

import json
import os

import numpy as np

import tileblas.rblas as rb
from tileblas.rblas import _bench, _examples


def test_bench_tiny(tmp_path):
    res = _bench.run_bench(str(tmp_path), n_calls=2, trials=1, bar_trials=1, fallback_scipy=True,
                           sizes={1: [200], 2: [16], 3: [16]}, bar_sizes={1: 2000, 2: 32, 3: 32},
                           log=lambda s: None)
    data = json.load(open(os.path.join(tmp_path, "rblas_bench.json")))
    rows = data["sweep"]
    assert {r["routine"] for r in rows} == {n for names in _bench.PAPER_ROUTINES.values() for n in names}
    for r in rows:
        if r["mode"] in ("checkpoint", "exact"):
            assert r["rms"] == 0.0, r
        if r["mode"] == "compute" and r["level"] == 1:
            assert r["rms"] < 1e-9 * 4000, r
        if r["mode"] == "checkpoint":
            assert r["extra_bytes"] > 0
        if r["mode"] == "compute":
            assert r["extra_bytes"] == 0
    ex = data["bars"]["exact"]
    assert ex["bit_exact"] == ex["round_trips"] and ex["round_trips"] >= len(rb.PAIRS)
    assert ex["axpy_memory"]["daxpy"]["ratio"] <= 0.5
    assert set(data["bars"]["compute_forward_vs_plain"]) == {"daxpy", "dgemv", "dgemm"}
    assert rb.pending() == []
    assert res["plots"] == [] or all(os.path.exists(p) for p in res["plots"])


def test_cancelling_examples_restore_bitwise_in_exact_mode():
    for name in ("daxpy", "zaxpy", "dgemv", "zgemv", "dger", "zgeru", "dgemm", "zgemm"):
        spec = rb.SPEC_OF[name]
        prefix = name[: len(name) - len(spec.routine)]
        args, kw = _examples.cancelling(spec.routine, prefix, 40, np.random.default_rng(0))
        outs = [v for v in (*args, *kw.values()) if isinstance(v, np.ndarray)]
        before = [o.copy() for o in outs]
        f, r = rb.PAIRS[name]
        f(*args, mode="exact", **kw)
        r(*args, **kw)
        for o, b in zip(outs, before):
            assert np.array_equal(np.ascontiguousarray(o).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)), name
