"""``python -m tileblas``: the ``tileblas`` command (:func:`tileblas.cli.main`)."""

import sys

from tileblas.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
