# SPDX-License-Identifier: GPL-3.0-or-later
"""What the journal's and the database's heartbeats share: their settings' check and warnings
that name the trial."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import optuna
from optuna.storages._heartbeat import is_heartbeat_enabled
from optuna.trial import FrozenTrial

from hyperscan.scan.storage._exceptions import StorageError
from hyperscan.scan.storage._internals import study_storage

_logger = logging.getLogger(__name__)
StaleTrialCallback = Callable[[optuna.Study, FrozenTrial], None]


def check_heartbeat(heartbeat_interval: int, grace_period: int) -> None:
    """Options, not the storage: a StorageError without a URL, so the message names neither."""
    if heartbeat_interval <= 0 or grace_period <= 0:
        raise StorageError("heartbeat_interval and grace_period must be positive (seconds)")
    if grace_period <= heartbeat_interval:
        raise StorageError(
            f"grace_period ({grace_period} s) must exceed heartbeat_interval "
            f"({heartbeat_interval} s), or live trials would be failed as stale"
        )


class NamedHeartbeats:
    """Heartbeat warnings that name the trial by the number `study status` shows for it.

    Trial ids are shared by all studies of a database and mean nothing to users; the number is
    looked up once per trial, while the storage answers, for the warning written when it does
    not.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._trial_numbers: dict[int, int] = {}
        super().__init__(*args, **kwargs)

    def _heartbeat_recorded(self, trial_id: int) -> None:
        if trial_id not in self._trial_numbers:
            with suppress(Exception):
                number = self.get_trial_number_from_id(trial_id)  # type: ignore[attr-defined]
                self._trial_numbers[trial_id] = number

    def _heartbeat_failed(self, trial_id: int, error: str) -> None:
        number = self._trial_numbers.get(trial_id)
        trial = f"trial {number}" if number is not None else f"the trial of id {trial_id}"
        _logger.warning("could not record the heartbeat of %s: %s", trial, error)


class TrialHeartbeats:
    """One thread beating for every trial a worker has in flight, every heartbeat interval
    of the study's storage (none without heartbeats).

    Optuna's ``optimize`` beats for its one trial; its ``ask`` and ``tell`` beat for none, so
    a worker fitting several trials at once beats for them itself. A trial is beaten as it is
    added, and never after :meth:`remove` returns: a late beat would bring back the journal's
    heartbeat file of a finished trial."""

    def __init__(self, study: optuna.Study) -> None:
        storage = study_storage(study)
        self._storage = storage if is_heartbeat_enabled(storage) else None
        self._trials: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> TrialHeartbeats:
        if self._storage is not None:
            self._thread = threading.Thread(target=self._beat, name="heartbeats", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def add(self, trial_id: int) -> None:
        with self._lock:
            self._trials.add(trial_id)
            if self._storage is not None:
                self._storage.record_heartbeat(trial_id)  # type: ignore[attr-defined]

    def remove(self, trial_id: int) -> None:
        with self._lock:
            self._trials.discard(trial_id)

    def _beat(self) -> None:
        assert self._storage is not None
        interval = self._storage.get_heartbeat_interval()  # type: ignore[attr-defined]
        while not self._stop.wait(interval):
            with self._lock:
                for trial_id in sorted(self._trials):
                    self._storage.record_heartbeat(trial_id)  # type: ignore[attr-defined]
