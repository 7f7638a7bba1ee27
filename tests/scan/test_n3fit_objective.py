# SPDX-License-Identifier: GPL-3.0-or-later
"""n3fit's objective options (issue 38, item 2): its penalties against hand computations, its
losses and fold statistics, the `loss: phi2` trial value of a whole trial, the fold threshold,
and the runcard's refusals (an unknown loss, phi2 with one replica)."""

from __future__ import annotations

import math
import threading

import numpy as np
import optuna
import pytest
from _in_process import run_in_process
from _service import assert_clean_failure, cli, scan_card, snapshot, write_card
from _stand_in import stand_in_result
from optuna.trial import TrialState

import hyperscan.scan._scheduler as scheduler_module
from hyperscan.cli._render import status_text
from hyperscan.data import FIT_BASIS, closure_problem, real_problem
from hyperscan.fit import SMALL_X, FitResult, member_specs
from hyperscan.runcard import (
    FitRuncard,
    ObjectiveSection,
    RuncardError,
    dump_runcard,
    parse_scan_runcard,
)
from hyperscan.scan import trashed
from hyperscan.scan._objective import Objective
from hyperscan.scan._status import BestTrial, StudyStatus
from hyperscan.score import Scoring, objective_label
from hyperscan.score._n3fit_loss import fit_quality_term, fold_loss, n3fit_value
from hyperscan.score._penalties import (
    INTEGRABILITY_X,
    SATURATION_X,
    all_penalties,
    integrability,
    patience,
    saturation,
)

optuna.logging.set_verbosity(optuna.logging.ERROR)


def column(name: str) -> int:
    return FIT_BASIS.index(name)


# --------------------------------------------------------------------------------------------
# Penalties, by hand


def test_saturation_of_straight_and_curved_small_x_pdfs() -> None:
    t = np.log10(SATURATION_X)  # 100 equal steps h from -6 to -4
    xf = np.zeros((2, t.size, 8))
    # member 0: straight lines in log10 x, slope 2 (Σ) and -0.5 (g): no spread
    xf[0, :, column("Sigma")] = 1.0 + 2.0 * t
    xf[0, :, column("g")] = 3.0 - 0.5 * t
    # member 1: Σ = t², whose slopes t_i + t_{i+1} step by 2h from -12 + h: mean -10 and the
    # spread of 99 equally spaced values; g flat, so 1 / 1e-7 dominates
    xf[1, :, column("Sigma")] = t**2
    xf[1, :, column("g")] = 0.7
    h = 2.0 / 99
    spread = 2 * h * math.sqrt((99**2 - 1) / 12)
    expected = [1 / (1e-7 + 2) + 1 / (1e-7 + 0.5), 1 / (1e-7 + 10 + spread) + 1 / 1e-7]
    np.testing.assert_allclose(saturation(xf), expected, rtol=1e-9)
    assert SATURATION_X[0] == pytest.approx(1e-6) and SATURATION_X[-1] == pytest.approx(1e-4)


def test_patience_matches_n3fit_s_documented_example() -> None:
    # n3fit's docstring: best epoch 1000, patience 500, 5000 epochs, vl 2.42 → 3.434143467595683
    values = patience(np.array([1000, 4500]), 5000, 500, np.array([2.42, 1.5]))
    assert values[0] == pytest.approx(3.434143467595683, rel=1e-12)
    assert values[1] == pytest.approx(1.5)  # best epoch exactly at epochs − patience


def test_integrability_counts_flavours_above_the_threshold_and_caps_at_50() -> None:
    xf = np.zeros((3, 3, 8))
    xf[0, :, column("V")] = [0.1, -0.2, 0.3]  # Σ|xf| = 0.6 > 0.5: counts
    xf[0, :, column("T3")] = [0.1, 0.1, 0.1]  # 0.3 ≤ 0.5: counts 0
    xf[0, :, column("g")] = [9.0, 9.0, 9.0]  # not one of V, T3, V3, T8, V8
    xf[1, :, column("V8")] = [0.5, 0.0, 0.0]  # exactly the threshold: 0
    xf[2, :, column("T8")] = [30.0, 30.0, 30.0]  # 90, capped at 50
    np.testing.assert_allclose(
        integrability(xf), [math.expm1(0.6), 0.0, math.expm1(50.0)], rtol=1e-12
    )
    np.testing.assert_allclose(INTEGRABILITY_X, [1e-9, 1e-8, 1e-7], rtol=1e-12)


