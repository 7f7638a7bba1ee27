"""Fitting an ensemble: compiled training loop, stopping, positivity, divergence, results.

The output format (file names, keys, member statuses), writing it and the signal handling need
no TensorFlow and load with the package; the fit itself, which imports TensorFlow (seconds,
and hundreds of MB), loads on first use, so that readers of a fit's folder (``hyperscan
plot``, the report layer) stay fast and small.
"""

from typing import TYPE_CHECKING, Any

from hyperscan.fit._exportgrid import exportgrid_path
from hyperscan.fit._fitinfo import (
    INTEGRABILITY_FLAVOURS,
    INTEGRABILITY_X,
    POS_PASS,
    POS_VETO,
    arc_length_xgrid,
    arc_lengths,
    integrability_numbers,
)
from hyperscan.fit._format import (
    DIVERGED,
    DIVERGED_STATUS,
    FINISHED,
    HISTORY_ARRAYS,
    HISTORY_FILE,
    INTERRUPTED,
    MEMBER_STATUSES,
    OK,
    PDF_ARRAYS,
    PDF_FILE,
    POSITIVITY_VETO,
    RESULTS_FILE,
    RUNCARD_FILE,
    RUNNING,
    STOPPED,
)
from hyperscan.fit._output import (
    ResultsKeptError,
    results_document,
    summary,
    write_fit,
)
from hyperscan.fit._signals import stop_on_signals

if TYPE_CHECKING:
    from hyperscan.fit._api import fit_runcard
    from hyperscan.fit._fit import (
        SMALL_X,
        FitResult,
        build_ensemble,
        run_fit,
        trainer_settings,
        usable_starts,
    )
    from hyperscan.fit._loop import SyncReport, TrainerSettings
    from hyperscan.fit._members import MemberSpec, build_members, member_specs
    from hyperscan.fit._optimizers import OPTIMIZERS, make_optimizer
    from hyperscan.fit._progress import ProgressBar
    from hyperscan.fit._slots import (
        MustFitAlone,
        TrialBatch,
        auto_slots,
        fit_together,
        max_slots,
    )
    from hyperscan.fit._trainer import Trainer

_TENSORFLOW = {
    "fit_runcard": "_api",
    "FitResult": "_fit",
    "SMALL_X": "_fit",
    "build_ensemble": "_fit",
    "run_fit": "_fit",
    "trainer_settings": "_fit",
    "usable_starts": "_fit",
    "MemberSpec": "_members",
    "build_members": "_members",
    "member_specs": "_members",
    "OPTIMIZERS": "_optimizers",
    "make_optimizer": "_optimizers",
    "ProgressBar": "_progress",
    "MustFitAlone": "_slots",
    "TrialBatch": "_slots",
    "fit_together": "_slots",
    "auto_slots": "_slots",
    "max_slots": "_slots",
    "SyncReport": "_loop",
    "Trainer": "_trainer",
    "TrainerSettings": "_loop",
}

__all__ = [
    "DIVERGED",
    "DIVERGED_STATUS",
    "FINISHED",
    "HISTORY_ARRAYS",
    "HISTORY_FILE",
    "INTEGRABILITY_FLAVOURS",
    "INTEGRABILITY_X",
    "INTERRUPTED",
    "MEMBER_STATUSES",
    "OK",
    "OPTIMIZERS",
    "PDF_ARRAYS",
    "PDF_FILE",
    "POSITIVITY_VETO",
    "POS_PASS",
    "POS_VETO",
    "RESULTS_FILE",
    "RUNCARD_FILE",
    "RUNNING",
    "SMALL_X",
    "STOPPED",
    "FitResult",
    "MemberSpec",
    "MustFitAlone",
    "ProgressBar",
    "ResultsKeptError",
    "SyncReport",
    "Trainer",
    "TrainerSettings",
    "TrialBatch",
    "arc_length_xgrid",
    "arc_lengths",
    "auto_slots",
    "build_ensemble",
    "build_members",
    "exportgrid_path",
    "fit_runcard",
    "fit_together",
    "integrability_numbers",
    "make_optimizer",
    "max_slots",
    "member_specs",
    "results_document",
    "run_fit",
    "stop_on_signals",
    "summary",
    "trainer_settings",
    "usable_starts",
    "write_fit",
]


def __getattr__(name: str) -> Any:
    if name in _TENSORFLOW:
        from hyperscan._tensorflow import loaded_on_use

        return loaded_on_use(f"{__name__}.{_TENSORFLOW[name]}", name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
