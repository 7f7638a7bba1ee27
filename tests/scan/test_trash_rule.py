# SPDX-License-Identifier: GPL-3.0-or-later
"""DESIGN.md decision 4: a trashed (diverging) trial is PRUNED, so TPE learns to avoid it.

Optuna's TPE ignores FAIL trials: a region where every trial fails stays "unexplored and not
bad" for ever, and TPE keeps proposing it. A PRUNED trial ranks below every complete one, so
the region lands in TPE's "bad" density and is avoided.

The toy study runs hyperscan's own trial code (the worker's loop: suggest, fixed runcard,
statistics, trash rule) with the sampler of ``make_sampler``; only the fit is replaced by a
cheap stand-in: χ² per point = (x - 0.3)² + (y - 0.3)², and for x > 0.6 one replica diverges.
The same study is also run with a trashed trial told FAIL (its row of the endings table
changed), as a naive implementation would.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import optuna
import pytest
from _in_process import run_in_process
from _stand_in import stand_in_result
from optuna.trial import TrialState

import hyperscan.scan._scheduler as scheduler_module
from hyperscan.data import Problem, closure_problem
from hyperscan.fit import FitResult, member_specs
from hyperscan.runcard import FitRuncard, ScanRuncard, parse_scan_runcard
from hyperscan.scan import trashed
from hyperscan.scan._lifecycle import ENDINGS, Ending, Transition
from hyperscan.scan._objective import Objective
from hyperscan.scan._worker import make_pruner, make_sampler
from hyperscan.score._ensemble_metrics import ensemble_metrics

optuna.logging.set_verbosity(optuna.logging.ERROR)

# x and y of the toy are two fit settings of the space, both drawn from about [0, 1].
X = "stopping.positivity_threshold"
Y = "data.training_fraction"
BOUNDARY = 0.6  # x above it diverges
TRIALS = 80
LATER = 30  # trials LATER .. TRIALS-1 are the "later suggestions"
SEEDS = (0, 1, 2, 3)
REPLICAS = 3

CARD = f"""
epochs: 1000
scan:
  trials: {TRIALS}
  replicas: {REPLICAS}
  sampler: {{name: tpe, seed: SEED}}
  pruner: {{name: none}}
  divergence: {{max_diverged: 0}}
  space:
    parameters:
      {X}: {{low: 0.0, high: 1.0}}
      {Y}: {{low: 0.01, high: 1.0}}
