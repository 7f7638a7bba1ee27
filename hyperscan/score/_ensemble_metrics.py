"""n3fit 4.1.5's hyperopt figures of merit of one fold's ensemble: φ, logp, chi2p, its χ² loss.

A multi-replica trial exists to judge the ensemble, not one replica: these are the numbers
NNPDF's own hyperopt (``HyperLoss`` and ``compute_hyperopt_metrics``) judges it by, so a scan
here can be ranked as n3fit would rank it. numpy only: the caller hands in the fold's
predictions, data and experimental covariance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from hyperscan.score._covariance import whitening


@dataclass(frozen=True)
class EnsembleMetrics:
    """One fold's figures of merit, per data point (nan where undefined)."""

    phi: float  # φ, the replica spread in units of the data uncertainties
    phi2: float  # φ²
    logp: float  # negative log-likelihood per point, total covariance, normalised by the data
    chi2p: float  # χ² per point of the central prediction, total covariance
    n_points: int
    replicas: int


def best_replicas(validation_chi2: np.ndarray, proportion: float) -> np.ndarray:
    """Indices of the ceil(proportion·R) replicas with the lowest validation χ² (NaN last).

    The count is n3fit's ``np.ceil(proportion * R)`` as is (not rounded first, unlike the
    ``trimmed_mean`` statistic), so that the same replicas are chosen as n3fit chooses.
    """
    validation_chi2 = np.asarray(validation_chi2, dtype=float)
    count = int(np.ceil(proportion * validation_chi2.size))
    return np.argsort(validation_chi2, kind="stable")[:count]


def n3fit_chi2_loss(
    validation_chi2: np.ndarray,
    experimental_chi2: np.ndarray,
    proportion: float,
    reduce: Callable[[np.ndarray], float] = np.mean,
) -> float:
    """n3fit's ``loss_type: chi2`` for one fold: the validation χ² of the best ``proportion`` of
    the replicas, plus max(experimental χ² of the best 1 − proportion of them, 2) − 2, both
    per point, each ranked by itself and reduced across replicas by ``reduce`` (n3fit's
    ``replica_statistic``, by default the average)."""
    validation_chi2 = np.asarray(validation_chi2, dtype=float)
    experimental_chi2 = np.asarray(experimental_chi2, dtype=float)
    validation = reduce(validation_chi2[best_replicas(validation_chi2, proportion)])
    count = int(np.ceil((1.0 - proportion) * experimental_chi2.size))
    experimental = reduce(np.sort(experimental_chi2)[:count])
    return float(validation + max(experimental, 2.0) - 2.0)


def central_chi2(predictions: np.ndarray, data: np.ndarray, covmat: np.ndarray) -> float:
    """χ² per point of the replicas' mean prediction (R, N) with the experimental covariance:
    n3fit's ``chi2exp``, which its hyperopt takes on a fold's fitted (not held-out) data."""
    predictions = np.asarray(predictions, dtype=np.float64)
    residual = predictions.mean(axis=0) - np.asarray(data, dtype=np.float64)
    return float(np.sum((whitening(covmat) @ residual) ** 2)) / residual.size


def ensemble_metrics(
    predictions: np.ndarray, data: np.ndarray, covmat: np.ndarray
) -> EnsembleMetrics:
    """φ, logp and chi2p of replicas' predictions (R, N) for data (N,) with covariance (N, N).

    The central prediction is the replicas' mean (the prediction of the mean PDF, the FK
    contraction being linear). The total covariance adds the replicas' prediction covariance
    (``np.cov``, R − 1) to the experimental one when R > 1; logp's log-determinant is of the
    total covariance divided by data_i·data_j, as n3fit normalises it. φ needs two replicas.
    """
    predictions = np.asarray(predictions, dtype=np.float64)
    data = np.asarray(data, dtype=np.float64)
    covmat = np.asarray(covmat, dtype=np.float64)
    replicas, n_points = predictions.shape
    residuals = predictions - data
    central = residuals.mean(axis=0)
    experimental = whitening(covmat)  # the same for every trial: factorised once
    spread = np.mean(_chi2(experimental, residuals.T)) - _chi2(experimental, central)
    phi2 = max(float(spread), 0.0) / n_points if replicas > 1 else math.nan
    total = covmat + np.cov(predictions, rowvar=False) if replicas > 1 else covmat
    lower = np.linalg.cholesky(total)  # the trial's own: one factorisation
    chi2_total = float(np.sum(np.linalg.solve(lower, central) ** 2))
    # log det(total / dᵢdⱼ) = log det(total) − 2 Σ log |dᵢ|
    log_det = 2.0 * float(np.sum(np.log(np.diag(lower)) - np.log(np.abs(data))))
    logp = 0.5 * (n_points * math.log(2.0 * math.pi) + log_det + chi2_total) / n_points
    return EnsembleMetrics(
        phi=math.sqrt(phi2),
        phi2=phi2,
        logp=logp,
        chi2p=chi2_total / n_points,
        n_points=n_points,
        replicas=replicas,
    )


def fold_record(
    predictions: np.ndarray,
    data: np.ndarray,
    covmat: np.ndarray,
    validation_chi2: np.ndarray,
    experimental_chi2: np.ndarray,
    proportion: float,
) -> Mapping[str, float | int | None]:
    """What a trial stores for one fold: the metrics of its best ``proportion`` of replicas
    (by validation χ²) on the points it scores, and n3fit's χ² loss; None where not finite (a
    diverged replica among the best, no validation data, a singular covariance).

    predictions (R, N) of the fold's replicas on its scored points, data (N,), covmat (N, N);
    validation_chi2 and experimental_chi2 (R,) per point, the latter on the scored points.
    """
    best = best_replicas(validation_chi2, proportion)
    chosen = np.asarray(predictions, dtype=np.float64)[best]
    try:
        metrics = ensemble_metrics(chosen, data, covmat) if np.isfinite(chosen).all() else None
    except np.linalg.LinAlgError:
        metrics = None
    values = {
        name: None if metrics is None else getattr(metrics, name)
        for name in ("phi", "phi2", "logp", "chi2p")
    }
    values["n3fit_chi2"] = n3fit_chi2_loss(validation_chi2, experimental_chi2, proportion)
    # 9 significant digits, not decimals: a cross-check against n3fit asks for 1e-6 relative
    # and φ² can be 1e-7; short enough for the dashboard's 1,024 characters with 8 folds.
    finite = {
        name: float(f"{value:.9g}") if value is not None and math.isfinite(value) else None
        for name, value in values.items()
    }
    return finite | {"n_points": int(np.shape(data)[0]), "replicas": int(best.size)}


def _chi2(lower_inverse: np.ndarray, residuals: np.ndarray) -> np.ndarray:
    """residualᵀ C⁻¹ residual for C = L Lᵀ, over the first axis (N,) or (N, R)."""
    return np.sum((lower_inverse @ residuals) ** 2, axis=0)
