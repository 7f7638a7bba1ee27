# SPDX-License-Identifier: GPL-3.0-or-later
"""Worker processes on one study, as users run them: in parallel, killed, paused past the
grace period, stopped by SIGTERM, and going on past diverging trials.
"""

from __future__ import annotations

import fcntl
import math
import os
import re
import signal
import time
import warnings
from pathlib import Path

import optuna
import pytest
from _service import (
    ADAM,
    DIVERGENCE_REASON,
    GRACE_PERIOD,
    HEARTBEAT_INTERVAL,
    PARALLEL,
    SGD_DIVERGING,
    Worker,
    assert_clean_failure,
    assert_nothing_lost,
    by_state,
    cli,
    create,
    long_card,
    scan_card,
    trials_of,
    worker_done,
    write_card,
)
from _waiting import wait_for
from optuna.trial import FrozenTrial, TrialState

from hyperscan.cli._render import trial_line
from hyperscan.runcard import load_fit_runcard
from hyperscan.scan import open_storage
from hyperscan.scan._local import trial_record
from hyperscan.scan.storage import load_study


def _budget_card(budget: int) -> dict:
    """Trials that complete, diverge (trashed) or are pruned: each ends its own way."""
    return scan_card(
        scan={
            "trials": budget,
            "space": {"optimizer": SGD_DIVERGING | ADAM},
            "pruner": {"name": "median", "report_every": 1, "warmup_reports": 0},
        }
    )


def _assert_exactly_the_budget(url: str, study: str, pool: list[Worker], budget: int) -> None:
    """Each trial is complete, pruned or trashed, none is lost, exactly the budget's trials
    were taken, each by one of these workers and reported by it; every worker ended cleanly
    on the budget."""
    trials = trials_of(url, study)
    assert_nothing_lost(trials, budget)
    assert len(trials) == budget, [(t.number, t.state.name) for t in trials]
    assert {t.user_attrs["worker"] for t in trials} <= {w.id for w in pool}
    assert sum(worker_done(w.out.read_text()) for w in pool) == len(trials)
    for worker in pool:
        assert "budget reached" in worker.out.read_text(), worker.logs()
        assert "Traceback" not in worker.err.read_text(), worker.logs()


def test_four_workers_finish_exactly_the_budget(postgres_url, tmp_path, workers):
    """4 workers on one study take exactly its budget: the trials in flight count as a trial
    is taken, under the budget's lock (without it, 8 workers on a budget of 12 finished up to
    17, each that saw 11 finished taking one). On the journal, the test below."""
    url, budget = postgres_url, 12
    create(write_card(tmp_path / "scan.yml", _budget_card(budget)), url, "four")
    pool = [workers(url, "four", **PARALLEL) for _ in range(4)]
    codes = [worker.wait(timeout=240) for worker in pool]
    assert codes == [0] * 4, "\n".join(w.logs() for w in pool)
    _assert_exactly_the_budget(url, "four", pool, budget)


def test_eight_workers_started_at_once_take_exactly_the_budget(tmp_path, workers):
    """8 workers started together on a freshly created journal: none crashes, and together
    they take exactly the budget, as 4 do on PostgreSQL (the test above).

    On the journal only: each TensorFlow start-up costs about 6 s of a core, and the storage
    layer's own test (test_storage.py::test_sixteen_processes_at_once) already runs 16
    processes on PostgreSQL, with and without the schema created first.
    """
    url, budget = str(tmp_path / "scan.journal"), 12
    create(write_card(tmp_path / "scan.yml", _budget_card(budget)), url, "crowd")
    pool = [workers(url, "crowd", **PARALLEL) for _ in range(8)]
    codes = [worker.wait(timeout=400) for worker in pool]
    crashed = [w.logs() for w, code in zip(pool, codes, strict=True) if code != 0]
    assert not crashed, f"{len(crashed)} of 8 workers failed; first:\n{crashed[0]}"
    _assert_exactly_the_budget(url, "crowd", pool, budget)


