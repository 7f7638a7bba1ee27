"""Predictions of a PDF given on a grid, and their χ² to the data: for reports and checks."""

from __future__ import annotations

import numpy as np

from ._problem import Problem
from ._tables import on_grid


def grid_predictions(problem: Problem, grid_x: np.ndarray, xf: np.ndarray) -> np.ndarray:
    """FK ⊗ x·f for every data point: (M, N) from xf (M, n_grid, 14) in the FK basis.

    grid_x must hold every FK node (a fit's own grid does: ``pdfs.npz`` ``grid_x``).
    """
    grid_x = np.asarray(grid_x)
    on_fk_basis = np.swapaxes(np.asarray(xf), 1, 2)  # (M, 14, n_grid)
    parts = [
        d.predictions(on_fk_basis[..., on_grid(grid_x, d.xgrid, d.name)]) for d in problem.datasets
    ]
    return np.concatenate(parts, axis=1)


def experimental_chi2(
    problem: Problem, predictions: np.ndarray, central: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """χ² per point to the central data with the full covariance: total (M,), per dataset (M, D).

    predictions: (M, N), one row per member, N = ``problem.n_data``; a single member's (N,)
    is refused, not broadcast (the total would come back (N,), per dataset (1, D)): pass
    ``predictions[None]``. Computed in float64 on the host, block by block (the covariance is
    block diagonal). ``central`` (N,) or (M, N), default the problem's: each member's own
    data, when members fit different level-1 fits (``level1_data``).
    """
    predictions = np.asarray(predictions)
    if predictions.ndim != 2 or predictions.shape[1] != problem.n_data:
        raise ValueError(
            f"predictions must be (members, {problem.n_data} data points), "
            f"got shape {predictions.shape}"
        )
    central = problem.central if central is None else np.asarray(central)
    residuals = (np.atleast_2d(central) - predictions).astype(np.float64)
    blocks, datasets = problem.whiteners
    total = np.zeros(predictions.shape[0])
    for block, whitener in zip(problem.blocks(), blocks, strict=True):
        total += _chi2(whitener, residuals[:, block])
    per_dataset = np.stack(
        [
            _chi2(whitener, residuals[:, s]) / (s.stop - s.start)
            for s, whitener in zip(problem.dataset_slices(), datasets, strict=True)
        ],
        axis=1,
    )
    return total / problem.n_data, per_dataset


def _chi2(whitener: np.ndarray, residuals: np.ndarray) -> np.ndarray:
    """|L⁻¹ r|² of each row r of `residuals`."""
    return np.sum((residuals @ whitener.T) ** 2, axis=1)
