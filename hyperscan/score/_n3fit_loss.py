"""A trial's value under n3fit 4.1.5's hyperopt losses (``HyperLoss``), from what it stores.

Per fold: the fold's loss (``chi2``, ``phi2``, ``logp`` or ``chi2p``, penalties added when
asked); across folds: n3fit's fold statistic, its reciprocal for ``phi2`` (φ is maximised);
then n3fit's fit-quality term on the folds' fitted data, which every n3fit loss carries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from hyperscan.runcard import ObjectiveSection
from hyperscan.score._ensemble_metrics import n3fit_chi2_loss
from hyperscan.score._statistics import fold_statistic

#: n3fit's replica statistics (``average_best`` is the average in 4.1.5: it is handed the
#: best replicas already).
REPLICA_STATISTICS = {
    "average": np.mean,
    "average_best": np.mean,
    "best_worst": np.max,
    "std": np.std,
}

#: The ``ensemble`` record's key of each per-ensemble loss: n3fit's ``phi2`` is φ in its code.
METRIC_OF_LOSS = {"phi2": "phi", "logp": "logp", "chi2p": "chi2p"}


def fold_loss(
    objective: ObjectiveSection,
    record: Mapping[str, float | None],
    validation_chi2: np.ndarray,
    experimental_chi2: np.ndarray,
    penalties: Mapping[str, np.ndarray],
) -> float:
    """One fold's n3fit loss; nan where its metric is undefined.

    record: the fold's ``ensemble`` record; validation_chi2, experimental_chi2 (R,) per point
    of the fold's replicas; penalties: name → (R,). With ``penalties_in_loss`` the listed
    penalties are added as n3fit adds them: per replica to the experimental χ² of ``chi2``,
    their averages over the replicas to ``phi2`` and ``logp`` (the runcard refuses them with
    ``chi2p``, to which n3fit 4.1.5 adds none).
    """
    added = [np.asarray(penalties[name]) for name in objective.penalties]
    if not objective.penalties_in_loss:
        added = []
    if objective.loss == "chi2":
        experimental = np.asarray(experimental_chi2, dtype=float) + sum(added, np.zeros(1))
        reduce = REPLICA_STATISTICS[objective.replica_statistic]
        return n3fit_chi2_loss(validation_chi2, experimental, objective.best_fraction, reduce)
    metric = "phi2" if objective.phi_squared else METRIC_OF_LOSS[objective.loss]
    value = record[metric]
    if value is None:
        return math.nan
    return float(value) + sum(float(np.mean(penalty)) for penalty in added)


def fit_quality_term(fitted_chi2: Sequence[float]) -> float:
    """n3fit's ``LossHyperopt`` on the folds' mean χ² per point of their fitted data (each
    fold's mean prediction, experimental covariance): 100·elu(χ² − 1.2), elu's α = 1e-10. It
    keeps an ensemble loss from rewarding a poor fit (a wide spread makes φ large)."""
    excess = float(np.mean(fitted_chi2)) - 1.2
    return 100.0 * (excess if excess > 0 else 1e-10 * math.expm1(excess))


def n3fit_value(
    fold_losses: Sequence[float], fitted_chi2: Sequence[float], objective: ObjectiveSection
) -> float:
    """The trial's value: the fold statistic of the folds' losses (its reciprocal for
    ``phi2``) plus :func:`fit_quality_term`."""
    reduced = fold_statistic(np.asarray(fold_losses, dtype=float), objective)
    if objective.loss == "phi2":
        reduced = 1.0 / reduced if reduced != 0 else math.inf
    return reduced + fit_quality_term(fitted_chi2)
