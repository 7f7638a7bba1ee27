"""The attributes a worker stores on a trial, apart from the fitting code.

Status, export, the dashboard and reports read them without importing TensorFlow.
"""

from __future__ import annotations

import math
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


def last_report(trial: optuna.trial.FrozenTrial) -> tuple[int, float] | None:
    """The last finite intermediate value a trial reported to the pruner: its step and value."""
    reports = [(s, v) for s, v in trial.intermediate_values.items() if math.isfinite(v)]
    return max(reports) if reports else None


def requeued(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a trial was failed because its worker stopped, and queued again."""
    return bool(trial.user_attrs.get(REQUEUED_ATTR))


def repeated(user_attrs: dict, system_attrs: dict) -> tuple[int, bool] | None:
    """The trial a queued trial repeats, and whether its worker was lost (died, or lost the
    storage) rather than told to stop; None for a trial drawn afresh.

    Optuna's re-queue of a lost worker's trial copies its user attributes (so also an older
    ``retry_of``) and appends the failed trial to ``retry_history``: the later one counts."""
    stopped = user_attrs.get(RETRY_OF_ATTR)
    history = system_attrs.get("retry_history", [])
    if history and (stopped is None or history[-1] > stopped):
        return history[-1], True
    return None if stopped is None else (stopped, False)


def worker_id() -> str:
    """The value of the `worker` attribute: this process, as host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"
