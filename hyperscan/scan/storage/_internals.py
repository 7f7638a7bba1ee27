# SPDX-License-Identifier: GPL-3.0-or-later
"""Optuna's private attributes and module names that hyperscan needs, behind public names.

The rest of hyperscan uses these, so an Optuna release that renames one breaks one place
(tests/test_internals.py keeps it so).
"""

from __future__ import annotations

import logging

import optuna
from optuna.storages import BaseStorage
from optuna.storages._cached_storage import _CachedStorage
from optuna.trial import FrozenTrial


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    """The storage's id of a trial: unique in the whole database, unlike its number."""
    return trial._trial_id


def study_id(study: optuna.Study) -> int:
    """The storage's id of a study."""
    return study._study_id


def study_storage(study: optuna.Study) -> BaseStorage:
    """The storage a study was loaded from."""
    return study._storage


def trial_log() -> logging.Logger:
    """The logger on which Optuna's ``study.optimize`` tells each trial's end and failure."""
    return logging.getLogger("optuna.study._optimize")


def backend_storage(storage: BaseStorage) -> BaseStorage:
    """The storage hyperscan opened, under the cache Optuna wraps an RDBStorage in."""
    return storage._backend if isinstance(storage, _CachedStorage) else storage
