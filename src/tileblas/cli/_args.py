"""Argument types of the ``tileblas`` command, shared by its subcommands.

Each type refuses a bad value while the command line is read, before any work or file is touched, with
a message naming what is wanted and the value given; the parser (:class:`OneLineParser`) prints it as one
line, ``tileblas COMMAND: error: argument --OPTION: ...; got 'VALUE'``, and exits with status 2.  The
checks that relate several options (``--lo`` not above ``--hi``) are the commands' own, made before they
start (a ``ValueError``, printed the same way by :func:`tileblas.cli.main`).
"""

from __future__ import annotations

import argparse
import math
from typing import Callable, Iterable, NoReturn

__all__ = ["OneLineParser", "count", "number", "sizes", "names", "MOST"]


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr and exit status 2 (argparse prints the
    usage block first; ``-h`` shows it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def _int(text: str) -> int | None:
    try:
        return int(text.strip(), 10)
    except ValueError:
        return None


#: The largest count or size an option takes (a 32-bit BLAS integer's limit).
MOST = 2**31 - 1


def count(least: int = 1, most: int = MOST) -> Callable[[str], int]:
    """An integer from ``least`` to ``most`` (a count, an order, a size)."""

    def parse(text: str) -> int:
        v = _int(text)
        if v is None or not least <= v <= most:
            raise argparse.ArgumentTypeError(f"must be an integer from {least} to {most}; got {text!r}")
        return v

    parse.__name__ = f"integer from {least}"
    return parse


def number(least: float = 0.0, strict: bool = False) -> Callable[[str], float]:
    """A finite number ``>= least`` (``> least`` with ``strict``): seconds, a margin, a tolerance."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not math.isfinite(v) or v < least or (strict and v == least):
            raise argparse.ArgumentTypeError(f"must be a finite number {'>' if strict else '>='} {least:g}; "
                                             f"got {text!r}")
        return v

    parse.__name__ = f"number >= {least:g}"
    return parse


def sizes(least: int = 1) -> Callable[[str], list[int]]:
    """A non-empty list of integers ``>= least``: ``256,512``, ``96`` or ``16:256:16`` (start:stop:step,
    both ends included; step > 0, start <= stop; without a step, eight steps or fewer)."""

    def parse(text: str) -> list[int]:
        want = f"integers from {least} to {MOST} like 256,512 or 16:256:16 (start <= stop, step > 0)"
        if ":" in text:
            parts = [_int(p) for p in text.split(":")]
            if len(parts) not in (2, 3) or None in parts:
                raise argparse.ArgumentTypeError(f"must be {want}; got {text!r}")
            start, stop = parts[0], parts[1]
            step = parts[2] if len(parts) == 3 else max(1, (stop - start) // 8 or 1)
            if step <= 0 or start > stop:
                raise argparse.ArgumentTypeError(f"must be {want}; got {text!r}")
            if (stop - start) // step > 100000:
                raise argparse.ArgumentTypeError(f"must have at most 100000 values; got {text!r}")
            values: list[int | None] = list(range(start, stop + 1, step))
        else:
            values = [_int(p) for p in text.split(",") if p.strip()]
        if not values or any(v is None or not least <= v <= MOST for v in values):
            raise argparse.ArgumentTypeError(f"must be {want}; got {text!r}")
        return [int(v) for v in values if v is not None]

    parse.__name__ = "sizes"
    return parse


def names(allowed: Iterable[str]) -> Callable[[str], list[str]]:
    """A non-empty comma-separated list of names, each one of ``allowed``."""
    allowed = tuple(allowed)

    def parse(text: str) -> list[str]:
        got = [x.strip() for x in text.split(",") if x.strip()]
        if not got or any(x not in allowed for x in got):
            raise argparse.ArgumentTypeError(f"must be names from {','.join(allowed)}, comma-separated; got {text!r}")
        return got

    parse.__name__ = "names"
    return parse