def test_a_fit_evaluates_its_pdfs_where_the_penalties_look() -> None:
    np.testing.assert_array_equal(SMALL_X, np.concatenate([INTEGRABILITY_X, SATURATION_X]))


# --------------------------------------------------------------------------------------------
# Losses


def test_fold_losses_add_penalties_as_n3fit_does() -> None:
    record = {"phi": 0.3, "logp": 1.7, "chi2p": 1.2}
    validation = np.array([1.0, 3.0, 2.0, 5.0])
    experimental = np.array([2.5, 1.5, 4.0, 3.0])
    penalties = {"patience": np.array([0.1, 0.2, 0.3, 0.4]), "saturation": np.full(4, 7.0)}

    def loss(**settings: object) -> float:
        objective = ObjectiveSection(**settings)
        return fold_loss(objective, record, validation, experimental, penalties)

    assert loss(loss="phi2") == 0.3 and loss(loss="logp") == 1.7 and loss(loss="chi2p") == 1.2
    record["phi2"] = 0.09
    assert loss(loss="phi2", phi_squared=True) == 0.09
    with_patience = {"penalties": ["patience"], "penalties_in_loss": True}
    assert loss(loss="phi2", **with_patience) == pytest.approx(0.3 + 0.25)
    # chi2: best ⌈0.75·4⌉ = 3 by validation (1, 2, 3) → 2; best ⌈0.25·4⌉ = 1 experimental 1.5
    assert loss(loss="chi2", best_fraction=0.75) == pytest.approx(2.0 + 0.0)
    # penalties per replica on the experimental χ²: 2.7, 1.7, 4.3, 3.4 → best 1.7 < 2
    assert loss(loss="chi2", best_fraction=0.75, **with_patience) == pytest.approx(2.0)
    # best_worst over replicas: the worst of the best 3 validation χ² (3), then max(1.5, 2) − 2
    assert loss(loss="chi2", best_fraction=0.75, replica_statistic="best_worst") == 3.0
    # both penalties: 9.7, 8.7, 11.3, 10.4 → the best one 8.7, so + 6.7
    both = {"penalties": ["patience", "saturation"], "penalties_in_loss": True}
    assert loss(loss="chi2", best_fraction=0.75, **both) == pytest.approx(2.0 + 6.7)


def test_phi2_is_maximised_through_the_reciprocal_fold_statistic() -> None:
    phi2 = ObjectiveSection(loss="phi2", fold_statistic="average")
    quality = fit_quality_term([1.0, 1.4])  # mean 1.2: elu(0) = 0
    assert quality == 0.0
    assert n3fit_value([0.2, 0.3], [1.0, 1.4], phi2) == pytest.approx(1 / 0.25)
    worst = phi2.model_copy(update={"fold_statistic": "best_worst"})
    assert n3fit_value([0.2, 0.3], [1.0, 1.4], worst) == pytest.approx(1 / 0.3)
    logp = ObjectiveSection(loss="logp", fold_statistic="std")
    assert n3fit_value([1.0, 3.0], [1.2, 1.2], logp) == pytest.approx(1.0)
    # n3fit's LossHyperopt: 100·(χ² − 1.2) above 1.2, 100·1e-10·(e^(χ²−1.2) − 1) below
    assert fit_quality_term([1.5]) == pytest.approx(30.0)
    assert fit_quality_term([0.2]) == pytest.approx(100 * 1e-10 * math.expm1(-1.0))


# --------------------------------------------------------------------------------------------
# A whole trial, with a stand-in fit whose predictions are known

PROBLEM = closure_problem("tiny")
FOLDS = [["TOY_HERA_CC_F2WP"], ["TOY_HERA_NC_F2P", "TOY_NUTEV_XF3WP"]]
REPLICAS = 4
SPREADS = (0.5, 2.0)  # fold k's replicas: central ± SPREADS[k]·σ, as (+, −, +, −)·(1, 1, 2, 2)


