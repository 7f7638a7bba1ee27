# SPDX-License-Identifier: GPL-3.0-or-later
"""Where studies live: an embedded journal file (one machine) or PostgreSQL (a cluster).

Why not SQLite by default: at 32 parallel workers SQLite lost 1-6 of 256 trials, Optuna's
journal file none. Optuna only implements heartbeats for RDB storages, so the journal gets its
own (one small sidecar file per running trial, not journal writes), and a killed worker's trial
is failed and re-queued exactly as with PostgreSQL. On PostgreSQL the schema is created once
(``hyperscan study create``): 31 of 32 workers racing to create it on a fresh server crashed.

Opening a storage, listing its studies and loading a study fail with a :class:`StorageError`
that names the root cause and shows the URL without its password. Reads and writes through
what they return (a study's trials, its attributes, :func:`fail_stale_trials`) raise Optuna's
exceptions: callers read inside :func:`explained_storage_errors`, which turns a lost
connection into a StorageError.

Laid out as Optuna's ``storages``: URLs (``_url``, ``_redact``), the translation of errors
(``_errors``, a table of causes), the journal (``_journal``, its lock ``_lock``, reading a
damaged one ``_salvage``), databases (``_rdb``), heartbeats (``_heartbeat``), trials whose
worker is lost (``_stale``), retries through an outage (``_retry``), exact budgets
(``_take``). It is the only part of hyperscan that touches Optuna's internals; what the rest
needs of them, ``_internals`` gives under public names.
"""

from hyperscan.scan.storage._constants import (
    DEFAULT_STORAGE,
    JOURNAL_PREFIX,
    STORAGE_ENV,
)
from hyperscan.scan.storage._errors import (
    describe_error,
    errors_described,
    explained_storage_errors,
    transient_error,
)
from hyperscan.scan.storage._exceptions import NoSchemaError, StorageError
from hyperscan.scan.storage._heartbeat import TrialHeartbeats
from hyperscan.scan.storage._internals import study_storage, trial_id
from hyperscan.scan.storage._journal import HeartbeatJournalStorage
from hyperscan.scan.storage._open import load_study, open_storage, study_names
from hyperscan.scan.storage._optuna_messages import asking_outside_optimize, overtaken
from hyperscan.scan.storage._redact import redact
from hyperscan.scan.storage._retry import (
    STORAGE_RETRY_WAITS,
    database_probe,
    drop_result,
    record_with_retries,
    results_folder,
    retrying,
    storage_probe,
    wait_for_storage,
)
from hyperscan.scan.storage._salvage import Salvage, salvage_journal
from hyperscan.scan.storage._stale import fail_stale_trials, requeue_cut_short, stale_trial_ids
from hyperscan.scan.storage._take import BudgetSpent, gate_takes, give_back_lost_takes, taking
from hyperscan.scan.storage._url import journal_path, resolve_url, storage_file, storage_url

__all__ = [
    "DEFAULT_STORAGE",
    "JOURNAL_PREFIX",
    "STORAGE_ENV",
    "STORAGE_RETRY_WAITS",
    "BudgetSpent",
    "HeartbeatJournalStorage",
    "NoSchemaError",
    "Salvage",
    "StorageError",
    "TrialHeartbeats",
    "asking_outside_optimize",
    "database_probe",
    "describe_error",
    "drop_result",
    "errors_described",
    "explained_storage_errors",
    "fail_stale_trials",
    "gate_takes",
    "give_back_lost_takes",
    "journal_path",
    "load_study",
    "open_storage",
    "overtaken",
    "record_with_retries",
    "redact",
    "requeue_cut_short",
    "resolve_url",
    "results_folder",
    "retrying",
    "salvage_journal",
    "stale_trial_ids",
    "storage_file",
    "storage_probe",
    "storage_url",
    "study_names",
    "study_storage",
    "taking",
    "transient_error",
    "trial_id",
    "wait_for_storage",
]
