"""A worker: takes trials of one study until the budget is spent, a limit is hit, or a signal."""

from __future__ import annotations

import logging
import os
import socket
import statistics
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import numpy as np
import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from hyperscan.data import Problem
from hyperscan.fit import TrialBatch, stop_on_signals
from hyperscan.runcard import ScanRuncard
from hyperscan.scan._objective import Objective
from hyperscan.scan._scheduler import OneTrial, run_trials
from hyperscan.scan._status import finished_trials
from hyperscan.scan._study import StudySetup, open_study, stored_budget, study_problem
from hyperscan.scan._trial_attrs import requeued as was_requeued
from hyperscan.scan._worker_report import WorkerReport
from hyperscan.scan.storage import (
    STORAGE_RETRY_WAITS,
    describe_error,
    explained_storage_errors,
    fail_stale_trials,
    gate_takes,
    load_study,
    retrying,
    storage_url,
    transient_error,
)

_logger = logging.getLogger(__name__)


def make_sampler(runcard: ScanRuncard, salt: int | tuple[int, ...]) -> optuna.samplers.BaseSampler:
    """The runcard's sampler. `salt` (e.g. the process id) keeps parallel workers with the
    same study seed from proposing identical trials."""
    section = runcard.scan.sampler
    seed = None
    if section.seed is not None:
        salts = salt if isinstance(salt, tuple) else (salt,)
        seed = int(np.random.SeedSequence([section.seed, *salts]).generate_state(1)[0])
    if section.name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if section.name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if section.name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    if section.name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    # constant_liar: running trials count as bad guesses, so parallel workers spread out.
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


def make_pruner(runcard: ScanRuncard) -> optuna.pruners.BasePruner:
    """The scan's pruner, built from the runcard alone so that every worker prunes alike; its
    steps are training steps, as the worker reports them (every ``report_every`` syncs)."""
    section = runcard.scan.pruner
    if section.name == "none":
        return optuna.pruners.NopPruner()
    steps_per_report = runcard.fit.training.steps_per_call * section.report_every
    if section.name == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=steps_per_report, max_resource=max(runcard.fit.epochs, steps_per_report)
        )
    # Report n comes at step n · steps_per_report, and Optuna may prune from the step
    # n_warmup_steps on: one step past the last warm-up report.
    return optuna.pruners.MedianPruner(n_warmup_steps=section.warmup_reports * steps_per_report + 1)


def _salt(study: optuna.Study, number: int | None) -> tuple[int, ...]:
    """The process id and the host; or, for a numbered worker, its number and the trials the
    study holds when it starts: a new study draws the same trials again, a resumed one new ones.

    The host too, because the workers of `docker compose --scale` all run as the same process
    id in their containers (and would draw the very same trials), as cluster nodes'
    workers may."""
    if number is None:
        return (os.getpid(), zlib.crc32(socket.gethostname().encode()))
    return (number, len(study.get_trials(deepcopy=False)))


def trial_seconds(trials: Iterable[optuna.trial.FrozenTrial]) -> list[float]:
    """Wall-clock durations of the COMPLETE trials among ``trials`` (pruned ones end early)."""
    return [
        (trial.datetime_complete - trial.datetime_start).total_seconds()
        for trial in trials
        if trial.state == TrialState.COMPLETE
        and trial.datetime_start is not None
        and trial.datetime_complete is not None
    ]


def expected_trial_seconds(own: list[float], study: list[float]) -> float | None:
    """The median duration of a complete trial: this worker's own if it completed any (its
    hardware), else the study's; None before any trial of the study completed."""
    durations = own or study
    return statistics.median(durations) if durations else None


def trial_fits(seconds_left: float, expected: float | None) -> bool:
    """Whether to take another trial with ``seconds_left`` of walltime."""
    return seconds_left > 0 and (expected is None or expected <= seconds_left)


