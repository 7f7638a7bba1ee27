"""A worker: takes trials of one study until the budget is spent, a limit is hit, or a signal."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

from hyperscan.runcard import ScanRuncard
from hyperscan.scan._objective import Objective, WorkerStopping
from hyperscan.scan._storage import load_study, open_storage
from hyperscan.scan._study import open_study

# Trials that count against the study budget; FAIL ones are retried, so they do not.
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def make_sampler(runcard: ScanRuncard, salt: int) -> optuna.samplers.BaseSampler:
    """The runcard's sampler. `salt` (e.g. the process id) keeps parallel workers with the
    same study seed from proposing identical trials."""
    section = runcard.scan.sampler
    seed = None
    if section.seed is not None:
        seed = int(np.random.SeedSequence([section.seed, salt]).generate_state(1)[0])
    if section.name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if section.name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if section.name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    # constant_liar: running trials count as bad guesses, so parallel workers spread out.
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


def make_pruner(runcard: ScanRuncard) -> optuna.pruners.BasePruner:
    section = runcard.scan.pruner
    if section.name == "none":
        return optuna.pruners.NopPruner()
    if section.name == "hyperband":
        steps_per_report = runcard.training.steps_per_call * section.report_every
        return optuna.pruners.HyperbandPruner(
            min_resource=steps_per_report, max_resource=max(runcard.epochs, steps_per_report)
        )
    return optuna.pruners.MedianPruner(
        n_warmup_steps=section.warmup_reports
        * runcard.training.steps_per_call
        * section.report_every
    )


@dataclass(frozen=True)
class WorkerReport:
    trials: int  # trials this worker finished or handed back
    stopped_by_signal: bool
    budget_reached: bool


def finished_trials(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM/SIGINT set `stop`: the running trial ends at its next sync, then the worker."""
    handled = (signal.SIGTERM, signal.SIGINT)
    previous = {sig: signal.getsignal(sig) for sig in handled}

    def request_stop(signum, frame):
        stop.set()

    for sig in handled:
        signal.signal(sig, request_stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_worker(
    study_name: str,
    storage_url: str | None,
    *,
    n_trials: int | None = None,
    timeout: float | None = None,
    heartbeat_interval: int = 60,
    grace_period: int = 600,
    on_trial: Callable[[optuna.trial.FrozenTrial], None] | None = None,
) -> WorkerReport:
    """Run trials of `study_name` until its budget, `n_trials`, `timeout` or a signal."""
    storage = open_storage(
        storage_url, heartbeat_interval=heartbeat_interval, grace_period=grace_period
    )
    setup = open_study(storage, study_name)
    runcard = setup.runcard
    study = load_study(
        storage,
        study_name,
        sampler=make_sampler(runcard, salt=os.getpid()),
        pruner=make_pruner(runcard),
    )
    budget = runcard.scan.trials
    if finished_trials(study) >= budget:
        return WorkerReport(0, stopped_by_signal=False, budget_reached=True)

    stop = threading.Event()
    objective = Objective(runcard, setup.problem, stop)
    done = 0

    def after_trial(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        nonlocal done
        done += 1
        if on_trial is not None:
            on_trial(trial)
        if stop.is_set():
            study.stop()

    with stop_on_signals(stop):
        study.optimize(
            objective,
            n_trials=n_trials,
            timeout=timeout,
            catch=(WorkerStopping,),
            callbacks=[MaxTrialsCallback(budget, states=FINISHED), after_trial],
            gc_after_trial=True,
        )
    return WorkerReport(
        done,
        stopped_by_signal=stop.is_set(),
        budget_reached=finished_trials(study) >= budget,
    )
