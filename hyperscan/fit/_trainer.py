"""A whole fit's training: every member until it stops, diverges or runs out of its epochs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hyperscan.fit._loop import SyncReport
from hyperscan.fit._rows import MemberRows, TrainingOutcome


class Trainer(MemberRows):
    """Trains every member of an EnsembleModel at once: the compiled loop (fit/_loop.py) over
    the members' rows (fit/_rows.py), driven from the first step to the last by `run`, as a
    fit's members are; a trial batch (fit/_slots.py) drives the rows itself."""

    def run(
        self,
        on_sync: Callable[[SyncReport], bool | None] | None = None,
    ) -> TrainingOutcome:
        """Train until every member stopped, diverged or ran out of its epochs.

        `on_sync` is called every K steps with a SyncReport; returning True stops the fit
        (the scan service prunes trials this way).
        """
        cfg = self.settings
        history: list[SyncReport] = []
        interrupted = False
        epochs = int(cfg.epochs.max())
        step = int(self._variables["step"].numpy())
        while step < epochs:
            report = self.advance(min(cfg.steps_per_call, epochs - step))
            step = report.step
            history.append(report)
            finished = report.n_running == 0 or step >= epochs
            if on_sync is not None and on_sync(report):
                interrupted = not finished  # a stop asked at the last sync ends nothing early
                break
            if finished:
                break
            if self._compaction_pays(report):
                self.compact()
        return self.outcome(np.arange(self.model.n_members), interrupted, history)
