"""Fits of one loop definition in one process share its compiled function (fit/_compiled.py)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import hyperscan.fit._compiled as compiled
from hyperscan.fit import build_ensemble, trainer_settings
from hyperscan.fit._trainer import Trainer

CARD = {"epochs": 60, "training": {"steps_per_call": 30}}


@pytest.fixture
def definitions(monkeypatch):
    """A process cache of its own, so that what other tests compiled does not count."""
    monkeypatch.setattr(compiled, "_DEFINITIONS", compiled._Definitions(compiled.CAPACITY))


def _trainer(card) -> Trainer:
    model, specs, params = build_ensemble(card)
    return Trainer(model, trainer_settings(card, len(specs)), params)


def _outcome(trainer: Trainer) -> tuple:
    outcome = trainer.run()
    return outcome.params, outcome.best_step, outcome.stop_step, outcome.history[-1].chi2


def test_a_later_fit_of_one_shape_runs_the_first_fits_function_as_its_own_would(
    definitions, make_card
):
    """Replicas 1 and 2 differ in pseudodata, preprocessing and training split, all of which
    the loop captures: the second fit runs the first's function, and ends bit for bit as a fit
    that compiled its own."""
    first = _trainer(make_card(**CARD, replicas=[1]))
    second = _trainer(make_card(**CARD, replicas=[2]))
    assert second._run_steps.function is first._run_steps.function
    shared = _outcome(second)
    _outcome(first)

    compiled._DEFINITIONS = compiled._Definitions(compiled.CAPACITY)
    own = _trainer(make_card(**CARD, replicas=[2]))
    assert own._run_steps.function is not first._run_steps.function
    for got, expected in zip(shared, _outcome(own), strict=True):
        if isinstance(got, list):
            for a, b in zip(got, expected, strict=True):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "other",
    [
        {"replicas": [1, 2]},  # another member count: other shapes
        {"architecture": {"nodes": [12, 8], "activations": ["tanh", "tanh"]}},
        {"divergence": {"max_loss": 1e6}},  # a number traced into the loop as a constant
        {"training": {"steps_per_call": 30, "jit": False}},
    ],
)
def test_a_fit_of_another_definition_gets_its_own_function(definitions, make_card, other):
    first = _trainer(make_card(**CARD, replicas=[1]))
    second = _trainer(make_card(**{**CARD, "replicas": [1], **other}))
    assert second._run_steps.function is not first._run_steps.function


def test_the_function_kept_does_not_keep_the_fit_that_traced_it(definitions, make_card):
    first = _trainer(make_card(**CARD, replicas=[1]))
    data = weakref.ref(first.model._data)
    function = first._run_steps.function
    _outcome(first)
    del first
    gc.collect()
    assert data() is None
    second = _trainer(make_card(**CARD, replicas=[2]))
    assert second._run_steps.function is function
    assert np.isfinite(_outcome(second)[3]).all()
