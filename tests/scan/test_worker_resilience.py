"""A worker survives what a cluster does to it: a trial another worker declared stale while it
still ran, a storage outage mid-trial, dead workers' trials in a study whose budget is spent."""

from __future__ import annotations

import datetime
import logging
import multiprocessing
import threading
import time
import warnings
from multiprocessing.process import BaseProcess

import optuna
import pytest
from _in_process import run_in_process
from _service import dropped_connection, fail_first_result
from click.testing import CliRunner
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from hyperscan.cli import main
from hyperscan.cli._render import event_line, status_text, trial_line, trial_start_line
from hyperscan.data import load_problem
from hyperscan.runcard import scan_runcard_from_dict
from hyperscan.scan import (
    ScanError,
    StorageError,
    _limits,
    _scheduler,
    _worker,
    open_storage,
    retries,
)
from hyperscan.scan._copy import copy_study
from hyperscan.scan._local import started_record, supervise, trial_record, worker_starter
from hyperscan.scan._objective import Objective
from hyperscan.scan._status import study_status
from hyperscan.scan._study import ENGINE, ENGINE_ATTR, create_study, open_study
from hyperscan.scan._trial_attrs import RETRY_OF_ATTR, requeued
from hyperscan.scan._worker import run_worker
from hyperscan.scan.storage import load_study, results_folder

# Graph-mode loops: these tests are of the worker, not of the compiled loop, and XLA would
# compile each trial's loop anew (about 5 s of CPU, four times what the fit takes).
TINY_SCAN = {
    "data": {"closure": {"size": "tiny"}},
    "architecture": {"nodes": [4], "activations": ["tanh"]},
    "epochs": 20,
    "training": {"steps_per_call": 10, "jit": False},
    "scan": {
        "trials": 3,
        "replicas": 1,
        "pruner": {"name": "none"},
        "space": {"parameters": {"optimizer.learning_rate": {"low": 1e-3, "high": 1e-2}}},
    },
}


