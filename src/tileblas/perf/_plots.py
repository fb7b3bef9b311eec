"""PNG plots of models and predictions, after the paper's figures (matplotlib, Agg, imported lazily).

Design note
    * :func:`plot_vs_size` -- efficiency against n per variant: predicted median line with the min-max
      band, measured points (Fig. IV.1).
    * :func:`plot_vs_block` -- the same against the block size at fixed n (Fig. IV.2).
    * :func:`plot_regions` -- the regions of a two-parameter submodel coloured by their relative error
      (Figs. III.6 / III.7), with validation points if given.
    Each returns the path it wrote.  Data come in as plain dicts so the CLI, the benchmark and users can
    all call them.

What it must not touch
    Models and measurements: it only draws what it is given.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

__all__ = ["plot_vs_size", "plot_vs_block", "plot_regions"]


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - matplotlib is an optional dependency
        raise ImportError("plotting needs matplotlib: pip install 'tileblas[plot]'") from exc
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _series_plot(x_name: str, series: Mapping[Any, Mapping[str, Sequence[float]]], path: str | os.PathLike[str],
                 title: str, ylabel: str) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, s) in enumerate(series.items()):
        col = colors[i % len(colors)]
        x = list(s["x"])
        if "median" in s:
            ax.plot(x, s["median"], "-", color=col, label=f"{label} predicted")
        if "min" in s and "max" in s:
            ax.fill_between(x, s["min"], s["max"], color=col, alpha=0.15, linewidth=0)
        if "measured" in s:
            mx = list(s.get("measured_x", x))
            ax.plot(mx, s["measured"], "o", color=col, ms=4, label=f"{label} measured")
    ax.set_xlabel(x_name)
    ax.set_ylabel(ylabel)
    ax.set_title(title + ("\nline: predicted median, band: predicted min-max, dots: measured"
                          if any("min" in s for s in series.values()) else ""), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=100)
    plt.close(fig)
    return os.fspath(path)


def plot_vs_size(series: Mapping[Any, Mapping[str, Sequence[float]]], path: str | os.PathLike[str],
                 title: str = "efficiency vs matrix size",
                 ylabel: str = "efficiency (flops per second / the machine's peak)") -> str:
    """Efficiency against n, one entry per variant: ``{"x", "median", "min", "max", "measured"}`` lists
    (the band: predicted min to max)."""
    return _series_plot("n (matrix order)", series, path, title, ylabel)


def plot_vs_block(series: Mapping[Any, Mapping[str, Sequence[float]]], path: str | os.PathLike[str],
                  title: str = "efficiency vs block size",
                  ylabel: str = "efficiency (flops per second / the machine's peak)") -> str:
    """Efficiency against the block size, one entry per variant (same dict layout as :func:`plot_vs_size`)."""
    return _series_plot("block size", series, path, title, ylabel)


def plot_regions(submodel: Any, path: str | os.PathLike[str], validation: Sequence[tuple[Sequence[int], float]] = (),
                 dims: tuple[int, int] = (0, 1)) -> str:
    """Regions of a submodel coloured by relative error; 1-parameter models are drawn as intervals.

    Parameters
    ----------
    submodel : Submodel
    path : path-like
        PNG file to write.
    validation : sequence of (sizes, relative error), optional
        Validation points, drawn as dots coloured on the same scale.
    dims : (int, int)
        Which two size parameters span the plot.
    """
    plt = _pyplot()
    from matplotlib import cm, colors
    from matplotlib.patches import Rectangle

    fig, ax = plt.subplots(figsize=(6, 5))
    errs = [r.error for r in submodel.regions] + [e for _, e in validation]
    norm = colors.Normalize(vmin=0.0, vmax=max(max(errs, default=0.1), 1e-12))
    cmap = cm.get_cmap("viridis") if hasattr(cm, "get_cmap") else plt.get_cmap("viridis")
    two = len(submodel.size_names) >= 2
    for r in submodel.regions:
        x0, x1 = r.lo[dims[0]], r.hi[dims[0]]
        if two:
            y0, y1 = r.lo[dims[1]], r.hi[dims[1]]
        else:
            y0, y1 = 0, 1
        ax.add_patch(Rectangle((x0, y0), max(x1 - x0, 1), max(y1 - y0, 1), facecolor=cmap(norm(r.error)),
                               edgecolor="k", linewidth=0.5))
    if validation:
        vx = [p[dims[0]] for p, _ in validation]
        vy = [p[dims[1]] if two else 0.5 for p, _ in validation]
        ax.scatter(vx, vy, c=[e for _, e in validation], cmap=cmap, norm=norm, s=8, edgecolors="w", linewidths=0.3)
    ax.set_xlim(submodel.lo[dims[0]], submodel.hi[dims[0]])
    ax.set_ylim((submodel.lo[dims[1]], submodel.hi[dims[1]]) if two else (0, 1))
    ax.set_xlabel(submodel.size_names[dims[0]])
    if two:
        ax.set_ylabel(submodel.size_names[dims[1]])
    ax.set_title(f"{submodel.routine} {''.join(submodel.flags)}: {len(submodel.regions)} regions, "
                 f"{submodel.samples} samples")
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="relative error (median)")
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=100)
    plt.close(fig)
    return os.fspath(path)
