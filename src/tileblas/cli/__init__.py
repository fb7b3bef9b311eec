"""The ``tileblas`` command.

Subcommands live in the modules listed in ``_PLUGINS``; each defines ``register(subparsers)`` that adds
its parsers with ``set_defaults(func=...)``.  Modules are imported only when the command line is parsed.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "build_parser"]

# One line per capability; each module is imported only by the `tileblas` command.
_PLUGINS = (
    "tileblas.cli._core",
    "tileblas.cli._perf",
    "tileblas.cli._bench",
    "tileblas.cli._runtime",
    "tileblas.cli._rblas",
)


def build_parser() -> argparse.ArgumentParser:
    """The ``tileblas`` command's parser, with every subcommand registered.

    Returns
    -------
    argparse.ArgumentParser
        Its errors are one line on stderr and exit status 2.
    """
    from tileblas._version import __version__
    from tileblas.cli._args import OneLineParser  # bad input: one line, exit status 2 (every subcommand)

    parser = OneLineParser(
        prog="tileblas", description="Every device of a machine working together on BLAS."
    )
    parser.add_argument("--version", action="version", version=f"tileblas {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _PLUGINS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``tileblas`` command (also ``python -m tileblas``).

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the command name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 on success, 2 for bad arguments or a failure reported in one line.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        rc = args.func(args)
    except Exception as exc:
        from tileblas.devices import DeviceError
        from tileblas.policy._repository import RepositoryError

        # DeviceError: a device that cannot be made here (no CuPy, no usable GPU), said in one line
        if not isinstance(exc, (ValueError, TypeError, OSError, RepositoryError, DeviceError)):
            raise
        print(f"tileblas {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def __dir__() -> list[str]:  # the API only (not the modules and helpers imported to build it)
    return sorted(__all__)
