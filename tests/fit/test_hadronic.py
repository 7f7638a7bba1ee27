"""The engine's promises hold with hadronic and compound observables (issue #50): the model's
predictions are the host's, a member equals its fit alone, K steps per call equal one, a
compacted fit equals the fit, a packed trial equals the trial alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
from _cards import tiny_card
from _theory_folder import POSITIVITY, SHARED_DATA, build_theory_folder

from hyperscan.data import fit_to_fk_rotation, load_problem
from hyperscan.fit import TrialBatch, build_ensemble, run_fit, trainer_settings
from hyperscan.model._ensemble import POSITIVITY_ELU_ALPHA

DATASETS = [
    "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA",  # DIS, one table
    "DYE605_Z0_38P8GEV_DW_PXSEC",  # hadronic, one table, cut
    "DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO",  # RATIO of two hadronic tables
    "D0_WPWM_1P96TEV_ASY",  # ASY of two hadronic tables
]


@pytest.fixture(scope="module")
def theory(tmp_path_factory, skip_or_fail_on_ci) -> str:
    if not (SHARED_DATA / "fktables").is_dir():
        skip_or_fail_on_ci(f"real-data kit not found at {SHARED_DATA}")
    return str(build_theory_folder(tmp_path_factory.mktemp("share")))


@pytest.fixture(scope="module")
def hadronic_card(theory):
    def make(**overrides):
        data = {
            "closure": None,
            "real": {
                "theory": theory,
                "datasets": [{"dataset": d} for d in DATASETS],
                "closure": {"level": 1, "seed": 3},
                "positivity": [POSITIVITY],
            },
        }
        base = {"data": data, "replicas": [1, 2, 3], "epochs": 120}
        return tiny_card(**{**base, **overrides})

    return make


def test_the_model_predicts_what_the_host_does(hadronic_card):
    model, _, params = build_ensemble(hadronic_card())
    params = [tf.constant(p) for p in params]
    problem = model.problem
    assert {d.operation for d in problem.datasets} == {"NULL", "RATIO", "ASY"}
    assert any(t.hadronic for d in problem.datasets for t in d.tables)
    predictions = model.predictions(params).numpy()
    expected = []
    for d in problem.datasets:
        xf = np.einsum("kf,mxf->mkx", fit_to_fk_rotation(), model.pdf(params, d.xgrid))
        expected.append(d.predictions(xf))
    np.testing.assert_allclose(predictions, np.concatenate(expected, axis=1), rtol=1e-10)

    (positivity,) = problem.positivity
    assert positivity.table.hadronic
    multiplier = np.geomspace(1.0, 1.0e6, model.n_members)
    xf = np.einsum("kf,mxf->mkx", fit_to_fk_rotation(), model.pdf(params, positivity.xgrid))
    values = -multiplier[:, None] * positivity.predictions(xf)
    elu = np.maximum(values, 0.0) + POSITIVITY_ELU_ALPHA * (np.exp(np.minimum(values, 0)) - 1)
    penalty = model.observables(params, tf.constant(multiplier)).positivity.numpy()
    np.testing.assert_allclose(penalty[:, 0], elu.sum(axis=1), rtol=1e-10, atol=1e-14)


def _same(result, alone, member=None) -> None:
    one = slice(None) if member is None else slice(member, member + 1)
    np.testing.assert_array_equal(result.stop_epoch[one], alone.stop_epoch)
    np.testing.assert_array_equal(result.best_epoch[one], alone.best_epoch)
    np.testing.assert_allclose(result.predictions[one], alone.predictions, rtol=1e-6)
    for name, values in alone.chi2_per_point.items():
        np.testing.assert_allclose(result.chi2_per_point[name][one], values, rtol=1e-6)


@pytest.fixture(scope="module")
def batched(hadronic_card):
    card = hadronic_card()
    return card, run_fit(card)


def test_each_member_equals_its_fit_alone(batched, hadronic_card):
    card, result = batched
    assert result.status == ["ok"] * 3
    for m, replica in enumerate(card.replica_ids):
        _same(result, run_fit(hadronic_card(replicas=[replica])), member=m)


def test_one_step_per_call_equals_fifty(batched, hadronic_card):
    card, result = batched
    one = run_fit(hadronic_card(training={"steps_per_call": 1, "precision": "float64"}))
    _same(result, one)


def test_a_compacted_fit_equals_the_fit(batched):
    card, result = batched
    settings = trainer_settings(card, len(card.replica_ids))
    settings = dataclasses.replace(settings, compaction_cost=0.0)
    _same(run_fit(card, settings=settings), result)


def test_a_packed_trial_equals_the_trial_alone(hadronic_card):
    trials = [
        hadronic_card(replicas=[1, 2], epochs=80),
        hadronic_card(
            replicas=[1, 2],
            epochs=60,
            architecture={"nodes": [6], "activations": ["sigmoid"]},
            optimizer={"name": "adam", "learning_rate": 0.01},
        ),
        hadronic_card(replicas=[1, 2], epochs=40, optimizer={"name": "rmsprop"}),
    ]
    problem = load_problem(trials[0])
    batch = TrialBatch(trials[0], problem, slots=2, reserve=trials)
    waiting, results = list(enumerate(trials)), {}
    while waiting or batch.in_flight:
        while waiting and batch.free_slots:
            batch.place(*waiting.pop(0))
        results.update(batch.advance())
    for key, trial in enumerate(trials):
        _same(results[key], run_fit(trial, problem=problem))