def wait_running(study: optuna.Study, worker: Worker) -> FrozenTrial:
    """The trial `worker` is running (its `worker` user attribute names the process), once its
    fit is under way (it reported an intermediate value: see long_card)."""

    def running() -> FrozenTrial | None:
        worker.check_alive()
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if trial.user_attrs.get("worker") == worker.id and trial.intermediate_values:
                return trial
        return None

    return wait_for(running, timeout=120, what=f"worker {worker.pid} to run a trial")


def test_killed_worker_trial_is_failed_and_retried(url, tmp_path, workers):
    """kill -9 mid-trial: the trial goes FAIL once its heartbeat is older than the grace period,
    and the next worker re-runs it (Optuna's retry callback: system attrs `failed_trial`,
    `retry_history`) to completion with the same parameters."""
    card = long_card()
    create(write_card(tmp_path / "scan.yml", card), url, "kill")
    study = load_study(open_storage(url), "kill")

    first = workers(url, "kill")
    killed = wait_running(study, first)
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait(timeout=30) == -signal.SIGKILL
    killed_at = time.monotonic()
    assert study.trials[killed.number].state == TrialState.RUNNING  # nobody finished it

    # Past the grace period (plus a heartbeat) the trial is stale for the next worker's first
    # ask, so a single trial of that worker must be the retry.
    time.sleep(max(0.0, killed_at + GRACE_PERIOD + HEARTBEAT_INTERVAL + 0.5 - time.monotonic()))
    second = workers(url, "kill", "--n-trials", "1")
    assert second.wait(timeout=180) == 0, second.logs()

    trials = study.get_trials()
    assert [t.number for t in trials] == [killed.number, killed.number + 1]
    failed, retry = trials
    assert failed.state == TrialState.FAIL
    assert failed.user_attrs["worker"] == first.id
    assert retry.state == TrialState.COMPLETE, second.logs()
    assert retry.params == failed.params
    assert retry.system_attrs["failed_trial"] == failed.number
    assert retry.system_attrs["retry_history"] == [failed.number]
    assert retry.user_attrs["worker"] == second.id
    assert math.isfinite(retry.value)
    assert not by_state(trials, TrialState.RUNNING, TrialState.WAITING)
    if not url.startswith("postgresql"):
        assert list(Path(url + ".heartbeats").iterdir()) == []  # no heartbeat file left


