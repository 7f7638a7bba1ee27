"""A fit as one call: a runcard (a path or a loaded one) in, the fit's results out."""

from __future__ import annotations

import os
from collections.abc import Callable

from hyperscan.data import Problem, load_problem
from hyperscan.fit._fit import FitResult, run_fit
from hyperscan.fit._loop import SyncReport
from hyperscan.fit._slots import refit_in_batch
from hyperscan.runcard import FitRuncard, RuncardError, ScanRuncard, load_runcard


def fit_runcard(
    runcard: FitRuncard | str | os.PathLike[str],
    on_sync: Callable[[SyncReport], bool | None] | None = None,
    *,
    problem: Problem | None = None,
) -> FitResult:
    """Fit the ensemble a fit runcard describes, in this process, and return its results
    (``hyperscan.fit.write_fit`` writes them as `hyperscan fit` does).

    ``on_sync`` is told of each host sync; returning True stops the fit there (its result
    says ``interrupted``). ``problem``: the runcard's data, if the caller has loaded them.
    A runcard with a ``training.batch_layout`` (an exported scan trial) is fitted in that
    batch, as the scan fitted it (:func:`refit_in_batch`); others by :func:`run_fit`.
    """
    source = "<runcard>"
    if not isinstance(runcard, FitRuncard):
        source = os.fspath(runcard)
        runcard = load_runcard(source)
    if isinstance(runcard, ScanRuncard):
        raise RuncardError(
            [
                (
                    "",
                    "is a scan runcard (it has 'scan:'): create a study of it "
                    "(hyperscan.create_study), or fit one of its trials (Study.export)",
                )
            ],
            source=source,
        )
    if problem is None:
        problem = load_problem(runcard, source)
    if runcard.training.batch_layout is not None:
        return refit_in_batch(runcard, problem, on_sync)
    return run_fit(runcard, problem=problem, on_sync=on_sync)
