# SPDX-License-Identifier: GPL-3.0-or-later
"""A trial batch (fit/_slots.py): trials of one scan in the slots of one compiled model, each
trial's result that of its runcard fitted alone, whatever else shares the batch and when."""

from __future__ import annotations

import numpy as np
import pytest
from _cards import tiny_card

from hyperscan.data import load_problem
from hyperscan.fit import MustFitAlone, TrialBatch, fit_runcard, run_fit

BASE = {"replicas": [1, 2], "epochs": 150, "training": {"steps_per_call": 20}}


def card(**changes):
    return tiny_card(**{**BASE, **changes})


def with_training(runcard, **changes):
    return runcard.model_copy(update={"training": runcard.training.model_copy(update=changes)})


#: Trials of one scan: architectures, activations, optimisers, learning rates and epochs differ.
TRIALS = [
    card(),
    card(
        architecture={"nodes": [6], "activations": ["sigmoid"]},
        optimizer={"name": "adam", "learning_rate": 0.01},
        epochs=90,
    ),
    card(architecture={"nodes": [12, 9, 5], "activations": ["elu", "tanh", "tanh"]}, epochs=100),
    card(optimizer={"name": "rmsprop", "learning_rate": 0.005}, epochs=60),
]


def _same(result, alone) -> None:
    assert result.status == alone.status
    assert result.steps == alone.steps
    np.testing.assert_array_equal(result.best_epoch, alone.best_epoch)
    np.testing.assert_array_equal(result.stop_epoch, alone.stop_epoch)
    for name, values in alone.chi2_per_point.items():
        np.testing.assert_allclose(result.chi2_per_point[name], values, rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(result.predictions, alone.predictions, rtol=1e-6)
    for got, expected in zip(result.params, alone.params, strict=True):
        assert got.shape == expected.shape


@pytest.fixture(scope="module")
def alone():
    """``alone(trial, problem)``: ``run_fit(trial, problem=problem)``, each runcard fitted once
    per module (a fit alone is deterministic; several tests compare against the same ones)."""
    fits = {}

    def fit(trial, problem):
        key = trial.model_dump_json()
        if key not in fits:
            fits[key] = run_fit(trial, problem=problem)
        return fits[key]

    return fit


def test_trials_refilled_into_slots_equal_their_fits_alone(alone):
    problem = load_problem(TRIALS[0])
    batch = TrialBatch(TRIALS[0], problem, slots=2)
    waiting = list(enumerate(TRIALS))
    results = {}
    while waiting or batch.in_flight:
        while waiting and batch.free_slots:
            key, trial = waiting.pop(0)
            batch.place(key, trial)
        for key, result in batch.advance():
            results[key] = result
    assert sorted(results) == list(range(len(TRIALS)))
    for key, trial in enumerate(TRIALS):
        _same(results[key], alone(trial, problem))


def _fit_all(batch: TrialBatch, trials, on_sync=None) -> dict:
    waiting = list(enumerate(trials))
    results = {}
    while waiting or batch.in_flight:
        while waiting and batch.free_slots:
            key, trial = waiting.pop(0)
            batch.place(key, trial, None if on_sync is None else on_sync(key))
        for key, result in batch.advance():
            results[key] = result
    return results


def test_a_batch_with_room_reserved_is_built_once_and_never_traced_again(alone):
    """With the widest trials reserved, refilling slots writes variables only: one model,
    one trace of its loop, however many trials pass through."""
    problem = load_problem(TRIALS[0])
    batch = TrialBatch(TRIALS[0], problem, slots=2, reserve=TRIALS)
    results = _fit_all(batch, TRIALS + TRIALS[:2])
    assert batch.builds == 1
    assert batch._trainer.steps_function.experimental_get_tracing_count() == 1
    for key, trial in enumerate(TRIALS + TRIALS[:2]):
        _same(results[key], alone(trial, problem))


def _identical(result, replayed) -> None:
    """Bit for bit: every figure of the fit, and its weights."""
    assert replayed.status == result.status
    np.testing.assert_array_equal(replayed.best_epoch, result.best_epoch)
    np.testing.assert_array_equal(replayed.stop_epoch, result.stop_epoch)
    for name, values in result.chi2_per_point.items():
        np.testing.assert_array_equal(replayed.chi2_per_point[name], values, err_msg=name)
    np.testing.assert_array_equal(replayed.predictions, result.predictions)
    for got, expected in zip(replayed.params, result.params, strict=True):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_a_trial_refitted_in_its_batch_layout_is_bit_for_bit_its_slotted_fit(precision, alone):
    """Each result carries the batch it was fitted in; a runcard with that layout is refitted
    by `fit_runcard` in such a batch, the other slots empty, and gives the slotted result bit
    for bit: trials refilled into a freed slot (started at a later step, beside other trials)
    included. The layout is needed: alone, the trials round otherwise."""
    trials = [with_training(t, precision=precision) for t in TRIALS]
    problem = load_problem(trials[0])
    batch = TrialBatch(trials[0], problem, slots=2, reserve=trials)
    results = _fit_all(batch, trials)
    layouts = {key: result.batch_layout for key, result in results.items()}
    assert {layout.slot for layout in layouts.values()} == {0, 1}
    assert all(layout.slots == 2 for layout in layouts.values())
    rounded_otherwise = False
    for key, trial in enumerate(trials):
        exported = with_training(trial, batch_layout=layouts[key])
        _identical(results[key], fit_runcard(exported, problem=problem))
        # One trial that rounds otherwise alone shows the layout is needed: once one has, the
        # others are not fitted alone (`or` stops there).
        rounded_otherwise = rounded_otherwise or not np.array_equal(
            alone(trial, problem).predictions, results[key].predictions
        )
    assert rounded_otherwise


def test_a_trial_the_batch_was_rebuilt_under_has_no_layout():
    """A trial that needed a wider model rebuilt it under the trial in flight, which no
    refit repeats: that trial's result carries no layout; the new one's does."""
    problem = load_problem(TRIALS[0])
    batch = TrialBatch(TRIALS[0], problem, slots=2)
    batch.place("narrow", TRIALS[1])
    batch.advance()
    batch.place("wide", TRIALS[2])  # three hidden layers: rebuilt
    assert batch.builds == 2
    results = dict(_fit_all(batch, []))
    assert results["narrow"].batch_layout is None
    assert results["wide"].batch_layout.widths == (12, 9, 6)  # the narrow one passes 6 on


class _PruneAt:
    """A sync hook that stops its fit at its n-th sync, as a pruner does."""

    def __init__(self, n: int) -> None:
        self.n, self.syncs, self.steps = n, 0, []

    def __call__(self, report) -> bool:
        self.syncs += 1
        self.steps.append(report.step)
        return self.syncs == self.n


def test_a_trial_stopped_by_its_sync_hook_ends_as_its_fit_alone_does():
    """A pruned trial leaves the batch at once, its members still running `interrupted`, and
    its hook saw the same reports (steps counted from its own start) as alone."""
    problem = load_problem(TRIALS[0])
    hooks = {key: _PruneAt(2) for key in range(3)}
    batch = TrialBatch(TRIALS[0], problem, slots=2, reserve=TRIALS)
    results = _fit_all(batch, TRIALS[:3], on_sync=hooks.get)
    for key, trial in enumerate(TRIALS[:3]):
        alone_hook = _PruneAt(2)
        alone = run_fit(trial, problem=problem, on_sync=alone_hook)
        assert hooks[key].steps == alone_hook.steps
        assert results[key].interrupted == alone.interrupted
        _same(results[key], alone)


def test_a_dropped_trial_frees_its_slot(alone):
    problem = load_problem(TRIALS[0])
    batch = TrialBatch(TRIALS[0], problem, slots=1)
    batch.place("a", TRIALS[0])
    with pytest.raises(ValueError, match="no free slot") as refused:
        batch.place("b", TRIALS[1])
    assert not isinstance(refused.value, MustFitAlone)  # a broken caller, not a lone trial
    batch.drop("a")
    assert batch.free_slots == 1 and batch.in_flight == []
    batch.place("b", TRIALS[3])
    (key, result), *_ = [ended for _ in range(10) for ended in batch.advance()]
    assert key == "b"
    _same(result, alone(TRIALS[3], problem))


def test_a_trial_of_another_split_is_refused():
    problem = load_problem(TRIALS[0])
    batch = TrialBatch(TRIALS[0], problem, slots=2)
    with pytest.raises(MustFitAlone, match="'data' differs"):
        batch.place("other", card(data={"training_fraction": 0.5}))


def test_auto_slots_aim_at_the_device_s_rows_within_its_memory(monkeypatch):
    from hyperscan.fit import _slots, auto_slots, max_slots

    problem = load_problem(TRIALS[0])
    members = 2  # replicas 1 and 2, no folds
    assert auto_slots(TRIALS[0], problem) == _slots.AUTO_ROWS["CPU"] // members
    trial_bytes = members * _slots._member_bytes(TRIALS[0], problem)
    share = _slots.AUTO_MEMORY_SHARE
    monkeypatch.setattr(_slots, "_device_memory", lambda gpu: 2.5 * trial_bytes / share)
    assert max_slots(TRIALS[0], problem) == 2
    assert auto_slots(TRIALS[0], problem) == 2
    monkeypatch.setattr(_slots, "_device_memory", lambda gpu: 1.0)
    assert max_slots(TRIALS[0], problem) == 0
    assert auto_slots(TRIALS[0], problem) == 1
