"""`hyperscan scan`: one machine, the embedded storage, N worker processes, a live summary."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import optuna
from optuna.trial import TrialState

from hyperscan.scan._status import state_counts
from hyperscan.scan._trial_attrs import repeated, requeued, trashed
from hyperscan.scan.storage import (
    STORAGE_ENV,
    describe_error,
    resolve_url,
    transient_error,
    trial_id,
)

POLL_SECONDS = 1.0


def trial_line(trial: optuna.trial.FrozenTrial, with_params: bool = True) -> str:
    """One line per finished trial for the live summary; a worker, which gave the trial's
    values as it started it, leaves them out."""
    seconds = trial.user_attrs.get("fit", {}).get("seconds")
    took = f" in {seconds:.0f} s" if seconds is not None else ""
    if trial.state == TrialState.COMPLETE:
        params = f" {trial.params}" if with_params else ""
        return f"trial {trial.number}: {trial.value:.4f}{took}{params}"
    if trashed(trial):
        return f"trial {trial.number}: trashed{took}: {trashed(trial)}"
    if requeued(trial):
        return f"trial {trial.number}: re-queued (its worker stopped)"
    return f"trial {trial.number}: {trial.state.name.lower()}{took}"


def trial_start_line(trial: optuna.Trial, params: dict) -> str:
    """The line a worker prints as it starts a trial: a long fit's log is not silent."""
    system_attrs = trial.storage.get_trial_system_attrs(trial_id(trial))
    repeats = repeated(trial.user_attrs, system_attrs)
    again = f" (retry of trial {repeats[0]})" if repeats is not None else ""
    return f"trial {trial.number} started{again}: {params}"


def usable_cores() -> int:
    """The cores this process may run on (a batch job's share, not the node's count)."""
    return len(os.sched_getaffinity(0))


def start_workers(
    study: str, url: str, workers: int, threads: int | None = None
) -> list[subprocess.Popen]:
    """Worker processes sharing the cores, unless the runcard pins their ``threads``; the URL
    travels in the environment, not argv. Numbered: worker k salts the sampler seed with k, so
    a scan with one worker draws the same trials when run again.

    ``-P``: the workers import hyperscan as the ``hyperscan`` command does, not from the working
    folder, which ``-m`` would put first on sys.path: a scan run in a checkout (or any folder
    holding a ``hyperscan`` package) would fit its trials with that code, not the installed one."""
    threads = threads or max(1, usable_cores() // workers)
    env = {**os.environ, STORAGE_ENV: resolve_url(url)}
    command = [sys.executable, "-P", "-m", "hyperscan", "worker", "--study", study]
    command += ["--threads", str(threads), "--quiet"]
    return [
        subprocess.Popen([*command, "--sampler-salt", str(k)], env=env, stdout=subprocess.DEVNULL)
        for k in range(workers)
    ]


def supervise(
    processes: list[subprocess.Popen],
    study: optuna.Study,
    echo: Callable[[str], None],
    url: str,
    finished_before: Iterable[int] = (),
) -> tuple[list[int], bool]:
    """Print each trial as it starts and as it finishes until every worker exits.

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
                        echo(f"{describe_error(error, url)}; the workers wait for it")
                    unreachable, trials = True, []
                else:
                    unreachable = False
                for trial in trials:
                    if trial.state == TrialState.RUNNING and trial.number not in started:
                        started.add(trial.number)
                        echo(f"trial {trial.number} started")
                    elif trial.state.is_finished() and trial.number not in shown:
                        shown.add(trial.number)
                        echo(trial_line(trial))
                if all(p.poll() is not None for p in processes):
                    return [p.returncode for p in processes], stopping
                time.sleep(POLL_SECONDS)
            except KeyboardInterrupt:
                if not stopping:
                    echo("stopping: the running trials end at their next sync and are re-queued")
                    stopping = True
                    for process in processes:
                        if process.poll() is None:
                            process.send_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def counts_line(study: optuna.Study) -> str:
    """The study's trials by state in a line, trashed apart from pruned ("" when it has none).
    It reads the storage: callers read inside :func:`explained_storage_errors`."""
    counts = state_counts(study.get_trials(deepcopy=False))
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))


def default_output(name: str) -> Path:
    """Where `hyperscan scan` writes the best trial's fit runcard without ``--output``: named
    after the study, so scans of different studies in one folder do not overwrite each other."""
    return Path(f"{name}-best.yml")
