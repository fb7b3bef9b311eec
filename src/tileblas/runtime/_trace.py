"""Seeing what happened: per-call profiles, Chrome/Perfetto trace JSON, per-device timeline plots.

What it owns
    Turning the scheduler's :class:`~tileblas.runtime._scheduler.TaskRecord` lists into
    :class:`CallProfile` (per device: tasks run, tasks stolen, busy / idle / overhead seconds, bytes
    moved), into Chrome trace-event JSON (one track per device, one slice per task; open it in
    https://ui.perfetto.dev or chrome://tracing), and into a timeline PNG like Fig. 1 and 8 of the BLASX
    paper (matplotlib, imported only when plotting).

Definitions (per device, over the wall time of the call)
    busy      time inside the task's kernels and data movement (to_device ... to_host);
    overhead  time the worker spent picking the task (queue, station, locality score) and finishing it
              (releasing dependents), excluding time asleep waiting for work;
    idle      wall - busy - overhead.

For devices with their own memory (BLASX Fig. 8, from the devices' stream timelines)
    compute   time at least one kernel ran on the device;
    comm      exposed communication: time at least one copy ran and no kernel did;
    other     wall - compute - comm (synchronisation, gaps between launches, idling);
and L1 hits, L2 hits (tiles copied from a peer) and misses (tiles copied from the host).  For host
devices compute = busy and comm = 0.

What it must not touch
    Scheduling decisions; it reads records after the fact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = ["DeviceProfile", "CallProfile", "build_profile", "chrome_trace", "plot_timeline"]


@dataclass
class DeviceProfile:
    """One device's share of one call."""

    name: str
    tasks: int = 0
    stolen: int = 0
    busy_s: float = 0.0
    overhead_s: float = 0.0
    idle_s: float = 0.0
    bytes_h2d: int = 0
    bytes_d2h: int = 0
    bytes_d2d: int = 0
    flops: float = 0.0
    l1_hits: int = 0
    l2_hits: int = 0
    misses: int = 0
    compute_s: float = 0.0
    comm_s: float = 0.0
    other_s: float = 0.0

    @property
    def bytes_moved(self) -> int:
        return self.bytes_h2d + self.bytes_d2h + self.bytes_d2d


