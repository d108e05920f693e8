"""Sweep plots: objective gap and time per round against cluster size, one line per (mechanism, solver), one
panel per trace.

Figures are built with matplotlib's object API and rendered by Agg on save: no pyplot, so importing this
module never changes a notebook's backend, and figures can be drawn in worker threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from synergy_opt.cli.plots import new_figure, save_figure, shared_legend

Row = dict[str, Any]
_MARKERS = "osD^vP*Xh<>"
_STYLES = ("-", "--", "-.", ":")


def gap_figure(summary: Sequence[Row]) -> Figure:
    """Percent below the ideal ILP optimum (100 - % ideal) against cluster size.

    The ideal ILP (0 by definition) and its LP relaxation (at most 0) are left out: they are the reference.
    """
    return _figure(summary, "pct_ideal", lambda pct: 100.0 - pct, "gap to ideal ILP optimum (%)", log=False,
                   skip=("ideal", "ideal-lp"))


def time_figure(summary: Sequence[Row]) -> Figure:
    """Wall time to allocate one round against cluster size (log scale)."""
    return _figure(summary, "round_ms", lambda ms: ms, "time per round (ms, log scale)", log=True)


def save_plots(summary: Sequence[Row], prefix: str | Path) -> list[Path]:
    """Write ``<prefix>_gap.png`` and ``<prefix>_time.png``; returns their paths."""
    prefix = Path(prefix)
    paths = []
    for name, make in (("gap", gap_figure), ("time", time_figure)):
        paths.append(save_figure(make(summary), prefix.with_name(f"{prefix.name}_{name}.png")))
    return paths


def _figure(summary: Sequence[Row], column: str, transform: Any, ylabel: str, *, log: bool,
            skip: Sequence[str] = ()) -> Figure:
    traces = list(dict.fromkeys(row["trace"] for row in summary))
    mechanisms = list(dict.fromkeys(row["mechanism"] for row in summary))
    solvers = list(dict.fromkeys(row["solver"] for row in summary if row["solver"]))
    colours = colormaps["tab10"]
    figure = new_figure(6.5 * max(len(traces), 1), 4.8)
    axes = figure.subplots(1, max(len(traces), 1), squeeze=False)
    for axis, trace in zip(axes[0], traces, strict=False):
        for m_index, mechanism in enumerate(mechanisms):
            if mechanism in skip:
                continue
            for solver in dict.fromkeys(r["solver"] for r in summary if r["mechanism"] == mechanism):
                points = sorted(
                    (r["gpus"], transform(r[column])) for r in summary
                    if r["trace"] == trace and r["mechanism"] == mechanism and r["solver"] == solver
                    and r.get(column) is not None
                )
                if not points:
                    continue
                s_index = solvers.index(solver) if solver else 0
                axis.plot(
                    [p[0] for p in points], [p[1] for p in points], color=colours(m_index % 10),
                    marker=_MARKERS[s_index % len(_MARKERS)], linestyle=_STYLES[s_index % len(_STYLES)],
                    markersize=4, linewidth=1.2, label=f"{mechanism} ({solver})" if solver else mechanism,
                )
        axis.set_xscale("log", base=2)
        sizes = sorted({r["gpus"] for r in summary if r["trace"] == trace})
        axis.set_xticks(sizes, [str(size) for size in sizes])
        axis.xaxis.set_minor_locator(NullLocator())  # the sizes themselves label the x axis
        if log:
            axis.set_yscale("log")
        axis.set_xlabel("cluster size (GPUs)")
        axis.set_ylabel(ylabel)
        axis.set_title(f"{trace}-GPU trace" if trace in ("single", "multi") else trace)
        axis.grid(True, which="both", alpha=0.3)
    shared_legend(figure, list(axes[0]))
    figure.tight_layout()
    return figure
