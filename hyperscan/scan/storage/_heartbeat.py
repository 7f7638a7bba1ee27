# SPDX-License-Identifier: GPL-3.0-or-later
"""What the journal's and the database's heartbeats share: their settings' check and warnings
that name the trial."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from hyperscan.scan.storage._exceptions import StorageError

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