def fake_fit(card: FitRuncard, *, problem, on_sync=None, **_: object) -> FitResult:
    """Replica r of fold k predicts D + s_k·c_r·σ, c = (1, −1, 2, −2): the mean prediction is
    the data; every χ² per point is given by hand."""
    members = member_specs(card.replica_ids, card.folds)
    m = len(members)
    sigma = np.sqrt(np.diag(problem.covmat))
    signs = np.array([1.0, -1.0, 2.0, -2.0])
    offsets = np.array([SPREADS[s.fold] * signs[s.replica - 1] for s in members])
    validation = np.array([1.0, 1.1, 1.2, 1.3] * len(FOLDS))
    small_x = np.zeros((m, SMALL_X.size, 8))
    small_x[:, 3:, column("Sigma")] = np.log10(SMALL_X[3:])  # slope 1, g flat
    return stand_in_result(
        members,
        chi2_per_point={
            "training": validation,
            "validation": validation,
            "held_out": np.full(m, 3.0),
            "experimental": np.full(m, 3.0),
        },
        predictions=problem.central + offsets[:, None] * sigma,
        best_epoch=400,
        small_x_pdf=small_x,
    )


def card(objective: str) -> str:
    return f"""
epochs: 1000
stopping: {{patience: 0.5}}
scan:
  replicas: {REPLICAS}
  folds: {FOLDS}
  pruner: {{name: none}}
  objective: {objective}
  space:
    parameters:
      stopping.positivity_threshold: {{low: 0.0, high: 1.0}}
"""


def run_trial(monkeypatch: pytest.MonkeyPatch, objective: str) -> optuna.trial.FrozenTrial:
    monkeypatch.setattr(scheduler_module, "run_fit", fake_fit)
    runcard = parse_scan_runcard(card(objective), "n3fit-objective.yml")
    study = optuna.create_study()
    run_in_process(study, Objective(runcard, PROBLEM, threading.Event()))
    return study.trials[0]


def phi_by_hand(k: int) -> float:
    """φ of fold k's best ⌈0.75·4⌉ = 3 replicas (validation 1.0, 1.1, 1.2: c = 1, −1, 2) on
    its points: the residuals are s·c·σ, the mean residual s·(2/3)·σ."""
    slices = zip(PROBLEM.names, PROBLEM.dataset_slices(), strict=True)
    points = np.concatenate([np.arange(PROBLEM.n_data)[s] for n, s in slices if n in FOLDS[k]])
    covmat = PROBLEM.covmat[np.ix_(points, points)]
    sigma = np.sqrt(np.diag(covmat))
    inverse = np.linalg.inv(covmat)

    def chi2(v: np.ndarray) -> float:
        return float(v @ inverse @ v)

    s = SPREADS[k]
    replicas = [chi2(s * c * sigma) for c in (1.0, -1.0, 2.0)]
    central = chi2(s * (2 / 3) * sigma)
    return math.sqrt((np.mean(replicas) - central) / points.size)


def test_a_phi2_trial_is_worth_the_reciprocal_of_its_folds_mean_phi(monkeypatch) -> None:
    trial = run_trial(monkeypatch, "{loss: phi2, best_fraction: 0.75}")
    assert trial.state == TrialState.COMPLETE, trashed(trial)
    phis = [phi_by_hand(0), phi_by_hand(1)]
    folds = trial.user_attrs["ensemble"]["folds"]
    for k, phi in enumerate(phis):
        assert folds[str(k)]["phi"] == pytest.approx(phi, rel=1e-8)
    # The mean prediction of all 4 replicas is the data: a χ² of 0 on the fitted data, so
    # n3fit's fit-quality term is 100·1e-10·(e^(−1.2) − 1).
    assert folds["0"]["fitted_chi2"] == pytest.approx(0.0, abs=1e-12)
    expected = 1 / np.mean(phis) + 100 * 1e-10 * math.expm1(-1.2)
    assert trial.value == pytest.approx(expected, rel=1e-8)
    # the penalties of every replica are stored, per fold, whatever the objective
    penalties = trial.user_attrs["penalties"]
    assert set(penalties) == {"saturation", "patience", "integrability"}
    assert penalties["saturation"]["0"] == [pytest.approx(1 / (1 + 1e-7) + 1e7)] * REPLICAS
    # patience: validation χ² · e^(1e-4·|1000 − 500 − 400|)
    assert penalties["patience"]["1"] == pytest.approx(
        [v * math.exp(1e-2) for v in (1.0, 1.1, 1.2, 1.3)], rel=1e-3
    )
    assert penalties["integrability"]["1"] == [0.0] * REPLICAS


