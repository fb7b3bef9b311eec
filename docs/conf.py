"""Sphinx configuration of the tileblas documentation (``make docs``).

The API reference is generated from the docstrings: at configuration time, one page per public namespace is
written under ``reference/api/`` from that namespace's ``__all__`` (so the reference lists exactly what the
package exports), and autosummary writes one page per object from those.  Both folders are build outputs
(ignored by git).
"""

from __future__ import annotations

import importlib
import inspect
import os
from pathlib import Path

import tileblas  # the installed package (`make docs` installs it first)

HERE = Path(__file__).resolve().parent

project = "tileblas"
author = "the tileblas authors"
copyright = "the tileblas authors"
release = tileblas.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_templates", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]  # autosummary/class.rst: a class page documents its public methods

# Markdown pages: anchors for headings (``page.md#a-heading``), $math$.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "colon_fence"]

# API reference
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
autodoc_inherit_docstrings = False  # a method without a docstring of its own shows none (not the base class's)
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"tileblas {release}"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False
html_context = {"default_mode": "light"}

# ---------------------------------------------------------------------------------------------------------------
# The reference pages, one per namespace, written from each namespace's __all__.

NAMESPACES = [
    ("tileblas", "The package: the tunables and the names it re-exports."),
    ("tileblas.blas", "The drop-in for :mod:`scipy.linalg.blas`."),
    ("tileblas.runtime", "The tile runtime: :class:`~tileblas.runtime.Runtime` and the cluster runtime."),
    ("tileblas.asyncapi", "Asynchronous calls on handles, futures and :class:`~tileblas.asyncapi.Matrix`."),
    ("tileblas.linalg", "Recursive TRMM/TRSM, Cholesky solve and inverse."),
    ("tileblas.rblas", "Reversible BLAS: forward/reverse pairs, modes and tapes."),
    ("tileblas.perf", "Performance models: sampling, fitting, prediction."),
    ("tileblas.devices", "The devices a runtime runs on."),
]

_LEVEL1 = ("axpy", "copy", "dot", "dotc", "dotu", "rotg", "scal", "rot", "rotm", "rotmg", "swap", "asum",
           "nrm2", "amax", "sscal", "dscal", "srot", "drot")
_LEVEL3 = ("gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm")


def _blas_level(name: str) -> int | None:
    if len(name) < 4 or name[0] not in "sdczi":
        return None
    if name[1:] in _LEVEL3:
        return 3
    if name[1:] in _LEVEL1 or name[2:] in _LEVEL1 or name[1:] in ("amax",):
        return 1
    return 2


def _kind(obj: object) -> str:
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return "Exceptions"
    if inspect.isclass(obj):
        return "Classes"
    if inspect.ismodule(obj):
        return "Submodules"
    if callable(obj):
        return "Functions"
    return "Constants"


def _groups(modname: str) -> list[tuple[str, list[str]]]:
    mod = importlib.import_module(modname)
    names = [n for n in getattr(mod, "__all__", []) if n != "__version__"]
    groups: dict[str, list[str]] = {}
    for name in names:
        obj = getattr(mod, name)
        kind = _kind(obj)
        if modname == "tileblas.blas" and kind == "Functions" and _blas_level(name):
            kind = f"Level {_blas_level(name)} routines"
        elif modname == "tileblas.rblas" and kind == "Functions" and name[:1] in "fr" and len(name) > 3:
            kind = "Forward calls" if name[0] == "f" else "Reverse calls"
        groups.setdefault(kind, []).append(name)
    order = ["Classes", "Functions", "Level 1 routines", "Level 2 routines", "Level 3 routines", "Forward calls",
             "Reverse calls", "Exceptions", "Constants", "Submodules"]
    return [(k, groups[k]) for k in order if k in groups]


def _home(modname: str, name: str) -> str | None:
    """The other documented namespace that exports the same object as ``modname.name`` (one page per object)."""
    obj = getattr(importlib.import_module(modname), name)
    for other, _ in NAMESPACES:
        if other != modname and other.startswith(modname + ".") and name in getattr(
                importlib.import_module(other), "__all__", ()):
            if getattr(importlib.import_module(other), name) is obj:
                return other
    return None


def _write_reference() -> None:
    out = HERE / "reference" / "api"
    out.mkdir(parents=True, exist_ok=True)
    for modname, blurb in NAMESPACES:
        lines = [f"``{modname}``", "=" * (len(modname) + 4), "", blurb, "",
                 f".. automodule:: {modname}", "   :no-members:", "", f".. currentmodule:: {modname}", ""]
        elsewhere = []
        for kind, names in _groups(modname):
            if kind == "Submodules":
                lines += [kind, "-" * len(kind), "", ", ".join(f":mod:`{modname}.{n}`" for n in names), ""]
                continue
            elsewhere += [(n, _home(modname, n)) for n in names if _home(modname, n)]
            names = [n for n in names if not _home(modname, n)]
            if not names:
                continue
            lines += [kind, "-" * len(kind), "", ".. autosummary::", "   :toctree: generated/", ""]
            lines += [f"   {n}" for n in names] + [""]
        if elsewhere:
            title = "Also here"
            lines += [title, "-" * len(title), "", "Names this namespace re-exports from another:", ""]
            lines += [f"* ``{modname}.{n}``: :obj:`{home}.{n}`" for n, home in elsewhere] + [""]
        text = "\n".join(lines)
        path = out / f"{modname}.rst"
        if not path.exists() or path.read_text() != text:  # unchanged pages keep their time: no rebuild
            path.write_text(text)


if os.environ.get("TILEBLAS_DOCS_NO_REFERENCE") != "1":
    _write_reference()


def setup(app):  # noqa: D103
    from pygments.lexers.special import TextLexer

    app.add_lexer("layers", TextLexer)  # architecture.md's layer table (tests/test_architecture.py reads it)
