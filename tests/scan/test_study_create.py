# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan study create`: bad runcards refused before the storage is touched, the same
or a changed runcard under an existing name, a new budget, creations cut short or raced.
"""

from __future__ import annotations

import errno
from typing import Any, NoReturn

import optuna
import pytest
import yaml
from _service import TINY_SCAN, assert_clean_failure, cli, create, scan_card, snapshot, write_card

from hyperscan.runcard import scan_runcard_from_dict
from hyperscan.scan import ScanError, StorageError, open_storage
from hyperscan.scan._study import create_study
from hyperscan.scan.storage import load_study, redact, resolve_url, study_names


def test_bad_search_space_writes_nothing(url, tmp_path):
    """A range with low > high is refused before the storage is touched."""
    bad = scan_card(
        scan={"space": {"optimizer": {"adam": {"learning_rate": {"low": 0.1, "high": 0.01}}}}}
    )
    runcard = write_card(tmp_path / "bad.yml", bad)
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "scan.space.optimizer.adam.learning_rate.high" in message
    assert "expected low < high" in message
    if url.startswith("postgresql"):
        assert snapshot(url) == {}  # not even the schema
    else:
        assert snapshot(url) is None
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yml"]


def test_a_fold_holding_out_everything_is_refused(tmp_path):
    names = ["TOY_HERA_NC_F2P", "TOY_HERA_CC_F2WP", "TOY_NUTEV_XF3WP", "TOY_GLUON"]
    card = scan_card(scan={"folds": [names[:2], names[2:]]}, data={"datasets": names[:2]})
    runcard = write_card(tmp_path / "bad.yml", card)
    url = str(tmp_path / "scan.journal")
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "scan.folds[1][0]: 'TOY_NUTEV_XF3WP' is not among the fitted datasets" in message
    card["scan"]["folds"] = [names[:2]]
    runcard = write_card(tmp_path / "bad.yml", card)
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "scan.folds[0]: holds out every fitted dataset" in message
    assert snapshot(url) is None


@pytest.mark.parametrize("command", ["study create", "scan"])
def test_a_fit_runcard_given_to_a_scan_command_says_so(tmp_path, command):
    fit_card = {key: value for key, value in TINY_SCAN.items() if key != "scan"}
    runcard = write_card(tmp_path / "fit.yml", fit_card)
    url = str(tmp_path / "scan.journal")
    message = assert_clean_failure(cli(*command.split(), runcard, "--storage", url))
    assert f"{runcard} is a fit runcard (it has no 'scan:' section)" in message
    assert f"`hyperscan fit {runcard} -o OUTDIR`" in message
    assert snapshot(url) is None


def test_study_create_refuses_an_empty_name(tmp_path):
    runcard = write_card(tmp_path / "scan.yml", TINY_SCAN)
    url = str(tmp_path / "scan.journal")
    result = cli("study", "create", runcard, "--storage", url, "--name", "")
    assert result.exit_code == 2 and "'--name': is empty" in result.output, result.output
    assert snapshot(url) is None


def test_a_split_leaving_members_nothing_to_train_on_is_refused(tmp_path):
    """As a fold holding out everything is: for the scan's members, folds and all."""
    names = ["TOY_HERA_NC_F2P", "TOY_HERA_CC_F2WP", "TOY_NUTEV_XF3WP", "TOY_GLUON"]
    card = scan_card(scan={"folds": [names[:2], names[2:]]}, data={"training_fraction": 0.05})
    runcard = write_card(tmp_path / "bad.yml", card)
    url = str(tmp_path / "scan.journal")
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "data.training_fraction: 0.05 leaves replica" in message
    assert snapshot(url) is None
    searched = {"data.training_fraction": {"low": 0.05, "high": 0.5}}
    card = scan_card(scan={"space": {"parameters": searched}})
    runcard = write_card(tmp_path / "bad.yml", card)
    message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
    assert "scan.space.parameters.data.training_fraction: 0.05 leaves replica" in message
    assert snapshot(url) is None


