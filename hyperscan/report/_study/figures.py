# SPDX-License-Identifier: GPL-3.0-or-later
"""The figures of a study's report, drawn from its trial records (build them in ``style()``)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from optuna.distributions import CategoricalDistribution, IntDistribution

from hyperscan.report._study.trials import MERITS, TrialRecord, Trials, spread
from hyperscan.report._style import STATE_COLOURS, STATE_ORDER, log_axis, new_figure, wants_log

_BEST = "#ff7f0e"


def _value_axis(ax, values: Sequence[float], label: str) -> None:
    if wants_log(np.asarray(values, dtype=float)):
        ax.set_yscale("log")
    ax.set_ylabel(label)


def _legend_below(ax) -> None:
    """Under the x label: in a busy scatter no corner of the axes is free."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=5, frameon=False)


def history_figure(trials: Trials, label: str) -> Figure:
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
        best = trials.sign * np.minimum.accumulate(trials.sign * values)
        ax.step(numbers, best, where="post", color=_BEST, lw=2, label="running best", zorder=4)
    shown = list(values)
    pruned = [(t.number, r[1]) for t in trials.pruned if (r := t.last_report)]
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


def param_figure(name: str, trials: Trials, label: str, best: TrialRecord | None) -> Figure | None:
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

        def position(trial: TrialRecord) -> float:
            return float(choices.index(str(trial.params[name])))

    else:

        def position(trial: TrialRecord) -> float:
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


def merit_figure(
    key: str, trials: Trials, names: Sequence[str], best: TrialRecord | None
) -> Figure | None:
    """One figure of merit (a key of MERITS) of the complete trials against each parameter,
    a panel per parameter, with its ideal value where it has one; None if no trial has it."""
    label, ideal = MERITS[key]
    having = [t for t in trials.complete if key in t.merits]
    names = [n for n in names if any(n in t.params for t in having)]
    if not having or not names:
        return None
    columns = min(3, len(names))
    rows = -(-len(names) // columns)
    figure = new_figure(3.6 * columns, 2.9 * rows)
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False).ravel())
    values = np.array([t.merits[key] for t in having])
    log_values = wants_log(values)
    rng = np.random.default_rng(0)
    for ax, name in zip(axes, names, strict=False):
        group = [(t, t.merits[key]) for t in having if name in t.params]
        distribution = group[0][0].distributions[name]
        if isinstance(distribution, CategoricalDistribution):
            choices = [str(c) for c in distribution.choices]
            x = np.array([choices.index(str(t.params[name])) for t, _ in group], dtype=float)
            x = x + rng.uniform(-0.12, 0.12, x.size)
            ax.set_xticks(range(len(choices)), choices)
            ax.set_xlim(-0.6, len(choices) - 0.4)
        else:
            x = np.array([float(t.params[name]) for t, _ in group])
            if getattr(distribution, "log", False):
                log_axis(ax.xaxis, float(distribution.low), float(distribution.high))
        ax.scatter(
            x, [v for _, v in group], c=[t.number for t, _ in group], cmap="viridis", s=18,
            edgecolors="white", linewidths=0.4, zorder=3,
        )  # fmt: skip
        if best is not None and key in best.merits and name in best.params:
            bx = x[[t.number for t, _ in group].index(best.number)]
            ax.scatter(
                [bx], [best.merits[key]], marker="*", s=150, color=_BEST, edgecolors="k",
                linewidths=0.7, zorder=4,
            )  # fmt: skip
        if ideal is not None:
            ax.axhline(ideal, color="k", ls="--", lw=0.9, zorder=2)
        if log_values:
            ax.set_yscale("log")
        ax.set_xlabel(name)
        ax.set_ylabel(label)
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    ideal_text = f", dashed: ideal {ideal:.3g}" if ideal is not None else ""
    figure.suptitle(f"{label} against each parameter (star: best trial{ideal_text})")
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


def spread_figure(trials: Trials, category: str, label: str) -> Figure | None:
    """Per trial: best and worst replica, the middle 68%, the median replica, the value."""
    rows = [
        (t, s, kind)
        for kind, group in (("complete", trials.complete), ("pruned", trials.pruned))
        for t in group
        if (s := spread(t, category)) is not None
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


def throughput_figure(trials: Trials, now: datetime.datetime) -> Figure | None:
    """Which worker ran which trial when (top) and finished trials over time (bottom)."""
    timed = [t for t in trials.all if t.started is not None]
    if not timed:
        return None
    origin = min(t.started for t in timed)
    last = max(max(t.started, t.finished or t.started) for t in timed)
    # Running trials run until now, unless the report is made long after the last event (a
    # worker killed without a heartbeat check since): then the axis ends at the last event.
    fresh = (now - last).total_seconds() <= 0.25 * (last - origin).total_seconds() + 120
    right = max(now, last) if fresh else last
    ends = [t.finished or right for t in timed]
    span_s = max((right - origin).total_seconds(), 1.0)
    unit, scale = ("h", 3600.0) if span_s > 3 * 3600 else ("min", 60.0)

    def at(moment: datetime.datetime) -> float:
        return (moment - origin).total_seconds() / scale

    workers = sorted({(t.worker or "?") for t in timed})
    figure = new_figure(10.0, 2.6 + 0.28 * len(workers) + 2.4)
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(0.6 + 0.28 * len(workers), 2.4))
    starts = np.array([at(t.started) for t in timed])
    widths = np.maximum(np.array([at(e) for e in ends]) - starts, 1e-3)
    rows_of = [workers.index(t.worker or "?") for t in timed]
    colours = [STATE_COLOURS.get(t.kind, "0.5") for t in timed]
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
    finished = [t for t in timed if t.kind in ("complete", "pruned", "trashed")]
    total = sorted(at(t.finished) for t in finished)
    if total:
        bottom.step([0.0] + total, range(len(total) + 1), where="post", color="k", lw=2,
                    label="all workers")  # fmt: skip
    for k, worker in enumerate(workers):
        times = sorted(at(t.finished) for t in finished if (t.worker or "?") == worker)
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
    present = [s for s in STATE_ORDER if any(t.kind == s for t in timed)]
    top.legend(
        [Patch(color=STATE_COLOURS[s]) for s in present], present, loc="lower right",
        bbox_to_anchor=(1.0, 1.0), ncols=len(present), fontsize=7.5, frameon=False,
    )  # fmt: skip
    return figure
