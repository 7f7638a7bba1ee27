# SPDX-License-Identifier: GPL-3.0-or-later
"""The page: page.html (the layout, style and sections) filled with each section's content,
the tables and the figures as PNGs in ``data:`` URIs."""

from __future__ import annotations

import datetime
import html
from collections.abc import Sequence
from importlib import resources
from string import Template
from typing import Any

import numpy as np
import optuna
from matplotlib.figure import Figure

from hyperscan import __version__
from hyperscan.report._study.figures import (
    history_figure,
    importance_figure,
    param_figure,
    spread_figure,
    states_figure,
    throughput_figure,
)
from hyperscan.report._study.trials import (
    TrialRecord,
    Trials,
    category,
    finite,
    importances,
    objective_text,
    parameter_order,
    runcard,
    spread,
)
from hyperscan.report._style import STATE_ORDER, data_uri, style
from hyperscan.runcard import ScanRuncard

_MAX_LISTED = 60  # rows of the "set apart" table


class ReportError(Exception):
    """Nothing to report on yet (no finished trial): a message for the user, not a bug."""


def _template() -> Template:
    return Template(resources.files(__package__).joinpath("page.html").read_text("utf-8"))


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


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


# --------------------------------------------------------------------------- table cells


def _duration(trial: TrialRecord) -> str:
    seconds = trial.fit.get("seconds")
    if not finite(seconds) and trial.started and trial.finished:
        seconds = (trial.finished - trial.started).total_seconds()
    return f"{seconds:.0f} s" if finite(seconds) else ""


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
        epochs = [e for e in fit.get("best_epochs") or [] if finite(e) and e >= 0]
        n, median = len(epochs), float(np.median(epochs)) if epochs else None
    text = f"{round(median)}" if finite(median) else ""
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


def _fold_cells(trial: TrialRecord, card: ScanRuncard | None) -> list[Any]:
    """One cell per fold of a k-fold study (none without folds): see :func:`_fold_statistic`."""
    if card is None or not card.scan.folds:
        return []
    key, _ = _fold_statistic(card)
    folds = trial.folds
    cells: list[Any] = []
    for k in range(len(card.scan.folds)):
        summary = folds.get(str(k)) if isinstance(folds, dict) else None
        summary = summary if isinstance(summary, dict) else {}
        if key == "mean_plus_std":
            mean, std = summary.get("mean"), summary.get("std")
            value = (
                mean + card.scan.objective.std_weight * std if finite(mean) and finite(std) else ""
            )
        else:
            value = summary.get(key, "")
        cells.append(value if finite(value) else "")
    return cells


# --------------------------------------------------------------------------- tables


