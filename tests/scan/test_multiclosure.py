"""Closure rewards over several level-1 fits in one trial (closure ``fits``): each fit's
estimators stored, and the trial's aggregated as validphys' multiclosure aggregates them
(bias and variance averaged over the fits, R_bv = √(mean bias / mean variance), ξ₁σ averaged)."""

from __future__ import annotations

import math
import threading

import numpy as np
import optuna
import pytest
from _in_process import run_in_process
from _stand_in import stand_in_result
from optuna.trial import TrialState

import hyperscan.scan._scheduler as scheduler_module
from hyperscan.cli._render import plan_line
from hyperscan.data import closure_problem
from hyperscan.fit import FitResult, member_specs
from hyperscan.runcard import FitRuncard, parse_scan_runcard
from hyperscan.scan import trashed
from hyperscan.scan._api import ScanPlan
from hyperscan.scan._objective import Objective
from hyperscan.scan._study import Creation
from hyperscan.score._closure import multiclosure_record

optuna.logging.set_verbosity(optuna.logging.ERROR)

PROBLEM = closure_problem("tiny", level=1)
SIGNS = np.array([1.0, -1.0, 1.0, -1.0])  # mean 0, mean square 1: spread s, variance s²
SHIFTS = (0.3, 1.2, 0.9)  # fit j's replicas' mean: truth + SHIFTS[j]·σ
SPREADS = (0.5, 0.8, 0.6)  # and their offsets ± SPREADS[j]·σ about it


def test_the_aggregate_of_records_is_validphys_multiclosure() -> None:
    records = [
        {"bias": 0.5, "variance": 2.0, "rbv": 0.5, "xi1sigma": 0.9, "replicas": 4},
        {"bias": 4.0, "variance": 1.0, "rbv": 2.0, "xi1sigma": 0.3, "replicas": 3},
    ]
    found = multiclosure_record(records)
    # mean bias 2.25, mean variance 1.5: R_bv = √1.5, not the mean ratio 1.25
    assert found == pytest.approx(
        {"bias": 2.25, "variance": 1.5, "rbv": math.sqrt(1.5), "xi1sigma": 0.6, "replicas": 7}
    )
    assert multiclosure_record(records[:1]) == records[0]
    nulled = [records[0], records[1] | {"variance": None, "rbv": None}]
    assert multiclosure_record(nulled) | {"replicas": 0} == {
        "bias": 2.25,
        "variance": None,
        "rbv": None,
        "xi1sigma": 0.6,
        "replicas": 0,
    }


def fake_fit(card: FitRuncard, *, problem, on_sync=None, **_: object) -> FitResult:
    members = member_specs(card.replica_ids, card.folds, card.data.level1_fits)
    sigma = np.sqrt(np.diag(problem.covmat))
    offsets = np.array(
        [SHIFTS[s.level1] + SPREADS[s.level1] * SIGNS[s.replica - 1] for s in members]
    )
    chi2 = np.linspace(1.0, 2.0, len(members))
    return stand_in_result(
        members,
        chi2_per_point=dict.fromkeys(("training", "validation", "held_out", "experimental"), chi2),
        predictions=problem.truth + offsets[:, None] * sigma,
        best_epoch=50,
    )


def card(fits: int, replicas: int = 4, epochs: int = 100) -> str:
    return f"""
data: {{closure: {{size: tiny, level: 1, fits: {fits}}}}}
epochs: {epochs}
training: {{steps_per_call: 50}}
scan:
  replicas: {replicas}
  pruner: {{name: none}}
  objective: {{loss: rbv}}
  space:
    parameters:
      stopping.positivity_threshold: {{low: 0.0, high: 1.0}}
"""


def test_a_trial_over_three_fits_stores_each_and_is_worth_the_aggregate(monkeypatch) -> None:
    monkeypatch.setattr(scheduler_module, "run_fit", fake_fit)
    runcard = parse_scan_runcard(card(fits=3), "multi.yml")
    study = optuna.create_study()
    run_in_process(study, Objective(runcard, PROBLEM, threading.Event()))
    trial = study.trials[0]
    assert trial.state == TrialState.COMPLETE, trashed(trial)
    sigma = np.sqrt(np.diag(PROBLEM.covmat))
    unit = float(sigma @ np.linalg.inv(PROBLEM.covmat) @ sigma / PROBLEM.n_data)
    closure = trial.user_attrs["closure"]
    fits = closure["fits"]["0"]
    assert len(fits) == 3
    for j, record in enumerate(fits):
        assert record["bias"] == pytest.approx(SHIFTS[j] ** 2 * unit, rel=1e-7)
        assert record["variance"] == pytest.approx(SPREADS[j] ** 2 * unit, rel=1e-7)
        assert record["rbv"] == pytest.approx(SHIFTS[j] / SPREADS[j], rel=1e-7)
        assert record["replicas"] == 4
    rbv = math.sqrt(np.mean(np.square(SHIFTS)) / np.mean(np.square(SPREADS)))
    aggregate = closure["folds"]["0"]
    assert aggregate["rbv"] == pytest.approx(rbv, rel=1e-7)
    assert aggregate["xi1sigma"] == pytest.approx(np.mean([r["xi1sigma"] for r in fits]))
    assert aggregate["replicas"] == 12
    assert trial.value == pytest.approx(abs(math.log(rbv)), rel=1e-7)
    assert trial.user_attrs["fit"]["members"] == 12
    assert trial.user_attrs["ensemble"]["folds"]["0"]["replicas"] == 4  # fit 0's ensemble


def test_a_real_tiny_trial_over_two_fits_gives_a_value() -> None:
    runcard = parse_scan_runcard(card(fits=2, replicas=3, epochs=200), "multi.yml")
    study = optuna.create_study()
    run_in_process(study, Objective(runcard, PROBLEM, threading.Event()))
    trial = study.trials[0]
    assert trial.state == TrialState.COMPLETE, trashed(trial)
    closure = trial.user_attrs["closure"]
    fits = closure["fits"]["0"]
    assert [r["replicas"] for r in fits] == [3, 3]
    assert fits[0] != fits[1]  # two level-1 fits, two different ensembles
    rbv = math.sqrt(np.mean([r["bias"] for r in fits]) / np.mean([r["variance"] for r in fits]))
    assert closure["folds"]["0"]["rbv"] == pytest.approx(rbv, rel=1e-6)
    assert trial.value == pytest.approx(abs(math.log(rbv)), rel=1e-6)


def test_the_scan_plan_counts_the_level1_fits() -> None:
    plan = ScanPlan("multi", "x.journal", Creation(created=True), 20, 1, 15, 1, 2, 1, 20, 5)
    assert "budget 20 trials of 5 level-1 fits × 1×15 members, 1 worker" in plan_line(plan)
