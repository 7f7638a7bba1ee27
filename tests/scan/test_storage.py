# SPDX-License-Identifier: GPL-3.0-or-later
"""The storage layer against real files, real processes and a real PostgreSQL server."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import optuna
import psycopg2
import psycopg2.errors
import pytest
import sqlalchemy
from _waiting import wait_for
from optuna.exceptions import ExperimentalWarning, StorageInternalError
from optuna.storages import RDBStorage, fail_stale_trials
from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled
from optuna.trial import TrialState

from hyperscan.runcard import scan_runcard_from_dict
from hyperscan.scan._study import create_study
from hyperscan.scan.storage import (
    DEFAULT_STORAGE,
    STORAGE_ENV,
    BudgetSpent,
    HeartbeatJournalStorage,
    NoSchemaError,
    StorageError,
    _errors,
    describe_error,
    explained_storage_errors,
    gate_takes,
    give_back_lost_takes,
    load_study,
    open_storage,
    redact,
    requeue_cut_short,
    resolve_url,
    study_names,
    taking,
    transient_error,
)
from hyperscan.scan.storage._errors import CAUSES, note_reached
from hyperscan.scan.storage._timeout import TIMEOUT_ENV

optuna.logging.set_verbosity(optuna.logging.WARNING)

TINY_SCAN = {
    "data": {"closure": {"size": "tiny"}},
    "architecture": {"nodes": [4], "activations": ["tanh"]},
    "scan": {"space": {"parameters": {"optimizer.learning_rate": {"low": 1e-3, "high": 1e-2}}}},
}

# A worker whose trial never ends, to be killed with SIGKILL.
SLEEPER = """
import sys, time
import optuna
from hyperscan.scan.storage import load_study, open_storage
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = load_study(open_storage(sys.argv[1], heartbeat_interval=1, grace_period=3), "s")
def objective(trial):
    trial.suggest_float("x", -1.0, 1.0)
    time.sleep(600)
    return 0.0
study.optimize(objective, n_trials=1)
"""


def quick(trial: optuna.Trial) -> float:
    return trial.suggest_float("x", -1.0, 1.0) ** 2


@pytest.fixture(params=["journal", "postgresql"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage URL nobody has used yet; the journal's folder does not exist yet either."""
    if request.param == "journal":
        return str(tmp_path / "new" / "folder" / DEFAULT_STORAGE)
    return request.getfixturevalue("postgres_url")


# --------------------------------------------------------------------------- URLs


def test_default_is_journal_in_current_directory(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(STORAGE_ENV, raising=False)
    assert resolve_url(None) == f"journal://{tmp_path / DEFAULT_STORAGE}"
    monkeypatch.setenv(STORAGE_ENV, "  ")  # blank counts as unset
    assert resolve_url(None) == f"journal://{tmp_path / DEFAULT_STORAGE}"


def test_environment_variable_then_explicit_url(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(STORAGE_ENV, "postgresql://alice@db.example:5433/scans")
    assert resolve_url(None) == "postgresql+psycopg2://alice@db.example:5433/scans"
    assert resolve_url("mine.journal") == f"journal://{tmp_path / 'mine.journal'}"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/abs/s.journal", "journal:///abs/s.journal"),
        ("rel/s.journal", "journal://{cwd}/rel/s.journal"),
        ("journal:///abs/s.journal", "journal:///abs/s.journal"),
        ("journal://rel/s.journal", "journal://{cwd}/rel/s.journal"),
        ("~/s.journal", "journal://{home}/s.journal"),
        ("postgresql://u@h:5432/db", "postgresql+psycopg2://u@h:5432/db"),
        ("postgres://u:pw@h/db", "postgresql+psycopg2://u:pw@h/db"),
        ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2://u@h/db"),
        ("sqlite:///scan.db", "sqlite:///scan.db"),
    ],
)
def test_resolve_url_forms(monkeypatch, tmp_path, url, expected):
    monkeypatch.chdir(tmp_path)
    expected = expected.format(cwd=tmp_path, home=os.path.expanduser("~"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SQLite is allowed without a warning
        assert resolve_url(url) == expected
        assert resolve_url(expected) == expected  # canonical forms are fixed points


@pytest.mark.parametrize(
    "url", ["mysql://u:pw@h/db", "redis://h:6379", "postgresql+asyncpg://u@h/db", "journal://"]
)
def test_unknown_url_lists_accepted_forms(url):
    with pytest.raises(StorageError) as info:
        resolve_url(url)
    message = str(info.value)
    assert "pw" not in message.replace("psycopg2", "")
    if not url.startswith("postgresql+"):
        assert "journal:///" in message
        assert "postgresql://" in message


@pytest.mark.parametrize(
    "url", ["postgresql:/u@h/db", "postgresql:u@h/db", "Postgres:/h/db", "sqlite:/a.db"]
)
def test_a_url_missing_its_slashes_is_refused_not_taken_for_a_file(monkeypatch, tmp_path, url):
    """Else `study create` made a journal under a folder named "postgresql:" and said
    "created", while the workers looked for the study on the server."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError, match=r"must be followed by //"):
        resolve_url(url)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        ("postgresql:/u:Secret123@h/db", "must be followed by //"),
        ("postgresql:u:Secret123@h/db", "must be followed by //"),
        ("postgresql//u:Secret123@h/db", r"'postgresql//' lacks its ':' \(postgresql://\)"),
        ("Postgres//u:Secret123@h/db", "lacks its ':'"),
    ],
)
def test_a_mistyped_url_keeps_its_password_out_of_the_message(monkeypatch, tmp_path, url, cause):
    """The message quotes the URL it refuses; with its slashes mistyped, the password was
    shown, and without its colon the URL became a journal in folders named after it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError, match=cause) as info:
        resolve_url(url)
    assert "Secret123" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_a_raw_at_sign_in_the_password_is_refused_without_showing_the_password():
    """The URL parser would end the password at its first '@', and the server's "unknown
    host" message would show the rest of it."""
    with pytest.raises(StorageError) as info:
        resolve_url("postgresql://postgres:se@cret@127.0.0.1:5432/test")
    assert "%40" in str(info.value) and "cret" not in str(info.value)
    encoded = "postgresql://postgres:se%40cret@127.0.0.1:5432/test?options=a@b"
    assert resolve_url(encoded).endswith("postgres:se%40cret@127.0.0.1:5432/test?options=a@b")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:s3cret@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u:p@ss/w@h/db", "postgresql://u:***@h/db"),
        ("postgresql://h/db?user=u&password=s3cret&sslmode=require", None),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("journal:///tmp/a@b.journal", "journal:///tmp/a@b.journal"),
        ("/tmp/s.journal", "/tmp/s.journal"),
    ],
)
def test_redact(url, expected):
    redacted = redact(url)
    if expected is not None:
        assert redacted == expected
    assert "s3cret" not in redacted
    assert "p@ss" not in redacted


