# SPDX-License-Identifier: GPL-3.0-or-later
"""`export --confirm K`: the K best trials refitted with fresh replicas before one is chosen.

A scan's best value is partly luck: the trials it beat differ from it by less than a fit's
spread from seed to seed, so on a refit the winner is on average worse than it looked (the
winner's curse). Refitting the best few with replicas none of them was fitted with, and
choosing by those values, takes the luck of the draw out of the choice. The K refits share one
trial batch (fit/_slots.py), so they cost about one fit.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from hyperscan._version import __version__
from hyperscan.data import Problem
from hyperscan.fit import FitResult, fit_together, run_fit
from hyperscan.runcard import FitRuncard, ScanRuncard, dump_runcard
from hyperscan.scan._export import values_text
from hyperscan.scan._rule import parse_rule
from hyperscan.scan._status import pareto_front
from hyperscan.scan._study import CONFIRMED_ATTR, ScanError, StudySetup, minimizes, ranked
from hyperscan.score import Scoring, score


@dataclass(frozen=True)
class Confirmation:
    """A trial refitted with fresh replicas: its scan values and its confirmed ones."""

    number: int
    scan_values: tuple[float, ...]
    values: tuple[float, ...] | None  # None: the refit was trashed (`trash_reason`)
    trash_reason: str | None
    runcard: FitRuncard  # the refit's runcard: the fresh replicas, and the batch it sat in


def fresh_replicas(runcard: ScanRuncard, replicas: int | None) -> tuple[int, ...]:
    """Replica ids no trial was fitted with (a trial's are 1..scan.replicas): ``replicas`` of
    them, by default as many as a trial has. A replica's id seeds its pseudodata and its
    network's start, so these are fresh draws of both."""
    count = replicas or runcard.scan.replicas
    first = runcard.scan.replicas + 1
    return tuple(range(first, first + count))


def candidates(setup: StudySetup, count: int, rule: str | None) -> list[optuna.trial.FrozenTrial]:
    """The ``count`` best complete trials, best first; of a multi-objective study, the
    ``count`` of its Pareto front that ``rule`` prefers, in its order."""
    objective = setup.runcard.scan.objective
    name = setup.study.study_name
    if objective.multi:
        if rule is None:
            raise ScanError(
                f"study {name!r} has {len(objective.names)} objectives: --confirm refits its "
                "Pareto front, and --rule chooses among the confirmed values"
            )
        parsed = parse_rule(rule, objective.names)
        _, front = pareto_front(setup)
        values = {trial.number: trial.values for trial in front}
        preferred: list[int] = []
        while values and len(preferred) < count:
            preferred.append(parsed.choose(list(values.items())))
            values.pop(preferred[-1])
        trials = {t.number: t for t in setup.study.get_trials(deepcopy=False)}
        chosen = [trials[number] for number in preferred]
    else:
        if rule is not None:
            raise ScanError(
                f"--rule chooses from the Pareto front of a multi-objective study; study "
                f"{name!r} has one objective"
            )
        complete = setup.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        chosen = ranked(complete, minimizes(setup.study))[:count]
    if not chosen:
        raise ScanError(f"study {name!r} has no complete trial yet: nothing to confirm")
    return chosen


def confirm(
    setup: StudySetup,
    trials: list[optuna.trial.FrozenTrial],
    problem: Problem,
    replicas: tuple[int, ...],
    on_confirmed: Callable[[Confirmation], None] | None = None,
) -> list[Confirmation]:
    """Refit ``trials`` with ``replicas`` (several at once, in one batch) and score each as the
    scan scores a trial; each is recorded on the study (:data:`CONFIRMED_ATTR`) and told to
    ``on_confirmed`` as it ends."""
    runcard = setup.runcard
    confirming = runcard.model_copy(
        update={"scan": runcard.scan.model_copy(update={"replicas": len(replicas)})}
    )
    scoring = Scoring.of(confirming, problem)
    cards = {
        trial.number: runcard.trial_runcard(trial.params).model_copy(update={"replicas": replicas})
        for trial in trials
    }
    by_number = {trial.number: trial for trial in trials}
    confirmed = []

    def ended(number: int, result: FitResult) -> None:
        scored = score(result, scoring)
        # What `fit` needs to repeat the refit bit for bit: its thread count and its batch.
        training = cards[number].training.model_copy(
            update={"threads": scored.attrs["fit"]["threads"], "batch_layout": result.batch_layout}
        )
        card = cards[number].model_copy(update={"training": training})
        done = Confirmation(
            number,
            tuple(by_number[number].values),
            None if scored.values is None else tuple(scored.values),
            scored.trash_reason,
            card,
        )
        _record(setup.study, done, replicas)
        confirmed.append(done)
        if on_confirmed is not None:
            on_confirmed(done)

    if len(cards) == 1:  # alone, as `hyperscan fit` refits it without a batch layout
        ((number, card),) = cards.items()
        ended(number, run_fit(card, problem=problem))
    else:
        for number, result in fit_together(cards, problem):
            ended(number, result)
    return confirmed


def _record(study: optuna.Study, done: Confirmation, replicas: tuple[int, ...]) -> None:
    """Keep a confirmation on the study: a finished trial's attributes cannot change."""
    record = dict(study.user_attrs.get(CONFIRMED_ATTR, {}))
    record[str(done.number)] = {
        "scan_values": list(done.scan_values),
        "values": None if done.values is None else list(done.values),
        "trashed": done.trash_reason,
        "replicas": [replicas[0], replicas[-1]],
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    study.set_user_attr(CONFIRMED_ATTR, record)


def confirmed_choice(
    setup: StudySetup, confirmed: list[Confirmation], rule: str | None
) -> tuple[Confirmation, str]:
    """The confirmation the study's objective (or ``rule``) prefers by its confirmed values,
    and why, in words; refused when every refit was trashed."""
    kept = [c for c in confirmed if c.values is not None]
    if not kept:
        reasons = "; ".join(f"trial {c.number}: {c.trash_reason}" for c in confirmed)
        raise ScanError(f"every confirming refit was trashed ({reasons})")
    objective = setup.runcard.scan.objective
    if objective.multi:
        parsed = parse_rule(rule or "", objective.names)
        number = parsed.choose(
            [(c.number, dict(zip(objective.names, c.values, strict=True))) for c in kept]
        )
        why = f"{parsed}, by the confirmed values"
    else:
        sign = 1 if minimizes(setup.study) else -1
        number = min(kept, key=lambda c: (sign * c.values[0], c.number)).number
        why = "the best confirmed value"
    return next(c for c in kept if c.number == number), why


def confirmed_text(
    setup: StudySetup, choice: Confirmation, why: str, confirmed: list[Confirmation]
) -> str:
    """The chosen refit's runcard, headed by what was confirmed: `hyperscan fit` of it gives
    its confirmed values back."""
    names = setup.runcard.scan.objective.names
    replicas = choice.runcard.replica_ids
    lines = [
        "Fit runcard exported by hyperscan from a confirmed scan trial.",
        f"study: {setup.study.study_name}",
        f"storage: {setup.url}",
        f"trial: {choice.number}",
        f"scan {_values(choice.scan_values, names)}",
        f"confirmed {_values(choice.values, names)} (replicas {replicas[0]} to {replicas[-1]}, "
        "fresh seeds; this runcard's fit gives it back)",
        f"chosen by: {why}, among trials "
        + ", ".join(
            f"{c.number} ({_values(c.scan_values, names)} -> "
            + (_values(c.values, names) if c.values is not None else f"trashed: {c.trash_reason}")
            + ")"
            for c in confirmed
        ),
        "exported: " + datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        f"hyperscan: {__version__}",
    ]
    return dump_runcard(choice.runcard, header="\n".join(" ".join(line.split()) for line in lines))


def _values(values: tuple[float, ...] | None, names: tuple[str, ...]) -> str:
    return "none" if values is None else values_text(values, names)
