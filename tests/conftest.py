"""Test-session set-up shared by every test file."""

from __future__ import annotations

import itertools
import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _no_user_model_repository(tmp_path_factory):
    """Point ``TILEBLAS_MODEL_DB`` at a file that does not exist, so that performance models a user built
    with ``tileblas tune`` never change the tile sizes or recursion stops the tests see (tests that want
    a repository set the variable themselves)."""
    from tileblas.policy._suggest import clear_cache

    from tileblas.policy import _paths

    saved = {k: os.environ.get(k) for k in ("TILEBLAS_MODEL_DB", "TILEBLAS_PATHS")}
    home = tmp_path_factory.mktemp("models")
    os.environ["TILEBLAS_MODEL_DB"] = str(home / "absent.sqlite")
    os.environ["TILEBLAS_PATHS"] = str(home / "absent-paths.json")
    clear_cache()
    _paths.reload()
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    clear_cache()
    _paths.reload()


@pytest.fixture(scope="session")
def _figures_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("gpu-figures")


_FIGURES_FILES = itertools.count()


@pytest.fixture(autouse=True)
def _own_gpu_figures(_figures_dir):
    """Each test its own file of kept GPU figures (``TILEBLAS_GPU_FIGURES``, absent until the test measures
    one): what one test's GPUs, real or stand-in, measured and kept never reaches the next, and a user's
    file is never read or written."""
    from tileblas.devices import _figures

    saved = os.environ.get("TILEBLAS_GPU_FIGURES")
    os.environ["TILEBLAS_GPU_FIGURES"] = str(_figures_dir / f"gpus-{next(_FIGURES_FILES)}.json")
    _figures._STATE = _figures._State()  # nothing read or kept yet, as in a new process
    yield
    if saved is None:
        os.environ.pop("TILEBLAS_GPU_FIGURES", None)
    else:
        os.environ["TILEBLAS_GPU_FIGURES"] = saved


@pytest.fixture(autouse=True, scope="session")
def _drop_in_on_the_cpu():
    """``TILEBLAS_DEVICES=cpu`` for the session (unless the environment sets it): on a machine with a GPU,
    and after a test that leaves a CuPy stand-in in ``sys.modules``, the drop-in's large calls stay on the
    CPU the other tests measure.  The drop-in's GPU choice is tested in tests/test_gpu_dropin.py, which
    sets the devices itself."""
    from tileblas.blas import _dispatch

    saved = os.environ.get("TILEBLAS_DEVICES")
    os.environ.setdefault("TILEBLAS_DEVICES", "cpu")
    _dispatch.set_devices(None)
    yield
    if saved is None:
        os.environ.pop("TILEBLAS_DEVICES", None)
    _dispatch.set_devices(None)
    _dispatch.release_gpus()


@pytest.fixture(autouse=True)
def _shipped_path_policy():
    """A test that installs a tuned path policy (``tileblas tune``, ``_paths.reload`` on a file of its own)
    leaves the shipped default in force for the next test."""
    from tileblas.policy import _paths

    before = _paths.policy()
    yield
    if _paths.policy() is not before:
        _paths.reload()


@pytest.fixture
def tuned():
    """``tuned(**changes)`` puts the :class:`tileblas.Tuning` in force with ``changes`` for the rest of the
    test; the one before is restored afterwards."""
    from tileblas._tuning import set_tuning

    made = []

    def apply(**changes):
        made.append(set_tuning(**changes))

    yield apply
    for t in reversed(made):
        t.__exit__(None, None, None)


@pytest.fixture
def lp64():
    """32-bit BLAS integers only for this test (as without scipy-openblas64): sizes over 32 bits raise
    OverflowError instead of moving to the ILP64 library."""
    from tileblas.kernels import _openblas

    was = _openblas.set_ilp64(False)
    yield
    _openblas.set_ilp64(was)


def _cuda_devices():
    """CuPy and the number of CUDA devices it sees; the test is skipped where there is none (no CuPy, no
    driver, no device)."""
    cupy = pytest.importorskip("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - the driver is missing
        pytest.skip(f"no CUDA device: {exc}")
    if count < 1:
        pytest.skip("no CUDA device")
    return cupy, count


@pytest.fixture(scope="module")
def gpus():
    """The number of CUDA devices (a real GPU; skipped without one)."""
    return _cuda_devices()[1]


@pytest.fixture(scope="module")
def cp():
    """The cupy module on a machine with a real GPU (skipped without one)."""
    return _cuda_devices()[0]
