# SPDX-License-Identifier: GPL-3.0-or-later
"""The short commands that read a storage (`study status`, `study list`, `study copy`,
`export`, `report`): unknown studies, empty arguments, Ctrl-C, a storage's studies.
"""

from __future__ import annotations

from typing import Any, NoReturn

import optuna
import pytest
import sqlalchemy
from _service import TINY_SCAN, assert_clean_failure, cli, create, scan_card, snapshot, write_card
from optuna.trial import TrialState

import hyperscan.scan._api
from hyperscan.scan import open_storage
from hyperscan.scan.storage import load_study, redact, resolve_url


@pytest.mark.parametrize(
    "command",
    [
        ["study", "create", "scan.yml"],
        ["study", "status", "--study", "s"],
        ["study", "list"],
        ["export", "--study", "s", "-o", "best.yml"],
        ["report", "--study", "s", "-o", "report.html"],
    ],
)
def test_ctrl_c_in_a_short_command_exits_130_as_the_long_ones_do(tmp_path, monkeypatch, command):
    """Not click's "Aborted!" and status 1, which a batch script reads as a failure."""

    def interrupted(*args: Any, **kwargs: Any) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    write_card(tmp_path / "scan.yml", TINY_SCAN)
    monkeypatch.setattr(hyperscan.scan._api, "open_storage", interrupted)
    result = cli(*command, "--storage", tmp_path / "scan.journal")
    assert result.exit_code == 130, result.output
    assert result.stderr == "interrupted: nothing was half-written\n"
    assert "Aborted!" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.yml"]


@pytest.mark.parametrize("option", ["--from", "--to", "--as"])
def test_study_copy_refuses_an_empty_storage_or_name(tmp_path, monkeypatch, option):
    monkeypatch.chdir(tmp_path)
    values = {"--from": "a.journal", "--to": "b.journal", "--as": "t", option: ""}
    result = cli("study", "copy", "--study", "s", *[x for kv in values.items() for x in kv])
    assert result.exit_code == 2 and f"'{option}': is empty" in result.output, result.output
    assert list(tmp_path.iterdir()) == []


def test_unknown_study_lists_existing_ones(url, tmp_path):
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "alpha")
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "beta")
    before = snapshot(url)
    output = tmp_path / "best.yml"
    # a worker given --threads (as batch scripts do) also checks the study first
    for command in (
        ["worker"],
        ["worker", "--threads", "1"],
        ["study", "status"],
        ["export", "-o", output],
    ):
        result = cli(*command, "--study", "gamma", "--storage", url)
        message = assert_clean_failure(result)
        assert "no study named 'gamma'" in message, command
        assert "existing: alpha, beta" in message, command
    assert snapshot(url) == before
    assert not output.exists()
    too_many = cli("worker", "--study", "alpha", "--storage", url, "--threads", "5000")
    assert "--threads 5000: at most 1024" in assert_clean_failure(too_many)


def test_study_list_gives_each_study_of_the_storage_in_a_line(url, tmp_path):
    """A cluster's database holds many studies: `study list` names each, with its trials by
    state, how much of its budget is spent and its best value (a study another program made
    has no budget, and its direction may not be hyperscan's, so no best either)."""
    where = redact(resolve_url(url))
    create(write_card(tmp_path / "gone.yml", TINY_SCAN), url, "gone")
    optuna.delete_study(study_name="gone", storage=open_storage(url))
    assert cli("study", "list", "--storage", url).stdout == f"no studies in {where}\n"

    create(write_card(tmp_path / "a.yml", TINY_SCAN), url, "a")
    create(write_card(tmp_path / "b.yml", scan_card(scan={"trials": 9})), url, "b")
    study = load_study(open_storage(url), "a")
    study.add_trial(optuna.trial.create_trial(value=2.5))
    study.add_trial(optuna.trial.create_trial(value=1.25))
    trashed = optuna.trial.create_trial(state=TrialState.PRUNED, user_attrs={"trashed": "why"})
    study.add_trial(trashed)
    other = optuna.create_study(storage=open_storage(url), study_name="o", direction="maximize")
    other.add_trial(optuna.trial.create_trial(value=7.0))

    listed = cli("study", "list", "--storage", url)
    assert listed.exit_code == 0, listed.output
    assert listed.stdout == (
        f"studies in {where}:\n"
        "  a: 2 complete, 1 trashed (3 of 4 finished), best 1.25\n"
        "  b: no trials (0 of 9 finished)\n"
        "  o: 1 complete (no hyperscan runcard)\n"
    )


def test_study_list_of_a_database_without_studies_says_there_are_none(postgres_url, tmp_path):
    """A PostgreSQL database that no `study create` has given Optuna's tables holds no
    studies, as an empty journal holds none: `study list` says so (never the password) and
    creates nothing, while a command that needs a study still says to create one first."""
    journal = tmp_path / "empty.journal"
    journal.touch()
    listed = cli("study", "list", "--storage", journal)
    assert listed.stdout == f"no studies in {redact(resolve_url(str(journal)))}\n"

    # trust authentication: the server ignores the password
    url = sqlalchemy.engine.make_url(postgres_url).set(password="s3cret")
    url = url.render_as_string(hide_password=False)
    listed = cli("study", "list", "--storage", url)
    assert listed.exit_code == 0, listed.output
    assert listed.stdout == f"no studies in {redact(resolve_url(url))}\n"
    assert "s3cret" not in listed.output
    assert snapshot(url) == {}  # not even the schema
    status = cli("study", "status", "--study", "s", "--storage", url)
    assert "no hyperscan/Optuna schema in this database" in assert_clean_failure(status)
