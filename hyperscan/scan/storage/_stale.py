# SPDX-License-Identifier: GPL-3.0-or-later
"""Trials whose worker is lost: failed, and re-queued with the same parameters while the
budget needs them, each said in the log of the process that does it."""

from __future__ import annotations

import logging
import warnings
from contextlib import suppress

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled
from optuna.trial import FrozenTrial, TrialState

from hyperscan.scan._trial_attrs import WORKER_ATTR
from hyperscan.scan.storage._take import queue_if_needed

_logger = logging.getLogger(__name__)


class RequeueStaleTrials(RetryHeartbeatStaleTrialCallback):
    """Optuna's re-queue of a trial whose heartbeat stopped, said in the log of the worker
    that does it (otherwise the trial just turns FAIL and its copy runs, unexplained), and only
    while the budget's gate leaves room for the copy (:func:`queue_if_needed`): a copy nobody
    takes would stay queued."""

    def __call__(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        why: str = "sent no heartbeat for the grace period",
    ) -> None:
        retries = len(trial.system_attrs.get("retry_history", [])) + 1
        requeue = super().__call__
        if self._max_retry is not None and retries > self._max_retry:
            outcome = f"not re-queued (retried {retries - 1} times already)"
        elif queue_if_needed(study, lambda: requeue(study, trial)):
            outcome = "re-queued"
        else:
            outcome = "not re-queued (the budget's trials are all finished, running or queued)"
        _logger.warning(
            "trial %d (worker %s) %s: failed, %s",
            trial.number,
            trial.user_attrs.get(WORKER_ATTR, "?"),
            why,
            outcome,
        )


def stale_trial_ids(study: optuna.Study) -> list[int]:
    """The RUNNING trials whose heartbeat stopped for the grace period: their worker is lost."""
    storage = study._storage
    if not isinstance(storage, BaseHeartbeat) or not is_heartbeat_enabled(storage):
        return []
    return list(storage._get_stale_trial_ids(study._study_id))


def fail_stale_trials(
    study: optuna.Study, *, requeue: bool, why_not: str = "the budget is spent"
) -> None:
    """Fail the RUNNING trials whose heartbeat stopped (their worker died); re-queue them only
    if the budget still needs them, else a queued copy would wait for a worker that never comes.

    Optuna does this only when a worker asks for a trial: once the budget is spent nobody asks,
    and the trial would stay RUNNING for ever (and `study copy` refuse the study). ``why_not``
    tells the log why a failed trial is not re-queued.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        if requeue:
            optuna.storages.fail_stale_trials(study)
            return
    storage = study._storage
    for trial_id in stale_trial_ids(study):
        with suppress(optuna.exceptions.UpdateFinishedTrialError):  # another process did it
            if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                trial = storage.get_trial(trial_id)
                _logger.warning(
                    "trial %d (worker %s) sent no heartbeat for the grace period: failed, "
                    "not re-queued (%s)",
                    trial.number,
                    trial.user_attrs.get(WORKER_ATTR, "?"),
                    why_not,
                )


def requeue_cut_short(study: optuna.Study, trial_id: int) -> None:
    """Re-queue at once a trial a storage outage cut short: its worker knows it is lost, so it
    need not wait for the grace period. Still RUNNING (its result could not be written), it is
    failed first; FAIL already (Optuna failed it on the error), it is queued unless a copy is.
    While the outage lasted, other workers may have taken the budget's trials: the copy is
    queued only while the budget's gate leaves room for it."""
    storage = study._storage
    trial = storage.get_trial(trial_id)
    if trial.state == TrialState.RUNNING:
        try:
            if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                return
        except optuna.exceptions.UpdateFinishedTrialError:
            return  # it ended after all, or another worker failed it as stale
        trial = storage.get_trial(trial_id)
    elif trial.state != TrialState.FAIL or any(
        t.system_attrs.get("retry_history", [])[-1:] == [trial.number]
        for t in study.get_trials(deepcopy=False)
    ):
        return
    callback = storage.get_heartbeat_stale_trial_callback()
    if isinstance(callback, RequeueStaleTrials):
        callback(study, trial, why="was cut short by a storage error")
