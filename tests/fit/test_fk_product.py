"""The model's FK products, which skip the PDF rows no point uses, are each dataset's own."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from hyperscan.data import FIT_BASIS, fit_to_fk_rotation
from hyperscan.fit import build_ensemble
from hyperscan.model._ensemble import POSITIVITY_ELU_ALPHA


def _fk_basis_pdf(model, params, x: np.ndarray) -> np.ndarray:
    """The model's x·f at x in the 14-flavour FK basis: (M, 14, n_x)."""
    return np.einsum("kf,mxf->mkx", fit_to_fk_rotation(), model.pdf(params, x))


@pytest.mark.parametrize("size", ["tiny", "medium"])
def test_predictions_and_positivity_are_each_tables_own(make_card, size):
    card = make_card(data={"closure": {"size": size, "level": 1, "seed": 3}})
    model, _, params = build_ensemble(card)
    params = [tf.constant(p) for p in params]
    problem = model.problem
    if size == "medium":  # its DIS-like tables leave whole (x, flavour) rows unused
        assert 0 < model._data_products.linear_rows < model.xgrid.size * len(FIT_BASIS)
    predictions = model.predictions(params).numpy()
    expected = np.concatenate(
        [d.predictions(_fk_basis_pdf(model, params, d.xgrid)) for d in problem.datasets], axis=1
    )
    np.testing.assert_allclose(predictions, expected, rtol=1e-10, atol=1e-12)

    # n3fit's penalty per positivity set: Σ elu(−λ·y), each member with its own λ
    multiplier = np.geomspace(1.0, 1.0e6, model.n_members)
    assert len(problem.positivity) > 1
    expected = []
    for p in problem.positivity:
        values = -multiplier[:, None] * p.predictions(_fk_basis_pdf(model, params, p.xgrid))
        elu = np.maximum(values, 0.0) + POSITIVITY_ELU_ALPHA * (np.exp(np.minimum(values, 0)) - 1)
        expected.append(elu.sum(axis=1))
    positivity = model.observables(params, tf.constant(multiplier)).positivity.numpy()
    np.testing.assert_allclose(positivity, np.stack(expected, axis=1), rtol=1e-10, atol=1e-14)
