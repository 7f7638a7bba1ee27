"""The attributes a worker stores on a trial, apart from the fitting code.

Status, export, the dashboard and reports read them without importing TensorFlow.
"""

from __future__ import annotations

import optuna

WORKER_ATTR = "worker"
TRASHED_ATTR = "trashed"
RETRY_OF_ATTR = "retry_of"
#: On a trial failed because its worker stopped: it was queued again, nothing went wrong.
REQUEUED_ATTR = "requeued"


def trashed(trial: optuna.Trial | optuna.trial.FrozenTrial) -> str | None:
    """The reason a finished trial was trashed, None if it was not."""
    return trial.user_attrs.get(TRASHED_ATTR)
