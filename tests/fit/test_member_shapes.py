"""Members of different architectures in one batched model equal each member fitted alone
(issue #39): padded widths, skipped layers, an activation per member, shape classes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from hyperscan.fit import build_ensemble, run_fit, trainer_settings
from hyperscan.fit._members import architecture_shape
from hyperscan.fit._optimizers import OPTIMIZERS, make_optimizer
from hyperscan.fit._trainer import Trainer
from hyperscan.model import MemberShapes, Shape, embed, padding_waste, shape_classes, unembed

STABLE = {
    "optimizer": {"name": "nadam", "learning_rate": 0.005, "clipnorm": 0.1},
    "epochs": 200,
}
# Widths, depths, activations (sigmoid's padded units are 0.5, not 0), initialisers, seeds.
MEMBERS = [
    {"architecture": {"nodes": [10, 8], "activations": ["tanh", "tanh"]}},
    {
        "architecture": {"nodes": [6], "activations": ["sigmoid"], "initializer": "he_uniform"},
        "seeds": {"network": 7, "data": 3},
    },
    {"architecture": {"nodes": [4, 12, 5], "activations": ["sigmoid", "tanh", "tanh"]}},
    {
        "architecture": {"nodes": [7, 3], "activations": ["relu", "sigmoid"]},
        "seeds": {"split": 11},
    },
]
REPLICAS = [1, 2, 3, 4]


def _cards(make_card, waste, members=MEMBERS, **overrides):
    """The base runcard and one runcard per member (replica r, methodology members[i])."""
    settings = {**STABLE, **overrides}
    training = {"precision": "float64", "steps_per_call": 50, "max_padding_waste": waste}
    training = {**training, **settings.pop("training", {})}
    replicas = REPLICAS[: len(members)]
    base = make_card(**settings, replicas=replicas, training=training)
    cards = [
        make_card(**settings, **member, replicas=[replica], training=training)
        for replica, member in zip(replicas, members, strict=True)
    ]
    return base, cards


@pytest.fixture(scope="module")
def fit_alone():
    """``fit_alone(card)``: ``run_fit(card)``, each runcard fitted once per module (a fit is
    deterministic; the compacted batch's members 0 and 3 are those of the plain one)."""
    fits = {}

    def fit(card):
        key = card.model_dump_json()
        if key not in fits:
            fits[key] = run_fit(card)
        return fits[key]

    return fit


def _assert_equals_alone(result, cards, widths, atol, rtol, fit_alone):
    for m, card in enumerate(cards):
        alone = fit_alone(card)
        assert alone.status[0] == result.status[m]
        assert abs(int(alone.best_epoch[0]) - int(result.best_epoch[m])) <= (atol > 1e-5)
        own = unembed([p[m] for p in result.params], card.architecture.nodes, widths)
        for batched, single in zip(own, alone.params, strict=True):
            np.testing.assert_allclose(batched, single[0], rtol=0, atol=atol)
        for name, values in result.chi2_per_point.items():
            np.testing.assert_allclose(values[m], alone.chi2_per_point[name][0], rtol=rtol)
        used = embed([np.ones_like(w) for w in own], card.architecture.nodes, widths)
        for padded, ones in zip(result.params, used, strict=True):
            assert np.all(padded[m][ones == 0] == 0.0)  # padded and skipped parameters


def test_a_heterogeneous_batch_equals_each_member_fitted_alone(make_card, fit_alone):
    base, cards = _cards(make_card, waste=1.0)
    result = run_fit(base, member_runcards=cards)
    widths = MemberShapes.of([architecture_shape(c) for c in cards]).widths
    assert widths == (10, 12, 8)
    assert len({r.batch for r in result.history}) == 1  # one model, no shape classes
    _assert_equals_alone(result, cards, widths, atol=1e-6, rtol=1e-6, fit_alone=fit_alone)


def test_a_compacted_heterogeneous_batch_equals_each_member_fitted_alone(make_card, fit_alone):
    """Members leaving a padded batch take their shapes (activations, skips, gradient mask)
    with them: compacted at every sync that can shrink it, the fit still equals the separate
    fits. Two members have their own, fewer epochs, so that the batch can shrink."""
    base, cards = _cards(make_card, waste=1.0)
    cards[1:3] = [card.model_copy(update={"epochs": 60}) for card in cards[1:3]]
    settings = dataclasses.replace(trainer_settings(base, cards), compaction_cost=0.0)
    result = run_fit(base, member_runcards=cards, settings=settings)
    assert min(report.batch for report in result.history) < len(cards)
    widths = MemberShapes.of([architecture_shape(c) for c in cards]).widths
    _assert_equals_alone(result, cards, widths, atol=1e-6, rtol=1e-6, fit_alone=fit_alone)


def test_padded_and_skipped_parameters_stay_zero_at_every_sync(make_card):
    base, cards = _cards(make_card, waste=1.0)
    model, _, params = build_ensemble(base, member_runcards=cards)
    mask = model.shapes.gradient_mask
    assert mask.mean() < 0.8 and mask.all(axis=1).sum() == 0  # every member has padding
    trainer = Trainer(model, trainer_settings(base, model.n_members), params)
    syncs = 0

    def padded_values(flat_params):
        return np.concatenate([p.reshape(p.shape[0], -1) for p in flat_params], axis=1)[~mask]

    def on_sync(report):
        nonlocal syncs
        syncs += 1
        assert np.all(padded_values(trainer.parameters()) == 0.0)

    outcome = trainer.run(on_sync)
    assert syncs >= 3
    assert np.all(padded_values(outcome.params) == 0.0)  # the best weights too


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_optimizer_keeps_a_zero_weight_with_zero_gradient_at_zero(name):
    optimizer = make_optimizer(name)
    params = tf.constant([[0.0, 0.3], [0.0, -0.2]], tf.float64)
    state = optimizer.init([params])
    step = tf.zeros([2], tf.int32)
    lr = tf.constant([0.1, 0.01], tf.float64)
    for k in range(5):
        grads = tf.constant([[0.0, 1.0], [0.0, -2.0 - k]], tf.float64)
        (params,), state = optimizer.update([params], [grads], state, step, lr)
        step += 1
    assert np.all(params.numpy()[:, 0] == 0.0)
    assert np.all(params.numpy()[:, 1] != [0.3, -0.2])  # the other weight did move


def test_float32_heterogeneous_batch_is_within_the_float32_floor(make_card, fit_alone):
    """docs/numerical-promises.md: float32 agrees to 1e-3 in χ². Over 50 epochs: past them,
    the deep member's float32 training amplifies rounding beyond the floor in a batch of its
    own architecture too (100 epochs: 5e-3 in χ², measured), and the relu member's kinks
    beyond it at 50, so they would test their own conditioning, not the padding."""
    base, cards = _cards(
        make_card, waste=1.0, members=MEMBERS[:3], epochs=50, training={"precision": "float32"}
    )
    result = run_fit(base, member_runcards=cards)
    assert result.params[0].dtype == np.float32
    widths = MemberShapes.of([architecture_shape(c) for c in cards]).widths
    assert widths == (10, 12, 8)
    _assert_equals_alone(result, cards, widths, atol=1e-2, rtol=1e-3, fit_alone=fit_alone)


def test_a_mix_past_the_waste_limit_is_split_into_shape_classes(make_card, fit_alone):
    base, cards = _cards(make_card, waste=0.5)
    shapes = [architecture_shape(c) for c in cards]
    classes = shape_classes(shapes, 0.5)
    assert padding_waste(shapes) > 0.5 and len(classes) > 1
    assert all(padding_waste([shapes[m] for m in c]) <= 0.5 for c in classes)
    assert any(len(c) > 1 for c in classes)
    result = run_fit(base, member_runcards=cards)
    assert result.replicas.tolist() == REPLICAS  # merged back in member order
    first_sync = [r for r in result.history if r.step == base.training.steps_per_call]
    assert sorted(r.status.size for r in first_sync) == sorted(c.size for c in classes)
    widths = MemberShapes.of(shapes).widths
    _assert_equals_alone(result, cards, widths, atol=1e-6, rtol=1e-6, fit_alone=fit_alone)


def test_shape_classes_are_deterministic_and_one_within_the_limit():
    shapes = [Shape((25, 20), ("tanh", "tanh")), Shape((5,), ("tanh",))] * 3
    assert [c.tolist() for c in shape_classes(shapes, 1.0)] == [list(range(6))]
    split = shape_classes(shapes, 0.1)
    assert [c.tolist() for c in split] == [[0, 2, 4], [1, 3, 5]]
    assert [c.tolist() for c in shape_classes(shapes[::-1], 0.1)] == [[0, 2, 4], [1, 3, 5]]
    # Σ fan_in·fan_out: (2·25 + 25·20 + 20·8) and (2·5 + 5·8) against the padded (25, 20).
    np.testing.assert_allclose(padding_waste(shapes[:2]), 1 - (710 + 50) / (2 * 710))


@pytest.mark.parametrize("key", ["data", "training", "divergence", "folds"])
def test_a_member_differing_in_a_shared_key_is_refused_naming_it(make_card, key):
    base, cards = _cards(make_card, waste=1.0)
    changed = {
        "data": {"training_fraction": 0.5},
        "training": {"precision": "float32"},
        "divergence": {"max_loss": 1e5},
        "folds": [["TOY_GLUON"]],
    }[key]
    member = {**STABLE, **MEMBERS[2], "replicas": [3], key: changed}
    if key != "training":
        member["training"] = base.training.model_dump()
    cards[2] = make_card(**member)
    with pytest.raises(ValueError, match=f"member 2: .*'{key}'"):
        run_fit(base, member_runcards=cards)


def test_selecting_members_of_a_padded_model_takes_their_shapes(make_card):
    base, cards = _cards(make_card, waste=1.0)
    model, _, params = build_ensemble(base, member_runcards=cards)
    chosen = np.array([3, 1])
    selected = model.select(chosen)
    np.testing.assert_array_equal(selected.shapes.skip, model.shapes.skip[chosen])
    np.testing.assert_array_equal(selected.shapes.gradient_mask, model.shapes.gradient_mask[chosen])
    weights = [tf.constant(p) for p in params]
    np.testing.assert_allclose(
        selected.observables([tf.gather(w, chosen) for w in weights]).chi2,
        tf.gather(model.observables(weights).chi2, chosen),
        rtol=1e-12,
    )
