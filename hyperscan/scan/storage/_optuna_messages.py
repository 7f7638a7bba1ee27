# SPDX-License-Identifier: GPL-3.0-or-later
"""What hyperscan reads of Optuna's message texts, in one place: an Optuna release that
rewords one breaks this module, whose test (pinned to Optuna's version) says so."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from optuna.exceptions import UpdateFinishedTrialError

#: The Optuna release whose texts are matched here (major.minor).
OPTUNA_TEXTS_OF = "5.1"
_TELL_FINISHED = "Cannot tell a"
_HEARTBEAT_OUTSIDE_OPTIMIZE = "Heartbeat of storage"


def overtaken(error: Exception) -> bool:
    """Whether ``error`` says another worker failed the trial as stale (its heartbeat came
    late) and re-queued it: Optuna's UpdateFinishedTrialError, or, when the trial's own tell
    hit the finished trial, "Cannot tell a FAIL trial"."""
    return isinstance(error, UpdateFinishedTrialError) or (
        isinstance(error, ValueError) and str(error).startswith(_TELL_FINISHED)
    )


@contextmanager
def asking_outside_optimize() -> Iterator[None]:
    """Silences Optuna's warning that a heartbeat storage is meant for ``Study.optimize``: a
    slotted worker asks for trials itself and beats their hearts itself."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", _HEARTBEAT_OUTSIDE_OPTIMIZE, UserWarning)
        yield
