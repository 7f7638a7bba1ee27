# SPDX-License-Identifier: GPL-3.0-or-later
"""NNPDF's closure estimators of one ensemble against a known truth: bias, variance, R_bv, ξ₁σ.

Only a closure test knows the truth, and only with it can a scan ask whether an ensemble is
faithful: its spread as large as its distance from the truth (arXiv:2111.05787; validphys
``closuretest``). One implementation for the scan's trials and benchmarks/closure_real.py, so
that a trial's numbers are the benchmark's. numpy only: the caller hands in the predictions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hyperscan.score._covariance import eigenvectors, whitening

#: The fraction of a Gaussian within one standard deviation, erf(1/√2): ξ₁σ's ideal.
ONE_SIGMA = math.erf(1.0 / math.sqrt(2.0))

#: The estimators a trial stores per fold (its ``closure`` attribute), by name.
CLOSURE_ESTIMATORS = ("bias", "variance", "rbv", "xi1sigma")


@dataclass(frozen=True)
class ClosureEstimators:
    """One ensemble's closure estimators in data space, per data point."""

    bias: float  # (E[T] − T_true)ᵀ C⁻¹ (E[T] − T_true) / N
    variance: float  # E_r[(T_r − E[T])ᵀ C⁻¹ (T_r − E[T])] / N
    rbv: float  # √(bias / variance), ideal ~ 1
    xi1sigma: float  # fraction of C's eigenvectors whose shift is within 1σ, ideal ~ 0.68
    xi1sigma_points: float  # the same per data point: not an estimator to quote (correlations)

    @property
    def xi1sigma_expected(self) -> float:
        """The ξ₁σ that R_bv implies for Gaussian fluctuations: erf(1 / (√2 R_bv))."""
        return math.erf(1.0 / (math.sqrt(2.0) * self.rbv)) if self.rbv > 0 else 1.0


def closure_estimators(
    predictions: np.ndarray, truth: np.ndarray, covmat: np.ndarray
) -> ClosureEstimators:
    """The estimators of replicas' predictions (R, N) against truth (N,) with covariance C.

    E[T] is the replicas' mean; variance uses their population spread (1/R, as validphys).
    ξ₁σ is validphys' ``dataset_xi``: in the eigenbasis v_k of C, the fraction of k with
    |v_k·(E[T] − T_true)| below the replicas' standard deviation of v_k·T_r. Needs two
    replicas (one has no spread: variance 0, R_bv inf).
    """
    predictions = np.asarray(predictions, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    n = truth.shape[0]
    mean = predictions.mean(axis=0)
    lower_inverse, vectors = whitening(covmat), eigenvectors(covmat)

    def chi2(residuals: np.ndarray) -> np.ndarray:  # (..., N) -> (...)
        z = lower_inverse @ np.atleast_2d(residuals).T
        return (z * z).sum(axis=0) / n

    bias = float(chi2(mean - truth)[0])
    variance = float(np.mean(chi2(predictions - mean)))
    ratio = math.sqrt(bias / variance) if variance > 0 else math.inf
    delta = vectors.T @ (mean - truth)
    sigma = (predictions - mean) @ vectors
    sigma = np.sqrt(np.mean(sigma * sigma, axis=0))
    point_sigma = predictions.std(axis=0)
    return ClosureEstimators(
        bias=bias,
        variance=variance,
        rbv=ratio,
        xi1sigma=float(np.mean(np.abs(delta) < sigma)),
        xi1sigma_points=float(np.mean(np.abs(mean - truth) < point_sigma)),
    )


def closure_loss(name: str, record: Mapping[str, float | None]) -> float:
    """One fold's closure loss, lower is better (nan where undefined): ``bias``, ``variance``
    as they are, ``rbv`` as |log R_bv| (0 at the ideal R_bv = 1, the same for a factor too
    wide as too narrow), ``xi1sigma`` as |ξ₁σ − erf(1/√2)|."""
    value = record.get(name)
    if value is None or not math.isfinite(value):
        return math.nan
    if name == "rbv":
        return abs(math.log(value)) if value > 0 else math.inf
    if name == "xi1sigma":
        return abs(value - ONE_SIGMA)
    return float(value)


def closure_record(
    predictions: np.ndarray, truth: np.ndarray, covmat: np.ndarray
) -> dict[str, float | int | None]:
    """What a trial stores for one fold: the estimators of its replicas (R, N) on the points
    it scores (9 significant digits, as the ``ensemble`` figures), None where not finite (fewer
    than two replicas, a diverged one, a singular covariance), and the replicas counted."""
    predictions = np.asarray(predictions, dtype=np.float64)
    estimators = None
    if predictions.shape[0] >= 2 and np.isfinite(predictions).all():
        try:
            estimators = closure_estimators(predictions, truth, covmat)
        except np.linalg.LinAlgError:
            estimators = None
    record: dict[str, float | int | None] = {}
    for name in CLOSURE_ESTIMATORS:
        value = None if estimators is None else getattr(estimators, name)
        record[name] = float(f"{value:.9g}") if value is not None and math.isfinite(value) else None
    return record | {"replicas": int(predictions.shape[0])}


def multiclosure_record(
    records: Sequence[Mapping[str, float | int | None]],
) -> dict[str, float | int | None]:
    """One fold's estimators over several level-1 fits' records, as validphys' multiclosure
    takes them: bias and variance averaged over the fits, R_bv = √(mean bias / mean variance)
    (not the mean of the fits' ratios), ξ₁σ averaged; None where a fit's is; ``replicas``
    summed. One record is returned as it is."""
    if len(records) == 1:
        return dict(records[0])

    def mean(name: str) -> float | None:
        values = [record[name] for record in records]
        return None if any(v is None for v in values) else float(np.mean(values))

    bias, variance = mean("bias"), mean("variance")
    rbv = None
    if bias is not None and variance is not None and variance > 0:
        rbv = math.sqrt(bias / variance)
    values = {"bias": bias, "variance": variance, "rbv": rbv, "xi1sigma": mean("xi1sigma")}
    record: dict[str, float | int | None] = {
        name: None if value is None else float(f"{value:.9g}") for name, value in values.items()
    }
    return record | {"replicas": sum(int(r["replicas"] or 0) for r in records)}
