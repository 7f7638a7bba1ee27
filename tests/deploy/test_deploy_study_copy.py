# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan study copy`: moving a study from the embedded journal to PostgreSQL."""

from __future__ import annotations

import datetime
import errno
import os
import warnings

import optuna
import pytest
import sqlalchemy
import yaml
from click.testing import CliRunner
from optuna.distributions import FloatDistribution
from optuna.exceptions import StorageInternalError
from optuna.trial import FrozenTrial, TrialState

import hyperscan.scan._api
from hyperscan.cli import main
from hyperscan.runcard import load_scan_runcard
from hyperscan.scan import open_storage
from hyperscan.scan._study import (
    FINGERPRINT_ATTR,
    RUNCARD_ATTR,
    VERSION_ATTR,
    create_study,
    open_study,
)
from hyperscan.scan.storage import (
    HeartbeatJournalStorage,
    redact,
    resolve_url,
    study_names,
)
from hyperscan.scan.storage._rdb import _RDBStorage

optuna.logging.set_verbosity(optuna.logging.ERROR)
PARAM = "optimizer.learning_rate"
DISTRIBUTION = FloatDistribution(1e-3, 1e-2, log=True)


def _trial(state: TrialState, value: float | None, lr: float, **user_attrs) -> FrozenTrial:
    end = datetime.datetime(2026, 1, 2, 3, 4, 5)
    return FrozenTrial(
        number=0,
        state=state,
        value=value,
        datetime_start=end - datetime.timedelta(seconds=42),
        datetime_complete=end,
        params={PARAM: lr},
        distributions={PARAM: DISTRIBUTION},
        user_attrs=user_attrs,
        system_attrs={},
        intermediate_values={100: 9.5, 200: value if value is not None else 12.0},
        trial_id=0,
    )


@pytest.fixture
def journal_study(tmp_path, tiny_runcard):
    """A study as workers leave it: complete, trashed (pruned) and re-queued trials."""
    journal = tmp_path / "hyperscan.journal"
    study, _ = create_study(
        load_scan_runcard(tiny_runcard), open_storage(str(journal), create=True), "tiny"
    )
    fit = {"members": 2, "threads": 2, "seconds": 41.5}
    study.add_trial(_trial(TrialState.COMPLETE, 3.25, 0.004, fit=fit, statistics={"mean": 3.25}))
    study.add_trial(_trial(TrialState.COMPLETE, 2.5, 0.006, fit=fit, statistics={"mean": 2.5}))
    study.add_trial(_trial(TrialState.PRUNED, None, 0.009, trashed="1 diverged: replica 2"))
    study.enqueue_trial({PARAM: 0.005}, user_attrs={"retry_of": 1})
    return journal, study


def _snapshot(study: optuna.Study) -> list[tuple]:
    return [
        (
            t.number,
            t.state,
            t.value,
            t.params,
            t.distributions,
            t.user_attrs,
            t.intermediate_values,
            t.datetime_start,
            t.datetime_complete,
        )
        for t in study.get_trials()
    ]


def copy(*args: str):
    return CliRunner().invoke(main, ["study", "copy", *args])


def test_copy_from_the_journal_to_postgresql_carries_runcard_and_trials(
    journal_study, postgres_url, tmp_path
):
    journal, source = journal_study
    result = copy("--from", str(journal), "--to", postgres_url, "--study", "tiny")
    assert result.exit_code == 0, result.output
    assert "study 'tiny' copied to postgresql" in result.output
    assert "2 complete, 1 trashed, 1 waiting" in result.output

    target = open_storage(postgres_url)
    setup = open_study(target, "tiny")  # runcard and data fingerprint came along
    for key in (RUNCARD_ATTR, FINGERPRINT_ATTR, VERSION_ATTR):
        assert setup.study.user_attrs[key] == source.user_attrs[key]
    assert _snapshot(setup.study) == _snapshot(source)
    assert setup.study.best_trial.number == 1

    # the copy serves hyperscan as the original did
    for storage in (str(journal), postgres_url):
        status = CliRunner().invoke(
            main, ["study", "status", "--study", "tiny", "--storage", storage]
        )
        assert status.exit_code == 0, status.output
        assert "best: trial 1, value 2.5" in status.output
    exported = {}
    for label, storage in (("journal", str(journal)), ("postgresql", postgres_url)):
        output = tmp_path / f"{label}.yml"
        args = ["export", "--study", "tiny", "--storage", storage, "-o", str(output)]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        exported[label] = yaml.safe_load(output.read_text())
    assert exported["journal"] == exported["postgresql"]
    assert exported["postgresql"]["optimizer"]["learning_rate"] == pytest.approx(0.006)


