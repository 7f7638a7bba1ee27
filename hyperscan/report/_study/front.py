# SPDX-License-Identifier: GPL-3.0-or-later
"""A multi-objective study's Pareto front: a table of its trials and a scatter of the first two
objectives with the front marked (build the figure in ``style()``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from hyperscan.report._study.tables import _fmt, escape, html_table
from hyperscan.report._study.trials import Trials
from hyperscan.report._style import STATE_COLOURS, data_uri, new_figure, wants_log
from hyperscan.runcard import ScanRuncard
from hyperscan.score import objective_label

_FRONT = "#ff7f0e"


def front_figure(trials: Trials, front: Sequence[int], names: Sequence[str]) -> Figure:
    """The complete trials in the plane of the first two objectives (``names``: their axis
    labels), the front joined."""
    figure = new_figure(6.4, 4.6)
    ax = figure.subplots()
    values = np.array([t.values[:2] for t in trials.complete if t.values], dtype=float)
    on = np.array([t.number in front for t in trials.complete if t.values], dtype=bool)
    ax.scatter(*values[~on].T, s=22, color=STATE_COLOURS["complete"], label="complete", zorder=3)
    shown = values[on][np.argsort(values[on][:, 0])]
    ax.plot(*shown.T, color=_FRONT, lw=1.2, alpha=0.7, zorder=2)
    ax.scatter(*shown.T, s=40, color=_FRONT, edgecolors="k", lw=0.5, label="Pareto front", zorder=4)
    for axis, column, name in ((ax.xaxis, 0, names[0]), (ax.yaxis, 1, names[1])):
        if wants_log(values[:, column]):
            (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
        axis.set_label_text(name)
    ax.legend(loc="best")
    return figure


def front_section(trials: Trials, front: Sequence[int], card: ScanRuncard | None) -> str:
    """The front's section of the page; empty for a single-objective study."""
    if card is None or not card.scan.objective.multi:
        return ""
    objective, folds = card.scan.objective, len(card.scan.folds)
    names = objective.names
    described = "; ".join(
        f"{e.name} ({e.direction}): {objective_label(e, folds)}" for e in objective.entries
    )
    head = (
        '<section id="front"><h2>Pareto front</h2><p>A multi-objective study: '
        f"{escape(described)}. The front holds the complete trials no other trial beats in "
        "every objective; <code>hyperscan export --rule</code> chooses one of them "
        "(docs/objectives.md). The other sections show the first objective.</p>"
    )
    on = [t for t in trials.complete if t.number in set(front) and t.values]
    if not on:
        return head + "<p>No trial is complete yet: the front is empty.</p></section>"
    rows = [
        [t.number, *t.values, ", ".join(f"{k}={_fmt(v)}" for k, v in t.params.items())]
        for t in sorted(on, key=lambda t: t.number)
    ]
    table = html_table(["trial", *names, "parameters"], rows, numeric=set(range(len(names) + 1)))
    axes = [f"{e.name} ({e.direction})" for e in objective.entries[:2]]
    figure = front_figure(trials, front, axes)
    alt = escape(f"Pareto front of {names[0]} and {names[1]}")
    image = f'<img src="{data_uri(figure)}" alt="{alt}">'
    return head + table + image + "</section>"