def test_a_stale_declared_trial_does_not_end_the_worker(tmp_path, monkeypatch):
    storage = open_storage(str(tmp_path / "study.journal"), create=True)
    create_study(scan_runcard_from_dict(TINY_SCAN), storage, "resilient")
    real_fit = _scheduler.run_fit
    calls = []

    def fit_once_overtaken(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise UpdateFinishedTrialError("trial 0 was failed as stale by another worker")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(_scheduler, "run_fit", fit_once_overtaken)
    report = run_worker("resilient", open_storage(str(tmp_path / "study.journal")))
    assert report.budget_reached
    trials = load_study(storage, "resilient").get_trials()
    states = [t.state for t in trials]
    assert states[0] == TrialState.FAIL
    assert states.count(TrialState.COMPLETE) == 3
    assert optuna.trial.TrialState.RUNNING not in states


def fail_as_stale_elsewhere(url: str, name: str) -> None:
    """What another worker does to a trial whose heartbeat came late: fail it, re-queue it."""
    storage = open_storage(url)
    study = load_study(storage, name)
    (running,) = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    storage.set_trial_state_values(running._trial_id, TrialState.FAIL)
    requeue = storage.get_heartbeat_stale_trial_callback()
    requeue(study, storage.get_trial(running._trial_id))


@pytest.mark.parametrize("when", ["at its first write", "at its tell"])
def test_a_result_dropped_as_stale_leaves_no_file(
    postgres_url, tmp_path, monkeypatch, caplog, when
):
    """Another worker fails a trial as stale once its fit has ended, before its first write or
    just before its tell: the result, kept on disk for an outage, is superseded by the
    re-queued copy, and its file goes with it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    card = {**TINY_SCAN, "scan": {**TINY_SCAN["scan"], "trials": 1}}
    create_study(scan_runcard_from_dict(card), open_storage(postgres_url, create=True), "s")
    overtaken = []
    real_fit, real_tell = _scheduler.run_fit, optuna.Study.tell

    def fit(*args, **kwargs):
        result = real_fit(*args, **kwargs)
        if when == "at its first write" and not overtaken:
            fail_as_stale_elsewhere(postgres_url, "s")
            overtaken.append(when)
        return result

    def tell(*args, **kwargs):
        if when == "at its tell" and not overtaken:
            fail_as_stale_elsewhere(postgres_url, "s")
            overtaken.append(when)
        return real_tell(*args, **kwargs)

    monkeypatch.setattr(_scheduler, "run_fit", fit)
    monkeypatch.setattr(optuna.Study, "tell", tell)
    with caplog.at_level(logging.WARNING):
        report = run_worker("s", open_storage(postgres_url))
    assert report.budget_reached and report.trials == 2  # the dropped one, then its copy
    states = [t.state for t in load_study(open_storage(postgres_url), "s").get_trials()]
    assert states == [TrialState.FAIL, TrialState.COMPLETE]
    assert "trial result dropped: another worker failed the trial as stale" in caplog.text
    assert not list(results_folder().iterdir()), "a dropped result stayed on disk"
    assert "is kept in" not in caplog.text


@pytest.mark.parametrize(
    ("when", "kept"), [("mid-fit", False), ("last sync", True), ("after the fit", True)]
)
def test_only_a_stop_that_cuts_the_fit_short_requeues_the_trial(monkeypatch, when, kept):
    """A signal that reaches the worker at the fit's last sync, or while a finished fit's
    results are computed, cut nothing short: the trial is recorded, not fitted again."""
    runcard = scan_runcard_from_dict(TINY_SCAN)
    stop = threading.Event()
    real_fit = _scheduler.run_fit

    def signalled_fit(card, *, on_sync, **kwargs):
        def sync(report):
            if when == "mid-fit" or (when == "last sync" and report.step >= card.epochs):
                stop.set()
            return on_sync(report)

        result = real_fit(card, on_sync=sync, **kwargs)
        stop.set()
        return result

    monkeypatch.setattr(_scheduler, "run_fit", signalled_fit)
    study = optuna.create_study()
    objective = Objective(runcard, load_problem(runcard.fit), stop)
    run_in_process(study, objective)
    trial = study.trials[0]
    if kept:
        assert trial.state == TrialState.COMPLETE and not requeued(trial)
        assert len(study.trials) == 1
        # the real fit's predictions reach n3fit's ensemble metrics, stored on the trial
        (fold,) = trial.user_attrs["ensemble"]["folds"].values()
        assert fold["n_points"] == objective.problem.n_data
        assert fold["chi2p"] > 0 and fold["logp"] is not None
    else:
        assert trial.state == TrialState.FAIL and requeued(trial)
        assert study.trials[1].state == TrialState.WAITING


def test_a_bug_in_the_fit_ends_the_worker_with_its_error(tmp_path, monkeypatch):
    storage = open_storage(str(tmp_path / "study.journal"), create=True)
    create_study(scan_runcard_from_dict(TINY_SCAN), storage, "bug")

    def bug(*args, **kwargs):
        raise RuntimeError("a bug in the fit")

    monkeypatch.setattr(_scheduler, "run_fit", bug)
    with pytest.raises(RuntimeError, match="a bug in the fit"):
        run_worker("bug", open_storage(str(tmp_path / "study.journal")))


def stand_in_worker(seconds: float) -> BaseProcess:
    """A process that stands in for a scan's worker, as `worker_starter` starts them."""
    worker = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(seconds,))
    worker.start()
    return worker


def _storage(path, **heartbeat):
    return open_storage(str(path), heartbeat_interval=1, grace_period=2, **heartbeat)


def test_a_storage_outage_mid_trial_costs_the_trial_not_the_worker(tmp_path, monkeypatch, caplog):
    """The database goes away as a trial ends (its result cannot be written), and answers
    again at once: the worker says why, fails and re-queues the trial left RUNNING at once (not
    after a wait, nor after the grace period), goes on, and the budget is met."""
    create_study(
        scan_runcard_from_dict(TINY_SCAN), _storage(tmp_path / "s.journal", create=True), "o"
    )
    storage = _storage(tmp_path / "s.journal")
    outages = fail_first_result(storage, monkeypatch)
    monkeypatch.setattr(_limits, "STORAGE_RETRY_WAITS", (1,))  # < the grace period
    with caplog.at_level(logging.WARNING):
        report = run_worker("o", storage)
    assert report.budget_reached and outages
    states = [t.state for t in load_study(storage, "o").get_trials()]
    assert states[0] == TrialState.FAIL and TrialState.RUNNING not in states
    assert states.count(TrialState.COMPLETE) == 3
    assert "server closed the connection unexpectedly" in caplog.text
    assert "trying again" not in caplog.text  # the re-queue went through: nothing to wait out
    assert "was cut short by a storage error: failed, re-queued" in caplog.text
    assert "sent no heartbeat" not in caplog.text
    assert "Traceback" not in caplog.text
    retried = next(
        t.number
        for t in load_study(storage, "o").get_trials()
        if t.number > 0 and t.system_attrs.get("retry_history") == [0]
    )
    assert f"retried: 0 → {retried} (worker lost)" in status_text(
        study_status(open_study(storage, "o"))
    )


