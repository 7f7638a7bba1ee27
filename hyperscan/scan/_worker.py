"""A worker: takes trials of one study until the budget is spent, a limit is hit, or a signal."""

from __future__ import annotations

import logging
import os
import socket
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import optuna
from optuna.storages import BaseStorage

from hyperscan.data import Problem
from hyperscan.fit import TrialBatch, stop_on_signals
from hyperscan.runcard import ScanRuncard
from hyperscan.scan._limits import WorkerLimits
from hyperscan.scan._objective import Objective
from hyperscan.scan._quiet import quiet_optuna
from hyperscan.scan._scheduler import OneTrial, Runner, run_trials
from hyperscan.scan._status import finished_trials
from hyperscan.scan._study import StudySetup, open_study, study_problem
from hyperscan.scan._worker_report import WorkerReport
from hyperscan.scan.storage import (
    STORAGE_RETRY_WAITS,
    explained_storage_errors,
    fail_stale_trials,
    gate_takes,
    load_study,
    retrying,
    storage_probe,
    storage_url,
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
    """The process id, the host and the trials the study holds when the worker starts (a
    worker that restarted itself, keeping its process id, draws anew); or, for a numbered
    worker, its number and those trials: a new study draws the same trials again, a resumed
    one new ones.

    The host too, because the workers of `docker compose --scale` all run as the same process
    id in their containers (and would draw the very same trials), as cluster nodes'
    workers may."""
    held = len(study.get_trials(deepcopy=False))
    if number is None:
        return (os.getpid(), zlib.crc32(socket.gethostname().encode()), held)
    return (number, held)


@quiet_optuna()
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
    max_growth_mib: float | None = None,
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

    `max_growth_mib`: take no trial once this process's memory grew by more than this since
    its first trial ended (the report's ``grown_mib`` says so), for the caller to go on in a
    fresh process: TensorFlow keeps every loop XLA compiled until its process ends.
    """
    url = storage_url(storage)
    with explained_storage_errors(storage):
        if setup is None:
            setup = retrying(
                lambda: open_study(storage, study_name),
                "worker start-up",
                url,
                waits=STORAGE_RETRY_WAITS,
                probe=storage_probe(storage),
            )
        problem = study_problem(setup) if problem is None else problem
        runcard = setup.runcard
        # A burst of workers (a SLURM array) may meet a full connection limit or a restart.
        study, finished = retrying(
            lambda: _start(storage, study_name, runcard, sampler_salt),
            "worker start-up",
            url,
            waits=STORAGE_RETRY_WAITS,
            probe=storage_probe(storage),
        )
        stop = threading.Event()
        limits = WorkerLimits(
            study,
            runcard.scan.trials,
            stop,
            n_trials=n_trials,
            timeout=timeout,
            stop_after=stop_after,
            url=url,
            on_trial=on_trial,
            max_growth_mib=max_growth_mib,
        )
        if finished >= limits.budget or limits.out_of_walltime():
            return limits.report()
    if slots == 1:
        runner: Runner = OneTrial(problem)
    else:
        reserve = runcard.scan.space.widest(runcard.trial_base)
        runner = TrialBatch(runcard.trial_base, problem, slots, reserve=reserve)
    objective = Objective(runcard, problem, stop, on_start)
    gate_takes(study, limits.room_for_one)
    with stop_on_signals(stop), _gate_removed(study), explained_storage_errors(storage):
        spent = run_trials(study, objective, runner, limits)
    with explained_storage_errors(storage):
        return limits.report(spent)


def _start(
    storage: BaseStorage, study_name: str, runcard: ScanRuncard, sampler_salt: int | None
) -> tuple[optuna.Study, int]:
    """The study as this worker works it, with its pruner and sampler, and its finished
    trials; a dead worker's trials failed, and re-queued while the budget needs them."""
    study = load_study(storage, study_name, pruner=make_pruner(runcard))
    # Its trials read through this study, whose cache the worker keeps: on PostgreSQL, a
    # study of thousands of trials takes seconds to load.
    study.sampler = make_sampler(runcard, _salt(study, sampler_salt))
    finished = finished_trials(study)  # failing stale trials does not change it
    fail_stale_trials(study, requeue=finished < runcard.scan.trials)
    return study, finished


@contextmanager
def _gate_removed(study: optuna.Study) -> Iterator[None]:
    """The budget's gate on the study's storage until the worker's loop ends (the storage may
    serve another study after it)."""
    try:
        yield
    finally:
        gate_takes(study, None)
