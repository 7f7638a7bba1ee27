# SPDX-License-Identifier: GPL-3.0-or-later
"""A study read into plain records: the one place the report touches Optuna's trials and the
scan service's trial attributes; the figures and the page read only these records."""

from __future__ import annotations

import datetime
import math
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from hyperscan.runcard import LOSSES, RuncardError, ScanRuncard, parse_scan_runcard
from hyperscan.scan import RUNCARD_ATTR, last_report, retries, trashed
from hyperscan.score import CLOSURE_ESTIMATORS, objective_label

#: The ensemble figures of merit a report shows per trial, by their key in the trial's
#: ``ensemble`` and ``closure`` attributes: a label, and the ideal value where there is one.
MERITS: dict[str, tuple[str, float | None]] = {
    "phi": ("φ", None),
    "phi2": ("φ²", None),
    "bias": ("bias", None),
    "variance": ("variance", None),
    "rbv": ("R_bv", 1.0),
    "xi1sigma": ("ξ₁σ", math.erf(1.0 / math.sqrt(2.0))),
}


@dataclass(frozen=True)
class TrialRecord:
    """What the report reads of one trial."""

    number: int
    kind: str  # its state, trashed apart from pruned: a key of _style.STATE_COLOURS
    value: float | None
    params: dict[str, Any]
    distributions: dict[str, BaseDistribution]
    last_report: tuple[int, float] | None  # the last (step, value) told to the pruner
    trash_reason: str | None
    worker: str  # the worker that ran it (host:pid), "" when none did
    started: datetime.datetime | None
    finished: datetime.datetime | None
    fit: dict[str, Any]  # the `fit`, `replicas` and `folds` attributes of a worker, or {}
    replicas: dict[str, Any]
    folds: Any
    merits: dict[str, float]  # MERITS' figures, each the mean over the folds
    #: A multi-objective study's values, one per objective (``value`` is the first).
    values: tuple[float, ...] | None = None

    @classmethod
    def of(cls, trial: FrozenTrial) -> TrialRecord:
        attrs = trial.user_attrs
        many = trial.values is not None and len(trial.values) > 1
        return cls(
            number=trial.number,
            kind=_kind(trial),
            value=trial.values[0] if trial.values else None,
            values=tuple(trial.values) if many else None,
            params=trial.params,
            distributions=trial.distributions,
            last_report=last_report(trial),
            trash_reason=trashed(trial),
            worker=str(attrs.get("worker", "")),
            started=trial.datetime_start,
            finished=trial.datetime_complete,
            fit=attrs.get("fit", {}),
            replicas=attrs.get("replicas", {}),
            folds=attrs.get("folds", {}),
            merits=_merits(attrs),
        )


def _merits(attrs: dict[str, Any]) -> dict[str, float]:
    """The trial's ensemble figures (φ, φ²) and closure estimators, each the mean over its
    folds' values; left out where a fold has none (a trial of another version, no truth)."""
    found: dict[str, float] = {}
    for attr, names in (("ensemble", ("phi", "phi2")), ("closure", CLOSURE_ESTIMATORS)):
        section = attrs.get(attr)
        folds = section.get("folds") if isinstance(section, dict) else None
        if not isinstance(folds, dict) or not folds:
            continue
        for name in names:
            values = [fold.get(name) if isinstance(fold, dict) else None for fold in folds.values()]
            if all(finite(v) for v in values):
                found[name] = float(np.mean(values))
    return found


def _kind(trial: FrozenTrial) -> str:
    if trial.state == TrialState.PRUNED:
        return "trashed" if trashed(trial) else "pruned"
    return trial.state.name.lower()


