# SPDX-License-Identifier: GPL-3.0-or-later
"""n3fit's ensemble metrics on ensembles built by hand, against their formulas written out here
(inverse and log-determinant, not the module's Cholesky solves)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hyperscan.score._ensemble_metrics import (
    best_replicas,
    ensemble_metrics,
    fold_record,
    n3fit_chi2_loss,
)


def random_ensemble(seed: int, replicas: int = 6, points: int = 5):
    rng = np.random.default_rng(seed)
    data = rng.uniform(0.5, 2.0, points)
    factor = rng.normal(size=(points, points)) * 0.1
    covmat = factor @ factor.T + np.diag(rng.uniform(0.01, 0.05, points))
    predictions = data + rng.normal(scale=0.2, size=(replicas, points))
    return predictions, data, covmat


def test_identical_replicas_have_no_spread_and_the_experimental_chi2():
    data = np.array([1.0, 2.0, 3.0])
    covmat = np.diag([0.1, 0.2, 0.3])
    prediction = np.array([1.1, 1.8, 3.3])
    metrics = ensemble_metrics(np.tile(prediction, (4, 1)), data, covmat)
    assert metrics.phi == pytest.approx(0.0, abs=1e-7)
    assert metrics.phi2 == pytest.approx(0.0, abs=1e-12)
    expected = (prediction - data) @ np.linalg.inv(covmat) @ (prediction - data) / 3
    assert metrics.chi2p == pytest.approx(expected, rel=1e-12)


def test_two_points_by_hand():
    # replicas (1, 2) and (3, 2) for data (1, 1), covariance diag(1, 4):
    # prediction covariance (ddof 1) diag(2, 0), total diag(3, 4); central residual (1, 1).
    predictions = np.array([[1.0, 2.0], [3.0, 2.0]])
    data = np.array([1.0, 1.0])
    metrics = ensemble_metrics(predictions, data, np.diag([1.0, 4.0]))
    assert metrics.chi2p == pytest.approx((1 / 3 + 1 / 4) / 2)
    # replica χ² 0.25 and 4.25, mean 2.25; the central one 1.25: φ² = (2.25 − 1.25) / 2
    assert metrics.phi2 == pytest.approx(0.5)
    assert metrics.phi == pytest.approx(math.sqrt(0.5))
    logp = 0.5 * (2 * math.log(2 * math.pi) + math.log(12.0) + 7 / 12) / 2
    assert metrics.logp == pytest.approx(logp)
    assert (metrics.n_points, metrics.replicas) == (2, 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_ensemble_against_the_written_out_formulas(seed):
    predictions, data, covmat = random_ensemble(seed)
    replicas, points = predictions.shape
    inverse = np.linalg.inv(covmat)
    central = predictions.mean(axis=0) - data
    replica_chi2 = [(p - data) @ inverse @ (p - data) for p in predictions]
    phi2 = (np.mean(replica_chi2) - central @ inverse @ central) / points
    deviations = predictions - predictions.mean(axis=0)
    total = covmat + deviations.T @ deviations / (replicas - 1)
    chi2_total = central @ np.linalg.inv(total) @ central
    # normalised log-determinant: log det(total) − Σ log data_i²
    log_det = np.linalg.slogdet(total)[1] - np.sum(np.log(data**2))
    metrics = ensemble_metrics(predictions, data, covmat)
    assert metrics.phi2 == pytest.approx(phi2, rel=1e-10)
    assert metrics.phi == pytest.approx(math.sqrt(phi2), rel=1e-10)
    assert metrics.chi2p == pytest.approx(chi2_total / points, rel=1e-10)
    logp = 0.5 * (points * math.log(2 * math.pi) + log_det + chi2_total) / points
    assert metrics.logp == pytest.approx(logp, rel=1e-10)


def test_logp_is_normalised_by_the_data_so_units_do_not_matter():
    predictions, data, covmat = random_ensemble(3)
    scale = 1e3
    scaled = ensemble_metrics(predictions * scale, data * scale, covmat * scale**2)
    plain = ensemble_metrics(predictions, data, covmat)
    assert scaled.logp == pytest.approx(plain.logp, rel=1e-9)
    assert scaled.phi == pytest.approx(plain.phi, rel=1e-9)


def test_one_replica_has_no_phi_and_only_the_experimental_covariance():
    data, covmat = np.array([1.0, 2.0]), np.diag([0.5, 0.25])
    metrics = ensemble_metrics(np.array([[1.5, 1.5]]), data, covmat)
    assert math.isnan(metrics.phi)
    assert metrics.chi2p == pytest.approx((0.25 / 0.5 + 0.25 / 0.25) / 2)


def test_best_replicas_count_as_n3fit_and_put_nan_last():
    chi2 = np.array([3.0, np.nan, 1.0, 2.0])
    assert best_replicas(chi2, 0.85).tolist() == [2, 3, 0, 1]  # ceil(3.4) = 4
    assert best_replicas(chi2, 0.5).tolist() == [2, 3]


def test_n3fit_chi2_loss():
    validation = np.arange(20, dtype=float)  # best 17: 0..16, mean 8
    experimental = np.array([10.0, 3.0, 4.0, 5.0, 6.0] + [50.0] * 15)
    # n3fit's ceil((1 − 0.85) · 20) is 4, not 3 (0.15000000000000002 · 20): best 3, 4, 5, 6
    assert n3fit_chi2_loss(validation, experimental, 0.85) == pytest.approx(8.0 + 4.5 - 2.0)
    # below 2 the experimental part adds nothing
    assert n3fit_chi2_loss(validation, np.full(20, 1.5), 0.85) == pytest.approx(8.0)


def test_fold_record_uses_the_best_replicas_and_stores_none_for_a_diverged_one():
    predictions, data, covmat = random_ensemble(4, replicas=4)
    validation = np.array([1.0, 5.0, 2.0, 3.0])
    record = fold_record(predictions, data, covmat, validation, validation, 0.75)
    best = ensemble_metrics(predictions[[0, 2, 3]], data, covmat)
    assert record["replicas"] == 3 and record["n_points"] == data.size
    assert record["phi"] == pytest.approx(best.phi, abs=1e-6)
    assert record["logp"] == pytest.approx(best.logp, abs=1e-6)
    predictions[2, 0] = np.nan
    record = fold_record(predictions, data, covmat, validation, validation, 0.75)
    assert record["phi"] is None and record["chi2p"] is None
    assert record["n3fit_chi2"] is not None
