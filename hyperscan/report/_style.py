# SPDX-License-Identifier: GPL-3.0-or-later
"""Figures without pyplot: one look for every report figure, PNG bytes out.

``matplotlib.figure.Figure`` renders through Agg by itself, so no global backend is switched and
nothing depends on a display or on pyplot's global state (reports can be built in any process,
also one with another backend selected).
"""

from __future__ import annotations

import base64
import io
import math
from contextlib import AbstractContextManager

import numpy as np
from matplotlib.axis import Axis
from matplotlib.figure import Figure

DPI = 110

#: Colours by trial state (hyperscan's states: trashed apart from pruned).
STATE_COLOURS = {
    "complete": "#1f77b4",
    "pruned": "#8c8c8c",
    "trashed": "#d62728",
    "fail": "#8c564b",
    "running": "#2ca02c",
    "waiting": "#bcbd22",
}
STATE_ORDER = ("complete", "pruned", "trashed", "fail", "running", "waiting")

BAND = "#1f77b4"  # the fit's 68% band and median
TRUTH = "#111111"  # the closure truth
HELD_OUT = "#9467bd"  # members of a k-fold fit whose fold held the dataset out
#: The partons' labels in every PDF figure.
PARTON_LABELS = {
    "u": "$u$",
    "ubar": r"$\bar u$",
    "d": "$d$",
    "dbar": r"$\bar d$",
    "s": "$s$",
    "sbar": r"$\bar s$",
    "c": "$c$",
    "b": "$b$",
    "g": "$g$",
}

_RC = {
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.labelsize": 9.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "legend.fontsize": 8,
    "legend.framealpha": 0.85,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def style() -> AbstractContextManager[None]:
    """Context for building figures: the report's rc settings (read as artists are created)."""
    import matplotlib

    return matplotlib.rc_context(_RC)


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches with constrained layout (build it in style())."""
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def png_bytes(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, facecolor="white")
    return buffer.getvalue()


def data_uri(figure: Figure) -> str:
    """The figure as a ``data:`` URI: the HTML report needs no other file and no network."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(figure)).decode("ascii")


def wants_log(values: np.ndarray, ratio: float = 20.0) -> bool:
    """A log axis when positive values span more than ``ratio`` (chi2 of bad and good trials)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return values.size > 1 and values.min() > 0 and values.max() / values.min() > ratio


def _log_label(value: float, _position: object = None) -> str:
    if value <= 0:
        return ""
    exponent = math.floor(math.log10(value) + 1e-9)
    mantissa = round(value / 10.0**exponent, 6)
    if exponent in (-1, 0, 1, 2):
        return f"{value:g}"
    if mantissa == 1:
        return f"$10^{{{exponent}}}$"
    return f"${mantissa:g}\\times10^{{{exponent}}}$"


def log_axis(axis: Axis, low: float, high: float) -> None:
    """A log scale labelled at 1, 2, 5 x 10^k over up to two decades, at 10^k beyond.

    Matplotlib labels minor ticks of short log ranges itself, and its labels then overlap.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if axis.axis_name == "x":
        axis.axes.set_xscale("log")
    else:
        axis.axes.set_yscale("log")
    decades = math.log10(high / low) if low > 0 and high > low else 1.0
    subs = (1.0, 2.0, 5.0) if decades <= 2.2 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(_log_label))
    axis.set_minor_formatter(NullFormatter())
