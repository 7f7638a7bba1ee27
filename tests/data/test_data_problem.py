# SPDX-License-Identifier: GPL-3.0-or-later
"""Dataset / PositivitySet / Problem: validation, reordering, select, fingerprint."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _datasets import random_dataset

from hyperscan.data import (
    STANDARD_XGRID,
    Dataset,
    FkTable,
    PositivitySet,
    Problem,
    closure_problem,
    experimental_chi2,
    grid_predictions,
)


def _three_sets_with_0_and_2_correlated() -> Problem:
    ds = (random_dataset("A", 3, 1), random_dataset("B", 2, 2), random_dataset("C", 4, 3))
    n = 9
    cov = np.diag(np.arange(1.0, n + 1))
    cov[0, 5] = cov[5, 0] = 0.3  # A <-> C
    return Problem(datasets=ds, covmat=cov, positivity=(), truth=np.arange(float(n)))


def test_correlated_datasets_are_made_adjacent():
    p = _three_sets_with_0_and_2_correlated()
    assert p.names == ("A", "C", "B")
    assert p.blocks() == (slice(0, 7), slice(7, 9))
    assert p.dataset_slices() == (slice(0, 3), slice(3, 7), slice(7, 9))
    # covariance and truth were permuted consistently: old index order A(0..2) C(5..8) B(3, 4)
    order = [0, 1, 2, 5, 6, 7, 8, 3, 4]
    np.testing.assert_array_equal(np.diag(p.covmat), np.arange(1.0, 10)[order])
    assert p.covmat[0, 3] == 0.3 and p.covmat[3, 0] == 0.3
    np.testing.assert_array_equal(p.truth, np.arange(9.0)[order])
    np.testing.assert_array_equal(p.central[3:7], p.datasets[1].central)


def test_validation_errors():
    d = random_dataset("A", 3, 1)
    with pytest.raises(ValueError, match="covmat must have shape"):
        Problem((d,), np.eye(4))
    asym = np.eye(3)
    asym[0, 1] = 0.1
    with pytest.raises(ValueError, match="symmetric"):
        Problem((d,), asym)
    with pytest.raises(ValueError, match="duplicate"):
        Problem((d, d), np.eye(6))
    with pytest.raises(ValueError, match="truth"):
        Problem((d,), np.eye(3), truth=np.zeros(2))
    with pytest.raises(ValueError, match="fk must have shape"):
        FkTable(np.zeros((2, 13, 10)), d.xgrid)
    with pytest.raises(ValueError, match="increasing"):
        FkTable(np.zeros((2, 14, 10)), d.xgrid[::-1])
    table = FkTable(np.zeros((2, 14, 10)), d.xgrid)
    with pytest.raises(ValueError, match=r"tables have \[2\] rows, its data 3 points"):
        Dataset("X", "DIS_NC", (table,), np.zeros(3), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="RATIO takes 2 tables, got 1"):
        Dataset("X", "DIS_NC", (table,), np.zeros(2), np.zeros((2, 3)), "ratio")
    with pytest.raises(ValueError, match="operation 'DIV' is not supported"):
        Dataset("X", "DIS_NC", (table, table), np.zeros(2), np.zeros((2, 3)), "DIV")


def test_inputs_are_copied_not_aliased():
    fk = np.ones((2, 14, 10))
    d = Dataset("X", "DIS_NC", (FkTable(fk, STANDARD_XGRID[-10:]),), np.zeros(2), np.zeros((2, 3)))
    fk[0, 0, 0] = 5.0
    assert d.table.fk[0, 0, 0] == 1.0


def test_predictions_broadcast_over_leading_axes(closure):
    p = closure("tiny")
    d = p.datasets[0]
    xf = np.random.default_rng(0).normal(size=(3, 2, 14, d.xgrid.size))
    out = d.predictions(xf)
    assert out.shape == (3, 2, d.n_data)
    np.testing.assert_allclose(out[1, 0], np.einsum("nfa,fa->n", d.table.fk, xf[1, 0]), rtol=1e-12)
    with pytest.raises(ValueError, match="xf_fk"):
        d.predictions(np.zeros((14, d.xgrid.size + 1)))


def test_select_subset_and_errors(closure):
    p = closure("small")
    names = [p.names[3], p.names[0]]
    sub = p.select(names)
    assert sub.names == (p.names[0], p.names[3])  # problem order is kept
    s0, s3 = p.dataset_slices()[0], p.dataset_slices()[3]
    index = np.r_[s0, s3]
    np.testing.assert_array_equal(sub.covmat, p.covmat[np.ix_(index, index)])
    np.testing.assert_array_equal(sub.central, p.central[index])
    np.testing.assert_array_equal(sub.truth, p.truth[index])
    assert sub.positivity == p.positivity
    with pytest.raises(ValueError) as err:
        p.select([p.names[0], "NOT_A_DATASET"])
    assert "NOT_A_DATASET" in str(err.value) and p.names[1] in str(err.value)
    with pytest.raises(TypeError):
        p.select(p.names[0])
    with pytest.raises(ValueError):
        p.select([])


def test_select_keeps_cross_dataset_correlations(closure):
    p = closure("tiny")
    correlated = [
        b for b in p.blocks() if sum(b.start <= s.start < b.stop for s in p.dataset_slices()) > 1
    ]
    b = correlated[0]
    names = [
        d.name
        for d, s in zip(p.datasets, p.dataset_slices(), strict=True)
        if b.start <= s.start < b.stop
    ]
    sub = p.select(names)
    assert len(sub.blocks()) == 1
    np.testing.assert_array_equal(sub.covmat, p.covmat[b, b])


def test_fingerprint_stable_and_sensitive(closure):
    p = closure("tiny")
    fp = p.fingerprint()
    assert len(fp) == 64 and fp == p.fingerprint()
    rebuilt = Problem(p.datasets, np.array(p.covmat), p.positivity, np.array(p.truth))
    assert rebuilt.fingerprint() == fp

    def bumped(a: np.ndarray, index=0) -> np.ndarray:
        out = np.array(a)
        out.flat[index] *= 1 + 1e-12
        return out

    d0 = p.datasets[0]
    pos0 = p.positivity[0]
    nonzero_pos = int(np.flatnonzero(pos0.table.fk)[0])
    nonzero_fk = int(np.flatnonzero(d0.table.fk)[0])
    table = d0.table
    variants = {
        "fk": replace(d0, tables=(replace(table, fk=bumped(table.fk, nonzero_fk)),)),
        "xgrid": replace(d0, tables=(replace(table, xgrid=bumped(table.xgrid)),)),
        "central": replace(d0, central=bumped(d0.central)),
        "kinematics": replace(d0, kinematics=bumped(d0.kinematics)),
        "name": replace(d0, name=d0.name + "_"),
        "process": replace(d0, process="DIS_CC"),
    }
    seen = {fp}
    for what, d in variants.items():
        q = Problem((d, *p.datasets[1:]), p.covmat, p.positivity, p.truth)
        assert q.fingerprint() not in seen, what
        seen.add(q.fingerprint())
    others = [
        Problem(p.datasets, bumped(p.covmat), p.positivity, p.truth),
        Problem(p.datasets, p.covmat, p.positivity, bumped(p.truth)),
        Problem(p.datasets, p.covmat, p.positivity, None),
        Problem(p.datasets, p.covmat, p.positivity[1:], p.truth),
        Problem(
            p.datasets,
            p.covmat,
            (
                replace(pos0, table=replace(pos0.table, fk=bumped(pos0.table.fk, nonzero_pos))),
                *p.positivity[1:],
            ),
            p.truth,
        ),
        Problem(
            p.datasets,
            p.covmat,
            (replace(pos0, table=replace(pos0.table, xgrid=bumped(pos0.xgrid))), *p.positivity[1:]),
            p.truth,
        ),
        Problem(p.datasets, p.covmat, (replace(pos0, name="POS_X"), *p.positivity[1:]), p.truth),
    ]
    for q in others:
        assert q.fingerprint() not in seen, q
        seen.add(q.fingerprint())


def test_fingerprint_ignores_signed_zero_and_nan_payload():
    d = random_dataset("A", 2, 1)
    kin = np.array(d.kinematics)
    kin[:, 2] = -np.nan
    cov = np.eye(2)
    neg = np.array(cov)
    neg[0, 1] = neg[1, 0] = -0.0
    a = Problem((d,), cov)
    b = Problem((replace(d, kinematics=kin),), neg)
    assert a.fingerprint() == b.fingerprint()


def test_positivity_set():
    grid = np.array(STANDARD_XGRID[-10:])
    pos = PositivitySet("POS", FkTable(np.ones((3, 14, 10)), grid))
    assert pos.n_points == 3
    assert pos.predictions(np.ones((14, 10))).tolist() == [140.0] * 3
    with pytest.raises(ValueError):
        PositivitySet("POS", FkTable(np.ones((3, 14, 9)), grid))


def test_grid_predictions_need_every_fk_node():
    problem = closure_problem("tiny")
    grid = np.unique(np.concatenate([d.xgrid for d in problem.datasets]))
    xf = np.ones((1, grid.size, 14))
    assert grid_predictions(problem, grid, xf).shape == (1, problem.n_data)
    with pytest.raises(ValueError, match="does not hold every FK node"):
        grid_predictions(problem, grid[1:], xf[:, 1:])


def test_experimental_chi2_refuses_predictions_not_shaped_members_by_points():
    problem = closure_problem("tiny")
    total, per_dataset = experimental_chi2(problem, problem.central[None])
    assert total.shape == (1,) and per_dataset.shape == (1, len(problem.datasets))
    for wrong in (problem.central, problem.central[None, None], problem.central[None, 1:]):
        with pytest.raises(ValueError, match=f"predictions must be \\(members, {problem.n_data}"):
            experimental_chi2(problem, wrong)