def test_copy_refuses_an_existing_study_and_can_rename(journal_study, postgres_url):
    journal, _ = journal_study
    assert copy("--from", str(journal), "--to", postgres_url, "--study", "tiny").exit_code == 0
    again = copy("--from", str(journal), "--to", postgres_url, "--study", "tiny")
    assert again.exit_code == 2
    assert "study 'tiny' exists in postgresql" in again.output and "--as" in again.output
    renamed = copy("--from", str(journal), "--to", postgres_url, "--study", "tiny", "--as", "t2")
    assert renamed.exit_code == 0, renamed.output
    assert study_names(open_storage(postgres_url)) == ["tiny", "t2"]


def test_copy_refuses_a_study_with_running_trials(journal_study, postgres_url):
    journal, source = journal_study
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna: heartbeats are meant for optimize()
        source.ask()  # a worker holds a trial (the re-queued one, number 3)
    result = copy("--from", str(journal), "--to", postgres_url, "--study", "tiny")
    assert result.exit_code == 2
    assert "running trials (3): stop its workers first" in result.output
    assert "studies" not in _tables(postgres_url)  # nothing was written


def _tables(url: str) -> list[str]:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        return sqlalchemy.inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_copy_mistakes_exit_2_with_the_cause(journal_study, tmp_path):
    journal, _ = journal_study
    unknown = copy("--from", str(journal), "--to", str(tmp_path / "b.journal"), "--study", "nope")
    assert unknown.exit_code == 2 and "no study named 'nope'" in unknown.output
    missing = copy("--from", str(tmp_path / "none.journal"), "--to", "x.journal", "--study", "t")
    assert missing.exit_code == 2 and "no journal file" in missing.output
    same = copy("--from", str(journal), "--to", str(journal), "--study", "tiny")
    assert same.exit_code == 2 and "same study" in same.output
    unreachable = "postgresql://hyperscan:s3cret-pw@127.0.0.1:1/scans"
    refused = copy("--from", str(journal), "--to", unreachable, "--study", "tiny")
    assert refused.exit_code == 2 and "connection refused" in refused.output
    assert "s3cret-pw" not in refused.output
    # within one journal under another name
    inside = copy("--from", str(journal), "--to", str(journal), "--study", "tiny", "--as", "t2")
    assert inside.exit_code == 0, inside.output


def _io_error(*args, **kwargs):
    raise OSError(errno.EIO, os.strerror(errno.EIO))


@pytest.mark.parametrize(
    ("failing", "method", "named"),
    [
        # failing a dead worker's trial, before anything is written
        (HeartbeatJournalStorage, "get_all_trials", "source"),
        # read only by the copy itself, after the destination opened
        (HeartbeatJournalStorage, "get_study_system_attrs", "source"),
        # writing a trial (Optuna's cache calls _create_new_trial)
        (_RDBStorage, "_create_new_trial", "destination"),
    ],
)
def test_a_failed_copy_names_the_storage_that_failed(
    journal_study, postgres_url, monkeypatch, failing, method, named
):
    """A user told of the wrong storage would look at the wrong database."""
    journal, _ = journal_study
    target = sqlalchemy.engine.make_url(postgres_url).set(password="s3cret")  # trust auth
    target = target.render_as_string(hide_password=False)
    monkeypatch.setattr(failing, method, _io_error)
    result = copy("--from", str(journal), "--to", target, "--study", "tiny")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "s3cret" not in result.output
    where = {"source": redact(resolve_url(str(journal))), "destination": redact(target)}
    assert (
        result.stderr == f"error: OSError: [Errno 5] Input/output error (storage: {where[named]})\n"
    )
    monkeypatch.undo()
    assert "tiny" not in study_names(open_storage(postgres_url, create=True))


def _connection_dropped(*args, **kwargs):
    """A read as the database goes away under it, as Optuna reports it."""
    try:
        raise sqlalchemy.exc.OperationalError(
            "SELECT", {}, Exception("server closed the connection unexpectedly")
        )
    except sqlalchemy.exc.OperationalError as cause:
        raise StorageInternalError("invalid data in the commit") from cause


def test_a_connection_dropped_reading_the_copy_back_is_a_message(
    journal_study, postgres_url, monkeypatch
):
    """The copy is written, then the destination goes away as its trials are counted for the
    summary: the cause in a line naming the destination (never its password), exit 2."""
    journal, _ = journal_study
    target = sqlalchemy.engine.make_url(postgres_url).set(password="s3cret")  # trust auth
    target = target.render_as_string(hide_password=False)
    copy_study = hyperscan.scan._api._copy_study

    def copied_then_dropped(*args, **kwargs):
        copied = copy_study(*args, **kwargs)
        # Optuna's cache reads an RDB study's trials through _get_trials.
        monkeypatch.setattr(_RDBStorage, "_get_trials", _connection_dropped)
        return copied

    monkeypatch.setattr(hyperscan.scan._api, "_copy_study", copied_then_dropped)
    result = copy("--from", str(journal), "--to", target, "--study", "tiny")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "s3cret" not in result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    where = redact(target)
    assert result.stderr.endswith(
        f": server closed the connection unexpectedly (storage: {where})\n"
    )
