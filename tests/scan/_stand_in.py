"""A FitResult without a fit, for tests of what a scan does with a fit's numbers."""

from __future__ import annotations

import numpy as np

from hyperscan.fit import FitResult, MemberSpec


def stand_in_result(
    members: list[MemberSpec],
    *,
    chi2_per_point: dict[str, np.ndarray],
    predictions: np.ndarray,
    best_epoch: int,
    status: list[str] | None = None,
    stop_epoch: np.ndarray | None = None,
    divergence: list[str] | None = None,
    small_x_pdf: np.ndarray | None = None,
) -> FitResult:
    """The given figures of `members`; every member ``ok`` unless `status` says otherwise, and
    no PDF, parameters or per-dataset χ²."""
    m = len(members)
    return FitResult(
        replicas=np.array([spec.replica for spec in members]),
        folds=np.array([spec.fold for spec in members]),
        level1=np.array([spec.level1 for spec in members]),
        status=status if status is not None else ["ok"] * m,
        best_epoch=np.full(m, best_epoch),
        stop_epoch=stop_epoch if stop_epoch is not None else np.full(m, -1),
        divergence=divergence if divergence is not None else [""] * m,
        chi2_per_point=chi2_per_point,
        dataset_names=[],
        dataset_chi2_per_point=np.zeros((m, 0)),
        predictions=predictions,
        steps=100,
        seconds=0.001,
        training_seconds=0.001,
        interrupted=False,
        pdf_x=np.zeros(0),
        pdf=np.zeros((m, 0, 8)),
        grid_x=np.zeros(0),
        grid_pdf=np.zeros((m, 0, 8)),
        params=[],
        small_x_pdf=small_x_pdf,
    )