@dataclass
class Trials:
    """A study's trials split the way hyperscan reads them (trashed apart from pruned)."""

    all: list[TrialRecord]
    retried: dict[int, tuple[int, bool]] = field(default_factory=dict)  # scan.retries
    complete: list[TrialRecord] = field(default_factory=list)
    pruned: list[TrialRecord] = field(default_factory=list)  # stopped by the pruner
    trashed: list[TrialRecord] = field(default_factory=list)  # diverged replicas
    failed: list[TrialRecord] = field(default_factory=list)
    #: -1 where the (first) objective is maximised: "best" is the highest value then.
    sign: float = 1.0

    def __post_init__(self) -> None:
        for trial in self.all:
            if trial.kind == "complete" and finite(trial.value):
                self.complete.append(trial)
            elif trial.kind in ("pruned", "trashed"):
                (self.trashed if trial.kind == "trashed" else self.pruned).append(trial)
            elif trial.kind == "fail":
                self.failed.append(trial)

    @classmethod
    def of(cls, trials: Sequence[FrozenTrial], maximize: bool = False) -> Trials:
        """``maximize``: the (first) objective is maximised."""
        records = [TrialRecord.of(t) for t in trials]
        return cls(records, retries(trials), sign=-1.0 if maximize else 1.0)

    @property
    def ranked(self) -> list[TrialRecord]:
        return sorted(self.complete, key=lambda t: (self.sign * t.value, t.number))

    @property
    def counts(self) -> dict[str, int]:
        """Trials by kind, as `hyperscan study status` counts them."""
        return dict(Counter(t.kind for t in self.all))


def finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def runcard(study: optuna.Study) -> tuple[ScanRuncard | None, str | None]:
    """The study's runcard, parsed, and its text."""
    text = study.user_attrs.get(RUNCARD_ATTR)
    if not isinstance(text, str):
        return None, None
    try:
        return parse_scan_runcard(text, source=f"runcard of study {study.study_name!r}"), text
    except RuncardError:
        return None, text  # another hyperscan version's runcard: shown, not interpreted


def category(card: ScanRuncard | None) -> str:
    """The chi2 the objective scores: validation, or held_out for k-fold studies."""
    if card is not None and card.scan.objective.chi2 == "held_out":
        return "held_out"
    return "validation"


def objective_text(card: ScanRuncard | None) -> tuple[str, str]:
    """(sentence, axis label) of what the trial value is: the study's own objective."""
    if card is None:
        return "the trial value", "trial value"
    objective = card.scan.objective
    if objective.multi:  # the figures of one value show the first objective
        first = objective.entries[0]
        label = objective_label(first, len(card.scan.folds))
        return f"the first objective, {first.name} ({first.direction}): {label}", first.name
    if objective.loss != "statistic":
        return objective_label(objective, len(card.scan.folds)), LOSSES[objective.loss].axis
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


def merit_columns(card: ScanRuncard | None, trials: Sequence[TrialRecord]) -> list[str]:
    """The figures of merit to show, by key: φ (φ² when the objective takes it), and the
    closure estimators; each only when a trial has it."""
    phi = "phi2" if card is not None and card.scan.objective.phi_squared else "phi"
    keys = [phi, *CLOSURE_ESTIMATORS]
    return [key for key in keys if any(key in t.merits for t in trials)]


def parameter_order(trials: Sequence[TrialRecord]) -> list[str]:
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


def varying_parameters(trials: Sequence[TrialRecord]) -> set[str]:
    """The parameters that take more than one value among the trials that have them: one pass
    over the trials (a study of 3,000 trials took 90 s comparing every trial with every other)."""
    seen: dict[str, set[str]] = {}
    for trial in trials:
        for name, value in trial.params.items():
            seen.setdefault(name, set()).add(repr(value))
    return {name for name, values in seen.items() if len(values) > 1}


def importances(study: optuna.Study, trials: Trials) -> tuple[dict[str, float], str]:
    """Optuna's importances (PED-ANOVA, its default) and a sentence on how to read them.

    PED-ANOVA needs no package beyond Optuna (fANOVA would need scikit-learn) and handles the
    conditional parameters of a hyperscan space (a learning rate per optimiser, units_2 only
    with two layers). Guarded: an empty dict and the reason when there is nothing to rank.
    """
    n = len(trials.complete)
    if n < 2:
        return {}, f"Importances need at least 2 complete trials; this study has {n}."
    if not varying_parameters(trials.complete):
        return {}, "Every complete trial has the same parameter values: nothing to rank."
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(study)
    except Exception as error:  # a report must not die on a statistics corner case
        return {}, f"Optuna could not compute importances: {error}"
    found = {k: float(v) for k, v in found.items() if finite(v)}
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


def spread(trial: TrialRecord, category: str) -> dict[str, float] | None:
    """The replicas' chi2 quantiles a trial stored (min, q16, q50, q84, max)."""
    summary = trial.replicas.get(category)
    keys = ("min", "q16", "q50", "q84", "max")
    if not isinstance(summary, dict) or not all(finite(summary.get(k)) for k in keys):
        return None
    return {k: float(summary[k]) for k in keys}