def _rendered(lines: list[str]):
    """A supervisor's events as `hyperscan scan` prints them."""
    return lambda event: lines.append(event_line(event))


def test_a_storage_outage_as_a_worker_starts_is_waited_out_then_a_message(
    tmp_path, monkeypatch, caplog
):
    """Before its first trial a worker has no trial to re-queue: a dropped connection is tried
    again on the retry schedule, with a line per try, then ends it with the driver's cause, not
    Optuna's traceback."""
    create_study(
        scan_runcard_from_dict(TINY_SCAN), _storage(tmp_path / "s.journal", create=True), "o"
    )
    storage = _storage(tmp_path / "s.journal")

    def gone(*args, **kwargs):
        raise dropped_connection()

    monkeypatch.setattr(storage, "get_all_trials", gone)
    monkeypatch.setattr(_worker, "STORAGE_RETRY_WAITS", (0.1, 0.1))
    with caplog.at_level(logging.WARNING), pytest.raises(StorageError) as info:
        run_worker("o", storage)
    retries = [line for line in caplog.messages if line.startswith("worker start-up: ")]
    assert len(retries) == 2, caplog.messages
    assert all("server closed the connection unexpectedly" in line for line in retries)
    assert "server closed the connection unexpectedly" in str(info.value)
    assert "invalid data in the commit" not in str(info.value)


def test_a_running_worker_takes_a_budget_raised_during_its_trial(tmp_path, monkeypatch):
    """`study create` with a larger scan.trials while a worker runs: the worker reads the new
    budget after its trial and goes on to it, instead of stopping at the one it started with."""
    storage = open_storage(str(tmp_path / "s.journal"), create=True)
    card = {**TINY_SCAN, "scan": {**TINY_SCAN["scan"], "trials": 1}}
    create_study(scan_runcard_from_dict(card), storage, "grow")
    real_fit = _scheduler.run_fit

    def fit_and_raise_the_budget(*args, **kwargs):
        raised = {**card, "scan": {**card["scan"], "trials": 3}}
        create_study(scan_runcard_from_dict(raised), storage, "grow")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(_scheduler, "run_fit", fit_and_raise_the_budget)
    report = run_worker("grow", storage)
    assert report.budget_reached and report.trials == 3
    states = [t.state for t in load_study(storage, "grow").get_trials()]
    assert states == [TrialState.COMPLETE] * 3


def test_a_numbered_worker_reads_the_trials_from_postgresql_once_as_it_starts(
    postgres_url, monkeypatch
):
    """Its sampler's salt counts the study's trials: read through the study the worker keeps,
    not a second one with a cache of its own (seconds each, for thousands of trials)."""
    storage = open_storage(postgres_url, create=True)
    card = {**TINY_SCAN, "scan": {**TINY_SCAN["scan"], "trials": 2}}
    study, _ = create_study(scan_runcard_from_dict(card), storage, "once")
    for value in (1.0, 2.0):  # the budget is spent: the worker only starts and ends
        study.add_trial(optuna.trial.create_trial(value=value))
    loads = []
    real_get_trials = type(storage)._get_trials

    def counted(self, study_id, states, included_trial_ids, trial_id_greater_than):
        if trial_id_greater_than == -1:  # a whole load, not a cache's catching up
            loads.append(study_id)
        return real_get_trials(self, study_id, states, included_trial_ids, trial_id_greater_than)

    monkeypatch.setattr(type(storage), "_get_trials", counted)
    report = run_worker("once", storage, sampler_salt=0)
    assert report.budget_reached and report.trials == 0
    assert len(loads) == 1, loads


