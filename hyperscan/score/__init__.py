"""A trial's score: its fit's ensemble reduced to the values a study is told, the attributes
it stores, and why it is trashed; no Optuna, no storage.

:func:`score` takes a :class:`~hyperscan.fit.FitResult` and a :class:`Scoring` (the scan's
runcard and data, built once per worker). The ensemble metrics, the closure estimators and
n3fit's penalties it stores are computed here, and dispatched by the one table of losses
(:data:`hyperscan.runcard.LOSSES`). The scoring itself, which needs the fit's types (and so
TensorFlow), loads on first use: a study's status and labels stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperscan.score._closure import (
    CLOSURE_ESTIMATORS,
    ONE_SIGMA,
    ClosureEstimators,
    closure_estimators,
    multiclosure_record,
)
from hyperscan.score._labels import objective_label

if TYPE_CHECKING:
    from hyperscan.score._score import Scoring, TrialScore, score

_LOADED_ON_USE = ("Scoring", "TrialScore", "score")

__all__ = [
    "CLOSURE_ESTIMATORS",
    "ONE_SIGMA",
    "ClosureEstimators",
    "Scoring",
    "TrialScore",
    "closure_estimators",
    "multiclosure_record",
    "objective_label",
    "score",
]


def __getattr__(name: str) -> Any:
    if name in _LOADED_ON_USE:
        from hyperscan._tensorflow import loaded_on_use

        return loaded_on_use("hyperscan.score._score", name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
