"""A sweep's figures: average JCT against load (paper Figures 7-9, 11), the JCT CDF, and GPU, CPU and memory
use over time (Figure 10).

One panel per setting that the sweep varies besides load (policy, split, CPU:GPU ratio, ...), one line per
mechanism, in the same colour in every figure. Figures are drawn by Agg (no pyplot), as the bench's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

from synergy_opt.cli.plots import new_figure, save_figure, shared_legend
from synergy_opt.sim.sweep import SETTING_COLUMNS, varying

Row = Mapping[str, Any]
_MARKERS = "osD^vP*Xh<>"
# A panel per value of what the sweep varies, but load (the x axis) and the seed (averaged, or pooled).
_PANEL_COLUMNS = tuple(c for c in SETTING_COLUMNS if c not in ("load", "seed", "mechanism", "trace_jobs"))
MAX_USE_FIGURES = 12  # use-over-time figures drawn per sweep (one per setting, first seed)


def jct_vs_load_figure(table: Sequence[Row]) -> Figure:
    """Average JCT (mean over seeds) against load, a line per mechanism, a panel per other setting."""
    panels = _panels(table)
    mechanisms = _mechanisms(table)
    figure, axes = _grid(len(panels))
    for axis, (title, rows) in zip(axes, panels.items(), strict=False):
        for mechanism in mechanisms:
            points = sorted((r["load"], r["avg_jct_h"]) for r in rows
                            if r["mechanism"] == mechanism and r["load"] is not None)
            if points:
                axis.plot([p[0] for p in points], [p[1] for p in points], **_style(mechanisms, mechanism))
        axis.set_xlabel("load (jobs/hour)")
        axis.set_ylabel("average JCT (hours)")
        axis.set_title(title, fontsize=9)
        axis.grid(True, alpha=0.3)
    shared_legend(figure, axes)
    figure.tight_layout()
    return figure


def jct_cdf_figure(jobs: pd.DataFrame) -> Figure:
    """The CDF of the monitored jobs' JCT (hours, log scale), pooled over seeds; a panel per setting and load."""
    monitored = jobs[jobs["monitored"] & jobs["jct_s"].notna()]
    rows = monitored[[*SETTING_COLUMNS]].drop_duplicates().to_dict("records")
    panel_columns = varying(rows, [c for c in SETTING_COLUMNS if c not in ("seed", "mechanism")])
    mechanisms = list(dict.fromkeys(monitored["mechanism"]))
    groups = list(monitored.groupby(panel_columns, sort=False, dropna=False)) if panel_columns else [((), monitored)]
    figure, axes = _grid(len(groups))
    for axis, (key, group) in zip(axes, groups, strict=False):
        for mechanism in mechanisms:
            hours = np.sort(group.loc[group["mechanism"] == mechanism, "jct_s"].to_numpy() / 3600.0)
            if hours.size:
                axis.step(hours, np.arange(1, hours.size + 1) / hours.size, where="post",
                          **_style(mechanisms, mechanism, marker=False))
        axis.set_xscale("log")
        axis.set_xlabel("JCT (hours, log scale)")
        axis.set_ylabel("fraction of monitored jobs")
        values = key if isinstance(key, tuple) else (key,)
        axis.set_title(_title(dict(zip(panel_columns, values, strict=True))) or "all runs", fontsize=9)
        axis.grid(True, which="both", alpha=0.3)
    shared_legend(figure, axes)
    figure.tight_layout()
    return figure


def use_figure(rounds: pd.DataFrame, title: str = "") -> Figure:
    """GPU, CPU and memory in use (% of the cluster) over time, a line per mechanism (paper Figure 10)."""
    mechanisms = list(dict.fromkeys(rounds["mechanism"]))
    figure = new_figure(9.0, 7.0)
    axes = list(figure.subplots(3, 1, sharex=True))
    for axis, (column, label) in zip(axes, (("gpu_util_pct", "GPU"), ("cpu_util_pct", "CPU"),
                                            ("mem_util_pct", "memory")), strict=True):
        for mechanism in mechanisms:
            mine = rounds[rounds["mechanism"] == mechanism]
            axis.step(mine["time_s"] / 3600.0, mine[column], where="post", linewidth=0.8,
                      **_style(mechanisms, mechanism, marker=False))
        axis.set_ylabel(f"{label} in use (%)")
        axis.set_ylim(0, 105)
        axis.grid(True, alpha=0.3)
    axes[-1].set_xlabel("time (hours)")
    axes[0].set_title(title, fontsize=9)
    shared_legend(figure, axes)
    figure.tight_layout()
    return figure


def save_sweep_plots(table: Sequence[Row], jobs: pd.DataFrame, rounds: pd.DataFrame, folder: Path) -> list[Path]:
    """Write ``jct_vs_load.png``, ``jct_cdf.png`` and ``use_<setting>.png`` (first seed of each setting, at most
    ``MAX_USE_FIGURES``) in ``folder``; returns their paths."""
    paths = [save_figure(jct_vs_load_figure(table), folder / "jct_vs_load.png")]
    if len(jobs):
        paths.append(save_figure(jct_cdf_figure(jobs), folder / "jct_cdf.png"))
    if len(rounds):
        rows = rounds[[*SETTING_COLUMNS]].drop_duplicates().to_dict("records")
        keys = varying(rows, [c for c in SETTING_COLUMNS if c not in ("seed", "mechanism")])
        first_seed = rounds[rounds["seed"] == rounds["seed"].iloc[0]]
        groups = list(first_seed.groupby(keys, sort=False, dropna=False)) if keys else [((), first_seed)]
        for key, group in groups[:MAX_USE_FIGURES]:
            values = key if isinstance(key, tuple) else (key,)
            title = _title(dict(zip(keys, values, strict=True)))
            name = re.sub(r"[^A-Za-z0-9.=,-]+", "_", title.replace(" ", "")) or "all"
            paths.append(save_figure(use_figure(group, title), folder / f"use_{name}.png"))
    return paths


def _panels(table: Sequence[Row]) -> dict[str, list[Row]]:
    columns = varying(table, _PANEL_COLUMNS)
    panels: dict[str, list[Row]] = {}
    for row in table:
        panels.setdefault(_title({c: row[c] for c in columns}) or "all runs", []).append(row)
    return panels


def _title(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{column}={_text(value)}" for column, value in values.items())


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "static"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _mechanisms(rows: Sequence[Row]) -> list[str]:
    return list(dict.fromkeys(row["mechanism"] for row in rows))


def _style(mechanisms: Sequence[str], mechanism: str, marker: bool = True) -> dict[str, Any]:
    index = mechanisms.index(mechanism)
    style: dict[str, Any] = {"color": colormaps["tab10"](index % 10), "label": mechanism}
    if marker:
        style.update(marker=_MARKERS[index % len(_MARKERS)], markersize=4, linewidth=1.2)
    return style


def _grid(panels: int) -> tuple[Figure, list[Any]]:
    columns = min(max(panels, 1), 3)
    rows = -(-max(panels, 1) // columns)
    figure = new_figure(5.0 * columns, 3.8 * rows)
    axes = list(figure.subplots(rows, columns, squeeze=False).ravel())
    for axis in axes[panels:]:
        axis.set_visible(False)
    return figure, axes[: max(panels, 1)]
