"""The house rules of docs/architecture.md, checked on the source: the package's top-level parts import
one way only (counting imports inside functions and ``importlib.import_module`` of a constant name), every
module is named in its part's row of the plan's "What each part owns" table, and the package root stays
small.

The layer order is read from the ``layers`` block of docs/architecture.md, so the plan and the code cannot
drift apart: a new part, or an import that goes up, fails here until the plan says so.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "tileblas"
PLAN = ROOT / "docs" / "architecture.md"
MAX_ROOT_FILES = 12


def _layers() -> list[list[str]]:
    """The plan's layers, top first: one line per layer, parts on a line separated by spaces."""
    text = PLAN.read_text()
    m = re.search(r"```layers\n(.*?)```", text, re.S)
    assert m, f"{PLAN} has no ```layers block"
    rows = []
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            rows.append(line.split())
    return rows


def _module_names() -> dict[str, pathlib.Path]:
    mods: dict[str, pathlib.Path] = {}
    for p in PKG.rglob("*"):
        if p.suffix not in (".py", ".c") or "__pycache__" in p.parts:
            continue
        rel = p.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        mods[name] = p
    return mods


def _imports(name: str, path: pathlib.Path, mods: dict[str, pathlib.Path]) -> set[str]:
    """Every tileblas module ``name`` imports, anywhere in the file."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def add(target: str) -> None:
        while target not in mods and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in mods and target != name:
            found.add(target)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "tileblas":
                    add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_pkg else name.split(".")[:-1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != "tileblas":
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                add(full if full in mods else base)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            if node.args[0].value.split(".")[0] == "tileblas":
                add(node.args[0].value)
    return found


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tileblas"


def _part_graph() -> dict[str, dict[str, list[str]]]:
    """part -> imported part -> the module-level imports that make the edge ("a.b -> c.d")."""
    mods = _module_names()
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in mods.items():
        if path.suffix != ".py":
            continue
        for target in _imports(name, path, mods):
            a, b = _part(name), _part(target)
            if a != b:
                graph.setdefault(a, {}).setdefault(b, []).append(f"{name} -> {target}")
    return graph


def test_the_plan_names_every_part_once():
    named = [p for row in _layers() for p in row]
    assert len(named) == len(set(named)), f"a part is listed twice in the layers block: {named}"
    parts = {_part(m) for m in _module_names()} - {"tileblas"}
    assert parts == set(named), (f"parts in the code but not in the plan: {sorted(parts - set(named))}; "
                                 f"in the plan but not in the code: {sorted(set(named) - parts)}")


def _owner_rows() -> dict[str, str]:
    """The rows of the plan's "What each part owns" table: first cell's names (``kernels/``, ``linalg.py``)
    -> the row's text."""
    text = PLAN.read_text()
    m = re.search(r"^## What each part owns\n(.*?)^## ", text, re.S | re.M)
    assert m, f"{PLAN} has no 'What each part owns' section"
    rows = {}
    for line in m.group(1).splitlines():
        cells = line.split("|")
        if len(cells) > 3 and "`" in cells[1]:
            for name in re.findall(r"`([^`]+)`", cells[1]):
                rows[name] = line
    return rows


def test_the_plan_names_every_module_in_its_parts_row():
    rows = _owner_rows()
    missing = []
    for path in sorted(PKG.rglob("*")):
        if path.suffix not in (".py", ".c", ".h") or path.name == "__init__.py" or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(PKG)
        key = f"{rel.parts[0]}/" if len(rel.parts) > 1 else rel.name
        if key not in rows:
            missing.append(f"{rel}: the table has no row for {key}")
        elif f"`{path.name}`" not in rows[key] and len(rel.parts) > 1:
            missing.append(f"{rel}: not named in the row of {key}")
    assert not missing, "modules the plan's table does not name (docs/architecture.md):\n" + "\n".join(missing)


def test_no_part_imports_a_part_above_it_or_beside_it():
    rank = {p: i for i, row in enumerate(_layers()) for p in row}  # 0 = top
    bad = []
    for a, targets in sorted(_part_graph().items()):
        for b, why in sorted(targets.items()):
            if b == "tileblas":
                bad.append(f"{a} imports the package facade (tileblas/__init__.py): {why[:3]}")
            elif a != "tileblas" and rank[b] <= rank[a]:
                bad.append(f"{a} (layer {rank[a]}) imports {b} (layer {rank[b]}): {why[:3]}")
    assert not bad, "imports against docs/architecture.md:\n" + "\n".join(bad)


def test_no_import_cycle_between_parts():
    graph = {a: set(t) for a, t in _part_graph().items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                cyc = visit(w)
                if cyc:
                    return cyc
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state:
            cyc = visit(v)
            assert cyc is None, "import cycle between parts: " + " -> ".join(cyc)


def test_the_package_root_stays_small():
    files = sorted(p.name for p in PKG.iterdir() if p.is_file())
    assert len(files) <= MAX_ROOT_FILES, f"{len(files)} files at the package root (at most {MAX_ROOT_FILES}): {files}"


@pytest.mark.parametrize("bad", ["from tileblas.cli import main", "import tileblas.perf._sampler as s"])
def test_the_walker_sees_imports_inside_functions(tmp_path, bad):
    """The checker itself: an import inside a function body counts."""
    mods = _module_names()
    src = tmp_path / "probe.py"
    src.write_text(f"def f():\n    {bad}\n")
    found = _imports("tileblas.kernels.probe", src, mods)
    assert found & {"tileblas.cli", "tileblas.perf._sampler"}