def test_a_validation_objective_refuses_a_training_fraction_searched_up_to_1(tmp_path):
    """Where the fraction reaches 1 a trial has no validation point, and no value."""
    for searched in ({"choices": [0.75, 1.0]}, {"low": 0.5, "high": 1.0}):
        card = scan_card(scan={"space": {"parameters": {"data.training_fraction": searched}}})
        runcard = write_card(tmp_path / "bad.yml", card)
        url = str(tmp_path / "scan.journal")
        message = assert_clean_failure(cli("study", "create", runcard, "--storage", url))
        assert "scan.space.parameters.data.training_fraction: reaches 1, where the validation" in (
            message
        )
        assert snapshot(url) is None


def test_different_runcard_under_existing_name_is_refused(url, tmp_path):
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    before = snapshot(url)
    other = write_card(tmp_path / "other.yml", scan_card(scan={"trials": 5}, epochs=200))
    result = cli("study", "create", other, "--storage", url, "--name", "s")
    message = assert_clean_failure(result)
    assert "study 's'" in message and "exists with a different runcard" in message
    assert "(epochs: 100 → 200; scan.trials: 4 → 5)" in message  # what changed
    assert "only scan.trials, the budget, may change" in message
    assert snapshot(url) == before  # stored runcard unchanged, no new study
    assert study_names(open_storage(url)) == ["s"]
    stored = load_study(open_storage(url), "s").user_attrs["hyperscan:runcard"]
    assert yaml.safe_load(stored)["scan"]["trials"] == TINY_SCAN["scan"]["trials"]


@pytest.mark.parametrize("replicas", [10, 1])
def test_a_top_level_replica_count_in_a_scan_runcard_is_refused(tmp_path, replicas):
    """A scan fits scan.replicas per trial: a top-level `replicas` would be ignored silently
    (even 1, the default, when scan.replicas is not), so it is refused, before any storage is
    made."""
    card = write_card(tmp_path / "scan.yml", scan_card(replicas=replicas, scan={"replicas": 2}))
    url = tmp_path / "scan.journal"
    message = assert_clean_failure(cli("study", "create", card, "--storage", url))
    assert "scan.yml: replicas: a scan fits 'scan.replicas' replicas per trial (2 here)" in message
    assert not url.exists()


def test_a_study_stored_with_a_top_level_replica_count_still_resumes(url, tmp_path):
    """Only a new study refuses a top-level `replicas`: a study stored with one before the
    refusal is created again as a no-op and takes a new budget, as other studies do."""
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    study = load_study(open_storage(url), "s")
    stored = study.user_attrs["hyperscan:runcard"]
    assert "\nreplicas: 1\n" in stored
    study.set_user_attr("hyperscan:runcard", stored.replace("\nreplicas: 1\n", "\nreplicas: 3\n"))
    old = write_card(tmp_path / "old.yml", scan_card(replicas=3))
    again = cli("study", "create", old, "--storage", url, "--name", "s")
    assert again.exit_code == 0, again.output
    assert "study 's' exists with this runcard" in again.stdout
    more = write_card(tmp_path / "more.yml", scan_card(replicas=3, scan={"trials": 9}))
    raised = cli("study", "create", more, "--storage", url, "--name", "s")
    assert raised.exit_code == 0, raised.output
    assert "budget changed from 4 to 9 trials" in raised.stdout
    new = cli("study", "create", old, "--storage", url, "--name", "new")
    assert "replicas: a scan fits 'scan.replicas'" in assert_clean_failure(new)
    assert study_names(open_storage(url)) == ["s"]


