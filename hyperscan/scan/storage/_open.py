# SPDX-License-Identifier: GPL-3.0-or-later
"""Opening a storage, listing its studies and loading one: the entry points of the package."""

from __future__ import annotations

import warnings

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage

from hyperscan.scan.storage._constants import JOURNAL_PREFIX
from hyperscan.scan.storage._errors import errors_described
from hyperscan.scan.storage._exceptions import StorageError
from hyperscan.scan.storage._journal import open_journal
from hyperscan.scan.storage._rdb import open_rdb
from hyperscan.scan.storage._stale import RequeueStaleTrials
from hyperscan.scan.storage._url import resolve_url, storage_url


def open_storage(
    url: str | None = None,
    *,
    create: bool = False,
    heartbeat_interval: int = 60,
    grace_period: int = 600,
    max_retry: int = 3,
) -> BaseStorage:
    """Open the storage at ``url`` (see :func:`resolve_url`) with heartbeats and retries.

    ``create=False`` (workers, readers) never creates a journal file or database tables and
    says so when they are missing (a database without tables with a :class:`NoSchemaError`);
    ``create=True`` is for ``hyperscan study create``. A trial whose heartbeat stops for
    ``grace_period`` seconds is failed and re-queued with the same parameters, at most
    ``max_retry`` times, by the next worker that asks for a trial.
    """
    resolved = resolve_url(url)
    with warnings.catch_warnings():
        # Heartbeats and the retry callback are "experimental" in Optuna 5; we rely on them.
        warnings.simplefilter("ignore", ExperimentalWarning)
        callback = RequeueStaleTrials(max_retry=max_retry)
        options = {
            "create": create,
            "heartbeat_interval": heartbeat_interval,
            "grace_period": grace_period,
            "callback": callback,
        }
        with errors_described(resolved):
            if resolved.startswith(JOURNAL_PREFIX):
                return open_journal(resolved, **options)
            return open_rdb(resolved, **options)


def study_names(storage: BaseStorage) -> list[str]:
    """Names of the studies in ``storage``, in creation order."""
    with errors_described(storage_url(storage)):
        return [study.study_name for study in storage.get_all_studies()]


def load_study(
    storage: BaseStorage,
    name: str,
    *,
    sampler: optuna.samplers.BaseSampler | None = None,
    pruner: optuna.pruners.BasePruner | None = None,
) -> optuna.Study:
    """Load study ``name``; an unknown name lists the studies that do exist."""
    url = storage_url(storage)
    with errors_described(url):
        try:
            return optuna.load_study(
                study_name=name, storage=storage, sampler=sampler, pruner=pruner
            )
        except KeyError:
            existing = ", ".join(study_names(storage)) or "(none)"
            raise StorageError(f"no study named {name!r} in {url}; existing: {existing}") from None
