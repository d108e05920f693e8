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


def gap_figure(summary: Sequence[Row], title: str = "") -> Figure:
    """Percent below the ideal ILP optimum (100 - % ideal) against cluster size.

    The ideal ILP (0 by definition) and its LP relaxation (at most 0) are left out: they are the reference.
    """
    return _figure(summary, "pct_ideal", lambda pct: 100.0 - pct, "gap to the ideal ILP optimum (%)",
                   log=False, skip=("ideal", "ideal-lp"), title=title)


def time_figure(summary: Sequence[Row], title: str = "") -> Figure:
    """Wall time to allocate one round against cluster size (log scale)."""
    return _figure(summary, "round_ms", lambda ms: ms, "time per round (ms, log scale)", log=True, title=title)


def save_plots(summary: Sequence[Row], folder: str | Path, title: str = "") -> list[Path]:
    """Write ``gap.png`` and ``time.png`` in ``folder`` (``title``: the setting, above the panels)."""
    return [save_figure(make(summary, title), Path(folder) / f"{name}.png")
            for name, make in (("gap", gap_figure), ("time", time_figure))]


def compare_figure(first: Sequence[Row], second: Sequence[Row], column: str, ylabel: str, names: tuple[str, str],
                   log: bool = False) -> Figure:
    """Two bench runs' medians of ``column`` against cluster size: the first solid, the second dashed, a colour
    per (mechanism, solver), a panel per trace."""
    keys = list(dict.fromkeys((r["mechanism"], r["solver"]) for r in [*first, *second]))
    traces = list(dict.fromkeys(r["trace"] for r in [*first, *second]))
    figure = new_figure(6.5 * max(len(traces), 1), 4.8)
    axes = figure.subplots(1, max(len(traces), 1), squeeze=False)
    for axis, trace in zip(axes[0], traces, strict=False):
        for rows, dash, marker, name in ((first, "-", "o", names[0]), (second, "--", "s", names[1])):
            for index, (mechanism, solver) in enumerate(keys):
                points = sorted((r["gpus"], r[column]) for r in rows if r["trace"] == trace
                                and (r["mechanism"], r["solver"]) == (mechanism, solver) and r.get(column) is not None)
                if points:
                    axis.plot([p[0] for p in points], [p[1] for p in points], color=colormaps["tab20"](index % 20),
                              linestyle=dash, marker=marker, markersize=5 if dash == "-" else 3.5,
                              linewidth=1.6 if dash == "-" else 1.0, label=f"{_label(mechanism, solver)} ({name})")
        _size_axis(axis, trace, sorted({r["gpus"] for r in [*first, *second] if r["trace"] == trace}), ylabel, log)
    figure.suptitle(f"{names[0]} (solid) against {names[1]} (dashed)", fontsize=10)
    shared_legend(figure, list(axes[0]))
    figure.tight_layout()
    return figure


def _setting_title(summary: Sequence[Row]) -> str:
    """What the medians are of: the seeds per point and the runs' statuses when not all optimal or ok."""
    runs = sorted({r["runs"] for r in summary if r.get("runs") is not None})
    seeds = "" if not runs else (f"{runs[0]}" if len(runs) == 1 else f"{runs[0]}-{runs[-1]}")
    return f"medians over {seeds} instance(s) per point" if seeds else ""


def _label(mechanism: str, solver: str) -> str:
    name = _NAMES.get(mechanism, mechanism)
    return f"{name} ({solver})" if solver else name


# Legend names: the bench's ideal rows are the ideal ILP's optimum (the paper's OPT, the ideal bound).
_NAMES = {"ideal": "OPT (ideal ILP bound)", "ideal-lp": "ideal LP bound", "joint": "joint optimum"}


def _figure(summary: Sequence[Row], column: str, transform: Any, ylabel: str, *, log: bool,
            skip: Sequence[str] = (), title: str = "") -> Figure:
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
                # Equal lines stay visible: each mechanism its own marker, thinner in legend order.
                axis.plot(
                    [p[0] for p in points], [p[1] for p in points], color=colours(m_index % 10),
                    marker=_MARKERS[m_index % len(_MARKERS)], linestyle=_STYLES[s_index % len(_STYLES)],
                    markersize=max(7.0 - 0.6 * m_index, 3.0), linewidth=max(2.6 - 0.25 * m_index, 0.8),
                    markerfacecolor="none" if m_index % 2 else None, alpha=0.9, label=_label(mechanism, solver),
                )
        _size_axis(axis, trace, sorted({r["gpus"] for r in summary if r["trace"] == trace}), ylabel, log)
    figure.suptitle("; ".join(t for t in (title, _setting_title(summary)) if t), fontsize=10)
    shared_legend(figure, list(axes[0]))
    figure.tight_layout()
    return figure


def _size_axis(axis: Any, trace: str, sizes: Sequence[int], ylabel: str, log: bool) -> None:
    """Cluster size on a log-2 axis labelled by the sizes themselves; a panel per trace."""
    axis.set_xscale("log", base=2)
    axis.set_xticks(sizes, [str(size) for size in sizes])
    axis.xaxis.set_minor_locator(NullLocator())
    if log:
        axis.set_yscale("log")
    axis.set_xlabel("cluster size (GPUs)")
    axis.set_ylabel(ylabel)
    axis.set_title(f"{trace}-GPU trace" if trace in ("single", "multi") else trace)
    axis.grid(True, which="both", alpha=0.3)
