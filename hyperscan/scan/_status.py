"""What `hyperscan study status` shows (states, the best trial's replica spread, who runs
what) and `hyperscan study list` (every study of a storage in brief), as plain objects."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from hyperscan.scan._noise_floor import NoiseFloor
from hyperscan.scan._study import CONFIRMED_ATTR, StudySetup, minimizes, stored_budget
from hyperscan.scan._trial_attrs import WORKER_ATTR, repeated, trashed
from hyperscan.scan.storage import (
    load_study,
    stale_trial_ids,
    study_names,
    trial_id,
)
from hyperscan.score import objective_label


def state_counts(trials: list[optuna.trial.FrozenTrial]) -> Counter[str]:
    """Counts by state, with trashed trials apart from those the pruner stopped."""
    counts: Counter[str] = Counter()
    for trial in trials:
        if trial.state == TrialState.PRUNED and trashed(trial):
            counts["trashed"] += 1
        else:
            counts[trial.state.name.lower()] += 1
    return counts


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


@dataclass(frozen=True)
class BestTrial:
    """The best complete trial and what its worker stored with it."""

    number: int
    value: float
    params: dict[str, Any]
    #: The trial's value under every replica statistic, so a study can be re-ranked later.
    statistics: dict[str, float] = field(default_factory=dict)
    #: Per χ² category (training, validation, held_out), its spread across replicas.
    replicas: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Per fold of a k-fold scan, the spread of its members' χ².
    folds: dict[str, dict[str, float]] = field(default_factory=dict)
    #: The fit: members, diverged, pos_veto, seconds, threads, ...
    fit: dict[str, Any] = field(default_factory=dict)
    #: What the value is, in words (:func:`objective_label`).
    objective: str = ""
    #: Whether the value is the χ² statistic of ``statistics`` (``loss: statistic``), not
    #: an n3fit loss; ``chi2``: the χ² of ``statistics`` and ``folds``, validation or held_out.
    value_is_statistic: bool = True
    chi2: str = "validation"


@dataclass(frozen=True)
class Objective:
    """One objective of a multi-objective study: its name, direction and meaning."""

    name: str
    direction: str
    label: str


@dataclass(frozen=True)
class FrontTrial:
    """A trial of a multi-objective study's Pareto front: no other complete trial is at least
    as good in every objective and better in one."""

    number: int
    #: Each objective's value, by name.
    values: dict[str, float]
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunningTrial:
    """A RUNNING trial: which worker has it since when, and whether that worker is lost (no
    heartbeat for the grace period: the next worker started on the study fails it)."""

    number: int
    worker: str
    started: datetime.datetime | None
    lost: bool


@dataclass(frozen=True)
class StudyStatus:
    """What `hyperscan study status` shows: trials by state, the best trial, who runs what,
    and the latest trashed trials and retries (the last :data:`LISTED` of each)."""

    name: str
    storage: str  # password redacted
    budget: int
    #: Trials by state, in :data:`STATES` order, trashed apart from pruned.
    counts: dict[str, int]
    finished: int  # of the budget: complete, pruned and trashed trials
    best: BestTrial | None
    running: list[RunningTrial]
    #: (trial number, reason) of the latest trashed trials; ``trashed_total`` counts them all.
    trashed: list[tuple[int, str]]
    trashed_total: int
    #: (failed trial, its retry, whether its worker was lost) of the latest retries.
    retried: list[tuple[int, int, bool]]
    retried_total: int
    #: A multi-objective study's objectives and its Pareto front (``best`` is None there);
    #: empty for a single objective.
    objectives: list[Objective] = field(default_factory=list)
    front: list[FrontTrial] = field(default_factory=list)
    #: By trial number, what `export --confirm` measured: ``scan_values``, the confirmed
    #: ``values`` (None: trashed, ``trashed`` says why) and the fresh ``replicas`` (first, last).
    confirmed: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: What `study noise` measured, and the complete trials tied with the best within the
    #: replicas' spread (best first); None before it ran.
    noise: NoiseFloor | None = None
    ties: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: for `hyperscan study status --json` and scripts."""
        data = asdict(self)
        for trial in data["running"]:
            started = trial["started"]
            trial["started"] = None if started is None else started.isoformat(timespec="seconds")
        data["trashed"] = [{"trial": n, "reason": why} for n, why in self.trashed]
        data["retried"] = [
            {"trial": failed, "retry": retry, "worker_lost": lost}
            for failed, retry, lost in self.retried
        ]
        return data


