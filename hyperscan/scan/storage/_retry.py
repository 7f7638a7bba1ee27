# SPDX-License-Identifier: GPL-3.0-or-later
"""Waiting out a storage outage: one schedule for every retry, a wait cut short once the
database answers again, and a finished trial's result kept on local disk and written again
until the database takes it (without it, a 10 s drop at the first write after a fit threw the
fit away, and its parameters were fitted again)."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from hyperscan.scan.storage._constants import PG_PREFIX
from hyperscan.scan.storage._errors import describe_error, transient_error
from hyperscan.scan.storage._exceptions import StorageError
from hyperscan.scan.storage._internals import backend_storage, study_storage
from hyperscan.scan.storage._internals import trial_id as stored_id
from hyperscan.scan.storage._optuna_messages import overtaken
from hyperscan.scan.storage._timeout import pg_connect_args

_logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Waits (s) after each consecutive storage error (a database restart, a dropped connection)
#: before giving up: 315 s in all.
STORAGE_RETRY_WAITS = (5, 10, 20, 40, 60, 60, 60, 60)
#: How often (s) a wait between retries asks the database whether it answers again: the wait
#: ends once it does (on the schedule alone, workers sat idle 45 s after a 90 s outage).
PROBE_EVERY_S = 5

Probe = Callable[[], bool]


def database_probe(url: str) -> Probe | None:
    """A probe of the PostgreSQL database of ``url`` (unredacted): whether it answers
    ``SELECT 1`` on a new connection (a pooled one may hang until $HYPERSCAN_DB_TIMEOUT, a new
    one fails within its connect timeout); False, never an error, while it does not. None for
    a storage without outages to wait out."""
    if not url.startswith(PG_PREFIX):
        return None

    def answers() -> bool:
        import sqlalchemy  # only a process that opens PostgreSQL pays its import

        try:
            engine = sqlalchemy.create_engine(
                url, poolclass=sqlalchemy.pool.NullPool, connect_args=pg_connect_args()
            )
            try:
                with engine.connect() as connection:
                    connection.execute(sqlalchemy.text("SELECT 1"))
            finally:
                engine.dispose()
        except Exception:
            return False
        return True

    return answers


def storage_probe(storage: BaseStorage) -> Probe | None:
    """:func:`database_probe` of the database ``storage`` was opened on."""
    backend = backend_storage(storage)
    if not isinstance(backend, RecordingRetries):
        return None
    return database_probe(backend._hyperscan_url)


def wait_for_storage(
    seconds: float, probe: Probe | None, stop: threading.Event | None = None
) -> None:
    """Wait ``seconds`` before trying the storage again, or less: until ``probe()``, asked
    every :data:`PROBE_EVERY_S`, says the database answers, or ``stop`` is set."""
    stop = threading.Event() if stop is None else stop
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if stop.wait(left if probe is None else min(left, PROBE_EVERY_S)):
            return
        if probe is not None and time.monotonic() < deadline and probe():
            return


def retrying(
    call: Callable[[], T],
    what: str,
    url: str,
    *,
    waits: Sequence[float] | None = None,
    probe: Probe | None = None,
) -> T:
    """``call()``, called again after each wait of ``waits`` (default
    :data:`STORAGE_RETRY_WAITS`, each cut short once ``probe`` says the database answers, see
    :func:`wait_for_storage`) while it fails with a transient storage error
    (:func:`transient_error`), with a line in the log per retry; the last error, or any other,
    is raised."""
    for wait in (*(STORAGE_RETRY_WAITS if waits is None else waits), None):
        try:
            return call()
        except Exception as error:
            if wait is None or not transient_error(error):
                raise
            _logger.warning("%s: %s; trying again in %g s", what, describe_error(error, url), wait)
            wait_for_storage(wait, probe)
    raise AssertionError("unreachable")


def results_folder() -> Path:
    """Where finished trials wait for the database: ``$XDG_CACHE_HOME/hyperscan/results``
    (default ``~/.cache``), on the worker's own disk."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "hyperscan" / "results"