def run_worker(
    study_name: str,
    storage: BaseStorage,
    *,
    n_trials: int | None = None,
    timeout: float | None = None,
    stop_after: float | None = None,
    on_trial: Callable[[optuna.trial.FrozenTrial], None] | None = None,
    on_start: Callable[[optuna.Trial, dict], None] | None = None,
    setup: StudySetup | None = None,
    sampler_salt: int | None = None,
    slots: int = 1,
    problem: Problem | None = None,
) -> WorkerReport:
    """Run trials of `study_name` until its budget, `n_trials`, `timeout` or a signal.

    `storage` as :func:`open_storage` opened it, with the heartbeat settings of the worker: the
    caller may have read the study's runcard from it already (one connection, one replay), and
    passes what it read as `setup`, so the runcard is not parsed twice.

    `stop_after` (seconds from now, a batch job's walltime): take no trial that is not expected
    to end in the time left (see :func:`expected_trial_seconds`). With slots, so is every trial
    a freed slot takes (its expected time measured on trials fitted with others), so the worker
    ends with its longest slot, within the walltime.

    `on_start` is told of each trial and its drawn values as its fit starts, `on_trial` of each
    trial as it ends.

    `sampler_salt` sets this worker apart from the others (see :func:`make_sampler`): the
    workers of `hyperscan scan` are numbered, so that one worker draws the same trials again;
    by default, the process id.

    `slots` > 1 fits that many trials at once in one model (:class:`~hyperscan.fit.TrialBatch`):
    a trial is told as soon as it ends, and its slot refilled. `problem`: the study's data, if
    the caller built them already (:func:`study_problem`).
    """
    if slots < 1:
        raise ValueError(f"slots must be at least 1, not {slots}")
    deadline = None if stop_after is None else time.monotonic() + stop_after
    url = storage_url(storage)
    with explained_storage_errors(storage):
        if setup is None:
            setup = retrying(
                lambda: open_study(storage, study_name),
                "worker start-up",
                url,
                waits=STORAGE_RETRY_WAITS,
            )
        problem = study_problem(setup) if problem is None else problem
        runcard = setup.runcard

        def start() -> tuple[optuna.Study, int]:
            study = load_study(storage, study_name, pruner=make_pruner(runcard))
            # Its trials read through this study, whose cache the worker keeps: on PostgreSQL,
            # a study of thousands of trials takes seconds to load.
            study.sampler = make_sampler(runcard, _salt(study, sampler_salt))
            finished = finished_trials(study)  # failing stale trials does not change it
            fail_stale_trials(study, requeue=finished < runcard.scan.trials)
            return study, finished

        # A burst of workers (a SLURM array) may meet a full connection limit or a restart.
        study, finished = retrying(start, "worker start-up", url, waits=STORAGE_RETRY_WAITS)
        budget = runcard.scan.trials
    if finished >= budget:
        return WorkerReport(0, stopped_by_signal=False, budget_reached=True)

    own: list[float] = []  # durations of this worker's complete trials
    walltime: dict[str, float | None] = {}  # set when the walltime stopped the worker

    def out_of_walltime() -> bool:
        if deadline is None:
            return False
        left = deadline - time.monotonic()
        study_durations = [] if own else trial_seconds(study.get_trials(deepcopy=False))
        expected = expected_trial_seconds(own, study_durations)
        if trial_fits(left, expected):
            return False
        walltime.update(expected=expected, left=max(left, 0.0))
        return True

    with explained_storage_errors(storage):
        if out_of_walltime():
            return _report(0, False, study, budget, walltime)

    stop = threading.Event()
    objective = Objective(runcard, problem, stop, on_start)
    done = requeued = 0

    storage_errors = 0  # consecutive ones, since the last trial that ended

    def budget_spent() -> bool:
        nonlocal budget
        budget = stored_budget(study) or budget  # raised or lowered while this worker ran
        return finished_trials(study) >= budget

    def ended(trial: optuna.trial.FrozenTrial) -> bool:
        """Count a trial this worker ended; whether to take no more."""
        nonlocal done, requeued, storage_errors
        done += 1
        requeued += was_requeued(trial)
        storage_errors = 0
        own.extend(trial_seconds([trial]))
        if on_trial is not None:
            on_trial(trial)
        return stop.is_set() or out_of_walltime()

    def dropped() -> None:
        nonlocal done
        _logger.warning(
            "trial result dropped: another worker failed the trial as stale (no "
            "heartbeat for the grace period) and re-queued it"
        )
        done += 1

    def wait_out(error: Exception) -> None:
        """Wait out a transient storage error (the database restarted, a connection dropped)
        on the retry schedule; raise it, explained, once the schedule is spent, and any other
        error as it is."""
        nonlocal storage_errors
        if not transient_error(error):
            raise error
        cause = describe_error(error, url)
        if storage_errors == len(STORAGE_RETRY_WAITS):
            raise cause from error
        wait = STORAGE_RETRY_WAITS[storage_errors]
        storage_errors += 1
        _logger.warning("%s; trying again in %d s", cause, wait)
        stop.wait(wait)

    def room_for_one(taken: int) -> bool:
        # Asked as a trial is taken, under the storage's lock: finished and running trials
        # count, so parallel workers stop at the budget, not past it.
        return taken < (stored_budget(study) or budget)

    started = time.monotonic()
    gate_takes(study, room_for_one)

    def may_take(in_flight: int) -> bool:
        return not (
            stop.is_set()
            or (n_trials is not None and done + in_flight >= n_trials)
            or (timeout is not None and time.monotonic() - started >= timeout)
            or out_of_walltime()
        )

    def told(trial: optuna.trial.FrozenTrial) -> bool:
        return ended(trial) | budget_spent()  # counted first, whatever the storage

    runner = (
        OneTrial(problem)
        if slots == 1
        else TrialBatch(
            runcard.trial_base,
            problem,
            slots,
            reserve=runcard.scan.space.widest(runcard.trial_base),
        )
    )
    with stop_on_signals(stop), _gate_removed(study):
        spent = run_trials(
            study,
            objective,
            runner,
            may_take=may_take,
            told=told,
            dropped=dropped,
            wait_out=wait_out,
        )
    with explained_storage_errors(storage):
        return _report(done, stop.is_set(), study, budget, walltime, requeued, spent)


@contextmanager
def _gate_removed(study: optuna.Study) -> Iterator[None]:
    """The budget's gate on the study's storage until the worker's loop ends (the storage may
    serve another study after it)."""
    try:
        yield
    finally:
        gate_takes(study, None)


def _report(
    done: int,
    signalled: bool,
    study: optuna.Study,
    budget: int,
    walltime: dict,
    requeued: int = 0,
    spent: bool = False,
) -> WorkerReport:
    return WorkerReport(
        done,
        stopped_by_signal=signalled,
        budget_reached=spent or finished_trials(study) >= budget,
        walltime_reached=bool(walltime),
        expected_trial_s=walltime.get("expected"),
        seconds_left=walltime.get("left"),
        requeued=requeued,
    )
