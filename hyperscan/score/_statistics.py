"""A trial's value and the statistics stored with it: χ² across replicas, then across folds."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from hyperscan.runcard import ObjectiveSection

QUANTILES = (0.16, 0.5, 0.84)

#: Across folds: hyperscan's names and n3fit's (average_best is the average in n3fit 4.1.5).
FOLD_STATISTICS = {
    "mean": np.mean,
    "median": np.median,
    "max": np.max,
    "average": np.mean,
    "average_best": np.mean,
    "best_worst": np.max,
    "std": np.std,
}


def replica_statistic(chi2: np.ndarray, objective: ObjectiveSection) -> float:
    """One fold's replicas (R,) → the objective's statistic (a non-finite value stays one)."""
    chi2 = np.asarray(chi2, dtype=float)
    if objective.statistic == "mean":
        return float(np.mean(chi2))
    if objective.statistic == "median":
        return float(np.median(chi2))
    if objective.statistic == "max":
        return float(np.max(chi2))
    if objective.statistic == "mean_plus_std":
        return float(np.mean(chi2) + objective.std_weight * np.std(chi2))
    # trimmed_mean: n3fit's "best 85% of replicas"; at least one replica.
    # Rounded first: 0.55 * 100 is 55.000000000000007 in binary, which ceil would make 56.
    kept = max(1, math.ceil(round(objective.best_fraction * chi2.size, 9)))
    return float(np.mean(np.sort(chi2)[:kept]))


def fold_statistic(values: np.ndarray, objective: ObjectiveSection) -> float:
    """The folds' values (F,), each a fold's loss, → the trial's value, by the objective's own
    statistic across folds (``fold_statistic``), not the one across replicas."""
    return float(FOLD_STATISTICS[objective.fold_statistic](np.asarray(values, dtype=float)))


def trial_value(chi2: np.ndarray, folds: np.ndarray, objective: ObjectiveSection) -> float:
    """chi2 (M,) of every member and its fold (M,) → the trial's value."""
    per_fold = [replica_statistic(chi2[folds == fold], objective) for fold in np.unique(folds)]
    return fold_statistic(np.array(per_fold), objective)


def summary(values: np.ndarray) -> dict[str, float]:
    """The spread of a χ² across replicas, rounded for the dashboard."""
    values = np.asarray(values, dtype=float)
    if values.size == 0 or not np.isfinite(values).all():
        finite = values[np.isfinite(values)]
        return {"n": int(values.size), "finite": int(finite.size)}
    stats = {
        "mean": values.mean(),
        "std": values.std(),
        "min": values.min(),
        "max": values.max(),
        **{f"q{round(q * 100):02d}": np.quantile(values, q) for q in QUANTILES},
    }
    return {key: round(float(value), 5) for key, value in stats.items()} | {"n": int(values.size)}


def all_statistics(
    chi2: np.ndarray, folds: np.ndarray, objective: ObjectiveSection
) -> Mapping[str, float]:
    """The trial value under every replica statistic, so a study can be re-ranked later."""
    names = ("mean", "median", "trimmed_mean", "max", "mean_plus_std")
    return {
        name: round(trial_value(chi2, folds, objective.model_copy(update={"statistic": name})), 6)
        for name in names
    }
