"""The RBLAS benchmark's figures: the paper's figures 2-4 (forward time, reverse time and extra bytes per
mode against N) and figure 11 (RMS restore error of compute mode), as PNG files.

matplotlib is imported by :func:`plot_figures` (optional: without it there are no plots).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

__all__ = ["plot_figures", "FIGURE_OF_LEVEL", "MODE_COLORS"]

FIGURE_OF_LEVEL = {1: 2, 2: 3, 3: 4}
MODE_COLORS = {"plain": "black", "checkpoint": "tab:blue", "compute": "tab:orange", "exact": "tab:green"}


def plot_figures(rows: list[dict[str, Any]], outdir: str, log: Callable[[str], None],
                 routines: dict[int, list[str]], modes: Sequence[str]) -> list[str]:
    """Figures 2-4 (forward time, reverse time and extra bytes against N, per mode, one column per
    routine) and figure 11 (RMS restore error of compute mode against N) as PNG files.  ``rows``: the
    sweep's rows; ``routines``: the paper's routines per level (drawn first, in this order); ``modes``: the
    modes swept (drawn beside the plain call)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("  matplotlib not installed: no plots")
        return []
    files = []
    rows_of = lambda name, mode: [r for r in rows if r["routine"] == name and r["mode"] == mode]  # noqa: E731
    for level in sorted({r["level"] for r in rows}):
        names = [n for n in routines.get(level, []) if any(r["routine"] == n for r in rows)]
        names += sorted({r["routine"] for r in rows if r["level"] == level} - set(names))
        fig, axes = plt.subplots(3, len(names), figsize=(4.5 * len(names), 10), squeeze=False)
        for j, name in enumerate(names):
            for i, (key, label) in enumerate((("forward_s", "forward"), ("reverse_s", "reverse"),
                                              ("extra_bytes", "extra bytes held"))):
                ax = axes[i][j]
                for mode in ("plain", *modes):
                    pts = [(r["n"], r[key] * (1e6 if key != "extra_bytes" else 1)) for r in rows_of(name, mode)
                           if r[key] is not None and (key != "extra_bytes" or mode != "plain")]
                    pts = [(x, y) for x, y in pts if y > 0]
                    if pts:
                        ax.loglog(*zip(*pts), marker="o", label=mode, color=MODE_COLORS[mode])
                ax.set_title(f"{name}: {label}")
                ax.set_xlabel("N")
                ax.set_ylabel("bytes" if key == "extra_bytes" else "us per call")
                ax.legend(fontsize=7)
        fig.suptitle(f"RBLAS Level {level} on the CPU (paper figure {FIGURE_OF_LEVEL[level]}); "
                     "zero extra bytes are not drawn")
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.06, top=0.92, hspace=0.4, wspace=0.3)
        path = os.path.join(outdir, f"rblas_fig{FIGURE_OF_LEVEL[level]}_level{level}.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files.append(path)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    floor = 1e-18
    for name in [n for ns_ in routines.values() for n in ns_]:
        pts = [(r["n"], max(r["rms"], floor)) for r in rows_of(name, "compute") if r["rms"] is not None]
        if pts:
            ax.loglog(*zip(*pts), marker="o", label=name)
    ax.axhline(1e-3, color="grey", linestyle="--", linewidth=1)
    ax.text(ax.get_xlim()[0], 1.3e-3, " paper's reference e = 0.001 (relative 1e-6)", fontsize=7)
    ax.set_title("compute mode: RMS restore error after n forward + n reverse (figure 11)")
    ax.set_xlabel("N (L1: vector length; L2/L3: matrix order)")
    ax.set_ylabel(f"RMS (values a+R*b, a=b=1000; 0 drawn at {floor:g})")
    ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.12, top=0.9)
    path = os.path.join(outdir, "rblas_fig11_rms.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(path)
    return files
