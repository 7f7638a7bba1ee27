"""Members leave the batch (issue #39): a compacted fit is the fit, member for member, in order."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from hyperscan.data import load_problem
from hyperscan.fit import (
    RUNNING,
    STOPPED,
    Trainer,
    build_members,
    member_specs,
    run_fit,
    trainer_settings,
)
from hyperscan.fit._rows import batch_size
from hyperscan.model import EnsembleModel, take_members
from hyperscan.model._chi2_plan import whitening

# Replicas whose training is well conditioned (replicas 3 and 8 of this problem are chaotic:
# rounding moves them, batched or not; test_equivalence.py says why), stopping at different
# epochs so that the batch shrinks in three compactions, 7 → 4 → 2 → 1.
REPLICAS = [1, 2, 4, 5, 6, 7, 9]
STABLE = {
    "replicas": REPLICAS,
    "optimizer": {"name": "nadam", "learning_rate": 0.005, "clipnorm": 0.1},
}


@pytest.fixture(scope="module")
def fits(make_card):
    """The fit with its default settings (under which compacting would not pay: no member-steps
    to save in 400 epochs) and the same fit compacting at every sync where the batch shrinks."""
    card = make_card(**STABLE)
    settings = trainer_settings(card, len(REPLICAS))
    full = run_fit(card, settings=settings)
    compacted = run_fit(card, settings=dataclasses.replace(settings, compaction_cost=0.0))
    return full, compacted


def test_the_batch_shrinks_only_when_it_pays(fits):
    full, compacted = fits
    assert {report.batch for report in full.history} == {len(REPLICAS)}
    batches = [report.batch for report in compacted.history]
    assert batches == sorted(batches, reverse=True)
    assert {7, 4, 2, 1} <= set(batches)
    # A batch is kept or shrunk to the power of two that holds the members still running.
    for before, report in zip(compacted.history, compacted.history[1:], strict=False):
        assert report.batch in (before.batch, batch_size(before.n_running))


def test_a_compacted_fit_equals_the_fit(fits):
    """Stopped members are frozen and members never couple, so only the rounding of a smaller
    batch's products can differ: float64 agrees to 1e-6 (here to 5e-11), and every output
    keeps the members' order."""
    full, compacted = fits
    assert compacted.status == full.status == ["ok"] * len(REPLICAS)
    assert compacted.divergence == full.divergence
    np.testing.assert_array_equal(compacted.replicas, full.replicas)
    np.testing.assert_array_equal(compacted.folds, full.folds)
    np.testing.assert_array_equal(compacted.best_epoch, full.best_epoch)
    np.testing.assert_array_equal(compacted.stop_epoch, full.stop_epoch)
    assert len(set(full.stop_epoch.tolist())) == len(REPLICAS)  # every member its own epoch
    assert compacted.steps == full.steps
    for ours, theirs in zip(compacted.params, full.params, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    for name, values in full.chi2_per_point.items():
        np.testing.assert_allclose(compacted.chi2_per_point[name], values, rtol=1e-6)
    np.testing.assert_allclose(compacted.dataset_chi2_per_point, full.dataset_chi2_per_point, 1e-6)
    np.testing.assert_allclose(compacted.predictions, full.predictions, rtol=1e-6)
    np.testing.assert_allclose(compacted.pdf, full.pdf, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(compacted.grid_pdf, full.grid_pdf, rtol=1e-6, atol=1e-9)
    assert len(compacted.history) == len(full.history)
    for ours, theirs in zip(compacted.history, full.history, strict=True):
        assert ours.step == theirs.step
        np.testing.assert_array_equal(ours.status, theirs.status)
        np.testing.assert_allclose(ours.chi2, theirs.chi2, rtol=1e-6)


def test_batch_sizes_are_powers_of_two():
    assert [batch_size(n) for n in (0, 1, 2, 3, 4, 5, 8, 9, 100)] == [1, 1, 2, 4, 4, 8, 8, 16, 128]


def test_the_runcard_turns_compaction_off(make_card):
    assert trainer_settings(make_card(), 3).compact
    assert not trainer_settings(make_card(training={"compact": False}), 3).compact


# ---------------------------------------------------------------------------------------------
# Every array with a member axis is declared (hyperscan.model.MemberAxis), so none is forgotten.


def _arrays(obj, path="", ancestors=frozenset()):
    """Every numpy array and TF tensor reachable from obj through hyperscan's objects and
    containers: {path: array}."""
    if id(obj) in ancestors:
        return {}
    ancestors = ancestors | {id(obj)}
    if isinstance(obj, np.ndarray | tf.Tensor | tf.Variable):
        return {path: obj}
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list | tuple):
        items = enumerate(obj)
    elif type(obj).__module__.startswith("hyperscan") and hasattr(obj, "__dict__"):
        items = vars(obj).items()
    else:
        return {}
    found = {}
    for key, value in items:
        found.update(_arrays(value, f"{path}.{key}", ancestors))
    return found


def _member_axes(small, large, extra):
    """{path: axis} of the arrays whose size there grows by `extra` when members are added:
    the larger ensemble repeats members of the smaller, so nothing else changes shape."""
    axes = {}
    for path, array in small.items():
        grown = [
            axis
            for axis, (a, b) in enumerate(zip(array.shape, large[path].shape, strict=True))
            if b == a + extra
        ]
        if grown:
            assert len(grown) == 1, path
            axes[path] = grown[0]
    return axes


def _models(card, problem):
    """Models of the card's members and of those plus a repeat of the first two, on k folds
    (so that held-out points, with their own χ² terms, are members' categories too)."""
    dtype = tf.float64
    specs = member_specs(card.replica_ids, card.folds)
    made = []
    for members in (specs, specs + specs[:2]):
        inputs, params = build_members(card, problem, members)
        made.append((EnsembleModel(problem, inputs, card.architecture.activations, dtype), params))
    return made


FOLDS = [["TOY_HERA_NC_F2P", "TOY_NUTEV_XF3WP"], ["TOY_HERA_CC_F2WP", "TOY_GLUON"]]


def test_selecting_members_selects_them_in_every_array_of_the_model(make_card):
    card = make_card(replicas=[1, 2, 3], folds=FOLDS)
    problem = load_problem(card)
    (small, _), (large, params) = _models(card, problem)
    axes = _member_axes(_arrays(small), _arrays(large), extra=2)
    assert any(path.startswith("._whitening") for path in axes)  # the χ² plan is reached
    chosen = np.array([7, 0, 4])
    selected = _arrays(large.select(chosen))
    everything = _arrays(large)
    for path, axis in axes.items():
        assert selected[path].shape[axis] == chosen.size, path
        if not path.startswith("._chi2"):  # rebuilt from the plan, its indices name members
            np.testing.assert_array_equal(
                np.take(np.asarray(everything[path]), chosen, axis=axis),
                np.asarray(selected[path]),
                err_msg=path,
            )
    # The selected model computes what the full one does for those members.
    weights = [tf.constant(p) for p in params]
    np.testing.assert_allclose(
        large.select(chosen).observables([tf.gather(w, chosen) for w in weights]).chi2,
        tf.gather(large.observables(weights).chi2, chosen),
        rtol=1e-12,
    )


@pytest.mark.parametrize("scheme", ["direct", "complement"])
def test_every_term_of_the_chi2_plan_takes_its_members(make_card, scheme):
    """The dense blocks' terms of both ways (a fit on this problem plans only the direct one)."""
    card = make_card(replicas=[1, 2, 3], folds=FOLDS)
    problem = load_problem(card)
    categories = build_members(card, problem, member_specs(card.replica_ids, card.folds))[0]
    categories = categories.categories
    plans = [
        whitening(problem.covmat, problem.blocks(), members, scheme, cache_bytes=0)
        for members in (categories, np.concatenate([categories, categories[:2]]))
    ]
    small, large = (_arrays(plan) for plan in plans)
    axes = _member_axes(small, large, extra=2)
    assert any(".complement." in path for path in axes) == (scheme == "complement")
    chosen = np.array([7, 0, 4])
    taken = _arrays(take_members(plans[1], chosen))
    for path, axis in axes.items():
        np.testing.assert_array_equal(taken[path], np.take(large[path], chosen, axis=axis), path)


def test_compacting_takes_the_batch_of_every_array_of_the_trainer(make_card):
    card = make_card(replicas=[1, 2, 3, 4, 5])
    problem = load_problem(card)
    (small, small_params), (large, large_params) = _models(card, problem)
    trainers = [
        Trainer(model, trainer_settings(card, model.n_members), params)
        for model, params in ((small, small_params), (large, large_params))
    ]
    # Outside the batch by design: the full model and settings, the state kept on the host.
    outside = (".model", ".settings", "._left")

    def batch_arrays(trainer):
        found = _arrays(trainer)
        return {path: a for path, a in found.items() if not path.startswith(outside)}

    axes = _member_axes(*(batch_arrays(t) for t in trainers), extra=2)
    assert {"._variables.params", "._variables.optimizer.m.0", "._settings.learning_rate"} <= set(
        axes
    )
    trainer = trainers[1]
    trainer.variables["status"].assign(tf.constant([STOPPED, RUNNING] * 3 + [STOPPED], tf.int64))
    assert trainer.compact()
    np.testing.assert_array_equal(trainer.members, [0, 1, 3, 5])  # 3 running and 1 stopped
    for path, axis in axes.items():
        assert batch_arrays(trainer)[path].shape[axis] == 4, path
    assert not trainer.compact()  # 3 running: a batch of 4 is as small as it gets