def test_scan_workers_do_not_import_hyperscan_from_the_working_folder(tmp_path, monkeypatch, capfd):
    """`hyperscan scan` run in a folder that holds a `hyperscan` package (a checkout of another
    version, next to an installed hyperscan) starts its workers with the code it runs itself."""
    shadow = tmp_path / "hyperscan"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")
    (shadow / "__main__.py").write_text("import sys\nprint('shadow', file=sys.stderr)\n")
    monkeypatch.chdir(tmp_path)
    worker = worker_starter("s", str(tmp_path / "none.journal"), 1, threads=1)(0)
    worker.join(timeout=120)
    assert worker.exitcode == 2  # the real worker: no such storage
    err = capfd.readouterr().err
    assert "shadow" not in err
    assert "none.journal" in err


def test_the_scan_supervisor_waits_out_a_storage_outage():
    """`hyperscan scan` polls the study while its workers run: an outage is said once and
    waited out, as the workers wait it out, instead of ending the scan and orphaning them."""
    finished = optuna.trial.create_trial(value=1.0)
    answers = [dropped_connection(), dropped_connection(), [finished]]

    class Study:
        def get_trials(self, deepcopy=True):
            answer = answers.pop(0) if answers else [finished]
            if isinstance(answer, Exception):
                raise answer
            return answer

    worker = stand_in_worker(3.5)
    lines: list[str] = []
    codes, interrupted = supervise([worker], Study(), _rendered(lines), "postgresql://db/scans")
    assert (codes, interrupted) == ([0], False)
    assert "server closed the connection unexpectedly (storage: postgresql://db/scans)" in lines[0]
    assert lines[0].endswith("; the workers wait for it")
    assert lines[1:] == [f"trial {finished.number}: 1.0000 {{}}"]


def test_the_scan_supervisor_says_when_a_trial_starts_and_when_it_ends():
    """A long trial is not a silent scan: its start is said once, as is its end."""
    running = optuna.trial.create_trial(state=TrialState.RUNNING)
    finished = optuna.trial.create_trial(value=2.0)
    running.number, finished.number = 7, 8  # a line must name its own trial
    answers = [[running], [running], [finished]]

    class Study:
        def get_trials(self, deepcopy=True):
            return answers.pop(0) if answers else [finished]

    worker = stand_in_worker(3.5)
    lines: list[str] = []
    assert supervise([worker], Study(), _rendered(lines), "journal:///s.journal") == ([0], False)
    assert lines == [f"trial {running.number} started", f"trial {finished.number}: 2.0000 {{}}"]


def test_the_scan_supervisor_lists_only_the_trials_of_its_run():
    """A resumed study's earlier trials (thousands, in a long study) are not listed again."""
    earlier = [optuna.trial.create_trial(value=float(k)) for k in range(3)]
    for number, trial in enumerate(earlier):
        trial.number = number
    new = optuna.trial.create_trial(value=7.0)
    new.number = 3

    class Study:
        def get_trials(self, deepcopy=True):
            return [*earlier, new]

    worker = stand_in_worker(0)
    lines: list[str] = []
    ended = supervise([worker], Study(), _rendered(lines), "journal:///s.journal", [0, 1, 2])
    assert ended == ([0], False)
    assert lines == ["trial 3: 7.0000 {}"]


def test_a_dead_workers_trial_is_failed_even_once_the_budget_is_spent(tmp_path, caplog):
    """Nobody asks for a trial once the budget is met, so a worker that finds it met still
    fails the trials of dead workers: else they stay RUNNING, and `study copy` refuses. It does
    not queue them again: no worker would come for the copy."""
    storage = _storage(tmp_path / "s.journal", create=True)
    create_study(
        scan_runcard_from_dict({**TINY_SCAN, "scan": {**TINY_SCAN["scan"], "trials": 1}}),
        storage,
        "d",
    )
    study = load_study(storage, "d")
    study.add_trial(optuna.trial.create_trial(value=1.0))
    with warnings.catch_warnings():  # "heartbeats are meant for Study.optimize": a dead worker
        warnings.simplefilter("ignore", UserWarning)
        orphan = study.ask()  # its worker was killed after one heartbeat
    storage.record_heartbeat(orphan._trial_id)
    time.sleep(2.5)
    with caplog.at_level(logging.WARNING):
        report = run_worker("d", _storage(tmp_path / "s.journal"))
    assert report.budget_reached and report.trials == 0
    states = [t.state for t in load_study(storage, "d").get_trials()]
    assert states == [TrialState.COMPLETE, TrialState.FAIL]
    assert f"trial {orphan.number} (worker ?) sent no heartbeat" in caplog.text
    assert "not re-queued (the budget is spent)" in caplog.text