def pause_outside_the_lock(worker: Worker, journal: str) -> None:
    """SIGSTOP the worker at a moment it does not hold the journal's write lock (it holds it for
    a few ms per write): paused inside, it would keep every other writer waiting for ever."""
    for _ in range(100):
        os.kill(worker.pid, signal.SIGSTOP)
        fd = os.open(journal, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return  # closing the file below frees the lock again
        except BlockingIOError:
            os.kill(worker.pid, signal.SIGCONT)
            time.sleep(0.05)
        finally:
            os.close(fd)
    pytest.fail(f"worker {worker.pid} held the journal's lock at each of 100 tries")


def test_worker_survives_its_trial_failed_as_stale(tmp_path, workers):
    """A worker paused past the grace period (preempted, swapped out, starved of CPU) finds on
    waking that its trial was failed and re-queued by another worker. It must not crash: it
    drops that result and goes on, here with the re-queued trial. (Journal only: the handling
    is the worker's, not the storage's.)"""
    url = str(tmp_path / "scan.journal")
    card = long_card()
    create(write_card(tmp_path / "scan.yml", card), url, "pause")
    storage = open_storage(url, heartbeat_interval=HEARTBEAT_INTERVAL, grace_period=GRACE_PERIOD)
    study = load_study(storage, "pause")

    worker = workers(url, "pause", "--n-trials", "2")
    taken = wait_running(study, worker)
    pause_outside_the_lock(worker, url)
    try:
        time.sleep(GRACE_PERIOD + HEARTBEAT_INTERVAL + 0.5)
        # What the next ask of any other worker does first.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        assert study.trials[taken.number].state == TrialState.FAIL
        assert study.trials[taken.number + 1].state == TrialState.WAITING
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    code = worker.wait(timeout=180)
    assert code == 0, worker.logs()

    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert trials[1].params == taken.params
    assert trials[1].user_attrs["worker"] == worker.id
    assert worker_done(worker.out.read_text()) == 2


def stop_with_sigterm(study: optuna.Study, worker: Worker) -> FrozenTrial:
    """SIGTERM the worker once its trial runs; it must exit 0 long before the fit would end."""
    trial = wait_running(study, worker)
    signalled = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker.logs()
    assert time.monotonic() - signalled < 60  # the whole fit takes minutes: it stopped mid-fit
    log = worker.out.read_text()
    assert f"worker {worker.id} on study " in log.splitlines()[0]  # its start-up line
    assert f"\ntrial {trial.number} started" in log
    assert "worker done: 1 trial (1 re-queued), stopped by signal" in log
    return trial


def test_sigterm_requeues_the_running_trial(url, tmp_path, workers):
    """SIGTERM mid-trial: the worker ends the trial at its next sync, fails it, queues an
    identical one (user attr `retry_of`) and exits 0. The next worker takes the queued trial
    with the same parameters (and is stopped the same way: the fit would last minutes)."""
    card = long_card(epochs=200_000)
    create(write_card(tmp_path / "scan.yml", card), url, "term")
    study = load_study(open_storage(url), "term")

    first = workers(url, "term")
    stopped = stop_with_sigterm(study, first)
    trials = study.get_trials()
    assert [t.number for t in trials] == [stopped.number, stopped.number + 1]
    failed, queued = trials
    assert failed.state == TrialState.FAIL
    assert queued.state == TrialState.WAITING
    assert queued.user_attrs["retry_of"] == failed.number
    assert queued.system_attrs["fixed_params"] == failed.params  # how Optuna queues params
    assert (
        trial_line(trial_record(failed)) == f"trial {failed.number}: re-queued (its worker stopped)"
    )

    status = cli("study", "status", "--study", "term", "--storage", url)
    assert status.exit_code == 0, status.output
    assert "0 complete, 0 pruned, 0 trashed, 1 fail, 0 running, 1 waiting" in status.stdout
    assert f"retried: {failed.number} → {queued.number}" in status.stdout

    second = workers(url, "term")
    taken = stop_with_sigterm(study, second)
    assert taken.number == queued.number  # the queued trial, not a new one
    assert taken.params == failed.params
    started = f"trial {taken.number} started (retry of trial {failed.number}): {taken.params}"
    assert started in second.out.read_text()
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.FAIL, TrialState.WAITING]
    assert trials[2].user_attrs["retry_of"] == queued.number
    assert trials[2].system_attrs["fixed_params"] == failed.params

    errors = [w.err.read_text() for w in (first, second)]
    assert not any("Traceback" in text for text in errors), errors


