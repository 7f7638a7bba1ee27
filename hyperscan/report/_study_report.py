# SPDX-License-Identifier: GPL-3.0-or-later
"""The HTML report of a study: one self-contained page a physicist reads after a scan.

Everything is on the page: figures are PNGs in ``data:`` URIs, the style is a few lines of
inline CSS, and there is no JavaScript, so the file opens anywhere, offline, and can be mailed
or attached to a logbook. Sections: summary, objective history with the running best, the
statistic against each hyperparameter (pruned and trashed trials apart, with reasons),
parameter importances, the spread of replica chi2 per trial, the best trials, trial states and
worker throughput over time, the trials set apart, and the study's runcard. A study whose
finished trials were all pruned, trashed or failed gets the page too, saying that nothing is
best: where those trials went and why is what its user needs then.
"""

from __future__ import annotations

import datetime
import html
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from hyperscan import __version__
from hyperscan.report._style import (
    STATE_COLOURS,
    STATE_ORDER,
    data_uri,
    log_axis,
    new_figure,
    style,
    wants_log,
)
from hyperscan.runcard import RuncardError, ScanRuncard, parse_scan_runcard
from hyperscan.scan import RUNCARD_ATTR, last_report, retries, state_counts, trashed

__all__ = ["ReportError", "study_report"]

_BEST = "#ff7f0e"
_MAX_LISTED = 60  # rows of the "set apart" table


class ReportError(Exception):
    """Nothing to report on yet (no finished trial): a message for the user, not a bug."""


# --------------------------------------------------------------------------- the trials


@dataclass
class _Trials:
    """A study's trials split the way hyperscan reads them (trashed apart from pruned)."""

    all: list[FrozenTrial]
    complete: list[FrozenTrial] = field(default_factory=list)
    pruned: list[FrozenTrial] = field(default_factory=list)  # stopped by the pruner
    trashed: list[FrozenTrial] = field(default_factory=list)  # diverged replicas
    failed: list[FrozenTrial] = field(default_factory=list)

    def __post_init__(self) -> None:
        for trial in self.all:
            if trial.state == TrialState.COMPLETE and _finite(trial.value):
                self.complete.append(trial)
            elif trial.state == TrialState.PRUNED:
                (self.trashed if trashed(trial) else self.pruned).append(trial)
            elif trial.state == TrialState.FAIL:
                self.failed.append(trial)

    @property
    def ranked(self) -> list[FrozenTrial]:
        return sorted(self.complete, key=lambda t: (t.value, t.number))


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# --------------------------------------------------------------------------- labels


def _runcard(study: optuna.Study) -> tuple[ScanRuncard | None, str | None]:
    text = study.user_attrs.get(RUNCARD_ATTR)
    if not isinstance(text, str):
        return None, None
    try:
        return parse_scan_runcard(text, source=f"runcard of study {study.study_name!r}"), text
    except RuncardError:
        return None, text  # another hyperscan version's runcard: shown, not interpreted


def _category(card: ScanRuncard | None) -> str:
    """The chi2 the objective scores: validation, or held_out for k-fold studies."""
    if card is not None and card.scan.objective.chi2 == "held_out":
        return "held_out"
    return "validation"


def _objective_text(card: ScanRuncard | None) -> tuple[str, str]:
    """(sentence, axis label) of what the trial value is."""
    if card is None:
        return "the trial value", "trial value"
    objective = card.scan.objective
    statistic = {
        "mean": "mean",
        "median": "median",
        "trimmed_mean": f"trimmed mean (best {objective.best_fraction:.0%})",
        "max": "maximum",
        "mean_plus_std": f"mean + {objective.std_weight:g}·std",
    }[objective.statistic]
    chi2 = "held-out" if objective.chi2 == "held_out" else "validation"
    sentence = f"{statistic} over {card.scan.replicas} replicas of the {chi2} χ² per point"
    if card.scan.folds:
        sentence += f", {objective.fold_statistic} over {len(card.scan.folds)} folds"
    return sentence, f"{statistic} {chi2} χ²/point"


# --------------------------------------------------------------------------- figures


def _value_axis(ax, values: Sequence[float], label: str) -> None:
    if wants_log(np.asarray(values, dtype=float)):
        ax.set_yscale("log")
    ax.set_ylabel(label)


