"""Fitting an ensemble: compiled training loop, stopping, positivity, divergence, results."""

from hyperscan.fit._api import fit_runcard
from hyperscan.fit._fit import (
    DIVERGED_STATUS,
    OK,
    POSITIVITY_VETO,
    FitResult,
    build_ensemble,
    output_xgrid,
    run_fit,
    trainer_settings,
    usable_starts,
)
from hyperscan.fit._members import MemberSpec, build_members, member_specs
from hyperscan.fit._optimizers import OPTIMIZERS, make_optimizer
from hyperscan.fit._output import (
    ResultsKeptError,
    results_document,
    summary,
    write_fit,
)
from hyperscan.fit._progress import ProgressBar
from hyperscan.fit._signals import stop_on_signals
from hyperscan.fit._trainer import (
    DIVERGED,
    RUNNING,
    STOPPED,
    SyncReport,
    Trainer,
    TrainerSettings,
    TrainingOutcome,
)

__all__ = [
    "DIVERGED",
    "DIVERGED_STATUS",
    "OK",
    "OPTIMIZERS",
    "POSITIVITY_VETO",
    "RUNNING",
    "STOPPED",
    "FitResult",
    "MemberSpec",
    "ProgressBar",
    "ResultsKeptError",
    "SyncReport",
    "Trainer",
    "TrainerSettings",
    "TrainingOutcome",
    "build_ensemble",
    "build_members",
    "fit_runcard",
    "make_optimizer",
    "member_specs",
    "output_xgrid",
    "results_document",
    "run_fit",
    "stop_on_signals",
    "summary",
    "trainer_settings",
    "usable_starts",
    "write_fit",
]
