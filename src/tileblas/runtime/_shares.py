"""Tiles per device kind, and a call's split between accelerators and host workers.

What it owns
    * Which devices are *accelerators*: devices with memory of their own and a
      :class:`~tileblas.devices._model.DeviceModel` (``device.model``: GPUs, simulated GPUs).  Host workers
      compute in host memory; other devices with memory of their own (the staged host workers of
      ``Runtime(host_memory=...)``, simulated devices without a model) keep the host rule.
    * :func:`accelerator_tile`: the tile size of a call on the accelerators, from their model: the
      candidate with the least predicted time (:func:`predict_seconds`: kernel time at the tile's rate
      over the balanced tiles, or the link time when that is longer, plus the first tiles' copies in and
      the last one's out, plus the host's cost of every tile step), among the candidates whose three
      tiles per stream fit in :data:`FIT_SHARE` of every accelerator's memory.
    * :func:`split_call`: a call on accelerators and host workers together.  The output is cut in two
      along the dimension its tiles are independent in (rows or columns of C; the columns of B for
      left-side trmm/trsm and symm, its rows for right-side ones); the accelerators get the first part in
      tiles of their size, the host workers the last strip in tiles of theirs.  The strip is what the host
      workers finish, at their rate, within the call's predicted time less the time of one host task
      (the host's last task ends no later than the accelerators' last); it is empty, and the call runs on
      the accelerators alone, where a host task (or a trmm/trsm chain of host tasks) would take longer
      than that.  The rank-k family (syrk ... her2k) is not split: its tiles run on the accelerators.
      Both parts are planned by the planner as calls of their own and run as one plan, whose
      ``placement`` reserves each part's tasks to its kind: an accelerator taking the host's small tiles
      spends more on the host side per tile step than the tile's work (on the simulated H100 a call of
      n = 16384 took 6x longer when it could), and a host worker taking an accelerator's tile would end
      long after the rest.
    * :func:`small_on_accelerator`: whether a call small enough for one tile runs as one accelerator task
      rather than one native call on a host worker.

    docs/measurements/gpu.md, "Tiles per device kind", has the rule with the simulated H100's figures.

What it must not touch
    Partitioning itself (the planner's ``plan_call``), scheduling (the scheduler reads ``placement``), and
    device kinds (devices are reached through their ``model``, ``memory_bytes`` and ``streams``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tileblas._tuning import get_tuning
from tileblas.devices._model import DeviceModel
from tileblas.runtime import _planner as P

__all__ = ["SplitPlan", "accelerators", "accelerator_tile", "predict_seconds", "split_call", "small_on_accelerator",
           "host_model", "host_rate", "restrict"]

#: A host strip is given only where one host task takes at most this share of the call's predicted time
#: on the accelerators alone...
HOST_TASK_SHARE = 0.1
#: ... and where it saves at least this share of that time (planning the host's small tiles costs host
#: time before any task runs: about PLAN_STEP_S a tile step on the 2-core machine this was written on).
MIN_GAIN = 0.01
PLAN_STEP_S = 2e-6
#: An accelerator tile is a candidate where three tiles per stream (what the streams hold at once) fit in
#: this share of the device's memory; the rest caches tiles.  Out of core the larger tile wins on the
#: simulated H100 wherever it fits so, where half of the memory admitted only the smaller one (the
#: figures: docs/measurements/gpu.md, "Tiles per device kind").
FIT_SHARE = 0.75


@dataclass(eq=False)
class SplitPlan(P.Plan):
    """A plan whose tasks may be reserved to some devices: ``placement[i]`` is the frozenset of device
    indices that may run task i, or None (any).  ``tiles`` says the tile size of each part."""

    placement: list = field(default_factory=list)
    tiles: dict = field(default_factory=dict)


def accelerators(devices: Sequence[Any]) -> list[int]:
    """Indices of the devices with memory of their own and a device model."""
    return [i for i, d in enumerate(devices) if not d.host_memory and getattr(d, "model", None) is not None]


def host_model(dev: Any) -> DeviceModel:
    """A host worker's model: its own (simulated workers), else one core's of :class:`~tileblas.Tuning`
    (``core_flops`` per BLAS thread, twice that in single precision, half rate at ``tile_rate_knee``,
    ``task_overhead_s`` a tile step)."""
    model = getattr(dev, "model", None)
    if model is not None:
        return model
    tuning = get_tuning()
    return DeviceModel.cpu_core(tuning.core_flops * max(int(getattr(dev, "threads", 1) or 1), 1),
                                knee=tuning.tile_rate_knee, step_overhead_s=tuning.task_overhead_s)


def host_rate(dev: Any, dtype: Any) -> float:
    """A host worker's large-tile rate (flop/s) (:func:`host_model`)."""
    return host_model(dev).peak(dtype)


