"""A worker's one loop over its trials, for any number of slots: each trial asked of the
study as a slot frees, fitted by a runner, and told as soon as it ends.

Optuna's ``optimize`` runs one trial at a time; this loop uses its ``ask`` and ``tell`` and
does itself what ``optimize`` does around a trial: fail the trials of dead workers before
asking, beat for every trial in flight (:class:`TrialHeartbeats`), tell a trial pruned or
failed. Two runners fit the trials: :class:`OneTrial`, one at a time through ``run_fit`` (as
``hyperscan fit`` refits an exported trial, bit for bit), and :class:`~hyperscan.fit.TrialBatch`,
P at a time in one model. How each trial ends is decided by scan/_lifecycle.py's
:func:`ending_of`; when to take no more, by the worker's :class:`WorkerLimits`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import optuna
from optuna.exceptions import UpdateFinishedTrialError

from hyperscan.data import Problem
from hyperscan.fit import FitResult, MustFitAlone, SyncReport, TrialBatch, run_fit
from hyperscan.runcard import FitRuncard
from hyperscan.scan._lifecycle import ENDINGS, ending_of
from hyperscan.scan._limits import WorkerLimits
from hyperscan.scan._objective import Monitor, Objective, Trashed
from hyperscan.scan.storage import (
    BudgetSpent,
    TrialHeartbeats,
    asking_outside_optimize,
    describe_error,
    drop_result,
    fail_stale_trials,
    give_back_lost_takes,
    overtaken,
    requeue_cut_short,
    taking,
    transient_error,
    trial_id,
)

_logger = logging.getLogger(__name__)


@dataclass
class _Slot:
    """A trial in flight: its drawn values, its fit's sync hook, and what cut it short."""

    trial: optuna.Trial
    params: dict
    monitor: Monitor
    trash_reason: str | None = None  # its drawn values make no fit runcard
    # A storage error in a sync (its report not written), or the trial failed as stale by
    # another worker: the trial ended at that sync, and is handled as its worker handles it.
    error: Exception | None = None

    def on_sync(self, report: SyncReport) -> bool:
        if self.error is not None:
            return True
        try:
            return self.monitor(report)
        except UpdateFinishedTrialError as error:
            self.error = error
        except Exception as error:
            if not transient_error(error):
                raise
            self.error = error
        return True


class OneTrial:
    """The runner of one slot: its trial fitted alone by ``run_fit`` at the next ``advance``,
    so that a one-slot worker's trial is its exported runcard's fit, bit for bit."""

    def __init__(self, problem: Problem) -> None:
        self._problem = problem
        self._placed: tuple[Hashable, FitRuncard, Callable[[SyncReport], bool] | None] | None = None

    @property
    def free_slots(self) -> int:
        return 0 if self._placed is not None else 1

    def place(
        self,
        key: Hashable,
        card: FitRuncard,
        on_sync: Callable[[SyncReport], bool] | None = None,
    ) -> None:
        if self._placed is not None:
            raise ValueError("no free slot: one trial at a time")
        self._placed = (key, card, on_sync)

    def advance(self) -> list[tuple[Hashable, FitResult]]:
        if self._placed is None:
            return []
        key, card, on_sync = self._placed
        self._placed = None
        return [(key, run_fit(card, problem=self._problem, on_sync=on_sync))]


Runner = OneTrial | TrialBatch


