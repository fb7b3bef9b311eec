"""The table of tileblas' public callables and their signatures (docs/api_table.md), and the checks behind it.

Every public module (no part of its name starts with ``_``) is walked: its ``__all__``, and the public
methods of the classes it names.  A signature is *named* when every parameter has a name (positional or
keyword), *keyword-only* where a ``*`` separates the options, and *variadic* where it takes ``*args`` or
``**kwargs``: allowed only for the callables in :data:`VARIADIC`, each with the reason.

Usage::

    python tools/api_table.py            # write docs/api_table.md
    python tools/api_table.py --check    # exit 1 when docs/api_table.md is not what the code gives

``tests/test_public_api.py`` runs the same checks.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pathlib
import pkgutil
import sys
from typing import Any, Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "api_table.md"

#: Public callables that take ``*args`` or ``**kwargs``, and why (what the variadic part stands for).
VARIADIC = {
    "tileblas.devices.create_device": "the constructor arguments of the device kind named (a registry)",
    "tileblas.devices.sim.sim_devices": "SimDevice's keyword arguments, the same for every device made",
    "tileblas.devices.dask.run_tile_task": "the input tiles of the task, one per step operand (a Dask task)",
    "tileblas.Tuning.replace": "the fields to change (like dataclasses.replace)",
    "tileblas.set_tuning": "the fields to change from the Tuning given (or the one in force)",
    "tileblas.perf.suggest": "the parameters of the suggestion named (tile_size: n, devices; recursion_stop: "
                             "routine, n)",
    "tileblas.devices.DeviceModel.with_": "field overrides of the frozen model (like dataclasses.replace)",
    "tileblas.devices.DeviceModel.h100": "field overrides of the preset (like dataclasses.replace)",
    "tileblas.devices.DeviceModel.cpu_core": "field overrides of the preset (like dataclasses.replace)",
    "tileblas.devices.sim.SimDevice.h100": "field overrides of the H100 device model",
    "tileblas.kernels.BlasLibrary.call": "the arguments of the native BLAS routine named, per its signature string",
    "tileblas.runtime.Runtime.run": "the arguments of the routine named (Runtime.gemm, ... are the named forms)",
    "tileblas.runtime.cluster.ClusterRuntime.run": "the arguments of the routine named (as Runtime.run)",
    "tileblas.runtime.cluster.local_cluster": "keyword arguments of distributed.LocalCluster, passed on",
    "tileblas.perf.Sampler.sample_function": "the arguments of the function timed, passed on",
    "tileblas.perf.Sampler.sample_blas": "the arguments of the BLAS routine named, passed on",
}


def public_modules() -> list[str]:
    """tileblas and every submodule whose dotted name has no part starting with ``_``."""
    import tileblas

    names = ["tileblas"]
    for info in pkgutil.walk_packages(tileblas.__path__, "tileblas."):
        if any(p.startswith("_") for p in info.name.split(".")[1:]):
            continue
        names.append(info.name)
    return sorted(names)


def public_submodules(mod: Any) -> set[str]:
    """The public submodules of package ``mod`` (names only)."""
    if not hasattr(mod, "__path__"):
        return set()
    return {i.name for i in pkgutil.iter_modules(mod.__path__) if not i.name.startswith("_")}


def _home(obj: Any, exporters: list[str]) -> str:
    """The public module an object is listed under: of those exporting it, the one its defining module
    lies in most deeply (``tileblas.runtime`` for ``tileblas.runtime._runtime.Runtime``), else the first."""
    where = getattr(obj, "__module__", "") or ""

    def depth(m: str) -> int:
        return len(m.split(".")) if where == m or where.startswith(m + ".") else 0

    return max(exporters, key=lambda m: (depth(m), -len(m)))


def callables() -> Iterator[tuple[str, str, Any]]:
    """``(qualified name, kind, object)`` for every public callable, each object once, under its home
    (:func:`_home`), in the order of the modules and their names."""
    found: dict[int, tuple[Any, list[tuple[str, str]]]] = {}
    for modname in public_modules():
        mod = importlib.import_module(modname)
        for name in sorted(getattr(mod, "__all__", ())):
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or not callable(obj):
                continue
            found.setdefault(id(obj), (obj, []))[1].append((modname, name))
    listed = []
    for obj, names in found.values():
        home = _home(obj, [m for m, _ in names])
        listed.append((home, dict(names)[home], obj))
    for modname, name, obj in sorted(listed, key=lambda t: (t[0], t[1])):
        if inspect.isclass(obj):
            yield f"{modname}.{name}", "exception" if issubclass(obj, BaseException) else "class", obj
            if issubclass(obj, BaseException):
                continue
            for attr, raw in sorted(vars(obj).items()):
                if attr.startswith("_"):
                    continue
                fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
                if isinstance(raw, property) or not callable(fn):
                    continue
                yield f"{modname}.{name}.{attr}", "method", getattr(obj, attr)
        else:
            yield f"{modname}.{name}", "function", obj


def signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def form(sig: inspect.Signature | None) -> str:
    """How the callable is called: named, keyword-only options, variadic."""
    if sig is None:
        return "no signature"
    kinds = {p.kind for p in sig.parameters.values()}
    if kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}:
        return "variadic"
    if inspect.Parameter.KEYWORD_ONLY in kinds:
        return "named, keyword-only options"
    return "named"


def _plain(sig: inspect.Signature) -> str:
    """The signature without annotations (the table shows names and defaults)."""
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()
              if p.name not in ("self", "cls")]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def rows() -> list[tuple[str, str, str, str]]:
    out = []
    for qual, kind, obj in callables():
        if kind == "exception":
            continue  # exceptions are raised, not called: listed in the reference, not here
        sig = signature(obj)
        out.append((qual, kind, form(sig), "" if sig is None else _plain(sig)))
    return out


def render() -> str:
    rs = rows()
    by_form: dict[str, int] = {}
    for _, _, f, _ in rs:
        by_form[f] = by_form.get(f, 0) + 1
    lines = [
        "# Public callables and their signatures",
        "",
        "Generated by `python tools/api_table.py` from the code (`tests/test_public_api.py` fails when this page",
        "and the code differ). Every public module's `__all__`, and the public methods of the classes it names;",
        "each object once, under the first public name it has. *named*: every parameter has a name;",
        "*keyword-only options*: the options after `*` are given by keyword; *variadic*: `*args`/`**kwargs`,",
        "each for the reason in the last table.",
        "",
        "Totals: " + ", ".join(f"{n} {f}" for f, n in sorted(by_form.items())) + f" ({len(rs)} callables).",
        "",
    ]
    module = None
    for qual, kind, f, sig in rs:
        mod = qual
        while mod not in _MODULES:
            mod = mod.rsplit(".", 1)[0]
        if mod != module:
            module = mod
            lines += ["", f"## `{mod}`", "", "| callable | kind | form | signature |", "|---|---|---|---|"]
        name = qual[len(mod) + 1:]
        lines.append(f"| `{name}` | {kind} | {f} | `{sig.replace('|', '&#124;')}` |")
    lines += ["", "## Why these take `*args` or `**kwargs`", "", "| callable | the variadic part is |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in sorted(VARIADIC.items())]
    return "\n".join(lines) + "\n"


_MODULES: set[str] = set()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write (or check) docs/api_table.md from the code.")
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/api_table.md differs from the code")
    args = ap.parse_args(argv)
    _MODULES.update(public_modules())
    text = render()
    if args.check:
        same = TABLE.exists() and TABLE.read_text() == text
        print(f"{TABLE}: {'up to date' if same else 'differs from the code; run python tools/api_table.py'}")
        return 0 if same else 1
    TABLE.write_text(text)
    print(f"wrote {TABLE} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
