# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan study noise`: how much of a trial's value is rounding, and how much its draw of
replicas, measured by refitting it.

Two spreads of a value. Rounding: the trial's own runcard refitted in other batch layouts
(alone, and in batches padded 1, 2, ... units wider than a worker's, which makes room for the
space's widest trials), which change only the summation order that training amplifies. (The
number of slots does not change it: a trial refits bit for bit in batches of 2 to 4 slots of
its worker's widths.) Replicas: the trial
refitted with other data and network seeds, which is what the value would be with another
draw of pseudodata and starts. Two trials closer than the replicas'
spread are tied: a scan cannot tell them apart, and `export --confirm` should choose.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from hyperscan.data import Problem
from hyperscan.fit import fit_together, run_fit
from hyperscan.runcard import FitRuncard
from hyperscan.scan._study import NOISE_ATTR, ScanError, StudySetup, minimizes, ranked
from hyperscan.score import Scoring, score

#: How far apart the seeds of two draws are: replica ids are combined with them, so draws
#: whose seeds differ by less than a study's replicas could share a replica's seed.
_SEED_STEP = 100_003


@dataclass(frozen=True)
class TrialNoise:
    """A trial's value in the scan, refitted in other layouts, and with fresh replicas (nan
    where a refit was trashed)."""

    number: int
    value: float
    rounding: tuple[float, ...]
    replicas: tuple[float, ...]


def measure_noise(
    setup: StudySetup,
    count: int,
    repeats: int,
    problem: Problem,
    on_trial: Callable[[TrialNoise], None] | None = None,
) -> list[TrialNoise]:
    """Refit the ``count`` best complete trials ``repeats`` times in other layouts and
    ``repeats`` times with fresh replicas; each trial told to ``on_trial`` and the whole
    recorded on the study (:data:`NOISE_ATTR`)."""
    runcard = setup.runcard
    name = setup.study.study_name
    if runcard.scan.objective.multi:
        raise ScanError(
            f"study {name!r} has {len(runcard.scan.objective.names)} objectives: the noise "
            "floor is measured on a single objective's value"
        )
    complete = setup.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    best = ranked(complete, minimizes(setup.study))[:count]
    if not best:
        raise ScanError(f"study {name!r} has no complete trial yet: nothing to refit")
    # Room for the space's widest trials, as a worker's batch has (scan/_worker.py), and more.
    widest = runcard.scan.space.widest(runcard.trial_base)
    wider = [[_widened(wide, extra) for wide in widest] for extra in range(1, repeats)]
    own = Scoring.of(runcard, problem)
    measured = []
    for trial in best:
        card = runcard.trial_runcard(trial.params)
        rounding = [_value(run_fit(card, problem=problem), own)]
        for reserve in wider:
            ((_, result),) = fit_together({0: card}, problem, 2, reserve=reserve)
            rounding.append(_value(result, own))
        draws = dict(fit_together({k: _reseeded(card, k) for k in range(1, repeats + 1)}, problem))
        noise = TrialNoise(
            trial.number,
            trial.value,
            tuple(rounding),
            tuple(_value(draws[k], own) for k in sorted(draws)),
        )
        measured.append(noise)
        if on_trial is not None:
            on_trial(noise)
    _record(setup.study, measured, repeats)
    return measured


def _widened(card: FitRuncard, extra: int) -> FitRuncard:
    """``card`` with ``extra`` more units in each hidden layer: a batch with room for it is
    padded wider than a worker's, which changes only the rounding of the products."""
    nodes = tuple(units + extra for units in card.architecture.nodes)
    return card.model_copy(
        update={"architecture": card.architecture.model_copy(update={"nodes": nodes})}
    )


def _reseeded(card: FitRuncard, draw: int) -> FitRuncard:
    """``card`` with draw ``draw`` of its replicas' pseudodata and starts: its data and network
    seeds moved on (its split kept, which every trial of a batch shares)."""
    seeds = card.seeds.model_copy(
        update={
            "data": (card.seeds.data + _SEED_STEP * draw) % 2**32,
            "network": (card.seeds.network + _SEED_STEP * draw) % 2**32,
        }
    )
    return card.model_copy(update={"seeds": seeds})


def _value(result: Any, scoring: Scoring) -> float:
    scored = score(result, scoring)
    return float("nan") if scored.values is None else scored.values[0]


def _record(study: optuna.Study, measured: list[TrialNoise], repeats: int) -> None:
    # Each trial's refits: the floor is derived from them where it is read (NoiseFloor.stored).
    study.set_user_attr(
        NOISE_ATTR,
        {
            "repeats": repeats,
            "trials": {
                str(n.number): {
                    "value": n.value,
                    "rounding": _finite(n.rounding),
                    "replicas": _finite(n.replicas),
                }
                for n in measured
            },
            "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        },
    )


def _finite(values: tuple[float, ...]) -> list[float | None]:
    return [value if np.isfinite(value) else None for value in values]
