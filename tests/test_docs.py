"""The documentation site: it builds without a warning, and every example of the user guides runs.

The site is built with Sphinx (``make docs``; the ``docs`` extra installs it); the test skips when Sphinx
is not installed.  Each guide's examples run as doctests in a process of their own, on the shipped
settings (``TILEBLAS_PATHS`` and ``TILEBLAS_MODEL_DB`` point into an empty folder, so a ``tileblas tune``
run on this machine does not change what an example prints).  The GPU guide runs only where a GPU and
CuPy are present, the cluster guide only where ``distributed`` is installed.  Every reference to a page
of the docs from the code, the tests, the benchmarks, the tools and the README names a page that exists,
and a heading of it where it names one (``docs/<page>.md, "<heading>"``, or a ``#anchor``).
"""

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

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GUIDES = sorted(p for p in (DOCS / "guide").glob("*.md") if p.name != "index.md")

# Runs one file's examples and prints {"attempted": n, "failed": k} as its last line.
_RUNNER = """
import doctest, json, sys
flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
r = doctest.testfile(sys.argv[1], module_relative=False, optionflags=flags, report=True)
print(json.dumps({"attempted": r.attempted, "failed": r.failed}))
"""


# where the docs are referred to from outside docs/
_REFERRERS = ("src/tileblas", "tests", "benchmarks", "tools", "README.md", "Makefile")
_SUFFIXES = {".py", ".c", ".h", ".sh", ".md", ""}
_REF = re.compile(r"docs/([\w./-]+?\.md)(#[\w-]+)?")
_HEADING_AFTER = re.compile(r'\s*[,(]\s*"([^"\n]*)(")?')
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _slug(title: str) -> str:
    """A heading's anchor as MyST (myst_heading_anchors) and GitHub make it."""
    return re.sub(r"[^\w\- ]", "", title.replace("`", "").lower().replace(" ", "-"))


def _headings(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)  # not the code blocks' comments
    return {m.group(1) for m in _HEADING.finditer(text)}


def _referrers():
    for name in _REFERRERS:
        top = ROOT / name
        if not top.exists():
            continue
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for f in files:
            # this file's own fixtures name missing pages on purpose
            if f.suffix in _SUFFIXES and "egg-info" not in f.as_posix() and "__pycache__" not in f.parts \
                    and f != Path(__file__).resolve():
                yield f


def _doc_references() -> list[tuple[str, str, str | None, str | None]]:
    """(where, page, anchor, heading) of every ``docs/<page>.md`` named outside docs/."""
    out = []
    for f in _referrers():
        lines = f.read_text(errors="replace").replace("\\'", "'").splitlines()
        for no, line in enumerate(lines, 1):
            for m in _REF.finditer(line):
                where = f"{f.relative_to(ROOT)}:{no}"
                h = _HEADING_AFTER.match(line, m.end())
                if h is None and line[m.end():].strip() == "," and no < len(lines):
                    # the heading on the next line, after the comment's leader
                    h = _HEADING_AFTER.match("," + lines[no].lstrip(" \t#*:/"))
                if h and not h.group(2):
                    out.append((where, m.group(1), None, "<a heading split over lines: keep it on one line>"))
                else:
                    out.append((where, m.group(1), m.group(2), h.group(1) if h else None))
    return out


def _bad_references(refs) -> list[str]:
    """What is wrong with each reference: a page that does not exist, a heading or anchor it does not have."""
    bad = []
    for where, page, anchor, heading in refs:
        path = DOCS / page
        if not path.is_file():
            bad.append(f"{where}: docs/{page} does not exist")
            continue
        heads = _headings(path)
        if heading is not None and heading not in heads:
            bad.append(f"{where}: docs/{page} has no heading {heading!r}")
        if anchor is not None and anchor[1:] not in {_slug(t) for t in heads}:
            bad.append(f"{where}: docs/{page} has no heading with the anchor {anchor}")
    return bad


def test_every_reference_to_the_docs_names_a_page_and_heading_that_exist():
    refs = _doc_references()
    assert len(refs) >= 30, f"only {len(refs)} references found: is the scan looking in the right places?"
    bad = _bad_references(refs)
    assert not bad, "\n".join(bad)


