"""A trial's two halves around its fit, and its fit's sync hook: the drawn values and fit
runcard before, the score recorded and the ending decided after (scan/_lifecycle.py)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import optuna

from hyperscan.data import Problem
from hyperscan.fit import DIVERGED, FitResult, SyncReport
from hyperscan.runcard import FitRuncard, RuncardError, ScanRuncard
from hyperscan.scan._lifecycle import ENDINGS, Ending, ending_of
from hyperscan.scan._trial_attrs import (
    REQUEUED_ATTR,
    RETRY_OF_ATTR,
    TRASHED_ATTR,
    WORKER_ATTR,
    worker_id,
)
from hyperscan.scan.storage import record_with_retries
from hyperscan.score import Scoring, score


class Trashed(Exception):
    """The drawn values make no valid fit runcard: the trial is trashed before its fit."""


class Objective:
    """A study's trials, each in two halves around its fit: :meth:`start` and :meth:`finish`,
    with a :class:`Monitor` per trial as its fit's sync hook."""

    def __init__(
        self,
        runcard: ScanRuncard,
        problem: Problem,
        stop: threading.Event,
        on_start: Callable[[optuna.Trial, dict], None] | None = None,
    ) -> None:
        self.runcard = runcard
        self.problem = problem
        self.stop = stop
        self.on_start = on_start  # told of each trial with its drawn values, before its fit
        self.scoring = Scoring.of(runcard, problem)

    def start(self, trial: optuna.Trial) -> tuple[dict, FitRuncard]:
        """The first half of a trial, before its fit: its drawn values and fit runcard.

        Raises :class:`Trashed` (its drawn values stored on it) when they make no valid
        runcard."""
        trial.set_user_attr(WORKER_ATTR, worker_id())
        params = self.runcard.scan.space.suggest(trial)
        if self.on_start is not None:
            self.on_start(trial, params)
        try:
            return params, self.runcard.trial_runcard(params)
        except RuncardError as error:
            # Each value was checked alone when the study was created; together they can still
            # break a rule (a drawn positivity.max below a drawn initial). A region for the
            # sampler to learn to avoid, as divergence is, not a reason to stop the worker.
            raise Trashed(f"the drawn values make no valid fit runcard: {error}") from None

    def finish(
        self,
        trial: optuna.Trial,
        params: dict,
        result: FitResult | None,
        monitor: Monitor,
        trash_reason: str | None = None,
    ) -> tuple[Ending, list[float] | None]:
        """The second half of a trial, after its fit (None: trashed before it, for
        ``trash_reason``): how it ended, and its values if it completed. What the ending
        asks is done here: the attributes recorded, or a copy queued for another worker."""
        if result is None:
            trial.set_user_attr(TRASHED_ATTR, trash_reason)
            return ending_of(trashed=True), None
        # A stop at the fit's last sync, or after it (while its results were computed), cut
        # nothing short: the trial is recorded, not thrown away and fitted again elsewhere.
        stopped = monitor.stopped and result.interrupted
        scored = None if stopped else score(result, self.scoring, pruned=monitor.pruned)
        reason = None if scored is None else scored.trash_reason
        ending = ending_of(stopped=stopped, trashed=reason is not None, pruned=monitor.pruned)
        if ENDINGS[ending].requeued:
            trial.study.enqueue_trial(params, user_attrs={RETRY_OF_ATTR: trial.number})
            trial.set_user_attr(REQUEUED_ATTR, True)
        if scored is not None and ENDINGS[ending].recorded:
            attrs = scored.attrs | ({TRASHED_ATTR: reason} if reason else {})
            values = scored.values if ending is Ending.COMPLETE else None
            # A multi-objective study is told every objective's value, in order.
            value = values if values is None or self.runcard.scan.objective.multi else values[0]
            # Hours of fit are not thrown away for seconds of outage: the result waits on
            # disk, and its writes are retried, until the database takes them.
            record_with_retries(
                trial,
                {"study": trial.study.study_name, "number": trial.number, "params": params}
                | {"value": value, "user_attrs": attrs},
            )
            for key, attr in attrs.items():  # a handful of writes
                trial.set_user_attr(key, attr)
            return ending, values
        return ending, None


class Monitor:
    """The fit's sync hook: intermediate reports for pruning, early trash, worker stop."""

    def __init__(self, objective: Objective, trial: optuna.Trial) -> None:
        self.objective = objective
        self.trial = trial
        self.syncs = 0
        self.pruned = False
        self.stopped = False  # the worker's stop ended the fit

    def __call__(self, report: SyncReport) -> bool:
        self.syncs += 1
        if self.objective.stop.is_set():
            self.stopped = True
            return True
        scan = self.objective.runcard.scan
        if int((report.status == DIVERGED).sum()) > scan.divergence.max_diverged:
            return True  # trashed anyway: stop spending compute on it
        if scan.objective.multi or self.syncs % scan.pruner.report_every:
            return False  # Optuna takes no reports in a multi-objective study
        value = self.objective.scoring.interim_value(report)
        if math.isfinite(value):
            self.trial.report(value, step=report.step)
            if self.trial.should_prune():
                self.pruned = True
                return True
        return False
