"""Sum rules after a fit, and a level-0 closure test that recovers the truth."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from hyperscan.data import FIT_BASIS, experimental_chi2, load_problem
from hyperscan.fit import build_ensemble, run_fit
from hyperscan.model import VALENCE_SUM_RULES


def _trapezoid_in_log_x(values: np.ndarray, log_x: np.ndarray) -> np.ndarray:
    return np.sum(0.5 * (values[..., 1:] + values[..., :-1]) * np.diff(log_x), axis=-1)


def test_sum_rules_hold_for_every_member_after_the_fit(make_card):
    card = make_card(epochs=200)
    result = run_fit(card)
    model, _, _ = build_ensemble(card)
    # An independent quadrature: a dense trapezoid in ln x, not the model's Gauss nodes.
    log_x = np.linspace(np.log(1e-9), np.log(1.0), 40001)
    x = np.exp(log_x)
    xf = model.pdf([tf.constant(p) for p in result.params], x)  # (M, n_x, 8)
    number = _trapezoid_in_log_x(np.moveaxis(xf, 1, -1), log_x)  # ∫ f dx = ∫ x f dln x
    momentum = _trapezoid_in_log_x(np.moveaxis(xf * x[None, :, None], 1, -1), log_x)
    sigma, gluon = FIT_BASIS.index("Sigma"), FIT_BASIS.index("g")
    np.testing.assert_allclose(momentum[:, sigma] + momentum[:, gluon], 1.0, atol=1e-4)
    for name, expected in VALENCE_SUM_RULES.items():
        np.testing.assert_allclose(number[:, FIT_BASIS.index(name)], expected, atol=1e-4)


def test_level0_closure_recovers_the_truth(make_card):
    """Metric: χ² per point of the fitted predictions to the truth predictions, with the data
    covariance. A level-0 fit has no noise to fit, so it must get well under the ~1 that
    one σ of disagreement per point would give; 0.05 means a typical deviation below a
    quarter of a σ. Before the fit (random networks) the same metric is in the thousands."""
    card = make_card(
        data={
            "closure": {"size": "tiny", "level": 0, "seed": 0},
            "pseudodata": False,
            "training_fraction": 1.0,
        },
        replicas=[1, 2, 4],
        epochs=8000,
        optimizer={"name": "adam", "learning_rate": 0.003, "clipnorm": None},
        stopping={"patience": 1.0, "threshold_chi2": 3.0},
        training={"steps_per_call": 500, "precision": "float64"},
    )
    problem = load_problem(card)
    np.testing.assert_array_equal(problem.central, problem.truth)
    result = run_fit(card)
    assert result.status == ["ok"] * 3

    model, _, initial = build_ensemble(card, problem=problem)
    before, _ = experimental_chi2(
        problem, model.predictions([tf.constant(p) for p in initial]).numpy()
    )
    after, _ = experimental_chi2(
        problem, model.predictions([tf.constant(p) for p in result.params]).numpy()
    )
    assert np.all(before > 10.0)
    assert np.all(after < 0.05), after
