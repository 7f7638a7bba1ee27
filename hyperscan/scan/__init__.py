"""The scan service: studies of hyperparameter trials, their workers, status and export.

Start with :func:`create_study` or :func:`open_study` (a :class:`Study` handle), or
:func:`run_scan` for a whole scan on one machine; docs/api.md shows them at work. Every call
returns plain objects, which :mod:`hyperscan.scan.results` holds. Only workers fit: the
objective and the worker loop, which import TensorFlow (seconds, and hundreds of MB), load on
first use (``Study.run_worker``), so that study creation, status, export, copies, reports and
the dashboard start fast and stay small.

The trial and study attributes a report reads (:data:`RUNCARD_ATTR`, :func:`trashed`,
:func:`last_report`, :func:`retries`, :data:`CONFIRMED_ATTR`, :class:`NoiseFloor`) are public
too; a trial's score
and the objective in words are :mod:`hyperscan.score`'s.
"""

from hyperscan.scan._api import (
    Study,
    copy_study,
    create_study,
    list_studies,
    open_study,
    reading_study,
    run_scan,
    salvage_study,
    storage_location,
)
from hyperscan.scan._dashboard import dashboard_app, serve_dashboard
from hyperscan.scan._export import write_atomically
from hyperscan.scan._noise_floor import NoiseFloor
from hyperscan.scan._status import retries
from hyperscan.scan._study import CONFIRMED_ATTR, RUNCARD_ATTR, ScanError
from hyperscan.scan._trial_attrs import last_report, trashed
from hyperscan.scan.storage import StorageError, open_storage

__all__ = [
    "CONFIRMED_ATTR",
    "RUNCARD_ATTR",
    "NoiseFloor",
    "ScanError",
    "StorageError",
    "Study",
    "copy_study",
    "create_study",
    "dashboard_app",
    "last_report",
    "list_studies",
    "open_storage",
    "open_study",
    "reading_study",
    "retries",
    "run_scan",
    "salvage_study",
    "serve_dashboard",
    "storage_location",
    "trashed",
    "write_atomically",
]
