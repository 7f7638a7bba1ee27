"""Members of one model with their own training hyperparameters (issue #39): each is the fit of
its own runcard, alone, whatever the others' optimiser, stopping, positivity or epochs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from hyperscan.fit import FINISHED, RUNNING, STOPPED, build_ensemble, run_fit, trainer_settings
from hyperscan.fit._trainer import Trainer

BASE = {
    "replicas": [1, 2, 4, 5, 6],
    "optimizer": {"name": "nadam", "learning_rate": 0.005, "clipnorm": 0.1},
}
# Per replica, what its runcard changes from BASE: three optimiser kinds, learning rates,
# clipnorms, patience, χ² and positivity thresholds, λ's schedule, and epochs that run out
# before the others' (replica 5 with a best step, replica 6 without one: no χ² reaches 1e-3).
CHANGES = {
    1: {},
    2: {
        "optimizer": {"name": "adam", "learning_rate": 0.01, "clipnorm": 0.2},
        "stopping": {"patience": 0.05, "threshold_chi2": 20.0},
    },
    4: {
        "optimizer": {"name": "rmsprop", "learning_rate": 0.002, "clipnorm": 0.05},
        "positivity": {"initial": 5.0, "max": 2000.0},
        "stopping": {"positivity_threshold": 1e-5},
    },
    5: {
        "epochs": 60,
        "stopping": {"patience": 1.0},
        "positivity": {"max": None, "multiplier": 1.5},
    },
    6: {"epochs": 80, "stopping": {"patience": 1.0, "threshold_chi2": 1e-3}},
}


def _member_card(make_card, replica):
    changes = CHANGES[replica]
    merged = {**BASE, "replicas": [replica]}
    for key, value in changes.items():
        merged[key] = {**merged[key], **value} if isinstance(merged.get(key), dict) else value
    return make_card(**merged)


@pytest.fixture(scope="module")
def cards(make_card):
    return make_card(**BASE), [_member_card(make_card, r) for r in BASE["replicas"]]


@pytest.fixture(scope="module")
def alone(cards):
    return [run_fit(card) for card in cards[1]]


@pytest.fixture(scope="module")
def batched(cards):
    base, members = cards
    return run_fit(base, member_runcards=members)


@pytest.fixture(scope="module")
def compacted(cards):
    base, members = cards
    settings = dataclasses.replace(trainer_settings(base, members), compaction_cost=0.0)
    return run_fit(base, member_runcards=members, settings=settings)


def _assert_equals_alone(result, alone):
    for m, single in enumerate(alone):
        assert single.status[0] == result.status[m], m
        assert single.best_epoch[0] == result.best_epoch[m], m
        assert single.stop_epoch[0] == result.stop_epoch[m], m
        for ours, theirs in zip(result.params, single.params, strict=True):
            np.testing.assert_allclose(ours[m], theirs[0], rtol=0, atol=1e-6)
        for name, values in result.chi2_per_point.items():
            np.testing.assert_allclose(values[m], single.chi2_per_point[name][0], rtol=1e-6)


def test_the_members_settings_are_their_runcards(cards):
    base, members = cards
    settings = trainer_settings(base, members)
    assert settings.optimizer.tolist() == ["nadam", "adam", "rmsprop", "nadam", "nadam"]
    assert settings.epochs.tolist() == [400, 400, 400, 60, 80]
    assert settings.patience_steps.tolist() == [40, 20, 40, 60, 80]
    # λ reaches each member's own positivity.max at its last update, or grows by its multiplier.
    assert settings.lambda_factor[3] == 1.5
    scheduled = [0, 1, 2, 4]
    updates = np.maximum(1, settings.epochs[scheduled] // 100)
    np.testing.assert_allclose(
        settings.lambda_initial[scheduled] * settings.lambda_factor[scheduled] ** updates,
        [1000.0, 1000.0, 2000.0, 1000.0],
    )


def test_a_heterogeneous_batch_equals_each_member_fitted_alone(batched, alone):
    assert len(set(batched.stop_epoch.tolist())) > 2  # stops, run-outs at different epochs
    _assert_equals_alone(batched, alone)


def test_compacting_a_heterogeneous_batch_keeps_each_member_its_settings(compacted, alone):
    batches = [report.batch for report in compacted.history]
    assert batches[0] == 5 and batches[-1] < 4, batches  # three kinds in, fewer out
    _assert_equals_alone(compacted, alone)


def test_a_member_whose_epochs_ran_out_is_finished_not_running(batched):
    short = {3: 60, 4: 80}  # member → its epochs
    assert batched.status[3:] == ["ok", "pos-veto"]
    assert batched.stop_epoch[3:].tolist() == [-1, -1]
    for report in batched.history:
        for member, epochs in short.items():
            assert (report.status[member] == FINISHED) == (report.step >= epochs)
        assert report.n_running == int(np.sum(report.status == RUNNING))
        assert report.n_running <= 5 - sum(report.step >= e for e in short.values())


def test_an_interrupted_fit_does_not_call_a_finished_member_interrupted(cards):
    base, members = cards
    result = run_fit(base, member_runcards=members, on_sync=lambda report: report.step >= 100)
    assert result.interrupted and result.steps == 100
    assert result.status[4] == "pos-veto"  # ran out at 80 without a best step
    assert result.stop_epoch[4] == -1


def test_members_must_share_what_one_model_shares(cards, make_card):
    base, members = cards
    other = make_card(**{**BASE, "replicas": [1]}, training={"steps_per_call": 10})
    with pytest.raises(ValueError, match="member 0: its runcard's 'training' differs"):
        run_fit(base, member_runcards=[other, *members[1:]])
    with pytest.raises(ValueError, match=r"one member runcard per member \(5\), got 4"):
        run_fit(base, member_runcards=members[:4])


def test_one_optimiser_kind_keeps_the_plain_state(cards):
    """With one kind the optimiser's state is that optimiser's, as before kinds could differ."""
    base, members = cards
    model, _, params = build_ensemble(base)
    one_kind = Trainer(model, trainer_settings(base, 5), params)
    assert set(one_kind.variables["optimizer"]) == {"m", "v", "u_product"}
    kinds = Trainer(model, trainer_settings(base, members), params)
    assert set(kinds.variables["optimizer"]) == {"adam", "nadam", "rmsprop"}


def test_compacting_takes_each_members_settings_and_optimiser_kind(cards):
    base, members = cards
    model, _, params = build_ensemble(base)
    settings = trainer_settings(base, members)
    trainer = Trainer(model, settings, params)
    status = np.array([STOPPED, RUNNING, STOPPED, RUNNING, STOPPED])
    trainer.variables["status"].assign(tf.constant(status, tf.int64))
    assert trainer.compact()
    kept = trainer.members
    assert kept.tolist() == [1, 3]  # the two running: a batch of 2
    taken = trainer._batch_settings
    for name in settings.member_axis.arrays:
        np.testing.assert_array_equal(getattr(taken, name), getattr(settings, name)[kept], name)
    for kind in ("adam", "nadam", "rmsprop"):  # rmsprop's member left: its mask is all False
        mask = trainer._setting(kind).numpy()
        np.testing.assert_array_equal(mask, settings.optimizer[kept] == kind, kind)
    assert set(trainer.variables["optimizer"]) == {"adam", "nadam", "rmsprop"}
    assert trainer.variables["optimizer"]["rmsprop"]["velocity"][0].shape[0] == 2
