"""Core subcommands: ``tileblas info`` and ``tileblas demo``."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any

__all__ = ["register", "info"]


def info() -> dict[str, Any]:
    """What tileblas found on this machine: devices, BLAS library, threads, GPUs."""
    import numpy as np

    from tileblas._version import __version__
    from tileblas.kernels import _openblas
    from tileblas.devices import cpu_count, host_devices

    lib = _openblas.get_library(1)
    try:
        from importlib.metadata import version

        ob_version = version("scipy-openblas32")
    except Exception:  # pragma: no cover - metadata missing
        ob_version = "unknown"
    from tileblas.devices.gpu import gpu_info

    return {
        "tileblas": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu_cores": cpu_count(),
        "blas": {
            "library": "OpenBLAS (scipy-openblas32 wheel, owned by tileblas)",
            "version": ob_version,
            "config": lib.config(),
            "core": lib.corename(),
            "path": lib.path,
            "threads_per_tile_worker": lib.num_threads(),
            "ilp64": _ilp64_info(),
            "pool": _openblas.pool_info(),
        },
        "devices": [d.describe() for d in host_devices()],
        "threads": threads_info(),
        "gpu": gpu_info(),
        "dropin_gpu": dropin_gpu_info(),
        "paths": paths_info(),
    }


def dropin_gpu_info() -> dict[str, Any]:
    """The drop-in's devices: the ``TILEBLAS_DEVICES`` setting, the GPUs in use (looked for now where no
    call has) or why none is, and the smallest square order per routine that goes to a GPU
    (:func:`tileblas.blas._dispatch.gpu_report`)."""
    from tileblas.blas import _dispatch

    try:
        return _dispatch.gpu_report()
    except Exception as exc:  # noqa: BLE001 - info reports; it never fails for a GPU
        return {"setting": "?", "gpus": [], "note": f"{type(exc).__name__}: {exc}", "crossover": {}}


def threads_info() -> dict[str, Any]:
    """tileblas' OpenBLAS thread counts now and the limit in force (threadpoolctl's, see
    :mod:`tileblas.kernels._threadpool`), as ``threadpoolctl.threadpool_info()`` reports them."""
    from tileblas.kernels import _threadpool

    d = _threadpool.status()
    d["threadpoolctl"] = "registered" if _threadpool.register() else "not installed"
    return d


def paths_info() -> dict[str, Any]:
    """The Level-3 paths and crossovers in force for the process-default runtime, and where they came from
    (:mod:`tileblas.policy._paths`)."""
    from tileblas.kernels import _threadpool
    from tileblas._tuning import Tuning, get_tuning
    from tileblas.policy import _dropin, _paths
    from tileblas.policy._recursion import _shipped_rule

    pol = _paths.policy()
    d = pol.describe()
    d["path_file"] = str(_paths.policy_path())
    tuning = get_tuning()
    d["shipped_recursion"] = {"min_order": tuning.recursive_min_order, "rhs": list(tuning.recursive_rhs),
                              "min_threads": tuning.recursive_min_threads, "shipped": _shipped_rule(tuning)}
    shipped = Tuning()
    d["tuning_changed"] = {f: getattr(tuning, f) for f in tuning.__dataclass_fields__
                           if getattr(tuning, f) != getattr(shipped, f)}
    d["native_threads"] = _threadpool.effective_threads(_threadpool.cpu_count())
    # the C path's limits for that thread count: the configuration its decide() reads (policy._dropin)
    cp = _dropin.config(d["native_threads"])
    d["fastpath_limits"] = {k: (None if v >= 1e300 else v) for k, v in cp.limits.items()}
    d["fastpath_measured_threads"] = sorted(_dropin.MEASURED_THREADS)
    d["fastpath_one_thread"] = dict(cp.one_thread)
    d["fastpath_one_thread_tuned"] = sorted(_dropin.routines(*pol.one_thread))  # tuned per family
    d["fastpath_split"] = {k: list(v) for k, v in cp.split.items()}
    d["fastpath_split_tuned"] = sorted(pol.split_from)
    d["fastpath_rank_gemm"] = {k: list(v) for k, v in cp.rank_gemm.items()}
    d["fastpath_rank_gemm_tuned"] = sorted(pol.rank_gemm)
    d["fastpath_recursion"] = {k: (None if w is None else [int(x) if x < 1e300 else None for x in w])
                               for k, w in cp.windows.items()}
    d["fastpath_rules"] = {f: getattr(cp, f) for f in ("gil_flops", "gil_elements", "convert_max", "part_fraction",
                                                       "part_min", "max_parts")}
    d["fastpath_rules"]["herk_copy_k"] = list(cp.herk_copy_k)
    try:
        from tileblas.blas import _fastpath  # type: ignore[attr-defined]

        d["fastpath"] = hasattr(_fastpath, "configure")
    except ImportError:
        d["fastpath"] = False
    return d


def _ilp64_info() -> dict[str, Any]:
    """Whether calls may use 64-bit BLAS integers, and with which library."""
    from tileblas.kernels import _openblas

    path = _openblas.ilp64_library_path()
    if not _openblas.has_ilp64():
        why = "turned off (TILEBLAS_ILP64=0)" if path else "scipy-openblas64 not installed (pip install 'tileblas[ilp64]')"
        return {"available": False, "note": why, "int_limit": _openblas.int_limit()}
    try:
        from importlib.metadata import version

        v = version("scipy-openblas64")
    except Exception:  # pragma: no cover - metadata missing
        v = "unknown"
    return {"available": True, "version": v, "path": path, "int_limit": _openblas.int_limit(),
            "note": "calls with a size, leading dimension or increment over 2**31 - 1 run on it"}


def _cmd_info(args: argparse.Namespace) -> int:
    data = info()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"tileblas {data['tileblas']}  (Python {data['python']}, NumPy {data['numpy']})")
    print(f"platform     {data['platform']}")
    print(f"cpu cores    {data['cpu_cores']}")
    b = data["blas"]
    print(f"BLAS         {b['library']} {b['version']}")
    print(f"             {b['config']}")
    print(f"             core {b['core']}, {b['threads_per_tile_worker']} thread(s) per tile worker")
    i64 = b["ilp64"]
    print("64-bit ints  " + (f"scipy-openblas64 {i64['version']}: {i64['note']}" if i64["available"]
                             else f"no: {i64['note']}; sizes up to {i64['int_limit']}"))
    _print_pool(b["pool"])
    print("devices      " + ", ".join(f"{d['name']} ({d['kind']})" for d in data["devices"]))
    t = data["threads"]
    lim = "none" if t["limit"] is None else f"{t['limit']} thread(s)"
    print(f"threads      native path {t['native_threads']}, limit in force: {lim} (threadpoolctl {t['threadpoolctl']}); "
          + ", ".join(f"instance of {i['nominal']}: {i['num_threads']} now" for i in t["instances"]))
    g = data["gpu"]
    print("GPU          " + (", ".join(g["devices"]) + f" ({g['note']})" if g["available"] else f"none ({g['note']})"))
    cb = g.get("cublas") or {}
    if g["available"]:
        print("             cuBLAS: " + (f"{len(cb.get('cupy_binds', []))} routines through CuPy"
                                         + (f", {len(cb['from_library'])} from {cb['library']}" if cb.get("library")
                                            else "") if "note" not in cb else cb["note"])
              + (f"; CuPy compositions: {', '.join(cb['compositions'])}" if cb.get("compositions") else ""))
    if g.get("fallbacks"):
        print(f"             ran as CuPy compositions here: {', '.join(sorted(g['fallbacks']))}")
    _print_dropin_gpu(data["dropin_gpu"])
    _print_paths(data["paths"])
    return 0


def _print_pool(p: dict[str, Any]) -> None:
    from tileblas.kernels import _openblas

    if not p["enabled"]:
        print(f"BLAS threads {p['note']}")
        for note in p.get("notes", []):
            print(f"             {note}")
        return
    c, st = p["settings"], p["stats"]
    print(f"BLAS threads tileblas' pool runs the parallel calls ({p['instances']} instance(s) loaded): idle workers "
          f"{_openblas.wait_text(c)}, then sleep until told of work{_openblas.watch_text(c)}")
    print("             split calls: fixed parts claimed by the calling thread and the workers (same bits whoever "
          "runs them)")
    print(f"             so far: {st['calls']} OpenBLAS parallel call(s), {st['batches']} split call(s) in "
          f"{st['parts']} part(s), {st['caller_parts']} run by the calling thread ({st['alone']} call(s) alone), "
          f"{st['workers']} worker(s), {st['sleeps']} sleep(s), {st.get('warmed', 0)} buffer(s) written ahead "
          "at the import of tileblas.blas")
    for note in p.get("notes", []):
        print(f"             {note}")


def _print_dropin_gpu(d: dict[str, Any]) -> None:
    if not d["gpus"]:
        print(f"drop-in      CPU workers only ({d['setting']}): {d['note']}")
        return
    print(f"drop-in      CPU workers ({d.get('cpu_threads', '?')} thread(s)) and "
          + ", ".join(f"{g['name']} ({g['model']}, host link {g['host_link'] / 1e9:.3g} GB/s)" for g in d["gpus"])
          + f" ({d['setting']})")
    cross = d.get("crossover") or {}
    fams: dict[str, list[str]] = {}
    for name, n in cross.items():
        fams.setdefault(name[1:], []).append(f"{name[0]} {'never' if n is None else n}")
    print(f"             to the GPUs from (order n of a square call, from the model; never below "
          f"{d.get('min_flops', 0):.3g} flops or in a C-path split range): "
          + "; ".join(f"{f} {', '.join(v)}" for f, v in fams.items()))
    rates = d.get("cpu_rates") or {}
    if rates:
        print(f"             the CPU path's time at the rates `tileblas tune` timed at {d.get('cpu_threads', '?')} "
              "thread(s) (largest order): " + "; ".join(f"{k} {v[-1][1] / 1e9:.3g} GF/s at {v[-1][0]}"
                                                       for k, v in rates.items()))
    elif "core_flops" in d:
        print(f"             the CPU path's time at {d['core_flops'] / 1e9:.3g} GF/s a thread for every family "
              "(Tuning.core_flops; `tileblas tune --paths-only` times each family's)")
    cost = d.get("call_cost") or {}
    if cost:
        locked = cost.get("locked_from_bytes", float("inf"))
        print(f"             a call's cost on the GPUs beyond the model: "
              f"{cost['seconds'] * 1e3:.3g} ms + {cost['seconds_per_byte'] * 1e12:.3g} ms per GB of output"
              + (f" ({cost.get('seconds_per_locked_byte', 0.0) * 1e12:.3g} ms per GB from {locked / 2 ** 20:.4g} MiB, "
                 "page-locked in place)" if locked != float("inf") else ""))
        if cost.get("timed"):
            print("             fitted from dgemm calls with new outputs: "
                  + ", ".join(f"order {int(n)} {best * 1e3:.3g} ms (model {pred * 1e3:.3g} ms)"
                              for n, best, pred in cost["timed"]))
    fig = d.get("figures") or {}
    if fig:
        read, stored = len(fig.get("read", [])), len(fig.get("stored", []))
        print(f"             the GPUs' figures (host link, gemm rates, a call's cost): {read} read from "
              f"{fig['file']}, {stored} measured by this process and kept there (`tileblas tune --gpus` "
              "measures them again)" + (f"; {fig['note']}" if fig.get("note") else ""))


def _print_paths(p: dict[str, Any]) -> None:
    src = p["source"] + (f", file {p['file']}" if p["file"] else "")
    print(f"Level-3 paths (default runtime, host workers): {src}")
    if p["note"]:
        print(f"             {p['note']}")
    sr = p["shipped_recursion"]
    measured = p.get("fastpath_measured_threads", [])
    print(f"             native: one OpenBLAS call on {p['native_threads']} thread(s); tiles only at or above "
          "the crossover; trmm/trsm recursion by the rule shown")
    print(f"             {'family':7s} {'class':8s} {'tiles from (flops)':20s} recursion (order >=, right-hand sides)")
    for key, v in p["tile_flops"].items():
        fam, cls = key.split("/")
        line = f"             {fam:7s} {cls:8s} {'never' if v is None else f'{v:.4g}':20s}"
        if key in p["recursion"]:
            rule = p["recursion"][key]
            if rule is None and (p["native_threads"] in measured or not sr.get("shipped", True)):
                line += (f" >= {sr['min_order']}, {sr['rhs'][0]}-{sr['rhs'][1]}"
                         f" ({'shipped default' if sr.get('shipped', True) else 'Tuning'}, {sr['min_threads']}+ threads)")
            elif rule is None:
                line += (f" never here (the shipped >= {sr['min_order']}, {sr['rhs'][0]}-{sr['rhs'][1]} was measured at "
                         f"{' or '.join(str(t) for t in measured)} threads, not {p['native_threads']})")
            elif rule[0] is None:
                line += " never (tuned)"
            else:
                line += f" >= {rule[0]:.0f}, {rule[1]:.0f}-{rule[2]:.0f} (tuned)"
        print(line)
    lim = ", ".join(f"{k} {'all' if v is None else f'{v:.3g}'}" for k, v in p["fastpath_limits"].items())
    print(f"             C fast path {'limits' if p['fastpath'] else 'limits (no fast path module here)'} "
          f"(flops; above: tiles): {lim}")
    one_tuned = set(p.get("fastpath_one_thread_tuned", ()))
    one = ", ".join(f"{k} below {v:.3g} flops{' (tuned)' if k in one_tuned else ''}"
                    for k, v in p.get("fastpath_one_thread", {}).items())
    print(f"             on one thread (tileblas' one-thread instance): {one or 'none'}")
    print("             split on the thread pool (parts on the one-thread instance; gemm, symm, hemm in parts of "
          "c, syrk, herk, syr2k, her2k in strips, trmm, trsm in parts of b), flops: " + (_split_lines(p) or "none"))
    tuned = set(p.get("fastpath_rank_gemm_tuned", ()))
    rg = ", ".join(f"{k} below {lo:.3g} ({hi:.3g} split){' (tuned)' if k in tuned else ''}"
                   for k, (lo, hi) in p.get("fastpath_rank_gemm", {}).items())
    print(f"             real syrk/syr2k into a new c as gemm over all of C: {rg or 'none'}")
    r = p.get("fastpath_rules")
    if r:
        print(f"             parts of a split at least 1/{r['part_fraction']} of the order and {r['part_min']}, at "
              f"most {r['max_parts']}; "
              f"without the GIL above {r['gil_flops']:g} flops (Level 3), "
              f"{r['gil_elements']} elements (Level 1/2); herk/her2k copy C-ordered operands from n >= "
              f"{r['herk_copy_k'][0]:g} k (single), {r['herk_copy_k'][1]:g} k (double)")
    measured = p.get("fastpath_measured_threads", [])
    if p.get("native_threads", 0) > 1 and p.get("native_threads") not in measured:
        print(f"             ({p['native_threads']} threads: the shipped one-thread limits and splits were measured "
              f"with {', '.join(map(str, measured))} and are not used; `tileblas tune --paths-only` measures "
              "them here)")
    print("             (the limits not marked tuned: shipped defaults of tileblas.policy._dropin, measured "
          "against SciPy on 2 cores:")
    print("""              docs/measurements/drop-in.md, "Why each limit: the figures behind the small-call path's defaults")""")
    win = ", ".join(f"{k} >= {w[0]}, {w[1]}-{w[2]}" for k, w in p.get("fastpath_recursion", {}).items() if w)
    print(f"             left to the Python path (recursion shapes: order, right-hand sides): {win or 'none'}")
    changed = p.get("tuning_changed") or {}
    print("Tuning       " + ("shipped defaults (tileblas.get_tuning())" if not changed else
                             "changed from the shipped defaults: " + ", ".join(f"{k}={v}" for k, v in changed.items())))


def _split_lines(p: dict) -> str:
    """The split ranges of ``info``'s dict, routines of one range together: 'sgemm, dgemm 2.5e+05-3e+08; ...'
    (never: an empty range), a tuned lower end marked."""
    tuned = set(p.get("fastpath_split_tuned", ()))
    groups: dict = {}
    for k, (lo, hi) in (p.get("fastpath_split") or {}).items():
        groups.setdefault((lo, hi, k in tuned), []).append(k)
    return "; ".join(", ".join(names) + (" never" if not hi > lo else f" {lo:.3g}-{hi:.3g}")
                     + (" (lower end tuned)" if t else "") for (lo, hi, t), names in groups.items())


def _cmd_demo(args: argparse.Namespace) -> int:
    from tileblas.cli._demo import run_demo

    return run_demo(only=args.only)


def register(sub: Any) -> None:
    p = sub.add_parser("info", help="devices, BLAS library and version, thread settings, GPU availability")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("demo", help="a short tour that runs real work through each capability")
    p.add_argument("--only", default=None, help="run only the sections whose module name contains this")
    p.set_defaults(func=_cmd_demo)
