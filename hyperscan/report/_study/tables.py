# SPDX-License-Identifier: GPL-3.0-or-later
"""The page's tables as HTML: the summary, the best trials and the trials set apart, and what
their cells say of a trial (its members, best epoch, folds, fit time)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna

from hyperscan.report._study.trials import (
    MERITS,
    TrialRecord,
    Trials,
    finite,
    merit_columns,
    objective_text,
    spread,
)
from hyperscan.report._style import STATE_ORDER
from hyperscan.runcard import ScanRuncard
from hyperscan.scan import CONFIRMED_ATTR, NoiseFloor


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def html_table(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    numeric: set[int],
    nowrap: frozenset[int] = frozenset(),
) -> str:
    def cell(i: int, value: Any) -> str:
        css = "num" if i in numeric else "nowrap" if i in nowrap else ""
        return (
            f'<td class="{css}">{escape(_fmt(value))}</td>'
            if css
            else f"<td>{escape(_fmt(value))}</td>"
        )

    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


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


def best_table(trials: Trials, category: str, top: int, card: ScanRuncard | None = None) -> str:
    """The best complete trials; a k-fold study's also have a column per fold, since their
    replica columns pool the folds, each scored on other datasets; then the ensemble figures
    of merit the trials have (φ, closure estimators)."""
    merits = merit_columns(card, trials.complete)
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
                *(trial.merits.get(key, "") for key in merits),
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
    folds += [MERITS[key][0] for key in merits]
    header = [
        "rank", "trial", "value", *folds, "best replica", "median replica", "worst replica",
        "members", "best epoch (median)", "fit time", "worker", "parameters",
    ]  # fmt: skip
    numeric = set(range(9 + len(folds)))
    return html_table(header, rows, numeric=numeric, nowrap=frozenset({9 + len(folds)}))


def folds_note(card: ScanRuncard | None) -> str:
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


def export_any(name: str, trials: Trials) -> str:
    """How to export a pruned or trashed trial all the same (empty if there is none)."""
    if not (trials.pruned or trials.trashed):
        return ""
    return f" (hyperscan export --study {name} --trial N writes a pruned or trashed one)"


def apart_rows(trials: Trials) -> list[list[Any]]:
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


def real_sets(card: ScanRuncard) -> int:
    """The real datasets fitted: those of ``data.datasets`` when it selects some."""
    selected = card.fit.data.datasets
    return len(card.fit.data.real.datasets) if selected == "all" else len(selected)


def _best_row(trials: Trials, front: Sequence[int] | None) -> tuple[str, str]:
    """The best trial; for a multi-objective study its Pareto front (``front``), as `study
    status` shows it: such a study has no single best."""
    if front is not None:
        if not front:
            return "Pareto front", "none yet: no trial is complete"
        listed = ", ".join(str(number) for number in sorted(front))
        return "Pareto front", f"{len(front)} trial{'' if len(front) == 1 else 's'}: {listed}"
    if not trials.complete:
        return "best", "none: no trial is complete"
    best = trials.ranked[0]
    return "best", f"trial {best.number}, value {best.value:.6g}"


def _listed(values: Sequence[float]) -> str:
    return ", ".join(f"{value:.6g}" for value in values)


def summary_rows(
    study: optuna.Study,
    url: str,
    card: ScanRuncard | None,
    trials: Trials,
    counts: dict,
    front: Sequence[int] | None = None,
) -> list[tuple[str, str]]:
    """The summary table; ``front``: a multi-objective study's Pareto front, by trial number."""
    sentence, _ = objective_text(card)
    finished = sum(counts.get(s, 0) for s in ("complete", "pruned", "trashed"))
    rows = [
        ("study", study.study_name),
        ("storage", url),
        ("trial value", f"{sentence} ({'higher' if trials.sign < 0 else 'lower'} is better)"),
        _best_row(trials, front),
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
                    else f", real DIS data ({real_sets(card)} sets), "
                )
                + f"at most {card.fit.epochs} epochs",
            ),
            (
                "sampler / pruner",
                f"{scan.sampler.name} (seed {scan.sampler.seed}) / {scan.pruner.name}",
            ),  # fmt: skip
        ]
    noise = NoiseFloor.stored(study.user_attrs)
    if noise is not None:
        ties = (
            []
            if front is not None
            else noise.ties(study.get_trials(deepcopy=False), trials.sign > 0)
        )
        tied = (
            f"; tied with the best within the replicas' spread: trials {', '.join(map(str, ties))}"
            if len(ties) > 1
            else ""
        )
        rows.append(("noise floor", noise.text() + tied))
    confirmed = study.user_attrs.get(CONFIRMED_ATTR, {})
    if confirmed:
        rows.append(
            (
                "confirmed (export --confirm)",
                "; ".join(
                    f"trial {number}: scan {_listed(record['scan_values'])} → "
                    + (
                        _listed(record["values"])
                        if record["values"] is not None
                        else f"trashed ({record['trashed']})"
                    )
                    for number, record in sorted(confirmed.items(), key=lambda kv: int(kv[0]))
                ),
            )
        )
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
