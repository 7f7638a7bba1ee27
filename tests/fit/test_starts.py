"""A start already past divergence.max_loss is redrawn, per member, from the member's own seed."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from hyperscan.fit import build_ensemble, trainer_settings
from hyperscan.fit._fit import MAX_REDRAWS, run_fit, usable_starts
from hyperscan.fit._output import results_document
from hyperscan.model import take_members


def _start_losses(model, params, settings):
    weights = [tf.constant(p, tf.float64) for p in params]
    return model.observables(weights, settings.lambda_initial).loss.numpy()


def test_bad_starts_are_redrawn_and_good_ones_kept(make_card):
    card = make_card(replicas=list(range(1, 9)))
    model, specs, params = build_ensemble(card)
    settings = trainer_settings(card, len(specs))
    losses = _start_losses(model, params, settings)
    threshold = float(np.median(losses))  # half of the starts are "past divergence"
    settings = settings.__class__(**{**settings.__dict__, "max_loss": threshold})

    starts, redraws = usable_starts(card, model, specs, params, settings)

    bad = losses > threshold
    assert bad.any() and (~bad).any()
    assert np.all(_start_losses(model, starts, settings) <= threshold)
    assert np.all((redraws > 0) == bad)
    for before, after in zip(params, starts, strict=True):
        np.testing.assert_array_equal(after[~bad], before[~bad])
    kernels = zip(params[0::2], starts[0::2], strict=True)  # biases start at zero
    assert all(not np.array_equal(after[bad], before[bad]) for before, after in kernels)

    # A redrawn member gets the same start when it is fitted alone.
    member = int(np.flatnonzero(bad)[0])
    alone = make_card(replicas=[specs[member].replica])
    model_alone, specs_alone, params_alone = build_ensemble(alone)
    starts_alone, redraws_alone = usable_starts(
        alone, model_alone, specs_alone, params_alone, take_members(settings, [member])
    )
    assert redraws_alone[0] == redraws[member]
    for batched, single in zip(starts, starts_alone, strict=True):
        np.testing.assert_array_equal(single[0], batched[member])


def test_redrawing_gives_up_after_max_redraws(make_card):
    card = make_card(replicas=[1, 2])
    model, specs, params = build_ensemble(card)
    settings = trainer_settings(card, len(specs))
    settings = settings.__class__(**{**settings.__dict__, "max_loss": 1e-12})
    _, redraws = usable_starts(card, model, specs, params, settings)
    assert redraws.tolist() == [MAX_REDRAWS, MAX_REDRAWS]


def test_the_fit_reports_redrawn_starts(make_card):
    card = make_card(replicas=[1, 2, 3, 4], epochs=20)
    model, specs, params = build_ensemble(card)
    losses = _start_losses(model, params, trainer_settings(card, len(specs)))
    card = make_card(
        replicas=[1, 2, 3, 4], epochs=20, divergence={"max_loss": float(np.max(losses)) * 0.999}
    )
    result = run_fit(card)
    worst = int(np.argmax(losses))
    assert result.redraws[worst] >= 1
    assert np.all(np.delete(result.redraws, worst) == 0)
    members = results_document(result)["members"]
    assert members[worst]["redrawn_starts"] == result.redraws[worst]
    assert all("redrawn_starts" not in m for i, m in enumerate(members) if i != worst)
