"""A sweep's figures: average JCT against load (paper Figures 7-9, 11), the JCT CDF, and GPU, CPU and memory
use over time (Figure 10), and two sweeps' average JCT together (``compare``).

One panel per setting that the sweep varies besides load (policy, split, CPU:GPU ratio, ...), one line per
mechanism, in the same colour, marker and dash in every figure; the settings that do not vary title the figure.
Lines that coincide stay visible: each mechanism has its own dash pattern and marker, and the lines thin out in
legend order, so a later one is drawn inside an earlier one. ``ideal`` is labelled as what the paper calls OPT
(the ideal bound). Figures are drawn by Agg (no pyplot), as the bench's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps, ticker
from matplotlib.figure import Figure

from synergy_opt.cli.plots import new_figure, save_figure, shared_legend
from synergy_opt.sim.sweep import SETTING_COLUMNS, generator_only, varying

Row = Mapping[str, Any]
# (mechanism, the load it sustains in jobs/h, "measured" or "bound")
Capacity = tuple[str, float, str]
_MARKERS = "osD^vP*Xh<>"
_DASHES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 1)))
# Legend names where the CLI's differ from the paper's.
LABELS = {"ideal": "OPT (ideal bound)", "ideal-type-free": "type-free ideal bound", "joint": "joint optimum",
          "tune": "TUNE", "proportional": "proportional"}
# A panel per value of what the sweep varies, but load (the x axis) and the seed (averaged, or pooled).
_PANEL_COLUMNS = tuple(c for c in SETTING_COLUMNS if c not in ("load", "seed", "mechanism", "trace_jobs"))
MAX_USE_FIGURES = 12  # use-over-time figures drawn per sweep (one per setting, first seed)


def jct_vs_load_figure(table: Sequence[Row], capacities: Sequence[Capacity] = ()) -> Figure:
    """Average JCT (mean over seeds) against load, a line per mechanism, a panel per other setting.

    ``capacities``: ``(mechanism, jobs/h, kind)`` drawn in every panel as a marker on the load axis in the
    mechanism's colour, filled with a dotted line for ``"measured"``, hollow for ``"bound"``: where the
    cluster stops sustaining the load (:mod:`synergy_opt.sim.capacity`).
    """
    panels = _panels(table)
    mechanisms = _mechanisms(table)
    mechanisms += [m for m, _, _ in capacities if m not in mechanisms]
    figure, axes = _grid(len(panels))
    figure.suptitle(setting_title(table, ("load",)), fontsize=10)
    for axis, (title, rows) in zip(axes, panels.items(), strict=False):
        for mechanism in mechanisms:
            points = sorted((r["load"], r["avg_jct_h"]) for r in rows
                            if r["mechanism"] == mechanism and r["load"] is not None)
            if points:
                axis.plot([p[0] for p in points], [p[1] for p in points], **_style(mechanisms, mechanism))
        _capacity_markers(axis, mechanisms, capacities)
        _load_axis(axis, title)
    return _finished(figure, axes)


def _capacity_markers(axis: Any, mechanisms: Sequence[str], capacities: Sequence[Capacity]) -> None:
    for mechanism, load, kind in capacities:
        style = _style(mechanisms, mechanism)
        color = style["color"]
        measured = kind == "measured"
        if measured:
            axis.axvline(load, color=color, linestyle=":", linewidth=0.9)
        axis.plot([load], [0.0], marker=style["marker"], markersize=8, clip_on=False, linestyle="none",
                  color=color, markerfacecolor=color if measured else "none",
                  transform=axis.get_xaxis_transform(), label=f"{mechanism}: capacity ({kind})")


def jct_cdf_figure(jobs: pd.DataFrame) -> Figure:
    """The CDF of the monitored jobs' JCT (hours, log scale), pooled over seeds; a panel per setting and load."""
    monitored = jobs[jobs["monitored"].astype(bool) & jobs["jct_s"].notna()]
    rows = monitored[[*SETTING_COLUMNS]].drop_duplicates().to_dict("records")
    panel_columns = varying(rows, [c for c in SETTING_COLUMNS if c not in ("seed", "mechanism")])
    mechanisms = list(dict.fromkeys(monitored["mechanism"]))
    groups = list(monitored.groupby(panel_columns, sort=False, dropna=False)) if panel_columns else [((), monitored)]
    figure, axes = _grid(len(groups), share_x=True)  # one JCT scale: panels compare at a glance
    figure.suptitle(setting_title(rows, ()), fontsize=10)
    # Plain numbers at 1, 2 and 5 of each decade over a span of up to 3 decades, at each decade over more (within
    # one decade matplotlib labelled the minor ticks too, over 5 the 1-2-5 labels ran into each other); the axis
    # is shared, so one span for all panels.
    hours_all = monitored["jct_s"].to_numpy() / 3600.0
    positive = hours_all[hours_all > 0]
    decades = float(np.log10(positive.max() / positive.min())) if positive.size else 0.0
    subs = (1.0, 2.0, 5.0) if decades <= 3 else (1.0,)
    for axis, (key, group) in zip(axes, groups, strict=False):
        for mechanism in mechanisms:
            hours = np.sort(group.loc[group["mechanism"] == mechanism, "jct_s"].to_numpy() / 3600.0)
            if hours.size:
                axis.step(hours, np.arange(1, hours.size + 1) / hours.size, where="post",
                          markevery=max(hours.size // 8, 1), **_style(mechanisms, mechanism))
        axis.set_xscale("log")
        axis.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
        axis.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
        axis.xaxis.set_minor_formatter(ticker.NullFormatter())
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
            axis.step(mine["time_s"] / 3600.0, mine[column], where="post",
                      **_style(mechanisms, mechanism, marker=False, thin=True))
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
    # A trace file has no load axis: its figure would be empty panels.
    paths = [save_figure(jct_vs_load_figure(table), folder / "jct_vs_load.png")] if has_load(table) else []
    if len(jobs):
        paths.append(save_figure(jct_cdf_figure(jobs), folder / "jct_cdf.png"))
    if len(rounds):
        rows = rounds[[*SETTING_COLUMNS]].drop_duplicates().to_dict("records")
        keys = varying(rows, [c for c in SETTING_COLUMNS if c not in ("seed", "mechanism")])
        first_seed = rounds[rounds["seed"] == rounds["seed"].iloc[0]]
        groups = list(first_seed.groupby(keys, sort=False, dropna=False)) if keys else [((), first_seed)]
        fixed = setting_title(first_seed[[*SETTING_COLUMNS]].drop_duplicates().to_dict("records"), keys)
        for key, group in groups[:MAX_USE_FIGURES]:
            values = key if isinstance(key, tuple) else (key,)
            title = _title(dict(zip(keys, values, strict=True)))
            name = re.sub(r"[^A-Za-z0-9.=,-]+", "_", title.replace(" ", "")) or "all"
            paths.append(save_figure(use_figure(group, "; ".join(t for t in (title, fixed) if t)),
                                     folder / f"use_{name}.png"))
    return paths


def compare_figure(first: Sequence[Row], second: Sequence[Row], names: tuple[str, str]) -> Figure:
    """Two sweeps' average JCT against load (their tables): the first solid with circles, the second dashed with
    squares, a colour per mechanism, a panel per other setting of the first."""
    mechanisms = list(dict.fromkeys([*_mechanisms(first), *_mechanisms(second)]))
    panels_first, panels_second = _panels(first), _panels(second)
    titles = list(dict.fromkeys([*panels_first, *panels_second]))
    figure, axes = _grid(len(titles))
    figure.suptitle(f"{names[0]} (solid) against {names[1]} (dashed); {setting_title([*first, *second], ('load',))}",
                    fontsize=10)
    for axis, title in zip(axes, titles, strict=False):
        for rows, dash, marker, name in ((panels_first.get(title, []), "-", "o", names[0]),
                                         (panels_second.get(title, []), "--", "s", names[1])):
            for mechanism in mechanisms:
                points = sorted((r["load"], r["avg_jct_h"]) for r in rows
                                if r["mechanism"] == mechanism and r["load"] is not None)
                if points:
                    colour = colormaps["tab10"](mechanisms.index(mechanism) % 10)
                    solid = dash == "-"
                    axis.plot([p[0] for p in points], [p[1] for p in points], color=colour, linestyle=dash,
                              marker=marker, markersize=5 if solid else 3.5, linewidth=1.6 if solid else 1.0,
                              label=f"{LABELS.get(mechanism, mechanism)} ({name})")
        _load_axis(axis, title)
    return _finished(figure, axes)


def _load_axis(axis: Any, title: str) -> None:
    axis.set_xlabel("load (jobs/hour)")
    axis.set_ylabel("average JCT (hours)")
    axis.set_title(title, fontsize=9)
    axis.grid(True, alpha=0.3)


def _finished(figure: Figure, axes: Sequence[Any]) -> Figure:
    shared_legend(figure, axes)
    figure.tight_layout()
    return figure


# What a figure's title says of a setting that does not vary, in the order of SETTING_COLUMNS.
_TITLE_WORDS = {
    "trace": lambda v: "" if v == "generated" else f"trace {v}", "cluster_gpus": lambda v: f"{v} GPUs",
    "cpu_per_gpu": lambda v: f"{v} CPUs/GPU", "policy": lambda v: str(v).upper(),
    "load": lambda v: f"{_text(v)} jobs/h" if _text(v) != "static" else "static trace",
    "split": lambda v: f"split ({v})", "multi_gpu": lambda v: "multi-GPU" if str(v) == "True" else "single-GPU",
    "profile_noise": lambda v: "" if not v else f"noise {v:g}", "job_kind": lambda v: "" if v == "builtin" else str(v),
    "round_s": lambda v: f"{_text(v)} s rounds",
}


def setting_title(rows: Sequence[Row], skip: Sequence[str]) -> str:
    """The settings the rows share (but ``skip`` and what varies), as words: ``128 GPUs, FIFO, split (20,70,10),
    single-GPU, 300 s rounds``; and the seeds."""
    if not rows:
        return ""
    columns = [c for c in _TITLE_WORDS if c not in skip and c not in generator_only(rows)]
    swept = set(varying(rows, columns))
    words = [_TITLE_WORDS[c](rows[0][c]) for c in columns if c not in swept and c in rows[0]]
    seeds = sorted({str(v) for row in rows for v in str(row.get("seeds", row.get("seed", ""))).split(",") if v})
    text = ", ".join(word for word in words if word)
    return text + (f"; seeds {','.join(seeds)}" if seeds else "")


def has_load(table: Sequence[Row]) -> bool:
    """Whether some row of a sweep's table ran at a load (a generated trace; a file's has none)."""
    return any(row.get("load") not in (None, "") for row in table)


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


def _style(mechanisms: Sequence[str], mechanism: str, marker: bool = True, thin: bool = False) -> dict[str, Any]:
    """A mechanism's colour, dash and marker, the same in every figure; lines thin out in legend order, so that
    one drawn over an equal one leaves the first visible around it."""
    index = mechanisms.index(mechanism)
    width = max(2.6 - 0.5 * index, 0.8) * (0.5 if thin else 1.0)
    style: dict[str, Any] = {"color": colormaps["tab10"](index % 10), "label": LABELS.get(mechanism, mechanism),
                             "linestyle": _DASHES[index % len(_DASHES)], "linewidth": width, "alpha": 0.9}
    if marker:
        style.update(marker=_MARKERS[index % len(_MARKERS)], markersize=max(7.0 - 1.2 * index, 3.0),
                     markerfacecolor="none" if index % 2 else None)
    return style


def _grid(panels: int, share_x: bool = False) -> tuple[Figure, list[Any]]:
    columns = min(max(panels, 1), 3)
    rows = -(-max(panels, 1) // columns)
    figure = new_figure(5.0 * columns, 3.8 * rows + 0.4)
    axes = list(figure.subplots(rows, columns, squeeze=False, sharex=share_x).ravel())
    for axis in axes[panels:]:
        axis.set_visible(False)
    return figure, axes[: max(panels, 1)]
