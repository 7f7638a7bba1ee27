"""The attributes a worker stores on a trial, apart from the fitting code.

Status, export, the dashboard and reports read them without importing TensorFlow.
"""

from __future__ import annotations

import os
import socket

import optuna

WORKER_ATTR = "worker"
TRASHED_ATTR = "trashed"
RETRY_OF_ATTR = "retry_of"
#: On a trial failed because its worker stopped: it was queued again, nothing went wrong.
REQUEUED_ATTR = "requeued"


def trashed(trial: optuna.Trial | optuna.trial.FrozenTrial) -> str | None:
    """The reason a finished trial was trashed, None if it was not."""
    return trial.user_attrs.get(TRASHED_ATTR)


def requeued(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a trial was failed because its worker stopped, and queued again."""
    return bool(trial.user_attrs.get(REQUEUED_ATTR))


def worker_id() -> str:
    """The value of the `worker` attribute: this process, as host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"
