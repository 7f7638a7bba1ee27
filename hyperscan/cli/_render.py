"""Text for people from the scan API's plain objects: status tables, study lists, the lines of
a live scan. No command logic here, and nothing that reads a storage."""

from __future__ import annotations

import datetime
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hyperscan.scan.results import (
        ScanEvent,
        ScanPlan,
        StudyStatus,
        StudySummary,
        TrialRecord,
    )

#: The columns of a χ² spread across replicas, as a worker stores it.
SPREAD = ("mean", "std", "min", "q16", "q50", "q84", "max")


def plural(count: int, word: str) -> str:
    """ "1 trial", "3 trials"."""
    return f"{count} {word}" + ("" if count == 1 else "s")


def counts_line(counts: Mapping[str, int]) -> str:
    """Trials by state in a line, trashed apart from pruned ("" when there are none)."""
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()) if n)


def trial_line(trial: TrialRecord, with_params: bool = True) -> str:
    """One line per finished trial for the live summary; a worker, which gave the trial's
    values as it started it, leaves them out."""
    took = f" in {trial.seconds:.0f} s" if trial.seconds is not None else ""
    if trial.state == "complete":
        params = f" {trial.params}" if with_params else ""
        values = trial.values or (trial.value,)
        shown = ", ".join(f"{value:.4f}" for value in values)
        return f"trial {trial.number}: {shown}{took}{params}"
    if trial.trashed:
        return f"trial {trial.number}: trashed{took}: {trial.trashed}"
    if trial.requeued:
        return f"trial {trial.number}: re-queued (its worker stopped)"
    return f"trial {trial.number}: {trial.state}{took}"


def trial_start_line(trial: TrialRecord) -> str:
    """The line a worker prints as it starts a trial: a long fit's log is not silent."""
    again = f" (retry of trial {trial.retry_of})" if trial.retry_of is not None else ""
    return f"trial {trial.number} started{again}: {trial.params}"


def event_line(event: ScanEvent) -> str:
    """A line of `hyperscan scan`'s live summary."""
    if event.kind == "trial started":
        return f"trial {event.trial.number} started"
    if event.kind == "trial ended":
        return trial_line(event.trial)
    if event.kind == "storage unreachable":
        return f"{event.message}; the workers wait for it"
    if event.kind == "worker restarted":
        return event.message
    return "stopping: the running trials end at their next sync and are re-queued"


def plan_line(plan: ScanPlan) -> str:
    """What `hyperscan scan` is about to do."""
    was = "" if plan.creation.old_budget is None else f" (was {plan.creation.old_budget})"
    fits = f"{plan.level1_fits} level-1 fits × " if plan.level1_fits > 1 else ""
    return (
        f"study {plan.study!r} {'created' if plan.creation.created else 'resumed'}: budget "
        f"{plan.budget} trials{was} of {fits}{plan.folds}×{plan.replicas} members, "
        f"{plural(plan.workers, 'worker')}"
        + ("" if plan.slots == 1 else f" × {plan.slots} trial slots")
        + ("" if plan.trials_left > 0 else " (budget already spent)")
    )


def _age(started: datetime.datetime | None, now: datetime.datetime) -> str:
    if started is None:
        return "?"
    seconds = int((now - started).total_seconds())
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _earlier(shown: int, total: int) -> str:
    return f" (the last {shown} of {total})" if total > shown else ""


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "    ") -> list[str]:
    """Columns aligned: a column of numbers to the right, any other to the left."""
    cells = [list(header)] + [[_cell(value) for value in row] for row in rows]
    widths = [max(len(row[k]) for row in cells) for k in range(len(header))]
    numeric = [
        all(isinstance(row[k], int | float) or row[k] is None for row in rows)
        for k in range(len(header))
    ]
    return [
        indent
        + "  ".join(
            cell.rjust(width) if numbers else cell.ljust(width)
            for cell, width, numbers in zip(row, widths, numeric, strict=True)
        ).rstrip()
        for row in cells
    ]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)


def _spread_rows(spreads: Mapping[str, Mapping[str, float]]) -> list[list[Any]]:
    """A χ² spread per row; one with non-finite values says how many were finite."""
    rows = []
    for name, spread in spreads.items():
        if "mean" in spread:
            rows.append([name, *(spread.get(key) for key in SPREAD), spread.get("n")])
        else:
            finite = f"{name} ({spread.get('finite', 0)} finite)"
            rows.append([finite, *([None] * len(SPREAD)), spread.get("n")])
    return rows


def _front_lines(status: StudyStatus) -> list[str]:
    """A multi-objective study's Pareto front: its trials, each objective's value."""
    lines = ["objectives:"]
    for objective in status.objectives:
        lines += textwrap.wrap(
            f"{objective.name} ({objective.direction}): {objective.label}",
            100,
            initial_indent="  ",
            subsequent_indent="    ",
        )
    if not status.front:
        return [*lines, "Pareto front: none yet (no complete trial)"]
    lines.append(f"Pareto front: {plural(len(status.front), 'trial')}")
    names = [objective.name for objective in status.objectives]
    rows = [[trial.number, *(trial.values[name] for name in names)] for trial in status.front]
    return lines + table(["trial", *names], rows)


