# SPDX-License-Identifier: GPL-3.0-or-later
"""A trial batch (fit/_slots.py): trials of one scan in the slots of one compiled model, each
trial's result that of its runcard fitted alone, whatever else shares the batch and when."""

from __future__ import annotations

import numpy as np
from conftest import tiny_card

from hyperscan.data import load_problem
from hyperscan.fit import TrialBatch, run_fit

BASE = {"replicas": [1, 2], "epochs": 150, "training": {"steps_per_call": 20}}


def card(**changes):
    return tiny_card(**{**BASE, **changes})


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


def test_trials_refilled_into_slots_equal_their_fits_alone():
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
        _same(results[key], run_fit(trial, problem=problem))