def test_phi_squared_takes_the_loss_as_nnpdf_s_documentation_writes_it(monkeypatch) -> None:
    trial = run_trial(monkeypatch, "{loss: phi2, phi_squared: true, best_fraction: 0.75}")
    phi2 = [phi_by_hand(0) ** 2, phi_by_hand(1) ** 2]
    assert trial.value == pytest.approx(1 / np.mean(phi2) + 100 * 1e-10 * math.expm1(-1.2))


def test_penalties_in_the_loss_and_the_threshold_trash(monkeypatch) -> None:
    objective = "{loss: phi2, penalties: [patience], penalties_in_loss: true, best_fraction: 0.75}"
    trial = run_trial(monkeypatch, objective)
    mean_patience = np.mean([1.0, 1.1, 1.2, 1.3]) * math.exp(1e-2)
    phis = [phi_by_hand(0) + mean_patience, phi_by_hand(1) + mean_patience]
    assert trial.value == pytest.approx(1 / np.mean(phis) + 100 * 1e-10 * math.expm1(-1.2))

    # fold 1's φ (spread 2σ) is above 1 and fold 0's (0.5σ) below
    assert phi_by_hand(0) < 1.0 < phi_by_hand(1)
    trial = run_trial(monkeypatch, "{loss: phi2, threshold: 1.0, best_fraction: 0.75}")
    assert trial.state == TrialState.PRUNED
    assert trashed(trial) == (
        f"loss above scan.objective.threshold = 1 (fold 1: {phi_by_hand(1):.6g})"
    )


def test_a_chi2_loss_trial_uses_n3fit_s_chi2_per_fold(monkeypatch) -> None:
    trial = run_trial(
        monkeypatch, "{loss: chi2, replica_statistic: best_worst, best_fraction: 0.75}"
    )
    # per fold: the worst of the best 3 validation χ² (1.2), plus max(3, 2) − 2 = 1
    assert trial.value == pytest.approx(2.2 + 100 * 1e-10 * math.expm1(-1.2))


# --------------------------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize(
    ("objective", "message"),
    [
        ({"loss": "phi"}, "scan.objective.loss: expected one of 'statistic', 'chi2', 'phi2'"),
        (
            {"loss": "phi2"},
            "scan.objective.loss: 'phi2' is the spread of a fold's replicas, so it needs at "
            "least 2 of them: scan.replicas 1 x best_fraction 0.85 keeps 1",
        ),
    ],
)
def test_a_bad_objective_is_refused_and_nothing_written(tmp_path, objective, message) -> None:
    bad = scan_card(scan={"objective": objective, "replicas": 1})
    runcard = write_card(tmp_path / "bad.yml", bad)
    url = str(tmp_path / "scan.journal")
    assert message in assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert snapshot(url) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yml"]


def test_keys_of_another_loss_are_refused() -> None:
    with pytest.raises(RuncardError, match=r"scan\.objective\.replica_statistic: is for loss"):
        parse_scan_runcard(card("{loss: phi2, replica_statistic: std}"), "x.yml")
    with pytest.raises(RuncardError, match=r"scan\.objective\.phi_squared: is for loss 'phi2'"):
        parse_scan_runcard(card("{loss: logp, phi_squared: true}"), "x.yml")
    with pytest.raises(RuncardError, match=r"scan\.objective\.penalties: penalties enter"):
        parse_scan_runcard(card("{penalties: [patience]}"), "x.yml")
    with pytest.raises(RuncardError, match=r"scan\.objective\.penalties_in_loss: adds the"):
        parse_scan_runcard(card("{loss: logp, penalties_in_loss: true}"), "x.yml")
    with pytest.raises(RuncardError, match=r"n3fit 4\.1\.5 adds no penalty to 'chi2p'"):
        parse_scan_runcard(
            card("{loss: chi2p, penalties: [patience], penalties_in_loss: true}"), "x.yml"
        )


