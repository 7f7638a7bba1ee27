"""How a trial ends: every way it can go, and the state the study is told for each.

A trial is asked (RUNNING), fitted, and ends in one of the :class:`Ending` below; the table
:data:`ENDINGS` says what the study is told and whether the trial is fitted again elsewhere,
and :func:`ending_of` alone decides which row applies. docs/architecture.md ("A trial's life")
draws the same table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from optuna.trial import TrialState


class Ending(enum.Enum):
    COMPLETE = "scored: its values told"
    PRUNED = "stopped by the pruner"
    TRASHED = "diverged, vetoed, over the threshold, non-finite, or no valid fit runcard"
    STOPPED = "the worker's stop cut its fit short"
    CUT_SHORT = "a storage outage cut it short"
    OVERTAKEN = "failed as stale by another worker, which re-queued it"


@dataclass(frozen=True)
class Transition:
    """What becomes of a trial that ended so."""

    state: TrialState | None  # told to the study; None: not told (its state is set already)
    requeued: bool  # a copy waits for a worker
    recorded: bool  # its fit's attributes are stored on it


ENDINGS: dict[Ending, Transition] = {
    Ending.COMPLETE: Transition(TrialState.COMPLETE, requeued=False, recorded=True),
    # PRUNED, not FAIL: TPE ignores failed trials but ranks pruned ones below every complete
    # trial, so it learns to avoid the region a trashed trial comes from.
    Ending.PRUNED: Transition(TrialState.PRUNED, requeued=False, recorded=True),
    Ending.TRASHED: Transition(TrialState.PRUNED, requeued=False, recorded=True),
    Ending.STOPPED: Transition(TrialState.FAIL, requeued=True, recorded=False),
    # Failed and queued again once the storage is back (requeue_cut_short): a trial left
    # RUNNING would wait out the grace period, and fill the budget meanwhile.
    Ending.CUT_SHORT: Transition(TrialState.FAIL, requeued=True, recorded=False),
    Ending.OVERTAKEN: Transition(None, requeued=True, recorded=False),
}


def ending_of(
    *,
    overtaken: bool = False,
    cut_short: bool = False,
    stopped: bool = False,
    trashed: bool = False,
    pruned: bool = False,
) -> Ending:
    """How a trial ended, from what its worker saw, in order of precedence.

    ``overtaken``: another worker failed it (the storage said so); ``cut_short``: a storage
    error ended it; ``stopped``: the worker's stop ended its fit before the last step (a stop
    at the last sync cut nothing short: that trial is scored); ``trashed``: its drawn values
    or its score gave a reason to trash it; ``pruned``: the pruner stopped it."""
    if overtaken:
        return Ending.OVERTAKEN
    if cut_short:
        return Ending.CUT_SHORT
    if stopped:
        return Ending.STOPPED
    if trashed:
        return Ending.TRASHED
    return Ending.PRUNED if pruned else Ending.COMPLETE