class RecordingRetries:
    """A storage mixin: the writes that record a finished trial wait out an outage.

    After :meth:`record_with_retries`, the trial's user attributes, its reads and the write of
    its final state are retried on the :data:`STORAGE_RETRY_WAITS` schedule: each is
    idempotent per trial. The result is kept in a file until its final state is written, or
    until the trial is known to be superseded (another worker failed it as stale and re-queued
    it: :meth:`forget_result`); a worker that gives up (or dies) leaves it there, and says so.
    Mid-fit writes are not retried here: the worker re-queues a trial an outage cut short.
    """

    _hyperscan_url: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # trial id → its number and the file keeping its result
        self._recording: dict[int, tuple[int, Path]] = {}
        super().__init__(*args, **kwargs)

    def record_with_retries(self, trial_id: int, number: int, record: dict[str, Any]) -> Path:
        """Keep ``record`` (the trial's result, JSON) on disk, and retry the writes that
        record it in the storage from now on; returns the file."""
        folder = results_folder()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{socket.gethostname()}-{os.getpid()}-trial-{number}.json"
        partial = path.with_suffix(".part")
        try:
            partial.write_text(json.dumps(record, indent=1, default=str))
            partial.replace(path)
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise StorageError(
                f"cannot keep the result of trial {number} in {folder}: {error.strerror or error}"
            ) from None
        self._recording[trial_id] = (number, path)
        return path

    def _retried(self, trial_id: int, what: str, call: Callable[[], T]) -> T:
        if trial_id not in self._recording:
            return call()
        number, path = self._recording[trial_id]
        try:
            return retrying(
                call,
                f"recording trial {number} ({what})",
                self._hyperscan_url,
                probe=database_probe(self._hyperscan_url),
            )
        except Exception as error:
            if not overtaken(error):  # a superseded result is forgotten by its worker
                del self._recording[trial_id]
                _logger.error("the result of trial %d is kept in %s", number, path)
            raise

    def forget_result(self, trial_id: int) -> None:
        """Delete the file of a trial's result that needs no keeping: recorded, or superseded
        by a re-queued copy; nothing for a trial whose result is not kept."""
        _, path = self._recording.pop(trial_id, (None, None))
        if path is not None:
            with suppress(OSError):
                path.unlink()

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        write = super().set_trial_user_attr  # type: ignore[misc]
        self._retried(trial_id, key, lambda: write(trial_id, key, value))

    def get_trial(self, trial_id: int) -> FrozenTrial:
        read = super().get_trial  # type: ignore[misc]
        return self._retried(trial_id, "read", lambda: read(trial_id))

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        if trial_id not in self._recording or not state.is_finished():
            return super().set_trial_state_values(trial_id, state, values)
        tried = False
        update, read = super().set_trial_state_values, super().get_trial  # type: ignore[misc]

        def write() -> bool:
            nonlocal tried
            try:
                return update(trial_id, state, values)
            except UpdateFinishedTrialError:
                # A try whose commit reached the database although its answer did not.
                stored = read(trial_id)
                if tried and stored.state == state and stored.values == _floats(values):
                    return True
                raise
            finally:
                tried = True

        updated = self._retried(trial_id, state.name, write)
        self.forget_result(trial_id)
        return updated


def _floats(values: Sequence[float] | None) -> list[float] | None:
    return None if values is None else [float(value) for value in values]


def _recording(trial: optuna.Trial) -> RecordingRetries | None:
    """The storage of ``trial`` if it keeps results until they are written (PostgreSQL, the
    journal); None for one that does not (Optuna's in-memory storage)."""
    backend = backend_storage(study_storage(trial.study))
    return backend if isinstance(backend, RecordingRetries) else None


def record_with_retries(trial: optuna.Trial, record: dict[str, Any]) -> Path | None:
    """Keep a finished trial's result (``record``, JSON) on local disk and retry the writes
    that record it through an outage (see :class:`RecordingRetries`); None, and no retries,
    for a storage that keeps no results (Optuna's in-memory one)."""
    storage = _recording(trial)
    if storage is None:
        return None
    return storage.record_with_retries(stored_id(trial), trial.number, record)


def drop_result(trial: optuna.Trial) -> None:
    """Delete the kept result of a trial another worker failed as stale and re-queued: the
    copy is fitted again, and the file would stay in the cache for good."""
    storage = _recording(trial)
    if storage is not None:
        storage.forget_result(stored_id(trial))