def _best_table(trials: Trials, category: str, top: int, card: ScanRuncard | None = None) -> str:
    """The best complete trials; a k-fold study's also have a column per fold, since their
    replica columns pool the folds, each scored on other datasets."""
    rows = []
    for rank, trial in enumerate(trials.ranked[:top], start=1):
        quantiles = spread(trial, category) or {}
        params = ", ".join(f"{k}={_fmt(v)}" for k, v in trial.params.items())
        rows.append(
            [
                rank,
                trial.number,
                trial.value,
                *_fold_cells(trial, card),
                quantiles.get("min", ""),
                quantiles.get("q50", ""),
                quantiles.get("max", ""),
                _members(trial.fit),
                _best_epoch(trial.fit),
                _duration(trial),
                trial.worker,
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


def _export_any(name: str, trials: Trials) -> str:
    """How to export a pruned or trashed trial all the same (empty if there is none)."""
    if not (trials.pruned or trials.trashed):
        return ""
    return f" (hyperscan export --study {name} --trial N writes a pruned or trashed one)"


def _apart_rows(trials: Trials) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for trial in sorted(trials.trashed + trials.pruned + trials.failed, key=lambda t: t.number):
        if trial.kind == "trashed":
            reason = trial.trash_reason
        elif trial.kind == "pruned":
            last = trial.last_report
            reason = (
                f"stopped by the pruner after step {last[0]} (value then {last[1]:.4g})"
                if last
                else "stopped by the pruner"
            )
        elif trial.number in trials.retried:
            retry, lost = trials.retried[trial.number]
            worker = "lost (it died or lost the storage)" if lost else "stopped"
            reason = f"its worker was {worker}; re-queued as trial {retry}"
        else:
            reason = "failed, not re-queued (its worker stopped, died or met an error: its log)"
        rows.append([trial.number, trial.kind, trial.worker, reason])
    return rows


def _real_sets(card: ScanRuncard) -> int:
    """The real datasets fitted: those of ``data.datasets`` when it selects some."""
    selected = card.data.datasets
    return len(card.data.real.datasets) if selected == "all" else len(selected)


def _summary_rows(
    study: optuna.Study, url: str, card: ScanRuncard | None, trials: Trials, counts: dict
) -> list[tuple[str, str]]:
    sentence, _ = objective_text(card)
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
        scan = card.scan
        rows += [
            (
                "each trial",
                f"{scan.replicas} {'replica' if scan.replicas == 1 else 'replicas'}"
                + (f" × {len(scan.folds)} folds" if scan.folds else "")
                + (
                    f", closure data {card.data.closure.size} (level {card.data.closure.level}), "
                    if card.data.closure is not None
                    else f", real DIS data ({_real_sets(card)} sets), "
                )
                + f"at most {card.epochs} epochs",
            ),
            (
                "sampler / pruner",
                f"{scan.sampler.name} (seed {scan.sampler.seed}) / {scan.pruner.name}",
            ),  # fmt: skip
        ]
    starts = [t.started for t in trials.all if t.started]
    ends = [t.finished for t in trials.all if t.finished]
    if starts and ends:
        rows.append(
            (
                "time",
                f"first trial started {min(starts):%Y-%m-%d %H:%M}, last finished "
                f"{max(ends):%Y-%m-%d %H:%M}",
            )  # fmt: skip
        )
    return rows


# --------------------------------------------------------------------------- sections


def _history(trials: Trials, sentence: str, label: str) -> str:
    if not (trials.complete or any(t.last_report for t in trials.pruned)):
        return (
            "<p>No trial has a value to plot: none is complete, trashed and failed trials "
            "have none, and no pruned trial reported one to the pruner.</p>"
        )
    return (
        f"<p>Trial value = {_e(sentence)}. "
        + ("The orange line is the best value so far. " if trials.complete else "")
        + "Pruned trials are drawn at their last report to the pruner; trashed trials "
        "(diverged replicas) have no value and are marked along the top.</p>"
        + _img(history_figure(trials, label), "objective history")
    )


def _parameters(trials: Trials, label: str, best: TrialRecord | None) -> str:
    figures = [
        _img(figure, f"trial value against {name}")
        for name in parameter_order(trials.all)
        if (figure := param_figure(name, trials, label, best)) is not None
    ]
    if not figures:
        return "<p>No complete, pruned or trashed trial to plot.</p>"
    return (
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
        '<a href="#apart">Trials set apart</a>.</p><div class="grid">' + "".join(figures) + "</div>"
    )


def _importances(study: optuna.Study, trials: Trials) -> str:
    found, note = importances(study, trials)
    figure = _img(importance_figure(found), "parameter importances") if found else ""
    return f"<p>{_e(note)}</p>{figure}"


def _spread(trials: Trials, card: ScanRuncard | None, label: str) -> str:
    chi2 = category(card)
    figure = spread_figure(trials, chi2, label)
    if figure is None:
        return "<p>No trial recorded the spread of its replicas.</p>"
    return (
        f"<p>The {_e(chi2.replace('_', '-'))} χ² per point of each replica: a good "
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
        + _img(figure, "replica chi2 spread per trial")
    )


def _best(name: str, trials: Trials, card: ScanRuncard | None, top: int) -> str:
    if not trials.complete:
        return (
            "<p>None: no trial is complete, so there is nothing to rank, and "
            "<code>hyperscan export</code> has no best trial to write"
            f"{_e(_export_any(name, trials))}.</p>"
        )
    chi2 = category(card)
    return (
        f"<p>The {min(top, len(trials.complete))} best of {len(trials.complete)} "
        f"complete trials. Replica columns: {_e(chi2.replace('_', '-'))} χ² per "
        "point. Members: how many were fitted, and how many of them diverged (up to "
        "<code>scan.divergence.max_diverged</code>) or were vetoed by positivity "
        "(pos-veto: no step passed positivity and the χ² threshold, so n3fit would "
        "discard the replica; up to <code>scan.divergence.max_pos_veto</code>, if set); "
        "their χ² counts in the trial value all the same. Best "
        "epoch: the median over the members that have one, with how many do when a "
        f"member has none. <code>hyperscan export --study {_e(name)}</code> "
        f"writes the best as a fit runcard, with <code>--trial N</code> any other."
        f"{_e(_folds_note(card))}</p>" + _best_table(trials, chi2, top, card)
    )


def _workers(trials: Trials, now: datetime.datetime) -> str:
    throughput = throughput_figure(trials, now)
    return _img(states_figure(trials.counts), "trials by state") + (
        "" if throughput is None else _img(throughput, "worker throughput over time")
    )


def _apart(trials: Trials) -> str:
    rows = _apart_rows(trials)
    if not rows:
        return "<p>None: every finished trial completed.</p>"
    more = len(rows) - _MAX_LISTED
    return (
        "<p>Never eligible as best. Trashed: more replicas diverged than "
        "<code>scan.divergence.max_diverged</code> allows, or were pos-veto than "
        "<code>scan.divergence.max_pos_veto</code> does (the sampler learns to avoid "
        "the region). Pruned: stopped early by the pruner. Failed: the worker died or was "
        "stopped; such trials are re-queued.</p>"
        + _table(["trial", "state", "worker", "reason"], rows[:_MAX_LISTED], {0}, frozenset({2}))
        + (f"<p class='muted'>… and {more} more.</p>" if more > 0 else "")
    )


def _no_best(name: str, trials: Trials, listed: str) -> str:
    if trials.complete:
        return ""
    return (
        f'<p class="note">No trial is complete yet ({_e(listed)}): none is best, and '
        "<code>hyperscan export</code> has no best trial to write"
        f"{_e(_export_any(name, trials))}. What the finished trials "
        "tell is below: where in the space they were pruned or trashed, and why, under "
        '<a href="#apart">Trials set apart</a>.</p>'
    )


def _runcard(text: str | None) -> str:
    if text is None:
        return ""
    return (
        '<section id="runcard"><h2>Runcard of the study</h2><details><summary>show'
        f"</summary><pre>{_e(text)}</pre></details></section>"
    )


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
    trials = Trials.of(study.get_trials(deepcopy=False))
    counts = trials.counts
    listed = ", ".join(f"{counts[s]} {s}" for s in STATE_ORDER if counts.get(s))
    if not (trials.complete or trials.pruned or trials.trashed or trials.failed):
        raise ReportError(
            f"study {study.study_name!r} has no finished trial yet ({listed or 'no trials'}), "
            "so there is nothing to report; run workers, or see "
            f"`hyperscan study status --study {study.study_name}`"
        )
    card, runcard_text = runcard(study)
    sentence, label = objective_text(card)
    best = trials.ranked[0] if trials.complete else None
    name = study.study_name
    with style():  # the figures' look, read as their artists are made
        sections = {
            "history": _history(trials, sentence, label),
            "parameters": _parameters(trials, label, best),
            "importances": _importances(study, trials),
            "spread": _spread(trials, card, label),
            "best": _best(name, trials, card, top),
            "workers": _workers(trials, now),
        }
    summary = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>"
        for k, v in _summary_rows(study, url, card, trials, counts)
    )
    title = f"hyperscan report: {name}"
    return _template().substitute(
        title=_e(title),
        generated=f"{now:%Y-%m-%d %H:%M}",
        version=_e(__version__),
        summary=summary,
        no_best=_no_best(name, trials, listed),
        **sections,
        apart=_apart(trials),
        runcard=_runcard(runcard_text),
    )
