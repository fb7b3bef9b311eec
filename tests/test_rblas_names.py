"""The rblas pairs against the routine tables: every routine x every precision, exact signatures."""

from __future__ import annotations

import inspect

import pytest

import tileblas.blas as tb
import tileblas.rblas as rb

# The routines with side effects of the paper's Tables 1-5 (plus rot and rotm), with the precisions the
# tables list.  Every precision tileblas.blas offers must have a pair too (csscal, zdrot, csyr, ...).
TABLES = {
    1: {"copy": "sdcz", "swap": "sdcz", "scal": "sdcz", "axpy": "sdcz", "rot": "sd", "rotm": "sd"},
    2: {"gemv": "sdcz", "gbmv": "sdcz", "hemv": "cz", "hbmv": "cz", "hpmv": "cz", "symv": "sd",
        "sbmv": "sd", "spmv": "sd",
        "trmv": "sdcz", "tbmv": "sdcz", "tpmv": "sdcz", "trsv": "sdcz", "tbsv": "sdcz", "tpsv": "sdcz",
        "ger": "sd", "geru": "cz", "gerc": "cz", "her": "cz", "hpr": "cz", "her2": "cz", "hpr2": "cz",
        "syr": "sd", "spr": "sd", "syr2": "sd", "spr2": "sd"},
    3: {"gemm": "sdcz", "symm": "sdcz", "hemm": "cz", "syrk": "sdcz", "herk": "cz", "syr2k": "sdcz",
        "her2k": "cz", "trmm": "sdcz", "trsm": "sdcz"},
}
ROUTINES = {r: (lvl, p) for lvl, t in TABLES.items() for r, p in t.items()}
PREFIXES = ("s", "d", "c", "z", "cs", "zd")
# functions (no side effects): no pair
FUNCTIONS = ("dot", "dotu", "dotc", "nrm2", "asum", "amax", "rotg", "rotmg")


def _blas_names(routine):
    return [p + routine for p in PREFIXES if callable(getattr(tb, p + routine, None))]


def test_issue_routine_list_is_complete():
    assert len(ROUTINES) == 6 + 25 + 9
    expected = {n for r in ROUTINES for n in _blas_names(r)}
    assert set(rb.PAIRS) == expected
    for routine, (level, paper) in ROUTINES.items():
        names = _blas_names(routine)
        assert {p + routine for p in paper} <= set(names), routine
        for n in names:
            assert rb.SPEC_OF[n].level == level and rb.SPEC_OF[n].routine == routine
            assert "f" + n in rb.__all__ and "r" + n in rb.__all__
            assert getattr(rb, "f" + n) is rb.PAIRS[n][0] and getattr(rb, "r" + n) is rb.PAIRS[n][1]
    assert len(rb.PAIRS) == 126
    for fn in FUNCTIONS:
        assert not any(k.endswith(fn) and rb.SPEC_OF[k].routine == fn for k in rb.PAIRS), fn


def _same_default(a, b):
    if a is inspect.Parameter.empty or b is inspect.Parameter.empty or a is None or b is None:
        return a is b
    return complex(a) == complex(b)


@pytest.mark.parametrize("name", sorted(rb.PAIRS))
def test_pair_takes_exactly_the_blas_arguments(name):
    ref = list(inspect.signature(getattr(tb, name)).parameters.values())
    f, r = rb.PAIRS[name]
    fp = list(inspect.signature(f).parameters.values())
    rp = list(inspect.signature(r).parameters.values())
    assert fp[-1].name == "mode" and fp[-1].kind is inspect.Parameter.KEYWORD_ONLY
    for got in (fp[:-1], rp):
        assert [p.name for p in got] == [p.name for p in ref]
        assert [p.kind for p in got] == [p.kind for p in ref]
        for g, e in zip(got, ref):
            assert _same_default(g.default, e.default), (name, g, e)
    # the engine binds by the same table: too many / unknown / missing arguments are refused
    with pytest.raises(TypeError, match="at most"):
        f(*range(len(ref) + 1))
    with pytest.raises(TypeError, match="unexpected keyword"):
        r(bogus=1)
    if any(p.default is inspect.Parameter.empty for p in ref):
        with pytest.raises(TypeError, match="missing"):
            f()
    assert rb.pending() == []