def _best_lines(status: StudyStatus) -> list[str]:
    if status.objectives:
        return _front_lines(status)
    best = status.best
    if best is None:
        return ["best: none yet (no complete trial)"]
    lines = [f"best: trial {best.number}, value {best.value:.6g}"]
    if best.objective:
        lines += textwrap.wrap(
            best.objective, 100, initial_indent="  objective: ", subsequent_indent="    "
        )
    chi2 = "held-out" if best.chi2 == "held_out" else best.chi2
    if best.params:
        lines.append("  parameters:")
        lines += table(["name", "value"], sorted(best.params.items()))[1:]
    if best.statistics:
        lines.append(
            "  value under each replica statistic:"
            if best.value_is_statistic
            else f"  {chi2} chi2 per point under each replica statistic (not the objective):"
        )
        lines += table(list(best.statistics), [list(best.statistics.values())])
    if best.replicas:
        lines.append("  chi2 per point across replicas:")
        lines += table(["category", *SPREAD, "n"], _spread_rows(best.replicas))
    if best.folds:
        objective = "objective" if best.value_is_statistic else chi2
        lines.append(f"  {objective} chi2 per point of each fold's replicas:")
        lines += table(["fold", *SPREAD, "n"], _spread_rows(best.folds))
    fit = dict(best.fit)
    layout = fit.pop("batch_layout", None)
    scalars = {key: value for key, value in fit.items() if not isinstance(value, dict)}
    if layout is not None:
        scalars["slot"] = f"{layout['slot']} of {layout['slots']}"
    if scalars:
        lines.append("  fit: " + ", ".join(f"{key} {value}" for key, value in scalars.items()))
    spreads = {key: value for key, value in fit.items() if isinstance(value, dict)}
    if spreads:
        lines.append("  fit, across replicas:")
        lines += table(["", *SPREAD, "n"], _spread_rows(spreads))
    return lines


def status_text(status: StudyStatus, now: datetime.datetime | None = None) -> str:
    """What `hyperscan study status` prints: a screenful, whatever the study's size."""
    now = now or datetime.datetime.now()
    lines = [
        f"study {status.name} ({status.storage})",
        "trials: "
        + ", ".join(f"{n} {state}" for state, n in status.counts.items())
        + f" (budget {status.budget} finished)",
        *_best_lines(status),
    ]
    if status.running:
        lines.append("running:")
        for trial in status.running:
            line = (
                f"  trial {trial.number} on {trial.worker}, started {_age(trial.started, now)} ago"
            )
            if trial.lost:
                line += (
                    ": no heartbeat for the grace period, its worker is lost (the next worker "
                    "started on the study fails it)"
                )
            lines.append(line)
    if status.noise is not None:
        lines.append(f"noise floor: {status.noise.text()}")
        if len(status.ties) > 1:
            tied = ", ".join(map(str, status.ties))
            lines.append(
                f"  tied with the best within the replicas' spread: trials {tied} "
                f"(`hyperscan export --confirm {len(status.ties)}` chooses among them)"
            )
    if status.confirmed:
        lines.append("confirmed with fresh replicas (export --confirm):")
        for number, record in sorted(status.confirmed.items()):
            scan = ", ".join(f"{v:.6g}" for v in record["scan_values"])
            values = record["values"]
            again = (
                f"trashed: {record['trashed']}"
                if values is None
                else ", ".join(f"{v:.6g}" for v in values)
            )
            first, last = record["replicas"]
            lines.append(
                f"  trial {number}: scan {scan}, confirmed {again} (replicas {first}-{last})"
            )
    if status.trashed:
        lines.append("trashed:" + _earlier(len(status.trashed), status.trashed_total))
        lines.extend(f"  trial {number}: {why}" for number, why in status.trashed)
    if status.retried:
        lines.append(
            "retried:"
            + _earlier(len(status.retried), status.retried_total)
            + " "
            + ", ".join(
                f"{failed} → {retry}" + (" (worker lost)" if lost else "")
                for failed, retry, lost in status.retried
            )
        )
    return "\n".join(lines)


def studies_text(studies: Sequence[StudySummary], url: str) -> str:
    """`hyperscan study list`: each study of a storage in a line."""
    if not studies:
        return f"no studies in {url}"
    lines = [f"studies in {url}:"]
    for study in studies:
        spent = (
            "no hyperscan runcard"
            if study.budget is None
            else f"{study.finished} of {study.budget} finished"
        )
        best = "" if study.best_value is None else f", best {study.best_value:.6g}"
        if study.front is not None:
            best = f", Pareto front of {plural(study.front, 'trial')}"
        states = ", ".join(f"{n} {state}" for state, n in study.counts.items())
        lines.append(f"  {study.name}: {states or 'no trials'} ({spent}){best}")
    return "\n".join(lines)
