"""The PNGs the code makes say what they show: axes with units, the colour scale and where it is clipped,
noisy points marked; a trace has a row per device that ran a task and a "stolen" key only where a task
was stolen.  The figure is caught at ``savefig`` and read back."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

import tileblas  # noqa: E402
from tileblas.cli import _bench_grid as G  # noqa: E402


@pytest.fixture
def saved(monkeypatch):
    """The figures saved during the test (their text read back afterwards)."""
    figs = []
    real = Figure.savefig

    def catch(self, *a, **k):
        figs.append(self)
        return real(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", catch)
    return figs


def _texts(fig):
    out = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return "\n".join(out)


def test_noisy_marks_a_control_off_one_or_within_the_noise():
    p = lambda r, c: G.Point("dgemm", 64, scipy_s=1.0, tileblas_s=1.0 / r, control_s=1.0 / c)  # noqa: E731
    assert not G.noisy(p(1.5, 1.01))
    assert G.noisy(p(1.5, 1.08))                       # control off by more than 5%
    assert G.noisy(p(1.02, 0.97))                      # the ratio lies within the control's noise
    assert G.noisy(G.Point("dgemm", 64, scipy_s=1.0, tileblas_s=1.0))  # no control timed: not trusted


def test_colour_bar_ends_say_where_they_clip():
    ticks = [0.5, 0.7, 1.0, 1.4, 2.0]
    assert G._tick_labels(ticks, "neither") == ["0.50", "0.70", "1.00", "1.40", "2.00"]
    assert G._tick_labels(ticks, "both")[0] == "\u22640.50" and G._tick_labels(ticks, "both")[-1] == "\u22652.00"
    assert G._tick_labels(ticks, "max")[0] == "0.50"


def test_grid_heat_map_is_labelled(tmp_path, saved):
    pts = [G.Point("d" + r, n, scipy_s=1.0, tileblas_s=1.0 / ratio, control_s=1.0 / c)
           for r in ("gemm", "trsm") for n, ratio, c in ((16, 3.0, 1.0), (32, 1.1, 1.2), (64, 0.9, 1.0))]
    pts.append(G.Point("dtrsm", 64, flags={"side": 1, "lower": 0, "trans_a": 0, "diag": 0}, scipy_s=1.0,
                       tileblas_s=0.8, control_s=1.0))
    G.plot_grid(pts, str(tmp_path / "g.png"))
    assert (tmp_path / "g.png").stat().st_size > 0
    fig = saved[-1]
    text = _texts(fig)
    assert "n, matrix order" in text and "routine" in text and "flags: side, lower, trans, diag" in text
    assert "speed-up = SciPy time / tileblas time" in text and "clipped: \u22652.00" in text
    assert "hatched corner: noisy" in text and "(2 of 7 points)" in text
    cbar = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"][0]
    assert cbar.get_yticklabels()[-1].get_text() == "\u2265" + f"{cbar.get_yticks()[-1]:.2f}"
    hatched = [p for ax in fig.axes for p in ax.patches if p.get_hatch()]
    assert len(hatched) == 2  # the two noisy points (control 1.2)


def test_trace_of_a_one_task_call_has_no_empty_row_and_no_stolen_key(tmp_path, saved):
    a = np.ones((40, 40))
    c = np.zeros((40, 40))
    with tileblas.Runtime(2) as rt:
        rt.gemm(1.0, a, a, 0.0, c)
        prof = rt.last_profile()
        rt.plot(str(tmp_path / "one.png"))
    fig = saved[-1]
    ax = fig.axes[0]
    busy = {r.device for r in prof.records}
    assert len(ax.get_yticklabels()) == len(busy) == 1
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("stolen" in t for t in legend)
    assert ax.get_xlabel() == "time since the first call began (ms)" and ax.get_ylabel() == "device"
    assert "1 task" in ax.get_title()


def test_trace_of_a_tiled_call_keys_stolen_tasks_only_when_there_are_some(tmp_path, saved):
    a = np.ones((256, 256))
    c = np.zeros((256, 256))
    with tileblas.Runtime(2, tile_size=32) as rt:
        rt.gemm(1.0, a, a, 0.0, c)
        prof = rt.last_profile()
        rt.plot(str(tmp_path / "tiled.png"))
    ax = saved[-1].axes[0]
    stolen = sum(r.stolen for r in prof.records)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("stolen" in t for t in legend) == (stolen > 0)
    assert len(ax.get_yticklabels()) == len({r.device for r in prof.records})
    assert math.isclose(c[0, 0], 256.0)
