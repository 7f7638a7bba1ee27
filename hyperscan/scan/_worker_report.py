"""How a worker ended: apart from the worker loop, which imports TensorFlow, so that the API
and its result types name it without loading the fit."""

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerReport:
    """How a worker ended."""

    trials: int  # trials this worker ended, re-queued ones included
    stopped_by_signal: bool
    budget_reached: bool
    # stop_after: the next trial (expected_trial_s, None if unknown) did not fit in seconds_left
    walltime_reached: bool = False
    expected_trial_s: float | None = None
    seconds_left: float | None = None
    requeued: int = 0  # of `trials`: cut short by a signal and queued again for another worker
    #: Set when the worker took no more trials because its memory grew by this many MiB since
    #: its first trial (past ``max_growth_mib``): a fresh process would go on.
    grown_mib: float | None = None

    @property
    def outgrown_only(self) -> bool:
        """The memory's growth ended the worker, and neither a signal, the budget nor the
        walltime did: a fresh process would go on with the study."""
        return self.grown_mib is not None and not (
            self.stopped_by_signal or self.budget_reached or self.walltime_reached
        )
