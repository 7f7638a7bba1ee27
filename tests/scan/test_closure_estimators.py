# SPDX-License-Identifier: GPL-3.0-or-later
"""Closure rewards (issue 38, item 4): the closure estimators of ensembles built by hand, where
bias, variance, R_bv and ξ₁σ are known; the closure losses of a whole trial; a real tiny
closure scan; and the refusal of a closure loss without a truth."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import optuna
import pytest
from _in_process import run_in_process
from _service import assert_clean_failure, cli, scan_card, snapshot, write_card
from _stand_in import stand_in_result
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

import hyperscan.scan._scheduler as scheduler_module
from hyperscan.data import closure_problem
from hyperscan.fit import FitResult, member_specs
from hyperscan.runcard import FitRuncard, RuncardError, load_scan_runcard, parse_scan_runcard
from hyperscan.scan import open_storage, trashed
from hyperscan.scan._objective import Objective
from hyperscan.scan._study import create_study
from hyperscan.score import ONE_SIGMA, closure_estimators, objective_label
from hyperscan.score._closure import closure_loss, closure_record

optuna.logging.set_verbosity(optuna.logging.ERROR)

#: Replica offsets in units of the spread: mean 0, mean square 1 (population), so that a
#: spread s gives a variance of exactly s².
SIGNS = np.array([1.0, -1.0, 1.0, -1.0])


def eigen_ensemble(shifts: np.ndarray, spread: float, seed: int = 0):
    """A correlated covariance C = Q diag(λ) Qᵀ and replicas T + Σ_k (b_k + s·c_r)·√λ_k·q_k:
    in C's eigenbasis the mean is b_k standard deviations from the truth and every replica
    s·c_r; bias = mean b_k², variance = s², and the truth is within 1σ where |b_k| < s."""
    n = shifts.size
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    lam = np.linspace(0.5, 3.0, n) ** 2  # distinct: a unique eigenbasis
    covmat = q @ np.diag(lam) @ q.T
    truth = rng.uniform(1.0, 2.0, n)
    whitened = shifts[None, :] + spread * SIGNS[:, None]  # (R, n) in units of √λ_k
    predictions = truth + (whitened * np.sqrt(lam)) @ q.T
    return predictions, truth, covmat


def test_a_shifted_ensemble_has_the_bias_and_variance_it_was_built_with() -> None:
    shifts = np.array([0.1, -0.3, 0.5, 1.5, -2.0, 0.2])
    predictions, truth, covmat = eigen_ensemble(shifts, spread=0.8)
    found = closure_estimators(predictions, truth, covmat)
    assert found.bias == pytest.approx(np.mean(shifts**2), rel=1e-10)
    assert found.variance == pytest.approx(0.8**2, rel=1e-10)
    assert found.rbv == pytest.approx(math.sqrt(np.mean(shifts**2)) / 0.8, rel=1e-10)
    # |b_k| < 0.8 for 0.1, −0.3, 0.5, 0.2: 4 of the 6 eigenvectors
    assert found.xi1sigma == pytest.approx(4 / 6)
    assert found.xi1sigma_expected == pytest.approx(math.erf(1 / (math.sqrt(2) * found.rbv)))


@pytest.mark.parametrize(("spread", "inside"), [(3.0, 1.0), (0.05, 0.0)])
def test_the_truth_inside_or_outside_every_band(spread: float, inside: float) -> None:
    shifts = np.array([0.1, -0.3, 0.5, 1.5, -2.0, 0.2])
    predictions, truth, covmat = eigen_ensemble(shifts, spread, seed=3)
    assert closure_estimators(predictions, truth, covmat).xi1sigma == inside


def test_xi_is_counted_in_the_eigenbasis_not_per_point() -> None:
    """Two points fully shifted along one eigenvector of a strongly correlated covariance:
    per point the truth is outside both bands, in the eigenbasis inside one of two."""
    covmat = np.array([[1.0, 0.99], [0.99, 1.0]])
    # eigenvectors (1, 1)/√2 (λ 1.99) and (1, −1)/√2 (λ 0.01); replicas spread 0.05 along the
    # second, the mean 0.5 off the truth along the first, where the spread is nil.
    along, across = np.array([1.0, 1.0]) / math.sqrt(2), np.array([1.0, -1.0]) / math.sqrt(2)
    truth = np.array([1.0, 1.0])
    predictions = truth + 0.5 * along + 0.05 * SIGNS[:, None] * across
    found = closure_estimators(predictions, truth, covmat)
    assert found.xi1sigma == 0.5  # inside along `across` (no shift), outside along `along`
    assert found.xi1sigma_points == 0.0  # per point: 0.35 off with a spread of 0.035


def test_the_losses_of_a_fold_record() -> None:
    record = {"bias": 0.4, "variance": 0.25, "rbv": 0.5, "xi1sigma": 0.9}
    assert closure_loss("bias", record) == 0.4
    assert closure_loss("variance", record) == 0.25
    assert closure_loss("rbv", record) == pytest.approx(math.log(2.0))
    assert closure_loss("rbv", record | {"rbv": 2.0}) == pytest.approx(math.log(2.0))
    assert closure_loss("xi1sigma", record) == pytest.approx(0.9 - 0.6826894921370859)
    assert pytest.approx(0.6826894921370859, rel=1e-15) == ONE_SIGMA
    assert math.isnan(closure_loss("rbv", record | {"rbv": None}))


def test_a_record_of_fewer_than_two_or_non_finite_replicas_is_null() -> None:
    predictions, truth, covmat = eigen_ensemble(np.array([0.1, 0.2, 0.3]), 1.0)
    one = closure_record(predictions[:1], truth, covmat)
    assert one == {"bias": None, "variance": None, "rbv": None, "xi1sigma": None, "replicas": 1}
    predictions[2, 1] = np.nan
    assert closure_record(predictions, truth, covmat)["rbv"] is None
    record = closure_record(predictions[:2], truth, covmat)
    assert record["replicas"] == 2 and record["variance"] == pytest.approx(1.0, rel=1e-8)


# --------------------------------------------------------------------------------------------
# A whole trial with a stand-in fit on the built-in closure data (level 0: data = truth)

PROBLEM = closure_problem("tiny")
FOLDS = [["TOY_HERA_CC_F2WP"], ["TOY_HERA_NC_F2P", "TOY_NUTEV_XF3WP"]]
SHIFTS = (0.3, 1.5)  # fold k's mean: truth + SHIFTS[k]·σ
SPREAD = 0.6  # and its replicas ± SPREAD·σ about it: R_bv of fold k = SHIFTS[k] / SPREAD
REPLICAS = 5  # the fifth of each fold diverged, far off: the ensemble leaves it out


def fake_fit(card: FitRuncard, *, problem, on_sync=None, **_: object) -> FitResult:
    members = member_specs(card.replica_ids, card.folds)
    sigma = np.sqrt(np.diag(problem.covmat))
    signs = np.append(SIGNS, 40.0)
    offsets = np.array([SHIFTS[s.fold] + SPREAD * signs[s.replica - 1] for s in members])
    m = len(members)
    chi2 = np.linspace(1.0, 2.0, m)
    return stand_in_result(
        members,
        chi2_per_point=dict.fromkeys(("training", "validation", "held_out", "experimental"), chi2),
        predictions=problem.truth + offsets[:, None] * sigma,
        best_epoch=50,
        status=["diverged" if s.replica == REPLICAS else "ok" for s in members],
    )


def card(objective: str, data: str = "{closure: {size: tiny}}") -> str:
    return f"""
