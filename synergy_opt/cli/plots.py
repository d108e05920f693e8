"""Figure helpers both command lines share: an Agg figure, an atomic PNG, one legend for many panels."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from synergy_opt.files import atomic_path


def new_figure(width: float, height: float) -> Figure:
    """An empty figure drawn by Agg (no pyplot, so a notebook's backend is left alone)."""
    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    return figure


def save_figure(figure: Figure, path: Path) -> Path:
    """Write ``figure`` as a PNG at ``path``, atomically; returns the path."""
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=110, bbox_inches="tight", format="png")
    return path


def shared_legend(figure: Figure, axes: Sequence[Any]) -> None:
    """One legend right of the panels, with every label of any panel once."""
    handles, labels = [], []
    for axis in axes:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    figure.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7, frameon=False)