"""

REASON = "non-finite loss"
DIVERGED_EPOCH = 17
PROBLEM = closure_problem("tiny")  # the fake fit's predictions are for its points


def toy_value(x: float, y: float) -> float:
    return (x - 0.3) ** 2 + (y - 0.3) ** 2


def fake_fit(
    card: FitRuncard,
    *,
    problem: Problem,
    on_sync: object = None,
    **_: object,
) -> FitResult:
    """The fit of a trial, in microseconds: replica r has χ² = value·(1 + 0.01 (r-1)) and
    predictions central·(1 + 0.01 (r-1)); a diverged one NaN."""
    members = member_specs(card.replica_ids, card.folds)
    x, y = card.stopping.positivity_threshold, card.data.training_fraction
    m = len(members)
    chi2 = toy_value(x, y) * (1.0 + 0.01 * np.arange(m))
    predictions = problem.central * (1.0 + 0.01 * np.arange(m))[:, None]
    status, divergence, stop = ["ok"] * m, [""] * m, np.full(m, -1)
    if x > BOUNDARY:
        status[0], divergence[0], stop[0] = "diverged", REASON, DIVERGED_EPOCH
        chi2[0] = predictions[0] = np.nan
    return stand_in_result(
        members,
        chi2_per_point={
            "training": chi2,
            "validation": chi2,
            "held_out": np.full(m, np.nan),
            "experimental": chi2,
        },
        predictions=predictions,
        best_epoch=10,
        status=status,
        stop_epoch=stop,
        divergence=divergence,
    )


#: What a naive objective does with a diverged trial: it fails it (FAIL), and TPE ignores it.
TRASHED_AS_FAIL = Transition(TrialState.FAIL, requeued=False, recorded=True)


def scan_runcard(seed: int) -> ScanRuncard:
    return parse_scan_runcard(CARD.replace("SEED", str(seed)), "toy-scan.yml")


@dataclass
class Run:
    mode: str
    seed: int
    study: optuna.Study

    @property
    def later(self) -> list[optuna.trial.FrozenTrial]:
        return [t for t in self.study.trials if t.number >= LATER]

    @property
    def later_inside(self) -> int:
        return sum(t.params[X] > BOUNDARY for t in self.later)


def run_study(mode: str, seed: int) -> Run:
    runcard = scan_runcard(seed)
    objective = Objective(runcard, PROBLEM, threading.Event())
    study = optuna.create_study(sampler=make_sampler(runcard, salt=seed))
    with pytest.MonkeyPatch.context() as patch:
        if mode == "fail":  # the same trial code, but a trashed trial ends FAIL
            patch.setitem(ENDINGS, Ending.TRASHED, TRASHED_AS_FAIL)
        run_in_process(study, objective, TRIALS)
    return Run(mode, seed, study)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[tuple[str, int], Run]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduler_module, "run_fit", fake_fit)
        yield {(mode, seed): run_study(mode, seed) for mode in ("fail", "pruned") for seed in SEEDS}


def test_the_toy_runs_hyperscans_sampler() -> None:
    sampler = make_sampler(scan_runcard(0), salt=0)
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert sampler._constant_liar


def test_trashed_trials_are_pruned_with_their_reason(runs: dict[tuple[str, int], Run]) -> None:
    for seed in SEEDS:
        trials = runs["pruned", seed].study.trials
        assert len(trials) == TRIALS
        inside = [t for t in trials if t.params[X] > BOUNDARY]
        outside = [t for t in trials if t.params[X] <= BOUNDARY]
        assert inside and outside
        for trial in inside:
            assert trial.state == TrialState.PRUNED
            assert trashed(trial) == (
                f"1 diverged: replica 1 at epoch {DIVERGED_EPOCH}: {REASON}"
            ), trial.number
            assert trial.value is None
            # recorded before the trash decision, so the dashboard shows what happened
            assert trial.user_attrs["fit"]["diverged"] == 1
            assert trial.user_attrs["replicas"]["validation"] == {"n": REPLICAS, "finite": 2}
            # all 3 replicas are n3fit's best 85%, the diverged one too: no ensemble metric
            (fold,) = trial.user_attrs["ensemble"]["folds"].values()
            assert fold["replicas"] == REPLICAS and fold["phi"] is None and fold["logp"] is None
        for trial in outside:
            assert trial.state == TrialState.COMPLETE
            assert trashed(trial) is None
            expected = toy_value(trial.params[X], trial.params[Y]) * 1.01  # mean of 1, 1.01, 1.02
            assert trial.value == pytest.approx(expected, rel=1e-9, abs=1e-12)
            assert trial.user_attrs["statistics"]["mean"] == pytest.approx(trial.value, abs=1e-6)
            ensemble = trial.user_attrs["ensemble"]
            assert ensemble["scored"] == "all" and ensemble["proportion"] == 0.85
            (fold,) = ensemble["folds"].values()
            assert fold["n_points"] == PROBLEM.n_data and fold["replicas"] == REPLICAS
            # n3fit's chi2 loss: the mean validation χ² of the 3, the best experimental χ² < 2
            assert fold["n3fit_chi2"] == pytest.approx(trial.value, abs=1e-6)
            assert fold["phi"] > 0 and fold["phi2"] == pytest.approx(fold["phi"] ** 2, rel=1e-4)


def test_fail_mode_really_fails(runs: dict[tuple[str, int], Run]) -> None:
    for seed in SEEDS:
        for trial in runs["fail", seed].study.trials:
            expected = TrialState.FAIL if trial.params[X] > BOUNDARY else TrialState.COMPLETE
            assert trial.state == expected, trial.number


def test_tpe_keeps_proposing_a_failing_region(runs: dict[tuple[str, int], Run]) -> None:
    """FAIL is worse than random search: the region is 40% of x, TPE goes there ~all the time.

    Measured (seeds 0-19): 44-50 of the 50 later trials, 981/1000 in all.
    """
    later = TRIALS - LATER
    counts = [runs["fail", seed].later_inside for seed in SEEDS]
    assert all(count >= 0.7 * later for count in counts), counts


def test_tpe_avoids_a_pruned_region(runs: dict[tuple[str, int], Run]) -> None:
    """PRUNED teaches TPE: far fewer later trials in the region than with FAIL, and than random.

    Measured (seeds 0-19): 0-5 of the 50 later trials (36/1000 in all) against 44-50 with FAIL.
    """
    later = TRIALS - LATER
    fail = [runs["fail", seed].later_inside for seed in SEEDS]
    pruned = [runs["pruned", seed].later_inside for seed in SEEDS]
    assert all(p < f for p, f in zip(pruned, fail, strict=True)), (pruned, fail)
    assert all(count <= 0.3 * later for count in pruned), pruned  # random: 0.4
    assert 2 * sum(pruned) < sum(fail), (pruned, fail)
    assert 4 * sum(pruned) < sum(fail), (pruned, fail)


@pytest.mark.parametrize("mode", ["pruned", "fail"])
def test_best_trial_is_never_trashed(runs: dict[tuple[str, int], Run], mode: str) -> None:
    for seed in SEEDS:
        study = runs[mode, seed].study
        best = study.best_trial
        assert best.state == TrialState.COMPLETE
        assert trashed(best) is None
        assert best.params[X] <= BOUNDARY
        assert best.value == min(t.value for t in study.trials if t.state == TrialState.COMPLETE)


def test_pruned_mode_finds_the_optimum(runs: dict[tuple[str, int], Run]) -> None:
    """Learning to avoid the region leaves the trials for the optimum at (0.3, 0.3)."""
    for seed in SEEDS:
        best = runs["pruned", seed].study.best_trial
        assert best.value < 0.01, (seed, best.params)


def test_a_tolerated_divergence_with_non_finite_chi2_does_not_end_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """max_diverged: 1 tolerates one diverged replica; its χ² is NaN (non-finite loss).

    The trial's value must not become NaN: Optuna turns a NaN value into FAIL, which TPE
    ignores (the very problem of decision 4). The statistic keeps the NaN, so the trial is
    trashed (PRUNED, with its reason, as the README's trash rule says); it is never the best.
    """
    monkeypatch.setattr(scheduler_module, "run_fit", fake_fit)
    runcard = parse_scan_runcard(
        CARD.replace("SEED", "0").replace("max_diverged: 0", "max_diverged: 1"), "toy-scan.yml"
    )
    objective = Objective(runcard, PROBLEM, threading.Event())
    study = optuna.create_study(sampler=make_sampler(runcard, salt=0))
    study.enqueue_trial({X: 0.9, Y: 0.3})  # one replica diverges, χ² NaN
    study.enqueue_trial({X: 0.5, Y: 0.3})  # fine: 0.04 · 1.01
    run_in_process(study, objective, 2)
    diverging, fine = study.trials
    assert fine.state == TrialState.COMPLETE
    assert fine.value == pytest.approx(0.0404)
    assert diverging.state == TrialState.PRUNED, "a NaN trial value makes Optuna fail the trial"
    assert trashed(diverging).startswith("non-finite trial value (nan)")
    assert study.best_trial.number == fine.number


@pytest.mark.parametrize("max_pos_veto", [None, 0, 1])
def test_pos_veto_replicas_trash_a_trial_only_past_max_pos_veto(
    monkeypatch: pytest.MonkeyPatch, max_pos_veto: int | None
) -> None:
    """By default a pos-veto replica's χ² is scored, as n3fit's hyperopt scores it; with
    `max_pos_veto: n` a trial with more such replicas is trashed, naming them."""

    def one_vetoed(card: FitRuncard, **kwargs: object) -> FitResult:
        result = fake_fit(card, **kwargs)
        result.status[1] = "pos-veto"
        result.best_epoch[1] = -1
        return result

    monkeypatch.setattr(scheduler_module, "run_fit", one_vetoed)
    limit = "" if max_pos_veto is None else f", max_pos_veto: {max_pos_veto}"
    card = CARD.replace("SEED", "0").replace("max_diverged: 0", "max_diverged: 0" + limit)
    runcard = parse_scan_runcard(card, "toy-scan.yml")
    study = optuna.create_study()
    study.enqueue_trial({X: 0.5, Y: 0.3})
    run_in_process(study, Objective(runcard, PROBLEM, threading.Event()))
    (trial,) = study.trials
    assert trial.user_attrs["fit"]["pos_veto"] == 1
    if max_pos_veto == 0:
        assert trial.state == TrialState.PRUNED
        assert trashed(trial) == (
            "1 pos-veto (no step passed positivity and the χ² threshold, more than "
            "scan.divergence.max_pos_veto = 0): replica 2"
        )
    else:
        assert trial.state == TrialState.COMPLETE and trashed(trial) is None
        assert trial.value == pytest.approx(0.04 * 1.01)  # the vetoed replica's χ² counts


def test_interrupted_members_are_not_pos_veto(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fit cut short (by the pruner, say) leaves its members without a best step yet
    `interrupted`: cut short, not vetoed, so even `max_pos_veto: 0` does not trash the trial
    for them, and the trial's `fit` attribute counts no pos-veto member."""

    def cut_short(card: FitRuncard, **kwargs: object) -> FitResult:
        result = fake_fit(card, **kwargs)
        result.status[1] = "interrupted"
        result.best_epoch[1] = -1
        result.interrupted = True
        return result

    monkeypatch.setattr(scheduler_module, "run_fit", cut_short)
    card = CARD.replace("SEED", "0").replace("max_diverged: 0", "max_diverged: 0, max_pos_veto: 0")
    study = optuna.create_study()
    study.enqueue_trial({X: 0.5, Y: 0.3})
    run_in_process(
        study, Objective(parse_scan_runcard(card, "toy-scan.yml"), PROBLEM, threading.Event())
    )
    (trial,) = study.trials
    assert trial.user_attrs["fit"]["pos_veto"] == 0
    assert trial.state == TrialState.COMPLETE and trashed(trial) is None


def test_drawn_values_that_break_the_runcard_together_trash_the_trial() -> None:
    """Each end of each range passes alone, so the study is created; a trial whose values
    break a rule together is trashed with the rule, and the worker goes on."""
    runcard = parse_scan_runcard(
        """
scan:
  trials: 4
  pruner: {name: none}
  space:
    parameters:
      positivity.initial: {low: 500, high: 1.0e5, log: true}
      positivity.max: {low: 1000, high: 1.0e6, log: true}
""",
        "combo.yml",
    )
    objective = Objective(runcard, PROBLEM, threading.Event())
    study = optuna.create_study()
    study.enqueue_trial({"positivity.initial": 5.0e4, "positivity.max": 2000.0})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduler_module, "run_fit", fake_fit)
        run_in_process(study, objective)
    (trial,) = study.trials
    assert trial.state == TrialState.PRUNED
    assert trashed(trial).startswith("the drawn values make no valid fit runcard: ")
    assert "positivity.max: must be >= initial (50000), got 2000" in trashed(trial)