data: {data}
epochs: 100
scan:
  replicas: {REPLICAS}
  folds: {FOLDS}
  pruner: {{name: none}}
  divergence: {{max_diverged: 2}}
  objective: {objective}
  space:
    parameters:
      stopping.positivity_threshold: {{low: 0.0, high: 1.0}}
"""


def run_trial(monkeypatch: pytest.MonkeyPatch, objective: str) -> optuna.trial.FrozenTrial:
    monkeypatch.setattr(scheduler_module, "run_fit", fake_fit)
    runcard = parse_scan_runcard(card(objective), "closure.yml")
    study = optuna.create_study()
    run_in_process(study, Objective(runcard, PROBLEM, threading.Event()))
    return study.trials[0]


def bias_by_hand(k: int) -> float:
    """SHIFTS[k]² σᵀC⁻¹σ / N on fold k's points, with the inverse written out."""
    slices = zip(PROBLEM.names, PROBLEM.dataset_slices(), strict=True)
    points = np.concatenate([np.arange(PROBLEM.n_data)[s] for n, s in slices if n in FOLDS[k]])
    covmat = PROBLEM.covmat[np.ix_(points, points)]
    sigma = np.sqrt(np.diag(covmat))
    return float(SHIFTS[k] ** 2 * sigma @ np.linalg.inv(covmat) @ sigma / points.size)


def test_every_trial_with_a_truth_stores_its_folds_estimators(monkeypatch) -> None:
    trial = run_trial(monkeypatch, "{}")  # the χ² statistic: the estimators all the same
    assert trial.state == TrialState.COMPLETE, trashed(trial)
    closure = trial.user_attrs["closure"]
    assert closure["scored"] == "held_out"
    for k in (0, 1):
        fold = closure["folds"][str(k)]
        assert fold["replicas"] == REPLICAS - 1
        assert fold["bias"] == pytest.approx(bias_by_hand(k), rel=1e-7)
        ratio = SHIFTS[k] ** 2 / SPREAD**2
        assert fold["variance"] == pytest.approx(bias_by_hand(k) / ratio, rel=1e-7)
        assert fold["rbv"] == pytest.approx(SHIFTS[k] / SPREAD, rel=1e-7)


@pytest.mark.parametrize(
    ("loss", "expected"),
    [
        ("rbv", np.mean([abs(math.log(s / SPREAD)) for s in SHIFTS])),
        ("bias", np.mean([bias_by_hand(0), bias_by_hand(1)])),
    ],
)
def test_a_closure_loss_is_the_trial_value(monkeypatch, loss: str, expected: float) -> None:
    trial = run_trial(monkeypatch, f"{{loss: {loss}}}")
    assert trial.state == TrialState.COMPLETE, trashed(trial)
    assert trial.value == pytest.approx(expected, rel=1e-7)


