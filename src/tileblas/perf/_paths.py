"""Where the model repository lives (standard library only, so the runtime's lookups import nothing else)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_path"]


def default_path() -> Path:
    """``$TILEBLAS_MODEL_DB``, else ``$XDG_CACHE_HOME/tileblas/models.sqlite`` (``~/.cache`` by default)."""
    env = os.environ.get("TILEBLAS_MODEL_DB")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "tileblas" / "models.sqlite"