@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_the_median_pruner_spares_the_warmup_reports(warmup: int) -> None:
    """`warmup_reports: w`: a trial makes w reports before it may be pruned, at report w + 1."""
    runcard = parse_scan_runcard(
        "training: {steps_per_call: 10}\n"
        f"scan: {{pruner: {{name: median, report_every: 2, warmup_reports: {warmup}}}, "
        "space: {activation: [tanh]}}\n",
        "pruned.yml",
    )
    study = optuna.create_study(pruner=make_pruner(runcard))
    step = 10 * 2  # a report every 2 device calls of 10 steps
    for _ in range(6):  # past the pruner's 5 start-up trials
        trial = study.ask()
        for report in range(1, 7):
            trial.report(1.0, report * step)
        study.tell(trial, 1.0)
    bad = study.ask()
    for report in range(1, 7):
        bad.report(100.0, report * step)
        if bad.should_prune():
            break
    assert report == warmup + 1


def test_each_fold_stores_n3fit_s_ensemble_metrics_on_its_held_out_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With k-fold, a fold's ensemble metrics are its own members' on its held-out datasets,
    with their covariance block (TOY_HERA_CC_F2WP lies between the two datasets of fold 1)."""
    monkeypatch.setattr(scheduler_module, "run_fit", fake_fit)
    folds = [["TOY_HERA_CC_F2WP"], ["TOY_HERA_NC_F2P", "TOY_NUTEV_XF3WP"]]
    card = CARD.replace("SEED", "0") + f"  folds: {folds}\n  objective: {{chi2: validation}}\n"
    study = optuna.create_study()
    study.enqueue_trial({X: 0.5, Y: 0.3})
    run_in_process(
        study, Objective(parse_scan_runcard(card, "toy-scan.yml"), PROBLEM, threading.Event())
    )
    (trial,) = study.trials
    ensemble = trial.user_attrs["ensemble"]
    assert ensemble["scored"] == "held_out" and list(ensemble["folds"]) == ["0", "1"]
    slices = dict(zip(PROBLEM.names, PROBLEM.dataset_slices(), strict=True))
    for k, fold in enumerate(folds):
        points = np.concatenate([np.arange(slices[n].start, slices[n].stop) for n in fold])
        # fold k's members are replicas 1..3, the fake's members 3k..3k+2
        predictions = PROBLEM.central[points] * (1.0 + 0.01 * np.arange(3 * k, 3 * k + 3))[:, None]
        expected = ensemble_metrics(
            predictions, PROBLEM.central[points], PROBLEM.covmat[np.ix_(points, points)]
        )
        stored = ensemble["folds"][str(k)]
        assert stored["n_points"] == points.size == expected.n_points
        assert stored["phi"] == pytest.approx(expected.phi, abs=1e-6)
        assert stored["chi2p"] == pytest.approx(expected.chi2p, abs=1e-6)
        assert stored["logp"] == pytest.approx(expected.logp, abs=1e-6)
        assert stored["n3fit_chi2"] is None  # the fake's held-out χ² is NaN
