"""The plain objects the scan API returns (dataclasses: fields, no storage behind them), for
type hints and ``isinstance``; docs/api.md describes their fields."""

from hyperscan.scan._api import (
    ExportedSample,
    ExportedTrial,
    SalvagedStudy,
    ScanPlan,
    ScanResult,
    StorageLocation,
)
from hyperscan.scan._local import ScanEvent, TrialRecord
from hyperscan.scan._status import (
    BestTrial,
    FrontTrial,
    Objective,
    RunningTrial,
    StudyStatus,
    StudySummary,
)
from hyperscan.scan._study import Creation
from hyperscan.scan._worker_report import WorkerReport

__all__ = [
    "BestTrial",
    "Creation",
    "ExportedSample",
    "ExportedTrial",
    "FrontTrial",
    "Objective",
    "RunningTrial",
    "SalvagedStudy",
    "ScanEvent",
    "ScanPlan",
    "ScanResult",
    "StorageLocation",
    "StudyStatus",
    "StudySummary",
    "TrialRecord",
    "WorkerReport",
]
