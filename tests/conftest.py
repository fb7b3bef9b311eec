"""Test-session set-up shared by every test file."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _no_user_model_repository(tmp_path_factory):
    """Point ``TILEBLAS_MODEL_DB`` at a file that does not exist, so that performance models a user built
    with ``tileblas tune`` never change the tile sizes or recursion stops the tests see (tests that want
    a repository set the variable themselves)."""
    from tileblas.perf._suggest import clear_cache

    old = os.environ.get("TILEBLAS_MODEL_DB")
    os.environ["TILEBLAS_MODEL_DB"] = str(tmp_path_factory.mktemp("models") / "absent.sqlite")
    clear_cache()
    yield
    if old is None:
        os.environ.pop("TILEBLAS_MODEL_DB", None)
    else:
        os.environ["TILEBLAS_MODEL_DB"] = old
    clear_cache()
