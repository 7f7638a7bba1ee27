# SPDX-License-Identifier: GPL-3.0-or-later
"""Exact budgets: a worker takes a trial only if the trials finished and in flight leave room
for it, counted and taken under one lock (without it, 8 workers on a budget of 12 finished 17,
each seeing 11 finished as it asked); a copy of a trial cut short is queued under the same lock
only while the budget needs it, and a new trial is not created while queued copies fill the
budget (a copy queued as another worker created the budget's last trial waited for ever); and
a trial taken by an ask that failed (the database went down after the take) given back to the
queue, not left RUNNING with no worker."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, NamedTuple

import optuna
from optuna.trial import FrozenTrial, TrialState

from hyperscan.scan.storage._internals import backend_storage, study_id, study_storage

_logger = logging.getLogger(__name__)

#: The system attribute that marks a trial created by an ask with the ask's token, so that a
#: worker can find the trial an ask created if the database went down before it answered.
ASK_TOKEN_ATTR = "hyperscan:ask_token"

#: The states that spend a budget's trial, or will: a FAIL (a lost worker's) spends none, and
#: its re-queued copy is taken as any new trial.
TAKEN = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)


class BudgetSpent(Exception):
    """No trial was taken: the budget's trials are all finished, running or queued."""


TakeGate = Callable[[int], bool]
"""Told how many trials are taken (:data:`TAKEN`), whether one more may be."""


class Counted(NamedTuple):
    """A study's trials as the gate counts them, under its lock."""

    taken: int  # finished or running (:data:`TAKEN`)
    queued: int  # WAITING: a copy to fit again, or a take given back

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> Counted:
        """From the number of trials in each state, by the state's name."""
        taken = sum(counts.get(state.name, 0) for state in TAKEN)
        return cls(taken, counts.get(TrialState.WAITING.name, 0))