def test_diverging_trials_are_trashed_with_their_reason(url, tmp_path, workers):
    """A diverging replica trashes its trial (PRUNED + reason); the worker goes on; export never
    picks a trashed trial; status lists them. Workers salt the sampler seed with their process
    id and host, so the first two trials are enqueued (one diverging, one not) to make both
    certain."""
    budget = 4
    card = scan_card(scan={"trials": budget, "space": {"optimizer": SGD_DIVERGING | ADAM}})
    create(write_card(tmp_path / "scan.yml", card), url, "diverge")
    study = load_study(open_storage(url), "diverge")
    study.enqueue_trial({"optimizer": "sgd", "sgd.learning_rate": 1.0e7})
    study.enqueue_trial({"optimizer": "adam", "adam.learning_rate": 1.0e-2})

    worker = workers(url, "diverge")
    assert worker.wait(timeout=180) == 0, worker.logs()
    trials = study.get_trials()
    assert_nothing_lost(trials, budget)
    assert len(trials) == budget  # one worker: exactly the budget

    trashed = [t for t in trials if "trashed" in t.user_attrs]
    assert trashed and trashed[0].number == 0
    for trial in trashed:
        assert trial.state == TrialState.PRUNED
        assert trial.params["optimizer"] == "sgd"
        reason = trial.user_attrs["trashed"]
        assert re.fullmatch(rf"\d+ diverged: {DIVERGENCE_REASON}(; {DIVERGENCE_REASON})*", reason)
        assert trial.user_attrs["fit"]["diverged"] >= 1
        assert trial.user_attrs["fit"]["redrawn_starts"] == 0  # diverged in training, not at start
    # The worker went on after trashing trial 0, and said so on the way.
    log = worker.out.read_text()
    assert "trial 0: trashed in" in log and trials[0].user_attrs["trashed"] in log
    assert {t.user_attrs["worker"] for t in trials} == {worker.id}
    assert trials[1].state == TrialState.COMPLETE
    assert trials[1].datetime_start >= trials[0].datetime_complete
    assert worker_done(log) == budget

    exported = cli("export", "--study", "diverge", "--storage", url, "-o", tmp_path / "best.yml")
    assert exported.exit_code == 0, exported.output
    number = int(re.search(r"^# trial: (\d+)$", (tmp_path / "best.yml").read_text(), re.M)[1])
    assert trials[number].state == TrialState.COMPLETE
    assert "trashed" not in trials[number].user_attrs
    assert load_fit_runcard(tmp_path / "best.yml").optimizer.name == "adam"

    # Asked for by number, a trashed trial exports too (to watch it diverge), saying so.
    chosen = tmp_path / "trashed.yml"
    exported = cli("export", "--study", "diverge", "--storage", url, "--trial", 0, "-o", chosen)
    reason = trials[0].user_attrs["trashed"]
    assert exported.stdout == f"trial 0 (trashed: {reason}) written to {chosen}\n"
    assert f"\n# value: trashed: {reason}\n" in chosen.read_text()
    assert load_fit_runcard(chosen).optimizer.name == "sgd"
    args = ("export", "--study", "diverge", "--storage", url, "-o", chosen, "--force")
    missing = assert_clean_failure(cli(*args, "--trial", budget))
    assert f"study 'diverge' has no trial {budget} (trials 0 to {budget - 1})" in missing

    status = cli("study", "status", "--study", "diverge", "--storage", url)
    assert status.exit_code == 0, status.output
    assert f"{len(trashed)} trashed" in status.stdout
    listed = status.stdout.split("\ntrashed:\n", 1)[1]
    for trial in trashed:
        assert f"  trial {trial.number}: {trial.user_attrs['trashed']}" in listed

    with warnings.catch_warnings():  # a trial asked for by hand: no heartbeat
        warnings.simplefilter("ignore", UserWarning)
        running = study.ask()  # values not drawn yet: nothing to export
    refused = assert_clean_failure(cli(*args, "--trial", running.number))
    assert f"trial {running.number} of study 'diverge' is running: only a complete" in refused


def test_workers_with_one_process_id_on_two_hosts_salt_their_samplers_apart(monkeypatch):
    """Compose's scaled workers all run as the same process id in their containers (as workers
    on cluster nodes may): the host name keeps their seeded samplers apart."""
    import socket

    from hyperscan.scan._worker import _salt

    monkeypatch.setattr(os, "getpid", lambda: 7)
    salts = []
    for host in ("3f2a9c1d0b7e", "8f7f371bb73f"):
        monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
        salts.append(_salt(optuna.create_study(), None))
    assert salts[0] != salts[1]
    assert _salt(optuna.create_study(), None) == salts[1]  # the same process: the same salt
