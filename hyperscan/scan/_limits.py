"""What ends a worker: its study's budget, its own trial count and timeout, a batch job's
walltime, its memory's growth, a signal, and storage outages past the retry schedule; held in
one object that the trial loop asks before each trial and tells after each."""

from __future__ import annotations

import logging
import os
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable

import optuna
from optuna.trial import FrozenTrial, TrialState

from hyperscan.scan._status import finished_trials
from hyperscan.scan._study import stored_budget
from hyperscan.scan._trial_attrs import requeued as was_requeued
from hyperscan.scan._worker_report import WorkerReport
from hyperscan.scan.storage import (
    STORAGE_RETRY_WAITS,
    describe_error,
    storage_probe,
    study_storage,
    transient_error,
    wait_for_storage,
)

_logger = logging.getLogger(__name__)


MIB = 2**20


def resident_bytes() -> int:
    """This process's resident memory now (Linux), else its peak (what the platform tells)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def trial_duration(trial: FrozenTrial) -> float | None:
    """Seconds from the trial's start to its end; None while it runs or waits."""
    if trial.datetime_start is None or trial.datetime_complete is None:
        return None
    return (trial.datetime_complete - trial.datetime_start).total_seconds()


def trial_seconds(trials: Iterable[FrozenTrial]) -> list[float]:
    """Wall-clock durations of the COMPLETE trials among ``trials`` (pruned ones end early)."""
    durations = (trial_duration(t) for t in trials if t.state == TrialState.COMPLETE)
    return [seconds for seconds in durations if seconds is not None]


def expected_trial_seconds(own: list[float], study: list[float]) -> float | None:
    """The median duration of a complete trial: this worker's own if it completed any (its
    hardware), else the study's; None before any trial of the study completed."""
    durations = own or study
    return statistics.median(durations) if durations else None


def trial_fits(seconds_left: float, expected: float | None) -> bool:
    """Whether to take another trial with ``seconds_left`` of walltime."""
    return seconds_left > 0 and (expected is None or expected <= seconds_left)


class WorkerLimits:
    """A worker's limits and its counts of the trials it ended.

    ``budget``: the study's trials, finished ones counted (re-read from the study, which may
    raise or lower it while the worker runs); ``n_trials``, ``timeout``: this worker's own;
    ``stop_after`` (seconds from now, a batch job's walltime): take no trial not expected to
    end in the time left; ``max_growth_mib``: take no trial once the process's memory grew by
    more than this since its first trial ended (TensorFlow keeps every loop XLA compiled, so a
    worker whose trials each compile their own grows without end; its caller restarts it);
    ``stop``: set by a signal; ``url``: the storage, as errors name it.
    """

    def __init__(
        self,
        study: optuna.Study,
        budget: int,
        stop: threading.Event,
        *,
        n_trials: int | None = None,
        timeout: float | None = None,
        stop_after: float | None = None,
        url: str = "",
        on_trial: Callable[[FrozenTrial], None] | None = None,
        max_growth_mib: float | None = None,
    ) -> None:
        self.study = study
        self.budget = budget
        self.stop = stop
        self.n_trials = n_trials
        self.timeout = timeout
        self.started = time.monotonic()
        self.deadline = None if stop_after is None else self.started + stop_after
        self.url = url
        self.on_trial = on_trial
        self.done = 0  # trials this worker ended, re-queued and dropped ones included
        self.requeued = 0
        self.own: list[float] = []  # durations of this worker's complete trials
        self.walltime: dict[str, float | None] = {}  # set when the walltime stopped the worker
        self.max_growth = None if max_growth_mib is None else max_growth_mib * MIB
        self.first_trial_bytes: int | None = None  # the memory after the first trial ended
        self.grown_mib: float | None = None  # set when the memory's growth stopped the worker
        self.storage_errors = 0  # consecutive ones, since the storage last took a write
        self.probe = storage_probe(study_storage(study))  # ends a wait once the database is back

    def out_of_walltime(self) -> bool:
        """Whether the next trial is not expected to end before the deadline."""
        if self.deadline is None:
            return False
        left = self.deadline - time.monotonic()
        study = [] if self.own else trial_seconds(self.study.get_trials(deepcopy=False))
        expected = expected_trial_seconds(self.own, study)
        if trial_fits(left, expected):
            return False
        self.walltime.update(expected=expected, left=max(left, 0.0))
        return True

    def may_take(self, in_flight: int) -> bool:
        """Whether to take another trial, with ``in_flight`` trials running."""
        return not (
            self.stop.is_set()
            or (self.n_trials is not None and self.done + in_flight >= self.n_trials)
            or (self.timeout is not None and time.monotonic() - self.started >= self.timeout)
            or self.out_of_walltime()
            or self.outgrown()
        )

    def outgrown(self) -> bool:
        """Whether the process's memory grew past ``max_growth_mib`` since its first trial."""
        if self.max_growth is None or self.first_trial_bytes is None:
            return False
        grown = resident_bytes() - self.first_trial_bytes
        if grown <= self.max_growth:
            return False
        self.grown_mib = grown / MIB
        return True

    def room_for_one(self, taken: int) -> bool:
        """The budget's gate, asked as a trial is taken under the storage's lock: finished and
        running trials count, so parallel workers stop at the budget, not past it."""
        return taken < (stored_budget(self.study) or self.budget)

    def budget_spent(self) -> bool:
        self.budget = stored_budget(self.study) or self.budget
        return finished_trials(self.study) >= self.budget

    def told(self, trial: FrozenTrial) -> bool:
        """Count a trial this worker told the study; whether to take no more."""
        self.done += 1
        self.requeued += was_requeued(trial)
        if self.first_trial_bytes is None and self.max_growth is not None:
            self.first_trial_bytes = resident_bytes()
        self.storage_answered()
        self.own.extend(trial_seconds([trial]))
        if self.on_trial is not None:
            self.on_trial(trial)
        ended = self.stop.is_set() or self.out_of_walltime()
        return ended | self.budget_spent()  # counted first, whatever the storage

    def storage_answered(self) -> None:
        """The storage took a write (a trial taken, re-queued): an outage is over, and the
        next one is waited out on the whole retry schedule."""
        self.storage_errors = 0

    def dropped(self) -> None:
        """Count a trial another worker failed as stale (its result dropped)."""
        _logger.warning(
            "trial result dropped: another worker failed the trial as stale (no "
            "heartbeat for the grace period) and re-queued it"
        )
        self.done += 1

    def wait_out(self, error: Exception) -> None:
        """Wait out a transient storage error (the database restarted, a connection dropped)
        on the retry schedule, a wait cut short once the database answers again; raise it,
        explained, once the schedule is spent, and any other error as it is."""
        if not transient_error(error):
            raise error
        cause = describe_error(error, self.url)
        if self.storage_errors == len(STORAGE_RETRY_WAITS):
            raise cause from error
        wait = STORAGE_RETRY_WAITS[self.storage_errors]
        self.storage_errors += 1
        _logger.warning("%s; trying again in %d s", cause, wait)
        wait_for_storage(wait, self.probe, self.stop)

    def report(self, spent: bool = False) -> WorkerReport:
        """How the worker ended; ``spent``: the budget's gate refused a trial."""
        return WorkerReport(
            self.done,
            stopped_by_signal=self.stop.is_set(),
            budget_reached=spent or finished_trials(self.study) >= self.budget,
            walltime_reached=bool(self.walltime),
            expected_trial_s=self.walltime.get("expected"),
            seconds_left=self.walltime.get("left"),
            requeued=self.requeued,
            grown_mib=self.grown_mib,
        )