@pytest.mark.parametrize(
    "objective",
    [
        "{statistic: median}",
        "{loss: chi2, replica_statistic: std, penalties: [saturation], penalties_in_loss: true}",
        "{loss: phi2, fold_statistic: best_worst, threshold: 3.5}",
    ],
)
def test_a_dumped_objective_loads_back_as_a_study_s_stored_runcard_does(objective: str) -> None:
    runcard = parse_scan_runcard(card(objective), "x.yml")
    assert parse_scan_runcard(dump_runcard(runcard), "stored") == runcard


def test_all_penalties_splits_the_small_x_grid() -> None:
    xf = np.zeros((1, SMALL_X.size, 8))
    xf[0, :3, column("V")] = 1.0
    values = all_penalties(xf, np.array([0]), 10, 5, np.array([2.0]))
    assert values["integrability"][0] == pytest.approx(math.expm1(3.0))
    assert values["saturation"][0] == pytest.approx(2e7)
    assert values["patience"][0] == pytest.approx(2.0 * math.exp(5e-4))


def test_the_ensemble_metrics_of_a_t0_fit_use_the_experimental_covariance() -> None:
    """n3fit's compute_hyperopt_metrics never uses t0: neither do hyperscan's (the cross-check
    against n3fit, test_hyperloss_vs_n3fit.py, is on the experimental covariance)."""
    names = ["HERA_CC_318GEV_EP-SIGMARED", "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA"]
    real = "{datasets: [" + ", ".join(f"{{dataset: {n}}}" for n in names) + "]}"
    runcard = parse_scan_runcard(
        f"data: {{real: {real}}}\nscan: {{space: {{activation: [tanh]}}}}\n", "t0.yml"
    )
    t0 = real_problem(names)
    scoring = Scoring.of(runcard, t0)
    experimental = real_problem(names, t0=False).covmat
    np.testing.assert_array_equal(scoring.metrics_covmat, experimental)
    assert not np.allclose(t0.covmat, experimental, rtol=1e-3)


@pytest.mark.parametrize("loss", ["statistic", "phi2"])
def test_study_status_says_what_the_value_of_each_loss_is(loss: str) -> None:
    objective = ObjectiveSection(loss=loss, chi2="held_out")
    best = BestTrial(
        number=3,
        value=2.5,
        params={},
        statistics={"mean": 1.3, "median": 1.2},
        folds={"0": {"mean": 1.3, "n": 4}, "1": {"mean": 1.4, "n": 4}},
        objective=objective_label(objective, 2),
        value_is_statistic=loss == "statistic",
        chi2="held_out",
    )
    status = StudyStatus("s", "x.journal", 5, {"complete": 1}, 1, best, [], [], 0, [], 0)
    lines = status_text(status).splitlines()
    if loss == "statistic":
        assert (
            "  objective: mean of the replicas' held-out chi2 per point, mean over 2 folds" in lines
        )
        assert "  value under each replica statistic:" in lines
        assert "  objective chi2 per point of each fold's replicas:" in lines
    else:
        assert lines[lines.index("best: trial 3, value 2.5") + 1 :][:2] == [
            "  objective: 1 / (n3fit's phi2 (phi of the best 85% of the replicas), mean over 2 "
            "folds) + n3fit's",
            "    fit-quality term",
        ]
        assert (
            "  held-out chi2 per point under each replica statistic (not the objective):" in lines
        )
        assert "  held-out chi2 per point of each fold's replicas:" in lines
        assert not any("value under" in line or "objective chi2" in line for line in lines)


def test_penalties_a_fit_cannot_give_are_stored_as_null(monkeypatch) -> None:
    """Without the PDF at small x (a FitResult made elsewhere) saturation and integrability are
    unknown: null, as the ensemble's non-finite values."""

    def without_small_x(card: FitRuncard, **kwargs: object) -> FitResult:
        result = fake_fit(card, **kwargs)
        result.small_x_pdf = None
        return result

    monkeypatch.setattr(scheduler_module, "run_fit", without_small_x)
    runcard = parse_scan_runcard(card("{}"), "n3fit-objective.yml")
    study = optuna.create_study()
    run_in_process(study, Objective(runcard, PROBLEM, threading.Event()))
    penalties = study.trials[0].user_attrs["penalties"]
    assert penalties["saturation"] == {"0": [None] * REPLICAS, "1": [None] * REPLICAS}
    assert study.trials[0].state == TrialState.COMPLETE  # the χ² statistic needs none of them
