"""A worker scores its finished trials one after another: the O(N³) factorisations of a
covariance (closure estimators, n3fit's metrics) are made once per covariance, not once per
trial (issue #55, fault 6: four results took 20 s to write)."""

from __future__ import annotations

import numpy as np

from hyperscan.score import _covariance as cache
from hyperscan.score import closure_estimators
from hyperscan.score._ensemble_metrics import ensemble_metrics


def _positive(n: int, seed: int) -> np.ndarray:
    a = np.random.default_rng(seed).normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def test_a_covariance_is_factorised_once_for_every_trial_scored_on_it(monkeypatch):
    calls = {"cholesky": 0, "eigh": 0}
    for name in calls:
        original = getattr(np.linalg, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(np.linalg, name, counted)
    covmat = _positive(40, seed=1)
    rng = np.random.default_rng(2)
    truth = rng.normal(size=40)
    for _ in range(4):  # four trials' replicas, the covariance handed in anew each time
        closure_estimators(truth + rng.normal(size=(5, 40)), truth, covmat.copy())
    assert calls == {"cholesky": 1, "eigh": 1}
    closure_estimators(truth + rng.normal(size=(5, 40)), truth, _positive(40, seed=3))
    assert calls == {"cholesky": 2, "eigh": 2}  # another covariance: its own factors
    data = truth + 10.0
    for _ in range(4):  # n3fit's metrics: the experimental covariance once, each trial's own
        ensemble_metrics(data + rng.normal(size=(5, 40)), data, covmat.copy())
    assert calls == {"cholesky": 2 + 4, "eigh": 2}


def test_the_estimators_are_the_direct_formulas():
    """bias = r̄ᵀC⁻¹r̄/N, variance the replicas' mean of the same, ξ₁σ in C's eigenbasis."""
    covmat = _positive(30, seed=4)
    rng = np.random.default_rng(5)
    truth = rng.normal(size=30)
    predictions = truth + 0.8 + rng.normal(size=(6, 30))
    got = closure_estimators(predictions, truth, covmat)
    inverse = np.linalg.inv(covmat)
    mean = predictions.mean(axis=0)
    bias = (mean - truth) @ inverse @ (mean - truth) / 30
    variance = np.mean([(p - mean) @ inverse @ (p - mean) / 30 for p in predictions])
    _, vectors = np.linalg.eigh(covmat)
    spread = np.sqrt(np.mean(((predictions - mean) @ vectors) ** 2, axis=0))
    xi = np.mean(np.abs(vectors.T @ (mean - truth)) < spread)
    np.testing.assert_allclose([got.bias, got.variance], [bias, variance], rtol=1e-12)
    assert got.rbv == np.sqrt(got.bias / got.variance) and got.xi1sigma == xi


def test_the_kept_factorisations_are_bounded_in_memory(monkeypatch):
    monkeypatch.setattr(cache, "KEPT_BYTES", 3 * 20 * 20 * 8)  # three 20-point factorisations
    monkeypatch.setattr(cache, "_kept", type(cache._kept)())
    for seed in range(5):
        cache.whitening(_positive(20, seed))
    assert len(cache._kept) == 3
    assert cache.whitening(_positive(20, 4)) is cache.whitening(_positive(20, 4))  # the latest kept