def _legend_below(ax) -> None:
    """Under the x label: in a busy scatter no corner of the axes is free."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=5, frameon=False)


def history_figure(trials: _Trials, label: str) -> Figure:
    """Trial value against trial number with the running best; pruned and trashed apart."""
    figure = new_figure(10.0, 4.2)
    ax = figure.subplots()
    numbers = np.array([t.number for t in trials.complete])
    values = np.array([t.value for t in trials.complete], dtype=float)
    order = np.argsort(numbers)
    numbers, values = numbers[order], values[order]
    if values.size:
        ax.scatter(
            numbers, values, s=22, color=STATE_COLOURS["complete"], label="complete", zorder=3
        )
        best = np.minimum.accumulate(values)
        ax.step(numbers, best, where="post", color=_BEST, lw=2, label="running best", zorder=4)
    shown = list(values)
    pruned = [(t.number, r[1]) for t in trials.pruned if (r := last_report(t))]
    if pruned:
        x, y = zip(*pruned, strict=True)
        ax.scatter(
            x, y, s=22, facecolors="none", edgecolors=STATE_COLOURS["pruned"], lw=1.2,
            label="pruned (last report)", zorder=2,
        )  # fmt: skip
        shown += list(y)
    _value_axis(ax, shown, label)
    if trials.trashed:
        # Trashed trials have no value: a row of crosses along the top, at their numbers.
        transform = ax.get_xaxis_transform()
        ax.scatter(
            [t.number for t in trials.trashed], [0.97] * len(trials.trashed), marker="x", s=40,
            color=STATE_COLOURS["trashed"], transform=transform, label="trashed (no value)",
            zorder=5, clip_on=False,
        )  # fmt: skip
        # Their blended transform leaves the data limits alone: trials trashed after the last
        # one with a value would fall off the axis.
        low, high = ax.get_xlim()
        trashed_numbers = [t.number for t in trials.trashed]
        ax.set_xlim(min(low, min(trashed_numbers) - 0.5), max(high, max(trashed_numbers) + 0.5))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial number")
    ax.set_title("Objective history")
    _legend_below(ax)
    return figure


def _parameter_order(trials: list[FrozenTrial]) -> list[str]:
    """Parameters in the order the space draws them, siblings together: optimizer,
    adam.learning_rate, nadam.learning_rate, adam.clipnorm, ..., layers, units_1, units_2, ...

    A topological order of "drawn before, in some trial"; ties by the earliest slot a
    parameter takes in a trial, then by name.
    """
    slot: dict[str, int] = {}
    before: dict[str, set[str]] = {}
    for trial in trials:
        names = list(trial.params)
        for k, name in enumerate(names):
            slot[name] = min(slot.get(name, k), k)
            before.setdefault(name, set()).update(names[:k])
    order: list[str] = []
    left = set(slot)
    while left:
        ready = [n for n in left if not (before[n] & left)] or list(left)  # or: inconsistent
        pick = min(ready, key=lambda n: (slot[n], n))
        order.append(pick)
        left.remove(pick)
    return order


def param_figure(name: str, trials: _Trials, label: str, best: FrozenTrial | None) -> Figure | None:
    """The trial value against one parameter; pruned and trashed trials on a strip below (the
    strip alone where no complete trial has the parameter: an empty panel would say nothing)."""
    having = [t for t in trials.complete if name in t.params]
    apart = [
        (kind, t)
        for kind, group in (("pruned", trials.pruned), ("trashed", trials.trashed))
        for t in group
        if name in t.params
    ]
    if not having and not apart:
        return None
    distribution = next(t.distributions[name] for t in having + [t for _, t in apart])
    categorical = isinstance(distribution, CategoricalDistribution)
    if having and apart:
        figure = new_figure(5.0, 4.0)
        ax, strip = figure.subplots(2, 1, sharex=True, height_ratios=(4, 1))
    elif having:
        figure = new_figure(5.0, 3.4)
        ax, strip = figure.subplots(), None
    else:
        figure = new_figure(5.0, 2.0)
        ax, strip = None, figure.subplots()
    if categorical:
        choices = [str(c) for c in distribution.choices]

        def position(trial: FrozenTrial) -> float:
            return float(choices.index(str(trial.params[name])))

    else:

        def position(trial: FrozenTrial) -> float:
            return float(trial.params[name])

    rng = np.random.default_rng(0)
    values = np.array([t.value for t in having], dtype=float)
    log_values = wants_log(values)
    if having:
        x = np.array([position(t) for t in having])
        if categorical:
            groups = [values[x == k] for k in range(len(choices))]
            _distribution_shapes(ax, groups, log_values)
            x = x + rng.uniform(-0.12, 0.12, x.size)
        ax.scatter(
            x, values, c=[t.number for t in having], cmap="viridis", s=20, alpha=0.9,
            edgecolors="white", linewidths=0.4, zorder=3,
        )  # fmt: skip
        if best is not None and name in best.params:
            bx = position(best)
            ax.scatter(
                [bx], [best.value], marker="*", s=190, color=_BEST, edgecolors="k",
                linewidths=0.7, zorder=4, label=f"best (trial {best.number})",
            )  # fmt: skip
            ax.legend(loc="best")
        if log_values:
            ax.set_yscale("log")
        ax.set_ylabel(label)
    (strip if ax is None else ax).set_title(f"{name} ({len(having)} complete)")
    if strip is not None:
        rows = {"pruned": 1.0, "trashed": 0.0}
        for kind in ("pruned", "trashed"):
            group = [t for k, t in apart if k == kind]
            if not group:
                continue
            xs = np.array([position(t) for t in group])
            if categorical:
                xs = xs + rng.uniform(-0.15, 0.15, xs.size)
            ys = rows[kind] + rng.uniform(-0.2, 0.2, xs.size)
            if kind == "trashed":
                strip.scatter(xs, ys, marker="x", s=26, color=STATE_COLOURS[kind], lw=1.2)
            else:
                strip.scatter(
                    xs, ys, marker="o", s=22, facecolors="none",
                    edgecolors=STATE_COLOURS[kind], linewidths=1.1,
                )  # fmt: skip
        strip.set_yticks([0.0, 1.0], ["trashed", "pruned"])
        strip.set_ylim(-0.5, 1.5)
        strip.grid(axis="y", alpha=0)
        last = strip
    else:
        last = ax
    if categorical:
        last.set_xticks(range(len(choices)), choices)
        last.set_xlim(-0.6, len(choices) - 0.4)
    else:
        # The whole searched range, so one sees where in it the sampler went.
        low, high = float(distribution.low), float(distribution.high)
        if getattr(distribution, "log", False):
            log_axis(last.xaxis, low, high)
            pad = (high / low) ** 0.03
            last.set_xlim(low / pad, high * pad)
        else:
            pad = 0.03 * (high - low) or 0.5
            last.set_xlim(low - pad, high + pad)
        if isinstance(distribution, IntDistribution) and not distribution.log:
            last.xaxis.set_major_locator(MaxNLocator(integer=True))
    last.set_xlabel(name)
    return figure


def _distribution_shapes(ax, groups: list[np.ndarray], log_values: bool) -> None:
    """Violins per category (a box on log axes, where a linear-space violin would mislead)."""
    positions = [k for k, g in enumerate(groups) if g.size >= 3 and np.ptp(g) > 0]
    data = [groups[k] for k in positions]
    if not data:
        return
    if log_values:
        ax.boxplot(
            data, positions=positions, widths=0.5, showfliers=False, manage_ticks=False,
            medianprops={"color": "k"}, boxprops={"color": "0.4"},
        )  # fmt: skip
        return
    parts = ax.violinplot(data, positions=positions, widths=0.75, showextrema=False)
    for body in parts["bodies"]:
        body.set_facecolor(STATE_COLOURS["complete"])
        body.set_alpha(0.18)


def _varying_parameters(trials: Sequence[FrozenTrial]) -> set[str]:
    """The parameters that take more than one value among the trials that have them: one pass
    over the trials (a study of 3,000 trials took 90 s comparing every trial with every other)."""
    seen: dict[str, set[str]] = {}
    for trial in trials:
        for name, value in trial.params.items():
            seen.setdefault(name, set()).add(repr(value))
    return {name for name, values in seen.items() if len(values) > 1}


def importances(study: optuna.Study, trials: _Trials) -> tuple[dict[str, float], str]:
    """Optuna's importances (PED-ANOVA, its default) and a sentence on how to read them.

    PED-ANOVA needs no package beyond Optuna (fANOVA would need scikit-learn) and handles the
    conditional parameters of a hyperscan space (a learning rate per optimiser, units_2 only
    with two layers). Guarded: an empty dict and the reason when there is nothing to rank.
    """
    n = len(trials.complete)
    if n < 2:
        return {}, f"Importances need at least 2 complete trials; this study has {n}."
    if not _varying_parameters(trials.complete):
        return {}, "Every complete trial has the same parameter values: nothing to rank."
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(study)
    except Exception as error:  # a report must not die on a statistics corner case
        return {}, f"Optuna could not compute importances: {error}"
    found = {k: float(v) for k, v in found.items() if _finite(v)}
    if not found or not any(found.values()):
        return {}, "Optuna's importances are all zero: the trials do not separate the parameters."
    note = (
        f"PED-ANOVA (Optuna's default evaluator) over {n} complete trials: how much each "
        "parameter's distribution in the best 10% of trials differs from that in all of them; "
        "normalised to sum to 1."
    )
    if n < 20:
        note += f" With {n} trials, read them as a hint only."
    return found, note


def importance_figure(found: dict[str, float]) -> Figure:
    names = list(found)[::-1]
    figure = new_figure(6.5, 0.9 + 0.32 * len(names))
    ax = figure.subplots()
    ax.barh(names, [found[n] for n in names], color=STATE_COLOURS["complete"])
    for y, n in enumerate(names):
        ax.text(found[n], y, f" {found[n]:.2f}", va="center", fontsize=8)
    ax.set_xlim(0, max(found.values()) * 1.15)
    ax.set_xlabel("importance (sum = 1)")
    ax.grid(axis="y", alpha=0)
    ax.set_title("Parameter importances")
    return figure


def _spread(trial: FrozenTrial, category: str) -> dict[str, float] | None:
    summary = trial.user_attrs.get("replicas", {}).get(category)
    keys = ("min", "q16", "q50", "q84", "max")
    if not isinstance(summary, dict) or not all(_finite(summary.get(k)) for k in keys):
        return None
    return {k: float(summary[k]) for k in keys}


def spread_figure(trials: _Trials, category: str, label: str) -> Figure | None:
    """Per trial: best and worst replica, the middle 68%, the median replica, the value."""
    rows = [
        (t, s, kind)
        for kind, group in (("complete", trials.complete), ("pruned", trials.pruned))
        for t in group
        if (s := _spread(t, category)) is not None
    ]
    if not rows:
        return None
    figure = new_figure(10.0, 4.2)
    ax = figure.subplots()
    width = 4.8 if len(rows) < 60 else 2.4
    for kind in ("pruned", "complete"):
        group = [(t, s) for t, s, k in rows if k == kind]
        if not group:
            continue
        x = np.array([t.number for t, _ in group], dtype=float)
        stats = {key: np.array([s[key] for _, s in group]) for key in group[0][1]}
        colour = STATE_COLOURS[kind]
        ax.vlines(x, stats["min"], stats["max"], color=colour, lw=0.9, alpha=0.8)
        ax.vlines(x, stats["q16"], stats["q84"], color=colour, lw=width, alpha=0.7)
        ax.scatter(x, stats["q50"], s=16, facecolors="white", edgecolors=colour, lw=1.1, zorder=3)
        if kind == "complete":
            values = [t.value for t, _ in group]
            ax.scatter(x, values, marker="D", s=10, color=_BEST, zorder=4)
    shown = [v for _, s, _ in rows for v in s.values()]
    _value_axis(ax, shown, f"{category.replace('_', '-')} χ²/point")
    ax.plot([], [], color="0.3", lw=0.9, label="best – worst replica")
    ax.plot([], [], color="0.3", lw=4, alpha=0.7, label="16–84% of replicas")
    ax.plot([], [], "o", ms=4, mfc="white", mec="0.3", label="median replica")
    if trials.complete:
        ax.plot([], [], "D", ms=3.2, color=_BEST, ls="", label=f"trial value ({label})")
    if trials.pruned:
        ax.plot([], [], color=STATE_COLOURS["pruned"], lw=4, label="pruned (when stopped)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial number")
    _legend_below(ax)
    ax.set_title("Spread of the replicas' χ² in each trial")
    return figure


def states_figure(counts: dict[str, int]) -> Figure:
    figure = new_figure(5.0, 2.8)
    ax = figure.subplots()
    states = list(STATE_ORDER)[::-1]
    ax.barh(states, [counts.get(s, 0) for s in states], color=[STATE_COLOURS[s] for s in states])
    for y, s in enumerate(states):
        ax.text(counts.get(s, 0), y, f" {counts.get(s, 0)}", va="center", fontsize=8.5)
    ax.set_xlim(0, max(max(counts.values(), default=1), 1) * 1.15)
    ax.set_xlabel("trials")
    ax.grid(axis="y", alpha=0)
    ax.set_title("Trials by state")
    return figure


def _kind(trial: FrozenTrial) -> str:
    if trial.state == TrialState.PRUNED:
        return "trashed" if trashed(trial) else "pruned"
    return trial.state.name.lower()


def throughput_figure(trials: _Trials, now: datetime.datetime) -> Figure | None:
    """Which worker ran which trial when (top) and finished trials over time (bottom)."""
    timed = [t for t in trials.all if t.datetime_start is not None]
    if not timed:
        return None
    origin = min(t.datetime_start for t in timed)
    last = max(max(t.datetime_start, t.datetime_complete or t.datetime_start) for t in timed)
    # Running trials run until now, unless the report is made long after the last event (a
    # worker killed without a heartbeat check since): then the axis ends at the last event.
    fresh = (now - last).total_seconds() <= 0.25 * (last - origin).total_seconds() + 120
    right = max(now, last) if fresh else last
    ends = [t.datetime_complete or right for t in timed]
    span_s = max((right - origin).total_seconds(), 1.0)
    unit, scale = ("h", 3600.0) if span_s > 3 * 3600 else ("min", 60.0)

    def at(moment: datetime.datetime) -> float:
        return (moment - origin).total_seconds() / scale

    workers = sorted({str(t.user_attrs.get("worker", "?")) for t in timed})
    figure = new_figure(10.0, 2.6 + 0.28 * len(workers) + 2.4)
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(0.6 + 0.28 * len(workers), 2.4))
    starts = np.array([at(t.datetime_start) for t in timed])
    widths = np.maximum(np.array([at(e) for e in ends]) - starts, 1e-3)
    rows_of = [workers.index(str(t.user_attrs.get("worker", "?"))) for t in timed]
    colours = [STATE_COLOURS.get(_kind(t), "0.5") for t in timed]
    # One collection per worker, not an artist per trial: 3,000 bars took 3 s to draw.
    for row in range(len(workers)):
        mine = [k for k, of in enumerate(rows_of) if of == row]
        top.broken_barh(
            [(starts[k], widths[k]) for k in mine], (row - 0.35, 0.7),
            facecolors=[colours[k] for k in mine], edgecolor="white", linewidth=0.5,
        )  # fmt: skip
    top.set_yticks(range(len(workers)), workers)
    top.set_ylim(-0.6, len(workers) - 0.4)
    top.invert_yaxis()
    top.grid(axis="y", alpha=0)
    top.set_title("Trials per worker over time (colour: state)", loc="left")
    # Finished as the budget counts them: a failed trial is retried, not finished.
    finished = [t for t in timed if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    total = sorted(at(t.datetime_complete) for t in finished)
    if total:
        bottom.step([0.0] + total, range(len(total) + 1), where="post", color="k", lw=2,
                    label="all workers")  # fmt: skip
    for k, worker in enumerate(workers):
        times = sorted(
            at(t.datetime_complete)
            for t in finished
            if str(t.user_attrs.get("worker", "?")) == worker
        )
        if times and len(workers) > 1:
            bottom.step([0.0] + times, range(len(times) + 1), where="post", lw=1.1,
                        color=f"C{k % 10}", alpha=0.85, label=worker)  # fmt: skip
    rate = len(total) / max(total[-1] * scale / 3600.0, 1e-9) if total else 0.0
    bottom.set_title(f"Finished trials over time ({rate:.3g} trials per hour overall)")
    bottom.set_ylabel("finished trials")
    bottom.set_xlabel(f"time since the first trial started [{unit}]")
    bottom.set_xlim(0.0, at(right) * 1.01)
    if total:
        bottom.legend(loc="upper left", fontsize=7.5, ncols=1 + len(workers) // 8)
    from matplotlib.patches import Patch

    present = [s for s in STATE_ORDER if any(_kind(t) == s for t in timed)]
    top.legend(
        [Patch(color=STATE_COLOURS[s]) for s in present], present, loc="lower right",
        bbox_to_anchor=(1.0, 1.0), ncols=len(present), fontsize=7.5, frameon=False,
    )  # fmt: skip
    return figure


# --------------------------------------------------------------------------- HTML


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #222;
       max-width: 1160px; margin: 1.5em auto; padding: 0 1em; line-height: 1.45; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd;
     padding-bottom: 0.2em; margin-top: 1.8em; font-size: 1.2em; }
nav a { margin-right: 1em; } .muted { color: #666; font-size: 0.9em; }
img { max-width: 100%; height: auto; display: block; margin: 0.6em 0; }
.grid { display: flex; flex-wrap: wrap; gap: 0.4em; } .grid img { max-width: 49%; margin: 0; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.55em; text-align: left;
         vertical-align: top; } th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
table.kv th { width: 14em; } .note { background: #fff8e1; border-left: 4px solid #f0b400;
       padding: 0.5em 0.8em; } pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _img(figure: Figure, alt: str) -> str:
    return f'<img src="{data_uri(figure)}" alt="{_e(alt)}">'


def _table(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    numeric: set[int],
    nowrap: frozenset[int] = frozenset(),
) -> str:
    def cell(i: int, value: Any) -> str:
        css = "num" if i in numeric else "nowrap" if i in nowrap else ""
        return f'<td class="{css}">{_e(_fmt(value))}</td>' if css else f"<td>{_e(_fmt(value))}</td>"

    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _duration(trial: FrozenTrial) -> str:
    seconds = trial.user_attrs.get("fit", {}).get("seconds")
    if not _finite(seconds) and trial.datetime_start and trial.datetime_complete:
        seconds = (trial.datetime_complete - trial.datetime_start).total_seconds()
    return f"{seconds:.0f} s" if _finite(seconds) else ""


def _members(fit: dict[str, Any]) -> str:
    """The trial's members and those not ok: a diverged or pos-veto member (no step passed
    positivity and the χ² threshold, which n3fit would discard) still counts in the value."""
    members = fit.get("members")
    if not isinstance(members, int):
        return ""
    outcomes = [
        f"{fit[key]} {status}"
        for key, status in (("diverged", "diverged"), ("pos_veto", "pos-veto"))
        if isinstance(fit.get(key), int) and fit[key] > 0
    ]
    return f"{members} ({', '.join(outcomes)})" if outcomes else str(members)


def _best_epoch(fit: dict[str, Any]) -> str:
    """The median best epoch over the members that have one (a pos-veto member has none), and
    how many do when some do not: a median of 1 member of 6 must not read as the trial's.

    From the summary dict (``best_epoch``), or older trials' list of every member's
    (``best_epochs``, -1 for none)."""
    summary = fit.get("best_epoch")
    if isinstance(summary, dict):
        n, median = summary.get("n"), summary.get("q50")
    else:
        epochs = [e for e in fit.get("best_epochs") or [] if _finite(e) and e >= 0]
        n, median = len(epochs), float(np.median(epochs)) if epochs else None
    text = f"{round(median)}" if _finite(median) else ""
    members = fit.get("members")
    if isinstance(n, int) and isinstance(members, int) and n < members:
        return f"{text} ({n} of {members})" if text else f"none of {members}"
    return text


def _fold_statistic(card: ScanRuncard | None) -> tuple[str, str]:
    """(key of the fold summary, its name) for the fold columns of a k-fold study: the
    objective's statistic over a fold's replicas, so that a column is what the trial value
    reduces over the folds; the summary a trial stores has no trimmed mean, so the mean then."""
    statistic = "mean" if card is None else card.scan.objective.statistic
    if statistic == "median":
        return "q50", "median"
    if statistic == "max":
        return "max", "maximum"
    if statistic == "mean_plus_std":
        return "mean_plus_std", f"mean + {card.scan.objective.std_weight:g}·std"
    return "mean", "mean"


def _fold_cells(trial: FrozenTrial, card: ScanRuncard | None) -> list[Any]:
    """One cell per fold of a k-fold study (none without folds): see :func:`_fold_statistic`."""
    if card is None or not card.scan.folds:
        return []
    key, _ = _fold_statistic(card)
    folds = trial.user_attrs.get("folds", {})
    cells: list[Any] = []
    for k in range(len(card.scan.folds)):
        summary = folds.get(str(k)) if isinstance(folds, dict) else None
        summary = summary if isinstance(summary, dict) else {}
        if key == "mean_plus_std":
            mean, std = summary.get("mean"), summary.get("std")
            value = (
                mean + card.scan.objective.std_weight * std
                if _finite(mean) and _finite(std)
                else ""
            )
        else:
            value = summary.get(key, "")
        cells.append(value if _finite(value) else "")
    return cells


def _best_table(trials: _Trials, category: str, top: int, card: ScanRuncard | None = None) -> str:
    """The best complete trials; a k-fold study's also have a column per fold, since their
    replica columns pool the folds, each scored on other datasets."""
    rows = []
    for rank, trial in enumerate(trials.ranked[:top], start=1):
        spread = _spread(trial, category) or {}
        fit = trial.user_attrs.get("fit", {})
        params = ", ".join(f"{k}={_fmt(v)}" for k, v in trial.params.items())
        rows.append(
            [
                rank,
                trial.number,
                trial.value,
                *_fold_cells(trial, card),
                spread.get("min", ""),
                spread.get("q50", ""),
                spread.get("max", ""),
                _members(fit),
                _best_epoch(fit),
                _duration(trial),
                trial.user_attrs.get("worker", ""),
                params,
            ]
        )
    folds = [f"fold {k}" for k in range(len(card.scan.folds))] if card is not None else []
    header = [
        "rank", "trial", "value", *folds, "best replica", "median replica", "worst replica",
        "members", "best epoch (median)", "fit time", "worker", "parameters",
    ]  # fmt: skip
    numeric = set(range(9 + len(folds)))
    return _table(header, rows, numeric=numeric, nowrap=frozenset({9 + len(folds)}))


def _folds_note(card: ScanRuncard | None) -> str:
    """What the fold columns of the best-trials table are (empty without folds)."""
    if card is None or not card.scan.folds:
        return ""
    objective = card.scan.objective
    _, name = _fold_statistic(card)
    chi2 = "held-out" if objective.chi2 == "held_out" else "validation"
    listed = "; ".join(f"fold {k}: {', '.join(fold)}" for k, fold in enumerate(card.scan.folds))
    trimmed = " (not the trimmed mean, which a trial does not store per fold)"
    return (
        f" Fold columns: the {name} over the fold's {card.scan.replicas} replicas of their "
        f"{chi2} χ² per point{trimmed if objective.statistic == 'trimmed_mean' else ''}; the "
        f"trial value is the {objective.fold_statistic} over the folds. The replica columns "
        f"pool every fold. Held out: {listed}."
    )


def _export_any(name: str, trials: _Trials) -> str:
    """How to export a pruned or trashed trial all the same (empty if there is none)."""
    if not (trials.pruned or trials.trashed):
        return ""
    return f" (hyperscan export --study {name} --trial N writes a pruned or trashed one)"


def _apart_rows(trials: _Trials) -> list[list[Any]]:
    rows: list[list[Any]] = []
    retried = retries(trials.all)
    for trial in sorted(trials.trashed + trials.pruned + trials.failed, key=lambda t: t.number):
        kind = _kind(trial)
        if kind == "trashed":
            reason = trashed(trial)
        elif kind == "pruned":
            last = last_report(trial)
            reason = (
                f"stopped by the pruner after step {last[0]} (value then {last[1]:.4g})"
                if last
                else "stopped by the pruner"
            )
        elif trial.number in retried:
            retry, lost = retried[trial.number]
            worker = "lost (it died or lost the storage)" if lost else "stopped"
            reason = f"its worker was {worker}; re-queued as trial {retry}"
        else:
            reason = "failed, not re-queued (its worker stopped, died or met an error: its log)"
        rows.append([trial.number, kind, trial.user_attrs.get("worker", ""), reason])
    return rows


def _real_sets(card: ScanRuncard) -> int:
    """The real datasets fitted: those of ``data.datasets`` when it selects some."""
    selected = card.fit.data.datasets
    return len(card.fit.data.real.datasets) if selected == "all" else len(selected)


def _summary_rows(
    study: optuna.Study, url: str, card: ScanRuncard | None, trials: _Trials, counts: dict
) -> list[tuple[str, str]]:
    sentence, _ = _objective_text(card)
    best = trials.ranked[0] if trials.complete else None
    finished = sum(counts.get(s, 0) for s in ("complete", "pruned", "trashed"))
    rows = [
        ("study", study.study_name),
        ("storage", url),
        ("trial value", sentence + " (lower is better)"),
        (
            "best",
            "none: no trial is complete"
            if best is None
            else f"trial {best.number}, value {best.value:.6g}",
        ),
        (
            "trials",
            ", ".join(f"{counts.get(s, 0)} {s}" for s in STATE_ORDER)
            + (f" — {finished} finished, budget {card.scan.trials}" if card else ""),
        ),
    ]
    if card is not None:
        scan, closure = card.scan, card.fit.data.closure
        rows += [
            (
                "each trial",
                f"{scan.replicas} {'replica' if scan.replicas == 1 else 'replicas'}"
                + (f" × {len(scan.folds)} folds" if scan.folds else "")
                + (
                    f", closure data {closure.size} (level {closure.level}), "
                    if closure is not None
                    else f", real DIS data ({_real_sets(card)} sets), "
                )
                + f"at most {card.fit.epochs} epochs",
            ),
            (
                "sampler / pruner",
                f"{scan.sampler.name} (seed {scan.sampler.seed}) / {scan.pruner.name}",
            ),  # fmt: skip
        ]
    starts = [t.datetime_start for t in trials.all if t.datetime_start]
    ends = [t.datetime_complete for t in trials.all if t.datetime_complete]
    if starts and ends:
        rows.append(
            (
                "time",
                f"first trial started {min(starts):%Y-%m-%d %H:%M}, last finished "
                f"{max(ends):%Y-%m-%d %H:%M}",
            )  # fmt: skip
        )
    return rows


def study_report(
    study: optuna.Study,
    url: str,
    *,
    top: int = 10,
    now: datetime.datetime | None = None,
) -> str:
    """The report of ``study`` (stored at the redacted ``url``) as one self-contained HTML page.

    Raises :class:`ReportError` when no trial has finished yet. Finished trials none of which
    completed (all pruned, trashed or failed) are when the user most needs to see where and
    why: the page says that nothing is best and leaves out only what needs a value.
    """
    now = now or datetime.datetime.now()
    trials = _Trials(study.get_trials(deepcopy=False))
    counts = dict(state_counts(trials.all))
    listed = ", ".join(f"{counts[s]} {s}" for s in STATE_ORDER if counts.get(s))
    if not (trials.complete or trials.pruned or trials.trashed or trials.failed):
        raise ReportError(
            f"study {study.study_name!r} has no finished trial yet ({listed or 'no trials'}), "
            "so there is nothing to report; run workers, or see "
            f"`hyperscan study status --study {study.study_name}`"
        )
    card, runcard_text = _runcard(study)
    sentence, label = _objective_text(card)
    category = _category(card)
    best = trials.ranked[0] if trials.complete else None
    parts: list[str] = []
    with style():
        parts.append('<section id="history"><h2>Objective history</h2>')
        if trials.complete or any(last_report(t) for t in trials.pruned):
            parts.append(
                f"<p>Trial value = {_e(sentence)}. "
                + ("The orange line is the best value so far. " if trials.complete else "")
                + "Pruned trials are drawn at their last report to the pruner; trashed trials "
                "(diverged replicas) have no value and are marked along the top.</p>"
            )
            parts.append(_img(history_figure(trials, label), "objective history"))
        else:
            parts.append(
                "<p>No trial has a value to plot: none is complete, trashed and failed trials "
                "have none, and no pruned trial reported one to the pruner.</p>"
            )
        parts.append("</section>")

        names = _parameter_order(trials.all)
        parts.append('<section id="parameters"><h2>Statistic against each hyperparameter</h2>')
        figures = [
            _img(figure, f"trial value against {name}")
            for name in names
            if (figure := param_figure(name, trials, label, best)) is not None
        ]
        if figures:
            parts.append(
                (
                    "<p>Complete trials coloured by trial number (dark: early, yellow: late); "
                    "the star is the best trial. Categorical parameters show the distribution "
                    "of values per choice. Below each panel, the values of pruned (○) and "
                    "trashed (×) trials, which have no value to plot; alone where no complete "
                    "trial has the parameter. "
                    if trials.complete
                    else "<p>No trial is complete, so there is no value to plot: each panel "
                    "shows where in the searched range the pruned (○) and trashed (×) trials "
                    "went. "
                )
                + "Their reasons are listed under "
                '<a href="#apart">Trials set apart</a>.</p><div class="grid">'
                + "".join(figures)
                + "</div>"
            )
        else:
            parts.append("<p>No complete, pruned or trashed trial to plot.</p>")
        parts.append("</section>")

        found, note = importances(study, trials)
        parts.append('<section id="importances"><h2>Parameter importances</h2>')
        parts.append(f"<p>{_e(note)}</p>")
        if found:
            parts.append(_img(importance_figure(found), "parameter importances"))
        parts.append("</section>")

        parts.append('<section id="spread"><h2>Replica χ² per trial</h2>')
        spread = spread_figure(trials, category, label)
        if spread is None:
            parts.append("<p>No trial recorded the spread of its replicas.</p>")
        else:
            parts.append(
                f"<p>The {_e(category.replace('_', '-'))} χ² per point of each replica: a good "
                "trial is good for every replica, not for a lucky few. A long whisker above a "
                "low median is a trial with an unstable replica."
                + (
                    " In this k-fold study each fold's replicas are scored on other datasets, "
                    "so the spread also holds the folds' differences: the best-trials table "
                    "gives each fold's value."
                    if card is not None and card.scan.folds
                    else ""
                )
                + "</p>"
            )
            parts.append(_img(spread, "replica chi2 spread per trial"))
        parts.append("</section>")

        parts.append('<section id="best"><h2>Best trials</h2>')
        if best is None:
            parts.append(
                "<p>None: no trial is complete, so there is nothing to rank, and "
                "<code>hyperscan export</code> has no best trial to write"
                f"{_e(_export_any(study.study_name, trials))}.</p>"
            )
        else:
            parts.append(
                f"<p>The {min(top, len(trials.complete))} best of {len(trials.complete)} "
                f"complete trials. Replica columns: {_e(category.replace('_', '-'))} χ² per "
                "point. Members: how many were fitted, and how many of them diverged (up to "
                "<code>scan.divergence.max_diverged</code>) or were vetoed by positivity "
                "(pos-veto: no step passed positivity and the χ² threshold, so n3fit would "
                "discard the replica; up to <code>scan.divergence.max_pos_veto</code>, if set); "
                "their χ² counts in the trial value all the same. Best "
                "epoch: the median over the members that have one, with how many do when a "
                f"member has none. <code>hyperscan export --study {_e(study.study_name)}</code> "
                f"writes the best as a fit runcard, with <code>--trial N</code> any other."
                f"{_e(_folds_note(card))}</p>"
            )
            parts.append(_best_table(trials, category, top, card))
        parts.append("</section>")

        parts.append('<section id="workers"><h2>Trial states and worker throughput</h2>')
        parts.append(_img(states_figure(counts), "trials by state"))
        throughput = throughput_figure(trials, now)
        if throughput is not None:
            parts.append(_img(throughput, "worker throughput over time"))
        parts.append("</section>")

    parts.append('<section id="apart"><h2>Trials set apart</h2>')
    rows = _apart_rows(trials)
    if rows:
        parts.append(
            "<p>Never eligible as best. Trashed: more replicas diverged than "
            "<code>scan.divergence.max_diverged</code> allows, or were pos-veto than "
            "<code>scan.divergence.max_pos_veto</code> does (the sampler learns to avoid "
            "the region). Pruned: stopped early by the pruner. Failed: the worker died or was "
            "stopped; such trials are re-queued.</p>"
        )
        parts.append(
            _table(["trial", "state", "worker", "reason"], rows[:_MAX_LISTED], {0}, frozenset({2}))
        )
        if len(rows) > _MAX_LISTED:
            parts.append(f"<p class='muted'>… and {len(rows) - _MAX_LISTED} more.</p>")
    else:
        parts.append("<p>None: every finished trial completed.</p>")
    parts.append("</section>")
    if runcard_text is not None:
        parts.append(
            '<section id="runcard"><h2>Runcard of the study</h2><details><summary>show'
            f"</summary><pre>{_e(runcard_text)}</pre></details></section>"
        )

    summary = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>"
        for k, v in _summary_rows(study, url, card, trials, counts)
    )
    nav = " ".join(
        f'<a href="#{a}">{_e(t)}</a>'
        for a, t in (
            ("history", "history"),
            ("parameters", "parameters"),
            ("importances", "importances"),
            ("spread", "replica spread"),
            ("best", "best trials"),
            ("workers", "states & workers"),
            ("apart", "set apart"),
        )
    )
    no_best = (
        ""
        if best is not None
        else f'<p class="note">No trial is complete yet ({_e(listed)}): none is best, and '
        "<code>hyperscan export</code> has no best trial to write"
        f"{_e(_export_any(study.study_name, trials))}. What the finished trials "
        "tell is below: where in the space they were pruned or trashed, and why, under "
        '<a href="#apart">Trials set apart</a>.</p>'
    )
    title = f"hyperscan report: {study.study_name}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(title)}</h1>"
        f'<p class="muted">generated {now:%Y-%m-%d %H:%M} by hyperscan {_e(__version__)}</p>'
        f'<nav>{nav}</nav><table class="kv">{summary}</table>{no_best}'
        + "".join(parts)
        + "</body></html>\n"
    )
