"""n3fit 4.1.5's hyperopt penalties, per replica: saturation, patience, integrability.

Written from their definitions in ``n3fit/hyper_optimization/penalties.py`` (numpy only): a
trial stores all three per replica whatever its objective, and an n3fit loss adds the ones
``scan.objective.penalties`` names when ``penalties_in_loss`` is true.
"""

from __future__ import annotations

import numpy as np

from hyperscan.data import FIT_BASIS
from hyperscan.fit import INTEGRABILITY_X, integrability_numbers

#: saturation: the slope of x·f in log10 x, on 100 log points from 1e-6 to 1e-4, of the
#: singlet and the gluon (n3fit's flavours 1 and 2 of its evolution basis).
SATURATION_X = np.logspace(-6, -4, 100)
SATURATION_FLAVOURS = ("Sigma", "g")
#: integrability: per flavour, integrability numbers (the fit's, as postfit reads them) up to
#: 0.5 (validphys' fitveto threshold) count 0.
INTEGRABILITY_THRESHOLD = 0.5
#: patience: exp(α·distance), α = 1e-4 (at 10,000 epochs from the mark the factor is e).
PATIENCE_ALPHA = 1e-4


def _columns(names: tuple[str, ...]) -> list[int]:
    return [FIT_BASIS.index(name) for name in names]


def saturation(xf: np.ndarray) -> np.ndarray:
    """xf (M, 100, 8) on :data:`SATURATION_X` → (M,): Σ over Σ and g of 1 / (1e-7 + |mean
    slope| + std slope), the slope of x·f in log10 x. Large when a PDF is flat (saturated) at
    small x."""
    values = np.asarray(xf, dtype=np.float64)[:, :, _columns(SATURATION_FLAVOURS)]
    slope = np.diff(values, axis=1) / np.diff(np.log10(SATURATION_X))[None, :, None]
    spread = np.abs(slope.mean(axis=1)) + slope.std(axis=1)
    return np.sum(1.0 / (1e-7 + spread), axis=1)


def patience(
    best_epoch: np.ndarray, epochs: int, patience_epochs: int, validation_chi2: np.ndarray
) -> np.ndarray:
    """(M,) validation χ² · exp(α |epochs − patience − best epoch|): zero distance when a
    replica's best epoch is the last one from which the patience could still run out."""
    distance = np.abs(epochs - patience_epochs - np.asarray(best_epoch, dtype=np.float64))
    return np.asarray(validation_chi2, dtype=np.float64) * np.exp(PATIENCE_ALPHA * distance)


def integrability(xf: np.ndarray) -> np.ndarray:
    """xf (M, 3, 8) on INTEGRABILITY_X → (M,): exp(min(Σ_f n_f, 50)) − 1, n_f the integrability
    numbers, those up to the threshold counted 0: zero for an integrable PDF."""
    numbers = integrability_numbers(xf)
    numbers[numbers <= INTEGRABILITY_THRESHOLD] = 0.0
    return np.exp(np.minimum(numbers.sum(axis=1), 50.0)) - 1.0


def all_penalties(
    xf: np.ndarray,
    best_epoch: np.ndarray,
    epochs: int,
    patience_epochs: int,
    validation_chi2: np.ndarray,
) -> dict[str, np.ndarray]:
    """Every penalty of M replicas, xf (M, 103, 8) on INTEGRABILITY_X then
    :data:`SATURATION_X` (the fit's ``SMALL_X``: ``FitResult.small_x_pdf``)."""
    n = INTEGRABILITY_X.size
    return {
        "saturation": saturation(xf[:, n:]),
        "patience": patience(best_epoch, epochs, patience_epochs, validation_chi2),
        "integrability": integrability(xf[:, :n]),
    }
