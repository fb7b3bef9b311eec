"""The one rule for BLAS option flags (``side``, ``uplo``, ``trans*``, ``diag``) outside the drop-in.

The rule
    Every flag of :class:`tileblas.Runtime`'s routine methods, of the asynchronous API
    (:mod:`tileblas.asyncapi`) and of :mod:`tileblas.linalg`'s ``trmm``/``trsm`` takes either form:

    ========== ==================== ===================================================
    flag       BLAS letter          integer or bool (the drop-in's ``scipy.linalg.blas`` value)
    ========== ==================== ===================================================
    ``side``   ``'L'``, ``'R'``     0 / False (left), 1 / True (right), as ``side=``
    ``uplo``   ``'U'``, ``'L'``     0 / False (upper), 1 / True (lower), as ``lower=``
    ``trans*`` ``'N'``, ``'T'``,    0 / False (none), 1 / True (transpose),
               ``'C'``              2 (conjugate transpose), as ``trans=`` / ``trans_a=``
    ``diag``   ``'N'``, ``'U'``     0 / False (non-unit), 1 / True (unit diagonal), as ``diag=``
    ========== ==================== ===================================================

    Letters are one character, upper or lower case; integers are Python or NumPy integers or bools.
    Anything else (another letter, a word, a float, None, an integer out of range) is a ``ValueError``
    naming the argument and the value.  For real data ``'C'`` means ``'T'``.

    The drop-in :mod:`tileblas.blas` keeps SciPy's own argument rules exactly (integers only, converted
    as f2py converts them; :func:`tileblas.blas._common.as_flag`).

What it must not touch
    Anything else of tileblas: it is imported by the runtime, the asynchronous API and ``linalg`` alike.
"""

from __future__ import annotations

import operator
import textwrap
from typing import Any

__all__ = ["flag", "param_doc", "LETTERS", "MEANING"]

#: The letters of each kind of flag, in the order of their integer values (letter i is integer i).
LETTERS: dict[str, tuple[str, ...]] = {
    "side": ("L", "R"),
    "uplo": ("U", "L"),
    "trans": ("N", "T", "C"),
    "diag": ("N", "U"),
}
#: What each letter means, per kind (for messages and docstrings).
MEANING: dict[str, dict[str, str]] = {
    "side": {"L": "left", "R": "right"},
    "uplo": {"U": "upper", "L": "lower"},
    "trans": {"N": "no transpose", "T": "transpose", "C": "conjugate transpose"},
    "diag": {"N": "non-unit", "U": "unit"},
}


def _kind(name: str) -> str:
    return "trans" if name.startswith("trans") else name


def _choices(kind: str, allowed: tuple[str, ...]) -> str:
    letters = LETTERS[kind]
    return ", ".join(f"{c!r} or {letters.index(c)} ({MEANING[kind][c]})" for c in letters if c in allowed)


def flag(value: Any, name: str, allowed: tuple[str, ...] | str | None = None) -> str:
    """The BLAS letter of flag ``name`` given as ``value`` (see the module notes for the rule).

    Parameters
    ----------
    value : str, int or bool
        A letter (``'L'``, ``'u'``, ...) or the integer/bool the drop-in takes (``1``, ``True``, ...).
    name : str
        ``side``, ``uplo``, ``diag``, or a name starting with ``trans`` (``trans``, ``transa``,
        ``transb``); used in the message.
    allowed : sequence of str, optional
        A subset of the letters that this call takes (e.g. ``('N', 'C')`` for a complex ``herk``).

    Returns
    -------
    str
        One upper-case letter.

    Raises
    ------
    ValueError
        ``value`` is neither form, or names a letter outside ``allowed``.
    """
    kind = _kind(name)
    letters = LETTERS[kind]
    ok = letters if allowed is None else tuple(allowed)
    if type(value) is str and value in ok:  # the common case, first
        return value
    letter = None
    if isinstance(value, str):
        if len(value) == 1 and value.upper() in letters:
            letter = value.upper()
    elif getattr(value, "dtype", None) is not None and getattr(value, "shape", None) == () \
            and value.dtype.kind in "biu":  # a NumPy integer or bool scalar
        i = int(value)
        letter = letters[i] if 0 <= i < len(letters) else None
    else:
        try:
            i = operator.index(value)
        except TypeError:
            i = -1
        letter = letters[i] if 0 <= i < len(letters) else None
    if letter is None or letter not in ok:
        raise ValueError(f"{name} must be one of {_choices(kind, ok)}; got {name}={value!r}")
    return letter


#: The type line of each kind of flag in a numpydoc Parameters section.
_TYPES = {"side": "{'L', 'R', 0, 1}", "uplo": "{'U', 'L', 0, 1}", "trans": "{'N', 'T', 'C', 0, 1, 2}",
          "diag": "{'N', 'U', 0, 1}"}


def param_doc(name: str, subject: str = "a", default: str | None = None, indent: str = "    ") -> str:
    """The numpydoc entry of flag ``name`` (the shared description of every public call that takes it):
    ``subject`` is the operand it is about, ``default`` its default letter."""
    kind = _kind(name)
    text = {
        "side": f"op({subject}) on the left ('L' or 0) or on the right ('R' or 1) of the other operand.",
        "uplo": f"The triangle of ``{subject}`` that is used: upper ('U' or 0) or lower ('L' or 1, as the "
                f"drop-in's ``lower=1``).",
        "trans": f"op({subject}) = {subject} ('N' or 0), {subject}.T ('T' or 1) or {subject}.conj().T "
                 f"('C' or 2; for real data the same as 'T').",
        "diag": f"'U' or 1: the diagonal of ``{subject}`` is taken as all ones (not read); 'N' or 0: "
                f"it is read.",
    }[kind]
    dflt = f", default {default!r}" if default is not None else ""
    body = textwrap.fill(text, 108 - len(indent), initial_indent=indent + "    ", subsequent_indent=indent + "    ")
    return f"{indent}{name} : {_TYPES[kind]}{dflt}\n{body}\n"
