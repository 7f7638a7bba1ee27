"""The equivalences hyperscan promises: batched = separate, K steps per call = 1, XLA = eager."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from hyperscan.data import load_problem
from hyperscan.fit import (
    build_ensemble,
    build_members,
    member_specs,
    run_fit,
    trainer_settings,
)
from hyperscan.fit._trainer import Trainer


def _gradient_norms(card):
    model, _, params = build_ensemble(card)
    params = [tf.constant(p) for p in params]
    with tf.GradientTape() as tape:
        tape.watch(params)
        loss = tf.reduce_sum(model.observables(params).chi2[:, 0])
    grads = tape.gradient(loss, params)
    return np.sqrt(sum(np.sum(g.numpy() ** 2, axis=tuple(range(1, g.ndim))) for g in grads))


STABLE = {
    "replicas": [1, 2, 4, 5],
    "optimizer": {"name": "nadam", "learning_rate": 0.005, "clipnorm": 0.1},
}


@pytest.fixture(scope="module")
def batched(make_card):
    card = make_card(**STABLE)
    return card, run_fit(card)


def test_clipping_and_stopping_are_exercised(batched):
    card, result = batched
    assert np.all(_gradient_norms(card) > 10 * card.optimizer.clipnorm)
    assert np.all(result.stop_epoch >= 0), "every member should stop before the last epoch"
    assert len(set(result.stop_epoch.tolist())) > 1, "members should stop at different epochs"
    assert result.status == ["ok"] * 4


def test_batched_fit_equals_separate_fits(batched, make_card):
    """A batch changes the shape of the FK contraction (a GEMM over members), hence its
    summation order, by one rounding (1e-16). Trajectories that stay well conditioned agree
    to 1e-6; a replica whose training is chaotic (replica 3 here, which never satisfies
    positivity while λ grows) amplifies rounding as it would between two machines, so the
    exact, bitwise statement of independence is test_members_never_couple."""
    card, result = batched
    for m, replica in enumerate(card.replica_ids):
        alone = run_fit(make_card(**{**STABLE, "replicas": [replica]}))
        assert alone.best_epoch[0] == result.best_epoch[m]
        assert alone.stop_epoch[0] == result.stop_epoch[m]
        assert alone.status[0] == result.status[m]
        for batched_weights, alone_weights in zip(result.params, alone.params, strict=True):
            np.testing.assert_allclose(batched_weights[m], alone_weights[0], rtol=0, atol=1e-6)
        for name, values in result.chi2_per_point.items():
            np.testing.assert_allclose(values[m], alone.chi2_per_point[name][0], rtol=1e-6)


def test_batched_float32_fit_equals_separate_fits_to_its_rounding(make_card):
    """float32 rounds 1e9 times coarser than float64, and training amplifies a batch's changed
    summation order likewise: on this problem the members' χ² agree to ~5e-5 and their weights
    to ~3e-4 after 100 epochs (float64: 1e-6 and better). The bounds keep a 15-20x margin
    and allow a best step moved to a neighbouring epoch (one Nadam step, ~lr, per weight), as
    happens where the validation χ² is flat at its minimum. A clipping norm shared by the
    batch would clip each member at about half its own: fitted alone with clipnorm halved,
    replica 1's χ² moves by 1e-2, ten times the bound."""
    float32 = {**STABLE, "epochs": 100, "training": {"precision": "float32"}}
    card = make_card(**float32)
    result = run_fit(card)
    assert result.params[0].dtype == np.float32
    for m, replica in enumerate(card.replica_ids):
        alone = run_fit(make_card(**{**float32, "replicas": [replica]}))
        assert alone.status[0] == result.status[m] == "ok"
        assert abs(int(alone.best_epoch[0]) - int(result.best_epoch[m])) <= 1
        for batched_weights, alone_weights in zip(result.params, alone.params, strict=True):
            np.testing.assert_allclose(batched_weights[m], alone_weights[0], rtol=0, atol=1e-2)
        for name, values in result.chi2_per_point.items():
            np.testing.assert_allclose(values[m], alone.chi2_per_point[name][0], rtol=1e-3)


