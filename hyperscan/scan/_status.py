"""What `hyperscan study status` prints: states, the best trial's replica spread, who runs what;
and `hyperscan study list`: every study of a storage in a line."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Sequence

import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from hyperscan.scan._study import StudySetup, stored_budget
from hyperscan.scan._trial_attrs import WORKER_ATTR, repeated, trashed
from hyperscan.scan.storage import (
    load_study,
    stale_trial_ids,
    storage_url,
    study_names,
    trial_id,
)


def state_counts(trials: list[optuna.trial.FrozenTrial]) -> Counter[str]:
    """Counts by state, with trashed trials apart from those the pruner stopped."""
    counts: Counter[str] = Counter()
    for trial in trials:
        if trial.state == TrialState.PRUNED and trashed(trial):
            counts["trashed"] += 1
        else:
            counts[trial.state.name.lower()] += 1
    return counts


def _age(trial: optuna.trial.FrozenTrial, now: datetime.datetime) -> str:
    if trial.datetime_start is None:
        return "?"
    seconds = int((now - trial.datetime_start).total_seconds())
    return f"{seconds // 60}m{seconds % 60:02d}s"


#: Trashed trials and retries listed, the latest ones: a study of thousands of trials has
#: hundreds of each (the dashboard and `hyperscan report` show them trial by trial).
LISTED = 10

# Trials that count against the study budget; FAIL ones are retried, so they do not.
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

#: The states as status and list name them, in this order.
STATES = ("complete", "pruned", "trashed", "fail", "running", "waiting")


def finished_trials(study: optuna.Study) -> int:
    """How much of the budget is spent."""
    return len(study.get_trials(deepcopy=False, states=FINISHED))


def status_text(setup: StudySetup) -> str:
    """What `hyperscan study status` prints. It reads the storage: callers read inside
    :func:`explained_storage_errors`."""
    study = setup.study
    trials = study.get_trials(deepcopy=False)
    counts = state_counts(trials)
    lines = [
        f"study {study.study_name} ({setup.url})",
        "trials: "
        + ", ".join(f"{counts.get(state, 0)} {state}" for state in STATES)
        + f" (budget {setup.runcard.scan.trials} finished)",
    ]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if complete:
        best = study.best_trial
        lines.append(f"best: trial {best.number}, value {best.value:.6g}")
        for key in ("statistics", "replicas", "folds", "fit"):
            if key in best.user_attrs:
                lines.append(f"  {key}: {best.user_attrs[key]}")
        lines.append(f"  params: {best.params}")
    else:
        lines.append("best: none yet (no complete trial)")
    now = datetime.datetime.now()
    running = [t for t in trials if t.state == TrialState.RUNNING]
    if running:
        lines.append("running:")
        lost = set(stale_trial_ids(study))
        for trial in running:
            worker = trial.user_attrs.get(WORKER_ATTR, "?")
            line = f"  trial {trial.number} on {worker}, started {_age(trial, now)} ago"
            if trial_id(trial) in lost:
                line += (
                    ": no heartbeat for the grace period, its worker is lost (the next worker "
                    "started on the study fails it)"
                )
            lines.append(line)
    bad = [t for t in trials if trashed(t)]
    if bad:
        lines.append("trashed:" + _earlier(len(bad)))
        lines.extend(f"  trial {t.number}: {trashed(t)}" for t in bad[-LISTED:])
    retried = list(retries(trials).items())
    if retried:
        lines.append(
            "retried:"
            + _earlier(len(retried))
            + " "
            + ", ".join(
                f"{failed} → {retry}" + (" (worker lost)" if lost else "")
                for failed, (retry, lost) in retried[-LISTED:]
            )
        )
    return "\n".join(lines)


def studies_text(storage: BaseStorage) -> str:
    """Each study of the storage in a line: its trials by state, budget and best value (a
    cluster's database holds many; their names are what every other command asks for)."""
    url = storage_url(storage)
    names = study_names(storage)
    if not names:
        return f"no studies in {url}"
    lines = [f"studies in {url}:"]
    for name in names:
        study = load_study(storage, name)
        trials = study.get_trials(deepcopy=False)
        counts = state_counts(trials)
        states = ", ".join(f"{counts[state]} {state}" for state in STATES if counts[state])
        budget = stored_budget(study)
        finished = sum(trial.state in FINISHED for trial in trials)
        spent = "no hyperscan runcard" if budget is None else f"{finished} of {budget} finished"
        # hyperscan minimises; another program's study may not
        values = [trial.value for trial in trials if trial.state == TrialState.COMPLETE]
        best = f", best {min(values):.6g}" if values and budget is not None else ""
        lines.append(f"  {name}: {states or 'no trials'} ({spent}){best}")
    return "\n".join(lines)


def _earlier(count: int) -> str:
    left_out = count - LISTED
    return f" (the last {LISTED} of {count})" if left_out > 0 else ""


def retries(trials: Sequence[optuna.trial.FrozenTrial]) -> dict[int, tuple[int, bool]]:
    """Each failed trial queued again: the number of its retry, and whether its worker was
    lost (died, or lost the storage) rather than told to stop."""
    found = {}
    for trial in trials:
        repeats = repeated(trial.user_attrs, trial.system_attrs)
        if repeats is not None:
            found[repeats[0]] = (trial.number, repeats[1])
    return found
