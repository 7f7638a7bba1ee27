"""The model's FK products, which skip the PDF rows no point uses and fold hadronic tables onto
the fitted basis, are each dataset's own."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from hyperscan.data import (
    FIT_BASIS,
    FK_BASIS,
    HADRONIC_DATASETS,
    FkTable,
    fit_to_fk_rotation,
    on_grid,
    real_problem,
)
from hyperscan.fit import build_ensemble
from hyperscan.model._ensemble import POSITIVITY_ELU_ALPHA
from hyperscan.model._observables import Observable, TableProducts, fitted_pairs


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


def test_a_hadronic_table_on_the_fitted_basis_pairs_predicts_as_on_the_fk_basis_pairs():
    """The shipped hadronic tables, folded onto the fitted basis's unordered pairs (fewer
    entries: 26–36 pairs of 51) and multiplied by x grid (E866's 3 tables in one product, the
    W asymmetry's 2 and CDF's Z rapidity in another, D0's 2 apart), predict what the host does
    from the FK-basis tables, float64."""
    datasets = [{"dataset": k, "variant": v} for k, v in HADRONIC_DATASETS.items()]
    problem = real_problem(datasets, t0=False)
    xgrid = np.unique(np.concatenate([d.xgrid for d in problem.datasets]))
    observables = [Observable(d.name, d.tables, d.operation) for d in problem.datasets]
    products = TableProducts(observables, xgrid, tf.float64)
    pdf = np.random.default_rng(1).uniform(0.1, 1.0, (3, xgrid.size, len(FIT_BASIS)))
    expected = np.concatenate(
        [
            d.predictions(
                np.einsum(
                    "kf,mxf->mkx", fit_to_fk_rotation(), pdf[:, on_grid(xgrid, d.xgrid, d.name)]
                )
            )
            for d in problem.datasets
        ],
        axis=1,
    )
    np.testing.assert_allclose(products(tf.constant(pdf)).numpy(), expected, rtol=1e-10)
    assert len(products._hadronic) == 4
    for table in (t for d in problem.datasets for t in d.tables):
        pairs, fk = fitted_pairs(table, fit_to_fk_rotation())
        assert np.all(pairs[:, 0] <= pairs[:, 1])
        assert 0 < len(pairs) < 0.75 * len(table.pairs)


def test_any_rotation_folds_onto_the_fitted_pairs():
    """A made-up table and a dense rotation (every FK flavour a mix of all 8): the folded table
    gives the FK-basis table's predictions."""
    rng = np.random.default_rng(2)
    n_x, pairs = 5, np.array([[1, 2], [2, 1], [3, 3], [4, 9]])
    table = FkTable(rng.normal(size=(6, len(pairs), n_x, n_x)), np.geomspace(1e-3, 0.5, n_x), pairs)
    rotation = rng.normal(size=(len(FK_BASIS), len(FIT_BASIS)))
    g = rng.normal(size=(len(FIT_BASIS), n_x))
    folded_pairs, folded = fitted_pairs(table, rotation)
    assert len(folded_pairs) == len(FIT_BASIS) * (len(FIT_BASIS) + 1) // 2
    ours = np.einsum("npab,pa,pb->n", folded, g[folded_pairs[:, 0]], g[folded_pairs[:, 1]])
    np.testing.assert_allclose(ours, table.predictions((rotation @ g)[None])[0], rtol=1e-12)
