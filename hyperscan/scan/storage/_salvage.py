# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading what is left of a damaged journal file.

Optuna refuses a whole journal for one bad line, and a NUL-filled tail (a crash on a file
system that had allocated the blocks but not written them) stops it with a
``UnicodeDecodeError``. Here the file is read line by line: every line that is a whole journal
record is kept, the others are skipped and told by number and cause.

Journal records name trials and studies by ids that their creation records assign in file
order. A skipped line that created a trial would shift the ids of every later trial, and their
records would land on the wrong trials; such a loss shows as a record naming a trial (or study)
that no earlier record created. Then the records from the first skipped line on are left out,
so that what is copied is whole, if shorter.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from hyperscan.scan.storage._exceptions import StorageError
from hyperscan.scan.storage._url import journal_url

CREATE_STUDY, DELETE_STUDY, CREATE_TRIAL = 0, 1, 4  # Optuna's JournalOperation codes


@dataclass(frozen=True)
class SkippedLine:
    """A line of the journal that is not a whole record."""

    number: int  # 1-based, as editors and `sed -n Np` count
    cause: str


def _damage(line: bytes) -> tuple[dict[str, Any] | None, str]:
    """The record a line holds, or None and why it holds none."""
    if b"\x00" in line:
        return None, "binary data (NUL bytes)"
    if not line.endswith(b"\n"):
        return None, "cut short (no end of line)"
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, "binary data (not UTF-8 text)"
    try:
        record = json.loads(text)
    except ValueError:
        return None, "not JSON"
    if not isinstance(record, dict) or not isinstance(record.get("op_code"), int):
        return None, "not a journal record"
    return record, ""


def read_records(path: str) -> tuple[list[tuple[int, dict[str, Any]]], list[SkippedLine]]:
    """Every whole record of the journal at ``path`` with its line number, and the lines
    skipped."""
    records, skipped = [], []
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            record, cause = _damage(line)
            if record is None:
                skipped.append(SkippedLine(number, cause))
            else:
                records.append((number, record))
    return records, skipped


def first_damage(path: str) -> SkippedLine | None:
    """The first line of the journal at ``path`` that is not a whole record, if any."""
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            record, cause = _damage(line)
            if record is None:
                return SkippedLine(number, cause)
    return None


def _first_orphan(records: list[tuple[int, dict[str, Any]]]) -> int | None:
    """The line of the first record that names a trial or study no earlier record created.

    Ids follow Optuna's replay: a new study name takes the next study id; a trial created in
    a live study takes the next trial id.
    """
    names: set[str] = set()
    live: set[int] = set()
    studies = trials = 0
    for number, record in records:
        op = record["op_code"]
        study, trial = record.get("study_id"), record.get("trial_id")
        if op == CREATE_STUDY:
            if record.get("study_name") not in names:
                names.add(record.get("study_name"))
                live.add(studies)
                studies += 1
            continue
        if isinstance(study, int) and study >= studies:
            return number
        if isinstance(trial, int) and trial >= trials:
            return number
        if op == DELETE_STUDY:
            live.discard(study)
        elif op == CREATE_TRIAL and study in live:
            trials += 1
    return None


@dataclass
class Salvage:
    """What a damaged journal still holds: a storage with its readable records, and what
    was lost on the way."""

    storage: JournalStorage
    skipped: list[SkippedLine]
    left_out: list[int] = field(default_factory=list)  # lines of readable records not copied
    failed: list[int] = field(default_factory=list)  # numbers of the trials fail_running ended

    def fail_running(self, study_name: str) -> None:
        """Fail the study's trials left RUNNING: their end, if any, was lost, and no worker
        can write to the damaged file any more."""
        study_id = self.storage.get_study_id_from_name(study_name)
        for trial in self.storage.get_all_trials(study_id, states=(TrialState.RUNNING,)):
            self.storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
            self.failed.append(trial.number)

    def summary(self) -> str:
        """One line: the lines skipped (with cause), the records left out, the trials failed."""
        if not self.skipped:
            return "the journal has no damaged line"
        causes: dict[str, list[int]] = {}
        for line in self.skipped:
            causes.setdefault(line.cause, []).append(line.number)
        told = "; ".join(f"{_lines(numbers)}: {cause}" for cause, numbers in causes.items())
        parts = [f"skipped {len(self.skipped)} damaged line(s) ({told})"]
        if self.left_out:
            parts.append(
                f"left out the {len(self.left_out)} readable record(s) after line "
                f"{self.skipped[0].number} (lines {self.left_out[0]}-{self.left_out[-1]}): a "
                "damaged line created a trial or study, so later records could not be matched "
                "to theirs"
            )
        if self.failed:
            parts.append(
                f"trial(s) {', '.join(map(str, self.failed))} had not ended: copied as FAIL"
            )
        return "; ".join(parts)


def _lines(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:10]))
    more = f" and {len(numbers) - 10} more" if len(numbers) > 10 else ""
    return f"line{'s' if len(numbers) > 1 else ''} {shown}{more}"


def salvage_journal(path: str, scratch: str) -> Salvage:
    """The readable records of the journal at ``path``, replayed into a new journal in the
    folder ``scratch``; the damaged file is only read."""
    url = journal_url(path)
    if not os.path.isfile(path):
        raise StorageError(f"no journal file {path}", url)
    records, skipped = read_records(path)
    if not records:
        raise StorageError(f"{path} holds no readable journal record: nothing to salvage", url)
    left_out: list[int] = []
    orphan = _first_orphan(records)
    if orphan is not None and skipped:
        cut = skipped[0].number
        left_out = [number for number, _ in records if number > cut]
        records = [(number, record) for number, record in records if number < cut]
    copy = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below, removed with scratch)
        "w", dir=scratch, suffix=".journal", delete=False, encoding="utf-8"
    )
    with copy:
        for _, record in records:
            copy.write(json.dumps(record, separators=(",", ":")) + "\n")
    storage = JournalStorage(JournalFileBackend(copy.name))
    storage._hyperscan_url = url  # messages name the damaged file (storage_url reads it)
    return Salvage(storage, skipped, left_out)