class GatedTakes:
    """A storage mixin: with :meth:`gate_takes`, a new trial (Optuna's ``ask``) or a queued one
    turned RUNNING is taken only while the gate allows, else :class:`BudgetSpent` is raised.

    Subclasses give :meth:`_counted`, a lock (across processes) held while the trials are
    counted and one is taken or queued, and the counts; they create an ask's new trial through
    :meth:`_created`, so that :meth:`asking` knows what a failed ask took.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._gate: TakeGate | None = None
        self._gated_study = -1
        # What the ask under way took: trial ids, or the token of a trial being created.
        self._asking: list[int | str] | None = None
        # What failed asks took, to give back (:func:`give_back_lost_takes`).
        self._lost: list[int | str] = []
        super().__init__(*args, **kwargs)

    @contextmanager
    def asking(self) -> Iterator[None]:
        """Around Optuna's ``ask``: if it fails, the trial it took (it may have been created or
        turned RUNNING before the database went down) is kept to give back."""
        self._asking = []
        try:
            yield
        except BaseException:
            self._lost.extend(self._asking)
            raise
        finally:
            self._asking = None

    def _created(self, create: Callable[[str | None], Any]) -> Any:
        """Create a trial of an ask through ``create(token)``, the token marking it (None
        outside an ask); returns what ``create`` returns."""
        if self._asking is None:
            return create(None)
        token = uuid.uuid4().hex
        self._asking.append(token)
        created = create(token)
        self._asking[-1] = created if isinstance(created, int) else created._trial_id
        return created

    def gate_takes(self, study_id: int, gate: TakeGate | None) -> None:
        """Let ``gate`` decide whether this process takes another trial of the study (None:
        always)."""
        self._gate, self._gated_study = gate, study_id

    def _counted(self, study_id: int) -> AbstractContextManager[Counted]:
        raise NotImplementedError

    def _take(self, study_id: int, take: Callable[[], Any], *, new: bool) -> Any:
        """``take()`` if the gate allows: a ``new`` trial counts the queued ones too (they are
        the budget's, and taken first), a queued trial turned RUNNING only those taken."""
        if self._gate is None or study_id != self._gated_study:
            return take()
        with self._counted(study_id) as counted:
            taken = counted.taken + (counted.queued if new else 0)
            if not self._gate(taken):
                raise BudgetSpent(f"{taken} trials finished, running{' or queued' * new}")
            return take()

    def queue_if_needed(self, study_id: int, queue: Callable[[], None]) -> bool:
        """``queue()`` a copy of a trial if the gate, told the trials finished, running or
        queued, allows one more; counted and queued under the gate's lock, so that no other
        worker creates the budget's last trial in between. Whether it was queued."""
        if self._gate is None or study_id != self._gated_study:
            queue()
            return True
        with self._counted(study_id) as counted:
            if not self._gate(counted.taken + counted.queued):
                return False
            queue()
            return True

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        """As Optuna's; turning a queued trial RUNNING (Optuna's ``ask``) takes it."""
        write = super().set_trial_state_values  # type: ignore[misc]
        if state != TrialState.RUNNING:
            return write(trial_id, state, values)
        # A worker takes trials of the study it gates only (without a gate: as Optuna does).
        taken = self._take(self._gated_study, lambda: write(trial_id, state, values), new=False)
        if taken and self._asking is not None:
            self._asking.append(trial_id)
        return taken

    def _lost_trial(self, study_id: int, taken: int | str) -> FrozenTrial | None:
        if isinstance(taken, int):
            return self.get_trial(taken)  # type: ignore[attr-defined]
        running = self.get_all_trials(  # type: ignore[attr-defined]
            study_id, deepcopy=False, states=(TrialState.RUNNING,)
        )
        return next((t for t in running if t.system_attrs.get(ASK_TOKEN_ATTR) == taken), None)

    def give_back_lost(self, study_id: int) -> list[int]:
        """Queue again the trials that failed asks took and are still RUNNING (no worker has
        them: an ask that failed returned none); their numbers. Raises while the storage is
        down, keeping what is left to give back."""
        given = []
        while self._lost:
            trial = self._lost_trial(study_id, self._lost[0])
            if trial is not None and trial.state == TrialState.RUNNING:
                self.set_trial_state_values(trial._trial_id, TrialState.WAITING)  # type: ignore[misc]
                given.append(trial.number)
            self._lost.pop(0)
        return given


@contextmanager
def taking(study: optuna.Study) -> Iterator[None]:
    """Around ``study.ask()``: a trial it took is given back by :func:`give_back_lost_takes`
    if the ask fails (a storage of another kind does as Optuna does)."""
    backend = backend_storage(study_storage(study))
    if not isinstance(backend, GatedTakes):
        yield
        return
    with backend.asking():
        yield


def give_back_lost_takes(study: optuna.Study) -> None:
    """Queue again the trials taken by this process's failed asks of ``study`` (see
    :func:`taking`), each said in the log; call before asking again. Raises what the storage
    raises while it is down."""
    backend = backend_storage(study_storage(study))
    if isinstance(backend, GatedTakes):
        for number in backend.give_back_lost(study_id(study)):
            _logger.warning(
                "trial %d: taken by an ask the storage failed to answer: queued again", number
            )


def queue_if_needed(study: optuna.Study, queue: Callable[[], None]) -> bool:
    """``queue()`` a copy of a trial of ``study`` while its budget needs one (see
    :meth:`GatedTakes.queue_if_needed`; a storage of another kind always queues it); whether
    it was queued."""
    backend = backend_storage(study_storage(study))
    if isinstance(backend, GatedTakes):
        return backend.queue_if_needed(study_id(study), queue)
    queue()
    return True


def marked_new_trial(token: str) -> FrozenTrial:
    """The template of a new trial as Optuna's ``ask`` creates it (RUNNING, started now),
    marked with an ask's token."""
    return FrozenTrial(
        number=-1,
        state=TrialState.RUNNING,
        value=None,
        values=None,
        datetime_start=datetime.now(),
        datetime_complete=None,
        params={},
        distributions={},
        user_attrs={},
        system_attrs={ASK_TOKEN_ATTR: token},
        intermediate_values={},
        trial_id=-1,
    )


def gate_takes(study: optuna.Study, gate: TakeGate | None) -> None:
    """Let ``gate`` decide whether this process takes another trial of ``study`` (None:
    always); a storage of another kind takes trials as Optuna does."""
    backend = backend_storage(study_storage(study))
    if isinstance(backend, GatedTakes):
        backend.gate_takes(study_id(study), gate)