def test_a_runcard_that_changes_only_the_budget_changes_the_study_s(url, tmp_path):
    """A study that spent its budget takes more trials of the same kind: the runcard with a
    larger scan.trials changes the budget, and workers read it from the study."""
    create(write_card(tmp_path / "scan.yml", TINY_SCAN), url, "s")
    more = write_card(tmp_path / "more.yml", scan_card(scan={"trials": 9}))
    result = cli("study", "create", more, "--storage", url, "--name", "s")
    assert result.exit_code == 0, result.output
    where = redact(resolve_url(url))
    assert result.stdout == (
        f"study 's' in {where}: budget changed from 4 to 9 trials (running workers take it "
        "after their trial)\n"
    )
    status = cli("study", "status", "--study", "s", "--storage", url)
    assert "(budget 9 finished)" in status.stdout, status.output
    again = cli("study", "create", more, "--storage", url, "--name", "s")
    assert f"study 's' exists with this runcard in {where}" in again.stdout

    # Lowered to what has finished: said to leave no trial for any worker.
    study = load_study(open_storage(url), "s")
    study.add_trial(optuna.trial.create_trial(value=1.0))
    fewer = write_card(tmp_path / "fewer.yml", scan_card(scan={"trials": 1}))
    lowered = cli("study", "create", fewer, "--storage", url, "--name", "s")
    assert "budget changed from 9 to 1 trial (running" in lowered.stdout
    assert lowered.stdout.endswith("; 1 trial has finished, so no worker takes another\n")


def test_same_runcard_again_is_a_no_op(url, tmp_path):
    runcard = write_card(tmp_path / "scan.yml", TINY_SCAN)
    create(runcard, url, "s")
    before = snapshot(url)
    again = cli("study", "create", runcard, "--storage", url, "--name", "s")
    assert again.exit_code == 0, again.output
    # where: a study made somewhere unexpected shows at once
    assert f"study 's' exists with this runcard in {redact(resolve_url(url))}" in again.stdout
    assert snapshot(url) == before


@pytest.mark.parametrize(
    ("interruption", "raised"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), StorageError),
        (KeyboardInterrupt(), KeyboardInterrupt),
    ],
)
def test_a_study_whose_creation_is_cut_short_is_not_left_behind(url, interruption, raised):
    """A study created but not given its runcard (a failed write, Ctrl-C) is removed: left,
    it would hold its name with a study no command opens or creates again."""
    storage = open_storage(url, create=True)
    write = storage.set_study_user_attr
    calls = []

    def cut_short(study_id, key, value):
        calls.append(key)
        if len(calls) == 2:  # the runcard written, the fingerprint not
            raise interruption
        return write(study_id, key, value)

    runcard = scan_runcard_from_dict(TINY_SCAN)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(storage, "set_study_user_attr", cut_short)
        with pytest.raises(raised):
            create_study(runcard, storage, "s")
    assert "s" not in study_names(storage)
    assert create_study(runcard, storage, "s")[1].created


def test_a_study_another_process_is_creating_is_said_so(url):
    """Two `study create` at once: the one that loses the race may find the study before the
    winner stored its runcard. It says so, rather than call the runcard different or missing;
    run again, it compares the runcards."""
    storage = open_storage(url, create=True)
    runcard = scan_runcard_from_dict(TINY_SCAN)
    real_create = optuna.create_study

    def won_by_another(**kwargs: Any) -> NoReturn:
        real_create(**kwargs)  # the other process's study, its runcard not written yet
        raise optuna.exceptions.DuplicatedStudyError(kwargs["study_name"])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(optuna, "create_study", won_by_another)
        with pytest.raises(ScanError, match="being created by another process at this moment"):
            create_study(runcard, storage, "s")
    assert "s" in study_names(storage)  # the winner's: not the loser's to remove


def test_a_study_of_an_earlier_version_is_the_same_study(url, tmp_path):
    """A study's runcard stored before a key existed (here: the top-level `folds`) is the
    same runcard: its settings are compared, not its text."""
    runcard = write_card(tmp_path / "scan.yml", TINY_SCAN)
    create(runcard, url, "s")
    study = load_study(open_storage(url), "s")
    stored = study.user_attrs["hyperscan:runcard"]
    assert "\nfolds: []\n" in stored
    study.set_user_attr("hyperscan:runcard", stored.replace("\nfolds: []\n", "\n"))
    before = snapshot(url)
    again = cli("study", "create", runcard, "--storage", url, "--name", "s")
    assert again.exit_code == 0, again.output
    assert "study 's' exists with this runcard" in again.stdout
    assert snapshot(url) == before