def study_status(setup: StudySetup) -> StudyStatus:
    """The status of a study. It reads the storage: callers read inside
    :func:`explained_storage_errors`."""
    study = setup.study
    trials = study.get_trials(deepcopy=False)
    counts = state_counts(trials)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    best = None
    objective = setup.runcard.scan.objective
    if objective.multi:
        objectives, front = pareto_front(setup)
    else:
        objectives, front = [], []
    if complete and not objective.multi:
        trial = study.best_trial
        attrs = trial.user_attrs
        best = BestTrial(
            number=trial.number,
            value=trial.value,
            params=dict(trial.params),
            statistics=dict(attrs.get("statistics", {})),
            replicas=dict(attrs.get("replicas", {})),
            folds=dict(attrs.get("folds", {})),
            fit=dict(attrs.get("fit", {})),
            objective=objective_label(setup.runcard.scan.objective, len(setup.runcard.scan.folds)),
            value_is_statistic=setup.runcard.scan.objective.loss == "statistic",
            chi2=setup.runcard.scan.objective.chi2,
        )
    lost = set(stale_trial_ids(study))
    running = [
        RunningTrial(
            number=t.number,
            worker=t.user_attrs.get(WORKER_ATTR, "?"),
            started=t.datetime_start,
            lost=trial_id(t) in lost,
        )
        for t in trials
        if t.state == TrialState.RUNNING
    ]
    bad = [(t.number, trashed(t)) for t in trials if trashed(t)]
    retried = [(failed, retry, lost) for failed, (retry, lost) in retries(trials).items()]
    noise = NoiseFloor.stored(study.user_attrs)
    minimize = objective.multi or minimizes(study)
    return StudyStatus(
        name=study.study_name,
        storage=setup.url,
        budget=setup.runcard.scan.trials,
        counts={state: counts.get(state, 0) for state in STATES},
        finished=sum(t.state in FINISHED for t in trials),
        best=best,
        running=running,
        trashed=bad[-LISTED:],
        trashed_total=len(bad),
        retried=retried[-LISTED:],
        retried_total=len(retried),
        objectives=objectives,
        front=front,
        confirmed={
            int(number): record
            for number, record in study.user_attrs.get(CONFIRMED_ATTR, {}).items()
        },
        noise=noise,
        ties=[] if noise is None or objective.multi else noise.ties(trials, minimize),
    )


def pareto_front(setup: StudySetup) -> tuple[list[Objective], list[FrontTrial]]:
    """A multi-objective study's objectives and its Pareto front, by trial number (trashed
    trials are PRUNED, so never on it)."""
    objective, folds = setup.runcard.scan.objective, len(setup.runcard.scan.folds)
    objectives = [
        Objective(entry.name, entry.direction, objective_label(entry, folds))
        for entry in objective.entries
    ]
    front = [
        FrontTrial(
            number=trial.number,
            values=dict(zip(objective.names, trial.values, strict=True)),
            params=dict(trial.params),
        )
        for trial in sorted(setup.study.best_trials, key=lambda t: t.number)
    ]
    return objectives, front


@dataclass(frozen=True)
class StudySummary:
    """A study of a storage in brief, as `hyperscan study list` shows it."""

    name: str
    #: Trials by state (only the states it has), trashed apart from pruned.
    counts: dict[str, int]
    finished: int
    #: None for a study that hyperscan did not create (no runcard: no budget).
    budget: int | None
    #: The lowest complete value; None without one, or for a study hyperscan did not create
    #: (its direction may not be hyperscan's).
    best_value: float | None
    #: A multi-objective study's Pareto front size (None for a single objective).
    front: int | None = None


def study_summary(study: optuna.Study) -> StudySummary:
    """A study in brief. It reads the storage: callers read inside
    :func:`explained_storage_errors`."""
    trials = study.get_trials(deepcopy=False)
    counts = state_counts(trials)
    budget = stored_budget(study)
    # hyperscan minimises a single objective; another program's study may not, and a
    # multi-objective study has a front, not a best value
    many = len(study.directions) > 1
    values = [trial.value for trial in trials if trial.state == TrialState.COMPLETE and not many]
    return StudySummary(
        name=study.study_name,
        counts={state: counts[state] for state in STATES if counts[state]},
        finished=sum(trial.state in FINISHED for trial in trials),
        budget=budget,
        best_value=min(values) if values and budget is not None else None,
        front=len(study.best_trials) if many else None,
    )


def study_summaries(storage: BaseStorage) -> list[StudySummary]:
    """Every study of the storage in brief (a cluster's database holds many; their names are
    what every other command asks for). It reads the storage: callers read inside
    :func:`explained_storage_errors`."""
    return [study_summary(load_study(storage, name)) for name in study_names(storage)]


def retries(trials: Sequence[optuna.trial.FrozenTrial]) -> dict[int, tuple[int, bool]]:
    """Each failed trial queued again: the number of its retry, and whether its worker was
    lost (died, or lost the storage) rather than told to stop."""
    found = {}
    for trial in trials:
        repeats = repeated(trial.user_attrs, trial.system_attrs)
        if repeats is not None:
            found[repeats[0]] = (trial.number, repeats[1])
    return found