def test_a_dead_workers_trial_after_the_budget_is_shown_lost_and_copied_failed(tmp_path, caplog):
    """The other workers spent the budget before the grace period ran out, so no worker
    comes to fail the dead one's trial: `study status` says it is lost, and `study copy` fails
    it as a worker would, instead of refusing the study for ever."""
    path = tmp_path / "s.journal"
    storage = _storage(path, create=True)
    card = {**TINY_SCAN, "scan": {**TINY_SCAN["scan"], "trials": 1}}
    create_study(scan_runcard_from_dict(card), storage, "d")
    study = load_study(storage, "d")
    study.add_trial(optuna.trial.create_trial(value=1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        orphan = study.ask()
    storage.record_heartbeat(orphan._trial_id)
    assert "its worker is lost" not in status_text(study_status(open_study(storage, "d")))
    time.sleep(2.5)
    status = ["study", "status", "--study", "d", "--storage", str(path)]
    shown = CliRunner().invoke(main, status, env={"HYPERSCAN_GRACE_PERIOD": "2"}).output
    assert f"trial {orphan.number} on ?, started 0m0" in shown
    assert (
        "s ago: no heartbeat for the grace period, its worker is lost (the next worker started "
        "on the study fails it)"
    ) in shown
    # The workers' grace period, not the default's 600 s, decides.
    assert (
        "is lost"
        not in CliRunner().invoke(main, status, env={"HYPERSCAN_GRACE_PERIOD": None}).output
    )
    with caplog.at_level(logging.WARNING):
        copy = copy_study(str(path), str(tmp_path / "copy.journal"), "d", grace_period=2)
    assert [t.state for t in copy.get_trials()] == [TrialState.COMPLETE, TrialState.FAIL]
    assert "not re-queued (the copy's workers draw their own)" in caplog.text


def test_a_study_of_another_engine_revision_gets_no_trials_from_this_worker(tmp_path):
    """Trials of one study must compare: a study created before the engine changed what a
    trial's value means is read, not extended."""
    storage = _storage(tmp_path / "s.journal", create=True)
    create_study(scan_runcard_from_dict(TINY_SCAN), storage, "old")
    load_study(storage, "old").set_user_attr(ENGINE_ATTR, ENGINE - 1)
    with pytest.raises(ScanError, match=f"engine revision {ENGINE - 1}"):
        run_worker("old", _storage(tmp_path / "s.journal"))
    assert load_study(storage, "old").trials == []
    assert "old" in status_text(study_status(open_study(storage, "old")))


def test_a_retry_of_a_lost_workers_trial_names_the_trial_it_repeats():
    """Optuna re-queues a lost worker's trial with its user attributes (an older retry_of
    too): the start line names the trial repeated, as `study status` does, not the older one."""
    study = optuna.create_study()
    first = study.ask()
    first.suggest_float("x", 0.0, 1.0)
    study.enqueue_trial(first.params, user_attrs={RETRY_OF_ATTR: first.number})  # a signal
    study.tell(first, state=TrialState.FAIL)
    second = study.ask()
    assert (
        trial_start_line(started_record(second, {}))
        == f"trial {second.number} started (retry of trial 0): {{}}"
    )
    study.tell(second, state=TrialState.FAIL)  # its worker died: Optuna queues a copy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        RetryHeartbeatStaleTrialCallback()(study, study.trials[second.number])
    third = study.ask()
    assert retries(study.get_trials()) == {0: (1, False), 1: (2, True)}
    assert (
        trial_start_line(started_record(third, {}))
        == f"trial {third.number} started (retry of trial 1): {{}}"
    )


def test_a_trial_is_said_to_take_its_whole_time_not_its_fit_alone():
    """A slot's trial waits for its own writes and for those of the trials that ended at the
    same sync: its line says the time it was RUNNING (59 s), not its fit's (34 s)."""
    end = datetime.datetime(2026, 12, 6, 12, 0, 59)
    trial = optuna.trial.create_trial(value=1.0, user_attrs={"fit": {"seconds": 34.0}})
    trial.datetime_start, trial.datetime_complete = end - datetime.timedelta(seconds=59), end
    trial.number = 4
    assert trial_line(trial_record(trial), with_params=False) == "trial 4: 1.0000 in 59 s"