def run_trials(
    study: optuna.Study, objective: Objective, runner: Runner, limits: WorkerLimits
) -> bool:
    """Keep ``runner``'s slots full of the study's trials until ``limits`` refuse another and
    those in flight ended; True if the budget's gate refused one (the budget is taken).

    A transient storage error that cuts a trial short is waited out on ``limits``' retry
    schedule (past it, raised) by the trial's re-queue.
    """
    slots: dict[int, _Slot] = {}
    spent = halted = False
    with TrialHeartbeats(study) as beats:

        def requeue(cut_short: int) -> None:
            """Re-queue a trial cut short (by an outage, or failed as stale elsewhere: then a
            no-op), trying again on the retry schedule while the storage is away: a trial left
            RUNNING would wait out the grace period, and fill the budget meanwhile."""
            while True:
                try:
                    requeue_cut_short(study, cut_short)
                except Exception as error:
                    limits.wait_out(error)  # raises once the schedule is spent
                else:
                    limits.storage_answered()
                    return

        def end(slot: _Slot, result: FitResult | None) -> bool:
            """Tell the study how ``slot``'s trial ended; whether to take no more trials."""
            trial = slot.trial
            try:
                if slot.error is not None:
                    raise slot.error
                ending, values = objective.finish(
                    trial, slot.params, result, slot.monitor, slot.trash_reason
                )
                beats.remove(trial_id(trial))  # no beat once the trial is told
                state = ENDINGS[ending].state
                return limits.told(study.tell(trial, values, state=state))
            except Exception as error:
                beats.remove(trial_id(trial))
                if not (overtaken(error) or transient_error(error)):
                    raise
                ending = ending_of(overtaken=overtaken(error), cut_short=not overtaken(error))
                if ENDINGS[ending].state is None:
                    drop_result(trial)  # its file too, if it was kept for an outage
                    limits.dropped()
                else:
                    _logger.warning("trial %d: %s", trial.number, describe_error(error, limits.url))
                # Tried at once: the outage may be over (one outage cuts every trial in flight
                # short, and the first of them waited it out), and the re-queue waits out the
                # rest itself. A no-op once another worker re-queued it.
                requeue(trial_id(trial))
                return False
            finally:
                slots.pop(trial.number, None)

        while True:
            asking = not (halted or objective.stop.is_set()) and runner.free_slots
            if asking:
                try:
                    spent, halted = _fill(study, objective, runner, slots, beats, limits, end)
                except Exception as error:  # failing stale trials, or an ask
                    limits.wait_out(error)  # raises what is not a transient storage error
                    if not slots:
                        continue  # ask again
            if not slots:
                return spent
            try:
                finished = runner.advance()
            except Exception as error:
                # A storage error a fit raised, past its sync hook: the one trial's, as a sync's
                if len(slots) != 1 or not (overtaken(error) or transient_error(error)):
                    raise
                (slot,) = slots.values()
                slot.error = error
                finished = [(slot.trial.number, None)]
            for key, result in finished:
                halted |= end(slots[key], result)


def _fill(
    study: optuna.Study,
    objective: Objective,
    runner: Runner,
    slots: dict[int, _Slot],
    beats: TrialHeartbeats,
    limits: WorkerLimits,
    end: Callable[[_Slot, FitResult | None], bool],
) -> tuple[bool, bool]:
    """Ask the study for trials while a slot is free and ``limits`` allow; returns whether the
    budget is taken and whether to take no more."""
    if not limits.may_take(len(slots)):
        return False, False
    # What Optuna's optimize does before each trial it asks for: a dead worker's trial is
    # failed and queued again, so that a worker takes it.
    fail_stale_trials(study, requeue=True)
    give_back_lost_takes(study)  # what this worker's failed asks took
    halted = False
    while runner.free_slots and not halted and limits.may_take(len(slots)):
        try:
            with asking_outside_optimize(), taking(study):
                trial = study.ask()
        except BudgetSpent:
            # Asked again as the next trial in flight ends: if an outage cuts one short, its
            # copy is queued for the budget, and nobody else may be asking.
            return True, halted
        limits.storage_answered()
        beats.add(trial_id(trial))
        slot = _Slot(trial, {}, Monitor(objective, trial))
        slots[trial.number] = slot
        try:
            slot.params, card = objective.start(trial)
        except Trashed as error:
            slot.trash_reason = str(error)
            halted = end(slot, None)
            continue
        except Exception as error:
            if not (transient_error(error) or isinstance(error, UpdateFinishedTrialError)):
                raise
            slot.error = error
            halted = end(slot, None)
            continue
        try:
            runner.place(trial.number, card, on_sync=slot.on_sync)
        except MustFitAlone as error:
            # Its values change what one model's members share (a searched
            # data.training_fraction, training.precision, ...): fitted alone, the others wait.
            _logger.warning("trial %d fitted alone: %s", trial.number, error)
            result = run_fit(card, problem=objective.problem, on_sync=slot.on_sync)
            halted = end(slot, result)
    return False, halted