def test_k_fold_members_equal_their_separate_fits(make_card):
    """Folds × replicas in one batch: each member is its replica fitted without its fold's
    datasets, as one fold fitted alone is (splits are drawn per replica, not per member)."""
    folds = [["TOY_HERA_NC_F2P", "TOY_NUTEV_XF3WP"], ["TOY_HERA_CC_F2WP", "TOY_GLUON"]]
    result = run_fit(make_card(**{**STABLE, "replicas": [1, 2]}, folds=folds))
    assert result.folds.tolist() == [0, 0, 1, 1] and result.replicas.tolist() == [1, 2, 1, 2]
    for m in range(result.n_members):
        fold, replica = int(result.folds[m]), int(result.replicas[m])
        alone = run_fit(make_card(**{**STABLE, "replicas": [replica]}, folds=[folds[fold]]))
        assert (alone.best_epoch[0], alone.stop_epoch[0], alone.status[0]) == (
            result.best_epoch[m],
            result.stop_epoch[m],
            result.status[m],
        )
        for batched_weights, alone_weights in zip(result.params, alone.params, strict=True):
            np.testing.assert_allclose(batched_weights[m], alone_weights[0], rtol=0, atol=1e-6)
        for name, values in result.chi2_per_point.items():
            np.testing.assert_allclose(values[m], alone.chi2_per_point[name][0], rtol=1e-6)
        assert np.isfinite(result.chi2_per_point["held_out"][m])


def test_members_never_couple(make_card):
    """Same batch shape, one member sabotaged (NaN weights, then an absurd learning rate):
    every other member's trajectory is bitwise the same, stops and chaotic members included."""
    card = make_card(replicas=[1, 2, 3, 4])
    reference = run_fit(card)
    problem = load_problem(card)
    _, params = build_members(card, problem, member_specs(card.replica_ids))
    params[2][1] = np.nan
    poisoned = run_fit(card, initial_params=params)
    settings = dataclasses.replace(
        trainer_settings(card, 4), learning_rate=np.array([0.02, 1e12, 0.02, 0.02])
    )
    exploded = run_fit(card, settings=settings)
    assert poisoned.status[1] == exploded.status[1] == "diverged"
    assert reference.status[1] != "diverged"
    others = [0, 2, 3]
    for sabotaged in (poisoned, exploded):
        np.testing.assert_array_equal(sabotaged.best_epoch[others], reference.best_epoch[others])
        np.testing.assert_array_equal(sabotaged.stop_epoch[others], reference.stop_epoch[others])
        for a, b in zip(sabotaged.params, reference.params, strict=True):
            np.testing.assert_array_equal(a[others], b[others])


def test_steps_per_call_do_not_change_results(batched, make_card):
    _, result = batched
    one_step = run_fit(make_card(**STABLE, training={"steps_per_call": 1}))
    np.testing.assert_array_equal(one_step.best_epoch, result.best_epoch)
    np.testing.assert_array_equal(one_step.stop_epoch, result.stop_epoch)
    for a, b in zip(one_step.params, result.params, strict=True):
        np.testing.assert_array_equal(a, b)  # the same compiled step, whatever the trip count


def test_compiled_loop_equals_eager_loop(make_card, monkeypatch):
    """XLA fuses and reorders the step's arithmetic, so the two differ by rounding (float64)
    and agree to 1e-9 over these 60 epochs; a chaotic member would amplify that over a long
    fit, as between two machines."""
    card = make_card(epochs=60, training={"steps_per_call": 20})
    compiled = run_fit(card)
    eager_steps, compiled_step = [], Trainer._step

    def step(self, state):
        eager_steps.append(tf.executing_eagerly())
        return compiled_step(self, state)

    monkeypatch.setattr(Trainer, "_step", step)
    tf.config.run_functions_eagerly(True)
    try:
        eager = run_fit(card)
    finally:
        tf.config.run_functions_eagerly(False)
    # One traced step when the trainer builds its concrete function, then one eager per epoch.
    assert eager_steps.count(True) == card.epochs, "the loop did not run eagerly"
    np.testing.assert_array_equal(eager.best_epoch, compiled.best_epoch)
    for a, b in zip(compiled.params, eager.params, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
