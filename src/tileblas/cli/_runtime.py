"""``tileblas trace``: run one Level-3 routine on the tile runtime and write its trace and timeline.

Writes ``PREFIX.json`` (Chrome/Perfetto trace: a track per device, a slice per task; open it in
https://ui.perfetto.dev) and ``PREFIX.png`` (per-device timeline like Fig. 1/8 of the BLASX paper), and
prints the per-device profile.  Owns only argument parsing and problem set-up; the runtime does the rest.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from tileblas._dtypes import DTYPE_OF
from tileblas.cli._args import count

__all__ = ["register", "trace_routine", "make_problem"]

_DTYPES = DTYPE_OF


def make_problem(routine: str, n: int, dtype: Any, seed: int = 0) -> tuple:
    """Arguments (kernel-layer order) of a square n x n call of ``routine`` with random data."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)

    def rnd(*shape: int) -> np.ndarray:
        x = rng.standard_normal(shape)
        if dt.kind == "c":
            x = x + 1j * rng.standard_normal(shape)
        return np.asfortranarray(x.astype(dt))

    one = 1.0
    if routine == "gemm":
        return (one, rnd(n, n), rnd(n, n), 0.5, rnd(n, n))
    if routine in ("symm", "hemm"):
        return (one, rnd(n, n), rnd(n, n), 0.5, rnd(n, n))
    if routine in ("syrk", "herk"):
        return (one, rnd(n, n), 0.5, rnd(n, n))
    if routine in ("syr2k", "her2k"):
        return (one, rnd(n, n), rnd(n, n), 0.5, rnd(n, n))
    if routine in ("trmm", "trsm"):
        a = rnd(n, n) / n + np.eye(n, dtype=dt) * 2
        return (one, np.asfortranarray(a), rnd(n, n))
    raise ValueError(f"routine must be one of gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm, trsm; "
                     f"got {routine!r}")


def trace_routine(routine: str, n: int = 2048, dtype: str = "d", devices: Any = None,
                  tile_size: int | None = None, prefix: str = "tileblas-trace", repeat: int = 1,
                  plot: bool = True, progress: bool = False) -> dict[str, Any]:
    """Run ``routine`` (n x n, precision letter ``dtype``) and write PREFIX.json (+ PREFIX.png).

    Returns the last call's profile as a dict, with the paths written.
    """
    from tileblas.runtime import Runtime

    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of s, d, c, z; got {dtype!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1; got {repeat}")
    args = make_problem(routine, n, _DTYPES[dtype])
    with Runtime(devices=devices, tile_size=tile_size, progress=progress) as rt:
        for _ in range(repeat):
            rt.clear_history()
            rt.run(routine, *args)
        prof = rt.last_profile()
        rt.trace(prefix + ".json")
        out = prof.to_dict()
        out["json"] = prefix + ".json"
        if plot:
            out["png"] = rt.plot(prefix + ".png")
        out["text"] = str(prof)
    return out


def _cmd_trace(args: argparse.Namespace) -> int:
    devices: Any = args.devices
    if devices is not None and devices.isdigit():
        devices = int(devices)
    res = trace_routine(args.routine, args.n, args.dtype, devices, args.tile_size, args.out, args.repeat,
                        plot=not args.no_plot, progress=True)
    if args.json:
        res.pop("text")
        print(json.dumps(res, indent=2))
    else:
        print(res["text"])
        print(f"wrote {res['json']}" + (f" and {res['png']}" if "png" in res else ""))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("trace", help="run a Level-3 routine on the tile runtime; write a trace JSON and timeline PNG")
    p.add_argument("routine", choices=["gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"])
    p.add_argument("--n", type=count(1), default=2048, help="matrix order (default 2048)")
    p.add_argument("--dtype", default="d", choices=list(_DTYPES), help="precision letter (default d)")
    p.add_argument("--devices", default=None, help="number of CPU workers or a spec like 'cpu:1,cpu:1x2'")
    p.add_argument("--tile-size", type=count(1), default=None, help="tile size (default: chosen per call)")
    p.add_argument("--out", default="tileblas-trace", help="output prefix (PREFIX.json, PREFIX.png)")
    p.add_argument("--repeat", type=count(1), default=1, help="run this many times, keep the last (warm-up)")
    p.add_argument("--no-plot", action="store_true", help="write only the JSON")
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.set_defaults(func=_cmd_trace)