def test_the_reference_check_sees_a_wrong_page_a_wrong_heading_and_a_split_one(tmp_path: Path, monkeypatch):
    src = tmp_path / "src" / "tileblas"
    src.mkdir(parents=True)
    (src / "m.c").write_text(' * docs/guide/drop-in.md, "Same call, same bits"\n'
                             ' * docs/guide/drop-in.md, "No such heading"\n'
                             ' * docs/drop-in.md\n'
                             ' * docs/guide/drop-in.md, "Same call,\n *  same bits"\n'
                             ' * docs/guide/drop-in.md,\n * "Same call, same bits"\n'
                             ' * [x](docs/guide/drop-in.md#same-call-same-bits) [y](docs/guide/drop-in.md#nope)\n')
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    refs = _doc_references()
    assert [r[1:] for r in refs] == [
        ("guide/drop-in.md", None, "Same call, same bits"), ("guide/drop-in.md", None, "No such heading"),
        ("drop-in.md", None, None), ("guide/drop-in.md", None, "<a heading split over lines: keep it on one line>"),
        ("guide/drop-in.md", None, "Same call, same bits"),
        ("guide/drop-in.md", "#same-call-same-bits", None), ("guide/drop-in.md", "#nope", None)]
    bad = _bad_references(refs)
    assert [b.split(":")[1] for b in bad] == ["2", "3", "4", "8"], bad
    assert "docs/drop-in.md does not exist" in bad[1] and "#nope" in bad[3]


def _gpu_present() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def run_guide(path: Path, workdir: Path, timeout: float = 300) -> dict:
    """Run the examples of one guide in a fresh process; returns attempted/failed and the output."""
    env = dict(os.environ, TILEBLAS_PATHS=str(workdir / "paths.json"),
               TILEBLAS_MODEL_DB=str(workdir / "models.sqlite"), PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(path)], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    try:
        counts = json.loads(lines[-1])
    except (IndexError, ValueError):
        counts = {"attempted": 0, "failed": -1}
    return {**counts, "returncode": proc.returncode, "output": proc.stdout + proc.stderr}


def test_guides_are_found():
    names = {p.stem for p in GUIDES}
    assert {"drop-in", "runtime", "out-of-core", "async", "linalg", "rblas", "perf", "cluster", "gpu"} <= names


@pytest.mark.parametrize("guide", GUIDES, ids=[p.stem for p in GUIDES])
def test_guide_examples_run(guide: Path, tmp_path: Path):
    if guide.stem == "gpu" and not _gpu_present():
        pytest.skip("the GPU guide's examples need an NVIDIA GPU and CuPy")
    if guide.stem == "cluster" and importlib.util.find_spec("distributed") is None:
        pytest.skip("the cluster guide's examples need dask.distributed (the 'distributed' extra)")
    r = run_guide(guide, tmp_path)
    assert r["returncode"] == 0 and r["failed"] == 0, r["output"][-6000:]
    assert r["attempted"] >= 3, f"{guide.name}: only {r['attempted']} examples ran"


def test_site_builds_without_warnings(tmp_path: Path):
    pytest.importorskip("sphinx")
    for ext in ("numpydoc", "myst_parser", "pydata_sphinx_theme"):
        pytest.importorskip(ext)
    # a copy of the sources: the build writes the reference pages into its source folder, and another
    # build (make docs) may be running on docs/ at the same time
    src = tmp_path / "docs"
    shutil.copytree(DOCS, src, ignore=shutil.ignore_patterns("_build", "api"))
    out = tmp_path / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-d", str(tmp_path / "doctrees"), str(src), str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    pages = {p.relative_to(out).as_posix() for p in out.rglob("*.html")}
    for guide in GUIDES:
        assert f"guide/{guide.stem}.html" in pages
    assert "reference/api/tileblas.blas.html" in pages
    assert "reference/api/generated/tileblas.runtime.Runtime.html" in pages
    assert any(p.startswith("measurements/") for p in pages)
