# SPDX-License-Identifier: GPL-3.0-or-later
"""The embedded storage: Optuna's journal file, with the heartbeat Optuna gives only RDB
storages, and refused when the file is not a journal or its last record was cut short."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from optuna.storages import JournalStorage
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.trial import FrozenTrial, TrialState

from hyperscan.scan.storage._constants import SCHEMA_HINT, STORAGE_ENV
from hyperscan.scan.storage._exceptions import StorageError
from hyperscan.scan.storage._heartbeat import NamedHeartbeats, StaleTrialCallback, check_heartbeat
from hyperscan.scan.storage._lock import JournalFlock, RollbackJournalBackend
from hyperscan.scan.storage._retry import RecordingRetries
from hyperscan.scan.storage._salvage import SkippedLine, first_damage
from hyperscan.scan.storage._take import Counted, GatedTakes
from hyperscan.scan.storage._url import journal_path, journal_url

HEARTBEAT_SUFFIX = ".heartbeats"
TAKE_LOCK_SUFFIX = ".take.lock"


class HeartbeatJournalStorage(
    RecordingRetries, GatedTakes, NamedHeartbeats, JournalStorage, BaseHeartbeat
):
    """Optuna's journal file storage with the heartbeat Optuna only gives RDB storages.

    A heartbeat is the mtime of ``<journal>.heartbeats/<trial_id>``, refreshed by the thread
    ``study.optimize`` runs next to each trial: the journal itself gets no extra writes. A RUNNING
    trial is stale when its heartbeat is older than ``grace_period``, or, with no heartbeat file,
    when it started longer ago than that (a worker killed before its first beat, or an ask/tell
    client, which has no heartbeat at all). Mtimes and start times use the clocks of the machine
    and file system holding the journal: keep the journal on a local disk.
    """

    def __init__(
        self,
        path: str,
        *,
        heartbeat_interval: int,
        grace_period: int,
        heartbeat_stale_trial_callback: StaleTrialCallback | None = None,
    ) -> None:
        check_heartbeat(heartbeat_interval, grace_period)
        self._path = os.path.abspath(path)
        self._heartbeat_dir = self._path + HEARTBEAT_SUFFIX
        self._heartbeat_interval = heartbeat_interval
        self._grace_period = grace_period
        self._stale_callback = heartbeat_stale_trial_callback
        self._hyperscan_url = journal_url(self._path)
        # The heartbeat folder appears with the first beat (record_heartbeat), so readers such
        # as `study status` leave nothing next to the journal.
        # An OS lock, not Optuna's lock file: a killed writer stalled every worker 30 s.
        super().__init__(RollbackJournalBackend(self._path))

    @property
    def path(self) -> str:
        """The journal file."""
        return self._path

    @property
    def heartbeat_dir(self) -> str:
        """The sidecar folder holding one heartbeat file per running trial."""
        return self._heartbeat_dir

    def _heartbeat_file(self, trial_id: int) -> str:
        return os.path.join(self._heartbeat_dir, str(trial_id))

    def record_heartbeat(self, trial_id: int) -> None:
        """Touch the trial's heartbeat file (one atomic utime, or create it)."""
        path = self._heartbeat_file(trial_id)
        try:
            try:
                os.utime(path)
            except FileNotFoundError:
                # exist_ok: the folder may appear concurrently (16 workers at once).
                os.makedirs(self._heartbeat_dir, exist_ok=True)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        except OSError as exc:
            # Keep the heartbeat thread alive through a transient file-system error: if it died,
            # the trial would be failed as stale although its worker is still training.
            self._heartbeat_failed(trial_id, str(exc))
        else:
            self._heartbeat_recorded(trial_id)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        now = time.time()
        stale = []
        running = self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,))
        for trial in running:
            try:
                beat = os.stat(self._heartbeat_file(trial._trial_id)).st_mtime
            except FileNotFoundError:
                if trial.datetime_start is None:
                    continue
                beat = trial.datetime_start.timestamp()  # naive local time, as the journal keeps
            if now - beat > self._grace_period:
                stale.append(trial._trial_id)
        return stale

    @contextmanager
    def _counted(self, study_id: int) -> Iterator[Counted]:
        """An flock on ``<journal>.take.lock`` (the OS drops it with a dead worker), held while
        the trials are counted and one is taken or queued (see :class:`GatedTakes`)."""
        with open(self._path + TAKE_LOCK_SUFFIX, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                trials = self.get_all_trials(study_id, deepcopy=False)
                yield Counted.of(Counter(trial.state.name for trial in trials))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        """As Optuna's; a new trial of Optuna's ``ask`` (no template) is taken under the gate."""
        create = super().create_new_trial
        if template_trial is not None:
            return create(study_id, template_trial)
        # An append either lands or fails here: no token is needed to find what it created.
        return self._created(
            lambda _: self._take(study_id, lambda: create(study_id, None), new=True)
        )

    def get_heartbeat_interval(self) -> int:
        return self._heartbeat_interval

    def get_heartbeat_stale_trial_callback(self) -> StaleTrialCallback | None:
        return self._stale_callback

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        """As Optuna's, and a finished trial's heartbeat file is removed."""
        updated = super().set_trial_state_values(trial_id, state, values)
        if state.is_finished():
            # It may never have beaten, or another process removed it already.
            with suppress(OSError):
                os.unlink(self._heartbeat_file(trial_id))
        return updated


def _check_journal(path: str, url: str) -> None:
    """Refuse a file that is not a journal before anything is appended to it."""
    if not os.path.isfile(path):
        return  # a folder or a missing file: the open below says what is wrong
    with open(path, "rb") as file:
        first = file.readline(1 << 20)
    if not first:
        return  # empty: a journal nobody has written yet
    if first.startswith(b"SQLite format 3\x00"):
        raise StorageError(f"{path} is an SQLite database: give it as sqlite:///{path}", url)
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if not isinstance(record, dict) or "op_code" not in record:
        raise StorageError(
            f"{path} is not a journal file (its first line is not a journal record); give the "
            "study's journal, or a new path",
            url,
        )
    _check_journal_tail(path, url)


def _ends_in_newline(path: str) -> bool:
    with open(path, "rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"


def _last_line_end(path: str, block: int = 1 << 16) -> int:
    """The offset just past the file's last newline (0 if none), read backwards by blocks."""
    with open(path, "rb") as file:
        end = file.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - block)
            file.seek(start)
            found = file.read(end - start).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            end = start
    return 0


def _check_journal_tail(path: str, url: str) -> None:
    """Refuse a journal whose last record was cut short (a full disk, a crash mid-write).

    Optuna skips such a line when reading, but the next record appended to it would merge
    with it into one line that no reader can parse, and the whole study would be lost. Optuna
    writes whole lines under the journal's lock, so a tail seen without a newline is checked
    again under that lock: only then is it not another process's write in flight.
    """
    if _ends_in_newline(path):
        return
    lock = JournalFlock(path)
    lock.acquire()
    try:
        if _ends_in_newline(path):
            return
        size, whole = os.path.getsize(path), _last_line_end(path)
    finally:
        lock.release()
    raise StorageError(
        f"{path} ends in an incomplete record ({size - whole} bytes after its last "
        "full line: a write cut short by a full disk or a crash). Appending to it would make "
        f"the journal unreadable. Keep a copy, then cut the incomplete record off with "
        f"`truncate -s {whole} {shlex.quote(path)}`: the records before it are intact",
        url,
    )


def open_journal(
    url: str, *, create: bool, heartbeat_interval: int, grace_period: int, callback: Any
) -> HeartbeatJournalStorage:
    """The journal file of a canonical ``journal://`` URL (see :func:`open_storage`)."""
    path = journal_path(url)
    if create:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    elif not os.path.exists(path):
        raise StorageError(
            f"no journal file {path}; {SCHEMA_HINT}, or pass the right --storage / ${STORAGE_ENV}",
            url,
        )
    if os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path)):
        # a device or a pipe: appending to a FIFO would wait for a reader forever
        raise StorageError(f"{path} is not a regular file, as a journal must be", url)
    _check_journal(path, url)
    # Append mode creates nothing but a missing file and tells early whether we may write.
    with open(path, "ab"):
        pass
    try:
        return HeartbeatJournalStorage(
            path,
            heartbeat_interval=heartbeat_interval,
            grace_period=grace_period,
            heartbeat_stale_trial_callback=callback,
        )
    except ValueError:  # Optuna's replay: JSONDecodeError, UnicodeDecodeError, a line cut short
        damage = first_damage(path)
        if damage is None:
            raise
        raise StorageError(_damaged_message(path, damage), url) from None


def _damaged_message(path: str, damage: SkippedLine) -> str:
    """Why no command reads the journal at ``path``, and the command that salvages it."""
    return (
        f"{path} is damaged at line {damage.number} ({damage.cause}), and Optuna reads no "
        "journal past a damaged line; copy its readable records to a new storage with "
        f"`hyperscan study copy --salvage --from {shlex.quote(path)} --to NEW.journal "
        "--study NAME`"
    )