def test_the_closure_loss_across_folds_takes_the_fold_statistic(monkeypatch) -> None:
    trial = run_trial(monkeypatch, "{loss: rbv, fold_statistic: max}")
    assert trial.value == pytest.approx(abs(math.log(SHIFTS[1] / SPREAD)), rel=1e-7)


def test_a_real_tiny_closure_trial_is_worth_its_folds_abs_log_rbv() -> None:
    runcard = parse_scan_runcard(
        card("{loss: rbv}", "{closure: {size: tiny, level: 1}}").replace(
            f"replicas: {REPLICAS}", "replicas: 3"
        ),
        "closure.yml",
    )
    problem = closure_problem("tiny", level=1)
    study = optuna.create_study()
    run_in_process(study, Objective(runcard, problem, threading.Event()))
    trial = study.trials[0]
    assert trial.state == TrialState.COMPLETE, trashed(trial)
    folds = trial.user_attrs["closure"]["folds"]
    ratios = [folds[str(k)]["rbv"] for k in (0, 1)]
    assert all(r > 0 for r in ratios)
    assert trial.value == pytest.approx(np.mean([abs(math.log(r)) for r in ratios]), rel=1e-6)
    assert trial.user_attrs["ensemble"]["folds"].keys() == folds.keys()


def test_study_status_names_the_closure_loss() -> None:
    runcard = parse_scan_runcard(card("{loss: xi1sigma, fold_statistic: median}"), "x.yml")
    assert objective_label(runcard.scan.objective, 2) == (
        "|xi_1sigma - 0.6827| (truth within the replicas' 1 sigma) of the replicas but "
        "diverged ones, median over 2 folds"
    )


# --------------------------------------------------------------------------------------------
# Refusals


def test_a_closure_loss_on_real_data_without_a_truth_is_refused(tmp_path) -> None:
    bad = scan_card(
        scan={"objective": {"loss": "rbv"}, "replicas": 2},
        data={"closure": None, "real": {"datasets": [{"dataset": "HERA_CC_318GEV_EP-SIGMARED"}]}},
    )
    runcard = write_card(tmp_path / "bad.yml", bad)
    url = str(tmp_path / "scan.journal")
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "scan.objective.loss: 'rbv' compares the ensemble with the truth of closure data" in (
        message
    )
    assert "data.real.closure" in message
    assert snapshot(url) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yml"]


def test_a_closure_loss_on_real_data_with_a_closure_truth_is_taken() -> None:
    data = "{real: {datasets: [{dataset: HERA_CC_318GEV_EP-SIGMARED}], closure: {level: 1}}}"
    scan = "{replicas: 2, objective: {loss: bias}, space: {activation: [tanh]}}"
    text = f"data: {data}\nscan: {scan}\n"
    assert parse_scan_runcard(text, "real.yml").scan.objective.loss == "bias"


@pytest.mark.parametrize(
    ("objective", "replicas", "match"),
    [
        ("{loss: variance}", 1, r"scan\.objective\.loss: 'variance' is a closure estimator"),
        ("{loss: rbv, statistic: median}", 4, r"scan\.objective\.statistic: is for loss 'stat"),
    ],
)
def test_closure_losses_refuse_one_replica_and_other_losses_keys(objective, replicas, match):
    text = card(objective).replace(f"replicas: {REPLICAS}", f"replicas: {replicas}")
    with pytest.raises(RuncardError, match=match):
        parse_scan_runcard(text, "x.yml")


def test_the_shipped_closure_scan_creates_its_study(tmp_path) -> None:
    """studies/dis-nlo-closure-scan.yml passes the checks of `study create` too (the space
    against the base runcard), not only those of loading: R_bv on the real closure test."""
    study = Path(__file__).resolve().parents[2] / "studies" / "dis-nlo-closure-scan.yml"
    url = str(tmp_path / "scan.journal")
    result = cli("study", "create", study, "--storage", url)
    assert result.exit_code == 0, result.output
    runcard = load_scan_runcard(study)
    assert runcard.scan.objective.loss == "rbv" and runcard.fit.data.real.closure is not None


def test_an_exported_trial_names_its_closure_objective(tmp_path) -> None:
    runcard = parse_scan_runcard(card("{loss: rbv}"), "closure.yml")
    url = str(tmp_path / "scan.journal")
    study, _ = create_study(runcard, open_storage(url, create=True), "rbv")
    study.add_trial(
        optuna.trial.create_trial(
            state=TrialState.COMPLETE,
            value=0.25,
            params={"stopping.positivity_threshold": 0.5},
            distributions={"stopping.positivity_threshold": FloatDistribution(0.0, 1.0)},
        )
    )
    best = tmp_path / "best.yml"
    result = cli("export", "--study", "rbv", "--storage", url, "-o", best)
    assert result.exit_code == 0, result.output
    assert (
        "# objective: |log R_bv|, R_bv = sqrt(bias / variance) of the replicas but diverged "
        "ones, mean over 2 folds\n"
    ) in best.read_text()
