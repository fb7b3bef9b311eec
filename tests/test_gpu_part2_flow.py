"""benchmarks/gpu_part2.sh and bench_gpu_part2.py, the GPU measurements of part 2, on a machine without a
GPU: every step's flow on the CuPy stand-in at tiny sizes (each number made, each result checked, no
spinning host wait inside a timed call), the clean stop of a step whose budget is spent, the predictions
file covering every case the device run times, and each step's predicted cost within its budget."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    name = "bench_gpu_part2"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _no_gpu():
    from tileblas.devices.gpu import gpu_count

    if gpu_count():
        pytest.skip("a GPU is here: run benchmarks/gpu_part2.sh itself")


@pytest.mark.skipif(shutil.which("bash") is None, reason="the steps are run by a bash script")
def test_every_step_runs_its_dry_flow(tmp_path):
    _no_gpu()
    b = _bench()
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable)
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_part2.sh"), "--dry", ",".join(b.STEPS), str(out)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and {"summary.txt", "log.txt", "results.json"} <= set(files), files
    summary = (out / "summary.txt").read_text()
    rows = {m.group(1): m for m in re.finditer(r"^(\w+) +(\d+) +(\d+) +(\S+) +(.*)$", summary, re.M)}
    assert set(b.STEPS) <= set(rows), summary
    assert all(rows[s].group(4) == "0" and rows[s].group(5) == "ok" for s in b.STEPS), summary
    res = json.loads((out / "results.json").read_text())
    assert res["env"]["standin"] and res["env"]["cupy"] == "stand-in"
    for step in b.STEPS:
        sr = res["steps"][step]
        assert "error" not in sr and not sr.get("wrong") and not sr["skipped"], (step, sr)
        planned = b.plan_step(step, tiny=True)
        ids = {row["id"] for row in sr["cases"]}
        assert ids == {c["id"] for c in planned}, step  # every case measured (the kblas pairs too)
        assert all("predicted" in row for row in sr["cases"])
        syncs = sr["standin_syncs"]
        assert syncs["timed_spinning"] == 0 and syncs["blocking"] > 0, (step, syncs)
        if step in ("kblas", "async"):
            assert syncs["spinning"] == 0, (step, syncs)
    case = {r["id"]: r for s in res["steps"].values() for r in s["cases"]}
    for row in res["steps"]["incore"]["cases"]:
        assert row["max_rel_error"] <= 4 * row["n"] * (1.2e-7 if row["dtype"] == "float32" else 2.3e-16)
        assert row["ratio"] == pytest.approx(row["cupy_matmul_s"] / row["tiles_s"])
    ooc = [r for r in res["steps"]["ooc"]["cases"] if r["mode"] in ("cache", "round-robin")]
    for row in ooc:
        assert row["bytes_moved"] >= row["lower_bound"]["compulsory"]  # a lower bound is one
        assert row["tile_memory"] * row["operands_over_memory"] <= 3 * row["n"] ** 2 * 8
        assert row["ratio_vs_incore"] > 0
    rr, cached = case["ooc/dgemm/n=96/x3/round-robin"], case["ooc/dgemm/n=96/x3"]
    assert rr["bytes_moved"] > cached["bytes_moved"]  # no tile cache: every input tile for every use
    assert "error" in case["ooc/dgemm/n=96/x3/cublasxt"] or "seconds" in case["ooc/dgemm/n=96/x3/cublasxt"]
    for row in res["steps"]["kblas"]["cases"]:
        assert row["diff_vs_cublas"] <= 1e-12 and row["speedup_vs_cublas"] > 0
    hy = res["steps"]["hybrid"]["cases"]
    assert all(0.0 <= r["cpu_flop_share"] <= 1.0 and r["cpu_workers"] >= 1 for r in hy)
    assert case["async/paper-loop"]["ratio"] > 0
    trace = case["trace/dgemm/ooc"]
    assert set(trace["files"].values()) <= set(files)
    events = json.loads((out / trace["files"]["trace"]).read_text())
    assert len(events["traceEvents"]) > 10
    assert "ooc/dgemm/n=96/x1.5" in summary and "STAND-IN" in summary  # the table beside the predictions


def test_a_step_whose_budget_is_spent_stops_cleanly(tmp_path, capsys, monkeypatch):
    _no_gpu()
    b = _bench()
    install = b._install_standin
    monkeypatch.setattr(b, "_install_standin", lambda: install(monkeypatch))  # undone after the test
    # the step's clock reads the predicted seconds of the cases it ran (the stand-in's own seconds depend
    # on the machine's load): what is left, and so which cases are skipped, is fixed by the plan
    spent = [0.0]
    fits = b.Ctx.fits

    def fits_and_spend(self, case, cost):
        ok = fits(self, case, cost)
        spent[0] += cost if ok else 0.0
        return ok

    monkeypatch.setattr(b.Ctx, "fits", fits_and_spend)
    monkeypatch.setattr(b.Ctx, "left", lambda self: self.budget - spent[0])
    plan = b.step_plan("kblas", 1, tiny=True)
    first = plan[0][2] + plan[1][2]  # the first trmm/trsm pair
    rc = b.main(["kblas", "--standin", "--out", str(tmp_path), "--budget", str(first + 0.1 * plan[2][2])])
    assert rc == 0
    sr = json.loads((tmp_path / "results.json").read_text())["steps"]["kblas"]
    assert 2 <= len(sr["cases"]) < len(plan) and sr["skipped"]
    assert all(s["estimated_s"] > s["left_s"] for s in sr["skipped"])
    assert "skipped (estimated" in capsys.readouterr().out


def test_the_predictions_cover_every_case_the_device_run_times():
    b = _bench()
    preds = b.load_predictions()
    for step in b.STEPS:
        for case in b.plan_step(step):
            p = preds.get(case["id"])
            assert p is not None, case["id"]
            if step == "ooc" and case["mode"] == "cublasxt":
                continue  # no model
            secs = [v for k, v in p.items() if k.endswith("_s") or k == "seconds"]
            assert secs and all(v > 0 for v in secs), (case["id"], p)
    with open(b.PREDICTED) as fh:
        made = json.load(fh)["made_with"]
    assert made["model"]["name"].startswith("H100")


@pytest.mark.parametrize("step", ["incore", "ooc", "hybrid", "kblas", "async", "trace", "tiles"])
def test_each_step_fits_its_budget_by_the_predictions(step):
    b = _bench()
    plan = b.step_plan(step, 2)
    assert sum(cost for _, _, cost in plan) <= b.BUDGETS[step]
    limits = dict(re.findall(r"(\w+)\) echo (\d+) ;;", (ROOT / "benchmarks" / "gpu_part2.sh").read_text()))
    assert int(limits[step]) == b.BUDGETS[step] + 15  # the script's limit: the budget and 15 s to start and write


def test_predictions_of_the_tiny_flow_and_the_models(tmp_path):
    b = _bench()
    path = tmp_path / "pred.json"
    cases = b.run_predict(list(b.STEPS), str(path), tiny=True)
    assert set(cases) == {c["id"] for s in b.STEPS for c in b.plan_step(s, tiny=True)}
    assert json.loads(path.read_text())["cases"].keys() == cases.keys()
    # the recursive TRMM/TRSM's model: all of its work at the model's rates, never faster than one call
    # of the whole at the large-tile rate
    r = b.predict_recursive("trmm", 8192, 8192, "d")
    assert r["recursive_s"] >= 8192.0 ** 3 / b._h100().peak("d")
    lb = b.io_lower_bound(1000, 1000, 1000, 8, 8 * 10**4)
    assert lb["compulsory"] == 3 * 10**6 * 8 and lb["io"] == pytest.approx(2e9 / 100 * 8)
    with pytest.raises(ValueError, match="step"):
        b.plan_step("gemm")
