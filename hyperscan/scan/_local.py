"""`hyperscan scan`: one machine, the embedded storage, N worker processes, a live summary."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import Any

import optuna
from optuna.trial import TrialState

from hyperscan._tensorflow import DEFAULT_MAX_GROWTH_MIB, configure_tensorflow
from hyperscan.runcard import Slots
from hyperscan.scan._limits import trial_duration
from hyperscan.scan._trial_attrs import repeated, requeued, trashed
from hyperscan.scan.storage import (
    describe_error,
    transient_error,
    trial_id,
)

POLL_SECONDS = 1.0
#: A worker's exit status when its memory outgrew DEFAULT_MAX_GROWTH_MIB: start a fresh one
#: (EX_TEMPFAIL: a temporary condition, the work goes on).
RESTART_EXIT = 75
_RESTARTED = (
    f"worker %d restarted: its memory grew by more than {DEFAULT_MAX_GROWTH_MIB} MiB since its "
    "first trial (TensorFlow keeps every model it compiled)"
)
#: The workers' heartbeat settings from the environment, as `hyperscan worker` takes them.
WORKER_TIMING_ENV = {
    "heartbeat_interval": "HYPERSCAN_HEARTBEAT_INTERVAL",
    "grace_period": "HYPERSCAN_GRACE_PERIOD",
}


@dataclass(frozen=True)
class TrialRecord:
    """A trial as a live summary shows it, starting or finished."""

    number: int
    #: complete, pruned, trashed, fail, running or waiting (trashed apart from pruned).
    state: str
    value: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: From the trial's start to its end, for a trial whose fit ran: the fit, its scoring and
    #: its writes (a slot's trial also waits for others ending at the same sync), not the fit
    #: alone, which would hide them.
    seconds: float | None = None
    trashed: str | None = None  # why it was trashed
    requeued: bool = False  # failed because its worker stopped, and queued again
    retry_of: int | None = None  # the trial a queued trial repeats
    #: A complete trial's values, one per objective, in a multi-objective study (``value``
    #: is None there).
    values: tuple[float, ...] | None = None


def trial_record(trial: optuna.trial.FrozenTrial) -> TrialRecord:
    """A finished (or running) trial as plain data."""
    reason = trashed(trial)
    repeats = repeated(trial.user_attrs, trial.system_attrs)
    complete = trial.state == TrialState.COMPLETE
    return TrialRecord(
        number=trial.number,
        state="trashed"
        if reason and trial.state == TrialState.PRUNED
        else trial.state.name.lower(),
        value=trial.values[0] if complete and len(trial.values) == 1 else None,
        values=tuple(trial.values) if complete and len(trial.values) > 1 else None,
        params=dict(trial.params),
        seconds=trial_duration(trial) if "fit" in trial.user_attrs else None,
        trashed=reason,
        requeued=requeued(trial),
        retry_of=None if repeats is None else repeats[0],
    )


def started_record(trial: optuna.Trial, params: dict[str, Any]) -> TrialRecord:
    """A trial a worker starts, with its drawn values and the trial it repeats, if any."""
    system_attrs = trial.storage.get_trial_system_attrs(trial_id(trial))
    repeats = repeated(trial.user_attrs, system_attrs)
    return TrialRecord(
        number=trial.number,
        state="running",
        params=dict(params),
        retry_of=None if repeats is None else repeats[0],
    )


@dataclass(frozen=True)
class ScanEvent:
    """What :func:`supervise` tells as the scan goes: ``trial started`` (its values not yet
    drawn) and ``trial ended`` with ``trial``; ``storage unreachable`` with ``message``, the
    cause (said once per outage); ``worker restarted`` with ``message``, which one and why;
    ``stopping`` on Ctrl-C or SIGTERM."""

    kind: str
    trial: TrialRecord | None = None
    message: str = ""


def usable_cores() -> int:
    """The cores this process may run on (a batch job's share, not the node's count)."""
    return len(os.sched_getaffinity(0))


def worker_starter(
    study: str, url: str, workers: int, threads: int | None = None, slots: Slots = 1
) -> Callable[[int], BaseProcess]:
    """What starts worker k of ``workers`` sharing the cores (unless the runcard pins their
    ``threads``), a process running :func:`worker_process`; again, once it outgrew its memory
    (:data:`RESTART_EXIT`). Numbered: worker k salts the sampler seed with k, so a scan with
    one worker draws the same trials when run again. Each fits ``slots`` trials at once.

    Spawned, not forked: each worker imports TensorFlow itself, configured for its share of
    the cores, and imports hyperscan from the caller's own ``sys.path``, never from the
    working folder (a checkout of another version there would fit the trials otherwise). The
    URL travels through the process's pipe, not argv."""
    threads = threads or max(1, usable_cores() // workers)
    spawn = multiprocessing.get_context("spawn")

    def start(number: int) -> BaseProcess:
        process = spawn.Process(
            target=worker_process,
            args=(study, url, threads, slots, number),
            name=f"worker {number}",
        )
        process.start()
        return process

    return start


def worker_process(study: str, url: str, threads: int, slots: Slots, salt: int) -> None:
    """One worker of `hyperscan scan`, in a process of its own: TensorFlow configured, the
    study opened and worked until its budget or a signal (SIGTERM while it starts ends it,
    exit 0). A mistake in the study or the storage exits 2 with its message in one line. Its
    memory grown past :data:`DEFAULT_MAX_GROWTH_MIB` with trials left, it exits
    :data:`RESTART_EXIT` for the scan to start a fresh one."""
    from hyperscan.scan._api import ScanError, StorageError, open_study

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        configure_tensorflow(threads=threads)
        # as `hyperscan worker` reads them, for a scan's workers to match a cluster's
        timing = {
            key: int(os.environ[variable])
            for key, variable in WORKER_TIMING_ENV.items()
            if os.environ.get(variable)
        }
        handle = open_study(study, url, wait=True, **timing)
        report = handle.run_worker(
            sampler_salt=salt, slots=slots, max_growth_mib=DEFAULT_MAX_GROWTH_MIB
        )
    except KeyboardInterrupt:
        return
    except (ScanError, StorageError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    if report.outgrown_only:
        sys.exit(RESTART_EXIT)


def supervise(
    processes: list[BaseProcess],
    study: optuna.Study,
    on_event: Callable[[ScanEvent], None],
    url: str,
    finished_before: Iterable[int] = (),
    restart: Callable[[int], BaseProcess] | None = None,
) -> tuple[list[int], bool]:
    """Tell each trial as it starts and as it finishes until every worker exits.

    ``finished_before``: the numbers of the trials that had finished when the workers started
    (a resumed study's), which are not listed again: a study of thousands of trials would
    print them all before the first new one. ``restart(k)`` starts worker k afresh once it
    exited :data:`RESTART_EXIT`.

    Ctrl-C or SIGTERM (a batch system's) stops the workers cleanly: their running trials end
    at the next sync and are re-queued. A storage outage is waited out, as the workers wait
    it out. Returns the workers' exit codes and whether they were stopped so.
    """
    shown = set(finished_before)
    started: set[int] = set()  # numbers only: a starting trial's values are still being drawn
    stopping = unreachable = False
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        while True:
            try:
                try:
                    trials = study.get_trials(deepcopy=False)
                except Exception as error:
                    if not transient_error(error):
                        raise
                    if not unreachable:
                        on_event(
                            ScanEvent(
                                "storage unreachable", message=str(describe_error(error, url))
                            )
                        )
                    unreachable, trials = True, []
                else:
                    unreachable = False
                for trial in trials:
                    if trial.state == TrialState.RUNNING and trial.number not in started:
                        started.add(trial.number)
                        on_event(ScanEvent("trial started", TrialRecord(trial.number, "running")))
                    elif trial.state.is_finished() and trial.number not in shown:
                        shown.add(trial.number)
                        on_event(ScanEvent("trial ended", trial_record(trial)))
                for number, process in enumerate(processes):
                    if process.exitcode == RESTART_EXIT and restart is not None and not stopping:
                        processes[number] = restart(number)
                        on_event(ScanEvent("worker restarted", message=_RESTARTED % number))
                if not any(p.is_alive() for p in processes):
                    return [p.exitcode for p in processes], stopping
                time.sleep(POLL_SECONDS)
            except KeyboardInterrupt:
                if not stopping:
                    on_event(ScanEvent("stopping"))
                    stopping = True
                    for process in processes:
                        if process.is_alive():
                            process.terminate()  # SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