def _cplx(dtype: Any) -> float:
    return 4.0 if np.dtype(dtype).kind == "c" else 1.0


def _fits(t: int, dtype: Any, devs: Sequence[Any]) -> bool:
    """Three tiles per stream fit in :data:`FIT_SHARE` of every device's memory."""
    return all(3 * t * t * np.dtype(dtype).itemsize * d.streams <= FIT_SHARE * d.memory_bytes for d in devs)


def predict_seconds(name: str, m: int, n: int, k: int, dtype: Any, t: int, devs: Sequence[Any]) -> float:
    """Predicted seconds of a call tiled by ``t`` on the accelerators ``devs`` (the slowest one's model
    for all): the larger of the kernel time (balanced over the devices in whole waves of output tiles, or
    of independent chains for trmm/trsm) and the link time (A and B in once, C out once, over all
    links), plus the first step's tiles in and the last tile out, plus the host's time for every step."""
    model = min((d.model for d in devs), key=lambda mo: mo.peak(dtype))
    nd = len(devs)
    item = np.dtype(dtype).itemsize
    flops = P.flop_count(name, m, n, k) * _cplx(dtype)
    edge = max(min(t, m, n, max(k, 1)), 1)
    rate = model.rate(dtype, edge)
    mt, nt, kt = -(-m // t), -(-n // t), -(-max(k, 1) // t)
    if name in P.CHAIN_ROUTINES:
        units = nt if k == m else mt  # independent chains: tiles across the side the triangle is not on
        steps = mt * nt * (kt + 1) // 2
    elif name in ("syrk", "herk", "syr2k", "her2k"):
        units = nt * (nt + 1) // 2
        steps = units * kt
    else:
        units = mt * nt
        steps = units * kt
    waves = -(-units // nd)
    balance = units / (nd * waves)
    compute = flops / (nd * rate * balance)
    if name in P.CHAIN_ROUTINES:
        a_bytes, b_bytes, c_bytes = k * k * item / 2, m * n * item, m * n * item
    elif name in ("syrk", "herk", "syr2k", "her2k"):
        two = 2 if name in ("syr2k", "her2k") else 1
        a_bytes, b_bytes, c_bytes = two * n * k * item, 0, n * n * item / 2
    else:
        a_bytes, b_bytes, c_bytes = m * k * item, k * n * item, m * n * item
    link = max(model.h2d_seconds((a_bytes + b_bytes) / nd), model.d2h_seconds(c_bytes / nd))
    tile_bytes = min(t, m) * min(t, n) * item
    fill = model.h2d_seconds(2 * tile_bytes) + model.d2h_seconds(tile_bytes)
    return max(compute, link) + fill + steps * model.step_overhead_s


def accelerator_tile(name: str, m: int, n: int, k: int, dtype: Any, devs: Sequence[Any]) -> int:
    """The tile size of a call on the accelerators ``devs`` (see the module notes); the smallest candidate
    where no larger one fits their memory."""
    cands = sorted({t for d in devs for t in d.model.tile_candidates}, reverse=True)
    best_t, best_s = cands[-1], math.inf
    for t in cands:
        if t != cands[-1] and not _fits(t, dtype, devs):
            continue
        secs = predict_seconds(name, m, n, k, dtype, t, devs)
        if secs < best_s * 0.98:  # a larger tile wins ties (fewer tasks, fewer bytes out of core)
            best_t, best_s = t, secs
    return best_t


def _host_task_seconds(name: str, m: int, n: int, k: int, dtype: Any, t: int, model: DeviceModel) -> float:
    """The longest a host worker is busy without a break in the strip: one task (t x t of the output over
    all of k, in steps of t), or for trmm/trsm a whole chain along the triangle (t columns of B)."""
    steps = -(-max(k, 1) // t)
    if name in P.CHAIN_ROUTINES:
        flops, steps = t * float(k) * k, steps * (steps + 1) // 2
    else:
        flops = (2.0 if name in ("gemm", "symm", "hemm") else 1.0) * t * t * max(k, 1)
    return model.kernel_seconds(flops * _cplx(dtype), dtype, min(t, max(k, 1))) + steps * model.step_overhead_s


def _split_dim(name: str, b: dict, m: int, n: int) -> str | None:
    """'m' (rows of the output) or 'n' (its columns): the dimension the host strip is cut from."""
    if name == "gemm":
        return "m" if m >= n else "n"
    if name in ("symm", "hemm", "trmm", "trsm"):
        return "n" if b["side"] == "L" else "m"
    return None


def _parts(name: str, b: dict, dim: str, r: int) -> tuple[dict, dict]:
    """The call's arguments for output rows (dim 'm') or columns ('n') [0, r) and [r, end)."""
    lo, hi = dict(b), dict(b)
    out = "c" if "c" in b else "b"

    def cut(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
        return (x[:r], x[r:]) if axis == 0 else (x[:, :r], x[:, r:])

    ax = 0 if dim == "m" else 1
    lo[out], hi[out] = cut(b[out], ax)
    if name == "gemm":
        if dim == "m":  # rows of op(A)
            lo["a"], hi["a"] = cut(b["a"], 0 if b["transa"] == "N" else 1)
        else:  # columns of op(B)
            lo["b"], hi["b"] = cut(b["b"], 1 if b["transb"] == "N" else 0)
    elif name in ("symm", "hemm"):
        lo["b"], hi["b"] = cut(b["b"], ax)
    return lo, hi


def restrict(plan: P.Plan, devices: frozenset) -> SplitPlan:
    """``plan`` with every task reserved to ``devices``."""
    return SplitPlan(plan.routine, plan.tile, plan.mats, plan.tasks, plan.path, plan.split,
                     placement=[devices] * len(plan.tasks), tiles={"accelerators": plan.tile})


def _merge(routine: str, parts: list[tuple[P.Plan, Any, str]]) -> SplitPlan:
    tasks: list = []
    mats: dict = {}
    placement: list = []
    for plan, key, _ in parts:
        for t in plan.tasks:
            t.index = len(tasks)
            tasks.append(t)
            placement.append(key)
        mats.update(plan.mats)
    first = parts[0][0]
    return SplitPlan(routine, first.tile, mats, tasks, "tiled", max(p.split for p, _, _ in parts),
                     placement=placement, tiles={label: p.tile for p, _, label in parts})


def _strip(name: str, m: int, n: int, k: int, dtype: Any, dim: str, tile: int, acc: Sequence[Any],
           host: Sequence[Any], host_tile: int | None) -> tuple[int, int]:
    """(lines of the output for the host workers, their tile): the host tile and whole number of tile
    lines that save the most predicted time (the accelerators' time for the rest against the host
    workers' whole waves of tasks, less the planning of the host's tile steps), where that saving is at
    least :data:`MIN_GAIN` of the accelerators' time alone; (0, 0) where none is."""
    acc_s = predict_seconds(name, m, n, k, dtype, tile, acc)
    size, other = (m, n) if dim == "m" else (n, m)
    model = min((host_model(d) for d in host), key=lambda mo: mo.peak(dtype))
    nh = len(host)
    best = (MIN_GAIN * acc_s, 0, 0)
    for ht in sorted(get_tuning().tile_candidates, reverse=True):
        if host_tile is not None and ht > host_tile:
            continue
        task_s = _host_task_seconds(name, m, n, k, dtype, ht, model)
        if task_s > HOST_TASK_SHARE * acc_s:
            continue
        per_line = 1 if name in P.CHAIN_ROUTINES else -(-other // ht)  # host tasks in one line of tiles
        kt = -(-max(k, 1) // ht)
        steps = per_line * (kt * (kt + 1) // 2 if name in P.CHAIN_ROUTINES else kt)
        lines = 0
        while (lines + 1) * ht <= size - tile:
            tasks = (lines + 1) * per_line
            if -(-tasks // nh) * task_s > acc_s * (1.0 - (lines + 1) * ht / size):
                break
            lines += 1
        if not lines:
            continue
        host_s = -(-lines * per_line // nh) * task_s
        gain = acc_s - max(acc_s * (1.0 - lines * ht / size), host_s) - lines * steps * PLAN_STEP_S
        if gain > best[0]:
            best = (gain, lines * ht, ht)
    return best[1], best[2]


def split_call(name: str, b: dict, shape: tuple, devices: Sequence[Any], tile: int | None = None,
               host_tile: int | None = None) -> SplitPlan:
    """The plan of a call on accelerators and host workers together (see the module notes): the
    accelerators' part tiled by ``tile`` (default :func:`accelerator_tile`), the host strip by the host
    tile of :func:`_strip` (at most ``host_tile``).  Where the host gets no strip, the whole call is
    tiled for the accelerators and reserved to them."""
    m, n, k = shape
    out = b["c"] if "c" in b else b["b"]
    dtype = out.dtype
    acc = accelerators(devices)
    host = [i for i, d in enumerate(devices) if d.host_memory]
    acc_devs = [devices[i] for i in acc]
    acc_key = frozenset(acc)
    if tile is None:
        tile = accelerator_tile(name, m, n, k, dtype, acc_devs)
    tile = P.bounded_tile(m, n, k, tile)
    split_acc = 2 * len(acc) if len(acc) > 1 else 0
    dim = _split_dim(name, b, m, n) if host else None
    strip = 0
    if dim is not None:
        strip, host_tile = _strip(name, m, n, k, dtype, dim, tile, acc_devs, [devices[i] for i in host],
                                  host_tile)
    if strip <= 0:
        plan = P.plan_call(name, b, tile, split_acc)
        return restrict(plan, acc_key)
    size = m if dim == "m" else n
    lo, hi = _parts(name, b, dim, size - strip)
    hm, hn = (strip, n) if dim == "m" else (m, strip)
    ht = P.bounded_tile(hm, hn, k, host_tile)
    plan_acc = P.plan_call(name, lo, tile, split_acc)
    plan_host = P.plan_call(name, hi, ht, 0)
    return _merge(name, [(plan_acc, acc_key, "accelerators"), (plan_host, frozenset(host), "host")])


def small_on_accelerator(name: str, m: int, n: int, k: int, dtype: Any, devices: Sequence[Any]) -> bool:
    """Whether a call that fits one tile runs faster as one task on an accelerator (its operands copied
    in, its output out) than as one native call on a host worker."""
    acc = [devices[i] for i in accelerators(devices)]
    host = [d for d in devices if d.host_memory]
    if not acc:
        return False
    if not host:
        return True
    t = max(m, n, k, 1)
    on_acc = predict_seconds(name, m, n, k, dtype, t, acc[:1])
    on_host = P.flop_count(name, m, n, k) * _cplx(dtype) / max(host_rate(d, dtype) for d in host)
    return on_acc < on_host
