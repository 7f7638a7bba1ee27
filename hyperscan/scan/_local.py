"""`hyperscan scan`: one machine, the embedded storage, N worker processes, a live summary."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from hyperscan.scan._trial_attrs import repeated, requeued, trashed
from hyperscan.scan.storage import (
    STORAGE_ENV,
    describe_error,
    resolve_url,
    transient_error,
    trial_id,
)

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class TrialRecord:
    """A trial as a live summary shows it, starting or finished."""

    number: int
    #: complete, pruned, trashed, fail, running or waiting (trashed apart from pruned).
    state: str
    value: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None  # the fit's, when it ran to the end
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
        seconds=trial.user_attrs.get("fit", {}).get("seconds"),
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
    cause (said once per outage); ``stopping`` on Ctrl-C or SIGTERM."""

    kind: str
    trial: TrialRecord | None = None
    message: str = ""


def usable_cores() -> int:
    """The cores this process may run on (a batch job's share, not the node's count)."""
    return len(os.sched_getaffinity(0))


def start_workers(
    study: str, url: str, workers: int, threads: int | None = None, slots: int | str = 1
) -> list[subprocess.Popen]:
    """Worker processes sharing the cores, unless the runcard pins their ``threads``; the URL
    travels in the environment, not argv. Numbered: worker k salts the sampler seed with k, so
    a scan with one worker draws the same trials when run again. Each fits ``slots`` trials at
    once (an int, or "auto").

    ``-P``: the workers import hyperscan as the ``hyperscan`` command does, not from the working
    folder, which ``-m`` would put first on sys.path: a scan run in a checkout (or any folder
    holding a ``hyperscan`` package) would fit its trials with that code, not the installed one."""
    threads = threads or max(1, usable_cores() // workers)
    env = {**os.environ, STORAGE_ENV: resolve_url(url)}
    command = [sys.executable, "-P", "-m", "hyperscan", "worker", "--study", study]
    command += ["--threads", str(threads), "--slots", str(slots), "--quiet"]
    return [
        subprocess.Popen([*command, "--sampler-salt", str(k)], env=env, stdout=subprocess.DEVNULL)
        for k in range(workers)
    ]


def supervise(
    processes: list[subprocess.Popen],
    study: optuna.Study,
    on_event: Callable[[ScanEvent], None],
    url: str,
    finished_before: Iterable[int] = (),
) -> tuple[list[int], bool]:
    """Tell each trial as it starts and as it finishes until every worker exits.

    ``finished_before``: the numbers of the trials that had finished when the workers started
    (a resumed study's), which are not listed again: a study of thousands of trials would
    print them all before the first new one.

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
                if all(p.poll() is not None for p in processes):
                    return [p.returncode for p in processes], stopping
                time.sleep(POLL_SECONDS)
            except KeyboardInterrupt:
                if not stopping:
                    on_event(ScanEvent("stopping"))
                    stopping = True
                    for process in processes:
                        if process.poll() is None:
                            process.send_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
