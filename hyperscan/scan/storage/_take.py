# SPDX-License-Identifier: GPL-3.0-or-later
"""Exact budgets: a worker takes a trial only if the trials finished and in flight leave room
for it, counted and taken under one lock (without it, 8 workers on a budget of 12 finished 17,
each seeing 11 finished as it asked)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import optuna
from optuna.trial import TrialState

from hyperscan.scan.storage._internals import backend_storage, study_id, study_storage

#: The states that spend a budget's trial, or will: a FAIL (a lost worker's) spends none, and
#: its re-queued copy is taken as any new trial.
TAKEN = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)


class BudgetSpent(Exception):
    """No trial was taken: the budget's trials are all finished or running."""


TakeGate = Callable[[int], bool]
"""Told how many trials are taken (:data:`TAKEN`), whether one more may be."""


class GatedTakes:
    """A storage mixin: with :meth:`gate_takes`, a new trial (Optuna's ``ask``) or a queued one
    turned RUNNING is taken only while the gate allows, else :class:`BudgetSpent` is raised.

    Subclasses give :meth:`_taken`, a lock (across processes) held while the trials are
    counted and one is taken, and the count.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._gate: TakeGate | None = None
        self._gated_study = -1
        super().__init__(*args, **kwargs)

    def gate_takes(self, study_id: int, gate: TakeGate | None) -> None:
        """Let ``gate`` decide whether this process takes another trial of the study (None:
        always)."""
        self._gate, self._gated_study = gate, study_id

    def _taken(self, study_id: int) -> AbstractContextManager[int]:
        raise NotImplementedError

    def _take(self, study_id: int, take: Callable[[], Any]) -> Any:
        if self._gate is None or study_id != self._gated_study:
            return take()
        with self._taken(study_id) as taken:
            if not self._gate(taken):
                raise BudgetSpent(f"{taken} trials finished or running")
            return take()

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        """As Optuna's; turning a queued trial RUNNING (Optuna's ``ask``) takes it."""
        write = super().set_trial_state_values  # type: ignore[misc]
        if self._gate is None or state != TrialState.RUNNING:
            return write(trial_id, state, values)
        # A worker takes trials of the study it gates only.
        return self._take(self._gated_study, lambda: write(trial_id, state, values))


def gate_takes(study: optuna.Study, gate: TakeGate | None) -> None:
    """Let ``gate`` decide whether this process takes another trial of ``study`` (None:
    always); a storage of another kind takes trials as Optuna does."""
    backend = backend_storage(study_storage(study))
    if isinstance(backend, GatedTakes):
        backend.gate_takes(study_id(study), gate)
