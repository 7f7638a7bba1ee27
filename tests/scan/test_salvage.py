# SPDX-License-Identifier: GPL-3.0-or-later
"""A damaged journal is refused in one line that names `study copy --salvage`, which copies
every readable record to a new storage and tells what it skipped (issue 42, finding 7).

The journals are written by Optuna through hyperscan's storage (ask, suggest, attributes,
tell: several records per trial), then damaged on disk as a crash or a bad disk would.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from _service import assert_clean_failure, cli
from optuna.trial import TrialState

from hyperscan.scan.storage import open_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)
# ask/tell outside Study.optimize on a storage with heartbeats: as a crashed scan leaves it
pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage:UserWarning")

STUDY = "damaged"
VALUES = [1.5, 1.25, 1.0]


def journal_with_trials(path: Path, running: bool = False) -> list[bytes]:
    """A study of three complete trials (and one left running); the journal's lines."""
    study = optuna.create_study(study_name=STUDY, storage=open_storage(str(path), create=True))
    for value in VALUES:
        trial = study.ask()
        trial.suggest_float("learning_rate", 1e-3, 1e-1, log=True)
        trial.set_user_attr("worker", "node17")
        study.tell(trial, value)
    if running:
        study.ask().suggest_float("learning_rate", 1e-3, 1e-1, log=True)
    return path.read_bytes().splitlines(keepends=True)


def line_of(lines: list[bytes], op_code: int, nth: int = 0) -> int:
    """The index of the nth record with this op code (4: create trial, 8: user attribute)."""
    found = [i for i, line in enumerate(lines) if line.startswith(b'{"op_code":%d,' % op_code)]
    return found[nth]


def salvaged(source: Path, target: Path | str) -> tuple[str, list[optuna.trial.FrozenTrial]]:
    result = cli("study", "copy", "--salvage", "--from", source, "--to", target, "--study", STUDY)
    assert result.exit_code == 0, result.output
    copy = optuna.load_study(study_name=STUDY, storage=open_storage(str(target)))
    return result.stdout, copy.get_trials()


def test_a_bad_line_mid_file_is_refused_then_salvaged(tmp_path: Path) -> None:
    journal = tmp_path / "scan.journal"
    lines = journal_with_trials(journal)
    bad = line_of(lines, 8, nth=1)  # trial 1's user attribute
    lines[bad] = b"#" * (len(lines[bad]) - 1) + b"\n"
    journal.write_bytes(b"".join(lines))
    damaged = journal.read_bytes()

    for command in (
        ("study", "list", "--storage", journal),
        ("study", "copy", "--from", journal, "--to", tmp_path / "copy.journal", "--study", STUDY),
    ):
        message = assert_clean_failure(cli(*command))
        assert f"{journal} is damaged at line {bad + 1} (not JSON)" in message
        assert "hyperscan study copy --salvage" in message
    assert not (tmp_path / "copy.journal").exists()

    output, trials = salvaged(journal, tmp_path / "saved.journal")
    assert f"salvage: skipped 1 damaged line(s) (line {bad + 1}: not JSON)" in output
    assert [t.value for t in trials] == VALUES
    assert [t.user_attrs.get("worker") for t in trials] == ["node17", None, "node17"]
    assert journal.read_bytes() == damaged  # only read


def test_a_nul_filled_tail_is_binary_damage(tmp_path: Path) -> None:
    """A crash left zeros where the last records were, and a running worker appended after
    them: Optuna stopped on a UnicodeDecodeError ('utf-32-be')."""
    journal = tmp_path / "scan.journal"
    lines = journal_with_trials(journal)
    last = len(lines)
    lines.append(b"\x00" * 4096 + lines.pop())  # trial 2's tell, behind zeros
    journal.write_bytes(b"".join(lines))

    message = assert_clean_failure(cli("study", "list", "--storage", journal))
    assert f"damaged at line {last} (binary data (NUL bytes))" in message
    assert "UnicodeDecodeError" not in message and "--salvage" in message

    output, trials = salvaged(journal, tmp_path / "saved.journal")
    assert f"line {last}: binary data (NUL bytes)" in output
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2 + [TrialState.FAIL]
    assert [t.value for t in trials[:2]] == VALUES[:2]
    assert "trial(s) 2 had not ended: copied as FAIL" in output


def test_a_study_is_salvaged_into_postgresql(tmp_path: Path, postgres_url: str) -> None:
    journal = tmp_path / "scan.journal"
    lines = journal_with_trials(journal, running=True)
    bad = line_of(lines, 8, nth=2)
    lines[bad] = lines[bad][:-20] + b"\n"  # half a record
    journal.write_bytes(b"".join(lines))

    output, trials = salvaged(journal, postgres_url)
    assert f"line {bad + 1}: not JSON" in output
    assert "trial(s) 3 had not ended: copied as FAIL" in output
    assert [t.value for t in trials[:3]] == VALUES
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3 + [TrialState.FAIL]
    assert trials[3].params.keys() == {"learning_rate"}


def test_a_lost_trial_creation_leaves_the_records_after_it_out(tmp_path: Path) -> None:
    """Trials are numbered by their creation records: with trial 1's lost, its records and
    trial 2's would land on the wrong trials, so nothing after the damage is copied."""
    journal = tmp_path / "scan.journal"
    lines = journal_with_trials(journal)
    bad = line_of(lines, 4, nth=1)
    lines[bad] = b"\xff\xfe" + lines[bad][2:]
    journal.write_bytes(b"".join(lines))

    output, trials = salvaged(journal, tmp_path / "saved.journal")
    assert f"line {bad + 1}: binary data (not UTF-8 text)" in output
    left_out = len(lines) - bad - 1
    assert f"left out the {left_out} readable record(s) after line {bad + 1}" in output
    assert [(t.number, t.value) for t in trials] == [(0, VALUES[0])]


def test_salvage_refuses_an_unknown_study_and_a_database(tmp_path: Path) -> None:
    journal = tmp_path / "scan.journal"
    journal_with_trials(journal)
    target = tmp_path / "saved.journal"
    result = cli("study", "copy", "--salvage", "--from", journal, "--to", target, "--study", "x")
    assert f"no study named 'x' in journal://{journal}; existing: {STUDY}" in (
        assert_clean_failure(result)
    )
    assert not target.exists()
    database = "postgresql://postgres@127.0.0.1:5432/test"
    result = cli("study", "copy", "--salvage", "--from", database, "--to", target, "--study", "x")
    assert "--salvage reads journal files" in assert_clean_failure(result)


@pytest.mark.parametrize("content", [b"", b"\x00" * 100 + b"\n"])
def test_nothing_to_salvage_is_one_line(tmp_path: Path, content: bytes) -> None:
    journal = tmp_path / "scan.journal"
    journal.write_bytes(content)
    result = cli("study", "copy", "--salvage", "--from", journal, "--to", tmp_path / "t.journal")
    assert "--study" in result.output  # required
    result = cli(
        "study", "copy", "--salvage", "--from", journal, "--to", tmp_path / "t.journal",
        "--study", STUDY,
    )  # fmt: skip
    assert "holds no readable journal record: nothing to salvage" in assert_clean_failure(result)