# --------------------------------------------------------------------------- studies


@pytest.mark.parametrize("backend", ["journal", "postgresql", "sqlite"])
def test_create_run_and_reopen(request, tmp_path, backend):
    if backend == "sqlite":  # a file in folders not made yet, as the journal's
        url = f"sqlite:///{tmp_path / 'new' / 'scan.db'}"
    elif backend == "journal":
        url = str(tmp_path / "new" / DEFAULT_STORAGE)
    else:
        url = request.getfixturevalue("postgres_url")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no experimental-feature noise on every worker start
        storage = open_storage(url, create=True)
    assert isinstance(storage, BaseHeartbeat) and is_heartbeat_enabled(storage)
    study = optuna.create_study(study_name="s", storage=storage)
    study.optimize(quick, n_trials=3)

    again = open_storage(url)
    assert study_names(again) == ["s"]
    reopened = load_study(again, "s")
    assert [t.state for t in reopened.trials] == [TrialState.COMPLETE] * 3
    assert reopened.best_value == study.best_value


@pytest.mark.parametrize("url", ["blocker/scan.journal", "sqlite:///blocker/scan.db"])
def test_a_file_where_the_storage_folder_should_be_is_named(tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blocker").write_text("notes")
    with pytest.raises(StorageError, match="blocker is a file, where the storage's folder should"):
        open_storage(url, create=True)
    assert (tmp_path / "blocker").read_text() == "notes"


def test_unknown_study_lists_existing(backend_url):
    storage = open_storage(backend_url, create=True)
    for name in ("alpha", "beta"):
        optuna.create_study(study_name=name, storage=storage)
    with pytest.raises(StorageError, match=r"no study named 'gamma' in .*; existing: alpha, beta"):
        load_study(open_storage(backend_url), "gamma")


def test_worker_refuses_missing_journal(tmp_path):
    path = tmp_path / DEFAULT_STORAGE
    with pytest.raises(StorageError, match="hyperscan study create") as info:
        open_storage(str(path))
    assert str(path) in str(info.value)
    assert not path.exists()  # a worker in the wrong folder leaves no stray journal


def test_worker_refuses_database_without_schema(postgres_url):
    with pytest.raises(NoSchemaError) as info:
        open_storage(postgres_url)
    assert "no hyperscan/Optuna schema in this database" in str(info.value)
    assert "run `hyperscan study create` first" in str(info.value)
    engine = sqlalchemy.create_engine(postgres_url)
    try:
        assert sqlalchemy.inspect(engine).get_table_names() == []  # nothing was created
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- heartbeats


def test_journal_heartbeat_fails_stale_trials_and_requeues(tmp_path):
    storage = open_storage(
        str(tmp_path / DEFAULT_STORAGE), create=True, heartbeat_interval=1, grace_period=2
    )
    assert isinstance(storage, HeartbeatJournalStorage)
    study = optuna.create_study(study_name="s", storage=storage)
    # ask() without optimize() warns that nothing beats for it: here we beat by hand.
    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
    stopped = study.ask()
    stopped.suggest_float("x", 0.0, 1.0)
    storage.record_heartbeat(stopped._trial_id)
    alive = study.ask()
    alive.suggest_float("x", 0.0, 1.0)
    storage.record_heartbeat(alive._trial_id)
    silent = study.ask()  # never beats: a worker killed before its first beat
    beat_file = Path(storage.heartbeat_dir)
    assert sorted(p.name for p in beat_file.iterdir()) == sorted(
        [str(stopped._trial_id), str(alive._trial_id)]
    )
    assert storage._get_stale_trial_ids(study._study_id) == []

    deadline = time.monotonic() + 2.6  # past the grace period, beating for `alive` only
    while time.monotonic() < deadline:
        storage.record_heartbeat(alive._trial_id)
        time.sleep(0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        fail_stale_trials(study)

    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states[stopped.number] == TrialState.FAIL
    assert states[silent.number] == TrialState.FAIL
    assert states[alive.number] == TrialState.RUNNING
    retries = {
        t.system_attrs["failed_trial"]: t for t in study.get_trials(states=(TrialState.WAITING,))
    }
    assert set(retries) == {stopped.number, silent.number}
    assert retries[stopped.number].params == study.trials[stopped.number].params
    assert [p.name for p in beat_file.iterdir()] == [str(alive._trial_id)]

    study.tell(alive, 0.5)
    assert list(beat_file.iterdir()) == []  # a finished trial leaves no heartbeat file behind


def test_a_trial_that_never_beat_goes_stale_after_the_grace_period(backend_url):
    """A worker killed between its ask and its first beat, or whose ask lost its answer to an
    outage, leaves a RUNNING trial with no heartbeat: Optuna's PostgreSQL storage never fails
    it; ours does, after the grace period from its start, as the journal does."""
    storage = open_storage(backend_url, create=True, heartbeat_interval=1, grace_period=2)
    study = optuna.create_study(study_name="s", storage=storage)
    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
    silent, alive = study.ask(), study.ask()
    storage.record_heartbeat(alive._trial_id)
    assert storage._get_stale_trial_ids(study._study_id) == []
    deadline = time.monotonic() + 2.6
    while time.monotonic() < deadline:
        storage.record_heartbeat(alive._trial_id)
        time.sleep(0.2)
    assert storage._get_stale_trial_ids(study._study_id) == [silent._trial_id]


class _Outage:
    """Fails one call, as a database that goes down then does: the first after `arm`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, after: bool):
        self.armed = False
        original = getattr(owner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if not self.armed:
                return original(*args, **kwargs)
            self.armed = False
            if after:
                original(*args, **kwargs)
            raise StorageInternalError("server closed the connection unexpectedly")

        monkeypatch.setattr(owner, name, call)


# A journal's append lands or fails in the worker: only a database can lose a commit's answer.
@pytest.mark.parametrize(
    ("backend", "lost"), [("journal", "answer"), ("postgresql", "answer"), ("postgresql", "commit")]
)
def test_a_trial_taken_by_a_failed_ask_is_queued_again(
    request, tmp_path, monkeypatch, caplog, backend, lost
):
    """The database goes down as an ask takes a trial: after its take (the trial's sampling
    fails) or as the new trial commits (the ask's answer is lost). The trial is RUNNING with
    no worker; given back, it is queued again and the next ask takes it, a queued copy with
    its parameters and a new trial alike."""
    if backend == "journal":
        url = str(tmp_path / DEFAULT_STORAGE)
    else:
        url = request.getfixturevalue("postgres_url")
    storage = open_storage(url, create=True, heartbeat_interval=1, grace_period=60)
    study = optuna.create_study(study_name="s", storage=storage)
    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
    study.enqueue_trial({"x": 0.25})
    if lost == "answer":
        outage = _Outage(monkeypatch, study.sampler, "before_trial", after=False)
    else:
        outage = _Outage(monkeypatch, RDBStorage, "_create_new_trial", after=True)
        study.ask()  # takes the queued trial: the next ask creates one
    for _ in range(2 if lost == "answer" else 1):  # the queued trial, then a new one
        outage.armed = True
        with pytest.raises(StorageInternalError), taking(study):
            study.ask()
        (running,) = [t for t in study.get_trials() if t.state == TrialState.RUNNING][-1:]
        with caplog.at_level(logging.WARNING):
            give_back_lost_takes(study)
        assert f"trial {running.number}: taken by an ask the storage failed" in caplog.text
        assert study.get_trials()[running.number].state == TrialState.WAITING
        give_back_lost_takes(study)  # once only
        assert caplog.text.count(f"trial {running.number}: taken") == 1
        trial = study.ask()
        assert trial.number == running.number
        if running.number == 0:
            assert trial.suggest_float("x", 0.0, 1.0) == 0.25
        study.tell(trial, 1.0)
    assert [t.state for t in study.get_trials()][-1] == TrialState.COMPLETE


def test_queued_copies_are_the_budgets_trials(backend_url, caplog):
    """On a budget of 3, a trial finished and two cut short, one after the other. Each is
    re-queued while the budget needs it, counted under the gate's lock with the copies already
    queued; a new trial is refused while queued copies fill the budget (the copy queued as
    another worker created the budget's last trial waited for ever, seen in CI), and the copies
    are taken. A third cut short finds the budget filled by a queued trial: not re-queued."""
    storage = open_storage(backend_url, create=True, heartbeat_interval=1, grace_period=60)
    study = optuna.create_study(study_name="s", storage=storage)
    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
    gate = lambda taken: taken < 3  # noqa: E731
    gate_takes(study, gate)
    study.tell(study.ask({"x": optuna.distributions.FloatDistribution(0, 1)}), 1.0)
    first, second = study.ask(), study.ask()
    with pytest.raises(BudgetSpent):
        study.ask()
    requeue_cut_short(study, first._trial_id)
    with pytest.raises(BudgetSpent):  # a new trial: the queued copy is the budget's third
        storage.create_new_trial(study._study_id)
    requeue_cut_short(study, second._trial_id)
    copies = [study.ask(), study.ask()]
    assert [t.number for t in copies] == [3, 4]
    with pytest.raises(BudgetSpent):
        study.ask()
    study.enqueue_trial({"x": 0.5})  # as a stopped worker queues its trial
    with caplog.at_level(logging.WARNING):
        requeue_cut_short(study, copies[0]._trial_id)
    assert (
        "trial 3 (worker ?) was cut short by a storage error: failed, not re-queued (the "
        "budget's trials are all finished, running or queued)" in caplog.text
    )
    states = [t.state for t in study.get_trials()]
    assert states.count(TrialState.WAITING) == 1 and states.count(TrialState.FAIL) == 3


def _has_heartbeat(storage: Any, url: str, trial_id: int) -> bool:
    if isinstance(storage, HeartbeatJournalStorage):
        return os.path.exists(os.path.join(storage.heartbeat_dir, str(trial_id)))
    assert isinstance(storage, RDBStorage)
    with storage.engine.connect() as connection:
        query = sqlalchemy.text("SELECT count(*) FROM trial_heartbeats WHERE trial_id = :id")
        return connection.execute(query, {"id": trial_id}).scalar() == 1


def test_killed_worker_trial_is_failed_and_retried(backend_url):
    storage = open_storage(backend_url, create=True, heartbeat_interval=1, grace_period=3)
    study = optuna.create_study(study_name="s", storage=storage)
    worker = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, backend_url], stderr=subprocess.PIPE, text=True
    )

    def running() -> list[optuna.trial.FrozenTrial]:
        if worker.poll() is not None:
            pytest.fail(f"the worker exited early:\n{worker.stderr.read()}")
        return [
            t
            for t in study.get_trials(states=(TrialState.RUNNING,))
            if "x" in t.params and _has_heartbeat(storage, backend_url, t._trial_id)
        ]

    try:
        (killed,) = wait_for(running, timeout=30, what="the worker's trial to run")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        worker.stderr.close()
    assert worker.returncode == -signal.SIGKILL

    wait_for(
        lambda: killed._trial_id in storage._get_stale_trial_ids(study._study_id),
        timeout=15,
        what="the killed trial to go stale",
    )
    study.optimize(quick, n_trials=2)

    trials = study.get_trials()
    assert len(trials) == 3
    assert trials[killed.number].state == TrialState.FAIL
    (retry,) = [t for t in trials if t.system_attrs.get("failed_trial") == killed.number]
    assert retry.state == TrialState.COMPLETE
    assert retry.params == killed.params
    assert all(t.state != TrialState.RUNNING for t in trials)
    assert all(t.state != TrialState.WAITING for t in trials)


# --------------------------------------------------------------------------- concurrency


def _worker(url: str, create: bool, go: Any, errors: Path, index: int) -> None:
    """One worker: wait for the common start, open the storage, run two quick trials."""
    try:
        go.wait(60)
        storage = open_storage(url, create=create)
        sampler = optuna.samplers.RandomSampler()
        if create:
            study = optuna.create_study(
                study_name="s", storage=storage, sampler=sampler, load_if_exists=True
            )
        else:
            study = load_study(storage, "s", sampler=sampler)
        study.optimize(quick, n_trials=2)
    except BaseException:
        (errors / f"worker-{index}").write_text(traceback.format_exc())
        raise


@pytest.mark.parametrize("create_concurrently", [False, True], ids=["workers", "creators"])
def test_sixteen_processes_at_once(backend_url, tmp_path, create_concurrently):
    """16 worker processes open one storage together: no crash, 32 trials, unique numbers.

    "creators" also race to create the journal's folder / the PostgreSQL schema and the study,
    which crashed 31 of 32 workers on a fresh PostgreSQL. The workers are forked (each opens
    its own storage) because 16 interpreters importing Optuna take many seconds on few cores.
    """
    if not create_concurrently:
        storage = open_storage(backend_url, create=True)
        optuna.create_study(study_name="s", storage=storage)
        if isinstance(storage, RDBStorage):
            storage.engine.dispose()  # no pooled connection may be shared with the children
        del storage
    context = multiprocessing.get_context("fork")
    go = context.Event()
    workers = [
        context.Process(target=_worker, args=(backend_url, create_concurrently, go, tmp_path, i))
        for i in range(16)
    ]
    for worker in workers:
        worker.start()
    go.set()
    for worker in workers:
        worker.join(timeout=60)
    for worker in workers:
        if worker.is_alive():
            worker.kill()
            worker.join()
    errors = [p.read_text() for p in sorted(tmp_path.glob("worker-*"))]
    assert not errors, errors[0]
    assert [w.exitcode for w in workers] == [0] * 16

    trials = load_study(open_storage(backend_url), "s").get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 32
    assert sorted(t.number for t in trials) == list(range(32))


# --------------------------------------------------------------------------- errors


def test_missing_database_is_named(postgres_server):
    name = f"hyperscan_missing_{uuid.uuid4().hex[:8]}"
    url = sqlalchemy.engine.make_url(postgres_server).set(database=name)
    with pytest.raises(StorageError) as info:
        open_storage(url.render_as_string(hide_password=False))
    message = str(info.value)
    assert f"database '{name}' does not exist" in message
    assert "password" not in message.lower()
    assert "invalid data in the commit" not in message


def test_password_never_shown(postgres_server):
    url = "postgresql://postgres:s3cret@127.0.0.1:5432/nonexistent_db"
    with pytest.raises(StorageError) as info:
        open_storage(url)
    for text in (str(info.value), repr(info.value), info.value.cause, info.value.url):
        assert "s3cret" not in text
    assert "postgres:***@127.0.0.1" in str(info.value)
    # Even a driver message that echoes the password is scrubbed.
    echoed = describe_error(RuntimeError("login postgres/s3cret rejected"), url)
    assert "s3cret" not in str(echoed)
    # A short one only where a URL or DSN holds it, so the message stays readable.
    short = "postgresql://u:e@h/db"
    text = str(describe_error(RuntimeError("bad login; dsn user=u password=e"), short))
    assert "bad login; dsn user=u password=***" in text and "u:***@h" in text


def test_connection_refused_is_quick():
    start = time.monotonic()
    with pytest.raises(StorageError, match="connection refused by 127.0.0.1:1"):
        open_storage("postgresql://postgres@127.0.0.1:1/test")
    assert time.monotonic() - start < 5


@contextmanager
def role_url(postgres_url: str, *statements: str) -> Iterator[str]:
    """The server's URL for a new login role made by ``statements`` (``{role}`` names it),
    which is dropped afterwards with whatever it was granted."""
    role = f"hyperscan_role_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(postgres_url.replace("+psycopg2", ""))
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement.format(role=f'"{role}"'))
        url = sqlalchemy.engine.make_url(postgres_url).set(username=role)
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f'DROP OWNED BY "{role}"')
            cursor.execute(f'DROP ROLE IF EXISTS "{role}"')
        admin.close()


def test_connection_limit_is_explained(postgres_url):
    limited = "CREATE ROLE {role} LOGIN CONNECTION LIMIT 0"
    with (
        role_url(postgres_url, limited) as url,
        pytest.raises(StorageError, match="CONNECTION LIMIT is reached"),
    ):
        open_storage(url, create=True)


def test_a_user_who_may_only_read_is_told_so_by_study_create(postgres_url):
    """A study's first write refused by the server is a StorageError naming the privilege,
    not Optuna's "invalid data in the commit" traceback."""
    open_storage(postgres_url, create=True)  # the schema, as its owner
    reading = ("CREATE ROLE {role} LOGIN", "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    with role_url(postgres_url, *reading) as url:
        reader = open_storage(url)
        with pytest.raises(StorageError, match="lacks a privilege: permission denied"):
            create_study(scan_runcard_from_dict(TINY_SCAN), reader, "s")
        reader.engine.dispose()


def optuna_wrapped(driver_error: Exception) -> Exception:
    """The exception chain Optuna raises for a failed commit: Optuna ← SQLAlchemy ← driver."""
    try:
        try:
            raise driver_error
        except Exception as exc:
            raise sqlalchemy.exc.OperationalError("SELECT 1", {}, exc) from exc
    except sqlalchemy.exc.OperationalError as exc:
        try:
            raise StorageInternalError(
                "An exception is raised during the commit. This typically happens due to "
                "invalid data in the commit, e.g. exceeding max length. "
            ) from exc
        except StorageInternalError as wrapped:
            return wrapped


@pytest.mark.parametrize(
    ("driver_error", "expected"),
    [
        (sqlite3.OperationalError("database is locked"), "SQLite database is locked"),
        (psycopg2.OperationalError("FATAL:  sorry, too many clients already"), "connection slots"),
        (
            psycopg2.OperationalError(
                "FATAL:  remaining connection slots are reserved for non-replication superuser "
                "connections"
            ),
            "connection slots",
        ),
        (
            psycopg2.OperationalError('FATAL:  password authentication failed for user "bob"'),
            "password authentication failed for user 'bob'",
        ),
        (
            psycopg2.errors.UndefinedTable('relation "studies" does not exist'),
            "run `hyperscan study create` first",
        ),
    ],
)
def test_describe_error_unwraps_optuna(driver_error, expected):
    error = describe_error(optuna_wrapped(driver_error), "postgresql://bob:pw@db:5432/scans")
    assert expected in str(error)
    assert "invalid data in the commit" not in str(error)
    assert "bob:***@db" in str(error)


# One error per cause of describe_error's table, in the table's order, and what it is told as.
ONE_PER_CAUSE = [
    (sqlite3.OperationalError("database is locked"), "SQLite database is locked by another"),
    (psycopg2.OperationalError("FATAL:  sorry, too many clients already"), "db:5432 has no free"),
    (
        psycopg2.OperationalError('FATAL:  too many connections for role "bob"'),
        "refuses more connections for role 'bob' (its CONNECTION LIMIT",
    ),
    (
        psycopg2.OperationalError('FATAL:  password authentication failed for user "bob"'),
        "password authentication failed for user 'bob' at db:5432",
    ),
    (psycopg2.OperationalError("no password supplied"), "password authentication failed at db"),
    (
        psycopg2.OperationalError('FATAL:  database "nope" does not exist'),
        "database 'nope' does not exist on db:5432: create it (createdb nope)",
    ),
    (psycopg2.OperationalError('FATAL:  role "eve" does not exist'), "(role) 'eve' does not"),
    (psycopg2.OperationalError("FATAL:  no pg_hba.conf entry for host"), "db:5432 does not accept"),
    (
        psycopg2.OperationalError("port 5432 failed: Connection refused"),
        "connection refused by db:5432: no database server listens there",
    ),
    (
        psycopg2.OperationalError('could not translate host name "Pgbouncer" to address'),
        "db:5432 does not resolve now, though it did when the worker started",
    ),
    (
        psycopg2.OperationalError('could not translate host name "db" to address'),
        "unknown host in db:5432",
    ),
    (
        psycopg2.OperationalError("no answer within 60 s (to a statement): a hung server"),
        "db:5432 gave no answer within 60 s (to a statement: a hung server or network",
    ),
    (
        sqlalchemy.exc.PendingRollbackError(
            "Can't reconnect until invalid transaction is rolled back.  Please rollback() fully"
        ),
        "the connection to db:5432 was lost inside a transaction",
    ),
    (
        psycopg2.errors.LockNotAvailable("canceling statement due to lock timeout"),
        "db:5432 did not give a worker the budget's lock within $HYPERSCAN_DB_TIMEOUT",
    ),
    (
        psycopg2.errors.QueryCanceled("canceling statement due to statement timeout"),
        "db:5432 did not finish a statement within $HYPERSCAN_DB_TIMEOUT",
    ),
    (psycopg2.OperationalError("timeout expired"), "db:5432 is unreachable (no answer within 5 s)"),
    (psycopg2.errors.UndefinedTable('relation "studies" does not exist'), "no hyperscan/Optuna"),
    (
        psycopg2.errors.InsufficientPrivilege("permission denied for table studies\nDETAIL: x"),
        "lacks a privilege: permission denied for table studies (storage",
    ),
    (sqlite3.OperationalError("unable to open database file"), "cannot open the SQLite file"),
    (json.JSONDecodeError("Expecting value", "x", 0), "the journal file is damaged"),
    (
        RuntimeError("The runtime optuna version 5 is no longer compatible with the table schema"),
        "The runtime optuna version 5 is no longer compatible with the table schema (storage",
    ),
    (ValueError("invalid literal for int() with base 10: 'x1'"), "the port 'x1' is not a number"),
]


@pytest.mark.parametrize(
    ("message", "passes"),
    [
        ('FATAL:  too many connections for role "bob"', True),
        ("FATAL:  sorry, too many clients already", True),
        ("server closed the connection unexpectedly", True),
        ('connection to server at "db", port 5432 failed: Connection refused', True),
        ("no answer within 60 s (to a statement): a hung server or network", True),
        ('FATAL:  password authentication failed for user "bob"', False),
        ("FATAL:  SASL authentication failed", False),  # PgBouncer's words for it
        ('FATAL:  database "scans" does not exist', False),
        ('could not translate host name "dbb" to address: Name or service not known', False),
    ],
)
def test_an_outage_or_a_full_connection_limit_is_waited_out_a_wrong_setting_is_not(message, passes):
    """A worker starting in a burst (a role's CONNECTION LIMIT reached) or during a restart
    tries again; a wrong password, database or host name would fail the same way each time."""
    assert transient_error(optuna_wrapped(psycopg2.OperationalError(message))) is passes


def test_a_host_name_that_stops_resolving_is_waited_out_if_it_resolved_before(
    postgres_url, monkeypatch
):
    """A compose service's name stops resolving while its container restarts (a PgBouncer
    killed mid-scan crashed both workers with a traceback): once a storage has opened on a
    host, its name not resolving is an outage, waited out; a name never reached is a mistake,
    told at once."""
    monkeypatch.setattr(_errors, "_REACHED", set())
    gone = optuna_wrapped(
        psycopg2.OperationalError('could not translate host name "127.0.0.1" to address')
    )
    assert not transient_error(gone)
    open_storage(postgres_url, create=True).engine.dispose()
    assert transient_error(gone)
    assert "does not resolve now, though it did" in str(describe_error(gone, postgres_url))


def test_a_refusal_the_table_names_ends_a_worker_in_one_line_an_unknown_one_keeps_its_trace(
    tmp_path,
):
    """A privilege revoked or a password changed mid-scan is the database refusing for a cause
    the table names: the worker ends on one line saying it (it printed Optuna's traceback); a
    database error the table does not know (a bug in what was sent) keeps its traceback."""
    storage = open_storage(str(tmp_path / DEFAULT_STORAGE), create=True)
    revoked = psycopg2.errors.InsufficientPrivilege("permission denied for table trials")
    told = pytest.raises(StorageError, match="lacks a privilege: permission denied for table")
    with told, explained_storage_errors(storage):
        raise optuna_wrapped(revoked)
    bug = psycopg2.errors.SyntaxError('syntax error at or near "SELEC"')
    with pytest.raises(sqlalchemy.exc.ProgrammingError), explained_storage_errors(storage):
        raise sqlalchemy.exc.ProgrammingError("SELEC 1", {}, bug)


def test_every_cause_of_the_table_is_told(monkeypatch):
    """No cause is shadowed by an earlier one (the table is read in order), none is untested;
    a missing schema is told as a NoSchemaError, for `study list` to say "no studies"."""
    monkeypatch.setattr(_errors, "_REACHED", set())
    note_reached("postgresql://bob@pgbouncer:6432/scans")  # reached before, as a worker has
    assert len(ONE_PER_CAUSE) == len(CAUSES)
    for (error, expected), cause in zip(ONE_PER_CAUSE, CAUSES, strict=True):
        told = describe_error(optuna_wrapped(error), "postgresql://bob:pw@db:5432/scans")
        assert expected in str(told), cause
        assert type(told) is cause.error
    assert [cause.error for cause in CAUSES].count(NoSchemaError) == 1


def test_journal_under_a_file_is_explained(tmp_path):
    (tmp_path / "plain").write_text("")
    with pytest.raises(StorageError, match="is a file, not a folder"):
        open_storage(str(tmp_path / "plain" / "sub" / DEFAULT_STORAGE), create=True)


def test_journal_in_read_only_folder_is_explained():
    # A world-reachable folder, so that root can test as user "nobody" (root ignores modes).
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        folder = Path(top) / "ro"
        folder.mkdir(mode=0o555)
        path = folder / DEFAULT_STORAGE
        as_root = os.geteuid() == 0
        if as_root:
            os.seteuid(65534)
        try:
            with pytest.raises(StorageError) as info:
                open_storage(str(path), create=True)
        finally:
            if as_root:
                os.seteuid(0)
            folder.chmod(0o755)
    assert "no permission to create or write" in str(info.value)
    assert str(path) in str(info.value)


def test_readers_leave_nothing_next_to_the_journal(tmp_path: Path) -> None:
    """The heartbeat folder comes with the first heartbeat, not with opening the journal."""
    journal = tmp_path / "scan.journal"
    optuna.create_study(study_name="s", storage=open_storage(str(journal), create=True))
    optuna.load_study(study_name="s", storage=open_storage(str(journal)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.journal"]


def test_a_file_that_is_not_a_journal_is_refused_and_left_alone(tmp_path):
    """A mistyped --storage must not append a journal record to someone's file."""
    binary = tmp_path / "results.npz"
    binary.write_bytes(b"PK\x03\x04\x00\xff\xfe binary")
    database = tmp_path / "scan.db"
    sqlite3.connect(database).execute("create table t (x)").connection.close()
    for path, cause in ((binary, "is not a journal file"), (database, "sqlite:///")):
        before = path.read_bytes()
        for create in (True, False):
            with pytest.raises(StorageError, match=cause):
                open_storage(str(path), create=create)
        assert path.read_bytes() == before


def test_a_device_or_a_pipe_is_refused_as_a_journal(tmp_path):
    """Appending to a FIFO waits for a reader forever, and /dev/null cannot be synced."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for path in (pipe, Path(os.devnull)):
        for create in (True, False):
            with pytest.raises(StorageError, match="is not a regular file, as a journal must be"):
                open_storage(str(path), create=create)


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite:///:memory:?cache=shared",
        "sqlite://?cache=shared",
        "sqlite:///file:mem1?mode=memory&uri=true",
    ],
)
def test_an_in_memory_sqlite_database_is_refused(url):
    """`study create` would say "created" of a study that ends with its process."""
    with pytest.raises(StorageError, match="an in-memory SQLite database keeps nothing"):
        resolve_url(url)


def test_option_and_port_mistakes_read_as_such(tmp_path):
    with pytest.raises(StorageError) as info:
        open_storage(
            str(tmp_path / "s.journal"), create=True, heartbeat_interval=60, grace_period=30
        )
    assert str(info.value).startswith("grace_period (30 s) must exceed heartbeat_interval (60 s)")
    assert "ValueError" not in str(info.value) and "(storage:" not in str(info.value)
    with pytest.raises(StorageError, match="the port 'notaport' is not a number"):
        open_storage("postgresql://postgres@127.0.0.1:notaport/test")


def test_a_journal_cut_mid_record_is_refused_with_its_repair(tmp_path):
    """Appending after a torn last record would merge the two lines and lose the study."""
    journal = tmp_path / "scan.journal"
    optuna.create_study(study_name="s", storage=open_storage(str(journal), create=True))
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"op_code": 0, "worker_id": "cut')
    for create in (True, False):
        with pytest.raises(StorageError, match=f"truncate -s {len(whole)} "):
            open_storage(str(journal), create=create)
    subprocess.run(["truncate", "-s", str(len(whole)), str(journal)], check=True)
    storage = open_storage(str(journal))
    assert optuna.load_study(study_name="s", storage=storage).trials == []


def test_a_failed_heartbeat_names_the_trial_by_its_number(tmp_path, caplog):
    """Ids run across all studies of a storage; users know a trial by its number."""
    journal = tmp_path / "scan.journal"
    storage = open_storage(str(journal), create=True, heartbeat_interval=1, grace_period=3)
    with pytest.warns(UserWarning, match="Heartbeat of storage"):  # ask() outside optimize()
        optuna.create_study(study_name="a", storage=storage).ask()
        trial = optuna.create_study(study_name="b", storage=storage).ask()
    assert (trial._trial_id, trial.number) == (1, 0)
    storage.record_heartbeat(trial._trial_id)
    shutil.rmtree(f"{journal}.heartbeats")
    Path(f"{journal}.heartbeats").write_text("not a folder")
    with caplog.at_level(logging.WARNING):
        storage.record_heartbeat(trial._trial_id)  # the thread survives: no exception
    assert "could not record the heartbeat of trial 0: " in caplog.text


def test_a_connection_lost_as_the_lock_holder_takes_its_trial_is_an_outage(postgres_url):
    """The budget lock's connection is lost after the trial is counted, as the trial is
    created in its transaction (PgBouncer killed mid-take ended a worker so, in about one
    run in six): Optuna's own retries of the creation meet SQLAlchemy's PendingRollbackError,
    the outage's only trace. It is waited out as an outage, nothing is left RUNNING, and the
    next ask takes a trial."""
    storage = open_storage(postgres_url, create=True, heartbeat_interval=1, grace_period=60)
    study = optuna.create_study(study_name="s", storage=storage)
    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
    killer = psycopg2.connect(postgres_url.replace("postgresql+psycopg2://", "postgresql://"))
    killer.autocommit = True
    cut = []

    def gate(taken: int) -> bool:  # called under the lock, before the trial is created
        if not cut:
            with killer.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks"
                    " WHERE locktype = 'advisory' AND objid = %s AND granted",
                    (study._study_id,),
                )
                cut.extend(cursor.fetchall())
        return taken < 5

    gate_takes(study, gate)
    try:
        with pytest.raises(StorageInternalError) as lost, taking(study):
            study.ask()
        assert cut == [(True,)]
        assert transient_error(lost.value)
        assert "was lost inside a transaction" in str(describe_error(lost.value, postgres_url))
        give_back_lost_takes(study)
        assert [t.state for t in study.get_trials()] in ([], [TrialState.WAITING])
        assert study.ask().number == 0
    finally:
        killer.close()


def test_a_budget_lock_held_too_long_is_a_transient_error_named_as_such(postgres_url, monkeypatch):
    """Another session holds the budget's lock past ``$HYPERSCAN_DB_TIMEOUT``: the take gives
    up in time (the server's ``lock_timeout``, which PgBouncer passes on, not the connection's
    ``statement_timeout``, which it drops), with an error that is waited out as an outage is,
    and said as a locked server; once the lock is free, the take goes through."""
    storage = open_storage(postgres_url, create=True, heartbeat_interval=1, grace_period=60)
    study = optuna.create_study(study_name="s", storage=storage)
    gate_takes(study, lambda taken: taken < 5)
    monkeypatch.setenv(TIMEOUT_ENV, "1")
    holder = psycopg2.connect(postgres_url.replace("postgresql+psycopg2://", "postgresql://"))
    try:
        with holder.cursor() as cursor:  # the lock of _RDBStorage._counted, held
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", (0x74616B65, study._study_id))
        started = time.monotonic()
        with pytest.raises(sqlalchemy.exc.OperationalError) as error:
            study.ask()
        assert 0.9 <= time.monotonic() - started < 5.0
        assert transient_error(error.value)
        assert "locked server" in describe_error(error.value, postgres_url).cause
    finally:
        holder.rollback()
        holder.close()
    assert study.ask().number == 0