@dataclass
class CallProfile:
    """What one call did.  ``path`` is 'tiled', 'split-k', 'small' (one native call) or 'trivial'."""

    routine: str
    shape: tuple
    dtype: str
    tile_size: int
    path: str
    tasks: int
    wall_s: float
    flops: float
    devices: list[DeviceProfile]
    failed: bool = False
    t_start: float = 0.0
    records: list = field(default_factory=list, repr=False)

    @property
    def gflops(self) -> float:
        return self.flops / self.wall_s / 1e9 if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-able), without the per-task records."""
        return {
            "routine": self.routine,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "tile_size": self.tile_size,
            "path": self.path,
            "tasks": self.tasks,
            "wall_s": self.wall_s,
            "gflops": self.gflops,
            "failed": self.failed,
            "devices": [
                {**d.__dict__, "bytes_moved": d.bytes_moved} for d in self.devices
            ],
        }

    def __str__(self) -> str:
        lines = [
            f"{self.routine} {'x'.join(map(str, self.shape))} {self.dtype} tile={self.tile_size} "
            f"path={self.path} tasks={self.tasks} wall={self.wall_s * 1e3:.2f} ms "
            f"({self.gflops:.1f} GFLOP/s){' FAILED' if self.failed else ''}",
            f"  {'device':<10}{'tasks':>7}{'stolen':>8}{'busy ms':>10}{'idle ms':>10}{'ovh ms':>9}{'bytes':>10}",
        ]
        for d in self.devices:
            lines.append(f"  {d.name:<10}{d.tasks:>7}{d.stolen:>8}{d.busy_s * 1e3:>10.2f}{d.idle_s * 1e3:>10.2f}"
                         f"{d.overhead_s * 1e3:>9.2f}{d.bytes_moved:>10}")
        if any(d.l1_hits or d.l2_hits or d.misses for d in self.devices):
            lines.append(f"  {'device':<10}{'L1 hits':>9}{'L2 hits':>9}{'misses':>8}{'h2d MB':>9}{'d2h MB':>9}"
                         f"{'d2d MB':>9}{'comp ms':>10}{'comm ms':>10}{'other ms':>10}")
            for d in self.devices:
                lines.append(f"  {d.name:<10}{d.l1_hits:>9}{d.l2_hits:>9}{d.misses:>8}{d.bytes_h2d / 1e6:>9.2f}"
                             f"{d.bytes_d2h / 1e6:>9.2f}{d.bytes_d2d / 1e6:>9.2f}{d.compute_s * 1e3:>10.2f}"
                             f"{d.comm_s * 1e3:>10.2f}{d.other_s * 1e3:>10.2f}")
        return "\n".join(lines)


def build_profile(routine: str, shape: tuple, dtype: str, tile: int, path: str, flops: float,
                  device_names: Sequence[str], records: Sequence[Any], t_start: float, t_end: float,
                  failed: bool = False) -> CallProfile:
    """Summarise the records of one call."""
    wall = max(t_end - t_start, 0.0)
    devs = [DeviceProfile(n) for n in device_names]
    kern: dict[int, list] = {}
    copy: dict[int, list] = {}
    for r in records:
        d = devs[r.device]
        mem = getattr(r, "mem", None)
        if mem is not None:
            d.l1_hits += mem.l1
            d.l2_hits += mem.l2
            d.misses += mem.miss
            for what, a, b in mem.intervals:
                (kern if what == "kernel" else copy).setdefault(r.device, []).append((a, b))
        d.tasks += 1
        d.stolen += bool(r.stolen)
        d.busy_s += r.t1 - r.t0
        ovh = (r.t0 - r.t_found) + (max(r.t_done, r.t1) - r.t1)
        d.overhead_s += max(ovh, 0.0)
        d.bytes_h2d += r.bytes[0]
        d.bytes_d2h += r.bytes[1]
        d.bytes_d2d += r.bytes[2]
        d.flops += r.flops
    for n, d in enumerate(devs):
        d.idle_s = max(wall - d.busy_s - d.overhead_s, 0.0)
        if n in kern or n in copy:
            k = _union(kern.get(n, []), t_start, t_end)
            c = _union(copy.get(n, []), t_start, t_end)
            d.compute_s = _length(k)
            d.comm_s = max(_length(c) - _overlap(c, k), 0.0)
        else:
            d.compute_s = d.busy_s
        d.other_s = max(wall - d.compute_s - d.comm_s, 0.0)
    return CallProfile(routine, tuple(shape), dtype, tile, path, len(records), wall, flops, devs, failed,
                       t_start, list(records))


def _union(iv: list, lo: float, hi: float) -> list:
    """Sorted disjoint union of intervals, clipped to [lo, hi]."""
    out: list = []
    for a, b in sorted(iv):
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return out


def _length(u: list) -> float:
    return sum(b - a for a, b in u)


def _overlap(u: list, v: list) -> float:
    """Total length of the intersection of two sorted disjoint unions."""
    i = j = 0
    tot = 0.0
    while i < len(u) and j < len(v):
        a, b = max(u[i][0], v[j][0]), min(u[i][1], v[j][1])
        if b > a:
            tot += b - a
        if u[i][1] < v[j][1]:
            i += 1
        else:
            j += 1
    return tot


def chrome_trace(profiles: Sequence[CallProfile], device_names: Sequence[str], epoch: float) -> dict[str, Any]:
    """Chrome trace-event JSON (dict) for some calls: a track (thread) per device, a slice per task,
    and a 'calls' track with one slice per call."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "tileblas runtime"}},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "device engines"}},
    ]
    for d, name in enumerate(device_names):
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": d + 1, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": d + 1, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": d + 1, "args": {"sort_index": d + 1}})
    events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "calls"}})

    def us(t: float) -> float:
        return round((t - epoch) * 1e6, 3)

    for n, p in enumerate(profiles):
        events.append({"ph": "X", "name": f"{p.routine} {'x'.join(map(str, p.shape))}", "cat": "call",
                       "pid": 0, "tid": 0, "ts": us(p.t_start), "dur": round(p.wall_s * 1e6, 3),
                       "args": {"call": n, "path": p.path, "tile_size": p.tile_size, "tasks": p.tasks,
                                "failed": p.failed}})
        for r in p.records:
            args = {"call": n, "stolen": bool(r.stolen), "locality": r.score, "ok": r.ok, "bytes": sum(r.bytes)}
            mem = getattr(r, "mem", None)
            if mem is not None:
                args.update(l1_hits=mem.l1, l2_hits=mem.l2, misses=mem.miss, h2d=mem.h2d, d2h=mem.d2h, d2d=mem.d2d)
                for what, a, b in mem.intervals:  # kernels and copies on the device's engines track
                    events.append({"ph": "X", "name": what, "cat": "engine", "pid": 1, "tid": r.device + 1,
                                   "ts": us(a), "dur": round((b - a) * 1e6, 3), "args": {"task": r.label}})
            events.append({"ph": "X", "name": r.label, "cat": p.routine, "pid": 0, "tid": r.device + 1,
                           "ts": us(r.t0), "dur": round((r.t1 - r.t0) * 1e6, 3), "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"devices": list(device_names), "calls": [p.to_dict() for p in profiles]}}


def write_trace(trace: dict[str, Any], path: str) -> None:
    with open(path, "w") as f:
        json.dump(trace, f)


def plot_timeline(profiles: Sequence[CallProfile], device_names: Sequence[str], path: str,
                  title: str | None = None) -> str:
    """Draw a per-device timeline PNG (one row per device, one bar per task, like BLASX Fig. 1/8).

    Parameters
    ----------
    profiles : sequence of CallProfile
        Calls to draw (their per-task records).
    device_names : sequence of str
        Row labels.
    path : str
        Where to write the PNG.
    title : str, optional
        Figure title.

    Returns
    -------
    str
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if not profiles:
        raise ValueError("profiles must name at least one call; got none")
    epoch = min(p.t_start for p in profiles)
    busy = sorted({r.device for p in profiles for r in p.records})
    rows = busy or list(range(len(device_names)))  # a row per device that ran a task
    row_of = {d: i for i, d in enumerate(rows)}
    idle = [device_names[d] for d in range(len(device_names)) if d not in row_of]
    stolen = any(r.stolen for p in profiles for r in p.records)
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.7))
    cmap = plt.get_cmap("tab10")
    kinds: dict[str, int] = {}
    for p in profiles:
        for r in p.records:
            kind = r.label.split("[")[0]
            color = cmap(kinds.setdefault(kind, len(kinds)) % 10)
            ax.broken_barh([((r.t0 - epoch) * 1e3, max((r.t1 - r.t0) * 1e3, 1e-3))], (row_of[r.device] - 0.4, 0.8),
                           facecolors=color, edgecolors="black" if r.stolen else "white",
                           linewidth=1.2 if r.stolen else 0.4)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([device_names[d] if d < len(device_names) else str(d) for d in rows], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("time since the first call began (ms)", fontsize=9)
    ax.set_ylabel("device", fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(v % 10)) for v in kinds.values()]
    labels = [f"{k} task" for k in kinds]
    if stolen:
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", linewidth=1.2))
        labels.append("stolen (black edge)")
    if handles:  # beside the lanes, never over a bar
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if title is None:
        p = profiles[-1]
        tasks = sum(len(q.records) for q in profiles)
        title = (f"{p.routine} {'x'.join(map(str, p.shape))}, path {p.path}"
                 + (f", tile {p.tile_size}" if p.tile_size and tasks > 1 else "")
                 + f", {tasks} task{'s' if tasks != 1 else ''}, {p.wall_s * 1e3:.1f} ms")
        if p.path == "shared":
            title += f"\none native call on the BLAS threads of all {len(device_names)} workers together"
        elif idle:
            title += f"\nno task on {', '.join(idle)}" + (" (one native call)" if tasks == 1 else "")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ += ["write_trace"]
