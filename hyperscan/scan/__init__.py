"""The scan service: studies, workers, replica statistics, trash rule, export.

Only workers fit: the objective and the worker loop, which import TensorFlow (seconds, and
hundreds of MB), load on first use, so that study creation, status, export, copies, reports
and the dashboard start fast and stay small.
"""

from typing import TYPE_CHECKING, Any

from hyperscan.scan._copy import copy_study
from hyperscan.scan._export import (
    best_trial,
    export_text,
    export_trial,
    outcome,
    write_atomically,
)
from hyperscan.scan._local import (
    counts_line,
    default_output,
    start_workers,
    supervise,
    trial_line,
    trial_start_line,
    usable_cores,
)
from hyperscan.scan._statistics import all_statistics, replica_statistic, summary, trial_value
from hyperscan.scan._status import (
    finished_trials,
    retries,
    state_counts,
    status_text,
    studies_text,
)
from hyperscan.scan._study import (
    RUNCARD_ATTR,
    Creation,
    ScanError,
    StudySetup,
    check_new_study,
    check_runcard,
    checked_data,
    create_study,
    open_study,
    study_problem,
)
from hyperscan.scan._trial_attrs import last_report, requeued, trashed, worker_id
from hyperscan.scan.storage import (
    DEFAULT_STORAGE,
    STORAGE_ENV,
    StorageError,
    describe_error,
    explained_storage_errors,
    fail_stale_trials,
    load_study,
    open_storage,
    redact,
    resolve_url,
    storage_file,
    storage_url,
    study_names,
)

if TYPE_CHECKING:
    from hyperscan.scan._objective import Objective, WorkerStopping
    from hyperscan.scan._worker import make_pruner, make_sampler, run_worker

_FITTING = {
    "Objective": "_objective",
    "WorkerStopping": "_objective",
    "make_pruner": "_worker",
    "make_sampler": "_worker",
    "run_worker": "_worker",
}

__all__ = [
    "DEFAULT_STORAGE",
    "RUNCARD_ATTR",
    "STORAGE_ENV",
    "Creation",
    "Objective",
    "ScanError",
    "StorageError",
    "StudySetup",
    "WorkerStopping",
    "all_statistics",
    "best_trial",
    "check_new_study",
    "check_runcard",
    "checked_data",
    "copy_study",
    "counts_line",
    "create_study",
    "default_output",
    "describe_error",
    "explained_storage_errors",
    "export_text",
    "export_trial",
    "fail_stale_trials",
    "finished_trials",
    "last_report",
    "load_study",
    "make_pruner",
    "make_sampler",
    "open_storage",
    "open_study",
    "outcome",
    "redact",
    "replica_statistic",
    "requeued",
    "resolve_url",
    "retries",
    "run_worker",
    "start_workers",
    "state_counts",
    "status_text",
    "storage_file",
    "storage_url",
    "studies_text",
    "study_names",
    "study_problem",
    "summary",
    "supervise",
    "trashed",
    "trial_line",
    "trial_start_line",
    "trial_value",
    "usable_cores",
    "worker_id",
    "write_atomically",
]


def __getattr__(name: str) -> Any:
    if name in _FITTING:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_FITTING[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
