# SPDX-License-Identifier: GPL-3.0-or-later
"""What every command says when its storage fails: a wrong URL, a closed port, a server
that refuses, a connection dropped mid-read; one line, never the password.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, NoReturn

import optuna
import pytest
import sqlalchemy
from _service import TINY_SCAN, assert_clean_failure, cli, create, write_card
from optuna.exceptions import StorageInternalError

from hyperscan.scan import open_storage
from hyperscan.scan.storage import _retry, load_study, redact, resolve_url

COMMANDS = {
    "study create": ["study", "create", "{runcard}"],
    "worker": ["worker", "--study", "s"],
    "study status": ["study", "status", "--study", "s"],
    "study list": ["study", "list"],
    "export": ["export", "--study", "s", "-o", "{output}"],
    "scan": ["scan", "{runcard}", "--workers", "1", "-o", "{output}"],
}


def command_line(name: str, runcard: Path, output: Path, storage: str) -> list[str]:
    args = [a.format(runcard=runcard, output=output) for a in COMMANDS[name]]
    return [*args, "--storage", storage]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_wrong_storage_url(command, tmp_path, monkeypatch):
    """Unknown scheme; a closed port fails fast with `connection refused`; a password in the
    URL is never printed; nothing is written anywhere."""
    monkeypatch.chdir(tmp_path)
    runcard = write_card(tmp_path / "s.yml", TINY_SCAN)
    output = tmp_path / "best.yml"
    from hyperscan.cli import configure_tensorflow

    configure_tensorflow()  # TensorFlow's start-up is not what is timed below
    if command == "worker":  # a starting worker waits out a refusal (a restarting server)
        monkeypatch.setattr(_retry, "STORAGE_RETRY_WAITS", (0.1,))

    message = assert_clean_failure(cli(*command_line(command, runcard, output, "mysql://u@h/db")))
    assert "unsupported storage URL scheme 'mysql'" in message
    assert "postgresql://" in message and "journal://" in message  # what would work

    for storage in (
        "postgresql://postgres@127.0.0.1:1/test",
        "postgresql://postgres:s3cret@127.0.0.1:1/x",
    ):
        start = time.monotonic()
        result = cli(*command_line(command, runcard, output, storage))
        took = time.monotonic() - start
        message = assert_clean_failure(result)
        assert "connection refused by 127.0.0.1:1" in message
        assert took < 5, f"{took:.1f} s to report a closed port"
        assert "s3cret" not in result.output
    assert "postgres:***@127.0.0.1:1/x" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yml"]


def test_password_never_printed_by_a_real_server(postgres_server, tmp_path):
    """The server answers (no such database); the message names it, never the password."""
    storage = sqlalchemy.engine.make_url(postgres_server).set(
        password="s3cret", database="hyperscan_no_such_database"
    )
    storage = storage.render_as_string(hide_password=False)
    runcard = write_card(tmp_path / "s.yml", TINY_SCAN)
    for command in COMMANDS:
        result = cli(*command_line(command, runcard, tmp_path / "best.yml", storage))
        message = assert_clean_failure(result)
        assert "database 'hyperscan_no_such_database' does not exist" in message, command
        assert "s3cret" not in result.output, command
        assert ":***@" in message


def _connection_dropped(*args: Any, **kwargs: Any) -> NoReturn:
    """A read as the database goes away under it, as Optuna reports it."""
    try:
        raise sqlalchemy.exc.OperationalError(
            "SELECT", {}, Exception("server closed the connection unexpectedly")
        )
    except sqlalchemy.exc.OperationalError as cause:
        raise StorageInternalError("invalid data in the commit") from cause


# The storage methods behind a study's trials and its user attributes (the runcard): on
# PostgreSQL Optuna's cache reads the trials through _get_trials.
READS = {
    "trials": {"journal": "get_all_trials", "postgresql": "_get_trials"},
    "runcard": {"journal": "get_study_user_attrs", "postgresql": "get_study_user_attrs"},
}


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("command", ["study status", "study list", "export", "report"])
def test_a_connection_dropped_after_the_storage_opened_is_a_message(
    url, tmp_path, monkeypatch, command, read
):
    """The storage opens, then the database goes away while the command reads the study:
    the cause in a line naming the storage (never its password), exit 2, not a traceback."""
    backend = "postgresql" if url.startswith("postgresql") else "journal"
    if backend == "postgresql":  # trust authentication: the server ignores the password
        url = sqlalchemy.engine.make_url(url).set(password="s3cret")
        url = url.render_as_string(hide_password=False)
    runcard = write_card(tmp_path / "s.yml", TINY_SCAN)
    create(runcard, url, "s")
    # a finished trial: else `report` refuses the study before it reads its runcard
    load_study(open_storage(url), "s").add_trial(optuna.trial.create_trial(value=1.0))
    monkeypatch.setattr(type(open_storage(url)), READS[read][backend], _connection_dropped)
    output = tmp_path / "best.yml"
    if command == "report":
        result = cli("report", "--study", "s", "--storage", url, "-o", output)
    else:
        result = cli(*command_line(command, runcard, output, url))
    message = assert_clean_failure(result)
    where = redact(resolve_url(url))
    assert message.endswith(f": server closed the connection unexpectedly (storage: {where})\n")
    assert message.count("\n") == 1 and "invalid data in the commit" not in message
    assert "s3cret" not in result.output
    assert not output.exists()
